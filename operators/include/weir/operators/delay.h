// Moving records to later times. Delayed records are held until their new time is complete at
// the input, then released at that time.
//
//   stream | weir::delay([](const uint64_t& x, const uint64_t& t) { return t + 10; })
//   stream | weir::delay_batch([](const uint64_t& t) { return (t / 10 + 1) * 10; })
//
// The new time must be at or after the record's time.
//
// Thread safety: worker-local.

#pragma once

#include <map>
#include <utility>
#include <vector>

#include "weir/operators/generic.h"
#include "weir/operators/pipe.h"

namespace weir {

// `f(record, time)` returns the record's new time.
template <Timestamp T, class D, class F>
Stream<T, D> delay(const Stream<T, D>& stream, F f) {
  std::map<T, std::vector<D>> stash;
  return unary_notify<D>(stream, Pipeline{}, "Delay", {},
                         [f = std::move(f), stash = std::move(stash)](
                             auto& input, auto& output, Notificator<T>& notificator) mutable {
                           input.for_each([&](const InputCapability<T>& cap, std::vector<D>& data) {
                             for (D& record : data) {
                               T time = f(std::as_const(record), cap.time());
                               auto [it, inserted] = stash.try_emplace(time);
                               if (inserted) notificator.notify_at(cap.delayed(time));
                               it->second.push_back(std::move(record));
                             }
                           });
                           notificator.for_each([&](Capability<T> cap, uint64_t, auto&) {
                             auto it = stash.find(cap.time());
                             if (it == stash.end()) return;
                             output.session(cap).give_vec(it->second);
                             stash.erase(it);
                           });
                         });
}

// `f(time)` returns the new time of every record at `time`.
template <Timestamp T, class D, class F>
Stream<T, D> delay_batch(const Stream<T, D>& stream, F f) {
  std::map<T, std::vector<D>> stash;
  return unary_notify<D>(stream, Pipeline{}, "DelayBatch", {},
                         [f = std::move(f), stash = std::move(stash)](
                             auto& input, auto& output, Notificator<T>& notificator) mutable {
                           input.for_each([&](const InputCapability<T>& cap, std::vector<D>& data) {
                             T time = f(cap.time());
                             auto [it, inserted] = stash.try_emplace(time);
                             if (inserted) notificator.notify_at(cap.delayed(time));
                             if (it->second.empty()) {
                               std::swap(it->second, data);
                             } else {
                               for (D& record : data) it->second.push_back(std::move(record));
                             }
                           });
                           notificator.for_each([&](Capability<T> cap, uint64_t, auto&) {
                             auto it = stash.find(cap.time());
                             if (it == stash.end()) return;
                             output.session(cap).give_vec(it->second);
                             stash.erase(it);
                           });
                         });
}

template <class F>
auto delay(F f) {
  return adaptor([f = std::move(f)](const auto& s) { return delay(s, f); });
}
template <class F>
auto delay_batch(F f) {
  return adaptor([f = std::move(f)](const auto& s) { return delay_batch(s, f); });
}

}  // namespace weir
