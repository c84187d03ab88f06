// Splitting a stream.
//
//   auto [odd, even] = stream | weir::branch([](const T&, const uint64_t& x) { return x % 2 == 0;
//   }); auto [before, after] = stream | weir::branch_when([](const uint64_t& t) { return t >= 10;
//   }); auto [oks, errs] = stream | weir::ok_err([](Row r) -> std::variant<Row, Error> { ... });
//   auto parts = weir::partition(stream, 4, [](uint64_t x) { return std::pair{x % 4, x}; });
//
// `branch` sends a record to the second stream when the predicate is true, else to the first.
//
// Thread safety: worker-local.

#pragma once

#include <cstdint>
#include <utility>
#include <variant>
#include <vector>

#include "weir/dataflow/operator_builder.h"
#include "weir/operators/pipe.h"
#include "weir/usage_error.h"

namespace weir {

// (records where predicate(time, record) is false, records where it is true)
template <Timestamp T, class D, class F>
std::pair<Stream<T, D>, Stream<T, D>> branch(const Stream<T, D>& stream, F predicate) {
  OperatorBuilder<T> builder("Branch", stream.scope());
  auto input = builder.add_input(stream, Pipeline{});
  auto [out_false, stream_false] = builder.template add_output<D>();
  auto [out_true, stream_true] = builder.template add_output<D>();
  builder.set_notify(false);
  builder.build([&](std::vector<Capability<T>>) {
    return [input, out_false, out_true,
            predicate = std::move(predicate)](std::span<const MutableAntichain<T>>) mutable {
      input.for_each([&](const InputCapability<T>& cap, std::vector<D>& data) {
        auto no = out_false.session(cap);
        auto yes = out_true.session(cap);
        for (D& record : data) {
          if (predicate(cap.time(), std::as_const(record))) {
            yes.give(std::move(record));
          } else {
            no.give(std::move(record));
          }
        }
      });
    };
  });
  return {stream_false, stream_true};
}

// Whole batches: (batches whose time fails `predicate(time)`, batches whose time passes).
template <Timestamp T, class D, class F>
std::pair<Stream<T, D>, Stream<T, D>> branch_when(const Stream<T, D>& stream, F predicate) {
  OperatorBuilder<T> builder("BranchWhen", stream.scope());
  auto input = builder.add_input(stream, Pipeline{});
  auto [out_false, stream_false] = builder.template add_output<D>();
  auto [out_true, stream_true] = builder.template add_output<D>();
  builder.set_notify(false);
  builder.build([&](std::vector<Capability<T>>) {
    return [input, out_false, out_true,
            predicate = std::move(predicate)](std::span<const MutableAntichain<T>>) mutable {
      input.for_each([&](const InputCapability<T>& cap, std::vector<D>& data) {
        if (predicate(cap.time())) {
          out_true.session(cap).give_vec(data);
        } else {
          out_false.session(cap).give_vec(data);
        }
      });
    };
  });
  return {stream_false, stream_true};
}

// `f(record)` returns std::variant<Ok, Err>: (stream of Ok, stream of Err).
template <Timestamp T, class D, class F>
auto ok_err(const Stream<T, D>& stream, F f) {
  using Result = std::invoke_result_t<F&, D>;
  using Ok = std::variant_alternative_t<0, Result>;
  using Err = std::variant_alternative_t<1, Result>;
  OperatorBuilder<T> builder("OkErr", stream.scope());
  auto input = builder.add_input(stream, Pipeline{});
  auto [out_ok, stream_ok] = builder.template add_output<Ok>();
  auto [out_err, stream_err] = builder.template add_output<Err>();
  builder.set_notify(false);
  builder.build([&](std::vector<Capability<T>>) {
    return
        [input, out_ok, out_err, f = std::move(f)](std::span<const MutableAntichain<T>>) mutable {
          input.for_each([&](const InputCapability<T>& cap, std::vector<D>& data) {
            auto oks = out_ok.session(cap);
            auto errs = out_err.session(cap);
            for (D& record : data) {
              Result r = f(std::move(record));
              if (r.index() == 0) {
                oks.give(std::get<0>(std::move(r)));
              } else {
                errs.give(std::get<1>(std::move(r)));
              }
            }
          });
        };
  });
  return std::pair<Stream<T, Ok>, Stream<T, Err>>{stream_ok, stream_err};
}

// `f(record)` returns (part, output record) with part < parts.
template <Timestamp T, class D, class F>
auto partition(const Stream<T, D>& stream, uint64_t parts, F f) {
  using D2 = typename std::invoke_result_t<F&, D>::second_type;
  OperatorBuilder<T> builder("Partition", stream.scope());
  auto input = builder.add_input(stream, Pipeline{});
  std::vector<OperatorOutput<T, D2>> outputs;
  std::vector<Stream<T, D2>> streams;
  for (uint64_t p = 0; p < parts; ++p) {
    auto [output, s] = builder.template add_output<D2>();
    outputs.push_back(output);
    streams.push_back(s);
  }
  builder.set_notify(false);
  builder.build([&](std::vector<Capability<T>>) {
    return [input, outputs, parts, f = std::move(f)](std::span<const MutableAntichain<T>>) mutable {
      input.for_each([&](const InputCapability<T>& cap, std::vector<D>& data) {
        for (D& record : data) {
          auto [part, out] = f(std::move(record));
          WEIR_USAGE_CHECK(part < parts)
              << "partition " << part << " out of range (" << parts << " parts)";
          outputs[part].session(cap).give(std::move(out));
        }
      });
    };
  });
  return streams;
}

template <class F>
auto branch(F f) {
  return adaptor([f = std::move(f)](const auto& s) { return branch(s, f); });
}
template <class F>
auto branch_when(F f) {
  return adaptor([f = std::move(f)](const auto& s) { return branch_when(s, f); });
}
template <class F>
auto ok_err(F f) {
  return adaptor([f = std::move(f)](const auto& s) { return ok_err(s, f); });
}
template <class F>
auto partition(uint64_t parts, F f) {
  return adaptor([parts, f = std::move(f)](const auto& s) { return partition(s, parts, f); });
}

}  // namespace weir
