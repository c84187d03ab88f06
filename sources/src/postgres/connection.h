// A libpq connection for the PostgreSQL source: plain or replication (`replication=database`),
// with blocking calls for the planner and fiber-friendly ones (await the socket) for operators.
//
// Every connection sets the session so that values print the way the row encoding expects
// (value.h): DateStyle ISO, IntervalStyle postgres, TimeZone UTC, extra_float_digits 1,
// bytea_output hex, client_encoding UTF8; and no statement, lock or idle-in-transaction timeout
// (a role's or database's would cancel a long COPY again at every retry). These replace an
// `options` the connection string gives.
//
// Errors: a lost or refused connection, and SQLSTATE classes 08 (connection), 40 (rollback),
// 53 (resources), 57 (operator intervention: a shutdown) and 55006 (object in use: a busy slot)
// are Unavailable (transient); others FailedPrecondition. Every message names what the
// connection is for and redacts the password.
//
// Thread safety: one thread (or fiber) at a time.

#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include <libpq-fe.h>

#include "weir/async/context.h"

namespace weir::sources::postgres {

struct PgResultDeleter {
  void operator()(PGresult* result) const { PQclear(result); }
};
using PgResult = std::unique_ptr<PGresult, PgResultDeleter>;

// `conninfo` (a URL or key=value pairs) without its password, for messages.
std::string redact_conninfo(std::string_view conninfo);

class PgConnection {
 public:
  // Connects (blocking). `what` names the connection in errors ("replication", "snapshot w3").
  static absl::StatusOr<PgConnection> connect(const std::string& conninfo, bool replication,
                                              std::string what);

  PgConnection(PgConnection&&) = default;
  PgConnection& operator=(PgConnection&&) = default;

  // Runs `sql` (blocking) and returns its result, which must be a command or tuples.
  absl::StatusOr<PgResult> exec(const std::string& sql);
  // The same, awaiting the socket on `ctx`'s fiber.
  absl::StatusOr<PgResult> exec(AsyncContext& ctx, const std::string& sql);
  // A parameterized query (text parameters), blocking.
  absl::StatusOr<PgResult> exec_params(const std::string& sql,
                                       std::initializer_list<std::string> params);

  // Starts COPY ... TO STDOUT or START_REPLICATION (both enter copy mode), awaiting the socket.
  absl::Status start_copy(AsyncContext& ctx, const std::string& sql);
  // The next copy message, awaiting the socket; nullopt at the end of the copy (the command's
  // result was OK). The view lasts until the next call. With `wait_until`, returns an empty
  // view when the deadline passes with nothing to read.
  absl::StatusOr<std::optional<std::string_view>> read_copy(
      AsyncContext& ctx,
      std::optional<std::chrono::steady_clock::time_point> wait_until = std::nullopt);
  // Sends one copy message (a standby status update) and flushes, awaiting the socket.
  absl::Status write_copy(AsyncContext& ctx, std::string_view data);

  // The server's version number (150004 for 15.4).
  int server_version() const { return PQserverVersion(conn_.get()); }
  // The backend's pid, for messages.
  int backend_pid() const { return PQbackendPID(conn_.get()); }
  const std::string& what() const { return what_; }
  PGconn* raw() const { return conn_.get(); }
  // An error for `result` (or the connection's last error), classified as above.
  absl::Status error(const char* doing, const PGresult* result) const;

 private:
  struct ConnDeleter {
    void operator()(PGconn* conn) const { PQfinish(conn); }
  };
  struct CopyBufferDeleter {
    void operator()(char* buffer) const { PQfreemem(buffer); }
  };
  PgConnection(std::unique_ptr<PGconn, ConnDeleter> conn, std::string what)
      : conn_(std::move(conn)), what_(std::move(what)) {}
  absl::Status await(AsyncContext& ctx, bool writable);
  // Collects the results of a sent query; returns the last one.
  absl::StatusOr<PgResult> finish_async(AsyncContext& ctx, const char* doing);

  std::unique_ptr<PGconn, ConnDeleter> conn_;
  std::string what_;
  std::unique_ptr<char, CopyBufferDeleter> copy_buffer_;
};

// One value of a result: a view of row `row`, column `col` (empty for NULL).
inline std::string_view value(const PGresult* result, int row, int col) {
  return {PQgetvalue(result, row, col), static_cast<size_t>(PQgetlength(result, row, col))};
}
inline bool is_null(const PGresult* result, int row, int col) {
  return PQgetisnull(result, row, col) != 0;
}
// A number the server answered (an oid, a size), checked: NULL or anything else than a number is
// an error naming `what`, never an exception.
absl::StatusOr<uint64_t> unsigned_value(const PGresult* result, int row, int col,
                                        std::string_view what);

// Quotes an identifier ("schema"."table" parts) or a literal for SQL text.
std::string quote_identifier(std::string_view name);
std::string quote_literal(std::string_view text);

}  // namespace weir::sources::postgres
