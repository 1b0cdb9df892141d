// The blocked-layout (NCHWc) kernels' shared parts: 16-float vectors and the in-register activations, window geometry,
// and one convolution call's checked operands. Private to the CPU provider: nchwc.cpp (direct convolutions),
// nchwc_pool_reorder.cpp (pools, reorders), nchwc_winograd.cpp (Winograd convolutions) and
// nchwc_pointwise_depthwise.cpp (the fused 1x1 and depthwise convolution), the last two in files of their own so that a
// deployable whose convolutions are all direct, unfused, links none of them.
#pragma once

#include "call_token.hpp"
#include "conv_activation.hpp"

#include <epstack/ir/node_facts.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace epstack::cpu::impl::nchwc {

constexpr std::int64_t blk = 16;
typedef float v16 __attribute__((vector_size(64)));
typedef std::int32_t mask16 __attribute__((vector_size(64)));
typedef float v8 __attribute__((vector_size(32)));

inline v16 load(const float* p) {
  v16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, v16 v) { std::memcpy(p, &v, sizeof v); }
inline v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
// The low 8 lanes of a vector (a register's lower half: no instruction), and 8 lanes widened with zeros.
inline v8 low8(v16 v) { return __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7); }
inline v16 widen(v8 v) { return __builtin_shufflevector(v, v8{}, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }
// Keeps `v` in a register: the compiler may not fold its load into the instructions that use it. GCC folded each
// input pixel of a depthwise tile into the memory operand of the three FMAs that read it, three 512-bit loads where
// one does, and on a core that loads one 512-bit vector a cycle (AMD Zen 4) the loads, not the FMAs, set the pace.
[[gnu::always_inline]] inline void keep_in_register(v16& v) {
#if defined(__AVX512F__)
  asm("" : "+v"(v));
#else
  (void)v;
#endif
}
inline v16 splat(float x) { return v16{x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }
// max(0, v) and min(hi, v) keeping NaN (the operand order of the AVX-512 instructions matters).
inline v16 vmax(v16 lo, v16 v) {
#if defined(__AVX512F__)
  return reinterpret_cast<v16>(_mm512_max_ps(reinterpret_cast<__m512>(lo), reinterpret_cast<__m512>(v)));
#else
  for (int i = 0; i < 16; ++i) v[i] = v[i] < lo[i] ? lo[i] : v[i];
  return v;
#endif
}
inline v16 vmin(v16 hi, v16 v) {
#if defined(__AVX512F__)
  return reinterpret_cast<v16>(_mm512_min_ps(reinterpret_cast<__m512>(hi), reinterpret_cast<__m512>(v)));
#else
  for (int i = 0; i < 16; ++i) v[i] = v[i] > hi[i] ? hi[i] : v[i];
  return v;
#endif
}

// The activations applied in registers; the others run over the stored row (activation::apply).
inline bool in_register(const activation& a) {
  return a.kind == act_kind::none || a.kind == act_kind::relu || a.kind == act_kind::clip || a.kind == act_kind::leaky_relu;
}

// The end of a tile: NB output blocks x NO pixels, each block's pixels side by side in Y (and in Sum) from
// y + b * bstride. Adds the block's bias (when `bias` is set: 16 floats a block), Sum (when set) and the activation
// when it is in_register (the others are applied to the stored rows). The activation and Sum are chosen once per
// tile, not per pixel: a switch per pixel kept the accumulators in memory and cost as many instructions as the taps
// of a 3x3 depthwise tile (MobileNetV2's depthwise layers ran 15% slower than ONNX Runtime's on one thread). None,
// Relu and Clip are one clamp (to [-inf, inf], [0, inf] or [a, b]; NaN stays NaN), so that each tile has two
// epilogues (with and without Sum) and a deployable stays small; LeakyRelu takes an outlined one.
template <bool SUM, int NB, int NO>
[[gnu::always_inline]] inline void finish_tile_clamp(v16 lo, v16 hi, v16 (&acc)[NB][NO], const float* bias, float* y,
                                                     std::int64_t bstride, const float* sum) {
  for (int b = 0; b < NB; ++b) {
    const v16 bv = bias != nullptr ? load(bias + b * blk) : v16{};
    for (int o = 0; o < NO; ++o) {
      v16 r = acc[b][o];
      if (bias != nullptr) r += bv;
      if constexpr (SUM) r += load(sum + b * bstride + o * blk);
      store(y + b * bstride + o * blk, vmin(hi, vmax(lo, r)));
    }
  }
}
[[gnu::noinline]] inline void finish_tile_leaky(float slope, const v16* acc, int nb, int no, const float* bias, float* y,
                                                std::int64_t bstride, const float* sum) {
  for (int b = 0; b < nb; ++b)
    for (int o = 0; o < no; ++o) {
      v16 r = acc[b * no + o];
      if (bias != nullptr) r += load(bias + b * blk);
      if (sum != nullptr) r += load(sum + b * bstride + o * blk);
      store(y + b * bstride + o * blk, r >= v16{} ? r : splat(slope) * r);
    }
}
// An in-register activation as a clamp (None, Relu, Clip) or LeakyRelu, read once for a loop of outputs (the
// Winograd output transform's; it switched on the kind for every vector). Other kinds are left to the stored rows.
struct register_activation {
  v16 lo, hi, slope;
  bool leaky;
  explicit register_activation(const activation& a)
      : lo(splat(a.kind == act_kind::relu ? 0.0f : a.kind == act_kind::clip ? a.a : -std::numeric_limits<float>::infinity())),
        hi(splat(a.kind == act_kind::clip ? a.b : std::numeric_limits<float>::infinity())),
        slope(splat(a.a)),
        leaky(a.kind == act_kind::leaky_relu) {}
  [[nodiscard]] v16 operator()(v16 r) const { return leaky ? (r >= v16{} ? r : slope * r) : vmin(hi, vmax(lo, r)); }
};

template <int NB, int NO>
[[gnu::always_inline]] inline void finish_tile(const activation& a, v16 (&acc)[NB][NO], const float* bias, float* y, std::int64_t bstride,
                                               const float* sum) {
  if (a.kind == act_kind::leaky_relu) {
    // A copy, so that the accumulators' address is not taken (they would be kept in memory on every path).
    v16 copy[NB * NO];
    for (int b = 0; b < NB; ++b)
      for (int o = 0; o < NO; ++o) copy[b * NO + o] = acc[b][o];
    return finish_tile_leaky(a.a, copy, NB, NO, bias, y, bstride, sum);
  }
  const register_activation ra(a);
  if (sum != nullptr) finish_tile_clamp<true>(ra.lo, ra.hi, acc, bias, y, bstride, sum);
  else finish_tile_clamp<false>(ra.lo, ra.hi, acc, bias, y, bstride, sum);
}

// ---- geometry (2-D; pads resolved from auto_pad) ----
struct window_attrs {
  std::string auto_pad = "NOTSET";
  std::vector<std::int64_t> kernel, strides, dilations, pads;
  bool ceil_mode = false;
};
struct window {
  std::int64_t in = 0, k = 1, s = 1, d = 1, pb = 0, out = 0;
};
inline Result<window> make_window(const window_attrs& a, std::size_t i, std::int64_t in, std::int64_t k, std::string_view what) {
  window w;
  w.in = in;
  w.k = k;
  w.s = a.strides.empty() ? 1 : a.strides[i];
  w.d = a.dilations.empty() ? 1 : a.dilations[i];
  if (w.s <= 0 || w.d <= 0 || k <= 0) return invalid(cat(what, ": strides, dilations and the kernel must be positive"));
  const std::int64_t ek = (k - 1) * w.d + 1;
  if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
    w.out = (in + w.s - 1) / w.s;
    const std::int64_t total = std::max<std::int64_t>(0, (w.out - 1) * w.s + ek - in);
    w.pb = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    return w;
  }
  std::int64_t pe = 0;
  if (a.auto_pad != "VALID" && !a.pads.empty()) {
    w.pb = a.pads[i];
    pe = a.pads[i + 2];
  }
  if (w.pb < 0 || pe < 0) return invalid(cat(what, ": pads must not be negative"));
  const std::int64_t span = in + w.pb + pe - ek;
  if (span < 0) return w;
  w.out = (a.ceil_mode ? (span + w.s - 1) / w.s : span / w.s) + 1;
  if (a.ceil_mode && (w.out - 1) * w.s >= in + w.pb) --w.out;  // the last window must start inside the input or left pad
  return w;
}
// The input rows that output row `oh + 2` reads and row `oh + 1` does not (undilated windows; empty otherwise or near
// the last row): what to prefetch while row `oh` is computed, two rows ahead (one row's time is too short a lead for
// a depthwise layer). Reading rows of a large activation from L3 one miss at a time, the kernels waited on memory:
// MobileNetV2's stride-2 depthwise layer at 112x112 took 154 us, 77 us with these prefetches, its first layer 222 us,
// 133 us (whole model 2.44 -> 2.35 ms, 2 threads, `epstack perf`; ResNet-50 and mixed_ops unchanged).
inline std::pair<std::int64_t, std::int64_t> next_rows(const window& h, std::int64_t oh) {
  ++oh;
  if (h.d != 1 || oh + 1 >= h.out) return {1, 0};
  const std::int64_t lo = std::max({(oh + 1) * h.s - h.pb, oh * h.s - h.pb + h.k, std::int64_t{0}});
  const std::int64_t hi = std::min((oh + 1) * h.s - h.pb + h.k - 1, h.in - 1);
  return {lo, hi};
}
// Prefetches pixels [iw0, iw1) (clipped to the row) of rows [r0, r1] of a plane: `px` floats a pixel, a cache line
// per 64 bytes.
inline void prefetch_rows(const float* plane, std::int64_t IW, std::int64_t px, std::int64_t r0, std::int64_t r1,
                          std::int64_t iw0, std::int64_t iw1) {
  iw0 = std::max<std::int64_t>(iw0, 0);
  iw1 = std::min(iw1, IW);
  for (std::int64_t r = r0; r <= r1; ++r)
    for (std::int64_t f = iw0 * px; f < iw1 * px; f += 16) __builtin_prefetch(plane + (r * IW) * px + f);
}

// Output positions [lo, hi) whose taps all fall inside the input.
inline std::pair<std::int64_t, std::int64_t> interior(const window& w) {
  const std::int64_t lo = std::min(w.out, (w.pb + w.s - 1) / w.s);
  const std::int64_t last = w.in - 1 + w.pb - (w.k - 1) * w.d;  // ow * s <= last
  const std::int64_t hi = last < 0 ? 0 : std::min(w.out, last / w.s + 1);
  return {lo, std::max(lo, hi)};
}
// A stride-2 row whose first pixel alone has taps left of the input (one or two columns of padding on the left):
// the dense kernels' LEFT tile reads zeros for them, so no padded copy of X is needed on that side.
inline bool left_pixel_padded_only(const window& w) { return w.s == 2 && w.pb <= 2 && interior(w).first == 1; }
inline window_attrs read_window_attrs(const node& nd, bool pool) {
  window_attrs a;
  a.auto_pad = attr_s(nd, "auto_pad", "NOTSET");
  a.kernel = attr_ints(nd, "kernel_shape");
  a.strides = attr_ints(nd, "strides");
  a.dilations = attr_ints(nd, "dilations");
  a.pads = attr_ints(nd, "pads");
  a.ceil_mode = pool && attr_i(nd, "ceil_mode", 0) != 0;
  return a;
}
inline Status check_window_attrs(const window_attrs& a, std::string_view what) {
  if ((!a.kernel.empty() && a.kernel.size() != 2) || (!a.strides.empty() && a.strides.size() != 2) ||
      (!a.dilations.empty() && a.dilations.size() != 2) || (!a.pads.empty() && a.pads.size() != 4))
    return invalid(cat(what, ": kernel_shape, strides, dilations or pads are not 2-D"));
  if (a.auto_pad != "NOTSET" && a.auto_pad != "VALID" && a.auto_pad != "SAME_UPPER" && a.auto_pad != "SAME_LOWER")
    return invalid(cat(what, ": auto_pad '", a.auto_pad, "' is not supported"));
  return {};
}

// ---- convolution ----
enum class conv_kind : std::uint8_t { dense, first_layer, depthwise };

struct conv_geom {
  conv_kind kind = conv_kind::dense;
  std::int64_t N = 0, C = 0, M = 0;  // input channels (blocked: padded; first layer: plain) and padded output channels
  window h, w;
  std::int64_t CB = 0, MB = 0;  // blocks of C (dense, depthwise) and of M
};

struct conv_epilogue {
  const float* bias = nullptr;  // M values
  const float* sum = nullptr;   // blocked like Y
  activation act;
};

// Filters that the dense kernels fetch into L2 while they compute, a few cache lines per input channel block of a tap
// (`step`): those of the work the thread does next (its item's next chunk of input channels, or its next item's
// output blocks). Up to 4 contiguous runs (one per output block), taken in order; addresses as integers, since the
// last line may start past a run's end. Without, each item's first row read its filters on demand, from memory more
// than from L3 in a model's run, in runs of 1 KiB (one block's, 9 KiB apart for a 3x3 layer) that the hardware
// prefetchers do not follow: ResNet-50's 3x3 512-channel layer at 7x7 as a direct convolution took 5% longer in the
// model (1.16-1.22 against 1.09-1.16 ms, three alternated profiles), the whole network 1.5% (5 alternated pairs).
struct filter_prefetch {
  std::uintptr_t at[4] = {};
  std::uintptr_t end[4] = {};
  int runs = 0, cur = 0;
  int lines = 1;  // per step
  void add(const float* p, std::int64_t floats) noexcept {
    at[runs] = reinterpret_cast<std::uintptr_t>(p);
    end[runs] = at[runs] + static_cast<std::uintptr_t>(floats) * sizeof(float);
    ++runs;
  }
  void step() noexcept {
    for (int l = 0; l < lines && cur < runs; ++l) {
      __builtin_prefetch(reinterpret_cast<const void*>(at[cur]), 0, 2);  // prefetcht1: into L2
      at[cur] += 64;
      if (at[cur] >= end[cur]) ++cur;
    }
  }
};

// Offsets of one convolution's operands for the tile kernels.
struct conv_view {
  const conv_geom* g;
  const float* x;  // image n
  const float* wt;  // filters
  float* y;        // image n
  const float* sum;  // image n, or null
  // Floats between X's blocks, for the depthwise kernels: g->h.in * g->w.in * 16, or more when X is a buffer of
  // rows of which the first g->h.in are valid (the fused 1x1 and depthwise convolution's).
  std::int64_t x_plane;
  // Dense kernels: the input channels of X's last block whose filters are not all zero (fewer than 16 when the real
  // channels do not fill it: MobileNetV2's 24 channels in two blocks compute 24, not 32).
  std::int64_t x_tail = blk;
  // Dense 1x1 kernels: the last output block's upper 8 lanes have zero filters and bias (a channel count of 8 more
  // than a multiple of 16, MobileNetV2's 24): whole tiles holding it compute its lower 8 lanes in 8-float vectors.
  bool y_half = false;
  // Dense kernels: the filters to fetch meanwhile (one step per input channel block of a tap), or null.
  filter_prefetch* pf = nullptr;
};

struct nchwc_conv_plan {
  window_attrs attrs;
  std::int64_t group = 1;
  bool fused = false;
  // Winograd F(TM x TM, 3x3), TM = 2 or 4 (0: none): W holds (TM + 2)^2 transformed filter sets
  // [(TM + 2)^2][Op/16][Cp/16][16][16], declared [Op, Cp, TM + 2, TM + 2].
  int winograd = 0;
  activation act;
  bool y_half = false;  // conv_view::y_half: from the constant filters and bias
};

// One call's operands, checked: geometry, epilogue and data pointers (`empty`: Y has no elements, nothing to do).
struct conv_call {
  conv_geom g;
  conv_epilogue ep;
  const float* x = nullptr;
  const float* w = nullptr;
  float* y = nullptr;
  bool empty = false;
};

// Whether a blocked 1x1 convolution's constant filters `w` [Op/16][Ip/16][1][1][16 in][16 out] (and bias `b`, or
// null) make its last output block padding in lanes 8-15, zero there: conv_view::y_half. Only the padding: `real`,
// the real output channels (attribute output_channels, which the layout pass writes; -1: all), must end in the last
// block's lower 8 lanes.
inline bool half_last_block(const tensor* w, const tensor* b, std::int64_t real) {
  if (w == nullptr || w->type() != element_type::float32 || w->rank() != 4 || w->sizes()[0] % blk != 0 || w->sizes()[0] == 0 ||
      w->sizes()[1] % blk != 0 || w->sizes()[1] == 0 || w->sizes()[2] != 1 || w->sizes()[3] != 1 ||
      (b != nullptr && (b->type() != element_type::float32 || b->element_count() != static_cast<std::size_t>(w->sizes()[0]))))
    return false;
  const std::int64_t OB = w->sizes()[0] / blk, IB = w->sizes()[1] / blk;
  if (real < 0) real = OB * blk;
  const float* d = w->typed<float>() + (OB - 1) * IB * blk * blk;
  const auto upper_zero = [](const float* lanes) { return std::all_of(lanes + 8, lanes + blk, [](float f) { return f == 0.0f; }); };
  bool zero = real > (OB - 1) * blk && real <= (OB - 1) * blk + 8 && OB >= 2;
  zero = zero && (b == nullptr || upper_zero(b->typed<float>() + (OB - 1) * blk));
  for (std::int64_t r = 0; zero && r < IB * blk; ++r) zero = upper_zero(d + r * blk);
  return zero;
}

// Whether node n's first input is float (what every blocked kernel reads).
inline bool float_input(const graph& g, node_id n) { return in_type(g, n, 0) == element_type::float32; }

// Reads and checks one call's operands (X, W, B, Sum) and allocates Y.
Result<conv_call> nchwc_conv_setup(const nchwc_conv_plan& p, compute_context& ctx);
// A Winograd convolution (nchwc_winograd.cpp).
Status nchwc_winograd_compute(const nchwc_conv_plan& p, compute_context& ctx);

// The direct kernels (nchwc.cpp) that the fused 1x1 and depthwise convolution (nchwc_pointwise_depthwise.cpp) also
// runs. dense_segment: output pixels [s0, s1) of row oh (a 1x1 convolution's image as one row: oh 0) for nb (1-4)
// output blocks from ob0, input channels [c0, c1) (blocks; the first layer's: channels); `first`: the sums start at
// zero, else from Y; `last`: bias, Sum and the activation, else the raw sums stored. depthwise_row: output row oh of
// channel block cb, bias, Sum and the in-register activation applied.
template <bool FIRST_LAYER>
void dense_segment(int nb, const conv_view& v, const conv_epilogue& ep, std::int64_t ob0, std::int64_t oh, std::int64_t s0,
                   std::int64_t s1, std::int64_t c0, std::int64_t c1, bool first, bool last);
extern template void dense_segment<false>(int, const conv_view&, const conv_epilogue&, std::int64_t, std::int64_t, std::int64_t,
                                          std::int64_t, std::int64_t, std::int64_t, bool, bool);
extern template void dense_segment<true>(int, const conv_view&, const conv_epilogue&, std::int64_t, std::int64_t, std::int64_t,
                                         std::int64_t, std::int64_t, std::int64_t, bool, bool);
void depthwise_row(const conv_view& v, const conv_epilogue& ep, std::int64_t cb, std::int64_t oh);

// A buffer of this thread's, kept from call to call: what a kernel writes there stays in the core's cache, and no
// other core holds its lines (the rows of a fused expansion, a Winograd run's transformed input, a padded copy of a
// convolution's input). One per thread, for one kernel at a time.
struct thread_buffer {
  float* data = nullptr;  // null when it cannot be had
  // What the kernel call that owns the buffer left in it (see below), -1 when nothing: a loop cut into several chunks
  // on one thread finds there what its earlier chunks made.
  std::int64_t* tag = nullptr;
};
// This thread's buffer of at least `floats` floats for call `token` (new_call_token, call_token.hpp): its tag is -1
// unless the same call had it last, at this size or larger (another kernel, or another call of this one, that used it
// since made it -1).
inline thread_buffer thread_rows_for(std::size_t floats, std::uint64_t token) {
  struct buffer {
    float* p = nullptr;
    std::size_t n = 0;
    std::uint64_t owner = 0;
    std::int64_t tag = -1;
    buffer() = default;
    buffer(const buffer&) = delete;
    buffer& operator=(const buffer&) = delete;
    ~buffer() { std::free(p); }
  };
  thread_local buffer b;
  floats = std::max<std::size_t>(floats, 16);  // never a request for nothing (aligned_alloc may give null for it)
  if (b.n < floats) {
    std::free(b.p);
    b.n = 0;
    b.tag = -1;
    b.p = static_cast<float*>(std::aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64));
    if (b.p == nullptr) return {};
    b.n = floats;
  }
  if (b.owner != token || token == 0) {
    b.owner = token;
    b.tag = -1;
  }
  return {b.p, &b.tag};
}
// The buffer for a kernel that writes what it reads there in the same chunk.
inline float* thread_rows(std::size_t floats) { return thread_rows_for(floats, 0).data; }

}  // namespace epstack::cpu::impl::nchwc
