// Ingestion end to end: a load generator's tables into persist shards, compared with the
// generator's own state at several offsets; definite and transient errors; adding a table.

#include "weir/ingest/ingest.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ingest_test_util.h"
#include "testing/forwarding_consensus.h"
#include <gtest/gtest.h>

#include "weir/ingest/sequence.h"
#include "weir/mutex.h"
#include "weir/persist/blob.h"
#include "weir/persist/client.h"
#include "weir/persist/consensus.h"

namespace weir::ingest {
namespace {

namespace fs = std::filesystem;

using testing::fresh_dir;
using testing::options_for;
using testing::shard_at;

// Every table's shard at each of several offsets equals the generator's state there.
void expect_matches_generator(const IngestOptions& options, uint64_t until,
                              const std::vector<std::string>& tables) {
  auto client = persist::PersistClient::open(options.location);
  ASSERT_TRUE(client.ok()) << client.status();
  auto generator = sources::loadgen::Generator::make(options.source.generator);
  ASSERT_TRUE(generator.ok());
  for (const auto& table : tables) {
    const uint32_t t = *generator->table_index(table);
    for (uint64_t offset : {uint64_t{0}, until / 3, 2 * until / 3, until}) {
      EXPECT_EQ(shard_at(**client, shard_name("auction", table), offset),
                generator->state_at(t, offset))
          << table << " at offset " << offset;
    }
  }
}

class IngestTest : public ::testing::TestWithParam<size_t> {};

TEST_P(IngestTest, ShardsEqualTheGeneratorAtEveryOffset) {
  const fs::path dir = fresh_dir("correct-" + std::to_string(GetParam()));
  const uint64_t until = 3000;
  IngestOptions options = options_for(dir, GetParam(), until);
  auto report = run_ingest(options);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->exports.size(), 3u);
  for (const auto& e : report->exports) {
    EXPECT_EQ(e.upper, until + 1) << e.shard;
    EXPECT_EQ(e.health, sources::Health::kCeased) << e.shard;
    EXPECT_GT(e.updates, 0u);
  }
  // It reached its end, and says when, before its final maintenance.
  ASSERT_TRUE(report->complete_seconds.has_value());
  EXPECT_GT(*report->complete_seconds, 0);
  EXPECT_LE(*report->complete_seconds, report->seconds);
  expect_matches_generator(options, until, {"users", "auctions", "bids"});
  // A second run resumes from the uppers and adds nothing when already complete.
  auto again = run_ingest(options);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->incarnation, report->incarnation + 1);
  expect_matches_generator(options, until, {"users", "auctions", "bids"});

  // Going further continues where it stopped.
  options.source.until = 2 * until;
  auto further = run_ingest(options);
  ASSERT_TRUE(further.ok()) << further.status();
  expect_matches_generator(options, 2 * until, {"users", "auctions", "bids"});
  fs::remove_all(dir);
}

// A paced stream appends many small batches; they ask for maintenance as the shards grow, so a
// shard's state keeps no more batches than the maintenance threshold however many were appended
// (a completed run waits for the maintenance it asked for), and its contents are unchanged.
TEST_P(IngestTest, StreamingKeepsShardStatesSmall) {
  const fs::path dir = fresh_dir("maintained-" + std::to_string(GetParam()));
  const uint64_t until = 3000;
  IngestOptions options = options_for(dir, GetParam(), until);
  options.source.rate = 2000;
  options.tables = {"users", "auctions"};
  // A low threshold: how many batches the run appends depends on how fast its steps are (about
  // 200 on an idle machine, 6 on one loaded 10 times over).
  const size_t threshold = 4;
  options.persist.maintenance_batch_threshold = threshold;
  auto report = run_ingest(options);
  ASSERT_TRUE(report.ok()) << report.status();
  auto client = persist::PersistClient::open(options.location);
  ASSERT_TRUE(client.ok()) << client.status();
  for (const auto& e : report->exports) {
    EXPECT_GT(e.batches, threshold) << e.shard;  // Maintenance was due.
    auto description = (*client)->describe(e.shard);
    ASSERT_TRUE(description.ok()) << description.status();
    // Compaction leaves the trailing empty batch and a run or two beside the merged one: the
    // bound is the threshold's order, not the number appended.
    EXPECT_LE(description->batches.size(), 2 * threshold) << e.shard << ": " << e.batches;
  }
  expect_matches_generator(options, until, {"users", "auctions"});
  fs::remove_all(dir);
}

