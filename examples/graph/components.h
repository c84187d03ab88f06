// Connected components by label propagation: every node starts with its own id as label and
// takes the smallest label among its neighbours (edges taken as undirected), round by round
// inside an iterative scope, until no label changes. Nodes with the same final label are one
// component.
//
// Thread safety: worker-local.

#pragma once

#include <algorithm>
#include <map>
#include <numeric>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graph.h"

#include "weir/weir.h"

namespace weir::graph {

// Returns the stream of label improvements (node, label); a node's final label is the smallest
// one it receives. `nodes` lists every node (isolated ones are components too); duplicates are
// fine.
template <Timestamp T>
Stream<T, std::pair<Node, Node>> components(const Stream<T, Edge>& edges,
                                            const Stream<T, Node>& nodes) {
  using Label = std::pair<Node, Node>;  // (node, label)
  return edges.scope().template iterative<uint64_t>([&](auto& inner) {
    using P = Product<T, uint64_t>;
    auto [loop, cycle] = loop_variable<Label>(inner, uint64_t{1});
    auto undirected = inner.enter(edges) | flat_map([](Edge e) {
                        return std::vector<Edge>{e, {e.second, e.first}};
                      });
    auto labels = inner.enter(nodes) | map([](Node n) { return Label{n, n}; }) | concat(cycle);
    OperatorBuilder<P> builder("LabelPropagation", inner);
    auto edge_input =
        builder.add_input(undirected, Exchange([](const Edge& e) { return e.first; }));
    auto label_input = builder.add_input(labels, Exchange([](const Label& l) { return l.first; }));
    auto [next_out, next] = builder.template add_output<Label>();
    auto [changed_out, changed] = builder.template add_output<Label>();
    builder.build([&](std::vector<Capability<P>>) {
      struct State {
        std::unordered_map<Node, std::vector<Node>> adjacency;
        std::unordered_map<Node, Node> label;
        struct Pending {
          Capability<P> next, out;  // For each output.
          std::vector<Label> records;
        };
        std::map<P, Pending> stash;
      };
      auto state = std::make_shared<State>();
      return [=](std::span<const MutableAntichain<P>> frontiers) mutable {
        edge_input.for_each([&](const InputCapability<P>&, std::vector<Edge>& data) {
          for (auto [src, dst] : data) state->adjacency[src].push_back(dst);
        });
        label_input.for_each([&](const InputCapability<P>& cap, std::vector<Label>& data) {
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
        while (!state->stash.empty()) {
          auto it = state->stash.begin();
          const P& time = it->first;
          if (frontiers[0].less_equal(time) || frontiers[1].less_equal(time)) break;
          // The smallest proposal per node this round.
          auto& proposals = it->second.records;
          std::sort(proposals.begin(), proposals.end());
          auto next_session = next_out.session(it->second.next);
          auto changed_session = changed_out.session(it->second.out);
          for (size_t i = 0; i < proposals.size(); ++i) {
            if (i > 0 && proposals[i].first == proposals[i - 1].first) continue;
            auto [node, label] = proposals[i];
            auto [current, inserted] = state->label.try_emplace(node, label);
            if (!inserted && current->second <= label) continue;
            current->second = label;
            changed_session.give(Label{node, label});
            if (auto adj = state->adjacency.find(node); adj != state->adjacency.end()) {
              for (Node neighbor : adj->second) {
                if (neighbor != node) next_session.give(Label{neighbor, label});
              }
            }
          }
          state->stash.erase(it);
        }
      };
    });
    next | connect_loop(loop);
    return inner.leave(changed);
  });
}

// The same, single-threaded (union-find), for checking: the number of components among `nodes`.
inline uint64_t components_reference(const std::vector<Edge>& edges,
                                     const std::vector<Node>& nodes) {
  std::unordered_map<Node, Node> parent;
  for (Node n : nodes) parent.emplace(n, n);
  std::function<Node(Node)> find = [&](Node n) {
    while (parent[n] != n) {
      parent[n] = parent[parent[n]];
      n = parent[n];
    }
    return n;
  };
  for (auto [a, b] : edges) {
    parent.try_emplace(a, a);
    parent.try_emplace(b, b);
    Node ra = find(a), rb = find(b);
    if (ra != rb) parent[std::max(ra, rb)] = std::min(ra, rb);
  }
  uint64_t count = 0;
  for (auto& [n, p] : parent) count += (find(n) == n);
  return count;
}

}  // namespace weir::graph
