#pragma once
// Helpers shared by the attention kernels (Attention in attention.cpp, FlexAttention in flex_attention.cpp): value
// conversions between the input and compute types (float16 and bfloat16 through float), and row reductions and dot
// products in independent accumulators. Private to the epstack::cpu library.
#include "kernel_util.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace epstack::cpu::impl {

/// `v` as To; float16 and bfloat16 go through float.
template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) return v;
  else if constexpr (is_half_v<To>) return To(static_cast<float>(v));
  else if constexpr (is_half_v<From>) return static_cast<To>(static_cast<float>(v));
  else return static_cast<To>(v);
}

/// Converts n values (a plain copy when the types are equal, nothing when src is dst).
template <class To, class From>
inline void convert_n(const From* src, std::int64_t n, To* dst) {
  if constexpr (std::is_same_v<To, From>) {
    if (n > 0 && static_cast<const void*>(src) != static_cast<const void*>(dst))
      std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(To));
  } else {
    for (std::int64_t i = 0; i < n; ++i) dst[i] = convert<To>(src[i]);
  }
}

// Sum and max of x[0, n) in `lanes` independent accumulators (vectorisable without reassociation).
template <class C>
inline C row_sum(const C* x, std::int64_t n) {
  C acc[lanes] = {};
  std::int64_t i = 0;
  constexpr auto L = static_cast<std::int64_t>(lanes);
  for (; i + L <= n; i += L)
    for (std::int64_t j = 0; j < L; ++j) acc[j] += x[i + j];
  for (std::int64_t j = 0; i + j < n; ++j) acc[j] += x[i + j];
  return fold_lanes(acc, [](C a, C b) { return a + b; });
}
template <class C>
inline C row_max(const C* x, std::int64_t n) {  // n > 0; NaNs after the first element are skipped (they reach the sum)
  C acc[lanes];
  for (std::size_t j = 0; j < lanes; ++j) acc[j] = x[0];
  std::int64_t i = 0;
  constexpr auto L = static_cast<std::int64_t>(lanes);
  for (; i + L <= n; i += L)
    for (std::int64_t j = 0; j < L; ++j) acc[j] = acc[j] < x[i + j] ? x[i + j] : acc[j];
  for (std::int64_t j = 0; i + j < n; ++j) acc[j] = acc[j] < x[i + j] ? x[i + j] : acc[j];
  return fold_lanes(acc, [](C a, C b) { return a < b ? b : a; });
}
// Dot product of a[0, n) and b[0, n), in 16 independent lanes.
template <class C>
inline C dot(const C* a, const C* b, std::int64_t n) {
  constexpr std::int64_t L = 16;
  C acc[L] = {};
  std::int64_t i = 0;
  for (; i + L <= n; i += L)
    for (std::int64_t j = 0; j < L; ++j) acc[j] += a[i + j] * b[i + j];
  for (std::int64_t j = 0; i + j < n; ++j) acc[j] += a[i + j] * b[i + j];
  for (std::int64_t j = 0; j < 8; ++j) acc[j] += acc[j + 8];
  for (std::int64_t j = 0; j < 4; ++j) acc[j] += acc[j + 4];
  return (acc[0] + acc[2]) + (acc[1] + acc[3]);
}

}  // namespace epstack::cpu::impl
