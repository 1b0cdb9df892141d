// Operators added in opsets 18 to 22 that fit no other family: GroupNormalization-21, LpPool (every version),
// Col2Im-18, CenterCropPad-18, AffineGrid-20 and DeformConv-19/22.
#include "row_util.hpp"
#include "tensor_util.hpp"

#include <cmath>
#include <numeric>
#include <sstream>

namespace epstack::cpu {
namespace impl {
namespace {

/// A message from strings and numbers.
template <class... A>
std::string say(const A&... a) {
  std::ostringstream o;
  (o << ... << a);
  return o.str();
}

/// The type values are computed in: float for the 16-bit floats, T otherwise.
template <class T>
using acc_t = std::conditional_t<is_half_v<T>, float, T>;

template <class T>
double dbl(T v) { return static_cast<double>(static_cast<acc_t<T>>(v)); }

template <class T>
Status expect_type(const tensor& t, const char* what) {
  if (t.type() != element_type_of_v<T>)
    return invalid(say(what, " has element type ", to_string(t.type()), ", expected ", to_string(element_type_of_v<T>)));
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// GroupNormalization-21: x [N, C, ...]; scale and bias [C]; statistics per (n, group) over C/G channels and the
// spatial dimensions, computed in float (stash_type 1) or double for double input.

template <class T>
Status group_norm_compute(compute_context& ctx, std::int64_t groups, float epsilon) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const tensor& x = ctx.input(0);
  const tensor& scale = ctx.input(1);
  const tensor& bias = ctx.input(2);
  EPSTACK_RETURN_IF_ERROR(expect_type<T>(x, "X"));
  EPSTACK_RETURN_IF_ERROR(expect_type<T>(scale, "scale"));
  EPSTACK_RETURN_IF_ERROR(expect_type<T>(bias, "bias"));
  if (x.rank() < 2) return invalid(say("X must have rank >= 2 (N, C, ...), got ", dims_string(x.sizes())));
  const std::int64_t n = x.sizes()[0], c = x.sizes()[1], spatial = product(x.sizes(), 2);
  if (groups <= 0 || c % groups != 0)
    return invalid(say("attribute 'num_groups' (", groups, ") must be positive and divide the channels (", c, ")"));
  if (scale.element_count() != static_cast<std::size_t>(c) || bias.element_count() != static_cast<std::size_t>(c))
    return invalid(say("scale and bias must have C = ", c, " elements, got ", scale.element_count(), " and ", bias.element_count()));
  tensor& y = ctx.allocate_output(0, x.type(), x.sizes());
  const T* px = x.typed<T>();
  const T* ps = scale.typed<T>();
  const T* pb = bias.typed<T>();
  T* py = y.typed<T>();
  const std::int64_t cpg = c / groups, len = cpg * spatial;
  parallel_items(ctx, static_cast<std::size_t>(n * groups), static_cast<std::size_t>(3 * len), [&](std::size_t b, std::size_t e) {
    for (std::size_t item = b; item < e; ++item) {
      const std::int64_t off = static_cast<std::int64_t>(item) * len;
      A sum = 0;
      for (std::int64_t i = 0; i < len; ++i) sum += static_cast<A>(px[off + i]);
      const A mean = sum / static_cast<A>(len);
      A sq = 0;
      for (std::int64_t i = 0; i < len; ++i) {
        const A d = static_cast<A>(px[off + i]) - mean;
        sq += d * d;
      }
      const A inv = A(1) / std::sqrt(sq / static_cast<A>(len) + static_cast<A>(epsilon));
      const std::int64_t g = static_cast<std::int64_t>(item) % groups;
      for (std::int64_t ch = 0; ch < cpg; ++ch) {
        const std::int64_t cc = g * cpg + ch;
        const A k = inv * static_cast<A>(ps[cc]), bb = static_cast<A>(pb[cc]) - mean * k;
        const T* xr = px + off + ch * spatial;
        T* yr = py + off + ch * spatial;
        for (std::int64_t i = 0; i < spatial; ++i) yr[i] = static_cast<T>(static_cast<A>(xr[i]) * k + bb);
      }
    }
  });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// Pooling geometry shared by LpPool: output sizes and the begin padding per spatial axis, with ONNX 1.22's rule
// (with ceil_mode, a last window that would start in the end padding is dropped).

struct pool_geometry {
  dims_t kernel, strides, dilations, pad_begin, out;
};

Result<pool_geometry> pool_shape(std::span<const std::int64_t> x, const node& nd, bool allow_dilations) {
  const std::size_t sp = x.size() - 2;
  pool_geometry g;
  g.kernel = attr_ints(nd, "kernel_shape");
  g.strides = attr_ints(nd, "strides", dims_t(sp, 1));
  g.dilations = allow_dilations ? attr_ints(nd, "dilations", dims_t(sp, 1)) : dims_t(sp, 1);
  dims_t pads = attr_ints(nd, "pads", dims_t(2 * sp, 0));
  if (g.kernel.size() != sp) return invalid(say("attribute 'kernel_shape' has ", g.kernel.size(), " values for ", sp, " spatial axes"));
  if (g.strides.size() != sp || g.dilations.size() != sp || pads.size() != 2 * sp)
    return invalid(say("attributes 'strides', 'dilations' and 'pads' must have ", sp, ", ", sp, " and ", 2 * sp, " values"));
  const bool ceil_mode = attr_i(nd, "ceil_mode", 0) != 0;
  const std::string auto_pad = attr_s(nd, "auto_pad", "NOTSET");
  g.pad_begin.assign(sp, 0);
  g.out.assign(sp, 0);
  for (std::size_t i = 0; i < sp; ++i) {
    const std::int64_t k = g.kernel[i], s = g.strides[i], d = g.dilations[i], n = x[i + 2];
    if (k < 1 || s < 1 || d < 1 || pads[i] < 0 || pads[i + sp] < 0)
      return invalid("attributes 'kernel_shape', 'strides', 'dilations' must be positive and 'pads' non-negative");
    const std::int64_t eff = (k - 1) * d + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      g.out[i] = (n + s - 1) / s;
      const std::int64_t total = std::max<std::int64_t>(0, (g.out[i] - 1) * s + eff - n);
      g.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else if (auto_pad == "VALID" || auto_pad == "NOTSET") {
      const std::int64_t pb = auto_pad == "VALID" ? 0 : pads[i], total = auto_pad == "VALID" ? n : n + pads[i] + pads[i + sp];
      if (total < eff) return invalid(say("the window (", eff, ") is larger than the padded input (", total, ") on axis ", i + 2));
      std::int64_t r = (ceil_mode ? (total - eff + s - 1) / s : (total - eff) / s) + 1;
      if (ceil_mode && (r - 1) * s >= n + pb) --r;
      g.out[i] = r;
      g.pad_begin[i] = pb;
    } else {
      return invalid(say("attribute 'auto_pad' is '", auto_pad, "'"));
    }
  }
  return g;
}

// LpPool: y = (sum over the window of |x|^p)^(1/p); padding contributes nothing.
template <class T>
Status lp_pool_compute(compute_context& ctx, const node& nd, double p, bool dilations) {
  using A = acc_t<T>;
  const tensor& x = ctx.input(0);
  EPSTACK_RETURN_IF_ERROR(expect_type<T>(x, "X"));
  if (x.rank() < 3) return invalid(say("X must have rank >= 3 (N, C, spatial...), got ", dims_string(x.sizes())));
  EPSTACK_ASSIGN_OR_RETURN(auto geo, pool_shape(x.sizes(), nd, dilations));
  const std::size_t sp = x.rank() - 2;
  dims_t out_dims{x.sizes()[0], x.sizes()[1]};
  out_dims.insert(out_dims.end(), geo.out.begin(), geo.out.end());
  tensor& y = ctx.allocate_output(0, x.type(), out_dims);
  const std::int64_t planes = x.sizes()[0] * x.sizes()[1];
  const std::int64_t in_plane = product(x.sizes(), 2), out_plane = product(out_dims, 2);
  const auto in_strides = strides_of(std::span<const std::int64_t>(x.sizes()).subspan(2));
  const auto out_strides = strides_of(geo.out);
  const std::int64_t window = std::accumulate(geo.kernel.begin(), geo.kernel.end(), std::int64_t{1}, std::multiplies<>());
  const T* px = x.typed<T>();
  T* py = y.typed<T>();
  const A ap = static_cast<A>(p), inv_p = static_cast<A>(1.0 / p);
  parallel_items(ctx, static_cast<std::size_t>(planes), static_cast<std::size_t>(out_plane * window), [&](std::size_t b, std::size_t e) {
    dims_t o(sp), k(sp);
    for (std::size_t plane = b; plane < e; ++plane) {
      const T* xp = px + static_cast<std::int64_t>(plane) * in_plane;
      T* yp = py + static_cast<std::int64_t>(plane) * out_plane;
      for (std::int64_t oi = 0; oi < out_plane; ++oi) {
        for (std::size_t a = 0; a < sp; ++a) o[a] = oi / out_strides[a] % geo.out[a];
        A sum = 0;
        std::fill(k.begin(), k.end(), 0);
        for (std::int64_t w = 0; w < window; ++w) {
          std::int64_t off = 0;
          bool inside = true;
          for (std::size_t a = 0; a < sp; ++a) {
            const std::int64_t pos = o[a] * geo.strides[a] - geo.pad_begin[a] + k[a] * geo.dilations[a];
            if (pos < 0 || pos >= x.sizes()[a + 2]) inside = false;
            off += pos * in_strides[a];
          }
          if (inside) {
            const A v = std::fabs(static_cast<A>(xp[off]));
            sum += p == 2 ? v * v : (p == 1 ? v : std::pow(v, ap));
          }
          for (std::size_t a = sp; a-- > 0;) {  // next window position (odometer)
            if (++k[a] < geo.kernel[a]) break;
            k[a] = 0;
          }
        }
        yp[oi] = static_cast<T>(p == 2 ? std::sqrt(sum) : (p == 1 ? sum : std::pow(sum, inv_p)));
      }
    }
  });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// Col2Im-18: input [N, C * prod(block), L] -> [N, C, image...], summing overlapping blocks.

template <class T>
Status col2im_compute(compute_context& ctx, const node& nd) {
  const tensor& x = ctx.input(0);
  EPSTACK_RETURN_IF_ERROR(expect_type<T>(x, "input"));
  EPSTACK_ASSIGN_OR_RETURN(const auto image, ints_of(ctx.input(1), "image_shape"));
  EPSTACK_ASSIGN_OR_RETURN(const auto block, ints_of(ctx.input(2), "block_shape"));
  const std::size_t sp = image.size();
  if (sp == 0 || block.size() != sp) return invalid(say("image_shape and block_shape must have the same non-zero length, got ", sp, " and ", block.size()));
  if (x.rank() != 3) return invalid(say("input must be [N, C * prod(block_shape), L], got ", dims_string(x.sizes())));
  const dims_t strides = attr_ints(nd, "strides", dims_t(sp, 1)), dil = attr_ints(nd, "dilations", dims_t(sp, 1));
  const dims_t pads = attr_ints(nd, "pads", dims_t(2 * sp, 0));
  if (strides.size() != sp || dil.size() != sp || pads.size() != 2 * sp) return invalid("attributes 'strides', 'dilations', 'pads' do not match image_shape");
  std::int64_t block_size = 1;
  dims_t blocks(sp);  // sliding positions per axis
  std::int64_t positions = 1;
  for (std::size_t a = 0; a < sp; ++a) {
    if (block[a] < 1 || image[a] < 0 || strides[a] < 1 || dil[a] < 1 || pads[a] < 0 || pads[a + sp] < 0)
      return invalid("image_shape, block_shape, strides, dilations and pads must be positive (pads non-negative)");
    block_size *= block[a];
    const std::int64_t eff = (block[a] - 1) * dil[a] + 1, total = image[a] + pads[a] + pads[a + sp];
    blocks[a] = total < eff ? 0 : (total - eff) / strides[a] + 1;
    positions *= blocks[a];
  }
  const std::int64_t n = x.sizes()[0], cb = x.sizes()[1], l = x.sizes()[2];
  if (cb % block_size != 0) return invalid(say("dimension 1 of input (", cb, ") is not a multiple of prod(block_shape) = ", block_size));
  if (l != positions) return invalid(say("dimension 2 of input (", l, ") must be the number of block positions, ", positions));
  const std::int64_t c = cb / block_size;
  dims_t out{n, c};
  out.insert(out.end(), image.begin(), image.end());
  tensor& y = ctx.allocate_output(0, x.type(), out);
  T* py = y.typed<T>();
  const T* px = x.typed<T>();
  const std::int64_t img = product(image);
  std::fill(py, py + y.element_count(), T(0));
  const auto img_strides = strides_of(image), blk_strides = strides_of(block), pos_strides = strides_of(blocks);
  parallel_items(ctx, static_cast<std::size_t>(n * c), static_cast<std::size_t>(block_size * l), [&](std::size_t b, std::size_t e) {
    for (std::size_t nc = b; nc < e; ++nc) {
      T* yp = py + static_cast<std::int64_t>(nc) * img;
      for (std::int64_t k = 0; k < block_size; ++k) {
        const T* row = px + (static_cast<std::int64_t>(nc) * block_size + k) * l;
        for (std::int64_t pos = 0; pos < l; ++pos) {
          std::int64_t off = 0;
          bool inside = true;
          for (std::size_t a = 0; a < sp; ++a) {
            const std::int64_t kk = k / blk_strides[a] % block[a], pp = pos / pos_strides[a] % blocks[a];
            const std::int64_t at = pp * strides[a] - pads[a] + kk * dil[a];
            if (at < 0 || at >= image[a]) inside = false;
            off += at * img_strides[a];
          }
          if (inside) yp[off] = static_cast<T>(static_cast<acc_t<T>>(yp[off]) + static_cast<acc_t<T>>(row[pos]));
        }
      }
    }
  });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// CenterCropPad-18: per listed axis, a centred window (start rounded down) or centred zero padding (the extra pixel
// on the right).

Status center_crop_pad_compute(compute_context& ctx, const dims_t& axes_attr) {
  const tensor& x = ctx.input(0);
  EPSTACK_ASSIGN_OR_RETURN(const auto shape, ints_of(ctx.input(1), "shape"));
  const std::size_t r = x.rank();
  dims_t axes = axes_attr;
  if (axes.empty())
    for (std::size_t a = 0; a < r; ++a) axes.push_back(static_cast<std::int64_t>(a));
  if (shape.size() != axes.size()) return invalid(say("shape has ", shape.size(), " values for ", axes.size(), " axes"));
  dims_t out = to_dims(x.sizes());
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const auto a = normalize_axis(axes[i], r);
    if (!a) return invalid(say("attribute 'axes' holds ", axes[i], ", out of range for rank ", r));
    if (shape[i] < 0) return invalid(say("shape holds a negative dimension ", shape[i]));
    out[*a] = shape[i];
  }
  tensor& y = ctx.allocate_output(0, x.type(), out);
  if (y.element_count() == 0) return {};
  const std::size_t es = element_size(x.type());
  if (es == 0 || x.type() == element_type::string) return invalid(say("CenterCropPad does not take ", to_string(x.type())));
  std::memset(y.mutable_data(), 0, y.byte_size());
  // Per axis: the input offset of output index 0 (negative when padding).
  dims_t shift(r);
  for (std::size_t a = 0; a < r; ++a) {
    const std::int64_t in = x.sizes()[a], o = out[a];
    shift[a] = in >= o ? (in - o) / 2 : -((o - in) / 2);
  }
  const auto xs = strides_of(x.sizes()), ys = strides_of(out);
  const std::byte* px = x.data();
  std::byte* py = y.mutable_data();
  const std::int64_t total = static_cast<std::int64_t>(y.element_count());
  for (std::int64_t i = 0; i < total; ++i) {
    std::int64_t off = 0;
    bool inside = true;
    for (std::size_t a = 0; a < r && inside; ++a) {
      const std::int64_t at = i / ys[a] % out[a] + shift[a];
      inside = at >= 0 && at < x.sizes()[a];
      off += at * xs[a];
    }
    if (inside) std::memcpy(py + static_cast<std::size_t>(i) * es, px + static_cast<std::size_t>(off) * es, es);
  }
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// AffineGrid-20: theta [N, 2, 3] with size [N, C, H, W] -> grid [N, H, W, 2]; theta [N, 3, 4] with size
// [N, C, D, H, W] -> [N, D, H, W, 3]. Base coordinates from -1 to 1 (pixel centres when align_corners, else edges).

template <class T>
Status affine_grid_compute(compute_context& ctx, bool align_corners) {
  using A = acc_t<T>;
  const tensor& theta = ctx.input(0);
  EPSTACK_RETURN_IF_ERROR(expect_type<T>(theta, "theta"));
  EPSTACK_ASSIGN_OR_RETURN(const auto size, ints_of(ctx.input(1), "size"));
  if (size.size() != 4 && size.size() != 5) return invalid(say("size must have 4 (2-D) or 5 (3-D) values, got ", size.size()));
  const std::size_t sp = size.size() - 2;
  const std::int64_t n = size[0];
  if (theta.rank() != 3 || theta.sizes()[0] != n || theta.sizes()[1] != static_cast<std::int64_t>(sp) ||
      theta.sizes()[2] != static_cast<std::int64_t>(sp + 1))
    return invalid(say("theta must be [N, ", sp, ", ", sp + 1, "] with N = ", n, ", got ", dims_string(theta.sizes())));
  for (auto d : size)
    if (d < 0) return invalid("size holds a negative dimension");
  dims_t out{n};
  for (std::size_t a = 0; a < sp; ++a) out.push_back(size[2 + a]);
  out.push_back(static_cast<std::int64_t>(sp));
  tensor& y = ctx.allocate_output(0, theta.type(), out);
  const auto base = [&](std::int64_t i, std::int64_t len) -> A {
    if (len <= 1) return A(0);
    return align_corners ? A(-1) + A(2) * static_cast<A>(i) / static_cast<A>(len - 1)
                         : (A(2) * static_cast<A>(i) + A(1)) / static_cast<A>(len) - A(1);
  };
  const T* pt = theta.typed<T>();
  T* py = y.typed<T>();
  const std::int64_t pts = product(std::span<const std::int64_t>(size).subspan(2));
  // Spatial order D, H, W; the grid's last axis holds (x, y[, z]) = (W, H[, D]) coordinates.
  for (std::int64_t b = 0; b < n; ++b) {
    const T* th = pt + b * static_cast<std::int64_t>(sp * (sp + 1));
    for (std::int64_t p = 0; p < pts; ++p) {
      A coord[4];
      std::int64_t rest = p;
      for (std::size_t a = sp; a-- > 0;) {  // a: spatial axis from the last (W)
        const std::int64_t len = size[2 + a], i = rest % std::max<std::int64_t>(len, 1);
        rest /= std::max<std::int64_t>(len, 1);
        coord[sp - 1 - a] = base(i, len);
      }
      coord[sp] = A(1);
      for (std::size_t r = 0; r < sp; ++r) {
        A v = 0;
        for (std::size_t c = 0; c <= sp; ++c) v += static_cast<A>(th[r * (sp + 1) + c]) * coord[c];
        py[(b * pts + p) * static_cast<std::int64_t>(sp) + static_cast<std::int64_t>(r)] = static_cast<T>(v);
      }
    }
  }
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// DeformConv-19/22 (2-D): each kernel tap samples X bilinearly at its regular position plus a learned offset
// (offset_group groups of channels share offsets), optionally scaled by a mask; then a grouped product with W.

template <class T>
Status deform_conv_compute(compute_context& ctx, const node& nd) {
  const tensor& x = ctx.input(0);
  const tensor& w = ctx.input(1);
  const tensor& offset = ctx.input(2);
  EPSTACK_RETURN_IF_ERROR(expect_type<T>(x, "X"));
  EPSTACK_RETURN_IF_ERROR(expect_type<T>(w, "W"));
  EPSTACK_RETURN_IF_ERROR(expect_type<T>(offset, "offset"));
  if (x.rank() != 4 || w.rank() != 4) return invalid(say("X and W must be 4-D (2-D DeformConv), got ", dims_string(x.sizes()), " and ", dims_string(w.sizes())));
  const std::int64_t n = x.sizes()[0], c = x.sizes()[1], h = x.sizes()[2], wd = x.sizes()[3];
  const std::int64_t oc = w.sizes()[0], kh = w.sizes()[2], kw = w.sizes()[3];
  const std::int64_t group = attr_i(nd, "group", 1), og = attr_i(nd, "offset_group", 1);
  const dims_t ks = attr_ints(nd, "kernel_shape", {kh, kw});
  const dims_t st = attr_ints(nd, "strides", {1, 1}), dl = attr_ints(nd, "dilations", {1, 1}), pd = attr_ints(nd, "pads", {0, 0, 0, 0});
  if (group < 1 || og < 1 || c % group != 0 || oc % group != 0 || c % og != 0 || w.sizes()[1] != c / group)
    return invalid(say("attributes 'group' (", group, ") and 'offset_group' (", og, ") do not fit C = ", c, " and W ", dims_string(w.sizes())));
  if (ks.size() != 2 || ks[0] != kh || ks[1] != kw || st.size() != 2 || dl.size() != 2 || pd.size() != 4 || st[0] < 1 ||
      st[1] < 1 || dl[0] < 1 || dl[1] < 1)
    return invalid("attributes 'kernel_shape', 'strides', 'dilations', 'pads' do not describe a 2-D convolution with W");
  const std::int64_t oh = (h + pd[0] + pd[2] - ((kh - 1) * dl[0] + 1)) / st[0] + 1;
  const std::int64_t ow = (wd + pd[1] + pd[3] - ((kw - 1) * dl[1] + 1)) / st[1] + 1;
  if (oh <= 0 || ow <= 0) return invalid("the kernel is larger than the padded input");
  const dims_t off_dims{n, og * 2 * kh * kw, oh, ow};
  if (to_dims(offset.sizes()) != off_dims) return invalid(say("offset must be ", dims_string(off_dims), ", got ", dims_string(offset.sizes())));
  const T* pb = nullptr;
  const T* pm = nullptr;
  if (ctx.has_input(3)) {
    EPSTACK_RETURN_IF_ERROR(expect_type<T>(ctx.input(3), "B"));
    if (ctx.input(3).element_count() != static_cast<std::size_t>(oc)) return invalid(say("B must have ", oc, " elements"));
    pb = ctx.input(3).typed<T>();
  }
  if (ctx.has_input(4)) {
    EPSTACK_RETURN_IF_ERROR(expect_type<T>(ctx.input(4), "mask"));
    const dims_t mask_dims{n, og * kh * kw, oh, ow};
    if (to_dims(ctx.input(4).sizes()) != mask_dims) return invalid(say("mask must be ", dims_string(mask_dims)));
    pm = ctx.input(4).typed<T>();
  }
  tensor& y = ctx.allocate_output(0, x.type(), dims_t{n, oc, oh, ow});
  const T* px = x.typed<T>();
  const T* pw = w.typed<T>();
  const T* po = offset.typed<T>();
  T* py = y.typed<T>();
  const std::int64_t cols = oh * ow, taps = kh * kw, cpg = c / group, ocpg = oc / group, cpo = c / og;
  const auto sample = [&](const T* plane, double yy, double xx) -> double {
    if (yy <= -1 || yy >= static_cast<double>(h) || xx <= -1 || xx >= static_cast<double>(wd)) return 0;
    const auto y0 = static_cast<std::int64_t>(std::floor(yy)), x0 = static_cast<std::int64_t>(std::floor(xx));
    const double fy = yy - static_cast<double>(y0), fx = xx - static_cast<double>(x0);
    const auto at = [&](std::int64_t r, std::int64_t q) -> double {
      return r < 0 || r >= h || q < 0 || q >= wd ? 0.0 : dbl(plane[r * wd + q]);
    };
    return (1 - fy) * ((1 - fx) * at(y0, x0) + fx * at(y0, x0 + 1)) + fy * ((1 - fx) * at(y0 + 1, x0) + fx * at(y0 + 1, x0 + 1));
  };
  parallel_items(ctx, static_cast<std::size_t>(n * group), static_cast<std::size_t>(cpg * taps * cols * (4 + ocpg)), [&](std::size_t b, std::size_t e) {
    std::vector<double> col(static_cast<std::size_t>(cpg * taps * cols));
    for (std::size_t item = b; item < e; ++item) {
      const std::int64_t bn = static_cast<std::int64_t>(item) / group, g = static_cast<std::int64_t>(item) % group;
      for (std::int64_t ci = 0; ci < cpg; ++ci) {
        const std::int64_t ch = g * cpg + ci, ogi = ch / cpo;
        const T* plane = px + (bn * c + ch) * h * wd;
        for (std::int64_t t = 0; t < taps; ++t) {
          const std::int64_t ky = t / kw, kx = t % kw;
          const T* oy = po + ((bn * og + ogi) * 2 * taps + 2 * t) * cols;
          const T* ox = oy + cols;
          const T* mk = pm != nullptr ? pm + ((bn * og + ogi) * taps + t) * cols : nullptr;
          double* dst = col.data() + (ci * taps + t) * cols;
          for (std::int64_t p = 0; p < cols; ++p) {
            const std::int64_t r = p / ow, q = p % ow;
            const double yy = static_cast<double>(r * st[0] - pd[0] + ky * dl[0]) + dbl(oy[p]);
            const double xx = static_cast<double>(q * st[1] - pd[1] + kx * dl[1]) + dbl(ox[p]);
            dst[p] = sample(plane, yy, xx) * (mk != nullptr ? dbl(mk[p]) : 1.0);
          }
        }
      }
      for (std::int64_t o = 0; o < ocpg; ++o) {
        const std::int64_t oo = g * ocpg + o;
        const T* wr = pw + oo * cpg * taps;
        T* yr = py + (bn * oc + oo) * cols;
        for (std::int64_t p = 0; p < cols; ++p) {
          double acc = pb != nullptr ? dbl(pb[oo]) : 0.0;
          for (std::int64_t k = 0; k < cpg * taps; ++k) acc += dbl(wr[k]) * col[static_cast<std::size_t>(k * cols + p)];
          yr[p] = static_cast<T>(acc);
        }
      }
    }
  });
  return {};
}

}  // namespace
}  // namespace impl

// ---------------------------------------------------------------------------------------------------------------
// The kernel types.

namespace ops {
using namespace impl;

#define EPSTACK_NORM_FLOATS float, double, ::epstack::float16, ::epstack::bfloat16

bool group_normalization::supports(const graph& g, node_id n) {
  return type_in<EPSTACK_NORM_FLOATS>(in_type(g, n, 0)) && has_attr(g.node(n), "num_groups");
}
Result<compute_function> group_normalization::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (!has_attr(nd, "num_groups")) return invalid("the attribute 'num_groups' is required");
  const std::int64_t groups = attr_i(nd, "num_groups", 0);
  const float eps = attr_f(nd, "epsilon", 1e-5f);
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_NORM_FLOATS>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("GroupNormalization", [groups, eps](compute_context& ctx) { return group_norm_compute<T>(ctx, groups, eps); });
  });
  return r;
}

// LpPool-1 took p as a float; from 2 on it is an int. Dilations from 18.
bool lp_pool::supports(const graph& g, node_id n) {
  return type_in<EPSTACK_NORM_FLOATS>(in_type(g, n, 0)) && has_attr(g.node(n), "kernel_shape");
}
Result<compute_function> lp_pool::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (!has_attr(nd, "kernel_shape")) return invalid("the attribute 'kernel_shape' is required");
  const double p = nd.since_version < 2 ? static_cast<double>(attr_f(nd, "p", 2.0f)) : static_cast<double>(attr_i(nd, "p", 2));
  if (!(p > 0)) return invalid(say("attribute 'p' is ", p, "; it must be positive"));
  const bool dilations = nd.since_version >= 18;
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_NORM_FLOATS>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("LpPool", [nd, p, dilations](compute_context& ctx) { return lp_pool_compute<T>(ctx, nd, p, dilations); });
  });
  return r;
}

