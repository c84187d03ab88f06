// `weir ctl` through the real binary: a create/ls/drop round trip, each refusal exits 2 and changes
// nothing (not the catalog's upper, no shard, no location), `status` joins the catalog with the
// rows of weir.health, and two shell loops racing their commits end with exactly the objects they
// meant, in a history that is a valid serial order.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "observe/http_get.h"
#include "testing/ports.h"
#include "tool_process.h"
#include <sys/wait.h>
#include <unistd.h>

#include "weir/ingest/status_shard.h"
#include "weir/persist/client.h"

namespace weir::tools {
namespace {

namespace fs = std::filesystem;
using ingest::testing::read_file;
using ingest::testing::run_tool;
using ingest::testing::spawn_tool;

struct Result {
  int exit_code = -1;
  std::string out;  // stdout and stderr.
};

class CtlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char base[] = "/tmp/weir-ctl-test-XXXXXX";
    ASSERT_NE(mkdtemp(base), nullptr);
    base_ = base;
    dir_ = (base_ / "store").string();
  }
  void TearDown() override { fs::remove_all(base_); }

  // `weir ctl --persist DIR args...`.
  Result ctl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {WEIR_TOOL_PATH, "ctl", "--persist", dir_};
    argv.insert(argv.end(), args.begin(), args.end());
    const fs::path log = base_ / ("run-" + std::to_string(runs_++) + ".log");
    Result result;
    result.exit_code = run_tool(argv, log);
    result.out = read_file(log);
    return result;
  }

  std::unique_ptr<persist::PersistClient> client() {
    return persist::PersistClient::open(persist::PersistLocation::in_directory(dir_)).value();
  }

  // The catalog shard's upper (0 without one) and every shard's name.
  std::pair<uint64_t, std::vector<std::string>> store_state() {
    std::unique_ptr<persist::PersistClient> c = client();
    uint64_t upper = 0;
    if (absl::StatusOr<persist::ShardDescription> d = c->describe("weir.catalog"); d.ok()) {
      upper = d->upper.time();
    }
    std::vector<std::string> names;
    const std::vector<persist::ShardName> shards = c->list_shards().value();
    for (const persist::ShardName& shard : shards) names.push_back(shard.name);
    return {upper, names};
  }

  void make_shard(const std::string& name) {
    persist::WriteHandle writer = client()->open_writer(name).value();
    ASSERT_TRUE(writer
                    .compare_and_append(std::vector<persist::Update>{{"row", 0, 1}},
                                        persist::Frontier(0), persist::Frontier(1))
                    ->is_appended());
    ASSERT_TRUE(writer.expire().ok());
  }

  fs::path base_;
  std::string dir_;
  int runs_ = 0;
};

// The tab-separated fields of each line of `text`.
std::vector<std::vector<std::string>> lines_of(const std::string& text) {
  std::vector<std::vector<std::string>> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(absl::StrSplit(line, '\t'));
  }
  return lines;
}

