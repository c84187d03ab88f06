// The MySQL-family type mapping (types.h) and catalog (catalog.h): pure tests of the mapping and
// the canonical text, and MariadbTypesTest against a real MariaDB 10.11, whose SELECT output must
// become exactly the PostgreSQL COPY text written out below.

#include <algorithm>
#include <bit>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "../support/mariadb/mariadb_conn.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mysql/catalog.h"
#include "mysql/connection.h"
#include "mysql/ddl.h"
#include <gtest/gtest.h>

#include "weir/sources/mysql/types.h"
#include "weir/sources/postgres/value.h"

namespace weir::sources::mysql {
namespace {

using postgres::TypeKind;

MysqlColumn make(std::string data_type, std::string column_type, std::string charset = "") {
  MysqlColumn c;
  c.name = "c";
  c.data_type = std::move(data_type);
  c.column_type = std::move(column_type);
  c.is_unsigned = c.column_type.find(" unsigned") != std::string::npos;
  c.charset = std::move(charset);
  return c;
}

MysqlColumn sized(std::string data_type, std::string column_type, uint32_t length,
                  std::string charset = "") {
  MysqlColumn c = make(std::move(data_type), std::move(column_type), std::move(charset));
  c.length = length;
  return c;
}

MysqlColumn scaled(std::string data_type, std::string column_type, uint32_t scale) {
  MysqlColumn c = make(std::move(data_type), std::move(column_type));
  c.scale = scale;
  return c;
}

// The canonical text of `value`, or "error: ..." with the status.
std::string canonical(const MysqlColumn& c, std::string_view value) {
  std::string out = "unchanged";
  const absl::Status status = canonical_from_select(c, value, out);
  if (!status.ok()) {
    EXPECT_EQ(out, "unchanged") << "out changed on error";
    return absl::StrCat("error: ", status.ToString());
  }
  return out.substr(9);
}

// What PostgreSQL prints for the canonical text of `value` (through encode_text_value).
std::string pg_text(const MysqlColumn& c, std::string_view value) {
  std::string text;
  if (absl::Status status = canonical_from_select(c, value, text); !status.ok()) {
    return absl::StrCat("error: ", status.ToString());
  }
  auto column = weir_column(c);
  if (!column.ok()) return absl::StrCat("error: ", column.status().ToString());
  std::string encoded;
  if (absl::Status status = postgres::encode_text_value(column->type, text, encoded);
      !status.ok()) {
    return absl::StrCat("encode error: ", status.ToString(), " for '", text, "'");
  }
  std::string printed;
  if (absl::Status status = postgres::print_value(column->type, encoded, printed); !status.ok()) {
    return absl::StrCat("print error: ", status.ToString());
  }
  return printed;
}

struct Mapped {
  uint32_t oid;
  int32_t typmod;
  std::string type_name;
  TypeKind kind;
};

Mapped mapped(const MysqlColumn& c) {
  auto column = weir_column(c);
  EXPECT_TRUE(column.ok()) << c.column_type << ": " << column.status();
  if (!column.ok()) return {};
  EXPECT_EQ(column->name, c.name);
  EXPECT_FALSE(column->type.is_array);
  return {column->type_oid, column->type_modifier, column->type_name, column->type.kind};
}

void expect_mapped(const MysqlColumn& c, uint32_t oid, int32_t typmod, std::string type_name,
                   TypeKind kind) {
  const Mapped m = mapped(c);
  EXPECT_EQ(m.oid, oid) << c.column_type;
  EXPECT_EQ(m.typmod, typmod) << c.column_type;
  EXPECT_EQ(m.type_name, type_name) << c.column_type;
  EXPECT_EQ(m.kind, kind) << c.column_type;
}

TEST(MysqlTypeMappingTest, Integers) {
  expect_mapped(make("tinyint", "tinyint(4)"), 21, -1, "smallint", TypeKind::kInt2);
  expect_mapped(make("tinyint", "tinyint(3) unsigned"), 21, -1, "smallint", TypeKind::kInt2);
  expect_mapped(make("smallint", "smallint(6)"), 21, -1, "smallint", TypeKind::kInt2);
  expect_mapped(make("smallint", "smallint(5) unsigned"), 23, -1, "integer", TypeKind::kInt4);
  expect_mapped(make("mediumint", "mediumint(9)"), 23, -1, "integer", TypeKind::kInt4);
  expect_mapped(make("mediumint", "mediumint(8) unsigned"), 23, -1, "integer", TypeKind::kInt4);
  expect_mapped(make("int", "int(11)"), 23, -1, "integer", TypeKind::kInt4);
  expect_mapped(make("int", "int(10) unsigned"), 20, -1, "bigint", TypeKind::kInt8);
  expect_mapped(make("bigint", "bigint(20)"), 20, -1, "bigint", TypeKind::kInt8);
  expect_mapped(make("bigint", "bigint(20) unsigned"), 1700, -1, "numeric", TypeKind::kNumeric);
  expect_mapped(make("year", "year(4)"), 21, -1, "smallint", TypeKind::kInt2);
}

TEST(MysqlTypeMappingTest, NumbersAndBits) {
  MysqlColumn d = make("decimal", "decimal(10,2)");
  d.precision = 10;
  d.scale = 2;
  expect_mapped(d, 1700, (10 << 16 | 2) + 4, "numeric(10,2)", TypeKind::kNumeric);
  d.precision = 65;
  d.scale = 30;
  expect_mapped(d, 1700, (65 << 16 | 30) + 4, "numeric(65,30)", TypeKind::kNumeric);
  d.scale = 0;
  expect_mapped(d, 1700, (65 << 16) + 4, "numeric(65,0)", TypeKind::kNumeric);
  expect_mapped(make("float", "float"), 700, -1, "real", TypeKind::kFloat4);
  expect_mapped(make("double", "double"), 701, -1, "double precision", TypeKind::kFloat8);
  expect_mapped(sized("bit", "bit(1)", 1), 1562, 1, "bit varying(1)", TypeKind::kText);
  expect_mapped(sized("bit", "bit(64)", 64), 1562, 64, "bit varying(64)", TypeKind::kText);
}

TEST(MysqlTypeMappingTest, Strings) {
  expect_mapped(sized("char", "char(10)", 10, "utf8mb4"), 1043, 14, "character varying(10)",
                TypeKind::kText);
  expect_mapped(sized("varchar", "varchar(255)", 255, "latin1"), 1043, 259,
                "character varying(255)", TypeKind::kText);
  expect_mapped(sized("varchar", "varchar(5)", 5, "utf8mb3"), 1043, 9, "character varying(5)",
                TypeKind::kText);
  expect_mapped(sized("varchar", "varchar(5)", 5, "ascii"), 1043, 9, "character varying(5)",
                TypeKind::kText);
  for (const char* t : {"tinytext", "text", "mediumtext", "longtext"}) {
    expect_mapped(make(t, t, "utf8mb4"), 25, -1, "text", TypeKind::kText);
  }
  MysqlColumn json = make("longtext", "longtext", "utf8mb4");
  json.is_json = true;
  expect_mapped(json, 114, -1, "json", TypeKind::kJson);
  MysqlColumn e = make("enum", "enum('a','it''s')", "utf8mb4");
  expect_mapped(e, 25, -1, "enum('a','it''s')", TypeKind::kText);
  expect_mapped(make("set", "set('a','b')", "latin1"), 25, -1, "set('a','b')", TypeKind::kText);
}

TEST(MysqlTypeMappingTest, BinaryAndTime) {
  for (const char* t : {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}) {
    expect_mapped(sized(t, t, 4, "binary"), 17, -1, "bytea", TypeKind::kBytea);
  }
  // A text type in the binary character set holds bytes.
  expect_mapped(sized("varchar", "varchar(4)", 4, "binary"), 17, -1, "bytea", TypeKind::kBytea);
  expect_mapped(make("date", "date"), 1082, -1, "date", TypeKind::kDate);
  expect_mapped(scaled("time", "time(6)", 6), 1186, -1, "interval", TypeKind::kInterval);
  expect_mapped(scaled("datetime", "datetime", 0), 1114, 0, "timestamp(0) without time zone",
                TypeKind::kTimestamp);
  expect_mapped(scaled("datetime", "datetime(6)", 6), 1114, 6, "timestamp(6) without time zone",
                TypeKind::kTimestamp);
  expect_mapped(scaled("timestamp", "timestamp(3)", 3), 1184, 3, "timestamp(3) with time zone",
                TypeKind::kTimestampTz);
}

TEST(MysqlTypeMappingTest, NullabilityAndName) {
  MysqlColumn c = make("int", "int(11)");
  c.name = "weird `name`";
  c.nullable = false;
  auto column = weir_column(c);
  ASSERT_TRUE(column.ok()) << column.status();
  EXPECT_EQ(column->name, "weird `name`");
  EXPECT_FALSE(column->nullable);
  c.nullable = true;
  EXPECT_TRUE(weir_column(c)->nullable);
}

TEST(MysqlTypeMappingTest, UnsupportedTypesAndCharsetsNameTheColumn) {
  for (const char* t : {"geometry", "point", "linestring", "polygon", "multipolygon",
                        "geometrycollection", "uuid", "inet6", "inet4", "vector", ""}) {
    MysqlColumn c = make(t, t);
    c.name = "shape";
    auto column = weir_column(c);
    ASSERT_FALSE(column.ok()) << t;
    EXPECT_EQ(column.status().code(), absl::StatusCode::kUnimplemented) << t;
    EXPECT_NE(column.status().message().find("`shape`"), std::string_view::npos) << column.status();
    EXPECT_NE(column.status().message().find(t), std::string_view::npos) << column.status();
    std::string out;
    EXPECT_EQ(canonical_from_select(c, "x", out).code(), absl::StatusCode::kUnimplemented);
  }
  for (const char* cs : {"ucs2", "sjis", "utf16", "utf32", "big5", "cp1251", ""}) {
    MysqlColumn c = sized("char", "char(3)", 3, cs);
    c.name = "jp";
    auto column = weir_column(c);
    ASSERT_FALSE(column.ok()) << cs;
    EXPECT_EQ(column.status().code(), absl::StatusCode::kUnimplemented) << cs;
    EXPECT_NE(column.status().message().find("`jp`"), std::string_view::npos) << column.status();
    EXPECT_NE(column.status().message().find("char(3)"), std::string_view::npos) << column.status();
    if (*cs != '\0') {
      EXPECT_NE(column.status().message().find(cs), std::string_view::npos) << column.status();
    }
  }
  std::vector<MysqlColumn> columns = {make("int", "int(11)"), make("point", "point")};
  columns[1].name = "where";
  auto desc = relation_desc("shop", "stores", columns);
  ASSERT_FALSE(desc.ok());
  EXPECT_EQ(desc.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(desc.status().message().find("shop.stores"), std::string_view::npos);
  EXPECT_NE(desc.status().message().find("`where`"), std::string_view::npos);
}

TEST(MysqlTypeMappingTest, RelationDesc) {
  MysqlColumn id = make("int", "int(11)");
  id.name = "id";
  id.nullable = false;
  MysqlColumn name = sized("varchar", "varchar(20)", 20, "utf8mb4");
  name.name = "name";
  auto desc = relation_desc("shop", "items", {id, name});
  ASSERT_TRUE(desc.ok()) << desc.status();
  EXPECT_EQ(desc->schema, "shop");
  EXPECT_EQ(desc->table, "items");
  EXPECT_EQ(desc->describe(), "id integer not null\nname character varying(20)\n");
  auto decoded = postgres::RelationDesc::decode(desc->encode());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, *desc);
}

TEST(MysqlTypeMappingTest, QuoteIdentifierAndSelectExpression) {
  EXPECT_EQ(quote_identifier("a"), "`a`");
  EXPECT_EQ(quote_identifier("a`b``"), "`a``b`````");
  EXPECT_EQ(quote_identifier(""), "``");
  MysqlColumn c = make("int", "int(11)");
  c.name = "x`y";
  EXPECT_EQ(select_expression(c), "`x``y`");
  c = make("float", "float");
  EXPECT_EQ(select_expression(c), "IF(`c` = 0 AND ATAN2(`c`, -1) < 0, '-0', CAST(`c` AS DOUBLE))");
  c = make("double", "double");
  EXPECT_EQ(select_expression(c), "IF(`c` = 0 AND ATAN2(`c`, -1) < 0, '-0', `c`)");
  c = sized("bit", "bit(3)", 3);
  EXPECT_EQ(select_expression(c), "BIN(`c`)");
  c = scaled("timestamp", "timestamp", 0);
  EXPECT_EQ(select_expression(c), "`c`");
}

TEST(MysqlEnumParseTest, Elements) {
  using V = std::vector<std::string>;
  EXPECT_EQ(*parse_elements("enum('a','b')"), (V{"a", "b"}));
  EXPECT_EQ(*parse_elements("set('x')"), (V{"x"}));
  EXPECT_EQ(*parse_elements("enum('')"), (V{""}));
  EXPECT_EQ(*parse_elements("enum('','')"), (V{"", ""}));
  EXPECT_EQ(*parse_elements("enum('''')"), (V{"'"}));
  EXPECT_EQ(*parse_elements("enum('a''','''b','''')"), (V{"a'", "'b", "'"}));
  EXPECT_EQ(*parse_elements(R"(enum('it''s','b\\c','d,e','','x"y',')','(,'))"),
            (V{"it's", "b\\c", "d,e", "", "x\"y", ")", "(,"}));
  // What MariaDB prints for a newline, CR and NUL; and escapes it may be given.
  EXPECT_EQ(*parse_elements(R"(enum('n\nl','c\rr','z\0z','\'q','\t\b\Z','\%\_','\y'))"),
            (V{"n\nl", "c\rr", std::string("z\0z", 3), "'q", "\t\b\x1a", "\\%\\_", "y"}));
  EXPECT_EQ(*parse_elements("ENUM('A')"), (V{"A"}));
  EXPECT_EQ(*parse_elements("enum('é','😀')"), (V{"é", "😀"}));

  // 64 elements, each ending in a quote (even) or a backslash (odd).
  std::string set64 = "set(";
  V expected;
  for (int i = 0; i < 64; ++i) {
    const bool even = i % 2 == 0;
    expected.push_back(absl::StrCat("e", i, even ? "'" : "\\"));
    absl::StrAppend(&set64, i == 0 ? "" : ",", "'e", i, even ? "''" : "\\\\", "'");
  }
  set64 += ")";
  auto parsed = parse_elements(set64);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, expected);
  EXPECT_EQ(parsed->size(), 64u);
  EXPECT_EQ((*parsed)[0], "e0'");
  EXPECT_EQ((*parsed)[63], "e63\\");

  for (const char* bad :
       {"enum", "enum(", "enum()", "enum('a'", "enum('a)", "enum(a)", "enum('a',)",
        "enum('a' ,'b')", "enum('a')x", "varchar(3)", "enum('a\\')", "set('a'''"}) {
    auto r = parse_elements(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(MysqlCanonicalTest, Integers) {
  EXPECT_EQ(canonical(make("tinyint", "tinyint(4)"), "-128"), "-128");
  EXPECT_EQ(pg_text(make("tinyint", "tinyint(4)"), "-128"), "-128");
  EXPECT_EQ(pg_text(make("tinyint", "tinyint(3) unsigned"), "255"), "255");
  EXPECT_EQ(pg_text(make("smallint", "smallint(5) unsigned"), "65535"), "65535");
  EXPECT_EQ(pg_text(make("mediumint", "mediumint(9)"), "-8388608"), "-8388608");
  EXPECT_EQ(pg_text(make("int", "int(10) unsigned"), "4294967295"), "4294967295");
  EXPECT_EQ(pg_text(make("int", "int(11)"), "-2147483648"), "-2147483648");
  EXPECT_EQ(pg_text(make("bigint", "bigint(20)"), "-9223372036854775808"), "-9223372036854775808");
  EXPECT_EQ(pg_text(make("bigint", "bigint(20) unsigned"), "18446744073709551615"),
            "18446744073709551615");
  EXPECT_EQ(canonical(make("year", "year(4)"), "0000"), "0");
  EXPECT_EQ(canonical(make("year", "year(4)"), "2155"), "2155");
  EXPECT_EQ(pg_text(make("year", "year(4)"), "1901"), "1901");
  for (const char* bad : {"", "-", "1.5", " 1", "1e3", "0x10", "--1"}) {
    EXPECT_TRUE(canonical(make("int", "int(11)"), bad).starts_with("error: INVALID_ARGUMENT"))
        << bad;
  }
  EXPECT_TRUE(canonical(make("int", "int(10) unsigned"), "-1").starts_with("error:"));
  EXPECT_TRUE(canonical(make("year", "year(4)"), "-1").starts_with("error:"));
}

TEST(MysqlCanonicalTest, Decimals) {
  MysqlColumn d = make("decimal", "decimal(10,2)");
  d.precision = 10;
  d.scale = 2;
  EXPECT_EQ(canonical(d, "-1.50"), "-1.50");
  EXPECT_EQ(pg_text(d, "-1.50"), "-1.50");
  EXPECT_EQ(pg_text(d, "0.00"), "0.00");
  EXPECT_EQ(pg_text(d, "99999999.99"), "99999999.99");
  d.precision = 65;
  d.scale = 30;
  const std::string max = std::string(35, '9') + "." + std::string(30, '9');
  EXPECT_EQ(pg_text(d, "-" + max), "-" + max);
  d.scale = 0;
  EXPECT_EQ(pg_text(d, "12"), "12");
  for (const char* bad : {"", "1.", ".5", "1e5", "abc", "1.2.3", "NaN"}) {
    EXPECT_TRUE(canonical(d, bad).starts_with("error:")) << bad;
  }
}

TEST(MysqlCanonicalTest, FloatsAreExact) {
  const MysqlColumn f = make("float", "float");
  // What CAST(f AS DOUBLE) prints for FLT_MAX, the smallest denormal, FLT_MIN, 16777217 (stored
  // as 16777216) and 0.1f.
  EXPECT_EQ(canonical(f, "3.4028234663852886e38"), "3.4028235e+38");
  EXPECT_EQ(pg_text(f, "3.4028234663852886e38"), "3.4028235e+38");
  EXPECT_EQ(pg_text(f, "-3.4028234663852886e38"), "-3.4028235e+38");
  EXPECT_EQ(pg_text(f, "1.401298464324817e-45"), "1e-45");
  EXPECT_EQ(pg_text(f, "1.1754943508222875e-38"), "1.1754944e-38");
  EXPECT_EQ(pg_text(f, "16777216"), "1.6777216e+07");
  EXPECT_EQ(pg_text(f, "0.10000000149011612"), "0.1");
  EXPECT_EQ(pg_text(f, "1.100000023841858"), "1.1");
  EXPECT_EQ(pg_text(f, "0"), "0");
  EXPECT_EQ(pg_text(f, "-0"), "-0");
  struct Case {
    const char* text;
    float value;
  };
  for (const Case& k :
       {Case{"3.4028234663852886e38", FLT_MAX},
        Case{"1.401298464324817e-45", std::nextafter(0.0f, 1.0f)},
        Case{"1.1754942106924411e-38", std::nextafter(FLT_MIN, 0.0f)},
        Case{"16777216", 16777216.0f}, Case{"16777218", 16777218.0f}, Case{"-0", -0.0f}}) {
    const std::string text = canonical(f, k.text);
    const float back = std::strtof(text.c_str(), nullptr);
    EXPECT_EQ(std::bit_cast<uint32_t>(back), std::bit_cast<uint32_t>(k.value)) << k.text;
  }
  // Every float through its double text (as CAST(f AS DOUBLE) prints it, shortest) and back.
  for (uint32_t bits = 1; bits < 0x7f800000u; bits += 0x00012345u) {
    const float v = std::bit_cast<float>(bits);
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof(buf), static_cast<double>(v));
    const std::string text = canonical(f, std::string_view(buf, r.ptr - buf));
    EXPECT_EQ(std::bit_cast<uint32_t>(std::strtof(text.c_str(), nullptr)), bits) << buf;
  }
  for (const char* bad : {"", "inf", "-inf", "nan", "1e39", "abc", " 1", "1 ", "0x1p3"}) {
    EXPECT_TRUE(canonical(f, bad).starts_with("error:")) << bad;
  }
}

TEST(MysqlCanonicalTest, DoublesAreExact) {
  const MysqlColumn d = make("double", "double");
  EXPECT_EQ(pg_text(d, "0.30000000000000004"), "0.30000000000000004");
  EXPECT_EQ(pg_text(d, "5e-324"), "5e-324");
  EXPECT_EQ(pg_text(d, "1.7976931348623157e308"), "1.7976931348623157e+308");
  EXPECT_EQ(pg_text(d, "-2.2250738585072014e-308"), "-2.2250738585072014e-308");
  EXPECT_EQ(pg_text(d, "1.2345678901234568e17"), "1.2345678901234568e+17");
  EXPECT_EQ(pg_text(d, "1e15"), "1e+15");
  EXPECT_EQ(pg_text(d, "100000000000000"), "100000000000000");
  EXPECT_EQ(pg_text(d, "-0"), "-0");
  EXPECT_EQ(std::strtod(canonical(d, "5e-324").c_str(), nullptr), std::nextafter(0.0, 1.0));
  EXPECT_TRUE(canonical(d, "1e309").starts_with("error:"));
  EXPECT_TRUE(canonical(d, "NaN").starts_with("error:"));
}

TEST(MysqlCanonicalTest, Bits) {
  const MysqlColumn b1 = sized("bit", "bit(1)", 1);
  EXPECT_EQ(canonical(b1, "0"), "0");
  EXPECT_EQ(canonical(b1, "1"), "1");
  const MysqlColumn b5 = sized("bit", "bit(5)", 5);
  EXPECT_EQ(canonical(b5, "101"), "00101");
  EXPECT_EQ(pg_text(b5, "0"), "00000");
  const MysqlColumn b64 = sized("bit", "bit(64)", 64);
  EXPECT_EQ(pg_text(b64, std::string(64, '1')), std::string(64, '1'));
  EXPECT_EQ(canonical(b64, "10"), std::string(62, '0') + "10");
  EXPECT_TRUE(canonical(b5, "111111").starts_with("error:"));
  EXPECT_TRUE(canonical(b5, "").starts_with("error:"));
  EXPECT_TRUE(canonical(b5, "12").starts_with("error:"));
}

TEST(MysqlCanonicalTest, Strings) {
  const MysqlColumn c = sized("char", "char(10)", 10, "utf8mb4");
  EXPECT_EQ(canonical(c, "x😀"), "x😀");
  EXPECT_EQ(canonical(c, "ab  "), "ab");  // a padded CHAR, should one arrive
  EXPECT_EQ(canonical(c, " a"), " a");
  const MysqlColumn v = sized("varchar", "varchar(10)", 10, "latin1");
  EXPECT_EQ(pg_text(v, "é€ "), "é€ ");
  const MysqlColumn t = make("text", "text", "utf8mb4");
  EXPECT_EQ(pg_text(t, ""), "");
  EXPECT_EQ(pg_text(t, "tab\tline\nback\\"), "tab\tline\nback\\");
  EXPECT_EQ(pg_text(t, "\xf4\x8f\xbf\xbf"), "\xf4\x8f\xbf\xbf");  // U+10FFFF
  for (const std::string& bad :
       {std::string("a\0b", 3), std::string("\xff"), std::string("\xc0\x80"),
        std::string("\xed\xa0\x80"), std::string("\xf4\x90\x80\x80"), std::string("\xe2\x82"),
        std::string("\x80")}) {
    const std::string r = canonical(t, bad);
    EXPECT_TRUE(r.starts_with("error: INVALID_ARGUMENT")) << absl::CHexEscape(bad);
    EXPECT_NE(r.find("`c`"), std::string::npos) << r;
  }
  MysqlColumn json = make("longtext", "longtext", "utf8mb4");
  json.is_json = true;
  EXPECT_EQ(pg_text(json, R"({"a": [1, 2.5, "é"]})"), R"({"a": [1, 2.5, "é"]})");
  const MysqlColumn e = make("enum", "enum('','a b')", "utf8mb4");
  EXPECT_EQ(pg_text(e, ""), "");
  EXPECT_EQ(pg_text(e, "a b"), "a b");
  const MysqlColumn s = make("set", "set('a','b')", "utf8mb4");
  EXPECT_EQ(pg_text(s, "a,b"), "a,b");
}

TEST(MysqlCanonicalTest, Binary) {
  const MysqlColumn b4 = sized("binary", "binary(4)", 4, "binary");
  EXPECT_EQ(canonical(b4, std::string("\x01\xab\0\xff", 4)), "\\x01ab00ff");
  EXPECT_EQ(canonical(b4, "\x01"), "\\x01000000");
  EXPECT_EQ(pg_text(b4, ""), "\\x00000000");
  const MysqlColumn vb = sized("varbinary", "varbinary(8)", 8, "binary");
  EXPECT_EQ(pg_text(vb, ""), "\\x");
  EXPECT_EQ(pg_text(vb, std::string("\0\n\\", 3)), "\\x000a5c");
  const MysqlColumn blob = make("longblob", "longblob", "binary");
  EXPECT_EQ(pg_text(blob, "\xde\xad\xbe\xef"), "\\xdeadbeef");
  // Not UTF-8, and fine: bytes.
  const MysqlColumn vc = sized("varchar", "varchar(4)", 4, "binary");
  EXPECT_EQ(pg_text(vc, "\xff"), "\\xff");
}

TEST(MysqlCanonicalTest, DatesAndTimes) {
  const MysqlColumn date = make("date", "date");
  EXPECT_EQ(pg_text(date, "2024-02-29"), "2024-02-29");
  EXPECT_EQ(pg_text(date, "1000-01-01"), "1000-01-01");
  EXPECT_EQ(pg_text(date, "9999-12-31"), "9999-12-31");
  // MySQL's year 0 is the year before 1: PostgreSQL's 1 BC.
  EXPECT_EQ(canonical(date, "0000-03-01"), "0001-03-01 BC");
  EXPECT_EQ(pg_text(date, "0000-12-31"), "0001-12-31 BC");
  EXPECT_EQ(pg_text(date, "0001-01-01"), "0001-01-01");
  const MysqlColumn time = scaled("time", "time(6)", 6);
  EXPECT_EQ(canonical(time, "838:59:59.000000"), "838:59:59.000000");
  EXPECT_EQ(pg_text(time, "838:59:59.000000"), "838:59:59");
  EXPECT_EQ(pg_text(time, "-838:59:59"), "-838:59:59");
  EXPECT_EQ(pg_text(time, "-838:59:59.999999"), "-838:59:59.999999");
  EXPECT_EQ(pg_text(time, "-00:00:01.500000"), "-00:00:01.5");
  EXPECT_EQ(pg_text(time, "-00:00:00.000001"), "-00:00:00.000001");
  EXPECT_EQ(pg_text(time, "00:00:00"), "00:00:00");
  EXPECT_EQ(pg_text(time, "12:34:56.7"), "12:34:56.7");
  const MysqlColumn dt = scaled("datetime", "datetime(6)", 6);
  EXPECT_EQ(canonical(dt, "2024-01-02 03:04:05.123456"), "2024-01-02 03:04:05.123456");
  EXPECT_EQ(pg_text(dt, "2024-01-02 03:04:05.123456"), "2024-01-02 03:04:05.123456");
  EXPECT_EQ(pg_text(dt, "1000-01-01 00:00:00.000000"), "1000-01-01 00:00:00");
  EXPECT_EQ(pg_text(dt, "9999-12-31 23:59:59.999999"), "9999-12-31 23:59:59.999999");
  EXPECT_EQ(pg_text(dt, "0000-01-01 00:00:00"), "0001-01-01 00:00:00 BC");
  const MysqlColumn ts = scaled("timestamp", "timestamp(3)", 3);
  EXPECT_EQ(canonical(ts, "2024-01-02 03:04:05.123"), "2024-01-02 03:04:05.123+00");
  EXPECT_EQ(pg_text(ts, "2024-01-02 03:04:05.123"), "2024-01-02 03:04:05.123+00");
  EXPECT_EQ(pg_text(ts, "1970-01-01 00:00:01.000"), "1970-01-01 00:00:01+00");
  EXPECT_EQ(pg_text(ts, "2038-01-19 03:14:07.999"), "2038-01-19 03:14:07.999+00");
}

TEST(MysqlCanonicalTest, ZeroAndInvalidDatesNameTheColumn) {
  MysqlColumn date = make("date", "date");
  date.name = "born";
  MysqlColumn dt = scaled("datetime", "datetime", 0);
  dt.name = "seen";
  MysqlColumn ts = scaled("timestamp", "timestamp", 0);
  ts.name = "at";
  struct Case {
    const MysqlColumn* column;
    const char* value;
  };
  for (const Case& k : {Case{&date, "0000-00-00"},
                        Case{&date, "2024-00-10"},
                        Case{&date, "2024-01-00"},
                        Case{&date, "2024-02-30"},
                        Case{&date, "2023-02-29"},
                        Case{&date, "2024-13-01"},
                        Case{&date, "2024-1-01"},
                        Case{&date, "20240101"},
                        Case{&date, ""},
                        Case{&date, "2024-01-01 "},
                        Case{&dt, "0000-00-00 00:00:00"},
                        Case{&dt, "2024-00-10 00:00:00"},
                        Case{&dt, "2024-04-31 12:00:00"},
                        Case{&dt, "2024-01-01 24:00:00"},
                        Case{&dt, "2024-01-01 00:60:00"},
                        Case{&dt, "2024-01-01 00:00:00."},
                        Case{&dt, "2024-01-01 00:00:00.1234567"},
                        Case{&dt, "2024-01-01T00:00:00"},
                        Case{&ts, "0000-00-00 00:00:00"},
                        Case{&ts, "0000-00-00 00:00:00.000"}}) {
    const std::string r = canonical(*k.column, k.value);
    EXPECT_TRUE(r.starts_with("error: INVALID_ARGUMENT")) << k.value << ": " << r;
    EXPECT_NE(r.find(quote_identifier(k.column->name)), std::string::npos) << r;
    EXPECT_NE(r.find(absl::StrCat("'", k.value, "'")), std::string::npos) << r;
  }
  EXPECT_NE(canonical(date, "0000-00-00").find("zero"), std::string::npos);
  const MysqlColumn time = scaled("time", "time", 0);
  for (const char* bad : {"839:00:00", "-839:00:00", "1:00:00", "00:60:00", "00:00:60", "00:00:00.",
                          "00:00", "--00:00:01", "1000:00:00", "00:00:00.1234567"}) {
    EXPECT_TRUE(canonical(time, bad).starts_with("error: INVALID_ARGUMENT")) << bad;
  }
}

TEST(MysqlCanonicalTest, LongValuesAreQuotedShort) {
  MysqlColumn t = make("text", "text", "utf8mb4");
  const std::string value = std::string(100, 'a') + "\xff";
  const std::string r = canonical(t, value);
  EXPECT_TRUE(r.starts_with("error:"));
  EXPECT_NE(r.find(std::string(64, 'a') + "'..."), std::string::npos) << r;
  EXPECT_EQ(r.find(std::string(65, 'a')), std::string::npos) << r;
}

// ---------------------------------------------------------------------------------------------
// Against MariaDB.

class MariadbTypesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string text = weir::testing::mariadb_test_conn();
    ASSERT_FALSE(text.empty());
    auto info = parse_conninfo(text);
    ASSERT_TRUE(info.ok()) << info.status();
    auto conn = MysqlConnection::connect(*info, "types test");
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_.emplace(*std::move(conn));
  }

  void exec(std::string_view sql) {
    const absl::Status status = conn_->exec(sql);
    ASSERT_TRUE(status.ok()) << sql << ": " << status;
  }

  // The table's rows, SELECTed with select_expression and turned into PostgreSQL COPY lines.
  std::vector<std::string> copy_lines(const std::string& table,
                                      const std::vector<MysqlColumn>& columns,
                                      const postgres::RelationDesc& desc) {
    std::vector<std::string> expressions;
    for (const MysqlColumn& c : columns) expressions.push_back(select_expression(c));
    const std::string sql =
        absl::StrCat("SELECT ", absl::StrJoin(expressions, ", "), " FROM ",
                     quote_identifier("weir"), ".", quote_identifier(table), " ORDER BY 1");
    auto result = conn_->query(sql);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return {};
    EXPECT_EQ(mysql_num_fields(result->get()), columns.size());
    postgres::RowEncoder encoder(desc);
    std::vector<std::string> lines;
    std::vector<std::string> texts(columns.size());
    std::vector<postgres::TextField> fields(columns.size());
    while (MYSQL_ROW row = mysql_fetch_row(result->get())) {
      const unsigned long* lengths = mysql_fetch_lengths(result->get());
      for (size_t i = 0; i < columns.size(); ++i) {
        texts[i].clear();
        if (row[i] == nullptr) {
          fields[i] = {{}, true};
          continue;
        }
        const absl::Status status =
            canonical_from_select(columns[i], std::string_view(row[i], lengths[i]), texts[i]);
        EXPECT_TRUE(status.ok()) << status;
        fields[i] = {texts[i], false};
      }
      std::string encoded;
      const absl::Status encode_status = encoder.encode(fields, encoded);
      EXPECT_TRUE(encode_status.ok()) << encode_status;
      std::string line;
      const absl::Status print_status = postgres::print_row(desc, encoded, line);
      EXPECT_TRUE(print_status.ok()) << print_status;
      lines.push_back(line);
    }
    return lines;
  }

  std::optional<MysqlConnection> conn_;
};

// Builds an expected COPY line: `values` by column name, every other column NULL.
std::string copy_line(const postgres::RelationDesc& desc,
                      const std::map<std::string, std::string>& values) {
  std::vector<std::string> fields;
  for (const postgres::Column& c : desc.columns) {
    const auto it = values.find(c.name);
    fields.push_back(it == values.end() ? "\\N" : it->second);
  }
  return absl::StrJoin(fields, "\t");
}

TEST_F(MariadbTypesTest, EveryTypeBecomesPostgresCopyText) {
  ASSERT_TRUE(conn_.has_value());
  exec("DROP TABLE IF EXISTS weir.every_type");
  exec(R"(CREATE TABLE weir.every_type (
      id int NOT NULL PRIMARY KEY,
      ti tinyint, tiu tinyint unsigned, si smallint, siu smallint unsigned,
      mi mediumint, miu mediumint unsigned, i int, iu int unsigned NOT NULL DEFAULT 7,
      bi bigint, biu bigint unsigned,
      d65 decimal(65,30), d10 decimal(10,2), f float, dbl double, b1 bit(1), b64 bit(64),
      c10 char(10) CHARACTER SET utf8mb4, vl varchar(10) CHARACTER SET latin1,
      tx text, mt mediumtext, lt longtext, j json,
      bn binary(4), vb varbinary(8), bl blob,
      dt date, tm time(6), dtm datetime(6), ts timestamp(3) NULL, y year,
      e enum('a','it''s','b\\c','d,e','','x"y') CHARACTER SET utf8mb4,
      s set('a','b','c') CHARACTER SET utf8mb4))");
  const std::string nines = std::string(35, '9') + "." + std::string(30, '9');
  exec(absl::StrCat(
      "INSERT INTO weir.every_type VALUES (1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, "
      "-9223372036854775808, 0, -",
      nines,
      ", -12345678.90, -3.4028234663852886e38, -1.7976931348623157e308, b'0', b'0', "
      "'ab  ', 'é€', '', 'tab\\there', 'line\\nnext \\\\ back', '{\"a\": [1, 2.5, \"x\"]}', "
      "0x0102, '', 0x00ff, '1000-01-01', '-838:59:59', '1000-01-01 00:00:00', "
      "'1970-01-01 00:00:01', 1901, '', '')"));
  exec(absl::StrCat(
      "INSERT INTO weir.every_type VALUES (2, 127, 255, 32767, 65535, 8388607, 16777215, "
      "2147483647, 4294967295, 9223372036854775807, 18446744073709551615, ",
      nines,
      ", 99999999.99, 3.4028234663852886e38, 1.7976931348623157e308, b'1', "
      "b'1111111111111111111111111111111111111111111111111111111111111111', "
      "'x😀  ', '€', 'ü', 'm', 'l', '[]', 0xdeadbeef, 0x00, 'blob', '9999-12-31', '838:59:59', "
      "'9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.999', 2155, 'b\\\\c', 'a,c')"));
  exec(
      "INSERT INTO weir.every_type (id, d65, d10, f, dbl, b64, c10, vl, bn, bl, dt, tm, dtm, "
      "y, e, s) VALUES (3, 0, 0.5, 1.401298464324817e-45, 5e-324, b'101', '', '', '', '', "
      "'0000-03-01', '-00:00:01.5', '0000-01-01 00:00:00', 0, 'd,e', 'c,b,a')");
  exec(
      "INSERT INTO weir.every_type (id, d10, f, dbl, tm, dtm, e, s) VALUES (4, -0.01, 16777217, "
      "0.30000000000000004, '00:00:00', '2024-02-29 12:34:56.5', 'x\"y', 'b')");
  exec("INSERT INTO weir.every_type (id, f, dbl, e) VALUES (5, -1e-50, 1e15, 'it''s')");
  exec("INSERT INTO weir.every_type (id, iu) VALUES (6, 7)");
  // The server stored the latin1 column in Windows-1252: '€' is 0x80.
  auto hex = conn_->rows("SELECT HEX(vl) FROM weir.every_type WHERE id = 1");
  ASSERT_TRUE(hex.ok()) << hex.status();
  EXPECT_EQ((*hex)[0][0], "E980");

