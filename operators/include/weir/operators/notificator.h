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

// Cost: requests wait sorted by time; new ones are sorted among themselves and merged in (an
// append when they follow every waiting one, the usual case). For a totally ordered T the
// complete requests are a prefix of the waiting ones, so a call costs the requests it makes
// available plus the new ones, not the number waiting; for a partial order it scans them all.
template <Timestamp T>
class FrontierNotificator {
 public:
  using Notification = std::pair<Capability<T>, uint64_t>;

  // Requests a notification at `capability`'s time.
  void notify_at(Capability<T> capability) {
    WEIR_USAGE_CHECK(capability.valid()) << "notify_at was given a moved-from capability";
    incoming_.emplace_back(std::move(capability), 1);
  }

  // Moves requests whose time is complete in every frontier to the available list, in order.
  void make_available(std::span<const MutableAntichain<T>> frontiers) {
    merge_incoming();
    if (head_ == pending_.size()) return;
    auto complete = [&](const T& time) {
      return std::none_of(frontiers.begin(), frontiers.end(),
                          [&](const auto& f) { return f.less_equal(time); });
    };
    const size_t available_before = available_.size();
    if constexpr (kTotallyOrdered<T>) {
      // Complete times precede every incomplete one.
      while (head_ < pending_.size() && complete(pending_[head_].first.time())) {
        available_.push_back(std::move(pending_[head_++]));
      }
      // Drop the moved-from prefix once it is half the vector: amortized O(1) per request.
      if (head_ == pending_.size()) {
        pending_.clear();
        head_ = 0;
      } else if (head_ > 32 && head_ > pending_.size() / 2) {
        pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(head_));
        head_ = 0;
      }
    } else {
      size_t kept = head_;  // Always 0 here: only the branch above moves head_.
      for (size_t i = head_; i < pending_.size(); ++i) {
        if (complete(pending_[i].first.time())) {
          available_.push_back(std::move(pending_[i]));
        } else {
          if (kept != i) pending_[kept] = std::move(pending_[i]);
          ++kept;
        }
      }
      pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(kept), pending_.end());
    }
    if (available_.size() != available_before) {
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

  bool has_pending() const { return head_ < pending_.size() || !incoming_.empty(); }
  bool has_available() const { return !available_.empty(); }
  // Times with outstanding requests, for diagnostics.
  std::vector<T> pending_times() const {
    std::vector<T> times;
    for (size_t i = head_; i < pending_.size(); ++i) times.push_back(pending_[i].first.time());
    for (const auto& [cap, count] : incoming_) times.push_back(cap.time());
    return times;
  }

 private:
  static bool earlier(const Notification& a, const Notification& b) {
    return a.first.time() < b.first.time();
  }

  // Sorts by time and merges requests at equal times.
  static void compact(std::vector<Notification>& list) {
    if (list.size() <= 1) return;
    std::sort(list.begin(), list.end(), earlier);
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

  // Moves the new requests into the sorted waiting list.
  void merge_incoming() {
    if (incoming_.empty()) return;
    compact(incoming_);
    if (head_ == pending_.size() || earlier(pending_.back(), incoming_.front())) {
      for (auto& n : incoming_) pending_.push_back(std::move(n));
    } else {
      // Interleaved: merge the live part of pending_ with incoming_ (both sorted, distinct times).
      scratch_.clear();
      size_t i = head_;
      size_t j = 0;
      while (i < pending_.size() || j < incoming_.size()) {
        if (j == incoming_.size() || (i < pending_.size() && earlier(pending_[i], incoming_[j]))) {
          scratch_.push_back(std::move(pending_[i++]));
        } else if (i == pending_.size() || earlier(incoming_[j], pending_[i])) {
          scratch_.push_back(std::move(incoming_[j++]));
        } else {
          pending_[i].second += incoming_[j++].second;  // Keeps one capability per time.
          scratch_.push_back(std::move(pending_[i++]));
        }
      }
      std::swap(pending_, scratch_);
      scratch_.clear();
      head_ = 0;
    }
    incoming_.clear();
  }

  // Invariant: pending_[head_, end) is sorted by time with distinct times; [0, head_) was moved
  // out. All three lists keep their memory, so steady-state calls do not allocate.
  std::vector<Notification> pending_;
  size_t head_ = 0;
  std::vector<Notification> incoming_;   // Requested since the last make_available; unsorted.
  std::vector<Notification> available_;  // Sorted by time, descending.
  std::vector<Notification> scratch_;    // Merge buffer; empty between calls.
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
