// OperatorBuilder<T>: builds an operator from inputs, outputs and a closure.
//
//   OperatorBuilder<uint64_t> builder("Double", scope);
//   auto input = builder.add_input(stream, Pipeline{});
//   auto [output, doubled] = builder.add_output<uint64_t>();
//   builder.build([=](std::vector<Capability<uint64_t>> caps) mutable {
//     caps.clear();  // this operator produces only in response to input
//     return [=](std::span<const MutableAntichain<uint64_t>>) mutable {
//       input.for_each([&](const InputCapability<uint64_t>& cap, std::vector<uint64_t>& data) {
//         auto session = output.session(cap);
//         for (uint64_t x : data) session.give(2 * x);
//       });
//     };
//   });
//
// The constructor passed to `build` receives one capability per output, at the minimum time, and
// returns the logic: a closure called with the inputs' frontiers each time the operator runs. The
// logic may return bool: true asks to run again soon.
//
// By default an input is connected to every output with the identity summary; add_input with an
// explicit connection (one antichain of summaries per output; empty means not connected) says
// otherwise. The scope uses connectivity to know which outputs an input's data can reach.
//
// Thread safety: worker-local.

#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"

#include "weir/check.h"
#include "weir/dataflow/operator.h"
#include "weir/dataflow/pact.h"
#include "weir/dataflow/port.h"
#include "weir/dataflow/scope.h"
#include "weir/dataflow/stream.h"
#include "weir/progress/antichain.h"
#include "weir/progress/capability.h"
#include "weir/usage_error.h"

namespace weir {

// The operator that OperatorBuilder makes.
template <Timestamp T>
class BuiltOperator final : public Operator<T> {
 public:
  // Move-only: the logic may own what cannot be copied (a kept InputCapability, say).
  using Logic = absl::AnyInvocable<bool(std::span<const MutableAntichain<T>>)>;

  explicit BuiltOperator(std::string name) : name_(std::move(name)) {}

  std::string_view name() const override { return name_; }
  uint32_t inputs() const override { return static_cast<uint32_t>(connectivity_.size()); }
  uint32_t outputs() const override { return outputs_; }
  Connectivity<T> connectivity() const override { return connectivity_; }
  bool notify_me() const override { return notify_; }

  bool schedule() override {
    for (size_t i = 0; i < frontiers_.size(); ++i) {
      auto& changes = this->progress_.frontiers[i];
      if (!changes.is_empty()) {
        frontiers_[i].update_iter(changes.iter());
        changes.clear();
      }
    }
    bool again = logic_ ? logic_(frontiers_) : false;
    for (const auto& end : ends_) again = again || end->maybe_pending();
    return again;
  }

  // ---- building ----
  uint32_t add_input(std::shared_ptr<InputEndBase> end,
                     std::optional<std::vector<Antichain<SummaryOf<T>>>> connection) {
    std::vector<Antichain<SummaryOf<T>>> row;
    if (connection) {
      // Rows may name outputs added later; outputs the row does not name are not connected.
      row = std::move(*connection);
      row.resize(std::max<size_t>(row.size(), outputs_));
    } else {
      row.assign(outputs_, Antichain<SummaryOf<T>>{identity_summary<T>()});
    }
    connectivity_.push_back(std::move(row));
    default_connected_.push_back(!connection.has_value());
    ends_.push_back(std::move(end));
    frontiers_.emplace_back();
    this->progress_.resize(connectivity_.size(), outputs_);
    return static_cast<uint32_t>(connectivity_.size() - 1);
  }
  uint32_t add_output() {
    ++outputs_;
    for (size_t i = 0; i < connectivity_.size(); ++i) {
      if (connectivity_[i].size() < outputs_) {
        connectivity_[i].resize(outputs_);
        if (default_connected_[i]) connectivity_[i].back().insert(identity_summary<T>());
      }
    }
    this->progress_.resize(connectivity_.size(), outputs_);
    return outputs_ - 1;
  }
  void set_notify(bool notify) { notify_ = notify; }
  void set_logic(Logic logic) { logic_ = std::move(logic); }
  const std::vector<Antichain<SummaryOf<T>>>& connection(uint32_t input) const {
    return connectivity_[input];
  }

