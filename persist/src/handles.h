// The state behind the public handles: WriterCore (WriteHandle), ReaderCore (ReadHandle),
// CriticalCore (SinceHandle), and the implementations of BatchBuilder, SnapshotCursor and
// Listen.

#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core.h"
#include "merge.h"
#include "parts.h"

#include "weir/mutex.h"
#include "weir/persist/batch.h"
#include "weir/persist/read_handle.h"
#include "weir/persist/since_handle.h"
#include "weir/persist/write_handle.h"

namespace weir::persist::internal {

// Thread safety: thread-safe.
class WriterCore {
 public:
  // Registers a new writer of `shard`, raising its fence to `fence` (see fence.h).
  static absl::StatusOr<std::shared_ptr<WriterCore>> open(Shard shard, std::string purpose,
                                                          const Fence& fence = {});

  const Shard& shard() const { return shard_; }
  const std::string& writer_id() const { return writer_id_; }

  Frontier upper() const;
  absl::StatusOr<Frontier> fetch_recent_upper();
  absl::StatusOr<AppendResult> compare_and_append(const Batch& batch, Frontier expected_upper,
                                                  Frontier new_upper);
  absl::Status heartbeat();
  // Renews the lease if a quarter of it has passed.
  absl::Status maybe_heartbeat();
  absl::Status expire();
  // The refusal of this writer's change to `state`, if it is fenced out or no longer registered.
  absl::Status check_registered(const proto::ProtoShardState& state) const;

 private:
  WriterCore(Shard shard, std::string writer_id, uint64_t fence_epoch)
      : shard_(std::move(shard)), writer_id_(std::move(writer_id)), fence_epoch_(fence_epoch) {}

  const Shard shard_;
  const std::string writer_id_;
  const uint64_t fence_epoch_;
  mutable weir::Mutex mu_;
  ShardState state_ ABSL_GUARDED_BY(mu_);  // The latest state this writer saw.
  int64_t last_heartbeat_ms_ ABSL_GUARDED_BY(mu_) = 0;
  // The token of the last append this writer reported indeterminate, until a retry learns its
  // outcome: a retry refused because the writer is gone (expired, fenced out) is then still
  // indeterminate, as the first try may have committed.
  std::string unknown_token_ ABSL_GUARDED_BY(mu_);
};

class BatchBuilderImpl {
 public:
  BatchBuilderImpl(std::shared_ptr<WriterCore> writer, Frontier lower);

  absl::Status add(std::string_view data, uint64_t time, int64_t diff);
  absl::StatusOr<Batch> finish(Frontier upper);
  absl::Status discard();
  uint64_t num_updates_added() const { return added_; }
  bool uploads_full() const { return uploader_.full(); }
  absl::Status wait_for_room() { return upload_error(uploader_.wait_for_room()); }

 private:
  // A failed upload of an expired writer's part (GC removes the parts, temporary files
  // included, of a writer it expires) is reported as the expiry (is_writer_expired), which is
  // what the caller must act on; other errors are returned as they are.
  absl::Status upload_error(absl::Status status);
  // Uploads the filling part; `last` (from finish) puts it ahead of the pool's queue.
  absl::Status flush(bool last = false);
  size_t part_target_bytes() const { return writer_->shard().core().config().part_target_bytes; }

  std::shared_ptr<WriterCore> writer_;
  Frontier lower_;
  std::shared_ptr<BufferRecycler> recycler_;  // The client's; shared with the upload tasks.
  PartBuffer buffer_;
  PartUploader uploader_;
  uint64_t added_ = 0;
  std::optional<uint64_t> max_time_;
  bool spent_ = false;
};

class ReaderCore;

// Marks a consensus seqno as in use by a read of a ReaderCore: its lease keeps that version, and
// every part it references, from GC. Empty for reads without a reader (inspect_snapshot).
class SeqnoHold {
 public:
  SeqnoHold() = default;
  SeqnoHold(std::shared_ptr<ReaderCore> reader, uint64_t seqno)
      : reader_(std::move(reader)), seqno_(seqno) {}
  SeqnoHold(SeqnoHold&& other) noexcept : reader_(std::move(other.reader_)), seqno_(other.seqno_) {}
  SeqnoHold& operator=(SeqnoHold&& other) noexcept;
  SeqnoHold(const SeqnoHold&) = delete;
  SeqnoHold& operator=(const SeqnoHold&) = delete;
  ~SeqnoHold() { release(); }

