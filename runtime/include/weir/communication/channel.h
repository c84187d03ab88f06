// Channels: how batches of data move between operators, within a worker and across workers.
//
// A Message<T, D> is one batch of records at one time. Batches are moved, never copied, and their
// buffers are recycled: a consumed batch's vector returns to the pool of the consuming worker's
// channel end, from which that worker's pushers on the same channel take their next buffer.
//
// - ChannelEnd: one worker's end of a channel: messages from itself (a local queue), messages
//   from other workers (an Inbox), and the buffer pool.
// - Inbox: a thread-safe queue of messages from other workers into one worker; the first push
//   after a drain activates the consumer through a SyncActivator.
// - Pusher: where an operator output sends batches; pacts make pushers (pipeline, exchange,
//   broadcast). Each pusher counts the records it sends per time, for the progress protocol.
//
// Thread safety: Inbox is thread-safe; everything else is worker-local.

#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "weir/communication/internal/credit.h"
#include "weir/communication/internal/fifo.h"
#include "weir/communication/internal/process_shared.h"
#include "weir/mutex.h"
#include "weir/progress/change_batch.h"
#include "weir/progress/timestamp.h"
#include "weir/worker/activator.h"
#include "weir/worker/logging.h"

namespace weir {

// The default number of bytes in a batch.
inline constexpr size_t kBatchBytes = 8192;

template <class D>
constexpr size_t default_batch_capacity() {
  return sizeof(D) >= kBatchBytes ? 1 : kBatchBytes / sizeof(D);
}

template <class T, class D>
struct Message {
  T time;
  std::vector<D> data;
  uint32_t from = 0;  // The sending worker (for logging and flow control).
  // What the batch counts against the destination's window (weir/communication/internal/
  // credit.h): its payload bytes from another process, else batch_credit(data).
  uint32_t credit = 0;
};

// A batch's cost within the process: its records' bytes and kMessageCost. (Records that own
// memory elsewhere, such as strings, count by their size, not by what they own.)
template <class D>
uint32_t batch_credit(const std::vector<D>& batch) {
  const uint64_t bytes = batch.size() * sizeof(D) + kMessageCost;
  return bytes > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(bytes);
}
// A batch's cost from or to another process: its payload's bytes and kMessageCost.
inline uint32_t remote_credit(size_t payload_bytes) {
  const uint64_t bytes = uint64_t{payload_bytes} + kMessageCost;
  return bytes > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(bytes);
}

// A thread-safe FIFO of messages into one worker.
template <class M>
class Inbox {
 public:
  void push(M&& message) {
    // A copy taken under the lock: set_activator may replace activator_ meanwhile.
    SyncActivator wake;
    {
      weir::MutexLock lock(mu_);
      pending_.push_back(std::move(message));
      has_pending_.store(true, std::memory_order_release);
      if (!notified_ && activator_) {
        notified_ = true;
        wake = activator_;
      }
    }
    if (wake) wake.activate();
  }

  // Moves every pending message to the back of `out`. Returns true if there were any.
  bool drain(FifoQueue<M>& out) {
    // Acquire pairs with the release in push: a false read only delays delivery to a later
    // drain, and the push that set it also activated the consumer.
    if (!has_pending_.load(std::memory_order_acquire)) return false;
    weir::MutexLock lock(mu_);
    out.append(pending_);
    has_pending_.store(false, std::memory_order_relaxed);
    notified_ = false;
    return true;
  }

  // Sets who is activated when messages arrive. Messages pushed before arrive anyway: the
  // consumer runs once when it is built.
  void set_activator(SyncActivator activator) {
    weir::MutexLock lock(mu_);
    activator_ = std::move(activator);
    notified_ = false;
  }

 private:
  weir::Mutex mu_;
  std::vector<M> pending_ ABSL_GUARDED_BY(mu_);
  bool notified_ ABSL_GUARDED_BY(mu_) = false;  // An activation is outstanding.
  SyncActivator activator_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> has_pending_{false};
};

// Something that can be asked to run an operator of a scope on this worker (the scope itself).
class LocalActivator {
 public:
  virtual void activate_child(uint32_t child) = 0;

