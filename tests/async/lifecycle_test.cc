// Async operators whose bodies are dropped or fail while they wait: blocking calls that are still
// running, timers of waits that ended early, descriptors that close or hang up while awaited.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "testing/harness.h"
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "weir/async/async_operator.h"
#include "weir/weir.h"

namespace weir {
namespace {

using namespace std::chrono_literals;
using Caps = std::span<CapabilitySet<uint64_t>>;
using testing::step_until;
using testing::Watchdog;

// A latch a blocking call waits on and the test releases: shared, so a call that outlives the
// test's frame (a detached one) still finds it.
struct Latch {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  std::atomic<bool> call_started{false};
  std::atomic<bool> call_returned{false};
  // Set by the call: whether it saw the latch released (not its own timeout).
  std::atomic<bool> saw_release{false};

  void release() {
    {
      std::lock_guard lock(mu);
      released = true;
    }
    cv.notify_all();
  }
  // Waits for the release, at most `limit`; returns whether it was released.
  bool wait(std::chrono::milliseconds limit) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, limit, [&] { return released; });
  }
  // Waits for the call to return (bounded, so a bug fails rather than hangs).
  bool wait_returned(std::chrono::seconds limit = 10s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!call_returned.load()) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(1ms);
    }
    return true;
  }
};

// One dataflow: "Waiter" makes a blocking call that waits on `latch` (at most `limit`), and
// "Failer" fails once the call has started. Returns execute's status.
absl::Status run_failing_beside_a_blocking_call(std::shared_ptr<Latch> latch,
                                                std::chrono::milliseconds limit) {
  auto result = testing::run_workers(1, [latch, limit](Worker& worker) {
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      {
        AsyncOperatorBuilder<uint64_t> builder("Waiter", scope);
        builder.add_output<uint64_t>();
        builder.build([latch, limit](AsyncContext& ctx, Caps) {
          // An owning closure: it keeps the latch alive however long it runs.
          ctx.run_blocking_owned([latch, limit] {
            latch->call_started = true;
            latch->saw_release = latch->wait(limit);
            latch->call_returned = true;
          });
        });
      }
      {
        AsyncOperatorBuilder<uint64_t> builder("Failer", scope);
        builder.add_output<uint64_t>();
        builder.build([latch](AsyncContext& ctx, Caps) -> absl::Status {
          while (!latch->call_started.load()) ctx.sleep_for(1ms);
          return absl::UnavailableError("upstream went away");
        });
      }
    });
  });
  return result;
}

// ---- blocking calls ----

// A failure beside a blocking call that would run for 30 s is returned without waiting for it:
// the call returns later (after the test releases it) and its result is discarded. (What matters
// is that execute does not wait, which the call's state shows; how fast a failure is returned
// is for benchmarks, not for a test that may run under load.)
TEST(AsyncBlockingTest, AFailureDoesNotWaitForARunningBlockingCall) {
  Watchdog watchdog("AFailureDoesNotWaitForARunningBlockingCall");
  auto latch = std::make_shared<Latch>();
  constexpr auto kCallDuration = 30000ms;
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = run_failing_beside_a_blocking_call(latch, kCallDuration);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find("Failer"), std::string::npos) << status;
  // The call was still waiting when execute returned: it sees the release, not its timeout.
  EXPECT_FALSE(latch->call_returned.load());
  latch->release();
  ASSERT_TRUE(latch->wait_returned());
  EXPECT_TRUE(latch->saw_release.load());
  // Generous: well below the call's duration, whatever the load.
  EXPECT_LT(elapsed, kCallDuration / 2);
  // Its result discarded, the call and its closure are destroyed on the pool thread.
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (latch.use_count() > 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(latch.use_count(), 1);
}

