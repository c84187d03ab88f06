// Helpers shared by the persist tests and their child process (persist_test_child).

#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "weir/persist/batch.h"

namespace weir::persist::testing {

// The consolidated contents at `as_of` of `updates`, by brute force: data -> summed diff, zero sums
// left out.
inline std::map<std::string, int64_t> consolidate(const std::vector<Update>& updates,
                                                  uint64_t as_of) {
  std::map<std::string, int64_t> sums;
  for (const Update& update : updates) {
    if (update.time <= as_of) {
      sums[update.data] += update.diff;
    }
  }
  std::erase_if(sums, [](const auto& entry) { return entry.second == 0; });
  return sums;
}

inline std::map<std::string, int64_t> as_map(const std::vector<Update>& snapshot) {
  std::map<std::string, int64_t> sums;
  for (const Update& update : snapshot) {
    sums[update.data] += update.diff;
  }
  return sums;
}

// Batch `index` of the crash test's writer: updates at times [10 * index, 10 * index + 10), keys
// drawn from a small space so that batches retract and re-add each other's keys.
inline constexpr uint64_t kCrashBatchWidth = 10;
inline std::vector<Update> crash_batch(uint64_t index) {
  std::mt19937_64 rng(index * 7919 + 17);
  std::vector<Update> updates;
  const int count = 200 + static_cast<int>(rng() % 200);
  for (int i = 0; i < count; ++i) {
    const uint64_t key = rng() % 3000;
    const int64_t diff = rng() % 3 == 0 ? -1 : 1;
    updates.push_back({"key-" + std::to_string(key) + "-" + std::string(rng() % 40, 'v'),
                       index * kCrashBatchWidth + rng() % kCrashBatchWidth, diff});
  }
  return updates;
}

}  // namespace weir::persist::testing
