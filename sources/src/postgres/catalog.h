// Reading a table's RelationDesc from PostgreSQL's catalogs (pg_class, pg_attribute, pg_type).
//
// Columns in attnum order, dropped and system columns skipped. Types resolve as value.h's
// ColumnType says: a domain to its base type (recursively), an array to its element's kind
// and delimiter (an element that is itself an array, through a domain, is text), an enum or any
// type weir does not know to text.
//
// Thread safety: uses `conn` only from the calling thread; the caller owns the connection and
// must not run another query on it concurrently.

#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include <libpq-fe.h>

#include "weir/sources/postgres/value.h"

namespace weir::sources::postgres {

// The description of the table with OID `table_oid`. Errors name the table: NotFound when there
// is no such table, FailedPrecondition when it is not an ordinary or partitioned table,
// Unavailable when a query fails (connection lost).
absl::StatusOr<RelationDesc> load_relation_desc(PGconn* conn, uint32_t table_oid);

// The same by name, "schema.table" or "table" (resolved by the search path as regclass does;
// quote identifiers that need it, as in SQL).
absl::StatusOr<RelationDesc> load_relation_desc(PGconn* conn, std::string_view qualified_name);

// How values of type `type_oid` decode (for a pgoutput Type message or a column that a
// Relation message adds).
absl::StatusOr<ColumnType> load_column_type(PGconn* conn, uint32_t type_oid);

}  // namespace weir::sources::postgres
