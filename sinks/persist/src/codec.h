// Encoding and decoding of shard states, parts and transmittable batches (protobuf + zstd).
//
// Parts are the bulk of the data, so their ProtoColumnarUpdates payload is written and read with
// protobuf's wire format directly (one pass, no copies of the columns); a test checks that the
// generated ProtoColumnarUpdates code reads and writes the same bytes.
//
// Decoding never trusts its input: a truncated or corrupt blob, an unknown format version or a
// state that breaks an invariant is an error naming the shard and the key.

#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "weir/persist/v1/state.pb.h"
#include "weir/sinks/persist/batch.h"
#include "weir/sinks/persist/consensus.h"
#include "weir/sinks/persist/frontier.h"

namespace weir::persist::internal {

namespace proto = ::weir::persist::v1;

inline constexpr uint32_t kStateFormatVersion = 1;
inline constexpr uint32_t kPartFormatVersion = 1;
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

// The updates of one part being written, sorted by (data, time): update i is the i-th slice of
// `data` (lengths in `lens`), times[i] and diffs[i].
struct Columns {
  std::string data;
  std::vector<uint32_t> lens;
  std::vector<uint64_t> times;
  std::vector<int64_t> diffs;

  size_t size() const { return times.size(); }
  bool empty() const { return times.empty(); }
  uint64_t update_bytes() const { return data.size() + 16 * static_cast<uint64_t>(size()); }
  void reserve(size_t updates, size_t data_bytes);
  void append(std::string_view update_data, uint64_t time, int64_t diff) {
    data.append(update_data);
    lens.push_back(static_cast<uint32_t>(update_data.size()));
    times.push_back(time);
    diffs.push_back(diff);
  }
};

// Encodes sorted, consolidated columns as a part blob of shard `shard_id`: a ProtoPart whose
// payload is the zstd-compressed ProtoColumnarUpdates encoding of `columns`.
std::string encode_part(std::string_view shard_id, const Columns& columns, int zstd_level);

// The updates of one part, decoded. Update i is (data(i), time(i), diff(i)).
//
// The columns are read in place from the decompressed ProtoColumnarUpdates encoding (see
// decode_part), so decoding copies nothing after decompression.
class DecodedPart {
 public:
  size_t size() const { return size_; }
  std::string_view data(size_t i) const {
    return std::string_view(data_ + offsets_[i], offsets_[i + 1] - offsets_[i]);
  }
  uint64_t time(size_t i) const { return load<uint64_t>(times_ + 8 * i); }
  int64_t diff(size_t i) const { return load<int64_t>(diffs_ + 8 * i); }

 private:
  friend absl::StatusOr<std::shared_ptr<const DecodedPart>> decode_part(std::string_view,
                                                                        std::string_view,
                                                                        const PartRef&,
                                                                        std::string_view);
  // Packed fixed64 values are little-endian and unaligned in the buffer.
  template <class T>
  static T load(const char* at) {
    T value;
    std::memcpy(&value, at, sizeof(value));
    return value;
  }

  std::unique_ptr<char[]> plain_;  // The decompressed encoding; the pointers below are into it.
  size_t size_ = 0;
  const char* data_ = nullptr;
  const char* times_ = nullptr;
  const char* diffs_ = nullptr;
  std::vector<uint64_t> offsets_;  // size() + 1 offsets into data_.
};

// Decodes the blob of part `ref` of shard `shard_id`.
absl::StatusOr<std::shared_ptr<const DecodedPart>> decode_part(std::string_view shard_label,
                                                               std::string_view shard_id,
                                                               const PartRef& ref,
                                                               std::string_view blob);

}  // namespace weir::persist::internal
