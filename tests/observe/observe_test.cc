// weir::observe without a source: the HTTP server against well-formed and hostile clients,
// --http addresses, and RuntimeStats plus the graph of a running two-worker dataflow.

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "http_get.h"
#include "testing/harness.h"
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "weir/async/async_operator.h"
#include "weir/observe/graph.h"
#include "weir/observe/http_server.h"
#include "weir/observe/ingest_endpoints.h"
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
       {std::string("\x00\xff\xfe garbage\r\n\r\n", 15), std::string("GET\r\n\r\n"),
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

// Browser tabs polling every second keep their connections open between polls; civetweb holds a
// thread per open connection, so kept-alive connections would hold every thread and nothing else
// (a Prometheus scrape, /healthz) would be answered while they poll.
TEST(HttpServerTest, ConnectionsLeftOpenAfterAnAnswerDoNotHoldTheServer) {
  auto server = start_echo(HttpServerOptions{.threads = 2});
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  std::vector<int> kept;
  for (int i = 0; i < 4; ++i) {
    const int fd = testing::connect_local(port);
    ASSERT_GE(fd, 0);
    const std::string request = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";  // Keep-alive.
    ASSERT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(request.size()));
    kept.push_back(fd);
  }
  // Each gets its answer, then the server closes the connection.
  for (int fd : kept) {
    std::string answer;
    char buffer[4096];
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      ASSERT_GT(poll(&p, 1, 3000), 0) << "the connection stays open after: " << answer;
      const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      answer.append(buffer, static_cast<size_t>(n));
    }
    EXPECT_NE(answer.find("hello"), std::string::npos) << answer;
  }
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(http_get(port, "/hello").status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  for (int fd : kept) close(fd);
}

// A browser opens connections it may never use (preconnects); a few of them must not delay
// other clients by the request timeout.
TEST(HttpServerTest, AFewIdleConnectionsDoNotDelayOtherClients) {
  auto server = start_echo();
  ASSERT_NE(server, nullptr);
  std::vector<int> idle;
  for (int i = 0; i < 8; ++i) {
    const int fd = testing::connect_local(server->port());
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // Let the server take them up.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(http_get(server->port(), "/hello").status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  for (int fd : idle) close(fd);
}

// observe::http_get (what `weir top` polls with) on another thread, waited for up to `limit`:
// nullopt if it has not returned by then.
std::optional<absl::StatusOr<std::string>> get_within(int port, const std::string& path,
                                                      std::chrono::milliseconds timeout,
                                                      std::chrono::seconds limit) {
  auto result = std::make_shared<std::promise<absl::StatusOr<std::string>>>();
  auto future = result->get_future();
  std::thread([=] {
    result->set_value(observe::http_get("127.0.0.1:" + std::to_string(port), path, timeout));
  }).detach();
  if (future.wait_for(limit) != std::future_status::ready) return std::nullopt;
  return future.get();
}

TEST(HttpGetTest, ReturnsTheBodyOrAnErrorInTimeWhateverTheServerDoes) {
  using testing::RawServer;
  testing::RawServer server([](const std::string& path, int fd, RawServer& self) {
    if (path == "/ok") {
      RawServer::send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello and more");
    } else if (path == "/until-close") {
      RawServer::send_all(fd, "HTTP/1.0 200 OK\r\n\r\nall of it");
    } else if (path == "/missing") {
      RawServer::send_all(fd, "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope");
    } else if (path == "/short") {
      RawServer::send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
    } else if (path == "/stall") {  // Headers, a byte, then nothing.
      RawServer::send_all(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{");
      self.pause(std::chrono::minutes(5));
    } else if (path == "/trickle") {  // A byte at a time, never done.
      RawServer::send_all(fd, "HTTP/1.1 200 OK\r\n\r\n");
      while (RawServer::send_all(fd, " ") && self.pause(std::chrono::milliseconds(50))) {
      }
    } else if (path == "/endless") {  // As fast as it can, up to 256 MiB.
      RawServer::send_all(fd, "HTTP/1.1 200 OK\r\n\r\n");
      const std::string chunk(1 << 20, 'x');
      for (int i = 0; i < 256 && RawServer::send_all(fd, chunk); ++i) {
      }
    } else if (path == "/silent") {
      self.pause(std::chrono::minutes(5));
    }
  });
  ASSERT_GT(server.port(), 0);
  const auto timeout = std::chrono::milliseconds(1000);
  const auto limit = std::chrono::seconds(20);
  auto ok = get_within(server.port(), "/ok", timeout, limit);
  ASSERT_TRUE(ok.has_value());
  ASSERT_TRUE(ok->ok()) << ok->status();
  EXPECT_EQ(**ok, "hello");
  auto until_close = get_within(server.port(), "/until-close", timeout, limit);
  ASSERT_TRUE(until_close.has_value() && until_close->ok());
  EXPECT_EQ(**until_close, "all of it");
  auto missing = get_within(server.port(), "/missing", timeout, limit);
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->status().code(), absl::StatusCode::kFailedPrecondition) << missing->status();
  for (const char* path : {"/short", "/stall", "/trickle", "/silent"}) {
    const auto start = std::chrono::steady_clock::now();
    auto got = get_within(server.port(), path, timeout, limit);
    ASSERT_TRUE(got.has_value()) << path << ": http_get did not return within " << limit.count()
                                 << " s";
    EXPECT_EQ(got->status().code(), absl::StatusCode::kUnavailable)
        << path << ": " << got->status();
    EXPECT_NE(got->status().message().find(path), std::string::npos) << got->status();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3)) << path;
  }
  auto endless = get_within(server.port(), "/endless", std::chrono::milliseconds(20000), limit);
  ASSERT_TRUE(endless.has_value());
  EXPECT_EQ(endless->status().code(), absl::StatusCode::kResourceExhausted) << endless->status();
}