// A call that never returns (until the test releases it, after execute returned) does not hang
// execute.
TEST(AsyncBlockingTest, ANeverReturningCallDoesNotHangExecute) {
  Watchdog watchdog("ANeverReturningCallDoesNotHangExecute");
  auto latch = std::make_shared<Latch>();
  absl::Status status = run_failing_beside_a_blocking_call(latch, std::chrono::hours(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_FALSE(latch->call_returned.load());
  latch->release();
  ASSERT_TRUE(latch->wait_returned());
  EXPECT_TRUE(latch->saw_release.load());
}

// A borrowing call (run_blocking) that takes a stop token: a drop stops it and waits for it,
// which returns at once.
TEST(AsyncBlockingTest, ADropStopsABorrowingCallThatTakesAStopToken) {
  Watchdog watchdog("ADropStopsABorrowingCall");
  auto result = testing::run_workers(1, [](Worker& worker) {
    std::atomic<bool> started{false};
    std::atomic<bool> saw_stop{false};
    const size_t index = worker.next_dataflow_index();
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      AsyncOperatorBuilder<uint64_t> builder("Stoppable", scope);
      builder.add_output<uint64_t>();
      builder.build([&](AsyncContext& ctx, Caps) {
        int local = 7;  // Borrowed by the call: the drop must wait for it.
        ctx.run_blocking([&](std::stop_token stop) {
          started = true;
          const auto until = std::chrono::steady_clock::now() + 30s;
          while (!stop.stop_requested() && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(100us);
          }
          saw_stop = stop.stop_requested() && local == 7;
        });
      });
    });
    EXPECT_TRUE(step_until(worker, [&] { return started.load(); }));
    const auto start = std::chrono::steady_clock::now();
    worker.drop_dataflow(index);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
    EXPECT_TRUE(saw_stop.load());  // The drop waited for the call: it saw its stop.
  });
  ASSERT_TRUE(result.ok()) << result;
}

// At most max_blocking_calls calls of one operator run at once, over all its workers; a call
// still waiting for its turn when its operator is dropped never runs.
TEST(AsyncBlockingTest, AnOperatorsCallsInFlightAreBounded) {
  Watchdog watchdog("AnOperatorsCallsInFlightAreBounded");
  auto latch = std::make_shared<Latch>();
  auto running = std::make_shared<std::atomic<int>>(0);
  auto most = std::make_shared<std::atomic<int>>(0);
  auto calls = std::make_shared<std::atomic<int>>(0);
  auto status = testing::run_workers(3, [&](Worker& worker) {
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      {
        AsyncOperatorBuilder<uint64_t> builder("Bounded", scope);
        builder.add_output<uint64_t>();
        builder.set_max_blocking_calls(2);
        builder.build([latch, running, most, calls](AsyncContext& ctx, Caps) {
          ctx.run_blocking_owned([latch, running, most, calls] {
            ++*calls;
            const int now = ++*running;
            int seen = most->load();
            while (now > seen && !most->compare_exchange_weak(seen, now)) {
            }
            latch->call_started = true;
            latch->wait(std::chrono::hours(1));
            --*running;
          });
        });
      }
      {
        // Another operator's calls run meanwhile: the bounded one does not take the pool.
        AsyncOperatorBuilder<uint64_t> builder("Other", scope);
        builder.add_output<uint64_t>();
        builder.build([calls](AsyncContext& ctx, Caps) -> absl::Status {
          const int seen = ctx.run_blocking_owned([calls] { return calls->load(); });
          (void)seen;
          // Fail once the bounded operator has its two calls running.
          while (calls->load() < 2) ctx.sleep_for(1ms);
          return absl::AbortedError("done");
        });
      }
    });
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
  // Let the two running calls return; the third, abandoned before it started, never runs.
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(running->load(), 2);
  latch->release();
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (running->load() > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(1ms);
  }
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(running->load(), 0);
  EXPECT_EQ(most->load(), 2);
  EXPECT_EQ(calls->load(), 2);
}

