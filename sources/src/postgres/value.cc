// Typed values and the compact row encoding (see value.h for the format). The text decoders
// follow PostgreSQL 15's input functions for the output styles value.h names; the printers follow
// its output functions (float8out/float4out with extra_float_digits > 0, numeric_out, date_out,
// EncodeDateTime/EncodeTimeOnly/EncodeInterval with DateStyle ISO and IntervalStyle postgres,
// array_out, byteaout in hex, uuid_out) and COPY's text escaping.

#include "weir/sources/postgres/value.h"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace weir::sources::postgres {
namespace {

// ---------------------------------------------------------------------------------------------
// Byte-level helpers.

// Debian's abseil has its own string_view: these take std::string_view and numbers.
inline absl::string_view absl_view(std::string_view s) { return {s.data(), s.size()}; }
inline void append_piece(std::string& out, std::string_view s) { out.append(s); }
inline void append_piece(std::string& out, absl::string_view s) { out.append(s.data(), s.size()); }
inline void append_piece(std::string& out, const char* s) { out.append(s); }
inline void append_piece(std::string& out, const std::string& s) { out.append(s); }
template <typename T>
requires std::is_integral_v<T>
inline void append_piece(std::string& out, T v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}
template <typename... Args>
std::string cat(const Args&... args) {
  std::string out;
  (append_piece(out, args), ...);
  return out;
}

constexpr size_t kQuoteLimit = 64;

// `"value"` for error messages: at most kQuoteLimit bytes, C-escaped.
std::string quote(std::string_view value) {
  if (value.size() > kQuoteLimit) {
    return cat("\"", absl::CHexEscape(absl_view(value.substr(0, kQuoteLimit))), "\"... (",
               value.size(), " bytes)");
  }
  return cat("\"", absl::CHexEscape(absl_view(value)), "\"");
}

absl::Status bad(std::string_view reason) { return absl::InvalidArgumentError(absl_view(reason)); }
absl::Status damaged(std::string_view reason) { return absl::DataLossError(absl_view(reason)); }

inline void put_varint(std::string& out, uint64_t v) {
  char buf[10];
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>(static_cast<uint8_t>(v) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out.append(buf, n);
}

inline uint64_t zigzag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t unzigzag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

inline void put_fixed64(std::string& out, uint64_t v) {
  char buf[8];
  for (int i = 0; i < 8; ++i) {
    buf[i] = static_cast<char>(v >> (8 * i));
  }
  out.append(buf, 8);
}
inline void put_fixed32(std::string& out, uint32_t v) {
  char buf[4];
  for (int i = 0; i < 4; ++i) {
    buf[i] = static_cast<char>(v >> (8 * i));
  }
  out.append(buf, 4);
}

// Reads an encoding without ever reading past its end; every read reports failure instead.
class Reader {
 public:
  explicit Reader(std::string_view s) : p_(s.data()), end_(s.data() + s.size()) {}

  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  bool at_end() const { return p_ == end_; }
  const char* position() const { return p_; }

  bool byte(uint8_t& v) {
    if (p_ == end_) {
      return false;
    }
    v = static_cast<uint8_t>(*p_++);
    return true;
  }
  // Minimal LEB128 only: an over-long encoding is damage, so each value has one encoding.
  bool varint(uint64_t& v) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) {
        return false;
      }
      const auto b = static_cast<uint8_t>(*p_++);
      if (shift == 63 && b > 1) {
        return false;
      }
      result |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        if (b == 0 && shift != 0) {
          return false;
        }
        v = result;
        return true;
      }
    }
    return false;
  }
  bool fixed64(uint64_t& v) {
    if (remaining() < 8) {
      return false;
    }
    v = 0;
    for (int i = 0; i < 8; ++i) {
      v |= static_cast<uint64_t>(static_cast<uint8_t>(p_[i])) << (8 * i);
    }
    p_ += 8;
    return true;
  }
  bool fixed32(uint32_t& v) {
    if (remaining() < 4) {
      return false;
    }
    v = 0;
    for (int i = 0; i < 4; ++i) {
      v |= static_cast<uint32_t>(static_cast<uint8_t>(p_[i])) << (8 * i);
    }
    p_ += 4;
    return true;
  }
  bool bytes(uint64_t n, std::string_view& v) {
    if (n > remaining()) {
      return false;
    }
    v = std::string_view(p_, n);
    p_ += n;
    return true;
  }
  bool skip(uint64_t n) {
    if (n > remaining()) {
      return false;
    }
    p_ += n;
    return true;
  }

 private:
  const char* p_;
  const char* end_;
};

// ---------------------------------------------------------------------------------------------
// Text helpers.

// PostgreSQL's scanner whitespace (isspace in the C locale).
inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) {
    s.remove_prefix(1);
  }
  while (!s.empty() && is_space(s.back())) {
    s.remove_suffix(1);
  }
  return s;
}

inline char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != b[i]) {
      return false;
    }
  }
  return true;
}

inline int hex_value(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

constexpr char kHexDigits[] = "0123456789abcdef";

template <typename T>
inline void append_int(std::string& out, T v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

// Zero-padded to at least `width` digits; v >= 0.
inline void append_padded(std::string& out, uint64_t v, int width) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  for (auto n = r.ptr - buf; n < width; ++n) {
    out += '0';
  }
  out.append(buf, r.ptr);
}

template <typename T>
bool parse_integer(std::string_view s, T& value) {
  s = trim(s);
  if (!s.empty() && s[0] == '+') {
    s.remove_prefix(1);
    if (!s.empty() && s[0] == '-') {
      return false;
    }
  }
  if (s.empty()) {
    return false;
  }
  const auto r = std::from_chars(s.data(), s.data() + s.size(), value);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// ---------------------------------------------------------------------------------------------
// Scalars: text -> encoding.

absl::Status encode_bool(std::string_view s, std::string& out) {
  s = trim(s);
  if (s.empty()) {
    return bad("not a boolean");
  }
  auto prefix_of = [&](std::string_view word) {
    if (s.size() > word.size()) {
      return false;
    }
    for (size_t i = 0; i < s.size(); ++i) {
      if (lower(s[i]) != word[i]) {
        return false;
      }
    }
    return true;
  };
  bool value;
  if (prefix_of("true") || prefix_of("yes") || iequals(s, "on") || s == "1") {
    value = true;
  } else if (prefix_of("false") || prefix_of("no") || iequals(s, "off") || iequals(s, "of") ||
             s == "0") {
    value = false;
  } else {
    return bad("not a boolean");
  }
  out += static_cast<char>(value ? 1 : 0);
  return absl::OkStatus();
}

template <typename T>
absl::Status encode_signed(std::string_view s, std::string& out) {
  T v;
  if (!parse_integer(s, v)) {
    return bad("not an integer in range");
  }
  encode_int_value(v, out);
  return absl::OkStatus();
}

absl::Status encode_oid(std::string_view s, std::string& out) {
  uint32_t v;
  if (!parse_integer(s, v)) {
    return bad("not an oid (an unsigned 32-bit integer)");
  }
  put_varint(out, v);
  return absl::OkStatus();
}

template <typename F>
absl::Status parse_float(std::string_view s, F& v) {
  s = trim(s);
  bool negative = false;
  std::string_view body = s;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (iequals(body, "nan")) {
    v = std::numeric_limits<F>::quiet_NaN();
    return absl::OkStatus();
  }
  if (iequals(body, "infinity") || iequals(body, "inf")) {
    v = negative ? -std::numeric_limits<F>::infinity() : std::numeric_limits<F>::infinity();
    return absl::OkStatus();
  }
  if (body.empty() || !(is_digit(body[0]) || body[0] == '.')) {
    return bad("not a floating-point number");
  }
  const auto r = std::from_chars(body.data(), body.data() + body.size(), v);
  if (r.ptr != body.data() + body.size()) {
    return bad("not a floating-point number");
  }
  if (r.ec == std::errc::result_out_of_range) {
    // libstdc++ reports subnormal results as out of range too; strtod does as PostgreSQL does.
    char buf[512];
    if (body.size() >= sizeof(buf)) {
      return bad("out of range");
    }
    std::memcpy(buf, body.data(), body.size());
    buf[body.size()] = '\0';
    char* end = nullptr;
    const double d = std::strtod(buf, &end);
    if constexpr (sizeof(F) == 4) {
      const float f = std::strtof(buf, &end);
      if (f == 0 || std::isinf(f)) {
        return bad("out of range for type real");
      }
      v = f;
    } else {
      if (d == 0 || std::isinf(d)) {
        return bad("out of range for type double precision");
      }
      v = d;
    }
  } else if (r.ec != std::errc()) {
    return bad("not a floating-point number");
  }
  if (negative) {
    v = -v;
  }
  return absl::OkStatus();
}

absl::Status encode_float4(std::string_view s, std::string& out) {
  float v;
  if (auto status = parse_float(s, v); !status.ok()) {
    return status;
  }
  encode_float4_value(v, out);
  return absl::OkStatus();
}

absl::Status encode_float8(std::string_view s, std::string& out) {
  double v;
  if (auto status = parse_float(s, v); !status.ok()) {
    return status;
  }
  encode_float8_value(v, out);
  return absl::OkStatus();
}

// numeric's limits (PostgreSQL 15 numeric.c): digits before the decimal point and dscale.
constexpr int64_t kNumericMaxWeight = 131071;  // weight of the first digit: < 131072 digits
constexpr int64_t kNumericMaxDscale = 16383;
constexpr int64_t kNumericMaxExponent = 1000;

enum NumericTag : uint8_t {
  kNumericPositive = 0,
  kNumericNegative = 1,
  kNumericNaN = 2,
  kNumericPosInf = 3,
  kNumericNegInf = 4,
};

absl::Status encode_numeric_digits(bool negative, std::string_view int_digits,
                                   std::string_view frac_digits, int64_t exponent,
                                   std::string& out);

absl::Status encode_numeric(std::string_view s, std::string& out) {
  s = trim(s);
  if (iequals(s, "nan")) {
    out += static_cast<char>(kNumericNaN);
    return absl::OkStatus();
  }
  size_t i = 0;
  const size_t n = s.size();
  bool negative = false;
  if (i < n && (s[i] == '+' || s[i] == '-')) {
    negative = s[i] == '-';
    ++i;
  }
  const std::string_view rest = s.substr(i);
  if (iequals(rest, "infinity") || iequals(rest, "inf")) {
    out += static_cast<char>(negative ? kNumericNegInf : kNumericPosInf);
    return absl::OkStatus();
  }
  const size_t int_begin = i;
  while (i < n && is_digit(s[i])) {
    ++i;
  }
  const size_t int_end = i;
  size_t frac_begin = i;
  size_t frac_end = i;
  if (i < n && s[i] == '.') {
    ++i;
    frac_begin = i;
    while (i < n && is_digit(s[i])) {
      ++i;
    }
    frac_end = i;
  }
  if (int_end == int_begin && frac_end == frac_begin) {
    return bad("not a number");
  }
  int64_t exponent = 0;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool exp_negative = false;
    if (i < n && (s[i] == '+' || s[i] == '-')) {
      exp_negative = s[i] == '-';
      ++i;
    }
    if (i == n || !is_digit(s[i])) {
      return bad("not a number: bad exponent");
    }
    while (i < n && is_digit(s[i])) {
      exponent = exponent * 10 + (s[i] - '0');
      if (exponent > kNumericMaxExponent) {
        return bad("exponent out of range");
      }
      ++i;
    }
    if (exp_negative) {
      exponent = -exponent;
    }
  }
  if (i != n) {
    return bad("not a number");
  }
  return encode_numeric_digits(negative, s.substr(int_begin, int_end - int_begin),
                               s.substr(frac_begin, frac_end - frac_begin), exponent, out);
}

// The value [-]digits x 10^(exponent - n_frac) (digits only), digit_at(k) for k < n_int + n_frac
// its k-th digit: n_int digits before the decimal point, n_frac after.
template <class DigitAt>
absl::Status encode_numeric_from(bool negative, int64_t n_int, int64_t n_frac, int64_t exponent,
                                 DigitAt digit_at, std::string& out) {
  const int64_t total = n_int + n_frac;
  const int64_t dscale = std::max<int64_t>(0, n_frac - exponent);
  if (dscale > kNumericMaxDscale) {
    return bad("too many digits after the decimal point");
  }
  int64_t first = 0;
  while (first < total && digit_at(first) == '0') {
    ++first;
  }
  if (first == total) {
    out += static_cast<char>(kNumericPositive);
    put_varint(out, static_cast<uint64_t>(dscale));
    put_varint(out, 0);
    return absl::OkStatus();
  }
  int64_t last = total - 1;
  while (digit_at(last) == '0') {
    --last;
  }
  const int64_t weight = (n_int - 1 - first) + exponent;
  if (weight > kNumericMaxWeight) {
    return bad("too many digits before the decimal point");
  }
  const int64_t ndigits = last - first + 1;
  out += static_cast<char>(negative ? kNumericNegative : kNumericPositive);
  put_varint(out, static_cast<uint64_t>(dscale));
  put_varint(out, static_cast<uint64_t>(ndigits));
  put_varint(out, zigzag(weight));
  const size_t at = out.size();
  out.resize(at + static_cast<size_t>((ndigits + 1) / 2));
  char* p = out.data() + at;
  for (int64_t k = 0; k < ndigits; k += 2) {
    const int hi = digit_at(first + k) - '0';
    const int lo = k + 1 < ndigits ? digit_at(first + k + 1) - '0' : 0;
    *p++ = static_cast<char>((hi << 4) | lo);
  }
  return absl::OkStatus();
}

// The value [-]int_digits[.frac_digits] x 10^exponent (digits only).
absl::Status encode_numeric_digits(bool negative, std::string_view int_digits,
                                   std::string_view frac_digits, int64_t exponent,
                                   std::string& out) {
  const auto n_int = static_cast<int64_t>(int_digits.size());
  const auto n_frac = static_cast<int64_t>(frac_digits.size());
  if (n_frac == 0 || int_digits.data() + n_int == frac_digits.data()) {
    // One run of digits (a text without a point, or a decoder's digits, both halves of one
    // buffer): indexed without choosing the half at every digit.
    const char* digits = n_int > 0 ? int_digits.data() : frac_digits.data();
    return encode_numeric_from(
        negative, n_int, n_frac, exponent, [digits](int64_t k) { return digits[k]; }, out);
  }
  return encode_numeric_from(
      negative, n_int, n_frac, exponent,
      [&](int64_t k) { return k < n_int ? int_digits[k] : frac_digits[k - n_int]; }, out);
}

absl::Status encode_varlena(std::string_view s, std::string& out) {
  encode_text_bytes(s, out);
  return absl::OkStatus();
}

absl::Status encode_bytea(std::string_view s, std::string& out) {
  if (s.size() >= 2 && s[0] == '\\' && s[1] == 'x') {
    size_t count = 0;
    for (size_t i = 2; i < s.size(); ++i) {
      if (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r') {
        continue;
      }
      if (hex_value(s[i]) < 0) {
        return bad("invalid hexadecimal digit");
      }
      ++count;
    }
    if (count % 2 != 0) {
      return bad("odd number of hexadecimal digits");
    }
    put_varint(out, count / 2);
    for (size_t i = 2; i < s.size();) {
      if (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r') {
        ++i;
        continue;
      }
      if (i + 1 >= s.size() || hex_value(s[i + 1]) < 0) {
        return bad("whitespace inside a hexadecimal byte");
      }
      out += static_cast<char>((hex_value(s[i]) << 4) | hex_value(s[i + 1]));
      i += 2;
    }
    return absl::OkStatus();
  }
  // The escape format: "\\" is a backslash, "\ooo" an octal byte, anything else itself.
  size_t count = 0;
  for (size_t i = 0; i < s.size();) {
    if (s[i] != '\\') {
      ++i;
    } else if (i + 1 < s.size() && s[i + 1] == '\\') {
      i += 2;
    } else if (i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' &&
               s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      i += 4;
    } else {
      return bad("invalid escape in bytea");
    }
    ++count;
  }
  put_varint(out, count);
  for (size_t i = 0; i < s.size();) {
    if (s[i] != '\\') {
      out += s[i++];
    } else if (s[i + 1] == '\\') {
      out += '\\';
      i += 2;
    } else {
      out +=
          static_cast<char>(((s[i + 1] - '0') << 6) | ((s[i + 2] - '0') << 3) | (s[i + 3] - '0'));
      i += 4;
    }
  }
  return absl::OkStatus();
}

absl::Status encode_uuid(std::string_view s, std::string& out) {
  s = trim(s);
  if (!s.empty() && s.front() == '{') {
    if (s.back() != '}') {
      return bad("not a uuid");
    }
    s = s.substr(1, s.size() - 2);
  }
  uint8_t bytes[16];
  int digits = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '-') {
      // A hyphen may follow any group of four digits.
      if (digits == 0 || digits == 32 || digits % 4 != 0 || s[i - 1] == '-') {
        return bad("not a uuid");
      }
      continue;
    }
    const int h = hex_value(s[i]);
    if (h < 0 || digits == 32) {
      return bad("not a uuid");
    }
    if (digits % 2 == 0) {
      bytes[digits / 2] = static_cast<uint8_t>(h << 4);
    } else {
      bytes[digits / 2] |= static_cast<uint8_t>(h);
    }
    ++digits;
  }
  if (digits != 32 || (!s.empty() && s.back() == '-')) {
    return bad("not a uuid");
  }
  out.append(reinterpret_cast<const char*>(bytes), 16);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Dates and times (PostgreSQL's datetime.c / timestamp.c arithmetic).

constexpr int64_t kUsecsPerSec = 1'000'000;
constexpr int64_t kUsecsPerMinute = 60 * kUsecsPerSec;
constexpr int64_t kUsecsPerHour = 60 * kUsecsPerMinute;
constexpr int64_t kUsecsPerDay = 24 * kUsecsPerHour;
constexpr int64_t kEpochJulian = 2451545;               // 2000-01-01
constexpr int64_t kDateEndJulian = 2147483494;          // 5874898-01-01
constexpr int64_t kTimestampEndJulian = 109203528;      // 294277-01-01
constexpr int64_t kMinTimestamp = -211813488000000000;  // 4714-11-24 00:00 BC
constexpr int64_t kEndTimestamp = 9223371331200000000;  // 294277-01-01 00:00
constexpr int64_t kMaxZoneSeconds = 15 * 3600 + 59 * 60 + 59;
constexpr int32_t kDateNegInfinity = std::numeric_limits<int32_t>::min();
constexpr int32_t kDatePosInfinity = std::numeric_limits<int32_t>::max();
constexpr int64_t kTimestampNegInfinity = std::numeric_limits<int64_t>::min();
constexpr int64_t kTimestampPosInfinity = std::numeric_limits<int64_t>::max();

int64_t date2j(int64_t y, int64_t m, int64_t d) {
  if (m > 2) {
    m += 1;
    y += 4800;
  } else {
    m += 13;
    y += 4799;
  }
  const int64_t century = y / 100;
  int64_t julian = y * 365 - 32167;
  julian += y / 4 - century + century / 4;
  julian += 7834 * m / 256 + d;
  return julian;
}

// REQUIRES: 0 <= jd < 2^32 (every valid date and timestamp).
void j2date(int64_t jd, int& year, int& month, int& day) {
  uint32_t julian = static_cast<uint32_t>(jd);
  julian += 32044;
  uint32_t quad = julian / 146097;
  const uint32_t extra = (julian - quad * 146097) * 4 + 3;
  julian += 60 + quad * 3 + extra / 146097;
  quad = julian / 1461;
  julian -= quad * 1461;
  int y = static_cast<int>(julian * 4 / 1461);
  julian = ((y != 0) ? ((julian + 305) % 365) : ((julian + 306) % 366)) + 123;
  y += static_cast<int>(quad * 4);
  year = y - 4800;
  quad = julian * 2141 / 65536;
  day = static_cast<int>(julian - 7834 * quad / 256);
  month = static_cast<int>((quad + 10) % 12 + 1);
}

bool is_leap(int64_t y) { return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0); }