// parse_http_address takes [IPV6]:PORT; a civetweb built without IPv6 (Debian's) cannot listen
// there, and must say so rather than "Failed to setup server ports".
TEST(HttpServerTest, AnIpv6AddressIsServedOrRefusedSayingWhy) {
  auto server = HttpServer::start(
      HttpServerOptions{.address = "[::1]:0"},
      {{"/hello", [](const HttpRequest&) { return HttpResponse{.body = "hello\n"}; }}});
  if (server.ok()) {
    auto got = observe::http_get("[::1]:" + std::to_string((*server)->port()), "/hello",
                                 std::chrono::seconds(5));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, "hello\n");
  } else {
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << server.status();
    EXPECT_NE(server.status().message().find("IPv6"), std::string::npos) << server.status();
    EXPECT_NE(server.status().message().find("127.0.0.1"), std::string::npos) << server.status();
  }
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
  std::vector<RuntimeStats::ChannelSample> channels_seen;
  std::string graph_text, dot_text;
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
    // Time 0 is complete everywhere (the probe passed it): every record was sent and received.
    if (worker.index() == 0) {
      channels_seen = stats->channels();
      graph_text = graph_json(graphs, kWorkers, stats.get());  // While the dataflow runs.
      dot_text = graph_dot(graphs, kWorkers, stats.get());
    }
    input.close();
    weir::testing::step_until(worker, [&] { return probe.done(); });
    return 0;
  });
  asker.join();
  ASSERT_TRUE(results.ok()) << results.status();

  // The dataflow completed: its operators and channels were dropped, and are no longer listed.
  EXPECT_TRUE(stats->operators().empty());
  EXPECT_TRUE(stats->channels().empty());
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
  for (const auto& ch : channels_seen) {
    received_max = std::max(received_max, ch.received);
    if (ch.sent_local + ch.sent_remote == kRecords * kWorkers) ++exchanged;
  }
  EXPECT_GE(exchanged, 1u) << "a channel carried all " << kRecords * kWorkers << " records";
  EXPECT_EQ(received_max, kRecords * kWorkers);
  // Every channel is listed with where it runs, and its bytes (records of 8 bytes, one process).
  for (const auto& ch : channels_seen) {
    EXPECT_FALSE(ch.pact.empty()) << "channel " << ch.id;
    ASSERT_FALSE(ch.scope.empty()) << "channel " << ch.id;
    EXPECT_EQ(ch.bytes_sent_local, ch.sent_local * sizeof(uint64_t)) << "channel " << ch.id;
    EXPECT_EQ(ch.bytes_sent_remote, 0u) << "channel " << ch.id;
    EXPECT_EQ(ch.bytes_received, ch.received * sizeof(uint64_t)) << "channel " << ch.id;
  }
  // Workers: both ran operators.
  const auto workers = stats->workers();
  ASSERT_EQ(workers.size(), kWorkers);
  for (const auto& w : workers) EXPECT_GT(w.steps, 0u) << "worker " << w.worker;

  // The JSON and DOT of the answers.
  const auto json = nlohmann::json::parse(graph_text);
  EXPECT_EQ(json["workers"], kWorkers);
  EXPECT_EQ(json["answered"].size(), kWorkers);
  ASSERT_EQ(json["dataflows"].size(), 1u);
  EXPECT_FALSE(json["dataflows"][0]["operators"].empty());
  uint64_t records = 0;
  uint64_t bytes = 0;
  for (const auto& ch : json["dataflows"][0]["channels"]) {
    records += ch["records"].get<uint64_t>();
    bytes += ch["bytes"].get<uint64_t>();
  }
  EXPECT_GE(records, kRecords * kWorkers);
  EXPECT_EQ(bytes, records * sizeof(uint64_t));
  const std::string& dot = dot_text;
  EXPECT_EQ(dot.rfind("digraph weir {", 0), 0u);
  EXPECT_NE(dot.find("Map"), std::string::npos);
  EXPECT_NE(dot.find("exchange"), std::string::npos);
}

