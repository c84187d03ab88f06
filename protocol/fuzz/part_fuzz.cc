// part_fuzz: libFuzzer target for decode_part, which reads a part blob (a ProtoPart envelope
// around a zstd-compressed ProtoColumnarUpdates encoding) by hand, from bytes a Blob store
// returns. Each input is one part (layout in part_fuzz.h): either a whole blob, or a columns
// encoding that finish_part wraps into a valid envelope, so that the fuzzer reaches the column
// decoding without having to write zstd frames.
//
// decode_part must return an error on bad input, never crash or read out of bounds. On top, an
// oracle aborts when a property breaks: a decoded part, encoded again by encode_part and decoded,
// holds the same updates (decoding loses nothing the encoder keeps).
//
// Build and run: FUZZ_TARGET=part_fuzz protocol/fuzz/run.sh [SECONDS].

#include "part_fuzz.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "codec.h"

namespace {

namespace internal = weir::persist::internal;
using weir::persist::fuzz::kHeaderBytes;
using weir::persist::fuzz::kShardId;
using weir::persist::fuzz::PartInput;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "part_fuzz: oracle failed: %s\n", what);
  std::abort();
}

// A decoded part as encode_part's source.
struct DecodedSource {
  const internal::DecodedPart& part;
  size_t size() const { return part.size(); }
  // A part whose data are all empty has no data buffer: its views are (nullptr, 0), and
  // encode_part would memcpy from nullptr (undefined, though nothing is copied). The sources
  // persist encodes (Columns, a write's buffer) hold their data in a std::string, never null.
  std::string_view data(size_t i) const {
    const std::string_view view = part.data(i);
    return view.data() != nullptr ? view : std::string_view("");
  }
  uint64_t time(size_t i) const { return part.time(i); }
  int64_t diff(size_t i) const { return part.diff(i); }
  size_t data_bytes() const {
    size_t bytes = 0;
    for (size_t i = 0; i < part.size(); ++i) bytes += part.data(i).size();
    return bytes;
  }
};

void round_trip(const weir::persist::PartRef& ref, const internal::DecodedPart& part,
                internal::DecodedPartPool* pool) {
  const internal::EncodedPart again = internal::encode_part(kShardId, DecodedSource{part}, 1);
  auto decoded = internal::decode_part("fuzz", kShardId, ref, again.bytes, pool);
  if (!decoded.ok()) broken("a decoded part, encoded again, does not decode");
  const internal::DecodedPart& other = **decoded;
  if (other.size() != part.size()) broken("a re-encoded part has a different size");
  for (size_t i = 0; i < part.size(); ++i) {
    if (other.data(i) != part.data(i) || other.time(i) != part.time(i) ||
        other.diff(i) != part.diff(i)) {
      broken("a re-encoded part holds different updates");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kHeaderBytes) return 0;
  const auto kind = static_cast<PartInput>(data[0] & 1);
  uint32_t num_updates = 0;
  for (int i = 0; i < 4; ++i) num_updates |= static_cast<uint32_t>(data[1 + i]) << (8 * i);
  const std::string_view bytes(reinterpret_cast<const char*>(data) + kHeaderBytes,
                               size - kHeaderBytes);

  weir::persist::PartRef ref;
  ref.key = "fuzz-part";
  ref.num_updates = num_updates;
  // Half of the inputs decode into pooled parts, whose buffers are reused across inputs: a
  // decode must not depend on what a reused buffer held.
  static const std::shared_ptr<internal::DecodedPartPool> pool =
      internal::DecodedPartPool::create(2);
  internal::DecodedPartPool* const use_pool = (data[0] & 2) != 0 ? pool.get() : nullptr;

  if (kind == PartInput::kBlob) {
    auto part = internal::decode_part("fuzz", kShardId, ref, bytes, use_pool);
    if (part.ok()) round_trip(ref, **part, use_pool);
    return 0;
  }
  const internal::EncodedPart blob = internal::finish_part(kShardId, bytes.data(), bytes.size(), 1);
  auto part = internal::decode_part("fuzz", kShardId, ref, blob.bytes, use_pool);
  if (part.ok()) round_trip(ref, **part, use_pool);
  return 0;
}
