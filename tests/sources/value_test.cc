// Tests of typed values and the row encoding (weir/sources/postgres/value.h) and of
// load_relation_desc (catalog.h). The *Postgres* tests round-trip what a real PostgreSQL 15 prints
// with COPY: decode, encode, print, and compare byte for byte with PostgreSQL's line; and encode
// the same rows from COPY BINARY, comparing with the encoding of the text.

#include "weir/sources/postgres/value.h"

#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "../support/postgres/postgres_url.h"
#include "postgres/catalog.h"
#include <gtest/gtest.h>
#include <libpq-fe.h>

namespace weir::sources::postgres {
namespace {

// ---------------------------------------------------------------------------------------------
// Helpers.

std::string encode_or_die(const ColumnType& type, std::string_view text) {
  std::string out;
  const absl::Status status = encode_text_value(type, text, out);
  EXPECT_TRUE(status.ok()) << text << ": " << status;
  return out;
}

std::string print_or_die(const ColumnType& type, std::string_view encoded) {
  std::string out;
  const absl::Status status = print_value(type, encoded, out);
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// Encodes `text`, prints it, and checks that the print is `expected` and re-encodes to the same
// bytes.
void expect_round_trip(const ColumnType& type, std::string_view text, std::string_view expected) {
  const std::string encoded = encode_or_die(type, text);
  const std::string printed = print_or_die(type, encoded);
  EXPECT_EQ(printed, expected) << "from " << text;
  EXPECT_EQ(encode_or_die(type, printed), encoded) << "from " << text;
}

ColumnType scalar(TypeKind kind) { return ColumnType{kind, false, ','}; }
ColumnType array_of(TypeKind kind) { return ColumnType{kind, true, ','}; }

RelationDesc mixed_desc() {
  RelationDesc desc;
  desc.schema = "public";
  desc.table = "mixed";
  desc.table_oid = 16384;
  auto add = [&](std::string name, uint32_t oid, int32_t typmod, bool nullable) {
    Column c;
    c.name = std::move(name);
    c.type_oid = oid;
    c.type_modifier = typmod;
    c.nullable = nullable;
    c.type = builtin_column_type(oid);
    c.type_name = std::string(builtin_type_name(oid));
    desc.columns.push_back(std::move(c));
  };
  add("id", 20, -1, false);
  add("small", 21, -1, true);
  add("n", 23, -1, true);
  add("price", 1700, 655366, true);  // numeric(10,2)
  add("ratio", 701, -1, true);
  add("name", 25, -1, true);
  add("created", 1184, -1, true);
  add("day", 1082, -1, true);
  add("flag", 16, -1, true);
  add("tags", 1009, -1, true);
  return desc;
}

// ---------------------------------------------------------------------------------------------
// Without a server.

TEST(ValueTest, IntegersRoundTripAtTheirLimits) {
  expect_round_trip(scalar(TypeKind::kInt2), "-32768", "-32768");
  expect_round_trip(scalar(TypeKind::kInt2), " +32767 ", "32767");
  expect_round_trip(scalar(TypeKind::kInt4), "-2147483648", "-2147483648");
  expect_round_trip(scalar(TypeKind::kInt8), "9223372036854775807", "9223372036854775807");
  expect_round_trip(scalar(TypeKind::kInt8), "-9223372036854775808", "-9223372036854775808");
  expect_round_trip(scalar(TypeKind::kOid), "4294967295", "4294967295");
  std::string out;
  EXPECT_FALSE(encode_text_value(scalar(TypeKind::kInt2), "32768", out).ok());
  EXPECT_FALSE(encode_text_value(scalar(TypeKind::kInt4), "1.0", out).ok());
  EXPECT_FALSE(encode_text_value(scalar(TypeKind::kInt8), "", out).ok());
  EXPECT_TRUE(out.empty());
}

TEST(ValueTest, FloatsPrintAsPostgresShortestFormat) {
  const ColumnType f8 = scalar(TypeKind::kFloat8);
  expect_round_trip(f8, "-0", "-0");
  expect_round_trip(f8, "NaN", "NaN");
  expect_round_trip(f8, "-Infinity", "-Infinity");
  expect_round_trip(f8, "1e-310", "1e-310");
  expect_round_trip(f8, "1e15", "1e+15");
  expect_round_trip(f8, "123456789012345", "123456789012345");
  expect_round_trip(f8, "0.0001", "0.0001");
  expect_round_trip(f8, "0.00001", "1e-05");
  expect_round_trip(f8, "1.7976931348623157e308", "1.7976931348623157e+308");
  expect_round_trip(f8, "0.1", "0.1");
  const ColumnType f4 = scalar(TypeKind::kFloat4);
  expect_round_trip(f4, "1234567", "1.234567e+06");
  expect_round_trip(f4, "123456", "123456");
  expect_round_trip(f4, "1e-40", "1e-40");
  expect_round_trip(f4, "0.1", "0.1");
}

TEST(ValueTest, NumericKeepsEveryDigitAndTheScale) {
  const ColumnType n = scalar(TypeKind::kNumeric);
  expect_round_trip(n, "0", "0");
  expect_round_trip(n, "-0.00", "0.00");
  expect_round_trip(n, "1.5e3", "1500");
  expect_round_trip(n, "1e-3", "0.001");
  expect_round_trip(n, "-123.4500", "-123.4500");
  expect_round_trip(n, "NaN", "NaN");
  expect_round_trip(n, "-inf", "-Infinity");
  const std::string big = std::string(1000, '9') + "." + std::string(999, '0') + "1";
  expect_round_trip(n, big, big);
  // Equal values written with different scales differ (PostgreSQL prints them differently).
  EXPECT_NE(encode_or_die(n, "1.0"), encode_or_die(n, "1.00"));
}

TEST(ValueTest, DatesAndTimesUseIsoStyle) {
  expect_round_trip(scalar(TypeKind::kDate), "0001-01-01 BC", "0001-01-01 BC");
  expect_round_trip(scalar(TypeKind::kDate), "5874897-12-31", "5874897-12-31");
  expect_round_trip(scalar(TypeKind::kDate), "infinity", "infinity");
  expect_round_trip(scalar(TypeKind::kTime), "24:00:00", "24:00:00");
  expect_round_trip(scalar(TypeKind::kTime), "12:34:56.789000", "12:34:56.789");
  expect_round_trip(scalar(TypeKind::kTimeTz), "12:00:00.5+05:30", "12:00:00.5+05:30");
  expect_round_trip(scalar(TypeKind::kTimeTz), "00:00:00-15:59:59", "00:00:00-15:59:59");
  expect_round_trip(scalar(TypeKind::kTimestamp), "0001-01-01 00:00:00 BC",
                    "0001-01-01 00:00:00 BC");
  expect_round_trip(scalar(TypeKind::kTimestampTz), "2000-01-01 02:00:00+02",
                    "2000-01-01 00:00:00+00");
  expect_round_trip(scalar(TypeKind::kInterval), "-1 years -2 mons +3 days -04:05:06.5",
                    "-1 years -2 mons +3 days -04:05:06.5");
  expect_round_trip(scalar(TypeKind::kInterval), "00:00:00", "00:00:00");
  std::string out;
  EXPECT_FALSE(encode_text_value(scalar(TypeKind::kDate), "2001-02-29", out).ok());
  EXPECT_FALSE(encode_text_value(scalar(TypeKind::kTime), "24:00:01", out).ok());
  EXPECT_FALSE(
      encode_text_value(scalar(TypeKind::kInterval), "999999999999999999 years", out).ok());
  EXPECT_FALSE(encode_text_value(scalar(TypeKind::kInterval), "178956971 years", out).ok());
  EXPECT_FALSE(encode_text_value(scalar(TypeKind::kTimeTz), "00:00+16:00", out).ok());
  // A local time on the day after timestamp's last UTC day (value_fuzz found an overflow here).
  expect_round_trip(scalar(TypeKind::kTimestampTz), "294277-01-01 00:00:00+01",
                    "294276-12-31 23:00:00+00");
  EXPECT_FALSE(
      encode_text_value(scalar(TypeKind::kTimestampTz), "294576-12-31 23:56-12", out).ok());
  EXPECT_FALSE(encode_text_value(scalar(TypeKind::kTimestamp), "5874897-12-31 00:00", out).ok());
}

// The encoders of values a source decoded itself (the MySQL binlog's) append what
// encode_text_value appends for the value's text, and refuse what it refuses; days past any
// text's are refused too (without overflowing).
TEST(ValueTest, DecodedDatesAndTimestampsEncodeAsTheirText) {
  auto written = [](int64_t year, int64_t month, int64_t day) {
    const int64_t shown = year > 0 ? year : 1 - year;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lld%s", static_cast<long long>(shown),
                  static_cast<long long>(month), static_cast<long long>(day),
                  year > 0 ? "" : " BC");
    return std::string(buf);
  };
  for (int64_t year : {-999999998, -4714, -4713, -1, 0, 1, 1999, 2000, 2100, 9999, 294276, 294277,
                       5874897, 5874898, 999999999}) {
    for (int64_t month : {0, 1, 2, 11, 12, 13}) {
      for (int64_t day : {0, 1, 23, 24, 28, 29, 30, 31, 32}) {
        const std::string date = written(year, month, day);
        std::string text_out;
        std::string direct_out = "x";
        const absl::Status text = encode_text_value(scalar(TypeKind::kDate), date, text_out);
        const absl::Status direct = encode_date_value(year, month, day, direct_out);
        EXPECT_EQ(direct.ok(), text.ok()) << date << ": " << direct << " vs " << text;
        EXPECT_EQ(direct_out, text.ok() ? "x" + text_out : "x") << date;
        for (int64_t micros : {int64_t{0}, int64_t{1}, int64_t{86399999999}, int64_t{86400000000},
                               int64_t{86400000001}}) {
          char clock[64];
          std::snprintf(clock, sizeof clock, "%02lld:%02lld:%02lld.%06lld",
                        static_cast<long long>(micros / 3600000000),
                        static_cast<long long>(micros / 60000000 % 60),
                        static_cast<long long>(micros / 1000000 % 60),
                        static_cast<long long>(micros % 1000000));
          const std::string ymd = date.substr(0, date.find(' '));
          for (const bool zone : {false, true}) {
            const std::string full =
                ymd + " " + clock + (zone ? "+00" : "") + (year > 0 ? "" : " BC");
            text_out.clear();
            direct_out = "x";
            const absl::Status t = encode_text_value(
                scalar(zone ? TypeKind::kTimestampTz : TypeKind::kTimestamp), full, text_out);
            const absl::Status d = encode_timestamp_value(year, month, day, micros, direct_out);
            EXPECT_EQ(d.ok(), t.ok()) << full << ": " << d << " vs " << t;
            EXPECT_EQ(direct_out, t.ok() ? "x" + text_out : "x") << full;
          }
        }
      }
    }
  }
  // Years no text has: refused, not wrapped into range.
  for (int64_t year :
       {std::numeric_limits<int64_t>::min(), int64_t{-9090984573995959655}, int64_t{-1000000000000},
        int64_t{1000000000000}, std::numeric_limits<int64_t>::max()}) {
    std::string out;
    EXPECT_FALSE(encode_date_value(year, 1, 1, out).ok()) << year;
    EXPECT_FALSE(encode_timestamp_value(year, 1, 1, 0, out).ok()) << year;
    EXPECT_EQ(out, "");
  }
  std::string out;
  EXPECT_FALSE(encode_timestamp_value(2000, 1, 1, -1, out).ok());
}

TEST(ValueTest, ArraysKeepShapeBoundsAndNulls) {
  expect_round_trip(array_of(TypeKind::kInt4), "[2:3]={1,2}", "[2:3]={1,2}");
  expect_round_trip(array_of(TypeKind::kInt4), "{{1,2},{3,4}}", "{{1,2},{3,4}}");
  expect_round_trip(array_of(TypeKind::kInt4), " { 1 , NULL , 3 } ", "{1,NULL,3}");
  expect_round_trip(array_of(TypeKind::kInt4), "{}", "{}");
  expect_round_trip(array_of(TypeKind::kText), R"({"a b","c,d","e\"f","g\\h",NULL,"NULL","",x})",
                    R"({"a b","c,d","e\"f","g\\h",NULL,"NULL","",x})");
  expect_round_trip(ColumnType{TypeKind::kText, true, ';'}, "{(1,1),(0,0);(2,2),(1,1)}",
                    "{(1,1),(0,0);(2,2),(1,1)}");
  std::string out;
  EXPECT_FALSE(encode_text_value(array_of(TypeKind::kInt4), "{{1,2},{3}}", out).ok());
  EXPECT_FALSE(encode_text_value(array_of(TypeKind::kInt4), "[1:3]={1,2}", out).ok());
  EXPECT_FALSE(encode_text_value(array_of(TypeKind::kInt4), "{1,2", out).ok());
  // Damaged bounds: a lower bound near INT64_MAX is an error, not an overflow.
  std::string damaged = encode_or_die(array_of(TypeKind::kInt4), "[5:5]={1}");
  // body: len, ndim 1, length 1, zigzag(5) = 10, flags 0, element
  ASSERT_EQ(damaged[3], 10);
  damaged.replace(3, 1, std::string("\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10));
  damaged[0] = static_cast<char>(damaged.size() - 1);
  EXPECT_FALSE(print_value(array_of(TypeKind::kInt4), damaged, out).ok());
}

TEST(ValueTest, ErrorsNameTheColumnAndQuoteTheValue) {
  RelationDesc desc = mixed_desc();
  RowEncoder encoder(desc);
  std::string out = "prefix";
  const std::string long_value = "x" + std::string(200, 'y');
  absl::Status status = encoder.encode_copy_line(
      "1\t2\t" + long_value + "\t1.00\t0.5\tname\t2000-01-01 00:00:00+00\t2000-01-01\tt\t{}", out);
  ASSERT_FALSE(status.ok());
  const std::string message(status.message());
  EXPECT_NE(message.find("public.mixed column \"n\""), std::string::npos) << message;
  EXPECT_NE(message.find("\"xyyyy"), std::string::npos) << message;
  EXPECT_EQ(message.find(long_value), std::string::npos) << "the value is truncated: " << message;
  EXPECT_EQ(out, "prefix") << "out is unchanged on error";
  status = encoder.encode_copy_line("1\t2", out);
  EXPECT_FALSE(status.ok());
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL's binary format, without a server.

// Big-endian bytes, as PostgreSQL's send functions write them.
struct NetworkBytes {
  std::string bytes;
  NetworkBytes& u8(uint8_t v) {
    bytes += static_cast<char>(v);
    return *this;
  }
  NetworkBytes& be(uint64_t v, int size) {
    for (int i = size - 1; i >= 0; --i) {
      bytes += static_cast<char>(v >> (8 * i));
    }
    return *this;
  }
  NetworkBytes& i16(int16_t v) { return be(static_cast<uint16_t>(v), 2); }
  NetworkBytes& i32(int32_t v) { return be(static_cast<uint32_t>(v), 4); }
  NetworkBytes& i64(int64_t v) { return be(static_cast<uint64_t>(v), 8); }
  // One COPY BINARY field: its length word and bytes.
  NetworkBytes& field(std::string_view v) {
    i32(static_cast<int32_t>(v.size()));
    bytes.append(v);
    return *this;
  }
  NetworkBytes& null_field() { return i32(-1); }
};

std::string binary_or_die(const ColumnType& type, std::string_view bytes) {
  std::string out;
  const absl::Status status = encode_binary_value(type, bytes, out);
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

// numeric_send of the given fields and base-10000 digits.
std::string numeric_bytes(int16_t weight, uint16_t sign, uint16_t dscale,
                          std::vector<int16_t> digits) {
  NetworkBytes b;
  b.i16(static_cast<int16_t>(digits.size())).i16(weight).be(sign, 2).be(dscale, 2);
  for (int16_t d : digits) {
    b.i16(d);
  }
  return b.bytes;
}

TEST(ValueTest, BinaryScalarsEncodeLikeTheirText) {
  EXPECT_EQ(binary_or_die(scalar(TypeKind::kInt4), NetworkBytes().i32(-7).bytes),
            encode_or_die(scalar(TypeKind::kInt4), "-7"));
  EXPECT_EQ(binary_or_die(scalar(TypeKind::kInt8), NetworkBytes().i64(INT64_MIN).bytes),
            encode_or_die(scalar(TypeKind::kInt8), "-9223372036854775808"));
  EXPECT_EQ(binary_or_die(scalar(TypeKind::kOid), NetworkBytes().be(4294967295u, 4).bytes),
            encode_or_die(scalar(TypeKind::kOid), "4294967295"));
  // Every NaN is the one NaN; -0 stays -0.
  EXPECT_EQ(
      binary_or_die(scalar(TypeKind::kFloat8), NetworkBytes().be(0xfff0000000000001, 8).bytes),
      encode_or_die(scalar(TypeKind::kFloat8), "NaN"));
  EXPECT_EQ(binary_or_die(scalar(TypeKind::kFloat4), NetworkBytes().be(0xffc00001, 4).bytes),
            encode_or_die(scalar(TypeKind::kFloat4), "NaN"));
  EXPECT_EQ(
      binary_or_die(scalar(TypeKind::kFloat8), NetworkBytes().be(0x8000000000000000, 8).bytes),
      encode_or_die(scalar(TypeKind::kFloat8), "-0"));
  const ColumnType n = scalar(TypeKind::kNumeric);
  EXPECT_EQ(binary_or_die(n, numeric_bytes(0, 0x4000, 4, {123, 4500})),
            encode_or_die(n, "-123.4500"));
  EXPECT_EQ(binary_or_die(n, numeric_bytes(1, 0, 0, {1, 5000})), encode_or_die(n, "15000"));
  EXPECT_EQ(binary_or_die(n, numeric_bytes(-1, 0, 6, {10})), encode_or_die(n, "0.001000"));
  EXPECT_EQ(binary_or_die(n, numeric_bytes(0, 0x4000, 2, {})), encode_or_die(n, "0.00"));
  EXPECT_EQ(binary_or_die(n, numeric_bytes(0, 0xC000, 0, {})), encode_or_die(n, "NaN"));
  EXPECT_EQ(binary_or_die(n, numeric_bytes(0, 0xF000, 0, {})), encode_or_die(n, "-Infinity"));
  // Digits beyond dscale are cut off (numeric_recv), leading zero digits dropped.
  EXPECT_EQ(binary_or_die(n, numeric_bytes(1, 0, 1, {0, 1, 2345})), encode_or_die(n, "1.2"));
  EXPECT_EQ(binary_or_die(n, numeric_bytes(-1, 0x4000, 2, {1})), encode_or_die(n, "0.00"));
  // The largest weight int16 allows is numeric's limit: 131072 digits before the point.
  EXPECT_EQ(binary_or_die(n, numeric_bytes(32767, 0, 0, {1000})),
            encode_or_die(n, "1" + std::string(131071, '0')));
  EXPECT_EQ(binary_or_die(scalar(TypeKind::kDate), NetworkBytes().i32(-1).bytes),
            encode_or_die(scalar(TypeKind::kDate), "1999-12-31"));
  EXPECT_EQ(binary_or_die(scalar(TypeKind::kTimeTz), NetworkBytes().i64(0).i32(-19800).bytes),
            encode_or_die(scalar(TypeKind::kTimeTz), "00:00:00+05:30"));
  EXPECT_EQ(
      binary_or_die(scalar(TypeKind::kInterval), NetworkBytes().i64(-1).i32(3).i32(-14).bytes),
      encode_or_die(scalar(TypeKind::kInterval), "-1 years -2 mons +3 days -00:00:00.000001"));
  EXPECT_EQ(binary_or_die(scalar(TypeKind::kJsonb), "\x01{}"),
            encode_or_die(scalar(TypeKind::kJsonb), "{}"));
  EXPECT_EQ(binary_or_die(scalar(TypeKind::kBytea), std::string("\0\xff", 2)),
            encode_or_die(scalar(TypeKind::kBytea), "\\x00ff"));
  // [0:1] of int4 with a NULL; a zero-length dimension is the empty array.
  const std::string array = NetworkBytes()
                                .i32(1)
                                .i32(1)
                                .be(23, 4)
                                .i32(2)
                                .i32(0)
                                .null_field()
                                .field(NetworkBytes().i32(5).bytes)
                                .bytes;
  EXPECT_EQ(binary_or_die(array_of(TypeKind::kInt4), array),
            encode_or_die(array_of(TypeKind::kInt4), "[0:1]={NULL,5}"));
  EXPECT_EQ(binary_or_die(array_of(TypeKind::kInt4),
                          NetworkBytes().i32(2).i32(0).be(23, 4).i32(3).i32(1).i32(0).i32(1).bytes),
            encode_or_die(array_of(TypeKind::kInt4), "{}"));
}

TEST(ValueTest, DamagedBinaryValuesAreErrors) {
  struct Case {
    ColumnType type;
    std::string bytes;
    std::string_view why;  // part of the message
  };
  const std::string int4_array_header = NetworkBytes().i32(1).i32(0).be(23, 4).bytes;
  const std::vector<Case> cases = {
      {scalar(TypeKind::kInt4), "\x01\x02\x03", "3 bytes, expected 4"},
      {scalar(TypeKind::kInt8), std::string(9, '\0'), "9 bytes, expected 8"},
      {scalar(TypeKind::kBool), "\x02", "not a boolean"},
      {scalar(TypeKind::kUuid), std::string(15, 'u'), "15 bytes, expected 16"},
      {scalar(TypeKind::kJsonb), "\x02{}", "jsonb version"},
      {scalar(TypeKind::kJsonb), "", "no version byte"},
      {scalar(TypeKind::kDate), NetworkBytes().i32(-2451546).bytes, "date out of range"},
      {scalar(TypeKind::kDate), NetworkBytes().i32(2147483494 - 2451545).bytes,
       "date out of range"},
      {scalar(TypeKind::kTime), NetworkBytes().i64(86400000001).bytes, "time out of range"},
      {scalar(TypeKind::kTimeTz), NetworkBytes().i64(0).i32(57600).bytes, "displacement"},
      {scalar(TypeKind::kTimestamp), NetworkBytes().i64(9223371331200000000).bytes,
       "timestamp out of range"},
      {scalar(TypeKind::kTimestampTz), NetworkBytes().i64(-211813488000000001).bytes,
       "timestamp out of range"},
      {scalar(TypeKind::kNumeric), std::string("\x00\x01\x00", 3), "truncated numeric"},
      {scalar(TypeKind::kNumeric), numeric_bytes(0, 0, 0, {1}).substr(0, 9), "1 digits"},
      {scalar(TypeKind::kNumeric), numeric_bytes(0, 0, 0, {10000}), "digit out of range"},
      {scalar(TypeKind::kNumeric), numeric_bytes(0, 0, 0, {-1}), "digit out of range"},
      {scalar(TypeKind::kNumeric), numeric_bytes(0, 0x8000, 0, {1}), "numeric sign"},
      {scalar(TypeKind::kNumeric), numeric_bytes(0, 0, 16384, {1}), "scale out of range"},
      {array_of(TypeKind::kInt4), int4_array_header.substr(0, 11), "truncated array header"},
      {array_of(TypeKind::kInt4), NetworkBytes().i32(7).i32(0).be(23, 4).bytes, "7 dimensions"},
      {array_of(TypeKind::kInt4), NetworkBytes().i32(-1).i32(0).be(23, 4).bytes, "dimensions"},
      {array_of(TypeKind::kInt4), NetworkBytes().i32(0).i32(2).be(23, 4).bytes, "flags"},
      {array_of(TypeKind::kInt4), NetworkBytes().i32(0).i32(0).be(20, 4).bytes, "type OID 20"},
      {array_of(TypeKind::kText), NetworkBytes().i32(0).i32(0).be(18, 4).bytes, "type OID 18"},
      {array_of(TypeKind::kInt4), int4_array_header, "truncated array dimensions"},
      {array_of(TypeKind::kInt4), NetworkBytes(int4_array_header).i32(-1).i32(1).bytes,
       "negative array dimension"},
      {array_of(TypeKind::kInt4), NetworkBytes(int4_array_header).i32(2).i32(INT32_MAX).bytes,
       "upper bound"},
      {array_of(TypeKind::kInt4),
       NetworkBytes()
           .i32(3)
           .i32(0)
           .be(23, 4)
           .i32(1024)
           .i32(1)
           .i32(1024)
           .i32(1)
           .i32(1024)
           .i32(1)
           .bytes,
       "too many array elements"},
      {array_of(TypeKind::kInt4), NetworkBytes(int4_array_header).i32(2).i32(1).null_field().bytes,
       "truncated array: 1 of 2"},
      {array_of(TypeKind::kInt4),
       NetworkBytes(int4_array_header).i32(1).i32(1).null_field().u8(0).bytes,
       "1 bytes after the last array element"},
      {array_of(TypeKind::kInt4), NetworkBytes(int4_array_header).i32(1).i32(1).i32(-2).bytes,
       "bad length -2"},
      {array_of(TypeKind::kInt4), NetworkBytes(int4_array_header).i32(1).i32(1).i32(5).i32(0).bytes,
       "bad length 5"},
      {array_of(TypeKind::kInt4), NetworkBytes(int4_array_header).i32(1).i32(1).field("ab").bytes,
       "2 bytes, expected 4"},
  };
  for (const Case& c : cases) {
    std::string out = "keep";
    const absl::Status status = encode_binary_value(c.type, c.bytes, out);
    EXPECT_FALSE(status.ok()) << c.why;
    EXPECT_NE(std::string(status.message()).find(c.why), std::string::npos) << status;
    EXPECT_EQ(out, "keep") << c.why;
  }
}

TEST(ValueTest, BinaryDecodableIsBuiltinsButCharEnumsAndDomains) {
  auto column = [](uint32_t oid) {
    Column c;
    c.type_oid = oid;
    c.type = builtin_column_type(oid);
    return c;
  };
  for (uint32_t oid :
       {16u,   17u,   19u,   20u,   21u,   23u,   25u,   26u,   114u,  700u,  701u,
        1042u, 1043u, 1082u, 1083u, 1114u, 1184u, 1186u, 1266u, 1700u, 2950u, 3802u,
        199u,  1000u, 1001u, 1003u, 1005u, 1007u, 1009u, 1014u, 1015u, 1016u, 1021u,
        1022u, 1028u, 1115u, 1182u, 1183u, 1185u, 1187u, 1231u, 1270u, 2951u, 3807u}) {
    EXPECT_TRUE(binary_decodable(column(oid))) << oid;
  }
  for (uint32_t oid : {18u, 1002u, 705u, 869u, 16384u, 0u}) {
    EXPECT_FALSE(binary_decodable(column(oid))) << oid;
  }
  // A column whose type is resolved otherwise (a delimiter not ',') is not decodable.
  Column odd = column(1007);
  odd.type.delimiter = ';';
  EXPECT_FALSE(binary_decodable(odd));
}

TEST(ValueTest, DamagedBinaryTuplesAreErrorsNamingTheColumn) {
  const RelationDesc desc = mixed_desc();
  RowEncoder encoder(desc);
  const std::string text_line =
      "7\t-3\t\\N\t12345.67\t0.25\thello\t2024-05-06 07:08:09.5+00\t2024-05-06\tt\t{a,NULL}";
  NetworkBytes tuple;
  tuple.i16(10)
      .field(NetworkBytes().i64(7).bytes)
      .field(NetworkBytes().i16(-3).bytes)
      .null_field()
      .field(numeric_bytes(1, 0, 2, {1, 2345, 6700}))
      .field(NetworkBytes().be(0x3fd0000000000000, 8).bytes)
      .field("hello")
      .field(NetworkBytes().i64(768294489500000).bytes)
      .field(NetworkBytes().i32(8892).bytes);
  const size_t flag_at = tuple.bytes.size() + 4;
  tuple.field("\x01").field(
      NetworkBytes().i32(1).i32(1).be(25, 4).i32(2).i32(1).field("a").null_field().bytes);
  std::string from_text;
  ASSERT_TRUE(encoder.encode_copy_line(text_line, from_text).ok());
  std::string from_binary = "prefix";
  const absl::Status ok = encoder.encode_copy_binary_tuple(tuple.bytes, from_binary);
  ASSERT_TRUE(ok.ok()) << ok;
  EXPECT_EQ(from_binary, "prefix" + from_text);

  auto expect_error = [&](std::string_view bytes, std::string_view needle) {
    std::string out = "prefix";
    const absl::Status status = encoder.encode_copy_binary_tuple(bytes, out);
    EXPECT_FALSE(status.ok()) << needle;
    EXPECT_NE(std::string(status.message()).find(needle), std::string::npos) << status;
    EXPECT_EQ(out, "prefix") << "out is unchanged on error: " << needle;
  };
  // Every truncation is an error; one in a field names that field's column.
  for (size_t n = 0; n < tuple.bytes.size(); ++n) {
    expect_error(std::string_view(tuple.bytes).substr(0, n),
                 n < 2 ? "no field count" : "public.mixed");
  }
  expect_error(std::string_view(tuple.bytes).substr(0, 2 + 4 + 8 + 2), "column \"small\"");
  expect_error(tuple.bytes + '\0', "1 bytes after the last field");
  expect_error(NetworkBytes().i16(9).bytes, "has 9 fields, expected 10");
  expect_error(NetworkBytes().i16(-1).bytes, "has -1 fields");
  std::string bad_length = tuple.bytes;
  bad_length.replace(2 + 4 + 8, 4, NetworkBytes().i32(-2).bytes);
  expect_error(bad_length, "column \"small\" (int2): bad field length -2");
  std::string long_field = tuple.bytes;
  long_field.replace(2 + 4 + 8, 4, NetworkBytes().i32(3).bytes);  // int2 of 3 bytes
  expect_error(long_field, "column \"small\" (int2): invalid binary value");
  std::string huge_field = tuple.bytes;
  huge_field.replace(2, 4, NetworkBytes().i32(INT32_MAX).bytes);
  expect_error(huge_field, "column \"id\" (int8): truncated COPY BINARY tuple");
  std::string bad_bool = tuple.bytes;
  bad_bool[flag_at] = '\x07';
  expect_error(bad_bool, "column \"flag\" (bool): invalid binary value \"\\x07\"");
  std::string bad_element = tuple.bytes;
  // The array's element OID: 8 bytes into its 29 (header 12, one dimension 8, "a" 5, NULL 4).
  bad_element.replace(bad_element.size() - 29 + 8, 4, NetworkBytes().be(23, 4).bytes);
  expect_error(bad_element, "column \"tags\" (text[])");
}

TEST(ValueTest, CopyTextLinesUnescape) {
  std::string scratch;
  std::vector<TextField> fields;
  ASSERT_TRUE(parse_copy_text_line("a\t\\N\tb\\tc\\\\d\\n\t\t\\x41\\101\\q", scratch, fields).ok());
  ASSERT_EQ(fields.size(), 5u);
  EXPECT_EQ(fields[0].text, "a");
  EXPECT_TRUE(fields[1].is_null);
  EXPECT_EQ(fields[2].text, "b\tc\\d\n");
  EXPECT_EQ(fields[3].text, "");
  EXPECT_FALSE(fields[3].is_null);
  EXPECT_EQ(fields[4].text, "AAq");
  EXPECT_FALSE(parse_copy_text_line("a\\", scratch, fields).ok());
}

TEST(ValueTest, PrintRowEscapesLikeCopy) {
  RelationDesc desc;
  desc.schema = "s";
  desc.table = "t";
  for (const auto& [name, oid] : std::vector<std::pair<std::string, uint32_t>>{
           {"t", 25}, {"b", 17}, {"a", 1009}, {"j", 114}}) {
    desc.columns.push_back(Column{name, oid, -1, true, builtin_column_type(oid), ""});
  }
  const std::string line = "tab\\there\\\\\t\\\\x00ff\t{\"a\\\\\\\\b\"}\t{\"k\":\\n1}";
  RowEncoder encoder(desc);
  std::string encoded;
  ASSERT_TRUE(encoder.encode_copy_line(line, encoded).ok());
  std::string printed;
  ASSERT_TRUE(print_row(desc, encoded, printed).ok());
  EXPECT_EQ(printed, line);
  std::vector<EncodedValue> values;
  ASSERT_TRUE(split_row(desc, encoded, values).ok());
  ASSERT_EQ(values.size(), 4u);
  EXPECT_EQ(print_or_die(desc.columns[1].type, values[1].bytes), "\\x00ff");
}

TEST(ValueTest, DamagedRowsAreErrorsNeverCrashes) {
  const RelationDesc desc = mixed_desc();
  RowEncoder encoder(desc);
  std::string row;
  ASSERT_TRUE(encoder
                  .encode_copy_line("7\t-3\t42\t12345.67\t0.25\thello\t2024-05-06 07:08:09.5+00\t"
                                    "2024-05-06\tt\t{a,\"b c\",NULL}",
                                    row)
                  .ok());
  std::string out;
  ASSERT_TRUE(print_row(desc, row, out).ok());
  for (size_t n = 0; n < row.size(); ++n) {
    std::string printed = "keep";
    EXPECT_FALSE(print_row(desc, std::string_view(row).substr(0, n), printed).ok()) << n;
    EXPECT_EQ(printed, "keep");
  }
  EXPECT_FALSE(print_row(desc, row + '\0', out).ok());
  std::mt19937 rng(42);
  int errors = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string damaged = row;
    damaged[rng() % damaged.size()] = static_cast<char>(rng());
    std::string printed;
    errors += print_row(desc, damaged, printed).ok() ? 0 : 1;
    std::vector<EncodedValue> values;
    (void)split_row(desc, damaged, values);
  }
  EXPECT_GT(errors, 0);
}

TEST(ValueTest, RelationDescRoundTripsAndRejectsDamage) {
  RelationDesc desc = mixed_desc();
  desc.columns[3].type_name = "numeric(10,2)";
  desc.columns.push_back(
      Column{"boxes", 1020, -1, true, ColumnType{TypeKind::kText, true, ';'}, "box[]"});
  const std::string bytes = desc.encode();
  auto decoded = RelationDesc::decode(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, desc);
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto damaged = RelationDesc::decode(std::string_view(bytes).substr(0, n));
    EXPECT_FALSE(damaged.ok()) << n;
  }
  auto trailing = RelationDesc::decode(bytes + "x");
  ASSERT_FALSE(trailing.ok());
  EXPECT_NE(trailing.status().message().find("trailing"), std::string::npos);
  std::string bad_version = bytes;
  bad_version[0] = 9;
  auto version = RelationDesc::decode(bad_version);
  ASSERT_FALSE(version.ok());
  EXPECT_NE(version.status().message().find("version 9"), std::string::npos);
  std::string bad_kind = bytes;
  // The first column's kind byte follows name "id", oid 20, typmod -1 and the flags.
  const size_t kind_at = bytes.find(std::string("\x02id\x14\x01", 5)) + 6;
  ASSERT_EQ(bad_kind[kind_at], static_cast<char>(TypeKind::kInt8));
  bad_kind[kind_at] = 99;
  auto kind = RelationDesc::decode(bad_kind);
  ASSERT_FALSE(kind.ok());
  EXPECT_NE(kind.status().message().find("column 1 (\"id\"): unknown type kind 99"),
            std::string::npos)
      << kind.status();
  EXPECT_EQ(desc.describe().substr(0, 34), "id bigint not null\nsmall smallint\n");
}

TEST(ValueTest, CompatibleWithNamesTheColumn) {
  const RelationDesc old_desc = mixed_desc();
  std::string why;
  EXPECT_TRUE(old_desc.compatible_with(old_desc, &why));
  RelationDesc renamed = old_desc;
  renamed.columns[2].name = "m";
  EXPECT_FALSE(old_desc.compatible_with(renamed, &why));
  EXPECT_NE(why.find("\"n\" is now \"m\""), std::string::npos) << why;
  RelationDesc retyped = old_desc;
  retyped.columns[2].type_oid = 20;
  EXPECT_FALSE(old_desc.compatible_with(retyped, &why));
  EXPECT_NE(why.find("column \"n\" changed type"), std::string::npos) << why;
  RelationDesc typmod = old_desc;
  typmod.columns[3].type_modifier = 655367;
  EXPECT_FALSE(old_desc.compatible_with(typmod, &why));
  EXPECT_NE(why.find("\"price\""), std::string::npos) << why;
  RelationDesc dropped = old_desc;
  dropped.columns.pop_back();
  EXPECT_FALSE(old_desc.compatible_with(dropped, &why));
  EXPECT_NE(why.find("\"tags\" is gone"), std::string::npos) << why;
  RelationDesc added = old_desc;
  added.columns.push_back(Column{"extra", 25, -1, true, {}, ""});
  EXPECT_FALSE(old_desc.compatible_with(added, &why));
  EXPECT_NE(why.find("\"extra\" was added"), std::string::npos) << why;
  RelationDesc nullability = old_desc;
  nullability.columns[1].nullable = false;
  EXPECT_TRUE(old_desc.compatible_with(nullability, &why));
}

// Prints the encoder's rate for a 10-column mixed row (no timing assertion: machines differ).
TEST(ValueTest, RowEncoderThroughput) {
  const RelationDesc desc = mixed_desc();
  RowEncoder encoder(desc);
  const std::string line =
      "123456\t-12\t987654\t12345.67\t0.123456789\tsome name here\t2024-05-06 07:08:09.123456+00\t"
      "2024-05-06\tt\t{alpha,beta,\"gamma delta\"}";
  std::string out;
  const int rows = 1'000'000;
  out.reserve(size_t{64} * 1024);
  const auto start = std::chrono::steady_clock::now();
  size_t bytes = 0;
  for (int i = 0; i < rows; ++i) {
    if (out.size() > size_t{60} * 1024) {
      bytes += out.size();
      out.clear();
    }
    ASSERT_TRUE(encoder.encode_copy_line(line, out).ok());
  }
  bytes += out.size();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("RowEncoder: %.0f rows/s (%zu bytes/row encoded, %zu text)\n", rows / seconds,
              bytes / rows, line.size());
  std::string printed;
  const auto print_start = std::chrono::steady_clock::now();
  out.clear();
  ASSERT_TRUE(encoder.encode_copy_line(line, out).ok());
  for (int i = 0; i < rows; ++i) {
    printed.clear();
    ASSERT_TRUE(print_row(desc, out, printed).ok());
  }
  const double print_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - print_start).count();
  std::printf("print_row: %.0f rows/s\n", rows / print_seconds);
  EXPECT_EQ(printed, line);
}

