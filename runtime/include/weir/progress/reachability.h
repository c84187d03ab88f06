// Reachability: from pointstamp counts and the graph's path summaries, maintain for every location
// the frontier of times that may still reach it ("implications").
//
// A ReachabilityBuilder collects nodes (with their input→output summaries) and edges; `build`
// checks that every cycle strictly advances time and returns a Tracker. The Tracker takes
// pointstamp changes at sources (capabilities) and targets (messages in flight), and
// `propagate_all` pushes their consequences through the graph in time order, reacting only to
// discrete frontier changes. Changes to the implications at targets are collected for the scope
// to deliver to operator inputs; changes projected onto the scope's outputs (node 0's targets)
// are collected for the parent scope.
//
// Thread safety: worker-local.

#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"

#include "weir/check.h"
#include "weir/progress/antichain.h"
#include "weir/progress/change_batch.h"
#include "weir/progress/location.h"
#include "weir/progress/timestamp.h"

namespace weir {

// For every (input, output) pair of an operator: the summaries of paths from the input to the
// output. An empty antichain means the input does not reach the output.
template <Timestamp T>
using Connectivity = std::vector<std::vector<Antichain<SummaryOf<T>>>>;

// Connectivity where every input reaches every output unchanged (the default for operators).
template <Timestamp T>
Connectivity<T> identity_connectivity(size_t inputs, size_t outputs) {
  return Connectivity<T>(inputs, std::vector<Antichain<SummaryOf<T>>>(
                                     outputs, Antichain<SummaryOf<T>>{identity_summary<T>()}));
}

template <Timestamp T>
class Tracker;

template <Timestamp T>
class ReachabilityBuilder {
 public:
  using Summary = SummaryOf<T>;

  // Adds node `index` (indices are dense; node 0 is the scope itself) with its summaries.
  void add_node(uint32_t index, std::string name, uint32_t inputs, uint32_t outputs,
                Connectivity<T> summary) {
    if (nodes_.size() <= index) nodes_.resize(index + 1);
    WEIR_CHECK(summary.size() == inputs) << "connectivity of " << name << " has " << summary.size()
                                         << " rows for " << inputs << " inputs";
    for (auto& row : summary) {
      WEIR_CHECK(row.size() == outputs) << "connectivity of " << name << " has a row of "
                                        << row.size() << " for " << outputs << " outputs";
    }
    nodes_[index] = Node{std::move(name), inputs, outputs, std::move(summary), {}};
    nodes_[index].edges.resize(outputs);
  }

  void add_edge(Source source, Target target) {
    WEIR_CHECK(source.node < nodes_.size() && source.port < nodes_[source.node].outputs)
        << "edge from unknown source " << Location(source);
    nodes_[source.node].edges[source.port].push_back(target);
  }

  // Error if some cycle does not strictly advance time: propagation around it would never end.
  absl::Status check_cycles() const;

  // Builds the tracker. REQUIRES: check_cycles() is OK.
  Tracker<T> build() const;

 private:
  friend class Tracker<T>;
  struct Node {
    std::string name;
    uint32_t inputs = 0;
    uint32_t outputs = 0;
    Connectivity<T> summary;                 // [input][output]
    std::vector<std::vector<Target>> edges;  // [output] -> targets
  };
  std::vector<Node> nodes_;
};

template <Timestamp T>
class Tracker {
 public:
  using Summary = SummaryOf<T>;

  // Pointstamp changes: a capability at a source, or messages in flight to a target.
  void update_source(Source source, const T& time, int64_t diff) {
    source_changes_.update({source, time}, diff);
  }
  void update_target(Target target, const T& time, int64_t diff) {
    target_changes_.update({target, time}, diff);
  }

  // Applies pending pointstamp changes and propagates their consequences.
  void propagate_all();

  // Implication changes at targets (operator inputs) since the last drain.
  template <class F>
  void drain_target_changes(F&& f) {
    for (const auto& [target, time, diff] : pushed_targets_) f(target, time, diff);
    pushed_targets_.clear();
  }
  bool has_target_changes() const { return !pushed_targets_.empty(); }

  // Changes of the pointstamps' frontiers (per location, positive counts only) projected onto
  // scope output `output` through the summaries: what holds back the scope's output frontier.
  ChangeBatch<T>& output_changes(uint32_t output) { return output_changes_[output]; }
  size_t scope_outputs() const { return output_changes_.size(); }

  // Summaries from scope input `input` to scope output `output` (node 0's source to its target).
  const Antichain<Summary>& scope_summary(uint32_t input, uint32_t output) const {
    return port(Source{0, input}).output_summaries[output];
  }

