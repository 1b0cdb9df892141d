#pragma once
/// @file float16.hpp
/// @brief IEEE half precision (`float16`) and brain float (`bfloat16`) storage types with conversions to float.

#include <bit>
#include <cstdint>
#include <cstring>

namespace epstack {

/// @brief IEEE 754 binary16, stored as its bits. Conversions round to nearest even.
struct float16 {
  std::uint16_t bits = 0;

  constexpr float16() noexcept = default;
  [[nodiscard]] static constexpr float16 from_bits(std::uint16_t b) noexcept {
    float16 h;
    h.bits = b;
    return h;
  }
  explicit float16(float f) noexcept : bits(from_float(f)) {}
  explicit operator float() const noexcept { return to_float(bits); }
  friend constexpr bool operator==(float16 a, float16 b) noexcept { return a.bits == b.bits; }

  [[nodiscard]] static std::uint16_t from_float(float f) noexcept {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = (x >> 16) & 0x8000u;
    const std::uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u) return static_cast<std::uint16_t>(sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to infinity
    if (abs < 0x38800000u) {                                                    // subnormal or zero in half
      const float magic = std::bit_cast<float>(0x3f000000u);                    // 0.5: aligns the mantissa
      const float r = std::bit_cast<float>(abs) + magic;
      return static_cast<std::uint16_t>(sign | (std::bit_cast<std::uint32_t>(r) - 0x3f000000u));
    }
    const std::uint32_t mant_odd = (abs >> 13) & 1u;
    std::uint32_t v = abs + 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
    return static_cast<std::uint16_t>(sign | (v >> 13));
  }
  [[nodiscard]] static float to_float(std::uint16_t h) noexcept {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1fu;
    const std::uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
    if (exp == 0) {
      const float m = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
      return sign ? -m : m;
    }
    return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
  }
};

/// @brief bfloat16: the upper 16 bits of a float32. Conversion from float rounds to nearest even; NaN stays NaN.
struct bfloat16 {
  std::uint16_t bits = 0;

  constexpr bfloat16() noexcept = default;
  [[nodiscard]] static constexpr bfloat16 from_bits(std::uint16_t b) noexcept {
    bfloat16 h;
    h.bits = b;
    return h;
  }
  explicit bfloat16(float f) noexcept : bits(from_float(f)) {}
  explicit operator float() const noexcept { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }
  friend constexpr bool operator==(bfloat16 a, bfloat16 b) noexcept { return a.bits == b.bits; }

  [[nodiscard]] static std::uint16_t from_float(float f) noexcept {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet NaN
    const std::uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
    return static_cast<std::uint16_t>((x + rounding) >> 16);
  }
};

}  // namespace epstack
