// Property tests of the collection operators: random histories of updates (with retractions,
// multiplicities, negative accumulations and updates that cancel within a time), fed to 1, 2 and
// 4 workers, several seeds. The output, consolidated per time, must accumulate at every time t to
// the operator applied to the input accumulated at t, computed naively; and nothing may arrive at
// a time its consumer's frontier had passed, so what had arrived at time <= t when t completed is
// all there is.

#include "weir/collections/collections.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "testing/harness.h"
#include <gtest/gtest.h>

#include "weir/weir.h"

namespace weir::collections {
namespace {

using T = uint64_t;
using KV = std::pair<uint64_t, uint64_t>;

// An accumulated collection: every record with a nonzero multiplicity.
template <class D>
using Rows = std::map<D, int64_t>;

template <class D>
void add(Rows<D>& rows, const D& record, int64_t diff) {
  if (diff == 0) return;
  auto [it, inserted] = rows.try_emplace(record, 0);
  it->second += diff;
  if (it->second == 0) rows.erase(it);
}

template <class D>
std::string show(const Rows<D>& rows) {
  std::string text;
  for (const auto& [record, diff] : rows) {
    text += ::testing::PrintToString(record) + " x" + std::to_string(diff) + "; ";
  }
  return text.empty() ? "(empty)" : text;
}

// Updates of one collection with their times, in time order.
template <class D>
using History = std::vector<std::pair<T, Update<D>>>;

// A random history over about 60 times (some skipped), of records from `make(rng)`: insertions
// of 1 to 3 copies, retractions of all or one copy of a present record, retractions of absent
// records (negative accumulations), and pairs that cancel within the time.
template <class D, class Make>
History<D> random_history(uint64_t seed, Make make) {
  std::mt19937_64 rng(seed);
  auto below = [&](uint64_t n) { return static_cast<int64_t>(rng() % n); };
  History<D> history;
  Rows<D> present;
  T time = 0;
  for (int step = 0; step < 60; ++step) {
    time += static_cast<T>(below(3));
    const int64_t updates = below(7);
    for (int64_t u = 0; u < updates; ++u) {
      const int64_t kind = below(10);
      if (kind < 3 && !present.empty()) {
        auto it = present.begin();
        std::advance(it, below(present.size()));
        const int64_t diff = below(2) == 0 ? -it->second : -1;
        history.push_back({time, {it->first, diff}});
        add(present, D(it->first), diff);
      } else if (kind == 3) {
        const D record = make(rng);
        const int64_t copies = 1 + below(3);
        history.push_back({time, {record, copies}});
        history.push_back({time, {record, -copies}});
      } else if (kind == 4) {
        const D record = make(rng);
        const int64_t diff = -1 - below(2);
        history.push_back({time, {record, diff}});
        add(present, record, diff);
      } else {
        const D record = make(rng);
        const int64_t diff = 1 + below(3);
        history.push_back({time, {record, diff}});
        add(present, record, diff);
      }
    }
  }
  return history;
}

uint64_t small_number(std::mt19937_64& rng) { return rng() % 12; }
KV small_pair(std::mt19937_64& rng) { return {rng() % 5, rng() % 6}; }

template <class D>
Rows<D> accumulated(const History<D>& history, T time) {
  Rows<D> rows;
  for (const auto& [t, update] : history) {
    if (t <= time) add(rows, update.first, update.second);
  }
  return rows;
}

struct Param {
  size_t workers;
  uint64_t seed;
};

class CollectionsTest : public ::testing::TestWithParam<Param> {
 protected:
  size_t workers() const { return GetParam().workers; }
  uint64_t seed() const { return GetParam().seed; }

