// recurse: recursion the compiler cannot turn into a loop, 1 KiB of stack per call, for the
// stack-overflow death tests.
#pragma once

namespace weir::testing {

__attribute__((noinline)) inline int recurse(volatile char* previous, int depth) {
  volatile char frame[1024];
  frame[0] = static_cast<char>(depth);
  if (previous != nullptr) frame[1] = previous[0];
  if (depth < 0) return 0;  // Never: keeps the compiler from calling the recursion infinite.
  return recurse(frame, depth + 1) + frame[1];
}

}  // namespace weir::testing
