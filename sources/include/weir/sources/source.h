// The source framework: how an upstream's tables become streams.
//
// A source renders as async operators with one output stream per export (one upstream table =
// one export = one shard), plus a health stream and error streams. Source time is the upstream
// offset (for PostgreSQL, the LSN). Each export resumes from its shard's upper; an export whose
// upper is 0 is snapshotted first (its rows at time 0), then follows the change stream.
//
// Rows are opaque strings (the shard's data). A definite error (bad data, an incompatible
// schema) is written into its export's stream as a row that starts with '!', at the offset where
// it happened; it is permanent and the other exports go on. A transient error (a lost
// connection) fails the source's operator: the driver reports it and restarts the source from
// the resume uppers.
//
// Thread safety: the types are values; operators are worker-local.

#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "weir/async/async_operator.h"
#include "weir/communication/codec.h"
#include "weir/dataflow/stream.h"
#include "weir/mutex.h"

namespace weir::sources {

using Offset = uint64_t;
using Row = std::string;
// A row with its multiplicity change: +1 inserted, -1 deleted (an update is one of each).
using Update = std::pair<Row, int64_t>;

// A definite error as a row: "!error: <message>".
inline Row definite_error(std::string_view message) { return "!error: " + std::string(message); }
inline bool is_error(std::string_view row) { return !row.empty() && row.front() == '!'; }

// How exports advance while some of them snapshot.
enum class ProgressMode {
  // Every export advances on its own: a snapshotting export holds only its own frontier.
  kConcurrent,
  // All exports advance together: none passes time 0 until every snapshot is done.
  kSerial,
};
absl::StatusOr<ProgressMode> parse_progress_mode(std::string_view text);
std::string_view to_string(ProgressMode mode);

// One upstream table to ingest, and where its shard stands.
struct ExportSpec {
  std::string table;
  Offset resume_upper = 0;  // The shard's upper; 0 means: snapshot first.
  // Set if the export's shard already holds a definite error (this message): the export stays
  // errored, as it was when the error was written. It gets no more data, its frontier still
  // advances, and its health is stalled with this error, until the user drops the shard.
  std::string definite_error;
  bool needs_snapshot() const { return resume_upper == 0; }
};

enum class Health : uint8_t { kStarting = 0, kRunning = 1, kStalled = 2, kCeased = 3 };
std::string_view to_string(Health health);

// One worker's view of one export's health, from one of a source's two reporters: the snapshot
// (starting, then running once the worker's share is out; running at once for an export that
// needs none) and the change stream (running, stalled, ceased). On one worker they run as two
// operators, in no set order (a large snapshot yields while the change stream goes on), so each
// has a slot of its own in the aggregate.
struct HealthUpdate {
  uint32_t export_index = 0;
  uint32_t worker = 0;
  Health status = Health::kStarting;
  std::string error;      // For kStalled.
  bool snapshot = false;  // From the snapshot; else from the change stream.
  friend bool operator==(const HealthUpdate&, const HealthUpdate&) = default;
};

// What a rendered source gives to the rest of the dataflow.
struct RenderedSource {
  std::vector<Stream<Offset, Update>> exports;  // In the order of the ExportSpecs.
  Stream<Offset, HealthUpdate> health;
  std::vector<Stream<Offset, AsyncError>> errors;  // Transient failures of the source operators.
  std::vector<ShutdownButton> buttons;
};

// What the driver shows and measures: snapshot progress and the upstream's position over time
// (thread-safe; the source's operators update it, displays read it).
class SourceStats {
 public:
  explicit SourceStats(size_t exports) : snapshot_done_(exports), snapshot_total_(exports) {
    for (auto& d : snapshot_done_) d.store(0);
    for (auto& t : snapshot_total_) t.store(0);
  }
  void add_snapshot_rows(size_t e, uint64_t rows) {
    snapshot_done_[e].fetch_add(rows, std::memory_order_relaxed);
  }
  void set_snapshot_total(size_t e, uint64_t rows) {
    snapshot_total_[e].store(rows, std::memory_order_relaxed);
  }
  uint64_t snapshot_done(size_t e) const {
    return snapshot_done_[e].load(std::memory_order_relaxed);
  }
  uint64_t snapshot_total(size_t e) const {
    return snapshot_total_[e].load(std::memory_order_relaxed);
  }

