// fiber_switch SWITCHES: the cost of one fiber switch (a resume or a suspend), measured as half a
// resume/suspend round trip; and the cost of waking an async operator whose body waits in
// `input.next()`, compared with a plain operator, per activation.

#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bench_util.h"

#include "weir/async/async_operator.h"
#include "weir/async/fiber.h"
#include "weir/weir.h"

namespace {

double switch_ns(uint64_t switches) {
  const uint64_t rounds = switches / 2;
  uint64_t count = 0;
  std::unique_ptr<weir::Fiber> fiber;
  fiber = std::make_unique<weir::Fiber>([&] {
    for (;;) {
      ++count;
      fiber->suspend();
    }
  });
  fiber->resume();
  weir::bench::Timer timer;
  for (uint64_t i = 0; i < rounds; ++i) fiber->resume();
  const double seconds = timer.seconds();
  if (count != rounds + 1) std::exit(1);
  return seconds * 1e9 / static_cast<double>(2 * rounds);
}

// One record per activation through a pass-through: ns per record (≈ per activation).
double activation_ns(uint64_t rounds, bool async) {
  weir::Config config;
  weir::bench::Timer timer;
  auto status = weir::execute(config, [&](weir::Worker& worker) {
    weir::ProbeHandle<uint64_t> probe;
    auto input = worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      auto [handle, stream] = weir::new_input<uint64_t>(scope);
      weir::Stream<uint64_t, uint64_t> passed = stream;
      if (async) {
        weir::AsyncOperatorBuilder<uint64_t> builder("AsyncPass", scope);
        auto in = builder.add_input(stream);
        auto [out, result] = builder.add_output<uint64_t>();
        builder.build(
            [in, out](weir::AsyncContext&, std::span<weir::CapabilitySet<uint64_t>> caps) mutable {
              caps[0].clear();
              for (;;) {
                auto event = in.next();
                if (auto* data = event.data()) out.give_vec(data->capability, data->batch);
                if (event.is_end()) return;
              }
            });
        passed = result;
      } else {
        passed = stream | weir::map([](uint64_t x) { return x; });
      }
      passed | weir::probe_with(probe);
      return std::move(handle);
    });
    for (uint64_t round = 0; round < rounds; ++round) {
      input.send(round);
      input.advance_to(round + 1);
      while (probe.less_than(round + 1)) worker.step();
    }
  });
  const double seconds = timer.seconds();
  if (!status.ok()) std::exit(1);
  return seconds * 1e9 / static_cast<double>(rounds);
}

}  // namespace

int main(int argc, char** argv) {
  auto args = weir::bench::parse(argc, argv, 1, "fiber_switch SWITCHES");
  const uint64_t switches = args.numbers[0];
  switch_ns(switches / 10);  // Warm up.
  const double ns = switch_ns(switches);
  const uint64_t rounds = std::max<uint64_t>(switches / 1000, 1000);
  const double plain = activation_ns(rounds, false);
  const double async = activation_ns(rounds, true);
  std::printf("fiber_switch: %llu switches; %llu single-record rounds\n",
              static_cast<unsigned long long>(switches), static_cast<unsigned long long>(rounds));
  weir::bench::result("fiber_switch_ns", ns, "ns");
  weir::bench::result("plain_round_ns", plain, "ns");
  weir::bench::result("async_round_ns", async, "ns");
  return 0;
}
