// The packed SGEMM (see sgemm.hpp). Blocking: K in blocks of KC = 256, A in blocks of 20 panels (240 rows x KC, about
// 240 KiB, kept in L2), B one panel at a time (32 columns x KC = 32 KiB, kept in L1) while the micro-kernel runs over
// the A panels of the block.
#include "sgemm.hpp"

#include "fast_math.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace epstack::cpu::impl {

namespace {

// A float at any address: weights read in place from a model file need not be 4-byte aligned. Compiles to one load.
inline float load_float(const void* p) noexcept {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
constexpr std::int64_t mr = sgemm_mr, nr = sgemm_nr, kc_max = sgemm_kc;
constexpr std::int64_t mc_panels = 20;

std::int64_t kblocks(std::int64_t K) { return K == 0 ? 0 : (K + kc_max - 1) / kc_max; }

#if defined(__AVX512F__)
// Rows r[0..15] (16 floats each) become columns: r[c] = the former column c. Unpacks pair rows, then quads of rows
// within each 128-bit lane, then the lanes are exchanged.
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  __m512 u[4][4];  // u[g][m]: in lane L, column 4L + m of rows 4g .. 4g + 3
  for (int g = 0; g < 4; ++g) {
    const auto lo0 = _mm512_castps_pd(t[4 * g]), lo1 = _mm512_castps_pd(t[4 * g + 2]);
    const auto hi0 = _mm512_castps_pd(t[4 * g + 1]), hi1 = _mm512_castps_pd(t[4 * g + 3]);
    u[g][0] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo0, lo1));
    u[g][1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo0, lo1));
    u[g][2] = _mm512_castpd_ps(_mm512_unpacklo_pd(hi0, hi1));
    u[g][3] = _mm512_castpd_ps(_mm512_unpackhi_pd(hi0, hi1));
  }
  for (int m = 0; m < 4; ++m) {
    const __m512 a = _mm512_shuffle_f32x4(u[0][m], u[1][m], 0x44), b = _mm512_shuffle_f32x4(u[0][m], u[1][m], 0xEE);
    const __m512 c = _mm512_shuffle_f32x4(u[2][m], u[3][m], 0x44), d = _mm512_shuffle_f32x4(u[2][m], u[3][m], 0xEE);
    r[m] = _mm512_shuffle_f32x4(a, c, 0x88);
    r[4 + m] = _mm512_shuffle_f32x4(a, c, 0xDD);
    r[8 + m] = _mm512_shuffle_f32x4(b, d, 0x88);
    r[12 + m] = _mm512_shuffle_f32x4(b, d, 0xDD);
  }
}
// Packs `width` (<= 16) columns of a panel, kc deep, from rows of memory (src + j * ld, j < cols <= width: a B stored
// [N, K], or an A stored [M, K]) into out[k * stride + j]: 16x16 blocks through registers (missing columns read as
// zeros), the last k < 16 one by one.
template <int width>
void pack_transposed16(float* out, std::int64_t stride, const float* src, std::int64_t ld, std::int64_t cols, std::int64_t kc) {
  static_assert(width <= 16);
  constexpr auto mask = static_cast<__mmask16>((1u << width) - 1);
  std::int64_t k = 0;
  for (; k + 16 <= kc; k += 16) {
    __m512 r[16];
    for (std::int64_t j = 0; j < 16; ++j) r[j] = j < cols ? _mm512_loadu_ps(src + j * ld + k) : _mm512_setzero_ps();
    transpose16(r);
    for (int q = 0; q < 16; ++q) _mm512_mask_storeu_ps(out + (k + q) * stride, mask, r[q]);
  }
  for (; k < kc; ++k)
    for (std::int64_t j = 0; j < width; ++j) out[k * stride + j] = j < cols ? load_float(src + j * ld + k) : 0.0f;
}
void pack_b_transposed16(float* out, const float* src, std::int64_t ldb, std::int64_t cols, std::int64_t kc) {
  pack_transposed16<16>(out, nr, src, ldb, cols, kc);
}
#endif
}  // namespace

std::size_t packed_a_size(std::int64_t M, std::int64_t K) noexcept {
  return static_cast<std::size_t>(a_panels(M) * mr * std::max<std::int64_t>(K, 1));
}
std::size_t packed_b_size(std::int64_t K, std::int64_t N) noexcept {
  return static_cast<std::size_t>(b_panels(N) * nr * std::max<std::int64_t>(K, 1));
}

