// BFS, connected components and PageRank: the same answers on 1, 2 and 4 workers, equal to a
// plain single-threaded computation.

#include <map>
#include <unordered_map>
#include <vector>

#include "graph/bfs.h"
#include "graph/components.h"
#include "graph/pagerank.h"
#include "testing/harness.h"
#include <gtest/gtest.h>

namespace weir::graph {
namespace {

class GraphTest : public ::testing::TestWithParam<size_t> {};

TEST_P(GraphTest, BfsMatchesReference) {
  const uint64_t nodes = 3000, edges = 9000;
  auto results = testing::run_workers(GetParam(), [&](Worker& worker) {
    std::map<uint64_t, uint64_t> counts;
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto e = to_stream(scope, worker_edges(nodes, edges, worker.index(), worker.peers()));
      auto roots =
          to_stream(scope, worker.index() == 0 ? std::vector<Node>{0} : std::vector<Node>{});
      bfs(e, roots) | inspect([&](const std::pair<Node, uint64_t>& r) { ++counts[r.second]; });
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    return counts;
  });
  ASSERT_TRUE(results.ok()) << results.status();
  std::map<uint64_t, uint64_t> counts;
  for (auto& r : *results) {
    for (auto [d, n] : r) counts[d] += n;
  }
  EXPECT_EQ(counts, bfs_reference(worker_edges(nodes, edges, 0, 1), 0));
  EXPECT_GT(counts.size(), 3u);
}

TEST_P(GraphTest, ComponentsMatchReference) {
  const uint64_t nodes = 3000, edges = 2500;
  auto results = testing::run_workers(GetParam(), [&](Worker& worker) {
    std::unordered_map<Node, Node> labels;
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto e = to_stream(scope, worker_edges(nodes, edges, worker.index(), worker.peers()));
      std::vector<Node> mine;
      for (Node n = worker.index(); n < nodes; n += worker.peers()) mine.push_back(n);
      components(e, to_stream(scope, mine)) | inspect([&](const std::pair<Node, Node>& l) {
        auto [it, inserted] = labels.try_emplace(l.first, l.second);
        if (!inserted) it->second = std::min(it->second, l.second);
      });
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    uint64_t roots = 0;
    for (auto& [n, l] : labels) roots += (n == l);
    return roots;
  });
  ASSERT_TRUE(results.ok()) << results.status();
  uint64_t total = 0;
  for (uint64_t r : *results) total += r;
  std::vector<Node> all(nodes);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(total, components_reference(worker_edges(nodes, edges, 0, 1), all));
}

TEST_P(GraphTest, PagerankMatchesBaselineThroughEdgeChanges) {
  const uint64_t nodes = 2000, edges = 16000, rounds = 20;
  auto results = testing::run_workers(GetParam(), [&](Worker& worker) {
    auto state = std::make_shared<PagerankState>();
    ProbeHandle<uint64_t> probe;
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<EdgeChange>(scope);
      pagerank(stream, state) | probe_with(probe);
      return std::move(handle);
    });
    for (const Edge& e : worker_edges(nodes, edges, worker.index(), worker.peers()))
      input.send({e, 1});
    for (uint64_t round = 1; round <= rounds; ++round) {
      input.advance_to(round);
      // Round r inserts generated edge edges + r - 1 and deletes loaded edge r - 1.
      if ((round - 1) % worker.peers() == worker.index()) {
        input.send({generated_edge(nodes, edges + round - 1), 1});
        input.send({generated_edge(nodes, round - 1), -1});
      }
    }
    input.close();
    while (worker.step_or_park(std::nullopt)) {
    }
    std::vector<std::pair<Node, int64_t>> ranks;
    for (Node n = worker.index(); n < nodes; n += worker.peers())
      ranks.emplace_back(n, state->rank(n));
    return ranks;
  });
  ASSERT_TRUE(results.ok()) << results.status();
  PagerankBaseline baseline(nodes, worker_edges(nodes, edges, 0, 1));
  std::vector<std::vector<EdgeChange>> changes;
  for (uint64_t round = 1; round <= rounds; ++round) {
    changes.push_back(
        {{generated_edge(nodes, edges + round - 1), 1}, {generated_edge(nodes, round - 1), -1}});
  }
  baseline.run(changes);
  uint64_t checked = 0, changed = 0;
  for (auto& per_worker : *results) {
    for (auto [node, rank] : per_worker) {
      ASSERT_EQ(rank, baseline.rank(node)) << "node " << node;
      ++checked;
      changed += (rank != kInitialRank);
    }
  }
  EXPECT_EQ(checked, nodes);
  EXPECT_GT(changed, nodes / 2);
}

INSTANTIATE_TEST_SUITE_P(Workers, GraphTest, ::testing::Values(1, 2, 4));

TEST(GraphFileTest, BadEdgeFileNamesTheLine) {
  const std::string path = ::testing::TempDir() + "/bad-edges.txt";
  {
    std::ofstream f(path);
    f << "0 1\n1 2\n# comment\n2 x\n";
  }
  auto edges = read_edges(path);
  ASSERT_FALSE(edges.ok());
  EXPECT_NE(edges.status().message().find("line 4"), std::string::npos) << edges.status();
  EXPECT_FALSE(read_edges(path + ".missing").ok());
}

}  // namespace
}  // namespace weir::graph
