// The MySQL-family source: upstream checks, the snapshot operator, the binlog operator (see
// mysql_source.h).

#include "weir/sources/mysql/mysql_source.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mysql/binlog_dump.h"
#include "mysql/catalog.h"
#include "mysql/connection.h"
#include "mysql/ddl.h"
#include <sys/socket.h>

#include "weir/async/async_operator.h"
#include "weir/operators/concat.h"
#include "weir/sources/change_stream.h"
#include "weir/sources/mysql/binlog.h"
#include "weir/status.h"

namespace weir::sources::mysql {

using postgres::RowEncoder;
using postgres::TextField;
using Change = Update;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// GTID positions.

std::string GtidPosition::to_string() const {
  if (seq == 0) return "";
  return absl::StrCat(domain, "-", server, "-", seq);
}

namespace {

template <typename T>
bool parse_decimal(std::string_view text, T& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

}  // namespace

absl::StatusOr<GtidPosition> parse_gtid_position(std::string_view text) {
  GtidPosition position;
  if (text.empty()) return position;
  if (text.find(',') != std::string_view::npos) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the server's binlog has GTIDs of more than one replication domain (", std::string(text),
        "): weir maps one domain's sequence numbers onto its times, and cannot order two"));
  }
  const size_t first = text.find('-');
  const size_t second = first == std::string_view::npos ? first : text.find('-', first + 1);
  if (second == std::string_view::npos || !parse_decimal(text.substr(0, first), position.domain) ||
      !parse_decimal(text.substr(first + 1, second - first - 1), position.server) ||
      !parse_decimal(text.substr(second + 1), position.seq)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", std::string(text), "' is not a GTID position (domain-server-seq)"));
  }
  return position;
}

// ---------------------------------------------------------------------------------------------
// Upstream checks.

namespace {

absl::Status precondition(std::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat("mysql source: ", std::string(what)));
}

// A value of a one-row result.
std::string field(const std::vector<std::vector<std::optional<std::string>>>& rows, size_t col) {
  if (rows.empty() || rows[0].size() <= col || !rows[0][col]) return "";
  return *rows[0][col];
}

std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace

absl::StatusOr<UpstreamInfo> check_upstream(const std::string& conninfo) {
  WEIR_ASSIGN_OR_RETURN(const ConnInfo info, parse_conninfo(conninfo));
  if (info.database.empty()) {
    return absl::InvalidArgumentError(
        "mysql source: the connection string names no database (database=...): the source "
        "ingests that database's tables");
  }
  WEIR_ASSIGN_OR_RETURN(MysqlConnection conn, MysqlConnection::connect(info, "upstream check"));
  UpstreamInfo upstream;
  upstream.server_version = conn.server_version();
  if (!conn.is_mariadb()) {
    return absl::UnimplementedError(
        "mysql source: the server is MySQL, not MariaDB: weir reads MariaDB's GTIDs and binlog "
        "(MySQL's GTID format is not supported yet)");
  }
  WEIR_ASSIGN_OR_RETURN(
      auto settings,
      conn.rows("SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@gtid_binlog_pos, "
                "@@binlog_expire_logs_seconds, @@gtid_domain_id, @@server_id"));
  if (field(settings, 0) != "1") {
    return precondition(
        "the server does not write a binlog (log_bin is off): start it with --log-bin");
  }
  if (upper(field(settings, 1)) != "ROW") {
    return precondition(absl::StrCat("binlog_format is ", field(settings, 1),
                                     ", not ROW: set binlog_format=ROW (in the server's "
                                     "configuration, and SET GLOBAL binlog_format=ROW)"));
  }
  if (upper(field(settings, 2)) != "FULL") {
    return precondition(
        absl::StrCat("binlog_row_image is ", field(settings, 2),
                     ", not FULL: updates and deletes would come without their whole old row; set "
                     "binlog_row_image=FULL"));
  }
  WEIR_ASSIGN_OR_RETURN(upstream.position, parse_gtid_position(field(settings, 3)));
  upstream.database = info.database;
  if (!parse_decimal(field(settings, 5), upstream.server.domain) ||
      !parse_decimal(field(settings, 6), upstream.server.server)) {
    return absl::InternalError("mysql source: could not read @@gtid_domain_id and @@server_id");
  }
  uint64_t expire = 0;
  if (parse_decimal(field(settings, 4), expire) && expire != 0 && expire < 3600) {
    return precondition(absl::StrCat(
        "binlog_expire_logs_seconds is ", expire,
        ": binlogs are purged within the hour, so a replica that stops for longer loses its "
        "place; keep them at least a day (binlog_expire_logs_seconds=86400 or more, or 0)"));
  }
  // Privileges: the dump needs REPLICATION SLAVE, the position BINLOG MONITOR (REPLICATION
  // CLIENT), the snapshot's lock RELOAD.
  WEIR_ASSIGN_OR_RETURN(auto grants, conn.rows("SHOW GRANTS"));
  // The global privileges: "GRANT p1, p2 ON *.* TO ...", each line's list between GRANT and ON.
  std::vector<std::string> global;
  for (const auto& row : grants) {
    if (row.empty() || !row[0]) continue;
    const std::string line = upper(*row[0]);
    const size_t on = line.find(" ON *.* TO ");
    if (line.rfind("GRANT ", 0) != 0 || on == std::string::npos) continue;
    const std::string list = line.substr(6, on - 6);
    for (size_t start = 0; start <= list.size();) {
      const size_t comma = std::min(list.find(", ", start), list.size());
      global.push_back(list.substr(start, comma - start));
      start = comma + 2;
    }
  }
  const auto granted = [&](std::string_view privilege) {
    return std::find(global.begin(), global.end(), "ALL PRIVILEGES") != global.end() ||
           std::find(global.begin(), global.end(), privilege) != global.end();
  };
  for (const std::string_view privilege : {"REPLICATION SLAVE", "BINLOG MONITOR", "RELOAD"}) {
    if (!granted(privilege) && !(privilege == "BINLOG MONITOR" && granted("REPLICATION CLIENT"))) {
      return precondition(absl::StrCat(
          "user ", info.user, " lacks the global ", std::string(privilege),
          " privilege (the binlog dump needs REPLICATION SLAVE, reading its position BINLOG "
          "MONITOR, the snapshot's brief lock RELOAD): GRANT RELOAD, REPLICATION SLAVE, BINLOG "
          "MONITOR ON *.* TO ",
          info.user));
    }
  }
  WEIR_ASSIGN_OR_RETURN(upstream.tables, list_base_tables(conn, info.database));
  WEIR_ASSIGN_OR_RETURN(
      auto keyed,
      conn.rows(absl::StrCat("SELECT DISTINCT TABLE_NAME FROM information_schema.STATISTICS "
                             "WHERE TABLE_SCHEMA = ",
                             quote_literal(info.database), " AND INDEX_NAME = 'PRIMARY'")));
  for (const auto& table : upstream.tables) {
    const bool has_key = std::any_of(keyed.begin(), keyed.end(), [&](const auto& row) {
      return !row.empty() && row[0] && *row[0] == table;
    });
    if (!has_key) upstream.without_primary_key.push_back(table);
  }
  return upstream;
}

