// Quantized convolutions (ConvInteger, QLinearConv), RoiAlign and GridSample (2-D and N-D).
#include "row_util.hpp"

#include <optional>

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
  if (!std::isfinite(x)) return x;  // NaN or infinite: outside whatever the padding (becomes 0 or the border)
  const double lo = twice_low / 2, span = (twice_high - twice_low) / 2;
  x = std::fabs(x - lo);
  const double extra = std::fmod(x, span);
  const bool even_flips = std::fmod(std::floor(x / span), 2.0) == 0;
  return even_flips ? extra + lo : span - extra + lo;
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

// ---- GridSample-16, -20 and -22: X [N, C, D1, ..., Dr] sampled at grid [N, D1_out, ..., Dr_out, r] of normalized
// positions in [-1, 1] (listed innermost dimension first: x, y, z...); Y [N, C, D1_out, ..., Dr_out]. Opset 16 is
// 2-D only, with modes bilinear, nearest and bicubic; opset 20 names them linear, nearest and cubic (N-linear and
// N-cubic over r spatial dims). zeros, border or reflection padding; PyTorch's grid_sample, which ONNX's reference
// reproduces. Integer X is computed in double and converted at the end ----
namespace {
enum class grid_mode { nearest, linear, cubic };
std::optional<grid_mode> grid_mode_of(const node& nd) {
  const bool v20 = nd.since_version == 0 || nd.since_version >= 20;
  const std::string mode = attr_s(nd, "mode", v20 ? "linear" : "bilinear");
  if (mode == "nearest") return grid_mode::nearest;
  if (mode == (v20 ? "linear" : "bilinear")) return grid_mode::linear;
  if (mode == (v20 ? "cubic" : "bicubic")) return grid_mode::cubic;
  return std::nullopt;
}
/// Element i of a floating-point grid as double.
double grid_at(const tensor& g, std::size_t i) {
  switch (g.type()) {
    case element_type::float64: return g.typed<double>()[i];
    case element_type::float16: return static_cast<float>(g.typed<float16>()[i]);
    case element_type::bfloat16: return static_cast<float>(g.typed<bfloat16>()[i]);
    default: return static_cast<double>(g.typed<float>()[i]);
  }
}
}  // namespace

