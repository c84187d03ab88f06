// Fiber: a function running on its own stack that can suspend itself and be resumed later, on the
// thread that created it. The async operators run their bodies on fibers; most users never touch
// this type directly (see async_operator.h).
//
// A fiber runs `entry` the first time it is resumed, on a stack taken from the calling thread's
// pool (mmap'd, with a 64 KiB PROT_NONE guard region below it, so an overflow faults instead of
// corrupting memory; a fault there prints which fiber overflowed, by its label, before the process
// dies of it). A fiber that cannot get a stack (past the process's stack limit, or the kernel
// refuses the mapping) ends at its first resume without running, with the error in `exception()`.
//
// Each fiber keeps its own C++ exception state (the exceptions its catch handlers are handling,
// the count of uncaught ones): a fiber may suspend inside a catch handler or a destructor that
// unwinding runs.
// `suspend()` inside the fiber returns control to whoever called `resume()`; the next `resume()`
// continues after the `suspend()`. When `entry` returns or throws, the fiber is done; an exception
// that escaped `entry` is kept in `exception()`.
//
// Destroying a fiber that is suspended in the middle of `entry` unwinds its stack: every
// destructor on it runs (Boost.Context's forced unwinding), so capabilities and memory the fiber
// holds are released, then the stack returns to the pool. Code on a fiber must therefore not
// swallow exceptions with `catch (...)` without rethrowing.
//
// Thread safety: worker-local. A fiber is created, resumed and destroyed on one thread.

#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>

namespace weir {

// The stack size fibers get unless asked for another (sanitizer builds multiply every size by 4,
// because instrumented frames are larger).
inline constexpr size_t kDefaultFiberStackSize = size_t{256} * 1024;

class Fiber {
 public:
  // A fiber that will run `entry` on a stack of at least `stack_size` bytes. Nothing runs and no
  // stack is taken until the first `resume()`.
  // `label` names the fiber in the stack overflow message (e.g. its operator and worker).
  explicit Fiber(std::function<void()> entry, size_t stack_size = kDefaultFiberStackSize,
                 std::string label = {});
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;
  // Unwinds the fiber if it is suspended. REQUIRES: not running.
  ~Fiber();

  // Runs the fiber until it suspends or finishes. REQUIRES: !is_done(), not running, called on
  // the creating thread.
  void resume();
  // Suspends the calling fiber: control returns from its `resume()`. REQUIRES: called on this
  // fiber, while it runs.
  void suspend();

  bool is_done() const;
  bool is_running() const;
  // Whether `resume()` has been called at least once.
  bool has_started() const;
  // The exception that escaped `entry`, if any (valid once done).
  std::exception_ptr exception() const;

  // The fiber running on the calling thread, or nullptr on the thread's own stack.
  static Fiber* current();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Diagnostics of the calling thread's fibers (tests and benchmarks).
struct FiberStats {
  int64_t live_fibers = 0;    // Fibers created on this thread and not yet destroyed.
  int64_t stacks_in_use = 0;  // Stacks held by fibers that have started.
  int64_t stacks_pooled = 0;  // Stacks kept for reuse.
  int64_t stacks_mapped = 0;  // Stacks ever mapped on this thread (pool misses).
};
FiberStats fiber_stats_on_this_thread();

// Fiber stacks mapped in the process (in use or pooled for reuse). Each costs two memory
// mappings (the stack and its guard region) of the kernel's vm.max_map_count.
size_t fiber_stacks_mapped_in_process();
// The most fiber stacks the process maps at once; a fiber that would map more fails to start
// (its async operator fails with an error naming it). The default leaves 8192 of
// vm.max_map_count's mappings for everything else. Returns the previous limit.
size_t set_fiber_stack_limit(size_t stacks);

}  // namespace weir
