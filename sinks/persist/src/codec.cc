#include "codec.h"

#include "str_cat.h"
#include <zstd.h>

#include "weir/check.h"
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

absl::StatusOr<std::shared_ptr<const DecodedPart>> decode_part(std::string_view shard_label,
                                                               std::string_view shard_id,
                                                               const PartRef& ref,
                                                               std::string_view blob) {
  const auto corrupt = [&](std::string_view why) {
    return absl::DataLossError(
        internal::str_cat(shard_label, ": part \"", ref.key, "\" is truncated or corrupt: ", why));
  };
  proto::ProtoPart envelope;
  if (!envelope.ParseFromArray(blob.data(), static_cast<int>(blob.size()))) {
    return corrupt(internal::str_cat("not a part encoding (", blob.size(), " bytes)"));
  }
  if (envelope.format_version() != kPartFormatVersion) {
    return absl::FailedPreconditionError(internal::str_cat(
        shard_label, ": part \"", ref.key, "\" has format version ", envelope.format_version(),
        "; this build reads version ", kPartFormatVersion));
  }
  if (envelope.shard_id() != shard_id) {
    return corrupt(internal::str_cat("it belongs to shard \"", envelope.shard_id(), "\""));
  }
  if (envelope.codec() != proto::ProtoPart::CODEC_ZSTD) {
    return corrupt(internal::str_cat("unknown codec ", static_cast<int>(envelope.codec())));
  }
  const std::string& payload = envelope.payload();
  const unsigned long long content_size = ZSTD_getFrameContentSize(payload.data(), payload.size());
  if (content_size == ZSTD_CONTENTSIZE_ERROR || content_size == ZSTD_CONTENTSIZE_UNKNOWN ||
      content_size != envelope.uncompressed_bytes() || content_size > kMaxUncompressedPartBytes) {
    return corrupt("bad zstd frame header");
  }
  thread_local std::unique_ptr<ZSTD_DCtx, DctxDeleter> dctx(ZSTD_createDCtx());
  std::string plain;
  plain.resize(content_size);
  const size_t n =
      ZSTD_decompressDCtx(dctx.get(), plain.data(), plain.size(), payload.data(), payload.size());
  if (ZSTD_isError(n)) {
    return corrupt(internal::str_cat("zstd: ", ZSTD_getErrorName(n)));
  }
  if (n != plain.size()) {
    return corrupt("zstd: short frame");
  }
  auto part = std::make_shared<DecodedPart>();
  proto::ProtoColumnarUpdates& columns = part->columns_;
  if (!columns.ParseFromString(plain)) {
    return corrupt("undecodable updates");
  }
  const size_t count = columns.data_lens_size();
  if (columns.num_updates() != count || static_cast<size_t>(columns.times_size()) != count ||
      static_cast<size_t>(columns.diffs_size()) != count) {
    return corrupt("columns of different lengths");
  }
  if (count != ref.num_updates) {
    return corrupt(
        internal::str_cat("it holds ", count, " updates, the state says ", ref.num_updates));
  }
  part->offsets_.resize(count + 1);
  uint64_t offset = 0;
  for (size_t i = 0; i < count; ++i) {
    part->offsets_[i] = offset;
    offset += columns.data_lens(static_cast<int>(i));
  }
  part->offsets_[count] = offset;
  if (offset != columns.data().size()) {
    return corrupt("data lengths do not add up");
  }
  part->times_ = std::span<const uint64_t>(columns.times().data(), count);
  part->diffs_ = std::span<const int64_t>(columns.diffs().data(), count);
  return std::shared_ptr<const DecodedPart>(std::move(part));
}

std::string encode_part(std::string_view shard_id, const proto::ProtoColumnarUpdates& columns,
                        int zstd_level) {
  thread_local std::unique_ptr<ZSTD_CCtx, CctxDeleter> cctx(ZSTD_createCCtx());
  const std::string plain = columns.SerializeAsString();
  ZSTD_CCtx_reset(cctx.get(), ZSTD_reset_session_and_parameters);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, zstd_level);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_contentSizeFlag, 1);
  proto::ProtoPart envelope;
  envelope.set_format_version(kPartFormatVersion);
  envelope.set_shard_id(std::string(shard_id));
  envelope.set_codec(proto::ProtoPart::CODEC_ZSTD);
  envelope.set_uncompressed_bytes(plain.size());
  std::string* payload = envelope.mutable_payload();
  payload->resize(ZSTD_compressBound(plain.size()));
  const size_t n =
      ZSTD_compress2(cctx.get(), payload->data(), payload->size(), plain.data(), plain.size());
  WEIR_CHECK(!ZSTD_isError(n)) << "zstd compression failed: " << ZSTD_getErrorName(n);
  payload->resize(n);
  return envelope.SerializeAsString();
}

}  // namespace weir::persist::internal
