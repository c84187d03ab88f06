#include "mysql/connection.h"

#include <charconv>

#include "absl/strings/str_cat.h"
#include <errmsg.h>
#include <ma_pvio.h>
#include <mysqld_error.h>

#include "weir/status.h"

namespace weir::sources::mysql {

namespace {

// Client and server errors after which the same work may succeed later.
bool transient(unsigned error) {
  switch (error) {
    case CR_CONNECTION_ERROR:
    case CR_CONN_HOST_ERROR:
    case CR_SERVER_GONE_ERROR:
    case CR_SERVER_LOST:
    case CR_SERVER_LOST_EXTENDED:
    case CR_UNKNOWN_HOST:
    case ER_SERVER_SHUTDOWN:
    case ER_LOCK_WAIT_TIMEOUT:
    case ER_LOCK_DEADLOCK:
    case ER_CON_COUNT_ERROR:
    case ER_TOO_MANY_USER_CONNECTIONS:
    case 1226:  // ER_USER_LIMIT_REACHED (max_user_connections and the like)
    case ER_QUERY_INTERRUPTED:
    case ER_NET_READ_ERROR:
    case ER_NET_READ_INTERRUPTED:
    case ER_NET_ERROR_ON_WRITE:
    case ER_NET_WRITE_INTERRUPTED:
    case 1927:  // ER_CONNECTION_KILLED (MariaDB)
      return true;
    default:
      return false;
  }
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

absl::StatusOr<unsigned> parse_number(std::string_view key, std::string_view value) {
  unsigned n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || value.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("mysql connection string: ", std::string(key),
                                                   "='", std::string(value), "' is not a number"));
  }
  return n;
}

}  // namespace

std::string ConnInfo::redacted() const {
  std::string out = absl::StrCat("host=", host, " port=", port, " user=", user);
  if (!database.empty()) absl::StrAppend(&out, " database=", database);
  if (!socket.empty()) absl::StrAppend(&out, " socket=", socket);
  return out;
}

absl::StatusOr<ConnInfo> parse_conninfo(std::string_view text) {
  ConnInfo info;
  size_t i = 0;
  while (true) {
    while (i < text.size() && is_space(text[i])) ++i;
    if (i == text.size()) break;
    const size_t eq = text.find('=', i);
    if (eq == std::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("mysql connection string: expected key=value at \"",
                       std::string(text.substr(i, 32)), "\""));
    }
    const std::string_view key = text.substr(i, eq - i);
    i = eq + 1;
    std::string value;
    if (i < text.size() && text[i] == '\'') {
      ++i;
      bool closed = false;
      while (i < text.size()) {
        const char c = text[i++];
        if (c == '\\' && i < text.size()) {
          value.push_back(text[i++]);
        } else if (c == '\'') {
          closed = true;
          break;
        } else {
          value.push_back(c);
        }
      }
      if (!closed) {
        return absl::InvalidArgumentError(absl::StrCat(
            "mysql connection string: the quoted value of ", std::string(key), " is not closed"));
      }
    } else {
      while (i < text.size() && !is_space(text[i])) value.push_back(text[i++]);
    }
    if (key == "host") {
      info.host = value;
    } else if (key == "port") {
      WEIR_ASSIGN_OR_RETURN(info.port, parse_number(key, value));
    } else if (key == "user") {
      info.user = value;
    } else if (key == "password") {
      info.password = value;
    } else if (key == "database" || key == "dbname") {
      info.database = value;
    } else if (key == "socket") {
      info.socket = value;
    } else if (key == "connect_timeout") {
      WEIR_ASSIGN_OR_RETURN(info.connect_timeout, parse_number(key, value));
    } else if (key == "ssl_mode") {
      if (value != "disable" && value != "prefer" && value != "require" && value != "verify_ca" &&
          value != "verify_full") {
        return absl::InvalidArgumentError(
            absl::StrCat("mysql connection string: ssl_mode='", value,
                         "' is not one of disable, prefer, require, verify_ca, verify_full"));
      }
      info.ssl_mode = value == "prefer" ? "" : value;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "mysql connection string: unknown key '", std::string(key),
          "' (known: host, port, user, password, database, socket, connect_timeout, ssl_mode)"));
    }
  }
  if (info.user.empty()) {
    return absl::InvalidArgumentError("mysql connection string: no user (user=...)");
  }
  return info;
}

