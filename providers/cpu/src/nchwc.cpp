// Blocked-channel layout (NCHWc, c = 16): the convolutions of domain com.epstack.nchwc16, which the optimiser's layout
// pass (src/runtime/nchwc_layout.cpp) writes for the chains of convolutions and pools the CPU provider runs (its pools
// and reorders are in nchwc_pool_reorder.cpp, its Winograd convolutions in nchwc_winograd.cpp, the 1x1 convolution
// fused with the depthwise one that reads it in nchwc_pointwise_depthwise.cpp).
//
// A blocked tensor is declared [N, Cp, H, W] (Cp: the channels rounded up to 16) and stored [N, Cp/16, H, W, 16]:
// the 16 channels of a block sit side by side, so one vector holds one pixel of a block. Padded channels hold finite
// values that no consumer reads (the filters are zero there) and that ReorderOutput drops.
//
// Convolutions run direct kernels, no im2col: per call up to 4 output blocks (64 channels) x 6 output pixels in 24
// vector accumulators; per filter tap and input channel, one broadcast of the input and one filter vector per output
// block (ONNX Runtime's MLAS NCHWc kernels have the same register blocking). Filters are laid out by the pass:
//   dense        [Op/16][Ip/16][KH][KW][16 in][16 out]   (X blocked)
//   first layer  [Op/16][C][KH][KW][16 out]               (X plain NCHW with C < 16 channels: no reorder of X)
//   depthwise    [Cp/16][KH][KW][16]                       (group = Cp)
//   Winograd     [(T+2)^2][Op/16][Ip/16][16 in][16 out]   (3x3, unit strides; T = attribute winograd, 2 or 4)
// Bias, the residual `Sum` (input 3, blocked like Y), and the activation are applied while the accumulators are in
// registers. A 1x1 convolution with unit strides and no padding treats the image as one long row.
#include "nchwc_common.hpp"

