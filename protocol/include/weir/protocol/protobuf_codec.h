// weir::Codec for protobuf messages: records of any type derived from
// google::protobuf::MessageLite cross processes as their serialized bytes, length-prefixed.
//
//   #include "weir/protocol/protobuf_codec.h"
//   stream | weir::exchange([](const my::Order& o) { return o.customer_id(); });  // my::Order
//                                                                                // is a message
//
// Decoding fails (the runtime then closes the link that carried it) when the bytes are not a
// valid message of that type. Include this header wherever such records are exchanged, in every
// translation unit that does so (it is a specialization of weir::Codec).
//
// Thread safety: stateless.

#pragma once

#include <climits>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include <google/protobuf/message_lite.h>

#include "weir/communication/codec.h"

namespace weir {

template <class D>
struct Codec<D, std::enable_if_t<std::is_base_of_v<google::protobuf::MessageLite, D>>> {
  static void encode(const D& message, std::string& out) {
    const size_t size = message.ByteSizeLong();
    internal::encode_length(size, out);
    const size_t at = out.size();
    out.resize(at + size);
    message.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out.data() + at));
  }
  static bool decode(std::string_view& in, D& message) {
    uint64_t size = 0;
    if (!internal::decode_length(in, size, 1) || size > static_cast<uint64_t>(INT_MAX)) {
      return false;
    }
    if (!message.ParseFromArray(in.data(), static_cast<int>(size))) return false;
    in.remove_prefix(size);
    return true;
  }
};

}  // namespace weir
