// ProcessShared: the state the workers of one process share: the channels they meet at (by id),
// their activation queues, and the transport to other processes. Each worker reaches it through
// its Allocator; pacts, scopes and channels use it directly.
//
// Internal: installed because the dataflow and channel templates use it; not API.
//
// Thread safety: thread-safe.

#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"

#include "weir/communication/internal/credit.h"
#include "weir/communication/transport.h"
#include "weir/mutex.h"
#include "weir/worker/activator.h"

namespace weir {

// What one worker is running, published for the watchdog (weir/worker/execute.h): the worker
// writes, the watchdog reads (a sequence lock: `seq` changes on every entry to and exit from an
// operator, so a reader that sees the same `seq` before and after reading the rest read a
// consistent state, and the worker was in that operator all along).
struct OperatorBeat {
  std::atomic<uint64_t> seq{0};
  std::atomic<uint32_t> depth{0};  // Operators entered and not left (nested scopes nest them).
  // The innermost operator's name and its dataflow's (strings owned by its scope).
  std::atomic<const std::string*> op{nullptr};
  std::atomic<const std::string*> dataflow{nullptr};
  // Held by the worker while it destroys dataflows, and by the watchdog while it reads the
  // names, so that a name it reads is never freed under it.
  weir::Mutex names_mu;
};

// Decodes one frame for one channel and delivers it to the local workers.
using RemoteSink =
    std::function<absl::Status(uint32_t from, uint32_t to, uint64_t seq, std::string_view payload)>;

// What a channel carries between processes: data frames (a batch for one worker) or progress
// frames (a batch for every worker). A frame of the other kind is refused before any sink sees it.
enum class ChannelKind : uint8_t { kData, kProgress };

// State shared by the workers of one process.
class ProcessShared final : public TransportReceiver {
 public:
  explicit ProcessShared(size_t workers, size_t processes = 1, size_t process = 0);

  // Workers of this process.
  size_t workers() const { return activation_queues_.size(); }
  size_t processes() const { return processes_; }
  size_t process() const { return process_; }
  // Global index of this process's first worker, and the cluster's worker count.
  size_t first_worker() const { return process_ * workers(); }
  size_t total_workers() const { return processes_ * workers(); }
  bool is_local(size_t worker) const { return worker - first_worker() < workers(); }
  size_t process_of(size_t worker) const { return worker / workers(); }

  // The shared object of channel `id`, created with `make` if no local worker has asked for it
  // yet. `sink` (made once, with the object) decodes frames of kind `kind` from other processes
  // into it; frames of the other kind, or for a channel without a sink, are refused.
  template <class C, class Make>
  std::shared_ptr<C> channel(uint64_t id, Make&& make,
                             std::function<RemoteSink(std::shared_ptr<C>)> sink = nullptr,
                             ChannelKind kind = ChannelKind::kData) {
    std::shared_ptr<C> object;
    absl::Status failed;
    {
      weir::MutexLock lock(mu_);
      auto& entry = channels_[id];
      if (entry.object) return std::static_pointer_cast<C>(entry.object);
      object = make();
      entry.object = object;
      entry.kind = kind;
      if (sink) {
        entry.sink = sink(object);
        // The held frames go first, under the lock: a frame deliver() receives meanwhile must
        // not overtake them (progress batches are checked for order).
        for (auto& frame : entry.pending) {
          absl::Status status = frame.kind == kind
                                    ? entry.sink(frame.from, frame.to, frame.seq, frame.payload)
                                    : wrong_kind(id, frame.kind, frame.from);
          if (!status.ok() && failed.ok()) {
            // Worded as the transport words a refusal on arrival: the peer is named.
            failed = absl::Status(
                status.code(),
                "process " + std::to_string(process_of(frame.from)) +
                    " sent a frame this process refuses: " + std::string(status.message()));
          }
        }
      }
      forget_pending(entry);
    }
    if (!failed.ok()) link_failed(std::move(failed));
    return object;
  }
  // Flow control: the gate of channel `id`, which credit frames from other processes release
  // (deliver_credit). Every local worker may set it; it is the same gate.
  void set_channel_gate(uint64_t id, CreditGate* gate);
  // The window of every channel's gate (weir/communication/internal/credit.h), in bytes per
  // destination worker; 0: no flow control. Set before any dataflow is built.
  int64_t flow_window() const { return flow_window_; }
  void set_flow_window(int64_t bytes) { flow_window_ = bytes; }

