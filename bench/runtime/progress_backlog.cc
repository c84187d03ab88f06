// progress_backlog STEPS [-w W]: what one step of progress tracking costs while many times are
// outstanding. A source sends one record at every time and advances its capability by one each
// step; a consumer lags BACKLOG times behind, pulling only its oldest message once the source is
// BACKLOG times ahead. Once the backlog is built, every step changes a few pointstamps (a send,
// a consumption, a downgrade) and moves the consumer's input frontier by one, while BACKLOG
// distinct times stay in flight. The figure is the median time of one worker step over the next
// STEPS steps (the median, not the mean: on a shared machine one descheduled step would
// otherwise dominate), for BACKLOG = 10, 100, 1000, 10000, 100000: flat when progress costs what
// changed, growing when it costs what is outstanding. With -w W every worker runs the pair
// (pipelined), so every worker's tracker holds W × BACKLOG outstanding times and the progress
// exchange is included. Figures: progress_backlog_us_per_step_<BACKLOG>.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench_util.h"

#include "weir/weir.h"
#include "weir/worker/execute.h"

namespace {

// Runs one dataflow with `backlog` outstanding times; returns the median µs per step of worker 0.
double per_step_us(const weir::Config& config, uint64_t backlog, uint64_t steps) {
  double seconds = 0;
  auto done = weir::execute(config, [&](weir::Worker& worker) {
    const uint64_t end = backlog + steps;
    uint64_t sent = 0;      // Times the source has sent (one record at each).
    uint64_t consumed = 0;  // Messages the consumer pulled.
    worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      weir::OperatorBuilder<uint64_t> source_builder("Source", scope);
      auto [output, stream] = source_builder.add_output<uint64_t>();
      source_builder.build([&, output = output](std::vector<weir::Capability<uint64_t>> caps) {
        std::optional<weir::Capability<uint64_t>> cap(std::move(caps[0]));
        return [&, output, cap](std::span<const weir::MutableAntichain<uint64_t>>) mutable {
          if (!cap) return false;
          output.session(*cap).give(sent);
          ++sent;
          if (sent == end) {
            cap.reset();
            return false;
          }
          cap->downgrade(sent);
          return true;
        };
      });
      weir::OperatorBuilder<uint64_t> consumer_builder("LaggingConsumer", scope);
      auto input = consumer_builder.add_input(stream, weir::Pipeline{});
      consumer_builder.build([&, input](std::vector<weir::Capability<uint64_t>>) mutable {
        return [&, input](std::span<const weir::MutableAntichain<uint64_t>> frontiers) mutable {
          // Keep `backlog` times in flight while the source runs; drain at the end.
          while (sent >= end || sent - consumed > backlog) {
            if (!input.next()) break;
            ++consumed;
          }
          return !frontiers[0].is_empty();
        };
      });
    });
    while (sent < backlog) worker.step();
    std::vector<double> durations;
    durations.reserve(steps + 16);
    while (sent < end) {
      const auto start = std::chrono::steady_clock::now();
      worker.step();
      durations.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::nth_element(durations.begin(), durations.begin() + durations.size() / 2, durations.end());
    if (worker.index() == 0) seconds = durations[durations.size() / 2];
    while (worker.step_or_park(std::nullopt)) {
    }
    return consumed;
  });
  if (!done.ok()) {
    std::fprintf(stderr, "progress_backlog: %s\n", std::string(done.status().message()).c_str());
    std::exit(1);
  }
  for (uint64_t c : *done) {
    if (c != backlog + steps) {
      std::fprintf(stderr, "progress_backlog: a consumer saw %llu records, expected %llu\n",
                   static_cast<unsigned long long>(c),
                   static_cast<unsigned long long>(backlog + steps));
      std::exit(1);
    }
  }
  return seconds * 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  auto args = weir::bench::parse(argc, argv, 1, "progress_backlog STEPS [-w W]");
  const uint64_t steps = args.numbers[0];
  for (uint64_t backlog : {10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL}) {
    const double us = per_step_us(args.config, backlog, steps);
    std::printf(
        "progress_backlog: %llu outstanding times on %zu workers: %.3f us per step "
        "(median)\n",
        static_cast<unsigned long long>(backlog), args.config.workers, us);
    const std::string name = "progress_backlog_us_per_step_" + std::to_string(backlog);
    weir::bench::result(name.c_str(), us, "us");
  }
  return 0;
}