void pack_a(float* dst, const float* a, std::int64_t lda, bool ta, std::int64_t M, std::int64_t K) {
  pack_a_panels(dst, a, lda, ta, M, K, 0, a_panels(M));
}

void pack_a_panels(float* dst, const float* a, std::int64_t lda, bool ta, std::int64_t M, std::int64_t K,
                   std::int64_t p0, std::int64_t p1) {
  const std::int64_t panels = a_panels(M), mpad = panels * mr;
  for (std::int64_t kb = 0; kb < kblocks(K); ++kb) {
    const std::int64_t k0 = kb * kc_max, kc = std::min(kc_max, K - k0);
    float* block = dst + k0 * mpad;
    for (std::int64_t p = p0; p < std::min(p1, panels); ++p) {
      float* out = block + p * kc * mr;
      const std::int64_t rows = std::min(mr, M - p * mr);
      if (ta) {
        // A stored [K, M]: row k of the panel is contiguous in memory.
        for (std::int64_t k = 0; k < kc; ++k) {
          const float* src = a + (k0 + k) * lda + p * mr;
          std::int64_t i = 0;
          std::memcpy(out + k * mr, static_cast<const void*>(src), static_cast<std::size_t>(rows) * sizeof(float));
          i = rows;
          for (; i < mr; ++i) out[k * mr + i] = 0.0f;
        }
      } else {
#if defined(__AVX512F__)
        // The panel's rows through 16x16 register transposes (a scalar loop stored one float at a time).
        pack_transposed16<mr>(out, mr, a + p * mr * lda + k0, lda, rows, kc);
#else
        for (std::int64_t i = 0; i < rows; ++i) {
          const float* src = a + (p * mr + i) * lda + k0;
          for (std::int64_t k = 0; k < kc; ++k) out[k * mr + i] = load_float(src + k);
        }
        for (std::int64_t i = rows; i < mr; ++i)
          for (std::int64_t k = 0; k < kc; ++k) out[k * mr + i] = 0.0f;
#endif
      }
    }
  }
}

void gemv_pack_b(float* dst, const float* b, std::int64_t ldb, bool tb, std::int64_t K, std::int64_t N) {
  for (std::int64_t q = 0; q < b_panels(N); ++q) {
    const std::int64_t n0 = q * gemv_panel, cols = std::min<std::int64_t>(gemv_panel, N - n0);
    float* out = dst + q * K * gemv_panel;
    if (!tb) {
      for (std::int64_t k = 0; k < K; ++k) {
        std::memcpy(out + k * nr, static_cast<const void*>(b + k * ldb + n0), static_cast<std::size_t>(cols) * sizeof(float));
        std::fill(out + k * nr + cols, out + (k + 1) * nr, 0.0f);
      }
      continue;
    }
    // B stored [N, K]: the panel's columns are rows of memory, transposed as pack_b does.
#if defined(__AVX512F__)
    for (std::int64_t j0 = 0; j0 < nr; j0 += 16) {
      const std::int64_t c = std::clamp<std::int64_t>(cols - j0, 0, 16);
      pack_b_transposed16(out + j0, c > 0 ? b + (n0 + j0) * ldb : b, ldb, c, K);
    }
#else
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t j = 0; j < nr; ++j) out[k * nr + j] = j < cols ? load_float(b + (n0 + j) * ldb + k) : 0.0f;
#endif
  }
}

