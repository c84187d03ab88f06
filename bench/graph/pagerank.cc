// pagerank NODES EDGES [-w W]: incremental PageRank (examples/graph/pagerank.h). EDGES
// pseudo-random edges, EDGES/W per worker, loaded at time 0; once time 0 is done, 1000 rounds
// each insert one new random edge and remove one of the loaded ones, each round stepped until
// the probe passes it; then the computation runs until no changes remain. Figure: seconds in
// total. In the same run, the same computation on one thread with CSR arrays (the COST
// baseline), whose final ranks must equal the dataflow's. Runs as a cluster too (-n N ...):
// each process checks its workers' ranks; process 0 reports.

#include "graph/pagerank.h"

#include <cstdio>
#include <string>
#include <vector>

#include "../runtime/bench_util.h"

#include "weir/protocol/cluster.h"

int main(int argc, char** argv) {
  using namespace weir::graph;
  auto args = weir::bench::parse(argc, argv, 2, "pagerank NODES EDGES [-w W]");
  const uint64_t nodes = args.numbers[0], edges = args.numbers[1], rounds = 1000;

  weir::bench::RunTimer timer;
  auto results = weir::cluster::execute(args.config, [&](weir::Worker& worker) {
    timer.start(worker);
    auto state = std::make_shared<PagerankState>();
    weir::ProbeHandle<uint64_t> probe;
    auto input = worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      auto [handle, stream] = weir::new_input<EdgeChange>(scope);
      pagerank(stream, state) | weir::probe_with(probe);
      return std::move(handle);
    });
    for (uint64_t i = worker.index(); i < edges; i += worker.peers())
      input.send({generated_edge(nodes, i), 1});
    input.advance_to(1);
    while (probe.less_than(1)) worker.step();
    for (uint64_t round = 1; round <= rounds; ++round) {
      if ((round - 1) % worker.peers() == worker.index()) {
        input.send({generated_edge(nodes, edges + round - 1), 1});
        input.send({generated_edge(nodes, round - 1), -1});
      }
      input.advance_to(round + 1);
      while (probe.less_than(round + 1)) worker.step();
    }
    input.close();
    while (worker.step_or_park(std::nullopt)) {
    }
    timer.stop(worker);
    std::vector<std::pair<Node, int64_t>> ranks;
    for (Node n = worker.index(); n < nodes; n += worker.peers())
      ranks.emplace_back(n, state->rank(n));
    return ranks;
  });
  const double seconds = timer.seconds();
  if (!results.ok()) {
    std::fprintf(stderr, "pagerank: %s\n", std::string(results.status().message()).c_str());
    return 1;
  }

  weir::bench::Timer baseline_timer;
  std::vector<Edge> loaded;
  loaded.reserve(edges);
  for (uint64_t i = 0; i < edges; ++i) loaded.push_back(generated_edge(nodes, i));
  std::vector<std::vector<EdgeChange>> changes;
  for (uint64_t round = 1; round <= rounds; ++round) {
    changes.push_back(
        {{generated_edge(nodes, edges + round - 1), 1}, {generated_edge(nodes, round - 1), -1}});
  }
  PagerankBaseline baseline(nodes, loaded);
  baseline.run(changes);
  const double baseline_seconds = baseline_timer.seconds();

  for (auto& per_worker : *results) {
    for (auto [node, rank] : per_worker) {
      if (rank != baseline.rank(node)) {
        std::fprintf(stderr, "pagerank: node %llu has rank %lld, the baseline says %lld\n",
                     static_cast<unsigned long long>(node), static_cast<long long>(rank),
                     static_cast<long long>(baseline.rank(node)));
        return 1;
      }
    }
  }
  if (!weir::bench::reports(args.config)) return 0;
  std::printf(
      "pagerank: %llu nodes, %llu edges, %llu rounds on %zu workers: %.3f s; one thread (CSR): "
      "%.3f s over %llu times\n",
      static_cast<unsigned long long>(nodes), static_cast<unsigned long long>(edges),
      static_cast<unsigned long long>(rounds), args.config.workers, seconds, baseline_seconds,
      static_cast<unsigned long long>(baseline.times()));
  weir::bench::result("pagerank_seconds", seconds, "s");
  weir::bench::result("pagerank_baseline_seconds", baseline_seconds, "s");
  return 0;
}
