// Updates, batches and the BatchBuilder that writes them.
//
// An update is (data, time, diff): `data` is opaque bytes encoded by the caller, `time` a uint64
// offset, `diff` how many copies are added (negative: removed). A Batch holds the updates at
// times in [lower, upper) as parts in Blob, each part sorted by (data, time) and consolidated.
// A batch is not part of the shard until WriteHandle::compare_and_append adds it; until then its
// parts are protected from GC by the lease of the writer that built them.
//
// Batches are transmittable: a Batch is a plain value that encode() turns into bytes, so one
// worker or process can build it and another can append it.
//
//   WEIR_ASSIGN_OR_RETURN(WriteHandle writer, client->open_writer("orders"));
//   BatchBuilder builder = writer.builder(Frontier(100));
//   WEIR_RETURN_IF_ERROR(builder.add("row-bytes", 104, +1));
//   WEIR_ASSIGN_OR_RETURN(Batch batch, builder.finish(Frontier(110)));
//   std::string wire = batch.encode();           // ... send it elsewhere ...
//   WEIR_ASSIGN_OR_RETURN(Batch received, Batch::decode(wire));
//   WEIR_ASSIGN_OR_RETURN(AppendResult result,
//                         writer.compare_and_append(received, Frontier(100), Frontier(110)));

#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "weir/persist/frontier.h"
#include "weir/persist/ids.h"

namespace weir::persist {

struct Update {
  std::string data;
  uint64_t time = 0;
  int64_t diff = 0;

  friend bool operator==(const Update&, const Update&) = default;
};

// The bytes an update counts for in throughput figures: its data plus 8 for time and 8 for diff.
inline uint64_t update_bytes(std::string_view data) { return data.size() + 16; }

// A reference to one part blob.
struct PartRef {
  std::string key;
  uint64_t encoded_bytes = 0;  // Size of the blob.
  uint64_t num_updates = 0;
  uint64_t update_bytes = 0;
};

// The updates of a batch are at times in [lower, upper); times before `since` have been advanced
// to `since` (by compaction).
struct BatchDescription {
  Frontier lower;
  Frontier upper;
  Frontier since;

  friend bool operator==(const BatchDescription&, const BatchDescription&) = default;
};

// A plain value: copy it, encode it, send it.
struct Batch {
  ShardId shard_id;
  std::string writer_id;  // Whose lease protects the parts until the batch is appended.
  BatchDescription description;
  std::vector<PartRef> parts;
  // Parts form runs, sorted end to end; this is the index of the first part of each run after
  // the first one.
  std::vector<uint32_t> run_starts;
  // Unique to this batch (BatchBuilder::finish draws it; encode/decode keep it). A writer records
  // the token of the last batch it appended, so compare_and_append of a batch that is already in
  // the shard (a retry after an indeterminate outcome) reports it appended, not a mismatch, even
  // after compaction rewrote its parts or when it has none. Empty for batches decoded from an
  // older encoding: those are recognised by their first part only.
  std::string idempotency_token;

  uint64_t num_updates() const;
  uint64_t update_bytes() const;

  // A versioned binary encoding.
  std::string encode() const;
  // InvalidArgument if `bytes` is not an encoded batch of a version this build reads.
  static absl::StatusOr<Batch> decode(std::string_view bytes);
};

namespace internal {
class BatchBuilderImpl;
}  // namespace internal

// Builds one batch. Created by WriteHandle::builder(lower). Parts are sorted, encoded and
// uploaded on the client's I/O threads as they fill (PersistConfig::part_target_bytes), so memory
// stays bounded by a few parts whatever the batch size.
//
// Thread safety: worker-local (one thread at a time). It may outlive the WriteHandle.
class BatchBuilder {
 public:
  BatchBuilder(BatchBuilder&&) noexcept;
  BatchBuilder& operator=(BatchBuilder&&) noexcept;
  BatchBuilder(const BatchBuilder&) = delete;
  BatchBuilder& operator=(const BatchBuilder&) = delete;
  // Does not wait for uploads in flight. Parts of a batch that is never appended are orphans
  // that GC removes once the writer's lease has expired; discard() removes them now.
  ~BatchBuilder();

  // Adds one update. InvalidArgument if `time` is before the batch's lower. When a part fills,
  // it may wait for an earlier upload (PersistConfig::max_parts_in_flight), unless uploads_full()
  // was false.
  absl::Status add(std::string_view data, uint64_t time, int64_t diff);

  // True while an add() that fills a part would wait for an upload. A caller that must not block
  // (an async operator on a worker thread) runs wait_for_room() elsewhere first.
  bool uploads_full() const;
  absl::Status wait_for_room();

  // Uploads what remains and returns the batch [lower, upper). InvalidArgument if an added
  // time is not before `upper` or `upper` is before `lower`. The builder is spent afterwards.
  absl::StatusOr<Batch> finish(Frontier upper);

  // Stops building and removes the parts uploaded so far.
  absl::Status discard();

  uint64_t num_updates_added() const;

 private:
  friend class WriteHandle;
  explicit BatchBuilder(std::unique_ptr<internal::BatchBuilderImpl> impl);

  std::unique_ptr<internal::BatchBuilderImpl> impl_;
};

}  // namespace weir::persist