// A borrowing call still queued behind the operator's bound when its body is unwound never runs,
// so the unwinding does not wait for it: here worker 0's owning call holds the operator's only
// slot and never returns, and worker 1's borrowing call waits behind it when a failure drops
// the dataflow.
TEST(AsyncBlockingTest, AQueuedBorrowingCallDoesNotHangTheDrop) {
  Watchdog watchdog("AQueuedBorrowingCallDoesNotHangTheDrop", 20s);
  auto latch = std::make_shared<Latch>();
  auto borrowed_ran = std::make_shared<std::atomic<bool>>(false);
  auto queued = std::make_shared<std::atomic<bool>>(false);
  auto status = testing::run_workers(2, [&](Worker& worker) {
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      {
        AsyncOperatorBuilder<uint64_t> builder("Bounded", scope);
        builder.add_output<uint64_t>();
        builder.set_max_blocking_calls(1);
        builder.build([latch, borrowed_ran, queued](AsyncContext& ctx, Caps) {
          if (ctx.worker_index() == 0) {
            ctx.run_blocking_owned([latch] {
              latch->call_started = true;
              latch->wait(std::chrono::hours(1));
              latch->call_returned = true;
            });
            return;
          }
          while (!latch->call_started.load()) ctx.sleep_for(1ms);
          int local = 7;
          queued->store(true);
          ctx.run_blocking([&] { borrowed_ran->store(local == 7); });
        });
      }
      {
        AsyncOperatorBuilder<uint64_t> builder("Failer", scope);
        builder.add_output<uint64_t>();
        builder.build([queued](AsyncContext& ctx, Caps) -> absl::Status {
          while (!queued->load()) ctx.sleep_for(1ms);
          ctx.sleep_for(10ms);  // The borrowing call waits for its turn.
          return absl::AbortedError("dropping");
        });
      }
    });
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
  EXPECT_FALSE(latch->call_returned.load());
  latch->release();
  ASSERT_TRUE(latch->wait_returned());
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(borrowed_ran->load());  // Abandoned before it started: it never ran.
}

// Calls started with start_blocking_owned run at once, side by side (each of the three here
// returns only once all three have started), and get() hands back each one's result.
TEST(AsyncBlockingTest, StartedCallsRunTogetherAndGetReturnsEachResult) {
  Watchdog watchdog("StartedCallsRunTogetherAndGetReturnsEachResult");
  auto started = std::make_shared<std::atomic<int>>(0);
  std::vector<int> results;
  auto status = testing::run_workers(1, [&](Worker& worker) {
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      AsyncOperatorBuilder<uint64_t> builder("Prefetch", scope);
      builder.add_output<uint64_t>();
      builder.build([started, &results](AsyncContext& ctx, Caps) {
        auto call = [started](int i) {
          return [started, i] {
            ++*started;
            const auto until = std::chrono::steady_clock::now() + 10s;
            while (started->load() < 3 && std::chrono::steady_clock::now() < until) {
              std::this_thread::sleep_for(1ms);
            }
            return started->load() == 3 ? i : -1;
          };
        };
        std::vector<BlockingFuture<decltype(call(0))>> futures;
        for (int i = 0; i < 3; ++i) futures.push_back(ctx.start_blocking_owned(call(i)));
        for (auto& future : futures) results.push_back(future.get(ctx));
      });
    });
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(results, (std::vector<int>{0, 1, 2}));
}

// A future destroyed before its call returns (the body returned without get(), as one unwound
// does) abandons the call: the operator completes without waiting for it, and the call sees its
// stop token stopped.
TEST(AsyncBlockingTest, AFutureLeftBehindAbandonsItsCall) {
  Watchdog watchdog("AFutureLeftBehindAbandonsItsCall");
  auto latch = std::make_shared<Latch>();
  auto status = testing::run_workers(1, [&](Worker& worker) {
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      AsyncOperatorBuilder<uint64_t> builder("LeftBehind", scope);
      builder.add_output<uint64_t>();
      builder.build([latch](AsyncContext& ctx, Caps) {
        auto future = ctx.start_blocking_owned([latch](std::stop_token stop) {
          latch->call_started = true;
          const auto until = std::chrono::steady_clock::now() + 10s;
          while (!stop.stop_requested() && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(1ms);
          }
          latch->saw_release = stop.stop_requested();
          latch->call_returned = true;
        });
        while (!latch->call_started.load()) ctx.sleep_for(1ms);
      });
    });
  });
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_TRUE(latch->wait_returned());
  EXPECT_TRUE(latch->saw_release.load()) << "the call's stop token was stopped";
}

