#include "blocking_pool.h"

#include <chrono>
#include <deque>
#include <exception>
#include <system_error>
#include <thread>
#include <utility>

#include "weir/mutex.h"

namespace weir::internal {

struct BlockingPoolAccess {
  // The call after one of `limit`'s calls returned: the next one waiting, or none (and the limit
  // counts one call fewer in flight).
  static std::shared_ptr<BlockingCall> next(BlockingLimit& limit) {
    weir::MutexLock lock(limit.mu_);
    if (limit.waiting_.empty()) {
      --limit.in_flight_;
      return nullptr;
    }
    std::shared_ptr<BlockingCall> call = std::move(limit.waiting_.front());
    limit.waiting_.pop_front();
    return call;
  }
};

namespace {

struct Queued {
  std::shared_ptr<BlockingCall> call;
  std::shared_ptr<BlockingLimit> limit;
};

// The pool's threads: made when a call is queued and no thread waits for one (up to
// kMaxPoolThreads), parked on a condition variable while there is none, and gone after
// kIdleExit without one. Parked, not spinning: on a machine with as many cores as workers a
// spinning pool thread takes the core a worker or another call needs (oneTBB's arena, used
// before, kept a fifth of a busy `weir view`'s CPU in sched_yield; docs/benchmarks.md).
class Pool {
 public:
  static Pool& instance() {
    // Never destroyed: a call may still be running when static destructors run.
    static Pool* pool = new Pool();
    return *pool;
  }

  void push(Queued queued) {
    bool start = false;
    {
      weir::MutexLock lock(mu_);
      calls_.push_back(std::move(queued));
      // Every queued call has a parked thread to take it, or gets a new one.
      if (calls_.size() > waiting_ && threads_ < kMaxPoolThreads) {
        ++threads_;
        start = true;
      } else {
        ready_.notify_one();
      }
    }
    if (!start) return;
    try {
      std::thread([this] { serve(); }).detach();
    } catch (const std::system_error& e) {
      no_thread(e.code());
    }
  }

 private:
  void serve() {
    for (;;) {
      Queued queued;
      {
        weir::MutexLock lock(mu_);
        while (calls_.empty()) {
          ++waiting_;
          const bool notified = ready_.wait_for(mu_, kIdleExit);
          --waiting_;
          if (!notified && calls_.empty()) {
            --threads_;
            return;
          }
        }
        queued = std::move(calls_.front());
        calls_.pop_front();
      }
      // The limit's next call runs on this thread too.
      while (queued.call) queued = run(std::move(queued));
    }
  }

  // A thread could not be started (a limit on threads, no memory for its stack). The pool's
  // other threads take the queued calls when they are free; with none left, nothing would (until
  // some later call starts one, which would run them after their bodies had given up): the calls
  // fail with a std::system_error saying so, which a body's wait rethrows.
  void no_thread(std::error_code error) {
    std::deque<Queued> failed;
    {
      weir::MutexLock lock(mu_);
      --threads_;
      if (threads_ > 0) return;
      failed.swap(calls_);
    }
    for (Queued& queued : failed) {
      // The limit's calls waiting behind it find no thread either.
      while (queued.call) queued = run(std::move(queued), error);
    }
  }

  // Runs `queued` (or fails it with `error`); returns the next call of its limit, if one waits.
  static Queued run(Queued queued, std::error_code error = {}) {
    // A call abandoned before it started (its operator was dropped) never runs.
    if (queued.call->start()) {
      if (error) {
        queued.call->fail(std::make_exception_ptr(
            std::system_error(error, "weir's blocking pool cannot start a thread")));
      } else {
        queued.call->run();
      }
    }
    queued.call->finish();
    // An abandoned call's function and result are destroyed here, on the pool thread, unless
    // the body still holds the call.
    queued.call.reset();
    if (queued.limit) {
      if (std::shared_ptr<BlockingCall> next = BlockingPoolAccess::next(*queued.limit)) {
        return Queued{std::move(next), std::move(queued.limit)};
      }
    }
    return {};
  }

  static constexpr auto kIdleExit = std::chrono::seconds(30);

  weir::Mutex mu_;
  weir::CondVar ready_;
  std::deque<Queued> calls_ ABSL_GUARDED_BY(mu_);
  size_t threads_ ABSL_GUARDED_BY(mu_) = 0;
  size_t waiting_ ABSL_GUARDED_BY(mu_) = 0;  // Parked in serve(), waiting for a call.
};

void enqueue(Queued queued) { Pool::instance().push(std::move(queued)); }

}  // namespace

std::shared_ptr<BlockingLimit> make_blocking_limit() { return std::make_shared<BlockingLimit>(); }

void submit_blocking(std::shared_ptr<BlockingCall> call, std::shared_ptr<BlockingLimit> limit) {
  if (limit) {
    weir::MutexLock lock(limit->mu_);
    if (limit->in_flight_ >= limit->max_) {
      limit->waiting_.push_back(std::move(call));
      return;
    }
    ++limit->in_flight_;
  }
  enqueue(Queued{std::move(call), std::move(limit)});
}

void BlockingCall::wait() const {
  // Only reached while unwinding a body whose borrowing call still runs: poll rather than keep a
  // condition variable in every call.
  while (!is_done()) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

}  // namespace weir::internal
