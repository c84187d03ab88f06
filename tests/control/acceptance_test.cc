// Issue 18's acceptance, with real processes: `weir ctl` commits and exits, `weir replica` runs
// what the catalog says with no controller alive, survives SIGKILLs under `weir-launch --restart`,
// and a second replica fences the first. Every shard must equal the generator's state (exactly
// once).

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../ingest/tool_process.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "testing/ports.h"
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "weir/control/catalog.h"
#include "weir/control/placement.h"
#include "weir/persist/client.h"
#include "weir/sources/loadgen/generator.h"

namespace weir::control {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using ingest::testing::read_file;
using ingest::testing::run_tool;
using ingest::testing::spawn_tool;

constexpr uint64_t kScale = 5;
constexpr uint64_t kUntil = 6000;

fs::path fresh_dir(const std::string& name) {
  fs::path dir =
      fs::temp_directory_path() / absl::StrCat("weir-acceptance-", name, "-", ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// `weir ctl create source auction` at `rate` changes per second, until kUntil.
int create_source(const fs::path& dir, const std::string& rate) {
  return run_tool(
      {WEIR_TOOL_PATH, "ctl", "--persist", (dir / "store").string(), "create", "source", "auction",
       "--source", "loadgen:auction", "--scale", std::to_string(kScale), "--until",
       std::to_string(kUntil), "--rate", rate, "--compaction-window", "18446744073709551615"},
      dir / "ctl.log");
}

std::unique_ptr<persist::PersistClient> client_of(const fs::path& dir) {
  return persist::PersistClient::open(
             persist::PersistLocation::in_directory((dir / "store").string()))
      .value();
}

uint64_t upper_of(persist::PersistClient& client, const std::string& shard) {
  auto d = client.describe(shard);
  if (!d.ok()) return 0;
  return d->upper.is_empty() ? UINT64_MAX : d->upper.time();
}

// weir.health's row of `name`, or "".
std::string health_of(persist::PersistClient& client, const std::string& name) {
  auto cursor = client.inspect_snapshot("weir.health");
  if (!cursor.ok()) return "";
  std::string row;
  while (cursor->next()) {
    if (cursor->diff() > 0 && cursor->data().starts_with(name + " ")) row = cursor->data();
  }
  return row;
}

bool eventually(const std::function<bool()>& done, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

// Every auction shard holds the generator's state at 0, kUntil / 2 and kUntil: nothing lost,
// nothing twice.
void expect_exactly_once(persist::PersistClient& client) {
  sources::loadgen::GeneratorOptions options;
  options.kind = "auction";
  options.scale = kScale;
  auto generator = sources::loadgen::Generator::make(options).value();
  for (const std::string table : {"users", "auctions", "bids"}) {
    const uint32_t t = *generator.table_index(table);
    for (uint64_t as_of : {uint64_t{0}, kUntil / 2, kUntil}) {
      std::map<std::string, int64_t> rows;
      auto cursor = client.inspect_snapshot("auction." + table, as_of);
      ASSERT_TRUE(cursor.ok()) << cursor.status();
      while (cursor->next()) rows[std::string(cursor->data())] += cursor->diff();
      ASSERT_TRUE(cursor->status().ok()) << cursor->status();
      std::erase_if(rows, [](const auto& row) { return row.second == 0; });
      EXPECT_TRUE(rows == generator.state_at(t, as_of)) << table << " differs at " << as_of;
    }
  }
}

int wait_exit(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  int status = 0;
  while (Clock::now() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "process " << pid << " still running after " << limit.count() << " s";
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

// The pids of `weir replica` processes on `dir`'s store (weir-launch's children).
std::vector<pid_t> replicas_on(const fs::path& dir) {
  std::vector<pid_t> pids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string program = cmdline.substr(0, cmdline.find('\0'));
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (program == WEIR_TOOL_PATH && absl::StrContains(cmdline, " replica ") &&
        absl::StrContains(cmdline, (dir / "store").string())) {
      pids.push_back(std::stoi(name));
    }
  }
  return pids;
}

// The `weir replica` processes on `dir`'s store, by pid: their -p (0 when not given).
std::map<pid_t, size_t> replica_processes(const fs::path& dir) {
  std::map<pid_t, size_t> processes;
  for (const pid_t pid : replicas_on(dir)) {
    std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"));
    std::vector<std::string> args;
    for (std::string arg; std::getline(in, arg, '\0');) args.push_back(arg);
    size_t process = 0;
    for (size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i] == "-p") process = std::stoul(args[i + 1]);
    }
    processes[pid] = process;
  }
  return processes;
}

// `weir ctl create hold NAME --shard auction.bids --reader NAME`.
int create_hold(const fs::path& dir, const std::string& name) {
  return run_tool({WEIR_TOOL_PATH, "ctl", "--persist", (dir / "store").string(), "create", "hold",
                   name, "--shard", "auction.bids", "--reader", name},
                  dir / "ctl.log");
}

// The lines of a weir-launch log that process `process` wrote and that contain `text`.
size_t lines_of(const std::string& log, size_t process, const std::string& text) {
  size_t count = 0;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(absl::StrCat("[", process, "] ")) && absl::StrContains(line, text)) {
      ++count;
    }
  }
  return count;
}

// A controller commits and exits; the replica ingests with no controller alive; everything is
// killed mid-way, and a replica started alone reconstructs the object from the catalog and
// finishes it exactly once.
TEST(AcceptanceTest, ZeroControllersAReplicaAloneResumesFromTheCatalog) {
  const fs::path dir = fresh_dir("zero");
  ASSERT_EQ(create_source(dir, "1500"), 0) << read_file(dir / "ctl.log");
  const std::vector<std::string> replica = {WEIR_TOOL_PATH,           "replica",   "--persist",
                                            (dir / "store").string(), "--poll-ms", "20"};
  pid_t pid = spawn_tool(replica, dir / "replica-0.log");
  auto client = client_of(dir);
  ASSERT_TRUE(eventually([&] { return upper_of(*client, "auction.bids") > kUntil / 4; },
                         std::chrono::seconds(60)))
      << read_file(dir / "replica-0.log");
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  wait_exit(pid, std::chrono::seconds(10));
  ASSERT_LT(upper_of(*client, "auction.bids"), kUntil) << "killed too late to test a resume";

  pid = spawn_tool(replica, dir / "replica-1.log");
  ASSERT_TRUE(eventually(
      [&] { return absl::StrContains(health_of(*client, "auction"), "completed execution=1"); },
      std::chrono::seconds(120)))
      << health_of(*client, "auction") << "\n"
      << read_file(dir / "replica-1.log");
  kill(pid, SIGTERM);
  const int status = wait_exit(pid, std::chrono::seconds(60));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(dir / "replica-1.log");
  expect_exactly_once(*client);
  fs::remove_all(dir);
}

// Ten SIGKILLs of the replica at random moments under `weir-launch --restart`: restarted each
// time, and the shards equal an uninterrupted run's. Prints the recovery times (kill to the next
// append of auction.bids).
TEST(AcceptanceTest, AReplicaKilledTenTimesUnderTheSupervisorLosesNothing) {
  const fs::path dir = fresh_dir("kills");
  ASSERT_EQ(create_source(dir, "400"), 0) << read_file(dir / "ctl.log");
  const pid_t launch =
      spawn_tool({WEIR_LAUNCH_PATH, "--restart", "--backoff", "0.05:0.2", "--restart-log",
                  (dir / "restarts.jsonl").string(), "-n", "1", "-w", "1", "--", WEIR_TOOL_PATH,
                  "replica", "--persist", (dir / "store").string(), "--poll-ms", "20"},
                 dir / "launch.log");
  auto client = client_of(dir);
  std::mt19937 rng(20261204);
  std::vector<double> recoveries;
  for (int kill_number = 0; kill_number < 10; ++kill_number) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(300, 1200)(rng)));
    std::vector<pid_t> pids;
    ASSERT_TRUE(
        eventually([&] { return !(pids = replicas_on(dir)).empty(); }, std::chrono::seconds(30)))
        << read_file(dir / "launch.log");
    const uint64_t before = upper_of(*client, "auction.bids");
    if (before >= kUntil) break;  // Done already: nothing left to interrupt.
    const auto killed_at = Clock::now();
    for (pid_t pid : pids) kill(pid, SIGKILL);
    // Recovery: the next append after the kill (by the restarted replica).
    if (eventually([&] { return upper_of(*client, "auction.bids") > before; },
                   std::chrono::seconds(60))) {
      recoveries.push_back(std::chrono::duration<double>(Clock::now() - killed_at).count());
    }
  }
  ASSERT_TRUE(
      eventually([&] { return absl::StrContains(health_of(*client, "auction"), "completed"); },
                 std::chrono::seconds(180)))
      << health_of(*client, "auction") << "\n"
      << read_file(dir / "launch.log");
  kill(launch, SIGTERM);
  wait_exit(launch, std::chrono::seconds(60));
  std::sort(recoveries.begin(), recoveries.end());
  ASSERT_FALSE(recoveries.empty());
  std::printf("recovery (kill to the next append), %zu kills: median %.2f s, max %.2f s\n",
              recoveries.size(), recoveries[recoveries.size() / 2], recoveries.back());
  EXPECT_GE(recoveries.size(), 5u) << "most kills interrupted a running ingestion";
  EXPECT_TRUE(absl::StrContains(read_file(dir / "restarts.jsonl"), "\"restart\": 1") ||
              absl::StrContains(read_file(dir / "restarts.jsonl"), "\"restart\":1"))
      << read_file(dir / "restarts.jsonl");
  expect_exactly_once(*client);
  fs::remove_all(dir);
}

