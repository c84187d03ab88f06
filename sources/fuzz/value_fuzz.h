// value_fuzz's input format, shared by the fuzz target and its seed generator.
//
// The first byte selects what runs on the rest of the input:
//   bit 7 clear: encode_text_value of the rest as text, for the ColumnType the selector names
//                (kind = 1 + (bits 0-4) % 19, bit 5: array, bit 6: array delimiter ';'); what
//                encodes must print, and the print must encode to the identical bytes.
//   bit 7 set:   the rest as damaged bytes: print_value for that ColumnType, print_row and
//                split_row for a relation with a column of every kind and an array of every
//                kind, RelationDesc::decode (a desc that decodes re-encodes to the same bytes),
//                and parse_copy_text_line.
//   0xff:        (otherwise damaged bytes of timetz[] with ';', which 0xec selects too) the rest
//                as PostgreSQL's binary format; its first byte b selects:
//                  b bit 7 clear: encode_binary_value of the rest for selected_type(b); what
//                    encodes must print, and the print must encode (encode_text_value) to the
//                    identical bytes; on error nothing is written.
//                  b bit 7 set: a relation of b & 7 columns, whose types selected_type picks from
//                    the next b & 7 bytes; the rest is a COPY BINARY tuple for
//                    RowEncoder::encode_copy_binary_tuple. A row that encodes must print, and its
//                    line must encode (encode_copy_line) to the identical bytes.

#pragma once

#include <cstdint>

#include "weir/sources/postgres/value.h"

namespace weir::sources::postgres::fuzz {

inline constexpr uint8_t kDamagedBytes = 0x80;
inline constexpr uint8_t kArrayBit = 0x20;
inline constexpr uint8_t kSemicolonBit = 0x40;

inline ColumnType selected_type(uint8_t selector) {
  ColumnType type;
  type.kind = static_cast<TypeKind>(1 + (selector & 0x1f) % kMaxTypeKind);
  type.is_array = (selector & kArrayBit) != 0;
  type.delimiter = (selector & kSemicolonBit) != 0 ? ';' : ',';
  return type;
}

inline constexpr uint8_t kBinary = 0xff;
inline constexpr uint8_t kBinaryTuple = 0x80;
inline constexpr uint8_t kMaxTupleColumns = 7;

// The selector of a text input for `kind` (is_array: as an array with ',' delimiters).
inline uint8_t text_selector(TypeKind kind, bool is_array) {
  return static_cast<uint8_t>((static_cast<uint8_t>(kind) - 1) | (is_array ? kArrayBit : 0));
}

// The byte after kBinary that selects one binary value of `kind`.
inline uint8_t binary_selector(TypeKind kind, bool is_array) {
  return text_selector(kind, is_array);
}

}  // namespace weir::sources::postgres::fuzz
