// `<kind>.schemas`: what a typed source records beside its shards, one row "key\tvalue" per key:
// each table's relation description (key: the table, as its shard is named), and keys of the
// source's own (is_source_key): PostgreSQL's "timeline", and keys starting with '@'.
//
// Thread safety: functions of a PersistClient, which is thread-safe.

#pragma once

#include <map>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "weir/persist/client.h"

namespace weir::ingest::internal {

// Whether `key` is a source's own, not a table's.
inline bool is_source_key(std::string_view key) {
  return key == "timeline" || (!key.empty() && key.front() == '@');
}

// Every key of `<kind>.schemas` with its value.
absl::StatusOr<std::map<std::string, std::string>> read_schema_rows(persist::PersistClient& client,
                                                                    const std::string& kind);

// Records `desc` as `table`'s value (or a source key's), replacing the one recorded (a
// compare-and-set append at the shard's upper; retried if another run moved it).
absl::Status record_schema(persist::PersistClient& client, const std::string& kind,
                           const std::string& table, const std::string& desc);

}  // namespace weir::ingest::internal
