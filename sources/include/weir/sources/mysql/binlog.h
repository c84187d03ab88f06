// The binlog of MySQL-family servers (MariaDB 10.11 first): events and row images, as pure byte
// parsing (no libmariadb here: opening a dump lives in sources/src/mysql/binlog_dump.h).
//
// A binlog dump (COM_BINLOG_DUMP) sends one event per network packet. BinlogDecoder::decode takes
// one event's bytes (what mariadb_rpl_fetch leaves at raw_data + raw_data_ofs: the packet without
// its leading OK byte): the 19-byte common header, the event's body and, when the binlog is
// checksummed, a 4-byte CRC32 which decode verifies. The decoder remembers what the last
// FORMAT_DESCRIPTION said (checksum algorithm, post-header lengths), so one decoder reads one
// dump, in order.
//
// Row events carry row images in the binary format of each column type. RowDecoder turns them
// into each column's *canonical text* (types.h), the same text the snapshot's SELECT gives, using
// the TABLE_MAP that precedes them (column types, type metadata) and the catalog's columns
// (signedness, character set, enum and set elements).
//
//   BinlogDecoder decoder(ChecksumAlg::kCrc32);  // what the dump announced, binlog_dump.h
//   RowDecoder rows;
//   absl::flat_hash_map<uint64_t, TableMapEvent> tables;
//   WEIR_ASSIGN_OR_RETURN(Event event, decoder.decode(bytes));
//   if (auto* map = std::get_if<TableMapEvent>(&event.body)) {
//     tables[map->table_id] = std::move(*map);
//   } else if (auto* change = std::get_if<RowsEvent>(&event.body)) {
//     WEIR_RETURN_IF_ERROR(rows.decode(tables.at(change->table_id), *change, columns,
//         [&](std::span<const postgres::TextField> before,
//             std::span<const postgres::TextField> after) { ...; return absl::OkStatus(); }));
//   }
//
// Errors: every malformed event (truncated, a length past its end, a bad checksum, counts that do
// not match, trailing bytes where none may be) is an InvalidArgument status that names the event
// type, what is wrong and the byte offset; never a read out of bounds, and no allocation is sized
// by a length field before the bytes it promises were checked to be there. Events weir does not
// need are UnknownEvent, not errors; compressed events (log_bin_compress=ON) are Unimplemented.
// Row values the canonical text cannot hold (zero dates, unsupported types or character sets) are
// InvalidArgument or Unimplemented errors that name the column.
//
// Formats: https://mariadb.com/kb/en/replication-protocol/ and MySQL's libbinlogevents; what the
// server really sends was checked against MariaDB 10.11 by tests/sources/mysql_binlog_test.cc:
//   - CHAR(n) values are logged with their trailing spaces removed; BINARY(n) values with their
//     trailing 0x00 bytes removed (RowDecoder pads them back to the STRING metadata's length).
//   - MariaDB logs row events as v1 (types 23-25), with binlog_row_image=FULL every column
//     present; JSON columns as LONGTEXT blobs; ENUM and SET as STRING with the real type in the
//     metadata; DATE as type 10 (3 bytes).
//   - binlog_row_metadata defaults to NO_LOG: TABLE_MAP events carry no optional metadata (no
//     column names, no signedness), so the catalog's columns are needed to decode.
//
// Thread safety: free functions are thread-safe; a BinlogDecoder or RowDecoder is worker-local.
// A decoded Event views the event's bytes; a TableMapEvent owns its data (it outlives the event).

#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "weir/sources/mysql/types.h"
#include "weir/sources/postgres/value.h"

namespace weir::sources::mysql {

// Log_event_type: the events weir reads or recognises.
enum class EventType : uint8_t {
  kUnknown = 0,
  kQuery = 2,
  kStop = 3,
  kRotate = 4,
  kFormatDescription = 15,
  kXid = 16,
  kTableMap = 19,
  kWriteRowsV1 = 23,
  kUpdateRowsV1 = 24,
  kDeleteRowsV1 = 25,
  kHeartbeat = 27,
  kWriteRowsV2 = 30,
  kUpdateRowsV2 = 31,
  kDeleteRowsV2 = 32,
  // MariaDB's own.
  kAnnotateRows = 160,
  kBinlogCheckpoint = 161,
  kGtid = 162,
  kGtidList = 163,
  kStartEncryption = 164,
  kQueryCompressed = 165,  // 165..171: log_bin_compress=ON, not supported.
  kWriteRowsCompressedV1 = 169,
  kDeleteRowsCompressedV1 = 171,
};

// The name of an event type for messages: "TABLE_MAP", "WRITE_ROWS_V1", "type 42".
std::string event_type_name(uint8_t type);

// binlog_checksum. The algorithm byte of FORMAT_DESCRIPTION.
enum class ChecksumAlg : uint8_t { kOff = 0, kCrc32 = 1 };

inline constexpr size_t kEventHeaderSize = 19;
inline constexpr size_t kChecksumSize = 4;

// The common header of every event (little-endian on the wire).
struct EventHeader {
  uint32_t timestamp = 0;  // Seconds since the epoch; 0 for artificial events.
  uint8_t type = 0;        // An EventType value, or one weir does not know.
  uint32_t server_id = 0;
  uint32_t event_size = 0;  // The whole event: header, body and checksum.
  uint32_t log_pos = 0;     // The position just past this event in the binlog file (0: artificial).
  uint16_t flags = 0;

