// Command lines of the graph examples: `NAME NODES EDGES [-w W]` or `NAME --edges FILE [-w W]`.

#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "graph.h"

#include "weir/worker/config.h"

namespace weir::graph {

struct GraphArgs {
  Config config;
  uint64_t nodes = 0, edges = 0;
  std::optional<std::string> edge_file;
  std::vector<Edge> file_edges;  // When reading a file.

  // The edges worker `index` loads.
  std::vector<Edge> edges_for(size_t index, size_t peers) const {
    if (!edge_file) return worker_edges(nodes, edges, index, peers);
    std::vector<Edge> mine;
    for (size_t i = index; i < file_edges.size(); i += peers) mine.push_back(file_edges[i]);
    return mine;
  }
  // The nodes worker `index` announces: its share of 0..NODES, or the endpoints of its edges.
  std::vector<Node> nodes_for(size_t index, size_t peers) const {
    std::vector<Node> mine;
    if (!edge_file) {
      for (Node n = index; n < nodes; n += peers) mine.push_back(n);
    } else {
      for (auto [a, b] : edges_for(index, peers)) {
        mine.push_back(a);
        mine.push_back(b);
      }
    }
    return mine;
  }
};

inline GraphArgs parse_graph_args(int argc, char** argv, const char* name, bool allow_file) {
  auto config = Config::from_args(argc, argv);
  if (!config.ok()) {
    std::fprintf(stderr, "%s: %s\n", name, std::string(config.status().message()).c_str());
    std::exit(2);
  }
  GraphArgs args;
  args.config = *config;
  auto usage = [&] {
    std::fprintf(stderr, "usage: %s NODES EDGES [-w W]%s\n", name, allow_file ? "\n       " : "");
    if (allow_file) std::fprintf(stderr, "%s --edges FILE [-w W]\n", name);
    std::exit(2);
  };
  if (allow_file && argc == 3 && std::string(argv[1]) == "--edges") {
    args.edge_file = argv[2];
    auto edges = read_edges(argv[2]);
    if (!edges.ok()) {
      std::fprintf(stderr, "%s: %s\n", name, std::string(edges.status().message()).c_str());
      std::exit(1);
    }
    args.file_edges = std::move(*edges);
    return args;
  }
  if (argc != 3) usage();
  char* end1 = nullptr;
  char* end2 = nullptr;
  args.nodes = std::strtoull(argv[1], &end1, 10);
  args.edges = std::strtoull(argv[2], &end2, 10);
  if (*end1 != '\0' || *end2 != '\0' || args.nodes == 0) usage();
  return args;
}

}  // namespace weir::graph
