// Notificators: deliver capabilities back to an operator once their times are complete.
//
// `notify_at(cap)` asks to be told when no more data can arrive at cap.time() on any input; the
// notification hands the capability back, so the operator can still produce output at that time.
// Notifications come in time order (the total order of T), and requests for the same time are
// delivered once, with their count.
//
// FrontierNotificator is told the frontiers explicitly; Notificator is bound to the operator's
// input frontiers (what unary_notify and binary_notify hand to the logic).
//
// Thread safety: worker-local.

#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "weir/progress/antichain.h"
#include "weir/progress/capability.h"

namespace weir {

template <Timestamp T>
class FrontierNotificator {
 public:
  using Notification = std::pair<Capability<T>, uint64_t>;

  // Requests a notification at `capability`'s time.
  void notify_at(Capability<T> capability) { pending_.emplace_back(std::move(capability), 1); }

  // Moves requests whose time is complete in every frontier to the available list, in order.
  void make_available(std::span<const MutableAntichain<T>> frontiers) {
    if (pending_.empty()) return;
    compact(pending_);
    size_t kept = 0;
    bool moved = false;
    for (size_t i = 0; i < pending_.size(); ++i) {
      const T& time = pending_[i].first.time();
      const bool complete = std::none_of(frontiers.begin(), frontiers.end(), [&](const auto& f) {
        return f.less_equal(time);
      });
      if (complete) {
        available_.push_back(std::move(pending_[i]));
        moved = true;
      } else {
        if (kept != i) pending_[kept] = std::move(pending_[i]);
        ++kept;
      }
    }
    pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(kept), pending_.end());
    if (moved) {
      compact(available_);
      // Deliver earliest first: keep the list sorted descending and pop from the back.
      std::reverse(available_.begin(), available_.end());
    }
  }

  // The next available notification, earliest time first.
  std::optional<Notification> next(std::span<const MutableAntichain<T>> frontiers) {
    if (available_.empty()) make_available(frontiers);
    if (available_.empty()) return std::nullopt;
    Notification n = std::move(available_.back());
    available_.pop_back();
    return n;
  }

  // Calls f(capability, count, *this) for every available notification.
  template <class F>
  void for_each(std::span<const MutableAntichain<T>> frontiers, F&& f) {
    make_available(frontiers);
    while (!available_.empty()) {
      Notification n = std::move(available_.back());
      available_.pop_back();
      f(std::move(n.first), n.second, *this);
    }
  }

  bool has_pending() const { return !pending_.empty(); }
  bool has_available() const { return !available_.empty(); }
  // Times with outstanding requests, for diagnostics.
  std::vector<T> pending_times() const {
    std::vector<T> times;
    for (const auto& [cap, count] : pending_) times.push_back(cap.time());
    return times;
  }

 private:
  // Sorts by time and merges requests at equal times.
  static void compact(std::vector<Notification>& list) {
    if (list.size() <= 1) return;
    std::sort(list.begin(), list.end(),
              [](const Notification& a, const Notification& b) { return a.first.time() < b.first.time(); });
    size_t out = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      if (out > 0 && list[out - 1].first.time() == list[i].first.time()) {
        list[out - 1].second += list[i].second;
      } else {
        if (out != i) list[out] = std::move(list[i]);
        ++out;
      }
    }
    list.erase(list.begin() + static_cast<ptrdiff_t>(out), list.end());
  }

  std::vector<Notification> pending_;
  std::vector<Notification> available_;  // Sorted by time, descending.
};

// A FrontierNotificator bound to an operator's input frontiers for one run.
template <Timestamp T>
class Notificator {
 public:
  Notificator(FrontierNotificator<T>& inner, std::span<const MutableAntichain<T>> frontiers)
      : inner_(inner), frontiers_(frontiers) {}

  void notify_at(Capability<T> capability) { inner_.notify_at(std::move(capability)); }
  std::optional<typename FrontierNotificator<T>::Notification> next() {
    return inner_.next(frontiers_);
  }
  // Calls f(capability, count, notificator) for each available notification, earliest first.
  template <class F>
  void for_each(F&& f) {
    inner_.make_available(frontiers_);
    while (auto n = inner_.next(frontiers_)) f(std::move(n->first), n->second, *this);
  }
  std::span<const MutableAntichain<T>> frontiers() const { return frontiers_; }
  const MutableAntichain<T>& frontier(size_t input) const { return frontiers_[input]; }

 private:
  FrontierNotificator<T>& inner_;
  std::span<const MutableAntichain<T>> frontiers_;
};

}  // namespace weir
