// A writer process is killed with SIGKILL at random moments mid-append (or mid-maintenance), 20
// times. After each kill the shard opens, holds exactly the appends that returned OK (plus,
// possibly, the one in flight, whole), and GC leaves no unreferenced blob behind.

#include <random>
#include <set>
#include <thread>

#include "gtest/gtest.h"
#include "persist_test_util.h"
#include "subprocess.h"
#include "test_stores.h"

#include "weir/persist/client.h"
#include "weir/persist/v1/state.pb.h"

namespace weir::persist {
namespace {

TEST(CrashIntegrationTest, KilledWriterLeavesAReadableShardAndNoGarbage) {
  const PersistLocation location = testing::fresh_location("sqlite");
  std::mt19937_64 rng(std::random_device{}());
  const uint64_t seed = rng();
  SCOPED_TRACE("seed " + std::to_string(seed));
  rng.seed(seed);

  // The checker's clock runs a day ahead: the killed writer's lease has run out for it.
  PersistConfig config;
  config.clock = [] { return absl::Now() + absl::Hours(24); };
  std::vector<Update> history;  // crash_batch(0 .. batches-1)
  uint64_t batches = 0;
  uint64_t total_acked = 0;
  int in_flight_found = 0;  // Kills after an append committed but before its "ok" was read.
  for (int kill = 0; kill < 20; ++kill) {
    SCOPED_TRACE("kill " + std::to_string(kill));
    testing::Child child({WEIR_PERSIST_TEST_CHILD, "crash-writer", location.blob_url,
                          location.consensus_url, "crash"});
    ASSERT_EQ(child.read_line(), "ready");
    // Some kills land before the first append completes, most in the middle of one.
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 250'000));
    child.kill(SIGKILL);
    const int status = child.wait();
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the writer exited on its own: " << status;
    uint64_t acked = batches * testing::kCrashBatchWidth;
    while (std::optional<std::string> line = child.read_line()) {
      ASSERT_EQ(line->rfind("ok ", 0), 0u) << *line;
      const uint64_t upper = std::stoull(line->substr(3));
      ASSERT_EQ(upper, acked + testing::kCrashBatchWidth) << "acks are in order";
      acked = upper;
      ++total_acked;
    }

    std::unique_ptr<PersistClient> client = PersistClient::open(location, config).value();
    ReadHandle reader = client->open_reader("crash", "checker").value();
    const Frontier upper = reader.fetch_recent_upper().value();
    ASSERT_FALSE(upper.is_empty());
    // Every acknowledged append, and at most the one in flight.
    ASSERT_TRUE(upper.time() == acked || upper.time() == acked + testing::kCrashBatchWidth)
        << "upper " << upper.time() << ", acknowledged " << acked;
    in_flight_found += upper.time() > acked;
    while (batches * testing::kCrashBatchWidth < upper.time()) {
      const std::vector<Update> batch = testing::crash_batch(batches++);
      history.insert(history.end(), batch.begin(), batch.end());
    }
    if (upper.time() > 0) {
      // Whole: the in-flight batch, if it is there, is there entirely.
      const absl::StatusOr<std::vector<Update>> snapshot = reader.snapshot(upper.time() - 1);
      ASSERT_TRUE(snapshot.ok()) << snapshot.status();
      ASSERT_EQ(testing::as_map(*snapshot), testing::consolidate(history, upper.time() - 1));
    }
    ASSERT_TRUE(reader.expire().ok());

    // GC expires the dead writer (and any compaction it was running) and removes its parts;
    // afterwards every blob of the shard is referenced by the state.
    const absl::StatusOr<GcResult> gc = client->gc("crash");
    ASSERT_TRUE(gc.ok()) << gc.status();
    const ShardDescription description = client->describe("crash").value();
    EXPECT_TRUE(description.writers.empty());
    EXPECT_TRUE(description.leased_readers.empty());
    std::unique_ptr<Consensus> consensus = Consensus::open(location.consensus_url).value();
    const std::vector<VersionedData> versions =
        consensus->scan(description.id.str(), 0, 1'000'000).value();
    ASSERT_EQ(versions.size(), 1u) << "GC truncated consensus to the head";
    weir::persist::v1::ProtoShardState state;
    ASSERT_TRUE(state.ParseFromString(versions[0].data));
    std::set<std::string> referenced;
    for (const auto& batch : state.batches()) {
      for (const auto& part : batch.parts()) {
        referenced.insert(part.key());
      }
    }
    std::unique_ptr<Blob> blob = Blob::open(location.blob_url).value();
    const std::vector<BlobMetadata> blobs = blob->list_keys(description.id.str() + "/").value();
    std::set<std::string> stored;
    for (const BlobMetadata& metadata : blobs) {
      stored.insert(metadata.key);
    }
    EXPECT_EQ(stored, referenced) << "GC left unreferenced blobs, or a referenced one is gone";
  }
  std::cout << "crash test: " << total_acked << " acknowledged appends, " << in_flight_found
            << " in-flight appends found whole, " << batches << " batches after 20 kills"
            << std::endl;
  EXPECT_GT(total_acked, 0u) << "no kill landed after an append";
}

}  // namespace
}  // namespace weir::persist
