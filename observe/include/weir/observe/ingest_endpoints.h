// IngestObserver: the HTTP endpoints of a running `weir ingest` (docs/observability.md).
//
//   weir::observe::IngestObserver observer({.kind = "auction", .source = "loadgen:auction"});
//   WEIR_RETURN_IF_ERROR(observer.instrument(options));  // Counts the workers and stores.
//   WEIR_ASSIGN_OR_RETURN(int port, observer.serve(http_options));
//   run_ingest(options, &observer.monitor());
//
// Endpoints (GET):
//   /          the dashboard: one self-contained page that polls /status and /graph.
//   /metrics   Prometheus text format: operators, channels, workers, exports, persist, RSS.
//   /status    JSON: the source, every export (health, upper, lag, snapshot progress, totals),
//              every worker (the operator it runs now), persist counters.
//   /graph     JSON of the running dataflows (weir/observe/graph.h); /graph?format=dot: DOT.
//   /healthz   200 "ok" while the process serves requests.
//   /readyz    200 once every export has hydrated (its health is past `starting`), else 503
//              naming those that have not.
//
// /status:
//   {"command": "ingest", "kind": "auction", "source": "loadgen:auction", "pid": 123,
//    "uptime_seconds": 12.5, "ready": true, "upstream_offset": 5000, "workers_total": 2,
//    "exports": [{"table": "bids", "shard": "auction.bids", "health": "running", "error": "",
//                 "upper": 4990, "since": 3989, "lag_offsets": 10, "lag_seconds": 0.02,
//                 "updates": 48000, "bytes": 2100000, "appends": 310,
//                 "snapshot": {"active": false, "done": 1000, "total": 1000}}],
//    "workers": [{"worker": 0, "operator": "Map" | null, "operator_seconds": 0.001,
//                 "parked": true, "parked_seconds": 3.2, "operator_runs": 91000}],
//    "persist": {"blob_bytes_written": ..., "blob_bytes_read": ..., "cas": ...,
//                "cas_mismatches": ..., "failures": ..., "maintenance_completed": ...}}
//
// Thread safety: instrument before the run; the endpoints serve from the server's threads.

#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "weir/ingest/ingest.h"
#include "weir/mutex.h"
#include "weir/observe/http_server.h"
#include "weir/observe/metered_store.h"
#include "weir/observe/runtime_stats.h"
#include "weir/worker/introspection.h"

namespace weir::observe {

// The dashboard page (web/dashboard.html, embedded at build time).
std::string_view dashboard_page();

struct IngestObserverConfig {
  std::string kind;    // The shards' prefix: "<kind>.<table>".
  std::string source;  // As given to --source, for display.
};

class IngestObserver {
 public:
  explicit IngestObserver(IngestObserverConfig config);
  ~IngestObserver();
  IngestObserver(const IngestObserver&) = delete;
  IngestObserver& operator=(const IngestObserver&) = delete;

  // Counts what the run does: attaches RuntimeStats to every worker (options.on_worker, chained
  // after one already set) and wraps the persist stores in MeteredBlob and MeteredConsensus
  // (opening options.location's when options.blob and options.consensus are not set).
  absl::Status instrument(ingest::IngestOptions& options);

  // Starts serving; returns the port. Call once.
  absl::StatusOr<int> serve(const HttpServerOptions& options);

  ingest::IngestMonitor& monitor() { return monitor_; }

  // The endpoints' bodies (for tests, and for `weir top`-like uses in-process).
  std::string status_json() const;
  std::string metrics_text() const;
  // Waits up to `timeout` for the workers' graphs.
  std::string graph(bool dot, std::chrono::milliseconds timeout) const;
  // Empty when ready; else why not.
  std::string not_ready() const;

 private:
  const IngestObserverConfig config_;
  const std::chrono::steady_clock::time_point started_;
  ingest::IngestMonitor monitor_;
  std::shared_ptr<RuntimeStats> stats_ = std::make_shared<RuntimeStats>();
  std::shared_ptr<PersistMetrics> persist_ = std::make_shared<PersistMetrics>();
  size_t workers_ = 1;
  // The workers' last answers to a graph request, and when they were asked for.
  mutable weir::Mutex graph_mu_;
  mutable std::vector<WorkerGraph> graphs_ ABSL_GUARDED_BY(graph_mu_);
  mutable std::chrono::steady_clock::time_point graph_taken_ ABSL_GUARDED_BY(graph_mu_);
  std::unique_ptr<HttpServer> server_;  // Last: stops before the rest goes.
};

}  // namespace weir::observe
