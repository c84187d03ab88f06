// Consensus in one SQLite file: table consensus(shard, seqno, data), WAL mode, synchronous=FULL.
// compare_and_set runs in a BEGIN IMMEDIATE transaction, which SQLite's file locks serialize
// across processes. A process stopped (SIGSTOP, a debugger) inside one keeps the lock: the others
// wait the busy timeout, then fail DeadlineExceeded with a message naming the holder's pid and
// state.

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "consensus_stores.h"
#include "str_cat.h"
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "weir/mutex.h"
#include "weir/status.h"

namespace weir::persist::internal {
namespace {

// In a WAL database a writer holds a POSIX lock on this byte of the "-shm" file (SQLite's
// WALINDEX_LOCK_OFFSET + WAL_WRITE_LOCK).
constexpr off_t kWalWriteLockByte = 120;

// "process 1234 (stopped)": the state of `pid` from /proc, as far as it can be read.
std::string describe_process(pid_t pid) {
  if (pid <= 0) return "a process in another PID namespace";
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  // The state follows the command name, which is in parentheses and may contain any byte.
  const size_t close = line.rfind(')');
  const char state = close != std::string::npos && close + 2 < line.size() ? line[close + 2] : '?';
  const char* what = "state unknown";
  switch (state) {
    case 'T':
      what = "stopped";
      break;
    case 't':
      what = "stopped by a debugger";
      break;
    case 'R':
    case 'S':
      what = "running";
      break;
    case 'D':
      what = "waiting on I/O";
      break;
    case 'Z':
      what = "exited, not yet reaped";
      break;
    default:
      break;
  }
  return internal::str_cat("process ", pid, " (", what, ")");
}

// Who holds the write lock of the SQLite database at `path`: "" when no other process does. Read
// from /proc/locks by the inode of the "-shm" file: opening that file to ask with F_GETLK, and
// closing it, would drop every POSIX lock this process holds on it (SQLite's own included).
std::string write_lock_holder(const std::string& path) {
  struct stat st;
  if (::stat((path + "-shm").c_str(), &st) != 0) return "";
  char inode[64];
  std::snprintf(inode, sizeof(inode), "%02x:%02x:%llu", major(st.st_dev), minor(st.st_dev),
                static_cast<unsigned long long>(st.st_ino));
  // "1: POSIX  ADVISORY  WRITE 1234 fe:00:11181445 120 120"
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    std::istringstream fields(line);
    std::string number, kind, mode, type, file, start, end;
    long pid = 0;
    if (!(fields >> number >> kind >> mode >> type >> pid >> file >> start >> end)) continue;
    if (kind != "POSIX" || type != "WRITE" || file != inode || pid == ::getpid()) continue;
    const long long first = std::atoll(start.c_str());
    const long long last = end == "EOF" ? INT64_MAX : std::atoll(end.c_str());
    if (first <= kWalWriteLockByte && kWalWriteLockByte <= last) {
      return describe_process(static_cast<pid_t>(pid));
    }
  }
  return "";
}

class Statement {
 public:
  Statement() = default;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() { sqlite3_finalize(stmt_); }
  sqlite3_stmt** out() { return &stmt_; }
  sqlite3_stmt* get() const { return stmt_; }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// Resets a statement when the call that used it returns.
class ResetOnExit {
 public:
  explicit ResetOnExit(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ResetOnExit(const ResetOnExit&) = delete;
  ResetOnExit& operator=(const ResetOnExit&) = delete;
  ~ResetOnExit() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

 private:
  sqlite3_stmt* stmt_;
};

class SqliteConsensus final : public Consensus {
 public:
  static absl::StatusOr<std::unique_ptr<Consensus>> open(const std::string& path,
                                                         absl::Duration busy_timeout) {
    auto consensus = std::unique_ptr<SqliteConsensus>(new SqliteConsensus(path, busy_timeout));
    WEIR_RETURN_IF_ERROR(consensus->init());
    return std::unique_ptr<Consensus>(std::move(consensus));
  }

  absl::StatusOr<std::optional<VersionedData>> head(std::string_view key) override {
    weir::MutexLock lock(mu_);
    ResetOnExit reset(head_.get());
    WEIR_RETURN_IF_ERROR(check(bind_key(head_.get(), key), "head"));
    const int rc = sqlite3_step(head_.get());
    if (rc == SQLITE_DONE) {
      return std::nullopt;
    }
    if (rc != SQLITE_ROW) {
      return error(rc, "head");
    }
    return row(head_.get());
  }

  absl::StatusOr<CasResult> compare_and_set(std::string_view key,
                                            std::optional<uint64_t> expected_seqno,
                                            const VersionedData& new_version) override {
    WEIR_RETURN_IF_ERROR(check_next_seqno(key, expected_seqno, new_version.seqno));
    weir::MutexLock lock(mu_);
    WEIR_RETURN_IF_ERROR(exec("BEGIN IMMEDIATE"));
    absl::StatusOr<CasResult> result = cas_in_transaction(key, expected_seqno, new_version);
    if (result.ok() && *result == CasResult::kCommitted) {
      const absl::Status commit = exec("COMMIT");
      if (!commit.ok()) {
        exec("ROLLBACK").IgnoreError();
        return commit;
      }
      return result;
    }
    exec("ROLLBACK").IgnoreError();
    return result;
  }

