// The blocking pool: runs the functions async bodies hand to `AsyncContext::run_blocking` on
// threads of its own (at most kMaxPoolThreads, parked while idle), so blocking calls (database
// clients, file IO) never block a worker thread.
//
// Each async operator has a BlockingLimit, shared by its instances on the workers of a process:
// at most `max` of its calls are queued for or running on the pool, the others wait in the
// limit's own queue, so one operator's slow or hung calls take at most `max` of the pool's
// kMaxPoolThreads threads. A call counts until it returns, also when the operator that made
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

// The most threads the pool runs at once; more calls wait in its queue.
inline constexpr size_t kMaxPoolThreads = 64;

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
