// pgoutput: PostgreSQL's logical replication messages, and the replication stream that carries
// them, as pure byte parsing (no libpq here: the connection lives in sources/src/postgres/).
//
// A walsender in logical replication mode sends CopyData messages inside COPY BOTH. Each is a
// replication message (parse_replication_message): an XLogData ('w') whose payload is one
// pgoutput message, or a primary keepalive ('k'). The client answers with standby status updates
// ('r', append_standby_status_update) that confirm how far it has durably consumed the stream.
//
// decode_message turns one pgoutput payload (protocol versions 1 and 2) into a Message, a variant
// of one struct per message type. Decoding copies nothing: strings, column names and tuple column
// values are std::string_views into the payload, and the columns of tuples, relations and
// truncated relation lists live in a caller's DecodeScratch that is reused from message to
// message, so that steady-state decoding allocates nothing. Every malformed payload (truncated,
// unknown tag, counts that do not match the bytes, invalid lengths, trailing bytes) is an
// InvalidArgument status that says what is wrong, where, and which relation the message names.
//
//   PgOutputDecoder decoder(/*protocol_version=*/2);
//   WEIR_ASSIGN_OR_RETURN(ReplicationMessage frame, parse_replication_message(copy_data));
//   if (const auto* data = std::get_if<XLogData>(&frame)) {
//     WEIR_ASSIGN_OR_RETURN(Message message, decoder.decode(data->payload));
//     if (const auto* insert = std::get_if<Insert>(&message)) {
//       for (const TupleColumn& column : insert->new_tuple) { ... column.value ... }
//     }
//   }
//
// Formats: https://www.postgresql.org/docs/15/protocol-replication.html and
// https://www.postgresql.org/docs/15/protocol-logicalrep-message-formats.html.
//
// Thread safety: free functions are thread-safe; a DecodeScratch or PgOutputDecoder is
// worker-local. A decoded Message views its payload and its scratch: it is valid while the payload
// lives and until the next decode into the same scratch (or decoder).

#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace weir::sources::postgres {

// A WAL position (XLogRecPtr). 0 is InvalidXLogRecPtr.
using Lsn = uint64_t;

// A transaction id (TransactionId). 0 is InvalidTransactionId.
using Xid = uint32_t;

// PostgreSQL's TimestampTz on the wire: microseconds since 2000-01-01 00:00:00 UTC.
using PgTimestamp = int64_t;

// ---------------------------------------------------------------------------------------------
// LSNs and timestamps

// Parses PostgreSQL's text form of an LSN, "X/Y": two hexadecimal numbers of 1 to 8 digits each
// (either case), the high and low 32 bits, as pg_lsn's input function accepts them.
absl::StatusOr<Lsn> parse_lsn(std::string_view text);

// Formats `lsn` as PostgreSQL does: "%X/%X" (upper case, no leading zeros), e.g. "0/16B3748".
std::string format_lsn(Lsn lsn);

// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
inline constexpr int64_t kPgEpochUnixMicros = 946'684'800'000'000;

using SystemMicros = std::chrono::sys_time<std::chrono::microseconds>;

inline SystemMicros from_pg_timestamp(PgTimestamp timestamp) {
  return SystemMicros(std::chrono::microseconds(timestamp + kPgEpochUnixMicros));
}

inline PgTimestamp to_pg_timestamp(SystemMicros time) {
  return time.time_since_epoch().count() - kPgEpochUnixMicros;
}

// The current time as a PgTimestamp (the clock of a standby status update).
PgTimestamp pg_timestamp_now();

// ---------------------------------------------------------------------------------------------
// The replication stream: what travels in CopyData messages once START_REPLICATION has answered
// with CopyBothResponse.

// 'w': WAL data; for logical replication, one pgoutput message.
struct XLogData {
  Lsn wal_start = 0;  // Where `payload` starts in the WAL (0 for some logical messages).
  Lsn wal_end = 0;    // The current end of WAL on the server.
  PgTimestamp send_time = 0;
  std::string_view payload;  // Views the parsed CopyData.
};

// 'k': sent when the server has nothing else to say, and to ask for a status update.
struct PrimaryKeepalive {
  Lsn wal_end = 0;  // The current end of WAL on the server.
  PgTimestamp send_time = 0;
  bool reply_requested = false;  // Answer with a standby status update now, or be disconnected.
};

using ReplicationMessage = std::variant<XLogData, PrimaryKeepalive>;

// Parses one CopyData message from the server. Anything but a whole 'w' or 'k' message (empty,
// another tag, truncated, trailing bytes after a keepalive) is an InvalidArgument error.
absl::StatusOr<ReplicationMessage> parse_replication_message(std::string_view copy_data);