int days_in_month(int64_t y, int64_t m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return (m == 2 && is_leap(y)) ? 29 : kDays[m - 1];
}

// Reads 1..max_digits decimal digits at s[i].
bool read_number(std::string_view s, size_t& i, int max_digits, int64_t& v) {
  const size_t begin = i;
  v = 0;
  while (i < s.size() && is_digit(s[i]) && static_cast<int>(i - begin) < max_digits) {
    v = v * 10 + (s[i] - '0');
    ++i;
  }
  return i > begin && !(i < s.size() && is_digit(s[i]));
}

// "Y-M-D" (ISO) at s[i]; the year as written (BC is applied by the caller).
bool read_ymd(std::string_view s, size_t& i, int64_t& year, int64_t& month, int64_t& day) {
  return read_number(s, i, 9, year) && i < s.size() && s[i++] == '-' &&
         read_number(s, i, 2, month) && i < s.size() && s[i++] == '-' && read_number(s, i, 2, day);
}

// Checks a day of an astronomical year.
absl::Status check_month_day(int64_t year, int64_t month, int64_t day) {
  if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month)) {
    return bad("date field out of range");
  }
  return absl::OkStatus();
}

// Turns a written year (and BC) into PostgreSQL's astronomical year and checks the day.
absl::Status check_date(int64_t& year, int64_t month, int64_t day, bool bc) {
  if (year == 0) {
    return bad("year 0 does not exist");
  }
  if (bc) {
    year = 1 - year;
  }
  return check_month_day(year, month, day);
}

// Skips " BC" at s[i] (with any run of spaces before it).
bool read_bc(std::string_view s, size_t& i) {
  size_t j = i;
  while (j < s.size() && s[j] == ' ') {
    ++j;
  }
  if (j > i && j + 2 <= s.size() && lower(s[j]) == 'b' && lower(s[j + 1]) == 'c') {
    i = j + 2;
    return true;
  }
  return false;
}

// "HH:MM[:SS[.fff]]" at s[i] as microseconds; fractions beyond microseconds round like
// PostgreSQL (rint). Checks each field, not the total.
absl::Status read_time_of_day(std::string_view s, size_t& i, int64_t& micros) {
  int64_t h;
  int64_t m;
  int64_t sec = 0;
  int64_t frac = 0;
  if (!read_number(s, i, 2, h) || i >= s.size() || s[i++] != ':' || !read_number(s, i, 2, m)) {
    return bad("bad time of day");
  }
  if (i < s.size() && s[i] == ':') {
    ++i;
    if (!read_number(s, i, 2, sec)) {
      return bad("bad seconds");
    }
    if (i < s.size() && s[i] == '.') {
      const size_t dot = i++;
      const size_t begin = i;
      while (i < s.size() && is_digit(s[i])) {
        ++i;
      }
      const size_t count = i - begin;
      if (count <= 6) {
        for (size_t k = 0; k < 6; ++k) {
          frac = frac * 10 + (k < count ? s[begin + k] - '0' : 0);
        }
      } else {
        double f = 0;
        std::from_chars(s.data() + dot, s.data() + i, f);
        frac = static_cast<int64_t>(std::nearbyint(f * 1e6));
      }
    }
  }
  if (h > 24 || m > 59 || sec > 60) {
    return bad("time field out of range");
  }
  micros = ((h * 60 + m) * 60 + sec) * kUsecsPerSec + frac;
  return absl::OkStatus();
}

// "+HH[:MM[:SS]]" / "-..." at s[i]: seconds east of UTC.
absl::Status read_zone(std::string_view s, size_t& i, int64_t& east) {
  if (i >= s.size() || (s[i] != '+' && s[i] != '-')) {
    return bad("missing time zone");
  }
  const bool negative = s[i++] == '-';
  int64_t h;
  int64_t m = 0;
  int64_t sec = 0;
  if (!read_number(s, i, 2, h)) {
    return bad("bad time zone");
  }
  if (i < s.size() && s[i] == ':') {
    ++i;
    if (!read_number(s, i, 2, m)) {
      return bad("bad time zone");
    }
    if (i < s.size() && s[i] == ':') {
      ++i;
      if (!read_number(s, i, 2, sec)) {
        return bad("bad time zone");
      }
    }
  }
  if (m > 59 || sec > 59) {
    return bad("time zone field out of range");
  }
  east = h * 3600 + m * 60 + sec;
  if (east > kMaxZoneSeconds) {
    return bad("time zone displacement out of range");
  }
  if (negative) {
    east = -east;
  }
  return absl::OkStatus();
}

// Years no date has (4714 BC, astronomical -4713, to 5874898), refused before date2j, which
// could overflow on them (a written year, at most 9 digits, never does).
bool beyond_dates(int64_t year) { return year < -4713 || year > 5874898; }

// A day already checked (check_month_day), in range or not.
absl::Status encode_checked_date(int64_t year, int64_t month, int64_t day, std::string& out) {
  if (beyond_dates(year)) {
    return bad("date out of range");
  }
  const int64_t j = date2j(year, month, day);
  if (j < 0 || j >= kDateEndJulian) {
    return bad("date out of range");
  }
  put_varint(out, zigzag(j - kEpochJulian));
  return absl::OkStatus();
}

absl::Status encode_date(std::string_view s, std::string& out) {
  s = trim(s);
  if (iequals(s, "infinity") || iequals(s, "+infinity")) {
    put_varint(out, zigzag(kDatePosInfinity));
    return absl::OkStatus();
  }
  if (iequals(s, "-infinity")) {
    put_varint(out, zigzag(kDateNegInfinity));
    return absl::OkStatus();
  }
  size_t i = 0;
  int64_t y;
  int64_t m;
  int64_t d;
  if (!read_ymd(s, i, y, m, d)) {
    return bad("not an ISO date (YYYY-MM-DD)");
  }
  const bool bc = read_bc(s, i);
  if (i != s.size()) {
    return bad("not an ISO date (YYYY-MM-DD)");
  }
  if (auto status = check_date(y, m, d, bc); !status.ok()) {
    return status;
  }
  return encode_checked_date(y, m, d, out);
}

absl::Status check_time(int64_t micros) {
  if (micros < 0 || micros > kUsecsPerDay) {
    return bad("time out of range");
  }
  return absl::OkStatus();
}

absl::Status encode_time(std::string_view s, std::string& out) {
  s = trim(s);
  size_t i = 0;
  int64_t micros;
  if (auto status = read_time_of_day(s, i, micros); !status.ok()) {
    return status;
  }
  if (i != s.size()) {
    return bad("not a time (HH:MM:SS)");
  }
  if (auto status = check_time(micros); !status.ok()) {
    return status;
  }
  put_varint(out, static_cast<uint64_t>(micros));
  return absl::OkStatus();
}

absl::Status encode_timetz(std::string_view s, std::string& out) {
  s = trim(s);
  size_t i = 0;
  int64_t micros;
  int64_t east;
  if (auto status = read_time_of_day(s, i, micros); !status.ok()) {
    return status;
  }
  if (auto status = read_zone(s, i, east); !status.ok()) {
    return status;
  }
  if (i != s.size()) {
    return bad("not a time with time zone (HH:MM:SS+HH)");
  }
  if (auto status = check_time(micros); !status.ok()) {
    return status;
  }
  put_varint(out, static_cast<uint64_t>(micros));
  put_varint(out, zigzag(-east));
  return absl::OkStatus();
}

// A day already checked (check_month_day), the time of day and the zone (seconds east of UTC).
absl::Status encode_checked_timestamp(int64_t year, int64_t month, int64_t day, int64_t tod,
                                      int64_t east, std::string& out) {
  if (auto status = check_time(tod); !status.ok()) {
    return status;
  }
  if (beyond_dates(year)) {
    return bad("timestamp out of range");
  }
  // The local day may be the one after the last UTC day (a negative offset); beyond it the
  // arithmetic below could overflow.
  const int64_t j = date2j(year, month, day);
  if (j < 0 || j > kTimestampEndJulian) {
    return bad("timestamp out of range");
  }
  const int64_t t = (j - kEpochJulian) * kUsecsPerDay + tod - east * kUsecsPerSec;
  if (t < kMinTimestamp || t >= kEndTimestamp) {
    return bad("timestamp out of range");
  }
  put_fixed64(out, static_cast<uint64_t>(t));
  return absl::OkStatus();
}

