// Output ports: where an operator's records go. A port buffers records at one time, then pushes
// whole batches through every consumer's pusher (a tee: all but the last get a copy).
//
// Ports are owned by the scope, so consumers can attach after the producer was built. The scope
// flushes an operator's ports after every run of the operator, before collecting its progress.
//
// Thread safety: worker-local.

#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "weir/communication/channel.h"
#include "weir/progress/location.h"
#include "weir/progress/timestamp.h"

namespace weir {

template <Timestamp T>
class OutputPortBase {
 public:
  virtual ~OutputPortBase() = default;
  // Sends buffered records and flushes every pusher.
  virtual void flush() = 0;

  // One consumer: its input, and the records sent to it per time (not yet reported).
  struct Edge {
    Target target;
    ChangeBatch<T>* produced;
  };
  const std::vector<Edge>& edges() const { return edges_; }

 protected:
  std::vector<Edge> edges_;
};

template <Timestamp T, class D>
class OutputPort final : public OutputPortBase<T> {
 public:
  // The buffer is allocated on first use, so idle ports cost almost nothing.
  explicit OutputPort(size_t batch_capacity = default_batch_capacity<D>())
      : capacity_(batch_capacity) {}

  void add_pusher(Target target, std::unique_ptr<Pusher<T, D>> pusher) {
    this->edges_.push_back({target, &pusher->produced()});
    tee_.push_back(std::move(pusher));
  }
  bool has_consumers() const { return !tee_.empty(); }

  // Buffers one record at `time`. The hot path of record-by-record output: kept small, with the
  // rare steps (a new time, a full buffer) out of line, so that the compiler inlines it into the
  // caller's loop (it stopped doing so once sessions grew, at 1.7x the cost per record).
  void give(const T& time, D&& record) {
    if (!has_time_ || !(time == time_)) [[unlikely]]
      start(time);
    buffer_.push_back(std::move(record));
    if (buffer_.size() >= capacity_) [[unlikely]]
      flush_full();
  }
  void give(const T& time, const D& record) { give(time, D(record)); }

  // Sends `batch` as it is, after whatever was buffered. Leaves `batch` empty.
  void give_batch(const T& time, std::vector<D>& batch) {
    if (batch.empty()) return;
    flush_buffer();
    push(time, batch);
    batch.clear();
  }

  void flush() override {
    flush_buffer();
    has_time_ = false;
    for (auto& pusher : tee_) pusher->flush();
  }

  size_t batch_capacity() const { return capacity_; }

 private:
  [[gnu::noinline]] void flush_full() { flush_buffer(); }
  [[gnu::noinline]] void start(const T& time) {
    flush_buffer();
    time_ = time;
    has_time_ = true;
  }
  void flush_buffer() {
    if (!buffer_.empty()) push(time_, buffer_);
  }
  void push(const T& time, std::vector<D>& batch) {
    if (tee_.empty()) {
      batch.clear();
      return;
    }
    for (size_t i = 0; i + 1 < tee_.size(); ++i) {
      std::vector<D> copy(batch);
      tee_[i]->push(time, copy);
    }
    tee_.back()->push(time, batch);
  }

  size_t capacity_;
  std::vector<std::unique_ptr<Pusher<T, D>>> tee_;
  T time_{};
  bool has_time_ = false;
  std::vector<D> buffer_;
};

}  // namespace weir
