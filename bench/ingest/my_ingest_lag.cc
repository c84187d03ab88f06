// my_ingest_lag [--mode concurrent|serial] [--rows N] [-w W] [--conn CONN] [--rate R]: per-export
// progress against a real MariaDB, as pg_ingest_lag against PostgreSQL. Two small tables
// (my_lag_a, my_lag_b) take steady writes (a writer thread over libmariadb, R single-row
// transactions per second into each, default 200); after 2 s a large table (my_lag_big, N rows,
// default 5,000,000, created and filled before the run with INSERT ... SELECT from the sequence
// engine's seq_1_to_N and kept for the next run if it has N rows) is added. While its snapshot
// runs, the small tables' lag (how long ago the upstream committed the transaction their shard's
// upper has reached) is sampled every 100 ms. Figures: lag p50 and p99 in seconds, and the
// snapshot's duration. With MY_INGEST_LAG_TRACE set, every sample goes to stderr.
//
// The lag is measured here, not with IngestMonitor::lag: the MySQL source records when it *reads*
// each commit (the binlog's event timestamps are whole seconds), so a binlog reader that falls
// behind, or an epoch's new reader re-reading old transactions after the big table is added,
// would make the monitor's figure too small. Instead the writer notes each transaction's GTID
// sequence number (`SELECT @@last_gtid` after its commit) and when its commit returned; a shard's
// upper of N + 1 holds every transaction up to N, so its lag is how long ago the last writer
// transaction at or before N committed. The trace shows the monitor's figure beside it.
//
// The server must log a row-based binlog with GTIDs (tests/support/mariadb/mariadb_fixture.sh);
// CONN ("host=127.0.0.1 port=P user=weir database=weir") defaults to WEIR_TEST_MARIADB_CONN.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <mysql.h>
#include <unistd.h>

#include "weir/ingest/ingest.h"
#include "weir/ingest/mysql.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct Conn {
  std::string host = "127.0.0.1";
  unsigned port = 3306;
  std::string user, password, database;
};

// The connection string's keys that this benchmark uses (plain values, no quoting).
Conn parse_conn(const std::string& text) {
  Conn conn;
  std::istringstream in(text);
  std::string pair;
  while (in >> pair) {
    const auto eq = pair.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = pair.substr(0, eq), value = pair.substr(eq + 1);
    if (key == "host") conn.host = value;
    if (key == "port") conn.port = static_cast<unsigned>(std::stoul(value));
    if (key == "user") conn.user = value;
    if (key == "password") conn.password = value;
    if (key == "database") conn.database = value;
  }
  return conn;
}

MYSQL* connect(const Conn& info) {
  MYSQL* conn = mysql_init(nullptr);
  if (mysql_real_connect(conn, info.host.c_str(), info.user.c_str(),
                         info.password.empty() ? nullptr : info.password.c_str(),
                         info.database.c_str(), info.port, nullptr, 0) == nullptr) {
    std::fprintf(stderr, "my_ingest_lag: cannot connect to %s:%u: %s\n", info.host.c_str(),
                 info.port, mysql_error(conn));
    std::exit(1);
  }
  return conn;
}

// Runs `sql` (one statement) on `conn`; exits the program if it fails. Returns the first value,
// if any.
std::string exec(MYSQL* conn, const std::string& sql) {
  if (mysql_real_query(conn, sql.data(), sql.size()) != 0) {
    std::fprintf(stderr, "my_ingest_lag: %s: %s\n", sql.substr(0, 200).c_str(), mysql_error(conn));
    std::exit(1);
  }
  std::string value;
  if (MYSQL_RES* result = mysql_store_result(conn)) {
    if (MYSQL_ROW row = mysql_fetch_row(result); row != nullptr && row[0] != nullptr)
      value = row[0];
    mysql_free_result(result);
  } else if (mysql_field_count(conn) != 0) {
    std::fprintf(stderr, "my_ingest_lag: %s: %s\n", sql.substr(0, 200).c_str(), mysql_error(conn));
    std::exit(1);
  }
  return value;
}

