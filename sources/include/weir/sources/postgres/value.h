// Typed PostgreSQL values and weir's compact binary row encoding.
//
// A table's shape is a RelationDesc (stored with the export's shard). Rows arrive as PostgreSQL's
// text output of each column (COPY ... TO STDOUT in text format, pgoutput's 't' columns) and are
// stored in a compact, deterministic binary encoding: the same text always gives the same bytes,
// so rows compare byte-wise (retractions). print_row turns an encoded row back into exactly the
// line `COPY t TO STDOUT` prints in a session with
//   DateStyle=ISO, MDY  IntervalStyle=postgres  TimeZone=UTC  extra_float_digits=1
//   bytea_output=hex
// and the text decoders expect those settings too (timestamptz accepts any offset; dates,
// intervals and bytea must be in these styles, bytea may also be in the escape format).
//
// Rows may also arrive as COPY BINARY tuples (PostgreSQL's binary send format of each column, for
// the types binary_decodable accepts); they encode to the same bytes as the text of the same
// values.
//
// Row encoding, format 1 (RelationDesc::row_format):
//   row      := null_bitmap value*      bitmap: ceil(columns/8) bytes, bit i (LSB first) set when
//                                       column i is NULL, unused bits zero; then the values of the
//                                       non-NULL columns in column order, nothing after them.
//   bool     := 1 byte (0 or 1)
//   int2/4/8 := zigzag LEB128 varint (minimal)            oid := LEB128 varint
//   float4/8 := 4/8 bytes little-endian IEEE 754 (one NaN: 0x7fc00000 / 0x7ff8000000000000)
//   numeric  := tag (0 +, 1 -, 2 NaN, 3 +Infinity, 4 -Infinity); finite: varint dscale,
//               varint ndigits, [zigzag weight, ndigits decimal digits two per byte, high nibble
//               first]: value = d1.d2...dn x 10^weight, no leading or trailing zero digit; zero
//               has ndigits 0 and tag 0
//   text, json, jsonb, bytea, and every type decoded as text := varint length, bytes
//   date     := zigzag varint days since 2000-01-01 (INT32_MIN -infinity, INT32_MAX infinity)
//   time     := varint microseconds since midnight
//   timetz   := varint microseconds, zigzag varint zone (seconds west of UTC, PostgreSQL's sign)
//   timestamp, timestamptz := 8 bytes little-endian microseconds since 2000-01-01 00:00 (UTC for
//               timestamptz; INT64_MIN -infinity, INT64_MAX infinity)
//   interval := zigzag varints months, days, microseconds
//   uuid     := 16 bytes
//   array    := varint body length, body; body := varint ndim (0: empty array, nothing follows);
//               per dimension varint length and zigzag lower bound; a byte 0 (no NULL element) or
//               1 followed by a bitmap of ceil(elements/8) bytes (bit set: NULL); then the non-NULL
//               elements, row-major, each in its kind's encoding.
//
// Thread safety: values and free functions; a RowEncoder is worker-local.

#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weir::sources::postgres {

// How a column's values are decoded and stored. The numbers are stored in encoded
// RelationDescs: never renumber.
enum class TypeKind : uint8_t {
  kBool = 1,
  kInt2 = 2,
  kInt4 = 3,
  kInt8 = 4,
  kOid = 5,
  kFloat4 = 6,
  kFloat8 = 7,
  kNumeric = 8,
  kText = 9,  // text, varchar, bpchar, name, "char", enums, and every type weir does not know
  kBytea = 10,
  kDate = 11,
  kTime = 12,
  kTimeTz = 13,
  kTimestamp = 14,
  kTimestampTz = 15,
  kInterval = 16,
  kUuid = 17,
  kJson = 18,
  kJsonb = 19,
};
inline constexpr uint8_t kMaxTypeKind = 19;

// "int4", "timestamptz", ...
std::string_view type_kind_name(TypeKind kind);

// A column's decoding: its kind, or for an array its element's kind and delimiter. Domains are
// their base type; an array whose elements are themselves arrays (a domain over an array type)
// has text elements.
struct ColumnType {
  TypeKind kind = TypeKind::kText;
  bool is_array = false;
  char delimiter = ',';  // arrays: the element type's typdelim

