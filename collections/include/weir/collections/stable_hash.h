// StableHash<D>: a 64-bit hash of a value that is the same in every process, build and run.
//
// The collection operators send each key to worker `StableHash<K>{}(key) % peers`, so every
// process of a cluster must hash a key the same way; std::hash promises that only within one
// program run (and differs between standard libraries). Provided: integers, bool, char types and
// enums (by value: `int32_t{-1}` and `int64_t{-1}` hash alike), floating point (by value; -0.0 as
// 0.0), std::string and std::string_view (FNV-1a over the bytes), std::pair and std::tuple (the
// elements' hashes combined), and any other type with a weir::Codec (FNV-1a over its encoding:
// as stable as the codec's bytes). Specialize it for a type of your own when equal values can
// encode differently, or for speed:
//
//   template <>
//   struct weir::collections::StableHash<Point> {
//     uint64_t operator()(const Point& p) const { return hash_combine(p.x, p.y); }
//   };
//
// REQUIRES: equal values hash alike (a == b implies equal hashes).
//
// Thread safety: stateless (the codec fallback encodes into a thread_local buffer).

#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "weir/communication/codec.h"

namespace weir::collections {

namespace internal {

// splitmix64's finalizer: every input bit reaches every output bit, so `hash % peers` and
// `hash & (peers - 1)` spread consecutive keys evenly.
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr uint64_t hash_bytes(std::string_view bytes) {
  uint64_t hash = 1469598103934665603ULL;  // FNV-1a.
  for (char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  return mix64(hash);
}

constexpr uint64_t combine(uint64_t seed, uint64_t hash) {
  return mix64(seed ^ (hash + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)));
}

}  // namespace internal

template <class D, class Enable = void>
struct StableHash {
  uint64_t operator()(const D& value) const {
    thread_local std::string bytes;
    bytes.clear();
    Codec<D>::encode(value, bytes);
    return internal::hash_bytes(bytes);
  }
};

template <class D>
struct StableHash<D, std::enable_if_t<std::is_integral_v<D> || std::is_enum_v<D>>> {
  uint64_t operator()(const D& value) const {
    if constexpr (std::is_enum_v<D>) {
      return StableHash<std::underlying_type_t<D>>{}(static_cast<std::underlying_type_t<D>>(value));
    } else if constexpr (std::is_same_v<D, char>) {
      return internal::mix64(static_cast<unsigned char>(value));  // char's sign is the platform's
    } else if constexpr (std::is_signed_v<D>) {
      return internal::mix64(static_cast<uint64_t>(static_cast<int64_t>(value)));
    } else {
      return internal::mix64(static_cast<uint64_t>(value));
    }
  }
};

template <class D>
struct StableHash<D, std::enable_if_t<std::is_floating_point_v<D>>> {
  uint64_t operator()(const D& value) const {
    const double x = value == 0 ? 0.0 : static_cast<double>(value);  // -0.0 == 0.0
    uint64_t bits = 0;
    std::memcpy(&bits, &x, sizeof(bits));
    return internal::mix64(bits);
  }
};

template <>
struct StableHash<std::string_view> {
  uint64_t operator()(std::string_view value) const { return internal::hash_bytes(value); }
};

template <>
struct StableHash<std::string> {
  uint64_t operator()(const std::string& value) const { return internal::hash_bytes(value); }
};

template <class A, class B>
struct StableHash<std::pair<A, B>> {
  uint64_t operator()(const std::pair<A, B>& value) const {
    return internal::combine(StableHash<A>{}(value.first), StableHash<B>{}(value.second));
  }
};

// The hashes of `values` combined, in order: `hash_combine(p.x, p.y)`.
template <class... Ts>
uint64_t hash_combine(const Ts&... values) {
  uint64_t hash = internal::mix64(sizeof...(Ts));
  ((hash = internal::combine(hash, StableHash<Ts>{}(values))), ...);
  return hash;
}

template <class... Ts>
struct StableHash<std::tuple<Ts...>> {
  uint64_t operator()(const std::tuple<Ts...>& value) const {
    return std::apply([](const auto&... elements) { return hash_combine(elements...); }, value);
  }
};

}  // namespace weir::collections
