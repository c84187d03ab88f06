// Reading parts in order: RunCursor walks one run part by part, fetching the next part ahead on
// the I/O threads; RunMerger merges runs by data with a loser tree (log2(runs) comparisons per
// update).

#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <deque>
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
  // Starts fetching the first `depth` parts; it keeps that many fetched or being fetched ahead.
  // `pool` must outlive this.
  RunCursor(ThreadPool& pool, PartFetcher fetcher, std::vector<PartRef> parts, size_t depth = 1);
  RunCursor(RunCursor&&) = default;
  RunCursor& operator=(RunCursor&&) = default;

  // Moves to the first update (waiting for its part), then to the next one. False at the end of
  // the run or on an error (see status()).
  bool advance();

  // The current update. REQUIRES: the last advance() returned true.
  std::string_view data() const { return data_; }
  uint64_t time() const { return part_->time(index_); }
  int64_t diff() const { return part_->diff(index_); }
  // The part data() points into.
  const std::shared_ptr<const DecodedPart>& part() const { return part_; }
  // True if the next advance() leaves the current part (which may then be freed).
  bool at_last_of_part() const { return index_ + 1 >= part_->size(); }

  const absl::Status& status() const { return status_; }

 private:
  using Fetched = std::future<absl::StatusOr<std::shared_ptr<const DecodedPart>>>;

  // Starts fetches until depth_ parts are ahead.
  void prefetch();

  ThreadPool* pool_;
  PartFetcher fetcher_;
  std::vector<PartRef> parts_;
  size_t depth_;
  size_t next_fetch_ = 0;         // The next part to start fetching.
  std::deque<Fetched> fetching_;  // The parts after part_, in order.
  std::shared_ptr<const DecodedPart> part_;
  size_t index_ = 0;
  std::string_view data_;  // part_->data(index_), kept for the merge's comparisons.
  bool started_ = false;
  absl::Status status_;
};

// Merges runs sorted by (data, time) into one sequence of distinct data.
//
// Thread safety: worker-local.
class RunMerger {
 public:
  explicit RunMerger(std::vector<RunCursor> runs);

  // Moves to the next distinct data and calls visit(time, diff) for each of its updates in every
  // run. False at the end or on an error (see status()).
  template <class Visit>
  bool next_key(Visit&& visit);

  // REQUIRES: the last next_key() returned true. key() stays valid until the next next_key().
  std::string_view key() const { return key_; }

  const absl::Status& status() const { return status_; }

 private:
  // True if run `a` comes before run `b`; exhausted runs come last.
  bool before(uint32_t a, uint32_t b) const {
    // An exhausted run's prefix is the largest, so only a tie needs the exhausted flags.
    if (prefixes_[a] != prefixes_[b]) {
      return prefixes_[a] < prefixes_[b];
    }
    if (exhausted_[a] || exhausted_[b]) {
      return !exhausted_[a] && exhausted_[b];
    }
    return heads_[a] < heads_[b];
  }
  bool start();
  // Plays run `run` up the tree after its current update changed.
  void replay(uint32_t run);

  std::vector<RunCursor> runs_;
  // The current data of each run and its prefix, side by side: the tree's comparisons touch only
  // the prefixes, and the data itself on a tie.
  std::vector<std::string_view> heads_;
  std::vector<uint64_t> prefixes_;  // key_prefix(heads_[r]); UINT64_MAX once run r is exhausted.
  std::vector<char> exhausted_;
  // tree_[0] is the run with the smallest data; tree_[1 .. leaves) hold the loser of each match.
  std::vector<uint32_t> tree_;
  uint32_t leaves_ = 1;  // A power of two >= runs_.size(); leaf i is run i.
  bool started_ = false;
  // Keeps key_ alive once its run has moved past its part (set only then: copying a shared_ptr
  // for every key costs two atomic operations, which stall the merge's loads).
  std::shared_ptr<const DecodedPart> key_part_;
  std::string_view key_;
  absl::Status status_;
};

template <class Visit>
bool RunMerger::next_key(Visit&& visit) {
  if (!status_.ok() || (!started_ && !start())) {
    return false;
  }
  uint32_t run = tree_[0];
  if (runs_.empty() || exhausted_[run]) {
    key_part_ = nullptr;
    key_ = {};
    return false;
  }
  key_part_.reset();
  key_ = runs_[run].data();
  const uint32_t key_run = run;
  const uint64_t head_prefix = prefixes_[run];
  do {
    RunCursor& cursor = runs_[run];
    bool more;
    uint64_t prefix = 0;
    do {
      visit(cursor.time(), cursor.diff());
      if (run == key_run && cursor.at_last_of_part()) {
        // key_ points into this part, which the cursor is about to let go of.
        key_part_ = cursor.part();
      }
      more = cursor.advance();
    } while (more && (prefix = key_prefix(cursor.data())) == head_prefix && cursor.data() == key_);
    if (more) {
      heads_[run] = cursor.data();
      prefixes_[run] = prefix;
    } else {
      if (!cursor.status().ok()) {
        status_ = cursor.status();
        return false;
      }
      exhausted_[run] = 1;
      prefixes_[run] = UINT64_MAX;
    }
    replay(run);
    run = tree_[0];
  } while (prefixes_[run] == head_prefix && !exhausted_[run] && heads_[run] == key_);
  return true;
}

}  // namespace weir::persist::internal
