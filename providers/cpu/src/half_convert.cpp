// float16 and bfloat16 computed in float: the block conversions and tensor copies declared in kernel_util.hpp, used by
// the element-wise, matmul, conv and normalization kernels.
#include "kernel_util.hpp"

#include <bit>
#include <stdexcept>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace epstack::cpu::impl {

// ---------------------------------------------------------------------------------------------------------------
// float16 and bfloat16 as float: blocks converted with the same rounding as epstack::float16 / bfloat16 (to nearest
// even; F16C's conversions where the target has them). Declared in kernel_util.hpp for the other kernels.

void widen_half(const float16* src, float* dst, std::size_t n) {
  std::size_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
  for (; i < n; ++i) dst[i] = float16::to_float(src[i].bits);
}
void widen_half(const bfloat16* src, float* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(static_cast<std::uint32_t>(src[i].bits) << 16);
}
void narrow_half(const float* src, float16* dst, std::size_t n) {
  std::size_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < n; ++i) dst[i].bits = float16::from_float(src[i]);
}
void narrow_half(const float* src, bfloat16* dst, std::size_t n) {
  // bfloat16::from_float without its branch (so the loop vectorises): NaN stays a quiet NaN.
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t x = std::bit_cast<std::uint32_t>(src[i]);
    const std::uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16, nan = (x >> 16) | 0x40u;
    dst[i].bits = static_cast<std::uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
  }
}

/// A float copy of `t` (float16 or bfloat16; a float tensor is returned as it is) in scratch memory, same sizes.
tensor half_as_float(compute_context& ctx, const tensor& t) {
  if (t.type() == element_type::float32 || t.empty()) return t;
  if (t.type() != element_type::float16 && t.type() != element_type::bfloat16)
    throw std::invalid_argument(cat("expected float16 or bfloat16, got ", std::string(to_string(t.type()))));
  tensor f = ctx.scratch(element_type::float32, t.element_count()).reshaped(t.sizes());
  float* dst = f.typed<float>();
  parallel_elements(ctx, t.element_count(), [&](std::size_t b, std::size_t e) {
    if (t.type() == element_type::float16) widen_half(t.typed<float16>() + b, dst + b, e - b);
    else widen_half(t.typed<bfloat16>() + b, dst + b, e - b);
  });
  return f;
}
/// Rounds `src` (dst.element_count() floats) into `dst`, a float16 or bfloat16 tensor.
void store_as_half(compute_context& ctx, const float* src, tensor& dst) {
  if (dst.type() != element_type::float16 && dst.type() != element_type::bfloat16)
    throw std::invalid_argument(cat("expected float16 or bfloat16, got ", std::string(to_string(dst.type()))));
  parallel_elements(ctx, dst.element_count(), [&](std::size_t b, std::size_t e) {
    if (dst.type() == element_type::float16) narrow_half(src + b, dst.typed<float16>() + b, e - b);
    else narrow_half(src + b, dst.typed<bfloat16>() + b, e - b);
  });
}

}  // namespace epstack::cpu::impl
