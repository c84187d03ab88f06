#include "weir/persist/write_handle.h"

#include <algorithm>

#include "absl/strings/cord.h"
#include "handles.h"
#include "str_cat.h"

#include "weir/mutex.h"
#include "weir/status.h"

namespace weir::persist {
namespace internal {
namespace {

Frontier upper_of(const ShardState& state) { return frontier_of(state.proto.upper()); }

constexpr char kWriterExpiredPayload[] = "weir.persist/writer-expired";

// FailedPrecondition, tagged so that is_writer_expired recognises it.
absl::Status writer_expired(const std::string& message) {
  absl::Status status = absl::FailedPreconditionError(message);
  status.SetPayload(kWriterExpiredPayload, absl::Cord("1"));
  return status;
}

// An append whose outcome is unknown (is_indeterminate), whatever refused the last try: the
// refusal's tags come along (is_fenced, is_writer_expired: the handle is spent), but never as a
// definite refusal, which would have the caller discard parts that the shard may reference.
absl::Status unknown_outcome(const std::string& message, const absl::Status& last) {
  absl::Status status = absl::UnavailableError(message);
  last.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { status.SetPayload(url, payload); });
  return mark_indeterminate(std::move(status));
}

}  // namespace

absl::StatusOr<std::shared_ptr<WriterCore>> WriterCore::open(Shard shard, std::string purpose,
                                                             const Fence& fence) {
  std::shared_ptr<WriterCore> writer(new WriterCore(std::move(shard), random_id('w'), fence.epoch));
  weir::MutexLock lock(writer->mu_);
  const Shard& s = writer->shard_;
  const int64_t now = s.core().now_ms();
  const auto change = [&](proto::ProtoShardState& state) -> absl::StatusOr<Shard::Step> {
    WEIR_RETURN_IF_ERROR(
        check_or_raise_fence(
            s, state, internal::str_cat("writer ", writer->writer_id_, " (\"", purpose, "\")"),
            fence, /*raise=*/true)
            .status());
    proto::ProtoWriter* entry = find_writer(state, writer->writer_id_);
    if (entry == nullptr) {
      entry = state.add_writers();
      entry->set_writer_id(writer->writer_id_);
      entry->set_purpose(as_utf8(purpose));
      entry->set_fence_epoch(fence.epoch);
    }
    entry->set_last_heartbeat_ms(now);
    entry->set_lease_duration_ms(absl::ToInt64Milliseconds(s.core().config().writer_lease));
    return Shard::Step::kWrite;
  };
  // Retried here, by the same id: a caller's retry after a lost reply would register a second
  // writer and leave the first one registered for its whole lease.
  WEIR_ASSIGN_OR_RETURN(writer->state_,
                        retry_unavailable(kStoreAttempts, [&]() -> absl::StatusOr<ShardState> {
                          WEIR_ASSIGN_OR_RETURN(ShardState current, s.fetch());
                          return s.apply(std::move(current), change);
                        }));
  writer->last_heartbeat_ms_ = now;
  return writer;
}

absl::Status WriterCore::check_registered(const proto::ProtoShardState& state) const {
  if (fenced_out(state, fence_epoch_)) {
    return fenced_error(shard_, state, internal::str_cat("writer ", writer_id_), fence_epoch_);
  }
  if (!has_writer(state, writer_id_)) {
    return writer_expired(
        internal::str_cat(shard_.label(), ": writer ", writer_id_, " has expired"));
  }
  return absl::OkStatus();
}

Frontier WriterCore::upper() const {
  weir::MutexLock lock(mu_);
  return upper_of(state_);
}

absl::StatusOr<Frontier> WriterCore::fetch_recent_upper() {
  WEIR_ASSIGN_OR_RETURN(ShardState latest, shard_.fetch());
  weir::MutexLock lock(mu_);
  if (latest.seqno > state_.seqno) {
    state_ = std::move(latest);
  }
  return upper_of(state_);
}

absl::StatusOr<AppendResult> WriterCore::compare_and_append(const Batch& batch,
                                                            Frontier expected_upper,
                                                            Frontier new_upper) {
  const std::string& label = shard_.label();
  if (batch.shard_id != shard_.id()) {
    return absl::InvalidArgumentError(
        internal::str_cat(label, ": cannot append a batch of shard ", batch.shard_id.str()));
  }
  if (batch.description.lower != expected_upper || batch.description.upper != new_upper ||
      new_upper < expected_upper) {
    return absl::InvalidArgumentError(
        internal::str_cat(label, ": batch [", batch.description.lower.to_string(), ", ",
                          batch.description.upper.to_string(), ") does not match the append [",
                          expected_upper.to_string(), ", ", new_upper.to_string(), ")"));
  }
  const std::string prefix = shard_.id().str() + "/";
  for (const PartRef& part : batch.parts) {
    if (!part.key.starts_with(prefix)) {
      return absl::InvalidArgumentError(
          internal::str_cat(label, ": part \"", part.key, "\" is not a part of this shard"));
    }
  }
  if (new_upper == expected_upper && !batch.parts.empty()) {
    return absl::InvalidArgumentError(
        internal::str_cat(label, ": a batch with parts cannot have an empty time interval"));
  }
  const int64_t now = shard_.core().now_ms();
  weir::MutexLock lock(mu_);
  const uint64_t seqno_before = state_.seqno;
  AppendResult result;
  uint64_t seen = 0;  // The seqno of the state `change` last ran on.
  const auto change = [&](proto::ProtoShardState& state) -> absl::StatusOr<Shard::Step> {
    result = AppendResult();
    seen = state.seqno();
    if (!batch.idempotency_token.empty() &&
        std::any_of(state.writers().begin(), state.writers().end(), [&](const auto& writer) {
          return writer.last_append_token() == batch.idempotency_token;
        })) {
      // A retry of an append that went through (say, before a lost reply), by this writer or by
      // a later incarnation's: done already.
      return Shard::Step::kKeep;
    }
    WEIR_RETURN_IF_ERROR(check_registered(state));
    proto::ProtoWriter* self = find_writer(state, writer_id_);
    const Frontier upper = frontier_of(state.upper());
    if (upper != expected_upper) {
      // A batch without a token (an older encoding) is recognised by its first part, as long as
      // no compaction has rewritten it.
      if (batch.idempotency_token.empty() && !batch.parts.empty() &&
          references_part(state, batch.parts.front().key)) {
        return Shard::Step::kKeep;
      }
      result.mismatch = UpperMismatch{upper};
      return Shard::Step::kKeep;
    }
    if (!batch.parts.empty() && batch.writer_id != writer_id_ &&
        !has_writer(state, batch.writer_id)) {
      return writer_expired(internal::str_cat(
          label, ": the batch was built by writer ", batch.writer_id,
          ", which has expired or was fenced out; its parts may have been removed: build the "
          "batch again"));
    }
    if (new_upper == expected_upper) {
      return Shard::Step::kKeep;  // Nothing to add: the upper is as expected.
    }
    self->set_last_heartbeat_ms(now);
    self->set_last_append_token(batch.idempotency_token);
    const int n = state.batches_size();
    if (batch.parts.empty() && n > 0 && state.batches(n - 1).parts_size() == 0) {
      // Progress only: widen the trailing empty batch rather than adding one per append.
      to_proto(new_upper, state.mutable_batches(n - 1)->mutable_upper());
    } else {
      to_proto(batch, state.add_batches());
    }
    to_proto(new_upper, state.mutable_upper());
    return Shard::Step::kWrite;
  };
  absl::StatusOr<ShardState> applied = shard_.apply(state_, change);
  // A batch with a token is applied again, on the latest state, while consensus fails
  // transiently: if an attempt committed (its reply lost), the token recognises it; otherwise it
  // applies now. Without a token a retry could not tell its own commit from another writer's.
  std::optional<absl::Status> lost_reply;  // The first indeterminate attempt, if one was.
  for (int attempt = 1;
       !applied.ok() && applied.status().code() == absl::StatusCode::kUnavailable &&
       !batch.idempotency_token.empty() && attempt < kStoreAttempts;
       ++attempt) {
    if (!lost_reply && is_indeterminate(applied.status())) lost_reply = applied.status();
    retry_backoff(attempt);
    absl::StatusOr<ShardState> latest = shard_.fetch();
    applied = latest.ok() ? shard_.apply(*std::move(latest), change) : latest.status();
  }
  // `change` runs first on the state this writer cached, which may be stale: the upper may have
  // reached expected_upper since, the batch's builder may have registered since, and the token of
  // a retry may be in a newer state (its first try committed, the reply was lost; then a refusal
  // would have the caller discard parts the shard references). Only the latest state refuses.
  const bool refused = applied.ok()
                           ? !result.is_appended()
                           : applied.status().code() == absl::StatusCode::kFailedPrecondition;
  if (refused) {
    absl::StatusOr<ShardState> latest = shard_.fetch();
    if (!latest.ok()) {
      applied = latest.status();
    } else if (latest->seqno > seen) {
      applied = shard_.apply(*std::move(latest), change);
    }
  }
  const bool spent =
      !applied.ok() && (is_writer_expired(applied.status()) || is_fenced(applied.status()));
  if (lost_reply && !applied.ok()) {
    // Whatever failed after an attempt whose outcome is unknown leaves it unknown: indeterminate,
    // never a definite error (the caller would discard parts that the shard may reference). A
    // writer that expired or was fenced out took its token with it: the outcome cannot be learned
    // any more.
    applied = unknown_outcome(
        internal::str_cat(
            lost_reply->message(), "; then: ", applied.status().message(),
            spent ? internal::str_cat("; writer ", writer_id_,
                                      " is gone before a retry could learn whether the append "
                                      "committed")
                  : std::string()),
        applied.status());
  } else if (spent && !batch.idempotency_token.empty() &&
             batch.idempotency_token == unknown_token_) {
    // The caller's retry of an append this handle reported indeterminate (a lost reply, then
    // consensus down for the rest of that call): that first try may have committed, and the
    // token that would tell went with the writer. Still unknown, never refused.
    applied = unknown_outcome(
        internal::str_cat(applied.status().message(), "; an earlier try of this append (writer ",
                          writer_id_, ") may have committed: its outcome stays unknown"),
        applied.status());
  }
  if (!applied.ok()) {
    if (!batch.idempotency_token.empty() && is_indeterminate(applied.status())) {
      unknown_token_ = batch.idempotency_token;
    }
    return applied.status();
  }
  state_ = *std::move(applied);
  if (batch.idempotency_token == unknown_token_) {
    unknown_token_.clear();  // Appended, or a definite mismatch: known.
  }
  if (result.is_appended()) {
    last_heartbeat_ms_ = now;
    const std::shared_ptr<UpperRelay>& relay = shard_.core().config().relay;
    if (relay != nullptr) relay->publish(shard_.id(), upper_time(upper_of(state_)));
  }
  const PersistConfig& config = shard_.core().config();
  const uint64_t interval = std::max<uint64_t>(1, config.maintenance_seqno_interval);
  result.maintenance_due =
      static_cast<size_t>(state_.proto.batches_size()) > config.maintenance_batch_threshold ||
      state_.seqno / interval > seqno_before / interval;
  return result;
}

absl::Status WriterCore::heartbeat() {
  const int64_t now = shard_.core().now_ms();
  weir::MutexLock lock(mu_);
  // Retried while consensus fails transiently: setting the heartbeat again is harmless.
  WEIR_ASSIGN_OR_RETURN(
      state_, retry_unavailable(kStoreAttempts, [&]() -> absl::StatusOr<ShardState> {
        WEIR_ASSIGN_OR_RETURN(ShardState latest, shard_.fetch());
        return shard_.apply(std::move(latest),
                            [&](proto::ProtoShardState& state) -> absl::StatusOr<Shard::Step> {
                              WEIR_RETURN_IF_ERROR(check_registered(state));
                              find_writer(state, writer_id_)->set_last_heartbeat_ms(now);
                              return Shard::Step::kWrite;
                            });
      }));
  last_heartbeat_ms_ = now;
  return absl::OkStatus();
}

absl::Status WriterCore::maybe_heartbeat() {
  {
    weir::MutexLock lock(mu_);
    const int64_t lease_ms = absl::ToInt64Milliseconds(shard_.core().config().writer_lease);
    if (shard_.core().now_ms() - last_heartbeat_ms_ < lease_ms / 4) {
      return absl::OkStatus();
    }
  }
  return heartbeat();
}

absl::Status WriterCore::expire() {
  weir::MutexLock lock(mu_);
  WEIR_ASSIGN_OR_RETURN(ShardState latest, shard_.fetch());
  WEIR_ASSIGN_OR_RETURN(state_, shard_.apply(std::move(latest), [&](proto::ProtoShardState& state) {
    auto* writers = state.mutable_writers();
    for (int i = 0; i < writers->size(); ++i) {
      if (writers->Get(i).writer_id() == writer_id_) {
        writers->DeleteSubrange(i, 1);
        return Shard::Step::kWrite;
      }
    }
    return Shard::Step::kKeep;
  }));
  return absl::OkStatus();
}

BatchBuilderImpl::BatchBuilderImpl(std::shared_ptr<WriterCore> writer, Frontier lower)
    : writer_(std::move(writer)),
      lower_(lower),
      recycler_(writer_->shard().core().part_buffers()),
      buffer_(recycler_->take()),
      uploader_(writer_->shard().core().pool(), writer_->shard().core().blob(),
                writer_->shard().core().config().max_parts_in_flight) {}

absl::Status BatchBuilderImpl::add(std::string_view data, uint64_t time, int64_t diff) {
  if (spent_) {
    return absl::FailedPreconditionError("BatchBuilder::add after finish or discard");
  }
  if (!lower_.less_equal(time)) {
    return absl::InvalidArgumentError(
        internal::str_cat(writer_->shard().label(), ": update at time ", time,
                          " is before the batch's lower ", lower_.to_string()));
  }
  if (data.size() > kMaxDataBytes) {
    return absl::InvalidArgumentError(internal::str_cat(writer_->shard().label(), ": update of ",
                                                        data.size(), " bytes exceeds the limit of ",
                                                        kMaxDataBytes));
  }
  if (!buffer_.fits(data.size())) {
    WEIR_RETURN_IF_ERROR(flush());
  }
  buffer_.add(data, time, diff);
  ++added_;
  max_time_ = std::max(max_time_.value_or(time), time);
  if (buffer_.update_bytes() >= part_target_bytes()) {
    WEIR_RETURN_IF_ERROR(flush());
  }
  return absl::OkStatus();
}

absl::Status BatchBuilderImpl::upload_error(absl::Status status) {
  if (status.ok() || is_writer_expired(status)) {
    return status;
  }
  absl::Status alive = writer_->heartbeat();
  if (!is_writer_expired(alive)) {
    return status;
  }
  return writer_expired(
      internal::str_cat(alive.message(), " (a part upload failed: ", status.message(), ")"));
}

absl::Status BatchBuilderImpl::flush(bool last) {
  if (buffer_.empty()) {
    return absl::OkStatus();
  }
  // A long build must keep its lease, or GC could take its parts before the append.
  WEIR_RETURN_IF_ERROR(writer_->maybe_heartbeat());
  std::string key = writer_->shard().new_part_key(writer_->writer_id());
  return upload_error(uploader_.upload(
      key,
      [buffer = std::exchange(buffer_, recycler_->take()), recycler = recycler_,
       blob = writer_->shard().core().blob(), shard_id = writer_->shard().id().str(), key,
       level = writer_->shard().core().config().zstd_level]() mutable {
        buffer.sort_and_consolidate();
        auto written = write_part(*blob, shard_id, key, buffer, level);
        recycler->give(std::move(buffer));
        return written;
      },
      last));
}

absl::StatusOr<Batch> BatchBuilderImpl::finish(Frontier upper) {
  if (spent_) {
    return absl::FailedPreconditionError("BatchBuilder::finish after finish or discard");
  }
  const std::string& label = writer_->shard().label();
  absl::Status invalid;
  if (upper < lower_) {
    invalid = absl::InvalidArgumentError(internal::str_cat(
        label, ": batch upper ", upper.to_string(), " is before its lower ", lower_.to_string()));
  } else if (max_time_ && upper.less_equal(*max_time_)) {
    invalid = absl::InvalidArgumentError(
        internal::str_cat(label, ": an update at time ", *max_time_,
                          " is not before the batch upper ", upper.to_string()));
  }
  if (!invalid.ok()) {
    discard().IgnoreError();
    return invalid;
  }
  spent_ = true;
  absl::Status flushed = flush(/*last=*/true);
  absl::StatusOr<std::vector<WrittenPart>> parts =
      flushed.ok() ? uploader_.finish() : absl::StatusOr<std::vector<WrittenPart>>(flushed);
  if (!parts.ok()) {
    uploader_.discard().IgnoreError();
    return upload_error(parts.status());
  }
  Batch batch;
  batch.shard_id = writer_->shard().id();
  batch.writer_id = writer_->writer_id();
  batch.description = {lower_, upper, Frontier(0)};
  batch.idempotency_token = random_id('t');
  for (size_t i = 0; i < parts->size(); ++i) {
    if (i > 0 && !continues_run((*parts)[i - 1], (*parts)[i])) {
      batch.run_starts.push_back(static_cast<uint32_t>(i));
    }
    batch.parts.push_back(std::move((*parts)[i].ref));
  }
  return batch;
}

absl::Status BatchBuilderImpl::discard() {
  spent_ = true;
  buffer_.clear();
  return uploader_.discard();
}

}  // namespace internal

