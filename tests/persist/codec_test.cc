// Parts are written and read with protobuf's wire format by hand (for speed): they must be exactly
// what the generated ProtoColumnarUpdates code writes and reads.

#include "codec.h"

#include "gtest/gtest.h"
#include <zstd.h>

#include "weir/persist/v1/part.pb.h"

namespace weir::persist::internal {
namespace {

Columns sample_columns() {
  Columns columns;
  for (int i = 0; i < 300; ++i) {
    columns.append(std::string(static_cast<size_t>(i % 200), static_cast<char>('a' + i % 26)) +
                       std::to_string(i),
                   static_cast<uint64_t>(i) * 1'000'000'007ULL, i % 3 == 0 ? -i : i);
  }
  return columns;
}

std::string decompress_payload(std::string_view blob) {
  proto::ProtoPart envelope;
  EXPECT_TRUE(envelope.ParseFromArray(blob.data(), static_cast<int>(blob.size())));
  std::string plain(envelope.uncompressed_bytes(), '\0');
  const size_t n = ZSTD_decompress(plain.data(), plain.size(), envelope.payload().data(),
                                   envelope.payload().size());
  EXPECT_FALSE(ZSTD_isError(n));
  return plain;
}

TEST(CodecTest, GeneratedCodeReadsWhatPartsAreWrittenAs) {
  const Columns columns = sample_columns();
  proto::ProtoColumnarUpdates parsed;
  ASSERT_TRUE(parsed.ParseFromString(decompress_payload(encode_part("s1", columns, 1).bytes)));
  ASSERT_EQ(parsed.num_updates(), columns.size());
  EXPECT_EQ(parsed.data(), columns.bytes);
  for (size_t i = 0; i < columns.size(); ++i) {
    ASSERT_EQ(parsed.data_lens(static_cast<int>(i)), columns.data(i).size());
    ASSERT_EQ(parsed.times(static_cast<int>(i)), columns.times[i]);
    ASSERT_EQ(parsed.diffs(static_cast<int>(i)), columns.diffs[i]);
  }
}

TEST(CodecTest, PartsWrittenByGeneratedCodeDecode) {
  const Columns columns = sample_columns();
  proto::ProtoColumnarUpdates updates;
  updates.set_num_updates(columns.size());
  updates.set_data(columns.bytes);
  for (size_t i = 0; i < columns.size(); ++i) {
    updates.add_data_lens(static_cast<uint32_t>(columns.data(i).size()));
    updates.add_times(columns.times[i]);
    updates.add_diffs(columns.diffs[i]);
  }
  const std::string plain = updates.SerializeAsString();
  proto::ProtoPart envelope;
  envelope.set_format_version(kPartFormatVersion);
  envelope.set_shard_id("s1");
  envelope.set_codec(proto::ProtoPart::CODEC_ZSTD);
  envelope.set_uncompressed_bytes(plain.size());
  std::string compressed(ZSTD_compressBound(plain.size()), '\0');
  compressed.resize(
      ZSTD_compress(compressed.data(), compressed.size(), plain.data(), plain.size(), 1));
  envelope.set_payload(compressed);
  const PartRef ref{"s1/w1/p1", 0, columns.size(), 0};
  absl::StatusOr<std::shared_ptr<const DecodedPart>> part =
      decode_part("shard \"x\"", "s1", ref, envelope.SerializeAsString());
  ASSERT_TRUE(part.ok()) << part.status();
  ASSERT_EQ((*part)->size(), columns.size());
  for (size_t i = 0; i < columns.size(); ++i) {
    ASSERT_EQ((*part)->data(i), columns.data(i));
    ASSERT_EQ((*part)->time(i), columns.times[i]);
    ASSERT_EQ((*part)->diff(i), columns.diffs[i]);
  }
}

TEST(CodecTest, EveryTruncationIsAnError) {
  const Columns columns = sample_columns();
  const std::string blob(encode_part("s1", columns, 1).bytes);
  const PartRef ref{"s1/w1/p1", blob.size(), columns.size(), 0};
  ASSERT_TRUE(decode_part("l", "s1", ref, blob).ok());
  for (size_t size = 0; size < blob.size(); size += 1 + size / 8) {
    EXPECT_FALSE(decode_part("l", "s1", ref, std::string_view(blob).substr(0, size)).ok())
        << "truncated to " << size << " bytes";
  }
}

}  // namespace
}  // namespace weir::persist::internal
