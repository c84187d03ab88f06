// Scope<T>: a dataflow graph of operators with timestamps T, and the machinery that runs it.
//
// Building: operators are added through OperatorBuilder (or any Operator<T> implementation);
// streams connect output ports to input ports through pacts. `build` checks the graph (every
// cycle must advance time), makes the progress tracker and counts every operator's initial
// capabilities.
//
// Running, one `step` per worker step:
//   1. fold the progress batches received from every worker (FIFO per sender) into the tracker;
//   2. propagate, and deliver input-frontier changes to operators (activating those that care);
//   3. run activated operators in index order (an operator activated by an earlier one in the
//      same pass runs in that pass), flush their outputs and collect their progress;
//   4. broadcast this worker's progress changes as one batch to every worker, itself included.
// A scope is complete when no location holds a capability or a message in flight, no operator
// asked to run again, and every nested scope inside it is complete (at every depth: inner work
// that leads to no output of a nested scope is invisible to the parent's tracker).
//
// Nested scopes (see nested.h) are operators of their parent with their own tracker. They
// exchange no progress of their own: their changes ride in the root scope's batch (tagged with
// their path), so one worker step is still one atomic batch, and their parent sees them as the
// capabilities of an operator (their local changes projected onto the scope's outputs).
//
// Thread safety: worker-local.

#pragma once

#include <algorithm>
#include <any>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"

#include "weir/check.h"
#include "weir/communication/allocator.h"
#include "weir/communication/channel.h"
#include "weir/communication/codec.h"
#include "weir/communication/internal/fifo.h"
#include "weir/dataflow/operator.h"
#include "weir/dataflow/pact.h"
#include "weir/dataflow/port.h"
#include "weir/mutex.h"
#include "weir/progress/change_batch.h"
#include "weir/progress/location.h"
#include "weir/progress/reachability.h"
#include "weir/status.h"
#include "weir/usage_error.h"
#include "weir/worker/activator.h"
#include "weir/worker/worker.h"

namespace weir {

template <Timestamp T, class D>
class Stream;

// Progress changes of a nested scope, carried in the root scope's batch. Immutable once sent.
class NestedBatchBase {
 public:
  virtual ~NestedBatchBase() = default;
  virtual void encode(std::string& out) const = 0;
};
// Progress changes, encoded field by field (a location's flag must decode to a valid bool).
template <Timestamp T>
using ProgressUpdates = std::vector<std::pair<std::pair<Location, T>, int64_t>>;
template <Timestamp T>
void encode_updates(const ProgressUpdates<T>& updates, std::string& out) {
  Codec<uint64_t>::encode(updates.size(), out);
  for (const auto& [key, diff] : updates) {
    Codec<Location>::encode(key.first, out);
    Codec<T>::encode(key.second, out);
    Codec<int64_t>::encode(diff, out);
  }
}
template <Timestamp T>
bool decode_updates(std::string_view& in, ProgressUpdates<T>& updates) {
  uint64_t n = 0;
  // Every update takes at least a location and a diff: a count beyond that is refused before
  // anything is allocated for it.
  constexpr size_t kMinUpdateBytes = 2 * sizeof(uint32_t) + 1 + sizeof(int64_t);
  if (!Codec<uint64_t>::decode(in, n) || n > in.size() / kMinUpdateBytes) return false;
  updates.resize(n);
  for (auto& [key, diff] : updates) {
    if (!Codec<Location>::decode(in, key.first) || !Codec<T>::decode(in, key.second) ||
        !Codec<int64_t>::decode(in, diff)) {
      return false;
    }
  }
  return true;
}

template <Timestamp T>
struct NestedBatch final : NestedBatchBase {
  ProgressUpdates<T> updates;
  void encode(std::string& out) const override { encode_updates<T>(updates, out); }
};
// A nested batch from another process, decoded by the scope it is for.
struct EncodedNestedBatch final : NestedBatchBase {
  std::string bytes;
  void encode(std::string& out) const override { out.append(bytes); }
};
struct NestedProgress {
  std::vector<uint32_t>
      path;  // Operator indices from the scope that holds it down to the nested scope.
  std::shared_ptr<const NestedBatchBase> batch;
};

// An operator that is a scope. It accepts progress batches for itself and the scopes inside it,
// and instead of reporting capabilities through the progress protocol, it tells its parent's
// tracker directly, on each worker, what its own view of the inner pointstamps projects onto
// its outputs (see nested.h for why).
class ProgressHost {
 public:
  virtual void receive_nested(std::span<const uint32_t> path,
                              std::shared_ptr<const NestedBatchBase> batch) = 0;
  // The projection of the initial inner pointstamps, (output, outer time, count), once.
  virtual std::vector<std::tuple<uint32_t, std::any, int64_t>> take_initial_projection() = 0;
  // True while the scope (or one inside it) holds a capability or a message in flight, in this
  // worker's view, or has an operator that asked to run again. What leads to no output of the
  // scope is invisible to its parent's tracker: the parent asks this instead.
  virtual bool is_incomplete() const = 0;
  // Writes the scope's progress report (see Scope::describe_progress), indented by `depth`.
  virtual void describe_progress(std::ostream& out, size_t depth) = 0;
  // Appends the scope's operators and channels (see Scope::describe_graph).
  virtual void describe_graph(DataflowGraph& out) = 0;
  // Flow control: `gate` (of a channel the scope's outputs feed in its parent) holds back the
  // operators inside that feed the scope's outputs. The scope itself always runs: skipping it
  // would drop the activations of the operators inside it for that step.
  virtual void hold_outputs(CreditGate* gate) = 0;

