// Frames from another process are checked against the channel they name before use (issue 14,
// items 1 and 3): a progress frame on a data channel, a data frame on a progress channel,
// progress naming locations a dataflow does not have (node UINT32_MAX, a port that wraps the
// location index), and nested-scope paths that lead nowhere are errors on the link that carried
// them, never a crash or an abort of the process.
//
// Two "processes" of one worker run in this binary over the loopback transport. Each worker,
// once its dataflow is built, hands its own process a forged frame as a transport thread would
// (ProcessShared is the TransportReceiver), checks the answer, and then fails its process so that
// the execution ends.

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "testing/harness.h"
#include "testing/loopback_hub.h"
#include <gtest/gtest.h>

#include "weir/weir.h"

namespace weir {
namespace {

using testing::LoopbackHub;

bool mentions(const absl::Status& status, const std::string& words) {
  return status.message().find(words) != std::string::npos;
}

// What a worker learns about the dataflow it built: the channel ids it was given.
// The dataflow every process of these tests builds: an input exchanged to a probe and, when
// `nested`, into an iterative scope (whose progress crosses processes as nested batches).
auto exchange_dataflow(Scope<uint64_t>& scope, bool nested) {
  auto [handle, stream] = new_input<uint64_t>(scope);
  auto exchanged = stream | exchange([](const uint64_t& x) { return x; });
  exchanged | probe();
  if (nested) {
    scope.template iterative<uint64_t>([&](auto& loop_scope) {
      auto [loop, cycle] = loop_variable<uint64_t>(loop_scope, uint64_t{1});
      auto body = loop_scope.enter(exchanged) | concat(cycle) |
                  filter([](const uint64_t& x) { return x > 100; });
      body | connect_loop(loop);
    });
  }
  return std::move(handle);
}

struct Built {
  uint64_t first = 0;     // Before the dataflow: every id of the dataflow is above it.
  uint64_t progress = 0;  // The dataflow's progress channel (the last id it takes).
};

// input -> exchange -> probe, plus (nested = true) an iterative scope.
using Forge = std::function<absl::Status(ProcessShared& process, const Built& built)>;

// Runs two processes; on process `target`, once built, calls `forge` and records its status in
// `seen`. Afterwards both processes fail ("test done"), so neither waits for the other.
std::optional<absl::Status> run_forged(size_t target, const Forge& forge, bool nested = false) {
  testing::Watchdog watchdog("run_forged");
  constexpr size_t kProcesses = 2;
  LoopbackHub hub(kProcesses);
  std::mutex mu;
  std::optional<absl::Status> seen;
  auto run_process = [&](size_t process) {
    Config config;
    config.workers = 1;
    config.processes = kProcesses;
    config.process = process;
    config.transport = hub.factory();
    return execute(config, [&](Worker& worker) {
      Built built;
      built.first = worker.allocator().next_channel_id();
      auto input = worker.dataflow<uint64_t>(
          [&](Scope<uint64_t>& scope) { return exchange_dataflow(scope, nested); });
      built.progress = worker.allocator().next_channel_id() - 1;
      ProcessShared& shared = worker.allocator().process();
      if (process == target) {
        absl::Status status = forge(shared, built);
        {
          std::lock_guard lock(mu);
          seen = status;
        }
        // A real transport closes the link on an error; either way this run is over.
      }
      shared.link_failed(absl::AbortedError("test done"));
      input.close();
    });
  };
  std::thread other([&] { run_process(1).IgnoreError(); });
  run_process(0).IgnoreError();
  other.join();
  return seen;
}

std::string encoded_batch() {  // An exchange batch of uint64_t records: time 0, no records.
  std::string payload;
  Codec<uint64_t>::encode(0, payload);
  Codec<std::vector<uint64_t>>::encode({}, payload);
  return payload;
}

std::string empty_progress() {  // No updates, no nested batches: a valid progress message.
  std::string payload;
  Codec<uint64_t>::encode(0, payload);
  Codec<uint64_t>::encode(0, payload);
  return payload;
}

// On main: process 1 indexed its exchange inboxes with 0 - first_worker (wrapped): SIGSEGV.
TEST(RemoteFrameTest, ProgressFrameOnADataChannelIsRefused) {
  auto seen = run_forged(1, [](ProcessShared& process, const Built& built) {
    // Every channel id of the dataflow but its progress channel: the exchange's channel is
    // among them (pipeline edges have no shared channel: a frame for one is held, as for a
    // channel not built yet).
    for (uint64_t id = built.first + 1; id < built.progress; ++id) {
      absl::Status status = process.deliver_progress(id, 0, 0, encoded_batch());
      if (!status.ok()) return status;
    }
    return absl::InternalError("no channel refused the progress frame");
  });
  ASSERT_TRUE(seen.has_value());
  EXPECT_FALSE(seen->ok());
  EXPECT_TRUE(mentions(*seen, "progress frame")) << *seen;
  EXPECT_TRUE(mentions(*seen, "channel")) << *seen;
}

// On main: accepted, read as the progress batch seq 0 of worker 1.
TEST(RemoteFrameTest, DataFrameOnAProgressChannelIsRefused) {
  auto seen = run_forged(0, [](ProcessShared& process, const Built& built) {
    return process.deliver_data(built.progress, 1, 0, empty_progress());
  });
  ASSERT_TRUE(seen.has_value());
  EXPECT_FALSE(seen->ok());
  EXPECT_TRUE(mentions(*seen, "data frame")) << *seen;
  EXPECT_TRUE(mentions(*seen, "progress")) << *seen;
}

// Frames for a channel before it is built are held; the kind is checked when it is.
TEST(RemoteFrameTest, HeldFrameOfTheWrongKindIsRefusedWhenTheChannelIsBuilt) {
  std::atomic<bool> failed{false};
  std::string why;
  LoopbackHub hub(2);
  // Process 0 receives a progress frame for the channel its exchange will have, before
  // building; building then fails the process instead of crashing.
  auto run_process = [&](size_t process) {
    Config config;
    config.workers = 1;
    config.processes = 2;
    config.process = process;
    config.transport = hub.factory();
    return execute(config, [&](Worker& worker) {
      ProcessShared& shared = worker.allocator().process();
      const uint64_t next = worker.allocator().next_channel_id();
      if (process == 0) {
        for (uint64_t id = next + 1; id < next + 4; ++id) {
          shared.deliver_progress(id, 1, 0, encoded_batch()).IgnoreError();
        }
      }
      auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
        auto [handle, stream] = new_input<uint64_t>(scope);
        stream | exchange([](const uint64_t& x) { return x; }) | probe();
        return std::move(handle);
      });
      if (process == 0) {
        failed = shared.failed();
        if (shared.failed()) why = std::string(shared.status().message());
      }
      shared.link_failed(absl::AbortedError("test done"));
      input.close();
    });
  };
  std::thread other([&] { run_process(1).IgnoreError(); });
  run_process(0).IgnoreError();
  other.join();
  EXPECT_TRUE(failed.load());
  EXPECT_TRUE(why.find("progress frame") != std::string::npos) << why;
}

