// Exactly once across crashes, with a real PostgreSQL upstream: `weir ingest --source postgres`
// is killed with SIGKILL 20 times at random points (mid-COPY, between the COPY and the first
// append, mid-stream, mid-append) while a writer keeps changing the tables, and the server is
// restarted twice mid-stream (fast, then immediate shutdown). At the end the shards equal the
// tables, with no row lost or duplicated, and the slot's confirmed_flush_lsn was never ahead of
// the durable upper of an export that has one (checked every few milliseconds throughout).

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../support/postgres/postgres_fixture.h"
#include "../support/sanitizers.h"
#include "ingest_test_util.h"
#include "postgres_test_util.h"
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "weir/ingest/postgres.h"
#include "weir/sources/postgres/pgoutput.h"

namespace weir::ingest::testing {
namespace {

using weir::testing::postgres_fixture;

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

// Keeps changing t (inserts, updates, deletes) and u, some transactions spanning both, until
// `stop`; rides out a restarting server (reconnects).
void write_until(const std::string& url, const std::atomic<bool>& stop) {
  std::mt19937_64 random(7);
  int next = 1'000'000;
  while (!stop.load()) {
    PGconn* conn = PQconnectdb(url.c_str());
    while (PQstatus(conn) == CONNECTION_OK && !stop.load()) {
      std::string sql;
      // One in 200 is large (about 2,000 rows, 200 kB of changes): weir's connection sets
      // logical_decoding_work_mem to 64 kB, so the server streams it while it runs (protocol 2).
      switch (random() % 200 == 0 ? 4 : random() % 4) {
        case 4:
          sql = absl::StrCat("UPDATE t SET v = v + 1 WHERE k % 31 = ", random() % 31);
          break;
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
      PGresult* result = PQexec(conn, sql.c_str());
      PQclear(result);
      std::this_thread::sleep_for(std::chrono::microseconds(random() % 3000));
    }
    PQfinish(conn);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// The upper of shard pg.`table` (0 if it has none yet).
uint64_t upper_of(const fs::path& dir, const std::string& table) {
  auto client = persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
  if (!client.ok()) return 0;
  auto shard = (*client)->find_shard(shard_name("pg", table));
  if (!shard.ok() || !shard->has_value()) return 0;
  auto d = (*client)->describe(shard_name("pg", table));
  if (!d.ok()) return 0;
  return d->upper.is_empty() ? UINT64_MAX : d->upper.time();
}

TEST(PostgresCrashTest, TwentyKillsAndTwoServerRestartsLoseNothing) {
  const fs::path base = fresh_dir("pg-crash");
  const std::string state = (base / "server").string();
  ASSERT_EQ(postgres_fixture("start " + state), "") << "could not start a PostgreSQL server";
  struct Stop {
    std::string state;
    ~Stop() { postgres_fixture("stop " + state); }
  } stop_server{state};
  std::string server;
  std::getline(std::ifstream(fs::path(state) / "url"), server);
  const std::string url = server;
  Sql sql(url);
  sql.exec(
      "CREATE TABLE t (k int, name text, v int); CREATE TABLE u (k int);"
      "ALTER TABLE t REPLICA IDENTITY FULL; ALTER TABLE u REPLICA IDENTITY FULL;"
      "CREATE PUBLICATION p FOR TABLE t, u;"
      "INSERT INTO t SELECT g, 'row ' || g, g % 977 FROM generate_series(1, 60000) g;"
      "INSERT INTO u SELECT g FROM generate_series(1, 1000) g;");
  const fs::path dir = base / "persist";
  const std::vector<std::string> args = {WEIR_TOOL_PATH,
                                         "ingest",
                                         "--source",
                                         "postgres",
                                         "--conn",
                                         url + "?options=-c%20logical_decoding_work_mem%3D64kB",
                                         "--publication",
                                         "p",
                                         "--slot",
                                         "crash_slot",
                                         "--persist",
                                         dir.string(),
                                         "-w",
                                         "2",
                                         "--quiet",
                                         "--compaction-window",
                                         "18446744073709551615"};

  std::atomic<bool> stop_writer{false};
  std::thread writer([&] { write_until(url, stop_writer); });

  // The slot never confirms more than every export has made durable.
  std::atomic<bool> stop_checker{false};
  std::atomic<int> checks{0};
  std::string violation;
  std::thread checker([&] {
    std::unique_ptr<persist::PersistClient> client;
    while (!stop_checker.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      PGconn* conn = PQconnectdb(url.c_str());
      if (PQstatus(conn) != CONNECTION_OK) {
        PQfinish(conn);
        continue;
      }
      PGresult* r = PQexec(conn,
                           "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE "
                           "slot_name = 'crash_slot'");
      std::string confirmed;
      if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0)) {
        confirmed = PQgetvalue(r, 0, 0);
      }
      PQclear(r);
      PQfinish(conn);
      if (confirmed.empty() || !fs::exists(dir / "consensus.db")) continue;
      if (!client) {
        auto opened =
            persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
        if (!opened.ok()) continue;
        client = *std::move(opened);
      }
      const uint64_t lsn = *sources::postgres::parse_lsn(confirmed);
      for (const std::string table : {"public.t", "public.u"}) {
        auto shard = client->find_shard(shard_name("pg", table));
        if (!shard.ok() || !shard->has_value()) continue;
        auto d = client->describe(shard_name("pg", table));
        if (!d.ok()) continue;
        const uint64_t upper = d->upper.is_empty() ? UINT64_MAX : d->upper.time();
        // An export whose upper is 0 has nothing durable yet: it will be snapshotted, whatever
        // the slot says (the slot starts confirmed at its creation).
        if (upper > 0 && lsn > upper && violation.empty()) {
          violation = absl::StrCat("confirmed_flush_lsn ", confirmed, " is ahead of ", table,
                                   "'s upper ", sources::postgres::format_lsn(upper));
        }
      }
      ++checks;
    }
  });

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
    if (round == 8) {
      ASSERT_EQ(postgres_fixture("restart " + state + " fast 1"), "") << "fast restart";
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    } else if (round == 14) {
      ASSERT_EQ(postgres_fixture("restart " + state + " immediate 1"), "") << "immediate restart";
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    }
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    const uint64_t upper = upper_of(dir, "public.t");
    if (upper > last_upper) ++progressed;
    last_upper = upper;
  }
  // Most rounds got past the snapshot and streamed (their kills landed mid-stream or
  // mid-append, not only mid-COPY).
  EXPECT_GE(progressed, 8) << "rounds in which the shard's upper moved";
  stop_writer.store(true);
  writer.join();

  // A last run that finishes: every table complete up to the WAL's end after the writer.
  Sql after(url);
  const std::string end = after.one("SELECT pg_current_wal_lsn()");
  std::vector<std::string> final_args = args;
  final_args.insert(final_args.end(), {"--until-lsn", end});
  const pid_t pid = spawn(final_args, log);
  int status = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(180);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL() << "the final run did not finish; log in " << log;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop_checker.store(true);
  checker.join();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "final run failed; log in " << log;
  EXPECT_TRUE(violation.empty()) << violation;
  EXPECT_GT(checks.load(), 100);

  auto client = persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
  ASSERT_TRUE(client.ok()) << client.status();
  const uint64_t as_of = *sources::postgres::parse_lsn(end) - 1;
  for (const std::string table : {"public.t", "public.u"}) {
    const auto expected = after.copy_lines(table);
    const auto got = shard_lines(**client, "pg", table, as_of);
    EXPECT_EQ(got.size(), expected.size()) << table;
    EXPECT_TRUE(got == expected) << table << " differs from the upstream table";
  }
}

// A server on a new timeline (promoted, or restored from a backup) may have forked from the
// history the shards hold: every export errors definitely, and stays errored.
TEST(PostgresTimelineTest, ANewTimelineErrorsEveryExport) {
  const fs::path base = fresh_dir("pg-timeline");
  const std::string state = (base / "server").string();
  ASSERT_EQ(postgres_fixture("start " + state), "") << "could not start a PostgreSQL server";
  struct Stop {
    std::string state;
    ~Stop() { postgres_fixture("stop " + state); }
  } stop_server{state};
  std::string url;
  std::getline(std::ifstream(fs::path(state) / "url"), url);
  // The timeline WAL is written on now (the first 8 hex digits of its file name; the last
  // checkpoint's, in pg_control_checkpoint(), lags behind a promotion).
  const auto timeline = [&] {
    return Sql(url).one(
        "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int");
  };
  {
    Sql sql(url);
    sql.exec(
        "CREATE TABLE x (k int); CREATE TABLE y (k int);"
        "ALTER TABLE x REPLICA IDENTITY FULL; ALTER TABLE y REPLICA IDENTITY FULL;"
        "CREATE PUBLICATION p FOR TABLE x, y; INSERT INTO x VALUES (1); INSERT INTO y VALUES (2)");
  }
  const auto run = [&](bool expect_errors) {
    IngestOptions options;
    options.location = persist::PersistLocation::in_directory((base / "persist").string());
    PostgresIngestOptions pg;
    pg.conninfo = url;
    pg.publication = "p";
    pg.slot = "timeline_slot";
    pg.until = *sources::postgres::parse_lsn(Sql(url).one("SELECT pg_current_wal_lsn()"));
    options.upstream = make_postgres_source(pg);
    auto report = run_ingest(options);
    ASSERT_TRUE(report.ok()) << report.status();
    for (const auto& e : report->exports) {
      if (expect_errors) {
        EXPECT_EQ(e.health, sources::Health::kStalled) << e.table;
        EXPECT_NE(e.error.find("timeline changed from 1 to 2"), std::string::npos) << e.error;
      } else {
        EXPECT_EQ(e.health, sources::Health::kCeased) << e.table << ": " << e.error;
      }
    }
  };
  run(/*expect_errors=*/false);
  ASSERT_EQ(timeline(), "1");
  ASSERT_EQ(postgres_fixture("new-timeline " + state), "")
      << "could not bring the server to a new timeline";
  ASSERT_EQ(timeline(), "2");
  Sql(url).exec("INSERT INTO x VALUES (3)");
  run(/*expect_errors=*/true);
  // Durable: a later run (with nothing to do) finds the errors in the shards.
  run(/*expect_errors=*/true);
}

}  // namespace
}  // namespace weir::ingest::testing
