// The operator ABI: what the scope sees of an operator, whatever built it.
//
// It mirrors timely's Operate/Schedule. An operator has input ports (targets) and output ports
// (sources), declares for each (input, output) the summaries of paths between them, and exchanges
// progress with its scope through SharedProgress:
//
//   frontiers[input]  written by the scope: changes to the frontier of times that may still arrive
//                     at the input;
//   consumeds[input]  written by the operator: records taken from the input, per time (shared
//                     with the InputCapabilities handed out, which report on destruction);
//   internals[output] written by the operator's capabilities: changes to those it holds.
//
// Records sent on outputs are counted by the pushers of the output ports (owned by the scope),
// so an operator never reports them itself.
//
// Convention: on every worker each output starts with one capability at the minimum time (the
// scope counts it); `internals` report changes relative to that. OperatorBuilder follows it.
//
// Thread safety: worker-local.

#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "weir/progress/capability.h"
#include "weir/progress/change_batch.h"
#include "weir/progress/reachability.h"
#include "weir/progress/timestamp.h"

namespace weir {

template <Timestamp T>
struct SharedProgress {
  SharedProgress() = default;
  SharedProgress(size_t inputs, size_t outputs)
      : frontiers(inputs), consumeds(inputs), internals(outputs) {}

  void resize(size_t inputs, size_t outputs) {
    frontiers.resize(inputs);
    consumeds.resize(inputs);
    internals.resize(outputs);
  }

  std::vector<ChangeBatch<T>> frontiers;
  std::vector<InternalHandle<T>> consumeds;  // Shared with the operator's InputCapabilities.
  std::vector<InternalHandle<T>> internals;  // Shared with the operator's capabilities.
};

template <Timestamp T>
class Operator {
 public:
  virtual ~Operator() = default;

  virtual std::string_view name() const = 0;
  virtual uint32_t inputs() const = 0;
  virtual uint32_t outputs() const = 0;
  // [input][output] summaries. Asked once, when the scope is built.
  virtual Connectivity<T> connectivity() const = 0;
  // Whether the operator runs when an input frontier changes. Operators that do not look at
  // frontiers return false and run only when data arrives or they are activated.
  virtual bool notify_me() const { return true; }
  // Runs the operator once. Returns true to ask to run again soon even without new events.
  virtual bool schedule() = 0;

  SharedProgress<T>& progress() { return progress_; }

 protected:
  SharedProgress<T> progress_;
};

}  // namespace weir
