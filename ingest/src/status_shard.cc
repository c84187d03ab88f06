#include "weir/ingest/status_shard.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "hold.h"

#include "weir/check.h"
#include "weir/status.h"

namespace weir::ingest {

using persist::Frontier;

namespace internal {

absl::StatusOr<std::shared_ptr<persist::SinceHandle>> take_over_hold(
    persist::PersistClient& client, const std::string& shard, const persist::ShardId& shard_id,
    uint64_t incarnation, const std::string& purpose) {
  WEIR_ASSIGN_OR_RETURN(const auto reader_id,
                        persist::CriticalReaderId::parse("c" + shard_id.str().substr(1)));
  WEIR_ASSIGN_OR_RETURN(auto hold, client.open_critical_since(shard, reader_id, purpose));
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (hold.epoch() == incarnation) {
      return std::make_shared<persist::SinceHandle>(std::move(hold));
    }
    if (hold.epoch() > incarnation) {
      return absl::FailedPreconditionError(
          absl::StrCat("shard ", shard, ": its hold (", purpose, ") is held by incarnation ",
                       hold.epoch(), ", a later one than this (", incarnation, ")"));
    }
    // On a mismatch, hold.epoch() is the current one: look again.
    WEIR_RETURN_IF_ERROR(
        hold.compare_and_downgrade_since(hold.epoch(), incarnation, hold.since()).status());
  }
  return absl::AbortedError(
      absl::StrCat("shard ", shard, ": could not take over its hold (", purpose, ")"));
}

}  // namespace internal

StatusShard::StatusShard(std::shared_ptr<persist::PersistClient> client, std::string name,
                         uint64_t incarnation, persist::WriteHandle writer,
                         std::shared_ptr<persist::SinceHandle> hold,
                         std::shared_ptr<persist::BackgroundMaintenance> maintenance, bool log,
                         std::function<absl::Time()> clock)
    : client_(std::move(client)),
      name_(std::move(name)),
      incarnation_(incarnation),
      hold_(std::move(hold)),
      maintenance_(std::move(maintenance)),
      log_(log),
      clock_(std::move(clock)),
      writer_(std::move(writer)) {}

uint64_t StatusShard::now_ms() const {
  const int64_t ms = absl::ToUnixMillis(clock_());
  return ms < 0 ? 0 : static_cast<uint64_t>(ms);
}

absl::StatusOr<std::shared_ptr<StatusShard>> StatusShard::open(
    std::shared_ptr<persist::PersistClient> client, const std::string& name, uint64_t incarnation,
    std::shared_ptr<persist::BackgroundMaintenance> maintenance) {
  return open(std::move(client), name, incarnation, std::move(maintenance), /*log=*/false,
              [] { return absl::Now(); });
}

absl::StatusOr<std::shared_ptr<StatusShard>> StatusShard::open_log(
    std::shared_ptr<persist::PersistClient> client, const std::string& name, uint64_t incarnation,
    std::shared_ptr<persist::BackgroundMaintenance> maintenance,
    std::function<absl::Time()> clock) {
  return open(std::move(client), name, incarnation, std::move(maintenance), /*log=*/true,
              std::move(clock));
}

absl::StatusOr<std::shared_ptr<StatusShard>> StatusShard::open(
    std::shared_ptr<persist::PersistClient> client, const std::string& name, uint64_t incarnation,
    std::shared_ptr<persist::BackgroundMaintenance> maintenance, bool log,
    std::function<absl::Time()> clock) {
  WEIR_ASSIGN_OR_RETURN(
      auto writer,
      client->open_writer(name, absl::StrCat("ingest health incarnation ", incarnation)));
  // First the hold: from here on no earlier incarnation can take the shard (back).
  auto hold = internal::take_over_hold(*client, name, writer.shard_id(), incarnation,
                                       "ingest status fencing");
  if (!hold.ok()) {
    (void)writer.expire();
    return hold.status();
  }
  std::shared_ptr<StatusShard> shard(new StatusShard(client, name, incarnation, std::move(writer),
                                                     *std::move(hold), std::move(maintenance), log,
                                                     std::move(clock)));
  WEIR_RETURN_IF_ERROR(shard->claim());
  return shard;
}

absl::Status StatusShard::claim() {
  weir::MutexLock lock(mu_);
  for (int attempt = 0; attempt < 100; ++attempt) {
    WEIR_ASSIGN_OR_RETURN(const Frontier upper, writer_.fetch_recent_upper());
    if (upper.is_empty()) {
      return absl::FailedPreconditionError(absl::StrCat("status shard ", name_, " is closed"));
    }
    const uint64_t lower = upper.time();
    // Adopt the predecessor's rows, one per table (the first word of a row), as if this
    // incarnation had written them: its next row for a table replaces them, and a table it has
    // nothing to say about keeps the last state reported. A table with several rows (written
    // before rows were replaced) has them retracted.
    std::map<std::string, std::string> adopted;
    std::vector<persist::Update> retractions;
    const uint64_t time = std::max(lower, now_ms());
    // A log keeps its rows as they are (its owner retracts what it no longer keeps).
    if (lower > 0 && !log_) {
      WEIR_ASSIGN_OR_RETURN(auto reader, client_->open_reader(name_, "ingest health claim"));
      auto rows = reader.snapshot(lower - 1);
      (void)reader.expire();
      if (!rows.ok()) return rows.status();
      std::map<std::string, std::vector<persist::Update>> by_table;
      for (auto& row : *rows) {
        const std::string table = row.data.substr(0, row.data.find(' '));
        by_table[table].push_back(std::move(row));
      }
      for (auto& [table, table_rows] : by_table) {
        if (table_rows.size() == 1 && table_rows[0].diff == 1) {
          adopted.emplace(table, std::move(table_rows[0].data));
          continue;
        }
        for (auto& row : table_rows) retractions.push_back({std::move(row.data), time, -row.diff});
      }
    }
    // The claim moves the upper (an empty append at least), which fences every predecessor.
    WEIR_ASSIGN_OR_RETURN(const auto result, writer_.compare_and_append(
                                                 retractions, Frontier(lower), Frontier(time + 1)));
    if (result.is_appended()) {
      expected_ = time + 1;
      rows_ = std::move(adopted);
      return absl::OkStatus();
    }
    // Someone appended meanwhile: a predecessor that had not seen us yet (try again), or a
    // later incarnation, which has taken the hold.
    WEIR_RETURN_IF_ERROR(check_hold());
  }
  return absl::AbortedError(absl::StrCat("status shard ", name_, ": too much contention"));
}