bool grid_sample::supports(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const auto pad = attr_s(nd, "padding_mode", "zeros");
  return type_in<EPSTACK_ALL_POD_TYPES>(in_type(g, n, 0)) && type_in<float, double, float16, bfloat16>(in_type(g, n, 1)) &&
         grid_mode_of(nd).has_value() && (pad == "zeros" || pad == "border" || pad == "reflection");
}
Result<compute_function> grid_sample::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const bool v20 = nd.since_version == 0 || nd.since_version >= 20;
  const auto mode_o = grid_mode_of(nd);
  if (!mode_o) return invalid(cat("GridSample: unknown mode '", attr_s(nd, "mode"), "'"));
  const grid_mode mode = *mode_o;
  const std::string pad_s = attr_s(nd, "padding_mode", "zeros");
  if (pad_s != "zeros" && pad_s != "border" && pad_s != "reflection")
    return invalid(cat("GridSample: unknown padding_mode '", pad_s, "'"));
  const bool align = attr_i(nd, "align_corners", 0) != 0;
  const grid_pad pad = pad_s == "border" ? grid_pad::border : pad_s == "reflection" ? grid_pad::reflection : grid_pad::zeros;
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_ALL_POD_TYPES>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("GridSample", [=](compute_context& ctx) -> Status {
      const tensor& x = ctx.input(0);
      const tensor& grid = ctx.input(1);
      if (x.type() != element_type_of_v<T>) return invalid("unexpected element type of X");
      if (!type_in<float, double, float16, bfloat16>(grid.type()))
        return invalid(cat("grid must be a floating-point tensor, got ", std::string(to_string(grid.type()))));
      const std::size_t rank = x.rank();
      if (v20 ? rank < 3 : rank != 4)
        return invalid(cat("X must be ", v20 ? "[N, C, D1, ..., Dr]" : "[N, C, H, W]", ", got ", dims_string(x.sizes())));
      const std::size_t sp = rank - 2;  // spatial dims
      if (grid.rank() != rank || grid.sizes()[rank - 1] != static_cast<std::int64_t>(sp) || grid.sizes()[0] != x.sizes()[0])
        return invalid(cat("grid must be [N, D1_out, ..., D", std::to_string(sp), "_out, ", std::to_string(sp), "] for X ",
                           dims_string(x.sizes()), ", got ", dims_string(grid.sizes())));
      const std::int64_t N = x.sizes()[0], C = x.sizes()[1];
      const dims in_sp(x.sizes().begin() + 2, x.sizes().end());
      dims out{N, C};
      out.insert(out.end(), grid.sizes().begin() + 1, grid.sizes().end() - 1);
      tensor& y = ctx.allocate_output(0, x.type(), out);
      const std::int64_t in_pts = product(in_sp), out_pts = product(grid.sizes(), 1, rank - 1);
      if (N * C * out_pts == 0) return {};
      const T* px = x.typed<T>();
      T* py = y.typed<T>();
      const dims in_stride = strides_of(in_sp);
      const std::int64_t per_dim = mode == grid_mode::nearest ? 1 : mode == grid_mode::linear ? 2 : 4;
      std::int64_t corners = 1;
      for (std::size_t d = 0; d < sp; ++d) corners *= per_dim;
      const auto unnorm = [&](double c, std::int64_t size) {
        return align ? (c + 1) / 2 * static_cast<double>(size - 1) : ((c + 1) * static_cast<double>(size) - 1) / 2;
      };
      // Each output point: its taps on every spatial dim (input index or -1 outside, weight), then the product of
      // the taps as (offset into a channel plane or -1, weight) pairs, applied to every channel.
      parallel_items(ctx, static_cast<std::size_t>(N * out_pts), static_cast<std::size_t>(C * corners), [&](std::size_t p0, std::size_t p1) {
        std::vector<std::int64_t> tap_idx(sp * 4), off(static_cast<std::size_t>(corners));
        std::vector<double> tap_w(sp * 4), wt(static_cast<std::size_t>(corners));
        for (std::size_t p = p0; p < p1; ++p) {
          const std::int64_t nn = static_cast<std::int64_t>(p) / out_pts, o = static_cast<std::int64_t>(p) % out_pts;
          const auto g0 = static_cast<std::size_t>((nn * out_pts + o) * static_cast<std::int64_t>(sp));
          for (std::size_t d = 0; d < sp; ++d) {
            const std::int64_t size = in_sp[d];
            // The grid lists the innermost dimension first.
            double c = unnorm(grid_at(grid, g0 + (sp - 1 - d)), size);
            std::int64_t* ti = &tap_idx[d * 4];
            double* tw = &tap_w[d * 4];
            const auto inside = [&](double v) { return v >= 0 && v < static_cast<double>(size) ? static_cast<std::int64_t>(v) : std::int64_t{-1}; };
            if (mode == grid_mode::cubic) {
              const double c0 = std::floor(c), t = c - c0;
              const double cw[4] = {cubic2(t + 1, -0.75), cubic1(t, -0.75), cubic1(1 - t, -0.75), cubic2(2 - t, -0.75)};
              for (int k = 0; k < 4; ++k) {
                // Each tap goes through the padding on its own (PyTorch's get_value_bounded).
                ti[k] = inside(pad_coord(c0 - 1 + k, size, pad, align));
                tw[k] = cw[k];
              }
            } else {
              c = pad_coord(c, size, pad, align);
              if (mode == grid_mode::nearest) {
                ti[0] = inside(std::nearbyint(c));  // halfway: to the even index
                tw[0] = 1;
              } else {
                const double c0 = std::floor(c), f = c - c0;
                ti[0] = inside(c0), ti[1] = inside(c0 + 1);
                tw[0] = 1 - f, tw[1] = f;
              }
            }
          }
          for (std::int64_t q = 0; q < corners; ++q) {
            std::int64_t rest = q, at = 0;
            double w = 1;
            for (std::size_t d = sp; d-- > 0;) {
              const auto k = static_cast<std::size_t>(rest % per_dim);
              rest /= per_dim;
              const std::int64_t i = tap_idx[d * 4 + k];
              w *= tap_w[d * 4 + k];
              at = at < 0 || i < 0 ? -1 : at + i * in_stride[d];
            }
            off[static_cast<std::size_t>(q)] = at;
            wt[static_cast<std::size_t>(q)] = w;
          }
          for (std::int64_t c = 0; c < C; ++c) {
            const T* plane = px + (nn * C + c) * in_pts;
            T& dst = py[(nn * C + c) * out_pts + o];
            if (mode == grid_mode::nearest) {  // a copy: exact for every type
              dst = off[0] >= 0 ? plane[off[0]] : T{};
              continue;
            }
            double v = 0;
            for (std::int64_t q = 0; q < corners; ++q) {
              const std::int64_t at = off[static_cast<std::size_t>(q)];
              if (at < 0) continue;
              double e;
              if constexpr (is_half_v<T>) e = static_cast<float>(plane[at]);
              else e = static_cast<double>(plane[at]);
              v += wt[static_cast<std::size_t>(q)] * e;
            }
            dst = from_double<T>(v);
          }
        }
      });
      return {};
    });
  });
  return r;
}

}  // namespace ops
}  // namespace epstack::cpu
