// Inputs: getting data into a dataflow from the worker's own code.
//
// `new_input<D>(scope)` returns an InputHandle and the stream it feeds. The handle holds a
// capability at its current time: `send` records at that time, `advance_to` a later time to say
// that earlier times are complete, `close` (or destruction) to say that no more data will come.
//
//   auto [input, stream] = weir::new_input<std::string>(scope);
//   input.send("hello");
//   input.advance_to(1);
//
// `new_unordered_input<D>(scope)` gives the caller an ActivateCapability and an UnorderedInput
// handle to send at any time the caller holds a capability for, in any order. An
// ActivateCapability schedules its operator whenever it is downgraded or dropped, so the change
// reaches the progress protocol even though it happens outside the operator.
//
// Thread safety: worker-local. Sending to a handle whose dataflow was dropped does nothing.

#pragma once

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "weir/check.h"
#include "weir/dataflow/operator_builder.h"
#include "weir/dataflow/scope.h"
#include "weir/dataflow/stream.h"
#include "weir/progress/capability.h"
#include "weir/usage_error.h"

namespace weir {

namespace internal {

// The part of an input that the handle and its operator share.
template <Timestamp T, class D>
struct InputState {
  bool alive = true;
  OutputPort<T, D>* port = nullptr;
  std::optional<Capability<T>> capability;
  T time = minimum_time<T>();
  std::vector<D> buffer;
  size_t capacity = default_batch_capacity<D>();
  Scope<T>* scope = nullptr;
  uint32_t node = 0;
  const ProcessShared* process = nullptr;  // Whether the execution failed.

  void activate() { scope->activate_child(node); }
  void flush_buffer() {
    if (!buffer.empty()) {
      port->give_batch(time, buffer);
      activate();
    }
  }
};

// Runs when the input's operator is destroyed: the handle goes dead and its capability is
// released while the operator's progress is still alive.
template <class State>
struct InputGuard {
  std::shared_ptr<State> state;
  explicit InputGuard(std::shared_ptr<State> s) : state(std::move(s)) {}
  InputGuard(const InputGuard&) = delete;
  InputGuard& operator=(const InputGuard&) = delete;
  ~InputGuard() {
    state->alive = false;
    state->capability.reset();
  }
};

}  // namespace internal

template <Timestamp T, class D>
class InputHandle {
 public:
  InputHandle() = default;
  explicit InputHandle(std::shared_ptr<internal::InputState<T, D>> state)
      : state_(std::move(state)) {}
  InputHandle(InputHandle&&) noexcept = default;
  InputHandle& operator=(InputHandle&& other) noexcept {
    if (this != &other) {
      close();
      state_ = std::move(other.state_);
    }
    return *this;
  }
  InputHandle(const InputHandle&) = delete;
  InputHandle& operator=(const InputHandle&) = delete;
  ~InputHandle() { close(); }

  // Sends one record at time().
  void send(D record) {
    // Per record: only the cheap check (advance_to, once per round, throws after a failure).
    if (!live()) return;
    auto& s = *state_;
    if (s.buffer.capacity() == 0) s.buffer.reserve(s.capacity);
    s.buffer.push_back(std::move(record));
    if (s.buffer.size() >= s.capacity) s.flush_buffer();
  }
  // Sends a batch of records at time(); leaves `batch` empty (the name of Session::give_vec).
  void give_vec(std::vector<D>& batch) {
    if (!usable() || batch.empty()) return;
    state_->flush_buffer();
    state_->port->give_batch(state_->time, batch);
    state_->activate();
  }
  [[deprecated("use give_vec")]] void send_batch(std::vector<D>& batch) { give_vec(batch); }
  // Sends buffered records now (they are sent anyway on advance_to, close and when full).
  void flush() {
    if (!usable()) return;
    state_->flush_buffer();
    state_->port->flush();
  }

  // Says that no more records will be sent at times before `time`. REQUIRES: time() <= time.
  void advance_to(const T& time) {
    if (!usable()) return;
    auto& s = *state_;
    WEIR_USAGE_CHECK(time_le(s.time, time))
        << "an input cannot go back from " << s.time << " to " << time;
    if (s.time == time) return;
    flush();
    s.time = time;
    s.capability->downgrade(time);
    s.activate();
  }
  // Says that no more records will be sent at all.
  void close() {
    if (!live()) {
      state_.reset();
      return;
    }
    flush();
    state_->capability.reset();
    state_->activate();
    state_.reset();
  }

  const T& time() const {
    WEIR_USAGE_CHECK(state_ != nullptr) << "time() of a closed input";
    return state_->time;
  }
  bool is_closed() const { return state_ == nullptr; }

  // Flow control: true while a channel this input sends on holds its window of bytes for some
  // worker (that worker is behind; docs/cluster.md, "Flow control"). The input itself never
  // waits: a loop that sends as fast as it can should step the worker instead while this holds,
  //
  //   while (input.is_backlogged()) worker.step_or_park(std::chrono::milliseconds(1));
  //
  // or its consumers' queues grow without bound.
  bool is_backlogged() const { return live() && state_->scope->is_backlogged(state_->node); }

