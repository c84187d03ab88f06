// Pacts: how records move from an output to an input.
//
// - Pipeline: every record stays on the worker that produced it.
// - Exchange(key): a record goes to worker `key(record) % peers`; key returns an integer (a hash).
// - Broadcast: every record goes to every worker.
//
//   builder.add_input(stream, Exchange([](const Word& w) { return std::hash<std::string>{}(w.text);
//   }));
//
// Thread safety: pushers are worker-local; inboxes between workers are thread-safe.

#pragma once

#include <algorithm>
#include <climits>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "weir/communication/allocator.h"
#include "weir/communication/channel.h"
#include "weir/communication/codec.h"
#include "weir/progress/timestamp.h"

namespace weir {

struct Pipeline {};

template <class KeyFn>
struct ExchangePact {
  KeyFn key;
};

// Routes each record by `key(record)`, an unsigned integer (typically a hash of the record's key).
template <class KeyFn>
ExchangePact<KeyFn> Exchange(KeyFn key) {
  return ExchangePact<KeyFn>{std::move(key)};
}

struct Broadcast {};

// A pact's name, for introspection (weir/worker/introspection.h).
inline const char* pact_name(const Pipeline&) { return "pipeline"; }
template <class KeyFn>
const char* pact_name(const ExchangePact<KeyFn>&) {
  return "exchange";
}
inline const char* pact_name(const Broadcast&) { return "broadcast"; }

// What a pact needs to know to make a channel into one operator input.
struct ChannelSite {
  size_t index = 0;  // This worker (global index).
  size_t peers = 1;  // Workers in the cluster.
  ProcessShared* process = nullptr;
  uint64_t channel_id = 0;
  LocalActivator* scope = nullptr;
  uint32_t consumer = 0;        // The consuming operator's index in its scope.
  SyncActivator consumer_sync;  // Activates the consumer from other threads.
  Logger* logger = nullptr;     // This worker's; null: none.
};

namespace internal {
inline Logger& logger_of(const ChannelSite& site) {
  return site.logger != nullptr ? *site.logger : Logger::inactive();
}
}  // namespace internal

template <class T, class D>
struct ChannelPair {
  std::unique_ptr<Pusher<T, D>> pusher;
  std::shared_ptr<ChannelEnd<T, D>> end;
  // The channel's flow control (null: none); the end keeps it alive.
  CreditGate* gate = nullptr;
};

namespace internal {

// Sends batches to the consumer on this worker.
template <class T, class D>
class PipelinePusher final : public Pusher<T, D> {
 public:
  PipelinePusher(const ChannelSite& site, std::shared_ptr<ChannelEnd<T, D>> end, size_t capacity)
      : end_(std::move(end)),
        gate_(end_->gate()),
        capacity_(capacity),
        log_(&logger_of(site)),
        channel_(site.channel_id),
        index_(static_cast<uint32_t>(site.index)) {}
  void push(const T& time, std::vector<D>& batch) override {
    if (batch.empty()) return;
    this->produced_.update(time, static_cast<int64_t>(batch.size()));
    if (log_->active()) [[unlikely]] {
      log_->log(Messages{true, channel_, index_, index_, batch.size(), batch.size() * sizeof(D)});
    }
    std::vector<D> next = end_->take_buffer(capacity_);
    std::swap(next, batch);
    const uint32_t credit = batch_credit(next);
    if (gate_ != nullptr) gate_->add(0, credit);
    end_->push_local(Message<T, D>{time, std::move(next), index_, credit});
  }
  void flush() override {}

 private:
  std::shared_ptr<ChannelEnd<T, D>> end_;
  CreditGate* gate_;  // The end's.
  size_t capacity_;
  Logger* log_;
  uint64_t channel_;
  uint32_t index_;
};

// Delivers whole batches to any worker: within the process through its inbox, to other
// processes encoded (weir::Codec) through the transport.
template <class T, class D>
class Router {
 public:
  Router(const ChannelSite& site, std::shared_ptr<ChannelShared<T, D>> shared,
         std::shared_ptr<ChannelEnd<T, D>> local)
      : index_(site.index),
        channel_(site.channel_id),
        process_(site.process),
        log_(&logger_of(site)),
        shared_(std::move(shared)),
        local_(std::move(local)),
        gate_(shared_->gate.get()) {}

