// pg_ingest_lag [--mode concurrent|serial] [--rows N] [-w W] [--url URL] [--rate R]: per-export
// progress against a real PostgreSQL. Two small tables (pg_lag_a, pg_lag_b) take steady writes
// (a writer thread over libpq, R single-row transactions per second into each, default 200);
// after 2 s a large table (pg_lag_big, N rows, default 5,000,000, created and filled before the
// run with INSERT ... SELECT generate_series and kept for the next run if it has N rows) is
// added. While its snapshot runs, the small tables' lag (how long ago the upstream committed the
// transaction their shard's upper has reached) is sampled every 100 ms. Figures: lag p50 and p99
// in seconds, and the snapshot's duration. With PG_INGEST_LAG_TRACE set, every sample goes to
// stderr. The server must have wal_level=logical (tests/support/postgres/postgres_fixture.sh);
// the URL defaults to WEIR_TEST_POSTGRES_URL.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <libpq-fe.h>
#include <unistd.h>

#include "weir/ingest/ingest.h"
#include "weir/ingest/postgres.h"

namespace fs = std::filesystem;

namespace {

// Runs `sql` on `conn`; exits the program if it fails. Returns the first value, if any.
std::string exec(PGconn* conn, const std::string& sql) {
  PGresult* result = PQexec(conn, sql.c_str());
  const auto status = PQresultStatus(result);
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    std::fprintf(stderr, "pg_ingest_lag: %s: %s\n", sql.substr(0, 200).c_str(),
                 PQresultErrorMessage(result));
    std::exit(1);
  }
  std::string value;
  if (status == PGRES_TUPLES_OK && PQntuples(result) > 0) value = PQgetvalue(result, 0, 0);
  PQclear(result);
  return value;
}

PGconn* connect(const std::string& url) {
  PGconn* conn = PQconnectdb(url.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::fprintf(stderr, "pg_ingest_lag: cannot connect to %s: %s\n", url.c_str(),
                 PQerrorMessage(conn));
    std::exit(1);
  }
  exec(conn, "SET client_min_messages = warning");
  return conn;
}

