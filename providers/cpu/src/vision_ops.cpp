// Quantized convolutions (ConvInteger, QLinearConv), RoiAlign and GridSample.
#include "kernel_util.hpp"

namespace epstack::cpu {
namespace impl {
namespace {

using dims = std::vector<std::int64_t>;


/// Conv's attributes, and the geometry they give an input.
struct conv_attrs {
  std::int64_t group = 1;
  std::vector<std::int64_t> kernel, strides, dilations, pads;
  std::string auto_pad;
  explicit conv_attrs(const node& nd)
      : group(attr_i(nd, "group", 1)), kernel(attr_ints(nd, "kernel_shape")), strides(attr_ints(nd, "strides")),
        dilations(attr_ints(nd, "dilations")), pads(attr_ints(nd, "pads")), auto_pad(attr_s(nd, "auto_pad", "NOTSET")) {}
};
struct conv_geometry {
  std::size_t sp = 0;  ///< spatial dims
  std::int64_t N = 0, C = 0, M = 0, G = 1, cg = 0;
  dims in, k, s, d, pb, out;
};
Result<conv_geometry> geometry_of(const conv_attrs& a, const tensor& x, const tensor& w, std::string_view op) {
  conv_geometry g;
  if (x.rank() < 3 || w.rank() != x.rank()) return op_error(op, "X and W must have the same rank, 3 or more");
  g.sp = x.rank() - 2;
  g.N = x.sizes()[0];
  g.C = x.sizes()[1];
  g.M = w.sizes()[0];
  g.G = a.group;
  if (g.G < 1 || g.C % g.G != 0 || g.M % g.G != 0 || w.sizes()[1] != g.C / g.G)
    return op_error(op, cat("W ", dims_string(w.sizes()), " does not fit X ", dims_string(x.sizes()), " in ", std::to_string(g.G), " groups"));
  g.cg = g.C / g.G;
  const auto get = [](const std::vector<std::int64_t>& v, std::size_t i, std::int64_t def) { return i < v.size() ? v[i] : def; };
  for (std::size_t i = 0; i < g.sp; ++i) {
    const std::int64_t in = x.sizes()[i + 2], k = w.sizes()[i + 2], s = get(a.strides, i, 1), d = get(a.dilations, i, 1);
    if (get(a.kernel, i, k) != k) return op_error(op, "kernel_shape does not match W");
    if (s < 1 || d < 1) return op_error(op, "strides and dilations must be positive");
    const std::int64_t span = (k - 1) * d + 1;
    std::int64_t pb = 0, pe = 0, out = 0;
    if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
      out = (in + s - 1) / s;
      const std::int64_t total = std::max<std::int64_t>(0, (out - 1) * s + span - in);
      pb = a.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else {
      if (a.auto_pad != "VALID") pb = get(a.pads, i, 0), pe = get(a.pads, i + g.sp, 0);
      if (pb < 0 || pe < 0) return op_error(op, "pads must not be negative");
      out = in + pb + pe >= span ? (in + pb + pe - span) / s + 1 : 0;
    }
    g.in.push_back(in), g.k.push_back(k), g.s.push_back(s), g.d.push_back(d), g.pb.push_back(pb), g.out.push_back(out);
  }
  return g;
}

/// acc[n][m][o] = sum over the group's channels and the kernel of (x - xz) * (w - wz[m]); a padded position is the
/// zero point, so it adds nothing. As an integer GEMM per image: the input's patches laid out once as int16 columns
/// (im2col), then each output channel a weighted sum of rows, contiguous along the output positions. The sums wrap
/// modulo 2^32 in unsigned arithmetic, which is exactly what int32 accumulators give (and defined behaviour).
std::vector<std::int32_t> int_conv(const compute_context& ctx, const conv_geometry& g, const tensor& x, const tensor& w, int xz,
                                   const std::vector<int>& wz) {
  const std::int64_t in_sz = product(g.in), out_sz = product(g.out), k_sz = product(g.k), rows = g.cg * k_sz;
  std::vector<std::int32_t> acc(static_cast<std::size_t>(g.N * g.M * out_sz), 0);
  if (acc.empty()) return acc;
  // Where kernel position kk and output position o read an input plane, or -1 in the padding.
  std::vector<std::int64_t> src(static_cast<std::size_t>(k_sz * out_sz));
  {
    std::vector<std::int64_t> opos(g.sp), kpos(g.sp);
    for (std::int64_t kk = 0; kk < k_sz; ++kk) {
      std::int64_t rest = kk;
      for (std::size_t q = g.sp; q-- > 0;) kpos[q] = rest % g.k[q], rest /= g.k[q];
      for (std::int64_t o = 0; o < out_sz; ++o) {
        rest = o;
        for (std::size_t q = g.sp; q-- > 0;) opos[q] = rest % g.out[q], rest /= g.out[q];
        std::int64_t at = 0;
        bool inside = true;
        for (std::size_t q = 0; q < g.sp && inside; ++q) {
          const std::int64_t p = opos[q] * g.s[q] - g.pb[q] + kpos[q] * g.d[q];
          inside = p >= 0 && p < g.in[q];
          at = at * g.in[q] + p;
        }
        src[static_cast<std::size_t>(kk * out_sz + o)] = inside ? at : -1;
      }
    }
  }
  std::vector<std::uint32_t> wv(static_cast<std::size_t>(g.M * rows));
  for (std::size_t i = 0; i < wv.size(); ++i)
    wv[i] = static_cast<std::uint32_t>(q_at(w, i) - wz[wz.size() == 1 ? 0 : i / static_cast<std::size_t>(rows)]);
  std::vector<std::int16_t> cols(static_cast<std::size_t>(g.G * rows * out_sz));
  const std::int64_t mg = g.M / g.G;
  for (std::int64_t n = 0; n < g.N; ++n) {
    parallel_items(ctx, static_cast<std::size_t>(g.C), static_cast<std::size_t>(k_sz * out_sz), [&](std::size_t c0, std::size_t c1) {
      for (std::size_t c = c0; c < c1; ++c) {  // the image's channel c (group c / cg): rows c * k_sz ...
        const auto plane = static_cast<std::size_t>((n * g.C + static_cast<std::int64_t>(c)) * in_sz);
        std::int16_t* out = cols.data() + c * static_cast<std::size_t>(k_sz * out_sz);
        for (std::size_t i = 0; i < src.size(); ++i)
          out[i] = src[i] < 0 ? std::int16_t{0} : static_cast<std::int16_t>(q_at(x, plane + static_cast<std::size_t>(src[i])) - xz);
      }
    });
    parallel_items(ctx, static_cast<std::size_t>(g.M), static_cast<std::size_t>(rows * out_sz), [&](std::size_t m0, std::size_t m1) {
      std::vector<std::uint32_t> sum(static_cast<std::size_t>(out_sz));
      for (std::size_t m = m0; m < m1; ++m) {
        std::fill(sum.begin(), sum.end(), 0u);
        const std::int16_t* group_cols = cols.data() + static_cast<std::size_t>((static_cast<std::int64_t>(m) / mg) * rows * out_sz);
        for (std::int64_t r = 0; r < rows; ++r) {
          const std::uint32_t wr = wv[m * static_cast<std::size_t>(rows) + static_cast<std::size_t>(r)];
          if (wr == 0) continue;
          const std::int16_t* row = group_cols + r * out_sz;
          for (std::int64_t o = 0; o < out_sz; ++o) sum[static_cast<std::size_t>(o)] += wr * static_cast<std::uint32_t>(std::int32_t{row[o]});
        }
        std::int32_t* y = acc.data() + (static_cast<std::size_t>(n) * static_cast<std::size_t>(g.M) + m) * static_cast<std::size_t>(out_sz);
        for (std::int64_t o = 0; o < out_sz; ++o) y[o] = static_cast<std::int32_t>(sum[static_cast<std::size_t>(o)]);
      }
    });
  }
  return acc;
}

/// A zero point: one 8-bit value (or absent: 0).
Result<int> scalar_zero_point(const compute_context& ctx, std::size_t i, std::string_view op, std::string_view what) {
  if (!ctx.has_input(i) || ctx.input(i).empty()) return 0;
  const tensor& t = ctx.input(i);
  if (!int8ish(t.type()) || t.element_count() != 1) return op_error(op, cat(what, " must be one 8-bit integer (per-tensor)"));
  return q_at(t, 0);
}
/// W's zero points: absent (0), one, or one per output channel.
Result<std::vector<int>> w_zero_points(const compute_context& ctx, std::size_t i, std::int64_t M, std::string_view op) {
  if (!ctx.has_input(i) || ctx.input(i).empty()) return std::vector<int>{0};
  const tensor& t = ctx.input(i);
  if (!int8ish(t.type()) || (t.element_count() != 1 && static_cast<std::int64_t>(t.element_count()) != M))
    return op_error(op, "w_zero_point must hold one 8-bit integer or one per output channel");
  std::vector<int> z(t.element_count());
  for (std::size_t k = 0; k < z.size(); ++k) z[k] = q_at(t, k);
  return z;
}
dims out_dims(const conv_geometry& g) {
  dims o{g.N, g.M};
  o.insert(o.end(), g.out.begin(), g.out.end());
  return o;
}

// RoiAlign's bilinear sample of one channel plane at (y, x); 0 outside [-1, H] x [-1, W].
struct roi_sample {
  std::int64_t lo_y, hi_y, lo_x, hi_x;
  double w1, w2, w3, w4;
  bool inside;
};
roi_sample sample_at(double y, double x, std::int64_t H, std::int64_t W) {
  roi_sample s{};
  if (!(y >= -1.0 && y <= static_cast<double>(H) && x >= -1.0 && x <= static_cast<double>(W))) return s;  // (NaN too)
  s.inside = true;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  s.lo_y = static_cast<std::int64_t>(y);
  s.lo_x = static_cast<std::int64_t>(x);
  if (s.lo_y >= H - 1) s.hi_y = s.lo_y = H - 1, y = static_cast<double>(s.lo_y);
  else s.hi_y = s.lo_y + 1;
  if (s.lo_x >= W - 1) s.hi_x = s.lo_x = W - 1, x = static_cast<double>(s.lo_x);
  else s.hi_x = s.lo_x + 1;
  const double ly = y - static_cast<double>(s.lo_y), lx = x - static_cast<double>(s.lo_x), hy = 1 - ly, hx = 1 - lx;
  s.w1 = hy * hx, s.w2 = hy * lx, s.w3 = ly * hx, s.w4 = ly * lx;
  return s;
}

// GridSample: coordinates through the padding mode, and the bicubic weights.
double reflect_coord(double x, double twice_low, double twice_high) {
  if (twice_low == twice_high) return 0;
  const double lo = twice_low / 2, span = (twice_high - twice_low) / 2;
  x = std::fabs(x - lo);
  const double extra = std::fmod(x, span);
  const auto flips = static_cast<std::int64_t>(std::floor(x / span));
  return flips % 2 == 0 ? extra + lo : span - extra + lo;
}
enum class grid_pad { zeros, border, reflection };
double pad_coord(double x, std::int64_t size, grid_pad pad, bool align) {
  const double hi = static_cast<double>(size - 1);
  if (pad == grid_pad::border) return std::min(std::max(x, 0.0), hi);
  if (pad == grid_pad::reflection) {
    x = align ? reflect_coord(x, 0, 2 * hi) : reflect_coord(x, -1, 2 * static_cast<double>(size) - 1);
    return std::min(std::max(x, 0.0), hi);
  }
  return x;
}
double cubic1(double x, double a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }
double cubic2(double x, double a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }

}  // namespace
}  // namespace impl

namespace ops {
using namespace impl;

// ---- ConvInteger-10: int32 Y = conv(X - x_zero_point, W - w_zero_point) over 8-bit X and W ----
bool conv_integer::supports(const graph& g, node_id n) { return int8ish(in_type(g, n, 0)) && int8ish(in_type(g, n, 1)); }
Result<compute_function> conv_integer::compile(const graph& g, node_id n) {
  const conv_attrs a(g.node(n));
  return make_fn("ConvInteger", [a](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    const tensor& w = ctx.input(1);
    EPSTACK_ASSIGN_OR_RETURN(const conv_geometry geo, geometry_of(a, x, w, "ConvInteger"));
    EPSTACK_ASSIGN_OR_RETURN(const int xz, scalar_zero_point(ctx, 2, "ConvInteger", "x_zero_point"));
    EPSTACK_ASSIGN_OR_RETURN(const std::vector<int> wz, w_zero_points(ctx, 3, geo.M, "ConvInteger"));
    const auto acc = int_conv(ctx, geo, x, w, xz, wz);
    tensor& y = ctx.allocate_output(0, element_type::int32, out_dims(geo));
    std::copy(acc.begin(), acc.end(), y.typed<std::int32_t>());
    return {};
  });
}

// ---- QLinearConv-10: Y = saturate(round((conv(X - xz, W - wz) + B) * x_scale * w_scale / y_scale) + y_zero_point);
// w_scale and w_zero_point per tensor or per output channel ----
bool qlinear_conv::supports(const graph& g, node_id n) {
  return int8ish(in_type(g, n, 0)) && int8ish(in_type(g, n, 3)) && in_type(g, n, 1) == element_type::float32 &&
         in_type(g, n, 4) == element_type::float32 && in_type(g, n, 6) == element_type::float32;
}
Result<compute_function> qlinear_conv::compile(const graph& g, node_id n) {
  const conv_attrs a(g.node(n));
  return make_fn("QLinearConv", [a](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    const tensor& w = ctx.input(3);
    EPSTACK_ASSIGN_OR_RETURN(const conv_geometry geo, geometry_of(a, x, w, "QLinearConv"));
    EPSTACK_ASSIGN_OR_RETURN(const int xz, scalar_zero_point(ctx, 2, "QLinearConv", "x_zero_point"));
    EPSTACK_ASSIGN_OR_RETURN(const std::vector<int> wz, w_zero_points(ctx, 5, geo.M, "QLinearConv"));
    const tensor& yzt = ctx.input(7);
    if (!int8ish(yzt.type()) || yzt.element_count() != 1) return op_error("QLinearConv", "y_zero_point must be one 8-bit integer");
    const tensor &xs = ctx.input(1), &ws = ctx.input(4), &ys = ctx.input(6);
    if (xs.element_count() != 1 || ys.element_count() != 1) return op_error("QLinearConv", "x_scale and y_scale must be scalars");
    if (ws.element_count() != 1 && static_cast<std::int64_t>(ws.element_count()) != geo.M)
      return op_error("QLinearConv", "w_scale must hold one value or one per output channel");
    const tensor* b = ctx.has_input(8) && !ctx.input(8).empty() ? &ctx.input(8) : nullptr;
    if (b != nullptr && (b->type() != element_type::int32 || static_cast<std::int64_t>(b->element_count()) != geo.M))
      return op_error("QLinearConv", "B must be int32, one value per output channel");
    const auto acc = int_conv(ctx, geo, x, w, xz, wz);
    tensor& y = ctx.allocate_output(0, yzt.type(), out_dims(geo));
    const std::int64_t out_sz = product(geo.out);
    const double yscale = static_cast<double>(ys.typed<float>()[0]), yz = q_at(yzt, 0);
    const double lo = yzt.type() == element_type::uint8 ? 0 : -128, hi = yzt.type() == element_type::uint8 ? 255 : 127;
    for (std::int64_t nm = 0; nm < geo.N * geo.M; ++nm) {
      const std::int64_t m = nm % geo.M;
      const double scale = static_cast<double>(xs.typed<float>()[0]) *
                           static_cast<double>(ws.typed<float>()[ws.element_count() == 1 ? 0 : static_cast<std::size_t>(m)]) / yscale;
      const double bias = b != nullptr ? b->typed<std::int32_t>()[m] : 0;
      for (std::int64_t o = 0; o < out_sz; ++o) {
        const auto i = static_cast<std::size_t>(nm * out_sz + o);
        const double v = std::clamp(std::nearbyint((acc[i] + bias) * scale) + yz, lo, hi);
        if (y.type() == element_type::uint8) y.typed<std::uint8_t>()[i] = static_cast<std::uint8_t>(v);
        else y.typed<std::int8_t>()[i] = static_cast<std::int8_t>(v);
      }
    }
    return {};
  });
}

// ---- RoiAlign (opsets 10 and 16): X [N, C, H, W], rois [R, 4] as (x1, y1, x2, y2), batch_indices [R]; Y [R, C,
// output_height, output_width], each bin the average (or max) of sampling_ratio^2 bilinear samples (adaptive: the
// ceiling of the bin's size). coordinate_transformation_mode half_pixel (opset 16's default) shifts by half a
// pixel; output_half_pixel (opset 10's only behaviour) does not, and makes each ROI at least 1x1. Max mode takes the
// largest weighted corner of each sample, as ONNX Runtime does ----
bool roi_align::supports(const graph& g, node_id n) {
  const auto t = in_type(g, n, 0);
  const auto mode = attr_s(g.node(n), "mode", "avg");
  return (t == element_type::float32 || t == element_type::float64) && in_type(g, n, 1) == t &&
         in_type(g, n, 2) == element_type::int64 && (mode == "avg" || mode == "max");
}
Result<compute_function> roi_align::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  struct params {
    bool max_mode, half_pixel;
    std::int64_t oh, ow, sampling;
    double scale;
  } p{attr_s(nd, "mode", "avg") == "max",
      attr_s(nd, "coordinate_transformation_mode", nd.since_version >= 16 ? "half_pixel" : "output_half_pixel") == "half_pixel",
      attr_i(nd, "output_height", 1), attr_i(nd, "output_width", 1), attr_i(nd, "sampling_ratio", 0),
      static_cast<double>(attr_f(nd, "spatial_scale", 1.0f))};
  const auto ctm = attr_s(nd, "coordinate_transformation_mode", "half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return Status(errc::invalid_graph, cat("RoiAlign: unknown coordinate_transformation_mode '", ctm, "'"));
  if (p.oh < 1 || p.ow < 1 || p.sampling < 0)
    return Status(errc::invalid_graph, "RoiAlign: output_height and output_width must be positive, sampling_ratio not negative");
  return make_fn("RoiAlign", [p](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    const tensor& rois = ctx.input(1);
    const tensor& bi = ctx.input(2);
    if (x.rank() != 4) return op_error("RoiAlign", cat("X must be [N, C, H, W], got ", dims_string(x.sizes())));
    if (rois.rank() != 2 || rois.sizes()[1] != 4) return op_error("RoiAlign", "rois must be [num_rois, 4]");
    const std::int64_t R = rois.sizes()[0], N = x.sizes()[0], C = x.sizes()[1], H = x.sizes()[2], W = x.sizes()[3];
    if (bi.rank() != 1 || bi.sizes()[0] != R) return op_error("RoiAlign", "batch_indices must hold one index per ROI");
    if (H < 1 || W < 1) return op_error("RoiAlign", "X has an empty image");
    for (std::int64_t r = 0; r < R; ++r)
      if (bi.typed<std::int64_t>()[r] < 0 || bi.typed<std::int64_t>()[r] >= N)
        return op_error("RoiAlign", cat("batch index ", std::to_string(bi.typed<std::int64_t>()[r]), " is outside X's ", std::to_string(N), " images"));
    // Each ROI's box, bins and sampling grid, checked before any sampling.
    struct box {
      double x1, y1, bh, bw;
      std::int64_t gh, gw;
    };
    std::vector<box> boxes(static_cast<std::size_t>(R));
    for (std::int64_t r = 0; r < R; ++r) {
      double c4[4];
      for (std::size_t k = 0; k < 4; ++k)
        c4[k] = (rois.type() == element_type::float64 ? rois.typed<double>()[r * 4 + static_cast<std::int64_t>(k)]
                                                       : static_cast<double>(rois.typed<float>()[r * 4 + static_cast<std::int64_t>(k)])) *
                    p.scale - (p.half_pixel ? 0.5 : 0.0);
      double rw = c4[2] - c4[0], rh = c4[3] - c4[1];
      if (!p.half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
      if (!(std::fabs(c4[0]) < 1e9 && std::fabs(c4[1]) < 1e9 && std::fabs(rw) < 1e9 && std::fabs(rh) < 1e9))
        return op_error("RoiAlign", cat("ROI ", std::to_string(r), " is not finite or lies too far out"));
      box& bx = boxes[static_cast<std::size_t>(r)];
      bx = {c4[0], c4[1], rh / static_cast<double>(p.oh), rw / static_cast<double>(p.ow), p.sampling, p.sampling};
      if (p.sampling == 0) {
        bx.gh = static_cast<std::int64_t>(std::ceil(rh / static_cast<double>(p.oh)));
        bx.gw = static_cast<std::int64_t>(std::ceil(rw / static_cast<double>(p.ow)));
      }
      if (bx.gh > 0 && bx.gw > 0 && bx.gh * bx.gw > (std::int64_t{1} << 24))
        return op_error("RoiAlign", cat("ROI ", std::to_string(r), " needs too many samples per bin"));
    }
    tensor& y = ctx.allocate_output(0, x.type(), {R, C, p.oh, p.ow});
    dispatch<float, double>(x.type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* px = x.typed<T>();
      T* py = y.typed<T>();
      parallel_items(ctx, static_cast<std::size_t>(R * C), static_cast<std::size_t>(p.oh * p.ow * 16), [&](std::size_t a0, std::size_t a1) {
        for (std::size_t a = a0; a < a1; ++a) {
          const std::int64_t r = static_cast<std::int64_t>(a) / C, c = static_cast<std::int64_t>(a) % C;
          const box& bx = boxes[static_cast<std::size_t>(r)];
          const double x1 = bx.x1, y1 = bx.y1, bh = bx.bh, bw = bx.bw;
          const std::int64_t gh = bx.gh, gw = bx.gw;
          const double count = static_cast<double>(std::max<std::int64_t>(gh * gw, 1));
          const T* plane = px + (bi.typed<std::int64_t>()[r] * C + c) * H * W;
          T* out = py + a * static_cast<std::size_t>(p.oh * p.ow);
          for (std::int64_t ph = 0; ph < p.oh; ++ph)
            for (std::int64_t pw = 0; pw < p.ow; ++pw) {
              double acc = 0;
              bool first = true;
              for (std::int64_t iy = 0; iy < gh; ++iy) {
                const double yy = y1 + static_cast<double>(ph) * bh + (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh);
                for (std::int64_t ix = 0; ix < gw; ++ix) {
                  const double xx = x1 + static_cast<double>(pw) * bw + (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw);
                  const roi_sample s = sample_at(yy, xx, H, W);
                  const double v1 = s.inside ? s.w1 * static_cast<double>(plane[s.lo_y * W + s.lo_x]) : 0.0;
                  const double v2 = s.inside ? s.w2 * static_cast<double>(plane[s.lo_y * W + s.hi_x]) : 0.0;
                  const double v3 = s.inside ? s.w3 * static_cast<double>(plane[s.hi_y * W + s.lo_x]) : 0.0;
                  const double v4 = s.inside ? s.w4 * static_cast<double>(plane[s.hi_y * W + s.hi_x]) : 0.0;
                  if (p.max_mode) {
                    const double v = std::max(std::max(v1, v2), std::max(v3, v4));
                    acc = first ? v : std::max(acc, v);
                    first = false;
                  } else {
                    acc += v1 + v2 + v3 + v4;
                  }
                }
              }
              out[ph * p.ow + pw] = static_cast<T>(p.max_mode ? acc : acc / count);
            }
        }
      });
    });
    return {};
  });
}

// ---- GridSample (opset 16): X [N, C, H, W] sampled at grid [N, Ho, Wo, 2] of (x, y) in [-1, 1]; nearest, bilinear or
// bicubic; zeros, border or reflection padding; PyTorch's grid_sample, which ONNX's reference reproduces ----
bool grid_sample::supports(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const auto mode = attr_s(nd, "mode", "bilinear"), pad = attr_s(nd, "padding_mode", "zeros");
  return f32_or_f64(in_type(g, n, 0)) && (mode == "bilinear" || mode == "nearest" || mode == "bicubic") &&
         (pad == "zeros" || pad == "border" || pad == "reflection");
}
Result<compute_function> grid_sample::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const std::string mode = attr_s(nd, "mode", "bilinear"), pad_s = attr_s(nd, "padding_mode", "zeros");
  const bool align = attr_i(nd, "align_corners", 0) != 0;
  const grid_pad pad = pad_s == "border" ? grid_pad::border : pad_s == "reflection" ? grid_pad::reflection : grid_pad::zeros;
  return make_fn("GridSample", [=](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    const tensor& grid = ctx.input(1);
    if (x.rank() != 4 || grid.rank() != 4 || grid.sizes()[3] != 2 || grid.sizes()[0] != x.sizes()[0] || grid.type() != x.type())
      return op_error("GridSample", "X must be [N, C, H, W] and grid [N, Ho, Wo, 2] of the same type");
    const std::int64_t N = x.sizes()[0], C = x.sizes()[1], H = x.sizes()[2], W = x.sizes()[3], Ho = grid.sizes()[1], Wo = grid.sizes()[2];
    tensor& y = ctx.allocate_output(0, x.type(), {N, C, Ho, Wo});
    float_dispatch(x.type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* px = x.typed<T>();
      const T* pg = grid.typed<T>();
      T* py = y.typed<T>();
      const auto unnorm = [&](double c, std::int64_t size) {
        return align ? (c + 1) / 2 * static_cast<double>(size - 1) : ((c + 1) * static_cast<double>(size) - 1) / 2;
      };
      for (std::int64_t nn = 0; nn < N; ++nn)
        for (std::int64_t c = 0; c < C; ++c) {
          const T* img = px + (nn * C + c) * H * W;
          const auto pixel = [&](std::int64_t yy, std::int64_t xx) -> double {
            return yy >= 0 && yy < H && xx >= 0 && xx < W ? static_cast<double>(img[yy * W + xx]) : 0.0;
          };
          for (std::int64_t i = 0; i < Ho; ++i)
            for (std::int64_t j = 0; j < Wo; ++j) {
              const T* gp = pg + ((nn * Ho + i) * Wo + j) * 2;
              double ix = unnorm(static_cast<double>(gp[0]), W), iy = unnorm(static_cast<double>(gp[1]), H);
              double v = 0;
              if (mode == "bicubic") {
                const double x0 = std::floor(ix), y0 = std::floor(iy), tx = ix - x0, ty = iy - y0;
                const double cx[4] = {cubic2(tx + 1, -0.75), cubic1(tx, -0.75), cubic1(1 - tx, -0.75), cubic2(2 - tx, -0.75)};
                const double cy[4] = {cubic2(ty + 1, -0.75), cubic1(ty, -0.75), cubic1(1 - ty, -0.75), cubic2(2 - ty, -0.75)};
                for (int a = 0; a < 4; ++a)
                  for (int b = 0; b < 4; ++b) {
                    // Each tap goes through the padding on its own (PyTorch's get_value_bounded).
                    const double tyc = pad_coord(y0 - 1 + a, H, pad, align), txc = pad_coord(x0 - 1 + b, W, pad, align);
                    v += cy[a] * cx[b] * pixel(static_cast<std::int64_t>(tyc), static_cast<std::int64_t>(txc));
                  }
              } else {
                ix = pad_coord(ix, W, pad, align);
                iy = pad_coord(iy, H, pad, align);
                if (mode == "nearest") {
                  v = pixel(static_cast<std::int64_t>(std::nearbyint(iy)), static_cast<std::int64_t>(std::nearbyint(ix)));
                } else {
                  const double x0 = std::floor(ix), y0 = std::floor(iy), fx = ix - x0, fy = iy - y0;
                  const auto X0 = static_cast<std::int64_t>(x0), Y0 = static_cast<std::int64_t>(y0);
                  v = pixel(Y0, X0) * (1 - fx) * (1 - fy) + pixel(Y0, X0 + 1) * fx * (1 - fy) + pixel(Y0 + 1, X0) * (1 - fx) * fy +
                      pixel(Y0 + 1, X0 + 1) * fx * fy;
                }
              }
              py[((nn * C + c) * Ho + i) * Wo + j] = static_cast<T>(v);
            }
        }
    });
    return {};
  });
}

}  // namespace ops
}  // namespace epstack::cpu