  // True if `location` exists in this graph.
  bool has_location(Location location) const {
    // In 64 bits and as a difference: node UINT32_MAX must not wrap to 0, nor base + port
    // onto another node's location.
    if (size_t{location.node} + 1 >= target_base_.size()) return false;
    const auto& base = location.is_source ? source_base_ : target_base_;
    return location.port < base[location.node + 1] - base[location.node];
  }

  // Summaries from `location` to each scope output.
  const std::vector<Antichain<Summary>>& output_summaries(Location location) const {
    return location.is_source ? port(location.source()).output_summaries
                              : port(location.target()).output_summaries;
  }

  // True while some location holds a nonzero count (a capability or a message in flight).
  bool tracking_anything() const { return nonempty_locations_ > 0; }

  // The frontier of times that may still arrive at `target`.
  std::span<const T> implications(Target target) const {
    return port(target).implications.frontier();
  }
  std::span<const T> source_implications(Source source) const {
    return port(source).implications.frontier();
  }
  // Pointstamps for diagnostics: every (location, time, count) with nonzero count.
  std::vector<std::tuple<Location, T, int64_t>> pointstamps();

 private:
  friend class ReachabilityBuilder<T>;
  // One location. All of a tracker's locations live in two flat arrays (targets, sources) in
  // node order, so propagating along a chain of operators walks memory forwards.
  struct PortInfo {
    MutableAntichain<T> pointstamps;
    MutableAntichain<T> implications;
    // A target: the sources of its operator it reaches, with the summaries (flat indices).
    absl::InlinedVector<std::pair<uint32_t, Antichain<Summary>>, 1> reaches;
    // A source: the targets its edges lead to (flat indices).
    absl::InlinedVector<uint32_t, 1> edges;
    std::vector<Antichain<Summary>> output_summaries;  // [scope output]
    bool nonempty = false;
  };
  PortInfo& port(Target t) { return targets_[target_base_[t.node] + t.port]; }
  PortInfo& port(Source s) { return sources_[source_base_[s.node] + s.port]; }
  const PortInfo& port(Target t) const { return targets_[target_base_[t.node] + t.port]; }
  const PortInfo& port(Source s) const { return sources_[source_base_[s.node] + s.port]; }
  struct WorkItem {
    T time;
    Location location;
    int64_t diff;
    // Min-heap order: earliest time first.
    bool operator<(const WorkItem& o) const {
      return std::tie(o.time, o.location) < std::tie(time, location);
    }
  };

  void push_work(const T& time, Location location, int64_t diff) {
    worklist_.push_back({time, location, diff});
    std::push_heap(worklist_.begin(), worklist_.end());
  }
  void apply_pointstamp(PortInfo& port, Location location, const T& time, int64_t diff);

