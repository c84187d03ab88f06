#include "weir/sources/change_stream.h"

#include <algorithm>

namespace weir::sources {

ChangeStreamOutputs::ChangeStreamOutputs(std::vector<AsyncOutput<Offset, Update>>& outputs,
                                         AsyncOutput<Offset, HealthUpdate>& health,
                                         std::span<CapabilitySet<Offset>> caps,
                                         const std::vector<ExportSpec>& exports,
                                         const std::vector<bool>& snapshotting,
                                         const std::vector<std::string>& error_to_write,
                                         uint32_t worker)
    : outputs_(outputs), health_(health), worker_(worker) {
  const size_t n = exports.size();
  errored_.assign(n, false);
  held_.resize(n);
  rewind_.resize(n);
  at_.resize(n);
  for (size_t e = 0; e < n; ++e) {
    errored_[e] = !exports[e].definite_error.empty();
    held_[e].emplace(caps[e].delayed(std::max<Offset>(exports[e].resume_upper, 1)));
    // A snapshotted export's rewinds are given at time 0.
    if (snapshotting[e]) rewind_[e].emplace(caps[e].first());
    caps[e].clear();
  }
  health_cap_.emplace(caps[n].first());
  caps[n].clear();
  for (size_t e = 0; e < n; ++e) {
    if (errored_[e]) {
      report(e, Health::kStalled, exports[e].definite_error);
    } else if (!error_to_write[e].empty()) {
      error(e, held_[e]->time(), error_to_write[e]);
    } else {
      report(e, Health::kRunning);
    }
  }
}

bool ChangeStreamOutputs::all_errored() const {
  return std::find(errored_.begin(), errored_.end(), false) == errored_.end();
}

bool ChangeStreamOutputs::rewinding() const {
  return std::any_of(rewind_.begin(), rewind_.end(),
                     [](const auto& cap) { return cap.has_value(); });
}

void ChangeStreamOutputs::report(size_t e, Health status, std::string error) {
  health_.give(*health_cap_,
               HealthUpdate{static_cast<uint32_t>(e), worker_, status, std::move(error)});
}

void ChangeStreamOutputs::cease() {
  for (size_t e = 0; e < size(); ++e) {
    if (!errored_[e]) report(e, Health::kCeased);
  }
}

void ChangeStreamOutputs::error(size_t e, Offset time, const std::string& message) {
  if (errored_[e]) return;
  outputs_[e].give(at(e, time), Update{definite_error(message), 1});
  rewind_[e].reset();
  errored_[e] = true;
  report(e, Health::kStalled, message);
}

void ChangeStreamOutputs::error_all(Offset time, const std::string& message) {
  for (size_t e = 0; e < size(); ++e) error(e, time, message);
}

void ChangeStreamOutputs::give(size_t e, Offset time, std::string_view row, int64_t diff,
                               Offset rewind_end) {
  if (rewind_[e] && time < rewind_end) {
    // In the snapshot already: rewind it to time 0 so that time 0 is the table at the start.
    outputs_[e].give(*rewind_[e], Update{std::string(row), -diff});
  }
  outputs_[e].give(at(e, time), Update{std::string(row), diff});
}

void ChangeStreamOutputs::release(Offset to, Offset position, Offset rewind_end) {
  for (size_t e = 0; e < size(); ++e) {
    // A snapshotted export holds time 0 for its rewinds until the stream has passed the
    // snapshot's position: no change before it is still to come.
    if (rewind_[e] && position >= rewind_end) rewind_[e].reset();
    if (held_[e]->time() < to) held_[e]->downgrade(to);
    if (at_[e] && at_[e]->time() <= to) at_[e].reset();
  }
  if (health_cap_->time() < to) health_cap_->downgrade(to);
}

void ChangeStreamOutputs::end_rewinds() {
  for (auto& cap : rewind_) cap.reset();
}

Capability<Offset>& ChangeStreamOutputs::at(size_t e, Offset time) {
  if (held_[e]->time() >= time) return *held_[e];
  if (!at_[e] || at_[e]->time() != time) at_[e] = held_[e]->delayed(time);
  return *at_[e];
}

void follow_change_stream(std::span<CapabilitySet<Offset>> caps,
                          AsyncOutput<Offset, HealthUpdate>& health,
                          const std::vector<ExportSpec>& exports, uint32_t worker) {
  const size_t n = exports.size();
  std::optional<Capability<Offset>> health_cap(caps[n].first());
  for (size_t e = 0; e < n; ++e) {
    const bool errored = !exports[e].definite_error.empty();
    health.give(*health_cap, HealthUpdate{static_cast<uint32_t>(e), worker,
                                          errored ? Health::kStalled : Health::kCeased,
                                          exports[e].definite_error});
    caps[e].clear();
  }
  caps[n].clear();
}

}  // namespace weir::sources
