// The MySQL-family source (MariaDB 10.11): a database's tables, snapshotted in parallel and then
// followed through the binlog, one export per table. Design: docs/design/sources.md ("MySQL
// family"); user guide: docs/ingest.md ("MariaDB").
//
// Time is the GTID's sequence number in the server's one replication domain: a transaction with
// GTID D-S-N is at time N (every change of it, in every table, at that one time), and an export
// whose upper is N + 1 holds every transaction up to N. Sequence numbers of one domain are
// totally ordered (gtid_strict_mode keeps them so). A second domain, or GTIDs from another server
// id (a failover to another server, whose binlog is another history), cannot be mapped onto
// these times without reordering: definite for the whole source.
//
// - Upstream checks (`check_upstream`, before anything runs): MariaDB, log_bin on,
//   binlog_format=ROW, binlog_row_image=FULL, one GTID domain, the user's REPLICATION SLAVE and
//   BINLOG MONITOR (REPLICATION CLIENT) privileges, binlog retention; SELECT on a table when its
//   snapshot is planned (load_table).
// - Snapshot (an async operator on every worker): the leader takes `FLUSH TABLES t, ... WITH
//   READ LOCK` on the snapshotted tables (writes to them wait; other tables go on), every worker
//   opens `START TRANSACTION WITH CONSISTENT SNAPSHOT`, the leader reads its snapshot's binlog
//   position (binlog_snapshot_file/position, as a GTID through BINLOG_GTID_POS) and unlocks.
//   The lock is held from the flush until every worker has its snapshot: milliseconds, unless a
//   long transaction holds one of the tables (the flush waits for it, and writers queue
//   behind). Workers read a table with an integer primary key by key ranges, each its share; a
//   table without one is read by one worker. Rows at time 0.
// - Rewinds, as in the PostgreSQL source: the stream starts at the smallest resume upper of the
//   exports that do not snapshot (the snapshot's position C when all do), and every change of a
//   snapshotted export at a time before C is in its snapshot already: it is given as (row, 0,
//   -diff) and (row, N, +diff), which makes time 0 the table as of where the stream started.
// - Replication (one worker): a GTID binlog dump from the resume point, decoding table maps, row
//   events (v1, v2), queries (DDL), GTIDs and XIDs; heartbeats keep an idle connection checked.
// - Definite errors for one export at the GTID where they happen: DDL that changes its columns,
//   TRUNCATE, the table dropped or renamed, an undecodable value. For the source: the binlog
//   purged past the resume point, a second domain or another server id. Transient (the
//   operator fails; the driver restarts): a lost connection, a server restart.
//
// Thread safety: MysqlShared is thread-safe; the rest is worker-local.

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
#include "weir/sources/mysql/types.h"
#include "weir/sources/postgres/value.h"
#include "weir/sources/source.h"

