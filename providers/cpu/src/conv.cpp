// Convolution: Conv and the contrib FusedConv (Conv + bias + residual Z + activation in one pass).
//
// Layout NCHW. A 1x1 convolution with unit strides and no padding is one matrix product per image and group;
// depthwise convolutions (one input and one output channel per group) run a direct loop per channel; everything else
// is im2col + matrix product. Large outputs are cut into column tiles computed independently on the intra-op
// threads (im2col of the tile, product, then bias/residual/activation while the tile is in cache); small ones run one
// product split across the threads.
//
// Over 700 lines on purpose: the three algorithms, their tiling and the fused epilogue are one kernel's choices and
// share its geometry and packed weights (Winograd's transforms live in winograd.cpp).
#include "conv_activation.hpp"
#include "gemm.hpp"
#include "kernel_util.hpp"
#include "sgemm.hpp"
#include "winograd.hpp"

#include <epstack/core/mapped_file.hpp>
#include <epstack/core/weight_memory.hpp>

#include <memory>
#include <new>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace epstack::cpu {
namespace impl {


namespace {

// ---- geometry ----
struct conv_attrs {
  std::string auto_pad = "NOTSET";
  std::vector<std::int64_t> dilations, kernel_shape, pads, strides;
  std::int64_t group = 1;
};
struct geometry {
  std::size_t spatial = 0;
  std::int64_t N = 0, C = 0, M = 0, group = 1, Cg = 0, Mg = 0;
  tensor_sizes in, kernel, out, stride, dilation, pad_begin;
  std::int64_t in_size = 1, out_size = 1, kernel_size = 1;
};

Result<geometry> make_geometry(const conv_attrs& at, std::span<const std::int64_t> x, std::span<const std::int64_t> w) {
  geometry g;
  if (x.size() < 3) return Status(errc::invalid_argument, cat("X must have rank >= 3, got ", dims_string(x)));
  if (w.size() != x.size()) return Status(errc::invalid_argument, cat("W ", dims_string(w), " and X ", dims_string(x), " differ in rank"));
  g.spatial = x.size() - 2;
  g.N = x[0];
  g.C = x[1];
  g.M = w[0];
  g.group = at.group;
  if (g.group <= 0 || g.C % g.group != 0 || g.M % g.group != 0)
    return Status(errc::invalid_argument, cat("group ", std::to_string(g.group), " does not divide the ", std::to_string(g.C),
                                              " input and ", std::to_string(g.M), " output channels"));
  g.Cg = g.C / g.group;
  g.Mg = g.M / g.group;
  if (w[1] != g.Cg)
    return Status(errc::invalid_argument, cat("W has ", std::to_string(w[1]), " channels per group, X has ", std::to_string(g.Cg)));
  const auto get = [&](const std::vector<std::int64_t>& v, std::size_t i, std::int64_t def) {
    return v.empty() ? def : v[i];
  };
  if ((!at.kernel_shape.empty() && at.kernel_shape.size() != g.spatial) || (!at.strides.empty() && at.strides.size() != g.spatial) ||
      (!at.dilations.empty() && at.dilations.size() != g.spatial) || (!at.pads.empty() && at.pads.size() != 2 * g.spatial))
    return Status(errc::invalid_argument, "kernel_shape, strides, dilations or pads do not match the spatial rank");
  for (std::size_t i = 0; i < g.spatial; ++i) {
    const std::int64_t in = x[i + 2], k = w[i + 2];
    if (!at.kernel_shape.empty() && at.kernel_shape[i] != k)
      return Status(errc::invalid_argument, "kernel_shape does not match W");
    const std::int64_t s = get(at.strides, i, 1), d = get(at.dilations, i, 1);
    if (s <= 0 || d <= 0) return Status(errc::invalid_argument, "strides and dilations must be positive");
    std::int64_t pb = get(at.pads, i, 0), pe = get(at.pads, i + g.spatial, 0);
    const std::int64_t ek = (k - 1) * d + 1;
    std::int64_t o = 0;
    if (at.auto_pad == "SAME_UPPER" || at.auto_pad == "SAME_LOWER") {
      o = (in + s - 1) / s;
      const std::int64_t total = std::max<std::int64_t>(0, (o - 1) * s + ek - in);
      pb = at.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe = total - pb;
    } else if (at.auto_pad == "VALID") {
      pb = pe = 0;
      o = in >= ek ? (in - ek) / s + 1 : 0;
    } else {
      if (pb < 0 || pe < 0) return Status(errc::invalid_argument, "pads must not be negative");
      o = in + pb + pe >= ek ? (in + pb + pe - ek) / s + 1 : 0;
    }
    (void)pe;
    g.in.push_back(in);
    g.kernel.push_back(k);
    g.out.push_back(o);
    g.stride.push_back(s);
    g.dilation.push_back(d);
    g.pad_begin.push_back(pb);
    g.in_size *= in;
    g.out_size *= o;
    g.kernel_size *= k;
  }
  return g;
}

// dst[t] = src[2 t] for t < n (every other element; vectorised with a permute on AVX-512).
inline void copy_stride2(float* dst, const float* src, std::int64_t n) {
  std::int64_t t = 0;
#if defined(__AVX512F__)
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  for (; t + 16 <= n; t += 16) {
    // The last element read is src[2t + 30] (< 2n - 1): the second load stops short of it for the final vector.
    const __m512 a = _mm512_loadu_ps(src + 2 * t);
    const __m512 b = _mm512_maskz_loadu_ps(0x7FFF, src + 2 * t + 16);
    _mm512_storeu_ps(dst + t, _mm512_permutex2var_ps(a, even, b));
  }
#endif
  for (; t < n; ++t) dst[t] = src[2 * t];
}

// Row `r` (input channel r / kernel_size, kernel tap r % kernel_size) of the im2col matrix of one image and group,
// for output columns [c0, c1): `put(j, n, src, stride)` receives runs of n columns starting at column j, copied from
// src with the given element stride (or zeros when src is null).
template <class Put>
void im2col_row_runs(const geometry& g, const float* x, std::int64_t r, std::int64_t c0, std::int64_t c1, Put&& put) {
  const std::int64_t c = r / g.kernel_size, k = r % g.kernel_size;
  const float* src = x + c * g.in_size;
  if (g.spatial == 2) {
    const std::int64_t IH = g.in[0], IW = g.in[1], KW = g.kernel[1], OW = g.out[1];
    const std::int64_t sh = g.stride[0], sw = g.stride[1], dh = g.dilation[0], dw = g.dilation[1];
    const std::int64_t ph = g.pad_begin[0], pw = g.pad_begin[1];
    const std::int64_t ki = k / KW, kj = k % KW;
    const std::int64_t off = kj * dw - pw;
    // Valid ow: 0 <= ow*sw + off < IW.
    const std::int64_t ow_lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
    const std::int64_t ow_hi = IW - off > 0 ? (IW - off + sw - 1) / sw : 0;
    std::int64_t j = c0;
    while (j < c1) {
      const std::int64_t oh = j / OW, ow0 = j % OW;
      const std::int64_t run = std::min(OW - ow0, c1 - j);
      const std::int64_t ih = oh * sh - ph + ki * dh;
      if (ih < 0 || ih >= IH) {
        put(j, run, nullptr, 0);
      } else {
        const float* row = src + ih * IW;
        const std::int64_t lo = std::clamp(ow_lo - ow0, std::int64_t{0}, run);
        const std::int64_t hi = std::clamp(ow_hi - ow0, lo, run);
        if (lo > 0) put(j, lo, nullptr, 0);
        if (hi > lo) put(j + lo, hi - lo, row + (ow0 + lo) * sw + off, sw);
        if (run > hi) put(j + hi, run - hi, nullptr, 0);
      }
      j += run;
    }
    return;
  }
  // Any spatial rank: element by element.
  const std::size_t S = g.spatial;
  tensor_sizes kidx(S), oidx(S);
  std::int64_t q = k;
  for (std::size_t i = S; i-- > 0;) {
    kidx[i] = q % g.kernel[i];
    q /= g.kernel[i];
  }
  for (std::int64_t jj = c0; jj < c1; ++jj) {
    std::int64_t rest = jj, off = 0;
    bool inside = true;
    for (std::size_t i = S; i-- > 0;) {
      oidx[i] = rest % g.out[i];
      rest /= g.out[i];
    }
    for (std::size_t i = 0; i < S; ++i) {
      const std::int64_t pos = oidx[i] * g.stride[i] - g.pad_begin[i] + kidx[i] * g.dilation[i];
      inside = inside && pos >= 0 && pos < g.in[i];
      off = off * g.in[i] + pos;
    }
    put(jj, 1, inside ? src + off : nullptr, 1);
  }
}

// Copies n elements from src with the given stride (zeros when src is null) to dst.
inline void copy_run(float* dst, std::int64_t n, const float* src, std::int64_t stride) {
  if (src == nullptr) std::fill_n(dst, n, 0.0f);
  else if (stride == 1) std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
  else if (stride == 2) copy_stride2(dst, src, n);
  else
    for (std::int64_t t = 0; t < n; ++t) dst[t] = src[t * stride];
}

// The same row into dst (c1 - c0 floats).
void im2col_row(const geometry& g, const float* x, std::int64_t r, std::int64_t c0, std::int64_t c1, float* dst) {
  im2col_row_runs(g, x, r, c0, c1, [&](std::int64_t j, std::int64_t n, const float* src, std::int64_t stride) {
    copy_run(dst + (j - c0), n, src, stride);
  });
}

// im2col of output columns [c0, c1): col[r, j - c0] for every row r < Cg * kernel_size.
void im2col(const geometry& g, const float* x, std::int64_t c0, std::int64_t c1, float* col) {
  for (std::int64_t r = 0; r < g.Cg * g.kernel_size; ++r) im2col_row(g, x, r, c0, c1, col + r * (c1 - c0));
}

// Rows [r0, r1) of the im2col matrix of output columns [c0, c1), written straight into sgemm's packed-B layout
// (panels of 32 columns, blocks of KC rows); the padding columns of the last panel are zeroed.
void pack_columns(const geometry& g, const float* x, std::int64_t c0, std::int64_t c1, float* dst, std::int64_t r0,
                  std::int64_t r1) {
  const std::int64_t K = g.Cg * g.kernel_size, n = c1 - c0;
  const std::int64_t npad = b_panels(n) * sgemm_nr;
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t k0 = r / sgemm_kc * sgemm_kc, kc = std::min(sgemm_kc, K - k0), kk = r - k0;
    float* block = dst + k0 * npad + kk * sgemm_nr;
    im2col_row_runs(g, x, r, c0, c1, [&](std::int64_t j, std::int64_t len, const float* src, std::int64_t stride) {
      // Split the run where it crosses from one panel into the next.
      std::int64_t jj = j - c0;
      while (len > 0) {
        const std::int64_t q = jj / sgemm_nr, at = jj % sgemm_nr, piece = std::min(len, sgemm_nr - at);
        copy_run(block + q * kc * sgemm_nr + at, piece, src, stride);
        if (src != nullptr) src += piece * stride;
        jj += piece;
        len -= piece;
      }
    });
    if (n % sgemm_nr != 0) std::fill_n(block + (npad / sgemm_nr - 1) * kc * sgemm_nr + n % sgemm_nr, sgemm_nr - n % sgemm_nr, 0.0f);
  }
}

struct conv_plan {
  conv_attrs attrs;
  activation act;
  bool fused = false;  // FusedConv: inputs X, W, B, Z
  // Weights packed for sgemm at compile time (W constant): one packed A per group, `group_stride` floats apart,
  // for W of shape `w_sizes`.
  std::shared_ptr<const float> packed_w;
  std::size_t group_stride = 0;
  tensor_sizes w_sizes;
  // Winograd F(2x2, 3x3) weights, for a 3x3 convolution with unit stride and dilation, one group, and constant W.
  winograd_weights wino;
};

// Winograd pays when there are enough tiles to fill its products' columns (ResNet's 56x56 to 14x14 maps, not 7x7).
constexpr std::int64_t winograd_min_tiles = 16;

bool winograd_shape_ok(const conv_attrs& a, std::span<const std::int64_t> w) {
  const auto all_one = [](const std::vector<std::int64_t>& v) { return std::all_of(v.begin(), v.end(), [](auto x) { return x == 1; }); };
  return w.size() == 4 && w[2] == 3 && w[3] == 3 && a.group == 1 && all_one(a.strides) && all_one(a.dilations);
}

// Bias, residual and activation on rows [0, Mg) x columns [c0, c1) of one image and group's output.
void epilogue(const conv_plan& p, float* y, const float* bias, const float* z, std::int64_t Mg, std::int64_t ld,
              std::int64_t c0, std::int64_t c1) {
  const std::size_t n = static_cast<std::size_t>(c1 - c0);
  for (std::int64_t m = 0; m < Mg; ++m) {
    float* row = y + m * ld + c0;
    if (bias != nullptr) {
      const float b = bias[m];
      for (std::size_t i = 0; i < n; ++i) row[i] += b;
    }
    if (z != nullptr) {
      const float* zr = z + m * ld + c0;
      for (std::size_t i = 0; i < n; ++i) row[i] += zr[i];
    }
    p.act.apply(row, n);
  }
}

#if defined(__AVX512F__)
// Depthwise 3x3, stride 1 or 2, dilation 1, AVX-512: 16 output columns at a time, all nine taps accumulated in one
// register from masked loads (masks drop the columns that fall into the padding, and never touch memory there), then
// the residual and activation before the only store. Stride-2 input rows are first split into even and odd columns,
// once per plane, so every load is contiguous. `phase_buf` holds IH * (IW + 2) floats.
bool depthwise3x3_avx512(const geometry& g, const conv_plan& p, const float* x, const float* w, float bias, const float* z,
                         float* y, float* phase_buf) {
  const std::int64_t IH = g.in[0], IW = g.in[1], OH = g.out[0], OW = g.out[1];
  const std::int64_t s = g.stride[0], ph = g.pad_begin[0], pw = g.pad_begin[1];
  if (g.kernel[0] != 3 || g.kernel[1] != 3 || g.stride[1] != s || (s != 1 && s != 2) || g.dilation[0] != 1 ||
      g.dilation[1] != 1)
    return false;
  if (!(p.act.kind == act_kind::none || p.act.kind == act_kind::relu || p.act.kind == act_kind::clip)) return false;
  // Per kernel column: which phase row and what shift give input column ow*s + kj - pw, and how long the phase is.
  const float* src = x;
  std::int64_t ld = IW, len[3], shift[3], phase_of[3];
  if (s == 2) {
    const std::int64_t half = (IW + 1) / 2;
    ld = 2 * half;
    const __m512i even_idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd_idx = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (std::int64_t r = 0; r < IH; ++r) {
      const float* in = x + r * IW;
      float* ev = phase_buf + r * ld;
      float* od = ev + half;
      std::int64_t c = 0;
      for (; c + 32 <= IW; c += 32) {
        const __m512 a = _mm512_loadu_ps(in + c), b = _mm512_loadu_ps(in + c + 16);
        _mm512_storeu_ps(ev + c / 2, _mm512_permutex2var_ps(a, even_idx, b));
        _mm512_storeu_ps(od + c / 2, _mm512_permutex2var_ps(a, odd_idx, b));
      }
      if (c < IW) {  // the last 1..31 columns: masked loads and stores (c is even, so c / 2 is exact)
        const std::int64_t rem = IW - c;
        const auto first = [](std::int64_t n) {
          return static_cast<__mmask16>(n >= 16 ? 0xFFFFu : n <= 0 ? 0u : (1u << n) - 1);
        };
        const __m512 a = _mm512_maskz_loadu_ps(first(rem), in + c), b = _mm512_maskz_loadu_ps(first(rem - 16), in + c + 16);
        _mm512_mask_storeu_ps(ev + c / 2, first((rem + 1) / 2), _mm512_permutex2var_ps(a, even_idx, b));
        _mm512_mask_storeu_ps(od + c / 2, first(rem / 2), _mm512_permutex2var_ps(a, odd_idx, b));
      }
    }
    src = phase_buf;
    for (int kj = 0; kj < 3; ++kj) {
      const std::int64_t d = kj - pw, q = ((d % 2) + 2) % 2;
      phase_of[kj] = q * half;
      shift[kj] = (d - q) / 2;
      len[kj] = q == 0 ? half : IW / 2;
    }
  } else {
    for (int kj = 0; kj < 3; ++kj) {
      phase_of[kj] = 0;
      shift[kj] = kj - pw;
      len[kj] = IW;
    }
  }
  __m512 wv[9];
  for (int t = 0; t < 9; ++t) wv[t] = _mm512_set1_ps(w[t]);
  const __m512 vb = _mm512_set1_ps(bias);
  const __m512 lo = _mm512_set1_ps(p.act.kind == act_kind::clip ? p.act.a : 0.0f);
  const __m512 hi = _mm512_set1_ps(p.act.kind == act_kind::clip ? p.act.b : 0.0f);
  // Lanes [a, b) of the vector starting at column ow0.
  const auto lanes_mask = [](std::int64_t a, std::int64_t b) -> __mmask16 {
    a = std::clamp<std::int64_t>(a, 0, 16);
    b = std::clamp<std::int64_t>(b, 0, 16);
    if (b <= a) return 0;
    const unsigned m = (b == 16 ? 0xFFFFu : ((1u << b) - 1)) & ~((1u << a) - 1);
    return static_cast<__mmask16>(m);
  };
  // Output columns whose taps all fall inside the row (per kernel column: input index ow + shift in [0, len)).
  std::int64_t in_lo = 0, in_hi = OW;
  for (int kj = 0; kj < 3; ++kj) {
    in_lo = std::max(in_lo, -shift[kj]);
    in_hi = std::min(in_hi, len[kj] - shift[kj]);
  }
  const auto finish = [&](__m512 acc, float* out, const float* zr, std::int64_t ow0, __mmask16 store) {
    if (zr != nullptr) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(store, zr + ow0));
    if (p.act.kind == act_kind::relu) acc = _mm512_max_ps(acc, _mm512_setzero_ps());
    else if (p.act.kind == act_kind::clip) acc = _mm512_min_ps(_mm512_max_ps(acc, lo), hi);
    _mm512_mask_storeu_ps(out + ow0, store, acc);
  };
  // The masks of each 16-column block depend on the block, not the row: computed once per plane (wide rows: per use).
  constexpr std::int64_t mask_blocks = 16;
  __mmask16 store_masks[mask_blocks], tap_masks[mask_blocks][3];
  const std::int64_t blocks = (OW + 15) / 16;
  const auto block_masks = [&](std::int64_t ow0, __mmask16& store, __mmask16 (&taps)[3]) {
    store = lanes_mask(0, OW - ow0);
    for (int kj = 0; kj < 3; ++kj) taps[kj] = lanes_mask(-shift[kj] - ow0, len[kj] - shift[kj] - ow0) & store;
  };
  for (std::int64_t b = 0; b < std::min(blocks, mask_blocks); ++b) block_masks(b * 16, store_masks[b], tap_masks[b]);
  for (std::int64_t oh = 0; oh < OH; ++oh) {
    const float* rows[3];
    bool all_rows = true;
    for (int ki = 0; ki < 3; ++ki) {
      const std::int64_t ih = oh * s - ph + ki;
      rows[ki] = ih >= 0 && ih < IH ? src + ih * ld : nullptr;
      all_rows = all_rows && rows[ki] != nullptr;
    }
    float* out = y + oh * OW;
    const float* zr = z != nullptr ? z + oh * OW : nullptr;
    std::int64_t ow0 = 0;
    for (; ow0 < OW; ow0 += 16) {
      if (all_rows && ow0 >= in_lo && ow0 + 16 <= in_hi) {
        // Interior: every tap inside the image, no masks.
        // Three independent chains (one per kernel row), summed at the end: the nine FMAs do not wait on each other.
        __m512 a0 = vb, a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps();
#pragma GCC unroll 3
        for (int kj = 0; kj < 3; ++kj) {
          const std::int64_t off = phase_of[kj] + ow0 + shift[kj];
          a0 = _mm512_fmadd_ps(wv[kj], _mm512_loadu_ps(rows[0] + off), a0);
          a1 = _mm512_fmadd_ps(wv[3 + kj], _mm512_loadu_ps(rows[1] + off), a1);
          a2 = _mm512_fmadd_ps(wv[6 + kj], _mm512_loadu_ps(rows[2] + off), a2);
        }
        finish(_mm512_add_ps(_mm512_add_ps(a0, a1), a2), out, zr, ow0, 0xFFFF);
        continue;
      }
      __mmask16 store, taps[3];
      if (const std::int64_t b = ow0 / 16; b < mask_blocks) {
        store = store_masks[b];
        for (int kj = 0; kj < 3; ++kj) taps[kj] = tap_masks[b][kj];
      } else {
        block_masks(ow0, store, taps);
      }
      __m512 acc[3] = {vb, _mm512_setzero_ps(), _mm512_setzero_ps()};
      for (int kj = 0; kj < 3; ++kj) {
        const __mmask16 m = taps[kj];
        const std::int64_t off = phase_of[kj] + ow0 + shift[kj];
        for (int ki = 0; ki < 3; ++ki)
          if (rows[ki] != nullptr) acc[ki] = _mm512_fmadd_ps(wv[ki * 3 + kj], _mm512_maskz_loadu_ps(m, rows[ki] + off), acc[ki]);
      }
      finish(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), acc[2]), out, zr, ow0, store);
    }
  }
  return true;
}
#endif

