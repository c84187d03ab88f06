// Nested scopes: a scope inside a scope, run as one operator of its parent.
//
//   auto result = scope.iterative<uint64_t>([&](auto& inner) {   // times (epoch, round)
//     auto [loop, cycle] = weir::loop_variable<Node>(inner, 1);  // feedback: round + 1
//     auto body = inner.enter(start) | weir::concat(cycle) | ...;
//     body | weir::connect_loop(loop);
//     return inner.leave(body);                                   // back to epoch times
//   });
//
// `iterative<Inner>` makes timestamps Product<T, Inner>: records enter at (t, 0) and leave at t.
// `region` keeps the timestamps (for structure). A nested scope has its own tracker; its
// progress changes ride in the root scope's batch (it exchanges none of its own). Each worker
// applies its own changes at once and the others' as their batches arrive; the parent's tracker
// on that worker counts, at the scope's outputs, what that view of the inner pointstamps
// projects onto them (per location, positive counts only).
//
// Thread safety: worker-local.

#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "weir/dataflow/scope.h"
#include "weir/dataflow/stream.h"

namespace weir {

// How the times of a nested scope relate to its parent's.
template <Timestamp TOuter, Timestamp TInner>
struct Refines;

template <Timestamp TOuter, Timestamp Inner>
struct Refines<TOuter, Product<TOuter, Inner>> {
  static Product<TOuter, Inner> to_inner(const TOuter& t) { return {t, minimum_time<Inner>()}; }
  static TOuter to_outer(const Product<TOuter, Inner>& t) { return t.outer; }
  static SummaryOf<TOuter> summarize(const ProductSummary<TOuter, Inner>& s) { return s.outer; }
};

template <Timestamp T>
struct Refines<T, T> {
  static T to_inner(const T& t) { return t; }
  static T to_outer(const T& t) { return t; }
  static SummaryOf<T> summarize(const SummaryOf<T>& s) { return s; }
};

namespace internal {

// Moves records from the parent into the scope (a scope input).
template <Timestamp TOuter, Timestamp TInner>
class BoundaryIn {
 public:
  virtual ~BoundaryIn() = default;
  virtual void move(ChangeBatch<TOuter>& consumed) = 0;
};

// Moves records from the scope to the parent (a scope output).
template <Timestamp TOuter, Timestamp TInner>
class BoundaryOut {
 public:
  virtual ~BoundaryOut() = default;
  virtual void move(ChangeBatch<std::pair<Location, TInner>>& local) = 0;
};

template <Timestamp TOuter, Timestamp TInner, class D>
class EnterPort final : public BoundaryIn<TOuter, TInner> {
 public:
  EnterPort(std::shared_ptr<ChannelEnd<TOuter, D>> end, OutputPort<TInner, D>* inner)
      : end_(std::move(end)), inner_(inner) {}
  void move(ChangeBatch<TOuter>& consumed) override {
    while (auto* message = end_->pull()) {
      consumed.update(message->time, static_cast<int64_t>(message->data.size()));
      inner_->give_batch(Refines<TOuter, TInner>::to_inner(message->time), message->data);
    }
  }

 private:
  std::shared_ptr<ChannelEnd<TOuter, D>> end_;
  OutputPort<TInner, D>* inner_;
};

template <Timestamp TOuter, Timestamp TInner, class D>
class LeavePort final : public BoundaryOut<TOuter, TInner> {
 public:
  LeavePort(std::shared_ptr<ChannelEnd<TInner, D>> end, OutputPort<TOuter, D>* outer, uint32_t port)
      : end_(std::move(end)), outer_(outer), port_(port) {}
  void move(ChangeBatch<std::pair<Location, TInner>>& local) override {
    while (auto* message = end_->pull()) {
      local.update({Target{0, port_}, message->time}, -static_cast<int64_t>(message->data.size()));
      outer_->give_batch(Refines<TOuter, TInner>::to_outer(message->time), message->data);
    }
  }

 private:
  std::shared_ptr<ChannelEnd<TInner, D>> end_;
  OutputPort<TOuter, D>* outer_;
  uint32_t port_;
};

}  // namespace internal

template <Timestamp TOuter, Timestamp TInner>
class NestedScope final : public Scope<TInner> {
 public:
  NestedScope(Scope<TOuter>& parent, uint32_t node, std::string name)
      : Scope<TInner>(parent.worker(), parent.path_of(node), std::move(name)),
        parent_(parent),
        node_(node) {}

  Scope<TOuter>& parent() const { return parent_; }

  // `stream`, from the parent, as a stream of this scope.
  template <class D>
  Stream<TInner, D> enter(const Stream<TOuter, D>& stream) {
    WEIR_CHECK(&stream.scope() == &parent_) << "enter: the stream is not from this scope's parent";
    const uint32_t input = static_cast<uint32_t>(inputs_.size());
    auto end = parent_.template connect<D>(stream.source(), Target{node_, input}, Pipeline{});
    auto& inner = this->template add_output_port<D>(0);
    inputs_.push_back(
        std::make_unique<internal::EnterPort<TOuter, TInner, D>>(std::move(end), &inner));
    return Stream<TInner, D>(*this, Source{0, input});
  }

