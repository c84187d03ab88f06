// AsyncContext: what the body of an async operator uses to wait without blocking its worker.
//
// The body of an async operator (async_operator.h) runs on a fiber on its worker's thread. Every
// wait below suspends the fiber: the worker goes on running other operators and dataflows, and
// resumes the body the next time the operator is activated, when the body checks again whether
// what it waits for has happened. What activates the operator: new data or a frontier change on
// one of its inputs, a timer or a file descriptor turning ready (sleep_for, await_readable: the
// process's IO reactor thread), a blocking call finishing (run_blocking, on a thread of the
// blocking pool), or anyone holding its Activator or SyncActivator.
//
//   builder.build([&](weir::AsyncContext& ctx, std::span<weir::CapabilitySet<uint64_t>> caps) {
//     ctx.sleep_for(std::chrono::milliseconds(10));
//     auto rows = ctx.run_blocking([&] { return database.query("SELECT ..."); });
//     for (auto& row : rows) output.give(caps[0].first(), row);
//     return absl::OkStatus();
//   });
//
// Thread safety: worker-local, and every wait must be called from the operator's own body (on its
// fiber). run_blocking's function runs on another thread.

#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"

#include "weir/async/fiber.h"
#include "weir/check.h"
#include "weir/progress/timestamp.h"
#include "weir/worker/activator.h"

namespace weir {

class AsyncContext;
class Worker;
template <Timestamp T>
class AsyncOperator;

// The fuel a body may spend on its outputs between two suspensions before giving yields. Fuel
// counts records times sizeof(D), not the heap data records own: a std::string counts 32 bytes
// however long it is (see use_fuel for records with large heap data).
inline constexpr size_t kDefaultFuelBytes = 1 << 20;

// The most blocking calls one async operator has in flight at once by default, over all its
// workers in a process (AsyncOptions::max_blocking_calls): a quarter of the process's pool, so
// one operator's slow or hung calls cannot take every pool thread. Calls past the bound wait in
// the operator's own queue.
inline constexpr size_t kDefaultMaxBlockingCalls = 16;

// How often the reactor notices that a descriptor an operator awaits was closed (epoll drops a
// closed descriptor without an event, so the reactor checks the ones it watches).
inline constexpr std::chrono::milliseconds kClosedDescriptorCheck{100};

// Timers of async waits (sleep_for, wait_until with a deadline) pending in the process: a wait
// that returns cancels its timer (for tests and diagnostics).
size_t async_timers_pending_in_process();

namespace internal {

// An operator's bound on its blocking calls in flight, shared by its instances on the workers of
// a process (defined in src/blocking_pool.h).
class BlockingLimit;
std::shared_ptr<BlockingLimit> make_blocking_limit();

// A call handed to the blocking pool. Shared between the body that waits for it and the pool:
// whichever lets go last destroys it, so a call abandoned by a dropped operator is destroyed on
// the pool thread when it returns.
class BlockingCall {
 public:
  BlockingCall() = default;
  BlockingCall(const BlockingCall&) = delete;
  BlockingCall& operator=(const BlockingCall&) = delete;
  virtual ~BlockingCall() = default;

  // Runs the call on a pool thread; catches what it throws.
  virtual void run() noexcept = 0;
  // Instead of run(), when the pool cannot run the call (it cannot start a thread): the body's
  // wait rethrows `error`.
  virtual void fail(std::exception_ptr error) noexcept = 0;

  bool is_done() const { return done_.load(std::memory_order_acquire); }
  // The body no longer wants the result (its operator is being dropped): one that runs sees its
  // stop token stopped; one that has not started yet (queued for the pool, or behind its
  // operator's bound) never runs and is done at once, so a body unwound meanwhile waits for
  // nothing.
  void abandon() {
    stop_.request_stop();
    // Acquire/release pairs with start(): exactly one of them claims the call.
    if (!started_.exchange(true, std::memory_order_acq_rel)) {
      done_.store(true, std::memory_order_release);
    }
  }
  // Called by the pool thread: claims the call to run it; false if it was abandoned first.
  bool start() { return !started_.exchange(true, std::memory_order_acq_rel); }
  // Called by the pool thread after run() (or instead of it, once abandoned): publishes the
  // result and wakes the operator.
  void finish() noexcept {
    // Release pairs with the acquire in is_done(): the body sees the result run() stored.
    done_.store(true, std::memory_order_release);
    // Activating an operator that was dropped meanwhile activates nothing.
    activator_.activate();
  }
  // Blocks the calling thread until the call is done.
  void wait() const;