// Depthwise: one input and one output channel per group, 2-D. One output row at a time, all taps accumulated into
// it while it sits in L1, starting from the bias and finishing with the epilogue (residual, activation). Strided rows
// are first split into phases (even and odd columns for stride 2), so every inner loop is unit-stride.
void depthwise2d(const geometry& g, const conv_plan& p, const float* x, const float* w, float bias, const float* z,
                 float* y, float* phase_buf) {
#if defined(__AVX512F__)
  if (depthwise3x3_avx512(g, p, x, w, bias, z, y, phase_buf)) return;
#endif
  const std::int64_t IH = g.in[0], IW = g.in[1], KH = g.kernel[0], KW = g.kernel[1], OH = g.out[0], OW = g.out[1];
  const std::int64_t sh = g.stride[0], sw = g.stride[1], dh = g.dilation[0], dw = g.dilation[1];
  const std::int64_t ph = g.pad_begin[0], pw = g.pad_begin[1];
  // Valid output column range per kernel column: 0 <= ow*sw + kj*dw - pw < IW.
  std::int64_t lo[16], hi[16];
  const bool small_kernel = KW <= 16;
  for (std::int64_t kj = 0; kj < KW && small_kernel; ++kj) {
    const std::int64_t off = kj * dw - pw;
    lo[kj] = off >= 0 ? 0 : std::min(OW, (-off + sw - 1) / sw);
    hi[kj] = std::max(lo[kj], std::min(OW, IW - off > 0 ? (IW - off + sw - 1) / sw : 0));
  }
  const std::int64_t phase_len = (IW + sw - 1) / sw;
  for (std::int64_t oh = 0; oh < OH; ++oh) {
    float* out = y + oh * OW;
    std::fill_n(out, OW, bias);
    for (std::int64_t ki = 0; ki < KH; ++ki) {
      const std::int64_t ih = oh * sh - ph + ki * dh;
      if (ih < 0 || ih >= IH) continue;
      const float* row = x + ih * IW;
      if (sw > 1 && small_kernel) {
        // phase q holds columns q, q + sw, q + 2 sw, ...
        for (std::int64_t q = 0; q < sw; ++q)
          for (std::int64_t c = 0; q + c * sw < IW; ++c) phase_buf[q * phase_len + c] = row[q + c * sw];
      }
      const float* wr = w + ki * KW;
      for (std::int64_t kj = 0; kj < KW; ++kj) {
        const float wv = wr[kj];
        const std::int64_t off = kj * dw - pw;
        std::int64_t a, b;
        if (small_kernel) {
          a = lo[kj];
          b = hi[kj];
        } else {
          a = off >= 0 ? 0 : std::min(OW, (-off + sw - 1) / sw);
          b = std::max(a, std::min(OW, IW - off > 0 ? (IW - off + sw - 1) / sw : 0));
        }
        if (sw == 1) {
          const float* r = row + off;
          for (std::int64_t ow = a; ow < b; ++ow) out[ow] += wv * r[ow];
        } else if (small_kernel) {
          // column ow*sw + off = (phase q) + sw * (ow + shift)
          const std::int64_t q = ((off % sw) + sw) % sw, shift = (off - q) / sw;
          const float* r = phase_buf + q * phase_len + shift;
          for (std::int64_t ow = a; ow < b; ++ow) out[ow] += wv * r[ow];
        } else {
          for (std::int64_t ow = a; ow < b; ++ow) out[ow] += wv * row[ow * sw + off];
        }
      }
    }
    if (z != nullptr) {
      const float* zr = z + oh * OW;
      for (std::int64_t ow = 0; ow < OW; ++ow) out[ow] += zr[ow];
    }
    p.act.apply(out, static_cast<std::size_t>(OW));
  }
}

