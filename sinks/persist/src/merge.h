// Reading parts in order: RunCursor walks one run part by part, fetching the next part ahead on
// the I/O threads; RunMerger merges runs by data (a k-way merge over a heap of runs).

#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "codec.h"
#include "core.h"
#include "thread_pool.h"

namespace weir::persist::internal {

// Thread safety: worker-local.
class RunCursor {
 public:
  // Starts fetching the first part. `pool` must outlive this.
  RunCursor(ThreadPool& pool, PartFetcher fetcher, std::vector<PartRef> parts);
  RunCursor(RunCursor&&) = default;
  RunCursor& operator=(RunCursor&&) = default;

  // Moves to the first update (waiting for its part), then to the next one. False at the end of
  // the run or on an error (see status()).
  bool advance();

  // The current update. REQUIRES: the last advance() returned true.
  std::string_view data() const { return part_->data(index_); }
  uint64_t time() const { return part_->time(index_); }
  int64_t diff() const { return part_->diff(index_); }
  // The part data() points into.
  const std::shared_ptr<const DecodedPart>& part() const { return part_; }

  const absl::Status& status() const { return status_; }

 private:
  using Fetched = std::future<absl::StatusOr<std::shared_ptr<const DecodedPart>>>;

  void prefetch();

  ThreadPool* pool_;
  PartFetcher fetcher_;
  std::vector<PartRef> parts_;
  size_t next_part_ = 0;  // The part `prefetched_` holds or will hold.
  Fetched prefetched_;
  std::shared_ptr<const DecodedPart> part_;
  size_t index_ = 0;
  bool started_ = false;
  absl::Status status_;
};

// Merges runs sorted by (data, time) into one sequence of distinct data, each with the
// (time, diff) pairs of every run.
//
// Thread safety: worker-local.
class RunMerger {
 public:
  explicit RunMerger(std::vector<RunCursor> runs);

  // Moves to the next distinct data. False at the end or on an error (see status()).
  bool next_key();

  // REQUIRES: the last next_key() returned true. key() stays valid until the next next_key().
  std::string_view key() const { return key_; }
  const std::vector<std::pair<uint64_t, int64_t>>& entries() const { return entries_; }

  const absl::Status& status() const { return status_; }

 private:
  bool less(uint32_t a, uint32_t b) const { return runs_[a].data() < runs_[b].data(); }
  void sift_down(size_t i);
  // Removes the top of the heap.
  void pop();

  std::vector<RunCursor> runs_;
  std::vector<uint32_t> heap_;  // Runs with a current update; a min-heap by data.
  bool started_ = false;
  std::shared_ptr<const DecodedPart> key_part_;  // Keeps key_ alive.
  std::string_view key_;
  std::vector<std::pair<uint64_t, int64_t>> entries_;
  absl::Status status_;
};

}  // namespace weir::persist::internal
