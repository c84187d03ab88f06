#include "weir/ingest/ingest.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <thread>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hold.h"

#include "weir/ingest/sequence.h"
#include "weir/ingest/status_shard.h"
#include "weir/operators/exchange.h"
#include "weir/operators/inspect.h"
#include "weir/persist/background_maintenance.h"
#include "weir/persist/client.h"
#include "weir/status.h"
#include "weir/worker/execute.h"

namespace weir::ingest {

using persist::Frontier;
using sources::ExportSpec;
using sources::Offset;
using Clock = std::chrono::steady_clock;

uint64_t IngestMonitor::upstream_offset() const {
  weir::MutexLock lock(mu_);
  return source_ ? source_->upstream_offset() : 0;
}

std::vector<IngestMonitor::ExportView> IngestMonitor::exports() const {
  weir::MutexLock lock(mu_);
  std::vector<ExportView> views;
  for (size_t e = 0; e < tables_.size(); ++e) {
    ExportView v;
    v.table = tables_[e];
    v.persisted_upper = sinks_[e]->persisted_upper.load(std::memory_order_relaxed);
    v.snapshotting = snapshotting_[e];
    if (source_) {
      v.snapshot_done = source_->snapshot_done(e);
      v.snapshot_total = source_->snapshot_total(e);
    }
    const auto earlier = earlier_.find(v.table);
    v.updates = sinks_[e]->updates.load(std::memory_order_relaxed);
    v.appends = sinks_[e]->batches.load(std::memory_order_relaxed);
    v.bytes = sinks_[e]->bytes.load(std::memory_order_relaxed);
    if (earlier != earlier_.end()) {
      v.updates += earlier->second.updates;
      v.appends += earlier->second.appends;
      v.bytes += earlier->second.bytes;
    }
    if (auto hold = holds_.find(v.table); hold != holds_.end()) {
      const persist::Frontier since = hold->second->since();
      if (!since.is_empty()) v.since = since.time();
    }
    if (health_) {
      weir::MutexLock health_lock(health_->mu);
      // The health board is indexed like the run's tables; an epoch's tables are a prefix.
      if (e < health_->exports.size()) {
        v.health = health_->exports[e].status;
        v.error = health_->exports[e].error;
      }
    }
    views.push_back(std::move(v));
  }
  return views;
}

size_t IngestMonitor::maintenance_completed() const {
  weir::MutexLock lock(mu_);
  return maintenance_ ? maintenance_->completed() : 0;
}

void IngestMonitor::set_run(std::shared_ptr<LastHealth> health,
                            std::shared_ptr<persist::BackgroundMaintenance> maintenance,
                            std::map<std::string, std::shared_ptr<persist::SinceHandle>> holds) {
  weir::MutexLock lock(mu_);
  health_ = std::move(health);
  maintenance_ = std::move(maintenance);
  holds_ = std::move(holds);
}

std::chrono::duration<double> IngestMonitor::lag(uint64_t persisted_upper) const {
  weir::MutexLock lock(mu_);
  if (!source_ || persisted_upper > source_->upstream_offset())
    return std::chrono::duration<double>(0);
  auto reached = source_->reached(persisted_upper);
  if (!reached) return std::chrono::duration<double>(0);
  return Clock::now() - *reached;
}

void IngestMonitor::set_epoch(std::shared_ptr<sources::SourceStats> source,
                              std::vector<std::string> tables,
                              std::vector<std::shared_ptr<sinks::SinkStats>> sinks,
                              std::vector<bool> snapshotting) {
  weir::MutexLock lock(mu_);
  for (size_t e = 0; e < tables_.size(); ++e) {
    Totals& totals = earlier_[tables_[e]];
    totals.updates += sinks_[e]->updates.load(std::memory_order_relaxed);
    totals.appends += sinks_[e]->batches.load(std::memory_order_relaxed);
    totals.bytes += sinks_[e]->bytes.load(std::memory_order_relaxed);
  }
  source_ = std::move(source);
  tables_ = std::move(tables);
  sinks_ = std::move(sinks);
  snapshotting_ = std::move(snapshotting);
}

ErrorClass classify_error(const absl::Status& status) {
  // Fenced out by a later incarnation, even when the outcome of the last append is unknown
  // (Unavailable, indeterminate and fenced): this run is over; a restart would meet the fence
  // again after a backoff, with a less clear error.
  if (persist::is_fenced(status)) return ErrorClass::kFatal;
  if (persist::is_writer_expired(status)) return ErrorClass::kExpiredWriter;
  if (persist::is_indeterminate(status)) return ErrorClass::kTransient;
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kUnknown:
      return ErrorClass::kTransient;
    default:
      return ErrorClass::kFatal;
  }
}

std::string_view to_string(ErrorClass error_class) {
  switch (error_class) {
    case ErrorClass::kTransient:
      return "transient";
    case ErrorClass::kExpiredWriter:
      return "expired writer";
    case ErrorClass::kFatal:
      return "fatal";
  }
  return "?";
}

namespace {

// The errors the operators of one epoch reported, on any worker.
struct EpochErrors {
  size_t count = 0;
  bool expired_writer = false;  // Some writer must be reopened.
  absl::Status fatal;           // The first fatal error, with its operator and worker.
};

// What every worker builds in one epoch.
struct Plan {
  uint64_t epoch = 0;
  bool finished = false;
  std::vector<ExportSpec> exports;
  std::shared_ptr<sources::SourceStats> source_stats;
  std::vector<std::shared_ptr<sinks::SinkStats>> sink_stats;
};

// The workers' meeting point between epochs.
class Control {
 public:
  explicit Control(size_t workers) : workers_(workers) {}

