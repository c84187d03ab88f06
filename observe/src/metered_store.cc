#include "weir/observe/metered_store.h"

#include <algorithm>
#include <utility>

namespace weir::observe {
namespace {

using Clock = std::chrono::steady_clock;

// Times one call into `histogram` (if given) and counts a failed one.
template <class F>
auto timed(LatencyHistogram* histogram, std::atomic<uint64_t>& failures, F&& call) {
  const auto start = Clock::now();
  auto result = call();
  if (histogram != nullptr) histogram->observe(Clock::now() - start);
  if (!result.ok()) failures.fetch_add(1, std::memory_order_relaxed);
  return result;
}

}  // namespace

void LatencyHistogram::observe(std::chrono::nanoseconds latency) {
  const double seconds = std::chrono::duration<double>(latency).count();
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(kBounds.begin(), kBounds.end(), seconds) - kBounds.begin());
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(std::max<int64_t>(latency.count(), 0)),
                    std::memory_order_relaxed);
}

std::array<uint64_t, LatencyHistogram::kBounds.size() + 1> LatencyHistogram::cumulative() const {
  std::array<uint64_t, kBounds.size() + 1> result{};
  uint64_t total = 0;
  for (size_t i = 0; i < result.size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
    result[i] = total;
  }
  return result;
}

double LatencyHistogram::sum_seconds() const {
  return static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
}

MeteredBlob::MeteredBlob(std::shared_ptr<persist::Blob> inner,
                         std::shared_ptr<PersistMetrics> metrics)
    : inner_(std::move(inner)), metrics_(std::move(metrics)) {}

absl::StatusOr<std::optional<std::string>> MeteredBlob::get(std::string_view key) {
  metrics_->blob_gets.fetch_add(1, std::memory_order_relaxed);
  auto result =
      timed(&metrics_->blob_get_latency, metrics_->blob_failures, [&] { return inner_->get(key); });
  if (result.ok() && result->has_value()) {
    metrics_->blob_bytes_read.fetch_add((*result)->size(), std::memory_order_relaxed);
  }
  return result;
}

absl::Status MeteredBlob::set(std::string_view key, std::string_view value) {
  metrics_->blob_sets.fetch_add(1, std::memory_order_relaxed);
  absl::Status status = timed(&metrics_->blob_set_latency, metrics_->blob_failures,
                              [&] { return inner_->set(key, value); });
  if (status.ok()) metrics_->blob_bytes_written.fetch_add(value.size(), std::memory_order_relaxed);
  return status;
}

absl::Status MeteredBlob::remove(std::string_view key) {
  metrics_->blob_removes.fetch_add(1, std::memory_order_relaxed);
  return timed(nullptr, metrics_->blob_failures, [&] { return inner_->remove(key); });
}

absl::StatusOr<std::vector<persist::BlobMetadata>> MeteredBlob::list_keys(std::string_view prefix) {
  metrics_->blob_lists.fetch_add(1, std::memory_order_relaxed);
  return timed(nullptr, metrics_->blob_failures, [&] { return inner_->list_keys(prefix); });
}

MeteredConsensus::MeteredConsensus(std::shared_ptr<persist::Consensus> inner,
                                   std::shared_ptr<PersistMetrics> metrics)
    : inner_(std::move(inner)), metrics_(std::move(metrics)) {}

absl::StatusOr<std::optional<persist::VersionedData>> MeteredConsensus::head(std::string_view key) {
  metrics_->consensus_heads.fetch_add(1, std::memory_order_relaxed);
  return timed(&metrics_->consensus_head_latency, metrics_->consensus_failures,
               [&] { return inner_->head(key); });
}

absl::StatusOr<persist::CasResult> MeteredConsensus::compare_and_set(
    std::string_view key, std::optional<uint64_t> expected_seqno,
    const persist::VersionedData& new_version) {
  metrics_->consensus_cas.fetch_add(1, std::memory_order_relaxed);
  auto result = timed(&metrics_->consensus_cas_latency, metrics_->consensus_failures,
                      [&] { return inner_->compare_and_set(key, expected_seqno, new_version); });
  if (result.ok()) {
    if (*result == persist::CasResult::kExpectationMismatch) {
      metrics_->consensus_cas_mismatches.fetch_add(1, std::memory_order_relaxed);
    } else {
      metrics_->consensus_bytes_written.fetch_add(new_version.data.size(),
                                                  std::memory_order_relaxed);
    }
  }
  return result;
}

absl::StatusOr<std::vector<persist::VersionedData>> MeteredConsensus::scan(std::string_view key,
                                                                           uint64_t from_seqno,
                                                                           size_t limit) {
  metrics_->consensus_scans.fetch_add(1, std::memory_order_relaxed);
  return timed(nullptr, metrics_->consensus_failures,
               [&] { return inner_->scan(key, from_seqno, limit); });
}

absl::StatusOr<size_t> MeteredConsensus::truncate(std::string_view key, uint64_t seqno) {
  metrics_->consensus_truncates.fetch_add(1, std::memory_order_relaxed);
  return timed(nullptr, metrics_->consensus_failures, [&] { return inner_->truncate(key, seqno); });
}

}  // namespace weir::observe
