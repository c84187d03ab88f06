// Allocator: a worker's view of communication: its index among all workers of the cluster, the
// number of peers, and the channels it shares with the other workers of its process.
//
// A cluster runs N processes of W workers; worker indices are global (process p holds workers
// p*W .. p*W+W-1). Channel ids are assigned in dataflow-construction order, which is the same on
// every worker, so the workers that build the same dataflow meet at the same channel: within a
// process at one shared object (the first worker to ask creates it; it is forgotten once every
// local worker has released it), across processes through the transport, whose frames name the
// channel id. Frames for a channel no local worker has built yet wait until one does.
//
// Thread safety: Allocator is worker-local; the ProcessShared it refers to
// (weir/communication/internal/process_shared.h) is thread-safe.

#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "weir/communication/internal/process_shared.h"

namespace weir {

// One worker's view.
class Allocator {
 public:
  Allocator(size_t local_index, std::shared_ptr<ProcessShared> process)
      : local_index_(local_index), process_(std::move(process)) {}

  // This worker's global index, and the number of workers in the cluster.
  size_t index() const { return process_->first_worker() + local_index_; }
  size_t peers() const { return process_->total_workers(); }
  // This worker's index within its process.
  size_t local_index() const { return local_index_; }
  ProcessShared& process() const { return *process_; }
  const std::shared_ptr<SyncActivationQueue>& activation_queue() const {
    return process_->activation_queue(local_index_);
  }

  // A fresh channel id; the same sequence on every worker.
  uint64_t next_channel_id() { return next_channel_++; }

 private:
  size_t local_index_;
  std::shared_ptr<ProcessShared> process_;
  uint64_t next_channel_ = 0;
};

}  // namespace weir