absl::StatusOr<TableDesc> load_table(const std::string& conninfo, const std::string& table) {
  WEIR_ASSIGN_OR_RETURN(const ConnInfo info, parse_conninfo(conninfo));
  WEIR_ASSIGN_OR_RETURN(MysqlConnection conn, MysqlConnection::connect(info, "catalog"));
  TableDesc desc;
  WEIR_ASSIGN_OR_RETURN(desc.columns, load_columns(conn, info.database, table));
  // SELECT on the table: refused now rather than mid-snapshot.
  WEIR_RETURN_IF_ERROR(conn.exec(absl::StrCat("SELECT 1 FROM ", quote_identifier(info.database),
                                              ".", quote_identifier(table), " LIMIT 0")));
  WEIR_ASSIGN_OR_RETURN(desc.desc, relation_desc(info.database, table, desc.columns));
  WEIR_ASSIGN_OR_RETURN(auto engine,
                        conn.rows(absl::StrCat("SELECT ENGINE FROM information_schema.TABLES WHERE "
                                               "TABLE_SCHEMA = ",
                                               quote_literal(info.database),
                                               " AND TABLE_NAME = ", quote_literal(table))));
  if (upper(field(engine, 0)) != "INNODB") {
    desc.unsupported =
        absl::StrCat("its engine is ", field(engine, 0),
                     ", not InnoDB: a snapshot of it cannot be consistent with a binlog position");
  }
  WEIR_ASSIGN_OR_RETURN(
      auto cascades,
      conn.rows(absl::StrCat(
          "SELECT CONSTRAINT_NAME, DELETE_RULE, UPDATE_RULE FROM "
          "information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = ",
          quote_literal(info.database), " AND TABLE_NAME = ", quote_literal(table),
          " AND (DELETE_RULE IN ('CASCADE', 'SET NULL', 'SET DEFAULT') OR UPDATE_RULE IN "
          "('CASCADE', 'SET NULL', 'SET DEFAULT'))")));
  if (!cascades.empty() && desc.unsupported.empty()) {
    desc.unsupported = absl::StrCat(
        "its foreign key ", field(cascades, 0), " is ON DELETE ", field(cascades, 1), " ON UPDATE ",
        field(cascades, 2),
        ": MariaDB applies a foreign key's cascades without logging them in the binlog, so "
        "weir would miss them (use RESTRICT or NO ACTION, or leave the table out)");
  }
  return desc;
}

// ---------------------------------------------------------------------------------------------
// Recorded columns.

namespace {
constexpr char kColumnsVersion = 1;
}  // namespace

std::string encode_columns(const std::vector<MysqlColumn>& columns) {
  std::string out(1, kColumnsVersion);
  Codec<uint32_t>::encode(static_cast<uint32_t>(columns.size()), out);
  for (const auto& c : columns) {
    for (const std::string* text : {&c.name, &c.data_type, &c.column_type, &c.charset}) {
      Codec<std::string>::encode(*text, out);
    }
    out.push_back(static_cast<char>((c.is_unsigned ? 1 : 0) | (c.nullable ? 2 : 0) |
                                    (c.is_json ? 4 : 0) | (c.primary_key ? 8 : 0)));
    for (uint32_t n : {c.length, c.precision, c.scale}) Codec<uint32_t>::encode(n, out);
    Codec<uint32_t>::encode(static_cast<uint32_t>(c.elements.size()), out);
    for (const auto& element : c.elements) Codec<std::string>::encode(element, out);
  }
  return out;
}

absl::StatusOr<std::vector<MysqlColumn>> decode_columns(std::string_view bytes) {
  const auto damaged = [] {
    return absl::DataLossError("the recorded columns of a MySQL table are damaged");
  };
  if (bytes.empty() || bytes.front() != kColumnsVersion) return damaged();
  bytes.remove_prefix(1);
  uint32_t count = 0;
  if (!Codec<uint32_t>::decode(bytes, count) || count > bytes.size()) return damaged();
  std::vector<MysqlColumn> columns(count);
  for (auto& c : columns) {
    for (std::string* text : {&c.name, &c.data_type, &c.column_type, &c.charset}) {
      if (!Codec<std::string>::decode(bytes, *text)) return damaged();
    }
    if (bytes.empty()) return damaged();
    const auto flags = static_cast<uint8_t>(bytes.front());
    bytes.remove_prefix(1);
    if (flags > 15) return damaged();
    c.is_unsigned = (flags & 1) != 0;
    c.nullable = (flags & 2) != 0;
    c.is_json = (flags & 4) != 0;
    c.primary_key = (flags & 8) != 0;
    for (uint32_t* n : {&c.length, &c.precision, &c.scale}) {
      if (!Codec<uint32_t>::decode(bytes, *n)) return damaged();
    }
    uint32_t elements = 0;
    if (!Codec<uint32_t>::decode(bytes, elements) || elements > bytes.size()) return damaged();
    c.elements.resize(elements);
    for (auto& element : c.elements) {
      if (!Codec<std::string>::decode(bytes, element)) return damaged();
    }
  }
  if (!bytes.empty()) return damaged();
  return columns;
}

