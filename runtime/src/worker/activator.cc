#include "weir/worker/activator.h"

#include <algorithm>
#include <numeric>

namespace weir {

int Activations::compare(std::span<const size_t> a, std::span<const size_t> b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  }
  if (a.size() == b.size()) return 0;
  return a.size() < b.size() ? -1 : 1;
}

void Activations::advance() {
  std::swap(slices_, current_slices_);
  std::swap(bounds_, current_);
  slices_.clear();
  bounds_.clear();
  if (current_.size() > 1) {
    std::sort(current_.begin(), current_.end(),
              [this](const Bound& a, const Bound& b) { return compare(path(a), path(b)) < 0; });
    current_.erase(std::unique(current_.begin(), current_.end(),
                               [this](const Bound& a, const Bound& b) {
                                 return compare(path(a), path(b)) == 0;
                               }),
                   current_.end());
  }
}

void Parker::park(std::optional<std::chrono::nanoseconds> timeout) {
  weir::MutexLock lock(mu_);
  if (timeout) {
    const auto deadline = std::chrono::steady_clock::now() + *timeout;
    while (!notified_ && cv_.wait_until(mu_, deadline)) {
    }
  } else {
    while (!notified_) cv_.wait(mu_);
  }
  notified_ = false;
}

void Parker::unpark() {
  {
    weir::MutexLock lock(mu_);
    notified_ = true;
  }
  cv_.notify_one();
}

void SyncActivationQueue::activate(std::span<const size_t> path) {
  {
    weir::MutexLock lock(mu_);
    slices_.insert(slices_.end(), path.begin(), path.end());
    lengths_.push_back(path.size());
    pending_.store(true);
  }
  // The worker sets `parked_` before its last check of `pending_`; both are seq-cst, so either it
  // sees our activation or we see it parked.
  if (parker_.parked_.load()) parker_.unpark();
}

bool SyncActivationQueue::drain_into(Activations& into) {
  if (!pending_.load()) return false;
  {
    weir::MutexLock lock(mu_);
    std::swap(slices_, scratch_slices_);
    std::swap(lengths_, scratch_lengths_);
    pending_.store(false);
  }
  size_t offset = 0;
  for (size_t len : scratch_lengths_) {
    into.activate(std::span<const size_t>(scratch_slices_).subspan(offset, len));
    offset += len;
  }
  scratch_slices_.clear();
  scratch_lengths_.clear();
  return true;
}

}  // namespace weir
