// The complete example of docs/async.md, run as a test (keep the two in sync).

#include <chrono>
#include <cstdio>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "testing/harness.h"
#include <gtest/gtest.h>

#include "weir/async/async_operator.h"
#include "weir/weir.h"

namespace {

// ---- from docs/async.md ----

// A stand-in for a database client: every call blocks.
class Directory {
 public:
  std::string connect() const {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return "directory-1";
  }
  absl::StatusOr<std::vector<std::string>> lookup(const std::vector<uint64_t>& ids) const {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::vector<std::string> names;
    for (uint64_t id : ids) {
      if (id == 0) return absl::NotFoundError("no user with id 0");
      names.push_back("user-" + std::to_string(id));
    }
    return names;
  }
};

// ids -> (names, banner): looks every id up with a blocking call, without blocking the worker.
// `banner` carries one record at time 0 and completes as soon as the connection is made, while
// `names` follows the input.
struct Lookup {
  weir::Stream<uint64_t, std::string> names;
  weir::Stream<uint64_t, std::string> banner;
  weir::AsyncBuilt<uint64_t> built;
};

Lookup lookup(const weir::Stream<uint64_t, uint64_t>& ids, const Directory& directory) {
  weir::AsyncOperatorBuilder<uint64_t> builder("Lookup", ids.scope());
  auto [names, names_stream] = builder.add_output<std::string>();
  auto [banner, banner_stream] = builder.add_output<std::string>();
  // Data at time t on `ids` may produce names at t; it never produces a banner.
  auto input = builder.add_input_connected(ids, weir::Pipeline{}, {names.index()});

  auto built =
      builder.build([&directory, input, names, banner](
                        weir::AsyncContext& ctx,
                        std::span<weir::CapabilitySet<uint64_t>> caps) mutable -> absl::Status {
        // Connecting blocks a pool thread, not the worker: other operators run meanwhile.
        std::string server = ctx.run_blocking([&] { return directory.connect(); });
        banner.give(caps[1].first(), "connected to " + server);
        caps[1].clear();  // The banner stream is complete.
        caps[0].clear();  // Names follow the input: its capabilities are enough.
        for (;;) {
          auto event = input.next();  // Suspends until there is something new.
          if (auto* data = event.data()) {
            // The batch's capability stays good across the blocking call: the batch counts as
            // consumed only when we ask for the next event.
            auto found = ctx.run_blocking([&] { return directory.lookup(data->batch); });
            if (!found.ok()) return found.status();  // Fails, holding every capability.
            for (auto& name : *found) names.give(data->capability, std::move(name));
          } else if (event.is_end()) {
            return absl::OkStatus();
          }
        }
      });
  return Lookup{names_stream, banner_stream, std::move(built)};
}

absl::Status run(const weir::Config& config, std::vector<std::string>* printed) {
  return weir::execute(config, [printed](weir::Worker& worker) {
    Directory directory;
    weir::ProbeHandle<uint64_t> probe;
    auto input = worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      auto [handle, ids] = weir::new_input<uint64_t>(scope);
      Lookup result = lookup(ids, directory);
      result.banner |
          weir::inspect([printed](const std::string& line) { printed->push_back(line); });
      result.names | weir::inspect_time([printed](const uint64_t& time, const std::string& name) {
        printed->push_back(std::to_string(time) + " " + name);
      }) | weir::probe_with(probe);
      result.built.errors | weir::inspect([](const weir::AsyncError& error) {
        std::fprintf(stderr, "%s failed: %s\n", error.operator_name.c_str(),
                     error.status.ToString().c_str());
      });
      return std::move(handle);
    });
    for (uint64_t round = 0; round < 3; ++round) {
      input.send(10 * round + 1);
      input.send(10 * round + 2);
      input.advance_to(round + 1);
      while (probe.less_than(round + 1)) worker.step();
    }
  });
}

// ---- end of docs/async.md ----

TEST(AsyncGuideTest, TheExampleRuns) {
  weir::testing::Watchdog watchdog("AsyncGuideTest");
  std::vector<std::string> printed;
  ASSERT_TRUE(run(weir::Config{}, &printed).ok());
  EXPECT_EQ(printed,
            (std::vector<std::string>{"connected to directory-1", "0 user-1", "0 user-2",
                                      "1 user-11", "1 user-12", "2 user-21", "2 user-22"}));
}

}  // namespace
