// Keyed reductions, maintained incrementally: count, distinct and reduce.
//
//   auto bids_per_auction = auctions | weir::collections::count();     // (auction, n)
//   auto bidders = bidder_ids | weir::collections::distinct();
//   auto top = bids | weir::collections::reduce(                        // (auction, price)
//       [](const uint64_t& auction, const std::vector<std::pair<uint64_t, int64_t>>& prices) {
//         return std::vector<std::pair<uint64_t, int64_t>>{{prices.back().first, 1}};
//       });
//
// Each is exchanged by the stable hash of the key, so all the updates of a key meet on one
// worker, which keeps that key's accumulated input (and, for reduce, output). When a time t is
// complete at the input, for each key whose input changed at t the operator emits at t the new
// output minus the old: the retraction of what it said before and the assertion of what holds
// now. So as of every complete time the output is the reduction of the input as of that time.
// A key whose accumulated input is all zero is forgotten (its memory freed), so state does not
// grow with retracted history.
//
// Thread safety: worker-local.

#pragma once

#include <cstdint>
#include <map>
#include <type_traits>
#include <utility>
#include <vector>

#include "weir/collections/collection.h"
#include "weir/collections/internal/updates.h"

namespace weir::collections {

// (key, n) for every key whose accumulated multiplicity n is not zero: n is the sum of the key's
// diffs, so it is negative when the input retracted more copies than it asserted. A key whose
// count becomes zero has no row.
// REQUIRES: K is totally ordered and has a weir::Codec and a StableHash.
template <Timestamp T, class K>
Collection<T, std::pair<K, int64_t>> count(const Collection<T, K>& collection) {
  using Out = std::pair<K, int64_t>;
  return Collection<T, Out>(internal::at_completion<Out>(
      collection.stream(), Exchange(internal::by_data<K>()), "Count",
      [counts = std::map<K, int64_t>()](const T&, std::vector<Update<K>>& updates,
                                        std::vector<Update<Out>>& out) mutable {
        for (auto& [key, diff] : updates) {  // Consolidated: each key once, diff != 0.
          auto it = counts.lower_bound(key);
          const bool known = it != counts.end() && it->first == key;
          const int64_t before = known ? it->second : 0;
          const int64_t after = before + diff;
          if (before != 0) out.emplace_back(Out{key, before}, -1);
          if (after != 0) out.emplace_back(Out{key, after}, 1);
          if (after == 0) {
            counts.erase(it);  // `known`: before == -diff != 0.
          } else if (known) {
            it->second = after;
          } else {
            counts.emplace_hint(it, std::move(key), after);
          }
        }
      }));
}

// Every record whose accumulated multiplicity is positive, once (multiplicity 1). Records with
// zero or negative multiplicity are absent.
// REQUIRES: D is totally ordered and has a weir::Codec and a StableHash.
template <Timestamp T, class D>
Collection<T, D> distinct(const Collection<T, D>& collection) {
  return Collection<T, D>(internal::at_completion<D>(
      collection.stream(), Exchange(internal::by_data<D>()), "Distinct",
      [counts = std::map<D, int64_t>()](const T&, std::vector<Update<D>>& updates,
                                        std::vector<Update<D>>& out) mutable {
        for (auto& [record, diff] : updates) {
          auto it = counts.lower_bound(record);
          const bool known = it != counts.end() && it->first == record;
          const int64_t before = known ? it->second : 0;
          const int64_t after = before + diff;
          if ((before > 0) != (after > 0)) out.emplace_back(record, after > 0 ? 1 : -1);
          if (after == 0) {
            counts.erase(it);
          } else if (known) {
            it->second = after;
          } else {
            counts.emplace_hint(it, std::move(record), after);
          }
        }
      }));
}

// Per key, `f(const K& key, const std::vector<std::pair<V, int64_t>>& values)` returns the
// key's output records with their multiplicities, `std::vector<std::pair<R, int64_t>>`; the
// result has (key, r) with those multiplicities (rows of f's output for equal r are added up,
// and those that sum to zero dropped).
//
// `values` is the key's accumulated input with positive multiplicity: each value once, in
// ascending order, with how many times it occurs (> 0). Values whose accumulated multiplicity is
// negative are kept (a later insertion cancels them) but not shown to f: f sees a multiset. f is
// not called for a key with no positive value; such a key has no output. f must be a function of
// its arguments alone: its previous output is kept and retracted, not recomputed.
// REQUIRES: K, V and R are totally ordered; K and V have a weir::Codec and K a StableHash.
template <Timestamp T, class K, class V, class F>
auto reduce(const Collection<T, std::pair<K, V>>& collection, F f) {
  using Output = std::decay_t<std::invoke_result_t<F&, const K&, const std::vector<Update<V>>&>>;
  using R = std::decay_t<typename Output::value_type::first_type>;
  static_assert(std::is_same_v<typename Output::value_type, Update<R>>,
                "reduce's function must return std::vector<std::pair<R, int64_t>>: each output "
                "record with its multiplicity");
  using Out = std::pair<K, R>;
  struct KeyState {
    std::vector<Update<V>> input;   // Consolidated, sorted by value; never empty.
    std::vector<Update<R>> output;  // f(positive part of input), consolidated.
  };
  struct State {
    std::map<K, KeyState> keys;
    std::vector<Update<V>> delta, scratch, positive;
    std::vector<Update<R>> change;
  };
  return Collection<T, Out>(internal::at_completion<Out>(
      collection.stream(), Exchange(internal::by_key<K, V>()), "Reduce",
      [f = std::move(f), state = State()](const T&, std::vector<Update<std::pair<K, V>>>& updates,
                                          std::vector<Update<Out>>& out) mutable {
        // Consolidated updates are sorted by (key, value): each key's are adjacent.
        for (size_t i = 0; i < updates.size();) {
          K& key = updates[i].first.first;
          state.delta.clear();
          size_t j = i;
          for (; j < updates.size() && updates[j].first.first == key; ++j) {
            state.delta.emplace_back(std::move(updates[j].first.second), updates[j].second);
          }
          auto it = state.keys.lower_bound(key);
          if (it == state.keys.end() || !(it->first == key)) {
            it = state.keys.emplace_hint(it, key, KeyState{});
          }
          KeyState& key_state = it->second;
          internal::merge_updates(key_state.input, state.delta, state.scratch);

          state.positive.clear();
          for (const auto& [value, diff] : key_state.input) {
            if (diff > 0) state.positive.emplace_back(value, diff);
          }
          std::vector<Update<R>> output;
          if (!state.positive.empty()) {
            output = f(std::as_const(it->first), std::as_const(state.positive));
            internal::consolidate_updates(output);
          }
          // The change: the new output minus the old.
          state.change.clear();
          state.change.insert(state.change.end(), output.begin(), output.end());
          for (const auto& [record, diff] : key_state.output) {
            state.change.emplace_back(record, -diff);
          }
          internal::consolidate_updates(state.change);
          for (auto& [record, diff] : state.change) {
            out.emplace_back(Out{it->first, std::move(record)}, diff);
          }
          if (key_state.input.empty()) {
            state.keys.erase(it);  // Output is empty too: no positive value.
          } else {
            key_state.output = std::move(output);
          }
          i = j;
        }
      }));
}

inline auto count() {
  return collection_adaptor([](const auto& c) { return collections::count(c); });
}
inline auto distinct() {
  return collection_adaptor([](const auto& c) { return collections::distinct(c); });
}
template <class F>
auto reduce(F f) {
  return collection_adaptor(
      [f = std::move(f)](const auto& c) { return collections::reduce(c, f); });
}

}  // namespace weir::collections