  // Feeds `histories` (each update to a random worker) to the collections `build` combines, and
  // checks the output at every time against `expect(accumulated inputs)`. `consolidated`: the
  // output must also have, per time, each record at most once across workers, never with diff 0.
  template <class D, class Build, class Expect>
  void check(const std::vector<History<D>>& histories, Build build, Expect expect,
             bool consolidated) {
    using Out = typename std::invoke_result_t<Build&, std::vector<Collection<T, D>>&>::Data;
    struct Captured {
      std::vector<std::pair<T, Update<Out>>> seen;
      std::vector<T> late;  // Times of batches that arrived behind the sink's frontier.
      bool done = false;
    };
    // Every update goes to one worker, chosen at random.
    std::vector<std::vector<History<D>>> shares(workers(),
                                                std::vector<History<D>>(histories.size()));
    std::mt19937_64 rng(seed() * 7919 + 1);
    std::set<T> times;
    for (size_t i = 0; i < histories.size(); ++i) {
      for (const auto& entry : histories[i]) {
        shares[rng() % workers()][i].push_back(entry);
        times.insert(entry.first);
      }
    }
    testing::Watchdog watchdog("collections test");
    auto results = testing::run_workers(workers(), [&](Worker& worker) {
      auto captured = std::make_shared<Captured>();
      ProbeHandle<T> probe;
      std::vector<InputHandle<T, Update<D>>> inputs;
      worker.dataflow<T>([&](Scope<T>& scope) {
        std::vector<Collection<T, D>> collections;
        for (size_t i = 0; i < histories.size(); ++i) {
          auto [input, collection] = new_collection<D>(scope);
          inputs.push_back(std::move(input));
          collections.push_back(collection);
        }
        auto output = build(collections);
        output.stream() | probe_with(probe);
        sink(output.stream(), Pipeline{}, "Capture", [captured](auto& input) {
          input.for_each([&](const InputCapability<T>& cap, std::vector<Update<Out>>& batch) {
            if (!input.frontier().less_equal(cap.time())) captured->late.push_back(cap.time());
            for (auto& update : batch) captured->seen.emplace_back(cap.time(), std::move(update));
          });
          if (input.frontier().is_empty()) captured->done = true;
        });
      });
      const auto& mine = shares[worker.index()];
      std::vector<size_t> next(mine.size(), 0);
      std::mt19937_64 steps(seed() * 31 + worker.index());
      std::optional<T> previous;
      for (T time : times) {
        for (size_t i = 0; i < mine.size(); ++i) {
          if (inputs[i].time() < time) inputs[i].advance_to(time);
          for (; next[i] < mine[i].size() && mine[i][next[i]].first == time; ++next[i]) {
            inputs[i].send(mine[i][next[i]].second);
          }
        }
        // Let the dataflow run part of the way now and then, and sometimes wait for the
        // previous time to complete: outputs must come out while the inputs are still open.
        for (uint64_t n = steps() % 3; n > 0; --n) worker.step();
        if (previous && steps() % 4 == 0) {
          testing::step_until(worker, [&] { return !probe.less_equal(*previous); });
        }
        previous = time;
      }
      for (auto& input : inputs) input.close();
      testing::step_until(worker, [&] { return captured->done; });
      return std::move(*captured);
    });
    ASSERT_TRUE(results.ok()) << results.status();

    std::map<T, std::vector<Update<Out>>> outputs;  // Per time, from every worker.
    for (size_t w = 0; w < workers(); ++w) {
      const Captured& captured = (*results)[w];
      EXPECT_TRUE(captured.late.empty())
          << "worker " << w << " got output at time " << captured.late.front()
          << " after its frontier had passed it";
      for (const auto& [time, update] : captured.seen) outputs[time].push_back(update);
    }
    if (consolidated) {
      for (const auto& [time, updates] : outputs) {
        std::set<Out> records;
        for (const auto& [record, diff] : updates) {
          EXPECT_NE(diff, 0) << "a zero diff at time " << time;
          EXPECT_TRUE(records.insert(record).second)
              << ::testing::PrintToString(record) << " twice at time " << time;
        }
      }
    }
    for (const auto& [time, updates] : outputs) times.insert(time);
    std::vector<Rows<D>> inputs_at(histories.size());
    std::vector<size_t> next(histories.size(), 0);
    Rows<Out> output_at;
    size_t nonempty = 0;  // Times at which the expected output has rows: the test is not vacuous.
    auto output_it = outputs.begin();
    for (T time : times) {
      for (size_t i = 0; i < histories.size(); ++i) {
        for (; next[i] < histories[i].size() && histories[i][next[i]].first == time; ++next[i]) {
          const auto& update = histories[i][next[i]].second;
          add(inputs_at[i], update.first, update.second);
        }
      }
      for (; output_it != outputs.end() && output_it->first <= time; ++output_it) {
        for (const auto& [record, diff] : output_it->second) add(output_at, record, diff);
      }
      const Rows<Out> expected = expect(inputs_at);
      nonempty += expected.empty() ? 0 : 1;
      ASSERT_EQ(output_at, expected) << "at time " << time << "\n  got:      " << show(output_at)
                                     << "\n  expected: " << show(expected);
    }
    EXPECT_GT(nonempty, times.size() / 2) << "the history leaves the expected output mostly empty";
  }

