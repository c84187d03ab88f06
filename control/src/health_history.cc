#include "health_history.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"

#include "weir/status.h"

namespace weir::control::internal {

absl::StatusOr<std::unique_ptr<HealthHistory>> HealthHistory::open(
    std::shared_ptr<persist::PersistClient> client, uint64_t execution,
    std::shared_ptr<persist::BackgroundMaintenance> maintenance, std::function<absl::Time()> clock,
    std::chrono::milliseconds retention, size_t per_name) {
  WEIR_ASSIGN_OR_RETURN(std::shared_ptr<ingest::StatusShard> shard,
                        ingest::StatusShard::open_log(client, kHealthHistoryShard, execution,
                                                      std::move(maintenance), clock));
  std::unique_ptr<HealthHistory> history(
      new HealthHistory(shard, std::move(clock), retention, per_name));
  // What the predecessors left: read once, at the upper the claim left (only this execution
  // appends from here on; a later one that claims it fences the retractions below).
  WEIR_ASSIGN_OR_RETURN(const persist::ShardDescription described,
                        client->describe(kHealthHistoryShard));
  std::vector<persist::Update> rows;
  if (!described.upper.is_empty() && described.upper.time() > 0) {
    WEIR_ASSIGN_OR_RETURN(auto reader,
                          client->open_reader(kHealthHistoryShard, "replica health history index"));
    absl::StatusOr<std::vector<persist::Update>> snapshot =
        reader.snapshot(described.upper.time() - 1);
    (void)reader.expire();
    WEIR_RETURN_IF_ERROR(snapshot.status());
    rows = *std::move(snapshot);
  }
  std::map<std::string, int64_t> consolidated;
  for (persist::Update& row : rows) consolidated[std::move(row.data)] += row.diff;
  rows.clear();

  weir::MutexLock lock(history->mu_);
  history->execution_ = execution;
  std::vector<std::pair<std::string, int64_t>> changes;
  std::vector<std::pair<std::string, Entry>> kept;
  for (auto& [row, count] : consolidated) {
    if (count == 0) continue;
    std::optional<HealthTransition> t = parse_health_history_row(row);
    // Not a transition, a retraction of nothing, or one that claims an execution not before this
    // one (which claimed the shard before writing anything): the replica owns the relation.
    if (!t || count < 0 || t->execution >= execution) {
      changes.emplace_back(row, -count);
      continue;
    }
    kept.emplace_back(t->name, Entry{t->execution, t->seq, t->at_ms, row, count});
  }
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
    return std::tie(a.second.execution, a.second.seq) < std::tie(b.second.execution, b.second.seq);
  });
  for (auto& [name, entry] : kept) history->add(name, std::move(entry));
  history->retain(changes);
  WEIR_RETURN_IF_ERROR(history->append(changes));
  return history;
}

void HealthHistory::add(const std::string& name, Entry entry) {
  times_.insert(entry.at_ms);
  by_name_[name].push_back(std::move(entry));
}

void HealthHistory::retract(const Entry& entry,
                            std::vector<std::pair<std::string, int64_t>>& changes) {
  changes.emplace_back(entry.row, -entry.count);
  times_.erase(times_.find(entry.at_ms));
}

void HealthHistory::retain(std::vector<std::pair<std::string, int64_t>>& changes) {
  // The per-name cap: the oldest go first.
  for (auto& [name, entries] : by_name_) {
    while (entries.size() > per_name_) {
      retract(entries.front(), changes);
      entries.pop_front();
    }
  }
  // The age: only when the oldest row is past it is every row looked at (a clock that went back
  // leaves rows out of time order).
  const int64_t cutoff = cutoff_ms();
  if (!times_.empty() && *times_.begin() < cutoff) {
    // A loop, not erase_if: clang's thread-safety analysis does not see a lambda run under mu_.
    for (auto& [name, entries] : by_name_) {
      for (auto it = entries.begin(); it != entries.end();) {
        if (it->at_ms >= cutoff) {
          ++it;
          continue;
        }
        retract(*it, changes);
        it = entries.erase(it);
      }
    }
  }
  std::erase_if(by_name_, [](const auto& name) { return name.second.empty(); });
}

absl::Status HealthHistory::append(const std::vector<std::pair<std::string, int64_t>>& changes) {
  if (changes.empty()) return absl::OkStatus();
  // After an error other than a fence the shard keeps the change and appends it first next time:
  // the index already holds it.
  return shard_->append(changes).status();
}

absl::Status HealthHistory::record(HealthTransition transition) {
  weir::MutexLock lock(mu_);
  transition.execution = execution_;
  transition.seq = next_seq_++;
  transition.at_ms = now_ms();
  Entry entry{transition.execution, transition.seq, transition.at_ms,
              health_history_row(transition), 1};
  std::vector<std::pair<std::string, int64_t>> changes = {{entry.row, 1}};
  add(transition.name, std::move(entry));
  retain(changes);
  return append(changes);
}

absl::Status HealthHistory::sweep() {
  weir::MutexLock lock(mu_);
  if (times_.empty() || *times_.begin() >= cutoff_ms()) {
    return absl::OkStatus();
  }
  std::vector<std::pair<std::string, int64_t>> changes;
  retain(changes);
  return append(changes);
}

}  // namespace weir::control::internal
