#include "reactor.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include <sys/epoll.h>
#include <unistd.h>

#include "weir/check.h"
#include "weir/errno_message.h"
#include "weir/mutex.h"

namespace weir::internal {
namespace {

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
  thread_ = std::thread([this] { run(); });
  thread_.detach();
}

int Reactor::arm(int fd) {
  auto it = waiters_.find(fd);
  uint32_t events = 0;
  if (it != waiters_.end()) {
    for (const IoWait* w : it->second) events |= w->events;
  }
  const bool registered = registered_.contains(fd);
  if (events == 0) {
    if (registered) ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    registered_.erase(fd);
    if (it != waiters_.end()) waiters_.erase(it);
    return 0;
  }
  epoll_event ev{};
  ev.events = events | EPOLLONESHOT;
  ev.data.fd = fd;
  // The kernel forgets a descriptor when it is closed, so our bookkeeping may be stale either
  // way: fall back from MOD to ADD and from ADD to MOD.
  int rc = ::epoll_ctl(epoll_fd_, registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev);
  if (rc != 0 && registered && errno == ENOENT) {
    rc = ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  } else if (rc != 0 && !registered && errno == EEXIST) {
    rc = ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
  }
  if (rc != 0) return errno;
  registered_.insert(fd);
  return 0;
}

absl::Status Reactor::watch(IoWait* wait) {
  weir::MutexLock lock(mu_);
  waiters_[wait->fd].push_back(wait);
  const int error = arm(wait->fd);
  if (error == 0) return absl::OkStatus();
  std::erase(waiters_[wait->fd], wait);
  (void)arm(wait->fd);
  if (error == EPERM) {
    // A regular file or directory: epoll refuses it because reads and writes never block.
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
      const int fd = events[i].data.fd;
      const uint32_t ready = events[i].events;
      auto it = waiters_.find(fd);
      if (it == waiters_.end()) continue;
      auto& waiters = it->second;
      // Errors and hang-ups wake every waiter: its next read or write reports them.
      std::erase_if(waiters, [&](IoWait* w) {
        if ((ready & (w->events | EPOLLERR | EPOLLHUP)) == 0) return false;
        w->ready.store(true, std::memory_order_release);
        w->activator.activate();
        return true;
      });
      // One-shot: the descriptor is disarmed now; re-arm it for the waiters left.
      (void)arm(fd);
    }
  }
}

}  // namespace weir::internal