absl::Status encode_timestamp(std::string_view s, bool with_zone, std::string& out) {
  s = trim(s);
  int64_t t;
  if (iequals(s, "infinity") || iequals(s, "+infinity")) {
    t = kTimestampPosInfinity;
  } else if (iequals(s, "-infinity")) {
    t = kTimestampNegInfinity;
  } else {
    size_t i = 0;
    int64_t y;
    int64_t m;
    int64_t d;
    int64_t tod;
    int64_t east = 0;
    if (!read_ymd(s, i, y, m, d) || i >= s.size() || (s[i] != ' ' && s[i] != 'T')) {
      return bad("not an ISO timestamp (YYYY-MM-DD HH:MM:SS)");
    }
    ++i;
    if (auto status = read_time_of_day(s, i, tod); !status.ok()) {
      return status;
    }
    if (with_zone) {
      if (auto status = read_zone(s, i, east); !status.ok()) {
        return status;
      }
    }
    const bool bc = read_bc(s, i);
    if (i != s.size()) {
      return bad(with_zone ? "not an ISO timestamp with time zone (YYYY-MM-DD HH:MM:SS+HH)"
                           : "not an ISO timestamp (YYYY-MM-DD HH:MM:SS)");
    }
    if (auto status = check_date(y, m, d, bc); !status.ok()) {
      return status;
    }
    return encode_checked_timestamp(y, m, d, tod, east, out);
  }
  put_fixed64(out, static_cast<uint64_t>(t));
  return absl::OkStatus();
}

// IntervalStyle postgres: "[+-]N year[s] [+-]N mon[s] [+-]N day[s] [+-]HH:MM:SS[.ffffff]".
absl::Status encode_interval(std::string_view s, std::string& out) {
  s = trim(s);
  if (s.empty()) {
    return bad("empty interval");
  }
  int64_t months = 0;
  int64_t days = 0;
  int64_t micros = 0;
  size_t i = 0;
  bool seen_time = false;
  while (i < s.size()) {
    bool negative = false;
    if (s[i] == '+' || s[i] == '-') {
      negative = s[i] == '-';
      ++i;
    }
    int64_t v;
    if (!read_number(s, i, 18, v)) {
      return bad("not an interval (IntervalStyle postgres)");
    }
    if (i < s.size() && s[i] == ':') {
      if (seen_time) {
        return bad("two times of day in an interval");
      }
      seen_time = true;
      // Hours may exceed 24 and have many digits: read them again as the time's hours.
      size_t j = i + 1;
      int64_t m;
      int64_t sec = 0;
      int64_t frac = 0;
      if (!read_number(s, j, 2, m) || m > 59) {
        return bad("bad minutes in an interval");
      }
      if (j < s.size() && s[j] == ':') {
        ++j;
        if (!read_number(s, j, 2, sec) || sec > 59) {
          return bad("bad seconds in an interval");
        }
        if (j < s.size() && s[j] == '.') {
          const size_t begin = ++j;
          while (j < s.size() && is_digit(s[j])) {
            ++j;
          }
          if (j == begin || j - begin > 6) {
            return bad("bad fraction of a second in an interval");
          }
          for (size_t k = 0; k < 6; ++k) {
            frac = frac * 10 + (begin + k < j ? s[begin + k] - '0' : 0);
          }
        }
      }
      // The magnitude in uint64 (hours have up to 18 digits), then signed: -2^63 fits.
      uint64_t magnitude;
      if (__builtin_mul_overflow(static_cast<uint64_t>(v), static_cast<uint64_t>(kUsecsPerHour),
                                 &magnitude) ||
          __builtin_add_overflow(
              magnitude, static_cast<uint64_t>(m * kUsecsPerMinute + sec * kUsecsPerSec + frac),
              &magnitude) ||
          magnitude > (uint64_t{1} << 63) || (!negative && magnitude == (uint64_t{1} << 63))) {
        return bad("interval out of range");
      }
      const int64_t part =
          negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
      if (__builtin_add_overflow(micros, part, &micros)) {
        return bad("interval out of range");
      }
      i = j;
    } else {
      if (i >= s.size() || s[i] != ' ') {
        return bad("not an interval (IntervalStyle postgres)");
      }
      ++i;
      const size_t unit_at = i;
      while (i < s.size() && s[i] >= 'a' && s[i] <= 'z') {
        ++i;
      }
      const std::string_view unit = s.substr(unit_at, i - unit_at);
      // No part of a valid interval is this large, and checking first keeps the sums in range.
      if (v > 3'000'000'000) {
        return bad("interval out of range");
      }
      const int64_t signed_v = negative ? -v : v;
      if (unit == "year" || unit == "years") {
        months += signed_v * 12;
      } else if (unit == "mon" || unit == "mons") {
        months += signed_v;
      } else if (unit == "day" || unit == "days") {
        days += signed_v;
      } else {
        return bad("unknown unit in an interval");
      }
      if (months > std::numeric_limits<int32_t>::max() ||
          months < std::numeric_limits<int32_t>::min() ||
          days > std::numeric_limits<int32_t>::max() ||
          days < std::numeric_limits<int32_t>::min()) {
        return bad("interval out of range");
      }
    }
    if (i < s.size()) {
      if (s[i] != ' ') {
        return bad("not an interval (IntervalStyle postgres)");
      }
      ++i;
    }
  }
  put_varint(out, zigzag(months));
  put_varint(out, zigzag(days));
  put_varint(out, zigzag(micros));
  return absl::OkStatus();
}

absl::Status encode_scalar(TypeKind kind, std::string_view s, std::string& out) {
  switch (kind) {
    case TypeKind::kBool:
      return encode_bool(s, out);
    case TypeKind::kInt2:
      return encode_signed<int16_t>(s, out);
    case TypeKind::kInt4:
      return encode_signed<int32_t>(s, out);
    case TypeKind::kInt8:
      return encode_signed<int64_t>(s, out);
    case TypeKind::kOid:
      return encode_oid(s, out);
    case TypeKind::kFloat4:
      return encode_float4(s, out);
    case TypeKind::kFloat8:
      return encode_float8(s, out);
    case TypeKind::kNumeric:
      return encode_numeric(s, out);
    case TypeKind::kText:
    case TypeKind::kJson:
    case TypeKind::kJsonb:
      return encode_varlena(s, out);
    case TypeKind::kBytea:
      return encode_bytea(s, out);
    case TypeKind::kDate:
      return encode_date(s, out);
    case TypeKind::kTime:
      return encode_time(s, out);
    case TypeKind::kTimeTz:
      return encode_timetz(s, out);
    case TypeKind::kTimestamp:
      return encode_timestamp(s, false, out);
    case TypeKind::kTimestampTz:
      return encode_timestamp(s, true, out);
    case TypeKind::kInterval:
      return encode_interval(s, out);
    case TypeKind::kUuid:
      return encode_uuid(s, out);
  }
  return bad("unknown type kind");
}

// ---------------------------------------------------------------------------------------------
// Arrays (array_in / array_out).

constexpr int kMaxArrayDims = 6;
constexpr uint64_t kMaxArrayElements = 134217727;  // PostgreSQL's MaxArraySize

struct ElementRef {
  uint32_t offset = 0;
  uint32_t length = 0;
  uint8_t where = 0;  // 0: the input, 1: the unescaped scratch, 2: NULL
};

struct ArrayScratch {
  std::vector<ElementRef> elements;
  std::string unescaped;
  std::string printed;  // one element, while deciding whether it needs quotes
  std::string row;      // a whole array or bytea value in print_row, before COPY escaping
};

ArrayScratch& array_scratch() {
  thread_local ArrayScratch scratch;
  return scratch;
}

class ArrayParser {
 public:
  ArrayParser(std::string_view s, char delimiter, ArrayScratch& scratch)
      : s_(s), delimiter_(delimiter), scratch_(scratch) {}

  absl::Status parse() {
    scratch_.elements.clear();
    scratch_.unescaped.clear();
    skip_space();
    int explicit_ndim = 0;
    if (i_ < s_.size() && s_[i_] == '[') {
      while (i_ < s_.size() && s_[i_] == '[') {
        if (explicit_ndim == kMaxArrayDims) {
          return bad("more than 6 array dimensions");
        }
        ++i_;
        int64_t first;
        if (!read_signed(first)) {
          return bad("bad array dimension");
        }
        int64_t lower = 1;
        int64_t upper = first;
        if (i_ < s_.size() && s_[i_] == ':') {
          ++i_;
          lower = first;
          if (!read_signed(upper)) {
            return bad("bad array dimension");
          }
        }
        if (i_ >= s_.size() || s_[i_] != ']') {
          return bad("missing ] in array dimensions");
        }
        ++i_;
        if (upper < lower || upper > std::numeric_limits<int32_t>::max() ||
            lower < std::numeric_limits<int32_t>::min()) {
          return bad("array upper bound below lower bound or out of range");
        }
        explicit_lower_[explicit_ndim] = lower;
        explicit_length_[explicit_ndim] = upper - lower + 1;
        ++explicit_ndim;
        skip_space();
      }
      if (i_ >= s_.size() || s_[i_] != '=') {
        return bad("missing = after array dimensions");
      }
      ++i_;
      skip_space();
    }
    if (i_ >= s_.size() || s_[i_] != '{') {
      return bad("array value must start with { or dimension information");
    }
    if (auto status = parse_level(0); !status.ok()) {
      return status;
    }
    skip_space();
    if (i_ != s_.size()) {
      return bad("junk after closing } of an array");
    }
    if (ndim_ < 0) {
      ndim_ = 0;
    }
    for (int d = 0; d < ndim_; ++d) {
      lower_[d] = 1;
    }
    if (explicit_ndim > 0) {
      if (explicit_ndim != ndim_) {
        return bad("array dimensions do not match the array contents");
      }
      for (int d = 0; d < ndim_; ++d) {
        if (explicit_length_[d] != length_[d]) {
          return bad("array dimensions do not match the array contents");
        }
        lower_[d] = explicit_lower_[d];
      }
    }
    return absl::OkStatus();
  }

  int ndim() const { return ndim_; }
  int64_t length(int d) const { return length_[d]; }
  int64_t lower(int d) const { return lower_[d]; }

 private:
  void skip_space() {
    while (i_ < s_.size() && is_space(s_[i_])) {
      ++i_;
    }
  }
  bool read_signed(int64_t& v) {
    bool negative = false;
    if (i_ < s_.size() && (s_[i_] == '-' || s_[i_] == '+')) {
      negative = s_[i_] == '-';
      ++i_;
    }
    if (!read_number(s_, i_, 10, v)) {
      return false;
    }
    if (negative) {
      v = -v;
    }
    return true;
  }

  // s_[i_] == '{'
  absl::Status parse_level(int depth) {
    if (depth >= kMaxArrayDims) {
      return bad("more than 6 array dimensions");
    }
    ++i_;
    skip_space();
    if (i_ < s_.size() && s_[i_] == '}') {
      if (depth != 0) {
        return bad("empty sub-array");
      }
      ++i_;
      ndim_ = 0;
      return absl::OkStatus();
    }
    int64_t count = 0;
    while (true) {
      skip_space();
      if (i_ >= s_.size()) {
        return bad("unterminated array");
      }
      if (s_[i_] == '{') {
        if (ndim_ >= 0 && depth + 1 >= ndim_) {
          return bad("unexpected { in an array");
        }
        if (auto status = parse_level(depth + 1); !status.ok()) {
          return status;
        }
      } else {
        if (ndim_ < 0) {
          ndim_ = depth + 1;
        } else if (ndim_ != depth + 1) {
          return bad("multidimensional arrays must have sub-arrays with matching dimensions");
        }
        if (auto status = parse_element(); !status.ok()) {
          return status;
        }
      }
      ++count;
      skip_space();
      if (i_ >= s_.size()) {
        return bad("unterminated array");
      }
      if (s_[i_] == delimiter_) {
        ++i_;
        continue;
      }
      if (s_[i_] == '}') {
        ++i_;
        break;
      }
      return bad("expected a delimiter or } in an array");
    }
    if (length_[depth] == 0) {
      length_[depth] = count;
    } else if (length_[depth] != count) {
      return bad("multidimensional arrays must have sub-arrays with matching dimensions");
    }
    return absl::OkStatus();
  }

  absl::Status parse_element() {
    if (scratch_.elements.size() >= kMaxArrayElements) {
      return bad("too many array elements");
    }
    if (s_[i_] == '"') {
      const size_t begin = ++i_;
      bool escaped = false;
      while (true) {
        if (i_ >= s_.size()) {
          return bad("unterminated quoted array element");
        }
        if (s_[i_] == '\\') {
          if (i_ + 1 >= s_.size()) {
            return bad("unterminated quoted array element");
          }
          escaped = true;
          i_ += 2;
        } else if (s_[i_] == '"') {
          break;
        } else {
          ++i_;
        }
      }
      add(begin, i_, escaped);
      ++i_;
      return absl::OkStatus();
    }
    const size_t begin = i_;
    size_t end = i_;  // after the last character that is not unescaped whitespace
    bool escaped = false;
    while (i_ < s_.size() && s_[i_] != delimiter_ && s_[i_] != '}') {
      const char c = s_[i_];
      if (c == '\\') {
        if (i_ + 1 >= s_.size()) {
          return bad("unterminated array element");
        }
        escaped = true;
        i_ += 2;
        end = i_;
      } else if (c == '"' || c == '{') {
        return bad("unexpected character in an unquoted array element");
      } else {
        ++i_;
        if (!is_space(c)) {
          end = i_;
        }
      }
    }
    if (end == begin) {
      return bad("empty unquoted array element");
    }
    if (!escaped && iequals(s_.substr(begin, end - begin), "null")) {
      scratch_.elements.push_back({0, 0, 2});
      return absl::OkStatus();
    }
    add(begin, end, escaped);
    return absl::OkStatus();
  }

