// Antichain<T>: the minimal elements of a set of partially ordered times.
// MutableAntichain<T>: counts per time, with the antichain of times whose count is positive.
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
    return a.size() == b.size() &&
           std::all_of(a.begin(), a.end(), [&](const T& t) {
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
template <Timestamp T>
class MutableAntichain {
 public:
  MutableAntichain() = default;
  // A multiset holding `time` once.
  static MutableAntichain new_bottom(const T& time) {
    MutableAntichain m;
    m.updates_.update(time, 1);
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
  // stays valid until the next call.
  template <class Range>
  std::span<const std::pair<T, int64_t>> update_iter(const Range& updates) {
    changes_.clear();
    bool rebuild = false;
    for (const auto& [time, diff] : updates) {
      if (diff == 0) continue;
      if (!rebuild) {
        const bool beyond = std::any_of(frontier_.begin(), frontier_.end(),
                                        [&](const T& f) { return time_lt(f, time); });
        const bool before = !std::any_of(frontier_.begin(), frontier_.end(),
                                         [&](const T& f) { return time_le(f, time); });
        // An increment strictly beyond the frontier, or a decrement of a time no frontier
        // element is below (a negative count), cannot change the frontier.
        rebuild = !(beyond || (diff < 0 && before));
      }
      updates_.update(time, diff);
    }
    if (rebuild) this->rebuild();
    return changes_.iter();
  }

  // Single-update convenience form of update_iter.
  std::span<const std::pair<T, int64_t>> update(const T& time, int64_t diff) {
    const std::pair<T, int64_t> one[1] = {{time, diff}};
    return update_iter(std::span<const std::pair<T, int64_t>>(one));
  }

  // The count of `time` (zero if absent).
  int64_t count_for(const T& time) {
    for (const auto& [t, c] : updates_.iter()) {
      if (t == time) return c;
    }
    return 0;
  }

  // True if every count is zero (not only the positive ones).
  bool has_no_counts() { return updates_.is_empty(); }

  // The compacted (time, count) pairs.
  std::span<const std::pair<T, int64_t>> counts() { return updates_.iter(); }

 private:
  void rebuild() {
    for (const T& f : frontier_) changes_.update(f, -1);
    frontier_.clear();
    for (const auto& [time, count] : updates_.iter()) {
      if (count > 0 && std::none_of(frontier_.begin(), frontier_.end(),
                                    [&](const T& f) { return time_le(f, time); })) {
        frontier_.push_back(time);
      }
    }
    for (const T& f : frontier_) changes_.update(f, 1);
  }

  ChangeBatch<T> updates_;  // Counts per time.
  absl::InlinedVector<T, 1> frontier_;  // Minimal times with positive count; sorted by `<`.
  ChangeBatch<T> changes_;  // Scratch: the last frontier changes.
};

}  // namespace weir
