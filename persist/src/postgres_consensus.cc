// Consensus in a PostgreSQL table shared by many processes and hosts:
//   consensus(shard text, sequence_number bigint, data bytea, PRIMARY KEY (shard, sequence_number))
//
// compare_and_set is one INSERT ... SELECT ... WHERE <head is the expected one> ON CONFLICT DO
// NOTHING. Because the new seqno is always the expected one + 1, two racing inserts collide on
// the primary key and PostgreSQL lets exactly one of them in. Each session pins READ COMMITTED:
// at REPEATABLE READ or SERIALIZABLE (a server or role default) the loser of that race gets a
// serialization failure instead of "nothing inserted".
//
// Every round trip has a deadline (the URL's operation_timeout, in seconds, default 30), and the
// connection has TCP keepalives and a user timeout: a server that stopped answering (stopped,
// half-open connection) fails the operation with Unavailable and drops the connection, instead
// of blocking every later operation behind the mutex.

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>

#include "consensus_stores.h"
#include "str_cat.h"
#include <libpq-fe.h>
#include <poll.h>

#include "weir/mutex.h"
#include "weir/status.h"

namespace weir::persist::internal {
namespace {

constexpr const char* kSessionSettings = "SET default_transaction_isolation = 'read committed'";
constexpr const char* kTableExists = "SELECT to_regclass('consensus') IS NOT NULL";
constexpr const char* kCreateTable =
    "CREATE TABLE IF NOT EXISTS consensus (shard text NOT NULL, sequence_number bigint NOT NULL, "
    "data bytea NOT NULL, PRIMARY KEY (shard, sequence_number))";
constexpr const char* kHead =
    "SELECT sequence_number, data FROM consensus WHERE shard = $1::text "
    "ORDER BY sequence_number DESC LIMIT 1";
constexpr const char* kCasExpected =
    "INSERT INTO consensus (shard, sequence_number, data) SELECT $1::text, $2::bigint, "
    "$3::bytea WHERE (SELECT sequence_number FROM consensus WHERE shard = $1::text ORDER BY "
    "sequence_number DESC LIMIT 1) = $4::bigint "
    "ON CONFLICT DO NOTHING";
constexpr const char* kCasFirst =
    "INSERT INTO consensus (shard, sequence_number, data) SELECT $1::text, $2::bigint, "
    "$3::bytea WHERE NOT EXISTS (SELECT 1 FROM consensus WHERE shard = $1::text) "
    "ON CONFLICT DO NOTHING";
constexpr const char* kScan =
    "SELECT sequence_number, data FROM consensus WHERE shard = $1::text AND "
    "sequence_number >= $2::bigint ORDER BY sequence_number LIMIT $3::bigint";
constexpr const char* kTruncate =
    "DELETE FROM consensus WHERE shard = $1::text AND sequence_number < $2::bigint AND EXISTS "
    "(SELECT 1 FROM consensus WHERE shard = $1::text AND sequence_number >= $2::bigint)";

struct ResultDeleter {
  void operator()(PGresult* result) const { PQclear(result); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

struct ConnDeleter {
  void operator()(PGconn* conn) const { PQfinish(conn); }
};

// One query parameter: text (format 0) or binary (format 1).
struct Param {
  std::string_view value;
  int format = 0;
};

// The URL with any password replaced, for error messages.
std::string redact(std::string_view url) {
  const size_t scheme = url.find("://");
  const size_t at = url.find('@');
  if (scheme == std::string_view::npos || at == std::string_view::npos || at < scheme) {
    return std::string(url);
  }
  const size_t colon = url.find(':', scheme + 3);
  if (colon == std::string_view::npos || colon > at) {
    return std::string(url);
  }
  return internal::str_cat(url.substr(0, colon + 1), "***", url.substr(at));
}

// Takes weir's own parameter, operation_timeout=SECONDS, out of the URL's query (libpq refuses
// parameters it does not know).
absl::Status take_operation_timeout(std::string& url, std::chrono::milliseconds& timeout) {
  const size_t query = url.find('?');
  if (query == std::string::npos) {
    return absl::OkStatus();
  }
  std::string kept;
  std::string_view rest = std::string_view(url).substr(query + 1);
  while (!rest.empty()) {
    const size_t end = std::min(rest.find('&'), rest.size());
    const std::string_view param = rest.substr(0, end);
    rest.remove_prefix(std::min(end + 1, rest.size()));
    constexpr std::string_view kKey = "operation_timeout=";
    if (!param.starts_with(kKey)) {
      kept += kept.empty() ? "" : "&";
      kept += param;
      continue;
    }
    const std::string_view value = param.substr(kKey.size());
    uint32_t seconds = 0;
    const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
    if (ec != std::errc() || ptr != value.data() + value.size() || seconds == 0 ||
        seconds > 86'400) {
      return absl::InvalidArgumentError(
          internal::str_cat("postgres consensus URL: operation_timeout=\"", value,
                            "\": expected a whole number of seconds from 1 to 86400"));
    }
    timeout = std::chrono::seconds(seconds);
  }
  url.resize(query);
  if (!kept.empty()) {
    url += "?" + kept;
  }
  return absl::OkStatus();
}

class PostgresConsensus final : public Consensus {
 public:
  static absl::StatusOr<std::unique_ptr<Consensus>> open(std::string url) {
    std::chrono::milliseconds timeout = std::chrono::seconds(30);
    WEIR_RETURN_IF_ERROR(take_operation_timeout(url, timeout));
    auto consensus = std::unique_ptr<PostgresConsensus>(new PostgresConsensus(url, timeout));
    weir::MutexLock lock(consensus->mu_);
    WEIR_RETURN_IF_ERROR(consensus->connect());
    return std::unique_ptr<Consensus>(std::move(consensus));
  }

  absl::StatusOr<std::optional<VersionedData>> head(std::string_view key) override {
    weir::MutexLock lock(mu_);
    WEIR_ASSIGN_OR_RETURN(Result result, query("head", kHead, {{key}}, /*retry=*/true));
    if (PQntuples(result.get()) == 0) {
      return std::nullopt;
    }
    return row(result.get(), 0);
  }

  absl::StatusOr<CasResult> compare_and_set(std::string_view key,
                                            std::optional<uint64_t> expected_seqno,
                                            const VersionedData& new_version) override {
    WEIR_RETURN_IF_ERROR(check_next_seqno(key, expected_seqno, new_version.seqno));
    const std::string seqno = std::to_string(new_version.seqno);
    const std::string expected = expected_seqno ? std::to_string(*expected_seqno) : "";
    weir::MutexLock lock(mu_);
    // Not retried here: after a lost connection the insert may or may not have committed, and
    // only the caller can tell (persist re-reads the head and recognizes its own change).
    absl::StatusOr<Result> result =
        expected_seqno
            ? query("compare_and_set", kCasExpected,
                    {{key}, {seqno}, {new_version.data, 1}, {expected}}, false)
            : query("compare_and_set", kCasFirst, {{key}, {seqno}, {new_version.data, 1}}, false);
    WEIR_RETURN_IF_ERROR(result.status());
    return std::strcmp(PQcmdTuples(result->get()), "1") == 0 ? CasResult::kCommitted
                                                             : CasResult::kExpectationMismatch;
  }

  absl::StatusOr<std::vector<VersionedData>> scan(std::string_view key, uint64_t from_seqno,
                                                  size_t limit) override {
    const std::string from = std::to_string(from_seqno);
    const std::string max = std::to_string(std::min<size_t>(limit, INT64_MAX));
    weir::MutexLock lock(mu_);
    WEIR_ASSIGN_OR_RETURN(Result result,
                          query("scan", kScan, {{key}, {from}, {max}}, /*retry=*/true));
    std::vector<VersionedData> versions;
    versions.reserve(PQntuples(result.get()));
    for (int i = 0; i < PQntuples(result.get()); ++i) {
      versions.push_back(row(result.get(), i));
    }
    return versions;
  }

  absl::StatusOr<size_t> truncate(std::string_view key, uint64_t seqno) override {
    const std::string to = std::to_string(seqno);
    weir::MutexLock lock(mu_);
    WEIR_ASSIGN_OR_RETURN(Result result,
                          query("truncate", kTruncate, {{key}, {to}}, /*retry=*/true));
    const size_t deleted = std::strtoull(PQcmdTuples(result.get()), nullptr, 10);
    if (deleted == 0) {
      // Nothing to delete, or `seqno` is beyond the head: tell them apart.
      WEIR_ASSIGN_OR_RETURN(Result head, query("head", kHead, {{key}}, /*retry=*/true));
      if (PQntuples(head.get()) == 0 || row(head.get(), 0).seqno < seqno) {
        return absl::FailedPreconditionError(internal::str_cat(
            "consensus key \"", key, "\": cannot truncate to seqno ", seqno, ", beyond the head"));
      }
    }
    return deleted;
  }

 private:
  PostgresConsensus(std::string url, std::chrono::milliseconds timeout)
      : url_(std::move(url)), timeout_(timeout) {}

  absl::Status connect() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // Ours first: what the URL says overrides them (libpq takes the last value of a keyword).
    const std::string user_timeout_ms = std::to_string(timeout_.count());
    const char* const keywords[] = {
        "connect_timeout",  "keepalives",       "keepalives_idle", "keepalives_interval",
        "keepalives_count", "tcp_user_timeout", "dbname",          nullptr};
    const char* const values[] = {"10",         "1",    "10", "5", "3", user_timeout_ms.c_str(),
                                  url_.c_str(), nullptr};
    conn_.reset(PQconnectdbParams(keywords, values, /*expand_dbname=*/1));
    if (conn_ == nullptr || PQstatus(conn_.get()) != CONNECTION_OK) {
      const std::string message = conn_ ? PQerrorMessage(conn_.get()) : "out of memory";
      conn_.reset();
      return absl::UnavailableError(
          internal::str_cat("postgres consensus \"", redact(url_), "\": connect: ", message));
    }
    if (absl::Status set = run("session settings", kSessionSettings, {}).status(); !set.ok()) {
      conn_.reset();  // Not to be used unpinned: the next operation connects again.
      return set;
    }
    if (table_ready_) {
      return absl::OkStatus();
    }
    // Created once per process, and only if absent: a role without CREATE on the schema can use a
    // table made for it, and reconnects take no catalog lock. Concurrent CREATE TABLE IF NOT
    // EXISTS can still collide in the catalog; a retry after the other side committed sees it.
    for (int attempt = 0;; ++attempt) {
      WEIR_ASSIGN_OR_RETURN(Result exists, run("look for the table", kTableExists, {}));
      if (PQntuples(exists.get()) == 1 && *PQgetvalue(exists.get(), 0, 0) == 1) {
        table_ready_ = true;
        return absl::OkStatus();
      }
      absl::StatusOr<Result> created = run("create table", kCreateTable, {});
      if (created.ok() || attempt == 3) {
        table_ready_ = created.ok();
        return created.status();
      }
    }
  }

  absl::StatusOr<Result> query(std::string_view what, const char* sql,
                               std::initializer_list<Param> params, bool retry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (int attempt = 0;; ++attempt) {
      if (conn_ == nullptr || PQstatus(conn_.get()) != CONNECTION_OK) {
        WEIR_RETURN_IF_ERROR(connect());
      }
      timed_out_ = false;
      absl::StatusOr<Result> result = run(what, sql, params);
      // Once more on a fresh connection after a lost one, where that is safe; not after a
      // timeout, which would only double the wait.
      const bool connection_lost = conn_ == nullptr || PQstatus(conn_.get()) != CONNECTION_OK;
      if (result.ok() || !retry || attempt > 0 || timed_out_ || !connection_lost) {
        return result;
      }
    }
  }

  // One round trip with a deadline. After a timeout the connection is dropped (a half-answered
  // protocol state cannot be reused) and the next operation reconnects.
  absl::StatusOr<Result> run(std::string_view what, const char* sql,
                             std::initializer_list<Param> params)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::string> values;  // NUL-terminated copies of the text parameters.
    std::vector<const char*> pointers;
    std::vector<int> lengths;
    std::vector<int> formats;
    values.reserve(params.size());
    for (const Param& param : params) {
      values.emplace_back(param.format == 1 ? std::string_view() : param.value);
      pointers.push_back(param.format == 1 ? param.value.data() : values.back().c_str());
      lengths.push_back(static_cast<int>(param.value.size()));
      formats.push_back(param.format);
    }
    PGconn* const conn = conn_.get();
    if (PQsendQueryParams(conn, sql, static_cast<int>(pointers.size()), nullptr, pointers.data(),
                          lengths.data(), formats.data(), /*resultFormat=*/1) == 0) {
      return lost(what);
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    // Sends what libpq buffered, then reads until the server says the query is done.
    for (int flushed = PQflush(conn); flushed != 0; flushed = PQflush(conn)) {
      if (flushed < 0) {
        return lost(what);
      }
      if (!wait(POLLOUT | POLLIN, deadline)) {
        return timed_out(what);
      }
      if (PQconsumeInput(conn) == 0) {
        return lost(what);
      }
    }
    Result outcome;
    while (true) {
      while (PQisBusy(conn) != 0) {
        if (!wait(POLLIN, deadline)) {
          return timed_out(what);
        }
        if (PQconsumeInput(conn) == 0) {
          return lost(what);
        }
      }
      Result next(PQgetResult(conn));
      if (next == nullptr) {
        break;
      }
      const ExecStatusType status = PQresultStatus(next.get());
      if (outcome == nullptr || (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)) {
        outcome = std::move(next);  // The first result, or the error that ended the query.
      }
    }
    const ExecStatusType status = outcome ? PQresultStatus(outcome.get()) : PGRES_FATAL_ERROR;
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
      return outcome;
    }
    return error(outcome.get(), what);
  }

