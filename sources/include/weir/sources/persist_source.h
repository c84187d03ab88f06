// persist_source: reads a persist shard into a dataflow, first its snapshot at `as_of` (every
// update at a time <= as_of, at as_of), then every change as the shard's upper moves (listen),
// until an optional `until`. Two operators per shard (docs/design/sources.md, "persist_source"):
//
// - list (one worker, the leader): holds a leased reader (and, when the caller names one, a
//   critical since hold), lists the parts of the snapshot and of every appended batch, and sends
//   each part's description to a worker chosen by its key, at the first time the part can hold.
//   Its capability follows the listen's frontier (the shard's upper, as far as it has listed).
// - fetch (every worker): fetches and decodes the parts it is sent and gives their updates, rows
//   starting with `error_prefix` on the error stream, the others on the update stream.
//
// The output frontier is the shard's upper (capped at `until`). The leader keeps the parts it
// handed out from GC until the fetch operator's output frontier passes them, and moves its read
// holds to that frontier - 1 as it goes (at most every `hold_interval`), so compaction proceeds
// behind the reader and never past what it still has to read.
//
//   auto read = weir::sources::persist_source(scope, {.shard = "auction.bids", .client = client});
//   read.updates | weir::inspect([](const auto& u) { ... });
//
// Thread safety: worker-local (build it on every worker, as any dataflow).

#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "weir/async/async_operator.h"
#include "weir/dataflow/stream.h"
#include "weir/persist/client.h"
#include "weir/persist/ids.h"
#include "weir/sources/source.h"

namespace weir::sources {

struct PersistSourceConfig {
  enum class Start {
    kSince,   // The shard's since.
    kLatest,  // Its latest readable time, upper - 1 (0 while the upper is 0), not before the since.
  };

  std::string shard;                               // The shard's name (created if missing).
  std::shared_ptr<persist::PersistClient> client;  // This process's; shared by its workers.
  std::optional<uint64_t> as_of;  // Default: `start`, chosen once the leader holds the shard.
  Start start = Start::kSince;
  std::optional<uint64_t> until;  // Nothing at times >= until; ends there.
  bool snapshot = true;           // False: only the changes after as_of.
  // Optional: set to as_of once the leader has chosen it (from UINT64_MAX), for a consumer in
  // the leader's process.
  std::shared_ptr<std::atomic<uint64_t>> chosen_as_of;
  // A durable hold (SinceHandle) besides the leased reader: registered under this id, moved to
  // `hold_epoch` at start unless a newer owner (a higher epoch) has it (FailedPrecondition: this
  // one is stale; every incarnation must use an epoch of its own), and downgraded with the leased
  // one, but never past `resume_frontier` - 1.
  std::optional<persist::CriticalReaderId> critical_reader;
  uint64_t hold_epoch = 0;
  // Where a restart of the consumer would read from (a view's output upper, say): the critical
  // hold stays at or before it - 1. Null: the fetches' frontier alone bounds it.
  std::shared_ptr<const std::atomic<uint64_t>> resume_frontier;
  // How long a store that does not answer (Unavailable) is waited out, with backoff, before the
  // read fails.
  std::chrono::milliseconds outage_limit{60000};
  std::string error_prefix = definite_error("");  // Rows that go to the error stream.
  std::string purpose = "persist_source";         // Shown by `weir persist describe`.
  size_t leader = 0;                              // The worker that lists.
  // How often an idle leader looks for batches; news from the client's upper relay
  // (persist/relay.h) wakes it at once. While the relay hears every process's appends, it looks
  // only every relay_poll (a safety net).
  std::chrono::milliseconds poll{50};
  std::chrono::milliseconds relay_poll{1000};
  std::chrono::milliseconds hold_interval{1000};  // The most often holds are moved (a write).
  OnError on_error = OnError::kFail;
};

struct PersistSourceStreams {
  Stream<uint64_t, Update> updates;  // (row, diff) at the update's time.
  // Error rows as the shard holds them; a part that does not decode (or a malformed part
  // description from a peer) as one row naming the shard, the part and why (diff 1), at the
  // first time the part can hold. A part missing from the blob store fails the read instead (its
  // lease was lost: what it held cannot be skipped).
  Stream<uint64_t, Update> errors;
  std::vector<Stream<uint64_t, AsyncError>> failures;  // Of the operators (stores failing).
  std::vector<ShutdownButton> buttons;
};

PersistSourceStreams persist_source(Scope<uint64_t>& scope, const PersistSourceConfig& config);

}  // namespace weir::sources
