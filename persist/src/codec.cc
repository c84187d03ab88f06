#include "codec.h"

#include <bit>
#include <optional>

#include "str_cat.h"
#include <zstd.h>

#include "weir/check.h"
#include "weir/mutex.h"
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

namespace {

// The free buffers of ScratchBuffer: enough for the encodes of a few I/O threads at once (two
// buffers each), few enough that an idle process keeps little memory.
constexpr size_t kMaxFreeScratchBuffers = 8;

struct ScratchPool {
  weir::Mutex mu;
  std::vector<std::pair<std::unique_ptr<char[]>, size_t>> free ABSL_GUARDED_BY(mu);
};

ScratchPool& scratch_pool() {
  static ScratchPool* pool = new ScratchPool();  // Never destroyed: used by pool threads at exit.
  return *pool;
}

}  // namespace

ScratchBuffer::ScratchBuffer(size_t size) {
  ScratchPool& pool = scratch_pool();
  {
    weir::MutexLock lock(pool.mu);
    for (auto it = pool.free.begin(); it != pool.free.end(); ++it) {
      if (it->second >= size) {
        bytes_ = std::move(it->first);
        capacity_ = it->second;
        pool.free.erase(it);
        return;
      }
    }
  }
  bytes_ = std::make_unique_for_overwrite<char[]>(size);
  capacity_ = size;
}

ScratchBuffer::~ScratchBuffer() {
  if (bytes_ == nullptr) {
    return;
  }
  ScratchPool& pool = scratch_pool();
  weir::MutexLock lock(pool.mu);
  if (pool.free.size() < kMaxFreeScratchBuffers) {
    pool.free.emplace_back(std::move(bytes_), capacity_);
  }
}

namespace {

using Updates = proto::ProtoColumnarUpdates;
using Part = proto::ProtoPart;
using namespace wire;

// Reads a varint at `in`, not past `end`. False if it is malformed or truncated.
inline bool get_varint(const char*& in, const char* end, uint64_t& value) {
  if (in < end && static_cast<uint8_t>(*in) < 0x80) {  // Most lengths and time offsets.
    value = static_cast<uint8_t>(*in++);
    return true;
  }
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

// A column of varints, read in order.
class VarintColumn {
 public:
  explicit VarintColumn(std::string_view column)
      : in_(column.data()), end_(column.data() + column.size()) {}
  // The next varint; false if the column is used up or malformed.
  bool next(uint64_t& value) { return get_varint(in_, end_, value); }
  bool done() const { return in_ == end_; }

 private:
  const char* in_;
  const char* end_;
};

// Calls field(number, wire_type, varint, bytes) for each field of the message in [in, end):
// `varint` for varint fields, `bytes` for length-delimited ones. Fixed-width fields are skipped.
// False if the message is malformed or `field` returns false.
template <class Field>
bool for_each_field(const char* in, const char* end, Field&& field) {
  while (in < end) {
    uint64_t key;
    if (!get_varint(in, end, key)) {
      return false;
    }
    const int number = static_cast<int>(key >> 3);
    const auto wire_type = static_cast<uint32_t>(key & 7);
    uint64_t value = 0;
    std::string_view bytes;
    if (wire_type == kVarint) {
      if (!get_varint(in, end, value)) {
        return false;
      }
    } else if (wire_type == kFixed64 || wire_type == kFixed32) {
      const size_t width = wire_type == kFixed64 ? 8 : 4;
      if (static_cast<size_t>(end - in) < width) {
        return false;
      }
      in += width;
      continue;
    } else if (wire_type == kLengthDelimited) {
      if (!get_varint(in, end, value) || value > static_cast<uint64_t>(end - in)) {
        return false;
      }
      bytes = std::string_view(in, value);
      in += value;
    } else {
      return false;
    }
    if (!field(number, wire_type, value, bytes)) {
      return false;
    }
  }
  return true;
}

}  // namespace

EncodedPart finish_part(std::string_view shard_id, const char* plain, size_t plain_size,
                        int zstd_level) {
  thread_local std::unique_ptr<ZSTD_CCtx, CctxDeleter> cctx(ZSTD_createCCtx());
  ZSTD_CCtx_reset(cctx.get(), ZSTD_reset_session_and_parameters);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, zstd_level);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_contentSizeFlag, 1);
  // The ProtoPart envelope: its small fields, then the payload compressed in place after them.
  // The header is written once the payload's size is known, ending where the payload starts.
  constexpr size_t kMaxShardIdBytes = 64;  // Ids are 37 bytes.
  WEIR_CHECK(shard_id.size() <= kMaxShardIdBytes) << "shard id too long: " << shard_id;
  constexpr size_t header_max = size_t{6} * 11 + kMaxShardIdBytes;
  const size_t bound = ZSTD_compressBound(plain_size);
  ScratchBuffer buffer(header_max + bound);
  char* const payload = buffer.data() + header_max;
  const size_t payload_size = ZSTD_compress2(cctx.get(), payload, bound, plain, plain_size);
  WEIR_CHECK(!ZSTD_isError(payload_size))
      << "zstd compression failed: " << ZSTD_getErrorName(payload_size);
  char header[header_max];
  char* out = header;
  out = put_varint(out, tag(Part::kFormatVersionFieldNumber, kVarint));
  out = put_varint(out, kPartFormatVersion);
  out = put_varint(out, tag(Part::kShardIdFieldNumber, kLengthDelimited));
  out = put_varint(out, shard_id.size());
  std::memcpy(out, shard_id.data(), shard_id.size());
  out += shard_id.size();
  out = put_varint(out, tag(Part::kCodecFieldNumber, kVarint));
  out = put_varint(out, Part::CODEC_ZSTD);
  out = put_varint(out, tag(Part::kUncompressedBytesFieldNumber, kVarint));
  out = put_varint(out, plain_size);
  out = put_varint(out, tag(Part::kPayloadFieldNumber, kLengthDelimited));
  out = put_varint(out, payload_size);
  const size_t header_size = static_cast<size_t>(out - header);
  std::memcpy(payload - header_size, header, header_size);
  return EncodedPart{std::move(buffer),
                     std::string_view(payload - header_size, header_size + payload_size)};
}

