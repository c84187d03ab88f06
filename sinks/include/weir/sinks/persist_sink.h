// The persist sink: writes a stream of (row, diff) updates at u64 times into one persist shard,
// exactly once. Three operators per shard (docs/design/sinks.md):
//
// - mint (one worker): turns advances of the input's frontier into batch descriptions
//   [lower, upper), starting at the shard's upper, and broadcasts them.
// - write (every worker): adds the updates that reach it on its own worker (no exchange: a
//   source spreads its output over the workers, and moving every record to a worker chosen by
//   its row's hash cost more than the encoding it spread) to a BatchBuilder (uploading parts as
//   they fill, so memory stays bounded), and finishes one batch per description. Updates below
//   the shard's upper are dropped (they are already in the shard). An update at the current
//   lower goes into the builder at once: a snapshot at one time streams into a single batch (the
//   snapshot lookahead); later times wait, in memory, for their description.
// - append (one worker): once every worker's batch for a description is in, appends them with
//   compare_and_append(expected = lower); descriptions that are ready together (the appends fell
//   behind the input's frontier) go into one append (concat_batches). On an upper mismatch: the
//   batches of each description whose whole range the shard already holds (another incarnation
//   wrote it) are discarded, and those of the joined descriptions past that upper appended; an
//   upper inside a description fails the sink with a transient error and the driver restarts
//   from the uppers.
//
// Exactly once = definite contents per time (the source) + atomic compare-and-set appends +
// resuming from the shard's upper.
//
// Thread safety: SinkStats is thread-safe; the rest is worker-local.

#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "weir/async/async_operator.h"
#include "weir/dataflow/stream.h"
#include "weir/mutex.h"
#include "weir/persist/background_maintenance.h"
#include "weir/persist/since_handle.h"
#include "weir/persist/write_handle.h"

namespace weir::sinks {

using Time = uint64_t;
using Update = std::pair<std::string, int64_t>;  // (row, diff)

struct SinkStats {
  std::atomic<uint64_t> persisted_upper{0};  // The shard's upper as of the last append.
  std::atomic<uint64_t> batches{0};          // Appends (each of one or more descriptions).
  std::atomic<uint64_t> updates{0};          // Updates written.
  std::atomic<uint64_t> bytes{0};            // Their rows' bytes (before encoding).
  // Set before a row that starts with PersistSinkConfig::flag_prefix goes into a batch (whether
  // or not its append then goes through), and when an append finds its range already appended
  // by another writer (whose rows this sink has not seen). Only with a flag_prefix.
  std::atomic<bool> flagged{false};
  // The first row starting with flag_prefix that went into a batch ("" if none).
  void note_flagged_row(const std::string& row) {
    weir::MutexLock lock(mu_);
    if (flagged_row_.empty()) flagged_row_ = row;
  }
  std::string flagged_row() const {
    weir::MutexLock lock(mu_);
    return flagged_row_;
  }
  // steady_clock nanoseconds (time_since_epoch) of the first append that moved the shard's upper
  // past where this sink started (for an export that snapshots: its snapshot is durable); 0 until.
  std::atomic<int64_t> first_advance_ns{0};

 private:
  mutable weir::Mutex mu_;
  std::string flagged_row_ ABSL_GUARDED_BY(mu_);
};

struct PersistSinkConfig {
  std::string name;                              // Shard name, for operator names and errors.
  std::shared_ptr<persist::WriteHandle> writer;  // Shared by the workers of this process.
  Time shard_upper = 0;                          // The shard's upper when the dataflow was built.
  std::optional<Time> final_upper;               // When the input completes: the last upper.
  std::shared_ptr<SinkStats> stats;              // Optional.
  // Optional: rows starting with it set stats->flagged (the ingest driver's definite errors, so
  // that it reads a shard for one only after an epoch that wrote one).
  std::string flag_prefix;
  size_t leader = 0;  // The worker that mints and appends.
  // Optional: where appends that report maintenance_due ask for compaction and GC. Without it the
  // shard's state grows with every append.
  std::shared_ptr<persist::BackgroundMaintenance> maintenance;
  // Optional: a compaction window. After an append that reports maintenance_due (and before
  // maintenance is asked for), the append operator moves this critical since hold to
  // `new_upper - 1 - compaction_window` (0 if that is negative), so that compaction consolidates
  // the history before it while the last compaction_window + 1 times stay readable. The hold must
  // be at epoch `hold_epoch` (the driver's incarnation): a hold a later incarnation took over
  // fails the sink with FailedPrecondition (this one is stale); a failed downgrade with its
  // status (the append itself went through).
  std::shared_ptr<persist::SinceHandle> since_hold;
  uint64_t hold_epoch = 0;
  uint64_t compaction_window = 0;
};

// The since a compaction window of `window` times holds a shard whose upper is `upper` at:
// upper - 1 - window, or 0 if that is negative.
inline Time window_since(Time upper, uint64_t window) {
  return upper > window ? upper - 1 - window : 0;
}

// Moves `hold` (at epoch `epoch`) to window_since(upper, window) if that is ahead of its since.
// FailedPrecondition, naming `shard`, if the hold's epoch is another.
absl::Status downgrade_to_window(persist::SinceHandle& hold, uint64_t epoch, Time upper,
                                 uint64_t window, const std::string& shard);

struct RenderedSink {
  std::vector<Stream<Time, AsyncError>> errors;  // Transient failures (write, append).
  std::vector<ShutdownButton> buttons;
};

RenderedSink render_persist_sink(const Stream<Time, Update>& updates,
                                 const PersistSinkConfig& config);

// Combines the batches that the workers of one process wrote for one description into one batch
// (their parts, run after run). InvalidArgument unless they share shard, writer and description.
absl::StatusOr<persist::Batch> merge_batches(std::vector<persist::Batch> batches);

// Joins batches of one shard and writer whose descriptions follow each other ([a, b), [b, c), ...)
// into one batch [a, c) holding their parts, run after run, with the last one's idempotency
// token: the append operator appends the descriptions that are ready together, in one consensus
// write. InvalidArgument unless they share shard, writer and since and follow each other.
absl::StatusOr<persist::Batch> concat_batches(std::vector<persist::Batch> batches);

}  // namespace weir::sinks
