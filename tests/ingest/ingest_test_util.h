// What the ingest tests share: a fresh directory per test, the options of a small auction run,
// and a shard's contents at a time.

#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "weir/ingest/ingest.h"
#include "weir/persist/client.h"

namespace weir::ingest::testing {

// An empty directory under the temporary one, named after the test and this process.
inline std::filesystem::path fresh_dir(const std::string& name) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("weir-ingest-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The auction generator at scale 2, as fast as it goes, into `dir`, keeping every offset readable
// (the tests read the shards at every offset from 0 on).
inline IngestOptions options_for(const std::filesystem::path& dir, size_t workers, uint64_t until) {
  IngestOptions options;
  options.location = persist::PersistLocation::in_directory(dir.string());
  options.workers.workers = workers;
  options.source.generator.kind = "auction";
  options.source.generator.scale = 2;
  options.source.rate = 0;
  options.source.until = until;
  options.compaction_window = std::numeric_limits<uint64_t>::max();
  return options;
}

// `shard` at `as_of`, consolidated: row -> count (empty, with a test failure, if unreadable).
inline std::map<std::string, int64_t> shard_at(persist::PersistClient& client,
                                               const std::string& shard, uint64_t as_of) {
  std::map<std::string, int64_t> contents;
  auto reader = client.open_reader(shard);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return contents;
  auto updates = reader->snapshot(as_of);
  EXPECT_TRUE(updates.ok()) << updates.status();
  if (!updates.ok()) return contents;
  for (const auto& u : *updates) contents[u.data] += u.diff;
  (void)reader->expire();
  return contents;
}

}  // namespace weir::ingest::testing
