#include "weir/persist/consensus.h"

#include "consensus_stores.h"
#include "str_cat.h"
#include "url.h"

namespace weir::persist {
namespace internal {

absl::Status check_next_seqno(std::string_view key, std::optional<uint64_t> expected_seqno,
                              uint64_t new_seqno) {
  if (new_seqno != expected_seqno.value_or(0) + 1) {
    return absl::InvalidArgumentError(internal::str_cat(
        "consensus key \"", key, "\": new seqno ", new_seqno, " does not follow the expected head ",
        expected_seqno ? std::to_string(*expected_seqno) : "(none)"));
  }
  return absl::OkStatus();
}

}  // namespace internal

absl::StatusOr<std::unique_ptr<Consensus>> Consensus::open(std::string_view url) {
  const std::optional<internal::Url> parsed = internal::split_url(url);
  if (parsed && parsed->scheme == "mem") {
    return internal::open_mem_consensus(std::string(parsed->rest));
  }
  if (parsed && parsed->scheme == "sqlite") {
    if (parsed->rest.empty()) {
      return absl::InvalidArgumentError(
          internal::str_cat("consensus URL \"", url, "\" names no file"));
    }
    return internal::open_sqlite_consensus(std::string(parsed->rest));
  }
  if (parsed && (parsed->scheme == "postgres" || parsed->scheme == "postgresql")) {
    return internal::open_postgres_consensus(std::string(url));
  }
  return absl::InvalidArgumentError(
      internal::str_cat("unsupported consensus URL \"", url,
                        "\": expected sqlite:///PATH, postgres://... or mem://[NAME]"));
}

}  // namespace weir::persist
