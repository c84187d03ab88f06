// A libmariadb connection for the MySQL-family source.
//
// Connection strings are key=value pairs separated by spaces (values may be single-quoted, with
// \' and \\ inside): host, port, user, password, database, socket, connect_timeout (seconds),
// ssl_mode (disable | require | verify_ca | verify_full; default: prefer). Unknown keys are an
// error that names them.
//
// Every session is set up so that values print the way the canonical text expects (types.h):
// character set utf8mb4, time_zone '+00:00', sql_mode without ANSI_QUOTES or NO_BACKSLASH_ESCAPES.
//
// Errors: a lost or refused connection, a server shutting down, a lock wait timeout or deadlock,
// too many connections are Unavailable (transient); others FailedPrecondition. Messages name what
// the connection is for and never the password.
//
// Thread safety: one thread (or fiber) at a time.

#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include <mysql.h>

#include "weir/async/context.h"

namespace weir::sources::mysql {

struct ConnInfo {
  std::string host = "127.0.0.1";
  unsigned port = 3306;
  std::string user;
  std::string password;
  std::string database;
  std::string socket;
  unsigned connect_timeout = 10;
  std::string ssl_mode;  // "" (prefer), disable, require, verify_ca, verify_full

  // The string without its password, for messages.
  std::string redacted() const;
};

absl::StatusOr<ConnInfo> parse_conninfo(std::string_view text);

struct MysqlResultDeleter {
  void operator()(MYSQL_RES* result) const { mysql_free_result(result); }
};
using MysqlResult = std::unique_ptr<MYSQL_RES, MysqlResultDeleter>;

class MysqlConnection {
 public:
  // Connects (blocking). `what` names the connection in errors ("snapshot w1", "binlog").
  static absl::StatusOr<MysqlConnection> connect(const ConnInfo& info, std::string what);

  MysqlConnection(MysqlConnection&&) = default;
  MysqlConnection& operator=(MysqlConnection&&) = default;

  // Runs `sql`, discarding any result.
  absl::Status exec(std::string_view sql);
  // Runs `sql` and returns its whole result (stored client side).
  absl::StatusOr<MysqlResult> query(std::string_view sql);
  // Runs `sql` and returns every row as strings (NULL as nullopt): for small catalog queries.
  absl::StatusOr<std::vector<std::vector<std::optional<std::string>>>> rows(std::string_view sql);
  // Runs `sql` and streams its result (mysql_use_result): read it with mysql_fetch_row until
  // null, then check fetch_error().
  absl::StatusOr<MysqlResult> stream(std::string_view sql);
  // After mysql_fetch_row returned null on a streamed result: ok, or the error that ended it.
  absl::Status fetch_error();

  // Fiber-friendly forms for operators: they await the socket on `ctx` rather than block the
  // worker while the server works. (Over TLS, the library may hold decrypted bytes the socket
  // does not show: those connections block in the library instead.)
  absl::Status exec(AsyncContext& ctx, std::string_view sql);
  absl::StatusOr<std::vector<std::vector<std::optional<std::string>>>> rows(AsyncContext& ctx,
                                                                            std::string_view sql);
  absl::StatusOr<MysqlResult> stream(AsyncContext& ctx, std::string_view sql);
  // The next row of a streamed result; nullptr at its end (an error if it ended early).
  absl::StatusOr<MYSQL_ROW> fetch_row(AsyncContext& ctx, MYSQL_RES* result);
  // Waits until a read on the connection will find data: buffered in the library already, or
  // readable on the socket.
  absl::Status await_data(AsyncContext& ctx);

  // An error for the connection's last failure, classified as above.
  absl::Status error(std::string_view doing) const;
  const std::string& what() const { return what_; }
  MYSQL* raw() const { return conn_.get(); }
  // The server's version (1001119 for 10.11.19) and whether it is MariaDB.
  unsigned long server_version() const { return mysql_get_server_version(conn_.get()); }
  bool is_mariadb() const;

 private:
  struct Closer {
    void operator()(MYSQL* conn) const { mysql_close(conn); }
  };
  MysqlConnection(std::unique_ptr<MYSQL, Closer> conn, std::string what)
      : conn_(std::move(conn)), what_(std::move(what)) {}

  // Sends `sql` and waits for its result's header.
  absl::Status send_and_await(AsyncContext& ctx, std::string_view sql);

  std::unique_ptr<MYSQL, Closer> conn_;
  std::string what_;
};

// `text` as a single-quoted SQL string literal (backslash and quote escaped).
std::string quote_literal(std::string_view text);

}  // namespace weir::sources::mysql