TEST_F(CtlTest, CreateListAndDrop) {
  Result r = ctl({"create", "source", "auction", "--source", "loadgen:auction", "--scale", "010"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "committed version 0\n");
  EXPECT_TRUE(fs::exists(fs::path(dir_) / "consensus.db")) << "the first create makes the store";
  r = ctl({"create", "view", "counts", "--view", "bids-per-auction"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "committed version 1\n");
  // A shard a live source writes can be held before it exists.
  r = ctl({"create", "hold", "audit", "--shard", "auction.bids", "--reader", "auditor"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "committed version 2\n");

  r = ctl({"ls"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto listed = lines_of(r.out);
  ASSERT_EQ(listed.size(), 3u) << r.out;
  const std::vector<std::vector<std::string>> expected = {
      {"auction", "source", "", "0", "--source loadgen:auction --scale 10"},
      {"audit", "hold", "", "2", "--shard auction.bids --reader auditor"},
      {"counts", "view", "", "1",
       "--view bids-per-auction --output view.bids-per-auction (reads auction.bids)"}};
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(listed[i].size(), 5u) << r.out;
    EXPECT_TRUE(listed[i][2].starts_with("o")) << r.out;
    for (const size_t column : {0, 1, 3, 4}) EXPECT_EQ(listed[i][column], expected[i][column]);
  }
  EXPECT_EQ(lines_of(ctl({"ls", "--version", "1"}).out).size(), 1u);

  r = ctl({"drop", "audit"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "committed version 3\n");
  r = ctl({"ls"});
  EXPECT_EQ(lines_of(r.out).size(), 2u) << r.out;
  r = ctl({"history"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto changes = lines_of(r.out);
  ASSERT_EQ(changes.size(), 4u) << r.out;
  EXPECT_EQ(changes[3][0], "3");
  EXPECT_EQ(changes[3][1], "drop");
  EXPECT_EQ(changes[3][2], "audit");
  EXPECT_EQ(changes[3][4], listed[1][2]) << "the object dropped is the one created";
  EXPECT_EQ(lines_of(ctl({"history", "--from", "2"}).out).size(), 2u);
  // Nothing but the catalog was created: the objects' shards are the replica's to make.
  EXPECT_EQ(store_state().second, std::vector<std::string>{"weir.catalog"});
}

// Each refusal: exit 2, an error naming the object and the thing, and nothing changed.
TEST_F(CtlTest, EachRefusalExitsTwoAndChangesNothing) {
  // On a location where nothing is: not even the location is created.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"create", "view", "top", "--view", "max-bid"},
           {"create", "hold", "audit", "--shard", "orders", "--reader", "r"},
           {"drop", "nosuch"},
           {"ls"},
           {"status"},
           {"history"}}) {
    const Result r = ctl(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.out;
    EXPECT_FALSE(fs::exists(dir_)) << args[0] << " created " << dir_;
  }

  make_shard("orders");
  ASSERT_EQ(ctl({"create", "hold", "audit", "--shard", "orders", "--reader", "r"}).exit_code, 0);
  const auto refused = [&](const std::vector<std::string>& args,
                           const std::vector<std::string>& says) {
    const auto before = store_state();
    const Result r = ctl(args);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    for (const std::string& text : says) {
      EXPECT_NE(r.out.find(text), std::string::npos) << "\"" << text << "\" not in: " << r.out;
    }
    EXPECT_EQ(store_state(), before) << "changed by: " << r.out;
  };
  // A view over shards that do not exist (no shard gets created).
  refused({"create", "view", "top", "--view", "max-bid"},
          {"view \"top\"", "\"auction.bids\" does not exist"});
  ASSERT_EQ(ctl({"create", "source", "auction", "--source", "loadgen:auction"}).exit_code, 0);
  ASSERT_EQ(ctl({"create", "view", "counts", "--view", "bids-per-auction"}).exit_code, 0);

  refused({"drop", "nosuch"}, {"there is no catalog object \"nosuch\""});
  refused({"create", "hold", "audit", "--shard", "orders", "--reader", "s"},
          {"\"audit\" exists already"});
  refused({"create", "hold", "audit2", "--shard", "orders", "--reader", "r"},
          {"hold \"audit2\"", "holds \"orders\" already (hold \"audit\")"});
  refused({"create", "hold", "weir.mine", "--shard", "orders", "--reader", "t"},
          {"NAME", "is reserved"});
  refused({"create", "source", "c", "--source", "loadgen:counter", "--scale", "-1"},
          {"--scale", "expected a whole number"});
  refused({"create", "source", "c", "--source", "loadgen:counter", "--add-after", "1"},
          {"--add-after"});
  refused({"create", "source", "again", "--source", "loadgen:auction"},
          {"source \"again\" would write auction.*", "source \"auction\""});
  refused({"create", "source", "shop", "--source", "postgres", "--conn", "host=db password=pw",
           "--publication", "p"},
          {"source \"shop\"", "--conn holds a password"});
  refused({"create", "view", "counts2", "--view", "bids-per-auction"},
          {"\"view.bids-per-auction\" is written by view \"counts\""});
  refused({"drop", "auction"}, {"cannot drop source \"auction\"", "view \"counts\""});
  refused({"status", "nosuch"}, {"no catalog object \"nosuch\""});
  refused({"ls", "--version", "x"}, {"--version"});
}

TEST_F(CtlTest, StatusJoinsTheCatalogWithTheReplicasHealthRows) {
  make_shard("orders");
  for (const std::string name : {"a", "b", "c"}) {
    ASSERT_EQ(ctl({"create", "hold", name, "--shard", "orders", "--reader", name}).exit_code, 0);
  }
  ASSERT_EQ(ctl({"drop", "c"}).exit_code, 0);
  std::map<std::string, std::string> ids;  // name -> object id
  for (const auto& line : lines_of(ctl({"history"}).out)) ids[line[2]] = line[4];

  Result r = ctl({"status"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "a\thold\t" + ids["a"] + "\tpending (no replica has reported)\t\n" +
                       "b\thold\t" + ids["b"] + "\tpending (no replica has reported)\t\n");

  // Rows as a replica writes them: a running, b's from an earlier object of that name, c dropped.
  {
    std::shared_ptr<persist::PersistClient> c = client();
    auto health = ingest::StatusShard::open(c, "weir.health", 7).value();
    ASSERT_TRUE(health
                    ->update({{"weir.catalog",
                               "weir.catalog running execution=7 object= "
                               "restarts=0"},
                              {"a", "a stalled execution=7 object=" + ids["a"] +
                                        " restarts=2 error=UNAVAILABLE: upstream is down"},
                              {"b", "b running execution=6 object=o-earlier restarts=0"},
                              {"c", "c dropped execution=7 object=" + ids["c"] + " restarts=0"}})
                    .ok());
    ASSERT_TRUE(health->expire().ok());
  }
  r = ctl({"status"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out,
            "weir.catalog\tcatalog\t-\trunning\texecution=7 restarts=0\n"
            "a\thold\t" +
                ids["a"] +
                "\tstalled\texecution=7 restarts=2 error=UNAVAILABLE: upstream is down\n"
                "b\thold\t" +
                ids["b"] +
                "\tpending (no replica has reported)\t\n"
                "c\t-\t" +
                ids["c"] + "\tdropped\texecution=7 restarts=0\n");
  r = ctl({"status", "c"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "c\t-\t" + ids["c"] + "\tdropped\texecution=7 restarts=0\n");
}

// `status --history` prints the transitions weir.health_history holds, in the order the replicas
// recorded them (by execution, then seq; not by the clock, which went back here), skipping rows
// that do not parse.
TEST_F(CtlTest, StatusHistoryPrintsTheRecordedTransitionsInOrder) {
  make_shard("orders");
  ASSERT_EQ(ctl({"create", "hold", "a", "--shard", "orders", "--reader", "a"}).exit_code, 0);
  Result r = ctl({"status", "--history"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "") << "no replica has recorded anything";
  {
    std::shared_ptr<persist::PersistClient> c = client();
    persist::WriteHandle writer = c->open_writer("weir.health_history").value();
    const std::vector<persist::Update> rows = {
        {"a running execution=7 object=oA restarts=0 seq=1 at=1764823200123", 5, 1},
        {"a starting execution=7 object=oA restarts=0 seq=0 at=1764823200100", 5, 1},
        {"b stalled execution=8 object=oB restarts=1 seq=0 at=1764823100000 error=UNAVAILABLE: "
         "down at=5",
         5, 1},
        {"not a transition", 5, 1},
        {"a dropped execution=8 object=oA restarts=0 seq=1 at=1764823100001", 5, 1},
    };
    ASSERT_TRUE(
        writer.compare_and_append(rows, persist::Frontier(0), persist::Frontier(6))->is_appended());
    ASSERT_TRUE(writer.expire().ok());
  }
  r = ctl({"status", "--history"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out,
            "2025-12-04T04:40:00.100Z\ta\toA\tstarting\texecution=7 restarts=0\n"
            "2025-12-04T04:40:00.123Z\ta\toA\trunning\texecution=7 restarts=0\n"
            "2025-12-04T04:38:20.000Z\tb\toB\tstalled\texecution=8 restarts=1 "
            "error=UNAVAILABLE: down at=5\n"
            "2025-12-04T04:38:20.001Z\ta\toA\tdropped\texecution=8 restarts=0\n");
  r = ctl({"status", "a", "--history"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(lines_of(r.out).size(), 3u) << r.out;
  r = ctl({"status", "b", "--history"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(lines_of(r.out).size(), 1u) << r.out;
  r = ctl({"status", "nosuch", "--history"});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("no catalog object \"nosuch\""), std::string::npos) << r.out;
}

// `hold advance` commits a replace that moves the hold's since forward (the replica then moves
// the hold): never back from where the catalog or the hold itself is, never past the shard's upper,
// and only for a hold; each refusal exits 2 and commits nothing.
TEST_F(CtlTest, HoldAdvanceMovesAHoldForwardAndNeverBack) {
  {
    persist::WriteHandle writer = client()->open_writer("orders").value();
    std::vector<persist::Update> rows;
    for (uint64_t t = 0; t < 10; ++t) rows.push_back({"row" + std::to_string(t), t, 1});
    ASSERT_TRUE(writer.compare_and_append(rows, persist::Frontier(0), persist::Frontier(10))
                    ->is_appended());
    ASSERT_TRUE(writer.expire().ok());
  }
  ASSERT_EQ(ctl({"create", "hold", "audit", "--shard", "orders", "--reader", "a"}).exit_code, 0);
  ASSERT_EQ(ctl({"create", "source", "auction", "--source", "loadgen:auction"}).exit_code, 0);
  Result r = ctl({"hold", "advance", "audit", "--to", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "committed version 2\n");
  r = ctl({"ls"});
  EXPECT_NE(r.out.find("--shard orders --reader a --since 4"), std::string::npos) << r.out;
  r = ctl({"history", "--from", "2"});
  EXPECT_NE(r.out.find("2\treplace\taudit\thold"), std::string::npos) << r.out;

  const auto refused = [&](const std::vector<std::string>& args, const std::string& says) {
    const auto before = store_state();
    const Result refusal = ctl(args);
    EXPECT_EQ(refusal.exit_code, 2) << refusal.out;
    EXPECT_NE(refusal.out.find(says), std::string::npos)
        << "\"" << says << "\" not in " << refusal.out;
    EXPECT_EQ(store_state(), before) << "changed by: " << refusal.out;
  };
  refused({"hold", "advance", "audit", "--to", "3"}, "only moves forward");
  refused({"hold", "advance", "audit", "--to", "4"}, "would change nothing");
  refused({"hold", "advance", "audit", "--to", "11"}, "past the upper of \"orders\" (10)");
  refused({"hold", "advance", "auction", "--to", "5"}, "\"auction\" is a source, not a hold");
  refused({"hold", "advance", "nosuch", "--to", "5"}, "no catalog object \"nosuch\"");

  // The hold as a replica registered and moved it (to 7): not back from there either.
  std::string id;
  for (const auto& line : lines_of(ctl({"ls"}).out)) {
    if (line[0] == "audit") id = line[2];
  }
  {
    std::unique_ptr<persist::PersistClient> c = client();
    const auto reader = persist::CriticalReaderId::parse("c" + id.substr(1)).value();
    persist::SinceHandle hold = c->open_critical_since("orders", reader, "catalog hold a").value();
    ASSERT_TRUE(
        hold.compare_and_downgrade_since(hold.epoch(), hold.epoch(), persist::Frontier(7)).ok());
  }
  refused({"hold", "advance", "audit", "--to", "6"}, "at since 7");
  r = ctl({"hold", "advance", "audit", "--to", "8"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

// Process I of a cluster serves --http PORT on PORT + I: one past 65535 is refused as a usage
// error (2) naming the flag before anything starts, not an unavailable server (1), which a
// supervisor would restart forever.
TEST_F(CtlTest, ReplicaHttpPortPlusProcessPast65535IsAUsageError) {
  const fs::path hosts = base_ / "hosts";
  {
    std::ofstream out(hosts);
    out << "127.0.0.1:1\n127.0.0.1:2\n";
  }
  const fs::path log = base_ / "replica.log";
  const int code = run_tool({WEIR_TOOL_PATH, "replica", "--persist", dir_, "--http", "65535", "-n",
                             "2", "-p", "1", "-h", hosts.string()},
                            log);
  const std::string out = read_file(log);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("65536"), std::string::npos) << out;
  EXPECT_NE(out.find("--http"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_)) << "a refused start touches no store";
}

// Two processes create one name at once, ten times: one wins, the other is refused (2: it read the
// winner's version) or reports the conflict (3: it had validated before the winner committed).
TEST_F(CtlTest, ARaceForOneNameHasOneWinner) {
  make_shard("orders");
  int conflicts = 0;
  for (int round = 0; round < 10; ++round) {
    const std::string name = "n" + std::to_string(round);
    std::vector<pid_t> pids;
    std::vector<fs::path> logs;
    for (const std::string reader : {"r", "s"}) {
      logs.push_back(base_ / (name + reader + ".log"));
      pids.push_back(spawn_tool({WEIR_TOOL_PATH, "ctl", "--persist", dir_, "create", "hold", name,
                                 "--shard", "orders", "--reader", reader + name},
                                logs.back()));
    }
    std::multiset<int> codes;
    for (size_t i = 0; i < pids.size(); ++i) {
      int status = 0;
      ASSERT_EQ(waitpid(pids[i], &status, 0), pids[i]);
      ASSERT_TRUE(WIFEXITED(status));
      codes.insert(WEXITSTATUS(status));
      const std::string out = read_file(logs[i]);
      if (WEXITSTATUS(status) == 3) {
        ++conflicts;
        EXPECT_NE(out.find("ABORTED: conflict: \"" + name + "\" was created by version"),
                  std::string::npos)
            << out;
      } else if (WEXITSTATUS(status) == 2) {
        EXPECT_NE(out.find("exists already"), std::string::npos) << out;
      }
    }
    EXPECT_EQ(codes.count(0), 1u) << "round " << round;
    EXPECT_EQ(codes.count(2) + codes.count(3), 1u) << "round " << round;
  }
  std::printf("%d of 10 losers reported a conflict (3), the others a refusal (2)\n", conflicts);
  EXPECT_EQ(lines_of(ctl({"ls"}).out).size(), 10u);
}

// Two shell loops, each creating its own names and dropping every other one right after creating
// the next, race their commits through one SQLite store: every command succeeds, and the catalog
// ends with exactly the names each meant to keep, in a history that is a valid serial order. A
// `weir replica` follows meanwhile: its /status, sampled, runs exactly the catalog's objects at
// the version it says it reconciled.
TEST_F(CtlTest, TwoConcurrentLoopsEndWithTheExpectedObjects) {
  constexpr int kNames = 100;
  make_shard("orders");
  const int port = weir::testing::free_ports(1)[0];
  const pid_t replica = spawn_tool({WEIR_TOOL_PATH, "replica", "--persist", dir_, "--poll-ms", "10",
                                    "--http", "127.0.0.1:" + std::to_string(port)},
                                   base_ / "replica.log");
  // (version, the objects run) as /status says, every few milliseconds.
  std::vector<std::pair<uint64_t, std::set<std::string>>> samples;  // Under samples_mu.
  std::mutex samples_mu;
  std::atomic<bool> sampling{true};
  std::thread sampler([&] {
    while (sampling.load()) {
      const observe::testing::HttpResult got = observe::testing::http_get(port, "/status");
      if (got.status == 200) {
        const nlohmann::json status = nlohmann::json::parse(got.body, nullptr, false);
        if (!status.is_discarded() && status["reconciled_version"].is_number()) {
          std::set<std::string> objects;
          for (const auto& object : status["objects"]) {
            objects.insert(object["name"].get<std::string>());
          }
          const std::lock_guard<std::mutex> lock(samples_mu);
          samples.emplace_back(status["reconciled_version"].get<uint64_t>(), std::move(objects));
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  const auto loop = [&](const std::string& prefix) {
    const std::string weir = std::string(WEIR_TOOL_PATH) + " ctl --persist " + dir_;
    const std::string script = "for i in $(seq 0 " + std::to_string(kNames - 1) + "); do " + weir +
                               " create hold " + prefix + "$i --shard orders --reader " + prefix +
                               "$i > /dev/null || exit 1; " + "if [ $((i % 2)) = 1 ]; then " +
                               weir + " drop " + prefix +
                               "$((i - 1)) > /dev/null || exit 1; fi; done";
    return spawn_tool({"/bin/bash", "-c", script}, base_ / (prefix + ".log"));
  };
  const auto start = std::chrono::steady_clock::now();
  const pid_t first = loop("x");
  const pid_t second = loop("y");
  for (const pid_t pid : {first, second}) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << read_file(base_ / "x.log") << read_file(base_ / "y.log");
  }
  std::printf("2 x %d commits in %.1f s\n", kNames * 3 / 2,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());

  std::set<std::string> expected;
  for (const std::string prefix : {"x", "y"}) {
    for (int i = 1; i < kNames; i += 2) expected.insert(prefix + std::to_string(i));
  }
  std::set<std::string> listed;
  for (const auto& line : lines_of(ctl({"ls"}).out)) listed.insert(line[0]);
  EXPECT_EQ(listed, expected);

  // The history: versions dense from 0, each create of a name not live, each drop of a live one.
  const Result history = ctl({"history"});
  ASSERT_EQ(history.exit_code, 0) << history.out;
  const auto changes = lines_of(history.out);
  ASSERT_EQ(changes.size(), static_cast<size_t>(2 * (kNames + kNames / 2)));
  std::map<std::string, std::string> live;  // name -> object id
  std::set<std::string> interleaved;
  for (size_t v = 0; v < changes.size(); ++v) {
    const auto& change = changes[v];
    ASSERT_EQ(change.size(), 6u) << history.out;
    EXPECT_EQ(change[0], std::to_string(v));
    if (change[1] == "create") {
      EXPECT_TRUE(live.emplace(change[2], change[4]).second)
          << "version " << v << " creates " << change[2] << ", which is live";
    } else {
      EXPECT_EQ(change[1], "drop");
      EXPECT_EQ(live[change[2]], change[4])
          << "version " << v << " drops " << change[2] << ", which is not live as that object";
      live.erase(change[2]);
    }
    if (v < changes.size() / 2) interleaved.insert(change[2].substr(0, 1));
  }
  std::set<std::string> replayed;
  for (const auto& [name, id] : live) replayed.insert(name);
  EXPECT_EQ(replayed, expected);
  EXPECT_EQ(interleaved, (std::set<std::string>{"x", "y"})) << "the loops did not race";

  // The replica, sampled: at each version it reconciled, the catalog's objects (replayed from
  // the history above) and no others. Then it catches up with the last version.
  const auto catalog_at = [&changes](uint64_t version) {
    std::set<std::string> names;
    for (uint64_t v = 0; v < version && v < changes.size(); ++v) {
      if (changes[v][1] == "create") {
        names.insert(changes[v][2]);
      } else {
        names.erase(changes[v][2]);
      }
    }
    return names;
  };
  const auto caught_up = [&] {
    const std::lock_guard<std::mutex> lock(samples_mu);
    return !samples.empty() && samples.back().first == changes.size();
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!caught_up() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  sampling = false;
  sampler.join();
  ::kill(replica, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(replica, &status, 0), replica);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(base_ / "replica.log");
  ASSERT_FALSE(samples.empty()) << read_file(base_ / "replica.log");
  std::set<uint64_t> versions;
  for (const auto& [version, objects] : samples) {
    versions.insert(version);
    ASSERT_EQ(objects, catalog_at(version)) << "the replica at version " << version;
  }
  EXPECT_EQ(samples.back().first, changes.size()) << "the replica caught up";
  EXPECT_EQ(samples.back().second, expected);
  std::printf("%zu samples of the replica at %zu distinct versions\n", samples.size(),
              versions.size());
}

}  // namespace
}  // namespace weir::tools
