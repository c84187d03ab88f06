// Fibers: suspension and resumption, exceptions, unwinding of a suspended fiber, stack reuse and
// the guard page.

#include "weir/async/fiber.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "deep_recursion.h"
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

// ---- exception state per fiber ----

// The C++ runtime keeps the exceptions being handled (std::current_exception, what `throw;`
// rethrows) and the count of uncaught ones per thread. Fibers that suspend inside a catch handler
// each keep their own: leaving one fiber's handler must not destroy another's exception.
TEST(FiberExceptionTest, HandlersThatSuspendKeepTheirOwnException) {
  constexpr int kFibers = 16;
  constexpr int kRounds = 20;
  std::vector<std::unique_ptr<Fiber>> fibers(kFibers);
  std::vector<std::string> wrong;
  for (int f = 0; f < kFibers; ++f) {
    fibers[f] = std::make_unique<Fiber>([&, f] {
      for (int round = 0; round < kRounds; ++round) {
        const std::string mine = "fiber " + std::to_string(f) + " round " + std::to_string(round);
        try {
          try {
            throw std::runtime_error(mine);
          } catch (const std::runtime_error& e) {
            // Every other fiber enters and leaves its own handler meanwhile.
            fibers[f]->suspend();
            if (e.what() != mine) wrong.push_back(mine + " saw " + e.what());
            try {
              std::rethrow_exception(std::current_exception());
            } catch (const std::runtime_error& current) {
              if (current.what() != mine) {
                wrong.push_back(mine + ": current_exception() is " + current.what());
              }
            }
            fibers[f]->suspend();
            throw;  // Rethrows the exception this handler caught.
          }
        } catch (const std::runtime_error& rethrown) {
          if (rethrown.what() != mine)
            wrong.push_back(mine + ": throw; rethrew " + rethrown.what());
        }
        if (std::uncaught_exceptions() != 0) wrong.push_back(mine + ": uncaught exceptions");
        fibers[f]->suspend();
      }
    });
  }
  for (bool any = true; any;) {
    any = false;
    for (auto& fiber : fibers) {
      if (!fiber->is_done()) {
        fiber->resume();
        any = true;
      }
    }
  }
  for (auto& fiber : fibers) EXPECT_EQ(fiber->exception(), nullptr);
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " wrong, the first: " << wrong.front();
  EXPECT_EQ(std::current_exception(), nullptr);
  EXPECT_EQ(std::uncaught_exceptions(), 0);
}

// A destructor that suspends while an exception unwinds its fiber's stack: the exception is
// uncaught in that fiber only, not on the thread's own stack or in other fibers.
TEST(FiberExceptionTest, UncaughtExceptionsAreCountedPerFiber) {
  std::unique_ptr<Fiber> unwinding, other;
  int uncaught_while_unwinding = -1;
  int uncaught_elsewhere = -1;
  int uncaught_on_thread = -1;
  struct SuspendsInDestructor {
    Fiber* fiber;
    int* seen;
    ~SuspendsInDestructor() {
      fiber->suspend();
      *seen = std::uncaught_exceptions();
    }
  };
  unwinding = std::make_unique<Fiber>([&] {
    try {
      SuspendsInDestructor guard{unwinding.get(), &uncaught_while_unwinding};
      throw std::runtime_error("unwinding");
    } catch (const std::runtime_error&) {
    }
  });
  other = std::make_unique<Fiber>([&] { uncaught_elsewhere = std::uncaught_exceptions(); });
  unwinding->resume();  // Suspends in the guard's destructor, mid-unwind.
  uncaught_on_thread = std::uncaught_exceptions();
  other->resume();
  unwinding->resume();
  EXPECT_TRUE(unwinding->is_done());
  EXPECT_EQ(unwinding->exception(), nullptr);
  EXPECT_EQ(uncaught_on_thread, 0);
  EXPECT_EQ(uncaught_elsewhere, 0);
  EXPECT_EQ(uncaught_while_unwinding, 1);
}

using testing::recurse;

TEST(FiberDeathTest, OverflowingTheStackHitsTheGuardPage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Fiber fiber([] { recurse(nullptr, 0); }, size_t{64} * 1024);
        fiber.resume();
      },
      "");
}

// An overflow names the fiber that overflowed.
TEST(FiberDeathTest, AnOverflowNamesTheFiber) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Fiber fiber([] { recurse(nullptr, 0); }, size_t{64} * 1024, "the fiber 'Deep'");
        fiber.resume();
      },
      "stack overflow in the fiber 'Deep': its stack of [0-9]+ bytes is exhausted");
}

// A frame with a local larger than the old one-page guard, at the bottom of one stack, while
// other fibers' stacks are mapped next to it: it faults in its own guard region (the guard is
// 64 KiB, and this file is built with -fstack-clash-protection) instead of writing into a
// neighbour's stack.
__attribute__((noinline)) void big_local(int depth) {
  volatile char local[68 * 1024];
  local[0] = static_cast<char>(depth);
  if (depth > 0) big_local(depth - 1);
  local[sizeof(local) - 1] = local[0];
}

TEST(FiberDeathTest, ABigLocalFaultsInItsOwnGuardRegion) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        std::vector<std::unique_ptr<Fiber>> neighbours;
        std::vector<int> sentinels(64, 0);
        for (int i = 0; i < 64; ++i) {
          neighbours.push_back(std::make_unique<Fiber>(
              [&sentinels, &neighbours, i] {
                volatile int mine = 1000 + i;
                neighbours[i]->suspend();
                sentinels[i] = mine;
              },
              size_t{64} * 1024));
          neighbours.back()->resume();
        }
        // Six such frames: more than the stack, also a sanitizer build's 4 times larger one.
        Fiber deep([] { big_local(5); }, size_t{64} * 1024, "the fiber 'Big'");
        deep.resume();
        for (int i = 0; i < 64; ++i) neighbours[i]->resume();
        for (int i = 0; i < 64; ++i) {
          if (sentinels[i] != 1000 + i) {
            std::fprintf(stderr, "neighbour %d overwritten\n", i);
            std::abort();
          }
        }
      },
      "stack overflow in the fiber 'Big'");
}

// Past the process's stack limit a fiber fails to start, with an error saying why.
TEST(FiberTest, AFiberPastTheStackLimitFailsToStart) {
  // 96 KiB: a size no other test uses, so no pooled stack fits and each fiber maps one.
  const size_t previous = set_fiber_stack_limit(fiber_stacks_mapped_in_process() + 2);
  std::vector<std::unique_ptr<Fiber>> started;
  for (int i = 0; i < 3; ++i) {
    started.push_back(
        std::make_unique<Fiber>([&started, i] { started[i]->suspend(); }, size_t{96} * 1024));
    started.back()->resume();
  }
  set_fiber_stack_limit(previous);
  EXPECT_EQ(started[0]->exception(), nullptr);
  EXPECT_EQ(started[1]->exception(), nullptr);
  ASSERT_TRUE(started[2]->is_done());
  ASSERT_NE(started[2]->exception(), nullptr);
  try {
    std::rethrow_exception(started[2]->exception());
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("fiber stacks mapped, the limit"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace weir
