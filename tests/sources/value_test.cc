// Tests of typed values and the row encoding (weir/sources/postgres/value.h) and of
// load_relation_desc (catalog.h). The *Postgres* tests round-trip what a real PostgreSQL 15 prints
// with COPY: decode, encode, print, and compare byte for byte with PostgreSQL's line.

#include "weir/sources/postgres/value.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
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

// A connection with the session settings print_row reproduces, in a fresh schema.
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

}  // namespace
}  // namespace weir::sources::postgres
