// event_driven DATAFLOWS LENGTH [-w W]: DATAFLOWS independent dataflows, each a chain of LENGTH
// map operators; each round sends one record into one dataflow (round-robin) and steps until its
// probe passes. Figures: µs per round, and memory per operator (resident memory the dataflows
// added, divided by their operators). As a cluster (-n N ...), process 0 reports its own figures.

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include <sys/resource.h>

#include "weir/protocol/cluster.h"
#include "weir/weir.h"

namespace {

// Resident memory now, in bytes (from /proc; ru_maxrss only gives the peak).
double resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  long pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return static_cast<double>(pages_resident) * 4096.0;
}

}  // namespace

int main(int argc, char** argv) {
  auto args = weir::bench::parse(argc, argv, 2, "event_driven DATAFLOWS LENGTH [-w W]");
  const uint64_t dataflows = args.numbers[0], length = args.numbers[1];
  const char* rounds_env = std::getenv("EVENT_DRIVEN_ROUNDS");  // For profiling runs.
  const uint64_t rounds = rounds_env != nullptr ? std::strtoull(rounds_env, nullptr, 10) : 10000;
  double build_bytes = 0, seconds = 0;
  auto status = weir::cluster::execute(args.config, [&](weir::Worker& worker) {
    const bool first = worker.allocator().local_index() == 0;
    std::vector<weir::InputHandle<uint64_t, uint64_t>> inputs;
    std::vector<weir::ProbeHandle<uint64_t>> probes(dataflows);
    const double before = first ? resident_bytes() : 0;
    for (uint64_t d = 0; d < dataflows; ++d) {
      inputs.push_back(worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
        auto [handle, stream] = weir::new_input<uint64_t>(scope);
        for (uint64_t i = 0; i < length; ++i)
          stream = stream | weir::map([](uint64_t x) { return x + 1; });
        stream | weir::probe_with(probes[d]);
        return std::move(handle);
      }));
    }
    // Let every dataflow run its first step.
    for (int i = 0; i < 10; ++i) worker.step();
    if (first) build_bytes = resident_bytes() - before;
    // Warm up: one record through every dataflow, so the timed rounds measure steady state.
    for (uint64_t d = 0; d < dataflows; ++d) {
      inputs[d].send(0);
      inputs[d].advance_to(1);
      while (probes[d].less_than(1)) worker.step();
    }
    weir::bench::Timer timer;
    for (uint64_t round = 0; round < rounds; ++round) {
      const uint64_t d = round % dataflows;
      auto& input = inputs[d];
      input.send(round);
      input.advance_to(input.time() + 1);
      while (probes[d].less_than(input.time())) worker.step();
    }
    if (first) seconds = timer.seconds();
    inputs.clear();
  });
  if (!status.ok()) {
    std::fprintf(stderr, "event_driven: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  if (!weir::bench::reports(args.config)) return 0;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double operators = static_cast<double>(dataflows * (length + 2) * args.config.workers);
  std::printf(
      "event_driven: %llu dataflows x %llu maps: %.3f s for %llu rounds, peak RSS %.1f MiB\n",
      static_cast<unsigned long long>(dataflows), static_cast<unsigned long long>(length), seconds,
      static_cast<unsigned long long>(rounds), usage.ru_maxrss / 1024.0);
  weir::bench::result("event_driven_us_per_round", seconds * 1e6 / static_cast<double>(rounds),
                      "us");
  weir::bench::result("event_driven_bytes_per_operator",
                      build_bytes * args.config.workers / operators, "bytes");
  weir::bench::result("event_driven_peak_rss_mib", usage.ru_maxrss / 1024.0, "MiB");
  return 0;
}