// The tables; the large table is refilled unless it already has `rows`.
void prepare(const Conn& info, uint64_t rows) {
  MYSQL* conn = connect(info);
  exec(conn,
       "CREATE TABLE IF NOT EXISTS my_lag_a (id int PRIMARY KEY AUTO_INCREMENT, v varchar(40), "
       "at datetime(6)) ENGINE=InnoDB");
  exec(conn,
       "CREATE TABLE IF NOT EXISTS my_lag_b (id int PRIMARY KEY AUTO_INCREMENT, v varchar(40), "
       "at datetime(6)) ENGINE=InnoDB");
  exec(conn,
       "CREATE TABLE IF NOT EXISTS my_lag_big (id bigint PRIMARY KEY, name varchar(40), "
       "amount decimal(12,2), at datetime) ENGINE=InnoDB");
  // The small tables start empty every run: their snapshot is instant.
  exec(conn, "TRUNCATE my_lag_a");
  exec(conn, "TRUNCATE my_lag_b");
  const uint64_t have = std::stoull(exec(conn, "SELECT count(*) FROM my_lag_big"));
  if (have != rows) {
    std::fprintf(stderr, "my_ingest_lag: filling my_lag_big with %llu rows\n",
                 static_cast<unsigned long long>(rows));
    exec(conn, "TRUNCATE my_lag_big");
    exec(conn,
         "INSERT INTO my_lag_big SELECT seq, concat('customer-', substr(md5(seq), 1, 21)), "
         "(seq % 100000) / 100, '2026-01-01' + INTERVAL seq SECOND FROM seq_1_to_" +
             std::to_string(rows));
    exec(conn, "ANALYZE TABLE my_lag_big");
  }
  mysql_close(conn);
}

// The sequence number of a GTID "domain-server-seq".
uint64_t gtid_seq(const std::string& gtid) {
  const auto dash = gtid.rfind('-');
  return std::stoull(dash == std::string::npos ? gtid : gtid.substr(dash + 1));
}

