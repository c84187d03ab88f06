// Async operators in a cluster of several processes (here: threads of this test process joined by
// an in-memory transport): the shutdown button counts presses from every worker of every process.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "testing/harness.h"
#include "testing/loopback_hub.h"
#include <gtest/gtest.h>

#include "weir/async/async_operator.h"
#include "weir/weir.h"

namespace weir {
namespace {

using Caps = std::span<CapabilitySet<uint64_t>>;
using testing::step_until;

using testing::LoopbackHub;

// 2 processes × 2 workers: the workers press one after another, across processes; no fiber
// unwinds before the last press, and then every one does and the dataflow completes.
TEST(AsyncClusterTest, ShutdownWaitsForEveryWorkerOfEveryProcess) {
  testing::Watchdog watchdog("ShutdownWaitsForEveryWorkerOfEveryProcess");
  constexpr size_t kProcesses = 2;
  constexpr size_t kWorkers = 2;
  constexpr size_t kTotal = kProcesses * kWorkers;
  LoopbackHub hub(kProcesses);
  std::atomic<size_t> presses{0};
  std::atomic<int> unwound{0};
  std::atomic<int> early{0};

  auto run_process = [&](size_t process) {
    Config config;
    config.workers = kWorkers;
    config.processes = kProcesses;
    config.process = process;
    config.transport = hub.factory();
    return execute(config, [&](Worker& worker) {
      ProbeHandle<uint64_t> probe;
      std::optional<ShutdownButton> button;
      bool started = false;
      worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
        AsyncOperatorBuilder<uint64_t> builder("Held", scope);
        auto [out, stream] = builder.add_output<uint64_t>();
        auto built = builder.build([&](AsyncContext& ctx, Caps) {
          started = true;
          struct Check {
            std::atomic<size_t>* presses;
            std::atomic<int>* unwound;
            std::atomic<int>* early;
            ~Check() {
              if (presses->load() < kTotal) ++*early;
              ++*unwound;
            }
          } check{&presses, &unwound, &early};
          ctx.wait_until([] { return false; });
        });
        button.emplace(std::move(built.button));
        stream | probe_with(probe);
      });
      // Global worker w presses once its body runs and w workers have pressed, whatever process
      // they are in. (A body that has not started when its worker presses never starts.)
      EXPECT_TRUE(step_until(worker, [&] { return started && presses.load() >= worker.index(); }));
      EXPECT_TRUE(probe.less_equal(0));
      presses.fetch_add(1);
      button->press();
      return step_until(worker, [&] { return probe.done(); });
    });
  };
  std::optional<absl::StatusOr<std::vector<bool>>> second;
  std::thread other([&] { second.emplace(run_process(1)); });
  auto first = run_process(0);
  other.join();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second->ok()) << second->status();
  for (bool done : *first) EXPECT_TRUE(done);
  for (bool done : **second) EXPECT_TRUE(done);
  EXPECT_EQ(unwound.load(), static_cast<int>(kTotal));
  EXPECT_EQ(early.load(), 0);
}

}  // namespace
}  // namespace weir
