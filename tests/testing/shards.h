// make_shard(): a persist shard with a few rows, for holds and views to find. Header-only: the
// binaries that include it link weir_persist.

#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "weir/persist/client.h"

namespace weir::testing {

// The shard `name` with `rows` rows, "row0", "row1", ... at times 0, 1, ... (its upper: rows).
inline void make_shard(persist::PersistClient& client, const std::string& name, uint64_t rows = 1) {
  persist::WriteHandle writer = client.open_writer(name).value();
  std::vector<persist::Update> updates;
  for (uint64_t t = 0; t < rows; ++t) updates.push_back({"row" + std::to_string(t), t, 1});
  ASSERT_TRUE(writer.compare_and_append(updates, persist::Frontier(0), persist::Frontier(rows))
                  ->is_appended());
  ASSERT_TRUE(writer.expire().ok());
}

}  // namespace weir::testing
