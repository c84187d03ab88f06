// to_stream: a stream of the given records, at the minimum time, on every worker that calls it
// (each worker contributes its own records).
//
//   auto stream = weir::to_stream(scope, std::vector<uint64_t>{1, 2, 3});
//
// Thread safety: worker-local.

#pragma once

#include <utility>
#include <vector>

#include "weir/operators/generic.h"

namespace weir {

template <Timestamp T, class D>
Stream<T, D> to_stream(Scope<T>& scope, std::vector<D> records) {
  return source<D>(scope, "ToStream",
                   [records = std::move(records)](Capability<T> cap, const OperatorInfo&) mutable {
                     std::optional<Capability<T>> held(std::move(cap));
                     return [records = std::move(records),
                             held = std::move(held)](auto& output) mutable {
                       if (!held) return;
                       output.session(*held).give_vec(records);
                       held.reset();
                     };
                   });
}

}  // namespace weir
