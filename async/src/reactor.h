// The IO reactor: one thread per process that waits (epoll) for file descriptors that async
// operators await, and activates each waiting operator through its SyncActivator when its
// descriptor turns ready.
//
// An IoWait lives on the waiting fiber's stack. It is registered with `watch`, and either the
// reactor marks it ready (and forgets it) or its owner `cancel`s it; after `cancel` returns, the
// reactor no longer touches it.
//
// Thread safety: thread-safe.

#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"

#include "weir/mutex.h"
#include "weir/worker/activator.h"

namespace weir::internal {

struct IoWait {
  int fd = -1;
  uint32_t events = 0;  // EPOLLIN or EPOLLOUT.
  SyncActivator activator;
  // Set by the reactor thread. Release/acquire: the fiber that sees it set may drop the wait.
  std::atomic<bool> ready{false};
};

class Reactor {
 public:
  // The process's reactor, started on first use; it lives until the process exits.
  static Reactor& instance();

  // Starts watching `wait->fd`. Regular files (which epoll refuses) are always ready.
  absl::Status watch(IoWait* wait);
  // Stops watching; afterwards the reactor does not touch `wait`.
  void cancel(IoWait* wait);

 private:
  Reactor();
  void run();
  // Arms `fd` (one-shot) for the union of its waiters' events, or forgets it when none are
  // left. Returns 0 or the errno of epoll_ctl.
  int arm(int fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  int epoll_fd_ = -1;
  weir::Mutex mu_;
  std::unordered_map<int, std::vector<IoWait*>> waiters_ ABSL_GUARDED_BY(mu_);
  std::unordered_set<int> registered_ ABSL_GUARDED_BY(mu_);  // In the epoll set.
  std::thread thread_;
};

}  // namespace weir::internal