TEST_P(IngestTest, DefiniteErrorStaysInItsExport) {
  const fs::path dir = fresh_dir("definite-" + std::to_string(GetParam()));
  const uint64_t until = 2000;
  IngestOptions options = options_for(dir, GetParam(), until);
  options.source.generator.fault_table = "bids";
  options.source.generator.fault_offset = 1000;
  auto report = run_ingest(options);
  ASSERT_TRUE(report.ok()) << report.status();
  auto client = persist::PersistClient::open(options.location);
  ASSERT_TRUE(client.ok());
  // The error sits in bids at a fixed offset: absent before it, present from it on.
  auto before = shard_at(**client, "auction.bids", 999);
  auto after = shard_at(**client, "auction.bids", until);
  auto is_error = [](const auto& entry) { return entry.first.rfind("!error:", 0) == 0; };
  EXPECT_EQ(std::count_if(before.begin(), before.end(), is_error), 0);
  EXPECT_EQ(std::count_if(after.begin(), after.end(), is_error), 1);
  for (const auto& e : report->exports) {
    EXPECT_EQ(e.upper, until + 1) << e.shard;
    if (e.table == "bids") {
      EXPECT_EQ(e.health, sources::Health::kStalled) << sources::to_string(e.health);
      const std::string at = "undecodable row at offset ";
      const size_t where = e.error.find(at);
      ASSERT_NE(where, std::string::npos) << e.error;
      // Nothing after the error, from any worker (each emits the offsets it owns): bids at the
      // end equals bids at the error's offset.
      const uint64_t offset = std::stoull(e.error.substr(where + at.size()));
      EXPECT_EQ(shard_at(**client, "auction.bids", offset), after) << "error at " << offset;
    }
  }
  // The other exports are complete and correct.
  expect_matches_generator(options, until, {"users", "auctions"});
  fs::remove_all(dir);
}

