// Merging streams of the same type: `a | weir::concat(b)`, or `weir::concatenate(scope, streams)`.
//
// Thread safety: worker-local.

#pragma once

#include <utility>
#include <vector>

#include "weir/dataflow/operator_builder.h"
#include "weir/operators/pipe.h"

namespace weir {

// One stream with every record of `streams`.
template <Timestamp T, class D>
Stream<T, D> concatenate(Scope<T>& scope, const std::vector<Stream<T, D>>& streams) {
  OperatorBuilder<T> builder("Concatenate", scope);
  std::vector<OperatorInput<T, D>> inputs;
  inputs.reserve(streams.size());
  for (const auto& stream : streams) inputs.push_back(builder.add_input(stream, Pipeline{}));
  auto [output, out_stream] = builder.template add_output<D>();
  builder.set_notify(false);
  builder.build([&](std::vector<Capability<T>>) {
    return [inputs, output](std::span<const MutableAntichain<T>>) mutable {
      for (auto& input : inputs) {
        input.for_each([&](const InputCapability<T>& cap, std::vector<D>& data) {
          output.session(cap).give_vec(data);
        });
      }
    };
  });
  return out_stream;
}

template <Timestamp T, class D>
Stream<T, D> concat(const Stream<T, D>& a, const Stream<T, D>& b) {
  return concatenate(a.scope(), std::vector<Stream<T, D>>{a, b});
}

template <Timestamp T, class D>
auto concat(const Stream<T, D>& other) {
  return adaptor([other](const Stream<T, D>& s) { return concat(s, other); });
}

}  // namespace weir