 private:
  std::string name_;
  uint32_t outputs_ = 0;
  Connectivity<T> connectivity_;
  std::vector<bool> default_connected_;
  std::vector<std::shared_ptr<InputEndBase>> ends_;
  std::vector<MutableAntichain<T>> frontiers_;
  bool notify_ = true;
  // Declared last: destroyed first, releasing its capabilities while progress_ is alive.
  Logic logic_;
};

// An operator's handle on one of its inputs.
template <Timestamp T, class D>
class OperatorInput {
 public:
  // One batch of records at one time, with the capability that came with it.
  struct Delivery {
    InputCapability<T> capability;
    std::vector<D>& data;
    const T& time() const { return capability.time(); }
  };

  OperatorInput(BuiltOperator<T>* op, uint32_t port, ChannelEnd<T, D>* end)
      : op_(op), port_(port), end_(end) {}

  // The next batch, or none. The batch stays valid until the next call; the records may be
  // moved out of it. The records count as consumed when the delivery's capability is destroyed
  // (at the end of the caller's loop iteration, unless it moves the capability out to keep it).
  std::optional<Delivery> next() {
    Message<T, D>* message = end_->pull();
    if (message == nullptr) return std::nullopt;
    auto& progress = op_->progress();
    return Delivery{InputCapability<T>(message->time, progress.internals, op_->connection(port_),
                                       progress.consumeds[port_].get(),
                                       static_cast<int64_t>(message->data.size())),
                    message->data};
  }

  // Calls f(const InputCapability<T>&, std::vector<D>&) for every pending batch; the records
  // count as consumed when f returns.
  template <class F>
  void for_each(F&& f) {
    while (auto delivery = next()) f(delivery->capability, delivery->data);
  }

  uint32_t port() const { return port_; }

 private:
  BuiltOperator<T>* op_;
  uint32_t port_;
  ChannelEnd<T, D>* end_;
};

// An operator's handle on one of its outputs: records are given through a session at a time
// for which the operator holds a capability.
template <Timestamp T, class D>
class OperatorOutput {
 public:
  // Records at one time. A session holds a capability at its time for as long as it lives, so
  // what it gives is never behind a frontier, however long it is kept.
  class Session {
   public:
    Session(OutputPort<T, D>* port, Capability<T> capability)
        : port_(port), capability_(std::move(capability)) {}
    void give(D&& record) { port_->give(capability_.time(), std::move(record)); }
    void give(const D& record) { port_->give(capability_.time(), record); }
    // Sends a whole batch; leaves `batch` empty.
    void give_vec(std::vector<D>& batch) { port_->give_batch(capability_.time(), batch); }
    template <class Range>
    void give_range(Range&& range) {
      for (auto&& record : range) {
        port_->give(capability_.time(), std::forward<decltype(record)>(record));
      }
    }
    const T& time() const { return capability_.time(); }

   private:
    OutputPort<T, D>* port_;
    Capability<T> capability_;
  };

  OperatorOutput(OutputPort<T, D>* port, BuiltOperator<T>* op, uint32_t index)
      : port_(port), op_(op), index_(index) {}

  // A session at `capability`'s time. REQUIRES: the capability is for this output and not moved
  // from (otherwise a UsageError, which fails the operator).
  Session session(const Capability<T>& capability) const {
    WEIR_USAGE_CHECK(capability.valid())
        << "a moved-from capability was used with output " << index_ << " of " << op_->name();
    WEIR_USAGE_CHECK(capability.output_identity() == op_->progress().internals[index_].get())
        << "a capability for another output was used with output " << index_ << " of "
        << op_->name() << " (a capability is for the one output it was minted for)";
    return Session(port_, capability);
  }
  // A session at the time of input data. REQUIRES: that input is connected to this output with
  // a summary that keeps the time.
  Session session(const InputCapability<T>& capability) const {
    WEIR_USAGE_CHECK(capability.valid())
        << "moved-from input capability used with output " << index_ << " of " << op_->name();
    WEIR_USAGE_CHECK(capability.operator_identity() == op_->progress().internals.data())
        << "input capability of another operator used with output " << index_ << " of "
        << op_->name();
    WEIR_USAGE_CHECK(capability.can_produce(index_, capability.time()))
        << "input data cannot produce output " << index_ << " of " << op_->name()
        << " at its own time";
    return Session(port_, capability.retain_for_output(index_));
  }