bool is_writer_expired(const absl::Status& status) {
  return status.GetPayload(internal::kWriterExpiredPayload).has_value();
}

uint64_t Batch::num_updates() const {
  uint64_t n = 0;
  for (const PartRef& part : parts) {
    n += part.num_updates;
  }
  return n;
}

uint64_t Batch::update_bytes() const {
  uint64_t n = 0;
  for (const PartRef& part : parts) {
    n += part.update_bytes;
  }
  return n;
}

std::string Batch::encode() const {
  internal::proto::ProtoTransmittableBatch wire;
  wire.set_format_version(internal::kBatchFormatVersion);
  wire.set_shard_id(shard_id.str());
  internal::to_proto(*this, wire.mutable_batch());
  wire.set_idempotency_token(idempotency_token);
  return wire.SerializeAsString();
}

absl::StatusOr<Batch> Batch::decode(std::string_view bytes) {
  internal::proto::ProtoTransmittableBatch wire;
  if (!wire.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError(
        internal::str_cat("not an encoded batch (", bytes.size(), " bytes)"));
  }
  if (wire.format_version() != internal::kBatchFormatVersion) {
    return absl::InvalidArgumentError(
        internal::str_cat("encoded batch has format version ", wire.format_version(),
                          "; this build reads version ", internal::kBatchFormatVersion));
  }
  WEIR_ASSIGN_OR_RETURN(ShardId shard_id, ShardId::parse(wire.shard_id()));
  const internal::proto::ProtoBatch& batch = wire.batch();
  const auto valid = [](const internal::proto::ProtoFrontier& f) { return f.elements_size() <= 1; };
  if (!batch.has_lower() || !batch.has_upper() || !batch.has_since() || !valid(batch.lower()) ||
      !valid(batch.upper()) || !valid(batch.since())) {
    return absl::InvalidArgumentError("encoded batch has a malformed description");
  }
  uint32_t previous = 0;
  for (uint32_t start : batch.run_starts()) {
    if (start <= previous || start >= static_cast<uint32_t>(batch.parts_size())) {
      return absl::InvalidArgumentError("encoded batch has malformed runs");
    }
    previous = start;
  }
  for (const auto& part : batch.parts()) {
    if (!validate_blob_key(part.key()).ok() || !part.key().starts_with(shard_id.str() + "/")) {
      return absl::InvalidArgumentError(
          internal::str_cat("encoded batch has a malformed part key \"", part.key(), "\""));
    }
  }
  Batch decoded = internal::batch_of(shard_id, batch);
  decoded.idempotency_token = wire.idempotency_token();
  return decoded;
}

