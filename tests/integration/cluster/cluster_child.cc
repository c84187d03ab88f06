// weir_cluster_child: the programs the cluster integration tests run as processes of a cluster.
// Every mode takes the worker flags (-n -p -h -w and the cluster flags) anywhere on the line.
//
//   property FIRST LAST  the random dataflows of the progress property test, seeds FIRST..LAST,
//                        on all workers of the cluster; every stream's records and the frontier
//                        violations are gathered to worker 0, which checks them against the
//                        single-threaded reference. Process 0 prints "property: ok ...".
//   spin SECONDS         rounds of records exchanged between all workers until SECONDS have
//                        passed; prints "running" once the first round is through everywhere.
//   fail ROUND           like spin, but the cluster's last worker throws at round ROUND.
//   exit-if P CODE       process P exits with CODE before connecting; the others spin 60 s.
//   stuck P              like spin, but in process P a worker never returns from the
//                        operator 'Map' once it has seen 1000 records.
//   flood SECONDS        like spin, with data flowing as fast as the links take it: 50 000
//                        records per worker and round, up to 4 rounds in flight; its loop, like
//                        the benchmarks', never asks whether the execution failed.
//   slow SECONDS MIB     every worker's source sends 8192 records per run, as fast as it is
//                        scheduled, for SECONDS; they are exchanged to every worker, and the
//                        cluster's last worker sleeps 1 ms per batch it takes. The process
//                        prints "running" once its sources run, then "slow: peak rss N MiB";
//                        if its resident memory passes MIB it prints "slow: rss ... over" and
//                        exits 3 at once.
//
// Exit status: 0 on success, 1 with the error on stderr otherwise, 2 for bad arguments.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "testing/random_dataflow.h"
#include <unistd.h>

#include "weir/protocol/cluster.h"
#include "weir/weir.h"

namespace {

using Clock = std::chrono::steady_clock;

int usage() {
  std::fprintf(stderr,
               "usage: weir_cluster_child property FIRST LAST | spin SECONDS | fail ROUND | "
               "exit-if P CODE | stuck P | flood SECONDS | slow SECONDS MIB  [worker flags]\n");
  return 2;
}

int report(const char* mode, const absl::Status& status) {
  if (status.ok()) return 0;
  std::fprintf(stderr, "%s: %s\n", mode, std::string(status.message()).c_str());
  return 1;
}

// Rounds of exchanged records: each worker sends 100 numbers per round, exchanged by value.
// Stops after `seconds`, or throws on the cluster's last worker at round `fail_at`.
absl::Status spin(const weir::Config& config, double seconds, uint64_t fail_at,
                  uint64_t per_round = 100, uint64_t in_flight = 0, uint64_t stuck_in = ~0ULL) {
  return weir::cluster::execute(config, [&](weir::Worker& worker) {
    weir::ProbeHandle<uint64_t> probe;
    // The counter is shared with the operator: the worker keeps stepping the dataflow after this
    // closure returns (a local captured by reference was read after its frame was gone: ASan's
    // stack-buffer-overflow in the garbage-frames test once the frame layout changed).
    auto received = std::make_shared<uint64_t>(0);
    auto input = worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      auto [handle, stream] = weir::new_input<uint64_t>(scope);
      stream | weir::exchange([](const uint64_t& x) { return x; }) |
          weir::inspect([received](const uint64_t&) { ++*received; }) |
          weir::map([received, stuck = config.process == stuck_in &&
                                       worker.allocator().local_index() == 0](uint64_t x) {
            while (stuck && *received >= 1000) {
              std::this_thread::sleep_for(std::chrono::milliseconds(100));
            }
            return x;
          }) |
          weir::probe_with(probe);
      return std::move(handle);
    });
    const auto until = Clock::now() + std::chrono::duration<double>(seconds);
    for (uint64_t round = 0; round == 0 || Clock::now() < until; ++round) {
      if (round == fail_at && worker.index() + 1 == worker.peers()) {
        throw std::runtime_error("injected failure at round " + std::to_string(round));
      }
      for (uint64_t x = 0; x < per_round; ++x) input.send(x + round);
      input.advance_to(round + 1);
      const uint64_t done = round + 1 > in_flight ? round + 1 - in_flight : 0;
      if (in_flight > 0) {
        // As the benchmarks loop: never asking failed() (step throws once the execution failed).
        while (probe.less_than(done)) worker.step();
      } else {
        while (probe.less_than(done) && !worker.failed()) worker.step_or_park(std::nullopt);
        if (worker.failed()) return;
      }
      if (round == in_flight && worker.allocator().local_index() == 0) {
        std::printf("running\n");
        std::fflush(stdout);
      }
    }
  });
}

// Records of one stream as gathered: (seed, node, time, value).
using Gathered = std::array<uint64_t, 4>;