// ---------------------------------------------------------------------------------------------
// MysqlShared.

std::string GtidFingerprint::to_string() const {
  return absl::StrCat(gtid.domain, "-", gtid.server, "-", gtid.seq, "@", timestamp, "#", mark);
}

std::optional<GtidFingerprint> GtidFingerprint::parse(std::string_view text) {
  const size_t at = text.rfind('@');
  const size_t hash = text.rfind('#');
  if (at == std::string_view::npos || hash == std::string_view::npos || hash < at) {
    return std::nullopt;
  }
  auto gtid = parse_gtid_position(text.substr(0, at));
  GtidFingerprint fingerprint;
  if (!gtid.ok() || gtid->seq == 0 ||
      !parse_decimal(text.substr(at + 1, hash - at - 1), fingerprint.timestamp) ||
      !parse_decimal(text.substr(hash + 1), fingerprint.mark)) {
    return std::nullopt;
  }
  fingerprint.gtid = *gtid;
  return fingerprint;
}

void MysqlShared::passed(const GtidFingerprint& transaction) {
  weir::MutexLock lock(mu_);
  passed_ = transaction;
}

std::optional<GtidFingerprint> MysqlShared::last_passed() const {
  weir::MutexLock lock(mu_);
  return passed_;
}

void MysqlShared::preread_failed() {
  weir::MutexLock lock(mu_);
  preread_failed_ = true;
}

bool MysqlShared::has_preread_failed() const {
  weir::MutexLock lock(mu_);
  return preread_failed_;
}

void MysqlShared::locked(absl::Status status) {
  weir::MutexLock lock(mu_);
  locked_ = std::move(status);
}

std::optional<absl::Status> MysqlShared::lock_state() const {
  weir::MutexLock lock(mu_);
  return locked_;
}

void MysqlShared::publish(absl::StatusOr<Snapshot> snapshot) {
  weir::MutexLock lock(mu_);
  snapshot_ = std::move(snapshot);
}

std::optional<absl::StatusOr<MysqlShared::Snapshot>> MysqlShared::snapshot() const {
  weir::MutexLock lock(mu_);
  return snapshot_;
}

void MysqlShared::opened() {
  weir::MutexLock lock(mu_);
  ++opened_;
}

bool MysqlShared::all_opened() const {
  weir::MutexLock lock(mu_);
  return opened_ == workers_;
}

// ---------------------------------------------------------------------------------------------
// The snapshot.

