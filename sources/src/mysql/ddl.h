// What a statement of the binlog (a QUERY event: DDL) does to the source's tables.
//
// Thread safety: free functions.

#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weir::sources::mysql {

// A DDL statement's effect on the tables it names, as far as weir needs to know it.
struct DdlTargets {
  enum class Kind { kOther, kTruncate, kDrop, kRename, kReplace, kAlter };
  Kind kind = Kind::kOther;
  bool renames = false;  // ALTER TABLE ... RENAME TO.
  std::vector<std::pair<std::string, std::string>> tables;  // (database, table).
};

// What a DDL statement does to which tables: TRUNCATE, DROP TABLE, RENAME TABLE, CREATE OR
// REPLACE TABLE, ALTER TABLE (with or without RENAME); kOther for anything else (its tables are
// not listed). Unqualified names are in `database` (the statement's default database).
DdlTargets ddl_targets(std::string_view query, std::string_view database);

// The lower-case first `words` words of a statement, comments skipped ("commit").
std::string statement_head(std::string_view query, size_t words);

// Whether `query` names `table` anywhere as a word (quoted or not, any case).
bool mentions(std::string_view query, std::string_view table);

}  // namespace weir::sources::mysql
