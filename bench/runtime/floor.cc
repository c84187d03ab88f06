// floor: the physical floor of a cross-thread hand-off on this machine, for reading the other
// figures as ratios.
//   - ping-pong: two threads bounce a counter through a shared cache line (µs per round trip);
//   - streaming: one thread hands batches of 1024 u64 to another through a single-producer
//     single-consumer ring, which reads every record (records/s).

#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "bench_util.h"

namespace {

double ping_pong(uint64_t rounds) {
  alignas(64) std::atomic<uint64_t> ball{0};
  std::thread other([&] {
    for (uint64_t i = 1; i <= rounds; ++i) {
      while (ball.load(std::memory_order_acquire) != 2 * i - 1) {
      }
      ball.store(2 * i, std::memory_order_release);
    }
  });
  weir::bench::Timer timer;
  for (uint64_t i = 1; i <= rounds; ++i) {
    ball.store(2 * i - 1, std::memory_order_release);
    while (ball.load(std::memory_order_acquire) != 2 * i) {
    }
  }
  const double seconds = timer.seconds();
  other.join();
  return seconds * 1e6 / static_cast<double>(rounds);
}

double streaming(uint64_t batches) {
  constexpr size_t kBatch = 1024, kSlots = 64;
  std::vector<std::vector<uint64_t>> slots(kSlots, std::vector<uint64_t>(kBatch));
  alignas(64) std::atomic<uint64_t> head{0};  // Written by the producer.
  alignas(64) std::atomic<uint64_t> tail{0};  // Written by the consumer.
  uint64_t sum = 0;
  std::thread consumer([&] {
    for (uint64_t b = 0; b < batches; ++b) {
      while (head.load(std::memory_order_acquire) == b) {
      }
      for (uint64_t x : slots[b % kSlots]) sum += x;
      tail.store(b + 1, std::memory_order_release);
    }
  });
  weir::bench::Timer timer;
  for (uint64_t b = 0; b < batches; ++b) {
    while (b - tail.load(std::memory_order_acquire) >= kSlots) {
    }
    auto& slot = slots[b % kSlots];
    for (size_t i = 0; i < kBatch; ++i) slot[i] = b + i;
    head.store(b + 1, std::memory_order_release);
  }
  consumer.join();
  const double seconds = timer.seconds();
  if (sum == 42) std::printf(" ");  // Keep the reads.
  return static_cast<double>(batches * kBatch) / seconds;
}

}  // namespace

int main() {
  const double latency = ping_pong(200000);
  const double throughput = streaming(200000);
  std::printf("floor: ping-pong %.3f us per round trip, streaming %.3g records/s\n", latency,
              throughput);
  weir::bench::result("floor_pingpong_us", latency, "us");
  weir::bench::result("floor_streaming_records_per_s", throughput, "records/s");
  return 0;
}