std::shared_ptr<DecodedPartPool> DecodedPartPool::create(size_t max_free) {
  return std::shared_ptr<DecodedPartPool>(new DecodedPartPool(max_free));
}

std::unique_ptr<DecodedPart> DecodedPartPool::take() {
  weir::MutexLock lock(mu_);
  if (free_.empty()) {
    return std::make_unique<DecodedPart>();
  }
  std::unique_ptr<DecodedPart> part = std::move(free_.back());
  free_.pop_back();
  return part;
}

std::shared_ptr<const DecodedPart> DecodedPartPool::share(std::unique_ptr<DecodedPart> part) {
  return std::shared_ptr<const DecodedPart>(
      part.release(), [pool = shared_from_this()](const DecodedPart* released) {
        pool->give(const_cast<DecodedPart*>(released));
      });
}

void DecodedPartPool::give(DecodedPart* part) {
  std::unique_ptr<DecodedPart> owned(part);
  weir::MutexLock lock(mu_);
  if (free_.size() < max_free_) {
    free_.push_back(std::move(owned));
  }
}

namespace {

// Errors about one part, naming its shard and its key.
struct PartErrors {
  std::string_view shard_label;
  std::string_view key;

  absl::Status corrupt(std::string_view why) const {
    return absl::DataLossError(
        str_cat(shard_label, ": part \"", key, "\" is truncated or corrupt: ", why));
  }
};

// Fills `slot` unless it is filled already: a field that occurs twice makes the part corrupt.
template <class T>
bool set_once(std::optional<T>& slot, T value) {
  const bool first = !slot.has_value();
  slot = value;
  return first;
}

// The fields of a part's ProtoPart envelope, checked against the shard and this build.
struct Envelope {
  uint64_t version = 0;  // 1 .. kPartFormatVersion.
  uint64_t uncompressed_bytes = 0;
  std::string_view compressed;  // A zstd frame of a ProtoColumnarUpdates.
};

absl::StatusOr<Envelope> read_envelope(const PartErrors& errors, std::string_view shard_id,
                                       std::string_view blob) {
  std::optional<uint64_t> version;
  std::optional<std::string_view> owner;
  std::optional<uint64_t> codec;
  std::optional<uint64_t> uncompressed_bytes;
  std::optional<std::string_view> payload;
  const bool envelope_ok = for_each_field(
      blob.data(), blob.data() + blob.size(),
      [&](int number, uint32_t wire_type, uint64_t value, std::string_view bytes) {
        const bool varint = wire_type == kVarint;
        switch (number) {
          case Part::kFormatVersionFieldNumber:
            return varint && set_once(version, value);
          case Part::kShardIdFieldNumber:
            return !varint && set_once(owner, bytes);
          case Part::kCodecFieldNumber:
            return varint && set_once(codec, value);
          case Part::kUncompressedBytesFieldNumber:
            return varint && set_once(uncompressed_bytes, value);
          case Part::kPayloadFieldNumber:
            return !varint && set_once(payload, bytes);
          default:
            return true;  // A field this version does not know: skipped, as protobuf does.
        }
      });
  if (!envelope_ok || !version.has_value()) {
    // Every part this or an older build wrote starts with its version: one without is no part.
    return errors.corrupt(str_cat("not a part encoding (", blob.size(), " bytes)"));
  }
  if (*version < 1 || *version > kPartFormatVersion) {
    return absl::FailedPreconditionError(
        str_cat(errors.shard_label, ": part \"", errors.key, "\" has format version ",
                version.value_or(0), "; this build reads versions 1 to ", kPartFormatVersion));
  }
  if (owner.value_or("") != shard_id) {
    return errors.corrupt(str_cat("it belongs to shard \"", owner.value_or(""), "\""));
  }
  if (codec.value_or(Part::CODEC_UNSPECIFIED) != Part::CODEC_ZSTD) {
    return errors.corrupt(str_cat("unknown codec ", codec.value_or(Part::CODEC_UNSPECIFIED)));
  }
  return Envelope{*version, uncompressed_bytes.value_or(0), payload.value_or("")};
}

// The fields of a decompressed ProtoColumnarUpdates, in place. A column that protobuf left out
// because it is empty reads as empty.
struct UpdateColumns {
  uint64_t count = 0;  // num_updates, as the state says.
  uint64_t times_base = 0;
  std::string_view lens;
  std::string_view data;
  std::string_view times;  // Version 1: fixed 8-byte times and diffs.
  std::string_view diffs;
  std::string_view time_offsets;  // Version 2: varint offsets from times_base, diff runs.
  std::string_view run_values;
  std::string_view run_lengths;
};

absl::StatusOr<UpdateColumns> read_columns(const PartErrors& errors, std::string_view plain,
                                           uint64_t expected_updates) {
  std::optional<uint64_t> num_updates;
  std::optional<uint64_t> times_base;
  std::optional<std::string_view> lens;
  std::optional<std::string_view> data;
  std::optional<std::string_view> times;
  std::optional<std::string_view> diffs;
  std::optional<std::string_view> time_offsets;
  std::optional<std::string_view> run_values;
  std::optional<std::string_view> run_lengths;
  const bool updates_ok =
      for_each_field(plain.data(), plain.data() + plain.size(),
                     [&](int number, uint32_t wire_type, uint64_t value, std::string_view bytes) {
                       const bool varint = wire_type == kVarint;
                       switch (number) {
                         case Updates::kNumUpdatesFieldNumber:
                           return varint && set_once(num_updates, value);
                         case Updates::kDataLensFieldNumber:
                           return !varint && set_once(lens, bytes);
                         case Updates::kDataFieldNumber:
                           return !varint && set_once(data, bytes);
                         case Updates::kTimesFieldNumber:
                           return !varint && set_once(times, bytes);
                         case Updates::kDiffsFieldNumber:
                           return !varint && set_once(diffs, bytes);
                         case Updates::kTimesBaseFieldNumber:
                           return varint && set_once(times_base, value);
                         case Updates::kTimeOffsetsFieldNumber:
                           return !varint && set_once(time_offsets, bytes);
                         case Updates::kDiffRunValuesFieldNumber:
                           return !varint && set_once(run_values, bytes);
                         case Updates::kDiffRunLengthsFieldNumber:
                           return !varint && set_once(run_lengths, bytes);
                         default:
                           return true;
                       }
                     });
  if (!updates_ok) {
    return errors.corrupt("undecodable updates");
  }
  const uint64_t count = num_updates.value_or(0);
  if (count != expected_updates) {
    return errors.corrupt(
        str_cat("it holds ", count, " updates, the state says ", expected_updates));
  }
  const auto column = [](const std::optional<std::string_view>& field) {
    return field.value_or(std::string_view());
  };
  return UpdateColumns{
      count,         times_base.value_or(0), column(lens),       column(data),       column(times),
      column(diffs), column(time_offsets),   column(run_values), column(run_lengths)};
}

}  // namespace

