// RuntimeStats: what every worker of a process is doing, from the runtime's event log
// (weir/worker/logging.h): per operator activations and busy time, per channel records sent and
// received (to workers of this process and of others), each worker's park time and the
// operator it is running now.
//
//   auto stats = std::make_shared<weir::observe::RuntimeStats>();
//   weir::execute(config, [&](weir::Worker& worker) {
//     stats->attach(worker);  // Before building dataflows.
//     ...
//   });
//   for (const auto& op : stats->operators()) ...  // From any thread.
//
// The cost on a worker: its log events (two std::function calls and two clock reads per
// operator run, one call per batch sent or received) and relaxed single-writer counter updates;
// nothing allocates once every operator and channel was seen. Readers copy under a per-worker mutex
// that workers take only when an operator or channel is first seen or dropped.
//
// Thread safety: attach on the worker's thread; everything else from any thread.

#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "weir/mutex.h"
#include "weir/worker/worker.h"

namespace weir::observe {

class RuntimeStats {
 public:
  struct OperatorSample {
    size_t worker = 0;
    uint64_t id = 0;
    std::vector<size_t> address;
    std::string name;
    uint64_t activations = 0;
    std::chrono::nanoseconds busy{0};
  };
  struct ChannelSample {
    uint64_t id = 0;
    // Where it runs (ChannelBuilt): its scope's path (dataflow index first), from output
    // `source_port` of node `source` to input `target_port` of node `target`, and its pact.
    // Empty scope and pact: not seen built (RuntimeStats attached after its dataflow was).
    std::vector<size_t> scope;
    size_t source = 0, source_port = 0, target = 0, target_port = 0;
    std::string pact;
    // Summed over this process's workers. Local: to a worker of this process. Bytes as
    // Messages::bytes counts them (encoded to other processes, records' own size within).
    uint64_t sent_local = 0, sent_remote = 0, received = 0;
    uint64_t bytes_sent_local = 0, bytes_sent_remote = 0, bytes_received = 0;
  };
  struct WorkerSample {
    size_t worker = 0;
    std::chrono::nanoseconds parked{0};  // In all, including a park under way; never decreases.
    uint64_t parks = 0;
    bool is_parked = false;
    // The operator running now (innermost), if any; its name while it is known.
    std::optional<uint64_t> running;
    std::string running_name;
    std::chrono::nanoseconds running_for{0};
    uint64_t steps = 0;  // Operator runs, all operators.
  };

  RuntimeStats();
  ~RuntimeStats();
  RuntimeStats(const RuntimeStats&) = delete;
  RuntimeStats& operator=(const RuntimeStats&) = delete;

  // Registers this object as one of `worker`'s log sinks (Worker::also_log_to: WEIR_LOG's file
  // keeps its events); once per worker (a second call does nothing). The worker must not
  // outlive this object.
  void attach(Worker& worker);

  // Operators not yet dropped, by worker then id.
  std::vector<OperatorSample> operators() const;
  // Operators this object still keeps counts for, over all workers: those not yet dropped and
  // those dropped after one that is not (ids only grow; the dropped ones at the oldest end are
  // forgotten, so a run that restarts its dataflows for days does not keep them all).
  size_t operators_held() const;
  // Data channels no worker has dropped yet (built, or with records counted), by id; a channel
  // dropped is forgotten, so a run that restarts its dataflows does not keep them all.
  std::vector<ChannelSample> channels() const;
  // Channels this object keeps, over all workers (as operators_held).
  size_t channels_held() const;
  // Every attached worker, by index.
  std::vector<WorkerSample> workers() const;

 private:
  struct PerWorker;
  void on_event(PerWorker& w, const LogEvent& event);
  size_t held(bool channels) const;  // Channels (else operators) kept, over all workers.

  mutable weir::Mutex mu_;
  std::map<size_t, std::unique_ptr<PerWorker>> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace weir::observe
