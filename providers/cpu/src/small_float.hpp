#pragma once
// The storage-only element types of ONNX 1.14 to 1.22 (IR 13) as values: conversions between float and the 8-bit
// floats (float8e4m3fn, float8e4m3fnuz, float8e5m2, float8e5m2fnuz, float8e8m0) and float4e2m1, and element access in
// the packed buffers of int4, uint4, int2, uint2 and float4e2m1 (first element in the least significant bits).
//
// Decoding is a table lookup (256 floats per 8-bit type, 16 for float4e2m1). Encoding rounds to nearest even on the
// float's bits, without branches on the value's range; out-of-range values follow the tables of Cast-19/Cast-24
// (`saturate`). Self-contained (standard headers and element_type.hpp only): the CPU kernels and the test runner
// both use it.
#include <epstack/core/element_type.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace epstack::cpu::small_float {

// ---------------------------------------------------------------------------------------------------------------
// The four float8 formats with sign, exponent and mantissa (OCP FP8 and the "fnuz" variants of GraphCore/AMD).

enum class f8 : std::uint8_t { e4m3fn, e4m3fnuz, e5m2, e5m2fnuz };

struct f8_format {
  int mbits;                  ///< mantissa bits (3 or 2); the exponent has 7 - mbits
  int bias;                   ///< exponent bias
  bool fnuz;                  ///< no negative zero, no infinities; 0x80 is the only NaN
  bool ieee;                  ///< infinities and NaNs as in IEEE 754 (e5m2); e4m3fn has only NaN (S.1111.111)
  std::uint32_t max_mag;      ///< the largest finite magnitude's code (sign bit clear)
};

constexpr f8_format format_of(f8 k) {
  switch (k) {
    case f8::e4m3fn: return {3, 7, false, false, 0x7e};    // max 448
    case f8::e4m3fnuz: return {3, 8, true, false, 0x7f};   // max 240
    case f8::e5m2: return {2, 15, false, true, 0x7b};      // max 57344
    case f8::e5m2fnuz: return {2, 16, true, false, 0x7f};  // max 57344
  }
  return {};
}

/// The float8 format of an element type (e must be one of the four).
constexpr f8 f8_of(element_type e) {
  switch (e) {
    case element_type::float8e4m3fnuz: return f8::e4m3fnuz;
    case element_type::float8e5m2: return f8::e5m2;
    case element_type::float8e5m2fnuz: return f8::e5m2fnuz;
    default: return f8::e4m3fn;
  }
}

