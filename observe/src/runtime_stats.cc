#include "weir/observe/runtime_stats.h"

#include <algorithm>
#include <set>
#include <utility>
#include <variant>

namespace weir::observe {
namespace {

using Clock = std::chrono::steady_clock;

// A counter with one writer (its worker) and any number of readers: a relaxed load and store,
// no read-modify-write.
struct Counter {
  std::atomic<uint64_t> value{0};
  void add(uint64_t n) {
    value.store(value.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  uint64_t get() const { return value.load(std::memory_order_relaxed); }
};

}  // namespace

struct RuntimeStats::PerWorker {
  struct Op {
    std::vector<size_t> address;  // Guarded by mu (written once, when built).
    std::string name;             // Guarded by mu.
    bool live = false;            // Guarded by mu.
    bool dropped = false;         // Guarded by mu.
    Counter activations, busy_ns;
  };
  struct Channel {
    bool built = false;         // Guarded by mu, with the fields below.
    bool dropped = false;       // Guarded by mu.
    std::vector<size_t> scope;  // Guarded by mu.
    size_t source = 0, source_port = 0, target = 0, target_port = 0;  // Guarded by mu.
    std::string pact;                                                 // Guarded by mu.
    Counter sent_local, sent_remote, received;
    Counter bytes_sent_local, bytes_sent_remote, bytes_received;
  };

  size_t index = 0;
  size_t first_local = 0, local_workers = 1;  // This process's workers: [first, first + n).

  // Only the worker adds and removes elements (under mu); it reads and counts without mu (no
  // one else changes the containers), readers iterate under mu. A deque keeps elements in place.
  weir::Mutex mu;
  // By operator id, from first_op: ids only grow (every epoch's dataflow has new ones), so the
  // dropped operators at the front are forgotten, or a run that restarts its epochs for days
  // would keep every operator it ever had.
  std::deque<Op> ops ABSL_GUARDED_BY(mu);
  uint64_t first_op ABSL_GUARDED_BY(mu) = 0;
  // By channel id, from first_channel: the dropped ones at the front are forgotten (as ops).
  std::deque<Channel> channels ABSL_GUARDED_BY(mu);
  uint64_t first_channel ABSL_GUARDED_BY(mu) = 0;

  // Worker-thread state.
  std::vector<uint64_t> running_stack;
  // steady_clock minus the log's time base; set from the first event.
  std::optional<Clock::duration> base;

  // Published for readers.
  std::atomic<int64_t> running{-1};
  std::atomic<int64_t> running_since_ns{0};  // Clock time_since_epoch.
  std::atomic<int64_t> park_since_ns{-1};    // -1: not parked.
  Counter parks, parked_ns, steps;
  // The parked time last reported (RuntimeStats::workers, under RuntimeStats::mu_). A read that
  // falls between the worker's wake-up and its publishing the park's end counts the park up to
  // the read's clock, which may be later than the end the worker then adds: reports are kept
  // from going back, as a counter must.
  int64_t parked_reported_ns = 0;

  // Null for an operator already forgotten. Worker thread: see above.
  Op* op(uint64_t id) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (id < first_op) return nullptr;
    if (id - first_op >= ops.size()) {
      weir::MutexLock lock(mu);
      while (ops.size() <= id - first_op) ops.emplace_back();
    }
    return &ops[id - first_op];
  }
  // The operator `id`, if it is still held. REQUIRES: mu.
  const Op* find_op(uint64_t id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return id >= first_op && id - first_op < ops.size() ? &ops[id - first_op] : nullptr;
  }
  // Null for a channel already forgotten. Worker thread.
  Channel* channel(uint64_t id) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (id < first_channel) return nullptr;
    if (id - first_channel >= channels.size()) {
      weir::MutexLock lock(mu);
      while (channels.size() <= id - first_channel) channels.emplace_back();
    }
    return &channels[id - first_channel];
  }
  int64_t clock_ns(std::chrono::nanoseconds log_time) const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(*base + log_time).count();
  }
};

RuntimeStats::RuntimeStats() = default;
RuntimeStats::~RuntimeStats() = default;

void RuntimeStats::attach(Worker& worker) {
  {
    weir::MutexLock lock(mu_);
    if (workers_.contains(worker.index())) return;  // Attached already: its sink counts.
  }
  auto w = std::make_unique<PerWorker>();
  w->index = worker.index();
  w->local_workers = worker.allocator().process().workers();
  w->first_local = worker.allocator().process().first_worker();
  PerWorker* raw = w.get();
  {
    weir::MutexLock lock(mu_);
    workers_[worker.index()] = std::move(w);
  }
  worker.also_log_to([this, raw](const LogEvent& event) { on_event(*raw, event); });
}

