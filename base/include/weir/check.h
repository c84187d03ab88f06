// WEIR_CHECK: broken invariants are bugs. A failed check prints file:line and the message
// streamed into it, then aborts.
//
//   WEIR_CHECK(index < size_) << "port " << index << " out of range";
//
// Thread safety: usable from any thread.

#pragma once

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace weir::internal {

// Collects the streamed message; its destructor reports and aborts.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition) {
    stream_ << file << ":" << line << ": check failed: " << condition << ": ";
  }
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  [[noreturn]] ~CheckFailure() {
    std::fprintf(stderr, "%s\n", stream_.str().c_str());
    std::fflush(stderr);
    std::abort();
  }

  template <class V>
  CheckFailure& operator<<(const V& value) {
    stream_ << value;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

// Lets `WEIR_CHECK(c) << ...` be an expression of type void in both branches.
struct CheckVoidify {
  void operator&(CheckFailure&) {}
};

}  // namespace weir::internal

// Not parenthesized as a whole: `<<` must bind to the CheckFailure.
// NOLINTNEXTLINE(bugprone-macro-parentheses)
// NOLINTBEGIN(bugprone-macro-parentheses): the expression stays open for the `<<` that follows.
#define WEIR_CHECK(condition)                      \
  (condition) ? (void)0                            \
              : ::weir::internal::CheckVoidify() & \
                    ::weir::internal::CheckFailure(__FILE__, __LINE__, #condition)
// NOLINTEND(bugprone-macro-parentheses)

#ifdef NDEBUG
#define WEIR_DCHECK(condition) \
  while (false) WEIR_CHECK(condition)
#else
#define WEIR_DCHECK(condition) WEIR_CHECK(condition)
#endif