// The part of the epilogue the SGEMM kernels apply as they store: bias, and ReLU or clip (other activations run after).
sgemm_epilogue kernel_epilogue(const conv_plan& p, const float* bias) {
  sgemm_epilogue ep;
  ep.bias = bias;
  if (p.act.kind == act_kind::relu) ep.activation = sgemm_epilogue::act::relu;
  if (p.act.kind == act_kind::clip) {
    ep.activation = sgemm_epilogue::act::clip;
    ep.lo = p.act.a;
    ep.hi = p.act.b;
  }
  return ep;
}

// The packed-SGEMM path: weights packed once (at compile time when constant), the im2col matrix packed per column
// tile straight from the input. Many tiles: tiles across the threads, each packed, multiplied and finished (epilogue)
// by one thread while in cache. Few columns (late, small feature maps): one packing of all columns, then the rows of
// W split across the threads.
Status conv_packed(const conv_plan& p, compute_context& ctx, const geometry& g, std::span<const std::int64_t> w_sizes,
                   bool pointwise, const float* px, const float* pw, const float* bias, const float* z, float* py) {
  const std::int64_t HW = g.out_size, K = g.Cg * g.kernel_size;
  const std::size_t a_size = packed_a_size(g.Mg, K);
  const float* packed = nullptr;
  tensor packed_scratch;
  const bool prepacked = p.packed_w && std::equal(p.w_sizes.begin(), p.w_sizes.end(), w_sizes.begin(), w_sizes.end());
  if (prepacked) {
    packed = p.packed_w.get();
  } else {
    packed_scratch = ctx.scratch(element_type::float32, a_size * static_cast<std::size_t>(g.group) + 16);
    float* dst = align64(packed_scratch.typed<float>());
    for (std::int64_t gr = 0; gr < g.group; ++gr) pack_a(dst + gr * static_cast<std::int64_t>(a_size), pw + gr * g.Mg * K, K, false, g.Mg, K);
    packed = dst;
  }
  const std::size_t group_stride = prepacked ? p.group_stride : a_size;
  const int threads = ctx.thread_count();
  std::int64_t tile = std::clamp<std::int64_t>((HW + 4 * threads - 1) / (4 * threads), 128, 512);
  tile = (tile + sgemm_nr - 1) / sgemm_nr * sgemm_nr;
  const std::int64_t tiles = (HW + tile - 1) / tile;
  const bool by_tiles = tiles >= 2 * threads || threads == 1 || a_panels(g.Mg) < 2 * threads;
  // Bias, residual and ReLU/clip are applied by the kernel as it stores the result; other activations after.
  const bool in_kernel_act = p.act.kind == act_kind::none || p.act.kind == act_kind::relu || p.act.kind == act_kind::clip;
  const auto finish = [&](float* yg, std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) {
    if (in_kernel_act) return;
    for (std::int64_t r = r0; r < r1; ++r) p.act.apply(yg + r * HW + c0, static_cast<std::size_t>(c1 - c0));
  };
  for (std::int64_t n = 0; n < g.N; ++n)
    for (std::int64_t gr = 0; gr < g.group; ++gr) {
      const float* xg = px + (n * g.C + gr * g.Cg) * g.in_size;
      const float* pa = packed + gr * static_cast<std::int64_t>(group_stride);
      float* yg = py + (n * g.M + gr * g.Mg) * HW;
      sgemm_epilogue ep = kernel_epilogue(p, bias != nullptr ? bias + gr * g.Mg : nullptr);
      ep.ldz = HW;
      const float* zg = z != nullptr ? z + (n * g.M + gr * g.Mg) * HW : nullptr;
      if (by_tiles) {
        // Pointwise: the kernel reads the input in place. Otherwise each tile's im2col is packed first.
        const std::size_t tile_floats = pointwise ? 0 : packed_b_size(K, tile) + 16;
        tensor buf;
        if (!pointwise) buf = ctx.scratch(element_type::float32, tile_floats * static_cast<std::size_t>(tiles));
        float* base = pointwise ? nullptr : buf.typed<float>();
        ctx.parallel_for(static_cast<std::size_t>(tiles), 1, [&](std::size_t t0, std::size_t t1) {
          for (std::size_t t = t0; t < t1; ++t) {
            const std::int64_t c0 = static_cast<std::int64_t>(t) * tile, c1 = std::min(HW, c0 + tile);
            sgemm_b b{xg + c0, HW};
            if (!pointwise) {
              float* pb = align64(base + t * tile_floats);
              pack_columns(g, xg, c0, c1, pb, 0, K);
              b = {pb, 0};
            }
            sgemm_epilogue e = ep;
            e.z = zg != nullptr ? zg + c0 : nullptr;
            sgemm(g.Mg, c1 - c0, K, pa, b, yg + c0, HW, 1.0f, false, &e, 0, a_panels(g.Mg), 0, b_panels(c1 - c0));
            finish(yg, 0, g.Mg, c0, c1);
          }
        });
      } else {
        sgemm_b b{xg, HW};
        tensor buf;
        if (!pointwise) {
          buf = ctx.scratch(element_type::float32, packed_b_size(K, HW) + 16);
          float* pb = align64(buf.typed<float>());
          // Rows of the packing split across the threads too.
          ctx.parallel_for(static_cast<std::size_t>(K), 64, [&](std::size_t r0, std::size_t r1) {
            pack_columns(g, xg, 0, HW, pb, static_cast<std::int64_t>(r0), static_cast<std::int64_t>(r1));
          });
          b = {pb, 0};
        }
        ep.z = zg;
        const std::int64_t panels = a_panels(g.Mg);
        ctx.parallel_for(static_cast<std::size_t>(panels), 1, [&](std::size_t q0, std::size_t q1) {
          const auto p0 = static_cast<std::int64_t>(q0), p1 = static_cast<std::int64_t>(q1);
          sgemm(g.Mg, HW, K, pa, b, yg, HW, 1.0f, false, &ep, p0, p1, 0, b_panels(HW));
          finish(yg, p0 * sgemm_mr, std::min(g.Mg, p1 * sgemm_mr), 0, HW);
        });
      }
    }
  return {};
}

