// MySQL-family columns as weir columns, and the canonical text of their values (types.h).

#include "weir/sources/mysql/types.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace weir::sources::mysql {

namespace {

// PostgreSQL type OIDs the mapping uses.
constexpr uint32_t kByteaOid = 17;
constexpr uint32_t kInt8Oid = 20;
constexpr uint32_t kInt2Oid = 21;
constexpr uint32_t kInt4Oid = 23;
constexpr uint32_t kTextOid = 25;
constexpr uint32_t kJsonOid = 114;
constexpr uint32_t kFloat4Oid = 700;
constexpr uint32_t kFloat8Oid = 701;
constexpr uint32_t kVarcharOid = 1043;
constexpr uint32_t kDateOid = 1082;
constexpr uint32_t kTimestampOid = 1114;
constexpr uint32_t kTimestampTzOid = 1184;
constexpr uint32_t kIntervalOid = 1186;
constexpr uint32_t kVarbitOid = 1562;
constexpr uint32_t kNumericOid = 1700;

constexpr int32_t kVarHeaderSize = 4;  // PostgreSQL's VARHDRSZ, in varchar and numeric typmods

// How a column's values are read; one per row of the table in types.h.
enum class Kind {
  kInteger,
  kYear,
  kDecimal,
  kFloat,
  kDouble,
  kBit,
  kChar,  // char: trailing spaces are not part of the value
  kString,
  kBinary,
  kDate,
  kTime,
  kDatetime,
  kTimestamp,
  kUnsupported,
};

bool is_binary_type(std::string_view t) {
  return t == "binary" || t == "varbinary" || t == "tinyblob" || t == "blob" || t == "mediumblob" ||
         t == "longblob";
}

bool is_text_type(std::string_view t) {
  return t == "tinytext" || t == "text" || t == "mediumtext" || t == "longtext";
}

// The character sets whose text the server converts to utf8mb4 without loss (MariaDB's latin1
// is Windows-1252; every one of its bytes has a Unicode character).
bool is_supported_charset(std::string_view cs) {
  return cs == "utf8mb4" || cs == "utf8mb3" || cs == "utf8" || cs == "ascii" || cs == "latin1";
}

Kind classify(const MysqlColumn& c) {
  const std::string_view t = c.data_type;
  if (t == "tinyint" || t == "smallint" || t == "mediumint" || t == "int" || t == "bigint") {
    return Kind::kInteger;
  }
  if (t == "year") return Kind::kYear;
  if (t == "decimal") return Kind::kDecimal;
  if (t == "float") return Kind::kFloat;
  if (t == "double") return Kind::kDouble;
  if (t == "bit") return Kind::kBit;
  if (is_binary_type(t)) return Kind::kBinary;
  if (t == "char" || t == "varchar" || is_text_type(t) || t == "enum" || t == "set") {
    if (c.charset == "binary") {
      // Byte strings in any case; enum and set values are their (text) elements.
      return (t == "enum" || t == "set") ? Kind::kString : Kind::kBinary;
    }
    if (!is_supported_charset(c.charset)) return Kind::kUnsupported;
    return t == "char" ? Kind::kChar : Kind::kString;
  }
  if (t == "date") return Kind::kDate;
  if (t == "time") return Kind::kTime;
  if (t == "datetime") return Kind::kDatetime;
  if (t == "timestamp") return Kind::kTimestamp;
  return Kind::kUnsupported;
}

absl::Status unsupported(const MysqlColumn& c) {
  const std::string type = c.column_type.empty() ? c.data_type : c.column_type;
  if (!c.charset.empty() && c.charset != "binary" && !is_supported_charset(c.charset) &&
      (c.data_type == "char" || c.data_type == "varchar" || is_text_type(c.data_type) ||
       c.data_type == "enum" || c.data_type == "set")) {
    return absl::UnimplementedError(absl::StrCat(
        "column ", quote_identifier(c.name), " (", type, ") has character set ", c.charset,
        ", which weir does not take (utf8mb4, utf8mb3, ascii, latin1 and binary only)"));
  }
  return absl::UnimplementedError(absl::StrCat("column ", quote_identifier(c.name), " has type ",
                                               type, ", which weir does not take"));
}

// An error for a value of `c` that has no canonical text: names the column, quotes the value.
absl::Status bad_value(const MysqlColumn& c, std::string_view value, std::string_view why) {
  constexpr size_t kQuoted = 64;
  const bool cut = value.size() > kQuoted;
  const std::string_view shown = value.substr(0, kQuoted);
  return absl::InvalidArgumentError(absl::StrCat(
      "column ", quote_identifier(c.name), " (", c.column_type, "): ", std::string(why), ": '",
      absl::CHexEscape(absl::string_view(shown.data(), shown.size())), cut ? "'..." : "'"));
}

bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

// [-]digits, the sign only when `allow_sign`.
bool is_integer_text(std::string_view s, bool allow_sign) {
  if (allow_sign && !s.empty() && s[0] == '-') s.remove_prefix(1);
  if (s.empty()) return false;
  for (const char ch : s) {
    if (!is_digit(ch)) return false;
  }
  return true;
}

// [-]digits[.digits]
bool is_decimal_text(std::string_view s) {
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  const size_t dot = s.find('.');
  if (dot == std::string_view::npos) return is_integer_text(s, false);
  return is_integer_text(s.substr(0, dot), false) && is_integer_text(s.substr(dot + 1), false);
}

// Well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF) without NUL,
// which PostgreSQL's text types cannot hold.
const char* check_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned char* end = p + s.size();
  while (p < end) {
    const unsigned char b = *p;
    if (b == 0) return "a NUL character, which PostgreSQL text cannot hold";
    if (b < 0x80) {
      ++p;
      continue;
    }
    size_t n;
    uint32_t cp;
    uint32_t min;
    if ((b & 0xe0) == 0xc0) {
      n = 1;
      cp = b & 0x1f;
      min = 0x80;
    } else if ((b & 0xf0) == 0xe0) {
      n = 2;
      cp = b & 0x0f;
      min = 0x800;
    } else if ((b & 0xf8) == 0xf0) {
      n = 3;
      cp = b & 0x07;
      min = 0x10000;
    } else {
      return "not UTF-8";
    }
    if (static_cast<size_t>(end - p) <= n) return "not UTF-8";
    for (size_t k = 1; k <= n; ++k) {
      if ((p[k] & 0xc0) != 0x80) return "not UTF-8";
      cp = (cp << 6) | (p[k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return "not UTF-8";
    p += n + 1;
  }
  return nullptr;
}

// Reads exactly `digits` digits at s[i].
bool read_fixed(std::string_view s, size_t& i, size_t digits, int& value) {
  if (i + digits > s.size()) return false;
  value = 0;
  for (size_t k = 0; k < digits; ++k) {
    if (!is_digit(s[i + k])) return false;
    value = value * 10 + (s[i + k] - '0');
  }
  i += digits;
  return true;
}

bool is_leap(int year) { return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0); }

int days_in_month(int year, int month) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && is_leap(year) ? 29 : kDays[month - 1];
}

// Appends "YYYY-MM-DD" from s[0..10) after checking it; year 0 becomes year 1 BC, which the
// caller marks with " BC" (returned in `bc`).
absl::Status append_date(const MysqlColumn& c, std::string_view value, std::string_view s,
                         std::string& out, bool& bc) {
  size_t i = 0;
  int year;
  int month;
  int day;
  if (!read_fixed(s, i, 4, year) || s[i++] != '-' || !read_fixed(s, i, 2, month) || s[i++] != '-' ||
      !read_fixed(s, i, 2, day)) {
    return bad_value(c, value, "not a date (YYYY-MM-DD)");
  }
  if (month == 0 || day == 0) {
    return bad_value(c, value, "a zero date (or a zero month or day) has no weir value");
  }
  // MySQL's year 0 precedes year 1: PostgreSQL's 1 BC (a leap year there, so every date of
  // MySQL's year 0 exists in it).
  bc = year == 0;
  if (month > 12 || day > days_in_month(bc ? 4 : year, month)) {
    return bad_value(c, value, "not a valid date");
  }
  if (bc) {
    out += "0001";
    out.append(s.substr(4, 6));
  } else {
    out.append(s.substr(0, 10));
  }
  return absl::OkStatus();
}

// ".f" with 1 to 6 digits at s[i], or nothing.
bool skip_fraction(std::string_view s, size_t& i) {
  if (i == s.size()) return true;
  if (s[i] != '.') return false;
  const size_t begin = ++i;
  while (i < s.size() && is_digit(s[i])) ++i;
  return i > begin && i - begin <= 6;
}

// "HH:MM:SS[.f]" at s[i], hours up to `max_hours` with at least two digits.
bool skip_clock(std::string_view s, size_t& i, int max_hour_digits, int max_hours) {
  const size_t begin = i;
  int hours = 0;
  while (i < s.size() && is_digit(s[i]) && static_cast<int>(i - begin) < max_hour_digits) {
    hours = hours * 10 + (s[i] - '0');
    ++i;
  }
  int minutes;
  int seconds;
  if (i - begin < 2 || hours > max_hours || i >= s.size() || s[i++] != ':' ||
      !read_fixed(s, i, 2, minutes) || minutes > 59 || i >= s.size() || s[i++] != ':' ||
      !read_fixed(s, i, 2, seconds) || seconds > 59) {
    return false;
  }
  return skip_fraction(s, i);
}

absl::Status append_datetime(const MysqlColumn& c, std::string_view value, bool utc,
                             std::string& out) {
  constexpr std::string_view kWhat = "not a date and time (YYYY-MM-DD HH:MM:SS[.ffffff])";
  if (value.size() < 19 || value[10] != ' ') return bad_value(c, value, kWhat);
  size_t i = 11;
  if (!skip_clock(value, i, 2, 23)) return bad_value(c, value, kWhat);
  const size_t at = out.size();
  bool bc = false;
  if (auto status = append_date(c, value, value, out, bc); !status.ok()) {
    out.resize(at);
    return status;
  }
  out.append(value.substr(10));
  if (utc) out += "+00";
  if (bc) out += " BC";
  return absl::OkStatus();
}

void append_hex(std::string_view bytes, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  const size_t at = out.size();
  out.resize(at + 2 * bytes.size());
  char* p = out.data() + at;
  for (const char ch : bytes) {
    const auto b = static_cast<unsigned char>(ch);
    *p++ = kHex[b >> 4];
    *p++ = kHex[b & 0xf];
  }
}

// Parses a floating-point text as the server prints it (strtod's syntax, no spaces, finite).
template <typename F>
bool parse_float(std::string_view s, F& v) {
  char buf[64];
  if (s.empty() || s.size() >= sizeof(buf)) return false;
  for (const char ch : s) {
    if (!is_digit(ch) && ch != '-' && ch != '+' && ch != '.' && ch != 'e' && ch != 'E') {
      return false;  // no inf, nan, hex floats or spaces
    }
  }
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = '\0';
  char* end = nullptr;
  if constexpr (sizeof(F) == sizeof(float)) {
    v = std::strtof(buf, &end);
  } else {
    v = std::strtod(buf, &end);
  }
  return end == buf + s.size() && std::isfinite(v);
}

template <typename F>
void append_float(F v, std::string& out) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

std::string format_type(std::string_view base, const std::string& modifier, std::string_view tail) {
  std::string out(base);
  out += '(';
  out += modifier;
  out += ')';
  out += tail;
  return out;
}

}  // namespace