  void publish(Plan plan) {
    weir::MutexLock lock(mu_);
    plan_ = std::move(plan);
    cv_.notify_all();
  }
  // Waits for the plan of `epoch`.
  Plan plan(uint64_t epoch) {
    weir::MutexLock lock(mu_);
    while (plan_.epoch != epoch && !aborted_) cv_.wait(mu_);
    return aborted_ ? Plan{epoch, true, {}, nullptr, {}} : plan_;
  }
  // Every worker calls this after dropping or finishing `epoch`; returns true for the last one.
  bool arrive() {
    weir::MutexLock lock(mu_);
    if (++arrived_ == workers_) {
      arrived_ = 0;
      return true;
    }
    return false;
  }
  void abort() {
    weir::MutexLock lock(mu_);
    aborted_ = true;
    cv_.notify_all();
  }

  // Records an operator's error (any worker) and asks every worker to drop the epoch.
  void report_error(uint64_t epoch, const AsyncError& error, ErrorClass error_class) {
    {
      weir::MutexLock lock(mu_);
      ++errors_.count;
      if (error_class == ErrorClass::kExpiredWriter) errors_.expired_writer = true;
      if (error_class == ErrorClass::kFatal && errors_.fatal.ok()) {
        errors_.fatal = absl::Status(error.status.code(),
                                     absl::StrCat(error.operator_name, " (worker ", error.worker,
                                                  "): ", error.status.message()));
      }
    }
    request_restart(epoch);
  }
  // The errors reported since the last call (by the planner, once every worker has arrived).
  EpochErrors take_errors() {
    weir::MutexLock lock(mu_);
    return std::exchange(errors_, EpochErrors{});
  }

  void request_restart(uint64_t epoch) { restart_.store(epoch + 1, std::memory_order_release); }
  bool restart_requested(uint64_t epoch) const {
    return restart_.load(std::memory_order_acquire) == epoch + 1;
  }

 private:
  size_t workers_;
  weir::Mutex mu_;
  weir::CondVar cv_;
  Plan plan_ ABSL_GUARDED_BY(mu_);
  size_t arrived_ ABSL_GUARDED_BY(mu_) = 0;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  EpochErrors errors_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> restart_{0};
};

// Takes the next incarnation number: appends one row to `<kind>.incarnations`.
absl::StatusOr<uint64_t> take_incarnation(persist::PersistClient& client, const std::string& kind) {
  return take_sequence_number(client, kind + ".incarnations",
                              [](uint64_t n) { return absl::StrCat("incarnation=", n); });
}

// The options that decide what the source's tables hold, as "name=value" fields: shards written
// with one identity must not be resumed with another.
std::vector<std::string> source_identity(const sources::loadgen::GeneratorOptions& generator) {
  std::vector<std::string> fields = {absl::StrCat("kind=", generator.kind),
                                     absl::StrCat("seed=", generator.seed),
                                     absl::StrCat("scale=", generator.scale)};
  for (const auto& [table, rows] : generator.snapshot_rows) {
    fields.push_back(absl::StrCat("snapshot_rows.", table, "=", rows));
  }
  if (!generator.fault_table.empty()) {
    fields.push_back(absl::StrCat("fault=", generator.fault_table, "@", generator.fault_offset));
  }
  return fields;
}

// The load generator as the driver's source.
class LoadgenIngestSource final : public IngestSource {
 public:
  explicit LoadgenIngestSource(sources::loadgen::LoadgenSourceConfig config)
      : config_(std::move(config)) {}
  std::string kind() const override { return config_.generator.kind; }
  absl::StatusOr<std::vector<std::string>> open(persist::PersistClient&) override {
    WEIR_ASSIGN_OR_RETURN(auto generator, sources::loadgen::Generator::make(config_.generator));
    std::vector<std::string> tables;
    for (uint32_t t = 0; t < generator.num_tables(); ++t) tables.push_back(generator.table_name(t));
    return tables;
  }
  std::vector<std::string> identity() const override { return source_identity(config_.generator); }
  std::optional<Offset> until() const override {
    return config_.until ? std::optional<Offset>(*config_.until + 1) : std::nullopt;
  }
  absl::StatusOr<sources::RenderedSource> render(Scope<Offset>& scope,
                                                 const std::vector<ExportSpec>& exports,
                                                 const Epoch& epoch) override {
    sources::loadgen::LoadgenSourceConfig config = config_;
    config.stats = epoch.stats;
    return sources::loadgen::render_loadgen(scope, config, exports);
  }