 protected:
  ~ProgressHost() = default;
};

namespace internal {
// True if one of `gates` is blocked; `waiter` is then parked at it (once), to be activated when
// it opens.
inline bool wait_on(const std::vector<CreditGate*>& gates,
                    const std::shared_ptr<GateWaiter>& waiter) {
  for (CreditGate* gate : gates) {
    if (!gate->blocked()) continue;
    // Parked at some gate already: its opening activates the waiter.
    if (waiter->parked.load(std::memory_order_acquire)) return true;
    waiter->parked.store(true, std::memory_order_relaxed);
    if (gate->park(waiter)) return true;
    waiter->parked.store(false, std::memory_order_relaxed);  // It opened meanwhile.
  }
  return false;
}
}  // namespace internal

template <Timestamp T>
class Scope : public LocalActivator {
 public:
  using Time = T;

  Scope(Worker& worker, std::vector<size_t> path, std::string name)
      : worker_(worker), path_(std::move(path)), name_(std::move(name)) {
    children_.emplace_back();  // Node 0: the scope itself.
    names_.emplace_back(name_);
    ports_.emplace_back();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  virtual ~Scope() {
    // Operators go first: their capabilities and handles point into ports and progress.
    for (auto& child : children_) child.reset();
    Logger& log = worker_.logger();
    if (built_) log.operators_dropped(path_, op_ids_);
    for (uint64_t id : channels_) {
      worker_.allocator().process().release_channel(id);
      if (log.active()) log.log(ChannelDropped{id});
    }
  }

  Worker& worker() const { return worker_; }
  size_t index() const { return worker_.index(); }
  size_t peers() const { return worker_.peers(); }
  const std::string& name() const { return name_; }
  std::span<const size_t> path() const { return path_; }

  // ---- building ----

  // Reserves the index of a new operator named `name`.
  uint32_t reserve_node(std::string name) {
    WEIR_CHECK(!built_) << "scope " << name_ << " is already built";
    children_.emplace_back();
    names_.push_back(std::move(name));
    ports_.emplace_back();
    return static_cast<uint32_t>(children_.size() - 1);
  }
  void add_operator(uint32_t node, std::unique_ptr<Operator<T>> op) {
    WEIR_CHECK(node < children_.size() && node > 0 && !children_[node]) << "bad operator index";
    children_[node] = std::move(op);
  }
  const std::string& operator_name(uint32_t node) const { return names_[node]; }
  // Fails the execution naming operator `node`, whose constructor threw `what` (`rule`: a
  // UsageError). The builder rethrows; `execute` keeps this first Status.
  void fail_building(uint32_t node, std::string_view what, bool rule) { fail(node, what, rule); }

  // Creates output port `port` of operator `node`. Ports are created in order.
  template <class D>
  OutputPort<T, D>& add_output_port(uint32_t node) {
    auto port = std::make_unique<OutputPort<T, D>>();
    auto* raw = port.get();
    ports_[node].push_back(std::move(port));
    return *raw;
  }
  template <class D>
  OutputPort<T, D>& output_port(Source source) {
    WEIR_CHECK(source.node < ports_.size() && source.port < ports_[source.node].size())
        << "no output port " << Location(source) << " in scope " << name_;
    auto* port = dynamic_cast<OutputPort<T, D>*>(ports_[source.node][source.port].get());
    WEIR_CHECK(port != nullptr) << "output port " << Location(source) << " has another type";
    return *port;
  }

  // Connects `source` to `target` through `pact`; returns the target's channel end.
  template <class D, class Pact>
  std::shared_ptr<ChannelEnd<T, D>> connect(Source source, Target target, const Pact& pact) {
    WEIR_CHECK(!built_) << "scope " << name_ << " is already built";
    ChannelSite site;
    site.index = index();
    site.peers = peers();
    site.process = &worker_.allocator().process();
    site.channel_id = worker_.allocator().next_channel_id();
    site.scope = this;
    site.consumer = target.node;
    site.consumer_sync = sync_activator_for(target.node);
    site.logger = &worker_.logger();
    channels_.push_back(site.channel_id);
    auto& port = output_port<D>(source);
    ChannelPair<T, D> pair = make_channel<T, D>(pact, site, port.batch_capacity());
    port.add_pusher(target, std::move(pair.pusher));
    edges_.emplace_back(source, target);
    edge_pacts_.push_back(pact_name(pact));
    if (pair.gate != nullptr) {
      gated_edges_.push_back(GatedEdge{source.node, target.node, pair.gate});
    }
    return std::move(pair.end);
  }

  std::vector<size_t> path_of(uint32_t node) const {
    std::vector<size_t> p(path_.begin(), path_.end());
    p.push_back(node);
    return p;
  }
  Activator activator_for(uint32_t node) const {
    return Activator(&worker_.activations(), path_of(node));
  }
  SyncActivator sync_activator_for(uint32_t node) const {
    return SyncActivator(worker_.allocator().activation_queue(), path_of(node));
  }

  // A nested scope with timestamps Product<T, Inner>, for iteration: `build(NestedScope&)`
  // builds inside it (enter streams with `enter`, bring results out with `leave`) and its
  // result is returned. Defined in nested.h.
  template <Timestamp Inner, class F>
  decltype(auto) iterative(F&& build);
  // A nested scope with the same timestamps, for structure.
  template <class F>
  decltype(auto) region(F&& build);

  // Completes construction of a root scope: checks the graph and starts progress tracking.
  absl::Status build();

  // ---- running ----

  // One round of the scope (see above). Returns true while the scope is incomplete.
  bool step();

  // True while this scope or one nested in it holds work, in this worker's view (see above).
  bool is_incomplete() const {
    if (tracker_.tracking_anything() || !deferred_.empty() || boundary_active_) return true;
    return std::any_of(hosts_.begin(), hosts_.end(),
                       [](const ProgressHost* host) { return host->is_incomplete(); });
  }

  void activate_child(uint32_t child) override {
    if (child == 0) {  // Data arrived at the scope's outputs (a nested scope's boundary).
      boundary_active_ = true;
      if (!scheduling_) request_run();
      return;
    }
    if (child >= active_.size()) return;  // Before build: every child runs once at build.
    if (active_[child]) return;
    active_[child] = 1;
    if (scheduling_ && child > running_) {
      pending_.push_back(child);
      std::push_heap(pending_.begin(), pending_.end(), std::greater<>());
    } else {
      deferred_.push_back(child);
      if (!scheduling_) request_run();
    }
  }

  // Flow control: true while a channel operator `node` sends on holds its window for some
  // worker (the scope then does not run `node`; see weir/communication/internal/credit.h).
  // An input handle's loop asks this to wait (InputHandle::is_backlogged).
  bool is_backlogged(uint32_t node) const {
    if (node >= gates_.size()) return false;
    return std::any_of(gates_[node].begin(), gates_[node].end(),
                       [](const CreditGate* gate) { return gate->blocked(); });
  }

  // Runtime-internal, for nested scopes: hands a progress batch to the scope on `path` below
  // this one. A path that leads to no nested scope (empty, or through an operator that is not
  // a scope) fails the link it came on and returns false. Queues a batch from child `child`'s
  // subtree to be sent with this worker's next batch.
  bool dispatch_nested(std::span<const uint32_t> path,
                       std::shared_ptr<const NestedBatchBase> batch);
  void queue_nested(uint32_t child, NestedProgress progress) {
    progress.path.insert(progress.path.begin(), child);
    nested_out_.push_back(std::move(progress));
  }
  // Runtime-internal, for nested scopes: a change of what nested scope `node` holds at its
  // output (its inner pointstamps, projected), applied to this worker's tracker only.
  void inject(uint32_t node, uint32_t output, const T& time, int64_t diff) {
    tracker_.update_source(Source{node, output}, time, diff);
  }
  // Runtime-internal: a failure found while building a nested scope, reported by `build`.
  void set_build_error(absl::Status status) {
    if (build_error_.ok()) build_error_ = std::move(status);
  }

  // Diagnostics: every nonzero pointstamp count.
  std::vector<std::tuple<Location, T, int64_t>> pointstamps() { return tracker_.pointstamps(); }

  // Diagnostics (what holds the scope back): the capabilities its operators hold and at which
  // times, the messages in flight, the operator inputs whose frontier is not yet empty with the
  // outputs that feed them, then the same for nested scopes. Counts are this worker's view of
  // the whole cluster. Builds the report only when called: allocates.
  void describe_progress(std::ostream& out, size_t depth);

  // Introspection: appends this scope's operators (with the frontier at each input and output,
  // this worker's view) and channels, then those of its nested scopes. Allocates.
  void describe_graph(DataflowGraph& out);

 protected:
  using Update = std::pair<std::pair<Location, T>, int64_t>;
  struct ProgressMessage {
    std::vector<Update> updates;
    std::vector<NestedProgress> nested;
    bool remote = false;  // Decoded from another process: check before applying.
    uint32_t from = 0;
  };
  static void encode(const ProgressMessage& message, std::string& out);
  static bool decode(std::string_view in, ProgressMessage& message);
  using ProgressShared = InboxSet<ProgressMessage>;

  // Asks the worker to run this scope in its next step.
  virtual void request_run() { worker_.activations().activate(path_); }

  // Checks the graph and makes the tracker; node 0 has the given shape (the scope's outputs
  // are its inputs, and the other way around).
  absl::Status build_graph(uint32_t scope_inputs, uint32_t scope_outputs);
  // Runs the activated operators (see the class comment, steps 2 and 3).
  void pass();
  // Collects the records node `node`'s output ports sent since the last harvest.
  void harvest_ports(uint32_t node);

  void receive_progress();
  void send_progress();
  void deliver_frontiers();
  void run_child(uint32_t child);
  void harvest(uint32_t child);
  // Fails the execution: operator `child` threw `what`, or broke a rule of weir's API (`rule`).
  void fail(uint32_t child, std::string_view what, bool rule = false);
  // Applies progress changes. Those from other processes are checked first: false if one
  // names a location that does not exist, or if the batch's diffs add up (in magnitude) to more
  // than kMaxRemoteDiffs, which no honest worker sends in one step and which could otherwise
  // overflow a count (found by protocol/fuzz/frame_fuzz: two diffs of INT64_MIN).
  static constexpr int64_t kMaxRemoteDiffs = int64_t{1} << 40;
  bool valid(const std::vector<Update>& updates) const {
    int64_t total = 0;
    for (const auto& [key, diff] : updates) {
      if (!tracker_.has_location(key.first)) return false;
      if (diff > kMaxRemoteDiffs || diff < -kMaxRemoteDiffs) return false;
      total += diff < 0 ? -diff : diff;  // At most 2^40 per update: no overflow before the check.
      if (total > kMaxRemoteDiffs) return false;
    }
    return true;
  }
  void apply(const std::vector<Update>& updates) {
    for (const auto& [key, diff] : updates) {
      if (key.first.is_source) {
        tracker_.update_source(key.first.source(), key.second, diff);
      } else {
        tracker_.update_target(key.first.target(), key.second, diff);
      }
    }
  }

  Worker& worker_;
  std::vector<size_t> path_;
  std::string name_;
  bool built_ = false;

  // Declared before children_, so they outlive the operators.
  std::vector<std::vector<std::unique_ptr<OutputPortBase<T>>>> ports_;  // [node][port]
  std::vector<std::unique_ptr<Operator<T>>> children_;                  // [node]; 0 is null
  std::vector<std::string> names_;
  std::vector<uint64_t> op_ids_;  // [node]: ids in this worker's logging events.
  std::vector<std::pair<Source, Target>> edges_;
  std::vector<const char*> edge_pacts_;  // [edge]: pact_name of its pact.
  std::vector<uint64_t> channels_;       // [edge]: its channel id; then the progress channel.
  std::vector<uint8_t> notify_;
  std::vector<ProgressHost*> hosts_;  // The nested scopes among the children (owned there).

  Tracker<T> tracker_;
  ChangeBatch<std::pair<Location, T>> local_;  // This worker's changes since the last send.
  std::vector<NestedProgress> nested_out_;     // Changes of nested scopes since the last send.
  bool boundary_active_ = false;
  absl::Status build_error_;

  // Progress exchange.
  std::shared_ptr<ProgressShared> progress_shared_;
  uint64_t progress_channel_ = 0;
  uint64_t progress_seq_ = 0;  // Progress batches sent to other processes.
  FifoQueue<ProgressMessage> progress_in_;
  std::vector<std::vector<Update>> update_pool_;

  // Flow control. A channel between operators of one strongly connected component (a cycle)
  // never holds back its sender: in a cycle, the consumer may wait for the sender's next run.
  struct GatedEdge {
    uint32_t source = 0, target = 0;
    CreditGate* gate = nullptr;
  };
  std::vector<GatedEdge> gated_edges_;                     // Until built.
  std::vector<std::vector<CreditGate*>> gates_;            // [node]: its outputs' gates.
  std::vector<std::shared_ptr<GateWaiter>> gate_waiters_;  // [node]: null if it has no gate.
  std::vector<CreditGate*> boundary_gates_;  // Of the channels this scope's outputs feed.
  std::shared_ptr<GateWaiter> boundary_waiter_;
  // After build_graph's cycle check: fills gates_ from gated_edges_.
  void build_gates();
  // Makes `gate` hold back operator `node` (a nested scope passes it on to the operators inside
  // that feed its outputs).
  void add_gate(uint32_t node, CreditGate* gate);

 public:
  // Runtime-internal (ProgressHost::hold_outputs): `gate` holds back the operators of this scope
  // that send to its outputs, and, while it is blocked, the scope takes nothing more from its
  // inputs (inputs_held), so that what sends to the scope in the parent is held back too.
  void hold_boundary(CreditGate* gate) {
    for (const auto& [source, target] : edges_) {
      if (target.node == 0 && source.node != 0) add_gate(source.node, gate);
    }
    if (std::find(boundary_gates_.begin(), boundary_gates_.end(), gate) == boundary_gates_.end()) {
      boundary_gates_.push_back(gate);
    }
    if (!boundary_waiter_) {
      boundary_waiter_ = std::make_shared<GateWaiter>(
          SyncActivator(worker_.allocator().activation_queue(), path_));
    }
  }
  // Runtime-internal, for nested scopes: true while a gate of a channel the scope's outputs feed
  // is blocked (the scope is then activated when it opens).
  bool inputs_held() {
    return !boundary_gates_.empty() && internal::wait_on(boundary_gates_, boundary_waiter_);
  }

 protected:
  // True if `child` must not run now: some gate of its is blocked; it is activated when the
  // gate opens.
  bool must_wait(uint32_t child);

  // Scheduling.
  std::vector<uint8_t> active_;     // [node]: queued to run.
  std::vector<uint32_t> pending_;   // Min-heap of nodes to run in this pass.
  std::vector<uint32_t> deferred_;  // Nodes to run in the next pass.
  bool scheduling_ = false;
  uint32_t running_ = 0;
};

// ---- implementation ----

template <Timestamp T>
absl::Status Scope<T>::build_graph(uint32_t scope_inputs, uint32_t scope_outputs) {
  WEIR_CHECK(!built_) << "scope " << name_ << " built twice";
  WEIR_RETURN_IF_ERROR(build_error_);
  for (uint32_t i = 1; i < children_.size(); ++i) {
    if (children_[i] == nullptr) {
      return absl::FailedPreconditionError(
          "dataflow '" + name_ + "': operator '" + names_[i] +
          "' was never built (a feedback stream that was never given to connect_loop?)");
    }
  }
  ReachabilityBuilder<T> builder;
  // Node 0's inputs are the scope's outputs; its outputs are the scope's inputs.
  builder.add_node(
      0, name_, scope_outputs, scope_inputs,
      Connectivity<T>(scope_outputs, std::vector<Antichain<SummaryOf<T>>>(scope_inputs)));
  for (uint32_t i = 1; i < children_.size(); ++i) {
    const Operator<T>& op = *children_[i];
    builder.add_node(i, std::string(op.name()), op.inputs(), op.outputs(), op.connectivity());
  }
  for (const auto& [source, target] : edges_) builder.add_edge(source, target);
  absl::Status status = builder.check_cycles();
  if (!status.ok()) {
    return absl::InvalidArgumentError("dataflow '" + name_ + "': " + std::string(status.message()));
  }
  tracker_ = builder.build();
  build_gates();

  // Every operator starts with one capability per output at the minimum time, on every worker.
  const int64_t peers_count = static_cast<int64_t>(peers());
  notify_.assign(children_.size(), 0);
  for (uint32_t i = 1; i < children_.size(); ++i) {
    notify_[i] = children_[i]->notify_me() ? 1 : 0;
    if (auto* host = dynamic_cast<ProgressHost*>(children_[i].get())) {
      hosts_.push_back(host);
      for (auto& [o, time, count] : host->take_initial_projection()) {
        tracker_.update_source(Source{i, o}, std::any_cast<T>(time), count);
      }
      continue;
    }
    for (uint32_t o = 0; o < children_[i]->outputs(); ++o) {
      tracker_.update_source(Source{i, o}, minimum_time<T>(), peers_count);
    }
  }
  tracker_.propagate_all();
  built_ = true;
  Logger& log = worker_.logger();
  log.operators_built(path_, names_, op_ids_);
  if (log.active()) {
    for (size_t e = 0; e < edges_.size(); ++e) {
      const auto& [source, target] = edges_[e];
      log.log(ChannelBuilt{channels_[e], path_, source.node, source.port, target.node, target.port,
                           edge_pacts_[e]});
    }
  }
  active_.assign(children_.size(), 0);
  deliver_frontiers();
  for (uint32_t i = 1; i < children_.size(); ++i) activate_child(i);
  return absl::OkStatus();
}

template <Timestamp T>
absl::Status Scope<T>::build() {
  WEIR_RETURN_IF_ERROR(build_graph(0, 0));
  progress_channel_ = worker_.allocator().next_channel_id();
  channels_.push_back(progress_channel_);
  ProcessShared* process = &worker_.allocator().process();
  const uint64_t channel = progress_channel_;
  progress_shared_ = process->template channel<ProgressShared>(
      channel, [&] { return std::make_shared<ProgressShared>(process->workers()); },
      [process, channel](std::shared_ptr<ProgressShared> shared) -> RemoteSink {
        // Runs on a transport thread: check the order, decode once, give every local worker a copy.
        struct Expected {
          weir::Mutex mu;
          std::unordered_map<uint32_t, uint64_t> next_seq ABSL_GUARDED_BY(mu);  // Per worker.
        };
        auto expected = std::make_shared<Expected>();
        return [process, channel, shared, expected](uint32_t from, uint32_t, uint64_t seq,
                                                    std::string_view payload) -> absl::Status {
          {
            weir::MutexLock lock(expected->mu);
            uint64_t& next = expected->next_seq[from];
            if (seq != next) {
              return absl::DataLossError(
                  "progress batch " + std::to_string(seq) + " from worker " + std::to_string(from) +
                  " on channel " + std::to_string(channel) + " arrived out of order (expected " +
                  std::to_string(next) + ")");
            }
            ++next;
          }
          ProgressMessage message;
          if (!decode(payload, message)) {
            return absl::InvalidArgumentError("malformed progress batch from worker " +
                                              std::to_string(from) + " on channel " +
                                              std::to_string(channel));
          }
          message.remote = true;
          message.from = from;
          for (size_t w = 0; w < process->workers(); ++w) {
            ProgressMessage copy = message;
            shared->inbox(w).push(std::move(copy));
          }
          return absl::OkStatus();
        };
      },
      ChannelKind::kProgress);
  progress_shared_->inbox(index() - process->first_worker())
      .set_activator(SyncActivator(worker_.allocator().activation_queue(), path_));
  worker_.activations().activate(path_);
  return absl::OkStatus();
}

template <Timestamp T>
bool Scope<T>::step() {
  receive_progress();
  pass();
  send_progress();
  if (!deferred_.empty()) request_run();
  return is_incomplete();
}

template <Timestamp T>
void Scope<T>::pass() {
  // Activations from outside the scope's own pass (activators, other threads, timers).
  worker_.activations().for_extensions(
      path_, [&](size_t child) { activate_child(static_cast<uint32_t>(child)); });
  tracker_.propagate_all();
  deliver_frontiers();

  for (uint32_t child : deferred_) {
    pending_.push_back(child);
    std::push_heap(pending_.begin(), pending_.end(), std::greater<>());
  }
  deferred_.clear();
  scheduling_ = true;
  running_ = 0;
  while (!pending_.empty() && !worker_.failed()) {
    std::pop_heap(pending_.begin(), pending_.end(), std::greater<>());
    const uint32_t child = pending_.back();
    pending_.pop_back();
    running_ = child;
    active_[child] = 0;
    run_child(child);
  }
  pending_.clear();
  scheduling_ = false;
  running_ = 0;
}

template <Timestamp T>
bool Scope<T>::dispatch_nested(std::span<const uint32_t> path,
                               std::shared_ptr<const NestedBatchBase> batch) {
  // The path comes from another process as often as from this one: checked, never trusted.
  ProgressHost* host = nullptr;
  if (!path.empty() && path[0] < children_.size() && children_[path[0]] != nullptr) {
    host = dynamic_cast<ProgressHost*>(children_[path[0]].get());
  }
  if (host == nullptr) {
    std::string where;
    for (uint32_t node : path) where += "/" + std::to_string(node);
    worker_.allocator().process().link_failed(absl::InvalidArgumentError(
        "progress batch for nested scope path '" + (where.empty() ? "(empty)" : where) +
        "' in dataflow '" + name_ + "', which leads to no nested scope"));
    return false;
  }
  host->receive_nested(path.subspan(1), std::move(batch));
  activate_child(path[0]);
  return true;
}

template <Timestamp T>
void Scope<T>::build_gates() {
  // Strongly connected components of the operators (node 0, the scope's boundary, left out:
  // the parent scope gates what crosses it), by Tarjan's algorithm without recursion.
  const uint32_t n = static_cast<uint32_t>(children_.size());
  std::vector<std::vector<uint32_t>> next(n);
  for (const auto& [source, target] : edges_) {
    if (source.node != 0 && target.node != 0) next[source.node].push_back(target.node);
  }
  constexpr uint32_t kUnseen = UINT32_MAX;
  std::vector<uint32_t> index(n, kUnseen), low(n, 0), component(n, kUnseen), stack;
  std::vector<uint8_t> on_stack(n, 0);
  std::vector<std::pair<uint32_t, size_t>> calls;  // (node, next successor to visit)
  uint32_t counter = 0, components = 0;
  for (uint32_t root = 1; root < n; ++root) {
    if (index[root] != kUnseen) continue;
    calls.emplace_back(root, 0);
    index[root] = low[root] = counter++;
    stack.push_back(root);
    on_stack[root] = 1;
    while (!calls.empty()) {
      auto& [v, i] = calls.back();
      if (i < next[v].size()) {
        const uint32_t w = next[v][i++];
        if (index[w] == kUnseen) {
          index[w] = low[w] = counter++;
          stack.push_back(w);
          on_stack[w] = 1;
          calls.emplace_back(w, 0);
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      const uint32_t done = v;
      calls.pop_back();
      if (!calls.empty()) low[calls.back().first] = std::min(low[calls.back().first], low[done]);
      if (low[done] == index[done]) {
        uint32_t w = 0;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          component[w] = components;
        } while (w != done);
        ++components;
      }
    }
  }
  gates_.assign(n, {});
  gate_waiters_.assign(n, nullptr);
  for (const GatedEdge& edge : gated_edges_) {
    if (edge.source == 0 || edge.target == 0) continue;
    if (component[edge.source] == component[edge.target]) continue;  // In a cycle.
    add_gate(edge.source, edge.gate);
  }
  gated_edges_.clear();
  gated_edges_.shrink_to_fit();
}

template <Timestamp T>
void Scope<T>::add_gate(uint32_t node, CreditGate* gate) {
  if (auto* host = dynamic_cast<ProgressHost*>(children_[node].get())) {
    host->hold_outputs(gate);
    return;
  }
  auto& gates = gates_[node];
  if (std::find(gates.begin(), gates.end(), gate) != gates.end()) return;
  gates.push_back(gate);
  if (!gate_waiters_[node]) {
    gate_waiters_[node] = std::make_shared<GateWaiter>(sync_activator_for(node));
  }
}

template <Timestamp T>
bool Scope<T>::must_wait(uint32_t child) {
  return internal::wait_on(gates_[child], gate_waiters_[child]);
}

template <Timestamp T>
void Scope<T>::run_child(uint32_t child) {
  if (!gates_[child].empty() && must_wait(child)) [[unlikely]] {
    return;  // Flow control: a channel it sends on is full.
  }
  Operator<T>& op = *children_[child];
  Logger& log = worker_.logger();
  if (log.active()) [[unlikely]] {
    log.schedule_start(op_ids_[child]);
  }
  bool again = false;
  // A rule broken inside the operator fails it even if its logic caught the UsageError.
  const uint64_t broken_rules = internal::usage_errors;
  // The watchdog sees which operator this worker is in (left on every path out).
  struct Running {
    Worker& worker;
    ~Running() { worker.leave_operator(); }
  };
  worker_.enter_operator(names_[child], name_);
  const Running running{worker_};
  try {
    again = op.schedule();
    for (auto& port : ports_[child]) port->flush();
    if (log.active()) [[unlikely]] {
      log.schedule_stop(op_ids_[child]);
    }
  } catch (const UsageError& e) {
    fail(child, e.what(), true);
    return;
  } catch (const std::exception& e) {
    fail(child, e.what());
    return;
  } catch (...) {
    fail(child, "unknown exception");
    return;
  }
  if (internal::usage_errors != broken_rules) [[unlikely]] {
    fail(child, internal::last_usage_error, true);
    return;
  }
  harvest(child);
  if (again) activate_child(child);
}

template <Timestamp T>
void Scope<T>::harvest_ports(uint32_t node) {
  for (auto& port : ports_[node]) {
    for (const auto& edge : port->edges()) {
      edge.produced->drain([&](const T& time, int64_t diff) {
        local_.update({edge.target, time}, diff);
      });
    }
  }
}

template <Timestamp T>
void Scope<T>::harvest(uint32_t child) {
  SharedProgress<T>& progress = children_[child]->progress();
  for (uint32_t i = 0; i < progress.consumeds.size(); ++i) {
    progress.consumeds[i]->drain([&](const T& time, int64_t diff) {
      local_.update({Target{child, i}, time}, -diff);
    });
  }
  for (uint32_t o = 0; o < progress.internals.size(); ++o) {
    progress.internals[o]->drain([&](const T& time, int64_t diff) {
      local_.update({Source{child, o}, time}, diff);
    });
  }
  harvest_ports(child);
}

template <Timestamp T>
void Scope<T>::fail(uint32_t child, std::string_view what, bool rule) {
  const std::string message = "operator '" + names_[child] + "' in dataflow '" + name_ +
                              "' on worker " + std::to_string(index()) +
                              (rule ? " broke a rule: " : " failed: ") + std::string(what);
  worker_.fail(rule ? absl::FailedPreconditionError(message) : absl::InternalError(message));
}

namespace internal {
// Writes `time`, or a placeholder for a timestamp type that cannot be streamed.
template <class T>
void write_time(std::ostream& out, const T& time) {
  if constexpr (requires(std::ostream & o, const T& t) { o << t; }) {
    out << time;
  } else {
    out << "(a time)";
  }
}
template <class T>
void write_frontier(std::ostream& out, std::span<const T> frontier) {
  out << "{";
  for (size_t i = 0; i < frontier.size(); ++i) {
    if (i > 0) out << ", ";
    write_time(out, frontier[i]);
  }
  out << "}";
}
}  // namespace internal

template <Timestamp T>
void Scope<T>::describe_progress(std::ostream& out, size_t depth) {
  const std::string indent(depth * 2, ' ');
  auto node_name = [&](uint32_t node) {
    return node == 0 ? "the boundary of scope '" + name_ + "'"
                     : "operator '" + names_[node] + "' (node " + std::to_string(node) + ")";
  };
  auto points = tracker_.pointstamps();
  std::sort(points.begin(), points.end(), [](const auto& a, const auto& b) {
    const Location& la = std::get<0>(a);
    const Location& lb = std::get<0>(b);
    if (la.is_source != lb.is_source) return la.is_source;
    if (la.node != lb.node) return la.node < lb.node;
    if (la.port != lb.port) return la.port < lb.port;
    return time_lt(std::get<1>(a), std::get<1>(b));
  });
  out << indent << "capabilities held:";
  bool any = false;
  for (const auto& [location, time, count] : points) {
    if (!location.is_source) continue;
    out << "\n"
        << indent << "  " << node_name(location.node) << ", output " << location.port << ": at ";
    internal::write_time(out, time);
    if (count != 1) out << " (" << count << " times)";
    any = true;
  }
  out << (any ? "\n" : " none\n");
  out << indent << "messages in flight:";
  any = false;
  for (const auto& [location, time, count] : points) {
    if (location.is_source) continue;
    out << "\n" << indent << "  " << count << " at ";
    internal::write_time(out, time);
    out << " to " << node_name(location.node) << ", input " << location.port;
    any = true;
  }
  out << (any ? "\n" : " none\n");
  out << indent << "inputs waiting (frontier not empty):";
  any = false;
  for (uint32_t node = 1; node < children_.size(); ++node) {
    if (children_[node] == nullptr) continue;
    for (uint32_t input = 0; input < children_[node]->inputs(); ++input) {
      auto frontier = tracker_.implications(Target{node, input});
      if (frontier.empty()) continue;
      out << "\n" << indent << "  " << node_name(node) << ", input " << input << ": frontier ";
      internal::write_frontier(out, frontier);
      for (const auto& [source, target] : edges_) {
        if (target.node != node || target.port != input) continue;
        out << "; fed by " << node_name(source.node) << ", output " << source.port
            << " at frontier ";
        internal::write_frontier(out, tracker_.source_implications(source));
      }
      any = true;
    }
  }
  out << (any ? "\n" : " none\n");
  for (uint32_t node = 1; node < children_.size(); ++node) {
    auto* host = dynamic_cast<ProgressHost*>(children_[node].get());
    if (host == nullptr) continue;
    out << indent << "nested scope " << node_name(node) << ":\n";
    host->describe_progress(out, depth + 1);
  }
}

template <Timestamp T>
void Scope<T>::describe_graph(DataflowGraph& out) {
  if (!built_) return;
  auto frontier = [](std::span<const T> times) {
    PortFrontier f;
    for (const T& time : times) {
      std::ostringstream text;
      internal::write_time(text, time);
      f.push_back(text.str());
    }
    return f;
  };
  for (uint32_t node = 1; node < children_.size(); ++node) {
    if (children_[node] == nullptr) continue;
    OperatorGraph& op = out.operators.emplace_back();
    op.id = op_ids_[node];
    op.address = path_of(node);
    op.name = names_[node];
    for (uint32_t input = 0; input < children_[node]->inputs(); ++input) {
      op.inputs.push_back(frontier(tracker_.implications(Target{node, input})));
    }
    for (uint32_t output = 0; output < children_[node]->outputs(); ++output) {
      op.outputs.push_back(frontier(tracker_.source_implications(Source{node, output})));
    }
    if (auto* host = dynamic_cast<ProgressHost*>(children_[node].get())) {
      op.scope = true;
      host->describe_graph(out);
    }
  }
  for (size_t e = 0; e < edges_.size(); ++e) {
    const auto& [source, target] = edges_[e];
    out.channels.push_back(ChannelGraph{.id = channels_[e],
                                        .scope = path_,
                                        .source_node = source.node,
                                        .source_port = source.port,
                                        .target_node = target.node,
                                        .target_port = target.port,
                                        .pact = edge_pacts_[e]});
  }
}

template <Timestamp T>
void Scope<T>::receive_progress() {
  progress_shared_->inbox(index() - worker_.allocator().process().first_worker())
      .drain(progress_in_);
  while (!progress_in_.empty()) {
    auto& message = progress_in_.front();
    if (message.remote && !valid(message.updates)) {
      worker_.allocator().process().link_failed(absl::InvalidArgumentError(
          "progress batch from worker " + std::to_string(message.from) +
          " names locations that dataflow '" + name_ +
          "' does not have, or changes counts by more than 2^40 in all"));
      return;
    }
    apply(message.updates);
    if (worker_.logger().active()) [[unlikely]] {
      worker_.logger().log(ProgressBatch{false, progress_channel_, message.from,
                                         message.updates.size(), message.nested.size()});
    }
    for (auto& nested : message.nested) {
      if (!dispatch_nested(nested.path, std::move(nested.batch))) return;
    }
    // A step sends one vector per local worker and receives as many: keep that many, so that
    // steady-state exchange does not allocate.
    if (update_pool_.size() <= worker_.allocator().process().workers()) {
      message.updates.clear();
      update_pool_.push_back(std::move(message.updates));
    }
    progress_in_.pop_front();
  }
}

template <Timestamp T>
void Scope<T>::send_progress() {
  if (local_.is_empty() && nested_out_.empty()) return;
  auto updates = local_.iter();
  const bool has_local = !updates.empty();
  ProcessShared& process = worker_.allocator().process();
  const size_t me = index();
  for (size_t local = 0; local < process.workers(); ++local) {
    const size_t w = process.first_worker() + local;
    std::vector<Update> copy;
    if (!update_pool_.empty()) {
      copy = std::move(update_pool_.back());
      update_pool_.pop_back();
    }
    copy.assign(updates.begin(), updates.end());
    ProgressMessage message{std::move(copy), {}};
    message.from = static_cast<uint32_t>(me);
    // Nested scopes apply their own changes at once; other workers get them here (sharing the
    // immutable batches).
    if (!nested_out_.empty() && w != me) message.nested = nested_out_;
    if (w == me) {
      if (!has_local) continue;
      progress_in_.push_back(std::move(message));
      worker_.activations().activate(path_);
    } else {
      progress_shared_->inbox(local).push(std::move(message));
    }
  }
  if (process.processes() > 1) {
    ProgressMessage message{std::vector<Update>(updates.begin(), updates.end()), nested_out_};
    std::string payload;
    encode(message, payload);
    for (size_t p = 0; p < process.processes(); ++p) {
      if (p == process.process()) continue;
      process.transport()->send_progress(p, progress_channel_, static_cast<uint32_t>(me),
                                         progress_seq_, payload);
    }
    ++progress_seq_;
  }
  if (worker_.logger().active()) [[unlikely]] {
    worker_.logger().log(
        ProgressBatch{true, progress_channel_, me, updates.size(), nested_out_.size()});
  }
  local_.clear();
  nested_out_.clear();
}

template <Timestamp T>
void Scope<T>::encode(const ProgressMessage& message, std::string& out) {
  encode_updates<T>(message.updates, out);
  Codec<uint64_t>::encode(message.nested.size(), out);
  for (const auto& nested : message.nested) {
    Codec<std::vector<uint32_t>>::encode(nested.path, out);
    std::string bytes;
    nested.batch->encode(bytes);
    Codec<std::string>::encode(bytes, out);
  }
}

template <Timestamp T>
bool Scope<T>::decode(std::string_view in, ProgressMessage& message) {
  if (!decode_updates<T>(in, message.updates)) return false;
  uint64_t n = 0;
  // Each nested batch takes at least its path's length and its bytes' length on the wire (and
  // ~40 bytes in memory): a count the bytes cannot hold is refused before anything is made.
  constexpr size_t kMinNestedBytes = 2 * sizeof(uint64_t);
  if (!Codec<uint64_t>::decode(in, n) || n > in.size() / kMinNestedBytes) return false;
  message.nested.clear();
  message.nested.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    NestedProgress nested;
    auto batch = std::make_shared<EncodedNestedBatch>();
    if (!Codec<std::vector<uint32_t>>::decode(in, nested.path) ||
        !Codec<std::string>::decode(in, batch->bytes)) {
      return false;
    }
    nested.batch = std::move(batch);
    message.nested.push_back(std::move(nested));
  }
  return in.empty();
}

template <Timestamp T>
void Scope<T>::deliver_frontiers() {
  tracker_.drain_target_changes([&](Target target, const T& time, int64_t diff) {
    if (target.node == 0) return;
    children_[target.node]->progress().frontiers[target.port].update(time, diff);
    if (notify_[target.node]) activate_child(target.node);
  });
}

// Compiled once, in weir::runtime, for the common timestamps (compile time of every user file).
extern template class Scope<uint64_t>;
extern template class Scope<Product<uint64_t, uint64_t>>;

}  // namespace weir

#include "weir/dataflow/nested.h"
