// Breadth-first search as a dataflow: distances from node 0, round by round inside an
// iterative scope (round r reaches the nodes at distance r).
//
// Thread safety: worker-local.

#pragma once

#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graph.h"

#include "weir/weir.h"

namespace weir::graph {

// Returns the stream of (node, distance) for every node reached from `root`, at the edges'
// time. `edges` holds directed edges; `roots` the starting node(s).
template <Timestamp T>
Stream<T, std::pair<Node, uint64_t>> bfs(const Stream<T, Edge>& edges,
                                         const Stream<T, Node>& roots) {
  using Reach = std::pair<Node, uint64_t>;  // (node, distance)
  return edges.scope().template iterative<uint64_t>([&](auto& inner) {
    using P = Product<T, uint64_t>;
    auto [loop, cycle] = loop_variable<Reach>(inner, uint64_t{1});
    auto start = inner.enter(roots) | map([](Node n) { return Reach{n, 0}; });
    auto reached = start | concat(cycle);
    OperatorBuilder<P> builder("BreadthFirst", inner);
    auto edge_input =
        builder.add_input(inner.enter(edges), Exchange([](const Edge& e) { return e.first; }));
    auto reach_input = builder.add_input(reached, Exchange([](const Reach& r) { return r.first; }));
    auto [next_out, next] = builder.template add_output<Reach>();
    auto [visited_out, visited] = builder.template add_output<Reach>();
    builder.build([&](std::vector<Capability<P>>) {
      struct State {
        std::unordered_map<Node, std::vector<Node>> adjacency;
        std::unordered_map<Node, uint64_t> distance;
        struct Pending {
          Capability<P> next, out;  // For each output.
          std::vector<Reach> records;
        };
        std::map<P, Pending> stash;
      };
      auto state = std::make_shared<State>();
      return [=](std::span<const MutableAntichain<P>> frontiers) mutable {
        edge_input.for_each([&](const InputCapability<P>&, std::vector<Edge>& data) {
          for (auto [src, dst] : data) state->adjacency[src].push_back(dst);
        });
        reach_input.for_each([&](const InputCapability<P>& cap, std::vector<Reach>& data) {
          auto it = state->stash.find(cap.time());
          if (it == state->stash.end()) {
            it = state->stash
                     .emplace(cap.time(),
                              typename State::Pending{
                                  cap.retain_for_output(0), cap.retain_for_output(1), {}})
                     .first;
          }
          auto& stashed = it->second.records;
          stashed.insert(stashed.end(), data.begin(), data.end());
        });
        // A round runs once the edges and everything reached before it are in.
        while (!state->stash.empty()) {
          auto it = state->stash.begin();
          const P& time = it->first;
          if (frontiers[0].less_equal(time) || frontiers[1].less_equal(time)) break;
          auto next_session = next_out.session(it->second.next);
          auto visited_session = visited_out.session(it->second.out);
          for (auto [node, dist] : it->second.records) {
            if (state->distance.contains(node)) continue;
            state->distance.emplace(node, dist);
            visited_session.give(Reach{node, dist});
            if (auto adj = state->adjacency.find(node); adj != state->adjacency.end()) {
              for (Node neighbor : adj->second) next_session.give(Reach{neighbor, dist + 1});
            }
          }
          state->stash.erase(it);
        }
      };
    });
    next | connect_loop(loop);
    return inner.leave(visited);
  });
}

// The same, single-threaded, for checking: distance -> number of nodes at that distance.
inline std::map<uint64_t, uint64_t> bfs_reference(const std::vector<Edge>& edges, Node root) {
  std::unordered_map<Node, std::vector<Node>> adjacency;
  for (auto [src, dst] : edges) adjacency[src].push_back(dst);
  std::unordered_map<Node, uint64_t> distance{{root, 0}};
  std::vector<Node> frontier{root};
  std::map<uint64_t, uint64_t> counts{{0, 1}};
  for (uint64_t d = 1; !frontier.empty(); ++d) {
    std::vector<Node> next;
    for (Node n : frontier) {
      if (auto adj = adjacency.find(n); adj != adjacency.end()) {
        for (Node m : adj->second) {
          if (distance.emplace(m, d).second) {
            next.push_back(m);
            ++counts[d];
          }
        }
      }
    }
    frontier = std::move(next);
  }
  return counts;
}

}  // namespace weir::graph
