// Async operators: per-output progress, inputs, fuel, errors, shutdown and dropping.

#include "weir/async/async_operator.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "deep_recursion.h"
#include "testing/harness.h"
#include "testing/misuse.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "weir/weir.h"

namespace weir {
namespace {

using namespace std::chrono_literals;
using Caps = std::span<CapabilitySet<uint64_t>>;
using ::testing::HasSubstr;
using testing::step_until;
using testing::Watchdog;

// Steps until the worker has nothing left to do now (at most `limit` steps).
void step_idle(Worker& worker, int limit = 1000) {
  for (int i = 0; i < limit && worker.step(); ++i) {
  }
}

// ---- per-output progress ----

class ThreeOutputsTest : public ::testing::TestWithParam<size_t> {};

// One operator, three outputs: A is released at once, B when a timer fires, C when the input's
// frontier passes 10. Its input is connected to C only, so A and B do not follow the input.
TEST_P(ThreeOutputsTest, OutputsAreReleasedIndependently) {
  Watchdog watchdog("ThreeOutputsTest");
  auto result = testing::run_workers(GetParam(), [](Worker& worker) {
    ProbeHandle<uint64_t> a_probe, b_probe, c_probe;
    bool timer_fired = false;
    bool input_passed_10 = false;
    std::vector<std::vector<uint64_t>> frontiers_seen;
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      AsyncOperatorBuilder<uint64_t> builder("ThreeOutputs", scope);
      auto in = builder.add_input_connected(stream, Pipeline{}, {2});
      auto [a, a_stream] = builder.add_output<uint64_t>();
      auto [b, b_stream] = builder.add_output<uint64_t>();
      auto [c, c_stream] = builder.add_output<uint64_t>();
      builder.build([&, in](AsyncContext& ctx, Caps caps) mutable {
        caps[0].clear();
        ctx.sleep_for(20ms);
        timer_fired = true;
        caps[1].clear();
        for (;;) {
          auto event = in.next();
          if (const auto* progress = event.progress()) {
            frontiers_seen.emplace_back(progress->frontier.begin(), progress->frontier.end());
            if (!progress->frontier.less_equal(10)) break;
          }
          if (event.is_end()) break;
        }
        input_passed_10 = true;
        caps[2].clear();
        while (!in.next().is_end()) {
        }
      });
      a_stream | probe_with(a_probe);
      b_stream | probe_with(b_probe);
      c_stream | probe_with(c_probe);
      return std::move(handle);
    });

    // A completes while the input has not moved and before anything else is released.
    EXPECT_TRUE(step_until(worker, [&] { return a_probe.done(); }));
    EXPECT_TRUE(c_probe.less_equal(0));
    // B completes after the timer, and only then.
    EXPECT_TRUE(step_until(worker, [&] {
      EXPECT_TRUE(!b_probe.done() || timer_fired);
      return b_probe.done();
    }));
    EXPECT_TRUE(timer_fired);
    // C is held at 0 while the input advances to 10, though the operator sees every move.
    for (uint64_t t = 1; t <= 10; ++t) {
      input.advance_to(t);
      step_idle(worker);
      EXPECT_TRUE(c_probe.less_equal(0)) << "C released with the input at " << t;
      EXPECT_FALSE(input_passed_10);
    }
    input.advance_to(11);
    EXPECT_TRUE(step_until(worker, [&] { return !c_probe.less_equal(10); }));
    EXPECT_TRUE(input_passed_10);
    input.close();
    EXPECT_TRUE(step_until(worker, [&] { return c_probe.done(); }));
    // The frontiers seen only move forward.
    for (size_t i = 1; i < frontiers_seen.size(); ++i) {
      EXPECT_EQ(frontiers_seen[i].size(), 1u);
      EXPECT_LT(frontiers_seen[i - 1][0], frontiers_seen[i][0]);
    }
    return frontiers_seen.size();
  });
  ASSERT_TRUE(result.ok()) << result.status();
}

INSTANTIATE_TEST_SUITE_P(Workers, ThreeOutputsTest, ::testing::Values(1, 2));

// ---- inputs and outputs ----

