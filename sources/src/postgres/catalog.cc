// Catalog queries for RelationDesc (see catalog.h).

#include "postgres/catalog.h"

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"

namespace weir::sources::postgres {
namespace {

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

std::string last_error(PGconn* conn) {
  std::string message = PQerrorMessage(conn);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
    message.pop_back();
  }
  return message;
}

// Runs `sql` with text parameters; a query that fails is Unavailable (the connection) unless
// the server reported an SQL error, which is returned as InvalidArgument with its message.
absl::StatusOr<Result> query(PGconn* conn, const char* sql, const std::vector<std::string>& args,
                             const std::string& context) {
  std::vector<const char*> values;
  values.reserve(args.size());
  for (const std::string& a : args) {
    values.push_back(a.c_str());
  }
  Result r(PQexecParams(conn, sql, static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                        nullptr, 0));
  if (r == nullptr || PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
    const char* sqlstate = r == nullptr ? nullptr : PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
    const std::string message =
        absl::StrCat(context, ": ",
                     r == nullptr ? last_error(conn) : std::string(PQresultErrorMessage(r.get())));
    if (sqlstate == nullptr || PQstatus(conn) != CONNECTION_OK) {
      return absl::UnavailableError(message);
    }
    return absl::InvalidArgumentError(message);
  }
  return r;
}

struct TypeRow {
  char typtype = 'b';
  uint32_t basetype = 0;
  uint32_t elem = 0;
  char delimiter = ',';
  bool is_array = false;
};

absl::StatusOr<TypeRow> load_type_row(PGconn* conn, uint32_t oid, const std::string& context) {
  auto r = query(conn,
                 "SELECT t.typtype, t.typbasetype, t.typelem, t.typdelim, "
                 "t.typinput = 'pg_catalog.array_in'::pg_catalog.regproc "
                 "FROM pg_catalog.pg_type t WHERE t.oid = $1::pg_catalog.oid",
                 {std::to_string(oid)}, context);
  if (!r.ok()) {
    return r.status();
  }
  PGresult* res = r->get();
  if (PQntuples(res) != 1) {
    return absl::NotFoundError(absl::StrCat(context, ": type oid ", oid, " does not exist"));
  }
  TypeRow row;
  row.typtype = PQgetvalue(res, 0, 0)[0];
  row.basetype = static_cast<uint32_t>(std::stoul(PQgetvalue(res, 0, 1)));
  row.elem = static_cast<uint32_t>(std::stoul(PQgetvalue(res, 0, 2)));
  row.delimiter = PQgetvalue(res, 0, 3)[0];
  row.is_array = PQgetvalue(res, 0, 4)[0] == 't';
  return row;
}

class TypeResolver {
 public:
  TypeResolver(PGconn* conn, std::string context) : conn_(conn), context_(std::move(context)) {}

  absl::StatusOr<ColumnType> resolve(uint32_t oid) {
    if (auto it = cache_.find(oid); it != cache_.end()) {
      return it->second;
    }
    auto type = resolve_uncached(oid, 0);
    if (type.ok()) {
      cache_.emplace(oid, *type);
    }
    return type;
  }

 private:
  absl::StatusOr<ColumnType> resolve_uncached(uint32_t oid, int depth) {
    if (depth > 32) {
      return absl::FailedPreconditionError(
          absl::StrCat(context_, ": type oid ", oid, ": domains nested too deep"));
    }
    auto row = load_type_row(conn_, oid, context_);
    if (!row.ok()) {
      return row.status();
    }
    if (row->typtype == 'd') {
      return resolve_uncached(row->basetype, depth + 1);
    }
    if (row->is_array && row->elem != 0) {
      auto element = resolve_uncached(row->elem, depth + 1);
      if (!element.ok()) {
        return element.status();
      }
      auto element_row = load_type_row(conn_, row->elem, context_);
      if (!element_row.ok()) {
        return element_row.status();
      }
      ColumnType type;
      type.is_array = true;
      type.kind = element->is_array ? TypeKind::kText : element->kind;
      type.delimiter = element_row->delimiter;
      return type;
    }
    const ColumnType builtin = builtin_column_type(oid);
    return builtin.is_array ? ColumnType{} : builtin;
  }

