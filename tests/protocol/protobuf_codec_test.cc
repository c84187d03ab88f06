// weir::Codec for protobuf messages (weir/protocol/protobuf_codec.h), with a message of the link
// protocol as the record type.

#include "weir/protocol/protobuf_codec.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "weir/protocol/v1/link.pb.h"

namespace weir {
namespace {

using protocol::v1::Hello;

Hello message(uint32_t process, std::string id) {
  Hello h;
  h.set_process(process);
  h.set_cluster_id(std::move(id));
  h.set_incarnation(1ULL << 50);
  return h;
}

bool same(const Hello& a, const Hello& b) { return a.SerializeAsString() == b.SerializeAsString(); }

TEST(ProtobufCodecTest, RoundTripsMessagesAndCompositions) {
  static_assert(Encodable<Hello>);
  const std::vector<Hello> messages = {message(1, "a"), Hello(),
                                       message(7, std::string(1000, 'z'))};
  std::string bytes;
  Codec<std::vector<Hello>>::encode(messages, bytes);
  const std::pair<Hello, std::optional<Hello>> pair{message(2, "b"), message(3, "c")};
  Codec<std::pair<Hello, std::optional<Hello>>>::encode(pair, bytes);

  std::string_view in = bytes;
  std::vector<Hello> decoded;
  ASSERT_TRUE(Codec<std::vector<Hello>>::decode(in, decoded));
  ASSERT_EQ(decoded.size(), messages.size());
  for (size_t i = 0; i < messages.size(); ++i) EXPECT_TRUE(same(decoded[i], messages[i])) << i;
  std::pair<Hello, std::optional<Hello>> decoded_pair;
  ASSERT_TRUE((Codec<std::pair<Hello, std::optional<Hello>>>::decode(in, decoded_pair)));
  EXPECT_TRUE(same(decoded_pair.first, pair.first));
  ASSERT_TRUE(decoded_pair.second.has_value());
  EXPECT_TRUE(same(*decoded_pair.second, *pair.second));
  EXPECT_TRUE(in.empty());
}

TEST(ProtobufCodecTest, RefusesMalformedAndTruncatedBytes) {
  std::string bytes;
  Codec<Hello>::encode(message(1, "cluster"), bytes);
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::string_view in(bytes.data(), n);
    Hello h;
    EXPECT_FALSE(Codec<Hello>::decode(in, h)) << "prefix of " << n << " bytes";
  }
  std::string garbage;
  Codec<uint64_t>::encode(3, garbage);
  garbage.append("\xff\xff\xff", 3);  // Not a message: a varint that never ends.
  std::string_view in = garbage;
  Hello h;
  EXPECT_FALSE(Codec<Hello>::decode(in, h));
  std::string huge;
  Codec<uint64_t>::encode(~uint64_t{0}, huge);  // A length longer than what follows.
  in = huge;
  EXPECT_FALSE(Codec<Hello>::decode(in, h));
}

}  // namespace
}  // namespace weir
