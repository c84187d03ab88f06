// ThreadPool: the client's I/O threads, which encode, compress, upload, fetch and decode parts.
//
// Tasks must not wait for other tasks (a full pool would deadlock). Tasks must not own the
// ClientCore that owns the pool: they capture what they use (the Blob, ids) instead.
//
// Thread safety: thread-safe.

#pragma once

#include <deque>
#include <future>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/functional/any_invocable.h"

#include "weir/mutex.h"

namespace weir::persist::internal {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  // Runs the tasks still queued, then joins the threads.
  ~ThreadPool();

  // An urgent task runs before every task already queued (a batch's last part, which someone
  // waits for, goes ahead of another batch's stream of full parts).
  void schedule(absl::AnyInvocable<void() &&> task, bool urgent = false);

  template <class F>
  std::future<std::invoke_result_t<F>> submit(F f, bool urgent = false) {
    std::packaged_task<std::invoke_result_t<F>()> task(std::move(f));
    std::future<std::invoke_result_t<F>> future = task.get_future();
    schedule([task = std::move(task)]() mutable { task(); }, urgent);
    return future;
  }

 private:
  void run();

  weir::Mutex mu_;
  weir::CondVar work_;  // Signalled on a new task and on stopping.
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace weir::persist::internal
