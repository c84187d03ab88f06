// Async operators: an operator whose logic is a sequential program that waits.
//
// AsyncOperatorBuilder<T> builds an operator with any number of inputs and outputs whose body
// runs on a fiber owned by the worker (on the worker's thread, never elsewhere). The body gets an
// AsyncContext (context.h) to wait with, and one CapabilitySet per output, each starting with one
// capability at the minimum time. It reads inputs with `input.next()`, which suspends the fiber
// until the operator is activated with something new, and gives records on outputs with
// `output.give(capability, record)`.
//
//   weir::AsyncOperatorBuilder<uint64_t> builder("Copy", scope);
//   auto input = builder.add_input(stream);
//   auto [output, copied] = builder.add_output<uint64_t>();
//   auto built = builder.build([=](weir::AsyncContext&, auto caps) mutable {
//     caps[0].clear();  // output follows input: nothing to hold
//     for (;;) {
//       auto event = input.next();
//       if (auto* data = event.data()) {
//         output.give_vec(data->capability, data->batch);
//       } else if (event.is_end()) {
//         return;
//       }
//     }
//   });
//
// Progress. Capabilities are real across suspensions: while the body holds one (in its sets or
// in a local), no frontier downstream of its output passes its time. Dropping or downgrading one
// anywhere in the body is reported when the body next suspends. A batch from `next()` counts as
// consumed only when its InputCapability is destroyed (with the event, or later if the body moves
// it out to keep it), so it may be used to give records until then, across suspensions.
//
// Outputs are fueled: after AsyncOptions' fuel given since the body last suspended, giving yields
// (flushing what was given and letting other operators run). Fuel counts records times
// sizeof(D), not the heap data they own (AsyncContext::use_fuel counts more). To give many records
// one by one, `output.session(capability)` checks the capability once.
//
// Capabilities should be dropped by the body: a change made outside it (by the worker's own code
// holding a copy, say) is reported only when the operator next runs.
//
// Errors. A body may return absl::Status or void. An error returned, or an exception thrown, ends
// the body but keeps its capabilities, so partial output never looks complete: the ones in its
// sets stay, and the ones it released during the run that failed (locals unwound by the
// exception, say) are held again. The batches it was handling count as unread again and a failed
// operator reads no more, so every output their input is connected to stays held at their times.
// The error is given on the operator's error stream (`AsyncBuilt::errors`, at the minimum time)
// and then, with OnError::kFail (the default), fails the execution: `execute` returns the error,
// naming the operator (a press of the button does not hide it). With OnError::kHold the operator
// holds its capabilities until it is shut down or its dataflow dropped.
//
// The body's closure is destroyed when the body returns or fails: what it captured is released
// with the run. A ShutdownButton or ShutdownToken may outlive the execution; pressing it then does
// nothing.
//
// Shutdown. `build` returns a ShutdownButton. Once pressed on this worker the body is no longer
// resumed (nor started, if it had not run yet); once pressed on every worker of the cluster (a
// press reaches other processes as a frame on the button's channel), the fiber is unwound
// (every destructor on its stack runs: RAII releases its capabilities), every capability the
// operator held is dropped, and its inputs are drained so that the dataflow can complete. Dropping
// the dataflow (Worker::drop_dataflow) unwinds the fiber at once. A body that ends by itself drops
// its capabilities and drains its inputs from then on.
//
// Thread safety: worker-local. Handles (inputs, outputs, the context) are used only from the
// body; the button from the worker's thread.

#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"

#include "weir/async/context.h"
#include "weir/async/fiber.h"
#include "weir/check.h"
#include "weir/communication/allocator.h"
#include "weir/communication/channel.h"
#include "weir/communication/transport.h"
#include "weir/dataflow/operator.h"
#include "weir/dataflow/pact.h"
#include "weir/dataflow/port.h"
#include "weir/dataflow/scope.h"
#include "weir/dataflow/stream.h"
#include "weir/mutex.h"
#include "weir/progress/antichain.h"
#include "weir/progress/capability.h"
#include "weir/worker/worker.h"

namespace weir {

// What a failed body reports on its operator's error stream.
struct AsyncError {
  std::string operator_name;
  size_t worker = 0;
  absl::Status status;
};

// What happens after a body fails (returns an error or throws).
enum class OnError {
  // The error goes to the error stream, then fails the execution (`execute` returns it).
  kFail,
  // The error goes to the error stream; the operator holds its capabilities until it is shut
  // down on every worker or its dataflow is dropped (for supervisors that restart dataflows).
  kHold,
};

struct AsyncOptions {
  size_t stack_size = kDefaultFiberStackSize;
  size_t fuel_bytes = kDefaultFuelBytes;  // Records times sizeof(D): see kDefaultFuelBytes.
  OnError on_error = OnError::kFail;
  // The most blocking calls of the operator in flight at once, over its workers in the process.
  size_t max_blocking_calls = kDefaultMaxBlockingCalls;
};

namespace internal {

// A shutdown button as the workers of a process share it: it counts the presses of every worker
// of the cluster and activates the operator on each local worker at every press. A press on this
// process goes to every other process as an empty data frame on the button's channel.
class ButtonShared {
 public:
  ButtonShared(ProcessShared* process, uint64_t channel)
      : process_(process),
        channel_(channel),
        blocking_limit_(make_blocking_limit()),
        activators_(process->workers()) {}

