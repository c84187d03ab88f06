// An in-memory Consensus for tests (mem:// URLs).

#include <map>

#include "absl/container/flat_hash_map.h"
#include "consensus_stores.h"
#include "str_cat.h"

#include "weir/mutex.h"
#include "weir/status.h"

namespace weir::persist::internal {
namespace {

struct MemStore {
  weir::Mutex mu;
  // key -> seqno -> data.
  std::map<std::string, std::map<uint64_t, std::string>, std::less<>> versions ABSL_GUARDED_BY(mu);
};

class MemConsensus final : public Consensus {
 public:
  explicit MemConsensus(std::shared_ptr<MemStore> store) : store_(std::move(store)) {}

  absl::StatusOr<std::optional<VersionedData>> head(std::string_view key) override {
    weir::MutexLock lock(store_->mu);
    auto it = store_->versions.find(key);
    if (it == store_->versions.end() || it->second.empty()) {
      return std::nullopt;
    }
    const auto& [seqno, data] = *it->second.rbegin();
    return VersionedData{seqno, data};
  }

  absl::StatusOr<CasResult> compare_and_set(std::string_view key,
                                            std::optional<uint64_t> expected_seqno,
                                            const VersionedData& new_version) override {
    WEIR_RETURN_IF_ERROR(check_next_seqno(key, expected_seqno, new_version.seqno));
    weir::MutexLock lock(store_->mu);
    auto& versions = store_->versions[std::string(key)];
    const std::optional<uint64_t> current =
        versions.empty() ? std::nullopt : std::optional(versions.rbegin()->first);
    if (current != expected_seqno) {
      return CasResult::kExpectationMismatch;
    }
    versions.emplace(new_version.seqno, new_version.data);
    return CasResult::kCommitted;
  }

  absl::StatusOr<std::vector<VersionedData>> scan(std::string_view key, uint64_t from_seqno,
                                                  size_t limit) override {
    weir::MutexLock lock(store_->mu);
    std::vector<VersionedData> result;
    auto it = store_->versions.find(key);
    if (it == store_->versions.end()) {
      return result;
    }
    for (auto v = it->second.lower_bound(from_seqno);
         v != it->second.end() && result.size() < limit; ++v) {
      result.push_back({v->first, v->second});
    }
    return result;
  }

  absl::StatusOr<size_t> truncate(std::string_view key, uint64_t seqno) override {
    weir::MutexLock lock(store_->mu);
    auto it = store_->versions.find(key);
    if (it == store_->versions.end() || it->second.empty() || it->second.rbegin()->first < seqno) {
      return absl::FailedPreconditionError(internal::str_cat(
          "consensus key \"", key, "\": cannot truncate to seqno ", seqno, ", beyond the head"));
    }
    auto& versions = it->second;
    const auto end = versions.lower_bound(seqno);
    const size_t deleted = static_cast<size_t>(std::distance(versions.begin(), end));
    versions.erase(versions.begin(), end);
    return deleted;
  }

 private:
  std::shared_ptr<MemStore> store_;  // Shared with other MemConsensus of the same name.
};

}  // namespace

std::unique_ptr<Consensus> open_mem_consensus(const std::string& name) {
  if (name.empty()) {
    return std::make_unique<MemConsensus>(std::make_shared<MemStore>());
  }
  static weir::Mutex registry_mu;
  static auto* registry = new absl::flat_hash_map<std::string, std::shared_ptr<MemStore>>();
  weir::MutexLock lock(registry_mu);
  std::shared_ptr<MemStore>& store = (*registry)[name];
  if (store == nullptr) {
    store = std::make_shared<MemStore>();
  }
  return std::make_unique<MemConsensus>(store);
}

}  // namespace weir::persist::internal
