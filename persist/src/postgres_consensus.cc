// Consensus in a PostgreSQL table shared by many processes and hosts:
//   consensus(shard text, sequence_number bigint, data bytea, PRIMARY KEY (shard, sequence_number))
//
// compare_and_set is one INSERT ... SELECT ... WHERE <head is the expected one> ON CONFLICT DO
// NOTHING. Because the new seqno is always the expected one + 1, two racing inserts collide on
// the primary key and PostgreSQL lets exactly one of them in, at any isolation level.

#include <charconv>
#include <cstring>

#include "consensus_stores.h"
#include "str_cat.h"
#include <libpq-fe.h>

#include "weir/mutex.h"
#include "weir/status.h"

namespace weir::persist::internal {
namespace {

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

class PostgresConsensus final : public Consensus {
 public:
  static absl::StatusOr<std::unique_ptr<Consensus>> open(const std::string& url) {
    auto consensus = std::unique_ptr<PostgresConsensus>(new PostgresConsensus(url));
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
  explicit PostgresConsensus(std::string url) : url_(std::move(url)) {}

  absl::Status connect() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    conn_.reset(PQconnectdb(url_.c_str()));
    if (conn_ == nullptr || PQstatus(conn_.get()) != CONNECTION_OK) {
      const std::string message = conn_ ? PQerrorMessage(conn_.get()) : "out of memory";
      conn_.reset();
      return absl::UnavailableError(
          internal::str_cat("postgres consensus \"", redact(url_), "\": connect: ", message));
    }
    // Concurrent CREATE TABLE IF NOT EXISTS can still collide in the catalog; one retry after
    // the other side committed sees the table.
    for (int attempt = 0;; ++attempt) {
      Result result(PQexec(conn_.get(), kCreateTable));
      if (PQresultStatus(result.get()) == PGRES_COMMAND_OK) {
        return absl::OkStatus();
      }
      if (attempt == 3) {
        return error(result.get(), "create table");
      }
    }
  }

  absl::StatusOr<Result> query(std::string_view what, const char* sql,
                               std::initializer_list<Param> params, bool retry)
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
    for (int attempt = 0;; ++attempt) {
      if (conn_ == nullptr || PQstatus(conn_.get()) != CONNECTION_OK) {
        WEIR_RETURN_IF_ERROR(connect());
      }
      Result result(PQexecParams(conn_.get(), sql, static_cast<int>(pointers.size()), nullptr,
                                 pointers.data(), lengths.data(), formats.data(),
                                 /*resultFormat=*/1));
      const ExecStatusType status = PQresultStatus(result.get());
      if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
        return result;
      }
      const bool connection_lost = PQstatus(conn_.get()) != CONNECTION_OK;
      if (connection_lost && retry && attempt == 0) {
        continue;
      }
      return error(result.get(), what);
    }
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
    if (PQstatus(conn_.get()) != CONNECTION_OK) {
      return absl::UnavailableError(message);
    }
    return absl::InternalError(message);
  }

  const std::string url_;
  weir::Mutex mu_;
  std::unique_ptr<PGconn, ConnDeleter> conn_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<Consensus>> open_postgres_consensus(const std::string& url) {
  return PostgresConsensus::open(url);
}

}  // namespace weir::persist::internal
