// Validation of catalog changes, through commit() on in-memory stores: each kind of object is
// checked as what runs it will take it, against the live objects and the shards that exist, and a
// refusal names the object and the thing, commits nothing and creates no shard.

#include "weir/control/validate.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include <gtest/gtest.h>

#include "weir/control/catalog.h"

namespace weir::control {
namespace {

using persist::PersistClient;

class ValidateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    const std::string url = "mem://validate-" + std::to_string(counter++);
    blob_ = persist::Blob::open(url).value();
    consensus_ = persist::Consensus::open(url).value();
    client_ = PersistClient::create(blob_, consensus_);
  }

  // A shard with one row.
  void make_shard(const std::string& name) {
    persist::WriteHandle writer = client_->open_writer(name).value();
    ASSERT_TRUE(writer
                    .compare_and_append(std::vector<persist::Update>{{"row", 0, 1}},
                                        persist::Frontier(0), persist::Frontier(1))
                    ->is_appended());
    ASSERT_TRUE(writer.expire().ok());
  }

  std::vector<std::string> shards() {
    std::vector<std::string> names;
    const std::vector<persist::ShardName> listed = client_->list_shards().value();
    for (const persist::ShardName& shard : listed) {
      names.push_back(shard.name);
    }
    return names;
  }

  uint64_t version() { return read(*client_).value().version; }

  absl::StatusOr<CommittedChange> create(const std::string& name, ObjectSpec spec) {
    return commit(*client_, Change::create(name, std::move(spec)));
  }

  // `change` is refused with `code` and a message holding each of `says`; nothing is committed
  // and no shard is created.
  void expect_refused(const Change& change, absl::StatusCode code,
                      const std::vector<std::string>& says) {
    const uint64_t before = version();
    const std::vector<std::string> shards_before = shards();
    const absl::Status status = commit(*client_, change).status();
    EXPECT_EQ(status.code(), code) << status;
    for (const std::string& text : says) {
      EXPECT_TRUE(absl::StrContains(status.message(), text))
          << "\"" << text << "\" not in: " << status;
    }
    EXPECT_EQ(version(), before) << "committed";
    EXPECT_EQ(shards(), shards_before) << "a shard was created";
  }

  std::shared_ptr<persist::Blob> blob_;
  std::shared_ptr<persist::Consensus> consensus_;
  std::unique_ptr<PersistClient> client_;
};

// Specs, every field given.
SourceSpec source(std::string name, std::vector<SourceOption> options = {},
                  std::vector<std::string> tables = {}) {
  return {.source = std::move(name), .options = std::move(options), .tables = std::move(tables)};
}
ViewSpec view(std::string name, std::string output = "", std::vector<std::string> inputs = {}) {
  return {.view = std::move(name), .inputs = std::move(inputs), .output = std::move(output)};
}

SourceSpec auction(std::vector<SourceOption> options = {}) {
  return {.source = "loadgen:auction", .options = std::move(options), .tables = {}};
}
SourceSpec postgres(std::vector<SourceOption> options) {
  options.push_back({"conn", "host=db user=weir dbname=shop"});
  options.push_back({"publication", "p"});
  return {.source = "postgres", .options = std::move(options), .tables = {}};
}

// A source definition is parsed as `weir ingest` parses its flags, with its messages, and stored in
// canonical form.
TEST_F(ValidateTest, ASourceIsCheckedAsWeirIngestChecksIt) {
  expect_refused(
      Change::create("s", auction({{"scale", "-1"}})), absl::StatusCode::kInvalidArgument,
      {"source \"s\"", "--scale: expected a whole number from 0 to 1000000, got \"-1\""});
  expect_refused(Change::create("s", auction({{"batch", "10"}})),
                 absl::StatusCode::kInvalidArgument, {"source \"s\"", "batch"});
  expect_refused(Change::create("s", auction({{"workers", "4"}})),
                 absl::StatusCode::kInvalidArgument, {"source \"s\"", "workers"});
  expect_refused(Change::create("s", SourceSpec{.source = "kafka", .options = {}, .tables = {}}),
                 absl::StatusCode::kInvalidArgument, {"source \"s\"", "--source"});
  expect_refused(Change::create("s", SourceSpec{.source = "loadgen:auction",
                                                .options = {},
                                                .tables = {"bids", "nosuch"}}),
                 absl::StatusCode::kInvalidArgument, {"source \"s\"", "--tables", "nosuch"});
  expect_refused(Change::create("s", SourceSpec{.source = "postgres", .options = {}, .tables = {}}),
                 absl::StatusCode::kInvalidArgument,
                 {"source \"s\"", "--source postgres needs --conn and --publication"});
  expect_refused(Change::create("s", auction({{"add-after", "5"}})),
                 absl::StatusCode::kInvalidArgument, {"--add-after requires --add-table"});

  absl::StatusOr<CommittedChange> created =
      create("s", auction({{"seed", "07"}, {"scale", "010"}, {"mode", "serial"}}));
  ASSERT_TRUE(created.ok()) << created.status();
  const SourceSpec stored = std::get<SourceSpec>(read(*client_).value().find("s")->spec);
  const std::vector<SourceOption> canonical = {{"mode", "serial"}, {"scale", "10"}, {"seed", "7"}};
  EXPECT_EQ(stored.options, canonical);
  EXPECT_EQ(stored.source, "loadgen:auction");
}