  absl::StatusOr<std::vector<VersionedData>> scan(std::string_view key, uint64_t from_seqno,
                                                  size_t limit) override {
    weir::MutexLock lock(mu_);
    ResetOnExit reset(scan_.get());
    WEIR_RETURN_IF_ERROR(check(bind_key(scan_.get(), key), "scan"));
    WEIR_RETURN_IF_ERROR(
        check(sqlite3_bind_int64(scan_.get(), 2, static_cast<sqlite3_int64>(from_seqno)), "scan"));
    WEIR_RETURN_IF_ERROR(
        check(sqlite3_bind_int64(scan_.get(), 3,
                                 static_cast<sqlite3_int64>(std::min<size_t>(limit, INT64_MAX))),
              "scan"));
    std::vector<VersionedData> result;
    while (true) {
      const int rc = sqlite3_step(scan_.get());
      if (rc == SQLITE_DONE) {
        return result;
      }
      if (rc != SQLITE_ROW) {
        return error(rc, "scan");
      }
      result.push_back(row(scan_.get()));
    }
  }

  absl::StatusOr<size_t> truncate(std::string_view key, uint64_t seqno) override {
    weir::MutexLock lock(mu_);
    WEIR_RETURN_IF_ERROR(exec("BEGIN IMMEDIATE"));
    absl::StatusOr<size_t> result = truncate_in_transaction(key, seqno);
    if (result.ok()) {
      const absl::Status commit = exec("COMMIT");
      if (!commit.ok()) {
        exec("ROLLBACK").IgnoreError();
        return commit;
      }
      return result;
    }
    exec("ROLLBACK").IgnoreError();
    return result;
  }

 private:
  SqliteConsensus(std::string path, absl::Duration busy_timeout)
      : path_(std::move(path)), busy_timeout_(busy_timeout) {}

  absl::Status init() {
    weir::MutexLock lock(mu_);
    const int rc =
        sqlite3_open_v2(path_.c_str(), &db_,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
    connection_.reset(db_);
    if (rc != SQLITE_OK) {
      return absl::UnavailableError(
          internal::str_cat("sqlite consensus \"", path_,
                            "\": open: ", db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc)));
    }
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, static_cast<int>(absl::ToInt64Milliseconds(busy_timeout_)));
    // Changing the journal mode of a new file can be refused while another process does the
    // same; SQLite does not always call the busy handler there, so retry ourselves.
    const absl::Time deadline = absl::Now() + busy_timeout_;
    for (const char* sql :
         {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
          "CREATE TABLE IF NOT EXISTS consensus (shard TEXT NOT NULL, seqno INTEGER NOT NULL, "
          "data BLOB NOT NULL, PRIMARY KEY (shard, seqno))"}) {
      while (true) {
        const int exec_rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
        if (exec_rc == SQLITE_OK) {
          break;
        }
        if ((exec_rc & 0xFF) != SQLITE_BUSY && (exec_rc & 0xFF) != SQLITE_LOCKED) {
          return error(exec_rc, sql);
        }
        if (absl::Now() > deadline) {
          return error(exec_rc, sql);
        }
        absl::SleepFor(absl::Milliseconds(5));
      }
    }
    WEIR_RETURN_IF_ERROR(prepare(
        "SELECT seqno, data FROM consensus WHERE shard = ?1 ORDER BY seqno DESC LIMIT 1", head_));
    WEIR_RETURN_IF_ERROR(prepare("SELECT MAX(seqno) FROM consensus WHERE shard = ?1", max_));
    WEIR_RETURN_IF_ERROR(
        prepare("INSERT INTO consensus (shard, seqno, data) VALUES (?1, ?2, ?3)", insert_));
    WEIR_RETURN_IF_ERROR(
        prepare("SELECT seqno, data FROM consensus WHERE shard = ?1 AND seqno >= ?2 ORDER BY seqno "
                "LIMIT ?3",
                scan_));
    WEIR_RETURN_IF_ERROR(
        prepare("DELETE FROM consensus WHERE shard = ?1 AND seqno < ?2", truncate_));
    return absl::OkStatus();
  }

  absl::StatusOr<CasResult> cas_in_transaction(std::string_view key,
                                               std::optional<uint64_t> expected_seqno,
                                               const VersionedData& new_version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    WEIR_ASSIGN_OR_RETURN(std::optional<uint64_t> current, max_seqno(key));
    if (current != expected_seqno) {
      return CasResult::kExpectationMismatch;
    }
    ResetOnExit reset(insert_.get());
    WEIR_RETURN_IF_ERROR(check(bind_key(insert_.get(), key), "insert"));
    WEIR_RETURN_IF_ERROR(
        check(sqlite3_bind_int64(insert_.get(), 2, static_cast<sqlite3_int64>(new_version.seqno)),
              "insert"));
    WEIR_RETURN_IF_ERROR(check(sqlite3_bind_blob64(insert_.get(), 3, new_version.data.data(),
                                                   new_version.data.size(), SQLITE_STATIC),
                               "insert"));
    const int rc = sqlite3_step(insert_.get());
    if (rc != SQLITE_DONE) {
      return error(rc, "insert");
    }
    return CasResult::kCommitted;
  }