namespace weir::sources::mysql {

// A position in the one GTID domain: the last transaction (domain-server-seq), or none.
struct GtidPosition {
  uint32_t domain = 0;
  uint32_t server = 0;
  uint64_t seq = 0;  // 0: no transaction yet.
  // "D-S-N", or "" for none.
  std::string to_string() const;
  bool operator==(const GtidPosition&) const = default;
};

// Parses a GTID position as @@gtid_binlog_pos prints it: "" (none) or "D-S-N"; more than one
// domain ("0-1-5,1-1-2") is FailedPrecondition, naming them.
absl::StatusOr<GtidPosition> parse_gtid_position(std::string_view text);

struct UpstreamInfo {
  unsigned long server_version = 0;
  std::string database;   // The connection string's.
  GtidPosition position;  // @@gtid_binlog_pos now.
  // The server's own domain and id (@@gtid_domain_id, @@server_id): the origin of the GTIDs it
  // will write.
  GtidPosition server;
  std::vector<std::string> tables;  // The database's base tables, sorted.
  // Tables with no primary key (read by one worker in the snapshot).
  std::vector<std::string> without_primary_key;
};

// Checks the server and the database (see the header comment); every failure names the thing
// and what to change. Transient failures (the server is down) are Unavailable; configuration
// problems FailedPrecondition.
absl::StatusOr<UpstreamInfo> check_upstream(const std::string& conninfo);

// The columns of `database`.`table` now, and their weir description.
struct TableDesc {
  std::vector<MysqlColumn> columns;
  postgres::RelationDesc desc;
  // Why weir cannot follow the table ("" if it can): a foreign key that cascades (MariaDB applies
  // cascades without logging them), an engine without consistent snapshots (MyISAM, Aria, ...).
  std::string unsupported;
};
absl::StatusOr<TableDesc> load_table(const std::string& conninfo, const std::string& table);

// The catalog's columns as recorded with a table's shard (`<kind>.schemas`): the binlog's rows
// are decoded with the columns the snapshot had. decode(encode(c)) == c; damaged input is an
// error, never a read past its end.
std::string encode_columns(const std::vector<MysqlColumn>& columns);
absl::StatusOr<std::vector<MysqlColumn>> decode_columns(std::string_view bytes);

// A transaction the binlog had: its GTID, the second its GTID event was written, and a mark of
// its content. Recorded
// with the shards ("@last-gtid" in `<kind>.schemas`), and looked for again where a later run
// resumes: a binlog that has another transaction there holds another history (RESET MASTER, a
// restored backup, another server with the same ids).
struct GtidFingerprint {
  GtidPosition gtid;
  uint32_t timestamp = 0;
  // The transaction's XID (InnoDB's transaction id: it only grows, RESET MASTER or not), or for
  // one without (DDL, non-transactional tables) a CRC-32 of its statements and row images.
  uint64_t mark = 0;
  std::string to_string() const;  // "D-S-N@T#M"
  static std::optional<GtidFingerprint> parse(std::string_view text);
  bool operator==(const GtidFingerprint&) const = default;
};

// What the workers of one epoch share (one process): the snapshot's position, published by the
// leader once the tables are locked, and how far the workers have got.
class MysqlShared {
 public:
  struct Snapshot {
    GtidPosition position;  // The snapshot holds every transaction up to it.
    // Per export: the integer primary key's range [lo, hi] to split (none: one worker reads it).
    std::vector<std::optional<std::pair<int64_t, int64_t>>> key_range;
    std::vector<uint64_t> rows;  // Per export: the estimate of its rows (for the display).
  };
  explicit MysqlShared(size_t workers) : workers_(workers) {}
  size_t workers() const { return workers_; }
  // The leader locked the tables: every worker may open its snapshot now.
  void locked(absl::Status status);
  std::optional<absl::Status> lock_state() const;
  void publish(absl::StatusOr<Snapshot> snapshot);
  std::optional<absl::StatusOr<Snapshot>> snapshot() const;
  void opened();
  bool all_opened() const;
  // The last transaction the binlog operator has passed (for the next epoch's fingerprint).
  void passed(const GtidFingerprint& transaction);
  std::optional<GtidFingerprint> last_passed() const;
  // The binlog had no transaction just before where the dump was asked to start (a gap in the
  // sequence numbers): the next epochs read from where the exports resume, and check nothing.
  void preread_failed();
  bool has_preread_failed() const;

 private:
  const size_t workers_;
  mutable weir::Mutex mu_;
  std::optional<absl::Status> locked_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::StatusOr<Snapshot>> snapshot_ ABSL_GUARDED_BY(mu_);
  size_t opened_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<GtidFingerprint> passed_ ABSL_GUARDED_BY(mu_);
  bool preread_failed_ ABSL_GUARDED_BY(mu_) = false;
};

// One export's table.
struct ExportTable {
  std::string name;  // The table's name in the database.
  std::vector<MysqlColumn> columns;
  postgres::RelationDesc desc;
  std::optional<size_t> int_key;  // The column index of a single-column integer primary key.
  // A definite error the plan found: written into the export at its resume upper.
  std::string error_to_write;
};

struct MysqlSourceConfig {
  std::string conninfo;
  std::string database;
  ProgressMode mode = ProgressMode::kConcurrent;
  std::vector<ExportTable> tables;  // Per export, in the ExportSpecs' order.
  // Where the domain's GTIDs come from (recorded at the first run).
  uint32_t domain = 0;
  uint32_t server = 0;
  uint32_t replica_server_id = 0;  // The dump connection's server id (unique per replica).
  // A transaction recorded by an earlier run: the binlog is read from it on (or from the one
  // before where the exports resume), and it must be the same one, or every export errors.
  std::optional<GtidFingerprint> fingerprint;
  // Read the transaction before where the exports resume too (to record it as passed); off
  // once a dump found no transaction there.
  bool preread = true;
  size_t leader = 0;  // Snapshot leader and streaming worker.
  std::shared_ptr<MysqlShared> shared;
  std::shared_ptr<SourceStats> stats;  // Optional.
  std::chrono::milliseconds heartbeat{1000};
  // Stop once every export's frontier passes this offset (tests and benchmarks).
  std::optional<Offset> until;
};

absl::StatusOr<RenderedSource> render_mysql(Scope<Offset>& scope, const MysqlSourceConfig& config,
                                            const std::vector<ExportSpec>& exports);

}  // namespace weir::sources::mysql
