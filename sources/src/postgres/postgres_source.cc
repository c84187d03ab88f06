// The PostgreSQL source's operators: snapshot and replication (see postgres_source.h).

#include "weir/sources/postgres/postgres_source.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <type_traits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "postgres/connection.h"
#include <unistd.h>

#include "weir/errno_message.h"
#include "weir/operators/concat.h"
#include "weir/sources/change_stream.h"
#include "weir/status.h"

namespace weir::sources::postgres {
namespace {

using Clock = std::chrono::steady_clock;
using Change = sources::Update;  // Not pgoutput's Update message.

// Waits (polling: the leader is another operator, perhaps on another worker) until the snapshot
// leader has published.
PostgresShared::Snapshot const* await_snapshot(
    AsyncContext& ctx, PostgresShared& shared, absl::Status& failed,
    std::optional<absl::StatusOr<PostgresShared::Snapshot>>& holder) {
  for (;;) {
    holder = shared.snapshot();
    if (holder) break;
    ctx.sleep_for(std::chrono::milliseconds(2));
  }
  if (!holder->ok()) {
    failed = absl::UnavailableError(
        absl::StrCat("postgres source: the snapshot leader failed: ", holder->status().message()));
    return nullptr;
  }
  return &**holder;
}

// COPY ... (FORMAT binary)'s stream: the header (a signature, flags, an extension) before the
// first tuple, then tuples (a 16-bit field count, each field a 32-bit length, -1 for NULL, and
// its bytes), then a field count of -1. PostgreSQL sends a tuple per CopyData message, the header
// with the first; next() takes whole tuples out of any message and refuses one split across two.
class BinaryCopyStream {
 public:
  explicit BinaryCopyStream(std::string table) : table_(std::move(table)) {}

  // Starts on one CopyData message (a view that must live until next() returns false).
  absl::Status feed(std::string_view message) {
    rest_ = message;
    if (!header_done_) {
      static constexpr std::string_view kSignature("PGCOPY\n\377\r\n\0", 11);
      if (rest_.size() < kSignature.size() + 8 || !rest_.starts_with(kSignature)) {
        return damaged("its header is not COPY BINARY's");
      }
      const uint32_t flags = be32(rest_.data() + 11), extension = be32(rest_.data() + 15);
      if ((flags & 0xffff0000u) != 0) return damaged("its header has unknown critical flags");
      if (extension > rest_.size() - 19) return damaged("its header extension is cut short");
      rest_.remove_prefix(19 + extension);
      header_done_ = true;
    }
    return absl::OkStatus();
  }

  // The next tuple of the message fed, or nullopt at its end (ended() says whether the trailer
  // came). Errors: a tuple split across messages, bytes after the trailer.
  absl::StatusOr<std::optional<std::string_view>> next() {
    if (rest_.empty()) return std::optional<std::string_view>();
    if (ended_) return damaged("it has data after its end");
    if (rest_.size() < 2) return damaged("a tuple is cut short");
    const auto fields = static_cast<int16_t>(be16(rest_.data()));
    if (fields == -1) {
      if (rest_.size() != 2) return damaged("it has data after its end");
      ended_ = true;
      rest_ = {};
      return std::optional<std::string_view>();
    }
    if (fields < 0) return damaged("a tuple has a negative field count");
    size_t at = 2;
    for (int16_t f = 0; f < fields; ++f) {
      if (rest_.size() - at < 4) return damaged("a tuple is cut short");
      const auto length = static_cast<int32_t>(be32(rest_.data() + at));
      at += 4;
      if (length == -1) continue;
      if (length < 0 || static_cast<size_t>(length) > rest_.size() - at) {
        return damaged("a tuple is cut short");
      }
      at += static_cast<size_t>(length);
    }
    const std::string_view tuple = rest_.substr(0, at);
    rest_.remove_prefix(at);
    return std::optional<std::string_view>(tuple);
  }

  bool ended() const { return ended_; }

 private:
  static uint32_t be32(const char* p) {
    return (uint32_t{static_cast<uint8_t>(p[0])} << 24) |
           (uint32_t{static_cast<uint8_t>(p[1])} << 16) |
           (uint32_t{static_cast<uint8_t>(p[2])} << 8) | uint32_t{static_cast<uint8_t>(p[3])};
  }
  static uint16_t be16(const char* p) {
    return static_cast<uint16_t>((static_cast<uint8_t>(p[0]) << 8) | static_cast<uint8_t>(p[1]));
  }
  absl::Status damaged(std::string_view why) const {
    return absl::DataLossError(absl::StrCat(
        "table ", table_, ": the snapshot's binary COPY stream is damaged: ", std::string(why)));
  }

