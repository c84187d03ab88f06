// Capabilities: the right to produce data at times greater than or equal to a time, on one output.
//
// Capability<T> is an RAII token: constructing or copying it adds one to the operator's internal
// count for (output, time); destroying it subtracts one. While a capability is held, no frontier
// downstream of its output can pass its time. Capabilities are minted only when an operator is
// built, or derived from an InputCapability that arrives with data.
//
// Thread safety: worker-local. A capability must be dropped on the thread of the worker that owns
// its operator, before the operator is destroyed.

#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "weir/check.h"
#include "weir/progress/antichain.h"
#include "weir/progress/change_batch.h"
#include "weir/progress/timestamp.h"
#include "weir/usage_error.h"

namespace weir {

namespace internal {
// Live capabilities created on this thread minus those destroyed on it (diagnostics and tests).
inline thread_local int64_t live_capabilities = 0;
}  // namespace internal

// The number of capabilities alive that were created on the calling thread.
inline int64_t live_capabilities_on_this_thread() { return internal::live_capabilities; }

// The capability changes of one operator output, shared by the operator (which reports them) and
// its capabilities (which write them); also the consumption of one input, shared by the operator
// and the InputCapabilities it handed out. Reference-counted without atomics (worker-local), so a
// capability that outlives its operator writes into a batch nobody reads instead of freed memory.
template <Timestamp T>
class InternalChanges {
 public:
  ChangeBatch<T>& batch() { return batch_; }
  void retain() { ++refs_; }
  void release() {
    if (--refs_ == 0) delete this;
  }

 private:
  ChangeBatch<T> batch_;
  int64_t refs_ = 1;
};

// The operator's owning reference to an output's InternalChanges.
template <Timestamp T>
class InternalHandle {
 public:
  InternalHandle() : changes_(new InternalChanges<T>()) {}
  InternalHandle(const InternalHandle&) = delete;
  InternalHandle& operator=(const InternalHandle&) = delete;
  InternalHandle(InternalHandle&& other) noexcept
      : changes_(std::exchange(other.changes_, nullptr)) {}
  InternalHandle& operator=(InternalHandle&& other) noexcept {
    if (this != &other) {
      if (changes_) changes_->release();
      changes_ = std::exchange(other.changes_, nullptr);
    }
    return *this;
  }
  ~InternalHandle() {
    if (changes_) changes_->release();
  }
  ChangeBatch<T>& operator*() const { return changes_->batch(); }
  ChangeBatch<T>* operator->() const { return &changes_->batch(); }
  InternalChanges<T>* get() const { return changes_; }

 private:
  InternalChanges<T>* changes_;
};

template <Timestamp T>
class Capability {
 public:
  Capability(const Capability& other) : time_(other.time_), internal_(other.internal_) {
    acquire();
  }
  Capability(Capability&& other) noexcept
      : time_(std::move(other.time_)), internal_(std::exchange(other.internal_, nullptr)) {}
  Capability& operator=(const Capability& other) {
    if (this != &other) {
      release();
      time_ = other.time_;
      internal_ = other.internal_;
      acquire();
    }
    return *this;
  }
  Capability& operator=(Capability&& other) noexcept {
    if (this != &other) {
      release();
      time_ = std::move(other.time_);
      internal_ = std::exchange(other.internal_, nullptr);
    }
    return *this;
  }
  ~Capability() { release(); }

  const T& time() const { return time_; }

  // Moves this capability to `time`. REQUIRES: time() <= time, and not moved from (otherwise a
  // UsageError, which fails the operator that broke the rule).
  void downgrade(const T& time) {
    WEIR_USAGE_CHECK(valid()) << "a moved-from capability was downgraded (to " << time << ")";
    WEIR_USAGE_CHECK(time_le(time_, time))
        << "a capability can be downgraded only to a later time: from " << time_ << " to " << time;
    internal_->batch().update(time, 1);
    internal_->batch().update(time_, -1);
    time_ = time;
  }

