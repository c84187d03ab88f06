// check_upstream and PostgresShared.

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "postgres/catalog.h"
#include "postgres/connection.h"

#include "weir/sources/postgres/pgoutput.h"
#include "weir/sources/postgres/postgres_source.h"
#include "weir/status.h"

namespace weir::sources::postgres {

void PostgresShared::publish(absl::StatusOr<Snapshot> snapshot) {
  weir::MutexLock lock(mu_);
  snapshot_ = std::move(snapshot);
}

std::optional<absl::StatusOr<PostgresShared::Snapshot>> PostgresShared::snapshot() const {
  weir::MutexLock lock(mu_);
  return snapshot_;
}

void PostgresShared::imported() {
  weir::MutexLock lock(mu_);
  ++imported_;
}

void PostgresShared::finished() {
  weir::MutexLock lock(mu_);
  ++finished_;
}

bool PostgresShared::all_imported() const {
  weir::MutexLock lock(mu_);
  return imported_ >= workers_;
}

bool PostgresShared::all_finished() const {
  weir::MutexLock lock(mu_);
  return finished_ >= workers_;
}

namespace {

absl::Status refuse(const std::string& message) {
  return absl::FailedPreconditionError("postgres source: " + message);
}

// IDENTIFY_SYSTEM: the server's system identifier and timeline, which every answer carries (a
// plan compares them with the first run's, also when the source has a definite error).
absl::Status identify(const std::string& conninfo, UpstreamInfo& info) {
  WEIR_ASSIGN_OR_RETURN(PgConnection replication,
                        PgConnection::connect(conninfo, true, "identify system"));
  WEIR_ASSIGN_OR_RETURN(PgResult system, replication.exec("IDENTIFY_SYSTEM"));
  info.system_id = std::string(value(system.get(), 0, 0));
  WEIR_ASSIGN_OR_RETURN(info.timeline, unsigned_value(system.get(), 0, 1, "the timeline"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<UpstreamInfo> check_upstream(const std::string& conninfo,
                                            const std::string& publication, const std::string& slot,
                                            UpstreamCheck mode) {
  const bool strict = mode != UpstreamCheck::kRunning;
  UpstreamInfo info;
  WEIR_ASSIGN_OR_RETURN(PgConnection conn, PgConnection::connect(conninfo, false, "checks"));
  info.server_version = conn.server_version();
  if (info.server_version < 130000) {
    return refuse(absl::StrCat("the server runs PostgreSQL ", info.server_version / 10000, ".",
                               info.server_version % 10000,
                               "; logical replication with pgoutput needs 13 or later"));
  }
  WEIR_ASSIGN_OR_RETURN(PgResult wal_level, conn.exec("SHOW wal_level"));
  if (value(wal_level.get(), 0, 0) != "logical") {
    return refuse(absl::StrCat(
        "wal_level is '", std::string(value(wal_level.get(), 0, 0)),
        "', not 'logical': run ALTER SYSTEM SET wal_level = logical; and restart the server"));
  }
  WEIR_ASSIGN_OR_RETURN(PgResult role,
                        conn.exec("SELECT rolname, rolreplication OR rolsuper FROM pg_roles "
                                  "WHERE rolname = current_user"));
  if (PQntuples(role.get()) != 1 || value(role.get(), 0, 1) != "t") {
    const std::string name = PQntuples(role.get()) == 1 ? std::string(value(role.get(), 0, 0))
                                                        : std::string("current_user");
    return refuse(absl::StrCat("role ", name, " may not replicate: run ALTER ROLE ",
                               quote_identifier(name), " WITH REPLICATION;"));
  }
  WEIR_ASSIGN_OR_RETURN(PgResult pub, conn.exec_params("SELECT 1 FROM pg_publication WHERE "
                                                       "pubname = $1",
                                                       {publication}));
  if (PQntuples(pub.get()) != 1) {
    const std::string message = absl::StrCat(
        "publication ", quote_identifier(publication), " does not exist: run CREATE PUBLICATION ",
        quote_identifier(publication), " FOR TABLE ...; (or FOR ALL TABLES)");
    if (strict) return refuse(message);
    info.source_error = message;  // Dropped while the source ran.
    WEIR_RETURN_IF_ERROR(identify(conninfo, info));
    return info;
  }
  // The publication must publish every change: a table whose deletes or updates are not
  // published would drift from its shard without an error.
  WEIR_ASSIGN_OR_RETURN(
      PgResult what,
      conn.exec_params("SELECT pubinsert AND pubupdate AND pubdelete AND pubtruncate, pubviaroot "
                       "FROM pg_publication WHERE pubname = $1",
                       {publication}));
  if (!strict && value(what.get(), 0, 0) != "t") {
    // Narrowed while the source ran: the changes no longer published since are gone.
    info.source_error =
        absl::StrCat("publication ", quote_identifier(publication),
                     " no longer publishes every kind of change (insert, update, delete, "
                     "truncate): the changes left out since are gone; restore them (ALTER "
                     "PUBLICATION ",
                     quote_identifier(publication),
                     " SET (publish = 'insert, update, delete, truncate');), drop the shards and "
                     "start again");
    WEIR_RETURN_IF_ERROR(identify(conninfo, info));
    return info;
  }
  if (strict && value(what.get(), 0, 0) != "t") {
    return refuse(absl::StrCat("publication ", quote_identifier(publication),
                               " does not publish every kind of change: run ALTER PUBLICATION ",
                               quote_identifier(publication),
                               " SET (publish = 'insert, update, delete, truncate');"));
  }
  if (strict && value(what.get(), 0, 1) == "t") {
    return refuse(absl::StrCat("publication ", quote_identifier(publication),
                               " has publish_via_partition_root = true, which weir does not "
                               "support yet: publish the partitions themselves"));
  }
  WEIR_ASSIGN_OR_RETURN(
      PgResult tables,
      conn.exec_params(
          absl::StrCat(
              "SELECT n.nspname, c.relname, c.oid, c.relreplident, c.relkind, "
              "has_table_privilege(c.oid, 'SELECT'), ",
              // Row filters and column lists (PostgreSQL 15): the snapshot would not apply them.
              info.server_version >= 150000
                  ? "EXISTS (SELECT 1 FROM pg_publication_rel r JOIN pg_publication q ON q.oid = "
                    "r.prpubid WHERE q.pubname = $1 AND r.prrelid = c.oid AND (r.prqual IS NOT "
                    "NULL OR r.prattrs IS NOT NULL)) "
                  : "false ",
              "FROM pg_publication_tables p JOIN pg_namespace n ON n.nspname = p.schemaname "
              "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename "
              "WHERE p.pubname = $1 ORDER BY 1, 2"),
          {publication}));
  std::vector<std::string> not_full;
  for (int i = 0; i < PQntuples(tables.get()); ++i) {
    UpstreamTable table;
    table.name = absl::StrCat(std::string(value(tables.get(), i, 0)), ".",
                              std::string(value(tables.get(), i, 1)));
    WEIR_ASSIGN_OR_RETURN(const uint64_t oid,
                          unsigned_value(tables.get(), i, 2, "a published table's oid"));
    table.oid = static_cast<uint32_t>(oid);
    if (value(tables.get(), i, 3) != "f") {
      not_full.push_back(absl::StrCat(quote_identifier(value(tables.get(), i, 0)), ".",
                                      quote_identifier(value(tables.get(), i, 1))));
      info.not_full.push_back(table.name);
    }
    const std::string quoted = absl::StrCat(quote_identifier(value(tables.get(), i, 0)), ".",
                                            quote_identifier(value(tables.get(), i, 1)));
    if (strict && value(tables.get(), i, 4) == "p") {
      return refuse(absl::StrCat("table ", quoted,
                                 " is partitioned, which weir does not support yet: publish its "
                                 "partitions instead"));
    }
    if (strict && value(tables.get(), i, 5) != "t") {
      return refuse(absl::StrCat("the role may not read table ", quoted, ": run GRANT SELECT ON ",
                                 quoted, " TO ", "the role weir connects as"));
    }
    if (strict && value(tables.get(), i, 6) == "t") {
      return refuse(absl::StrCat("publication ", quote_identifier(publication),
                                 " has a row filter or a column list on table ", quoted,
                                 ", which weir does not support (the snapshot would not apply "
                                 "it): publish the whole table"));
    }
    info.tables.push_back(std::move(table));
  }
  if (!not_full.empty() && strict) {
    std::vector<std::string> statements;
    statements.reserve(not_full.size());
    for (const auto& t : not_full) {
      statements.push_back(absl::StrCat("ALTER TABLE ", t, " REPLICA IDENTITY FULL;"));
    }
    return refuse(absl::StrCat("publication ", quote_identifier(publication), ": ",
                               not_full.size() == 1 ? "table " : "tables ",
                               absl::StrJoin(not_full, ", "),
                               " need REPLICA IDENTITY FULL (so that updates and deletes carry "
                               "the old row): run ",
                               absl::StrJoin(statements, " ")));
  }

  WEIR_ASSIGN_OR_RETURN(
      PgResult slot_row,
      conn.exec_params("SELECT plugin, slot_type, confirmed_flush_lsn, wal_status, "
                       "database = current_database() FROM pg_replication_slots "
                       "WHERE slot_name = $1",
                       {slot}));
  if (PQntuples(slot_row.get()) == 0) {
    info.slot_exists = false;
    if (mode != UpstreamCheck::kCreateSlot) {
      if (mode == UpstreamCheck::kRunning) {
        info.source_error = absl::StrCat("replication slot \"", slot,
                                         "\" was dropped while the source ran: the changes "
                                         "since are gone; drop the shards and start again");
      }
      WEIR_RETURN_IF_ERROR(identify(conninfo, info));
      return info;
    }
    WEIR_ASSIGN_OR_RETURN(PgConnection replication,
                          PgConnection::connect(conninfo, true, "creating the slot"));
    auto created = replication.exec(absl::StrCat("CREATE_REPLICATION_SLOT ", quote_identifier(slot),
                                                 " LOGICAL pgoutput NOEXPORT_SNAPSHOT"));
    if (!created.ok() && created.status().message().find("already exists") == std::string::npos) {
      return created.status();
    }
    info.slot_created = created.ok();
    WEIR_ASSIGN_OR_RETURN(slot_row, conn.exec_params("SELECT plugin, slot_type, "
                                                     "confirmed_flush_lsn, wal_status, database = "
                                                     "current_database() FROM "
                                                     "pg_replication_slots WHERE slot_name = $1",
                                                     {slot}));
    info.slot_exists = true;
    if (PQntuples(slot_row.get()) == 0) {
      return absl::UnavailableError(
          absl::StrCat("postgres source: replication slot \"", slot, "\" vanished after creation"));
    }
  }
  if (value(slot_row.get(), 0, 1) != "logical" || value(slot_row.get(), 0, 0) != "pgoutput") {
    return refuse(absl::StrCat("replication slot \"", slot, "\" is a ",
                               std::string(value(slot_row.get(), 0, 1)), " slot with plugin '",
                               std::string(value(slot_row.get(), 0, 0)),
                               "', not a logical slot with pgoutput: drop it "
                               "(SELECT pg_drop_replication_slot('",
                               slot, "')) or choose another with --slot"));
  }
  if (value(slot_row.get(), 0, 4) != "t") {
    return refuse(absl::StrCat("replication slot \"", slot,
                               "\" belongs to another database: choose another with --slot"));
  }
  if (value(slot_row.get(), 0, 3) == "lost") {
    if (!strict) {
      info.source_error =
          absl::StrCat("replication slot \"", slot,
                       "\" has been invalidated (wal_status lost: the server removed WAL it "
                       "still needed); drop it and the shards, and start again");
      WEIR_RETURN_IF_ERROR(identify(conninfo, info));
      return info;
    }
    return refuse(absl::StrCat("replication slot \"", slot,
                               "\" has been invalidated (wal_status lost: the server removed WAL "
                               "it still needed); drop it and the shards, and start again"));
  }
  if (is_null(slot_row.get(), 0, 2)) {
    return refuse(absl::StrCat("replication slot \"", slot, "\" has no confirmed position"));
  }
  WEIR_ASSIGN_OR_RETURN(info.slot_confirmed_lsn, parse_lsn(value(slot_row.get(), 0, 2)));

  WEIR_RETURN_IF_ERROR(identify(conninfo, info));
  return info;
}

absl::StatusOr<RelationDesc> load_relation_desc(const std::string& conninfo, uint32_t oid) {
  WEIR_ASSIGN_OR_RETURN(PgConnection conn, PgConnection::connect(conninfo, false, "catalog"));
  return load_relation_desc(conn.raw(), oid);
}

}  // namespace weir::sources::postgres
