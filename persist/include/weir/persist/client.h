// PersistClient: the entry point to a persist environment (one Blob store + one Consensus store).
//
// A shard is a durable collection of (data, time, diff) updates. Its `upper` says which times are
// final (every time before it; appends happen only at or after it) and its `since` which are
// readable (at or after it). Its contents are batches with [lower, upper) descriptions whose
// parts live in Blob; its state (upper, since, batches, writers, readers) is versioned by a
// seqno in Consensus and changed only by compare-and-set, so a crash at any point leaves a
// readable shard, and partial batches are never visible. See docs/persist.md.
//
// Shards are opened by human-readable name; the client maps names to random ShardIds (the map
// lives in Consensus) and creates a shard the first time a handle opens it.
//
//   WEIR_ASSIGN_OR_RETURN(std::unique_ptr<PersistClient> client,
//                         PersistClient::open(PersistLocation::in_directory("/var/lib/weir")));
//   WEIR_ASSIGN_OR_RETURN(WriteHandle writer, client->open_writer("orders"));
//   WEIR_ASSIGN_OR_RETURN(ReadHandle reader, client->open_reader("orders"));
//
// Thread safety: thread-safe. Handles may outlive the client.

#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "weir/persist/batch.h"
#include "weir/persist/blob.h"
#include "weir/persist/config.h"
#include "weir/persist/consensus.h"
#include "weir/persist/fence.h"
#include "weir/persist/frontier.h"
#include "weir/persist/ids.h"
#include "weir/persist/read_handle.h"
#include "weir/persist/since_handle.h"
#include "weir/persist/write_handle.h"

namespace weir::persist {

namespace internal {
class ClientCore;
}  // namespace internal

struct ShardName {
  std::string name;
  ShardId id;
};

// What `weir persist describe` prints.
struct ShardDescription {
  struct BatchInfo {
    BatchDescription description;
    std::string writer_id;
    size_t num_parts = 0;
    size_t num_runs = 0;
    uint64_t num_updates = 0;
    uint64_t update_bytes = 0;
    uint64_t encoded_bytes = 0;
  };
  struct WriterInfo {
    std::string writer_id;
    std::string purpose;
    absl::Time last_heartbeat;
    absl::Duration lease;
    uint64_t fence_epoch = 0;
  };
  struct LeasedReaderInfo {
    std::string reader_id;
    std::string purpose;
    Frontier since;
    uint64_t seqno = 0;
    absl::Time last_heartbeat;
    absl::Duration lease;
    uint64_t fence_epoch = 0;
  };
  struct CriticalReaderInfo {
    std::string reader_id;
    std::string purpose;
    Frontier since;
    uint64_t epoch = 0;
    // When it was registered or last moved; absl::InfinitePast() if the state does not say.
    absl::Time last_changed = absl::InfinitePast();
  };

  ShardId id;
  std::string name;
  uint64_t seqno = 0;   // 0: the shard has no state yet.
  absl::Time walltime;  // When this version was written.
  Frontier upper;
  Frontier since;
  std::vector<BatchInfo> batches;
  uint64_t fence_epoch = 0;  // See fence.h.
  std::string fence_owner;
  std::vector<WriterInfo> writers;
  std::vector<LeasedReaderInfo> leased_readers;
  std::vector<CriticalReaderInfo> critical_readers;
};

struct CompactionOptions {
  // Merge until one batch holds every part (in steps of at most compaction_max_runs runs),
  // instead of keeping batches in geometrically growing sizes.
  bool full = false;
  // At most this many merge steps (0: until there is nothing left to merge). A compaction that
  // appends keep busy may not settle for a long time; one of bounded steps returns with
  // `settled` false, so that GC (and other shards) get their turn before it goes on.
  size_t max_steps = 0;
  // The compaction's writer and reader are opened with this fence (see fence.h): a compaction of
  // a process that a later one fenced out stops.
  Fence fence = {};
};

struct CompactionResult {
  size_t merges = 0;          // Batches written by compaction.
  uint64_t bytes_merged = 0;  // Update bytes of the runs merged (read and written again).
  size_t batches_before = 0;
  size_t batches_after = 0;
  bool settled = true;  // Nothing was left to merge (false: max_steps ran out first).
};

struct GcResult {
  size_t expired_writers = 0;
  size_t expired_readers = 0;
  size_t blobs_deleted = 0;
  uint64_t bytes_deleted = 0;
  size_t versions_truncated = 0;
  // Blobs this run should have removed but could not. A failure does not stop the run: the other
  // blobs are removed and the versions truncated all the same. A blob that failed is tried again
  // by a later run once no live writer can append it (at once if its writer is gone).
  size_t blobs_failed = 0;
  // "KEY: ERROR" for the first kMaxFailuresListed of them.
  static constexpr size_t kMaxFailuresListed = 10;
  std::vector<std::string> failures;
  // Consensus versions decoded: those written since the previous run truncated (or held by a
  // reader), not the whole history.
  size_t versions_scanned = 0;
};

class PersistClient {
 public:
  // Opens the stores named by `location` (see Blob::open and Consensus::open).
  static absl::StatusOr<std::unique_ptr<PersistClient>> open(const PersistLocation& location,
                                                             PersistConfig config = {});
  // Uses stores the caller opened (tests inject failures this way).
  static std::unique_ptr<PersistClient> create(std::shared_ptr<Blob> blob,
                                               std::shared_ptr<Consensus> consensus,
                                               PersistConfig config = {});

