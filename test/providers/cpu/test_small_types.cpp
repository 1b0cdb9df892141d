// Tests of the storage-only element types of ONNX 1.14 to 1.22 (float8 e4m3fn/e4m3fnuz/e5m2/e5m2fnuz/e8m0,
// float4e2m1, int4, uint4, int2, uint2): the conversions of small_float.hpp, Cast and CastLike to and from them, and
// QuantizeLinear/DequantizeLinear with them and with blocked scales.
#include "tensor_support.hpp"

#include "../../../providers/cpu/src/small_float.hpp"

using namespace epstack;
using namespace epstack::test;
using namespace epstack::test::tensor_ops;
namespace sf = epstack::cpu::small_float;

namespace {

// A tensor of a one-byte type (float8, float8e8m0) from its codes.
tensor bytes_tensor(element_type e, const i64s& sizes, const std::vector<std::uint8_t>& codes) {
  tensor t(e, std::span<const std::int64_t>(sizes));
  REQUIRE(t.element_count() == codes.size());
  std::memcpy(t.mutable_data(), codes.data(), codes.size());
  return t;
}
std::vector<std::uint8_t> codes_of(const tensor& t) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(t.data());
  return std::vector<std::uint8_t>(p, p + t.byte_size());
}
// A tensor of a packed integer type from its values.
tensor packed_tensor(element_type e, const i64s& sizes, const std::vector<int>& values) {
  tensor t(e, std::span<const std::int64_t>(sizes));
  REQUIRE(t.element_count() == values.size());
  for (std::size_t i = 0; i < values.size(); ++i) sf::set_packed_int(e, t.mutable_data(), i, values[i]);
  return t;
}
// A float4e2m1 tensor from its codes.
tensor float4_tensor(const i64s& sizes, const std::vector<std::uint8_t>& codes) {
  tensor t(element_type::float4e2m1, std::span<const std::int64_t>(sizes));
  REQUIRE(t.element_count() == codes.size());
  for (std::size_t i = 0; i < codes.size(); ++i) sf::set_packed_code<4>(t.mutable_data(), i, codes[i]);
  return t;
}
std::vector<int> packed_values(const tensor& t) {
  std::vector<int> r(t.element_count());
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = sf::packed_int(t.type(), t.data(), i);
  return r;
}
std::vector<std::uint8_t> packed_codes(const tensor& t) {
  std::vector<std::uint8_t> r(t.element_count());
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = sf::packed_code(t.type(), t.data(), i);
  return r;
}
kernel_node cast_to(element_type e, int opset = 25) { return op("Cast", opset).set("to", static_cast<std::int64_t>(e)); }

constexpr float inf = std::numeric_limits<float>::infinity();
const float qnan = std::nanf("");