std::string quote_identifier(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 2);
  out += '`';
  for (const char ch : name) {
    if (ch == '`') out += '`';
    out += ch;
  }
  out += '`';
  return out;
}

absl::StatusOr<postgres::Column> weir_column(const MysqlColumn& c) {
  postgres::Column col;
  col.name = c.name;
  col.nullable = c.nullable;
  const std::string_view t = c.data_type;
  switch (classify(c)) {
    case Kind::kInteger:
      if (t == "tinyint") {
        col.type_oid = kInt2Oid;
      } else if (t == "smallint") {
        col.type_oid = c.is_unsigned ? kInt4Oid : kInt2Oid;
      } else if (t == "mediumint") {
        col.type_oid = kInt4Oid;
      } else if (t == "int") {
        col.type_oid = c.is_unsigned ? kInt8Oid : kInt4Oid;
      } else {
        col.type_oid = c.is_unsigned ? kNumericOid : kInt8Oid;
      }
      break;
    case Kind::kYear:
      col.type_oid = kInt2Oid;
      break;
    case Kind::kDecimal:
      col.type_oid = kNumericOid;
      col.type_modifier = static_cast<int32_t>((c.precision << 16) | c.scale) + kVarHeaderSize;
      col.type_name = format_type("numeric", absl::StrCat(c.precision, ",", c.scale), "");
      break;
    case Kind::kFloat:
      col.type_oid = kFloat4Oid;
      break;
    case Kind::kDouble:
      col.type_oid = kFloat8Oid;
      break;
    case Kind::kBit:
      col.type_oid = kVarbitOid;
      col.type_modifier = static_cast<int32_t>(c.length);
      col.type_name = format_type("bit varying", absl::StrCat(c.length), "");
      break;
    case Kind::kChar:
    case Kind::kString:
      if (t == "enum" || t == "set") {
        col.type_oid = kTextOid;
        col.type_name = c.column_type;
      } else if (t == "char" || t == "varchar") {
        col.type_oid = kVarcharOid;
        col.type_modifier = static_cast<int32_t>(c.length) + kVarHeaderSize;
        col.type_name = format_type("character varying", absl::StrCat(c.length), "");
      } else {
        col.type_oid = c.is_json ? kJsonOid : kTextOid;
      }
      break;
    case Kind::kBinary:
      col.type_oid = kByteaOid;
      break;
    case Kind::kDate:
      col.type_oid = kDateOid;
      break;
    case Kind::kTime:
      col.type_oid = kIntervalOid;
      break;
    case Kind::kDatetime:
      col.type_oid = kTimestampOid;
      col.type_modifier = static_cast<int32_t>(c.scale);
      col.type_name = format_type("timestamp", absl::StrCat(c.scale), " without time zone");
      break;
    case Kind::kTimestamp:
      col.type_oid = kTimestampTzOid;
      col.type_modifier = static_cast<int32_t>(c.scale);
      col.type_name = format_type("timestamp", absl::StrCat(c.scale), " with time zone");
      break;
    case Kind::kUnsupported:
      return unsupported(c);
  }
  col.type = postgres::builtin_column_type(col.type_oid);
  if (col.type_name.empty()) col.type_name = std::string(postgres::builtin_type_name(col.type_oid));
  return col;
}

