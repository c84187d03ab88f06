#include "weir/worker/worker.h"

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

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

Worker::Worker(size_t index, std::shared_ptr<ProcessShared> process)
    : allocator_(index, std::move(process)), logger_(allocator_.index()) {}

Worker::~Worker() { drop_all(); }

std::vector<size_t> Worker::installed_dataflows() const {
  std::vector<size_t> result;
  result.reserve(dataflows_.size());
  for (const auto& [index, dataflow] : dataflows_) result.push_back(index);
  return result;
}

void Worker::drop_dataflow(size_t index) {
  if (dataflows_.erase(index) > 0 && logger_.active()) logger_.log(DataflowDropped{index});
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
  if (failed()) {
    drop_all();
    return false;
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
      dataflows_.erase(it);
      if (logger_.active()) [[unlikely]] {
        logger_.log(DataflowCompleted{index});
      }
    }
  }
  if (failed()) drop_all();
  return true;
}

bool Worker::step_or_park(std::optional<std::chrono::nanoseconds> timeout) {
  const bool worked = step();
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
