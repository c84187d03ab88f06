#include "reactor.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "weir/async/context.h"
#include "weir/check.h"
#include "weir/errno_message.h"
#include "weir/mutex.h"

namespace weir::internal {
namespace {

// What an epoll event of a watched descriptor carries: the descriptor and its registration.
uint64_t event_data(int fd, uint32_t registration) {
  return (uint64_t{registration} << 32) | static_cast<uint32_t>(fd);
}
// The timerfd's events carry this (no descriptor's registration does).
constexpr uint64_t kTimerEvent = ~uint64_t{0};

absl::Status errno_status(const char* what, int fd, int error) {
  return absl::InvalidArgumentError(std::string(what) + " of file descriptor " +
                                    std::to_string(fd) + " failed: " + weir::errno_message(error));
}

}  // namespace

Reactor& Reactor::instance() {
  // Never destroyed: fibers of workers that outlive static destruction may still cancel waits.
  static Reactor* reactor = new Reactor();
  return *reactor;
}

Reactor::Reactor() {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  WEIR_CHECK(epoll_fd_ >= 0) << "epoll_create1 failed: " << weir::errno_message(errno);
  // steady_clock is CLOCK_MONOTONIC: deadlines go to the timerfd as they are.
  timer_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  WEIR_CHECK(timer_fd_ >= 0) << "timerfd_create failed: " << weir::errno_message(errno);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kTimerEvent;
  WEIR_CHECK(::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, timer_fd_, &ev) == 0)
      << "epoll_ctl of the reactor's timerfd failed: " << weir::errno_message(errno);
  thread_ = std::thread([this] { run(); });
  thread_.detach();
}

int Reactor::arm(int fd) {
  auto it = waiters_.find(fd);
  uint32_t events = 0;
  if (it != waiters_.end()) {
    for (const IoWait* w : it->second) events |= w->events;
  }
  const auto reg = registered_.find(fd);
  const bool registered = reg != registered_.end();
  if (events == 0) {
    if (registered) ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    registered_.erase(fd);
    if (it != waiters_.end()) waiters_.erase(it);
    return 0;
  }
  // Re-arming keeps the registration's number; a new registration takes a new one.
  uint32_t registration = registered ? reg->second : next_registration_++;
  epoll_event ev{};
  ev.events = events | EPOLLONESHOT;
  ev.data.u64 = event_data(fd, registration);
  // The kernel forgets a descriptor when it is closed, so our bookkeeping may be stale either
  // way: fall back from MOD to ADD and from ADD to MOD.
  int rc = ::epoll_ctl(epoll_fd_, registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev);
  if (rc != 0 && registered && errno == ENOENT) {
    // The number names another file now: a new registration (the old one may live on).
    registration = next_registration_++;
    ev.data.u64 = event_data(fd, registration);
    rc = ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  } else if (rc != 0 && !registered && errno == EEXIST) {
    rc = ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
  }
  if (rc != 0) return errno;
  registered_[fd] = registration;
  return 0;
}

absl::Status Reactor::watch(IoWait* wait) {
  weir::MutexLock lock(mu_);
  if (waiters_.empty()) {
    // The first watched descriptor: start checking for closed ones.
    next_check_ = Clock::now() + kClosedDescriptorCheck;
  }
  waiters_[wait->fd].push_back(wait);
  const int error = arm(wait->fd);
  if (error == 0) {
    arm_timer();
    return absl::OkStatus();
  }
  std::erase(waiters_[wait->fd], wait);
  (void)arm(wait->fd);
  if (error == EPERM) {
    // A regular file or directory: epoll refuses it because reads and writes never block.
    wait->result.store(wait->events, std::memory_order_relaxed);
    wait->ready.store(true, std::memory_order_release);
    return absl::OkStatus();
  }
  return errno_status("epoll_ctl", wait->fd, error);
}

void Reactor::cancel(IoWait* wait) {
  weir::MutexLock lock(mu_);
  auto it = waiters_.find(wait->fd);
  if (it == waiters_.end()) return;
  if (std::erase(it->second, wait) > 0) (void)arm(wait->fd);
}

Reactor::TimerKey Reactor::add_timer(Clock::time_point deadline, SyncActivator activator) {
  weir::MutexLock lock(mu_);
  TimerKey key{deadline, next_timer_++};
  timers_.emplace(key, std::move(activator));
  if (deadline < armed_) arm_timer();
  return key;
}

void Reactor::cancel_timer(const TimerKey& key) {
  weir::MutexLock lock(mu_);
  // The timerfd may stay armed for it: a wake-up with nothing due re-arms it for the next.
  timers_.erase(key);
}