  void add(size_t begin, size_t end, bool escaped) {
    if (!escaped) {
      scratch_.elements.push_back(
          {static_cast<uint32_t>(begin), static_cast<uint32_t>(end - begin), 0});
      return;
    }
    const size_t at = scratch_.unescaped.size();
    for (size_t k = begin; k < end; ++k) {
      if (s_[k] == '\\') {
        ++k;
      }
      scratch_.unescaped += s_[k];
    }
    scratch_.elements.push_back(
        {static_cast<uint32_t>(at), static_cast<uint32_t>(scratch_.unescaped.size() - at), 1});
  }

  std::string_view s_;
  char delimiter_;
  ArrayScratch& scratch_;
  size_t i_ = 0;
  int ndim_ = -1;
  int64_t length_[kMaxArrayDims] = {};
  int64_t lower_[kMaxArrayDims] = {};
  int64_t explicit_length_[kMaxArrayDims] = {};
  int64_t explicit_lower_[kMaxArrayDims] = {};
};

absl::Status encode_array(const ColumnType& type, std::string_view s, std::string& out) {
  if (s.size() > std::numeric_limits<uint32_t>::max()) {
    return bad("array text too long");
  }
  ArrayScratch& scratch = array_scratch();
  ArrayParser parser(s, type.delimiter, scratch);
  if (auto status = parser.parse(); !status.ok()) {
    return status;
  }
  const size_t start = out.size();
  put_varint(out, static_cast<uint64_t>(parser.ndim()));
  for (int d = 0; d < parser.ndim(); ++d) {
    put_varint(out, static_cast<uint64_t>(parser.length(d)));
    put_varint(out, zigzag(parser.lower(d)));
  }
  if (parser.ndim() > 0) {
    const auto& elements = scratch.elements;
    bool has_nulls = false;
    for (const ElementRef& e : elements) {
      has_nulls |= e.where == 2;
    }
    out += static_cast<char>(has_nulls ? 1 : 0);
    if (has_nulls) {
      const size_t bitmap = out.size();
      out.append((elements.size() + 7) / 8, '\0');
      for (size_t k = 0; k < elements.size(); ++k) {
        if (elements[k].where == 2) {
          out[bitmap + k / 8] = static_cast<char>(out[bitmap + k / 8] | (1 << (k % 8)));
        }
      }
    }
    for (size_t k = 0; k < elements.size(); ++k) {
      const ElementRef& e = elements[k];
      if (e.where == 2) {
        continue;
      }
      const std::string_view text =
          (e.where == 0 ? s : std::string_view(scratch.unescaped)).substr(e.offset, e.length);
      if (auto status = encode_scalar(type.kind, text, out); !status.ok()) {
        out.resize(start);
        return bad(cat("array element ", k + 1, " ", quote(text), ": ", status.message()));
      }
    }
  }
  // Prefix the body with its length.
  char prefix[10];
  size_t n = 0;
  uint64_t len = out.size() - start;
  while (len >= 0x80) {
    prefix[n++] = static_cast<char>(static_cast<uint8_t>(len) | 0x80);
    len >>= 7;
  }
  prefix[n++] = static_cast<char>(len);
  out.insert(start, prefix, n);
  return absl::OkStatus();
}

absl::Status encode_any(const ColumnType& type, std::string_view s, std::string& out) {
  return type.is_array ? encode_array(type, s, out) : encode_scalar(type.kind, s, out);
}

// ---------------------------------------------------------------------------------------------
// Binary send format -> encoding (PostgreSQL 15's *_send functions, integer datetimes). Each
// decoder takes exactly one value's bytes and refuses what the matching text decoder refuses
// for the value's text, so a value encodes the same either way.

// Reads big-endian fields without ever reading past the end.
class NetworkReader {
 public:
  explicit NetworkReader(std::string_view s) : p_(s.data()), end_(s.data() + s.size()) {}

  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  bool at_end() const { return p_ == end_; }

  bool u16(uint16_t& v) { return get(v); }
  bool u32(uint32_t& v) { return get(v); }
  bool u64(uint64_t& v) { return get(v); }
  bool i16(int16_t& v) { return get_signed<uint16_t>(v); }
  bool i32(int32_t& v) { return get_signed<uint32_t>(v); }
  bool i64(int64_t& v) { return get_signed<uint64_t>(v); }
  bool bytes(size_t n, std::string_view& v) {
    if (n > remaining()) {
      return false;
    }
    v = std::string_view(p_, n);
    p_ += n;
    return true;
  }

 private:
  template <typename U>
  bool get(U& v) {
    if (remaining() < sizeof(U)) {
      return false;
    }
    U result = 0;
    for (size_t i = 0; i < sizeof(U); ++i) {
      result = static_cast<U>((result << 8) | static_cast<uint8_t>(p_[i]));
    }
    p_ += sizeof(U);
    v = result;
    return true;
  }
  template <typename U, typename S>
  bool get_signed(S& v) {
    U u;
    if (!get(u)) {
      return false;
    }
    v = static_cast<S>(u);
    return true;
  }

  const char* p_;
  const char* end_;
};

// One fixed-size value's reader: `bytes` must be exactly `size` bytes.
absl::Status check_size(std::string_view bytes, size_t size) {
  if (bytes.size() != size) {
    return bad(cat(bytes.size(), " bytes, expected ", size));
  }
  return absl::OkStatus();
}

// numeric_send: int16 ndigits, int16 weight (base 10000), uint16 sign, uint16 dscale, then
// ndigits base-10000 digits. Digits beyond dscale are cut off as numeric_recv does (trunc_var);
// the result is in encode_numeric's form for numeric_out's text of the value.
absl::Status encode_binary_numeric(std::string_view bytes, std::string& out) {
  NetworkReader in(bytes);
  uint16_t ndigits;
  int16_t weight;
  uint16_t sign;
  uint16_t dscale;
  if (!in.u16(ndigits) || !in.i16(weight) || !in.u16(sign) || !in.u16(dscale)) {
    return bad("truncated numeric header");
  }
  if (in.remaining() != size_t{2} * ndigits) {
    return bad(cat("numeric of ", ndigits, " digits has ", in.remaining(), " bytes of digits"));
  }
  const char* digits = bytes.data() + 8;
  auto group = [&](int64_t g) -> uint32_t {
    return (static_cast<uint32_t>(static_cast<uint8_t>(digits[2 * g])) << 8) |
           static_cast<uint8_t>(digits[2 * g + 1]);
  };
  for (int64_t g = 0; g < ndigits; ++g) {
    if (group(g) > 9999) {
      return bad("numeric digit out of range (0 to 9999)");
    }
  }
  if (dscale > kNumericMaxDscale) {
    return bad("numeric scale out of range");
  }
  switch (sign) {
    case 0x0000:
    case 0x4000:
      break;
    case 0xC000:
      out += static_cast<char>(kNumericNaN);
      return absl::OkStatus();
    case 0xD000:
      out += static_cast<char>(kNumericPosInf);
      return absl::OkStatus();
    case 0xF000:
      out += static_cast<char>(kNumericNegInf);
      return absl::OkStatus();
    default:
      return bad("invalid numeric sign");
  }
  // Decimal digit k (of 4 per base-10000 digit) stands for 10^(4 * weight + 3 - k); the ones
  // below 10^-dscale are cut off.
  static constexpr uint32_t kPow10[] = {1000, 100, 10, 1};
  auto decimal = [&](int64_t k) -> int {
    return static_cast<int>(group(k / 4) / kPow10[k % 4] % 10);
  };
  const int64_t top = 4 * int64_t{weight} + 3;
  const int64_t limit = std::min<int64_t>(4 * int64_t{ndigits}, top + dscale + 1);
  int64_t first = 0;
  while (first < limit && decimal(first) == 0) {
    ++first;
  }
  if (first >= limit) {  // zero (PostgreSQL makes it positive)
    out += static_cast<char>(kNumericPositive);
    put_varint(out, dscale);
    put_varint(out, 0);
    return absl::OkStatus();
  }
  int64_t last = limit - 1;
  while (decimal(last) == 0) {
    --last;
  }
  const int64_t decimal_weight = top - first;
  if (decimal_weight > kNumericMaxWeight) {
    return bad("too many digits before the decimal point");
  }
  const int64_t n = last - first + 1;
  out += static_cast<char>(sign == 0x4000 ? kNumericNegative : kNumericPositive);
  put_varint(out, dscale);
  put_varint(out, static_cast<uint64_t>(n));
  put_varint(out, zigzag(decimal_weight));
  const size_t at = out.size();
  out.resize(at + static_cast<size_t>((n + 1) / 2));
  char* p = out.data() + at;
  for (int64_t k = 0; k < n; k += 2) {
    const int hi = decimal(first + k);
    const int lo = k + 1 < n ? decimal(first + k + 1) : 0;
    *p++ = static_cast<char>((hi << 4) | lo);
  }
  return absl::OkStatus();
}

absl::Status encode_binary_scalar(TypeKind kind, std::string_view bytes, std::string& out) {
  NetworkReader in(bytes);
  switch (kind) {
    case TypeKind::kBool: {
      if (auto status = check_size(bytes, 1); !status.ok()) {
        return status;
      }
      if (bytes[0] != 0 && bytes[0] != 1) {
        return bad("not a boolean (0 or 1)");
      }
      out += bytes[0];
      return absl::OkStatus();
    }
    case TypeKind::kInt2: {
      int16_t v = 0;
      if (auto status = check_size(bytes, 2); !status.ok()) {
        return status;
      }
      in.i16(v);
      put_varint(out, zigzag(v));
      return absl::OkStatus();
    }
    case TypeKind::kInt4: {
      int32_t v = 0;
      if (auto status = check_size(bytes, 4); !status.ok()) {
        return status;
      }
      in.i32(v);
      put_varint(out, zigzag(v));
      return absl::OkStatus();
    }
    case TypeKind::kInt8: {
      int64_t v = 0;
      if (auto status = check_size(bytes, 8); !status.ok()) {
        return status;
      }
      in.i64(v);
      put_varint(out, zigzag(v));
      return absl::OkStatus();
    }
    case TypeKind::kOid: {
      uint32_t v = 0;
      if (auto status = check_size(bytes, 4); !status.ok()) {
        return status;
      }
      in.u32(v);
      put_varint(out, v);
      return absl::OkStatus();
    }
    case TypeKind::kFloat4: {
      uint32_t v = 0;
      if (auto status = check_size(bytes, 4); !status.ok()) {
        return status;
      }
      in.u32(v);
      put_fixed32(out, std::isnan(std::bit_cast<float>(v)) ? 0x7fc00000u : v);
      return absl::OkStatus();
    }
    case TypeKind::kFloat8: {
      uint64_t v = 0;
      if (auto status = check_size(bytes, 8); !status.ok()) {
        return status;
      }
      in.u64(v);
      put_fixed64(out, std::isnan(std::bit_cast<double>(v)) ? 0x7ff8000000000000ull : v);
      return absl::OkStatus();
    }
    case TypeKind::kNumeric:
      return encode_binary_numeric(bytes, out);
    case TypeKind::kText:
    case TypeKind::kJson:
    case TypeKind::kBytea:
      return encode_varlena(bytes, out);
    case TypeKind::kJsonb:
      if (bytes.empty() || bytes[0] != 1) {
        return bad(bytes.empty() ? "empty jsonb (no version byte)" : "unsupported jsonb version");
      }
      return encode_varlena(bytes.substr(1), out);
    case TypeKind::kDate: {
      int32_t days = 0;
      if (auto status = check_size(bytes, 4); !status.ok()) {
        return status;
      }
      in.i32(days);
      if (days != kDateNegInfinity && days != kDatePosInfinity) {
        const int64_t j = int64_t{days} + kEpochJulian;
        if (j < 0 || j >= kDateEndJulian) {
          return bad("date out of range");
        }
      }
      put_varint(out, zigzag(days));
      return absl::OkStatus();
    }
    case TypeKind::kTime: {
      int64_t micros = 0;
      if (auto status = check_size(bytes, 8); !status.ok()) {
        return status;
      }
      in.i64(micros);
      if (auto status = check_time(micros); !status.ok()) {
        return status;
      }
      put_varint(out, static_cast<uint64_t>(micros));
      return absl::OkStatus();
    }
    case TypeKind::kTimeTz: {
      int64_t micros = 0;
      int32_t west = 0;
      if (auto status = check_size(bytes, 12); !status.ok()) {
        return status;
      }
      in.i64(micros);
      in.i32(west);
      if (auto status = check_time(micros); !status.ok()) {
        return status;
      }
      if (west > kMaxZoneSeconds || west < -kMaxZoneSeconds) {
        return bad("time zone displacement out of range");
      }
      put_varint(out, static_cast<uint64_t>(micros));
      put_varint(out, zigzag(west));
      return absl::OkStatus();
    }
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz: {
      int64_t t = 0;
      if (auto status = check_size(bytes, 8); !status.ok()) {
        return status;
      }
      in.i64(t);
      if (t != kTimestampNegInfinity && t != kTimestampPosInfinity &&
          (t < kMinTimestamp || t >= kEndTimestamp)) {
        return bad("timestamp out of range");
      }
      put_fixed64(out, static_cast<uint64_t>(t));
      return absl::OkStatus();
    }
    case TypeKind::kInterval: {
      int64_t micros = 0;
      int32_t days = 0;
      int32_t months = 0;
      if (auto status = check_size(bytes, 16); !status.ok()) {
        return status;
      }
      in.i64(micros);
      in.i32(days);
      in.i32(months);
      put_varint(out, zigzag(months));
      put_varint(out, zigzag(days));
      put_varint(out, zigzag(micros));
      return absl::OkStatus();
    }
    case TypeKind::kUuid:
      if (auto status = check_size(bytes, 16); !status.ok()) {
        return status;
      }
      out.append(bytes);
      return absl::OkStatus();
  }
  return bad("unknown type kind");
}

