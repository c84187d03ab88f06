// Fibers on Boost.Context. The only file in weir that includes Boost.Context (and that switches
// stacks), so the sanitizer annotations for stack switches live here too:
//
// - AddressSanitizer: the asan preset builds Boost.Context in ucontext mode with BOOST_USE_ASAN,
//   whose fiber code calls __sanitizer_start/finish_switch_fiber itself. Debian's library is the
//   fcontext build and lacks the few symbols ucontext mode needs; they are defined below.
// - ThreadSanitizer: Boost 1.74 has no hooks, so each switch is announced with
//   __tsan_switch_to_fiber right before the Boost call that switches. The side that switches
//   announces it, and a fiber that finishes (returns or is unwound) is announced as left only once
//   control is back on the resumer's stack, so that the frames TSan sees entered and left on each
//   side balance.

#include "weir/async/fiber.h"

#include <cstdlib>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/context/fiber.hpp>
#include <cxxabi.h>
#include <sys/mman.h>
#include <unistd.h>

#include "weir/check.h"

#if defined(__SANITIZE_ADDRESS__)
#define WEIR_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WEIR_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define WEIR_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WEIR_TSAN 1
#endif
#endif

#if defined(WEIR_ASAN)
#include <sanitizer/asan_interface.h>
#endif
#if defined(WEIR_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace ctx = boost::context;

#if defined(BOOST_USE_UCONTEXT)
// What Boost's own src/fiber.cpp provides when the library is built for ucontext: the record of
// the context running on each thread, created for a thread's own stack on first use.
namespace boost::context::detail {
namespace {
thread_local fiber_activation_record* current_record = nullptr;
thread_local size_t record_users = 0;
}  // namespace

fiber_activation_record_initializer::fiber_activation_record_initializer() noexcept {
  if (record_users++ == 0) current_record = new fiber_activation_record();
}

fiber_activation_record_initializer::~fiber_activation_record_initializer() {
  if (--record_users == 0) {
    delete current_record;
    current_record = nullptr;
  }
}

fiber_activation_record*& fiber_activation_record::current() noexcept {
  thread_local fiber_activation_record_initializer initializer;
  return current_record;
}
}  // namespace boost::context::detail
#endif

