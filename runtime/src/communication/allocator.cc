#include "weir/communication/allocator.h"

namespace weir {

ProcessShared::ProcessShared(size_t workers) {
  activation_queues_.reserve(workers);
  for (size_t i = 0; i < workers; ++i) {
    activation_queues_.push_back(std::make_shared<SyncActivationQueue>());
  }
}

void ProcessShared::release_channel(uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = channels_.find(id);
  if (it == channels_.end()) return;
  if (++it->second.released >= workers()) channels_.erase(it);
}

void ProcessShared::fail(absl::Status status) {
  {
    std::lock_guard lock(mu_);
    if (failed_.load(std::memory_order_relaxed)) return;
    status_ = std::move(status);
    failed_.store(true, std::memory_order_release);
  }
  for (const auto& queue : activation_queues_) queue->wake();
}

absl::Status ProcessShared::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

}  // namespace weir
