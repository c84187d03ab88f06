// Encoding and decoding of shard states, parts and transmittable batches (protobuf + zstd).
//
// Parts are the bulk of the data, so their ProtoColumnarUpdates payload is written and read with
// protobuf's wire format directly (one pass, no copies of the columns); a test checks that the
// generated ProtoColumnarUpdates code reads and writes the same bytes.
//
// Decoding never trusts its input: a truncated or corrupt blob, an unknown format version or a
// state that breaks an invariant is an error naming the shard and the key.

#pragma once

#include <algorithm>
#include <bit>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "weir/check.h"
#include "weir/mutex.h"
#include "weir/persist/batch.h"
#include "weir/persist/consensus.h"
#include "weir/persist/frontier.h"
#include "weir/persist/v1/part.pb.h"
#include "weir/persist/v1/state.pb.h"

namespace weir::persist::internal {

namespace proto = ::weir::persist::v1;

inline constexpr uint32_t kStateFormatVersion = 1;
// Parts are written at kPartFormatVersion and read at any version from 1 up to it.
inline constexpr uint32_t kPartFormatVersion = 2;
inline constexpr uint32_t kBatchFormatVersion = 1;
inline constexpr uint32_t kNamesFormatVersion = 1;

void to_proto(const Frontier& frontier, proto::ProtoFrontier* out);
// REQUIRES: at most one element (decode_state checks every frontier of a state).
Frontier frontier_of(const proto::ProtoFrontier& frontier);

void to_proto(const Batch& batch, proto::ProtoBatch* out);
Batch batch_of(const ShardId& shard_id, const proto::ProtoBatch& batch);

// The state stored at `version` of consensus key `key`. `shard_label` names the shard in errors.
absl::StatusOr<proto::ProtoShardState> decode_state(std::string_view shard_label,
                                                    std::string_view key,
                                                    const VersionedData& version);
std::string encode_state(const proto::ProtoShardState& state);

// Protobuf wire format, for the part encoding.
namespace wire {
inline constexpr uint32_t kVarint = 0;
inline constexpr uint32_t kFixed64 = 1;
inline constexpr uint32_t kLengthDelimited = 2;
inline constexpr uint32_t kFixed32 = 5;

constexpr uint32_t tag(int field, uint32_t wire_type) {
  return (static_cast<uint32_t>(field) << 3) | wire_type;
}
inline size_t varint_size(uint64_t value) {
  size_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++n;
  }
  return n;
}
inline char* put_varint(char* out, uint64_t value) {
  while (value >= 0x80) {
    *out++ = static_cast<char>(value | 0x80);
    value >>= 7;
  }
  *out++ = static_cast<char>(value);
  return out;
}
// The varint encoding of a sint64.
inline uint64_t zigzag(int64_t value) {
  return (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
}
inline int64_t unzigzag(uint64_t value) {
  return static_cast<int64_t>(value >> 1) ^ -static_cast<int64_t>(value & 1);
}
}  // namespace wire

// The first 8 bytes of `data`, big-endian and zero-padded: comparing two prefixes orders the data
// unless they are equal, so most comparisons of a sort or a merge end there without touching the
// data.
inline uint64_t key_prefix(std::string_view data) {
  uint64_t prefix = 0;
  if (data.size() >= 8) {
    std::memcpy(&prefix, data.data(), 8);
  } else if (!data.empty()) {
    std::memcpy(&prefix, data.data(), data.size());
  }
  if constexpr (std::endian::native == std::endian::little) {
    prefix = __builtin_bswap64(prefix);
  }
  return prefix;
}

// A buffer of at least `size` bytes from a small process-wide pool, to which it goes back when
// destroyed: parts are large, and fresh allocations of that size cost page faults on every part.
class ScratchBuffer {
 public:
  explicit ScratchBuffer(size_t size);
  ScratchBuffer(ScratchBuffer&& other) noexcept
      : bytes_(std::move(other.bytes_)), capacity_(other.capacity_) {}
  ScratchBuffer& operator=(ScratchBuffer&&) = delete;
  ~ScratchBuffer();

  char* data() const { return bytes_.get(); }

