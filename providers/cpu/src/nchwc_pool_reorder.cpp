// Blocked-channel layout (NCHWc, c = 16): the pools of domain com.epstack.nchwc16 and the reorders between NCHW and
// the blocked layout (ReorderInput, ReorderOutput), which the optimiser's layout pass (src/runtime/nchwc_layout.cpp)
// writes around the chains of convolutions and pools the CPU provider runs. The convolutions are in nchwc.cpp and
// nchwc_winograd.cpp; the blocked tensor's layout is described at the top of nchwc.cpp.
#include "nchwc_common.hpp"

#include <array>
#include <utility>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace epstack::cpu {
namespace impl {
namespace {
using namespace nchwc;


// ---- pooling ----
enum class pool_kind : std::uint8_t { max, average, global_max, global_average };

struct nchwc_pool_plan {
  pool_kind kind = pool_kind::max;
  window_attrs attrs;
  bool count_include_pad = false;
};

Status nchwc_pool_compute(const nchwc_pool_plan& p, compute_context& ctx) {
  const std::string_view op = p.kind == pool_kind::max              ? "MaxPool (NCHWc)"
                              : p.kind == pool_kind::average        ? "AveragePool (NCHWc)"
                              : p.kind == pool_kind::global_max     ? "GlobalMaxPool (NCHWc)"
                                                                    : "GlobalAveragePool (NCHWc)";
  const tensor& x = ctx.input(0);
  if (x.type() != element_type::float32 || x.rank() != 4 || x.sizes()[1] % blk != 0)
    return op_error(op, cat("X must be a 4-D float tensor with a multiple of 16 channels, got ", dims_string(x.sizes())));
  const std::int64_t N = x.sizes()[0], CB = x.sizes()[1] / blk, IH = x.sizes()[2], IW = x.sizes()[3];
  const bool global = p.kind == pool_kind::global_max || p.kind == pool_kind::global_average;
  window h, w;
  if (global) {
    h = {IH, IH, 1, 1, 0, 1};
    w = {IW, IW, 1, 1, 0, 1};
  } else {
    if (p.attrs.kernel.size() != 2) return op_error(op, "kernel_shape must have 2 values");
    EPSTACK_ASSIGN_OR_RETURN(h, make_window(p.attrs, 0, IH, p.attrs.kernel[0], op));
    EPSTACK_ASSIGN_OR_RETURN(w, make_window(p.attrs, 1, IW, p.attrs.kernel[1], op));
  }
  const std::array<std::int64_t, 4> out_sizes{N, x.sizes()[1], h.out, w.out};
  tensor& y = ctx.allocate_output(0, element_type::float32, out_sizes);
  if (y.element_count() == 0) return {};
  if (global && IH * IW == 0) return op_error(op, "X has no pixels");
  const float* px = x.typed<float>();
  float* py = y.typed<float>();
  const bool is_max = p.kind == pool_kind::max || p.kind == pool_kind::global_max;
  const auto rows = static_cast<std::size_t>(N * CB * h.out);
  parallel_items(ctx, rows, static_cast<std::size_t>(w.out * h.k * w.k * blk), [&](std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {
      const auto ri = static_cast<std::int64_t>(r);
      // Rows in image order, all blocks of a row together (as the depthwise convolution: a thread's share is a band).
      const std::int64_t oh = ri / CB % h.out, plane = ri / (CB * h.out) * CB + ri % CB;
      const float* xp = px + plane * IH * IW * blk;
      float* yp = py + (plane * h.out + oh) * w.out * blk;
      const std::int64_t ih0 = oh * h.s - h.pb;
      // Output columns whose windows lie inside the input's columns: no bounds checks on them.
      std::int64_t in_lo = w.out, in_hi = w.out;
      if (!global) {
        in_lo = std::min<std::int64_t>(w.out, w.pb > 0 ? (w.pb + w.s - 1) / w.s : 0);
        const std::int64_t reach = (w.k - 1) * w.d - w.pb;  // iw0 + reach < IW
        in_hi = IW - 1 - reach < 0 ? 0 : std::min<std::int64_t>(w.out, (IW - 1 - reach) / w.s + 1);
        if (in_hi < in_lo) in_hi = in_lo;
      }
#if defined(__AVX512F__)
      if (in_hi > in_lo) {
        std::int64_t kh0 = 0, kh1 = 0;  // the rows of the window inside the input
        for (std::int64_t kh = 0; kh < h.k; ++kh) {
          const std::int64_t ih = ih0 + kh * h.d;
          if (ih < 0 || ih >= IH) continue;
          if (kh1 == 0) kh0 = kh;
          kh1 = kh + 1;
        }
        const __m512 qnan = _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN());
        const std::int64_t taps = (kh1 - kh0) * w.k;
        const std::int64_t div = p.count_include_pad ? h.k * w.k : taps;
        // NP output pixels at a time, each its own chain of max (or add) over the taps in the same order: one
        // chain's latency (4 cycles a tap) bound a 3x3 window, ResNet-50's MaxPool ran at a third of its loads' rate.
        const auto pixels = [&]<int NP>(std::int64_t ow) {
          const float* base = xp + (ih0 * IW + ow * w.s - w.pb) * blk;
          __m512 acc[NP];
          for (int o = 0; o < NP; ++o) acc[o] = is_max ? _mm512_set1_ps(std::numeric_limits<float>::lowest()) : _mm512_setzero_ps();
          for (std::int64_t kh = kh0; kh < kh1; ++kh) {
            const float* row = base + kh * h.d * IW * blk;
            for (std::int64_t kw = 0; kw < w.k; ++kw)
              for (int o = 0; o < NP; ++o) {
                const __m512 v = _mm512_loadu_ps(row + (kw * w.d + o * w.s) * blk);
                acc[o] = is_max ? _mm512_max_ps(v, acc[o]) : _mm512_add_ps(acc[o], v);  // max: a NaN tap is skipped
              }
          }
          for (int o = 0; o < NP; ++o) {
            if (!is_max) acc[o] = div > 0 ? _mm512_div_ps(acc[o], _mm512_set1_ps(static_cast<float>(div))) : qnan;
            _mm512_storeu_ps(yp + (ow + o) * blk, acc[o]);
          }
        };
        std::int64_t ow = in_lo;
        for (; ow + 4 <= in_hi; ow += 4) pixels.template operator()<4>(ow);
        for (; ow < in_hi; ++ow) pixels.template operator()<1>(ow);
      }
#else
      in_lo = in_hi = w.out;
#endif
      for (std::int64_t ow = 0; ow < w.out; ++ow) {
        if (ow == in_lo) ow = in_hi;
        if (ow >= w.out) break;
        const std::int64_t iw0 = ow * w.s - w.pb;
        v16 acc = is_max ? splat(std::numeric_limits<float>::lowest()) : v16{};
        std::int64_t count = 0;
        for (std::int64_t kh = 0; kh < h.k; ++kh) {
          const std::int64_t ih = ih0 + kh * h.d;
          if (ih < 0 || ih >= IH) continue;
          for (std::int64_t kw = 0; kw < w.k; ++kw) {
            const std::int64_t iw = iw0 + kw * w.d;
            if (iw < 0 || iw >= IW) continue;
            const v16 xv = load(xp + (ih * IW + iw) * blk);
            if (is_max) acc = vmax(xv, acc);  // a NaN tap is skipped, as in the NCHW kernel
            else acc += xv;
            ++count;
          }
        }
        if (!is_max) {
          const std::int64_t div = global ? IH * IW : p.count_include_pad ? h.k * w.k : count;
          acc = div > 0 ? acc / splat(static_cast<float>(div)) : splat(std::numeric_limits<float>::quiet_NaN());
        }
        store(yp + ow * blk, acc);
      }
    }
  });
  return {};
}

// ---- reorders ----
// A 16x16 transpose in registers: four stages, each swapping the off-diagonal sub-blocks of one size (8, 4, 2, 1)
// with two-source shuffles.
template <int B>
constexpr int swap_lo(int j) { return (j & B) ? 16 + (j - B) : j; }
template <int B>
constexpr int swap_hi(int j) { return (j & B) ? 16 + j : j + B; }
template <int B, std::size_t... J>
inline void transpose_stage(v16* r, std::index_sequence<J...>) {
  for (int i = 0; i < 16; ++i) {
    if (i & B) continue;
    const v16 x = r[i], y = r[i + B];
    r[i] = __builtin_shufflevector(x, y, swap_lo<B>(static_cast<int>(J))...);
    r[i + B] = __builtin_shufflevector(x, y, swap_hi<B>(static_cast<int>(J))...);
  }
}
inline void transpose16(v16* r) {
  constexpr auto js = std::make_index_sequence<16>{};
  transpose_stage<8>(r, js);
  transpose_stage<4>(r, js);
  transpose_stage<2>(r, js);
  transpose_stage<1>(r, js);
}

// Reorders split each image's channel blocks into runs of this many pixels, so that one block (16 channels) still
// has work for every thread.
constexpr std::int64_t reorder_run = 512;

Status reorder_input_compute(compute_context& ctx) {
  constexpr std::string_view op = "ReorderInput";
  const tensor& x = ctx.input(0);
  if (x.type() != element_type::float32 || x.rank() != 4) return op_error(op, cat("X must be a 4-D float tensor, got ", dims_string(x.sizes())));
  const std::int64_t N = x.sizes()[0], C = x.sizes()[1], HW = x.sizes()[2] * x.sizes()[3];
  const std::int64_t CB = (C + blk - 1) / blk;
  const std::array<std::int64_t, 4> out_sizes{N, CB * blk, x.sizes()[2], x.sizes()[3]};
  tensor& y = ctx.allocate_output(0, element_type::float32, out_sizes);
  if (y.element_count() == 0) return {};
  const float* px = x.typed<float>();
  float* py = y.typed<float>();
  const std::int64_t runs = (HW + reorder_run - 1) / reorder_run;
  parallel_items(ctx, static_cast<std::size_t>(N * CB * runs), static_cast<std::size_t>(reorder_run * blk), [&](std::size_t b0, std::size_t b1) {
    for (std::size_t b = b0; b < b1; ++b) {
      const auto item = static_cast<std::int64_t>(b);
      const std::int64_t bi = item / runs, run = item % runs;
      const std::int64_t n = bi / CB, cb = bi % CB, lanes = std::min(blk, C - cb * blk);
      const float* src = px + (n * C + cb * blk) * HW;
      float* dst = py + bi * HW * blk;
      const std::int64_t end = std::min(HW, (run + 1) * reorder_run);
      for (std::int64_t p0 = run * reorder_run; p0 < end; p0 += 16) {
        const std::int64_t np = std::min<std::int64_t>(16, end - p0);
        if (np == 16 && lanes == 16) {
          // 16 channels' runs of 16 pixels, transposed into the 16 pixels' vectors.
          v16 r[16];
          for (int l = 0; l < 16; ++l) r[l] = load(src + l * HW + p0);
          transpose16(r);
          for (int q = 0; q < 16; ++q) store(dst + (p0 + q) * blk, r[q]);
          continue;
        }
        float tile[16][16] = {};
        for (std::int64_t l = 0; l < lanes; ++l)
          for (std::int64_t q = 0; q < np; ++q) tile[q][l] = src[l * HW + p0 + q];
        std::memcpy(dst + p0 * blk, tile, static_cast<std::size_t>(np * blk) * sizeof(float));
      }
    }
  });
  return {};
}

Status reorder_output_compute(compute_context& ctx, std::int64_t channels) {
  constexpr std::string_view op = "ReorderOutput";
  const tensor& x = ctx.input(0);
  if (x.type() != element_type::float32 || x.rank() != 4 || x.sizes()[1] % blk != 0 || channels > x.sizes()[1] || channels <= 0)
    return op_error(op, cat("X must be a 4-D blocked float tensor of at least ", std::to_string(channels), " channels, got ",
                            dims_string(x.sizes())));
  const std::int64_t N = x.sizes()[0], CB = x.sizes()[1] / blk, HW = x.sizes()[2] * x.sizes()[3];
  const std::array<std::int64_t, 4> out_sizes{N, channels, x.sizes()[2], x.sizes()[3]};
  tensor& y = ctx.allocate_output(0, element_type::float32, out_sizes);
  if (y.element_count() == 0) return {};
  const float* px = x.typed<float>();
  float* py = y.typed<float>();
  const std::int64_t UB = (channels + blk - 1) / blk;
  const std::int64_t runs = (HW + reorder_run - 1) / reorder_run;
  parallel_items(ctx, static_cast<std::size_t>(N * UB * runs), static_cast<std::size_t>(reorder_run * blk), [&](std::size_t b0, std::size_t b1) {
    for (std::size_t b = b0; b < b1; ++b) {
      const auto item = static_cast<std::int64_t>(b);
      const std::int64_t bi = item / runs, run = item % runs;
      const std::int64_t n = bi / UB, cb = bi % UB, lanes = std::min(blk, channels - cb * blk);
      const float* src = px + (n * CB + cb) * HW * blk;
      float* dst = py + (n * channels + cb * blk) * HW;
      const std::int64_t end = std::min(HW, (run + 1) * reorder_run);
      for (std::int64_t p0 = run * reorder_run; p0 < end; p0 += 16) {
        const std::int64_t np = std::min<std::int64_t>(16, end - p0);
        if (np == 16) {
          v16 r[16];
          for (int q = 0; q < 16; ++q) r[q] = load(src + (p0 + q) * blk);
          transpose16(r);
          for (std::int64_t l = 0; l < lanes; ++l) store(dst + l * HW + p0, r[l]);
          continue;
        }
        float tile[16][16];
        std::memcpy(tile, src + p0 * blk, static_cast<std::size_t>(np * blk) * sizeof(float));
        for (std::int64_t l = 0; l < lanes; ++l)
          for (std::int64_t q = 0; q < np; ++q) dst[l * HW + p0 + q] = tile[q][l];
      }
    }
  });
  return {};
}

}  // namespace
}  // namespace impl

