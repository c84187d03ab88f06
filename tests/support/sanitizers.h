// How much slower a sanitized build runs, for tests that wait a wall-clock time for the code under
// test to get somewhere (a crash test's kill after it got past its snapshot, say).

#pragma once

#include <cstdint>

#include "weir/sanitizers.h"

namespace weir::testing {

#if defined(WEIR_ASAN) || defined(WEIR_TSAN)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// Waits of crash tests are this many times longer under a sanitizer (the weir tool they start,
// built with the same sanitizer, takes about three times as long to get past its snapshot).
inline constexpr int kSanitizerSlowdown = kSanitized ? 3 : 1;

// How many of a property test's `seeds` random cases it runs: all of them in a plain build (the
// README's test command), a third under a sanitizer. A sanitizer looks for memory errors and data
// races, which a third of the cases reach as well as all of them, at 3–15 times the cost of each:
// the property tests were a third of the sanitizers' time in CI.
inline constexpr uint64_t property_seeds(uint64_t seeds) {
  return kSanitized ? (seeds + 2) / 3 : seeds;
}

}  // namespace weir::testing