namespace {

// Waits (polling: the leader is another operator, perhaps on another worker) until `get` gives
// a value.
template <typename Get>
auto await_shared(AsyncContext& ctx, Get&& get) {
  for (;;) {
    auto value = get();
    if (value) return *std::move(value);
    ctx.sleep_for(std::chrono::milliseconds(1));
  }
}

std::string qualified(const MysqlSourceConfig& config, const ExportTable& table) {
  return absl::StrCat(quote_identifier(config.database), ".", quote_identifier(table.name));
}

// Whether export `e` snapshots in this epoch.
bool snapshots(const MysqlSourceConfig& config, const std::vector<ExportSpec>& exports, size_t e) {
  return exports[e].needs_snapshot() && exports[e].definite_error.empty() &&
         config.tables[e].error_to_write.empty();
}

// The leader's part: lock the tables, wait for every worker's snapshot, read the position and
// the key ranges from its own, unlock.
absl::StatusOr<MysqlShared::Snapshot> lead_snapshot(AsyncContext& ctx,
                                                    const MysqlSourceConfig& config,
                                                    const std::vector<size_t>& snapshotting,
                                                    const ConnInfo& info, MysqlConnection& own) {
  (void)info;
  MysqlShared::Snapshot snapshot;
  WEIR_ASSIGN_OR_RETURN(auto status, own.rows(ctx, "SHOW STATUS LIKE 'binlog_snapshot_%'"));
  std::string file, position;
  for (const auto& row : status) {
    if (row.size() < 2 || !row[0] || !row[1]) continue;
    if (*row[0] == "Binlog_snapshot_file") file = *row[1];
    if (*row[0] == "Binlog_snapshot_position") position = *row[1];
  }
  if (file.empty() || position.empty()) {
    return absl::FailedPreconditionError(
        "mysql source: the server gave no binlog_snapshot_file/position for the snapshot (is "
        "the binlog on?)");
  }
  WEIR_ASSIGN_OR_RETURN(
      auto gtid, own.rows(ctx, absl::StrCat("SELECT BINLOG_GTID_POS(", quote_literal(file), ", ",
                                            position, ")")));
  WEIR_ASSIGN_OR_RETURN(snapshot.position, parse_gtid_position(field(gtid, 0)));
  if (snapshot.position.seq != 0 &&
      (snapshot.position.domain != config.domain || snapshot.position.server != config.server)) {
    return absl::FailedPreconditionError(
        absl::StrCat("mysql source: the snapshot's GTID position ", snapshot.position.to_string(),
                     " is not of domain ", config.domain, " and server ", config.server));
  }
  snapshot.key_range.resize(config.tables.size());
  snapshot.rows.resize(config.tables.size());
  for (size_t e : snapshotting) {
    const ExportTable& table = config.tables[e];
    if (table.int_key) {
      const std::string key = quote_identifier(table.columns[*table.int_key].name);
      WEIR_ASSIGN_OR_RETURN(
          auto range, own.rows(ctx, absl::StrCat("SELECT MIN(", key, "), MAX(", key, ") FROM ",
                                                 qualified(config, table))));
      int64_t lo = 0, hi = 0;
      if (parse_decimal(field(range, 0), lo) && parse_decimal(field(range, 1), hi)) {
        snapshot.key_range[e] = {lo, hi};
      }
    }
    WEIR_ASSIGN_OR_RETURN(
        auto estimate,
        own.rows(ctx, absl::StrCat("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE "
                                   "TABLE_SCHEMA = ",
                                   quote_literal(config.database),
                                   " AND TABLE_NAME = ", quote_literal(table.name))));
    uint64_t rows = 0;
    if (parse_decimal(field(estimate, 0), rows)) snapshot.rows[e] = rows;
  }
  return snapshot;
}

// The WHERE clause of worker `worker`'s share of a table whose integer key spans [lo, hi].
std::string key_share(const std::string& key, int64_t lo, int64_t hi, size_t worker, size_t peers) {
  // hi - lo + 1, modulo 2^64 (0 for the whole range of int64, which then splits as 2^64 would).
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
  const auto bound = [&](size_t w) {
    const uint64_t whole = span == 0 ? (~uint64_t{0} / peers) : span / peers;
    const uint64_t rest = span == 0 ? (~uint64_t{0} % peers + 1) : span % peers;
    return static_cast<int64_t>(static_cast<uint64_t>(lo) + whole * w + rest * w / peers);
  };
  std::string where;
  if (worker > 0) absl::StrAppend(&where, key, " >= ", bound(worker));
  if (worker + 1 < peers) {
    absl::StrAppend(&where, where.empty() ? "" : " AND ", key, " < ", bound(worker + 1));
  }
  return where;
}

void render_snapshot(Scope<Offset>& scope, const MysqlSourceConfig& config,
                     const std::vector<ExportSpec>& exports,
                     std::vector<Stream<Offset, Change>>& outs,
                     std::vector<Stream<Offset, HealthUpdate>>& health,
                     std::vector<Stream<Offset, AsyncError>>& errors,
                     std::vector<ShutdownButton>& buttons) {
  AsyncOperatorBuilder<Offset> builder("MysqlSnapshot", scope);
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
      if (snapshots(config, exports, e)) {
        snapshotting.push_back(e);
        report(e, Health::kStarting);
      } else {
        report(e, Health::kRunning);
        if (config.mode == ProgressMode::kConcurrent) caps[e].clear();
      }
    }
    if (snapshotting.empty()) {
      for (size_t e = 0; e < n; ++e) caps[e].clear();
      return absl::OkStatus();
    }
    WEIR_ASSIGN_OR_RETURN(const ConnInfo info, parse_conninfo(config.conninfo));
    // The leader's lock: writes to the snapshotted tables wait while every worker opens its
    // snapshot, so that all of them see the same rows.
    std::optional<MysqlConnection> locker;
    if (leader) {
      auto locked = [&]() -> absl::Status {
        auto connected =
            ctx.run_blocking([&] { return MysqlConnection::connect(info, "snapshot lock"); });
        WEIR_RETURN_IF_ERROR(connected.status());
        locker.emplace(*std::move(connected));
        std::vector<std::string> names;
        names.reserve(snapshotting.size());
        for (size_t e : snapshotting) names.push_back(qualified(config, config.tables[e]));
        // The flush waits for transactions that hold one of the tables, and their writers
        // queue behind it: give up after a while (transient: the next epoch tries again).
        WEIR_RETURN_IF_ERROR(locker->exec(ctx, "SET SESSION lock_wait_timeout = 10"));
        return locker->exec(
            ctx, absl::StrCat("FLUSH TABLES ", absl::StrJoin(names, ", "), " WITH READ LOCK"));
      }();
      config.shared->locked(locked);
      if (!locked.ok()) return locked;
    }
    const absl::Status lock = await_shared(ctx, [&] { return config.shared->lock_state(); });
    if (!lock.ok()) {
      return absl::Status(lock.code(),
                          absl::StrCat("the snapshot leader failed: ", lock.message()));
    }
    auto connected = ctx.run_blocking(
        [&] { return MysqlConnection::connect(info, absl::StrCat("snapshot worker ", worker)); });
    WEIR_RETURN_IF_ERROR(connected.status());
    MysqlConnection conn = *std::move(connected);
    WEIR_RETURN_IF_ERROR(conn.exec(ctx,
                                   "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ; "
                                   "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"));
    config.shared->opened();
    if (leader) {
      while (!config.shared->all_opened()) ctx.sleep_for(std::chrono::milliseconds(1));
      auto taken = lead_snapshot(ctx, config, snapshotting, info, conn);
      (void)locker->exec(ctx, "UNLOCK TABLES");
      locker.reset();
      config.shared->publish(taken);
      if (!taken.ok()) return taken.status();
    }
    const absl::StatusOr<MysqlShared::Snapshot> published =
        await_shared(ctx, [&] { return config.shared->snapshot(); });
    if (!published.ok()) {
      return absl::Status(published.status().code(), absl::StrCat("the snapshot leader failed: ",
                                                                  published.status().message()));
    }
    const MysqlShared::Snapshot& snapshot = *published;
    if (config.stats && leader) {
      for (size_t e : snapshotting) config.stats->set_snapshot_total(e, snapshot.rows[e]);
    }
    std::string row, arena;
    std::vector<size_t> ends;
    std::vector<TextField> fields;
    for (size_t e : snapshotting) {
      const ExportTable& table = config.tables[e];
      // A table with an integer key is shared by key ranges; any other by one worker.
      const auto& range = snapshot.key_range[e];
      const bool mine = range ? true : e % peers == worker;
      Capability<Offset> cap = caps[e].first();
      bool errored = false;
      if (mine && !table.columns.empty()) {
        std::vector<std::string> select;
        select.reserve(table.columns.size());
        for (const auto& column : table.columns) select.push_back(select_expression(column));
        std::string sql = absl::StrCat("SELECT ", absl::StrJoin(select, ", "), " FROM ",
                                       qualified(config, table));
        if (range && peers > 1) {
          const std::string where = key_share(quote_identifier(table.columns[*table.int_key].name),
                                              range->first, range->second, worker, peers);
          if (!where.empty()) absl::StrAppend(&sql, " WHERE ", where);
        }
        WEIR_ASSIGN_OR_RETURN(MysqlResult result, conn.stream(ctx, sql));
        RowEncoder encoder(table.desc);
        const size_t columns = table.columns.size();
        fields.resize(columns);
        ends.resize(columns);
        auto session = outputs[e].session(cap);
        uint64_t given = 0;
        for (;;) {
          WEIR_ASSIGN_OR_RETURN(MYSQL_ROW values, conn.fetch_row(ctx, result.get()));
          if (values == nullptr) break;
          if (errored) continue;
          const unsigned long* lengths = mysql_fetch_lengths(result.get());
          arena.clear();
          absl::Status encoded;
          for (size_t c = 0; c < columns && encoded.ok(); ++c) {
            if (values[c] != nullptr) {
              encoded = canonical_from_select(table.columns[c],
                                              std::string_view(values[c], lengths[c]), arena);
            }
            ends[c] = arena.size();
          }
          if (encoded.ok()) {
            size_t start = 0;
            for (size_t c = 0; c < columns; ++c) {
              fields[c] =
                  values[c] == nullptr
                      ? TextField{{}, true}
                      : TextField{std::string_view(arena).substr(start, ends[c] - start), false};
              start = ends[c];
            }
            row.clear();
            encoded = encoder.encode(fields, row);
          }
          if (!encoded.ok()) {
            // Undecodable data is a definite error of the export at time 0.
            const std::string message =
                absl::StrCat("table ", table.name, ": snapshot: ", encoded.message());
            session.give(Change{definite_error(message), 1});
            report(e, Health::kStalled, message);
            errored = true;
            continue;
          }
          session.give(Change{row, 1});
          ctx.use_fuel(row.size());
          if (++given == 4096) {
            if (config.stats) config.stats->add_snapshot_rows(e, given);
            given = 0;
          }
        }
        if (config.stats) config.stats->add_snapshot_rows(e, given);
      }
      if (!errored) report(e, Health::kRunning);
      if (config.mode == ProgressMode::kConcurrent) caps[e].clear();
    }
    (void)conn.exec(ctx, "COMMIT");
    for (size_t e = 0; e < n; ++e) caps[e].clear();
    return absl::OkStatus();
  });
  errors.push_back(built.errors);
  buttons.push_back(built.button);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The binlog.

