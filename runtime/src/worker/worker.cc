#include "weir/worker/worker.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace weir {
namespace {

// How long an idle worker spins before it parks: a cross-thread hand-off costs microseconds, a
// wake-up from parking tens of microseconds.
constexpr auto kSpin = std::chrono::microseconds(200);
// The same in a process of a cluster: none. What such a worker waits for mostly comes through
// the transport's threads (a gRPC poller reads the peer's frame and activates the worker), and
// a spinning worker keeps them off its core: the scheduler does not preempt it for the thread
// it waits on, so on a machine without a spare core the spin delays the very message it waits
// for (2 cores, 2 processes on loopback: 260 us per barrier round with the spin, 60 without).
// The wake-up it saves is small next to a network hop.
constexpr auto kClusterSpin = std::chrono::microseconds(0);

// Requests for progress reports (request_progress_reports), counted. Relaxed: a request is a
// hint that reaches each worker at some later step; nothing is published through it.
std::atomic<uint64_t> progress_report_requests{0};

// A worker parks at most this long at a time, so that it notices report requests (which only
// count, to stay async-signal-safe, and wake no one) and, with WEIR_STALL_REPORT_AFTER, stalls.
// An idle worker wakes once a second: nothing next to what parking saves.
constexpr auto kReportPoll = std::chrono::seconds(1);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

namespace internal {
absl::StatusOr<std::optional<std::chrono::nanoseconds>> stall_report_after_from_env() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): weir never sets the environment.
  const char* value = std::getenv("WEIR_STALL_REPORT_AFTER");
  if (value == nullptr || *value == '\0') return std::nullopt;
  // Beyond this (about 31 years) a stall report is as good as never; the bound keeps the
  // conversion to nanoseconds in range.
  constexpr double kMaxSeconds = 1e9;
  char* end = nullptr;
  errno = 0;
  double seconds = std::strtod(value, &end);
  const bool overflowed = errno == ERANGE && seconds == HUGE_VAL;
  if (end != value) {
    while (std::isspace(static_cast<unsigned char>(*end))) ++end;
  }
  if (end == value || *end != '\0' || (!overflowed && (!std::isfinite(seconds) || seconds <= 0))) {
    return absl::InvalidArgumentError(
        std::string("WEIR_STALL_REPORT_AFTER='") + value +
        "': expected a number of seconds greater than 0, such as 30 or 0.5 (unset or empty: no "
        "stall reports)");
  }
  seconds = overflowed ? kMaxSeconds : std::min(seconds, kMaxSeconds);
  return std::chrono::nanoseconds(static_cast<int64_t>(seconds * 1e9));
}
}  // namespace internal

Worker::Worker(size_t index, std::shared_ptr<ProcessShared> process)
    : allocator_(index, std::move(process)),
      beat_(allocator_.process().beat(index)),
      logger_(allocator_.index()),
      reports_seen_(progress_report_requests.load(std::memory_order_relaxed)),
      graphs_seen_(internal::graph_requests()),
      stall_report_after_(internal::stall_report_after_from_env().value_or(std::nullopt)),
      last_work_(std::chrono::steady_clock::now()) {}

void request_progress_reports() {
  progress_report_requests.fetch_add(1, std::memory_order_relaxed);
}

std::string Worker::describe_progress() {
  std::ostringstream out;
  out << "progress of worker " << index() << " (" << dataflows_.size() << " dataflow"
      << (dataflows_.size() == 1 ? "" : "s") << "):\n";
  for (const auto& [index, dataflow] : dataflows_) {
    out << "dataflow " << index << " '" << dataflow->name() << "':\n";
    dataflow->describe_progress(out);
  }
  return out.str();
}

void Worker::publish_graph(uint64_t request) {
  WorkerGraph graph;
  graph.worker = index();
  graph.request = request;
  for (const auto& [index, dataflow] : dataflows_) {
    DataflowGraph& d = graph.dataflows.emplace_back();
    d.index = index;
    d.name = dataflow->name();
    dataflow->describe_graph(d);
  }
  internal::publish_graph(std::move(graph));
}

void Worker::report_progress(const char* why) {
  const std::string report = "weir: " + std::string(why) + ": " + describe_progress();
  std::fwrite(report.data(), 1, report.size(), stderr);  // One write: reports do not interleave.
  std::fflush(stderr);
}

Worker::~Worker() { drop_all(); }

std::vector<size_t> Worker::installed_dataflows() const {
  std::vector<size_t> result;
  result.reserve(dataflows_.size());
  for (const auto& [index, dataflow] : dataflows_) result.push_back(index);
  return result;
}