 protected:
  std::stop_token stop_token() const { return stop_.get_token(); }

 private:
  friend class ::weir::AsyncContext;
  std::atomic<bool> done_{false};
  std::atomic<bool> started_{false};  // Claimed by the pool (or by abandon(): never runs).
  std::stop_source stop_;
  SyncActivator activator_;  // Set before the call is submitted.
};

// Calls `fn`, with the call's stop token if it takes one.
template <class F>
decltype(auto) invoke_blocking(F& fn, std::stop_token token) {
  if constexpr (std::is_invocable_v<F&, std::stop_token>) {
    return std::invoke(fn, std::move(token));
  } else {
    return std::invoke(fn);
  }
}
template <class F>
using BlockingResult = decltype(invoke_blocking(std::declval<F&>(), std::stop_token()));

// A call of `Fn`: borrowed (Fn is a reference: the caller's function, which must outlive the
// call) or owned (moved into the call).
template <class Fn, class R>
class BlockingCallFor final : public BlockingCall {
 public:
  explicit BlockingCallFor(Fn fn) : fn_(std::forward<Fn>(fn)) {}

  void run() noexcept override {
    try {
      if constexpr (std::is_void_v<R>) {
        invoke_blocking(fn_, stop_token());
      } else {
        result_.emplace(invoke_blocking(fn_, stop_token()));
      }
    } catch (...) {
      error_ = std::current_exception();
    }
  }

  void fail(std::exception_ptr error) noexcept override { error_ = std::move(error); }

  // The result, or the exception rethrown. REQUIRES: is_done(), and the call ran or failed. The
  // exception leaves the call: the body's catch is then its last owner, and the pool thread, which
  // may drop the call last, never frees it (a free TSan cannot order after the catch's reads, since
  // the exception's reference count lives in uninstrumented libstdc++).
  R take() {
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    if constexpr (!std::is_void_v<R>) return std::move(*result_);
  }

 private:
  Fn fn_;
  std::conditional_t<std::is_void_v<R>, bool, std::optional<R>> result_{};
  std::exception_ptr error_;
};

// Leaves a started call whatever way the body leaves the wait for it. A body unwound while the
// call runs abandons it (stopping its stop token); then, if `wait` (the call borrows the body's
// stack, which must outlive it), blocks until it returns.
class BlockingCallGuard {
 public:
  BlockingCallGuard(BlockingCall& call, bool wait) : call_(call), wait_(wait) {}
  BlockingCallGuard(const BlockingCallGuard&) = delete;
  BlockingCallGuard& operator=(const BlockingCallGuard&) = delete;
  ~BlockingCallGuard() {
    if (call_.is_done()) return;
    call_.abandon();
    if (wait_) call_.wait();
  }

 private:
  BlockingCall& call_;
  bool wait_;
};

// A worker-independent timer (on the process's reactor thread) that activates an operator at a
// deadline, cancelled when destroyed: a wait that ends early leaves nothing behind.
class ScopedTimer {
 public:
  ScopedTimer(const SyncActivator& activator, std::chrono::steady_clock::time_point deadline);
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;
  ~ScopedTimer();

 private:
  std::chrono::steady_clock::time_point deadline_;
  uint64_t id_ = 0;
};

}  // namespace internal

// A blocking call started without waiting for it (AsyncContext::start_blocking_owned), so that a
// body can have several in flight (prefetching) and take each result when it needs it.
// Destroying one whose call has not returned abandons the call, as unwinding
// run_blocking_owned does: it goes on on its pool thread and its result is discarded there.
// Move-only; from the body only.
template <class Fn>
class BlockingFuture {
 public:
  using Result = internal::BlockingResult<Fn>;