namespace detail {

constexpr float nan_bits(std::uint32_t sign) { return std::bit_cast<float>(sign | 0x7fc00000u); }

// The value of code c, computed on bits (constexpr: builds the tables).
constexpr float decode_f8(f8 k, std::uint32_t c) {
  const f8_format f = format_of(k);
  const std::uint32_t sign = (c & 0x80u) << 24;
  const std::uint32_t mag = c & 0x7fu;
  const std::uint32_t e = mag >> f.mbits, m = mag & ((1u << f.mbits) - 1);
  const std::uint32_t emax = (1u << (7 - f.mbits)) - 1;
  if (f.fnuz && c == 0x80) return nan_bits(0);
  if (!f.fnuz && !f.ieee && mag == 0x7f) return nan_bits(sign);
  if (f.ieee && e == emax) return m == 0 ? std::bit_cast<float>(sign | 0x7f800000u) : nan_bits(sign);
  if (e == 0) {
    if (m == 0) return std::bit_cast<float>(sign);
    // Subnormal: m * 2^(1 - bias - mbits); normalise the leading 1 into the implicit bit.
    std::uint32_t mm = m;
    int k2 = 0;
    while ((mm & (1u << f.mbits)) == 0) mm <<= 1, ++k2;
    const auto exp = static_cast<std::uint32_t>(1 - f.bias - k2 + 127);
    return std::bit_cast<float>(sign | exp << 23 | (mm & ((1u << f.mbits) - 1)) << (23 - f.mbits));
  }
  const auto exp = static_cast<std::uint32_t>(static_cast<int>(e) - f.bias + 127);
  return std::bit_cast<float>(sign | exp << 23 | m << (23 - f.mbits));
}

template <f8 K>
constexpr std::array<float, 256> make_f8_table() {
  std::array<float, 256> t{};
  for (std::uint32_t c = 0; c < 256; ++c) t[c] = decode_f8(K, c);
  return t;
}

constexpr std::array<float, 256> make_e8m0_table() {
  std::array<float, 256> t{};
  for (std::uint32_t c = 0; c < 255; ++c) t[c] = std::bit_cast<float>(c == 0 ? 0x00400000u : c << 23);  // 2^(c-127)
  t[255] = nan_bits(0);
  return t;
}

/// Shifts v right by r (1..31) rounding to nearest, ties to even.
constexpr std::uint32_t rne_shift(std::uint32_t v, std::uint32_t r) {
  return (v + ((1u << (r - 1)) - 1) + ((v >> r) & 1)) >> r;
}

/// |x| (its float bits `a`, not NaN) rounded to nearest even as the magnitude code of a format with M mantissa bits
/// and exponent bias B, unbounded: a code above the largest finite one means the rounded value is out of range.
/// Normal and subnormal results are both computed and one selected (no branch on the value).
template <int M, int B>
constexpr std::uint32_t round_magnitude(std::uint32_t a) {
  constexpr std::uint32_t shift = 23 - M;
  const std::uint32_t ef = a >> 23;  // the float's biased exponent
  // Normal in the target: rebias the exponent field, then drop the extra mantissa bits (a carry moves into the
  // exponent, as it should). Only used when ef >= 128 - B, where the subtraction cannot wrap.
  const std::uint32_t normal = rne_shift(a - (static_cast<std::uint32_t>(127 - B) << 23), shift);
  // Subnormal in the target: the significand with its implicit bit, shifted by the exponent deficit too.
  const std::uint32_t sig = (a & 0x7fffffu) | (ef != 0 ? 0x800000u : 0u);
  const int r = std::clamp(151 - B - M - static_cast<int>(ef), 1, 31);
  const std::uint32_t sub = rne_shift(sig, static_cast<std::uint32_t>(r));
  return ef >= static_cast<std::uint32_t>(128 - B) ? normal : sub;
}

}  // namespace detail

/// Decoding tables: the float value of every code (NaN codes give NaN of the code's sign).
template <f8 K>
inline constexpr std::array<float, 256> f8_table = detail::make_f8_table<K>();
inline constexpr std::array<float, 256> e8m0_table = detail::make_e8m0_table();
inline constexpr std::array<float, 16> float4_table = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                                       -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

/// The decoding table of a one-byte float type (the four float8 types and float8e8m0); null for other types.
inline const float* byte_table(element_type e) {
  switch (e) {
    case element_type::float8e4m3fn: return f8_table<f8::e4m3fn>.data();
    case element_type::float8e4m3fnuz: return f8_table<f8::e4m3fnuz>.data();
    case element_type::float8e5m2: return f8_table<f8::e5m2>.data();
    case element_type::float8e5m2fnuz: return f8_table<f8::e5m2fnuz>.data();
    case element_type::float8e8m0: return e8m0_table.data();
    default: return nullptr;
  }
}

