// MySQL-family columns, and how their values become weir's typed rows.
//
// A MySQL column maps to a weir column (postgres::Column: a PostgreSQL type whose text format
// and row encoding weir already has, value.h), so that shards of either source are printed,
// compared and read back alike. Every value, whether it comes from the snapshot's SELECT (the
// text protocol) or from a binlog row image (binary), is defined by its *canonical text*, the
// text below, encoded with postgres::encode_text_value for the mapped type. The snapshot's values
// go through that text; the binlog's common types (integers, floats, decimal, date, datetime,
// timestamp, UTF-8 and ASCII strings) are encoded straight from their image to the same bytes
// (RowDecoder::encode, binlog.h), the others through the text. Both paths give the same bytes
// for the same value.
//
//   MySQL type                    weir type (OID)                canonical text
//   tinyint, smallint, year       int2 (21)                      decimal ("-12"; year 0 is "0")
//   tinyint/smallint unsigned     int2 / int4 (23)
//   mediumint [unsigned], int     int4
//   int unsigned, bigint          int8 (20)
//   bigint unsigned               numeric (1700)
//   decimal(p,s)                  numeric(p,s) (1700)            as MySQL prints it ("-1.50")
//   float                         float4 (700)                   text that strtof reads back as
//   double                        float8 (701)                   the value (strtod for double)
//   bit(n)                        bit varying(n) (1562, text)    n characters '0'/'1', MSB first
//   char(n), varchar(n)           varchar(n) (1043)              UTF-8; CHAR's trailing spaces
//   tinytext .. longtext          text (25)                      removed (as SELECT prints it)
//   json (longtext + json_valid)  json (114)                     the document's text
//   binary(n), varbinary, *blob   bytea (17)                     "\x" + lowercase hex; binary(n)
//                                                                padded with 0 bytes to n
//   date                          date (1082)                    "YYYY-MM-DD"; MySQL's year 0 is
//                                                                PostgreSQL's 1 BC: "0001-MM-DD BC"
//   time(f)                       interval (1186)                "[-]H:MM:SS[.ffffff]" (hours up
//                                                                to 838)
//   datetime(f)                   timestamp(f) (1114)            "YYYY-MM-DD HH:MM:SS[.f]" with
//                                                                f fraction digits (year 0: as
//                                                                for date, then " BC")
//   timestamp(f)                  timestamptz(f) (1184)          the same in UTC, then "+00"
//   enum(...)                     text (kind text)               the element; index 0 (the
//                                                                invalid value) is ""
//   set(...)                      text (kind text)               the elements present, in
//                                                                definition order, joined by ','
//
// Zero dates and datetimes ("0000-00-00", a zero month or day) and invalid ones ("2024-02-30",
// stored under ALLOW_INVALID_DATES) have no weir value: an error that names the column and quotes
// the value. Character data in utf8mb4, utf8mb3 (utf8), ascii and latin1 (MySQL's latin1 is
// Windows-1252) becomes UTF-8; a NUL character (which PostgreSQL's text cannot hold) is an error
// like a zero date. Other character sets, spatial types and every type not above (uuid, inet4,
// inet6 included) are refused with an error naming the column and its type. Text types in the
// binary character set hold bytes: bytea. Float and double canonical text is the shortest that
// reads back exactly ("-0" for a negative zero, which an underflow can store).
//
// Enum and set elements come from information_schema, which shows a character outside the BMP
// (an emoji) as '?': such an element differs there from what SELECT returns.
//
// Thread safety: values and free functions.

#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "weir/sources/postgres/value.h"

namespace weir::sources::mysql {

// The column types of the binlog (TABLE_MAP) and the protocol: MySQL's enum_field_types.
enum class FieldType : uint8_t {
  kDecimal = 0,
  kTiny = 1,
  kShort = 2,
  kLong = 3,
  kFloat = 4,
  kDouble = 5,
  kNull = 6,
  kTimestamp = 7,
  kLongLong = 8,
  kInt24 = 9,
  kDate = 10,
  kTime = 11,
  kDatetime = 12,
  kYear = 13,
  kNewDate = 14,
  kVarchar = 15,
  kBit = 16,
  kTimestamp2 = 17,
  kDatetime2 = 18,
  kTime2 = 19,
  kJson = 245,  // MySQL's binary JSON; MariaDB logs JSON as a blob.
  kNewDecimal = 246,
  kEnum = 247,
  kSet = 248,
  kTinyBlob = 249,
  kMediumBlob = 250,
  kLongBlob = 251,
  kBlob = 252,
  kVarString = 253,
  kString = 254,
  kGeometry = 255,
};

// What weir knows of one column of an upstream table (information_schema.COLUMNS and, for
// json, CHECK_CONSTRAINTS).
struct MysqlColumn {
  std::string name;
  std::string data_type;    // DATA_TYPE, lower case: "int", "varchar", "enum", "longtext", ...
  std::string column_type;  // COLUMN_TYPE: "int(10) unsigned", "enum('a','b')", ...
  bool is_unsigned = false;
  bool nullable = true;
  bool is_json = false;    // A longtext with a json_valid(...) check (MariaDB's JSON).
  std::string charset;     // CHARACTER_SET_NAME ("utf8mb4", "latin1", ...); "" if none
  uint32_t length = 0;     // char/varchar/binary/varbinary: the declared length; bit: width
  uint32_t precision = 0;  // decimal: NUMERIC_PRECISION
  uint32_t scale = 0;      // decimal: NUMERIC_SCALE; time/datetime/timestamp: fraction digits
  std::vector<std::string> elements;  // enum and set: the values, in definition order
  bool primary_key = false;

  bool operator==(const MysqlColumn&) const = default;
};

// The weir column `column` maps to (see the table above). Unimplemented, naming the column and
// its type, for a type or character set weir does not take.
absl::StatusOr<postgres::Column> weir_column(const MysqlColumn& column);

// A table's weir description: schema = the database, its columns mapped by weir_column.
absl::StatusOr<postgres::RelationDesc> relation_desc(std::string_view database,
                                                     std::string_view table,
                                                     const std::vector<MysqlColumn>& columns);

// `name` quoted as a MySQL identifier (backticks, a backtick doubled).
std::string quote_identifier(std::string_view name);

// The expression the snapshot's SELECT reads `column` with (in a session with time_zone
// '+00:00' and character set utf8mb4): the quoted column, or an expression of it where the
// plain text would lose something (float: as a double; float and double: a negative zero's sign;
// bit: as '0'/'1' digits, without leading zeros).
std::string select_expression(const MysqlColumn& column);

// Appends the canonical text of one non-NULL value, as the text protocol gives
// select_expression(column). On error `out` is unchanged and the message names the column.
absl::Status canonical_from_select(const MysqlColumn& column, std::string_view value,
                                   std::string& out);

}  // namespace weir::sources::mysql