// 'r': the client's progress. The server may release WAL up to `flush` (a logical slot's
// confirmed_flush_lsn becomes `flush`): never send a `flush` that is not durable downstream.
struct StandbyStatusUpdate {
  Lsn written = 0;               // Received and written (for logical replication: received).
  Lsn flushed = 0;               // Durable: the slot may advance to here.
  Lsn applied = 0;               // Applied (for us: the same as `flushed`).
  PgTimestamp clock = 0;         // The client's clock when sending (pg_timestamp_now()).
  bool reply_requested = false;  // Ask the server to answer with a keepalive right away.
};

inline constexpr size_t kStandbyStatusUpdateSize = 34;  // 'r' + 4 x Int64 + Byte1.

// Appends the 34 bytes of `update`'s CopyData message to `out` (which may already hold bytes).
void append_standby_status_update(const StandbyStatusUpdate& update, std::string& out);

// Parses a standby status update (a test server's view of what a client sent).
absl::StatusOr<StandbyStatusUpdate> parse_standby_status_update(std::string_view copy_data);

// The server's side, for tests and fake servers: appends a whole 'w' message (header and
// `data.payload`) or 'k' message to `out`.
void append_xlog_data(const XLogData& data, std::string& out);
void append_primary_keepalive(const PrimaryKeepalive& keepalive, std::string& out);

// ---------------------------------------------------------------------------------------------
// pgoutput messages

// One column of a TupleData.
enum class ColumnKind : char {
  kNull = 'n',
  kUnchangedToast = 'u',  // An unchanged TOASTed value: not sent; keep what the row had.
  kText = 't',            // `value` is the type's text output.
  kBinary = 'b',          // `value` is the type's send output ('binary' option).
};

struct TupleColumn {
  ColumnKind kind = ColumnKind::kNull;
  std::string_view value;  // Empty unless kText or kBinary. Views the payload.

  bool is_null() const { return kind == ColumnKind::kNull; }
  bool is_unchanged_toast() const { return kind == ColumnKind::kUnchangedToast; }
};

// A row's columns, in the relation's column order (dropped and generated columns excluded).
// Views a DecodeScratch.
using Tuple = std::span<const TupleColumn>;

// What an UPDATE or DELETE says about the old row.
enum class OldTupleKind : char {
  kNone = 0,    // UPDATE only: no old tuple (the replica identity key did not change).
  kKey = 'K',   // The replica identity columns; the other columns are kNull.
  kFull = 'O',  // The whole old row (REPLICA IDENTITY FULL).
};

// pg_class.relreplident.
enum class ReplicaIdentity : char {
  kDefault = 'd',  // The primary key.
  kNothing = 'n',
  kFull = 'f',
  kIndex = 'i',  // A unique index.
};

struct RelationColumn {
  uint8_t flags = 0;  // Bit 0: part of the replica identity (every column under FULL).
  std::string_view name;
  uint32_t type_oid = 0;
  int32_t type_modifier = -1;  // atttypmod: -1 when the type has none.

  bool is_key() const { return (flags & 1) != 0; }
};

// 'B': a transaction starts (not for streamed transactions: those start with StreamStart).
struct Begin {
  Lsn final_lsn = 0;  // The LSN of the commit record.
  PgTimestamp commit_time = 0;
  Xid xid = 0;
};

// 'C'
struct Commit {
  uint8_t flags = 0;   // Unused by PostgreSQL 15 (0).
  Lsn commit_lsn = 0;  // The LSN of the commit record (Begin::final_lsn).
  Lsn end_lsn = 0;     // Just past the commit record: where to resume after this transaction.
  PgTimestamp commit_time = 0;
};

// 'O': the transaction came from another node through replication origin `name`.
struct Origin {
  Lsn commit_lsn = 0;  // The commit's LSN on the origin server.
  std::string_view name;
};

// 'R': describes a relation before the first change to it in a session (and in each streamed
// transaction), and again whenever pgoutput's cache of it is invalidated: after ALTER TABLE, but
// also after TRUNCATE or any other session's publication change, so most repeat the last one
// unchanged. `xid` is set inside a streamed transaction (between StreamStart and StreamStop): the
// (sub)transaction whose change needed it.
struct Relation {
  std::optional<Xid> xid;
  uint32_t oid = 0;
  std::string_view namespace_name;  // Empty for pg_catalog, as on the wire.
  std::string_view name;
  ReplicaIdentity replica_identity = ReplicaIdentity::kDefault;
  std::span<const RelationColumn> columns;  // Views a DecodeScratch.
};

// 'Y': a non-built-in type that a following Relation's columns use (its base type for a domain).
struct Type {
  std::optional<Xid> xid;
  uint32_t oid = 0;
  std::string_view namespace_name;  // Empty for pg_catalog.
  std::string_view name;
};

// 'I'
struct Insert {
  std::optional<Xid> xid;
  uint32_t relation_oid = 0;
  Tuple new_tuple;
};

// 'U'
struct Update {
  std::optional<Xid> xid;
  uint32_t relation_oid = 0;
  OldTupleKind old_kind = OldTupleKind::kNone;
  Tuple old_tuple;  // Empty when old_kind is kNone.
  Tuple new_tuple;  // Unchanged TOASTed columns are kUnchangedToast.
};