  // What decodes presses from other processes (a transport thread calls it).
  static RemoteSink remote_sink(std::shared_ptr<ButtonShared> button) {
    return [button](uint32_t from, uint32_t, uint64_t, std::string_view payload) {
      if (!payload.empty()) {
        return absl::InvalidArgumentError("malformed shutdown press from worker " +
                                          std::to_string(from) + " on channel " +
                                          std::to_string(button->channel_));
      }
      button->count();
      return absl::OkStatus();
    };
  }

  void set_activator(size_t local_worker, SyncActivator activator) {
    weir::MutexLock lock(mu_);
    activators_[local_worker] = std::move(activator);
  }
  // Worker `worker` (global index, of this process) pressed.
  void press(size_t worker) {
    if (Transport* transport = process_->transport()) {
      for (size_t p = 0; p < process_->processes(); ++p) {
        if (p == process_->process()) continue;
        transport->send_data(p, channel_, static_cast<uint32_t>(worker),
                             static_cast<uint32_t>(p * process_->workers()), std::string());
      }
    }
    count();
  }
  // Presses seen so far, from every worker of the cluster.
  size_t presses() const { return presses_.load(); }
  // The operator's bound on blocking calls, shared by its instances on the process's workers.
  const std::shared_ptr<BlockingLimit>& blocking_limit() const { return blocking_limit_; }

 private:
  void count() {
    presses_.fetch_add(1);
    std::vector<SyncActivator> activators;
    {
      weir::MutexLock lock(mu_);
      activators = activators_;
    }
    for (const auto& activator : activators) activator.activate();
  }

  ProcessShared* process_;  // Outlives every operator, which detaches its ButtonState.
  uint64_t channel_;
  std::shared_ptr<BlockingLimit> blocking_limit_;
  std::atomic<size_t> presses_{0};
  weir::Mutex mu_;
  std::vector<SyncActivator> activators_ ABSL_GUARDED_BY(mu_);  // Per local worker.
};

// The worker-local side of an operator's shutdown button. A button or token may outlive its
// operator and its execution (kept by the caller of `execute`): the operator detaches the state
// when it is destroyed (on its worker's thread, while the process's shared state still lives),
// and a press afterwards only marks the button pressed.
struct ButtonState {
  std::shared_ptr<ButtonShared> shared;  // Null once detached.
  size_t worker = 0;                     // Global index.
  bool pressed = false;

  void press() {
    if (pressed) return;
    pressed = true;
    if (shared) shared->press(worker);
  }
  void detach() { shared.reset(); }
};

}  // namespace internal

class ShutdownToken;

// Shuts an async operator down once pressed on every worker (see the top of this file). Pressing
// again does nothing.
class ShutdownButton {
 public:
  ShutdownButton() = default;
  explicit ShutdownButton(std::shared_ptr<internal::ButtonState> state)
      : state_(std::move(state)) {}

  void press() {
    if (state_) state_->press();
  }
  bool is_pressed() const { return state_ && state_->pressed; }
  // A token that presses the button when destroyed.
  ShutdownToken press_on_drop() &&;

 private:
  std::shared_ptr<internal::ButtonState> state_;
};

class ShutdownToken {
 public:
  ShutdownToken() = default;
  explicit ShutdownToken(ShutdownButton button) : button_(std::move(button)) {}
  ShutdownToken(ShutdownToken&&) noexcept = default;
  ShutdownToken& operator=(ShutdownToken&& other) noexcept {
    if (this != &other) {
      button_.press();
      button_ = std::move(other.button_);
    }
    return *this;
  }
  ShutdownToken(const ShutdownToken&) = delete;
  ShutdownToken& operator=(const ShutdownToken&) = delete;
  ~ShutdownToken() { button_.press(); }

 private:
  ShutdownButton button_;
};

inline ShutdownToken ShutdownButton::press_on_drop() && { return ShutdownToken(std::move(*this)); }

namespace internal {

// One input of an async operator, as the operator drives it.
template <Timestamp T>
class AsyncInputCore {
 public:
  virtual ~AsyncInputCore() = default;

