#include "weir/observe/ingest_endpoints.h"

#include <fstream>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "families.h"
#include "probes.h"
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "weir/observe/graph.h"
#include "weir/status.h"
#include "weir/worker/introspection.h"

namespace weir::observe {
namespace {

using internal::Families;
using nlohmann::json;
using prometheus::ClientMetric;
using Clock = std::chrono::steady_clock;

double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

// Resident set size in bytes, from /proc/self/statm (0 where it cannot be read).
uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

IngestObserver::IngestObserver(IngestObserverConfig config)
    : config_(std::move(config)), started_(Clock::now()) {}

IngestObserver::~IngestObserver() { server_.reset(); }

absl::Status IngestObserver::instrument(ingest::IngestOptions& options) {
  workers_ = options.workers.workers;
  std::function<void(Worker&)> earlier = std::move(options.on_worker);
  options.on_worker = [stats = stats_, earlier = std::move(earlier)](Worker& worker) {
    if (earlier) earlier(worker);
    stats->attach(worker);
  };
  std::shared_ptr<persist::Blob> blob = options.blob;
  std::shared_ptr<persist::Consensus> consensus = options.consensus;
  if (!blob) {
    WEIR_ASSIGN_OR_RETURN(auto opened, persist::Blob::open(options.location.blob_url));
    blob = std::move(opened);
  }
  if (!consensus) {
    WEIR_ASSIGN_OR_RETURN(auto opened, persist::Consensus::open(options.location.consensus_url));
    consensus = std::move(opened);
  }
  options.blob = std::make_shared<MeteredBlob>(std::move(blob), persist_);
  options.consensus = std::make_shared<MeteredConsensus>(std::move(consensus), persist_);
  return absl::OkStatus();
}

absl::StatusOr<int> IngestObserver::serve(const HttpServerOptions& options) {
  std::map<std::string, HttpHandler> routes;
  routes["/"] = [=](const HttpRequest&) {
    return internal::text_response(std::string(dashboard_page()), "text/html; charset=utf-8");
  };
  routes["/metrics"] = [=, this](const HttpRequest&) {
    return internal::text_response(metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
  };
  routes["/status"] = [=, this](const HttpRequest&) {
    return internal::text_response(status_json(), "application/json");
  };
  routes["/graph"] = [=, this](const HttpRequest& request) {
    const bool dot = request.query.find("format=dot") != std::string::npos;
    return internal::text_response(graph(dot, std::chrono::milliseconds(1500)),
                                   dot ? "text/vnd.graphviz; charset=utf-8" : "application/json");
  };
  internal::add_probes(routes, [this] { return not_ready(); });
  WEIR_ASSIGN_OR_RETURN(server_, HttpServer::start(options, std::move(routes)));
  return server_->port();
}

std::string IngestObserver::not_ready() const {
  const auto exports = monitor_.exports();
  if (exports.empty()) return "no export has started yet";
  std::string why;
  for (const auto& e : exports) {
    if (e.health != sources::Health::kStarting) continue;
    absl::StrAppend(&why, why.empty() ? "" : ", ", e.table,
                    e.snapshotting ? " (snapshotting)" : " (starting)");
  }
  return why;
}

std::string IngestObserver::status_json() const {
  const uint64_t upstream = monitor_.upstream_offset();
  json out{{"command", "ingest"},
           {"kind", config_.kind},
           {"source", config_.source},
           {"pid", static_cast<int64_t>(getpid())},
           {"uptime_seconds", seconds(Clock::now() - started_)},
           {"upstream_offset", upstream},
           {"workers_total", workers_}};
  out["exports"] = json::array();
  for (const auto& e : monitor_.exports()) {
    json x{{"table", e.table},
           {"shard", ingest::shard_name(config_.kind, e.table)},
           {"health", std::string(sources::to_string(e.health))},
           {"error", e.error},
           {"upper", e.persisted_upper},
           {"since", e.since},
           {"lag_offsets", upstream > e.persisted_upper ? upstream - e.persisted_upper : 0},
           {"lag_seconds", monitor_.lag(e.persisted_upper).count()},
           {"updates", e.updates},
           {"bytes", e.bytes},
           {"appends", e.appends}};
    x["snapshot"] = {{"active", e.snapshotting && e.snapshot_done < e.snapshot_total},
                     {"done", e.snapshot_done},
                     {"total", e.snapshot_total}};
    out["exports"].push_back(std::move(x));
  }
  out["ready"] = not_ready().empty();
  out["workers"] = json::array();
  for (const auto& w : stats_->workers()) {
    json x{{"worker", w.worker},
           {"operator", nullptr},
           {"operator_seconds", 0.0},
           {"parked", w.is_parked},
           {"parked_seconds", seconds(w.parked)},
           {"operator_runs", w.steps}};
    if (w.running) {
      x["operator"] = w.running_name;
      x["operator_seconds"] = seconds(w.running_for);
    }
    out["workers"].push_back(std::move(x));
  }
  const PersistMetrics& p = *persist_;
  auto load = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  out["persist"] = {{"blob_bytes_written", load(p.blob_bytes_written)},
                    {"blob_bytes_read", load(p.blob_bytes_read)},
                    {"blob_sets", load(p.blob_sets)},
                    {"cas", load(p.consensus_cas)},
                    {"cas_mismatches", load(p.consensus_cas_mismatches)},
                    {"failures", load(p.blob_failures) + load(p.consensus_failures)},
                    {"maintenance_completed", monitor_.maintenance_completed()}};
  // Errors and names come from outside (an upstream's rows and messages) and need not be UTF-8:
  // replaced, not thrown on (which would answer 500 for as long as the error stands).
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string IngestObserver::metrics_text() const {
  Families f;
  // Runtime.
  for (const auto& op : stats_->operators()) {
    std::vector<ClientMetric::Label> labels = {
        {"worker", std::to_string(op.worker)},
        {"operator", op.name},
        {"id", std::to_string(op.id)},
        {"dataflow", op.address.empty() ? "" : std::to_string(op.address.front())}};
    f.counter("weir_operator_activations_total", "Runs of the operator (schedules).",
              static_cast<double>(op.activations), labels);
    f.counter("weir_operator_busy_seconds_total", "Time spent running the operator.",
              seconds(op.busy), labels);
  }
  for (const auto& c : stats_->channels()) {
    const std::string id = std::to_string(c.id);
    const std::string dataflow = c.scope.empty() ? "" : std::to_string(c.scope.front());
    const std::vector<ClientMetric::Label> local = {
        {"channel", id}, {"dataflow", dataflow}, {"destination", "local"}};
    const std::vector<ClientMetric::Label> remote = {
        {"channel", id}, {"dataflow", dataflow}, {"destination", "remote"}};
    const std::vector<ClientMetric::Label> labels = {{"channel", id}, {"dataflow", dataflow}};
    const char* sent = "Records pushed into the channel by this process's workers, by destination.";
    f.counter("weir_channel_records_sent_total", sent, static_cast<double>(c.sent_local), local);
    f.counter("weir_channel_records_sent_total", sent, static_cast<double>(c.sent_remote), remote);
    f.counter("weir_channel_records_received_total",
              "Records pulled from the channel by this process's workers.",
              static_cast<double>(c.received), labels);
    const char* bytes_sent =
        "Bytes pushed into the channel by this process's workers, by destination: encoded to "
        "other processes, the records' own size within this one.";
    f.counter("weir_channel_bytes_sent_total", bytes_sent, static_cast<double>(c.bytes_sent_local),
              local);
    f.counter("weir_channel_bytes_sent_total", bytes_sent, static_cast<double>(c.bytes_sent_remote),
              remote);
    f.counter("weir_channel_bytes_received_total",
              "Bytes pulled from the channel by this process's workers (as sent).",
              static_cast<double>(c.bytes_received), labels);
  }
  for (const auto& w : stats_->workers()) {
    const std::string worker = std::to_string(w.worker);
    f.counter("weir_worker_parked_seconds_total", "Time the worker slept with nothing to do.",
              seconds(w.parked), {{"worker", worker}});
    f.counter("weir_worker_parks_total", "Times the worker went to sleep.",
              static_cast<double>(w.parks), {{"worker", worker}});
    f.gauge("weir_worker_operator_seconds",
            "How long the worker has been in the operator it runs now (0: none).",
            w.running ? seconds(w.running_for) : 0.0, {{"worker", worker}});
  }
  // Source and exports.
  const uint64_t upstream = monitor_.upstream_offset();
  f.gauge("weir_source_upstream_offset", "The upstream's position (offset, LSN or GTID).",
          static_cast<double>(upstream));
  for (const auto& e : monitor_.exports()) {
    const std::vector<ClientMetric::Label> table = {{"table", e.table}};
    f.counter("weir_export_updates_total", "Updates (rows with a diff) written to the shard.",
              static_cast<double>(e.updates), table);
    f.counter("weir_export_bytes_total", "Bytes of the rows written to the shard (unencoded).",
              static_cast<double>(e.bytes), table);
    f.counter("weir_export_appends_total", "Appends (compare-and-sets) to the shard.",
              static_cast<double>(e.appends), table);
    f.gauge("weir_export_upper", "The shard's upper: every time below it is durable.",
            static_cast<double>(e.persisted_upper), table);
    f.gauge("weir_export_since", "The since of the driver's hold: reads at or after it are valid.",
            static_cast<double>(e.since), table);
    f.gauge("weir_export_lag_offsets", "The upstream offset minus the shard's upper.",
            static_cast<double>(upstream > e.persisted_upper ? upstream - e.persisted_upper : 0),
            table);
    f.gauge("weir_export_lag_seconds",
            "How long ago the upstream reached the shard's upper (0: caught up).",
            monitor_.lag(e.persisted_upper).count(), table);
    f.gauge("weir_export_snapshot_rows", "Snapshot rows read so far (this epoch).",
            static_cast<double>(e.snapshot_done), table);
    f.gauge("weir_export_snapshot_rows_expected", "Snapshot rows to read (0: unknown or none).",
            static_cast<double>(e.snapshot_total), table);
    for (const auto health : {sources::Health::kStarting, sources::Health::kRunning,
                              sources::Health::kStalled, sources::Health::kCeased}) {
      f.gauge("weir_export_health", "1 for the export's current health, 0 for the others.",
              e.health == health ? 1 : 0,
              {{"table", e.table}, {"health", std::string(sources::to_string(health))}});
    }
  }
  // Persist.
  const PersistMetrics& p = *persist_;
  auto value = [](const std::atomic<uint64_t>& a) {
    return static_cast<double>(a.load(std::memory_order_relaxed));
  };
  const std::string blob_ops = "Blob store calls, by kind.";
  f.counter("weir_persist_blob_calls_total", blob_ops, value(p.blob_gets), {{"call", "get"}});
  f.counter("weir_persist_blob_calls_total", blob_ops, value(p.blob_sets), {{"call", "set"}});
  f.counter("weir_persist_blob_calls_total", blob_ops, value(p.blob_removes), {{"call", "remove"}});
  f.counter("weir_persist_blob_calls_total", blob_ops, value(p.blob_lists), {{"call", "list"}});
  f.counter("weir_persist_blob_bytes_total", "Blob bytes, by direction.",
            value(p.blob_bytes_written), {{"direction", "written"}});
  f.counter("weir_persist_blob_bytes_total", "Blob bytes, by direction.", value(p.blob_bytes_read),
            {{"direction", "read"}});
  f.counter("weir_persist_blob_failures_total", "Blob calls that returned an error.",
            value(p.blob_failures));
  const std::string consensus_ops = "Consensus calls, by kind.";
  f.counter("weir_persist_consensus_calls_total", consensus_ops, value(p.consensus_heads),
            {{"call", "head"}});
  f.counter("weir_persist_consensus_calls_total", consensus_ops, value(p.consensus_cas),
            {{"call", "compare_and_set"}});
  f.counter("weir_persist_consensus_calls_total", consensus_ops, value(p.consensus_scans),
            {{"call", "scan"}});
  f.counter("weir_persist_consensus_calls_total", consensus_ops, value(p.consensus_truncates),
            {{"call", "truncate"}});
  f.counter("weir_persist_consensus_cas_mismatches_total",
            "Compare-and-sets that found another head (the caller re-reads and retries).",
            value(p.consensus_cas_mismatches));
  f.counter("weir_persist_consensus_failures_total", "Consensus calls that returned an error.",
            value(p.consensus_failures));
  f.counter("weir_persist_maintenance_total",
            "Compaction and garbage-collection passes (maintains) finished.",
            static_cast<double>(monitor_.maintenance_completed()));
  f.histogram("weir_persist_blob_set_seconds", "Latency of blob writes.", p.blob_set_latency);
  f.histogram("weir_persist_blob_get_seconds", "Latency of blob reads.", p.blob_get_latency);
  f.histogram("weir_persist_consensus_cas_seconds",
              "Latency of consensus compare-and-sets (every append, every state change).",
              p.consensus_cas_latency);
  f.histogram("weir_persist_consensus_head_seconds", "Latency of consensus head reads.",
              p.consensus_head_latency);
  // Process.
  f.gauge("process_resident_memory_bytes", "Resident memory size in bytes.",
          static_cast<double>(resident_bytes()));
  f.gauge("process_uptime_seconds", "Seconds since the observer started.",
          seconds(Clock::now() - started_));
  return f.text();
}

std::string IngestObserver::graph(bool dot, std::chrono::milliseconds timeout) const {
  // Every request makes each worker describe its dataflows at its next step: requests within
  // kGraphReuse of the last share its answers, so that a client polling in a loop cannot keep
  // the workers describing instead of working. One request at a time.
  static constexpr auto kGraphReuse = std::chrono::milliseconds(250);
  weir::MutexLock lock(graph_mu_);
  if (graph_taken_ == Clock::time_point() || Clock::now() - graph_taken_ >= kGraphReuse) {
    graphs_ = collect_graphs(request_graphs(), workers_, timeout);
    graph_taken_ = Clock::now();
  }
  return dot ? graph_dot(graphs_, workers_, stats_.get())
             : graph_json(graphs_, workers_, stats_.get());
}

}  // namespace weir::observe
