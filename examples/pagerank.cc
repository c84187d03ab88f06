// pagerank NODES EDGES [-w W]: incremental PageRank (see graph/pagerank.h) over a generated graph,
// run until no rank changes remain. Prints the number of nodes, the sum of ranks, and the ten
// highest-ranked nodes as "node rank". As a cluster (weir-launch -n N ...), process 0 prints it.

#include "graph/pagerank.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "graph/cli.h"

#include "weir/protocol/cluster.h"

namespace {

// One worker's share of the output: its node count, rank sum and ten highest ranks.
using Ranked = std::pair<int64_t, weir::graph::Node>;
using Summary = std::tuple<uint64_t, int64_t, std::vector<Ranked>>;

bool by_rank(const Ranked& a, const Ranked& b) {
  return a.first != b.first ? a.first > b.first : a.second < b.second;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace weir::graph;
  GraphArgs args = parse_graph_args(argc, argv, "pagerank", false);
  auto results = weir::cluster::execute(args.config, [&](weir::Worker& worker) {
    auto state = std::make_shared<PagerankState>();
    worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      std::vector<EdgeChange> changes;
      for (const Edge& e : args.edges_for(worker.index(), worker.peers()))
        changes.emplace_back(e, 1);
      pagerank(weir::to_stream(scope, std::move(changes)), state);
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    std::vector<Ranked> ranks;
    for (Node n = worker.index(); n < args.nodes; n += worker.peers())
      ranks.emplace_back(state->rank(n), n);
    int64_t sum = 0;
    for (auto& [rank, node] : ranks) sum += rank;
    const uint64_t count = ranks.size();
    std::sort(ranks.begin(), ranks.end(), by_rank);
    ranks.resize(std::min<size_t>(10, ranks.size()));
    // Every worker's summary, on worker 0.
    return weir::cluster::gather(worker,
                                 std::vector<Summary>{Summary{count, sum, std::move(ranks)}});
  });
  if (!results.ok()) {
    std::fprintf(stderr, "pagerank: %s\n", std::string(results.status().message()).c_str());
    return 1;
  }
  if (args.config.process != 0) return 0;  // Process 0 (worker 0) has the whole output.
  uint64_t count = 0;
  int64_t sum = 0;
  std::vector<Ranked> top;
  for (auto& per_worker : *results) {
    for (auto& [n, s, ranks] : per_worker) {
      count += n;
      sum += s;
      top.insert(top.end(), ranks.begin(), ranks.end());
    }
  }
  std::sort(top.begin(), top.end(), by_rank);
  std::printf("nodes %llu\nsum %lld\n", static_cast<unsigned long long>(count),
              static_cast<long long>(sum));
  for (size_t i = 0; i < std::min<size_t>(10, top.size()); ++i) {
    std::printf("%llu %lld\n", static_cast<unsigned long long>(top[i].second),
                static_cast<long long>(top[i].first));
  }
  return 0;
}