  std::string table_;
  std::string_view rest_;
  bool header_done_ = false;
  bool ended_ = false;
};

// The table's name for SQL, from its recorded description (a schema name may hold a dot).
std::string qualified(const ExportTable& table) {
  return absl::StrCat(quote_identifier(table.desc.schema), ".", quote_identifier(table.desc.table));
}

// The leader's part of the snapshot: a temporary slot with USE_SNAPSHOT in a REPEATABLE READ
// transaction on a replication connection, its consistent point, the exported snapshot and the
// tables' sizes. The connection must stay open until every worker imported the snapshot.
absl::StatusOr<PostgresShared::Snapshot> take_snapshot(AsyncContext& ctx,
                                                       const PostgresSourceConfig& config,
                                                       const std::vector<size_t>& snapshotting,
                                                       std::optional<PgConnection>& conn) {
  auto connected = ctx.run_blocking([&] {
    return PgConnection::connect(config.conninfo, /*replication=*/true, "snapshot leader");
  });
  if (!connected.ok()) return connected.status();
  conn.emplace(*std::move(connected));
  WEIR_RETURN_IF_ERROR(conn->exec(ctx, "BEGIN READ ONLY ISOLATION LEVEL REPEATABLE READ").status());
  // A temporary slot is dropped with the connection, whatever happens to this process.
  // Short, so that it is never truncated to 63 bytes; the pid makes it unique on the server.
  const std::string slot = absl::StrCat("weir_snapshot_", conn->backend_pid());
  WEIR_ASSIGN_OR_RETURN(
      PgResult created,
      conn->exec(ctx, absl::StrCat("CREATE_REPLICATION_SLOT ", quote_identifier(slot),
                                   " TEMPORARY LOGICAL pgoutput USE_SNAPSHOT")));
  PostgresShared::Snapshot snapshot;
  WEIR_ASSIGN_OR_RETURN(snapshot.lsn, parse_lsn(value(created.get(), 0, 1)));
  WEIR_ASSIGN_OR_RETURN(PgResult exported, conn->exec(ctx, "SELECT pg_export_snapshot()"));
  snapshot.name = std::string(value(exported.get(), 0, 0));
  snapshot.blocks.assign(config.tables.size(), 0);
  snapshot.reltuples.assign(config.tables.size(), 0);
  for (size_t e : snapshotting) {
    WEIR_ASSIGN_OR_RETURN(
        PgResult size,
        conn->exec(ctx, absl::StrCat("SELECT pg_relation_size(", config.tables[e].oid,
                                     ") / current_setting('block_size')::int8, reltuples FROM "
                                     "pg_class WHERE oid = ",
                                     config.tables[e].oid)));
    if (PQntuples(size.get()) != 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("postgres source: table ", config.tables[e].name, " (oid ",
                       config.tables[e].oid, ") no longer exists"));
    }
    // NULL if the table went away since the check.
    WEIR_ASSIGN_OR_RETURN(snapshot.blocks[e], unsigned_value(size.get(), 0, 0,
                                                             absl::StrCat("the size of table ",
                                                                          config.tables[e].name)));
    double reltuples = 0;
    (void)absl::SimpleAtod(PQgetvalue(size.get(), 0, 1), &reltuples);  // Only for progress bars.
    snapshot.reltuples[e] = std::max(0.0, reltuples);
  }
  return snapshot;
}

// Renders the snapshot operator: outputs 0..n-1 the exports, n health.
void render_snapshot(Scope<Offset>& scope, const PostgresSourceConfig& config,
                     const std::vector<ExportSpec>& exports,
                     std::vector<Stream<Offset, Change>>& outs,
                     std::vector<Stream<Offset, HealthUpdate>>& health,
                     std::vector<Stream<Offset, AsyncError>>& errors,
                     std::vector<ShutdownButton>& buttons) {
  AsyncOperatorBuilder<Offset> builder("PostgresSnapshot", scope);
  auto [outputs, health_out] = add_source_outputs(builder, exports.size(), outs, health);
  const size_t worker = scope.index(), peers = scope.peers();
  const bool leader = worker == config.leader % peers;
  auto built = builder.build([=](AsyncContext& ctx,
                                 std::span<CapabilitySet<Offset>> caps) mutable -> absl::Status {
    const size_t n = exports.size();
    std::optional<Capability<Offset>> health_cap(caps[n].first());
    caps[n].clear();
    auto report = [&](size_t e, Health status, std::string error = "") {
      HealthUpdate update{static_cast<uint32_t>(e), static_cast<uint32_t>(worker), status,
                          std::move(error)};
      update.snapshot = true;
      health_out.give(*health_cap, std::move(update));
    };
    std::vector<size_t> snapshotting;
    for (size_t e = 0; e < n; ++e) {
      if (exports[e].needs_snapshot() && exports[e].definite_error.empty() &&
          config.tables[e].error_to_write.empty()) {
        snapshotting.push_back(e);
        report(e, Health::kStarting);
      } else {
        report(e, Health::kRunning);
        if (config.mode == ProgressMode::kConcurrent) caps[e].clear();
      }
    }
    if (snapshotting.empty()) {
      config.shared->finished();
      for (size_t e = 0; e < n; ++e) caps[e].clear();
      return absl::OkStatus();
    }
    std::optional<PgConnection> exporter;  // The leader's, open until every worker imported.
    if (leader) {
      auto taken = take_snapshot(ctx, config, snapshotting, exporter);
      config.shared->publish(taken);
      if (!taken.ok()) return taken.status();
    }
    absl::Status failed;
    std::optional<absl::StatusOr<PostgresShared::Snapshot>> holder;
    const PostgresShared::Snapshot* snapshot = await_snapshot(ctx, *config.shared, failed, holder);
    if (snapshot == nullptr) return failed;
    if (config.stats && leader) {
      for (size_t e : snapshotting) {
        config.stats->set_snapshot_total(e, static_cast<uint64_t>(snapshot->reltuples[e]));
      }
    }
    auto connected = ctx.run_blocking([&] {
      return PgConnection::connect(config.conninfo, /*replication=*/false,
                                   absl::StrCat("snapshot worker ", worker));
    });
    WEIR_RETURN_IF_ERROR(connected.status());
    PgConnection conn = *std::move(connected);
    WEIR_RETURN_IF_ERROR(
        conn.exec(ctx, "BEGIN READ ONLY ISOLATION LEVEL REPEATABLE READ").status());
    WEIR_RETURN_IF_ERROR(
        conn.exec(ctx, absl::StrCat("SET TRANSACTION SNAPSHOT ", quote_literal(snapshot->name)))
            .status());
    config.shared->imported();
    if (leader) {
      // The snapshot lives on in the importers' transactions: the exporter (and its temporary
      // slot) can go once every worker has one.
      while (!config.shared->all_imported()) ctx.sleep_for(std::chrono::milliseconds(2));
      exporter.reset();
    }
    std::string row;
    for (size_t e : snapshotting) {
      const ExportTable& table = config.tables[e];
      const uint64_t blocks = snapshot->blocks[e];
      const uint64_t lo = blocks * worker / peers, hi = blocks * (worker + 1) / peers;
      std::string columns;
      RowEncoder encoder(table.desc);
      for (const auto& column : table.desc.columns) {
        absl::StrAppend(&columns, columns.empty() ? "" : ", ", quote_identifier(column.name));
      }
      // One worker copies the table itself: COPY of a table costs the server less than COPY
      // of a query (1.9 s against 2.6 s for a million rows, measured here).
      const bool copy_whole_table = peers == 1 && !columns.empty();
      // Binary COPY costs the server less than text (3.0 s against 3.9 s for the benchmark's
      // 10M rows, COPY TO a file on the server) and weir less to decode; a table with a column
      // weir cannot decode from binary (an enum, a domain, an unknown type) is copied in text.
      const bool binary =
          !table.desc.columns.empty() &&
          std::all_of(table.desc.columns.begin(), table.desc.columns.end(), binary_decodable);
      BinaryCopyStream stream(table.name);
      // A table with no columns: rows of nothing (PostgreSQL allows an empty select list).
      // The last worker also takes the blocks past the size it was given: none of their rows
      // is visible to the snapshot, but the range must not depend on that.
      std::string where = absl::StrCat("ctid >= '(", lo, ",0)'::tid");
      if (worker + 1 < peers) absl::StrAppend(&where, " AND ctid < '(", hi, ",0)'::tid");
      Capability<Offset> cap = caps[e].first();
      bool errored = false;
      if (worker + 1 == peers || lo < hi) {
        WEIR_RETURN_IF_ERROR(conn.start_copy(
            ctx, absl::StrCat(copy_whole_table
                                  ? absl::StrCat("COPY ", qualified(table), " (", columns, ")")
                                  : absl::StrCat("COPY (SELECT ", columns, " FROM ONLY ",
                                                 qualified(table), " WHERE ", where, ")"),
                              " TO STDOUT", binary ? " (FORMAT binary)" : "")));
        auto session = outputs[e].session(cap);
        uint64_t given = 0;
        // Encodes one COPY row (a text line, or a binary tuple) into `row`.
        const auto encode = [&](std::string_view copied) -> absl::Status {
          row.clear();
          if (binary) return encoder.encode_copy_binary_tuple(copied, row);
          if (!copied.empty() && copied.back() == '\n') copied.remove_suffix(1);
          // A row of no columns is an empty line, and encodes as nothing.
          return table.desc.columns.empty() ? absl::OkStatus()
                                            : encoder.encode_copy_line(copied, row);
        };
        // Gives one COPY row (a text line, or a binary tuple) to the export.
        const auto give = [&](std::string_view copied) {
          absl::Status encoded = encode(copied);
          if (!encoded.ok()) {
            // Undecodable data is a definite error of the export at time 0.
            const std::string message =
                absl::StrCat("table ", table.name, ": snapshot: ", encoded.message());
            session.give(Change{definite_error(message), 1});
            report(e, Health::kStalled, message);
            errored = true;
            return;
          }
          session.give(Change{row, 1});
          ctx.use_fuel(row.size());
          if (++given == 4096) {
            if (config.stats) config.stats->add_snapshot_rows(e, given);
            given = 0;
          }
        };
        for (;;) {
          WEIR_ASSIGN_OR_RETURN(std::optional<std::string_view> chunk, conn.read_copy(ctx));
          if (!chunk) break;
          if (errored) continue;
          if (!binary) {
            give(*chunk);
            continue;
          }
          WEIR_RETURN_IF_ERROR(stream.feed(*chunk));
          for (;;) {
            WEIR_ASSIGN_OR_RETURN(std::optional<std::string_view> tuple, stream.next());
            if (!tuple || errored) break;
            give(*tuple);
          }
        }
        if (binary && !errored && !stream.ended()) {
          return absl::DataLossError(absl::StrCat(
              "table ", table.name, ": the snapshot's binary COPY stream ended without its end"));
        }
        if (config.stats) config.stats->add_snapshot_rows(e, given);
      }
      if (!errored) report(e, Health::kRunning);
      if (config.mode == ProgressMode::kConcurrent) caps[e].clear();
    }
    (void)conn.exec(ctx, "COMMIT");
    config.shared->finished();
    for (size_t e = 0; e < n; ++e) caps[e].clear();
    return absl::OkStatus();
  });
  errors.push_back(built.errors);
  buttons.push_back(built.button);
}

// A large transaction that the server streams while it runs (protocol 2): its changes' messages,
// in order, in a temporary file (it is streamed because it is larger than the server's
// logical_decoding_work_mem), replayed once it commits; those of aborted subtransactions are
// skipped. The file is unlinked when created: a crash leaves nothing, and the server streams the
// transaction again from its start after a restart.
class Streamed {
 public:
  absl::Status open(Xid xid) {
    xid_ = xid;
    // In $TMPDIR (std::tmpfile ignores it), unlinked at once.
    // NOLINTNEXTLINE(concurrency-mt-unsafe): weir never sets the environment.
    const char* tmpdir = std::getenv("TMPDIR");
    const std::string dir = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
    std::string path = dir + "/weir-streamed-XXXXXX";
    const int fd = ::mkstemp(path.data());
    if (fd < 0) return failed(absl::StrCat("creating in ", dir));
    ::unlink(path.c_str());
    file_.reset(::fdopen(fd, "w+b"));
    if (file_ == nullptr) {
      ::close(fd);
      return failed("opening");
    }
    return absl::OkStatus();
  }