// 'D'
struct Delete {
  std::optional<Xid> xid;
  uint32_t relation_oid = 0;
  OldTupleKind old_kind = OldTupleKind::kKey;  // kKey or kFull.
  Tuple old_tuple;
};

// 'T': one TRUNCATE statement (all relations it truncated that the publication covers).
struct Truncate {
  std::optional<Xid> xid;
  bool cascade = false;
  bool restart_identity = false;
  std::span<const uint32_t> relation_oids;  // Views a DecodeScratch.
};

// 'M': pg_logical_emit_message (only with the 'messages' option).
struct LogicalMessage {
  std::optional<Xid> xid;
  bool transactional = false;  // Transactional messages arrive inside their transaction.
  Lsn lsn = 0;
  std::string_view prefix;
  std::string_view content;
};

// 'S' (protocol 2): a block of a large in-progress transaction's changes follows, until
// StreamStop. Changes inside carry `xid` (of this transaction or one of its subtransactions).
struct StreamStart {
  Xid xid = 0;
  bool first_segment = false;  // The first block of this transaction.
};

// 'E' (protocol 2)
struct StreamStop {};

// 'c' (protocol 2): the streamed transaction `xid` committed; apply its blocks.
struct StreamCommit {
  Xid xid = 0;
  uint8_t flags = 0;  // Unused by PostgreSQL 15 (0).
  Lsn commit_lsn = 0;
  Lsn end_lsn = 0;
  PgTimestamp commit_time = 0;
};

// 'A' (protocol 2): the streamed (sub)transaction `subxid` of `xid` aborted: discard its
// changes (all of `xid`'s when subxid == xid).
struct StreamAbort {
  Xid xid = 0;
  Xid subxid = 0;
};

using Message =
    std::variant<Begin, Commit, Origin, Relation, Type, Insert, Update, Delete, Truncate,
                 LogicalMessage, StreamStart, StreamStop, StreamCommit, StreamAbort>;

// The buffers a decoded Message's spans view. Reuse one across messages: once they have grown to
// the widest message, decoding allocates nothing. They never grow beyond what the payload's bytes
// can hold (a count is checked against the bytes left before anything is reserved).
struct DecodeScratch {
  std::vector<TupleColumn> tuple_columns;
  std::vector<RelationColumn> relation_columns;
  std::vector<uint32_t> relation_oids;
};

// Decodes one pgoutput message. `in_stream` says whether the message arrives between StreamStart
// and StreamStop, where Relation, Type, Insert, Update, Delete, Truncate and Message carry an
// xid (PgOutputDecoder tracks this). The result views `payload` and `scratch`.
absl::StatusOr<Message> decode_message(std::string_view payload, bool in_stream,
                                       DecodeScratch& scratch);

// decode_message for one replication connection: owns the scratch and follows StreamStart /
// StreamStop to know whether an xid is present. Errors (besides malformed messages): streaming
// messages under protocol 1, StreamStart inside a stream, StreamStop outside one, and Begin,
// Commit, StreamCommit or StreamAbort inside a stream (Origin may open a stream's first block).
// After an error the decoder's state is unchanged; reset() it for a new connection.
class PgOutputDecoder {
 public:
  explicit PgOutputDecoder(int protocol_version = 1) : protocol_version_(protocol_version) {}

  // The result views `payload` and this decoder; valid until the next decode().
  absl::StatusOr<Message> decode(std::string_view payload);

  bool in_stream() const { return in_stream_; }
  int protocol_version() const { return protocol_version_; }

  // Forgets the stream state (a new replication connection starts outside a stream).
  void reset() { in_stream_ = false; }

 private:
  int protocol_version_;
  bool in_stream_ = false;
  DecodeScratch scratch_;
};

// The server's side, for tests, fake servers and the fuzzer's oracle: appends `message` as
// pgoutput writes it; an xid is written where `xid` has a value (as inside a stream). Decoding is
// exact: for any payload that decodes, append_message of the result gives the payload back.
void append_message(const Message& message, std::string& out);

// The message's tag byte on the wire ('B', 'I', 'S', ...) and its name ("Insert", ...).
char message_tag(const Message& message);
std::string_view message_name(const Message& message);

// The relation the message is about (Relation, Insert, Update, Delete), or nullopt.
std::optional<uint32_t> relation_oid(const Message& message);

// One line for logs and debugging, e.g.
//   Insert relation=16385 new=('1', NULL, unchanged-toast, '"hello"')
//   Commit commit_lsn=0/16B3748 end_lsn=0/16B3778 commit_time=...
// Long values are shortened (with their length), bytes outside printable ASCII escaped.
std::string describe(const Message& message);
std::string describe(const ReplicationMessage& message);

}  // namespace weir::sources::postgres
