// Unit tests of the progress types: timestamps, summaries, antichains, change batches,
// capabilities.

#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "weir/progress/antichain.h"
#include "weir/progress/capability.h"
#include "weir/progress/change_batch.h"
#include "weir/progress/location.h"
#include "weir/progress/timestamp.h"

namespace weir {
namespace {

using P = Product<uint64_t, uint64_t>;

static_assert(Timestamp<uint64_t>);
static_assert(Timestamp<uint32_t>);
static_assert(Timestamp<P>);
static_assert(Timestamp<Product<uint64_t, P>>);

TEST(TimestampTest, IntSummaryAddsAndDropsOnOverflow) {
  IntSummary<uint64_t> plus_two{2};
  EXPECT_EQ(plus_two.results_in(3), std::optional<uint64_t>(5));
  EXPECT_EQ(plus_two.results_in(std::numeric_limits<uint64_t>::max() - 1), std::nullopt);
  EXPECT_EQ(plus_two.followed_by(IntSummary<uint64_t>{3})->delta, 5u);
  EXPECT_EQ(IntSummary<uint64_t>{std::numeric_limits<uint64_t>::max()}.followed_by(plus_two),
            std::nullopt);
  EXPECT_TRUE(less_equal(IntSummary<uint64_t>{1}, plus_two));
  EXPECT_FALSE(less_equal(plus_two, IntSummary<uint64_t>{1}));
}

TEST(TimestampTest, ProductIsPartiallyOrderedAndLexicographicallySorted) {
  EXPECT_TRUE((less_equal(P{1, 2}, P{1, 3})));
  EXPECT_TRUE((less_equal(P{1, 2}, P{2, 2})));
  EXPECT_FALSE((less_equal(P{1, 3}, P{2, 2})));
  EXPECT_FALSE((less_equal(P{2, 2}, P{1, 3})));
  EXPECT_TRUE((P{1, 3} < P{2, 2}));  // The total order extends the partial order.
  EXPECT_EQ(minimum_time<P>(), (P{0, 0}));
  ProductSummary<uint64_t, uint64_t> inner_step{{0}, {1}};
  EXPECT_EQ(inner_step.results_in(P{4, 7}), std::optional<P>(P{4, 8}));
  EXPECT_TRUE((time_lt(P{0, 0}, P{0, 1})));
  EXPECT_FALSE((time_lt(P{0, 1}, P{0, 1})));
}

TEST(AntichainTest, InsertEvictsGreaterElements) {
  Antichain<P> frontier;
  EXPECT_TRUE(frontier.insert({1, 1}));
  EXPECT_FALSE(frontier.insert({2, 2}));  // Dominated.
  EXPECT_TRUE(frontier.insert({0, 3}));   // Incomparable: both kept.
  EXPECT_EQ(frontier.size(), 2u);
  EXPECT_TRUE(frontier.insert({0, 0}));  // Evicts both.
  EXPECT_EQ(frontier, (Antichain<P>{{0, 0}}));
}

TEST(AntichainTest, ComparisonsAndDominance) {
  Antichain<P> frontier{{0, 1}, {1, 0}};
  EXPECT_TRUE((frontier.less_equal({1, 1})));
  EXPECT_TRUE((frontier.less_than({1, 1})));
  EXPECT_TRUE((frontier.less_equal({0, 1})));
  EXPECT_FALSE((frontier.less_than({0, 1})));
  EXPECT_FALSE((frontier.less_equal({0, 0})));
  EXPECT_TRUE(frontier.dominates(Antichain<P>{{1, 1}}));
  EXPECT_FALSE((Antichain<P>{{1, 1}}.dominates(frontier)));
  EXPECT_TRUE(frontier.dominates(Antichain<P>{}));  // The empty frontier is dominated by all.
  Antichain<uint64_t> empty;
  EXPECT_FALSE(empty.less_equal(0));  // Empty: every time is complete.
}

TEST(ChangeBatchTest, CompactsAndDropsZeros) {
  ChangeBatch<uint64_t> batch;
  batch.update(3, 1);
  batch.update(1, 2);
  batch.update(3, -1);
  batch.update(2, 5);
  auto updates = batch.iter();
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0], (std::pair<uint64_t, int64_t>{1, 2}));
  EXPECT_EQ(updates[1], (std::pair<uint64_t, int64_t>{2, 5}));
  std::vector<std::pair<uint64_t, int64_t>> drained;
  batch.drain([&](uint64_t t, int64_t d) { drained.emplace_back(t, d); });
  EXPECT_EQ(drained.size(), 2u);
  EXPECT_TRUE(batch.is_empty());
}

