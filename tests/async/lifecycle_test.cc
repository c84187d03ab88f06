// Async operators whose bodies are dropped or fail while they wait: blocking calls that are still
// running, timers of waits that ended early, descriptors that close or hang up while awaited.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "testing/harness.h"
#include <gtest/gtest.h>

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

// A failure beside a blocking call that runs for 3 s is returned at once: execute does not wait
// for the call, which returns later (after the test releases it) and whose result is discarded.
TEST(AsyncBlockingTest, AFailureDoesNotWaitForARunningBlockingCall) {
  Watchdog watchdog("AFailureDoesNotWaitForARunningBlockingCall");
  auto latch = std::make_shared<Latch>();
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = run_failing_beside_a_blocking_call(latch, 3000ms);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find("Failer"), std::string::npos) << status;
  // The call was still waiting when execute returned: it sees the release, not its timeout.
  EXPECT_FALSE(latch->call_returned.load());
  latch->release();
  ASSERT_TRUE(latch->wait_returned());
  EXPECT_TRUE(latch->saw_release.load());
  EXPECT_LT(elapsed, 1500ms);
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

}  // namespace
}  // namespace weir