  // The upstream reached `offset` (every change up to it exists) at `when`.
  void record_upstream(uint64_t offset, std::chrono::steady_clock::time_point when);
  uint64_t upstream_offset() const { return upstream_.load(std::memory_order_relaxed); }
  // When the upstream reached `offset` (the earliest record at or after it), if known.
  std::optional<std::chrono::steady_clock::time_point> reached(uint64_t offset) const;

 private:
  std::vector<std::atomic<uint64_t>> snapshot_done_;
  std::vector<std::atomic<uint64_t>> snapshot_total_;
  std::atomic<uint64_t> upstream_{0};
  mutable weir::Mutex mu_;
  std::deque<std::pair<uint64_t, std::chrono::steady_clock::time_point>> history_
      ABSL_GUARDED_BY(mu_);
};

// Aggregates per-worker health into one status per export, over a slot per worker and reporter
// (each starts as starting): stalled if any slot is stalled, starting if any is starting (a
// snapshot not done, or a reporter not heard from yet), ceased once every worker's change stream
// has ended, else running.
class HealthAggregator {
 public:
  explicit HealthAggregator(size_t exports, size_t workers)
      : per_worker_(exports, std::vector<Health>(2 * workers, Health::kStarting)),
        errors_(exports) {}
  // Applies an update; returns true if the export's aggregate status changed.
  bool apply(const HealthUpdate& update);
  Health status(size_t export_index) const;
  const std::string& error(size_t export_index) const { return errors_[export_index]; }

 private:
  std::vector<std::vector<Health>> per_worker_;  // Export -> 2 * worker + (snapshot ? 1 : 0).
  std::vector<std::string> errors_;
};

}  // namespace weir::sources

namespace weir {
template <>
struct Codec<sources::HealthUpdate> {
  static void encode(const sources::HealthUpdate& h, std::string& out) {
    Codec<uint32_t>::encode(h.export_index, out);
    Codec<uint32_t>::encode(h.worker, out);
    out.push_back(static_cast<char>(h.status));
    Codec<std::string>::encode(h.error, out);
    out.push_back(static_cast<char>(h.snapshot ? 1 : 0));
  }
  static bool decode(std::string_view& in, sources::HealthUpdate& h) {
    if (!Codec<uint32_t>::decode(in, h.export_index) || !Codec<uint32_t>::decode(in, h.worker) ||
        in.empty()) {
      return false;
    }
    const auto status = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    if (status > 3) return false;
    h.status = static_cast<sources::Health>(status);
    if (!Codec<std::string>::decode(in, h.error) || in.empty()) return false;
    const auto snapshot = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    if (snapshot > 1) return false;
    h.snapshot = snapshot == 1;
    return true;
  }
};
}  // namespace weir

namespace weir::sources {

// Adds the outputs of a source operator to `builder`: 0..n-1 the exports (streams appended to
// `outs`), n the health output (stream appended to `health`). Errors hold the capabilities.
inline std::pair<std::vector<AsyncOutput<Offset, Update>>, AsyncOutput<Offset, HealthUpdate>>
add_source_outputs(AsyncOperatorBuilder<Offset>& builder, size_t n,
                   std::vector<Stream<Offset, Update>>& outs,
                   std::vector<Stream<Offset, HealthUpdate>>& health) {
  std::vector<AsyncOutput<Offset, Update>> outputs;
  for (size_t e = 0; e < n; ++e) {
    auto [output, stream] = builder.add_output<Update>();
    outputs.push_back(output);
    outs.push_back(stream);
  }
  auto [health_out, health_stream] = builder.add_output<HealthUpdate>();
  health.push_back(health_stream);
  builder.set_on_error(OnError::kHold);
  return {std::move(outputs), health_out};
}

}  // namespace weir::sources
