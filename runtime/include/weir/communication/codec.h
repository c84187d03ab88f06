// Codec<D>: how records of type D become bytes and back (for capture files and, in a cluster,
// for data that crosses processes).
//
// Provided, every one validating what it decodes:
// - integers, floating point, char types, std::byte: their bytes (every pattern is a value);
// - bool: one byte, 0 or 1; an enum: its underlying value, checked against the range the enum
//   declares with weir::EnumRange (an enum without one has no codec: its valid values are
//   unknowable);
// - aggregates (structs with public fields and no constructors, such as Product times, up to 16
//   fields): field by field, so padding never crosses and each field is checked by its own codec;
//   copied as bytes when that is the same thing (no padding, only byte-like fields);
// - std::string, std::pair, std::tuple, std::array, std::vector, std::optional (a 0/1 tag),
//   std::variant (an index, checked), and compositions of these.
// Pointers and types that hold them (std::string_view, std::span, raw pointers, other classes
// with private members) have no codec: their bytes mean nothing in another process, and they are
// refused at compile time. Specialize Codec for your own types:
//
// clang-format off
//   template <>
//   struct weir::Codec<Point> {
//     static void encode(const Point& p, std::string& out) {
//       Codec<int64_t>::encode(p.x, out);
//       Codec<int64_t>::encode(p.y, out);
//     }
//     static bool decode(std::string_view& in, Point& p) {
//       return Codec<int64_t>::decode(in, p.x) && Codec<int64_t>::decode(in, p.y);
//     }
//   };
// clang-format on
//
// or, for a class whose every byte pattern is a valid value and that has no padding, declare
// `template <> struct weir::CodecAsBytes<Id> : std::true_type {};` to copy it as bytes.
//
// `decode` consumes bytes from the front of `in` and returns false on malformed input (never
// reads past its end). A type without a codec is a compile-time error that names the type.
//
// Thread safety: stateless.

#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "weir/progress/location.h"

namespace weir {

#define WEIR_CODEC_MISSING_                                                                    \
  "weir::Codec<D> is not specialized for this record type D: specialize weir::Codec<D> with "  \
  "encode/decode (see weir/communication/codec.h). Pointers and classes that hold them "       \
  "(std::string_view, std::span) cannot cross processes; an enum needs weir::EnumRange<D>; a " \
  "class with private members needs a codec or weir::CodecAsBytes<D>"

template <class D, class Enable = void>
struct Codec {
  // No codec: using one is a compile-time error that names D (kHasCodec<D> is false).
  using Missing = void;
  template <class X = D>
  static void encode(const X&, std::string&) {
    static_assert(kMissing<X>, WEIR_CODEC_MISSING_);
  }
  template <class X = D>
  static bool decode(std::string_view&, X&) {
    static_assert(kMissing<X>, WEIR_CODEC_MISSING_);
    return false;
  }

