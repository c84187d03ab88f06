#include "weir/observe/graph.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include <nlohmann/json.hpp>

namespace weir::observe {
namespace {

using nlohmann::json;

struct OperatorCounts {
  uint64_t activations = 0, busy_ns = 0;
};

std::map<uint64_t, OperatorCounts> operator_counts(const RuntimeStats* stats) {
  std::map<uint64_t, OperatorCounts> counts;
  if (stats == nullptr) return counts;
  for (const auto& op : stats->operators()) {
    OperatorCounts& c = counts[op.id];
    c.activations += op.activations;
    c.busy_ns += static_cast<uint64_t>(op.busy.count());
  }
  return counts;
}

std::map<uint64_t, RuntimeStats::ChannelSample> channel_counts(const RuntimeStats* stats) {
  std::map<uint64_t, RuntimeStats::ChannelSample> counts;
  if (stats == nullptr) return counts;
  for (const auto& c : stats->channels()) counts[c.id] = c;
  return counts;
}

const WorkerGraph* first(const std::vector<WorkerGraph>& graphs) {
  return graphs.empty() ? nullptr : &graphs.front();
}

std::string frontier_text(const PortFrontier& f) {
  return f.empty() ? "{}" : absl::StrCat("{", absl::StrJoin(f, ", "), "}");
}

// DOT ids and labels: quoted, with quotes and backslashes escaped.
std::string dot_quoted(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::string node_id(size_t dataflow, const std::vector<size_t>& scope, uint32_t node) {
  std::vector<size_t> address = scope;
  address.push_back(node);
  return absl::StrCat("d", dataflow, "_", absl::StrJoin(address, "_"));
}

}  // namespace

std::string graph_json(const std::vector<WorkerGraph>& graphs, size_t workers,
                       const RuntimeStats* stats) {
  const auto ops = operator_counts(stats);
  const auto channels = channel_counts(stats);
  json out;
  out["workers"] = workers;
  out["answered"] = json::array();
  for (const auto& g : graphs) out["answered"].push_back(g.worker);
  out["dataflows"] = json::array();
  if (const WorkerGraph* g = first(graphs)) {
    for (const auto& d : g->dataflows) {
      json dataflow{{"index", d.index}, {"name", d.name}};
      dataflow["operators"] = json::array();
      for (const auto& op : d.operators) {
        json o{{"id", op.id},       {"address", op.address}, {"name", op.name},
               {"scope", op.scope}, {"inputs", op.inputs},   {"outputs", op.outputs},
               {"activations", 0},  {"busy_ns", 0}};
        if (auto c = ops.find(op.id); c != ops.end()) {
          o["activations"] = c->second.activations;
          o["busy_ns"] = c->second.busy_ns;
        }
        dataflow["operators"].push_back(std::move(o));
      }
      dataflow["channels"] = json::array();
      for (const auto& ch : d.channels) {
        json c{{"id", ch.id},
               {"scope", ch.scope},
               {"source", {ch.source_node, ch.source_port}},
               {"target", {ch.target_node, ch.target_port}},
               {"pact", ch.pact},
               {"records", 0},
               {"records_remote", 0},
               {"bytes", 0},
               {"bytes_remote", 0}};
        if (auto s = channels.find(ch.id); s != channels.end()) {
          c["records"] = s->second.sent_local + s->second.sent_remote;
          c["records_remote"] = s->second.sent_remote;
          c["bytes"] = s->second.bytes_sent_local + s->second.bytes_sent_remote;
          c["bytes_remote"] = s->second.bytes_sent_remote;
        }
        dataflow["channels"].push_back(std::move(c));
      }
      out["dataflows"].push_back(std::move(dataflow));
    }
  }
  // Names come from outside (tables, shards) and need not be UTF-8: replaced, not thrown on.
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string graph_dot(const std::vector<WorkerGraph>& graphs, size_t workers,
                      const RuntimeStats* stats) {
  const auto channels = channel_counts(stats);
  std::string out = "digraph weir {\n  rankdir=LR;\n  node [shape=box, fontname=\"sans-serif\"];\n";
  absl::StrAppend(&out, "  // ", graphs.size(), " of ", workers, " workers answered\n");
  if (const WorkerGraph* g = first(graphs)) {
    for (const auto& d : g->dataflows) {
      absl::StrAppend(
          &out, "  subgraph ", dot_quoted(absl::StrCat("cluster_", d.index)),
          " {\n    label=", dot_quoted(absl::StrCat("dataflow ", d.index, ": ", d.name)), ";\n");
      for (const auto& op : d.operators) {
        std::vector<size_t> scope(op.address.begin(), op.address.end() - 1);
        std::string label = op.name;
        for (size_t i = 0; i < op.inputs.size(); ++i) {
          absl::StrAppend(&label, "\nin ", i, ": ", frontier_text(op.inputs[i]));
        }
        absl::StrAppend(
            &out, "    ",
            dot_quoted(node_id(d.index, scope, static_cast<uint32_t>(op.address.back()))),
            " [label=", dot_quoted(label), op.scope ? ", style=dashed" : "", "];\n");
      }
      for (const auto& ch : d.channels) {
        std::string label = ch.pact;
        if (auto s = channels.find(ch.id); s != channels.end()) {
          absl::StrAppend(&label, "\n", s->second.sent_local + s->second.sent_remote, " records");
        }
        // Node 0 is the scope's boundary: the nested scope's own node in its parent.
        auto end = [&](uint32_t node) {
          if (node != 0 || ch.scope.size() < 2) return node_id(d.index, ch.scope, node);
          std::vector<size_t> parent(ch.scope.begin(), ch.scope.end() - 1);
          return node_id(d.index, parent, static_cast<uint32_t>(ch.scope.back()));
        };
        absl::StrAppend(&out, "    ", dot_quoted(end(ch.source_node)), " -> ",
                        dot_quoted(end(ch.target_node)), " [label=", dot_quoted(label), "];\n");
      }
      absl::StrAppend(&out, "  }\n");
    }
  }
  out += "}\n";
  return out;
}

}  // namespace weir::observe
