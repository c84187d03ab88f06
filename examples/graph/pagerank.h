// Incremental PageRank (the formulation of timely-dataflow's pagerank example): every node starts
// with rank 1000 and sends 5/6 of its rank to its out-edges (integer shares; the remainder goes
// one unit each to the first edges, in order of destination). Changes of rank circulate through a
// feedback loop (+1); a node applies its accumulated change once its absolute value reaches 6.
// Edge changes (inserts +1, deletes -1) may arrive at any time; each time, a node first applies
// its edge changes, then its rank changes, and sends the difference of its new distribution from
// its old one.
//
// `pagerank` builds it as a dataflow; `PagerankBaseline` runs the same computation on one thread
// with plain arrays (CSR), for checking and for the COST comparison.
//
// Thread safety: worker-local.

#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "graph.h"

#include "weir/weir.h"

namespace weir::graph {

using EdgeChange = std::pair<Edge, int64_t>;
using RankChange = std::pair<Node, int64_t>;
using Adjacency = std::vector<std::pair<Node, int64_t>>;  // (dst, multiplicity), sorted by dst

inline constexpr int64_t kInitialRank = 1000;
inline constexpr int64_t kApplyThreshold = 6;

// Destination i's share of 5/6 of `rank` over `degree` edges (before its multiplicity).
inline int64_t share_of(int64_t rank, int64_t degree, int64_t i) {
  const int64_t distribute = rank * 5 / 6;
  return distribute / degree + (i < distribute % degree ? 1 : 0);
}

// Appends to `out` each destination's share of 5/6 of `rank`, times `sign`.
inline void allocate(int64_t rank, std::span<const std::pair<Node, int64_t>> edges, int64_t sign,
                     std::vector<RankChange>& out) {
  const int64_t degree = static_cast<int64_t>(edges.size());
  for (int64_t i = 0; i < degree; ++i) {
    out.emplace_back(edges[i].first, sign * edges[i].second * share_of(rank, degree, i));
  }
}

// Appends the change of each destination's allocation when a node's rank moves from `before`
// to `after` over the same edges (zero changes omitted).
inline void reallocate(int64_t before, int64_t after,
                       std::span<const std::pair<Node, int64_t>> edges,
                       std::vector<RankChange>& out) {
  const int64_t degree = static_cast<int64_t>(edges.size());
  for (int64_t i = 0; i < degree; ++i) {
    const int64_t change =
        edges[i].second * (share_of(after, degree, i) - share_of(before, degree, i));
    if (change != 0) out.emplace_back(edges[i].first, change);
  }
}

// Appends the change of each destination's allocation of `rank` when a node's edges change from
// `before` to `after` (both sorted by destination; zero changes omitted).
inline void reallocate_edges(int64_t rank, std::span<const std::pair<Node, int64_t>> before,
                             std::span<const std::pair<Node, int64_t>> after,
                             std::vector<RankChange>& out) {
  const int64_t db = static_cast<int64_t>(before.size()), da = static_cast<int64_t>(after.size());
  int64_t i = 0, j = 0;
  while (i < db || j < da) {
    if (j == da || (i < db && before[i].first < after[j].first)) {
      out.emplace_back(before[i].first, -before[i].second * share_of(rank, db, i));
      ++i;
    } else if (i == db || after[j].first < before[i].first) {
      out.emplace_back(after[j].first, after[j].second * share_of(rank, da, j));
      ++j;
    } else {
      const int64_t change =
          after[j].second * share_of(rank, da, j) - before[i].second * share_of(rank, db, i);
      if (change != 0) out.emplace_back(after[j].first, change);
      ++i;
      ++j;
    }
  }
}

// Sorts by the first component and sums the second; drops zeros.
template <class K>
void consolidate(std::vector<std::pair<K, int64_t>>& list) {
  std::sort(list.begin(), list.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  size_t out = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    if (out > 0 && list[out - 1].first == list[i].first) {
      list[out - 1].second += list[i].second;
    } else {
      if (out > 0 && list[out - 1].second == 0) --out;
      list[out++] = list[i];
    }
  }
  if (out > 0 && list[out - 1].second == 0) --out;
  list.resize(out);
}

// Applies sorted, consolidated (dst, diff) changes to an adjacency list.
inline void apply_edge_changes(Adjacency& adjacency,
                               std::span<const std::pair<Node, int64_t>> changes) {
  adjacency.insert(adjacency.end(), changes.begin(), changes.end());
  consolidate(adjacency);
}

// Node state of the nodes one worker owns (node % peers == index), indexed by node / peers.
struct PagerankState {
  size_t index = 0, peers = 1;
  std::vector<Adjacency> edges;
  std::vector<int64_t> ranks, diffs;