// Whether an array's element type OID (array_send writes it) is one of `kind`'s binary types.
bool element_oid_matches(TypeKind kind, uint32_t oid) {
  switch (kind) {
    case TypeKind::kBool:
      return oid == 16;
    case TypeKind::kInt2:
      return oid == 21;
    case TypeKind::kInt4:
      return oid == 23;
    case TypeKind::kInt8:
      return oid == 20;
    case TypeKind::kOid:
      return oid == 26;
    case TypeKind::kFloat4:
      return oid == 700;
    case TypeKind::kFloat8:
      return oid == 701;
    case TypeKind::kNumeric:
      return oid == 1700;
    case TypeKind::kText:
      return oid == 25 || oid == 1043 || oid == 1042 || oid == 19;
    case TypeKind::kBytea:
      return oid == 17;
    case TypeKind::kDate:
      return oid == 1082;
    case TypeKind::kTime:
      return oid == 1083;
    case TypeKind::kTimeTz:
      return oid == 1266;
    case TypeKind::kTimestamp:
      return oid == 1114;
    case TypeKind::kTimestampTz:
      return oid == 1184;
    case TypeKind::kInterval:
      return oid == 1186;
    case TypeKind::kUuid:
      return oid == 2950;
    case TypeKind::kJson:
      return oid == 114;
    case TypeKind::kJsonb:
      return oid == 3802;
  }
  return false;
}

// array_send: int32 ndim, int32 flags (has NULLs), uint32 element OID, per dimension int32
// length and int32 lower bound, then each element as int32 length (-1: NULL) and its bytes.
// Validated in full before anything is written; then written as encode_array writes the text.
absl::Status encode_binary_array(const ColumnType& type, std::string_view bytes, std::string& out) {
  NetworkReader in(bytes);
  int32_t ndim;
  int32_t flags;
  uint32_t element_oid;
  if (!in.i32(ndim) || !in.i32(flags) || !in.u32(element_oid)) {
    return bad("truncated array header");
  }
  if (ndim < 0 || ndim > kMaxArrayDims) {
    return bad(cat("array of ", ndim, " dimensions (0 to 6)"));
  }
  if (flags != 0 && flags != 1) {
    return bad("invalid array flags");
  }
  if (!element_oid_matches(type.kind, element_oid)) {
    return bad(
        cat("array elements of type OID ", element_oid, ", not ", type_kind_name(type.kind)));
  }
  int32_t lengths[kMaxArrayDims];
  int32_t lowers[kMaxArrayDims];
  uint64_t count = ndim > 0 ? 1 : 0;
  for (int d = 0; d < ndim; ++d) {
    if (!in.i32(lengths[d]) || !in.i32(lowers[d])) {
      return bad("truncated array dimensions");
    }
    if (lengths[d] < 0) {
      return bad("negative array dimension");
    }
    if (lengths[d] > 0 &&
        int64_t{lowers[d]} + lengths[d] - 1 > std::numeric_limits<int32_t>::max()) {
      return bad("array upper bound out of range");
    }
    count *= static_cast<uint64_t>(lengths[d]);
    if (count > kMaxArrayElements) {
      return bad("too many array elements");
    }
  }
  // The elements: every length checked and whether any is NULL.
  const NetworkReader elements = in;
  bool has_nulls = false;
  for (uint64_t k = 0; k < count; ++k) {
    int32_t length = 0;
    std::string_view element;
    if (!in.i32(length)) {
      return bad(cat("truncated array: ", k, " of ", count, " elements"));
    }
    if (length == -1) {
      has_nulls = true;
    } else if (length < 0 || !in.bytes(static_cast<size_t>(length), element)) {
      return bad(cat("array element ", k + 1, ": bad length ", length));
    }
  }
  if (!in.at_end()) {
    return bad(cat(in.remaining(), " bytes after the last array element"));
  }
  if (count == 0) {  // array_recv: no elements is the empty array, whatever the dimensions
    ndim = 0;
  }
  const size_t start = out.size();
  put_varint(out, static_cast<uint64_t>(ndim));
  for (int d = 0; d < ndim; ++d) {
    put_varint(out, static_cast<uint64_t>(lengths[d]));
    put_varint(out, zigzag(lowers[d]));
  }
  if (ndim > 0) {
    out += static_cast<char>(has_nulls ? 1 : 0);
    size_t bitmap = 0;
    if (has_nulls) {
      bitmap = out.size();
      out.append(static_cast<size_t>((count + 7) / 8), '\0');
    }
    in = elements;
    for (uint64_t k = 0; k < count; ++k) {
      int32_t length = 0;
      std::string_view element;
      in.i32(length);
      if (length == -1) {
        out[bitmap + k / 8] = static_cast<char>(out[bitmap + k / 8] | (1 << (k % 8)));
        continue;
      }
      in.bytes(static_cast<size_t>(length), element);
      if (auto status = encode_binary_scalar(type.kind, element, out); !status.ok()) {
        out.resize(start);
        return bad(cat("array element ", k + 1, " ", quote(element), ": ", status.message()));
      }
    }
  }
  // Prefix the body with its length.
  char prefix[10];
  size_t n = 0;
  uint64_t len = out.size() - start;
  while (len >= 0x80) {
    prefix[n++] = static_cast<char>(static_cast<uint8_t>(len) | 0x80);
    len >>= 7;
  }
  prefix[n++] = static_cast<char>(len);
  out.insert(start, prefix, n);
  return absl::OkStatus();
}

absl::Status encode_binary_any(const ColumnType& type, std::string_view bytes, std::string& out) {
  return type.is_array ? encode_binary_array(type, bytes, out)
                       : encode_binary_scalar(type.kind, bytes, out);
}

// ---------------------------------------------------------------------------------------------
// Printing: encoding -> text.

void append_fraction(std::string& out, int64_t micros) {
  if (micros == 0) {
    return;
  }
  char digits[6];
  for (int k = 5; k >= 0; --k) {
    digits[k] = static_cast<char>('0' + micros % 10);
    micros /= 10;
  }
  int len = 6;
  while (digits[len - 1] == '0') {
    --len;
  }
  out += '.';
  out.append(digits, static_cast<size_t>(len));
}

// HH:MM:SS[.ffffff] of 0 <= micros <= 24h.
void append_time_of_day(std::string& out, int64_t micros) {
  const int64_t h = micros / kUsecsPerHour;
  micros -= h * kUsecsPerHour;
  const int64_t m = micros / kUsecsPerMinute;
  micros -= m * kUsecsPerMinute;
  const int64_t sec = micros / kUsecsPerSec;
  micros -= sec * kUsecsPerSec;
  append_padded(out, static_cast<uint64_t>(h), 2);
  out += ':';
  append_padded(out, static_cast<uint64_t>(m), 2);
  out += ':';
  append_padded(out, static_cast<uint64_t>(sec), 2);
  append_fraction(out, micros);
}

// EncodeTimezone: `west` is seconds west of UTC.
void append_zone(std::string& out, int64_t west) {
  int64_t sec = west < 0 ? -west : west;
  int64_t min = sec / 60;
  sec -= min * 60;
  const int64_t hour = min / 60;
  min -= hour * 60;
  out += west <= 0 ? '+' : '-';
  append_padded(out, static_cast<uint64_t>(hour), 2);
  if (sec != 0) {
    out += ':';
    append_padded(out, static_cast<uint64_t>(min), 2);
    out += ':';
    append_padded(out, static_cast<uint64_t>(sec), 2);
  } else if (min != 0) {
    out += ':';
    append_padded(out, static_cast<uint64_t>(min), 2);
  }
}

// YYYY-MM-DD of a julian day; returns whether the year is BC.
bool append_julian_date(std::string& out, int64_t j) {
  int y;
  int m;
  int d;
  j2date(j, y, m, d);
  append_padded(out, static_cast<uint64_t>(y > 0 ? y : 1 - y), 4);
  out += '-';
  append_padded(out, static_cast<uint64_t>(m), 2);
  out += '-';
  append_padded(out, static_cast<uint64_t>(d), 2);
  return y <= 0;
}

// The decimal digits and exponent of a to_chars scientific string "[-]d[.ddd]e(+|-)XX",
// trailing zeros dropped: value = d.ddd x 10^exp.
struct Decimal {
  char digits[40];
  int ndigits = 0;
  int exp = 0;
};

Decimal parse_scientific(const char* p, const char* end) {
  Decimal d;
  if (*p == '-') {
    ++p;
  }
  while (*p != 'e') {
    if (*p != '.') {
      d.digits[d.ndigits++] = *p;
    }
    ++p;
  }
  ++p;
  std::from_chars(*p == '+' ? p + 1 : p, end, d.exp);
  while (d.ndigits > 1 && d.digits[d.ndigits - 1] == '0') {
    --d.ndigits;
  }
  return d;
}

// x = m * 2^e exactly, m an integer (0 < x, finite).
template <typename F>
void decompose(F x, uint64_t& m, int& e) {
  constexpr int kBits = std::numeric_limits<F>::digits;
  int exp2;
  const F frac = std::frexp(x, &exp2);
  m = static_cast<uint64_t>(std::ldexp(frac, kBits));
  e = exp2 - kBits;
}

// Whether the decimal `d` is exactly the midpoint between |v| and its neighbour `w` (0 <= w,
// w != |v|, finite): there PostgreSQL's Ryu (built without STRICTLY_SHORTEST, so it never
// accepts the bounds of the rounding interval) does not take it, though it reads back as v.
template <typename F>
bool is_midpoint(const Decimal& d, F v, F w) {
  uint64_t mv;
  int ev;
  decompose(v, mv, ev);
  uint64_t sum;
  int e;
  if (w == 0) {
    sum = mv;
    e = ev;
  } else {
    uint64_t mw;
    int ew;
    decompose(w, mw, ew);
    e = std::min(ev, ew);
    sum = (mv << (ev - e)) + (mw << (ew - e));
  }
  // midpoint = sum * 2^(e-1) = odd * 2^k
  int k = e - 1;
  while ((sum & 1) == 0) {
    sum >>= 1;
    ++k;
  }
  // d = digits * 10^(exp - ndigits + 1) = dodd * 2^q * 5^e10 * 2^e10
  uint64_t digits = 0;
  for (int i = 0; i < d.ndigits; ++i) {
    digits = digits * 10 + static_cast<uint64_t>(d.digits[i] - '0');
  }
  const int e10 = d.exp - d.ndigits + 1;
  int q = 0;
  while ((digits & 1) == 0) {
    digits >>= 1;
    ++q;
  }
  if (q + e10 != k || e10 > 27 || e10 < -27) {
    return false;
  }
  __extension__ using U128 = unsigned __int128;
  U128 pow5 = 1;
  for (int i = 0; i < (e10 < 0 ? -e10 : e10); ++i) {
    pow5 *= 5;
  }
  return e10 >= 0 ? static_cast<U128>(digits) * pow5 == sum
                  : static_cast<U128>(digits) == static_cast<U128>(sum) * pow5;
}

template <typename F>
bool is_on_bound(const Decimal& d, F v) {
  const F a = std::fabs(v);
  const F up = std::nextafter(a, std::numeric_limits<F>::infinity());
  const F down = std::nextafter(a, F(0));
  return (!std::isinf(up) && is_midpoint(d, a, up)) || is_midpoint(d, a, down);
}

// float8out / float4out with extra_float_digits > 0 (PostgreSQL's Ryu): the shortest digits
// strictly inside v's rounding interval, fixed notation for decimal exponents in
// [-4, fixed_limit), else d.ddde+XX.
template <typename F>
void append_float(std::string& out, F v, int fixed_limit) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v < 0 ? "-Infinity" : "Infinity";
    return;
  }
  if (v == 0) {
    out += std::signbit(v) ? "-0" : "0";
    return;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  Decimal dec = parse_scientific(buf, r.ptr);
  if (is_on_bound(dec, v)) {
    // The shortest is on a bound: the correctly rounded value with more digits instead.
    constexpr int kMaxDigits = std::numeric_limits<F>::max_digits10;
    for (int precision = dec.ndigits + 1; precision <= kMaxDigits; ++precision) {
      r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific, precision - 1);
      const Decimal longer = parse_scientific(buf, r.ptr);
      F back;
      std::from_chars(buf, r.ptr, back);
      if (back == v && !is_on_bound(longer, v)) {
        dec = longer;
        break;
      }
    }
  }
  const char* digits = dec.digits;
  const int ndigits = dec.ndigits;
  const int exp = dec.exp;
  const bool negative = std::signbit(v);
  if (negative) {
    out += '-';
  }
  if (exp >= -4 && exp < fixed_limit) {
    if (exp < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exp - 1), '0');
      out.append(digits, static_cast<size_t>(ndigits));
    } else if (ndigits <= exp + 1) {
      out.append(digits, static_cast<size_t>(ndigits));
      out.append(static_cast<size_t>(exp + 1 - ndigits), '0');
    } else {
      out.append(digits, static_cast<size_t>(exp) + 1);
      out += '.';
      out.append(digits + exp + 1, static_cast<size_t>(ndigits - exp - 1));
    }
    return;
  }
  out += digits[0];
  if (ndigits > 1) {
    out += '.';
    out.append(digits + 1, static_cast<size_t>(ndigits - 1));
  }
  out += 'e';
  out += exp < 0 ? '-' : '+';
  append_padded(out, static_cast<uint64_t>(exp < 0 ? -exp : exp), 2);
}

