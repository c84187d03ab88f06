// value_fuzz_seeds DIR: writes value_fuzz's seed corpus into DIR: for every kind the edge values
// value_test.cc round-trips through PostgreSQL (as text inputs, alone and as arrays), and as
// damaged-bytes inputs their encodings, a full row of every kind and an encoded RelationDesc.
// run.sh calls it before every run, so the seeds follow the encoder.

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
  std::printf("value_fuzz_seeds: %d seeds in %s\n", n + 4, dir.c_str());
  return 0;
}