int property(const weir::Config& config, uint64_t first, uint64_t last) {
  using namespace weir::testing::random_dataflow;
  auto results = weir::cluster::execute(config, [&](weir::Worker& worker) {
    std::string errors;
    for (uint64_t seed = first; seed <= last && !worker.failed(); ++seed) {
      const Spec spec = generate(seed, worker.peers());
      Outcome outcome = run_worker(worker, spec, seed);
      std::vector<Gathered> records;
      for (uint64_t node = 0; node < outcome.streams.size(); ++node) {
        for (auto [time, value] : outcome.streams[node])
          records.push_back({seed, node, time, value});
      }
      auto all = weir::cluster::gather(worker, std::move(records));
      auto violations = weir::cluster::gather(worker, std::vector<uint64_t>{outcome.violations});
      if (worker.index() != 0) continue;
      uint64_t behind = 0;
      for (uint64_t v : violations) behind += v;
      if (behind != 0) {
        errors += "seed " + std::to_string(seed) + ": " + std::to_string(behind) +
                  " records arrived behind the frontier\n";
      }
      std::vector<Multiset> actual(spec.nodes.size());
      for (const Gathered& g : all) actual[g[1]].emplace_back(g[2], g[3]);
      const std::vector<Multiset> expected = reference(spec);
      for (size_t node = 0; node < spec.nodes.size(); ++node) {
        std::sort(actual[node].begin(), actual[node].end());
        if (actual[node] != expected[node]) {
          errors += "seed " + std::to_string(seed) + " node " + std::to_string(node) + ": " +
                    std::to_string(actual[node].size()) + " records, the reference has " +
                    std::to_string(expected[node].size()) + "\n";
        }
      }
    }
    return errors;
  });
  if (!results.ok()) return report("property", results.status());
  std::string all;
  for (const std::string& e : *results) all += e;
  if (!all.empty()) {
    std::fprintf(stderr, "property: mismatches\n%s", all.c_str());
    return 1;
  }
  if (config.process == 0) {
    std::printf("property: ok, seeds %llu..%llu on %zu processes of %zu workers\n",
                static_cast<unsigned long long>(first), static_cast<unsigned long long>(last),
                config.processes, config.workers);
  }
  return 0;
}

// Resident memory of this process, from /proc/self/statm.
size_t rss_bytes() {
  std::FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr) return 0;
  unsigned long pages = 0, resident = 0;
  const int read = std::fscanf(statm, "%lu %lu", &pages, &resident);
  std::fclose(statm);
  return read == 2 ? resident * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

// Issue 14 (memory): one slow worker must hold back every producer, in every process.
int slow(const weir::Config& config, double seconds, uint64_t limit_mib) {
  std::atomic<bool> done{false};
  std::atomic<size_t> peak{0};
  const auto start = Clock::now();
  std::thread sampler([&] {
    while (!done) {
      const size_t now = rss_bytes();
      if (now > peak) peak = now;
      if (now > (limit_mib << 20)) {
        std::printf("slow: rss %zu MiB over %llu MiB after %.1f s\n", now >> 20,
                    static_cast<unsigned long long>(limit_mib),
                    std::chrono::duration<double>(Clock::now() - start).count());
        std::fflush(stdout);
        std::_Exit(3);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  constexpr uint64_t kPerRun = 8192;
  const absl::Status status = weir::cluster::execute(config, [&](weir::Worker& worker) {
    const bool slow_worker = worker.index() + 1 == worker.peers();
    weir::ProbeHandle<uint64_t> probe;
    const auto until = Clock::now() + std::chrono::duration<double>(seconds);
    worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      weir::source<uint64_t>(
          scope, "Producer",
          [&, until](weir::Capability<uint64_t> cap, weir::OperatorInfo) {
            std::optional<weir::Capability<uint64_t>> held(std::move(cap));
            uint64_t next = 0;
            bool said = false;
            return [held, next, said, until,
                    local = worker.allocator().local_index()](auto& output) mutable {
              if (!held) return false;
              if (!said && local == 0) {
                said = true;
                std::printf("running\n");
                std::fflush(stdout);
              }
              auto session = output.session(*held);
              for (uint64_t i = 0; i < kPerRun; ++i) session.give(next++);
              if (Clock::now() >= until) {
                held.reset();
                return false;
              }
              return true;
            };
          }) |
          weir::exchange([](const uint64_t& x) { return x; }) |
          weir::inspect_batch([slow_worker](const uint64_t&, const std::vector<uint64_t>&) {
            if (slow_worker) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }) |
          weir::probe_with(probe);
    });
    while (!probe.done()) worker.step_or_park(std::chrono::milliseconds(10));
  });
  done = true;
  sampler.join();
  std::printf("slow: peak rss %zu MiB\n", peak.load() >> 20);
  return report("slow", status);
}

}  // namespace

int main(int argc, char** argv) {
  auto config = weir::Config::from_args(argc, argv);
  if (!config.ok()) {
    std::fprintf(stderr, "weir_cluster_child: %s\n",
                 std::string(config.status().message()).c_str());
    return 2;
  }
  if (argc < 3) return usage();
  const std::string mode = argv[1];
  const uint64_t a = std::strtoull(argv[2], nullptr, 10);
  if (mode == "property" && argc == 4)
    return property(*config, a, std::strtoull(argv[3], nullptr, 10));
  if (mode == "spin" && argc == 3)
    return report("spin", spin(*config, static_cast<double>(a), ~0ULL));
  if (mode == "fail" && argc == 3) return report("fail", spin(*config, 60, a));
  if (mode == "stuck" && argc == 3) return report("stuck", spin(*config, 60, ~0ULL, 100, 0, a));
  if (mode == "flood" && argc == 3) {
    return report("flood", spin(*config, static_cast<double>(a), ~0ULL, 50000, 3));
  }
  if (mode == "slow" && argc == 4) {
    return slow(*config, static_cast<double>(a), std::strtoull(argv[3], nullptr, 10));
  }
  if (mode == "exit-if" && argc == 4) {
    if (config->process == a) return static_cast<int>(std::strtol(argv[3], nullptr, 10));
    return report("spin", spin(*config, 60, ~0ULL));
  }
  return usage();
}
