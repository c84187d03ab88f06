#include "codec.h"

#include <bit>
#include <optional>

#include "str_cat.h"
#include <zstd.h>

#include "weir/check.h"
#include "weir/persist/v1/part.pb.h"
#include "weir/status.h"

namespace weir::persist::internal {
namespace {

// Frames larger than this are refused before allocating: no part is ever this large.
constexpr uint64_t kMaxUncompressedPartBytes = uint64_t{64} << 30;

struct CctxDeleter {
  void operator()(ZSTD_CCtx* ctx) const { ZSTD_freeCCtx(ctx); }
};
struct DctxDeleter {
  void operator()(ZSTD_DCtx* ctx) const { ZSTD_freeDCtx(ctx); }
};

bool valid_frontier(const proto::ProtoFrontier& frontier) { return frontier.elements_size() <= 1; }

// Checks what the rest of the code assumes of a state.
absl::Status validate_state(const proto::ProtoShardState& state) {
  if (!state.has_upper() || !state.has_since() || !valid_frontier(state.upper()) ||
      !valid_frontier(state.since())) {
    return absl::DataLossError("state has a malformed upper or since");
  }
  Frontier expected_lower(0);
  for (const proto::ProtoBatch& batch : state.batches()) {
    if (!batch.has_lower() || !batch.has_upper() || !batch.has_since() ||
        !valid_frontier(batch.lower()) || !valid_frontier(batch.upper()) ||
        !valid_frontier(batch.since())) {
      return absl::DataLossError("state has a batch with a malformed description");
    }
    const Frontier lower = frontier_of(batch.lower());
    const Frontier upper = frontier_of(batch.upper());
    if (lower != expected_lower || upper < lower) {
      return absl::DataLossError(internal::str_cat("state has a batch [", lower.to_string(), ", ",
                                                   upper.to_string(), ") that does not start at ",
                                                   expected_lower.to_string()));
    }
    uint32_t previous_start = 0;
    for (uint32_t start : batch.run_starts()) {
      if (start <= previous_start || start >= static_cast<uint32_t>(batch.parts_size())) {
        return absl::DataLossError("state has a batch with a malformed run");
      }
      previous_start = start;
    }
    expected_lower = upper;
  }
  if (expected_lower != frontier_of(state.upper())) {
    return absl::DataLossError(internal::str_cat("state batches end at ",
                                                 expected_lower.to_string(), " but the upper is ",
                                                 frontier_of(state.upper()).to_string()));
  }
  for (const auto& reader : state.leased_readers()) {
    if (!reader.has_since() || !valid_frontier(reader.since())) {
      return absl::DataLossError("state has a reader with a malformed since");
    }
  }
  for (const auto& reader : state.critical_readers()) {
    if (!reader.has_since() || !valid_frontier(reader.since())) {
      return absl::DataLossError("state has a reader with a malformed since");
    }
  }
  return absl::OkStatus();
}

}  // namespace

void to_proto(const Frontier& frontier, proto::ProtoFrontier* out) {
  out->clear_elements();
  if (!frontier.is_empty()) {
    out->add_elements(frontier.time());
  }
}

Frontier frontier_of(const proto::ProtoFrontier& frontier) {
  WEIR_DCHECK(frontier.elements_size() <= 1) << "a frontier of uint64 times has one element";
  return frontier.elements_size() == 0 ? Frontier::empty() : Frontier(frontier.elements(0));
}

void to_proto(const Batch& batch, proto::ProtoBatch* out) {
  to_proto(batch.description.lower, out->mutable_lower());
  to_proto(batch.description.upper, out->mutable_upper());
  to_proto(batch.description.since, out->mutable_since());
  out->clear_parts();
  for (const PartRef& part : batch.parts) {
    proto::ProtoPartRef* ref = out->add_parts();
    ref->set_key(part.key);
    ref->set_encoded_bytes(part.encoded_bytes);
    ref->set_num_updates(part.num_updates);
    ref->set_update_bytes(part.update_bytes);
  }
  out->mutable_run_starts()->Assign(batch.run_starts.begin(), batch.run_starts.end());
  out->set_writer_id(batch.writer_id);
}

Batch batch_of(const ShardId& shard_id, const proto::ProtoBatch& batch) {
  Batch result;
  result.shard_id = shard_id;
  result.writer_id = batch.writer_id();
  result.description = {frontier_of(batch.lower()), frontier_of(batch.upper()),
                        frontier_of(batch.since())};
  result.parts.reserve(batch.parts_size());
  for (const proto::ProtoPartRef& ref : batch.parts()) {
    result.parts.push_back({ref.key(), ref.encoded_bytes(), ref.num_updates(), ref.update_bytes()});
  }
  result.run_starts.assign(batch.run_starts().begin(), batch.run_starts().end());
  return result;
}

absl::StatusOr<proto::ProtoShardState> decode_state(std::string_view shard_label,
                                                    std::string_view key,
                                                    const VersionedData& version) {
  const auto where = [&] {
    return internal::str_cat(shard_label, ": state at consensus key \"", key, "\" seqno ",
                             version.seqno);
  };
  proto::ProtoShardState state;
  if (!state.ParseFromString(version.data)) {
    return absl::DataLossError(
        internal::str_cat(where(), " is truncated or corrupt (", version.data.size(), " bytes)"));
  }
  if (state.format_version() != kStateFormatVersion) {
    return absl::FailedPreconditionError(
        internal::str_cat(where(), " has format version ", state.format_version(),
                          "; this build reads version ", kStateFormatVersion));
  }
  if (state.shard_id() != key || state.seqno() != version.seqno) {
    return absl::DataLossError(internal::str_cat(where(), " claims to be shard \"",
                                                 state.shard_id(), "\" seqno ", state.seqno()));
  }
  const absl::Status valid = validate_state(state);
  if (!valid.ok()) {
    return absl::DataLossError(internal::str_cat(where(), ": ", valid.message()));
  }
  return state;
}

std::string encode_state(const proto::ProtoShardState& state) { return state.SerializeAsString(); }

void Columns::reserve(size_t updates, size_t data_bytes) {
  data.reserve(data_bytes);
  lens.reserve(updates);
  times.reserve(updates);
  diffs.reserve(updates);
}

namespace {

using Updates = proto::ProtoColumnarUpdates;

constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kFixed32 = 5;

constexpr uint32_t tag(int field, uint32_t wire_type) {
  return (static_cast<uint32_t>(field) << 3) | wire_type;
}

size_t varint_size(uint64_t value) {
  size_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++n;
  }
  return n;
}

char* put_varint(char* out, uint64_t value) {
  while (value >= 0x80) {
    *out++ = static_cast<char>(value | 0x80);
    value >>= 7;
  }
  *out++ = static_cast<char>(value);
  return out;
}

// Reads a varint at `*in`, not past `end`. False if it is malformed or truncated.
bool get_varint(const char*& in, const char* end, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64 && in < end; shift += 7) {
    const auto byte = static_cast<uint8_t>(*in++);
    value |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if (byte < 0x80) {
      return true;
    }
  }
  return false;
}

