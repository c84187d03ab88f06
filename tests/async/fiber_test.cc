// Fibers: suspension and resumption, exceptions, unwinding of a suspended fiber, stack reuse and
// the guard page.

#include "weir/async/fiber.h"

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace weir {
namespace {

TEST(FiberTest, RunsUntilSuspendedAndContinuesWhereItLeft) {
  std::vector<int> trace;
  std::unique_ptr<Fiber> fiber;
  fiber = std::make_unique<Fiber>([&] {
    trace.push_back(1);
    fiber->suspend();
    trace.push_back(3);
    fiber->suspend();
    trace.push_back(5);
  });
  EXPECT_FALSE(fiber->has_started());
  fiber->resume();
  trace.push_back(2);
  EXPECT_FALSE(fiber->is_done());
  fiber->resume();
  trace.push_back(4);
  fiber->resume();
  EXPECT_TRUE(fiber->is_done());
  EXPECT_EQ(trace, (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(fiber->exception(), nullptr);
}

TEST(FiberTest, CurrentNamesTheRunningFiber) {
  Fiber* seen = nullptr;
  std::unique_ptr<Fiber> fiber;
  fiber = std::make_unique<Fiber>([&] { seen = Fiber::current(); });
  EXPECT_EQ(Fiber::current(), nullptr);
  fiber->resume();
  EXPECT_EQ(seen, fiber.get());
  EXPECT_EQ(Fiber::current(), nullptr);
}

TEST(FiberTest, KeepsTheExceptionThatEscapedItsEntry) {
  std::unique_ptr<Fiber> fiber;
  fiber = std::make_unique<Fiber>([&] {
    try {
      throw std::logic_error("inner");  // Caught on the fiber's own stack.
    } catch (const std::logic_error&) {
    }
    fiber->suspend();
    throw std::runtime_error("boom");
  });
  fiber->resume();
  EXPECT_EQ(fiber->exception(), nullptr);
  fiber->resume();
  ASSERT_TRUE(fiber->is_done());
  ASSERT_NE(fiber->exception(), nullptr);
  try {
    std::rethrow_exception(fiber->exception());
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "boom");
  }
}

struct Sentinel {
  int* destroyed;
  ~Sentinel() { ++*destroyed; }
};

TEST(FiberTest, DestroyingASuspendedFiberRunsItsDestructors) {
  int destroyed = 0;
  bool after_suspend = false;
  {
    std::unique_ptr<Fiber> fiber;
    fiber = std::make_unique<Fiber>([&] {
      Sentinel outer{&destroyed};
      auto inner = std::make_unique<Sentinel>(Sentinel{&destroyed});
      --destroyed;  // The temporary moved into `inner` was destroyed once.
      fiber->suspend();
      after_suspend = true;
    });
    fiber->resume();
    EXPECT_EQ(destroyed, 0);
  }
  EXPECT_EQ(destroyed, 2);
  EXPECT_FALSE(after_suspend);
}

TEST(FiberTest, AFiberThatNeverRanIsDroppedWithoutRunning) {
  bool ran = false;
  const auto before = fiber_stats_on_this_thread();
  {
    Fiber fiber([&] { ran = true; });
  }
  EXPECT_FALSE(ran);
  const auto after = fiber_stats_on_this_thread();
  EXPECT_EQ(after.live_fibers, before.live_fibers);
  EXPECT_EQ(after.stacks_in_use, before.stacks_in_use);
}

TEST(FiberTest, StacksAreReturnedToThePoolAndReused) {
  const auto before = fiber_stats_on_this_thread();
  for (int i = 0; i < 100; ++i) {
    std::unique_ptr<Fiber> fiber;
    fiber = std::make_unique<Fiber>([&] { fiber->suspend(); }, 64 * 1024);
    fiber->resume();
    EXPECT_EQ(fiber_stats_on_this_thread().stacks_in_use, before.stacks_in_use + 1);
    if (i % 2 == 0) fiber->resume();  // Finishes; odd ones are unwound instead.
  }
  const auto after = fiber_stats_on_this_thread();
  EXPECT_EQ(after.stacks_in_use, before.stacks_in_use);
  EXPECT_EQ(after.live_fibers, before.live_fibers);
  EXPECT_LE(after.stacks_mapped - before.stacks_mapped, 1);
}

TEST(FiberTest, FibersNest) {
  std::vector<int> trace;
  std::unique_ptr<Fiber> outer, inner;
  inner = std::make_unique<Fiber>([&] {
    trace.push_back(2);
    inner->suspend();
    trace.push_back(5);
  });
  outer = std::make_unique<Fiber>([&] {
    trace.push_back(1);
    inner->resume();
    trace.push_back(3);
    EXPECT_EQ(Fiber::current(), outer.get());
    outer->suspend();
    inner->resume();
    trace.push_back(6);
  });
  outer->resume();
  trace.push_back(4);
  outer->resume();
  EXPECT_TRUE(outer->is_done());
  EXPECT_TRUE(inner->is_done());
  EXPECT_EQ(trace, (std::vector<int>{1, 2, 3, 4, 5, 6}));
}

// Recursion that the compiler cannot turn into a loop.
__attribute__((noinline)) int recurse(volatile char* previous, int depth) {
  volatile char frame[1024];
  frame[0] = static_cast<char>(depth);
  if (previous != nullptr) frame[1] = previous[0];
  if (depth < 0) return 0;  // Never: keeps the compiler from calling the recursion infinite.
  return recurse(frame, depth + 1) + frame[1];
}

TEST(FiberDeathTest, OverflowingTheStackHitsTheGuardPage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Fiber fiber([] { recurse(nullptr, 0); }, size_t{64} * 1024);
        fiber.resume();
      },
      "");
}

}  // namespace
}  // namespace weir
