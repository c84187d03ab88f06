// Antichain<T>: the minimal elements of a set of partially ordered times.
// MutableAntichain<T>: counts per time, with the antichain of minimal times whose count is
// positive; work per update proportional to the change, not to the times held.
//
// A frontier is an antichain: a time t is complete once no element of the frontier is less than
// or equal to t. The empty frontier means that every time is complete.
//
// Thread safety: value types with no internal synchronization.

#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/inlined_vector.h"

#include "weir/progress/change_batch.h"
#include "weir/progress/timestamp.h"

namespace weir {

// Inserting a time evicts every element it is less than or equal to.
//
//   Antichain<Product<uint64_t, uint64_t>> frontier;
//   frontier.insert({0, 1});
//   frontier.insert({1, 0});      // incomparable: both kept
//   frontier.less_equal({1, 1});  // true
template <PartialOrder T>
class Antichain {
 public:
  Antichain() = default;
  Antichain(std::initializer_list<T> times) {
    for (const T& t : times) insert(t);
  }
  static Antichain from_elem(const T& time) {
    Antichain a;
    a.elements_.push_back(time);
    return a;
  }

  // Inserts `time` unless some element is already less than or equal to it.
  // Returns true if `time` was inserted.
  bool insert(const T& time) {
    for (const T& e : elements_) {
      if (time_le(e, time)) return false;
    }
    elements_.erase(std::remove_if(elements_.begin(), elements_.end(),
                                   [&](const T& e) { return time_le(time, e); }),
                    elements_.end());
    elements_.push_back(time);
    return true;
  }

  template <class Range>
  void extend(const Range& times) {
    for (const T& t : times) insert(t);
  }

  // True if some element is strictly less than `time`.
  bool less_than(const T& time) const {
    return std::any_of(elements_.begin(), elements_.end(),
                       [&](const T& e) { return time_lt(e, time); });
  }
  // True if some element is less than or equal to `time`: `time` is not yet complete.
  bool less_equal(const T& time) const {
    return std::any_of(elements_.begin(), elements_.end(),
                       [&](const T& e) { return time_le(e, time); });
  }
  // True if every element of `other` is greater than or equal to some element of this.
  bool dominates(const Antichain& other) const {
    return std::all_of(other.elements_.begin(), other.elements_.end(),
                       [&](const T& t) { return less_equal(t); });
  }

  std::span<const T> elements() const { return elements_; }
  bool empty() const { return elements_.empty(); }
  size_t size() const { return elements_.size(); }
  void clear() { elements_.clear(); }
  auto begin() const { return elements_.begin(); }
  auto end() const { return elements_.end(); }

  // Equal as sets.
  friend bool operator==(const Antichain& a, const Antichain& b) {
    return a.size() == b.size() && std::all_of(a.begin(), a.end(), [&](const T& t) {
             return std::find(b.begin(), b.end(), t) != b.end();
           });
  }
  friend std::ostream& operator<<(std::ostream& os, const Antichain& a) {
    os << "{";
    for (size_t i = 0; i < a.elements_.size(); ++i) os << (i ? ", " : "") << a.elements_[i];
    return os << "}";
  }

 private:
  absl::InlinedVector<T, 1> elements_;  // Mutually incomparable; order unspecified.
};

// A multiset of times with the antichain ("frontier") of its minimal elements of positive count.
// Counts may be transiently negative (the progress protocol allows it); only positive counts
// contribute to the frontier.
//
//   MutableAntichain<uint64_t> m;
//   auto changes = m.update_iter({{3, +1}});  // changes: {(3, +1)}; frontier {3}
//
// Cost: counts live in an ordered map (B-tree, sorted by `<`), so an update is
// O(log n + |frontier|) where n is the number of times with a nonzero count; `count_for` is
// O(log n) and `has_no_counts` O(1). The frontier is recomputed only when an update can move it
// (a change at or before the frontier, never one strictly beyond it). For a totally ordered T
// (kTotallyOrdered<T>) the recomputation walks from the smallest time to the first positive
// count, so it costs the non-positive counts before it (transient, usually none), not the number
// of outstanding times; for a partial order it visits the positive counts up to the first
// frontier element that precedes all later times (`precedes_all_later`, e.g. a Product time
// whose inner coordinate is the minimum), in the worst case all of them. Work per step is thus
// proportional to the changes of the step, not to the backlog of outstanding times. The map
// allocates a node only when one fills (amortized once per several new times); the scratch for
// frontier changes is kept.
template <Timestamp T>
class MutableAntichain {
 public:
  using Counts = absl::btree_map<T, int64_t>;

