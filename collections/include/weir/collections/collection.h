// Collection<T, D>: a multiset of records D that changes over time, as a stream of updates.
//
// Each record of the underlying `Stream<T, std::pair<D, int64_t>>` is an update (data, diff) at
// its batch's time: `diff` copies of `data` are added to the collection at that time (removed
// when negative). The collection *as of* a time t is the sum of every update at a time <= t; two
// streams that accumulate to the same sums are the same collection, however their updates are
// split, ordered or spread over workers. The operators in weir/collections/ keep their outputs
// right under retractions: once a time t is complete at an operator's output, the output as of
// t is the operator applied to its input as of t.
//
//   auto [input, bids] = weir::collections::new_collection<std::pair<uint64_t, uint64_t>>(scope);
//   auto per_auction = bids | weir::collections::map([](std::pair<uint64_t, uint64_t> bid) {
//                        return bid.first;
//                      }) | weir::collections::count();
//   input.send({{auction, price}, +1});   // a bid; {{auction, price}, -1} retracts it
//
// Timestamps must be totally ordered (TotallyOrderedTimestamp: unsigned integers, or a type of
// your own with weir::kTotallyOrdered specialized): then when t is complete every earlier time
// is complete too, so the state "as of t" that count, reduce, distinct and join keep per key is
// well defined. Product times (loops) are refused at compile time.
//
// Thread safety: worker-local, like Stream. Note: the scope must outlive the handle's use.

#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "weir/dataflow/scope.h"
#include "weir/dataflow/stream.h"
#include "weir/operators/input.h"
#include "weir/operators/map.h"
#include "weir/operators/pipe.h"
#include "weir/progress/timestamp.h"

namespace weir::collections {

// A timestamp whose partial order is total: a frontier is at most one time, and a complete time
// has only complete times before it.
template <class T>
concept TotallyOrderedTimestamp = Timestamp<T> && kTotallyOrdered<T>;

// (data, diff): `diff` copies of `data`, added (or removed, when negative) at the batch's time.
template <class D>
using Update = std::pair<D, int64_t>;

template <Timestamp T, class D>
class Collection {
  static_assert(TotallyOrderedTimestamp<T>,
                "weir::collections::Collection needs a totally ordered timestamp (such as "
                "uint64_t; for a type of your own, specialize weir::kTotallyOrdered): with a "
                "partial order such as Product, 'the collection as of a complete time' is not "
                "well defined");

 public:
  using Time = T;
  using Data = D;

  // The collection whose updates are `updates`.
  explicit Collection(Stream<T, Update<D>> updates) : updates_(std::move(updates)) {}

  // The underlying stream of (data, diff) updates.
  const Stream<T, Update<D>>& stream() const { return updates_; }
  Scope<T>& scope() const { return updates_.scope(); }

 private:
  Stream<T, Update<D>> updates_;
};

// Pipe syntax for collections: `collection | weir::collections::count()`. Every collection
// operator is a free function taking the collection first and, without it, an adaptor for `|`.
template <class F>
struct CollectionAdaptor {
  F apply;
};

template <class F>
CollectionAdaptor<F> collection_adaptor(F f) {
  return CollectionAdaptor<F>{std::move(f)};
}

template <Timestamp T, class D, class F>
decltype(auto) operator|(const Collection<T, D>& collection, CollectionAdaptor<F> a) {
  return a.apply(collection);
}

// The collection that holds each record of `stream` once from its time on (diff +1).
template <Timestamp T, class D>
Collection<T, D> as_collection(const Stream<T, D>& stream) {
  return Collection<T, D>(weir::map(stream, [](D record) {
    return Update<D>{std::move(record), 1};
  }));
}

// `stream | weir::collections::as_collection()`.
inline auto as_collection() {
  return weir::adaptor([](const auto& stream) { return as_collection(stream); });
}

// An input of updates and the collection it feeds: `input.send({data, diff})` at
// `input.time()`, as with weir::new_input.
template <class D, Timestamp T>
std::pair<InputHandle<T, Update<D>>, Collection<T, D>> new_collection(Scope<T>& scope) {
  auto [handle, stream] = new_input<Update<D>>(scope);
  return {std::move(handle), Collection<T, D>(std::move(stream))};
}

}  // namespace weir::collections
