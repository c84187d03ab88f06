// Stall diagnosis: Worker::describe_progress names what holds a dataflow back.

#include <string>
#include <utility>

#include "testing/harness.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "weir/weir.h"

namespace weir {
namespace {

using ::testing::HasSubstr;

// Two inputs into one operator; the second is never advanced (the mistake being diagnosed).
TEST(StallReportTest, NamesTheOperatorAndTimeThatHoldAStalledDataflowBack) {
  auto result = testing::run_workers(1, [](Worker& worker) {
    ProbeHandle<uint64_t> probe;
    auto [first, second] = worker.dataflow_named<uint64_t>("stalled", [&](Scope<uint64_t>& scope) {
      auto [a, sa] = new_input<uint64_t>(scope);
      auto [b, sb] = new_input<uint64_t>(scope);
      sa | concat(sb) | probe_with(probe);
      return std::pair(std::move(a), std::move(b));
    });
    first.send(1);
    first.advance_to(5);
    // Steps until the first input's advance is seen: the probe would pass 5 but for `second`.
    for (int i = 0; i < 100; ++i) worker.step();
    EXPECT_TRUE(probe.less_than(1));
    std::string report = worker.describe_progress();
    first.close();
    second.close();
    EXPECT_TRUE(testing::step_until(worker, [&] { return probe.done(); }));
    return report;
  });
  ASSERT_TRUE(result.ok()) << result.status();
  const std::string& report = (*result)[0];
  // The second input's operator (node 2) holds a capability at 0; the first moved on to 5.
  EXPECT_THAT(report, HasSubstr("dataflow 0 'stalled'")) << report;
  EXPECT_THAT(report, HasSubstr("operator 'Input' (node 2), output 0: at 0")) << report;
  EXPECT_THAT(report, HasSubstr("operator 'Input' (node 1), output 0: at 5")) << report;
  // The concatenation waits on input 1, fed by the input that was not advanced.
  EXPECT_THAT(report, HasSubstr("operator 'Concatenate' (node 3), input 1: frontier {0}; fed by "
                                "operator 'Input' (node 2), output 0 at frontier {0}"))
      << report;
}

// A dataflow that completes leaves nothing to report.
TEST(StallReportTest, AnIdleWorkerReportsNoDataflow) {
  auto result = testing::run_workers(1, [](Worker& worker) { return worker.describe_progress(); });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT((*result)[0], HasSubstr("progress of worker 0 (0 dataflows)"));
}

}  // namespace
}  // namespace weir