  std::vector<PortInfo> targets_;      // [target_base_[node] + port]
  std::vector<PortInfo> sources_;      // [source_base_[node] + port]
  std::vector<uint32_t> target_base_;  // [node], and one past the last
  std::vector<uint32_t> source_base_;
  std::vector<Target> target_of_;  // Flat index -> location.
  std::vector<Source> source_of_;
  ChangeBatch<std::pair<Source, T>> source_changes_;
  ChangeBatch<std::pair<Target, T>> target_changes_;
  std::vector<WorkItem> worklist_;
  std::vector<std::tuple<Target, T, int64_t>> pushed_targets_;
  std::vector<ChangeBatch<T>> output_changes_;
  int64_t nonempty_locations_ = 0;
};

// ---- implementation ----

template <Timestamp T>
absl::Status ReachabilityBuilder<T>::check_cycles() const {
  // Locations reachable without advancing time form a graph; it must be acyclic.
  // Index: sources first ([node][port] flattened), then targets.
  std::vector<size_t> source_base(nodes_.size() + 1, 0), target_base(nodes_.size() + 1, 0);
  for (size_t n = 0; n < nodes_.size(); ++n) {
    source_base[n + 1] = source_base[n] + nodes_[n].outputs;
    target_base[n + 1] = target_base[n] + nodes_[n].inputs;
  }
  const size_t num_sources = source_base.back();
  const size_t total = num_sources + target_base.back();
  auto source_index = [&](Source s) { return source_base[s.node] + s.port; };
  auto target_index = [&](Target t) { return num_sources + target_base[t.node] + t.port; };
  std::vector<std::vector<size_t>> next(total);
  std::vector<Location> location_of(total);
  const Summary identity = identity_summary<T>();
  for (uint32_t n = 0; n < nodes_.size(); ++n) {
    const Node& node = nodes_[n];
    for (uint32_t o = 0; o < node.outputs; ++o) {
      location_of[source_index({n, o})] = Source{n, o};
      for (const Target& t : node.edges[o]) next[source_index({n, o})].push_back(target_index(t));
    }
    for (uint32_t i = 0; i < node.inputs; ++i) {
      location_of[target_index({n, i})] = Target{n, i};
      if (n == 0) continue;  // The scope boundary: paths leave the scope here.
      for (uint32_t o = 0; o < node.outputs; ++o) {
        for (const Summary& s : node.summary[i][o]) {
          if (time_le(s, identity)) {
            next[target_index({n, i})].push_back(source_index({n, o}));
            break;
          }
        }
      }
    }
  }
  // Iterative DFS with colors: 0 unvisited, 1 on stack, 2 done.
  std::vector<uint8_t> color(total, 0);
  std::vector<size_t> parent(total, SIZE_MAX);
  std::vector<std::pair<size_t, size_t>> stack;
  for (size_t root = 0; root < total; ++root) {
    if (color[root] != 0) continue;
    stack.emplace_back(root, 0);
    color[root] = 1;
    while (!stack.empty()) {
      auto& [v, edge] = stack.back();
      if (edge < next[v].size()) {
        size_t w = next[v][edge++];
        if (color[w] == 1) {
          // Found a cycle w -> ... -> v -> w: name its operators.
          std::ostringstream names;
          std::vector<uint32_t> cycle_nodes;
          for (size_t u = v;; u = parent[u]) {
            if (cycle_nodes.empty() || cycle_nodes.back() != location_of[u].node) {
              cycle_nodes.push_back(location_of[u].node);
            }
            if (u == w) break;
          }
          std::reverse(cycle_nodes.begin(), cycle_nodes.end());
          std::vector<uint32_t> seen;
          for (uint32_t node_index : cycle_nodes) {
            if (std::find(seen.begin(), seen.end(), node_index) != seen.end()) continue;
            names << (seen.empty() ? "" : " -> ") << nodes_[node_index].name;
            seen.push_back(node_index);
          }
          return absl::InvalidArgumentError(
              "dataflow graph has a cycle that does not advance time (" + names.str() +
              "): every cycle must pass a feedback edge with a summary that strictly increases "
              "the timestamp");
        }
        if (color[w] == 0) {
          color[w] = 1;
          parent[w] = v;
          stack.emplace_back(w, 0);
        }
      } else {
        color[v] = 2;
        stack.pop_back();
      }
    }
  }
  return absl::OkStatus();
}

template <Timestamp T>
Tracker<T> ReachabilityBuilder<T>::build() const {
  Tracker<T> tracker;
  const size_t n = nodes_.size();
  const uint32_t scope_outputs = n > 0 ? nodes_[0].inputs : 0;
  tracker.target_base_.assign(n + 1, 0);
  tracker.source_base_.assign(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    tracker.target_base_[i + 1] = tracker.target_base_[i] + nodes_[i].inputs;
    tracker.source_base_[i + 1] = tracker.source_base_[i] + nodes_[i].outputs;
  }
  tracker.targets_.resize(tracker.target_base_[n]);
  tracker.sources_.resize(tracker.source_base_[n]);
  for (uint32_t i = 0; i < n; ++i) {
    const Node& node = nodes_[i];
    for (uint32_t in = 0; in < node.inputs; ++in) {
      tracker.target_of_.push_back(Target{i, in});
      auto& p = tracker.port(Target{i, in});
      p.output_summaries.resize(scope_outputs);
      // The scope boundary has no internal connectivity inside its own tracker.
      if (i == 0) continue;
      for (uint32_t o = 0; o < node.outputs; ++o) {
        if (!node.summary[in][o].empty()) {
          p.reaches.emplace_back(tracker.source_base_[i] + o, node.summary[in][o]);
        }
      }
    }
    for (uint32_t o = 0; o < node.outputs; ++o) {
      tracker.source_of_.push_back(Source{i, o});
      auto& p = tracker.port(Source{i, o});
      p.output_summaries.resize(scope_outputs);
      for (const Target& t : node.edges[o])
        p.edges.push_back(tracker.target_base_[t.node] + t.port);
    }
  }
  tracker.output_changes_.resize(scope_outputs);

  // Summaries from every location to every scope output: a backwards fixpoint from node 0's
  // targets. It terminates because every cycle strictly advances time (summaries along a cycle
  // are dominated by the summary that entered it).
  std::vector<std::tuple<Location, uint32_t, Summary>> work;
  for (uint32_t o = 0; o < scope_outputs; ++o)
    work.push_back({Target{0, o}, o, identity_summary<T>()});
  // Edges into each target, for walking backwards.
  std::vector<std::vector<std::vector<Source>>> into(n);
  for (uint32_t i = 0; i < n; ++i) into[i].resize(nodes_[i].inputs);
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t o = 0; o < nodes_[i].outputs; ++o) {
      for (const Target& t : nodes_[i].edges[o]) into[t.node][t.port].push_back(Source{i, o});
    }
  }
  while (!work.empty()) {
    auto [location, output, summary] = work.back();
    work.pop_back();
    auto& port =
        location.is_source ? tracker.port(location.source()) : tracker.port(location.target());
    if (!port.output_summaries[output].insert(summary)) continue;
    if (location.is_source) {
      const Node& node = nodes_[location.node];
      if (location.node == 0) continue;  // A scope input: the path leaves the scope.
      for (uint32_t i = 0; i < node.inputs; ++i) {
        for (const Summary& s : node.summary[i][location.port]) {
          if (auto composed = s.followed_by(summary)) {
            work.push_back({Target{location.node, i}, output, *composed});
          }
        }
      }
    } else {
      for (const Source& s : into[location.node][location.port])
        work.push_back({s, output, summary});
    }
  }
  return tracker;
}

