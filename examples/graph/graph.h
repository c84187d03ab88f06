// Graphs for the examples, tests and benchmarks: a deterministic generator (the graph depends
// only on the node count, edge count and seed, never on the number of workers) and an edge-file
// reader.
//
// Thread safety: stateless functions.

#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace weir::graph {

using Node = uint64_t;
using Edge = std::pair<Node, Node>;

inline constexpr uint64_t kSeed = 0x5eed;

// splitmix64 of (seed, i): a stateless hash for generating the i-th value.
inline uint64_t mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ULL + i * 0xbf58476d1ce4e5b9ULL + 0x94d049bb133111ebULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The i-th edge of the generated graph.
inline Edge generated_edge(uint64_t nodes, uint64_t i, uint64_t seed = kSeed) {
  return {mix(seed, 2 * i) % nodes, mix(seed, 2 * i + 1) % nodes};
}

// The edges with index in [0, edges) that worker `index` of `peers` loads: every peers-th one.
inline std::vector<Edge> worker_edges(uint64_t nodes, uint64_t edges, size_t index, size_t peers,
                                      uint64_t seed = kSeed) {
  std::vector<Edge> result;
  for (uint64_t i = index; i < edges; i += peers) result.push_back(generated_edge(nodes, i, seed));
  return result;
}

// Reads "src dst" pairs of node ids, one per line (blank lines and lines starting with '#' are
// skipped). Errors name the file and line.
inline absl::StatusOr<std::vector<Edge>> read_edges(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError("cannot open edge file '" + path + "'");
  std::vector<Edge> edges;
  std::string line;
  for (size_t number = 1; std::getline(file, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    long long src = -1, dst = -1;
    std::string rest;
    if (!(in >> src >> dst) || src < 0 || dst < 0 || (in >> rest)) {
      return absl::InvalidArgumentError(absl::StrCat("edge file '", path, "' line ", number,
                                                     ": expected two non-negative node ids, got '",
                                                     line, "'"));
    }
    edges.emplace_back(static_cast<Node>(src), static_cast<Node>(dst));
  }
  return edges;
}

}  // namespace weir::graph
