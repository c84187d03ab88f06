// The PostgreSQL source end to end, against the real server of the `postgres` fixture: snapshot
// and stream equal the upstream tables, for 1, 2 and 4 workers, with every supported type, NULLs,
// TOASTed values and a concurrent writer; a transaction spanning three tables lands at one time;
// definite errors stop only their export and survive a restart; the checks at start name what
// is wrong.

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "ingest_test_util.h"
#include "postgres_test_util.h"
#include <gtest/gtest.h>

#include "weir/sources/postgres/pgoutput.h"

namespace weir::ingest::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kSchema = R"sql(
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE TABLE typed (
  id int, b bool, i2 int2, i8 int8, f4 float4, f8 float8, n numeric, n2 numeric(10,3),
  t text, vc varchar(20), c char(5), by bytea, d date, tm time, ttz timetz, ts timestamp,
  tstz timestamptz, iv interval, u uuid, j json, jb jsonb, ai int[], at text[], m mood, p posint,
  big text);
-- typed less its enum and domain: every column decodable from binary, so its snapshot is a
-- binary COPY (typed's is text); its dropped columns are in the catalog, not in its rows.
CREATE TABLE typed_bin (LIKE typed);
ALTER TABLE typed_bin DROP COLUMN m, DROP COLUMN p;
CREATE TABLE a (k int, note text);
CREATE TABLE b (k int, note text);
CREATE TABLE c (k int, note text);
ALTER TABLE typed REPLICA IDENTITY FULL;
ALTER TABLE typed_bin REPLICA IDENTITY FULL;
ALTER TABLE a REPLICA IDENTITY FULL;
ALTER TABLE b REPLICA IDENTITY FULL;
ALTER TABLE c REPLICA IDENTITY FULL;
CREATE PUBLICATION weir_pub FOR TABLE typed, typed_bin, a, b, c;
)sql";

// typed_bin's columns, for copying rows of typed into it.
constexpr const char* kBinColumns =
    "id, b, i2, i8, f4, f8, n, n2, t, vc, c, by, d, tm, ttz, ts, tstz, iv, u, j, jb, ai, at, big";

// A row of `typed` for id `k` (some columns NULL, one in ten with a TOASTed `big`).
std::string typed_row(int k) {
  const bool nulls = k % 7 == 3;
  auto maybe = [&](const std::string& v) { return nulls ? std::string("NULL") : v; };
  const std::string big =
      k % 10 == 0 ? "(SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 400))"
                  : "'small " + std::to_string(k) + "'";
  return absl::StrCat(
      "(", k, ", ", maybe(k % 2 ? "true" : "false"), ", ", maybe(std::to_string(k % 32767 - 100)),
      ", ", maybe(std::to_string(int64_t{k} * 1000000007LL - (1LL << 40))), ", ",
      maybe(absl::StrCat(k, ".25::float4 / 3")), ", ", maybe(absl::StrCat(k, "::float8 / 7")), ", ",
      maybe(absl::StrCat("'", k, "123456789012345678901234567890.000100'::numeric")), ", ",
      maybe(absl::StrCat(k % 1000, ".5")), ", ",
      maybe(absl::StrCat("E'text\\t", k, "\\nwith \\\\ backslash and \\u00e9'")), ", ",
      maybe(absl::StrCat("'vc", k, "'")), ", ", maybe("'ab'"), ", ",
      maybe(absl::StrCat("'\\x00ff", k % 10, "a'::bytea")), ", ",
      maybe(absl::StrCat("date '2024-02-29' + ", k % 4000 - 2000)), ", ",
      maybe("time '12:34:56.789'"), ", ", maybe("timetz '01:02:03+05:30'"), ", ",
      maybe(absl::StrCat("timestamp '1999-12-31 23:59:59.5' + interval '", k, " hours'")), ", ",
      maybe(absl::StrCat("timestamptz '2020-06-01 00:00:00+02' + interval '", k, " minutes'")),
      ", ", maybe(absl::StrCat("interval '1 year -2 months ", k, " days 03:04:05.6'")), ", ",
      maybe("'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'"), ", ",
      maybe(absl::StrCat("'{\"k\":  ", k, "}'")), ", ",
      maybe(absl::StrCat("'{\"k\": ", k, ", \"a\": [1, 2]}'")), ", ",
      maybe(absl::StrCat("'{", k, ",NULL,3}'")), ", ", maybe("'{\"a b\",\"c,d\",NULL,\"\\\\\"}'"),
      ", ", maybe(k % 3 == 0 ? "'sad'" : "'happy'"), ", ", maybe(std::to_string(k + 1)), ", ", big,
      ")");
}

// Writes `transactions` random transactions: inserts, updates (leaving TOASTed values unchanged)
// and deletes of `typed` (and the same in typed_bin), and inserts of one key into a, b and c
// together.
void write_changes(const std::string& url, int first_key, int transactions, uint64_t seed) {
  Sql sql(url);
  std::mt19937_64 random(seed);
  int next = first_key;
  for (int i = 0; i < transactions; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 2000));
    switch (random() % 4) {
      case 0: {
        const int k = next++;
        sql.exec(absl::StrCat("BEGIN; INSERT INTO typed VALUES ", typed_row(k),
                              "; INSERT INTO typed_bin SELECT ", kBinColumns,
                              " FROM typed WHERE id = ", k, "; COMMIT"));
        break;
      }
      case 1: {
        const auto where =
            absl::StrCat(" SET f8 = f8 + 1, t = 'updated' WHERE id % 13 = ", random() % 13, ";");
        sql.exec(absl::StrCat("UPDATE typed", where, "UPDATE typed_bin", where));
        break;
      }
      case 2: {
        const auto where = absl::StrCat(" WHERE id = ", random() % next, ";");
        sql.exec(absl::StrCat("DELETE FROM typed", where, "DELETE FROM typed_bin", where));
        break;
      }
      default: {
        const int k = next++;
        sql.exec(absl::StrCat("BEGIN; INSERT INTO a VALUES (", k, ", 'x'); INSERT INTO b VALUES (",
                              k, ", 'y'); INSERT INTO c VALUES (", k, ", 'z'); COMMIT"));
        break;
      }
    }
  }
}

// The source on `db`'s publication `weir_pub` (or `publication`), through the database's slot.
PostgresIngestOptions source_of(const TestDatabase& db,
                                const std::string& publication = "weir_pub") {
  PostgresIngestOptions pg;
  pg.conninfo = db.url();
  pg.publication = publication;
  pg.slot = db.slot();
  return pg;
}

// Runs `options` (its stop flag set) for `duration`, then stops it.
absl::StatusOr<IngestReport> run_for(IngestOptions& options, std::chrono::milliseconds duration) {
  options.stop = std::make_shared<std::atomic<bool>>(false);
  absl::StatusOr<IngestReport> report = absl::UnknownError("not run");
  std::thread ingest([&] { report = run_ingest(options); });
  std::this_thread::sleep_for(duration);
  options.stop->store(true);
  ingest.join();
  return report;
}