#include <array>
#include <atomic>
#include <cstdlib>
#include <utility>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace epstack::cpu {
namespace impl {
namespace nchwc {
namespace {
// Passes of a dense convolution over its input channels: one while the filters of a set of (up to 4) output blocks
// fit in about 1 MiB (an L2 cache), else as few as keep each pass's filters within it (nchwc_conv_compute).
std::int64_t filter_passes(std::int64_t channels, std::int64_t per_channel_bytes) {
  return std::max<std::int64_t>(1, (channels * per_channel_bytes + (1 << 20) - 1) >> 20);
}
}  // namespace

Result<conv_call> nchwc_conv_setup(const nchwc_conv_plan& p, compute_context& ctx) {
  constexpr std::string_view op = "Conv (NCHWc)";
  const tensor& x = ctx.input(0);
  const tensor& wt = ctx.input(1);
  if (x.type() != element_type::float32 || wt.type() != element_type::float32) return op_error(op, "X and W must be float");
  if (x.rank() != 4 || wt.rank() != 4) return op_error(op, cat("X ", dims_string(x.sizes()), " and W ", dims_string(wt.sizes()), " must be 4-D"));
  conv_call c;
  conv_geom& g = c.g;
  g.N = x.sizes()[0];
  g.C = x.sizes()[1];
  g.M = wt.sizes()[0];
  if (g.M % blk != 0) return op_error(op, cat("W has ", std::to_string(g.M), " filters, not a multiple of 16"));
  if (p.group == g.C && g.C == g.M && wt.sizes()[1] == 1 && g.C % blk == 0) g.kind = conv_kind::depthwise;
  else if (p.group == 1 && wt.sizes()[1] == g.C && g.C < blk) g.kind = conv_kind::first_layer;
  else if (p.group == 1 && wt.sizes()[1] == g.C && g.C % blk == 0) g.kind = conv_kind::dense;
  else
    return op_error(op, cat("X ", dims_string(x.sizes()), ", W ", dims_string(wt.sizes()), " and group ", std::to_string(p.group),
                            " are neither a depthwise, a blocked nor a first-layer convolution"));
  g.CB = g.C / blk;
  g.MB = g.M / blk;
  if (p.winograd != 0) {
    const std::int64_t L = p.winograd + 2;
    if (g.kind != conv_kind::dense || wt.sizes()[2] != L || wt.sizes()[3] != L)
      return op_error(op, cat("winograd ", std::to_string(p.winograd), ": X ", dims_string(x.sizes()), " and W ",
                              dims_string(wt.sizes()), " must be blocked with W [M, C, ", std::to_string(L), ", ",
                              std::to_string(L), "] (", std::to_string(L * L), " transformed 1x1 filter sets)"));
    if (p.attrs.kernel.size() != 2 || p.attrs.kernel[0] != 3 || p.attrs.kernel[1] != 3 ||
        std::any_of(p.attrs.strides.begin(), p.attrs.strides.end(), [](std::int64_t v) { return v != 1; }) ||
        std::any_of(p.attrs.dilations.begin(), p.attrs.dilations.end(), [](std::int64_t v) { return v != 1; }))
      return op_error(op, "winograd: kernel_shape must be [3, 3] with unit strides and dilations");
    if (!in_register(p.act)) return op_error(op, "winograd: the activation must be none, Relu, Clip or LeakyRelu");
  } else if (!p.attrs.kernel.empty() && (p.attrs.kernel[0] != wt.sizes()[2] || p.attrs.kernel[1] != wt.sizes()[3])) {
    return op_error(op, "kernel_shape does not match W");
  }
  const std::int64_t KH = p.winograd != 0 ? 3 : wt.sizes()[2], KW = p.winograd != 0 ? 3 : wt.sizes()[3];
  EPSTACK_ASSIGN_OR_RETURN(g.h, make_window(p.attrs, 0, x.sizes()[2], KH, op));
  EPSTACK_ASSIGN_OR_RETURN(g.w, make_window(p.attrs, 1, x.sizes()[3], KW, op));
  conv_epilogue& ep = c.ep;
  ep.act = p.act;
  if (ctx.has_input(2)) {
    const tensor& b = ctx.input(2);
    if (b.type() != element_type::float32 || b.element_count() != static_cast<std::size_t>(g.M))
      return op_error(op, cat("B must hold ", std::to_string(g.M), " floats"));
    ep.bias = b.typed<float>();
  }
  const std::array<std::int64_t, 4> out_sizes{g.N, g.M, g.h.out, g.w.out};
  if (p.fused && ctx.has_input(3)) {
    const tensor& s = ctx.input(3);
    if (s.type() != element_type::float32 || !std::equal(s.sizes().begin(), s.sizes().end(), out_sizes.begin(), out_sizes.end()))
      return op_error(op, cat("Sum ", dims_string(s.sizes()), " must have the output's shape ", dims_string(out_sizes)));
    ep.sum = s.typed<float>();
  }
  // Y over the residual in place when nothing reads the residual after this node (ONNX Runtime's NchwcConv declares
  // MayInplace(3, 0)): each tile reads its Sum pixels and writes its Y pixels at the same addresses, one stream of
  // memory instead of two, and Y is written to lines the Sum left in cache (ResNet-50's layer1 residual layers on one
  // thread 1.17-1.23 -> 1.08-1.10 ms). For Winograd convolutions (the output transform adds each pixel's Sum as it
  // stores it) and dense direct ones. A dense one of several passes over its input channels starts its accumulators
  // from the Sum in Y and adds none at the end (nchwc_conv_compute): the passes load back what the one before stored.
  const bool in_place = ep.sum != nullptr && (p.winograd != 0 || g.kind == conv_kind::dense);
  tensor& y = in_place ? ctx.allocate_output_over_input(0, 3, element_type::float32, out_sizes)
                       : ctx.allocate_output(0, element_type::float32, out_sizes);
  c.empty = y.element_count() == 0;
  c.x = x.typed<float>();
  c.w = wt.typed<float>();
  c.y = y.typed<float>();
  return c;
}

}  // namespace nchwc
namespace {
using namespace nchwc;


// Up to NB output blocks x NO output pixels of row `oh` from column ow0, input channels [c0, c1) (blocks for dense,
// channels for first_layer). Taps that fall outside the input read a block of zeros. `first`: the accumulators start
// at zero, else from Y; `last`: bias, sum and activation, else stored raw for the next chunk of input channels.
alignas(64) constexpr float zero_block[blk] = {};

// The end of a dense tile (both kinds below): `last`, bias, Sum and the activation (finish_tile); else the raw sums,
// for the next chunk of input channels to load back.
template <int NB, int NO>
[[gnu::always_inline]] inline void store_dense_tile(const conv_view& v, const conv_epilogue& ep, v16 (&acc)[NB][NO], std::int64_t ob0,
                                                    std::int64_t oh, std::int64_t ow0, bool last) {
  const std::int64_t OH = v.g->h.out, OW = v.g->w.out;
  const std::int64_t at = ((ob0 * OH + oh) * OW + ow0) * blk;
  if (last) {
    finish_tile(ep.act, acc, ep.bias != nullptr ? ep.bias + ob0 * blk : nullptr, v.y + at, OH * OW * blk,
                v.sum != nullptr ? v.sum + at : nullptr);
    return;
  }
  for (int b = 0; b < NB; ++b)
    for (int o = 0; o < NO; ++o) store(v.y + at + b * OH * OW * blk + o * blk, acc[b][o]);
}

template <int NB, int NO, bool FIRST_LAYER>
void dense_tile(const conv_view& v, const conv_epilogue& ep, std::int64_t ob0, std::int64_t oh, std::int64_t ow0,
                std::int64_t c0, std::int64_t c1, bool first, bool last) {
  const conv_geom& g = *v.g;
  const std::int64_t OH = g.h.out, OW = g.w.out, IH = g.h.in, IW = g.w.in, KH = g.h.k, KW = g.w.k;
  constexpr std::int64_t bi_count = FIRST_LAYER ? 1 : blk;
  constexpr std::int64_t xcol = FIRST_LAYER ? 1 : blk;  // floats between neighbouring input pixels
  // Floats between filter blocks, between input channels (blocks) and per tap.
  const std::int64_t tap = bi_count * blk;
  const std::int64_t per_c = KH * KW * tap;
  const std::int64_t per_ob = (FIRST_LAYER ? g.C : g.CB) * per_c;
  const std::int64_t x_per_c = IH * IW * xcol;
  if constexpr (FIRST_LAYER) {
    // The rows the next output row reads, for these pixels (the planar input is read 3 floats in 16 of a line).
    const auto [r0, r1] = next_rows(g.h, oh);
    for (std::int64_t c = c0; c < c1; ++c)
      prefetch_rows(v.x + c * x_per_c, IW, 1, r0, r1, ow0 * g.w.s - g.w.pb, (ow0 + NO) * g.w.s - g.w.pb + 16);
  }
  v16 acc[NB][NO];
  for (int b = 0; b < NB; ++b)
    for (int o = 0; o < NO; ++o)
      acc[b][o] = first ? v16{} : load(v.y + (((ob0 + b) * OH + oh) * OW + ow0 + o) * blk);
  for (std::int64_t kh = 0; kh < KH; ++kh) {
    const std::int64_t ih = oh * g.h.s - g.h.pb + kh * g.h.d;
    if (ih < 0 || ih >= IH) continue;
    for (std::int64_t kw = 0; kw < KW; ++kw) {
      // Each output pixel's input pixel for this tap (channel c0), or the zeros.
      const float* xo[NO];
      std::int64_t xstep[NO];
      for (int o = 0; o < NO; ++o) {
        const std::int64_t iw = (ow0 + o) * g.w.s - g.w.pb + kw * g.w.d;
        const bool in = iw >= 0 && iw < IW;
        xo[o] = in ? v.x + c0 * x_per_c + (ih * IW + iw) * xcol : zero_block;
        xstep[o] = in ? x_per_c : 0;
      }
      const float* wp = v.wt + ob0 * per_ob + c0 * per_c + (kh * KW + kw) * tap;
      for (std::int64_t c = c0; c < c1; ++c) {
        const std::int64_t nbi = FIRST_LAYER || c + 1 < g.CB ? bi_count : v.x_tail;
#pragma GCC unroll 2
        for (std::int64_t bi = 0; bi < nbi; ++bi) {
          v16 wv[NB];
#pragma GCC unroll 4
          for (int b = 0; b < NB; ++b) wv[b] = load(wp + b * per_ob + bi * blk);
#pragma GCC unroll 24
          for (int o = 0; o < NO; ++o) {
            const v16 xs = splat(xo[o][bi]);
#pragma GCC unroll 4
            for (int b = 0; b < NB; ++b) acc[b][o] += wv[b] * xs;
          }
        }
        wp += per_c;
        for (int o = 0; o < NO; ++o) xo[o] += xstep[o];
        if constexpr (!FIRST_LAYER)
          if (v.pf != nullptr) v.pf->step();
      }
    }
  }
  store_dense_tile(v, ep, acc, ob0, oh, ow0, last);
}

// dense_tile for a tile whose every tap lies inside the input row (columns; rows are still checked) and a stride S
// known at compile time: each tap's pixels are at fixed offsets from one pointer, which steps once per input channel
// (block). The general tile keeps a pointer and a step per pixel, more than the registers hold (they spilled, and the
// first layer of ResNet-50 ran at 65% of the FMA rate that ONNX Runtime's reaches). Its start repeats
// dense_tile's: through shared helper functions (even always inlined) MobileNetV2 ran 2-4% slower (4 interleaved
// rounds of 400 runs), so it stays written out. Both end in store_dense_tile.
// LEFT (dense, ow0 = 0): the row's first tile, whose first pixel's taps left of the input (kw * d < pb) read a block
// of zeros and whose other pixels lie inside the row (stride >= pb): a stride-2 3x3 layer with one column of padding
// needs no padded copy of X (nchwc_conv_compute).
template <int NB, int NO, bool FIRST_LAYER, int S, bool LEFT = false>
void dense_tile_interior(const conv_view& v, const conv_epilogue& ep, std::int64_t ob0, std::int64_t oh, std::int64_t ow0,
                         std::int64_t c0, std::int64_t c1, bool first, bool last) {
  static_assert(!LEFT || !FIRST_LAYER);
  const conv_geom& g = *v.g;
  const std::int64_t OH = g.h.out, OW = g.w.out, IH = g.h.in, IW = g.w.in, KH = g.h.k, KW = g.w.k;
  constexpr std::int64_t bi_count = FIRST_LAYER ? 1 : blk;
  constexpr std::int64_t xcol = FIRST_LAYER ? 1 : blk;
  const std::int64_t tap = bi_count * blk;
  const std::int64_t per_c = KH * KW * tap;
  const std::int64_t per_ob = (FIRST_LAYER ? g.C : g.CB) * per_c;
  const std::int64_t x_per_c = IH * IW * xcol;
  if constexpr (FIRST_LAYER) {
    const auto [r0, r1] = next_rows(g.h, oh);
    for (std::int64_t c = c0; c < c1; ++c)
      prefetch_rows(v.x + c * x_per_c, IW, 1, r0, r1, ow0 * S - g.w.pb, (ow0 + NO) * S - g.w.pb + 16);
  }
  v16 acc[NB][NO];
  for (int b = 0; b < NB; ++b)
    for (int o = 0; o < NO; ++o)
      acc[b][o] = first ? v16{} : load(v.y + (((ob0 + b) * OH + oh) * OW + ow0 + o) * blk);
  if constexpr (FIRST_LAYER) {
    // Plain input of a few channels: the taps of a filter row innermost (7 for ResNet-50's first layer, 3 for
    // MobileNet's), whose filters are consecutive and whose pixels step by one; channels (3) outermost.
    for (std::int64_t c = c0; c < c1; ++c)
      for (std::int64_t kh = 0; kh < KH; ++kh) {
        const std::int64_t ih = oh * g.h.s - g.h.pb + kh * g.h.d;
        if (ih < 0 || ih >= IH) continue;
        const float* xk = v.x + c * x_per_c + ih * IW + ow0 * S - g.w.pb;
        const float* wp = v.wt + ob0 * per_ob + c * per_c + kh * KW * tap;
        for (std::int64_t kw = 0; kw < KW; ++kw, xk += g.w.d, wp += tap) {
          v16 wv[NB];
#pragma GCC unroll 4
          for (int b = 0; b < NB; ++b) wv[b] = load(wp + b * per_ob);
#pragma GCC unroll 24
          for (int o = 0; o < NO; ++o) {
            const v16 xs = splat(xk[o * S]);
#pragma GCC unroll 4
            for (int b = 0; b < NB; ++b) acc[b][o] += wv[b] * xs;
          }
        }
      }
  } else {
    for (std::int64_t kh = 0; kh < KH; ++kh) {
      const std::int64_t ih = oh * g.h.s - g.h.pb + kh * g.h.d;
      if (ih < 0 || ih >= IH) continue;
      for (std::int64_t kw = 0; kw < KW; ++kw) {
        const bool pad0 = LEFT && kw * g.w.d < g.w.pb;  // the first pixel's tap lies left of the row
        // xk: pixel o0's input, the tile's first pixel inside the row (LEFT: the second); x0 the first pixel's, or
        // zeros (LEFT only: otherwise unused).
        constexpr int o0 = LEFT ? 1 : 0;
        const float* xk = v.x + c0 * x_per_c + (ih * IW + (ow0 + o0) * S - g.w.pb + kw * g.w.d) * xcol;
        const float* x0 = pad0 ? zero_block : xk - o0 * S * xcol;
        const std::int64_t x0_step = pad0 ? 0 : x_per_c;
        const float* wp = v.wt + ob0 * per_ob + c0 * per_c + (kh * KW + kw) * tap;
        for (std::int64_t c = c0; c < c1; ++c) {
          const std::int64_t nbi = c + 1 < g.CB ? bi_count : v.x_tail;
#pragma GCC unroll 2
          for (std::int64_t bi = 0; bi < nbi; ++bi) {
            v16 wv[NB];
#pragma GCC unroll 4
            for (int b = 0; b < NB; ++b) wv[b] = load(wp + b * per_ob + bi * blk);
#pragma GCC unroll 24
            for (int o = 0; o < NO; ++o) {
              const v16 xs = splat(LEFT && o == 0 ? x0[bi] : xk[(o - o0) * S * xcol + bi]);
#pragma GCC unroll 4
              for (int b = 0; b < NB; ++b) acc[b][o] += wv[b] * xs;
            }
          }
          wp += per_c;
          xk += x_per_c;
          if constexpr (LEFT) x0 += x0_step;
          if (v.pf != nullptr) v.pf->step();
        }
      }
    }
  }
  store_dense_tile(v, ep, acc, ob0, oh, ow0, last);
}

// A whole tile of a 1x1 convolution over a flat image (unit strides, no padding) whose last output block has 8 real
// lanes (conv_view::y_half): the other blocks as dense_tile_interior computes them, the last one's lower 8 lanes in
// 8-float vectors. On a core that splits 512-bit instructions in two (AMD Zen 4) an 8-float FMA costs half a 16-float
// one: MobileNetV2's 96- and 144-to-24-channel projections do a quarter less work. The result is widened with zeros
// for the epilogue, so every lane is stored as the full tile stores it.
template <int NB, int NO>
void dense_tile_1x1_half(const conv_view& v, const conv_epilogue& ep, std::int64_t ob0, std::int64_t ow0, std::int64_t c0, std::int64_t c1,
                         bool first, bool last) {
  static_assert(NB >= 2);
  constexpr int NF = NB - 1;  // whole blocks
  const conv_geom& g = *v.g;
  const std::int64_t OW = g.w.out, x_per_c = g.h.in * g.w.in * blk, per_c = blk * blk, per_ob = g.CB * per_c;
  const std::int64_t at = (ob0 * g.h.out * OW + ow0) * blk, bstride = g.h.out * OW * blk;
  v16 acc[NF][NO];
  v8 half[NO];
  for (int o = 0; o < NO; ++o) {
    for (int b = 0; b < NF; ++b) acc[b][o] = first ? v16{} : load(v.y + at + b * bstride + o * blk);
    half[o] = first ? v8{} : load8(v.y + at + NF * bstride + o * blk);
  }
  const float* xk = v.x + c0 * x_per_c + (ow0 - g.w.pb) * blk;
  const float* wp = v.wt + ob0 * per_ob + c0 * per_c;
  for (std::int64_t c = c0; c < c1; ++c) {
    const std::int64_t nbi = c + 1 < g.CB ? blk : v.x_tail;
#pragma GCC unroll 2
    for (std::int64_t bi = 0; bi < nbi; ++bi) {
      v16 wv[NF];
#pragma GCC unroll 4
      for (int b = 0; b < NF; ++b) wv[b] = load(wp + b * per_ob + bi * blk);
      const v8 wh = load8(wp + NF * per_ob + bi * blk);
#pragma GCC unroll 24
      for (int o = 0; o < NO; ++o) {
        const v16 xs = splat(xk[o * blk + bi]);
#pragma GCC unroll 4
        for (int b = 0; b < NF; ++b) acc[b][o] += wv[b] * xs;
        half[o] += wh * low8(xs);
      }
    }
    wp += per_c;
    xk += x_per_c;
    if (v.pf != nullptr) v.pf->step();
  }
  v16 all[NB][NO];
  for (int o = 0; o < NO; ++o) {
    for (int b = 0; b < NF; ++b) all[b][o] = acc[b][o];
    all[NF][o] = widen(half[o]);
  }
  store_dense_tile(v, ep, all, ob0, 0, ow0, last);
}

// Columns [s0, s1) of row `oh` in tiles of 24 / NB pixels (24 accumulators: 4 blocks x 6, 3 x 8, 2 x 12) or, for one
// block, 16 pixels, the remainder in tiles of 4, 3, 2 and 1 (5 as 3 + 2). One block of 24 pixels ran MobileNetV2's
// 32-to-16-channel 1x1 layer at 112x112 in 141 us on one thread, 16 pixels in 131 (12: 134, 20: 142; two blocks
// gained nothing from 8 or 10 pixels).
template <int NB, bool FIRST_LAYER>
void dense_range_nb(const conv_view& v, const conv_epilogue& ep, std::int64_t ob0, std::int64_t oh, std::int64_t s0,
                    std::int64_t s1, std::int64_t c0, std::int64_t c1, bool first, bool last) {
  constexpr int full = NB == 1 ? 16 : 24 / NB;
  const auto [lo, hi] = interior(v.g->w);
  const std::int64_t stride = v.g->w.s;
  for (std::int64_t ow = s0; ow < s1;) {
    const std::int64_t r = s1 - ow;
    // At 4 blocks, one or two pixels past a whole tile (a row of 7): tiles of 4 and 3 or 4, not a tile of 1 or 2,
    // whose 4 or 8 accumulators wait on each other's FMA latency.
    const bool split = NB == 4 && (r == full + 1 || r == full + 2);
    const int n = split ? 4 : r >= full ? full : r == 5 ? 3 : r >= 4 ? 4 : static_cast<int>(r);
    if constexpr (!FIRST_LAYER && NB >= 2) {
      // The last set of blocks of a flat 1x1 convolution whose last block has 8 real lanes.
      if (v.y_half && n == full && ob0 + NB == v.g->MB && v.g->h.out == 1 && v.g->h.k == 1 && v.g->w.k == 1 && stride == 1 &&
          ow >= lo && ow + n <= hi) {
        dense_tile_1x1_half<NB, full>(v, ep, ob0, ow, c0, c1, first, last);
        ow += n;
        continue;
      }
    }
    if constexpr (!FIRST_LAYER) {
      // A stride-2 row's first tile whose first pixel alone reaches into the padding (no padded copy of X).
      if (ow == 0 && left_pixel_padded_only(v.g->w) && (n == full || n == 4) && n <= hi) {
        if (n == full) dense_tile_interior<NB, full, false, 2, true>(v, ep, ob0, oh, ow, c0, c1, first, last);
        else dense_tile_interior<NB, 4, false, 2, true>(v, ep, ob0, oh, ow, c0, c1, first, last);
        ow += n;
        continue;
      }
    }
    if ((n == full || n == 4 || n == 3) && ow >= lo && ow + n <= hi && (stride == 1 || stride == 2)) {
      // Interior tiles of 4 and 3 pixels too: rows of 56, 28, 14 and 7 end in them, and through the general tile
      // (a pointer per pixel) they took a fifth of ResNet-50's direct convolution time.
      if (stride == 1) {
        if (n == full) dense_tile_interior<NB, full, FIRST_LAYER, 1>(v, ep, ob0, oh, ow, c0, c1, first, last);
        else if (n == 4) dense_tile_interior<NB, 4, FIRST_LAYER, 1>(v, ep, ob0, oh, ow, c0, c1, first, last);
        else dense_tile_interior<NB, 3, FIRST_LAYER, 1>(v, ep, ob0, oh, ow, c0, c1, first, last);
      } else {
        if (n == full) dense_tile_interior<NB, full, FIRST_LAYER, 2>(v, ep, ob0, oh, ow, c0, c1, first, last);
        else if (n == 4) dense_tile_interior<NB, 4, FIRST_LAYER, 2>(v, ep, ob0, oh, ow, c0, c1, first, last);
        else dense_tile_interior<NB, 3, FIRST_LAYER, 2>(v, ep, ob0, oh, ow, c0, c1, first, last);
      }
      ow += n;
      continue;
    }
    switch (n) {
      case full: dense_tile<NB, full, FIRST_LAYER>(v, ep, ob0, oh, ow, c0, c1, first, last); break;
      case 4: dense_tile<NB, 4, FIRST_LAYER>(v, ep, ob0, oh, ow, c0, c1, first, last); break;
      case 3: dense_tile<NB, 3, FIRST_LAYER>(v, ep, ob0, oh, ow, c0, c1, first, last); break;
      case 2: dense_tile<NB, 2, FIRST_LAYER>(v, ep, ob0, oh, ow, c0, c1, first, last); break;
      default: dense_tile<NB, 1, FIRST_LAYER>(v, ep, ob0, oh, ow, c0, c1, first, last); break;
    }
    ow += n;
  }
}

// A first layer's plain input has no padded copy, so its rows have pixels whose taps reach into the padding (ResNet-50's
// 7x7 stride-2 layer: 2 on the left, 1 on the right). The pixels inside are tiled on their own, so that no tile
// straddles the edge: tiles planned over the whole row put 6 + 4 of ResNet-50's 112 pixels through the general tile
// (a pointer per pixel, about 65% of the FMA rate), now 2 + 1.
template <int NB, bool FIRST_LAYER>
void dense_segment_nb(const conv_view& v, const conv_epilogue& ep, std::int64_t ob0, std::int64_t oh, std::int64_t s0,
                      std::int64_t s1, std::int64_t c0, std::int64_t c1, bool first, bool last) {
  if constexpr (FIRST_LAYER) {
    const auto [lo, hi] = interior(v.g->w);
    const std::int64_t a = std::clamp(lo, s0, s1), b = std::clamp(hi, a, s1);
    if (s0 < a) dense_range_nb<NB, true>(v, ep, ob0, oh, s0, a, c0, c1, first, last);
    if (a < b) dense_range_nb<NB, true>(v, ep, ob0, oh, a, b, c0, c1, first, last);
    if (b < s1) dense_range_nb<NB, true>(v, ep, ob0, oh, b, s1, c0, c1, first, last);
  } else {
    dense_range_nb<NB, false>(v, ep, ob0, oh, s0, s1, c0, c1, first, last);
  }
}

}  // namespace

namespace nchwc {
template <bool FIRST_LAYER>
void dense_segment(int nb, const conv_view& v, const conv_epilogue& ep, std::int64_t ob0, std::int64_t oh, std::int64_t s0,
                   std::int64_t s1, std::int64_t c0, std::int64_t c1, bool first, bool last) {
  switch (nb) {
    case 4: return dense_segment_nb<4, FIRST_LAYER>(v, ep, ob0, oh, s0, s1, c0, c1, first, last);
    case 3: return dense_segment_nb<3, FIRST_LAYER>(v, ep, ob0, oh, s0, s1, c0, c1, first, last);
    case 2: return dense_segment_nb<2, FIRST_LAYER>(v, ep, ob0, oh, s0, s1, c0, c1, first, last);
    default: return dense_segment_nb<1, FIRST_LAYER>(v, ep, ob0, oh, s0, s1, c0, c1, first, last);
  }
}
template void dense_segment<false>(int, const conv_view&, const conv_epilogue&, std::int64_t, std::int64_t, std::int64_t,
                                   std::int64_t, std::int64_t, std::int64_t, bool, bool);
template void dense_segment<true>(int, const conv_view&, const conv_epilogue&, std::int64_t, std::int64_t, std::int64_t,
                                  std::int64_t, std::int64_t, std::int64_t, bool, bool);
}  // namespace nchwc

namespace {

// Depthwise: one block of 16 channels, NO pixels of row `oh` from ow0, bias, sum and activation in registers.
template <int NO, bool EDGE>
void depthwise_tile(const conv_view& v, const conv_epilogue& ep, std::int64_t cb, std::int64_t oh, std::int64_t ow0) {
  const conv_geom& g = *v.g;
  const std::int64_t IH = g.h.in, IW = g.w.in, KH = g.h.k, KW = g.w.k;
  const v16 bias = ep.bias != nullptr ? load(ep.bias + cb * blk) : v16{};
  v16 acc[1][NO];
  for (int o = 0; o < NO; ++o) acc[0][o] = bias;
  const float* xb = v.x + cb * v.x_plane;
  const float* wb = v.wt + cb * KH * KW * blk;
  for (std::int64_t kh = 0; kh < KH; ++kh) {
    const std::int64_t ih = oh * g.h.s - g.h.pb + kh * g.h.d;
    if (ih < 0 || ih >= IH) continue;
    const float* xr = xb + ih * IW * blk;
    for (std::int64_t kw = 0; kw < KW; ++kw) {
      const std::int64_t iw0 = ow0 * g.w.s - g.w.pb + kw * g.w.d;
      if constexpr (EDGE) {
        if (iw0 < 0 || iw0 >= IW) continue;
      }
      const v16 wv = load(wb + (kh * KW + kw) * blk);
      for (int o = 0; o < NO; ++o) acc[0][o] += load(xr + (iw0 + o * g.w.s) * blk) * wv;
    }
  }
  const std::int64_t at = ((cb * g.h.out + oh) * g.w.out + ow0) * blk;
  finish_tile(ep.act, acc, nullptr, v.y + at, 0, v.sum != nullptr ? v.sum + at : nullptr);
}

// The common depthwise case, 3 taps wide at stride 1 or 2 (undilated across): each input row's pixels that the tile
// reads are loaded once into registers and used by all three taps (the general tile loads each pixel once per tap),
// and each output pixel has an accumulator of its own. EDGE: some of those pixels lie in the padding (read as zeros).
// Whole rows go through it, edges and remainders included: a remainder of single-pixel tiles was one chain of
// dependent FMAs per pixel, and MobileNetV2's 14-pixel rows were half remainder (its 14x14 depthwise layers ran at
// 1.5x ONNX Runtime's time).
template <int NO, int S, bool EDGE>
void depthwise_tile_3w(const conv_view& v, const conv_epilogue& ep, std::int64_t cb, std::int64_t oh, std::int64_t ow0) {
  constexpr int NX = (NO - 1) * S + 3;
  const conv_geom& g = *v.g;
  const std::int64_t IH = g.h.in, IW = g.w.in, KH = g.h.k;
  const v16 bias = ep.bias != nullptr ? load(ep.bias + cb * blk) : v16{};
  v16 acc[1][NO];
  for (int o = 0; o < NO; ++o) acc[0][o] = bias;
  const float* xb = v.x + cb * v.x_plane;
  const float* wb = v.wt + cb * KH * 3 * blk;
  const std::int64_t iw0 = ow0 * S - g.w.pb;
  for (std::int64_t kh = 0; kh < KH; ++kh) {
    const std::int64_t ih = oh * g.h.s - g.h.pb + kh * g.h.d;
    if (ih < 0 || ih >= IH) continue;
    const float* xr = xb + ih * IW * blk;
    v16 x[NX];
    for (int i = 0; i < NX; ++i) {
      if constexpr (EDGE) x[i] = iw0 + i >= 0 && iw0 + i < IW ? load(xr + (iw0 + i) * blk) : v16{};
      else x[i] = load(xr + (iw0 + i) * blk);
      if constexpr (S == 1) keep_in_register(x[i]);
    }
    const v16 w0 = load(wb + (kh * 3) * blk), w1 = load(wb + (kh * 3 + 1) * blk), w2 = load(wb + (kh * 3 + 2) * blk);
    for (int o = 0; o < NO; ++o) {
      acc[0][o] += x[o * S] * w0;
      acc[0][o] += x[o * S + 1] * w1;
      acc[0][o] += x[o * S + 2] * w2;
    }
  }
  const std::int64_t at = ((cb * g.h.out + oh) * g.w.out + ow0) * blk;
  finish_tile(ep.act, acc, nullptr, v.y + at, 0, v.sum != nullptr ? v.sum + at : nullptr);
}

// A row of depthwise_tile_3w tiles: 8 pixels at a time, then one tile of the remainder.
template <int S>
void depthwise_row_3w(const conv_view& v, const conv_epilogue& ep, std::int64_t cb, std::int64_t oh) {
  const conv_geom& g = *v.g;
  const auto [lo, hi] = interior(g.w);
  const std::int64_t OW = g.w.out;
  const auto [r0, r1] = next_rows(g.h, oh);
  const float* plane = v.x + cb * v.x_plane;
  std::int64_t ow = 0;
  for (; ow + 8 <= OW; ow += 8) {
    prefetch_rows(plane, g.w.in, blk, r0, r1, ow * S - g.w.pb, (ow + 8) * S - g.w.pb + 2);
    if (ow >= lo && ow + 8 <= hi) depthwise_tile_3w<8, S, false>(v, ep, cb, oh, ow);
    else depthwise_tile_3w<8, S, true>(v, ep, cb, oh, ow);
  }
  switch (OW - ow) {
    case 7: return depthwise_tile_3w<7, S, true>(v, ep, cb, oh, ow);
    case 6: return depthwise_tile_3w<6, S, true>(v, ep, cb, oh, ow);
    case 5: return depthwise_tile_3w<5, S, true>(v, ep, cb, oh, ow);
    case 4: return depthwise_tile_3w<4, S, true>(v, ep, cb, oh, ow);
    case 3: return depthwise_tile_3w<3, S, true>(v, ep, cb, oh, ow);
    case 2: return depthwise_tile_3w<2, S, true>(v, ep, cb, oh, ow);
    case 1: return depthwise_tile_3w<1, S, true>(v, ep, cb, oh, ow);
    default: return;
  }
}

}  // namespace

namespace nchwc {
void depthwise_row(const conv_view& v, const conv_epilogue& ep, std::int64_t cb, std::int64_t oh) {
  const conv_geom& g = *v.g;
  if (g.w.k == 3 && g.w.d == 1 && g.w.s == 1) return depthwise_row_3w<1>(v, ep, cb, oh);
  if (g.w.k == 3 && g.w.d == 1 && g.w.s == 2) return depthwise_row_3w<2>(v, ep, cb, oh);
  const auto [lo, hi] = interior(g.w);
  const std::int64_t OW = g.w.out;
  const auto [r0, r1] = next_rows(g.h, oh);
  const float* plane = v.x + cb * v.x_plane;
  std::int64_t ow = 0;
  for (; ow < lo; ++ow) depthwise_tile<1, true>(v, ep, cb, oh, ow);
  for (; ow + 8 <= hi; ow += 8) {
    prefetch_rows(plane, g.w.in, blk, r0, r1, ow * g.w.s - g.w.pb, (ow + 8) * g.w.s - g.w.pb);
    depthwise_tile<8, false>(v, ep, cb, oh, ow);
  }
  for (; ow < hi; ++ow) depthwise_tile<1, false>(v, ep, cb, oh, ow);
  for (; ow < OW; ++ow) depthwise_tile<1, true>(v, ep, cb, oh, ow);
}
}  // namespace nchwc

namespace {

Status nchwc_conv_compute(const nchwc_conv_plan& p, compute_context& ctx) {
  EPSTACK_ASSIGN_OR_RETURN(conv_call c, nchwc_conv_setup(p, ctx));
  if (c.empty) return {};
  conv_geom& g = c.g;
  const conv_epilogue& ep = c.ep;
  const float* px = c.x;
  float* py = c.y;
  const std::int64_t in_image = g.C * g.h.in * g.w.in, out_image = g.M * g.h.out * g.w.out;

  if (g.kind == conv_kind::depthwise) {
    // Rows in image order, every block of a row before the next row: a thread's share is a band of the image in all
    // channels, as the 1x1 layers around it split theirs (pixels first), so what it reads was mostly written by the
    // same core. MobileNetV2 in this VM's busy phases: 6.67-6.74 -> 6.45-6.66 ms (blocks first), the same when quiet.
    const auto rows = static_cast<std::size_t>(g.N * g.CB * g.h.out);
    parallel_items(ctx, rows, static_cast<std::size_t>(g.w.out * g.h.k * g.w.k * blk), [&](std::size_t r0, std::size_t r1) {
      for (std::size_t r = r0; r < r1; ++r) {
        const auto ri = static_cast<std::int64_t>(r);
        const std::int64_t n = ri / (g.CB * g.h.out), oh = ri / g.CB % g.h.out, cb = ri % g.CB;
        const conv_view v{&g, px + n * in_image, c.w, py + n * out_image, ep.sum ? ep.sum + n * out_image : nullptr,
                          g.h.in * g.w.in * blk};
        depthwise_row(v, ep, cb, oh);
        if (!in_register(ep.act)) ep.act.apply(py + n * out_image + (cb * g.h.out + oh) * g.w.out * blk, static_cast<std::size_t>(g.w.out * blk));
      }
    });
    return {};
  }

  // Dense and first layer. A 1x1 convolution with unit strides and no padding: the image is one row.
  conv_geom flat = g;
  if (g.h.k == 1 && g.w.k == 1 && g.h.s == 1 && g.w.s == 1 && g.h.pb == 0 && g.w.pb == 0 && g.h.out == g.h.in &&
      g.w.out == g.w.in) {
    flat.w.in = flat.w.out = g.h.in * g.w.in;
    flat.h.in = flat.h.out = 1;
  }
  const bool first_layer = g.kind == conv_kind::first_layer;
  // A dense convolution with padded columns at stride 1 or 2 reads a copy of X with the padding written out as
  // zeros, so that every whole tile of a row is an interior tile (one pointer for all its pixels). Through the general
  // tile, a 14x14 or 7x7 image's rows were mostly edge tiles (ResNet-50's stride-2 3x3 layers ran at 1.1-1.3x ONNX
  // Runtime's time); the copy costs one pass over X.
  // Sets of up to 4 output blocks, as even as they can be (9 blocks: 3 + 3 + 3, not 4 + 4 + 1).
  const std::int64_t groups = (g.MB + 3) / 4, per_group = g.MB / groups, wider = g.MB % groups;
  const auto threads = static_cast<std::int64_t>(ctx.thread_count());
  // With at most two threads that each take whole sets of output blocks (and so read all of X), each thread makes
  // the copy of one image for itself, once per call, in a buffer of its own (thread_rows_for): written and read by
  // one core. One
  // copy shared by the threads ran its stores at the speed of lines another core held: ResNet-50's 128-channel 3x3/2
  // layer 0.98-1.22 -> 0.84-0.86 ms (three profiled pairs).
  tensor padded;
  std::int64_t x_image = in_image;
  // Rows of the copy: r is row r % per_plane of plane r / per_plane (image n, input block cb), read from input row
  // r % per_plane * step_h of that plane; `cols` pixels `step_w` apart, after `pb` zero pixels, zeros to `IWp`.
  struct x_copy {
    std::int64_t rows = 0, per_plane = 0, IH = 0, step_h = 1, IW = 0, cols = 0, step_w = 1, IWp = 0, pb = 0;
    const float* src = nullptr;
    void operator()(float* dst, std::int64_t r0, std::int64_t r1) const {
      for (std::int64_t r = r0; r < r1; ++r) {
        const float* s = src + (r / per_plane * IH + r % per_plane * step_h) * IW * blk;
        float* d = dst + r * IWp * blk;
        std::fill(d, d + pb * blk, 0.0f);
        if (step_w == 1) {
          std::memcpy(d + pb * blk, s, static_cast<std::size_t>(cols * blk) * sizeof(float));
        } else {
          for (std::int64_t j = 0; j < cols; ++j)
            std::memcpy(d + (pb + j) * blk, s + j * step_w * blk, blk * sizeof(float));
        }
        std::fill(d + (pb + cols) * blk, d + IWp * blk, 0.0f);
      }
    }
  } copy;
  bool private_copy = false, copied = false;
  if (g.kind == conv_kind::dense && flat.w.k > 1 && (flat.w.s == 1 || flat.w.s == 2)) {
    const auto [lo, hi] = interior(flat.w);
    const std::int64_t pe = std::max<std::int64_t>(0, (flat.w.out - 1) * flat.w.s + (flat.w.k - 1) * flat.w.d + 1 - flat.w.in - flat.w.pb);
    // Stride 2 with only each row's first pixel in the padding (a 3x3 layer with one column of padding over an even
    // width: ResNet's downsampling 3x3 layers): no copy, the rows' first tiles read zeros for it (dense_segment_nb).
    // The copy of ResNet-50's 128-channel 56x56 input cost 76-158 us per thread of the layer's 0.86-0.97 ms.
    const bool left_only = left_pixel_padded_only(flat.w) && hi == flat.w.out;
    if ((lo > 0 || hi < flat.w.out) && flat.w.out > 0 && !left_only) {
      copy = {g.N * g.CB * flat.h.in, flat.h.in, flat.h.in, 1, flat.w.in, flat.w.in, 1, flat.w.in + flat.w.pb + pe, flat.w.pb, px};
      copied = true;
      x_image = g.CB * flat.h.in * copy.IWp * blk;
      flat.w.in = copy.IWp;
      flat.w.pb = 0;
    }
  }
  // A 1x1 convolution at a stride above 1 (ResNet's downsampling layers) reads every S-th pixel of every S-th row:
  // those pixels are copied side by side and the image becomes one row, as at stride 1. Rows of 14 and 7 pixels
  // were tiles of 4 and 3 pixels (16 and 12 of the 24 accumulators). bench_kernels' 512-to-1024-channel layer at 28x28
  // took 784-790 us, now 661-665 with the copy; 1024 to 2048 at 14x14 769-787, now 642-644. In ResNet-50 its three
  // downsampling layers went from 1.07, 0.95 and 1.04 ms to 0.81, 0.72 and 0.83, the network 26.80 to 25.85 ms (mean
  // of five alternated medians; every pair faster).
  if (g.kind == conv_kind::dense && g.h.k == 1 && g.w.k == 1 && (g.h.s > 1 || g.w.s > 1) && g.h.pb == 0 && g.w.pb == 0 &&
      g.h.out > 0 && g.w.out > 0 && (g.h.out - 1) * g.h.s < g.h.in && (g.w.out - 1) * g.w.s < g.w.in) {
    copy = {g.N * g.CB * g.h.out, g.h.out, g.h.in, g.h.s, g.w.in, g.w.out, g.w.s, g.w.out, 0, px};
    copied = true;
    x_image = g.CB * g.h.out * g.w.out * blk;
    flat.w = {};
    flat.h = {};
    flat.w.in = flat.w.out = g.h.out * g.w.out;
    flat.h.in = flat.h.out = 1;
  }
  if (copied) {
    // (One image and at most 8 MiB: the buffer stays with its thread after the call.)
    private_copy = threads <= 2 && groups >= threads && g.N == 1 && copy.rows * copy.IWp * blk * 4 <= (std::int64_t{8} << 20);
    if (!private_copy) {
      padded = ctx.scratch(element_type::float32, static_cast<std::size_t>(copy.rows * copy.IWp * blk));
      float* pp = padded.typed<float>();
      parallel_items(ctx, static_cast<std::size_t>(copy.rows), static_cast<std::size_t>(copy.IWp * blk / 4),
                     [&](std::size_t r0, std::size_t r1) { copy(pp, static_cast<std::int64_t>(r0), static_cast<std::int64_t>(r1)); });
      px = pp;
    }
  }
  // Column segments: short enough for the segment's outputs to stay in cache while input channels are accumulated,
  // and enough work items for every thread.
  const std::int64_t OW = flat.w.out;
  std::int64_t seg = std::max<std::int64_t>(1, (OW + 191) / 192);
  while (g.N * groups * flat.h.out * seg < 4 * threads && (OW + seg) / (seg + 1) >= 12) ++seg;
  // An image that is one row (1x1): rows cannot even out the threads' shares below, so segments do. Up to threads - 1
  // more, until every thread has as many items: MobileNetV2's 24-to-144-channel expansion at 56x56 came to 51 items
  // (26 against 25) and its 32-to-192 at 28x28 to 15 (8 against 7). Not into segments of fewer than 48 pixels, whose
  // remainders become narrow tiles (the 7x7 layers' 49 pixels in 4 segments ran 5-10% slower than in 3).
  if (flat.h.out == 1)
    for (std::int64_t more = seg; more < seg + threads && (OW + more - 1) / more >= 48; ++more)
      if (g.N * groups * more % threads == 0) {
        seg = more;
        break;
      }
  const std::int64_t seg_len = (OW + seg - 1) / seg;
  // Input channels per pass: all of them while the filters of a set of output blocks fit in about 1 MiB (an L2 cache),
  // else as few equal passes as keep each pass's filters within it. Each further pass stores the accumulators and
  // loads them back: with passes of 64 KiB of filters (one input block of a 3x3 layer), ResNet-50's 3x3 64-channel
  // layer at 56x56 took 508 us, 465 with all 4 blocks in one (ONNX Runtime 450-480); the 128- and 256-channel ones and
  // 1x1 layers of 512-2048 channels gained 2-6%.
  // Except a 1x1 layer over 1024 channels or more whose work items are at most 64 pixels: 128 channels a pass (32 KiB
  // of filters for 4 output blocks, an L1 cache, for every tile of the item's pixels). ResNet-50's 2048-to-512 layers
  // at 7x7 took 0.378-0.417 ms in one pass, 0.325-0.358 in passes of 128 (4 alternated profiled runs, three times;
  // 64 a pass was slower, 256 level with 128), its 1024-to-2048 downsampling layer (49 pixels after its copy) 0.04 ms
  // less. The 1024-to-256 layers at 14x14 (98 pixels an item on two threads) were level, MobileNetV2's projections
  // from 576 and 960 channels 5-15% slower. Items are shorter on more threads (ResNet-50's 14x14 layers at 8 threads),
  // which brings such layers under the rule too: measured on two threads only.
  const std::int64_t channels = first_layer ? g.C : g.CB;
  std::int64_t passes = filter_passes(channels, 4 * g.h.k * g.w.k * (first_layer ? blk : blk * blk) * 4);
  if (!first_layer && g.h.k == 1 && g.w.k == 1 && channels * blk >= 1024 && flat.h.out == 1 && seg_len <= 64)
    passes = std::max<std::int64_t>(passes, (channels * blk + 127) / 128);
  // Rows per work item: each pass over a chunk of input channels covers all the item's rows, so that the chunk's
  // filters are read once for them (a row per item re-read each set's filters for every row: 1.2 MB for ResNet-50's
  // 512-channel 3x3 layer, from L3 seven times), while there are still 4 items per thread and the rows' partial sums
  // (up to 4 blocks) stay within about 256 KiB.
  const std::int64_t OH = flat.h.out;
  std::int64_t rows = 1;
  while (rows < OH && g.N * groups * ((OH + rows) / (rows + 1)) * seg >= 4 * threads && (rows + 1) * seg_len <= 1024) ++rows;
  // Fewer rows while the threads' shares of items differ by more than 5%: ResNet-50's first layer (112 rows) came to
  // 13 items of 9 rows, 7 for one thread and 6 for the other.
  const auto share_ratio = [&](std::int64_t r) {
    const std::int64_t n_items = g.N * groups * ((OH + r - 1) / r) * seg;
    return static_cast<double>((n_items + threads - 1) / threads * threads) / static_cast<double>(n_items);
  };
  while (rows > 1 && share_ratio(rows) > 1.05) --rows;
  const std::int64_t row_sets = (OH + rows - 1) / rows;
  // A KxK layer (X blocked) whose item's partial sums are small, at most 32 KiB (the rows' pixels x up to 4 output
  // blocks): one input block a pass, whose filters (4 x K*K KiB, 36 KiB at 3x3) stay in the L1 cache for every tile
  // of the item, where a pass of 1 MiB read them from L2 for each tile (a tile's 24 FMAs need 4 filter vectors).
  // ResNet-50's 512-channel 3x3 layers at 7x7 (partial sums 12.5 KiB) went from 0.91-0.97 to 0.73-0.81 ms in the
  // network, its 256-channel stride-2 layer at 14x14 (25 KiB) from 0.81 to 0.76 (alternated profiled runs, 4 and 6
  // pairs); the 128-channel stride-2 layer at 28x28 (9 rows of 28 pixels: 63 KiB) went from 0.71 to 0.73 and keeps
  // its one pass. Two blocks a pass (72 KiB of filters) were slower at 7x7 than one.
  if (!first_layer && g.h.k * g.w.k > 1 && rows * seg_len * (per_group + (wider > 0 ? 1 : 0)) * blk * 4 <= (32 << 10))
    passes = channels;
  const std::int64_t chunk = (channels + passes - 1) / passes;
  // Y in place over the Sum and more than one pass: the first pass starts from the Sum (Y's values) rather than zero,
  // the last adds none.
  const bool sum_first = ep.sum != nullptr && ep.sum == py && passes > 1;
  const auto items = static_cast<std::size_t>(g.N * groups * row_sets * seg);
  const std::size_t cost = static_cast<std::size_t>(rows * seg_len * 64 * g.C * g.h.k * g.w.k);
  // The order of the items, which the threads take in contiguous shares: a convolution whose filters are at most
  // 1.5 times its input goes pixels first (each thread reads its part of X once and keeps it in cache for every set
  // of output blocks, and writes all channels of its pixels, which the next 1x1 or depthwise layer reads where it was
  // written); others go output blocks first (a thread reads only its sets' filters). With the bound at 1 (filters
  // smaller than X), MobileNetV2 ran 2-4% faster than all output blocks first (3.99 -> 3.85 ms on a quiet machine,
  // 7.03 -> 6.72 on a busy one), ResNet-50 0.5%. At 1.5, ResNet-50's layer3 1x1 reductions (1024 to 256 channels at
  // 14x14, filters 1.3 times X) read the block's residual that way, and the expansion that then adds its output over
  // that residual ran 0.2-0.3 ms faster in all, the reductions 0.1 slower. 8 interleaved rounds each: in a slow phase
  // of this VM ResNet-50 -1.4% and MobileNetV2 -1.2%, in a fast one ResNet-50 level (twice).
  // Not only 1x1 layers, when X is read as it is: ResNet-50's 128-channel 3x3 stride-2 layer (filters 0.6 MB, X 1.6
  // MB, written pixels first by the 1x1 layer before it) read half of X from the other core's cache, 0.76-0.83 ms;
  // pixels first 0.66-0.74 (4 alternated profiled runs, twice). A larger kernel over a padded copy keeps output blocks
  // first (unmeasured pixels first: each thread would copy all of X for half of its rows).
  const bool pixel_major = (g.h.k * g.w.k == 1 || !copied) &&
                           2 * g.M * channels * (first_layer ? 1 : blk) * g.h.k * g.w.k <= 3 * in_image;
  const std::uint64_t token = private_copy ? new_call_token() : 0;
  std::atomic<bool> no_memory{false};
  parallel_items(ctx, items, cost, [&](std::size_t i0, std::size_t i1) {
    const float* pxl = px;
    if (private_copy) {
      const thread_buffer tb = thread_rows_for(static_cast<std::size_t>(copy.rows * copy.IWp * blk), token);
      if (tb.data == nullptr) {
        no_memory = true;
        return;
      }
      if (*tb.tag != 1) copy(tb.data, 0, copy.rows);  // once per thread and call, whatever the chunks
      *tb.tag = 1;
      pxl = tb.data;
    }
    // Item i's image, set of output blocks, first row and segment (items in pixel-major or block-major order).
    struct item_at {
      std::int64_t n, grp, oh0, s;
    };
    const auto decode = [&](std::size_t i) {
      auto r = static_cast<std::int64_t>(i);
      item_at it{};
      if (pixel_major) {
        it.grp = r % groups;
        r /= groups;
        it.s = r % seg;
        r /= seg;
        it.oh0 = r % row_sets * rows;
        it.n = r / row_sets;
      } else {
        it.s = r % seg;
        r /= seg;
        it.oh0 = r % row_sets * rows;
        r /= row_sets;
        it.grp = r % groups;
        it.n = r / groups;
      }
      return it;
    };
    const auto first_block = [&](std::int64_t grp) { return grp * per_group + std::min(grp, wider); };
    const auto blocks_of = [&](std::int64_t grp) { return static_cast<int>(per_group + (grp < wider ? 1 : 0)); };
    // The filters this thread reads after item i's chunk [c0, c1) of input channels (set grp of nb output blocks, over
    // `row_count` rows of `row_pixels` output pixels): the item's next chunk, else the next item's first, unless they are the ones just read
    // (the same output blocks in one pass). Set up in `pf`, spread over three quarters of the chunk's steps (one per
    // input block of a tap of each tile); null when there are none.
    const auto next_filters = [&](filter_prefetch& pf, std::size_t i, std::size_t i1, std::int64_t grp, int nb, std::int64_t c0,
                                  std::int64_t c1, std::int64_t row_count, std::int64_t row_pixels) -> filter_prefetch* {
      std::int64_t ngrp = grp, nc0 = c1;
      if (c1 == channels) {
        // The item this thread most likely takes next: the pool hands each thread a contiguous share of the items
        // in chunks (i1 ends the chunk, often one item long, not the share).
        ngrp = i + 1 < i1 || i + 1 < items_share_end(ctx, items, cost, i) ? decode(i + 1).grp : -1;
        nc0 = 0;
      }
      if (ngrp < 0 || (ngrp == grp && nc0 == c0)) return nullptr;
      const std::int64_t nc1 = std::min(channels, nc0 + chunk), per_c = g.h.k * g.w.k * blk * blk;
      const std::int64_t nob0 = first_block(ngrp), nnb = blocks_of(ngrp);
      pf = filter_prefetch{};
      if (nc0 == 0 && nc1 == channels) {  // whole blocks: one run
        pf.add(c.w + nob0 * channels * per_c, nnb * channels * per_c);
      } else {
        for (std::int64_t b = 0; b < nnb; ++b) pf.add(c.w + ((nob0 + b) * channels + nc0) * per_c, (nc1 - nc0) * per_c);
      }
      const std::int64_t full = nb == 1 ? 16 : 24 / nb;
      const std::int64_t steps = row_count * ((row_pixels + full - 1) / full) * g.h.k * g.w.k * (c1 - c0);
      const std::int64_t lines = nnb * (nc1 - nc0) * per_c * 4 / 64;
      pf.lines = static_cast<int>(std::clamp<std::int64_t>((4 * lines + 3 * steps - 1) / std::max<std::int64_t>(1, 3 * steps), 1, 32));
      return &pf;
    };
    filter_prefetch pf;
    for (std::size_t i = i0; i < i1; ++i) {
      const item_at it = decode(i);
      const std::int64_t oh0 = it.oh0, n = it.n, grp = it.grp;
      const std::int64_t oh1 = std::min(OH, oh0 + rows);
      const std::int64_t ob0 = first_block(grp);
      const int nb = blocks_of(grp);
      const std::int64_t s0 = it.s * seg_len, s1 = std::min(OW, s0 + seg_len);
      if (s0 >= s1) continue;
      conv_view v{&flat, pxl + n * x_image, c.w, py + n * out_image, ep.sum && !sum_first ? ep.sum + n * out_image : nullptr, 0, blk, p.y_half};
      for (std::int64_t c0 = 0; c0 < channels; c0 += chunk) {
        const std::int64_t c1 = std::min(channels, c0 + chunk);
        const bool from_zero = c0 == 0 && !sum_first;
        v.pf = first_layer ? nullptr : next_filters(pf, i, i1, grp, nb, c0, c1, oh1 - oh0, s1 - s0);
        for (std::int64_t oh = oh0; oh < oh1; ++oh) {
          if (first_layer) dense_segment<true>(nb, v, ep, ob0, oh, s0, s1, c0, c1, from_zero, c1 == channels);
          else dense_segment<false>(nb, v, ep, ob0, oh, s0, s1, c0, c1, from_zero, c1 == channels);
        }
      }
      if (!in_register(ep.act))
        for (std::int64_t b = ob0; b < ob0 + nb; ++b)
          for (std::int64_t oh = oh0; oh < oh1; ++oh)
            ep.act.apply(v.y + ((b * OH + oh) * OW + s0) * blk, static_cast<std::size_t>((s1 - s0) * blk));
    }
  });
  if (no_memory)
    return Status(errc::fail, cat("Conv (NCHWc): no memory for a padded copy of X, ",
                                  std::to_string(copy.rows * copy.IWp * blk * 4), " bytes"));
  return {};
}
}  // namespace
}  // namespace impl

