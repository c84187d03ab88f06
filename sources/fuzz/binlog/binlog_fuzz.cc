// binlog_fuzz: libFuzzer target for the binlog decoder (weir/sources/mysql/binlog.h): the event
// framing and bodies, and the row images, everything an upstream MySQL-family server's binlog
// bytes reach first. Each input is taken
//
//   - as one event, decoded by a fresh BinlogDecoder that expects a checksum and by one that
//     does not;
//   - as a stream of events (each as long as its header says), fed in order to one decoder, with
//     every TABLE_MAP kept and every rows event's images decoded by a RowDecoder against made-up
//     catalog columns that fit the table map's types (signedness, character sets and enum/set
//     elements varied by column);
//   - as the same stream with each event's CRC32 recomputed first, so that mutations get past the
//     checksum into the bodies.
//
// Bad input must be an error, never a crash, hang, read out of bounds or a huge allocation. What
// decodes is read whole, and oracles abort (a fuzzer "crash") when a property breaks: every view
// lies inside the input; an error has a message naming the binlog; a NULL value has no text; every
// canonical text is valid UTF-8 (binary values are hex, character data is converted or checked);
// the rows RowDecoder::encode makes are the bytes RowEncoder makes of the text, and it fails
// where the text does.
//
// Seeds: sources/fuzz/binlog/seeds/, events captured from MariaDB 10.11 by
// tests/sources/mysql_binlog_test.cc (WEIR_BINLOG_SEED_DIR), one event per file, and whole dumps
// (the events of one test, concatenated). Build and run: run.sh [SECONDS].

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "weir/sources/mysql/binlog.h"
#include "weir/sources/mysql/types.h"

namespace {

using namespace weir::sources::mysql;  // NOLINT(google-build-using-namespace): a fuzz target.

[[noreturn]] void fail(const char* what, std::string_view detail) {
  std::fprintf(stderr, "binlog_fuzz oracle: %s: %.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

// Keeps the compiler from dropping the reads.
volatile size_t sink;

void touch(std::string_view view, std::string_view input) {
  if (view.empty()) {
    return;
  }
  if (view.data() < input.data() || view.data() + view.size() > input.data() + input.size()) {
    fail("a view outside the input", view.substr(0, 16));
  }
  size_t sum = 0;
  for (char c : view) {
    sum += static_cast<unsigned char>(c);
  }
  sink = sink + sum;
}

void check_error(const absl::Status& status) {
  const std::string_view message(status.message().data(), status.message().size());
  if (message.find("binlog") == std::string_view::npos) {
    fail("an error that does not name the binlog", message);
  }
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    size_t n = b0 < 0x80             ? 1
               : (b0 & 0xe0) == 0xc0 ? 2
               : (b0 & 0xf0) == 0xe0 ? 3
               : (b0 & 0xf8) == 0xf0 ? 4
                                     : 0;
    if (n == 0 || i + n > s.size()) {
      return false;
    }
    uint32_t code = n == 1 ? b0 : b0 & (0x7f >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xc0) != 0x80) {
        return false;
      }
      code = code << 6 | (b & 0x3f);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kMin[n] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
      return false;
    }
    i += n;
  }
  return true;
}

void check(const Event& event, std::string_view input) {
  std::visit(
      [&](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, FormatDescriptionEvent>) {
          touch(e.server_version, input);
          touch(e.post_header_lengths, input);
        } else if constexpr (std::is_same_v<E, RotateEvent>) {
          touch(e.next_file, input);
        } else if constexpr (std::is_same_v<E, BinlogCheckpointEvent>) {
          touch(e.file, input);
        } else if constexpr (std::is_same_v<E, QueryEvent>) {
          touch(e.status_vars, input);
          touch(e.database, input);
          touch(e.query, input);
        } else if constexpr (std::is_same_v<E, HeartbeatEvent>) {
          touch(e.log_file, input);
        } else if constexpr (std::is_same_v<E, AnnotateRowsEvent>) {
          touch(e.query, input);
        } else if constexpr (std::is_same_v<E, GtidListEvent>) {
          sink = sink + e.gtids.size() + format_gtid(e.gtids.empty() ? Gtid{} : e.gtids[0]).size();
        } else if constexpr (std::is_same_v<E, TableMapEvent>) {
          if (e.metadata.size() != e.types.size() || e.nullable.size() != e.types.size()) {
            fail("a table map whose vectors differ in size", e.table);
          }
        } else if constexpr (std::is_same_v<E, RowsEvent>) {
          touch(e.extra_data, input);
          touch(e.columns_present, input);
          touch(e.columns_present_after, input);
          touch(e.rows, input);
        }
      },
      event.body);
}