  // A new capability for the same output at `time`. REQUIRES: time() <= time.
  Capability delayed(const T& time) const {
    WEIR_USAGE_CHECK(valid()) << "a moved-from capability was delayed (to " << time << ")";
    WEIR_USAGE_CHECK(time_le(time_, time))
        << "a capability can be delayed only to a later time: from " << time_ << " to " << time;
    return Capability(time, internal_);
  }

  // False once moved from.
  bool valid() const { return internal_ != nullptr; }

  // Identifies the output this capability is for (compared with OperatorOutput's).
  const void* output_identity() const { return internal_; }

  // Mints a capability. Only the runtime calls this: when building an operator, or when deriving
  // a capability from an input.
  static Capability mint(const T& time, InternalChanges<T>* internal) {
    return Capability(time, internal);
  }

 private:
  Capability(const T& time, InternalChanges<T>* internal) : time_(time), internal_(internal) {
    acquire();
  }
  void acquire() {
    if (internal_ != nullptr) {
      internal_->retain();
      internal_->batch().update(time_, 1);
      ++internal::live_capabilities;
    }
  }
  void release() {
    if (internal_ != nullptr) {
      internal_->batch().update(time_, -1);
      internal_->release();
      --internal::live_capabilities;
      internal_ = nullptr;
    }
  }

  T time_;
  InternalChanges<T>* internal_;  // The owning operator output's capability changes.
};

// The capability that comes with input data at `time()`: it can be turned into capabilities for
// outputs this input is connected to, at times the connection's summaries allow.
//
// The rule: an InputCapability cannot be copied, only moved, and the records it came with count
// as consumed (the progress protocol's -1 at the input) only when it is destroyed. Keeping it
// (moved out of its delivery) therefore keeps its time in the input's frontier and, through the
// connectivity, in the downstream frontiers, until it is dropped: what it gives or mints later is
// never behind a frontier. To produce later, the ordinary way is to `retain()` a Capability and
// drop the InputCapability. (timely's ConsumedGuard makes the same promise.)
template <Timestamp T>
class InputCapability {
 public:
  // Runtime-internal. `internals`: the operator's per-output internal change batches;
  // `summaries`: this input's connectivity row (summaries to each output); `consumed`: the
  // input's consumed batch, to which `count` records at `time` are reported on destruction
  // (none: the caller reports consumption itself).
  InputCapability(const T& time, std::span<const InternalHandle<T>> internals,
                  std::span<const Antichain<SummaryOf<T>>> summaries,
                  InternalChanges<T>* consumed = nullptr, int64_t count = 0)
      : time_(time),
        internals_(internals),
        summaries_(summaries),
        consumed_(consumed),
        count_(count) {
    if (consumed_ != nullptr) consumed_->retain();
  }
  InputCapability(const InputCapability&) = delete;
  InputCapability& operator=(const InputCapability&) = delete;
  // A moved-from InputCapability is empty: it produces nothing (valid() is false).
  InputCapability(InputCapability&& other) noexcept
      : time_(std::move(other.time_)),
        internals_(std::exchange(other.internals_, {})),
        summaries_(std::exchange(other.summaries_, {})),
        consumed_(std::exchange(other.consumed_, nullptr)),
        count_(other.count_) {}
  InputCapability& operator=(InputCapability&& other) noexcept {
    if (this != &other) {
      report();
      time_ = std::move(other.time_);
      internals_ = std::exchange(other.internals_, {});
      summaries_ = std::exchange(other.summaries_, {});
      consumed_ = std::exchange(other.consumed_, nullptr);
      count_ = other.count_;
    }
    return *this;
  }
  ~InputCapability() { report(); }

  const T& time() const { return time_; }

  // False once moved from.
  bool valid() const { return !internals_.empty(); }
  // Identifies the operator this capability came to (compared with its outputs').
  const void* operator_identity() const { return internals_.data(); }

