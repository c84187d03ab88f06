// The first SIGINT or SIGTERM asks a command's run to stop (it stops cleanly: what is durable
// stays); a second one ends the process. One per process at a time.

#pragma once

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <memory>

namespace weir::tools {

class StopOnSignals {
 public:
  explicit StopOnSignals(std::shared_ptr<std::atomic<bool>> stop) : stop_(std::move(stop)) {
    flag() = stop_.get();
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
  }
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;
  ~StopOnSignals() {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    flag() = nullptr;
  }

 private:
  static std::atomic<bool>*& flag() {
    static std::atomic<bool>* stop = nullptr;
    return stop;
  }
  static void on_signal(int signal) {
    if (flag() != nullptr && !flag()->exchange(true)) return;
    std::_Exit(128 + signal);
  }

  std::shared_ptr<std::atomic<bool>> stop_;
};

}  // namespace weir::tools
