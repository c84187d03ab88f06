#include "weir/ingest/ingest.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"

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
  std::lock_guard lock(mu_);
  return source_ ? source_->upstream_offset() : 0;
}

std::vector<IngestMonitor::ExportView> IngestMonitor::exports() const {
  std::lock_guard lock(mu_);
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
    views.push_back(std::move(v));
  }
  return views;
}

std::chrono::duration<double> IngestMonitor::lag(uint64_t persisted_upper) const {
  std::lock_guard lock(mu_);
  if (!source_ || persisted_upper > source_->upstream_offset())
    return std::chrono::duration<double>(0);
  auto reached = source_->reached(persisted_upper);
  if (!reached) return std::chrono::duration<double>(0);
  return Clock::now() - *reached;
}

void IngestMonitor::set_epoch(std::shared_ptr<sources::loadgen::SourceStats> source,
                              std::vector<std::string> tables,
                              std::vector<std::shared_ptr<sinks::SinkStats>> sinks,
                              std::vector<bool> snapshotting) {
  std::lock_guard lock(mu_);
  source_ = std::move(source);
  tables_ = std::move(tables);
  sinks_ = std::move(sinks);
  snapshotting_ = std::move(snapshotting);
}

namespace {

// What every worker builds in one epoch.
struct Plan {
  uint64_t epoch = 0;
  bool finished = false;
  std::vector<ExportSpec> exports;
  std::shared_ptr<sources::loadgen::SourceStats> source_stats;
  std::vector<std::shared_ptr<sinks::SinkStats>> sink_stats;
};

// The workers' meeting point between epochs.
class Control {
 public:
  explicit Control(size_t workers) : workers_(workers) {}

  void publish(Plan plan) {
    std::lock_guard lock(mu_);
    plan_ = std::move(plan);
    cv_.notify_all();
  }
  // Waits for the plan of `epoch`.
  Plan plan(uint64_t epoch) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return plan_.epoch == epoch || aborted_; });
    return aborted_ ? Plan{epoch, true, {}, nullptr, {}} : plan_;
  }
  // Every worker calls this after dropping or finishing `epoch`; returns true for the last one.
  bool arrive() {
    std::lock_guard lock(mu_);
    if (++arrived_ == workers_) {
      arrived_ = 0;
      return true;
    }
    return false;
  }
  void abort() {
    std::lock_guard lock(mu_);
    aborted_ = true;
    cv_.notify_all();
  }

  void request_restart(uint64_t epoch) { restart_.store(epoch + 1, std::memory_order_release); }
  bool restart_requested(uint64_t epoch) const {
    return restart_.load(std::memory_order_acquire) == epoch + 1;
  }

 private:
  size_t workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  Plan plan_;           // Guarded by mu_.
  size_t arrived_ = 0;  // Guarded by mu_.
  bool aborted_ = false;
  std::atomic<uint64_t> restart_{0};
};

// Takes the next incarnation number: appends one row to `<kind>.incarnations`.
absl::StatusOr<uint64_t> take_incarnation(persist::PersistClient& client, const std::string& kind) {
  WEIR_ASSIGN_OR_RETURN(auto writer, client.open_writer(kind + ".incarnations", "ingest"));
  for (int attempt = 0; attempt < 100; ++attempt) {
    WEIR_ASSIGN_OR_RETURN(const auto upper, writer.fetch_recent_upper());
    const uint64_t n = upper.is_empty() ? 0 : upper.time();
    std::vector<persist::Update> row{{absl::StrCat("incarnation=", n), n, 1}};
    WEIR_ASSIGN_OR_RETURN(const auto result,
                          writer.compare_and_append(row, Frontier(n), Frontier(n + 1)));
    if (result.is_appended()) {
      (void)writer.expire();
      return n;
    }
  }
  return absl::AbortedError("could not take an incarnation number: too much contention on " + kind +
                            ".incarnations");
}

// One export's last aggregated health, as the report gives it.
struct ExportHealth {
  sources::Health status = sources::Health::kStarting;
  std::string error;  // For kStalled.
};

