// Worker: one thread that owns its dataflows, their operators and progress trackers.
//
// Every worker builds the same dataflows in the same order (channel ids match by creation order).
// `step` receives data and progress, runs activated operators and sends progress; `step_or_park`
// does the same but, when there is nothing to do, spins briefly and then sleeps until a message,
// an activation or a timer arrives (an idle worker does not burn CPU).
//
//   weir::execute(config, [](weir::Worker& worker) {
//     weir::ProbeHandle<uint64_t> probe;
//     auto input = worker.dataflow<uint64_t>([&](auto& scope) { ... });
//     for (uint64_t round = 0; round < 10; ++round) {
//       input.send(round);
//       input.advance_to(round + 1);
//       while (probe.less_than(round + 1)) worker.step();
//     }
//   });
//
// A failure anywhere (an exception in an operator, a dataflow that cannot be built, a lost peer)
// fails every worker: their dataflows are dropped, probes on them read as done, the next `step`,
// `step_or_park` or `advance_to`, `give_vec` or `flush` of an input handle throws ExecutionFailed
// (so that a loop like the one above, which does not ask `failed()`, ends instead of running its
// remaining rounds on nothing; `send` only stops sending), and `execute` returns the error. Do
// not call those from a destructor without asking `failed()` first.
//
// Thread safety: worker-local, except that its SyncActivators may be used from any thread.

#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <queue>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "weir/communication/allocator.h"
#include "weir/progress/timestamp.h"
#include "weir/worker/activator.h"
#include "weir/worker/introspection.h"
#include "weir/worker/logging.h"

namespace weir {

template <Timestamp T>
class Scope;

// A dataflow as the worker sees it.
class DataflowBase {
 public:
  virtual ~DataflowBase() = default;
  // Runs one round. Returns true while the dataflow is incomplete.
  virtual bool step() = 0;
  // Writes what holds the dataflow back (Scope::describe_progress).
  virtual void describe_progress(std::ostream& out) = 0;
  // Appends its operators and channels, with each port's frontier (Scope::describe_graph).
  virtual void describe_graph(DataflowGraph& out) = 0;
  virtual const std::string& name() const = 0;
};

// Asks every worker of this process to write its progress report (Worker::describe_progress) to
// stderr, at its next step. Async-signal-safe: a signal handler may call it. Workers park at most
// a second at a time, so a parked one answers within about a second. With WEIR_STALL_REPORT_AFTER
// set, `execute` makes SIGUSR1 call this.
void request_progress_reports();

namespace internal {
// WEIR_STALL_REPORT_AFTER: unset or empty, none; otherwise a number of seconds greater than 0
// (fractions allowed, spaces around it ignored, values beyond 10^9 s read as 10^9 s). Anything
// else is an InvalidArgument naming the variable, which `execute` returns before starting workers.
absl::StatusOr<std::optional<std::chrono::nanoseconds>> stall_report_after_from_env();
}  // namespace internal

// Thrown by Worker::step, step_or_park and input handles once the execution has failed; `execute`
// catches it (the failure is already recorded) and returns the execution's error. Code that wants
// to clean up in the closure can ask `failed()` instead, or catch it.
class ExecutionFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Worker {
 public:
  // `local_index`: the worker's index within its process (its global index follows from the
  // process's place in the cluster).
  Worker(size_t local_index, std::shared_ptr<ProcessShared> process);
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker();

  // This worker's index among all workers of the cluster, and their number.
  size_t index() const { return allocator_.index(); }
  size_t peers() const { return allocator_.peers(); }

  // Builds a dataflow with timestamps T: `build(Scope<T>&)` adds its operators. Returns what
  // `build` returns (typically input and probe handles).
  template <Timestamp T, class F>
  decltype(auto) dataflow(F&& build) {
    return dataflow_named<T>("Dataflow", std::forward<F>(build));
  }
  template <Timestamp T, class F>
  decltype(auto) dataflow_named(std::string name, F&& build);

  // Runs one round of every activated dataflow. Returns true if anything was activated.
  // Throws ExecutionFailed once the execution has failed.
  bool step();
  // Steps; if there was nothing to do, spins briefly (not in a process of a cluster, whose
  // transport threads need the cores) and then parks until something arrives or `timeout`
  // passes (none: no limit; zero: never park). Returns true while dataflows remain.
  bool step_or_park(std::optional<std::chrono::nanoseconds> timeout);
  // Steps until `done()` returns true, parking while idle.
  template <class F>
  void step_while(F&& keep_going) {
    while (keep_going() && !failed()) step_or_park(std::chrono::milliseconds(10));
  }

  bool has_dataflows() const { return !dataflows_.empty(); }

  // What holds each of this worker's dataflows back, for a human: per dataflow (and nested
  // scope) the operators holding capabilities and at which times, the messages in flight, and
  // the operator inputs whose frontier is not empty, with what feeds them. Built only when
  // called (the step path does not pay for it). Printed to stderr on request: see
  // request_progress_reports, and WEIR_STALL_REPORT_AFTER=SECONDS (a worker that did no work for
  // that long while dataflows remain prints it once per stall).
  std::string describe_progress();
  std::vector<size_t> installed_dataflows() const;
  // Drops a dataflow now, whatever its state: its operators are destroyed, releasing their
  // capabilities. Dropping it on only some workers leaves the others waiting for it.
  void drop_dataflow(size_t index);
  // The index the next dataflow will get.
  size_t next_dataflow_index() const { return next_dataflow_; }

