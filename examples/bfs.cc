// bfs NODES EDGES [-w W] | bfs --edges FILE [-w W]: breadth-first search from node 0 over a
// generated graph (or the edges of FILE, one "src dst" per line), following edges from src to
// dst. Prints one line "distance count" for every distance reached, in order. As a cluster
// (weir-launch -n N ...), process 0 prints it.

#include "graph/bfs.h"

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "graph/cli.h"

#include "weir/protocol/cluster.h"

int main(int argc, char** argv) {
  using namespace weir::graph;
  GraphArgs args = parse_graph_args(argc, argv, "bfs", true);
  auto results = weir::cluster::execute(args.config, [&](weir::Worker& worker) {
    std::map<uint64_t, uint64_t> counts;
    worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      auto edges = weir::to_stream(scope, args.edges_for(worker.index(), worker.peers()));
      auto roots =
          weir::to_stream(scope, worker.index() == 0 ? std::vector<Node>{0} : std::vector<Node>{});
      bfs(edges, roots) |
          weir::inspect([&](const std::pair<Node, uint64_t>& r) { ++counts[r.second]; });
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    // Every worker's counts, on worker 0.
    using Count = std::pair<uint64_t, uint64_t>;
    return weir::cluster::gather(worker, std::vector<Count>(counts.begin(), counts.end()));
  });
  if (!results.ok()) {
    std::fprintf(stderr, "bfs: %s\n", std::string(results.status().message()).c_str());
    return 1;
  }
  std::map<uint64_t, uint64_t> counts;
  for (auto& per_worker : *results) {
    for (auto [d, n] : per_worker) counts[d] += n;
  }
  for (auto [d, n] : counts)
    std::printf("%llu %llu\n", static_cast<unsigned long long>(d),
                static_cast<unsigned long long>(n));
  return 0;
}