  void release();
  // Renews the reader's lease if a quarter of it has passed (a long read must not let it run
  // out: GC would expire the reader and remove the parts the read still needs).
  absl::Status keep_alive();
  // A read's error, explained: see ReaderCore::explain.
  absl::Status explain(absl::Status status) const;

 private:
  std::shared_ptr<ReaderCore> reader_;
  uint64_t seqno_ = 0;
};

// Thread safety: thread-safe.
class ReaderCore : public std::enable_shared_from_this<ReaderCore> {
 public:
  // Registers a new leased reader of `shard` at the shard's since; refused if `fence` is below
  // the shard's (see fence.h).
  static absl::StatusOr<std::shared_ptr<ReaderCore>> open(Shard shard, std::string purpose,
                                                          const Fence& fence = {});

  const Shard& shard() const { return shard_; }
  const std::string& reader_id() const { return reader_id_; }
  Frontier since() const;

  // The latest state, for a read: fails if this reader has expired, renews the lease when due,
  // and holds the state's seqno until the SeqnoHold goes.
  absl::StatusOr<std::pair<ShardState, SeqnoHold>> state_for_read();

  absl::Status downgrade_since(Frontier new_since);
  absl::Status heartbeat();
  absl::Status expire();

 private:
  friend class SeqnoHold;

 public:
  // Renews the lease if a quarter of it has passed since the last renewal.
  absl::Status maybe_heartbeat();
  // A read's error, explained: a part that is missing because this reader was fenced out or
  // expired (its hold went with it, and GC removed what the read still needed) gives the fence's
  // or the expiry's error, not NotFound, which reads as data loss. Anything else is `status`.
  absl::Status explain(absl::Status status) const;

 private:
  ReaderCore(Shard shard, std::string reader_id, uint64_t fence_epoch)
      : shard_(std::move(shard)), reader_id_(std::move(reader_id)), fence_epoch_(fence_epoch) {}

  // The refusal of this reader's read of `state`, if it is fenced out or no longer registered.
  absl::Status check_registered(const proto::ProtoShardState& state) const;

  // Applies `change` to this reader's entry, also renewing its lease and moving its seqno hold
  // up to the oldest seqno in use.
  absl::Status update(absl::FunctionRef<void(proto::ProtoLeasedReader&)> change)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void release_seqno(uint64_t seqno);

  const Shard shard_;
  const std::string reader_id_;
  const uint64_t fence_epoch_;
  mutable weir::Mutex mu_;
  ShardState state_ ABSL_GUARDED_BY(mu_);
  Frontier since_ ABSL_GUARDED_BY(mu_);
  int64_t last_heartbeat_ms_ ABSL_GUARDED_BY(mu_) = 0;
  std::multiset<uint64_t> seqnos_in_use_ ABSL_GUARDED_BY(mu_);
};

// Thread safety: thread-safe.
class CriticalCore {
 public:
  // Registers the hold `id` of `shard` if it is not registered yet.
  static absl::StatusOr<std::shared_ptr<CriticalCore>> open(Shard shard, CriticalReaderId id,
                                                            std::string purpose);

  const Shard& shard() const { return shard_; }
  const CriticalReaderId& reader_id() const { return id_; }
  uint64_t epoch() const;
  Frontier since() const;

  absl::StatusOr<SinceResult> compare_and_downgrade_since(uint64_t expected_epoch,
                                                          uint64_t new_epoch, Frontier new_since);
  absl::StatusOr<std::optional<EpochMismatch>> expire(uint64_t expected_epoch);

 private:
  CriticalCore(Shard shard, CriticalReaderId id) : shard_(std::move(shard)), id_(std::move(id)) {}

  const Shard shard_;
  const CriticalReaderId id_;
  mutable weir::Mutex mu_;
  ShardState state_ ABSL_GUARDED_BY(mu_);
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  Frontier since_ ABSL_GUARDED_BY(mu_);
};

// OK if `as_of` can be read from `state`: since <= as_of < upper.
absl::Status check_readable(const Shard& shard, const proto::ProtoShardState& state,
                            uint64_t as_of);

// The consolidated updates at `as_of` of some runs: each distinct data with the sum of its diffs
// at times <= as_of, in data order, zero sums left out.
//
// Thread safety: thread-compatible.
class ConsolidatedRuns {
 public:
  ConsolidatedRuns(std::vector<RunCursor> runs, uint64_t as_of);

  // Moves to the next update; false at the end or on an error (see status()).
  bool next();
  // REQUIRES: the last next() returned true. data() stays valid until the next next().
  std::string_view data() const { return merger_.key(); }
  int64_t diff() const { return diff_; }
  const absl::Status& status() const { return merger_.status(); }

