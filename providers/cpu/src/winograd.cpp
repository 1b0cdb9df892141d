// Winograd F(2x2, 3x3) convolution: see winograd.hpp. Matrices (Lavin and Gray, 2016):
//   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]         U = G g G^T   (4x4 per output and input channel)
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]            V = B^T d B   (4x4 per tile and input channel)
//   A^T = [1 1 1 0; 0 1 -1 -1]                               Y = A^T M A   (2x2 per tile and output channel)
// with M = sum over input channels of U . V, i.e. for each of the 16 positions a matrix product [M x C] x [C x tiles].
#include "winograd.hpp"

#include "kernel_util.hpp"

#include <epstack/core/weight_memory.hpp>
#include <epstack/detail/winograd_f23.hpp>

#include <algorithm>
#include <cstring>
#include <new>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace epstack::cpu::impl {

#if defined(__AVX512F__)

bool winograd_available() noexcept { return true; }

winograd_weights winograd_pack(const float* w, std::int64_t M, std::int64_t C) {
  winograd_weights r;
  r.M = M;
  r.C = C;
  r.stride = (packed_a_size(M, C) + 15) / 16 * 16;
  const std::size_t bytes = r.stride * 16 * sizeof(float);
  auto mem = epstack::allocate_weight_floats(bytes / sizeof(float));
  float* data = mem.get();
  // Each filter's 16 transformed values go straight to their places in the 16 packed matrices U[xi] (M x C): no
  // intermediate copy, one pass over the weights. Rows past M in the last panel are zero, as pack_a leaves them.
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t c = 0; c < C; ++c) {
      // W may sit unaligned in a mapped model file: each filter is read bytewise.
      float g[9], u[16];
      std::memcpy(g, reinterpret_cast<const char*>(w) + (m * C + c) * 9 * static_cast<std::int64_t>(sizeof(float)), sizeof g);
      epstack::detail::winograd_f23_filter(g, u);
      float* at = data + packed_a_offset(M, C, m, c);
      for (int xi = 0; xi < 16; ++xi) at[xi * static_cast<std::int64_t>(r.stride)] = u[xi];
    }
  for (std::int64_t m = M; m < a_panels(M) * sgemm_mr; ++m)
    for (std::int64_t c = 0; c < C; ++c)
      for (int xi = 0; xi < 16; ++xi) data[xi * static_cast<std::int64_t>(r.stride) + packed_a_offset(M, C, m, c)] = 0.0f;
  r.data = std::move(mem);
  return r;
}

std::size_t winograd_scratch_floats(const winograd_shape& s) {
  // V: 16 x C x T; products: 16 x M x T; each block 64-byte aligned.
  const auto t = static_cast<std::size_t>(s.tiles());
  return 16 * static_cast<std::size_t>(s.C) * t + 16 * static_cast<std::size_t>(s.M) * t + 64;
}

namespace {

// Lanes e of a 16-float load at column c0 with 0 <= c0 + e < width.
inline __mmask16 lanes_in(std::int64_t c0, std::int64_t width) {
  const std::int64_t a = std::clamp<std::int64_t>(-c0, 0, 16), b = std::clamp<std::int64_t>(width - c0, 0, 16);
  if (b <= a) return 0;
  return static_cast<__mmask16>((b == 16 ? 0xFFFFu : (1u << b) - 1) & ~((1u << a) - 1));
}
inline __mmask16 first_lanes(std::int64_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xFFFFu : n <= 0 ? 0u : (1u << n) - 1);
}

