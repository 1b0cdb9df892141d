#pragma once
// Vectorisable float math for the CPU provider's kernels: plain float arithmetic, no branches, so that compilers
// vectorise loops over these (element-wise kernels, and the SGEMM's epilogue, which applies GELU as a tile is stored).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace epstack::cpu::impl {

/// exp(x) with a relative error below 2e-7 on [-87.3, 88.3]; 0 below (where exp(x) is under the smallest normal
/// float), saturated above.
inline float fast_exp(float x) {
  // Below -87.3 the result is 0, not the saturated exp(-87.3) = 1.2e-38: a softmax divided that by its sum into a
  // subnormal for every masked position of an attention layer, and on Intel cores each subnormal operand of the next
  // product costs a microcode assist (llm_prefill's P x V products 9 ms instead of 0.17 on a Xeon, Emerald Rapids).
  const bool under = x < -87.3f;
  x = std::min(std::max(x, -87.3f), 88.3f);
  const float t = x * 1.44269504088896341f;  // x / ln 2
  // Round to nearest by adding and subtracting 1.5 * 2^23 (std::floor would keep the loop from vectorising).
  const float n = (t + 12582912.0f) - 12582912.0f;
  const float r = x - n * 0.693359375f - n * -2.12194440e-4f;  // x - n ln 2, in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // NaN passes through p; n must not (converting NaN to int is undefined): a select, so loops still vectorise.
  const auto bits = static_cast<std::int32_t>(n == n ? n : 0.0f) + 127;
  return under ? 0.0f : p * std::bit_cast<float>(bits << 23);
}
/// erf(x) with an absolute error below 3e-7 (Abramowitz and Stegun 7.1.26: a degree-5 polynomial in
/// t = 1/(1+p|x|) times exp(-x^2)), whose relative accuracy near 0 is poor: what gelu_erf needs, where 1 + erf(x) is
/// near 1 there (BiasGelu without fast_erf's series near 0: 10-13% less time, bert_base_seq128's 12 of them).
inline float fast_erf_abs(float x) {
  const float a = std::fabs(x);
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  float y = 1.061405429f;
  y = y * t - 1.453152027f;
  y = y * t + 1.421413741f;
  y = y * t - 0.284496736f;
  y = y * t + 0.254829592f;
  return std::copysign(1.0f - y * t * fast_exp(-a * a), x);
}
/// erf(x) with an absolute error below 3e-7 and relative accuracy near 0: its Taylor series for |x| < 0.5, else
/// fast_erf_abs. Both are computed and one selected, so loops stay branch-free.
inline float fast_erf(float x) {
  const float y = fast_erf_abs(x);
  const float x2 = x * x;
  // erf(x) * sqrt(pi) / 2 = x - x^3/3 + x^5/10 - x^7/42 + x^9/216 - x^11/1320 + ...
  float s = -1.0f / 1320.0f;
  s = s * x2 + 1.0f / 216.0f;
  s = s * x2 - 1.0f / 42.0f;
  s = s * x2 + 1.0f / 10.0f;
  s = s * x2 - 1.0f / 3.0f;
  s = s * x2 + 1.0f;
  const float small = 1.12837916709551257f * x * s;
  return std::fabs(x) < 0.5f ? small : y;
}
inline float gelu_erf(float x) { return 0.5f * x * (1.0f + fast_erf_abs(x * 0.70710678118654752f)); }
inline float fast_sigmoid(float x) { return 1.0f / (1.0f + fast_exp(-x)); }

#if defined(__AVX512F__)
/// fast_exp on 16 lanes, written out: the same steps and constants; NaN stays NaN (the clamp passes it on: vmaxps and
/// vminps return their second operand when either is NaN).
inline __m512 fast_exp16(__m512 x) {
  const __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_LT_OQ);
  x = _mm512_min_ps(_mm512_set1_ps(88.3f), _mm512_max_ps(_mm512_set1_ps(-87.3f), x));
  const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
  const __m512 n = _mm512_sub_ps(_mm512_add_ps(t, _mm512_set1_ps(12582912.0f)), _mm512_set1_ps(12582912.0f));
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x));
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(static_cast<__mmask16>(~under), p, _mm512_castsi512_ps(bits));
}
/// gelu_erf on 16 lanes (fast_erf_abs's polynomial and fast_exp16), for code that holds its values in registers, as
/// the SGEMM's epilogue does: its loop of gelu_erf over a stored row was compiled to 8-wide vectors, two rows of a
/// tile at a time at best. Agrees with gelu_erf to a few units in the last place (the compiler may contract either's
/// products into fused multiply-adds differently).
inline __m512 gelu_erf16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 z = _mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f));
  const __m512i sign = _mm512_set1_epi32(static_cast<std::int32_t>(0x80000000u));
  const __m512 a = _mm512_castsi512_ps(_mm512_andnot_si512(sign, _mm512_castps_si512(z)));
  const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), a, one));
  __m512 y = _mm512_set1_ps(1.061405429f);
  y = _mm512_fmadd_ps(y, t, _mm512_set1_ps(-1.453152027f));
  y = _mm512_fmadd_ps(y, t, _mm512_set1_ps(1.421413741f));
  y = _mm512_fmadd_ps(y, t, _mm512_set1_ps(-0.284496736f));
  y = _mm512_fmadd_ps(y, t, _mm512_set1_ps(0.254829592f));
  const __m512 e = fast_exp16(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), a), a));
  const __m512 m = _mm512_fnmadd_ps(_mm512_mul_ps(y, t), e, one);  // 1 - y t exp(-a^2), erf(|z|)
  // copysign(m, z): m's magnitude, z's sign.
  const __m512 erf = _mm512_castsi512_ps(_mm512_or_si512(_mm512_andnot_si512(sign, _mm512_castps_si512(m)),
                                                         _mm512_and_si512(sign, _mm512_castps_si512(z))));
  return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_add_ps(one, erf));
}
#endif

}  // namespace epstack::cpu::impl
