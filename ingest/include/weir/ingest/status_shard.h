// StatusShard: the health of a source's exports in `<kind>.status`, written by one incarnation
// of the driver at a time.
//
// Fencing: open() first takes the shard's critical since hold (`ingest status fencing`) over for
// its incarnation (its epoch), refusing if a later incarnation holds it, then claims the shard
// with an append that moves its upper and adopts a predecessor's rows (one per table: its next
// row for a table replaces the predecessor's; a table it reports nothing about keeps the last
// state reported, stamped with the incarnation that reported it). From then on each append
// is a compare-and-set at the upper this incarnation's own last append left, never re-read: a
// predecessor's append, made at an upper behind ours, is rejected instead of landing on top of
// our rows, and once a later incarnation has claimed the shard our next append is rejected the
// same way (FailedPrecondition naming that incarnation, for this call and every later one).
//
// The shard holds one row per export, "<table> <status> incarnation=N epoch=E [error=...]": the
// current state of the export as the latest incarnation reported it. Each change retracts the
// export's previous row and adds the new one, at a wall-clock time in milliseconds (kept
// increasing), so the shard at time t is the state at t, and a snapshot at its latest time is the
// state now.
//
//   WEIR_ASSIGN_OR_RETURN(auto status, StatusShard::open(client, "auction.status", incarnation));
//   WEIR_RETURN_IF_ERROR(status->update({{"bids", "bids running incarnation=3 epoch=0"}}));
//
// A log (open_log: weir.health_history) is fenced the same way, but its rows are not keyed by
// table: the claim adopts and retracts nothing, and append() adds and retracts rows as given.
//
// Thread safety: thread-safe (calls are serialized).

#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "weir/mutex.h"
#include "weir/persist/background_maintenance.h"
#include "weir/persist/client.h"
#include "weir/persist/since_handle.h"
#include "weir/persist/write_handle.h"

namespace weir::ingest {

class StatusShard {
 public:
  // Opens the status shard `name` for `incarnation` and claims it (see above). FailedPrecondition
  // if a later incarnation holds it. Appends that report maintenance_due ask `maintenance`.
  static absl::StatusOr<std::shared_ptr<StatusShard>> open(
      std::shared_ptr<persist::PersistClient> client, const std::string& name, uint64_t incarnation,
      std::shared_ptr<persist::BackgroundMaintenance> maintenance = nullptr);

  // Opens `name` as a log for `incarnation` and claims it (the same fence as open()). Its appends
  // are at `clock`'s time in milliseconds (kept increasing, whatever the clock does).
  static absl::StatusOr<std::shared_ptr<StatusShard>> open_log(
      std::shared_ptr<persist::PersistClient> client, const std::string& name, uint64_t incarnation,
      std::shared_ptr<persist::BackgroundMaintenance> maintenance,
      std::function<absl::Time()> clock);

  // For a log: appends `changes` (row, diff) in one append, at one time, fenced and retried as
  // update() is. Returns the time it appended them at.
  absl::StatusOr<uint64_t> append(const std::vector<std::pair<std::string, int64_t>>& changes);

  // Sets the rows of the given tables (table -> row), retracting each table's previous row, in
  // one append. FailedPrecondition once a later incarnation has taken the shard over (nothing
  // written). After another error (say, consensus unavailable) the change is kept and the next
  // call appends it first, with the same batch: if the failed call did append it, that is
  // recognised (its idempotency token), so nothing is written twice.
  absl::Status update(const std::vector<std::pair<std::string, std::string>>& rows);

  // For the driver: replaces an expired writer (see persist::is_writer_expired) with a new one.
  absl::Status reopen_if_expired();

  // Deregisters the writer.
  absl::Status expire();

  const std::string& name() const { return name_; }

 private:
  // A change not yet known to be appended.
  struct Pending {
    std::vector<persist::Update> updates;     // At one time.
    std::map<std::string, std::string> rows;  // rows_ once appended.
    std::optional<persist::Batch> batch;      // Built once; retried as it is.
  };

  StatusShard(std::shared_ptr<persist::PersistClient> client, std::string name,
              uint64_t incarnation, persist::WriteHandle writer,
              std::shared_ptr<persist::SinceHandle> hold,
              std::shared_ptr<persist::BackgroundMaintenance> maintenance, bool log,
              std::function<absl::Time()> clock);
  static absl::StatusOr<std::shared_ptr<StatusShard>> open(
      std::shared_ptr<persist::PersistClient> client, const std::string& name, uint64_t incarnation,
      std::shared_ptr<persist::BackgroundMaintenance> maintenance, bool log,
      std::function<absl::Time()> clock);
  uint64_t now_ms() const;
  absl::Status claim();
  absl::Status append_pending() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK while this incarnation holds the shard's hold; else sets and returns fenced_.
  // Confirms that this incarnation still holds the shard, moving its since up to `since` (only
  // the latest state is kept readable: compaction consolidates the history).
  absl::Status check_hold(uint64_t since = 0) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<persist::PersistClient> client_;
  const std::string name_;
  const uint64_t incarnation_;
  const std::shared_ptr<persist::SinceHandle> hold_;
  const std::shared_ptr<persist::BackgroundMaintenance> maintenance_;
  const bool log_;  // Rows are not keyed by table (open_log).
  const std::function<absl::Time()> clock_;
  weir::Mutex mu_;
  persist::WriteHandle writer_ ABSL_GUARDED_BY(mu_);
  uint64_t expected_ ABSL_GUARDED_BY(mu_) = 0;                    // The upper our last append left.
  std::map<std::string, std::string> rows_ ABSL_GUARDED_BY(mu_);  // Table -> our row in the shard.
  std::optional<Pending> pending_ ABSL_GUARDED_BY(mu_);
  absl::Status fenced_ ABSL_GUARDED_BY(mu_);
};

}  // namespace weir::ingest
