// The PostgreSQL source: a publication's tables, snapshotted in parallel and then followed
// through a logical replication slot (pgoutput), one export per table. Design:
// docs/design/sources.md; user guide: docs/ingest.md ("PostgreSQL").
//
// Time is the LSN: a change is at its transaction's commit LSN, so a transaction spanning
// tables lands at one time in every shard. Time 0 of an export is the table as of where the
// replication stream started (the slot's confirmed position, at most the export's resume upper).
//
// - Upstream checks (`check_upstream`, before anything runs): the server version (>= 13),
//   wal_level=logical, the role's replication privilege, the publication and its tables, that
//   every table has REPLICA IDENTITY FULL, and the slot (created if missing, with pgoutput).
// - Snapshot (an async operator on every worker): the leader opens a replication connection,
//   creates a TEMPORARY slot with USE_SNAPSHOT inside a REPEATABLE READ transaction, takes its
//   consistent point C and exports the snapshot; every worker imports it (SET TRANSACTION
//   SNAPSHOT) and COPYs its share of each table by ctid block range, at time 0.
// - Rewinds: the snapshot shows every transaction that committed before C. The replication
//   stream starts at the slot's position R <= C, so for a snapshotted export each change that
//   committed at L < C is in the snapshot already: it is given twice, (row, 0, -diff) and
//   (row, L, +diff), which makes time 0 the table as of R whatever C was. The export's time 0 is
//   held until the stream has passed C.
// - Replication (an async operator; one worker streams, the others only report health):
//   START_REPLICATION with pgoutput proto_version 1, from the smallest resume upper; each export
//   skips commits below its own upper. Commits and keepalives advance every export's frontier;
//   standby status updates (every `status_interval`, asking for a keepalive back so that an idle
//   stream still advances) confirm only the smallest durable upper of all exports.
// - Definite errors, written into the export at a commit LSN: a Relation message whose columns
//   no longer match the export's recorded description, TRUNCATE, an undecodable value, an
//   UPDATE or DELETE without the old row (identity not FULL). Transient errors (connection lost,
//   server restart, slot busy: says which pid) fail the operator; the driver restarts.
//
// Thread safety: PostgresShared is thread-safe; the rest is worker-local.

#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "weir/dataflow/scope.h"
#include "weir/mutex.h"
#include "weir/sources/postgres/pgoutput.h"
#include "weir/sources/postgres/value.h"
#include "weir/sources/source.h"

namespace weir::sources::postgres {

// A table of the publication.
struct UpstreamTable {
  std::string name;  // schema.table, as export names use it.
  uint32_t oid = 0;
};

struct UpstreamInfo {
  int server_version = 0;
  std::string system_id;  // IDENTIFY_SYSTEM: which cluster this is.
  uint64_t timeline = 0;  // IDENTIFY_SYSTEM: the server's timeline now.
  std::vector<UpstreamTable> tables;
  uint64_t slot_confirmed_lsn = 0;  // The slot's confirmed_flush_lsn.
  bool slot_created = false;
  // Without `create` (a running source's re-check), what would be refused is reported here
  // instead: the source's own error (the publication or the slot dropped, the slot
  // invalidated: every export errors), and the tables whose replica identity is not FULL.
  std::string source_error;
  std::vector<std::string> not_full;
  bool slot_exists = true;
};

enum class UpstreamCheck {
  // Before anything runs: every problem is refused; a missing slot is reported
  // (slot_exists = false), not created, so a run refused later leaves nothing behind.
  kStart,
  // The same, creating the slot if missing.
  kCreateSlot,
  // A running source's re-check before an epoch: what would be refused is reported in
  // source_error and not_full instead (the exports error; see UpstreamInfo).
  kRunning,
};

// Checks the server, the publication (it publishes every change, of whole non-partitioned tables
// the role may read, each with REPLICA IDENTITY FULL) and the slot; every failure names the thing
// and what to run. See UpstreamCheck for the modes. Transient failures (the server is down) are
// Unavailable; configuration problems FailedPrecondition.
absl::StatusOr<UpstreamInfo> check_upstream(const std::string& conninfo,
                                            const std::string& publication, const std::string& slot,
                                            UpstreamCheck mode);

// The current description of table `oid` from the catalog (columns in order, types resolved).
absl::StatusOr<RelationDesc> load_relation_desc(const std::string& conninfo, uint32_t oid);

// What the workers of one epoch share (one process): the snapshot's consistent point and name,
// published by the snapshot leader, and how far the snapshot has got.
class PostgresShared {
 public:
  struct Snapshot {
    uint64_t lsn = 0;              // The temporary slot's consistent point C.
    std::string name;              // pg_export_snapshot().
    std::vector<uint64_t> blocks;  // Per export: the table's size in blocks (0 if not snapshotted).
    std::vector<double> reltuples;
  };
  explicit PostgresShared(size_t workers) : workers_(workers) {}
  size_t workers() const { return workers_; }
  void publish(absl::StatusOr<Snapshot> snapshot);
  // nullopt until published.
  std::optional<absl::StatusOr<Snapshot>> snapshot() const;
  // A worker imported the snapshot / finished its share of every table.
  void imported();
  void finished();
  bool all_imported() const;
  bool all_finished() const;

 private:
  const size_t workers_;
  mutable weir::Mutex mu_;
  std::optional<absl::StatusOr<Snapshot>> snapshot_ ABSL_GUARDED_BY(mu_);
  size_t imported_ ABSL_GUARDED_BY(mu_) = 0;
  size_t finished_ ABSL_GUARDED_BY(mu_) = 0;
};

// One export's table: its name, oid and the description its rows are encoded with.
struct ExportTable {
  std::string name;  // schema.table
  uint32_t oid = 0;
  RelationDesc desc;
  // A definite error the plan found (the table left the publication, the slot moved past the
  // export's upper): written into the export at its resume upper.
  std::string error_to_write;
};

struct PostgresSourceConfig {
  std::string conninfo;
  std::string publication;
  std::string slot;
  ProgressMode mode = ProgressMode::kConcurrent;  // Read once, by the driver.
  std::vector<ExportTable> tables;                // Per export, in the ExportSpecs' order.
  size_t leader = 0;                              // Snapshot leader and streaming worker.
  std::shared_ptr<PostgresShared> shared;         // One per epoch, for every worker.
  std::shared_ptr<SourceStats> stats;             // Optional.
  // The smallest durable upper of the exports: what the slot may confirm. Thread-safe.
  std::function<Offset()> durable_upper;
  // The slot confirms no more than this either (the uppers of the source's shards that this run
  // leaves out).
  Offset confirm_floor = std::numeric_limits<Offset>::max();
  std::chrono::milliseconds status_interval{200};
  // Stop once every export's frontier passes this LSN (tests and benchmarks).
  std::optional<Offset> until;
};

absl::StatusOr<RenderedSource> render_postgres(Scope<Offset>& scope,
                                               const PostgresSourceConfig& config,
                                               const std::vector<ExportSpec>& exports);

}  // namespace weir::sources::postgres