  // Applies frontier changes the scope delivered.
  void apply_frontier(ChangeBatch<T>& changes) {
    if (changes.is_empty()) return;
    frontier_.update_iter(changes.iter());
    changes.clear();
    const auto now = frontier_.frontier();
    const bool same =
        now.size() == reported_.size() && std::all_of(now.begin(), now.end(), [&](const T& t) {
          return std::find(reported_.begin(), reported_.end(), t) != reported_.end();
        });
    if (!same) progress_pending_ = true;
  }
  // Consumes and drops every queued batch.
  virtual void discard(ChangeBatch<T>& consumed) = 0;

  const MutableAntichain<T>& frontier() const { return frontier_; }

 protected:
  MutableAntichain<T> frontier_;
  std::vector<T> reported_{minimum_time<T>()};  // The frontier the body last saw.
  bool progress_pending_ = false;
};

template <Timestamp T, class D>
class AsyncInputState;

}  // namespace internal

template <Timestamp T>
class AsyncOperator;

// An async operator's handle on one of its inputs (used from the body).
template <Timestamp T, class D>
class AsyncInput {
 public:
  // A batch of records at one time. `batch` stays valid, and the InputCapability usable, until
  // the next call to next()/try_next() on this input; the records may be moved out.
  struct Data {
    InputCapability<T> capability;
    std::vector<D>& batch;
    const T& time() const { return capability.time(); }
  };
  // The input's frontier moved: no more data will arrive at times not after it.
  struct Progress {
    Antichain<T> frontier;
  };
  // No more data will ever arrive (the frontier is empty and everything was read).
  struct End {};

  class Event {
   public:
    explicit Event(Data data) : event_(std::move(data)) {}
    explicit Event(Progress progress) : event_(std::move(progress)) {}
    explicit Event(End end) : event_(end) {}

    Data* data() { return std::get_if<Data>(&event_); }
    const Progress* progress() const { return std::get_if<Progress>(&event_); }
    bool is_end() const { return std::holds_alternative<End>(event_); }
    std::variant<Data, Progress, End>& get() { return event_; }

   private:
    std::variant<Data, Progress, End> event_;
  };

  AsyncInput() = default;
  explicit AsyncInput(internal::AsyncInputState<T, D>* state) : state_(state) {}

  // The next event, suspending until there is one. Frontier changes come before data.
  Event next();
  // The next event if there is one now; never suspends.
  std::optional<Event> try_next();
  // The input's frontier as of the operator's current activation.
  std::span<const T> frontier() const;
  uint32_t index() const;

 private:
  internal::AsyncInputState<T, D>* state_ = nullptr;
};

// An async operator's handle on one of its outputs (used from the body).
template <Timestamp T, class D>
class AsyncOutput {
 public:
  // Records at one time, checked once: the cheap way to give many records one by one. A session
  // holds a capability at its time for as long as it lives (across suspensions too), so what it
  // gives is never behind a frontier.
  class Session {
   public:
    Session(OutputPort<T, D>* port, AsyncContext* context, Capability<T> capability)
        : port_(port), context_(context), capability_(std::move(capability)) {}
    void give(D record) {
      port_->give(capability_.time(), std::move(record));
      context_->use_fuel(sizeof(D));
    }
    // Gives a whole batch; leaves `batch` empty.
    void give_vec(std::vector<D>& batch) {
      const size_t bytes = batch.size() * sizeof(D);
      port_->give_batch(capability_.time(), batch);
      context_->use_fuel(bytes);
    }
    [[deprecated("use give_vec")]] void give_batch(std::vector<D>& batch) { give_vec(batch); }
    const T& time() const { return capability_.time(); }

   private:
    OutputPort<T, D>* port_;
    AsyncContext* context_;
    Capability<T> capability_;
  };

  AsyncOutput() = default;
  AsyncOutput(AsyncOperator<T>* op, OutputPort<T, D>* port, uint32_t index)
      : op_(op), port_(port), index_(index) {}

  // A session at `capability`'s time (a Capability of this output, or the InputCapability of
  // data from a connected input).
  Session session(const Capability<T>& capability) {
    check(capability);
    return Session(port_, &op_->context(), capability);
  }
  Session session(const InputCapability<T>& capability) {
    check(capability);
    return Session(port_, &op_->context(), capability.retain_for_output(index_));
  }

