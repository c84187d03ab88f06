// BackgroundMaintenance, asked by the appends that report maintenance_due, keeps a shard that grows
// by many small appends small: few batches, few consensus versions, few blobs; and its contents
// unchanged.

#include "weir/persist/background_maintenance.h"

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

}  // namespace
}  // namespace weir::persist
