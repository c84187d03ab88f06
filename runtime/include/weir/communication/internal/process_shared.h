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

#include "weir/communication/transport.h"
#include "weir/mutex.h"
#include "weir/worker/activator.h"

namespace weir {

// Decodes one frame for one channel and delivers it to the local workers.
using RemoteSink =
    std::function<absl::Status(uint32_t from, uint32_t to, uint64_t seq, std::string_view payload)>;

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
  // yet. `sink` (made once, with the object) decodes frames from other processes into it.
  template <class C, class Make>
  std::shared_ptr<C> channel(uint64_t id, Make&& make,
                             std::function<RemoteSink(std::shared_ptr<C>)> sink = nullptr) {
    std::shared_ptr<C> object;
    absl::Status failed;
    {
      weir::MutexLock lock(mu_);
      auto& entry = channels_[id];
      if (entry.object) return std::static_pointer_cast<C>(entry.object);
      object = make();
      entry.object = object;
      if (sink) {
        entry.sink = sink(object);
        // The held frames go first, under the lock: a frame deliver() receives meanwhile must
        // not overtake them (progress batches are checked for order).
        for (auto& frame : entry.pending) {
          absl::Status status = entry.sink(frame.from, frame.to, frame.seq, frame.payload);
          if (!status.ok() && failed.ok()) {
            // Worded as the transport words a refusal on arrival: the peer is named.
            failed = absl::Status(
                status.code(),
                "process " + std::to_string(process_of(frame.from)) +
                    " sent a frame this process refuses: " + std::string(status.message()));
          }
        }
        entry.pending.clear();
        pending_bytes_ -= entry.pending_bytes;
        entry.pending_bytes = 0;
      }
    }
    if (!failed.ok()) link_failed(std::move(failed));
    return object;
  }
  // One local worker is done with channel `id`; the registry forgets it after all are.
  void release_channel(uint64_t id);

  const std::shared_ptr<SyncActivationQueue>& activation_queue(size_t local_worker) const {
    return activation_queues_[local_worker];
  }

  // The transport to the other processes (null in a single-process execution).
  Transport* transport() const { return transport_; }
  void set_transport(Transport* transport) { transport_ = transport; }

  // TransportReceiver.
  absl::Status deliver_data(uint64_t channel, uint32_t from, uint32_t to,
                            std::string_view payload) override;
  absl::Status deliver_progress(uint64_t channel, uint32_t from, uint64_t seq,
                                std::string_view payload) override;
  void link_failed(absl::Status status) override { fail(std::move(status)); }

  // Records the first failure and wakes every worker. Later failures are ignored.
  void fail(absl::Status status);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  absl::Status status() const;

 private:
  // Frames held for a channel no local worker has built yet: at most this many bytes in all.
  static constexpr size_t kMaxPendingBytes = size_t{1} << 30;
  struct PendingFrame {
    uint32_t from = 0, to = 0;
    uint64_t seq = 0;
    std::string payload;
  };
  struct ChannelEntry {
    std::shared_ptr<void> object;
    RemoteSink sink;
    std::vector<PendingFrame> pending;
    size_t pending_bytes = 0;
    size_t released = 0;
  };
  absl::Status deliver(uint64_t channel, uint32_t from, uint32_t to, uint64_t seq,
                       std::string_view payload);

  size_t processes_ = 1;
  size_t process_ = 0;
  mutable weir::Mutex mu_;
  std::unordered_map<uint64_t, ChannelEntry> channels_ ABSL_GUARDED_BY(mu_);
  size_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  // Release pairs with the acquire in failed(): a worker that sees the flag sees status_ too.
  std::atomic<bool> failed_{false};
  std::vector<std::shared_ptr<SyncActivationQueue>> activation_queues_;
  Transport* transport_ = nullptr;
};

}  // namespace weir