// A batch counts as consumed only when the body asks for the next event, so its capability stays
// good across suspensions: giving after yields never lands behind a downstream frontier.
TEST(AsyncOperatorTest, InputCapabilityOutlivesSuspensionsUntilTheNextEvent) {
  Watchdog watchdog("InputCapabilityOutlivesSuspensions");
  auto result = testing::run_workers(2, [](Worker& worker) {
    uint64_t violations = 0;
    std::vector<std::pair<uint64_t, uint64_t>> seen;
    ProbeHandle<uint64_t> probe;
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      AsyncOperatorBuilder<uint64_t> builder("Slow", scope);
      auto in = builder.add_input(stream, Exchange([](const uint64_t& x) { return x; }));
      auto [out, out_stream] = builder.add_output<uint64_t>();
      builder.build([in, out](AsyncContext& ctx, Caps caps) mutable {
        caps[0].clear();
        for (;;) {
          auto event = in.next();
          if (event.is_end()) return;
          if (auto* data = event.data()) {
            auto session = out.session(data->capability);
            for (int i = 0; i < 3; ++i) ctx.yield();
            for (uint64_t x : data->batch) {
              if (x % 2 == 0) {
                session.give(x * 10);
              } else {
                out.give(data->capability, x * 10);
              }
              ctx.yield();
            }
          }
        }
      });
      unary_frontier<uint64_t>(
          out_stream, Pipeline{}, "Check",
          [&](const Capability<uint64_t>&, const OperatorInfo&) {
            return [&](auto& in2, auto& out2) {
              in2.for_each([&](const InputCapability<uint64_t>& cap, std::vector<uint64_t>& data) {
                if (!in2.frontier().less_equal(cap.time())) ++violations;
                for (uint64_t x : data) seen.emplace_back(cap.time(), x);
                out2.session(cap).give_vec(data);
              });
            };
          }) |
          probe_with(probe);
      return std::move(handle);
    });
    for (uint64_t t = 0; t < 20; ++t) {
      input.send(t + 100 * worker.index());
      input.advance_to(t + 1);
      worker.step();
    }
    input.close();
    EXPECT_TRUE(step_until(worker, [&] { return probe.done(); }));
    std::sort(seen.begin(), seen.end());
    return std::pair(violations, seen);
  });
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<std::pair<uint64_t, uint64_t>> all;
  for (const auto& [violations, seen] : *result) {
    EXPECT_EQ(violations, 0u);
    all.insert(all.end(), seen.begin(), seen.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<std::pair<uint64_t, uint64_t>> expected;
  for (uint64_t w = 0; w < 2; ++w) {
    for (uint64_t t = 0; t < 20; ++t) expected.emplace_back(t, (t + 100 * w) * 10);
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(all, expected);
}

// ---- capabilities that cannot lie ----

// A session holds a capability at its time: kept across a wait after the body cleared its set,
// it holds the output, and what it gives later is not behind the downstream frontier.
TEST(AsyncCapabilityTest, ASessionHoldsItsTimeAfterTheSetIsCleared) {
  Watchdog watchdog("ASessionHoldsItsTime");
  auto result = testing::run_workers(1, [](Worker& worker) {
    ProbeHandle<uint64_t> probe;
    bool waiting = false;
    bool go = false;
    uint64_t violations = 0;
    std::vector<uint64_t> seen;
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      AsyncOperatorBuilder<uint64_t> builder("SessionKeeper", scope);
      auto [out, stream] = builder.add_output<uint64_t>();
      builder.build([&, out](AsyncContext& ctx, Caps caps) mutable {
        auto session = out.session(caps[0].first());
        caps[0].clear();
        waiting = true;
        while (!go) ctx.sleep_for(1ms);
        session.give(7);
      });
      unary_frontier<uint64_t>(
          stream, Pipeline{}, "Check",
          [&](const Capability<uint64_t>&, const OperatorInfo&) {
            return [&](auto& in, auto&) {
              in.for_each([&](const InputCapability<uint64_t>& cap, std::vector<uint64_t>& data) {
                if (!in.frontier().less_equal(cap.time())) ++violations;
                seen.insert(seen.end(), data.begin(), data.end());
              });
            };
          }) |
          probe_with(probe);
    });
    EXPECT_TRUE(step_until(worker, [&] { return waiting; }));
    step_idle(worker);
    const bool held = probe.less_equal(0);
    go = true;
    EXPECT_TRUE(step_until(worker, [&] { return probe.done(); }));
    return std::tuple(held, violations, seen);
  });
  ASSERT_TRUE(result.ok()) << result.status();
  const auto& [held, violations, seen] = (*result)[0];
  EXPECT_TRUE(held) << "a live session did not hold its output";
  EXPECT_EQ(violations, 0u);
  EXPECT_EQ(seen, std::vector<uint64_t>{7});
}

// Runs a dataflow "misuse" on one worker: an input, and the async operator "Bad" (two outputs, its
// input connected to output 0 only) whose body calls `bad` with each batch's capability; sends one
// record at time 1 and closes the input.
using BadBody = std::function<void(InputCapability<uint64_t>&, AsyncOutput<uint64_t, uint64_t>&,
                                   AsyncOutput<uint64_t, uint64_t>&, CapabilitySet<uint64_t>&)>;
absl::Status run_bad(BadBody bad) {
  return testing::run_workers(1, [bad](Worker& worker) {
    auto input = worker.dataflow_named<uint64_t>("misuse", [&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      AsyncOperatorBuilder<uint64_t> builder("Bad", scope);
      auto [out0, s0] = builder.add_output<uint64_t>();
      auto [out1, s1] = builder.add_output<uint64_t>();
      auto in = builder.add_input_connected(stream, Pipeline{}, {out0.index()});
      builder.build([in, out0, out1, bad](AsyncContext&, Caps caps) mutable {
        caps[0].clear();
        for (;;) {
          auto event = in.next();
          if (auto* data = event.data()) bad(data->capability, out0, out1, caps[1]);
          if (event.is_end()) return;
        }
      });
      return std::move(handle);
    });
    input.advance_to(1);
    input.send(7);
    input.close();
  });
}

using testing::expect_broken_rule;

TEST(AsyncMisuseTest, ACorrectBodySucceeds) {
  Watchdog watchdog("AsyncMisuseTest.ACorrectBodySucceeds");
  auto status = run_bad([](InputCapability<uint64_t>& cap, AsyncOutput<uint64_t, uint64_t>& out0,
                           AsyncOutput<uint64_t, uint64_t>&,
                           CapabilitySet<uint64_t>&) { out0.give(cap, 1); });
  EXPECT_TRUE(status.ok()) << status;
}

TEST(AsyncMisuseTest, DowngradeToAnEarlierTime) {
  Watchdog watchdog("AsyncMisuseTest.DowngradeToAnEarlierTime");
  auto status = run_bad([](InputCapability<uint64_t>& cap, AsyncOutput<uint64_t, uint64_t>&,
                           AsyncOutput<uint64_t, uint64_t>&, CapabilitySet<uint64_t>&) {
    Capability<uint64_t> kept = cap.retain();
    kept.downgrade(0);
  });
  expect_broken_rule(status, "downgraded only to a later time: from 1 to 0");
}

TEST(AsyncMisuseTest, UseOfAMovedFromCapability) {
  Watchdog watchdog("AsyncMisuseTest.UseOfAMovedFromCapability");
  auto status = run_bad([](InputCapability<uint64_t>& cap, AsyncOutput<uint64_t, uint64_t>& out0,
                           AsyncOutput<uint64_t, uint64_t>&, CapabilitySet<uint64_t>&) {
    Capability<uint64_t> kept = cap.retain();
    Capability<uint64_t> moved = std::move(kept);
    out0.give(kept, 1);  // NOLINT(bugprone-use-after-move): the misuse under test.
  });
  expect_broken_rule(status, "a moved-from capability was used with output 0");
}

// An AsyncOutput that no builder made dereferenced a null operator (a SEGV, found by review).
TEST(AsyncMisuseTest, UseOfADefaultConstructedOutput) {
  Watchdog watchdog("AsyncMisuseTest.UseOfADefaultConstructedOutput");
  auto status = run_bad([](InputCapability<uint64_t>& cap, AsyncOutput<uint64_t, uint64_t>&,
                           AsyncOutput<uint64_t, uint64_t>&, CapabilitySet<uint64_t>&) {
    AsyncOutput<uint64_t, uint64_t> unmade;
    unmade.give(cap, 1);
  });
  expect_broken_rule(status, "an AsyncOutput no builder made");
}

