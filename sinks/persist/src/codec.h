// Encoding and decoding of shard states, parts and transmittable batches (protobuf + zstd).
//
// Decoding never trusts its input: a truncated or corrupt blob, an unknown format version or a
// state that breaks an invariant is an error naming the shard and the key.

#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

#include "weir/persist/v1/part.pb.h"
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

// The updates of one part, decoded. Update i is (data(i), time(i), diff(i)).
class DecodedPart {
 public:
  size_t size() const { return times_.size(); }
  std::string_view data(size_t i) const {
    return std::string_view(columns_.data()).substr(offsets_[i], offsets_[i + 1] - offsets_[i]);
  }
  uint64_t time(size_t i) const { return times_[i]; }
  int64_t diff(size_t i) const { return diffs_[i]; }

 private:
  friend absl::StatusOr<std::shared_ptr<const DecodedPart>> decode_part(std::string_view,
                                                                        std::string_view,
                                                                        const PartRef&,
                                                                        std::string_view);
  proto::ProtoColumnarUpdates columns_;
  std::vector<uint64_t> offsets_;  // size() + 1 entries into columns_.data().
  std::span<const uint64_t> times_;
  std::span<const int64_t> diffs_;
};

// Decodes the blob of part `ref` of shard `shard_id`.
absl::StatusOr<std::shared_ptr<const DecodedPart>> decode_part(std::string_view shard_label,
                                                               std::string_view shard_id,
                                                               const PartRef& ref,
                                                               std::string_view blob);

// Encodes sorted, consolidated columns as a part blob of shard `shard_id`.
std::string encode_part(std::string_view shard_id, const proto::ProtoColumnarUpdates& columns,
                        int zstd_level);

}  // namespace weir::persist::internal