// Moving a future onto itself keeps its call: the call still runs and get() returns its result.
// Here the call waits behind the operator's bound (another call holds its only slot) when the
// future is moved, so abandoning it would mean it never runs.
TEST(AsyncBlockingTest, AFutureMovedOntoItselfKeepsItsCall) {
  Watchdog watchdog("AFutureMovedOntoItselfKeepsItsCall");
  auto ran = std::make_shared<std::atomic<bool>>(false);
  int result = 0;
  auto status = testing::run_workers(1, [&](Worker& worker) {
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      AsyncOperatorBuilder<uint64_t> builder("SelfMove", scope);
      builder.add_output<uint64_t>();
      builder.set_max_blocking_calls(1);
      builder.build([ran, &result](AsyncContext& ctx, Caps) {
        auto first = ctx.start_blocking_owned([] {
          std::this_thread::sleep_for(20ms);
          return 1;
        });
        auto second = ctx.start_blocking_owned([ran] {
          ran->store(true);
          return 42;
        });
        auto& same = second;
        second = std::move(same);
        result = second.get(ctx);
        (void)first.get(ctx);
      });
    });
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(ran->load());
  EXPECT_EQ(result, 42);
}

// A future's result can be taken once: a second get() is a bug, which aborts naming it (not a
// null dereference).
TEST(AsyncBlockingDeathTest, GettingAFutureTwice) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        (void)testing::run_workers(1, [](Worker& worker) {
          worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
            AsyncOperatorBuilder<uint64_t> builder("Twice", scope);
            builder.add_output<uint64_t>();
            builder.build([](AsyncContext& ctx, Caps) {
              auto future = ctx.start_blocking_owned([] { return 1; });
              (void)future.get(ctx);
              (void)future.get(ctx);
            });
          });
          while (worker.step_or_park(1ms)) {
          }
        });
      },
      "BlockingFuture.*get.*once");
}

// Makes pthread_create fail for the threads started while it lives: every new thread asks for a
// stack larger than the address space.
class NoNewThreads {
 public:
  NoNewThreads() {
    pthread_getattr_default_np(&saved_);
    pthread_attr_t huge;
    pthread_attr_init(&huge);
    pthread_attr_setstacksize(&huge, size_t{1} << 47);
    pthread_setattr_default_np(&huge);
    pthread_attr_destroy(&huge);
  }
  NoNewThreads(const NoNewThreads&) = delete;
  NoNewThreads& operator=(const NoNewThreads&) = delete;
  ~NoNewThreads() {
    pthread_setattr_default_np(&saved_);
    pthread_attr_destroy(&saved_);
  }

 private:
  pthread_attr_t saved_;
};

// The pool cannot start a thread for a call (a limit on threads, no memory for its stack) and has
// none: the call fails with that error and never runs, also not once the pool has threads again
// (a borrowing call's function is gone by then). Run in a fresh process (the pool has no thread
// yet), so the call's push is the one that starts a thread.
TEST(AsyncBlockingDeathTest, ACallNoThreadCanBeStartedForFailsAndNeverRuns) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        auto ran = std::make_shared<std::atomic<bool>>(false);
        std::string failure;
        int later = 0;
        auto status = testing::run_workers(1, [&](Worker& worker) {
          worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
            AsyncOperatorBuilder<uint64_t> builder("NoThread", scope);
            builder.add_output<uint64_t>();
            builder.build([ran, &failure, &later](AsyncContext& ctx, Caps) {
              try {
                std::optional<NoNewThreads> no_threads(std::in_place);
                auto future = ctx.start_blocking_owned([ran] { ran->store(true); });
                no_threads.reset();
                future.get(ctx);
              } catch (const std::system_error& e) {
                failure = e.what();
              }
              // Once threads start again, a call runs (after anything queued before it).
              later = ctx.run_blocking_owned([] { return 7; });
            });
          });
          while (worker.step_or_park(1ms)) {
          }
        });
        const bool ok = status.ok() && !failure.empty() && !ran->load() && later == 7;
        std::fprintf(stderr, "status: %s; failure: %s; the failed call ran: %d; later: %d\n",
                     status.ToString().c_str(), failure.c_str(), ran->load() ? 1 : 0, later);
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "cannot start a thread");
}

// ---- timers ----