  // Gives `record` at `capability`'s time. REQUIRES: a capability for this output.
  void give(const Capability<T>& capability, D record) {
    check(capability);
    port_->give(capability.time(), std::move(record));
    spend(sizeof(D));
  }
  // Gives `record` at the time of input data. REQUIRES: the input is connected to this output
  // (with a summary that keeps the time), and no newer event was taken from it.
  void give(const InputCapability<T>& capability, D record) {
    check(capability);
    port_->give(capability.time(), std::move(record));
    spend(sizeof(D));
  }
  // Gives a whole batch; leaves `batch` empty (timely's give_vec).
  void give_vec(const Capability<T>& capability, std::vector<D>& batch) {
    check(capability);
    const size_t bytes = batch.size() * sizeof(D);
    port_->give_batch(capability.time(), batch);
    spend(bytes);
  }
  void give_vec(const InputCapability<T>& capability, std::vector<D>& batch) {
    check(capability);
    const size_t bytes = batch.size() * sizeof(D);
    port_->give_batch(capability.time(), batch);
    spend(bytes);
  }
  [[deprecated("use give_vec")]] void give_batch(const Capability<T>& capability,
                                                 std::vector<D>& batch) {
    give_vec(capability, batch);
  }
  [[deprecated("use give_vec")]] void give_batch(const InputCapability<T>& capability,
                                                 std::vector<D>& batch) {
    give_vec(capability, batch);
  }

  uint32_t index() const { return index_; }

 private:
  void check(const Capability<T>& capability) const;
  void check(const InputCapability<T>& capability) const;
  void spend(size_t bytes);

  AsyncOperator<T>* op_ = nullptr;
  OutputPort<T, D>* port_ = nullptr;
  uint32_t index_ = 0;
};

// The operator AsyncOperatorBuilder makes.
template <Timestamp T>
class AsyncOperator final : public Operator<T> {
 public:
  using Body = std::function<absl::Status(AsyncContext&, std::span<CapabilitySet<T>>)>;

  AsyncOperator(std::string name, Scope<T>& scope, uint32_t node)
      : name_(std::move(name)),
        scope_(scope),
        node_(node),
        context_(scope.worker(), scope.sync_activator_for(node), name_) {
    Worker& worker = scope.worker();
    // Every worker builds the same operators in the same order: they meet at the same button.
    button_channel_ = worker.allocator().next_channel_id();
    ProcessShared* process = &worker.allocator().process();
    const uint64_t channel = button_channel_;
    auto shared = process->template channel<internal::ButtonShared>(
        channel, [&] { return std::make_shared<internal::ButtonShared>(process, channel); },
        &internal::ButtonShared::remote_sink);
    shared->set_activator(worker.allocator().local_index(), scope.sync_activator_for(node));
    button_ = std::make_shared<internal::ButtonState>();
    button_->shared = std::move(shared);
    button_->worker = worker.index();
  }
  AsyncOperator(const AsyncOperator&) = delete;
  AsyncOperator& operator=(const AsyncOperator&) = delete;

  ~AsyncOperator() override {
    // The body refers to everything below: unwind it first (its destructors run now, releasing
    // what it holds), then drop what the operator holds.
    fiber_.reset();
    body_ = nullptr;
    held_.clear();
    capabilities_.clear();
    error_capability_.reset();
    button_->detach();
    Worker& worker = scope_.worker();
    worker.allocator().process().release_channel(button_channel_);
    // Its id was taken from the data channels' sequence: an event log that forgets channels by
    // id must see it go (it is never built as a data channel).
    if (worker.logger().active()) worker.logger().log(ChannelDropped{button_channel_});
  }

  std::string_view name() const override { return name_; }
  uint32_t inputs() const override { return static_cast<uint32_t>(inputs_.size()); }
  uint32_t outputs() const override { return static_cast<uint32_t>(ports_.size()); }
  Connectivity<T> connectivity() const override { return connectivity_; }
  bool notify_me() const override { return true; }

  bool schedule() override {
    for (size_t i = 0; i < inputs_.size(); ++i) {
      inputs_[i]->apply_frontier(this->progress_.frontiers[i]);
    }
    // A failure goes first: a press never hides it.
    if (fail_pending_) {
      fail_pending_ = false;
      fail_execution();
      return false;
    }
    if (button_->pressed) {
      // Phase one: this worker pressed, so the body no longer runs. Phase two, once every worker
      // pressed: unwind it and let go of everything.
      if (button_->shared->presses() < scope_.worker().peers()) return false;
      if (state_ != State::kShutDown) shut_down();
      drain_inputs();
      return false;
    }
    bool again = false;
    if (state_ == State::kRunning) {
      const uint64_t broken_rules = internal::usage_errors;
      fiber_->resume();
      if (internal::usage_errors != broken_rules) [[unlikely]] {
        // The body broke a rule of weir's API and caught the UsageError: it fails all the same,
        // and is not resumed again.
        if (fiber_->is_done()) body_ = nullptr;
        fail_body(absl::FailedPreconditionError(internal::last_usage_error), true);
        again = true;
      } else if (fiber_->is_done()) {
        finish_body();
        again = fail_pending_;
      } else {
        again = context_.take_yield();
      }
    }
    // A failed operator drains nothing: what is queued holds its outputs too.
    if (state_ == State::kDone) drain_inputs();
    return again;
  }

  // ---- used by the builder and the handles ----

