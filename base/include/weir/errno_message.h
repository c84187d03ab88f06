// errno_message: the text of an errno value, safe to call from any thread (std::strerror may
// return a buffer that another thread's call overwrites; clang-tidy's concurrency-mt-unsafe).
//
//   if (fd < 0) return absl::InternalError("open " + path + ": " + weir::errno_message(errno));
//
// Thread safety: thread-safe.

#pragma once

#include <string>

#include <string.h>

namespace weir {

inline std::string errno_message(int error) {
  char buffer[256];
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
  // The GNU strerror_r returns the message, in `buffer` or in static storage.
  return ::strerror_r(error, buffer, sizeof buffer);
#else
  if (::strerror_r(error, buffer, sizeof buffer) != 0) return "errno " + std::to_string(error);
  return buffer;
#endif
}

}  // namespace weir
