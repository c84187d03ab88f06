// Fibers on Boost.Context. The only file in weir that includes Boost.Context (and that switches
// stacks), so the sanitizer annotations for stack switches live here too:
//
// - AddressSanitizer: the same fcontext switching as release builds, with every switch announced
//   by hand: __sanitizer_start_switch_fiber right before the Boost call that switches, and
//   __sanitizer_finish_switch_fiber right after control arrives on the other stack. Each fiber
//   gets its own fake stack (detect_stack_use_after_return=1), saved when it switches away and
//   freed when it finishes or is unwound (its last switch passes no save slot). Boost 1.74's
//   ucontext mode, which announces switches itself, keeps a finished fiber's fake stack (tens of
//   KiB per fiber) and switched differently from release; it is no longer used.
// - ThreadSanitizer: Boost 1.74 has no hooks, so each switch is announced with
//   __tsan_switch_to_fiber right before the Boost call that switches. The side that switches
//   announces it, and a fiber that finishes (returns or is unwound) is announced as left only once
//   control is back on the resumer's stack, so that the frames TSan sees entered and left on each
//   side balance.

#include "weir/async/fiber.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/context/fiber.hpp>
#include <cxxabi.h>
#include <sys/mman.h>
#include <unistd.h>

#include "weir/check.h"
#include "weir/errno_message.h"
#include "weir/sanitizers.h"

#if defined(WEIR_ASAN)
#include <sanitizer/asan_interface.h>
#endif
#if defined(WEIR_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace ctx = boost::context;