namespace ops {
using namespace impl;
using namespace impl::nchwc;

bool nchwc_reorder_input::supports(const graph& g, node_id n) { return float_input(g, n) && attr_i(g.node(n), "channels_last", 0) == 0; }
Result<compute_function> nchwc_reorder_input::compile(const graph&, node_id) {
  return make_fn("ReorderInput", [](compute_context& ctx) { return reorder_input_compute(ctx); });
}

bool nchwc_reorder_output::supports(const graph& g, node_id n) {
  return float_input(g, n) && attr_i(g.node(n), "channels_last", 0) == 0 && attr_i(g.node(n), "channels", 0) > 0;
}
Result<compute_function> nchwc_reorder_output::compile(const graph& g, node_id n) {
  const std::int64_t channels = attr_i(g.node(n), "channels", 0);
  return make_fn("ReorderOutput", [channels](compute_context& ctx) { return reorder_output_compute(ctx, channels); });
}

namespace {
Result<compute_function> pool_fn(const graph& g, node_id n, pool_kind kind) {
  nchwc_pool_plan p;
  p.kind = kind;
  p.attrs = read_window_attrs(g.node(n), true);
  p.count_include_pad = attr_i(g.node(n), "count_include_pad", 0) != 0;
  EPSTACK_RETURN_IF_ERROR(check_window_attrs(p.attrs, g.node(n).op_type));
  return make_fn(g.node(n).op_type + " (NCHWc)", [p](compute_context& ctx) { return nchwc_pool_compute(p, ctx); });
}
bool pool_ok(const graph& g, node_id n) {
  return float_input(g, n) && g.node(n).outputs.size() == 1 && check_window_attrs(read_window_attrs(g.node(n), true), "").is_ok();
}
}  // namespace

bool nchwc_max_pool::supports(const graph& g, node_id n) { return pool_ok(g, n); }
Result<compute_function> nchwc_max_pool::compile(const graph& g, node_id n) { return pool_fn(g, n, pool_kind::max); }
bool nchwc_average_pool::supports(const graph& g, node_id n) { return pool_ok(g, n); }
Result<compute_function> nchwc_average_pool::compile(const graph& g, node_id n) { return pool_fn(g, n, pool_kind::average); }
bool nchwc_global_max_pool::supports(const graph& g, node_id n) { return pool_ok(g, n); }
Result<compute_function> nchwc_global_max_pool::compile(const graph& g, node_id n) { return pool_fn(g, n, pool_kind::global_max); }
bool nchwc_global_average_pool::supports(const graph& g, node_id n) { return pool_ok(g, n); }
Result<compute_function> nchwc_global_average_pool::compile(const graph& g, node_id n) {
  return pool_fn(g, n, pool_kind::global_average);
}


}  // namespace ops
}  // namespace epstack::cpu