void pack_b(float* dst, const float* b, std::int64_t ldb, bool tb, std::int64_t K, std::int64_t N) {
  const std::int64_t panels = b_panels(N), npad = panels * nr;
  for (std::int64_t kb = 0; kb < kblocks(K); ++kb) {
    const std::int64_t k0 = kb * kc_max, kc = std::min(kc_max, K - k0);
    float* block = dst + k0 * npad;
    for (std::int64_t q = 0; q < panels; ++q) {
      float* out = block + q * kc * nr;
      const std::int64_t cols = std::min(nr, N - q * nr);
      if (!tb) {
        for (std::int64_t k = 0; k < kc; ++k) {
          const float* src = b + (k0 + k) * ldb + q * nr;
          std::memcpy(out + k * nr, static_cast<const void*>(src), static_cast<std::size_t>(cols) * sizeof(float));
          for (std::int64_t j = cols; j < nr; ++j) out[k * nr + j] = 0.0f;
        }
      } else {
        // B stored [N, K]: column j of the panel is row q*nr + j of memory.
#if defined(__AVX512F__)
        // Transposed 16x16 at a time (a transformer's K^T per head at run time; classifier weights at create):
        // 4-6x faster than a store per element.
        static_assert(nr % 16 == 0);
        for (std::int64_t j0 = 0; j0 < nr; j0 += 16) {
          const std::int64_t c = std::clamp<std::int64_t>(cols - j0, 0, 16);
          pack_b_transposed16(out + j0, c > 0 ? b + (q * nr + j0) * ldb + k0 : b, ldb, c, kc);
        }
#else
        for (std::int64_t j = 0; j < cols; ++j) {
          const float* src = b + (q * nr + j) * ldb + k0;
          for (std::int64_t k = 0; k < kc; ++k) out[k * nr + j] = load_float(src + k);
        }
        for (std::int64_t j = cols; j < nr; ++j)
          for (std::int64_t k = 0; k < kc; ++k) out[k * nr + j] = 0.0f;
#endif
      }
    }
  }
}

void sgemm_apply_epilogue(const sgemm_epilogue& ep, float* c, std::int64_t ldc, std::int64_t i0, std::int64_t i1,
                          std::int64_t j0, std::int64_t j1) {
  for (std::int64_t i = i0; i < i1; ++i) {
    float* row = c + i * ldc;
    for (std::int64_t j = j0; j < j1; ++j) {
      float v = row[j];
      if (ep.bias != nullptr) v += ep.bias[i];
      if (ep.z != nullptr) v += ep.z[i * ep.ldz + j];
      if (ep.activation == sgemm_epilogue::act::relu) v = std::max(v, 0.0f);
      else if (ep.activation == sgemm_epilogue::act::clip) v = std::min(std::max(v, ep.lo), ep.hi);
      else if (ep.activation == sgemm_epilogue::act::gelu) v = gelu_erf(v);
      row[j] = v;
    }
  }
}

#if defined(__AVX512F__)

bool sgemm_packed_available() noexcept { return true; }

