// Exactly once across crashes, with a real MariaDB upstream: `weir ingest --source mysql` is
// killed with SIGKILL 20 times at random points (mid-snapshot, mid-stream, mid-append) while a
// writer keeps changing the tables, and the server itself is killed and restarted twice
// mid-stream. At the end the shards equal the tables, with no row lost or duplicated.

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../support/mariadb/mariadb_fixture.h"
#include "../support/sanitizers.h"
#include "absl/strings/str_cat.h"
#include "ingest_test_util.h"
#include "typed_shard_util.h"
#include <fcntl.h>
#include <gtest/gtest.h>
#include <mysql.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace weir::ingest::testing {
namespace {

using weir::testing::mariadb_fixture;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

pid_t spawn(const std::vector<std::string>& args, const fs::path& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(out, STDOUT_FILENO);
    dup2(out, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// A connection to the fixture's server as user weir, database weir (nullptr if it is down).
MYSQL* connect(int port) {
  MYSQL* conn = mysql_init(nullptr);
  if (mysql_real_connect(conn, "127.0.0.1", "weir", nullptr, "weir", port, nullptr,
                         CLIENT_MULTI_STATEMENTS) == nullptr) {
    mysql_close(conn);
    return nullptr;
  }
  return conn;
}

// Runs `sql` (every statement), true on success.
bool run(MYSQL* conn, const std::string& sql) {
  if (mysql_real_query(conn, sql.data(), sql.size()) != 0) return false;
  do {
    if (MYSQL_RES* result = mysql_store_result(conn)) mysql_free_result(result);
  } while (mysql_next_result(conn) == 0);
  return mysql_errno(conn) == 0;
}

// Every row of `sql`, each as its fields joined by tabs (NULL as \N), sorted.
std::vector<std::string> lines(MYSQL* conn, const std::string& sql) {
  std::vector<std::string> out;
  EXPECT_EQ(mysql_real_query(conn, sql.data(), sql.size()), 0) << mysql_error(conn);
  MYSQL_RES* result = mysql_store_result(conn);
  if (result == nullptr) return out;
  const unsigned fields = mysql_num_fields(result);
  while (MYSQL_ROW row = mysql_fetch_row(result)) {
    std::string line;
    for (unsigned f = 0; f < fields; ++f) {
      absl::StrAppend(&line, f ? "\t" : "", row[f] == nullptr ? "\\N" : row[f]);
    }
    out.push_back(std::move(line));
  }
  mysql_free_result(result);
  std::sort(out.begin(), out.end());
  return out;
}

// The last GTID's sequence number of the server's binlog.
uint64_t binlog_seq(MYSQL* conn) {
  const auto position = lines(conn, "SELECT @@gtid_binlog_pos");
  if (position.empty()) return 0;
  return std::strtoull(position[0].substr(position[0].rfind('-') + 1).c_str(), nullptr, 10);
}

// Keeps changing t (inserts, updates, deletes) and u, some transactions spanning both, until
// `stop`; rides out a restarting server (reconnects).
void write_until(int port, const std::atomic<bool>& stop) {
  std::mt19937_64 random(7);
  int next = 1'000'000;
  while (!stop.load()) {
    MYSQL* conn = connect(port);
    while (conn != nullptr && !stop.load()) {
      std::string sql;
      switch (random() % 4) {
        case 0:
          sql = absl::StrCat("INSERT INTO t VALUES (", next, ", 'w", next, "', ", next % 977, ")");
          ++next;
          break;
        case 1:
          sql = absl::StrCat("UPDATE t SET v = v + 1 WHERE k % 5003 = ", random() % 5003);
          break;
        case 2:
          sql = absl::StrCat("DELETE FROM t WHERE k % 7919 = ", random() % 7919);
          break;
        default:
          sql = absl::StrCat("BEGIN; INSERT INTO u VALUES (", next, "); UPDATE t SET v = -v WHERE ",
                             "k = ", random() % next, "; COMMIT");
          ++next;
      }
      if (!run(conn, sql)) break;
      std::this_thread::sleep_for(std::chrono::microseconds(random() % 3000));
    }
    if (conn != nullptr) mysql_close(conn);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// The upper of shard mysql.`table` (0 if it has none yet).
uint64_t upper_of(const fs::path& dir, const std::string& table) {
  auto client = persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
  if (!client.ok()) return 0;
  auto shard = (*client)->find_shard(shard_name("mysql", table));
  if (!shard.ok() || !shard->has_value()) return 0;
  auto d = (*client)->describe(shard_name("mysql", table));
  if (!d.ok()) return 0;
  return d->upper.is_empty() ? UINT64_MAX : d->upper.time();
}

TEST(MariadbCrashTest, TwentyKillsAndTwoServerCrashesLoseNothing) {
  const fs::path base = fresh_dir("mariadb-crash");
  const std::string state = (base / "server").string();
  ASSERT_EQ(mariadb_fixture("start " + state), "") << "could not start a MariaDB server";
  struct Stop {
    std::string state;
    ~Stop() { mariadb_fixture("stop " + state); }
  } stop_server{state};
  std::string conninfo, port_text;
  std::getline(std::ifstream(fs::path(state) / "conn"), conninfo);
  std::getline(std::ifstream(fs::path(state) / "port"), port_text);
  const int port = std::atoi(port_text.c_str());
  {
    MYSQL* conn = connect(port);
    ASSERT_NE(conn, nullptr);
    ASSERT_TRUE(run(conn,
                    "CREATE TABLE t (k int PRIMARY KEY, name varchar(40), v int);"
                    "CREATE TABLE u (k int);"
                    "INSERT INTO t SELECT seq, concat('row ', seq), seq % 977 FROM "
                    "seq_1_to_60000;"
                    "INSERT INTO u SELECT seq FROM seq_1_to_1000;"))
        << mysql_error(conn);
    mysql_close(conn);
  }
  const fs::path dir = base / "persist";
  const std::vector<std::string> args = {
      WEIR_TOOL_PATH,        "ingest",     "--source", "mysql", "--conn",  conninfo,
      "--persist",           dir.string(), "-w",       "2",     "--quiet", "--compaction-window",
      "18446744073709551615"};

  std::atomic<bool> stop_writer{false};
  std::thread writer([&] { write_until(port, stop_writer); });

  std::mt19937_64 random(11);
  uint64_t last_upper = 0;
  int progressed = 0;
  const fs::path log = base / "ingest.log";
  for (int round = 0; round < 20; ++round) {
    const pid_t pid = spawn(args, log);
    // Early rounds die during the snapshot; later ones mid-stream and mid-append.
    const int ms = (round < 5 ? 100 + static_cast<int>(random() % 700)
                              : 1200 + static_cast<int>(random() % 2000)) *
                   weir::testing::kSanitizerSlowdown;
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    if (round == 8 || round == 14) {
      // The server dies (SIGKILL) mid-stream and comes back.
      ASSERT_EQ(mariadb_fixture("restart " + state + " 1"), "") << "server restart";
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    }
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    const uint64_t upper = upper_of(dir, "t");
    if (upper > last_upper) ++progressed;
    last_upper = upper;
  }
  EXPECT_GE(progressed, 8) << "rounds in which the shard's upper moved";
  stop_writer.store(true);
  writer.join();

  // A last run that finishes: every table complete up to the binlog's end after the writer.
  MYSQL* after = connect(port);
  ASSERT_NE(after, nullptr);
  const uint64_t end = binlog_seq(after);
  std::vector<std::string> final_args = args;
  final_args.insert(final_args.end(), {"--until-gtid", absl::StrCat(end)});
  const pid_t pid = spawn(final_args, log);
  int status = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(180);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      mysql_close(after);
      FAIL() << "the final run did not finish; log in " << log;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "final run failed; log in " << log;

  auto client = persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
  ASSERT_TRUE(client.ok()) << client.status();
  for (const std::string table : {"t", "u"}) {
    const auto expected = lines(after, "SELECT * FROM " + table);
    const auto got = shard_lines(**client, "mysql", table, end);
    EXPECT_EQ(got.size(), expected.size()) << table;
    EXPECT_TRUE(got == expected) << table << " differs from the upstream table";
  }
  mysql_close(after);
  client->reset();
  // Stopped before its state directory goes (the destructor covers the early returns): without
  // the directory, the fixture would not know which server to stop.
  mariadb_fixture("stop " + state);
  fs::remove_all(base);
}

}  // namespace
}  // namespace weir::ingest::testing
