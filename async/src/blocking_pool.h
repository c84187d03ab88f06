// The blocking pool: runs the functions async bodies hand to `AsyncContext::run_blocking` on the
// threads of a oneTBB task arena, so blocking calls (database clients, file IO) never block a
// worker thread.
//
// Calls are queued here and the arena only gets tasks that each take one call from the
// queue: the hand-off between threads goes through a mutex the sanitizers see, not through
// oneTBB's own (uninstrumented) synchronization.
//
// Each async operator has a BlockingLimit, shared by its instances on the workers of a process:
// at most `max` of its calls are queued for or running on the pool, the others wait in the
// limit's own queue, so one operator's slow or hung calls take at most `max` of the pool's
// kMaxArenaConcurrency threads. A call counts until it returns, also when the operator that made
// it was dropped meanwhile (the call holds the limit).
//
// Thread safety: thread-safe.

#pragma once

#include <cstddef>
#include <deque>
#include <memory>

#include "weir/async/context.h"
#include "weir/mutex.h"

namespace weir::internal {

class BlockingLimit {
 public:
  void set_max(size_t max) {
    weir::MutexLock lock(mu_);
    max_ = max == 0 ? 1 : max;
  }

 private:
  friend void submit_blocking(std::shared_ptr<BlockingCall>, std::shared_ptr<BlockingLimit>);
  friend struct BlockingPoolAccess;

  weir::Mutex mu_;
  size_t max_ ABSL_GUARDED_BY(mu_) = kDefaultMaxBlockingCalls;
  size_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // Queued for or running on the pool.
  std::deque<std::shared_ptr<BlockingCall>> waiting_ ABSL_GUARDED_BY(mu_);
};

// Queues `call` (a pool thread runs `call->run()` unless it was abandoned first, then
// `call->finish()`), within `limit` unless it is null.
void submit_blocking(std::shared_ptr<BlockingCall> call, std::shared_ptr<BlockingLimit> limit);

}  // namespace weir::internal
