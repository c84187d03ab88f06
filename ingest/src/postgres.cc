#include "weir/ingest/postgres.h"

#include <algorithm>
#include <functional>
#include <map>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "schemas.h"

#include "weir/persist/client.h"
#include "weir/sources/postgres/postgres_source.h"
#include "weir/status.h"

namespace weir::ingest {

using persist::Frontier;
using sources::ExportSpec;
using sources::Offset;
namespace pg = sources::postgres;

std::string default_slot_name(const std::string& persist_location) {
  // FNV-1a: stable across builds and platforms (std::hash is not).
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : persist_location) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return absl::StrCat("weir_", absl::Hex(hash, absl::kZeroPad16));
}

namespace {

using internal::read_schema_rows;
using internal::record_schema;

// The key under which `<kind>.schemas` records the server's timeline (no table's: a table's key
// is "schema.table").
constexpr char kTimelineKey[] = "timeline";

class PostgresIngestSource final : public IngestSource {
 public:
  explicit PostgresIngestSource(PostgresIngestOptions options) : options_(std::move(options)) {}

  std::string kind() const override { return options_.kind; }

  absl::StatusOr<std::vector<std::string>> open(persist::PersistClient& client) override {
    // Nothing is created here (the slot is, by the first plan): a run refused after this, for
    // a table it does not have or another source's shards, leaves no slot pinning WAL.
    WEIR_ASSIGN_OR_RETURN(upstream_, pg::check_upstream(options_.conninfo, options_.publication,
                                                        options_.slot, pg::UpstreamCheck::kStart));
    until_ = options_.until;
    std::vector<std::string> tables;
    tables.reserve(upstream_.tables.size());
    for (const auto& t : upstream_.tables) tables.push_back(t.name);
    // A table ingested before that has left the publication (or was dropped) since stays an
    // export, so that the plan writes its definite error instead of leaving it silently behind.
    WEIR_ASSIGN_OR_RETURN(auto recorded, read_schemas(client, options_.kind));
    for (const auto& [table, desc] : recorded) {
      if (std::find(tables.begin(), tables.end(), table) == tables.end()) tables.push_back(table);
    }
    return tables;
  }

  std::vector<std::string> identity() const override {
    return {"kind=postgres", absl::StrCat("system=", upstream_.system_id),
            absl::StrCat("publication=", options_.publication),
            absl::StrCat("slot=", options_.slot)};
  }

  std::optional<Offset> until() const override { return until_; }

