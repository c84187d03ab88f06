#include <gtest/gtest.h>

#include "weir/weir.h"

namespace weir {
namespace {

TEST(CompileTest, Everything) {
  Config config;
  config.workers = 2;
  std::atomic<uint64_t> seen{0};
  auto status = execute(config, [&](Worker& worker) {
    ProbeHandle<uint64_t> probe;
    auto input = worker.dataflow<uint64_t>([&](Scope<uint64_t>& scope) {
      auto [handle, stream] = new_input<uint64_t>(scope);
      auto mapped = stream | map([](uint64_t x) { return x + 1; }) |
                    map_in_place([](uint64_t& x) { x *= 2; }) |
                    filter([](const uint64_t& x) { return x % 4 == 0; }) | flat_map([](uint64_t x) {
                      return std::vector<uint64_t>{x, x};
                    }) |
                    exchange([](const uint64_t& x) { return x; });
      auto [a, b] = mapped | branch([](const uint64_t&, const uint64_t& x) { return x > 8; });
      auto both = a | concat(b);
      auto counted = both | count();
      auto delayed = both | delay([](const uint64_t&, const uint64_t& t) { return t + 1; });
      auto pairs = delayed | map([](uint64_t x) {
                     return std::pair<uint64_t, uint64_t>{x % 3, x};
                   });
      auto agg =
          pairs | aggregate<uint64_t>([](const uint64_t&, uint64_t v, uint64_t& acc) { acc += v; },
                                      [](uint64_t k, uint64_t acc) {
                                        return std::pair{k, acc};
                                      },
                                      [](const uint64_t& k) { return k; });
      auto [oks, errs] = counted | ok_err([](uint64_t x) -> std::variant<uint64_t, std::string> {
                           if (x > 1000) return std::string("big");
                           return x;
                         });
      auto parts = partition(oks, 2, [](uint64_t x) {
        return std::pair<uint64_t, uint64_t>{x % 2, x};
      });
      concatenate(scope, parts) | broadcast() | inspect([&](const uint64_t&) { seen++; });
      agg | inspect_time([](const uint64_t&, const std::pair<uint64_t, uint64_t>&) {}) |
          probe_with(probe);
      errs | inspect_batch([](const uint64_t&, const std::vector<std::string>&) {});
      return std::move(handle);
    });
    for (uint64_t round = 0; round < 5; ++round) {
      for (uint64_t i = 0; i < 100; ++i) input.send(i);
      input.advance_to(round + 1);
      while (probe.less_than(round + 1)) worker.step();
    }
  });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_GT(seen.load(), 0u);
}

}  // namespace
}  // namespace weir