absl::StatusOr<MysqlConnection> MysqlConnection::connect(const ConnInfo& info, std::string what) {
  std::unique_ptr<MYSQL, Closer> conn(mysql_init(nullptr));
  if (!conn) return absl::ResourceExhaustedError("mysql_init failed: out of memory");
  const unsigned timeout = info.connect_timeout;
  mysql_optionsv(conn.get(), MYSQL_OPT_CONNECT_TIMEOUT, &timeout);
  mysql_optionsv(conn.get(), MYSQL_SET_CHARSET_NAME, "utf8mb4");
  // No reading of option files: the connection string says everything.
  if (info.ssl_mode == "disable") {
    const my_bool off = 0;
    mysql_optionsv(conn.get(), MYSQL_OPT_SSL_ENFORCE, &off);
  } else if (!info.ssl_mode.empty()) {
    const my_bool on = 1;
    mysql_optionsv(conn.get(), MYSQL_OPT_SSL_ENFORCE, &on);
    const my_bool verify = info.ssl_mode == "verify_ca" || info.ssl_mode == "verify_full";
    mysql_optionsv(conn.get(), MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &verify);
  }
  if (mysql_real_connect(conn.get(), info.host.c_str(), info.user.c_str(),
                         info.password.empty() ? nullptr : info.password.c_str(),
                         info.database.empty() ? nullptr : info.database.c_str(), info.port,
                         info.socket.empty() ? nullptr : info.socket.c_str(),
                         CLIENT_MULTI_STATEMENTS) == nullptr) {
    const unsigned error = mysql_errno(conn.get());
    const std::string message =
        absl::StrCat("mysql ", what, ": could not connect (", info.redacted(),
                     "): ", mysql_error(conn.get()), " [", error, "]");
    return transient(error) ? absl::UnavailableError(message)
                            : absl::FailedPreconditionError(message);
  }
  MysqlConnection connection(std::move(conn), std::move(what));
  WEIR_RETURN_IF_ERROR(connection.exec(
      "SET NAMES utf8mb4, time_zone = '+00:00', sql_mode = 'NO_ENGINE_SUBSTITUTION'"));
  return connection;
}

absl::Status MysqlConnection::error(std::string_view doing) const {
  const unsigned error = mysql_errno(conn_.get());
  const std::string message = absl::StrCat("mysql ", what_, ": ", std::string(doing), ": ",
                                           mysql_error(conn_.get()), " [", error, "]");
  return transient(error) ? absl::UnavailableError(message)
                          : absl::FailedPreconditionError(message);
}

absl::Status MysqlConnection::exec(std::string_view sql) {
  if (mysql_real_query(conn_.get(), sql.data(), sql.size()) != 0) {
    return error(absl::StrCat("running ", std::string(sql.substr(0, 200))));
  }
  // Every result of a multi-statement string, read and dropped.
  do {
    if (MYSQL_RES* result = mysql_store_result(conn_.get()); result != nullptr) {
      mysql_free_result(result);
    } else if (mysql_field_count(conn_.get()) != 0) {
      return error(absl::StrCat("reading the result of ", std::string(sql.substr(0, 200))));
    }
    const int next = mysql_next_result(conn_.get());
    if (next > 0) return error(absl::StrCat("running ", std::string(sql.substr(0, 200))));
    if (next < 0) break;
  } while (true);
  return absl::OkStatus();
}

absl::StatusOr<MysqlResult> MysqlConnection::query(std::string_view sql) {
  if (mysql_real_query(conn_.get(), sql.data(), sql.size()) != 0) {
    return error(absl::StrCat("running ", std::string(sql.substr(0, 200))));
  }
  MysqlResult result(mysql_store_result(conn_.get()));
  if (!result)
    return error(absl::StrCat("reading the result of ", std::string(sql.substr(0, 200))));
  return result;
}

absl::StatusOr<std::vector<std::vector<std::optional<std::string>>>> MysqlConnection::rows(
    std::string_view sql) {
  WEIR_ASSIGN_OR_RETURN(MysqlResult result, query(sql));
  std::vector<std::vector<std::optional<std::string>>> rows;
  const unsigned fields = mysql_num_fields(result.get());
  while (MYSQL_ROW row = mysql_fetch_row(result.get())) {
    const unsigned long* lengths = mysql_fetch_lengths(result.get());
    auto& out = rows.emplace_back();
    for (unsigned f = 0; f < fields; ++f) {
      if (row[f] == nullptr) {
        out.emplace_back(std::nullopt);
      } else {
        out.emplace_back(std::string(row[f], lengths[f]));
      }
    }
  }
  return rows;
}