  // One local worker is done with channel `id`; after all are, the registry keeps only a
  // tombstone, and frames that still arrive for it are dropped.
  void release_channel(uint64_t id);

  // Frames held for channels no local worker has built yet (a peer may run ahead), in all: at
  // most this many, and at most this many bytes, each frame counted as its payload plus
  // kPendingFrameCost (so that empty frames count too). Beyond either, the link that carried
  // the frame fails (an unknown channel id, or a peer far ahead of this process).
  static constexpr size_t kMaxPendingFrames = size_t{1} << 16;
  static constexpr size_t kMaxPendingBytes = size_t{64} << 20;
  static constexpr size_t kPendingFrameCost = 128;  // A held frame and its allocations.
  // The most one credit frame may return (a frame carries at most a few MiB; a batch within a
  // process counts at most 4 GiB).
  static constexpr uint64_t kMaxCreditBytes = uint64_t{1} << 40;

  const std::shared_ptr<SyncActivationQueue>& activation_queue(size_t local_worker) const {
    return activation_queues_[local_worker];
  }

  OperatorBeat& beat(size_t local_worker) const { return beats_[local_worker]; }

  // The transport to the other processes (null in a single-process execution).
  Transport* transport() const { return transport_; }
  void set_transport(Transport* transport) { transport_ = transport; }

  // TransportReceiver.
  absl::Status deliver_data(uint64_t channel, uint32_t from, uint32_t to,
                            std::string_view payload) override;
  absl::Status deliver_progress(uint64_t channel, uint32_t from, uint64_t seq,
                                std::string_view payload) override;
  absl::Status deliver_credit(uint64_t channel, uint32_t worker, uint64_t bytes) override;
  void link_failed(absl::Status status) override { fail(std::move(status)); }

  // Records the first failure and wakes every worker. Later failures are ignored.
  void fail(absl::Status status);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  absl::Status status() const;

 private:
  struct PendingFrame {
    ChannelKind kind = ChannelKind::kData;
    uint32_t from = 0, to = 0;
    uint64_t seq = 0;
    std::string payload;
  };
  struct ChannelEntry {
    std::shared_ptr<void> object;
    RemoteSink sink;
    CreditGate* gate = nullptr;  // Owned by `object`.
    ChannelKind kind = ChannelKind::kData;
    std::vector<PendingFrame> pending;
    size_t pending_bytes = 0;  // Counted as kPendingFrameCost + payload per frame.
    size_t released = 0;
    bool gone = false;  // Every local worker released it: later frames are dropped.
  };
  absl::Status deliver(ChannelKind kind, uint64_t channel, uint32_t from, uint32_t to, uint64_t seq,
                       std::string_view payload);
  static absl::Status wrong_kind(uint64_t channel, ChannelKind kind, uint32_t from);
  void forget_pending(ChannelEntry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  size_t processes_ = 1;
  size_t process_ = 0;
  mutable weir::Mutex mu_;
  std::unordered_map<uint64_t, ChannelEntry> channels_ ABSL_GUARDED_BY(mu_);
  size_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t pending_frames_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  // Release pairs with the acquire in failed(): a worker that sees the flag sees status_ too.
  std::atomic<bool> failed_{false};
  std::vector<std::shared_ptr<SyncActivationQueue>> activation_queues_;
  std::unique_ptr<OperatorBeat[]> beats_;  // One per local worker.
  Transport* transport_ = nullptr;
  int64_t flow_window_ = 0;
};

}  // namespace weir