absl::StatusOr<postgres::RelationDesc> relation_desc(std::string_view database,
                                                     std::string_view table,
                                                     const std::vector<MysqlColumn>& columns) {
  postgres::RelationDesc desc;
  desc.schema = std::string(database);
  desc.table = std::string(table);
  desc.columns.reserve(columns.size());
  for (const MysqlColumn& c : columns) {
    auto col = weir_column(c);
    if (!col.ok()) {
      return absl::Status(col.status().code(),
                          absl::StrCat(std::string(database), ".", std::string(table), ": ",
                                       col.status().message()));
    }
    desc.columns.push_back(*std::move(col));
  }
  return desc;
}

std::string select_expression(const MysqlColumn& column) {
  std::string name = quote_identifier(column.name);
  switch (classify(column)) {
    case Kind::kFloat:
      // FLOAT prints with 6 digits; as a double it prints exactly (shortest round trip). Neither
      // prints a negative zero's sign (an underflow stores one): ATAN2 tells it.
      return absl::StrCat("IF(", name, " = 0 AND ATAN2(", name, ", -1) < 0, '-0', CAST(", name,
                          " AS DOUBLE))");
    case Kind::kDouble:
      return absl::StrCat("IF(", name, " = 0 AND ATAN2(", name, ", -1) < 0, '-0', ", name, ")");
    case Kind::kBit:
      // A BIT prints as its raw bytes; BIN gives the digits without leading zeros.
      return absl::StrCat("BIN(", name, ")");
    default:
      return name;
  }
}

