#include "weir/persist/ids.h"

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"

namespace weir::persist {

namespace internal {

std::string random_id(char kind) {
  thread_local absl::BitGen gen;
  const uint64_t hi = (absl::Uniform<uint64_t>(gen) & ~uint64_t{0xF000}) | uint64_t{0x4000};
  const uint64_t lo = (absl::Uniform<uint64_t>(gen) & ~(uint64_t{3} << 62)) | (uint64_t{2} << 62);
  char text[40];
  std::snprintf(text, sizeof(text), "%c%08x-%04x-%04x-%04x-%012llx", kind,
                static_cast<unsigned>(hi >> 32), static_cast<unsigned>((hi >> 16) & 0xFFFF),
                static_cast<unsigned>(hi & 0xFFFF), static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xFFFFFFFFFFFFULL));
  return text;
}

bool is_valid_id(char kind, std::string_view id) {
  constexpr std::string_view kPattern = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
  if (id.size() != kPattern.size() + 1 || id[0] != kind) {
    return false;
  }
  for (size_t i = 0; i < kPattern.size(); ++i) {
    const char c = id[i + 1];
    if (kPattern[i] == '-' ? c != '-' : !(absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

}  // namespace internal
}  // namespace weir::persist
