#include "parts.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>

#include "str_cat.h"

#include "weir/check.h"
#include "weir/mutex.h"
#include "weir/status.h"

namespace weir::persist::internal {
namespace {

// Wrapping addition: a diff that overflows wraps like the sum of the updates would in the
// ring of 64-bit integers, rather than being undefined.
int64_t add_diffs(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

}  // namespace

PartBuffer::PartBuffer(size_t expected_bytes) {
  // Grown by doubling, a buffer of this size would be copied and page-faulted in several times.
  arena_.reserve(expected_bytes);
  entries_.reserve(expected_bytes / 64);
}

void PartBuffer::add(std::string_view data, uint64_t time, int64_t diff) {
  WEIR_DCHECK(data.size() <= kMaxDataBytes && fits(data.size())) << "callers cut parts first";
  entries_.push_back({key_prefix(data), static_cast<uint32_t>(arena_.size()),
                      static_cast<uint32_t>(data.size()), time, diff});
  arena_.append(data);
}

void PartBuffer::sort_and_consolidate() {
  const char* arena = arena_.data();
  const auto view = [arena](const Entry& e) { return std::string_view(arena + e.offset, e.size); };
  const auto less = [&](const Entry& a, const Entry& b) {
    if (a.prefix != b.prefix) {
      return a.prefix < b.prefix;
    }
    const int c = view(a).compare(view(b));
    return c != 0 ? c < 0 : a.time < b.time;
  };
  // An LSD radix sort on the highest bytes of the prefixes, as many as make equal values rare (a
  // pass per byte that is not the same in every entry), then a comparison sort of each group of
  // entries with equal values (stable passes keep them together): several times as fast as a
  // comparison sort of everything.
  const size_t n = entries_.size();
  if (n < 1024) {
    std::sort(entries_.begin(), entries_.end(), less);
  } else {
    size_t counts[8][256] = {};
    for (const Entry& entry : entries_) {
      for (int byte = 0; byte < 8; ++byte) {
        ++counts[byte][(entry.prefix >> (8 * byte)) & 0xFF];
      }
    }
    // Sort on bytes [lowest, 8): enough that the values they can take outnumber the entries
    // four to one.
    int lowest = 8;
    for (double values = 1; lowest > 0 && values < 4.0 * static_cast<double>(n);) {
      --lowest;
      values *= static_cast<double>(
          std::count_if(counts[lowest], counts[lowest] + 256, [](size_t c) { return c != 0; }));
    }
    scratch_.resize(n);
    Entry* from = entries_.data();
    Entry* to = scratch_.data();
    for (int byte = lowest; byte < 8; ++byte) {
      const int shift = 8 * byte;
      if (counts[byte][(from[0].prefix >> shift) & 0xFF] == n) {
        continue;
      }
      size_t next[256];
      size_t start = 0;
      for (int b = 0; b < 256; ++b) {
        next[b] = start;
        start += counts[byte][b];
      }
      for (size_t i = 0; i < n; ++i) {
        to[next[(from[i].prefix >> shift) & 0xFF]++] = from[i];
      }
      std::swap(from, to);
    }
    if (from != entries_.data()) {
      entries_.swap(scratch_);
    }
    const int shift = 8 * lowest;  // < 64: lowest < 8, as n > 0.
    for (size_t i = 0; i < n;) {
      const uint64_t value = entries_[i].prefix >> shift;
      size_t j = i + 1;
      while (j < n && (entries_[j].prefix >> shift) == value) {
        ++j;
      }
      if (j - i > 1) {
        std::sort(entries_.begin() + static_cast<long>(i), entries_.begin() + static_cast<long>(j),
                  less);
      }
      i = j;
    }
  }
  // Consolidate in place.
  size_t kept = 0;
  data_bytes_ = 0;
  for (size_t i = 0; i < entries_.size();) {
    const Entry first = entries_[i];
    int64_t diff = first.diff;
    size_t j = i + 1;
    while (j < entries_.size() && entries_[j].time == first.time &&
           entries_[j].prefix == first.prefix && view(entries_[j]) == view(first)) {
      diff = add_diffs(diff, entries_[j].diff);
      ++j;
    }
    if (diff != 0) {
      entries_[kept] = first;
      entries_[kept].diff = diff;
      ++kept;
      data_bytes_ += first.size;
    }
    i = j;
  }
  entries_.resize(kept);
}

void PartBuffer::clear() {
  arena_.clear();
  entries_.clear();
  data_bytes_ = 0;
}

std::shared_ptr<BufferRecycler> BufferRecycler::for_part_size(size_t part_bytes, size_t max_free) {
  static weir::Mutex mu;
  // Never destroyed: buffers may come back from pool threads at exit.
  static auto* recyclers = new std::map<size_t, std::shared_ptr<BufferRecycler>>();
  weir::MutexLock lock(mu);
  std::shared_ptr<BufferRecycler>& recycler = (*recyclers)[part_bytes];
  if (recycler == nullptr) {
    recycler = std::make_shared<BufferRecycler>(part_bytes, max_free);
  } else {
    weir::MutexLock raise(recycler->mu_);
    recycler->max_free_ = std::max(recycler->max_free_, max_free);
  }
  return recycler;
}

PartBuffer BufferRecycler::take() {
  weir::MutexLock lock(mu_);
  if (free_.empty()) {
    return PartBuffer(part_bytes_);
  }
  PartBuffer buffer = std::move(free_.back());
  free_.pop_back();
  return buffer;
}

void BufferRecycler::give(PartBuffer buffer) {
  buffer.clear();
  weir::MutexLock lock(mu_);
  if (free_.size() < max_free_) {
    free_.push_back(std::move(buffer));
  }
}

bool continues_run(const WrittenPart& previous, const WrittenPart& next) {
  const int c = previous.last_data.compare(next.first_data);
  return c < 0 || (c == 0 && previous.last_time <= next.first_time);
}

PartUploader::PartUploader(ThreadPool& pool, std::shared_ptr<Blob> blob, size_t max_in_flight)
    : pool_(&pool), blob_(std::move(blob)), max_in_flight_(std::max<size_t>(1, max_in_flight)) {}

absl::Status PartUploader::upload(std::string key, Task task, bool urgent) {
  WEIR_RETURN_IF_ERROR(error_);
  while (pending_.size() >= max_in_flight_) {
    WEIR_RETURN_IF_ERROR(collect_oldest());
  }
  keys_.push_back(std::move(key));
  pending_.push_back(
      pool_->submit([task = std::move(task)]() mutable { return std::move(task)(); }, urgent));
  return absl::OkStatus();
}

absl::Status PartUploader::wait_for_room() {
  while (full()) {
    WEIR_RETURN_IF_ERROR(collect_oldest());
  }
  return error_;
}

absl::Status PartUploader::collect_oldest() {
  absl::StatusOr<std::optional<WrittenPart>> result = pending_.front().get();
  pending_.pop_front();
  if (!result.ok()) {
    error_ = result.status();
    return error_;
  }
  if (*result) {
    done_.push_back(std::move(**result));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<WrittenPart>> PartUploader::finish() {
  while (!pending_.empty()) {
    collect_oldest().IgnoreError();  // Collect all; report the first error below.
  }
  WEIR_RETURN_IF_ERROR(error_);
  return std::move(done_);
}

absl::Status PartUploader::discard() {
  for (Pending& pending : pending_) {
    pending.wait();
  }
  pending_.clear();
  absl::Status status;
  for (const std::string& key : keys_) {
    status.Update(blob_->remove(key));
  }
  keys_.clear();
  done_.clear();
  return status;
}

}  // namespace weir::persist::internal
