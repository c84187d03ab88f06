// AsyncContext: what the body of an async operator uses to wait without blocking its worker.
//
// The body of an async operator (async_operator.h) runs on a fiber on its worker's thread. Every
// wait below suspends the fiber: the worker goes on running other operators and dataflows, and
// resumes the body the next time the operator is activated, when the body checks again whether
// what it waits for has happened. What activates the operator: new data or a frontier change on
// one of its inputs, a timer (sleep_for), a file descriptor turning ready (await_readable, through
// the process's IO reactor thread), a blocking call finishing (run_blocking, on a oneTBB task
// arena), or anyone holding its Activator or SyncActivator.
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

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"

#include "weir/async/fiber.h"
#include "weir/progress/timestamp.h"
#include "weir/worker/activator.h"

namespace weir {

class AsyncContext;
class Worker;
template <Timestamp T>
class AsyncOperator;

// The bytes a body may give on its outputs between two suspensions before giving yields.
inline constexpr size_t kDefaultFuelBytes = 1 << 20;

namespace internal {

// A call handed to the blocking pool: a pool thread runs `run()` and then `finish()`.
class BlockingCall {
 public:
  BlockingCall() = default;
  BlockingCall(const BlockingCall&) = delete;
  BlockingCall& operator=(const BlockingCall&) = delete;
  virtual ~BlockingCall() = default;

  // Runs the call on a pool thread; catches what it throws.
  virtual void run() noexcept = 0;

  bool is_done() const { return done_.load(std::memory_order_acquire); }
  // Called by the pool thread after run(): publishes the result and wakes the operator. The
  // call may be destroyed as soon as it is done, so nothing touches it afterwards.
  void finish() noexcept {
    SyncActivator activator = std::move(activator_);
    // Release pairs with the acquire in is_done(): the body sees the result run() stored.
    done_.store(true, std::memory_order_release);
    activator.activate();
  }
  // Blocks the calling thread until the call is done.
  void wait() const;

 private:
  friend class ::weir::AsyncContext;
  std::atomic<bool> done_{false};
  SyncActivator activator_;
};

template <class F, class R>
class BlockingCallFor final : public BlockingCall {
 public:
  explicit BlockingCallFor(F& fn) : fn_(&fn) {}

  void run() noexcept override {
    try {
      if constexpr (std::is_void_v<R>) {
        std::invoke(*fn_);
      } else {
        result_.emplace(std::invoke(*fn_));
      }
    } catch (...) {
      error_ = std::current_exception();
    }
  }

  // The result, or the exception rethrown. REQUIRES: is_done().
  R take() {
    if (error_) std::rethrow_exception(error_);
    if constexpr (!std::is_void_v<R>) return std::move(*result_);
  }

 private:
  F* fn_;
  std::conditional_t<std::is_void_v<R>, bool, std::optional<R>> result_{};
  std::exception_ptr error_;
};

// Waits for a blocking call that was started, whatever way the body leaves run_blocking: the
// call's function may refer to the fiber's stack, which must outlive it.
class BlockingCallGuard {
 public:
  explicit BlockingCallGuard(const BlockingCall& call) : call_(call) {}
  BlockingCallGuard(const BlockingCallGuard&) = delete;
  BlockingCallGuard& operator=(const BlockingCallGuard&) = delete;
  ~BlockingCallGuard() { call_.wait(); }

 private:
  const BlockingCall& call_;
};

}  // namespace internal

class AsyncContext {
 public:
  // Made by the async operator. `worker` must outlive the context.
  AsyncContext(Worker& worker, std::vector<size_t> path, SyncActivator activator, std::string name);
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
  // The same with a deadline: returns false if `deadline` passed first.
  template <class Pred>
  bool wait_until(Pred&& ready, std::chrono::steady_clock::time_point deadline) {
    if (ready()) return true;
    wake_at(deadline);
    for (;;) {
      if (ready()) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      suspend();
    }
  }
  void sleep_for(std::chrono::nanoseconds duration);
  void sleep_until(std::chrono::steady_clock::time_point deadline);
  // Suspends until `fd` is readable (or writable), or has an error or hang-up that the next read
  // or write will report. Errors: the descriptor cannot be watched (e.g. EBADF).
  absl::Status await_readable(int fd);
  absl::Status await_writable(int fd);

  // Runs `fn()` on a thread of the blocking pool (a oneTBB task arena) and suspends until it
  // returns; then returns its result, or rethrows its exception on the fiber. `fn` may refer to
  // the body's locals: if the operator is dropped while the call runs, unwinding the body waits
  // for the call to return.
  template <class F>
  std::invoke_result_t<F&> run_blocking(F&& fn) {
    using R = std::invoke_result_t<F&>;
    static_assert(!std::is_reference_v<R>, "run_blocking returns by value");
    internal::BlockingCallFor<std::remove_reference_t<F>, R> call(fn);
    start_blocking(call);
    internal::BlockingCallGuard guard(call);
    wait_until([&] { return call.is_done(); });
    return call.take();
  }

  // ---- fuel ----

  // Counts `bytes` given on an output; when the fuel since the last suspension runs out, yields.
  // Outputs call this; a body that computes for long without giving may call it too.
  void use_fuel(size_t bytes) {
    fuel_left_ -= static_cast<int64_t>(bytes);
    if (fuel_left_ < 0) yield();
  }
  void set_fuel(size_t bytes) { fuel_limit_ = fuel_left_ = static_cast<int64_t>(bytes); }

  // ---- about the operator ----

  const std::string& name() const { return name_; }
  size_t worker_index() const;
  size_t peers() const;
  // Activates the operator from any thread (e.g. a callback of a client library).
  const SyncActivator& sync_activator() const { return activator_; }

 private:
  template <Timestamp T>
  friend class AsyncOperator;

  // Asks the worker to activate the operator at `deadline`.
  void wake_at(std::chrono::steady_clock::time_point deadline);
  absl::Status await_fd(int fd, bool writable);
  void start_blocking(internal::BlockingCall& call);

  // For the operator: the fiber the body runs on, and whether the body asked to run again.
  void bind(Fiber* fiber) { fiber_ = fiber; }
  bool take_yield() { return std::exchange(yield_requested_, false); }

  Worker* worker_;
  std::vector<size_t> path_;
  SyncActivator activator_;
  std::string name_;
  Fiber* fiber_ = nullptr;
  bool yield_requested_ = false;
  int64_t fuel_limit_ = static_cast<int64_t>(kDefaultFuelBytes);
  int64_t fuel_left_ = static_cast<int64_t>(kDefaultFuelBytes);
};

}  // namespace weir