  size_t local(Node n) const { return n / peers; }
  void ensure(size_t local_id) {
    if (local_id >= ranks.size()) {
      edges.resize(local_id + 1);
      ranks.resize(local_id + 1, kInitialRank);
      diffs.resize(local_id + 1, 0);
      arrived_.resize(local_id + 1, 0);
    }
  }
  int64_t rank(Node n) const { return local(n) < ranks.size() ? ranks[local(n)] : kInitialRank; }

  // Edge changes of one time: re-distributes each changed source.
  void apply_edges(std::vector<EdgeChange>& changes, std::vector<RankChange>& out) {
    if (changes.empty()) return;
    consolidate(changes);
    for (size_t i = 0; i < changes.size();) {
      const Node src = changes[i].first.first;
      per_src_.clear();
      for (; i < changes.size() && changes[i].first.first == src; ++i) {
        per_src_.emplace_back(changes[i].first.second, changes[i].second);
      }
      const size_t l = local(src);
      ensure(l);
      before_ = edges[l];
      apply_edge_changes(edges[l], per_src_);
      reallocate_edges(ranks[l], before_, edges[l], out);
    }
  }

  // Rank changes of one time: each node applies its accumulated change once it reaches the
  // threshold, and re-distributes.
  void apply_ranks(const std::vector<RankChange>& changes, std::vector<RankChange>& out) {
    for (auto [node, diff] : changes) {
      const size_t l = local(node);
      ensure(l);
      if (arrived_[l] == 0) touched_.push_back(l);
      arrived_[l] += diff;
    }
    for (size_t l : touched_) {
      const int64_t diff = arrived_[l];
      arrived_[l] = 0;
      if (diff == 0) continue;
      diffs[l] += diff;
      if (std::abs(diffs[l]) < kApplyThreshold) continue;
      const int64_t before = ranks[l];
      ranks[l] += diffs[l];
      diffs[l] = 0;
      reallocate(before, ranks[l], edges[l], out);
    }
    touched_.clear();
  }

 private:
  std::vector<std::pair<Node, int64_t>> per_src_;  // Scratch.
  Adjacency before_;                               // Scratch.
  std::vector<int64_t> arrived_;                   // Changes of the current time, per node.
  std::vector<size_t> touched_;                    // Nodes with arrived changes.
};

// The PageRank dataflow: edge changes in, rank changes around the loop. Returns the stream of
// rank changes (probe it to know when a time is done). `state` ends up with this worker's nodes.
inline Stream<uint64_t, RankChange> pagerank(const Stream<uint64_t, EdgeChange>& edges,
                                             std::shared_ptr<PagerankState> state) {
  auto& scope = edges.scope();
  state->index = scope.index();
  state->peers = scope.peers();
  auto [loop, ranks] = feedback<RankChange>(scope, IntSummary<uint64_t>{1});
  auto changes = binary_frontier<RankChange>(
      edges, ranks, Exchange([](const EdgeChange& e) { return e.first.first; }),
      Exchange([](const RankChange& r) { return r.first; }), "PageRank",
      [state](const Capability<uint64_t>&, const OperatorInfo&) {
        struct Stash {
          std::optional<Capability<uint64_t>> capability;
          std::vector<EdgeChange> edges;
          std::vector<RankChange> ranks;
        };
        std::map<uint64_t, Stash> stash;
        std::vector<RankChange> out;
        return [state, stash = std::move(stash), out = std::move(out)](
                   auto& edge_input, auto& rank_input, auto& output) mutable {
          edge_input.for_each(
              [&](const InputCapability<uint64_t>& cap, std::vector<EdgeChange>& data) {
                auto& s = stash[cap.time()];
                if (!s.capability) s.capability.emplace(cap.retain());
                s.edges.insert(s.edges.end(), data.begin(), data.end());
              });
          rank_input.for_each(
              [&](const InputCapability<uint64_t>& cap, std::vector<RankChange>& data) {
                auto& s = stash[cap.time()];
                if (!s.capability) s.capability.emplace(cap.retain());
                if (s.ranks.empty()) {
                  std::swap(s.ranks, data);
                } else {
                  s.ranks.insert(s.ranks.end(), data.begin(), data.end());
                }
              });
          // Times complete on both inputs, earliest first.
          while (!stash.empty()) {
            auto it = stash.begin();
            if (edge_input.frontier().less_equal(it->first) ||
                rank_input.frontier().less_equal(it->first))
              break;
            out.clear();
            state->apply_edges(it->second.edges, out);
            state->apply_ranks(it->second.ranks, out);
            output.session(*it->second.capability).give_vec(out);
            stash.erase(it);
          }
        };
      });
  changes | connect_loop(loop);
  return changes;
}

// The same computation on one thread, with the loaded graph in CSR arrays (and the few nodes
// whose edges change later in an overlay).
class PagerankBaseline {
 public:
  // `loaded`: the edges of time 0; `rounds[i]`: the edge changes of time i + 1.
  PagerankBaseline(uint64_t nodes, const std::vector<Edge>& loaded) : nodes_(nodes) {
    std::vector<Edge> sorted(loaded);
    std::sort(sorted.begin(), sorted.end());
    offsets_.assign(nodes + 1, 0);
    for (size_t i = 0; i < sorted.size(); ++i) {
      if (i > 0 && sorted[i] == sorted[i - 1]) {
        targets_.back().second += 1;
        continue;
      }
      targets_.emplace_back(sorted[i].second, 1);
      offsets_[sorted[i].first + 1] = targets_.size();
    }
    for (uint64_t n = 1; n <= nodes; ++n) offsets_[n] = std::max(offsets_[n], offsets_[n - 1]);
    loaded_ = targets_.size() > 0;
    overlay_index_.assign(nodes, -1);
    ranks_.assign(nodes, kInitialRank);
    diffs_.assign(nodes, 0);
    pending_.assign(nodes, 0);
    next_.assign(nodes, 0);
  }

