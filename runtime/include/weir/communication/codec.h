// Codec<D>: how records of type D become bytes and back (for capture files and, in a cluster,
// for data that crosses processes).
//
// Provided: trivially copyable types (memcpy), std::string, std::pair, std::tuple, std::vector,
// std::optional, and compositions of these. Specialize Codec for your own types:
//
//   template <> struct weir::Codec<Point> {
//     static void encode(const Point& p, std::string& out) { Codec<int64_t>::encode(p.x, out); ...
//     } static bool decode(std::string_view& in, Point& p) { return Codec<int64_t>::decode(in, p.x)
//     && ...; }
//   };
//
// `decode` consumes bytes from the front of `in` and returns false on malformed input (never
// reads past its end). A type without a codec is a compile-time error that names the type.
//
// Thread safety: stateless.

#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "weir/progress/location.h"

namespace weir {

template <class D, class Enable = void>
struct Codec {
  template <class>
  static constexpr bool kMissing = false;
  static_assert(kMissing<D>,
                "weir::Codec<D> is not specialized for this record type D: specialize "
                "weir::Codec<D> with encode/decode (see weir/communication/codec.h)");
};

template <class D>
concept Encodable = requires(const D& d, D& out, std::string& buf, std::string_view& in) {
  Codec<D>::encode(d, buf);
  { Codec<D>::decode(in, out) } -> std::same_as<bool>;
};

// Trivially copyable types: their bytes.
template <class D>
struct Codec<D, std::enable_if_t<std::is_trivially_copyable_v<D> && !std::is_pointer_v<D>>> {
  static void encode(const D& value, std::string& out) {
    out.append(reinterpret_cast<const char*>(&value), sizeof(D));
  }
  static bool decode(std::string_view& in, D& value) {
    if (in.size() < sizeof(D)) return false;
    std::memcpy(&value, in.data(), sizeof(D));
    in.remove_prefix(sizeof(D));
    return true;
  }
};

namespace internal {
inline void encode_length(uint64_t n, std::string& out) { Codec<uint64_t>::encode(n, out); }
inline bool decode_length(std::string_view& in, uint64_t& n, size_t min_element_bytes) {
  if (!Codec<uint64_t>::decode(in, n)) return false;
  // A length that cannot fit in what is left is malformed (guards against huge allocations).
  return min_element_bytes == 0 || n <= in.size() / min_element_bytes;
}
}  // namespace internal

// Locations field by field (their `is_source` flag must decode to a valid bool).
template <>
struct Codec<Location> {
  static void encode(const Location& l, std::string& out) {
    Codec<uint32_t>::encode(l.node, out);
    Codec<uint32_t>::encode(l.port, out);
    out.push_back(l.is_source ? 1 : 0);
  }
  static bool decode(std::string_view& in, Location& l) {
    if (!Codec<uint32_t>::decode(in, l.node) || !Codec<uint32_t>::decode(in, l.port) ||
        in.empty()) {
      return false;
    }
    const char kind = in.front();
    in.remove_prefix(1);
    if (kind != 0 && kind != 1) return false;
    l.is_source = kind == 1;
    return true;
  }
};

template <>
struct Codec<std::string> {
  static void encode(const std::string& value, std::string& out) {
    internal::encode_length(value.size(), out);
    out.append(value);
  }
  static bool decode(std::string_view& in, std::string& value) {
    uint64_t n = 0;
    if (!internal::decode_length(in, n, 1)) return false;
    value.assign(in.data(), n);
    in.remove_prefix(n);
    return true;
  }
};

template <class A, class B>
struct Codec<std::pair<A, B>, std::enable_if_t<!std::is_trivially_copyable_v<std::pair<A, B>>>> {
  static void encode(const std::pair<A, B>& value, std::string& out) {
    Codec<A>::encode(value.first, out);
    Codec<B>::encode(value.second, out);
  }
  static bool decode(std::string_view& in, std::pair<A, B>& value) {
    return Codec<A>::decode(in, value.first) && Codec<B>::decode(in, value.second);
  }
};

template <class... Ts>
struct Codec<std::tuple<Ts...>,
             std::enable_if_t<!std::is_trivially_copyable_v<std::tuple<Ts...>>>> {
  static void encode(const std::tuple<Ts...>& value, std::string& out) {
    std::apply(
        [&](const auto&... parts) {
          (Codec<std::decay_t<decltype(parts)>>::encode(parts, out), ...);
        },
        value);
  }
  static bool decode(std::string_view& in, std::tuple<Ts...>& value) {
    return std::apply(
        [&](auto&... parts) {
          return (Codec<std::decay_t<decltype(parts)>>::decode(in, parts) && ...);
        },
        value);
  }
};

template <class D>
struct Codec<std::vector<D>> {
  static void encode(const std::vector<D>& value, std::string& out) {
    internal::encode_length(value.size(), out);
    if constexpr (std::is_trivially_copyable_v<D>) {
      out.append(reinterpret_cast<const char*>(value.data()), value.size() * sizeof(D));
    } else {
      for (const D& d : value) Codec<D>::encode(d, out);
    }
  }
  static bool decode(std::string_view& in, std::vector<D>& value) {
    uint64_t n = 0;
    if (!internal::decode_length(in, n, std::is_trivially_copyable_v<D> ? sizeof(D) : 1)) {
      return false;
    }
    value.clear();
    if constexpr (std::is_trivially_copyable_v<D>) {
      value.resize(n);
      if (n != 0) std::memcpy(value.data(), in.data(), n * sizeof(D));
      in.remove_prefix(n * sizeof(D));
    } else {
      // Each element takes at least a byte, but may be far larger in memory than on the wire:
      // reserve no more than a bounded start, so a hostile count cannot demand gigabytes.
      value.reserve(std::min<uint64_t>(n, 4096));
      for (uint64_t i = 0; i < n; ++i) {
        D d{};
        if (!Codec<D>::decode(in, d)) return false;
        value.push_back(std::move(d));
      }
    }
    return true;
  }
};

template <class D>
struct Codec<std::optional<D>, std::enable_if_t<!std::is_trivially_copyable_v<std::optional<D>>>> {
  static void encode(const std::optional<D>& value, std::string& out) {
    out.push_back(value ? 1 : 0);
    if (value) Codec<D>::encode(*value, out);
  }
  static bool decode(std::string_view& in, std::optional<D>& value) {
    if (in.empty()) return false;
    const char tag = in.front();
    in.remove_prefix(1);
    if (tag == 0) {
      value.reset();
      return true;
    }
    if (tag != 1) return false;
    D d{};
    if (!Codec<D>::decode(in, d)) return false;
    value = std::move(d);
    return true;
  }
};

}  // namespace weir