 private:
  template <class>
  static constexpr bool kMissing = false;
};

#undef WEIR_CODEC_MISSING_

// Whether D has a codec (built in or specialized).
template <class D>
inline constexpr bool kHasCodec = !requires {
  typename Codec<D>::Missing;
};

template <class D>
concept Encodable = kHasCodec<D> &&
    requires(const D& d, D& out, std::string& buf, std::string_view& in) {
  Codec<D>::encode(d, buf);
  { Codec<D>::decode(in, out) } -> std::same_as<bool>;
};

// Opt-in: D is copied as its bytes. REQUIRES: D is trivially copyable, has no padding, and every
// byte pattern of its size is a valid D (no bool, enum or pointer inside).
template <class D>
struct CodecAsBytes : std::false_type {};

// Declares the values of enum E that may cross processes: kFirst … kLast (inclusive).
//   template <> struct weir::EnumRange<Color> {
//     static constexpr Color kFirst = Color::kRed, kLast = Color::kBlue;
//   };
template <class E>
struct EnumRange;

namespace internal {

// Stands for any field in aggregate initialization (how fields are counted).
struct AnyField {
  template <class F>
  operator F&() const&&;  // NOLINT(google-explicit-constructor): declared, never defined.
};

template <class D, size_t... I>
constexpr bool is_initializable_from(std::index_sequence<I...>) {
  return requires { D{(static_cast<void>(I), AnyField{})...}; };
}

inline constexpr size_t kMaxAggregateFields = 16;

// The number of fields of aggregate D (0 if it has more than kMaxAggregateFields).
template <class D>
constexpr size_t field_count() {
  size_t n = 0;
  [&]<size_t... N>(std::index_sequence<N...>) {
    ((is_initializable_from<D>(std::make_index_sequence<N + 1>()) ? (n = N + 1) : 0), ...);
  }
  (std::make_index_sequence<kMaxAggregateFields + 1>());
  return n > kMaxAggregateFields ? 0 : n;
}

// The fields of aggregate D as a tuple of references.
template <size_t N, class D>
constexpr auto tie_fields(D& d) {
  // clang-format off
  if constexpr (N == 1) { auto& [a] = d; return std::tie(a); }
  else if constexpr (N == 2) { auto& [a, b] = d; return std::tie(a, b); }
  else if constexpr (N == 3) { auto& [a, b, c] = d; return std::tie(a, b, c); }
  else if constexpr (N == 4) { auto& [a, b, c, e] = d; return std::tie(a, b, c, e); }
  else if constexpr (N == 5) { auto& [a, b, c, e, f] = d; return std::tie(a, b, c, e, f); }
  else if constexpr (N == 6) { auto& [a, b, c, e, f, g] = d; return std::tie(a, b, c, e, f, g); }
  else if constexpr (N == 7) {
    auto& [a, b, c, e, f, g, h] = d; return std::tie(a, b, c, e, f, g, h);
  } else if constexpr (N == 8) {
    auto& [a, b, c, e, f, g, h, i] = d; return std::tie(a, b, c, e, f, g, h, i);
  } else if constexpr (N == 9) {
    auto& [a, b, c, e, f, g, h, i, j] = d; return std::tie(a, b, c, e, f, g, h, i, j);
  } else if constexpr (N == 10) {
    auto& [a, b, c, e, f, g, h, i, j, k] = d; return std::tie(a, b, c, e, f, g, h, i, j, k);
  } else if constexpr (N == 11) {
    auto& [a, b, c, e, f, g, h, i, j, k, l] = d;
    return std::tie(a, b, c, e, f, g, h, i, j, k, l);
  } else if constexpr (N == 12) {
    auto& [a, b, c, e, f, g, h, i, j, k, l, m] = d;
    return std::tie(a, b, c, e, f, g, h, i, j, k, l, m);
  } else if constexpr (N == 13) {
    auto& [a, b, c, e, f, g, h, i, j, k, l, m, o] = d;
    return std::tie(a, b, c, e, f, g, h, i, j, k, l, m, o);
  } else if constexpr (N == 14) {
    auto& [a, b, c, e, f, g, h, i, j, k, l, m, o, p] = d;
    return std::tie(a, b, c, e, f, g, h, i, j, k, l, m, o, p);
  } else if constexpr (N == 15) {
    auto& [a, b, c, e, f, g, h, i, j, k, l, m, o, p, q] = d;
    return std::tie(a, b, c, e, f, g, h, i, j, k, l, m, o, p, q);
  } else {
    static_assert(N == 16);
    auto& [a, b, c, e, f, g, h, i, j, k, l, m, o, p, q, r] = d;
    return std::tie(a, b, c, e, f, g, h, i, j, k, l, m, o, p, q, r);
  }
  // clang-format on
}

template <class Tuple>
struct AllHaveCodecs;
template <class... Fs>
struct AllHaveCodecs<std::tuple<Fs...>> {
  static constexpr bool kValue = (kHasCodec<std::remove_cvref_t<Fs>> && ...);
};

// An aggregate whose every field has a codec (a pointer field has none).
template <class D>
concept FieldwiseAggregate =
    std::is_class_v<D> && std::is_aggregate_v<D> && !std::is_polymorphic_v<D> &&
    (field_count<D>() > 0) &&
    AllHaveCodecs<decltype(tie_fields<field_count<D>()>(std::declval<D&>()))>::kValue;

template <class T>
struct IsStdArray : std::false_type {};
template <class T, size_t N>
struct IsStdArray<std::array<T, N>> : std::true_type {};

template <class T>
struct IsStdPair : std::false_type {};
template <class A, class B>
struct IsStdPair<std::pair<A, B>> : std::true_type {};

template <class D>
constexpr bool is_bytewise();

template <class... Fs>
constexpr bool all_bytewise_packed(size_t size) {
  return (is_bytewise<std::remove_cvref_t<Fs>>() && ...) &&
         (sizeof(std::remove_cvref_t<Fs>) + ... + 0) == size;
}
template <class D, class Tuple>
struct FieldsBytewise;
template <class D, class... Fs>
struct FieldsBytewise<D, std::tuple<Fs...>> {
  static constexpr bool kValue = all_bytewise_packed<Fs...>(sizeof(D));
};

// True if D's encoding is exactly its bytes (so vectors of D are copied in one go): byte-like
// scalars, and arrays, pairs, tuples and aggregates of them without padding.
template <class D>
constexpr bool is_bytewise() {
  if constexpr (std::is_const_v<D> || std::is_volatile_v<D> || std::is_reference_v<D>) {
    return false;
  } else if constexpr ((std::is_arithmetic_v<D> && !std::is_same_v<D, bool>) ||
                       std::is_same_v<D, std::byte>) {
    return true;
  } else if constexpr (CodecAsBytes<D>::value) {
    return true;
  } else if constexpr (IsStdArray<D>::value) {
    return is_bytewise<typename D::value_type>();
  } else if constexpr (IsStdPair<D>::value) {
    return all_bytewise_packed<typename D::first_type, typename D::second_type>(sizeof(D));
  } else if constexpr (FieldwiseAggregate<D>) {
    using Fields = decltype(tie_fields<field_count<D>()>(std::declval<D&>()));
    return FieldsBytewise<D, Fields>::kValue;
  } else {
    return false;
  }
}

template <class D>
inline constexpr bool kBytewise = is_bytewise<D>();

}  // namespace internal

// Byte-like scalars and opted-in classes: their bytes.
template <class D>
struct Codec<D, std::enable_if_t<((std::is_arithmetic_v<D> && !std::is_same_v<D, bool>) ||
                                  std::is_same_v<D, std::byte> || CodecAsBytes<D>::value)>> {
  static_assert(std::is_trivially_copyable_v<D>,
                "weir::CodecAsBytes<D> needs a trivially "
                "copyable D");
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

template <>
struct Codec<bool> {
  static void encode(bool value, std::string& out) { out.push_back(value ? 1 : 0); }
  static bool decode(std::string_view& in, bool& value) {
    if (in.empty() || (in.front() != 0 && in.front() != 1)) return false;
    value = in.front() == 1;
    in.remove_prefix(1);
    return true;
  }
};

// Enums with a declared range: the underlying value, checked.
template <class E>
requires(std::is_enum_v<E> && !std::is_same_v<E, std::byte> && !CodecAsBytes<E>::value && requires {
  EnumRange<E>::kFirst;
  EnumRange<E>::kLast;
}) struct Codec<E> {
  using U = std::underlying_type_t<E>;
  static void encode(E value, std::string& out) { Codec<U>::encode(static_cast<U>(value), out); }
  static bool decode(std::string_view& in, E& value) {
    U u{};
    if (!Codec<U>::decode(in, u)) return false;
    if (u < static_cast<U>(EnumRange<E>::kFirst) || u > static_cast<U>(EnumRange<E>::kLast)) {
      return false;
    }
    value = static_cast<E>(u);
    return true;
  }
};

// Aggregates: field by field (no padding on the wire), or their bytes when that is the same.
template <internal::FieldwiseAggregate D>
requires(!CodecAsBytes<D>::value && !internal::IsStdArray<D>::value) struct Codec<D> {
  static void encode(const D& value, std::string& out) {
    if constexpr (internal::kBytewise<D>) {
      out.append(reinterpret_cast<const char*>(&value), sizeof(D));
    } else {
      std::apply(
          [&](const auto&... fields) {
            (Codec<std::remove_cvref_t<decltype(fields)>>::encode(fields, out), ...);
          },
          internal::tie_fields<internal::field_count<D>()>(value));
    }
  }
  static bool decode(std::string_view& in, D& value) {
    if constexpr (internal::kBytewise<D>) {
      if (in.size() < sizeof(D)) return false;
      std::memcpy(static_cast<void*>(&value), in.data(), sizeof(D));
      in.remove_prefix(sizeof(D));
      return true;
    } else {
      return std::apply(
          [&](auto&... fields) {
            return (Codec<std::remove_cvref_t<decltype(fields)>>::decode(in, fields) && ...);
          },
          internal::tie_fields<internal::field_count<D>()>(value));
    }
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
struct Codec<std::pair<A, B>> {
  static void encode(const std::pair<A, B>& value, std::string& out) {
    Codec<A>::encode(value.first, out);
    Codec<B>::encode(value.second, out);
  }
  static bool decode(std::string_view& in, std::pair<A, B>& value) {
    return Codec<A>::decode(in, value.first) && Codec<B>::decode(in, value.second);
  }
};

template <class... Ts>
struct Codec<std::tuple<Ts...>> {
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
    if constexpr (internal::kBytewise<D>) {
      out.append(reinterpret_cast<const char*>(value.data()), value.size() * sizeof(D));
    } else {
      for (const D& d : value) Codec<D>::encode(d, out);
    }
  }
  static bool decode(std::string_view& in, std::vector<D>& value) {
    uint64_t n = 0;
    if (!internal::decode_length(in, n, internal::kBytewise<D> ? sizeof(D) : 1)) {
      return false;
    }
    value.clear();
    if constexpr (internal::kBytewise<D>) {
      value.resize(n);
      // A pair of bytewise scalars is copyable by bytes though std::pair's assignment is not
      // trivial (GCC's -Wclass-memaccess): the destination goes through void*.
      if (n != 0) std::memcpy(static_cast<void*>(value.data()), in.data(), n * sizeof(D));
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
struct Codec<std::optional<D>> {
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

template <class D, size_t N>
struct Codec<std::array<D, N>> {
  static void encode(const std::array<D, N>& value, std::string& out) {
    if constexpr (internal::kBytewise<D>) {
      out.append(reinterpret_cast<const char*>(value.data()), N * sizeof(D));
    } else {
      for (const D& d : value) Codec<D>::encode(d, out);
    }
  }
  static bool decode(std::string_view& in, std::array<D, N>& value) {
    if constexpr (internal::kBytewise<D>) {
      if (in.size() < N * sizeof(D)) return false;
      if constexpr (N != 0) {
        std::memcpy(static_cast<void*>(value.data()), in.data(), N * sizeof(D));
      }
      in.remove_prefix(N * sizeof(D));
      return true;
    } else {
      for (D& d : value) {
        if (!Codec<D>::decode(in, d)) return false;
      }
      return true;
    }
  }
};

// A variant: its index (one byte for up to 256 alternatives, else four), then the alternative.
template <class... Ts>
struct Codec<std::variant<Ts...>> {
  using Index = std::conditional_t<(sizeof...(Ts) <= 256), uint8_t, uint32_t>;
  static void encode(const std::variant<Ts...>& value, std::string& out) {
    Codec<Index>::encode(static_cast<Index>(value.index()), out);
    std::visit([&](const auto& v) { Codec<std::remove_cvref_t<decltype(v)>>::encode(v, out); },
               value);
  }
  static bool decode(std::string_view& in, std::variant<Ts...>& value) {
    Index index = 0;
    if (!Codec<Index>::decode(in, index) || index >= sizeof...(Ts)) return false;
    return decode_at(in, value, index, std::index_sequence_for<Ts...>());
  }

 private:
  template <size_t... I>
  static bool decode_at(std::string_view& in, std::variant<Ts...>& value, size_t index,
                        std::index_sequence<I...>) {
    bool ok = false;
    (void)((I == index ? (ok = decode_one<I>(in, value), true) : false) || ...);
    return ok;
  }
  template <size_t I>
  static bool decode_one(std::string_view& in, std::variant<Ts...>& value) {
    std::variant_alternative_t<I, std::variant<Ts...>> v{};
    if (!Codec<decltype(v)>::decode(in, v)) return false;
    value.template emplace<I>(std::move(v));
    return true;
  }
};

}  // namespace weir
