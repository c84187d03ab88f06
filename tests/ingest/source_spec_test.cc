// SourceSpec: `weir ingest`'s defining flags as a storable value, and the IngestOptions made from
// one. The messages checked here are those `weir ingest` prints for the same flags
// (tests/tools/cli_test.cc runs the binary).

#include "weir/ingest/source_spec.h"

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace weir::ingest {
namespace {

using Flags = std::vector<std::pair<std::string, std::string>>;

RunSettings settings() {
  return {.location = persist::PersistLocation::in_directory("/tmp/weir-spec-test"),
          .location_key = "/tmp/weir-spec-test",
          .workers = 3};
}

SourceSpec parsed(const Flags& flags) {
  absl::StatusOr<SourceSpec> spec = parse_source_spec(flags);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : SourceSpec{};
}

IngestOptions options_of(const SourceSpec& spec) {
  absl::StatusOr<IngestOptions> options = to_ingest_options(spec, settings());
  EXPECT_TRUE(options.ok()) << options.status();
  return options.ok() ? *std::move(options) : IngestOptions{};
}

// The message of parsing `flags`, which must fail with InvalidArgument.
std::string parse_error(const Flags& flags) {
  absl::StatusOr<SourceSpec> spec = parse_source_spec(flags);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << spec.status();
  return std::string(spec.status().message());
}

TEST(SourceSpecTest, ALoadGeneratorRoundTrips) {
  const SourceSpec spec = parsed({{"source", "loadgen:counter"},
                                  {"scale", "5"},
                                  {"rate", "0"},
                                  {"until", "10"},
                                  {"seed", "7"},
                                  {"mode", "serial"},
                                  {"tables", "counter"},
                                  {"snapshot-rows", "counter=3"},
                                  {"fault", "counter@5"},
                                  {"transient-fault", "4"},
                                  {"compaction-window", "10"}});
  EXPECT_EQ(spec.source, "loadgen:counter");
  EXPECT_EQ(spec.tables, std::vector<std::string>{"counter"});
  EXPECT_EQ(to_string(spec),
            "--source loadgen:counter --compaction-window 10 --fault counter@5 --mode serial "
            "--rate 0 --scale 5 --seed 7 --snapshot-rows counter=3 --transient-fault 4 --until 10 "
            "--tables counter");
  const IngestOptions options = options_of(spec);
  EXPECT_EQ(options.upstream, nullptr);
  EXPECT_EQ(options.location.blob_url, settings().location.blob_url);
  EXPECT_EQ(options.location.consensus_url, settings().location.consensus_url);
  EXPECT_EQ(options.workers.workers, 3u);
  const auto& g = options.source.generator;
  EXPECT_EQ(g.kind, "counter");
  EXPECT_EQ(g.scale, 5u);
  EXPECT_EQ(g.seed, 7u);
  EXPECT_EQ(g.snapshot_rows, (std::map<std::string, uint64_t>{{"counter", 3}}));
  EXPECT_EQ(g.fault_table, "counter");
  EXPECT_EQ(g.fault_offset, 5u);
  EXPECT_EQ(options.source.rate, 0);
  EXPECT_EQ(options.source.until, std::optional<uint64_t>(10));
  EXPECT_EQ(options.source.transient_fault, std::optional<uint64_t>(4));
  EXPECT_EQ(options.source.mode, sources::ProgressMode::kSerial);
  EXPECT_EQ(options.tables, std::vector<std::string>{"counter"});
  EXPECT_EQ(options.compaction_window, 10u);
  EXPECT_TRUE(options.add_table.empty());
}

TEST(SourceSpecTest, AnEmptySpecHasWeirIngestsDefaults) {
  const SourceSpec spec = parsed({});
  EXPECT_EQ(spec, SourceSpec{});
  EXPECT_EQ(spec.source, "loadgen:auction");
  const IngestOptions options = options_of(spec);
  const IngestOptions defaults;
  EXPECT_EQ(options.upstream, nullptr);
  EXPECT_EQ(options.source.generator.kind, "auction");
  EXPECT_EQ(options.source.generator.scale, 1u);
  EXPECT_EQ(options.source.generator.seed, 42u);
  EXPECT_TRUE(options.source.generator.snapshot_rows.empty());
  EXPECT_TRUE(options.source.generator.fault_table.empty());
  EXPECT_EQ(options.source.rate, 1000);
  EXPECT_EQ(options.source.until, std::nullopt);
  EXPECT_EQ(options.source.transient_fault, std::nullopt);
  EXPECT_EQ(options.source.mode, sources::ProgressMode::kConcurrent);
  EXPECT_TRUE(options.tables.empty());
  EXPECT_EQ(options.compaction_window, defaults.compaction_window);
}

TEST(SourceSpecTest, AnAddedTableRoundTrips) {
  const SourceSpec spec =
      parsed({{"tables", "bids,users"}, {"add-table", "auctions"}, {"add-after", "1.5"}});
  EXPECT_EQ(spec.tables, (std::vector<std::string>{"bids", "users"}));
  const IngestOptions options = options_of(spec);
  EXPECT_EQ(options.tables, (std::vector<std::string>{"bids", "users"}));
  EXPECT_EQ(options.add_table, "auctions");
  EXPECT_EQ(options.add_after, std::chrono::milliseconds(1500));
}

TEST(SourceSpecTest, APostgresSourceRoundTrips) {
  const SourceSpec spec = parsed({{"source", "postgres"},
                                  {"conn", "host=db user=u dbname=d"},
                                  {"publication", "pub"},
                                  {"name", "shop"},
                                  {"until-lsn", "0/16B3748"},
                                  {"mode", "serial"},
                                  {"tables", "orders"}});
  const IngestOptions options = options_of(spec);
  ASSERT_NE(options.upstream, nullptr);
  EXPECT_EQ(options.upstream->kind(), "shop");
  EXPECT_EQ(options.tables, std::vector<std::string>{"orders"});
  EXPECT_EQ(options.workers.workers, 3u);
  const PostgresIngestOptions pg = to_postgres_options(spec, settings()).value();
  EXPECT_EQ(pg.conninfo, "host=db user=u dbname=d");
  EXPECT_EQ(pg.publication, "pub");
  EXPECT_EQ(pg.slot, default_slot_name("/tmp/weir-spec-test"));
  EXPECT_EQ(pg.kind, "shop");
  EXPECT_EQ(pg.workers, 3u);
  EXPECT_EQ(pg.mode, sources::ProgressMode::kSerial);
  EXPECT_EQ(pg.until, std::optional<sources::Offset>(0x16B3748));

  // A slot given is kept; without --name the shards are pg.*.
  const SourceSpec named = parsed({{"source", "postgres"},
                                   {"conn", "postgres://u@db/d"},
                                   {"publication", "pub"},
                                   {"slot", "my_slot"}});
  const PostgresIngestOptions pg2 = to_postgres_options(named, settings()).value();
  EXPECT_EQ(pg2.slot, "my_slot");
  EXPECT_EQ(pg2.kind, "pg");
  EXPECT_EQ(pg2.until, std::nullopt);
  EXPECT_EQ(options_of(named).upstream->kind(), "pg");
}

TEST(SourceSpecTest, AMysqlSourceRoundTrips) {
  const SourceSpec spec = parsed({{"source", "mysql"},
                                  {"conn", "host=db port=3306 user=u database=d"},
                                  {"server-id", "77"},
                                  {"until-gtid", "12"}});
  const IngestOptions options = options_of(spec);
  ASSERT_NE(options.upstream, nullptr);
  EXPECT_EQ(options.upstream->kind(), "mysql");
  const MysqlIngestOptions my = to_mysql_options(spec, settings()).value();
  EXPECT_EQ(my.conninfo, "host=db port=3306 user=u database=d");
  EXPECT_EQ(my.kind, "mysql");
  EXPECT_EQ(my.workers, 3u);
  EXPECT_EQ(my.replica_server_id, 77u);
  EXPECT_EQ(my.replica_key, "/tmp/weir-spec-test");
  EXPECT_EQ(my.until_seq, std::optional<uint64_t>(12));
  EXPECT_EQ(to_mysql_options(parsed({{"source", "mysql"}, {"conn", "user=u"}, {"name", "shop"}}),
                             settings())
                ->kind,
            "shop");
  // Not the other kind's.
  EXPECT_FALSE(to_postgres_options(spec, settings()).ok());
  EXPECT_FALSE(to_mysql_options(parsed({}), settings()).ok());
}

TEST(SourceSpecTest, FlagsInAnyOrderNormaliseToOneSortedSpec) {
  const SourceSpec a = parsed({{"until", "010"},
                               {"source", "loadgen:auction"},
                               {"snapshot-rows", "users=2"},
                               {"scale", "3"},
                               {"snapshot-rows", "bids=5,auctions=1"},
                               {"tables", "bids"},
                               {"tables", "users"}});
  const SourceSpec b = parsed({{"tables", "bids,users"},
                               {"snapshot-rows", "bids=5"},
                               {"scale", "03"},
                               {"snapshot-rows", "auctions=1"},
                               {"until", "10"},
                               {"snapshot-rows", "users=2"}});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.options,
            (std::vector<std::pair<std::string, std::string>>{
                {"scale", "3"}, {"snapshot-rows", "auctions=1,bids=5,users=2"}, {"until", "10"}}));
  // A canonical spec parses to itself, and a later snapshot-rows of a table wins, as in
  // `weir ingest`.
  Flags again(a.options.begin(), a.options.end());
  again.emplace_back("tables", "bids,users");
  EXPECT_EQ(parsed(again), a);
  EXPECT_EQ(parsed({{"snapshot-rows", "bids=5"}, {"snapshot-rows", "bids=6"}}).options,
            (std::vector<std::pair<std::string, std::string>>{{"snapshot-rows", "bids=6"}}));
}

TEST(SourceSpecTest, AnUnknownOrProcessLevelFlagIsAnErrorNamingIt) {
  EXPECT_NE(parse_error({{"scale", "1"}, {"bogus", "1"}}).find("\"bogus\""), std::string::npos);
  for (const char* process :
       {"persist", "blob", "consensus", "workers", "http", "quiet", "inject-faults", "log-level"}) {
    const std::string message = parse_error({{process, "1"}});
    EXPECT_NE(message.find(std::string("--") + process), std::string::npos) << message;
    EXPECT_NE(message.find("how a process runs"), std::string::npos) << message;
  }
  EXPECT_NE(parse_error({{"scale", "1"}, {"scale", "2"}}).find("--scale"), std::string::npos);
  EXPECT_NE(parse_error({{"source", "mysql"}, {"source", "postgres"}}).find("--source"),
            std::string::npos);
  EXPECT_FALSE(is_source_flag("persist"));
  EXPECT_TRUE(is_source_flag("source"));
  EXPECT_TRUE(is_source_flag("tables"));
  EXPECT_TRUE(is_source_flag("until-lsn"));

  // A stored spec may be anything: to_ingest_options checks it too.
  SourceSpec hand_made;
  hand_made.options = {{"bogus", "1"}};
  EXPECT_EQ(to_ingest_options(hand_made, settings()).status().code(),
            absl::StatusCode::kInvalidArgument);
  hand_made.options = {{"scale", "-1"}};
  EXPECT_EQ(to_ingest_options(hand_made, settings()).status().message(),
            "--scale: expected a whole number from 0 to 1000000, got \"-1\"");
}

// Each message is the one `weir ingest` prints for the same flag (its first line; CLI11 prints
// the flag's name before the check's message, as these do).
TEST(SourceSpecTest, ABadValueGivesWeirIngestsError) {
  const std::vector<std::pair<Flags, std::string>> cases = {
      {{{"source", "kafka"}},
       "--source: \"kafka\" is not one of loadgen:counter, loadgen:auction, postgres, mysql"},
      {{{"scale", "-1"}}, "--scale: expected a whole number from 0 to 1000000, got \"-1\""},
      {{{"scale", "1000001"}},
       "--scale: expected a whole number from 0 to 1000000, got \"1000001\""},
      {{{"until", "1e3"}},
       "--until: expected a whole number (0 or more, digits only), got \"1e3\""},
      {{{"rate", "nan"}}, "--rate: expected a number from 0 up, got \"nan\""},
      {{{"mode", "parallel"}}, "--mode: \"parallel\" is not one of concurrent, serial"},
      {{{"tables", ""}}, "--tables: must not be empty"},
      {{{"tables", "bids,nosuch"}},
       "--tables: load generator 'auction' has no table 'nosuch' (it has: users, auctions, bids)"},
      {{{"snapshot-rows", "bids="}}, "--snapshot-rows: expected TABLE=N, got \"bids=\""},
      {{{"snapshot-rows", "nosuch=5"}},
       "--snapshot-rows: load generator 'auction' has no table 'nosuch' (it has: users, "
       "auctions, bids)"},
      {{{"seed", "x"}}, "--seed: expected a whole number (0 or more, digits only), got \"x\""},
      {{{"fault", "bids@x"}}, "--fault: expected TABLE@OFFSET, got \"bids@x\""},
      {{{"fault", "nosuch@5"}},
       "--fault: load generator 'auction' has no table 'nosuch' (it has: users, auctions, bids)"},
      {{{"transient-fault", "-1"}},
       "--transient-fault: expected a whole number (0 or more, digits only), got \"-1\""},
      {{{"add-table", ""}}, "--add-table: must not be empty"},
      {{{"add-table", "nosuch"}},
       "--add-table: \"nosuch\" is ingested from the start: --tables lists the tables ingested "
       "before it is added"},
      {{{"tables", "bids"}, {"add-table", "bids"}},
       "--add-table: \"bids\" is ingested from the start: --tables lists the tables ingested "
       "before it is added"},
      {{{"tables", "bids"}, {"add-table", "nosuch"}},
       "--add-table: load generator 'auction' has no table 'nosuch' (it has: users, auctions, "
       "bids)"},
      {{{"add-after", "1"}}, "--add-after requires --add-table"},
      {{{"add-after", "1e10"}, {"add-table", "bids"}, {"tables", "users"}},
       "--add-after: expected a number from 0 to 1e+09, got \"1e10\""},
      {{{"compaction-window", "-1"}},
       "--compaction-window: expected a whole number (0 or more, digits only), got \"-1\""},
      {{{"conn", ""}}, "--conn: must not be empty"},
      {{{"publication", ""}}, "--publication: must not be empty"},
      {{{"slot", "Bad-Slot"}},
       "--slot: \"Bad-Slot\" is no replication slot name: 1 to 63 of a-z, 0-9 and _"},
      {{{"name", ".pg"}},
       "--name: \".pg\" is no shard name prefix: letters, digits, _, - and "
       "inner ."},
      {{{"until-lsn", "x/y"}},
       "--until-lsn: invalid LSN \"x/y\": not a hexadecimal digit (expected X/Y, e.g. "
       "0/16B3748)"},
      {{{"until-gtid", "x"}},
       "--until-gtid: expected a whole number (0 or more, digits only), got \"x\""},
      {{{"server-id", "4294967296"}},
       "--server-id: expected a whole number from 0 to 4294967295, got \"4294967296\""},
  };
  for (const auto& [flags, message] : cases) {
    SCOPED_TRACE(flags.front().first + " " + flags.front().second);
    EXPECT_EQ(parse_error(flags), message);
  }
  // One value at a time, as a command line checks it as it parses (CLI11 adds the name itself).
  std::string value = "010";
  EXPECT_TRUE(check_source_flag("scale", value).ok());
  EXPECT_EQ(value, "10");
  value = "bids=1,users=2";  // One element of a list.
  EXPECT_EQ(check_source_flag("snapshot-rows", value).message(),
            "--snapshot-rows: expected TABLE=N, got \"bids=1,users=2\"");
}

// The checks of the flags together that `weir ingest` makes once it runs.
TEST(SourceSpecTest, AnIncompleteUpstreamGivesWeirIngestsError) {
  for (const Flags& flags : std::vector<Flags>{{{"source", "postgres"}},
                                               {{"source", "postgres"}, {"conn", "host=db"}},
                                               {{"source", "postgres"}, {"publication", "p"}}}) {
    EXPECT_EQ(to_ingest_options(parsed(flags), settings()).status(),
              absl::InvalidArgumentError("--source postgres needs --conn and --publication"));
  }
  EXPECT_EQ(to_ingest_options(parsed({{"source", "mysql"}}), settings()).status(),
            absl::InvalidArgumentError("--source mysql needs --conn"));
}

TEST(SourceSpecTest, StorableRefusesPasswords) {
  auto storable = [](const std::string& source, const std::string& conn) {
    return check_storable(parsed({{"source", source}, {"conn", conn}, {"publication", "p"}}));
  };
  for (const std::string& conn :
       {std::string("host=db user=u password=secret dbname=d"), std::string("password='s e'"),
        std::string("host=db password = secret"), std::string("host=db sslpassword=x"),
        std::string("postgres://u:secret@db/d"), std::string("postgresql://u:secret@db:5432"),
        std::string("postgres://db/d?user=u&password=secret")}) {
    SCOPED_TRACE(conn);
    const absl::Status status = storable("postgres", conn);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("--conn"), std::string::npos) << status;
    EXPECT_NE(status.message().find("PGPASSFILE"), std::string::npos) << status;
    EXPECT_EQ(status.message().find("secret"), std::string::npos) << "repeats the password";
  }
  const absl::Status mysql = storable("mysql", "host=db user=u password=secret");
  EXPECT_EQ(mysql.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(mysql.message().find("MYSQL_PWD"), std::string::npos) << mysql;

  for (const std::string& conn :
       {std::string("host=db user=u dbname=d"), std::string("postgres://u@db/d"),
        std::string("postgres://db/d?user=u&passfile=/home/u/.pgpass"),
        std::string("host=db user=password_admin"), std::string("postgres://u@db:5432/d")}) {
    EXPECT_TRUE(storable("postgres", conn).ok()) << conn << ": " << storable("postgres", conn);
  }
  EXPECT_TRUE(storable("mysql", "host=db port=3306 user=u database=d").ok());
  EXPECT_TRUE(check_storable(parsed({{"scale", "2"}})).ok());
  // `weir ingest` itself takes what it took: a password is not a parse error.
  EXPECT_TRUE(parse_source_spec(Flags{{"source", "postgres"}, {"conn", "password=x"}}).ok());
}

}  // namespace
}  // namespace weir::ingest