BatchBuilder::BatchBuilder(std::unique_ptr<internal::BatchBuilderImpl> impl)
    : impl_(std::move(impl)) {}
BatchBuilder::BatchBuilder(BatchBuilder&&) noexcept = default;
BatchBuilder& BatchBuilder::operator=(BatchBuilder&&) noexcept = default;
BatchBuilder::~BatchBuilder() = default;

absl::Status BatchBuilder::add(std::string_view data, uint64_t time, int64_t diff) {
  return impl_->add(data, time, diff);
}
absl::StatusOr<Batch> BatchBuilder::finish(Frontier upper) { return impl_->finish(upper); }
absl::Status BatchBuilder::discard() { return impl_->discard(); }
uint64_t BatchBuilder::num_updates_added() const { return impl_->num_updates_added(); }
bool BatchBuilder::uploads_full() const { return impl_->uploads_full(); }
absl::Status BatchBuilder::wait_for_room() { return impl_->wait_for_room(); }

WriteHandle::WriteHandle(std::shared_ptr<internal::WriterCore> core) : core_(std::move(core)) {}
WriteHandle::WriteHandle(WriteHandle&&) noexcept = default;
WriteHandle& WriteHandle::operator=(WriteHandle&&) noexcept = default;
WriteHandle::~WriteHandle() = default;

