// The ingestion driver: a source's tables flow through a multi-worker dataflow into one persist
// shard per table, exactly once. Used by `weir ingest`, the ingestion tests and benchmarks.
//
// The driver runs the dataflow in epochs: each epoch renders the source with one export per
// table (resuming each from its shard's upper; an empty shard is snapshotted) and one persist
// sink per export, plus a health operator that appends status changes to `<kind>.status`. An
// error in any source, sink or health operator ends the epoch: the dataflow is dropped on every
// worker and, unless the error is fatal, the next epoch resumes from the uppers after a backoff
// (see ErrorClass). Adding a table (`add_table`) also starts a new epoch: the new table snapshots
// while the others resume where they were.
//
// Shards are named `<kind>.<table>` (e.g. `auction.bids`). Every start of the driver takes a new
// incarnation number from the shard `<kind>.incarnations` (a compare-and-set append), so two
// drivers never share one. The driver holds each table shard's since a compaction window behind
// its upper with a critical since hold (id: the shard's uuid with the prefix `c`), fenced by the
// incarnation: a driver whose hold a later incarnation took over ends with FailedPrecondition.
//
// Thread safety: run_ingest blocks; IngestMonitor is thread-safe.

#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "weir/mutex.h"
#include "weir/persist/background_maintenance.h"
#include "weir/persist/blob.h"
#include "weir/persist/config.h"
#include "weir/persist/consensus.h"
#include "weir/persist/since_handle.h"
#include "weir/sinks/persist_sink.h"
#include "weir/sources/loadgen/loadgen_source.h"
#include "weir/sources/source.h"
#include "weir/worker/config.h"

namespace weir::persist {
class PersistClient;
}

