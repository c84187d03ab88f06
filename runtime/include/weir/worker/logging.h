// Event logging: what a worker's runtime does, as a stream of structured events (timely's
// logging streams: operates, shutdown, schedule, messages, progress, park).
//
// Off by default. A worker logs once a sink is registered, by the program or by WEIR_LOG:
//
//   weir::execute(config, [](weir::Worker& worker) {
//     worker.log_to([](const weir::LogEvent& event) {
//       if (const auto* stop = std::get_if<weir::ScheduleStop>(&event.data)) { ... }
//     });
//     worker.dataflow<uint64_t>(...);
//   });
//
// or `WEIR_LOG=FILE program`: every worker of the process appends JSON lines to FILE (see
// docs/guide.md, "Logging", for the fields). Events of dataflows built before the sink was
// registered carry operator ids without an OperatorBuilt event.
//
// When no sink is registered each hook costs one load and one predictable branch
// (`Logger::active()`); nothing is built or timed.
//
// Thread safety: worker-local. The sink runs on the worker's thread, inside the runtime: it must
// not step the worker or build dataflows, and the views an event holds (address, name) are valid
// only during the call.

#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace weir {

// An operator was built. `id` is unique on its worker (every worker gives the same operator the
// same id when they build the same dataflows); `address` is the path of its scope (dataflow
// index, then nested scope indices) followed by its index in that scope.
struct OperatorBuilt {
  uint64_t id = 0;
  std::span<const size_t> address;
  std::string_view name;
};
// An operator was destroyed (its dataflow completed or was dropped).
struct OperatorDropped {
  uint64_t id = 0;
  std::span<const size_t> address;
};
// The runtime calls the operator (a nested scope's start and stop enclose its operators').
struct ScheduleStart {
  uint64_t id = 0;
};
// The call returned, and the operator's outputs were flushed; `duration` since the start.
struct ScheduleStop {
  uint64_t id = 0;
  std::chrono::nanoseconds duration{0};
};
// Data channel `id` was built in the scope at `scope` (dataflow index, then nested scope
// indices): from output `source_port` of node `source` to input `target_port` of node `target`
// (node 0 is the scope's own boundary; an operator's address is `scope` and its node), through
// the pact named `pact` ("pipeline", "exchange", ...).
struct ChannelBuilt {
  uint64_t id = 0;
  std::span<const size_t> scope;
  size_t source = 0, source_port = 0;
  size_t target = 0, target_port = 0;
  std::string_view pact;
};
// Channel `id` was released with its scope (data channels, and each scope's progress channel).
struct ChannelDropped {
  uint64_t id = 0;
};
// One batch of `records` records on data channel `channel`, from worker `source` to worker
// `target`: sent (pushed by the source's pacts) or received (pulled by the target's operator).
// `bytes`: to or from another process, the batch's encoding (what crosses the wire); within the
// process, its records' own size (records × sizeof(record): what they own elsewhere, such as a
// string's characters, is not counted), as flow control counts them.
struct Messages {
  bool is_send = false;
  uint64_t channel = 0;
  size_t source = 0;
  size_t target = 0;
  size_t records = 0;
  size_t bytes = 0;
};
// One progress batch of a dataflow (channel: its progress channel): sent by this worker to every
// worker, or received from worker `source`. `updates` pointstamp changes of the dataflow's root
// scope, and `nested` batches of its nested scopes riding along.
struct ProgressBatch {
  bool is_send = false;
  uint64_t channel = 0;
  size_t source = 0;
  size_t updates = 0;
  size_t nested = 0;
};
// The worker found nothing to do and sleeps for at most `timeout` (none: until woken).
struct Park {
  std::optional<std::chrono::nanoseconds> timeout;
};
// The worker woke up.
struct Unpark {};
// Dataflow `index` was created (before its operators are built).
struct DataflowCreated {
  size_t index = 0;
  std::string_view name;
};
// Dataflow `index` completed: nothing is left in it and its operators were dropped.
struct DataflowCompleted {
  size_t index = 0;
};
// Dataflow `index` was dropped before it completed (drop_dataflow, or a failed execution).
struct DataflowDropped {
  size_t index = 0;
};

using LogEventData = std::variant<OperatorBuilt, OperatorDropped, ScheduleStart, ScheduleStop,
                                  Messages, ProgressBatch, Park, Unpark, DataflowCreated,
                                  DataflowCompleted, DataflowDropped, ChannelBuilt, ChannelDropped>;

struct LogEvent {
  size_t worker = 0;  // The worker's global index.
  // Steady clock, since the process's first logged event; never less than the worker's event
  // before. A Messages event carries the time of the worker's event before it (the start of the
  // operator run it happens in, mostly), saving a clock read per batch.
  std::chrono::nanoseconds time;
  LogEventData data;
};

using LogSink = std::function<void(const LogEvent&)>;

// The event's kind as written in JSON: "operator_built", "schedule_stop", "messages", ...
std::string_view kind_name(const LogEventData& data);
// One JSON object on one line, without the newline:
//   {"time_ns":1234,"worker":0,"event":"schedule_stop","id":3,"duration_ns":850}
void append_json(const LogEvent& event, std::string& out);

// A worker's logger: the sink, and what the hooks need (operator ids, open schedules).
class Logger {
 public:
  explicit Logger(size_t worker) : worker_(worker) {}
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  // A logger that is never active (for channel ends made outside a worker).
  static Logger& inactive();

  // The one check on the hot path: every hook is `if (log.active()) [[unlikely]] log.…`.
  bool active() const { return active_; }
  // Replaces the sink; an empty one turns logging off. The old sink is destroyed here.
  void set_sink(LogSink sink);
  // Adds a sink: every event goes to the ones set before (in order), then to this one.
  void add_sink(LogSink sink);

  // REQUIRES: active(), for these.
  void log(const LogEventData& data);
  void schedule_start(uint64_t id);
  void schedule_stop(uint64_t id);

  // Runtime-internal, for scopes: gives nodes 1.. of the scope at `scope_path` ids and, when
  // active, logs them built (`names[node]`); logs them dropped.
  void operators_built(std::span<const size_t> scope_path, std::span<const std::string> names,
                       std::vector<uint64_t>& ids);
  void operators_dropped(std::span<const size_t> scope_path, std::span<const uint64_t> ids);

 private:
  size_t worker_;
  bool active_ = false;
  LogSink sink_;
  uint64_t next_operator_id_ = 0;
  std::vector<std::chrono::steady_clock::time_point> starts_;  // Open schedules, innermost last.
  std::chrono::nanoseconds last_time_{0};  // The last event's time (a batch's, without a read).

  std::vector<size_t> address_;  // Scratch for operator events.
};

}  // namespace weir
