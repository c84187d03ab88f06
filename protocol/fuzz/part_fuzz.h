// The input layout part_fuzz reads and part_fuzz_seeds writes (see part_fuzz.cc).

#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace weir::persist::fuzz {

// Byte 0: what the rest is. Bytes 1 to 4: the update count the part's reference claims (little
// endian), so that inputs get past the count check. Then the bytes.
enum class PartInput : uint8_t {
  kBlob = 0,     // A whole part blob, as read from a Blob store.
  kColumns = 1,  // A ProtoColumnarUpdates encoding, wrapped into a valid blob by finish_part.
};

inline constexpr std::string_view kShardId = "s00000000-0000-0000-0000-000000000000";
inline constexpr size_t kHeaderBytes = 5;

inline std::string part_input(PartInput kind, uint32_t num_updates, std::string_view bytes) {
  std::string out(1, static_cast<char>(kind));
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((num_updates >> (8 * i)) & 0xff));
  out.append(bytes);
  return out;
}

}  // namespace weir::persist::fuzz