  auto columns = load_columns(*conn_, "weir", "every_type");
  ASSERT_TRUE(columns.ok()) << columns.status();
  auto desc = relation_desc("weir", "every_type", *columns);
  ASSERT_TRUE(desc.ok()) << desc.status();
  EXPECT_EQ(desc->qualified_name(), "weir.every_type");
  EXPECT_EQ(desc->describe(),
            "id integer not null\n"
            "ti smallint\n"
            "tiu smallint\n"
            "si smallint\n"
            "siu integer\n"
            "mi integer\n"
            "miu integer\n"
            "i integer\n"
            "iu bigint not null\n"
            "bi bigint\n"
            "biu numeric\n"
            "d65 numeric(65,30)\n"
            "d10 numeric(10,2)\n"
            "f real\n"
            "dbl double precision\n"
            "b1 bit varying(1)\n"
            "b64 bit varying(64)\n"
            "c10 character varying(10)\n"
            "vl character varying(10)\n"
            "tx text\n"
            "mt text\n"
            "lt text\n"
            "j json\n"
            "bn bytea\n"
            "vb bytea\n"
            "bl bytea\n"
            "dt date\n"
            "tm interval\n"
            "dtm timestamp(6) without time zone\n"
            "ts timestamp(3) with time zone\n"
            "y smallint\n"
            "e enum('a','it''s','b\\\\c','d,e','','x\"y')\n"
            "s set('a','b','c')\n");
  const MysqlColumn& id = (*columns)[0];
  EXPECT_TRUE(id.primary_key);
  EXPECT_FALSE(id.nullable);
  for (size_t i = 1; i < columns->size(); ++i) {
    EXPECT_FALSE((*columns)[i].primary_key) << (*columns)[i].name;
  }
  const auto find = [&](std::string_view name) -> const MysqlColumn& {
    for (const MysqlColumn& c : *columns) {
      if (c.name == name) return c;
    }
    ADD_FAILURE() << "no column " << name;
    return (*columns)[0];
  };
  EXPECT_EQ(find("e").elements, (std::vector<std::string>{"a", "it's", "b\\c", "d,e", "", "x\"y"}));
  EXPECT_EQ(find("s").elements, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(find("b1").length, 1u);
  EXPECT_EQ(find("b64").length, 64u);
  EXPECT_EQ(find("c10").length, 10u);
  EXPECT_EQ(find("c10").charset, "utf8mb4");
  EXPECT_EQ(find("vl").charset, "latin1");
  EXPECT_EQ(find("bn").length, 4u);
  EXPECT_EQ(find("d65").precision, 65u);
  EXPECT_EQ(find("d65").scale, 30u);
  EXPECT_EQ(find("tm").scale, 6u);
  EXPECT_EQ(find("ts").scale, 3u);
  EXPECT_TRUE(find("j").is_json);
  EXPECT_FALSE(find("lt").is_json);
  EXPECT_TRUE(find("biu").is_unsigned);
  EXPECT_FALSE(find("bi").is_unsigned);
  EXPECT_EQ(find("biu").data_type, "bigint");

  const std::vector<std::string> lines = copy_lines("every_type", *columns, *desc);
  const std::vector<std::string> expected = {
      copy_line(*desc, {{"id", "1"},
                        {"ti", "-128"},
                        {"tiu", "0"},
                        {"si", "-32768"},
                        {"siu", "0"},
                        {"mi", "-8388608"},
                        {"miu", "0"},
                        {"i", "-2147483648"},
                        {"iu", "0"},
                        {"bi", "-9223372036854775808"},
                        {"biu", "0"},
                        {"d65", "-" + nines},
                        {"d10", "-12345678.90"},
                        {"f", "-3.4028235e+38"},
                        {"dbl", "-1.7976931348623157e+308"},
                        {"b1", "0"},
                        {"b64", std::string(64, '0')},
                        {"c10", "ab"},
                        {"vl", "é€"},
                        {"tx", ""},
                        {"mt", "tab\\there"},
                        {"lt", "line\\nnext \\\\ back"},
                        {"j", R"({"a": [1, 2.5, "x"]})"},
                        {"bn", "\\\\x01020000"},
                        {"vb", "\\\\x"},
                        {"bl", "\\\\x00ff"},
                        {"dt", "1000-01-01"},
                        {"tm", "-838:59:59"},
                        {"dtm", "1000-01-01 00:00:00"},
                        {"ts", "1970-01-01 00:00:01+00"},
                        {"y", "1901"},
                        {"e", ""},
                        {"s", ""}}),
      copy_line(*desc, {{"id", "2"},
                        {"ti", "127"},
                        {"tiu", "255"},
                        {"si", "32767"},
                        {"siu", "65535"},
                        {"mi", "8388607"},
                        {"miu", "16777215"},
                        {"i", "2147483647"},
                        {"iu", "4294967295"},
                        {"bi", "9223372036854775807"},
                        {"biu", "18446744073709551615"},
                        {"d65", nines},
                        {"d10", "99999999.99"},
                        {"f", "3.4028235e+38"},
                        {"dbl", "1.7976931348623157e+308"},
                        {"b1", "1"},
                        {"b64", std::string(64, '1')},
                        {"c10", "x😀"},
                        {"vl", "€"},
                        {"tx", "ü"},
                        {"mt", "m"},
                        {"lt", "l"},
                        {"j", "[]"},
                        {"bn", "\\\\xdeadbeef"},
                        {"vb", "\\\\x00"},
                        {"bl", "\\\\x626c6f62"},
                        {"dt", "9999-12-31"},
                        {"tm", "838:59:59"},
                        {"dtm", "9999-12-31 23:59:59.999999"},
                        {"ts", "2038-01-19 03:14:07.999+00"},
                        {"y", "2155"},
                        {"e", "b\\\\c"},
                        {"s", "a,c"}}),
      copy_line(*desc, {{"id", "3"},
                        {"iu", "7"},
                        {"d65", "0.000000000000000000000000000000"},
                        {"d10", "0.50"},
                        {"f", "1e-45"},
                        {"dbl", "5e-324"},
                        {"b64", std::string(61, '0') + "101"},
                        {"c10", ""},
                        {"vl", ""},
                        {"bn", "\\\\x00000000"},
                        {"bl", "\\\\x"},
                        {"dt", "0001-03-01 BC"},
                        {"tm", "-00:00:01.5"},
                        {"dtm", "0001-01-01 00:00:00 BC"},
                        {"y", "0"},
                        {"e", "d,e"},
                        {"s", "a,b,c"}}),
      copy_line(*desc, {{"id", "4"},
                        {"iu", "7"},
                        {"d10", "-0.01"},
                        {"f", "1.6777216e+07"},
                        {"dbl", "0.30000000000000004"},
                        {"tm", "00:00:00"},
                        {"dtm", "2024-02-29 12:34:56.5"},
                        {"e", "x\"y"},
                        {"s", "b"}}),
      copy_line(*desc, {{"id", "5"}, {"iu", "7"}, {"f", "-0"}, {"dbl", "1e+15"}, {"e", "it's"}}),
      copy_line(*desc, {{"id", "6"}, {"iu", "7"}}),
  };
  ASSERT_EQ(lines.size(), expected.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i], expected[i]) << "row " << i + 1;
  }
}

