// weir::observe without a source: the HTTP server against well-formed and hostile clients,
// --http addresses, and RuntimeStats plus the graph of a running two-worker dataflow.

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "http_get.h"
#include "testing/harness.h"
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "weir/observe/graph.h"
#include "weir/observe/http_server.h"
#include "weir/observe/runtime_stats.h"
#include "weir/weir.h"
#include "weir/worker/introspection.h"

namespace weir::observe {
namespace {

using testing::http_get;
using testing::raw_exchange;

std::unique_ptr<HttpServer> start_echo(HttpServerOptions options = {}) {
  auto server = HttpServer::start(
      options,
      {{"/hello",
        [](const HttpRequest& r) { return HttpResponse{.body = "hello " + r.query + "\n"}; }},
       {"/throws",
        [](const HttpRequest&) -> HttpResponse { throw std::runtime_error("handler failed"); }}});
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

TEST(HttpServerTest, ServesItsRoutesAndAnswersTheRestWithAnError) {
  auto server = start_echo();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(server->port(), 0);
  auto ok = http_get(server->port(), "/hello?x=1");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "hello x=1\n");
  EXPECT_EQ(http_get(server->port(), "/nope").status, 404);
  EXPECT_EQ(http_get(server->port(), "/throws").status, 500);
  const std::string post = raw_exchange(server->port(),
                                        "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                                        "Connection: close\r\n\r\nabc");
  EXPECT_EQ(post.rfind("HTTP/1.1 405", 0), 0u) << post;
  const std::string head =
      raw_exchange(server->port(), "HEAD /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  EXPECT_EQ(head.find("hello"), std::string::npos) << "HEAD has no body: " << head;
}

TEST(HttpServerTest, BindingATakenPortIsAnErrorNamingTheAddress) {
  auto first = start_echo();
  ASSERT_NE(first, nullptr);
  const std::string address = "127.0.0.1:" + std::to_string(first->port());
  auto second = HttpServer::start(HttpServerOptions{.address = address}, {});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find(address), std::string::npos) << second.status();
}

TEST(HttpServerTest, KeepsServingAfterGarbageHugeHeadersAndSlowClients) {
  auto server = start_echo(
      HttpServerOptions{.threads = 2, .request_timeout = std::chrono::milliseconds(1000)});
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  // Garbage, binary and truncated requests.
  for (const std::string& junk :
       {std::string("\x00\xff\xfe garbage\r\n\r\n", 16), std::string("GET\r\n\r\n"),
        std::string("GET / HTTP/9.9\r\n\r\n"), std::string("GET /hello HTTP/1.1\r\nHost"),
        std::string(5000, 'A') + "\r\n\r\n"}) {
    raw_exchange(port, junk, std::chrono::milliseconds(3000));
  }
  // Headers far over the limit: refused, not read into memory without bound.
  const std::string huge = "GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(200000, 'b') +
                           "\r\nConnection: close\r\n\r\n";
  const std::string refused = raw_exchange(port, huge, std::chrono::milliseconds(3000));
  EXPECT_EQ(refused.find("hello "), std::string::npos) << "a 200 KB header was served";
  // Slow clients: more idle connections than threads, each sending half a request line.
  std::vector<int> slow;
  for (int i = 0; i < 6; ++i) {
    const int fd = testing::connect_local(port);
    ASSERT_GE(fd, 0);
    (void)send(fd, "GET /hel", 8, MSG_NOSIGNAL);
    slow.push_back(fd);
  }
  // The server drops them after its request timeout and serves a well-behaved client.
  const auto start = std::chrono::steady_clock::now();
  auto ok = http_get(port, "/hello");
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(ok.status, 200);
  EXPECT_LT(waited, std::chrono::seconds(8));
  for (int fd : slow) close(fd);
  EXPECT_EQ(http_get(port, "/hello").status, 200);
}

TEST(HttpAddressTest, AcceptsWhatUsersTypeAndNamesTheFlagOtherwise) {
  EXPECT_EQ(*parse_http_address("9090"), "127.0.0.1:9090");
  EXPECT_EQ(*parse_http_address(":9090"), "127.0.0.1:9090");
  EXPECT_EQ(*parse_http_address("0.0.0.0:80"), "0.0.0.0:80");
  EXPECT_EQ(*parse_http_address("[::1]:0"), "[::1]:0");
  EXPECT_EQ(*parse_http_address("localhost:8080"), "localhost:8080");
  for (const char* bad : {"", "x", "-1", "65536", "host:", "::1:80", "[::1:80", "a b:80", "h/x:80",
                          "99999999999999999999"}) {
    auto parsed = parse_http_address(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("--http"), std::string::npos) << parsed.status();
  }
}

// Two workers; every record is exchanged, then counted; while they run, another thread asks
// for their graphs.
TEST(RuntimeStatsTest, CountsOperatorsChannelsAndWorkersAndDescribesTheGraph) {
  constexpr size_t kWorkers = 2;
  constexpr uint64_t kRecords = 5000;
  auto stats = std::make_shared<RuntimeStats>();
  std::atomic<bool> built{false}, graphs_taken{false};
  std::vector<WorkerGraph> graphs;
  std::thread asker([&] {
    while (!built.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    graphs = collect_graphs(request_graphs(), kWorkers, std::chrono::seconds(20));
    graphs_taken.store(true);
  });
  auto results = weir::testing::run_workers(kWorkers, [&](Worker& worker) {
    stats->attach(worker);
    ProbeHandle<uint64_t> probe;
    auto input = worker.dataflow_named<uint64_t>("Observed", [&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      stream | exchange([](const uint64_t& x) { return x; }) |
          map([](uint64_t x) { return x * 2; }) | probe_with(probe);
      return std::move(handle);
    });
    for (uint64_t x = 0; x < kRecords; ++x) input.send(x);
    input.advance_to(1);
    weir::testing::step_until(worker, [&] { return !probe.less_than(1); });
    built.store(true);
    // Keep the dataflow (time 1 open) until the graphs were taken.
    weir::testing::step_until(worker, [&] { return graphs_taken.load(); });
    input.close();
    weir::testing::step_until(worker, [&] { return probe.done(); });
    return 0;
  });
  asker.join();
  ASSERT_TRUE(results.ok()) << results.status();

  // The dataflow completed: its operators were dropped, and are no longer listed.
  EXPECT_TRUE(stats->operators().empty());
  ASSERT_EQ(graphs.size(), kWorkers) << "both workers answer a graph request while running";
  for (const auto& g : graphs) {
    ASSERT_EQ(g.dataflows.size(), 1u);
    const DataflowGraph& d = g.dataflows[0];
    EXPECT_EQ(d.name, "Observed");
    std::set<std::string> names;
    for (const auto& op : d.operators) names.insert(op.name);
    EXPECT_TRUE(names.count("Map")) << "operators: " << nlohmann::json(names).dump();
    bool exchange_seen = false;
    for (const auto& ch : d.channels) exchange_seen |= ch.pact == "exchange";
    EXPECT_TRUE(exchange_seen);
    // Time 1 was open: the map's input frontier is {1}.
    for (const auto& op : d.operators) {
      if (op.name != "Map") continue;
      ASSERT_EQ(op.inputs.size(), 1u);
      EXPECT_EQ(op.inputs[0], PortFrontier{"1"});
    }
  }
  // Channels: every record crossed the exchange once, and was received once.
  uint64_t exchanged = 0, received_max = 0;
  for (const auto& ch : stats->channels()) {
    received_max = std::max(received_max, ch.received);
    if (ch.sent_local + ch.sent_remote == kRecords * kWorkers) ++exchanged;
  }
  EXPECT_GE(exchanged, 1u) << "a channel carried all " << kRecords * kWorkers << " records";
  EXPECT_EQ(received_max, kRecords * kWorkers);
  // Workers: both ran operators.
  const auto workers = stats->workers();
  ASSERT_EQ(workers.size(), kWorkers);
  for (const auto& w : workers) EXPECT_GT(w.steps, 0u) << "worker " << w.worker;

  // The JSON and DOT of the answers.
  const auto json = nlohmann::json::parse(graph_json(graphs, kWorkers, stats.get()));
  EXPECT_EQ(json["workers"], kWorkers);
  EXPECT_EQ(json["answered"].size(), kWorkers);
  ASSERT_EQ(json["dataflows"].size(), 1u);
  EXPECT_FALSE(json["dataflows"][0]["operators"].empty());
  uint64_t records = 0;
  for (const auto& ch : json["dataflows"][0]["channels"]) records += ch["records"].get<uint64_t>();
  EXPECT_GE(records, kRecords * kWorkers);
  const std::string dot = graph_dot(graphs, kWorkers, stats.get());
  EXPECT_EQ(dot.rfind("digraph weir {", 0), 0u);
  EXPECT_NE(dot.find("Map"), std::string::npos);
  EXPECT_NE(dot.find("exchange"), std::string::npos);
}

TEST(RuntimeStatsTest, AGraphRequestWithoutWorkersTimesOutEmpty) {
  const auto start = std::chrono::steady_clock::now();
  auto graphs = collect_graphs(request_graphs(), 1, std::chrono::milliseconds(200));
  EXPECT_TRUE(graphs.empty());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(150));
}

}  // namespace
}  // namespace weir::observe