  bool operator==(const ColumnType&) const = default;
};

// The ColumnType of a built-in type by its OID (arrays of built-ins included); every other OID
// (enums, domains, extension types) is text. load_relation_desc (catalog.h) resolves the rest.
ColumnType builtin_column_type(uint32_t type_oid);

// format_type()'s name of a built-in type OID without modifier ("integer", "text[]"), or "" when
// the OID is not one weir knows.
std::string_view builtin_type_name(uint32_t type_oid);

struct Column {
  std::string name;
  uint32_t type_oid = 0;
  int32_t type_modifier = -1;  // atttypmod; -1: none
  bool nullable = true;
  ColumnType type;
  std::string type_name;  // format_type(type_oid, type_modifier); "" if unknown

  bool operator==(const Column&) const = default;
};

// The row encodings. A RelationDesc records which one its rows use.
inline constexpr uint32_t kRowFormatV1 = 1;

// A table's columns as weir stores them with the table's shard.
struct RelationDesc {
  std::string schema;
  std::string table;
  uint32_t table_oid = 0;
  uint32_t row_format = kRowFormatV1;
  std::vector<Column> columns;

  // A compact, versioned encoding; decode(encode()) == *this.
  std::string encode() const;
  // Every malformed input (truncated, trailing bytes, unknown version or kind) is an error that
  // names what is wrong.
  static absl::StatusOr<RelationDesc> decode(std::string_view bytes);

  // One line per column, "name type_name[ not null]", each ending in '\n'.
  std::string describe() const;

  // "schema.table"
  std::string qualified_name() const;

  // Whether rows described by `newer` (say, from a pgoutput Relation message after ALTER TABLE)
  // decode as rows of this one: the same number of columns with the same names, type OIDs and
  // modifiers. If not, `*why` (when not null) says which column differs and how.
  bool compatible_with(const RelationDesc& newer, std::string* why) const;

  bool operator==(const RelationDesc&) const = default;
};

// One field of a text row: a view of its (un-escaped) text, or NULL.
struct TextField {
  std::string_view text;
  bool is_null = false;
};

// Splits one line of COPY text format (without its '\n') into `fields` (cleared first): fields
// are separated by tabs, "\N" is NULL, and COPY's backslash escapes are undone. A field without
// a backslash is a view into `line`; an un-escaped one is a view into `scratch`, which is
// overwritten. Both views live until `line` or `scratch` change. Reusing `fields` and `scratch`
// makes it allocation-free in steady state.
absl::Status parse_copy_text_line(std::string_view line, std::string& scratch,
                                  std::vector<TextField>& fields);

// Appends the encoding of one value given as PostgreSQL's text output of its type. On error
// `out` is unchanged and the message quotes the value (at most 64 bytes of it).
absl::Status encode_text_value(const ColumnType& type, std::string_view text, std::string& out);

// Values a source has decoded itself (the MySQL binlog's binary row images), appended without
// going through their text: each appends exactly what encode_text_value appends for the value's
// text in `kind`, and refuses what it refuses (then `out` is unchanged).
//
// int2, int4, int8: `v` must be in the kind's range (the caller checks).
void encode_int_value(int64_t v, std::string& out);
// float4, float8 (NaN is stored as the one NaN).
void encode_float4_value(float v, std::string& out);
void encode_float8_value(double v, std::string& out);
// text, json, jsonb: the bytes as they are (the caller checks the encoding).
void encode_text_bytes(std::string_view text, std::string& out);
// numeric: the value written [-]int_digits[.frac_digits] (digits only, at least one in all;
// int_digits may be empty or have leading zeros; dscale is frac_digits' length).
absl::Status encode_numeric_value(bool negative, std::string_view int_digits,
                                  std::string_view frac_digits, std::string& out);
// date: a day of the proleptic Gregorian calendar; `year` is astronomical (0 is 1 BC).
absl::Status encode_date_value(int64_t year, int64_t month, int64_t day, std::string& out);
// timestamp (and timestamptz, for a time in UTC): a day as encode_date_value's and the
// microseconds since its midnight (0 to 24 hours).
absl::Status encode_timestamp_value(int64_t year, int64_t month, int64_t day, int64_t micros_of_day,
                                    std::string& out);

