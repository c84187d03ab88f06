// Exactly once across crashes: `weir ingest` is killed with SIGKILL at random points (during the
// snapshot, while streaming, while appending) 20 times and restarted each time; the final shards
// equal an uninterrupted run's, with no row lost or duplicated.

#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "weir/ingest/ingest.h"
#include "weir/persist/client.h"

namespace weir::ingest {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kUntil = 6000;

std::vector<std::string> ingest_args(const fs::path& dir) {
  return {WEIR_TOOL_PATH, "ingest", "--source", "loadgen:auction", "--scale", "40", "--persist",
          dir.string(), "-w", "2", "--until", std::to_string(kUntil), "--rate", "8000", "--quiet",
          // The comparison reads every offset from 0 on: keep all of the history readable.
          "--compaction-window", "18446744073709551615"};
}

// Starts `weir ingest`; returns its pid.
pid_t spawn(const std::vector<std::string>& args) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

std::map<std::string, int64_t> contents(persist::PersistClient& client, const std::string& shard,
                                        uint64_t as_of) {
  auto reader = client.open_reader(shard);
  EXPECT_TRUE(reader.ok()) << reader.status();
  auto updates = reader->snapshot(as_of);
  EXPECT_TRUE(updates.ok()) << shard << ": " << updates.status();
  std::map<std::string, int64_t> result;
  if (updates.ok()) {
    for (const auto& u : *updates) result[u.data] += u.diff;
  }
  (void)reader->expire();
  return result;
}

TEST(CrashTest, KilledAndRestartedIngestEqualsAnUninterruptedRun) {
  const fs::path base = fs::temp_directory_path() / ("weir-crash-" + std::to_string(::getpid()));
  fs::remove_all(base);
  const fs::path crashed = base / "crashed", reference = base / "reference";
  fs::create_directories(crashed);
  fs::create_directories(reference);

  // The uninterrupted run.
  pid_t pid = spawn(ingest_args(reference));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "reference run failed: " << status;

  // Twenty runs killed at random points, then one to completion.
  std::mt19937 rng(20261130);
  int killed = 0;
  for (int i = 0; i < 20; ++i) {
    pid = spawn(ingest_args(crashed));
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(20, 500)(rng)));
    if (kill(pid, SIGKILL) == 0) ++killed;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
  }
  EXPECT_GE(killed, 15);  // Most runs died mid-way (a fast one may finish before its kill).
  pid = spawn(ingest_args(crashed));
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "final run failed: " << status;

  auto ref =
      persist::PersistClient::open(persist::PersistLocation::in_directory(reference.string()));
  auto got = persist::PersistClient::open(persist::PersistLocation::in_directory(crashed.string()));
  ASSERT_TRUE(ref.ok() && got.ok());
  for (const std::string table : {"users", "auctions", "bids"}) {
    const std::string shard = "auction." + table;
    for (uint64_t as_of : {uint64_t{0}, kUntil / 4, kUntil / 2, kUntil}) {
      auto expected = contents(**ref, shard, as_of);
      auto actual = contents(**got, shard, as_of);
      EXPECT_EQ(actual.size(), expected.size()) << shard << " at " << as_of;
      EXPECT_TRUE(actual == expected) << shard << " differs at offset " << as_of;
      for (const auto& [row, count] : actual)
        ASSERT_EQ(count, 1) << shard << ": duplicated or retracted row " << row;
    }
  }
  fs::remove_all(base);
}

}  // namespace
}  // namespace weir::ingest