TEST_F(MariadbTypesTest, HostileEnumAndWideSet) {
  ASSERT_TRUE(conn_.has_value());
  exec("DROP TABLE IF EXISTS weir.hostile");
  std::string set64;
  std::vector<std::string> elements64;
  for (int i = 0; i < 64; ++i) {
    elements64.push_back(absl::StrCat("s", i));
    absl::StrAppend(&set64, i == 0 ? "" : ",", "'s", i, "'");
  }
  exec(absl::StrCat(
      "CREATE TABLE weir.hostile (id int PRIMARY KEY, "
      "e enum('''', '\\\\', '\\\"', ',', '(', ')', '', 'a'',''b', 'n\\nl', 'é€ü', ' pad') "
      "CHARACTER SET utf8mb4, s set(",
      set64, ") CHARACTER SET utf8mb4)"));
  // (information_schema shows a character beyond the BMP as '?', so none is used here.)
  exec(
      "INSERT INTO weir.hostile VALUES (1, '''', 's0,s63'), (2, 'a'',''b', 's5'), "
      "(3, 'n\\nl', ''), (4, ' pad', 's63'), (5, 'é€ü', 's1,s0')");
  auto columns = load_columns(*conn_, "weir", "hostile");
  ASSERT_TRUE(columns.ok()) << columns.status();
  ASSERT_EQ(columns->size(), 3u);
  EXPECT_EQ((*columns)[1].elements, (std::vector<std::string>{"'", "\\", "\"", ",", "(", ")", "",
                                                              "a','b", "n\nl", "é€ü", " pad"}));
  EXPECT_EQ((*columns)[2].elements, elements64);
  auto desc = relation_desc("weir", "hostile", *columns);
  ASSERT_TRUE(desc.ok()) << desc.status();
  EXPECT_EQ(copy_lines("hostile", *columns, *desc),
            (std::vector<std::string>{"1\t'\ts0,s63", "2\ta','b\ts5", "3\tn\\nl\t", "4\t pad\ts63",
                                      "5\té€ü\ts0,s1"}));
}