  void send(size_t worker, const T& time, std::vector<D>& batch, size_t capacity) {
    if (!process_->is_local(worker)) {
      std::string payload;
      Codec<T>::encode(time, payload);
      Codec<std::vector<D>>::encode(batch, payload);
      if (log_->active()) [[unlikely]] {
        log_->log(Messages{true, channel_, index_, worker, batch.size(), payload.size()});
      }
      if (payload.size() > kMaxRemotePayload) {
        send_split(worker, time, batch);
      } else {
        send_remote(worker, std::move(payload));
      }
      batch.clear();
      return;
    }
    if (log_->active()) [[unlikely]] {
      log_->log(Messages{true, channel_, index_, worker, batch.size(), batch.size() * sizeof(D)});
    }
    std::vector<D> next = local_->take_buffer(capacity);
    std::swap(next, batch);
    const auto from = static_cast<uint32_t>(index_);
    const uint32_t credit = batch_credit(next);
    if (gate_ != nullptr) gate_->add(worker, credit);
    if (worker == index_) {
      local_->push_local(Message<T, D>{time, std::move(next), from, credit});
    } else {
      shared_->inbox(worker - process_->first_worker())
          .push(Message<T, D>{time, std::move(next), from, credit});
    }
  }

 private:
  // A batch crosses processes in messages of at most about this many bytes (receivers refuse
  // messages much larger than this: see docs/cluster.md, "Limits").
  static constexpr size_t kMaxRemotePayload = size_t{1} << 20;

  void send_remote(size_t worker, std::string payload) {
    if (gate_ != nullptr) gate_->add(worker, remote_credit(payload.size()));
    process_->transport()->send_data(process_->process_of(worker), channel_,
                                     static_cast<uint32_t>(index_), static_cast<uint32_t>(worker),
                                     std::move(payload));
  }
  // Rare: a batch whose encoding is too large for one message goes as several batches at the
  // same time, each encoded as Codec<std::vector<D>> would (a count, then the records), of at
  // most kMaxRemotePayload bytes unless one record alone is larger.
  void send_split(size_t worker, const T& time, const std::vector<D>& batch) {
    std::string payload;
    size_t count_at = 0;
    uint64_t count = 0;
    auto start = [&] {
      payload.clear();
      Codec<T>::encode(time, payload);
      count_at = payload.size();
      Codec<uint64_t>::encode(0, payload);
      count = 0;
    };
    auto finish = [&] {
      std::memcpy(payload.data() + count_at, &count, sizeof(count));
      send_remote(worker, std::move(payload));
    };
    start();
    for (const D& record : batch) {
      const size_t before = payload.size();
      Codec<D>::encode(record, payload);
      if (payload.size() > kMaxRemotePayload && count > 0) {
        std::string record_bytes = payload.substr(before);
        payload.resize(before);
        finish();
        start();
        payload.append(record_bytes);
      }
      ++count;
    }
    if (count > 0) finish();
  }

  size_t index_;
  uint64_t channel_;
  ProcessShared* process_;
  Logger* log_;
  std::shared_ptr<ChannelShared<T, D>> shared_;
  std::shared_ptr<ChannelEnd<T, D>> local_;
  CreditGate* gate_;  // shared_'s.
};

template <class T, class D, class KeyFn>
class ExchangePusher final : public Pusher<T, D> {
 public:
  ExchangePusher(const ChannelSite& site, KeyFn key, Router<T, D> router, size_t capacity)
      : key_(std::move(key)),
        peers_(site.peers),
        mask_((site.peers & (site.peers - 1)) == 0 ? site.peers - 1 : 0),
        router_(std::move(router)),
        capacity_(capacity),
        buffers_(site.peers) {}

  void push(const T& time, std::vector<D>& batch) override {
    if (batch.empty()) return;
    if (has_time_ && !(time == time_)) flush();
    time_ = time;
    has_time_ = true;
    if (peers_ == 1) {
      send(0, batch);
      return;
    }
    for (D& record : batch) {
      const uint64_t hash = static_cast<uint64_t>(key_(std::as_const(record)));
      const size_t worker = mask_ != 0 ? (hash & mask_) : (hash % peers_);
      auto& buffer = buffers_[worker];
      buffer.push_back(std::move(record));
      if (buffer.size() >= capacity_) send(worker, buffer);
    }
    batch.clear();
  }

  void flush() override {
    if (!has_time_) return;
    for (size_t w = 0; w < buffers_.size(); ++w) {
      if (!buffers_[w].empty()) send(w, buffers_[w]);
    }
    has_time_ = false;
  }

 private:
  void send(size_t worker, std::vector<D>& buffer) {
    this->produced_.update(time_, static_cast<int64_t>(buffer.size()));
    router_.send(worker, time_, buffer, capacity_);
  }

  KeyFn key_;
  size_t peers_;
  size_t mask_;  // peers - 1 when peers is a power of two, else 0.
  Router<T, D> router_;
  size_t capacity_;
  std::vector<std::vector<D>> buffers_;  // Per worker, all at time_.
  T time_{};
  bool has_time_ = false;
};

template <class T, class D>
class BroadcastPusher final : public Pusher<T, D> {
 public:
  BroadcastPusher(const ChannelSite& site, Router<T, D> router, size_t capacity)
      : peers_(site.peers), router_(std::move(router)), capacity_(capacity) {}

