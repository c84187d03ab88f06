// consolidate: the collection with, per time, one update per record and no zero diffs.
//
//   auto tidy = updates | weir::collections::consolidate();
//
// Updates are exchanged by the stable hash of their data, so the result is consolidated across
// workers: at each time, each record appears in at most one update, on one worker. A time's
// updates come out once that time is complete at the input (not before: a later batch at the
// same time could still cancel them).
//
// Thread safety: worker-local.

#pragma once

#include <vector>

#include "weir/collections/collection.h"
#include "weir/collections/internal/updates.h"

namespace weir::collections {

// REQUIRES: D is totally ordered (operator<, ==) and has a weir::Codec and a StableHash.
template <Timestamp T, class D>
Collection<T, D> consolidate(const Collection<T, D>& collection) {
  return Collection<T, D>(internal::at_completion<D>(
      collection.stream(), Exchange(internal::by_data<D>()), "Consolidate",
      [](const T&, std::vector<Update<D>>& updates, std::vector<Update<D>>& out) {
        std::swap(out, updates);
      }));
}

inline auto consolidate() {
  return collection_adaptor([](const auto& c) { return collections::consolidate(c); });
}

}  // namespace weir::collections
