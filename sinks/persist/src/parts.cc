#include "parts.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "str_cat.h"

#include "weir/check.h"
#include "weir/status.h"

namespace weir::persist::internal {
namespace {

uint64_t prefix_of(std::string_view data) {
  unsigned char bytes[8] = {};
  std::memcpy(bytes, data.data(), std::min<size_t>(8, data.size()));
  uint64_t prefix = 0;
  for (unsigned char byte : bytes) {
    prefix = (prefix << 8) | byte;
  }
  return prefix;
}

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
  entries_.push_back({prefix_of(data), static_cast<uint32_t>(arena_.size()),
                      static_cast<uint32_t>(data.size()), time, diff});
  arena_.append(data);
}

Columns PartBuffer::sort_and_consolidate() && {
  const char* arena = arena_.data();
  const auto view = [arena](const Entry& e) { return std::string_view(arena + e.offset, e.size); };
  const auto less = [&](const Entry& a, const Entry& b) {
    if (a.prefix != b.prefix) {
      return a.prefix < b.prefix;
    }
    const int c = view(a).compare(view(b));
    return c != 0 ? c < 0 : a.time < b.time;
  };
  // One radix pass on the 8 highest prefix bits that differ, then a comparison sort of each of the
  // 256 buckets, which fit in cache: about twice as fast as sorting everything at once.
  uint64_t differing = 0;
  for (const Entry& entry : entries_) {
    differing |= entry.prefix ^ entries_.front().prefix;
  }
  if (differing == 0 || entries_.size() < 4096) {
    std::sort(entries_.begin(), entries_.end(), less);
  } else {
    const int shift = std::max(0, 63 - std::countl_zero(differing) - 7);
    const auto bucket = [shift](const Entry& e) { return (e.prefix >> shift) & 0xFF; };
    size_t starts[257] = {};
    for (const Entry& entry : entries_) {
      ++starts[bucket(entry) + 1];
    }
    for (int b = 0; b < 256; ++b) {
      starts[b + 1] += starts[b];
    }
    std::vector<Entry> sorted(entries_.size());
    size_t next[256];
    std::copy(starts, starts + 256, next);
    for (const Entry& entry : entries_) {
      sorted[next[bucket(entry)]++] = entry;
    }
    for (int b = 0; b < 256; ++b) {
      std::sort(sorted.begin() + static_cast<long>(starts[b]),
                sorted.begin() + static_cast<long>(starts[b + 1]), less);
    }
    entries_ = std::move(sorted);
  }
  Columns columns;
  columns.reserve(entries_.size(), arena_.size());
  for (size_t i = 0; i < entries_.size();) {
    const Entry& first = entries_[i];
    int64_t diff = first.diff;
    size_t j = i + 1;
    while (j < entries_.size() && entries_[j].time == first.time &&
           entries_[j].prefix == first.prefix && view(entries_[j]) == view(first)) {
      diff = add_diffs(diff, entries_[j].diff);
      ++j;
    }
    if (diff != 0) {
      columns.append(view(first), first.time, diff);
    }
    i = j;
  }
  std::string().swap(arena_);
  std::vector<Entry>().swap(entries_);
  return columns;
}

bool continues_run(const WrittenPart& previous, const WrittenPart& next) {
  const int c = previous.last_data.compare(next.first_data);
  return c < 0 || (c == 0 && previous.last_time <= next.first_time);
}

PartUploader::PartUploader(ThreadPool& pool, std::shared_ptr<Blob> blob, std::string shard_id,
                           int zstd_level, size_t max_in_flight)
    : pool_(&pool),
      blob_(std::move(blob)),
      shard_id_(std::move(shard_id)),
      zstd_level_(zstd_level),
      max_in_flight_(std::max<size_t>(1, max_in_flight)) {}

absl::Status PartUploader::upload(std::string key, absl::AnyInvocable<Columns() &&> produce) {
  WEIR_RETURN_IF_ERROR(error_);
  while (pending_.size() >= max_in_flight_) {
    WEIR_RETURN_IF_ERROR(collect_oldest());
  }
  keys_.push_back(key);
  pending_.push_back(pool_->submit(
      [blob = blob_, shard_id = shard_id_, level = zstd_level_, key = std::move(key),
       produce = std::move(produce)]() mutable -> absl::StatusOr<std::optional<WrittenPart>> {
        const Columns columns = std::move(produce)();
        const size_t n = columns.size();
        if (n == 0) {
          return std::nullopt;
        }
        const std::string encoded = encode_part(shard_id, columns, level);
        WEIR_RETURN_IF_ERROR(blob->set(key, encoded));
        WrittenPart part;
        part.ref = {key, encoded.size(), n, columns.update_bytes()};
        const std::string_view data = columns.data;
        part.first_data = std::string(data.substr(0, columns.lens.front()));
        part.first_time = columns.times.front();
        part.last_data = std::string(data.substr(data.size() - columns.lens.back()));
        part.last_time = columns.times.back();
        return part;
      }));
  return absl::OkStatus();
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