TEST(AsyncMisuseTest, CapabilityForAnotherOutput) {
  Watchdog watchdog("AsyncMisuseTest.CapabilityForAnotherOutput");
  auto status = run_bad([](InputCapability<uint64_t>&, AsyncOutput<uint64_t, uint64_t>& out0,
                           AsyncOutput<uint64_t, uint64_t>&,
                           CapabilitySet<uint64_t>& caps1) { out0.give(caps1.first(), 1); });
  expect_broken_rule(status, "a capability for another output was used with output 0");
}

TEST(AsyncMisuseTest, InputCapabilityForAnUnconnectedOutput) {
  Watchdog watchdog("AsyncMisuseTest.InputCapabilityForAnUnconnectedOutput");
  auto status = run_bad([](InputCapability<uint64_t>& cap, AsyncOutput<uint64_t, uint64_t>&,
                           AsyncOutput<uint64_t, uint64_t>& out1,
                           CapabilitySet<uint64_t>&) { out1.session(cap).give(1); });
  expect_broken_rule(status, "input data cannot produce output 1");
}

// Gives with an InputCapability that was moved from: a Status naming the operator.
TEST(AsyncMisuseTest, AMovedFromInputCapabilityCannotGive) {
  Watchdog watchdog("AsyncMisuseTest.AMovedFromInputCapabilityCannotGive");
  auto status = run_bad([](InputCapability<uint64_t>& cap, AsyncOutput<uint64_t, uint64_t>& out0,
                           AsyncOutput<uint64_t, uint64_t>&, CapabilitySet<uint64_t>&) {
    InputCapability<uint64_t> kept = std::move(cap);
    out0.give(cap, 1);  // NOLINT(bugprone-use-after-move): the misuse under test.
  });
  expect_broken_rule(status, "moved-from input capability used with output 0 of Bad");
}

// A body that catches the error and goes on still fails.
TEST(AsyncMisuseTest, CatchingTheErrorDoesNotHideIt) {
  Watchdog watchdog("AsyncMisuseTest.CatchingTheErrorDoesNotHideIt");
  auto status = run_bad([](InputCapability<uint64_t>& cap, AsyncOutput<uint64_t, uint64_t>&,
                           AsyncOutput<uint64_t, uint64_t>&, CapabilitySet<uint64_t>&) {
    try {
      cap.retain().downgrade(0);
    } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): the misuse under test.
    }
  });
  expect_broken_rule(status, "downgraded only to a later time: from 1 to 0");
}

// Gives on one operator's output with another operator's InputCapability: a Status naming it.
TEST(AsyncMisuseTest, AnotherOperatorsInputCapabilityCannotGive) {
  Watchdog watchdog("AsyncMisuseTest.AnotherOperatorsInputCapabilityCannotGive");
  auto status = testing::run_workers(1, [](Worker& worker) {
    std::optional<InputCapability<uint64_t>> stolen;
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      AsyncOperatorBuilder<uint64_t> first("First", scope);
      auto in = first.add_input(stream);
      first.add_output<uint64_t>();
      first.build([&, in](AsyncContext& ctx, Caps caps) mutable {
        caps[0].clear();
        for (;;) {
          auto event = in.next();
          if (auto* data = event.data()) {
            stolen.emplace(std::move(data->capability));
            break;
          }
        }
        ctx.wait_until([] { return false; });
      });
      AsyncOperatorBuilder<uint64_t> second("Second", scope);
      auto [out, out_stream] = second.add_output<uint64_t>();
      second.build([&, out](AsyncContext& ctx, Caps caps) mutable {
        caps[0].clear();
        while (!stolen) ctx.sleep_for(1ms);
        out.give(*stolen, 1);
      });
      return std::move(handle);
    });
    input.send(1);
    input.advance_to(1);
    while (worker.step_or_park(1ms)) {
    }
    stolen.reset();
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(), HasSubstr("operator 'Second'"));
  EXPECT_THAT(status.message(),
              HasSubstr("input capability of another operator used with output 0 of Second"));
}

// A body that catches everything, the unwinding of its fiber included, and keeps waiting cannot be
// unwound: the process stops with a message naming the operator and the cause (it used to say
// "suspend() called outside its fiber"). With assertions on (the Debug sanitizer builds), Boost's
// own check stops it first, when the swallowed unwinding exception is destroyed.
#ifdef NDEBUG
constexpr const char* kSwallowedUnwinding =
    "async operator 'Stubborn' in dataflow 'misuse' on worker 0 waited while its fiber was being "
    "unwound";
#else
constexpr const char* kSwallowedUnwinding =
    "(async operator 'Stubborn' in dataflow 'misuse' on worker 0 waited while its fiber was being "
    "unwound|forced_unwind.*Assertion .caught. failed)";
#endif
TEST(AsyncMisuseDeathTest, ABodyThatCatchesEverythingAndKeepsWaiting) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        (void)testing::run_workers(1, [](Worker& worker) {
          auto started = std::make_shared<bool>(false);
          auto input = worker.dataflow_named<uint64_t>("misuse", [&](Scope<uint64_t>& scope) {
            auto [handle, stream] = new_input<uint64_t>(scope);
            AsyncOperatorBuilder<uint64_t> builder("Stubborn", scope);
            auto in = builder.add_input(stream);
            builder.build([in, started](AsyncContext&, Caps) mutable {
              *started = true;
              for (;;) {
                try {
                  (void)in.next();
                } catch (...) {  // NOLINT(bugprone-empty-catch): the misuse under test.
                }
              }
            });
            return std::move(handle);
          });
          input.send(1);
          step_until(worker, [&] { return *started; });
          worker.drop_dataflow(0);
        });
      },
      kSwallowedUnwinding);
}

// An option set after build() would change nothing: the builder says so, naming the operator.
TEST(AsyncMisuseDeathTest, SettingAnOptionAfterBuild) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        (void)testing::run_workers(1, [](Worker& worker) {
          worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
            AsyncOperatorBuilder<uint64_t> builder("Late", scope);
            builder.build([](AsyncContext&, Caps) {});
            builder.set_max_blocking_calls(4);
          });
        });
      },
      "set_max_blocking_calls called after build.. of .*Late");
}