// Split brain: a second replica on the same catalog fences the first, which exits 3 naming it;
// the health relation ends with the second's rows; the shards are exactly once.
TEST(AcceptanceTest, ASecondReplicaFencesTheFirstWhichExitsNamingIt) {
  const fs::path dir = fresh_dir("split");
  ASSERT_EQ(create_source(dir, "1000"), 0) << read_file(dir / "ctl.log");
  const std::vector<std::string> replica = {WEIR_TOOL_PATH,           "replica",   "--persist",
                                            (dir / "store").string(), "--poll-ms", "20"};
  const pid_t first = spawn_tool(replica, dir / "first.log");
  auto client = client_of(dir);
  ASSERT_TRUE(
      eventually([&] { return upper_of(*client, "auction.bids") > 500; }, std::chrono::seconds(60)))
      << read_file(dir / "first.log");
  const pid_t second = spawn_tool(replica, dir / "second.log");
  int status = wait_exit(first, std::chrono::seconds(60));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3) << read_file(dir / "first.log");
  EXPECT_TRUE(absl::StrContains(read_file(dir / "first.log"),
                                "replica execution 0 is fenced by execution 1"))
      << read_file(dir / "first.log");
  ASSERT_TRUE(eventually(
      [&] { return absl::StrContains(health_of(*client, "auction"), "completed execution=1"); },
      std::chrono::seconds(120)))
      << health_of(*client, "auction") << "\n"
      << read_file(dir / "second.log");
  kill(second, SIGTERM);
  status = wait_exit(second, std::chrono::seconds(60));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(dir / "second.log");
  expect_exactly_once(*client);
  fs::remove_all(dir);
}

