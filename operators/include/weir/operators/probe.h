// Probes: watching a stream's frontier from the worker's own code.
//
//   weir::ProbeHandle<uint64_t> probe;
//   stream | weir::probe_with(probe);
//   while (probe.less_than(round)) worker.step();
//
// A handle may watch several streams; its frontier is the union of theirs. It reads the frontier
// as of the last time the worker stepped the probes' dataflows. When a watched dataflow is
// dropped (it failed, or was dropped by hand) its probes stop holding the handle back, so loops
// that wait on them end; `execute` then reports why.
//
// Thread safety: worker-local (copies share state; keep them on one worker).

#pragma once

#include <memory>
#include <vector>

#include "weir/dataflow/operator_builder.h"
#include "weir/operators/pipe.h"
#include "weir/progress/antichain.h"

namespace weir {

template <Timestamp T>
class ProbeHandle {
 public:
  ProbeHandle() : frontier_(std::make_shared<MutableAntichain<T>>()) {}

  // True if some time strictly before `time` may still appear on the watched streams.
  bool less_than(const T& time) const { return frontier_->less_than(time); }
  // True if `time` itself may still appear.
  bool less_equal(const T& time) const { return frontier_->less_equal(time); }
  // True once no more data can appear.
  bool done() const { return frontier_->is_empty(); }
  std::vector<T> frontier() const {
    auto f = frontier_->frontier();
    return std::vector<T>(f.begin(), f.end());
  }

  // Used by probe operators.
  MutableAntichain<T>& shared() const { return *frontier_; }

 private:
  std::shared_ptr<MutableAntichain<T>> frontier_;
};

namespace internal {

// One probe operator's contribution to a handle: its last frontier.
template <Timestamp T>
class ProbeContribution {
 public:
  explicit ProbeContribution(ProbeHandle<T> handle) : handle_(std::move(handle)) {
    held_.push_back(minimum_time<T>());
    handle_.shared().update(minimum_time<T>(), 1);
  }
  ProbeContribution(const ProbeContribution&) = delete;
  ProbeContribution& operator=(const ProbeContribution&) = delete;
  ~ProbeContribution() { set({}); }

  void set(std::span<const T> frontier) {
    if (frontier.size() == held_.size() &&
        std::equal(frontier.begin(), frontier.end(), held_.begin())) {
      return;
    }
    scratch_.clear();
    for (const T& t : held_) scratch_.emplace_back(t, -1);
    for (const T& t : frontier) scratch_.emplace_back(t, 1);
    handle_.shared().update_iter(scratch_);
    held_.assign(frontier.begin(), frontier.end());
  }

 private:
  ProbeHandle<T> handle_;
  std::vector<T> held_;
  std::vector<std::pair<T, int64_t>> scratch_;
};

}  // namespace internal

// Watches `stream` with `handle`; returns the stream, so a chain can continue.
template <Timestamp T, class D>
Stream<T, D> probe_with(const Stream<T, D>& stream, const ProbeHandle<T>& handle) {
  OperatorBuilder<T> builder("Probe", stream.scope());
  auto input = builder.add_input(stream, Pipeline{});
  builder.build([input, handle](std::vector<Capability<T>>) mutable {
    auto contribution = std::make_shared<internal::ProbeContribution<T>>(handle);
    return [input, contribution](std::span<const MutableAntichain<T>> frontiers) mutable {
      while (input.next()) {
      }
      contribution->set(frontiers[0].frontier());
    };
  });
  return stream;
}

// Watches `stream` with a new handle.
template <Timestamp T, class D>
ProbeHandle<T> probe(const Stream<T, D>& stream) {
  ProbeHandle<T> handle;
  probe_with(stream, handle);
  return handle;
}

template <Timestamp T>
auto probe_with(const ProbeHandle<T>& handle) {
  return adaptor([handle](const auto& stream) { return probe_with(stream, handle); });
}
inline auto probe() {
  return adaptor([](const auto& stream) { return probe(stream); });
}

}  // namespace weir
