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
    if (time <= t && (sums[data] += diff) == 0) sums.erase(data);
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