  BlockingFuture(BlockingFuture&&) noexcept = default;
  BlockingFuture& operator=(BlockingFuture&& other) noexcept {
    if (this != &other) {
      abandon();
      call_ = std::move(other.call_);
    }
    return *this;
  }
  ~BlockingFuture() { abandon(); }

  // Whether the call has returned (get() would not suspend).
  bool ready() const {
    check_call();
    return call_->is_done();
  }
  // Suspends until the call returns; then its result, or its exception rethrown. Once only.
  Result get(AsyncContext& ctx);

 private:
  friend class AsyncContext;
  using Call = internal::BlockingCallFor<Fn, Result>;
  explicit BlockingFuture(std::shared_ptr<Call> call) : call_(std::move(call)) {}
  void abandon() {
    if (call_ && !call_->is_done()) call_->abandon();
  }
  void check_call() const {
    WEIR_CHECK(call_ != nullptr) << "BlockingFuture: get() or ready() on a future whose result was "
                                    "taken (get() takes it once) or that was moved from";
  }

  std::shared_ptr<Call> call_;
};

class AsyncContext {
 public:
  // Made by the async operator. `worker` must outlive the context.
  AsyncContext(Worker& worker, SyncActivator activator, std::string name);
  AsyncContext(const AsyncContext&) = delete;
  AsyncContext& operator=(const AsyncContext&) = delete;

  // ---- waiting (from the body only) ----