namespace weir::ingest {

// A source the driver runs: the load generator (the default, configured by
// IngestOptions::source) or another upstream (IngestOptions::upstream, e.g. PostgreSQL: see
// weir/ingest/postgres.h). The driver calls open, identity and prepare from one thread (the
// planner, while no dataflow runs) and render on every worker.
class IngestSource {
 public:
  virtual ~IngestSource() = default;
  // The prefix of its shards' names: `<kind>.<table>`, `<kind>.status`, `<kind>.source`.
  virtual std::string kind() const = 0;
  // Connects to the upstream, checks it, and lists its tables (ingested when
  // IngestOptions::tables is empty; a table not listed is refused). A transient error
  // (classify_error) is retried after a backoff.
  virtual absl::StatusOr<std::vector<std::string>> open(persist::PersistClient& client) = 0;
  // The options that decide what the tables hold, as "name=value" fields: recorded in
  // `<kind>.source` by the first run, and a run with other ones is refused. Called after open.
  virtual std::vector<std::string> identity() const = 0;
  // The upper at which every table is complete, if the source ends (the generator's until + 1).
  // Called after open.
  virtual std::optional<sources::Offset> until() const { return std::nullopt; }
  // Called before every epoch with the exports' resume uppers (and definite errors): a place
  // for the source's I/O, and to mark an export errored.
  virtual absl::Status prepare(persist::PersistClient& client,
                               std::vector<sources::ExportSpec>& exports) {
    (void)client;
    (void)exports;
    return absl::OkStatus();
  }
  // Called once when a run ends normally (not on an error, nor when the process dies): a place
  // to record what the next run should know.
  virtual absl::Status finish(persist::PersistClient& client) {
    (void)client;
    return absl::OkStatus();
  }
  // What render gets besides the exports.
  struct Epoch {
    std::shared_ptr<sources::SourceStats> stats;  // For the display.
    // Export e's durable upper (its shard's, as the sink last appended): what a source may
    // acknowledge to its upstream. Thread-safe.
    std::function<sources::Offset(size_t e)> durable_upper;
  };
  // Renders the source on one worker (every worker calls it, with the same arguments).
  virtual absl::StatusOr<sources::RenderedSource> render(
      Scope<sources::Offset>& scope, const std::vector<sources::ExportSpec>& exports,
      const Epoch& epoch) = 0;
};

// How much a driver event matters (IngestOptions::log_event).
enum class LogSeverity { kInfo, kWarning, kError };

struct IngestOptions {
  persist::PersistLocation location;
  persist::PersistConfig persist;                // Tuning of the persist client (defaults).
  weir::Config workers;                          // -w
  sources::loadgen::LoadgenSourceConfig source;  // Generator, rate, until, mode, faults.
  std::shared_ptr<IngestSource> upstream;        // Set: this source, not the generator.
  std::vector<std::string> tables;               // Empty: every table of the generator.
  // Add this table after `add_after` (a new epoch: it snapshots, the others resume).
  std::string add_table;
  std::chrono::milliseconds add_after{0};
  std::function<void(const std::string&)> log;  // Events (snapshot done, restarts); may be null.
  // The same events with their severity (a backoff, an expired writer: warnings; what ends the
  // run: an error); may be null.
  std::function<void(LogSeverity, const std::string&)> log_event;
  // Backoff after a transient error: the n-th consecutive failed attempt (an epoch that ended
  // with an error before any shard's upper moved, or a plan that could not be made) waits a
  // random time in [d/2, d] before the next, d = min(backoff_initial * backoff_multiplier^(n-1),
  // backoff_max). An epoch in which some shard's upper moved starts the count again.
  std::chrono::milliseconds backoff_initial{100};
  double backoff_multiplier = 2;
  std::chrono::milliseconds backoff_max{10000};
  // Optional, for health (a replica shows the object stalled meanwhile): on_backoff is called
  // with the reason (as logged) each time the run waits before another attempt; on_progress once
  // per epoch, on the leader's thread, when a shard's upper moved or the epoch has run
  // kSteadyEpoch without an error.
  std::function<void(const std::string& reason)> on_backoff;
  std::function<void()> on_progress;
  static constexpr std::chrono::seconds kSteadyEpoch{5};
  // The compaction window, in offsets: each shard's since is held at upper - 1 - compaction_window
  // (0 while that is negative) by a critical since hold of the driver's, moved as maintenance
  // becomes due and once more at the end of a run, so that compaction consolidates the history
  // before it. Reads at the last compaction_window + 1 offsets stay valid; 0 keeps only the
  // latest; UINT64_MAX keeps every offset readable (the since stays 0).
  uint64_t compaction_window = 1000;
  // Optional: stores to use instead of opening `location`'s (tests wrap them in FaultyBlob or
  // FaultyConsensus). Both or neither.
  std::shared_ptr<persist::Blob> blob;
  std::shared_ptr<persist::Consensus> consensus;
  // Set to stop: the dataflow is dropped and run_ingest returns its report.
  std::shared_ptr<std::atomic<bool>> stop;
  // Optional: called on each worker's thread before it builds its first dataflow (an observer
  // registers its log sink here: weir/observe/runtime_stats.h).
  std::function<void(Worker&)> on_worker;
  // Optional: called once the run has taken its incarnation and before it fences its shards
  // (opens their writers), and again each time it gets there after a transient error; an error
  // ends the run with it. A replica checks here that it is still the latest execution, so that a
  // superseded one never fences out its successor's writers.
  std::function<absl::Status()> check_before_fencing;
};

// How the driver treats an error of a source, sink or health operator, or of planning an epoch.
// (A source's definite errors are not among them: they are data, written into their export's
// shard, and stop only that export.)
enum class ErrorClass {
  // Unavailable, DeadlineExceeded, Aborted (an upper mismatch), ResourceExhausted (a full disk),
  // Cancelled, Unknown, or any error whose outcome is unknown (persist::is_indeterminate): back
  // off (IngestOptions::backoff_*), then restart from the shard uppers.
  kTransient,
  // A shard's writer has expired (persist::is_writer_expired: its lease ran out and a GC removed
  // it): the driver opens a new writer for that shard, then goes on as for kTransient. Safe
  // because every append is a compare-and-set at the shard's upper: the new writer resumes there.
  kExpiredWriter,
  // Anything else (DataLoss, NotFound, InvalidArgument, FailedPrecondition, PermissionDenied,
  // Internal, ...): retrying would fail the same way or hide damage. The run ends with the error,
  // naming the operator and worker. So does a fence (persist::is_fenced: a later incarnation took
  // the shard over), even with the outcome of the last append unknown.
  kFatal,
};
ErrorClass classify_error(const absl::Status& status);
std::string_view to_string(ErrorClass error_class);

struct ExportReport {
  std::string table;
  std::string shard;
  uint64_t upper = 0;    // The shard's upper at the end.
  uint64_t since = 0;    // The since of the driver's hold (see compaction_window) at the end.
  uint64_t updates = 0;  // Updates written by this run.
  uint64_t batches = 0;  // Batches appended by this run.
  sources::Health health = sources::Health::kStarting;  // Last aggregated health.
  std::string error;  // The definite error (health kStalled), if the export has one.
  // Seconds from the run's start until the export's snapshot was durable (its shard's upper past
  // time 0), if this run snapshotted it.
  std::optional<double> snapshot_seconds;
};

struct IngestReport {
  uint64_t incarnation = 0;
  size_t epochs = 0;    // 1 + restarts.
  size_t backoffs = 0;  // Waits after a failed attempt (an epoch or a plan).
  double seconds = 0;   // The whole run, its final maintenance included.
  // Seconds from the run's start until every table was durable up to the source's end (a run
  // with an end that reached it), before the final maintenance of the shards.
  std::optional<double> complete_seconds;
  std::vector<ExportReport> exports;
};

// Live view of a running ingest, for displays and benchmarks.
// One export's last aggregated health, as the report gives it.
struct ExportHealth {
  sources::Health status = sources::Health::kStarting;
  std::string error;  // For kStalled.
};

// The last aggregated health of every export of a run (indexed like its tables), shared by the
// health operator, the report and the monitor.
struct LastHealth {
  explicit LastHealth(size_t count) : exports(count) {}
  weir::Mutex mu;
  std::vector<ExportHealth> exports ABSL_GUARDED_BY(mu);
};

class IngestMonitor {
 public:
  struct ExportView {
    std::string table;
    uint64_t persisted_upper = 0;
    uint64_t snapshot_done = 0, snapshot_total = 0;  // Rows, summed over workers.
    bool snapshotting = false;                       // The current epoch snapshots it.
    // Written by this run, every epoch so far (never decrease).
    uint64_t updates = 0;
    uint64_t bytes = 0;  // The updates' rows, before encoding.
    uint64_t appends = 0;
    sources::Health health = sources::Health::kStarting;
    std::string error;  // For kStalled: the definite error.
    // The since of the driver's hold on the shard (reads at or after it are valid).
    uint64_t since = 0;
  };
  uint64_t upstream_offset() const;
  std::vector<ExportView> exports() const;
  // How long ago the upstream reached `offset` (zero if it has not).
  std::chrono::duration<double> lag(uint64_t persisted_upper) const;
  // Compactions and GCs (one maintain each) the run's background maintenance has finished.
  size_t maintenance_completed() const;