namespace weir {
namespace {

#if defined(WEIR_ASAN) || defined(WEIR_TSAN)
constexpr size_t kSanitizerStackFactor = 4;
#else
constexpr size_t kSanitizerStackFactor = 1;
#endif
constexpr size_t kMinStackSize = 32 * 1024;
// A thread keeps at most this many stacks for reuse; more are unmapped when released.
constexpr size_t kMaxPooledStacks = 64;

size_t page_size() {
  static const size_t size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

// Per-thread statistics (FiberStats).
thread_local FiberStats stats;

// The stacks of one thread: mmap'd regions with a PROT_NONE guard page below the usable part,
// kept for reuse by size.
class StackPool {
 public:
  StackPool() = default;
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;
  ~StackPool() {
    for (auto& [size, tops] : free_) {
      for (void* top : tops) unmap(top, size);
    }
  }

  // Returns the top (highest address) of a stack with `size` usable bytes.
  void* take(size_t size) {
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      void* top = it->second.back();
      it->second.pop_back();
      --pooled_;
      --stats.stacks_pooled;
      return top;
    }
    return map(size);
  }

  void give(void* top, size_t size) {
#if defined(WEIR_ASAN)
    // Frames left by switching away (never returned from) leave poisoned redzones behind.
    ASAN_UNPOISON_MEMORY_REGION(static_cast<char*>(top) - size, size);
#endif
    if (pooled_ >= kMaxPooledStacks) {
      unmap(top, size);
      return;
    }
    free_[size].push_back(top);
    ++pooled_;
    ++stats.stacks_pooled;
  }

 private:
  static void* map(size_t size) {
    const size_t guard = page_size();
    void* base = ::mmap(nullptr, size + guard, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    WEIR_CHECK(base != MAP_FAILED) << "mmap of a " << size << "-byte fiber stack failed";
    WEIR_CHECK(::mprotect(base, guard, PROT_NONE) == 0) << "mprotect of a fiber guard page failed";
    ++stats.stacks_mapped;
    return static_cast<char*>(base) + guard + size;
  }
  static void unmap(void* top, size_t size) {
    const size_t guard = page_size();
    ::munmap(static_cast<char*>(top) - size - guard, size + guard);
  }

  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t pooled_ = 0;
};

// The thread's pool, or nullptr once the thread is tearing down its thread-locals.
class PoolHolder {
 public:
  ~PoolHolder() {
    StackPool* pool = pool_;
    pool_ = nullptr;
    gone_ = true;
    delete pool;
  }
  StackPool* get() {
    if (pool_ == nullptr && !gone_) pool_ = new StackPool();
    return pool_;
  }

 private:
  StackPool* pool_ = nullptr;
  bool gone_ = false;
};
thread_local PoolHolder pool_holder;

// Boost.Context's StackAllocator over the thread's pool.
class PooledStack {
 public:
  explicit PooledStack(size_t size) : size_(size) {}
  ctx::stack_context allocate() {
    StackPool* pool = pool_holder.get();
    WEIR_CHECK(pool != nullptr) << "fiber started while its thread is exiting";
    ctx::stack_context sctx;
    sctx.size = size_;
    sctx.sp = pool->take(size_);
    ++stats.stacks_in_use;
    return sctx;
  }
  void deallocate(ctx::stack_context& sctx) noexcept {
    --stats.stacks_in_use;
    if (StackPool* pool = pool_holder.get()) {
      pool->give(sctx.sp, sctx.size);
    } else {
      ::munmap(static_cast<char*>(sctx.sp) - sctx.size - page_size(), sctx.size + page_size());
    }
  }

 private:
  size_t size_;
};

thread_local Fiber* running_fiber = nullptr;

// The C++ runtime's exception state of a thread (the Itanium C++ ABI's __cxa_eh_globals, as
// libsupc++ and libc++abi lay it out): the stack of exceptions being handled (what `throw;` and
// std::current_exception() see, and what leaving a handler destroys) and the count of exceptions
// thrown but not yet caught (std::uncaught_exceptions()). It belongs to a stack, not a thread: a
// fiber that suspends inside a catch handler, or in a destructor run by unwinding, takes its
// state with it, and a resume brings it back. Without that, one fiber leaving its handler
// destroys the exception another is still handling.
struct EhGlobals {
  void* caught_exceptions = nullptr;
  unsigned int uncaught_exceptions = 0;
};

EhGlobals* thread_eh_globals() { return reinterpret_cast<EhGlobals*>(abi::__cxa_get_globals()); }

#if defined(WEIR_TSAN)
void tsan_switch(void* to) { __tsan_switch_to_fiber(to, 0); }
#endif

}  // namespace

struct Fiber::Impl {
  enum class State { kNew, kRunning, kSuspended, kDone };

  std::function<void()> entry;
  size_t stack_size = 0;
  State state = State::kNew;
  ctx::fiber fiber;   // The fiber itself, while it is suspended.
  ctx::fiber caller;  // Where suspend() returns to, while the fiber runs.
  std::exception_ptr exception;
  Fiber* previous = nullptr;  // The fiber that was running when this one was resumed.
  bool unwinding = false;
  // While the fiber runs: its resumer's exception state; otherwise the fiber's own.
  EhGlobals eh;
  // The thread's exception state (stable for the thread's lifetime; a fiber stays on the thread
  // that created it).
  EhGlobals* thread_eh = nullptr;

