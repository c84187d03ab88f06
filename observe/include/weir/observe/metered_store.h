// MeteredBlob and MeteredConsensus: persist's stores, counted. They pass every call through to
// the store they wrap and count calls, bytes, failures and compare-and-set mismatches, with a
// latency histogram per kind of call, for /metrics.
//
//   auto metrics = std::make_shared<weir::observe::PersistMetrics>();
//   options.blob = std::make_shared<MeteredBlob>(std::move(blob), metrics);
//   options.consensus = std::make_shared<MeteredConsensus>(std::move(consensus), metrics);
//
// Thread safety: as thread-safe as the wrapped store; PersistMetrics is read from any thread.

#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>

#include "weir/persist/blob.h"
#include "weir/persist/consensus.h"

namespace weir::observe {

// Latencies in fixed buckets (upper bounds kBounds, in seconds, then +Inf), lock-free.
class LatencyHistogram {
 public:
  static constexpr std::array<double, 14> kBounds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5};
  void observe(std::chrono::nanoseconds latency);
  // Cumulative counts per bound (the last: every observation), and the sum in seconds.
  std::array<uint64_t, kBounds.size() + 1> cumulative() const;
  double sum_seconds() const;

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets_{};
  std::atomic<uint64_t> sum_ns_{0};
};

struct PersistMetrics {
  std::atomic<uint64_t> blob_gets{0}, blob_sets{0}, blob_removes{0}, blob_lists{0};
  std::atomic<uint64_t> blob_bytes_read{0}, blob_bytes_written{0};
  std::atomic<uint64_t> blob_failures{0};
  std::atomic<uint64_t> consensus_heads{0}, consensus_cas{0}, consensus_scans{0},
      consensus_truncates{0};
  // A compare-and-set that found another head: its caller re-reads the state and retries.
  std::atomic<uint64_t> consensus_cas_mismatches{0};
  std::atomic<uint64_t> consensus_failures{0};
  std::atomic<uint64_t> consensus_bytes_written{0};
  LatencyHistogram blob_get_latency, blob_set_latency, consensus_cas_latency,
      consensus_head_latency;
};

class MeteredBlob final : public persist::Blob {
 public:
  MeteredBlob(std::shared_ptr<persist::Blob> inner, std::shared_ptr<PersistMetrics> metrics);
  absl::StatusOr<std::optional<std::string>> get(std::string_view key) override;
  absl::Status set(std::string_view key, std::string_view value) override;
  absl::Status remove(std::string_view key) override;
  absl::StatusOr<std::vector<persist::BlobMetadata>> list_keys(std::string_view prefix) override;

 private:
  std::shared_ptr<persist::Blob> inner_;
  std::shared_ptr<PersistMetrics> metrics_;
};

class MeteredConsensus final : public persist::Consensus {
 public:
  MeteredConsensus(std::shared_ptr<persist::Consensus> inner,
                   std::shared_ptr<PersistMetrics> metrics);
  absl::StatusOr<std::optional<persist::VersionedData>> head(std::string_view key) override;
  absl::StatusOr<persist::CasResult> compare_and_set(
      std::string_view key, std::optional<uint64_t> expected_seqno,
      const persist::VersionedData& new_version) override;
  absl::StatusOr<std::vector<persist::VersionedData>> scan(std::string_view key,
                                                           uint64_t from_seqno,
                                                           size_t limit) override;
  absl::StatusOr<size_t> truncate(std::string_view key, uint64_t seqno) override;

 private:
  std::shared_ptr<persist::Consensus> inner_;
  std::shared_ptr<PersistMetrics> metrics_;
};

}  // namespace weir::observe