  template <class D, class Make>
  std::vector<History<D>> random_histories(size_t count, Make make) {
    std::vector<History<D>> out;
    for (size_t i = 0; i < count; ++i) out.push_back(random_history<D>(seed() * 1000 + i, make));
    return out;
  }
};

TEST_P(CollectionsTest, ConsolidateCancelsEachTimesUpdatesAcrossWorkers) {
  check(
      random_histories<uint64_t>(1, small_number), [](auto& in) { return in[0] | consolidate(); },
      [](const auto& in) { return in[0]; }, true);
}

TEST_P(CollectionsTest, NegateAndConcatAddUpAsMultisets) {
  check(
      random_histories<uint64_t>(2, small_number),
      [](auto& in) { return concat(in[0], in[1] | negate()) | concat(in[0]); },
      [](const auto& in) {
        Rows<uint64_t> out;
        for (const auto& [x, m] : in[0]) add(out, x, 2 * m);
        for (const auto& [x, m] : in[1]) add(out, x, -m);
        return out;
      },
      false);
}

TEST_P(CollectionsTest, MapFilterAndFlatMapKeepEachRecordsDiff) {
  check(
      random_histories<uint64_t>(1, small_number),
      [](auto& in) {
        return in[0] | filter([](const uint64_t& x) { return x % 3 != 0; }) |
               map([](uint64_t x) { return x / 2; }) | flat_map([](uint64_t x) {
                 return std::vector<uint64_t>{x, x + 100, x};
               });
      },
      [](const auto& in) {
        Rows<uint64_t> out;
        for (const auto& [x, m] : in[0]) {
          if (x % 3 == 0) continue;
          add(out, x / 2, 2 * m);
          add(out, x / 2 + 100, m);
        }
        return out;
      },
      false);
}

TEST_P(CollectionsTest, CountRetractsTheOldCountAndAssertsTheNew) {
  check(
      random_histories<uint64_t>(1, small_number), [](auto& in) { return in[0] | count(); },
      [](const auto& in) {
        Rows<std::pair<uint64_t, int64_t>> out;
        for (const auto& [x, m] : in[0]) add(out, {x, m}, 1);
        return out;
      },
      true);
}

TEST_P(CollectionsTest, DistinctKeepsEachPositiveRecordOnce) {
  check(
      random_histories<KV>(1, small_pair), [](auto& in) { return in[0] | distinct(); },
      [](const auto& in) {
        Rows<KV> out;
        for (const auto& [x, m] : in[0]) {
          if (m > 0) add(out, x, 1);
        }
        return out;
      },
      true);
}

// Per key: the smallest and the largest value (one row of multiplicity 2 when they are equal),
// and 1000 + the sum of the values with their multiplicities.
std::vector<Update<uint64_t>> min_max_sum(const uint64_t&,
                                          const std::vector<Update<uint64_t>>& in) {
  uint64_t sum = 0;
  for (const auto& [v, m] : in) sum += v * static_cast<uint64_t>(m);
  return {{in.front().first, 1}, {in.back().first, 1}, {1000 + sum, 1}};
}

template <class F>
Rows<std::pair<uint64_t, uint64_t>> naive_reduce(const Rows<KV>& in, F f) {
  std::map<uint64_t, std::vector<Update<uint64_t>>> groups;
  for (const auto& [kv, m] : in) {
    if (m > 0) groups[kv.first].emplace_back(kv.second, m);  // Sorted by value.
  }
  Rows<std::pair<uint64_t, uint64_t>> out;
  for (const auto& [k, values] : groups) {
    for (const auto& [r, m] : f(k, values)) add(out, {k, r}, m);
  }
  return out;
}

TEST_P(CollectionsTest, ReduceEmitsTheNewOutputMinusTheOld) {
  check(
      random_histories<KV>(1, small_pair), [](auto& in) { return in[0] | reduce(min_max_sum); },
      [](const auto& in) { return naive_reduce(in[0], min_max_sum); }, true);
}

Rows<std::pair<uint64_t, KV>> naive_join(const Rows<KV>& left, const Rows<KV>& right) {
  Rows<std::pair<uint64_t, KV>> out;
  for (const auto& [l, ml] : left) {
    for (const auto& [r, mr] : right) {
      if (l.first == r.first) add(out, {l.first, {l.second, r.second}}, ml * mr);
    }
  }
  return out;
}

TEST_P(CollectionsTest, JoinMultipliesMultiplicitiesAtEveryTime) {
  check(
      random_histories<KV>(2, small_pair), [](auto& in) { return in[0] | join(in[1]); },
      [](const auto& in) { return naive_join(in[0], in[1]); }, true);
}

// A maintained view of several operators: bids (auction, price) joined with auctions (auction,
// seller); each seller's highest price; how many sellers have each highest price modulo 4.
TEST_P(CollectionsTest, ChainedOperatorsMaintainAView) {
  auto highest = [](const uint64_t&, const std::vector<Update<uint64_t>>& prices) {
    return std::vector<Update<uint64_t>>{{prices.back().first, 1}};
  };
  check(
      random_histories<KV>(2, small_pair),
      [highest](auto& in) {
        return join(in[0], in[1]) | map([](std::pair<uint64_t, KV> joined) {
                 return KV{joined.second.second, joined.second.first};  // (seller, price)
               }) |
               reduce(highest) | map([](KV seller_price) { return seller_price.second % 4; }) |
               count();
      },
      [highest](const auto& in) {
        Rows<KV> by_seller;
        for (const auto& [row, m] : naive_join(in[0], in[1])) {
          add(by_seller, {row.second.second, row.second.first}, m);
        }
        Rows<uint64_t> residues;
        for (const auto& [row, m] : naive_reduce(by_seller, highest)) {
          add(residues, row.second % 4, m);
        }
        Rows<std::pair<uint64_t, int64_t>> out;
        for (const auto& [x, m] : residues) add(out, {x, m}, 1);
        return out;
      },
      true);
}

std::vector<Param> params() {
  std::vector<Param> out;
  for (size_t workers : {1, 2, 4}) {
    for (uint64_t seed : {1, 2, 3, 4}) out.push_back({workers, seed});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Random, CollectionsTest, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<Param>& param_info) {
                           return "Workers" + std::to_string(param_info.param.workers) + "Seed" +
                                  std::to_string(param_info.param.seed);
                         });

TEST(CollectionTest, AsCollectionGivesEachRecordDiffOne) {
  auto results = testing::run_workers(2, [](Worker& worker) {
    auto counts = std::make_shared<Rows<std::pair<uint64_t, int64_t>>>();
    worker.dataflow<T>([&](Scope<T>& scope) {
      auto records = to_stream(scope, std::vector<uint64_t>{1, 2, 2, 3, 3, 3});
      auto counted = records | as_collection() | count();
      EXPECT_EQ(&counted.scope(), &scope);
      counted.stream() | inspect([counts](const Update<std::pair<uint64_t, int64_t>>& update) {
        add(*counts, update.first, update.second);
      });
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    return *counts;
  });
  ASSERT_TRUE(results.ok()) << results.status();
  Rows<std::pair<uint64_t, int64_t>> all;
  for (const auto& rows : *results) {
    for (const auto& [row, m] : rows) add(all, row, m);
  }
  // Both workers send the records: twice the counts.
  EXPECT_EQ(all, (Rows<std::pair<uint64_t, int64_t>>{{{1, 2}, 1}, {{2, 4}, 1}, {{3, 6}, 1}}));
}

TEST(CollectionTest, OnlyTotallyOrderedTimestampsMakeCollections) {
  static_assert(TotallyOrderedTimestamp<uint64_t>);
  static_assert(TotallyOrderedTimestamp<uint32_t>);
  static_assert(!TotallyOrderedTimestamp<Product<uint64_t, uint64_t>>);
}

// The hashes route keys to workers in every process of a cluster: they must not change between
// builds, platforms or standard libraries. These values are the contract.
TEST(StableHashTest, GivesTheSameValuesEverywhere) {
  EXPECT_EQ(StableHash<uint64_t>{}(0), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(StableHash<uint64_t>{}(42), 0xbdd732262feb6e95ULL);
  EXPECT_EQ(StableHash<std::string>{}("auction"), 0x6a2fd036acb8c657ULL);
  EXPECT_EQ((StableHash<std::pair<uint64_t, std::string>>{}({7, "x"})), 0x47afec3133d56ee4ULL);
  // Equal values of different integer types hash alike; so do a string and its view.
  EXPECT_EQ(StableHash<int32_t>{}(-1), StableHash<int64_t>{}(-1));
  EXPECT_EQ(StableHash<uint8_t>{}(200), StableHash<uint64_t>{}(200));
  EXPECT_EQ(StableHash<std::string_view>{}("bid"), StableHash<std::string>{}("bid"));
  EXPECT_EQ(StableHash<double>{}(-0.0), StableHash<double>{}(0.0));
  // A tuple hashes as hash_combine of its elements; the codec fallback covers other types.
  EXPECT_EQ((StableHash<std::tuple<uint64_t, std::string>>{}({7, "x"})),
            hash_combine(uint64_t{7}, std::string("x")));
  EXPECT_EQ(StableHash<std::vector<uint64_t>>{}({1, 2}),
            StableHash<std::vector<uint64_t>>{}({1, 2}));
  EXPECT_NE(StableHash<std::vector<uint64_t>>{}({1, 2}),
            StableHash<std::vector<uint64_t>>{}({2, 1}));
}

}  // namespace
}  // namespace weir::collections
