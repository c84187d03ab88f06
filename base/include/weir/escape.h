// escape: bytes as one line of text, as `weir persist cat` and error messages show data.
//
// Thread safety: a pure function.

#pragma once

#include <string>
#include <string_view>

namespace weir {

// Printable ASCII as is; '\\', tab and newline as C escapes; every other byte as \xNN.
inline std::string escape(std::string_view data) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(data.size());
  for (const char c : data) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (byte >= 0x20 && byte < 0x7f) {
      out += c;
    } else {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
    }
  }
  return out;
}

}  // namespace weir