// Input transform of channel plane `x` (H x W) for every tile: V[xi][t] (16 rows, `ld` floats apart).
void input_transform(const winograd_shape& s, const float* x, float* v, std::int64_t ld) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const std::int64_t TH = s.tiles_h(), TW = s.tiles_w();
  for (std::int64_t ty = 0; ty < TH; ++ty)
    for (std::int64_t tx0 = 0; tx0 < TW; tx0 += 16) {
      const std::int64_t c0 = 2 * tx0 - s.pad_left;
      __m512 t[4][4];  // t[row][column] after the column transform
      for (int k = 0; k < 4; ++k) {
        const std::int64_t r = 2 * ty - s.pad_top + k;
        if (r < 0 || r >= s.H) {
          for (auto& e : t[k]) e = _mm512_setzero_ps();
          continue;
        }
        const float* row = x + r * s.W;
        const __m512 a0 = _mm512_maskz_loadu_ps(lanes_in(c0, s.W), row + c0);
        const __m512 a1 = _mm512_maskz_loadu_ps(lanes_in(c0 + 16, s.W), row + c0 + 16);
        const __m512 b0 = _mm512_maskz_loadu_ps(lanes_in(c0 + 2, s.W), row + c0 + 2);
        const __m512 b1 = _mm512_maskz_loadu_ps(lanes_in(c0 + 18, s.W), row + c0 + 18);
        const __m512 d0 = _mm512_permutex2var_ps(a0, even, a1), d1 = _mm512_permutex2var_ps(a0, odd, a1);
        const __m512 d2 = _mm512_permutex2var_ps(b0, even, b1), d3 = _mm512_permutex2var_ps(b0, odd, b1);
        t[k][0] = _mm512_sub_ps(d0, d2);
        t[k][1] = _mm512_add_ps(d1, d2);
        t[k][2] = _mm512_sub_ps(d2, d1);
        t[k][3] = _mm512_sub_ps(d1, d3);
      }
      const __mmask16 store = first_lanes(TW - tx0);
      float* out = v + ty * TW + tx0;
      for (int j = 0; j < 4; ++j) {
        _mm512_mask_storeu_ps(out + (0 * 4 + j) * ld, store, _mm512_sub_ps(t[0][j], t[2][j]));
        _mm512_mask_storeu_ps(out + (1 * 4 + j) * ld, store, _mm512_add_ps(t[1][j], t[2][j]));
        _mm512_mask_storeu_ps(out + (2 * 4 + j) * ld, store, _mm512_sub_ps(t[2][j], t[1][j]));
        _mm512_mask_storeu_ps(out + (3 * 4 + j) * ld, store, _mm512_sub_ps(t[1][j], t[3][j]));
      }
    }
}

// Output transform of channel m: products P[xi][t] (16 rows, `ld` floats apart) to y (OH x OW), with bias, the
// residual z (laid out like y, or null) and the activation.
void output_transform(const winograd_shape& s, const float* p, std::int64_t ld, float bias, const float* z,
                      const sgemm_epilogue& ep, float* y) {
  const __m512i lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi_idx = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const std::int64_t TH = s.tiles_h(), TW = s.tiles_w();
  const __m512 vb = _mm512_set1_ps(bias), vlo = _mm512_set1_ps(ep.lo), vhi = _mm512_set1_ps(ep.hi);
  for (std::int64_t ty = 0; ty < TH; ++ty)
    for (std::int64_t tx0 = 0; tx0 < TW; tx0 += 16) {
      const __mmask16 in = first_lanes(TW - tx0);
      const float* src = p + ty * TW + tx0;
      __m512 m[4][4];
      for (int xi = 0; xi < 16; ++xi) m[xi / 4][xi % 4] = _mm512_maskz_loadu_ps(in, src + xi * ld);
      __m512 srow[2][4];
      for (int j = 0; j < 4; ++j) {
        srow[0][j] = _mm512_add_ps(_mm512_add_ps(m[0][j], m[1][j]), m[2][j]);
        srow[1][j] = _mm512_sub_ps(_mm512_sub_ps(m[1][j], m[2][j]), m[3][j]);
      }
      for (int i = 0; i < 2; ++i) {
        const std::int64_t oh = 2 * ty + i;
        if (oh >= s.OH) break;
        const __m512 y0 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(srow[i][0], srow[i][1]), srow[i][2]), vb);
        const __m512 y1 = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(srow[i][1], srow[i][2]), srow[i][3]), vb);
        __m512 lo = _mm512_permutex2var_ps(y0, lo_idx, y1), hi = _mm512_permutex2var_ps(y0, hi_idx, y1);
        const std::int64_t col = 2 * tx0;
        const __mmask16 mlo = first_lanes(s.OW - col), mhi = first_lanes(s.OW - col - 16);
        float* out = y + oh * s.OW + col;
        if (z != nullptr) {
          const float* zr = z + oh * s.OW + col;
          lo = _mm512_add_ps(lo, _mm512_maskz_loadu_ps(mlo, zr));
          hi = _mm512_add_ps(hi, _mm512_maskz_loadu_ps(mhi, zr + 16));
        }
        if (ep.activation == sgemm_epilogue::act::relu) {
          lo = _mm512_max_ps(lo, _mm512_setzero_ps());
          hi = _mm512_max_ps(hi, _mm512_setzero_ps());
        } else if (ep.activation == sgemm_epilogue::act::clip) {
          lo = _mm512_min_ps(_mm512_max_ps(lo, vlo), vhi);
          hi = _mm512_min_ps(_mm512_max_ps(hi, vlo), vhi);
        }
        _mm512_mask_storeu_ps(out, mlo, lo);
        _mm512_mask_storeu_ps(out + 16, mhi, hi);
      }
    }
}

}  // namespace