absl::Status print_numeric(Reader& in, std::string& out) {
  uint8_t tag;
  if (!in.byte(tag)) {
    return damaged("truncated numeric");
  }
  switch (tag) {
    case kNumericNaN:
      out += "NaN";
      return absl::OkStatus();
    case kNumericPosInf:
      out += "Infinity";
      return absl::OkStatus();
    case kNumericNegInf:
      out += "-Infinity";
      return absl::OkStatus();
    case kNumericPositive:
    case kNumericNegative:
      break;
    default:
      return damaged("bad numeric sign");
  }
  uint64_t dscale;
  uint64_t ndigits;
  if (!in.varint(dscale) || !in.varint(ndigits)) {
    return damaged("truncated numeric");
  }
  if (dscale > kNumericMaxDscale) {
    return damaged("numeric scale out of range");
  }
  if (ndigits == 0) {
    if (tag != kNumericPositive) {
      return damaged("negative numeric zero");
    }
    out += '0';
    if (dscale > 0) {
      out += '.';
      out.append(dscale, '0');
    }
    return absl::OkStatus();
  }
  uint64_t zweight;
  if (!in.varint(zweight)) {
    return damaged("truncated numeric");
  }
  const int64_t weight = unzigzag(zweight);
  if (weight > kNumericMaxWeight || weight < -kNumericMaxDscale - 1 ||
      ndigits >
          static_cast<uint64_t>(kNumericMaxWeight + 1) + static_cast<uint64_t>(kNumericMaxDscale)) {
    return damaged("numeric out of range");
  }
  // The last digit's position must be within the scale: ndigits - 1 - weight <= dscale.
  if (static_cast<int64_t>(ndigits) - 1 - weight > static_cast<int64_t>(dscale)) {
    return damaged("numeric digits beyond its scale");
  }
  std::string_view packed;
  if (!in.bytes((ndigits + 1) / 2, packed)) {
    return damaged("truncated numeric digits");
  }
  auto digit = [&](int64_t k) -> int {
    const auto b = static_cast<uint8_t>(packed[static_cast<size_t>(k / 2)]);
    return (k % 2 == 0) ? (b >> 4) : (b & 0x0f);
  };
  for (size_t k = 0; k < packed.size(); ++k) {
    const auto b = static_cast<uint8_t>(packed[k]);
    if ((b >> 4) > 9 || (b & 0x0f) > 9) {
      return damaged("bad numeric digit");
    }
  }
  const auto n = static_cast<int64_t>(ndigits);
  if (digit(0) == 0 || digit(n - 1) == 0 || (n % 2 == 1 && digit(n) != 0)) {
    return damaged("numeric digits not normalized");
  }
  if (tag == kNumericNegative) {
    out += '-';
  }
  const auto ds = static_cast<int64_t>(dscale);
  const int64_t int_digits = weight >= 0 ? weight + 1 : 1;
  const size_t at = out.size();
  out.resize(at + static_cast<size_t>(int_digits + (ds > 0 ? ds + 1 : 0)));
  char* p = out.data() + at;
  // Position p (power of ten) holds digit index weight - p.
  auto digit_char = [&](int64_t pos) -> char {
    const int64_t k = weight - pos;
    return (k >= 0 && k < n) ? static_cast<char>('0' + digit(k)) : '0';
  };
  for (int64_t pos = int_digits - 1; pos >= 0; --pos) {
    *p++ = digit_char(pos);
  }
  if (ds > 0) {
    *p++ = '.';
    for (int64_t pos = -1; pos >= -ds; --pos) {
      *p++ = digit_char(pos);
    }
  }
  return absl::OkStatus();
}

absl::Status print_interval(Reader& in, std::string& out) {
  uint64_t zm;
  uint64_t zd;
  uint64_t zt;
  if (!in.varint(zm) || !in.varint(zd) || !in.varint(zt)) {
    return damaged("truncated interval");
  }
  const int64_t months64 = unzigzag(zm);
  const int64_t days64 = unzigzag(zd);
  const int64_t time = unzigzag(zt);
  if (months64 < std::numeric_limits<int32_t>::min() ||
      months64 > std::numeric_limits<int32_t>::max() ||
      days64 < std::numeric_limits<int32_t>::min() ||
      days64 > std::numeric_limits<int32_t>::max()) {
    return damaged("interval out of range");
  }
  const int64_t year = months64 / 12;
  const int64_t mon = months64 % 12;
  bool is_zero = true;
  bool is_before = false;
  auto add_part = [&](int64_t value, std::string_view unit) {
    if (value == 0) {
      return;
    }
    if (!is_zero) {
      out += ' ';
    }
    if (is_before && value > 0) {
      out += '+';
    }
    append_int(out, value);
    out += ' ';
    out += unit;
    if (value != 1) {
      out += 's';
    }
    is_before = value < 0;
    is_zero = false;
  };
  add_part(year, "year");
  add_part(mon, "mon");
  add_part(days64, "day");
  int64_t rest = time;
  const int64_t hour = rest / kUsecsPerHour;
  rest -= hour * kUsecsPerHour;
  const int64_t min = rest / kUsecsPerMinute;
  rest -= min * kUsecsPerMinute;
  const int64_t sec = rest / kUsecsPerSec;
  const int64_t fsec = rest - sec * kUsecsPerSec;
  if (is_zero || hour != 0 || min != 0 || sec != 0 || fsec != 0) {
    const bool minus = hour < 0 || min < 0 || sec < 0 || fsec < 0;
    if (!is_zero) {
      out += ' ';
    }
    if (minus) {
      out += '-';
    } else if (is_before) {
      out += '+';
    }
    append_padded(out, static_cast<uint64_t>(hour < 0 ? -hour : hour), 2);
    out += ':';
    append_padded(out, static_cast<uint64_t>(min < 0 ? -min : min), 2);
    out += ':';
    append_padded(out, static_cast<uint64_t>(sec < 0 ? -sec : sec), 2);
    append_fraction(out, fsec < 0 ? -fsec : fsec);
  }
  return absl::OkStatus();
}

absl::Status print_timestamp(Reader& in, bool with_zone, std::string& out) {
  uint64_t raw;
  if (!in.fixed64(raw)) {
    return damaged("truncated timestamp");
  }
  const auto t = static_cast<int64_t>(raw);
  if (t == kTimestampPosInfinity) {
    out += "infinity";
    return absl::OkStatus();
  }
  if (t == kTimestampNegInfinity) {
    out += "-infinity";
    return absl::OkStatus();
  }
  if (t < kMinTimestamp || t >= kEndTimestamp) {
    return damaged("timestamp out of range");
  }
  int64_t days = t / kUsecsPerDay;
  int64_t tod = t - days * kUsecsPerDay;
  if (tod < 0) {
    tod += kUsecsPerDay;
    --days;
  }
  const bool bc = append_julian_date(out, days + kEpochJulian);
  out += ' ';
  append_time_of_day(out, tod);
  if (with_zone) {
    out += "+00";
  }
  if (bc) {
    out += " BC";
  }
  return absl::OkStatus();
}

// Prints one scalar value, consuming exactly its encoding.
absl::Status print_scalar(TypeKind kind, Reader& in, std::string& out) {
  switch (kind) {
    case TypeKind::kBool: {
      uint8_t b;
      if (!in.byte(b) || b > 1) {
        return damaged("bad bool");
      }
      out += b ? 't' : 'f';
      return absl::OkStatus();
    }
    case TypeKind::kInt2:
    case TypeKind::kInt4:
    case TypeKind::kInt8: {
      uint64_t z;
      if (!in.varint(z)) {
        return damaged("bad integer");
      }
      const int64_t v = unzigzag(z);
      if ((kind == TypeKind::kInt2 && (v < INT16_MIN || v > INT16_MAX)) ||
          (kind == TypeKind::kInt4 && (v < INT32_MIN || v > INT32_MAX))) {
        return damaged("integer out of range");
      }
      append_int(out, v);
      return absl::OkStatus();
    }
    case TypeKind::kOid: {
      uint64_t v;
      if (!in.varint(v) || v > UINT32_MAX) {
        return damaged("bad oid");
      }
      append_int(out, v);
      return absl::OkStatus();
    }
    case TypeKind::kFloat4: {
      uint32_t bits;
      if (!in.fixed32(bits)) {
        return damaged("truncated real");
      }
      const auto v = std::bit_cast<float>(bits);
      if (std::isnan(v) && bits != 0x7fc00000u) {
        return damaged("non-canonical NaN");
      }
      append_float(out, v, 6);
      return absl::OkStatus();
    }
    case TypeKind::kFloat8: {
      uint64_t bits;
      if (!in.fixed64(bits)) {
        return damaged("truncated double precision");
      }
      const auto v = std::bit_cast<double>(bits);
      if (std::isnan(v) && bits != 0x7ff8000000000000ull) {
        return damaged("non-canonical NaN");
      }
      append_float(out, v, 15);
      return absl::OkStatus();
    }
    case TypeKind::kNumeric:
      return print_numeric(in, out);
    case TypeKind::kText:
    case TypeKind::kJson:
    case TypeKind::kJsonb: {
      uint64_t len;
      std::string_view v;
      if (!in.varint(len) || !in.bytes(len, v)) {
        return damaged("truncated text");
      }
      out.append(v);
      return absl::OkStatus();
    }
    case TypeKind::kBytea: {
      uint64_t len;
      std::string_view v;
      if (!in.varint(len) || !in.bytes(len, v)) {
        return damaged("truncated bytea");
      }
      const size_t at = out.size();
      out.resize(at + 2 + 2 * v.size());
      char* p = out.data() + at;
      *p++ = '\\';
      *p++ = 'x';
      for (const char c : v) {
        const auto b = static_cast<uint8_t>(c);
        *p++ = kHexDigits[b >> 4];
        *p++ = kHexDigits[b & 0x0f];
      }
      return absl::OkStatus();
    }
    case TypeKind::kDate: {
      uint64_t z;
      if (!in.varint(z)) {
        return damaged("bad date");
      }
      const int64_t d = unzigzag(z);
      if (d == kDatePosInfinity) {
        out += "infinity";
        return absl::OkStatus();
      }
      if (d == kDateNegInfinity) {
        out += "-infinity";
        return absl::OkStatus();
      }
      if (d < -kEpochJulian || d >= kDateEndJulian - kEpochJulian) {
        return damaged("date out of range");
      }
      const int64_t j = d + kEpochJulian;
      if (append_julian_date(out, j)) {
        out += " BC";
      }
      return absl::OkStatus();
    }
    case TypeKind::kTime: {
      uint64_t t;
      if (!in.varint(t) || t > static_cast<uint64_t>(kUsecsPerDay)) {
        return damaged("bad time");
      }
      append_time_of_day(out, static_cast<int64_t>(t));
      return absl::OkStatus();
    }
    case TypeKind::kTimeTz: {
      uint64_t t;
      uint64_t zz;
      if (!in.varint(t) || t > static_cast<uint64_t>(kUsecsPerDay) || !in.varint(zz)) {
        return damaged("bad time with time zone");
      }
      const int64_t west = unzigzag(zz);
      if (west > kMaxZoneSeconds || west < -kMaxZoneSeconds) {
        return damaged("time zone out of range");
      }
      append_time_of_day(out, static_cast<int64_t>(t));
      append_zone(out, west);
      return absl::OkStatus();
    }
    case TypeKind::kTimestamp:
      return print_timestamp(in, false, out);
    case TypeKind::kTimestampTz:
      return print_timestamp(in, true, out);
    case TypeKind::kInterval:
      return print_interval(in, out);
    case TypeKind::kUuid: {
      std::string_view v;
      if (!in.bytes(16, v)) {
        return damaged("truncated uuid");
      }
      for (int k = 0; k < 16; ++k) {
        if (k == 4 || k == 6 || k == 8 || k == 10) {
          out += '-';
        }
        const auto b = static_cast<uint8_t>(v[static_cast<size_t>(k)]);
        out += kHexDigits[b >> 4];
        out += kHexDigits[b & 0x0f];
      }
      return absl::OkStatus();
    }
  }
  return damaged("unknown type kind");
}

// The array body (after its length prefix). array_out's quoting: an element is quoted when it
// is empty, is NULL in any case, or has a quote, backslash, brace, the delimiter or whitespace.
absl::Status print_array_body(const ColumnType& type, Reader& in, std::string& out) {
  uint64_t ndim;
  if (!in.varint(ndim) || ndim > kMaxArrayDims) {
    return damaged("bad array dimensions");
  }
  if (ndim == 0) {
    out += "{}";
    return absl::OkStatus();
  }
  uint64_t length[kMaxArrayDims];
  int64_t lower[kMaxArrayDims];
  uint64_t total = 1;
  bool default_bounds = true;
  for (uint64_t d = 0; d < ndim; ++d) {
    uint64_t zl;
    if (!in.varint(length[d]) || !in.varint(zl)) {
      return damaged("truncated array dimensions");
    }
    lower[d] = unzigzag(zl);
    if (length[d] == 0 || length[d] > kMaxArrayElements ||
        lower[d] < std::numeric_limits<int32_t>::min() ||
        lower[d] > std::numeric_limits<int32_t>::max() ||
        lower[d] + static_cast<int64_t>(length[d]) - 1 > std::numeric_limits<int32_t>::max()) {
      return damaged("bad array dimension");
    }
    total *= length[d];
    if (total > kMaxArrayElements) {
      return damaged("too many array elements");
    }
    default_bounds &= lower[d] == 1;
  }
  uint8_t has_nulls;
  if (!in.byte(has_nulls) || has_nulls > 1) {
    return damaged("bad array null flag");
  }
  std::string_view bitmap;
  if (has_nulls == 1) {
    if (!in.bytes((total + 7) / 8, bitmap)) {
      return damaged("truncated array null bitmap");
    }
    bool any = false;
    for (const char c : bitmap) {
      any |= c != 0;
    }
    const uint64_t spare = bitmap.size() * 8 - total;
    if (!any || (spare > 0 && (static_cast<uint8_t>(bitmap.back()) >> (8 - spare)) != 0)) {
      return damaged("bad array null bitmap");
    }
  }
  // Every non-NULL element takes at least one byte: a cheap bound before looping.
  if (has_nulls == 0 && total > in.remaining()) {
    return damaged("truncated array elements");
  }
  if (!default_bounds) {
    for (uint64_t d = 0; d < ndim; ++d) {
      out += '[';
      append_int(out, lower[d]);
      out += ':';
      append_int(out, lower[d] + static_cast<int64_t>(length[d]) - 1);
      out += ']';
    }
    out += '=';
  }
  std::string& element = array_scratch().printed;
  out.append(ndim, '{');
  for (uint64_t k = 0; k < total; ++k) {
    if (k > 0) {
      uint64_t closes = 0;
      uint64_t stride = 1;
      for (uint64_t d = ndim - 1; d >= 1; --d) {
        stride *= length[d];
        if (k % stride != 0) {
          break;
        }
        ++closes;
      }
      out.append(closes, '}');
      out += type.delimiter;
      out.append(closes, '{');
    }
    if (!bitmap.empty() && (static_cast<uint8_t>(bitmap[k / 8]) >> (k % 8)) & 1) {
      out += "NULL";
      continue;
    }
    const size_t at = out.size();
    if (auto status = print_scalar(type.kind, in, out); !status.ok()) {
      out.resize(at);
      return status;
    }
    const std::string_view printed = std::string_view(out).substr(at);
    bool needs_quotes = printed.empty() || iequals(printed, "null");
    for (const char c : printed) {
      if (c == '"' || c == '\\' || c == '{' || c == '}' || c == type.delimiter || is_space(c)) {
        needs_quotes = true;
        break;
      }
    }
    if (needs_quotes) {
      element.assign(printed);
      out.resize(at);
      out += '"';
      for (const char c : element) {
        if (c == '"' || c == '\\') {
          out += '\\';
        }
        out += c;
      }
      out += '"';
    }
  }
  out.append(ndim, '}');
  return absl::OkStatus();
}