 private:
  bool live() const { return state_ != nullptr && state_->alive && state_->capability; }
  // live(), except that an input whose dataflow was dropped because the execution failed throws
  // ExecutionFailed: a closure's loop of rounds that never asks worker.failed() ends at once,
  // instead of running its remaining rounds on nothing.
  bool usable() const {
    if (live()) [[likely]] {
      return true;
    }
    return usable_when_dead();
  }
  // Out of line: send() is called per record and must stay small enough to inline.
  [[gnu::cold, gnu::noinline]] bool usable_when_dead() const {
    if (state_ != nullptr && state_->process != nullptr && state_->process->failed()) {
      const absl::Status status = state_->process->status();
      throw ExecutionFailed(status.message().empty() ? status.ToString()
                                                     : std::string(status.message()));
    }
    return false;
  }
  std::shared_ptr<internal::InputState<T, D>> state_;
};

// A new input: returns its handle and the stream of what is sent to it.
template <class D, Timestamp T>
std::pair<InputHandle<T, D>, Stream<T, D>> new_input(Scope<T>& scope) {
  OperatorBuilder<T> builder("Input", scope);
  auto [output, stream] = builder.template add_output<D>();
  auto state = std::make_shared<internal::InputState<T, D>>();
  state->port = &scope.template output_port<D>(stream.source());
  state->scope = &scope;
  state->node = builder.index();
  state->process = &scope.worker().allocator().process();
  builder.set_notify(false);
  builder.build([state](std::vector<Capability<T>> caps) {
    state->capability.emplace(std::move(caps[0]));
    auto guard = std::make_shared<internal::InputGuard<internal::InputState<T, D>>>(state);
    return [guard](std::span<const MutableAntichain<T>>) {};
  });
  return {InputHandle<T, D>(std::move(state)), stream};
}

// Sends records at any time the caller holds a capability for. Drop every capability (and the
// handle) to let the stream complete.
template <Timestamp T, class D>
class UnorderedInput {
 public:
  struct State {
    bool alive = true;
    OutputPort<T, D>* port = nullptr;
    const void* identity = nullptr;
    LocalActivator* scope = nullptr;
    uint32_t node = 0;
    std::optional<Capability<T>> capability;  // Unused: the caller holds the capabilities.

    void activate() {
      if (alive) scope->activate_child(node);
    }
  };

  // A capability of an unordered input, held by the caller: copying, downgrading and dropping
  // it schedule the input's operator so the change is reported.
  class ActivateCapability {
   public:
    ActivateCapability(Capability<T> capability, std::shared_ptr<State> state)
        : capability_(std::move(capability)), state_(std::move(state)) {}
    ActivateCapability(const ActivateCapability&) = default;
    ActivateCapability(ActivateCapability&&) noexcept = default;
    ActivateCapability& operator=(const ActivateCapability& other) {
      if (this == &other) return *this;
      capability_ = other.capability_;
      state_ = other.state_;
      activate();
      return *this;
    }
    ActivateCapability& operator=(ActivateCapability&& other) noexcept {
      capability_ = std::move(other.capability_);
      state_ = std::move(other.state_);
      activate();
      return *this;
    }
    ~ActivateCapability() {
      if (capability_) {
        capability_.reset();
        activate();
      }
    }

    const T& time() const { return capability_->time(); }
    void downgrade(const T& time) {
      capability_->downgrade(time);
      activate();
    }
    ActivateCapability delayed(const T& time) const {
      return ActivateCapability(capability_->delayed(time), state_);
    }
    const Capability<T>& capability() const { return *capability_; }

   private:
    void activate() {
      if (state_) state_->activate();
    }
    std::optional<Capability<T>> capability_;
    std::shared_ptr<State> state_;
  };

  // Records at one time. Like an operator's session, it holds a capability at its time for as
  // long as it lives: what it gives is never behind a frontier, even after the capability it was
  // opened with is downgraded or dropped.
  class Session {
   public:
    Session(std::shared_ptr<State> state, Capability<T> capability)
        : state_(std::move(state)), capability_(std::move(capability)) {}
    void give(D record) {
      if (state_->alive) state_->port->give(capability_.time(), std::move(record));
    }
    ~Session() {
      if (state_->alive) {
        state_->port->flush();
        state_->activate();
      }
    }
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

   private:
    std::shared_ptr<State> state_;
    Capability<T> capability_;  // Released after the destructor has activated the operator.
  };

  explicit UnorderedInput(std::shared_ptr<State> state) : state_(std::move(state)) {}

  // A session at `capability`'s time. REQUIRES: a capability of this input.
  Session session(const ActivateCapability& capability) {
    WEIR_USAGE_CHECK(capability.capability().valid())
        << "a moved-from capability was used with an unordered input";
    WEIR_USAGE_CHECK(!state_->alive ||
                     capability.capability().output_identity() == state_->identity)
        << "capability of another operator used with an unordered input";
    return Session(state_, capability.capability());
  }

 private:
  std::shared_ptr<State> state_;
};

// An unordered input: returns its handle, the initial capability (at the minimum time) and the
// stream.
template <class D, Timestamp T>
std::tuple<UnorderedInput<T, D>, typename UnorderedInput<T, D>::ActivateCapability, Stream<T, D>>
new_unordered_input(Scope<T>& scope) {
  using State = typename UnorderedInput<T, D>::State;
  OperatorBuilder<T> builder("UnorderedInput", scope);
  auto [output, stream] = builder.template add_output<D>();
  auto state = std::make_shared<State>();
  state->port = &scope.template output_port<D>(stream.source());
  state->scope = &scope;
  state->node = builder.index();
  builder.set_notify(false);
  std::optional<Capability<T>> initial;
  builder.build([&](std::vector<Capability<T>> caps) {
    state->identity = caps[0].output_identity();
    initial.emplace(std::move(caps[0]));
    auto guard = std::make_shared<internal::InputGuard<State>>(state);
    return [guard](std::span<const MutableAntichain<T>>) {};
  });
  return {UnorderedInput<T, D>(state),
          typename UnorderedInput<T, D>::ActivateCapability(std::move(*initial), state), stream};
}

}  // namespace weir
