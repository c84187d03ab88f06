// SinceHandle: a critical since hold on one shard, durable and fenced by an opaque epoch.
//
// Unlike a ReadHandle's leased hold, a critical hold never expires: it is registered under a
// CriticalReaderId that its owner chooses once and stores, and it lasts until expire(). Only
// compare_and_downgrade_since moves it, and only if the caller presents the current epoch, so a
// stale incarnation of the owner cannot move the hold once a newer one has bumped the epoch.
// Persist never interprets the epoch beyond comparing it for equality.
//
//   WEIR_ASSIGN_OR_RETURN(SinceHandle hold, client->open_critical_since("orders", id));
//   WEIR_ASSIGN_OR_RETURN(SinceResult r, hold.compare_and_downgrade_since(
//                                            hold.epoch(), my_incarnation, Frontier(40)));
//   if (r.mismatch) { /* fenced: another incarnation holds epoch r.mismatch->current */ }
//
// Thread safety: thread-safe.

#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "weir/persist/frontier.h"
#include "weir/persist/ids.h"

namespace weir::persist {

struct EpochMismatch {
  uint64_t current = 0;  // The epoch the hold has.
};

struct SinceResult {
  std::optional<EpochMismatch> mismatch;  // Set if the epoch did not match; nothing changed.
  Frontier since;                         // The hold's since afterwards.
};

namespace internal {
class CriticalCore;
}  // namespace internal

class SinceHandle {
 public:
  SinceHandle(SinceHandle&&) noexcept;
  SinceHandle& operator=(SinceHandle&&) noexcept;
  ~SinceHandle();

  const ShardId& shard_id() const;
  const CriticalReaderId& reader_id() const;

  // The epoch and since as of this handle's latest interaction with consensus. A new hold starts
  // at epoch 0 and at the shard's since.
  uint64_t epoch() const;
  Frontier since() const;

  // If the hold's epoch is `expected_epoch`, sets it to `new_epoch` and moves the since forward
  // to `new_since` (a smaller value leaves it where it is). A store failure is retried inside; a
  // retry that finds the epoch already at `new_epoch` takes it for its own lost change. So every
  // owner must move to epochs no other owner uses (an incarnation number taken once, say): two
  // that both go from E to E + 1 could each believe it holds the hold.
  absl::StatusOr<SinceResult> compare_and_downgrade_since(uint64_t expected_epoch,
                                                          uint64_t new_epoch, Frontier new_since);

  // Removes the hold if its epoch is `expected_epoch`. The handle is spent afterwards.
  absl::StatusOr<std::optional<EpochMismatch>> expire(uint64_t expected_epoch);

 private:
  friend class PersistClient;
  explicit SinceHandle(std::shared_ptr<internal::CriticalCore> core);

  std::shared_ptr<internal::CriticalCore> core_;
};

}  // namespace weir::persist
