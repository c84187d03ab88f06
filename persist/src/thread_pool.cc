#include "thread_pool.h"

#include "weir/mutex.h"

namespace weir::persist::internal {

ThreadPool::ThreadPool(int threads) {
  threads_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] { run(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    weir::MutexLock lock(mu_);
    stopping_ = true;
  }
  work_.notify_all();
  for (std::thread& thread : threads_) {
    thread.join();
  }
}

void ThreadPool::schedule(absl::AnyInvocable<void() &&> task, bool urgent) {
  {
    weir::MutexLock lock(mu_);
    if (urgent) {
      queue_.push_front(std::move(task));
    } else {
      queue_.push_back(std::move(task));
    }
  }
  work_.notify_one();
}

void ThreadPool::run() {
  while (true) {
    absl::AnyInvocable<void() &&> task;
    {
      weir::MutexLock lock(mu_);
      while (!stopping_ && queue_.empty()) {
        work_.wait(mu_);
      }
      if (queue_.empty()) {
        return;  // Stopping, and nothing left to run.
      }
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(task)();
  }
}

}  // namespace weir::persist::internal
