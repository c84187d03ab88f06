// hashjoin KEYS VALS BATCH [-w W]: two inputs of pseudo-random (key, value) pairs with keys in
// [0, KEYS); each worker sends VALS/W pairs to each input, BATCH at a time with one time per
// batch; a symmetric hash join exchanged by key into a probe. Figure: input values/s (pairs sent
// to both inputs, all workers, per second). Runs as a cluster too (-n N ...): each process checks
// the pairs its workers produced.

#include <cstdio>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "bench_util.h"

#include "weir/protocol/cluster.h"
#include "weir/weir.h"

namespace {

// splitmix64: a fast, well-mixed generator; seeded per worker.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
};

using Pair = std::pair<uint64_t, uint64_t>;

}  // namespace

int main(int argc, char** argv) {
  auto args = weir::bench::parse(argc, argv, 3, "hashjoin KEYS VALS BATCH [-w W]");
  const uint64_t keys = args.numbers[0], vals = args.numbers[1], batch = args.numbers[2];
  const size_t peers = args.config.workers * args.config.processes;
  weir::bench::RunTimer timer;
  auto outputs = weir::cluster::execute(args.config, [&](weir::Worker& worker) {
    timer.start(worker);
    uint64_t produced = 0;
    weir::ProbeHandle<uint64_t> probe;
    auto inputs = worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      auto [in1, s1] = weir::new_input<Pair>(scope);
      auto [in2, s2] = weir::new_input<Pair>(scope);
      auto by_key = weir::Exchange([](const Pair& p) { return p.first; });
      weir::binary<Pair>(s1, s2, by_key, by_key, "HashJoin",
                         [&produced](weir::Capability<uint64_t>, weir::OperatorInfo) {
                           absl::flat_hash_map<uint64_t, std::vector<uint64_t>> map1, map2;
                           return [map1, map2, &produced](auto& input1, auto& input2,
                                                          auto& output) mutable {
                             input1.for_each([&](const auto& cap, std::vector<Pair>& data) {
                               auto session = output.session(cap);
                               for (auto [key, val1] : data) {
                                 if (auto it = map2.find(key); it != map2.end()) {
                                   for (uint64_t val2 : it->second) session.give(Pair{val1, val2});
                                   produced += it->second.size();
                                 }
                                 map1[key].push_back(val1);
                               }
                             });
                             input2.for_each([&](const auto& cap, std::vector<Pair>& data) {
                               auto session = output.session(cap);
                               for (auto [key, val2] : data) {
                                 if (auto it = map1.find(key); it != map1.end()) {
                                   for (uint64_t val1 : it->second) session.give(Pair{val1, val2});
                                   produced += it->second.size();
                                 }
                                 map2[key].push_back(val2);
                               }
                             });
                           };
                         }) |
          weir::probe_with(probe);
      return std::pair{std::move(in1), std::move(in2)};
    });
    auto& [input1, input2] = inputs;
    Rng rng{worker.index()};
    const uint64_t mine = vals / worker.peers();
    for (uint64_t sent = 0; sent < mine;) {
      const uint64_t n = std::min(batch, mine - sent);
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t k1 = rng.next() % keys, v1 = rng.next() % keys;
        const uint64_t k2 = rng.next() % keys, v2 = rng.next() % keys;
        input1.send({k1, v1});
        input2.send({k2, v2});
      }
      sent += n;
      const uint64_t next = input1.time() + 1;
      input1.advance_to(next);
      input2.advance_to(next);
      while (probe.less_than(next)) worker.step();
    }
    timer.stop(worker);
    return produced;
  });
  const double seconds = timer.seconds();
  if (!outputs.ok()) {
    std::fprintf(stderr, "hashjoin: %s\n", std::string(outputs.status().message()).c_str());
    return 1;
  }
  // Check the join size against a plain count of the same pairs.
  std::vector<uint32_t> count1(keys, 0), count2(keys, 0);
  for (size_t w = 0; w < peers; ++w) {
    Rng rng{w};
    for (uint64_t i = 0; i < vals / peers; ++i) {
      const uint64_t k1 = rng.next() % keys;
      rng.next();
      const uint64_t k2 = rng.next() % keys;
      rng.next();
      ++count1[k1];
      ++count2[k2];
    }
  }
  // Key k is joined on worker k % peers: this process produces the pairs of its workers' keys.
  const uint64_t first = args.config.process * args.config.workers;
  uint64_t expected = 0, total = 0;
  for (uint64_t k = 0; k < keys; ++k) {
    if (k % peers - first < args.config.workers) {
      expected += static_cast<uint64_t>(count1[k]) * count2[k];
    }
  }
  for (uint64_t n : *outputs) total += n;
  if (total != expected) {
    std::fprintf(stderr, "hashjoin: produced %llu pairs, expected %llu\n",
                 static_cast<unsigned long long>(total), static_cast<unsigned long long>(expected));
    return 1;
  }
  if (!weir::bench::reports(args.config)) return 0;
  const double values = 2.0 * static_cast<double>(vals / peers * peers);
  std::printf("hashjoin: %.0f input values, %llu output pairs in %.3f s\n", values,
              static_cast<unsigned long long>(total), seconds);
  weir::bench::result("hashjoin_values_per_s", values / seconds, "values/s");
  return 0;
}
