// barrier ITERATIONS [-w W]: one operator on a feedback loop (summary +1) that, notified at time
// t, asks to be notified at t+1 until ITERATIONS. Prints µs per round.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "weir/weir.h"

int main(int argc, char** argv) {
  auto config = weir::Config::from_args(argc, argv);
  if (!config.ok()) {
    std::fprintf(stderr, "barrier: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  if (argc < 2) {
    std::fprintf(stderr, "usage: barrier ITERATIONS [-w W]\n");
    return 2;
  }
  const uint64_t iterations = std::strtoull(argv[1], nullptr, 10);
  std::atomic<uint64_t> rounds{0};
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = weir::execute(*config, [&](weir::Worker& worker) {
    worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      auto [loop, stream] = weir::feedback<uint64_t>(scope, weir::IntSummary<uint64_t>{1});
      weir::unary_notify<uint64_t>(
          stream, weir::Pipeline{}, "Barrier", {0, 1},
          [iterations, &rounds](auto& input, auto&, weir::Notificator<uint64_t>& notificator) {
            while (input.next()) {
            }
            while (auto n = notificator.next()) {
              if (std::getenv("BARRIER_COUNT")) ++rounds;
              const uint64_t time = n->first.time() + 1;
              if (time < iterations) notificator.notify_at(n->first.delayed(time));
            }
          }) |
          weir::connect_loop(loop);
    });
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!status.ok()) {
    std::fprintf(stderr, "barrier: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  if (std::getenv("BARRIER_COUNT")) std::printf("notifications=%llu\n", (unsigned long long)rounds.load());
  std::printf("barrier iterations=%llu workers=%zu elapsed_s=%.3f us_per_round=%.3f\n",
              static_cast<unsigned long long>(iterations), config->workers, seconds,
              seconds * 1e6 / static_cast<double>(iterations));
  return 0;
}
