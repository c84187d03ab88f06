#include "postgres/connection.h"

#include <algorithm>
#include <regex>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include <poll.h>

#include "weir/status.h"

namespace weir::sources::postgres {

std::string redact_conninfo(std::string_view conninfo) {
  std::string text(conninfo);
  // URL form: scheme://user:password@host.
  static const std::regex url_password(R"((://[^:/@]*):[^@]*@)");
  text = std::regex_replace(text, url_password, "$1:***@");
  // key=value form (and URL query parameters).
  static const std::regex kv_password(R"((password\s*=\s*)('[^']*'|[^\s&]*))");
  return std::regex_replace(text, kv_password, "$1***");
}

absl::StatusOr<PgConnection> PgConnection::connect(const std::string& conninfo, bool replication,
                                                   std::string what) {
  // The first dbname expands `conninfo`; the later keywords override what it says. The
  // session settings the decoders rely on come after the user's own `options` (kept: say,
  // -c logical_decoding_work_mem=...), so that theirs win where both set one.
  std::string options;
  {
    char* parse_error = nullptr;
    PQconninfoOption* parsed = PQconninfoParse(conninfo.c_str(), &parse_error);
    PQfreemem(parse_error);  // An unparsable conninfo fails to connect below, with the reason.
    for (PQconninfoOption* o = parsed; o != nullptr && o->keyword != nullptr; ++o) {
      if (std::string_view(o->keyword) == "options" && o->val != nullptr) {
        options = absl::StrCat(o->val, " ");
      }
    }
    PQconninfoFree(parsed);
  }
  absl::StrAppend(&options,
                  "-c DateStyle=ISO,MDY -c IntervalStyle=postgres -c TimeZone=UTC "
                  "-c extra_float_digits=1 -c bytea_output=hex -c statement_timeout=0 "
                  "-c lock_timeout=0 -c idle_in_transaction_session_timeout=0");
  std::vector<const char*> keywords = {"dbname", "client_encoding", "options", "application_name"};
  std::vector<const char*> values = {conninfo.c_str(), "UTF8", options.c_str(), "weir"};
  if (replication) {
    keywords.push_back("replication");
    values.push_back("database");
  }
  keywords.push_back(nullptr);
  values.push_back(nullptr);
  std::unique_ptr<PGconn, ConnDeleter> conn(
      PQconnectdbParams(keywords.data(), values.data(), /*expand_dbname=*/1));
  if (conn == nullptr || PQstatus(conn.get()) != CONNECTION_OK) {
    std::string message = conn ? PQerrorMessage(conn.get()) : "out of memory";
    while (!message.empty() && message.back() == '\n') message.pop_back();
    const std::string text = absl::StrCat("postgres source: connecting (", what, ") to \"",
                                          redact_conninfo(conninfo), "\": ", message);
    // A refused password or a missing database will not fix itself; a server that is down
    // or restarting will.
    if (message.find("password authentication failed") != std::string::npos ||
        message.find("does not exist") != std::string::npos ||
        message.find("no pg_hba.conf entry") != std::string::npos ||
        message.find("must be superuser or replication role") != std::string::npos ||
        message.find("permission denied") != std::string::npos) {
      return absl::FailedPreconditionError(text);
    }
    return absl::UnavailableError(text);
  }
  return PgConnection(std::move(conn), std::move(what));
}

absl::Status PgConnection::error(const char* doing, const PGresult* result) const {
  std::string message = result ? PQresultErrorMessage(result) : PQerrorMessage(conn_.get());
  while (!message.empty() && message.back() == '\n') message.pop_back();
  if (message.empty()) message = "no result";
  const std::string text = absl::StrCat("postgres source (", what_, "): ", doing, ": ", message);
  const char* const state = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const std::string_view sqlstate = state ? state : "";
  const std::string_view klass = sqlstate.substr(0, 2);
  if (PQstatus(conn_.get()) != CONNECTION_OK || klass == "08" || klass == "40" || klass == "53" ||
      klass == "57" || sqlstate == "55006" || sqlstate.empty()) {
    return absl::UnavailableError(text);
  }
  return absl::FailedPreconditionError(
      absl::StrCat(text, " (SQLSTATE ", std::string(sqlstate), ")"));
}

absl::StatusOr<PgResult> PgConnection::exec(const std::string& sql) {
  PgResult result(PQexec(conn_.get(), sql.c_str()));
  const ExecStatusType status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    return error(sql.substr(0, 200).c_str(), result.get());
  }
  return result;
}

absl::StatusOr<PgResult> PgConnection::exec_params(const std::string& sql,
                                                   std::initializer_list<std::string> params) {
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p.c_str());
  PgResult result(PQexecParams(conn_.get(), sql.c_str(), static_cast<int>(values.size()), nullptr,
                               values.data(), nullptr, nullptr, 0));
  const ExecStatusType status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    return error(sql.substr(0, 200).c_str(), result.get());
  }
  return result;
}