 private:
  std::unique_ptr<char[]> bytes_;
  size_t capacity_ = 0;
};

// An encoded part blob and the buffer it lives in.
struct EncodedPart {
  ScratchBuffer buffer;
  std::string_view bytes;
};

// The updates of one part, sorted by (data, time): what encode_part reads.
template <class T>
concept PartSource = requires(const T& source, size_t i) {
  { source.size() } -> std::convertible_to<size_t>;
  { source.data(i) } -> std::convertible_to<std::string_view>;
  { source.time(i) } -> std::convertible_to<uint64_t>;
  { source.diff(i) } -> std::convertible_to<int64_t>;
  { source.data_bytes() } -> std::convertible_to<size_t>;
};

// Sorted, consolidated updates built one by one (by compaction).
struct Columns {
  std::string bytes;
  std::vector<uint64_t> ends;  // End of update i's data in `bytes`.
  std::vector<uint64_t> times;
  std::vector<int64_t> diffs;

  size_t size() const { return times.size(); }
  bool empty() const { return times.empty(); }
  std::string_view data(size_t i) const {
    const uint64_t begin = i == 0 ? 0 : ends[i - 1];
    return std::string_view(bytes).substr(begin, ends[i] - begin);
  }
  uint64_t time(size_t i) const { return times[i]; }
  int64_t diff(size_t i) const { return diffs[i]; }
  size_t data_bytes() const { return bytes.size(); }
  uint64_t update_bytes() const { return bytes.size() + 16 * static_cast<uint64_t>(size()); }
  void append(std::string_view data, uint64_t time, int64_t diff) {
    bytes.append(data);
    ends.push_back(bytes.size());
    times.push_back(time);
    diffs.push_back(diff);
  }
};

// Compresses the ProtoColumnarUpdates encoding `plain` into a part blob of shard `shard_id` (a
// ProtoPart).
EncodedPart finish_part(std::string_view shard_id, const char* plain, size_t plain_size,
                        int zstd_level);

// How many updates ahead encode_part prefetches the data it gathers.
inline constexpr size_t kGatherPrefetch = 8;

// Encodes `source` as a part blob of shard `shard_id`: a ProtoPart whose payload is the
// zstd-compressed ProtoColumnarUpdates encoding (format version 2) of the updates.
template <PartSource Source>
EncodedPart encode_part(std::string_view shard_id, const Source& source, int zstd_level) {
  using Updates = proto::ProtoColumnarUpdates;
  using namespace wire;
  const size_t n = source.size();
  // The sizes of the columns first, to write them in one pass into a buffer of the exact size.
  size_t lens_bytes = 0;
  uint64_t times_base = n == 0 ? 0 : source.time(0);
  for (size_t i = 0; i < n; ++i) {
    lens_bytes += varint_size(source.data(i).size());
    times_base = std::min(times_base, source.time(i));
  }
  size_t offsets_bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    offsets_bytes += varint_size(source.time(i) - times_base);
  }
  size_t run_values_bytes = 0;
  size_t run_lengths_bytes = 0;
  const auto for_each_diff_run = [&source, n](auto&& run) {
    for (size_t i = 0; i < n;) {
      const int64_t value = source.diff(i);
      size_t j = i + 1;
      while (j < n && source.diff(j) == value) {
        ++j;
      }
      run(zigzag(value), j - i);
      i = j;
    }
  };
  for_each_diff_run([&](uint64_t value, uint64_t length) {
    run_values_bytes += varint_size(value);
    run_lengths_bytes += varint_size(length);
  });
  const auto field_size = [](size_t bytes) { return 1 + varint_size(bytes) + bytes; };
  const size_t data_bytes = source.data_bytes();
  const size_t plain_size = 1 + varint_size(n) + field_size(lens_bytes) + field_size(data_bytes) +
                            1 + varint_size(times_base) + field_size(offsets_bytes) +
                            field_size(run_values_bytes) + field_size(run_lengths_bytes);
  const ScratchBuffer buffer(plain_size);
  char* const plain = buffer.data();
  char* out = plain;
  out = put_varint(out, tag(Updates::kNumUpdatesFieldNumber, kVarint));
  out = put_varint(out, n);
  out = put_varint(out, tag(Updates::kDataLensFieldNumber, kLengthDelimited));
  out = put_varint(out, lens_bytes);
  for (size_t i = 0; i < n; ++i) {
    out = put_varint(out, source.data(i).size());
  }
  out = put_varint(out, tag(Updates::kDataFieldNumber, kLengthDelimited));
  out = put_varint(out, data_bytes);
  for (size_t i = 0; i < n; ++i) {
    // Sorted updates gather their data from all over the source: load a few ahead.
    if (i + kGatherPrefetch < n) {
      // Both ends: data of ~100 bytes usually spans two cache lines.
      const std::string_view ahead = source.data(i + kGatherPrefetch);
      __builtin_prefetch(ahead.data());
      if (ahead.size() > 64) {
        __builtin_prefetch(ahead.data() + ahead.size() - 1);
      }
    }
    const std::string_view data = source.data(i);
    std::memcpy(out, data.data(), data.size());
    out += data.size();
  }
  out = put_varint(out, tag(Updates::kTimesBaseFieldNumber, kVarint));
  out = put_varint(out, times_base);
  out = put_varint(out, tag(Updates::kTimeOffsetsFieldNumber, kLengthDelimited));
  out = put_varint(out, offsets_bytes);
  for (size_t i = 0; i < n; ++i) {
    out = put_varint(out, source.time(i) - times_base);
  }
  out = put_varint(out, tag(Updates::kDiffRunValuesFieldNumber, kLengthDelimited));
  out = put_varint(out, run_values_bytes);
  for_each_diff_run([&out](uint64_t value, uint64_t) { out = put_varint(out, value); });
  out = put_varint(out, tag(Updates::kDiffRunLengthsFieldNumber, kLengthDelimited));
  out = put_varint(out, run_lengths_bytes);
  for_each_diff_run([&out](uint64_t, uint64_t length) { out = put_varint(out, length); });
  WEIR_CHECK(static_cast<size_t>(out - plain) == plain_size) << "part size miscomputed";
  return finish_part(shard_id, plain, plain_size, zstd_level);
}