// The tables and the publication; the large table is refilled unless it already has `rows`.
void prepare(const std::string& url, uint64_t rows) {
  PGconn* conn = connect(url);
  exec(conn,
       "CREATE TABLE IF NOT EXISTS pg_lag_a (id bigserial PRIMARY KEY, v text, at timestamptz);"
       "CREATE TABLE IF NOT EXISTS pg_lag_b (id bigserial PRIMARY KEY, v text, at timestamptz);"
       "CREATE TABLE IF NOT EXISTS pg_lag_big (id int8 PRIMARY KEY, name text, amount numeric,"
       "  at timestamptz, flag bool);"
       "ALTER TABLE pg_lag_a REPLICA IDENTITY FULL; ALTER TABLE pg_lag_b REPLICA IDENTITY FULL;"
       "ALTER TABLE pg_lag_big REPLICA IDENTITY FULL;"
       "DROP PUBLICATION IF EXISTS pg_lag_pub;"
       "CREATE PUBLICATION pg_lag_pub FOR TABLE pg_lag_a, pg_lag_b, pg_lag_big");
  // The small tables start empty every run: their snapshot is instant.
  exec(conn, "TRUNCATE pg_lag_a, pg_lag_b");
  const uint64_t have = std::stoull(exec(conn, "SELECT count(*) FROM pg_lag_big"));
  if (have != rows) {
    std::fprintf(stderr, "pg_ingest_lag: filling pg_lag_big with %llu rows\n",
                 static_cast<unsigned long long>(rows));
    exec(conn, "TRUNCATE pg_lag_big");
    exec(conn,
         "INSERT INTO pg_lag_big SELECT i, 'customer-' || md5(i::text)::varchar(20), "
         "(i % 100000) / 100.0, '2026-01-01'::timestamptz + i * interval '1 second', "
         "i % 3 = 0 FROM generate_series(1, " +
             std::to_string(rows) + ") AS i");
    exec(conn, "VACUUM ANALYZE pg_lag_big");
  }
  PQfinish(conn);
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "concurrent";
  uint64_t rows = 5'000'000;
  size_t workers = 2;
  double rate = 200;
  std::string url;
  if (const char* env = std::getenv("WEIR_TEST_POSTGRES_URL")) url = env;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mode" && i + 1 < argc) {
      mode = argv[++i];
    } else if (a == "--rows" && i + 1 < argc) {
      rows = std::stoull(argv[++i]);
    } else if (a == "-w" && i + 1 < argc) {
      workers = std::stoul(argv[++i]);
    } else if (a == "--url" && i + 1 < argc) {
      url = argv[++i];
    } else if (a == "--rate" && i + 1 < argc) {
      rate = std::stod(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: pg_ingest_lag [--mode concurrent|serial] [--rows N] [-w W] [--url URL] "
                   "[--rate R]\n");
      return 2;
    }
  }
  if (url.empty()) {
    std::fprintf(stderr, "pg_ingest_lag: no server: pass --url or set WEIR_TEST_POSTGRES_URL\n");
    return 2;
  }
  auto parsed = weir::sources::parse_progress_mode(mode);
  if (!parsed.ok()) {
    std::fprintf(stderr, "pg_ingest_lag: %s\n", std::string(parsed.status().message()).c_str());
    return 2;
  }
  prepare(url, rows);

  const std::string slot = "weir_bench_lag_" + std::to_string(::getpid());
  const fs::path dir =
      fs::temp_directory_path() / ("weir-pg-ingest-lag-" + std::to_string(::getpid()));
  weir::ingest::IngestOptions options;
  options.location = weir::persist::PersistLocation::in_directory(dir.string());
  options.workers.workers = workers;
  weir::ingest::PostgresIngestOptions pg;
  pg.conninfo = url;
  pg.publication = "pg_lag_pub";
  pg.slot = slot;
  pg.workers = workers;
  pg.mode = *parsed;
  options.upstream = weir::ingest::make_postgres_source(std::move(pg));
  options.tables = {"public.pg_lag_a", "public.pg_lag_b"};
  options.add_table = "public.pg_lag_big";
  options.add_after = std::chrono::seconds(2);
  options.stop = std::make_shared<std::atomic<bool>>(false);

  // The writer: `rate` single-row transactions per second into each small table, paced against
  // the clock so that a slow statement does not lower the rate.
  std::atomic<uint64_t> written{0};
  std::thread writer([&] {
    PGconn* conn = connect(url);
    const auto start = std::chrono::steady_clock::now();
    const auto period = std::chrono::duration<double>(1.0 / (2 * rate));
    for (uint64_t n = 0; !options.stop->load(); ++n) {
      std::this_thread::sleep_until(start + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                period * static_cast<double>(n)));
      exec(conn, std::string("INSERT INTO ") + (n % 2 == 0 ? "pg_lag_a" : "pg_lag_b") +
                     " (v, at) VALUES ('row " + std::to_string(n) + "', now())");
      written.fetch_add(1);
    }
    PQfinish(conn);
  });

  weir::ingest::IngestMonitor monitor;
  std::vector<double> lags;
  double snapshot_seconds = 0;
  std::thread sampler([&] {
    std::chrono::steady_clock::time_point snapshot_start{};
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (options.stop->load()) return;
      auto views = monitor.exports();
      const weir::ingest::IngestMonitor::ExportView* big = nullptr;
      std::vector<const weir::ingest::IngestMonitor::ExportView*> small;
      for (const auto& v : views) {
        if (v.table == "public.pg_lag_big") {
          big = &v;
        } else {
          small.push_back(&v);
        }
      }
      if (big == nullptr || !big->snapshotting || big->snapshot_total == 0) continue;
      if (snapshot_start == std::chrono::steady_clock::time_point{})
        snapshot_start = std::chrono::steady_clock::now();
      if (big->persisted_upper > 0) {  // The snapshot is in the shard.
        snapshot_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - snapshot_start)
                .count();
        options.stop->store(true);
        return;
      }
      for (const auto* v : small) {
        lags.push_back(monitor.lag(v->persisted_upper).count());
        if (std::getenv("PG_INGEST_LAG_TRACE") != nullptr) {
          std::fprintf(
              stderr, "%.1f s %s lag %.3f s upper %llu snapshot %llu/%llu\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - snapshot_start)
                  .count(),
              v->table.c_str(), lags.back(), static_cast<unsigned long long>(v->persisted_upper),
              static_cast<unsigned long long>(big->snapshot_done),
              static_cast<unsigned long long>(big->snapshot_total));
        }
      }
    }
  });
  const auto started = std::chrono::steady_clock::now();
  auto report = weir::ingest::run_ingest(options, &monitor);
  const double run_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  options.stop->store(true);
  sampler.join();
  writer.join();
  // Not the throwing overload: SQLite may still be removing its -shm file as the client closes.
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  {
    PGconn* conn = connect(url);
    exec(conn,
         "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE "
         "slot_name = '" +
             slot + "'");
    PQfinish(conn);
  }
  if (!report.ok()) {
    std::fprintf(stderr, "pg_ingest_lag: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  if (lags.empty()) {
    std::fprintf(stderr, "pg_ingest_lag: no samples taken during the snapshot\n");
    return 1;
  }
  std::sort(lags.begin(), lags.end());
  auto pct = [&](double p) {
    return lags[std::min(lags.size() - 1, static_cast<size_t>(p * lags.size()))];
  };
  std::printf(
      "pg_ingest_lag: mode %s, -w %zu, %llu-row snapshot took %.1f s; %llu small transactions "
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
