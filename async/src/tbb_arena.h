// The oneTBB task arena behind the blocking pool, kept in its own file because oneTBB's task
// objects are header templates whose construction and destruction would otherwise be instrumented
// by ThreadSanitizer while the synchronization that orders them lives in the uninstrumented
// library (false reports when a task's memory is reused). The tsan preset compiles this file
// without instrumentation; nothing of ours is shared through it but a function pointer.
//
// Thread safety: thread-safe.

#pragma once

namespace weir::internal {

// Runs `task()` once on a thread of the arena. At most `kMaxArenaConcurrency` run at once.
void arena_enqueue(void (*task)());

inline constexpr int kMaxArenaConcurrency = 64;

}  // namespace weir::internal
