// Allocator: a worker's view of communication: its index, the number of peers, and the channels
// it shares with the other workers of its process.
//
// Channel ids are assigned in dataflow-construction order, which is the same on every worker, so
// the workers that build the same dataflow meet at the same shared channel objects. The first
// worker to ask for a channel creates it; it is forgotten once every worker has released it.
//
// Thread safety: ProcessShared is thread-safe; Allocator is worker-local.

#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "weir/worker/activator.h"

namespace weir {

// State shared by the workers of one process.
class ProcessShared {
 public:
  explicit ProcessShared(size_t workers);

  size_t workers() const { return activation_queues_.size(); }

  // The shared object of channel `id`, created with `make` if no worker has asked for it yet.
  template <class C, class Make>
  std::shared_ptr<C> channel(uint64_t id, Make&& make) {
    std::lock_guard lock(mu_);
    auto& entry = channels_[id];
    if (!entry.object) entry.object = std::static_pointer_cast<void>(make());
    return std::static_pointer_cast<C>(entry.object);
  }
  // One worker is done with channel `id`; the registry forgets it after all workers are.
  void release_channel(uint64_t id);

  const std::shared_ptr<SyncActivationQueue>& activation_queue(size_t worker) const {
    return activation_queues_[worker];
  }

  // Records the first failure and wakes every worker. Later failures are ignored.
  void fail(absl::Status status);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  absl::Status status() const;

 private:
  struct ChannelEntry {
    std::shared_ptr<void> object;
    size_t released = 0;
  };
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, ChannelEntry> channels_;  // Guarded by mu_.
  absl::Status status_;                                   // Guarded by mu_.
  // Release pairs with the acquire in failed(): a worker that sees the flag sees status_ too.
  std::atomic<bool> failed_{false};
  std::vector<std::shared_ptr<SyncActivationQueue>> activation_queues_;
};

// One worker's view.
class Allocator {
 public:
  Allocator(size_t index, std::shared_ptr<ProcessShared> process)
      : index_(index), process_(std::move(process)) {}

  size_t index() const { return index_; }
  size_t peers() const { return process_->workers(); }
  ProcessShared& process() const { return *process_; }
  const std::shared_ptr<SyncActivationQueue>& activation_queue() const {
    return process_->activation_queue(index_);
  }

  // A fresh channel id; the same sequence on every worker.
  uint64_t next_channel_id() { return next_channel_++; }

 private:
  size_t index_;
  std::shared_ptr<ProcessShared> process_;
  uint64_t next_channel_ = 0;
};

}  // namespace weir
