// ChangeBatch<T>: a collection of (T, int64) updates, compacted lazily and amortized.
//
// Updates to the same T add up; entries whose sum is zero disappear on compaction. Compaction
// sorts by T's `operator<`, so T needs a total order (every timestamp has one, and so do the
// (Location, T) pairs of the progress protocol).
//
// Cost: the batch is a compacted, sorted prefix followed by an unsorted tail of raw updates.
// `update` appends to the tail, and compacts only once the tail is as long as the prefix, so a
// batch that is written often and read rarely costs amortized O(log n) per update. Compaction
// sorts only the tail and merges it into the prefix (no re-sort of the prefix; a tail whose times
// all follow the prefix is appended in place). Readers (`iter`, `drain`, `is_empty` when it
// cannot answer from the sizes alone) compact first, so a reader pays O(tail log tail + prefix)
// once and nothing more until the next update. In steady state no call allocates: the merge
// buffer is kept between compactions.
//
// Thread safety: worker-local; no internal synchronization.

#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"

namespace weir {

template <class T>
class ChangeBatch {
 public:
  using Update = std::pair<T, int64_t>;

  ChangeBatch() = default;
  // A batch holding the single update (time, diff).
  ChangeBatch(const T& time, int64_t diff) { update(time, diff); }

  // Adds `diff` to the count of `time`. Amortized O(log n).
  void update(const T& time, int64_t diff) {
    if (diff == 0) return;
    // A change to the time updated last (a session's capability released in the run that made
    // it, a downgrade undone) folds into that entry instead of growing the batch.
    if (!updates_.empty() && updates_.back().first == time) {
      updates_.back().second += diff;
      if (updates_.back().second == 0) {
        updates_.pop_back();
        if (clean_ > updates_.size()) clean_ = updates_.size();
      }
      return;
    }
    updates_.emplace_back(time, diff);
    maintain_bounds();
  }

  template <class Range>
  void extend(const Range& updates) {
    for (const auto& [time, diff] : updates) update(time, diff);
  }

  // True if every count is zero. O(1) when the compacted prefix outnumbers the tail (the tail
  // cannot cancel all of it); otherwise compacts.
  bool is_empty() {
    if (clean_ > updates_.size() / 2) return false;
    compact();
    return updates_.empty();
  }

  // The compacted, sorted updates, all with nonzero counts. Valid until the next non-const call.
  std::span<const Update> iter() {
    compact();
    return updates_;
  }

  // Calls f(time, diff) for every nonzero count in order, then empties the batch.
  template <class F>
  void drain(F&& f) {
    compact();
    for (const auto& [time, diff] : updates_) f(time, diff);
    clear();
  }

  // Moves every update into `other`.
  void drain_into(ChangeBatch& other) {
    if (other.updates_.empty()) {
      std::swap(updates_, other.updates_);
      std::swap(clean_, other.clean_);
    } else {
      for (const auto& [time, diff] : updates_) other.update(time, diff);
    }
    clear();
  }

  // Empties the batch, keeping its memory.
  void clear() {
    updates_.clear();
    clean_ = 0;
  }

  // Sorts the tail, merges equal times into the prefix and drops zero counts. O(tail log tail)
  // plus O(prefix) when some tail time falls inside the prefix's range.
  void compact() {
    if (clean_ == updates_.size()) return;
    // Sort and consolidate the tail [clean_, size) in place.
    auto tail = updates_.begin() + static_cast<std::ptrdiff_t>(clean_);
    std::sort(tail, updates_.end(),
              [](const Update& a, const Update& b) { return a.first < b.first; });
    size_t end = consolidate(clean_, updates_.size());
    if (clean_ == 0 || end == clean_ || updates_[clean_ - 1].first < updates_[clean_].first) {
      // No prefix, no surviving tail, or a tail wholly after the prefix: already in order.
      updates_.resize(end);
      clean_ = end;
      return;
    }
    // Merge the two sorted runs into the kept buffer, adding equal times and dropping zeros.
    scratch_.clear();
    size_t i = 0;
    size_t j = clean_;
    while (i < clean_ || j < end) {
      if (j == end || (i < clean_ && updates_[i].first < updates_[j].first)) {
        scratch_.push_back(std::move(updates_[i++]));
      } else if (i == clean_ || updates_[j].first < updates_[i].first) {
        scratch_.push_back(std::move(updates_[j++]));
      } else {
        const int64_t sum = updates_[i].second + updates_[j].second;
        if (sum != 0) scratch_.emplace_back(std::move(updates_[i].first), sum);
        ++i;
        ++j;
      }
    }
    std::swap(updates_, scratch_);
    scratch_.clear();
    clean_ = updates_.size();
  }

  // The raw, possibly uncompacted updates. Exposed for code that compacts elsewhere.
  auto& unstable_internal_updates() { return updates_; }
  size_t unstable_len() const { return updates_.size(); }

 private:
  // Bounds memory when a batch sees many updates without being read: compacting once the tail
  // is as long as the prefix keeps the work per update amortized O(log n).
  void maintain_bounds() {
    if (updates_.size() > 32 && updates_.size() >> 1 >= clean_) compact();
  }

  // Adds up equal neighbours of the sorted range [begin, end) and drops zeros, in place.
  // Returns the new end.
  size_t consolidate(size_t begin, size_t end) {
    size_t out = begin;
    for (size_t i = begin; i < end; ++i) {
      if (out > begin && updates_[out - 1].first == updates_[i].first) {
        updates_[out - 1].second += updates_[i].second;
      } else {
        if (out > begin && updates_[out - 1].second == 0) --out;
        if (out != i) updates_[out] = std::move(updates_[i]);
        ++out;
      }
    }
    if (out > begin && updates_[out - 1].second == 0) --out;
    return out;
  }

  // Most batches hold one or two times: keep those inline, without a heap allocation.
  // Invariant: [0, clean_) is sorted by time, with distinct times and nonzero counts.
  absl::InlinedVector<Update, 2> updates_;
  size_t clean_ = 0;
  // Merge buffer of `compact`, kept so that steady-state compaction does not allocate.
  // Empty between calls.
  absl::InlinedVector<Update, 2> scratch_;
};

}  // namespace weir
