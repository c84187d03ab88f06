#include "weir/control/health.h"

#include <algorithm>
#include <charconv>
#include <system_error>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"

#include "weir/status.h"

namespace weir::control {

std::string health_history_row(const HealthTransition& t) {
  std::string row =
      absl::StrCat(t.name, " ", t.state, " execution=", t.execution, " object=", t.object_id,
                   " restarts=", t.restarts, " seq=", t.seq, " at=", t.at_ms);
  if (t.process) absl::StrAppend(&row, " process=", *t.process);
  if (!t.error.empty()) {
    std::string error = t.error;
    std::replace_if(
        error.begin(), error.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
    absl::StrAppend(&row, " error=", error);
  }
  return row;
}

std::optional<HealthTransition> parse_health_history_row(std::string_view row) {
  HealthTransition t;
  bool execution = false, object = false, restarts = false, seq = false, at = false;
  size_t start = 0;
  for (int field = 0; start < row.size(); ++field) {
    if (field >= 2 && row.substr(start).starts_with("error=")) {
      t.error = row.substr(start + 6);  // The error is the rest of the row.
      break;
    }
    size_t end = row.find(' ', start);
    if (end == std::string_view::npos) end = row.size();
    const std::string_view word = row.substr(start, end - start);
    start = end + 1;
    const size_t equals = word.find('=');
    const std::string_view key = word.substr(0, equals == std::string_view::npos ? 0 : equals + 1);
    const std::string_view value = word.substr(key.size());
    const auto number = [value](auto& out) {
      const auto [last, error] = std::from_chars(value.data(), value.data() + value.size(), out);
      return error == std::errc() && last == value.data() + value.size() && !value.empty();
    };
    if (field == 0) {
      t.name = word;
    } else if (field == 1) {
      t.state = word;
    } else if (key == "execution=") {
      execution = number(t.execution);
    } else if (key == "object=") {
      t.object_id = value;
      object = true;
    } else if (key == "restarts=") {
      restarts = number(t.restarts);
    } else if (key == "seq=") {
      seq = number(t.seq);
    } else if (key == "at=") {
      at = number(t.at_ms);
    } else if (key == "process=") {
      uint64_t process = 0;
      if (number(process)) t.process = process;
    }
    // Other words: fields a later format may add.
  }
  if (t.name.empty() || t.state.empty() || !execution || !object || !restarts || !seq || !at) {
    return std::nullopt;
  }
  return t;
}

absl::StatusOr<std::vector<HealthTransition>> read_health_history(persist::PersistClient& client,
                                                                  std::string_view name) {
  std::vector<HealthTransition> transitions;
  WEIR_ASSIGN_OR_RETURN(const std::optional<persist::ShardId> shard,
                        client.find_shard(kHealthHistoryShard));
  if (!shard) return transitions;
  WEIR_ASSIGN_OR_RETURN(const persist::ShardDescription described,
                        client.describe(kHealthHistoryShard));
  if (described.upper == persist::Frontier(0)) return transitions;  // Nothing written yet.
  absl::Status status;
  // A read without a hold: a GC meanwhile may remove a part it needs (NotFound); read again.
  for (int attempt = 0; attempt < 5; ++attempt) {
    transitions.clear();
    absl::StatusOr<persist::SnapshotCursor> cursor = client.inspect_snapshot(kHealthHistoryShard);
    if (!cursor.ok()) {
      status = cursor.status();
    } else {
      while (cursor->next()) {
        // A row counted more than once (written around the replica) is shown once.
        if (cursor->diff() <= 0) continue;
        std::optional<HealthTransition> t = parse_health_history_row(cursor->data());
        if (t && (name.empty() || t->name == name)) transitions.push_back(*std::move(t));
      }
      status = cursor->status();
    }
    if (!absl::IsNotFound(status)) break;
  }
  WEIR_RETURN_IF_ERROR(status);
  std::sort(transitions.begin(), transitions.end(),
            [](const HealthTransition& a, const HealthTransition& b) {
              return std::tie(a.execution, a.seq, a.name) < std::tie(b.execution, b.seq, b.name);
            });
  return transitions;
}

}  // namespace weir::control
