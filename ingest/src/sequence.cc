#include "weir/ingest/sequence.h"

#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include <unistd.h>

#include "weir/status.h"

namespace weir::ingest {

absl::StatusOr<uint64_t> take_sequence_number(persist::PersistClient& client,
                                              const std::string& shard,
                                              absl::FunctionRef<std::string(uint64_t)> row) {
  WEIR_ASSIGN_OR_RETURN(auto writer, client.open_writer(shard, "sequence number"));
  // On every path: a writer left registered would stay in the shard for its whole lease.
  absl::Cleanup expire = [&writer] { (void)writer.expire(); };
  for (int attempt = 0; attempt < 100; ++attempt) {
    WEIR_ASSIGN_OR_RETURN(const persist::Frontier upper, writer.fetch_recent_upper());
    if (upper.is_empty()) {
      return absl::FailedPreconditionError(absl::StrCat("sequence shard ", shard, " is closed"));
    }
    const uint64_t n = upper.time();
    const std::vector<persist::Update> rows{{row(n), n, 1}};
    WEIR_ASSIGN_OR_RETURN(
        const persist::AppendResult result,
        writer.compare_and_append(rows, persist::Frontier(n), persist::Frontier(n + 1)));
    if (result.is_appended()) {
      // One batch per number: compaction keeps reads of the shard to a few parts, GC its state
      // small. The number is taken whatever this says; a later taker tries again.
      if (result.maintenance_due) (void)client.maintain(shard);
      return n;
    }
  }
  return absl::AbortedError(
      absl::StrCat("could not take a number: too much contention on ", shard));
}

std::string process_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat(host[0] != '\0' ? host : "?", ":", ::getpid());
}

}  // namespace weir::ingest