  MutableAntichain() = default;
  // A multiset holding `time` once.
  static MutableAntichain new_bottom(const T& time) {
    MutableAntichain m;
    m.counts_.emplace(time, 1);
    m.frontier_.push_back(time);
    return m;
  }

  std::span<const T> frontier() const { return frontier_; }
  bool is_empty() const { return frontier_.empty(); }
  // True if some frontier element is strictly less than `time`.
  bool less_than(const T& time) const {
    return std::any_of(frontier_.begin(), frontier_.end(),
                       [&](const T& f) { return time_lt(f, time); });
  }
  // True if some frontier element is less than or equal to `time`.
  bool less_equal(const T& time) const {
    return std::any_of(frontier_.begin(), frontier_.end(),
                       [&](const T& f) { return time_le(f, time); });
  }
  Antichain<T> to_antichain() const {
    Antichain<T> a;
    for (const T& t : frontier_) a.insert(t);
    return a;
  }

  // Applies `updates` and returns the changes to the frontier, as (time, ±1) pairs. The span
  // stays valid until the next call. O(|updates| (log n + |frontier|)) plus a recomputation of
  // the frontier when some update can move it (see the class comment).
  template <class Range>
  std::span<const std::pair<T, int64_t>> update_iter(const Range& updates) {
    changes_.clear();
    bool rebuild = false;
    for (const auto& [time, diff] : updates) {
      if (diff == 0) continue;
      if (!rebuild) {
        // Checked against the frontier before this call: an increment strictly beyond it, or a
        // decrement of a time no frontier element is below (a count that was not positive),
        // cannot change it.
        const bool beyond = std::any_of(frontier_.begin(), frontier_.end(),
                                        [&](const T& f) { return time_lt(f, time); });
        const bool before = !std::any_of(frontier_.begin(), frontier_.end(),
                                         [&](const T& f) { return time_le(f, time); });
        rebuild = !(beyond || (diff < 0 && before));
      }
      add(time, diff);
    }
    if (rebuild) this->rebuild();
    return changes_.iter();
  }

  // Single-update convenience form of update_iter.
  std::span<const std::pair<T, int64_t>> update(const T& time, int64_t diff) {
    const std::pair<T, int64_t> one[1] = {{time, diff}};
    return update_iter(std::span<const std::pair<T, int64_t>>(one));
  }

  // The count of `time` (zero if absent). O(log n).
  int64_t count_for(const T& time) const {
    auto it = counts_.find(time);
    return it == counts_.end() ? 0 : it->second;
  }

  // True if every count is zero (not only the positive ones). O(1).
  bool has_no_counts() const { return counts_.empty(); }

  // The nonzero (time, count) pairs, sorted by time.
  const Counts& counts() const { return counts_; }

 private:
  void add(const T& time, int64_t diff) {
    auto [it, inserted] = counts_.try_emplace(time, diff);
    if (!inserted) {
      it->second += diff;
      if (it->second == 0) counts_.erase(it);
    }
  }

  void rebuild() {
    for (const T& f : frontier_) changes_.update(f, -1);
    frontier_.clear();
    // In sorted order a later time is never less than or equal to an earlier one (`<` extends
    // the partial order), so elements once in the frontier stay there.
    // The scan stops at a frontier element that precedes every later time: for a total order
    // that is the first positive count.
    for (const auto& [time, count] : counts_) {
      if (count <= 0) continue;
      if (std::none_of(frontier_.begin(), frontier_.end(),
                       [&](const T& f) { return time_le(f, time); })) {
        frontier_.push_back(time);
        if (precedes_all_later(time)) break;
      }
    }
    for (const T& f : frontier_) changes_.update(f, 1);
  }

  // Invariant: holds exactly the times whose count is nonzero.
  Counts counts_;
  // The minimal times with positive count; sorted by `<`. Invariant: equal to the minimal
  // elements of {t : counts_[t] > 0} after every public call.
  absl::InlinedVector<T, 1> frontier_;
  ChangeBatch<T> changes_;  // Scratch: the last frontier changes.
};

}  // namespace weir
