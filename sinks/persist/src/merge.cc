#include "merge.h"

namespace weir::persist::internal {

RunCursor::RunCursor(ThreadPool& pool, PartFetcher fetcher, std::vector<PartRef> parts)
    : pool_(&pool), fetcher_(std::move(fetcher)), parts_(std::move(parts)) {
  prefetch();
}

void RunCursor::prefetch() {
  if (next_part_ < parts_.size()) {
    prefetched_ =
        pool_->submit([fetcher = fetcher_, ref = parts_[next_part_]] { return fetcher(ref); });
  }
}

bool RunCursor::advance() {
  if (!status_.ok()) {
    return false;
  }
  if (started_ && part_ != nullptr && index_ + 1 < part_->size()) {
    ++index_;
    return true;
  }
  started_ = true;
  // Load parts until one has an update (parts are never empty, but do not rely on it).
  while (next_part_ < parts_.size()) {
    absl::StatusOr<std::shared_ptr<const DecodedPart>> fetched = prefetched_.get();
    ++next_part_;
    if (!fetched.ok()) {
      status_ = fetched.status();
      part_ = nullptr;
      return false;
    }
    part_ = *std::move(fetched);
    index_ = 0;
    prefetch();
    if (part_->size() > 0) {
      return true;
    }
  }
  part_ = nullptr;
  return false;
}

RunMerger::RunMerger(std::vector<RunCursor> runs) : runs_(std::move(runs)) {}

void RunMerger::sift_down(size_t i) {
  const size_t n = heap_.size();
  while (true) {
    const size_t left = 2 * i + 1;
    if (left >= n) {
      return;
    }
    size_t smallest = left;
    if (left + 1 < n && less(heap_[left + 1], heap_[left])) {
      smallest = left + 1;
    }
    if (!less(heap_[smallest], heap_[i])) {
      return;
    }
    std::swap(heap_[i], heap_[smallest]);
    i = smallest;
  }
}

void RunMerger::pop() {
  heap_[0] = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) {
    sift_down(0);
  }
}

bool RunMerger::next_key() {
  if (!status_.ok()) {
    return false;
  }
  if (!started_) {
    started_ = true;
    for (uint32_t r = 0; r < runs_.size(); ++r) {
      if (runs_[r].advance()) {
        heap_.push_back(r);
      } else if (!runs_[r].status().ok()) {
        status_ = runs_[r].status();
        return false;
      }
    }
    for (size_t i = heap_.size() / 2; i-- > 0;) {
      sift_down(i);
    }
  }
  entries_.clear();
  if (heap_.empty()) {
    key_part_ = nullptr;
    key_ = {};
    return false;
  }
  key_part_ = runs_[heap_[0]].part();
  key_ = runs_[heap_[0]].data();
  while (!heap_.empty()) {
    RunCursor& run = runs_[heap_[0]];
    if (run.data() != key_) {
      break;
    }
    bool more;
    do {
      entries_.emplace_back(run.time(), run.diff());
      more = run.advance();
    } while (more && run.data() == key_);
    if (more) {
      sift_down(0);
    } else if (!run.status().ok()) {
      status_ = run.status();
      return false;
    } else {
      pop();
    }
  }
  return true;
}

}  // namespace weir::persist::internal