const ShardId& WriteHandle::shard_id() const { return core_->shard().id(); }
const std::string& WriteHandle::writer_id() const { return core_->writer_id(); }
Frontier WriteHandle::upper() const { return core_->upper(); }
absl::StatusOr<Frontier> WriteHandle::fetch_recent_upper() { return core_->fetch_recent_upper(); }

BatchBuilder WriteHandle::builder(Frontier lower) {
  return BatchBuilder(std::make_unique<internal::BatchBuilderImpl>(core_, lower));
}

absl::StatusOr<AppendResult> WriteHandle::compare_and_append(const Batch& batch,
                                                             Frontier expected_upper,
                                                             Frontier new_upper) {
  return core_->compare_and_append(batch, expected_upper, new_upper);
}

absl::StatusOr<AppendResult> WriteHandle::compare_and_append(std::span<const Update> updates,
                                                             Frontier expected_upper,
                                                             Frontier new_upper) {
  BatchBuilder batch_builder = builder(expected_upper);
  for (const Update& update : updates) {
    absl::Status added = batch_builder.add(update.data, update.time, update.diff);
    if (!added.ok()) {
      batch_builder.discard().IgnoreError();
      return added;
    }
  }
  WEIR_ASSIGN_OR_RETURN(Batch batch, batch_builder.finish(new_upper));
  absl::StatusOr<AppendResult> result = compare_and_append(batch, expected_upper, new_upper);
  // After an error the batch may or may not be in the shard, so only a refusal frees its parts.
  if (result.ok() && !result->is_appended()) {
    discard(batch).IgnoreError();
  }
  return result;
}

absl::Status WriteHandle::discard(const Batch& batch) {
  if (batch.shard_id != shard_id()) {
    return absl::InvalidArgumentError(internal::str_cat(
        core_->shard().label(), ": cannot discard a batch of shard ", batch.shard_id.str()));
  }
  absl::Status status;
  for (const PartRef& part : batch.parts) {
    status.Update(core_->shard().core().blob()->remove(part.key));
  }
  return status;
}

absl::Status WriteHandle::heartbeat() { return core_->heartbeat(); }
absl::Status WriteHandle::expire() { return core_->expire(); }

}  // namespace weir::persist
