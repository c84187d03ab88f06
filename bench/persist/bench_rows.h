// Rows for the persist benchmarks: batches of updates like a table's rows (~70 bytes, a random
// key first so that nothing arrives sorted), the same for every benchmark given the same seed.

#pragma once

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "weir/persist/batch.h"

namespace weir::bench {

// One batch of updates: rows like a table's, with a random key first so that nothing arrives
// sorted. Data is stored end to end in `arena`.
struct BatchData {
  std::string arena;
  std::vector<uint32_t> ends;
  std::vector<uint64_t> times;
  uint64_t update_bytes = 0;

  size_t size() const { return ends.size(); }
  std::string_view data(size_t i) const {
    const uint32_t begin = i == 0 ? 0 : ends[i - 1];
    return std::string_view(arena).substr(begin, ends[i] - begin);
  }
};

inline BatchData make_batch(std::mt19937_64& rng, uint64_t index, size_t target_bytes) {
  static const char* kNames[] = {"alice", "bob",  "carol", "dave",    "erin", "frank",  "grace",
                                 "heidi", "ivan", "judy",  "mallory", "niaj", "olivia", "peggy"};
  static const char* kCities[] = {"amsterdam", "berlin", "chicago", "delhi",  "lagos",   "lima",
                                  "osaka",     "paris",  "quito",   "sydney", "toronto", "zurich"};
  static const char* kStatus[] = {"pending", "paid", "shipped", "delivered", "returned"};
  BatchData batch;
  batch.arena.reserve(target_bytes);
  char row[256];
  while (batch.update_bytes < target_bytes) {
    const uint64_t key = rng();
    const int n =
        std::snprintf(row, sizeof(row), "%016llx|%s|%s|%s|%llu.%02llu|2024-%02llu-%02llu|note %llu",
                      static_cast<unsigned long long>(key), kNames[rng() % 14], kCities[rng() % 12],
                      kStatus[rng() % 5], static_cast<unsigned long long>(rng() % 100000),
                      static_cast<unsigned long long>(rng() % 100),
                      static_cast<unsigned long long>(1 + rng() % 12),
                      static_cast<unsigned long long>(1 + rng() % 28),
                      static_cast<unsigned long long>(rng() % 1000000000));
    batch.arena.append(row, static_cast<size_t>(n));
    batch.ends.push_back(static_cast<uint32_t>(batch.arena.size()));
    batch.times.push_back(index * 1000 + rng() % 1000);
    batch.update_bytes +=
        weir::persist::update_bytes(std::string_view(row, static_cast<size_t>(n)));
  }
  return batch;
}

}  // namespace weir::bench