  absl::Status append(std::string_view payload) {
    const auto length = static_cast<uint32_t>(payload.size());
    if (std::fwrite(&length, sizeof length, 1, file_.get()) != 1 ||
        std::fwrite(payload.data(), 1, payload.size(), file_.get()) != payload.size()) {
      return failed("writing");
    }
    return absl::OkStatus();
  }

  // Calls apply(message) for every kept message not of an aborted subtransaction, in order.
  template <class Apply>
  absl::Status replay(Apply&& apply) {
    if (std::fflush(file_.get()) != 0 || std::fseek(file_.get(), 0, SEEK_SET) != 0) {
      return failed("reading");
    }
    std::string payload;
    DecodeScratch scratch;
    for (;;) {
      uint32_t length = 0;
      if (std::fread(&length, sizeof length, 1, file_.get()) != 1) {
        if (std::feof(file_.get())) return absl::OkStatus();
        return failed("reading");
      }
      payload.resize(length);
      if (std::fread(payload.data(), 1, length, file_.get()) != length) return failed("reading");
      WEIR_ASSIGN_OR_RETURN(Message message, decode_message(payload, /*in_stream=*/true, scratch));
      const std::optional<Xid> xid = std::visit(
          [](const auto& m) -> std::optional<Xid> {
            if constexpr (requires { m.xid; }) {
              if constexpr (std::is_same_v<decltype(m.xid), std::optional<Xid>>) return m.xid;
            }
            return std::nullopt;
          },
          message);
      if (xid && aborted.contains(*xid)) continue;
      apply(message);
    }
  }

