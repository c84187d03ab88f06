// The built-in codecs validate what they decode and send no padding (issue 14, item 7): a bool
// byte 7, an optional tag 5, a variant index 9, an enum value outside its declared range and a
// struct holding a bad bool are refused; pointer-like types have no codec at all; a struct with
// padding is encoded field by field, so whatever its padding bytes hold never crosses.

#include "weir/communication/codec.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "weir/progress/timestamp.h"

namespace weir_codec_test {

enum class Color : uint8_t { kRed, kGreen, kBlue };
enum class Opaque : uint32_t { kA, kB };  // No EnumRange: no codec.

struct Padded {  // 7 bytes of padding after `tag`.
  uint8_t tag = 0;
  uint64_t value = 0;
};
struct WithBool {
  uint32_t id = 0;
  bool on = false;
};
struct WithColor {
  Color color = Color::kRed;
  int32_t weight = 0;
};
struct Packed {  // Bytewise: copied in one go.
  uint64_t a = 0;
  uint32_t b = 0;
  uint32_t c = 0;
};
struct Nested {
  Padded padded;
  std::string name;
  std::optional<int32_t> maybe;
};
struct HasPointer {
  const char* text = nullptr;
};

}  // namespace weir_codec_test

template <>
struct weir::EnumRange<weir_codec_test::Color> {
  static constexpr auto kFirst = weir_codec_test::Color::kRed;
  static constexpr auto kLast = weir_codec_test::Color::kBlue;
};