// Catalog columns that fit `map`'s types, varied by column index.
std::vector<MysqlColumn> columns_for(const TableMapEvent& map) {
  static const char* const kCharsets[] = {"utf8mb4", "latin1", "ascii", "utf8mb3"};
  std::vector<MysqlColumn> columns(map.column_count());
  for (size_t i = 0; i < columns.size(); ++i) {
    MysqlColumn& c = columns[i];
    c.name = "c";
    c.is_unsigned = i % 2 == 1;
    c.charset = kCharsets[i % 4];
    c.elements = {"a", "\xc3\xa9", "", "x,y"};
    switch (map.types[i]) {
      case FieldType::kTiny:
        c.data_type = "tinyint";
        break;
      case FieldType::kShort:
        c.data_type = "smallint";
        break;
      case FieldType::kInt24:
        c.data_type = "mediumint";
        break;
      case FieldType::kLong:
        c.data_type = "int";
        break;
      case FieldType::kLongLong:
        c.data_type = "bigint";
        break;
      case FieldType::kFloat:
        c.data_type = "float";
        break;
      case FieldType::kDouble:
        c.data_type = "double";
        break;
      case FieldType::kNewDecimal:
        c.data_type = "decimal";
        break;
      case FieldType::kBit:
        c.data_type = "bit";
        break;
      case FieldType::kYear:
        c.data_type = "year";
        break;
      case FieldType::kDate:
      case FieldType::kNewDate:
        c.data_type = "date";
        break;
      case FieldType::kTime:
      case FieldType::kTime2:
        c.data_type = "time";
        break;
      case FieldType::kDatetime:
      case FieldType::kDatetime2:
        c.data_type = "datetime";
        break;
      case FieldType::kTimestamp:
      case FieldType::kTimestamp2:
        c.data_type = "timestamp";
        break;
      case FieldType::kVarchar:
      case FieldType::kVarString:
        c.data_type = i % 3 == 2 ? "varbinary" : "varchar";
        break;
      case FieldType::kEnum:
        c.data_type = "enum";
        break;
      case FieldType::kSet:
        c.data_type = "set";
        break;
      case FieldType::kString: {
        const auto real = static_cast<FieldType>((map.metadata[i] >> 8) | 0x30);
        c.data_type = real == FieldType::kEnum  ? "enum"
                      : real == FieldType::kSet ? "set"
                      : i % 3 == 2              ? "binary"
                                                : "char";
        break;
      }
      default:
        c.data_type = i % 3 == 2 ? "blob" : "longtext";
        break;
    }
  }
  return columns;
}

// RowDecoder::encode against the text path: the rows it delivers are the bytes RowEncoder makes of
// decode's text, and it fails where decoding or encoding the text fails, after the same rows.
void check_encoding(const TableMapEvent& table, const RowsEvent& change,
                    const std::vector<MysqlColumn>& columns) {
  namespace pg = weir::sources::postgres;
  pg::RelationDesc desc;
  std::vector<pg::ColumnType> types;
  for (const MysqlColumn& column : columns) {
    absl::StatusOr<pg::Column> weir = weir_column(column);
    if (!weir.ok()) {
      return;  // Refused before any row is read.
    }
    types.push_back(weir->type);
    desc.columns.push_back(*std::move(weir));
  }
  pg::RowEncoder encoder(desc);
  std::vector<std::string> from_text;
  RowDecoder text_rows;
  const absl::Status text_status =
      text_rows.decode(table, change, columns,
                       [&](std::span<const pg::TextField> before,
                           std::span<const pg::TextField> after) -> absl::Status {
                         for (auto image : {before, after}) {
                           if (!image.empty()) {
                             std::string row;
                             if (absl::Status status = encoder.encode(image, row); !status.ok()) {
                               return status;
                             }
                             from_text.push_back(std::move(row));
                           }
                         }
                         return absl::OkStatus();
                       });
  std::vector<std::string> direct;
  RowDecoder direct_rows;
  const absl::Status direct_status = direct_rows.encode(
      table, change, columns, types, [&](std::string_view before, std::string_view after) {
        for (std::string_view image : {before, after}) {
          if (!image.empty()) {
            direct.emplace_back(image);
          }
        }
        return absl::OkStatus();
      });
  if (!direct_status.ok()) {
    check_error(direct_status);
  }
  if (direct_status.ok() != text_status.ok()) {
    const absl::Status& refusal = direct_status.ok() ? text_status : direct_status;
    fail(direct_status.ok() ? "encode() took a row its text refuses"
                            : "encode() refused a row its text takes",
         std::string_view(refusal.message().data(), refusal.message().size()));
  }
  // A row whose after image fails is not delivered by encode(), but its before image may have
  // been encoded from the text: compare whole rows only.
  const size_t images = change.kind == RowsEvent::Kind::kUpdate ? 2 : 1;
  const size_t whole = std::min(direct.size(), from_text.size()) / images * images;
  for (size_t i = 0; i < whole; ++i) {
    if (direct[i] != from_text[i]) {
      fail("an encoded row that differs from its text's", direct[i]);
    }
  }
  if (direct_status.ok() && direct.size() != from_text.size()) {
    fail("encode() delivered another number of rows", "");
  }
}