 private:
  sources::loadgen::LoadgenSourceConfig config_;
};

// Records the source's identity in `<kind>.source` on the first run, and refuses a run whose
// identity differs from the recorded one, saying what differs (issue 15 item 6: resuming with
// another seed and scale mixed two sources' data, 2,662 rows with negative multiplicity).
absl::Status check_source_identity(persist::PersistClient& client, const std::string& kind,
                                   const std::vector<std::string>& ours) {
  const std::string shard = kind + ".source";
  WEIR_ASSIGN_OR_RETURN(auto writer, client.open_writer(shard, "ingest source identity"));
  absl::Cleanup expire = [&writer] { (void)writer.expire(); };
  WEIR_ASSIGN_OR_RETURN(const auto upper, writer.fetch_recent_upper());
  if (upper == Frontier(0)) {
    std::vector<persist::Update> rows;
    rows.reserve(ours.size());
    for (const auto& field : ours) rows.push_back({field, 0, 1});
    WEIR_ASSIGN_OR_RETURN(const auto result,
                          writer.compare_and_append(rows, Frontier(0), Frontier(1)));
    if (result.is_appended()) return absl::OkStatus();
    // Another run recorded its identity first: compare with that one.
  }
  WEIR_ASSIGN_OR_RETURN(auto reader, client.open_reader(shard, "ingest source identity"));
  absl::Cleanup expire_reader = [&reader] { (void)reader.expire(); };
  WEIR_ASSIGN_OR_RETURN(const auto recorded_rows, reader.snapshot(0));
  std::map<std::string, int64_t> recorded;
  for (const auto& row : recorded_rows) recorded[row.data] += row.diff;
  std::vector<std::string> theirs;
  for (const auto& [field, count] : recorded) {
    if (count != 0) theirs.push_back(field);
  }
  std::vector<std::string> sorted_ours = ours;
  std::sort(sorted_ours.begin(), sorted_ours.end());
  if (theirs == sorted_ours) return absl::OkStatus();
  std::vector<std::string> only_theirs, only_ours;
  std::set_difference(theirs.begin(), theirs.end(), sorted_ours.begin(), sorted_ours.end(),
                      std::back_inserter(only_theirs));
  std::set_difference(sorted_ours.begin(), sorted_ours.end(), theirs.begin(), theirs.end(),
                      std::back_inserter(only_ours));
  return absl::FailedPreconditionError(absl::StrCat(
      "the shards of source \"", kind, "\" were written with ",
      only_theirs.empty() ? "(nothing else)" : absl::StrJoin(only_theirs, " "), "; this run has ",
      only_ours.empty() ? "(nothing else)" : absl::StrJoin(only_ours, " "),
      ": resuming would mix two sources' data. Run with the options the shards were written "
      "with, or use another persist location"));
}

// Where render_health writes, and what it stamps on each row.
struct HealthOutput {
  std::shared_ptr<StatusShard> status;  // `<kind>.status`, fenced by the incarnation.
  std::vector<std::string> tables;      // Export index -> table.
  uint64_t incarnation = 0;
  uint64_t epoch = 0;
  std::shared_ptr<LastHealth> last;  // Updated with every change.
};

// Appends aggregated health changes to the status shard, on the leader. Returns the operator's
// errors (a failed status append).
Stream<Offset, AsyncError> render_health(Scope<Offset>& scope,
                                         const Stream<Offset, sources::HealthUpdate>& health,
                                         const HealthOutput& out) {
  AsyncOperatorBuilder<Offset> builder("Health", scope);
  auto input =
      builder.add_input(health, Exchange([](const sources::HealthUpdate&) { return uint64_t{0}; }));
  const size_t peers = scope.peers();
  builder.set_on_error(OnError::kHold);
  auto built = builder.build(
      [=](AsyncContext& ctx, std::span<CapabilitySet<Offset>>) mutable -> absl::Status {
        const auto& tables = out.tables;
        const auto& last = out.last;
        sources::HealthAggregator aggregator(tables.size(), peers);
        for (;;) {
          auto event = input.next();
          if (event.is_end()) return absl::OkStatus();
          auto* data = event.data();
          if (data == nullptr) continue;
          std::vector<std::pair<std::string, std::string>> rows;  // Table -> row.
          for (const auto& update : data->batch) {
            if (!aggregator.apply(update)) continue;
            const auto e = update.export_index;
            std::string row =
                absl::StrCat(tables[e], " ", std::string(sources::to_string(aggregator.status(e))),
                             " incarnation=", out.incarnation, " epoch=", out.epoch);
            if (aggregator.status(e) == sources::Health::kStalled)
              absl::StrAppend(&row, " error=", aggregator.error(e));
            {
              weir::MutexLock lock(last->mu);
              last->exports[e] = ExportHealth{
                  aggregator.status(e),
                  aggregator.status(e) == sources::Health::kStalled ? aggregator.error(e) : ""};
            }
            rows.emplace_back(tables[e], std::move(row));
          }
          if (rows.empty()) continue;
          // The call owns what it uses: one still running when the dataflow is dropped (consensus
          // stopped answering) is left to return on its own; StatusShard serializes it with the
          // next epoch's.
          absl::Status appended = ctx.run_blocking_owned(
              [status = out.status, rows = std::move(rows)] { return status->update(rows); });
          WEIR_RETURN_IF_ERROR(appended);
        }
      });
  return built.errors;
}

// One run of the driver: its shards' writers, the tables it ingests and the totals so far.
struct Ingestion {
  Ingestion(const IngestOptions& run_options, IngestMonitor* run_monitor)
      : options(run_options),
        monitor(run_monitor),
        source(run_options.upstream ? run_options.upstream
                                    : std::make_shared<LoadgenIngestSource>(run_options.source)),
        kind(source->kind()),
        added(run_options.add_table.empty()) {}