// Issue 15 item 1: a definite error did not survive a restart. Killed at upper 7233 and
// restarted, bids went on ingesting (25,507 rows against 11,225 uninterrupted) and its health
// said "starting": the source's error state was per epoch and the plan ignored the error rows.
TEST_P(IngestTest, DefiniteErrorSurvivesARestart) {
  const fs::path dir = fresh_dir("definite-restart-" + std::to_string(GetParam()));
  IngestOptions options = options_for(dir, GetParam(), 1500);
  options.source.generator.fault_table = "bids";
  options.source.generator.fault_offset = 1000;
  ASSERT_TRUE(run_ingest(options).ok());
  auto client = persist::PersistClient::open(options.location).value();
  const auto errored = shard_at(*client, "auction.bids", 1500);

  options.source.until = 3000;
  auto report = run_ingest(options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(shard_at(*client, "auction.bids", 3000), errored) << "bids ingested after its error";
  for (const auto& e : report->exports) {
    EXPECT_EQ(e.upper, 3001u) << e.shard;
    if (e.table == "bids") {
      EXPECT_EQ(e.health, sources::Health::kStalled) << sources::to_string(e.health);
      // The error the shard holds, as the first run reported it.
      EXPECT_EQ(errored.count(sources::definite_error(e.error)), 1u) << e.error;
      EXPECT_NE(e.error.find("table bids: undecodable row at offset"), std::string::npos)
          << e.error;
    } else {
      EXPECT_EQ(e.health, sources::Health::kCeased)
          << e.table << ": " << sources::to_string(e.health);
    }
  }
  expect_matches_generator(options, 3000, {"users", "auctions"});
  fs::remove_all(dir);
}

// The same within one run: the epoch that adds a table resumes bids past its definite error.
// The driver reads a shard's error again only after an epoch whose sink wrote an error row, or
// whose end left the shard's upper elsewhere than the sink's last append said (here: appends
// still in flight when the epoch was dropped); had it kept what the first plan read, bids would
// have gone on ingesting from the next epoch on.
TEST_P(IngestTest, DefiniteErrorSurvivesANewEpoch) {
  const fs::path dir = fresh_dir("definite-epoch-" + std::to_string(GetParam()));
  const uint64_t until = 4000;
  IngestOptions options = options_for(dir, GetParam(), until);
  options.source.generator.fault_table = "bids";
  options.source.generator.fault_offset = 100;
  options.source.rate = 2000;  // The error 0.05 s into the stream: durable before the add.
  options.tables = {"users", "bids"};
  options.add_table = "auctions";
  options.add_after = std::chrono::milliseconds(800);
  auto report = run_ingest(options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_GE(report->epochs, 2u);
  auto client = persist::PersistClient::open(options.location).value();
  for (const auto& e : report->exports) {
    EXPECT_EQ(e.upper, until + 1) << e.shard;
    if (e.table != "bids") continue;
    EXPECT_EQ(e.health, sources::Health::kStalled) << sources::to_string(e.health);
    const std::string at = "undecodable row at offset ";
    const size_t where = e.error.find(at);
    ASSERT_NE(where, std::string::npos) << e.error;
    const uint64_t offset = std::stoull(e.error.substr(where + at.size()));
    EXPECT_LT(offset, 1000u) << "the error was not durable before the table was added";
    EXPECT_EQ(shard_at(*client, "auction.bids", until), shard_at(*client, "auction.bids", offset))
        << "bids ingested after its error at " << offset;
  }
  expect_matches_generator(options, until, {"users", "auctions"});
  fs::remove_all(dir);
}

// Consensus whose compare_and_set of `shard`'s state waits while `hold` is set: a status shard
// whose writes are slow.
class HoldingConsensus final : public weir::testing::ForwardingConsensus {
 public:
  HoldingConsensus(std::shared_ptr<persist::Consensus> inner, std::string shard)
      : ForwardingConsensus(std::move(inner)), shard_(std::move(shard)) {}
  absl::StatusOr<persist::CasResult> compare_and_set(
      std::string_view key, std::optional<uint64_t> expected_seqno,
      const persist::VersionedData& new_version) override {
    // A shard's state names its shard.
    if (new_version.data.find(shard_) != std::string::npos) {
      while (hold.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return inner_->compare_and_set(key, expected_seqno, new_version);
  }

  std::atomic<bool> hold{false};

 private:
  std::string shard_;
};

// The health operator writes each change of health to the status shard before it takes in the
// next. With that write slow, a stop came after the error row was durable in bids but before
// the operator had taken in bids's stalled report (it was still writing everyone's first
// "running"): the report said bids was running (a MariaDB test failed so in CI's full run). The
// shard's definite error is the fact, and the report says it.
TEST_P(IngestTest, AStopBeforeTheHealthOperatorTookInAnErrorStillReportsIt) {
  const fs::path dir = fresh_dir("stop-after-error-" + std::to_string(GetParam()));
  IngestOptions options = options_for(dir, GetParam(), 100000);
  options.source.generator.fault_table = "bids";
  options.source.generator.fault_offset = 100;
  options.source.rate = 5000;
  auto blob = persist::Blob::open("file://" + (dir / "blob").string());
  ASSERT_TRUE(blob.ok()) << blob.status();
  auto inner = persist::Consensus::open("sqlite://" + (dir / "consensus.db").string());
  ASSERT_TRUE(inner.ok()) << inner.status();
  auto consensus =
      std::make_shared<HoldingConsensus>(std::shared_ptr(*std::move(inner)), "auction.status");
  options.blob = std::shared_ptr(*std::move(blob));
  options.consensus = consensus;
  // From the first epoch on (the status shard's writer is open by then).
  options.on_worker = [&](Worker&) { consensus->hold = true; };
  options.stop = std::make_shared<std::atomic<bool>>(false);
  IngestMonitor monitor;
  absl::StatusOr<IngestReport> report = absl::UnknownError("not run");
  std::thread run([&] { report = run_ingest(options, &monitor); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool durable = false;
  while (!durable && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    for (const auto& e : monitor.exports()) durable |= e.table == "bids" && e.persisted_upper > 100;
  }
  EXPECT_TRUE(durable) << "bids did not pass its error's offset";
  options.stop->store(true);
  // The workers drop the epoch within a step; then the status write may finish (the run's end
  // expires the status shard's writer).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  consensus->hold = false;
  run.join();
  ASSERT_TRUE(report.ok()) << report.status();
  for (const auto& e : report->exports) {
    if (e.table != "bids") {
      EXPECT_NE(e.health, sources::Health::kStalled) << e.table << ": " << e.error;
      continue;
    }
    EXPECT_EQ(e.health, sources::Health::kStalled) << sources::to_string(e.health);
    EXPECT_NE(e.error.find("undecodable row at offset"), std::string::npos) << e.error;
  }
  fs::remove_all(dir);
}

// Counts the compare-and-sets that register the plan's reader of a shard (its read for a definite
// error) and, once `fail` is set, refuses every call on the key of `shard`'s state (a shard that
// stopped answering).
class PlanReadCountingConsensus final : public weir::testing::ForwardingConsensus {
 public:
  PlanReadCountingConsensus(std::shared_ptr<persist::Consensus> inner, std::string shard)
      : ForwardingConsensus(std::move(inner)), shard_(std::move(shard)) {}
  absl::StatusOr<std::optional<persist::VersionedData>> head(std::string_view key) override {
    if (failing(key)) return absl::UnavailableError("the shard's consensus is down (test)");
    return inner_->head(key);
  }
  absl::StatusOr<persist::CasResult> compare_and_set(
      std::string_view key, std::optional<uint64_t> expected_seqno,
      const persist::VersionedData& new_version) override {
    if (failing(key)) return absl::UnavailableError("the shard's consensus is down (test)");
    if (new_version.data.find("ingest plan") != std::string::npos) ++plan_reads;
    if (new_version.data.find(shard_) != std::string::npos) {
      weir::MutexLock lock(mu_);
      key_ = std::string(key);
    }
    return inner_->compare_and_set(key, expected_seqno, new_version);
  }
  absl::StatusOr<std::vector<persist::VersionedData>> scan(std::string_view key,
                                                           uint64_t from_seqno,
                                                           size_t limit) override {
    if (failing(key)) return absl::UnavailableError("the shard's consensus is down (test)");
    return inner_->scan(key, from_seqno, limit);
  }

  std::atomic<int> plan_reads{0};
  std::atomic<bool> fail{false};

 private:
  bool failing(std::string_view key) {
    if (!fail.load()) return false;
    weir::MutexLock lock(mu_);
    return key == key_;
  }
  const std::string shard_;
  weir::Mutex mu_;
  std::string key_ ABSL_GUARDED_BY(mu_);
};

// A stop does not wait for shards to be read: the report takes definite errors from what the
// run knows (a report after a stop read whole shards to their end when an append had finished
// after the stop: typed rows sort before the error prefix).
TEST_P(IngestTest, AStoppedRunReadsNoShardForItsReport) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    const fs::path dir = fresh_dir(absl::StrCat("stop-reads-", GetParam(), "-", attempt));
    IngestOptions options = options_for(dir, GetParam(), 100000000);
    auto consensus = std::make_shared<PlanReadCountingConsensus>(
        persist::Consensus::open("sqlite://" + (dir / "consensus.db").string()).value(),
        "auction.bids");
    options.blob = persist::Blob::open("file://" + (dir / "blob").string()).value();
    options.consensus = consensus;
    options.stop = std::make_shared<std::atomic<bool>>(false);
    absl::StatusOr<IngestReport> report = absl::UnknownError("not run");
    std::thread run([&] { report = run_ingest(options); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + 37 * attempt));
    // A fresh run's first plan reads no shard (every upper is 0): any read is the report's.
    options.stop->store(true);
    run.join();
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(consensus->plan_reads.load(), 0) << "attempt " << attempt;
    fs::remove_all(dir);
  }
}

// A run with nothing to do reports the definite error its plan read, even where the shard then
// stops answering (the report fetched the upper to decide, and said "starting" without it).
TEST_P(IngestTest, ARunWithNothingToDoReportsTheErrorItsPlanRead) {
  const fs::path dir = fresh_dir("nothing-to-do-" + std::to_string(GetParam()));
  IngestOptions options = options_for(dir, GetParam(), 2000);
  options.source.generator.fault_table = "bids";
  options.source.generator.fault_offset = 100;
  auto consensus = std::make_shared<PlanReadCountingConsensus>(
      persist::Consensus::open("sqlite://" + (dir / "consensus.db").string()).value(),
      "auction.bids");
  options.blob = persist::Blob::open("file://" + (dir / "blob").string()).value();
  options.consensus = consensus;
  ASSERT_TRUE(run_ingest(options).ok());
  options.on_worker = [&](Worker&) { consensus->fail = true; };
  auto again = run_ingest(options);
  consensus->fail = false;
  ASSERT_TRUE(again.ok()) << again.status();
  for (const auto& e : again->exports) {
    if (e.table != "bids") continue;
    EXPECT_EQ(e.health, sources::Health::kStalled) << sources::to_string(e.health);
    EXPECT_NE(e.error.find("undecodable row at offset"), std::string::npos) << e.error;
  }
  fs::remove_all(dir);
}

// A snapshot large enough that the snapshot operator yields (its output runs out of fuel) while
// the replication on the same worker reports: the last health must still be the change stream's
// (ceased, or stalled with the error), not the snapshot's "running". It was "running" for
// auctions and bids (bids's error lost from its health) while both the snapshot and the
// replication reported into one per-worker slot in whatever order they ran.
TEST_P(IngestTest, HealthAfterALargeSnapshotIsTheStreams) {
  const fs::path dir = fresh_dir("health-snapshot-" + std::to_string(GetParam()));
  const uint64_t until = 2000;
  IngestOptions options = options_for(dir, GetParam(), until);
  options.source.generator.snapshot_rows = {{"auctions", 120'000}, {"bids", 120'000}};
  options.source.generator.fault_table = "bids";
  options.source.generator.fault_offset = 100;
  auto report = run_ingest(options);
  ASSERT_TRUE(report.ok()) << report.status();
  for (const auto& e : report->exports) {
    EXPECT_EQ(e.upper, until + 1) << e.shard;
    if (e.table == "bids") {
      EXPECT_EQ(e.health, sources::Health::kStalled) << sources::to_string(e.health);
      EXPECT_NE(e.error.find("table bids: undecodable row at offset"), std::string::npos)
          << e.error;
    } else {
      EXPECT_EQ(e.health, sources::Health::kCeased)
          << e.table << ": " << sources::to_string(e.health);
    }
  }
  fs::remove_all(dir);
}

TEST_P(IngestTest, TransientErrorRestartsFromTheUppers) {
  const fs::path dir = fresh_dir("transient-" + std::to_string(GetParam()));
  const uint64_t until = 3000;
  IngestOptions options = options_for(dir, GetParam(), until);
  options.source.transient_fault = 1500;
  options.source.rate = 20000;  // Slow enough that some batches land before the fault.
  auto report = run_ingest(options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->epochs, 2u);
  expect_matches_generator(options, until, {"users", "auctions", "bids"});
  fs::remove_all(dir);
}

TEST_P(IngestTest, AddedTableSnapshotsWhileTheOthersResume) {
  const fs::path dir = fresh_dir("add-" + std::to_string(GetParam()));
  const uint64_t until = 4000;
  IngestOptions options = options_for(dir, GetParam(), until);
  options.source.rate = 10000;  // 0.4 s in all.
  options.tables = {"users", "auctions"};
  options.add_table = "bids";
  options.add_after = std::chrono::milliseconds(150);
  auto report = run_ingest(options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->exports.size(), 3u);
  EXPECT_GE(report->epochs, 2u);
  expect_matches_generator(options, until, {"users", "auctions", "bids"});
  fs::remove_all(dir);
}

// Each worker writes the offsets it owns (offset % workers), so a shard's batches are split
// differently by every worker count: a run stopped part-way with 2 workers and resumed with 3,
// then taken further with 1, still equals the generator at every offset.
TEST(IngestWorkersTest, ResumingWithOtherWorkerCountsEqualsTheGenerator) {
  const fs::path dir = fresh_dir("workers");
  IngestOptions options = options_for(dir, 2, 6000);
  options.source.rate = 10000;
  options.stop = std::make_shared<std::atomic<bool>>(false);
  std::thread stopper([stop = options.stop] {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    stop->store(true);
  });
  auto stopped = run_ingest(options);
  stopper.join();
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  // Paced at 10,000 offsets a second, 6,000 take longer than the 250 ms before the stop.
  for (const auto& e : stopped->exports) EXPECT_LT(e.upper, 6001u) << e.shard;
  EXPECT_FALSE(stopped->complete_seconds.has_value()) << "stopped before its end";

  IngestOptions three = options_for(dir, 3, 6000);
  auto resumed = run_ingest(three);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  expect_matches_generator(three, 6000, {"users", "auctions", "bids"});

  IngestOptions one = options_for(dir, 1, 9000);
  auto further = run_ingest(one);
  ASSERT_TRUE(further.ok()) << further.status();
  for (const auto& e : further->exports) EXPECT_EQ(e.upper, 9001u) << e.shard;
  expect_matches_generator(one, 9000, {"users", "auctions", "bids"});
  fs::remove_all(dir);
}

// Issue 15 item 6: resuming with other source options was accepted silently (--scale 20 --seed 7
// on shards written with the defaults produced 2,662 rows with negative multiplicity).
// Incarnations and executions: racing takers each get a distinct number, and together the
// numbers from 0 up with none skipped (no append here has an unknown outcome).
TEST(SequenceTest, RacingTakersGetDistinctIncreasingNumbers) {
  std::shared_ptr<persist::PersistClient> client = persist::PersistClient::create(
      persist::Blob::open("mem://").value(), persist::Consensus::open("mem://").value());
  constexpr int kThreads = 4, kEach = 25;
  std::vector<std::vector<uint64_t>> taken(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto number = take_sequence_number(*client, "x.executions", [t](uint64_t n) {
          return absl::StrCat("execution=", n, " thread=", t);
        });
        ASSERT_TRUE(number.ok()) << number.status();
        if (!taken[t].empty()) {
          EXPECT_GT(*number, taken[t].back());
        }
        taken[t].push_back(*number);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  std::set<uint64_t> all;
  for (const auto& numbers : taken) all.insert(numbers.begin(), numbers.end());
  constexpr uint64_t kTotal = uint64_t{kThreads} * kEach;
  ASSERT_EQ(all.size(), kTotal);
  EXPECT_EQ(*all.rbegin(), kTotal - 1);
  const persist::ShardDescription d = client->describe("x.executions").value();
  EXPECT_EQ(d.upper, persist::Frontier(kTotal));
  EXPECT_TRUE(d.writers.empty()) << "every taker let go of its writer";
  EXPECT_FALSE(process_name().empty());
  EXPECT_NE(process_name().find(':'), std::string::npos);
}

// A sequence shard (weir.executions, <kind>.incarnations) gets one batch per number: the taker
// that makes its maintenance due compacts it, so its batches stay few however many were taken.
TEST(SequenceTest, ASequenceShardIsCompactedAsNumbersAreTaken) {
  persist::PersistConfig config;
  config.maintenance_batch_threshold = 8;
  std::shared_ptr<persist::PersistClient> client = persist::PersistClient::create(
      persist::Blob::open("mem://").value(), persist::Consensus::open("mem://").value(), config);
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(take_sequence_number(*client, "x.executions", [](uint64_t n) {
                  return absl::StrCat("execution=", n);
                }).ok());
  }
  const persist::ShardDescription d = client->describe("x.executions").value();
  EXPECT_EQ(d.upper, persist::Frontier(200));
  EXPECT_LE(d.batches.size(), 32u) << "200 numbers left " << d.batches.size() << " batches";
}

TEST(IngestIdentityTest, ResumingWithOtherSourceOptionsIsRefused) {
  const fs::path dir = fresh_dir("identity");
  IngestOptions options = options_for(dir, 1, 300);
  auto first = run_ingest(options);
  ASSERT_TRUE(first.ok()) << first.status();
  const auto before = [&] {
    auto client = persist::PersistClient::open(options.location).value();
    return shard_at(*client, "auction.bids", 300);
  }();

  IngestOptions other = options_for(dir, 1, 600);
  other.source.generator.seed = 7;
  other.source.generator.scale = 20;
  auto refused = run_ingest(other);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  const std::string message(refused.status().message());
  EXPECT_NE(message.find("scale=2 seed=42"), std::string::npos) << message;
  EXPECT_NE(message.find("scale=20 seed=7"), std::string::npos) << message;
  auto client = persist::PersistClient::open(options.location).value();
  EXPECT_EQ(shard_at(*client, "auction.bids", 300), before) << "the refused run wrote nothing";

  // The same options resume.
  IngestOptions same = options_for(dir, 1, 600);
  auto resumed = run_ingest(same);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  expect_matches_generator(same, 600, {"users", "auctions", "bids"});
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Workers, IngestTest, ::testing::Values(1, 2));

}  // namespace
}  // namespace weir::ingest
