// Resize (nearest, linear and cubic; every coordinate transformation mode; opset 18-19's axes, keep_aspect_ratio_policy
// and antialias) and its forerunner Upsample (nearest).
#include "row_util.hpp"

#include <numeric>
#include <optional>
#include <utility>

namespace epstack::cpu {
namespace impl {
namespace {

using dims = std::vector<std::int64_t>;  // Upsample's name for dims_t

// ---------------------------------------------------------------------------------------------------------------
// Resize

enum class rz_mode { nearest, linear, cubic };
enum class rz_coord { half_pixel, half_pixel_symmetric, asymmetric, pytorch_half_pixel, tf_half_pixel_for_nn, align_corners, tf_crop_and_resize };
enum class rz_round { round_prefer_floor, round_prefer_ceil, floor, ceil, simple };
enum class rz_aspect { stretch, not_larger, not_smaller };

struct resize_config {
  int opset = 13;
  rz_mode mode = rz_mode::nearest;
  rz_coord coord = rz_coord::half_pixel;
  rz_round round = rz_round::round_prefer_floor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
  // Opset 18+: the axes that roi, scales and sizes refer to (all when absent), how sizes keep the aspect ratio, and
  // the widened (antialiasing) filter of linear and cubic downsampling.
  bool has_axes = false;
  std::vector<std::int64_t> axes;
  rz_aspect aspect = rz_aspect::stretch;
  bool antialias = false;
};

Result<resize_config> resize_config_of(const node& nd) {
  resize_config c;
  c.opset = opset_of(nd);
  const std::string mode = attr_s(nd, "mode", "nearest");
  if (mode == "nearest") c.mode = rz_mode::nearest;
  else if (mode == "linear") c.mode = rz_mode::linear;
  else if (mode == "cubic" && c.opset >= 11) c.mode = rz_mode::cubic;
  else return invalid(cat("unknown mode '", mode, "'"));
  if (c.opset < 11) {
    // Resize-10: x_original = x_resized / scale; nearest takes the floor when upsampling and the ceiling when
    // downsampling (ONNX Runtime's reading of the opset-10 operator, which predates the attributes).
    c.coord = rz_coord::asymmetric;
    c.round = rz_round::simple;
    return c;
  }
  const std::string coord = attr_s(nd, "coordinate_transformation_mode", "half_pixel");
  if (coord == "half_pixel") c.coord = rz_coord::half_pixel;
  else if (coord == "half_pixel_symmetric" && c.opset >= 19) c.coord = rz_coord::half_pixel_symmetric;
  else if (coord == "asymmetric") c.coord = rz_coord::asymmetric;
  else if (coord == "pytorch_half_pixel") c.coord = rz_coord::pytorch_half_pixel;
  else if (coord == "tf_half_pixel_for_nn") c.coord = rz_coord::tf_half_pixel_for_nn;
  else if (coord == "align_corners") c.coord = rz_coord::align_corners;
  else if (coord == "tf_crop_and_resize") c.coord = rz_coord::tf_crop_and_resize;
  else return invalid(cat("unknown coordinate_transformation_mode '", coord, "'"));
  const std::string nearest = attr_s(nd, "nearest_mode", "round_prefer_floor");
  if (nearest == "round_prefer_floor") c.round = rz_round::round_prefer_floor;
  else if (nearest == "round_prefer_ceil") c.round = rz_round::round_prefer_ceil;
  else if (nearest == "floor") c.round = rz_round::floor;
  else if (nearest == "ceil") c.round = rz_round::ceil;
  else return invalid(cat("unknown nearest_mode '", nearest, "'"));
  c.cubic_a = attr_f(nd, "cubic_coeff_a", -0.75f);
  c.exclude_outside = attr_i(nd, "exclude_outside", 0) != 0;
  c.extrapolation = attr_f(nd, "extrapolation_value", 0.0f);
  if (c.opset >= 18) {
    c.has_axes = has_attr(nd, "axes");
    c.axes = attr_ints(nd, "axes");
    const std::string aspect = attr_s(nd, "keep_aspect_ratio_policy", "stretch");
    if (aspect == "stretch") c.aspect = rz_aspect::stretch;
    else if (aspect == "not_larger") c.aspect = rz_aspect::not_larger;
    else if (aspect == "not_smaller") c.aspect = rz_aspect::not_smaller;
    else return invalid(cat("unknown keep_aspect_ratio_policy '", aspect, "'"));
    c.antialias = attr_i(nd, "antialias", 0) != 0;
  }
  return c;
}

Result<std::vector<double>> float_values(const tensor& t, std::string_view what) {
  std::vector<double> v(t.element_count());
  if (t.type() == element_type::float32) std::copy_n(t.typed<float>(), v.size(), v.begin());
  else if (t.type() == element_type::float64) std::copy_n(t.typed<double>(), v.size(), v.begin());
  else if (t.type() == element_type::float16)
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(t.typed<float16>()[i]);
  else return invalid(cat(what, " must be a float tensor, got ", std::string(to_string(t.type()))));
  return v;
}

/// One pass of separable interpolation along one axis: dst[o, j, i] = sum_t w[j,t] * src[o, idx[j,t], i].
template <class T>
void resize_pass(const compute_context& ctx, const T* src, T* dst, std::int64_t outer, std::int64_t in_len,
                 std::int64_t out_len, std::int64_t inner, std::int64_t taps, const std::int64_t* idx, const T* w) {
  parallel_items(ctx, static_cast<std::size_t>(outer * out_len), static_cast<std::size_t>(inner * taps),
                 [&](std::size_t i0, std::size_t i1) {
                   for (std::size_t it = i0; it < i1; ++it) {
                     const std::int64_t o = static_cast<std::int64_t>(it) / out_len, j = static_cast<std::int64_t>(it) % out_len;
                     T* d = dst + static_cast<std::int64_t>(it) * inner;
                     const T* s = src + o * in_len * inner;
                     const std::int64_t* ix = idx + j * taps;
                     const T* wj = w + j * taps;
                     if (inner == 1) {
                       T acc = wj[0] * s[ix[0]];
                       for (std::int64_t t = 1; t < taps; ++t) acc += wj[t] * s[ix[t]];
                       d[0] = acc;
                       continue;
                     }
                     {
                       const T* sr = s + ix[0] * inner;
                       const T wt = wj[0];
                       for (std::int64_t i = 0; i < inner; ++i) d[i] = wt * sr[i];
                     }
                     for (std::int64_t t = 1; t < taps; ++t) {
                       const T* sr = s + ix[t] * inner;
                       const T wt = wj[t];
                       for (std::int64_t i = 0; i < inner; ++i) d[i] += wt * sr[i];
                     }
                   }
                 });
}

/// Interpolation coefficients of one output coordinate along one axis: `n` taps starting at input index `start`
/// (before clamping to the axis) weighted by `w`.
struct taps_of {
  std::int64_t start = 0;
  std::vector<double> w;
};

/// The taps of x_original `xo` on an axis of `len` elements: the n input indices nearest to xo (the lower ones on
/// ties) in the edge-padded axis, weighted by the coefficients of the fractional part, as the ONNX reference computes
/// them. `aa_scale` < 1 widens the filter by 1 / aa_scale (antialiasing) and normalizes its weights.
taps_of interpolation_taps(double xo, std::int64_t len, rz_mode mode, double A, double aa_scale) {
  const double fl = std::floor(xo);
  const double ratio = xo == fl ? 1.0 : xo - fl;  // in (0, 1]: the pixel on the left of xo is preferred
  taps_of t;
  if (aa_scale < 1) {
    // The filter stretched by 1 / scale: taps i in [i0, 2 - i0) at distance (i - ratio) * scale.
    const double reach = mode == rz_mode::linear ? 1.0 : 2.0;
    const auto i0 = static_cast<std::int64_t>(std::floor(-reach / aa_scale) + 1);
    const std::int64_t n = 2 - 2 * i0;
    t.w.resize(static_cast<std::size_t>(n));
    double sum = 0;
    for (std::int64_t k = 0; k < n; ++k) {
      const double x = std::fabs(aa_scale * (static_cast<double>(i0 + k) - ratio));
      double v;
      if (mode == rz_mode::linear) v = std::clamp(1 - x, 0.0, 1.0);
      else if (x <= 1) v = ((A + 2) * x - (A + 3)) * x * x + 1;
      else if (x < 2) v = ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
      else v = 0;
      t.w[static_cast<std::size_t>(k)] = v;
      sum += v;
    }
    for (auto& v : t.w) v /= sum;
  } else if (mode == rz_mode::linear) {
    t.w = {1 - ratio, ratio};
  } else {
    const double r1 = ratio + 1, r2 = 1 - ratio, r3 = 2 - ratio;
    t.w = {((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A, ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1,
           ((A + 2) * r2 - (A + 3)) * r2 * r2 + 1, ((A * r3 - 5 * A) * r3 + 8 * A) * r3 - 4 * A};
  }
  const auto half = static_cast<double>(t.w.size() / 2);
  t.start = static_cast<std::int64_t>(std::clamp(std::ceil(xo) - half, -half, static_cast<double>(len) - half));
  return t;
}

template <class T>
Status resize_compute(compute_context& ctx, const resize_config& c) {
  const tensor& x = ctx.input(0);
  if (x.type() != element_type_of_v<T>) return invalid("unexpected element type of X");
  const std::size_t r = x.rank();
  const auto in = x.sizes();
  const bool crop = c.coord == rz_coord::tf_crop_and_resize;

  // The axes that roi, scales and sizes refer to (opset 18+), in their order; all of X's by default.
  std::vector<std::size_t> axes;
  if (c.has_axes) {
    std::vector<bool> seen(r, false);
    for (const std::int64_t a : c.axes) {
      const auto ax = normalize_axis(a, r);
      if (!ax) return invalid(cat("axes: axis ", str(a), " is out of range for X of rank ", str(static_cast<std::int64_t>(r))));
      if (seen[*ax]) return invalid(cat("axes: axis ", str(a), " is repeated"));
      seen[*ax] = true;
      axes.push_back(*ax);
    }
  } else {
    for (std::size_t d = 0; d < r; ++d) axes.push_back(d);
  }
  const std::size_t na = axes.size();
  std::vector<bool> resized(r, false);
  for (const std::size_t d : axes) resized[d] = true;
  // What a count mismatch of roi, scales or sizes is measured against.
  const auto expected_count = [&](std::size_t per) {
    return c.has_axes ? cat("expected ", per == 2 ? "2 * " : "", "the ", str(static_cast<std::int64_t>(na)), " axes = ",
                            str(static_cast<std::int64_t>(per * na)))
                      : cat("expected ", per == 2 ? "2 * rank = " : "rank = ", str(static_cast<std::int64_t>(per * r)));
  };

  // Inputs: opset 10 (X, scales); opset 11+ (X, roi, scales, sizes), exactly one of scales and sizes non-empty.
  const std::size_t scales_at = c.opset < 11 ? 1 : 2;
  const bool has_scales = ctx.has_input(scales_at) && ctx.input(scales_at).element_count() > 0;
  const bool has_sizes = c.opset >= 11 && ctx.has_input(3) && ctx.input(3).element_count() > 0;
  if (has_scales && has_sizes) return invalid("scales and sizes are both given; give only one");
  if (!has_scales && !has_sizes) return invalid(c.opset < 11 ? "scales is missing or empty" : "neither scales nor sizes is given");
  std::vector<double> roi_start(r, 0.0), roi_end(r, 1.0);
  if (crop) {
    if (!ctx.has_input(1)) return invalid("roi is required with coordinate_transformation_mode tf_crop_and_resize");
    EPSTACK_ASSIGN_OR_RETURN(const std::vector<double> roi, float_values(ctx.input(1), "roi"));
    if (roi.size() != 2 * na) return invalid(cat("roi has ", str(static_cast<std::int64_t>(roi.size())), " elements; ", expected_count(2)));
    for (std::size_t i = 0; i < na; ++i) roi_start[axes[i]] = roi[i], roi_end[axes[i]] = roi[i + na];
  }
  dims_t out = to_dims(in);
  std::vector<double> scale(r, 1.0), length(r);  // length: the "length_resized" (output_width) of the coordinate formulas
  for (std::size_t d = 0; d < r; ++d) length[d] = static_cast<double>(in[d]);
  if (has_scales) {
    const tensor& st = ctx.input(scales_at);
    if (st.type() != element_type::float32)
      return invalid(cat("scales must be a float tensor, got ", std::string(to_string(st.type()))));
    if (st.element_count() != na)
      return invalid(c.has_axes ? cat("scales has ", str(static_cast<std::int64_t>(st.element_count())), " elements; ", expected_count(1))
                                : cat("scales has ", str(static_cast<std::int64_t>(st.element_count())), " elements but X has rank ",
                                      str(static_cast<std::int64_t>(r))));
    const float* ps = st.typed<float>();
    for (std::size_t i = 0; i < na; ++i) {
      const std::size_t d = axes[i];
      const double s = ps[i];
      if (!(s > 0) || !std::isfinite(s)) return invalid(cat("scales[", str(static_cast<std::int64_t>(i)), "] must be positive and finite, got ", std::to_string(s)));
      const double span = crop ? roi_end[d] - roi_start[d] : 1.0;
      // As the reference implementation: the resized length is scale * length (not rounded) in the formulas.
      length[d] = static_cast<double>(in[d]) * span * s;
      scale[d] = s;
      const double o = std::floor(length[d]);
      if (o < 0) return invalid(cat("the output dimension ", str(static_cast<std::int64_t>(d)), " would be negative"));
      if (o > 9.2e18) return invalid(cat("the output dimension ", str(static_cast<std::int64_t>(d)), " would be too large"));
      out[d] = static_cast<std::int64_t>(o);
    }
  } else {
    const tensor& zt = ctx.input(3);
    if (zt.type() != element_type::int64) return invalid(cat("sizes must be an int64 tensor, got ", std::string(to_string(zt.type()))));
    if (zt.element_count() != na)
      return invalid(c.has_axes ? cat("sizes has ", str(static_cast<std::int64_t>(zt.element_count())), " elements; ", expected_count(1))
                                : cat("sizes has ", str(static_cast<std::int64_t>(zt.element_count())), " elements but X has rank ",
                                      str(static_cast<std::int64_t>(r))));
    const std::int64_t* pz = zt.typed<std::int64_t>();
    for (std::size_t i = 0; i < na; ++i)
      if (pz[i] < 0) return invalid(cat("sizes[", str(static_cast<std::int64_t>(i)), "] is negative: ", str(pz[i])));
    if (c.aspect == rz_aspect::stretch) {
      for (std::size_t i = 0; i < na; ++i) {
        const std::size_t d = axes[i];
        out[d] = pz[i];
        length[d] = static_cast<double>(pz[i]);
        scale[d] = in[d] > 0 ? static_cast<double>(pz[i]) / static_cast<double>(in[d]) : 1.0;
      }
    } else {
      // One scale for every axis given, the smallest (not_larger) or largest (not_smaller) of sizes / input; each
      // such axis becomes round_half_up(scale * input). The coordinate formulas use that scale (as the reference).
      // Empty input axes have no ratio and stay empty.
      std::optional<double> s;
      for (std::size_t i = 0; i < na; ++i) {
        if (in[axes[i]] == 0) continue;
        const double q = static_cast<double>(pz[i]) / static_cast<double>(in[axes[i]]);
        if (!s) s = q;
        else s = c.aspect == rz_aspect::not_larger ? std::min(*s, q) : std::max(*s, q);
      }
      const double k = s.value_or(1.0);  // 0 (a size of 0) empties every axis given
      for (const std::size_t d : axes) {
        length[d] = k * static_cast<double>(in[d]);
        if (length[d] > 9.2e18) return invalid(cat("the output dimension ", str(static_cast<std::int64_t>(d)), " would be too large"));
        out[d] = static_cast<std::int64_t>(std::floor(length[d] + 0.5));
        scale[d] = k;
      }
    }
  }
  for (std::size_t d = 0; d < r; ++d)
    if (in[d] == 0 && out[d] > 0)
      return invalid(cat("dimension ", str(static_cast<std::int64_t>(d)), " of X is empty and cannot be resized to ", str(out[d])));
  tensor& y = ctx.allocate_output(0, x.type(), out);
  if (y.element_count() == 0) return {};
  const T* px = x.typed<T>();
  T* py = y.typed<T>();

  const auto original = [&](std::size_t d, std::int64_t j) -> double {
    const double xr = static_cast<double>(j), len = static_cast<double>(in[d]), s = scale[d], lr = length[d];
    switch (c.coord) {
      case rz_coord::half_pixel: return (xr + 0.5) / s - 0.5;
      case rz_coord::half_pixel_symmetric: {
        // The centre of the input maps to the centre of the output (differs from half_pixel when the output length
        // was rounded down from scale * length).
        const double adjustment = static_cast<double>(out[d]) / lr;
        return len / 2 * (1 - adjustment) + (xr + 0.5) / s - 0.5;
      }
      case rz_coord::asymmetric: return xr / s;
      case rz_coord::pytorch_half_pixel: return lr > 1 ? (xr + 0.5) / s - 0.5 : 0.0;
      case rz_coord::tf_half_pixel_for_nn: return (xr + 0.5) / s;
      case rz_coord::align_corners: return lr == 1 ? 0.0 : xr * (len - 1) / (lr - 1);
      case rz_coord::tf_crop_and_resize: {
        const double start = roi_start[d], end = roi_end[d];
        return lr > 1 ? start * (len - 1) + xr * (end - start) * (len - 1) / (lr - 1) : 0.5 * (start + end) * (len - 1);
      }
    }
    return 0.0;
  };
  const auto outside = [&](std::size_t d, double xo) {
    return crop && (xo < 0 || xo > static_cast<double>(in[d] - 1));
  };

  if (c.mode == rz_mode::nearest) {
    std::vector<dims_t> tab(r);
    for (std::size_t d = 0; d < r; ++d) {
      tab[d].resize(static_cast<std::size_t>(out[d]));
      if (!resized[d]) {  // an axis left out of `axes`: kept as it is
        std::iota(tab[d].begin(), tab[d].end(), std::int64_t{0});
        continue;
      }
      const double hi = static_cast<double>(in[d] - 1);
      for (std::int64_t j = 0; j < out[d]; ++j) {
        const double xo = original(d, j);
        if (outside(d, xo)) {
          tab[d][static_cast<std::size_t>(j)] = -1;
          continue;
        }
        const double fl = std::floor(xo), frac = xo - fl;
        double v = fl;
        switch (c.round) {
          case rz_round::round_prefer_floor: v = frac <= 0.5 ? fl : fl + 1; break;
          case rz_round::round_prefer_ceil: v = frac < 0.5 ? fl : fl + 1; break;
          case rz_round::floor: v = fl; break;
          case rz_round::ceil: v = std::ceil(xo); break;
          case rz_round::simple: v = scale[d] < 1 ? std::ceil(xo) : fl; break;
        }
        tab[d][static_cast<std::size_t>(j)] = static_cast<std::int64_t>(std::clamp(v, 0.0, hi));
      }
    }
    table_gather<T>(ctx, px, in, out, tab, from_double<T>(c.extrapolation), py);
    return {};
  }

  if constexpr (std::is_floating_point_v<T>) {
    // Linear and cubic: separable passes, one per resized axis, each output coordinate a weighted sum of `taps`
    // input elements (2 or 4; more when antialiasing widens the filter).
    struct axis_plan {
      std::size_t d;
      std::int64_t taps = 0;
      std::vector<std::int64_t> idx;
      std::vector<T> w;
      std::vector<bool> out_of_range;
      bool any_outside = false;
    };
    std::vector<axis_plan> plans;
    for (std::size_t d = 0; d < r; ++d) {
      if (!resized[d]) continue;
      // Antialiasing applies when downsampling: the filter widened by 1 / scale.
      const double aa = c.antialias ? std::min(scale[d], 1.0) : 1.0;
      axis_plan p{d, 0, {}, {}, std::vector<bool>(static_cast<std::size_t>(out[d])), false};
      bool identity = out[d] == in[d];
      for (std::int64_t j = 0; j < out[d]; ++j) {
        const double xo = original(d, j);
        taps_of t = interpolation_taps(xo, in[d], c.mode, c.cubic_a, aa);
        const auto n = static_cast<std::int64_t>(t.w.size());
        if (j == 0) {
          p.taps = n;
          p.idx.resize(static_cast<std::size_t>(out[d] * n));
          p.w.resize(static_cast<std::size_t>(out[d] * n));
        }
        if (c.exclude_outside) {
          double sum = 0;
          for (std::int64_t k = 0; k < n; ++k) {
            const std::int64_t i = t.start + k;
            if (i < 0 || i >= in[d]) t.w[static_cast<std::size_t>(k)] = 0;
            sum += t.w[static_cast<std::size_t>(k)];
          }
          if (sum != 0)
            for (auto& v : t.w) v /= sum;
        }
        double on_j = 0;
        for (std::int64_t k = 0; k < n; ++k) {
          const std::int64_t i = std::clamp<std::int64_t>(t.start + k, 0, in[d] - 1);
          const double wk = t.w[static_cast<std::size_t>(k)];
          const auto at = static_cast<std::size_t>(j * n + k);
          p.idx[at] = i;
          p.w[at] = static_cast<T>(wk);
          if (i == j) on_j += wk;
          else if (wk != 0) identity = false;
        }
        if (on_j != 1.0) identity = false;
        if (outside(d, xo)) {
          p.out_of_range[static_cast<std::size_t>(j)] = true;
          p.any_outside = true;
          identity = false;
        }
      }
      if (!identity) plans.push_back(std::move(p));
    }
    if (plans.empty()) {
      std::copy_n(px, x.element_count(), py);
      return {};
    }
    // Shrinking axes first keeps the intermediate tensors small.
    std::sort(plans.begin(), plans.end(), [&](const axis_plan& a, const axis_plan& b) {
      const double ra = static_cast<double>(out[a.d]) * static_cast<double>(in[b.d]);
      const double rb = static_cast<double>(out[b.d]) * static_cast<double>(in[a.d]);
      return ra < rb || (ra == rb && a.d < b.d);
    });
    dims_t cur = to_dims(in);
    std::size_t biggest = 0;
    {
      dims_t s = cur;
      for (std::size_t i = 0; i + 1 < plans.size(); ++i) {
        s[plans[i].d] = out[plans[i].d];
        biggest = std::max(biggest, static_cast<std::size_t>(product(s)));
      }
    }
    tensor buf[2];
    if (plans.size() > 1) buf[0] = ctx.scratch(x.type(), biggest);
    if (plans.size() > 2) buf[1] = ctx.scratch(x.type(), biggest);
    const T* src = px;
    for (std::size_t i = 0; i < plans.size(); ++i) {
      const auto& p = plans[i];
      T* dst = i + 1 == plans.size() ? py : buf[i % 2].typed<T>();
      const std::int64_t outer = product(cur, 0, p.d), inner = product(cur, p.d + 1);
      resize_pass<T>(ctx, src, dst, outer, cur[p.d], out[p.d], inner, p.taps, p.idx.data(), p.w.data());
      cur[p.d] = out[p.d];
      src = dst;
    }
    // tf_crop_and_resize: every output whose coordinate on some axis falls outside the input is the extrapolation value.
    const T extra = static_cast<T>(c.extrapolation);
    for (const auto& p : plans) {
      if (!p.any_outside) continue;
      const std::int64_t outer = product(out, 0, p.d), inner = product(out, p.d + 1);
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t j = 0; j < out[p.d]; ++j)
          if (p.out_of_range[static_cast<std::size_t>(j)]) std::fill_n(py + (o * out[p.d] + j) * inner, inner, extra);
    }
    return {};
  } else {
    return invalid("linear and cubic modes need a float or double X");
  }
}

}  // namespace
}  // namespace impl

// ---------------------------------------------------------------------------------------------------------------
// The kernel types.

namespace ops {
using namespace impl;

bool resize::supports(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const auto t = in_type(g, n, 0);
  const std::string mode = attr_s(nd, "mode", "nearest");
  const auto scales = in_type(g, n, opset_of(nd) < 11 ? 1 : 2);
  if (scales != element_type::undefined && scales != element_type::float32) return false;
  if (mode == "nearest") return type_in<EPSTACK_ALL_POD_TYPES>(t);
  return type_in<float, double>(t);
}
Result<compute_function> resize::compile(const graph& g, node_id n) {
  EPSTACK_ASSIGN_OR_RETURN(const resize_config c, resize_config_of(g.node(n)));
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_ALL_POD_TYPES>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("Resize", [=](compute_context& ctx) { return resize_compute<T>(ctx, c); });
  });
  return r;
}

// ---- Upsample (opsets 7-9), nearest: out[i] = in[floor(i / scale)] per dim ----
bool upsample::supports(const graph& g, node_id n) {
  return attr_s(g.node(n), "mode", "nearest") == "nearest" && in_type(g, n, 0) != element_type::string;
}
Result<compute_function> upsample::compile(const graph& g, node_id n) {
  const auto scales_attr = attr_floats(g.node(n), "scales");
  return make_fn("Upsample", [scales_attr](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    std::vector<float> scales = scales_attr;
    if (ctx.has_input(1)) {
      const tensor& s = ctx.input(1);
      if (s.type() != element_type::float32) return op_error("Upsample", "scales must be float");
      scales.assign(s.typed<float>(), s.typed<float>() + s.element_count());
    }
    if (scales.size() != x.rank()) return op_error("Upsample", "one scale per dimension is needed");
    dims out(x.rank());
    for (std::size_t d = 0; d < x.rank(); ++d) out[d] = static_cast<std::int64_t>(std::floor(static_cast<double>(x.sizes()[d]) * scales[d]));
    tensor& y = ctx.allocate_output(0, x.type(), out);
    const std::size_t es = element_size(x.type());
    std::vector<std::int64_t> in_st(x.rank(), 1);
    for (std::size_t d = x.rank(); d-- > 1;) in_st[d - 1] = in_st[d] * x.sizes()[d];
    std::vector<std::int64_t> at(x.rank(), 0);
    for (std::size_t i = 0; i < y.element_count(); ++i) {
      std::int64_t src = 0;
      for (std::size_t d = 0; d < x.rank(); ++d)
        src += std::min(x.sizes()[d] - 1, static_cast<std::int64_t>(std::floor(static_cast<double>(at[d]) / scales[d]))) * in_st[d];
      std::memcpy(y.mutable_data() + i * es, x.data() + static_cast<std::size_t>(src) * es, es);
      for (std::size_t d = x.rank(); d-- > 0;) {
        if (++at[d] < out[d]) break;
        at[d] = 0;
      }
    }
    return {};
  });
}

}  // namespace ops
}  // namespace epstack::cpu
