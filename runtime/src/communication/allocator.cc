#include "weir/communication/allocator.h"

#include "absl/strings/str_cat.h"

#include "weir/mutex.h"

namespace weir {

ProcessShared::ProcessShared(size_t workers, size_t processes, size_t process)
    : processes_(processes), process_(process), beats_(new OperatorBeat[workers]) {
  activation_queues_.reserve(workers);
  for (size_t i = 0; i < workers; ++i) {
    activation_queues_.push_back(std::make_shared<SyncActivationQueue>());
  }
}

void ProcessShared::release_channel(uint64_t id) {
  weir::MutexLock lock(mu_);
  auto it = channels_.find(id);
  if (it == channels_.end() || it->second.gone) return;
  if (++it->second.released >= workers()) {
    // A tombstone: a frame that arrives later (a peer still sending) is dropped, instead of
    // creating an entry that no worker will ever drain.
    ChannelEntry& entry = it->second;
    forget_pending(entry);
    entry.object.reset();
    entry.sink = nullptr;
    entry.gate = nullptr;
    entry.pending.shrink_to_fit();
    entry.gone = true;
  }
}

void ProcessShared::forget_pending(ChannelEntry& entry) {
  pending_bytes_ -= entry.pending_bytes;
  pending_frames_ -= entry.pending.size();
  entry.pending.clear();
  entry.pending_bytes = 0;
}

void ProcessShared::set_channel_gate(uint64_t id, CreditGate* gate) {
  weir::MutexLock lock(mu_);
  auto it = channels_.find(id);
  if (it != channels_.end() && !it->second.gone) it->second.gate = gate;
}

absl::Status ProcessShared::deliver_credit(uint64_t channel, uint32_t worker, uint64_t bytes) {
  // `worker` is the peer's (the frame reader checked); it consumed what this process sent it.
  if (worker >= total_workers() || is_local(worker)) {
    return absl::InvalidArgumentError(
        absl::StrCat("credit frame from worker ", worker,
                     " (field worker) is not a worker of another process of this cluster"));
  }
  if (bytes == 0 || bytes > kMaxCreditBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("credit frame from worker ", worker, " on channel ", channel, " returns ",
                     bytes, " bytes (field bytes; at most ", kMaxCreditBytes, ")"));
  }
  std::shared_ptr<void> keep;  // The gate lives in the channel's object.
  CreditGate* gate = nullptr;
  {
    weir::MutexLock lock(mu_);
    auto it = channels_.find(channel);
    // A channel this process no longer has (every worker released it) or never built (no
    // credit is owed for it): nothing waits on it.
    if (it == channels_.end() || it->second.gone || it->second.gate == nullptr) {
      if (it != channels_.end() && it->second.object && it->second.kind == ChannelKind::kProgress) {
        return absl::InvalidArgumentError(
            absl::StrCat("credit frame from worker ", worker, " names channel ", channel,
                         ", which is a progress channel (field channel of Credit)"));
      }
      return absl::OkStatus();
    }
    keep = it->second.object;
    gate = it->second.gate;
  }
  if (!gate->release_returned(worker, static_cast<int64_t>(bytes))) {
    return absl::InvalidArgumentError(
        absl::StrCat("credit frame from worker ", worker, " on channel ", channel, " returns ",
                     bytes, " bytes, more than this process sent it and has not had back (",
                     gate->outstanding(worker), "; field bytes)"));
  }
  return absl::OkStatus();
}

absl::Status ProcessShared::wrong_kind(uint64_t channel, ChannelKind kind, uint32_t from) {
  return kind == ChannelKind::kProgress
             ? absl::InvalidArgumentError(
                   absl::StrCat("progress frame from worker ", from, " names channel ", channel,
                                ", which is a data channel (field channel of Progress)"))
             : absl::InvalidArgumentError(
                   absl::StrCat("data frame from worker ", from, " names channel ", channel,
                                ", which is a progress channel (field channel of Data)"));
}

absl::Status ProcessShared::deliver(ChannelKind kind, uint64_t channel, uint32_t from, uint32_t to,
                                    uint64_t seq, std::string_view payload) {
  RemoteSink sink;
  {
    weir::MutexLock lock(mu_);
    auto it = channels_.find(channel);
    if (it != channels_.end() && it->second.gone) return absl::OkStatus();  // All released.
    if (it != channels_.end() && it->second.sink) {
      if (it->second.kind != kind) return wrong_kind(channel, kind, from);
      sink = it->second.sink;
    } else if (it != channels_.end() && it->second.object) {
      return absl::InvalidArgumentError(absl::StrCat(
          kind == ChannelKind::kData ? "data" : "progress", " frame from worker ", from,
          " names channel ", channel, ", which carries nothing between processes (field channel)"));
    } else {
      // Not built here yet: held, within the limits (checked before an entry is made, so a
      // refused frame leaves nothing behind).
      const size_t cost = kPendingFrameCost + payload.size();
      if (pending_frames_ + 1 > kMaxPendingFrames || pending_bytes_ + cost > kMaxPendingBytes) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "frame from worker ", from, " for channel ", channel,
            ", which no worker of this process has built: the frames held for channels not "
            "built yet would exceed ",
            kMaxPendingFrames, " frames or ", kMaxPendingBytes,
            " bytes (an unknown channel id, or a peer far ahead of this process)"));
      }
      if (it == channels_.end()) it = channels_.emplace(channel, ChannelEntry{}).first;
      ChannelEntry& entry = it->second;
      entry.pending.push_back(PendingFrame{kind, from, to, seq, std::string(payload)});
      entry.pending_bytes += cost;
      pending_bytes_ += cost;
      ++pending_frames_;
      return absl::OkStatus();
    }
  }
  return sink(from, to, seq, payload);
}

absl::Status ProcessShared::deliver_data(uint64_t channel, uint32_t from, uint32_t to,
                                         std::string_view payload) {
  if (from >= total_workers() || is_local(from)) {
    return absl::InvalidArgumentError(
        absl::StrCat("data frame from worker ", from,
                     " (field from) is not a worker of another process of "
                     "this cluster (process ",
                     process_, " of ", processes_, ", ", workers(), " workers each)"));
  }
  if (to >= total_workers() || !is_local(to)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data frame to worker ", to, " (field to) is not a worker of this process (process ",
        process_, " of ", processes_, ", ", workers(), " workers each)"));
  }
  return deliver(ChannelKind::kData, channel, from, to, 0, payload);
}

absl::Status ProcessShared::deliver_progress(uint64_t channel, uint32_t from, uint64_t seq,
                                             std::string_view payload) {
  if (from >= total_workers() || is_local(from)) {
    return absl::InvalidArgumentError(
        absl::StrCat("progress frame from worker ", from,
                     " (field from) is not a worker of another process "
                     "of this cluster (process ",
                     process_, " of ", processes_, ", ", workers(), " workers each)"));
  }
  return deliver(ChannelKind::kProgress, channel, from, 0, seq, payload);
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