absl::Status StatusShard::check_hold(uint64_t since) {
  if (!fenced_.ok()) return fenced_;
  WEIR_ASSIGN_OR_RETURN(const auto result, hold_->compare_and_downgrade_since(
                                               incarnation_, incarnation_, Frontier(since)));
  if (!result.mismatch) return absl::OkStatus();
  fenced_ = absl::FailedPreconditionError(absl::StrCat(
      "status shard ", name_, ": incarnation ", result.mismatch->current,
      " has taken it over; this incarnation (", incarnation_, ") may not write it any more"));
  return fenced_;
}

absl::StatusOr<uint64_t> StatusShard::append(
    const std::vector<std::pair<std::string, int64_t>>& changes) {
  weir::MutexLock lock(mu_);
  WEIR_CHECK(log_) << "StatusShard::append on " << name_ << ", which is not a log";
  if (!fenced_.ok()) return fenced_;
  WEIR_RETURN_IF_ERROR(append_pending());
  const uint64_t time = std::max(expected_, now_ms());
  std::vector<persist::Update> updates;
  updates.reserve(changes.size());
  for (const auto& [row, diff] : changes) {
    if (diff != 0) updates.push_back({row, time, diff});
  }
  if (updates.empty()) return time;
  pending_ = Pending{std::move(updates), {}, std::nullopt};
  WEIR_RETURN_IF_ERROR(append_pending());
  return time;
}

absl::Status StatusShard::update(const std::vector<std::pair<std::string, std::string>>& rows) {
  weir::MutexLock lock(mu_);
  WEIR_CHECK(!log_) << "StatusShard::update on the log " << name_;
  if (!fenced_.ok()) return fenced_;
  WEIR_RETURN_IF_ERROR(append_pending());
  std::map<std::string, std::string> next = rows_;
  std::vector<persist::Update> updates;
  const uint64_t time = std::max(expected_, now_ms());
  for (const auto& [table, row] : rows) {
    auto [it, inserted] = next.try_emplace(table, row);
    if (!inserted) {
      if (it->second == row) continue;
      updates.push_back({it->second, time, -1});
      it->second = row;
    }
    updates.push_back({row, time, +1});
  }
  if (updates.empty()) return absl::OkStatus();
  pending_ = Pending{std::move(updates), std::move(next), std::nullopt};
  return append_pending();
}

absl::Status StatusShard::append_pending() {
  if (!pending_) return absl::OkStatus();
  Pending& pending = *pending_;
  const uint64_t upper = pending.updates.front().time + 1;
  if (!pending.batch) {
    persist::BatchBuilder builder = writer_.builder(Frontier(expected_));
    for (const auto& u : pending.updates) WEIR_RETURN_IF_ERROR(builder.add(u.data, u.time, u.diff));
    WEIR_ASSIGN_OR_RETURN(pending.batch, builder.finish(Frontier(upper)));
  }
  // A retry after an error whose outcome was unknown reports the truth: the batch's token.
  WEIR_ASSIGN_OR_RETURN(
      const auto result,
      writer_.compare_and_append(*pending.batch, Frontier(expected_), Frontier(upper)));
  if (!result.is_appended()) {
    // Only this incarnation appends at its own upper (a predecessor's expected upper is behind
    // it): another append means a later incarnation has taken the shard over, which check_hold
    // confirms. (With the hold still ours, the upper moved by our own append whose reply was lost
    // and whose token a reopened writer no longer carries.)
    WEIR_RETURN_IF_ERROR(check_hold());
    if (result.mismatch->current != Frontier(upper)) {
      return absl::InternalError(absl::StrCat("status shard ", name_, ": its upper moved to ",
                                              result.mismatch->current.to_string(),
                                              " while incarnation ", incarnation_, " holds it"));
    }
  }
  expected_ = upper;
  rows_ = std::move(pending.rows);
  pending_.reset();
  // The since follows: readers want the latest state, and without it every row ever written
  // stayed (the since never moved from 0). The rows are appended whatever this says.
  if (absl::Status moved = check_hold(upper - 1); !moved.ok()) return moved;
  if (result.maintenance_due && maintenance_) maintenance_->request(name_);
  return absl::OkStatus();
}

absl::Status StatusShard::reopen_if_expired() {
  weir::MutexLock lock(mu_);
  absl::Status alive = writer_.heartbeat();
  if (alive.ok() || !persist::is_writer_expired(alive)) return alive;
  WEIR_ASSIGN_OR_RETURN(
      auto fresh,
      client_->open_writer(name_, absl::StrCat("ingest health incarnation ", incarnation_)));
  writer_ = std::move(fresh);
  if (pending_) pending_->batch.reset();  // Its parts went with the expired writer: build again.
  return absl::OkStatus();
}

absl::Status StatusShard::expire() {
  weir::MutexLock lock(mu_);
  return writer_.expire();
}

}  // namespace weir::ingest
