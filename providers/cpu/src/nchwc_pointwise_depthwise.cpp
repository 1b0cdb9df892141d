// A 1x1 convolution fused with the depthwise convolution that reads it, in the blocked-channel layout (NCHWc, c = 16):
// operator PointwiseDepthwiseConv of domain com.epstack.nchwc16, which the layout pass (src/runtime/nchwc_layout.cpp)
// writes for MobileNet's inverted residual blocks, and for its stem (a first layer over the plain input in place of
// the 1x1 convolution: attributes pointwise_kernel_shape, pointwise_strides, pointwise_pads, pointwise_auto_pad). It runs the direct kernels of nchwc.cpp (dense_segment,
// depthwise_row); in a file of its own so that a deployable without such blocks links none of it.
#include "nchwc_common.hpp"

#include <array>
#include <atomic>
#include <limits>

namespace epstack::cpu {
namespace impl {
namespace {
using namespace nchwc;

// MobileNet's inverted residual blocks expand their input with a 1x1 convolution to 6x the channels and filter the
// expansion with a depthwise 3x3 one: the expansion, the largest tensor of the block, was written to memory by one loop
// and read back by the next. Here a work item (a set of up to 4 channel blocks and a band of output rows) computes the
// expansion's rows into a buffer of a few rows, as the depthwise rows need them, and the depthwise rows from it: the
// expansion never leaves the core's cache, and each block is one loop, not two. Both convolutions run the kernels of
// the unfused ones (dense_segment over the buffer's rows as one long row, depthwise_row over the buffer).
struct pointwise_depthwise_plan {
  window_attrs attrs;  // the depthwise convolution's
  window_attrs pw_attrs;  // the first convolution's (pointwise_kernel_shape, _strides, _pads, _auto_pad)
  activation pw_act, dw_act, proj_act;
  std::int64_t tail = blk;  // conv_view::x_tail of the 1x1 convolution: from its filters when they are constant
  std::int64_t proj_tail = blk;  // the same of the projection (inputs 5-7), and its conv_view::y_half
  bool proj_half = false;
};

// Sets of output blocks and bands of output rows: the split whose slowest thread does the least work, by a count of
// the FMAs of its items (a band recomputes the expansion rows its neighbour also reads; sets of fewer than 3 blocks run
// narrower tiles, counted a tenth and a quarter slower), fewer sets and bands on near ties. `row_fmas`: the first
// convolution's FMAs per row of its output, per output channel (its width times its input channels and taps);
// `proj`: the projection's output channels (0: none), which reads every block of a pixel, so one set of all blocks.
struct pointwise_depthwise_split {
  std::int64_t groups = 1, bands = 1;
};
pointwise_depthwise_split split_pointwise_depthwise(std::int64_t N, std::int64_t MB, std::int64_t row_fmas, const window& h,
                                                    std::int64_t OW, std::int64_t KK, std::int64_t proj, std::int64_t threads) {
  const std::int64_t g0 = proj > 0 ? 1 : (MB + 3) / 4, g1 = proj > 0 ? 1 : std::max(g0, MB / 2), ek = (h.k - 1) * h.d + 1;
  pointwise_depthwise_split best{g0, 1};
  double best_cost = std::numeric_limits<double>::infinity();
  for (std::int64_t G = g0; G <= g1; ++G) {
    const std::int64_t nb = (MB + G - 1) / G;
    const double slower = nb >= 3 ? 1.0 : nb == 2 ? 1.1 : 1.25;
    for (std::int64_t B = 1; B <= std::min<std::int64_t>(h.out, 16); ++B) {
      const std::int64_t R = (h.out + B - 1) / B, bands = (h.out + R - 1) / R;
      const std::int64_t rows_in = std::min(h.in, (R - 1) * h.s + ek);
      const double item = static_cast<double>(nb) * (static_cast<double>(rows_in * row_fmas) * slower + static_cast<double>(R * OW * (KK + proj)));
      const double cost = static_cast<double>((N * G * bands + threads - 1) / threads) * item;
      if (cost < best_cost * 0.97) {
        best_cost = cost;
        best = {G, bands};
      }
    }
  }
  return best;
}

// Calls f(first, count) for sets of up to 4 of `nb` blocks, as even as they can be (9: 3 + 3 + 3).
template <class F>
void block_sets(std::int64_t nb, F&& f) {
  const std::int64_t sets = (nb + 3) / 4, per = nb / sets, wider = nb % sets;
  for (std::int64_t k = 0, b = 0; k < sets; ++k) {
    const std::int64_t count = per + (k < wider ? 1 : 0);
    f(b, count);
    b += count;
  }
}

// A blocked 1x1 convolution of C into M channels over an image as one row: input pixel = output pixel - pb, X's
// blocks `in` pixels apart, Y's `out` (the expansion into its buffer, the projection from the depthwise rows).
conv_geom flat_1x1(std::int64_t C, std::int64_t M, std::int64_t in, std::int64_t out) {
  conv_geom g;
  g.kind = conv_kind::dense;
  g.N = 1;
  g.C = C;
  g.M = M;
  g.CB = C / blk;
  g.MB = M / blk;
  g.h = {1, 1, 1, 1, 0, 1};
  g.w = {in, 1, 1, 1, 0, out};
  return g;
}

// The projection of output pixels [s0, s1) (its geometry flat_1x1, Y's blocks v.g->w.out pixels apart): every set of
// output blocks, then an activation that is not applied in registers over the stored pixels.
void project_pixels(const conv_view& v, const conv_epilogue& ep, std::int64_t s0, std::int64_t s1) {
  block_sets(v.g->MB, [&](std::int64_t b0, std::int64_t count) {
    dense_segment<false>(static_cast<int>(count), v, ep, b0, 0, s0, s1, 0, v.g->CB, true, true);
  });
  if (!in_register(ep.act))
    for (std::int64_t b = 0; b < v.g->MB; ++b) ep.act.apply(v.y + (b * v.g->w.out + s0) * blk, static_cast<std::size_t>((s1 - s0) * blk));
}

Status nchwc_pointwise_depthwise_compute(const pointwise_depthwise_plan& p, compute_context& ctx) {
  constexpr std::string_view op = "PointwiseDepthwiseConv (NCHWc)";
  const tensor& x = ctx.input(0);
  const tensor& w1 = ctx.input(1);
  const tensor& w2 = ctx.input(3);
  if (x.type() != element_type::float32 || w1.type() != element_type::float32 || w2.type() != element_type::float32)
    return op_error(op, "X, W and the depthwise W must be float");
  if (x.rank() != 4 || w1.rank() != 4 || w2.rank() != 4)
    return op_error(op, cat("X ", dims_string(x.sizes()), ", W ", dims_string(w1.sizes()), " and the depthwise W ", dims_string(w2.sizes()),
                            " must be 4-D"));
  const std::int64_t N = x.sizes()[0], C = x.sizes()[1], H = x.sizes()[2], W = x.sizes()[3], M = w1.sizes()[0];
  // The first convolution: a blocked 1x1 one, or a first layer (X plain NCHW with fewer than 16 channels, filters
  // [M/16][C][KH][KW][16 out], any window: MobileNet's stem).
  const bool first_layer = C < blk && w1.sizes()[1] == C;
  const bool pointwise = C % blk == 0 && w1.sizes()[1] == C && w1.sizes()[2] == 1 && w1.sizes()[3] == 1;
  if ((!first_layer && !pointwise) || M % blk != 0 || w2.sizes()[0] != M || w2.sizes()[1] != 1)
    return op_error(op, cat("X ", dims_string(x.sizes()), ", W ", dims_string(w1.sizes()), " and the depthwise W ", dims_string(w2.sizes()),
                            " are not a blocked 1x1 convolution (or a first layer) of X followed by a depthwise one"));
  const std::int64_t KH1 = w1.sizes()[2], KW1 = w1.sizes()[3];
  if (!p.pw_attrs.kernel.empty() && (p.pw_attrs.kernel[0] != KH1 || p.pw_attrs.kernel[1] != KW1))
    return op_error(op, "pointwise_kernel_shape does not match W");
  window fh, fw;  // the first convolution's windows
  EPSTACK_ASSIGN_OR_RETURN(fh, make_window(p.pw_attrs, 0, H, KH1, op));
  EPSTACK_ASSIGN_OR_RETURN(fw, make_window(p.pw_attrs, 1, W, KW1, op));
  if (pointwise && (fh.s != 1 || fw.s != 1 || fh.pb != 0 || fw.pb != 0 || fh.out != H || fw.out != W))
    return op_error(op, "a 1x1 first convolution must have unit strides and no padding");
  // The depthwise convolution's input: the first convolution's output, DH x DW.
  const std::int64_t DH = fh.out, DW = fw.out;
  const std::int64_t KH = w2.sizes()[2], KW = w2.sizes()[3];
  if (!p.attrs.kernel.empty() && (p.attrs.kernel[0] != KH || p.attrs.kernel[1] != KW))
    return op_error(op, "kernel_shape does not match the depthwise W");
  // The projection (inputs 5-7: W, B and the residual Sum of a blocked 1x1 convolution of the depthwise output).
  const bool project = ctx.has_input(5);
  const tensor* w3 = project ? &ctx.input(5) : nullptr;
  if (w3 != nullptr && (w3->type() != element_type::float32 || w3->rank() != 4 || w3->sizes()[0] % blk != 0 || w3->sizes()[0] == 0 ||
                        w3->sizes()[1] != M || w3->sizes()[2] != 1 || w3->sizes()[3] != 1))
    return op_error(op, cat("the projection W ", dims_string(w3->sizes()), " is not a blocked 1x1 convolution's float filters of ",
                            std::to_string(M), " input channels"));
  if (!project && (ctx.has_input(6) || ctx.has_input(7))) return op_error(op, "a projection B or Sum without the projection W");
  const std::int64_t M3 = project ? w3->sizes()[0] : 0;
  if (project && M == 0) return op_error(op, "a projection of a depthwise convolution of no channels");
  const float* b1 = nullptr;
  const float* b2 = nullptr;
  const float* b3 = nullptr;
  for (const std::size_t i : {std::size_t{2}, std::size_t{4}, std::size_t{6}}) {
    if (!ctx.has_input(i)) continue;
    const tensor& b = ctx.input(i);
    const std::int64_t want = i == 6 ? M3 : M;
    if (b.type() != element_type::float32 || b.element_count() != static_cast<std::size_t>(want))
      return op_error(op, cat(i == 2 ? "B" : i == 4 ? "the depthwise B" : "the projection B", " must hold ", std::to_string(want), " floats"));
    (i == 2 ? b1 : i == 4 ? b2 : b3) = b.typed<float>();
  }
  conv_geom dg;  // the depthwise convolution
  dg.kind = conv_kind::depthwise;
  dg.N = N;
  dg.C = dg.M = M;
  dg.CB = dg.MB = M / blk;
  EPSTACK_ASSIGN_OR_RETURN(dg.h, make_window(p.attrs, 0, DH, KH, op));
  EPSTACK_ASSIGN_OR_RETURN(dg.w, make_window(p.attrs, 1, DW, KW, op));
  const std::int64_t OH = dg.h.out, OW = dg.w.out, CB = C / blk, MB = M / blk;
  // The first convolution's FMAs per output pixel and channel, and W's floats per output block.
  const std::int64_t pixel_fmas = first_layer ? C * KH1 * KW1 : CB * blk, per_ob1 = pixel_fmas * blk;
  const std::int64_t YM = project ? M3 : M;  // Y's channels
  const std::array<std::int64_t, 4> out_sizes{N, YM, OH, OW};
  const float* sum = nullptr;
  if (ctx.has_input(7)) {
    const tensor& s = ctx.input(7);
    if (s.type() != element_type::float32 || !std::equal(s.sizes().begin(), s.sizes().end(), out_sizes.begin(), out_sizes.end()))
      return op_error(op, cat("the projection Sum ", dims_string(s.sizes()), " must have the output's shape ", dims_string(out_sizes)));
    sum = s.typed<float>();
  }
  // Y over the Sum when nothing else reads it: each projection tile reads its Sum pixels before it writes them.
  tensor& y = sum != nullptr ? ctx.allocate_output_over_input(0, 7, element_type::float32, out_sizes)
                             : ctx.allocate_output(0, element_type::float32, out_sizes);
  if (y.element_count() == 0) return {};
  const float* px = x.typed<float>();
  const float* pw1 = w1.typed<float>();
  const float* pw2 = w2.typed<float>();
  const float* pw3 = project ? w3->typed<float>() : nullptr;
  float* py = y.typed<float>();

  const auto threads = static_cast<std::int64_t>(ctx.thread_count());
  // The projection in the same items when there are rows enough for every thread to take bands of at least 14 (each
  // band recomputes the expansion rows at its edges: 2 of 16 for a 3x3 window); else the depthwise output goes to
  // scratch memory and the projection runs as a loop of its own, as the unfused convolutions do.
  const bool fused_proj = project && N * OH >= 14 * threads;
  tensor dw_scratch;
  if (project && !fused_proj) dw_scratch = ctx.scratch(element_type::float32, static_cast<std::size_t>(N * M * OH * OW));
  float* dw_out = project && !fused_proj ? dw_scratch.typed<float>() : py;  // where the depthwise rows go unless fused
  const std::int64_t dw_image = M * OH * OW;
  const auto [groups, bands] = split_pointwise_depthwise(N, MB, DW * pixel_fmas, dg.h, OW, KH * KW, fused_proj ? M3 : 0, threads);
  const std::int64_t per_group = MB / groups, wider = MB % groups, nb_max = per_group + (wider > 0 ? 1 : 0);
  const std::int64_t band_rows = (OH + bands - 1) / bands;
  // The buffer's rows: about 192 KiB (of a 1 MiB L2), at least one depthwise window's, at most a band's; with a
  // projection, which takes every block, 384 KiB, and the depthwise output rows it reads beside them (at most 128 KiB,
  // one row at least).
  const std::int64_t ek = (KH - 1) * dg.h.d + 1;
  const std::int64_t budget = fused_proj ? 384 << 10 : 192 << 10;
  const std::int64_t cap = std::clamp<std::int64_t>(budget / std::max<std::int64_t>(1, nb_max * DW * blk * 4), ek, std::max(ek, std::min(DH, (band_rows - 1) * dg.h.s + ek)));
  const std::int64_t plane = cap * DW * blk;
  const std::int64_t dw_rows = fused_proj ? std::clamp<std::int64_t>((128 << 10) / (MB * OW * blk * 4), 1, band_rows) : 0;
  const std::int64_t dw_plane = dw_rows * OW * blk;
  const std::int64_t in_image = C * H * W, out_image = YM * OH * OW;
  const auto items = static_cast<std::size_t>(N * groups * bands);
  std::atomic<bool> no_memory{false};
  parallel_items(ctx, items, static_cast<std::size_t>(nb_max * band_rows * DW * (pixel_fmas + KH * KW + (fused_proj ? M3 : 0))), [&](std::size_t i0, std::size_t i1) {
    float* buf = thread_rows(static_cast<std::size_t>(nb_max * (plane + dw_plane)));
    if (buf == nullptr) {
      no_memory = true;
      return;
    }
    float* dwbuf = buf + nb_max * plane;
    for (std::size_t i = i0; i < i1; ++i) {
      const auto r = static_cast<std::int64_t>(i);
      const std::int64_t band = r % bands, grp = r / bands % groups, n = r / (bands * groups);
      const std::int64_t ob0 = grp * per_group + std::min(grp, wider), nb = per_group + (grp < wider ? 1 : 0);
      const std::int64_t oh0 = band * band_rows, oh1 = std::min(OH, oh0 + band_rows);
      // The expansion: rows of the buffer as one row of pixels, input pixel = buffer pixel + base * W (pb < 0). A
      // first layer: the buffer's rows as output rows 0..cap of its window shifted down by base rows (pb - base * s).
      conv_geom eg = flat_1x1(C, nb * blk, H * W, cap * W);  // a first layer's C < 16: no blocks (CB 0)
      if (first_layer) {
        eg.kind = conv_kind::first_layer;
        eg.h = fh;
        eg.h.out = cap;
        eg.w = fw;
      }
      const conv_view ve{&eg, px + n * in_image, pw1 + ob0 * per_ob1, buf, nullptr, 0, std::min(p.tail, blk)};
      const conv_epilogue epe{b1 != nullptr ? b1 + ob0 * blk : nullptr, nullptr, p.pw_act};
      // The depthwise convolution over the buffer: its first `have` rows hold input rows [base, base + have). Into Y,
      // or with a projection into the rows of dwbuf, whose first is the batch's first output row oh (the window
      // shifted down by oh rows: bg.h.pb below).
      conv_geom bg = dg;
      if (fused_proj) bg.h.out = dw_rows;
      const conv_view vd{&bg, buf, pw2 + ob0 * KH * KW * blk, fused_proj ? dwbuf : dw_out + n * dw_image + ob0 * OH * OW * blk, nullptr, plane};
      const conv_epilogue epd{b2 != nullptr ? b2 + ob0 * blk : nullptr, nullptr, p.dw_act};
      // The projection of a batch of output rows [oh, oe) from dwbuf: one row of pixels, input pixel = output
      // pixel - oh * OW (pg.w.pb below).
      conv_geom pg = flat_1x1(M, M3, dw_rows * OW, OH * OW);
      const conv_view vp{&pg, dwbuf, pw3, py + n * out_image, sum != nullptr ? sum + n * out_image : nullptr, 0, std::min(p.proj_tail, blk), p.proj_half};
      const conv_epilogue epp{b3, nullptr, p.proj_act};
      const auto first_row = [&](std::int64_t oh) { return std::clamp<std::int64_t>(oh * dg.h.s - dg.h.pb, 0, DH); };
      const auto end_row = [&](std::int64_t oe) { return std::clamp<std::int64_t>((oe - 1) * dg.h.s - dg.h.pb + ek, 0, DH); };
      std::int64_t base = first_row(oh0), have = 0;
      for (std::int64_t oh = oh0; oh < oh1;) {
        // Slide: drop the rows above this output row's window, keep those it still reads.
        const std::int64_t lo = first_row(oh);
        if (lo > base) {
          const std::int64_t keep = std::max<std::int64_t>(0, have - (lo - base));
          if (keep > 0)
            for (std::int64_t b = 0; b < nb; ++b)
              std::memmove(buf + b * plane, buf + b * plane + (lo - base) * DW * blk, static_cast<std::size_t>(keep * DW * blk) * sizeof(float));
          base = lo;
          have = keep;
        }
        // As many output rows as the buffer holds the inputs of (one at least: cap >= ek), and dwbuf holds.
        std::int64_t oe = oh + 1;
        while (oe < oh1 && end_row(oe + 1) - base <= cap && (!fused_proj || oe - oh < dw_rows)) ++oe;
        const std::int64_t need = std::max(have, end_row(oe) - base);
        if (need > have) {
          block_sets(nb, [&](std::int64_t b0, std::int64_t count) {
            if (first_layer) {
              eg.h.pb = fh.pb - base * fh.s;
              for (std::int64_t r = have; r < need; ++r) dense_segment<true>(static_cast<int>(count), ve, epe, b0, r, 0, DW, 0, C, true, true);
            } else {
              eg.w.pb = -base * W;
              dense_segment<false>(static_cast<int>(count), ve, epe, b0, 0, have * W, need * W, 0, CB, true, true);
            }
          });
          if (!in_register(p.pw_act))
            for (std::int64_t b = 0; b < nb; ++b)
              p.pw_act.apply(buf + b * plane + have * DW * blk, static_cast<std::size_t>((need - have) * DW * blk));
          have = need;
        }
        bg.h.in = have;
        bg.h.pb = dg.h.pb + base;
        if (!fused_proj) {
          for (; oh < oe; ++oh)
            for (std::int64_t b = 0; b < nb; ++b) {
              depthwise_row(vd, epd, b, oh);
              if (!in_register(p.dw_act)) p.dw_act.apply(vd.y + (b * OH + oh) * OW * blk, static_cast<std::size_t>(OW * blk));
            }
          continue;
        }
        bg.h.pb -= oh * dg.h.s;  // dwbuf's row k: output row oh + k
        for (std::int64_t k = 0; k < oe - oh; ++k)
          for (std::int64_t b = 0; b < nb; ++b) {
            depthwise_row(vd, epd, b, k);
            if (!in_register(p.dw_act)) p.dw_act.apply(dwbuf + (b * dw_rows + k) * OW * blk, static_cast<std::size_t>(OW * blk));
          }
        pg.w.pb = oh * OW;
        project_pixels(vp, epp, oh * OW, oe * OW);
        oh = oe;
      }
    }
  });
  if (no_memory) return Status(errc::fail, cat(op, ": no memory for a buffer of ", std::to_string(nb_max * (plane + dw_plane) * 4), " bytes"));
  if (!project || fused_proj) return {};
  // The projection on its own: each image's pixels as one row, in segments of whole tiles.
  const std::int64_t P = OH * OW;
  const std::int64_t segs = std::clamp<std::int64_t>(P / 24, 1, 4 * threads), seg_len = (P + segs - 1) / segs;
  const conv_geom pg = flat_1x1(M, M3, P, P);
  const conv_epilogue epp{b3, nullptr, p.proj_act};
  parallel_items(ctx, static_cast<std::size_t>(N * segs), static_cast<std::size_t>(seg_len * M * M3), [&](std::size_t i0, std::size_t i1) {
    for (std::size_t i = i0; i < i1; ++i) {
      const std::int64_t n = static_cast<std::int64_t>(i) / segs, s0 = static_cast<std::int64_t>(i) % segs * seg_len, s1 = std::min(P, s0 + seg_len);
      if (s0 >= s1) continue;  // the last segments, when P does not split into `segs` of seg_len
      const conv_view vp{&pg, dw_out + n * dw_image, pw3, py + n * out_image, sum != nullptr ? sum + n * out_image : nullptr, 0,
                         std::min(p.proj_tail, blk), p.proj_half};
      project_pixels(vp, epp, s0, s1);
    }
  });
  return {};
}

// The first convolution's attributes of a PointwiseDepthwiseConv (pointwise_activation, pointwise_strides...) under
// their own names (activation, strides...).
node pointwise_attributes(const node& nd) {
  node renamed;
  for (const char* name : {"activation", "activation_params", "kernel_shape", "strides", "pads", "auto_pad"})
    if (const attribute* a = nd.attributes.find(cat("pointwise_", name))) {
      attribute r = *a;
      r.name = name;
      renamed.attributes.set(std::move(r));
    }
  return renamed;
}
// The first convolution's activation: attributes pointwise_activation and pointwise_activation_params, as FusedConv's
// activation and activation_params.
Result<activation> pointwise_activation(const node& nd) { return parse_activation(pointwise_attributes(nd)); }
// The projection's: projection_activation and projection_activation_params.
Result<activation> projection_activation(const node& nd) {
  node renamed;
  for (const char* name : {"activation", "activation_params"})
    if (const attribute* a = nd.attributes.find(cat("projection_", name))) {
      attribute r = *a;
      r.name = name;
      renamed.attributes.set(std::move(r));
    }
  return parse_activation(renamed);
}

// conv_view::x_tail of a blocked 1x1 convolution with constant filters `w` [Op/16][Ip/16][16 in][16 out] (or null):
// the input channels of the last block that some filter reads. The padding of a channel count that is not a multiple
// of 16 has zero filters and is not computed; only the padding: lanes at or past the real input channels (`real`,
// attribute input_channels or projection_input_channels, which the layout pass writes; -1: all). A real channel whose
// filters are all zero is still multiplied (an infinity in it gives NaN).
std::int64_t filter_tail(const tensor* w, std::int64_t real) {
  if (w == nullptr || w->type() != element_type::float32 || w->rank() != 4 || w->sizes()[1] % blk != 0 || w->sizes()[1] == 0 ||
      w->sizes()[0] % blk != 0 || w->sizes()[2] != 1 || w->sizes()[3] != 1)
    return blk;
  const std::int64_t OB = w->sizes()[0] / blk, IB = w->sizes()[1] / blk;
  const float* d = w->typed<float>();
  std::int64_t tail = 0;
  for (std::int64_t ob = 0; ob < OB; ++ob)
    for (std::int64_t bi = tail; bi < blk; ++bi) {
      const float* row = d + ((ob * IB + IB - 1) * blk + bi) * blk;
      if (std::any_of(row, row + blk, [](float f) { return f != 0.0f; })) tail = bi + 1;
    }
  if (real < 0) real = IB * blk;
  return std::max(tail, std::clamp<std::int64_t>(real - (IB - 1) * blk, 0, blk));
}

}  // namespace
}  // namespace impl

namespace ops {
using namespace impl;
using namespace impl::nchwc;

bool nchwc_pointwise_depthwise::supports(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  return float_input(g, n) && in_type(g, n, 1) == element_type::float32 && in_type(g, n, 3) == element_type::float32 &&
         parse_activation(nd).has_value() && pointwise_activation(nd).has_value() && projection_activation(nd).has_value() &&
         check_window_attrs(read_window_attrs(nd, false), "").is_ok() &&
         check_window_attrs(read_window_attrs(pointwise_attributes(nd), false), "").is_ok();
}
Result<compute_function> nchwc_pointwise_depthwise::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  pointwise_depthwise_plan p;
  p.attrs = read_window_attrs(nd, false);
  EPSTACK_RETURN_IF_ERROR(check_window_attrs(p.attrs, "PointwiseDepthwiseConv (NCHWc)"));
  p.pw_attrs = read_window_attrs(pointwise_attributes(nd), false);
  EPSTACK_RETURN_IF_ERROR(check_window_attrs(p.pw_attrs, "PointwiseDepthwiseConv (NCHWc): the first convolution"));
  EPSTACK_ASSIGN_OR_RETURN(p.dw_act, parse_activation(nd));
  EPSTACK_ASSIGN_OR_RETURN(p.pw_act, pointwise_activation(nd));
  p.tail = filter_tail(constant_input(g, n, 1), attr_i(nd, "input_channels", -1));
  if (nd.inputs.size() > 5 && nd.inputs[5] != no_id) {
    EPSTACK_ASSIGN_OR_RETURN(p.proj_act, projection_activation(nd));
    const tensor* w3 = constant_input(g, n, 5);
    p.proj_tail = filter_tail(w3, attr_i(nd, "projection_input_channels", -1));
    const tensor* b3 = nd.inputs.size() > 6 && nd.inputs[6] != no_id ? constant_input(g, n, 6) : nullptr;
    if (nd.inputs.size() <= 6 || nd.inputs[6] == no_id || b3 != nullptr)
      p.proj_half = half_last_block(w3, b3, attr_i(nd, "projection_output_channels", -1));
  }
  return make_fn("PointwiseDepthwiseConv (NCHWc)", [p](compute_context& ctx) { return nchwc_pointwise_depthwise_compute(p, ctx); });
}
}  // namespace ops
}  // namespace epstack::cpu