  // `stream`, from this scope, as a stream of the parent.
  template <class D>
  Stream<TOuter, D> leave(const Stream<TInner, D>& stream) {
    WEIR_CHECK(&stream.scope() == this) << "leave: the stream is not from this scope";
    const uint32_t output = static_cast<uint32_t>(outputs_.size());
    auto end = stream.connect_to(Target{0, output}, Pipeline{});
    auto& outer = parent_.template add_output_port<D>(node_);
    outputs_.push_back(
        std::make_unique<internal::LeavePort<TOuter, TInner, D>>(std::move(end), &outer, output));
    return Stream<TOuter, D>(parent_, Source{node_, output});
  }

  uint32_t scope_inputs() const { return static_cast<uint32_t>(inputs_.size()); }
  uint32_t scope_outputs() const { return static_cast<uint32_t>(outputs_.size()); }

  // ---- used by the operator that runs this scope in its parent ----

  absl::Status finish() { return this->build_graph(scope_inputs(), scope_outputs()); }

  Connectivity<TOuter> outer_connectivity() const {
    Connectivity<TOuter> result(scope_inputs(),
                                std::vector<Antichain<SummaryOf<TOuter>>>(scope_outputs()));
    for (uint32_t i = 0; i < scope_inputs(); ++i) {
      for (uint32_t o = 0; o < scope_outputs(); ++o) {
        for (const auto& s : this->tracker_.scope_summary(i, o)) {
          result[i][o].insert(Refines<TOuter, TInner>::summarize(s));
        }
      }
    }
    return result;
  }

  // The projection of the initial inner pointstamps (every worker's operators' capabilities at
  // the minimum): how the parent first counts this scope's outputs.
  std::vector<std::tuple<uint32_t, std::any, int64_t>> take_initial_projection() {
    std::vector<std::tuple<uint32_t, std::any, int64_t>> result;
    drain_projection(
        [&](uint32_t o, const TOuter& t, int64_t d) { result.emplace_back(o, std::any(t), d); });
    return result;
  }

  bool run(SharedProgress<TOuter>& progress) {
    for (uint32_t i = 0; i < progress.frontiers.size(); ++i) {
      progress.frontiers[i].drain([&](const TOuter& time, int64_t diff) {
        this->tracker_.update_source(Source{0, i}, Refines<TOuter, TInner>::to_inner(time), diff);
      });
    }
    // Flow control: while what the scope's outputs feed is full, its inputs stay in the parent's
    // channels, whose gates then hold back what sends to the scope.
    if (!this->inputs_held()) {
      for (uint32_t i = 0; i < inputs_.size(); ++i) inputs_[i]->move(*progress.consumeds[i]);
    }
    for (auto& port : this->ports_[0]) port->flush();
    this->harvest_ports(0);

    this->pass();

    this->boundary_active_ = false;
    for (auto& output : outputs_) output->move(this->local_);

    if (!this->local_.is_empty()) {
      // This worker's changes: applied to its own view at once (atomically with the parent-level
      // changes of the same run, e.g. records consumed at the boundary), and sent to the other
      // workers in the root scope's batch.
      auto batch = std::make_shared<NestedBatch<TInner>>();
      for (const auto& [key, diff] : this->local_.iter()) batch->updates.emplace_back(key, diff);
      this->local_.clear();
      this->apply(batch->updates);
      parent_.queue_nested(node_, NestedProgress{{}, std::move(batch)});
    }
    // Applies this worker's changes and what scopes inside this one injected, then tells the
    // parent what the view now holds at the outputs.
    this->tracker_.propagate_all();
    project_to_parent();
    for (auto& nested : this->nested_out_) parent_.queue_nested(node_, std::move(nested));
    this->nested_out_.clear();
    // Applying its own changes may have moved inner frontiers: run again to deliver them.
    return !this->deferred_.empty() || this->boundary_active_ ||
           this->tracker_.has_target_changes();
  }

  // A progress batch from another worker, for this scope or one inside it. Applied at once, so
  // this worker's view of the inner pointstamps moves together with its view of the parent's.
  void receive(std::span<const uint32_t> path, std::shared_ptr<const NestedBatchBase> batch) {
    if (!path.empty()) {
      // For a scope inside: it applies the batch and injects into this tracker.
      this->dispatch_nested(path, std::move(batch));
      this->tracker_.propagate_all();
      project_to_parent();
      return;
    }
    if (const auto* encoded = dynamic_cast<const EncodedNestedBatch*>(batch.get())) {
      // From another process: decode and check before applying.
      ProgressUpdates<TInner> updates;
      std::string_view bytes(encoded->bytes);
      if (!decode_updates<TInner>(bytes, updates) || !bytes.empty()) {
        this->worker().allocator().process().link_failed(
            absl::InvalidArgumentError("malformed progress batch for nested scope '" +
                                       this->name() + "' from another process"));
        return;
      }
      if (!this->valid(updates)) {
        this->worker().allocator().process().link_failed(absl::InvalidArgumentError(
            "progress batch for nested scope '" + this->name() +
            "' from another process names locations it does not have, or changes counts by "
            "more than 2^40 in all"));
        return;
      }
      this->apply(updates);
    } else {
      this->apply(static_cast<const NestedBatch<TInner>&>(*batch).updates);
    }
    this->tracker_.propagate_all();
    project_to_parent();
  }

