// The blocking pool: runs the functions async bodies hand to `AsyncContext::run_blocking` on the
// threads of a oneTBB task arena, so blocking calls (database clients, file IO) never block a
// worker thread.
//
// Calls are queued here and the arena only gets tasks that each take one call from the
// queue: the hand-off between threads goes through a mutex the sanitizers see, not through
// oneTBB's own (uninstrumented) synchronization.
//
// Thread safety: thread-safe.

#pragma once

#include "weir/async/context.h"

namespace weir::internal {

// Queues `call`: a pool thread runs `call->run()` and then `call->finish()`. `call` must live
// until it is done.
void submit_blocking(BlockingCall* call);

}  // namespace weir::internal
