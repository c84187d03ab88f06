// Activation: asking the worker to schedule an operator (identified by its path: dataflow index,
// then operator indices through nested scopes).
//
// - Activations: the worker-local set of pending activations, compacted once per step.
// - Activator: activates one operator from the worker's own thread.
// - SyncActivator: activates one operator from any thread and unparks the worker.
// - Parker: lets an idle worker sleep until something arrives.
//
// Thread safety: Activations and Activator are worker-local; SyncActivationQueue, SyncActivator
// and Parker are thread-safe.

#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "weir/mutex.h"

namespace weir {

// Pending activations, as paths. `advance` makes the pending set current (sorted, deduplicated);
// `for_extensions` walks the current paths below a prefix.
class Activations {
 public:
  void activate(std::span<const size_t> path) {
    bounds_.emplace_back(slices_.size(), path.size());
    slices_.insert(slices_.end(), path.begin(), path.end());
  }

  // Makes every activation requested since the last call current.
  void advance();

  // Calls f(index) once for each distinct child index i such that some current path extends
  // `prefix` with i.
  template <class F>
  void for_extensions(std::span<const size_t> prefix, F&& f) const {
    // Current paths are sorted: find the range that starts with `prefix`.
    size_t lo = 0, hi = current_.size();
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (compare(path(current_[mid]), prefix) < 0) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    bool have_last = false;
    size_t last = 0;
    for (size_t i = lo; i < current_.size(); ++i) {
      auto p = path(current_[i]);
      if (p.size() < prefix.size() || !std::equal(prefix.begin(), prefix.end(), p.begin())) break;
      if (p.size() == prefix.size()) continue;
      size_t child = p[prefix.size()];
      if (!have_last || child != last) {
        f(child);
        have_last = true;
        last = child;
      }
    }
  }

  bool empty() const { return bounds_.empty(); }
  bool current_empty() const { return current_.empty(); }

 private:
  using Bound = std::pair<size_t, size_t>;  // (offset, length) in the slice store
  std::span<const size_t> path(const Bound& b) const {
    return std::span<const size_t>(current_slices_).subspan(b.first, b.second);
  }
  static int compare(std::span<const size_t> a, std::span<const size_t> b);

  std::vector<size_t> slices_;
  std::vector<Bound> bounds_;
  std::vector<size_t> current_slices_;
  std::vector<Bound> current_;
};

// Same-thread activation of one operator.
//
// Note: the worker's Activations must outlive the activator.
class Activator {
 public:
  Activator(Activations* activations, std::vector<size_t> path)
      : activations_(activations), path_(std::move(path)) {}
  void activate() const { activations_->activate(path_); }
  std::span<const size_t> path() const { return path_; }

 private:
  Activations* activations_;
  std::vector<size_t> path_;
};

// Puts an idle thread to sleep until unparked or a timeout.
class Parker {
 public:
  // Sleeps until `unpark` (possibly one that happened since the last park) or the timeout.
  void park(std::optional<std::chrono::nanoseconds> timeout);
  void unpark();

 private:
  weir::Mutex mu_;
  weir::CondVar cv_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
  // Seq-cst flag read by unpark without the lock: true while the thread may be sleeping.
  std::atomic<bool> parked_{false};
  friend class SyncActivationQueue;
};

// The thread-safe side door into one worker's activations.
class SyncActivationQueue {
 public:
  void activate(std::span<const size_t> path);
  // Wakes the worker without activating anything (it will notice failures, timers, shutdown).
  void wake() { parker_.unpark(); }
  // Moves the queued activations into `into`. Returns true if there were any.
  bool drain_into(Activations& into);
  // True if activations are queued. A seq-cst read, checked before parking.
  bool has_pending() const { return pending_.load(); }

  // Parks the owning worker's thread unless activations are pending or `busy()` returns true.
  // Wakes on `activate`, `wake` or the timeout.
  template <class F>
  void park_unless(std::optional<std::chrono::nanoseconds> timeout, F&& busy) {
    parker_.parked_.store(true);
    if (!pending_.load() && !busy()) parker_.park(timeout);
    parker_.parked_.store(false);
  }

 private:
  weir::Mutex mu_;
  std::vector<size_t> slices_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> lengths_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> scratch_slices_;
  std::vector<size_t> scratch_lengths_;
  std::atomic<bool> pending_{false};
  Parker parker_;
};

// Activates one operator of a worker from any thread.
class SyncActivator {
 public:
  SyncActivator() = default;
  SyncActivator(std::shared_ptr<SyncActivationQueue> queue, std::vector<size_t> path)
      : queue_(std::move(queue)), path_(std::move(path)) {}
  void activate() const {
    if (queue_) queue_->activate(path_);
  }
  explicit operator bool() const { return queue_ != nullptr; }

 private:
  std::shared_ptr<SyncActivationQueue> queue_;
  std::vector<size_t> path_;
};

}  // namespace weir
