// Linear collection operators: each update becomes updates with the same diff (or, for negate,
// the opposite one), at the same time and on the same worker. No state and no exchange: the
// output as of a time is the operator applied to the input as of that time because the operator
// distributes over adding updates.
//
//   auto big = bids | weir::collections::filter([](const Bid& b) { return b.price > 100; });
//   auto ids = big | weir::collections::map([](Bid b) { return b.auction; });
//   auto diff = a | weir::collections::concat(b | weir::collections::negate());  // a - b
//
// Thread safety: worker-local.

#pragma once

#include <cstdint>
#include <functional>
#include <iterator>
#include <type_traits>
#include <utility>
#include <vector>

#include "weir/collections/collection.h"
#include "weir/operators/concat.h"
#include "weir/operators/generic.h"
#include "weir/operators/map.h"

namespace weir::collections {

// Every diff negated: the collection's opposite (`a | concat(b | negate())` is a - b).
template <Timestamp T, class D>
Collection<T, D> negate(const Collection<T, D>& collection) {
  return Collection<T, D>(weir::map_in_place(
      collection.stream(), [](Update<D>& update) { update.second = -update.second; }));
}

// The sum of the collections: every update of each.
template <Timestamp T, class D>
Collection<T, D> concatenate(Scope<T>& scope, const std::vector<Collection<T, D>>& collections) {
  std::vector<Stream<T, Update<D>>> streams;
  streams.reserve(collections.size());
  for (const auto& collection : collections) streams.push_back(collection.stream());
  return Collection<T, D>(weir::concatenate(scope, streams));
}

template <Timestamp T, class D>
Collection<T, D> concat(const Collection<T, D>& a, const Collection<T, D>& b) {
  return Collection<T, D>(weir::concat(a.stream(), b.stream()));
}

// `f(D) -> D2` applied to each record; the diff is kept. f must be a function of the record
// alone (the same record always maps to the same result), or retractions miss their insertions.
template <Timestamp T, class D, class F>
auto map(const Collection<T, D>& collection, F f) {
  using D2 = std::decay_t<std::invoke_result_t<F&, D>>;
  return Collection<T, D2>(
      weir::map(collection.stream(), [f = std::move(f)](Update<D> update) mutable {
        return Update<D2>{f(std::move(update.first)), update.second};
      }));
}

// Keeps the records for which `predicate(const D&)` is true (a function of the record alone).
template <Timestamp T, class D, class F>
Collection<T, D> filter(const Collection<T, D>& collection, F predicate) {
  return Collection<T, D>(weir::filter(
      collection.stream(), [predicate = std::move(predicate)](const Update<D>& update) mutable {
        return static_cast<bool>(predicate(update.first));
      }));
}

// `f(D)` returns a range of records, each of which gets the record's diff (a record that occurs
// twice in the range counts twice). A function of the record alone.
template <Timestamp T, class D, class F>
auto flat_map(const Collection<T, D>& collection, F f) {
  using Range = std::invoke_result_t<F&, D>;
  using D2 = std::decay_t<decltype(*std::begin(std::declval<Range&>()))>;
  return Collection<T, D2>(unary<Update<D2>>(
      collection.stream(), Pipeline{}, "FlatMap",
      [f = std::move(f)](Capability<T>, const OperatorInfo&) mutable {
        return [f = std::move(f)](auto& input, auto& output) mutable {
          input.for_each([&](const InputCapability<T>& cap, std::vector<Update<D>>& batch) {
            auto session = output.session(cap);
            for (Update<D>& update : batch) {
              for (auto&& record : f(std::move(update.first))) {
                session.give(Update<D2>{std::forward<decltype(record)>(record), update.second});
              }
            }
          });
        };
      }));
}

inline auto negate() {
  return collection_adaptor([](const auto& c) { return collections::negate(c); });
}
template <Timestamp T, class D>
auto concat(const Collection<T, D>& other) {
  return collection_adaptor(
      [other](const Collection<T, D>& c) { return collections::concat(c, other); });
}
template <class F>
auto map(F f) {
  return collection_adaptor([f = std::move(f)](const auto& c) { return collections::map(c, f); });
}
template <class F>
auto filter(F predicate) {
  return collection_adaptor([predicate = std::move(predicate)](const auto& c) {
    return collections::filter(c, predicate);
  });
}
template <class F>
auto flat_map(F f) {
  return collection_adaptor(
      [f = std::move(f)](const auto& c) { return collections::flat_map(c, f); });
}

}  // namespace weir::collections