// With little fuel, giving yields often: the records leave in many flushes.
TEST(AsyncOperatorTest, GivingYieldsWhenFuelRunsOut) {
  Watchdog watchdog("GivingYieldsWhenFuelRunsOut");
  auto run = [](size_t fuel) {
    auto result = testing::run_workers(1, [fuel](Worker& worker) {
      size_t batches = 0;
      size_t records = 0;
      worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
        AsyncOperatorBuilder<uint64_t> builder("Producer", scope);
        builder.set_fuel(fuel);
        auto [out, stream] = builder.add_output<uint64_t>();
        builder.build([out](AsyncContext&, Caps caps) mutable {
          for (uint64_t i = 0; i < 100; ++i) out.give(caps[0].first(), i);
        });
        stream | inspect_batch([&](const uint64_t&, const std::vector<uint64_t>& batch) {
          ++batches;
          records += batch.size();
        });
      });
      while (worker.step_or_park(1ms)) {
      }
      return std::pair(batches, records);
    });
    EXPECT_TRUE(result.ok()) << result.status();
    return (*result)[0];
  };
  const auto [few_batches, all_records] = run(kDefaultFuelBytes);
  EXPECT_EQ(all_records, 100u);
  EXPECT_EQ(few_batches, 1u);
  const auto [many_batches, all_records_too] = run(2 * sizeof(uint64_t));
  EXPECT_EQ(all_records_too, 100u);
  EXPECT_GE(many_batches, 33u);
  // Unlimited fuel never yields (SIZE_MAX must not wrap into a negative budget).
  const auto [one_batch, all_records_again] = run(std::numeric_limits<size_t>::max());
  EXPECT_EQ(all_records_again, 100u);
  EXPECT_EQ(one_batch, 1u);
}

// A body that ends drops its capabilities and drains its inputs from then on.
TEST(AsyncOperatorTest, AFinishedBodyDrainsItsInputs) {
  Watchdog watchdog("AFinishedBodyDrainsItsInputs");
  auto result = testing::run_workers(1, [](Worker& worker) {
    ProbeHandle<uint64_t> probe;
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      AsyncOperatorBuilder<uint64_t> builder("Quitter", scope);
      auto in = builder.add_input(stream);
      auto [out, out_stream] = builder.add_output<uint64_t>();
      builder.build([in, out](AsyncContext&, Caps caps) mutable {
        auto event = in.next();
        if (auto* data = event.data()) out.give(caps[0].first(), data->batch.size());
      });
      out_stream | probe_with(probe);
      return std::move(handle);
    });
    for (uint64_t i = 0; i < 1000; ++i) input.send(i);
    input.close();
    return step_until(worker, [&] { return probe.done(); }) && !worker.has_dataflows();
  });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE((*result)[0]);
}

TEST(AsyncOperatorTest, WaitUntilWithADeadlineTimesOut) {
  Watchdog watchdog("WaitUntilWithADeadlineTimesOut");
  auto result = testing::run_workers(1, [](Worker& worker) {
    std::optional<bool> outcome;
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      AsyncOperatorBuilder<uint64_t> builder("Waiter", scope);
      builder.build([&](AsyncContext& ctx, Caps) {
        const auto start = std::chrono::steady_clock::now();
        outcome = ctx.wait_until([] { return false; }, start + 5ms);
        EXPECT_GE(std::chrono::steady_clock::now() - start, 5ms);
      });
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    return outcome;
  });
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE((*result)[0].has_value());
  EXPECT_FALSE(*(*result)[0]);
}

// Inside nested scopes (product timestamps, activations through nested paths, timers).
TEST(AsyncOperatorTest, RunsInsideNestedScopes) {
  Watchdog watchdog("RunsInsideNestedScopes");
  auto result = testing::run_workers(2, [](Worker& worker) {
    using P = Product<uint64_t, uint64_t>;
    std::vector<std::pair<uint64_t, uint64_t>> seen;
    ProbeHandle<uint64_t> probe;
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      auto doubled = scope.iterative<uint64_t>([&](auto& inner) {
        AsyncOperatorBuilder<P> builder("InnerAsync", inner);
        auto in =
            builder.add_input(inner.enter(stream), Exchange([](const uint64_t& x) { return x; }));
        auto [out, out_stream] = builder.add_output<uint64_t>();
        builder.build([in, out](AsyncContext& ctx, std::span<CapabilitySet<P>> caps) mutable {
          caps[0].clear();
          for (;;) {
            auto event = in.next();
            if (event.is_end()) return;
            if (auto* data = event.data()) {
              ctx.sleep_for(1ms);
              auto session = out.session(data->capability);
              for (uint64_t x : data->batch) session.give(2 * x);
            }
          }
        });
        return inner.leave(out_stream);
      });
      auto in_region = scope.region([&](auto& inner) {
        AsyncOperatorBuilder<uint64_t> builder("RegionAsync", inner);
        auto in = builder.add_input(inner.enter(doubled));
        auto [out, out_stream] = builder.add_output<uint64_t>();
        builder.build([in, out](AsyncContext&, Caps caps) mutable {
          caps[0].clear();
          for (;;) {
            auto event = in.next();
            if (event.is_end()) return;
            if (auto* data = event.data()) out.give_vec(data->capability, data->batch);
          }
        });
        return inner.leave(out_stream);
      });
      in_region |
          inspect_time([&](const uint64_t& t, const uint64_t& x) { seen.emplace_back(t, x); }) |
          probe_with(probe);
      return std::move(handle);
    });
    for (uint64_t t = 0; t < 5; ++t) {
      input.send(10 * t + worker.index());
      input.advance_to(t + 1);
      EXPECT_TRUE(step_until(worker, [&] { return !probe.less_than(t + 1); }));
    }
    input.close();
    EXPECT_TRUE(step_until(worker, [&] { return probe.done(); }));
    return seen;
  });
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<std::pair<uint64_t, uint64_t>> all;
  for (const auto& seen : *result) all.insert(all.end(), seen.begin(), seen.end());
  std::sort(all.begin(), all.end());
  std::vector<std::pair<uint64_t, uint64_t>> expected;
  for (uint64_t t = 0; t < 5; ++t) {
    for (uint64_t w = 0; w < 2; ++w) expected.emplace_back(t, 2 * (10 * t + w));
  }
  EXPECT_EQ(all, expected);
}