TEST_F(MariadbTypesTest, UnsupportedColumnsAndMissingTables) {
  ASSERT_TRUE(conn_.has_value());
  exec("DROP TABLE IF EXISTS weir.shapes");
  exec("DROP TABLE IF EXISTS weir.wide_chars");
  exec("DROP VIEW IF EXISTS weir.a_view");
  exec("CREATE TABLE weir.shapes (id int PRIMARY KEY, outline geometry)");
  exec("CREATE TABLE weir.wide_chars (id int PRIMARY KEY, name char(3) CHARACTER SET ucs2)");
  exec("CREATE VIEW weir.a_view AS SELECT id FROM weir.shapes");

  auto shapes = load_columns(*conn_, "weir", "shapes");
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  auto desc = relation_desc("weir", "shapes", *shapes);
  ASSERT_FALSE(desc.ok());
  EXPECT_EQ(desc.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(desc.status().message().find("`outline`"), std::string_view::npos) << desc.status();
  EXPECT_NE(desc.status().message().find("geometry"), std::string_view::npos) << desc.status();

  auto wide = load_columns(*conn_, "weir", "wide_chars");
  ASSERT_TRUE(wide.ok()) << wide.status();
  desc = relation_desc("weir", "wide_chars", *wide);
  ASSERT_FALSE(desc.ok());
  EXPECT_EQ(desc.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(desc.status().message().find("`name`"), std::string_view::npos) << desc.status();
  EXPECT_NE(desc.status().message().find("ucs2"), std::string_view::npos) << desc.status();

  auto missing = load_columns(*conn_, "weir", "no_such_table");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("weir.no_such_table"), std::string_view::npos)
      << missing.status();
  // Names compare exactly: another case is another table.
  missing = load_columns(*conn_, "weir", "SHAPES");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  missing = load_columns(*conn_, "no_such_db", "shapes");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_NE(missing.status().message().find("no_such_db.shapes"), std::string_view::npos);

  auto view = load_columns(*conn_, "weir", "a_view");
  ASSERT_FALSE(view.ok());
  EXPECT_EQ(view.status().code(), absl::StatusCode::kFailedPrecondition) << view.status();
  EXPECT_NE(view.status().message().find("weir.a_view"), std::string_view::npos);

  auto tables = list_base_tables(*conn_, "weir");
  ASSERT_TRUE(tables.ok()) << tables.status();
  EXPECT_TRUE(std::is_sorted(tables->begin(), tables->end()));
  EXPECT_NE(std::find(tables->begin(), tables->end(), "shapes"), tables->end());
  EXPECT_NE(std::find(tables->begin(), tables->end(), "wide_chars"), tables->end());
  EXPECT_EQ(std::find(tables->begin(), tables->end(), "a_view"), tables->end());
  auto none = list_base_tables(*conn_, "no_such_db");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

TEST_F(MariadbTypesTest, ZeroDatesFailNamingTheColumn) {
  ASSERT_TRUE(conn_.has_value());
  exec("DROP TABLE IF EXISTS weir.zero_dates");
  exec("CREATE TABLE weir.zero_dates (id int PRIMARY KEY, d date, dt datetime)");
  exec("SET SESSION sql_mode = 'ALLOW_INVALID_DATES'");
  exec(
      "INSERT INTO weir.zero_dates VALUES (1, '0000-00-00', '2024-01-01 00:00:00'), "
      "(2, '2024-00-10', '2024-02-30 00:00:00')");
  auto columns = load_columns(*conn_, "weir", "zero_dates");
  ASSERT_TRUE(columns.ok()) << columns.status();
  auto rows = conn_->rows("SELECT d, dt FROM weir.zero_dates ORDER BY id");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  const struct {
    size_t row, column;
    const char* value;
  } cases[] = {{0, 1, "0000-00-00"}, {1, 1, "2024-00-10"}, {1, 2, "2024-02-30 00:00:00"}};
  for (const auto& k : cases) {
    const std::string& value = *(*rows)[k.row][k.column - 1];
    EXPECT_EQ(value, k.value);
    std::string out;
    const absl::Status status = canonical_from_select((*columns)[k.column], value, out);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find(quote_identifier((*columns)[k.column].name)),
              std::string_view::npos)
        << status;
    EXPECT_NE(status.message().find(absl::StrCat("'", k.value, "'")), std::string_view::npos)
        << status;
    EXPECT_TRUE(out.empty());
  }
}

}  // namespace
}  // namespace weir::sources::mysql

