// Parts are written and read with protobuf's wire format by hand (for speed): they must be exactly
// what the generated ProtoColumnarUpdates code writes and reads.

#include "codec.h"

#include <algorithm>
#include <random>

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

// The diffs of a parsed part, expanded from their runs.
std::vector<int64_t> diffs_of(const proto::ProtoColumnarUpdates& parsed) {
  std::vector<int64_t> diffs;
  EXPECT_EQ(parsed.diff_run_values_size(), parsed.diff_run_lengths_size());
  for (int k = 0; k < parsed.diff_run_values_size(); ++k) {
    EXPECT_GT(parsed.diff_run_lengths(k), 0u);
    diffs.insert(diffs.end(), parsed.diff_run_lengths(k), parsed.diff_run_values(k));
  }
  return diffs;
}

TEST(CodecTest, GeneratedCodeReadsWhatPartsAreWrittenAs) {
  const Columns columns = sample_columns();
  proto::ProtoColumnarUpdates parsed;
  ASSERT_TRUE(parsed.ParseFromString(decompress_payload(encode_part("s1", columns, 1).bytes)));
  ASSERT_EQ(parsed.num_updates(), columns.size());
  EXPECT_EQ(parsed.data(), columns.bytes);
  EXPECT_EQ(parsed.times_size(), 0);  // Version 2 leaves the fixed-width columns out.
  EXPECT_EQ(parsed.diffs_size(), 0);
  ASSERT_EQ(parsed.time_offsets_size(), static_cast<int>(columns.size()));
  EXPECT_EQ(diffs_of(parsed), columns.diffs);
  for (size_t i = 0; i < columns.size(); ++i) {
    ASSERT_EQ(parsed.data_lens(static_cast<int>(i)), columns.data(i).size());
    ASSERT_EQ(parsed.times_base() + parsed.time_offsets(static_cast<int>(i)), columns.times[i]);
  }
}

