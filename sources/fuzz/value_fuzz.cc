// value_fuzz: libFuzzer target for the text and binary decoders and the row printer
// (weir/sources/postgres/ value.h); the input format is in value_fuzz.h. A property that does not
// hold aborts with the offending value, so libFuzzer keeps the input.

#include "value_fuzz.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace pg = weir::sources::postgres;
namespace fuzz = weir::sources::postgres::fuzz;

[[noreturn]] void fail(const char* what, std::string_view a, std::string_view b) {
  std::fprintf(stderr, "value_fuzz: %s\n  first:  %.*s\n  second: %.*s\n", what,
               static_cast<int>(a.size()), a.data(), static_cast<int>(b.size()), b.data());
  std::abort();
}

pg::RelationDesc every_kind_desc() {
  pg::RelationDesc desc;
  desc.schema = "fuzz";
  desc.table = "every_kind";
  for (int array = 0; array < 2; ++array) {
    for (uint8_t kind = 1; kind <= pg::kMaxTypeKind; ++kind) {
      pg::Column c;
      c.type.kind = static_cast<pg::TypeKind>(kind);
      c.type.is_array = array == 1;
      c.name = std::string(pg::type_kind_name(c.type.kind)) + (array == 1 ? "_array" : "");
      desc.columns.push_back(std::move(c));
    }
  }
  return desc;
}

void check_text(const pg::ColumnType& type, std::string_view text) {
  std::string encoded;
  if (!pg::encode_text_value(type, text, encoded).ok()) {
    if (!encoded.empty()) {
      fail("encode_text_value failed but wrote bytes", text, encoded);
    }
    return;
  }
  std::string printed;
  if (absl::Status status = pg::print_value(type, encoded, printed); !status.ok()) {
    fail("print_value refused what encode_text_value wrote", text, status.ToString());
  }
  std::string again;
  if (absl::Status status = pg::encode_text_value(type, printed, again); !status.ok()) {
    fail("encode_text_value refused what print_value printed", printed, status.ToString());
  }
  if (again != encoded) {
    fail("printing and encoding again changed the bytes", text, printed);
  }
  std::string printed_again;
  if (!pg::print_value(type, again, printed_again).ok() || printed_again != printed) {
    fail("printing is not deterministic", printed, printed_again);
  }
}

void check_damaged(const pg::ColumnType& type, std::string_view bytes) {
  static const pg::RelationDesc desc = every_kind_desc();
  std::string out;
  (void)pg::print_value(type, bytes, out);
  out.clear();
  if (pg::print_row(desc, bytes, out).ok()) {
    std::vector<pg::EncodedValue> values;
    if (!pg::split_row(desc, bytes, values).ok()) {
      fail("print_row accepted a row split_row refused", bytes, out);
    }
  } else if (!out.empty()) {
    fail("print_row failed but wrote text", bytes, out);
  }
  std::vector<pg::EncodedValue> values;
  (void)pg::split_row(desc, bytes, values);
  if (auto decoded = pg::RelationDesc::decode(bytes); decoded.ok()) {
    if (decoded->encode() != bytes) {
      fail("RelationDesc::decode accepted a non-canonical encoding", bytes, decoded->encode());
    }
    (void)decoded->describe();
  }
  std::string scratch;
  std::vector<pg::TextField> fields;
  (void)pg::parse_copy_text_line(bytes, scratch, fields);
}

// One value in PostgreSQL's binary format: what encodes prints and encodes from the print alike.
void check_binary_value(const pg::ColumnType& type, std::string_view bytes) {
  std::string encoded = "prefix";
  if (!pg::encode_binary_value(type, bytes, encoded).ok()) {
    if (encoded != "prefix") {
      fail("encode_binary_value failed but wrote bytes", bytes, encoded);
    }
    return;
  }
  encoded.erase(0, 6);
  std::string printed;
  if (absl::Status status = pg::print_value(type, encoded, printed); !status.ok()) {
    fail("print_value refused what encode_binary_value wrote", bytes, status.ToString());
  }
  std::string from_text;
  if (absl::Status status = pg::encode_text_value(type, printed, from_text); !status.ok()) {
    fail("encode_text_value refused the print of a binary value", printed, status.ToString());
  }
  if (from_text != encoded) {
    fail("the binary value and its text encode differently", printed, bytes);
  }
}

// A COPY BINARY tuple of a relation whose column types the input picks.
void check_binary_tuple(uint8_t selector, std::string_view rest) {
  const size_t columns = selector & fuzz::kMaxTupleColumns;
  if (rest.size() < columns) {
    return;
  }
  pg::RelationDesc desc;
  desc.schema = "fuzz";
  desc.table = "binary";
  for (size_t i = 0; i < columns; ++i) {
    pg::Column c;
    c.name = "c" + std::to_string(i);
    c.type = fuzz::selected_type(static_cast<uint8_t>(rest[i]));
    desc.columns.push_back(std::move(c));
  }
  rest.remove_prefix(columns);
  pg::RowEncoder encoder(desc);
  std::string encoded = "prefix";
  if (!encoder.encode_copy_binary_tuple(rest, encoded).ok()) {
    if (encoded != "prefix") {
      fail("encode_copy_binary_tuple failed but wrote bytes", rest, encoded);
    }
    return;
  }
  encoded.erase(0, 6);
  if (columns == 0) {
    return;  // No COPY text line stands for a row without columns: "" is one empty field.
  }
  std::string line;
  if (absl::Status status = pg::print_row(desc, encoded, line); !status.ok()) {
    fail("print_row refused what encode_copy_binary_tuple wrote", rest, status.ToString());
  }
  std::string from_text;
  if (absl::Status status = encoder.encode_copy_line(line, from_text); !status.ok()) {
    fail("encode_copy_line refused the print of a binary tuple", line, status.ToString());
  }
  if (from_text != encoded) {
    fail("the binary tuple and its text line encode differently", line, rest);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  const uint8_t selector = data[0];
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const pg::ColumnType type = fuzz::selected_type(selector);
  if (selector == fuzz::kBinary) {
    if (rest.empty()) {
      return 0;
    }
    const auto binary_selector = static_cast<uint8_t>(rest[0]);
    if ((binary_selector & fuzz::kBinaryTuple) == 0) {
      check_binary_value(fuzz::selected_type(binary_selector), rest.substr(1));
    } else {
      check_binary_tuple(binary_selector, rest.substr(1));
    }
  } else if ((selector & fuzz::kDamagedBytes) == 0) {
    check_text(type, rest);
  } else {
    check_damaged(type, rest);
  }
  return 0;
}
