// Reading a MySQL-family table's columns from information_schema.
//
// load_columns reads information_schema.COLUMNS in ORDINAL_POSITION order (invisible columns
// included: row images carry them) into MysqlColumns (types.h): enum and set elements are parsed
// from COLUMN_TYPE, a bit's width too, and a longtext column is JSON (MariaDB's JSON type) when
// information_schema.CHECK_CONSTRAINTS has json_valid(`column`) for it. Names compare exactly
// (byte for byte), whatever the collation of information_schema.
//
// Thread safety: uses `conn` only from the calling thread, for the duration of the call.

#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "mysql/connection.h"

#include "weir/sources/mysql/types.h"

namespace weir::sources::mysql {

// The columns of `database`.`table`. Errors name the table: NotFound when there is no such
// table, FailedPrecondition when it is a view or anything else but a base table (a sequence, a
// system-versioned table), and the connection's errors (connection.h) when a query fails.
absl::StatusOr<std::vector<MysqlColumn>> load_columns(MysqlConnection& conn,
                                                      std::string_view database,
                                                      std::string_view table);

// The names of the base tables of `database`, sorted byte-wise. None (an empty vector) when the
// database does not exist or has no tables.
absl::StatusOr<std::vector<std::string>> list_base_tables(MysqlConnection& conn,
                                                          std::string_view database);

// The elements of an enum or set COLUMN_TYPE ("enum('a','it''s','b\\c')" gives a, it's, b\c):
// single-quoted, a quote doubled or backslash-escaped, with MySQL's backslash escapes (\0 \n \r
// \t \b \Z; \% and \_ keep their backslash; any other character stands for itself).
// InvalidArgument when `column_type` is not enum(...) or set(...) of quoted strings.
absl::StatusOr<std::vector<std::string>> parse_elements(std::string_view column_type);

}  // namespace weir::sources::mysql