  void log(const std::string& line, LogSeverity severity = LogSeverity::kInfo) const {
    if (options.log) options.log(line);
    if (options.log_event) options.log_event(severity, line);
  }
  // Makes the plan of `epoch`: every current table resumes from its shard's upper.
  absl::StatusOr<Plan> make_plan(uint64_t epoch);
  // Adds this epoch's sink counts to the totals.
  void collect(const Plan& plan);
  // The plan of `epoch`, after the previous epoch ended with `errors` (none for the first): backs
  // off after an error, reopens expired writers, and retries a plan that fails transiently.
  // nullopt if a stop was asked for meanwhile; an error if one is fatal.
  absl::StatusOr<std::optional<Plan>> plan_after(uint64_t epoch, const EpochErrors& errors,
                                                 bool progressed);
  // Waits before the next attempt, after a failed one (see IngestOptions::backoff_initial).
  // False if a stop was asked for meanwhile.
  bool back_off(const std::string& reason);
  // Replaces every writer that has expired with a new one.
  absl::Status reopen_expired_writers();
  bool stopping() const { return options.stop && options.stop->load(); }

  const IngestOptions& options;
  IngestMonitor* monitor;  // May be null.
  const Clock::time_point started = Clock::now();
  const std::shared_ptr<IngestSource> source;
  const std::string kind;
  std::optional<Offset> final_upper;  // The source's until, once it is open.
  std::vector<std::string> tables;    // Ingested now; add_table joins once `added`.
  bool added;
  uint64_t incarnation = 0;
  bool incarnation_taken = false;
  // The incarnation as a persist fence: every handle this run opens on its shards carries it, so
  // that the next incarnation's writers remove them (a killed run's readers would otherwise hold
  // GC back for their whole lease) and refuse whatever this one still tries once fenced.
  persist::Fence fence;
  std::shared_ptr<persist::PersistClient> client;
  std::map<std::string, std::shared_ptr<persist::WriteHandle>> writers;  // Every table's.
  std::shared_ptr<StatusShard> status;                                   // `<kind>.status`.
  // Every table's compaction window hold (see IngestOptions::compaction_window).
  std::map<std::string, std::shared_ptr<persist::SinceHandle>> holds;
  std::shared_ptr<persist::BackgroundMaintenance> maintenance;
  std::shared_ptr<LastHealth> health;
  std::map<std::string, uint64_t> updates, batches;  // By table, over every epoch.
  std::map<std::string, double> snapshot_seconds;    // By table: see ExportReport.
  std::optional<double> complete_seconds;            // See IngestReport.
  // By table: the definite error (or "") its shard holds below an upper, as the last plan read it
  // or the last epoch left it (see collect). A definite error, once in a shard, is there at
  // every later upper.
  std::map<std::string, std::pair<Offset, std::string>> known_errors;
  // By table: the definite error this run's sink took into a batch (see make_report).
  std::map<std::string, std::string> given_errors;
  size_t epochs = 0;
  size_t backoffs = 0;
  uint32_t failed_attempts = 0;  // In a row: the backoff's exponent.
  std::mt19937_64 jitter{std::random_device{}()};
};

// The definite error the shard holds at `upper`, or "" if none. The cursor stops at the first
// row that sorts after the error prefix ("!error: "); the typed rows of the PostgreSQL and
// MariaDB sources start with their NULL bitmap, often below '!', so for their shards that can be
// most of the shard.
absl::StatusOr<std::string> definite_error_in(persist::PersistClient& client,
                                              const std::string& shard, const Frontier& upper,
                                              const persist::Fence& fence) {
  if (upper == Frontier(0)) return std::string();
  WEIR_ASSIGN_OR_RETURN(auto reader, client.open_reader(shard, "ingest plan", fence));
  absl::Cleanup expire = [&reader] { (void)reader.expire(); };
  const uint64_t as_of = upper.is_empty() ? std::numeric_limits<uint64_t>::max() : upper.time() - 1;
  WEIR_ASSIGN_OR_RETURN(auto cursor, reader.snapshot_cursor(as_of));
  const std::string prefix = sources::definite_error("");
  while (cursor.next()) {
    const std::string_view data = cursor.data();
    if (data.starts_with(prefix) && cursor.diff() > 0) {
      return std::string(data.substr(prefix.size()));
    }
    if (data.substr(0, prefix.size()) > prefix) return std::string();
  }
  WEIR_RETURN_IF_ERROR(cursor.status());
  return std::string();
}

absl::StatusOr<Plan> Ingestion::make_plan(uint64_t epoch) {
  Plan plan;
  plan.epoch = epoch;
  bool all_done = final_upper.has_value() && added;
  for (const auto& table : tables) {
    WEIR_ASSIGN_OR_RETURN(const auto upper, writers[table]->fetch_recent_upper());
    const Offset resume = upper.is_empty() ? std::numeric_limits<Offset>::max() : upper.time();
    if (!final_upper || resume < *final_upper) all_done = false;
    // A definite error is a durable fact: the export stays errored across restarts (issue 15
    // item 1: a restarted run ingested 43,730 updates after the "permanent" error). Reading it
    // merges the shard's runs (a large snapshot not yet compacted is many: a 10M-row one, 85
    // parts in memory at once), so the shard is read once per process and again only after an
    // epoch that may have added one (see collect).
    std::string error;
    if (auto known = known_errors.find(table);
        known != known_errors.end() && known->second.first == resume) {
      error = known->second.second;
    } else {
      WEIR_ASSIGN_OR_RETURN(error,
                            definite_error_in(*client, shard_name(kind, table), upper, fence));
      known_errors[table] = {resume, error};
    }
    if (!error.empty() && epoch == 0) {
      log(absl::StrCat(table, ": stays errored: ", error), LogSeverity::kWarning);
    }
    plan.exports.push_back(ExportSpec{table, resume, std::move(error)});
  }
  plan.finished = all_done;
  if (!all_done) {
    WEIR_RETURN_IF_ERROR(source->prepare(*client, plan.exports));
    // The source may only know its end once prepared (PostgreSQL: never below its slot).
    final_upper = source->until();
    all_done = final_upper.has_value() && added;
    for (const auto& e : plan.exports) {
      if (!final_upper || e.resume_upper < *final_upper) all_done = false;
    }
  }
  plan.source_stats = std::make_shared<sources::SourceStats>(tables.size());
  std::vector<bool> snapshotting;
  for (size_t e = 0; e < tables.size(); ++e) {
    plan.sink_stats.push_back(std::make_shared<sinks::SinkStats>());
    plan.sink_stats.back()->persisted_upper.store(plan.exports[e].resume_upper);
    snapshotting.push_back(plan.exports[e].needs_snapshot());
  }
  if (monitor) monitor->set_epoch(plan.source_stats, tables, plan.sink_stats, snapshotting);
  return plan;
}

// Whether some shard's upper moved past where the epoch resumed it.
bool made_progress(const Plan& plan) {
  for (size_t e = 0; e < plan.exports.size(); ++e) {
    if (plan.sink_stats[e]->persisted_upper.load() > plan.exports[e].resume_upper) return true;
  }
  return false;
}

bool Ingestion::back_off(const std::string& reason) {
  ++failed_attempts;
  ++backoffs;
  const double initial = static_cast<double>(options.backoff_initial.count());
  const double cap = static_cast<double>(options.backoff_max.count());
  const double exponent = std::min<double>(failed_attempts - 1, 64);
  const double ceiling = std::min(cap, initial * std::pow(options.backoff_multiplier, exponent));
  // Jitter: a random delay in [ceiling/2, ceiling], so that drivers failing together spread out.
  const auto delay = std::chrono::milliseconds(
      static_cast<int64_t>(std::uniform_real_distribution<double>(ceiling / 2, ceiling)(jitter)));
  if (options.on_backoff) options.on_backoff(reason);
  log(absl::StrCat("backing off: attempt ", failed_attempts, " failed (", reason, "); retrying in ",
                   delay.count(), " ms"),
      LogSeverity::kWarning);
  const auto until = Clock::now() + delay;
  while (Clock::now() < until) {
    if (stopping()) return false;
    std::this_thread::sleep_for(
        std::min<Clock::duration>(until - Clock::now(), std::chrono::milliseconds(10)));
  }
  return !stopping();
}

absl::Status Ingestion::reopen_expired_writers() {
  auto reopen = [&](const std::string& shard, std::shared_ptr<persist::WriteHandle>& writer,
                    const std::string& purpose) -> absl::Status {
    absl::Status alive = writer->heartbeat();
    if (alive.ok()) return absl::OkStatus();
    if (!persist::is_writer_expired(alive)) return alive;
    WEIR_ASSIGN_OR_RETURN(auto fresh, client->open_writer(shard, purpose, fence));
    log(absl::StrCat(shard, ": writer ", writer->writer_id(),
                     " has expired (its lease ran out and a GC removed it); reopened as writer ",
                     fresh.writer_id()),
        LogSeverity::kWarning);
    writer = std::make_shared<persist::WriteHandle>(std::move(fresh));
    return absl::OkStatus();
  };
  for (auto& [table, writer] : writers) {
    WEIR_RETURN_IF_ERROR(
        reopen(shard_name(kind, table), writer, absl::StrCat("ingest incarnation ", incarnation)));
  }
  return status->reopen_if_expired();
}

absl::StatusOr<std::optional<Plan>> Ingestion::plan_after(uint64_t epoch, const EpochErrors& errors,
                                                          bool progressed) {
  if (!errors.fatal.ok()) return errors.fatal;
  bool reopen = errors.expired_writer;
  if (errors.count > 0) {
    if (progressed) failed_attempts = 0;
    if (!back_off(absl::StrCat(errors.count, " operator error", errors.count == 1 ? "" : "s",
                               " in epoch ", epoch - 1))) {
      return std::nullopt;
    }
  }
  for (;;) {
    absl::Status failed = reopen ? reopen_expired_writers() : absl::OkStatus();
    if (failed.ok()) {
      auto plan = make_plan(epoch);
      if (plan.ok()) return std::optional<Plan>(*std::move(plan));
      failed = plan.status();
    }
    const ErrorClass error_class = classify_error(failed);
    if (error_class == ErrorClass::kFatal) return failed;
    if (error_class == ErrorClass::kExpiredWriter) reopen = true;
    if (!back_off(absl::StrCat("planning epoch ", epoch, ": ", std::string(to_string(error_class)),
                               " error ", failed.ToString()))) {
      return std::nullopt;
    }
  }
}

void Ingestion::collect(const Plan& plan) {
  for (size_t e = 0; e < plan.exports.size(); ++e) {
    updates[plan.exports[e].table] += plan.sink_stats[e]->updates.load();
    batches[plan.exports[e].table] += plan.sink_stats[e]->batches.load();
    if (const int64_t at = plan.sink_stats[e]->first_advance_ns.load();
        at != 0 && plan.exports[e].needs_snapshot()) {
      const auto durable = Clock::time_point(std::chrono::nanoseconds(at));
      snapshot_seconds[plan.exports[e].table] =
          std::chrono::duration<double>(durable - started).count();
    }
    // The shard's definite error stays what the plan read unless the epoch wrote an error row
    // or found a range another writer had appended (flagged), or the shard's upper is not where
    // the sink left it (an append it could not confirm, or another writer's): make_plan then
    // reads the shard again.
    const sinks::SinkStats& stats = *plan.sink_stats[e];
    if (stats.flagged.load(std::memory_order_acquire)) {
      known_errors.erase(plan.exports[e].table);
      const std::string row = stats.flagged_row();
      const std::string prefix = sources::definite_error("");
      if (row.starts_with(prefix)) {
        given_errors.try_emplace(plan.exports[e].table, row.substr(prefix.size()));
      }
    } else {
      known_errors[plan.exports[e].table] = {stats.persisted_upper.load(),
                                             plan.exports[e].definite_error};
    }
  }
}

// Plan: checks the tables, takes an incarnation and opens every shard's writer. The writers
// opened are in `in.writers` (and `in.status`) even when this fails part-way.
absl::Status open_shards(Ingestion& in) {
  const IngestOptions& options = in.options;
  if (options.blob || options.consensus) {
    if (!options.blob || !options.consensus) {
      return absl::InvalidArgumentError("IngestOptions: give both blob and consensus, or neither");
    }
    in.client = persist::PersistClient::create(options.blob, options.consensus, options.persist);
  } else {
    WEIR_ASSIGN_OR_RETURN(in.client,
                          persist::PersistClient::open(options.location, options.persist));
  }
  WEIR_ASSIGN_OR_RETURN(const std::vector<std::string> available, in.source->open(*in.client));
  in.final_upper = in.source->until();
  in.tables = options.tables.empty() ? available : options.tables;
  std::vector<std::string> all_tables = in.tables;
  if (!options.add_table.empty()) all_tables.push_back(options.add_table);
  for (const auto& table : all_tables) {
    if (std::find(available.begin(), available.end(), table) == available.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("source ", in.kind, " has no table \"", table,
                       "\"; it has: ", absl::StrJoin(available, ", ")));
    }
  }

