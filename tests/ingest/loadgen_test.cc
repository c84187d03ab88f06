// The load generator: deterministic, each table replayable alone, faults where asked.

#include <gtest/gtest.h>

#include "weir/sources/loadgen/generator.h"
#include "weir/sources/source.h"

namespace weir::sources::loadgen {
namespace {

TEST(GeneratorTest, SameSeedSameChanges) {
  GeneratorOptions options;
  auto a = Generator::make(options), b = Generator::make(options);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<bool> all(a->num_tables(), true);
  std::vector<RowChange> ca, cb;
  for (int i = 0; i < 5000; ++i) {
    a->step(all, ca);
    b->step(all, cb);
  }
  ASSERT_EQ(ca.size(), cb.size());
  for (size_t i = 0; i < ca.size(); ++i) EXPECT_EQ(ca[i].row, cb[i].row);
  options.seed = 7;
  auto c = Generator::make(options);
  std::vector<RowChange> cc;
  for (int i = 0; i < 5000; ++i) c->step(all, cc);
  EXPECT_NE(cc.front().row + cc.back().row, ca.front().row + ca.back().row);
}

TEST(GeneratorTest, ReplayingOneTableEqualsTheFullStream) {
  auto full = Generator::make({});
  ASSERT_TRUE(full.ok());
  std::vector<bool> all(full->num_tables(), true);
  std::map<uint32_t, std::vector<std::pair<uint64_t, std::string>>> by_table;
  std::vector<RowChange> changes;
  for (uint64_t o = 1; o <= 3000; ++o) {
    changes.clear();
    full->step(all, changes);
    for (auto& c : changes) by_table[c.table].emplace_back(o, c.row + "/" + std::to_string(c.diff));
  }
  for (uint32_t t = 0; t < full->num_tables(); ++t) {
    auto alone = Generator::make({});
    std::vector<std::pair<uint64_t, RowChange>> replayed;
    alone->replay_table(t, 3001, replayed);
    ASSERT_EQ(replayed.size(), by_table[t].size()) << full->table_name(t);
    for (size_t i = 0; i < replayed.size(); ++i) {
      EXPECT_EQ(replayed[i].first, by_table[t][i].first);
      EXPECT_EQ(replayed[i].second.row + "/" + std::to_string(replayed[i].second.diff),
                by_table[t][i].second);
    }
  }
}

TEST(GeneratorTest, StateHasInsertsUpdatesAndDeletes) {
  auto g = Generator::make({});
  const uint32_t bids = *g->table_index("bids");
  auto start = g->state_at(bids, 0);
  auto later = g->state_at(bids, 20000);
  EXPECT_EQ(start.size(), g->snapshot_rows(bids));
  size_t kept = 0;
  for (auto& [row, n] : start) {
    EXPECT_EQ(n, 1);
    kept += later.contains(row);
  }
  EXPECT_LT(kept, start.size());  // Some rows updated or deleted.
  EXPECT_GT(later.size(), start.size() / 2);
}

TEST(GeneratorTest, FaultInjectionMarksOneRow) {
  GeneratorOptions options;
  options.fault_table = "users";
  options.fault_offset = 500;
  auto g = Generator::make(options);
  ASSERT_TRUE(g.ok());
  std::vector<bool> all(g->num_tables(), true);
  std::vector<RowChange> changes;
  uint64_t bad = 0;
  // A copy that emits nothing agrees on where the fault is (step's result), as a worker that
  // does not own that offset must.
  Generator silent = *g;
  uint64_t reported_at = 0, reported = 0, emitted_at = 0;
  for (int i = 0; i < 5000; ++i) {
    const uint64_t offset = g->next_offset();
    const size_t before = changes.size();
    if (g->step(all, changes)) reported_at = offset;
    for (size_t c = before; c < changes.size(); ++c) {
      if (changes[c].bad) emitted_at = offset;
    }
    if (silent.step({}, changes)) reported += 1;
  }
  for (auto& c : changes) bad += c.bad;
  EXPECT_EQ(bad, 1u);
  EXPECT_EQ(reported, 1u);
  EXPECT_GE(emitted_at, 500u);
  EXPECT_EQ(reported_at, emitted_at);
  options.fault_table = "nope";
  auto wrong = Generator::make(options);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("nope"), std::string::npos);
}

// The injected fault lands on the first change of its table at or after its offset that
// changes something. A change to a deleted row changes nothing and emits nothing; it took the
// fault with it, so that such a --fault never became a definite error at all.
TEST(GeneratorTest, FaultIsNeverSwallowedByANoOpChange) {
  size_t tried = 0;
  for (const std::string table : {"users", "auctions", "bids"}) {
    for (uint64_t at = 50; at < 20'000; at += 97) {
      GeneratorOptions options;
      options.scale = 1;
      options.fault_table = table;
      options.fault_offset = at;
      auto g = Generator::make(options);
      ASSERT_TRUE(g.ok());
      std::vector<bool> all(g->num_tables(), true);
      std::vector<RowChange> changes;
      uint64_t bad = 0;
      while (g->next_offset() < at + 5'000) {
        changes.clear();
        g->step(all, changes);
        for (const auto& c : changes) bad += c.bad;
      }
      EXPECT_EQ(bad, 1u) << "--fault " << table << "@" << at;
      ++tried;
    }
  }
  EXPECT_GT(tried, 0u);
}

// Every worker runs its share of the change stream: one worker's stream ending is not the
// export's (the aggregate said "ceased" while the other workers still emitted their offsets).
TEST(HealthAggregatorTest, CeasedOnlyOnceEveryWorkersStreamEnded) {
  HealthAggregator health(1, 2);
  auto report = [&](uint32_t worker, Health status, bool snapshot) {
    health.apply(HealthUpdate{0, worker, status, "", snapshot});
  };
  EXPECT_EQ(health.status(0), Health::kStarting);
  for (uint32_t w = 0; w < 2; ++w) {
    report(w, Health::kRunning, true);
    report(w, Health::kRunning, false);
  }
  EXPECT_EQ(health.status(0), Health::kRunning);
  report(0, Health::kCeased, false);
  EXPECT_EQ(health.status(0), Health::kRunning);
  report(1, Health::kCeased, false);
  EXPECT_EQ(health.status(0), Health::kCeased);
  report(1, Health::kStalled, false);
  EXPECT_EQ(health.status(0), Health::kStalled);
}

}  // namespace
}  // namespace weir::sources::loadgen
