// Stall diagnosis: Worker::describe_progress names what holds a dataflow back.

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "testing/harness.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "weir/weir.h"

namespace weir {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

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

// Runs a dataflow whose input is never advanced for `idle` parks of 10 ms under
// WEIR_STALL_REPORT_AFTER=`after`; returns execute's Status and what the workers wrote to stderr.
std::pair<absl::Status, std::string> run_stalled_with(const char* after, int idle) {
  setenv("WEIR_STALL_REPORT_AFTER", after, 1);
  ::testing::internal::CaptureStderr();
  Config config;
  absl::Status status = execute(config, [idle](Worker& worker) {
    auto input = worker.dataflow_named<uint64_t>("idle", [&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      return std::move(handle);
    });
    for (int i = 0; i < idle; ++i) worker.step_or_park(std::chrono::milliseconds(10));
    input.close();
  });
  std::string err = ::testing::internal::GetCapturedStderr();
  unsetenv("WEIR_STALL_REPORT_AFTER");
  return {status, err};
}

// A value that is not a number of seconds greater than 0 is an error naming the variable, before
// any worker starts; it is not read as "never" (or, out of range, as "at once").
TEST(StallReportTest, AMalformedStallReportAfterIsAnError) {
  for (const char* bad : {"abc", "-1", "0", "5abc", "nan", "inf", "1e99x"}) {
    auto [status, err] = run_stalled_with(bad, 0);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad << ": " << status;
    EXPECT_THAT(status.message(), HasSubstr("WEIR_STALL_REPORT_AFTER")) << bad;
    EXPECT_THAT(status.message(), HasSubstr(std::string("'") + bad + "'")) << bad;
  }
}

// A huge value means "not within this run" (it overflowed into "at once"); spaces around a number
// are allowed; an empty value is unset.
TEST(StallReportTest, StallReportAfterAcceptsHugeValuesAndSpaces) {
  for (const char* good : {"1e99", "  5", "5 ", "1e300", ""}) {
    auto [status, err] = run_stalled_with(good, 5);
    EXPECT_TRUE(status.ok()) << good << ": " << status;
    EXPECT_THAT(err, Not(HasSubstr("stalled"))) << good << ": " << err;
  }
  auto [status, err] = run_stalled_with("0.01", 30);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_THAT(err, HasSubstr("stalled (no work for WEIR_STALL_REPORT_AFTER)")) << err;
}

// A worker parked with no timeout (as execute's own loop parks) still answers a report request:
// it parks at most a second at a time. Otherwise the test watchdog, which requests reports before
// it aborts, got none from the stalled workers it was meant to explain.
TEST(StallReportTest, AParkedWorkerAnswersAReportRequest) {
  auto result = testing::run_workers(1, [](Worker& worker) {
    std::optional<SyncActivator> wake;
    auto release = std::make_shared<std::atomic<bool>>(false);
    worker.dataflow_named<uint64_t>("parked", [&](Scope<uint64_t>& scope) {
      OperatorBuilder<uint64_t> builder("Holder", scope);
      builder.add_output<uint64_t>();
      wake = builder.sync_activator();
      builder.build([release](std::vector<Capability<uint64_t>> caps) {
        return [release, held = std::optional(std::move(caps[0]))](
                   std::span<const MutableAntichain<uint64_t>>) mutable {
          if (release->load()) held.reset();
        };
      });
    });
    while (worker.step()) {
    }
    // Requests a report, and lets the operator go after 5 s in case the worker never wakes.
    std::thread other([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      request_progress_reports();
      std::this_thread::sleep_for(std::chrono::seconds(5));
      release->store(true);
      wake->activate();
    });
    ::testing::internal::CaptureStderr();
    const auto start = std::chrono::steady_clock::now();
    while (!release->load()) {
      worker.step_or_park(std::nullopt);
      if (std::chrono::steady_clock::now() - start > std::chrono::milliseconds(150)) break;
    }
    worker.step();  // Prints the report if the request was seen while parked.
    const auto waited = std::chrono::steady_clock::now() - start;
    std::string err = ::testing::internal::GetCapturedStderr();
    other.join();
    while (worker.step_or_park(std::nullopt)) {
    }
    return std::pair(waited, err);
  });
  ASSERT_TRUE(result.ok()) << result.status();
  const auto& [waited, err] = (*result)[0];
  EXPECT_LT(waited, std::chrono::seconds(3)) << "the parked worker woke only when activated";
  EXPECT_THAT(err, HasSubstr("progress report requested")) << err;
  EXPECT_THAT(err, HasSubstr("operator 'Holder' (node 1), output 0: at 0")) << err;
}

}  // namespace
}  // namespace weir
