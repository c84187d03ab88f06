#include "weir/sources/loadgen/generator.h"

#include "absl/strings/str_cat.h"

namespace weir::sources::loadgen {
namespace {

uint64_t mix(uint64_t seed, uint64_t a, uint64_t b = 0) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ULL ^ (a + 0x632be59bd9b4e019ULL) * 0xbf58476d1ce4e5b9ULL ^
               (b + 0x8cb92ba72f3d8dd7ULL) * 0x94d049bb133111ebULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr const char* kRegions[] = {"eu", "us", "apac", "latam"};
constexpr const char* kItems[] = {"lamp",   "chair",  "bike", "clock",
                                  "guitar", "camera", "vase", "rug"};

}  // namespace

absl::StatusOr<Generator> Generator::make(const GeneratorOptions& options) {
  Generator g;
  g.options_ = options;
  if (options.kind == "counter") {
    g.tables_.push_back(Table{"counter", 1000 * options.scale, 1, 0, {}, {}});
  } else if (options.kind == "auction") {
    g.tables_.push_back(Table{"users", 100 * options.scale, 1, 0, {}, {}});
    g.tables_.push_back(Table{"auctions", 300 * options.scale, 2, 0, {}, {}});
    g.tables_.push_back(Table{"bids", 1000 * options.scale, 6, 0, {}, {}});
  } else {
    return absl::InvalidArgumentError("unknown load generator '" + options.kind +
                                      "': expected 'counter' or 'auction'");
  }
  for (const auto& [name, rows] : options.snapshot_rows) {
    auto index = g.table_index(name);
    if (!index.ok()) return index.status();
    g.tables_[*index].snapshot_rows = rows;
  }
  if (!options.fault_table.empty()) {
    auto index = g.table_index(options.fault_table);
    if (!index.ok()) return index.status();
    g.fault_table_ = *index;
  }
  for (auto& t : g.tables_) {
    t.next_id = t.snapshot_rows;
    g.total_weight_ += t.weight;
  }
  return g;
}

absl::StatusOr<uint32_t> Generator::table_index(const std::string& name) const {
  for (uint32_t i = 0; i < tables_.size(); ++i) {
    if (tables_[i].name == name) return i;
  }
  std::string names;
  for (const auto& t : tables_) names += (names.empty() ? "" : ", ") + t.name;
  return absl::InvalidArgumentError("load generator '" + options_.kind + "' has no table '" + name +
                                    "' (it has: " + names + ")");
}

std::string Generator::row(uint32_t table, uint64_t id, uint64_t version) const {
  const uint64_t h = mix(options_.seed, (uint64_t{table} << 40) ^ id, version);
  if (options_.kind == "counter") return absl::StrCat(id, ",", version);
  switch (table) {
    case 0:  // users
      return absl::StrCat(id, ",user-", absl::Hex(h & 0xfffff), ",", kRegions[(h >> 20) % 4]);
    case 1:  // auctions
      return absl::StrCat(id, ",", (h >> 8) % std::max<uint64_t>(1, tables_[0].snapshot_rows), ",",
                          kItems[h % 8], ",", 10 + (h >> 32) % 990);
    default:  // bids
      return absl::StrCat(id, ",", (h >> 8) % std::max<uint64_t>(1, tables_[0].snapshot_rows), ",",
                          (h >> 24) % std::max<uint64_t>(1, tables_[1].snapshot_rows), ",",
                          1 + (h >> 40) % 5000);
  }
}

std::string Generator::initial_row(uint32_t table, uint64_t id) const { return row(table, id, 0); }

uint32_t Generator::table_at(uint64_t offset) const {
  uint32_t pick = static_cast<uint32_t>(mix(options_.seed, 0x7ab1e, offset) % total_weight_);
  for (uint32_t t = 0; t < tables_.size(); ++t) {
    if (pick < tables_[t].weight) return t;
    pick -= tables_[t].weight;
  }
  return 0;
}

bool Generator::change(uint32_t table, uint64_t offset, bool emit, std::vector<RowChange>* out) {
  Table& t = tables_[table];
  const uint64_t h = mix(options_.seed, offset, table);
  // The fault goes to the first change at or after its offset that changes something: a no-op
  // (below) has no row to carry it, and taking the fault with it lost the definite error.
  const bool bad = !fault_done_ && static_cast<int64_t>(table) == fault_table_ &&
                   offset >= options_.fault_offset;
  // counter: updates only; auction: 50% inserts, 35% updates, 15% deletes.
  const uint64_t op = options_.kind == "counter" ? 50 : h % 100;
  if (op < 50 && options_.kind != "counter") {
    if (bad) fault_done_ = true;
    const uint64_t id = t.next_id++;
    if (emit) out->push_back(RowChange{table, row(table, id, 0), 1, bad});
    return bad;
  }
  if (t.next_id == 0) return false;
  const uint64_t id = (h >> 8) % t.next_id;
  if (t.deleted.contains(id)) return false;  // A change to a deleted row changes nothing.
  if (bad) fault_done_ = true;
  auto it = t.versions.find(id);
  const uint64_t version = it == t.versions.end() ? 0 : it->second;
  if (emit) out->push_back(RowChange{table, row(table, id, version), -1, false});
  if (op < 85) {
    t.versions[id] = version + 1;
    if (emit) out->push_back(RowChange{table, row(table, id, version + 1), 1, bad});
  } else {
    t.deleted.insert(id);
    t.versions.erase(id);
    if (emit && bad) out->back().bad = true;
  }
  return bad;
}

bool Generator::step(const std::vector<bool>& wanted, std::vector<RowChange>& out) {
  const uint32_t table = table_at(next_);
  const bool bad = change(table, next_, table < wanted.size() && wanted[table], &out);
  ++next_;
  return bad;
}

void Generator::skip_to(uint64_t offset) {
  std::vector<bool> none;
  std::vector<RowChange> ignored;
  while (next_ < offset) step(none, ignored);
}

void Generator::replay_table(uint32_t table, uint64_t end,
                             std::vector<std::pair<uint64_t, RowChange>>& out) {
  std::vector<RowChange> changes;
  for (; next_ < end; ++next_) {
    if (table_at(next_) != table) continue;
    changes.clear();
    change(table, next_, true, &changes);
    for (auto& c : changes) out.emplace_back(next_, std::move(c));
  }
}

std::map<std::string, int64_t> Generator::state_at(uint32_t table, uint64_t offset) const {
  Generator g = *this;
  // Start over from offset 0 with this generator's options.
  g = *Generator::make(options_);
  std::map<std::string, int64_t> state;
  for (uint64_t id = 0; id < g.tables_[table].snapshot_rows; ++id)
    state[g.initial_row(table, id)] += 1;
  std::vector<std::pair<uint64_t, RowChange>> changes;
  g.replay_table(table, offset + 1, changes);
  for (auto& [o, c] : changes) {
    int64_t& count = state[c.row];
    count += c.diff;
    if (count == 0) state.erase(c.row);
  }
  return state;
}

}  // namespace weir::sources::loadgen
