// Nested scopes: iteration with product timestamps, regions, two levels, errors.

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "testing/harness.h"
#include <gtest/gtest.h>

#include "weir/weir.h"

namespace weir {
namespace {

using Out = std::vector<std::pair<uint64_t, uint64_t>>;

class NestedTest : public ::testing::TestWithParam<size_t> {
 protected:
  // Every worker sends x = 1..40 at time x % 3 into `build`, collects what comes out.
  template <class Build>
  Out run(Build build) {
    auto results = testing::run_workers(GetParam(), [&](Worker& worker) {
      Out seen;
      ProbeHandle<uint64_t> probe;
      auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
        auto [handle, stream] = new_input<uint64_t>(scope);
        build(scope, stream) |
            inspect_time([&](const uint64_t& t, const uint64_t& x) { seen.emplace_back(t, x); }) |
            probe_with(probe);
        return std::move(handle);
      });
      for (uint64_t t = 0; t < 3; ++t) {
        for (uint64_t x = 1; x <= 40; ++x) {
          if (x % 3 == t) input.send(x);
        }
        input.advance_to(t + 1);
        // Each epoch completes on its own: the loop inside reports when epoch t is done.
        testing::step_until(worker, [&] { return !probe.less_equal(t); });
      }
      input.close();
      testing::step_until(worker, [&] { return probe.done(); });
      return seen;
    });
    EXPECT_TRUE(results.ok()) << results.status();
    Out all;
    if (results.ok()) {
      for (auto& r : *results) all.insert(all.end(), r.begin(), r.end());
    }
    std::sort(all.begin(), all.end());
    return all;
  }
  template <class F>
  Out expect(F f) {
    Out out;
    for (size_t w = 0; w < GetParam(); ++w) {
      for (uint64_t x = 1; x <= 40; ++x) f(x % 3, x, out);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

// Collatz steps: iterate x -> x/2 or 3x+1 until 1; the result is (x, rounds taken).
TEST_P(NestedTest, IterativeLoopCountsRoundsPerEpoch) {
  using P = Product<uint64_t, uint64_t>;
  auto out = run([](Scope<uint64_t>& scope, Stream<uint64_t, uint64_t> stream) {
    return scope.iterative<uint64_t>([&](auto& inner) {
      auto [loop, cycle] = loop_variable<std::pair<uint64_t, uint64_t>>(inner, uint64_t{1});
      auto start = inner.enter(stream) | map([](uint64_t x) {
                     return std::pair<uint64_t, uint64_t>{x, x};
                   });
      auto step = start | concat(cycle) |
                  exchange([](const std::pair<uint64_t, uint64_t>& p) { return p.second; });
      auto [done, again] = step | branch([](const P&, const std::pair<uint64_t, uint64_t>& p) {
                             return p.second != 1;
                           });
      again | map([](std::pair<uint64_t, uint64_t> p) {
        p.second = p.second % 2 == 0 ? p.second / 2 : 3 * p.second + 1;
        return p;
      }) | connect_loop(loop);
      // Times inside are (epoch, round): record the round as the result.
      auto rounds = unary<uint64_t>(done, Pipeline{}, "Rounds", [](Capability<P>, OperatorInfo) {
        return [](auto& input, auto& output) {
          input.for_each([&](const InputCapability<P>& cap, auto& data) {
            auto session = output.session(cap);
            for (auto& p : data) session.give(p.first * 1000 + cap.time().inner);
          });
        };
      });
      return inner.leave(rounds);
    });
  });
  EXPECT_EQ(out, expect([](uint64_t t, uint64_t x, Out& o) {
              uint64_t y = x, r = 0;
              while (y != 1) {
                y = y % 2 == 0 ? y / 2 : 3 * y + 1;
                ++r;
              }
              o.emplace_back(t, x * 1000 + r);
            }));
}

TEST_P(NestedTest, RegionKeepsTimestamps) {
  auto out = run([](Scope<uint64_t>& scope, Stream<uint64_t, uint64_t> stream) {
    return scope.region([&](auto& inner) {
      return inner.leave(inner.enter(stream) | map([](uint64_t x) { return x + 1; }) |
                         exchange([](const uint64_t& x) { return x; }));
    });
  });
  EXPECT_EQ(out, expect([](uint64_t t, uint64_t x, Out& o) { o.emplace_back(t, x + 1); }));
}

TEST_P(NestedTest, TwoLevelsDeep) {
  // Outer loop: repeat the inner loop 3 times; inner loop: count down x to 0.
  using P1 = Product<uint64_t, uint64_t>;
  using P2 = Product<P1, uint64_t>;
  auto out = run([](Scope<uint64_t>& scope, Stream<uint64_t, uint64_t> stream) {
    return scope.iterative<uint64_t>([&](auto& outer) {
      auto [outer_loop, outer_cycle] = loop_variable<uint64_t>(outer, uint64_t{1});
      auto entered = outer.enter(stream) | concat(outer_cycle);
      auto inner_result = outer.template iterative<uint64_t>([&](auto& inner) {
        auto [loop, cycle] = loop_variable<uint64_t>(inner, uint64_t{1});
        auto body = inner.enter(entered) | concat(cycle);
        auto [zero, positive] = body | branch([](const P2&, const uint64_t& x) { return x > 0; });
        positive | map([](uint64_t x) { return x - 1; }) |
            exchange([](const uint64_t& x) { return x; }) | connect_loop(loop);
        // Leave with the inner round count as the value.
        auto rounds =
            unary<uint64_t>(zero, Pipeline{}, "InnerRounds", [](Capability<P2>, OperatorInfo) {
              return [](auto& input, auto& output) {
                input.for_each([&](const InputCapability<P2>& cap, auto& data) {
                  auto session = output.session(cap);
                  for (size_t i = 0; i < data.size(); ++i) session.give(cap.time().inner);
                });
              };
            });
        return inner.leave(rounds);
      });
      // Each pass feeds the round count + 1 back, three passes in all.
      auto [finished, more] = inner_result | branch_when([](const P1& t) { return t.inner < 2; });
      more | map([](uint64_t r) { return r + 1; }) | connect_loop(outer_loop);
      return outer.leave(finished);
    });
  });
  // x -> rounds x; then x+1 -> rounds x+1; then x+2 -> rounds x+2: the third pass leaves x + 2.
  EXPECT_EQ(out, expect([](uint64_t t, uint64_t x, Out& o) { o.emplace_back(t, x + 2); }));
}

INSTANTIATE_TEST_SUITE_P(Workers, NestedTest, ::testing::Values(1, 2, 4));

TEST(NestedScopeTest, CycleWithoutAdvanceInsideIsRejected) {
  absl::Status status = testing::run_workers(1, [](Worker& worker) {
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      scope.iterative<uint64_t>([&](auto& inner) {
        // A feedback that advances neither coordinate.
        auto [loop, cycle] = loop_variable<uint64_t>(inner, uint64_t{0});
        inner.enter(stream) | concat(cycle) | map([](uint64_t x) { return x; }) |
            connect_loop(loop);
      });
    });
  });
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("does not advance time"), std::string::npos) << status;
}