  // Exchanges the thread's exception state with `eh`: right before switching into the fiber (the
  // thread gets the fiber's state, `eh` keeps the resumer's) and right after control comes back
  // (the other way round).
  void swap_eh() {
    std::swap(thread_eh->caught_exceptions, eh.caught_exceptions);
    std::swap(thread_eh->uncaught_exceptions, eh.uncaught_exceptions);
  }
#if defined(WEIR_TSAN)
  void* tsan_fiber = nullptr;
  void* tsan_caller = nullptr;
#endif
};

Fiber::Fiber(std::function<void()> entry, size_t stack_size) : impl_(std::make_unique<Impl>()) {
  impl_->entry = std::move(entry);
  const size_t page = page_size();
  size_t size = std::max(stack_size, kMinStackSize) * kSanitizerStackFactor;
  impl_->stack_size = (size + page - 1) / page * page;
  ++stats.live_fibers;
}

Fiber::~Fiber() {
  if (!impl_) return;
  Impl& impl = *impl_;
  WEIR_CHECK(impl.state != Impl::State::kRunning) << "a fiber was destroyed while running";
  if (impl.state == Impl::State::kSuspended) {
    impl.unwinding = true;
    impl.previous = running_fiber;
    running_fiber = this;
#if defined(WEIR_TSAN)
    impl.tsan_caller = __tsan_get_current_fiber();
    tsan_switch(impl.tsan_fiber);
#endif
    impl.swap_eh();
    {
      // Destroying a suspended Boost fiber resumes it with forced_unwind thrown from its
      // suspension point; the stack unwinds to the entry and the fiber finishes.
      ctx::fiber doomed = std::move(impl.fiber);
    }
    impl.swap_eh();
#if defined(WEIR_TSAN)
    tsan_switch(impl.tsan_caller);
#endif
    running_fiber = impl.previous;
    impl.state = Impl::State::kDone;
  }
#if defined(WEIR_TSAN)
  if (impl.tsan_fiber != nullptr) __tsan_destroy_fiber(impl.tsan_fiber);
#endif
  --stats.live_fibers;
}

void Fiber::resume() {
  Impl& impl = *impl_;
  WEIR_CHECK(impl.state == Impl::State::kNew || impl.state == Impl::State::kSuspended)
      << "resume of a fiber that is " << (impl.state == Impl::State::kDone ? "done" : "running");
#if defined(WEIR_TSAN)
  impl.tsan_caller = __tsan_get_current_fiber();
#endif
  if (impl.state == Impl::State::kNew) {
    impl.thread_eh = thread_eh_globals();
#if defined(WEIR_TSAN)
    impl.tsan_fiber = __tsan_create_fiber(0);
    __tsan_set_fiber_name(impl.tsan_fiber, "weir fiber");
    // The fcontext constructor already enters the new stack once (and comes back).
    tsan_switch(impl.tsan_fiber);
#endif
    Impl* raw = &impl;
    impl.fiber = ctx::fiber(
        std::allocator_arg, PooledStack(impl.stack_size), [raw](ctx::fiber&& caller) -> ctx::fiber {
          raw->caller = std::move(caller);
          try {
            raw->entry();
          } catch (const ctx::detail::forced_unwind&) {
            throw;  // Boost catches it at the fiber's entry.
          } catch (...) {
            raw->exception = std::current_exception();
          }
          WEIR_CHECK(!raw->unwinding)
              << "a fiber swallowed its unwinding (catch (...) without rethrow)";
          return std::move(raw->caller);
        });
#if defined(WEIR_TSAN)
    tsan_switch(impl.tsan_caller);
#endif
  }
  impl.previous = running_fiber;
  running_fiber = this;
  impl.state = Impl::State::kRunning;
#if defined(WEIR_TSAN)
  tsan_switch(impl.tsan_fiber);
#endif
  impl.swap_eh();
  impl.fiber = std::move(impl.fiber).resume();
  impl.swap_eh();
  running_fiber = impl.previous;
  if (!impl.fiber) {
#if defined(WEIR_TSAN)
    // The fiber finished: it did not announce the switch back itself.
    tsan_switch(impl.tsan_caller);
#endif
    impl.fiber = ctx::fiber();  // Releases a finished ucontext record (and its stack).
    impl.state = Impl::State::kDone;
  } else {
    impl.state = Impl::State::kSuspended;
  }
}

void Fiber::suspend() {
  Impl& impl = *impl_;
  WEIR_CHECK(running_fiber == this && impl.state == Impl::State::kRunning)
      << "suspend() called outside its fiber";
  WEIR_CHECK(!impl.unwinding) << "a fiber waited while being unwound (a catch (...) that does "
                                 "not rethrow, or a wait in a destructor)";
#if defined(WEIR_TSAN)
  tsan_switch(impl.tsan_caller);
#endif
  impl.caller = std::move(impl.caller).resume();
}

bool Fiber::is_done() const { return impl_->state == Impl::State::kDone; }
bool Fiber::is_running() const { return impl_->state == Impl::State::kRunning; }
bool Fiber::has_started() const { return impl_->state != Impl::State::kNew; }
std::exception_ptr Fiber::exception() const { return impl_->exception; }
Fiber* Fiber::current() { return running_fiber; }

FiberStats fiber_stats_on_this_thread() { return stats; }

}  // namespace weir