void fuzz_single(std::string_view input) {
  for (ChecksumAlg alg : {ChecksumAlg::kCrc32, ChecksumAlg::kOff}) {
    BinlogDecoder decoder(alg);
    absl::StatusOr<Event> event = decoder.decode(input);
    if (event.ok()) {
      check(*event, input);
    } else {
      check_error(event.status());
    }
  }
}

void fuzz_stream(std::string_view input) {
  BinlogDecoder decoder(ChecksumAlg::kCrc32);
  RowDecoder rows;
  std::map<uint64_t, TableMapEvent> tables;
  std::map<uint64_t, std::vector<MysqlColumn>> catalogs;
  size_t pos = 0;
  while (pos < input.size()) {
    std::string_view rest = input.substr(pos);
    size_t size = rest.size();
    if (rest.size() >= kEventHeaderSize) {
      const size_t said = static_cast<unsigned char>(rest[9]) |
                          static_cast<unsigned char>(rest[10]) << 8 |
                          static_cast<unsigned char>(rest[11]) << 16 |
                          static_cast<size_t>(static_cast<unsigned char>(rest[12])) << 24;
      if (said >= kEventHeaderSize && said <= rest.size()) {
        size = said;
      }
    }
    const std::string_view bytes = rest.substr(0, size);
    pos += size;
    absl::StatusOr<Event> event = decoder.decode(bytes);
    if (!event.ok()) {
      check_error(event.status());
      continue;
    }
    check(*event, input);
    if (auto* map = std::get_if<TableMapEvent>(&event->body)) {
      catalogs[map->table_id] = columns_for(*map);
      tables[map->table_id] = std::move(*map);
    } else if (const auto* change = std::get_if<RowsEvent>(&event->body)) {
      auto table = tables.find(change->table_id);
      if (table == tables.end()) {
        continue;
      }
      const std::vector<MysqlColumn>& columns = catalogs[change->table_id];
      absl::Status status =
          rows.decode(table->second, *change, columns,
                      [&](std::span<const weir::sources::postgres::TextField> before,
                          std::span<const weir::sources::postgres::TextField> after) {
                        for (auto image : {before, after}) {
                          for (const auto& field : image) {
                            if (field.is_null && !field.text.empty()) {
                              fail("a NULL with text", field.text);
                            }
                            if (!valid_utf8(field.text)) {
                              fail("canonical text that is not UTF-8", field.text);
                            }
                            touch(field.text, field.text);
                          }
                        }
                        return absl::OkStatus();
                      });
      if (!status.ok()) {
        check_error(status);
      }
      check_encoding(table->second, *change, columns);
    }
  }
}

// The stream with each event's last 4 bytes replaced by the CRC32 of the bytes before them.
void fuzz_fixed_stream(std::string_view input) {
  std::string fixed(input);
  size_t pos = 0;
  while (fixed.size() - pos >= kEventHeaderSize) {
    const size_t said = static_cast<unsigned char>(fixed[pos + 9]) |
                        static_cast<unsigned char>(fixed[pos + 10]) << 8 |
                        static_cast<unsigned char>(fixed[pos + 11]) << 16 |
                        static_cast<size_t>(static_cast<unsigned char>(fixed[pos + 12])) << 24;
    if (said < kEventHeaderSize + kChecksumSize || said > fixed.size() - pos) {
      break;
    }
    const uint32_t crc = crc32(std::string_view(fixed).substr(pos, said - kChecksumSize));
    for (size_t i = 0; i < 4; ++i) {
      fixed[pos + said - 4 + i] = static_cast<char>(crc >> (8 * i) & 0xff);
    }
    pos += said;
  }
  fuzz_stream(fixed);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  fuzz_single(input);
  fuzz_stream(input);
  fuzz_fixed_stream(input);
  return 0;
}