TEST(ValueTest, BinaryTupleThroughput) {
  const RelationDesc desc = mixed_desc();
  RowEncoder encoder(desc);
  // The row RowEncoderThroughput encodes from text.
  const std::string line =
      "123456\t-12\t987654\t12345.67\t0.123456789\tsome name here\t2024-05-06 07:08:09.123456+00\t"
      "2024-05-06\tt\t{alpha,beta,\"gamma delta\"}";
  NetworkBytes tuple;
  tuple.i16(10)
      .field(NetworkBytes().i64(123456).bytes)
      .field(NetworkBytes().i16(-12).bytes)
      .field(NetworkBytes().i32(987654).bytes)
      .field(numeric_bytes(1, 0, 2, {1, 2345, 6700}))
      .field(NetworkBytes().be(std::bit_cast<uint64_t>(0.123456789), 8).bytes)
      .field("some name here")
      .field(NetworkBytes().i64(768294489123456).bytes)
      .field(NetworkBytes().i32(8892).bytes)
      .field("\x01")
      .field(NetworkBytes()
                 .i32(1)
                 .i32(0)
                 .be(25, 4)
                 .i32(3)
                 .i32(1)
                 .field("alpha")
                 .field("beta")
                 .field("gamma delta")
                 .bytes);
  std::string from_text;
  ASSERT_TRUE(encoder.encode_copy_line(line, from_text).ok());
  std::string out;
  ASSERT_TRUE(encoder.encode_copy_binary_tuple(tuple.bytes, out).ok());
  ASSERT_EQ(out, from_text);
  const int rows = 1'000'000;
  out.clear();
  out.reserve(size_t{64} * 1024);
  const char* buffer = out.data();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < rows; ++i) {
    if (out.size() > size_t{60} * 1024) {
      out.clear();
    }
    ASSERT_TRUE(encoder.encode_copy_binary_tuple(tuple.bytes, out).ok());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(out.data(), buffer) << "the output buffer was reallocated";
  std::printf("RowEncoder binary: %.0f rows/s (%zu bytes/tuple)\n", rows / seconds,
              tuple.bytes.size());
}

