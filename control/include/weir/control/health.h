// Health history: every health transition a replica records, kept for a while in the persist
// shard `weir.health_history` (docs/control.md, "Health").
//
// weir.health holds each object's current state (one row per object); weir.health_history holds
// one row per transition:
//
//   NAME STATE execution=E object=ID restarts=N seq=S at=MS [process=P] [error=CODE: message]
//
// `seq` counts the transitions of execution E from 0 and `at` is the replica's clock
// (PersistConfig::clock) in milliseconds since the Unix epoch; `process` is there in a replica of
// several processes (the process that runs the object; process 0 records every transition).
// Executions fence each other (a later one claims the shard before it writes, and an earlier one's
// appends are refused from then on), so (execution, seq) is the order in which the transitions were
// recorded, whatever the clocks said. The replica retracts a row once it is older than
// ReplicaOptions::health_retention, or once its name has more than
// ReplicaOptions::health_history_per_object newer rows, and moves the shard's since along so that
// compaction consolidates the retracted rows away.
//
//   WEIR_ASSIGN_OR_RETURN(std::vector<HealthTransition> audit, read_health_history(client,
//   "audit"));
//
// Thread safety: functions are thread-safe (as the PersistClient is); values have no internal
// synchronization.

#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "weir/persist/client.h"

namespace weir::control {

inline constexpr char kHealthHistoryShard[] = "weir.health_history";

// One transition of an object's health, as a replica recorded it.
struct HealthTransition {
  std::string name;
  std::string state;  // starting, running, stalled, completed, dropped.
  uint64_t execution = 0;
  std::string object_id;  // Empty for the catalog's own row (weir.catalog).
  size_t restarts = 0;
  uint64_t seq = 0;   // The transition's number within its execution.
  int64_t at_ms = 0;  // The replica's clock, in milliseconds since the Unix epoch.
  std::string error;  // "CODE: message" when stalled by an error, else empty.
  // The process of a replica of several processes that runs the object ("process=P" in the
  // rows); unset for a replica of one process.
  std::optional<uint64_t> process;
  // The catalog version that created the object (CatalogObject::created_version); not in the
  // rows. Process 0 of a cluster orders by it the transitions of two objects of one name (a drop
  // and a create that moved the name to another process): weir.health keeps the newer object's.
  uint64_t created_version = 0;

  friend bool operator==(const HealthTransition&, const HealthTransition&) = default;
};

// The row of weir.health_history for `transition` (see above; the error on one line).
std::string health_history_row(const HealthTransition& transition);

// The transition a row holds; nullopt for a row that is not one (a replica retracts those).
std::optional<HealthTransition> parse_health_history_row(std::string_view row);

// The transitions weir.health_history holds now, of the object `name` (every object when empty),
// in the order they were recorded (by execution, then seq). Empty when no replica has written the
// shard. Rows that do not parse are skipped. Reads without a hold, so a GC meanwhile is retried.
absl::StatusOr<std::vector<HealthTransition>> read_health_history(persist::PersistClient& client,
                                                                  std::string_view name = {});

}  // namespace weir::control