  // Runs to quiescence: time 0 loads the graph; time i + 1 applies rounds[i].
  void run(const std::vector<std::vector<EdgeChange>>& rounds) {
    std::vector<RankChange> out;
    // Time 0: every loaded source distributes its initial rank.
    for (Node src = 0; src < nodes_; ++src) {
      out.clear();
      allocate(ranks_[src], edges_of(src), 1, out);
      send(out);
    }
    for (uint64_t time = 1;; ++time) {
      std::swap(pending_, next_);
      std::swap(pending_touched_, next_touched_);
      const bool more_input = time <= rounds.size();
      if (pending_touched_.empty() && !more_input) break;
      if (more_input) {
        std::vector<EdgeChange> changes = rounds[time - 1];
        consolidate(changes);
        for (size_t i = 0; i < changes.size();) {
          const Node src = changes[i].first.first;
          std::vector<std::pair<Node, int64_t>> per_src;
          for (; i < changes.size() && changes[i].first.first == src; ++i) {
            per_src.emplace_back(changes[i].first.second, changes[i].second);
          }
          out.clear();
          Adjacency& adjacency = overlay(src);
          const Adjacency before = adjacency;
          apply_edge_changes(adjacency, per_src);
          reallocate_edges(ranks_[src], before, adjacency, out);
          send(out);
        }
      }
      for (Node node : pending_touched_) {
        const int64_t diff = pending_[node];
        pending_[node] = 0;
        if (diff == 0) continue;
        diffs_[node] += diff;
        if (std::abs(diffs_[node]) < kApplyThreshold) continue;
        out.clear();
        const int64_t before = ranks_[node];
        ranks_[node] += diffs_[node];
        diffs_[node] = 0;
        reallocate(before, ranks_[node], edges_of(node), out);
        send(out);
      }
      pending_touched_.clear();
      ++times_;
    }
  }

  int64_t rank(Node n) const { return ranks_[n]; }
  uint64_t times() const { return times_; }

 private:
  std::span<const std::pair<Node, int64_t>> edges_of(Node src) const {
    if (overlay_index_[src] >= 0) return overlays_[overlay_index_[src]];
    return std::span<const std::pair<Node, int64_t>>(targets_).subspan(
        offsets_[src], offsets_[src + 1] - offsets_[src]);
  }
  Adjacency& overlay(Node src) {
    if (overlay_index_[src] < 0) {
      auto e = edges_of(src);
      overlay_index_[src] = static_cast<int64_t>(overlays_.size());
      overlays_.emplace_back(e.begin(), e.end());
    }
    return overlays_[overlay_index_[src]];
  }
  // Changes of the current time arrive at the next one.
  void send(const std::vector<RankChange>& out) {
    for (auto [dst, diff] : out) {
      if (diff == 0) continue;
      if (next_[dst] == 0) next_touched_.push_back(dst);
      next_[dst] += diff;
    }
  }

  uint64_t nodes_;
  std::vector<size_t> offsets_;
  std::vector<std::pair<Node, int64_t>> targets_;
  bool loaded_ = false;
  std::vector<int64_t> overlay_index_;
  std::vector<Adjacency> overlays_;
  std::vector<int64_t> ranks_, diffs_, pending_, next_;
  std::vector<Node> pending_touched_, next_touched_;
  uint64_t times_ = 0;
};

}  // namespace weir::graph