// The geometry of X and W, after checking that X, W, B and Z (those present) are all of element type `t`, that B holds
// one value per output channel and that Z has the output's shape (`out_sizes`).
Result<geometry> conv_check(const conv_plan& p, compute_context& ctx, element_type t, tensor_sizes& out_sizes) {
  const tensor& x = ctx.input(0);
  const tensor& w = ctx.input(1);
  if (x.type() != t || w.type() != t)
    return Status(errc::invalid_argument, cat("X and W must be ", std::string(to_string(t))));
  EPSTACK_ASSIGN_OR_RETURN(geometry g, make_geometry(p.attrs, x.sizes(), w.sizes()));
  if (ctx.has_input(2)) {
    const tensor& b = ctx.input(2);
    if (b.type() != t || b.element_count() != static_cast<std::size_t>(g.M))
      return Status(errc::invalid_argument, cat("B must hold ", std::to_string(g.M), " values of X's type"));
  }
  out_sizes = {g.N, g.M};
  out_sizes.insert(out_sizes.end(), g.out.begin(), g.out.end());
  if (p.fused && ctx.has_input(3)) {
    const tensor& zt = ctx.input(3);
    if (zt.type() != t || !std::equal(zt.sizes().begin(), zt.sizes().end(), out_sizes.begin(), out_sizes.end()))
      return Status(errc::invalid_argument, cat("Z ", dims_string(zt.sizes()), " must have the output's shape ", dims_string(out_sizes)));
  }
  return g;
}