void Worker::drop_dataflow(size_t index) {
  bool dropped = false;
  {
    weir::MutexLock lock(beat_.names_mu);  // The watchdog may be reading an operator's name.
    dropped = dataflows_.erase(index) > 0;
  }
  if (dropped && logger_.active()) logger_.log(DataflowDropped{index});
}

void Worker::drop_all() {
  while (!dataflows_.empty()) drop_dataflow(dataflows_.begin()->first);
}

void Worker::activate_after(std::vector<size_t> path, std::chrono::nanoseconds delay) {
  if (delay <= std::chrono::nanoseconds::zero()) {
    activations_.activate(path);
    return;
  }
  timers_.push(Timer{std::chrono::steady_clock::now() + delay, std::move(path)});
}

void Worker::fail(absl::Status status) { allocator_.process().fail(std::move(status)); }

void Worker::fire_timers() {
  if (timers_.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  while (!timers_.empty() && timers_.top().deadline <= now) {
    activations_.activate(timers_.top().path);
    timers_.pop();
  }
}

bool Worker::step() {
  if (failed()) throw_failed();
  if (const uint64_t requests = progress_report_requests.load(std::memory_order_relaxed);
      requests != reports_seen_) [[unlikely]] {
    reports_seen_ = requests;
    if (has_dataflows()) report_progress("progress report requested");
  }
  if (const uint64_t requests = internal::graph_requests(); requests != graphs_seen_) [[unlikely]] {
    graphs_seen_ = requests;
    publish_graph(requests);
  }
  allocator_.activation_queue()->drain_into(activations_);
  fire_timers();
  activations_.advance();
  if (activations_.current_empty()) return false;
  active_.clear();
  activations_.for_extensions({}, [&](size_t index) { active_.push_back(index); });
  for (size_t index : active_) {
    auto it = dataflows_.find(index);
    if (it == dataflows_.end()) continue;
    const bool incomplete = it->second->step();
    if (failed()) break;
    if (!incomplete) {
      {
        weir::MutexLock lock(beat_.names_mu);
        dataflows_.erase(it);
      }
      if (logger_.active()) [[unlikely]] {
        logger_.log(DataflowCompleted{index});
      }
    }
  }
  if (failed()) drop_all();
  return true;
}

void Worker::throw_failed() {
  drop_all();
  const absl::Status status = allocator_.process().status();
  throw ExecutionFailed(status.message().empty() ? status.ToString()
                                                 : std::string(status.message()));
}

bool Worker::step_or_park(std::optional<std::chrono::nanoseconds> timeout) {
  const bool worked = step();
  if (stall_report_after_) [[unlikely]] {
    if (worked) {
      last_work_ = std::chrono::steady_clock::now();
      stall_reported_ = false;
    } else if (!stall_reported_ && has_dataflows() &&
               std::chrono::steady_clock::now() - last_work_ >= *stall_report_after_) {
      stall_reported_ = true;
      report_progress("stalled (no work for WEIR_STALL_REPORT_AFTER)");
    }
  }
  if (worked || !activations_.empty() || failed()) return has_dataflows();
  if (timeout && *timeout <= std::chrono::nanoseconds::zero()) return has_dataflows();
  const auto& queue = allocator_.activation_queue();
  const auto start = std::chrono::steady_clock::now();
  auto spin_until = start + (allocator_.process().processes() > 1 ? kClusterSpin : kSpin);
  if (timeout && start + *timeout < spin_until) spin_until = start + *timeout;
  while (!queue->has_pending() && !failed()) {
    if (std::chrono::steady_clock::now() >= spin_until) break;
    for (int i = 0; i < 16; ++i) cpu_relax();
  }
  if (queue->has_pending() || failed()) return has_dataflows();
  std::optional<std::chrono::nanoseconds> park_for;
  const auto now = std::chrono::steady_clock::now();
  if (timeout) park_for = *timeout - (now - start);
  if (!timers_.empty()) {
    auto until_timer = timers_.top().deadline - now;
    if (!park_for || until_timer < *park_for) park_for = until_timer;
  }
  if (!park_for || *park_for > kReportPoll) park_for = kReportPoll;
  if (park_for && *park_for <= std::chrono::nanoseconds::zero()) return has_dataflows();
  if (logger_.active()) [[unlikely]] {
    logger_.log(Park{park_for});
  }
  queue->park_unless(park_for, [&] { return failed(); });
  if (logger_.active()) [[unlikely]] {
    logger_.log(Unpark{});
  }
  return has_dataflows();
}

}  // namespace weir