absl::Status canonical_from_select(const MysqlColumn& c, std::string_view value, std::string& out) {
  switch (classify(c)) {
    case Kind::kInteger:
      if (!is_integer_text(value, !c.is_unsigned)) return bad_value(c, value, "not an integer");
      out.append(value);
      return absl::OkStatus();
    case Kind::kYear: {
      if (!is_integer_text(value, false) || value.size() > 4) {
        return bad_value(c, value, "not a year");
      }
      const size_t first = value.find_first_not_of('0');
      out.append(first == std::string_view::npos ? "0" : value.substr(first));
      return absl::OkStatus();
    }
    case Kind::kDecimal:
      if (!is_decimal_text(value)) return bad_value(c, value, "not a decimal number");
      out.append(value);
      return absl::OkStatus();
    case Kind::kFloat: {
      float v;
      if (!parse_float(value, v)) return bad_value(c, value, "not a finite float");
      append_float(v, out);
      return absl::OkStatus();
    }
    case Kind::kDouble: {
      double v;
      if (!parse_float(value, v)) return bad_value(c, value, "not a finite double");
      append_float(v, out);
      return absl::OkStatus();
    }
    case Kind::kBit: {
      if (value.empty() || value.size() > c.length ||
          value.find_first_not_of("01") != std::string_view::npos) {
        return bad_value(c, value, absl::StrCat("not at most ", c.length, " binary digits"));
      }
      out.append(c.length - value.size(), '0');
      out.append(value);
      return absl::OkStatus();
    }
    case Kind::kChar:
      while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
      [[fallthrough]];
    case Kind::kString:
      if (const char* why = check_utf8(value); why != nullptr) return bad_value(c, value, why);
      out.append(value);
      return absl::OkStatus();
    case Kind::kBinary:
      out += "\\x";
      append_hex(value, out);
      if (c.data_type == "binary" && value.size() < c.length) {
        out.append(2 * (c.length - value.size()), '0');
      }
      return absl::OkStatus();
    case Kind::kDate: {
      if (value.size() != 10) return bad_value(c, value, "not a date (YYYY-MM-DD)");
      const size_t at = out.size();
      bool bc = false;
      if (auto status = append_date(c, value, value, out, bc); !status.ok()) {
        out.resize(at);
        return status;
      }
      if (bc) out += " BC";
      return absl::OkStatus();
    }
    case Kind::kTime: {
      size_t i = !value.empty() && value[0] == '-' ? 1 : 0;
      if (!skip_clock(value, i, 3, 838) || i != value.size()) {
        return bad_value(c, value, "not a time ([-]HHH:MM:SS[.ffffff], at most 838 hours)");
      }
      out.append(value);
      return absl::OkStatus();
    }
    case Kind::kDatetime:
      return append_datetime(c, value, false, out);
    case Kind::kTimestamp:
      return append_datetime(c, value, true, out);
    case Kind::kUnsupported:
      return unsupported(c);
  }
  return unsupported(c);
}

}  // namespace weir::sources::mysql
