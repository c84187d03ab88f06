#include "mysql/binlog_dump.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include <errmsg.h>
#include <mysql.h>

#include "weir/status.h"

namespace weir::sources::mysql {

absl::StatusOr<BinlogDump> BinlogDump::open(MysqlConnection& conn, const BinlogDumpOptions& options,
                                            AsyncContext* ctx) {
  if (options.server_id == 0) {
    return absl::InvalidArgumentError("binlog dump: server_id 0 (a replica needs its own id)");
  }
  WEIR_ASSIGN_OR_RETURN(auto rows, ctx != nullptr
                                       ? conn.rows(*ctx, "SELECT @@global.binlog_checksum")
                                       : conn.rows("SELECT @@global.binlog_checksum"));
  if (rows.size() != 1 || rows[0].size() != 1 || !rows[0][0].has_value()) {
    return absl::FailedPreconditionError(
        "binlog dump: SELECT @@global.binlog_checksum gave no row");
  }
  ChecksumAlg checksum = ChecksumAlg::kOff;
  if (*rows[0][0] == "CRC32") {
    checksum = ChecksumAlg::kCrc32;
  } else if (*rows[0][0] != "NONE") {
    return absl::FailedPreconditionError(
        absl::StrCat("binlog dump: binlog_checksum is ", *rows[0][0], " (NONE or CRC32)"));
  }
  std::string set = absl::StrCat(
      "SET @master_binlog_checksum = @@global.binlog_checksum, @mariadb_slave_capability = 4, ",
      "@slave_connect_state = ", quote_literal(options.gtid_start),
      ", @slave_gtid_strict_mode = 1, @slave_gtid_ignore_duplicates = 0");
  if (options.heartbeat_period.count() > 0) {
    absl::StrAppend(&set, ", @master_heartbeat_period = ",
                    static_cast<int64_t>(options.heartbeat_period.count()) * 1000000);
  }
  WEIR_RETURN_IF_ERROR(ctx != nullptr ? conn.exec(*ctx, set) : conn.exec(set));

  // COM_BINLOG_DUMP: position 4, flags, the replica's server id, no file name (the GTID state
  // says where).
  std::string command(10, '\0');
  const auto put = [&](size_t at, uint32_t value, size_t bytes) {
    for (size_t i = 0; i < bytes; ++i)
      command[at + i] = static_cast<char>((value >> (8 * i)) & 0xff);
  };
  put(0, 4, 4);
  put(4, options.non_blocking ? 1 : 0, 2);  // BINLOG_DUMP_NON_BLOCK
  put(6, options.server_id, 4);
  MYSQL* mysql = conn.raw();
  if (mysql->methods->db_command(mysql, COM_BINLOG_DUMP, command.data(), command.size(), 1,
                                 nullptr) != 0) {
    return conn.error("binlog dump: COM_BINLOG_DUMP");
  }
  return BinlogDump(conn, checksum);
}

absl::StatusOr<std::optional<std::string_view>> BinlogDump::fetch(AsyncContext* ctx) {
  if (ended_) return std::nullopt;
  if (ctx != nullptr) WEIR_RETURN_IF_ERROR(conn_->await_data(*ctx));
  MYSQL* mysql = conn_->raw();
  const unsigned long length = mysql_net_read_packet(mysql);
  if (length == packet_error || length == 0) {
    if (mysql_errno(mysql) == 1236) position_lost_ = true;  // ER_MASTER_FATAL_ERROR_READING_BINLOG
    if (mysql_errno(mysql) == 0) {
      return absl::DataLossError("binlog dump: the server sent an empty packet");
    }
    return conn_->error("binlog dump: reading the binlog");
  }
  const auto* data = reinterpret_cast<const char*>(mysql->net.read_pos);
  if (static_cast<unsigned char>(data[0]) == 0xfe && length < 9) {
    ended_ = true;
    return std::nullopt;
  }
  if (data[0] != 0) {
    return absl::DataLossError(absl::StrCat("binlog dump: a packet starts with byte ",
                                            static_cast<int>(static_cast<unsigned char>(data[0])),
                                            ", not 0 (OK)"));
  }
  return std::optional<std::string_view>(std::string_view(data + 1, length - 1));
}

}  // namespace weir::sources::mysql