// The steps of decode_part that fill a DecodedPart (its friend).
class PartDecoder {
 public:
  // Decompresses the envelope's payload into `part`'s buffer; returns the plain bytes.
  static absl::StatusOr<std::string_view> decompress(const PartErrors& errors,
                                                     const Envelope& envelope, DecodedPart& part) {
    const std::string_view compressed = envelope.compressed;
    const unsigned long long content_size =
        ZSTD_getFrameContentSize(compressed.data(), compressed.size());
    if (content_size == ZSTD_CONTENTSIZE_ERROR || content_size == ZSTD_CONTENTSIZE_UNKNOWN ||
        content_size != envelope.uncompressed_bytes || content_size > kMaxUncompressedPartBytes) {
      return errors.corrupt("bad zstd frame header");
    }
    if (part.capacity_ < content_size) {
      part.plain_ = std::make_unique_for_overwrite<char[]>(content_size);
      part.capacity_ = content_size;
    }
    part.size_ = 0;
    thread_local std::unique_ptr<ZSTD_DCtx, DctxDeleter> dctx(ZSTD_createDCtx());
    const size_t n = ZSTD_decompressDCtx(dctx.get(), part.plain_.get(), content_size,
                                         compressed.data(), compressed.size());
    if (ZSTD_isError(n)) {
      return errors.corrupt(str_cat("zstd: ", ZSTD_getErrorName(n)));
    }
    if (n != content_size) {
      return errors.corrupt("zstd: short frame");
    }
    return std::string_view(part.plain_.get(), content_size);
  }

