// Building blocks of the collection operators (installed because the templates need them; not
// API): consolidating updates, merging accumulations, stashing updates per time until the time
// is complete, and the exchange keys.
//
// Thread safety: worker-local.

#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "weir/collections/collection.h"
#include "weir/collections/stable_hash.h"
#include "weir/operators/generic.h"
#include "weir/operators/notificator.h"

namespace weir::collections::internal {

// Sorts `updates` by data, adds up the diffs of equal data and drops the data whose diffs sum to
// zero: afterwards every data appears at most once, with a nonzero diff, in ascending order.
template <class D>
void consolidate_updates(std::vector<Update<D>>& updates) {
  static_assert(std::totally_ordered<D>,
                "collection data must be totally ordered (operator< and ==): the collection "
                "operators sort updates by their data to add up their diffs");
  if (updates.empty()) return;
  std::sort(updates.begin(), updates.end(),
            [](const Update<D>& a, const Update<D>& b) { return a.first < b.first; });
  size_t out = 0;
  for (size_t i = 0; i < updates.size();) {
    int64_t sum = updates[i].second;
    size_t j = i + 1;
    while (j < updates.size() && updates[j].first == updates[i].first) sum += updates[j++].second;
    if (sum != 0) {
      if (out != i) updates[out].first = std::move(updates[i].first);
      updates[out].second = sum;
      ++out;
    }
    i = j;
  }
  updates.erase(updates.begin() + static_cast<ptrdiff_t>(out), updates.end());
}

// Frees most of a vector's spare capacity: state kept per key stays near its size after
// retractions shrink it (and buffers swapped in from scratch space do not keep their size).
template <class V>
void shrink(std::vector<V>& v) {
  if (v.capacity() > 2 * v.size() + 8) v.shrink_to_fit();
}

// Adds the consolidated `delta` to the consolidated `accumulated` (both sorted by data): the
// result is consolidated too. `scratch` is working memory (left empty).
template <class D>
void merge_updates(std::vector<Update<D>>& accumulated, std::vector<Update<D>>& delta,
                   std::vector<Update<D>>& scratch) {
  if (delta.empty()) return;
  if (accumulated.empty()) {
    std::swap(accumulated, delta);
    delta.clear();
    shrink(accumulated);
    return;
  }
  scratch.clear();
  scratch.reserve(accumulated.size() + delta.size());
  size_t i = 0;
  size_t j = 0;
  while (i < accumulated.size() || j < delta.size()) {
    if (j == delta.size() || (i < accumulated.size() && accumulated[i].first < delta[j].first)) {
      scratch.push_back(std::move(accumulated[i++]));
    } else if (i == accumulated.size() || delta[j].first < accumulated[i].first) {
      scratch.push_back(std::move(delta[j++]));
    } else {
      const int64_t sum = accumulated[i].second + delta[j].second;
      if (sum != 0) scratch.emplace_back(std::move(accumulated[i].first), sum);
      ++i;
      ++j;
    }
  }
  std::swap(accumulated, scratch);
  scratch.clear();
  delta.clear();
  shrink(accumulated);
}

// Updates received per time, kept until the time is complete. Each time's updates are
// consolidated whenever they double, so updates that cancel within a time (a record inserted and
// retracted before its time completes) do not pile up.
template <Timestamp T, class D>
class TimedUpdates {
 public:
  // Moves `batch` into the updates at `time`. Returns true if `time` had none before.
  bool add(const T& time, std::vector<Update<D>>& batch) {
    auto [it, inserted] = pending_.try_emplace(time);
    Pending& pending = it->second;
    if (pending.updates.empty()) {
      std::swap(pending.updates, batch);
    } else {
      pending.updates.insert(pending.updates.end(), std::make_move_iterator(batch.begin()),
                             std::make_move_iterator(batch.end()));
    }
    batch.clear();
    if (pending.updates.size() >= 2 * std::max(pending.consolidated, kMinConsolidation)) {
      consolidate_updates(pending.updates);
      pending.consolidated = pending.updates.size();
    }
    return inserted;
  }