namespace weir {
namespace {

#if defined(WEIR_ASAN) || defined(WEIR_TSAN)
constexpr size_t kSanitizerStackFactor = 4;
#else
constexpr size_t kSanitizerStackFactor = 1;
#endif
constexpr size_t kMinStackSize = size_t{32} << 10;
// PROT_NONE below every stack: large enough that a frame with big locals, in code built without
// -fstack-clash-protection, lands in it rather than in the stack mapped below.
constexpr size_t kGuardSize = size_t{64} << 10;
// A thread keeps at most this many stacks for reuse; more are unmapped when released.
constexpr size_t kMaxPooledStacks = 64;

size_t page_size() {
  static const size_t size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

size_t guard_size() {
  static const size_t size = std::max(kGuardSize, page_size());
  return size;
}

// Stacks mapped in the process (in use or pooled), each two memory mappings (the stack and its
// guard): past the limit, a fiber fails to start with an error instead of the process running
// out of vm.max_map_count mappings (where any mmap, malloc's included, fails).
std::atomic<size_t> stacks_mapped_in_process{0};
size_t default_stack_limit() {
  size_t max_map_count = 65530;
  std::ifstream in("/proc/sys/vm/max_map_count");
  in >> max_map_count;
  // Leave room for everything else the process maps (libraries, malloc arenas, threads).
  constexpr size_t kReserved = 8192;
  return std::max<size_t>(max_map_count > kReserved ? (max_map_count - kReserved) / 2 : 0, 1024);
}
std::atomic<size_t> stack_limit{default_stack_limit()};

// Per-thread statistics (FiberStats).
thread_local FiberStats stats;

// The stacks of one thread: mmap'd regions with a PROT_NONE guard region (kGuardSize) below the
// usable part, kept for reuse by size.
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
  // Throws std::runtime_error (the fiber then fails to start, with that error) past the limit
  // or when the kernel refuses the mapping.
  static void* map(size_t size) {
    const size_t limit = stack_limit.load();
    const size_t mapped = stacks_mapped_in_process.fetch_add(1) + 1;
    if (mapped > limit) {
      stacks_mapped_in_process.fetch_sub(1);
      throw std::runtime_error(
          "cannot start a fiber: the process already has " + std::to_string(mapped - 1) +
          " fiber stacks mapped, the limit (each stack costs two of vm.max_map_count's memory "
          "mappings; see weir::set_fiber_stack_limit)");
    }
    const size_t guard = guard_size();
    void* base = ::mmap(nullptr, size + guard, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (base != MAP_FAILED && ::mprotect(base, guard, PROT_NONE) != 0) {
      const int error = errno;
      ::munmap(base, size + guard);
      base = MAP_FAILED;
      errno = error;
    }
    if (base == MAP_FAILED) {
      const int error = errno;
      stacks_mapped_in_process.fetch_sub(1);
      throw std::runtime_error(
          "cannot map a " + std::to_string(size) + "-byte fiber stack (" +
          std::to_string(mapped - 1) +
          " fiber stacks mapped in the process): " + weir::errno_message(error));
    }
    ++stats.stacks_mapped;
    return static_cast<char*>(base) + guard + size;
  }
  static void unmap(void* top, size_t size) {
    const size_t guard = guard_size();
    ::munmap(static_cast<char*>(top) - size - guard, size + guard);
    stacks_mapped_in_process.fetch_sub(1);
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

// What the SIGSEGV handler needs to know about the fiber running on a thread.
struct FaultInfo {
  const char* stack_low = nullptr;  // The lowest usable byte; the guard region lies below.
  size_t stack_size = 0;
  std::string label;  // Names the fiber (its operator and worker) in the overflow message.
#if defined(WEIR_ASAN)
  // The creator's fake stack while Boost's constructor enters the new stack and comes back.
  void* creator_fake_stack = nullptr;
#endif
};
thread_local const FaultInfo* running_info = nullptr;

void install_overflow_handler();

// Boost.Context's StackAllocator over the thread's pool.
class PooledStack {
 public:
  PooledStack(size_t size, FaultInfo* info) : size_(size), info_(info) {}
  ctx::stack_context allocate() {
    StackPool* pool = pool_holder.get();
    WEIR_CHECK(pool != nullptr) << "fiber started while its thread is exiting";
    install_overflow_handler();
    ctx::stack_context sctx;
    sctx.size = size_;
    sctx.sp = pool->take(size_);
    info_->stack_low = static_cast<const char*>(sctx.sp) - size_;
    info_->stack_size = size_;
    ++stats.stacks_in_use;
#if defined(WEIR_ASAN)
    // Boost's constructor switches to the new stack right after this returns (and back): the
    // only place that knows the stack before that switch. Fiber::resume finishes it.
    __sanitizer_start_switch_fiber(&info_->creator_fake_stack, info_->stack_low, size_);
#endif
    return sctx;
  }
  void deallocate(ctx::stack_context& sctx) noexcept {
    --stats.stacks_in_use;
    if (StackPool* pool = pool_holder.get()) {
      pool->give(sctx.sp, sctx.size);
    } else {
      ::munmap(static_cast<char*>(sctx.sp) - sctx.size - guard_size(), sctx.size + guard_size());
      stacks_mapped_in_process.fetch_sub(1);
    }
  }

 private:
  size_t size_;
  FaultInfo* info_;
};

thread_local Fiber* running_fiber = nullptr;

// ---- stack overflow: a message that names the fiber ----
//
// A fault in the guard region of the fiber running on the faulting thread is an overflow of its
// stack: the handler (on the thread's alternate signal stack, since the fiber's stack is
// exhausted) writes which fiber overflowed, then hands the signal on to whatever handled
// SIGSEGV before (the default: the process dies of it). Every other fault goes on unchanged.

struct sigaction previous_segv_action;

void write_all(const char* text, size_t length) {
  while (length > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, length);
    if (n <= 0) return;
    text += n;
    length -= static_cast<size_t>(n);
  }
}
void write_text(const char* text) { write_all(text, std::strlen(text)); }
void write_number(size_t value) {
  char digits[24];
  size_t n = 0;
  do {
    digits[sizeof(digits) - 1 - n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0 && n < sizeof(digits));
  write_all(digits + sizeof(digits) - n, n);
}

void on_segv(int signal, siginfo_t* info, void* context) {
  const FaultInfo* fiber = running_info;
  const char* address = static_cast<const char*>(info->si_addr);
  if (fiber != nullptr && fiber->stack_low != nullptr && address < fiber->stack_low &&
      address >= fiber->stack_low - guard_size()) {
    write_text("weir: stack overflow in ");
    write_text(fiber->label.empty() ? "a fiber" : fiber->label.c_str());
    write_text(": its stack of ");
    write_number(fiber->stack_size);
    write_text(" bytes is exhausted (AsyncOperatorBuilder::set_stack_size sets a larger one)\n");
  }
  // Hand the signal on as if this handler were not there.
  const struct sigaction& previous = previous_segv_action;
  if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
    previous.sa_sigaction(signal, info, context);
  } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(signal);
  } else {
    // Returning re-executes the faulting access, which now kills the process.
    ::signal(SIGSEGV, SIG_DFL);
  }
}

// The calling thread's alternate signal stack, unless it already has one.
class AltStack {
 public:
  AltStack() {
    stack_t current{};
    if (::sigaltstack(nullptr, &current) != 0 || (current.ss_flags & SS_DISABLE) == 0) return;
    constexpr size_t kSize = size_t{64} << 10;
    void* memory =
        ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) return;
    stack_t stack{};
    stack.ss_sp = memory;
    stack.ss_size = kSize;
    if (::sigaltstack(&stack, nullptr) != 0) {
      ::munmap(memory, kSize);
      return;
    }
    memory_ = memory;
    size_ = kSize;
  }
  AltStack(const AltStack&) = delete;
  AltStack& operator=(const AltStack&) = delete;
  ~AltStack() {
    if (memory_ == nullptr) return;
    stack_t disable{};
    disable.ss_flags = SS_DISABLE;
    ::sigaltstack(&disable, nullptr);
    ::munmap(memory_, size_);
  }

 private:
  void* memory_ = nullptr;
  size_t size_ = 0;
};

void install_overflow_handler() {
  thread_local AltStack alt_stack;
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = &on_segv;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGSEGV, &action, &previous_segv_action);
  });
}

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