// The last aggregated health of every export, shared by the health operator and the report.
struct LastHealth {
  explicit LastHealth(size_t count) : exports(count) {}
  std::mutex mu;
  std::vector<ExportHealth> exports;  // Guarded by mu.
};

// Where render_health writes, and what it stamps on each row.
struct HealthOutput {
  std::shared_ptr<persist::WriteHandle> status;  // The status shard `status_name`.
  std::string status_name;
  std::shared_ptr<persist::BackgroundMaintenance> maintenance;
  std::vector<std::string> tables;  // Export index -> table.
  uint64_t incarnation = 0;
  uint64_t epoch = 0;
  std::shared_ptr<LastHealth> last;  // Updated with every change.
};

// Appends aggregated health changes to the status shard, on the leader.
void render_health(Scope<Offset>& scope, const Stream<Offset, sources::HealthUpdate>& health,
                   HealthOutput out) {
  AsyncOperatorBuilder<Offset> builder("Health", scope);
  auto input =
      builder.add_input(health, Exchange([](const sources::HealthUpdate&) { return uint64_t{0}; }));
  const size_t peers = scope.peers();
  builder.set_on_error(OnError::kHold);
  builder.build([=](AsyncContext& ctx, std::span<CapabilitySet<Offset>>) mutable -> absl::Status {
    const auto& status = out.status;
    const auto& tables = out.tables;
    const auto& last = out.last;
    sources::HealthAggregator aggregator(tables.size(), peers);
    for (;;) {
      auto event = input.next();
      if (event.is_end()) return absl::OkStatus();
      auto* data = event.data();
      if (data == nullptr) continue;
      std::vector<persist::Update> rows;
      const uint64_t now_ms = static_cast<uint64_t>(absl::ToUnixMillis(absl::Now()));
      for (const auto& update : data->batch) {
        if (!aggregator.apply(update)) continue;
        const auto e = update.export_index;
        std::string row =
            absl::StrCat(tables[e], " ", std::string(sources::to_string(aggregator.status(e))),
                         " incarnation=", out.incarnation, " epoch=", out.epoch);
        if (aggregator.status(e) == sources::Health::kStalled)
          absl::StrAppend(&row, " error=", aggregator.error(e));
        {
          std::lock_guard lock(last->mu);
          last->exports[e] = ExportHealth{
              aggregator.status(e),
              aggregator.status(e) == sources::Health::kStalled ? aggregator.error(e) : ""};
        }
        rows.push_back({std::move(row), now_ms, 1});
      }
      if (rows.empty()) continue;
      // Append at a time after the shard's upper (wall-clock milliseconds, kept increasing).
      absl::Status appended = ctx.run_blocking([&]() -> absl::Status {
        for (int attempt = 0; attempt < 20; ++attempt) {
          WEIR_ASSIGN_OR_RETURN(const auto upper, status->fetch_recent_upper());
          const uint64_t lower = upper.is_empty() ? 0 : upper.time();
          uint64_t time = std::max(lower, now_ms);
          for (auto& r : rows) r.time = time;
          WEIR_ASSIGN_OR_RETURN(const auto result, status->compare_and_append(rows, Frontier(lower),
                                                                              Frontier(time + 1)));
          if (result.is_appended()) {
            if (result.maintenance_due) out.maintenance->request(out.status_name);
            return absl::OkStatus();
          }
        }
        return absl::AbortedError("status shard: too much contention");
      });
      WEIR_RETURN_IF_ERROR(appended);
    }
  });
}

}  // namespace

