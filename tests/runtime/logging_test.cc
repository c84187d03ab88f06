// Event logging: a sink per worker sees a small dataflow's events in a sound order and with the
// right counts; WEIR_LOG writes them as JSON lines; a bad WEIR_LOG path is an error.

#include "weir/worker/logging.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "testing/harness.h"
#include "testing/loopback_hub.h"
#include <gtest/gtest.h>

#include "weir/weir.h"

namespace weir {
namespace {

constexpr uint64_t kRecords = 1000;  // Per worker and round.
constexpr uint64_t kRounds = 3;

// A copy of an event (the views an event holds die with the call).
struct Captured {
  size_t worker = 0;
  int64_t time_ns = 0;
  std::string kind;
  uint64_t id = 0;
  std::vector<size_t> address;
  std::string name;
  int64_t duration_ns = 0;
  Messages messages;
  ProgressBatch progress;
  size_t index = 0;
  std::pair<size_t, size_t> source, target;  // channel_built: [node, port].
};

Captured capture(const LogEvent& event) {
  Captured c;
  c.worker = event.worker;
  c.time_ns = event.time.count();
  c.kind = std::string(kind_name(event.data));
  std::visit(
      [&](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, OperatorBuilt>) {
          c.id = e.id;
          c.address.assign(e.address.begin(), e.address.end());
          c.name = std::string(e.name);
        } else if constexpr (std::is_same_v<E, OperatorDropped>) {
          c.id = e.id;
          c.address.assign(e.address.begin(), e.address.end());
        } else if constexpr (std::is_same_v<E, ScheduleStart>) {
          c.id = e.id;
        } else if constexpr (std::is_same_v<E, ScheduleStop>) {
          c.id = e.id;
          c.duration_ns = e.duration.count();
        } else if constexpr (std::is_same_v<E, Messages>) {
          c.messages = e;
        } else if constexpr (std::is_same_v<E, ProgressBatch>) {
          c.progress = e;
        } else if constexpr (std::is_same_v<E, DataflowCreated>) {
          c.index = e.index;
          c.name = std::string(e.name);
        } else if constexpr (std::is_same_v<E, ChannelBuilt>) {
          c.id = e.id;
          c.address.assign(e.scope.begin(), e.scope.end());
          c.name = std::string(e.pact);
          c.source = {e.source, e.source_port};
          c.target = {e.target, e.target_port};
        } else if constexpr (std::is_same_v<E, ChannelDropped>) {
          c.id = e.id;
        } else if constexpr (std::is_same_v<E, DataflowCompleted> ||
                             std::is_same_v<E, DataflowDropped>) {
          c.index = e.index;
        }
      },
      event.data);
  return c;
}

// Every worker sends 0..kRecords-1 in each of kRounds rounds; records are exchanged by value
// into a region (map +1, exchanged again) and counted.
uint64_t run_dataflow(Worker& worker) {
  uint64_t seen = 0;
  ProbeHandle<uint64_t> probe;
  auto input = worker.dataflow_named<uint64_t>("Logged", [&](Scope<uint64_t>& scope) {
    auto [handle, stream] = new_input<uint64_t>(scope);
    auto exchanged = stream | exchange([](const uint64_t& x) { return x; });
    scope.region([&](auto& inner) {
      return inner.leave(inner.enter(exchanged) | map([](uint64_t x) { return x + 1; }) |
                         exchange([](const uint64_t& x) { return x / 7; }));
    }) | inspect_batch([&seen](const uint64_t&, const std::vector<uint64_t>& b) {
      seen += b.size();
    }) | probe_with(probe);
    return std::move(handle);
  });
  for (uint64_t round = 0; round < kRounds; ++round) {
    for (uint64_t x = 0; x < kRecords; ++x) input.send(x);
    input.advance_to(round + 1);
    testing::step_until(worker, [&] { return !probe.less_than(round + 1); });
  }
  input.close();
  return seen;
}

class LoggingTest : public ::testing::TestWithParam<size_t> {};

TEST_P(LoggingTest, SinkSeesOrderedAndCountedEvents) {
  const size_t workers = GetParam();
  std::vector<std::vector<Captured>> logs(workers);
  auto results = testing::run_workers(workers, [&](Worker& worker) {
    auto& log = logs[worker.index()];
    worker.log_to([&log](const LogEvent& event) { log.push_back(capture(event)); });
    return run_dataflow(worker);
  });
  ASSERT_TRUE(results.ok()) << results.status();
  uint64_t seen = 0;
  for (uint64_t n : *results) seen += n;
  ASSERT_EQ(seen, workers * kRecords * kRounds);

  // Records per (channel, source, target), sent and received, over all workers.
  std::map<std::tuple<uint64_t, size_t, size_t>, size_t> sent, received;
  size_t progress_sent = 0, progress_received = 0;
  for (size_t w = 0; w < workers; ++w) {
    const auto& log = logs[w];
    SCOPED_TRACE("worker " + std::to_string(w));
    ASSERT_FALSE(log.empty());
    EXPECT_EQ(log.front().kind, "dataflow_created");
    EXPECT_EQ(log.front().name, "Logged");
    EXPECT_EQ(log.back().kind, "dataflow_completed");
    EXPECT_EQ(log.back().index, 0u);

    std::map<uint64_t, std::vector<size_t>> built;  // id -> address
    std::set<uint64_t> dropped;
    std::vector<uint64_t> open;  // Schedules started and not yet stopped, innermost last.
    std::map<uint64_t, size_t> schedules;
    std::map<uint64_t, Captured> channels;  // Built: id -> event.
    std::set<uint64_t> channels_dropped;
    int64_t last_time = 0;
    bool nested_inside_region = false;
    for (const Captured& e : log) {
      EXPECT_EQ(e.worker, w);
      EXPECT_GE(e.time_ns, last_time) << e.kind;
      last_time = e.time_ns;
      if (e.kind == "operator_built") {
        EXPECT_TRUE(built.emplace(e.id, e.address).second) << "built twice: " << e.id;
        ASSERT_GE(e.address.size(), 2u);
        EXPECT_EQ(e.address[0], 0u);  // Dataflow 0.
      } else if (e.kind == "schedule_start") {
        EXPECT_TRUE(built.count(e.id)) << "scheduled before built: " << e.id;
        EXPECT_FALSE(dropped.count(e.id));
        // An operator inside the region runs inside the region's schedule.
        if (!open.empty() && built[e.id].size() == 3) {
          const auto& outer = built[open.back()];
          nested_inside_region |= outer.size() == 2 && outer[1] == built[e.id][1];
        }
        open.push_back(e.id);
        ++schedules[e.id];
      } else if (e.kind == "schedule_stop") {
        ASSERT_FALSE(open.empty()) << "stop without start";
        EXPECT_EQ(open.back(), e.id);
        open.pop_back();
        EXPECT_GE(e.duration_ns, 0);
      } else if (e.kind == "operator_dropped") {
        EXPECT_TRUE(built.count(e.id));
        EXPECT_EQ(built[e.id], e.address);
        EXPECT_TRUE(dropped.insert(e.id).second);
        EXPECT_TRUE(open.empty());
      } else if (e.kind == "channel_built") {
        EXPECT_TRUE(channels.emplace(e.id, e).second) << "channel built twice: " << e.id;
        ASSERT_FALSE(e.address.empty());
        EXPECT_EQ(e.address[0], 0u);  // Dataflow 0.
        EXPECT_TRUE(e.name == "pipeline" || e.name == "exchange") << e.name;
        // Its ends are operators of its scope (or the scope's boundary, node 0).
        for (const size_t node : {e.source.first, e.target.first}) {
          if (node == 0) continue;
          std::vector<size_t> address = e.address;
          address.push_back(node);
          bool found = false;
          for (const auto& [id, a] : built) found |= a == address;
          EXPECT_TRUE(found) << "channel " << e.id << ": no operator at node " << node;
        }
      } else if (e.kind == "channel_dropped") {
        EXPECT_TRUE(channels_dropped.insert(e.id).second) << "channel dropped twice: " << e.id;
      } else if (e.kind == "messages") {
        const Messages& m = e.messages;
        EXPECT_LT(m.source, workers);
        EXPECT_LT(m.target, workers);
        EXPECT_GT(m.records, 0u);
        // One process: the records' own size (uint64_t).
        EXPECT_EQ(m.bytes, m.records * sizeof(uint64_t));
        EXPECT_TRUE(channels.count(m.channel)) << "messages on a channel not built: " << m.channel;
        EXPECT_FALSE(channels_dropped.count(m.channel));
        if (m.is_send) {
          EXPECT_EQ(m.source, w);
          sent[{m.channel, m.source, m.target}] += m.records;
        } else {
          EXPECT_EQ(m.target, w);
          received[{m.channel, m.source, m.target}] += m.records;
        }
      } else if (e.kind == "progress") {
        EXPECT_LT(e.progress.source, workers);
        if (e.progress.is_send) {
          EXPECT_EQ(e.progress.source, w);
          ++progress_sent;
        } else {
          ++progress_received;
        }
      }
    }
    EXPECT_TRUE(open.empty()) << "a schedule start without its stop";
    EXPECT_TRUE(nested_inside_region);
    // Every operator was built, run at least once, and dropped before the dataflow completed.
    // input, exchange, region, inspect, probe; map and exchange in the region.
    EXPECT_GE(built.size(), 7u);
    for (const auto& [id, address] : built) {
      EXPECT_TRUE(dropped.count(id)) << "never dropped: " << id;
      EXPECT_GT(schedules[id], 0u) << "never scheduled: " << id;
    }
    // Input -> exchange -> region (enter -> map -> exchange -> leave) -> inspect -> probe, and
    // each is dropped; so is the dataflow's progress channel (never built: the region's progress
    // rides on it).
    EXPECT_GE(channels.size(), 5u);
    for (const auto& [id, c] : channels) {
      EXPECT_TRUE(channels_dropped.count(id)) << "channel never dropped: " << id;
    }
    EXPECT_EQ(channels_dropped.size(), channels.size() + 1);
  }
  // Every record sent on a channel was received by its target, once.
  EXPECT_EQ(sent, received);
  size_t records = 0;
  for (const auto& [key, n] : sent) records += n;
  // Input -> exchange, enter -> map, map -> exchange, leave -> inspect, inspect -> probe: each
  // carries every record once (the input's records are those sent).
  EXPECT_EQ(records % (workers * kRecords * kRounds), 0u);
  EXPECT_GE(records, 3 * workers * kRecords * kRounds);
  // Progress batches go to every worker.
  EXPECT_GT(progress_sent, 0u);
  EXPECT_GT(progress_received, 0u);
  EXPECT_LE(progress_received, workers * progress_sent);
}

INSTANTIATE_TEST_SUITE_P(Workers, LoggingTest, ::testing::Values(1, 2));

TEST(LoggingTest, EmptySinkTurnsLoggingOff) {
  size_t events = 0;
  auto results = testing::run_workers(1, [&](Worker& worker) {
    worker.log_to([&events](const LogEvent&) { ++events; });
    EXPECT_TRUE(worker.logger().active());
    worker.log_to(nullptr);
    EXPECT_FALSE(worker.logger().active());
    return run_dataflow(worker);
  });
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ(events, 0u);
}

// A JSON line's fields, as their raw text (strings unescaped). Only what the log writes: one
// flat object of numbers, strings, booleans, null and arrays of numbers.
std::optional<std::map<std::string, std::string>> parse_line(std::string_view in) {
  std::map<std::string, std::string> fields;
  size_t i = 0;
  auto peek = [&] { return i < in.size() ? in[i] : '\0'; };
  auto string = [&]() -> std::optional<std::string> {
    if (peek() != '"') return std::nullopt;
    std::string out;
    for (++i; i < in.size() && in[i] != '"'; ++i) {
      if (in[i] == '\\') {
        if (++i >= in.size()) return std::nullopt;
        switch (in[i]) {
          case 'n':
            out.push_back('\n');
            break;
          case 't':
            out.push_back('\t');
            break;
          case 'r':
            out.push_back('\r');
            break;
          case 'u':
            if (i + 4 >= in.size()) return std::nullopt;
            out.push_back(
                static_cast<char>(std::stoi(std::string(in.substr(i + 1, 4)), nullptr, 16)));
            i += 4;
            break;
          default:
            out.push_back(in[i]);
        }
      } else {
        out.push_back(in[i]);
      }
    }
    if (i >= in.size()) return std::nullopt;
    ++i;
    return out;
  };
  if (peek() != '{') return std::nullopt;
  ++i;
  while (true) {
    auto key = string();
    if (!key || peek() != ':') return std::nullopt;
    ++i;
    std::string value;
    if (peek() == '"') {
      auto s = string();
      if (!s) return std::nullopt;
      value = *s;
    } else if (peek() == '[') {
      const size_t end = in.find(']', i);
      if (end == std::string_view::npos) return std::nullopt;
      value = std::string(in.substr(i, end + 1 - i));
      i = end + 1;
    } else {
      const size_t start = i;
      while (i < in.size() && in[i] != ',' && in[i] != '}') ++i;
      value = std::string(in.substr(start, i - start));
      if (value.empty()) return std::nullopt;
    }
    if (!fields.emplace(*key, value).second) return std::nullopt;
    if (peek() == ',') {
      ++i;
      continue;
    }
    if (peek() == '}' && i + 1 == in.size()) return fields;
    return std::nullopt;
  }
}

TEST(LoggingTest, ParseLineReadsWhatTheLogWrites) {
  const std::vector<size_t> address = {0, 3, 1};
  LogEvent event{1, std::chrono::nanoseconds(42), OperatorBuilt{7, address, "a \"quoted\"\tname"}};
  std::string line;
  append_json(event, line);
  auto fields = parse_line(line);
  ASSERT_TRUE(fields) << line;
  EXPECT_EQ((*fields)["time_ns"], "42");
  EXPECT_EQ((*fields)["worker"], "1");
  EXPECT_EQ((*fields)["event"], "operator_built");
  EXPECT_EQ((*fields)["id"], "7");
  EXPECT_EQ((*fields)["address"], "[0,3,1]");
  EXPECT_EQ((*fields)["name"], "a \"quoted\"\tname");
  EXPECT_FALSE(parse_line(line.substr(0, line.size() - 1)));
}

TEST(LoggingTest, WeirLogWritesJsonLines) {
  const std::string path = ::testing::TempDir() + "weir_logging_test.jsonl";
  ASSERT_EQ(setenv("WEIR_LOG", path.c_str(), 1), 0);
  auto results = testing::run_workers(2, [](Worker& worker) { return run_dataflow(worker); });
  unsetenv("WEIR_LOG");
  ASSERT_TRUE(results.ok()) << results.status();

  std::ifstream file(path);
  ASSERT_TRUE(file) << path;
  std::string line;
  size_t lines = 0;
  std::map<size_t, std::map<std::string, size_t>> kinds;  // worker -> kind -> count
  std::map<size_t, std::string> last;                     // worker -> last kind
  std::map<size_t, int64_t> last_time;
  uint64_t sent = 0, received = 0;
  const std::set<std::string> known = {"operator_built",
                                       "operator_dropped",
                                       "schedule_start",
                                       "schedule_stop",
                                       "messages",
                                       "progress",
                                       "park",
                                       "unpark",
                                       "dataflow_created",
                                       "dataflow_completed",
                                       "dataflow_dropped",
                                       "channel_built",
                                       "channel_dropped"};
  while (std::getline(file, line)) {
    ++lines;
    auto fields = parse_line(line);
    ASSERT_TRUE(fields) << "line " << lines << ": " << line;
    auto& f = *fields;
    ASSERT_TRUE(f.count("worker") && f.count("event") && f.count("time_ns")) << line;
    const size_t worker = std::stoul(f["worker"]);
    ASSERT_LT(worker, 2u) << line;
    EXPECT_TRUE(known.count(f["event"])) << line;
    const int64_t time = std::stoll(f["time_ns"]);
    EXPECT_GE(time, last_time[worker]) << line;
    last_time[worker] = time;
    ++kinds[worker][f["event"]];
    last[worker] = f["event"];
    if (f["event"] == "messages") {
      (f["is_send"] == "true" ? sent : received) += std::stoull(f["records"]);
      EXPECT_EQ(std::stoull(f["bytes"]), std::stoull(f["records"]) * sizeof(uint64_t)) << line;
    }
    if (f["event"] == "schedule_stop") {
      EXPECT_GE(std::stoll(f["duration_ns"]), 0) << line;
    }
  }
  std::remove(path.c_str());
  ASSERT_GT(lines, 0u);
  for (size_t w = 0; w < 2; ++w) {
    SCOPED_TRACE("worker " + std::to_string(w));
    EXPECT_EQ(kinds[w]["dataflow_created"], 1u);
    EXPECT_EQ(kinds[w]["dataflow_completed"], 1u);
    EXPECT_EQ(last[w], "dataflow_completed");
    EXPECT_EQ(kinds[w]["schedule_start"], kinds[w]["schedule_stop"]);
    EXPECT_GT(kinds[w]["schedule_start"], 0u);
    EXPECT_EQ(kinds[w]["operator_built"], kinds[w]["operator_dropped"]);
    EXPECT_GT(kinds[w]["channel_built"], 0u);
  }
  EXPECT_EQ(sent, received);
  EXPECT_GE(sent, uint64_t{3} * 2 * kRecords * kRounds);
}

// A program's sink added with also_log_to (as `weir ingest --http` adds its counters) leaves
// WEIR_LOG's file writing: both see every event.
TEST(LoggingTest, AlsoLogToKeepsTheSinksBefore) {
  const std::string path = ::testing::TempDir() + "weir_logging_also.jsonl";
  ASSERT_EQ(setenv("WEIR_LOG", path.c_str(), 1), 0);
  std::vector<size_t> events(2, 0), second(2, 0);
  auto results = testing::run_workers(2, [&](Worker& worker) {
    worker.also_log_to([&events, w = worker.index()](const LogEvent&) { ++events[w]; });
    worker.also_log_to([&second, w = worker.index()](const LogEvent&) { ++second[w]; });
    worker.also_log_to(nullptr);  // Adds nothing.
    return run_dataflow(worker);
  });
  unsetenv("WEIR_LOG");
  ASSERT_TRUE(results.ok()) << results.status();
  std::ifstream file(path);
  ASSERT_TRUE(file) << path;
  std::vector<size_t> lines(2, 0);
  std::string line;
  while (std::getline(file, line)) {
    auto fields = parse_line(line);
    ASSERT_TRUE(fields) << line;
    ++lines.at(std::stoul((*fields)["worker"]));
  }
  std::remove(path.c_str());
  for (size_t w = 0; w < 2; ++w) {
    EXPECT_GT(events[w], 0u) << "worker " << w;
    EXPECT_EQ(events[w], lines[w]) << "worker " << w << ": the file and the sink saw the same";
    EXPECT_EQ(second[w], events[w]) << "worker " << w;
  }
}

// Two processes: a batch to or from the other process counts its encoding (the time, a count,
// then the records), and what one process sends the other receives, byte for byte.
TEST(LoggingTest, BytesAcrossProcessesAreTheEncoding) {
  constexpr size_t kProcesses = 2;
  testing::LoopbackHub hub(kProcesses);
  // [process]: bytes and records sent to / received from the other process, and within.
  std::vector<uint64_t> remote_sent(kProcesses), remote_received(kProcesses);
  std::vector<uint64_t> remote_records(kProcesses), local_bytes(kProcesses),
      local_records(kProcesses);
  auto run_process = [&](size_t process) {
    Config config;
    config.workers = 1;
    config.processes = kProcesses;
    config.process = process;
    config.transport = hub.factory();
    return execute(config, [&](Worker& worker) {
      worker.log_to([&, process](const LogEvent& event) {
        const auto* m = std::get_if<Messages>(&event.data);
        if (m == nullptr) return;
        if (m->source == m->target) {
          local_bytes[process] += m->bytes;
          local_records[process] += m->records;
        } else if (m->is_send) {
          remote_sent[process] += m->bytes;
          remote_records[process] += m->records;
        } else {
          remote_received[process] += m->bytes;
        }
      });
      return run_dataflow(worker);
    });
  };
  std::optional<absl::StatusOr<std::vector<uint64_t>>> second;
  std::thread other([&] { second.emplace(run_process(1)); });
  auto first = run_process(0);
  other.join();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second->ok()) << second->status();
  for (size_t p = 0; p < kProcesses; ++p) {
    SCOPED_TRACE("process " + std::to_string(p));
    ASSERT_GT(remote_records[p], 0u);
    // Each batch: its time and count (8 bytes each), then 8 bytes a record.
    EXPECT_GT(remote_sent[p], remote_records[p] * sizeof(uint64_t));
    EXPECT_LE(remote_sent[p], remote_records[p] * sizeof(uint64_t) + 16 * remote_records[p]);
    EXPECT_EQ(local_bytes[p], local_records[p] * sizeof(uint64_t));
  }
  EXPECT_EQ(remote_sent[0], remote_received[1]);
  EXPECT_EQ(remote_sent[1], remote_received[0]);
}

TEST(LoggingTest, BadWeirLogPathIsAnErrorNamingTheFile) {
  const std::string path = "/nonexistent-weir-dir/events.jsonl";
  ASSERT_EQ(setenv("WEIR_LOG", path.c_str(), 1), 0);
  std::atomic<bool> ran{false};
  absl::Status status = testing::run_workers(2, [&](Worker&) { ran = true; });
  unsetenv("WEIR_LOG");
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(path), std::string::npos) << status;
  EXPECT_NE(status.message().find("WEIR_LOG"), std::string::npos) << status;
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace weir