  std::set<Xid> aborted;  // Subtransactions whose changes are dropped.

 private:
  struct Close {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  absl::Status failed(std::string_view what) const {
    return absl::InternalError(absl::StrCat("postgres source: ", std::string(what),
                                            " the temporary file of streamed transaction ", xid_,
                                            ": ", weir::errno_message(errno)));
  }

  Xid xid_ = 0;
  std::unique_ptr<std::FILE, Close> file_;
};

std::vector<bool> snapshotting_of(const PostgresSourceConfig& config,
                                  const std::vector<ExportSpec>& exports) {
  std::vector<bool> snapshotting(exports.size());
  for (size_t e = 0; e < exports.size(); ++e) {
    snapshotting[e] = exports[e].needs_snapshot() && exports[e].definite_error.empty() &&
                      config.tables[e].error_to_write.empty();
  }
  return snapshotting;
}

// The replication stream's state on the streaming worker.
class Replication {
 public:
  Replication(AsyncContext& ctx, const PostgresSourceConfig& config,
              const std::vector<ExportSpec>& exports,
              std::vector<AsyncOutput<Offset, Change>>& outputs,
              AsyncOutput<Offset, HealthUpdate>& health_out, std::span<CapabilitySet<Offset>> caps,
              uint32_t worker)
      : ctx_(ctx),
        config_(config),
        exports_(exports),
        snapshotting_(snapshotting_of(config, exports)),
        // An error the plan found (the table left the publication) is written at the resume
        // upper.
        out_(outputs, health_out, caps, exports, snapshotting_, errors_to_write(config.tables),
             worker) {
    const size_t n = exports.size();
    resume_.assign(n, 0);
    Offset start = std::numeric_limits<Offset>::max();
    for (size_t e = 0; e < n; ++e) {
      resume_[e] = exports[e].resume_upper;
      if (!snapshotting_[e]) start = std::min(start, std::max<Offset>(resume_[e], 1));
      exports_of_[config.tables[e].oid].push_back(e);
      encoders_.emplace_back(config.tables[e].desc);
    }
    start_ = start == std::numeric_limits<Offset>::max() ? 0 : start;
    position_ = start_;
  }

