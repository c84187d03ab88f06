// Checks of values a person typed (a command-line flag, an option of a stored source definition),
// so that a mistyped one is refused with a message that quotes it, rather than read otherwise than
// it was meant ("-1" as 2^64 - 1, "010" as 8, "nan" as a number).
//
// Each returns InvalidArgument with a message that names the value but not where it came from:
// the caller adds that ("--scale: " + message). The command-line checks (tools/weir/checks.h)
// and the source definitions (weir/ingest/source_spec.h) share these, so both say the same.
//
// Thread safety: stateless functions.

#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace weir {

namespace internal {

inline bool is_decimal(const std::string& text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

inline std::string in_quotes(const std::string& text) { return "\"" + text + "\""; }

}  // namespace internal

// A decimal number in [min, max]: digits only (no sign, spaces, exponent, hex or octal). On
// success `text` is rewritten in canonical form: "010" is 10, not octal 8.
inline absl::Status check_unsigned(std::string& text, uint64_t min = 0, uint64_t max = UINT64_MAX) {
  uint64_t value = 0;
  if (!internal::is_decimal(text) || !absl::SimpleAtoi(text, &value) || value < min ||
      value > max) {
    const bool bounded = min != 0 || max != UINT64_MAX;
    return absl::InvalidArgumentError(
        absl::StrCat(bounded ? absl::StrCat("expected a whole number from ", min, " to ", max)
                             : std::string("expected a whole number (0 or more, digits only)"),
                     ", got ", internal::in_quotes(text)));
  }
  text = std::to_string(value);
  return absl::OkStatus();
}

// A finite number in [min, max] (max = the largest double: unbounded above).
inline absl::Status check_number(const std::string& text, double min, double max) {
  char* end = nullptr;
  const double value = text.empty() || std::isspace(static_cast<unsigned char>(text[0]))
                           ? std::nan("")
                           : std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(value) || value < min || value > max) {
    const bool unbounded = max == std::numeric_limits<double>::max();
    return absl::InvalidArgumentError(
        absl::StrCat(unbounded ? absl::StrCat("expected a number from ", min, " up")
                               : absl::StrCat("expected a number from ", min, " to ", max),
                     ", got ", internal::in_quotes(text)));
  }
  return absl::OkStatus();
}

// Not the empty string.
inline absl::Status check_non_empty(const std::string& text) {
  return text.empty() ? absl::InvalidArgumentError("must not be empty") : absl::OkStatus();
}

// One of `names`, exactly.
inline absl::Status check_one_of(const std::string& text, std::span<const std::string> names) {
  if (std::find(names.begin(), names.end(), text) != names.end()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(internal::in_quotes(text), " is not one of ", absl::StrJoin(names, ", ")));
}

// PREFIX<separator>NUMBER with a non-empty PREFIX and a decimal NUMBER ("bids=100", "bids@5");
// `what` shows the form ("TABLE=N").
inline absl::Status check_name_and_number(const std::string& text, char separator,
                                          const std::string& what) {
  const size_t at = text.find(separator);
  uint64_t value = 0;
  if (at == 0 || at == std::string::npos || !internal::is_decimal(text.substr(at + 1)) ||
      !absl::SimpleAtoi(text.substr(at + 1), &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", what, ", got ", internal::in_quotes(text)));
  }
  return absl::OkStatus();
}

}  // namespace weir