  PGconn* conn_;
  std::string context_;
  std::unordered_map<uint32_t, ColumnType> cache_;
};

}  // namespace

absl::StatusOr<ColumnType> load_column_type(PGconn* conn, uint32_t type_oid) {
  TypeResolver resolver(conn, absl::StrCat("type oid ", type_oid));
  return resolver.resolve(type_oid);
}

absl::StatusOr<RelationDesc> load_relation_desc(PGconn* conn, uint32_t table_oid) {
  const std::string oid_text = std::to_string(table_oid);
  std::string context = absl::StrCat("table oid ", table_oid);
  auto rel = query(conn,
                   "SELECT n.nspname, c.relname, c.relkind FROM pg_catalog.pg_class c "
                   "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
                   "WHERE c.oid = $1::pg_catalog.oid",
                   {oid_text}, context);
  if (!rel.ok()) {
    return rel.status();
  }
  if (PQntuples(rel->get()) != 1) {
    return absl::NotFoundError(absl::StrCat(context, ": no such table"));
  }
  RelationDesc desc;
  desc.schema = PQgetvalue(rel->get(), 0, 0);
  desc.table = PQgetvalue(rel->get(), 0, 1);
  desc.table_oid = table_oid;
  context = absl::StrCat("table ", desc.qualified_name(), " (oid ", table_oid, ")");
  const char relkind = PQgetvalue(rel->get(), 0, 2)[0];
  if (relkind != 'r' && relkind != 'p') {
    return absl::FailedPreconditionError(
        absl::StrCat(context, ": not a table (relkind '", std::string(1, relkind), "')"));
  }
  auto cols = query(conn,
                    "SELECT a.attname, a.atttypid, a.atttypmod, a.attnotnull, "
                    "pg_catalog.format_type(a.atttypid, a.atttypmod) "
                    "FROM pg_catalog.pg_attribute a "
                    "WHERE a.attrelid = $1::pg_catalog.oid AND a.attnum > 0 "
                    // Generated columns are neither in pgoutput's rows nor COPY-able.
                    "AND NOT a.attisdropped AND a.attgenerated = '' ORDER BY a.attnum",
                    {oid_text}, context);
  if (!cols.ok()) {
    return cols.status();
  }
  TypeResolver resolver(conn, context);
  PGresult* res = cols->get();
  const int n = PQntuples(res);
  desc.columns.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    Column c;
    c.name = PQgetvalue(res, i, 0);
    c.type_oid = static_cast<uint32_t>(std::stoul(PQgetvalue(res, i, 1)));
    c.type_modifier = static_cast<int32_t>(std::stol(PQgetvalue(res, i, 2)));
    c.nullable = PQgetvalue(res, i, 3)[0] != 't';
    c.type_name = PQgetvalue(res, i, 4);
    auto type = resolver.resolve(c.type_oid);
    if (!type.ok()) {
      return absl::Status(type.status().code(),
                          absl::StrCat(type.status().message(), " (column \"", c.name, "\")"));
    }
    c.type = *type;
    desc.columns.push_back(std::move(c));
  }
  return desc;
}

absl::StatusOr<RelationDesc> load_relation_desc(PGconn* conn, std::string_view qualified_name) {
  const std::string name(qualified_name);
  auto r = query(conn, "SELECT $1::pg_catalog.regclass::pg_catalog.oid", {name},
                 absl::StrCat("table ", name));
  if (!r.ok()) {
    if (absl::IsInvalidArgument(r.status())) {
      return absl::NotFoundError(r.status().message());
    }
    return r.status();
  }
  return load_relation_desc(conn, static_cast<uint32_t>(std::stoul(PQgetvalue(r->get(), 0, 0))));
}

}  // namespace weir::sources::postgres
