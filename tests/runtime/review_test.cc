// Found by the adversarial review of issue 13 (nested-scope completion, guarded input
// capabilities, sessions that hold a capability): an async operator's kept InputCapability must
// hold the frontier too (it failed on d43cb62), and nested scopes without leave complete across
// processes (held: kept as coverage, their progress travels encoded).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "testing/checked_sink.h"
#include "testing/harness.h"
#include "testing/loopback_hub.h"
#include <gtest/gtest.h>

#include "weir/async/async_operator.h"
#include "weir/weir.h"

namespace weir {
namespace {

using testing::check_into;
using testing::Checked;

using testing::LoopbackHub;

class ReviewTest : public ::testing::TestWithParam<size_t> {};

// The guide: "An InputCapability cannot be copied, only moved. [...] If you do move one out of
// input.next()'s delivery to keep it, it holds its time in the input's frontier [...] until you
// drop it: safe". In an async operator it is not: AsyncInputState::try_next builds the
// InputCapability without its consumed batch and reports the consumption itself at the next
// next()/try_next(), whatever became of the capability. A body that keeps it (moved out of the
// Data, as the guide allows) and gives with it after the frontier moved on sends behind the
// frontier.
TEST_P(ReviewTest, AsyncKeptInputCapabilityHoldsTheFrontier) {
  const size_t workers = GetParam();
  Checked checked;
  auto status = testing::run_workers(workers, [&](Worker& worker) {
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      AsyncOperatorBuilder<uint64_t> builder("AsyncKeeper", scope);
      auto in = builder.add_input(stream);
      auto [output, out] = builder.template add_output<uint64_t>();
      builder.build([in, output = output](AsyncContext&, auto caps) mutable {
        caps[0].clear();
        std::optional<InputCapability<uint64_t>> kept;
        for (;;) {
          auto event = in.next();
          if (auto* data = event.data()) {
            if (!kept && data->time() == 0) {
              kept.emplace(std::move(data->capability));
              continue;
            }
            const bool late = data->time() >= 5;
            output.give_vec(data->capability, data->batch);
            // Later data arrived while the kept capability held time 0 (the frontier cannot
            // pass it, so waiting for the frontier would wait forever): give with it now.
            if (kept && late) {
              output.give(*kept, uint64_t{1000});
              kept.reset();
            }
          } else if (auto* progress = event.progress()) {
            // The frontier moved past the kept time: with a real guard it cannot.
            if (kept && !progress->frontier.less_equal(kept->time())) {
              output.give(*kept, uint64_t{1000});
              kept.reset();
            }
          } else if (event.is_end()) {
            if (kept) {
              output.give(*kept, uint64_t{1000});
              kept.reset();
            }
            return;
          }
        }
      });
      check_into(out, checked);
      return std::move(handle);
    });
    input.send(1);
    for (uint64_t t = 1; t <= 5; ++t) {
      input.advance_to(t);
      input.send(1);
      for (int k = 0; k < 5; ++k) worker.step();
    }
    input.close();
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(checked.sum.load(), workers * (5 + 1000));
  EXPECT_EQ(checked.violations.load(), 0u)
      << "a record was given at a time the downstream frontier had passed";
}

INSTANTIATE_TEST_SUITE_P(Workers, ReviewTest, ::testing::Values(1, 2));

// HELD (passes on d43cb62). Nested-scope completion across processes: 2 processes (loopback
// transport) x 2 workers; a region without leave, inside it an iterative scope without leave whose
// loop exchanges and sleeps on one worker, and only inner sinks see the results. The nested
// progress batches travel encoded (EncodedNestedBatch) and are decoded by the scope they are for.
TEST(ReviewClusterTest, NestedScopesWithoutLeaveCompleteAcrossProcesses) {
  testing::Watchdog watchdog("NestedScopesWithoutLeaveCompleteAcrossProcesses");
  constexpr size_t kProcesses = 2;
  constexpr size_t kWorkers = 2;
  using P = Product<uint64_t, uint64_t>;
  LoopbackHub hub(kProcesses);
  Checked region_checked, loop_checked;
  auto run_process = [&](size_t process) {
    Config config;
    config.workers = kWorkers;
    config.processes = kProcesses;
    config.process = process;
    config.transport = hub.factory();
    return execute(config, [&](Worker& worker) {
      auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
        auto [handle, stream] = new_input<uint64_t>(scope);
        scope.region([&](auto& r1) {
          auto s1 = r1.enter(stream) | map([&worker](uint64_t x) {
                      if (worker.index() == 3) {
                        std::this_thread::sleep_for(std::chrono::milliseconds(2));
                      }
                      return x;
                    }) |
                    exchange([](const uint64_t& x) { return x; });
          check_into(s1, region_checked);
          r1.template iterative<uint64_t>([&](auto& loop_scope) {
            auto [loop, cycle] = loop_variable<uint64_t>(loop_scope, uint64_t{1});
            auto body = loop_scope.enter(s1) | concat(cycle) | map([&worker](uint64_t x) {
                          if (worker.index() == 1 && x % 5 == 0) {
                            std::this_thread::sleep_for(std::chrono::milliseconds(10));
                          }
                          return x / 2;
                        }) |
                        exchange([](const uint64_t& x) { return x + 1; });
            auto [done, again] = body | branch([](const P&, const uint64_t& x) { return x > 0; });
            again | connect_loop(loop);
            check_into(again, loop_checked);
          });
        });
        return std::move(handle);
      });
      for (uint64_t i = 1; i <= 40; ++i) input.send(i * 11);
      input.close();
    });
  };
  std::optional<absl::Status> second;
  std::thread other([&] { second.emplace(run_process(1)); });
  absl::Status first = run_process(0);
  other.join();
  ASSERT_TRUE(first.ok()) << first;
  ASSERT_TRUE(second->ok()) << *second;
  constexpr size_t kTotal = kProcesses * kWorkers;
  uint64_t expected_records = 0, expected_sum = 0;
  for (uint64_t i = 1; i <= 40; ++i) {
    for (uint64_t x = i * 11 / 2; x > 0; x /= 2) {
      ++expected_records;
      expected_sum += x;
    }
  }
  EXPECT_EQ(region_checked.records.load(), 40 * kTotal);
  EXPECT_EQ(loop_checked.records.load(), expected_records * kTotal);
  EXPECT_EQ(loop_checked.sum.load(), expected_sum * kTotal);
  EXPECT_EQ(region_checked.violations.load() + loop_checked.violations.load(), 0u);
}

}  // namespace
}  // namespace weir
