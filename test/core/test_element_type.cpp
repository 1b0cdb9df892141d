#include <epstack/core/element_type.hpp>
#include <epstack/core/float16.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

using namespace epstack;

static_assert(element_type_of_v<float> == element_type::float32);
static_assert(element_type_of_v<std::int64_t> == element_type::int64);
static_assert(element_type_of_v<bool> == element_type::boolean);
static_assert(element_type_of_v<std::string> == element_type::string);
static_assert(element_type_of_v<float16> == element_type::float16);
static_assert(element_type_of_v<bfloat16> == element_type::bfloat16);
static_assert(element_type_of_v<std::complex<double>> == element_type::complex128);
static_assert(element_type_of_v<char> == element_type::undefined);
static_assert(std::is_same_v<cpp_type_t<element_type::uint16>, std::uint16_t>);
static_assert(element_size(element_type::float64) == 8);
static_assert(element_size(element_type::complex64) == 8);
static_assert(element_size(element_type::float16) == 2);
static_assert(element_size(element_type::undefined) == 0);

TEST_CASE("every element type of ONNX 1.12 maps to a C++ type of the right size and back") {
  int visited = 0;
  for (int v = 1; v <= max_computed_element_type; ++v) {
    const auto e = static_cast<element_type>(v);
    CHECK(is_valid(e));
    const bool ok = visit_element_type(e, [&](auto c) {
      using T = cpp_type_t<decltype(c)::value>;
      CHECK(decltype(c)::value == e);
      CHECK(element_type_of_v<T> == e);
      CHECK(element_size(e) == sizeof(T));
      ++visited;
    });
    CHECK(ok);
  }
  CHECK(visited == 16);
  CHECK_FALSE(visit_element_type(element_type::undefined, [](auto) {}));
  CHECK_FALSE(visit_element_type(static_cast<element_type>(17), [](auto) {}));
  CHECK(to_string(element_type::float32) == "float");
  CHECK(to_string(element_type::bfloat16) == "bfloat16");
}

TEST_CASE("the storage types of ONNX 1.14 to 1.22: sizes, packing and names, and no C++ type to visit") {
  struct expect {
    element_type e;
    const char* name;
    std::size_t bits;
  };
  const expect all[] = {{element_type::float8e4m3fn, "float8e4m3fn", 8}, {element_type::float8e4m3fnuz, "float8e4m3fnuz", 8},
                        {element_type::float8e5m2, "float8e5m2", 8},     {element_type::float8e5m2fnuz, "float8e5m2fnuz", 8},
                        {element_type::uint4, "uint4", 4},               {element_type::int4, "int4", 4},
                        {element_type::float4e2m1, "float4e2m1", 4},     {element_type::float8e8m0, "float8e8m0", 8},
                        {element_type::uint2, "uint2", 2},               {element_type::int2, "int2", 2}};
  for (const auto& x : all) {
    INFO(x.name);
    CHECK(is_valid(x.e));
    CHECK(to_string(x.e) == x.name);
    CHECK(element_bits(x.e) == x.bits);
    CHECK(is_packed(x.e) == (x.bits < 8));
    CHECK(is_float8(x.e) == (x.bits == 8));
    CHECK(element_size(x.e) == (x.bits == 8 ? 1u : 0u));
    CHECK_FALSE(visit_element_type(x.e, [](auto) {}));
  }
  // Packed storage rounds up to whole bytes: 5 int4 -> 3 bytes, 5 int2 -> 2 bytes, 0 -> 0.
  CHECK(storage_bytes(element_type::int4, 5) == 3);
  CHECK(storage_bytes(element_type::uint4, 4) == 2);
  CHECK(storage_bytes(element_type::int2, 5) == 2);
  CHECK(storage_bytes(element_type::uint2, 8) == 2);
  CHECK(storage_bytes(element_type::float4e2m1, 0) == 0);
  CHECK(storage_bytes(element_type::float8e5m2, 5) == 5);
  CHECK(storage_bytes(element_type::float32, 5) == 20);
  CHECK(element_bits(element_type::float64) == 64);
  CHECK_FALSE(is_valid(static_cast<element_type>(27)));
  CHECK(to_string(static_cast<element_type>(27)) == "invalid");
}

TEST_CASE("float16 converts with round to nearest even and keeps infinities and NaN") {
  CHECK(float16(1.0f).bits == 0x3c00);
  CHECK(float16(-2.0f).bits == 0xc000);
  CHECK(float16(65504.0f).bits == 0x7bff);
  CHECK(float16(1e6f).bits == 0x7c00);
  CHECK(float16(std::numeric_limits<float>::infinity()).bits == 0x7c00);
  CHECK(std::isnan(static_cast<float>(float16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(float16(5.9604645e-8f).bits == 0x0001);  // smallest subnormal
  CHECK(static_cast<float>(float16::from_bits(0x0001)) == doctest::Approx(5.9604645e-8f));
  CHECK(float16(1.0f + 1.0f / 2048).bits == 0x3c00);  // tie to even (down)
  CHECK(float16(1.0f + 3.0f / 2048).bits == 0x3c02);  // tie to even (up)
  for (std::uint32_t b = 0; b < 0x7c00; b += 7) {  // every finite positive half survives a round trip
    const auto h = float16::from_bits(static_cast<std::uint16_t>(b));
    CHECK(float16(static_cast<float>(h)).bits == b);
  }
}

TEST_CASE("bfloat16 is the upper half of a float rounded to nearest even") {
  CHECK(bfloat16(1.0f).bits == 0x3f80);
  CHECK(static_cast<float>(bfloat16::from_bits(0x4049)) == doctest::Approx(3.140625f));
  CHECK(bfloat16(std::bit_cast<float>(0x3f808000u)).bits == 0x3f80);  // tie, even stays
  CHECK(bfloat16(std::bit_cast<float>(0x3f818000u)).bits == 0x3f82);  // tie, odd rounds up
  CHECK(std::isnan(static_cast<float>(bfloat16(std::numeric_limits<float>::quiet_NaN()))));
}
