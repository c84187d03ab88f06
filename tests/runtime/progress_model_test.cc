// Randomized property tests of ChangeBatch and MutableAntichain against naive models: random
// interleavings of updates (with transiently negative counts), reads and drains, for totally
// ordered times and for Product<uint64_t, uint64_t> (a partial order). The models recompute
// everything from a std::map after every operation, so they are slow and obviously right.

#include <cstdint>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include "support/sanitizers.h"
#include <gtest/gtest.h>

#include "weir/progress/antichain.h"
#include "weir/progress/change_batch.h"
#include "weir/progress/location.h"
#include "weir/progress/timestamp.h"

namespace weir {
namespace {

using P = Product<uint64_t, uint64_t>;

// Random times drawn from a small range, so that updates collide, cancel and go negative.
template <class T>
struct TimeGen;
template <>
struct TimeGen<uint64_t> {
  uint64_t operator()(std::mt19937_64& rng, uint64_t range) const { return rng() % range; }
};
template <>
struct TimeGen<P> {
  P operator()(std::mt19937_64& rng, uint64_t range) const {
    const uint64_t side = range < 4 ? 2 : range / 4 + 1;
    return P{rng() % side, rng() % side};
  }
};
template <>
struct TimeGen<std::pair<Location, uint64_t>> {
  std::pair<Location, uint64_t> operator()(std::mt19937_64& rng, uint64_t range) const {
    const uint32_t node = static_cast<uint32_t>(rng() % 3);
    const uint32_t port = static_cast<uint32_t>(rng() % 2);
    const Location location =
        rng() % 2 ? Location(Source{node, port}) : Location(Target{node, port});
    return {location, rng() % (range / 4 + 1)};
  }
};

template <class T>
std::vector<std::pair<T, int64_t>> nonzero(const std::map<T, int64_t>& model) {
  std::vector<std::pair<T, int64_t>> out;
  for (const auto& [t, c] : model) {
    if (c != 0) out.emplace_back(t, c);
  }
  return out;
}

template <class T>
void check_change_batch(uint64_t seed) {
  using Updates = std::vector<std::pair<T, int64_t>>;
  std::mt19937_64 rng(seed);
  TimeGen<T> gen;
  // Alternate between few distinct times (heavy cancellation) and many (large prefixes), and
  // between random times and a time that mostly advances (appends after the prefix).
  const uint64_t range = std::vector<uint64_t>{2, 8, 64, 1000}[rng() % 4];
  const bool advancing = rng() % 2;
  ChangeBatch<T> batch, other;
  std::map<T, int64_t> model, other_model;
  uint64_t next = 0;
  for (int op = 0; op < 600; ++op) {
    const uint64_t r = rng() % 100;
    if (r < 70) {
      T time = gen(rng, range);
      if constexpr (std::is_same_v<T, uint64_t>) {
        if (advancing && rng() % 4 != 0) time = next++;
      }
      const int64_t diff = static_cast<int64_t>(rng() % 7) - 3;  // Zero included.
      batch.update(time, diff);
      model[time] += diff;
    } else if (r < 85) {
      auto got = batch.iter();
      const auto want = nonzero(model);
      ASSERT_EQ(Updates(got.begin(), got.end()), want) << "seed " << seed << " op " << op;
    } else if (r < 93) {
      ASSERT_EQ(batch.is_empty(), nonzero(model).empty()) << "seed " << seed << " op " << op;
    } else if (r < 96) {
      batch.drain_into(other);
      for (const auto& [t, c] : model) other_model[t] += c;
      model.clear();
      auto got = other.iter();
      ASSERT_EQ(Updates(got.begin(), got.end()), nonzero(other_model))
          << "seed " << seed << " op " << op;
    } else if (r < 98) {
      std::vector<std::pair<T, int64_t>> drained;
      batch.drain([&](const T& t, int64_t d) { drained.emplace_back(t, d); });
      ASSERT_EQ(drained, nonzero(model)) << "seed " << seed << " op " << op;
      model.clear();
      ASSERT_TRUE(batch.is_empty());
    } else {
      batch.clear();
      model.clear();
    }
    // The raw length stays within a constant factor of the distinct times ever held: memory is
    // bounded between reads.
    ASSERT_LE(batch.unstable_len(), 2 * model.size() + 33) << "seed " << seed << " op " << op;
  }
}

TEST(ChangeBatchModelTest, MatchesAMapForTotallyOrderedTimes) {
  for (uint64_t seed = 0; seed < testing::property_seeds(300); ++seed) {
    check_change_batch<uint64_t>(seed);
    if (HasFatalFailure()) return;
  }
}

TEST(ChangeBatchModelTest, MatchesAMapForProductTimes) {
  for (uint64_t seed = 0; seed < testing::property_seeds(300); ++seed) {
    check_change_batch<P>(seed);
    if (HasFatalFailure()) return;
  }
}

TEST(ChangeBatchModelTest, MatchesAMapForPointstamps) {
  for (uint64_t seed = 0; seed < testing::property_seeds(200); ++seed) {
    check_change_batch<std::pair<Location, uint64_t>>(seed);
    if (HasFatalFailure()) return;
  }
}

TEST(ChangeBatchTest, SmallTailAfterLargePrefixMergesInOrder) {
  ChangeBatch<uint64_t> batch;
  for (uint64_t t = 0; t < 1000; t += 2) batch.update(t, 1);
  ASSERT_EQ(batch.iter().size(), 500u);
  batch.update(501, 1);   // Inside the prefix's range: merged.
  batch.update(500, -1);  // Cancels an element of the prefix.
  batch.update(2000, 1);  // After it.
  auto u = batch.iter();
  ASSERT_EQ(u.size(), 501u);
  for (size_t i = 1; i < u.size(); ++i) EXPECT_LT(u[i - 1].first, u[i].first);
  EXPECT_EQ(u[250], (std::pair<uint64_t, int64_t>{501, 1}));
  EXPECT_EQ(u.back(), (std::pair<uint64_t, int64_t>{2000, 1}));
}

// The naive frontier: minimal elements of the times with positive count.
template <class T>
std::vector<T> naive_frontier(const std::map<T, int64_t>& model) {
  std::vector<T> frontier;
  for (const auto& [t, c] : model) {
    if (c <= 0) continue;
    bool minimal = true;
    for (const auto& [u, d] : model) {
      if (d > 0 && !(u == t) && less_equal(u, t)) minimal = false;
    }
    if (minimal) frontier.push_back(t);  // std::map order: sorted by `<`.
  }
  return frontier;
}

template <class T>
void check_mutable_antichain(uint64_t seed) {
  std::mt19937_64 rng(seed);
  TimeGen<T> gen;
  const uint64_t range = std::vector<uint64_t>{3, 10, 40, 400}[rng() % 4];
  MutableAntichain<T> m;
  std::map<T, int64_t> model;
  std::vector<T> frontier;  // The frontier as reported through the changes.
  uint64_t low = 0;         // For advancing runs: a time that moves up, like a source's.
  const bool advancing = rng() % 2;
  for (int op = 0; op < 300; ++op) {
    std::vector<std::pair<T, int64_t>> updates;
    const size_t n = rng() % 5;
    for (size_t i = 0; i < n; ++i) {
      T time = gen(rng, range);
      if constexpr (std::is_same_v<T, uint64_t>) {
        if (advancing) time = low + rng() % 8;
      }
      // Mostly balanced, so that counts return to zero; negative transients are common.
      const int64_t diff = static_cast<int64_t>(rng() % 5) - 2;
      updates.emplace_back(time, diff);
      model[time] += diff;
    }
    if (advancing && rng() % 3 == 0) ++low;
    std::map<T, int64_t> frontier_counts;
    for (const T& f : frontier) frontier_counts[f] += 1;
    for (const auto& [t, d] : m.update_iter(updates)) {
      ASSERT_TRUE(d == 1 || d == -1) << "seed " << seed << " op " << op;
      frontier_counts[t] += d;
    }
    frontier.clear();
    for (const auto& [t, c] : frontier_counts) {
      ASSERT_TRUE(c == 0 || c == 1) << "seed " << seed << " op " << op << " time " << t;
      if (c == 1) frontier.push_back(t);
    }
    const std::vector<T> want = naive_frontier(model);
    ASSERT_EQ(std::vector<T>(m.frontier().begin(), m.frontier().end()), want)
        << "seed " << seed << " op " << op;
    ASSERT_EQ(frontier, want) << "changes disagree with the frontier; seed " << seed << " op "
                              << op;
    // Safety: no time with a positive count is past the frontier.
    for (const auto& [t, c] : model) {
      if (c > 0) {
        ASSERT_TRUE(m.less_equal(t)) << "seed " << seed << " op " << op;
      }
      ASSERT_EQ(m.count_for(t), c) << "seed " << seed << " op " << op;
    }
    ASSERT_EQ(m.has_no_counts(), nonzero(model).empty()) << "seed " << seed << " op " << op;
    std::vector<std::pair<T, int64_t>> counts;
    for (const auto& [t, c] : m.counts()) counts.emplace_back(t, c);
    ASSERT_EQ(counts, nonzero(model)) << "seed " << seed << " op " << op;
  }
}

TEST(MutableAntichainModelTest, MatchesNaiveFrontierForTotallyOrderedTimes) {
  for (uint64_t seed = 0; seed < testing::property_seeds(300); ++seed) {
    check_mutable_antichain<uint64_t>(seed);
    if (HasFatalFailure()) return;
  }
}

TEST(MutableAntichainModelTest, MatchesNaiveFrontierForProductTimes) {
  for (uint64_t seed = 0; seed < testing::property_seeds(300); ++seed) {
    check_mutable_antichain<P>(seed);
    if (HasFatalFailure()) return;
  }
}

TEST(MutableAntichainTest, ManyOutstandingTimesAdvanceTheFrontierOneByOne) {
  MutableAntichain<uint64_t> m;
  for (uint64_t t = 0; t < 100000; ++t) m.update(t, 1);
  ASSERT_EQ(m.frontier()[0], 0u);
  for (uint64_t t = 0; t + 1 < 100000; ++t) {
    auto changes = m.update(t, -1);
    ASSERT_EQ(changes.size(), 2u);
    ASSERT_EQ(m.frontier()[0], t + 1);
  }
  EXPECT_EQ(m.count_for(99999), 1);
  m.update(99999, -1);
  EXPECT_TRUE(m.is_empty());
  EXPECT_TRUE(m.has_no_counts());
}

}  // namespace
}  // namespace weir