 protected:
  ~LocalActivator() = default;
};

// What an operator needs to know about an input's channel without knowing its type.
class InputEndBase {
 public:
  virtual ~InputEndBase() = default;
  // True if messages from this worker are queued (they arrived without an activation).
  virtual bool maybe_pending() const = 0;
};

// One worker's end of a channel.
template <class T, class D>
class ChannelEnd final : public InputEndBase {
 public:
  ChannelEnd(LocalActivator* scope, uint32_t consumer, Inbox<Message<T, D>>* inbox,
             std::shared_ptr<void> keep_alive = nullptr)
      : scope_(scope), consumer_(consumer), inbox_(inbox), keep_alive_(std::move(keep_alive)) {}
  ChannelEnd(const ChannelEnd&) = delete;
  ChannelEnd& operator=(const ChannelEnd&) = delete;
  // What was never pulled is given back too: a sender must not wait for a consumer that is gone.
  ~ChannelEnd() override {
    if (gate_ == nullptr) return;
    if (has_next_) settle(next_);
    if (inbox_ != nullptr) inbox_->drain(local_);
    while (!local_.empty()) {
      settle(local_.front());
      local_.pop_front();
    }
    for (size_t p = 0; p < owed_.size(); ++p) {
      if (owed_[p] > 0) return_credit(p);
    }
  }

  // Flow control: a batch pulled here releases its credit at `slot` of `gate`; one from another
  // process is owed to that process, and once a quarter window is, a credit frame on `channel`
  // naming `worker` (this one) gives it back. `gate` must outlive this end: it lives in the
  // object keep_alive holds, or is `own_gate`.
  void set_flow(CreditGate* gate, size_t slot, ProcessShared* process, uint64_t channel,
                size_t worker, std::shared_ptr<CreditGate> own_gate = nullptr) {
    gate_ = gate;
    own_gate_ = std::move(own_gate);
    slot_ = slot;
    process_ = process;
    flow_channel_ = channel;
    flow_worker_ = static_cast<uint32_t>(worker);
    return_at_ = static_cast<uint64_t>(std::max<int64_t>(gate->window() / 4, 1));
    if (process != nullptr && process->processes() > 1) owed_.assign(process->processes(), 0);
  }
  CreditGate* gate() const { return gate_; }

  // A message from this worker to itself. The first one waiting is held inline (`next_`), so a
  // channel that carries one message at a time touches no memory beyond this object.
  void push_local(Message<T, D>&& message) {
    if (!has_next_ && local_.empty()) {
      next_ = std::move(message);
      has_next_ = true;
    } else {
      local_.push_back(std::move(message));
    }
    scope_->activate_child(consumer_);
  }

  // The next message addressed to this worker, or nullptr. The message stays valid until the
  // next call; its buffer is then recycled.
  Message<T, D>* pull() {
    if (has_current_) {
      recycle(std::move(current_.data));
      has_current_ = false;
    }
    if (has_next_) {  // Older than anything in local_ (see push_local).
      current_ = std::move(next_);
      has_next_ = false;
      has_current_ = true;
      if (gate_ != nullptr) settle(current_);
      if (log_->active()) [[unlikely]] {
        log_received();
      }
      return &current_;
    }
    if (local_.empty()) {
      if (inbox_ == nullptr || !inbox_->drain(local_)) return nullptr;
    }
    current_ = std::move(local_.front());
    local_.pop_front();
    has_current_ = true;
    if (gate_ != nullptr) settle(current_);
    if (log_->active()) [[unlikely]] {
      log_received();
    }
    return &current_;
  }

  // Logs pulled messages to `logger` as channel `channel` into worker `index`.
  void set_logger(Logger& logger, uint64_t channel, size_t index) {
    log_ = &logger;
    channel_ = channel;
    index_ = index;
  }

  // An empty buffer: a recycled one (with its capacity) if there is one. New buffers start
  // empty and grow as records arrive, so channels that carry little stay small.
  std::vector<D> take_buffer(size_t /*capacity*/) {
    if (spare_.capacity() > 0) return std::exchange(spare_, {});
    if (!pool_.empty()) {
      std::vector<D> buffer = std::move(pool_.back());
      pool_.pop_back();
      return buffer;
    }
    return {};
  }