  WEIR_RETURN_IF_ERROR(check_source_identity(*in.client, in.kind, in.source->identity()));
  if (!in.incarnation_taken) {  // A retry after a transient error keeps the number it took.
    WEIR_ASSIGN_OR_RETURN(in.incarnation, take_incarnation(*in.client, in.kind));
    in.incarnation_taken = true;
    in.log(absl::StrCat("incarnation ", in.incarnation));
  }
  // Epoch 0 is no fence: incarnations count from 0.
  in.fence = {in.incarnation + 1, absl::StrCat("ingest ", in.kind, " incarnation ", in.incarnation,
                                               " (", process_name(), ")")};

  if (options.check_before_fencing) WEIR_RETURN_IF_ERROR(options.check_before_fencing());
  // Opening the writers fences the shards: the predecessors' handles are gone from here on.
  for (const auto& table : all_tables) {
    WEIR_ASSIGN_OR_RETURN(
        auto writer,
        in.client->open_writer(shard_name(in.kind, table),
                               absl::StrCat("ingest incarnation ", in.incarnation), in.fence));
    in.writers[table] = std::make_shared<persist::WriteHandle>(std::move(writer));
  }
  for (const auto& table : all_tables) {
    WEIR_ASSIGN_OR_RETURN(in.holds[table],
                          internal::take_over_hold(*in.client, shard_name(in.kind, table),
                                                   in.writers[table]->shard_id(), in.incarnation,
                                                   "ingest compaction window"));
  }
  // Appends that report maintenance_due ask for compaction and GC of their shard here.
  in.maintenance = std::make_shared<persist::BackgroundMaintenance>(
      in.client,
      [&in](const absl::Status& error) {
        in.log(absl::StrCat("persist maintenance: ", error.message()), LogSeverity::kWarning);
      },
      in.fence);
  WEIR_ASSIGN_OR_RETURN(
      in.status, StatusShard::open(in.client, in.kind + ".status", in.incarnation, in.maintenance));
  in.health = std::make_shared<LastHealth>(all_tables.size());
  if (in.monitor) in.monitor->set_run(in.health, in.maintenance, in.holds);
  return absl::OkStatus();
}