 private:
  RunMerger merger_;
  uint64_t as_of_;
  int64_t diff_ = 0;
};

// ConsolidatedRuns read on a thread of its own, a bounded queue of blocks ahead of the reader.
//
// Thread safety: thread-compatible (the thread is internal).
class BackgroundRuns {
 public:
  BackgroundRuns(std::vector<RunCursor> runs, uint64_t as_of);
  // Stops the thread (it may be waiting for room in the queue) and joins it.
  ~BackgroundRuns();
  BackgroundRuns(const BackgroundRuns&) = delete;
  BackgroundRuns& operator=(const BackgroundRuns&) = delete;

  // As ConsolidatedRuns.
  bool next();
  std::string_view data() const { return data_; }
  int64_t diff() const { return diff_; }
  const absl::Status& status() const { return status_; }

 private:
  struct Block {
    std::string bytes;                             // The data of the updates, end to end.
    std::vector<std::pair<size_t, int64_t>> ends;  // End of each update's data, and its diff.
  };

  void produce(ConsolidatedRuns runs);

  weir::Mutex mu_;
  weir::CondVar changed_;
  std::deque<std::unique_ptr<Block>> ready_ ABSL_GUARDED_BY(mu_);
  // Blocks the reader is done with, for the thread to fill again (fresh memory costs page
  // faults).
  std::vector<std::unique_ptr<Block>> spare_ ABSL_GUARDED_BY(mu_);
  bool produced_ ABSL_GUARDED_BY(mu_) = false;  // No more blocks will come.
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status produced_status_ ABSL_GUARDED_BY(mu_);  // Set with produced_.
  std::unique_ptr<Block> block_;                       // The block being read.
  size_t index_ = 0;                                   // The next update of block_.
  std::string_view data_;
  int64_t diff_ = 0;
  absl::Status status_;
  std::thread thread_;
};

class SnapshotCursorImpl {
 public:
  // A consolidated snapshot of `state` at `as_of`. REQUIRES: check_readable(...) is OK.
  SnapshotCursorImpl(const Shard& shard, const proto::ProtoShardState& state, uint64_t as_of,
                     SeqnoHold hold);

  bool next();
  const absl::Status& status() const { return status_; }
  std::string_view data() const { return data_; }
  uint64_t time() const { return as_of_; }
  int64_t diff() const { return diff_; }
  uint64_t update_bytes() const { return update_bytes_; }

 private:
  SnapshotCursorImpl(std::vector<RunCursor> runs, uint64_t as_of, SeqnoHold hold);

  // Moves `stream` (null: no stream) to its next update and sets `live`; false on an error (into
  // status_).
  template <class Stream>
  bool advance(Stream* stream, bool& live);

  uint64_t as_of_;
  SeqnoHold hold_;
  // Many runs are merged in two halves, one of them on a thread of its own (background_, null
  // for few runs), and the halves merged here: the merge of many runs, not the decoding of parts,
  // bounds a snapshot. background_ takes its half before local_ is built from the rest.
  std::unique_ptr<BackgroundRuns> background_;
  ConsolidatedRuns local_;
  bool local_live_ = false;  // local_ is at an update.
  bool background_live_ = false;
  // The update of local_ (background_) was returned by next(): move past it in the next next().
  bool consumed_local_ = true;
  bool consumed_background_ = true;
  std::string_view data_;
  int64_t diff_ = 0;
  absl::Status status_;
  uint64_t update_bytes_ = 0;
  uint64_t steps_ = 0;  // Calls of next(): every 1024th renews the lease if due.
};

class ListenImpl {
 public:
  // Yields the updates at times >= `frontier`.
  ListenImpl(std::shared_ptr<ReaderCore> reader, Frontier frontier)
      : reader_(std::move(reader)), frontier_(frontier) {}

  absl::StatusOr<std::optional<ListenEvent>> next();
  absl::StatusOr<std::optional<PartsBatch>> next_parts();
  Frontier frontier() const { return frontier_; }

 private:
  // Loads every batch from frontier_ to the upper of the latest state into batches_ unless some
  // are loaded; false if the upper has not passed frontier_ yet.
  absl::StatusOr<bool> load_batches();

  std::shared_ptr<ReaderCore> reader_;
  Frontier frontier_;
  // The batches not yet yielded, in order (the front one part by part from next_part_), and the
  // seqno of the state they came from.
  std::deque<proto::ProtoBatch> batches_;
  int next_part_ = 0;
  SeqnoHold hold_;
};

}  // namespace weir::persist::internal