  absl::Status run() {
    if (out_.all_errored()) {
      // Every export is errored: there is nothing to stream (the slot may be gone). Frontiers
      // stay where they are, unless the run has an end.
      if (!config_.until) {
        ctx_.sleep_for(std::chrono::nanoseconds::max());
        return absl::OkStatus();
      }
      verified_ = *config_.until;  // No export claims anything: nothing to vouch for.
      advance(*config_.until);
      ctx_.yield();  // Let the frontier rest at `until` before the outputs close.
      return absl::OkStatus();
    }
    const bool any_snapshot =
        std::find(snapshotting_.begin(), snapshotting_.end(), true) != snapshotting_.end();
    if (any_snapshot) {
      absl::Status failed;
      std::optional<absl::StatusOr<PostgresShared::Snapshot>> holder;
      const auto* snapshot = await_snapshot(ctx_, *config_.shared, failed, holder);
      if (snapshot == nullptr) return failed;
      snapshot_lsn_ = snapshot->lsn;
    }
    auto connected = ctx_.run_blocking([&] {
      return PgConnection::connect(config_.conninfo, /*replication=*/true, "replication");
    });
    WEIR_RETURN_IF_ERROR(connected.status());
    conn_.emplace(*std::move(connected));
    auto checking = ctx_.run_blocking([&] {
      return PgConnection::connect(config_.conninfo, /*replication=*/false, "publication check");
    });
    WEIR_RETURN_IF_ERROR(checking.status());
    check_conn_.emplace(*std::move(checking));
    WEIR_RETURN_IF_ERROR(verify_published());
    // Protocol 2 (PostgreSQL 14 on) streams a transaction larger than the server's
    // logical_decoding_work_mem while it runs, rather than spilling it to the server's disk and
    // sending it at its commit: its blocks are kept here (see Streamed) until it commits.
    const bool streaming = conn_->server_version() >= 140000;
    decoder_ = PgOutputDecoder(streaming ? 2 : 1);
    WEIR_RETURN_IF_ERROR(conn_->start_copy(
        ctx_, absl::StrCat("START_REPLICATION SLOT ", quote_identifier(config_.slot), " LOGICAL ",
                           format_lsn(start_), " (proto_version '", streaming ? "2" : "1", "'",
                           streaming ? ", streaming 'on'" : "", ", publication_names ",
                           quote_literal(quote_identifier(config_.publication)), ")")));
    auto next_status = Clock::now();
    for (;;) {
      // A snapshotted export's rewinds end only once the stream has passed C: a run never stops
      // before (its upper would stop below C with time 0 as of C, and the next run would give
      // the changes between again).
      if (config_.until && position_ >= *config_.until && verified_ >= *config_.until &&
          !mid_transaction() && !out_.rewinding()) {
        advance(*config_.until);
        out_.cease();
        ctx_.yield();
        return absl::OkStatus();
      }
      if (Clock::now() >= next_status) {
        WEIR_RETURN_IF_ERROR(verify_published());
        WEIR_RETURN_IF_ERROR(send_status());
        next_status = Clock::now() + config_.status_interval;
      }
      WEIR_ASSIGN_OR_RETURN(std::optional<std::string_view> data,
                            conn_->read_copy(ctx_, next_status));
      if (!data) {
        return absl::UnavailableError("postgres source: the server ended the replication stream");
      }
      if (data->empty()) continue;  // The status update is due.
      WEIR_ASSIGN_OR_RETURN(ReplicationMessage message, parse_replication_message(*data));
      if (const auto* keepalive = std::get_if<PrimaryKeepalive>(&message)) {
        // Every transaction that committed before wal_end has been sent.
        if (!mid_transaction()) advance(keepalive->wal_end);
        if (keepalive->reply_requested) WEIR_RETURN_IF_ERROR(send_status());
        continue;
      }
      const auto& xlog = std::get<XLogData>(message);
      WEIR_RETURN_IF_ERROR(handle(xlog.payload));
    }
  }

 private:
  void report(size_t e, Health status, std::string error = "") {
    out_.report(e, status, std::move(error));
  }

  // A definite error of export `e` at `time`: the error row, and the export gets no more data.
  void error(size_t e, Offset time, const std::string& message) { out_.error(e, time, message); }

  // Every commit before `to` has been received (the upstream reached it at `when`): frontiers may
  // pass every time before it that verify_published has vouched for.
  void advance(Offset to, Clock::time_point when = Clock::now()) {
    if (to <= position_) return;
    position_ = to;
    if (config_.stats) config_.stats->record_upstream(to, when);
    release();
  }

  // Moves the frontiers to min(position_, verified_): data at a commit past verified_ is given
  // with a capability at its commit, which does not vouch for the times before it. (In serial
  // mode the snapshot operator holds every export at 0 until every snapshot is done.)
  void release() { out_.release(std::min(position_, verified_), position_, snapshot_lsn_); }