// Builds one epoch's dataflow on one worker: the source, a persist sink per export, and the
// health operator. An error anywhere is reported to `control`, which drops the epoch.
void render_epoch(Ingestion& in, Worker& worker, Scope<Offset>& scope, const Plan& plan,
                  Control& control, uint64_t epoch) {
  IngestSource::Epoch context;
  context.stats = plan.source_stats;
  context.durable_upper = [stats = plan.sink_stats](size_t e) -> Offset {
    return stats[e]->persisted_upper.load(std::memory_order_relaxed);
  };
  auto rendered = in.source->render(scope, plan.exports, context);
  if (!rendered.ok()) {
    worker.fail(rendered.status());
    return;
  }
  for (size_t e = 0; e < plan.exports.size(); ++e) {
    sinks::PersistSinkConfig sink;
    sink.name = shard_name(in.kind, plan.exports[e].table);
    sink.writer = in.writers.at(plan.exports[e].table);
    sink.shard_upper = plan.exports[e].resume_upper;
    sink.final_upper = in.final_upper;
    sink.stats = plan.sink_stats[e];
    sink.flag_prefix = sources::definite_error("");
    sink.maintenance = in.maintenance;
    sink.since_hold = in.holds.at(plan.exports[e].table);
    sink.hold_epoch = in.incarnation;
    sink.compaction_window = in.options.compaction_window;
    auto sink_rendered = sinks::render_persist_sink(rendered->exports[e], sink);
    for (auto& errors : sink_rendered.errors) rendered->errors.push_back(errors);
  }
  std::vector<std::string> names;
  names.reserve(plan.exports.size());
  for (const auto& e : plan.exports) names.push_back(e.table);
  rendered->errors.push_back(
      render_health(scope, rendered->health,
                    HealthOutput{in.status, std::move(names), in.incarnation, epoch, in.health}));
  for (auto& errors : rendered->errors) {
    errors | inspect([&control, epoch, &in](const AsyncError& error) {
      const ErrorClass error_class = classify_error(error.status);
      in.log(absl::StrCat(std::string(to_string(error_class)), " error in ", error.operator_name,
                          " (worker ", error.worker,
                          "): ", absl::StatusCodeToString(error.status.code()), ": ",
                          error.status.message(),
                          error_class == ErrorClass::kFatal
                              ? "; ending the run"
                              : "; restarting from the shard uppers after a backoff"),
             error_class == ErrorClass::kFatal ? LogSeverity::kError : LogSeverity::kWarning);
      control.report_error(epoch, error, error_class);
    });
  }
}

