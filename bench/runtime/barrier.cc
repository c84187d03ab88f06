// barrier ITERATIONS [-w W] [-n N ...]: one operator on a feedback loop (summary +1) that,
// notified at time t, asks to be notified at t+1 until ITERATIONS. Figure: µs per round.

#include <atomic>
#include <cstdio>
#include <string>

#include "bench_util.h"

#include "weir/protocol/cluster.h"
#include "weir/weir.h"

int main(int argc, char** argv) {
  auto args = weir::bench::parse(argc, argv, 1, "barrier ITERATIONS [-w W]");
  const uint64_t iterations = args.numbers[0];
  weir::bench::RunTimer timer;
  auto rounds = weir::cluster::execute(args.config, [&](weir::Worker& worker) {
    timer.start(worker);
    uint64_t notified = 0;
    worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      auto [loop, stream] = weir::feedback<uint64_t>(scope, weir::IntSummary<uint64_t>{1});
      weir::unary_notify<uint64_t>(
          stream, weir::Pipeline{}, "Barrier", {0, 1},
          [iterations, &notified](auto& input, auto&, weir::Notificator<uint64_t>& notificator) {
            while (input.next()) {
            }
            while (auto n = notificator.next()) {
              ++notified;
              const uint64_t time = n->first.time() + 1;
              if (time < iterations) notificator.notify_at(n->first.delayed(time));
            }
          }) |
          weir::connect_loop(loop);
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    timer.stop(worker);
    return notified;
  });
  const double seconds = timer.seconds();
  if (!rounds.ok()) {
    std::fprintf(stderr, "barrier: %s\n", std::string(rounds.status().message()).c_str());
    return 1;
  }
  for (uint64_t n : *rounds) {
    if (n != iterations) {
      std::fprintf(stderr, "barrier: a worker saw %llu rounds, expected %llu\n",
                   static_cast<unsigned long long>(n), static_cast<unsigned long long>(iterations));
      return 1;
    }
  }
  if (!weir::bench::reports(args.config)) return 0;
  std::printf("barrier: %llu rounds on %zu workers in %.3f s\n",
              static_cast<unsigned long long>(iterations), args.config.workers, seconds);
  weir::bench::result("barrier_us_per_round", seconds * 1e6 / static_cast<double>(iterations),
                      "us");
  return 0;
}
