// ChangeBatch<T>: a collection of (T, int64) updates, compacted lazily.
//
// Updates to the same T add up; entries whose sum is zero disappear on compaction. Compaction
// sorts by T's `operator<`, so T needs a total order (every timestamp has one, and so do the
// (Location, T) pairs of the progress protocol).
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

  // Adds `diff` to the count of `time`.
  void update(const T& time, int64_t diff) {
    if (diff == 0) return;
    updates_.emplace_back(time, diff);
    maintain_bounds();
  }

  template <class Range>
  void extend(const Range& updates) {
    for (const auto& [time, diff] : updates) update(time, diff);
  }

  // True if every count is zero.
  bool is_empty() {
    if (clean_ > updates_.size() / 2) return false;
    compact();
    return updates_.empty();
  }

  // The compacted, sorted updates, all with nonzero counts.
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

  void clear() {
    updates_.clear();
    clean_ = 0;
  }

  // Sorts, merges equal times and drops zero counts.
  void compact() {
    if (clean_ == updates_.size()) return;
    if (updates_.size() > 1) {
      std::sort(updates_.begin(), updates_.end(),
                [](const Update& a, const Update& b) { return a.first < b.first; });
      size_t out = 0;
      for (size_t i = 0; i < updates_.size(); ++i) {
        if (out > 0 && updates_[out - 1].first == updates_[i].first) {
          updates_[out - 1].second += updates_[i].second;
        } else {
          if (out > 0 && updates_[out - 1].second == 0) --out;
          if (out != i) updates_[out] = std::move(updates_[i]);
          ++out;
        }
      }
      if (out > 0 && updates_[out - 1].second == 0) --out;
      updates_.resize(out);
    } else if (updates_.size() == 1 && updates_[0].second == 0) {
      updates_.clear();
    }
    clean_ = updates_.size();
  }

  // The raw, possibly uncompacted updates. Exposed for code that compacts elsewhere.
  auto& unstable_internal_updates() { return updates_; }
  size_t unstable_len() const { return updates_.size(); }

 private:
  // Bounds memory when a batch sees many updates without being read.
  void maintain_bounds() {
    if (updates_.size() > 32 && updates_.size() >> 1 >= clean_) compact();
  }

  // Most batches hold one or two times: keep those inline, without a heap allocation.
  absl::InlinedVector<Update, 2> updates_;
  size_t clean_ = 0;  // The prefix [0, clean_) is compacted.
};

}  // namespace weir
