// pagerank NODES EDGES [-w W]: incremental PageRank (see graph/pagerank.h) over a generated graph,
// run until no rank changes remain. Prints the number of nodes, the sum of ranks, and the ten
// highest-ranked nodes as "node rank".

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "graph/cli.h"
#include "graph/pagerank.h"

int main(int argc, char** argv) {
  using namespace weir::graph;
  GraphArgs args = parse_graph_args(argc, argv, "pagerank", false);
  auto results = weir::execute(args.config, [&](weir::Worker& worker) {
    auto state = std::make_shared<PagerankState>();
    worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      std::vector<EdgeChange> changes;
      for (const Edge& e : args.edges_for(worker.index(), worker.peers())) changes.emplace_back(e, 1);
      pagerank(weir::to_stream(scope, std::move(changes)), state);
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    std::vector<std::pair<int64_t, Node>> ranks;
    for (Node n = worker.index(); n < args.nodes; n += worker.peers()) ranks.emplace_back(state->rank(n), n);
    return ranks;
  });
  if (!results.ok()) {
    std::fprintf(stderr, "pagerank: %s\n", std::string(results.status().message()).c_str());
    return 1;
  }
  std::vector<std::pair<int64_t, Node>> all;
  for (auto& per_worker : *results) all.insert(all.end(), per_worker.begin(), per_worker.end());
  int64_t sum = 0;
  for (auto& [rank, node] : all) sum += rank;
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::printf("nodes %zu\nsum %lld\n", all.size(), static_cast<long long>(sum));
  for (size_t i = 0; i < std::min<size_t>(10, all.size()); ++i) {
    std::printf("%llu %lld\n", static_cast<unsigned long long>(all[i].second), static_cast<long long>(all[i].first));
  }
  return 0;
}