  // The stream carries no sign of a table leaving the publication (or being dropped): the server
  // just stops sending its changes, and an export whose frontier went on would claim times whose
  // changes never came. So frontiers pass an LSN only once the tables were seen published after
  // it: the WAL's position L is read first, then (a later statement, a later catalog snapshot)
  // the publication's tables; if every export's table is among them, any removal commits after
  // L, and every change before L was sent. If one is missing, the epoch ends with its export
  // below L, and the next plan writes the export's definite error at its upper.
  // A removal's commit record is in the WAL (and decoded) before other sessions see it: its
  // backend flushes, waits for synchronous standbys, and only then ends its transaction. It
  // holds its lock all along (ALTER PUBLICATION and DROP PUBLICATION an AccessExclusiveLock on
  // the publication, DROP TABLE and ALTER TABLE ... SET SCHEMA one on the table), so between L
  // and the catalog read a statement looks for such a lock: while one is held, L is not vouched
  // for (frontiers wait for the next check).
  absl::Status verify_published() {
    WEIR_ASSIGN_OR_RETURN(PgResult at, check_conn_->exec(ctx_, "SELECT pg_current_wal_lsn()"));
    WEIR_ASSIGN_OR_RETURN(const Offset lsn, parse_lsn(value(at.get(), 0, 0)));
    std::string oids;
    for (size_t e = 0; e < exports_.size(); ++e) {
      if (!out_.errored(e)) absl::StrAppend(&oids, ", ", config_.tables[e].oid);
    }
    WEIR_ASSIGN_OR_RETURN(
        PgResult locked,
        check_conn_->exec(
            ctx_,
            absl::StrCat(
                "SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE l.granted AND l.mode = "
                "'AccessExclusiveLock' AND l.pid <> pg_backend_pid() AND ((l.locktype = 'object' "
                "AND l.classid = 'pg_publication'::regclass AND l.objid IN (SELECT oid FROM "
                "pg_publication WHERE pubname = ",
                quote_literal(config_.publication),
                ")) OR (l.locktype = 'relation' AND l.database = (SELECT oid FROM pg_database "
                "WHERE datname = current_database()) AND l.relation IN (0",
                oids, "))))")));
    const bool removing = value(locked.get(), 0, 0) == "t";
    WEIR_ASSIGN_OR_RETURN(
        PgResult tables,
        check_conn_->exec(
            ctx_, absl::StrCat("SELECT c.oid FROM pg_publication_tables p JOIN pg_namespace n ON "
                               "n.nspname = p.schemaname JOIN pg_class c ON c.relnamespace = "
                               "n.oid AND c.relname = p.tablename WHERE p.pubname = ",
                               quote_literal(config_.publication))));
    std::set<uint32_t> published;
    for (int row = 0; row < PQntuples(tables.get()); ++row) {
      WEIR_ASSIGN_OR_RETURN(const uint64_t oid,
                            unsigned_value(tables.get(), row, 0, "a table oid"));
      published.insert(static_cast<uint32_t>(oid));
    }
    // The kinds of change published, narrowed (ALTER PUBLICATION ... SET (publish = ...)): the
    // server stops sending those left out, and the next plan errors every export.
    WEIR_ASSIGN_OR_RETURN(
        PgResult kinds,
        check_conn_->exec(ctx_, absl::StrCat("SELECT pubinsert AND pubupdate AND pubdelete AND "
                                             "pubtruncate FROM pg_publication WHERE pubname = ",
                                             quote_literal(config_.publication))));
    if (PQntuples(kinds.get()) != 1 || value(kinds.get(), 0, 0) != "t") {
      return absl::UnavailableError(absl::StrCat(
          "postgres source: publication ", config_.publication,
          " no longer publishes every kind of change, or is gone; planning again to record it"));
    }
    for (size_t e = 0; e < exports_.size(); ++e) {
      if (out_.errored(e) || published.contains(config_.tables[e].oid)) continue;
      return absl::UnavailableError(absl::StrCat(
          "postgres source: table ", config_.tables[e].name, " is no longer in publication ",
          config_.publication, " (removed or dropped); planning again to record it"));
    }
    if (!removing && lsn > verified_) {
      verified_ = lsn;
      release();
    }
    return absl::OkStatus();
  }

  absl::Status send_status() {
    const Offset durable = config_.durable_upper ? config_.durable_upper() : 0;
    StandbyStatusUpdate update;
    update.written = position_;
    update.flushed = update.applied = std::min({durable, position_, config_.confirm_floor});
    update.clock = pg_timestamp_now();
    update.reply_requested = true;  // A keepalive back advances an idle stream's frontiers.
    status_buffer_.clear();
    append_standby_status_update(update, status_buffer_);
    return conn_->write_copy(ctx_, status_buffer_);
  }

  // Inside a transaction's messages (Begin .. Commit, or a streamed block): the stream's
  // position says nothing about commits yet.
  bool mid_transaction() const { return in_transaction_ || decoder_.in_stream(); }

  // The upstream reached the commit that ends at `end_lsn` at `commit_time` (the server's clock:
  // lag is measured from there).
  void committed(Lsn commit_lsn, Lsn end_lsn, PgTimestamp commit_time) {
    const auto age = std::chrono::system_clock::now() - from_pg_timestamp(commit_time);
    advance(std::max(end_lsn, commit_lsn + 1),
            Clock::now() - std::chrono::duration_cast<Clock::duration>(
                               std::max<std::chrono::system_clock::duration>(age, {})));
  }

  absl::Status handle(std::string_view payload) {
    WEIR_ASSIGN_OR_RETURN(Message message, decoder_.decode(payload));
    if (const auto* begin = std::get_if<Begin>(&message)) {
      in_transaction_ = true;
      commit_lsn_ = begin->final_lsn;
    } else if (const auto* commit = std::get_if<Commit>(&message)) {
      in_transaction_ = false;
      committed(commit->commit_lsn, commit->end_lsn, commit->commit_time);
    } else if (const auto* start = std::get_if<StreamStart>(&message)) {
      stream_xid_ = start->xid;
    } else if (std::holds_alternative<StreamStop>(message)) {
      // The transaction's next block (or its end) comes later, maybe after other transactions.
    } else if (const auto* abort = std::get_if<StreamAbort>(&message)) {
      if (abort->subxid == abort->xid) {
        streamed_.erase(abort->xid);
      } else if (auto it = streamed_.find(abort->xid); it != streamed_.end()) {
        it->second.aborted.insert(abort->subxid);
      }
    } else if (const auto* streamed_commit = std::get_if<StreamCommit>(&message)) {
      auto it = streamed_.find(streamed_commit->xid);
      if (it != streamed_.end()) {
        Streamed streamed = std::move(it->second);
        streamed_.erase(it);
        commit_lsn_ = streamed_commit->commit_lsn;
        WEIR_RETURN_IF_ERROR(streamed.replay([&](const Message& change) { apply(change); }));
      }
      committed(streamed_commit->commit_lsn, streamed_commit->end_lsn,
                streamed_commit->commit_time);
    } else if (decoder_.in_stream()) {
      // A change of the streamed transaction (or one of its subtransactions): kept until the
      // transaction commits, at an LSN not known yet.
      auto [it, added] = streamed_.try_emplace(stream_xid_);
      if (added) WEIR_RETURN_IF_ERROR(it->second.open(stream_xid_));
      WEIR_RETURN_IF_ERROR(it->second.append(payload));
    } else {
      apply(message);
    }
    return absl::OkStatus();
  }