  // LOG_EVENT_ARTIFICIAL_F: made up by the dump thread (the first ROTATE), not in the file.
  bool is_artificial() const { return (flags & 0x20) != 0; }
};

// CRC-32 (ISO-HDLC, zlib's crc32) of `bytes`, continuing from `crc` (0 to start).
uint32_t crc32(std::string_view bytes, uint32_t crc = 0);

// Any event weir skips: its type is in the header.
struct UnknownEvent {};

// 15: describes the binlog file's events; the first event of every file (and of a dump).
struct FormatDescriptionEvent {
  uint16_t binlog_version = 0;      // 4
  std::string_view server_version;  // "10.11.19-MariaDB-log" (the NUL padding removed)
  uint32_t create_timestamp = 0;
  uint8_t header_length = 0;  // 19
  // Byte i is the post-header length of event type i + 1.
  std::string_view post_header_lengths;
  ChecksumAlg checksum = ChecksumAlg::kOff;

  // The post-header length of `type` (0 for a type past the table).
  uint8_t post_header_length(uint8_t type) const;
};

// 4: the dump continues in another binlog file (also sent first, artificial, naming the file).
struct RotateEvent {
  uint64_t position = 0;  // In the next file.
  std::string_view next_file;
};

// 162: MariaDB's GTID, opening an event group (a transaction, or one DDL statement).
struct GtidEvent {
  static constexpr uint8_t kStandalone = 1;     // FL_STANDALONE: no COMMIT/XID follows (DDL).
  static constexpr uint8_t kGroupCommitId = 2;  // FL_GROUP_COMMIT_ID: commit_id is set.
  static constexpr uint8_t kTransactional = 4;
  static constexpr uint8_t kAllowParallel = 8;
  static constexpr uint8_t kWaited = 16;
  static constexpr uint8_t kDdl = 32;
  static constexpr uint8_t kPreparedXa = 64;    // XA PREPARE: the group ends without committing.
  static constexpr uint8_t kCompletedXa = 128;  // XA COMMIT/ROLLBACK of a prepared XA.

  uint64_t seq_no = 0;
  uint32_t domain_id = 0;  // server_id is the header's.
  uint8_t flags = 0;
  uint64_t commit_id = 0;  // 0 unless kGroupCommitId.

  bool is_standalone() const { return (flags & kStandalone) != 0; }
};

// A MariaDB GTID: domain-server-seq_no.
struct Gtid {
  uint32_t domain_id = 0;
  uint32_t server_id = 0;
  uint64_t seq_no = 0;

  bool operator==(const Gtid&) const = default;
};

// "0-1-42".
std::string format_gtid(const Gtid& gtid);

// 163: the GTID state at the start of a binlog file (the last GTID of each domain before it).
struct GtidListEvent {
  uint8_t flags = 0;  // The top 4 bits of the count field.
  std::vector<Gtid> gtids;
};

// 161: binlog files from this one on are needed for crash recovery.
struct BinlogCheckpointEvent {
  std::string_view file;
};

// 2: a statement (DDL, or BEGIN/COMMIT around row events of non-transactional tables).
struct QueryEvent {
  uint32_t thread_id = 0;
  uint32_t exec_time = 0;
  uint16_t error_code = 0;
  std::string_view status_vars;  // Not decoded.
  std::string_view database;     // The default database ("" if none).
  std::string_view query;
};

// 16: a transaction's commit.
struct XidEvent {
  uint64_t xid = 0;
};

// 27: the dump has nothing to send (master_heartbeat_period) or skipped events. MariaDB sends the
// current binlog file's name; header.log_pos is the position in it.
struct HeartbeatEvent {
  std::string_view log_file;
};

// 160: the statement that made the row events that follow (binlog_annotate_row_events).
struct AnnotateRowsEvent {
  std::string_view query;
};

// 19: maps a table id to a table and the binlog types of its columns, for the row events that
// follow in the same event group. Owns its data: keep it while row events may refer to it.
struct TableMapEvent {
  uint64_t table_id = 0;
  uint16_t flags = 0;
  std::string database;
  std::string table;
  std::vector<FieldType> types;  // One per column, as logged (not the real type; see metadata).
  // Per column the type's metadata as an integer, 0 for types without any:
  //   FLOAT, DOUBLE: the size; BLOB family: the length prefix's bytes (1-4); VARCHAR: the maximum
  //   length in bytes; BIT: (bytes << 8) | bits; NEWDECIMAL: (precision << 8) | scale;
  //   STRING, ENUM, SET: (real type << 8) | length byte (see RowDecoder for the length trick);
  //   TIME2, DATETIME2, TIMESTAMP2: the fraction digits.
  std::vector<uint16_t> metadata;
  std::vector<bool> nullable;
  // The optional metadata of binlog_row_metadata=MINIMAL/FULL (MariaDB 10.5+, MySQL 8), checked
  // to be well-formed TLVs and kept raw; empty when the server logs none (MariaDB's default).
  std::string optional_metadata;
  // From the optional metadata where present: column names (FULL), and per numeric column
  // whether it is unsigned, in column order (MINIMAL and FULL); empty otherwise.
  std::vector<std::string> column_names;
  std::vector<bool> unsigned_numeric;

