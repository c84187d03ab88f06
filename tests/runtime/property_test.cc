// Property test of progress tracking: random dataflows (map, filter, exchange, concat, delay,
// branch, feedback loops, nested scopes up to three deep with and without leave, inner sinks,
// probes, exchanges, sleeps and loops, async operators) fed random batches at random times, on
// W = 1, 2, 4 workers with random step interleavings: 200 seeds, 600 cases; and on 2 and 4
// workers with a flow-control window of one byte, which holds back every operator that sends on
// a channel outside a cycle after each batch (issue 14: holding back a nested scope once lost
// the wake-ups of the operators inside it, and these hung). Asserts that
//   (a) no record reaches an operator input at a time its frontier has already passed,
//   (b) every stream, and every inner sink, carries exactly what a single-threaded reference
//       computation says by the time `execute` returns (a dataflow dropped with inner work
//       pending fails here), and every inner probe reads done,
//   (c) every dataflow completes (a watchdog turns a hang into a failure naming the seed).

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "support/sanitizers.h"
#include "testing/harness.h"
#include "testing/random_dataflow.h"
#include <gtest/gtest.h>

#include "weir/weir.h"

namespace weir {
namespace {

using namespace testing::random_dataflow;

// (workers, flow window in bytes).
class PropertyTest : public ::testing::TestWithParam<std::pair<size_t, uint64_t>> {};

// WEIR_PROPERTY_SEED=N runs only case N (WEIR_PROPERTY_REPEAT times), to chase a failure.
TEST_P(PropertyTest, RandomDataflowsMatchReference) {
  const auto [workers, window] = GetParam();
  uint64_t first = 1, last = testing::property_seeds(200), repeat = 1;
  if (const char* only = std::getenv("WEIR_PROPERTY_SEED"))
    first = last = std::strtoull(only, nullptr, 10);
  if (const char* r = std::getenv("WEIR_PROPERTY_REPEAT")) repeat = std::strtoull(r, nullptr, 10);
  for (uint64_t run = 0; run < repeat; ++run)
    for (uint64_t seed = first; seed <= last; ++seed) {
      const Spec spec = generate(seed, workers);
      const auto expected = reference(spec);
      testing::Watchdog watchdog("property case seed=" + std::to_string(seed) +
                                 " workers=" + std::to_string(workers));
      Config config;
      config.workers = workers;
      config.flow_window_bytes = window;
      auto outcomes =
          execute(config, [&](Worker& worker) { return run_worker(worker, spec, seed); });
      ASSERT_TRUE(outcomes.ok()) << "seed " << seed << ": " << outcomes.status();
      for (size_t i = 0; i < spec.nodes.size(); ++i) {
        Multiset actual;
        uint64_t violations = 0;
        for (const auto& o : *outcomes) {
          actual.insert(actual.end(), o.streams[i].begin(), o.streams[i].end());
          violations += o.violations;
        }
        std::sort(actual.begin(), actual.end());
        ASSERT_EQ(violations, 0u) << "seed " << seed
                                  << ": records arrived behind the frontier (node " << i
                                  << " and before)";
        ASSERT_EQ(actual, expected[i])
            << "seed " << seed << " workers " << workers << " node " << i;
      }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Workers, PropertyTest,
    ::testing::Values(std::pair<size_t, uint64_t>{1, Config{}.flow_window_bytes},
                      std::pair<size_t, uint64_t>{2, Config{}.flow_window_bytes},
                      std::pair<size_t, uint64_t>{4, Config{}.flow_window_bytes},
                      std::pair<size_t, uint64_t>{2, 1}, std::pair<size_t, uint64_t>{4, 1}));

}  // namespace
}  // namespace weir