// ---------------------------------------------------------------------------------------------
// Against PostgreSQL.

std::string postgres_url() { return weir::testing::postgres_test_url(); }

struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using Conn = std::unique_ptr<PGconn, ConnDeleter>;

void exec(PGconn* conn, const std::string& sql) {
  PGresult* r = PQexec(conn, sql.c_str());
  const ExecStatusType status = PQresultStatus(r);
  EXPECT_TRUE(status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK)
      << sql << ": " << PQresultErrorMessage(r);
  PQclear(r);
}

// A connection with the session settings print_row reproduces (those connection.cc sets), in a
// fresh schema.
class PostgresValueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string url = postgres_url();
    ASSERT_FALSE(url.empty());
    conn_.reset(PQconnectdb(url.c_str()));
    ASSERT_EQ(PQstatus(conn_.get()), CONNECTION_OK) << PQerrorMessage(conn_.get());
    schema_ = "weir_value_" + std::to_string(std::random_device{}() % 1000000000);
    exec(conn_.get(),
         "SET DateStyle = 'ISO, MDY'; SET IntervalStyle = 'postgres'; SET TimeZone = 'UTC'; "
         "SET extra_float_digits = 1; SET bytea_output = 'hex'; SET client_encoding = 'UTF8'; "
         "SET client_min_messages = 'warning'");
    exec(conn_.get(), "CREATE SCHEMA " + schema_ + "; SET search_path = " + schema_);
  }
  void TearDown() override {
    if (conn_ != nullptr && PQstatus(conn_.get()) == CONNECTION_OK) {
      exec(conn_.get(), "DROP SCHEMA " + schema_ + " CASCADE");
    }
  }

  // COPY's lines of `table`, without their '\n'.
  std::vector<std::string> copy_lines(const std::string& table) {
    std::vector<std::string> lines;
    PGresult* r = PQexec(conn_.get(), ("COPY " + table + " TO STDOUT").c_str());
    EXPECT_EQ(PQresultStatus(r), PGRES_COPY_OUT) << PQresultErrorMessage(r);
    PQclear(r);
    char* buf = nullptr;
    int n;
    while ((n = PQgetCopyData(conn_.get(), &buf, 0)) > 0) {
      std::string line(buf, static_cast<size_t>(n));
      PQfreemem(buf);
      EXPECT_EQ(line.back(), '\n');
      line.pop_back();
      lines.push_back(std::move(line));
    }
    r = PQgetResult(conn_.get());
    EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQresultErrorMessage(r);
    PQclear(r);
    while ((r = PQgetResult(conn_.get())) != nullptr) {
      PQclear(r);
    }
    return lines;
  }

  // Loads `table`'s description and round-trips every COPY line through the encoding:
  // encode, print, compare with PostgreSQL's line; the print re-encodes to the same bytes.
  // Returns the number of rows.
  size_t round_trip_table(const std::string& table) {
    auto desc = load_relation_desc(conn_.get(), table);
    EXPECT_TRUE(desc.ok()) << desc.status();
    if (!desc.ok()) {
      return 0;
    }
    RowEncoder encoder(*desc);
    std::string encoded;
    std::string printed;
    std::string again;
    const std::vector<std::string> lines = copy_lines(table);
    for (const std::string& line : lines) {
      encoded.clear();
      printed.clear();
      again.clear();
      const absl::Status status = encoder.encode_copy_line(line, encoded);
      EXPECT_TRUE(status.ok()) << status;
      if (!status.ok()) {
        continue;
      }
      const absl::Status print_status = print_row(*desc, encoded, printed);
      EXPECT_TRUE(print_status.ok()) << print_status;
      EXPECT_EQ(printed, line) << "table " << table;
      EXPECT_TRUE(encoder.encode_copy_line(printed, again).ok());
      EXPECT_EQ(again, encoded) << "not deterministic: " << line;
    }
    return lines.size();
  }

  // A table (id, v TYPE) with one row per SQL expression and a NULL row; round-tripped.
  void round_trip_values(const std::string& type, const std::vector<std::string>& values) {
    const std::string table = "t" + std::to_string(++tables_);
    exec(conn_.get(), "CREATE TABLE " + table + " (id int, v " + type + ")");
    std::string insert = "INSERT INTO " + table + " VALUES (0, NULL)";
    for (size_t i = 0; i < values.size(); ++i) {
      insert += ", (" + std::to_string(i + 1) + ", " + values[i] + ")";
    }
    exec(conn_.get(), insert);
    EXPECT_EQ(round_trip_table(table), values.size() + 1) << type;
  }

  Conn conn_;
  std::string schema_;
  int tables_ = 0;
};

