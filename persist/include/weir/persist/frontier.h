// Frontier: the lower bound of the times that may still change, for uint64_t times.
//
// Persist times are totally ordered offsets, so an antichain of them has at most one element: a
// frontier is either one time `t` (times t, t+1, ... may still change; everything before is final)
// or empty (every time is final: the shard is closed). A shard's `upper` and `since`, and the
// `lower`/`upper` of a batch, are frontiers.
//
// Thread safety: a value type with no internal synchronization.

#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>

namespace weir::persist {

//   Frontier upper(10);
//   upper.less_equal(12);          // true: time 12 may still change
//   upper.less_equal(9);           // false: time 9 is final
//   Frontier(10) < Frontier::empty();  // true: the empty frontier is the greatest
class Frontier {
 public:
  // The minimum frontier {0}: no time is final yet.
  constexpr Frontier() = default;
  constexpr explicit Frontier(uint64_t time) : time_(time) {}

  // The empty frontier: every time is final.
  static constexpr Frontier empty() {
    Frontier frontier;
    frontier.time_.reset();
    return frontier;
  }

  constexpr bool is_empty() const { return !time_.has_value(); }

  // The single element. REQUIRES: !is_empty().
  constexpr uint64_t time() const { return *time_; }

  // True if some element is less than or equal to `time`: `time` is not final.
  constexpr bool less_equal(uint64_t time) const { return time_.has_value() && *time_ <= time; }

  // True if some element is strictly less than `time`.
  constexpr bool less_than(uint64_t time) const { return time_.has_value() && *time_ < time; }

  // Frontiers of a total order are totally ordered; the empty frontier is the greatest.
  friend constexpr std::strong_ordering operator<=>(const Frontier& a, const Frontier& b) {
    if (!a.time_.has_value() || !b.time_.has_value()) {
      return a.is_empty() <=> b.is_empty();
    }
    return *a.time_ <=> *b.time_;
  }
  friend constexpr bool operator==(const Frontier& a, const Frontier& b) = default;

  // "[5]" or "[]".
  std::string to_string() const;

 private:
  std::optional<uint64_t> time_ = 0;
};

}  // namespace weir::persist
