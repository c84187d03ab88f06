#include "weir/sources/source.h"

#include <algorithm>

namespace weir::sources {

absl::StatusOr<ProgressMode> parse_progress_mode(std::string_view text) {
  if (text == "concurrent") return ProgressMode::kConcurrent;
  if (text == "serial") return ProgressMode::kSerial;
  return absl::InvalidArgumentError("unknown progress mode '" + std::string(text) +
                                    "': expected 'concurrent' or 'serial'");
}

std::string_view to_string(ProgressMode mode) {
  return mode == ProgressMode::kConcurrent ? "concurrent" : "serial";
}

std::string_view to_string(Health health) {
  switch (health) {
    case Health::kStarting:
      return "starting";
    case Health::kRunning:
      return "running";
    case Health::kStalled:
      return "stalled";
    case Health::kCeased:
      return "ceased";
  }
  return "unknown";
}

bool HealthAggregator::apply(const HealthUpdate& update) {
  if (update.export_index >= per_worker_.size() ||
      update.worker >= per_worker_[update.export_index].size() / 2) {
    return false;
  }
  const Health before = status(update.export_index);
  const std::string before_error = errors_[update.export_index];
  per_worker_[update.export_index][2 * size_t{update.worker} + (update.snapshot ? 1 : 0)] =
      update.status;
  if (update.status == Health::kStalled) errors_[update.export_index] = update.error;
  return status(update.export_index) != before || errors_[update.export_index] != before_error;
}

Health HealthAggregator::status(size_t export_index) const {
  const auto& workers = per_worker_[export_index];
  auto any = [&](Health h) {
    return std::find(workers.begin(), workers.end(), h) != workers.end();
  };
  if (any(Health::kStalled)) return Health::kStalled;
  if (any(Health::kStarting)) return Health::kStarting;
  // Ceased once every worker's change stream has ended (each worker emits its own offsets).
  for (size_t stream = 0; stream < workers.size(); stream += 2) {
    if (workers[stream] != Health::kCeased) return Health::kRunning;
  }
  return Health::kCeased;
}

void SourceStats::record_upstream(uint64_t offset, std::chrono::steady_clock::time_point when) {
  upstream_.store(offset, std::memory_order_relaxed);
  weir::MutexLock lock(mu_);
  if (!history_.empty() && history_.back().first >= offset) return;
  history_.emplace_back(offset, when);
  while (history_.size() > 1'000'000) history_.pop_front();
}

std::optional<std::chrono::steady_clock::time_point> SourceStats::reached(uint64_t offset) const {
  weir::MutexLock lock(mu_);
  auto it = std::lower_bound(history_.begin(), history_.end(), offset,
                             [](const auto& entry, uint64_t o) { return entry.first < o; });
  if (it == history_.end()) return std::nullopt;
  return it->second;
}

}  // namespace weir::sources
