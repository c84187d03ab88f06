// Looking at records as they pass, without changing them.
//
//   stream | weir::inspect([](const auto& x) { std::cout << x << "\n"; })
//   stream | weir::inspect_time([](const uint64_t& t, const auto& x) { ... })
//   stream | weir::inspect_batch([](const uint64_t& t, const std::vector<D>& batch) { ... })
//
// Thread safety: worker-local.

#pragma once

#include <utility>
#include <vector>

#include "weir/operators/generic.h"
#include "weir/operators/pipe.h"

namespace weir {

template <Timestamp T, class D, class F>
Stream<T, D> inspect_batch(const Stream<T, D>& stream, F f) {
  return unary<D>(stream, Pipeline{}, "InspectBatch",
                  [f = std::move(f)](Capability<T>, const OperatorInfo&) mutable {
                    return [f = std::move(f)](auto& input, auto& output) mutable {
                      input.for_each([&](const InputCapability<T>& cap, std::vector<D>& data) {
                        f(cap.time(), std::as_const(data));
                        output.session(cap).give_vec(data);
                      });
                    };
                  });
}

template <Timestamp T, class D, class F>
Stream<T, D> inspect_time(const Stream<T, D>& stream, F f) {
  return inspect_batch(stream,
                       [f = std::move(f)](const T& time, const std::vector<D>& data) mutable {
                         for (const D& record : data) f(time, record);
                       });
}

template <Timestamp T, class D, class F>
Stream<T, D> inspect(const Stream<T, D>& stream, F f) {
  return inspect_batch(stream, [f = std::move(f)](const T&, const std::vector<D>& data) mutable {
    for (const D& record : data) f(record);
  });
}

template <class F>
auto inspect(F f) {
  return adaptor([f = std::move(f)](const auto& s) { return inspect(s, f); });
}
template <class F>
auto inspect_time(F f) {
  return adaptor([f = std::move(f)](const auto& s) { return inspect_time(s, f); });
}
template <class F>
auto inspect_batch(F f) {
  return adaptor([f = std::move(f)](const auto& s) { return inspect_batch(s, f); });
}

}  // namespace weir
