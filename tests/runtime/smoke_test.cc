#include <gtest/gtest.h>

#include "weir/operators/input.h"
#include "weir/operators/probe.h"
#include "weir/worker/execute.h"

namespace weir {
namespace {

TEST(SmokeTest, InputToProbe) {
  Config config;
  config.workers = 2;
  auto status = execute(config, [](Worker& worker) {
    ProbeHandle<uint64_t> probe;
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      stream | probe_with(probe);
      return std::move(handle);
    });
    for (uint64_t round = 0; round < 10; ++round) {
      input.send(round);
      input.advance_to(round + 1);
      while (probe.less_than(round + 1)) worker.step();
    }
  });
  EXPECT_TRUE(status.ok()) << status;
}

}  // namespace
}  // namespace weir