// A buffer reused by the calls of one thread: parts are large, and fresh allocations of that size
// cost page faults.
struct ScratchBuffer {
  std::unique_ptr<char[]> bytes;
  size_t capacity = 0;

  char* get(size_t size) {
    if (size > capacity) {
      capacity = std::max(size, capacity * 2);
      bytes = std::make_unique_for_overwrite<char[]>(capacity);
    }
    return bytes.get();
  }
};

// Writes `values` as a packed fixed64 field: little-endian, 8 bytes each.
template <class T>
char* put_fixed64s(char* out, int field, const std::vector<T>& values) {
  static_assert(sizeof(T) == 8);
  out = put_varint(out, tag(field, kLengthDelimited));
  out = put_varint(out, 8 * values.size());
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(out, values.data(), 8 * values.size());
    return out + 8 * values.size();
  } else {
    for (const T value : values) {
      auto bits = static_cast<uint64_t>(value);
      for (int b = 0; b < 8; ++b, bits >>= 8) {
        *out++ = static_cast<char>(bits & 0xFF);
      }
    }
    return out;
  }
}

}  // namespace

std::string encode_part(std::string_view shard_id, const Columns& columns, int zstd_level) {
  static_assert(std::endian::native == std::endian::little,
                "DecodedPart reads packed fixed64 columns in place");
  const size_t n = columns.size();
  size_t lens_bytes = 0;
  for (const uint32_t len : columns.lens) {
    lens_bytes += varint_size(len);
  }
  const size_t plain_size = 1 + varint_size(n) + 1 + varint_size(lens_bytes) + lens_bytes + 1 +
                            varint_size(columns.data.size()) + columns.data.size() +
                            2 * (1 + varint_size(8 * n) + 8 * n);
  thread_local ScratchBuffer plain_buffer;
  thread_local ScratchBuffer compressed_buffer;
  char* const plain = plain_buffer.get(plain_size);
  char* out = plain;
  out = put_varint(out, tag(Updates::kNumUpdatesFieldNumber, kVarint));
  out = put_varint(out, n);
  out = put_varint(out, tag(Updates::kDataLensFieldNumber, kLengthDelimited));
  out = put_varint(out, lens_bytes);
  for (const uint32_t len : columns.lens) {
    out = put_varint(out, len);
  }
  out = put_varint(out, tag(Updates::kDataFieldNumber, kLengthDelimited));
  out = put_varint(out, columns.data.size());
  std::memcpy(out, columns.data.data(), columns.data.size());
  out += columns.data.size();
  out = put_fixed64s(out, Updates::kTimesFieldNumber, columns.times);
  out = put_fixed64s(out, Updates::kDiffsFieldNumber, columns.diffs);
  WEIR_CHECK(static_cast<size_t>(out - plain) == plain_size) << "part size miscomputed";

  thread_local std::unique_ptr<ZSTD_CCtx, CctxDeleter> cctx(ZSTD_createCCtx());
  ZSTD_CCtx_reset(cctx.get(), ZSTD_reset_session_and_parameters);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, zstd_level);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_contentSizeFlag, 1);
  const size_t bound = ZSTD_compressBound(plain_size);
  char* const compressed = compressed_buffer.get(bound);
  const size_t compressed_size = ZSTD_compress2(cctx.get(), compressed, bound, plain, plain_size);
  WEIR_CHECK(!ZSTD_isError(compressed_size))
      << "zstd compression failed: " << ZSTD_getErrorName(compressed_size);

  proto::ProtoPart envelope;
  envelope.set_format_version(kPartFormatVersion);
  envelope.set_shard_id(std::string(shard_id));
  envelope.set_codec(proto::ProtoPart::CODEC_ZSTD);
  envelope.set_uncompressed_bytes(plain_size);
  envelope.set_payload(compressed, compressed_size);
  return envelope.SerializeAsString();
}

