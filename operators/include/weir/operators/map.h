// Record-at-a-time operators that keep each record's time and worker.
//
//   stream | weir::map([](uint64_t x) { return x + 1; })
//   stream | weir::map_in_place([](uint64_t& x) { x += 1; })      // no copy of the batch
//   stream | weir::flat_map([](std::string line) { return split(line); })
//   stream | weir::filter([](const uint64_t& x) { return x % 2 == 0; })
//
// Thread safety: worker-local.

#pragma once

#include <functional>
#include <type_traits>
#include <utility>
#include <vector>

#include "weir/operators/generic.h"
#include "weir/operators/pipe.h"

namespace weir {

template <Timestamp T, class D, class F>
auto map(const Stream<T, D>& stream, F f) {
  using D2 = std::decay_t<std::invoke_result_t<F&, D>>;
  return unary<D2>(
      stream, Pipeline{}, "Map", [f = std::move(f)](Capability<T>, const OperatorInfo&) mutable {
        std::vector<D2> out;
        return [f = std::move(f), out = std::move(out)](auto& input, auto& output) mutable {
          input.for_each([&](const InputCapability<T>& cap, std::vector<D>& data) {
            out.reserve(data.size());
            for (D& record : data) out.push_back(f(std::move(record)));
            output.session(cap).give_vec(out);
          });
        };
      });
}

template <Timestamp T, class D, class F>
Stream<T, D> map_in_place(const Stream<T, D>& stream, F f) {
  return unary<D>(stream, Pipeline{}, "MapInPlace",
                  [f = std::move(f)](Capability<T>, const OperatorInfo&) mutable {
                    return [f = std::move(f)](auto& input, auto& output) mutable {
                      input.for_each([&](const InputCapability<T>& cap, std::vector<D>& data) {
                        for (D& record : data) f(record);
                        output.session(cap).give_vec(data);
                      });
                    };
                  });
}

// `f(record)` returns a range of output records.
template <Timestamp T, class D, class F>
auto flat_map(const Stream<T, D>& stream, F f) {
  using Range = std::invoke_result_t<F&, D>;
  using D2 = std::decay_t<decltype(*std::begin(std::declval<Range&>()))>;
  return unary<D2>(stream, Pipeline{}, "FlatMap",
                   [f = std::move(f)](Capability<T>, const OperatorInfo&) mutable {
                     return [f = std::move(f)](auto& input, auto& output) mutable {
                       input.for_each([&](const InputCapability<T>& cap, std::vector<D>& data) {
                         auto session = output.session(cap);
                         for (D& record : data) {
                           for (auto&& out : f(std::move(record)))
                             session.give(std::forward<decltype(out)>(out));
                         }
                       });
                     };
                   });
}

// Keeps the records for which `predicate(record)` is true.
template <Timestamp T, class D, class F>
Stream<T, D> filter(const Stream<T, D>& stream, F predicate) {
  return unary<D>(stream, Pipeline{}, "Filter",
                  [predicate = std::move(predicate)](Capability<T>, const OperatorInfo&) mutable {
                    return [predicate = std::move(predicate)](auto& input, auto& output) mutable {
                      input.for_each([&](const InputCapability<T>& cap, std::vector<D>& data) {
                        std::erase_if(data, [&](const D& record) { return !predicate(record); });
                        output.session(cap).give_vec(data);
                      });
                    };
                  });
}

template <class F>
auto map(F f) {
  return adaptor([f = std::move(f)](const auto& s) { return map(s, f); });
}
template <class F>
auto map_in_place(F f) {
  return adaptor([f = std::move(f)](const auto& s) { return map_in_place(s, f); });
}
template <class F>
auto flat_map(F f) {
  return adaptor([f = std::move(f)](const auto& s) { return flat_map(s, f); });
}
template <class F>
auto filter(F f) {
  return adaptor([f = std::move(f)](const auto& s) { return filter(s, f); });
}

}  // namespace weir