/// float to float8 K, rounding to nearest even. `saturate`: values whose rounding exceeds the largest finite value
/// (infinities included) give it, with their sign; otherwise they give NaN (e4m3fn: of their sign; fnuz: 0x80) or,
/// for e5m2, infinity. NaN gives NaN (e4m3fn, e5m2: of its sign). Zero and values rounding to zero keep their sign,
/// except in the fnuz formats, which have no negative zero. `fnuz_inf_nan`: infinities give NaN in the fnuz formats
/// even when saturating (the table of Cast-19 to Cast-23; from Cast-24 they saturate).
template <f8 K>
constexpr std::uint8_t from_float(float x, bool saturate = true, bool fnuz_inf_nan = false) {
  constexpr f8_format f = format_of(K);
  constexpr int M = f.mbits, B = f.bias;
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = (u >> 24) & 0x80u;
  const std::uint32_t a = u & 0x7fffffffu;
  const std::uint32_t mag = detail::round_magnitude<M, B>(a);
  std::uint32_t r;
  if constexpr (f.fnuz) {
    r = mag == 0 ? 0u : (sign | mag);
    r = mag > f.max_mag ? (saturate ? (sign | f.max_mag) : 0x80u) : r;
    r = fnuz_inf_nan && a == 0x7f800000u ? 0x80u : r;
    r = a > 0x7f800000u ? 0x80u : r;
  } else {
    const std::uint32_t over = saturate ? f.max_mag : (f.ieee ? 0x7cu : 0x7fu);
    r = sign | (mag > f.max_mag ? over : mag);
    r = a > 0x7f800000u ? (sign | (f.ieee ? 0x7eu : 0x7fu)) : r;
  }
  return static_cast<std::uint8_t>(r);
}

/// float to float8 of runtime format k.
inline std::uint8_t from_float(f8 k, float x, bool saturate = true, bool fnuz_inf_nan = false) {
  switch (k) {
    case f8::e4m3fn: return from_float<f8::e4m3fn>(x, saturate, fnuz_inf_nan);
    case f8::e4m3fnuz: return from_float<f8::e4m3fnuz>(x, saturate, fnuz_inf_nan);
    case f8::e5m2: return from_float<f8::e5m2>(x, saturate, fnuz_inf_nan);
    case f8::e5m2fnuz: return from_float<f8::e5m2fnuz>(x, saturate, fnuz_inf_nan);
  }
  return 0;
}

template <f8 K>
constexpr float to_float(std::uint8_t c) {
  return f8_table<K>[c];
}

// ---------------------------------------------------------------------------------------------------------------
// float8e8m0: an unsigned power of two 2^(c - 127), c in 0..254; 0xFF is NaN. No zero, no sign.

enum class e8m0_round : std::uint8_t { up, down, nearest };

/// float to float8e8m0 (Cast-24 and later). The sign is ignored (negative values are unspecified). `up` rounds away
/// from zero, `down` toward zero, `nearest` to the nearer power of two, ties (1.5 * 2^k) up. NaN gives NaN. With
/// `saturate`: infinity and values rounding above 2^127 give 2^127 (0xFE), zero and values below 2^-127 give 2^-127
/// (0x00); without: they give NaN (the spec's table).
constexpr std::uint8_t e8m0_from_float(float x, e8m0_round mode = e8m0_round::up, bool saturate = true) {
  const std::uint32_t a = std::bit_cast<std::uint32_t>(x) & 0x7fffffffu;
  const std::uint32_t e = a >> 23, m = a & 0x7fffffu;
  if (a > 0x7f800000u) return 0xff;
  if (e == 0) {  // zero and the float subnormals: below 2^-126
    if (m < 0x400000u) return saturate ? 0x00 : 0xff;  // below 2^-127 (the smallest e8m0)
    // In [2^-127, 2^-126): code 0 or 1.
    const bool up = mode == e8m0_round::up ? m > 0x400000u : mode == e8m0_round::nearest ? m >= 0x600000u : false;
    return up ? 0x01 : 0x00;
  }
  const std::uint32_t inc = mode == e8m0_round::up ? (m != 0 ? 1u : 0u) : mode == e8m0_round::nearest ? (m >> 22) : 0u;
  const std::uint32_t c = e + inc;  // 255: above 2^127 (or infinity, e == 255)
  if (c >= 255) return saturate ? 0xfe : 0xff;
  return static_cast<std::uint8_t>(c);
}

constexpr float e8m0_to_float(std::uint8_t c) { return e8m0_table[c]; }

// ---------------------------------------------------------------------------------------------------------------
// float4e2m1: S.EE.M, bias 1: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives. No infinity, no NaN.