absl::StatusOr<std::shared_ptr<const DecodedPart>> decode_part(std::string_view shard_label,
                                                               std::string_view shard_id,
                                                               const PartRef& ref,
                                                               std::string_view blob) {
  const auto corrupt = [&](std::string_view why) {
    return absl::DataLossError(
        str_cat(shard_label, ": part \"", ref.key, "\" is truncated or corrupt: ", why));
  };
  proto::ProtoPart envelope;
  if (!envelope.ParseFromArray(blob.data(), static_cast<int>(blob.size()))) {
    return corrupt(str_cat("not a part encoding (", blob.size(), " bytes)"));
  }
  if (envelope.format_version() != kPartFormatVersion) {
    return absl::FailedPreconditionError(
        str_cat(shard_label, ": part \"", ref.key, "\" has format version ",
                envelope.format_version(), "; this build reads version ", kPartFormatVersion));
  }
  if (envelope.shard_id() != shard_id) {
    return corrupt(str_cat("it belongs to shard \"", envelope.shard_id(), "\""));
  }
  if (envelope.codec() != proto::ProtoPart::CODEC_ZSTD) {
    return corrupt(str_cat("unknown codec ", static_cast<int>(envelope.codec())));
  }
  const std::string& payload = envelope.payload();
  const unsigned long long content_size = ZSTD_getFrameContentSize(payload.data(), payload.size());
  if (content_size == ZSTD_CONTENTSIZE_ERROR || content_size == ZSTD_CONTENTSIZE_UNKNOWN ||
      content_size != envelope.uncompressed_bytes() || content_size > kMaxUncompressedPartBytes) {
    return corrupt("bad zstd frame header");
  }
  auto part = std::make_shared<DecodedPart>();
  part->plain_ = std::make_unique_for_overwrite<char[]>(content_size);
  thread_local std::unique_ptr<ZSTD_DCtx, DctxDeleter> dctx(ZSTD_createDCtx());
  const size_t n = ZSTD_decompressDCtx(dctx.get(), part->plain_.get(), content_size, payload.data(),
                                       payload.size());
  if (ZSTD_isError(n)) {
    return corrupt(str_cat("zstd: ", ZSTD_getErrorName(n)));
  }
  if (n != content_size) {
    return corrupt("zstd: short frame");
  }

  // Read the ProtoColumnarUpdates fields in place.
  const char* in = part->plain_.get();
  const char* const end = in + content_size;
  std::optional<uint64_t> num_updates;
  const char* lens = nullptr;
  const char* lens_end = nullptr;
  std::optional<std::string_view> data;
  std::optional<std::string_view> times;
  std::optional<std::string_view> diffs;
  while (in < end) {
    uint64_t key;
    if (!get_varint(in, end, key)) {
      return corrupt("undecodable updates");
    }
    const int field = static_cast<int>(key >> 3);
    const auto wire_type = static_cast<uint32_t>(key & 7);
    if (wire_type == kVarint) {
      uint64_t value;
      if (!get_varint(in, end, value)) {
        return corrupt("undecodable updates");
      }
      if (field == Updates::kNumUpdatesFieldNumber) {
        num_updates = value;
      }
      continue;
    }
    if (wire_type == kFixed64 || wire_type == kFixed32) {
      const size_t width = wire_type == kFixed64 ? 8 : 4;
      if (static_cast<size_t>(end - in) < width) {
        return corrupt("undecodable updates");
      }
      in += width;
      continue;
    }
    uint64_t length;
    if (wire_type != kLengthDelimited || !get_varint(in, end, length) ||
        length > static_cast<uint64_t>(end - in)) {
      return corrupt("undecodable updates");
    }
    const std::string_view value(in, length);
    in += length;
    const auto once = [&](std::optional<std::string_view>& slot) {
      const bool first = !slot.has_value();
      slot = value;
      return first;
    };
    bool ok = true;
    switch (field) {
      case Updates::kDataLensFieldNumber:
        ok = lens == nullptr;
        lens = value.data();
        lens_end = value.data() + value.size();
        break;
      case Updates::kDataFieldNumber:
        ok = once(data);
        break;
      case Updates::kTimesFieldNumber:
        ok = once(times);
        break;
      case Updates::kDiffsFieldNumber:
        ok = once(diffs);
        break;
      default:
        break;  // A field this version does not know: skipped, as protobuf does.
    }
    if (!ok) {
      return corrupt("a column appears twice");
    }
  }
  const uint64_t count = num_updates.value_or(0);
  if (count != ref.num_updates) {
    return corrupt(str_cat("it holds ", count, " updates, the state says ", ref.num_updates));
  }
  const size_t times_size = times ? times->size() : 0;
  const size_t diffs_size = diffs ? diffs->size() : 0;
  if (times_size != 8 * count || diffs_size != 8 * count) {
    return corrupt("columns of different lengths");
  }
  part->offsets_.reserve(count + 1);
  uint64_t offset = 0;
  part->offsets_.push_back(0);
  while (lens != nullptr && lens < lens_end) {
    uint64_t len;
    if (!get_varint(lens, lens_end, len)) {
      return corrupt("undecodable data lengths");
    }
    offset += len;
    part->offsets_.push_back(offset);
  }
  const size_t data_size = data ? data->size() : 0;
  if (part->offsets_.size() != count + 1 || offset != data_size) {
    return corrupt("data lengths do not add up");
  }
  part->size_ = count;
  part->data_ = data ? data->data() : nullptr;
  part->times_ = times ? times->data() : nullptr;
  part->diffs_ = diffs ? diffs->data() : nullptr;
  return std::shared_ptr<const DecodedPart>(std::move(part));
}

}  // namespace weir::persist::internal