  // The first spare buffer is kept inline (`spare_`), the others in a small pool.
  void recycle(std::vector<D>&& buffer) {
    if (buffer.capacity() == 0) return;
    buffer.clear();
    if (spare_.capacity() == 0) {
      spare_ = std::move(buffer);
    } else if (pool_.size() < kMaxPool) {
      pool_.push_back(std::move(buffer));
    }
  }

  // True if a message may be waiting (used to keep the consumer scheduled).
  bool maybe_pending() const override { return has_next_ || !local_.empty(); }

 private:
  static constexpr size_t kMaxPool = 16;

  void log_received() {
    // The credit is the batch's bytes (encoded or in memory: Messages::bytes) and the cost.
    const uint64_t credit = current_.credit, cost = kMessageCost;
    log_->log(Messages{false, channel_, current_.from, index_, current_.data.size(),
                       credit > cost ? credit - cost : 0});
  }

  // `message` left the queue: its credit goes back to its sender.
  void settle(const Message<T, D>& message) {
    if (owed_.empty() || process_->is_local(message.from)) {
      gate_->release(slot_, message.credit);
      return;
    }
    const size_t p = process_->process_of(message.from);
    if (p >= owed_.size()) return;  // Checked on arrival; never trusted twice.
    owed_[p] += message.credit;
    if (owed_[p] >= return_at_) [[unlikely]] {
      return_credit(p);
    }
  }
  void return_credit(size_t p) {
    if (Transport* transport = process_->transport()) {
      transport->send_credit(p, flow_channel_, flow_worker_, owed_[p]);
    }
    owed_[p] = 0;
  }

  LocalActivator* scope_;
  uint32_t consumer_;
  Inbox<Message<T, D>>* inbox_;       // Null for channels within one worker.
  std::shared_ptr<void> keep_alive_;  // Owns inbox_.
  Message<T, D> next_{};
  bool has_next_ = false;
  FifoQueue<Message<T, D>> local_;
  Message<T, D> current_{};
  bool has_current_ = false;
  std::vector<D> spare_;
  std::vector<std::vector<D>> pool_;
  Logger* log_ = &Logger::inactive();
  uint64_t channel_ = 0;
  size_t index_ = 0;
  // Flow control (null: none).
  CreditGate* gate_ = nullptr;
  std::shared_ptr<CreditGate> own_gate_;  // A pipeline's gate, which no other object holds.
  size_t slot_ = 0;
  ProcessShared* process_ = nullptr;
  uint64_t flow_channel_ = 0;
  uint32_t flow_worker_ = 0;
  uint64_t return_at_ = 1;
  std::vector<uint64_t> owed_;  // Per process: credit consumed here and not yet returned.
};

// The part of a channel shared by the workers of a process: one inbox per worker.
template <class M>
class InboxSet {
 public:
  explicit InboxSet(size_t workers) {
    inboxes_.reserve(workers);
    for (size_t i = 0; i < workers; ++i) inboxes_.push_back(std::make_unique<Inbox<M>>());
  }
  Inbox<M>& inbox(size_t worker) { return *inboxes_[worker]; }

 private:
  std::vector<std::unique_ptr<Inbox<M>>> inboxes_;
};

// What the workers of a process share of a channel between workers: their inboxes and, with
// flow control, the gate that counts what each worker of the cluster was sent from here.
template <class T, class D>
struct ChannelShared : InboxSet<Message<T, D>> {
  ChannelShared(size_t workers, size_t total_workers, int64_t window)
      : InboxSet<Message<T, D>>(workers),
        gate(window > 0 ? std::make_unique<CreditGate>(total_workers, window) : nullptr) {}
  std::unique_ptr<CreditGate> gate;  // Slot: global worker index. Null: no flow control.
};

// Where an output sends batches. `push` takes the batch's records (leaving `batch` empty, with
// capacity to refill) and may hold them until `flush`, which the runtime calls after every run of
// the producing operator.
template <class T, class D>
class Pusher {
 public:
  virtual ~Pusher() = default;
  virtual void push(const T& time, std::vector<D>& batch) = 0;
  virtual void flush() = 0;

  // Records sent per time since the last harvest, counted at the consumer's input.
  ChangeBatch<T>& produced() { return produced_; }

 protected:
  ChangeBatch<T> produced_;
};

}  // namespace weir