  AsyncContext& context() { return context_; }
  Scope<T>& scope() const { return scope_; }
  uint32_t node() const { return node_; }
  const std::vector<Antichain<SummaryOf<T>>>& connection(uint32_t input) const {
    return connectivity_[input];
  }
  std::span<const InternalHandle<T>> internals() const { return this->progress_.internals; }
  ChangeBatch<T>& consumed(uint32_t input) { return *this->progress_.consumeds[input]; }
  InternalChanges<T>* consumed_changes(uint32_t input) {
    return this->progress_.consumeds[input].get();
  }
  std::shared_ptr<internal::ButtonState> button() const { return button_; }

  void add_input(std::unique_ptr<internal::AsyncInputCore<T>> input,
                 std::shared_ptr<InputEndBase> end) {
    inputs_.push_back(std::move(input));
    ends_.push_back(std::move(end));
  }
  void add_output(OutputPortBase<T>* port) { ports_.push_back(port); }
  void set_options(const AsyncOptions& options) { options_ = options; }

  // Completes the operator: `connectivity` has a row per input and an entry per output (the
  // error output last); starts holding one capability per output.
  void finish_building(Connectivity<T> connectivity, OutputPort<T, AsyncError>* error_port,
                       Body body) {
    connectivity_ = std::move(connectivity);
    error_port_ = error_port;
    this->progress_.resize(inputs_.size(), ports_.size());
    auto& internals = this->progress_.internals;
    const size_t user_outputs = ports_.size() - 1;
    for (size_t o = 0; o < internals.size(); ++o) {
      auto capability = Capability<T>::mint(minimum_time<T>(), internals[o].get());
      // The scope counts the initial capability itself; report changes relative to it.
      internals[o]->update(minimum_time<T>(), -1);
      if (o < user_outputs) {
        capabilities_.emplace_back(std::move(capability));
      } else {
        error_capability_.emplace(std::move(capability));
      }
    }
    body_ = std::move(body);
    context_.set_fuel(options_.fuel_bytes);
    context_.set_blocking_limit(button_->shared->blocking_limit(), options_.max_blocking_calls);
    fiber_ = std::make_unique<Fiber>(
        [this] { status_ = body_(context_, capabilities_); }, options_.stack_size,
        "async operator '" + name_ + "' in dataflow '" + scope_.name() + "' on worker " +
            std::to_string(scope_.worker().index()));
    context_.bind(fiber_.get());
  }

 private:
  enum class State { kRunning, kDone, kFailed, kShutDown };

  // The body returned or threw: on this thread's stack, after the fiber finished.
  void finish_body() {
    // What the closure captured goes with the body (a capability kept there would hold its
    // output forever): its release is reported with the run's, or held again if the body failed.
    body_ = nullptr;
    absl::Status status = status_;
    bool rule = false;
    if (std::exception_ptr error = fiber_->exception()) status = exception_status(error, rule);
    if (status.ok()) {
      state_ = State::kDone;
      capabilities_.clear();
      error_capability_.reset();
      return;
    }
    fail_body(std::move(status), rule);
  }

  // The body failed (returned an error, threw, or broke a rule): keep what it held, report the
  // error on the error stream, and fail the execution unless OnError::kHold (a broken rule fails
  // it regardless). The fiber may still be suspended; it is not resumed again.
  void fail_body(absl::Status status, bool rule) {
    hold_released();
    withhold_consumed();
    state_ = State::kFailed;
    failure_ = status;
    error_port_->give(error_capability_->time(),
                      AsyncError{name_, scope_.worker().index(), status});
    error_capability_.reset();
    fail_pending_ = options_.on_error == OnError::kFail || rule;
    failure_is_rule_ = rule;
  }

  // Holds again every capability the failed run released: until the operator is shut down, no
  // frontier may pass a time the body held when it failed.
  void hold_released() {
    auto& internals = this->progress_.internals;
    for (size_t o = 0; o + 1 < internals.size(); ++o) {
      std::vector<std::pair<T, int64_t>> released;
      for (const auto& [time, diff] : internals[o]->iter()) {
        if (diff < 0) released.emplace_back(time, -diff);
      }
      for (const auto& [time, count] : released) {
        for (int64_t k = 0; k < count; ++k) {
          held_.push_back(Capability<T>::mint(time, internals[o].get()));
        }
      }
    }
  }

  // Takes back the consumption the failed run would report: the batches it was handling (a
  // batch's InputCapability released by the failure, say) count as unread again, so every output
  // their input is connected to stays held at their times, as the queued batches, which a failed
  // operator no longer drains, hold it at theirs. Reported once the operator is shut down.
  void withhold_consumed() {
    withheld_.resize(inputs_.size());
    for (size_t i = 0; i < inputs_.size(); ++i) consumed(i).drain_into(withheld_[i]);
  }

