#include "blocking_pool.h"

#include <chrono>
#include <deque>
#include <thread>
#include <utility>

#include "tbb_arena.h"

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

// The queue of calls: each task the arena runs takes one call from it, so calls cross threads
// through this mutex, which the sanitizers see.
class BlockingQueue {
 public:
  static BlockingQueue& instance() {
    // Never destroyed: a call may still be running when static destructors run.
    static BlockingQueue* queue = new BlockingQueue();
    return *queue;
  }

  void push(Queued queued) {
    weir::MutexLock lock(mu_);
    calls_.push_back(std::move(queued));
  }
  bool pop(Queued& queued) {
    weir::MutexLock lock(mu_);
    if (calls_.empty()) return false;
    queued = std::move(calls_.front());
    calls_.pop_front();
    return true;
  }

 private:
  weir::Mutex mu_;
  std::deque<Queued> calls_ ABSL_GUARDED_BY(mu_);
};

void enqueue(Queued queued);

void run_one() {
  Queued queued;
  if (!BlockingQueue::instance().pop(queued)) return;
  // A call abandoned before it started (its operator was dropped) never runs.
  if (queued.call->start()) queued.call->run();
  queued.call->finish();
  // An abandoned call's function and result are destroyed here, on the pool thread, unless the
  // body still holds the call.
  queued.call.reset();
  if (queued.limit) {
    if (std::shared_ptr<BlockingCall> next = BlockingPoolAccess::next(*queued.limit)) {
      enqueue(Queued{std::move(next), std::move(queued.limit)});
    }
  }
}

void enqueue(Queued queued) {
  BlockingQueue::instance().push(std::move(queued));
  arena_enqueue(&run_one);
}

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
