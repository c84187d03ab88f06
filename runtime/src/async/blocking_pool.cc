#include "blocking_pool.h"

#include <chrono>
#include <deque>
#include <mutex>
#include <thread>

#include "oneapi/tbb/global_control.h"
#include "oneapi/tbb/task_arena.h"

namespace weir::internal {
namespace {

// At most this many blocking calls run at once; more wait in the queue. Blocking calls mostly
// wait, so there are more of them than cores.
constexpr int kMaxConcurrentCalls = 64;

class BlockingPool {
 public:
  BlockingPool()
      // oneTBB's default thread limit is the number of cores; blocking calls need more.
      : control_(oneapi::tbb::global_control::max_allowed_parallelism,
                 static_cast<size_t>(kMaxConcurrentCalls) + 1),
        // No slot is reserved for an application thread: none joins the arena.
        arena_(kMaxConcurrentCalls, 0) {}

  void submit(BlockingCall* call) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(call);
    }
    // A capture-free task: nothing our instrumented code wrote travels inside oneTBB.
    arena_.enqueue([] { instance().run_one(); });
  }

  static BlockingPool& instance() {
    // Never destroyed: a call may still be running when static destructors run.
    static BlockingPool* pool = new BlockingPool();
    return *pool;
  }

 private:
  void run_one() {
    BlockingCall* call = nullptr;
    {
      std::lock_guard lock(mu_);
      if (queue_.empty()) return;
      call = queue_.front();
      queue_.pop_front();
    }
    call->run();
    call->finish();
  }

  oneapi::tbb::global_control control_;
  oneapi::tbb::task_arena arena_;
  std::mutex mu_;
  std::deque<BlockingCall*> queue_;  // Guarded by mu_.
};

}  // namespace

void submit_blocking(BlockingCall* call) { BlockingPool::instance().submit(call); }

void BlockingCall::wait() const {
  // Only reached while unwinding a body whose call is still running: poll rather than keep a
  // condition variable in every call.
  while (!is_done()) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

}  // namespace weir::internal