  Activations& activations() { return activations_; }
  Allocator& allocator() { return allocator_; }
  Activator activator_for(std::vector<size_t> path) {
    return Activator(&activations_, std::move(path));
  }
  SyncActivator sync_activator_for(std::vector<size_t> path) const {
    return SyncActivator(allocator_.activation_queue(), std::move(path));
  }
  // Activates `path` once `delay` has passed.
  void activate_after(std::vector<size_t> path, std::chrono::nanoseconds delay);

  // Sends this worker's events to `sink` from now on (an empty sink turns logging off); see
  // logging.h. WEIR_LOG=FILE registers a sink that writes JSON lines before `fn` runs.
  void log_to(LogSink sink) { logger_.set_sink(std::move(sink)); }
  // Adds a sink, keeping the ones registered before (WEIR_LOG's file, another program's).
  void also_log_to(LogSink sink) { logger_.add_sink(std::move(sink)); }
  Logger& logger() { return logger_; }

  // Fails the whole execution (every worker) with `status`.
  void fail(absl::Status status);
  bool failed() const { return allocator_.process().failed(); }

  // Scopes call these around every run of an operator, so that the watchdog can tell which
  // operator a worker is stuck in (see OperatorBeat). `op` and `dataflow` must live until the
  // dataflow is dropped. Allocation-free once the nesting depth was reached before.
  void enter_operator(const std::string& op, const std::string& dataflow) {
    running_.emplace_back(&op, &dataflow);
    publish_running();
  }
  void leave_operator() {
    running_.pop_back();
    publish_running();
  }

 private:
  void publish_running() {
    // A sequence lock's write: odd while the fields change.
    const uint64_t seq = beat_.seq.load(std::memory_order_relaxed);
    beat_.seq.store(seq + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    beat_.depth.store(static_cast<uint32_t>(running_.size()), std::memory_order_relaxed);
    if (!running_.empty()) {
      beat_.op.store(running_.back().first, std::memory_order_relaxed);
      beat_.dataflow.store(running_.back().second, std::memory_order_relaxed);
    }
    beat_.seq.store(seq + 2, std::memory_order_release);
  }

  struct Timer {
    std::chrono::steady_clock::time_point deadline;
    std::vector<size_t> path;
    bool operator>(const Timer& other) const { return deadline > other.deadline; }
  };

  template <Timestamp T>
  void install(size_t index, std::unique_ptr<Scope<T>> scope);
  void fire_timers();
  void drop_all();
  [[noreturn]] void throw_failed();

  Allocator allocator_;
  OperatorBeat& beat_;
  std::vector<std::pair<const std::string*, const std::string*>> running_;  // (op, dataflow).
  Logger logger_;  // Declared before dataflows_: their operators log when dropped.
  Activations activations_;
  std::map<size_t, std::unique_ptr<DataflowBase>> dataflows_;
  size_t next_dataflow_ = 0;
  std::vector<size_t> active_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;

  // Progress reports (describe_progress) on request and on stalls.
  void report_progress(const char* why);
  uint64_t reports_seen_ = 0;  // Requests (request_progress_reports) answered.
  // Graph requests (weir/worker/introspection.h) answered.
  void publish_graph(uint64_t request);
  uint64_t graphs_seen_ = 0;
  std::optional<std::chrono::nanoseconds> stall_report_after_;  // WEIR_STALL_REPORT_AFTER.
  std::chrono::steady_clock::time_point last_work_;
  bool stall_reported_ = false;
};

}  // namespace weir

#include "weir/dataflow/scope.h"

namespace weir {

namespace internal {
template <Timestamp T>
class Dataflow final : public DataflowBase {
 public:
  explicit Dataflow(std::unique_ptr<Scope<T>> scope) : scope_(std::move(scope)) {}
  bool step() override { return scope_->step(); }
  void describe_progress(std::ostream& out) override { scope_->describe_progress(out, 1); }
  void describe_graph(DataflowGraph& out) override { scope_->describe_graph(out); }
  const std::string& name() const override { return scope_->name(); }

 private:
  std::unique_ptr<Scope<T>> scope_;
};
}  // namespace internal

template <Timestamp T>
void Worker::install(size_t index, std::unique_ptr<Scope<T>> scope) {
  absl::Status status = scope->build();
  if (!status.ok()) {
    fail(std::move(status));
    return;
  }
  dataflows_.emplace(index, std::make_unique<internal::Dataflow<T>>(std::move(scope)));
}

template <Timestamp T, class F>
decltype(auto) Worker::dataflow_named(std::string name, F&& build) {
  const size_t index = next_dataflow_++;
  auto scope = std::make_unique<Scope<T>>(*this, std::vector<size_t>{index}, std::move(name));
  if (logger_.active()) logger_.log(DataflowCreated{index, scope->name()});
  using Result = std::invoke_result_t<F&, Scope<T>&>;
  if constexpr (std::is_void_v<Result>) {
    build(*scope);
    install<T>(index, std::move(scope));
  } else {
    Result result = build(*scope);
    install<T>(index, std::move(scope));
    return result;
  }
}

}  // namespace weir