absl::Status PgConnection::await(AsyncContext& ctx, bool writable) {
  const int fd = PQsocket(conn_.get());
  if (fd < 0) return error("the connection has no socket", nullptr);
  const absl::Status ready = writable ? ctx.await_writable(fd) : ctx.await_readable(fd);
  if (!ready.ok()) {
    return absl::UnavailableError(
        absl::StrCat("postgres source (", what_, "): waiting for the server: ", ready.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<PgResult> PgConnection::finish_async(AsyncContext& ctx, const char* doing) {
  PGconn* conn = conn_.get();
  for (int flushed = PQflush(conn); flushed != 0; flushed = PQflush(conn)) {
    if (flushed < 0) return error(doing, nullptr);
    WEIR_RETURN_IF_ERROR(await(ctx, /*writable=*/true));
  }
  PgResult last;
  for (;;) {
    while (PQisBusy(conn) != 0) {
      WEIR_RETURN_IF_ERROR(await(ctx, /*writable=*/false));
      if (PQconsumeInput(conn) == 0) return error(doing, nullptr);
    }
    PgResult next(PQgetResult(conn));
    if (!next) break;
    const ExecStatusType status = PQresultStatus(next.get());
    if (status == PGRES_COPY_OUT || status == PGRES_COPY_BOTH) return next;
    last = std::move(next);
  }
  const ExecStatusType status = last ? PQresultStatus(last.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) return error(doing, last.get());
  return last;
}

absl::StatusOr<PgResult> PgConnection::exec(AsyncContext& ctx, const std::string& sql) {
  if (PQsendQuery(conn_.get(), sql.c_str()) == 0) return error(sql.c_str(), nullptr);
  return finish_async(ctx, sql.substr(0, 200).c_str());
}

absl::Status PgConnection::start_copy(AsyncContext& ctx, const std::string& sql) {
  if (PQsetnonblocking(conn_.get(), 1) != 0) return error("setting non-blocking mode", nullptr);
  if (PQsendQuery(conn_.get(), sql.c_str()) == 0) return error(sql.c_str(), nullptr);
  WEIR_ASSIGN_OR_RETURN(PgResult result, finish_async(ctx, sql.substr(0, 200).c_str()));
  const ExecStatusType status = PQresultStatus(result.get());
  if (status != PGRES_COPY_OUT && status != PGRES_COPY_BOTH) {
    return absl::FailedPreconditionError(
        absl::StrCat("postgres source (", what_, "): ", sql.substr(0, 200),
                     ": expected copy mode, got ", PQresStatus(status)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string_view>> PgConnection::read_copy(
    AsyncContext& ctx, std::optional<std::chrono::steady_clock::time_point> wait_until) {
  copy_buffer_.reset();
  PGconn* conn = conn_.get();
  bool read_socket = false;  // Read it since the buffer ran dry.
  for (;;) {
    char* buffer = nullptr;
    const int n = PQgetCopyData(conn, &buffer, /*async=*/1);
    if (n > 0) {
      copy_buffer_.reset(buffer);
      return std::optional<std::string_view>(std::string_view(buffer, static_cast<size_t>(n)));
    }
    if (n == -1) {
      // The copy ended: its command's result says how.
      PgResult result(PQgetResult(conn));
      const ExecStatusType status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
      while (PgResult(PQgetResult(conn))) {
      }
      if (status != PGRES_COMMAND_OK) return error("the copy ended", result.get());
      return std::optional<std::string_view>();
    }
    if (n == -2) return error("reading the copy", nullptr);
    // Nothing buffered: first read what the socket already holds (a server streaming a COPY
    // usually has sent more meanwhile), and wait for it only if that was nothing. Waiting at
    // once cost a reactor round trip per socket read (measured: ~30% of a snapshot's time).
    if (!read_socket) {
      read_socket = true;
      if (PQconsumeInput(conn) == 0) return error("reading the copy", nullptr);
      continue;
    }
    // Still nothing: wait for the socket (or the deadline).
    if (wait_until) {
      // A bounded wait: poll on a thread of the blocking pool (await_readable has no deadline).
      const int fd = PQsocket(conn);
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          *wait_until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::optional<std::string_view>(std::string_view());
      const int timeout = static_cast<int>(std::min<int64_t>(left.count(), 1000));
      const int polled = ctx.run_blocking([fd, timeout](const std::stop_token&) {
        pollfd pfd{fd, POLLIN, 0};
        return ::poll(&pfd, 1, timeout);
      });
      if (polled == 0) continue;  // Checks the deadline again.
    } else {
      WEIR_RETURN_IF_ERROR(await(ctx, /*writable=*/false));
    }
    if (PQconsumeInput(conn) == 0) return error("reading the copy", nullptr);
  }
}

absl::Status PgConnection::write_copy(AsyncContext& ctx, std::string_view data) {
  PGconn* conn = conn_.get();
  for (;;) {
    const int put = PQputCopyData(conn, data.data(), static_cast<int>(data.size()));
    if (put == 1) break;
    if (put < 0) return error("sending a status update", nullptr);
    WEIR_RETURN_IF_ERROR(await(ctx, /*writable=*/true));
  }
  for (int flushed = PQflush(conn); flushed != 0; flushed = PQflush(conn)) {
    if (flushed < 0) return error("sending a status update", nullptr);
    WEIR_RETURN_IF_ERROR(await(ctx, /*writable=*/true));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> unsigned_value(const PGresult* result, int row, int col,
                                        std::string_view what) {
  uint64_t number = 0;
  if (is_null(result, row, col) || !absl::SimpleAtoi(PQgetvalue(result, row, col), &number)) {
    return absl::UnavailableError(absl::StrCat("postgres source: ", std::string(what), " is '",
                                               std::string(value(result, row, col)),
                                               "', not a number"));
  }
  return number;
}

std::string quote_identifier(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::string quote_literal(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out.push_back('\'');
    out.push_back(c);
  }
  out.push_back('\'');
  // A backslash is literal with standard_conforming_strings (on since 9.1).
  return out;
}

}  // namespace weir::sources::postgres
