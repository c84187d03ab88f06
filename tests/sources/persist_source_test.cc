// persist_source against a model: random histories appended while the dataflow reads them from a
// random as_of, with compaction and GC running all the while; 1, 2 and 4 workers.

#include "weir/sources/persist_source.h"

#include <atomic>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "testing/harness.h"
#include <gtest/gtest.h>

#include "weir/mutex.h"
#include "weir/operators/generic.h"
#include "weir/persist/client.h"
#include "weir/persist/faults.h"

namespace weir::sources {
namespace {

using persist::Frontier;
using Time = uint64_t;

persist::PersistLocation fresh_location(const std::string& name) {
  static std::atomic<int> counter{0};
  const std::string unique = name + "-" + std::to_string(counter++);
  return {"mem://source-blob-" + unique, "mem://source-consensus-" + unique};
}

struct Appended {
  Time lower, upper;
  std::vector<persist::Update> updates;
};

// A random history: batches of 1-3 times each, updates of 16 keys with diffs of either sign
// (some of them error rows), many cancelling out.
std::vector<Appended> random_history(std::mt19937_64& rng, size_t batches) {
  std::vector<Appended> history;
  Time lower = 0;
  for (size_t b = 0; b < batches; ++b) {
    const Time upper = lower + 1 + rng() % 3;
    Appended batch{lower, upper, {}};
    const size_t n = rng() % 24;
    for (size_t i = 0; i < n; ++i) {
      const bool error = rng() % 16 == 0;
      std::string data = (error ? "!error: e" : "key ") + std::to_string(rng() % 16);
      const int64_t diffs[] = {-2, -1, 1, 1, 2};
      batch.updates.push_back({data, lower + rng() % (upper - lower), diffs[rng() % 5]});
    }
    history.push_back(std::move(batch));
    lower = upper;
  }
  return history;
}

// Sum of the diffs per data at times <= t, zeros left out.
std::map<std::string, int64_t> accumulate_at(
    const std::vector<std::tuple<Time, std::string, int64_t>>& updates, Time t) {
  std::map<std::string, int64_t> sums;
  for (const auto& [time, data, diff] : updates) {
    if (time > t) continue;
    int64_t& sum = sums[data];
    sum += diff;
    if (sum == 0) sums.erase(data);
  }
  return sums;
}

struct Recorded {
  weir::Mutex mu;
  std::vector<std::tuple<Time, std::string, int64_t>> updates ABSL_GUARDED_BY(mu);
  std::vector<std::tuple<Time, std::string, int64_t>> errors ABSL_GUARDED_BY(mu);
  std::atomic<int> early{0};  // Records at a time their input's frontier had passed.
};

// Records `stream` into `into`, counting records that arrive at a time the frontier passed.
void record(const Stream<Time, Update>& stream, Recorded& recorded, bool errors) {
  auto seen = std::make_shared<Time>(0);
  sink(stream, Pipeline{}, "Record", [&recorded, errors, seen](auto& input) {
    input.for_each([&](const auto& cap, std::vector<Update>& batch) {
      if (cap.time() < *seen) recorded.early++;
      weir::MutexLock lock(recorded.mu);
      for (auto& [data, diff] : batch) {
        (errors ? recorded.errors : recorded.updates).emplace_back(cap.time(), data, diff);
      }
    });
    const auto frontier = input.frontier().frontier();
    if (!frontier.empty()) *seen = std::max(*seen, frontier[0]);
  });
}

class PersistSourceTest : public ::testing::TestWithParam<std::tuple<size_t, uint64_t>> {};

TEST_P(PersistSourceTest, OutputEqualsTheModelAtEveryTimeWhileAppendsAndCompactionGoOn) {
  const auto [workers, seed] = GetParam();
  std::mt19937_64 rng(seed * 7919 + workers);
  persist::PersistConfig persist_config;
  persist_config.part_target_bytes = 256;  // Many parts per batch, spread over the workers.
  persist_config.maintenance_batch_threshold = 4;
  const auto location = fresh_location("model");
  std::shared_ptr<persist::PersistClient> client =
      persist::PersistClient::open(location, persist_config).value();
  const std::string shard = "history";

  const std::vector<Appended> history = random_history(rng, 60);
  const size_t before = 20;  // Batches appended before the dataflow starts.
  auto writer = client->open_writer(shard).value();
  auto append = [&](const Appended& batch) {
    auto result =
        writer.compare_and_append(batch.updates, Frontier(batch.lower), Frontier(batch.upper));
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_TRUE(result->is_appended());
  };
  for (size_t b = 0; b < before; ++b) append(history[b]);
  const Time as_of = rng() % history[before - 1].upper;
  const Time until = history.back().upper;

  std::atomic<bool> stop{false};
  std::atomic<int> maintenance_errors{0};
  // Compaction and GC all the while: they advance times to the since and remove replaced parts,
  // so a hold that passed what the dataflow still reads shows as wrong times or a failed read.
  std::thread maintainer([&] {
    while (!stop) {
      absl::Status s = client->maintain(shard);
      if (!s.ok() && s.code() != absl::StatusCode::kUnavailable) maintenance_errors++;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  std::thread appender([&] {
    for (size_t b = before; b < history.size(); ++b) {
      append(history[b]);
      std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 4));
    }
  });

  Recorded recorded;
  absl::Status run = testing::run_workers(workers, [&](Worker& worker) {
    worker.dataflow<Time>([&](Scope<Time>& scope) {
      PersistSourceConfig config;
      config.shard = shard;
      config.client = client;
      config.as_of = as_of;
      config.until = until;
      config.poll = std::chrono::milliseconds(2);
      config.hold_interval = std::chrono::milliseconds(0);
      auto streams = persist_source(scope, config);
      record(streams.updates, recorded, false);
      record(streams.errors, recorded, true);
    });
  });
  appender.join();
  stop = true;
  maintainer.join();
  ASSERT_TRUE(run.ok()) << run;
  EXPECT_EQ(maintenance_errors.load(), 0);
  EXPECT_EQ(recorded.early.load(), 0) << "records arrived at a time their frontier had passed";

  std::vector<std::tuple<Time, std::string, int64_t>> model_updates, model_errors;
  for (const Appended& batch : history) {
    for (const auto& u : batch.updates) {
      (u.data.starts_with("!error: ") ? model_errors : model_updates)
          .emplace_back(u.time, u.data, u.diff);
    }
  }
  weir::MutexLock lock(recorded.mu);
  for (const auto& [time, data, diff] : recorded.updates) {
    ASSERT_GE(time, as_of) << data;
    ASSERT_LT(time, until) << data;
  }
  for (Time t = as_of; t < until; ++t) {
    ASSERT_EQ(accumulate_at(recorded.updates, t), accumulate_at(model_updates, t))
        << "updates at time " << t << " (as_of " << as_of << ")";
    ASSERT_EQ(accumulate_at(recorded.errors, t), accumulate_at(model_errors, t))
        << "errors at time " << t << " (as_of " << as_of << ")";
  }
  // The reader is gone, and its hold did not pass what it read.
  const persist::ShardDescription d = client->describe(shard).value();
  EXPECT_TRUE(d.leased_readers.empty());
  EXPECT_TRUE(d.since.less_equal(until - 1)) << d.since.to_string();
  (void)writer.expire();
}

INSTANTIATE_TEST_SUITE_P(WorkersAndSeeds, PersistSourceTest,
                         ::testing::Combine(::testing::Values(1, 2, 4),
                                            ::testing::Values(1, 2, 3, 4)));

TEST(PersistSourceErrorsTest, AnAsOfBeforeTheSinceFailsNamingTheShard) {
  const auto location = fresh_location("since");
  std::shared_ptr<persist::PersistClient> client = persist::PersistClient::open(location).value();
  auto writer = client->open_writer("compacted").value();
  const std::vector<persist::Update> updates = {{"a", 0, 1}, {"b", 3, 1}};
  ASSERT_TRUE(writer.compare_and_append(updates, Frontier(0), Frontier(5)).ok());
  // A critical hold moved to 4 is the shard's only reader: the since moves to 4.
  auto hold = client->open_critical_since("compacted", persist::CriticalReaderId::random()).value();
  ASSERT_TRUE(hold.compare_and_downgrade_since(0, 1, Frontier(4)).ok());
  absl::Status run = testing::run_workers(1, [&](Worker& worker) {
    worker.dataflow<Time>([&](Scope<Time>& scope) {
      PersistSourceConfig config;
      config.shard = "compacted";
      config.client = client;
      config.as_of = 2;
      persist_source(scope, config);
    });
  });
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.message().find("\"compacted\""), std::string::npos) << run;
  EXPECT_NE(run.message().find("since"), std::string::npos) << run;
  (void)writer.expire();
}

}  // namespace
}  // namespace weir::sources

