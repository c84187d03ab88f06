// eventually(): waits for a condition that another thread (a replica, a server) brings about,
// with a generous deadline that fails loudly instead of a sleep.

#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace weir::testing {

// Polls `done` every 10 ms until it holds (true) or `deadline` has passed (then one last look).
inline bool eventually(const std::function<bool()>& done,
                       std::chrono::milliseconds deadline = std::chrono::seconds(30)) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

}  // namespace weir::testing
