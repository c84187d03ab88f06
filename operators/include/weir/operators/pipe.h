// Pipe syntax for operators: `stream | weir::map(f) | weir::exchange(key)`.
//
// Every standard operator is a free function taking the stream first (`weir::map(stream, f)`)
// and, without the stream, an adaptor for `|`. User-defined operators get the same with
// `weir::adaptor`:
//
//   auto doubled = [](auto stream) { return weir::map(stream, [](uint64_t x) { return 2 * x; }); };
//   auto out = stream | weir::adaptor(doubled);
//
// Thread safety: value types.

#pragma once

#include <utility>

#include "weir/dataflow/stream.h"

namespace weir {

template <class F>
struct Adaptor {
  F apply;
};

template <class F>
Adaptor<F> adaptor(F f) {
  return Adaptor<F>{std::move(f)};
}

template <Timestamp T, class D, class F>
decltype(auto) operator|(const Stream<T, D>& stream, Adaptor<F> a) {
  return a.apply(stream);
}

}  // namespace weir
