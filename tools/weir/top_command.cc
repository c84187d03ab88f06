// `weir top --http ADDR`: what a running `weir ingest --http ADDR` is doing, in a terminal,
// refreshed every second: its exports (health, upper, lag, rates, snapshot progress), its workers
// (the operator each runs now, busy share), the busiest operators and persist's counters. Reads
// /status and /graph (docs/observability.md).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checks.h"
#include "commands.h"
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "weir/observe/http_server.h"

namespace weir::tools {
namespace {

using nlohmann::json;

struct TopFlags {
  std::string http;
  double interval = 1;
  bool once = false;
};

// One poll: /status and /graph, when it was taken.
struct Sample {
  std::chrono::steady_clock::time_point at;
  json status, graph;
};

absl::StatusOr<Sample> poll(const std::string& address) {
  Sample s;
  s.at = std::chrono::steady_clock::now();
  auto status = observe::http_get(address, "/status", std::chrono::seconds(5));
  if (!status.ok()) return status.status();
  auto graph = observe::http_get(address, "/graph", std::chrono::seconds(5));
  if (!graph.ok()) return graph.status();
  s.status = json::parse(*status, nullptr, /*allow_exceptions=*/false);
  s.graph = json::parse(*graph, nullptr, /*allow_exceptions=*/false);
  if (s.status.is_discarded() || !s.status.is_object()) {
    return absl::DataLossError(absl::StrCat("http://", address, "/status is not a JSON object"));
  }
  if (s.graph.is_discarded()) s.graph = json::object();
  return s;
}

std::string human(double n, const char* unit = "") {
  if (n >= 1e9) return absl::StrFormat("%.1fG%s", n / 1e9, unit);
  if (n >= 1e6) return absl::StrFormat("%.1fM%s", n / 1e6, unit);
  if (n >= 1e3) return absl::StrFormat("%.1fk%s", n / 1e3, unit);
  return absl::StrFormat("%.0f%s", n, unit);
}

// A field of a JSON object, or `fallback` when it is missing or of another type.
template <class T>
T get(const json& object, const char* key, T fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  if (it == object.end()) return fallback;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // A float out of T's range would convert to an undefined value.
    if (it->is_number_float()) {
      const double d = it->template get<double>();
      if (!(d >= static_cast<double>(std::numeric_limits<T>::min()) &&
            d < static_cast<double>(std::numeric_limits<T>::max()))) {
        return fallback;
      }
    }
  }
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
}

// The answers are another process's: any field may be missing or of another type. The value at
// `key`, or null when `object` is not an object or has no such key.
const json& field(const json& object, const char* key) {
  static const json null;
  if (!object.is_object()) return null;
  auto it = object.find(key);
  return it == object.end() ? null : *it;
}

// `value`'s elements, or none when it is not an array.
const json& elements(const json& value) {
  static const json empty = json::array();
  return value.is_array() ? value : empty;
}

const json* find_by(const json& array, const char* key, const json& value) {
  for (const auto& x : elements(array)) {
    if (x.is_object() && x.contains(key) && x[key] == value) return &x;
  }
  return nullptr;
}

std::string frame(const std::string& address, const Sample& now, const Sample* before) {
  const double dt =
      before ? std::max(std::chrono::duration<double>(now.at - before->at).count(), 1e-3) : 0;
  const json& s = now.status;
  std::string out = absl::StrFormat(
      "weir top  http://%s  %s %s  up %.0fs  %s  upstream %s  workers %d\n\n", address,
      get<std::string>(s, "command", "?"), get<std::string>(s, "source", "?"),
      get<double>(s, "uptime_seconds", 0), get<bool>(s, "ready", false) ? "ready" : "NOT READY",
      human(get<double>(s, "upstream_offset", 0)), get<int>(s, "workers_total", 0));

  absl::StrAppend(&out, absl::StrFormat("%-16s %-9s %12s %10s %8s %10s %10s %9s  %s\n", "EXPORT",
                                        "HEALTH", "UPPER", "LAG", "LAG s", "UPDATES/s", "BYTES/s",
                                        "APPENDS/s", "SNAPSHOT"));
  for (const auto& e : elements(field(s, "exports"))) {
    const std::string table = get<std::string>(e, "table", "?");
    double updates_rate = 0, bytes_rate = 0, appends_rate = 0;
    if (before) {
      if (const json* b = find_by(field(before->status, "exports"), "table", table)) {
        updates_rate = (get<double>(e, "updates", 0) - get<double>(*b, "updates", 0)) / dt;
        bytes_rate = (get<double>(e, "bytes", 0) - get<double>(*b, "bytes", 0)) / dt;
        appends_rate = (get<double>(e, "appends", 0) - get<double>(*b, "appends", 0)) / dt;
      }
    }
    const json& snap = field(e, "snapshot");
    const double total = get<double>(snap, "total", 0), done = get<double>(snap, "done", 0);
    std::string snapshot = "-";
    if (get<bool>(snap, "active", false) && total > 0) {
      const double share = std::clamp(done / total, 0.0, 1.0);  // NaN: 0.
      const int width = 20, filled = static_cast<int>((share >= 0 ? share : 0) * width);
      snapshot = absl::StrFormat("[%s%s] %3.0f%% %s/%s", std::string(filled, '#'),
                                 std::string(width - filled, '.'), 100 * done / total, human(done),
                                 human(total));
    } else if (total > 0) {
      snapshot = absl::StrCat("done (", human(total), " rows)");
    }
    absl::StrAppend(
        &out, absl::StrFormat("%-16s %-9s %12s %10s %8.2f %10s %10s %9s  %s\n", table,
                              get<std::string>(e, "health", "?"), human(get<double>(e, "upper", 0)),
                              human(get<double>(e, "lag_offsets", 0)),
                              get<double>(e, "lag_seconds", 0), human(updates_rate),
                              human(bytes_rate, "B"), human(appends_rate), snapshot));
    const std::string error = get<std::string>(e, "error", "");
    if (!error.empty()) absl::StrAppend(&out, "    error: ", error, "\n");
  }

  absl::StrAppend(
      &out, absl::StrFormat("\n%-7s %6s %-40s %10s\n", "WORKER", "BUSY", "RUNNING NOW", "FOR"));
  for (const auto& w : elements(field(s, "workers"))) {
    std::string busy = "-";
    if (before) {
      if (const json* b = find_by(field(before->status, "workers"), "worker", field(w, "worker"))) {
        const double parked =
            get<double>(w, "parked_seconds", 0) - get<double>(*b, "parked_seconds", 0);
        busy = absl::StrFormat("%.0f%%", std::clamp(100 * (1 - parked / dt), 0.0, 100.0));
      }
    }
    const std::string op = get<std::string>(
        w, "operator", get<bool>(w, "parked", false) ? "(parked)" : "(between operators)");
    absl::StrAppend(&out,
                    absl::StrFormat("%-7d %6s %-40s %9.1fms\n", get<int>(w, "worker", -1), busy,
                                    op.substr(0, 40), 1e3 * get<double>(w, "operator_seconds", 0)));
  }

  // The busiest operators over the interval, from /graph's counts (the newest dataflow).
  if (before) {
    std::map<uint64_t, std::pair<double, double>> earlier;  // id -> (busy_ns, activations)
    auto newest = [](const json& g) -> const json* {
      const json& dataflows = elements(field(g, "dataflows"));
      return dataflows.empty() ? nullptr : &dataflows.back();
    };
    if (const json* d = newest(before->graph)) {
      for (const auto& op : elements(field(*d, "operators"))) {
        earlier[get<uint64_t>(op, "id", 0)] = {get<double>(op, "busy_ns", 0),
                                               get<double>(op, "activations", 0)};
      }
    }
    std::vector<std::tuple<double, double, std::string>> ops;  // (busy share, runs/s, name)
    if (const json* d = newest(now.graph)) {
      for (const auto& op : elements(field(*d, "operators"))) {
        auto it = earlier.find(get<uint64_t>(op, "id", 0));
        if (it == earlier.end()) continue;
        const double busy = (get<double>(op, "busy_ns", 0) - it->second.first) / 1e9 / dt;
        const double runs = (get<double>(op, "activations", 0) - it->second.second) / dt;
        if (!std::isfinite(busy) || !std::isfinite(runs)) continue;  // Sorting needs an order.
        ops.emplace_back(busy, runs, get<std::string>(op, "name", "?"));
      }
    }
    std::sort(ops.rbegin(), ops.rend());
    absl::StrAppend(&out,
                    absl::StrFormat("\n%-44s %8s %10s\n", "BUSIEST OPERATORS", "CPU", "RUNS/s"));
    for (size_t i = 0; i < std::min<size_t>(ops.size(), 8); ++i) {
      const auto& [busy, runs, name] = ops[i];
      absl::StrAppend(&out, absl::StrFormat("%-44s %7.0f%% %10s\n", name.substr(0, 44), 100 * busy,
                                            human(runs)));
    }
  }

  const json& p = field(s, "persist");
  absl::StrAppend(&out, absl::StrFormat("\npersist  blob written %s  read %s  compare-and-sets %s "
                                        "(mismatched %s)  failures %s  maintenance %s\n",
                                        human(get<double>(p, "blob_bytes_written", 0), "B"),
                                        human(get<double>(p, "blob_bytes_read", 0), "B"),
                                        human(get<double>(p, "cas", 0)),
                                        human(get<double>(p, "cas_mismatches", 0)),
                                        human(get<double>(p, "failures", 0)),
                                        human(get<double>(p, "maintenance_completed", 0))));
  return out;
}

[[noreturn]] void fail(const absl::Status& status) {
  std::cerr << "weir top: " << status << "\n";
  throw CLI::RuntimeError(1);
}

void run(const TopFlags& flags) {
  auto address = observe::parse_http_address(flags.http);
  if (!address.ok()) fail(address.status());
  const auto interval = std::chrono::duration<double>(flags.interval);
  std::optional<Sample> before;
  const bool terminal = isatty(STDOUT_FILENO) && !flags.once;
  for (;;) {
    auto now = poll(*address);
    if (!now.ok()) {
      if (!before) fail(now.status());  // Never reached it: a mistyped address.
      std::printf("weir top: %s (retrying)\n", std::string(now.status().message()).c_str());
      std::fflush(stdout);
      std::this_thread::sleep_for(interval);
      continue;
    }
    if (flags.once && !before) {
      before = *std::move(now);
      std::this_thread::sleep_for(interval);
      continue;
    }
    std::string text;
    try {
      text = frame(*address, *now, before ? &*before : nullptr);
    } catch (const std::exception& e) {  // A bug here, not the server's: still no abort.
      text = absl::StrCat("weir top: cannot show what http://", *address, " answered: ", e.what(),
                          "\n");
    }
    if (terminal) std::fputs("\033[H\033[2J", stdout);
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    if (flags.once) return;
    before = *std::move(now);
    std::this_thread::sleep_for(interval);
  }
}

}  // namespace

void add_top_command(CLI::App& app) {
  auto flags = std::make_shared<TopFlags>();
  CLI::App* cmd = app.add_subcommand(
      "top", "watch a running `weir ingest --http ADDR`: exports, workers, operators, persist");
  cmd->add_option("--http", flags->http,
                  "the address given to `weir ingest --http`: PORT (loopback) or HOST:PORT")
      ->required();
  cmd->add_option("--interval", flags->interval, "seconds between refreshes")
      ->check(number_in(0.1, 3600))  // CLI::Range lets "nan" through.
      ->capture_default_str();
  cmd->add_flag("--once", flags->once,
                "print one frame (rates over one interval) and exit, for scripts");
  cmd->footer(
      "Example:\n  weir ingest --source loadgen:auction --persist build/demo --http 9090 &\n"
      "  weir top --http 9090");
  cmd->callback([flags] { run(*flags); });
}

}  // namespace weir::tools