  void fail_execution() {
    Worker& worker = scope_.worker();
    worker.fail(
        absl::Status(failure_.code(), "operator '" + name_ + "' in dataflow '" + scope_.name() +
                                          "' on worker " + std::to_string(worker.index()) +
                                          (failure_is_rule_ ? " broke a rule: " : " failed: ") +
                                          std::string(failure_.message())));
  }

  void shut_down() {
    fiber_.reset();
    body_ = nullptr;
    capabilities_.clear();
    held_.clear();
    error_capability_.reset();
    for (size_t i = 0; i < withheld_.size(); ++i) withheld_[i].drain_into(consumed(i));
    withheld_.clear();
    state_ = State::kShutDown;
  }

  void drain_inputs() {
    for (size_t i = 0; i < inputs_.size(); ++i) inputs_[i]->discard(consumed(i));
  }

  // `rule`: set when the exception was a UsageError (a rule of weir's API broken).
  static absl::Status exception_status(std::exception_ptr error, bool& rule) {
    try {
      std::rethrow_exception(std::move(error));
    } catch (const UsageError& e) {
      rule = true;
      return absl::FailedPreconditionError(e.what());
    } catch (const std::exception& e) {
      return absl::InternalError(e.what());
    } catch (...) {
      return absl::InternalError("unknown exception");
    }
  }

  std::string name_;
  Scope<T>& scope_;
  uint32_t node_;
  AsyncOptions options_;
  Connectivity<T> connectivity_;
  std::vector<std::unique_ptr<internal::AsyncInputCore<T>>> inputs_;
  std::vector<std::shared_ptr<InputEndBase>> ends_;
  std::vector<OutputPortBase<T>*> ports_;  // Owned by the scope; the error port last.
  OutputPort<T, AsyncError>* error_port_ = nullptr;

  AsyncContext context_;
  Body body_;
  std::unique_ptr<Fiber> fiber_;
  State state_ = State::kRunning;
  absl::Status status_;   // What the body returned.
  absl::Status failure_;  // Why it failed.
  bool fail_pending_ = false;
  bool failure_is_rule_ = false;  // failure_ is a rule of weir's API the body broke.

  std::vector<CapabilitySet<T>> capabilities_;  // The body's, one set per output.
  std::optional<Capability<T>> error_capability_;
  std::vector<Capability<T>> held_;       // Re-held after a failure.
  std::vector<ChangeBatch<T>> withheld_;  // Per input: consumption a failed run did not report.

  std::shared_ptr<internal::ButtonState> button_;
  uint64_t button_channel_ = 0;
};

namespace internal {

template <Timestamp T, class D>
class AsyncInputState final : public AsyncInputCore<T> {
 public:
  AsyncInputState(AsyncOperator<T>* op, uint32_t port, ChannelEnd<T, D>* end)
      : op_(op), port_(port), end_(end) {}

  std::optional<typename AsyncInput<T, D>::Event> try_next() {
    using Input = AsyncInput<T, D>;
    if (this->progress_pending_) {
      this->progress_pending_ = false;
      const auto now = this->frontier_.frontier();
      this->reported_.assign(now.begin(), now.end());
      Antichain<T> frontier;
      for (const T& t : now) frontier.insert(t);
      return typename Input::Event(typename Input::Progress{std::move(frontier)});
    }
    if (Message<T, D>* message = end_->pull()) {
      // The batch counts as consumed when its InputCapability is destroyed (when the body drops
      // the event, or the capability it moved out of it).
      return typename Input::Event(typename Input::Data{
          InputCapability<T>(message->time, op_->internals(), op_->connection(port_),
                             op_->consumed_changes(port_),
                             static_cast<int64_t>(message->data.size())),
          message->data});
    }
    if (this->frontier_.is_empty()) return typename Input::Event(typename Input::End{});
    return std::nullopt;
  }

  typename AsyncInput<T, D>::Event next() {
    for (;;) {
      if (auto event = try_next()) return std::move(*event);
      op_->context().suspend();
    }
  }

  void discard(ChangeBatch<T>& consumed) override {
    while (Message<T, D>* message = end_->pull()) {
      consumed.update(message->time, static_cast<int64_t>(message->data.size()));
    }
  }

  uint32_t port() const { return port_; }