// Operator names hold table and shard names, which come from outside (an upstream database) and
// need not be UTF-8: JSON cannot carry such bytes, and /graph must still answer.
TEST(GraphTest, NamesThatAreNotUtf8AreReplacedNotFatal) {
  WorkerGraph g;
  DataflowGraph& d = g.dataflows.emplace_back();
  d.name = "ingest-\xff";
  OperatorGraph& op = d.operators.emplace_back();
  op.id = 1;
  op.address = {0, 1};
  op.name = "PersistWrite(pg.caf\xe9)";
  op.inputs = {{"1"}};
  std::string text;
  ASSERT_NO_THROW(text = graph_json({g}, 1, nullptr));
  const auto json = nlohmann::json::parse(text);
  EXPECT_EQ(json["dataflows"][0]["operators"][0]["name"], "PersistWrite(pg.caf\xef\xbf\xbd)");
  EXPECT_NE(graph_dot({g}, 1, nullptr).find("PersistWrite"), std::string::npos);
}

TEST(IngestStatusTest, AnErrorThatIsNotUtf8StillGivesAStatus) {
  IngestObserver observer({.kind = "k", .source = "loadgen:counter"});
  auto health = std::make_shared<ingest::LastHealth>(1);
  {
    weir::MutexLock lock(health->mu);
    health->exports[0] = {sources::Health::kStalled, "bad row: caf\xe9 \xff"};
  }
  observer.monitor().set_epoch(nullptr, {"t"}, {std::make_shared<sinks::SinkStats>()}, {false});
  observer.monitor().set_run(health, nullptr, {});
  std::string text;
  ASSERT_NO_THROW(text = observer.status_json());
  const auto json = nlohmann::json::parse(text);
  EXPECT_EQ(json["exports"][0]["health"], "stalled");
  EXPECT_EQ(json["exports"][0]["error"], "bad row: caf\xef\xbf\xbd \xef\xbf\xbd");
}

// Prometheus refuses a whole scrape with one label value that is not UTF-8 (its text parser
// checks), so one odd table name would cost every metric.
TEST(IngestStatusTest, MetricsOfANameThatIsNotUtf8CanStillBeScraped) {
  IngestObserver observer({.kind = "k", .source = "loadgen:counter"});
  observer.monitor().set_epoch(
      nullptr, {"caf\xe9", "ok\xf0\x9f\x99\x82", "x\xed\xa0\x80"},
      {std::make_shared<sinks::SinkStats>(), std::make_shared<sinks::SinkStats>(),
       std::make_shared<sinks::SinkStats>()},
      {false, false, false});
  const std::string text = observer.metrics_text();
  std::string error;
  auto samples = testing::parse_prometheus(text, &error);
  ASSERT_TRUE(samples.has_value()) << error;
  std::set<std::string> tables;
  for (const auto& s : *samples) {
    if (s.name == "weir_export_upper") tables.insert(s.labels.at("table"));
  }
  const std::string replacement = "\xef\xbf\xbd";
  EXPECT_EQ(tables, (std::set<std::string>{"caf" + replacement, "ok\xf0\x9f\x99\x82",
                                           "x" + replacement + replacement + replacement}));
}