namespace {

std::vector<bool> snapshotting_of(const MysqlSourceConfig& config,
                                  const std::vector<ExportSpec>& exports) {
  std::vector<bool> snapshotting(exports.size());
  for (size_t e = 0; e < exports.size(); ++e) snapshotting[e] = snapshots(config, exports, e);
  return snapshotting;
}

// The binlog stream's state on the streaming worker.
class Replication {
 public:
  Replication(AsyncContext& ctx, const MysqlSourceConfig& config,
              const std::vector<ExportSpec>& exports,
              std::vector<AsyncOutput<Offset, Change>>& outputs,
              AsyncOutput<Offset, HealthUpdate>& health_out, std::span<CapabilitySet<Offset>> caps,
              uint32_t worker)
      : ctx_(ctx),
        config_(config),
        snapshotting_(snapshotting_of(config, exports)),
        out_(outputs, health_out, caps, exports, snapshotting_, errors_to_write(config.tables),
             worker) {
    const size_t n = exports.size();
    resume_.assign(n, 0);
    Offset start = std::numeric_limits<Offset>::max();
    for (size_t e = 0; e < n; ++e) {
      resume_[e] = exports[e].resume_upper;
      // The binlog is read from the smallest upper of the exports that take changes and do not
      // snapshot: an errored one takes none (its upper may be far behind, even 0).
      if (!snapshotting_[e] && !out_.errored(e)) {
        start = std::min(start, std::max<Offset>(resume_[e], 1));
      }
      exports_of_[config.tables[e].name].push_back(e);
      auto& types = types_.emplace_back();
      for (const auto& column : config.tables[e].desc.columns) types.push_back(column.type);
    }
    start_ = start == std::numeric_limits<Offset>::max() ? 0 : start;
    position_ = start_;
  }

  absl::Status run() {
    if (out_.all_errored()) return idle();
    const bool any_snapshot =
        std::find(snapshotting_.begin(), snapshotting_.end(), true) != snapshotting_.end();
    if (any_snapshot) {
      const absl::StatusOr<MysqlShared::Snapshot> published =
          await_shared(ctx_, [&] { return config_.shared->snapshot(); });
      if (!published.ok()) return published.status();
      snapshot_end_ = published->position.seq + 1;
      if (start_ == 0) {
        // Every export snapshots: the stream starts where the snapshot is.
        start_ = snapshot_end_;
        position_ = start_;
      }
    }
    WEIR_ASSIGN_OR_RETURN(const ConnInfo info, parse_conninfo(config_.conninfo));
    auto connected = ctx_.run_blocking([&] { return MysqlConnection::connect(info, "binlog"); });
    WEIR_RETURN_IF_ERROR(connected.status());
    conn_.emplace(*std::move(connected));
    WEIR_RETURN_IF_ERROR(open_dump());
    watch_for_silence();
    release();
    for (;;) {
      // A run with an end still reads the transactions before start_ it asked for (to record or
      // check them) before it stops.
      const bool prereading = dump_from_ < start_ && last_seen_ + 1 < start_;
      if (config_.until && position_ >= *config_.until && !in_transaction_ && !out_.rewinding() &&
          !prereading) {
        return finish();
      }
      WEIR_ASSIGN_OR_RETURN(std::optional<std::string_view> event, next_event());
      if (!event) return idle();  // A definite error of the whole source.
      WEIR_RETURN_IF_ERROR(handle(*event));
    }
  }

