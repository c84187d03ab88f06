#include "watchdog.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include <pthread.h>

namespace weir::internal {

using Clock = std::chrono::steady_clock;

// How long a stuck worker has, once the execution failed, to leave its operator before the
// process ends.
constexpr std::chrono::milliseconds kGrace{1000};

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

std::optional<std::string> Watchdog::stuck(size_t w, Sample& sample, Clock::time_point now) {
  OperatorBeat& beat = process_->beat(w);
  const uint64_t seq = beat.seq.load(std::memory_order_acquire);
  if (seq != sample.seq || (seq & 1) != 0 || beat.depth.load(std::memory_order_relaxed) == 0) {
    sample = {seq, now};
    return std::nullopt;
  }
  if (now - sample.since < timeout_) return std::nullopt;
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
  return absl::StrCat("worker ", process_->first_worker() + w, " (process ", process_->process(),
                      ") has been in one run of operator '", *op, "' in dataflow '", *dataflow,
                      "' for ", ms.count(), " ms (--operator-timeout-ms ", timeout_.count(),
                      "): it is stuck (a deadlock, a blocking call or an endless loop in the "
                      "operator), and the process stops");
}

bool Watchdog::still_in(size_t w, uint64_t seq) const {
  return process_->beat(w).seq.load(std::memory_order_acquire) == seq;
}

void Watchdog::run() {
  const size_t workers = process_->workers();
  std::vector<Sample> samples(workers, Sample{0, Clock::now()});
  const auto tick =
      std::clamp(timeout_ / 8, std::chrono::milliseconds(10), std::chrono::milliseconds(1000));
  weir::MutexLock lock(mu_);
  while (!stopping_) {
    wake_.wait_for(mu_, tick);
    if (stopping_) return;
    const auto now = Clock::now();
    for (size_t w = 0; w < workers; ++w) {
      std::optional<std::string> error = stuck(w, samples[w], now);
      if (!error) continue;
      process_->fail(absl::DeadlineExceededError(*error));
      // The other workers stop; the stuck one may yet leave its operator, and then the process
      // ends in order (execute returns the error).
      const uint64_t seq = samples[w].seq;
      const auto deadline = Clock::now() + kGrace;
      while (Clock::now() < deadline && still_in(w, seq) && !stopping_) {
        wake_.wait_for(mu_, std::chrono::milliseconds(10));
      }
      if (!still_in(w, seq) || stopping_) return;
      std::fprintf(stderr, "%s\n", error->c_str());
      std::fflush(stderr);
      // Goodbye, with the error, to every peer (close sends the execution's failure), so that
      // the cluster fails naming the operator instead of a lost process.
      if (Transport* transport = process_->transport(); transport != nullptr) {
        (void)transport->close();
      }
      std::_Exit(1);
    }
  }
}

}  // namespace weir::internal