// The writer's transactions: (GTID sequence number, when its commit returned), in order.
class Commits {
 public:
  void add(uint64_t seq, Clock::time_point when) {
    std::lock_guard lock(mu_);
    commits_.emplace_back(seq, when);
  }
  // How long ago the last writer transaction at or before `upper - 1` committed (an upper of
  // N + 1 holds transaction N); if the upper holds none of them, how long ago the first one did;
  // zero if there is none yet.
  double lag(uint64_t upper, Clock::time_point now) const {
    std::lock_guard lock(mu_);
    if (commits_.empty()) return 0;
    auto it = std::lower_bound(commits_.begin(), commits_.end(), upper,
                               [](const auto& c, uint64_t u) { return c.first < u; });
    const auto& at = it == commits_.begin() ? *it : *std::prev(it);
    return std::chrono::duration<double>(now - at.second).count();
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<uint64_t, Clock::time_point>> commits_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "concurrent";
  uint64_t rows = 5'000'000;
  size_t workers = 2;
  double rate = 200;
  std::string conninfo;
  if (const char* env = std::getenv("WEIR_TEST_MARIADB_CONN")) conninfo = env;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mode" && i + 1 < argc) {
      mode = argv[++i];
    } else if (a == "--rows" && i + 1 < argc) {
      rows = std::stoull(argv[++i]);
    } else if (a == "-w" && i + 1 < argc) {
      workers = std::stoul(argv[++i]);
    } else if (a == "--conn" && i + 1 < argc) {
      conninfo = argv[++i];
    } else if (a == "--rate" && i + 1 < argc) {
      rate = std::stod(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: my_ingest_lag [--mode concurrent|serial] [--rows N] [-w W] "
                   "[--conn CONN] [--rate R]\n");
      return 2;
    }
  }
  if (conninfo.empty()) {
    std::fprintf(stderr, "my_ingest_lag: no server: pass --conn or set WEIR_TEST_MARIADB_CONN\n");
    return 2;
  }
  auto parsed = weir::sources::parse_progress_mode(mode);
  if (!parsed.ok()) {
    std::fprintf(stderr, "my_ingest_lag: %s\n", std::string(parsed.status().message()).c_str());
    return 2;
  }
  const Conn info = parse_conn(conninfo);
  prepare(info, rows);

  const fs::path dir =
      fs::temp_directory_path() / ("weir-my-ingest-lag-" + std::to_string(::getpid()));
  weir::ingest::IngestOptions options;
  options.location = weir::persist::PersistLocation::in_directory(dir.string());
  options.workers.workers = workers;
  weir::ingest::MysqlIngestOptions my;
  my.conninfo = conninfo;
  my.workers = workers;
  my.mode = *parsed;
  my.replica_key = dir.string();
  options.upstream = weir::ingest::make_mysql_source(std::move(my));
  options.tables = {"my_lag_a", "my_lag_b"};
  options.add_table = "my_lag_big";
  options.add_after = std::chrono::seconds(2);
  options.stop = std::make_shared<std::atomic<bool>>(false);

  // The writer: `rate` single-row transactions per second into each small table, paced against
  // the clock so that a slow statement does not lower the rate. After each commit it notes the
  // transaction's sequence number; the time is when the commit returned (at most a round trip
  // after the server committed, so the lag is understated by that at most).
  std::atomic<uint64_t> written{0};
  Commits commits;
  std::thread writer([&] {
    MYSQL* conn = connect(info);
    const auto start = Clock::now();
    const auto period = std::chrono::duration<double>(1.0 / (2 * rate));
    for (uint64_t n = 0; !options.stop->load(); ++n) {
      std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                period * static_cast<double>(n)));
      exec(conn, std::string("INSERT INTO ") + (n % 2 == 0 ? "my_lag_a" : "my_lag_b") +
                     " (v, at) VALUES ('row " + std::to_string(n) + "', now(6))");
      const auto committed = Clock::now();
      commits.add(gtid_seq(exec(conn, "SELECT @@last_gtid")), committed);
      written.fetch_add(1);
    }
    mysql_close(conn);
  });

  weir::ingest::IngestMonitor monitor;
  std::vector<double> lags;
  double snapshot_seconds = 0;
  std::thread sampler([&] {
    Clock::time_point snapshot_start{};
    const bool trace = std::getenv("MY_INGEST_LAG_TRACE") != nullptr;
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (options.stop->load()) return;
      auto views = monitor.exports();
      const weir::ingest::IngestMonitor::ExportView* big = nullptr;
      std::vector<const weir::ingest::IngestMonitor::ExportView*> small;
      for (const auto& v : views) {
        if (v.table == "my_lag_big") {
          big = &v;
        } else {
          small.push_back(&v);
        }
      }
      if (big == nullptr || !big->snapshotting || big->snapshot_total == 0) continue;
      const auto now = Clock::now();
      if (snapshot_start == Clock::time_point{}) snapshot_start = now;
      if (big->persisted_upper > 0) {  // The snapshot is in the shard.
        snapshot_seconds = std::chrono::duration<double>(now - snapshot_start).count();
        options.stop->store(true);
        return;
      }
      for (const auto* v : small) {
        lags.push_back(commits.lag(v->persisted_upper, now));
        if (trace) {
          std::fprintf(stderr,
                       "%.1f s %s lag %.3f s (monitor %.3f s) upper %llu snapshot %llu/%llu\n",
                       std::chrono::duration<double>(now - snapshot_start).count(),
                       v->table.c_str(), lags.back(), monitor.lag(v->persisted_upper).count(),
                       static_cast<unsigned long long>(v->persisted_upper),
                       static_cast<unsigned long long>(big->snapshot_done),
                       static_cast<unsigned long long>(big->snapshot_total));
        }
      }
    }
  });
  const auto started = Clock::now();
  auto report = weir::ingest::run_ingest(options, &monitor);
  const double run_seconds = std::chrono::duration<double>(Clock::now() - started).count();
  options.stop->store(true);
  sampler.join();
  writer.join();
  // Not the throwing overload: SQLite may still be removing its -shm file as the client closes.
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  if (!report.ok()) {
    std::fprintf(stderr, "my_ingest_lag: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  if (lags.empty()) {
    std::fprintf(stderr, "my_ingest_lag: no samples taken during the snapshot\n");
    return 1;
  }
  std::sort(lags.begin(), lags.end());
  auto pct = [&](double p) {
    return lags[std::min(lags.size() - 1, static_cast<size_t>(p * lags.size()))];
  };
  std::printf(
      "my_ingest_lag: mode %s, -w %zu, %llu-row snapshot took %.1f s; %llu small transactions "
      "written in %.1f s (%.0f/s); small tables' lag over %zu samples: p50 %.3f s, p99 %.3f s, "
      "max %.3f s\n",
      mode.c_str(), workers, static_cast<unsigned long long>(rows), snapshot_seconds,
      static_cast<unsigned long long>(written.load()), run_seconds,
      static_cast<double>(written.load()) / run_seconds, lags.size(), pct(0.5), pct(0.99),
      lags.back());
  std::printf(
      "RESULT lag_p50_s %.6g s\nRESULT lag_p99_s %.6g s\nRESULT lag_max_s %.6g s\n"
      "RESULT snapshot_s %.6g s\n",
      pct(0.5), pct(0.99), lags.back(), snapshot_seconds);
  return 0;
}
