// value_fuzz_seeds DIR: writes value_fuzz's seed corpus into DIR: for every kind the edge values
// value_test.cc round-trips through PostgreSQL (as text inputs, alone and as arrays), and as
// damaged-bytes inputs their encodings, a full row of every kind and an encoded RelationDesc;
// and binary inputs: edge values of every kind in PostgreSQL's binary format, alone, in arrays
// (one and two dimensions, NULLs, lower bounds other than 1) and in COPY BINARY tuples.
// run.sh calls it before every run, so the seeds follow the encoder.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "value_fuzz.h"

namespace {

namespace pg = weir::sources::postgres;
namespace fuzz = weir::sources::postgres::fuzz;
using pg::TypeKind;

struct Seeds {
  TypeKind kind;
  std::vector<std::string> values;  // text of single values
  std::vector<std::string> arrays;  // array literals
};

std::vector<Seeds> seeds() {
  return {
      {TypeKind::kBool, {"t", "f", "true", "off"}, {"{t,f,NULL}"}},
      {TypeKind::kInt2, {"-32768", "32767", "0"}, {"{1,-1}"}},
      {TypeKind::kInt4,
       {"-2147483648", "2147483647", " +7 "},
       {"{1,2,3}", "{{1,2},{3,4}}", "{1,NULL,3}", "{}", "[2:3]={1,2}", "[0:1][-1:0]={{1,2},{3,4}}",
        "{{{1},{2}},{{3},{4}}}"}},
      {TypeKind::kInt8, {"-9223372036854775808", "9223372036854775807"}, {"{42}"}},
      {TypeKind::kOid, {"0", "4294967295"}, {"{1,4294967295}"}},
      {TypeKind::kFloat4,
       {"-0", "NaN", "Infinity", "1e-40", "1e-45", "3.4028235e+38", "0.1", "1.234567e+06",
        "123456"},
       {"{1.5,-0,NaN}"}},
      {TypeKind::kFloat8,
       {"-0", "NaN", "-Infinity", "1e-310", "5e-324", "1.7976931348623157e+308", "0.1", "1e+15",
        "123456789012345", "1e-05", "0.0001", "2.6354920666280888e+16"},
       {"{NaN,-Infinity,1e-310,-0,1e+300}"}},
      {TypeKind::kNumeric,
       {"0", "0.00", "NaN", "Infinity", "-Infinity", "0.001", "1500", "-123.4500", "1e-1000",
        std::string(200, '7') + "." + std::string(100, '3'), "1.5e3"},
       {"{1.50,NaN,-Infinity,0.000}"}},
      {TypeKind::kText,
       {"a\tb", "line\nbreak", "back\\slash", "h\u00e9llo \u2603", "", " x ", "\\N", "NULL"},
       {R"({"a b","c,d","e\"f","g\\h",NULL,"NULL","",x})", "{\"{braces}\"}", "{null,Null}"}},
      {TypeKind::kBytea, {"\\x", "\\x00ff10", "\\x 00 ff", "ab\\\\c\\001"}, {"{\"\\\\x00ff\"}"}},
      {TypeKind::kDate,
       {"2000-01-01", "0001-01-01 BC", "4713-11-24 BC", "5874897-12-31", "infinity", "-infinity",
        "2024-02-29"},
       {"{2000-01-01,\"0001-01-01 BC\",infinity}"}},
      {TypeKind::kTime,
       {"00:00:00", "24:00:00", "12:34:56.789012", "23:59:59.9999999"},
       {"{00:00:00,24:00:00}"}},
      {TypeKind::kTimeTz,
       {"00:00:00+00", "12:00:00.5+05:30", "23:59:59-15:59:59", "10:00:00+00:00:30"},
       {"{00:00:00+01,12:00:00-05:30}"}},
      {TypeKind::kTimestamp,
       {"2000-01-01 00:00:00", "0001-01-01 00:00:00 BC", "4713-11-24 00:00:00 BC",
        "294276-12-31 23:59:59.999999", "infinity", "-infinity", "2024-02-29 12:34:56.5"},
       {"{\"2000-01-01 00:00:00\",infinity}"}},
      {TypeKind::kTimestampTz,
       {"2000-01-01 00:00:00+02", "0001-01-01 00:00:00+00 BC", "294276-12-31 23:59:59.999999+00",
        "infinity", "1900-01-01 00:00:00+00:19:32"},
       {"{\"2000-01-01 00:00:00.5+00\",-infinity}"}},
      {TypeKind::kInterval,
       {"00:00:00", "1 year", "-1 years -2 mons +3 days -04:05:06.5", "1 day -00:00:01",
        "100000:00:00", "-178956970 years -8 mons", "2562047788:00:54.775807",
        "-2562047788:00:54.775808"},
       {"{\"1 day\",\"-1 years +2 mons\",00:00:00}"}},
      {TypeKind::kUuid,
       {"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "{A0EEBC99-9C0B4EF8-BB6D6BB9-BD380A11}"},
       {"{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,NULL}"}},
      {TypeKind::kJson, {"{\"a\" :  1,   \"b\":[1, 2]}", "null"}, {"{\"{\\\"a\\\": 1}\"}"}},
      {TypeKind::kJsonb, {"{\"a\": [1, \"x\", null]}"}, {"{null}"}},
  };
}

// Big-endian bytes, as PostgreSQL's send functions write them.
struct NetworkBytes {
  std::string bytes;
  NetworkBytes& be(uint64_t v, int size) {
    for (int i = size - 1; i >= 0; --i) {
      bytes += static_cast<char>(v >> (8 * i));
    }
    return *this;
  }
  NetworkBytes& raw(std::string_view v) {
    bytes.append(v);
    return *this;
  }
  NetworkBytes& field(std::string_view v) {
    be(v.size(), 4);
    return raw(v);
  }
  NetworkBytes& null_field() { return be(0xffffffff, 4); }
};

std::string be(uint64_t v, int size) { return NetworkBytes().be(v, size).bytes; }

// numeric_send of base-10000 digits.
std::string numeric(int16_t weight, uint16_t sign, uint16_t dscale, std::vector<uint16_t> digits) {
  NetworkBytes b;
  b.be(digits.size(), 2).be(static_cast<uint16_t>(weight), 2).be(sign, 2).be(dscale, 2);
  for (uint16_t d : digits) {
    b.be(d, 2);
  }
  return b.bytes;
}

struct BinarySeeds {
  TypeKind kind;
  uint32_t element_oid;
  std::vector<std::string> values;  // binary send format of single values
};

std::vector<BinarySeeds> binary_seeds() {
  const uint64_t kInt64Min = uint64_t{1} << 63;
  return {
      {TypeKind::kBool, 16, {"\x01", std::string(1, '\0')}},
      {TypeKind::kInt2, 21, {be(0x8000, 2), be(0x7fff, 2)}},
      {TypeKind::kInt4, 23, {be(0x80000000, 4), be(7, 4)}},
      {TypeKind::kInt8, 20, {be(kInt64Min, 8), be(42, 8)}},
      {TypeKind::kOid, 26, {be(0xffffffff, 4)}},
      {TypeKind::kFloat4, 700, {be(0x80000000, 4), be(0x7fc00000, 4), be(0x00000001, 4)}},
      {TypeKind::kFloat8,
       701,
       {be(0x8000000000000000, 8), be(0xfff0000000000000, 8), be(0x3fb999999999999a, 8)}},
      {TypeKind::kNumeric,
       1700,
       {numeric(0, 0x4000, 4, {123, 4500}), numeric(0, 0, 2, {}), numeric(0, 0xC000, 0, {}),
        numeric(0, 0xD000, 0, {}), numeric(-250, 0, 1000, {1}), numeric(1, 0, 1, {0, 1, 2345}),
        numeric(32767, 0, 0, {1000})}},
      {TypeKind::kText, 25, {"", "a\tb\\c", "h\u00e9llo"}},
      {TypeKind::kBytea, 17, {"", std::string("\0\xff\\", 3)}},
      {TypeKind::kDate, 1082, {be(0, 4), be(0x80000000, 4), be(0x7fffffff, 4), be(-2451545, 4)}},
      {TypeKind::kTime, 1083, {be(0, 8), be(86400000000, 8)}},
      {TypeKind::kTimeTz, 1266, {be(0, 8) + be(static_cast<uint32_t>(-19800), 4)}},
      {TypeKind::kTimestamp,
       1114,
       {be(0, 8), be(kInt64Min, 8), be(static_cast<uint64_t>(-211813488000000000), 8),
        be(9223371331199999999, 8)}},
      {TypeKind::kTimestampTz, 1184, {be(768294489500000, 8), be(0x7fffffffffffffff, 8)}},
      {TypeKind::kInterval,
       1186,
       {be(kInt64Min, 8) + be(0x80000000, 4) + be(0x80000000, 4),
        be(static_cast<uint64_t>(-1), 8) + be(3, 4) + be(static_cast<uint32_t>(-14), 4)}},
      {TypeKind::kUuid, 2950, {std::string(16, '\x5a')}},
      {TypeKind::kJson, 114, {"{\"a\": 1}"}},
      {TypeKind::kJsonb, 3802, {"\x01{\"a\": [1, null]}"}},
  };
}

// array_send of `elements` (NULL where nullopt) in the given dimensions.
std::string binary_array(uint32_t element_oid, std::vector<std::pair<int32_t, int32_t>> dims,
                         const std::vector<const std::string*>& elements) {
  NetworkBytes b;
  bool has_null = false;
  for (const std::string* e : elements) {
    has_null |= e == nullptr;
  }
  b.be(dims.size(), 4).be(has_null ? 1 : 0, 4).be(element_oid, 4);
  for (const auto& [length, lower] : dims) {
    b.be(static_cast<uint32_t>(length), 4).be(static_cast<uint32_t>(lower), 4);
  }
  for (const std::string* e : elements) {
    if (e == nullptr) {
      b.null_field();
    } else {
      b.field(*e);
    }
  }
  return b.bytes;
}

void write(const std::filesystem::path& dir, const std::string& name, uint8_t selector,
           std::string_view body) {
  std::ofstream out(dir / name, std::ios::binary);
  out.put(static_cast<char>(selector));
  out.write(body.data(), static_cast<std::streamsize>(body.size()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: value_fuzz_seeds DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  int n = 0;
  // A row of every kind and every array kind (the damaged-bytes target's relation).
  pg::RelationDesc desc;
  desc.schema = "fuzz";
  desc.table = "every_kind";
  std::vector<std::string> row_text(size_t{2} * pg::kMaxTypeKind);
  for (const Seeds& s : seeds()) {
    for (int array = 0; array < 2; ++array) {
      const auto& texts = array == 1 ? s.arrays : s.values;
      const uint8_t selector = fuzz::text_selector(s.kind, array == 1);
      const pg::ColumnType type = fuzz::selected_type(selector);
      for (const std::string& text : texts) {
        write(dir, "text-" + std::to_string(n++), selector, text);
        std::string encoded;
        if (pg::encode_text_value(type, text, encoded).ok()) {
          write(dir, "bytes-" + std::to_string(n++), selector | fuzz::kDamagedBytes, encoded);
        } else {
          std::fprintf(stderr, "value_fuzz_seeds: seed %s does not encode\n", text.c_str());
          return 1;
        }
      }
      row_text[static_cast<size_t>(array * pg::kMaxTypeKind + static_cast<int>(s.kind) - 1)] =
          texts.front();
    }
  }
  for (int array = 0; array < 2; ++array) {
    for (uint8_t kind = 1; kind <= pg::kMaxTypeKind; ++kind) {
      pg::Column c;
      c.type.kind = static_cast<pg::TypeKind>(kind);
      c.type.is_array = array == 1;
      c.name = std::string(pg::type_kind_name(c.type.kind)) + (array == 1 ? "_array" : "");
      desc.columns.push_back(std::move(c));
    }
  }
  pg::RowEncoder encoder(desc);
  std::vector<pg::TextField> fields;
  fields.reserve(row_text.size());
  for (const std::string& text : row_text) {
    fields.push_back({text, false});
  }
  std::string row;
  if (auto status = encoder.encode(fields, row); !status.ok()) {
    std::fprintf(stderr, "value_fuzz_seeds: %s\n", status.ToString().c_str());
    return 1;
  }
  write(dir, "row-every-kind", fuzz::kDamagedBytes, row);
  for (size_t i = 0; i < fields.size(); i += 3) {
    fields[i].is_null = true;
  }
  row.clear();
  (void)encoder.encode(fields, row);
  write(dir, "row-with-nulls", fuzz::kDamagedBytes, row);
  write(dir, "relation-desc", fuzz::kDamagedBytes, desc.encode());
  write(dir, "copy-line", fuzz::kDamagedBytes, "1\t\\N\ta\\tb\\\\c\\x41\\101");
  // Binary values, alone and in arrays, and tuples of them.
  std::vector<std::pair<uint8_t, std::string>> tuple_fields;
  for (const BinarySeeds& s : binary_seeds()) {
    const uint8_t value_selector = fuzz::binary_selector(s.kind, false);
    const uint8_t array_selector = fuzz::binary_selector(s.kind, true);
    std::vector<const std::string*> elements;
    for (const std::string& v : s.values) {
      write(dir, "binary-" + std::to_string(n++), fuzz::kBinary,
            std::string(1, static_cast<char>(value_selector)) + v);
      elements.push_back(&v);
    }
    const std::string one_dim =
        binary_array(s.element_oid, {{static_cast<int32_t>(elements.size()), 1}}, elements);
    elements.push_back(nullptr);
    const std::string two_dim =
        binary_array(s.element_oid, {{2, -3}, {static_cast<int32_t>(elements.size()), 7}}, [&] {
          std::vector<const std::string*> twice = elements;
          twice.insert(twice.end(), elements.begin(), elements.end());
          return twice;
        }());
    for (const std::string* array : {&one_dim, &two_dim}) {
      write(dir, "binary-" + std::to_string(n++), fuzz::kBinary,
            std::string(1, static_cast<char>(array_selector)) + *array);
    }
    tuple_fields.emplace_back(value_selector, s.values.front());
    tuple_fields.emplace_back(array_selector, two_dim);
  }
  write(dir, "binary-empty-array", fuzz::kBinary,
        std::string(1, static_cast<char>(fuzz::binary_selector(TypeKind::kInt4, true))) +
            binary_array(23, {}, {}));
  // Tuples of up to kMaxTupleColumns columns, some NULL.
  for (size_t first = 0; first < tuple_fields.size(); first += fuzz::kMaxTupleColumns) {
    const size_t columns = std::min<size_t>(fuzz::kMaxTupleColumns, tuple_fields.size() - first);
    std::string input(1, static_cast<char>(fuzz::kBinaryTuple | columns));
    NetworkBytes tuple;
    tuple.be(columns, 2);
    for (size_t i = first; i < first + columns; ++i) {
      input += static_cast<char>(tuple_fields[i].first);
      if (i % 5 == 4) {
        tuple.null_field();
      } else {
        tuple.field(tuple_fields[i].second);
      }
    }
    write(dir, "binary-tuple-" + std::to_string(n++), fuzz::kBinary, input + tuple.bytes);
  }
  std::printf("value_fuzz_seeds: %d seeds in %s\n", n + 5, dir.c_str());
  return 0;
}
