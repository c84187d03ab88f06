// Reading a typed source's shard (PostgreSQL, MySQL) in tests: printed as COPY prints a table.

#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "weir/ingest/ingest.h"
#include "weir/persist/client.h"
#include "weir/sources/postgres/value.h"

namespace weir::ingest::testing {

// Shard `kind.table` at `as_of`, printed as COPY prints the table: each row as many times as its
// count (a negative count fails the test), sorted.
inline std::vector<std::string> shard_lines(persist::PersistClient& client, const std::string& kind,
                                            const std::string& table, uint64_t as_of) {
  std::vector<std::string> lines;
  auto schemas = read_schemas(client, kind);
  EXPECT_TRUE(schemas.ok()) << schemas.status();
  if (!schemas.ok() || !schemas->contains(table)) {
    ADD_FAILURE() << "no schema recorded for " << table;
    return lines;
  }
  auto desc = sources::postgres::RelationDesc::decode(schemas->at(table));
  EXPECT_TRUE(desc.ok()) << desc.status();
  if (!desc.ok()) return lines;
  auto reader = client.open_reader(shard_name(kind, table));
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return lines;
  auto updates = reader->snapshot(as_of);
  EXPECT_TRUE(updates.ok()) << updates.status();
  (void)reader->expire();
  if (!updates.ok()) return lines;
  std::map<std::string, int64_t> counts;
  for (const auto& u : *updates) counts[u.data] += u.diff;
  for (const auto& [row, count] : counts) {
    std::string line;
    if (!row.empty() && row.front() == '!') {
      line = row;  // A definite error.
    } else {
      auto printed = sources::postgres::print_row(*desc, row, line);
      EXPECT_TRUE(printed.ok()) << printed;
    }
    EXPECT_GE(count, 0) << table << ": " << line;
    for (int64_t i = 0; i < count; ++i) lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

}  // namespace weir::ingest::testing
