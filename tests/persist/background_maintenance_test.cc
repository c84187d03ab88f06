// BackgroundMaintenance, asked by the appends that report maintenance_due, keeps a shard that grows
// by many small appends small: few batches, few consensus versions, few blobs; and its contents
// unchanged. A shard whose maintenance fell far behind has its versions truncated while it
// catches up, appends going on all the while.

#include "weir/persist/background_maintenance.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "persist_test_util.h"
#include "test_stores.h"

#include "weir/persist/blob.h"
#include "weir/persist/client.h"
#include "weir/persist/consensus.h"

namespace weir::persist {
namespace {

using testing::as_map;
using testing::consolidate;

// finish_within bounds the wait for a backlog (a writer's clean stop must not wait for as long as
// a backlog takes): false while turns remain, true once they have settled.
TEST(BackgroundMaintenanceTest, FinishWithinReturnsAtItsLimitWhileABacklogRemains) {
  const PersistLocation location = testing::fresh_location("sqlite");
  std::shared_ptr<PersistClient> client = PersistClient::open(location, PersistConfig{}).value();
  WriteHandle writer = client->open_writer("backlog").value();
  // 300 batches and no maintenance: settling takes many turns of kStepsPerTurn merge steps.
  for (uint64_t t = 0; t < 300; ++t) {
    const std::vector<Update> batch = {{"key" + std::to_string(t % 5), t, 1}};
    ASSERT_TRUE(
        writer.compare_and_append(batch, Frontier(t), Frontier(t + 1)).value().is_appended());
  }
  BackgroundMaintenance maintenance(client,
                                    [](const absl::Status& error) { ADD_FAILURE() << error; });
  maintenance.request("backlog");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(maintenance.finish_within(std::chrono::milliseconds(0)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(maintenance.finish_within(std::chrono::minutes(5)));
  EXPECT_GT(maintenance.completed(), 1u) << "more than one turn";
  EXPECT_TRUE(maintenance.finish_within(std::chrono::milliseconds(0))) << "nothing left";
}

TEST(BackgroundMaintenanceTest, KeepsAShardOfManySmallAppendsSmall) {
  const PersistLocation location = testing::fresh_location("sqlite");
  PersistConfig config;
  config.io_threads = 2;
  std::shared_ptr<PersistClient> client = PersistClient::open(location, config).value();
  WriteHandle writer = client->open_writer("grow").value();
  std::vector<absl::Status> errors;
  std::mutex errors_mu;
  std::vector<Update> history;
  constexpr uint64_t kAppends = 400;
  {
    BackgroundMaintenance maintenance(client, [&](const absl::Status& error) {
      std::lock_guard lock(errors_mu);
      errors.push_back(error);
    });
    size_t requests = 0;
    for (uint64_t t = 0; t < kAppends; ++t) {
      // Every other append is empty, like a progress-only append of a sink.
      std::vector<Update> batch;
      if (t % 2 == 0) {
        batch.push_back({"key" + std::to_string(t % 7), t, t % 3 == 0 ? -1 : 1});
      }
      const AppendResult result =
          writer.compare_and_append(batch, Frontier(t), Frontier(t + 1)).value();
      ASSERT_TRUE(result.is_appended());
      history.insert(history.end(), batch.begin(), batch.end());
      if (result.maintenance_due) {
        maintenance.request("grow");
        ++requests;
      }
    }
    ASSERT_GT(requests, 0u);
    // One whole maintain after the last append: finish returns once it has been carried out.
    const size_t completed = maintenance.completed();
    maintenance.request("grow");
    maintenance.finish();
    EXPECT_GT(maintenance.completed(), completed);
  }
  {
    std::lock_guard lock(errors_mu);
    EXPECT_TRUE(errors.empty()) << errors.front();
  }
  const ShardDescription description = client->describe("grow").value();
  EXPECT_LT(description.batches.size(), 30u);
  std::unique_ptr<Consensus> consensus = Consensus::open(location.consensus_url).value();
  const std::vector<VersionedData> versions =
      consensus->scan(description.id.str(), 0, 10 * kAppends).value();
  EXPECT_LT(versions.size(), kAppends / 4) << "GC truncates old versions";
  std::unique_ptr<Blob> blob = Blob::open(location.blob_url).value();
  const auto blobs = blob->list_keys(description.id.str() + "/").value();
  size_t parts = 0;
  for (const auto& batch : description.batches) {
    parts += batch.num_parts;
  }
  EXPECT_EQ(blobs.size(), parts) << "GC leaves only referenced parts";
  ReadHandle reader = client->open_reader("grow").value();
  for (uint64_t as_of : {uint64_t{0}, kAppends / 2, kAppends - 1}) {
    EXPECT_EQ(as_map(reader.snapshot(as_of).value()), consolidate(history, as_of)) << as_of;
  }
}

// A maintenance thread that was starved (a busy machine, a slow store) finds a backlog of small
// batches on every shard while their writers keep appending (as `weir ingest` appends to a shard
// per table). A compaction that ran until nothing was left to merge did not settle while appends
// went on: GC, which alone truncates consensus, waited for it, and the other shards waited for
// both, so every version of every shard (each a copy of its whole, growing state) was kept,
// gigabytes within minutes. In turns, GC runs between bounded compactions, shard after shard.
TEST(BackgroundMaintenanceTest, TruncatesWhileCatchingUpWithABacklog) {
  constexpr size_t kShards = 4;
  constexpr uint64_t kBacklog = 400;  // Appended to each shard with no maintenance at all.
  const PersistLocation location = testing::fresh_location("sqlite");
  PersistConfig config;
  config.io_threads = 2;
  std::shared_ptr<PersistClient> client = PersistClient::open(location, config).value();
  std::unique_ptr<Consensus> consensus = Consensus::open(location.consensus_url).value();
  struct Shard {
    std::string name, id;
    std::optional<WriteHandle> writer;
    std::vector<Update> history;
    uint64_t t = 0;
    size_t most_kept_late = 0;
    size_t last_seen = 0, truncations = 0;  // Drops of the versions kept, seen by the appender.
  };
  std::vector<Shard> shards(kShards);
  for (size_t i = 0; i < kShards; ++i) {
    shards[i].name = "behind" + std::to_string(i);
    shards[i].writer.emplace(client->open_writer(shards[i].name).value());
    shards[i].id = client->describe(shards[i].name).value().id.str();
  }
  const auto versions = [&](const Shard& shard) {
    return consensus->scan(shard.id, 0, 1'000'000).value().size();
  };
  // One append to `shard`; whether maintenance is due.
  const auto append = [](Shard& shard) {
    std::vector<Update> batch = {{"key" + std::to_string(shard.t % 11), shard.t, 1}};
    const AppendResult result =
        shard.writer->compare_and_append(batch, Frontier(shard.t), Frontier(shard.t + 1)).value();
    EXPECT_TRUE(result.is_appended());
    shard.history.insert(shard.history.end(), batch.begin(), batch.end());
    ++shard.t;
    return result.maintenance_due;
  };
  for (Shard& shard : shards) {
    while (shard.t < kBacklog) append(shard);
    ASSERT_GE(versions(shard), kBacklog);
  }

  std::vector<absl::Status> errors;
  std::mutex errors_mu;
  size_t turns = 0;
  {
    BackgroundMaintenance maintenance(client, [&](const absl::Status& error) {
      std::lock_guard lock(errors_mu);
      errors.push_back(error);
    });
    // Every shard's writer appends on a thread of its own until every shard has been truncated
    // while appending (at least 2 s, at most 120 s: the timing of a sanitizer build is not the
    // test's business). The versions kept after 2 s are what the maintenance thread let stand.
    const auto start = std::chrono::steady_clock::now();
    std::atomic<size_t> truncated_shards{0};
    std::vector<std::thread> appenders;
    for (Shard& shard : shards) {
      maintenance.request(shard.name);
      appenders.emplace_back([&] {
        for (auto now = start; now - start < std::chrono::seconds(120);
             now = std::chrono::steady_clock::now()) {
          if (now - start > std::chrono::seconds(2) && truncated_shards.load() == kShards) break;
          if (append(shard)) maintenance.request(shard.name);
          if (shard.t % 25 == 0) {
            const size_t kept = versions(shard);
            if (kept < shard.last_seen && shard.truncations++ == 0) truncated_shards.fetch_add(1);
            shard.last_seen = kept;
            if (now - start > std::chrono::seconds(2)) {
              shard.most_kept_late = std::max(shard.most_kept_late, kept);
            }
          }
        }
      });
    }
    for (std::thread& appender : appenders) appender.join();
    for (const Shard& shard : shards) maintenance.request(shard.name);
    maintenance.finish();
    turns = maintenance.completed();
  }
  {
    std::lock_guard lock(errors_mu);
    EXPECT_TRUE(errors.empty()) << errors.front();
  }
  for (const Shard& shard : shards) {
    SCOPED_TRACE(shard.name);
    std::printf(
        "%s: %llu appends; truncated %zu times while appending; at most %zu versions kept after "
        "2 s; %zu turns in all\n",
        shard.name.c_str(), static_cast<unsigned long long>(shard.t), shard.truncations,
        shard.most_kept_late, turns);
    // Before turns, GC of a shard waited for a compaction appends kept busy, and the shards
    // queued after it for both: some were never truncated while the appends went on (here:
    // for 120 s).
    EXPECT_GE(shard.truncations, 1u)
        << "at most " << shard.most_kept_late << " versions of " << shard.t << " kept after 2 s";
    EXPECT_LT(versions(shard), 50u) << "after the thread caught up";
    EXPECT_LT(client->describe(shard.name).value().batches.size(), 30u);
    ReadHandle reader = client->open_reader(shard.name).value();
    EXPECT_EQ(as_map(reader.snapshot(shard.t - 1).value()),
              consolidate(shard.history, shard.t - 1));
  }
}

}  // namespace
}  // namespace weir::persist
