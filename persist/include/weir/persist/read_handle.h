// ReadHandle: reads one shard, holding back its since with a lease.
//
// snapshot(as_of) is the consolidated contents at `as_of`: every update at a time <= as_of,
// summed per data, with the time replaced by as_of and zero sums left out. It needs
// since <= as_of < upper. listen(as_of) then yields every update at a time > as_of, batch by
// batch in upper order, each exactly once: snapshot(t) + listen(t) is the whole collection.
//
// The handle's since is a read hold: compaction never advances times beyond the smallest since
// of all readers, so every as_of >= this handle's since stays readable. downgrade_since() lets
// go of older times. The hold is leased: renew it with heartbeat() (reads renew it too) within
// PersistConfig::reader_lease, or GC may expire it.
//
//   WEIR_ASSIGN_OR_RETURN(ReadHandle reader, client->open_reader("orders"));
//   WEIR_ASSIGN_OR_RETURN(SnapshotCursor cursor, reader.snapshot_cursor(41));
//   while (cursor.next()) { use(cursor.data(), cursor.diff()); }
//   WEIR_RETURN_IF_ERROR(cursor.status());
//
// Thread safety: ReadHandle is thread-safe; SnapshotCursor and Listen are worker-local. Cursors
// and listens may outlive their ReadHandle.

#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "weir/persist/batch.h"
#include "weir/persist/frontier.h"
#include "weir/persist/ids.h"

namespace weir::persist {

namespace internal {
class ReaderCore;
class SnapshotCursorImpl;
class ListenImpl;
class SeqnoHold;
}  // namespace internal

// Streams a consolidated snapshot in data order: a k-way merge over the sorted runs of the shard.
// Parts are fetched and decoded ahead on the client's I/O threads: memory is about two parts per
// run (at least five parts in all), whatever the shard's size; compaction keeps runs few.
class SnapshotCursor {
 public:
  SnapshotCursor(SnapshotCursor&&) noexcept;
  SnapshotCursor& operator=(SnapshotCursor&&) noexcept;
  ~SnapshotCursor();

  // Moves to the next update. False at the end or on an error; then check status().
  bool next();
  absl::Status status() const;

  // The current update. REQUIRES: the last next() returned true. data() stays valid until the
  // next call to next().
  std::string_view data() const;
  uint64_t time() const;
  int64_t diff() const;

  // Bytes of updates returned so far (data + 16 each).
  uint64_t update_bytes() const;

 private:
  friend class ReadHandle;
  friend class PersistClient;
  explicit SnapshotCursor(std::unique_ptr<internal::SnapshotCursorImpl> impl);

  std::unique_ptr<internal::SnapshotCursorImpl> impl_;
};

// What a Listen yields: the updates of one part, in (data, time) order, all at times
// >= the previous progress; then `progress`, the frontier below which everything has been
// yielded.
struct ListenEvent {
  std::vector<Update> updates;
  Frontier progress;
};

// ---- Distributed reads ----
// A dataflow that reads a shard on many workers (weir::sources::persist_source) lists the parts on
// one worker (ReadHandle::snapshot_parts, Listen::next_parts) and fetches them on all
// (PersistClient::fetch_part: any client of the same stores, in any process).

// One part of a distributed read, with which of its updates belong to the read and at what time.
// A plain value: copy it, encode it, send it.
struct LeasedPart {
  ShardId shard_id;
  std::string shard_name;  // For messages.
  PartRef part;
  uint64_t lower = 0;  // Updates at times before it are left out (a listen yielded them already).
  // A snapshot's part: only the updates at times <= as_of, each with its time advanced to as_of.
  std::optional<uint64_t> as_of;

  // A versioned binary encoding.
  std::string encode() const;
  // InvalidArgument if `bytes` is not an encoded part of a version this build reads, or names a
  // key outside its shard.
  static absl::StatusOr<LeasedPart> decode(std::string_view bytes);
};

// Keeps the parts a distributed read handed out from GC while any copy of it lives, as long as
// the reader that listed them keeps its lease (its listen renews it; so does heartbeat()).
class PartsLease {
 public:
  PartsLease() = default;
  explicit PartsLease(std::shared_ptr<internal::SeqnoHold> hold) : hold_(std::move(hold)) {}
  // Lets go of this copy's hold now.
  void release() { hold_.reset(); }

 private:
  std::shared_ptr<internal::SeqnoHold> hold_;
};

// What a distributed read lists at a time: parts, and the frontier below which every update of
// the read is in them or in earlier ones.
struct PartsBatch {
  std::vector<LeasedPart> parts;
  Frontier progress;
  PartsLease lease;
};

class Listen {
 public:
  Listen(Listen&&) noexcept;
  Listen& operator=(Listen&&) noexcept;
  ~Listen();

  // The next event if one is available now; nullopt if the shard's upper has not passed
  // frontier() yet. Batches are fetched one part at a time.
  absl::StatusOr<std::optional<ListenEvent>> next();

  // The parts of every batch from frontier() to the upper of the shard's latest state (the rest
  // of a batch next() started, then the batches after it), unfetched, each with the lower of its
  // batch; nullopt as next(). Its progress is the last batch's upper. One state read however
  // far behind the listen is.
  absl::StatusOr<std::optional<PartsBatch>> next_parts();

  // Every update at a time before this has been yielded.
  Frontier frontier() const;

 private:
  friend class ReadHandle;
  explicit Listen(std::unique_ptr<internal::ListenImpl> impl);

  std::unique_ptr<internal::ListenImpl> impl_;
};

class ReadHandle {
 public:
  ReadHandle(ReadHandle&&) noexcept;
  ReadHandle& operator=(ReadHandle&&) noexcept;
  // Does not expire the reader (that needs consensus); call expire().
  ~ReadHandle();

  const ShardId& shard_id() const;
  const std::string& reader_id() const;

  // This reader's hold.
  Frontier since() const;

  // Moves this reader's hold forward to `new_since` (a smaller value is ignored).
  absl::Status downgrade_since(Frontier new_since);

  // The consolidated contents at `as_of`, sorted by data, every time equal to `as_of`.
  // FailedPrecondition if as_of is before the shard's since or not before its upper.
  absl::StatusOr<std::vector<Update>> snapshot(uint64_t as_of);
  absl::StatusOr<SnapshotCursor> snapshot_cursor(uint64_t as_of);
  // The parts of snapshot(as_of), unconsolidated and unfetched (see LeasedPart); progress is
  // as_of + 1. The same preconditions as snapshot().
  absl::StatusOr<PartsBatch> snapshot_parts(uint64_t as_of);

  // Every update at a time > as_of. FailedPrecondition if as_of is before the since. Keep this
  // reader's since at or before the listen's frontier - 1, or a later next() may fail (it never
  // yields an update twice).
  absl::StatusOr<Listen> listen(uint64_t as_of);

  absl::StatusOr<Frontier> fetch_recent_upper();

  // Renews the lease and releases consensus versions no cursor or listen of this reader uses.
  absl::Status heartbeat();
  // Renews the lease if a quarter of it has passed since the last renewal (a write only then).
  absl::Status heartbeat_if_due();

  // Deregisters the reader, releasing its hold. The handle is spent afterwards.
  absl::Status expire();

 private:
  friend class PersistClient;
  explicit ReadHandle(std::shared_ptr<internal::ReaderCore> core);

  std::shared_ptr<internal::ReaderCore> core_;
};

}  // namespace weir::persist
