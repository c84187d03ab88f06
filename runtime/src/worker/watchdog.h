// Watchdog: finds a worker stuck in one run of one operator (a deadlock, a blocking call, an
// endless loop) and stops the process, naming the operator.
//
// A stuck worker cannot be interrupted, and its process cannot end in order (execute waits for
// every worker), while its transport goes on sending heartbeats: its peers would wait for it for
// ever. So once a worker has been in the same operator run for `timeout`, the watchdog fails the
// execution with an error naming the worker, the operator and its dataflow; if the worker has
// not left the operator one second later, it writes the error to stderr, says Goodbye (with the
// execution's error) to every peer through the transport and ends the process with exit status
// 1 (within 5 s, whatever the Goodbye meets). Once the execution has failed (for any reason),
// a worker that stays in one operator run for a second is stuck the same way.
//
// Thread safety: the constructor starts the thread; the destructor stops and joins it.

#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "weir/communication/internal/process_shared.h"
#include "weir/mutex.h"

namespace weir::internal {

class Watchdog {
 public:
  Watchdog(std::shared_ptr<ProcessShared> process, std::chrono::milliseconds timeout);
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog();

 private:
  struct Sample {
    uint64_t seq = 0;  // The worker's OperatorBeat::seq when first seen with this value.
    std::chrono::steady_clock::time_point since;
  };
  void run();
  // The error for local worker `w` if it has been in one operator run (its seq unchanged since
  // `sample`) for timeout_, or for a second since `failed_at` (the execution failed); updates
  // the sample otherwise.
  std::optional<std::string> stuck(size_t w, Sample& sample,
                                   std::chrono::steady_clock::time_point now,
                                   std::optional<std::chrono::steady_clock::time_point> failed_at);
  // Writes `error`, says Goodbye to the peers and ends the process (exit status 1).
  [[noreturn]] void stop_process(const std::string& error);

  const std::shared_ptr<ProcessShared> process_;
  const std::chrono::milliseconds timeout_;
  weir::Mutex mu_;
  weir::CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace weir::internal