// The body's closure, and what it captured, is released when the body returns: a capability kept
// there does not hold the output afterwards.
TEST(AsyncOperatorTest, TheClosureIsReleasedWhenTheBodyReturns) {
  Watchdog watchdog("TheClosureIsReleasedWhenTheBodyReturns");
  auto result = testing::run_workers(1, [](Worker& worker) {
    ProbeHandle<uint64_t> probe;
    bool returned = false;
    auto owned = std::make_shared<int>(7);
    std::weak_ptr<int> watched = owned;
    const size_t index = worker.next_dataflow_index();
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      AsyncOperatorBuilder<uint64_t> builder("Keeper", scope);
      auto [out, stream] = builder.add_output<uint64_t>();
      builder.build(
          [&returned, out, owned = std::move(owned), kept = std::optional<Capability<uint64_t>>()](
              AsyncContext&, Caps caps) mutable {
            kept = caps[0].delayed(5);
            caps[0].clear();
            out.give(*kept, static_cast<uint64_t>(*owned));
            returned = true;
          });
      stream | probe_with(probe);
    });
    EXPECT_TRUE(step_until(worker, [&] { return returned; }));
    const bool done = step_until(
        worker, [&] { return probe.done(); }, std::chrono::seconds(5));
    const bool freed = watched.expired();
    if (!done) worker.drop_dataflow(index);
    return std::pair(done, freed);
  });
  ASSERT_TRUE(result.ok()) << result.status();
  const auto [done, freed] = (*result)[0];
  EXPECT_TRUE(done) << "a capability in the returned body's closure still holds its output";
  EXPECT_TRUE(freed) << "the returned body's closure is still alive";
}

// ---- errors ----

// Gives at time 0 (held by the body's set), yields, then fails.
template <class Fail>
Stream<uint64_t, uint64_t> failing_operator(Scope<uint64_t>& scope, const std::string& name,
                                            OnError on_error, Fail fail,
                                            std::optional<Stream<uint64_t, AsyncError>>* errors) {
  AsyncOperatorBuilder<uint64_t> builder(name, scope);
  builder.set_on_error(on_error);
  auto [out, stream] = builder.add_output<uint64_t>();
  auto built = builder.build([out, fail](AsyncContext& ctx, Caps caps) mutable -> absl::Status {
    out.give(caps[0].first(), 1);
    ctx.yield();
    out.give(caps[0].first(), 2);
    return fail();
  });
  errors->emplace(built.errors);
  return stream;
}

TEST(AsyncErrorTest, AnExceptionFailsTheExecutionNamingTheOperator) {
  Watchdog watchdog("AnExceptionFailsTheExecution");
  std::atomic<int> error_records{0};
  std::atomic<int> released_early{0};
  auto result = testing::run_workers(2, [&](Worker& worker) {
    ProbeHandle<uint64_t> probe;
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      std::optional<Stream<uint64_t, AsyncError>> errors;
      auto stream = failing_operator(
          scope, "Thrower", OnError::kFail,
          []() -> absl::Status { throw std::runtime_error("boom"); }, &errors);
      stream | probe_with(probe);
      *errors | inspect([&](const AsyncError& e) {
        EXPECT_EQ(e.operator_name, "Thrower");
        EXPECT_EQ(e.status.message(), "boom");
        ++error_records;
      });
    });
    // Until the failure, the output stays held at 0 though the body is gone.
    const auto deadline = std::chrono::steady_clock::now() + testing::kDeadline;
    while (!worker.failed() && std::chrono::steady_clock::now() < deadline) {
      worker.step_or_park(1ms);
      if (!worker.failed() && !probe.less_equal(0)) ++released_early;
    }
  });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.code(), absl::StatusCode::kInternal);
  EXPECT_NE(result.message().find("operator 'Thrower' in dataflow"), std::string::npos)
      << result.message();
  EXPECT_NE(result.message().find("boom"), std::string::npos) << result.message();
  EXPECT_GE(error_records.load(), 1);
  EXPECT_EQ(released_early.load(), 0);
}

TEST(AsyncErrorTest, AnErrorReturnFailsTheExecutionWithItsCode) {
  Watchdog watchdog("AnErrorReturnFailsTheExecution");
  std::atomic<int> released_early{0};
  auto result = testing::run_workers(1, [&](Worker& worker) {
    ProbeHandle<uint64_t> probe;
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      std::optional<Stream<uint64_t, AsyncError>> errors;
      failing_operator(
          scope, "Snapshot", OnError::kFail, [] { return absl::UnavailableError("db down"); },
          &errors) |
          probe_with(probe);
    });
    const auto deadline = std::chrono::steady_clock::now() + testing::kDeadline;
    while (!worker.failed() && std::chrono::steady_clock::now() < deadline) {
      worker.step_or_park(1ms);
      if (!worker.failed() && !probe.less_equal(0)) ++released_early;
    }
  });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(result.message().find("operator 'Snapshot' in dataflow"), std::string::npos)
      << result.message();
  EXPECT_NE(result.message().find("db down"), std::string::npos) << result.message();
  EXPECT_EQ(released_early.load(), 0);
}

// With OnError::kHold the operator reports the error and holds what the body held when it
// failed, also a capability only a local held (released by the exception's unwinding), until
// the shutdown button is pressed.
TEST(AsyncErrorTest, AHeldErrorKeepsEveryCapabilityUntilShutdown) {
  Watchdog watchdog("AHeldErrorKeepsEveryCapability");
  auto result = testing::run_workers(1, [](Worker& worker) {
    const int64_t before = live_capabilities_on_this_thread();
    ProbeHandle<uint64_t> probe;
    std::vector<AsyncError> errors;
    std::optional<ShutdownButton> button;
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      AsyncOperatorBuilder<uint64_t> builder("Fragile", scope);
      builder.set_on_error(OnError::kHold);
      auto [out, stream] = builder.add_output<uint64_t>();
      auto built = builder.build([out](AsyncContext& ctx, Caps caps) mutable {
        Capability<uint64_t> local = caps[0].delayed(3);
        caps[0].clear();
        out.give(local, 30);
        ctx.yield();  // Reports the set's release: only `local` holds 3 now.
        throw std::runtime_error("lost the connection");
      });
      button.emplace(std::move(built.button));
      stream | probe_with(probe);
      built.errors | inspect([&](const AsyncError& e) { errors.push_back(e); });
    });
    EXPECT_TRUE(step_until(worker, [&] { return !errors.empty(); }));
    for (int i = 0; i < 200; ++i) {
      worker.step_or_park(std::chrono::microseconds(100));
      EXPECT_TRUE(probe.less_equal(3)) << "released after the error";
      EXPECT_FALSE(probe.less_than(3)) << "the set's release was lost";
    }
    EXPECT_FALSE(worker.failed());
    button->press();
    EXPECT_TRUE(step_until(worker, [&] { return probe.done(); }));
    while (worker.step_or_park(1ms)) {
    }
    return std::pair(errors, live_capabilities_on_this_thread() - before);
  });
  ASSERT_TRUE(result.ok()) << result.status();
  const auto& [errors, leaked] = (*result)[0];
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].operator_name, "Fragile");
  EXPECT_EQ(errors[0].status.message(), "lost the connection");
  EXPECT_EQ(leaked, 0);
}