std::string progress_at(Location location) {
  std::string payload;
  Codec<uint64_t>::encode(1, payload);
  Codec<Location>::encode(location, payload);
  Codec<uint64_t>::encode(0, payload);  // Time.
  Codec<int64_t>::encode(1, payload);   // Diff.
  Codec<uint64_t>::encode(0, payload);  // No nested batches.
  return payload;
}

// Runs process 0 with a forged progress batch from worker 1 and returns why it failed.
absl::Status process_failure_after(const std::string& payload, bool nested) {
  LoopbackHub hub(2);
  absl::Status why;
  auto run_process = [&](size_t process) {
    Config config;
    config.workers = 1;
    config.processes = 2;
    config.process = process;
    config.transport = hub.factory();
    return execute(config, [&](Worker& worker) {
      worker.allocator().next_channel_id();  // As in run_forged.
      auto input = worker.dataflow<uint64_t>(
          [&](Scope<uint64_t>& scope) { return exchange_dataflow(scope, nested); });
      const uint64_t progress = worker.allocator().next_channel_id() - 1;
      ProcessShared& shared = worker.allocator().process();
      if (process == 0) {
        absl::Status delivered = shared.deliver_progress(progress, 1, 0, payload);
        if (!delivered.ok()) shared.link_failed(delivered);
        testing::step_until(worker, [&] { return shared.failed(); });
        why = shared.status();
      }
      // Process 1 stops before it steps, so it sends no progress batch 0 of its own.
      shared.link_failed(absl::AbortedError("test done"));
      input.close();
    });
  };
  std::thread other([&] { run_process(1).IgnoreError(); });
  run_process(0).IgnoreError();
  other.join();
  return why;
}

