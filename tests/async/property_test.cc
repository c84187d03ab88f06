// The random-dataflow property test (tests/testing/random_dataflow.h) with async operators in many
// places: every delay becomes an async delay (a body that stashes records and holds a capability
// set across suspensions) and every exchange an async pass-through (giving at input capabilities
// with so little fuel that it yields mid-batch). Asserts, on W = 1, 2, 4 workers, that no record
// arrives behind its input frontier, that every stream matches the single-threaded reference,
// and that every dataflow completes. Nested loops become flat loops here: this test is about
// async operators; tests/runtime/property_test.cc covers nested scopes (with some async nodes).

#include <algorithm>
#include <string>

#include "support/sanitizers.h"
#include "testing/harness.h"
#include "testing/random_dataflow.h"
#include <gtest/gtest.h>

namespace weir {
namespace {

using namespace testing::random_dataflow;

class AsyncPropertyTest : public ::testing::TestWithParam<size_t> {};

TEST_P(AsyncPropertyTest, AsyncHeavyRandomDataflowsMatchReference) {
  const size_t workers = GetParam();
  size_t async_nodes = 0;
  for (uint64_t seed = 1; seed <= testing::property_seeds(100); ++seed) {
    Spec spec = generate(seed, workers);
    for (Node& n : spec.nodes) {
      if (n.kind == Kind::kDelay) n = {Kind::kAsync, n.a, 0, n.p, 1};
      if (n.kind == Kind::kExchange) n = {Kind::kAsync, n.a, 0, 1, 0};
      if (n.kind == Kind::kNestedLoop) n.kind = Kind::kLoop;
      if (n.kind == Kind::kAsync) ++async_nodes;
    }
    const auto expected = reference(spec);
    testing::Watchdog watchdog("async property case seed=" + std::to_string(seed) +
                               " workers=" + std::to_string(workers));
    auto outcomes = testing::run_workers(
        workers, [&](Worker& worker) { return run_worker(worker, spec, seed); });
    ASSERT_TRUE(outcomes.ok()) << "seed " << seed << ": " << outcomes.status();
    uint64_t violations = 0;
    for (const auto& o : *outcomes) violations += o.violations;
    ASSERT_EQ(violations, 0u) << "seed " << seed << ": records arrived behind the frontier";
    for (size_t i = 0; i < spec.nodes.size(); ++i) {
      Multiset actual;
      for (const auto& o : *outcomes) {
        actual.insert(actual.end(), o.streams[i].begin(), o.streams[i].end());
      }
      std::sort(actual.begin(), actual.end());
      ASSERT_EQ(actual, expected[i]) << "seed " << seed << " workers " << workers << " node " << i;
    }
  }
  EXPECT_GT(async_nodes, testing::property_seeds(100)) << "more than one async node a case";
}

INSTANTIATE_TEST_SUITE_P(Workers, AsyncPropertyTest, ::testing::Values(1, 2, 4));

}  // namespace
}  // namespace weir