namespace weir {
namespace {

using namespace weir_codec_test;  // NOLINT(google-build-using-namespace): test types.

template <class D>
bool decodes(std::string bytes, D& out) {
  std::string_view in(bytes);
  return Codec<D>::decode(in, out) && in.empty();
}
template <class D>
std::string encoded(const D& value) {
  std::string out;
  Codec<D>::encode(value, out);
  return out;
}

// Pointers and what holds them have no codec (on main: memcpy, a string_view at 0x4141... decoded).
static_assert(!kHasCodec<std::string_view>);
static_assert(!kHasCodec<std::span<const int>>);
static_assert(!kHasCodec<const char*>);
static_assert(!kHasCodec<HasPointer>);
static_assert(!kHasCodec<Opaque>);
static_assert(kHasCodec<Padded> && kHasCodec<Nested> && kHasCodec<Product<uint64_t, uint32_t>>);
// Copied in one go only where the bytes are the encoding.
static_assert(internal::kBytewise<uint64_t> && internal::kBytewise<Packed> &&
              internal::kBytewise<Product<uint64_t, uint64_t>> &&
              internal::kBytewise<std::pair<uint64_t, int64_t>>);
static_assert(!internal::kBytewise<Padded> && !internal::kBytewise<bool> &&
              !internal::kBytewise<WithBool> && !internal::kBytewise<Color>);

TEST(CodecValidationTest, BoolIsZeroOrOne) {
  bool b = false;
  EXPECT_TRUE(decodes(std::string(1, '\1'), b));
  EXPECT_TRUE(b);
  EXPECT_FALSE(decodes(std::string(1, '\7'), b));
  WithBool w;
  std::string bytes = encoded(WithBool{7, true});
  ASSERT_TRUE(decodes(bytes, w));
  EXPECT_EQ(w.id, 7u);
  EXPECT_TRUE(w.on);
  bytes.back() = 7;
  EXPECT_FALSE(decodes(bytes, w));
}

TEST(CodecValidationTest, OptionalTagIsZeroOrOne) {
  std::optional<int32_t> o;
  std::string bytes = encoded(std::optional<int32_t>(42));
  ASSERT_TRUE(decodes(bytes, o));
  EXPECT_EQ(o, 42);
  bytes[0] = 5;
  EXPECT_FALSE(decodes(bytes, o));
  EXPECT_TRUE(decodes(encoded(std::optional<int32_t>()), o));
  EXPECT_FALSE(o.has_value());
}

TEST(CodecValidationTest, VariantIndexIsInRange) {
  using V = std::variant<int32_t, double, std::string>;
  V v;
  ASSERT_TRUE(decodes(encoded(V(std::string("x"))), v));
  EXPECT_EQ(std::get<std::string>(v), "x");
  ASSERT_TRUE(decodes(encoded(V(2.5)), v));
  EXPECT_EQ(std::get<double>(v), 2.5);
  std::string bytes = encoded(V(int32_t{3}));
  bytes[0] = 9;
  EXPECT_FALSE(decodes(bytes, v));
}

TEST(CodecValidationTest, EnumIsInItsDeclaredRange) {
  Color c = Color::kRed;
  ASSERT_TRUE(decodes(encoded(Color::kBlue), c));
  EXPECT_EQ(c, Color::kBlue);
  EXPECT_FALSE(decodes(std::string(1, '\3'), c));
  WithColor w;
  std::string bytes = encoded(WithColor{Color::kGreen, -4});
  ASSERT_TRUE(decodes(bytes, w));
  EXPECT_EQ(w.color, Color::kGreen);
  EXPECT_EQ(w.weight, -4);
  bytes[0] = 77;
  EXPECT_FALSE(decodes(bytes, w));
}

TEST(CodecValidationTest, PaddingNeverCrosses) {
  // Two values equal in every field, with different bytes in their padding.
  alignas(Padded) unsigned char a[sizeof(Padded)], b[sizeof(Padded)];
  std::memset(a, 0xAA, sizeof(a));
  std::memset(b, 0x55, sizeof(b));
  auto* pa = new (a) Padded;
  auto* pb = new (b) Padded;
  pa->tag = pb->tag = 3;
  pa->value = pb->value = 0x0102030405060708;
  const std::string ea = encoded(*pa), eb = encoded(*pb);
  EXPECT_EQ(ea.size(), sizeof(uint8_t) + sizeof(uint64_t));
  EXPECT_EQ(ea, eb);
  Padded out;
  ASSERT_TRUE(decodes(ea, out));
  EXPECT_EQ(out.tag, 3);
  EXPECT_EQ(out.value, 0x0102030405060708u);
  // And in vectors and nested structs.
  std::vector<Padded> many(3, *pa);
  EXPECT_EQ(encoded(many).size(), sizeof(uint64_t) + size_t{3} * 9);
  Nested n{*pa, "n", 5};
  Nested m;
  ASSERT_TRUE(decodes(encoded(n), m));
  EXPECT_EQ(m.name, "n");
  EXPECT_EQ(m.maybe, 5);
  EXPECT_EQ(m.padded.value, pa->value);
}

TEST(CodecValidationTest, BytewiseTypesRoundTripInOneCopy) {
  std::vector<Packed> v{{1, 2, 3}, {4, 5, 6}};
  std::vector<Packed> out;
  const std::string bytes = encoded(v);
  EXPECT_EQ(bytes.size(), sizeof(uint64_t) + 2 * sizeof(Packed));
  ASSERT_TRUE(decodes(bytes, out));
  EXPECT_EQ(out[1].c, 6u);
  std::array<std::pair<uint32_t, bool>, 2> arr{{{1, true}, {2, false}}}, arr_out{};
  std::string abytes = encoded(arr);
  EXPECT_EQ(abytes.size(), 2 * 5u);
  ASSERT_TRUE(decodes(abytes, arr_out));
  EXPECT_EQ(arr_out, arr);
  abytes[4] = 2;
  EXPECT_FALSE(decodes(abytes, arr_out));
  std::tuple<uint8_t, bool, std::string> t{1, true, "t"}, t_out;
  ASSERT_TRUE(decodes(encoded(t), t_out));
  EXPECT_EQ(t_out, t);
}

}  // namespace
}  // namespace weir
