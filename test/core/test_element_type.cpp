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

TEST_CASE("every ONNX 1.12 element type maps to a C++ type of the right size and back") {
  int visited = 0;
  for (int v = 1; v <= max_element_type; ++v) {
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
