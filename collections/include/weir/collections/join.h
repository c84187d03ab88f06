// join: the equi-join of two keyed collections, maintained incrementally.
//
//   auto bids_with_region = bids_by_user | weir::collections::join(regions_by_user);
//   // (user, (bid, region)), with the product of the two multiplicities
//
// Both inputs are exchanged by the stable hash of the key, and each worker keeps, per key, the
// accumulated values of each side (a key none of whose values has a nonzero multiplicity is
// forgotten). When a time t is complete at both inputs, with L and R the inputs accumulated
// before t and dL, dR their changes at t, the output at t is dL x R + L x dR + dL x dR (the
// change of (L + dL) x (R + dR)), consolidated per time: so as of every complete time the output
// is the join of the inputs as of that time. Negative multiplicities join like any other (the
// join is bilinear).
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

// REQUIRES: K, V1 and V2 are totally ordered and have a weir::Codec; K has a StableHash.
template <Timestamp T, class K, class V1, class V2>
Collection<T, std::pair<K, std::pair<V1, V2>>> join(const Collection<T, std::pair<K, V1>>& left,
                                                    const Collection<T, std::pair<K, V2>>& right) {
  using Out = std::pair<K, std::pair<V1, V2>>;
  struct State {
    std::map<K, std::vector<Update<V1>>> left;   // Per key: consolidated, sorted, never empty.
    std::map<K, std::vector<Update<V2>>> right;  // Likewise.
    std::vector<Update<V1>> delta1, scratch1;
    std::vector<Update<V2>> delta2, scratch2;
  };
  // Adds the changes of one key (adjacent in `updates`, from position `i`) to `side`: calls
  // `on_delta(key, delta)` first, then merges. Returns the position past the key's updates.
  auto apply = [](auto& side, auto& updates, size_t i, auto& delta, auto& scratch, auto on_delta) {
    const auto& key = updates[i].first.first;
    delta.clear();
    size_t j = i;
    for (; j < updates.size() && updates[j].first.first == key; ++j) {
      delta.emplace_back(std::move(updates[j].first.second), updates[j].second);
    }
    on_delta(key, delta);
    auto it = side.lower_bound(key);
    if (it == side.end() || !(it->first == key)) {
      it = side.emplace_hint(it, key, std::remove_reference_t<decltype(delta)>{});
    }
    internal::merge_updates(it->second, delta, scratch);
    if (it->second.empty()) side.erase(it);
    return j;
  };
  return Collection<T, Out>(internal::at_completion2<Out>(
      left.stream(), right.stream(), Exchange(internal::by_key<K, V1>()),
      Exchange(internal::by_key<K, V2>()), "Join",
      [state = State(), apply](const T&, std::vector<Update<std::pair<K, V1>>>& dl,
                               std::vector<Update<std::pair<K, V2>>>& dr,
                               std::vector<Update<Out>>& out) mutable {
        // L x dR, then R += dR; then dL x (R + dR), then L += dL.
        for (size_t i = 0; i < dr.size();) {
          i = apply(state.right, dr, i, state.delta2, state.scratch2,
                    [&](const K& key, const std::vector<Update<V2>>& delta) {
                      auto found = state.left.find(key);
                      if (found == state.left.end()) return;
                      for (const auto& [v1, m1] : found->second) {
                        for (const auto& [v2, m2] : delta) {
                          out.emplace_back(Out{key, {v1, v2}}, m1 * m2);
                        }
                      }
                    });
        }
        for (size_t i = 0; i < dl.size();) {
          i = apply(state.left, dl, i, state.delta1, state.scratch1,
                    [&](const K& key, const std::vector<Update<V1>>& delta) {
                      auto found = state.right.find(key);
                      if (found == state.right.end()) return;
                      for (const auto& [v1, m1] : delta) {
                        for (const auto& [v2, m2] : found->second) {
                          out.emplace_back(Out{key, {v1, v2}}, m1 * m2);
                        }
                      }
                    });
        }
        internal::consolidate_updates(out);
      }));
}

template <Timestamp T, class K, class V2>
auto join(const Collection<T, std::pair<K, V2>>& other) {
  return collection_adaptor([other](const auto& c) { return collections::join(c, other); });
}

}  // namespace weir::collections