// Whether a column's values can be decoded from PostgreSQL's binary format: built-in scalar types
// of every TypeKind except kText, plus text (25), varchar (1043), bpchar (1042), name (19), and
// one-dimensional-or-more arrays of those (by Column::type_oid: the built-in array OIDs).
// Enums, domains and unknown types (kind kText via catalog) are not: a table with one is copied in
// text. A column whose `type` is not builtin_column_type(type_oid) is not either.
bool binary_decodable(const Column& column);

// Appends the encoding of one value given in PostgreSQL's binary send format (the bytes of one
// field of COPY BINARY, without its length word). Same output as encode_text_value for the same
// value. PostgreSQL's receive functions define the value: a numeric's digits beyond its dscale
// are cut off (numeric_recv), a zero-length array dimension is the empty array (array_recv). What
// the text path refuses (dates, timestamps, times and zones out of range, a numeric scale over
// 16383 or more than 131072 digits before the point) is refused here too, as is anything
// malformed (wrong size, truncated, trailing bytes, a bool other than 0 or 1, a jsonb version
// other than 1, an array element of another type). On error `out` is unchanged and the message
// says what is wrong.
absl::Status encode_binary_value(const ColumnType& type, std::string_view bytes, std::string& out);

// Encodes whole rows of one relation. Worker-local; it keeps scratch space so that encoding
// allocates nothing in steady state (besides `out` growing).
//
//   RowEncoder encoder(desc);
//   std::string rows;
//   WEIR_RETURN_IF_ERROR(encoder.encode_copy_line("1\t\\N\tabc", rows));
class RowEncoder {
 public:
  explicit RowEncoder(const RelationDesc& desc);

  // Appends one row: fields[i] is column i. Errors name the column and quote the value; `out`
  // is then unchanged.
  absl::Status encode(std::span<const TextField> fields, std::string& out);

  // Appends the row of one COPY text line (without its '\n').
  absl::Status encode_copy_line(std::string_view line, std::string& out);

  // Appends the row of one COPY BINARY tuple: int16 field count (must equal the columns), then
  // per field int32 length (-1: NULL) and that many bytes. The whole of `tuple` must be consumed.
  // Errors name the column (like encode()); `out` is then unchanged. The same row as
  // encode_copy_line of the text COPY of the same values; allocates nothing beyond `out`.
  //
  //   // Every column binary_decodable; tuples of COPY t TO STDOUT (FORMAT binary), the file
  //   // header and the trailer (field count -1) taken off by the caller.
  //   WEIR_RETURN_IF_ERROR(encoder.encode_copy_binary_tuple(tuple, rows));
  absl::Status encode_copy_binary_tuple(std::string_view tuple, std::string& out);

  size_t num_columns() const { return types_.size(); }

 private:
  std::vector<ColumnType> types_;
  std::vector<std::string> names_;
  std::string qualified_name_;
  std::string scratch_;
  std::vector<TextField> fields_;
};

// One value of an encoded row: a view of its encoding (as encode_text_value wrote it), or NULL.
struct EncodedValue {
  std::string_view bytes;
  bool is_null = false;
};

// Splits an encoded row into its values (views into `encoded`; `values` is cleared first).
// Damaged input is an error, never a read past its end.
absl::Status split_row(const RelationDesc& desc, std::string_view encoded,
                       std::vector<EncodedValue>& values);

// Appends one value's text as PostgreSQL prints it (no COPY escaping). `encoded` is exactly one
// value's encoding; anything else is an error.
absl::Status print_value(const ColumnType& type, std::string_view encoded, std::string& out);

// Appends an encoded row as the line `COPY t TO STDOUT` prints (without the '\n'): tab-separated,
// "\N" for NULL, COPY's backslash escapes. On error (a damaged row) `out` is unchanged.
absl::Status print_row(const RelationDesc& desc, std::string_view encoded, std::string& out);

}  // namespace weir::sources::postgres