absl::StatusOr<IngestReport> run_ingest(const IngestOptions& options, IngestMonitor* monitor) {
  const auto started = Clock::now();
  auto log = [&](const std::string& line) {
    if (options.log) options.log(line);
  };
  WEIR_ASSIGN_OR_RETURN(std::shared_ptr<persist::PersistClient> client,
                        persist::PersistClient::open(options.location));
  WEIR_ASSIGN_OR_RETURN(auto generator,
                        sources::loadgen::Generator::make(options.source.generator));
  const std::string& kind = options.source.generator.kind;

  std::vector<std::string> tables = options.tables;
  if (tables.empty()) {
    for (uint32_t t = 0; t < generator.num_tables(); ++t) tables.push_back(generator.table_name(t));
  }
  std::vector<std::string> all_tables = tables;
  if (!options.add_table.empty()) all_tables.push_back(options.add_table);
  for (const auto& table : all_tables) {
    WEIR_RETURN_IF_ERROR(generator.table_index(table).status());
  }

  WEIR_ASSIGN_OR_RETURN(const uint64_t incarnation, take_incarnation(*client, kind));
  log(absl::StrCat("incarnation ", incarnation));

  std::map<std::string, std::shared_ptr<persist::WriteHandle>> writers;
  std::shared_ptr<persist::WriteHandle> status;
  // Every return, an early error included, expires the writers this run registered.
  absl::Cleanup expire_writers = [&writers, &status] {
    for (auto& [table, writer] : writers) (void)writer->expire();
    if (status) (void)status->expire();
  };
  for (const auto& table : all_tables) {
    WEIR_ASSIGN_OR_RETURN(auto writer,
                          client->open_writer(shard_name(kind, table),
                                              absl::StrCat("ingest incarnation ", incarnation)));
    writers[table] = std::make_shared<persist::WriteHandle>(std::move(writer));
  }
  WEIR_ASSIGN_OR_RETURN(auto status_writer, client->open_writer(kind + ".status", "ingest health"));
  status = std::make_shared<persist::WriteHandle>(std::move(status_writer));
  // Appends that report maintenance_due ask for compaction and GC of their shard here.
  auto maintenance =
      std::make_shared<persist::BackgroundMaintenance>(client, [&log](const absl::Status& error) {
        log(absl::StrCat("persist maintenance: ", error.message()));
      });

  const std::optional<Offset> final_upper =
      options.source.until ? std::optional<Offset>(*options.source.until + 1) : std::nullopt;
  std::map<std::string, uint64_t> updates, batches;
  auto health = std::make_shared<LastHealth>(all_tables.size());
  bool added = options.add_table.empty();

  // Makes the plan of `epoch`: every current table resumes from its shard's upper.
  auto make_plan = [&](uint64_t epoch) -> absl::StatusOr<Plan> {
    Plan plan;
    plan.epoch = epoch;
    bool all_done = final_upper.has_value() && added;
    for (const auto& table : tables) {
      WEIR_ASSIGN_OR_RETURN(const auto upper, writers[table]->fetch_recent_upper());
      const Offset resume = upper.is_empty() ? std::numeric_limits<Offset>::max() : upper.time();
      if (!final_upper || resume < *final_upper) all_done = false;
      plan.exports.push_back(ExportSpec{table, resume});
    }
    plan.finished = all_done;
    plan.source_stats = std::make_shared<sources::loadgen::SourceStats>(tables.size());
    std::vector<bool> snapshotting;
    for (size_t e = 0; e < tables.size(); ++e) {
      plan.sink_stats.push_back(std::make_shared<sinks::SinkStats>());
      plan.sink_stats.back()->persisted_upper.store(plan.exports[e].resume_upper);
      snapshotting.push_back(plan.exports[e].needs_snapshot());
    }
    if (monitor) monitor->set_epoch(plan.source_stats, tables, plan.sink_stats, snapshotting);
    return plan;
  };
  // Adds this epoch's sink counts to the totals.
  auto collect = [&](const Plan& plan) {
    for (size_t e = 0; e < plan.exports.size(); ++e) {
      updates[plan.exports[e].table] += plan.sink_stats[e]->updates.load();
      batches[plan.exports[e].table] += plan.sink_stats[e]->batches.load();
    }
  };

  WEIR_ASSIGN_OR_RETURN(Plan first, make_plan(0));
  for (const auto& e : first.exports) {
    log(e.needs_snapshot() ? absl::StrCat(e.table, ": snapshot")
                           : absl::StrCat(e.table, ": resuming at offset ", e.resume_upper));
  }
  Control control(options.workers.workers);
  control.publish(first);
  size_t epochs = 0;
  absl::Status plan_error;

  absl::Status executed = weir::execute(options.workers, [&](Worker& worker) {
    const bool leader = worker.index() == 0;
    for (uint64_t epoch = 0;; ++epoch) {
      Plan plan = control.plan(epoch);
      if (plan.finished) break;
      if (leader) ++epochs;
      const size_t index = worker.next_dataflow_index();
      sources::loadgen::LoadgenSourceConfig source = options.source;
      source.stats = plan.source_stats;
      worker.dataflow_named<Offset>(absl::StrCat("ingest-", epoch), [&](Scope<Offset>& scope) {
        auto rendered = sources::loadgen::render_loadgen(scope, source, plan.exports);
        if (!rendered.ok()) {
          worker.fail(rendered.status());
          return;
        }
        for (size_t e = 0; e < plan.exports.size(); ++e) {
          sinks::PersistSinkConfig sink;
          sink.name = shard_name(kind, plan.exports[e].table);
          sink.writer = writers[plan.exports[e].table];
          sink.shard_upper = plan.exports[e].resume_upper;
          sink.final_upper = final_upper;
          sink.stats = plan.sink_stats[e];
          sink.maintenance = maintenance;
          auto sink_rendered = sinks::render_persist_sink(rendered->exports[e], sink);
          for (auto& errors : sink_rendered.errors) rendered->errors.push_back(errors);
        }
        for (auto& errors : rendered->errors) {
          errors | inspect([&control, epoch, &log](const AsyncError& error) {
            log(absl::StrCat("transient error in ", error.operator_name, " (worker ", error.worker,
                             "): ", error.status.ToString(), "; restarting from the shard uppers"));
            control.request_restart(epoch);
          });
        }
        std::vector<std::string> names;
        for (const auto& e : plan.exports) names.push_back(e.table);
        render_health(scope, rendered->health,
                      HealthOutput{status, kind + ".status", maintenance, std::move(names),
                                   incarnation, epoch, health});
      });
      auto installed = [&] {
        auto all = worker.installed_dataflows();
        return std::find(all.begin(), all.end(), index) != all.end();
      };
      auto stopping = [&] { return options.stop && options.stop->load(); };
      while (installed() && !control.restart_requested(epoch) && !worker.failed() && !stopping()) {
        worker.step_or_park(std::chrono::milliseconds(10));
        if (leader && !added && Clock::now() - started >= options.add_after) {
          log(absl::StrCat("adding table ", options.add_table));
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
        collect(plan);
        if (stopping()) {
          Plan done;
          done.epoch = epoch + 1;
          done.finished = true;
          control.publish(std::move(done));
          continue;
        }
        if (!added && Clock::now() - started >= options.add_after) {
          tables.push_back(options.add_table);
          added = true;
        }
        auto next = make_plan(epoch + 1);
        if (!next.ok()) {
          plan_error = next.status();
          control.abort();
          break;
        }
        control.publish(*next);
      }
    }
  });
  WEIR_RETURN_IF_ERROR(executed);
  WEIR_RETURN_IF_ERROR(plan_error);

  IngestReport report;
  report.incarnation = incarnation;
  report.epochs = epochs;
  report.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  for (size_t e = 0; e < tables.size(); ++e) {
    ExportReport r;
    r.table = tables[e];
    r.shard = shard_name(kind, tables[e]);
    auto upper = writers[tables[e]]->fetch_recent_upper();
    if (upper.ok() && !upper->is_empty()) r.upper = upper->time();
    r.updates = updates[tables[e]];
    r.batches = batches[tables[e]];
    {
      std::lock_guard lock(health->mu);
      r.health = health->exports[e].status;
      r.error = health->exports[e].error;
    }
    report.exports.push_back(std::move(r));
  }
  return report;
}

}  // namespace weir::ingest
