#include "weir/ingest/mysql.h"

#include <algorithm>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "schemas.h"

#include "weir/persist/client.h"
#include "weir/sources/mysql/mysql_source.h"
#include "weir/status.h"

namespace weir::ingest {

using sources::ExportSpec;
using sources::Offset;
namespace my = sources::mysql;

namespace {

constexpr char kOriginKey[] = "@gtid-origin";
constexpr char kLastGtidKey[] = "@last-gtid";
std::string columns_key(const std::string& table) { return "@columns:" + table; }

uint32_t derived_server_id(const std::string& key) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a: stable across builds.
  for (unsigned char c : key) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return static_cast<uint32_t>(hash) | 0x80000000u;
}

// The index of a single-column integer primary key, if the table has one.
std::optional<size_t> int_key(const std::vector<my::MysqlColumn>& columns) {
  std::optional<size_t> key;
  for (size_t c = 0; c < columns.size(); ++c) {
    if (!columns[c].primary_key) continue;
    if (key) return std::nullopt;  // A composite key.
    key = c;
  }
  if (!key) return std::nullopt;
  const std::string& type = columns[*key].data_type;
  const bool integer = type == "tinyint" || type == "smallint" || type == "mediumint" ||
                       type == "int" || (type == "bigint" && !columns[*key].is_unsigned);
  return integer ? key : std::nullopt;
}

class MysqlIngestSource final : public IngestSource {
 public:
  explicit MysqlIngestSource(MysqlIngestOptions options) : options_(std::move(options)) {
    if (options_.replica_server_id == 0) {
      options_.replica_server_id = derived_server_id(options_.replica_key);
    }
  }

  std::string kind() const override { return options_.kind; }

  absl::StatusOr<std::vector<std::string>> open(persist::PersistClient& client) override {
    WEIR_ASSIGN_OR_RETURN(upstream_, my::check_upstream(options_.conninfo));
    database_ = upstream_.database;
    std::vector<std::string> tables;
    for (const auto& table : upstream_.tables) {
      // `<kind>.schemas` keys its own facts by names no table of the source may take.
      if (!internal::is_source_key(table)) tables.push_back(table);
    }
    // A table ingested before that was dropped since stays an export: its definite error is
    // in the binlog, at the DROP.
    WEIR_ASSIGN_OR_RETURN(auto recorded, read_schemas(client, options_.kind));
    for (const auto& [table, desc] : recorded) {
      if (std::find(tables.begin(), tables.end(), table) == tables.end()) tables.push_back(table);
    }
    return tables;
  }

  std::vector<std::string> identity() const override {
    return {"kind=mysql", absl::StrCat("database=", database_)};
  }

  std::optional<Offset> until() const override {
    if (!options_.until_seq) return std::nullopt;
    return *options_.until_seq + 1;
  }