absl::StatusOr<MysqlResult> MysqlConnection::stream(std::string_view sql) {
  if (mysql_real_query(conn_.get(), sql.data(), sql.size()) != 0) {
    return error(absl::StrCat("running ", std::string(sql.substr(0, 200))));
  }
  MysqlResult result(mysql_use_result(conn_.get()));
  if (!result)
    return error(absl::StrCat("reading the result of ", std::string(sql.substr(0, 200))));
  return result;
}

absl::Status MysqlConnection::fetch_error() {
  if (mysql_errno(conn_.get()) != 0) return error("reading rows");
  return absl::OkStatus();
}

absl::Status MysqlConnection::await_data(AsyncContext& ctx) {
  MYSQL* mysql = conn_.get();
  const MARIADB_PVIO* pvio = mysql->net.pvio;
  if (pvio == nullptr) return error("reading");
  if (pvio->cache != nullptr && pvio->cache + pvio->cache_size > pvio->cache_pos) {
    return absl::OkStatus();  // Read ahead already.
  }
  if (mysql_get_ssl_cipher(mysql) != nullptr) return absl::OkStatus();  // See the header.
  return ctx.await_readable(static_cast<int>(mysql_get_socket(mysql)));
}

absl::Status MysqlConnection::send_and_await(AsyncContext& ctx, std::string_view sql) {
  if (mysql_send_query(conn_.get(), sql.data(), static_cast<unsigned long>(sql.size())) != 0) {
    return error(absl::StrCat("sending ", std::string(sql.substr(0, 200))));
  }
  WEIR_RETURN_IF_ERROR(await_data(ctx));
  if (mysql_read_query_result(conn_.get()) != 0) {
    return error(absl::StrCat("running ", std::string(sql.substr(0, 200))));
  }
  return absl::OkStatus();
}

absl::Status MysqlConnection::exec(AsyncContext& ctx, std::string_view sql) {
  WEIR_RETURN_IF_ERROR(send_and_await(ctx, sql));
  // Every result of a multi-statement string, read and dropped.
  for (;;) {
    if (MYSQL_RES* result = mysql_store_result(conn_.get()); result != nullptr) {
      mysql_free_result(result);
    }
    if (!mysql_more_results(conn_.get())) return absl::OkStatus();
    WEIR_RETURN_IF_ERROR(await_data(ctx));
    if (mysql_next_result(conn_.get()) > 0) {
      return error(absl::StrCat("running ", std::string(sql.substr(0, 200))));
    }
  }
}

absl::StatusOr<std::vector<std::vector<std::optional<std::string>>>> MysqlConnection::rows(
    AsyncContext& ctx, std::string_view sql) {
  WEIR_RETURN_IF_ERROR(send_and_await(ctx, sql));
  MysqlResult result(mysql_use_result(conn_.get()));
  if (!result) {
    return error(absl::StrCat("reading the result of ", std::string(sql.substr(0, 200))));
  }
  std::vector<std::vector<std::optional<std::string>>> rows;
  const unsigned fields = mysql_num_fields(result.get());
  for (;;) {
    WEIR_ASSIGN_OR_RETURN(MYSQL_ROW row, fetch_row(ctx, result.get()));
    if (row == nullptr) break;
    const unsigned long* lengths = mysql_fetch_lengths(result.get());
    auto& out = rows.emplace_back();
    for (unsigned f = 0; f < fields; ++f) {
      if (row[f] == nullptr) {
        out.emplace_back(std::nullopt);
      } else {
        out.emplace_back(std::string(row[f], lengths[f]));
      }
    }
  }
  return rows;
}

absl::StatusOr<MysqlResult> MysqlConnection::stream(AsyncContext& ctx, std::string_view sql) {
  WEIR_RETURN_IF_ERROR(send_and_await(ctx, sql));
  MysqlResult result(mysql_use_result(conn_.get()));
  if (!result) {
    return error(absl::StrCat("reading the result of ", std::string(sql.substr(0, 200))));
  }
  return result;
}

absl::StatusOr<MYSQL_ROW> MysqlConnection::fetch_row(AsyncContext& ctx, MYSQL_RES* result) {
  WEIR_RETURN_IF_ERROR(await_data(ctx));
  MYSQL_ROW row = mysql_fetch_row(result);
  if (row == nullptr) WEIR_RETURN_IF_ERROR(fetch_error());
  return row;
}

bool MysqlConnection::is_mariadb() const { return mariadb_connection(conn_.get()) != 0; }

std::string quote_literal(std::string_view text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'' || c == '\\') out.push_back('\\');
    if (c == '\0') {
      out += "\\0";
      continue;
    }
    out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

}  // namespace weir::sources::mysql