 private:
  AsyncOperator<T>* op_;
  uint32_t port_;
  ChannelEnd<T, D>* end_;
};

}  // namespace internal

template <Timestamp T, class D>
typename AsyncInput<T, D>::Event AsyncInput<T, D>::next() {
  return state_->next();
}
template <Timestamp T, class D>
std::optional<typename AsyncInput<T, D>::Event> AsyncInput<T, D>::try_next() {
  return state_->try_next();
}
template <Timestamp T, class D>
std::span<const T> AsyncInput<T, D>::frontier() const {
  return state_->frontier().frontier();
}
template <Timestamp T, class D>
uint32_t AsyncInput<T, D>::index() const {
  return state_->port();
}

template <Timestamp T, class D>
void AsyncOutput<T, D>::check(const Capability<T>& capability) const {
  WEIR_USAGE_CHECK(op_ != nullptr) << "an AsyncOutput no builder made (default-constructed) was "
                                      "used: outputs come from add_output";
  WEIR_USAGE_CHECK(capability.valid())
      << "a moved-from capability was used with output " << index_ << " of " << op_->name();
  WEIR_USAGE_CHECK(capability.output_identity() == op_->internals()[index_].get())
      << "a capability for another output was used with output " << index_ << " of " << op_->name()
      << " (a capability is for the one output it was minted for)";
}
template <Timestamp T, class D>
void AsyncOutput<T, D>::check(const InputCapability<T>& capability) const {
  WEIR_USAGE_CHECK(op_ != nullptr) << "an AsyncOutput no builder made (default-constructed) was "
                                      "used: outputs come from add_output";
  WEIR_USAGE_CHECK(capability.valid())
      << "moved-from input capability used with output " << index_ << " of " << op_->name();
  WEIR_USAGE_CHECK(capability.operator_identity() == op_->internals().data())
      << "input capability of another operator used with output " << index_ << " of "
      << op_->name();
  WEIR_USAGE_CHECK(capability.can_produce(index_, capability.time()))
      << "input data cannot produce output " << index_ << " of " << op_->name()
      << " at its own time";
}
template <Timestamp T, class D>
void AsyncOutput<T, D>::spend(size_t bytes) {
  op_->context().use_fuel(bytes);
}

// What `AsyncOperatorBuilder::build` returns.
template <Timestamp T>
struct AsyncBuilt {
  ShutdownButton button;
  Stream<T, AsyncError> errors;  // One record per failed body, at the minimum time.
};

// Builds an async operator (see the top of this file).
template <Timestamp T>
class AsyncOperatorBuilder {
 public:
  AsyncOperatorBuilder(std::string name, Scope<T>& scope)
      : scope_(scope), node_(scope.reserve_node(name)) {
    op_ = std::make_unique<AsyncOperator<T>>(std::move(name), scope, node_);
  }
  AsyncOperatorBuilder(const AsyncOperatorBuilder&) = delete;
  AsyncOperatorBuilder& operator=(const AsyncOperatorBuilder&) = delete;

  // An input connected to every output (also those added later) with the identity summary.
  template <class D, class Pact = Pipeline>
  AsyncInput<T, D> add_input(const Stream<T, D>& stream, const Pact& pact = Pact{}) {
    return add_input_impl(stream, pact, Connection{Connection::Kind::kAll, {}, {}});
  }
  // An input connected only to the outputs with these indices (none: disconnected).
  template <class D, class Pact>
  AsyncInput<T, D> add_input_connected(const Stream<T, D>& stream, const Pact& pact,
                                       std::vector<uint32_t> outputs) {
    return add_input_impl(stream, pact,
                          Connection{Connection::Kind::kOutputs, std::move(outputs), {}});
  }
  // An input with one antichain of summaries per output (empty or missing: not connected).
  template <class D, class Pact>
  AsyncInput<T, D> add_input_connection(const Stream<T, D>& stream, const Pact& pact,
                                        std::vector<Antichain<SummaryOf<T>>> summaries) {
    return add_input_impl(stream, pact,
                          Connection{Connection::Kind::kSummaries, {}, std::move(summaries)});
  }

  template <class D>
  std::pair<AsyncOutput<T, D>, Stream<T, D>> add_output() {
    WEIR_CHECK(op_) << "operator already built";
    const auto index = static_cast<uint32_t>(outputs_++);
    auto& port = scope_.template add_output_port<D>(node_);
    op_->add_output(&port);
    return {AsyncOutput<T, D>(op_.get(), &port, index), Stream<T, D>(scope_, Source{node_, index})};
  }

  // Options are set before build(): afterwards the operator has taken them, and a setter aborts
  // naming the operator rather than change nothing.
  void set_options(const AsyncOptions& options) { unbuilt_options("set_options") = options; }
  // The fiber's stack size (default kDefaultFiberStackSize).
  void set_stack_size(size_t bytes) { unbuilt_options("set_stack_size").stack_size = bytes; }
  // Fuel between suspensions before giving yields (default kDefaultFuelBytes): records times
  // sizeof(D), not the heap data records own. SIZE_MAX: unlimited.
  void set_fuel(size_t bytes) { unbuilt_options("set_fuel").fuel_bytes = bytes; }
  // The most blocking calls of this operator in flight at once, over all its workers in the
  // process (default kDefaultMaxBlockingCalls; 0 counts as 1); more wait for one of them to
  // return.
  void set_max_blocking_calls(size_t calls) {
    unbuilt_options("set_max_blocking_calls").max_blocking_calls = calls;
  }
  void set_on_error(OnError on_error) { unbuilt_options("set_on_error").on_error = on_error; }

