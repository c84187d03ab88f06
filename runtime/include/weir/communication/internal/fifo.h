// FifoQueue<T>: a first-in first-out queue on one vector that allocates nothing until the first
// push (std::deque allocates on construction, which a large idle graph of channels cannot afford).
//
// Thread safety: none; worker-local.
//
// Internal: installed because the channel and scope templates use it; not API.

#pragma once

#include <utility>
#include <vector>

namespace weir {

template <class T>
class FifoQueue {
 public:
  bool empty() const { return head_ == items_.size(); }
  size_t size() const { return items_.size() - head_; }
  void push_back(T&& item) { items_.push_back(std::move(item)); }
  T& front() { return items_[head_]; }
  void pop_front() {
    ++head_;
    if (head_ == items_.size()) {
      items_.clear();
      head_ = 0;
    } else if (head_ > 64 && head_ * 2 > items_.size()) {
      items_.erase(items_.begin(), items_.begin() + static_cast<ptrdiff_t>(head_));
      head_ = 0;
    }
  }
  // Moves every item of `other` to the back of this queue.
  void append(std::vector<T>& other) {
    if (empty() && items_.capacity() <= other.capacity()) {
      items_.swap(other);
      head_ = 0;
      other.clear();
      return;
    }
    for (auto& item : other) items_.push_back(std::move(item));
    other.clear();
  }

 private:
  std::vector<T> items_;
  size_t head_ = 0;
};

}  // namespace weir
