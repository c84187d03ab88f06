#include "weir/async/context.h"

#include "blocking_pool.h"
#include "reactor.h"
#include <sys/epoll.h>

#include "weir/check.h"
#include "weir/worker/worker.h"

namespace weir {

AsyncContext::AsyncContext(Worker& worker, std::vector<size_t> path, SyncActivator activator,
                           std::string name)
    : worker_(&worker),
      path_(std::move(path)),
      activator_(std::move(activator)),
      name_(std::move(name)) {}

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

void AsyncContext::wake_at(std::chrono::steady_clock::time_point deadline) {
  worker_->activate_after(path_, deadline - std::chrono::steady_clock::now());
}

void AsyncContext::sleep_for(std::chrono::nanoseconds duration) {
  sleep_until(std::chrono::steady_clock::now() + duration);
}

void AsyncContext::sleep_until(std::chrono::steady_clock::time_point deadline) {
  if (std::chrono::steady_clock::now() >= deadline) {
    yield();
    return;
  }
  wake_at(deadline);
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
  if (absl::Status status = reactor.watch(&wait); !status.ok()) return status;
  // Whatever way the body leaves (the operator may be dropped while it waits), the reactor must
  // forget `wait` before it goes out of scope.
  struct Cancel {
    internal::Reactor& reactor;
    internal::IoWait& wait;
    ~Cancel() { reactor.cancel(&wait); }
  } cancel{reactor, wait};
  wait_until([&] { return wait.ready.load(std::memory_order_acquire); });
  return absl::OkStatus();
}

void AsyncContext::start_blocking(internal::BlockingCall& call) {
  WEIR_CHECK(fiber_ != nullptr && Fiber::current() == fiber_)
      << "async operator '" << name_ << "': run_blocking must be called from its own body";
  call.activator_ = activator_;
  internal::submit_blocking(&call);
}

size_t AsyncContext::worker_index() const { return worker_->index(); }
size_t AsyncContext::peers() const { return worker_->peers(); }

}  // namespace weir
