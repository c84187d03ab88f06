// The load-generator source: a Generator (generator.h) rendered as a source with the shape of a
// database source.
//
// - Snapshot (an async operator on every worker): each worker emits its share of every
//   snapshotting export's initial rows at time 0. In concurrent mode an export's time 0 is held
//   only until its own rows are out on each worker, and exports that need no snapshot are
//   released at once; in serial mode every export is held at 0 until every snapshot is done.
// - Replication (an async operator on every worker): the change stream from the smallest resume
//   upper on, each change at its offset, paced at `rate` offsets per second. Every worker advances
//   the generator over every offset and emits the changes of the offsets it owns (offset % peers
//   == its index), so that the rows and what the sink does with them are shared. At every yield
//   it downgrades every export's output to the next offset. A bad row (fault injection) becomes a
//   definite error in its export (every worker stops that export's data there);
//   `transient_fault` makes the worker owning that offset fail once (a transient error).
//
// Thread safety: SourceStats is thread-safe; the rest is worker-local.

#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "weir/dataflow/scope.h"
#include "weir/sources/loadgen/generator.h"
#include "weir/sources/source.h"

namespace weir::sources::loadgen {

struct LoadgenSourceConfig {
  loadgen::GeneratorOptions generator;
  double rate = 1000;           // Offsets per second; 0: as fast as possible.
  std::optional<Offset> until;  // Stop after this offset.
  ProgressMode mode = ProgressMode::kConcurrent;
  size_t leader = 0;  // The worker that records the upstream's position in `stats`.
  // Fail the replication once on reaching this offset (a transient error), in this process.
  std::optional<Offset> transient_fault;
  std::shared_ptr<std::atomic<bool>> transient_fired = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<SourceStats> stats;  // Optional.
};

// Renders the source. InvalidArgument if an export names a table the generator lacks.
absl::StatusOr<RenderedSource> render_loadgen(Scope<Offset>& scope,
                                              const LoadgenSourceConfig& config,
                                              const std::vector<ExportSpec>& exports);

}  // namespace weir::sources::loadgen