// Bodies on one worker that wait inside their catch handlers (the retry-with-backoff shape), then
// rethrow: each fails with its own exception, not with another body's.
TEST(AsyncErrorTest, BodiesThatWaitInCatchHandlersKeepTheirOwnExceptions) {
  Watchdog watchdog("BodiesThatWaitInCatchHandlers");
  constexpr int kBodies = 12;
  auto result = testing::run_workers(1, [](Worker& worker) {
    std::vector<AsyncError> errors;
    std::vector<std::string> wrong;
    const size_t index = worker.next_dataflow_index();
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      for (int b = 0; b < kBodies; ++b) {
        const std::string name = "Retrier" + std::to_string(b);
        AsyncOperatorBuilder<uint64_t> builder(name, scope);
        builder.set_on_error(OnError::kHold);
        builder.add_output<uint64_t>();
        auto built = builder.build([&wrong, name, b](AsyncContext& ctx, Caps) {
          for (int attempt = 0; attempt < 3; ++attempt) {
            const std::string mine = name + " attempt " + std::to_string(attempt);
            try {
              throw std::runtime_error(mine);
            } catch (const std::runtime_error& e) {
              ctx.sleep_for(std::chrono::microseconds(100 * ((b * 7 + attempt) % 5)));
              if (e.what() != mine) wrong.push_back(mine + " saw " + e.what());
              ctx.yield();
              if (attempt == 2) throw;  // Gives up with the last attempt's exception.
            }
          }
        });
        built.errors | inspect([&](const AsyncError& e) { errors.push_back(e); });
      }
    });
    EXPECT_TRUE(step_until(worker, [&] { return errors.size() == kBodies; }));
    worker.drop_dataflow(index);  // The failed bodies hold their outputs (kHold).
    return std::pair(errors, wrong);
  });
  ASSERT_TRUE(result.ok()) << result.status();
  const auto& [errors, wrong] = (*result)[0];
  EXPECT_TRUE(wrong.empty()) << wrong.size()
                             << " handlers saw another exception, the first: " << wrong.front();
  ASSERT_EQ(errors.size(), static_cast<size_t>(kBodies));
  for (const AsyncError& e : errors) {
    EXPECT_EQ(e.status.code(), absl::StatusCode::kInternal);
    EXPECT_EQ(std::string(e.status.message()), e.operator_name + " attempt 2")
        << e.operator_name << " failed with another body's exception";
  }
}

// An operator whose output follows its input: gives part of a batch at time 0, then fails.
struct PartialFailure {
  InputHandle<uint64_t, uint64_t> input;
  ShutdownButton button;
};
PartialFailure partial_failure(Worker& worker, OnError on_error, ProbeHandle<uint64_t>& probe,
                               std::vector<AsyncError>& errors, size_t* index = nullptr) {
  if (index != nullptr) *index = worker.next_dataflow_index();
  std::optional<ShutdownButton> button;
  auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
    auto [handle, stream] = new_input<uint64_t>(scope);
    AsyncOperatorBuilder<uint64_t> builder("Partial", scope);
    builder.set_on_error(on_error);
    auto in = builder.add_input(stream);
    auto [out, out_stream] = builder.add_output<uint64_t>();
    auto built = builder.build([in, out](AsyncContext& ctx, Caps caps) mutable {
      caps[0].clear();  // The output follows the input.
      for (;;) {
        auto event = in.next();
        if (auto* data = event.data()) {
          out.give(data->capability, data->batch.front());  // Part of the batch...
          ctx.yield();                                      // ...flushed downstream...
          throw std::runtime_error("half done");            // ...and the rest never.
        }
        if (event.is_end()) return;
      }
    });
    button.emplace(std::move(built.button));
    out_stream | probe_with(probe);
    built.errors | inspect([&](const AsyncError& e) { errors.push_back(e); });
    return std::move(handle);
  });
  return PartialFailure{std::move(input), std::move(*button)};
}

// OnError::kHold holds an output that follows its input at the time of the batch the body held
// when it failed, also once the input moves on, until the operator is shut down.
TEST(AsyncErrorTest, AHeldErrorHoldsOutputsThatFollowTheInput) {
  Watchdog watchdog("AHeldErrorHoldsOutputsThatFollowTheInput");
  auto result = testing::run_workers(1, [](Worker& worker) {
    ProbeHandle<uint64_t> probe;
    std::vector<AsyncError> errors;
    auto [input, button] = partial_failure(worker, OnError::kHold, probe, errors);
    input.send(1);
    input.send(2);
    input.advance_to(1);
    EXPECT_TRUE(step_until(worker, [&] { return !errors.empty(); }));
    input.advance_to(3);
    input.send(3);
    input.close();
    int released = 0;
    for (int i = 0; i < 200; ++i) {
      worker.step_or_park(std::chrono::microseconds(100));
      if (!probe.less_equal(0)) ++released;
    }
    EXPECT_EQ(released, 0) << "time 0 looked complete with only part of its output";
    EXPECT_FALSE(worker.failed());
    button.press();
    return step_until(worker, [&] { return probe.done(); });
  });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE((*result)[0]);
}