 private:
  // Every export errored: frontiers stay where they are, unless the run has an end.
  absl::Status idle() {
    if (!config_.until) {
      // The error rows are at the exports' held times: frontiers pass them, so that they are
      // durable (nothing more comes to an errored export), and then stay.
      Offset past = position_;
      for (size_t e = 0; e < out_.size(); ++e) past = std::max(past, out_.held(e) + 1);
      out_.end_rewinds();
      out_.release(past, past, snapshot_end_);
      ctx_.sleep_for(std::chrono::nanoseconds::max());
      return absl::OkStatus();
    }
    position_ = std::max(position_, *config_.until);
    out_.end_rewinds();
    release();
    ctx_.yield();
    return absl::OkStatus();
  }

  absl::Status finish() {
    out_.cease();
    ctx_.yield();
    return absl::OkStatus();
  }

  // Asks the server for its binlog from the GTID before start_ on.
  absl::Status open_dump() {
    BinlogDumpOptions options;
    // From the recorded transaction, if it is before start_: it must still be there.
    // Read from the transaction before start_ (its data is in every shard already: it is only
    // looked at, and recorded as passed), or from the recorded one if that is earlier: it must
    // still be there.
    Offset from = start_;
    if (config_.preread) {
      from = start_ > 0 ? start_ - 1 : 0;
      if (config_.fingerprint) {
        verify_ = config_.fingerprint;
        from = std::min(from, config_.fingerprint->gtid.seq);
      }
    }
    dump_from_ = from;
    options.gtid_start =
        GtidPosition{config_.domain, config_.server, from > 0 ? from - 1 : 0}.to_string();
    options.server_id = config_.replica_server_id;
    options.heartbeat_period = config_.heartbeat;
    WEIR_ASSIGN_OR_RETURN(BinlogDump dump, BinlogDump::open(*conn_, options, &ctx_));
    decoder_.emplace(dump.checksum());
    dump_.emplace(std::move(dump));
    return absl::OkStatus();
  }

  // A dump whose connection went silent is ended: an idle server sends a heartbeat every
  // config_.heartbeat, so nothing for several of them means the connection is dead (a network
  // that drops every packet shows no error, and the fiber would wait on the socket for ever). The
  // socket is shut down, which wakes the fiber; the read fails (transient) and the driver
  // restarts from the uppers.
  void watch_for_silence() {
    heard_ns_.store(Clock::now().time_since_epoch().count());
    const auto limit = std::max<Clock::duration>(std::chrono::seconds(15), 10 * config_.heartbeat);
    const int fd = static_cast<int>(mysql_get_socket(conn_->raw()));
    watchdog_ = std::jthread([this, limit, fd](const std::stop_token& stop) {
      while (!stop.stop_requested()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        const Clock::time_point heard{Clock::duration(heard_ns_.load())};
        if (Clock::now() - heard > limit) {
          ::shutdown(fd, SHUT_RDWR);
          return;
        }
      }
    });
  }

  // The next event's bytes (valid until the next call); nullopt when the server refused the
  // dump's start for good (the errors are written).
  absl::StatusOr<std::optional<std::string_view>> next_event() {
    auto event = dump_->fetch(&ctx_);
    heard_ns_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    if (event.ok() && !event->has_value()) {
      return absl::UnavailableError("mysql source: the server ended the binlog dump");
    }
    if (!event.ok() && dump_->position_lost() && dump_from_ < start_ && dump_from_ > 1) {
      // No transaction just before where the dump began (a gap in the sequence numbers): the
      // next epoch reads from where the exports resume.
      config_.shared->preread_failed();
      return absl::UnavailableError(absl::StrCat(
          "mysql source: the binlog has no GTID ", dump_from_ - 1, " to read on from (",
          event.status().message(), "); reading from ", start_, " next"));
    }
    if (!event.ok() && dump_->position_lost()) {
      const std::string message = absl::StrCat(
          "the server cannot send its binlog from ",
          start_ > 1
              ? "GTID " + GtidPosition{config_.domain, config_.server, start_ - 1}.to_string()
              : std::string("its start"),
          " on (", event.status().message(),
          "): the binlog was purged past where the shards stand, or holds another history; "
          "drop the shards to snapshot again");
      out_.error_all(0, message);
      return std::nullopt;
    }
    return event;
  }