  // A change (or a Relation, or a Truncate) of the transaction committing at commit_lsn_.
  void apply(const Message& message) {
    if (const auto* relation = std::get_if<Relation>(&message)) {
      check_relation(*relation);
    } else if (const auto* insert = std::get_if<Insert>(&message)) {
      change(insert->relation_oid, nullptr, &insert->new_tuple, "INSERT");
    } else if (const auto* update = std::get_if<Update>(&message)) {
      if (update->old_kind != OldTupleKind::kFull) {
        missing_old_row(update->relation_oid, "UPDATE");
      } else {
        change(update->relation_oid, &update->old_tuple, &update->new_tuple, "UPDATE");
      }
    } else if (const auto* del = std::get_if<Delete>(&message)) {
      if (del->old_kind != OldTupleKind::kFull) {
        missing_old_row(del->relation_oid, "DELETE");
      } else {
        change(del->relation_oid, &del->old_tuple, nullptr, "DELETE");
      }
    } else if (const auto* truncate = std::get_if<Truncate>(&message)) {
      for (uint32_t oid : truncate->relation_oids) {
        for (size_t e : exports_for(oid)) {
          error(e, commit_lsn_,
                absl::StrCat("table ", config_.tables[e].name, " was truncated at LSN ",
                             format_lsn(commit_lsn_), "; drop its shard to snapshot it again"));
        }
      }
    }
    // Origin, Type and Message change nothing we keep.
  }

  const std::vector<size_t>& exports_for(uint32_t oid) const {
    static const std::vector<size_t> none;
    auto it = exports_of_.find(oid);
    return it == exports_of_.end() ? none : it->second;
  }

  bool skip(size_t e) const {
    return out_.errored(e) || (!snapshotting_[e] && commit_lsn_ < resume_[e]);
  }

  void check_relation(const Relation& relation) {
    if (exports_for(relation.oid).empty()) {
      // A relation no export follows, with an export's name: its table was dropped and created
      // again while the source ran. The new table's changes would be lost to the old shard.
      const std::string_view schema = relation.namespace_name.empty()
                                          ? std::string_view("pg_catalog")
                                          : relation.namespace_name;
      for (size_t e = 0; e < exports_.size(); ++e) {
        const RelationDesc& desc = config_.tables[e].desc;
        if (skip(e) || desc.schema != schema || desc.table != relation.name) continue;
        error(e, commit_lsn_,
              absl::StrCat("table ", config_.tables[e].name, " was dropped and created again (oid ",
                           config_.tables[e].oid, ", now ", relation.oid, ") at LSN ",
                           format_lsn(commit_lsn_), "; drop its shard to ingest the new one"));
      }
      return;
    }
    for (size_t e : exports_for(relation.oid)) {
      if (skip(e)) continue;
      RelationDesc now;
      now.schema = std::string(relation.namespace_name);
      now.table = std::string(relation.name);
      now.table_oid = relation.oid;
      for (const RelationColumn& c : relation.columns) {
        Column column;
        column.name = std::string(c.name);
        column.type_oid = c.type_oid;
        column.type_modifier = c.type_modifier;
        now.columns.push_back(std::move(column));
      }
      std::string why;
      if (!config_.tables[e].desc.compatible_with(now, &why)) {
        error(e, commit_lsn_,
              absl::StrCat("table ", config_.tables[e].name, ": incompatible schema change at LSN ",
                           format_lsn(commit_lsn_), ": ", why,
                           "; drop its shard to snapshot it again"));
      }
    }
  }

  void missing_old_row(uint32_t oid, const char* what) {
    for (size_t e : exports_for(oid)) {
      if (skip(e)) continue;
      error(e, commit_lsn_,
            absl::StrCat("table ", config_.tables[e].name, ": ", what, " at LSN ",
                         format_lsn(commit_lsn_),
                         " without the old row: REPLICA IDENTITY is not FULL (run ALTER TABLE ",
                         config_.tables[e].name, " REPLICA IDENTITY FULL; and drop the shard)"));
    }
  }

  // Gives -old and +new (either may be null) to every export of the relation.
  void change(uint32_t oid, const Tuple* old_tuple, const Tuple* new_tuple, const char* what) {
    for (size_t e : exports_for(oid)) {
      if (skip(e)) continue;
      if (old_tuple) {
        old_row_.clear();
        absl::Status encoded = encode_tuple(e, *old_tuple, nullptr, old_row_);
        if (!encoded.ok()) return undecodable(e, what, encoded);
      }
      if (new_tuple) {
        new_row_.clear();
        absl::Status encoded = encode_tuple(e, *new_tuple, old_tuple, new_row_);
        if (!encoded.ok()) return undecodable(e, what, encoded);
      }
      // Both decoded before either is given: a change is all or nothing.
      if (old_tuple) give(e, old_row_, -1);
      if (new_tuple) give(e, new_row_, 1);
    }
  }

