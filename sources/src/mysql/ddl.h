// What a statement of the binlog (a QUERY event) does to the source's tables.
//
// The binlog of a ROW-format server carries data changes as row events; a QUERY event is DDL,
// transaction control, or DML a session logged as a statement (binlog_format=STATEMENT or
// MIXED in that session). weir decides from the statement's text alone, at its own position (not
// from the catalog as it is when the event is read, which may be later), and fails closed: a
// statement that names an ingested table and is not known to leave its rows and columns as they
// are is a definite error of that table. (A statement-logged one that changes a table without
// naming it — through a view, a trigger, a stored function — is not seen: docs/ingest.md.)
// SET STATEMENT ... FOR s is s; ALTER IGNORE is never harmless (a unique key drops rows); an
// ENGINE other than InnoDB is not either.
//
// Parsing: comments are skipped except executable ones (/*! ... */, /*M! ... */) for this server
// version (MariaDB 10.11: a version number up to 101199), whose text counts; "-- " needs its
// space, as the server's; `quoted` and "quoted" names (ANSI_QUOTES) are identifiers; 'strings' are
// skipped. Partitioning options (PARTITION BY, PARTITIONS, REMOVE PARTITIONING) start an ALTER
// clause of their own, with or without a comma.
//
// Thread safety: free functions.

#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weir::sources::mysql {

// A statement's effect on the tables it names, as far as weir needs to know it.
struct DdlTargets {
  enum class Kind {
    kOther,         // Anything below does not match: see harmless.
    kTruncate,      // TRUNCATE [TABLE] t
    kDrop,          // DROP TABLE [IF EXISTS] t, ...
    kRename,        // RENAME TABLE[S] a TO b, ...: every name on either side
    kReplace,       // CREATE OR REPLACE TABLE t
    kAlter,         // ALTER [ONLINE|IGNORE] TABLE t ...: see renames and harmless
    kDropDatabase,  // DROP DATABASE|SCHEMA [IF EXISTS] d: `database` is d
  };
  Kind kind = Kind::kOther;
  bool renames = false;  // kAlter: ... RENAME [TO|AS] u.
  // kAlter: every clause keeps the table's rows and columns as they are (indexes, comments,
  // defaults, engine options, ADD PARTITION, ...). kOther: the statement is one that changes no
  // table's rows or columns (CREATE INDEX, CREATE TRIGGER, GRANT, ANALYZE TABLE, ...), or is
  // transaction control (BEGIN, COMMIT, SAVEPOINT, RELEASE SAVEPOINT).
  bool harmless = false;
  std::vector<std::pair<std::string, std::string>> tables;  // (database, table).
  std::string database;                                     // kDropDatabase.
};

// What a statement does to which tables. Unqualified names are in `database` (the statement's
// default database).
DdlTargets ddl_targets(std::string_view query, std::string_view database);

// The lower-case first `words` words of a statement, comments skipped (executable ones read):
// "commit", "rollback to".
std::string statement_head(std::string_view query, size_t words);

// Whether `query` names `table` anywhere as a word (quoted or not, any case).
bool mentions(std::string_view query, std::string_view table);

}  // namespace weir::sources::mysql