  // Suspends until the operator is activated again, by anything (see the top of this file).
  void suspend();
  // Lets other operators run: suspends and asks to be scheduled again at once. Outputs given so
  // far are flushed and progress is reported before the body continues.
  void yield();
  // Suspends until `ready()` returns true; checked at every activation.
  template <class Pred>
  void wait_until(Pred&& ready) {
    while (!ready()) suspend();
  }
  // The same with a deadline: returns false if `deadline` passed first. The deadline's timer is
  // cancelled when the wait returns, however early.
  template <class Pred>
  bool wait_until(Pred&& ready, std::chrono::steady_clock::time_point deadline) {
    if (ready()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    internal::ScopedTimer timer(activator_, deadline);
    for (;;) {
      suspend();
      if (ready()) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
    }
  }
  // A duration of zero or less yields; one past the clock's range (nanoseconds::max()) sleeps
  // until the body is unwound.
  void sleep_for(std::chrono::nanoseconds duration);
  void sleep_until(std::chrono::steady_clock::time_point deadline);
  // Suspends until `fd` is readable (or writable). Errors, each naming the descriptor and the
  // operator (UNAVAILABLE unless said otherwise):
  // - it cannot be watched (INVALID_ARGUMENT; e.g. EBADF);
  // - it hung up or has an error condition (EPOLLHUP, EPOLLERR) and is not readable: a
  //   readable descriptor that also hung up returns OK, so the data (or end of file) before the
  //   hang-up is read first; await_writable reports a hang-up or error before readiness;
  // - it was closed while awaited (close() from another thread): noticed within
  //   kClosedDescriptorCheck, since epoll forgets a closed descriptor without an event (unless
  //   another body awaits the number, reused by a new file, first). shutdown() of a socket
  //   wakes its waiters at once instead (readable: read returns 0; writable: an error).
  absl::Status await_readable(int fd);
  absl::Status await_writable(int fd);

  // Runs `fn()` (or `fn(stop_token)`) on a thread of the blocking pool (parked while idle) and
  // suspends until it returns; then returns its result, or rethrows its exception on the fiber.
  // `fn` may borrow the body's locals (capture by reference): if the operator is dropped or shut
  // down while the call runs, its stop token is stopped and unwinding the body WAITS for the call
  // to return (a call that never returns hangs the drop). A call that takes a std::stop_token
  // and returns when it is stopped keeps drops prompt; otherwise prefer run_blocking_owned.
  template <class F>
  internal::BlockingResult<std::remove_reference_t<F>> run_blocking(F&& fn) {
    using Fn = std::remove_reference_t<F>;
    using R = internal::BlockingResult<Fn>;
    static_assert(!std::is_reference_v<R>, "run_blocking returns by value");
    auto call = std::make_shared<internal::BlockingCallFor<Fn&, R>>(fn);
    start_blocking(call);
    internal::BlockingCallGuard guard(*call, /*wait=*/true);
    wait_until([&] { return call->is_done(); });
    return call->take();
  }
  // The same for a function that owns everything it uses (captures by value, or shared_ptr):
  // `fn` is moved into the call. If the operator is dropped or shut down while the call runs,
  // the body does not wait: its stop token is stopped, the call goes on on its pool thread, and
  // when it returns its result (or exception) is discarded and `fn` is destroyed there. So `fn`
  // must not refer to the body's stack or to worker-local objects (capabilities, outputs).
  template <class F>
  internal::BlockingResult<std::decay_t<F>> run_blocking_owned(F&& fn) {
    using Fn = std::decay_t<F>;
    using R = internal::BlockingResult<Fn>;
    static_assert(!std::is_reference_v<R>, "run_blocking_owned returns by value");
    auto call = std::make_shared<internal::BlockingCallFor<Fn, R>>(Fn(std::forward<F>(fn)));
    start_blocking(call);
    internal::BlockingCallGuard guard(*call, /*wait=*/false);
    wait_until([&] { return call->is_done(); });
    return call->take();
  }
  // The same without waiting: starts `fn` (owning everything it uses, as for
  // run_blocking_owned) and returns at once; the future's get() waits for the result. Calls
  // started so count against the operator's bound on blocking calls like any other (more wait
  // in its queue).
  template <class F>
  BlockingFuture<std::decay_t<F>> start_blocking_owned(F&& fn) {
    using Fn = std::decay_t<F>;
    using R = internal::BlockingResult<Fn>;
    static_assert(!std::is_reference_v<R>, "start_blocking_owned returns by value");
    auto call = std::make_shared<internal::BlockingCallFor<Fn, R>>(Fn(std::forward<F>(fn)));
    start_blocking(call);
    return BlockingFuture<Fn>(std::move(call));
  }

  // ---- fuel ----

  // Counts `bytes` given on an output; when the fuel since the last suspension runs out, yields.
  // Outputs call this with records times sizeof(D); a body whose records own large heap data
  // (strings, vectors) may call it with their real size after giving, and a body that computes
  // for long without giving may call it too.
  void use_fuel(size_t bytes) {
    fuel_left_ -= static_cast<int64_t>(bytes);
    if (fuel_left_ < 0) yield();
  }
  // More than INT64_MAX bytes (SIZE_MAX, say) is unlimited, never a negative budget.
  void set_fuel(size_t bytes) {
    fuel_limit_ = fuel_left_ = static_cast<int64_t>(
        std::min<size_t>(bytes, static_cast<size_t>(std::numeric_limits<int64_t>::max())));
  }

  // ---- about the operator ----

  const std::string& name() const { return name_; }
  size_t worker_index() const;
  size_t peers() const;
  // Activates the operator from any thread (e.g. a callback of a client library).
  const SyncActivator& sync_activator() const { return activator_; }

 private:
  template <Timestamp T>
  friend class AsyncOperator;

  absl::Status await_fd(int fd, bool writable);
  void start_blocking(std::shared_ptr<internal::BlockingCall> call);

  // For the operator: the fiber the body runs on, and whether the body asked to run again.
  void bind(Fiber* fiber) { fiber_ = fiber; }
  // For the operator: the bound on its blocking calls in flight, shared by its instances on
  // every worker of the process.
  void set_blocking_limit(std::shared_ptr<internal::BlockingLimit> limit, size_t max_in_flight);
  bool take_yield() { return std::exchange(yield_requested_, false); }

  Worker* worker_;
  SyncActivator activator_;
  std::string name_;
  Fiber* fiber_ = nullptr;
  std::shared_ptr<internal::BlockingLimit> blocking_limit_;
  bool yield_requested_ = false;
  int64_t fuel_limit_ = static_cast<int64_t>(kDefaultFuelBytes);
  int64_t fuel_left_ = static_cast<int64_t>(kDefaultFuelBytes);
};

template <class Fn>
typename BlockingFuture<Fn>::Result BlockingFuture<Fn>::get(AsyncContext& ctx) {
  check_call();
  ctx.wait_until([this] { return call_->is_done(); });
  std::shared_ptr<Call> call = std::move(call_);
  return call->take();
}

}  // namespace weir