  // Encodes a tuple with export e's description; an unchanged TOASTed column takes the old
  // row's value (REPLICA IDENTITY FULL sends the whole old row).
  absl::Status encode_tuple(size_t e, const Tuple& tuple, const Tuple* old_tuple,
                            std::string& out) {
    fields_.clear();
    for (size_t c = 0; c < tuple.size(); ++c) {
      const TupleColumn* column = &tuple[c];
      if (column->is_unchanged_toast()) {
        if (old_tuple == nullptr || c >= old_tuple->size() ||
            (*old_tuple)[c].is_unchanged_toast()) {
          return absl::InvalidArgumentError(
              absl::StrCat("column ", c + 1, " is an unchanged TOASTed value without the old row"));
        }
        column = &(*old_tuple)[c];
      }
      if (column->kind == ColumnKind::kBinary) {
        return absl::InvalidArgumentError(
            absl::StrCat("column ", c + 1, " came in binary format, which was not asked for"));
      }
      fields_.push_back(TextField{column->value, column->is_null()});
    }
    if (fields_.size() != encoders_[e].num_columns()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the row has ", fields_.size(), " columns, the table ", encoders_[e].num_columns()));
    }
    return encoders_[e].encode(fields_, out);
  }

  void undecodable(size_t e, const char* what, const absl::Status& status) {
    error(e, commit_lsn_,
          absl::StrCat("table ", config_.tables[e].name, ": ", what, " at LSN ",
                       format_lsn(commit_lsn_), ": ", status.message()));
  }

  void give(size_t e, const std::string& row, int64_t diff) {
    out_.give(e, commit_lsn_, row, diff, snapshot_lsn_);
    ctx_.use_fuel(row.size());
  }

  AsyncContext& ctx_;
  const PostgresSourceConfig& config_;
  const std::vector<ExportSpec>& exports_;
  const std::vector<bool> snapshotting_;
  ChangeStreamOutputs out_;
  std::map<uint32_t, std::vector<size_t>> exports_of_;  // Relation oid -> exports.
  std::vector<Offset> resume_;
  Offset start_ = 0;
  Offset position_ = 0;      // Every commit before it has been handled.
  Offset verified_ = 0;      // Every export's table was published until after it.
  Offset snapshot_lsn_ = 0;  // C: commits before it are in the snapshot.
  Offset commit_lsn_ = 0;    // Of the transaction being received.
  bool in_transaction_ = false;
  Xid stream_xid_ = 0;                // Of the streamed block being received.
  std::map<Xid, Streamed> streamed_;  // Streamed transactions not committed or aborted yet.
  std::optional<PgConnection> conn_;
  std::optional<PgConnection> check_conn_;  // For verify_published.
  PgOutputDecoder decoder_{1};
  std::string status_buffer_, old_row_, new_row_;
  std::vector<RowEncoder> encoders_;  // Per export.
  std::vector<TextField> fields_;
};

void render_replication(Scope<Offset>& scope, const PostgresSourceConfig& config,
                        const std::vector<ExportSpec>& exports,
                        std::vector<Stream<Offset, Change>>& outs,
                        std::vector<Stream<Offset, HealthUpdate>>& health,
                        std::vector<Stream<Offset, AsyncError>>& errors,
                        std::vector<ShutdownButton>& buttons) {
  AsyncOperatorBuilder<Offset> builder("PostgresReplication", scope);
  auto [outputs, health_out] = add_source_outputs(builder, exports.size(), outs, health);
  const uint32_t worker = static_cast<uint32_t>(scope.index());
  const bool leader = worker == config.leader % scope.peers();
  auto built = builder.build(
      [=](AsyncContext& ctx, std::span<CapabilitySet<Offset>> caps) mutable -> absl::Status {
        if (!leader) {
          // One worker streams; the others have no change stream (ceased: the aggregate is the
          // streaming worker's) and hold nothing.
          follow_change_stream(caps, health_out, exports, worker);
          return absl::OkStatus();
        }
        Replication replication(ctx, config, exports, outputs, health_out, caps, worker);
        return replication.run();
      });
  errors.push_back(built.errors);
  buttons.push_back(built.button);
}

}  // namespace

absl::StatusOr<RenderedSource> render_postgres(Scope<Offset>& scope,
                                               const PostgresSourceConfig& config,
                                               const std::vector<ExportSpec>& exports) {
  if (config.tables.size() != exports.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "postgres source: ", exports.size(), " exports but ", config.tables.size(), " tables"));
  }
  if (!config.shared) {
    return absl::InvalidArgumentError("postgres source: PostgresSourceConfig::shared is unset");
  }
  if (config.shared->workers() != scope.peers()) {
    // The snapshot leader would wait for ever for workers that do not exist.
    return absl::InvalidArgumentError(
        absl::StrCat("postgres source: PostgresShared is for ", config.shared->workers(),
                     " workers, the dataflow has ", scope.peers(),
                     " (PostgresIngestOptions::workers must be IngestOptions::workers' count)"));
  }
  std::vector<Stream<Offset, Change>> snapshot, replication;
  std::vector<Stream<Offset, HealthUpdate>> health;
  std::vector<Stream<Offset, AsyncError>> errors;
  std::vector<ShutdownButton> buttons;
  render_snapshot(scope, config, exports, snapshot, health, errors, buttons);
  render_replication(scope, config, exports, replication, health, errors, buttons);
  std::vector<Stream<Offset, Change>> streams;
  for (size_t e = 0; e < exports.size(); ++e) {
    streams.push_back(concat(snapshot[e], replication[e]));
  }
  return RenderedSource{std::move(streams), concat(health[0], health[1]), std::move(errors),
                        std::move(buttons)};
}

}  // namespace weir::sources::postgres
