// Timestamps and path summaries.
//
// A timestamp type T is partially ordered by `less_equal(a, b)`; its `operator<` is a total order
// that extends the partial order (used for sorting). `TimestampTraits<T>` names the minimum time
// and the `Summary` type: a summary describes how a time changes along a path through the
// dataflow graph (`results_in(t)`, none when the time is dropped, e.g. on overflow) and composes
// with `followed_by`. Summaries are partially ordered too.
//
// Provided: unsigned integers (summary: `IntSummary`, an increment) and `Product<Outer, Inner>`
// (the product order, for nested iteration).
//
// Thread safety: value types with no internal synchronization.

#pragma once

#include <compare>
#include <concepts>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <ostream>

namespace weir {

// The partial order of unsigned integer times is their usual order.
template <std::unsigned_integral U>
constexpr bool less_equal(U a, U b) {
  return a <= b;
}

template <class T>
concept PartialOrder = std::equality_comparable<T> && requires(const T& a, const T& b) {
  { less_equal(a, b) } -> std::convertible_to<bool>;
};

// `time_le` / `time_lt` call the partial order through argument-dependent lookup. Use them inside
// classes whose own members are named `less_equal` (which would hide the free function).
template <class T>
constexpr bool time_le(const T& a, const T& b) {
  return less_equal(a, b);
}
template <class T>
constexpr bool time_lt(const T& a, const T& b) {
  return less_equal(a, b) && !(a == b);
}

// Primary template: specialized for every timestamp type.
template <class T>
struct TimestampTraits;

// A path summary for unsigned integer times: adds `delta`; overflow drops the time.
template <std::unsigned_integral U>
struct IntSummary {
  U delta = 0;

  constexpr std::optional<U> results_in(U time) const {
    if (time > std::numeric_limits<U>::max() - delta) return std::nullopt;
    return static_cast<U>(time + delta);
  }
  constexpr std::optional<IntSummary> followed_by(const IntSummary& other) const {
    if (delta > std::numeric_limits<U>::max() - other.delta) return std::nullopt;
    return IntSummary{static_cast<U>(delta + other.delta)};
  }
  friend constexpr bool less_equal(const IntSummary& a, const IntSummary& b) {
    return a.delta <= b.delta;
  }
  friend constexpr auto operator<=>(const IntSummary&, const IntSummary&) = default;
  friend std::ostream& operator<<(std::ostream& os, const IntSummary& s) {
    return os << "+" << static_cast<uint64_t>(s.delta);
  }
};

template <std::unsigned_integral U>
struct TimestampTraits<U> {
  using Summary = IntSummary<U>;
  static constexpr U minimum() { return 0; }
  static constexpr U maximum() { return std::numeric_limits<U>::max(); }
};

template <class S, class T>
concept PathSummary = PartialOrder<S> && std::regular<S> && requires(const S& s, const T& t) {
  { s.results_in(t) } -> std::same_as<std::optional<T>>;
  { s.followed_by(s) } -> std::same_as<std::optional<S>>;
};

// A timestamp: regular, partially ordered, totally ordered by `<` (an extension of the partial
// order), with a minimum and a path summary type.
template <class T>
concept Timestamp = std::regular<T> && std::totally_ordered<T> && PartialOrder<T> && requires {
  typename TimestampTraits<T>::Summary;
  { TimestampTraits<T>::minimum() } -> std::convertible_to<T>;
} && PathSummary<typename TimestampTraits<T>::Summary, T>;

template <Timestamp T>
using SummaryOf = typename TimestampTraits<T>::Summary;

template <Timestamp T>
constexpr T minimum_time() {
  return TimestampTraits<T>::minimum();
}

// A summary that leaves every time unchanged.
template <Timestamp T>
constexpr SummaryOf<T> identity_summary() {
  return SummaryOf<T>{};
}

// True if `less_equal` on T is a total order, so that a frontier has at most one element
// (MutableAntichain then finds it without scanning every time it holds). Unsigned integers are;
// specialize it for a totally ordered timestamp type of your own. False is always safe.
template <class T>
inline constexpr bool kTotallyOrdered = std::unsigned_integral<T>;

// A pair of times ordered by the product order: (a1, b1) <= (a2, b2) iff a1 <= a2 and b1 <= b2.
// `operator<` is lexicographic, which extends the product order.
template <Timestamp Outer, Timestamp Inner>
struct Product {
  Outer outer{};
  Inner inner{};

  friend constexpr bool less_equal(const Product& a, const Product& b) {
    return less_equal(a.outer, b.outer) && less_equal(a.inner, b.inner);
  }
  friend constexpr auto operator<=>(const Product&, const Product&) = default;
  friend std::ostream& operator<<(std::ostream& os, const Product& p) {
    return os << "(" << p.outer << ", " << p.inner << ")";
  }
};

// Summary of Product times: one summary per coordinate.
template <Timestamp Outer, Timestamp Inner>
struct ProductSummary {
  SummaryOf<Outer> outer{};
  SummaryOf<Inner> inner{};

  constexpr std::optional<Product<Outer, Inner>> results_in(const Product<Outer, Inner>& t) const {
    auto o = outer.results_in(t.outer);
    if (!o) return std::nullopt;
    auto i = inner.results_in(t.inner);
    if (!i) return std::nullopt;
    return Product<Outer, Inner>{*o, *i};
  }
  constexpr std::optional<ProductSummary> followed_by(const ProductSummary& other) const {
    auto o = outer.followed_by(other.outer);
    if (!o) return std::nullopt;
    auto i = inner.followed_by(other.inner);
    if (!i) return std::nullopt;
    return ProductSummary{*o, *i};
  }
  friend constexpr bool less_equal(const ProductSummary& a, const ProductSummary& b) {
    return less_equal(a.outer, b.outer) && less_equal(a.inner, b.inner);
  }
  friend constexpr bool operator==(const ProductSummary&, const ProductSummary&) = default;
  friend std::ostream& operator<<(std::ostream& os, const ProductSummary& s) {
    return os << "(" << s.outer << ", " << s.inner << ")";
  }
};

template <Timestamp Outer, Timestamp Inner>
struct TimestampTraits<Product<Outer, Inner>> {
  using Summary = ProductSummary<Outer, Inner>;
  static constexpr Product<Outer, Inner> minimum() {
    return {TimestampTraits<Outer>::minimum(), TimestampTraits<Inner>::minimum()};
  }
};

// True if `time` is less than or equal (in the partial order) to every time that follows it in
// the total order `<`: a scan of times in that order that has put `time` in a frontier can stop.
// Always true for a total order; for Product, when the outer order is total and the inner
// coordinate is the minimum (every later time has an outer coordinate at least as large).
// False is always safe.
template <class T>
constexpr bool precedes_all_later(const T&) {
  return kTotallyOrdered<T>;
}
template <Timestamp Outer, Timestamp Inner>
constexpr bool precedes_all_later(const Product<Outer, Inner>& time) {
  return kTotallyOrdered<Outer> && time.inner == minimum_time<Inner>();
}

// Hashing of times, for hash maps keyed by time.
template <class T>
struct TimeHash {
  size_t operator()(const T& t) const { return std::hash<T>{}(t); }
};
template <Timestamp Outer, Timestamp Inner>
struct TimeHash<Product<Outer, Inner>> {
  size_t operator()(const Product<Outer, Inner>& p) const {
    size_t h = TimeHash<Outer>{}(p.outer);
    return h ^ (TimeHash<Inner>{}(p.inner) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  }
};

}  // namespace weir
