// Generic operators: the building blocks users write their own operators with, in the shapes
// timely users know.
//
//   unary<D2>(stream, pact, name, [](Capability<T> cap, OperatorInfo info) {
//     return [](OperatorInput<T, D1>& input, OperatorOutput<T, D2>& output) { ... };
//   });
//
// - unary / binary: run when data arrives (or when activated); no frontier.
// - unary_frontier / binary_frontier: the logic also sees the input frontiers, and runs when
//   they change.
// - unary_notify / binary_notify: the logic gets a Notificator (initial requests at the given
//   times), and runs when input frontiers change.
// - sink: an operator with one input and no output.
// - source: an operator with no input and one output; it holds its capability and activates
//   itself (through OperatorInfo) when it has more to produce.
//
// The constructors receive the initial capability of the output (drop it if you produce only in
// response to input) and an OperatorInfo with the operator's address and activators.
//
// Thread safety: worker-local.

#pragma once

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "weir/dataflow/operator_builder.h"
#include "weir/dataflow/pact.h"
#include "weir/dataflow/stream.h"
#include "weir/operators/notificator.h"

namespace weir {

struct OperatorInfo {
  uint32_t index = 0;        // In its scope.
  std::vector<size_t> path;  // From the worker: dataflow, then scopes.
  size_t worker = 0;
  size_t peers = 1;
  Activator activator;           // Schedules this operator (same thread).
  SyncActivator sync_activator;  // Schedules this operator (any thread).
};

template <Timestamp T>
OperatorInfo operator_info(const OperatorBuilder<T>& builder) {
  return OperatorInfo{builder.index(),         builder.path(),      builder.scope().index(),
                      builder.scope().peers(), builder.activator(), builder.sync_activator()};
}

// An input together with its frontier, for one run.
template <Timestamp T, class D>
class FrontieredInput {
 public:
  FrontieredInput(OperatorInput<T, D>& input, const MutableAntichain<T>& frontier)
      : input_(input), frontier_(frontier) {}
  auto next() { return input_.next(); }
  template <class F>
  void for_each(F&& f) {
    input_.for_each(std::forward<F>(f));
  }
  const MutableAntichain<T>& frontier() const { return frontier_; }