  // Removes the updates at `time` and returns them consolidated (none: empty).
  std::vector<Update<D>> take(const T& time) {
    auto it = pending_.find(time);
    if (it == pending_.end()) return {};
    std::vector<Update<D>> updates = std::move(it->second.updates);
    pending_.erase(it);
    consolidate_updates(updates);
    return updates;
  }

  bool contains(const T& time) const { return pending_.contains(time); }

 private:
  static constexpr size_t kMinConsolidation = 1024;

  struct Pending {
    std::vector<Update<D>> updates;
    size_t consolidated = 0;  // Size after the last consolidation.
  };
  std::map<T, Pending> pending_;
};

// The exchange key of an update: the stable hash of its data.
template <class D>
auto by_data() {
  return [](const Update<D>& update) { return StableHash<D>{}(update.first); };
}

// The exchange key of a keyed update ((key, value), diff): the stable hash of its key.
template <class K, class V>
auto by_key() {
  return [](const Update<std::pair<K, V>>& update) { return StableHash<K>{}(update.first.first); };
}

// The updates of `stream`, routed by `pact`, are stashed per time; once a time is complete at
// the input, `on_complete(time, updates, out)` sees that time's updates consolidated (it may move
// from them) and appends to `out` what the operator emits at that time. Times complete in
// increasing order (T is totally ordered), so state that `on_complete` keeps is the input
// accumulated up to the previous complete time.
template <class D2, Timestamp T, class D, class Pact, class OnComplete>
Stream<T, Update<D2>> at_completion(const Stream<T, Update<D>>& stream, const Pact& pact,
                                    std::string name, OnComplete on_complete) {
  static_assert(TotallyOrderedTimestamp<T>);
  return unary_notify<Update<D2>>(
      stream, pact, std::move(name), {},
      [stash = TimedUpdates<T, D>(), out = std::vector<Update<D2>>(),
       on_complete = std::move(on_complete)](auto& input, auto& output,
                                             Notificator<T>& notificator) mutable {
        input.for_each([&](const InputCapability<T>& cap, std::vector<Update<D>>& batch) {
          if (stash.add(cap.time(), batch)) notificator.notify_at(cap.retain());
        });
        notificator.for_each([&](Capability<T> cap, uint64_t, auto&) {
          std::vector<Update<D>> updates = stash.take(cap.time());
          out.clear();
          on_complete(cap.time(), updates, out);
          if (!out.empty()) output.session(cap).give_vec(out);
        });
      });
}

// at_completion for two inputs: `on_complete(time, updates1, updates2, out)` once a time is
// complete at both.
template <class D3, Timestamp T, class D1, class D2, class Pact1, class Pact2, class OnComplete>
Stream<T, Update<D3>> at_completion2(const Stream<T, Update<D1>>& stream1,
                                     const Stream<T, Update<D2>>& stream2, const Pact1& pact1,
                                     const Pact2& pact2, std::string name, OnComplete on_complete) {
  static_assert(TotallyOrderedTimestamp<T>);
  return binary_notify<Update<D3>>(
      stream1, stream2, pact1, pact2, std::move(name), {},
      [stash1 = TimedUpdates<T, D1>(), stash2 = TimedUpdates<T, D2>(),
       out = std::vector<Update<D3>>(), on_complete = std::move(on_complete)](
          auto& input1, auto& input2, auto& output, Notificator<T>& notificator) mutable {
        input1.for_each([&](const InputCapability<T>& cap, std::vector<Update<D1>>& batch) {
          const bool known = stash2.contains(cap.time());
          if (stash1.add(cap.time(), batch) && !known) notificator.notify_at(cap.retain());
        });
        input2.for_each([&](const InputCapability<T>& cap, std::vector<Update<D2>>& batch) {
          const bool known = stash1.contains(cap.time());
          if (stash2.add(cap.time(), batch) && !known) notificator.notify_at(cap.retain());
        });
        notificator.for_each([&](Capability<T> cap, uint64_t, auto&) {
          std::vector<Update<D1>> updates1 = stash1.take(cap.time());
          std::vector<Update<D2>> updates2 = stash2.take(cap.time());
          out.clear();
          on_complete(cap.time(), updates1, updates2, out);
          if (!out.empty()) output.session(cap).give_vec(out);
        });
      });
}

}  // namespace weir::collections::internal