Status conv_run(const conv_plan& p, compute_context& ctx, const geometry& g, std::span<const std::int64_t> w_sizes,
                const float* px, const float* pw, const float* bias, const float* z, float* py);

Status conv_compute(const conv_plan& p, compute_context& ctx) {
  tensor_sizes out_sizes;
  EPSTACK_ASSIGN_OR_RETURN(const geometry g, conv_check(p, ctx, element_type::float32, out_sizes));
  const tensor& x = ctx.input(0);
  const tensor& w = ctx.input(1);
  const float* bias = ctx.has_input(2) ? ctx.input(2).typed<float>() : nullptr;
  const float* z = p.fused && ctx.has_input(3) ? ctx.input(3).typed<float>() : nullptr;
  tensor& y = ctx.allocate_output(0, element_type::float32, out_sizes);
  if (y.element_count() == 0) return {};
  return conv_run(p, ctx, g, w.sizes(), x.typed<float>(), w.typed<float>(), bias, z, y.typed<float>());
}

// float16 and bfloat16: X, W, B and Z widened to float in scratch memory, the float convolution, Y rounded once.
Status conv_compute_half(const conv_plan& p, compute_context& ctx) {
  const element_type t = ctx.input(0).type();
  if (t != element_type::float16 && t != element_type::bfloat16)
    return Status(errc::invalid_argument, "X must be float16 or bfloat16");
  tensor_sizes out_sizes;
  EPSTACK_ASSIGN_OR_RETURN(const geometry g, conv_check(p, ctx, t, out_sizes));
  tensor& y = ctx.allocate_output(0, t, out_sizes);
  if (y.element_count() == 0) return {};
  const tensor x = half_as_float(ctx, ctx.input(0));
  const tensor w = half_as_float(ctx, ctx.input(1));
  const tensor b = ctx.has_input(2) ? half_as_float(ctx, ctx.input(2)) : tensor();
  const tensor z = p.fused && ctx.has_input(3) ? half_as_float(ctx, ctx.input(3)) : tensor();
  tensor fy = ctx.scratch(element_type::float32, y.element_count());
  EPSTACK_RETURN_IF_ERROR(conv_run(p, ctx, g, w.sizes(), x.typed<float>(), w.typed<float>(),
                                   b.empty() ? nullptr : b.typed<float>(), z.empty() ? nullptr : z.typed<float>(),
                                   fy.typed<float>()));
  store_as_half(ctx, fy.typed<float>(), y);
  return {};
}

