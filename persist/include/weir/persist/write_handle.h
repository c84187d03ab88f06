// WriteHandle: appends batches to one shard.
//
// The shard's upper only moves by compare_and_append(batch, expected_upper, new_upper), which
// adds the batch [expected_upper, new_upper) if and only if the shard's upper is still
// expected_upper; otherwise it returns UpperMismatch with the current upper and changes nothing.
// That compare-and-set is what fences writers: of two writers (two replicas, or an old and a new
// incarnation) racing for the same upper exactly one wins.
//
// A writer holds a lease, renewed by every append and by heartbeat(). GC may expire a writer
// whose lease has run out; its unappended parts are then removed and its later appends fail
// with FailedPrecondition.
//
//   WEIR_ASSIGN_OR_RETURN(WriteHandle writer, client->open_writer("orders"));
//   std::vector<Update> updates = {{"a", 0, 1}, {"b", 3, 1}};
//   WEIR_ASSIGN_OR_RETURN(AppendResult result,
//                         writer.compare_and_append(updates, Frontier(0), Frontier(5)));
//   if (!result.is_appended()) { /* lost: result.mismatch->current is the shard's upper */ }
//
// Thread safety: thread-safe.

#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "weir/persist/batch.h"
#include "weir/persist/frontier.h"
#include "weir/persist/ids.h"

namespace weir::persist {

struct UpperMismatch {
  Frontier current;  // The shard's upper when the append was refused.
};

struct AppendResult {
  std::optional<UpperMismatch> mismatch;  // Set if the append was refused.
  // The shard has many batches or many consensus versions (see PersistConfig): call
  // PersistClient::maintain when convenient.
  bool maintenance_due = false;

  bool is_appended() const { return !mismatch.has_value(); }
};

// Whether `status`, an error of compare_and_append (or of any call that writes the shard's state),
// leaves the outcome unknown: consensus failed after the new state was sent (a lost reply, a
// timeout), so the write may have committed. Retry compare_and_append with the same batch: its
// idempotency token makes the retry report the truth (appended, or a mismatch). Any other error
// means nothing was written.
bool is_indeterminate(const absl::Status& status);

// Whether `status` (FailedPrecondition) says that the writer, or the writer that built the batch,
// has expired: GC removed it once its lease ran out. The handle is spent; open a new writer (and
// build the batch again) to go on.
bool is_writer_expired(const absl::Status& status);

namespace internal {
class WriterCore;
}  // namespace internal

class WriteHandle {
 public:
  WriteHandle(WriteHandle&&) noexcept;
  WriteHandle& operator=(WriteHandle&&) noexcept;
  // Does not expire the writer (that needs consensus); call expire().
  ~WriteHandle();

  const ShardId& shard_id() const;
  const std::string& writer_id() const;

  // The shard's upper as of this handle's latest interaction with consensus.
  Frontier upper() const;
  // Reads the latest upper from consensus.
  absl::StatusOr<Frontier> fetch_recent_upper();

  // A builder for a batch starting at `lower`.
  BatchBuilder builder(Frontier lower);

  // Appends `batch` if the shard's upper is `expected_upper`. REQUIRES (else InvalidArgument):
  // the batch belongs to this shard and its description is [expected_upper, new_upper).
  // A retry with the same batch after an error (say, a lost connection) returns appended if the
  // first try did append it. FailedPrecondition if this writer, or the one that built the batch,
  // has expired.
  absl::StatusOr<AppendResult> compare_and_append(const Batch& batch, Frontier expected_upper,
                                                  Frontier new_upper);

  // Builds a batch of `updates` and appends it; on a mismatch its parts are removed.
  absl::StatusOr<AppendResult> compare_and_append(std::span<const Update> updates,
                                                  Frontier expected_upper, Frontier new_upper);

  // Removes the parts of a batch that will never be appended. REQUIRES: the batch is not in the
  // shard (discarding an appended batch makes the shard unreadable).
  absl::Status discard(const Batch& batch);

  // Renews the lease.
  absl::Status heartbeat();

  // Deregisters the writer. The handle is spent afterwards.
  absl::Status expire();

 private:
  friend class PersistClient;
  explicit WriteHandle(std::shared_ptr<internal::WriterCore> core);

  std::shared_ptr<internal::WriterCore> core_;
};

}  // namespace weir::persist