// Run: the epochs, each on every worker, until every table reaches the source's `until`, a stop,
// or an error.
absl::Status run_epochs(Ingestion& in) {
  const IngestOptions& options = in.options;
  WEIR_ASSIGN_OR_RETURN(std::optional<Plan> planned, in.plan_after(0, EpochErrors{}, false));
  if (!planned) return absl::OkStatus();  // Stopped.
  Plan first = *std::move(planned);
  for (const auto& e : first.exports) {
    in.log(e.needs_snapshot() ? absl::StrCat(e.table, ": snapshot")
                              : absl::StrCat(e.table, ": resuming at offset ", e.resume_upper));
  }
  Control control(options.workers.workers);
  control.publish(first);
  absl::Status plan_error;

  absl::Status executed = weir::execute(options.workers, [&](Worker& worker) {
    if (options.on_worker) options.on_worker(worker);
    const bool leader = worker.index() == 0;
    for (uint64_t epoch = 0;; ++epoch) {
      Plan plan = control.plan(epoch);
      if (plan.finished) break;
      if (leader) ++in.epochs;
      const size_t index = worker.next_dataflow_index();
      worker.dataflow_named<Offset>(absl::StrCat("ingest-", epoch), [&](Scope<Offset>& scope) {
        render_epoch(in, worker, scope, plan, control, epoch);
      });
      auto installed = [&] {
        auto all = worker.installed_dataflows();
        return std::find(all.begin(), all.end(), index) != all.end();
      };
      auto stopping = [&] { return in.stopping(); };
      // Told once per epoch, on the leader (a bool test per step once told).
      bool progress_told = !leader || !options.on_progress;
      const auto epoch_started = Clock::now();
      while (installed() && !control.restart_requested(epoch) && !worker.failed() && !stopping()) {
        try {
          worker.step_or_park(std::chrono::milliseconds(10));
        } catch (const weir::ExecutionFailed&) {
          break;  // Failed since the check above: aborted below, so no worker waits for this one.
        }
        if (!progress_told &&
            (made_progress(plan) || Clock::now() - epoch_started >= IngestOptions::kSteadyEpoch)) {
          progress_told = true;
          options.on_progress();
        }
        if (leader && !in.added && Clock::now() - in.started >= options.add_after) {
          in.log(absl::StrCat("adding table ", options.add_table));
          control.request_restart(epoch);
        }
      }
      if (installed()) worker.drop_dataflow(index);
      if (worker.failed()) {
        control.abort();
        break;
      }
      if (control.arrive()) {
        // The last worker to arrive plans the next epoch.
        in.collect(plan);
        const EpochErrors errors = control.take_errors();
        const bool progressed = made_progress(plan);
        if (!in.added && Clock::now() - in.started >= options.add_after) {
          in.tables.push_back(options.add_table);
          in.added = true;
        }
        auto next = stopping() ? absl::StatusOr<std::optional<Plan>>(std::nullopt)
                               : in.plan_after(epoch + 1, errors, progressed);
        if (!next.ok()) {
          plan_error = next.status();
          in.log(absl::StrCat("fatal error: ", plan_error.ToString(), "; ending the run"),
                 LogSeverity::kError);
          control.abort();
          break;
        }
        if (!next->has_value()) {
          Plan done;
          done.epoch = epoch + 1;
          done.finished = true;
          control.publish(std::move(done));
          continue;
        }
        control.publish(**std::move(next));
      }
    }
  });
  WEIR_RETURN_IF_ERROR(executed);
  return plan_error;
}