#define EPSTACK_COL2IM_TYPES float, double, std::int32_t, std::int64_t, ::epstack::float16, ::epstack::bfloat16
bool col2im::supports(const graph& g, node_id n) { return type_in<EPSTACK_COL2IM_TYPES>(in_type(g, n, 0)); }
Result<compute_function> col2im::compile(const graph& g, node_id n) {
  const node nd = g.node(n);
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_COL2IM_TYPES>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("Col2Im", [nd](compute_context& ctx) { return col2im_compute<T>(ctx, nd); });
  });
  return r;
}

bool center_crop_pad::supports(const graph& g, node_id n) {
  const auto e = in_type(g, n, 0);
  return e != element_type::string && element_size(e) != 0;
}
Result<compute_function> center_crop_pad::compile(const graph& g, node_id n) {
  const dims_t axes = attr_ints(g.node(n), "axes");
  return make_fn("CenterCropPad", [axes](compute_context& ctx) { return center_crop_pad_compute(ctx, axes); });
}

bool affine_grid::supports(const graph& g, node_id n) { return type_in<EPSTACK_NORM_FLOATS>(in_type(g, n, 0)); }
Result<compute_function> affine_grid::compile(const graph& g, node_id n) {
  const bool align = attr_i(g.node(n), "align_corners", 0) != 0;
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_NORM_FLOATS>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("AffineGrid", [align](compute_context& ctx) { return affine_grid_compute<T>(ctx, align); });
  });
  return r;
}

bool deform_conv::supports(const graph& g, node_id n) { return type_in<EPSTACK_NORM_FLOATS>(in_type(g, n, 0)) && in_rank(g, n, 0) != 5; }
Result<compute_function> deform_conv::compile(const graph& g, node_id n) {
  const node nd = g.node(n);
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_NORM_FLOATS>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("DeformConv", [nd](compute_context& ctx) { return deform_conv_compute<T>(ctx, nd); });
  });
  return r;
}

}  // namespace ops
}  // namespace epstack::cpu
