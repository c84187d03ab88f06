// str_cat: absl::StrCat for std::string_view arguments.
//
// Debian's abseil is built with its own absl::string_view (ABSL_OPTION_USE_STD_STRING_VIEW 0),
// which std::string_view does not convert to, so absl::StrCat cannot take our views.

#pragma once

#include <charconv>
#include <concepts>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"

namespace weir::persist::internal {

inline void append_piece(std::string& out, std::string_view piece) { out.append(piece); }
inline void append_piece(std::string& out, absl::string_view piece) {
  out.append(piece.data(), piece.size());
}
inline void append_piece(std::string& out, const std::string& piece) { out.append(piece); }
inline void append_piece(std::string& out, const char* piece) { out.append(piece); }
inline void append_piece(std::string& out, char piece) { out.push_back(piece); }
template <std::integral T>
requires(!std::same_as<T, char> && !std::same_as<T, bool>) void append_piece(std::string& out,
                                                                             T value) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out.append(buffer, result.ptr);
}

template <class... Pieces>
std::string str_cat(const Pieces&... pieces) {
  std::string out;
  (append_piece(out, pieces), ...);
  return out;
}

}  // namespace weir::persist::internal