// Report: every table's upper, totals and last health.
IngestReport make_report(Ingestion& in) {
  IngestReport report;
  report.incarnation = in.incarnation;
  report.epochs = in.epochs;
  report.backoffs = in.backoffs;
  report.seconds = std::chrono::duration<double>(Clock::now() - in.started).count();
  report.complete_seconds = in.complete_seconds;
  for (size_t e = 0; e < in.tables.size(); ++e) {
    const std::string& table = in.tables[e];
    ExportReport r;
    r.table = table;
    r.shard = shard_name(in.kind, table);
    const auto upper = in.writers[table]->fetch_recent_upper();
    if (upper.ok() && !upper->is_empty()) r.upper = upper->time();
    const persist::Frontier since = in.holds[table]->since();
    if (!since.is_empty()) r.since = since.time();
    r.updates = in.updates[table];
    r.batches = in.batches[table];
    if (auto s = in.snapshot_seconds.find(table); s != in.snapshot_seconds.end()) {
      r.snapshot_seconds = s->second;
    }
    {
      weir::MutexLock lock(in.health->mu);
      r.health = in.health->exports[e].status;
      r.error = in.health->exports[e].error;
    }
    // The health board may not have the table's definite error: no epoch reported on the table
    // (the run had nothing to do: its plan read the error), or a stop ended the last epoch after
    // the sink took the error row but before the health operator took in the stalled report
    // given with it (it was still writing the status shard). Nothing is read here: a stop does
    // not wait for a shard's scan.
    if (r.health != sources::Health::kStalled) {
      std::string error;
      if (auto given = in.given_errors.find(table); given != in.given_errors.end()) {
        error = given->second;
      } else if (auto known = in.known_errors.find(table); known != in.known_errors.end()) {
        error = known->second.second;
      }
      if (!error.empty()) {
        r.health = sources::Health::kStalled;
        r.error = std::move(error);
      }
    }
    report.exports.push_back(std::move(r));
  }
  return report;
}

}  // namespace

absl::StatusOr<IngestReport> run_ingest(const IngestOptions& options, IngestMonitor* monitor) {
  Ingestion ingestion(options, monitor);
  // Every return, an early error included, expires the writers this run registered.
  absl::Cleanup expire_writers = [&ingestion] {
    for (auto& [table, writer] : ingestion.writers) (void)writer->expire();
    if (ingestion.status) (void)ingestion.status->expire();
  };
  // A transient error while opening (consensus unavailable) backs off and tries again.
  for (;;) {
    const absl::Status opened = open_shards(ingestion);
    if (opened.ok()) break;
    if (classify_error(opened) == ErrorClass::kFatal) return opened;
    for (auto& [table, writer] : ingestion.writers) (void)writer->expire();
    ingestion.writers.clear();
    ingestion.holds.clear();
    if (ingestion.status) (void)ingestion.status->expire();
    ingestion.status.reset();
    if (!ingestion.back_off(absl::StrCat("opening the shards: ", opened.ToString()))) {
      return opened;
    }
  }
  WEIR_RETURN_IF_ERROR(run_epochs(ingestion));
  // A run that reached its end leaves its shards maintained, however far the maintenance thread
  // had fallen behind the appends; a stop asked for (Ctrl-C) does not wait for it.
  if (!(options.stop && options.stop->load())) {
    ingestion.complete_seconds =
        std::chrono::duration<double>(Clock::now() - ingestion.started).count();
    // The since follows the final uppers, and the last maintenance compacts up to it.
    for (const auto& table : ingestion.tables) {
      const std::string shard = shard_name(ingestion.kind, table);
      // The data is complete whatever happens here: a failure only leaves more history.
      const auto upper = ingestion.writers[table]->fetch_recent_upper();
      absl::Status moved = upper.status();
      if (upper.ok() && !upper->is_empty()) {
        moved = sinks::downgrade_to_window(*ingestion.holds[table], ingestion.incarnation,
                                           upper->time(), options.compaction_window, shard);
      }
      if (!moved.ok()) {
        ingestion.log(absl::StrCat(shard, ": the since stays: ", moved.message()),
                      LogSeverity::kWarning);
      }
      ingestion.maintenance->request(shard);
    }
    // Bounded: a backlog can take minutes to settle (a killed incarnation's reader lease holds
    // GC back for its whole lease); what is left, the next writer's maintenance takes up.
    constexpr auto kMaintenanceFinishLimit = std::chrono::seconds(60);
    if (!ingestion.maintenance->finish_within(kMaintenanceFinishLimit)) {
      ingestion.log(absl::StrCat("persist maintenance had not settled within ",
                                 kMaintenanceFinishLimit.count(),
                                 " s of the run's end; stopping it (the shards are complete; the "
                                 "next writer's maintenance goes on)"),
                    LogSeverity::kWarning);
    }
  }
  if (ingestion.client) {
    const absl::Status finished = ingestion.source->finish(*ingestion.client);
    if (!finished.ok()) {
      ingestion.log(absl::StrCat("the source's finish: ", finished.message()),
                    LogSeverity::kWarning);
    }
  }
  return make_report(ingestion);
}

}  // namespace weir::ingest