class DecodedPartPool;

// The updates of one part, decoded. Update i is (data(i), time(i), diff(i)).
//
// The data stays in place in the decompressed ProtoColumnarUpdates encoding (see decode_part);
// the offset, time and diff of each update are gathered into one 24-byte row (update i's data ends
// where update i + 1's begins), so that reading an update touches two places in memory rather than
// four (a merge over many parts is bound by cache misses).
class DecodedPart {
 public:
  size_t size() const { return size_; }
  std::string_view data(size_t i) const {
    return std::string_view(data_ + rows_[i].offset, rows_[i + 1].offset - rows_[i].offset);
  }
  uint64_t time(size_t i) const { return rows_[i].time; }
  int64_t diff(size_t i) const { return rows_[i].diff; }

  // Where update i's row is, for prefetching. (A prefetching member function of its own would be
  // judged free of side effects by GCC and its calls dropped.)
  const void* row_address(size_t i) const { return rows_.get() + i; }

 private:
  friend class PartDecoder;  // decode_part's steps (codec.cc).
  struct Row {
    uint64_t offset;  // Into data_.
    uint64_t time;
    int64_t diff;
  };

  std::unique_ptr<char[]> plain_;  // The decompressed encoding; data_ points into it.
  size_t capacity_ = 0;            // Of plain_.
  const char* data_ = nullptr;
  // size_ rows and one more, whose offset is the end of the data. Not zeroed when reused.
  std::unique_ptr<Row[]> rows_;
  size_t row_capacity_ = 0;
  size_t size_ = 0;
};

// Decoded parts handed back when their last user drops them, for the next decode: fresh buffers
// of part size cost page faults on every part.
//
// Thread safety: thread-safe.
class DecodedPartPool : public std::enable_shared_from_this<DecodedPartPool> {
 public:
  // Keeps at most `max_free` parts for reuse.
  static std::shared_ptr<DecodedPartPool> create(size_t max_free);

  std::unique_ptr<DecodedPart> take();
  // Shares `part`; it comes back here when the last copy goes.
  std::shared_ptr<const DecodedPart> share(std::unique_ptr<DecodedPart> part);

 private:
  explicit DecodedPartPool(size_t max_free) : max_free_(max_free) {}
  void give(DecodedPart* part);

  const size_t max_free_;
  weir::Mutex mu_;
  std::vector<std::unique_ptr<DecodedPart>> free_ ABSL_GUARDED_BY(mu_);
};

// Decodes the blob of part `ref` of shard `shard_id`, reusing a part of `pool` if given.
absl::StatusOr<std::shared_ptr<const DecodedPart>> decode_part(std::string_view shard_label,
                                                               std::string_view shard_id,
                                                               const PartRef& ref,
                                                               std::string_view blob,
                                                               DecodedPartPool* pool = nullptr);

}  // namespace weir::persist::internal
