// Opening a MariaDB binlog dump from a GTID position, and reading its events' bytes (libmariadb's
// replication API); the events are decoded by BinlogDecoder (weir/sources/mysql/binlog.h).
//
// How a MariaDB replica asks for a GTID-based dump (what open_binlog_dump does, on a connection
// of a user with REPLICATION SLAVE / BINLOG MONITOR privileges):
//
//   SET @master_binlog_checksum = @@global.binlog_checksum
//       -- announces that the client understands checksums. Without it a MariaDB 10.11 server
//       -- with binlog_checksum=CRC32 accepts COM_BINLOG_DUMP, sends the artificial ROTATE
//       -- (without a checksum), then error 1236
//       -- "Slave can not handle replication events with the checksum that master is configured
//       -- to log". With it every event (the artificial ROTATE too) carries its CRC32, which
//       -- BinlogDecoder verifies. (libmariadb does not set it; mariadb_rpl_init only reads
//       -- @@binlog_checksum.)
//   SET @mariadb_slave_capability = 4
//       -- MARIA_SLAVE_CAPABILITY_GTID. Below it, the server rewrites GTID events into
//       -- "BEGIN" QUERY events and GTID_LIST into nothing useful for us.
//   SET @slave_connect_state = '0-1-42,1-2-7'
//       -- the GTID position: the last GTID applied in each replication domain; the dump starts
//       -- after them. ('' should start at the oldest binlog file the server still has: not
//       -- tested here.)
//   SET @slave_gtid_strict_mode = 1, @slave_gtid_ignore_duplicates = 0
//       -- a position the server's binlogs no longer hold (purged), or one ahead of the server,
//       -- is an error (ER_MASTER_FATAL_ERROR_READING_BINLOG, 1236) rather than a silent skip.
//   [SET @master_heartbeat_period = <nanoseconds>]
//   COM_BINLOG_DUMP: position 4, flags (1: BINLOG_DUMP_NON_BLOCK: end with EOF at the end of the
//       binlog rather than wait for more), the replica's server id, an empty file name
//       -- with @slave_connect_state set, the empty file name means "find the file from the GTID
//       -- position".
//
// The dump then sends an artificial ROTATE (timestamp 0, naming the file), the file's
// FORMAT_DESCRIPTION, GTID_LIST and BINLOG_CHECKPOINT, then the event groups after the position.
// A server_id that another connected replica uses makes the server drop that replica: give each
// dump its own.
//
// Thread safety: one thread (or fiber) at a time, on its own connection.

#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "mysql/connection.h"

#include "weir/sources/mysql/binlog.h"

namespace weir::sources::mysql {

struct BinlogDumpOptions {
  std::string gtid_start;  // @slave_connect_state: "domain-server-seq[,...]"; "" from the oldest.
  uint32_t server_id = 0;  // The replica's id: unique among the server's replicas, not 0.
  bool non_blocking = false;  // End (fetch gives nullopt) at the binlog's end instead of waiting.
  std::chrono::milliseconds heartbeat_period{0};  // 0: no heartbeats.
};

// The dump reads the server's packets itself (libmariadb's mariadb_rpl_fetch would parse every
// event first, with its own parser, before weir's decoder sees it): each is an OK byte and one
// event, an EOF packet (a non-blocking dump's end) or an error packet.
class BinlogDump {
 public:
  // Sets up the session and sends COM_BINLOG_DUMP on `conn`, which the dump then occupies (until
  // it is destroyed, the connection can do nothing else). `conn` must outlive the dump. With
  // `ctx`, waits on its fiber rather than block.
  static absl::StatusOr<BinlogDump> open(MysqlConnection& conn, const BinlogDumpOptions& options,
                                         AsyncContext* ctx = nullptr);

  BinlogDump(BinlogDump&&) = default;
  BinlogDump& operator=(BinlogDump&&) = delete;

  // The checksum algorithm of the events before the first FORMAT_DESCRIPTION: construct the
  // BinlogDecoder with it.
  ChecksumAlg checksum() const { return checksum_; }

  // The next event's bytes (header to checksum), valid until the next fetch; nullopt when a
  // non-blocking dump reached the end of the binlog. With `ctx`, waits on its fiber for the
  // server. Errors: the server's (FailedPrecondition; position_lost() tells the binlog no longer
  // holds the start position), a lost connection (Unavailable), a malformed packet (DataLoss).
  absl::StatusOr<std::optional<std::string_view>> fetch(AsyncContext* ctx = nullptr);

  // The server refused the dump's start position (ER_MASTER_FATAL_ERROR_READING_BINLOG): the
  // binlog was purged past it, or holds another history.
  bool position_lost() const { return position_lost_; }

 private:
  BinlogDump(MysqlConnection& conn, ChecksumAlg checksum) : conn_(&conn), checksum_(checksum) {}

  MysqlConnection* conn_;
  ChecksumAlg checksum_;
  bool ended_ = false;
  bool position_lost_ = false;
};

}  // namespace weir::sources::mysql
