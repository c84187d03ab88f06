// Test helpers shared by weir's test binaries (the weir_testing library).
//
// - run_workers(W, fn): executes `fn(worker)` on W workers and returns the per-worker results,
//   failing the test (not hanging) if execution fails.
// - step_until(worker, done): steps until done() or a generous deadline, then fails loudly.
// - Watchdog: aborts the process with a message (and the workers' progress reports) if a test runs
//   past its deadline (a hang is a test failure that names the case, not a CI timeout).

#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "weir/worker/execute.h"

namespace weir::testing {

inline constexpr auto kDeadline = std::chrono::seconds(60);

// Steps `worker` until `done()`; returns false (and records a test failure) at the deadline.
template <class F>
bool step_until(Worker& worker, F&& done, std::chrono::seconds deadline = kDeadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (!done()) {
    if (worker.failed()) return false;
    if (std::chrono::steady_clock::now() > until) {
      ADD_FAILURE() << "step_until: deadline passed on worker " << worker.index();
      return false;
    }
    worker.step_or_park(std::chrono::milliseconds(1));
  }
  return true;
}

// Executes fn on `workers` workers; returns their results in worker order.
template <class F>
auto run_workers(size_t workers, F&& fn) {
  Config config;
  config.workers = workers;
  return execute(config, std::forward<F>(fn));
}

// Aborts the process if not destroyed within `limit`, printing `what`.
class Watchdog {
 public:
  explicit Watchdog(std::string what, std::chrono::seconds limit = kDeadline)
      : what_(std::move(what)), thread_([this, limit] {
          std::unique_lock lock(mu_);
          if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "watchdog: %s did not finish within %lld s\n", what_.c_str(),
                         static_cast<long long>(limit.count()));
            std::fflush(stderr);
            // What holds the dataflows back: workers that still step print their reports.
            request_progress_reports();
            cv_.wait_for(lock, std::chrono::seconds(2), [this] { return done_; });
            std::abort();
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

 private:
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace weir::testing