TEST_F(PostgresValueTest, PostgresEveryKindRoundTripsThroughCopy) {
  exec(conn_.get(),
       "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy happy', 'NULL'); "
       "CREATE DOMAIN posint AS int CHECK (VALUE > 0); "
       "CREATE DOMAIN shorttext AS text; CREATE DOMAIN posint2 AS posint; "
       "CREATE DOMAIN intarr AS int[]");
  round_trip_values("bool", {"true", "false"});
  round_trip_values("int2", {"-32768", "32767", "0"});
  round_trip_values("int4", {"-2147483648", "2147483647", "-1"});
  round_trip_values("int8", {"-9223372036854775808", "9223372036854775807", "42"});
  round_trip_values("oid", {"0", "4294967295"});
  round_trip_values("float4", {"'-0'", "'NaN'", "'Infinity'", "'-Infinity'", "'1e-40'", "'1e-45'",
                               "'3.4028235e38'", "'1.17549435e-38'", "'0.1'", "'123456'",
                               "'1234567'", "'0.0001'", "'0.00001'", "'1.5'"});
  round_trip_values("float8",
                    {"'-0'", "'NaN'", "'Infinity'", "'-Infinity'", "'1e-310'", "'4.9e-324'",
                     "'1.7976931348623157e308'", "'2.2250738585072014e-308'", "'0.1'", "'1e15'",
                     "'123456789012345'", "'1e-5'", "'0.0001'", "'100'", "'1e22'", "'1e100'",
                     "'-1.5e-7'", "'9007199254740993'", "'0.30000000000000004'"});
  const std::string digits1000 = std::string(1000, '7');
  round_trip_values("numeric", {"'0'", "'-0.00'", "'NaN'", "'Infinity'", "'-Infinity'", "'1e-3'",
                                "'1.5e3'", "'-123.4500'", "'0.000001'",
                                "'" + digits1000 + "." + digits1000 + "'", "'-" + digits1000 + "'",
                                "'1e-1000'", "'1e1000'", "'0." + std::string(16382, '0') + "1'"});
  round_trip_values("numeric(10,3)", {"1.5", "-2", "9999999.999"});
  round_trip_values("text", {"E'a\\tb'", "E'line\\nbreak\\r\\n'", "E'back\\\\slash'",
                             "'h\u00e9llo \u2603 \U0001F600'", "''", "' spaces '", "E'\\\\N'",
                             "'NULL'", "E'\\x01\\x02\\x1f\\x7f'", "E'\\b\\f\\v'"});
  round_trip_values("char(5)", {"'ab'", "''", "'abcde'"});
  round_trip_values("varchar(10)", {"'hello'", "''"});
  round_trip_values("name", {"'nm'"});
  round_trip_values("\"char\"", {"'x'"});
  round_trip_values("bytea", {"(SELECT decode(string_agg(lpad(to_hex(i), 2, '0'), ''), 'hex') "
                              "FROM generate_series(0, 255) i)",
                              "''::bytea", "'\\x00'::bytea"});
  round_trip_values("date", {"'2000-01-01'", "'1999-12-31'", "'0001-01-01 BC'", "'4713-11-24 BC'",
                             "'5874897-12-31'", "'infinity'", "'-infinity'", "'2024-02-29'",
                             "'0044-03-15 BC'", "'12345-06-07'"});
  round_trip_values("time", {"'00:00:00'", "'24:00:00'", "'12:34:56.789012'", "'23:59:59.999999'",
                             "'01:02:03.1'"});
  round_trip_values("time(2)", {"'12:34:56.789'"});
  round_trip_values("timetz",
                    {"'00:00:00+00'", "'12:00:00.5+05:30'", "'23:59:59-15:59:59'", "'24:00:00+02'",
                     "'10:00:00-08'", "'10:00:00+15:59:59'", "'10:00:00+00:00:30'"});
  round_trip_values("timestamp", {"'2000-01-01 00:00:00'", "'1999-12-31 23:59:59.999999'",
                                  "'0001-01-01 00:00:00 BC'", "'4713-11-24 00:00:00 BC'",
                                  "'294276-12-31 23:59:59.999999'", "'infinity'", "'-infinity'",
                                  "'2024-02-29 12:34:56.5'", "'1969-07-20 20:17:40'"});
  round_trip_values("timestamptz", {"'2000-01-01 00:00:00+02'", "'1999-12-31 23:59:59.999999-08'",
                                    "'0001-01-01 00:00:00+00 BC'", "'4713-11-24 00:00:00+00 BC'",
                                    "'294276-12-31 23:59:59.999999+00'", "'infinity'",
                                    "'-infinity'", "'1900-01-01 00:00:00 Europe/Amsterdam'"});
  round_trip_values(
      "interval", {"'0'", "'1 year'", "'-1 years -2 mons +3 days -04:05:06.5'", "'1 day -00:00:01'",
                   "'100000 hours'", "'-1 day'", "'1 mon 2 days 03:04:05.000006'",
                   "'-178000000 years'", "'178000000 years'", "'2147483647 days'",
                   "'-2147483648 days'", "'2562047788:00:54.775807'", "'-2562047788:00:54.775807'",
                   "'-1 mons +1 day'", "'1 year -1 mons'", "'-0.000001 seconds'"});
  round_trip_values(
      "uuid", {"'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "'00000000-0000-0000-0000-000000000000'",
               "'{A0EEBC99-9C0B4EF8-BB6D6BB9-BD380A11}'"});
  round_trip_values("json", {"'{\"a\" :  1,   \"b\":[1, 2]}'",
                             "E'{\\n\\t\"a\": \"b\\\\\\\\c\"\\n}'", "'\"\\u00e9\"'", "'null'"});
  round_trip_values("jsonb", {"'{\"b\": 2, \"a\": [1, \"x\", null]}'", "'\"\\u00e9\"'",
                              "E'{\"t\": \"a\\\\tb\"}'", "'1.50'"});
  round_trip_values("mood", {"'sad'", "'happy happy'", "'NULL'"});
  round_trip_values("posint", {"1", "2147483647"});
  round_trip_values("posint2", {"7"});
  round_trip_values("shorttext", {"E'x\\ty'"});
  round_trip_values("int[]",
                    {"'{1,2,3}'", "'{{1,2},{3,4}}'", "'{1,NULL,3}'", "'{}'", "'[2:3]={1,2}'",
                     "'[0:1][-1:0]={{1,2},{3,4}}'", "'{NULL}'", "'{{{1},{2}},{{3},{4}}}'"});
  round_trip_values("text[]",
                    {"'{\"a b\",\"c,d\",\"e\\\"f\",\"g\\\\h\",NULL,\"NULL\",\"\",x}'",
                     "'{\"{braces}\"}'", "E'{\"tab\\there\",\"nl\\nhere\"}'", "'{null,Null}'"});
  round_trip_values("numeric[]", {"'{1.50,NaN,-Infinity,0.000}'"});
  round_trip_values("float8[]", {"'{NaN,-Infinity,1e-310,-0,1e+300}'"});
  round_trip_values("float4[]", {"'{1.5,-0,NaN}'"});
  round_trip_values("bool[]", {"'{t,f,NULL}'"});
  round_trip_values("int8[]", {"'{-9223372036854775808,9223372036854775807}'"});
  round_trip_values("int2[]", {"'{1,-1}'"});
  round_trip_values("oid[]", {"'{1,4294967295}'"});
  round_trip_values("timestamp[]",
                    {"'{\"2000-01-01 00:00:00\",infinity,\"0001-01-01 00:00:00 BC\"}'"});
  round_trip_values("timestamptz[]", {"'{\"2000-01-01 00:00:00.5+00\",-infinity}'"});
  round_trip_values("date[]", {"'{2000-01-01,\"0001-01-01 BC\",infinity}'"});
  round_trip_values("time[]", {"'{00:00:00,24:00:00}'"});
  round_trip_values("timetz[]", {"'{00:00:00+01,12:00:00-05:30}'"});
  round_trip_values("interval[]", {"'{\"1 day\",\"-1 years +2 mons\",00:00:00}'"});
  round_trip_values("uuid[]", {"'{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,NULL}'"});
  round_trip_values("bytea[]", {"'{\"\\\\x00ff\",\"\\\\x\"}'"});
  round_trip_values("json[]", {"'{\"{\\\"a\\\": 1}\",\"[1, 2]\"}'"});
  round_trip_values("jsonb[]", {"'{\"{\\\"a\\\": 1}\",null}'"});
  round_trip_values("char(3)[]", {"'{a,bc}'"});
  round_trip_values("varchar[]", {"'{\"\",\" x \"}'"});
  round_trip_values("mood[]", {"'{sad,\"happy happy\",\"NULL\",NULL}'"});
  round_trip_values("posint[]", {"'{1,2,NULL}'"});
  round_trip_values("intarr", {"'{1,2}'", "'[5:5]={9}'"});
  round_trip_values("intarr[]", {"ARRAY['{1,2}'::intarr, '{3}'::intarr]"});
  round_trip_values("box[]", {"'{(1,1),(0,0);(2,2),(1,1)}'"});
  round_trip_values("inet", {"'192.168.0.1/24'", "'::1'"});
  round_trip_values("point", {"'(1.5,2)'"});
  round_trip_values("int4range", {"'[1,5)'", "'empty'"});
  round_trip_values("tsvector", {"'a fat cat'"});
  round_trip_values("bit(4)", {"B'1010'"});
  round_trip_values("money", {"'12.34'"});
}