namespace {

// Applies the epilogue to one row of a tile stored in C (masks m0, m1).
inline void finish_row(float* ci, __mmask16 m0, __mmask16 m1, const sgemm_epilogue* ep, std::int64_t row,
                       std::int64_t col0) {
  __m512 x0 = _mm512_maskz_loadu_ps(m0, ci), x1 = _mm512_maskz_loadu_ps(m1, ci + 16);
  if (ep->bias != nullptr) {
    const __m512 bv = _mm512_set1_ps(ep->bias[row]);
    x0 = _mm512_add_ps(x0, bv);
    x1 = _mm512_add_ps(x1, bv);
  }
  if (ep->z != nullptr) {
    const float* zi = ep->z + row * ep->ldz + col0;
    x0 = _mm512_add_ps(x0, _mm512_maskz_loadu_ps(m0, zi));
    x1 = _mm512_add_ps(x1, _mm512_maskz_loadu_ps(m1, zi + 16));
  }
  if (ep->activation == sgemm_epilogue::act::relu) {
    // max(0, x): vmaxps returns its second operand when either is NaN, so NaN stays NaN (as the Relu node's).
    x0 = _mm512_max_ps(_mm512_setzero_ps(), x0);
    x1 = _mm512_max_ps(_mm512_setzero_ps(), x1);
  } else if (ep->activation == sgemm_epilogue::act::clip) {
    const __m512 lo = _mm512_set1_ps(ep->lo), hi = _mm512_set1_ps(ep->hi);
    x0 = _mm512_min_ps(_mm512_max_ps(x0, lo), hi);
    x1 = _mm512_min_ps(_mm512_max_ps(x1, lo), hi);
  } else if (ep->activation == sgemm_epilogue::act::gelu) {
    // The tile is still in L1, where a Gelu (BiasGelu) node after the product read and wrote Y from memory once more.
    x0 = gelu_erf16(x0);
    x1 = gelu_erf16(x1);
  }
  _mm512_mask_storeu_ps(ci, m0, x0);
  _mm512_mask_storeu_ps(ci + 16, m1, x1);
}

// The epilogue on rows [row0, row0 + rows) of a tile already stored in C (so in L1): the kernels store their
// accumulators first, since a call made while they are live would spill all of them (no vector register survives a
// call) and reload them, 24 times a tile.
[[gnu::noinline]] void finish_tile(float* c, std::int64_t ldc, int rows, __mmask16 m0, __mmask16 m1,
                                   const sgemm_epilogue* ep, std::int64_t row0, std::int64_t col0) {
  for (int i = 0; i < rows; ++i) finish_row(c + i * ldc, m0, m1, ep, row0 + i, col0);
}

// Stores one row's accumulators x0, x1 (masks m0, m1) times alpha, plus C when load_c. alpha * x + C is one FMA,
// written as one: inlined into the unrolled loop, a multiply and an add were contracted into an FMA for some rows and
// not others (GCC's -ffp-contract=fast), so a row's rounding depended on its place in the tile.
inline void store_row(float* ci, __m512 x0, __m512 x1, __mmask16 m0, __mmask16 m1, float alpha, bool load_c) {
  const __m512 c0 = load_c ? _mm512_maskz_loadu_ps(m0, ci) : _mm512_setzero_ps();
  const __m512 c1 = load_c ? _mm512_maskz_loadu_ps(m1, ci + 16) : _mm512_setzero_ps();
  if (alpha != 1.0f) {
    const __m512 va = _mm512_set1_ps(alpha);
    x0 = load_c ? _mm512_fmadd_ps(x0, va, c0) : _mm512_mul_ps(x0, va);
    x1 = load_c ? _mm512_fmadd_ps(x1, va, c1) : _mm512_mul_ps(x1, va);
  } else if (load_c) {
    x0 = _mm512_add_ps(x0, c0);
    x1 = _mm512_add_ps(x1, c1);
  }
  _mm512_mask_storeu_ps(ci, m0, x0);
  _mm512_mask_storeu_ps(ci + 16, m1, x1);
}

// C[R rows, up to 32 columns] (masks m0, m1) = alpha * (A panel x B panel) (+ C when load_c), then the epilogue
// when `ep` is given. B rows are `bs` floats apart (32 when packed).
template <int R, bool Packed>
inline void micro_kernel(std::int64_t kc, const float* __restrict a, const float* __restrict b, std::int64_t bs, float* c,
                         std::int64_t ldc, __mmask16 m0, __mmask16 m1, float alpha, bool load_c, const sgemm_epilogue* ep,
                         std::int64_t row0, std::int64_t col0, const char* pf, int pfi) {
  __m512 c0[R], c1[R];
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) {
    c0[i] = _mm512_setzero_ps();
    c1[i] = _mm512_setzero_ps();
  }
  // Packed panels are aligned and zero-padded: plain loads, a constant stride. A matrix read in place needs masks at
  // its right edge (past it lies the next row, or the end of the buffer).
  if constexpr (Packed) bs = nr;
  // C is read back as the block ends (a K block after the first): its rows, ldc apart (4 or 12 KiB in a transformer's
  // products, so all in one set of the L1 cache), are fetched now, under the block's 256 k of arithmetic, instead of
  // one row after another at the end. 1.2-2.5% less time on products of 2 to 4 K blocks (in-process A/B, paired).
  if (load_c) {
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16), _MM_HINT_T0);
    }
  }
  int pf_in = 1;  // k steps to the next line of `pf`
#pragma GCC unroll 2
  for (std::int64_t k = 0; k < kc; ++k) {
    if constexpr (Packed) {  // a line of `pf` every `pfi` k (see sgemm_panels)
      if (--pf_in == 0 && pf != nullptr) {
        _mm_prefetch(pf, _MM_HINT_T1);
        pf += 64;
        pf_in = pfi;
      }
    }
    const __m512 b0 = Packed ? _mm512_load_ps(b) : _mm512_maskz_loadu_ps(m0, b);
    const __m512 b1 = Packed ? _mm512_load_ps(b + 16) : _mm512_maskz_loadu_ps(m1, b + 16);
    if constexpr (!Packed) {
      // B read in place is one stream per row of the K block, more than the hardware prefetchers follow: fetch the
      // same row of the next panel (32 columns on) while this one is multiplied. (Prefetches never fault.)
      _mm_prefetch(reinterpret_cast<const char*>(b + nr), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(b + nr + 16), _MM_HINT_T0);
    }
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) {
      const __m512 ai = _mm512_set1_ps(a[i]);
      c0[i] = _mm512_fmadd_ps(ai, b0, c0[i]);
      c1[i] = _mm512_fmadd_ps(ai, b1, c1[i]);
    }
    a += mr;
    b += bs;
  }
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) store_row(c + i * ldc, c0[i], c1[i], m0, m1, alpha, load_c);
  if (ep != nullptr) finish_tile(c, ldc, R, m0, m1, ep, row0, col0);
}

