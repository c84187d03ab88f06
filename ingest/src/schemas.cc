#include "schemas.h"

#include <limits>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"

#include "weir/status.h"

namespace weir::ingest {

using persist::Frontier;

namespace internal {

// Every key of `<kind>.schemas` (tables and the source's own keys) with its value.
absl::StatusOr<std::map<std::string, std::string>> read_schema_rows(persist::PersistClient& client,
                                                                    const std::string& kind) {
  std::map<std::string, std::string> schemas;
  WEIR_ASSIGN_OR_RETURN(auto reader, client.open_reader(kind + ".schemas", "schemas"));
  absl::Cleanup expire = [&reader] { (void)reader.expire(); };
  WEIR_ASSIGN_OR_RETURN(const Frontier upper, reader.fetch_recent_upper());
  if (upper == Frontier(0)) return schemas;
  const uint64_t as_of = upper.is_empty() ? std::numeric_limits<uint64_t>::max() : upper.time() - 1;
  WEIR_ASSIGN_OR_RETURN(const auto rows, reader.snapshot(as_of));
  std::map<std::string, int64_t> counts;
  for (const auto& row : rows) counts[row.data] += row.diff;
  for (const auto& [data, count] : counts) {
    if (count <= 0) continue;
    const size_t tab = data.find('\t');
    if (tab == std::string::npos) continue;
    schemas[data.substr(0, tab)] = data.substr(tab + 1);
  }
  return schemas;
}

// Records `desc` as `table`'s description, replacing the one recorded (a compare-and-set
// append at the shard's upper; retried if another run moved it).
absl::Status record_schema(persist::PersistClient& client, const std::string& kind,
                           const std::string& table, const std::string& desc) {
  WEIR_ASSIGN_OR_RETURN(auto writer, client.open_writer(kind + ".schemas", "schemas"));
  absl::Cleanup expire = [&writer] { (void)writer.expire(); };
  for (int attempt = 0; attempt < 20; ++attempt) {
    WEIR_ASSIGN_OR_RETURN(auto recorded, read_schema_rows(client, kind));
    auto it = recorded.find(table);
    if (it != recorded.end() && it->second == desc) return absl::OkStatus();
    WEIR_ASSIGN_OR_RETURN(const Frontier upper, writer.fetch_recent_upper());
    if (upper.is_empty()) return absl::InternalError(kind + ".schemas is sealed");
    const uint64_t t = upper.time();
    std::vector<persist::Update> rows;
    if (it != recorded.end()) rows.push_back({absl::StrCat(table, "\t", it->second), t, -1});
    rows.push_back({absl::StrCat(table, "\t", desc), t, 1});
    WEIR_ASSIGN_OR_RETURN(const auto result,
                          writer.compare_and_append(rows, Frontier(t), Frontier(t + 1)));
    if (result.is_appended()) return absl::OkStatus();
  }
  return absl::AbortedError("could not record the schema of " + table + ": too much contention");
}

}  // namespace internal

absl::StatusOr<std::map<std::string, std::string>> read_schemas(persist::PersistClient& client,
                                                                const std::string& kind) {
  WEIR_ASSIGN_OR_RETURN(auto schemas, internal::read_schema_rows(client, kind));
  for (auto it = schemas.begin(); it != schemas.end();) {
    it = internal::is_source_key(it->first) ? schemas.erase(it) : std::next(it);
  }
  return schemas;
}

}  // namespace weir::ingest