TEST_F(PostgresValueTest, PostgresCatalogResolvesDomainsEnumsAndArrays) {
  exec(conn_.get(),
       "CREATE TYPE mood AS ENUM ('sad', 'ok'); CREATE DOMAIN posint AS int; "
       "CREATE DOMAIN posint2 AS posint; CREATE DOMAIN intarr AS int[]; "
       "CREATE TABLE cat (a int NOT NULL, dropme text, b posint2, c mood[], d posint[], "
       "e intarr, f box[], g numeric(10,2), h inet, i varchar(20)[]); "
       "ALTER TABLE cat DROP COLUMN dropme");
  auto desc = load_relation_desc(conn_.get(), schema_ + ".cat");
  ASSERT_TRUE(desc.ok()) << desc.status();
  EXPECT_EQ(desc->schema, schema_);
  EXPECT_EQ(desc->table, "cat");
  ASSERT_EQ(desc->columns.size(), 9u);
  const auto& c = desc->columns;
  EXPECT_EQ(c[0].name, "a");
  EXPECT_FALSE(c[0].nullable);
  EXPECT_EQ(c[0].type, scalar(TypeKind::kInt4));
  EXPECT_EQ(c[1].name, "b");
  EXPECT_EQ(c[1].type, scalar(TypeKind::kInt4));
  EXPECT_EQ(c[2].type, array_of(TypeKind::kText));
  EXPECT_EQ(c[3].type, array_of(TypeKind::kInt4));
  EXPECT_EQ(c[4].type, array_of(TypeKind::kInt4));
  EXPECT_EQ(c[5].type, (ColumnType{TypeKind::kText, true, ';'}));
  EXPECT_EQ(c[6].type, scalar(TypeKind::kNumeric));
  EXPECT_EQ(c[6].type_name, "numeric(10,2)");
  EXPECT_EQ(c[7].type, scalar(TypeKind::kText));
  EXPECT_EQ(c[8].type, array_of(TypeKind::kText));
  EXPECT_EQ(desc->describe(),
            "a integer not null\nb posint2\nc mood[]\nd posint[]\ne intarr\nf box[]\n"
            "g numeric(10,2)\nh inet\ni character varying(20)[]\n");
  auto by_oid = load_relation_desc(conn_.get(), desc->table_oid);
  ASSERT_TRUE(by_oid.ok()) << by_oid.status();
  EXPECT_EQ(*by_oid, *desc);
  auto decoded = RelationDesc::decode(desc->encode());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, *desc);

  auto missing = load_relation_desc(conn_.get(), schema_ + ".nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos) << missing.status();
  auto no_oid = load_relation_desc(conn_.get(), uint32_t{4000000000u});
  EXPECT_TRUE(absl::IsNotFound(no_oid.status())) << no_oid.status();
  exec(conn_.get(), "CREATE VIEW v AS SELECT 1 AS x");
  auto view = load_relation_desc(conn_.get(), "v");
  ASSERT_FALSE(view.ok());
  EXPECT_NE(view.status().message().find(".v"), std::string::npos) << view.status();

  // After ALTER TABLE the new description is not compatible, naming the column.
  exec(conn_.get(), "ALTER TABLE cat ALTER COLUMN g TYPE numeric(12,2)");
  auto altered = load_relation_desc(conn_.get(), desc->table_oid);
  ASSERT_TRUE(altered.ok());
  std::string why;
  EXPECT_FALSE(desc->compatible_with(*altered, &why));
  EXPECT_NE(why.find("\"g\""), std::string::npos) << why;
}

