// A replica of several processes: `weir replica -n N -p I -h HOSTS` (docs/control.md, "Replicas
// of several processes").
//
//   ReplicaOptions options;  // As for run_replica.
//   Config cluster;          // -n N -p I -h HOSTS (weir-launch passes them), 1 worker.
//   absl::Status ended = run_replica_cluster(options, cluster);
//
// The N processes form one cluster over weir::cluster (the gRPC transport), fail-stop: a
// process that dies, or whose replica ends, fails the others, and the cluster is restarted whole
// (`weir-launch --restart`). Once every process has linked, process 0 takes the execution id E
// (take_execution) and sends it to the others over the cluster, so that there is exactly one
// execution per cluster start. Each process then runs run_replica with E: it follows the catalog
// itself, runs the objects placed on it (weir/control/placement.h) and checks at every poll that
// E is still the latest. Health: process 0 alone writes weir.health and weir.health_history,
// fenced by E as a replica alone does; the others send it their transitions over the cluster.
//
// Returns as run_replica: OK when stopped (options.stop), FailedPrecondition naming the
// successor once a later execution fenced E (every process says so, whichever noticed first),
// another error when the cluster failed (a lost peer, a start-up timeout) or could not start.
// With config.processes == 1 it is run_replica (no network).
//
// Thread safety: blocks its caller.

#pragma once

#include "absl/status/status.h"

#include "weir/control/replica.h"
#include "weir/worker/config.h"

namespace weir::control {

absl::Status run_replica_cluster(ReplicaOptions options, const Config& config);

}  // namespace weir::control