// ---------------------------------------------------------------------------------------------
// DDL statements of the binlog (ddl.h).

namespace weir::sources::mysql {
namespace {

using Targets = std::vector<std::pair<std::string, std::string>>;

TEST(MysqlDdlTest, TheTablesEachStatementChanges) {
  using Kind = DdlTargets::Kind;
  auto t = ddl_targets("TRUNCATE TABLE `t`", "weir");
  EXPECT_EQ(t.kind, Kind::kTruncate);
  EXPECT_EQ(t.tables, (Targets{{"weir", "t"}}));
  t = ddl_targets("/* c */ truncate other.t", "weir");
  EXPECT_EQ(t.tables, (Targets{{"other", "t"}}));
  t = ddl_targets("DROP TABLE IF EXISTS a, `b``c`, x.`d` /* generated by server */", "db");
  EXPECT_EQ(t.kind, Kind::kDrop);
  EXPECT_EQ(t.tables, (Targets{{"db", "a"}, {"db", "b`c"}, {"x", "d"}}));
  EXPECT_TRUE(ddl_targets("DROP TEMPORARY TABLE a", "db").tables.empty());
  t = ddl_targets("RENAME TABLE a TO tmp, b TO a, tmp TO b", "db");
  EXPECT_EQ(t.kind, Kind::kRename);
  EXPECT_EQ(t.tables.size(), 6u);
  t = ddl_targets("create or replace table `weir`.`t` (a int)", "");
  EXPECT_EQ(t.kind, Kind::kReplace);
  EXPECT_EQ(t.tables, (Targets{{"weir", "t"}}));
  t = ddl_targets("ALTER TABLE t ADD COLUMN c int", "db");
  EXPECT_EQ(t.kind, Kind::kAlter);
  EXPECT_FALSE(t.renames);
  EXPECT_EQ(t.tables, (Targets{{"db", "t"}}));
  EXPECT_TRUE(ddl_targets("ALTER ONLINE TABLE t RENAME TO u", "db").renames);
  EXPECT_FALSE(ddl_targets("ALTER TABLE t RENAME COLUMN a TO b", "db").renames);
  EXPECT_FALSE(ddl_targets("ALTER TABLE t RENAME INDEX a TO b", "db").renames);
  // A string that looks like a name, and statements weir does not parse.
  t = ddl_targets("ALTER TABLE t COMMENT 'DROP TABLE u'", "db");
  EXPECT_EQ(t.tables, (Targets{{"db", "t"}}));
  EXPECT_EQ(ddl_targets("CREATE INDEX i ON t (a)", "db").kind, Kind::kOther);
  EXPECT_EQ(ddl_targets("", "db").kind, Kind::kOther);
  EXPECT_EQ(ddl_targets("DROP TABLE", "db").tables.size(), 0u);
  // Executable comments are code; "double quotes" name (ANSI_QUOTES); RENAME TABLES.
  t = ddl_targets("/*!TRUNCATE TABLE e1*/", "db");
  EXPECT_EQ(t.kind, Kind::kTruncate);
  EXPECT_EQ(t.tables, (Targets{{"db", "e1"}}));
  EXPECT_EQ(ddl_targets("/*M!100500 DROP TABLE x */", "db").tables, (Targets{{"db", "x"}}));
  EXPECT_EQ(ddl_targets("TRUNCATE TABLE \"e2\"", "db").tables, (Targets{{"db", "e2"}}));
  EXPECT_EQ(ddl_targets("RENAME TABLES s1 TO tmp, s2 TO s1", "db").tables.size(), 4u);
  t = ddl_targets("DROP SCHEMA IF EXISTS `weir`", "db");
  EXPECT_EQ(t.kind, Kind::kDropDatabase);
  EXPECT_EQ(t.database, "weir");
  // ALTER clauses: harmless only when each keeps the rows and the columns.
  EXPECT_TRUE(
      ddl_targets("ALTER TABLE t ADD INDEX (v), COMMENT 'x', ALGORITHM=INPLACE", "db").harmless);
  EXPECT_TRUE(ddl_targets("ALTER TABLE t ALTER COLUMN v SET DEFAULT 3, DROP KEY k", "db").harmless);
  EXPECT_TRUE(ddl_targets("ALTER TABLE t ADD PARTITION (PARTITION p2 VALUES LESS THAN (200))", "db")
                  .harmless);
  EXPECT_FALSE(ddl_targets("ALTER TABLE t ADD INDEX (v), ADD COLUMN w int", "db").harmless);
  EXPECT_FALSE(ddl_targets("ALTER TABLE t ADD w int", "db").harmless);
  EXPECT_FALSE(ddl_targets("ALTER TABLE t MODIFY v bigint", "db").harmless);
  EXPECT_FALSE(ddl_targets("ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4", "db").harmless);
  EXPECT_FALSE(ddl_targets("ALTER TABLE t TRUNCATE PARTITION p0", "db").harmless);
  EXPECT_FALSE(ddl_targets("ALTER TABLE t ADD CONSTRAINT f FOREIGN KEY (a) REFERENCES p (id) "
                           "ON DELETE CASCADE",
                           "db")
                   .harmless);
  t = ddl_targets("ALTER TABLE pt EXCHANGE PARTITION p1 WITH TABLE ex", "db");
  EXPECT_FALSE(t.harmless);
  EXPECT_EQ(t.tables, (Targets{{"db", "pt"}, {"db", "ex"}}));
  // Statements that change no table, and ones that may.
  EXPECT_TRUE(ddl_targets("CREATE INDEX i ON t (a)", "db").harmless);
  EXPECT_TRUE(ddl_targets("CREATE DEFINER=`a`@`b` TRIGGER tr BEFORE INSERT ON t FOR EACH ROW "
                          "SET NEW.a = 1",
                          "db")
                  .harmless);
  EXPECT_TRUE(ddl_targets("CREATE TABLE x LIKE t", "db").harmless);
  EXPECT_TRUE(ddl_targets("SAVEPOINT s", "db").harmless);
  EXPECT_FALSE(ddl_targets("INSERT INTO t VALUES (1)", "db").harmless);
  EXPECT_FALSE(ddl_targets("UPDATE t SET a = 2", "db").harmless);
  // The second review's cases.
  t = ddl_targets("SET STATEMENT max_statement_time=100 FOR TRUNCATE TABLE t", "db");
  EXPECT_EQ(t.kind, Kind::kTruncate);
  EXPECT_EQ(t.tables, (Targets{{"db", "t"}}));
  t = ddl_targets("ALTER TABLE t CONVERT PARTITION p1 TO TABLE x", "db");
  EXPECT_FALSE(t.harmless);
  EXPECT_EQ(t.tables, (Targets{{"db", "t"}, {"db", "x"}}));
  t = ddl_targets("ALTER TABLE t CONVERT TABLE x TO PARTITION p2 VALUES LESS THAN (300)", "db");
  EXPECT_FALSE(t.harmless);
  EXPECT_EQ(t.tables, (Targets{{"db", "t"}, {"db", "x"}}));
  EXPECT_FALSE(ddl_targets("ALTER IGNORE TABLE t ADD UNIQUE (b)", "db").harmless);
  t = ddl_targets("RENAME TABLE IF EXISTS t TO t_old, t_new WAIT 5 TO t", "db");
  EXPECT_EQ(t.tables, (Targets{{"db", "t"}, {"db", "t_old"}, {"db", "t_new"}, {"db", "t"}}));
  EXPECT_FALSE(
      ddl_targets("ALTER TABLE t MODIFY b decimal(5,0) PARTITION BY KEY(a) PARTITIONS 2", "db")
          .harmless);
  EXPECT_TRUE(ddl_targets("ALTER TABLE t PARTITION BY KEY(a) PARTITIONS 2", "db").harmless);
  EXPECT_TRUE(ddl_targets("ALTER TABLE t REMOVE PARTITIONING", "db").harmless);
  EXPECT_FALSE(ddl_targets("ALTER TABLE t ENGINE=BLACKHOLE", "db").harmless);
  EXPECT_TRUE(ddl_targets("ALTER TABLE t ENGINE = InnoDB", "db").harmless);
  EXPECT_FALSE(
      ddl_targets("ALTER TABLE t ALTER COLUMN a SET DEFAULT (5--1), DROP COLUMN b", "db").harmless);
  EXPECT_FALSE(ddl_targets("ALTER TABLE t DROP /*M!999999 INDEX */ COLUMN b", "db").harmless);
  EXPECT_TRUE(ddl_targets("ALTER TABLE t DROP /*M!100500 INDEX */ i", "db").harmless);
  EXPECT_EQ(ddl_targets("RENAME TABLE a TO", "db").tables, (Targets{{"db", "a"}}));
  EXPECT_EQ(ddl_targets("TRUNCATE `unterminated", "db").tables, (Targets{{"db", "unterminated"}}));
}

TEST(MysqlDdlTest, MentionsAndHeads) {
  EXPECT_TRUE(mentions("CREATE INDEX i ON `t` (a)", "t"));
  EXPECT_TRUE(mentions("create index i on T(a)", "t"));
  EXPECT_FALSE(mentions("ALTER TABLE t2 ADD c int", "t"));
  EXPECT_FALSE(mentions("ALTER TABLE at ADD c int", "t"));
  EXPECT_EQ(statement_head("  /* x */ -- y\n COMMIT", 1), "commit");
  EXPECT_EQ(statement_head("Xa  Prepare 'x'", 2), "xa prepare");
}

}  // namespace
}  // namespace weir::sources::mysql