// OnError::kFail fails the execution before the failed body's consumption is reported: no worker
// sees time 0 complete with partial output. Worker 0 holds the failing batch and steps slowly, so
// that worker 1 would see whatever worker 0 reports before failing.
TEST(AsyncErrorTest, AFailureComesBeforeTheConsumptionIsReported) {
  Watchdog watchdog("AFailureComesBeforeTheConsumption");
  std::atomic<int> released_early{0};
  auto result = testing::run_workers(2, [&](Worker& worker) {
    ProbeHandle<uint64_t> probe;
    std::vector<AsyncError> errors;
    auto [input, button] = partial_failure(worker, OnError::kFail, probe, errors);
    if (worker.index() == 0) {
      input.send(1);
      input.send(2);
    }
    input.advance_to(1);
    const auto deadline = std::chrono::steady_clock::now() + testing::kDeadline;
    while (!worker.failed() && std::chrono::steady_clock::now() < deadline) {
      if (worker.index() == 0) {
        worker.step();
        std::this_thread::sleep_for(2ms);
      } else {
        worker.step_or_park(100us);
      }
      if (!worker.failed() && !probe.less_equal(0)) ++released_early;
    }
  });
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.message().find("half done"), std::string::npos) << result.message();
  EXPECT_EQ(released_early.load(), 0) << "time 0 looked complete before the failure";
}

// A press after a failure and before the execution failed does not hide the failure.
TEST(AsyncErrorTest, APressDoesNotHideAFailure) {
  Watchdog watchdog("APressDoesNotHideAFailure");
  auto result = testing::run_workers(1, [](Worker& worker) {
    bool failed_in_body = false;
    std::optional<ShutdownButton> button;
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      AsyncOperatorBuilder<uint64_t> builder("FailsThenPressed", scope);
      builder.add_output<uint64_t>();
      auto built = builder.build([&](AsyncContext&, Caps) -> absl::Status {
        failed_in_body = true;
        return absl::DataLossError("lost a batch");
      });
      button.emplace(std::move(built.button));
    });
    EXPECT_TRUE(step_until(worker, [&] { return failed_in_body; }));
    button->press();
    while (worker.step_or_park(1ms)) {
    }
  });
  ASSERT_FALSE(result.ok()) << "the press hid the failure";
  EXPECT_EQ(result.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(result.message().find("operator 'FailsThenPressed'"), std::string::npos)
      << result.message();
}

using testing::recurse;

// A body that overflows its stack dies with a message naming its operator and worker.
TEST(AsyncStackDeathTest, AnOverflowNamesTheOperatorAndWorker) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        (void)testing::run_workers(1, [](Worker& worker) {
          worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
            AsyncOperatorBuilder<uint64_t> builder("Deep", scope);
            builder.set_stack_size(size_t{64} << 10);
            builder.build([](AsyncContext&, Caps) { recurse(nullptr, 0); });
          });
          while (worker.step_or_park(1ms)) {
          }
        });
      },
      "stack overflow in async operator 'Deep' in dataflow '[^']*' on worker 0: its stack of "
      "[0-9]+ bytes is exhausted");
}

// Past the process's fiber stack limit, a body fails to start: its operator fails with an error
// that names it, instead of the process aborting in mmap or mprotect.
TEST(AsyncErrorTest, ABodyPastTheStackLimitFailsItsOperator) {
  Watchdog watchdog("ABodyPastTheStackLimit");
  const size_t previous = set_fiber_stack_limit(fiber_stacks_mapped_in_process() + 3);
  auto result = testing::run_workers(1, [](Worker& worker) {
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      for (int i = 0; i < 4; ++i) {
        AsyncOperatorBuilder<uint64_t> builder("Many" + std::to_string(i), scope);
        builder.set_stack_size(size_t{200}
                               << 10);  // A size no other test uses: nothing pooled fits.
        builder.build([](AsyncContext& ctx, Caps) { ctx.wait_until([] { return false; }); });
      }
    });
    while (worker.step_or_park(1ms)) {
    }
  });
  set_fiber_stack_limit(previous);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.message().find("operator 'Many3' in dataflow"), std::string::npos)
      << result.message();
  EXPECT_NE(result.message().find("on worker 0"), std::string::npos) << result.message();
  EXPECT_NE(result.message().find("fiber stacks mapped, the limit"), std::string::npos)
      << result.message();
}

// ---- shutdown and dropping ----

struct Sentinel {
  std::atomic<int>* destroyed;
  explicit Sentinel(std::atomic<int>* d) : destroyed(d) {}
  Sentinel(const Sentinel&) = delete;
  Sentinel& operator=(const Sentinel&) = delete;
  ~Sentinel() { ++*destroyed; }
};

// The button is pressed on the workers one after another; no fiber unwinds before the last press,
// and no body runs on a worker after its own press.
TEST(AsyncShutdownTest, FibersUnwindOnlyOnceEveryWorkerPressed) {
  Watchdog watchdog("FibersUnwindOnlyOnceEveryWorkerPressed");
  constexpr size_t kWorkers = 3;
  std::atomic<size_t> presses{0};
  std::atomic<int> unwound{0};
  std::atomic<int> early{0};
  auto result = testing::run_workers(kWorkers, [&](Worker& worker) {
    ProbeHandle<uint64_t> probe;
    size_t events_after_press = 0;
    bool pressed_here = false;
    std::optional<ShutdownButton> button;
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      AsyncOperatorBuilder<uint64_t> builder("Forever", scope);
      auto in = builder.add_input(stream);
      auto [out, out_stream] = builder.add_output<uint64_t>();
      auto built = builder.build([&, in](AsyncContext&, Caps caps) mutable {
        struct Check {
          std::atomic<size_t>* presses;
          std::atomic<int>* unwound;
          std::atomic<int>* early;
          ~Check() {
            if (presses->load() < kWorkers) ++*early;
            ++*unwound;
          }
        } check{&presses, &unwound, &early};
        Capability<uint64_t> held = caps[0].first();
        for (;;) {
          auto event = in.next();
          if (pressed_here) ++events_after_press;
          (void)event;
        }
      });
      button.emplace(std::move(built.button));
      out_stream | probe_with(probe);
      return std::move(handle);
    });
    step_idle(worker);
    // Worker w presses once w workers have.
    EXPECT_TRUE(step_until(worker, [&] { return presses.load() >= worker.index(); }));
    presses.fetch_add(1);
    pressed_here = true;
    button->press();
    // Activate the body with data: it must not run any more.
    input.send(7);
    input.advance_to(1);
    step_idle(worker);
    // Until every worker pressed, the output stays held (`presses` counts before pressing).
    if (presses.load() < kWorkers) {
      EXPECT_TRUE(probe.less_equal(0));
    }
    input.close();
    EXPECT_TRUE(step_until(worker, [&] { return probe.done(); }));
    while (worker.step_or_park(1ms)) {
    }
    return events_after_press;
  });
  ASSERT_TRUE(result.ok()) << result.status();
  for (size_t events : *result) EXPECT_EQ(events, 0u);
  EXPECT_EQ(unwound.load(), static_cast<int>(kWorkers));
  EXPECT_EQ(early.load(), 0);
}

