// The IO reactor: one thread per process that waits (epoll) for file descriptors that async
// operators await, and for the deadlines of their timers, and activates each waiting operator
// through its SyncActivator when its descriptor turns ready or its deadline passes.
//
// An IoWait lives on the waiting fiber's stack. It is registered with `watch`, and either the
// reactor marks it ready (and forgets it) or its owner `cancel`s it; after `cancel` returns, the
// reactor no longer touches it. A descriptor closed while watched: epoll forgets it without an
// event, so every kClosedDescriptorCheck the reactor re-arms the descriptors it watches, and one
// that the kernel no longer knows (EBADF, or ENOENT: the number now names another file) wakes its
// waiters marked closed.
//
// Timers are cancellable: `add_timer` returns a key, `cancel_timer` forgets it at once. One
// timerfd in the epoll set is armed for the earliest deadline.
//
// Thread safety: thread-safe.

#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"

#include "weir/mutex.h"
#include "weir/worker/activator.h"

namespace weir::internal {

struct IoWait {
  // Marks the result of a descriptor the reactor found closed.
  static constexpr uint32_t kClosed = 1u << 31;

  int fd = -1;
  uint32_t events = 0;  // EPOLLIN or EPOLLOUT.
  SyncActivator activator;
  // What woke the wait: the epoll events that were ready, or kClosed. Set by the reactor before
  // `ready`.
  std::atomic<uint32_t> result{0};
  // Set by the reactor thread. Release/acquire: the fiber that sees it set may drop the wait,
  // and sees `result`.
  std::atomic<bool> ready{false};
};

class Reactor {
 public:
  using Clock = std::chrono::steady_clock;
  using TimerKey = std::pair<Clock::time_point, uint64_t>;

  // The process's reactor, started on first use; it lives until the process exits.
  static Reactor& instance();

  // Starts watching `wait->fd`. Regular files (which epoll refuses) are always ready.
  absl::Status watch(IoWait* wait);
  // Stops watching; afterwards the reactor does not touch `wait`.
  void cancel(IoWait* wait);

  // Activates `activator` once `deadline` passed, unless cancelled first.
  TimerKey add_timer(Clock::time_point deadline, SyncActivator activator);
  void cancel_timer(const TimerKey& key);
  size_t timers() const;

 private:
  Reactor();
  void run();
  // Arms `fd` (one-shot) for the union of its waiters' events, or forgets it when none are
  // left. Returns 0 or the errno of epoll_ctl.
  int arm(int fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes every waiter of `fd` with `result` and forgets them.
  void wake_all(int fd, uint32_t result) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Re-arms every watched descriptor; wakes the waiters of those that were closed.
  void check_closed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Arms the timerfd for the earliest timer (or disarms it).
  void arm_timer() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void fire_timers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  int epoll_fd_ = -1;
  int timer_fd_ = -1;
  mutable weir::Mutex mu_;
  std::unordered_map<int, std::vector<IoWait*>> waiters_ ABSL_GUARDED_BY(mu_);
  // In the epoll set: each descriptor with the registration's number, which its events carry
  // (with the descriptor). The kernel keeps the registration of a closed descriptor whose open
  // file lives on (a dup, a forked child): its events carry an older number and are ignored, so
  // they never wake the waiters of a new file that reuses the descriptor's number.
  std::unordered_map<int, uint32_t> registered_ ABSL_GUARDED_BY(mu_);
  uint32_t next_registration_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<TimerKey, SyncActivator> timers_ ABSL_GUARDED_BY(mu_);
  uint64_t next_timer_ ABSL_GUARDED_BY(mu_) = 0;
  // The deadline the timerfd is armed for (max: disarmed).
  Clock::time_point armed_ ABSL_GUARDED_BY(mu_) = Clock::time_point::max();
  Clock::time_point next_check_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace weir::internal
