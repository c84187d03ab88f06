// CreditGate: flow control for one channel in one process (docs/cluster.md, "Flow control").
//
// Every batch a worker sends on a channel is counted against its destination worker (its
// `slot`): `add` when sent, `release` when the destination worker pulls it from its queue (for
// another process, when that process's credit frame says so). A destination with `window`
// bytes or more outstanding is over its window; while any is, the gate is blocked and the
// scope does not run the operators that send on the channel (they park, and run again once no
// destination is over). Sending itself never blocks or refuses: an operator that is already
// running finishes its run, so a destination holds at most its window plus what one run sends.
//
// What counts: `records * sizeof(record) + kMessageCost` within the process, a batch's payload
// bytes + kMessageCost to another process.
//
// Internal: installed because the channel and scope templates use it; not API.
//
// Thread safety: thread-safe (senders, consumers and the transport's threads at once).

#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "weir/mutex.h"
#include "weir/worker/activator.h"

namespace weir {

// What a batch within the process costs besides its records (the message and its vector).
inline constexpr int64_t kMessageCost = 64;

// An operator that is waiting for a gate to open: activated, once, when it does.
struct GateWaiter {
  explicit GateWaiter(SyncActivator a) : activator(std::move(a)) {}
  SyncActivator activator;
  // In some gate's waiting list. Cleared before the activation, so that the operator, once it
  // runs, may park again.
  std::atomic<bool> parked{false};
};

class CreditGate {
 public:
  // `slots` destinations; a destination is over its window at `window` bytes (> 0).
  CreditGate(size_t slots, int64_t window) : window_(window), outstanding_(slots) {}
  CreditGate(const CreditGate&) = delete;
  CreditGate& operator=(const CreditGate&) = delete;

  // `bytes` sent to `slot`.
  void add(size_t slot, int64_t bytes) {
    const int64_t before = outstanding_[slot].value.fetch_add(bytes, std::memory_order_relaxed);
    if (before < window_ && before + bytes >= window_) [[unlikely]] {
      crossed(+1);
    }
  }
  // `bytes` sent to `slot` were consumed there.
  void release(size_t slot, int64_t bytes) {
    const int64_t before = outstanding_[slot].value.fetch_sub(bytes, std::memory_order_relaxed);
    if (before >= window_ && before - bytes < window_) [[unlikely]] {
      crossed(-1);
    }
  }

  // A credit frame's `bytes` for `slot`, a worker of the process that sent it: refused (false,
  // nothing released) if more than is outstanding there, which no honest peer returns. Only that
  // peer's link releases the slot, so the check and the release do not race with another
  // release.
  bool release_returned(size_t slot, int64_t bytes) {
    if (bytes > outstanding_[slot].value.load(std::memory_order_relaxed)) return false;
    release(slot, bytes);
    return true;
  }

  // True while some destination is over its window.
  bool blocked() const { return over_.load(std::memory_order_acquire) > 0; }

  // Adds `waiter` to be activated when no destination is over its window. False (and nothing
  // added) if none is now.
  bool park(const std::shared_ptr<GateWaiter>& waiter) {
    weir::MutexLock lock(mu_);
    if (over_.load(std::memory_order_relaxed) <= 0) return false;
    waiters_.push_back(waiter);
    return true;
  }

  size_t slots() const { return outstanding_.size(); }
  int64_t window() const { return window_; }
  // Diagnostics: bytes outstanding at `slot`.
  int64_t outstanding(size_t slot) const {
    return outstanding_[slot].value.load(std::memory_order_relaxed);
  }

 private:
  // One counter per cache line: destinations are counted by different threads.
  struct alignas(64) Counter {
    std::atomic<int64_t> value{0};
  };

  // A destination went over (+1) or back under (-1) its window. Crossings are exact (each one
  // is seen by the one read-modify-write that made it), but they may reach here out of order,
  // so `over_` can read one low for a moment; it is exact once they all have. Waiters are
  // woken whenever it falls to zero or below, so none is left waiting once nothing is over.
  void crossed(int delta) {
    std::vector<std::shared_ptr<GateWaiter>> wake;
    {
      weir::MutexLock lock(mu_);
      const int now = over_.load(std::memory_order_relaxed) + delta;
      over_.store(now, std::memory_order_release);
      if (delta < 0 && now <= 0) wake.swap(waiters_);
    }
    for (const auto& waiter : wake) {
      waiter->parked.store(false, std::memory_order_release);
      waiter->activator.activate();
    }
  }

  const int64_t window_;
  std::vector<Counter> outstanding_;
  std::atomic<int> over_{0};  // Destinations over their window (written under mu_).
  weir::Mutex mu_;
  std::vector<std::shared_ptr<GateWaiter>> waiters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace weir