size_t Reactor::timers() const {
  weir::MutexLock lock(mu_);
  return timers_.size();
}

void Reactor::arm_timer() {
  Clock::time_point target =
      timers_.empty() ? Clock::time_point::max() : timers_.begin()->first.first;
  if (!waiters_.empty()) target = std::min(target, next_check_);
  if (target == armed_) return;
  itimerspec spec{};
  if (target != Clock::time_point::max()) {
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(target.time_since_epoch()).count();
    // Zero would disarm: a deadline at the clock's origin is long past anyway.
    spec.it_value.tv_sec = static_cast<time_t>(std::max<int64_t>(ns, 1) / 1000000000);
    spec.it_value.tv_nsec = static_cast<long>(std::max<int64_t>(ns, 1) % 1000000000);
  }
  WEIR_CHECK(::timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr) == 0)
      << "timerfd_settime failed: " << weir::errno_message(errno);
  armed_ = target;
}

void Reactor::fire_timers() {
  const auto now = Clock::now();
  while (!timers_.empty() && timers_.begin()->first.first <= now) {
    timers_.begin()->second.activate();
    timers_.erase(timers_.begin());
  }
}

void Reactor::wake_all(int fd, uint32_t result) {
  auto it = waiters_.find(fd);
  if (it == waiters_.end()) return;
  for (IoWait* w : it->second) {
    w->result.store(result, std::memory_order_relaxed);
    w->ready.store(true, std::memory_order_release);
    w->activator.activate();
  }
  waiters_.erase(it);
}

void Reactor::check_closed() {
  std::vector<int> closed;
  for (const auto& [fd, waiters] : waiters_) {
    uint32_t events = 0;
    for (const IoWait* w : waiters) events |= w->events;
    if (events == 0) continue;
    // Re-arming is harmless for a descriptor that is open (its waiters' events are one-shot
    // and armed anyway); the kernel refuses it for one that was closed (EBADF) or whose number
    // now names another file (ENOENT, or EPERM for a regular file).
    const auto reg = registered_.find(fd);
    if (reg == registered_.end()) {
      // Nothing would ever wake its waiters.
      closed.push_back(fd);
      continue;
    }
    epoll_event ev{};
    ev.events = events | EPOLLONESHOT;
    ev.data.u64 = event_data(fd, reg->second);
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev) != 0) closed.push_back(fd);
  }
  for (int fd : closed) {
    wake_all(fd, IoWait::kClosed);
    registered_.erase(fd);
  }
}

void Reactor::run() {
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  for (;;) {
    const int n = ::epoll_wait(epoll_fd_, events, kMaxEvents, -1);
    if (n < 0) {
      WEIR_CHECK(errno == EINTR) << "epoll_wait failed: " << weir::errno_message(errno);
      continue;
    }
    weir::MutexLock lock(mu_);
    for (int i = 0; i < n; ++i) {
      const uint64_t data = events[i].data.u64;
      if (data == kTimerEvent) {
        uint64_t expirations = 0;
        (void)::read(timer_fd_, &expirations, sizeof(expirations));
        continue;
      }
      const int fd = static_cast<int>(static_cast<uint32_t>(data));
      const auto reg = registered_.find(fd);
      // A registration we no longer know: of a descriptor that was closed (its open file lives
      // on elsewhere), whose number may name another file now.
      if (reg == registered_.end() || reg->second != static_cast<uint32_t>(data >> 32)) continue;
      const uint32_t ready = events[i].events;
      auto it = waiters_.find(fd);
      if (it == waiters_.end()) continue;
      auto& waiters = it->second;
      // Errors and hang-ups wake every waiter: await_fd reports them.
      std::erase_if(waiters, [&](IoWait* w) {
        if ((ready & (w->events | EPOLLERR | EPOLLHUP)) == 0) return false;
        w->result.store(ready, std::memory_order_relaxed);
        w->ready.store(true, std::memory_order_release);
        w->activator.activate();
        return true;
      });
      // One-shot: the descriptor is disarmed now; re-arm it for the waiters left.
      (void)arm(fd);
    }
    const auto now = Clock::now();
    // The timerfd is one-shot: once its deadline passed it is disarmed.
    if (armed_ <= now) armed_ = Clock::time_point::max();
    fire_timers();
    if (!waiters_.empty() && next_check_ <= now) {
      check_closed();
      next_check_ = now + kClosedDescriptorCheck;
    }
    arm_timer();
  }
}

}  // namespace weir::internal