// AddressSanitizer's side of a switch into a fiber and back, on the resumer's stack.
class AsanResume {
 public:
#if defined(WEIR_ASAN)
  AsanResume(const char* stack_low, size_t stack_size) {
    __sanitizer_start_switch_fiber(&fake_stack_, stack_low, stack_size);
  }
  ~AsanResume() { __sanitizer_finish_switch_fiber(fake_stack_, nullptr, nullptr); }

 private:
  void* fake_stack_ = nullptr;  // The resumer's, while the fiber runs.
#else
  AsanResume(const char*, size_t) {}
#endif
};

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
  FaultInfo fault_info;
  const FaultInfo* previous_info = nullptr;

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
#if defined(WEIR_ASAN)
  void* asan_fake_stack = nullptr;        // The fiber's own, while it is suspended.
  const void* asan_caller_low = nullptr;  // The resumer's stack, while the fiber runs.
  size_t asan_caller_size = 0;
#endif

  // In the fiber, right after control arrived on its stack.
  void asan_arrived() {
#if defined(WEIR_ASAN)
    __sanitizer_finish_switch_fiber(asan_fake_stack, &asan_caller_low, &asan_caller_size);
#endif
  }
  // In the fiber, right before it switches back to its resumer: keeping its fake stack, or
  // (`finished`) freeing it.
  void asan_leaving(bool finished) {
#if defined(WEIR_ASAN)
    __sanitizer_start_switch_fiber(finished ? nullptr : &asan_fake_stack, asan_caller_low,
                                   asan_caller_size);
#else
    (void)finished;
#endif
  }
};