// Ingests `db` until every table's upper reaches the WAL position after `write` returns, then
// stops. Returns the report and the last time before that position (the shards are complete
// there). With `after_snapshot`, `write` starts once every
// table's snapshot is durable.
std::pair<absl::StatusOr<IngestReport>, uint64_t> ingest_while(const TestDatabase& db,
                                                               const std::filesystem::path& dir,
                                                               size_t workers,
                                                               const std::function<void()>& write,
                                                               bool after_snapshot = false,
                                                               const std::string& conninfo = "") {
  IngestOptions options;
  options.location = persist::PersistLocation::in_directory(dir.string());
  options.workers.workers = workers;
  options.compaction_window = std::numeric_limits<uint64_t>::max();
  options.stop = std::make_shared<std::atomic<bool>>(false);
  const auto t0 = Clock::now();
  options.log = [t0](const std::string& line) {
    if (std::getenv("WEIR_TEST_VERBOSE") != nullptr) {
      std::fprintf(stderr, "%8.3f %s\n", std::chrono::duration<double>(Clock::now() - t0).count(),
                   line.c_str());
    }
  };
  PostgresIngestOptions pg = source_of(db);
  if (!conninfo.empty()) pg.conninfo = conninfo;
  pg.workers = workers;
  options.upstream = make_postgres_source(pg);
  IngestMonitor monitor;
  absl::StatusOr<IngestReport> report = absl::UnknownError("not run");
  std::thread ingest([&] { report = run_ingest(options, &monitor); });
  if (after_snapshot) {
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    for (;;) {
      auto views = monitor.exports();
      bool done = !views.empty();
      for (const auto& v : views) done &= v.persisted_upper > 0;
      if (done || Clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  write();
  if (std::getenv("WEIR_TEST_VERBOSE") != nullptr) {
    options.log("written");
  }
  Sql sql(db.url());
  const auto lsn = sources::postgres::parse_lsn(sql.one("SELECT pg_current_wal_lsn()"));
  EXPECT_TRUE(lsn.ok());
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  for (;;) {
    auto views = monitor.exports();
    bool done = !views.empty();
    for (const auto& v : views) done &= v.persisted_upper >= *lsn;
    if (std::getenv("WEIR_TEST_VERBOSE") != nullptr) {
      std::string line = "waiting for " + sources::postgres::format_lsn(*lsn) + ":";
      for (const auto& v : views) {
        line += " " + v.table + "=" + sources::postgres::format_lsn(v.persisted_upper);
      }
      line += " upstream=" + sources::postgres::format_lsn(monitor.upstream_offset());
      options.log(line);
    }
    if (done || Clock::now() > deadline) {
      EXPECT_TRUE(done) << "the shards did not reach " << sources::postgres::format_lsn(*lsn);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  options.stop->store(true);
  ingest.join();
  // Every commit before the WAL's end then is in the shards: read them at the time before it.
  return {std::move(report), *lsn - 1};
}

// Every update of shard `kind.table` at times in (0, until], with its time (a listen from 0:
// snapshots give every update at their as_of).
std::vector<persist::Update> history(persist::PersistClient& client, const std::string& table,
                                     uint64_t until) {
  std::vector<persist::Update> updates;
  auto reader = client.open_reader(shard_name("pg", table));
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return updates;
  auto listen = reader->listen(0);
  EXPECT_TRUE(listen.ok()) << listen.status();
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (listen.ok() && !listen->frontier().is_empty() && listen->frontier().time() <= until) {
    auto event = listen->next();
    EXPECT_TRUE(event.ok()) << event.status();
    if (!event.ok() || Clock::now() > deadline) break;
    if (!event->has_value()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    for (auto& u : (*event)->updates) {
      if (u.time <= until) updates.push_back(std::move(u));
    }
  }
  (void)reader->expire();
  return updates;
}

class PostgresIngestTest : public ::testing::TestWithParam<size_t> {};

TEST_P(PostgresIngestTest, SnapshotAndStreamEqualTheUpstreamTables) {
  const size_t workers = GetParam();
  TestDatabase db(absl::StrCat("equal", workers));
  ASSERT_TRUE(db.available()) << "needs the postgres fixture";
  {
    Sql sql(db.url());
    sql.exec(kSchema);
    std::string rows;
    for (int k = 0; k < 300; ++k) absl::StrAppend(&rows, k ? ", " : "", typed_row(k));
    sql.exec("INSERT INTO typed VALUES " + rows);
    sql.exec("INSERT INTO typed (id) VALUES (-1)");  // Every column but one NULL.
    sql.exec(absl::StrCat("INSERT INTO typed_bin SELECT ", kBinColumns, " FROM typed"));
    sql.exec("INSERT INTO a SELECT g, 'snap' FROM generate_series(1, 50) g");
  }
  const auto dir = fresh_dir(absl::StrCat("pg-equal-", workers));
  auto [report, lsn] = ingest_while(db, dir, workers, [&] {
    // A concurrent writer, during the snapshot and after it.
    write_changes(db.url(), 1000, 400, workers);
  });
  ASSERT_TRUE(report.ok()) << report.status();

  auto client = persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
  ASSERT_TRUE(client.ok()) << client.status();
  Sql sql(db.url());
  for (const std::string table : {"typed", "typed_bin", "a", "b", "c"}) {
    const auto expected = sql.copy_lines("public." + table);
    const auto got = shard_lines(**client, "pg", "public." + table, lsn);
    EXPECT_EQ(got.size(), expected.size()) << table;
    EXPECT_EQ(got, expected) << table;
  }
  // The transaction that wrote key k to a, b and c is at one time in all three shards.
  std::map<std::string, std::set<uint64_t>> times;  // Row -> times, over a, b and c.
  auto schemas = read_schemas(**client, "pg");
  ASSERT_TRUE(schemas.ok());
  for (const std::string table : {"a", "b", "c"}) {
    auto desc = sources::postgres::RelationDesc::decode(schemas->at("public." + table));
    ASSERT_TRUE(desc.ok());
    for (const auto& u : history(**client, "public." + table, lsn)) {
      if (u.diff < 0) continue;  // A rewind's retraction at time 0.
      std::string line;
      ASSERT_TRUE(sources::postgres::print_row(*desc, u.data, line).ok());
      if (line.find("snap") != std::string::npos) continue;  // a's snapshot rows.
      times[line.substr(0, line.find('\t'))].insert(u.time);
    }
  }
  size_t keys = 0;
  for (const auto& [key, at] : times) {
    EXPECT_EQ(at.size(), 1u) << "key " << key << " is at several times";
    ++keys;
  }
  EXPECT_GT(keys, 10u);
}

INSTANTIATE_TEST_SUITE_P(Workers, PostgresIngestTest, ::testing::Values(1, 2, 4));

// Protocol 2: with logical_decoding_work_mem at its least (64 kB, set through the conninfo's
// options, which weir keeps), the server streams these transactions while they run. A streamed
// transaction lands at its commit, all at one time, without its rolled-back subtransactions
// (nested ones included); an aborted one leaves nothing; small transactions committed between its
// blocks land at their own commits.
TEST(PostgresStreamingTest, LargeTransactionsStreamAndLandAtTheirCommit) {
  TestDatabase db("streaming");
  ASSERT_TRUE(db.available()) << "needs the postgres fixture";
  Sql sql(db.url());
  sql.exec(
      "CREATE TABLE big (k int, v text); ALTER TABLE big REPLICA IDENTITY FULL;"
      "CREATE TABLE small (k int); ALTER TABLE small REPLICA IDENTITY FULL;"
      "CREATE PUBLICATION weir_pub FOR TABLE big, small;"
      "INSERT INTO big SELECT g, 'snap' FROM generate_series(1, 100) g;");
  const auto dir = fresh_dir("pg-streaming");
  auto [report, lsn] = ingest_while(
      db, dir, 2,
      [&] {
        Sql writer(db.url());
        Sql other(db.url());
        writer.exec("BEGIN");
        writer.exec(
            "INSERT INTO big SELECT g, repeat('x', 100) FROM generate_series(1000, 21000) g");
        other.exec("INSERT INTO small VALUES (1)");  // Commits between the big one's blocks.
        writer.exec("SAVEPOINT s");
        writer.exec("INSERT INTO big SELECT g, 'gone' FROM generate_series(100000, 105000) g");
        writer.exec("ROLLBACK TO s");
        writer.exec("UPDATE big SET v = 'updated' WHERE k % 10 = 0");
        writer.exec("SAVEPOINT a");
        writer.exec("INSERT INTO big SELECT g, 'kept' FROM generate_series(200000, 203000) g");
        writer.exec("SAVEPOINT b");
        writer.exec("INSERT INTO big SELECT g, 'gone too' FROM generate_series(300000, 303000) g");
        writer.exec("RELEASE b");
        writer.exec("ROLLBACK TO a");
        writer.exec("DELETE FROM big WHERE k % 7 = 0");
        other.exec("INSERT INTO small VALUES (2)");
        writer.exec("COMMIT");
        writer.exec("BEGIN");
        writer.exec("INSERT INTO big SELECT g, 'aborted' FROM generate_series(400000, 420000) g");
        writer.exec("ROLLBACK");
        other.exec("INSERT INTO small VALUES (3)");
      },
      /*after_snapshot=*/true, db.url() + "?options=-c%20logical_decoding_work_mem%3D64kB");
  ASSERT_TRUE(report.ok()) << report.status();
  // The server did stream: its statistics count the streamed transactions of weir's slot.
  EXPECT_GE(
      std::stoll(sql.one("SELECT coalesce(sum(stream_txns), 0) FROM pg_stat_replication_slots "
                         "WHERE slot_name = '" +
                         db.slot() + "'")),
      2);
  auto client = persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
  ASSERT_TRUE(client.ok()) << client.status();
  for (const std::string table : {"big", "small"}) {
    const auto expected = sql.copy_lines("public." + table);
    const auto got = shard_lines(**client, "pg", "public." + table, lsn);
    EXPECT_EQ(got.size(), expected.size()) << table;
    EXPECT_EQ(got, expected) << table;
  }
  // Every change of the streamed transaction is at one time: its commit, after small's first two
  // rows (committed while it ran) and before the third.
  std::set<uint64_t> big_times, small_times;
  for (const auto& u : history(**client, "public.big", lsn)) {
    if (u.time > 0) big_times.insert(u.time);
  }
  for (const auto& u : history(**client, "public.small", lsn)) small_times.insert(u.time);
  EXPECT_EQ(big_times.size(), 1u) << "the streamed transaction is at several times";
  ASSERT_EQ(small_times.size(), 3u);
  ASSERT_FALSE(big_times.empty());
  EXPECT_LT(*std::next(small_times.begin()), *big_times.begin());
  EXPECT_GT(*small_times.rbegin(), *big_times.begin());
}

// A streamed transaction whose first change to a table is in a subtransaction rolled back
// later: pgoutput sends the table's Relation message (the schema since a committed rename) with
// that subtransaction's xid. The rename is still an incompatible schema change of x, whichever
// message carries it.
TEST(PostgresStreamingTest, ASchemaChangeSeenFirstInARolledBackSubtransactionStillErrors) {
  TestDatabase db("streaming_rel");
  ASSERT_TRUE(db.available()) << "needs the postgres fixture";
  Sql sql(db.url());
  sql.exec(
      "CREATE TABLE x (k int, note text); ALTER TABLE x REPLICA IDENTITY FULL;"
      "CREATE TABLE filler (k int, v text); ALTER TABLE filler REPLICA IDENTITY FULL;"
      "CREATE PUBLICATION weir_pub FOR TABLE x, filler;"
      "INSERT INTO x VALUES (1, 'snap');");
  const auto dir = fresh_dir("pg-streaming-rel");
  auto [report, lsn] = ingest_while(
      db, dir, 1,
      [&] {
        Sql writer(db.url());
        writer.exec("ALTER TABLE x RENAME COLUMN note TO remark");
        writer.exec("BEGIN");
        writer.exec(
            "INSERT INTO filler SELECT g, repeat('x', 100) FROM generate_series(1, 20000) g");
        writer.exec("SAVEPOINT s");
        writer.exec("INSERT INTO x SELECT g, 'gone' FROM generate_series(100, 20000) g");
        writer.exec("ROLLBACK TO s");
        writer.exec("INSERT INTO x VALUES (2, 'kept')");
        writer.exec(
            "INSERT INTO filler SELECT g, repeat('y', 100) FROM generate_series(1, 20000) g");
        writer.exec("COMMIT");
        writer.exec("INSERT INTO x VALUES (3, 'later')");
      },
      /*after_snapshot=*/true, db.url() + "?options=-c%20logical_decoding_work_mem%3D64kB");
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_GE(
      std::stoll(sql.one("SELECT coalesce(sum(stream_txns), 0) FROM pg_stat_replication_slots "
                         "WHERE slot_name = '" +
                         db.slot() + "'")),
      1);
  std::map<std::string, ExportReport> by_table;
  for (const auto& e : report->exports) by_table[e.table] = e;
  EXPECT_EQ(by_table["public.x"].health, sources::Health::kStalled) << by_table["public.x"].error;
  EXPECT_NE(by_table["public.x"].error.find("incompatible schema change"), std::string::npos)
      << by_table["public.x"].error;
}

// A streamed transaction open across a stop: the run confirms positions past its start (small
// transactions commit meanwhile), stops with its blocks only in the run's temporary file, and the
// next run gets it whole from the server at its commit.
TEST(PostgresStreamingTest, AStreamedTransactionOpenAcrossAStopLandsWholeInTheNextRun) {
  TestDatabase db("streaming_stop");
  ASSERT_TRUE(db.available()) << "needs the postgres fixture";
  Sql sql(db.url());
  sql.exec(
      "CREATE TABLE big (k int, v text); ALTER TABLE big REPLICA IDENTITY FULL;"
      "CREATE TABLE small (k int); ALTER TABLE small REPLICA IDENTITY FULL;"
      "CREATE PUBLICATION weir_pub FOR TABLE big, small;");
  const auto dir = fresh_dir("pg-streaming-stop");
  const std::string conninfo = db.url() + "?options=-c%20logical_decoding_work_mem%3D64kB";
  Sql writer(db.url());
  const auto begun = sources::postgres::parse_lsn(sql.one("SELECT pg_current_wal_lsn()"));
  auto [first, lsn1] = ingest_while(
      db, dir, 1,
      [&] {
        writer.exec("BEGIN");
        writer.exec("INSERT INTO big SELECT g, repeat('x', 100) FROM generate_series(1, 20000) g");
        for (int i = 0; i < 20; ++i) {
          sql.exec(absl::StrCat("INSERT INTO small VALUES (", i, ")"));
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      },
      /*after_snapshot=*/true, conninfo);
  ASSERT_TRUE(first.ok()) << first.status();
  // The slot confirmed past the open transaction's first change.
  const auto confirmed = sources::postgres::parse_lsn(
      sql.one("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '" +
              db.slot() + "'"));
  ASSERT_TRUE(begun.ok() && confirmed.ok());
  EXPECT_GT(*confirmed, *begun);
  writer.exec("INSERT INTO big SELECT g, 'more' FROM generate_series(20001, 30000) g");
  writer.exec("COMMIT");
  auto [second, lsn2] = ingest_while(
      db, dir, 1, [] {}, false, conninfo);
  ASSERT_TRUE(second.ok()) << second.status();
  auto client = persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
  ASSERT_TRUE(client.ok()) << client.status();
  for (const std::string table : {"big", "small"}) {
    const auto expected = sql.copy_lines("public." + table);
    const auto got = shard_lines(**client, "pg", "public." + table, lsn2);
    EXPECT_EQ(got.size(), expected.size()) << table;
    EXPECT_TRUE(got == expected) << table;
  }
}

// The definite error rows of shard `kind.table` (time -> message).
std::map<uint64_t, std::string> errors_in(persist::PersistClient& client, const std::string& table,
                                          uint64_t as_of) {
  std::map<uint64_t, std::string> errors;
  for (const auto& u : history(client, table, as_of)) {
    if (!u.data.empty() && u.data.front() == '!') errors[u.time] = u.data;
  }
  return errors;
}

// A TRUNCATE in a rolled-back subtransaction of a streamed transaction (sent in a block before
// the rollback) truncated nothing: its table does not error. One in the transaction itself does,
// at the transaction's commit.
TEST(PostgresStreamingTest, ATruncateRolledBackInAStreamedTransactionErrorsNothing) {
  TestDatabase db("streaming_trunc");
  ASSERT_TRUE(db.available()) << "needs the postgres fixture";
  Sql sql(db.url());
  sql.exec(
      "CREATE TABLE big (k int, v text); ALTER TABLE big REPLICA IDENTITY FULL;"
      "CREATE TABLE kept (k int); ALTER TABLE kept REPLICA IDENTITY FULL;"
      "CREATE TABLE cut (k int); ALTER TABLE cut REPLICA IDENTITY FULL;"
      "CREATE PUBLICATION weir_pub FOR TABLE big, kept, cut;"
      "INSERT INTO kept VALUES (1); INSERT INTO cut VALUES (1);");
  const auto dir = fresh_dir("pg-streaming-trunc");
  uint64_t committed = 0;
  auto [report, lsn] = ingest_while(
      db, dir, 1,
      [&] {
        Sql writer(db.url());
        writer.exec("BEGIN");
        writer.exec("SAVEPOINT s");
        writer.exec("TRUNCATE kept");
        writer.exec("INSERT INTO big SELECT g, repeat('x', 100) FROM generate_series(1, 20000) g");
        writer.exec("ROLLBACK TO s");
        writer.exec("INSERT INTO big SELECT g, repeat('y', 100) FROM generate_series(1, 20000) g");
        writer.exec("TRUNCATE cut");
        writer.exec("INSERT INTO kept VALUES (2)");
        writer.exec("COMMIT");
        committed = *sources::postgres::parse_lsn(writer.one("SELECT pg_current_wal_lsn()"));
        writer.exec("INSERT INTO kept VALUES (3)");
      },
      /*after_snapshot=*/true, db.url() + "?options=-c%20logical_decoding_work_mem%3D64kB");
  ASSERT_TRUE(report.ok()) << report.status();
  std::map<std::string, ExportReport> by_table;
  for (const auto& e : report->exports) by_table[e.table] = e;
  EXPECT_EQ(by_table["public.kept"].health, sources::Health::kRunning)
      << by_table["public.kept"].error;
  EXPECT_EQ(by_table["public.cut"].health, sources::Health::kStalled);
  auto client = persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ(shard_lines(**client, "pg", "public.kept", lsn), sql.copy_lines("public.kept"));
  const auto errors = errors_in(**client, "public.cut", lsn);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_LE(errors.begin()->first, committed);
}

TEST(PostgresErrorsTest, ADroppedColumnAndATruncateStopOnlyTheirExportsAndStayAfterARestart) {
  TestDatabase db("errors");
  ASSERT_TRUE(db.available()) << "needs the postgres fixture";
  Sql sql(db.url());
  sql.exec(
      "CREATE TABLE x (k int, note text); CREATE TABLE y (k int); CREATE TABLE z (k int);"
      "ALTER TABLE x REPLICA IDENTITY FULL; ALTER TABLE y REPLICA IDENTITY FULL;"
      "ALTER TABLE z REPLICA IDENTITY FULL; CREATE PUBLICATION weir_pub FOR TABLE x, y, z;"
      "INSERT INTO x SELECT g, 'n' FROM generate_series(1, 100) g;"
      "INSERT INTO y SELECT g FROM generate_series(1, 100) g;"
      "INSERT INTO z SELECT g FROM generate_series(1, 100) g;");
  const auto dir = fresh_dir("pg-errors");
  auto [first, lsn1] = ingest_while(
      db, dir, 2,
      [&] {
        Sql writer(db.url());
        for (int i = 0; i < 50; ++i) {
          writer.exec(absl::StrCat("INSERT INTO x VALUES (", 1000 + i,
                                   ", 'm'); INSERT INTO y VALUES (", 1000 + i,
                                   "); INSERT INTO z VALUES (", 1000 + i, ")"));
        }
        writer.exec("ALTER TABLE x DROP COLUMN note");
        writer.exec("TRUNCATE z");
        for (int i = 0; i < 50; ++i) {
          writer.exec(absl::StrCat("INSERT INTO x VALUES (", 2000 + i, "); INSERT INTO y VALUES (",
                                   2000 + i, "); INSERT INTO z VALUES (", 2000 + i, ")"));
        }
      },
      /*after_snapshot=*/true);
  ASSERT_TRUE(first.ok()) << first.status();
  std::map<std::string, ExportReport> by_table;
  for (const auto& e : first->exports) by_table[e.table] = e;
  EXPECT_EQ(by_table["public.x"].health, sources::Health::kStalled);
  EXPECT_NE(by_table["public.x"].error.find("incompatible schema change"), std::string::npos)
      << by_table["public.x"].error;
  EXPECT_EQ(by_table["public.z"].health, sources::Health::kStalled);
  EXPECT_NE(by_table["public.z"].error.find("truncated"), std::string::npos)
      << by_table["public.z"].error;
  EXPECT_EQ(by_table["public.y"].health, sources::Health::kRunning) << by_table["public.y"].error;

  auto client = persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
  ASSERT_TRUE(client.ok());
  const auto x_errors = errors_in(**client, "public.x", lsn1);
  const auto z_errors = errors_in(**client, "public.z", lsn1);
  ASSERT_EQ(x_errors.size(), 1u);
  ASSERT_EQ(z_errors.size(), 1u);
  EXPECT_EQ(shard_lines(**client, "pg", "public.y", lsn1), sql.copy_lines("public.y"));

  // A restart: the errors stay where they were, y goes on.
  auto [second, lsn2] = ingest_while(db, dir, 2, [&] {
    Sql writer(db.url());
    for (int i = 0; i < 20; ++i) {
      writer.exec(absl::StrCat("INSERT INTO x VALUES (", 3000 + i, "); INSERT INTO y VALUES (",
                               3000 + i, "); INSERT INTO z VALUES (", 3000 + i, ")"));
    }
  });
  ASSERT_TRUE(second.ok()) << second.status();
  by_table.clear();
  for (const auto& e : second->exports) by_table[e.table] = e;
  EXPECT_EQ(by_table["public.x"].health, sources::Health::kStalled);
  EXPECT_EQ(by_table["public.z"].health, sources::Health::kStalled);
  EXPECT_EQ(errors_in(**client, "public.x", lsn2), x_errors);
  EXPECT_EQ(errors_in(**client, "public.z", lsn2), z_errors);
  EXPECT_EQ(shard_lines(**client, "pg", "public.y", lsn2), sql.copy_lines("public.y"));
}

TEST(PostgresErrorsTest, ADroppedSlotErrorsEveryExport) {
  TestDatabase db("slot");
  ASSERT_TRUE(db.available()) << "needs the postgres fixture";
  Sql sql(db.url());
  sql.exec(
      "CREATE TABLE x (k int); CREATE TABLE y (k int);"
      "ALTER TABLE x REPLICA IDENTITY FULL; ALTER TABLE y REPLICA IDENTITY FULL;"
      "CREATE PUBLICATION weir_pub FOR TABLE x, y; INSERT INTO x VALUES (1); "
      "INSERT INTO y VALUES (2);");
  const auto dir = fresh_dir("pg-slot");
  auto [first, lsn] = ingest_while(db, dir, 1, [&] { sql.exec("INSERT INTO x VALUES (3)"); });
  ASSERT_TRUE(first.ok()) << first.status();
  // Changes made while the slot is gone are lost to it: the source must not carry on as if not.
  sql.exec("SELECT pg_drop_replication_slot('" + db.slot() + "')");
  sql.exec("INSERT INTO x VALUES (4)");

  IngestOptions options;
  options.location = persist::PersistLocation::in_directory(dir.string());
  options.upstream = make_postgres_source(source_of(db));
  auto report = run_for(options, std::chrono::seconds(3));
  ASSERT_TRUE(report.ok()) << report.status();
  for (const auto& e : report->exports) {
    EXPECT_EQ(e.health, sources::Health::kStalled) << e.table;
    EXPECT_NE(e.error.find(db.slot()), std::string::npos) << e.error;
  }
}

TEST(PostgresAddTableTest, ATableAddedToThePublicationIsSnapshottedWhileTheOtherStreams) {
  TestDatabase db("addtable");
  ASSERT_TRUE(db.available()) << "needs the postgres fixture";
  Sql sql(db.url());
  sql.exec(
      "CREATE TABLE x (k int, v text); CREATE TABLE y (k int, v text);"
      "ALTER TABLE x REPLICA IDENTITY FULL; ALTER TABLE y REPLICA IDENTITY FULL;"
      "CREATE PUBLICATION weir_pub FOR TABLE x;"
      "INSERT INTO x SELECT g, 'x' FROM generate_series(1, 1000) g;"
      "INSERT INTO y SELECT g, 'y' FROM generate_series(1, 20000) g;");
  const auto dir = fresh_dir("pg-addtable");
  auto [first, lsn1] = ingest_while(db, dir, 2, [&] {
    sql.exec("INSERT INTO x VALUES (5000, 'stream'); INSERT INTO y VALUES (5000, 'unpublished')");
  });
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->exports.size(), 1u);
  // Changes to y while it is not published, then it joins the publication: the restart
  // snapshots it while x resumes from its upper, with a writer changing both meanwhile (so the
  // stream, which starts at x's upper, carries changes of y that the snapshot already has).
  sql.exec("UPDATE y SET v = 'before' WHERE k % 3 = 0; ALTER PUBLICATION weir_pub ADD TABLE y");
  auto [second, lsn2] = ingest_while(db, dir, 2, [&] {
    Sql writer(db.url());
    for (int i = 0; i < 200; ++i) {
      writer.exec(absl::StrCat("BEGIN; UPDATE y SET v = 'w", i, "' WHERE k % 97 = ", i % 97,
                               "; DELETE FROM y WHERE k = ", i * 50, "; INSERT INTO x VALUES (",
                               6000 + i, ", 'w'); COMMIT"));
    }
  });
  ASSERT_TRUE(second.ok()) << second.status();
  auto client = persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
  ASSERT_TRUE(client.ok());
  EXPECT_EQ(shard_lines(**client, "pg", "public.x", lsn2), sql.copy_lines("public.x"));
  EXPECT_EQ(shard_lines(**client, "pg", "public.y", lsn2), sql.copy_lines("public.y"));
  // x's history before the restart is untouched.
  EXPECT_EQ(shard_lines(**client, "pg", "public.x", lsn1).size(), 1001u);
}

// Runs of part of the publication, tables that change under the source while it is down, and
// generated columns (found by review).
TEST(PostgresTablesTest, SubsetRunsRecreatedAndRemovedTablesAndGeneratedColumns) {
  TestDatabase db("tables");
  ASSERT_TRUE(db.available()) << "needs the postgres fixture";
  Sql sql(db.url());
  sql.exec(
      "CREATE TABLE a (k int, g int GENERATED ALWAYS AS (k * 2) STORED, v text);"
      "CREATE TABLE b (k int); CREATE TABLE c (k int);"
      "ALTER TABLE a REPLICA IDENTITY FULL; ALTER TABLE b REPLICA IDENTITY FULL;"
      "ALTER TABLE c REPLICA IDENTITY FULL; CREATE PUBLICATION weir_pub FOR TABLE a, b, c;"
      "INSERT INTO a (k, v) SELECT g, 'a' FROM generate_series(1, 100) g;"
      "INSERT INTO b SELECT generate_series(1, 100); INSERT INTO c VALUES (1);");
  const auto dir = fresh_dir("pg-tables");
  auto [first, lsn1] = ingest_while(db, dir, 2, [&] {
    sql.exec("UPDATE a SET v = 'u' WHERE k < 10; INSERT INTO b VALUES (1000)");
  });
  ASSERT_TRUE(first.ok()) << first.status();
  // Only a: b takes changes meanwhile, which the slot must keep for b's next run.
  {
    IngestOptions options;
    options.location = persist::PersistLocation::in_directory(dir.string());
    options.tables = {"public.a"};
    PostgresIngestOptions pg = source_of(db);
    pg.status_interval = std::chrono::milliseconds(20);
    options.upstream = make_postgres_source(pg);
    options.stop = std::make_shared<std::atomic<bool>>(false);
    absl::StatusOr<IngestReport> report = absl::UnknownError("not run");
    std::thread ingest([&] { report = run_ingest(options); });
    // Long enough for many status updates while a's upper moves past b's.
    for (int i = 0; i < 30; ++i) {
      sql.exec(absl::StrCat("INSERT INTO b VALUES (", 2000 + i, "); INSERT INTO a (k, v) VALUES (",
                            2000 + i, ", 'x')"));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    options.stop->store(true);
    ingest.join();
    ASSERT_TRUE(report.ok()) << report.status();
  }
  // While down: c is dropped and created again, b's changes go on.
  sql.exec(
      "DROP TABLE c; CREATE TABLE c (k int); ALTER TABLE c REPLICA IDENTITY FULL;"
      "ALTER PUBLICATION weir_pub ADD TABLE c; INSERT INTO c VALUES (7);"
      "INSERT INTO b VALUES (3000)");
  auto [second, lsn2] = ingest_while(db, dir, 2, [&] { sql.exec("INSERT INTO b VALUES (4000)"); });
  // c was re-created while the source was down: noticed by the plan.
  ASSERT_TRUE(second.ok()) << second.status();
  std::map<std::string, ExportReport> by_table;
  for (const auto& e : second->exports) by_table[e.table] = e;
  EXPECT_EQ(by_table["public.b"].health, sources::Health::kRunning) << by_table["public.b"].error;
  EXPECT_EQ(by_table["public.c"].health, sources::Health::kStalled);
  EXPECT_NE(by_table["public.c"].error.find("dropped and created again"), std::string::npos)
      << by_table["public.c"].error;
  auto client = persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
  ASSERT_TRUE(client.ok());
  EXPECT_EQ(shard_lines(**client, "pg", "public.a", lsn2), sql.copy_lines("public.a"));
  EXPECT_EQ(shard_lines(**client, "pg", "public.b", lsn2), sql.copy_lines("public.b"));

  // a is dropped and created again while the source runs: noticed while it runs, by whichever
  // comes first: the stream (the new oid's Relation message, at that LSN) or the publication
  // check (the old oid is gone: the next plan errors it at its upper).
  {
    auto [run, lsn] = ingest_while(
        db, dir, 1,
        [&] {
          sql.exec("INSERT INTO a (k) VALUES (6)");
          sql.exec(
              "DROP TABLE a; CREATE TABLE a (k int, g int GENERATED ALWAYS AS (k * 2) STORED, "
              "v text); ALTER TABLE a REPLICA IDENTITY FULL; "
              "ALTER PUBLICATION weir_pub ADD TABLE a; INSERT INTO a (k) VALUES (7)");
        },
        /*after_snapshot=*/true);
    ASSERT_TRUE(run.ok()) << run.status();
    std::string error;
    for (const auto& e : run->exports) {
      if (e.table == "public.a") error = e.error;
    }
    EXPECT_NE(error.find("dropped and created again"), std::string::npos) << error;
  }
  // b leaves the publication while the source is down: its export errors, it is not forgotten.
  sql.exec("ALTER PUBLICATION weir_pub DROP TABLE b");
  // Every export is errored now, so nothing streams and the uppers stay: a timed run.
  IngestOptions options;
  options.location = persist::PersistLocation::in_directory(dir.string());
  options.upstream = make_postgres_source(source_of(db));
  auto third = run_for(options, std::chrono::seconds(2));
  ASSERT_TRUE(third.ok()) << third.status();
  by_table.clear();
  for (const auto& e : third->exports) by_table[e.table] = e;
  EXPECT_NE(by_table["public.b"].error.find("left publication"), std::string::npos)
      << by_table["public.b"].error;
}

// run_ingest with the PostgreSQL source on `db`, expected to fail at once.
absl::Status ingest_error(const TestDatabase& db, const std::string& publication,
                          std::string slot = "") {
  if (slot.empty()) slot = db.slot();
  IngestOptions options;
  options.location =
      persist::PersistLocation::in_directory(fresh_dir("pg-checks-" + slot).string());
  PostgresIngestOptions pg = source_of(db, publication);
  pg.slot = slot;
  options.upstream = make_postgres_source(pg);
  auto report = run_ingest(options);
  EXPECT_FALSE(report.ok());
  return report.status();
}

// A table removed from the publication while the source runs: the server just stops sending its
// changes. Its frontier must not pass the removal: its shard errors at an LSN before which it
// holds every published change, never claiming a time whose changes did not come. (The removal
// was noticed only by the next run's plan, after the shard had claimed later times.)
TEST(PostgresTablesTest, ATableRemovedFromThePublicationWhileRunningErrorsBeforeItsLostChanges) {
  TestDatabase db("removedlive");
  ASSERT_TRUE(db.available()) << "needs the postgres fixture";
  Sql sql(db.url());
  sql.exec(
      "CREATE TABLE x (k int, v text); CREATE TABLE y (k int, v text);"
      "ALTER TABLE x REPLICA IDENTITY FULL; ALTER TABLE y REPLICA IDENTITY FULL;"
      "CREATE PUBLICATION weir_pub FOR TABLE x, y;"
      "INSERT INTO x SELECT g, 'x' FROM generate_series(1, 100) g;"
      "INSERT INTO y SELECT g, 'y' FROM generate_series(1, 100) g;");
  const auto dir = fresh_dir("pg-removed-live");
  auto [report, lsn] = ingest_while(
      db, dir, 2,
      [&] {
        sql.exec("INSERT INTO y VALUES (1000, 'published'); INSERT INTO x VALUES (1000, 'x')");
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        sql.exec("ALTER PUBLICATION weir_pub DROP TABLE y");
        for (int i = 0; i < 20; ++i) {
          sql.exec(absl::StrCat("INSERT INTO y VALUES (", 2000 + i,
                                ", 'lost'); INSERT INTO x VALUES (", 2000 + i, ", 'x')"));
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      },
      /*after_snapshot=*/true);
  ASSERT_TRUE(report.ok()) << report.status();
  auto client = persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
  ASSERT_TRUE(client.ok());
  EXPECT_EQ(shard_lines(**client, "pg", "public.x", lsn), sql.copy_lines("public.x"));
  const auto errors = errors_in(**client, "public.y", lsn);
  ASSERT_EQ(errors.size(), 1u) << "y's frontier passed its removal from the publication";
  EXPECT_NE(errors.begin()->second.find("publication"), std::string::npos)
      << errors.begin()->second;
  // Before its error, y holds every change it had while published, and none after.
  sql.exec("CREATE TABLE y_published AS SELECT * FROM y WHERE v <> 'lost'");
  EXPECT_EQ(shard_lines(**client, "pg", "public.y", errors.begin()->first - 1),
            sql.copy_lines("public.y_published"));
  for (const auto& e : report->exports) {
    if (e.table == "public.y") {
      EXPECT_EQ(e.health, sources::Health::kStalled) << e.error;
    }
  }
}

// The removal's commit record is in the WAL (and decoded: the server stops sending y's changes
// after it) before other sessions see it: here its session waits for a synchronous standby that
// never answers, between the two. A check that reads the WAL position and then the publication
// meanwhile finds y still published, past the removal; y's frontier must still not pass the
// changes that never came.
TEST(PostgresTablesTest, ARemovalCommittedButNotYetVisibleStillStopsTheFrontierBeforeIt) {
  TestDatabase db("removedsyncrep");
  ASSERT_TRUE(db.available()) << "needs the postgres fixture";
  Sql sql(db.url());
  sql.exec(
      "CREATE TABLE x (k int, v text); CREATE TABLE y (k int, v text);"
      "ALTER TABLE x REPLICA IDENTITY FULL; ALTER TABLE y REPLICA IDENTITY FULL;"
      "CREATE PUBLICATION weir_pub FOR TABLE x, y;"
      "INSERT INTO x SELECT g, 'x' FROM generate_series(1, 100) g;"
      "INSERT INTO y SELECT g, 'y' FROM generate_series(1, 100) g;");
  const auto dir = fresh_dir("pg-removed-syncrep");
  uint64_t lost_by = 0;
  auto [report, lsn] = ingest_while(
      db, dir, 1,
      [&] {
        Sql remover(db.url());
        const std::string pid = remover.one("SELECT pg_backend_pid()");
        sql.exec("ALTER SYSTEM SET synchronous_standby_names = 'nobody'");
        sql.exec("SELECT pg_reload_conf()");
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        std::thread removing([&] {
          remover.exec("SET synchronous_commit = on");
          remover.exec("ALTER PUBLICATION weir_pub DROP TABLE y");
        });
        const auto deadline = Clock::now() + std::chrono::seconds(10);
        while (sql.one("SELECT count(*) FROM pg_stat_activity WHERE pid = " + pid +
                       " AND wait_event = 'SyncRep'") != "1" &&
               Clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        Sql writer(db.url());
        writer.exec("SET synchronous_commit = local");
        writer.exec("INSERT INTO y VALUES (2000, 'lost'); INSERT INTO x VALUES (2000, 'x')");
        lost_by = *sources::postgres::parse_lsn(sql.one("SELECT pg_current_wal_lsn()"));
        for (int i = 0; i < 10; ++i) {
          writer.exec(absl::StrCat("INSERT INTO x VALUES (", 3000 + i, ", 'x')"));
          std::this_thread::sleep_for(std::chrono::milliseconds(150));
        }
        sql.exec("SELECT pg_cancel_backend(" + pid + ")");
        removing.join();
        sql.exec("ALTER SYSTEM RESET synchronous_standby_names");
        sql.exec("SELECT pg_reload_conf()");
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        writer.exec("INSERT INTO x VALUES (4000, 'x')");
      },
      /*after_snapshot=*/true);
  sql.exec("ALTER SYSTEM RESET synchronous_standby_names");
  sql.exec("SELECT pg_reload_conf()");
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_NE(lost_by, 0u);
  auto client = persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
  ASSERT_TRUE(client.ok());
  EXPECT_EQ(shard_lines(**client, "pg", "public.x", lsn), sql.copy_lines("public.x"));
  const auto errors = errors_in(**client, "public.y", lsn);
  ASSERT_EQ(errors.size(), 1u);
  // y's 'lost' row committed before lost_by and never came: y's shard must error no later.
  EXPECT_LE(errors.begin()->first, lost_by)
      << "y's shard claims times up to " << sources::postgres::format_lsn(errors.begin()->first)
      << " without the row committed before " << sources::postgres::format_lsn(lost_by);
}

// The publication dropped while the source runs: the next plan finds it gone (a definite error
// of the whole source, written at every export's upper), not another database cluster.
TEST(PostgresTablesTest, APublicationDroppedWhileRunningErrorsEveryExport) {
  TestDatabase db("droppedpub");
  ASSERT_TRUE(db.available()) << "needs the postgres fixture";
  Sql sql(db.url());
  sql.exec(
      "CREATE TABLE x (k int); ALTER TABLE x REPLICA IDENTITY FULL;"
      "CREATE PUBLICATION weir_pub FOR TABLE x; INSERT INTO x VALUES (1);");
  IngestOptions options;
  options.location = persist::PersistLocation::in_directory(fresh_dir("pg-dropped-pub").string());
  options.upstream = make_postgres_source(source_of(db));
  std::thread dropping([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    Sql admin(db.url());
    admin.exec("DROP PUBLICATION weir_pub");
  });
  auto report = run_for(options, std::chrono::milliseconds(4000));
  dropping.join();
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->exports.size(), 1u);
  EXPECT_EQ(report->exports[0].health, sources::Health::kStalled) << report->exports[0].error;
  EXPECT_NE(report->exports[0].error.find("does not exist"), std::string::npos)
      << report->exports[0].error;
}

// The publication's kinds of change narrowed while the source runs (deletes no longer published):
// the server just stops sending the deletes. The shard must not claim times past the change
// without them: either it holds every delete, or it errors first.
TEST(PostgresTablesTest, DeletesUnpublishedWhileRunningNeverDriftSilently) {
  TestDatabase db("unpublishdelete");
  ASSERT_TRUE(db.available()) << "needs the postgres fixture";
  Sql sql(db.url());
  sql.exec(
      "CREATE TABLE x (k int); ALTER TABLE x REPLICA IDENTITY FULL;"
      "CREATE PUBLICATION weir_pub FOR TABLE x;"
      "INSERT INTO x SELECT g FROM generate_series(1, 100) g;");
  const auto dir = fresh_dir("pg-unpublish-delete");
  IngestOptions options;
  options.location = persist::PersistLocation::in_directory(dir.string());
  options.upstream = make_postgres_source(source_of(db));
  options.log = [](const std::string& line) {
    if (std::getenv("WEIR_TEST_VERBOSE") != nullptr) std::fprintf(stderr, "%s\n", line.c_str());
  };
  uint64_t deleted_by = 0;
  std::thread writing([&] {
    Sql writer(db.url());
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    writer.exec("ALTER PUBLICATION weir_pub SET (publish = 'insert, update, truncate')");
    writer.exec("DELETE FROM x WHERE k <= 50");
    deleted_by = *sources::postgres::parse_lsn(writer.one("SELECT pg_current_wal_lsn()"));
    writer.exec("INSERT INTO x VALUES (1000)");
  });
  auto report = run_for(options, std::chrono::milliseconds(4000));
  writing.join();
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->exports.size(), 1u);
  const ExportReport& x = report->exports[0];
  auto client = persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
  ASSERT_TRUE(client.ok());
  ASSERT_GT(x.upper, 0u);
  const auto errors = errors_in(**client, "public.x", x.upper - 1);
  if (errors.empty() && x.upper > deleted_by) {
    // No error, and times past the deletes claimed: x's shard must hold them.
    const auto lines = shard_lines(**client, "pg", "public.x", deleted_by);
    EXPECT_EQ(std::count(lines.begin(), lines.end(), "1"), 0)
        << "x's shard passed the deletes the server no longer sent, without an error: upper "
        << x.upper << " deleted_by " << deleted_by << " health " << static_cast<int>(x.health)
        << " " << x.error;
    EXPECT_EQ(lines.size(), 50u);
  } else if (!errors.empty()) {
    EXPECT_EQ(x.health, sources::Health::kStalled);
    EXPECT_LE(errors.begin()->first, deleted_by);
  }
}

// A run with an end below the snapshot's consistent point C: y is snapshotted (at C, after
// changes made since the slot's position) while the stream starts before them, so those changes
// are rewound out of time 0. Had the run stopped at its end, below C, its time 0 would hold them
// and the next run would give them again at their own times (duplicates): the run goes on until
// the stream has passed C.
TEST(PostgresTablesTest, AnEndBelowTheSnapshotPointStillRewindsEverything) {
  TestDatabase db("untilbelowc");
  ASSERT_TRUE(db.available()) << "needs the postgres fixture";
  Sql sql(db.url());
  sql.exec(
      "CREATE TABLE x (k int); CREATE TABLE y (k int, v text);"
      "ALTER TABLE x REPLICA IDENTITY FULL; ALTER TABLE y REPLICA IDENTITY FULL;"
      "CREATE PUBLICATION weir_pub FOR TABLE x, y;"
      "INSERT INTO x VALUES (1); INSERT INTO y SELECT g, 'y' FROM generate_series(1, 100) g;");
  const auto dir = fresh_dir("pg-until-below-c");
  const auto run = [&](std::vector<std::string> tables, std::optional<uint64_t> until) {
    IngestOptions options;
    options.location = persist::PersistLocation::in_directory(dir.string());
    options.tables = std::move(tables);
    // Every time stays readable: a run's upper may pass its end (a keepalive's WAL position,
    // with other tests writing to the server), and the since would follow it past `now - 1`.
    options.compaction_window = std::numeric_limits<uint64_t>::max();
    PostgresIngestOptions pg = source_of(db);
    pg.until = until;
    options.upstream = make_postgres_source(pg);
    auto report = run_ingest(options);
    EXPECT_TRUE(report.ok()) << report.status();
  };
  const auto lsn = [&] {
    return *sources::postgres::parse_lsn(sql.one("SELECT pg_current_wal_lsn()"));
  };
  // x alone: the slot is created and confirmed up to here.
  run({"public.x"}, lsn());
  const uint64_t end = lsn();
  // y changes after the slot's position, before its snapshot.
  for (int i = 0; i < 20; ++i) {
    sql.exec(absl::StrCat("UPDATE y SET v = 'u", i, "' WHERE k % 20 = ", i,
                          "; INSERT INTO y VALUES (", 1000 + i, ", 'new')"));
  }
  run({"public.x", "public.y"}, end);  // Ends below y's snapshot point.
  run({"public.x", "public.y"}, lsn());
  auto client = persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
  ASSERT_TRUE(client.ok());
  const uint64_t now = lsn();
  run({"public.x", "public.y"}, now);
  const auto got = shard_lines(**client, "pg", "public.y", now - 1);
  const auto expected = sql.copy_lines("public.y");
  EXPECT_EQ(got.size(), expected.size()) << "duplicated or lost rows";
  EXPECT_EQ(got, expected);
}

TEST(PostgresChecksTest, EachProblemAtStartIsNamedWithWhatToRun) {
  TestDatabase db("checks");
  ASSERT_TRUE(db.available()) << "needs the postgres fixture";
  Sql sql(db.url());
  sql.exec(
      "CREATE TABLE plain (k int PRIMARY KEY); CREATE TABLE full_one (k int);"
      "ALTER TABLE full_one REPLICA IDENTITY FULL;"
      "CREATE PUBLICATION with_plain FOR TABLE plain, full_one;"
      "CREATE PUBLICATION good FOR TABLE full_one;");
  absl::Status missing = ingest_error(db, "nope");
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition) << missing;
  EXPECT_NE(missing.message().find("publication \"nope\" does not exist"), std::string::npos)
      << missing;
  absl::Status identity = ingest_error(db, "with_plain");
  EXPECT_NE(identity.message().find("ALTER TABLE \"public\".\"plain\" REPLICA IDENTITY FULL"),
            std::string::npos)
      << identity;
  sql.exec("SELECT pg_create_logical_replication_slot('" + db.slot() + "_other', 'test_decoding')");
  sql.exec(
      "CREATE PUBLICATION inserts_only FOR TABLE full_one WITH (publish = 'insert');"
      "CREATE PUBLICATION filtered FOR TABLE full_one WHERE (k > 5);");
  absl::Status inserts = ingest_error(db, "inserts_only");
  EXPECT_NE(inserts.message().find("does not publish every kind of change"), std::string::npos)
      << inserts;
  absl::Status filtered = ingest_error(db, "filtered");
  EXPECT_NE(filtered.message().find("row filter or a column list"), std::string::npos) << filtered;
  // A refused run leaves no slot behind (it would pin the server's WAL for ever).
  EXPECT_EQ(
      sql.one("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + db.slot() + "'"),
      "0");
  absl::Status plugin = ingest_error(db, "good", db.slot() + "_other");
  EXPECT_NE(plugin.message().find("not a logical slot with pgoutput"), std::string::npos) << plugin;
  sql.exec("CREATE ROLE weak LOGIN");
  sql.exec("GRANT SELECT ON ALL TABLES IN SCHEMA public TO weak");
  IngestOptions options;
  options.location = persist::PersistLocation::in_directory(fresh_dir("pg-checks-role").string());
  PostgresIngestOptions pg;
  pg.conninfo = db.url() + "?user=weak";
  pg.publication = "good";
  pg.slot = db.slot() + "_weak";
  options.upstream = make_postgres_source(pg);
  auto report = run_ingest(options);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("may not replicate"), std::string::npos)
      << report.status();
  sql.exec("DROP OWNED BY weak; DROP ROLE weak");
}

// The rows of `COPY table TO STDOUT` in text (each line without its '\n') and in binary (each
// tuple without the header and trailer), in a session with the source's settings.
std::pair<std::vector<std::string>, std::vector<std::string>> copy_both(const std::string& url,
                                                                        const std::string& table) {
  std::vector<std::string> text, binary;
  PGconn* conn = PQconnectdb(url.c_str());
  EXPECT_EQ(PQstatus(conn), CONNECTION_OK) << PQerrorMessage(conn);
  PQclear(PQexec(conn,
                 "SET DateStyle = 'ISO, MDY'; SET IntervalStyle = postgres; SET TimeZone = UTC; "
                 "SET extra_float_digits = 1; SET bytea_output = hex"));
  for (const bool binary_format : {false, true}) {
    PGresult* result = PQexec(
        conn, absl::StrCat("COPY ", table, " TO STDOUT", binary_format ? " (FORMAT binary)" : "")
                  .c_str());
    EXPECT_EQ(PQresultStatus(result), PGRES_COPY_OUT) << PQresultErrorMessage(result);
    PQclear(result);
    std::string all;
    char* buffer = nullptr;
    int n = 0;
    while ((n = PQgetCopyData(conn, &buffer, 0)) > 0) {
      if (binary_format) {
        all.append(buffer, static_cast<size_t>(n));
      } else {
        text.emplace_back(buffer, static_cast<size_t>(n) - 1);
      }
      PQfreemem(buffer);
    }
    while (PGresult* r = PQgetResult(conn)) PQclear(r);
    if (!binary_format) continue;
    // The header (19 bytes, no extension), tuples, the trailer (int16 -1).
    auto be = [&](size_t at, int bytes) {
      uint32_t v = 0;
      for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<uint8_t>(all[at + i]);
      return v;
    };
    size_t at = 19;
    while (at + 2 <= all.size() && be(at, 2) != 0xffff) {
      const size_t start = at;
      const uint32_t fields = be(at, 2);
      at += 2;
      for (uint32_t f = 0; f < fields; ++f) {
        const uint32_t length = be(at, 4);
        at += 4;
        if (length != 0xffffffffu) at += length;
      }
      binary.push_back(all.substr(start, at - start));
    }
  }
  PQfinish(conn);
  return {text, binary};
}

// For each type, values at the edges of what its text and binary forms say (special values,
// signs, scales, zones, bounds, padding, escapes, NULL elements): the binary tuple of each row
// encodes to the same bytes as its text line (found by review of the binary snapshot).
TEST(PostgresBinaryCopyTest, EdgeValuesEncodeTheSameFromBinaryAsFromText) {
  TestDatabase db("binedge");
  ASSERT_TRUE(db.available()) << "needs the postgres fixture";
  Sql sql(db.url());
  struct Case {
    std::string type;
    std::vector<std::string> values;
  };
  const std::vector<Case> cases = {
      {"bool", {"true", "false"}},
      {"int2", {"-32768", "32767", "0"}},
      {"int4", {"-2147483648", "2147483647"}},
      {"int8", {"-9223372036854775808", "9223372036854775807"}},
      {"oid", {"0", "4294967295"}},
      {"float4",
       {"'-0'", "'NaN'", "'Infinity'", "'-Infinity'", "'1e-45'", "'3.4028235e38'", "'0.1'",
        "'1.1754944e-38'", "'-1.5'"}},
      {"float8",
       {"'-0'", "'NaN'", "'Infinity'", "'-Infinity'", "'5e-324'", "'1.7976931348623157e308'",
        "'0.1'", "'2.2250738585072014e-308'", "'1e22'", "'1e23'"}},
      {"numeric",
       {"'NaN'", "'Infinity'", "'-Infinity'", "0", "'0.000'", "'-0.000'", "'1e-20'", "'123.4500'",
        "'1e100'", "'9999.9999'", "'0.1'", "'-0.00001'", "10000", "'100000000.00000001'",
        "round(1/3::numeric, 1000)", "'1e131071'::numeric", "'-1e-16383'::numeric"}},
      {"numeric(10,3)", {"'1.5'", "'-0.0004'", "'9999999.999'"}},
      {"text", {"''", "E'a\\tb\\nc\\\\d\\re'", "'é中'", "'\\N'", "'NULL'"}},
      {"varchar(4)", {"''", "'abcd'", "'é'"}},
      {"char(5)", {"''", "'ab'", "'abcde'", "'é'", "' '"}},
      {"char", {"'x'"}},
      {"name", {"''", "repeat('n', 63)", "'Mixed Case'"}},
      {"bytea", {"'\\x'", "'\\x00'", "'\\xdeadbeef'", "E'\\\\000\\\\377'::bytea"}},
      {"date",
       {"'infinity'", "'-infinity'", "'4714-11-24 BC'", "'5874897-12-31'", "'2000-01-01'",
        "'0001-01-01 BC'", "'1999-12-31'"}},
      {"time", {"'00:00'", "'24:00'", "'23:59:59.999999'", "'12:00:00.5'"}},
      {"timetz",
       {"'00:00+15:59'", "'24:00-15:59'", "'12:00:00.000001+00:00:01'", "'01:02:03-00:00:59'",
        "'12:34:56+00'"}},
      {"timestamp",
       {"'infinity'", "'-infinity'", "'4714-11-24 00:00:00 BC'", "'294276-12-31 23:59:59.999999'",
        "'0001-01-01 00:00:00 BC'", "'2000-01-01'", "'1999-12-31 23:59:59.999999'"}},
      {"timestamptz",
       {"'infinity'", "'-infinity'", "'4714-11-24 00:00:00+00 BC'",
        "'294276-12-31 23:59:59.999999+00'", "'2000-01-01 00:00:00+14'",
        "'1969-07-20 20:17:40.5-05:30'"}},
      {"interval",
       {"'0'", "'-00:00:00.000001'", "'1 mon -1 day'", "'-178000000 years'", "'178000000 years'",
        "'2562047788:00:54.775807'",
        "'-2562047788:00:54.775807'::interval - interval '1 microsecond'",
        "'2147483647 days 2147483647 mons'", "'-2147483648 days -2147483648 mons'",
        "'1 year 2 mons 3 days 04:05:06.789'", "'-1 days +00:00:01'"}},
      {"uuid",
       {"'00000000-0000-0000-0000-000000000000'", "'ffffffff-ffff-ffff-ffff-ffffffffffff'"}},
      {"json", {"'{ \"a\" :  1.0e10 }'", "'\"\\u0000\"'", "'[]'", "'null'", "'\"é\\t\"'"}},
      {"jsonb",
       {"'{\"a\": 1.0e10, \"b\": [1, 2.50]}'", "'null'", "'\"é\\t\\\\\"'", "'{}'", "'-0'", "'1e-7'",
        "'123456789012345678901234567890'"}},
      {"int4[]",
       {"'[0:2]={1,2,3}'", "'[-5:-4][3:4]={{1,2},{3,4}}'", "'{}'", "'{NULL}'", "'{{NULL,NULL}}'",
        "'[1000000:1000001]={7,8}'", "'[-2147483648:-2147483647]={7,8}'"}},
      {"text[]",
       {"ARRAY['NULL', NULL, '', 'a\"b', ' sp ', 'x,y', '{}', E'\\\\', E'\\t', 'null']",
        "'[3:3]={é}'"}},
      {"char(3)[]", {"'{a,\"b c\",NULL}'", "'{\"\"}'"}},
      {"varchar[]", {"'{a,b}'"}},
      {"name[]", {"'{a,\"B\"}'"}},
      {"numeric[]", {"'{NaN,Infinity,-0.00,1e-5}'"}},
      {"float8[]", {"'{-0,NaN,-Infinity,1e-300}'"}},
      {"float4[]", {"'{-0,NaN,1e-45}'"}},
      {"bool[]", {"'{t,f,NULL}'"}},
      {"bytea[]", {"ARRAY['\\x00'::bytea, NULL, '\\x']"}},
      {"date[]", {"'{infinity,-infinity,\"4714-11-24 BC\"}'"}},
      {"timestamptz[]", {"'{infinity,\"2000-01-01 00:00:00+00\"}'"}},
      {"interval[]", {"'{\"-1 days +00:00:01\",\"1 mon\"}'"}},
      {"timetz[]", {"'{\"00:00+15:59\"}'"}},
      {"time[]", {"'{24:00}'"}},
      {"uuid[]", {"'{00000000-0000-0000-0000-000000000001}'"}},
      {"json[]", {"ARRAY['{\"a\": 1}'::json, 'null', NULL]"}},
      {"jsonb[]", {"ARRAY['{\"a\": 1}'::jsonb, 'null', NULL]"}},
      {"oid[]", {"'{0,4294967295}'"}},
      {"int2[]", {"'{-32768}'"}},
      {"int8[]", {"'{-9223372036854775808}'"}},
  };
  size_t checked = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& test = cases[c];
    const std::string table = absl::StrCat("e", c);
    std::string values;
    for (size_t v = 0; v < test.values.size(); ++v) {
      absl::StrAppend(&values, v ? ", " : "", "(", v, ", ", test.values[v], ")");
    }
    sql.exec(absl::StrCat("CREATE TABLE ", table, " (id int, v ", test.type, "); INSERT INTO ",
                          table, " VALUES ", values, ", (-1, NULL)"));
    const uint32_t oid = static_cast<uint32_t>(
        std::stoul(sql.one(absl::StrCat("SELECT atttypid FROM pg_attribute WHERE attrelid = '",
                                        table, "'::regclass AND attname = 'v'"))));
    sources::postgres::RelationDesc desc;
    desc.schema = "public";
    desc.table = table;
    desc.columns = {{"id", 23, -1, true, sources::postgres::builtin_column_type(23), "integer"},
                    {"v", oid, -1, true, sources::postgres::builtin_column_type(oid), test.type}};
    if (!sources::postgres::binary_decodable(desc.columns[1])) {
      EXPECT_TRUE(test.type == "char") << test.type << " is not binary_decodable";
      continue;
    }
    auto [text, binary] = copy_both(db.url(), table);
    ASSERT_EQ(text.size(), test.values.size() + 1) << test.type;
    ASSERT_EQ(binary.size(), text.size()) << test.type;
    sources::postgres::RowEncoder encoder(desc);
    for (size_t r = 0; r < text.size(); ++r) {
      std::string from_text, from_binary, printed;
      const absl::Status t = encoder.encode_copy_line(text[r], from_text);
      const absl::Status b = encoder.encode_copy_binary_tuple(binary[r], from_binary);
      EXPECT_TRUE(t.ok()) << test.type << " row " << text[r] << ": " << t;
      EXPECT_TRUE(b.ok()) << test.type << " row " << text[r] << ": " << b;
      if (t.ok() && b.ok()) {
        if (from_binary != from_text) {
          (void)sources::postgres::print_row(desc, from_binary, printed);
        }
        EXPECT_EQ(from_binary, from_text)
            << test.type << ": text " << text[r] << ", binary prints " << printed;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 150u);
}

}  // namespace
}  // namespace weir::ingest::testing