  uint32_t index() const { return index_; }

 private:
  OutputPort<T, D>* port_;
  BuiltOperator<T>* op_;
  uint32_t index_;
};

template <Timestamp T>
class OperatorBuilder {
 public:
  OperatorBuilder(std::string name, Scope<T>& scope)
      : scope_(scope),
        node_(scope.reserve_node(name)),
        op_(std::make_unique<BuiltOperator<T>>(std::move(name))) {}
  OperatorBuilder(const OperatorBuilder&) = delete;
  OperatorBuilder& operator=(const OperatorBuilder&) = delete;

  // An input connected to every output with the identity summary.
  template <class D, class Pact = Pipeline>
  OperatorInput<T, D> add_input(const Stream<T, D>& stream, const Pact& pact = Pact{}) {
    return add_input_impl(stream, pact, std::nullopt);
  }
  // An input with one antichain of summaries per output (empty: not connected).
  template <class D, class Pact>
  OperatorInput<T, D> add_input_connection(const Stream<T, D>& stream, const Pact& pact,
                                           std::vector<Antichain<SummaryOf<T>>> connection) {
    return add_input_impl(stream, pact, std::move(connection));
  }

  template <class D>
  std::pair<OperatorOutput<T, D>, Stream<T, D>> add_output() {
    WEIR_CHECK(op_) << "operator already built";
    const uint32_t index = op_->add_output();
    auto& port = scope_.template add_output_port<D>(node_);
    return {OperatorOutput<T, D>(&port, op_.get(), index),
            Stream<T, D>(scope_, Source{node_, index})};
  }

  // Whether the operator runs when an input frontier changes (default: yes).
  void set_notify(bool notify) { op_->set_notify(notify); }

  Scope<T>& scope() const { return scope_; }
  uint32_t index() const { return node_; }
  std::vector<size_t> path() const { return scope_.path_of(node_); }
  Activator activator() const { return scope_.activator_for(node_); }
  SyncActivator sync_activator() const { return scope_.sync_activator_for(node_); }

  // Finishes the operator. `constructor(std::vector<Capability<T>>)` returns the logic.
  template <class Constructor>
  void build(Constructor&& constructor) {
    WEIR_CHECK(op_) << "operator already built";
    std::vector<Capability<T>> capabilities;
    auto& internals = op_->progress().internals;
    for (auto& internal : internals) {
      capabilities.push_back(Capability<T>::mint(minimum_time<T>(), internal.get()));
      // The scope counts the initial capability itself; report changes relative to it.
      internal->update(minimum_time<T>(), -1);
    }
    // What the constructor throws names this operator (then unwinds the dataflow's building).
    auto logic = [&] {
      try {
        return constructor(std::move(capabilities));
      } catch (const UsageError& e) {
        scope_.fail_building(node_, e.what(), true);
        throw;
      } catch (const std::exception& e) {
        scope_.fail_building(node_, e.what(), false);
        throw;
      }
    }();
    using Logic = decltype(logic);
    using Frontiers = std::span<const MutableAntichain<T>>;
    if constexpr (std::is_same_v<std::invoke_result_t<Logic&, Frontiers>, bool>) {
      op_->set_logic(std::move(logic));
    } else {
      op_->set_logic([logic = std::move(logic)](Frontiers frontiers) mutable {
        logic(frontiers);
        return false;
      });
    }
    scope_.add_operator(node_, std::move(op_));
  }

 private:
  template <class D, class Pact>
  OperatorInput<T, D> add_input_impl(
      const Stream<T, D>& stream, const Pact& pact,
      std::optional<std::vector<Antichain<SummaryOf<T>>>> connection) {
    WEIR_CHECK(op_) << "operator already built";
    WEIR_CHECK(&stream.scope() == &scope_)
        << "stream from scope '" << stream.scope().name() << "' used in scope '" << scope_.name()
        << "': enter or leave the scope first";
    const uint32_t port = op_->inputs();
    auto end = stream.connect_to(Target{node_, port}, pact);
    ChannelEnd<T, D>* raw = end.get();
    op_->add_input(std::move(end), std::move(connection));
    return OperatorInput<T, D>(op_.get(), port, raw);
  }

  Scope<T>& scope_;
  uint32_t node_;
  std::unique_ptr<BuiltOperator<T>> op_;
};

}  // namespace weir
