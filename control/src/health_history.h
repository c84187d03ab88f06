// HealthHistory: the replica's writer of weir.health_history (weir/control/health.h): one row per
// transition, fenced by the execution (an ingest::StatusShard log), and the retention that
// retracts what is no longer kept.
//
// It keeps an index of the rows the shard holds (read once, at open; then kept up to date), so
// that retention retracts their exact bytes without reading the shard again. The index holds what
// the retention keeps: at most `per_name` rows for each name that has a row younger than
// `retention`.
//
// Thread safety: thread-safe (calls are serialized).

#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "weir/control/health.h"
#include "weir/ingest/status_shard.h"
#include "weir/mutex.h"
#include "weir/persist/background_maintenance.h"
#include "weir/persist/client.h"

namespace weir::control::internal {

class HealthHistory {
 public:
  // Claims weir.health_history for `execution` (FailedPrecondition if a later one holds it), reads
  // what it holds, and retracts at once the rows that do not parse (written around the replica)
  // and those past the retention.
  static absl::StatusOr<std::unique_ptr<HealthHistory>> open(
      std::shared_ptr<persist::PersistClient> client, uint64_t execution,
      std::shared_ptr<persist::BackgroundMaintenance> maintenance,
      std::function<absl::Time()> clock, std::chrono::milliseconds retention, size_t per_name);

  // Records `transition` (its execution, seq and time are set here) and, in the same append,
  // retracts what the retention no longer keeps. FailedPrecondition once a later execution has
  // claimed the shard (nothing written, then or ever again).
  absl::Status record(HealthTransition transition);

  // Retracts the rows past the retention, if there are any (else writes nothing). Cheap when
  // there are none: call it at every poll.
  absl::Status sweep();

  absl::Status expire() { return shard_->expire(); }

 private:
  struct Entry {
    uint64_t execution = 0;
    uint64_t seq = 0;
    int64_t at_ms = 0;
    std::string row;
    int64_t count = 1;  // Its diff in the shard (a row written twice by hand counts twice).
  };

  HealthHistory(std::shared_ptr<ingest::StatusShard> shard, std::function<absl::Time()> clock,
                std::chrono::milliseconds retention, size_t per_name)
      : shard_(std::move(shard)),
        clock_(std::move(clock)),
        retention_(retention),
        per_name_(per_name) {}

  int64_t now_ms() const { return absl::ToUnixMillis(clock_()); }
  // Rows recorded before this are past the retention (saturating: any clock, any retention).
  int64_t cutoff_ms() const {
    const int64_t now = now_ms();
    return now < std::numeric_limits<int64_t>::min() + retention_.count()
               ? std::numeric_limits<int64_t>::min()
               : now - retention_.count();
  }
  void add(const std::string& name, Entry entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void retract(const Entry& entry, std::vector<std::pair<std::string, int64_t>>& changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves what the retention no longer keeps from the index to `changes` (as retractions).
  void retain(std::vector<std::pair<std::string, int64_t>>& changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status append(const std::vector<std::pair<std::string, int64_t>>& changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<ingest::StatusShard> shard_;
  const std::function<absl::Time()> clock_;
  const std::chrono::milliseconds retention_;
  const size_t per_name_;
  weir::Mutex mu_;
  uint64_t execution_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // The rows kept, by name, each name's in recording order (execution, seq).
  std::map<std::string, std::deque<Entry>> by_name_ ABSL_GUARDED_BY(mu_);
  std::multiset<int64_t> times_ ABSL_GUARDED_BY(mu_);  // Every kept row's at_ms: the oldest first.
};

}  // namespace weir::control::internal