absl::Status print_array(const ColumnType& type, Reader& in, std::string& out) {
  uint64_t len;
  std::string_view body;
  if (!in.varint(len) || !in.bytes(len, body)) {
    return damaged("truncated array");
  }
  Reader body_in(body);
  if (auto status = print_array_body(type, body_in, out); !status.ok()) {
    return status;
  }
  if (!body_in.at_end()) {
    return damaged("trailing bytes in an array");
  }
  return absl::OkStatus();
}

absl::Status print_any(const ColumnType& type, Reader& in, std::string& out) {
  return type.is_array ? print_array(type, in, out) : print_scalar(type.kind, in, out);
}

// Skips one value, checking only what bounds its length.
bool skip_value(const ColumnType& type, Reader& in) {
  uint64_t v;
  if (type.is_array) {
    return in.varint(v) && in.skip(v);
  }
  switch (type.kind) {
    case TypeKind::kBool:
      return in.skip(1);
    case TypeKind::kInt2:
    case TypeKind::kInt4:
    case TypeKind::kInt8:
    case TypeKind::kOid:
    case TypeKind::kDate:
    case TypeKind::kTime:
      return in.varint(v);
    case TypeKind::kFloat4:
      return in.skip(4);
    case TypeKind::kFloat8:
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz:
      return in.skip(8);
    case TypeKind::kUuid:
      return in.skip(16);
    case TypeKind::kTimeTz:
      return in.varint(v) && in.varint(v);
    case TypeKind::kInterval:
      return in.varint(v) && in.varint(v) && in.varint(v);
    case TypeKind::kText:
    case TypeKind::kJson:
    case TypeKind::kJsonb:
    case TypeKind::kBytea:
      return in.varint(v) && in.skip(v);
    case TypeKind::kNumeric: {
      uint8_t tag;
      if (!in.byte(tag)) {
        return false;
      }
      if (tag >= kNumericNaN) {
        return tag <= kNumericNegInf;
      }
      uint64_t ndigits;
      if (!in.varint(v) || !in.varint(ndigits)) {
        return false;
      }
      return ndigits == 0 || (in.varint(v) && in.skip((ndigits + 1) / 2));
    }
  }
  return false;
}

// COPY TO's text escaping of one attribute (CopyAttributeOutText with a tab delimiter).
void append_copy_escaped(std::string_view s, std::string& out) {
  size_t run = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    const char c = s[k];
    char escape = 0;
    if (static_cast<unsigned char>(c) < 0x20) {
      switch (c) {
        case '\b':
          escape = 'b';
          break;
        case '\f':
          escape = 'f';
          break;
        case '\n':
          escape = 'n';
          break;
        case '\r':
          escape = 'r';
          break;
        case '\t':
          escape = 't';
          break;
        case '\v':
          escape = 'v';
          break;
        default:
          break;
      }
    } else if (c == '\\') {
      escape = '\\';
    }
    if (escape != 0) {
      out.append(s.data() + run, k - run);
      out += '\\';
      out += escape;
      run = k + 1;
    }
  }
  out.append(s.data() + run, s.size() - run);
}

std::string column_label(const RelationDesc& desc, size_t i) {
  const Column& c = desc.columns[i];
  return cat("column \"", c.name, "\" (", type_kind_name(c.type.kind), c.type.is_array ? "[]" : "",
             ")");
}

struct BuiltinType {
  uint32_t oid;
  TypeKind kind;
  bool is_array;
  std::string_view name;
};

constexpr BuiltinType kBuiltins[] = {
    {16, TypeKind::kBool, false, "boolean"},
    {17, TypeKind::kBytea, false, "bytea"},
    {18, TypeKind::kText, false, "\"char\""},
    {19, TypeKind::kText, false, "name"},
    {20, TypeKind::kInt8, false, "bigint"},
    {21, TypeKind::kInt2, false, "smallint"},
    {23, TypeKind::kInt4, false, "integer"},
    {25, TypeKind::kText, false, "text"},
    {26, TypeKind::kOid, false, "oid"},
    {114, TypeKind::kJson, false, "json"},
    {199, TypeKind::kJson, true, "json[]"},
    {700, TypeKind::kFloat4, false, "real"},
    {701, TypeKind::kFloat8, false, "double precision"},
    {705, TypeKind::kText, false, "unknown"},
    {1000, TypeKind::kBool, true, "boolean[]"},
    {1001, TypeKind::kBytea, true, "bytea[]"},
    {1002, TypeKind::kText, true, "\"char\"[]"},
    {1003, TypeKind::kText, true, "name[]"},
    {1005, TypeKind::kInt2, true, "smallint[]"},
    {1007, TypeKind::kInt4, true, "integer[]"},
    {1009, TypeKind::kText, true, "text[]"},
    {1014, TypeKind::kText, true, "character[]"},
    {1015, TypeKind::kText, true, "character varying[]"},
    {1016, TypeKind::kInt8, true, "bigint[]"},
    {1021, TypeKind::kFloat4, true, "real[]"},
    {1022, TypeKind::kFloat8, true, "double precision[]"},
    {1028, TypeKind::kOid, true, "oid[]"},
    {1042, TypeKind::kText, false, "character"},
    {1043, TypeKind::kText, false, "character varying"},
    {1082, TypeKind::kDate, false, "date"},
    {1083, TypeKind::kTime, false, "time without time zone"},
    {1114, TypeKind::kTimestamp, false, "timestamp without time zone"},
    {1115, TypeKind::kTimestamp, true, "timestamp without time zone[]"},
    {1182, TypeKind::kDate, true, "date[]"},
    {1183, TypeKind::kTime, true, "time without time zone[]"},
    {1184, TypeKind::kTimestampTz, false, "timestamp with time zone"},
    {1185, TypeKind::kTimestampTz, true, "timestamp with time zone[]"},
    {1186, TypeKind::kInterval, false, "interval"},
    {1187, TypeKind::kInterval, true, "interval[]"},
    {1231, TypeKind::kNumeric, true, "numeric[]"},
    {1266, TypeKind::kTimeTz, false, "time with time zone"},
    {1270, TypeKind::kTimeTz, true, "time with time zone[]"},
    {1700, TypeKind::kNumeric, false, "numeric"},
    {2950, TypeKind::kUuid, false, "uuid"},
    {2951, TypeKind::kUuid, true, "uuid[]"},
    {3802, TypeKind::kJsonb, false, "jsonb"},
    {3807, TypeKind::kJsonb, true, "jsonb[]"},
};

const BuiltinType* find_builtin(uint32_t oid) {
  for (const BuiltinType& b : kBuiltins) {
    if (b.oid == oid) {
      return &b;
    }
  }
  return nullptr;
}

}  // namespace

std::string_view type_kind_name(TypeKind kind) {
  switch (kind) {
    case TypeKind::kBool:
      return "bool";
    case TypeKind::kInt2:
      return "int2";
    case TypeKind::kInt4:
      return "int4";
    case TypeKind::kInt8:
      return "int8";
    case TypeKind::kOid:
      return "oid";
    case TypeKind::kFloat4:
      return "float4";
    case TypeKind::kFloat8:
      return "float8";
    case TypeKind::kNumeric:
      return "numeric";
    case TypeKind::kText:
      return "text";
    case TypeKind::kBytea:
      return "bytea";
    case TypeKind::kDate:
      return "date";
    case TypeKind::kTime:
      return "time";
    case TypeKind::kTimeTz:
      return "timetz";
    case TypeKind::kTimestamp:
      return "timestamp";
    case TypeKind::kTimestampTz:
      return "timestamptz";
    case TypeKind::kInterval:
      return "interval";
    case TypeKind::kUuid:
      return "uuid";
    case TypeKind::kJson:
      return "json";
    case TypeKind::kJsonb:
      return "jsonb";
  }
  return "unknown";
}

ColumnType builtin_column_type(uint32_t type_oid) {
  const BuiltinType* b = find_builtin(type_oid);
  if (b == nullptr) {
    return ColumnType{};
  }
  return ColumnType{b->kind, b->is_array, ','};
}

std::string_view builtin_type_name(uint32_t type_oid) {
  const BuiltinType* b = find_builtin(type_oid);
  return b == nullptr ? std::string_view() : b->name;
}

// ---------------------------------------------------------------------------------------------
// RelationDesc.

namespace {

constexpr uint8_t kDescVersion = 1;
constexpr uint64_t kMaxColumns = 1664;  // PostgreSQL's MaxTupleAttributeNumber

void put_string(std::string& out, std::string_view s) {
  put_varint(out, s.size());
  out.append(s);
}

}  // namespace

std::string RelationDesc::encode() const {
  std::string out;
  out += static_cast<char>(kDescVersion);
  put_varint(out, row_format);
  put_string(out, schema);
  put_string(out, table);
  put_varint(out, table_oid);
  put_varint(out, columns.size());
  for (const Column& c : columns) {
    put_string(out, c.name);
    put_varint(out, c.type_oid);
    put_varint(out, zigzag(c.type_modifier));
    out += static_cast<char>((c.nullable ? 1 : 0) | (c.type.is_array ? 2 : 0));
    out += static_cast<char>(c.type.kind);
    out += c.type.delimiter;
    put_string(out, c.type_name);
  }
  return out;
}

absl::StatusOr<RelationDesc> RelationDesc::decode(std::string_view bytes) {
  Reader in(bytes);
  auto fail = [](std::string_view what) {
    return absl::DataLossError(cat("relation description: ", what));
  };
  uint8_t version;
  if (!in.byte(version)) {
    return fail("empty");
  }
  if (version != kDescVersion) {
    return fail(cat("unknown version ", version, " (this build reads version ", kDescVersion, ")"));
  }
  RelationDesc desc;
  uint64_t v;
  std::string_view s;
  if (!in.varint(v)) {
    return fail("truncated in the row format");
  }
  if (v != kRowFormatV1) {
    return fail(cat("unknown row format ", v));
  }
  desc.row_format = static_cast<uint32_t>(v);
  if (!in.varint(v) || !in.bytes(v, s)) {
    return fail("truncated in the schema name");
  }
  desc.schema = s;
  if (!in.varint(v) || !in.bytes(v, s)) {
    return fail("truncated in the table name");
  }
  desc.table = s;
  if (!in.varint(v) || v > UINT32_MAX) {
    return fail("truncated or bad table oid");
  }
  desc.table_oid = static_cast<uint32_t>(v);
  uint64_t ncolumns;
  if (!in.varint(ncolumns)) {
    return fail("truncated in the column count");
  }
  if (ncolumns > kMaxColumns || ncolumns > in.remaining()) {
    return fail(cat("column count ", ncolumns, " out of range"));
  }
  desc.columns.resize(ncolumns);
  for (uint64_t i = 0; i < ncolumns; ++i) {
    Column& c = desc.columns[i];
    auto col_fail = [&](std::string_view what) {
      return fail(
          cat("column ", i + 1, c.name.empty() ? "" : cat(" (\"", c.name, "\")"), ": ", what));
    };
    if (!in.varint(v) || !in.bytes(v, s)) {
      return col_fail("truncated in the name");
    }
    if (s.empty()) {
      return col_fail("empty name");
    }
    c.name = s;
    if (!in.varint(v) || v > UINT32_MAX) {
      return col_fail("truncated or bad type oid");
    }
    c.type_oid = static_cast<uint32_t>(v);
    if (!in.varint(v)) {
      return col_fail("truncated in the type modifier");
    }
    const int64_t typmod = unzigzag(v);
    if (typmod < INT32_MIN || typmod > INT32_MAX) {
      return col_fail("type modifier out of range");
    }
    c.type_modifier = static_cast<int32_t>(typmod);
    uint8_t flags;
    uint8_t kind;
    uint8_t delimiter;
    if (!in.byte(flags) || !in.byte(kind) || !in.byte(delimiter)) {
      return col_fail("truncated in the type");
    }
    if (flags > 3) {
      return col_fail(cat("unknown flags ", flags));
    }
    if (kind < 1 || kind > kMaxTypeKind) {
      return col_fail(cat("unknown type kind ", kind));
    }
    c.nullable = (flags & 1) != 0;
    c.type.is_array = (flags & 2) != 0;
    c.type.kind = static_cast<TypeKind>(kind);
    c.type.delimiter = static_cast<char>(delimiter);
    if (c.type.delimiter == '"' || c.type.delimiter == '\\' || c.type.delimiter == '{' ||
        c.type.delimiter == '}' || is_space(c.type.delimiter) || c.type.delimiter == '\0') {
      return col_fail("bad array delimiter");
    }
    if (!in.varint(v) || !in.bytes(v, s)) {
      return col_fail("truncated in the type name");
    }
    c.type_name = s;
  }
  if (!in.at_end()) {
    return fail(cat(in.remaining(), " trailing bytes"));
  }
  return desc;
}

std::string RelationDesc::qualified_name() const { return cat(schema, ".", table); }

std::string RelationDesc::describe() const {
  std::string out;
  for (const Column& c : columns) {
    std::string_view type_name = c.type_name;
    std::string fallback;
    if (type_name.empty()) {
      type_name = builtin_type_name(c.type_oid);
      if (type_name.empty()) {
        fallback = cat("oid ", c.type_oid, " (as ", type_kind_name(c.type.kind),
                       c.type.is_array ? "[]" : "", ")");
        type_name = fallback;
      }
    }
    out += cat(c.name, " ", type_name, c.nullable ? "" : " not null", "\n");
  }
  return out;
}

