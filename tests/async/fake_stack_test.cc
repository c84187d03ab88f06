// Fibers under AddressSanitizer with fake stacks (detect_stack_use_after_return=1): every fiber
// gets its own fake stack, which must be freed when the fiber finishes or is unwound. (Boost
// 1.74's ucontext fibers kept them: 20k fibers took 816 MB.) A binary of its own, because the
// option is set for the whole process below; elsewhere the test only runs the fibers.

#include <cstdint>
#include <cstdio>
#include <cstring>

#include <gtest/gtest.h>

#include "weir/async/fiber.h"
#include "weir/sanitizers.h"

#if defined(WEIR_ASAN)
// Fake stacks on; a small quarantine, so that freed heap memory does not hide what leaks.
extern "C" const char* __asan_default_options() {
  return "detect_stack_use_after_return=1:quarantine_size_mb=8";
}
#endif

namespace weir {
namespace {

int64_t resident_bytes() {
  long pages = 0;
  long resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  std::fclose(f);
  return static_cast<int64_t>(resident) * 4096;
}

// Keeps `buffer` addressable, so that it lives in a (fake) stack frame.
__attribute__((noinline)) void touch(char* buffer, size_t size) {
  std::memset(buffer, 1, size);
  asm volatile("" : : "r"(buffer) : "memory");
}

// A frame with a local array that suspends: its frame is on the fiber's fake stack across the
// switch.
__attribute__((noinline)) void suspend_with_a_frame() {
  char buffer[512];
  touch(buffer, sizeof(buffer));
  Fiber::current()->suspend();
  touch(buffer, sizeof(buffer));
}

// `n` fibers that finish, and `n` that are unwound while suspended.
void run_fibers(int n) {
  for (int i = 0; i < n; ++i) {
    Fiber finishing([] { suspend_with_a_frame(); });
    finishing.resume();
    finishing.resume();
    ASSERT_TRUE(finishing.is_done());
    Fiber unwound([] { suspend_with_a_frame(); });
    unwound.resume();
  }
}

TEST(FiberFakeStackTest, ManyFibersDoNotGrowMemory) {
  run_fibers(2000);  // Warm up pools and allocator caches.
  const int64_t before = resident_bytes();
  run_fibers(20000);
  const int64_t grown = resident_bytes() - before;
  std::printf("resident memory grew by %lld KiB over 40000 fibers\n",
              static_cast<long long>(grown >> 10));
  // Leaked fake stacks would be tens of KiB each: about 1.6 GB for these 40000 fibers.
  EXPECT_LT(grown, int64_t{128} << 20) << "resident memory grew by " << (grown >> 20) << " MiB";
}

}  // namespace
}  // namespace weir
