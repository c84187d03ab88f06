// Introspection: the shape of every worker's dataflows, and the frontier at each port, on request
// from another thread (an HTTP endpoint, a debugger).
//
//   uint64_t request = weir::request_graphs();
//   std::vector<weir::WorkerGraph> graphs =
//       weir::collect_graphs(request, workers, std::chrono::milliseconds(1500));
//
// A worker answers at its next step (an idle worker steps at least once a second), so a request
// costs the workers nothing until one is made, and a worker stuck in an operator simply does not
// answer: collect_graphs returns what arrived in time (the missing worker is the answer).
//
// Thread safety: every function here may be called from any thread. The graphs are copies.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace weir {

// One port's frontier: its elements, each written as the timestamp type writes itself to an
// ostream ("(a time)" for a type that cannot), in the order the tracker holds them.
using PortFrontier = std::vector<std::string>;

struct OperatorGraph {
  uint64_t id = 0;              // As in the worker's logging events (OperatorBuilt).
  std::vector<size_t> address;  // Scope path, then the operator's index in its scope.
  std::string name;
  // The frontier at each input (what may still arrive) and of each output's capabilities and
  // what is in flight from it (what it may still send).
  std::vector<PortFrontier> inputs, outputs;
  bool scope = false;  // A nested scope: its operators follow, with longer addresses.
};

struct ChannelGraph {
  uint64_t id = 0;            // As in the logging events' Messages.channel.
  std::vector<size_t> scope;  // The path of the scope that holds both ends.
  // Node indices within that scope (0: the scope's own boundary) and ports.
  uint32_t source_node = 0, source_port = 0, target_node = 0, target_port = 0;
  std::string pact;  // "pipeline", "exchange" or "broadcast".
};

struct DataflowGraph {
  size_t index = 0;
  std::string name;
  std::vector<OperatorGraph> operators;
  std::vector<ChannelGraph> channels;
};

struct WorkerGraph {
  size_t worker = 0;     // Global index.
  uint64_t request = 0;  // The request this answers.
  std::vector<DataflowGraph> dataflows;
};

// Asks every worker of this process for its graph; returns the request's number.
uint64_t request_graphs();

// Waits until `workers` workers have answered request `request` (or a later one), or `timeout`;
// returns the answers that arrived, ordered by worker. Answers to earlier requests are not
// returned: a worker that did not answer in time is missing.
std::vector<WorkerGraph> collect_graphs(uint64_t request, size_t workers,
                                        std::chrono::milliseconds timeout);

namespace internal {
// The latest request; a worker compares it with the last it answered (one relaxed load a step).
uint64_t graph_requests();
// A worker's answer.
void publish_graph(WorkerGraph graph);
}  // namespace internal

}  // namespace weir
