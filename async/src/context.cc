#include "weir/async/context.h"

#include <cerrno>
#include <string>

#include "blocking_pool.h"
#include "reactor.h"
#include <sys/epoll.h>
#include <sys/socket.h>

#include "weir/check.h"
#include "weir/errno_message.h"
#include "weir/worker/worker.h"

namespace weir {

namespace internal {

ScopedTimer::ScopedTimer(const SyncActivator& activator,
                         std::chrono::steady_clock::time_point deadline) {
  const auto key = Reactor::instance().add_timer(deadline, activator);
  deadline_ = key.first;
  id_ = key.second;
}

ScopedTimer::~ScopedTimer() { Reactor::instance().cancel_timer({deadline_, id_}); }

}  // namespace internal

size_t async_timers_pending_in_process() { return internal::Reactor::instance().timers(); }

AsyncContext::AsyncContext(Worker& worker, SyncActivator activator, std::string name)
    : worker_(&worker), activator_(std::move(activator)), name_(std::move(name)) {}

void AsyncContext::suspend() {
  WEIR_CHECK(fiber_ != nullptr && Fiber::current() == fiber_)
      << "async operator '" << name_ << "': waits must be called from its own body";
  fiber_->suspend();
  fuel_left_ = fuel_limit_;
}

void AsyncContext::yield() {
  yield_requested_ = true;
  suspend();
}

void AsyncContext::sleep_for(std::chrono::nanoseconds duration) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point now = Clock::now();
  // Saturating: now + duration past the clock's range would wrap into the past (and return at
  // once); such a sleep lasts until the body is unwound.
  sleep_until(duration >= Clock::time_point::max() - now ? Clock::time_point::max()
                                                         : now + duration);
}

void AsyncContext::sleep_until(std::chrono::steady_clock::time_point deadline) {
  if (std::chrono::steady_clock::now() >= deadline) {
    yield();
    return;
  }
  // Cancelled however the sleep ends (the operator may be dropped while it sleeps).
  internal::ScopedTimer timer(activator_, deadline);
  while (std::chrono::steady_clock::now() < deadline) suspend();
}

absl::Status AsyncContext::await_readable(int fd) { return await_fd(fd, false); }
absl::Status AsyncContext::await_writable(int fd) { return await_fd(fd, true); }

absl::Status AsyncContext::await_fd(int fd, bool writable) {
  WEIR_CHECK(fiber_ != nullptr && Fiber::current() == fiber_)
      << "async operator '" << name_ << "': waits must be called from its own body";
  internal::IoWait wait;
  wait.fd = fd;
  wait.events = writable ? EPOLLOUT : EPOLLIN;
  wait.activator = activator_;
  auto& reactor = internal::Reactor::instance();
  if (absl::Status status = reactor.watch(&wait); !status.ok()) {
    return absl::Status(status.code(), "async operator '" + name_ + "': cannot await " +
                                           (writable ? "writing" : "reading") + ": " +
                                           std::string(status.message()));
  }
  {
    // Whatever way the body leaves (the operator may be dropped while it waits), the reactor
    // must forget `wait` before it goes out of scope.
    struct Cancel {
      internal::Reactor& reactor;
      internal::IoWait& wait;
      ~Cancel() { reactor.cancel(&wait); }
    } cancel{reactor, wait};
    wait_until([&] { return wait.ready.load(std::memory_order_acquire); });
  }
  const uint32_t result = wait.result.load(std::memory_order_relaxed);
  const std::string what = "async operator '" + name_ + "': file descriptor " + std::to_string(fd);
  if ((result & internal::IoWait::kClosed) != 0) {
    return absl::UnavailableError(what + " was closed while awaited " +
                                  (writable ? "for writing" : "for reading"));
  }
  // Readable data (or end of file) before a hang-up is read first; a write after an error or a
  // hang-up would fail.
  if (!writable && (result & EPOLLIN) != 0) return absl::OkStatus();
  if ((result & EPOLLERR) != 0) {
    int error = 0;
    socklen_t length = sizeof(error);
    std::string detail = "error condition (EPOLLERR)";
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error != 0) {
      detail += ": " + weir::errno_message(error);
    }
    return absl::UnavailableError(what + " has an " + detail);
  }
  if ((result & EPOLLHUP) != 0) return absl::UnavailableError(what + " hung up (EPOLLHUP)");
  return absl::OkStatus();
}

void AsyncContext::start_blocking(std::shared_ptr<internal::BlockingCall> call) {
  WEIR_CHECK(fiber_ != nullptr && Fiber::current() == fiber_)
      << "async operator '" << name_ << "': run_blocking must be called from its own body";
  call->activator_ = activator_;
  internal::submit_blocking(std::move(call), blocking_limit_);
}

void AsyncContext::set_blocking_limit(std::shared_ptr<internal::BlockingLimit> limit,
                                      size_t max_in_flight) {
  limit->set_max(max_in_flight);
  blocking_limit_ = std::move(limit);
}

size_t AsyncContext::worker_index() const { return worker_->index(); }
size_t AsyncContext::peers() const { return worker_->peers(); }

}  // namespace weir
