// Exactly once across crashes: `weir ingest` is killed with SIGKILL at random points (during the
// snapshot, while streaming, while appending) 20 times and restarted each time; the final shards
// equal an uninterrupted run's, with no row lost or duplicated.

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <thread>

#include "../support/postgres/postgres_fixture.h"
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "weir/ingest/ingest.h"
#include "weir/persist/client.h"

namespace weir::ingest {
namespace {

using weir::testing::postgres_fixture;

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

// Expects every auction shard to hold the generator's state (at `scale`) at offsets 0, until / 2
// and until.
void expect_generator_state(persist::PersistClient& client, uint64_t scale, uint64_t until) {
  sources::loadgen::GeneratorOptions generator_options;
  generator_options.kind = "auction";
  generator_options.scale = scale;
  auto generator = sources::loadgen::Generator::make(generator_options);
  ASSERT_TRUE(generator.ok()) << generator.status();
  for (const std::string table : {"users", "auctions", "bids"}) {
    const uint32_t t = *generator->table_index(table);
    for (uint64_t as_of : {uint64_t{0}, until / 2, until}) {
      EXPECT_TRUE(contents(client, "auction." + table, as_of) == generator->state_at(t, as_of))
          << table << " differs at offset " << as_of;
    }
  }
}

// Waits at most `limit` for `pid` to exit and returns its wait status; past it, kills the process
// and fails the test (a hung child must fail the test, not hold it until ctest's timeout).
int wait_for_exit(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  for (;;) {
    const pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid) return status;
    if (got < 0) {
      ADD_FAILURE() << "waitpid " << pid << ": " << std::strerror(errno);
      return -1;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "process " << pid << " still running after " << limit.count()
                    << " s: killed";
      kill(pid, SIGCONT);
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// Stops `pid` (SIGSTOP) at a moment it holds no write lock on the SQLite database `db`: while
// BEGIN IMMEDIATE finds the database busy, lets it run a little longer. SIGSTOP is asynchronous
// (a thread running on another core stops at its next entry into the kernel): the lock is checked
// only once waitpid has reported every thread stopped, or the process could take it in between.
bool stop_outside_write_transaction(pid_t pid, const fs::path& db_path) {
  sqlite3* db = nullptr;
  if (sqlite3_open(db_path.c_str(), &db) != SQLITE_OK) {
    ADD_FAILURE() << "cannot open " << db_path << ": " << sqlite3_errmsg(db);
    sqlite3_close(db);
    return false;
  }
  sqlite3_busy_timeout(db, 0);
  bool stopped = false;
  for (int attempt = 0; attempt < 1000 && !stopped; ++attempt) {
    if (kill(pid, SIGSTOP) != 0) break;
    int status = 0;
    if (waitpid(pid, &status, WUNTRACED) != pid || !WIFSTOPPED(status)) {
      ADD_FAILURE() << "process " << pid << " ended before it was stopped: " << status;
      break;
    }
    if (sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      stopped = true;
    } else {
      kill(pid, SIGCONT);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  sqlite3_close(db);
  EXPECT_TRUE(stopped) << "could not stop " << pid << " outside a write transaction";
  return stopped;
}

TEST(CrashTest, KilledAndRestartedIngestEqualsAnUninterruptedRun) {
  const fs::path base = fs::temp_directory_path() / ("weir-crash-" + std::to_string(::getpid()));
  fs::remove_all(base);
  const fs::path crashed = base / "crashed", reference = base / "reference";
  fs::create_directories(crashed);
  fs::create_directories(reference);

  // The uninterrupted run.
  pid_t pid = spawn(ingest_args(reference));
  int status = wait_for_exit(pid, std::chrono::seconds(300));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "reference run failed: " << status;

  // Twenty runs killed at random points, then one to completion.
  std::mt19937 rng(20261130);
  int killed = 0;
  for (int i = 0; i < 20; ++i) {
    pid = spawn(ingest_args(crashed));
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(20, 500)(rng)));
    if (kill(pid, SIGKILL) == 0) ++killed;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);  // Killed: returns at once.
  }
  EXPECT_GE(killed, 15);  // Most runs died mid-way (a fast one may finish before its kill).
  pid = spawn(ingest_args(crashed));
  status = wait_for_exit(pid, std::chrono::seconds(300));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "final run failed: " << status;

  auto ref =
      persist::PersistClient::open(persist::PersistLocation::in_directory(reference.string()));
  auto got = persist::PersistClient::open(persist::PersistLocation::in_directory(crashed.string()));
  ASSERT_TRUE(ref.ok() && got.ok());
  for (const std::string table : {"users", "auctions", "bids"}) {
    const std::string shard = "auction." + table;
    // No killed incarnation's writer or reader is left (their leases would hold GC back for
    // minutes): each incarnation fenced its predecessors' out, and the last expired its own.
    auto description = (*got)->describe(shard);
    ASSERT_TRUE(description.ok()) << description.status();
    for (const auto& writer : description->writers) {
      ADD_FAILURE() << shard << ": writer " << writer.writer_id << " (" << writer.purpose
                    << ", fence epoch " << writer.fence_epoch << ") is left";
    }
    for (const auto& reader : description->leased_readers) {
      ADD_FAILURE() << shard << ": reader " << reader.reader_id << " (" << reader.purpose
                    << ", fence epoch " << reader.fence_epoch << ") is left";
    }
    EXPECT_GT(description->fence_epoch, 1u) << shard << ": fenced by later incarnations";
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

// Ctrl-C: the first SIGINT stops the run (exit 0, what is durable stays), and the next run
// resumes from the shards to the generator's state. (Before there was a handler, SIGINT killed
// the process wherever it was.)
TEST(CrashTest, AnInterruptStopsTheRunAndTheNextResumes) {
  const fs::path dir = fs::temp_directory_path() / ("weir-interrupt-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::string> args = ingest_args(dir);
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--rate") args[i + 1] = "2000";  // 3 s of streaming: the interrupt lands in it.
  }
  pid_t pid = spawn(args);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_EQ(kill(pid, SIGINT), 0);
  int status = wait_for_exit(pid, std::chrono::seconds(60));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "interrupted run: " << status;
  {
    auto client =
        persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
    ASSERT_TRUE(client.ok());
    auto bids = (*client)->describe("auction.bids");
    ASSERT_TRUE(bids.ok()) << bids.status();
    EXPECT_LT(bids->upper.time(), kUntil) << "the run was not stopped by the interrupt";
  }
  pid = spawn(args);
  status = wait_for_exit(pid, std::chrono::seconds(300));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "resumed run: " << status;
  auto client = persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
  ASSERT_TRUE(client.ok());
  expect_generator_state(**client, 40, kUntil);
  fs::remove_all(dir);
}

// Starts `weir ingest` with its stderr in `log`; returns its pid.
pid_t spawn_logging(const std::vector<std::string>& args, const fs::path& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, STDOUT_FILENO);
    dup2(out, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Issue 15, disk full: the shards live on a 6 MiB tmpfs that fills mid-ingest. The run backs off
// with an error naming the full disk (never a storm, nothing corrupted); it is killed there, the
// space grows, and the restart resumes exactly: the shards equal the generator's state.
TEST(CrashTest, ADiskThatFillsGivesAClearErrorAndTheRestartResumesExactly) {
  const fs::path mount_point =
      fs::temp_directory_path() / ("weir-full-" + std::to_string(::getpid()));
  fs::create_directories(mount_point);
  if (mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=6m") != 0) {
    fs::remove(mount_point);
    GTEST_SKIP() << "cannot mount a small tmpfs (" << std::strerror(errno)
                 << "): needs root, as in CI";
  }
  struct Unmount {
    fs::path path;
    ~Unmount() {
      umount2(path.c_str(), MNT_DETACH);
      fs::remove_all(path);
    }
  } unmount{mount_point};
  const fs::path dir = mount_point / "shards";
  const fs::path log =
      fs::temp_directory_path() / ("weir-full-" + std::to_string(::getpid()) + ".log");
  constexpr uint64_t kFullUntil = 300000;  // About 25 MiB of parts: more than the disk holds.
  std::vector<std::string> args = {WEIR_TOOL_PATH, "ingest", "--source", "loadgen:auction",
                                   "--scale", "10", "--persist", dir.string(), "-w", "2", "--until",
                                   std::to_string(kFullUntil), "--rate", "0",
                                   // Compaction would rewrite parts on a full disk: keep it out of
                                   // the way, and every offset readable for the comparison.
                                   "--compaction-window", "18446744073709551615"};
  pid_t pid = spawn_logging(args, log);
  // Wait for the full disk to show in the log.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::string text;
  // Whichever store meets the full disk first says so: the blob ("No space left on device") or
  // SQLite ("database or disk is full").
  const auto full = [](const std::string& log_text) {
    return log_text.find("No space left on device") != std::string::npos ||
           log_text.find("database or disk is full") != std::string::npos;
  };
  while (!full(text)) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      FAIL() << "weir ingest ended (" << status << ") before the disk filled:\n" << read_file(log);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      FAIL() << "no full disk in the log:\n" << read_file(log);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    text = read_file(log);
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // Let it retry on the full disk a while.
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  waitpid(pid, nullptr, 0);
  text = read_file(log);
  EXPECT_NE(text.find("backing off"), std::string::npos) << text;
  // Backoff, not a storm: a handful of retries in those seconds.
  size_t backoffs = 0;
  for (size_t at = text.find("backing off"); at != std::string::npos;
       at = text.find("backing off", at + 1)) {
    ++backoffs;
  }
  EXPECT_LE(backoffs, 20u) << text;

  // Space is freed (the filesystem grows); the restart resumes and finishes.
  ASSERT_EQ(mount("tmpfs", mount_point.c_str(), "tmpfs", MS_REMOUNT, "size=256m"), 0)
      << std::strerror(errno);
  pid = spawn_logging(args, log);
  const int status = wait_for_exit(pid, std::chrono::seconds(300));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << read_file(log);
  EXPECT_NE(read_file(log).find("resuming at offset"), std::string::npos) << read_file(log);

  auto client = persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
  ASSERT_TRUE(client.ok()) << client.status();
  expect_generator_state(**client, 10, kFullUntil);
  fs::remove(log);
}

// Issue 15: consensus on a PostgreSQL server that is restarted mid-ingest, with a fast and then an
// immediate shutdown. The writers' calls fail while it is down; they back off, retry and go on,
// and nothing is lost or doubled: the shards equal the generator's state.
TEST(CrashTest, APostgresConsensusRestartedMidIngestLosesNothing) {
  const fs::path base =
      fs::temp_directory_path() / ("weir-pgrestart-" + std::to_string(::getpid()));
  fs::remove_all(base);
  fs::create_directories(base);
  const std::string state = (base / "server").string();
  if (const std::string why = postgres_fixture("start " + state); !why.empty()) {
    GTEST_SKIP() << "could not start a throwaway PostgreSQL (tests/support/postgres): is "
                    "postgresql-15 installed? scripts/setup.sh installs it\n"
                 << why;
  }
  struct Stop {
    std::string state;
    ~Stop() { postgres_fixture("stop " + state); }
  } stop{state};
  const std::string url = read_file(fs::path(state) / "url");
  const std::string consensus = url.substr(0, url.find_last_not_of('\n') + 1);
  constexpr uint64_t kRestartUntil = 60000;
  const fs::path log = base / "ingest.log";
  const std::vector<std::string> args = {WEIR_TOOL_PATH,
                                         "ingest",
                                         "--source",
                                         "loadgen:auction",
                                         "--scale",
                                         "10",
                                         "--blob",
                                         "file://" + (base / "blob").string(),
                                         "--consensus",
                                         consensus,
                                         "-w",
                                         "2",
                                         "--until",
                                         std::to_string(kRestartUntil),
                                         "--rate",
                                         "6000",
                                         "--compaction-window",
                                         "18446744073709551615"};
  const pid_t pid = spawn_logging(args, log);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ASSERT_EQ(postgres_fixture("restart " + state + " fast 1"), "") << "fast restart";
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ASSERT_EQ(postgres_fixture("restart " + state + " immediate 1"), "") << "immediate restart";
  const int status = wait_for_exit(pid, std::chrono::seconds(300));
  const std::string text = read_file(log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << text;
  EXPECT_NE(text.find("backing off"), std::string::npos)
      << "the restarts went unnoticed (did the run end before them?):\n"
      << text;

  auto client = persist::PersistClient::open({"file://" + (base / "blob").string(), consensus});
  ASSERT_TRUE(client.ok()) << client.status();
  expect_generator_state(**client, 10, kRestartUntil);
  client->reset();
  // Stopped before its state directory goes (the destructor covers the early returns).
  postgres_fixture("stop " + state);
  fs::remove_all(base);
}

// Issue 15 item 2, split brain: incarnation 0 is stopped (SIGSTOP) mid-run, incarnation 1 runs to
// the end, and incarnation 0 resumes (SIGCONT). Before, it appended `running` and `ceased` rows
// on top of incarnation 1's. Now its status appends are rejected; the status shard holds
// incarnation 1's final state, and the shards are complete and exact.
TEST(CrashTest, AStoppedIncarnationThatResumesIsFenced) {
  const fs::path dir = fs::temp_directory_path() / ("weir-split-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::string> args = ingest_args(dir);
  // Incarnation 0 streams slowly (30 s), so that it is still running when it is stopped.
  std::vector<std::string> slow = args;
  *std::find(slow.begin(), slow.end(), "8000") = "200";
  const pid_t zero = spawn(slow);
  auto client = persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
  ASSERT_TRUE(client.ok()) << client.status();
  // Stop it once bids has an upper past 1000.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    auto description = (*client)->describe("auction.bids");
    if (description.ok() && !description->upper.is_empty() && description->upper.time() > 1000) {
      break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "incarnation 0 made no progress";
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // A process stopped inside a SQLite write transaction keeps the database locked for everyone
  // (issue 15 item 8): stop it at a moment it holds no write lock.
  ASSERT_TRUE(stop_outside_write_transaction(zero, dir / "consensus.db"));
  const pid_t one = spawn(args);
  int status = wait_for_exit(one, std::chrono::seconds(120));
  if (status != 0) wait_for_exit(zero, std::chrono::seconds(0));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "incarnation 1 failed: " << status;
  ASSERT_EQ(kill(zero, SIGCONT), 0);
  status = wait_for_exit(zero, std::chrono::seconds(120));
  // Its next append, or its next status row, is refused: incarnation 1 has fenced it out (exit
  // 1). Before the persist fence, a resumed run whose appends met incarnation 1's upper could
  // also find nothing left to do and exit 0. Either way it writes nothing on top of incarnation
  // 1's rows.
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;

  std::map<std::string, int64_t> rows;
  auto cursor = (*client)->inspect_snapshot("auction.status");
  ASSERT_TRUE(cursor.ok()) << cursor.status();
  while (cursor->next()) rows[std::string(cursor->data())] += cursor->diff();
  ASSERT_TRUE(cursor->status().ok()) << cursor->status();
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& [row, count] : rows) {
    EXPECT_EQ(count, 1) << row;
    EXPECT_NE(row.find(" ceased incarnation=1 "), std::string::npos) << row;
  }
  expect_generator_state(**client, 40, kUntil);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace weir::ingest