  // Waits until the connection's socket is ready for `events` or the deadline passes.
  bool wait(short events, std::chrono::steady_clock::time_point deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    pollfd fd{PQsocket(conn_.get()), events, 0};
    while (true) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return false;
      }
      const int ready = ::poll(&fd, 1, static_cast<int>(std::min<int64_t>(left.count(), 60'000)));
      if (ready > 0) {
        return true;
      }
      if (ready < 0 && errno != EINTR) {
        return true;  // libpq's next call reports the socket's error.
      }
    }
  }

  // The connection failed mid-query: its state cannot be reused.
  absl::Status lost(std::string_view what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::Status status = absl::UnavailableError(internal::str_cat(
        "postgres consensus \"", redact(url_), "\": ", what, ": ", PQerrorMessage(conn_.get())));
    conn_.reset();
    return status;
  }

  absl::Status timed_out(std::string_view what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    conn_.reset();
    timed_out_ = true;
    return absl::UnavailableError(internal::str_cat(
        "postgres consensus \"", redact(url_), "\": ", what, ": no answer within ",
        std::chrono::duration_cast<std::chrono::seconds>(timeout_).count(),
        " s (operation_timeout); the connection was dropped, and for a compare_and_set the outcome "
        "is unknown"));
  }

  static VersionedData row(PGresult* result, int i) {
    VersionedData version;
    // Binary bigint: 8 bytes, network order.
    uint64_t seqno = 0;
    const auto* bytes = reinterpret_cast<const unsigned char*>(PQgetvalue(result, i, 0));
    for (int b = 0; b < 8; ++b) {
      seqno = (seqno << 8) | bytes[b];
    }
    version.seqno = seqno;
    version.data.assign(PQgetvalue(result, i, 1), static_cast<size_t>(PQgetlength(result, i, 1)));
    return version;
  }

  absl::Status error(PGresult* result, std::string_view what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::string message =
        internal::str_cat("postgres consensus \"", redact(url_), "\": ", what, ": ",
                          result ? PQresultErrorMessage(result) : PQerrorMessage(conn_.get()));
    // Transient: a lost connection, and (SQLSTATE classes 08, 40, 53, 57) connection exceptions,
    // serialization failures and deadlocks, insufficient resources, an operator intervention
    // (a cancel, a shutdown). Anything else is a bug or a misconfiguration.
    const char* const state = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
    const std::string_view sqlstate_class =
        state != nullptr ? std::string_view(state).substr(0, 2) : std::string_view();
    if (PQstatus(conn_.get()) != CONNECTION_OK || sqlstate_class == "08" ||
        sqlstate_class == "40" || sqlstate_class == "53" || sqlstate_class == "57") {
      return absl::UnavailableError(message);
    }
    return absl::InternalError(message);
  }

  const std::string url_;
  const std::chrono::milliseconds timeout_;
  weir::Mutex mu_;
  std::unique_ptr<PGconn, ConnDeleter> conn_ ABSL_GUARDED_BY(mu_);
  bool table_ready_ ABSL_GUARDED_BY(mu_) = false;
  bool timed_out_ ABSL_GUARDED_BY(mu_) = false;  // Whether the last run() ran out of time.
};

}  // namespace

absl::StatusOr<std::unique_ptr<Consensus>> open_postgres_consensus(const std::string& url) {
  return PostgresConsensus::open(url);
}

}  // namespace weir::persist::internal
