#include "thread_pool.h"

namespace weir::persist::internal {

ThreadPool::ThreadPool(int threads) {
  threads_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] { run(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_.notify_all();
  for (std::thread& thread : threads_) {
    thread.join();
  }
}

void ThreadPool::schedule(absl::AnyInvocable<void() &&> task, bool urgent) {
  {
    std::lock_guard lock(mu_);
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
      std::unique_lock lock(mu_);
      work_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
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