  absl::Status prepare(persist::PersistClient& client, std::vector<ExportSpec>& exports) override {
    WEIR_ASSIGN_OR_RETURN(my::UpstreamInfo now, my::check_upstream(options_.conninfo));
    WEIR_ASSIGN_OR_RETURN(auto facts, internal::read_schema_rows(client, options_.kind));
    // The GTIDs' origin: recorded at the first run (the server's own domain and id when its
    // binlog has no GTID yet).
    std::string source_error;
    my::GtidPosition origin = now.position;
    if (origin.seq == 0) origin = now.server;
    const std::string origin_text = absl::StrCat(origin.domain, "-", origin.server);
    if (auto it = facts.find(kOriginKey); it == facts.end()) {
      WEIR_RETURN_IF_ERROR(internal::record_schema(client, options_.kind, kOriginKey, origin_text));
    } else {
      const size_t dash = it->second.find('-');
      my::GtidPosition recorded;
      if (dash == std::string::npos ||
          !absl::SimpleAtoi(it->second.substr(0, dash), &recorded.domain) ||
          !absl::SimpleAtoi(it->second.substr(dash + 1), &recorded.server)) {
        return absl::DataLossError(absl::StrCat(options_.kind, ".schemas: its ", kOriginKey, " '",
                                                it->second, "' is damaged"));
      }
      origin.domain = recorded.domain;
      origin.server = recorded.server;
      if (now.position.seq != 0 &&
          (now.position.domain != recorded.domain || now.position.server != recorded.server)) {
        source_error = absl::StrCat(
            "the server's binlog is now at GTID ", now.position.to_string(), ", of domain ",
            now.position.domain, " and server ", now.position.server, ", not ", it->second,
            " whose sequence numbers the shards' times are (a failover to another server, or a "
            "second domain): drop the shards to snapshot again");
      }
    }
    // A history that went back: the server's binlog ends before where the shards stand (RESET
    // MASTER, or a server restored from an older backup). Read on from there, the dump would
    // skip the new history's transactions up to the old upper.
    Offset highest = 0;
    for (const auto& spec : exports) {
      if (spec.definite_error.empty()) highest = std::max(highest, spec.resume_upper);
    }
    if (source_error.empty() && highest > 1 && now.position.seq + 1 < highest) {
      source_error = absl::StrCat(
          "the server's binlog ends at GTID ", now.position.to_string(),
          ", before the shards' upper ", highest,
          ": its history was reset (RESET MASTER) or replaced, and cannot be read on from where "
          "the shards stand; drop the shards to snapshot again");
    }
    origin_ = origin;
    if (shared_ && shared_->has_preread_failed()) preread_ = false;
    WEIR_RETURN_IF_ERROR(record_last_gtid(client, facts));
    fingerprint_.reset();
    if (auto it = facts.find(kLastGtidKey); it != facts.end() && source_error.empty()) {
      fingerprint_ = my::GtidFingerprint::parse(it->second);
      if (!fingerprint_) {
        return absl::DataLossError(absl::StrCat(options_.kind, ".schemas: its ", kLastGtidKey, " '",
                                                it->second, "' is damaged"));
      }
    }
    std::vector<my::ExportTable> tables;
    for (auto& spec : exports) {
      my::ExportTable table;
      table.name = spec.table;
      if (!source_error.empty()) {
        if (spec.definite_error.empty()) table.error_to_write = source_error;
        tables.push_back(std::move(table));
        continue;
      }
      if (!spec.definite_error.empty()) {
        tables.push_back(std::move(table));
        continue;
      }
      if (spec.needs_snapshot()) {
        if (std::find(now.tables.begin(), now.tables.end(), spec.table) == now.tables.end()) {
          return absl::FailedPreconditionError(absl::StrCat("mysql source: table ", spec.table,
                                                            " is not a base table of ", database_));
        }
        WEIR_ASSIGN_OR_RETURN(my::TableDesc desc, my::load_table(options_.conninfo, spec.table));
        if (!desc.unsupported.empty()) {
          table.error_to_write = absl::StrCat("table ", spec.table, ": ", desc.unsupported);
          tables.push_back(std::move(table));
          continue;
        }
        table.columns = std::move(desc.columns);
        table.desc = std::move(desc.desc);
        // Recorded first: what the snapshot's and the binlog's rows are decoded with.
        WEIR_RETURN_IF_ERROR(internal::record_schema(client, options_.kind, columns_key(spec.table),
                                                     my::encode_columns(table.columns)));
        WEIR_RETURN_IF_ERROR(
            internal::record_schema(client, options_.kind, spec.table, table.desc.encode()));
      } else {
        auto desc = facts.find(spec.table);
        auto columns = facts.find(columns_key(spec.table));
        if (desc == facts.end() || columns == facts.end()) {
          table.error_to_write = absl::StrCat(
              "table ", spec.table, ": no description is recorded in ", options_.kind, ".schemas");
        } else {
          auto decoded = sources::postgres::RelationDesc::decode(desc->second);
          auto decoded_columns = my::decode_columns(columns->second);
          if (!decoded.ok() || !decoded_columns.ok()) {
            table.error_to_write =
                absl::StrCat("table ", spec.table, ": its recorded description is damaged");
          } else {
            table.desc = *std::move(decoded);
            table.columns = *std::move(decoded_columns);
          }
        }
      }
      table.int_key = int_key(table.columns);
      tables.push_back(std::move(table));
    }
    tables_ = std::move(tables);
    shared_ = std::make_shared<my::MysqlShared>(options_.workers);
    return absl::OkStatus();
  }

  absl::Status finish(persist::PersistClient& client) override {
    WEIR_ASSIGN_OR_RETURN(auto facts, internal::read_schema_rows(client, options_.kind));
    return record_last_gtid(client, facts);
  }

  absl::StatusOr<sources::RenderedSource> render(Scope<Offset>& scope,
                                                 const std::vector<ExportSpec>& exports,
                                                 const Epoch& epoch) override {
    my::MysqlSourceConfig config;
    config.conninfo = options_.conninfo;
    config.database = database_;
    config.mode = options_.mode;
    config.tables = tables_;
    config.domain = origin_.domain;
    config.server = origin_.server;
    config.replica_server_id = options_.replica_server_id;
    config.fingerprint = fingerprint_;
    config.preread = preread_;
    config.shared = shared_;
    config.stats = epoch.stats;
    config.heartbeat = options_.heartbeat;
    config.until = until();
    return my::render_mysql(scope, config, exports);
  }

 private:
  // Records the last transaction the previous epoch's binlog operator passed: the next runs look
  // for it again where they read the binlog from (see GtidFingerprint).
  absl::Status record_last_gtid(persist::PersistClient& client,
                                std::map<std::string, std::string>& facts) {
    if (!shared_) return absl::OkStatus();
    const auto passed = shared_->last_passed();
    if (!passed) return absl::OkStatus();
    const std::string text = passed->to_string();
    auto it = facts.find(kLastGtidKey);
    if (it != facts.end() && it->second == text) return absl::OkStatus();
    WEIR_RETURN_IF_ERROR(internal::record_schema(client, options_.kind, kLastGtidKey, text));
    facts[kLastGtidKey] = text;
    return absl::OkStatus();
  }

  MysqlIngestOptions options_;
  my::UpstreamInfo upstream_;
  std::string database_;
  my::GtidPosition origin_;
  std::optional<my::GtidFingerprint> fingerprint_;  // From prepare.
  bool preread_ = true;                             // See MysqlSourceConfig::preread.
  std::vector<my::ExportTable> tables_;
  std::shared_ptr<my::MysqlShared> shared_;
};

}  // namespace

std::shared_ptr<IngestSource> make_mysql_source(MysqlIngestOptions options) {
  return std::make_shared<MysqlIngestSource>(std::move(options));
}

}  // namespace weir::ingest