// A wait with a deadline that returns early (here: 20000 times) cancels its timer; the
// reactor keeps none of them. So does a sleep unwound by a drop.
TEST(AsyncTimerTest, WaitsThatReturnEarlyLeaveNoTimers) {
  Watchdog watchdog("WaitsThatReturnEarlyLeaveNoTimers");
  constexpr int kWaits = 20000;
  const size_t before = async_timers_pending_in_process();
  auto result = testing::run_workers(1, [&](Worker& worker) {
    std::atomic<int> waits{0};
    size_t during = 0;
    std::atomic<bool> sleeping{false};
    const size_t index = worker.next_dataflow_index();
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      {
        AsyncOperatorBuilder<uint64_t> builder("Early", scope);
        builder.add_output<uint64_t>();
        builder.build([&](AsyncContext& ctx, Caps) {
          for (int i = 0; i < kWaits; ++i) {
            bool first = true;
            ctx.sync_activator().activate();  // Wakes the wait below at once.
            const bool ready =
                ctx.wait_until([&] { return !std::exchange(first, false); },
                               std::chrono::steady_clock::now() + std::chrono::hours(1));
            EXPECT_TRUE(ready);
            ++waits;
          }
          during = async_timers_pending_in_process();
        });
      }
      {
        AsyncOperatorBuilder<uint64_t> builder("Sleeper", scope);
        builder.add_output<uint64_t>();
        builder.build([&](AsyncContext& ctx, Caps) {
          sleeping = true;
          ctx.sleep_for(std::chrono::hours(1));
        });
      }
    });
    EXPECT_TRUE(step_until(worker, [&] { return waits.load() == kWaits && sleeping.load(); }));
    // The sleeper's timer, and nothing of the early waits.
    EXPECT_LE(during, before + 1);
    worker.drop_dataflow(index);
    EXPECT_EQ(async_timers_pending_in_process(), before);
  });
  ASSERT_TRUE(result.ok()) << result;
}

// Sleeps of every length: zero and negative ones yield and return, and the longest one
// (nanoseconds::max(), which now() + d would overflow) sleeps until the dataflow is dropped,
// leaving no timer behind.
TEST(AsyncTimerTest, ZeroNegativeAndUnendingSleeps) {
  Watchdog watchdog("ZeroNegativeAndUnendingSleeps");
  const size_t before = async_timers_pending_in_process();
  auto result = testing::run_workers(1, [&](Worker& worker) {
    std::atomic<int> short_sleeps{0};
    std::atomic<bool> sleeping{false};
    std::atomic<bool> woke{false};
    const size_t index = worker.next_dataflow_index();
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      AsyncOperatorBuilder<uint64_t> builder("Sleeper", scope);
      builder.add_output<uint64_t>();
      builder.build([&](AsyncContext& ctx, Caps) {
        ctx.sleep_for(0ns);
        ++short_sleeps;
        ctx.sleep_for(-1h);
        ++short_sleeps;
        ctx.sleep_for(std::chrono::nanoseconds::min());
        ++short_sleeps;
        sleeping = true;
        ctx.sleep_for(std::chrono::nanoseconds::max());
        woke = true;
      });
    });
    EXPECT_TRUE(step_until(worker, [&] { return sleeping.load(); }));
    EXPECT_EQ(short_sleeps.load(), 3);
    for (int i = 0; i < 20; ++i) worker.step_or_park(1ms);
    EXPECT_FALSE(woke.load()) << "sleep_for(nanoseconds::max()) returned";
    worker.drop_dataflow(index);
    EXPECT_EQ(async_timers_pending_in_process(), before);
  });
  ASSERT_TRUE(result.ok()) << result;
}

// ---- descriptors ----

// Runs one body that awaits `fd` readable on one worker while `act` runs on another thread once
// the body waits; returns what await_readable returned (nullopt: it never woke within 5 s).
std::optional<absl::Status> await_readable_while(int fd, std::function<void()> act) {
  std::optional<absl::Status> awaited;
  auto result = testing::run_workers(1, [&](Worker& worker) {
    std::atomic<bool> waiting{false};
    std::atomic<bool> woke{false};
    worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      AsyncOperatorBuilder<uint64_t> builder("Reader", scope);
      builder.add_output<uint64_t>();
      builder.build([&, fd](AsyncContext& ctx, Caps) {
        waiting = true;
        awaited = ctx.await_readable(fd);
        woke = true;
      });
    });
    EXPECT_TRUE(step_until(worker, [&] { return waiting.load(); }));
    // Let the body reach epoll before the descriptor changes.
    for (int i = 0; i < 10; ++i) worker.step_or_park(1ms);
    std::thread actor(std::move(act));
    step_until(
        worker, [&] { return woke.load(); }, 5s);
    actor.join();
    if (!woke.load()) {
      // Let the body go: the test already failed.
      worker.drop_dataflow(0);
    }
  });
  EXPECT_TRUE(result.ok()) << result;
  return awaited;
}

