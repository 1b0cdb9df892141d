#pragma once
// Vectorisable float math for the CPU provider's kernels: plain float arithmetic, no branches, so that compilers
// vectorise loops over these (element-wise kernels, and the SGEMM's epilogue, which applies GELU as a tile is stored).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

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

}  // namespace epstack::cpu::impl