// The narrow variant for a B panel of at most 16 columns (mask m0): two A panels at once, a full one (12 rows) and
// one of R rows, so that every FMA does useful work (the wide kernel would spend half of them on zero columns).
template <int R, bool Packed>
inline void narrow_kernel(std::int64_t kc, const float* __restrict a, const float* __restrict a2, const float* __restrict b,
                          std::int64_t bs, float* c, std::int64_t ldc, __mmask16 m0, float alpha, bool load_c,
                          const sgemm_epilogue* ep, std::int64_t row0, std::int64_t col0) {
  __m512 c0[mr], c2[R > 0 ? R : 1];
#pragma GCC unroll 12
  for (int i = 0; i < mr; ++i) c0[i] = _mm512_setzero_ps();
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) c2[i] = _mm512_setzero_ps();
  if constexpr (Packed) bs = nr;
#pragma GCC unroll 2
  for (std::int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = Packed ? _mm512_load_ps(b) : _mm512_maskz_loadu_ps(m0, b);
#pragma GCC unroll 12
    for (int i = 0; i < mr; ++i) c0[i] = _mm512_fmadd_ps(_mm512_set1_ps(a[i]), b0, c0[i]);
#pragma GCC unroll 12
    for (int i = 0; i < R; ++i) c2[i] = _mm512_fmadd_ps(_mm512_set1_ps(a2[i]), b0, c2[i]);
    a += mr;
    a2 += mr;
    b += bs;
  }
  const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 12
  for (int i = 0; i < mr; ++i) store_row(c + i * ldc, c0[i], zero, m0, 0, alpha, load_c);
#pragma GCC unroll 12
  for (int i = 0; i < R; ++i) store_row(c + (mr + i) * ldc, c2[i], zero, m0, 0, alpha, load_c);
  if (ep != nullptr) finish_tile(c, ldc, mr + R, m0, 0, ep, row0, col0);
}

using narrow_fn = void (*)(std::int64_t, const float*, const float*, const float*, std::int64_t, float*, std::int64_t,
                           __mmask16, float, bool, const sgemm_epilogue*, std::int64_t, std::int64_t);
template <bool Packed, std::size_t... I>
constexpr std::array<narrow_fn, sizeof...(I)> make_narrow(std::index_sequence<I...>) {
  return {narrow_kernel<static_cast<int>(I) + 1, Packed>...};
}
// narrow_kernels<P>[r - 1]: a full panel and one of r rows (1 to 12).
template <bool Packed>
constexpr auto narrow_kernels = make_narrow<Packed>(std::make_index_sequence<mr>{});

using kernel_fn = void (*)(std::int64_t, const float*, const float*, std::int64_t, float*, std::int64_t, __mmask16, __mmask16,
                           float, bool, const sgemm_epilogue*, std::int64_t, std::int64_t, const char*, int);
template <bool Packed>
constexpr kernel_fn kernels[mr + 1] = {nullptr,
                                       micro_kernel<1, Packed>,
                                       micro_kernel<2, Packed>,
                                       micro_kernel<3, Packed>,
                                       micro_kernel<4, Packed>,
                                       micro_kernel<5, Packed>,
                                       micro_kernel<6, Packed>,
                                       micro_kernel<7, Packed>,
                                       micro_kernel<8, Packed>,
                                       micro_kernel<9, Packed>,
                                       micro_kernel<10, Packed>,
                                       micro_kernel<11, Packed>,
                                       micro_kernel<12, Packed>};