TEST(AsyncDescriptorTest, AHangUpWakesTheWaiterWithAnErrorNamingTheDescriptor) {
  Watchdog watchdog("AHangUpWakesTheWaiter");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  auto awaited = await_readable_while(fds[0], [&] { ::close(fds[1]); });
  ASSERT_TRUE(awaited.has_value());
  EXPECT_EQ(awaited->code(), absl::StatusCode::kUnavailable) << *awaited;
  EXPECT_NE(awaited->message().find("file descriptor " + std::to_string(fds[0]) + " hung up"),
            std::string::npos)
      << *awaited;
  EXPECT_NE(awaited->message().find("Reader"), std::string::npos) << *awaited;
  ::close(fds[0]);
}

TEST(AsyncDescriptorTest, DataBeforeAHangUpIsReadFirst) {
  Watchdog watchdog("DataBeforeAHangUpIsReadFirst");
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  auto awaited = await_readable_while(fds[0], [&] {
    EXPECT_EQ(::write(fds[1], "x", 1), 1);
    ::close(fds[1]);
  });
  ASSERT_TRUE(awaited.has_value());
  EXPECT_TRUE(awaited->ok()) << *awaited;
  char byte = 0;
  EXPECT_EQ(::read(fds[0], &byte, 1), 1);
  EXPECT_EQ(byte, 'x');
  ::close(fds[0]);
}

// epoll forgets a descriptor closed while it is watched, without an event: the reactor notices
// within kClosedDescriptorCheck.
TEST(AsyncDescriptorTest, ClosingTheAwaitedDescriptorWakesTheWaiterWithAnError) {
  Watchdog watchdog("ClosingTheAwaitedDescriptor");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const int awaited_fd = fds[0];
  auto awaited = await_readable_while(awaited_fd, [&] { ::close(awaited_fd); });
  ASSERT_TRUE(awaited.has_value()) << "the waiter never woke";
  EXPECT_EQ(awaited->code(), absl::StatusCode::kUnavailable) << *awaited;
  EXPECT_NE(
      awaited->message().find("file descriptor " + std::to_string(awaited_fd) + " was closed"),
      std::string::npos)
      << *awaited;
  ::close(fds[1]);
}

// A descriptor closed while awaited whose open file lives on (a dup of it here; a forked child
// or a passed descriptor elsewhere) stays in the reactor's epoll set: the kernel keeps the
// registration as long as the file is open. Once its number names a new file, that stale
// registration must not wake the new file's waiter: here the old pipe turns readable, and the
// new one only hangs up later.
TEST(AsyncDescriptorTest, AStaleRegistrationOfAClosedNumberWakesNobody) {
  Watchdog watchdog("AStaleRegistrationOfAClosedNumberWakesNobody");
  int old_pipe[2];
  ASSERT_EQ(::pipe(old_pipe), 0);
  const int number = old_pipe[0];
  const int kept = ::dup(number);  // Keeps the old pipe's read end open.
  ASSERT_GE(kept, 0);
  auto closed = await_readable_while(number, [&] { ::close(number); });
  ASSERT_TRUE(closed.has_value());
  ASSERT_NE(closed->message().find("was closed"), std::string::npos) << *closed;
  int new_pipe[2];
  ASSERT_EQ(::pipe(new_pipe), 0);
  if (new_pipe[0] != number) {  // The number names the new pipe now.
    ASSERT_EQ(::dup2(new_pipe[0], number), number);
    ::close(new_pipe[0]);
  }
  auto woken = await_readable_while(number, [&] {
    EXPECT_EQ(::write(old_pipe[1], "x", 1), 1);  // Readable: the old pipe, not the awaited one.
    std::this_thread::sleep_for(300ms);
    ::close(new_pipe[1]);
  });
  ASSERT_TRUE(woken.has_value());
  // Woken by the new pipe's hang-up, not by the old pipe's byte.
  EXPECT_EQ(woken->code(), absl::StatusCode::kUnavailable) << *woken;
  EXPECT_NE(woken->message().find("hung up"), std::string::npos) << *woken;
  ::close(number);
  ::close(kept);
  ::close(old_pipe[1]);
}

}  // namespace
}  // namespace weir