// ---- Adversarial review (issue 17): reproductions. ----
namespace weir::sources {
namespace {

// Runs persist_source on `workers` workers with `config` (client and shard set by the caller);
// returns the execution's status.
absl::Status read_all(size_t workers, PersistSourceConfig config, Recorded& recorded) {
  return testing::run_workers(workers, [&](Worker& worker) {
    worker.dataflow<Time>([&](Scope<Time>& scope) {
      auto streams = persist_source(scope, config);
      record(streams.updates, recorded, false);
      record(streams.errors, recorded, true);
    });
  });
}

// A batch whose upper is the empty frontier holds time UINT64_MAX: the listen must read it before
// the output frontier becomes empty.
TEST(PersistSourceReviewTest, AnUpdateAtTheLastTimeOfASealedShardIsRead) {
  std::shared_ptr<persist::PersistClient> client =
      persist::PersistClient::open(fresh_location("max")).value();
  auto writer = client->open_writer("sealed").value();
  const std::vector<persist::Update> first = {{"early", 5, 1}};
  ASSERT_TRUE(writer.compare_and_append(first, Frontier(0), Frontier(UINT64_MAX))->is_appended());
  const std::vector<persist::Update> last = {{"late", UINT64_MAX, 1}};
  auto sealed = writer.compare_and_append(last, Frontier(UINT64_MAX), Frontier::empty());
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  ASSERT_TRUE(sealed->is_appended());
  // persist itself has it: a snapshot at UINT64_MAX holds both rows.
  auto reader = client->open_reader("sealed").value();
  auto all = reader.snapshot(UINT64_MAX);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 2u);
  (void)reader.expire();