TEST_F(PostgresValueTest, PostgresRandomValuesRoundTrip) {
  exec(conn_.get(),
       "SELECT setseed(0.25); "
       "CREATE TABLE r AS SELECT i, "
       "(random() - 0.5) * 10 ^ (random() * 600 - 300) AS f8, "
       "random() * 1e-310 AS f8_denormal, "
       "random()::float4 * 10 ^ (random() * 60 - 30)::float4 AS f4, "
       "round(((random() - 0.5) * 10 ^ (random() * 30))::numeric, (random() * 20)::int) AS n, "
       "((random() - 0.5) * 10 ^ (random() * 40 - 20))::numeric AS n2, "
       "timestamp '2000-01-01' + (random() - 0.5) * interval '2000000 days' AS ts, "
       "timestamptz '1970-01-01 00:00:00+00' + random() * interval '30000 days' AS tstz, "
       "date '2000-01-01' + ((random() - 0.5) * 3000000)::int AS d, "
       "make_interval(0, (random() * 100 - 50)::int, 0, (random() * 100 - 50)::int, 0, 0, "
       "(random() - 0.5) * 1e6) AS iv, "
       "(random() * 86400)::int * interval '1 second' + time '00:00' AS t, "
       "gen_random_uuid() AS u, "
       "ARRAY[random(), random() * 1e-300, -random() * 1e300] AS fa, "
       "(random() * 10 ^ (random() * 70 - 35))::float4 AS real4, "
       "(random() * 2 ^ (random() * 40 + 24))::float4 AS real4_big, "
       "(random() * 2 ^ (random() * 20 + 53))::float8 AS f8_big "
       "FROM generate_series(1, 5000) i");
  EXPECT_EQ(round_trip_table("r"), 5000u);
}