 protected:
  void request_run() override { parent_.activate_child(node_); }

 private:
  // Calls f(output, outer time, diff) for every change of the projection since the last call.
  template <class F>
  void drain_projection(F&& f) {
    for (uint32_t o = 0; o < this->tracker_.scope_outputs(); ++o) {
      this->tracker_.output_changes(o).drain([&](const TInner& time, int64_t diff) {
        f(o, Refines<TOuter, TInner>::to_outer(time), diff);
      });
    }
  }
  // What this worker's view of the inner pointstamps holds at the outputs goes straight into
  // the parent's tracker on this worker. It is never sent: every worker derives it from its own
  // view, which moves with the same batches as its view of the parent. (Reporting local changes
  // instead would sum a consumption seen early at one location with a capability at another.)
  void project_to_parent() {
    drain_projection(
        [&](uint32_t o, const TOuter& t, int64_t d) { parent_.inject(node_, o, t, d); });
  }

  Scope<TOuter>& parent_;
  uint32_t node_;
  std::vector<std::unique_ptr<internal::BoundaryIn<TOuter, TInner>>> inputs_;
  std::vector<std::unique_ptr<internal::BoundaryOut<TOuter, TInner>>> outputs_;
};

namespace internal {

// The operator that runs a nested scope inside its parent.
template <Timestamp TOuter, Timestamp TInner>
class NestedOperator final : public Operator<TOuter>, public ProgressHost {
 public:
  explicit NestedOperator(std::unique_ptr<NestedScope<TOuter, TInner>> scope)
      : scope_(std::move(scope)) {
    this->progress_.resize(scope_->scope_inputs(), scope_->scope_outputs());
  }

  std::string_view name() const override { return scope_->name(); }
  uint32_t inputs() const override { return scope_->scope_inputs(); }
  uint32_t outputs() const override { return scope_->scope_outputs(); }
  Connectivity<TOuter> connectivity() const override { return scope_->outer_connectivity(); }
  bool schedule() override { return scope_->run(this->progress_); }
  void receive_nested(std::span<const uint32_t> path,
                      std::shared_ptr<const NestedBatchBase> batch) override {
    scope_->receive(path, std::move(batch));
  }
  std::vector<std::tuple<uint32_t, std::any, int64_t>> take_initial_projection() override {
    return scope_->take_initial_projection();
  }
  bool is_incomplete() const override { return scope_->is_incomplete(); }
  void describe_progress(std::ostream& out, size_t depth) override {
    scope_->describe_progress(out, depth);
  }
  void describe_graph(DataflowGraph& out) override { scope_->describe_graph(out); }
  void hold_outputs(CreditGate* gate) override { scope_->hold_boundary(gate); }

 private:
  std::unique_ptr<NestedScope<TOuter, TInner>> scope_;
};

template <Timestamp TOuter, Timestamp TInner, class F>
decltype(auto) build_nested(Scope<TOuter>& parent, std::string name, F&& build) {
  const uint32_t node = parent.reserve_node(name);
  auto child =
      std::make_unique<NestedScope<TOuter, TInner>>(parent, node, parent.name() + "/" + name);
  auto finish = [&] {
    absl::Status status = child->finish();
    if (!status.ok()) {
      parent.set_build_error(std::move(status));
      return;
    }
    parent.add_operator(node, std::make_unique<NestedOperator<TOuter, TInner>>(std::move(child)));
  };
  using Result = std::invoke_result_t<F&, NestedScope<TOuter, TInner>&>;
  if constexpr (std::is_void_v<Result>) {
    build(*child);
    finish();
  } else {
    Result result = build(*child);
    finish();
    return result;
  }
}

}  // namespace internal

template <Timestamp T>
template <Timestamp Inner, class F>
decltype(auto) Scope<T>::iterative(F&& build) {
  return internal::build_nested<T, Product<T, Inner>>(*this, "Iterative", std::forward<F>(build));
}

template <Timestamp T>
template <class F>
decltype(auto) Scope<T>::region(F&& build) {
  return internal::build_nested<T, T>(*this, "Region", std::forward<F>(build));
}

// Free-function forms of NestedScope::enter and leave.
template <Timestamp TOuter, Timestamp TInner, class D>
Stream<TInner, D> enter(NestedScope<TOuter, TInner>& scope, const Stream<TOuter, D>& stream) {
  return scope.enter(stream);
}
template <Timestamp TOuter, Timestamp TInner, class D>
Stream<TOuter, D> leave(NestedScope<TOuter, TInner>& scope, const Stream<TInner, D>& stream) {
  return scope.leave(stream);
}

}  // namespace weir
