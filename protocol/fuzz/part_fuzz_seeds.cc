// part_fuzz_seeds DIR: writes part_fuzz's seed corpus into DIR: parts made by encode_part (empty,
// one update, runs of equal diffs, large times, empty data), each both as a whole blob and as its
// columns encoding; and a format-version-1 part (fixed time and diff columns) written with the
// generated code. run.sh calls it before every run, so the seeds follow the encoder.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "codec.h"
#include "part_fuzz.h"
#include <zstd.h>

namespace {

namespace internal = weir::persist::internal;
namespace proto = weir::persist::v1;
using weir::persist::fuzz::kShardId;
using weir::persist::fuzz::part_input;
using weir::persist::fuzz::PartInput;

std::string decompress(const std::string& payload) {
  std::string plain(ZSTD_getFrameContentSize(payload.data(), payload.size()), '\0');
  const size_t n = ZSTD_decompress(plain.data(), plain.size(), payload.data(), payload.size());
  if (ZSTD_isError(n)) {
    std::fprintf(stderr, "part_fuzz_seeds: zstd: %s\n", ZSTD_getErrorName(n));
    std::exit(1);
  }
  return plain;
}

std::string version_1_part() {
  proto::ProtoColumnarUpdates updates;
  updates.set_num_updates(3);
  for (std::string_view data : {"apple", "banana", "cherry"}) {
    updates.add_data_lens(static_cast<uint32_t>(data.size()));
    updates.mutable_data()->append(data);
  }
  for (uint64_t t : {1, 5, 9}) updates.add_times(t);
  for (int64_t d : {1, -1, 2}) updates.add_diffs(d);
  const std::string plain = updates.SerializeAsString();
  std::string compressed(ZSTD_compressBound(plain.size()), '\0');
  compressed.resize(
      ZSTD_compress(compressed.data(), compressed.size(), plain.data(), plain.size(), 1));
  proto::ProtoPart part;
  part.set_format_version(1);
  part.set_shard_id(std::string(kShardId));
  part.set_codec(proto::ProtoPart::CODEC_ZSTD);
  part.set_uncompressed_bytes(plain.size());
  part.set_payload(compressed);
  return part.SerializeAsString();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: part_fuzz_seeds DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary | std::ios::trunc) << bytes;
  };
  auto write_part = [&](const std::string& name, const internal::Columns& columns) {
    const internal::EncodedPart blob = internal::encode_part(kShardId, columns, 1);
    const auto n = static_cast<uint32_t>(columns.size());
    write(name + "-blob", part_input(PartInput::kBlob, n, blob.bytes));
    proto::ProtoPart part;
    if (!part.ParseFromArray(blob.bytes.data(), static_cast<int>(blob.bytes.size()))) {
      std::fprintf(stderr, "part_fuzz_seeds: encode_part wrote no ProtoPart\n");
      std::exit(1);
    }
    write(name + "-columns", part_input(PartInput::kColumns, n, decompress(part.payload())));
  };

  write_part("empty", internal::Columns{});
  internal::Columns one;
  one.append("the only update", 42, 1);
  write_part("one", one);
  internal::Columns runs;
  for (uint64_t i = 0; i < 40; ++i) {
    runs.append("key-" + std::to_string(i / 4), 1000 + i % 7, i < 20 ? 1 : -3);
  }
  write_part("runs", runs);
  internal::Columns wide;
  wide.append("", 0, -1);
  wide.append("x", ~uint64_t{0} - 1, INT64_MAX);
  wide.append(std::string(300, 'y'), uint64_t{1} << 40, INT64_MIN);
  write_part("wide", wide);
  internal::Columns no_data;  // Every update's data empty: the part has no data at all.
  no_data.append("", 7, 1);
  no_data.append("", 8, -1);
  write_part("no-data", no_data);
  write("version-1-blob", part_input(PartInput::kBlob, 3, version_1_part()));
  return 0;
}
