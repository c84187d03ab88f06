// sanitizers.h: WEIR_ASAN and WEIR_TSAN, defined when the file is compiled with AddressSanitizer
// or ThreadSanitizer (GCC says so with __SANITIZE_*__, clang with __has_feature), for code that
// must tell a sanitizer what it cannot see (fiber switches, hand-offs through uninstrumented
// libraries) or size itself for one.
//
//   #if defined(WEIR_TSAN)
//   #include <sanitizer/tsan_interface.h>
//   #endif
//
// Thread safety: macros only.

#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define WEIR_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WEIR_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define WEIR_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define WEIR_TSAN 1
#endif
#endif