TEST_F(ValidateTest, ASourceWithAPasswordIsNotStored) {
  expect_refused(
      Change::create(
          "shop", SourceSpec{.source = "postgres",
                             .options = {{"conn", "host=db password=secret"}, {"publication", "p"}},
                             .tables = {}}),
      absl::StatusCode::kInvalidArgument, {"source \"shop\"", "--conn holds a password", "PGPASS"});
  expect_refused(Change::create("shop", SourceSpec{.source = "mysql",
                                                   .options = {{"conn", "mysql://u:pw@h/db"}},
                                                   .tables = {}}),
                 absl::StatusCode::kInvalidArgument, {"source \"shop\"", "MYSQL_PWD"});
  EXPECT_TRUE(create("shop", postgres({})).ok());
}

// Two live sources never write the same shards: the prefix is the load generator's kind or a
// database source's --name (pg and mysql by default).
TEST_F(ValidateTest, TwoLiveSourcesMayNotWriteTheSameShards) {
  ASSERT_TRUE(create("a", auction()).ok());
  expect_refused(Change::create("b", auction({{"scale", "2"}})), absl::StatusCode::kAlreadyExists,
                 {"source \"b\"", "auction.*", "\"a\""});
  expect_refused(Change::create("b", postgres({{"name", "auction"}})),
                 absl::StatusCode::kAlreadyExists, {"source \"b\"", "auction.*", "\"a\""});
  ASSERT_TRUE(create("pg1", postgres({})).ok());
  expect_refused(Change::create("pg2", postgres({})), absl::StatusCode::kAlreadyExists,
                 {"source \"pg2\"", "pg.*", "\"pg1\""});
  // Nested prefixes overlap too: "pg.eu.orders" could be table "eu.orders" of pg.
  expect_refused(Change::create("pg2", postgres({{"name", "pg.eu"}})),
                 absl::StatusCode::kAlreadyExists, {"\"pg1\""});
  EXPECT_TRUE(create("pg2", postgres({{"name", "pg_eu"}})).ok());
  EXPECT_TRUE(create("counter", source("loadgen:counter")).ok());
  expect_refused(Change::create("weird", postgres({{"name", "weir"}})),
                 absl::StatusCode::kInvalidArgument, {"source \"weird\"", "weir.*"});
  // Once "a" is dropped its shards are free.
  ASSERT_TRUE(commit(*client_, Change::drop("a")).ok());
  EXPECT_TRUE(create("b", auction({{"scale", "2"}})).ok());
  // A replace of a source keeps its own prefix.
  EXPECT_TRUE(commit(*client_, Change::replace("b", auction({{"scale", "3"}}))).ok());
}

// A view's inputs must exist or be written by a live object; checking creates nothing.
TEST_F(ValidateTest, AViewReadsShardsThatExistOrThatALiveObjectWrites) {
  expect_refused(Change::create("v", view("max-bid")), absl::StatusCode::kFailedPrecondition,
                 {"view \"v\"", "\"auction.bids\"", "does not exist"});
  EXPECT_FALSE(client_->find_shard("auction.bids").value().has_value());
  EXPECT_FALSE(client_->find_shard("view.max-bid").value().has_value());

  // Shards that exist (an earlier `weir ingest`) will do; inputs and output are filled in.
  make_shard("auction.bids");
  expect_refused(Change::create("v", view("max-bid")), absl::StatusCode::kFailedPrecondition,
                 {"view \"v\"", "\"auction.users\""});
  make_shard("auction.users");
  ASSERT_TRUE(create("v", view("max-bid")).ok());
  const ViewSpec stored = std::get<ViewSpec>(read(*client_).value().find("v")->spec);
  EXPECT_EQ(stored.inputs, (std::vector<std::string>{"auction.bids", "auction.users"}));
  EXPECT_EQ(stored.output, "view.max-bid");
}

TEST_F(ValidateTest, AViewOverALiveSourcesShards) {
  ASSERT_TRUE(create("auction", auction()).ok());
  ASSERT_TRUE(create("counts", view("bids-per-auction")).ok());
  // A view may read another view's output.
  ASSERT_TRUE(create("copy", view("bids-per-auction", "view.other")).ok());
  EXPECT_FALSE(client_->find_shard("auction.bids").value().has_value());
}

