#include "weir/persist/relay.h"

#include <algorithm>
#include <thread>
#include <utility>

namespace weir::persist {

void LocalUpperRelay::publish(const ShardId& shard, uint64_t upper) {
  weir::MutexLock lock(mu_);
  auto it = subscribers_.find(shard.str());
  if (it == subscribers_.end()) return;
  for (const Entry& entry : it->second) entry.notify(upper);
}

UpperRelay::Subscription LocalUpperRelay::subscribe(const ShardId& shard, Notify notify) {
  uint64_t id = 0;
  {
    weir::MutexLock lock(mu_);
    id = next_id_++;
    subscribers_[shard.str()].push_back(Entry{id, std::move(notify)});
  }
  // Unsubscribing takes the lock publish holds while it notifies: once it returns, no Notify of
  // the subscription runs. The relay outlives its subscriptions (every holder keeps it).
  return Subscription([this, key = shard.str(), id] {
    weir::MutexLock lock(mu_);
    auto it = subscribers_.find(key);
    if (it == subscribers_.end()) return;
    std::erase_if(it->second, [id](const Entry& entry) { return entry.id == id; });
    if (it->second.empty()) subscribers_.erase(it);
  });
}

size_t LocalUpperRelay::subscribers(const ShardId& shard) const {
  weir::MutexLock lock(mu_);
  auto it = subscribers_.find(shard.str());
  return it == subscribers_.end() ? 0 : it->second.size();
}

void LocalUpperRelay::wake_all() {
  weir::MutexLock lock(mu_);
  for (const auto& [shard, entries] : subscribers_) {
    for (const Entry& entry : entries) entry.notify(UINT64_MAX);
  }
}

std::vector<ShardId> LocalUpperRelay::shards() const {
  std::vector<ShardId> out;
  weir::MutexLock lock(mu_);
  out.reserve(subscribers_.size());
  for (const auto& [shard, entries] : subscribers_) {
    if (auto id = ShardId::parse(shard); id.ok()) out.push_back(*std::move(id));
  }
  return out;
}

std::shared_ptr<UpperRelay> process_relay() {
  static const std::shared_ptr<UpperRelay> relay = std::make_shared<LocalUpperRelay>();
  return relay;
}

struct UpperWatch::State {
  weir::Mutex mu;
  weir::CondVar changed;
  std::atomic<uint64_t> news{0};
  std::atomic<uint64_t> known{0};  // Every upper at or below is no news.
  std::function<void()> on_news;
};

UpperWatch::UpperWatch(std::shared_ptr<UpperRelay> relay, const ShardId& shard,
                       std::function<void()> on_news)
    : relay_(std::move(relay)), state_(std::make_shared<State>()) {
  state_->on_news = std::move(on_news);
  if (relay_ == nullptr) return;
  subscription_ = relay_->subscribe(shard, [state = state_](uint64_t upper) {
    if (upper <= state->known.load(std::memory_order_acquire)) return;
    {
      weir::MutexLock lock(state->mu);
      state->news.fetch_add(1, std::memory_order_acq_rel);
    }
    state->changed.notify_all();
    if (state->on_news) state->on_news();
  });
}

UpperWatch::~UpperWatch() { subscription_.reset(); }

uint64_t UpperWatch::news() const {
  return state_ == nullptr ? 0 : state_->news.load(std::memory_order_acquire);
}

void UpperWatch::set_known(const Frontier& upper) {
  if (state_ == nullptr) return;
  const uint64_t time = upper_time(upper);
  uint64_t current = state_->known.load(std::memory_order_relaxed);
  while (time > current &&
         !state_->known.compare_exchange_weak(current, time, std::memory_order_acq_rel)) {
  }
}

bool UpperWatch::wait(uint64_t seen, std::chrono::nanoseconds timeout) {
  // Saturated: a timeout past the clock's range (nanoseconds::max(): for ever) must not overflow
  // into a deadline in the past.
  const auto now = std::chrono::steady_clock::now();
  const auto deadline = timeout >= std::chrono::steady_clock::time_point::max() - now
                            ? std::chrono::steady_clock::time_point::max()
                            : now + timeout;
  if (state_ == nullptr) {
    std::this_thread::sleep_until(deadline);
    return false;
  }
  weir::MutexLock lock(state_->mu);
  while (state_->news.load(std::memory_order_acquire) == seen) {
    if (!state_->changed.wait_until(state_->mu, deadline) &&
        state_->news.load(std::memory_order_acquire) == seen) {
      return false;
    }
  }
  return true;
}

std::chrono::milliseconds UpperWatch::poll_interval(std::chrono::milliseconds poll,
                                                    std::chrono::milliseconds relay_poll) const {
  return relay_ != nullptr && relay_->hears_other_processes() ? std::max(poll, relay_poll) : poll;
}

}  // namespace weir::persist
