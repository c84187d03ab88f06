// consumer: sums the squares of 0..N-1 across workers, built against an installed weir.
//
//   consumer [N] [-w W]     prints "sum of squares below N: S"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "weir/weir.h"

int main(int argc, char** argv) {
  auto config = weir::Config::from_args(argc, argv);
  if (!config.ok()) {
    std::fprintf(stderr, "consumer: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  const uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000;
  auto sums = weir::execute(*config, [n](weir::Worker& worker) {
    uint64_t sum = 0;
    worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      std::vector<uint64_t> mine;
      for (uint64_t x = worker.index(); x < n; x += worker.peers()) mine.push_back(x);
      weir::to_stream(scope, std::move(mine)) | weir::map([](uint64_t x) { return x * x; }) |
          weir::exchange([](const uint64_t& x) { return x; }) |
          weir::inspect([&sum](const uint64_t& x) { sum += x; });
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    return sum;
  });
  if (!sums.ok()) {
    std::fprintf(stderr, "consumer: %s\n", std::string(sums.status().message()).c_str());
    return 1;
  }
  uint64_t total = 0;
  for (uint64_t s : *sums) total += s;
  std::printf("sum of squares below %llu: %llu\n", static_cast<unsigned long long>(n),
              static_cast<unsigned long long>(total));
  return 0;
}
