// WEIR_USAGE_CHECK and UsageError: a rule of weir's API broken by the program that uses it.
//
// WEIR_CHECK is for weir's own invariants and aborts. A rule that user code can break from inside
// an operator (a capability downgraded to an earlier time, a moved-from capability used, a
// capability of another output given to a session) is checked with WEIR_USAGE_CHECK instead: it
// throws a UsageError, which the runtime catches where it calls user code (operator logic, an
// async body, the closure given to `execute`) and turns into a FailedPrecondition Status naming
// the operator, dataflow and worker, as it does for any exception. `execute` returns it.
//
//   WEIR_USAGE_CHECK(time_le(time_, time))
//       << "a capability can only be downgraded to a later time: from " << time_ << " to " << time;
//
// The violation is also counted on the thread, so that user code that catches every exception and
// goes on still fails its execution.
//
// Thread safety: usable from any thread; the count is per thread.

#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace weir {

// Thrown by WEIR_USAGE_CHECK. Caught by the runtime; exceptions never cross weir's API.
class UsageError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace internal {

// Rules broken on this thread since it started, and the message of the last one.
inline thread_local uint64_t usage_errors = 0;
inline thread_local std::string last_usage_error;

// Collects the message streamed into WEIR_USAGE_CHECK.
class UsageFailure {
 public:
  template <class V>
  UsageFailure& operator<<(const V& value) {
    stream_ << value;
    return *this;
  }
  std::string message() const { return stream_.str(); }

 private:
  std::ostringstream stream_;
};

// Counts the violation and throws it (`&` binds after every `<<` of the message).
struct UsageThrow {
  [[noreturn]] void operator&(const UsageFailure& failure) const {
    ++usage_errors;
    last_usage_error = failure.message();
    throw UsageError(last_usage_error);
  }
};

}  // namespace internal
}  // namespace weir

// NOLINTBEGIN(bugprone-macro-parentheses): the expression stays open for the `<<` that follows.
#define WEIR_USAGE_CHECK(condition) \
  (condition) ? (void)0 : ::weir::internal::UsageThrow() & ::weir::internal::UsageFailure()
// NOLINTEND(bugprone-macro-parentheses)