namespace ops {
using namespace impl;
using namespace impl::nchwc;

namespace {
bool conv_ok(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  return float_input(g, n) && in_type(g, n, 1) == element_type::float32 && parse_activation(nd).has_value() &&
         check_window_attrs(read_window_attrs(nd, false), "Conv").is_ok();
}
Result<nchwc_conv_plan> conv_plan(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  nchwc_conv_plan p;
  p.attrs = read_window_attrs(nd, false);
  EPSTACK_RETURN_IF_ERROR(check_window_attrs(p.attrs, "Conv (NCHWc)"));
  p.group = attr_i(nd, "group", 1);
  p.fused = true;
  const std::int64_t wino = attr_i(nd, "winograd", 0);
  if (wino != 0 && wino != 2 && wino != 4)
    return Status(errc::invalid_argument, cat("node ", g.describe(n), ": Conv (NCHWc) attribute winograd is ", std::to_string(wino),
                                              "; it takes 2 or 4 (the output tile of F(2x2, 3x3) or F(4x4, 3x3)) or 0"));
  p.winograd = static_cast<int>(wino);
  EPSTACK_ASSIGN_OR_RETURN(p.act, parse_activation(nd));
  // A blocked 1x1 convolution's filters [Op/16][Ip/16][1][1][16 in][16 out] whose last output block is padding in
  // lanes 8-15, with zero filters and bias there: conv_view::y_half.
  const tensor* w = constant_input(g, n, 1);
  const tensor* b = nd.inputs.size() > 2 && nd.inputs[2] != no_id ? constant_input(g, n, 2) : nullptr;
  const bool b_ok = nd.inputs.size() <= 2 || nd.inputs[2] == no_id || (b != nullptr && b->type() == element_type::float32);
  if (wino == 0 && p.group == 1 && b_ok) p.y_half = half_last_block(w, b, attr_i(nd, "output_channels", -1));
  return p;
}
}  // namespace

bool nchwc_winograd_conv::supports(const graph& g, node_id n) { return attr_i(g.node(n), "winograd", 0) != 0 && conv_ok(g, n); }
Result<compute_function> nchwc_winograd_conv::compile(const graph& g, node_id n) {
  EPSTACK_ASSIGN_OR_RETURN(const nchwc_conv_plan p, conv_plan(g, n));
  if (p.winograd == 0) return Status(errc::invalid_argument, cat("node ", g.describe(n), ": not a Winograd convolution"));
  return make_fn("Conv (NCHWc, Winograd)", [p](compute_context& ctx) { return nchwc_winograd_compute(p, ctx); });
}

bool nchwc_conv::supports(const graph& g, node_id n) { return attr_i(g.node(n), "winograd", 0) == 0 && conv_ok(g, n); }
Result<compute_function> nchwc_conv::compile(const graph& g, node_id n) {
  EPSTACK_ASSIGN_OR_RETURN(const nchwc_conv_plan p, conv_plan(g, n));
  if (p.winograd != 0) return Status(errc::invalid_argument, cat("node ", g.describe(n), ": a Winograd convolution (nchwc_winograd_conv)"));
  return make_fn("Conv (NCHWc)", [p](compute_context& ctx) { return nchwc_conv_compute(p, ctx); });
}
}  // namespace ops
}  // namespace epstack::cpu
