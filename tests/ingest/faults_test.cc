// Ingestion under faults: errors are classified (transient ones back off, an expired writer is
// reopened, fatal ones end the run), and the shards still equal the generator's state.

#include "weir/persist/faults.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ingest_test_util.h"
#include <gtest/gtest.h>

#include "weir/ingest/ingest.h"
#include "weir/mutex.h"
#include "weir/persist/client.h"

namespace weir::ingest {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using testing::fresh_dir;
using testing::options_for;
using testing::shard_at;

// Every table's shard at each of several offsets from `from` on equals the generator's state.
void expect_matches_generator(const IngestOptions& options, uint64_t from, uint64_t until) {
  auto client = persist::PersistClient::open(options.location);
  ASSERT_TRUE(client.ok()) << client.status();
  auto generator = sources::loadgen::Generator::make(options.source.generator);
  ASSERT_TRUE(generator.ok());
  for (const std::string table : {"users", "auctions", "bids"}) {
    const uint32_t t = *generator->table_index(table);
    for (uint64_t offset : {from, (from + until) / 2, until}) {
      EXPECT_EQ(shard_at(**client, shard_name("auction", table), offset),
                generator->state_at(t, offset))
          << table << " at offset " << offset;
    }
  }
}

// The log lines of a run, kept for the assertions.
struct Log {
  weir::Mutex mu;
  std::vector<std::string> lines ABSL_GUARDED_BY(mu);
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& line) {
      weir::MutexLock lock(mu);
      lines.push_back(line);
    };
  }
  size_t count(const std::string& needle) {
    weir::MutexLock lock(mu);
    size_t n = 0;
    for (const auto& line : lines) n += line.find(needle) != std::string::npos;
    return n;
  }
  std::string all() {
    weir::MutexLock lock(mu);
    std::string text;
    for (const auto& line : lines) text += line + "\n";
    return text;
  }
};

// Issue 15 item 3: an expired writer restarted the dataflow forever, at once and with the same
// expired writer (147 epochs in the 15 s before this test stops it; bids stayed at upper 0).
// Another process's GC, whose clock is an hour ahead, expires the ingest's writer of bids as the
// run starts: the driver reopens it and finishes, with a bounded number of restarts and shards
// equal to the generator's state.
TEST(IngestFaultTest, AnExpiredWriterIsReopened) {
  const fs::path dir = fresh_dir("expired");
  const uint64_t until = 4000;
  IngestOptions options = options_for(dir, 2, until);
  options.source.rate = 4000;  // About a second.
  options.stop = std::make_shared<std::atomic<bool>>(false);
  Log log;
  size_t expired = 0;
  options.log = [&, record = log.sink()](const std::string& line) {
    record(line);
    if (line != "bids: snapshot") return;
    // The writers are open, the dataflow not yet built (this runs on the driver's thread).
    persist::PersistConfig skewed;
    skewed.clock = [] { return absl::Now() + absl::Hours(1); };
    auto client = persist::PersistClient::open(options.location, skewed);
    ASSERT_TRUE(client.ok()) << client.status();
    auto gc = (*client)->gc("auction.bids");
    ASSERT_TRUE(gc.ok()) << gc.status();
    expired = gc->expired_writers;
  };
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    // Bounds the test on a driver that never recovers.
    const auto deadline = Clock::now() + std::chrono::seconds(15);
    while (!done.load() && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    options.stop->store(true);
  });
  auto report = run_ingest(options);
  done = true;
  watchdog.join();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(expired, 1u) << "the GC expired the ingest's writer of bids";
  EXPECT_LE(report->epochs, 4u) << log.all();
  for (const auto& e : report->exports) EXPECT_EQ(e.upper, until + 1) << e.shard << log.all();
  EXPECT_EQ(log.count("auction.bids: writer"), 1u) << log.all();
  EXPECT_EQ(log.count("has expired (its lease ran out and a GC removed it); reopened as writer"),
            1u)
      << log.all();
  expect_matches_generator(options, 0, until);
  fs::remove_all(dir);
}

