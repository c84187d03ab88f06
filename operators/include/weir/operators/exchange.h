// Moving records between workers.
//
//   stream | weir::exchange([](const uint64_t& x) { return x; })   // to worker key % peers
//   stream | weir::broadcast()                                     // to every worker
//
// Thread safety: worker-local.

#pragma once

#include <utility>
#include <vector>

#include "weir/operators/generic.h"
#include "weir/operators/pipe.h"

namespace weir {

namespace internal {
template <Timestamp T, class D, class Pact>
Stream<T, D> pass_through(const Stream<T, D>& stream, const Pact& pact, std::string name) {
  return unary<D>(stream, pact, std::move(name), [](Capability<T>, const OperatorInfo&) {
    return [](auto& input, auto& output) {
      input.for_each([&](const InputCapability<T>& cap, std::vector<D>& data) {
        output.session(cap).give_vec(data);
      });
    };
  });
}
}  // namespace internal

// Sends each record to worker `key(record) % peers`.
template <Timestamp T, class D, class KeyFn>
Stream<T, D> exchange(const Stream<T, D>& stream, KeyFn key) {
  return internal::pass_through(stream, Exchange(std::move(key)), "Exchange");
}

// Sends every record to every worker.
template <Timestamp T, class D>
Stream<T, D> broadcast(const Stream<T, D>& stream) {
  return internal::pass_through(stream, Broadcast{}, "Broadcast");
}

template <class KeyFn>
auto exchange(KeyFn key) {
  return adaptor([key = std::move(key)](const auto& s) { return exchange(s, key); });
}
inline auto broadcast() {
  return adaptor([](const auto& s) { return broadcast(s); });
}

}  // namespace weir
