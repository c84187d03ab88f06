// consumer_cluster: the sum of squares of 0..N-1 over a cluster of processes linked by gRPC, built
// against an installed weir with its protocol component.
//
//   weir-launch -n 2 consumer_cluster [N] [-w W]
//       process 0 prints "cluster sum of squares below N: S (P processes, W workers)"

#include "weir/protocol/cluster.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "weir/weir.h"

int main(int argc, char** argv) {
  // Takes the worker flags (-w, -n, -p, -h) out of argv; what is left is N.
  auto config = weir::Config::from_args(argc, argv);
  if (!config.ok()) {
    std::fprintf(stderr, "consumer_cluster: %s\n", config.status().ToString().c_str());
    return 2;
  }
  const uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000;
  auto sums = weir::cluster::execute(*config, [n](weir::Worker& worker) {
    auto sum = std::make_shared<uint64_t>(0);
    worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      std::vector<uint64_t> mine;
      for (uint64_t x = worker.index(); x < n; x += worker.peers()) mine.push_back(x);
      // Every square goes to worker 0, in process 0: the records cross processes.
      weir::to_stream(scope, std::move(mine)) | weir::map([](uint64_t x) { return x * x; }) |
          weir::exchange([](const uint64_t&) { return uint64_t{0}; }) |
          weir::inspect([sum](const uint64_t& x) { *sum += x; });
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    return *sum;
  });
  if (!sums.ok()) {
    std::fprintf(stderr, "consumer_cluster: %s\n", sums.status().ToString().c_str());
    return 1;
  }
  if (config->process == 0) {
    std::printf("cluster sum of squares below %llu: %llu (%zu processes, %zu workers)\n",
                static_cast<unsigned long long>(n), static_cast<unsigned long long>((*sums)[0]),
                config->processes, config->processes * config->workers);
  }
  return 0;
}