template <Timestamp T>
void Tracker<T>::apply_pointstamp(PortInfo& port, Location location, const T& time, int64_t diff) {
  // The scope's own inputs (node 0's sources) are not projected: the parent accounts for them
  // through the scope's summaries.
  const bool project = !(location.is_source && location.node == 0);
  for (const auto& [t, d] : port.pointstamps.update(time, diff)) {
    for (uint32_t o = 0; project && o < port.output_summaries.size(); ++o) {
      for (const Summary& s : port.output_summaries[o]) {
        if (auto out = s.results_in(t)) output_changes_[o].update(*out, d);
      }
    }
    push_work(t, location, d);
  }
  const bool nonempty = !port.pointstamps.has_no_counts();
  if (nonempty != port.nonempty) {
    port.nonempty = nonempty;
    nonempty_locations_ += nonempty ? 1 : -1;
  }
}

template <Timestamp T>
void Tracker<T>::propagate_all() {
  for (const auto& [key, diff] : target_changes_.iter())
    apply_pointstamp(port(key.first), key.first, key.second, diff);
  target_changes_.clear();
  for (const auto& [key, diff] : source_changes_.iter())
    apply_pointstamp(port(key.first), key.first, key.second, diff);
  source_changes_.clear();

  while (!worklist_.empty()) {
    std::pop_heap(worklist_.begin(), worklist_.end());
    WorkItem item = std::move(worklist_.back());
    worklist_.pop_back();
    // Merge every pending change at the same (time, location).
    while (!worklist_.empty() && worklist_.front().time == item.time &&
           worklist_.front().location == item.location) {
      item.diff += worklist_.front().diff;
      std::pop_heap(worklist_.begin(), worklist_.end());
      worklist_.pop_back();
    }
    if (item.diff == 0) continue;
    const Location loc = item.location;
    if (!loc.is_source) {
      PortInfo& p = port(loc.target());
      for (const auto& [t, d] : p.implications.update(item.time, item.diff)) {
        pushed_targets_.emplace_back(loc.target(), t, d);
        for (const auto& [source, summaries] : p.reaches) {
          for (const Summary& s : summaries) {
            if (auto out = s.results_in(t)) push_work(*out, source_of_[source], d);
          }
        }
      }
    } else {
      PortInfo& p = port(loc.source());
      for (const auto& [t, d] : p.implications.update(item.time, item.diff)) {
        for (uint32_t target : p.edges) push_work(t, target_of_[target], d);
      }
    }
  }
}

template <Timestamp T>
std::vector<std::tuple<Location, T, int64_t>> Tracker<T>::pointstamps() {
  std::vector<std::tuple<Location, T, int64_t>> result;
  for (uint32_t i = 0; i < targets_.size(); ++i) {
    for (const auto& [t, c] : targets_[i].pointstamps.counts())
      result.emplace_back(target_of_[i], t, c);
  }
  for (uint32_t i = 0; i < sources_.size(); ++i) {
    for (const auto& [t, c] : sources_[i].pointstamps.counts())
      result.emplace_back(source_of_[i], t, c);
  }
  return result;
}

// Compiled once, in weir::runtime, for the common timestamps (compile time of every user file).
extern template class ReachabilityBuilder<uint64_t>;
extern template class Tracker<uint64_t>;
extern template class ReachabilityBuilder<Product<uint64_t, uint64_t>>;
extern template class Tracker<Product<uint64_t, uint64_t>>;

}  // namespace weir