 private:
  OperatorInput<T, D>& input_;
  const MutableAntichain<T>& frontier_;
};

template <class D2, Timestamp T, class D1, class Pact, class Constructor>
Stream<T, D2> unary(const Stream<T, D1>& stream, const Pact& pact, std::string name,
                    Constructor constructor) {
  OperatorBuilder<T> builder(std::move(name), stream.scope());
  auto input = builder.add_input(stream, pact);
  auto [output, out_stream] = builder.template add_output<D2>();
  builder.set_notify(false);
  OperatorInfo info = operator_info(builder);
  builder.build([&](std::vector<Capability<T>> caps) {
    auto logic = constructor(std::move(caps[0]), std::move(info));
    return [input, output, logic = std::move(logic)](std::span<const MutableAntichain<T>>) mutable {
      logic(input, output);
    };
  });
  return out_stream;
}

template <class D2, Timestamp T, class D1, class Pact, class Constructor>
Stream<T, D2> unary_frontier(const Stream<T, D1>& stream, const Pact& pact, std::string name,
                             Constructor constructor) {
  OperatorBuilder<T> builder(std::move(name), stream.scope());
  auto input = builder.add_input(stream, pact);
  auto [output, out_stream] = builder.template add_output<D2>();
  OperatorInfo info = operator_info(builder);
  builder.build([&](std::vector<Capability<T>> caps) {
    auto logic = constructor(std::move(caps[0]), std::move(info));
    return [input, output,
            logic = std::move(logic)](std::span<const MutableAntichain<T>> frontiers) mutable {
      FrontieredInput<T, D1> frontiered(input, frontiers[0]);
      logic(frontiered, output);
    };
  });
  return out_stream;
}

// `logic(input, output, notificator)`; `initial` are times to be notified at (the initial
// capability is delayed to each of them).
template <class D2, Timestamp T, class D1, class Pact, class Logic>
Stream<T, D2> unary_notify(const Stream<T, D1>& stream, const Pact& pact, std::string name,
                           std::vector<T> initial, Logic logic) {
  OperatorBuilder<T> builder(std::move(name), stream.scope());
  auto input = builder.add_input(stream, pact);
  auto [output, out_stream] = builder.template add_output<D2>();
  builder.build([&](std::vector<Capability<T>> caps) {
    FrontierNotificator<T> notificator;
    for (const T& time : initial) notificator.notify_at(caps[0].delayed(time));
    return [input, output, logic = std::move(logic), notificator = std::move(notificator)](
               std::span<const MutableAntichain<T>> frontiers) mutable {
      Notificator<T> bound(notificator, frontiers);
      logic(input, output, bound);
      notificator.make_available(frontiers);
      return notificator.has_available();
    };
  });
  return out_stream;
}

template <class D3, Timestamp T, class D1, class D2, class Pact1, class Pact2, class Constructor>
Stream<T, D3> binary(const Stream<T, D1>& a, const Stream<T, D2>& b, const Pact1& pact1,
                     const Pact2& pact2, std::string name, Constructor constructor) {
  OperatorBuilder<T> builder(std::move(name), a.scope());
  auto input1 = builder.add_input(a, pact1);
  auto input2 = builder.add_input(b, pact2);
  auto [output, out_stream] = builder.template add_output<D3>();
  builder.set_notify(false);
  OperatorInfo info = operator_info(builder);
  builder.build([&](std::vector<Capability<T>> caps) {
    auto logic = constructor(std::move(caps[0]), std::move(info));
    return [input1, input2, output, logic = std::move(logic)](
               std::span<const MutableAntichain<T>>) mutable { logic(input1, input2, output); };
  });
  return out_stream;
}

template <class D3, Timestamp T, class D1, class D2, class Pact1, class Pact2, class Constructor>
Stream<T, D3> binary_frontier(const Stream<T, D1>& a, const Stream<T, D2>& b, const Pact1& pact1,
                              const Pact2& pact2, std::string name, Constructor constructor) {
  OperatorBuilder<T> builder(std::move(name), a.scope());
  auto input1 = builder.add_input(a, pact1);
  auto input2 = builder.add_input(b, pact2);
  auto [output, out_stream] = builder.template add_output<D3>();
  OperatorInfo info = operator_info(builder);
  builder.build([&](std::vector<Capability<T>> caps) {
    auto logic = constructor(std::move(caps[0]), std::move(info));
    return [input1, input2, output,
            logic = std::move(logic)](std::span<const MutableAntichain<T>> frontiers) mutable {
      FrontieredInput<T, D1> f1(input1, frontiers[0]);
      FrontieredInput<T, D2> f2(input2, frontiers[1]);
      logic(f1, f2, output);
    };
  });
  return out_stream;
}

template <class D3, Timestamp T, class D1, class D2, class Pact1, class Pact2, class Logic>
Stream<T, D3> binary_notify(const Stream<T, D1>& a, const Stream<T, D2>& b, const Pact1& pact1,
                            const Pact2& pact2, std::string name, std::vector<T> initial,
                            Logic logic) {
  OperatorBuilder<T> builder(std::move(name), a.scope());
  auto input1 = builder.add_input(a, pact1);
  auto input2 = builder.add_input(b, pact2);
  auto [output, out_stream] = builder.template add_output<D3>();
  builder.build([&](std::vector<Capability<T>> caps) {
    FrontierNotificator<T> notificator;
    for (const T& time : initial) notificator.notify_at(caps[0].delayed(time));
    return [input1, input2, output, logic = std::move(logic), notificator = std::move(notificator)](
               std::span<const MutableAntichain<T>> frontiers) mutable {
      Notificator<T> bound(notificator, frontiers);
      logic(input1, input2, output, bound);
      notificator.make_available(frontiers);
      return notificator.has_available();
    };
  });
  return out_stream;
}

// `logic(FrontieredInput<T, D>&)` consumes the stream.
template <Timestamp T, class D, class Pact, class Logic>
void sink(const Stream<T, D>& stream, const Pact& pact, std::string name, Logic logic) {
  OperatorBuilder<T> builder(std::move(name), stream.scope());
  auto input = builder.add_input(stream, pact);
  builder.build([&](std::vector<Capability<T>>) {
    return
        [input, logic = std::move(logic)](std::span<const MutableAntichain<T>> frontiers) mutable {
          FrontieredInput<T, D> frontiered(input, frontiers[0]);
          logic(frontiered);
        };
  });
}

// `constructor(Capability<T>, const OperatorInfo&)` returns `logic(OperatorOutput<T, D>&)`; the
// logic may return bool (true: run again soon).
template <class D, Timestamp T, class Constructor>
Stream<T, D> source(Scope<T>& scope, std::string name, Constructor constructor) {
  OperatorBuilder<T> builder(std::move(name), scope);
  auto [output, stream] = builder.template add_output<D>();
  builder.set_notify(false);
  OperatorInfo info = operator_info(builder);
  builder.build([&](std::vector<Capability<T>> caps) {
    auto logic = constructor(std::move(caps[0]), std::move(info));
    return [output, logic = std::move(logic)](std::span<const MutableAntichain<T>>) mutable {
      if constexpr (std::is_same_v<decltype(logic(output)), bool>) {
        return logic(output);
      } else {
        logic(output);
        return false;
      }
    };
  });
  return stream;
}

}  // namespace weir