// A replica of two processes under `weir-launch --restart`: every object runs on the process
// placement() names, and on it alone (its health row and the processes' logs say so); a SIGKILL
// of the process that ingests restarts the whole cluster as a new execution, and the ingestion
// ends exactly as an uninterrupted run.
TEST(AcceptanceTest, AClusterOfTwoRunsEachObjectOnOneProcessAndSurvivesAKill) {
  const fs::path dir = fresh_dir("cluster");
  ASSERT_EQ(create_source(dir, "400"), 0) << read_file(dir / "ctl.log");
  auto client = client_of(dir);
  // Holds until both processes have objects (ids are random: placement decides).
  std::set<size_t> used;
  for (int i = 0; i < 20 && (used.size() < 2 || i < 3); ++i) {
    ASSERT_EQ(create_hold(dir, absl::StrCat("hold", i)), 0) << read_file(dir / "ctl.log");
    used.clear();
    const CatalogSnapshot now = read(*client).value();
    for (const auto& [name, object] : now.objects) {
      used.insert(placement(object.object_id, 2));
    }
  }
  ASSERT_EQ(used.size(), 2u);
  const CatalogSnapshot catalog = read(*client).value();
  const pid_t launch =
      spawn_tool({WEIR_LAUNCH_PATH, "--restart", "--backoff", "0.05:0.2", "--restart-log",
                  (dir / "restarts.jsonl").string(), "-n", "2", "-w", "1", "--", WEIR_TOOL_PATH,
                  "replica", "--persist", (dir / "store").string(), "--poll-ms", "20"},
                 dir / "launch.log");
  // Every object reports from its process, in the first execution.
  const auto reported = [&](const std::string& execution) {
    for (const auto& [name, object] : catalog.objects) {
      const std::string row = health_of(*client, name);
      if (!absl::StrContains(row, absl::StrCat(execution, " object=", object.object_id)) ||
          !absl::StrContains(row, absl::StrCat(" process=", placement(object.object_id, 2))) ||
          !(row.starts_with(name + " running") || row.starts_with(name + " completed"))) {
        return false;
      }
    }
    return true;
  };
  ASSERT_TRUE(eventually([&] { return reported("execution=0"); }, std::chrono::seconds(60)))
      << read_file(dir / "launch.log");
  const std::string log = read_file(dir / "launch.log");
  for (const auto& [name, object] : catalog.objects) {
    const size_t p = placement(object.object_id, 2);
    const std::string started = name + ": starting (object";
    EXPECT_EQ(lines_of(log, p, started), 1u) << name << "\n" << log;
    EXPECT_EQ(lines_of(log, 1 - p, started), 0u) << name << " runs on one process\n" << log;
  }

  // SIGKILL the process that ingests, mid-way.
  const size_t ingesting = placement(catalog.find("auction")->object_id, 2);
  ASSERT_TRUE(eventually([&] { return upper_of(*client, "auction.bids") > kUntil / 4; },
                         std::chrono::seconds(60)))
      << read_file(dir / "launch.log");
  bool killed = false;
  for (const auto& [pid, process] : replica_processes(dir)) {
    if (process == ingesting) killed = kill(pid, SIGKILL) == 0;
  }
  ASSERT_TRUE(killed) << read_file(dir / "launch.log");
  ASSERT_LT(upper_of(*client, "auction.bids"), kUntil) << "killed too late to test a resume";
  ASSERT_TRUE(
      eventually([&] { return absl::StrContains(health_of(*client, "auction"), "completed"); },
                 std::chrono::seconds(180)))
      << health_of(*client, "auction") << "\n"
      << read_file(dir / "launch.log");
  // The restarted cluster is a later execution, and every object is on its process again.
  EXPECT_FALSE(absl::StrContains(health_of(*client, "auction"), "execution=0 "))
      << health_of(*client, "auction");
  for (const auto& [name, object] : catalog.objects) {
    EXPECT_TRUE(absl::StrContains(health_of(*client, name),
                                  absl::StrCat(" process=", placement(object.object_id, 2))))
        << health_of(*client, name);
  }
  EXPECT_TRUE(absl::StrContains(read_file(dir / "restarts.jsonl"),
                                absl::StrCat("\"process\": ", ingesting)))
      << read_file(dir / "restarts.jsonl");
  kill(launch, SIGTERM);
  wait_exit(launch, std::chrono::seconds(60));
  expect_exactly_once(*client);
  fs::remove_all(dir);
}