bool RelationDesc::compatible_with(const RelationDesc& newer, std::string* why) const {
  auto type_label = [](const Column& c) {
    std::string_view name = c.type_name;
    if (name.empty()) {
      name = builtin_type_name(c.type_oid);
    }
    return cat(name.empty() ? "type" : name, " (oid ", c.type_oid, ", typmod ", c.type_modifier,
               ")");
  };
  const size_t common = std::min(columns.size(), newer.columns.size());
  for (size_t i = 0; i < common; ++i) {
    const Column& a = columns[i];
    const Column& b = newer.columns[i];
    std::string reason;
    if (a.name != b.name) {
      reason = cat("column ", i + 1, " \"", a.name, "\" is now \"", b.name, "\"");
    } else if (a.type_oid != b.type_oid || a.type_modifier != b.type_modifier) {
      reason =
          cat("column \"", a.name, "\" changed type from ", type_label(a), " to ", type_label(b));
    }
    if (!reason.empty()) {
      if (why != nullptr) {
        *why = std::move(reason);
      }
      return false;
    }
  }
  if (columns.size() != newer.columns.size()) {
    if (why != nullptr) {
      *why = columns.size() > newer.columns.size()
                 ? cat("column \"", columns[common].name, "\" is gone (", columns.size(),
                       " columns, now ", newer.columns.size(), ")")
                 : cat("column \"", newer.columns[common].name, "\" was added (", columns.size(),
                       " columns, now ", newer.columns.size(), ")");
    }
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// COPY text lines and rows.

absl::Status parse_copy_text_line(std::string_view line, std::string& scratch,
                                  std::vector<TextField>& fields) {
  fields.clear();
  scratch.clear();
  // Un-escaping never lengthens a field, so views into `scratch` stay valid.
  if (scratch.capacity() < line.size()) {
    scratch.reserve(line.size());
  }
  size_t begin = 0;
  while (true) {
    size_t end = begin;
    bool escaped = false;
    while (end < line.size() && line[end] != '\t') {
      if (line[end] == '\\') {
        escaped = true;
        if (end + 1 >= line.size()) {
          return absl::InvalidArgumentError(
              cat("COPY line ends in a lone backslash: ", quote(line)));
        }
        end += 2;
      } else {
        ++end;
      }
    }
    const std::string_view raw = line.substr(begin, end - begin);
    if (!escaped) {
      fields.push_back({raw, false});
    } else if (raw == "\\N") {
      fields.push_back({std::string_view(), true});
    } else {
      const size_t at = scratch.size();
      for (size_t k = 0; k < raw.size(); ++k) {
        char c = raw[k];
        if (c != '\\') {
          scratch += c;
          continue;
        }
        c = raw[++k];
        switch (c) {
          case 'b':
            scratch += '\b';
            break;
          case 'f':
            scratch += '\f';
            break;
          case 'n':
            scratch += '\n';
            break;
          case 'r':
            scratch += '\r';
            break;
          case 't':
            scratch += '\t';
            break;
          case 'v':
            scratch += '\v';
            break;
          case 'x':
            if (k + 1 < raw.size() && hex_value(raw[k + 1]) >= 0) {
              int v = hex_value(raw[++k]);
              if (k + 1 < raw.size() && hex_value(raw[k + 1]) >= 0) {
                v = v * 16 + hex_value(raw[++k]);
              }
              scratch += static_cast<char>(v);
            } else {
              scratch += 'x';
            }
            break;
          default:
            if (c >= '0' && c <= '7') {
              int v = c - '0';
              for (int n = 0; n < 2 && k + 1 < raw.size() && raw[k + 1] >= '0' && raw[k + 1] <= '7';
                   ++n) {
                v = v * 8 + (raw[++k] - '0');
              }
              scratch += static_cast<char>(v & 0xff);
            } else {
              scratch += c;
            }
        }
      }
      fields.push_back({std::string_view(scratch).substr(at), false});
    }
    if (end >= line.size()) {
      break;
    }
    begin = end + 1;
  }
  return absl::OkStatus();
}

void encode_int_value(int64_t v, std::string& out) { put_varint(out, zigzag(v)); }

void encode_float4_value(float v, std::string& out) {
  put_fixed32(out, std::isnan(v) ? 0x7fc00000u : std::bit_cast<uint32_t>(v));
}

void encode_float8_value(double v, std::string& out) {
  put_fixed64(out, std::isnan(v) ? 0x7ff8000000000000ull : std::bit_cast<uint64_t>(v));
}

void encode_text_bytes(std::string_view text, std::string& out) {
  put_varint(out, text.size());
  out.append(text);
}

absl::Status encode_numeric_value(bool negative, std::string_view int_digits,
                                  std::string_view frac_digits, std::string& out) {
  return encode_numeric_digits(negative, int_digits, frac_digits, 0, out);
}

absl::Status encode_date_value(int64_t year, int64_t month, int64_t day, std::string& out) {
  if (auto status = check_month_day(year, month, day); !status.ok()) {
    return status;
  }
  return encode_checked_date(year, month, day, out);
}

absl::Status encode_timestamp_value(int64_t year, int64_t month, int64_t day, int64_t micros_of_day,
                                    std::string& out) {
  if (auto status = check_month_day(year, month, day); !status.ok()) {
    return status;
  }
  return encode_checked_timestamp(year, month, day, micros_of_day, 0, out);
}

absl::Status encode_text_value(const ColumnType& type, std::string_view text, std::string& out) {
  const size_t start = out.size();
  if (auto status = encode_any(type, text, out); !status.ok()) {
    out.resize(start);
    return absl::InvalidArgumentError(cat("invalid ", type_kind_name(type.kind),
                                          type.is_array ? "[]" : "", " value ", quote(text), ": ",
                                          status.message()));
  }
  return absl::OkStatus();
}

absl::Status encode_binary_value(const ColumnType& type, std::string_view bytes, std::string& out) {
  const size_t start = out.size();
  if (auto status = encode_binary_any(type, bytes, out); !status.ok()) {
    out.resize(start);
    return absl::InvalidArgumentError(cat("invalid ", type_kind_name(type.kind),
                                          type.is_array ? "[]" : "", " binary value ", quote(bytes),
                                          ": ", status.message()));
  }
  return absl::OkStatus();
}

bool binary_decodable(const Column& column) {
  const BuiltinType* b = find_builtin(column.type_oid);
  if (b == nullptr || column.type != ColumnType{b->kind, b->is_array, ','}) {
    return false;
  }
  if (b->kind != TypeKind::kText) {
    return true;
  }
  switch (column.type_oid) {
    case 25:    // text
    case 1043:  // varchar
    case 1042:  // bpchar
    case 19:    // name
    case 1009:  // text[]
    case 1015:  // varchar[]
    case 1014:  // bpchar[]
    case 1003:  // name[]
      return true;
    default:  // "char" (its send is not its text), unknown
      return false;
  }
}

RowEncoder::RowEncoder(const RelationDesc& desc) : qualified_name_(desc.qualified_name()) {
  types_.reserve(desc.columns.size());
  names_.reserve(desc.columns.size());
  for (const Column& c : desc.columns) {
    types_.push_back(c.type);
    names_.push_back(c.name);
  }
}

absl::Status RowEncoder::encode(std::span<const TextField> fields, std::string& out) {
  if (fields.size() != types_.size()) {
    return absl::InvalidArgumentError(cat("row of ", qualified_name_, " has ", fields.size(),
                                          " fields, expected ", types_.size()));
  }
  const size_t start = out.size();
  out.append((types_.size() + 7) / 8, '\0');
  for (size_t i = 0; i < types_.size(); ++i) {
    const TextField& f = fields[i];
    if (f.is_null) {
      out[start + i / 8] = static_cast<char>(out[start + i / 8] | (1 << (i % 8)));
      continue;
    }
    const ColumnType& type = types_[i];
    absl::Status status =
        type.is_array ? encode_array(type, f.text, out) : encode_scalar(type.kind, f.text, out);
    if (!status.ok()) {
      out.resize(start);
      return absl::InvalidArgumentError(cat(
          qualified_name_, " column \"", names_[i], "\" (", type_kind_name(type.kind),
          type.is_array ? "[]" : "", "): invalid value ", quote(f.text), ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status RowEncoder::encode_copy_line(std::string_view line, std::string& out) {
  if (auto status = parse_copy_text_line(line, scratch_, fields_); !status.ok()) {
    return absl::InvalidArgumentError(cat(qualified_name_, ": ", status.message()));
  }
  return encode(fields_, out);
}

absl::Status RowEncoder::encode_copy_binary_tuple(std::string_view tuple, std::string& out) {
  NetworkReader in(tuple);
  int16_t count;
  if (!in.i16(count)) {
    return absl::InvalidArgumentError(
        cat(qualified_name_, ": COPY BINARY tuple of ", tuple.size(), " bytes has no field count"));
  }
  if (count < 0 || static_cast<size_t>(count) != types_.size()) {
    return absl::InvalidArgumentError(
        cat("row of ", qualified_name_, " has ", count, " fields, expected ", types_.size()));
  }
  const size_t start = out.size();
  auto fail = [&](size_t i, std::string_view why) {
    out.resize(start);
    const ColumnType& type = types_[i];
    return absl::InvalidArgumentError(cat(qualified_name_, " column \"", names_[i], "\" (",
                                          type_kind_name(type.kind), type.is_array ? "[]" : "",
                                          "): ", why));
  };
  out.append((types_.size() + 7) / 8, '\0');
  for (size_t i = 0; i < types_.size(); ++i) {
    int32_t length;
    std::string_view bytes;
    if (!in.i32(length)) {
      return fail(i, "truncated COPY BINARY tuple: no field length");
    }
    if (length == -1) {
      out[start + i / 8] = static_cast<char>(out[start + i / 8] | (1 << (i % 8)));
      continue;
    }
    if (length < 0) {
      return fail(i, cat("bad field length ", length));
    }
    if (!in.bytes(static_cast<size_t>(length), bytes)) {
      return fail(i, cat("truncated COPY BINARY tuple: field of ", length, " bytes, ",
                         in.remaining(), " left"));
    }
    if (auto status = encode_binary_any(types_[i], bytes, out); !status.ok()) {
      return fail(i, cat("invalid binary value ", quote(bytes), ": ", status.message()));
    }
  }
  if (!in.at_end()) {
    out.resize(start);
    return absl::InvalidArgumentError(cat(qualified_name_, ": ", in.remaining(),
                                          " bytes after the last field of a COPY BINARY tuple"));
  }
  return absl::OkStatus();
}

absl::Status split_row(const RelationDesc& desc, std::string_view encoded,
                       std::vector<EncodedValue>& values) {
  values.clear();
  const size_t n = desc.columns.size();
  Reader in(encoded);
  std::string_view bitmap;
  if (!in.bytes((n + 7) / 8, bitmap)) {
    return damaged(cat("row of ", desc.qualified_name(), ": truncated null bitmap"));
  }
  if (n % 8 != 0 && (static_cast<uint8_t>(bitmap.back()) >> (n % 8)) != 0) {
    return damaged(cat("row of ", desc.qualified_name(), ": bad null bitmap"));
  }
  for (size_t i = 0; i < n; ++i) {
    if ((static_cast<uint8_t>(bitmap[i / 8]) >> (i % 8)) & 1) {
      values.push_back({std::string_view(), true});
      continue;
    }
    const char* begin = in.position();
    if (!skip_value(desc.columns[i].type, in)) {
      return damaged(cat("row of ", desc.qualified_name(), ": ", column_label(desc, i),
                         ": truncated or damaged value"));
    }
    values.push_back({std::string_view(begin, static_cast<size_t>(in.position() - begin)), false});
  }
  if (!in.at_end()) {
    return damaged(cat("row of ", desc.qualified_name(), ": ", in.remaining(), " trailing bytes"));
  }
  return absl::OkStatus();
}

absl::Status print_value(const ColumnType& type, std::string_view encoded, std::string& out) {
  const size_t start = out.size();
  Reader in(encoded);
  absl::Status status = print_any(type, in, out);
  if (status.ok() && !in.at_end()) {
    status = damaged(cat(in.remaining(), " trailing bytes after the value"));
  }
  if (!status.ok()) {
    out.resize(start);
  }
  return status;
}

absl::Status print_row(const RelationDesc& desc, std::string_view encoded, std::string& out) {
  if (desc.row_format != kRowFormatV1) {
    return absl::InvalidArgumentError(
        cat("row of ", desc.qualified_name(), ": unknown row format ", desc.row_format));
  }
  const size_t start = out.size();
  const size_t n = desc.columns.size();
  Reader in(encoded);
  std::string_view bitmap;
  auto fail = [&](std::string_view what) {
    out.resize(start);
    return damaged(cat("row of ", desc.qualified_name(), ": ", what));
  };
  if (!in.bytes((n + 7) / 8, bitmap)) {
    return fail("truncated null bitmap");
  }
  if (n % 8 != 0 && (static_cast<uint8_t>(bitmap.back()) >> (n % 8)) != 0) {
    return fail("bad null bitmap");
  }
  std::string& scratch = array_scratch().row;
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) {
      out += '\t';
    }
    if ((static_cast<uint8_t>(bitmap[i / 8]) >> (i % 8)) & 1) {
      out += "\\N";
      continue;
    }
    const ColumnType& type = desc.columns[i].type;
    absl::Status status;
    if (type.is_array) {
      scratch.clear();
      status = print_array(type, in, scratch);
      if (status.ok()) {
        append_copy_escaped(scratch, out);
      }
    } else {
      switch (type.kind) {
        case TypeKind::kText:
        case TypeKind::kJson:
        case TypeKind::kJsonb: {
          uint64_t len;
          std::string_view v;
          if (!in.varint(len) || !in.bytes(len, v)) {
            status = damaged("truncated text");
          } else {
            append_copy_escaped(v, out);
          }
          break;
        }
        case TypeKind::kBytea: {
          scratch.clear();
          status = print_scalar(type.kind, in, scratch);
          if (status.ok()) {
            out += '\\';  // the leading backslash of \x, escaped
            out.append(scratch);
          }
          break;
        }
        default:
          status = print_scalar(type.kind, in, out);
      }
    }
    if (!status.ok()) {
      return fail(cat(column_label(desc, i), ": ", status.message()));
    }
  }
  if (!in.at_end()) {
    return fail(cat(in.remaining(), " trailing bytes"));
  }
  return absl::OkStatus();
}

}  // namespace weir::sources::postgres
