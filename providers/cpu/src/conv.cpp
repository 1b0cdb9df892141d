// Convolution: Conv and the contrib FusedConv (Conv + bias + residual Z + activation in one pass).
//
// Layout NCHW. A 1x1 convolution with unit strides and no padding is one matrix product per image and group;
// depthwise convolutions (one input and one output channel per group) run a direct loop per channel; everything else
// is im2col + matrix product. Large outputs are cut into column tiles computed independently on the intra-op
// threads (im2col of the tile, product, then bias/residual/activation while the tile is in cache); small ones run one
// product split across the threads.
#include "gemm.hpp"
#include "kernel_util.hpp"

namespace epstack::cpu {
namespace impl {
namespace {

// ---- activation epilogue ----
enum class act_kind : std::uint8_t { none, relu, clip, sigmoid, tanh, leaky_relu, hard_sigmoid };
struct activation {
  act_kind kind = act_kind::none;
  float a = 0, b = 0;
  void apply(float* p, std::size_t n) const {
    switch (kind) {
      case act_kind::none: return;
      case act_kind::relu: for (std::size_t i = 0; i < n; ++i) p[i] = std::max(p[i], 0.0f); return;
      case act_kind::clip: for (std::size_t i = 0; i < n; ++i) p[i] = std::min(std::max(p[i], a), b); return;
      case act_kind::sigmoid: for (std::size_t i = 0; i < n; ++i) p[i] = fast_sigmoid(p[i]); return;
      case act_kind::tanh: for (std::size_t i = 0; i < n; ++i) p[i] = std::tanh(p[i]); return;
      case act_kind::leaky_relu: for (std::size_t i = 0; i < n; ++i) p[i] = p[i] >= 0 ? p[i] : a * p[i]; return;
      case act_kind::hard_sigmoid: for (std::size_t i = 0; i < n; ++i) p[i] = std::min(std::max(a * p[i] + b, 0.0f), 1.0f); return;
    }
  }
};
Result<activation> parse_activation(const node& nd) {
  activation act;
  const std::string name = attr_s(nd, "activation");
  const auto params = attr_floats(nd, "activation_params");
  const auto param = [&](std::size_t i, float def) { return i < params.size() ? params[i] : def; };
  if (name.empty()) act.kind = act_kind::none;
  else if (name == "Relu") act.kind = act_kind::relu;
  else if (name == "Clip") act = {act_kind::clip, param(0, std::numeric_limits<float>::lowest()), param(1, std::numeric_limits<float>::max())};
  else if (name == "Sigmoid") act.kind = act_kind::sigmoid;
  else if (name == "Tanh") act.kind = act_kind::tanh;
  else if (name == "LeakyRelu") act = {act_kind::leaky_relu, param(0, 0.01f), 0};
  else if (name == "HardSigmoid") act = {act_kind::hard_sigmoid, param(0, 0.2f), param(1, 0.5f)};
  else return Status(errc::not_implemented, cat("FusedConv: activation '", name, "' is not supported"));
  return act;
}

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

// im2col of output columns [c0, c1) of one image and group: col[(c*K + k), j - c0] for c < Cg, k < kernel_size.
void im2col(const geometry& g, const float* x, std::int64_t c0, std::int64_t c1, float* col) {
  const std::int64_t cols = c1 - c0;
  if (g.spatial == 2) {
    const std::int64_t IH = g.in[0], IW = g.in[1], KH = g.kernel[0], KW = g.kernel[1], OW = g.out[1];
    const std::int64_t sh = g.stride[0], sw = g.stride[1], dh = g.dilation[0], dw = g.dilation[1];
    const std::int64_t ph = g.pad_begin[0], pw = g.pad_begin[1];
    for (std::int64_t c = 0; c < g.Cg; ++c)
      for (std::int64_t ki = 0; ki < KH; ++ki)
        for (std::int64_t kj = 0; kj < KW; ++kj) {
          float* dst = col + ((c * KH + ki) * KW + kj) * cols;
          const float* src = x + c * IH * IW;
          std::int64_t j = c0;
          while (j < c1) {
            const std::int64_t oh = j / OW, ow0 = j % OW;
            const std::int64_t run = std::min(OW - ow0, c1 - j);
            const std::int64_t ih = oh * sh - ph + ki * dh;
            float* d = dst + (j - c0);
            if (ih < 0 || ih >= IH) {
              std::fill_n(d, run, 0.0f);
            } else {
              const float* row = src + ih * IW;
              // Valid ow: 0 <= ow*sw - pw + kj*dw < IW.
              const std::int64_t off = kj * dw - pw;
              std::int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
              std::int64_t hi = IW - off > 0 ? (IW - off + sw - 1) / sw : 0;
              lo = std::clamp(lo - ow0, std::int64_t{0}, run);
              hi = std::clamp(hi - ow0, lo, run);
              std::fill_n(d, lo, 0.0f);
              if (sw == 1) std::memcpy(d + lo, row + (ow0 + lo) + off, static_cast<std::size_t>(hi - lo) * sizeof(float));
              else
                for (std::int64_t t = lo; t < hi; ++t) d[t] = row[(ow0 + t) * sw + off];
              std::fill_n(d + hi, run - hi, 0.0f);
            }
            j += run;
          }
        }
    return;
  }
  // Any spatial rank: decompose indices.
  const std::size_t S = g.spatial;
  tensor_sizes kidx(S), oidx(S);
  for (std::int64_t c = 0; c < g.Cg; ++c)
    for (std::int64_t k = 0; k < g.kernel_size; ++k) {
      std::int64_t r = k;
      for (std::size_t i = S; i-- > 0;) {
        kidx[i] = r % g.kernel[i];
        r /= g.kernel[i];
      }
      float* dst = col + (c * g.kernel_size + k) * cols;
      for (std::int64_t j = c0; j < c1; ++j) {
        std::int64_t q = j, off = 0;
        bool inside = true;
        for (std::size_t i = S; i-- > 0;) {
          oidx[i] = q % g.out[i];
          q /= g.out[i];
        }
        for (std::size_t i = 0; i < S; ++i) {
          const std::int64_t p = oidx[i] * g.stride[i] - g.pad_begin[i] + kidx[i] * g.dilation[i];
          inside = inside && p >= 0 && p < g.in[i];
          off = off * g.in[i] + p;
        }
        dst[j - c0] = inside ? x[c * g.in_size + off] : 0.0f;
      }
    }
}

struct conv_plan {
  conv_attrs attrs;
  activation act;
  bool fused = false;  // FusedConv: inputs X, W, B, Z
};

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

// Depthwise: one input and one output channel per group, 2-D.
void depthwise2d(const geometry& g, const float* x, const float* w, float* y) {
  const std::int64_t IH = g.in[0], IW = g.in[1], KH = g.kernel[0], KW = g.kernel[1], OH = g.out[0], OW = g.out[1];
  const std::int64_t sh = g.stride[0], sw = g.stride[1], dh = g.dilation[0], dw = g.dilation[1];
  const std::int64_t ph = g.pad_begin[0], pw = g.pad_begin[1];
  std::fill_n(y, OH * OW, 0.0f);
  for (std::int64_t ki = 0; ki < KH; ++ki)
    for (std::int64_t kj = 0; kj < KW; ++kj) {
      const float wv = w[ki * KW + kj];
      const std::int64_t off = kj * dw - pw;
      const std::int64_t lo = off >= 0 ? 0 : std::min(OW, (-off + sw - 1) / sw);
      const std::int64_t hi = std::max(lo, std::min(OW, IW - off > 0 ? (IW - off + sw - 1) / sw : 0));
      for (std::int64_t oh = 0; oh < OH; ++oh) {
        const std::int64_t ih = oh * sh - ph + ki * dh;
        if (ih < 0 || ih >= IH) continue;
        const float* row = x + ih * IW + off;
        float* out = y + oh * OW;
        if (sw == 1)
          for (std::int64_t ow = lo; ow < hi; ++ow) out[ow] += wv * row[ow];
        else
          for (std::int64_t ow = lo; ow < hi; ++ow) out[ow] += wv * row[ow * sw];
      }
    }
}

Status conv_compute(const conv_plan& p, compute_context& ctx) {
  const tensor& x = ctx.input(0);
  const tensor& w = ctx.input(1);
  if (x.type() != element_type::float32 || w.type() != element_type::float32)
    return Status(errc::invalid_argument, "X and W must be float");
  EPSTACK_ASSIGN_OR_RETURN(const geometry g, make_geometry(p.attrs, x.sizes(), w.sizes()));
  const float* bias = nullptr;
  if (ctx.has_input(2)) {
    const tensor& b = ctx.input(2);
    if (b.type() != element_type::float32 || b.element_count() != static_cast<std::size_t>(g.M))
      return Status(errc::invalid_argument, cat("B must hold ", std::to_string(g.M), " floats"));
    bias = b.typed<float>();
  }
  tensor_sizes out_sizes{g.N, g.M};
  out_sizes.insert(out_sizes.end(), g.out.begin(), g.out.end());
  const float* z = nullptr;
  if (p.fused && ctx.has_input(3)) {
    const tensor& zt = ctx.input(3);
    if (zt.type() != element_type::float32 || !std::equal(zt.sizes().begin(), zt.sizes().end(), out_sizes.begin(), out_sizes.end()))
      return Status(errc::invalid_argument, cat("Z ", dims_string(zt.sizes()), " must have the output's shape ", dims_string(out_sizes)));
    z = zt.typed<float>();
  }
  tensor& y = ctx.allocate_output(0, element_type::float32, out_sizes);
  const float* px = x.typed<float>();
  const float* pw = w.typed<float>();
  float* py = y.typed<float>();
  const std::int64_t HW = g.out_size, K = g.Cg * g.kernel_size;
  if (y.element_count() == 0) return {};

  const bool depthwise = g.Cg == 1 && g.Mg == 1 && g.spatial == 2;
  if (depthwise) {
    const std::size_t planes = static_cast<std::size_t>(g.N * g.M);
    parallel_items(ctx, planes, static_cast<std::size_t>(HW * g.kernel_size), [&](std::size_t b0, std::size_t b1) {
      for (std::size_t pl = b0; pl < b1; ++pl) {
        const std::int64_t n = static_cast<std::int64_t>(pl) / g.M, m = static_cast<std::int64_t>(pl) % g.M;
        float* out = py + static_cast<std::int64_t>(pl) * HW;
        depthwise2d(g, px + (n * g.C + m) * g.in_size, pw + m * g.kernel_size, out);
        epilogue(p, out, bias != nullptr ? bias + m : nullptr, z != nullptr ? z + static_cast<std::int64_t>(pl) * HW : nullptr, 1, HW, 0, HW);
      }
    });
    return {};
  }

  bool pointwise = g.kernel_size == 1;
  for (std::size_t i = 0; i < g.spatial && pointwise; ++i) pointwise = g.stride[i] == 1 && g.pad_begin[i] == 0 && g.in[i] == g.out[i];
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
          // im2col of the whole image, rows split across threads by input channel.
          if (g.Cg >= threads && threads > 1) {
            geometry one = g;
            one.Cg = 1;
            ctx.parallel_for(static_cast<std::size_t>(g.Cg), 1, [&](std::size_t c0, std::size_t c1) {
              for (std::size_t c = c0; c < c1; ++c)
                im2col(one, xg + static_cast<std::int64_t>(c) * g.in_size, 0, HW, pcol + static_cast<std::int64_t>(c) * g.kernel_size * HW);
            });
          } else {
            im2col(g, xg, 0, HW, pcol);
          }
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
  return p;
}

bool conv_supported(const graph& g, node_id n) {
  if (in_type(g, n, 0) != element_type::float32 || in_type(g, n, 1) != element_type::float32) return false;
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
  return make_fn("Conv", [p](compute_context& ctx) { return conv_compute(p, ctx); });
}
bool fused_conv::supports(const graph& g, node_id n) { return conv_supported(g, n) && parse_activation(g.node(n)).has_value(); }
Result<compute_function> fused_conv::compile(const graph& g, node_id n) {
  EPSTACK_ASSIGN_OR_RETURN(auto p, make_plan(g, n, true));
  return make_fn("FusedConv", [p](compute_context& ctx) { return conv_compute(p, ctx); });
}

}  // namespace ops
}  // namespace epstack::cpu
