#include "blocking_pool.h"

#include <chrono>
#include <deque>
#include <thread>

#include "tbb_arena.h"

#include "weir/mutex.h"

namespace weir::internal {
namespace {

// The queue of calls: each task the arena runs takes one call from it, so calls cross threads
// through this mutex, which the sanitizers see.
class BlockingQueue {
 public:
  static BlockingQueue& instance() {
    // Never destroyed: a call may still be running when static destructors run.
    static BlockingQueue* queue = new BlockingQueue();
    return *queue;
  }

  void push(BlockingCall* call) {
    weir::MutexLock lock(mu_);
    calls_.push_back(call);
  }
  BlockingCall* pop() {
    weir::MutexLock lock(mu_);
    if (calls_.empty()) return nullptr;
    BlockingCall* call = calls_.front();
    calls_.pop_front();
    return call;
  }

 private:
  weir::Mutex mu_;
  std::deque<BlockingCall*> calls_ ABSL_GUARDED_BY(mu_);
};

void run_one() {
  if (BlockingCall* call = BlockingQueue::instance().pop()) {
    call->run();
    call->finish();
  }
}

}  // namespace

void submit_blocking(BlockingCall* call) {
  BlockingQueue::instance().push(call);
  arena_enqueue(&run_one);
}

void BlockingCall::wait() const {
  // Only reached while unwinding a body whose call is still running: poll rather than keep a
  // condition variable in every call.
  while (!is_done()) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

}  // namespace weir::internal