  absl::Status handle(std::string_view bytes) {
    WEIR_ASSIGN_OR_RETURN(Event event, decoder_->decode(bytes));
    if (const auto* gtid = std::get_if<GtidEvent>(&event.body)) {
      if (gtid->domain_id != config_.domain || event.header.server_id != config_.server) {
        const std::string message = absl::StrCat(
            "the binlog has GTID ",
            format_gtid({gtid->domain_id, event.header.server_id, gtid->seq_no}),
            ", not of domain ", config_.domain, " and server ", config_.server,
            " whose sequence numbers the shards' times are: another server's history (a "
            "failover) or a second domain cannot be ordered with them; drop the shards to "
            "snapshot again");
        out_.error_all(gtid->seq_no, message);
        return absl::OkStatus();
      }
      if (verify_ && gtid->seq_no > verify_->gtid.seq) {
        history_changed(GtidFingerprint{
            {gtid->domain_id, event.header.server_id, gtid->seq_no}, event.header.timestamp, 0});
        return absl::OkStatus();
      }
      seq_ = gtid->seq_no;
      // A group's row events refer to the table maps sent within it: the ids of older groups are
      // not kept (they would pile up over a long run).
      tables_.clear();
      gtid_timestamp_ = event.header.timestamp;
      mark_ = 0;
      // Before where the exports resume: already in every shard (see open_dump).
      skipping_ = seq_ < start_;
      in_transaction_ = true;
      touched_.clear();
      standalone_ = gtid->is_standalone();
      if ((gtid->flags & (GtidEvent::kPreparedXa | GtidEvent::kCompletedXa)) != 0) {
        const std::string message = absl::StrCat(
            "GTID ", format_gtid({gtid->domain_id, event.header.server_id, gtid->seq_no}),
            " is an XA transaction's PREPARE or COMMIT: XA transactions are not supported");
        out_.error_all(seq_, message);
      }
      return absl::OkStatus();
    }
    if (auto* map = std::get_if<TableMapEvent>(&event.body)) {
      const uint64_t id = map->table_id;
      tables_[id] = std::move(*map);
      return absl::OkStatus();
    }
    if (const auto* rows = std::get_if<RowsEvent>(&event.body)) {
      if (skipping_) {
        mark_ = crc32(rows->rows, static_cast<uint32_t>(mark_));
        return absl::OkStatus();
      }
      return change(*rows);
    }
    if (const auto* xid = std::get_if<XidEvent>(&event.body)) {
      mark_ = xid->xid;
      committed();
      return absl::OkStatus();
    }
    if (const auto* query = std::get_if<QueryEvent>(&event.body)) {
      const std::string head = statement_head(query->query, 1);
      mark_ = crc32(query->query, static_cast<uint32_t>(mark_));
      if (head == "commit") {
        committed();
      } else if (head != "begin" && in_transaction_) {
        if (!skipping_) statement(*query);
        if (standalone_) committed();
      }
      return absl::OkStatus();
    }
    if (std::get_if<HeartbeatEvent>(&event.body) != nullptr && !in_transaction_ && config_.stats) {
      config_.stats->record_upstream(position_, Clock::now());
    }
    return absl::OkStatus();
  }

  void committed() {
    if (!in_transaction_) return;
    in_transaction_ = false;
    standalone_ = false;
    if (seq_ + 1 > position_) {
      position_ = seq_ + 1;
      if (config_.stats) config_.stats->record_upstream(position_, Clock::now());
    }
    last_seen_ = std::max(last_seen_, seq_);
    const GtidFingerprint passed{{config_.domain, config_.server, seq_}, gtid_timestamp_, mark_};
    if (verify_ && seq_ == verify_->gtid.seq) {
      // The transaction an earlier run recorded must be the one the binlog has there.
      if (!(passed == *verify_)) {
        history_changed(passed);
        return;
      }
      verify_.reset();
    }
    config_.shared->passed(passed);
    release();
  }

  // The binlog no longer has, where an earlier run read it, the transaction it recorded: every
  // export errors.
  void history_changed(const GtidFingerprint& seen) {
    const GtidFingerprint expected = *verify_;
    verify_.reset();
    out_.error_all(
        std::max<Offset>(seen.gtid.seq, start_),
        absl::StrCat("the binlog's history changed: where an earlier run read transaction ",
                     expected.to_string(), " (GTID@second#mark), the server now has ",
                     seen.to_string(),
                     " (RESET MASTER, a restored backup, or another server with the same ids); "
                     "drop the shards to snapshot again"));
  }

  absl::Status change(const RowsEvent& rows) {
    auto map = tables_.find(rows.table_id);
    if (map == tables_.end()) {
      return absl::DataLossError(absl::StrCat("mysql source: a row event of table id ",
                                              rows.table_id, " without its TABLE_MAP"));
    }
    const TableMapEvent& table = map->second;
    if (table.database != config_.database) return absl::OkStatus();
    auto it = exports_of_.find(table.table);
    if (it == exports_of_.end()) return absl::OkStatus();
    for (size_t e : it->second) {
      if (out_.errored(e) || seq_ < resume_[e]) continue;
      if (std::find(touched_.begin(), touched_.end(), e) == touched_.end()) touched_.push_back(e);
      const ExportTable& export_table = config_.tables[e];
      if (table.column_count() != export_table.columns.size()) {
        error(e, seq_,
              absl::StrCat("table ", export_table.name, " has ", table.column_count(),
                           " columns in the binlog at GTID ",
                           format_gtid({config_.domain, config_.server, seq_}), ", not the ",
                           export_table.columns.size(),
                           " it was ingested with (its columns changed); drop its shard to "
                           "snapshot it again"));
        continue;
      }
      absl::Status decoded =
          row_decoder_.encode(table, rows, export_table.columns, types_[e],
                              [&](std::string_view before, std::string_view after) {
                                if (!before.empty()) give(e, before, -1);
                                if (!after.empty()) give(e, after, 1);
                                return absl::OkStatus();
                              });
      if (!decoded.ok()) {
        error(e, seq_,
              absl::StrCat("table ", export_table.name, ": a row at GTID ",
                           format_gtid({config_.domain, config_.server, seq_}),
                           " does not decode: ", decoded.message()));
      }
    }
    return absl::OkStatus();
  }

