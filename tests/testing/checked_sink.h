// Checked, check_into: a sink for regression tests of the promise that a frontier never lies. It
// counts the records it sees, their sum, and the records that arrive at a time the sink's input
// frontier has already passed (violations: a correct runtime never has any).
//
// Thread safety: one Checked may be shared by the sinks of every worker (atomic counters).

#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "weir/weir.h"

namespace weir::testing {

struct Checked {
  std::atomic<uint64_t> records{0};
  std::atomic<uint64_t> sum{0};
  std::atomic<uint64_t> violations{0};
};

// `checked` must outlive the dataflow.
template <Timestamp T>
void check_into(const Stream<T, uint64_t>& stream, Checked& checked) {
  sink<T, uint64_t>(stream, Pipeline{}, "CheckSink", [&checked](auto& input) {
    input.for_each([&](const InputCapability<T>& cap, std::vector<uint64_t>& data) {
      if (!input.frontier().less_equal(cap.time())) ++checked.violations;
      for (uint64_t x : data) {
        ++checked.records;
        checked.sum += x;
      }
    });
  });
}

}  // namespace weir::testing
