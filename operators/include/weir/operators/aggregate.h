// Per-time reductions. Results appear once their time is complete at the input.
//
//   stream | weir::count()                          // per worker, per time: number of records
//   stream | weir::accumulate(0, [](uint64_t& sum, const std::vector<uint64_t>& batch) { ... })
//   pairs | weir::aggregate<uint64_t>(              // per key, per time, across workers
//       [](const std::string& key, uint64_t val, uint64_t& agg) { agg += val; },
//       [](std::string key, uint64_t agg) { return std::pair{key, agg}; },
//       [](const std::string& key) { return std::hash<std::string>{}(key); });
//
// Thread safety: worker-local.

#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "weir/operators/generic.h"
#include "weir/operators/pipe.h"

namespace weir {

// Folds every batch at a time into `init` with `f(acc, batch)`; emits one result per time per
// worker.
template <Timestamp T, class D, class A, class F>
Stream<T, A> accumulate(const Stream<T, D>& stream, A init, F f) {
  std::map<T, A> accumulators;
  return unary_notify<A>(
      stream, Pipeline{}, "Accumulate", {},
      [init = std::move(init), f = std::move(f), accumulators = std::move(accumulators)](
          auto& input, auto& output, Notificator<T>& notificator) mutable {
        input.for_each([&](const InputCapability<T>& cap, std::vector<D>& data) {
          auto [it, inserted] = accumulators.try_emplace(cap.time(), init);
          if (inserted) notificator.notify_at(cap.retain());
          f(it->second, std::as_const(data));
        });
        notificator.for_each([&](Capability<T> cap, uint64_t, auto&) {
          auto it = accumulators.find(cap.time());
          if (it == accumulators.end()) return;
          output.session(cap).give(std::move(it->second));
          accumulators.erase(it);
        });
      });
}

// The number of records per time on this worker.
template <Timestamp T, class D>
Stream<T, uint64_t> count(const Stream<T, D>& stream) {
  return accumulate(stream, uint64_t{0},
                    [](uint64_t& n, const std::vector<D>& batch) { n += batch.size(); });
}

// Groups (key, value) records by key and time, across workers (exchanged by `hash(key)`):
// `fold(key, value, agg)` adds a value to the key's aggregate of type Agg (value-initialized
// first), and `emit(key, agg)` makes the output record once the time is complete.
template <class Agg, Timestamp T, class K, class V, class Fold, class Emit, class Hash>
auto aggregate(const Stream<T, std::pair<K, V>>& stream, Fold fold, Emit emit, Hash hash) {
  using R = std::invoke_result_t<Emit&, K, Agg>;
  std::map<T, std::unordered_map<K, Agg>> aggregates;
  auto key_hash = [hash](const std::pair<K, V>& kv) {
    return static_cast<uint64_t>(hash(kv.first));
  };
  return unary_notify<R>(
      stream, Exchange(key_hash), "Aggregate", {},
      [fold = std::move(fold), emit = std::move(emit), aggregates = std::move(aggregates)](
          auto& input, auto& output, Notificator<T>& notificator) mutable {
        input.for_each([&](const InputCapability<T>& cap, std::vector<std::pair<K, V>>& data) {
          auto [it, inserted] = aggregates.try_emplace(cap.time());
          if (inserted) notificator.notify_at(cap.retain());
          for (auto& [key, value] : data)
            fold(std::as_const(key), std::move(value), it->second[key]);
        });
        notificator.for_each([&](Capability<T> cap, uint64_t, auto&) {
          auto it = aggregates.find(cap.time());
          if (it == aggregates.end()) return;
          auto session = output.session(cap);
          for (auto& [key, agg] : it->second) session.give(emit(key, std::move(agg)));
          aggregates.erase(it);
        });
      });
}

template <class A, class F>
auto accumulate(A init, F f) {
  return adaptor(
      [init = std::move(init), f = std::move(f)](const auto& s) { return accumulate(s, init, f); });
}
inline auto count() {
  return adaptor([](const auto& s) { return count(s); });
}
template <class Agg, class Fold, class Emit, class Hash>
auto aggregate(Fold fold, Emit emit, Hash hash) {
  return adaptor([fold = std::move(fold), emit = std::move(emit), hash = std::move(hash)](
                     const auto& s) { return aggregate<Agg>(s, fold, emit, hash); });
}

}  // namespace weir