TEST(CodecTest, RepeatedDiffsAndNearbyTimesTakeLittleRoom) {
  Columns columns;
  for (int i = 0; i < 1000; ++i) {
    columns.append("k" + std::to_string(i), 5'000'000'000ULL + static_cast<uint64_t>(i % 100),
                   i < 600 ? 1 : -1);
  }
  proto::ProtoColumnarUpdates parsed;
  ASSERT_TRUE(parsed.ParseFromString(decompress_payload(encode_part("s1", columns, 1).bytes)));
  EXPECT_EQ(parsed.times_base(), 5'000'000'000ULL);
  ASSERT_EQ(parsed.diff_run_values_size(), 2);
  EXPECT_EQ(diffs_of(parsed), columns.diffs);
  // One byte per time offset below 128.
  EXPECT_LT(parsed.ByteSizeLong(), columns.bytes.size() + 2 * columns.size() + 64);
}

// A part blob of shard "s1" at `version` whose payload is `plain`, compressed.
std::string part_blob(const std::string& plain, uint32_t version) {
  proto::ProtoPart envelope;
  envelope.set_format_version(version);
  envelope.set_shard_id("s1");
  envelope.set_codec(proto::ProtoPart::CODEC_ZSTD);
  envelope.set_uncompressed_bytes(plain.size());
  std::string compressed(ZSTD_compressBound(plain.size()), '\0');
  compressed.resize(
      ZSTD_compress(compressed.data(), compressed.size(), plain.data(), plain.size(), 1));
  envelope.set_payload(compressed);
  return envelope.SerializeAsString();
}

// Encodes `updates` as the payload of a part blob of shard "s1" at `version`.
std::string part_blob(const proto::ProtoColumnarUpdates& updates, uint32_t version) {
  return part_blob(updates.SerializeAsString(), version);
}

void expect_decodes_to(const std::string& blob, const Columns& columns) {
  const PartRef ref{"s1/w1/p1", 0, columns.size(), 0};
  absl::StatusOr<std::shared_ptr<const DecodedPart>> part =
      decode_part("shard \"x\"", "s1", ref, blob);
  ASSERT_TRUE(part.ok()) << part.status();
  ASSERT_EQ((*part)->size(), columns.size());
  for (size_t i = 0; i < columns.size(); ++i) {
    ASSERT_EQ((*part)->data(i), columns.data(i));
    ASSERT_EQ((*part)->time(i), columns.times[i]);
    ASSERT_EQ((*part)->diff(i), columns.diffs[i]);
  }
}

proto::ProtoColumnarUpdates data_only(const Columns& columns) {
  proto::ProtoColumnarUpdates updates;
  updates.set_num_updates(columns.size());
  updates.set_data(columns.bytes);
  for (size_t i = 0; i < columns.size(); ++i) {
    updates.add_data_lens(static_cast<uint32_t>(columns.data(i).size()));
  }
  return updates;
}

TEST(CodecTest, PartsWrittenByGeneratedCodeDecode) {
  const Columns columns = sample_columns();
  proto::ProtoColumnarUpdates updates = data_only(columns);
  uint64_t base = UINT64_MAX;
  for (uint64_t time : columns.times) {
    base = std::min(base, time);
  }
  updates.set_times_base(base);
  for (size_t i = 0; i < columns.size(); ++i) {
    updates.add_time_offsets(columns.times[i] - base);
    updates.add_diff_run_values(columns.diffs[i]);  // Runs of one: valid, if not compact.
    updates.add_diff_run_lengths(1);
  }
  expect_decodes_to(part_blob(updates, 2), columns);
}

TEST(CodecTest, VersionOnePartsStillDecode) {
  const Columns columns = sample_columns();
  proto::ProtoColumnarUpdates updates = data_only(columns);
  for (size_t i = 0; i < columns.size(); ++i) {
    updates.add_times(columns.times[i]);
    updates.add_diffs(columns.diffs[i]);
  }
  expect_decodes_to(part_blob(updates, 1), columns);
}

TEST(CodecTest, DiffRunsThatDoNotCoverTheUpdatesAreAnError) {
  const Columns columns = sample_columns();
  for (const uint64_t length : {columns.size() - 1, columns.size() + 1, uint64_t{0}}) {
    proto::ProtoColumnarUpdates updates = data_only(columns);
    for (size_t i = 0; i < columns.size(); ++i) {
      updates.add_time_offsets(columns.times[i]);
    }
    updates.add_diff_run_values(1);
    updates.add_diff_run_lengths(length);
    const PartRef ref{"s1/w1/p1", 0, columns.size(), 0};
    const absl::Status status =
        decode_part("shard \"x\"", "s1", ref, part_blob(updates, 2)).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << "run of " << length;
    EXPECT_NE(std::string(status.message()).find("s1/w1/p1"), std::string::npos) << status;
  }
}

TEST(CodecTest, UnknownPartVersionIsRefused) {
  const Columns columns = sample_columns();
  const PartRef ref{"s1/w1/p1", 0, columns.size(), 0};
  const uint32_t version = kPartFormatVersion + 1;
  const absl::Status status =
      decode_part("shard \"x\"", "s1", ref, part_blob(data_only(columns), version)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(std::string(status.message()).find("format version " + std::to_string(version)),
            std::string::npos)
      << status;
  // Version 0 is no version (protobuf leaves it out): every part ever written has one, so a blob
  // without is not a part, not one from a future build.
  const absl::Status unversioned =
      decode_part("shard \"x\"", "s1", ref, part_blob(data_only(columns), 0)).status();
  EXPECT_EQ(unversioned.code(), absl::StatusCode::kDataLoss) << unversioned;
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

namespace weir::persist::internal {
namespace {

// A payload that decompresses fine but whose encoding is damaged (what a buggy or hostile writer
// could produce: zstd's checksum does not catch it) is an error or a part of the right size;
// never a crash or a read out of bounds (this test runs under ASan in the sanitizer builds).
TEST(CodecTest, DamagedEncodingsNeverCrash) {
  const Columns columns = sample_columns();
  const std::string plain = decompress_payload(encode_part("s1", columns, 1).bytes);
  const PartRef ref{"s1/w1/p1", 0, columns.size(), 0};
  std::mt19937_64 rng(7);
  size_t decoded = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string damaged = plain;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      damaged[rng() % damaged.size()] = static_cast<char>(rng());
    }
    if (trial % 10 == 0) {
      damaged.resize(rng() % damaged.size());  // And some cut short.
    }
    absl::StatusOr<std::shared_ptr<const DecodedPart>> part =
        decode_part("shard \"x\"", "s1", ref, part_blob(damaged, kPartFormatVersion));
    if (part.ok()) {
      ++decoded;
      ASSERT_EQ((*part)->size(), columns.size());
      for (size_t i = 0; i < (*part)->size(); ++i) {
        (void)(*part)->data(i).size();
      }
    } else {
      EXPECT_NE(std::string(part.status().message()).find("s1/w1/p1"), std::string::npos)
          << part.status();
    }
  }
  EXPECT_LT(decoded, 3000u);  // Most damage is caught.
}

}  // namespace
}  // namespace weir::persist::internal
