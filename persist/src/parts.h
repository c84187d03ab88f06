// Writing parts: PartBuffer sorts and consolidates updates, PartUploader encodes and uploads
// parts on the I/O threads with a bounded number in flight.

#pragma once

#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "codec.h"
#include "retry.h"
#include "thread_pool.h"

#include "weir/mutex.h"
#include "weir/persist/blob.h"
#include "weir/status.h"

namespace weir::persist::internal {

// The largest data of one update; offsets into a part's data fit in 32 bits.
inline constexpr size_t kMaxDataBytes = size_t{1} << 31;

// Updates buffered for one part, in arrival order until sort_and_consolidate(), then a
// PartSource.
//
// Thread safety: worker-local.
class PartBuffer {
 public:
  PartBuffer() = default;
  // Reserves room for about `expected_bytes` of updates.
  explicit PartBuffer(size_t expected_bytes);

  // REQUIRES: data.size() <= kMaxDataBytes and fits(data.size()).
  void add(std::string_view data, uint64_t time, int64_t diff);
  // Whether `data_bytes` more bytes of data can still be addressed.
  bool fits(size_t data_bytes) const { return arena_.size() + data_bytes <= UINT32_MAX; }

  bool empty() const { return entries_.empty(); }
  uint64_t update_bytes() const { return arena_.size() + 16 * entries_.size(); }

  // Sorts by (data, time), sums the diffs of equal (data, time) and drops zero sums.
  void sort_and_consolidate();

  // Empties the buffer, keeping its memory for reuse.
  void clear();

  // The PartSource, after sort_and_consolidate().
  size_t size() const { return entries_.size(); }
  std::string_view data(size_t i) const {
    return std::string_view(arena_.data() + entries_[i].offset, entries_[i].size);
  }
  uint64_t time(size_t i) const { return entries_[i].time; }
  int64_t diff(size_t i) const { return entries_[i].diff; }
  size_t data_bytes() const { return data_bytes_; }

 private:
  struct Entry {
    uint64_t prefix;  // The first 8 bytes of data, big-endian, zero-padded: most compares end here.
    uint32_t offset;
    uint32_t size;
    uint64_t time;
    int64_t diff;
  };

  std::string arena_;
  std::vector<Entry> entries_;
  std::vector<Entry> scratch_;  // For sorting; kept with the buffer so that it is reused.
  size_t data_bytes_ = 0;       // Of the entries left by sort_and_consolidate().
};

// Buffers handed back by finished uploads for the next part, shared by the builders of every
// client of the process that writes parts of one size: fresh buffers of part size cost page
// faults on every part (on the development VM, at times as much as encoding the part).
//
// Thread safety: thread-safe.
class BufferRecycler {
 public:
  // Keeps at most `max_free` buffers, each reserving `part_bytes`.
  BufferRecycler(size_t part_bytes, size_t max_free)
      : part_bytes_(part_bytes), max_free_(max_free) {}

  // The process's recycler of buffers reserving `part_bytes`, keeping at least `max_free` of them
  // (the most any of its users asked for). It outlives the clients: one opened later starts warm.
  static std::shared_ptr<BufferRecycler> for_part_size(size_t part_bytes, size_t max_free);

  PartBuffer take();
  void give(PartBuffer buffer);

 private:
  const size_t part_bytes_;
  weir::Mutex mu_;
  size_t max_free_ ABSL_GUARDED_BY(mu_);
  std::vector<PartBuffer> free_ ABSL_GUARDED_BY(mu_);
};

// A part that was uploaded, with its first and last (data, time) to tell runs apart.
struct WrittenPart {
  PartRef ref;
  std::string first_data;
  uint64_t first_time = 0;
  std::string last_data;
  uint64_t last_time = 0;
};

// True if part `next` can follow `previous` in one run.
bool continues_run(const WrittenPart& previous, const WrittenPart& next);

// Encodes `source` and stores it under `key`; nullopt (and nothing stored) if it is empty.
template <PartSource Source>
absl::StatusOr<std::optional<WrittenPart>> write_part(Blob& blob, std::string_view shard_id,
                                                      const std::string& key, const Source& source,
                                                      int zstd_level) {
  const size_t n = source.size();
  if (n == 0) {
    return std::nullopt;
  }
  const EncodedPart encoded = encode_part(shard_id, source, zstd_level);
  // The key is fresh and the bytes the same on every try: a retry after a lost reply is harmless,
  // and a batch or compaction need not fail for one failed upload of its many.
  WEIR_RETURN_IF_ERROR(
      retry_unavailable(kStoreAttempts, [&] { return blob.set(key, encoded.bytes); }));
  WrittenPart part;
  part.ref = {key, encoded.bytes.size(), n, source.data_bytes() + 16 * static_cast<uint64_t>(n)};
  part.first_data = std::string(source.data(0));
  part.first_time = source.time(0);
  part.last_data = std::string(source.data(n - 1));
  part.last_time = source.time(n - 1);
  return part;
}

// Uploads parts on the pool, keeping at most `max_in_flight` queued or running.
//
// Thread safety: worker-local. Uploads still running when it is destroyed finish on their own.
class PartUploader {
 public:
  using Task = absl::AnyInvocable<absl::StatusOr<std::optional<WrittenPart>>() &&>;

  // `pool` must outlive this.
  PartUploader(ThreadPool& pool, std::shared_ptr<Blob> blob, size_t max_in_flight);
  PartUploader(PartUploader&&) = default;

  // Runs `task`, which writes the part `key` (see write_part), on the pool. Waits first while
  // max_in_flight uploads are pending; returns the first error of an earlier upload.
  // An urgent upload goes ahead of the pool's queue (see ThreadPool::schedule).
  absl::Status upload(std::string key, Task task, bool urgent = false);

  // True while the next upload would wait (max_in_flight uploads are pending).
  bool full() const { return pending_.size() >= max_in_flight_; }
  // Waits until the next upload would not; returns the first error of an earlier upload.
  absl::Status wait_for_room();

  // Waits for every upload and returns the parts in upload order, empty ones left out.
  absl::StatusOr<std::vector<WrittenPart>> finish();

  // Waits for every upload, then removes every part this uploader wrote.
  absl::Status discard();

 private:
  using Pending = std::future<absl::StatusOr<std::optional<WrittenPart>>>;

  // Waits for the oldest pending upload.
  absl::Status collect_oldest();

  ThreadPool* pool_;
  std::shared_ptr<Blob> blob_;
  size_t max_in_flight_;
  std::deque<Pending> pending_;
  std::vector<WrittenPart> done_;
  std::vector<std::string> keys_;  // Every key uploaded to or being uploaded to.
  absl::Status error_;
};

}  // namespace weir::persist::internal