// ---------------------------------------------------------------------------------------------
// COPY BINARY against COPY text of the same rows.

class PostgresBinaryTest : public PostgresValueTest {
 protected:
  // The data of `COPY (query) TO STDOUT options`, every CopyData message concatenated.
  std::string copy_out(const std::string& query, const std::string& options) {
    std::string data;
    PGresult* r = PQexec(conn_.get(), ("COPY (" + query + ") TO STDOUT " + options).c_str());
    EXPECT_EQ(PQresultStatus(r), PGRES_COPY_OUT) << query << ": " << PQresultErrorMessage(r);
    PQclear(r);
    char* buf = nullptr;
    int n;
    while ((n = PQgetCopyData(conn_.get(), &buf, 0)) > 0) {
      data.append(buf, static_cast<size_t>(n));
      PQfreemem(buf);
    }
    r = PQgetResult(conn_.get());
    EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQresultErrorMessage(r);
    PQclear(r);
    while ((r = PQgetResult(conn_.get())) != nullptr) {
      PQclear(r);
    }
    return data;
  }

  // The tuples of a COPY BINARY stream: the 19-byte header ("PGCOPY\n\377\r\n\0", int32 flags,
  // int32 extension length) and its extension checked and skipped, each tuple delimited by
  // walking its field lengths, the trailer (field count -1) checked to end the stream.
  static std::vector<std::string_view> binary_tuples(std::string_view data) {
    std::vector<std::string_view> tuples;
    auto be = [&](size_t at, int size) {
      uint32_t v = 0;
      for (int i = 0; i < size; ++i) {
        v = (v << 8) | static_cast<uint8_t>(data[at + static_cast<size_t>(i)]);
      }
      return v;
    };
    static constexpr std::string_view kSignature("PGCOPY\n\377\r\n\0", 11);
    EXPECT_GE(data.size(), 19u + 2u);
    if (data.size() < 21 || data.substr(0, 11) != kSignature) {
      ADD_FAILURE() << "no COPY BINARY signature";
      return tuples;
    }
    EXPECT_EQ(be(11, 4) & 0xffff0000u, 0u) << "critical header flags";
    size_t at = 19 + be(15, 4);
    while (true) {
      if (at + 2 > data.size()) {
        ADD_FAILURE() << "COPY BINARY stream without a trailer";
        return tuples;
      }
      const auto count = static_cast<int16_t>(be(at, 2));
      if (count == -1) {
        EXPECT_EQ(at + 2, data.size()) << "bytes after the trailer";
        return tuples;
      }
      size_t end = at + 2;
      for (int16_t f = 0; f < count; ++f) {
        if (end + 4 > data.size()) {
          ADD_FAILURE() << "truncated tuple";
          return tuples;
        }
        const auto length = static_cast<int32_t>(be(end, 4));
        end += 4 + (length > 0 ? static_cast<size_t>(length) : 0);
      }
      if (end > data.size()) {
        ADD_FAILURE() << "truncated tuple";
        return tuples;
      }
      tuples.push_back(data.substr(at, end - at));
      at = end;
    }
  }

  // COPYs `table` (ordered by its first column) in text and in binary and checks that every row
  // encodes to the same bytes both ways. Every column must be binary_decodable. Returns the
  // number of rows.
  size_t compare_binary(const std::string& table) {
    auto desc = load_relation_desc(conn_.get(), table);
    EXPECT_TRUE(desc.ok()) << desc.status();
    if (!desc.ok()) {
      return 0;
    }
    for (const Column& c : desc->columns) {
      EXPECT_TRUE(binary_decodable(c)) << table << "." << c.name << " " << c.type_name;
    }
    const std::string query = "SELECT * FROM " + table + " ORDER BY 1";
    std::string text = copy_out(query, "");
    const std::string binary = copy_out(query, "(FORMAT binary)");
    const std::vector<std::string_view> tuples = binary_tuples(binary);
    RowEncoder encoder(*desc);
    std::string from_text;
    std::string from_binary;
    size_t rows = 0;
    std::string_view lines = text;
    while (!lines.empty()) {
      const size_t nl = lines.find('\n');
      EXPECT_NE(nl, std::string_view::npos);
      const std::string_view line = lines.substr(0, nl);
      lines.remove_prefix(nl == std::string_view::npos ? lines.size() : nl + 1);
      if (rows >= tuples.size()) {
        ADD_FAILURE() << "more text lines than binary tuples in " << table;
        break;
      }
      from_text.clear();
      from_binary.clear();
      const absl::Status text_status = encoder.encode_copy_line(line, from_text);
      EXPECT_TRUE(text_status.ok()) << text_status;
      const absl::Status binary_status =
          encoder.encode_copy_binary_tuple(tuples[rows], from_binary);
      EXPECT_TRUE(binary_status.ok()) << binary_status << "\n  text: " << line;
      EXPECT_EQ(from_binary, from_text) << table << " row " << rows << ": " << line;
      ++rows;
    }
    EXPECT_EQ(rows, tuples.size()) << table;
    return rows;
  }

  // A table (id, v TYPE) with a NULL row and one row per SQL expression, compared.
  void compare_values(const std::string& type, const std::vector<std::string>& values) {
    const std::string table = "b" + std::to_string(++tables_);
    exec(conn_.get(), "CREATE TABLE " + table + " (id int, v " + type + ")");
    std::string insert = "INSERT INTO " + table + " VALUES (0, NULL)";
    for (size_t i = 0; i < values.size(); ++i) {
      insert += ", (" + std::to_string(i + 1) + ", " + values[i] + ")";
    }
    exec(conn_.get(), insert);
    EXPECT_EQ(compare_binary(table), values.size() + 1) << type;
  }
};

