// ForwardingConsensus: a persist Consensus that passes every call to another, for tests to
// override the calls they change (a compare-and-set that waits, fails or interposes). Header-only:
// the binaries that include it link weir_persist.

#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

#include "weir/persist/consensus.h"

namespace weir::testing {

class ForwardingConsensus : public persist::Consensus {
 public:
  explicit ForwardingConsensus(std::shared_ptr<persist::Consensus> inner)
      : inner_(std::move(inner)) {}
  absl::StatusOr<std::optional<persist::VersionedData>> head(std::string_view key) override {
    return inner_->head(key);
  }
  absl::StatusOr<persist::CasResult> compare_and_set(
      std::string_view key, std::optional<uint64_t> expected_seqno,
      const persist::VersionedData& new_version) override {
    return inner_->compare_and_set(key, expected_seqno, new_version);
  }
  absl::StatusOr<std::vector<persist::VersionedData>> scan(std::string_view key,
                                                           uint64_t from_seqno,
                                                           size_t limit) override {
    return inner_->scan(key, from_seqno, limit);
  }
  absl::StatusOr<size_t> truncate(std::string_view key, uint64_t seqno) override {
    return inner_->truncate(key, seqno);
  }

 protected:
  std::shared_ptr<persist::Consensus> inner_;
};

}  // namespace weir::testing