template <sf::f8 K>
void check_round_trip() {
  for (unsigned c = 0; c < 256; ++c) {
    const float v = sf::f8_table<K>[c];
    const auto back = sf::from_float<K>(v, /*saturate=*/false);
    CAPTURE(c);
    if (std::isnan(v)) CHECK(std::isnan(sf::f8_table<K>[back]));
    else CHECK(back == c);
    if (std::isfinite(v)) CHECK(sf::from_float<K>(v, true) == c);  // saturating maps infinities to the maximum
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// small_float.hpp

TEST_CASE("Every float8 bit pattern decodes and encodes back to itself") {
  check_round_trip<sf::f8::e4m3fn>();
  check_round_trip<sf::f8::e4m3fnuz>();
  check_round_trip<sf::f8::e5m2>();
  check_round_trip<sf::f8::e5m2fnuz>();
  for (unsigned c = 0; c < 255; ++c)
    for (auto m : {sf::e8m0_round::up, sf::e8m0_round::down, sf::e8m0_round::nearest})
      CHECK(sf::e8m0_from_float(sf::e8m0_table[c], m, false) == c);
  for (std::uint8_t c = 0; c < 16; ++c) CHECK(sf::float4_from_float(sf::float4_table[c]) == c);
  // The NaN codes.
  CHECK(std::isnan(sf::f8_table<sf::f8::e4m3fn>[0x7f]));
  CHECK(std::isnan(sf::f8_table<sf::f8::e4m3fn>[0xff]));
  CHECK(std::isnan(sf::f8_table<sf::f8::e4m3fnuz>[0x80]));
  CHECK(std::isnan(sf::f8_table<sf::f8::e5m2>[0x7d]));
  CHECK(sf::f8_table<sf::f8::e5m2>[0x7c] == inf);
  CHECK(sf::f8_table<sf::f8::e5m2>[0xfc] == -inf);
  CHECK(std::isnan(sf::e8m0_table[0xff]));
}

TEST_CASE("float8 conversions follow the ONNX tables: maxima, saturation, NaN, zero, subnormals") {
  using sf::f8;
  // Largest finite values.
  CHECK(sf::f8_table<f8::e4m3fn>[0x7e] == 448.0f);
  CHECK(sf::f8_table<f8::e4m3fnuz>[0x7f] == 240.0f);
  CHECK(sf::f8_table<f8::e5m2>[0x7b] == 57344.0f);
  CHECK(sf::f8_table<f8::e5m2fnuz>[0x7f] == 57344.0f);
  CHECK(sf::from_float<f8::e4m3fn>(448.0f) == 0x7e);
  // 1000 is out of e4m3fn's range: 448 when saturating, NaN otherwise (e5m2 has it: 1024).
  CHECK(sf::from_float<f8::e4m3fn>(1000.0f, true) == 0x7e);
  CHECK(sf::from_float<f8::e4m3fn>(1000.0f, false) == 0x7f);
  CHECK(sf::from_float<f8::e4m3fn>(-1000.0f, false) == 0xff);
  CHECK(sf::from_float<f8::e4m3fnuz>(1000.0f, false) == 0x80);
  CHECK(sf::from_float<f8::e4m3fnuz>(-1000.0f, true) == 0xff);
  CHECK(sf::from_float<f8::e5m2>(1000.0f) == 0x64);
  CHECK(sf::f8_table<f8::e5m2>[0x64] == 1024.0f);
  CHECK(sf::from_float<f8::e5m2>(1e6f, true) == 0x7b);
  CHECK(sf::from_float<f8::e5m2>(1e6f, false) == 0x7c);  // infinity
  CHECK(sf::from_float<f8::e5m2fnuz>(1e6f, false) == 0x80);
  // 464 is halfway between 448 and 480 (not a value): to even, 448; just above it overflows.
  CHECK(sf::from_float<f8::e4m3fn>(464.0f, false) == 0x7e);
  CHECK(sf::from_float<f8::e4m3fn>(465.0f, false) == 0x7f);
  // Infinities: saturate to the maximum (Cast-24 on); the fnuz types gave NaN before.
  CHECK(sf::from_float<f8::e4m3fn>(inf) == 0x7e);
  CHECK(sf::from_float<f8::e4m3fn>(-inf, false) == 0xff);
  CHECK(sf::from_float<f8::e4m3fnuz>(inf) == 0x7f);
  CHECK(sf::from_float<f8::e4m3fnuz>(inf, true, true) == 0x80);
  CHECK(sf::from_float<f8::e5m2>(-inf, false) == 0xfc);
  // NaN.
  CHECK(sf::from_float<f8::e4m3fn>(qnan) == 0x7f);
  CHECK(sf::from_float<f8::e5m2>(qnan) == 0x7e);
  CHECK(sf::from_float<f8::e4m3fnuz>(qnan) == 0x80);
  CHECK(sf::from_float<f8::e5m2fnuz>(-qnan) == 0x80);
  // Zero: the fnuz types have no -0.
  CHECK(sf::from_float<f8::e4m3fn>(-0.0f) == 0x80);
  CHECK(sf::from_float<f8::e5m2>(-0.0f) == 0x80);
  CHECK(sf::from_float<f8::e4m3fnuz>(-0.0f) == 0x00);
  CHECK(sf::from_float<f8::e5m2fnuz>(-1e-30f) == 0x00);
  // Subnormals and rounding to nearest even: e4m3fn's smallest value is 2^-9.
  CHECK(sf::f8_table<f8::e4m3fn>[0x01] == std::ldexp(1.0f, -9));
  CHECK(sf::from_float<f8::e4m3fn>(std::ldexp(1.0f, -10)) == 0x00);         // tie: to even (0)
  CHECK(sf::from_float<f8::e4m3fn>(std::ldexp(1.5f, -10)) == 0x01);
  CHECK(sf::from_float<f8::e4m3fn>(std::ldexp(3.0f, -10)) == 0x02);         // tie between 1 and 2: 2
  CHECK(sf::from_float<f8::e4m3fn>(0.4789254665374756f) == 0x2f);
  CHECK(sf::from_float<f8::e4m3fn>(0.4996848702430725f) == 0x30);           // the mantissa carries into the exponent
  CHECK(sf::from_float<f8::e4m3fn>(17.0f) == 0x58);                         // 17 between 16 and 18: 16 (even)
  CHECK(sf::from_float<f8::e4m3fn>(19.0f) == 0x5a);                         // 19 between 18 and 20: 20 (even)
  CHECK(sf::f8_table<f8::e5m2fnuz>[0x01] == std::ldexp(1.0f, -17));
}

TEST_CASE("float8e8m0 rounds up, down or to nearest, and saturates") {
  using sf::e8m0_round;
  CHECK(sf::e8m0_table[127] == 1.0f);
  CHECK(sf::e8m0_table[0] == std::ldexp(1.0f, -127));
  CHECK(sf::e8m0_table[254] == std::ldexp(1.0f, 127));
  CHECK(sf::e8m0_from_float(3.0f, e8m0_round::up) == 129);        // 4
  CHECK(sf::e8m0_from_float(3.0f, e8m0_round::down) == 128);      // 2
  CHECK(sf::e8m0_from_float(3.0f, e8m0_round::nearest) == 129);   // a tie: up
  CHECK(sf::e8m0_from_float(2.9f, e8m0_round::nearest) == 128);
  CHECK(sf::e8m0_from_float(0.124f, e8m0_round::up) == 124);      // 0.125 (the ONNX test)
  CHECK(sf::e8m0_from_float(0.0f, e8m0_round::up, true) == 0x00);
  CHECK(sf::e8m0_from_float(0.0f, e8m0_round::nearest, false) == 0xff);
  CHECK(sf::e8m0_from_float(inf, e8m0_round::up, true) == 0xfe);
  CHECK(sf::e8m0_from_float(inf, e8m0_round::nearest, false) == 0xff);
  CHECK(sf::e8m0_from_float(3e38f, e8m0_round::up, true) == 0xfe);
  CHECK(sf::e8m0_from_float(3e38f, e8m0_round::up, false) == 0xff);
  CHECK(sf::e8m0_from_float(qnan) == 0xff);
}

TEST_CASE("float4e2m1 rounds to nearest even and saturates - packed elements sit low nibble first") {
  const std::vector<float> x = {0.48f, 0.25f, 1.05f, -3.5f, -8, 9, 1e6f, 1e-7f, qnan, inf, -inf, -4, 0.01f, -0.0f, 0.75f};
  const std::vector<std::uint8_t> want = {0x1, 0x0, 0x2, 0xe, 0xf, 0x7, 0x7, 0x0, 0x8, 0x7, 0xf, 0xe, 0x0, 0x8, 0x2};
  for (std::size_t i = 0; i < x.size(); ++i) CHECK_MESSAGE(sf::float4_from_float(x[i]) == want[i], "element " << i);
  std::uint8_t buf[2] = {0xff, 0xff};
  sf::set_packed_code<4>(buf, 0, 0x3);
  sf::set_packed_code<4>(buf, 1, 0xa);
  sf::set_packed_code<2>(buf + 1, 2, 0x0);
  CHECK(buf[0] == 0xa3);
  CHECK(buf[1] == 0xcf);
  CHECK(sf::packed_int(element_type::int4, buf, 1) == -6);
  CHECK(sf::packed_int(element_type::uint4, buf, 1) == 10);
  CHECK(sf::packed_int(element_type::int2, buf, 0) == -1);   // bits 0-1 of 0xa3: 3
  CHECK(sf::packed_int(element_type::uint2, buf, 3) == 2);   // bits 6-7 of 0xa3: 2
  CHECK(sf::packed_int(element_type::int2, buf, 3) == -2);
}

// ---------------------------------------------------------------------------------------------------------------
// Cast

TEST_CASE("Cast float to float8, saturating or not, as the ONNX backend tests expect") {
  const tensor x = f32({15}, {0.4789254665374756f, 0.48033666610717773f, 0.4996848702430725f, 0.8191054463386536f,
                              0.4703124761581421f, 0.7229037880897522f, 1e6f, 1e-7f, qnan, inf, inf, -inf, -1e-7f, 1e-7f,
                              -1e6f});
  struct expect {
    element_type e;
    std::vector<std::uint8_t> sat, nosat;
  };
  const expect cases[] = {
      {element_type::float8e4m3fn,
       {0x2f, 0x2f, 0x30, 0x35, 0x2f, 0x34, 0x7e, 0x00, 0x7f, 0x7e, 0x7e, 0xfe, 0x80, 0x00, 0xfe},
       {0x2f, 0x2f, 0x30, 0x35, 0x2f, 0x34, 0x7f, 0x00, 0x7f, 0x7f, 0x7f, 0xff, 0x80, 0x00, 0xff}},
      {element_type::float8e4m3fnuz,
       {0x37, 0x37, 0x38, 0x3d, 0x37, 0x3c, 0x7f, 0x00, 0x80, 0x7f, 0x7f, 0xff, 0x00, 0x00, 0xff},
       {0x37, 0x37, 0x38, 0x3d, 0x37, 0x3c, 0x80, 0x00, 0x80, 0x80, 0x80, 0x80, 0x00, 0x00, 0x80}},
      {element_type::float8e5m2,
       {0x38, 0x38, 0x38, 0x3b, 0x38, 0x3a, 0x7b, 0x00, 0x7e, 0x7b, 0x7b, 0xfb, 0x80, 0x00, 0xfb},
       {0x38, 0x38, 0x38, 0x3b, 0x38, 0x3a, 0x7c, 0x00, 0x7e, 0x7c, 0x7c, 0xfc, 0x80, 0x00, 0xfc}},
      {element_type::float8e5m2fnuz,
       {0x3c, 0x3c, 0x3c, 0x3f, 0x3c, 0x3e, 0x7f, 0x00, 0x80, 0x7f, 0x7f, 0xff, 0x00, 0x00, 0xff},
       {0x3c, 0x3c, 0x3c, 0x3f, 0x3c, 0x3e, 0x80, 0x00, 0x80, 0x80, 0x80, 0x80, 0x00, 0x00, 0x80}},
  };
  for (const auto& c : cases) {
    CAPTURE(to_string(c.e));
    const tensor s = run1<ops::cast>(cast_to(c.e), {in(x)});
    REQUIRE(s.type() == c.e);
    CHECK(codes_of(s) == c.sat);
    CHECK(codes_of(run1<ops::cast>(cast_to(c.e).set("saturate", std::int64_t{0}), {in(x)})) == c.nosat);
  }
  // Cast-19 to Cast-23: infinities to a fnuz type give NaN even when saturating.
  CHECK(codes_of(run1<ops::cast>(cast_to(element_type::float8e4m3fnuz, 19), {in(f32({2}, {inf, 1e6f}))})) ==
        std::vector<std::uint8_t>{0x80, 0x7f});
  CHECK(codes_of(run1<ops::cast>(cast_to(element_type::float8e4m3fnuz, 24), {in(f32({2}, {inf, 1e6f}))})) ==
        std::vector<std::uint8_t>{0x7f, 0x7f});
}

TEST_CASE("Cast from float8 to float, float16, int, bool and string, and back through every byte") {
  const tensor f8 = bytes_tensor(element_type::float8e4m3fn, {6}, {0x7e, 0xed, 0x80, 0x7f, 0x01, 0x38});
  check_exact<float>(run1<ops::cast>(cast_to(element_type::float32), {in(f8)}), {6},
                     {448.0f, -104.0f, -0.0f, qnan, std::ldexp(1.0f, -9), 1.0f});
  const tensor h = run1<ops::cast>(cast_to(element_type::float16), {in(f8)});
  CHECK(h.typed<float16>()[0].bits == 0x5f00);  // 448
  check_tensor<std::int32_t>(run1<ops::cast>(cast_to(element_type::int32), {in(f8)}), {6}, {448, -104, 0, 0, 0, 1});
  check_tensor<bool>(run1<ops::cast>(cast_to(element_type::boolean), {in(f8)}), {6}, {true, true, false, true, true, true});
  check_tensor<std::string>(run1<ops::cast>(cast_to(element_type::string), {in(f8)}), {6},
                            {"448", "-104", "-0", "NaN", "0.001953125", "1"});
  const tensor back = run1<ops::cast>(cast_to(element_type::float8e4m3fn), {in(strs({3}, {"448", "-1000", "NaN"}))});
  CHECK(codes_of(back) == std::vector<std::uint8_t>{0x7e, 0xfe, 0x7f});
  // All 256 bytes of each float8 type through float and back (NaN codes may change to the canonical NaN).
  for (element_type e : {element_type::float8e4m3fn, element_type::float8e4m3fnuz, element_type::float8e5m2,
                         element_type::float8e5m2fnuz, element_type::float8e8m0}) {
    CAPTURE(to_string(e));
    std::vector<std::uint8_t> all(256);
    std::iota(all.begin(), all.end(), std::uint8_t{0});
    const tensor t = bytes_tensor(e, {256}, all);
    const tensor f = run1<ops::cast>(cast_to(element_type::float32), {in(t)});
    const std::vector<std::uint8_t> got = codes_of(run1<ops::cast>(cast_to(e).set("saturate", std::int64_t{0}), {in(f)}));
    const float* table = sf::byte_table(e);
    for (unsigned c = 0; c < 256; ++c) {
      CAPTURE(c);
      if (std::isnan(table[c])) CHECK(std::isnan(table[got[c]]));
      else CHECK(got[c] == c);
    }
  }
  // Between float8 types: through float (e5m2 0x7b = 57344 saturates to e4m3fn's 448).
  CHECK(codes_of(run1<ops::cast>(cast_to(element_type::float8e4m3fn),
                                 {in(bytes_tensor(element_type::float8e5m2, {2}, {0x7b, 0x3c}))})) ==
        std::vector<std::uint8_t>{0x7e, 0x38});
}

TEST_CASE("Cast to float8e8m0 follows round_mode and saturate") {
  const tensor x = f32({8}, {0.0f, 0.124f, 0.25f, 0.5f, 1.1f, 2.0f, 4.0f, 8.0f});
  CHECK(codes_of(run1<ops::cast>(cast_to(element_type::float8e8m0), {in(x)})) ==
        std::vector<std::uint8_t>{0x00, 0x7c, 0x7d, 0x7e, 0x80, 0x80, 0x81, 0x82});
  const tensor y = f32({3}, {3.0f, 2.9f, 0.0f});
  CHECK(codes_of(run1<ops::cast>(cast_to(element_type::float8e8m0).set("round_mode", std::string("down")), {in(y)})) ==
        std::vector<std::uint8_t>{0x80, 0x80, 0x00});
  CHECK(codes_of(run1<ops::cast>(cast_to(element_type::float8e8m0)
                                     .set("round_mode", std::string("nearest"))
                                     .set("saturate", std::int64_t{0}),
                                 {in(y)})) == std::vector<std::uint8_t>{0x81, 0x80, 0xff});
  check_exact<float>(run1<ops::cast>(cast_to(element_type::float32),
                                     {in(bytes_tensor(element_type::float8e8m0, {3}, {0x00, 0x7f, 0xff}))}),
                     {3}, {std::ldexp(1.0f, -127), 1.0f, qnan});
  expect_error<ops::cast>(cast_to(element_type::float8e8m0).set("round_mode", std::string("sideways")), {in(y)},
                          "round_mode");
}

TEST_CASE("Cast to int4, uint4, int2, uint2 keeps the low bits - packing of odd counts") {
  // float to int4 truncates toward zero, then wraps into 4 bits (ONNX 1.22's backend test: -9 gives 7, 8 gives -8).
  const tensor x = f32({9}, {-9.0f, -8.0f, -2.7f, 2.7f, 7.0f, 8.0f, 15.0f, qnan, 0.0f});
  const tensor i4 = run1<ops::cast>(cast_to(element_type::int4), {in(x)});
  REQUIRE(i4.type() == element_type::int4);
  CHECK(i4.byte_size() == 5);
  CHECK(packed_values(i4) == std::vector<int>{7, -8, -2, 2, 7, -8, -1, 0, 0});
  CHECK(packed_values(run1<ops::cast>(cast_to(element_type::uint4), {in(x)})) ==
        std::vector<int>{7, 8, 14, 2, 7, 8, 15, 0, 0});
  CHECK(packed_values(run1<ops::cast>(cast_to(element_type::int2), {in(f32({7}, {-3, -2, -1, 0, 1, 2, 3}))})) ==
        std::vector<int>{1, -2, -1, 0, 1, -2, -1});
  CHECK(packed_values(run1<ops::cast>(cast_to(element_type::uint2), {in(f32({7}, {-3, -2, -1, 0, 1, 2, 3}))})) ==
        std::vector<int>{1, 2, 3, 0, 1, 2, 3});
  // Odd count: five int8 values into three bytes, the last padded with zero bits.
  const tensor p = run1<ops::cast>(cast_to(element_type::int4), {in(make<std::int8_t>({5}, {1, -2, 3, -8, 7}))});
  CHECK(codes_of(p) == std::vector<std::uint8_t>{0xe1, 0x83, 0x07});
  check_tensor<std::int8_t>(run1<ops::cast>(cast_to(element_type::int8), {in(p)}), {5}, {1, -2, 3, -8, 7});
  // int4 to unsigned integers: fixed point to fixed point wraps (-2 is 254 as uint8).
  check_tensor<std::uint8_t>(run1<ops::cast>(cast_to(element_type::uint8), {in(p)}), {5}, {1, 254, 3, 248, 7});
  check_exact<float>(run1<ops::cast>(cast_to(element_type::float32), {in(p)}), {5}, {1, -2, 3, -8, 7});
  const tensor u2 = run1<ops::cast>(cast_to(element_type::uint2), {in(make<std::uint8_t>({5}, {0, 1, 2, 3, 6}))});
  CHECK(codes_of(u2) == std::vector<std::uint8_t>{0xe4, 0x02});
  check_tensor<std::string>(run1<ops::cast>(cast_to(element_type::string), {in(p)}), {5}, {"1", "-2", "3", "-8", "7"});
  CHECK(packed_values(run1<ops::cast>(cast_to(element_type::int4), {in(strs({2}, {"5", "-3"}))})) == std::vector<int>{5, -3});
  // Between small types: int4 to float8 and float4 to int4.
  CHECK(codes_of(run1<ops::cast>(cast_to(element_type::float8e4m3fn), {in(p)})) ==
        std::vector<std::uint8_t>{0x38, 0xc0, 0x44, 0xd0, 0x4e});
  CHECK(packed_values(run1<ops::cast>(cast_to(element_type::int4), {in(float4_tensor({3}, {0x7, 0xb, 0x3}))})) ==
        std::vector<int>{6, -1, 1});
}

TEST_CASE("Cast to and from float4e2m1") {
  const tensor x = f32({5}, {0.48f, -3.5f, 9.0f, qnan, -0.0f});
  const tensor f4 = run1<ops::cast>(cast_to(element_type::float4e2m1), {in(x)});
  REQUIRE(f4.type() == element_type::float4e2m1);
  CHECK(packed_codes(f4) == std::vector<std::uint8_t>{0x1, 0xe, 0x7, 0x8, 0x8});
  check_exact<float>(run1<ops::cast>(cast_to(element_type::float32), {in(f4)}), {5}, {0.5f, -4.0f, 6.0f, -0.0f, -0.0f});
  const tensor h = run1<ops::cast>(cast_to(element_type::float16), {in(f4)});
  CHECK(h.typed<float16>()[1].bits == 0xc400);  // -4
}

TEST_CASE("CastLike casts to the second input's type with Cast's attributes") {
  const tensor x = f32({4}, {1e6f, 0.5f, -inf, 2.7f});
  const tensor like8 = tensor(element_type::float8e5m2, {0});
  CHECK(codes_of(run1<ops::cast_like>(op("CastLike", 25), {in(x), in(like8)})) ==
        std::vector<std::uint8_t>{0x7b, 0x38, 0xfb, 0x41});
  CHECK(codes_of(run1<ops::cast_like>(op("CastLike", 25).set("saturate", std::int64_t{0}), {in(x), in(like8)})) ==
        std::vector<std::uint8_t>{0x7c, 0x38, 0xfc, 0x41});
  check_tensor<std::int32_t>(run1<ops::cast_like>(op("CastLike", 15), {in(x), in(make<std::int32_t>({1}, {0}))}), {4},
                             {1000000, 0, std::numeric_limits<std::int32_t>::min(), 2});
  CHECK(packed_values(run1<ops::cast_like>(op("CastLike", 21), {in(x), in(tensor(element_type::int4, {1}))})) ==
        std::vector<int>{0, 0, 0, 2});  // 1e6 = 62500 * 16 wraps to 0; -inf: int64's minimum, low bits 0 (undefined by spec)
  check_exact<float>(run1<ops::cast_like>(op("CastLike", 25), {in(bytes_tensor(element_type::float8e4m3fnuz, {2}, {0x7f, 0x80})),
                                                               in(f32({0}, {}))}),
                     {2}, {240.0f, qnan});
  const tensor same = run1<ops::cast_like>(op("CastLike", 25), {in(x), in(f32({1}, {0.0f}))});
  CHECK(same.data() == x.data());
  check_tensor<bfloat16>(run1<ops::cast_like>(op("CastLike", 19), {in(f32({1}, {0.1f})), in(make<bfloat16>({1}, {bfloat16(0.0f)}))}),
                         {1}, {bfloat16::from_bits(0x3dcd)});
}

// ---------------------------------------------------------------------------------------------------------------
// QuantizeLinear and DequantizeLinear

TEST_CASE("Blocked QuantizeLinear and DequantizeLinear along the last axis and along the first") {
  // x [2, 4], blocks of 2 along axis 1: scale and zero point [2, 2].
  const tensor x = f32({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  const tensor s = f32({2, 2}, {1, 2, 0.5f, 4});
  const tensor z = make<std::uint8_t>({2, 2}, {0, 10, 1, 0});
  auto q = [](int v) { return op("QuantizeLinear", v).set("axis", std::int64_t{1}).set("block_size", std::int64_t{2}); };
  // round(x / s) + z, halves to even: 3 / 2 = 1.5 -> 2, 7 / 4 = 1.75 -> 2.
  const tensor y = run1<ops::quantize_linear>(q(21), {in(x), in(s), in(z)});
  check_tensor<std::uint8_t>(y, {2, 4}, {1, 2, 12, 12, 11, 13, 2, 2});
  auto dq = op("DequantizeLinear", 21).set("axis", std::int64_t{1}).set("block_size", std::int64_t{2});
  check_exact<float>(run1<ops::dequantize_linear>(dq, {in(y), in(s), in(z)}), {2, 4}, {1, 2, 4, 4, 5, 6, 8, 8});
  // Blocks of 2 along axis 0 of x [3, 2] (the last block is short): scale [2, 2]; int8 by output_dtype.
  const tensor x0 = f32({3, 2}, {2, 4, 6, 8, 10, 12});
  const tensor s0 = f32({2, 2}, {2, 1, 5, 4});
  auto q0 = op("QuantizeLinear", 25).set("axis", std::int64_t{0}).set("block_size", std::int64_t{2})
                .set("output_dtype", static_cast<std::int64_t>(element_type::int8));
  const tensor y0 = run1<ops::quantize_linear>(q0, {in(x0), in(s0)});
  check_tensor<std::int8_t>(y0, {3, 2}, {1, 4, 3, 8, 2, 3});
  auto dq0 = op("DequantizeLinear", 25).set("axis", std::int64_t{0}).set("block_size", std::int64_t{2});
  check_exact<float>(run1<ops::dequantize_linear>(dq0, {in(y0), in(s0)}), {3, 2}, {2, 4, 6, 8, 10, 12});
  // Blocked to int4, with an int4 zero point: the packed output.
  const tensor zi4 = packed_tensor(element_type::int4, {2, 2}, {0, 1, -1, 0});
  const tensor y4 = run1<ops::quantize_linear>(q(21), {in(f32({2, 4}, {1, 20, -3, 4, 5, -6, 7, 80})), in(s), in(zi4)});
  REQUIRE(y4.type() == element_type::int4);
  // row 0: 1, 20 -> 7 (saturated), -3 / 2 = -1.5 -> -2 + 1 = -1, 4 / 2 + 1 = 3; row 1: 10 - 1 = 9 -> 7, -12 - 1 -> -8,
  // 1.75 -> 2, 20 -> 7.
  CHECK(packed_values(y4) == std::vector<int>{1, 7, -1, 3, 7, -8, 2, 7});
  check_exact<float>(run1<ops::dequantize_linear>(dq, {in(y4), in(s), in(zi4)}), {2, 4}, {1, 7, -4, 4, 4, -3.5f, 8, 28});
}

TEST_CASE("QuantizeLinear to the small types, int16 and uint16, per axis and per tensor") {
  auto q = [](std::int64_t axis) { return op("QuantizeLinear", 25).set("axis", axis); };
  const tensor x = f32({3, 4}, {0, 2.5f, 4.8f, 8.6f, -30, -20, 6, 9, 12, 15, 16, 40});
  const tensor s = f32({3}, {2, 3, 4});
  CHECK(packed_values(run1<ops::quantize_linear>(q(0), {in(x), in(s), in(packed_tensor(element_type::int4, {3}, {1, 1, 1}))})) ==
        std::vector<int>{1, 2, 3, 5, -8, -6, 3, 4, 4, 5, 5, 7});
  CHECK(packed_values(run1<ops::quantize_linear>(q(0), {in(x), in(s), in(packed_tensor(element_type::uint4, {3}, {1, 1, 1}))})) ==
        std::vector<int>{1, 2, 3, 5, 0, 0, 3, 4, 4, 5, 5, 11});
  CHECK(packed_values(run1<ops::quantize_linear>(q(0), {in(x), in(s), in(packed_tensor(element_type::int2, {3}, {0, 0, 0}))})) ==
        std::vector<int>{0, 1, 1, 1, -2, -2, 1, 1, 1, 1, 1, 1});
  CHECK(packed_codes(run1<ops::quantize_linear>(q(0), {in(x), in(s), in(float4_tensor({3}, {0, 0, 0}))})) ==
        std::vector<std::uint8_t>{0x0, 0x2, 0x4, 0x6, 0xf, 0xf, 0x4, 0x5, 0x5, 0x6, 0x6, 0x7});
  // float8: x / scale + zero point, rounded to the type; saturate.
  const tensor xf = f32({5}, {0, 1, 2, 100000, 200});
  const tensor s2 = f32({}, {2});
  const tensor z8 = bytes_tensor(element_type::float8e4m3fn, {1}, {0});
  CHECK(codes_of(run1<ops::quantize_linear>(q(1), {in(xf), in(s2), in(z8)})) ==
        std::vector<std::uint8_t>{0x00, 0x30, 0x38, 0x7e, 0x6c});
  CHECK(codes_of(run1<ops::quantize_linear>(q(1).set("saturate", std::int64_t{0}), {in(xf), in(s2), in(z8)})) ==
        std::vector<std::uint8_t>{0x00, 0x30, 0x38, 0x7f, 0x6c});
  CHECK(codes_of(run1<ops::quantize_linear>(q(1), {in(xf), in(s2), in(bytes_tensor(element_type::float8e5m2, {1}, {0}))})) ==
        std::vector<std::uint8_t>{0x00, 0x38, 0x3c, 0x7a, 0x56});
  // int16 and uint16 saturate at their ranges; 65023 / 2 = 32511.5 rounds to even.
  const tensor x16 = f32({6}, {0, -514, 3, 65023, -66047, 70000});
  check_tensor<std::int16_t>(run1<ops::quantize_linear>(q(1), {in(x16), in(s2), in(make<std::int16_t>({}, {256}))}), {6},
                             {256, -1, 258, 32767, -32768, 32767});
  check_tensor<std::uint16_t>(run1<ops::quantize_linear>(q(1), {in(x16), in(s2), in(make<std::uint16_t>({}, {32767}))}), {6},
                              {32767, 32510, 32769, 65279, 0, 65535});
  // Without a zero point: uint8, or output_dtype.
  check_tensor<std::uint8_t>(run1<ops::quantize_linear>(q(1), {in(f32({3}, {-1, 5, 1000})), in(s2)}), {3}, {0, 2, 255});
  CHECK(packed_values(run1<ops::quantize_linear>(q(1).set("output_dtype", static_cast<std::int64_t>(element_type::uint2)),
                                                 {in(f32({3}, {-1, 3, 1000})), in(s2)})) == std::vector<int>{0, 2, 3});
  // float16 scale: the division in float16 (and x as float16).
  const tensor sh = make<float16>({}, {float16(3.0f)});
  check_tensor<std::int8_t>(run1<ops::quantize_linear>(q(1), {in(f32({2}, {7.5f, -300.f})), in(sh), in(make<std::int8_t>({}, {0}))}),
                            {2}, {2, -100});
}

TEST_CASE("DequantizeLinear of the small types, int16 and uint16, into float and float16") {
  auto dq = op("DequantizeLinear", 25).set("axis", std::int64_t{0});
  const tensor s = f32({}, {2});
  check_exact<float>(run1<ops::dequantize_linear>(dq, {in(packed_tensor(element_type::int4, {5}, {0, 1, 7, -4, -8})), in(s),
                                                       in(packed_tensor(element_type::int4, {1}, {1}))}),
                     {5}, {-2, 0, 12, -10, -18});
  check_exact<float>(run1<ops::dequantize_linear>(dq, {in(packed_tensor(element_type::uint4, {5}, {0, 1, 7, 10, 15})), in(s),
                                                       in(packed_tensor(element_type::uint4, {1}, {1}))}),
                     {5}, {-2, 0, 12, 18, 28});
  check_exact<float>(run1<ops::dequantize_linear>(dq, {in(packed_tensor(element_type::int2, {4}, {0, 1, -1, -2})), in(s),
                                                       in(packed_tensor(element_type::int2, {1}, {1}))}),
                     {4}, {-2, 0, -4, -6});
  check_exact<float>(run1<ops::dequantize_linear>(dq, {in(float4_tensor({5}, {0x0, 0x2, 0xa, 0x3, 0xe})), in(s)}), {5},
                     {0, 2, -2, 3, -8});
  const tensor f8 = bytes_tensor(element_type::float8e4m3fn, {5}, {0x00, 0x30, 0x38, 0x7e, 0xed});
  check_exact<float>(run1<ops::dequantize_linear>(dq, {in(f8), in(s)}), {5}, {0, 1, 2, 896, -208});
  const tensor h = run1<ops::dequantize_linear>(dq, {in(f8), in(make<float16>({}, {float16(2.0f)}))});
  REQUIRE(h.type() == element_type::float16);
  CHECK(static_cast<float>(h.typed<float16>()[3]) == 896.0f);
  const tensor o = run1<ops::dequantize_linear>(dq.set("output_dtype", static_cast<std::int64_t>(element_type::bfloat16)),
                                                {in(f8), in(s)});
  CHECK(o.type() == element_type::bfloat16);
  check_exact<float>(run1<ops::dequantize_linear>(op("DequantizeLinear", 25), {in(make<std::int16_t>({4}, {-300, -30, -1025, 1270})),
                                                                           in(s), in(make<std::int16_t>({}, {-1024}))}),
                     {4}, {1448, 1988, -2, 4588});
  check_exact<float>(run1<ops::dequantize_linear>(op("DequantizeLinear", 25), {in(make<std::uint16_t>({2}, {30000, 32768})),
                                                                           in(s), in(make<std::uint16_t>({}, {32767}))}),
                     {2}, {-5534, 2});
  // A float8e8m0 scale (a power of two).
  check_exact<float>(run1<ops::dequantize_linear>(op("DequantizeLinear", 25).set("output_dtype", std::int64_t{1}),
                                                  {in(make<std::int8_t>({2}, {3, -4})),
                                                   in(bytes_tensor(element_type::float8e8m0, {}, {125}))}),
                     {2}, {0.75f, -1.0f});
}

TEST_CASE("QuantizeLinear and DequantizeLinear reject a block_size that does not fit the scale") {
  const tensor x = f32({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  const tensor s = f32({2, 2}, {1, 1, 1, 1});
  auto q = [](std::int64_t b) { return op("QuantizeLinear", 21).set("axis", std::int64_t{1}).set("block_size", b); };
  // 4 elements in 2 blocks: block_size 2 or 3.
  expect_error<ops::quantize_linear>(q(1), {in(x), in(s)}, "attribute 'block_size' (1) does not fit");
  expect_error<ops::quantize_linear>(q(4), {in(x), in(s)}, "block_size must be in [2, 3]");
  check_tensor<std::uint8_t>(run1<ops::quantize_linear>(q(3), {in(x), in(s)}), {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  expect_error<ops::quantize_linear>(q(-2), {in(x), in(s)}, "attribute 'block_size' must be positive");
  expect_error<ops::quantize_linear>(op("QuantizeLinear", 21).set("axis", std::int64_t{1}), {in(x), in(s)}, "'block_size'");
  expect_error<ops::quantize_linear>(q(2), {in(x), in(f32({2}, {1, 1}))}, "'block_size' (2) asks for blocked quantization");
  expect_error<ops::dequantize_linear>(op("DequantizeLinear", 21).set("axis", std::int64_t{1}).set("block_size", std::int64_t{5}),
                                       {in(make<std::uint8_t>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})), in(s)},
                                       "DequantizeLinear: attribute 'block_size' (5) does not fit");
  expect_error<ops::quantize_linear>(q(2), {in(x), in(f32({1, 2}, {1, 1}))}, "must equal x's [2,4] but on axis 1");
  expect_error<ops::quantize_linear>(q(2).set("output_dtype", static_cast<std::int64_t>(element_type::int8)),
                                     {in(x), in(s), in(make<std::uint8_t>({2, 2}, {0, 0, 0, 0}))},
                                     "differs from y_zero_point's type");
  expect_error<ops::quantize_linear>(q(2), {in(x), in(s), in(make<std::uint8_t>({2}, {0, 0}))}, "the zero point's shape");
}