  Recorded recorded;
  PersistSourceConfig config;
  config.shard = "sealed";
  config.client = client;
  config.as_of = 5;
  config.poll = std::chrono::milliseconds(2);
  ASSERT_TRUE(read_all(1, config, recorded).ok());
  weir::MutexLock lock(recorded.mu);
  EXPECT_EQ(accumulate_at(recorded.updates, UINT64_MAX),
            (std::map<std::string, int64_t>{{"early", 1}, {"late", 1}}))
      << "the output frontier became empty without the update at UINT64_MAX";
  (void)writer.expire();
}

// The leader waits for news from the client's relay (persist/relay.h), not for its poll: with a
// poll of 30 s, appends made by another client of the process are read long before the first
// poll. Both the snapshot's wait (the upper below as_of) and the listen's are woken so.
TEST(PersistSourceRelayTest, AppendsWakeTheLeaderBeforeItsPoll) {
  const persist::PersistLocation location = fresh_location("relay");
  std::shared_ptr<persist::PersistClient> client = persist::PersistClient::open(location).value();
  std::shared_ptr<persist::PersistClient> writer_client =
      persist::PersistClient::open(location).value();
  auto writer = writer_client->open_writer("woken").value();
  ASSERT_TRUE(writer.compare_and_append(std::vector<persist::Update>{}, Frontier(0), Frontier(1))
                  ->is_appended());
  PersistSourceConfig config;
  config.shard = "woken";
  config.client = client;
  config.as_of = 2;  // Not readable yet: the leader waits for the upper to pass it.
  config.until = 5;
  config.poll = std::chrono::seconds(30);
  config.relay_poll = std::chrono::seconds(30);
  const auto start = std::chrono::steady_clock::now();
  std::thread appends([&] {
    Time upper = 1;
    for (Time time : {2, 4}) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const std::vector<persist::Update> row = {{"row " + std::to_string(time), time, 1}};
      ASSERT_TRUE(
          writer.compare_and_append(row, Frontier(upper), Frontier(time + 1))->is_appended());
      upper = time + 1;
    }
  });
  Recorded recorded;
  const absl::Status run = read_all(1, config, recorded);
  appends.join();
  ASSERT_TRUE(run.ok()) << run;
  // Ended by news: a poll would have taken 30 s (a margin of 15 s, not a speed measurement).
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(15));
  weir::MutexLock lock(recorded.mu);
  EXPECT_EQ(accumulate_at(recorded.updates, 4),
            (std::map<std::string, int64_t>{{"row 2", 1}, {"row 4", 1}}));
  (void)writer.expire();
}