// The blocked product over packed or in-place B panels, one instantiation each (so a program whose products all
// read packed B links only those kernels: the deployables).
template <bool packed>
void sgemm_panels(std::int64_t M, std::int64_t N, std::int64_t K, const float* pa, sgemm_b b, float* c, std::int64_t ldc,
                  float alpha, bool accumulate, const sgemm_epilogue* ep, std::int64_t p0, std::int64_t p1, std::int64_t q0,
                  std::int64_t q1) {
  if (M == 0 || N == 0) return;
  const std::int64_t mpad = a_panels(M) * mr, npad = b_panels(N) * nr;
  if (K == 0) {
    if (!accumulate)
      for (std::int64_t i = p0 * mr; i < std::min(M, p1 * mr); ++i)
        std::fill(c + i * ldc + q0 * nr, c + i * ldc + std::min(N, q1 * nr), 0.0f);
    if (ep != nullptr) sgemm_apply_epilogue(*ep, c, ldc, p0 * mr, std::min(M, p1 * mr), q0 * nr, std::min(N, q1 * nr));
    return;
  }
  const std::int64_t nkb = kblocks(K);
  for (std::int64_t kb = 0; kb < nkb; ++kb) {
    const std::int64_t k0 = kb * kc_max, kc = std::min(kc_max, K - k0);
    const bool load_c = accumulate || kb > 0;
    const sgemm_epilogue* last = kb + 1 == nkb ? ep : nullptr;
    const float* ablock = pa + k0 * mpad;
    for (std::int64_t m0 = p0; m0 < p1; m0 += mc_panels) {
      const std::int64_t m1 = std::min(p1, m0 + mc_panels);
      for (std::int64_t q = q0; q < q1; ++q) {
        const float* bp = packed ? b.data + k0 * npad + q * kc * nr : b.data + k0 * b.ld + q * nr;
        const std::int64_t bs = packed ? nr : b.ld;
        const std::int64_t cols = std::min(nr, N - q * nr);
        const auto mask0 = static_cast<__mmask16>(cols >= 16 ? 0xFFFF : (1u << cols) - 1);
        const auto mask1 = static_cast<__mmask16>(cols >= 32 ? 0xFFFF : cols <= 16 ? 0 : (1u << (cols - 16)) - 1);
        // The next B panel this loop reads (the next column panel; after the last, the first of this range for the
        // next block of A panels, or of the next K block): each call on this panel fetches the next part of it into
        // L2 (micro_kernel's `pf`, a line every `pfi` k: below), so that its first call finds there what the calls
        // before covered (all of it, from as many calls as there are A panels). Without, the first call on a panel read
        // it from memory as a burst (32 KiB in the time of 3072 FMAs) and the memory idled during the other calls:
        // weights that a model's run reads once (not in cache) cost llm_prefill 2-4% and BERT-base 3-5% on the CPU
        // provider (interleaved runs).
        const char* next = nullptr;
        std::int64_t next_bytes = 0;
        if (packed) {
          if (q + 1 < q1) next = reinterpret_cast<const char*>(bp + kc * nr), next_bytes = kc * nr * 4;
          else if (m1 < p1) next = reinterpret_cast<const char*>(b.data + k0 * npad + q0 * kc * nr), next_bytes = kc * nr * 4;
          else if (kb + 1 < nkb) {
            const std::int64_t kc2 = std::min(kc_max, K - k0 - kc);
            next = reinterpret_cast<const char*>(b.data + (k0 + kc) * npad + q0 * kc2 * nr), next_bytes = kc2 * nr * 4;
          } else if (q1 * nr < npad) {  // the first panel past this range: the pool's next chunk, on this thread mostly
            const std::int64_t kc2 = std::min(kc_max, K);
            next = reinterpret_cast<const char*>(b.data + q1 * kc2 * nr), next_bytes = kc2 * nr * 4;
          }
        }
        // A line every `pfi` k (1 to 4): just often enough for the calls on this panel (one per A panel) to cover
        // the next one, and one line at a time. Two lines every 8 k for any count of rows left a product of 64 rows
        // (6 A panels: 384 of the 512 lines) to read the rest of each panel from memory as its first call needed it
        // (mlp_b64 9-10% slower, paired runs); fetching earlier than needed was no better (the panel covered in three
        // quarters of the calls: 3.5-5% slower), and lines in bursts were slower than one at a time (2 every 8 k
        // against 1 every 4: BERT-base and llm_prefill 1.3-1.4%).
        const std::int64_t calls = std::max<std::int64_t>(1, m1 - m0), lines = (next_bytes + 63) / 64;
        const int pfi = static_cast<int>(std::clamp<std::int64_t>(calls * kc / std::max<std::int64_t>(1, lines), 1, 4));
        const auto pf_for = [&](std::int64_t j) -> const char* {  // the part for the j-th call on this panel
          const std::int64_t off = j * ((kc + pfi - 1) / pfi) * 64;
          return next != nullptr && off < next_bytes ? next + off : nullptr;
        };
        std::int64_t p = m0;
        if (cols <= 16)  // pairs of A panels through the narrow kernel
          for (; p + 1 < m1; p += 2) {
            const std::int64_t rows2 = std::min(mr, M - (p + 1) * mr);
            narrow_kernels<packed>[rows2 - 1](
                kc, ablock + p * kc * mr, ablock + (p + 1) * kc * mr, bp, bs, c + p * mr * ldc + q * nr, ldc, mask0, alpha,
                load_c, last, p * mr, q * nr);
          }
        for (; p < m1; ++p) {
          const std::int64_t rows = std::min(mr, M - p * mr);
          kernels<packed>[rows](kc, ablock + p * kc * mr, bp, bs, c + p * mr * ldc + q * nr, ldc, mask0, mask1, alpha, load_c,
                                last, p * mr, q * nr, pf_for(p - m0), pfi);
        }
      }
    }
  }
}

}  // namespace