// The convolution of float X and W (geometry `g`) into Y (not empty), with bias, residual and activation.
Status conv_run(const conv_plan& p, compute_context& ctx, const geometry& g, std::span<const std::int64_t> w_sizes,
                const float* px, const float* pw, const float* bias, const float* z, float* py) {
  const std::int64_t HW = g.out_size, K = g.Cg * g.kernel_size;

  const bool depthwise = g.Cg == 1 && g.Mg == 1 && g.spatial == 2;
  if (depthwise) {
    const std::size_t planes = static_cast<std::size_t>(g.N * g.M);
    // One phase buffer per chunk of planes: a whole input plane, split by stride (2 floats of padding per row).
    const std::int64_t phase = g.in[0] * (g.in[1] + 2) + 16;
    const std::size_t cost = static_cast<std::size_t>(HW * g.kernel_size);
    const std::size_t per = std::max<std::size_t>(1, 16384 / std::max<std::size_t>(cost, 1));
    const std::size_t chunks = (planes + per - 1) / per;
    tensor buf = ctx.scratch(element_type::float32, static_cast<std::size_t>(phase) * std::max<std::size_t>(chunks, 1));
    float* pbuf = buf.typed<float>();
    ctx.parallel_for(chunks, 1, [&](std::size_t c0, std::size_t c1) {
      for (std::size_t c = c0; c < c1; ++c)
        for (std::size_t pl = c * per; pl < std::min(planes, (c + 1) * per); ++pl) {
          const std::int64_t n = static_cast<std::int64_t>(pl) / g.M, m = static_cast<std::int64_t>(pl) % g.M;
          depthwise2d(g, p, px + (n * g.C + m) * g.in_size, pw + m * g.kernel_size, bias != nullptr ? bias[m] : 0.0f,
                      z != nullptr ? z + static_cast<std::int64_t>(pl) * HW : nullptr, py + static_cast<std::int64_t>(pl) * HW,
                      pbuf + static_cast<std::int64_t>(c) * phase);
        }
    });
    return {};
  }

  bool pointwise = g.kernel_size == 1;
  for (std::size_t i = 0; i < g.spatial && pointwise; ++i) pointwise = g.stride[i] == 1 && g.pad_begin[i] == 0 && g.in[i] == g.out[i];
  const bool in_kernel_act = p.act.kind == act_kind::none || p.act.kind == act_kind::relu || p.act.kind == act_kind::clip;
  if (p.wino.data && g.spatial == 2 && winograd_shape_ok(p.attrs, w_sizes) && in_kernel_act &&
      std::equal(p.w_sizes.begin(), p.w_sizes.end(), w_sizes.begin(), w_sizes.end()) &&
      (!p.packed_w || ((g.out[0] + 1) / 2) * ((g.out[1] + 1) / 2) >= winograd_min_tiles)) {
    const winograd_shape ws{g.C, g.M, g.in[0], g.in[1], g.out[0], g.out[1], g.pad_begin[0], g.pad_begin[1]};
    tensor scratch = ctx.scratch(element_type::float32, winograd_scratch_floats(ws));
    sgemm_epilogue ep = kernel_epilogue(p, bias);
    for (std::int64_t n = 0; n < g.N; ++n) {
      ep.z = z != nullptr ? z + n * g.M * HW : nullptr;
      winograd_conv(ctx, ws, p.wino, px + n * g.C * g.in_size, py + n * g.M * HW, ep, scratch.typed<float>());
    }
    return {};
  }
  if (sgemm_packed_available()) return conv_packed(p, ctx, g, w_sizes, pointwise, px, pw, bias, z, py);
  const int threads = ctx.thread_count();
  // Column tiles: enough to keep every thread busy, each a few hundred columns at least.
  const std::int64_t tile = std::max<std::int64_t>(256, (HW + 4 * threads - 1) / (4 * threads));
  const bool tiled = threads > 1 && HW >= 2 * 256 && HW >= static_cast<std::int64_t>(threads) * 128;
  tensor col;
  if (!pointwise) col = ctx.scratch(element_type::float32, static_cast<std::size_t>(K * HW));
  float* pcol = pointwise ? nullptr : col.typed<float>();

  for (std::int64_t n = 0; n < g.N; ++n)
    for (std::int64_t gr = 0; gr < g.group; ++gr) {
      const float* xg = px + (n * g.C + gr * g.Cg) * g.in_size;
      const float* wg = pw + gr * g.Mg * K;
      float* yg = py + (n * g.M + gr * g.Mg) * HW;
      const float* bg = bias != nullptr ? bias + gr * g.Mg : nullptr;
      const float* zg = z != nullptr ? z + (n * g.M + gr * g.Mg) * HW : nullptr;
      if (tiled) {
        const std::size_t tiles = static_cast<std::size_t>((HW + tile - 1) / tile);
        ctx.parallel_for(tiles, 1, [&](std::size_t t0, std::size_t t1) {
          for (std::size_t t = t0; t < t1; ++t) {
            const std::int64_t c0 = static_cast<std::int64_t>(t) * tile, c1 = std::min(HW, c0 + tile);
            const float* bmat;
            std::int64_t ldb;
            if (pointwise) {
              bmat = xg + c0;
              ldb = HW;
            } else {
              float* ct = pcol + K * c0;
              im2col(g, xg, c0, c1, ct);
              bmat = ct;
              ldb = c1 - c0;
            }
            gemm_block<float>(false, false, g.Mg, c1 - c0, K, 1.0f, wg, K, bmat, ldb, yg + c0, HW, false);
            epilogue(p, yg, bg, zg, g.Mg, HW, c0, c1);
          }
        });
      } else {
        const float* bmat = xg;
        if (!pointwise) {
          im2col(g, xg, 0, HW, pcol);
          bmat = pcol;
        }
        gemm_parallel<float>(ctx, false, false, g.Mg, HW, K, 1.0f, wg, K, bmat, HW, yg, HW, false);
        if (bg != nullptr || zg != nullptr || p.act.kind != act_kind::none)
          parallel_items(ctx, static_cast<std::size_t>(g.Mg), static_cast<std::size_t>(HW), [&](std::size_t m0, std::size_t m1) {
            const auto mm0 = static_cast<std::int64_t>(m0), mm1 = static_cast<std::int64_t>(m1);
            epilogue(p, yg + mm0 * HW, bg != nullptr ? bg + mm0 : nullptr, zg != nullptr ? zg + mm0 * HW : nullptr,
                     mm1 - mm0, HW, 0, HW);
          });
      }
    }
  return {};
}