  // A statement at seq_ (ddl.h): DDL, transaction control, or DML a session logged as a
  // statement. One that may change an ingested table's rows or columns otherwise than through
  // row events is a definite error of that table (fails closed).
  void statement(const QueryEvent& query) {
    const std::string head = statement_head(query.query, 1);
    if (head == "rollback") {
      // A transaction that also changed a non-transactional table is logged with its ROLLBACK
      // (or ROLLBACK TO SAVEPOINT): which of its row events stand is not in the binlog.
      for (size_t e : touched_) {
        error(e, seq_,
              absl::StrCat("table ", config_.tables[e].name, ": the transaction at GTID ",
                           format_gtid({config_.domain, config_.server, seq_}),
                           " was rolled back (", std::string(query.query.substr(0, 100)),
                           ") after changing it together with a non-transactional table; drop "
                           "its shard to snapshot it again"));
      }
      return;
    }
    const DdlTargets targets = ddl_targets(query.query, query.database);
    using Kind = DdlTargets::Kind;
    if (targets.kind == Kind::kOther && targets.harmless) return;
    const auto fail = [&](size_t e, std::string_view why) {
      if (seq_ < resume_[e]) return;
      error(e, seq_,
            absl::StrCat("table ", config_.tables[e].name, " ", std::string(why), " at GTID ",
                         format_gtid({config_.domain, config_.server, seq_}), " (",
                         std::string(query.query.substr(0, 200)),
                         "); drop its shard to snapshot it again"));
    };
    for (auto& [name, list] : exports_of_) {
      const bool named = std::any_of(
          targets.tables.begin(), targets.tables.end(),
          [&](const auto& t) { return t.first == config_.database && t.second == name; });
      std::string_view why;
      switch (targets.kind) {
        case Kind::kDropDatabase:
          if (targets.database == config_.database) why = "was dropped with its database";
          break;
        case Kind::kTruncate:
          if (named) why = "was truncated";
          break;
        case Kind::kDrop:
          if (named) why = "was dropped";
          break;
        case Kind::kRename:
          if (named) why = "was renamed (or another table renamed to its name)";
          break;
        case Kind::kReplace:
          if (named) why = "was replaced (CREATE OR REPLACE)";
          break;
        case Kind::kAlter:
          if (named && targets.renames) {
            why = "was renamed";
          } else if (named && !targets.harmless) {
            why = "was altered in a way that changes its columns or rows";
          }
          break;
        case Kind::kOther:
          // DML logged as a statement (binlog_format=STATEMENT or MIXED in that session), or
          // a statement weir does not know: its effect is not in row events.
          if (mentions(query.query, name)) {
            why =
                "was changed by a statement logged as a statement, not as rows (a session "
                "with binlog_format=STATEMENT or MIXED?), or by one weir cannot follow";
          }
          break;
      }
      if (why.empty()) continue;
      for (size_t e : list) fail(e, why);
    }
  }

  void error(size_t e, Offset time, const std::string& message) { out_.error(e, time, message); }

  void release() { out_.release(position_, position_, snapshot_end_); }

  void give(size_t e, std::string_view row, int64_t diff) {
    out_.give(e, seq_, row, diff, snapshot_end_);
    ctx_.use_fuel(row.size());
  }

  AsyncContext& ctx_;
  const MysqlSourceConfig& config_;
  const std::vector<bool> snapshotting_;
  ChangeStreamOutputs out_;
  std::map<std::string, std::vector<size_t>> exports_of_;  // Table name -> exports.
  std::vector<Offset> resume_;
  Offset start_ = 0;
  Offset position_ = 0;      // Every transaction before it has been handled.
  Offset snapshot_end_ = 0;  // Transactions before it are in the snapshot.
  Offset seq_ = 0;           // Of the transaction being received.
  bool in_transaction_ = false;
  bool standalone_ = false;
  std::optional<MysqlConnection> conn_;
  std::vector<size_t> touched_;  // Exports the transaction being received changed.
  uint32_t gtid_timestamp_ = 0;  // Of the transaction being received.
  uint64_t mark_ = 0;            // Of the transaction being received (GtidFingerprint::mark).
  bool skipping_ = false;        // The transaction being received is before start_.
  Offset dump_from_ = 0;         // The first sequence number the dump was asked for.
  Offset last_seen_ = 0;         // The last transaction committed in the dump.
  // The transaction the dump must start with (config_.fingerprint), until it is seen.
  std::optional<GtidFingerprint> verify_;
  std::atomic<Clock::rep> heard_ns_{0};  // When the dump last gave something.
  std::jthread watchdog_;                // See watch_for_silence; stopped before conn_ closes.
  std::optional<BinlogDump> dump_;       // On conn_.
  std::optional<BinlogDecoder> decoder_;
  RowDecoder row_decoder_;
  std::map<uint64_t, TableMapEvent> tables_;              // By table id.
  std::vector<std::vector<postgres::ColumnType>> types_;  // Per export, per column.
};

void render_replication(Scope<Offset>& scope, const MysqlSourceConfig& config,
                        const std::vector<ExportSpec>& exports,
                        std::vector<Stream<Offset, Change>>& outs,
                        std::vector<Stream<Offset, HealthUpdate>>& health,
                        std::vector<Stream<Offset, AsyncError>>& errors,
                        std::vector<ShutdownButton>& buttons) {
  AsyncOperatorBuilder<Offset> builder("MysqlBinlog", scope);
  auto [outputs, health_out] = add_source_outputs(builder, exports.size(), outs, health);
  const uint32_t worker = static_cast<uint32_t>(scope.index());
  const bool leader = worker == config.leader % scope.peers();
  auto built = builder.build(
      [=](AsyncContext& ctx, std::span<CapabilitySet<Offset>> caps) mutable -> absl::Status {
        if (!leader) {
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

absl::StatusOr<RenderedSource> render_mysql(Scope<Offset>& scope, const MysqlSourceConfig& config,
                                            const std::vector<ExportSpec>& exports) {
  if (config.tables.size() != exports.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mysql source: ", exports.size(), " exports but ", config.tables.size(), " tables"));
  }
  if (!config.shared) {
    return absl::InvalidArgumentError("mysql source: MysqlSourceConfig::shared is unset");
  }
  if (config.shared->workers() != scope.peers()) {
    return absl::InvalidArgumentError(absl::StrCat("mysql source: MysqlShared is for ",
                                                   config.shared->workers(),
                                                   " workers, the dataflow has ", scope.peers()));
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

}  // namespace weir::sources::mysql