// Split brain between clusters: a cluster of two processes, started by hand, is fenced by a
// second cluster (of three: the objects move) on the same catalog; every process of the first
// exits 3 naming the second's execution, and the shards are exactly once.
TEST(AcceptanceTest, ASecondClusterFencesEveryProcessOfTheFirst) {
  const fs::path dir = fresh_dir("clusters");
  ASSERT_EQ(create_source(dir, "1000"), 0) << read_file(dir / "ctl.log");
  ASSERT_EQ(create_hold(dir, "audit"), 0) << read_file(dir / "ctl.log");
  {
    std::ofstream hosts(dir / "hosts.txt");
    const std::vector<int> ports = weir::testing::free_ports(2);  // Distinct: bound together.
    hosts << "127.0.0.1:" << ports[0] << "\n127.0.0.1:" << ports[1] << "\n";
  }
  std::vector<pid_t> first;
  for (const std::string p : {"0", "1"}) {
    first.push_back(
        spawn_tool({WEIR_TOOL_PATH, "replica", "--persist", (dir / "store").string(), "--poll-ms",
                    "20", "-n", "2", "-p", p, "-h", (dir / "hosts.txt").string()},
                   dir / ("first-" + p + ".log")));
  }
  auto client = client_of(dir);
  ASSERT_TRUE(
      eventually([&] { return upper_of(*client, "auction.bids") > 500; }, std::chrono::seconds(60)))
      << read_file(dir / "first-0.log") << read_file(dir / "first-1.log");
  const pid_t second =
      spawn_tool({WEIR_LAUNCH_PATH, "-n", "3", "-w", "1", "--", WEIR_TOOL_PATH, "replica",
                  "--persist", (dir / "store").string(), "--poll-ms", "20"},
                 dir / "second.log");
  for (size_t p = 0; p < first.size(); ++p) {
    const fs::path log = dir / absl::StrCat("first-", p, ".log");
    const int status = wait_exit(first[p], std::chrono::seconds(60));
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3) << p << "\n" << read_file(log);
    EXPECT_TRUE(absl::StrContains(read_file(log), "replica execution 0 is fenced by execution 1"))
        << read_file(log);
  }
  ASSERT_TRUE(eventually(
      [&] { return absl::StrContains(health_of(*client, "auction"), "completed execution=1"); },
      std::chrono::seconds(120)))
      << health_of(*client, "auction") << "\n"
      << read_file(dir / "second.log");
  const CatalogSnapshot catalog = read(*client).value();
  for (const auto& [name, object] : catalog.objects) {
    const std::string row = health_of(*client, name);
    EXPECT_TRUE(absl::StrContains(row, absl::StrCat("execution=1 object=", object.object_id)) &&
                absl::StrContains(row, absl::StrCat(" process=", placement(object.object_id, 3))))
        << row;
  }
  kill(second, SIGTERM);
  wait_exit(second, std::chrono::seconds(60));
  expect_exactly_once(*client);
  fs::remove_all(dir);
}

