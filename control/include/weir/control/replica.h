// A replica: a long-running process that follows the catalog and keeps every object it names
// running, with no controller present (docs/control.md, "Replicas").
//
//   ReplicaOptions options;
//   options.location = persist::PersistLocation::in_directory(dir);
//   options.stop = stop;  // Set on SIGTERM.
//   absl::Status ended = run_replica(options);  // Runs until stopped or fenced.
//
// Each start takes a new execution id E: the next number of the shard `weir.executions` (a row
// "execution=E host:pid started=TIME"). From then on the replica
// - claims `weir.health` (an ingest::StatusShard fenced by E): one row per object, "NAME STATE
//   execution=E object=ID restarts=N [error=...]", STATE one of starting, running, stalled,
//   completed, dropped. A predecessor's late rows are refused, so the relation never goes back to
//   an older execution's state;
// - records every transition in `weir.health_history` (weir/control/health.h), claimed and fenced
//   the same way, and retracts the rows older than health_retention or beyond the newest
//   health_history_per_object of a name;
// - follows the catalog: each poll (or news of an append from the upper relay) reads the
//   catalog's upper (no write), and when it moved, the catalog at it; an object that appeared
//   gets a runner (a thread: a source's ingestion, a view, a declared hold), one that was dropped
//   is stopped and reported dropped, one recreated under the same name (a new object id) is
//   stopped and started again;
// - restarts a runner that failed after a backoff (backoff_initial doubling to backoff_max), from
//   what its shards hold; a runner that reaches its end reports completed;
// - checks at every poll that it is still the latest execution. Once a later one has started, it
//   stops every runner and returns FailedPrecondition "replica execution E is fenced by execution
//   E2 (host:pid, started TIME)". A runner checks the same before it fences any shard
//   (RunContext::check_current), so a superseded replica never fences its successor's writers:
//   no shard gets an append from an older execution once a newer one has fenced it.
//
// A replica of several processes (run_replica_cluster, weir/control/replica_cluster.h) runs this
// in each process with the execution process 0 took (ReplicaOptions::execution), and each
// process runs only the objects placed on it (weir/control/placement.h); process 0 alone writes
// the health relations, the others forward their transitions to it.
//
// A catalog that does not decode (hostile bytes: DataLoss naming the version) is reported on the
// row of `weir.catalog` in weir.health and the objects keep running as they were; nothing is
// dropped because of it.
//
// Thread safety: run_replica blocks its caller; RunnerFactory and the callbacks are called from
// the replica's threads.

#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "weir/control/catalog.h"
#include "weir/control/health.h"
#include "weir/ingest/ingest.h"
#include "weir/persist/client.h"