// Issue 15 item 3: every error restarted at once. Consensus fails every call for a while (its
// server is down): the driver backs off exponentially (a bounded number of attempts, each logged
// with its number and delay), and once consensus answers again the run finishes with shards equal
// to the generator's state.
TEST(IngestFaultTest, TransientErrorsBackOffExponentially) {
  const fs::path dir = fresh_dir("backoff");
  const uint64_t until = 4000;
  IngestOptions options = options_for(dir, 2, until);
  options.source.rate = 4000;
  options.backoff_initial = std::chrono::milliseconds(20);
  options.backoff_max = std::chrono::milliseconds(200);
  auto blob = persist::Blob::open("file://" + (dir / "blob").string());
  ASSERT_TRUE(blob.ok()) << blob.status();
  auto inner = persist::Consensus::open("sqlite://" + (dir / "consensus.db").string());
  ASSERT_TRUE(inner.ok()) << inner.status();
  auto consensus = std::make_shared<persist::FaultyConsensus>(std::shared_ptr(*std::move(inner)),
                                                              persist::FaultConfig{});
  options.blob = std::shared_ptr(*std::move(blob));
  options.consensus = consensus;
  // Consensus goes down as the first epoch starts (the driver's thread logs "bids: snapshot"
  // once the writers are open), for 1.5 s and at least until a fourth attempt has failed (on a
  // loaded machine under a sanitizer, attempts can be slow enough that 1.5 s covers only two:
  // the assertion on attempt 3 below then failed in a CI run).
  Log log;
  std::atomic<bool> down{false};
  options.log = [&, record = log.sink()](const std::string& line) {
    record(line);
    if (line != "bids: snapshot") return;
    consensus->configure(persist::FaultConfig{.fail_rate = 1});
    down = true;
  };
  // Health: each backoff is told, and once consensus is back the run tells of progress.
  std::mutex health_mu;
  std::vector<std::string> health;
  options.on_backoff = [&](const std::string&) {
    const std::lock_guard<std::mutex> lock(health_mu);
    health.emplace_back("backoff");
  };
  options.on_progress = [&] {
    const std::lock_guard<std::mutex> lock(health_mu);
    health.emplace_back("progress");
  };
  std::atomic<bool> done{false};
  std::thread restorer([&] {
    while (!down.load() && !done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // The outage.
    while (log.count("backing off: attempt 4 failed") == 0 && !done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    consensus->configure(persist::FaultConfig{});
  });
  auto report = run_ingest(options);
  done = true;
  restorer.join();
  ASSERT_TRUE(report.ok()) << report.status() << "\n" << log.all();
  for (const auto& e : report->exports) EXPECT_EQ(e.upper, until + 1) << e.shard << log.all();
  // Waits of about 20, 40, 80, 160, 200, 200, ... ms (at least half each) cover 1.5 s in at most
  // 1 + 4 + 1500 / 100 attempts; restarting at once made hundreds.
  EXPECT_GE(report->backoffs, 2u) << log.all();
  EXPECT_LE(report->backoffs, 20u) << log.all();
  EXPECT_LE(report->epochs, report->backoffs + 2) << log.all();
  EXPECT_EQ(log.count("backing off: attempt "), report->backoffs) << log.all();
  EXPECT_EQ(log.count("backing off: attempt 3 failed"), 1u) << log.all();
  EXPECT_EQ(static_cast<size_t>(std::count(health.begin(), health.end(), "backoff")),
            report->backoffs);
  ASSERT_FALSE(health.empty());
  EXPECT_EQ(health.back(), "progress") << "the run progressed after its last backoff";
  expect_matches_generator(options, 0, until);
  fs::remove_all(dir);
}

// The classes the driver acts on.
TEST(IngestFaultTest, ErrorsAreClassified) {
  EXPECT_EQ(classify_error(absl::UnavailableError("down")), ErrorClass::kTransient);
  EXPECT_EQ(classify_error(absl::AbortedError("upper mismatch")), ErrorClass::kTransient);
  EXPECT_EQ(classify_error(absl::ResourceExhaustedError("disk full")), ErrorClass::kTransient);
  EXPECT_EQ(classify_error(absl::DeadlineExceededError("slow")), ErrorClass::kTransient);
  EXPECT_EQ(classify_error(absl::DataLossError("corrupt part")), ErrorClass::kFatal);
  EXPECT_EQ(classify_error(absl::FailedPreconditionError("format version 9")), ErrorClass::kFatal);
  EXPECT_EQ(classify_error(absl::InvalidArgumentError("bad")), ErrorClass::kFatal);
  EXPECT_EQ(classify_error(absl::NotFoundError("missing part")), ErrorClass::kFatal);

  // The status an expired writer's append returns.
  const fs::path dir = fresh_dir("classified");
  auto client = persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()));
  ASSERT_TRUE(client.ok()) << client.status();
  auto writer = (*client)->open_writer("t");
  ASSERT_TRUE(writer.ok()) << writer.status();
  persist::PersistConfig skewed;
  skewed.clock = [] { return absl::Now() + absl::Hours(1); };
  auto gc_client =
      persist::PersistClient::open(persist::PersistLocation::in_directory(dir.string()), skewed);
  ASSERT_TRUE(gc_client.ok());
  ASSERT_EQ((*gc_client)->gc("t")->expired_writers, 1u);
  std::vector<persist::Update> row{{"a", 0, 1}};
  auto appended = writer->compare_and_append(row, persist::Frontier(0), persist::Frontier(1));
  ASSERT_FALSE(appended.ok());
  EXPECT_TRUE(persist::is_writer_expired(appended.status())) << appended.status();
  EXPECT_EQ(classify_error(appended.status()), ErrorClass::kExpiredWriter);
  EXPECT_FALSE(persist::is_writer_expired(absl::FailedPreconditionError("writer has expired")));

  // A writer fenced out by a later incarnation: the run is over, even when the outcome of its
  // last append is unknown (persist reports that as Unavailable, indeterminate and fenced):
  // restarting would only meet the fence again, after a backoff, with a less clear error.
  auto fenced_writer = (*client)->open_writer("f", "old", {1, "incarnation 0"});
  ASSERT_TRUE(fenced_writer.ok()) << fenced_writer.status();
  ASSERT_TRUE((*gc_client)->fence("f", {2, "incarnation 1 (host:7)"}).ok());
  auto refused = fenced_writer->compare_and_append(row, persist::Frontier(0), persist::Frontier(1));
  ASSERT_TRUE(persist::is_fenced(refused.status())) << refused.status();
  EXPECT_EQ(classify_error(refused.status()), ErrorClass::kFatal);
  absl::Status unknown = absl::UnavailableError("the reply was lost; then: fenced out");
  refused.status().ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { unknown.SetPayload(url, payload); });
  ASSERT_TRUE(persist::is_fenced(unknown));
  EXPECT_EQ(classify_error(unknown), ErrorClass::kFatal);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace weir::ingest
