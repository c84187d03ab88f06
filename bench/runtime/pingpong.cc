// pingpong ITERATIONS ELEMENTS [-w W]: the integers 0..ELEMENTS, split across workers, circulate
// through concat(feedback) -> exchange by value -> add 1 in place -> continue while time <
// ITERATIONS. Figure: µs per iteration. Runs as a cluster too (-n N ...).

#include <cstdio>
#include <string>

#include "bench_util.h"

#include "weir/protocol/cluster.h"
#include "weir/weir.h"

int main(int argc, char** argv) {
  auto args = weir::bench::parse(argc, argv, 2, "pingpong ITERATIONS ELEMENTS [-w W]");
  const uint64_t iterations = args.numbers[0], elements = args.numbers[1];
  weir::bench::RunTimer timer;
  auto exits = weir::cluster::execute(args.config, [&](weir::Worker& worker) {
    timer.start(worker);
    uint64_t left = 0;
    worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      std::vector<uint64_t> mine;
      for (uint64_t x = worker.index(); x < elements; x += worker.peers()) mine.push_back(x);
      auto [loop, cycle] = weir::feedback<uint64_t>(scope, weir::IntSummary<uint64_t>{1});
      auto [done, again] =
          weir::to_stream(scope, std::move(mine)) | weir::concat(cycle) |
          weir::exchange([](const uint64_t& x) { return x; }) |
          weir::map_in_place([](uint64_t& x) { x += 1; }) |
          weir::branch_when([iterations](const uint64_t& t) { return t < iterations; });
      again | weir::connect_loop(loop);
      done | weir::inspect_batch(
                 [&left](const uint64_t&, const std::vector<uint64_t>& b) { left += b.size(); });
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    timer.stop(worker);
    uint64_t all = 0;  // On worker 0: the elements that left the loop on any worker.
    for (uint64_t n : weir::cluster::gather(worker, std::vector<uint64_t>{left})) all += n;
    return all;
  });
  const double seconds = timer.seconds();
  if (!exits.ok()) {
    std::fprintf(stderr, "pingpong: %s\n", std::string(exits.status().message()).c_str());
    return 1;
  }
  if (!weir::bench::reports(args.config)) return 0;
  uint64_t total = 0;
  for (uint64_t n : *exits) total += n;
  if (total != elements) {
    std::fprintf(stderr, "pingpong: %llu elements left the loop, expected %llu\n",
                 static_cast<unsigned long long>(total), static_cast<unsigned long long>(elements));
    return 1;
  }
  std::printf("pingpong: %llu iterations of %llu elements in %.3f s\n",
              static_cast<unsigned long long>(iterations),
              static_cast<unsigned long long>(elements), seconds);
  weir::bench::result("pingpong_us_per_iteration", seconds * 1e6 / static_cast<double>(iterations),
                      "us");
  return 0;
}