/// float to float4e2m1, rounding to nearest even; out-of-range values and infinities saturate to +-6, NaN gives
/// 0x8 (as ONNX's reference does: the type has no NaN), -0 gives -0.
constexpr std::uint8_t float4_from_float(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t a = u & 0x7fffffffu;
  const std::uint32_t mag = std::min<std::uint32_t>(detail::round_magnitude<1, 1>(a), 7u);
  const std::uint32_t r = ((u >> 28) & 0x8u) | mag;
  return static_cast<std::uint8_t>(a > 0x7f800000u ? 0x8u : r);
}

constexpr float float4_to_float(std::uint8_t c) { return float4_table[c & 0xf]; }

// ---------------------------------------------------------------------------------------------------------------
// Packed buffers: 8 / Bits elements to a byte, element i in bits (i % per) * Bits.

/// The code (Bits low bits) of element i.
template <int Bits>
inline std::uint8_t packed_code(const void* data, std::size_t i) {
  constexpr std::size_t per = 8 / Bits;
  const auto b = static_cast<const std::uint8_t*>(data)[i / per];
  return static_cast<std::uint8_t>((b >> ((i % per) * Bits)) & ((1u << Bits) - 1));
}
/// Sets element i's code (read-modify-write of its byte: not for bytes that other threads write).
template <int Bits>
inline void set_packed_code(void* data, std::size_t i, std::uint8_t code) {
  constexpr std::size_t per = 8 / Bits;
  constexpr unsigned mask = (1u << Bits) - 1;
  auto& b = static_cast<std::uint8_t*>(data)[i / per];
  const unsigned sh = static_cast<unsigned>((i % per) * Bits);
  b = static_cast<std::uint8_t>((b & ~(mask << sh)) | ((code & mask) << sh));
}
/// A Bits-bit code as a signed (two's complement) or unsigned integer.
template <int Bits>
constexpr int code_value(std::uint8_t code, bool is_signed) {
  const int v = code & ((1 << Bits) - 1);
  return is_signed && v >= (1 << (Bits - 1)) ? v - (1 << Bits) : v;
}

/// Bits per element of a packed type (4 or 2), 0 for other types.
constexpr int packed_bits(element_type e) { return is_packed(e) ? static_cast<int>(element_bits(e)) : 0; }
/// True for the packed integer types (int4, uint4, int2, uint2).
constexpr bool is_packed_int(element_type e) { return is_packed(e) && e != element_type::float4e2m1; }
/// True for the signed packed integer types.
constexpr bool is_signed_packed(element_type e) { return e == element_type::int4 || e == element_type::int2; }

/// The code of element i of a packed tensor's data (any packed type).
inline std::uint8_t packed_code(element_type e, const void* data, std::size_t i) {
  return packed_bits(e) == 2 ? packed_code<2>(data, i) : packed_code<4>(data, i);
}
/// Element i of an int4/uint4/int2/uint2 buffer as an integer (sign-extended for int4 and int2).
inline int packed_int(element_type e, const void* data, std::size_t i) {
  return packed_bits(e) == 2 ? code_value<2>(packed_code<2>(data, i), is_signed_packed(e))
                             : code_value<4>(packed_code<4>(data, i), is_signed_packed(e));
}
/// Stores v (wrapped to the element's bits: two's complement for the signed types) as element i of an
/// int4/uint4/int2/uint2 buffer.
inline void set_packed_int(element_type e, void* data, std::size_t i, std::int64_t v) {
  if (packed_bits(e) == 2) set_packed_code<2>(data, i, static_cast<std::uint8_t>(v & 3));
  else set_packed_code<4>(data, i, static_cast<std::uint8_t>(v & 15));
}

/// Element i of a tensor's data of a float8, float8e8m0 or float4e2m1 type as float; of a packed integer type as
/// its integer value.
inline float value_at(element_type e, const void* data, std::size_t i) {
  if (const float* t = byte_table(e)) return t[static_cast<const std::uint8_t*>(data)[i]];
  if (e == element_type::float4e2m1) return float4_to_float(packed_code<4>(data, i));
  return static_cast<float>(packed_int(e, data, i));
}

}  // namespace epstack::cpu::small_float
