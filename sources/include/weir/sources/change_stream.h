// What the change-stream operators of the typed sources (PostgreSQL, MySQL) share: the outputs of
// the one worker that streams, with each export's capabilities and health, and the rewind of a
// snapshotted export (docs/design/sources.md).
//
// Per export: a held capability (its frontier: no data will come before it), a capability at time
// 0 while the export's snapshot is being rewound, and one minted at the time data is given. A
// definite error is a row at a time, after which the export gets nothing more.
//
// Thread safety: worker-local (the streaming operator's body).

#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weir/async/async_operator.h"
#include "weir/sources/source.h"

namespace weir::sources {

class ChangeStreamOutputs {
 public:
  // Takes the operator's capabilities (`caps`: the exports', then health's). An export is held at
  // its resume upper (at least 1); one that `snapshotting` also holds time 0 for its rewind. An
  // export whose spec has a definite error reports stalled; one with `error_to_write` (not
  // empty) gets it as its definite error at its resume upper; the others report running.
  ChangeStreamOutputs(std::vector<AsyncOutput<Offset, Update>>& outputs,
                      AsyncOutput<Offset, HealthUpdate>& health,
                      std::span<CapabilitySet<Offset>> caps, const std::vector<ExportSpec>& exports,
                      const std::vector<bool>& snapshotting,
                      const std::vector<std::string>& error_to_write, uint32_t worker);

  size_t size() const { return held_.size(); }
  bool errored(size_t e) const { return errored_[e]; }
  bool all_errored() const;
  // Some export still holds time 0 for its rewind.
  bool rewinding() const;

  void report(size_t e, Health status, std::string error = "");
  // Every export that is not errored reports ceased.
  void cease();
  // Export `e`'s definite error at `time` (at least its held time): the error row, its rewind
  // ends, it gets no more data, and reports stalled. Nothing if it is errored already.
  void error(size_t e, Offset time, const std::string& message);
  void error_all(Offset time, const std::string& message);
  // Gives `row` with `diff` to export `e` at `time`; while the export is rewinding and `time` is
  // before `rewind_end` (its snapshot holds the change already), also (row, 0, -diff). The
  // row's bytes are copied once, into the update given.
  void give(size_t e, Offset time, std::string_view row, int64_t diff, Offset rewind_end);
  // Moves every export's frontier to `to`; rewinds end once `position` passes `rewind_end`.
  void release(Offset to, Offset position, Offset rewind_end);
  // Ends every rewind (a run that ends while every export errored).
  void end_rewinds();
  Offset held(size_t e) const { return held_[e]->time(); }

 private:
  // A capability of export `e` at `time` (not before its held one) for data given there, which
  // leaves the export's frontier where release() put it: minted from the held one; the last is
  // kept (a transaction gives many rows at one time).
  Capability<Offset>& at(size_t e, Offset time);

  std::vector<AsyncOutput<Offset, Update>>& outputs_;
  AsyncOutput<Offset, HealthUpdate>& health_;
  const uint32_t worker_;
  std::vector<bool> errored_;
  std::vector<std::optional<Capability<Offset>>> held_;
  std::vector<std::optional<Capability<Offset>>> rewind_;
  std::vector<std::optional<Capability<Offset>>> at_;
  std::optional<Capability<Offset>> health_cap_;
};

// Per export, the definite error its source's plan found (each table's `error_to_write`).
template <class Table>
std::vector<std::string> errors_to_write(const std::vector<Table>& tables) {
  std::vector<std::string> errors;
  errors.reserve(tables.size());
  for (const auto& table : tables) errors.push_back(table.error_to_write);
  return errors;
}

// The change-stream operator of a worker that does not stream: it reports each export ceased
// (or stalled with its definite error) and holds nothing.
void follow_change_stream(std::span<CapabilitySet<Offset>> caps,
                          AsyncOutput<Offset, HealthUpdate>& health,
                          const std::vector<ExportSpec>& exports, uint32_t worker);

}  // namespace weir::sources
