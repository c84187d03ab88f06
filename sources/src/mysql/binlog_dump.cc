#include "mysql/binlog_dump.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include <errmsg.h>
#include <mariadb_rpl.h>
#include <mysql.h>

#include "weir/status.h"

namespace weir::sources::mysql {

absl::StatusOr<BinlogDump> BinlogDump::open(MysqlConnection& conn,
                                            const BinlogDumpOptions& options) {
  if (options.server_id == 0) {
    return absl::InvalidArgumentError("binlog dump: server_id 0 (a replica needs its own id)");
  }
  WEIR_ASSIGN_OR_RETURN(auto rows, conn.rows("SELECT @@global.binlog_checksum"));
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
  WEIR_RETURN_IF_ERROR(conn.exec(set));

  MARIADB_RPL* rpl = mariadb_rpl_init(conn.raw());
  if (rpl == nullptr) {
    return conn.error("binlog dump: mariadb_rpl_init");
  }
  const unsigned int flags = options.non_blocking ? MARIADB_RPL_BINLOG_DUMP_NON_BLOCK : 0;
  if (mariadb_rpl_optionsv(rpl, MARIADB_RPL_SERVER_ID, options.server_id) != 0 ||
      mariadb_rpl_optionsv(rpl, MARIADB_RPL_FLAGS, flags) != 0 ||
      mariadb_rpl_optionsv(rpl, MARIADB_RPL_START, static_cast<unsigned long>(4)) != 0 ||
      mariadb_rpl_optionsv(rpl, MARIADB_RPL_FILENAME, "", static_cast<size_t>(0)) != 0 ||
      // BinlogDecoder checks the checksums.
      mariadb_rpl_optionsv(rpl, MARIADB_RPL_VERIFY_CHECKSUM, static_cast<uint32_t>(0)) != 0) {
    mariadb_rpl_close(rpl);
    return absl::InternalError("binlog dump: mariadb_rpl_optionsv failed");
  }
  if (mariadb_rpl_open(rpl) != 0) {
    absl::Status status = conn.error("binlog dump: COM_BINLOG_DUMP");
    mariadb_rpl_close(rpl);
    return status;
  }
  return BinlogDump(conn, rpl, checksum);
}

BinlogDump::BinlogDump(BinlogDump&& other) noexcept
    : conn_(other.conn_),
      rpl_(std::exchange(other.rpl_, nullptr)),
      event_(std::exchange(other.event_, nullptr)),
      checksum_(other.checksum_),
      ended_(other.ended_) {}

BinlogDump::~BinlogDump() {
  if (event_ != nullptr) {
    mariadb_free_rpl_event(event_);
  }
  if (rpl_ != nullptr) {
    mariadb_rpl_close(rpl_);
  }
}

absl::StatusOr<std::optional<std::string_view>> BinlogDump::fetch() {
  if (ended_) {
    return std::nullopt;
  }
  MARIADB_RPL_EVENT* event = mariadb_rpl_fetch(rpl_, event_);
  if (event == nullptr) {
    // mariadb_rpl_fetch freed the event it was given.
    event_ = nullptr;
    if (mariadb_rpl_errno(rpl_) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "binlog dump: libmariadb could not read an event: ", mariadb_rpl_error(rpl_)));
    }
    if (mysql_errno(conn_->raw()) != 0) {
      return conn_->error("binlog dump: reading the binlog");
    }
    ended_ = true;
    return std::nullopt;
  }
  event_ = event;
  if (event->raw_data_ofs > event->raw_data_size) {
    return absl::InternalError("binlog dump: libmariadb's event offset is past its data");
  }
  return std::string_view(reinterpret_cast<const char*>(event->raw_data) + event->raw_data_ofs,
                          event->raw_data_size - event->raw_data_ofs);
}

}  // namespace weir::sources::mysql