  // True if this input may produce on `output` at `time` (never once moved from).
  bool can_produce(size_t output, const T& time) const {
    if (output >= summaries_.size()) return false;
    return std::any_of(summaries_[output].begin(), summaries_[output].end(),
                       [&](const SummaryOf<T>& s) {
                         auto reached = s.results_in(time_);
                         return reached && time_le(*reached, time);
                       });
  }

  // A capability for output 0 at time(). REQUIRES: the input is connected to output 0.
  Capability<T> retain() const { return delayed_for_output(time_, 0); }
  Capability<T> retain_for_output(size_t output) const { return delayed_for_output(time_, output); }
  // A capability for output 0 at `time` >= time().
  Capability<T> delayed(const T& time) const { return delayed_for_output(time, 0); }
  Capability<T> delayed_for_output(const T& time, size_t output) const {
    WEIR_USAGE_CHECK(valid()) << "input capability at " << time_ << " used after it was moved from";
    WEIR_USAGE_CHECK(output < internals_.size())
        << "input capability used for output " << output << ", out of range (the operator has "
        << internals_.size() << ")";
    WEIR_USAGE_CHECK(can_produce(output, time))
        << "input capability at " << time_ << " cannot produce output " << output << " at " << time
        << ": not allowed by the input's connectivity";
    return Capability<T>::mint(time, internals_[output].get());
  }

 private:
  // Reports the consumption this capability was holding back.
  void report() {
    if (consumed_ != nullptr) {
      consumed_->batch().update(time_, count_);
      std::exchange(consumed_, nullptr)->release();
    }
  }

  T time_;
  std::span<const InternalHandle<T>> internals_;
  std::span<const Antichain<SummaryOf<T>>> summaries_;
  // The input's consumed batch (shared: safe to outlive the operator), or null when moved from
  // or when the caller reports consumption itself.
  InternalChanges<T>* consumed_;
  int64_t count_;  // Records delivered with this capability: reported consumed on destruction.
};

// An antichain of capabilities (for one output): the times at which output may still be produced.
template <Timestamp T>
class CapabilitySet {
 public:
  CapabilitySet() = default;
  explicit CapabilitySet(Capability<T> capability) { elements_.push_back(std::move(capability)); }

  // Adds `capability` unless a held one is less than or equal to it; drops held ones it is less
  // than or equal to.
  void insert(Capability<T> capability) {
    for (const auto& held : elements_) {
      if (time_le(held.time(), capability.time())) return;
    }
    std::erase_if(elements_, [&](const Capability<T>& held) {
      return time_le(capability.time(), held.time());
    });
    elements_.push_back(std::move(capability));
  }

  // A capability at `time`, derived from a held one at or before it; none if no such one.
  std::optional<Capability<T>> try_delayed(const T& time) const {
    for (const auto& held : elements_) {
      if (time_le(held.time(), time)) return held.delayed(time);
    }
    return std::nullopt;
  }
  // REQUIRES: some held capability is at or before `time`.
  Capability<T> delayed(const T& time) const {
    auto c = try_delayed(time);
    WEIR_USAGE_CHECK(c.has_value()) << "no capability in the set is at or before " << time;
    return std::move(*c);
  }

  // Replaces the set with capabilities at the elements of `frontier`. REQUIRES: every element is
  // at or after some held capability. An empty frontier drops everything.
  template <class Range>
  void downgrade(const Range& frontier) {
    std::vector<Capability<T>> next;
    for (const T& time : frontier) next.push_back(delayed(time));
    elements_ = std::move(next);
  }
  void downgrade(const Antichain<T>& frontier) { downgrade(frontier.elements()); }

  void clear() { elements_.clear(); }
  bool empty() const { return elements_.empty(); }
  size_t size() const { return elements_.size(); }
  const Capability<T>& first() const {
    WEIR_USAGE_CHECK(!elements_.empty()) << "first() of an empty capability set";
    return elements_.front();
  }
  auto begin() const { return elements_.begin(); }
  auto end() const { return elements_.end(); }

 private:
  std::vector<Capability<T>> elements_;
};

}  // namespace weir
