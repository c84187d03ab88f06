// Regression tests of the promise that a frontier never lies:
// - a dataflow is complete only when no scope at any depth holds work (a nested scope's inner
//   capabilities and messages that lead to no output of the scope used to be invisible, and the
//   worker dropped the dataflow with work pending);
// - an input capability kept past its delivery, and a session kept past its capability, hold
//   the frontier back instead of sending behind it.

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include "testing/checked_sink.h"
#include "testing/harness.h"
#include <gtest/gtest.h>

#include "weir/weir.h"

namespace weir {
namespace {

class NestedCompletionTest : public ::testing::TestWithParam<size_t> {};

using testing::check_into;
using testing::Checked;

// The case the review found: 2 workers, a region without `leave` whose inner work (a slow map
// on worker 1, an exchange to worker 0, an accumulate, a sink) leads to no output of the region.
TEST_P(NestedCompletionTest, RegionWithoutLeaveFinishesItsInnerWork) {
  const size_t workers = GetParam();
  Checked checked;
  auto status = testing::run_workers(workers, [&](Worker& worker) {
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      scope.region([&](auto& inner) {
        auto slow = inner.enter(stream) | count() | map([&worker](uint64_t n) {
                      if (worker.index() == 1) {
                        std::this_thread::sleep_for(std::chrono::milliseconds(200));
                      }
                      return n;
                    });
        auto summed = slow | exchange([](const uint64_t&) { return uint64_t{0}; }) |
                      accumulate(uint64_t{0}, [](uint64_t& sum, const std::vector<uint64_t>& b) {
                        for (uint64_t x : b) sum += x;
                      });
        check_into(summed, checked);
      });
      return std::move(handle);
    });
    for (uint64_t i = 0; i < 100; ++i) input.send(i);
    input.close();
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(checked.sum.load(), 100 * workers);
  EXPECT_EQ(checked.violations.load(), 0u);
}

// Three levels deep, an iterative scope without leave: its loop runs several rounds on every
// worker (with an exchange) and only an inner sink sees the result.
TEST_P(NestedCompletionTest, DeepIterativeScopeWithoutLeaveFinishesItsLoop) {
  const size_t workers = GetParam();
  using P = Product<uint64_t, uint64_t>;
  Checked checked;
  auto status = testing::run_workers(workers, [&](Worker& worker) {
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      scope.region([&](auto& r1) {
        auto s1 = r1.enter(stream);
        r1.region([&](auto& r2) {
          auto s2 = r2.enter(s1);
          r2.template iterative<uint64_t>([&](auto& loop_scope) {
            auto [loop, cycle] = loop_variable<uint64_t>(loop_scope, uint64_t{1});
            auto body = loop_scope.enter(s2) | concat(cycle) | map([&worker](uint64_t x) {
                          if (worker.index() == 1 && x % 7 == 0) {
                            std::this_thread::sleep_for(std::chrono::milliseconds(20));
                          }
                          return x / 2;
                        }) |
                        exchange([](const uint64_t& x) { return x; });
            auto [done, again] = body | branch([](const P&, const uint64_t& x) { return x > 0; });
            again | connect_loop(loop);
            check_into(again, checked);
          });
        });
      });
      return std::move(handle);
    });
    for (uint64_t i = 1; i <= 50; ++i) input.send(i * 13);
    input.close();
  });
  ASSERT_TRUE(status.ok()) << status;
  // Every record x halves until 0; the sink sees every positive value after the first halving.
  uint64_t expected_records = 0, expected_sum = 0;
  for (uint64_t i = 1; i <= 50; ++i) {
    for (uint64_t x = i * 13 / 2; x > 0; x /= 2) {
      ++expected_records;
      expected_sum += x;
    }
  }
  EXPECT_EQ(checked.records.load(), expected_records * workers);
  EXPECT_EQ(checked.sum.load(), expected_sum * workers);
  EXPECT_EQ(checked.violations.load(), 0u);
}