  size_t column_count() const { return types.size(); }
};

// 23-25 (v1), 30-32 (v2): row images of one table. Views the event.
struct RowsEvent {
  enum class Kind : uint8_t { kInsert, kUpdate, kDelete };

  Kind kind = Kind::kInsert;
  uint8_t version = 1;  // 1 or 2
  uint64_t table_id = 0;
  uint16_t flags = 0;           // 1: STMT_END_F (the statement's last row event).
  std::string_view extra_data;  // v2 only.
  uint64_t column_count = 0;
  std::string_view columns_present;        // A bitmap of column_count bits, column 0 first.
  std::string_view columns_present_after;  // UPDATE: the after image's.
  std::string_view rows;                   // The row images.

  bool is_statement_end() const { return (flags & 1) != 0; }
};

using EventBody = std::variant<UnknownEvent, FormatDescriptionEvent, RotateEvent, GtidEvent,
                               GtidListEvent, BinlogCheckpointEvent, QueryEvent, XidEvent,
                               HeartbeatEvent, AnnotateRowsEvent, TableMapEvent, RowsEvent>;

struct Event {
  EventHeader header;
  EventBody body;
};

// Parses the common header of `event` (at least 19 bytes).
absl::StatusOr<EventHeader> parse_event_header(std::string_view event);

// Decodes the events of one binlog dump, in order.
class BinlogDecoder {
 public:
  // `checksum`: whether events before the first FORMAT_DESCRIPTION (the dump's artificial ROTATE)
  // carry a checksum: the binlog's binlog_checksum when the client announced checksum awareness
  // (@master_binlog_checksum, as open_binlog_dump does), else kOff. Each FORMAT_DESCRIPTION then
  // sets the algorithm for the events after it.
  explicit BinlogDecoder(ChecksumAlg checksum) : checksum_(checksum) {}

  // Decodes one whole event (header, body, checksum). The result views `event` (not the
  // decoder), except TableMapEvent and GtidListEvent which own their data.
  absl::StatusOr<Event> decode(std::string_view event);

  ChecksumAlg checksum() const { return checksum_; }

 private:
  ChecksumAlg checksum_;
  std::string post_header_lengths_;  // From the last FORMAT_DESCRIPTION; empty before one.
};

// Turns row images into canonical text, or straight into weir's row encoding. Reuses its buffers:
// steady-state decoding allocates nothing once they have grown to the largest row.
class RowDecoder {
 public:
  // One row: per column (of the table, in order) its canonical text or NULL. `before` is empty
  // for an insert, `after` for a delete. Views the decoder's buffers, valid during the call.
  using RowCallback = absl::FunctionRef<absl::Status(std::span<const postgres::TextField> before,
                                                     std::span<const postgres::TextField> after)>;

  // Decodes every row of `rows`, which refers to `table` (same table id), whose columns are
  // `columns` (the catalog's, in table order: as many as the table map has). Every column must be
  // present in every image (binlog_row_image=FULL). Stops at the first error, or the first
  // callback that returns one (returned as is); rows before it were delivered.
  absl::Status decode(const TableMapEvent& table, const RowsEvent& rows,
                      std::span<const MysqlColumn> columns, RowCallback on_row);

  // One row in weir's row encoding (postgres/value.h); `before` is empty for an insert, `after`
  // for a delete. Views the decoder's buffers, valid during the call.
  using EncodedRowCallback =
      absl::FunctionRef<absl::Status(std::string_view before, std::string_view after)>;

  // Like decode, with each image encoded as a row of `types` (per column, weir_column's type of
  // it: types.h): the bytes postgres::RowEncoder makes of decode's text, or an error where it
  // refuses it. The common types are encoded straight from their binary image, without the text.
  absl::Status encode(const TableMapEvent& table, const RowsEvent& rows,
                      std::span<const MysqlColumn> columns,
                      std::span<const postgres::ColumnType> types, EncodedRowCallback on_row);

 private:
  struct Slot {
    size_t offset = 0;
    size_t size = 0;
    bool is_null = false;
  };
  struct Image {
    std::string arena;
    std::vector<Slot> slots;
    std::vector<postgres::TextField> fields;
  };
  Image before_;
  Image after_;
  std::string encoded_before_;
  std::string encoded_after_;
  std::string text_;  // A value encode() takes through its text.
};

}  // namespace weir::sources::mysql
