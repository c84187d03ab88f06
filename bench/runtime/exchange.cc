// exchange BATCH ROUNDS [-w W] [-n N ...]: each round every worker sends the integers 0..BATCH
// into an input, exchanged by value to a probe; it advances the input to the round and steps
// until the probe passes it. Figure: records/s per worker.

#include <cstdio>
#include <string>

#include "bench_util.h"

#include "weir/protocol/cluster.h"
#include "weir/weir.h"

int main(int argc, char** argv) {
  auto args = weir::bench::parse(argc, argv, 2, "exchange BATCH ROUNDS [-w W]");
  const uint64_t batch = args.numbers[0], rounds = args.numbers[1];
  weir::bench::RunTimer timer;
  auto received = weir::cluster::execute(args.config, [&](weir::Worker& worker) {
    timer.start(worker);
    uint64_t seen = 0;
    weir::ProbeHandle<uint64_t> probe;
    auto input = worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      auto [handle, stream] = weir::new_input<uint64_t>(scope);
      stream | weir::exchange([](const uint64_t& x) { return x; }) |
          weir::inspect_batch(
              [&seen](const uint64_t&, const std::vector<uint64_t>& b) { seen += b.size(); }) |
          weir::probe_with(probe);
      return std::move(handle);
    });
    for (uint64_t round = 0; round < rounds; ++round) {
      for (uint64_t x = 0; x < batch; ++x) input.send(x);
      input.advance_to(round + 1);
      while (probe.less_than(round + 1)) worker.step();
    }
    timer.stop(worker);
    return seen;
  });
  const double seconds = timer.seconds();
  if (!received.ok()) {
    std::fprintf(stderr, "exchange: %s\n", std::string(received.status().message()).c_str());
    return 1;
  }
  // Record x goes to worker x % peers; every worker sends each x once per round.
  const uint64_t peers = args.config.workers * args.config.processes;
  const uint64_t first = args.config.process * args.config.workers;
  uint64_t mine = 0;
  for (uint64_t x = 0; x < batch; ++x) mine += (x % peers - first < args.config.workers);
  uint64_t total = 0;
  for (uint64_t n : *received) total += n;
  if (total != mine * rounds * peers) {
    std::fprintf(stderr, "exchange: received %llu records, expected %llu\n",
                 static_cast<unsigned long long>(total),
                 static_cast<unsigned long long>(mine * rounds * peers));
    return 1;
  }
  if (!weir::bench::reports(args.config)) return 0;
  std::printf("exchange: %llu records per worker in %.3f s\n",
              static_cast<unsigned long long>(batch * rounds), seconds);
  weir::bench::result("exchange_records_per_s_per_worker",
                      static_cast<double>(batch * rounds) / seconds, "records/s");
  return 0;
}
