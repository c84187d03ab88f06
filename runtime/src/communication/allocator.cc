#include "weir/communication/allocator.h"

#include "absl/strings/str_cat.h"

#include "weir/mutex.h"

namespace weir {

ProcessShared::ProcessShared(size_t workers, size_t processes, size_t process)
    : processes_(processes), process_(process) {
  activation_queues_.reserve(workers);
  for (size_t i = 0; i < workers; ++i) {
    activation_queues_.push_back(std::make_shared<SyncActivationQueue>());
  }
}

void ProcessShared::release_channel(uint64_t id) {
  weir::MutexLock lock(mu_);
  auto it = channels_.find(id);
  if (it == channels_.end()) return;
  if (++it->second.released >= workers()) {
    pending_bytes_ -= it->second.pending_bytes;
    channels_.erase(it);
  }
}

absl::Status ProcessShared::deliver(uint64_t channel, uint32_t from, uint32_t to, uint64_t seq,
                                    std::string_view payload) {
  RemoteSink sink;
  {
    weir::MutexLock lock(mu_);
    auto& entry = channels_[channel];
    if (!entry.sink) {
      if (entry.object) {
        return absl::InvalidArgumentError(
            absl::StrCat("frame from worker ", from, " for channel ", channel,
                         ", which carries no data between processes"));
      }
      if (pending_bytes_ + payload.size() > kMaxPendingBytes) {
        return absl::ResourceExhaustedError(
            absl::StrCat("frames from worker ", from, " for channel ", channel,
                         ", which no worker of this process has built, exceed ", kMaxPendingBytes,
                         " bytes: unknown channel id?"));
      }
      entry.pending.push_back(PendingFrame{from, to, seq, std::string(payload)});
      entry.pending_bytes += payload.size();
      pending_bytes_ += payload.size();
      return absl::OkStatus();
    }
    sink = entry.sink;
  }
  return sink(from, to, seq, payload);
}

absl::Status ProcessShared::deliver_data(uint64_t channel, uint32_t from, uint32_t to,
                                         std::string_view payload) {
  if (from >= total_workers() || to >= total_workers() || !is_local(to) || is_local(from)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data frame from worker ", from, " to worker ", to, " does not fit this cluster (process ",
        process_, " of ", processes_, ", ", workers(), " workers each)"));
  }
  return deliver(channel, from, to, 0, payload);
}

absl::Status ProcessShared::deliver_progress(uint64_t channel, uint32_t from, uint64_t seq,
                                             std::string_view payload) {
  if (from >= total_workers() || is_local(from)) {
    return absl::InvalidArgumentError(
        absl::StrCat("progress frame from worker ", from, " does not fit this cluster"));
  }
  return deliver(channel, from, 0, seq, payload);
}

void ProcessShared::fail(absl::Status status) {
  {
    weir::MutexLock lock(mu_);
    if (failed_.load(std::memory_order_relaxed)) return;
    status_ = std::move(status);
    failed_.store(true, std::memory_order_release);
  }
  for (const auto& queue : activation_queues_) queue->wake();
}

absl::Status ProcessShared::status() const {
  weir::MutexLock lock(mu_);
  return status_;
}

}  // namespace weir