  PersistClient(const PersistClient&) = delete;
  PersistClient& operator=(const PersistClient&) = delete;
  ~PersistClient();

  // Every named shard, sorted by name.
  absl::StatusOr<std::vector<ShardName>> list_shards();
  // The id of shard `name`, or nullopt if no shard has that name.
  absl::StatusOr<std::optional<ShardId>> find_shard(std::string_view name);

  // Opening a handle creates the shard `name` if it does not exist. `purpose` shows in describe.
  // A writer opened with a fence raises the shard's fence to it; a handle below the shard's fence
  // is refused (see fence.h).
  absl::StatusOr<WriteHandle> open_writer(std::string_view name, std::string_view purpose = "",
                                          const Fence& fence = {});
  absl::StatusOr<ReadHandle> open_reader(std::string_view name, std::string_view purpose = "",
                                         const Fence& fence = {});
  absl::StatusOr<SinceHandle> open_critical_since(std::string_view name, const CriticalReaderId& id,
                                                  std::string_view purpose = "");

  // NotFound if there is no shard `name`. These register nothing and write nothing.
  absl::StatusOr<ShardDescription> describe(std::string_view name);
  // A snapshot at `as_of` (default: the latest readable time, upper - 1) without a read hold: a
  // concurrent GC may remove a part it still needs, which fails the cursor with NotFound. For
  // tools; programs use a ReadHandle.
  absl::StatusOr<SnapshotCursor> inspect_snapshot(std::string_view name,
                                                  std::optional<uint64_t> as_of = std::nullopt);

  // Fetches a part a distributed read handed out (read_handle.h) and calls `each` with every
  // update of it that belongs to the read, at its time there. NotFound if the part is gone from
  // the blob store (its lease was not kept), DataLoss if it does not decode; each names the shard
  // and the part.
  absl::Status fetch_part(
      const LeasedPart& part,
      absl::FunctionRef<void(std::string_view data, uint64_t time, int64_t diff)> each);

  // Merges batches, advancing times to the since, so that reads touch few runs.
  absl::StatusOr<CompactionResult> compact(std::string_view name,
                                           const CompactionOptions& options = {});
  // Expires writers and leased readers whose lease ran out, removes every blob of the shard that
  // no retained state references (unless its writer is alive), and truncates consensus versions
  // no reader holds.
  absl::StatusOr<GcResult> gc(std::string_view name);
  // Raises the fence of shard `name` (creating it if need be) as opening a writer with `fence`
  // would, without registering one: from then on no handle of a lower epoch acts on it.
  absl::Status fence(std::string_view name, const Fence& fence);

  // compact then gc; an error if gc could not remove some blobs (it still did the rest).
  absl::Status maintain(std::string_view name);
  // A bounded turn of maintenance: compaction of at most `compaction.max_steps` steps (0: until
  // settled), then GC whether or not the compaction got anywhere (truncating consensus and
  // removing blobs must not wait for a compaction that appends keep busy).
  struct MaintainTurn {
    // The compaction ran its steps without an error and has more to merge: call again.
    bool more = false;
    absl::Status status;  // The compaction's error, else GC's (as maintain reports it).
  };
  MaintainTurn maintain_turn(std::string_view name, const CompactionOptions& compaction);

  // The relay this client publishes to (PersistConfig::relay; may be null): readers that follow
  // a shard watch it (UpperWatch).
  const std::shared_ptr<UpperRelay>& relay() const;

 private:
  explicit PersistClient(std::shared_ptr<internal::ClientCore> core);

  std::shared_ptr<internal::ClientCore> core_;
};

}  // namespace weir::persist
