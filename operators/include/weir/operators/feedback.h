// Feedback: cycles in a dataflow. `feedback<D>(scope, summary)` makes a stream whose records are
// whatever is later connected to it with `connect_loop`, with their times advanced by `summary`
// (records whose time would overflow are dropped). Every cycle must strictly advance time, so
// the summary of a loop's feedback must be more than the identity.
//
//   auto [loop, cycle] = weir::feedback<uint64_t>(scope, weir::IntSummary<uint64_t>{1});
//   auto next = weir::concat(start, cycle) | weir::map(...) | weir::filter(...);
//   next | weir::connect_loop(loop);
//
// Thread safety: worker-local.

#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "weir/dataflow/operator_builder.h"
#include "weir/operators/pipe.h"

namespace weir {

// The input end of a feedback stream; consumed by connect_loop.
template <Timestamp T, class D>
class LoopHandle {
 public:
  LoopHandle(std::unique_ptr<OperatorBuilder<T>> builder, OperatorOutput<T, D> output,
             SummaryOf<T> summary)
      : builder_(std::move(builder)), output_(output), summary_(summary) {}

  // Connects `stream` as the records fed back. Call exactly once.
  void connect(const Stream<T, D>& stream) {
    WEIR_CHECK(builder_ != nullptr) << "feedback loop connected twice";
    auto input =
        builder_->add_input_connection(stream, Pipeline{}, {Antichain<SummaryOf<T>>{summary_}});
    builder_->set_notify(false);
    builder_->build(
        [input, output = output_, summary = summary_](std::vector<Capability<T>>) mutable {
          return [input, output, summary](std::span<const MutableAntichain<T>>) mutable {
            input.for_each([&](const InputCapability<T>& cap, std::vector<D>& data) {
              if (auto time = summary.results_in(cap.time())) {
                output.session(cap.delayed(*time)).give_vec(data);
              }
            });
          };
        });
    builder_.reset();
  }

 private:
  std::unique_ptr<OperatorBuilder<T>> builder_;
  OperatorOutput<T, D> output_;
  SummaryOf<T> summary_;
};

template <class D, Timestamp T>
std::pair<LoopHandle<T, D>, Stream<T, D>> feedback(Scope<T>& scope, SummaryOf<T> summary) {
  auto builder = std::make_unique<OperatorBuilder<T>>("Feedback", scope);
  auto [output, stream] = builder->template add_output<D>();
  return {LoopHandle<T, D>(std::move(builder), output, summary), stream};
}

// A feedback stream inside an iterative scope: records fed back come around at the next round
// (the inner coordinate advances by `step`; the outer is unchanged).
template <class D, Timestamp TOuter, Timestamp TInner>
std::pair<LoopHandle<Product<TOuter, TInner>, D>, Stream<Product<TOuter, TInner>, D>> loop_variable(
    Scope<Product<TOuter, TInner>>& scope, SummaryOf<TInner> step) {
  return feedback<D>(scope, ProductSummary<TOuter, TInner>{identity_summary<TOuter>(), step});
}
template <class D, Timestamp TOuter, std::unsigned_integral U>
std::pair<LoopHandle<Product<TOuter, U>, D>, Stream<Product<TOuter, U>, D>> loop_variable(
    Scope<Product<TOuter, U>>& scope, U step) {
  return loop_variable<D>(scope, IntSummary<U>{step});
}

template <Timestamp T, class D>
void connect_loop(const Stream<T, D>& stream, LoopHandle<T, D>& handle) {
  handle.connect(stream);
}

template <Timestamp T, class D>
auto connect_loop(LoopHandle<T, D>& handle) {
  return adaptor([&handle](const Stream<T, D>& s) {
    handle.connect(s);
    return s;
  });
}

}  // namespace weir
