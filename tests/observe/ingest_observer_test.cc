// `weir ingest --http` through the real binary: /metrics parses as Prometheus text and its
// series move and agree with the shards; /status shows a snapshotting export `starting` with
// its progress, the others running, and an export with a definite error `stalled`; /readyz
// follows; /graph shows the epoch's dataflow.

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "http_get.h"
#include "tool_process.h"
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>

namespace weir::observe {
namespace {

namespace fs = std::filesystem;
using ingest::testing::read_file;
using ingest::testing::run_tool;
using ingest::testing::spawn_tool;
using nlohmann::json;
using testing::http_get;
using testing::parse_prometheus;
using testing::sample_value;
using Clock = std::chrono::steady_clock;

class IngestObserverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() /
            ("weir_observe_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    fs::create_directories(base_);
  }
  void TearDown() override {
    stop();
    fs::remove_all(base_);
  }

  // Starts `weir ingest ... --http 127.0.0.1:0` and waits for its address.
  void start(std::vector<std::string> args) {
    std::vector<std::string> all = {
        WEIR_TOOL_PATH, "ingest",      "--persist", (base_ / "persist").string(),
        "--http",       "127.0.0.1:0", "--quiet"};
    all.insert(all.end(), args.begin(), args.end());
    pid_ = spawn_tool(all, base_ / "out.log", base_ / "err.log");
    const std::regex url("serving http://127\\.0\\.0\\.1:([0-9]+)/");
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline) {
      std::smatch m;
      const std::string err = read_file(base_ / "err.log");
      if (std::regex_search(err, m, url)) {
        port_ = std::stoi(m[1]);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    FAIL() << "no address printed; stderr: " << read_file(base_ / "err.log");
  }
  // SIGTERM (ends the run cleanly), then its exit status.
  int stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  json status() {
    auto r = http_get(port_, "/status");
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body);
  }
  // The shard's upper as `weir persist describe` prints it.
  uint64_t shard_upper(const std::string& shard) {
    const fs::path log = base_ / "describe.log";
    fs::remove(log);
    EXPECT_EQ(run_tool({WEIR_TOOL_PATH, "persist", "--persist", (base_ / "persist").string(),
                        "describe", shard},
                       log),
              0)
        << read_file(log);
    std::smatch m;
    const std::string text = read_file(log);
    const std::regex upper("upper +\\[([0-9]+)\\]");
    if (!std::regex_search(text, m, upper)) {
      ADD_FAILURE() << "no upper in: " << text;
      return 0;
    }
    return std::stoull(m[1]);
  }
  template <class F>
  bool wait_for(F&& done, std::chrono::seconds timeout = std::chrono::seconds(60)) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  fs::path base_;
  pid_t pid_ = -1;
  int port_ = 0;
};

TEST_F(IngestObserverTest, MetricsParseMoveAndAgreeWithTheShards) {
  start({"--source", "loadgen:auction", "-w", "2", "--rate", "2000"});
  ASSERT_TRUE(wait_for([&] { return http_get(port_, "/readyz").status == 200; }))
      << "never ready: " << http_get(port_, "/readyz").body;
  EXPECT_EQ(http_get(port_, "/healthz").status, 200);

  const uint64_t before = shard_upper("auction.bids");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto first = http_get(port_, "/metrics");
  const uint64_t after = shard_upper("auction.bids");
  ASSERT_EQ(first.status, 200);
  EXPECT_NE(first.headers.find("text/plain; version=0.0.4"), std::string::npos) << first.headers;
  std::string error;
  auto samples = parse_prometheus(first.body, &error);
  ASSERT_TRUE(samples) << error;
  for (const char* name : {"weir_operator_activations_total",
                           "weir_operator_busy_seconds_total",
                           "weir_channel_records_sent_total",
                           "weir_channel_bytes_sent_total",
                           "weir_channel_records_received_total",
                           "weir_channel_bytes_received_total",
                           "weir_worker_parked_seconds_total",
                           "weir_export_updates_total",
                           "weir_export_bytes_total",
                           "weir_export_upper",
                           "weir_export_lag_offsets",
                           "weir_export_lag_seconds",
                           "weir_export_snapshot_rows",
                           "weir_export_health",
                           "weir_persist_blob_bytes_total",
                           "weir_persist_consensus_calls_total",
                           "weir_persist_consensus_cas_mismatches_total",
                           "weir_persist_consensus_cas_seconds_count",
                           "weir_persist_blob_set_seconds_bucket",
                           "weir_persist_maintenance_total",
                           "process_resident_memory_bytes"}) {
    EXPECT_TRUE(sample_value(*samples, name)) << "no " << name;
  }
  // The metric's upper is the shard's upper at the time: between a read before and one after.
  const auto upper1 = sample_value(*samples, "weir_export_upper", {{"table", "bids"}});
  ASSERT_TRUE(upper1);
  EXPECT_LE(static_cast<double>(before), *upper1);
  EXPECT_LE(*upper1, static_cast<double>(after));
  const double updates1 = *sample_value(*samples, "weir_export_updates_total", {{"table", "bids"}});
  EXPECT_GT(updates1, 0);
  EXPECT_EQ(
      *sample_value(*samples, "weir_export_health", {{"table", "bids"}, {"health", "running"}}), 1);

  // A second scrape: the series moved.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  auto second = parse_prometheus(http_get(port_, "/metrics").body, &error);
  ASSERT_TRUE(second) << error;
  EXPECT_GT(*sample_value(*second, "weir_export_upper", {{"table", "bids"}}), *upper1);
  EXPECT_GT(*sample_value(*second, "weir_export_updates_total", {{"table", "bids"}}), updates1);
  EXPECT_GT(*sample_value(*second, "weir_persist_blob_bytes_total", {{"direction", "written"}}),
            *sample_value(*samples, "weir_persist_blob_bytes_total", {{"direction", "written"}}));

  // /status agrees with /metrics on the exports, and names the workers.
  json s = status();
  EXPECT_EQ(s["kind"], "auction");
  ASSERT_EQ(s["exports"].size(), 3u);
  for (const auto& e : s["exports"]) {
    EXPECT_EQ(e["health"], "running") << e.dump();
    EXPECT_EQ(e["shard"], "auction." + e["table"].get<std::string>());
    EXPECT_LT(e["lag_seconds"].get<double>(), 10.0) << e.dump();
  }
  EXPECT_EQ(s["workers"].size(), 2u);

  // /graph: the epoch's dataflow, with the sinks and their input frontiers.
  auto graph = http_get(port_, "/graph");
  ASSERT_EQ(graph.status, 200);
  json g = json::parse(graph.body);
  EXPECT_EQ(g["answered"].size(), 2u);
  ASSERT_FALSE(g["dataflows"].empty());
  bool append_seen = false;
  for (const auto& op : g["dataflows"].back()["operators"]) {
    if (op["name"] == "PersistAppend(auction.bids)") {
      append_seen = true;
      EXPECT_FALSE(op["inputs"].empty());
      EXPECT_GT(op["activations"].get<uint64_t>(), 0u);
    }
  }
  EXPECT_TRUE(append_seen) << graph.body.substr(0, 2000);
  auto dot = http_get(port_, "/graph?format=dot");
  EXPECT_EQ(dot.body.rfind("digraph weir {", 0), 0u);
  EXPECT_EQ(http_get(port_, "/").status, 200);

  // `weir top --once`: one frame with rates over one interval.
  const fs::path top_log = base_ / "top.log";
  ASSERT_EQ(run_tool({WEIR_TOOL_PATH, "top", "--http", "127.0.0.1:" + std::to_string(port_),
                      "--once", "--interval", "0.5"},
                     top_log),
            0)
      << read_file(top_log);
  const std::string top = read_file(top_log);
  for (const char* part : {"EXPORT", "bids", "running", "WORKER", "BUSIEST OPERATORS", "persist"}) {
    EXPECT_NE(top.find(part), std::string::npos) << part << " missing from:\n" << top;
  }

  // The run ends cleanly on SIGTERM with the server up.
  EXPECT_EQ(stop(), 0) << read_file(base_ / "err.log");
}

// WEIR_LOG=FILE and --http together: the endpoints count the events and the file still gets
// every one of them (the counters are one more sink, not a replacement).
TEST_F(IngestObserverTest, WeirLogStillWritesWithHttp) {
  const fs::path events = base_ / "events.jsonl";
  ASSERT_EQ(setenv("WEIR_LOG", events.c_str(), 1), 0);
  start({"--source", "loadgen:auction", "-w", "2", "--rate", "2000"});
  unsetenv("WEIR_LOG");
  ASSERT_TRUE(wait_for([&] { return http_get(port_, "/readyz").status == 200; }))
      << "never ready: " << http_get(port_, "/readyz").body;
  std::string error;
  auto samples = parse_prometheus(http_get(port_, "/metrics").body, &error);
  ASSERT_TRUE(samples) << error;
  EXPECT_TRUE(sample_value(*samples, "weir_channel_records_sent_total"));
  EXPECT_TRUE(sample_value(*samples, "weir_operator_activations_total"));
  ASSERT_EQ(stop(), 0) << read_file(base_ / "err.log");
  const std::string text = read_file(events);
  for (const char* kind : {"\"event\":\"operator_built\"", "\"event\":\"channel_built\"",
                           "\"event\":\"messages\"", "\"event\":\"schedule_stop\""}) {
    EXPECT_NE(text.find(kind), std::string::npos) << "no " << kind << " in " << events;
  }
}

TEST_F(IngestObserverTest, StatusShowsASnapshotStartingAndAFaultStalled) {
  // bids snapshots 2M rows (a few seconds); users hits a bad row at offset 1000.
  start({"--source", "loadgen:auction", "-w", "2", "--rate", "2000", "--snapshot-rows",
         "bids=2000000", "--fault", "users@1000"});
  // Polled until bids is seen starting with progress, /readyz 503, and another export running
  // alongside (a table's health moves to running once its own snapshot is out), or until the
  // snapshot is over.
  bool saw_starting = false, saw_not_ready = false, others_running = false, over = false;
  ASSERT_TRUE(wait_for([&] {
    const json s = status();
    for (const auto& e : s["exports"]) {
      if (e["table"] != "bids") continue;
      const auto& snap = e["snapshot"];
      if (e["health"] == "starting" && snap["active"].get<bool>() &&
          snap["total"].get<uint64_t>() == 2000000 && snap["done"].get<uint64_t>() > 0) {
        saw_starting = true;
        for (const auto& other : s["exports"]) {
          if (other["table"] == "auctions" && other["health"] == "running") others_running = true;
        }
      } else if (saw_starting && e["health"] != "starting") {
        over = true;
      }
    }
    if (!saw_not_ready && http_get(port_, "/readyz").status == 503) saw_not_ready = true;
    return (saw_starting && saw_not_ready && others_running) || over;
  })) << "never saw bids starting with progress: "
      << status().dump();
  EXPECT_TRUE(saw_starting);
  EXPECT_TRUE(saw_not_ready) << "/readyz never said 503 while bids snapshotted";
  EXPECT_TRUE(others_running) << "auctions did not run while bids snapshotted";
  auto users = [&]() -> json {
    const json s = status();
    for (const auto& e : s["exports"]) {
      if (e["table"] == "users") return e;
    }
    return json::object();
  };
  ASSERT_TRUE(wait_for([&] { return users().value("health", "") == "stalled"; }))
      << status().dump();
  EXPECT_NE(users()["error"].get<std::string>().find("offset 1000"), std::string::npos)
      << users().dump();
  // Once bids' snapshot is out the process is ready: a stalled export has hydrated too.
  EXPECT_TRUE(wait_for([&] { return http_get(port_, "/readyz").status == 200; }))
      << http_get(port_, "/readyz").body;
  EXPECT_EQ(stop(), 0) << read_file(base_ / "err.log");
}

TEST_F(IngestObserverTest, ABadAddressIsAnErrorBeforeAnyWork) {
  const fs::path log = base_ / "bad.log";
  EXPECT_NE(run_tool({WEIR_TOOL_PATH, "ingest", "--persist", (base_ / "p").string(), "--http",
                      "not-a-port", "--until", "10"},
                     log),
            0);
  EXPECT_NE(read_file(log).find("--http"), std::string::npos) << read_file(log);
  EXPECT_FALSE(fs::exists(base_ / "p")) << "a refused run created its persist location";
  // A port that is taken: the same, once the address is tried.
  const int taken = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(addr);
  ASSERT_EQ(bind(taken, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(taken, 1), 0);
  ASSERT_EQ(getsockname(taken, reinterpret_cast<sockaddr*>(&addr), &size), 0);
  const std::string address = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  const fs::path taken_log = base_ / "taken.log";
  EXPECT_NE(run_tool({WEIR_TOOL_PATH, "ingest", "--persist", (base_ / "p").string(), "--http",
                      address, "--until", "10"},
                     taken_log),
            0);
  close(taken);
  EXPECT_NE(read_file(taken_log).find(address), std::string::npos) << read_file(taken_log);
  EXPECT_FALSE(fs::exists(base_ / "p")) << "a run that could not listen created its persist";
  // `weir top` at an address where nothing listens: an error naming it, at once.
  const fs::path top_log = base_ / "top.log";
  EXPECT_NE(run_tool({WEIR_TOOL_PATH, "top", "--http", "127.0.0.1:1", "--once"}, top_log), 0);
  EXPECT_NE(read_file(top_log).find("127.0.0.1:1"), std::string::npos) << read_file(top_log);
}

// `weir top` reads another process's answers: whatever a server at that address sends (JSON of
// other shapes, numbers out of range, an answer that stalls or never ends), it prints a frame or
// an error and exits; it never aborts and never waits forever.
TEST(WeirTopTest, SurvivesWhateverTheServerAnswers) {
  using testing::RawServer;
  const std::string good_status =
      R"({"command":"ingest","exports":[{"table":"t","upper":5}],"workers":[{"worker":0}]})";
  // (status body, graph body); an empty body: the server stalls after its headers.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"exports":[1,"x",null],"workers":[]})", "{}"},
      {R"({"exports":[],"workers":[{},5,[]]})", "{}"},
      {R"({"exports":[{"table":"t","snapshot":{"active":true,"total":1,"done":-5}}]})", "{}"},
      {R"({"exports":[{"table":"t","snapshot":{"active":true,"total":1e-300,"done":1e300}}]})",
       "{}"},
      {R"({"exports":{"a":1},"workers":"x","persist":[1],"workers_total":1e300})", "[]"},
      {good_status, R"({"dataflows":[5]})"},
      {good_status, R"({"dataflows":[{"operators":5}]})"},
      {good_status,
       R"({"dataflows":[{"operators":[1,"x",{"id":-1,"busy_ns":1e308,"activations":-1e308}]}]})"},
      {"", "{}"},
      {good_status, ""},
  };
  int n = 0;
  for (const auto& [status_body, graph_body] : cases) {
    SCOPED_TRACE(absl::StrCat("case ", n, ": /status ", status_body, ", /graph ", graph_body));
    RawServer server([&](const std::string& path, int fd, RawServer& self) {
      const std::string& body = path.rfind("/status", 0) == 0 ? status_body : graph_body;
      if (body.empty()) {
        RawServer::send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{");
        self.pause(std::chrono::minutes(5));
        return;
      }
      RawServer::send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                                  "\r\n\r\n" + body);
    });
    ASSERT_GT(server.port(), 0);
    const fs::path log = fs::temp_directory_path() /
                         ("weir_top_" + std::to_string(getpid()) + "_" + std::to_string(n++));
    fs::remove(log);
    const pid_t pid =
        spawn_tool({WEIR_TOOL_PATH, "top", "--http", "127.0.0.1:" + std::to_string(server.port()),
                    "--once", "--interval", "0.1"},
                   log);
    int status = 0;
    pid_t waited = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while ((waited = waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const bool exited = waited == pid;
    if (!exited) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    const std::string output = read_file(log);
    fs::remove(log);
    EXPECT_TRUE(exited) << "still running after 30 s: " << output;
    EXPECT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status) << ": " << output;
    if (WIFEXITED(status)) {
      EXPECT_LE(WEXITSTATUS(status), 1) << output;
    }
    EXPECT_FALSE(output.empty());
  }
}

}  // namespace
}  // namespace weir::observe