// An inner operator waiting for an event from another thread (holding its capability, not
// active) keeps the dataflow alive until it gives and lets go.
TEST_P(NestedCompletionTest, InnerOperatorWaitingForAnEventKeepsTheDataflowAlive) {
  const size_t workers = GetParam();
  Checked checked;
  auto status = testing::run_workers(workers, [&](Worker& worker) {
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      scope.region([&](auto& inner) {
        OperatorBuilder<uint64_t> builder("Waiter", inner);
        auto [output, stream] = builder.template add_output<uint64_t>();
        builder.set_notify(false);
        SyncActivator activator = builder.sync_activator();
        auto fired = std::make_shared<std::atomic<bool>>(false);
        auto timer = std::make_shared<std::jthread>([activator, fired] {
          std::this_thread::sleep_for(std::chrono::milliseconds(150));
          fired->store(true);
          activator.activate();
        });
        builder.build([output = output, fired, timer](std::vector<Capability<uint64_t>> caps) {
          return [output, fired, timer,
                  caps = std::move(caps)](std::span<const MutableAntichain<uint64_t>>) mutable {
            if (caps.empty() || !fired->load()) return;
            output.session(caps[0]).give(uint64_t{5});
            caps.clear();
          };
        });
        check_into(stream | exchange([](const uint64_t&) { return uint64_t{0}; }), checked);
      });
    });
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(checked.records.load(), workers);
  EXPECT_EQ(checked.violations.load(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Workers, NestedCompletionTest, ::testing::Values(1, 2, 4));

// ---- capabilities that cannot lie ----

static_assert(!std::is_copy_constructible_v<InputCapability<uint64_t>>,
              "an input capability cannot be copied (only moved: its consumption goes with it)");
static_assert(!std::is_copy_assignable_v<InputCapability<uint64_t>>);

class CapabilityRulesTest : public ::testing::TestWithParam<size_t> {};

// An operator moves the input capability of the first batch at time 0 out of its delivery and
// gives with it only after batches at later times arrived. Its consumption is reported when the
// moved capability is dropped, so the frontier stays at 0 until then and the record at 0 is on
// time (before, it was reported at once, and the record arrived behind the frontier).
TEST_P(CapabilityRulesTest, KeptInputCapabilityHoldsTheFrontier) {
  const size_t workers = GetParam();
  Checked checked;
  auto status = testing::run_workers(workers, [&](Worker& worker) {
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      auto out = unary_frontier<uint64_t>(
          stream, Pipeline{}, "Keeper", [](Capability<uint64_t>, OperatorInfo) {
            std::optional<InputCapability<uint64_t>> kept;
            return [kept = std::move(kept)](auto& in, auto& output) mutable {
              while (auto delivery = in.next()) {
                if (!kept && delivery->time() == 0) {
                  kept.emplace(std::move(delivery->capability));
                  continue;
                }
                output.session(delivery->capability).give_vec(delivery->data);
                if (kept && delivery->time() >= 5) {
                  output.session(*kept).give(uint64_t{1000});
                  kept.reset();
                }
              }
            };
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
  EXPECT_EQ(checked.violations.load(), 0u);
  EXPECT_EQ(checked.sum.load(), workers * (5 + 1000));
}

// A session kept after the capability it came from was dropped still holds that capability:
// what it gives later is not behind the frontier.
TEST_P(CapabilityRulesTest, KeptSessionHoldsItsCapability) {
  const size_t workers = GetParam();
  Checked checked;
  auto status = testing::run_workers(workers, [&](Worker& worker) {
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      OperatorBuilder<uint64_t> builder("KeptSession", scope);
      auto [output, stream] = builder.template add_output<uint64_t>();
      using Session = typename OperatorOutput<uint64_t, uint64_t>::Session;
      builder.build([output = output](std::vector<Capability<uint64_t>> caps) mutable {
        std::optional<Session> session;
        int runs = 0;
        return [caps = std::move(caps), session = std::move(session), runs,
                output](std::span<const MutableAntichain<uint64_t>>) mutable -> bool {
          ++runs;
          if (runs == 1) {
            session.emplace(output.session(caps[0]));
            caps.clear();
            return true;
          }
          if (runs < 20) return true;
          if (session) {
            session->give(uint64_t{3});
            session.reset();
          }
          return false;
        };
      });
      check_into(stream | exchange([](const uint64_t&) { return uint64_t{0}; }), checked);
    });
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(checked.records.load(), workers);
  EXPECT_EQ(checked.violations.load(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Workers, CapabilityRulesTest, ::testing::Values(1, 2, 4));

}  // namespace
}  // namespace weir
