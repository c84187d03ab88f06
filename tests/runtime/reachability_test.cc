// Unit tests of the reachability tracker and its graph checks.

#include "weir/progress/reachability.h"

#include <tuple>
#include <vector>

#include <gtest/gtest.h>

namespace weir {
namespace {

using S = IntSummary<uint64_t>;

Connectivity<uint64_t> summary(std::vector<std::vector<Antichain<S>>> rows) { return rows; }

// 0 (scope) | 1: source (0 in, 1 out) -> 2: op (1 in, 1 out) -> 3: sink (1 in, 0 out)
ReachabilityBuilder<uint64_t> chain() {
  ReachabilityBuilder<uint64_t> b;
  b.add_node(0, "scope", 0, 0, {});
  b.add_node(1, "source", 0, 1, {});
  b.add_node(2, "op", 1, 1, summary({{Antichain<S>{S{0}}}}));
  b.add_node(3, "sink", 1, 0, summary({{}}));
  b.add_edge(Source{1, 0}, Target{2, 0});
  b.add_edge(Source{2, 0}, Target{3, 0});
  return b;
}

TEST(TrackerTest, PropagatesCapabilitiesDownstream) {
  auto b = chain();
  ASSERT_TRUE(b.check_cycles().ok());
  Tracker<uint64_t> tracker = b.build();
  tracker.update_source(Source{1, 0}, 0, 1);
  tracker.propagate_all();
  EXPECT_EQ(std::vector<uint64_t>(tracker.implications(Target{3, 0}).begin(),
                                  tracker.implications(Target{3, 0}).end()),
            std::vector<uint64_t>{0});
  EXPECT_TRUE(tracker.tracking_anything());
  // The source moves to 4: both downstream inputs see 4.
  tracker.update_source(Source{1, 0}, 4, 1);
  tracker.update_source(Source{1, 0}, 0, -1);
  tracker.propagate_all();
  EXPECT_EQ(tracker.implications(Target{2, 0})[0], 4u);
  EXPECT_EQ(tracker.implications(Target{3, 0})[0], 4u);
  // A message in flight to the op at 2 holds both inputs back at 2 ...
  tracker.update_target(Target{2, 0}, 2, 1);
  tracker.propagate_all();
  EXPECT_EQ(tracker.implications(Target{2, 0})[0], 2u);
  EXPECT_EQ(tracker.implications(Target{3, 0})[0], 2u);
  // ... until it is consumed.
  tracker.update_target(Target{2, 0}, 2, -1);
  tracker.update_source(Source{1, 0}, 4, -1);
  tracker.propagate_all();
  EXPECT_TRUE(tracker.implications(Target{3, 0}).empty());
  EXPECT_FALSE(tracker.tracking_anything());
  std::vector<std::tuple<Target, uint64_t, int64_t>> changes;
  tracker.drain_target_changes(
      [&](Target t, uint64_t time, int64_t d) { changes.emplace_back(t, time, d); });
  EXPECT_FALSE(changes.empty());
}

TEST(TrackerTest, TransientNegativeCountsStillTrack) {
  auto b = chain();
  Tracker<uint64_t> tracker = b.build();
  tracker.update_target(Target{2, 0}, 1, -1);  // A consumption seen before its production.
  tracker.propagate_all();
  EXPECT_TRUE(tracker.tracking_anything());
  EXPECT_TRUE(tracker.implications(Target{3, 0}).empty());
  tracker.update_target(Target{2, 0}, 1, 1);
  tracker.propagate_all();
  EXPECT_FALSE(tracker.tracking_anything());
}

TEST(TrackerTest, FeedbackLoopAdvancesTime) {
  // 1: op (1 in, 1 out) -> 2: feedback (+1) -> back to op.
  ReachabilityBuilder<uint64_t> b;
  b.add_node(0, "scope", 0, 0, {});
  b.add_node(1, "op", 1, 1, summary({{Antichain<S>{S{0}}}}));
  b.add_node(2, "feedback", 1, 1, summary({{Antichain<S>{S{1}}}}));
  b.add_edge(Source{1, 0}, Target{2, 0});
  b.add_edge(Source{2, 0}, Target{1, 0});
  ASSERT_TRUE(b.check_cycles().ok());
  Tracker<uint64_t> tracker = b.build();
  tracker.update_source(Source{1, 0}, 3, 1);
  tracker.propagate_all();
  EXPECT_EQ(tracker.implications(Target{2, 0})[0], 3u);
  EXPECT_EQ(tracker.implications(Target{1, 0})[0], 4u);
}

TEST(TrackerTest, CycleWithoutAdvanceIsRejected) {
  ReachabilityBuilder<uint64_t> b;
  b.add_node(0, "scope", 0, 0, {});
  b.add_node(1, "Map", 1, 1, summary({{Antichain<S>{S{0}}}}));
  b.add_node(2, "Feedback", 1, 1, summary({{Antichain<S>{S{0}}}}));
  b.add_edge(Source{1, 0}, Target{2, 0});
  b.add_edge(Source{2, 0}, Target{1, 0});
  absl::Status status = b.check_cycles();
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("cycle that does not advance time"), std::string::npos);
  EXPECT_NE(status.message().find("Map"), std::string::npos);
  EXPECT_NE(status.message().find("Feedback"), std::string::npos);
}

TEST(TrackerTest, ScopeSummariesAndOutputProjection) {
  // Node 0 has 1 input (a scope output) and 1 output (a scope input).
  ReachabilityBuilder<uint64_t> b;
  b.add_node(0, "scope", 1, 1, summary({{Antichain<S>{}}}));
  b.add_node(1, "op", 1, 1, summary({{Antichain<S>{S{2}}}}));
  b.add_edge(Source{0, 0}, Target{1, 0});
  b.add_edge(Source{1, 0}, Target{0, 0});
  ASSERT_TRUE(b.check_cycles().ok());
  Tracker<uint64_t> tracker = b.build();
  EXPECT_EQ(tracker.scope_summary(0, 0), Antichain<S>{S{2}});
  tracker.update_source(Source{1, 0}, 5, 1);  // A capability inside reaches the output at 5.
  tracker.propagate_all();
  auto changes = tracker.output_changes(0).iter();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0], (std::pair<uint64_t, int64_t>{5, 1}));
}

}  // namespace
}  // namespace weir
