// Mutex, MutexLock, CondVar: a std::mutex that clang's thread-safety analysis understands.
//
// Fields a lock protects say so with ABSL_GUARDED_BY(mu_), functions that expect it held with
// ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_), and clang's -Wthread-safety (on in the tsan preset, with
// -Werror) checks every access. Why not absl::Mutex itself: Debian's abseil is not built for
// ThreadSanitizer, so TSan cannot see the hand-offs through absl::Mutex and reports races on
// everything it guards; a std::mutex is intercepted by every sanitizer.
//
//   class Inbox {
//    public:
//     void push(int v) {
//       weir::MutexLock lock(mu_);
//       values_.push_back(v);
//       changed_.notify_all();
//     }
//     int pop() {
//       weir::MutexLock lock(mu_);
//       while (values_.empty()) changed_.wait(mu_);
//       int v = values_.front();
//       values_.pop_front();
//       return v;
//     }
//    private:
//     weir::Mutex mu_;
//     weir::CondVar changed_;
//     std::deque<int> values_ ABSL_GUARDED_BY(mu_);
//   };
//
// Waits are written as loops over the condition in the caller (not predicates passed in), so the
// analysis sees the guarded reads under the lock.
//
// Thread safety: thread-safe (that is the point).

#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace weir {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

  // Tells the analysis that the caller holds the lock where it cannot see it (a callback run
  // under the lock). Checks nothing at run time.
  void assert_held() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// A condition variable for weir::Mutex. Every wait may wake spuriously: loop on the condition.
class CondVar {
 public:
  // Releases `mu`, waits for a notification, and takes `mu` again. REQUIRES: `mu` is held.
  void wait(Mutex& mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }

  // As wait, until `deadline` at the latest. Returns false if it returned because the deadline
  // passed. REQUIRES: `mu` is held.
  template <class Clock, class Duration>
  bool wait_until(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    const bool notified = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return notified;
  }

  // As wait, for `timeout` at the longest. Returns false if the timeout passed.
  template <class Rep, class Period>
  bool wait_for(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return wait_until(mu, std::chrono::steady_clock::now() + timeout);
  }

  void notify_one() { cv_.notify_one(); }
  void notify_all() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace weir
