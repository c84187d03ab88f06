#include "watchdog.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include <pthread.h>
#include <unistd.h>

namespace weir::internal {

using Clock = std::chrono::steady_clock;

// How long a stuck worker has, once the execution failed, to leave its operator before the
// process ends.
constexpr std::chrono::milliseconds kGrace{1000};
// How long the Goodbye to the peers may take before the process ends anyway.
constexpr std::chrono::milliseconds kGoodbyeDeadline{5000};

Watchdog::Watchdog(std::shared_ptr<ProcessShared> process, std::chrono::milliseconds timeout)
    : process_(std::move(process)), timeout_(timeout) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "weir-watchdog");
    run();
  });
}

Watchdog::~Watchdog() {
  {
    weir::MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::optional<std::string> Watchdog::stuck(size_t w, Sample& sample, Clock::time_point now,
                                           std::optional<Clock::time_point> failed_at) {
  OperatorBeat& beat = process_->beat(w);
  const uint64_t seq = beat.seq.load(std::memory_order_acquire);
  if (seq != sample.seq || (seq & 1) != 0 || beat.depth.load(std::memory_order_relaxed) == 0) {
    sample = {seq, now};
    return std::nullopt;
  }
  // Once the execution has failed, every worker is on its way out: one that stays in an operator
  // run for kGrace after the failure (or after it was first seen there) is stuck too.
  const bool timed_out = now - sample.since >= timeout_;
  if (failed_at ? now - std::max(sample.since, *failed_at) < kGrace : !timed_out) {
    return std::nullopt;
  }
  // Under names_mu the worker cannot drop the dataflow whose names we read; the same seq after
  // reading proves it was in that operator (whose scope is alive) all along.
  weir::MutexLock lock(beat.names_mu);
  const std::string* op = beat.op.load(std::memory_order_relaxed);
  const std::string* dataflow = beat.dataflow.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (beat.seq.load(std::memory_order_relaxed) != seq || op == nullptr || dataflow == nullptr) {
    sample = {beat.seq.load(std::memory_order_relaxed), now};
    return std::nullopt;
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - sample.since);
  return absl::StrCat(
      "worker ", process_->first_worker() + w, " (process ", process_->process(),
      ") has been in one run of operator '", *op, "' in dataflow '", *dataflow, "' for ",
      ms.count(), " ms",
      timed_out ? absl::StrCat(" (--operator-timeout-ms ", timeout_.count(), ")")
                : absl::StrCat(", and has not left it ", kGrace.count(),
                               " ms after the execution failed"),
      ": it is stuck (a deadlock, a blocking call or an endless loop in the operator), and the "
      "process stops");
}

void Watchdog::run() {
  const size_t workers = process_->workers();
  std::vector<Sample> samples(workers, Sample{0, Clock::now()});
  const auto tick = std::clamp(std::min(timeout_, kGrace) / 8, std::chrono::milliseconds(10),
                               std::chrono::milliseconds(1000));
  std::optional<Clock::time_point> failed_at;
  weir::MutexLock lock(mu_);
  while (!stopping_) {
    wake_.wait_for(mu_, tick);
    if (stopping_) return;
    const auto now = Clock::now();
    if (!failed_at && process_->failed()) failed_at = now;
    for (size_t w = 0; w < workers; ++w) {
      std::optional<std::string> error = stuck(w, samples[w], now, failed_at);
      if (!error) continue;
      if (!failed_at) {
        // The other workers stop; the stuck one may yet leave its operator within kGrace, and
        // then the process ends in order (execute returns this error).
        process_->fail(absl::DeadlineExceededError(*error));
        failed_at = now;
        continue;
      }
      stop_process(*error);
    }
  }
}

void Watchdog::stop_process(const std::string& error) {
  // write(2), not stdio: the stuck worker may hold stdio's lock on stderr (blocked writing to a
  // pipe nobody reads).
  const std::string line = error + "\n";
  (void)!::write(STDERR_FILENO, line.data(), line.size());
  // Whatever the Goodbye meets (a peer that does not read, a transport thread that does not
  // end), the process ends.
  std::thread([] {
    std::this_thread::sleep_for(kGoodbyeDeadline);
    std::_Exit(1);
  }).detach();
  // Goodbye, with the execution's error, to every peer, so that the cluster fails naming the
  // operator instead of a lost process.
  if (Transport* transport = process_->transport(); transport != nullptr) {
    (void)transport->close();
  }
  std::_Exit(1);
}

}  // namespace weir::internal
