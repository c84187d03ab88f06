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
#include <string>
#include <thread>
#include <vector>

#include "../ingest/tool_process.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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
  const fs::path dir =
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

}  // namespace
}  // namespace weir::control
