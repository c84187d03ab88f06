// Deterministic load generators with the shape of a database: tables with an initial snapshot,
// then a stream of changes (inserts, updates, deletes) at increasing offsets.
//
// Generators:
//   counter  one table `counter`: rows "id,value"; every change increments one row's value.
//   auction  tables `users` ("id,name,region"), `auctions` ("id,seller,item,reserve") and
//            `bids` ("id,bidder,auction,amount"), with inserts, updates and deletes.
//
// Offset 0 is the initial state (every table's snapshot rows); each offset o >= 1 changes at
// most one row of one table (an update is a retraction and an insertion at the same offset).
// Given the seed and the options, the state of every table at every offset is reproducible:
// that is what the tests compare the shards against. Each table evolves independently (an
// offset's table is a function of the seed and the offset alone), so one table's history can be
// replayed without the others.
//
// Thread safety: a Generator is a value; copies are independent.

#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"

namespace weir::sources::loadgen {

struct GeneratorOptions {
  std::string kind = "auction";  // "counter" or "auction".
  uint64_t seed = 42;
  // Snapshot rows per table: `scale` times each table's base size (counter: 1000; users: 100,
  // auctions: 300, bids: 1000), unless overridden by name.
  uint64_t scale = 1;
  std::map<std::string, uint64_t> snapshot_rows;
  // Fault injection: the first change of table `fault_table` at or after `fault_offset` is a
  // row the source cannot decode (a definite error). A change that changes nothing (to a row
  // deleted before) has no row to carry it: the fault goes to the next one.
  std::string fault_table;
  uint64_t fault_offset = 0;
};

// One row change at one offset.
struct RowChange {
  uint32_t table = 0;
  std::string row;
  int64_t diff = 0;
  bool bad = false;  // An undecodable row (fault injection).
};

class Generator {
 public:
  static absl::StatusOr<Generator> make(const GeneratorOptions& options);

  size_t num_tables() const { return tables_.size(); }
  const std::string& table_name(uint32_t table) const { return tables_[table].name; }
  // InvalidArgument naming the table if there is none by that name.
  absl::StatusOr<uint32_t> table_index(const std::string& name) const;
  uint64_t snapshot_rows(uint32_t table) const { return tables_[table].snapshot_rows; }
  // Row `id` of the initial snapshot of `table` (id < snapshot_rows(table)).
  std::string initial_row(uint32_t table, uint64_t id) const;

  // The table changed at `offset` (>= 1), whether or not the change is a no-op.
  uint32_t table_at(uint64_t offset) const;

  // The offset whose changes come next.
  uint64_t next_offset() const { return next_; }
  // Generates the changes at next_offset() for the tables with `wanted[table]` (all tables
  // advance their state regardless) and moves to the next offset. Returns true if the change at
  // that offset is the injected bad row, whether or not it was emitted (so that every copy of a
  // generator agrees on where the fault is, whichever copy emits it).
  bool step(const std::vector<bool>& wanted, std::vector<RowChange>& out);
  // Advances every table's state to `offset` without emitting anything.
  void skip_to(uint64_t offset);
  // Replays one table's history only (others stay behind; use on a dedicated copy):
  // appends the changes of `table` at offsets [next_offset(), end) with their offsets.
  void replay_table(uint32_t table, uint64_t end, std::vector<std::pair<uint64_t, RowChange>>& out);

  // The contents of `table` at `offset`: row -> count (every count is 1). For tests.
  std::map<std::string, int64_t> state_at(uint32_t table, uint64_t offset) const;

 private:
  struct Table {
    std::string name;
    uint64_t snapshot_rows = 0;
    uint32_t weight = 1;
    // State since offset 0.
    uint64_t next_id = 0;
    std::unordered_set<uint64_t> deleted;
    std::unordered_map<uint64_t, uint64_t> versions;  // Updated rows only.
  };
  std::string row(uint32_t table, uint64_t id, uint64_t version) const;
  // Returns true if the change is the injected bad row (emitted or not).
  bool change(uint32_t table, uint64_t offset, bool emit, std::vector<RowChange>* out);

  GeneratorOptions options_;
  std::vector<Table> tables_;
  uint32_t total_weight_ = 0;
  int64_t fault_table_ = -1;
  bool fault_done_ = false;
  uint64_t next_ = 1;
};

}  // namespace weir::sources::loadgen
