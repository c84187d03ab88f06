// Fault injection: Blob and Consensus wrappers that fail, delay, or do the work and then report a
// failure, at configurable rates. Tests use them to check that persist loses and duplicates
// nothing whatever its stores do; `weir ingest --inject-faults RATE` uses them for soak runs.
//
// Every injected failure is Unavailable and says it was injected. An indeterminate one is the
// failure a lost reply causes: the write (set, remove, compare_and_set, truncate) went through,
// and the caller cannot tell.

#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "weir/mutex.h"
#include "weir/persist/blob.h"
#include "weir/persist/consensus.h"

namespace weir::persist {

struct FaultConfig {
  double fail_rate = 0;           // Fails before reaching the store.
  double indeterminate_rate = 0;  // Writes only: reaches the store, then fails.
  double delay_rate = 0;          // Sleeps up to max_delay before the call.
  std::chrono::milliseconds max_delay{0};
  uint64_t seed = 0;  // The same seed draws the same faults for the same sequence of calls.
};

// What a wrapper injected so far.
struct FaultCounts {
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> indeterminate{0};
  std::atomic<uint64_t> delayed{0};
};

namespace internal {
// The draws shared by both wrappers.
class FaultDice {
 public:
  explicit FaultDice(const FaultConfig& config);
  void configure(const FaultConfig& config);
  // Sleeps if a delay is drawn; returns an error if a failure is drawn.
  absl::Status before(std::string_view what, std::string_view key);
  // After a write that succeeded: an error if an indeterminate outcome is drawn.
  absl::Status after_write(std::string_view what, std::string_view key);
  const FaultCounts& counts() const { return counts_; }

 private:
  double draw();

  weir::Mutex mu_;
  FaultConfig config_ ABSL_GUARDED_BY(mu_);
  uint64_t state_ ABSL_GUARDED_BY(mu_);
  FaultCounts counts_;
};
}  // namespace internal

class FaultyBlob final : public Blob {
 public:
  FaultyBlob(std::shared_ptr<Blob> inner, const FaultConfig& config);
  // Changes the rates from the next call on.
  void configure(const FaultConfig& config) { dice_.configure(config); }
  const FaultCounts& counts() const { return dice_.counts(); }

  absl::StatusOr<std::optional<std::string>> get(std::string_view key) override;
  absl::Status set(std::string_view key, std::string_view value) override;
  absl::Status remove(std::string_view key) override;
  absl::StatusOr<std::vector<BlobMetadata>> list_keys(std::string_view prefix) override;

 private:
  std::shared_ptr<Blob> inner_;
  internal::FaultDice dice_;
};

class FaultyConsensus final : public Consensus {
 public:
  FaultyConsensus(std::shared_ptr<Consensus> inner, const FaultConfig& config);
  void configure(const FaultConfig& config) { dice_.configure(config); }
  const FaultCounts& counts() const { return dice_.counts(); }

  absl::StatusOr<std::optional<VersionedData>> head(std::string_view key) override;
  absl::StatusOr<CasResult> compare_and_set(std::string_view key,
                                            std::optional<uint64_t> expected_seqno,
                                            const VersionedData& new_version) override;
  absl::StatusOr<std::vector<VersionedData>> scan(std::string_view key, uint64_t from_seqno,
                                                  size_t limit) override;
  absl::StatusOr<size_t> truncate(std::string_view key, uint64_t seqno) override;

 private:
  std::shared_ptr<Consensus> inner_;
  internal::FaultDice dice_;
};

}  // namespace weir::persist
