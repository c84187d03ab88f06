// ReplicaObserver: the HTTP endpoints of a running `weir replica` (docs/control.md, "Replicas").
//
//   weir::observe::ReplicaObserver observer(client);  // Reads the catalog's latest version.
//   observer.instrument(options);                     // Chains on_execution, on_reconciled,
//   on_health. WEIR_ASSIGN_OR_RETURN(int port, observer.serve(http_options)); run_replica(options);
//
// Endpoints (GET):
//   /status    JSON: the execution, the catalog's latest version and the one reconciled, and every
//              object the replica runs with its health as the replica last recorded it.
//   /metrics   Prometheus text format: weir_replica_execution, weir_catalog_version,
//              weir_replica_reconciled_version, weir_object_health{object,state} (1 for the
//              object's state, 0 for the others), weir_object_restarts_total{object}.
//   /healthz   200 "ok" while the process serves requests.
//   /readyz    200 once the replica has reconciled the catalog's latest version and every object
//              it runs is past `starting` (running, stalled or completed); else 503 saying why.
//
// /status:
//   {"command": "replica", "pid": 123, "uptime_seconds": 12.5, "execution": 4,
//    "catalog_version": 7, "reconciled_version": 7, "ready": true,
//    "catalog": {"health": "running", "error": ""},
//    "objects": [{"name": "auction", "kind": "source", "object_id": "o5c1d...",
//                 "health": "running", "error": "", "restarts": 0}]}
// A value not known yet (no execution taken, nothing reconciled) is null; an object the replica
// has not reported on yet has health "starting". Objects not run (invalid rows) are not listed:
// `weir ctl status` shows them.
//
// Thread safety: instrument before the run; the callbacks come from the replica's threads and the
// endpoints serve from the server's threads (one mutex).

#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "weir/control/replica.h"
#include "weir/mutex.h"
#include "weir/observe/http_server.h"
#include "weir/persist/client.h"

namespace weir::observe {

class ReplicaObserver {
 public:
  // `client` reads the head of weir.catalog (no write, no hold) for /status, /metrics and /readyz.
  explicit ReplicaObserver(std::shared_ptr<persist::PersistClient> client);
  ~ReplicaObserver();
  ReplicaObserver(const ReplicaObserver&) = delete;
  ReplicaObserver& operator=(const ReplicaObserver&) = delete;

  // Follows the run: sets options.on_execution, on_reconciled and on_health, each calling one
  // already set after it.
  void instrument(control::ReplicaOptions& options);

  // Starts serving; returns the port. Call once.
  absl::StatusOr<int> serve(const HttpServerOptions& options);

  // The endpoints' bodies.
  std::string status_json() const;
  std::string metrics_text() const;
  // Empty when ready; else why not.
  std::string not_ready() const;

 private:
  struct Object {
    std::string kind;
    std::string object_id;
  };
  // What the callbacks reported, and the catalog's latest version (read when asked).
  struct Snapshot {
    std::optional<uint64_t> execution;
    std::optional<uint64_t> reconciled;
    std::map<std::string, Object> objects;
    std::map<std::string, control::HealthTransition> health;
    absl::StatusOr<uint64_t> latest = 0;
  };
  Snapshot snapshot() const;
  static std::string not_ready(const Snapshot& s);
  // The object's last transition, if it is of this object.
  static const control::HealthTransition* health_of(const Snapshot& s, const std::string& name);

  const std::shared_ptr<persist::PersistClient> client_;
  const std::chrono::steady_clock::time_point started_;
  mutable weir::Mutex mu_;
  std::optional<uint64_t> execution_ ABSL_GUARDED_BY(mu_);
  std::optional<uint64_t> reconciled_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Object> objects_ ABSL_GUARDED_BY(mu_);  // By name, as reconciled.
  // The last transition of each object run (and of weir.catalog), by name.
  std::map<std::string, control::HealthTransition> health_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<HttpServer> server_;  // Last: stops before the rest goes.
};

}  // namespace weir::observe