  // Set by the driver.
  void set_epoch(std::shared_ptr<sources::SourceStats> source, std::vector<std::string> tables,
                 std::vector<std::shared_ptr<sinks::SinkStats>> sinks,
                 std::vector<bool> snapshotting);
  void set_run(std::shared_ptr<LastHealth> health,
               std::shared_ptr<persist::BackgroundMaintenance> maintenance,
               std::map<std::string, std::shared_ptr<persist::SinceHandle>> holds);

 private:
  mutable weir::Mutex mu_;
  std::shared_ptr<LastHealth> health_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<persist::BackgroundMaintenance> maintenance_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<persist::SinceHandle>> holds_ ABSL_GUARDED_BY(mu_);
  // By table: what the sinks of the epochs before the current one wrote.
  struct Totals {
    uint64_t updates = 0, appends = 0, bytes = 0;
  };
  std::map<std::string, Totals> earlier_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<sources::SourceStats> source_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> tables_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<sinks::SinkStats>> sinks_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> snapshotting_ ABSL_GUARDED_BY(mu_);
};

// The relation descriptions a typed source (PostgreSQL, MySQL) recorded in `<kind>.schemas`:
// table -> postgres::RelationDesc::encode(). Empty when there are none.
absl::StatusOr<std::map<std::string, std::string>> read_schemas(persist::PersistClient& client,
                                                                const std::string& kind);

absl::StatusOr<IngestReport> run_ingest(const IngestOptions& options,
                                        IngestMonitor* monitor = nullptr);

// The shard name of `table` for a source of `kind`.
inline std::string shard_name(const std::string& kind, const std::string& table) {
  return kind + "." + table;
}

}  // namespace weir::ingest