void RuntimeStats::on_event(PerWorker& w, const LogEvent& event) {
  if (!w.base) [[unlikely]] {
    w.base = Clock::now().time_since_epoch() - event.time;
  }
  const LogEventData& data = event.data;
  if (const auto* start = std::get_if<ScheduleStart>(&data)) {
    w.running_stack.push_back(start->id);
    w.running_since_ns.store(w.clock_ns(event.time), std::memory_order_relaxed);
    w.running.store(static_cast<int64_t>(start->id), std::memory_order_relaxed);
  } else if (const auto* stop = std::get_if<ScheduleStop>(&data)) {
    if (PerWorker::Op* op = w.op(stop->id)) {
      op->activations.add(1);
      op->busy_ns.add(static_cast<uint64_t>(stop->duration.count()));
    }
    w.steps.add(1);
    if (!w.running_stack.empty()) w.running_stack.pop_back();
    w.running.store(w.running_stack.empty() ? -1 : static_cast<int64_t>(w.running_stack.back()),
                    std::memory_order_relaxed);
  } else if (const auto* messages = std::get_if<Messages>(&data)) {
    PerWorker::Channel* channel = w.channel(messages->channel);
    if (channel == nullptr) return;
    if (messages->is_send) {
      const bool local =
          messages->target >= w.first_local && messages->target < w.first_local + w.local_workers;
      (local ? channel->sent_local : channel->sent_remote).add(messages->records);
      (local ? channel->bytes_sent_local : channel->bytes_sent_remote).add(messages->bytes);
    } else {
      channel->received.add(messages->records);
      channel->bytes_received.add(messages->bytes);
    }
  } else if (std::holds_alternative<Park>(data)) {
    w.parks.add(1);
    w.park_since_ns.store(w.clock_ns(event.time), std::memory_order_relaxed);
  } else if (std::holds_alternative<Unpark>(data)) {
    const int64_t since = w.park_since_ns.exchange(-1, std::memory_order_relaxed);
    if (since >= 0)
      w.parked_ns.add(static_cast<uint64_t>(std::max<int64_t>(w.clock_ns(event.time) - since, 0)));
  } else if (const auto* built = std::get_if<OperatorBuilt>(&data)) {
    PerWorker::Op* op = w.op(built->id);
    if (op == nullptr) return;
    weir::MutexLock lock(w.mu);
    op->address.assign(built->address.begin(), built->address.end());
    op->name = std::string(built->name);
    op->live = true;
  } else if (const auto* channel_built = std::get_if<ChannelBuilt>(&data)) {
    const ChannelBuilt& b = *channel_built;
    PerWorker::Channel* channel = w.channel(b.id);
    if (channel == nullptr) return;
    weir::MutexLock lock(w.mu);
    channel->built = true;
    channel->scope.assign(b.scope.begin(), b.scope.end());
    channel->source = b.source;
    channel->source_port = b.source_port;
    channel->target = b.target;
    channel->target_port = b.target_port;
    channel->pact = std::string(b.pact);
  } else if (const auto* channel_dropped = std::get_if<ChannelDropped>(&data)) {
    PerWorker::Channel* channel = w.channel(channel_dropped->id);
    if (channel == nullptr) return;
    weir::MutexLock lock(w.mu);
    channel->dropped = true;
    while (!w.channels.empty() && w.channels.front().dropped) {
      w.channels.pop_front();
      ++w.first_channel;
    }
  } else if (const auto* dropped = std::get_if<OperatorDropped>(&data)) {
    PerWorker::Op* op = w.op(dropped->id);
    if (op == nullptr) return;
    weir::MutexLock lock(w.mu);
    op->live = false;
    op->dropped = true;
    // Held until the ones before it go (a dataflow that outlives later ones holds them): only
    // its counters.
    std::string().swap(op->name);
    std::vector<size_t>().swap(op->address);
    while (!w.ops.empty() && w.ops.front().dropped) {
      w.ops.pop_front();
      ++w.first_op;
    }
  }
}

