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
#include "thread_pool.h"

#include "weir/sinks/persist/blob.h"

namespace weir::persist::internal {

// The largest data of one update; offsets into a part's data fit in 32 bits.
inline constexpr size_t kMaxDataBytes = size_t{1} << 31;

// Updates buffered for one part, in arrival order.
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
  Columns sort_and_consolidate() &&;

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

// Uploads parts on the pool, keeping at most `max_in_flight` queued or running.
//
// Thread safety: worker-local. Uploads still running when it is destroyed finish on their own.
class PartUploader {
 public:
  // `pool` must outlive this.
  PartUploader(ThreadPool& pool, std::shared_ptr<Blob> blob, std::string shard_id, int zstd_level,
               size_t max_in_flight);
  PartUploader(PartUploader&&) = default;

  // Runs `produce` on the pool and uploads the columns it returns under `key` (nothing if they
  // are empty). Waits first while max_in_flight uploads are pending; returns the first error of
  // an earlier upload.
  absl::Status upload(std::string key, absl::AnyInvocable<Columns() &&> produce);

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
  std::string shard_id_;
  int zstd_level_;
  size_t max_in_flight_;
  std::deque<Pending> pending_;
  std::vector<WrittenPart> done_;
  std::vector<std::string> keys_;  // Every key uploaded to or being uploaded to.
  absl::Status error_;
};

}  // namespace weir::persist::internal
