#include "weir/persist/since_handle.h"

#include "handles.h"
#include "str_cat.h"

#include "weir/mutex.h"
#include "weir/status.h"

namespace weir::persist {
namespace internal {
namespace {

// Shard::apply from this handle's cached state, which may be stale: a hold registered, or an epoch
// set, by another handle of the same id since would be refused. So a refusal (`refused()`, or
// FailedPrecondition) made on a state older than the latest is tried again on the latest.
// `change` records in `seen` the seqno of the state it ran on.
absl::StatusOr<ShardState> apply_refusing_on_latest(
    const Shard& shard, const ShardState& cached, const uint64_t& seen,
    absl::FunctionRef<bool()> refused,
    absl::FunctionRef<absl::StatusOr<Shard::Step>(proto::ProtoShardState&)> change) {
  absl::StatusOr<ShardState> applied = shard.apply(cached, change);
  if (applied.ok() ? refused() : applied.status().code() == absl::StatusCode::kFailedPrecondition) {
    WEIR_ASSIGN_OR_RETURN(ShardState latest, shard.fetch());
    if (latest.seqno > seen) {
      applied = shard.apply(std::move(latest), change);
    }
  }
  return applied;
}

}  // namespace

absl::StatusOr<std::shared_ptr<CriticalCore>> CriticalCore::open(Shard shard, CriticalReaderId id,
                                                                 std::string purpose) {
  std::shared_ptr<CriticalCore> core(new CriticalCore(std::move(shard), std::move(id)));
  const Shard& s = core->shard_;
  weir::MutexLock lock(core->mu_);
  WEIR_ASSIGN_OR_RETURN(ShardState current, s.fetch());
  WEIR_ASSIGN_OR_RETURN(
      core->state_, s.apply(std::move(current), [&](proto::ProtoShardState& state) {
        if (find_critical_reader(state, core->id_.str()) != nullptr) {
          return Shard::Step::kKeep;  // Registered before, maybe by an earlier incarnation.
        }
        proto::ProtoCriticalReader* entry = state.add_critical_readers();
        entry->set_reader_id(core->id_.str());
        entry->set_purpose(as_utf8(purpose));
        *entry->mutable_since() = state.since();
        entry->set_epoch(0);
        entry->set_last_changed_ms(s.core().now_ms());
        return Shard::Step::kWrite;
      }));
  const proto::ProtoCriticalReader* entry =
      find_critical_reader(core->state_.proto, core->id_.str());
  core->epoch_ = entry->epoch();
  core->since_ = frontier_of(entry->since());
  return core;
}

uint64_t CriticalCore::epoch() const {
  weir::MutexLock lock(mu_);
  return epoch_;
}

Frontier CriticalCore::since() const {
  weir::MutexLock lock(mu_);
  return since_;
}

absl::StatusOr<SinceResult> CriticalCore::compare_and_downgrade_since(uint64_t expected_epoch,
                                                                      uint64_t new_epoch,
                                                                      Frontier new_since) {
  weir::MutexLock lock(mu_);
  SinceResult result;
  uint64_t seen = 0;  // The seqno of the state the change last ran on.
  bool retry = false;
  const auto change = [&](proto::ProtoShardState& state) -> absl::StatusOr<Shard::Step> {
    result = SinceResult();
    seen = state.seqno();
    proto::ProtoCriticalReader* entry = find_critical_reader(state, id_.str());
    if (entry == nullptr) {
      return absl::FailedPreconditionError(
          internal::str_cat(shard_.label(), ": critical reader ", id_.str(), " has expired"));
    }
    result.since = frontier_of(entry->since());
    // A retry after an attempt that committed (its reply lost) finds the epoch at new_epoch
    // already: its own change, not a mismatch (no other holder moves to the same epoch).
    if (entry->epoch() != expected_epoch && !(retry && entry->epoch() == new_epoch)) {
      result.mismatch = EpochMismatch{entry->epoch()};
      return Shard::Step::kKeep;
    }
    if (entry->epoch() != new_epoch || result.since < new_since) {
      entry->set_last_changed_ms(shard_.core().now_ms());
    }
    entry->set_epoch(new_epoch);
    if (result.since < new_since) {
      to_proto(new_since, entry->mutable_since());
      result.since = new_since;
    }
    recompute_since(state);
    return Shard::Step::kWrite;
  };
  absl::StatusOr<ShardState> applied = apply_refusing_on_latest(
      shard_, state_, seen, [&] { return result.mismatch.has_value(); }, change);
  // Applied again, on the latest state, while consensus fails transiently.
  for (int attempt = 1;
       !applied.ok() && applied.status().code() == absl::StatusCode::kUnavailable &&
       attempt < kStoreAttempts;
       ++attempt) {
    retry_backoff(attempt);
    retry = true;
    absl::StatusOr<ShardState> latest = shard_.fetch();
    applied = latest.ok() ? shard_.apply(*std::move(latest), change) : latest.status();
  }
  WEIR_ASSIGN_OR_RETURN(state_, std::move(applied));
  epoch_ = result.mismatch ? result.mismatch->current : new_epoch;
  since_ = result.since;
  return result;
}

absl::StatusOr<std::optional<EpochMismatch>> CriticalCore::expire(uint64_t expected_epoch) {
  weir::MutexLock lock(mu_);
  std::optional<EpochMismatch> mismatch;
  uint64_t seen = 0;
  WEIR_ASSIGN_OR_RETURN(state_, apply_refusing_on_latest(
                                    shard_, state_, seen, [&] { return mismatch.has_value(); },
                                    [&](proto::ProtoShardState& state) {
                                      mismatch.reset();
                                      seen = state.seqno();
                                      auto* readers = state.mutable_critical_readers();
                                      for (int i = 0; i < readers->size(); ++i) {
                                        if (readers->Get(i).reader_id() == id_.str()) {
                                          if (readers->Get(i).epoch() != expected_epoch) {
                                            mismatch = EpochMismatch{readers->Get(i).epoch()};
                                            return Shard::Step::kKeep;
                                          }
                                          readers->DeleteSubrange(i, 1);
                                          recompute_since(state);
                                          return Shard::Step::kWrite;
                                        }
                                      }
                                      return Shard::Step::kKeep;
                                    }));
  return mismatch;
}

}  // namespace internal

SinceHandle::SinceHandle(std::shared_ptr<internal::CriticalCore> core) : core_(std::move(core)) {}
SinceHandle::SinceHandle(SinceHandle&&) noexcept = default;
SinceHandle& SinceHandle::operator=(SinceHandle&&) noexcept = default;
SinceHandle::~SinceHandle() = default;

const ShardId& SinceHandle::shard_id() const { return core_->shard().id(); }
const CriticalReaderId& SinceHandle::reader_id() const { return core_->reader_id(); }
uint64_t SinceHandle::epoch() const { return core_->epoch(); }
Frontier SinceHandle::since() const { return core_->since(); }

absl::StatusOr<SinceResult> SinceHandle::compare_and_downgrade_since(uint64_t expected_epoch,
                                                                     uint64_t new_epoch,
                                                                     Frontier new_since) {
  return core_->compare_and_downgrade_since(expected_epoch, new_epoch, new_since);
}

absl::StatusOr<std::optional<EpochMismatch>> SinceHandle::expire(uint64_t expected_epoch) {
  return core_->expire(expected_epoch);
}

}  // namespace weir::persist