Result<conv_plan> make_plan(const graph& gr, node_id n, bool fused) {
  const auto& nd = gr.node(n);
  conv_plan p;
  p.fused = fused;
  p.attrs.auto_pad = attr_s(nd, "auto_pad", "NOTSET");
  p.attrs.dilations = attr_ints(nd, "dilations");
  p.attrs.kernel_shape = attr_ints(nd, "kernel_shape");
  p.attrs.pads = attr_ints(nd, "pads");
  p.attrs.strides = attr_ints(nd, "strides");
  p.attrs.group = attr_i(nd, "group", 1);
  if (fused) {
    EPSTACK_ASSIGN_OR_RETURN(p.act, parse_activation(nd));
  }
  // Constant weights are packed once, here: for Winograd when the input's size (from shape inference) gives enough
  // tiles (or is unknown), and for the im2col path unless Winograd will always be taken.
  const tensor* w = constant_input(gr, n, 1);
  // A float16/bfloat16 W is packed from a float copy (the kernel widens X and computes in float).
  tensor w_float;
  if (w != nullptr && (w->type() == element_type::float16 || w->type() == element_type::bfloat16)) {
    w_float = tensor::uninitialized(element_type::float32, w->sizes());
    if (w->type() == element_type::float16) widen_half(w->typed<float16>(), w_float.typed<float>(), w->element_count());
    else widen_half(w->typed<bfloat16>(), w_float.typed<float>(), w->element_count());
  }
  const tensor* wf = w_float.empty() ? w : &w_float;
  // Packing reads W once: from the model file in one bulk read, not a page fault at a time (weight_memory.hpp).
  weight_reader w_source;
  const float* w_values = wf != nullptr && wf->type() == element_type::float32 ? w_source.floats(*wf) : nullptr;
  bool im2col_needed = true;
  if (w != nullptr && winograd_available() && wf->type() == element_type::float32 && winograd_shape_ok(p.attrs, w->sizes())) {
    const auto& xt = gr.value(nd.inputs[0]).type;
    std::int64_t tiles = -1;
    if (xt.dims && xt.dims->rank() == 4 && (*xt.dims)[2].is_known() && (*xt.dims)[3].is_known())
      tiles = (((*xt.dims)[2].value + 1) / 2) * (((*xt.dims)[3].value + 1) / 2);  // about: pads keep the size
    if (tiles < 0 || tiles >= winograd_min_tiles) {
      p.wino = winograd_pack(w_values, w->sizes()[0], w->sizes()[1]);
      im2col_needed = tiles < 0;
      if (!im2col_needed) p.w_sizes.assign(w->sizes().begin(), w->sizes().end());
    }
  }
  if (w != nullptr && im2col_needed && sgemm_packed_available() && wf->type() == element_type::float32 && w->rank() >= 3 && p.attrs.group > 0 &&
      w->sizes()[0] % p.attrs.group == 0 && !(w->sizes()[1] == 1 && w->sizes()[0] == p.attrs.group)) {
    const std::int64_t Mg = w->sizes()[0] / p.attrs.group;
    const std::int64_t K = static_cast<std::int64_t>(w->element_count()) / w->sizes()[0];
    p.group_stride = (packed_a_size(Mg, K) + 15) / 16 * 16;
    const std::size_t total = p.group_stride * static_cast<std::size_t>(p.attrs.group);
    auto mem = epstack::allocate_weight_floats(total);
    float* data = mem.get();
    for (std::int64_t g = 0; g < p.attrs.group; ++g)
      pack_a(data + g * static_cast<std::int64_t>(p.group_stride), w_values + g * Mg * K, K, false, Mg, K);
    p.packed_w = std::move(mem);
    p.w_sizes.assign(w->sizes().begin(), w->sizes().end());
  }
  // The packed copies are what runs use: the original's pages need not stay in memory.
  // (A float16/bfloat16 W is still read by each run: its pages stay.)
  if (w != nullptr && w_float.empty() && (p.packed_w || p.wino.data) && w->is_file_backed())
    release_file_pages(w->data(), w->byte_size());
  return p;
}