  // Gathers each update's data offset, time and diff from `columns` (in `part`'s buffer) into
  // `part`'s rows, checking that the columns agree.
  static absl::Status gather_rows(const PartErrors& errors, uint64_t version,
                                  const UpdateColumns& columns, DecodedPart& part) {
    const uint64_t count = columns.count;
    const bool fixed_columns = version == 1;
    if (fixed_columns && (columns.times.size() != 8 * count || columns.diffs.size() != 8 * count)) {
      return errors.corrupt("columns of different lengths");
    }
    const size_t data_size = columns.data.size();
    if (count > columns.lens.size()) {  // Every update has a length of at least one byte.
      return errors.corrupt("fewer data lengths than updates");
    }
    if (part.row_capacity_ < count + 1) {
      part.rows_ = std::make_unique_for_overwrite<DecodedPart::Row[]>(count + 1);
      part.row_capacity_ = count + 1;
    }
    const char* const times = columns.times.data();
    const char* const diffs = columns.diffs.data();
    const uint64_t times_base = columns.times_base;
    VarintColumn lens_in(columns.lens);
    VarintColumn offsets_in(columns.time_offsets);
    VarintColumn values_in(columns.run_values);
    VarintColumn lengths_in(columns.run_lengths);
    uint64_t offset = 0;
    uint64_t run_left = 0;  // Updates left in the current diff run.
    int64_t run_diff = 0;
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t len;
      if (!lens_in.next(len)) {
        return errors.corrupt("fewer data lengths than updates");
      }
      if (len > data_size - offset) {
        return errors.corrupt("data lengths exceed the data");
      }
      DecodedPart::Row& row = part.rows_[i];
      row.offset = offset;
      offset += len;
      if (fixed_columns) {
        std::memcpy(&row.time, times + 8 * i, 8);
        std::memcpy(&row.diff, diffs + 8 * i, 8);
        continue;
      }
      uint64_t time_offset;
      if (!offsets_in.next(time_offset)) {
        return errors.corrupt("fewer times than updates");
      }
      row.time = times_base + time_offset;
      if (row.time < time_offset) {
        return errors.corrupt("a time past 2^64");
      }
      if (run_left == 0) {
        uint64_t value;
        if (!values_in.next(value) || !lengths_in.next(run_left) || run_left == 0) {
          return errors.corrupt("fewer diffs than updates");
        }
        run_diff = unzigzag(value);
      }
      row.diff = run_diff;
      --run_left;
    }
    if (!lens_in.done() || offset != data_size) {
      return errors.corrupt("data lengths do not add up");
    }
    part.rows_[count].offset = offset;
    if (!offsets_in.done() || !values_in.done() || !lengths_in.done() || run_left != 0) {
      return errors.corrupt("more times or diffs than updates");
    }
    part.data_ = columns.data.data();
    part.size_ = count;
    return absl::OkStatus();
  }
};

// Three steps: the envelope (is this a part of this shard, in a format this build reads), the
// payload decompressed, and its columns gathered into rows.
absl::StatusOr<std::shared_ptr<const DecodedPart>> decode_part(std::string_view shard_label,
                                                               std::string_view shard_id,
                                                               const PartRef& ref,
                                                               std::string_view blob,
                                                               DecodedPartPool* pool) {
  const PartErrors errors{shard_label, ref.key};
  if (ref.encoded_bytes != 0 && blob.size() != ref.encoded_bytes) {
    return errors.corrupt(
        str_cat("it has ", blob.size(), " bytes; the state says ", ref.encoded_bytes));
  }
  WEIR_ASSIGN_OR_RETURN(const Envelope envelope, read_envelope(errors, shard_id, blob));
  std::unique_ptr<DecodedPart> part =
      pool != nullptr ? pool->take() : std::make_unique<DecodedPart>();
  WEIR_ASSIGN_OR_RETURN(const std::string_view plain,
                        PartDecoder::decompress(errors, envelope, *part));
  WEIR_ASSIGN_OR_RETURN(const UpdateColumns columns, read_columns(errors, plain, ref.num_updates));
  WEIR_RETURN_IF_ERROR(PartDecoder::gather_rows(errors, envelope.version, columns, *part));
  if (pool != nullptr) {
    return pool->share(std::move(part));
  }
  return std::shared_ptr<const DecodedPart>(std::move(part));
}

}  // namespace weir::persist::internal