std::vector<RuntimeStats::OperatorSample> RuntimeStats::operators() const {
  std::vector<OperatorSample> result;
  weir::MutexLock lock(mu_);
  for (const auto& [index, w] : workers_) {
    weir::MutexLock worker_lock(w->mu);
    for (uint64_t i = 0; i < w->ops.size(); ++i) {
      const PerWorker::Op& op = w->ops[i];
      if (!op.live) continue;
      result.push_back(OperatorSample{.worker = index,
                                      .id = w->first_op + i,
                                      .address = op.address,
                                      .name = op.name,
                                      .activations = op.activations.get(),
                                      .busy = std::chrono::nanoseconds(op.busy_ns.get())});
    }
  }
  return result;
}

size_t RuntimeStats::held(bool channels) const {
  size_t held = 0;
  weir::MutexLock lock(mu_);
  for (const auto& [index, w] : workers_) {
    weir::MutexLock worker_lock(w->mu);
    held += channels ? w->channels.size() : w->ops.size();
  }
  return held;
}

size_t RuntimeStats::operators_held() const { return held(false); }

std::vector<RuntimeStats::ChannelSample> RuntimeStats::channels() const {
  std::map<uint64_t, ChannelSample> by_id;
  // A channel one worker dropped is left out, though another has not dropped it yet (workers
  // drop a dataflow one after the other): a sum of only some workers would make its counters go
  // down, which Prometheus reads as a reset.
  std::set<uint64_t> dropped;
  uint64_t forgotten = 0;  // Below this, some worker dropped every channel.
  weir::MutexLock lock(mu_);
  for (const auto& [index, w] : workers_) {
    weir::MutexLock worker_lock(w->mu);
    forgotten = std::max(forgotten, w->first_channel);
    for (uint64_t i = 0; i < w->channels.size(); ++i) {
      if (w->channels[i].dropped) dropped.insert(w->first_channel + i);
    }
  }
  for (const auto& [index, w] : workers_) {
    weir::MutexLock worker_lock(w->mu);
    for (uint64_t i = 0; i < w->channels.size(); ++i) {
      const PerWorker::Channel& c = w->channels[i];
      const uint64_t id = w->first_channel + i;
      if (id < forgotten || dropped.contains(id)) continue;
      const uint64_t counts[] = {c.sent_local.get(),        c.sent_remote.get(),
                                 c.received.get(),          c.bytes_sent_local.get(),
                                 c.bytes_sent_remote.get(), c.bytes_received.get()};
      if (!c.built &&
          std::all_of(std::begin(counts), std::end(counts), [](uint64_t n) { return n == 0; })) {
        continue;  // A progress channel, or a slot before its channel is built.
      }
      ChannelSample& s = by_id[id];
      s.id = id;
      if (c.built && s.pact.empty()) {
        s.scope = c.scope;
        s.source = c.source;
        s.source_port = c.source_port;
        s.target = c.target;
        s.target_port = c.target_port;
        s.pact = c.pact;
      }
      s.sent_local += counts[0];
      s.sent_remote += counts[1];
      s.received += counts[2];
      s.bytes_sent_local += counts[3];
      s.bytes_sent_remote += counts[4];
      s.bytes_received += counts[5];
    }
  }
  std::vector<ChannelSample> result;
  result.reserve(by_id.size());
  for (auto& [id, s] : by_id) result.push_back(std::move(s));
  return result;
}

size_t RuntimeStats::channels_held() const { return held(true); }

std::vector<RuntimeStats::WorkerSample> RuntimeStats::workers() const {
  std::vector<WorkerSample> result;
  const int64_t now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  weir::MutexLock lock(mu_);
  for (const auto& [index, w] : workers_) {
    WorkerSample s;
    s.worker = index;
    s.parks = w->parks.get();
    const int64_t park_since = w->park_since_ns.load(std::memory_order_relaxed);
    s.is_parked = park_since >= 0;
    const int64_t parked = static_cast<int64_t>(w->parked_ns.get()) +
                           (s.is_parked ? std::max<int64_t>(now - park_since, 0) : 0);
    w->parked_reported_ns = std::max(w->parked_reported_ns, parked);
    s.parked = std::chrono::nanoseconds(w->parked_reported_ns);
    s.steps = w->steps.get();
    const int64_t running = w->running.load(std::memory_order_relaxed);
    if (running >= 0) {
      s.running = static_cast<uint64_t>(running);
      s.running_for = std::chrono::nanoseconds(
          std::max<int64_t>(now - w->running_since_ns.load(std::memory_order_relaxed), 0));
      weir::MutexLock worker_lock(w->mu);
      if (const PerWorker::Op* op = w->find_op(*s.running)) s.running_name = op->name;
    }
    result.push_back(std::move(s));
  }
  return result;
}

}  // namespace weir::observe