TEST_F(PostgresBinaryTest, PostgresBinaryCopyEncodesLikeText) {
  compare_values("bool", {"true", "false"});
  compare_values("int2", {"-32768", "32767", "0"});
  compare_values("int4", {"-2147483648", "2147483647", "-1"});
  compare_values("int8", {"-9223372036854775808", "9223372036854775807", "42"});
  compare_values("oid", {"0", "4294967295"});
  compare_values("float4",
                 {"'-0'", "'0'", "'NaN'", "'Infinity'", "'-Infinity'", "'1e-40'", "'1e-45'",
                  "'3.4028235e38'", "'1.17549435e-38'", "'0.1'", "'1234567'", "'-1.5'"});
  compare_values("float8",
                 {"'-0'", "'0'", "'NaN'", "'Infinity'", "'-Infinity'", "'1e-310'", "'4.9e-324'",
                  "'1.7976931348623157e308'", "'2.2250738585072014e-308'", "'0.1'", "'1e22'",
                  "'9007199254740993'", "'0.30000000000000004'", "'-1.5e-7'"});
  const std::string digits1000 = std::string(1000, '7');
  compare_values("numeric", {"'0'",
                             "'-0.00'",
                             "'0.000000'",
                             "'NaN'",
                             "'Infinity'",
                             "'-Infinity'",
                             "'1e-3'",
                             "'1.5e3'",
                             "'-123.4500'",
                             "'0.000001'",
                             "'10000'",
                             "'100000000'",
                             "'0.0001'",
                             "'9999.9999'",
                             "'12345678.87654321'",
                             "'1.10000000000000000000'",
                             "'-0.00010000'",
                             "'1e-1000'",
                             "'1e1000'",
                             "'" + digits1000 + "." + digits1000 + "'",
                             "'-" + digits1000 + "'",
                             "'0." + std::string(16382, '0') + "1'",
                             "'1" + std::string(131071, '0') + "'",
                             "'9" + std::string(131070, '9') + "." + std::string(16383, '9') + "'",
                             "'-0." + std::string(16383, '0') + "'",
                             "1::numeric / 3",
                             "2::numeric ^ 1000",
                             "'123456789012345678901234567890.123456789012345678901234567890'"});
  compare_values("numeric(10,3)", {"1.5", "-2", "9999999.999", "0"});
  compare_values("numeric(1000,500)", {"1", "-1e-500", "'1e499'"});
  compare_values("text", {"E'a\\tb'", "E'line\\nbreak\\r\\n'", "E'back\\\\slash'",
                          "'h\u00e9llo \u2603 \U0001F600'", "''", "' spaces '", "E'\\\\N'",
                          "'NULL'", "E'\\x01\\x02\\x1f\\x7f'", "repeat('x', 100000)"});
  compare_values("char(5)", {"'ab'", "''", "'abcde'", "'\u00e9'"});
  compare_values("char", {"'a'", "' '"});
  compare_values("varchar(10)", {"'hello'", "''"});
  compare_values("varchar", {"'x\\y'"});
  compare_values("name", {"'nm'", "''", "repeat('n', 63)"});
  compare_values("bytea", {"(SELECT decode(string_agg(lpad(to_hex(i), 2, '0'), ''), 'hex') "
                           "FROM generate_series(0, 255) i)",
                           "''::bytea", "'\\x00'::bytea", "'\\x5c'::bytea"});
  compare_values("date", {"'2000-01-01'", "'1999-12-31'", "'0001-01-01 BC'", "'4713-11-24 BC'",
                          "'5874897-12-31'", "'infinity'", "'-infinity'", "'2024-02-29'",
                          "'0044-03-15 BC'", "'12345-06-07'"});
  compare_values("time", {"'00:00:00'", "'24:00:00'", "'12:34:56.789012'", "'23:59:59.999999'"});
  compare_values("time(2)", {"'12:34:56.789'"});
  compare_values("timetz", {"'00:00:00+00'", "'12:00:00.5+05:30'", "'23:59:59-15:59:59'",
                            "'24:00:00+02'", "'10:00:00+15:59:59'", "'10:00:00+00:00:30'"});
  compare_values("timestamp", {"'2000-01-01 00:00:00'", "'1999-12-31 23:59:59.999999'",
                               "'0001-01-01 00:00:00 BC'", "'4713-11-24 00:00:00 BC'",
                               "'294276-12-31 23:59:59.999999'", "'infinity'", "'-infinity'",
                               "'1969-07-20 20:17:40'"});
  compare_values("timestamptz",
                 {"'2000-01-01 00:00:00+02'", "'0001-01-01 00:00:00+00 BC'",
                  "'4713-11-24 00:00:00+00 BC'", "'294276-12-31 23:59:59.999999+00'", "'infinity'",
                  "'-infinity'", "'1900-01-01 00:00:00 Europe/Amsterdam'"});
  compare_values("interval",
                 {"'0'", "'1 year'", "'-1 years -2 mons +3 days -04:05:06.5'", "'1 day -00:00:01'",
                  "'-178000000 years'", "'2147483647 days'", "'-2147483648 days'",
                  "'2562047788:00:54.775807'", "'-2562047788:00:54.775807'", "'-0.000001 seconds'",
                  "'178956970 years 7 mons'", "'-178956970 years -8 mons'"});
  compare_values(
      "uuid", {"'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "'00000000-0000-0000-0000-000000000000'",
               "'ffffffff-ffff-ffff-ffff-ffffffffffff'"});
  compare_values("json", {"'{\"a\" :  1,   \"b\":[1, 2]}'", "E'{\\n\\t\"a\": \"b\\\\\\\\c\"\\n}'",
                          "'\"\\u00e9\"'", "'null'", "'\"\"'"});
  compare_values("jsonb", {"'{\"b\": 2, \"a\": [1, \"x\", null]}'", "'\"\\u00e9\"'",
                           "E'{\"t\": \"a\\\\tb\"}'", "'1.50'", "'{}'", "'[]'"});
  compare_values("int[]", {"'{1,2,3}'", "'{{1,2},{3,4}}'", "'{1,NULL,3}'", "'{}'", "'[2:3]={1,2}'",
                           "'[0:1][-1:0]={{1,2},{3,4}}'", "'{NULL}'", "'{{{1},{2}},{{3},{4}}}'",
                           "'[-2147483648:-2147483647]={1,2}'", "'[2147483646:2147483646]={7}'",
                           "'{{{{{{1}}}}}}'", "array_fill(7, ARRAY[2, 3], ARRAY[-5, 10])",
                           "'{{NULL,NULL},{NULL,1}}'",
                           "(SELECT array_agg(i) FROM generate_series(1, 10000) i)"});
  compare_values("text[]", {"'{\"a b\",\"c,d\",\"e\\\"f\",\"g\\\\h\",NULL,\"NULL\",\"\",x}'",
                            "'{\"{braces}\"}'", "E'{\"tab\\there\",\"nl\\nhere\"}'",
                            "'{null,Null}'", "'{}'", "'[3:4]={a,NULL}'", "'{{a,b},{c,NULL}}'"});
  compare_values("numeric[]",
                 {"'{1.50,NaN,-Infinity,0.000,NULL,-0.0001,1e-20}'", "'[0:0]={Infinity}'"});
  compare_values("float8[]", {"'{NaN,-Infinity,1e-310,-0,1e+300}'", "'{{1,2},{NULL,4}}'"});
  compare_values("float4[]", {"'{1.5,-0,NaN}'"});
  compare_values("bool[]", {"'{t,f,NULL}'"});
  compare_values("int8[]", {"'{-9223372036854775808,9223372036854775807}'"});
  compare_values("int2[]", {"'{1,-1}'"});
  compare_values("oid[]", {"'{1,4294967295}'"});
  compare_values("timestamp[]",
                 {"'{\"2000-01-01 00:00:00\",infinity,\"0001-01-01 00:00:00 BC\"}'"});
  compare_values("timestamptz[]", {"'{\"2000-01-01 00:00:00.5+00\",-infinity,NULL}'"});
  compare_values("date[]", {"'{2000-01-01,\"0001-01-01 BC\",infinity}'"});
  compare_values("time[]", {"'{00:00:00,24:00:00}'"});
  compare_values("timetz[]", {"'{00:00:00+01,12:00:00-05:30}'"});
  compare_values("interval[]", {"'{\"1 day\",\"-1 years +2 mons\",00:00:00}'"});
  compare_values("uuid[]", {"'{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,NULL}'"});
  compare_values("bytea[]", {"'{\"\\\\x00ff\",\"\\\\x\",NULL}'"});
  compare_values("json[]", {"'{\"{\\\"a\\\": 1}\",\"[1, 2]\",NULL}'"});
  compare_values("jsonb[]", {"'{\"{\\\"a\\\": 1}\",null}'"});
  compare_values("char(3)[]", {"'{a,bc,NULL}'"});
  compare_values("varchar[]", {"'{\"\",\" x \"}'"});
  compare_values("name[]", {"'{a,\"b c\"}'"});
}

TEST_F(PostgresBinaryTest, PostgresBinaryCopyOfWideAndRandomRows) {
  // More than eight columns (a null bitmap of two bytes), NULLs in every column in turn.
  exec(conn_.get(),
       "CREATE TABLE wide AS SELECT i, "
       "CASE WHEN i % 11 <> 1 THEN i % 2 = 0 END AS b, "
       "CASE WHEN i % 11 <> 2 THEN (i * 7)::int2 END AS s, "
       "CASE WHEN i % 11 <> 3 THEN i::numeric / 7 END AS n, "
       "CASE WHEN i % 11 <> 4 THEN 'row ' || i END AS t, "
       "CASE WHEN i % 11 <> 5 THEN timestamptz '2000-01-01 00:00:00+00' + i * interval '1 hour' "
       "END AS ts, "
       "CASE WHEN i % 11 <> 6 THEN ARRAY[i, NULL, -i] END AS a, "
       "CASE WHEN i % 11 <> 7 THEN decode(md5(i::text), 'hex') END AS by, "
       "CASE WHEN i % 11 <> 8 THEN i * interval '1 day 1 second' END AS iv, "
       "CASE WHEN i % 11 <> 9 THEN jsonb_build_object('i', i, 's', 'x' || i) END AS j, "
       "CASE WHEN i % 11 <> 10 THEN md5(i::text)::uuid END AS u "
       "FROM generate_series(1, 200) i");
  EXPECT_EQ(compare_binary("wide"), 200u);
  exec(conn_.get(),
       "SELECT setseed(0.5); "
       "CREATE TABLE r AS SELECT i, "
       "(random() - 0.5) * 10 ^ (random() * 600 - 300) AS f8, "
       "random() * 1e-310 AS f8_denormal, "
       "random()::float4 * 10 ^ (random() * 60 - 30)::float4 AS f4, "
       "round(((random() - 0.5) * 10 ^ (random() * 30))::numeric, (random() * 20)::int) AS n, "
       "((random() - 0.5) * 10 ^ (random() * 40 - 20))::numeric AS n2, "
       "round((random() * 10 ^ (random() * 60 - 30))::numeric, (random() * 40)::int) AS n3, "
       "timestamp '2000-01-01' + (random() - 0.5) * interval '2000000 days' AS ts, "
       "timestamptz '1970-01-01 00:00:00+00' + random() * interval '30000 days' AS tstz, "
       "date '2000-01-01' + ((random() - 0.5) * 3000000)::int AS d, "
       "make_interval(0, (random() * 100 - 50)::int, 0, (random() * 100 - 50)::int, 0, 0, "
       "(random() - 0.5) * 1e6) AS iv, "
       "(random() * 86400)::int * interval '1 second' + time '00:00' AS t, "
       "(time '00:00' + random() * interval '24 hours')::timetz AS ttz, "
       "gen_random_uuid() AS u, "
       "ARRAY[random(), random() * 1e-300, -random() * 1e300] AS fa, "
       "ARRAY[round(random()::numeric, 3), NULL, (random() * 1e6)::numeric(12,2)] AS na "
       "FROM generate_series(1, 3000) i");
  EXPECT_EQ(compare_binary("r"), 3000u);
}

TEST_F(PostgresBinaryTest, PostgresEnumsDomainsAndCharAreNotBinaryDecodable) {
  exec(conn_.get(),
       "CREATE TYPE mood AS ENUM ('sad', 'ok'); CREATE DOMAIN posint AS int; "
       "CREATE TABLE nb (a int, b mood, c posint, d \"char\", e mood[], f inet, g posint[], "
       "h box[], i text[], j varchar(3)[])");
  auto desc = load_relation_desc(conn_.get(), "nb");
  ASSERT_TRUE(desc.ok()) << desc.status();
  std::string decodable;
  for (const Column& c : desc->columns) {
    decodable += binary_decodable(c) ? c.name : "";
  }
  EXPECT_EQ(decodable, "aij");
}

}  // namespace
}  // namespace weir::sources::postgres