TEST(AsyncShutdownTest, AShutdownTokenPressesWhenDropped) {
  Watchdog watchdog("AShutdownTokenPressesWhenDropped");
  auto result = testing::run_workers(2, [](Worker& worker) {
    ProbeHandle<uint64_t> probe;
    std::optional<ShutdownToken> token;
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      AsyncOperatorBuilder<uint64_t> builder("Idle", scope);
      auto [out, stream] = builder.add_output<uint64_t>();
      auto built =
          builder.build([](AsyncContext& ctx, Caps) { ctx.wait_until([] { return false; }); });
      token.emplace(std::move(built.button).press_on_drop());
      stream | probe_with(probe);
    });
    step_idle(worker);
    EXPECT_TRUE(probe.less_equal(0));
    token.reset();
    return step_until(worker, [&] { return probe.done(); });
  });
  ASSERT_TRUE(result.ok()) << result.status();
  for (bool done : *result) EXPECT_TRUE(done);
}

// A button and a token that outlive the execution: pressing them afterwards does nothing (and
// touches nothing the execution owned).
TEST(AsyncShutdownTest, AButtonAndATokenMayOutliveTheExecution) {
  Watchdog watchdog("AButtonAndATokenMayOutliveTheExecution");
  std::vector<ShutdownButton> buttons;
  std::vector<ShutdownToken> tokens;
  weir::Mutex mu;
  auto result = testing::run_workers(2, [&](Worker& worker) {
    ProbeHandle<uint64_t> probe;
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      for (int k = 0; k < 2; ++k) {
        AsyncOperatorBuilder<uint64_t> builder("Brief", scope);
        auto [out, stream] = builder.add_output<uint64_t>();
        auto built = builder.build([](AsyncContext&, Caps) {});
        stream | probe_with(probe);
        weir::MutexLock lock(mu);
        if (k == 0) {
          buttons.push_back(std::move(built.button));
        } else {
          tokens.push_back(std::move(built.button).press_on_drop());
        }
      }
    });
    return step_until(worker, [&] { return probe.done(); });
  });
  ASSERT_TRUE(result.ok()) << result.status();
  for (bool done : *result) EXPECT_TRUE(done);
  for (auto& button : buttons) {
    button.press();
    EXPECT_TRUE(button.is_pressed());
  }
  tokens.clear();  // Each presses its button.
}

// Dropping a dataflow whose bodies wait in every way unwinds their fibers: every capability is
// released, every destructor on their stacks runs, and every stack goes back to the pool.
TEST(AsyncShutdownTest, DroppingADataflowMidBodyReleasesEverything) {
  Watchdog watchdog("DroppingADataflowMidBody");
  auto result = testing::run_workers(2, [](Worker& worker) {
    const int64_t capabilities_before = live_capabilities_on_this_thread();
    const FiberStats fibers_before = fiber_stats_on_this_thread();
    std::atomic<int> destroyed{0};
    std::atomic<int> waiting{0};
    std::atomic<bool> release_blocking{false};
    int pipe_fds[2];
    EXPECT_EQ(::pipe(pipe_fds), 0);

    const size_t index = worker.next_dataflow_index();
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      auto body_op = [&](const std::string& name, auto wait) {
        AsyncOperatorBuilder<uint64_t> builder(name, scope);
        auto in = builder.add_input(stream);
        auto [out, out_stream] = builder.add_output<uint64_t>();
        builder.build([&, in, out, wait](AsyncContext& ctx, Caps caps) mutable {
          Sentinel sentinel(&destroyed);
          auto owned = std::make_unique<std::vector<uint64_t>>(1000, 7);  // Leaks unless unwound.
          Capability<uint64_t> local = caps[0].delayed(5);
          out.give(local, 1);
          ++waiting;
          wait(ctx, in);
        });
      };
      body_op("Next", [](AsyncContext&, AsyncInput<uint64_t, uint64_t>& in) {
        for (;;) in.next();
      });
      body_op("Sleep", [](AsyncContext& ctx, auto&) { ctx.sleep_for(std::chrono::hours(1)); });
      body_op("Pipe", [&](AsyncContext& ctx, auto&) { (void)ctx.await_readable(pipe_fds[0]); });
      body_op("Blocking", [&](AsyncContext& ctx, auto&) {
        ctx.run_blocking([&] {
          while (!release_blocking.load()) std::this_thread::sleep_for(100us);
        });
        ctx.wait_until([] { return false; });
      });
      body_op("Forever", [](AsyncContext& ctx, auto&) { ctx.wait_until([] { return false; }); });
      return std::move(handle);
    });
    input.send(1);
    EXPECT_TRUE(step_until(worker, [&] { return waiting.load() == 5; }));
    step_idle(worker);
    const int64_t capabilities_during = live_capabilities_on_this_thread() - capabilities_before;
    const int64_t stacks_during =
        fiber_stats_on_this_thread().stacks_in_use - fibers_before.stacks_in_use;
    release_blocking = true;  // Unwinding waits for a blocking call that still runs.
    worker.drop_dataflow(index);
    const FiberStats fibers_after = fiber_stats_on_this_thread();
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    return std::tuple(capabilities_during, stacks_during, destroyed.load(),
                      live_capabilities_on_this_thread() - capabilities_before,
                      fibers_after.stacks_in_use - fibers_before.stacks_in_use,
                      fibers_after.live_fibers - fibers_before.live_fibers, worker.has_dataflows());
  });
  ASSERT_TRUE(result.ok()) << result.status();
  for (const auto& [caps_during, stacks_during, destroyed, caps_after, stacks_after, fibers_after,
                    remaining] : *result) {
    EXPECT_GE(caps_during, 10);  // Each body: its set's capability and a local one.
    EXPECT_EQ(stacks_during, 5);
    EXPECT_EQ(destroyed, 5);
    EXPECT_EQ(caps_after, 0);
    EXPECT_EQ(stacks_after, 0);
    EXPECT_EQ(fibers_after, 0);
    EXPECT_FALSE(remaining);
  }
}

}  // namespace
}  // namespace weir
