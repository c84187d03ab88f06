// async_passthrough RECORDS BATCH [-w W]: RECORDS u64 records in batches of BATCH flow from a
// source through a pass-through operator into a counting sink, once with the pass-through written
// as a plain `unary` operator and once as an async operator, each moving whole batches; then the
// same with the pass-through giving record by record (through a session). The modes take turns
// for three rounds and each keeps its best time. Figures: ns per record for each, the ratio
// async / unary, and the extra cost of the async operator per batch.

#include <algorithm>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bench_util.h"

#include "weir/async/async_operator.h"
#include "weir/weir.h"

namespace {

enum class Pass { kUnaryBatch, kAsyncBatch, kUnaryRecord, kAsyncRecord };

// The source gives this many batches per activation, each activation at the next time.
constexpr uint64_t kBatchesPerRound = 16;

weir::Stream<uint64_t, uint64_t> pass_through(const weir::Stream<uint64_t, uint64_t>& stream,
                                              Pass pass) {
  using weir::Capability;
  using weir::InputCapability;
  if (pass == Pass::kUnaryBatch || pass == Pass::kUnaryRecord) {
    const bool by_record = pass == Pass::kUnaryRecord;
    return weir::unary<uint64_t>(
        stream, weir::Pipeline{}, "Pass", [by_record](Capability<uint64_t>, weir::OperatorInfo) {
          return [by_record](auto& input, auto& output) {
            input.for_each([&](const InputCapability<uint64_t>& cap, std::vector<uint64_t>& data) {
              auto session = output.session(cap);
              if (by_record) {
                for (uint64_t x : data) session.give(x);
              } else {
                session.give_vec(data);
              }
            });
          };
        });
  }
  const bool by_record = pass == Pass::kAsyncRecord;
  weir::AsyncOperatorBuilder<uint64_t> builder("AsyncPass", stream.scope());
  auto input = builder.add_input(stream);
  auto [output, result] = builder.add_output<uint64_t>();
  builder.build([input, output, by_record](weir::AsyncContext&,
                                           std::span<weir::CapabilitySet<uint64_t>> caps) mutable {
    caps[0].clear();
    for (;;) {
      auto event = input.next();
      if (auto* data = event.data()) {
        if (by_record) {
          auto session = output.session(data->capability);
          for (uint64_t x : data->batch) session.give(x);
        } else {
          output.give_vec(data->capability, data->batch);
        }
      } else if (event.is_end()) {
        return;
      }
    }
  });
  return result;
}

// Returns seconds; checks that every record arrived.
double run(const weir::Config& config, uint64_t records, uint64_t batch, Pass pass) {
  const uint64_t batches = (records + batch - 1) / batch / config.workers;
  weir::bench::Timer timer;
  auto counts = weir::execute(config, [&](weir::Worker& worker) {
    uint64_t seen = 0;
    uint64_t sum = 0;
    worker.dataflow<uint64_t>([&](weir::Scope<uint64_t>& scope) {
      auto source = weir::source<uint64_t>(
          scope, "Source", [&](weir::Capability<uint64_t> cap, weir::OperatorInfo) {
            uint64_t made = 0;
            std::vector<uint64_t> buffer;
            std::optional<weir::Capability<uint64_t>> held(std::move(cap));
            return [=](weir::OperatorOutput<uint64_t, uint64_t>& output) mutable {
              auto session = output.session(*held);
              for (uint64_t k = 0; k < kBatchesPerRound && made < batches; ++k, ++made) {
                buffer.resize(batch);
                for (uint64_t i = 0; i < batch; ++i) buffer[i] = made + i;
                session.give_vec(buffer);
              }
              if (made == batches) {
                held.reset();
                return false;
              }
              held->downgrade(held->time() + 1);
              return true;
            };
          });
      weir::sink(pass_through(source, pass), weir::Pipeline{}, "Count", [&](auto& input) {
        input.for_each([&](const weir::InputCapability<uint64_t>&, std::vector<uint64_t>& data) {
          seen += data.size();
          for (uint64_t x : data) sum += x;
        });
      });
    });
    while (worker.step_or_park(std::nullopt)) {
    }
    return std::pair(seen, sum);
  });
  const double seconds = timer.seconds();
  if (!counts.ok()) {
    std::fprintf(stderr, "async_passthrough: %s\n", std::string(counts.status().message()).c_str());
    std::exit(1);
  }
  // Batch m holds m, m + 1, ..., m + batch - 1 (sums wrap modulo 2^64 on both sides).
  const uint64_t expected_sum =
      batch * (batches * (batches - 1) / 2) + batches * (batch * (batch - 1) / 2);
  for (const auto& [seen, sum] : *counts) {
    if (seen != batches * batch || sum != expected_sum) {
      std::fprintf(stderr, "async_passthrough: a worker saw %llu records, expected %llu\n",
                   static_cast<unsigned long long>(seen),
                   static_cast<unsigned long long>(batches * batch));
      std::exit(1);
    }
  }
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  auto args = weir::bench::parse(argc, argv, 2, "async_passthrough RECORDS BATCH [-w W]");
  const uint64_t records = args.numbers[0];
  const uint64_t batch = args.numbers[1];
  const double n = static_cast<double>(records);
  const double batches = n / static_cast<double>(batch);
  // Warm up allocators, the fiber stack pool and the page cache.
  run(args.config, records / 20, batch, Pass::kUnaryBatch);
  run(args.config, records / 20, batch, Pass::kAsyncBatch);

  // The modes take turns, three rounds; each keeps its best time (the machine may be shared).
  double unary_batch = 1e30, async_batch = 1e30, unary_record = 1e30, async_record = 1e30;
  for (int round = 0; round < 3; ++round) {
    unary_batch = std::min(unary_batch, run(args.config, records, batch, Pass::kUnaryBatch));
    async_batch = std::min(async_batch, run(args.config, records, batch, Pass::kAsyncBatch));
    unary_record = std::min(unary_record, run(args.config, records, batch, Pass::kUnaryRecord));
    async_record = std::min(async_record, run(args.config, records, batch, Pass::kAsyncRecord));
  }
  std::printf("async_passthrough: %llu records in batches of %llu on %zu workers\n",
              static_cast<unsigned long long>(records), static_cast<unsigned long long>(batch),
              args.config.workers);
  weir::bench::result("unary_passthrough_ns_per_record", unary_batch * 1e9 / n, "ns");
  weir::bench::result("async_passthrough_ns_per_record", async_batch * 1e9 / n, "ns");
  weir::bench::result("async_over_unary_batch", async_batch / unary_batch, "x");
  weir::bench::result("async_extra_ns_per_batch", (async_batch - unary_batch) * 1e9 / batches,
                      "ns");
  weir::bench::result("unary_give_ns_per_record", unary_record * 1e9 / n, "ns");
  weir::bench::result("async_give_ns_per_record", async_record * 1e9 / n, "ns");
  weir::bench::result("async_over_unary_record", async_record / unary_record, "x");
  return 0;
}