// Prometheus takes any decrease of a counter for a restart (rate() then counts the whole value
// again): a worker's parked time, which includes a park under way, must never go back, however
// a read falls against the worker waking up.
TEST(RuntimeStatsTest, ParkedTimeNeverDecreasesWhileWorkersParkAndWake) {
  auto stats = std::make_shared<RuntimeStats>();
  std::atomic<bool> done{false};
  std::atomic<uint64_t> reads{0}, decreases{0};
  std::thread reader([&] {
    std::chrono::nanoseconds last{0};
    while (!done.load()) {
      const auto workers = stats->workers();
      if (workers.empty()) continue;
      if (workers[0].parked < last) ++decreases;
      last = std::max(last, workers[0].parked);
      ++reads;
    }
  });
  auto results = weir::testing::run_workers(1, [&](Worker& worker) {
    stats->attach(worker);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (std::chrono::steady_clock::now() < end) {
      worker.step_or_park(std::chrono::microseconds(300));  // Spins 200 us, then parks.
    }
    return 0;
  });
  done.store(true);
  reader.join();
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_GT(stats->workers()[0].parks, 100u);
  EXPECT_GT(reads.load(), 1000u);
  EXPECT_EQ(decreases.load(), 0u) << "of " << reads.load() << " reads";
}

// weir ingest builds a new dataflow for every epoch, with new operator ids; a run whose upstream
// fails now and then restarts epochs for days, and must not keep every operator it ever had.
TEST(RuntimeStatsTest, OperatorsAndChannelsOfDroppedDataflowsAreForgotten) {
  constexpr int kEpochs = 200;
  auto stats = std::make_shared<RuntimeStats>();
  size_t per_epoch = 0, channels_per_epoch = 0;
  auto results = weir::testing::run_workers(1, [&](Worker& worker) {
    stats->attach(worker);
    for (int epoch = 0; epoch < kEpochs; ++epoch) {
      ProbeHandle<uint64_t> probe;
      const size_t index = worker.next_dataflow_index();
      auto input = worker.dataflow_named<uint64_t>("epoch", [&](Scope<uint64_t>& scope) {
        auto [handle, stream] = new_input<uint64_t>(scope);
        stream | map([](uint64_t x) { return x + 1; }) | probe_with(probe);
        // An async operator, as every weir ingest epoch has (its button takes a channel id
        // that is never a data channel).
        AsyncOperatorBuilder<uint64_t> builder("Async", scope);
        builder.add_output<uint64_t>();
        builder.build(
            [](AsyncContext&, std::span<CapabilitySet<uint64_t>>) { return absl::OkStatus(); });
        return std::move(handle);
      });
      input.send(1);
      input.advance_to(1);
      weir::testing::step_until(worker, [&] { return !probe.less_than(1); });
      if (epoch == 0) {
        per_epoch = stats->operators().size();
        channels_per_epoch = stats->channels().size();
      }
      // Every channel listed is this epoch's dataflow's.
      for (const auto& c : stats->channels()) {
        EXPECT_EQ(c.scope, std::vector<size_t>{index}) << "channel " << c.id << " epoch " << epoch;
      }
      worker.drop_dataflow(index);  // As weir ingest ends an epoch.
    }
    return 0;
  });
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_GT(per_epoch, 0u);
  EXPECT_TRUE(stats->operators().empty());
  EXPECT_LE(stats->operators_held(), per_epoch)
      << "after " << kEpochs << " dataflows of " << per_epoch << " operators each";
  ASSERT_GT(channels_per_epoch, 0u);
  EXPECT_TRUE(stats->channels().empty());
  // Each epoch's data channels and its progress channel.
  EXPECT_LE(stats->channels_held(), channels_per_epoch + 1)
      << "after " << kEpochs << " dataflows of " << channels_per_epoch << " channels each";
}

TEST(RuntimeStatsTest, AGraphRequestWithoutWorkersTimesOutEmpty) {
  const auto start = std::chrono::steady_clock::now();
  auto graphs = collect_graphs(request_graphs(), 1, std::chrono::milliseconds(200));
  EXPECT_TRUE(graphs.empty());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(150));
}

}  // namespace
}  // namespace weir::observe
