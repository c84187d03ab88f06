#include "weir/persist/faults.h"

#include <thread>

#include "str_cat.h"

#include "weir/status.h"

namespace weir::persist {
namespace internal {

FaultDice::FaultDice(const FaultConfig& config) : config_(config), state_(config.seed) {}

void FaultDice::configure(const FaultConfig& config) {
  weir::MutexLock lock(mu_);
  config_ = config;
}

double FaultDice::draw() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
  // splitmix64: every call draws the next number of the seed's sequence.
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

absl::Status FaultDice::before(std::string_view what, std::string_view key) {
  ++counts_.calls;
  std::chrono::microseconds delay{0};
  bool fail = false;
  {
    weir::MutexLock lock(mu_);
    if (config_.delay_rate > 0 && draw() < config_.delay_rate) {
      delay = std::chrono::duration_cast<std::chrono::microseconds>(config_.max_delay * draw());
    }
    fail = config_.fail_rate > 0 && draw() < config_.fail_rate;
  }
  if (delay.count() > 0) {
    ++counts_.delayed;
    std::this_thread::sleep_for(delay);
  }
  if (fail) {
    ++counts_.failed;
    return absl::UnavailableError(
        internal::str_cat("injected fault: ", what, " \"", key, "\" failed"));
  }
  return absl::OkStatus();
}

absl::Status FaultDice::after_write(std::string_view what, std::string_view key) {
  bool lost = false;
  {
    weir::MutexLock lock(mu_);
    lost = config_.indeterminate_rate > 0 && draw() < config_.indeterminate_rate;
  }
  if (!lost) {
    return absl::OkStatus();
  }
  ++counts_.indeterminate;
  return absl::UnavailableError(internal::str_cat("injected fault: ", what, " \"", key,
                                                  "\" went through, and its reply was lost"));
}

}  // namespace internal

FaultyBlob::FaultyBlob(std::shared_ptr<Blob> inner, const FaultConfig& config)
    : inner_(std::move(inner)), dice_(config) {}

absl::StatusOr<std::optional<std::string>> FaultyBlob::get(std::string_view key) {
  WEIR_RETURN_IF_ERROR(dice_.before("blob get", key));
  return inner_->get(key);
}

absl::Status FaultyBlob::set(std::string_view key, std::string_view value) {
  WEIR_RETURN_IF_ERROR(dice_.before("blob set", key));
  WEIR_RETURN_IF_ERROR(inner_->set(key, value));
  return dice_.after_write("blob set", key);
}

absl::Status FaultyBlob::remove(std::string_view key) {
  WEIR_RETURN_IF_ERROR(dice_.before("blob remove", key));
  WEIR_RETURN_IF_ERROR(inner_->remove(key));
  return dice_.after_write("blob remove", key);
}

absl::StatusOr<std::vector<BlobMetadata>> FaultyBlob::list_keys(std::string_view prefix) {
  WEIR_RETURN_IF_ERROR(dice_.before("blob list", prefix));
  return inner_->list_keys(prefix);
}

FaultyConsensus::FaultyConsensus(std::shared_ptr<Consensus> inner, const FaultConfig& config)
    : inner_(std::move(inner)), dice_(config) {}

absl::StatusOr<std::optional<VersionedData>> FaultyConsensus::head(std::string_view key) {
  WEIR_RETURN_IF_ERROR(dice_.before("consensus head", key));
  return inner_->head(key);
}

absl::StatusOr<CasResult> FaultyConsensus::compare_and_set(std::string_view key,
                                                           std::optional<uint64_t> expected_seqno,
                                                           const VersionedData& new_version) {
  WEIR_RETURN_IF_ERROR(dice_.before("consensus compare_and_set", key));
  WEIR_ASSIGN_OR_RETURN(const CasResult result,
                        inner_->compare_and_set(key, expected_seqno, new_version));
  WEIR_RETURN_IF_ERROR(dice_.after_write("consensus compare_and_set", key));
  return result;
}

absl::StatusOr<std::vector<VersionedData>> FaultyConsensus::scan(std::string_view key,
                                                                 uint64_t from_seqno,
                                                                 size_t limit) {
  WEIR_RETURN_IF_ERROR(dice_.before("consensus scan", key));
  return inner_->scan(key, from_seqno, limit);
}

absl::StatusOr<size_t> FaultyConsensus::truncate(std::string_view key, uint64_t seqno) {
  WEIR_RETURN_IF_ERROR(dice_.before("consensus truncate", key));
  WEIR_ASSIGN_OR_RETURN(const size_t removed, inner_->truncate(key, seqno));
  WEIR_RETURN_IF_ERROR(dice_.after_write("consensus truncate", key));
  return removed;
}

}  // namespace weir::persist