TEST(NestedScopeTest, IdleScopeIsNotScheduled) {
  // While another part of the dataflow runs 100 epochs, an operator inside an idle region (its
  // input open but silent) runs only when the dataflow starts.
  auto result = testing::run_workers(1, [](Worker& worker) {
    uint64_t runs = 0;
    ProbeHandle<uint64_t> probe;
    std::optional<InputHandle<uint64_t, uint64_t>> idle;
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      auto [idle_handle, other] = new_input<uint64_t>(scope);
      scope.region([&](auto& inner) {
        unary_frontier<uint64_t>(inner.enter(other), Pipeline{}, "Watcher",
                                 [&](auto, OperatorInfo) {
                                   return [&](auto& in, auto&) {
                                     ++runs;
                                     in.for_each([](const auto&, auto&) {});
                                   };
                                 });
      });
      stream | probe_with(probe);
      idle.emplace(std::move(idle_handle));
      return std::move(handle);
    });
    for (uint64_t round = 0; round < 100; ++round) {
      input.send(round);
      input.advance_to(round + 1);
      testing::step_until(worker, [&] { return !probe.less_than(round + 1); });
    }
    const uint64_t while_idle = runs;
    idle.reset();  // Closing the idle input changes the watcher's frontier: it runs again.
    input.close();
    testing::step_until(worker, [&] { return probe.done(); });
    while (worker.step_or_park(std::chrono::milliseconds(1))) {
    }
    return std::pair{while_idle, runs};
  });
  ASSERT_TRUE(result.ok());
  EXPECT_LE((*result)[0].first, 2u);
  EXPECT_GT((*result)[0].second, (*result)[0].first);
}

}  // namespace
}  // namespace weir