bool conv_supported(const graph& g, node_id n) {
  const auto t = in_type(g, n, 0);
  if ((t != element_type::float32 && t != element_type::float16 && t != element_type::bfloat16) || in_type(g, n, 1) != t)
    return false;
  const auto ap = attr_s(g.node(n), "auto_pad", "NOTSET");
  return ap == "NOTSET" || ap == "VALID" || ap == "SAME_UPPER" || ap == "SAME_LOWER";
}

}  // namespace
}  // namespace impl

namespace ops {
using namespace impl;

bool conv::supports(const graph& g, node_id n) { return conv_supported(g, n); }
Result<compute_function> conv::compile(const graph& g, node_id n) {
  EPSTACK_ASSIGN_OR_RETURN(auto p, make_plan(g, n, false));
  if (in_type(g, n, 0) != element_type::float32)
    return make_fn("Conv", [p](compute_context& ctx) { return conv_compute_half(p, ctx); });
  return make_fn("Conv", [p](compute_context& ctx) { return conv_compute(p, ctx); });
}
bool fused_conv::supports(const graph& g, node_id n) { return conv_supported(g, n) && parse_activation(g.node(n)).has_value(); }
Result<compute_function> fused_conv::compile(const graph& g, node_id n) {
  EPSTACK_ASSIGN_OR_RETURN(auto p, make_plan(g, n, true));
  if (in_type(g, n, 0) != element_type::float32)
    return make_fn("FusedConv", [p](compute_context& ctx) { return conv_compute_half(p, ctx); });
  return make_fn("FusedConv", [p](compute_context& ctx) { return conv_compute(p, ctx); });
}

}  // namespace ops
}  // namespace epstack::cpu