  void push(const T& time, std::vector<D>& batch) override {
    if (batch.empty()) return;
    const int64_t n = static_cast<int64_t>(batch.size());
    for (size_t w = 0; w + 1 < peers_; ++w) {
      std::vector<D> copy(batch);
      this->produced_.update(time, n);
      router_.send(w, time, copy, capacity_);
    }
    this->produced_.update(time, n);
    router_.send(peers_ - 1, time, batch, capacity_);
  }
  void flush() override {}

 private:
  size_t peers_;
  Router<T, D> router_;
  size_t capacity_;
};

template <class T, class D>
std::pair<std::shared_ptr<ChannelShared<T, D>>, std::shared_ptr<ChannelEnd<T, D>>> shared_channel(
    const ChannelSite& site) {
  ProcessShared* process = site.process;
  const uint64_t id = site.channel_id;
  auto shared = process->channel<ChannelShared<T, D>>(
      id,
      [&] {
        return std::make_shared<ChannelShared<T, D>>(process->workers(), process->total_workers(),
                                                     process->flow_window());
      },
      [process, id](std::shared_ptr<ChannelShared<T, D>> channel) -> RemoteSink {
        // Runs on a transport thread: decode the batch and hand it to the local worker.
        return [process, id, channel](uint32_t from, uint32_t to, uint64_t,
                                      std::string_view payload) {
          Message<T, D> message;
          message.credit = remote_credit(payload.size());  // What the sender counted.
          if (!Codec<T>::decode(payload, message.time) ||
              !Codec<std::vector<D>>::decode(payload, message.data) || !payload.empty()) {
            return absl::InvalidArgumentError("malformed batch from worker " +
                                              std::to_string(from) + " on channel " +
                                              std::to_string(id));
          }
          // The transport checked `to` against this process; checked again here, where
          // it indexes memory (one compare).
          const size_t local = to - process->first_worker();
          if (local >= process->workers()) {
            return absl::InvalidArgumentError(
                "batch from worker " + std::to_string(from) + " on channel " + std::to_string(id) +
                " for worker " + std::to_string(to) + ", which is not one of this process's");
          }
          message.from = from;
          channel->inbox(local).push(std::move(message));
          return absl::OkStatus();
        };
      });
  auto& inbox = shared->inbox(site.index - process->first_worker());
  inbox.set_activator(site.consumer_sync);
  auto end = std::make_shared<ChannelEnd<T, D>>(site.scope, site.consumer, &inbox, shared);
  end->set_logger(logger_of(site), site.channel_id, site.index);
  if (CreditGate* gate = shared->gate.get()) {
    process->set_channel_gate(id, gate);
    end->set_flow(gate, site.index, process, id, site.index);
  }
  return {std::move(shared), std::move(end)};
}

}  // namespace internal

template <class T, class D>
ChannelPair<T, D> make_channel(const Pipeline&, const ChannelSite& site, size_t capacity) {
  auto end = std::make_shared<ChannelEnd<T, D>>(site.scope, site.consumer, nullptr);
  end->set_logger(internal::logger_of(site), site.channel_id, site.index);
  CreditGate* gate = nullptr;
  if (const int64_t window = site.process->flow_window(); window > 0) {
    auto own = std::make_shared<CreditGate>(1, window);
    gate = own.get();
    end->set_flow(gate, 0, nullptr, site.channel_id, site.index, std::move(own));
  }
  return {std::make_unique<internal::PipelinePusher<T, D>>(site, end, capacity), end, gate};
}

template <class T, class D, class KeyFn>
ChannelPair<T, D> make_channel(const ExchangePact<KeyFn>& pact, const ChannelSite& site,
                               size_t capacity) {
  static_assert(std::is_invocable_v<const KeyFn&, const D&>,
                "Exchange key function must take the record by const reference");
  static_assert(std::is_integral_v<std::invoke_result_t<const KeyFn&, const D&>>,
                "Exchange key function must return an integer (a hash of the key)");
  auto [shared, end] = internal::shared_channel<T, D>(site);
  internal::Router<T, D> router(site, shared, end);
  CreditGate* gate = shared->gate.get();
  return {std::make_unique<internal::ExchangePusher<T, D, KeyFn>>(site, pact.key, std::move(router),
                                                                  capacity),
          end, gate};
}

template <class T, class D>
ChannelPair<T, D> make_channel(const Broadcast&, const ChannelSite& site, size_t capacity) {
  auto [shared, end] = internal::shared_channel<T, D>(site);
  internal::Router<T, D> router(site, shared, end);
  CreditGate* gate = shared->gate.get();
  return {std::make_unique<internal::BroadcastPusher<T, D>>(site, std::move(router), capacity), end,
          gate};
}

}  // namespace weir
