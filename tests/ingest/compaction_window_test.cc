// The compaction window: ingest holds each shard's since a bounded distance behind its upper, so
// compaction consolidates the history before it, and reads at times at or after the since still
// give the generator's state.

#include <filesystem>
#include <limits>
#include <map>
#include <string>

#include "ingest_test_util.h"
#include <gtest/gtest.h>

#include "weir/ingest/ingest.h"
#include "weir/persist/client.h"

namespace weir::ingest {
namespace {

namespace fs = std::filesystem;

using testing::fresh_dir;
using testing::shard_at;

IngestOptions options_for(const fs::path& dir, uint64_t until) {
  IngestOptions options;
  options.location = persist::PersistLocation::in_directory(dir.string());
  options.workers.workers = 2;
  options.source.generator.kind = "auction";
  options.source.generator.scale = 2;
  options.source.rate = 20000;  // Many small batches, so that maintenance runs during the run.
  options.source.until = until;
  options.persist.maintenance_batch_threshold = 4;
  return options;
}

uint64_t stored_updates(const persist::ShardDescription& description) {
  uint64_t n = 0;
  for (const auto& batch : description.batches) n += batch.num_updates;
  return n;
}

// Issue 15 item 7: the since never moved in ingest (`since [0]`): bids stored 169,717 updates for
// 60,109 live rows (here, before the fix: since [0] and 8,676 updates stored for 4,006 live rows).
// With the default window (1000 offsets), each shard's since ends at upper - 1 - 1000, held by the
// driver's critical since hold; the history before it is consolidated, so the shard stores fewer
// updates than one that keeps every offset readable; reads from the since on still equal the
// generator's state.
TEST(CompactionWindowTest, TheSinceFollowsTheUpperAndHistoryConsolidates) {
  const uint64_t until = 8000;
  const fs::path dir = fresh_dir("default");
  const IngestOptions options = options_for(dir, until);
  auto report = run_ingest(options);
  ASSERT_TRUE(report.ok()) << report.status();
  const fs::path all_dir = fresh_dir("all");
  IngestOptions all = options_for(all_dir, until);
  all.compaction_window = std::numeric_limits<uint64_t>::max();
  auto all_report = run_ingest(all);
  ASSERT_TRUE(all_report.ok()) << all_report.status();

  auto client = persist::PersistClient::open(options.location).value();
  auto all_client = persist::PersistClient::open(all.location).value();
  auto generator = sources::loadgen::Generator::make(options.source.generator).value();
  for (const std::string table : {"users", "auctions", "bids"}) {
    const std::string shard = shard_name("auction", table);
    auto description = client->describe(shard);
    ASSERT_TRUE(description.ok()) << description.status();
    ASSERT_EQ(description->upper.to_string(), persist::Frontier(until + 1).to_string()) << shard;
    EXPECT_EQ(description->since.to_string(), persist::Frontier(until - 1000).to_string()) << shard;
    ASSERT_EQ(description->critical_readers.size(), 1u) << shard;
    EXPECT_EQ(description->critical_readers[0].purpose, "ingest compaction window");
    EXPECT_EQ(description->critical_readers[0].epoch, report->incarnation);
    const uint32_t t = *generator.table_index(table);
    for (uint64_t as_of : {until - 1000, until - 500, until}) {
      EXPECT_EQ(shard_at(*client, shard, as_of), generator.state_at(t, as_of))
          << shard << " at " << as_of;
    }
    auto all_description = all_client->describe(shard);
    ASSERT_TRUE(all_description.ok()) << all_description.status();
    EXPECT_EQ(all_description->since.to_string(), persist::Frontier(0).to_string()) << shard;
    // Counted after a full compaction of both: whether the run's own maintenance merged the
    // batches that hold the history depends on how its batches fell (the geometric policy), and
    // a run whose last batches needed no merge left the counts equal (1 run in 15 or so).
    ASSERT_TRUE(client->compact(shard, {.full = true}).ok()) << shard;
    ASSERT_TRUE(all_client->compact(shard, {.full = true}).ok()) << shard;
    description = client->describe(shard);
    all_description = all_client->describe(shard);
    ASSERT_TRUE(description.ok() && all_description.ok()) << shard;
    const uint64_t stored = stored_updates(*description);
    const uint64_t stored_all = stored_updates(*all_description);
    const uint64_t live = generator.state_at(t, until).size();
    EXPECT_LT(stored, stored_all) << shard << ": " << live << " live rows";
    EXPECT_GE(stored, live) << shard;
  }
  for (const auto& e : report->exports) EXPECT_EQ(e.since, until - 1000) << e.shard;
  // A later run (a new incarnation) takes the hold over and moves it on.
  IngestOptions further = options;
  further.source.until = until + 2000;
  further.compaction_window = 0;  // Only the latest offset stays readable.
  auto further_report = run_ingest(further);
  ASSERT_TRUE(further_report.ok()) << further_report.status();
  for (const std::string table : {"users", "auctions", "bids"}) {
    const std::string shard = shard_name("auction", table);
    auto description = client->describe(shard);
    ASSERT_TRUE(description.ok()) << description.status();
    EXPECT_EQ(description->since.to_string(), persist::Frontier(until + 2000).to_string());
    ASSERT_EQ(description->critical_readers.size(), 1u) << shard;
    EXPECT_EQ(description->critical_readers[0].epoch, further_report->incarnation);
    EXPECT_EQ(shard_at(*client, shard, until + 2000),
              generator.state_at(*generator.table_index(table), until + 2000))
        << shard;
  }
  fs::remove_all(dir);
  fs::remove_all(all_dir);
}

// A hold a later incarnation took over fences the earlier one: its downgrade is refused.
TEST(CompactionWindowTest, AHoldTakenOverByALaterIncarnationFencesTheEarlierOne) {
  const fs::path dir = fresh_dir("fenced");
  auto client =
      persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string())).value();
  auto hold = client->open_critical_since("t", persist::CriticalReaderId::random()).value();
  ASSERT_FALSE(hold.compare_and_downgrade_since(0, 7, persist::Frontier(0))->mismatch);
  EXPECT_TRUE(sinks::downgrade_to_window(hold, 7, 101, 10, "t").ok());
  EXPECT_EQ(hold.since().to_string(), persist::Frontier(90).to_string());
  const absl::Status stale = sinks::downgrade_to_window(hold, 6, 201, 10, "t");
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition) << stale;
  EXPECT_NE(stale.message().find("held by incarnation 7"), std::string::npos) << stale;
  EXPECT_EQ(hold.since().to_string(), persist::Frontier(90).to_string()) << "unchanged";
  EXPECT_EQ(sinks::window_since(5, 10), 0u);
  EXPECT_EQ(sinks::window_since(11, 10), 0u);
  EXPECT_EQ(sinks::window_since(12, 10), 1u);
  EXPECT_EQ(sinks::window_since(12, 0), 11u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace weir::ingest