TEST(ChangeBatchTest, StaysBoundedUnderManyUpdates) {
  ChangeBatch<uint64_t> batch;
  for (int i = 0; i < 100000; ++i) batch.update(i % 4, (i % 2) ? 1 : -1);
  EXPECT_LT(batch.unstable_len(), 100u);
  for (const auto& [time, diff] : batch.iter()) EXPECT_NE(diff, 0);
}

TEST(ChangeBatchTest, DrainIntoMerges) {
  ChangeBatch<uint64_t> a, b;
  a.update(1, 1);
  b.update(1, 2);
  b.update(2, 1);
  a.drain_into(b);
  EXPECT_TRUE(a.is_empty());
  auto u = b.iter();
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].second, 3);
}

TEST(MutableAntichainTest, ReportsFrontierChanges) {
  MutableAntichain<uint64_t> m;
  auto c = m.update(5, 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0], (std::pair<uint64_t, int64_t>{5, 1}));
  EXPECT_TRUE(m.update(7, 1).empty());  // Beyond the frontier: no change.
  c = m.update(5, -1);
  ASSERT_EQ(c.size(), 2u);  // 5 leaves, 7 enters.
  EXPECT_EQ(m.frontier()[0], 7u);
  EXPECT_TRUE(m.less_equal(7));
  EXPECT_FALSE(m.less_than(7));
  c = m.update(7, -1);
  EXPECT_TRUE(m.is_empty());
  EXPECT_TRUE(m.has_no_counts());
}

TEST(MutableAntichainTest, NegativeCountsDoNotHoldTheFrontier) {
  MutableAntichain<uint64_t> m;
  EXPECT_TRUE(m.update(3, -1).empty());  // Transiently negative: no frontier.
  EXPECT_TRUE(m.is_empty());
  EXPECT_FALSE(m.has_no_counts());
  EXPECT_TRUE(m.update(3, 1).empty());  // Back to zero.
  EXPECT_TRUE(m.has_no_counts());
}

TEST(MutableAntichainTest, PartialOrderFrontierHasIncomparableElements) {
  MutableAntichain<P> m;
  std::vector<std::pair<P, int64_t>> updates{{{0, 2}, 1}, {{2, 0}, 1}, {{3, 3}, 1}};
  m.update_iter(updates);
  EXPECT_EQ(m.frontier().size(), 2u);
  m.update(P{0, 2}, -1);
  ASSERT_EQ(m.frontier().size(), 1u);
  EXPECT_EQ(m.frontier()[0], (P{2, 0}));
  EXPECT_EQ(m.count_for(P{3, 3}), 1);
}

TEST(LocationTest, OrdersAndConverts) {
  Location s = Source{1, 2};
  Location t = Target{1, 2};
  EXPECT_TRUE(s.is_source);
  EXPECT_FALSE(t.is_source);
  EXPECT_NE(s, t);
  EXPECT_EQ(s.source(), (Source{1, 2}));
  EXPECT_TRUE(Location(Source{0, 5}) < Location(Source{1, 0}));
}

TEST(CapabilityTest, CopiesAndDropsAreCounted) {
  InternalHandle<uint64_t> internal;
  const int64_t live = live_capabilities_on_this_thread();
  {
    auto cap = Capability<uint64_t>::mint(3, internal.get());
    auto copy = cap;  // NOLINT(performance-unnecessary-copy-initialization)
    EXPECT_EQ(live_capabilities_on_this_thread(), live + 2);
    auto later = copy.delayed(5);
    EXPECT_EQ(later.time(), 5u);
    later.downgrade(9);
    EXPECT_EQ(later.time(), 9u);
    auto moved = std::move(copy);
    EXPECT_FALSE(copy.valid());              // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(internal->iter().size(), 2u);  // (3, +2) and (9, +1)
  }
  EXPECT_EQ(live_capabilities_on_this_thread(), live);
  EXPECT_TRUE(internal->is_empty());
}