  Scope<T>& scope() const { return scope_; }
  uint32_t index() const { return node_; }
  std::vector<size_t> path() const { return scope_.path_of(node_); }
  Activator activator() const { return scope_.activator_for(node_); }
  SyncActivator sync_activator() const { return scope_.sync_activator_for(node_); }

  // Finishes the operator. `body(AsyncContext&, std::span<CapabilitySet<T>>)` returns void or
  // absl::Status; it starts running when the dataflow is built.
  template <class Body>
  AsyncBuilt<T> build(Body body) {
    WEIR_CHECK(op_) << "operator already built";
    using Caps = std::span<CapabilitySet<T>>;
    using Result = std::invoke_result_t<Body&, AsyncContext&, Caps>;
    static_assert(std::is_void_v<Result> || std::is_convertible_v<Result, absl::Status>,
                  "an async body returns void or absl::Status");
    typename AsyncOperator<T>::Body erased;
    if constexpr (std::is_void_v<Result>) {
      erased = [body = std::move(body)](AsyncContext& ctx, Caps caps) mutable {
        body(ctx, caps);
        return absl::OkStatus();
      };
    } else {
      erased = [body = std::move(body)](AsyncContext& ctx, Caps caps) mutable -> absl::Status {
        return body(ctx, caps);
      };
    }

    // The error output comes last and is connected to no input.
    const auto error_index = static_cast<uint32_t>(outputs_);
    auto& error_port = scope_.template add_output_port<AsyncError>(node_);
    op_->add_output(&error_port);
    const size_t total = outputs_ + 1;
    Connectivity<T> connectivity;
    for (Connection& connection : connections_) {
      std::vector<Antichain<SummaryOf<T>>> row(total);
      switch (connection.kind) {
        case Connection::Kind::kAll:
          for (size_t o = 0; o < outputs_; ++o) row[o].insert(identity_summary<T>());
          break;
        case Connection::Kind::kOutputs:
          for (uint32_t o : connection.outputs) {
            WEIR_CHECK(o < outputs_) << "input of " << scope_.operator_name(node_)
                                     << " connected to output " << o << ", which does not exist";
            row[o].insert(identity_summary<T>());
          }
          break;
        case Connection::Kind::kSummaries:
          WEIR_CHECK(connection.summaries.size() <= outputs_)
              << "input of " << scope_.operator_name(node_) << " has summaries for "
              << connection.summaries.size() << " outputs but there are " << outputs_;
          for (size_t o = 0; o < connection.summaries.size(); ++o) {
            row[o] = std::move(connection.summaries[o]);
          }
          break;
      }
      connectivity.push_back(std::move(row));
    }
    op_->set_options(options_);
    auto button = op_->button();
    op_->finish_building(std::move(connectivity), &error_port, std::move(erased));
    scope_.add_operator(node_, std::move(op_));
    return AsyncBuilt<T>{ShutdownButton(std::move(button)),
                         Stream<T, AsyncError>(scope_, Source{node_, error_index})};
  }

 private:
  struct Connection {
    enum class Kind { kAll, kOutputs, kSummaries };
    Kind kind;
    std::vector<uint32_t> outputs;
    std::vector<Antichain<SummaryOf<T>>> summaries;
  };

  AsyncOptions& unbuilt_options(const char* setter) {
    WEIR_CHECK(op_) << "AsyncOperatorBuilder::" << setter << " called after build() of "
                    << scope_.operator_name(node_) << ": the operator already took its options";
    return options_;
  }

  template <class D, class Pact>
  AsyncInput<T, D> add_input_impl(const Stream<T, D>& stream, const Pact& pact,
                                  Connection connection) {
    WEIR_CHECK(op_) << "operator already built";
    WEIR_CHECK(&stream.scope() == &scope_)
        << "stream from scope '" << stream.scope().name() << "' used in scope '" << scope_.name()
        << "': enter or leave the scope first";
    const auto port = static_cast<uint32_t>(connections_.size());
    auto end = stream.connect_to(Target{node_, port}, pact);
    auto state = std::make_unique<internal::AsyncInputState<T, D>>(op_.get(), port, end.get());
    AsyncInput<T, D> handle(state.get());
    op_->add_input(std::move(state), std::move(end));
    connections_.push_back(std::move(connection));
    return handle;
  }

  Scope<T>& scope_;
  uint32_t node_;
  std::unique_ptr<AsyncOperator<T>> op_;
  AsyncOptions options_;
  size_t outputs_ = 0;
  std::vector<Connection> connections_;
};

}  // namespace weir
