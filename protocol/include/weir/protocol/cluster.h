// Clusters: N processes × W workers running one dataflow, as if they were N·W threads of one
// process, linked over gRPC (weir::protocol). See docs/cluster.md.
//
//   int main(int argc, char** argv) {
//     // -n N -p I -h HOSTFILE -w W (weir-launch passes them), plus the cluster flags of Config.
//     absl::Status status = weir::cluster::execute_from_args(argc, argv, [](weir::Worker& worker) {
//       ...  // worker.index() is global: 0 .. N·W-1; worker.peers() is N·W.
//     });
//     return status.ok() ? 0 : 1;
//   }
//
// `execute` and `execute_from_args` are weir::execute and weir::execute_from_args with the gRPC
// transport plugged in, so a program that uses them runs alone (-n 1, no network) or as one
// process of a cluster. Results: each process gets only its own workers' return values;
// `gather` brings values from every worker to worker 0 when one process must see them all.
//
// Failure is fail-stop: a lost or misbehaving peer fails every worker of every process with an
// error naming the peer, within the heartbeat timeout plus a moment; nothing hangs.
//
// Thread safety: as weir::execute; `gather` is worker-local (every worker must call it).

#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "weir/weir.h"
#include "weir/worker/config.h"
#include "weir/worker/execute.h"

namespace weir::cluster {

// The gRPC transport factory (what `execute` puts in Config::transport).
TransportFactory grpc_transport();

// weir::execute, with the gRPC transport when config.processes > 1.
template <class F>
auto execute(const Config& config, F&& fn) {
  Config with_transport = config;
  if (!with_transport.transport) with_transport.transport = grpc_transport();
  return weir::execute(with_transport, std::forward<F>(fn));
}

// weir::execute_from_args, with the gRPC transport when -n > 1.
template <class F>
auto execute_from_args(int& argc, char** argv, F&& fn) {
  auto config = Config::from_args(argc, argv);
  using Returned = decltype(cluster::execute(Config{}, std::forward<F>(fn)));
  if (!config.ok()) return Returned(config.status());
  return cluster::execute(*config, std::forward<F>(fn));
}

// Collects `values` from every worker of the cluster on worker 0 (global index), in no
// particular order; other workers get an empty vector. It runs a small dataflow of its own and
// steps it to completion, so every worker must call it at the same point of its program (as
// with any dataflow). D needs a weir::Codec when the cluster has more than one process.
//
//   auto all = weir::cluster::gather(worker, std::vector<uint64_t>{local_count});
//   if (worker.index() == 0) ... all holds one count per worker ...
template <class D>
std::vector<D> gather(Worker& worker, std::vector<D> values) {
  std::vector<D> gathered;
  ProbeHandle<uint64_t> probe;
  worker.dataflow_named<uint64_t>("Gather", [&](Scope<uint64_t>& scope) {
    to_stream(scope, std::move(values)) | exchange([](const D&) { return uint64_t{0}; }) |
        inspect([&gathered](const D& d) { gathered.push_back(d); }) | probe_with(probe);
  });
  while (!probe.done() && !worker.failed()) worker.step_or_park(std::nullopt);
  return gathered;
}

}  // namespace weir::cluster