void sgemm(std::int64_t M, std::int64_t N, std::int64_t K, const float* pa, sgemm_b b, float* c, std::int64_t ldc,
           float alpha, bool accumulate, const sgemm_epilogue* ep, std::int64_t p0, std::int64_t p1, std::int64_t q0,
           std::int64_t q1) {
  if (b.ld == 0) sgemm_panels<true>(M, N, K, pa, b, c, ldc, alpha, accumulate, ep, p0, p1, q0, q1);
  else sgemm_panels<false>(M, N, K, pa, b, c, ldc, alpha, accumulate, ep, p0, p1, q0, q1);
}
void sgemm_pb(std::int64_t M, std::int64_t N, std::int64_t K, const float* pa, const float* pb, float* c, std::int64_t ldc,
              float alpha, bool accumulate, const sgemm_epilogue* ep, std::int64_t p0, std::int64_t p1, std::int64_t q0,
              std::int64_t q1) {
  sgemm_panels<true>(M, N, K, pa, sgemm_b{pb, 0}, c, ldc, alpha, accumulate, ep, p0, p1, q0, q1);
}

#else

bool sgemm_packed_available() noexcept { return false; }

// Without AVX-512 the packed path is not used (gemm_block falls back to Eigen); a portable kernel keeps the entry
// point correct for callers that pack anyway.
void sgemm(std::int64_t M, std::int64_t N, std::int64_t K, const float* pa, sgemm_b b, float* c, std::int64_t ldc,
           float alpha, bool accumulate, const sgemm_epilogue* ep, std::int64_t p0, std::int64_t p1, std::int64_t q0,
           std::int64_t q1) {
  const std::int64_t mpad = a_panels(M) * mr, npad = b_panels(N) * nr;
  const std::int64_t i0 = p0 * mr, i1 = std::min(M, p1 * mr), j0 = q0 * nr, j1 = std::min(N, q1 * nr);
  for (std::int64_t i = i0; i < i1; ++i)
    for (std::int64_t j = j0; j < j1; ++j) {
      float acc = 0.0f;
      for (std::int64_t k = 0; k < K; ++k) {
        const std::int64_t kb = k / kc_max, k0 = kb * kc_max, kc = std::min(kc_max, K - k0), kk = k - k0;
        const float av = pa[k0 * mpad + (i / mr) * kc * mr + kk * mr + i % mr];
        const float bv = b.ld == 0 ? b.data[k0 * npad + (j / nr) * kc * nr + kk * nr + j % nr] : b.data[k * b.ld + j];
        acc += av * bv;
      }
      c[i * ldc + j] = alpha * acc + (accumulate ? c[i * ldc + j] : 0.0f);
    }
  if (ep != nullptr) sgemm_apply_epilogue(*ep, c, ldc, i0, i1, j0, j1);
}
void sgemm_pb(std::int64_t M, std::int64_t N, std::int64_t K, const float* pa, const float* pb, float* c, std::int64_t ldc,
              float alpha, bool accumulate, const sgemm_epilogue* ep, std::int64_t p0, std::int64_t p1, std::int64_t q0,
              std::int64_t q1) {
  sgemm(M, N, K, pa, sgemm_b{pb, 0}, c, ldc, alpha, accumulate, ep, p0, p1, q0, q1);
}

#endif

}  // namespace epstack::cpu::impl
