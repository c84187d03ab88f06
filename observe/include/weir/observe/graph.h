// The running dataflows as JSON and as DOT (/graph): operators with the frontier at each port,
// channels with their pacts and record counts, from the workers' answers to a graph request
// (weir/worker/introspection.h) and the process's RuntimeStats.
//
// Every worker runs the same dataflows, so the shape and frontiers come from the lowest-indexed
// worker that answered (each worker's tracker sees the whole cluster's progress); activations,
// busy time and records are summed over this process's workers.
//
// JSON:
//   {"workers": 2, "answered": [0, 1],
//    "dataflows": [{"index": 0, "name": "ingest-0",
//      "operators": [{"id": 3, "address": [0, 2], "name": "Map", "scope": false,
//                     "inputs": [["17"]], "outputs": [["17"]],
//                     "activations": 120, "busy_ns": 5300000}],
//      "channels": [{"id": 4, "scope": [0], "source": [1, 0], "target": [2, 0],
//                    "pact": "exchange", "records": 2000, "records_remote": 0}]}]}
//
// Thread safety: functions of their arguments.

#pragma once

#include <string>
#include <vector>

#include "weir/observe/runtime_stats.h"
#include "weir/worker/introspection.h"

namespace weir::observe {

// `workers`: how many were asked. `stats` may be null (no counts).
std::string graph_json(const std::vector<WorkerGraph>& graphs, size_t workers,
                       const RuntimeStats* stats);

// The same as a Graphviz digraph: a cluster per dataflow, a node per operator labelled with its
// name and input frontiers, an edge per channel labelled with its pact and records.
std::string graph_dot(const std::vector<WorkerGraph>& graphs, size_t workers,
                      const RuntimeStats* stats);

}  // namespace weir::observe