  absl::Status prepare(persist::PersistClient& client, std::vector<ExportSpec>& exports) override {
    // The upstream now: the tables still published, and where the slot stands.
    WEIR_ASSIGN_OR_RETURN(pg::UpstreamInfo now,
                          pg::check_upstream(options_.conninfo, options_.publication, options_.slot,
                                             pg::UpstreamCheck::kRunning));
    const bool durable_data = std::any_of(exports.begin(), exports.end(),
                                          [](const ExportSpec& e) { return !e.needs_snapshot(); });
    if (!now.slot_exists && !durable_data) {
      // A first start (nothing durable yet, so nothing to lose): create the slot now.
      WEIR_ASSIGN_OR_RETURN(now, pg::check_upstream(options_.conninfo, options_.publication,
                                                    options_.slot, pg::UpstreamCheck::kCreateSlot));
    }
    // A run that ends stops no export below where the slot stands: a snapshot's time 0 is the
    // table as of the slot's position, and an upper below it would look, to the next run, like
    // changes the slot has let go.
    until_ = options_.until;
    if (until_) until_ = std::max(*until_, now.slot_confirmed_lsn);
    // Tables of the publication that this run leaves out (--tables) keep their shards' uppers:
    // the slot must not confirm past them.
    confirm_floor_ = std::numeric_limits<Offset>::max();
    for (const auto& t : now.tables) {
      const bool in_run = std::any_of(exports.begin(), exports.end(),
                                      [&](const ExportSpec& e) { return e.table == t.name; });
      if (in_run) continue;
      const std::string shard = shard_name(options_.kind, t.name);
      WEIR_ASSIGN_OR_RETURN(auto found, client.find_shard(shard));
      if (!found.has_value()) continue;
      WEIR_ASSIGN_OR_RETURN(auto described, client.describe(shard));
      if (!described.upper.is_empty()) {
        confirm_floor_ = std::min(confirm_floor_, described.upper.time());
      }
    }
    if (now.system_id != upstream_.system_id) {
      return absl::FailedPreconditionError(absl::StrCat(
          "postgres source: the server's system identifier changed from ", upstream_.system_id,
          " to ", now.system_id, ": this is another database cluster"));
    }
    // A new timeline (the server was promoted, or restored from a backup) may have forked from
    // the history the shards hold: what they have past the fork never happened on this one, and
    // the slot's position means another WAL. Definite for the whole source.
    WEIR_ASSIGN_OR_RETURN(auto facts, read_schema_rows(client, options_.kind));
    if (auto it = facts.find(kTimelineKey); it == facts.end()) {
      WEIR_RETURN_IF_ERROR(
          record_schema(client, options_.kind, kTimelineKey, absl::StrCat(now.timeline)));
    } else if (it->second != absl::StrCat(now.timeline) && now.source_error.empty()) {
      now.source_error = absl::StrCat(
          "the server's timeline changed from ", it->second, " to ", now.timeline,
          " (it was promoted or restored from a backup): its history may have forked from the "
          "one the shards hold; drop the shards and the slot, and start again");
    }
    WEIR_ASSIGN_OR_RETURN(auto recorded, read_schemas(client, options_.kind));
    if (!now.source_error.empty()) {
      // Definite for the whole source: every export errors, at its upper.
      std::vector<pg::ExportTable> tables;
      for (auto& spec : exports) {
        pg::ExportTable table;
        table.name = spec.table;
        if (spec.definite_error.empty()) table.error_to_write = now.source_error;
        tables.push_back(std::move(table));
      }
      tables_ = std::move(tables);
      shared_ = std::make_shared<pg::PostgresShared>(options_.workers);
      return absl::OkStatus();
    }
    std::vector<pg::ExportTable> tables;
    for (auto& spec : exports) {
      pg::ExportTable table;
      table.name = spec.table;
      auto it = std::find_if(now.tables.begin(), now.tables.end(),
                             [&](const pg::UpstreamTable& t) { return t.name == spec.table; });
      if (it != now.tables.end()) table.oid = it->oid;
      auto desc = recorded.find(spec.table);
      if (spec.needs_snapshot() && spec.definite_error.empty()) {
        if (it == now.tables.end()) {
          return absl::FailedPreconditionError(absl::StrCat("postgres source: table ", spec.table,
                                                            " is not in publication ",
                                                            options_.publication));
        }
        // The description the snapshot's rows will be encoded with, recorded first.
        WEIR_ASSIGN_OR_RETURN(table.desc, pg::load_relation_desc(options_.conninfo, table.oid));
        WEIR_RETURN_IF_ERROR(record_schema(client, options_.kind, spec.table, table.desc.encode()));
      } else if (spec.definite_error.empty()) {
        if (desc == recorded.end()) {
          table.error_to_write =
              absl::StrCat("table ", spec.table, ": no relation description is recorded in ",
                           options_.kind, ".schemas");
        } else {
          auto decoded = pg::RelationDesc::decode(desc->second);
          if (!decoded.ok()) {
            table.error_to_write = absl::StrCat("table ", spec.table,
                                                ": its recorded "
                                                "relation description is damaged: ",
                                                decoded.status().message());
          } else {
            table.desc = *std::move(decoded);
          }
        }
        if (it == now.tables.end()) {
          table.error_to_write = absl::StrCat(
              "table ", spec.table, " was dropped or left publication ", options_.publication,
              " (noticed at LSN ", pg::format_lsn(spec.resume_upper),
              "); drop its shard to ingest it again");
        } else if (table.error_to_write.empty() && table.desc.table_oid != 0 &&
                   table.desc.table_oid != it->oid) {
          table.error_to_write = absl::StrCat(
              "table ", spec.table, " was dropped and created again (oid ", table.desc.table_oid,
              ", now ", it->oid, "; noticed at LSN ", pg::format_lsn(spec.resume_upper),
              "): its shard holds the old table's rows; drop the shard to ingest the new one");
        } else if (table.error_to_write.empty() &&
                   std::find(now.not_full.begin(), now.not_full.end(), spec.table) !=
                       now.not_full.end()) {
          table.error_to_write = absl::StrCat(
              "table ", spec.table,
              ": REPLICA IDENTITY is no longer FULL (updates and deletes would come without the "
              "old row): run ALTER TABLE ",
              spec.table, " REPLICA IDENTITY FULL; and drop its shard");
        } else if (table.error_to_write.empty() && spec.resume_upper < now.slot_confirmed_lsn) {
          table.error_to_write =
              absl::StrCat("table ", spec.table, ": replication slot ", options_.slot,
                           " has confirmed LSN ", pg::format_lsn(now.slot_confirmed_lsn),
                           ", past this export's upper ", pg::format_lsn(spec.resume_upper),
                           ": the changes between are gone; drop its shard to snapshot it again");
        }
      }
      tables.push_back(std::move(table));
    }
    tables_ = std::move(tables);
    shared_ = std::make_shared<pg::PostgresShared>(options_.workers);
    return absl::OkStatus();
  }

  absl::StatusOr<sources::RenderedSource> render(Scope<Offset>& scope,
                                                 const std::vector<ExportSpec>& exports,
                                                 const Epoch& epoch) override {
    pg::PostgresSourceConfig config;
    config.conninfo = options_.conninfo;
    config.publication = options_.publication;
    config.slot = options_.slot;
    config.mode = options_.mode;
    config.tables = tables_;
    config.shared = shared_;
    config.stats = epoch.stats;
    config.status_interval = options_.status_interval;
    config.until = until_;
    config.confirm_floor = confirm_floor_;
    const size_t n = exports.size();
    config.durable_upper = [durable = epoch.durable_upper, n]() -> Offset {
      Offset lowest = std::numeric_limits<Offset>::max();
      for (size_t e = 0; e < n; ++e) lowest = std::min(lowest, durable(e));
      return n == 0 ? 0 : lowest;
    };
    return pg::render_postgres(scope, config, exports);
  }

 private:
  const PostgresIngestOptions options_;
  pg::UpstreamInfo upstream_;
  std::optional<Offset> until_;  // options_.until, at least the slot's position (prepare).
  Offset confirm_floor_ = std::numeric_limits<Offset>::max();  // From prepare.
  // This epoch's, from prepare (read by every worker's render).
  std::vector<pg::ExportTable> tables_;
  std::shared_ptr<pg::PostgresShared> shared_;
};

}  // namespace

std::shared_ptr<IngestSource> make_postgres_source(PostgresIngestOptions options) {
  return std::make_shared<PostgresIngestSource>(std::move(options));
}

}  // namespace weir::ingest