Fiber::Fiber(std::function<void()> entry, size_t stack_size, std::string label)
    : impl_(std::make_unique<Impl>()) {
  impl_->entry = std::move(entry);
  impl_->fault_info.label = std::move(label);
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
    impl.previous_info = std::exchange(running_info, &impl.fault_info);
    impl.swap_eh();
    {
      AsanResume asan(impl.fault_info.stack_low, impl.stack_size);
      // Destroying a suspended Boost fiber resumes it with forced_unwind thrown from its
      // suspension point; the stack unwinds to the entry and the fiber finishes.
      ctx::fiber doomed = std::move(impl.fiber);
    }
    impl.swap_eh();
    running_info = impl.previous_info;
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
    try {
      impl.fiber = ctx::fiber(
          std::allocator_arg, PooledStack(impl.stack_size, &impl.fault_info),
          [raw](ctx::fiber&& caller) -> ctx::fiber {
            raw->asan_arrived();
            raw->caller = std::move(caller);
            try {
              raw->entry();
            } catch (const ctx::detail::forced_unwind&) {
              // Boost catches it at the fiber's entry and switches away for good.
              raw->asan_leaving(/*finished=*/true);
              throw;
            } catch (...) {
              raw->exception = std::current_exception();
            }
            WEIR_CHECK(!raw->unwinding)
                << (raw->fault_info.label.empty() ? std::string("a fiber") : raw->fault_info.label)
                << " swallowed the unwinding of its fiber (catch (...) without "
                   "rethrow)";
            raw->asan_leaving(/*finished=*/true);
            return std::move(raw->caller);
          });
    } catch (const std::exception&) {
      // No stack: the fiber ends before it starts, with the error as its exception.
#if defined(WEIR_TSAN)
      tsan_switch(impl.tsan_caller);
#endif
      impl.exception = std::current_exception();
      impl.state = Impl::State::kDone;
      return;
    }
#if defined(WEIR_TSAN)
    tsan_switch(impl.tsan_caller);
#endif
#if defined(WEIR_ASAN)
    {
      // Back from the constructor's round trip to the new stack (announced in PooledStack): the
      // finish takes the fiber's stack for ours, so announce a switch to our own stack too.
      const void* low = nullptr;
      size_t size = 0;
      __sanitizer_finish_switch_fiber(impl.fault_info.creator_fake_stack, &low, &size);
      void* fake_stack = nullptr;
      __sanitizer_start_switch_fiber(&fake_stack, low, size);
      __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
    }
#endif
  }
  impl.previous = running_fiber;
  running_fiber = this;
  impl.state = Impl::State::kRunning;
#if defined(WEIR_TSAN)
  tsan_switch(impl.tsan_fiber);
#endif
  impl.previous_info = std::exchange(running_info, &impl.fault_info);
  impl.swap_eh();
  {
    AsanResume asan(impl.fault_info.stack_low, impl.stack_size);
    impl.fiber = std::move(impl.fiber).resume();
  }
  impl.swap_eh();
  running_info = impl.previous_info;
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
  // Checked first: a fiber being unwound runs, but is not marked running.
  WEIR_CHECK(!impl.unwinding)
      << (impl.fault_info.label.empty() ? std::string("a fiber") : impl.fault_info.label)
      << " waited while its fiber was being unwound: its code caught the unwinding (a catch (...) "
         "that does not rethrow) and went on, or waits in a destructor; such a fiber can be "
         "neither resumed nor stopped";
  WEIR_CHECK(running_fiber == this && impl.state == Impl::State::kRunning)
      << "suspend() called outside its fiber";
#if defined(WEIR_TSAN)
  tsan_switch(impl.tsan_caller);
#endif
  impl.asan_leaving(/*finished=*/false);
#if defined(WEIR_ASAN)
  try {
    impl.caller = std::move(impl.caller).resume();
  } catch (const ctx::detail::forced_unwind&) {
    // Resumed to be unwound: control arrived here by an exception.
    impl.asan_arrived();
    throw;
  }
#else
  impl.caller = std::move(impl.caller).resume();
#endif
  impl.asan_arrived();
}

bool Fiber::is_done() const { return impl_->state == Impl::State::kDone; }
bool Fiber::is_running() const { return impl_->state == Impl::State::kRunning; }
bool Fiber::has_started() const { return impl_->state != Impl::State::kNew; }
std::exception_ptr Fiber::exception() const { return impl_->exception; }
Fiber* Fiber::current() { return running_fiber; }

FiberStats fiber_stats_on_this_thread() { return stats; }

size_t fiber_stacks_mapped_in_process() { return stacks_mapped_in_process.load(); }
size_t set_fiber_stack_limit(size_t stacks) { return stack_limit.exchange(stacks); }

}  // namespace weir