// as_of = UINT64_MAX is readable on a sealed shard (`weir subscribe` picks it by default there).
TEST(PersistSourceReviewTest, ASnapshotAtTheLastTimeOfASealedShardIsRead) {
  std::shared_ptr<persist::PersistClient> client =
      persist::PersistClient::open(fresh_location("max-as-of")).value();
  auto writer = client->open_writer("sealed").value();
  const std::vector<persist::Update> rows = {{"a", 1, 1}, {"b", 3, 1}};
  ASSERT_TRUE(writer.compare_and_append(rows, Frontier(0), Frontier::empty())->is_appended());
  Recorded recorded;
  PersistSourceConfig config;
  config.shard = "sealed";
  config.client = client;
  config.as_of = UINT64_MAX;
  ASSERT_TRUE(read_all(1, config, recorded).ok());
  weir::MutexLock lock(recorded.mu);
  EXPECT_EQ(recorded.updates.size(), 2u) << "the snapshot at UINT64_MAX was not read";
  (void)writer.expire();
}

// The leader's reader must keep its lease while it waits for the upper to pass as_of (its only
// call then is fetch_recent_upper, which does not renew it).
TEST(PersistSourceReviewTest, TheLeaderKeepsItsLeaseWhileWaitingForTheSnapshot) {
  persist::PersistConfig persist_config;
  persist_config.reader_lease = absl::Milliseconds(400);
  std::shared_ptr<persist::PersistClient> client =
      persist::PersistClient::open(fresh_location("lease"), persist_config).value();
  auto writer = client->open_writer("slow").value();
  const std::vector<persist::Update> rows = {{"a", 1, 1}};
  ASSERT_TRUE(writer.compare_and_append(rows, Frontier(0), Frontier(5))->is_appended());
  std::atomic<bool> stop{false};
  std::thread later([&] {
    // GC meanwhile (as `weir ingest`'s maintenance does), then the upper passes as_of.
    for (int i = 0; i < 30 && !stop; ++i) {
      (void)client->gc("slow");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const std::vector<persist::Update> more = {{"b", 12, 1}};
    (void)writer.compare_and_append(more, Frontier(5), Frontier(20));
  });
  Recorded recorded;
  PersistSourceConfig config;
  config.shard = "slow";
  config.client = client;
  config.as_of = 15;
  config.until = 16;
  absl::Status run = read_all(1, config, recorded);
  stop = true;
  later.join();
  EXPECT_TRUE(run.ok()) << run;
  (void)writer.expire();
}

// A dataflow dropped (SIGINT in `weir subscribe`) while the leader opens its reader leaves no
// leased reader behind.
TEST(PersistSourceReviewTest, ADropWhileTheReaderOpensLeavesNoReader) {
  auto blob = std::shared_ptr<persist::Blob>(persist::Blob::open("mem://drop-blob").value());
  auto inner =
      std::shared_ptr<persist::Consensus>(persist::Consensus::open("mem://drop-consensus").value());
  auto slow = std::make_shared<persist::FaultyConsensus>(inner, persist::FaultConfig{});
  std::shared_ptr<persist::PersistClient> client = persist::PersistClient::create(blob, slow);
  {
    auto writer = client->open_writer("dropped").value();
    const std::vector<persist::Update> rows = {{"a", 1, 1}};
    ASSERT_TRUE(writer.compare_and_append(rows, Frontier(0), Frontier(5))->is_appended());
    (void)writer.expire();
  }
  // Every consensus call now takes up to 300 ms: the open is in flight when the drop comes.
  slow->configure({.delay_rate = 1, .max_delay = std::chrono::milliseconds(300), .seed = 1});
  absl::Status run = testing::run_workers(1, [&](Worker& worker) {
    const size_t index = worker.next_dataflow_index();
    worker.dataflow<Time>([&](Scope<Time>& scope) {
      PersistSourceConfig config;
      config.shard = "dropped";
      config.client = client;
      persist_source(scope, config);
    });
    for (int i = 0; i < 5; ++i) worker.step_or_park(std::chrono::milliseconds(1));
    worker.drop_dataflow(index);
  });
  ASSERT_TRUE(run.ok()) << run;
  slow->configure({});
  std::this_thread::sleep_for(std::chrono::seconds(2));  // The abandoned open returns.
  const persist::ShardDescription d = client->describe("dropped").value();
  EXPECT_TRUE(d.leased_readers.empty()) << d.leased_readers.size() << " leased reader(s) leaked";
}

// Hostile bytes: a part description from the wire with sizes no part has is refused. (One that
// names another shard, or times before the capability it came with, is refused by the fetch
// operator, which knows its shard and its capability: an error row, not a fetch.)
TEST(PersistSourceReviewTest, APartDescriptionWithImpossibleSizesIsRefused) {
  std::shared_ptr<persist::PersistClient> client =
      persist::PersistClient::open(fresh_location("hostile")).value();
  auto b = client->open_writer("b").value();
  const std::vector<persist::Update> rows_b = {{"secret of b", 1, 1}};
  ASSERT_TRUE(b.compare_and_append(rows_b, Frontier(0), Frontier(5))->is_appended());
  auto reader_b = client->open_reader("b").value();
  auto parts = reader_b.snapshot_parts(4).value();
  ASSERT_EQ(parts.parts.size(), 1u);
  ASSERT_TRUE(persist::LeasedPart::decode(parts.parts[0].encode()).ok());
  persist::LeasedPart crafted = parts.parts[0];
  crafted.part.encoded_bytes = 0;  // Would skip the blob's size check.
  EXPECT_FALSE(persist::LeasedPart::decode(crafted.encode()).ok());
  crafted = parts.parts[0];
  crafted.part.num_updates = UINT64_MAX / 2;  // More updates than its update bytes can hold.
  auto huge = persist::LeasedPart::decode(crafted.encode());
  EXPECT_FALSE(huge.ok()) << "num_updates " << crafted.part.num_updates << " accepted";
  (void)reader_b.expire();
  (void)b.expire();
}

// Two incarnations of a critical hold's owner start at once: the newer one (epoch 6) must win
// whichever order their take_overs land in.
TEST(PersistSourceReviewTest, TheNewerIncarnationWinsARaceOfTakeOvers) {
  int newer_fenced = 0, older_fenced = 0;
  for (int round = 0; round < 20 && newer_fenced == 0; ++round) {
    const std::string suffix = std::to_string(round);
    auto blob =
        std::shared_ptr<persist::Blob>(persist::Blob::open("mem://race-blob-" + suffix).value());
    auto inner = std::shared_ptr<persist::Consensus>(
        persist::Consensus::open("mem://race-consensus-" + suffix).value());
    auto slow = std::make_shared<persist::FaultyConsensus>(inner, persist::FaultConfig{});
    std::shared_ptr<persist::PersistClient> client = persist::PersistClient::create(blob, slow);
    const persist::CriticalReaderId id = persist::CriticalReaderId::random();
    {
      auto writer = client->open_writer("held").value();
      const std::vector<persist::Update> rows = {{"a", 1, 1}};
      ASSERT_TRUE(writer.compare_and_append(rows, Frontier(0), Frontier(5))->is_appended());
      (void)writer.expire();
      ASSERT_TRUE(client->open_critical_since("held", id).ok());
    }
    slow->configure({.delay_rate = 1,
                     .max_delay = std::chrono::milliseconds(30),
                     .seed = static_cast<uint64_t>(round)});
    auto incarnation = [&](uint64_t epoch) {
      return testing::run_workers(1, [&](Worker& worker) {
        worker.dataflow<Time>([&](Scope<Time>& scope) {
          PersistSourceConfig config;
          config.shard = "held";
          config.client = client;
          config.as_of = 4;
          config.until = 5;
          config.critical_reader = id;
          config.hold_epoch = epoch;
          persist_source(scope, config);
        });
      });
    };
    absl::Status older, newer;
    std::thread a([&] { older = incarnation(5); });
    std::thread b([&] { newer = incarnation(6); });
    a.join();
    b.join();
    if (!newer.ok()) ++newer_fenced;
    if (!older.ok()) ++older_fenced;
    if (!newer.ok())
      ADD_FAILURE() << "round " << round << ": the newer incarnation failed: " << newer;
  }
  std::cerr << "older fenced " << older_fenced << ", newer fenced " << newer_fenced << "\n";
}

// A consumer that resumes from what it made durable (a maintained view: as_of = its output's
// upper - 1) relies on the critical hold to keep that time readable. The hold follows the fetch
// output instead, so a consumer behind the fetches cannot restart once compaction ran.
TEST(PersistSourceReviewTest, TheCriticalHoldKeepsWhatASlowerConsumerNeedsToResume) {
  std::shared_ptr<persist::PersistClient> client =
      persist::PersistClient::open(fresh_location("resume")).value();
  auto writer = client->open_writer("in").value();
  for (Time t = 0; t < 20; ++t) {
    const std::vector<persist::Update> rows = {{"k" + std::to_string(t), t, 1}};
    ASSERT_TRUE(writer.compare_and_append(rows, Frontier(t), Frontier(t + 1))->is_appended());
  }
  const persist::CriticalReaderId id = persist::CriticalReaderId::random();
  ASSERT_TRUE(client->open_critical_since("in", id).ok());
  // First run: reads up to 20; its consumer made only the times before 8 durable before it
  // crashed (the run ends, as a crash would, with the consumer behind).
  Recorded first;
  PersistSourceConfig config;
  config.shard = "in";
  config.client = client;
  config.as_of = 0;
  config.until = 20;
  config.poll = std::chrono::milliseconds(2);
  config.hold_interval = std::chrono::milliseconds(0);
  config.critical_reader = id;
  config.hold_epoch = 1;
  auto durable = std::make_shared<std::atomic<uint64_t>>(8);
  config.resume_frontier = durable;
  ASSERT_TRUE(read_all(1, config, first).ok());
  ASSERT_TRUE(client->compact("in").ok());
  const persist::ShardDescription d = client->describe("in").value();
  std::cerr << "since after the first run: " << d.since.to_string() << "\n";
  // Restart as of the consumer's durable frontier - 1.
  Recorded second;
  config.as_of = 7;
  config.hold_epoch = 2;
  absl::Status resumed = read_all(1, config, second);
  EXPECT_TRUE(resumed.ok()) << resumed;
  (void)writer.expire();
}

// A consensus outage of half a second (a PostgreSQL restart) while the source follows the shard.
TEST(PersistSourceReviewTest, AShortConsensusOutageIsWaitedOut) {
  auto blob = std::shared_ptr<persist::Blob>(persist::Blob::open("mem://outage-blob").value());
  auto inner = std::shared_ptr<persist::Consensus>(
      persist::Consensus::open("mem://outage-consensus").value());
  auto faulty = std::make_shared<persist::FaultyConsensus>(inner, persist::FaultConfig{});
  std::shared_ptr<persist::PersistClient> source_client =
      persist::PersistClient::create(blob, faulty);
  std::shared_ptr<persist::PersistClient> writer_client =
      persist::PersistClient::open({"mem://outage-blob", "mem://outage-consensus"}).value();
  auto writer = writer_client->open_writer("followed").value();
  auto append = [&](Time t) {
    const std::vector<persist::Update> rows = {{"k" + std::to_string(t), t, 1}};
    (void)writer.compare_and_append(rows, Frontier(t), Frontier(t + 1));
  };
  for (Time t = 0; t < 5; ++t) append(t);
  std::thread appender([&] {
    for (Time t = 5; t < 30; ++t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
      if (t == 10) faulty->configure({.fail_rate = 1});
      if (t == 22) faulty->configure({});
      append(t);
    }
  });
  Recorded recorded;
  PersistSourceConfig config;
  config.shard = "followed";
  config.client = source_client;
  config.as_of = 0;
  config.until = 30;
  config.poll = std::chrono::milliseconds(5);
  absl::Status run = read_all(1, config, recorded);
  appender.join();
  EXPECT_TRUE(run.ok()) << run;
  (void)writer.expire();
}

}  // namespace
}  // namespace weir::sources