// `weir pubsub` carries news between processes: `weir ctl` commits and the replica acts on it.
// SIGKILLed, it costs only latency: a change committed while it is down is picked up by the
// replica's poll, ingestion goes on; started again on its port, the relay reconnects. The shards
// end exactly once.
TEST(AcceptanceTest, WithPubSubKilledAndRestartedNothingIsMissed) {
  const fs::path dir = fresh_dir("pubsub");
  const std::string address = "127.0.0.1:" + std::to_string(weir::testing::free_ports(1)[0]);
  const std::vector<std::string> pubsub = {WEIR_TOOL_PATH, "pubsub", "--listen", address};
  pid_t server = spawn_tool(pubsub, dir / "pubsub-0.log");
  const pid_t replica =
      spawn_tool({WEIR_TOOL_PATH, "replica", "--persist", (dir / "store").string(), "--poll-ms",
                  "200", "--pubsub", address},
                 dir / "replica.log");
  const auto ctl = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {WEIR_TOOL_PATH,           "ctl",      "--persist",
                                     (dir / "store").string(), "--pubsub", address};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_tool(argv, dir / "ctl.log");
  };
  auto client = client_of(dir);
  ASSERT_TRUE(eventually(
      [&] {
        return absl::StrContains(read_file(dir / "replica.log"),
                                 "pubsub " + address + ": connected");
      },
      std::chrono::seconds(60)))
      << read_file(dir / "replica.log");
  ASSERT_EQ(ctl({"create", "source", "auction", "--source", "loadgen:auction", "--scale",
                 std::to_string(kScale), "--until", std::to_string(kUntil), "--rate", "1500",
                 "--compaction-window", "18446744073709551615"}),
            0)
      << read_file(dir / "ctl.log");
  ASSERT_TRUE(eventually([&] { return upper_of(*client, "auction.bids") > kUntil / 4; },
                         std::chrono::seconds(60)))
      << read_file(dir / "replica.log");

  ASSERT_EQ(kill(server, SIGKILL), 0);
  wait_exit(server, std::chrono::seconds(10));
  ASSERT_TRUE(eventually(
      [&] {
        return absl::StrContains(read_file(dir / "replica.log"), "pubsub " + address + ": lost");
      },
      std::chrono::seconds(60)))
      << read_file(dir / "replica.log");
  ASSERT_EQ(ctl({"create", "hold", "while-down", "--shard", "auction.bids", "--reader", "a"}), 0)
      << read_file(dir / "ctl.log");
  ASSERT_TRUE(eventually(
      [&] { return absl::StrContains(health_of(*client, "while-down"), "while-down running"); },
      std::chrono::seconds(60)))
      << "a change committed while the relay is down is picked up by the poll\n"
      << read_file(dir / "replica.log");
  ASSERT_LT(upper_of(*client, "auction.bids"), kUntil) << "the source ended too early to test";

  server = spawn_tool(pubsub, dir / "pubsub-1.log");
  const auto connections = [&] {
    const std::string log = read_file(dir / "replica.log");
    size_t count = 0;
    for (size_t at = log.find(": connected"); at != std::string::npos;
         at = log.find(": connected", at + 1)) {
      ++count;
    }
    return count;
  };
  ASSERT_TRUE(eventually([&] { return connections() >= 2; }, std::chrono::seconds(60)))
      << "the relay reconnects\n"
      << read_file(dir / "replica.log");
  ASSERT_EQ(ctl({"create", "hold", "when-back", "--shard", "auction.bids", "--reader", "b"}), 0)
      << read_file(dir / "ctl.log");
  ASSERT_TRUE(eventually(
      [&] { return absl::StrContains(health_of(*client, "when-back"), "when-back running"); },
      std::chrono::seconds(60)))
      << read_file(dir / "replica.log");
  ASSERT_TRUE(eventually(
      [&] { return absl::StrContains(health_of(*client, "auction"), "auction completed"); },
      std::chrono::seconds(120)))
      << health_of(*client, "auction") << "\n"
      << read_file(dir / "replica.log");

  kill(replica, SIGTERM);
  const int status = wait_exit(replica, std::chrono::seconds(60));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(dir / "replica.log");
  kill(server, SIGTERM);
  wait_exit(server, std::chrono::seconds(10));
  expect_exactly_once(*client);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace weir::control