namespace weir::control {

inline constexpr char kExecutionsShard[] = "weir.executions";
inline constexpr char kHealthShard[] = "weir.health";
// The purpose of a declared hold's critical since handle ("catalog hold READER"): a replica
// releases those no live hold object owns.
inline constexpr char kHoldPurpose[] = "catalog hold ";

// What a runner gets from the replica.
struct RunContext {
  uint64_t execution = 0;
  std::string object_name;
  // Set when the runner must return (the object was dropped, the replica stops or was fenced).
  std::shared_ptr<std::atomic<bool>> stop;
  // Set (before stop) when the object was dropped from the catalog: a declared hold lets go.
  std::shared_ptr<std::atomic<bool>> dropped;
  // Call once the object runs (its health goes from starting, or stalled, to running).
  std::function<void()> running;
  // Call when the object cannot go on now but its runner keeps trying (an ingestion backing off
  // after a transient error): its health goes to stalled with `why` until running() again.
  std::function<void(const absl::Status& why)> stalled;
  // OK while this replica is the latest execution, else FailedPrecondition naming its successor.
  // Call it before fencing anything (IngestOptions::check_before_fencing).
  std::function<absl::Status()> check_current;
  // The replica's store and client options, for the runner's own PersistClient.
  persist::PersistLocation location;
  persist::PersistConfig persist;
  std::shared_ptr<persist::Blob> blob;
  std::shared_ptr<persist::Consensus> consensus;
  size_t workers = 1;
  std::function<void(ingest::LogSeverity, const std::string&)> log;
};

// Runs one object until ctx.stop is set (OK), it reaches its end (OK), or it fails.
using Runner = std::function<absl::Status(const RunContext& ctx)>;
// The runner of `object`. An error stalls the object with it (tried again after a backoff).
using RunnerFactory = std::function<absl::StatusOr<Runner>(const CatalogObject& object)>;

// The runners of sources, views and declared holds (control/src/runners.cc).
RunnerFactory default_runners();

// What the replica runs, after a reconciliation.
struct ReplicaState {
  uint64_t execution = 0;
  uint64_t catalog_version = 0;  // The catalog version reconciled.
  struct Object {
    std::string name;
    std::string object_id;
    std::string kind;  // source, view or hold.
  };
  std::vector<Object> objects;  // Every object with a runner, by name.
};

struct ReplicaOptions {
  persist::PersistLocation location;
  persist::PersistConfig persist;
  // Optional: stores to use instead of opening `location`'s (tests). Both or neither.
  std::shared_ptr<persist::Blob> blob;
  std::shared_ptr<persist::Consensus> consensus;
  size_t workers = 1;  // Worker threads of each object's dataflow.
  // Set to stop: every runner is stopped and run_replica returns OK.
  std::shared_ptr<std::atomic<bool>> stop;
  // Between two looks at the catalog and the executions. News from the client's upper relay
  // (persist/relay.h; a `weir pubsub` links processes) wakes the replica at once; while the
  // relay hears every process's appends, it looks only every relay_poll (a safety net).
  std::chrono::milliseconds poll{100};
  std::chrono::milliseconds relay_poll{1000};
  std::chrono::milliseconds backoff_initial{100};
  std::chrono::milliseconds backoff_max{60000};
  std::function<void(ingest::LogSeverity, const std::string&)> log;  // May be null.
  RunnerFactory runners;                                             // Null: default_runners().
  // Called after each reconciliation (tests sample it; /status shows it). May be null.
  std::function<void(const ReplicaState&)> on_reconciled;
  // Called once the execution id is taken. May be null.
  std::function<void(uint64_t execution)> on_execution;
  // Called after each health transition this replica has recorded in weir.health (from the
  // replica's threads; /status and /metrics show them). May be null.
  std::function<void(const HealthTransition&)> on_health;
  // weir.health_history keeps a transition this long (by PersistConfig::clock) and at most this
  // many per object name (the newest). Both must be positive.
  std::chrono::milliseconds health_retention = std::chrono::hours(24 * 7);
  size_t health_history_per_object = 1000;

  // A replica of several processes (run_replica_cluster, weir/control/replica_cluster.h, fills
  // these): this process runs only the objects placed on it (weir/control/placement.h), reports
  // the catalog's own row and releases orphaned holds only on process 0, and adds "process=I" to
  // its health rows. With processes > 1, `execution` is required.
  size_t processes = 1;
  size_t process = 0;
  // The execution id the cluster's process 0 took (take_execution); unset: run_replica takes one.
  std::optional<uint64_t> execution;
  // Processes other than 0 set this: each health transition goes to it (on to process 0, the one
  // writer of weir.health and weir.health_history for the execution) instead of to the shards.
  std::function<void(const HealthTransition&)> forward_health;
  // Process 0 of a cluster sets this: the transitions the other processes forwarded since the
  // last call, which it records as its own (fenced the same way).
  std::function<std::vector<HealthTransition>()> take_forwarded_health;
};

// Takes the next replica execution id: appends "execution=E host:pid started=TIME" (and
// " processes=N" when processes > 1) to weir.executions with compare-and-set.
absl::StatusOr<uint64_t> take_execution(persist::PersistClient& client, size_t processes = 1);

// OK while `execution` is the latest replica execution; FailedPrecondition "replica execution E
// is fenced by execution E2 (host:pid started=TIME)" once a later one exists.
absl::Status check_latest_execution(persist::PersistClient& client, uint64_t execution);

// Runs the replica (see above). OK when stopped; FailedPrecondition when a later execution has
// fenced it; another error if it could not start (the stores, the health shard).
absl::Status run_replica(const ReplicaOptions& options);

}  // namespace weir::control
