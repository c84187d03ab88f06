// The status shard: one writer per incarnation, fenced; readers see the latest incarnation's
// state.

#include "weir/ingest/status_shard.h"

#include <filesystem>
#include <map>
#include <string>

#include "absl/time/clock.h"
#include <gtest/gtest.h>

#include "weir/ingest/ingest.h"

namespace weir::ingest {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  fs::path dir =
      fs::temp_directory_path() / ("weir-ingest-status-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The shard's contents at its latest time.
std::map<std::string, int64_t> contents(persist::PersistClient& client, const std::string& shard) {
  std::map<std::string, int64_t> rows;
  auto cursor = client.inspect_snapshot(shard);
  EXPECT_TRUE(cursor.ok()) << cursor.status();
  if (!cursor.ok()) return rows;
  while (cursor->next()) rows[std::string(cursor->data())] += cursor->diff();
  EXPECT_TRUE(cursor->status().ok()) << cursor->status();
  return rows;
}

// Issue 15 item 2: a stopped-then-resumed incarnation 0 appended `running` and `ceased` rows after
// incarnation 1's (the status append re-read the upper and retried; the incarnation was only a
// tag), and the shard kept every row ever written. Incarnation 0 reports, stops (simulated: its
// calls wait), incarnation 1 takes over and reports, incarnation 0 resumes: its append is
// rejected, and the shard holds incarnation 1's state.
TEST(StatusShardTest, APredecessorsAppendIsRejected) {
  const fs::path dir = fresh_dir("fenced");
  std::shared_ptr<persist::PersistClient> client =
      persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string())).value();
  auto zero = StatusShard::open(client, "auction.status", 0);
  ASSERT_TRUE(zero.ok()) << zero.status();
  ASSERT_TRUE((*zero)
                  ->update({{"bids", "bids starting incarnation=0"},
                            {"users", "users starting incarnation=0"}})
                  .ok());
  ASSERT_TRUE((*zero)->update({{"bids", "bids running incarnation=0"}}).ok());

  auto one = StatusShard::open(client, "auction.status", 1);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE((*one)->update({{"bids", "bids running incarnation=1"}}).ok());

  const absl::Status stale = (*zero)->update({{"bids", "bids ceased incarnation=0"}});
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition) << stale;
  EXPECT_NE(stale.message().find("incarnation 1"), std::string::npos) << stale;
  // A predecessor that opens late is refused too.
  auto late = StatusShard::open(client, "auction.status", 0);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition) << late.status();

  ASSERT_TRUE((*one)->update({{"users", "users running incarnation=1"}}).ok());
  // The since follows the upper (it stayed at 0, so compaction kept every row ever written).
  const persist::ShardDescription described = client->describe("auction.status").value();
  ASSERT_FALSE(described.upper.is_empty());
  EXPECT_EQ(described.since, persist::Frontier(described.upper.time() - 1));
  EXPECT_EQ(contents(*client, "auction.status"),
            (std::map<std::string, int64_t>{{"bids running incarnation=1", 1},
                                            {"users running incarnation=1", 1}}));
  fs::remove_all(dir);
}

// End to end: after two runs of the driver, the status shard holds the second incarnation's
// state, one row per export (it held every row either run ever wrote).
TEST(StatusShardTest, TheShardHoldsTheLatestIncarnationsState) {
  const fs::path dir = fresh_dir("runs");
  IngestOptions options;
  options.location = persist::PersistLocation::in_directory(dir.string());
  options.workers.workers = 2;
  options.source.generator.kind = "auction";
  options.source.until = 500;
  ASSERT_TRUE(run_ingest(options).ok());
  options.source.until = 1000;
  auto second = run_ingest(options);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->incarnation, 1u);
  auto client = persist::PersistClient::open(options.location).value();
  const auto rows = contents(*client, "auction.status");
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& [row, count] : rows) {
    EXPECT_EQ(count, 1) << row;
    EXPECT_NE(row.find(" ceased incarnation=1 "), std::string::npos) << row;
  }
  fs::remove_all(dir);
}

// A log (weir.health_history): the claim keeps every row (several per first word too), append()
// adds and retracts rows as given, and a predecessor's append after a later incarnation claimed it
// is rejected and writes nothing.
TEST(StatusShardTest, ALogKeepsItsRowsAndIsFencedTheSameWay) {
  const fs::path dir = fresh_dir("log");
  std::shared_ptr<persist::PersistClient> client =
      persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string())).value();
  const auto clock = [] { return absl::Now(); };
  auto zero = StatusShard::open_log(client, "weir.health_history", 0, nullptr, clock);
  ASSERT_TRUE(zero.ok()) << zero.status();
  ASSERT_TRUE((*zero)->append({{"a starting seq=0", 1}, {"a running seq=1", 1}}).ok());

  auto one = StatusShard::open_log(client, "weir.health_history", 1, nullptr, clock);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(contents(*client, "weir.health_history"),
            (std::map<std::string, int64_t>{{"a running seq=1", 1}, {"a starting seq=0", 1}}))
      << "the claim adopted or retracted rows";
  ASSERT_TRUE((*one)->append({{"a starting seq=0", -1}, {"a stalled seq=0", 1}}).ok());

  const absl::StatusOr<uint64_t> stale = (*zero)->append({{"a dropped seq=2", 1}});
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition) << stale.status();
  EXPECT_EQ(contents(*client, "weir.health_history"),
            (std::map<std::string, int64_t>{{"a running seq=1", 1}, {"a stalled seq=0", 1}}));
  const persist::ShardDescription described = client->describe("weir.health_history").value();
  EXPECT_EQ(described.since, persist::Frontier(described.upper.time() - 1));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace weir::ingest