TEST_F(ValidateTest, AViewsDefinitionIsChecked) {
  ASSERT_TRUE(create("auction", auction()).ok());
  expect_refused(Change::create("v", view("nosuch")), absl::StatusCode::kInvalidArgument,
                 {"view \"v\"", "\"nosuch\"", "bids-per-auction, max-bid"});
  expect_refused(Change::create("v", view("max-bid", "", {"auction.bids"})),
                 absl::StatusCode::kInvalidArgument,
                 {"view \"v\"", "reads auction.bids, auction.users"});
  expect_refused(Change::create("v", view("bids-per-auction", "auction.bids")),
                 absl::StatusCode::kInvalidArgument, {"view \"v\"", "\"auction.bids\"", "input"});
  expect_refused(Change::create("v", view("bids-per-auction", "auction.counts")),
                 absl::StatusCode::kInvalidArgument,
                 {"view \"v\"", "\"auction.counts\"", "auction.*"});
  expect_refused(Change::create("v", view("bids-per-auction", "weir.x")),
                 absl::StatusCode::kInvalidArgument, {"view \"v\"", "\"weir.x\"", "weir's"});
  // An output written by another live object.
  ASSERT_TRUE(create("counts", view("bids-per-auction")).ok());
  expect_refused(Change::create("v", view("bids-per-auction")), absl::StatusCode::kAlreadyExists,
                 {"view \"v\"", "\"view.bids-per-auction\"", "\"counts\""});
  ASSERT_TRUE(create("pg", postgres({{"name", "mine"}})).ok());
  expect_refused(Change::create("v", view("bids-per-auction", "mine.x")),
                 absl::StatusCode::kAlreadyExists, {"view \"v\"", "\"mine.x\"", "\"pg\""});
  // And a source may not take over a view's output either.
  expect_refused(Change::create("pg2", postgres({{"name", "view"}})),
                 absl::StatusCode::kAlreadyExists, {"source \"pg2\"", "\"counts\""});
}

TEST_F(ValidateTest, AHoldIsOnAShardThatExistsOrThatALiveObjectWrites) {
  expect_refused(Change::create("h", HoldSpec{.shard = "auction.bids", .reader = "audit"}),
                 absl::StatusCode::kFailedPrecondition,
                 {"hold \"h\"", "\"auction.bids\"", "does not exist"});
  ASSERT_TRUE(create("auction", auction()).ok());
  ASSERT_TRUE(create("h", HoldSpec{.shard = "auction.bids", .reader = "audit"}).ok());
  make_shard("orders");
  ASSERT_TRUE(create("h2", HoldSpec{.shard = "orders", .reader = "audit"}).ok());
  // (reader, shard) once among the live holds.
  expect_refused(Change::create("h3", HoldSpec{.shard = "orders", .reader = "audit"}),
                 absl::StatusCode::kAlreadyExists,
                 {"hold \"h3\"", "\"audit\"", "\"orders\"", "\"h2\""});
  ASSERT_TRUE(create("h3", HoldSpec{.shard = "orders", .reader = "billing"}).ok());
  ASSERT_TRUE(commit(*client_, Change::drop("h2")).ok());
  EXPECT_TRUE(create("h4", HoldSpec{.shard = "orders", .reader = "audit"}).ok());
  EXPECT_FALSE(client_->find_shard("auction.bids").value().has_value());
}

// No cascade: a source (or a view) is not dropped from under a view that reads what it writes.
TEST_F(ValidateTest, ADropIsRefusedWhileALiveViewReadsWhatItWrites) {
  ASSERT_TRUE(create("auction", auction()).ok());
  ASSERT_TRUE(create("counts", view("bids-per-auction")).ok());
  ASSERT_TRUE(create("copy", view("bids-per-auction", "view.copy")).ok());
  expect_refused(Change::drop("auction"), absl::StatusCode::kFailedPrecondition,
                 {"\"auction\"", "view \"copy\"", "auction.bids"});
  ASSERT_TRUE(commit(*client_, Change::drop("copy")).ok());
  expect_refused(Change::drop("auction"), absl::StatusCode::kFailedPrecondition,
                 {"\"auction\"", "view \"counts\""});
  // A replace that would stop writing them is refused the same way.
  expect_refused(Change::replace("auction", source("loadgen:counter")),
                 absl::StatusCode::kFailedPrecondition, {"\"auction\"", "view \"counts\""});
  ASSERT_TRUE(commit(*client_, Change::drop("counts")).ok());
  EXPECT_TRUE(commit(*client_, Change::drop("auction")).ok());
}

// Without the store, the checks that need it are skipped; the others hold.
TEST_F(ValidateTest, WithoutTheStoreExistenceIsNotChecked) {
  const CatalogSnapshot empty;
  EXPECT_TRUE(validate(Change::create("v", view("max-bid")), empty).ok());
  EXPECT_TRUE(validate(Change::create("h", HoldSpec{.shard = "x", .reader = "r"}), empty).ok());
  EXPECT_EQ(validate(Change::create("v", view("nosuch")), empty).code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status missing =
      validate(Change::create("h", HoldSpec{.shard = "x", .reader = "r"}), empty,
               [](const std::string&) -> absl::StatusOr<bool> { return false; });
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition) << missing;
  const absl::Status down = validate(Change::create("h", HoldSpec{.shard = "x", .reader = "r"}),
                                     empty, [](const std::string&) -> absl::StatusOr<bool> {
                                       return absl::UnavailableError("the store is down (test)");
                                     });
  EXPECT_EQ(down.code(), absl::StatusCode::kUnavailable) << down;
}

}  // namespace
}  // namespace weir::control
