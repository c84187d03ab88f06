// UpperRelay: news that a shard's upper moved, so that readers that follow a shard (a listen, a
// catalog follower, persist_source) wake when a writer appends instead of polling consensus.
//
// News is a hint and never the truth: a reader that hears of an upper reads the shard's state from
// consensus as before. A relay that is down, slow or lying costs latency (or a read for nothing),
// never correctness; readers keep polling, more slowly while the relay carries every process's
// news (hears_other_processes).
//
// Every PersistClient publishes through PersistConfig::relay after each append that moved an
// upper. The default is process_relay(): the clients of one process hear each other. A relay that
// links processes (weir::pubsub::GrpcUpperRelay, `weir pubsub`) carries news between machines.
//
//   persist::UpperWatch watch(config.relay, reader.shard_id());
//   for (;;) {
//     const uint64_t seen = watch.news();
//     if (auto event = listen.next(); ...) { ...; continue; }
//     watch.set_known(listen.frontier());
//     watch.wait(seen, watch.poll_interval(std::chrono::milliseconds(50),
//     std::chrono::seconds(1)));
//   }
//
// Thread safety: relays are thread-safe. A Notify runs on the publishing thread (or the relay's
// own) while the relay holds a lock: it must be quick and must not call back into the relay.
// UpperWatch is thread-safe.

#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

#include "weir/mutex.h"
#include "weir/persist/frontier.h"
#include "weir/persist/ids.h"

namespace weir::persist {

// An upper as news carries it: its time, UINT64_MAX for the empty frontier (a sealed shard).
inline uint64_t upper_time(const Frontier& upper) {
  return upper.is_empty() ? UINT64_MAX : upper.time();
}

class UpperRelay {
 public:
  using Notify = std::function<void(uint64_t upper)>;

  // Keeps a subscription; destroying it unsubscribes, and waits for a Notify of it running now.
  class Subscription {
   public:
    Subscription() = default;
    explicit Subscription(std::function<void()> cancel) : cancel_(std::move(cancel)) {}
    Subscription(Subscription&& other) noexcept : cancel_(std::exchange(other.cancel_, {})) {}
    Subscription& operator=(Subscription&& other) noexcept {
      if (this != &other) {
        reset();
        cancel_ = std::exchange(other.cancel_, {});
      }
      return *this;
    }
    ~Subscription() { reset(); }
    void reset() {
      if (cancel_) std::exchange(cancel_, {})();
    }

   private:
    std::function<void()> cancel_;
  };

  virtual ~UpperRelay() = default;

  // Tells every subscriber of `shard` (here and, for a relay that links processes, elsewhere)
  // that its upper is now `upper` (upper_time). Never blocks on the network.
  virtual void publish(const ShardId& shard, uint64_t upper) = 0;
  // Calls `notify` with every upper of `shard` this relay hears of, until the subscription is
  // destroyed. News may repeat, come out of order or never come.
  virtual Subscription subscribe(const ShardId& shard, Notify notify) = 0;
  // True while the relay hears of every process's appends (a linking relay that is connected);
  // false for one that only hears its own process. Readers poll at their usual interval while it
  // is false.
  virtual bool hears_other_processes() const { return false; }
};

// Delivers news among the subscribers of one relay object, in one process.
class LocalUpperRelay : public UpperRelay {
 public:
  void publish(const ShardId& shard, uint64_t upper) override;
  Subscription subscribe(const ShardId& shard, Notify notify) override;

  // Subscribers of `shard` now.
  size_t subscribers(const ShardId& shard) const;
  // Calls every subscriber with the upper UINT64_MAX, "unknown: read to learn" (a linking relay
  // that has just connected: what happened while it was away went unheard).
  void wake_all();
  // The shards with subscribers.
  std::vector<ShardId> shards() const;

 private:
  struct Entry {
    uint64_t id;
    Notify notify;
  };
  mutable weir::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, std::vector<Entry>> subscribers_ ABSL_GUARDED_BY(mu_);
};

// The relay of this process: what PersistConfig::relay is by default.
std::shared_ptr<UpperRelay> process_relay();

// Follows the news of one shard for a reader: counts news of an upper past what the reader knows,
// and wakes a waiter (and calls `on_news`, for a reader that waits otherwise: an async operator
// activates itself). Without a relay it only sleeps.
class UpperWatch {
 public:
  UpperWatch() = default;
  UpperWatch(std::shared_ptr<UpperRelay> relay, const ShardId& shard,
             std::function<void()> on_news = {});
  UpperWatch(const UpperWatch&) = delete;
  UpperWatch& operator=(const UpperWatch&) = delete;
  ~UpperWatch();

  // News so far (a count): take it before reading the shard, then wait(seen) for more.
  uint64_t news() const;
  // The reader has read the shard up to `upper`: news of an upper at or below it is no news.
  void set_known(const Frontier& upper);
  // Blocks until news() != seen or `timeout` passed. True if news came.
  bool wait(uint64_t seen, std::chrono::nanoseconds timeout);
  // How long to wait between two reads: `poll` unless the relay hears every process's appends,
  // then `relay_poll` (a safety net; news wakes the reader before).
  std::chrono::milliseconds poll_interval(std::chrono::milliseconds poll,
                                          std::chrono::milliseconds relay_poll) const;

 private:
  struct State;
  std::shared_ptr<UpperRelay> relay_;
  std::shared_ptr<State> state_;
  UpperRelay::Subscription subscription_;
};

}  // namespace weir::persist