  absl::StatusOr<size_t> truncate_in_transaction(std::string_view key, uint64_t seqno)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    WEIR_ASSIGN_OR_RETURN(std::optional<uint64_t> current, max_seqno(key));
    if (!current || *current < seqno) {
      return absl::FailedPreconditionError(internal::str_cat(
          "consensus key \"", key, "\": cannot truncate to seqno ", seqno, ", beyond the head"));
    }
    ResetOnExit reset(truncate_.get());
    WEIR_RETURN_IF_ERROR(check(bind_key(truncate_.get(), key), "truncate"));
    WEIR_RETURN_IF_ERROR(check(
        sqlite3_bind_int64(truncate_.get(), 2, static_cast<sqlite3_int64>(seqno)), "truncate"));
    const int rc = sqlite3_step(truncate_.get());
    if (rc != SQLITE_DONE) {
      return error(rc, "truncate");
    }
    return static_cast<size_t>(sqlite3_changes(db_));
  }

  absl::StatusOr<std::optional<uint64_t>> max_seqno(std::string_view key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ResetOnExit reset(max_.get());
    WEIR_RETURN_IF_ERROR(check(bind_key(max_.get(), key), "head"));
    const int rc = sqlite3_step(max_.get());
    if (rc != SQLITE_ROW) {
      return error(rc, "head");
    }
    if (sqlite3_column_type(max_.get(), 0) == SQLITE_NULL) {
      return std::nullopt;
    }
    return static_cast<uint64_t>(sqlite3_column_int64(max_.get(), 0));
  }

  static int bind_key(sqlite3_stmt* stmt, std::string_view key) {
    return sqlite3_bind_text(stmt, 1, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
  }

  static VersionedData row(sqlite3_stmt* stmt) {
    VersionedData version;
    version.seqno = static_cast<uint64_t>(sqlite3_column_int64(stmt, 0));
    const void* data = sqlite3_column_blob(stmt, 1);
    const int size = sqlite3_column_bytes(stmt, 1);
    if (data != nullptr) {
      version.data.assign(static_cast<const char*>(data), static_cast<size_t>(size));
    }
    return version;
  }

  absl::Status prepare(const char* sql, Statement& stmt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return check(sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, stmt.out(), nullptr),
                 sql);
  }

  absl::Status exec(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return check(sqlite3_exec(db_, sql, nullptr, nullptr, nullptr), sql);
  }

  absl::Status check(int rc, std::string_view what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return rc == SQLITE_OK ? absl::OkStatus() : error(rc, what);
  }

  absl::Status error(int rc, std::string_view what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::string message =
        internal::str_cat("sqlite consensus \"", path_, "\": ", what, ": ", sqlite3_errmsg(db_));
    switch (rc & 0xFF) {
      case SQLITE_BUSY:
      case SQLITE_LOCKED:
        // It has waited the whole busy timeout already: DeadlineExceeded, which persist does not
        // retry call by call (that would wait the timeout again and again holding a handle's
        // lock); its callers back off as from any transient error.
        message += internal::str_cat(" after ", absl::FormatDuration(busy_timeout_));
        if (const std::string holder = write_lock_holder(path_); !holder.empty()) {
          message += internal::str_cat(": its write lock is held by ", holder);
        }
        return absl::DeadlineExceededError(message);
      case SQLITE_IOERR:
        return absl::UnavailableError(message);
      case SQLITE_FULL:  // The disk is full: transient for a caller that waits for space.
        return absl::ResourceExhaustedError(message);
      case SQLITE_CORRUPT:
      case SQLITE_NOTADB:
        return absl::DataLossError(message);
      default:
        return absl::InternalError(message);
    }
  }

  struct Closer {
    void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
  };

  const std::string path_;
  const absl::Duration busy_timeout_;
  weir::Mutex mu_;
  // Declared before the statements, so that they are finalized first.
  std::unique_ptr<sqlite3, Closer> connection_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_) = nullptr;  // Owned by connection_.
  Statement head_ ABSL_GUARDED_BY(mu_);
  Statement max_ ABSL_GUARDED_BY(mu_);
  Statement insert_ ABSL_GUARDED_BY(mu_);
  Statement scan_ ABSL_GUARDED_BY(mu_);
  Statement truncate_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<Consensus>> open_sqlite_consensus(const std::string& path,
                                                                 absl::Duration busy_timeout) {
  return SqliteConsensus::open(path, busy_timeout);
}

}  // namespace weir::persist::internal