TEST(CapabilityTest, OutlivingItsOperatorIsSafe) {
  std::optional<Capability<uint64_t>> cap;
  {
    InternalHandle<uint64_t> internal;
    cap.emplace(Capability<uint64_t>::mint(0, internal.get()));
  }
  cap->downgrade(1);  // Writes into a batch nobody reads any more; no use after free.
  cap.reset();
}

// Breaking a rule throws a UsageError, which the runtime turns into a failed execution (see
// misuse_test.cc); the capability is unchanged.
TEST(CapabilityTest, DowngradeBackwardsBreaksARule) {
  InternalHandle<uint64_t> internal;
  auto cap = Capability<uint64_t>::mint(5, internal.get());
  EXPECT_THROW(cap.downgrade(4), UsageError);
  EXPECT_EQ(cap.time(), 5u);
}

TEST(CapabilitySetTest, KeepsAnAntichainAndDowngrades) {
  InternalHandle<P> internal;
  CapabilitySet<P> set;
  set.insert(Capability<P>::mint(P{0, 1}, internal.get()));
  set.insert(Capability<P>::mint(P{1, 0}, internal.get()));
  set.insert(Capability<P>::mint(P{1, 1}, internal.get()));  // Dominated: dropped.
  EXPECT_EQ(set.size(), 2u);
  auto c = set.try_delayed(P{1, 1});
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE((set.try_delayed(P{0, 0}).has_value()));
  c.reset();
  set.downgrade(Antichain<P>{{2, 2}});
  ASSERT_EQ(set.size(), 1u);
  EXPECT_EQ(set.first().time(), (P{2, 2}));
  set.clear();
  EXPECT_TRUE(internal->is_empty());
}

TEST(InputCapabilityTest, RespectsConnectivity) {
  std::vector<InternalHandle<uint64_t>> internals(2);
  std::vector<Antichain<IntSummary<uint64_t>>> row{Antichain<IntSummary<uint64_t>>{{0}},
                                                   Antichain<IntSummary<uint64_t>>{{2}}};
  InputCapability<uint64_t> input(5, internals, row);
  EXPECT_TRUE(input.can_produce(0, 5));
  EXPECT_FALSE(input.can_produce(1, 5));  // Output 1 only from time + 2.
  EXPECT_TRUE(input.can_produce(1, 7));
  auto cap = input.delayed_for_output(7, 1);
  EXPECT_EQ(cap.time(), 7u);
  EXPECT_THROW((void)input.retain_for_output(1), UsageError);
}

// Moved from, an InputCapability is empty: it cannot mint (found by the review: a moved-from
// value left in an engaged optional used to open sessions behind the frontier).
TEST(InputCapabilityTest, MovedFromCannotMint) {
  std::vector<InternalHandle<uint64_t>> internals(1);
  std::vector<Antichain<IntSummary<uint64_t>>> row{Antichain<IntSummary<uint64_t>>{{0}}};
  InputCapability<uint64_t> input(5, internals, row, internals[0].get(), 3);
  InputCapability<uint64_t> kept(std::move(input));
  EXPECT_TRUE(kept.valid());
  EXPECT_FALSE(input.valid());  // NOLINT(bugprone-use-after-move): the point of the test.
  EXPECT_FALSE(input.can_produce(0, 5));
  EXPECT_THROW((void)input.retain(), UsageError);
  EXPECT_TRUE(internals[0]->is_empty());  // The consumption goes with `kept`...
  { InputCapability<uint64_t> dropped(std::move(kept)); }
  EXPECT_EQ(internals[0]->iter().size(), 1u);  // ...and is reported once, when it is dropped.
}

}  // namespace
}  // namespace weir