void winograd_conv(const compute_context& ctx, const winograd_shape& s, const winograd_weights& wts, const float* x,
                   float* y, const sgemm_epilogue& ep, float* scratch) {
  const std::int64_t T = s.tiles();
  float* v = align64(scratch);                       // 16 x C x T
  float* prod = align64(v + 16 * s.C * T);           // 16 x M x T
  const std::int64_t vstride = s.C * T, pstride = s.M * T;
  // 1. Input transform, channels across the threads.
  parallel_items(ctx, static_cast<std::size_t>(s.C), static_cast<std::size_t>(s.H * s.W * 8), [&](std::size_t c0, std::size_t c1) {
    for (std::size_t c = c0; c < c1; ++c)
      input_transform(s, x + static_cast<std::int64_t>(c) * s.H * s.W, v + static_cast<std::int64_t>(c) * T, vstride);
  });
  // 2. Sixteen products [M x C] x [C x T], across the threads.
  ctx.parallel_for(16, 1, [&](std::size_t x0, std::size_t x1) {
    for (std::size_t xi = x0; xi < x1; ++xi)
      sgemm(s.M, T, s.C, wts.data.get() + xi * wts.stride, sgemm_b{v + static_cast<std::int64_t>(xi) * vstride, T},
            prod + static_cast<std::int64_t>(xi) * pstride, T, 1.0f, false, nullptr, 0, a_panels(s.M), 0, b_panels(T));
  });
  // 3. Output transform with the epilogue, output channels across the threads.
  parallel_items(ctx, static_cast<std::size_t>(s.M), static_cast<std::size_t>(s.OH * s.OW * 4), [&](std::size_t m0, std::size_t m1) {
    for (std::size_t m = m0; m < m1; ++m) {
      const auto mm = static_cast<std::int64_t>(m);
      output_transform(s, prod + mm * T, pstride, ep.bias != nullptr ? ep.bias[m] : 0.0f,
                       ep.z != nullptr ? ep.z + mm * s.OH * s.OW : nullptr, ep, y + mm * s.OH * s.OW);
    }
  });
}

#else

bool winograd_available() noexcept { return false; }
winograd_weights winograd_pack(const float*, std::int64_t, std::int64_t) { return {}; }
std::size_t winograd_scratch_floats(const winograd_shape&) { return 0; }
void winograd_conv(const compute_context&, const winograd_shape&, const winograd_weights&, const float*, float*,
                   const sgemm_epilogue&, float*) {}

#endif

}  // namespace epstack::cpu::impl