// On main: has_location computed node + 1 in 32 bits, so node UINT32_MAX passed and the tracker
// read base[UINT32_MAX] (SIGSEGV).
TEST(RemoteFrameTest, ProgressAtNodeUint32MaxIsRefused) {
  testing::Watchdog watchdog("ProgressAtNodeUint32MaxIsRefused");
  const absl::Status why =
      process_failure_after(progress_at(Location(std::numeric_limits<uint32_t>::max(), 0, true)),
                            /*nested=*/false);
  EXPECT_FALSE(why.ok());
  EXPECT_TRUE(mentions(why, "locations")) << why;
}

// base[node] + port wraps in 32 bits onto an existing location.
// Node 3 (the probe) has target base 1: 1 + UINT32_MAX wrapped to target 0 (the exchange's input).
TEST(RemoteFrameTest, ProgressAtAPortThatWrapsIsRefused) {
  testing::Watchdog watchdog("ProgressAtAPortThatWrapsIsRefused");
  const absl::Status why = process_failure_after(
      progress_at(Location(3, std::numeric_limits<uint32_t>::max(), false)), /*nested=*/false);
  EXPECT_FALSE(why.ok());
  EXPECT_TRUE(mentions(why, "locations")) << why;
}

std::string progress_with_nested(const std::vector<uint32_t>& path) {
  std::string payload;
  Codec<uint64_t>::encode(0, payload);  // No updates of the dataflow itself.
  Codec<uint64_t>::encode(1, payload);  // One nested batch.
  Codec<std::vector<uint32_t>>::encode(path, payload);
  std::string inner;
  Codec<uint64_t>::encode(0, inner);  // An empty batch for the nested scope.
  Codec<std::string>::encode(inner, payload);
  return payload;
}

// On main: dispatch_nested aborted the process (WEIR_CHECK) on a path to no scope.
TEST(RemoteFrameTest, NestedPathToNoScopeIsRefused) {
  testing::Watchdog watchdog("NestedPathToNoScopeIsRefused");
  for (const std::vector<uint32_t>& path :
       std::vector<std::vector<uint32_t>>{{99}, {1}, {std::numeric_limits<uint32_t>::max()}}) {
    const absl::Status why = process_failure_after(progress_with_nested(path), /*nested=*/true);
    EXPECT_FALSE(why.ok());
    EXPECT_TRUE(mentions(why, "nested")) << why;
  }
}

// On main: an empty path was queued into a list nothing reads (a peer could grow it forever).
TEST(RemoteFrameTest, EmptyNestedPathIsRefused) {
  testing::Watchdog watchdog("EmptyNestedPathIsRefused");
  const absl::Status why = process_failure_after(progress_with_nested({}), /*nested=*/true);
  EXPECT_FALSE(why.ok());
  EXPECT_TRUE(mentions(why, "nested")) << why;
}

// A nested count far beyond what the bytes can hold is refused before anything is allocated.
TEST(RemoteFrameTest, NestedCountBeyondThePayloadIsRefused) {
  testing::Watchdog watchdog("NestedCountBeyondThePayloadIsRefused");
  std::string payload;
  Codec<uint64_t>::encode(0, payload);
  Codec<uint64_t>::encode(1000, payload);
  payload.append(1000, '\0');  // Enough bytes for the old check (n <= bytes left), not for 1000.
  const absl::Status why = process_failure_after(payload, /*nested=*/true);
  EXPECT_FALSE(why.ok());
  EXPECT_TRUE(mentions(why, "malformed progress")) << why;
}

}  // namespace
}  // namespace weir
