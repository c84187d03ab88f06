// Retrying what a store fails transiently, for the work that may safely run again.

#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weir::persist::internal {

// Sleeps before retry number `retry` (1, 2, ...): 1 ms doubling up to 64 ms, each drawn between
// half and all of that.
inline void retry_backoff(int retry) {
  thread_local absl::BitGen bits;
  const int64_t cap_us = int64_t{1000} << std::clamp(retry - 1, 0, 6);
  std::this_thread::sleep_for(
      std::chrono::microseconds(absl::Uniform<int64_t>(bits, cap_us / 2, cap_us + 1)));
}

inline const absl::Status& status_of(const absl::Status& status) { return status; }
template <class T>
const absl::Status& status_of(const absl::StatusOr<T>& result) {
  return result.status();
}

// Calls `op` again while it fails with Unavailable (a store's transient failure: a lost
// connection, a timeout, an injected fault), `attempts` times at most, backing off in between.
// Only for work that may safely run again after an indeterminate failure: reads (part fetches),
// writes of a part (a fresh key, written again with the same bytes), maintenance steps (which
// re-read the state each time) and changes of a registration by its fixed id.
template <class Op>
auto retry_unavailable(int attempts, Op op) -> decltype(op()) {
  for (int attempt = 1;; ++attempt) {
    auto result = op();
    if (status_of(result).code() != absl::StatusCode::kUnavailable || attempt >= attempts) {
      return result;
    }
    retry_backoff(attempt);
  }
}

// Attempts of one store call (a part fetch, a registration): at a 10 % failure rate of store
// calls, 8 fail in a row once in 10^8.
inline constexpr int kStoreAttempts = 8;
// Attempts of a compaction step, a handful of store calls of which about half fail at that rate:
// 20 fail in a row about once in 10^6.
inline constexpr int kStepAttempts = 20;

}  // namespace weir::persist::internal
