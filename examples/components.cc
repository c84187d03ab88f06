// components NODES EDGES [-w W] | components --edges FILE [-w W]: connected components of a
// generated graph (or of FILE), edges taken as undirected, by label propagation. Prints the
// number of components. Nodes are 0..NODES-1 (isolated ones count), or those in FILE. As a
// cluster (weir-launch -n N ...), process 0 prints it.

#include "graph/components.h"

#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/cli.h"

#include "weir/protocol/cluster.h"

int main(int argc, char** argv) {
  using namespace weir::graph;
  GraphArgs args = parse_graph_args(argc, argv, "components", true);
  auto results = weir::cluster::execute(args.config, [&](weir::Worker& worker) {
    std::unordered_map<Node, Node> labels;  // This worker's nodes: the smallest label seen.
    worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      auto edges = weir::to_stream(scope, args.edges_for(worker.index(), worker.peers()));
      auto nodes = weir::to_stream(scope, args.nodes_for(worker.index(), worker.peers()));
      components(edges, nodes) | weir::inspect([&](const std::pair<Node, Node>& l) {
        auto [it, inserted] = labels.try_emplace(l.first, l.second);
        if (!inserted && l.second < it->second) it->second = l.second;
      });
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    uint64_t roots = 0;
    for (auto& [node, label] : labels) roots += (node == label);
    uint64_t total = 0;  // On worker 0: every worker's roots.
    for (uint64_t n : weir::cluster::gather(worker, std::vector<uint64_t>{roots})) total += n;
    return total;
  });
  if (!results.ok()) {
    std::fprintf(stderr, "components: %s\n", std::string(results.status().message()).c_str());
    return 1;
  }
  if (args.config.process != 0) return 0;  // Process 0 (worker 0) has the whole output.
  uint64_t total = 0;
  for (uint64_t n : *results) total += n;
  std::printf("%llu\n", static_cast<unsigned long long>(total));
  return 0;
}
