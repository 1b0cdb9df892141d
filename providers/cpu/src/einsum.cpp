// Miscellaneous kernels: TopK, NonZero, CumSum, Resize, Einsum, GatherElements, Tile, Pad. Each works on row-major
// data with per-dimension index arithmetic; rows (or items) are split across the intra-op threads. Einsum maps
// two-operand contractions onto batched matrix products (gemm_block / gemm_parallel for float) and evaluates every
// other equation with a general loop over all index combinations.
#include "gemm.hpp"
#include "kernel_util.hpp"

#include <algorithm>
#include <array>
#include <numeric>

namespace epstack::cpu {
namespace impl {
namespace {

using dims_t = std::vector<std::int64_t>;

// ---------------------------------------------------------------------------------------------------------------
// Shared helpers

Status invalid(std::string msg) { return Status(errc::invalid_argument, std::move(msg)); }
std::string str(std::int64_t v) { return std::to_string(v); }
dims_t to_dims(std::span<const std::int64_t> s) { return dims_t(s.begin(), s.end()); }

/// The node's resolved opset version; 0 (unknown) is read as the newest.
int opset_of(const node& nd) { return nd.since_version == 0 ? 1 << 20 : nd.since_version; }

template <class... Ts>
bool type_in(element_type e) {
  return ((element_type_of_v<Ts> == e) || ...);
}

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;
/// The type values of T are compared and summed in: float for the 16-bit floats, T otherwise.
template <class T>
using arith_t = std::conditional_t<is_half_v<T>, float, T>;
template <class T>
arith_t<T> arith(T v) {
  if constexpr (is_half_v<T>) return static_cast<float>(v);
  else return v;
}
template <class T>
bool is_nonzero(const T& v) {
  if constexpr (is_half_v<T>) return static_cast<float>(v) != 0.0f;
  else if constexpr (std::is_same_v<T, bool>) return v;
  else return v != T(0);
}
/// a + b, wrapping on overflow for signed integers (as two's complement hardware does) instead of undefined behaviour.
template <class T>
T add_wrap(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return static_cast<T>(a + b);
  }
}
/// A double converted to T, saturating for integers (NaN becomes 0).
template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, bool>) return v != 0.0;
  else if constexpr (is_half_v<T>) return T(static_cast<float>(v));
  else if constexpr (std::is_integral_v<T>) {
    if (std::isnan(v)) return T(0);
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    return static_cast<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

/// Row-major element strides of `dims`.
dims_t strides_of(std::span<const std::int64_t> dims) {
  dims_t s(dims.size(), 1);
  for (std::size_t d = dims.size(); d-- > 1;) s[d - 1] = s[d] * dims[d];
  return s;
}

/// How many pieces to split n items of `cost` element operations each into (1: run serially).
std::size_t piece_count(const compute_context& ctx, std::size_t n, std::size_t cost) {
  if (ctx.thread_count() == 1 || n < 2 || n * std::max<std::size_t>(cost, 1) < 32768) return 1;
  return std::min<std::size_t>(n, static_cast<std::size_t>(ctx.thread_count()) * 4);
}
/// f(piece, begin, end) over `pieces` contiguous ranges covering [0, n), on the intra-op threads. Lets a loop own
/// per-piece buffers allocated before it starts.
template <class F>
void for_pieces(const compute_context& ctx, std::size_t n, std::size_t pieces, F&& f) {
  if (pieces <= 1) {
    f(std::size_t{0}, std::size_t{0}, n);
    return;
  }
  ctx.parallel_for(pieces, 1, [&](std::size_t p0, std::size_t p1) {
    for (std::size_t p = p0; p < p1; ++p) f(p, n * p / pieces, n * (p + 1) / pieces);
  });
}

/// out[i_0..i_r-1] = src[tab_0[i_0], ..., tab_r-1[i_r-1]], or `fill` where any table entry is -1. Resize (nearest)
/// and Pad are instances of it.
template <class T>
void table_gather(const compute_context& ctx, const T* src, std::span<const std::int64_t> in_dims,
                  std::span<const std::int64_t> out_dims, const std::vector<dims_t>& tab, const T& fill, T* dst) {
  const std::size_t r = out_dims.size();
  const std::int64_t count = product(out_dims);
  if (count == 0) return;
  if (r == 0) {
    dst[0] = src[0];
    return;
  }
  const dims_t istride = strides_of(in_dims);
  const std::int64_t L = out_dims[r - 1];
  const std::int64_t rows = count / L;
  auto body = [&](std::size_t r0, std::size_t r1) {
    const std::int64_t* last = tab[r - 1].data();
    for (std::size_t row = r0; row < r1; ++row) {
      std::int64_t rem = static_cast<std::int64_t>(row), base = 0;
      bool outside = false;
      for (std::size_t d = r - 1; d-- > 0;) {
        const std::int64_t i = rem % out_dims[d];
        rem /= out_dims[d];
        const std::int64_t t = tab[d][static_cast<std::size_t>(i)];
        if (t < 0) outside = true;
        else base += t * istride[d];
      }
      T* o = dst + static_cast<std::int64_t>(row) * L;
      if (outside) {
        std::fill_n(o, L, fill);
        continue;
      }
      const T* s = src + base;
      for (std::int64_t j = 0; j < L; ++j) o[j] = last[j] < 0 ? fill : s[last[j]];
    }
  };
  if constexpr (std::is_same_v<T, std::string>) body(0, static_cast<std::size_t>(rows));  // copies allocate: serial
  else parallel_items(ctx, static_cast<std::size_t>(rows), static_cast<std::size_t>(L), body);
}

// ---------------------------------------------------------------------------------------------------------------
// TopK

template <class T>
Status top_k_compute(compute_context& ctx, std::int64_t k_attr, bool k_input, std::int64_t axis_attr, bool largest,
                     bool sorted) {
  using K = arith_t<T>;
  const tensor& x = ctx.input(0);
  if (x.type() != element_type_of_v<T>)
    return invalid(cat("X has element type ", std::string(to_string(x.type())), ", expected ",
                       std::string(to_string(element_type_of_v<T>))));
  std::int64_t k = k_attr;
  if (k_input) {
    if (!ctx.has_input(1)) return invalid("the K input is missing");
    const tensor& kt = ctx.input(1);
    if (kt.type() != element_type::int64)
      return invalid(cat("K must be an int64 tensor, got ", std::string(to_string(kt.type()))));
    EPSTACK_ASSIGN_OR_RETURN(k, scalar_int(kt, "K"));
  }
  if (x.rank() == 0) return invalid("X must have rank >= 1, got a scalar");
  const auto ax = normalize_axis(axis_attr, x.rank());
  if (!ax) return bad_axis(axis_attr, x.rank());
  const auto dims = x.sizes();
  const std::int64_t n = dims[*ax];
  if (k < 0) return invalid(cat("K must be non-negative, got ", str(k)));
  if (k > n)
    return invalid(cat("K (", str(k), ") is larger than dimension ", str(static_cast<std::int64_t>(*ax)), " of X (",
                       str(n), ")"));
  dims_t out = to_dims(dims);
  out[*ax] = k;
  tensor& vals = ctx.allocate_output(0, x.type(), out);
  std::int64_t* pi = ctx.output_count() > 1 ? ctx.allocate_output(1, element_type::int64, out).typed<std::int64_t>() : nullptr;
  T* pv = vals.typed<T>();
  const T* px = x.typed<T>();
  const std::int64_t outer = product(dims, 0, *ax), inner = product(dims, *ax + 1);
  const std::int64_t rows = outer * inner;
  if (rows == 0 || k == 0) return {};

  // NaN ranks above every number (numpy's sort order), so the comparison stays a strict weak order.
  const auto greater = [](K a, K b) {
    if constexpr (std::is_floating_point_v<K>) {
      if (std::isnan(a)) return !std::isnan(b);
      if (std::isnan(b)) return false;
    }
    return a > b;
  };
  const auto pieces = piece_count(ctx, static_cast<std::size_t>(rows), static_cast<std::size_t>(n) * 4);
  tensor scratch = ctx.scratch(element_type::int64, pieces * static_cast<std::size_t>(n));
  std::int64_t* order_all = scratch.typed<std::int64_t>();
  for_pieces(ctx, static_cast<std::size_t>(rows), pieces, [&](std::size_t p, std::size_t r0, std::size_t r1) {
    std::int64_t* order = order_all + static_cast<std::int64_t>(p) * n;
    for (std::size_t r = r0; r < r1; ++r) {
      const std::int64_t o = static_cast<std::int64_t>(r) / inner, in = static_cast<std::int64_t>(r) % inner;
      const T* row = px + o * n * inner + in;
      std::iota(order, order + n, std::int64_t{0});
      // "a comes before b": the larger (smaller) value, the lower index among equal values.
      const auto before = [&](std::int64_t a, std::int64_t b) {
        const K va = arith(row[a * inner]), vb = arith(row[b * inner]);
        if (largest ? greater(va, vb) : greater(vb, va)) return true;
        if (largest ? greater(vb, va) : greater(va, vb)) return false;
        return a < b;
      };
      if (k < n) std::nth_element(order, order + k, order + n, before);
      if (sorted) std::sort(order, order + k, before);
      else std::sort(order, order + k);  // unspecified order: report them by index
      for (std::int64_t j = 0; j < k; ++j) {
        const std::int64_t dst = (o * k + j) * inner + in;
        pv[dst] = row[order[j] * inner];
        if (pi != nullptr) pi[dst] = order[j];
      }
    }
  });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// NonZero

template <class T>
Status non_zero_compute(compute_context& ctx) {
  const tensor& x = ctx.input(0);
  if (x.type() != element_type_of_v<T>) return invalid("unexpected element type of X");
  const std::size_t n = x.element_count();
  const std::size_t rank = x.rank();
  const T* px = x.typed<T>();
  const std::size_t pieces = ctx.thread_count() > 1 && n >= 65536
                                 ? std::min<std::size_t>(static_cast<std::size_t>(ctx.thread_count()) * 4, n / 16384)
                                 : 1;
  std::vector<std::size_t> counts(pieces + 1, 0);
  for_pieces(ctx, n, pieces, [&](std::size_t p, std::size_t b, std::size_t e) {
    std::size_t c = 0;
    for (std::size_t i = b; i < e; ++i) c += is_nonzero(px[i]) ? 1 : 0;
    counts[p + 1] = c;
  });
  std::partial_sum(counts.begin(), counts.end(), counts.begin());
  const std::size_t nnz = counts[pieces];
  // A scalar gives shape [0, nnz] (unlike numpy's [1, nnz]), as the ONNX specification says.
  const std::int64_t out[] = {static_cast<std::int64_t>(rank), static_cast<std::int64_t>(nnz)};
  std::int64_t* po = ctx.allocate_output(0, element_type::int64, out).typed<std::int64_t>();
  if (rank == 0 || nnz == 0) return {};
  const auto dims = x.sizes();
  std::vector<std::int64_t> coords(pieces * rank);
  for_pieces(ctx, n, pieces, [&](std::size_t p, std::size_t b, std::size_t e) {
    std::int64_t* c = coords.data() + p * rank;
    std::size_t rem = b;
    for (std::size_t d = rank; d-- > 0;) {
      c[d] = static_cast<std::int64_t>(rem % static_cast<std::size_t>(dims[d]));
      rem /= static_cast<std::size_t>(dims[d]);
    }
    std::size_t w = counts[p];
    for (std::size_t i = b; i < e; ++i) {
      if (is_nonzero(px[i])) {
        for (std::size_t d = 0; d < rank; ++d) po[d * nnz + w] = c[d];
        ++w;
      }
      for (std::size_t d = rank; d-- > 0;) {
        if (++c[d] < dims[d]) break;
        c[d] = 0;
      }
    }
  });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// CumSum

template <class T>
Status cum_sum_compute(compute_context& ctx, bool exclusive, bool reverse) {
  const tensor& x = ctx.input(0);
  if (x.type() != element_type_of_v<T>) return invalid("unexpected element type of x");
  EPSTACK_ASSIGN_OR_RETURN(const std::int64_t axis, scalar_int(ctx.input(1), "axis"));
  const auto ax = normalize_axis(axis, x.rank());
  if (!ax) return bad_axis(axis, x.rank());
  const auto dims = x.sizes();
  tensor& y = ctx.allocate_output(0, x.type(), dims);
  if (x.element_count() == 0) return {};
  const std::int64_t outer = product(dims, 0, *ax), n = dims[*ax], inner = product(dims, *ax + 1);
  const T* px = x.typed<T>();
  T* py = y.typed<T>();
  // Items: (outer index, block of the inner dims); each runs down the axis with the inner block as a vector.
  constexpr std::int64_t blk = 1024;
  const std::int64_t nblk = (inner + blk - 1) / blk;
  parallel_items(ctx, static_cast<std::size_t>(outer * nblk), static_cast<std::size_t>(n * std::min(inner, blk)),
                 [&](std::size_t i0, std::size_t i1) {
                   for (std::size_t item = i0; item < i1; ++item) {
                     const std::int64_t o = static_cast<std::int64_t>(item) / nblk, b = static_cast<std::int64_t>(item) % nblk;
                     const std::int64_t j0 = b * blk, j1 = std::min(inner, j0 + blk);
                     const T* xs = px + o * n * inner;
                     T* ys = py + o * n * inner;
                     for (std::int64_t s = 0; s < n; ++s) {
                       const std::int64_t i = reverse ? n - 1 - s : s, prev = reverse ? i + 1 : i - 1;
                       T* yr = ys + i * inner;
                       if (s == 0) {
                         const T* xr = xs + i * inner;
                         for (std::int64_t j = j0; j < j1; ++j) yr[j] = exclusive ? T(0) : xr[j];
                       } else {
                         const T* yp = ys + prev * inner;
                         const T* xr = xs + (exclusive ? prev : i) * inner;
                         for (std::int64_t j = j0; j < j1; ++j) yr[j] = add_wrap(yp[j], xr[j]);
                       }
                     }
                   }
                 });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// Resize

enum class rz_mode { nearest, linear, cubic };
enum class rz_coord { half_pixel, asymmetric, pytorch_half_pixel, tf_half_pixel_for_nn, align_corners, tf_crop_and_resize };
enum class rz_round { round_prefer_floor, round_prefer_ceil, floor, ceil, simple };

struct resize_config {
  int opset = 13;
  rz_mode mode = rz_mode::nearest;
  rz_coord coord = rz_coord::half_pixel;
  rz_round round = rz_round::round_prefer_floor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
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

template <class T>
Status resize_compute(compute_context& ctx, const resize_config& c) {
  const tensor& x = ctx.input(0);
  if (x.type() != element_type_of_v<T>) return invalid("unexpected element type of X");
  const std::size_t r = x.rank();
  const auto in = x.sizes();
  const bool crop = c.coord == rz_coord::tf_crop_and_resize;

  // Inputs: opset 10 (X, scales); opset 11+ (X, roi, scales, sizes), exactly one of scales and sizes non-empty.
  const std::size_t scales_at = c.opset < 11 ? 1 : 2;
  const bool has_scales = ctx.has_input(scales_at) && ctx.input(scales_at).element_count() > 0;
  const bool has_sizes = c.opset >= 11 && ctx.has_input(3) && ctx.input(3).element_count() > 0;
  if (has_scales && has_sizes) return invalid("scales and sizes are both given; give only one");
  if (!has_scales && !has_sizes) return invalid(c.opset < 11 ? "scales is missing or empty" : "neither scales nor sizes is given");
  std::vector<double> roi;
  if (crop) {
    if (!ctx.has_input(1)) return invalid("roi is required with coordinate_transformation_mode tf_crop_and_resize");
    EPSTACK_ASSIGN_OR_RETURN(roi, float_values(ctx.input(1), "roi"));
    if (roi.size() != 2 * r)
      return invalid(cat("roi has ", str(static_cast<std::int64_t>(roi.size())), " elements; expected 2 * rank = ",
                         str(static_cast<std::int64_t>(2 * r))));
  }
  dims_t out(r);
  std::vector<double> scale(r), length(r);  // length: the "length_resized" of the coordinate formulas
  if (has_scales) {
    const tensor& st = ctx.input(scales_at);
    if (st.type() != element_type::float32)
      return invalid(cat("scales must be a float tensor, got ", std::string(to_string(st.type()))));
    if (st.element_count() != r)
      return invalid(cat("scales has ", str(static_cast<std::int64_t>(st.element_count())), " elements but X has rank ",
                         str(static_cast<std::int64_t>(r))));
    const float* ps = st.typed<float>();
    for (std::size_t d = 0; d < r; ++d) {
      const double s = ps[d];
      if (!(s > 0) || !std::isfinite(s)) return invalid(cat("scales[", str(static_cast<std::int64_t>(d)), "] must be positive and finite, got ", std::to_string(s)));
      const double span = crop ? roi[d + r] - roi[d] : 1.0;
      // As the reference implementation: the resized length is scale * length (not rounded) in the formulas.
      length[d] = static_cast<double>(in[d]) * span * s;
      scale[d] = s;
      const double o = std::floor(length[d]);
      if (o < 0) return invalid(cat("the output dimension ", str(static_cast<std::int64_t>(d)), " would be negative"));
      out[d] = static_cast<std::int64_t>(o);
    }
  } else {
    const tensor& zt = ctx.input(3);
    if (zt.type() != element_type::int64) return invalid(cat("sizes must be an int64 tensor, got ", std::string(to_string(zt.type()))));
    if (zt.element_count() != r)
      return invalid(cat("sizes has ", str(static_cast<std::int64_t>(zt.element_count())), " elements but X has rank ",
                         str(static_cast<std::int64_t>(r))));
    const std::int64_t* pz = zt.typed<std::int64_t>();
    for (std::size_t d = 0; d < r; ++d) {
      if (pz[d] < 0) return invalid(cat("sizes[", str(static_cast<std::int64_t>(d)), "] is negative: ", str(pz[d])));
      out[d] = pz[d];
      length[d] = static_cast<double>(pz[d]);
      scale[d] = in[d] > 0 ? static_cast<double>(pz[d]) / static_cast<double>(in[d]) : 1.0;
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
      case rz_coord::asymmetric: return xr / s;
      case rz_coord::pytorch_half_pixel: return lr > 1 ? (xr + 0.5) / s - 0.5 : 0.0;
      case rz_coord::tf_half_pixel_for_nn: return (xr + 0.5) / s;
      case rz_coord::align_corners: return lr == 1 ? 0.0 : xr * (len - 1) / (lr - 1);
      case rz_coord::tf_crop_and_resize: {
        const double start = roi[d], end = roi[d + r];
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
    // Linear and cubic: separable passes, one per resized axis. The taps of output coordinate j are the n input
    // indices nearest to x_original (the lower ones on ties) in the edge-padded axis, weighted by the coefficients
    // of the fractional part, as the ONNX reference implementation computes them.
    const std::int64_t taps = c.mode == rz_mode::linear ? 2 : 4;
    const double A = c.cubic_a;
    struct axis_plan {
      std::size_t d;
      std::vector<std::int64_t> idx;
      std::vector<T> w;
      std::vector<bool> out_of_range;
      bool any_outside = false;
    };
    std::vector<axis_plan> plans;
    for (std::size_t d = 0; d < r; ++d) {
      axis_plan p{d, std::vector<std::int64_t>(static_cast<std::size_t>(out[d] * taps)),
                  std::vector<T>(static_cast<std::size_t>(out[d] * taps)),
                  std::vector<bool>(static_cast<std::size_t>(out[d])), false};
      bool identity = out[d] == in[d];
      for (std::int64_t j = 0; j < out[d]; ++j) {
        const double xo = original(d, j);
        const double fl = std::floor(xo);
        const double ratio = xo == fl ? 1.0 : xo - fl;
        std::array<double, 4> cf{};
        if (taps == 2) {
          cf = {1 - ratio, ratio, 0, 0};
        } else {
          const double r1 = ratio + 1, r2 = 1 - ratio, r3 = 2 - ratio;
          cf = {((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A, ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1,
                ((A + 2) * r2 - (A + 3)) * r2 * r2 + 1, ((A * r3 - 5 * A) * r3 + 8 * A) * r3 - 4 * A};
        }
        const double half = static_cast<double>(taps / 2);
        const double start_d = std::clamp(std::ceil(xo) - half, -half, static_cast<double>(in[d]) - half);
        const auto start = static_cast<std::int64_t>(start_d);
        if (c.exclude_outside) {
          double sum = 0;
          for (std::int64_t t = 0; t < taps; ++t) {
            const std::int64_t i = start + t;
            if (i < 0 || i >= in[d]) cf[static_cast<std::size_t>(t)] = 0;
            sum += cf[static_cast<std::size_t>(t)];
          }
          if (sum != 0)
            for (auto& v : cf) v /= sum;
        }
        double on_j = 0;
        for (std::int64_t t = 0; t < taps; ++t) {
          const std::int64_t i = std::clamp<std::int64_t>(start + t, 0, in[d] - 1);
          const auto k = static_cast<std::size_t>(j * taps + t);
          p.idx[k] = i;
          p.w[k] = static_cast<T>(cf[static_cast<std::size_t>(t)]);
          if (i == j) on_j += cf[static_cast<std::size_t>(t)];
          else if (cf[static_cast<std::size_t>(t)] != 0) identity = false;
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
      resize_pass<T>(ctx, src, dst, outer, cur[p.d], out[p.d], inner, taps, p.idx.data(), p.w.data());
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

// ---------------------------------------------------------------------------------------------------------------
// Einsum

constexpr int letter_count = 52;
int letter_id(char ch) { return ch >= 'A' && ch <= 'Z' ? ch - 'A' : (ch >= 'a' && ch <= 'z' ? 26 + (ch - 'a') : -1); }
char letter_char(int id) { return id < 26 ? static_cast<char>('A' + id) : static_cast<char>('a' + (id - 26)); }

struct einsum_term {
  std::vector<int> letters;  // letter ids, in order
  int ellipsis = -1;         // '...' stands before letters[ellipsis] (-1: no ellipsis)
};
struct einsum_spec {
  std::vector<einsum_term> inputs;
  einsum_term output;
};

Result<einsum_term> parse_einsum_term(std::string_view s, const std::string& eq) {
  einsum_term t;
  for (std::size_t i = 0; i < s.size();) {
    const char ch = s[i];
    if (letter_id(ch) >= 0) {
      t.letters.push_back(letter_id(ch));
      ++i;
    } else if (ch == '.') {
      if (s.substr(i, 3) != "...") return invalid(cat("malformed ellipsis in equation '", eq, "'"));
      if (t.ellipsis >= 0) return invalid(cat("a term of equation '", eq, "' has more than one ellipsis"));
      t.ellipsis = static_cast<int>(t.letters.size());
      i += 3;
    } else {
      return invalid(cat("unexpected character '", std::string(1, ch), "' in equation '", eq, "'"));
    }
  }
  return t;
}

Result<einsum_spec> parse_einsum(const std::string& eq, std::size_t inputs) {
  std::string e;
  for (char ch : eq)
    if (ch != ' ') e.push_back(ch);
  const auto arrow = e.find("->");
  const std::string lhs = e.substr(0, arrow);
  einsum_spec sp;
  std::size_t from = 0;
  while (true) {
    const auto comma = lhs.find(',', from);
    EPSTACK_ASSIGN_OR_RETURN(auto t, parse_einsum_term(std::string_view(lhs).substr(from, comma == std::string::npos ? std::string::npos : comma - from), eq));
    sp.inputs.push_back(std::move(t));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  if (sp.inputs.size() != inputs)
    return invalid(cat("equation '", eq, "' has ", str(static_cast<std::int64_t>(sp.inputs.size())), " input terms but the node has ",
                       str(static_cast<std::int64_t>(inputs)), " inputs"));
  std::array<int, letter_count> uses{};
  bool any_ellipsis = false;
  for (const auto& t : sp.inputs) {
    for (int l : t.letters) ++uses[static_cast<std::size_t>(l)];
    any_ellipsis = any_ellipsis || t.ellipsis >= 0;
  }
  if (arrow != std::string::npos) {
    const std::string rhs = e.substr(arrow + 2);
    if (rhs.find(',') != std::string::npos || rhs.find("->") != std::string::npos)
      return invalid(cat("equation '", eq, "' has a malformed output term"));
    EPSTACK_ASSIGN_OR_RETURN(sp.output, parse_einsum_term(rhs, eq));
    std::array<bool, letter_count> seen{};
    for (int l : sp.output.letters) {
      if (seen[static_cast<std::size_t>(l)])
        return invalid(cat("output label '", std::string(1, letter_char(l)), "' appears twice in equation '", eq, "'"));
      seen[static_cast<std::size_t>(l)] = true;
      if (uses[static_cast<std::size_t>(l)] == 0)
        return invalid(cat("output label '", std::string(1, letter_char(l)), "' does not appear in the inputs of equation '", eq, "'"));
    }
  } else {
    // Implicit output: the ellipsis dimensions, then the labels used exactly once, in alphabetical (ASCII) order.
    if (any_ellipsis) sp.output.ellipsis = 0;
    for (int l = 0; l < letter_count; ++l)
      if (uses[static_cast<std::size_t>(l)] == 1) sp.output.letters.push_back(l);
  }
  return sp;
}

/// dst (axes labelled dst_labels) = src (axes labelled src_labels, sizes from lsize) with its axes permuted.
template <class T>
void permute_copy(const compute_context& ctx, const T* src, const std::vector<int>& src_labels,
                  const std::vector<int>& dst_labels, const dims_t& lsize, T* dst) {
  const std::size_t r = dst_labels.size();
  dims_t sdims(src_labels.size());
  for (std::size_t a = 0; a < src_labels.size(); ++a) sdims[a] = lsize[static_cast<std::size_t>(src_labels[a])];
  const dims_t sstr = strides_of(sdims);
  dims_t ddims(r), dstr(r);  // dstr: the source stride of each destination axis
  for (std::size_t p = 0; p < r; ++p) {
    const auto a = static_cast<std::size_t>(std::find(src_labels.begin(), src_labels.end(), dst_labels[p]) - src_labels.begin());
    ddims[p] = sdims[a];
    dstr[p] = sstr[a];
  }
  const std::int64_t count = product(ddims);
  if (count == 0) return;
  if (r == 0) {
    dst[0] = src[0];
    return;
  }
  const std::int64_t L = ddims[r - 1], ls = dstr[r - 1];
  parallel_items(ctx, static_cast<std::size_t>(count / L), static_cast<std::size_t>(L), [&](std::size_t r0, std::size_t r1) {
    for (std::size_t row = r0; row < r1; ++row) {
      std::int64_t rem = static_cast<std::int64_t>(row), base = 0;
      for (std::size_t d = r - 1; d-- > 0;) {
        base += (rem % ddims[d]) * dstr[d];
        rem /= ddims[d];
      }
      T* o = dst + static_cast<std::int64_t>(row) * L;
      for (std::int64_t j = 0; j < L; ++j) o[j] = src[base + j * ls];
    }
  });
}

/// Rows [r0, r1) of Y[M,N] = op(A) op(B) for the types gemm_block is not instantiated for.
template <class T>
void naive_gemm_rows(bool ta, bool tb, std::int64_t r0, std::int64_t r1, std::int64_t M, std::int64_t N, std::int64_t K,
                     const T* a, const T* b, T* y) {
  const std::int64_t lda = ta ? M : K, ldb = tb ? K : N;
  for (std::int64_t i = r0; i < r1; ++i) {
    T* yr = y + i * N;
    if (tb) {
      for (std::int64_t j = 0; j < N; ++j) {
        T acc = T(0);
        for (std::int64_t k = 0; k < K; ++k) acc = static_cast<T>(acc + (ta ? a[k * lda + i] : a[i * lda + k]) * b[j * ldb + k]);
        yr[j] = acc;
      }
    } else {
      std::fill_n(yr, N, T(0));
      for (std::int64_t k = 0; k < K; ++k) {
        const T av = ta ? a[k * lda + i] : a[i * lda + k];
        const T* br = b + k * ldb;
        for (std::int64_t j = 0; j < N; ++j) yr[j] = static_cast<T>(yr[j] + av * br[j]);
      }
    }
  }
}

/// nb independent products Y_i[M,N] = op(A_i) op(B_i), each operand packed contiguously per batch.
template <class T>
void batched_gemm(const compute_context& ctx, bool ta, bool tb, std::int64_t nb, std::int64_t M, std::int64_t N,
                  std::int64_t K, const T* a, const T* b, T* y) {
  if (nb == 0 || M == 0 || N == 0) return;
  const std::size_t cost = static_cast<std::size_t>(std::max<std::int64_t>(M * N * std::max<std::int64_t>(K, 1), 1));
  if constexpr (std::is_same_v<T, float>) {
    const std::int64_t lda = ta ? M : K, ldb = tb ? K : N;
    if (nb >= ctx.thread_count()) {
      parallel_items(ctx, static_cast<std::size_t>(nb), cost, [&](std::size_t b0, std::size_t b1) {
        for (std::size_t i = b0; i < b1; ++i) {
          const auto bi = static_cast<std::int64_t>(i);
          gemm_block<float>(ta, tb, M, N, K, 1.0f, a + bi * M * K, lda, b + bi * K * N, ldb, y + bi * M * N, N, false);
        }
      });
    } else {
      for (std::int64_t bi = 0; bi < nb; ++bi)
        gemm_parallel<float>(ctx, ta, tb, M, N, K, 1.0f, a + bi * M * K, lda, b + bi * K * N, ldb, y + bi * M * N, N, false);
    }
  } else {
    // Items are (batch, row) pairs.
    parallel_items(ctx, static_cast<std::size_t>(nb * M), static_cast<std::size_t>(std::max<std::int64_t>(N * K, 1)),
                   [&](std::size_t i0, std::size_t i1) {
                     for (std::size_t i = i0; i < i1;) {
                       const std::int64_t bi = static_cast<std::int64_t>(i) / M, r0 = static_cast<std::int64_t>(i) % M;
                       const std::int64_t r1 = std::min<std::int64_t>(M, r0 + static_cast<std::int64_t>(i1 - i));
                       naive_gemm_rows<T>(ta, tb, r0, r1, M, N, K, a + bi * M * K, b + bi * K * N, y + bi * M * N);
                       i += static_cast<std::size_t>(r1 - r0);
                     }
                   });
  }
}

/// The fast path: two operands without diagonals, broadcasting or single-operand reductions, as a batched matrix
/// product (operands and result permuted only when their layout is not already [batch, rows, inner] or its
/// transpose). False when the equation does not have that form.
template <class T>
bool einsum_pair(compute_context& ctx, const tensor& ta_, const tensor& tb_, const std::vector<int>& la,
                 const std::vector<int>& lb, const std::vector<int>& lo, const dims_t& lsize, T* py) {
  const auto has = [](const std::vector<int>& v, int l) { return std::find(v.begin(), v.end(), l) != v.end(); };
  for (const auto* lv : {&la, &lb}) {
    std::vector<int> s = *lv;
    std::sort(s.begin(), s.end());
    if (std::adjacent_find(s.begin(), s.end()) != s.end()) return false;  // a diagonal
  }
  for (std::size_t i = 0; i < la.size(); ++i)
    if (ta_.sizes()[i] != lsize[static_cast<std::size_t>(la[i])] || (!has(lb, la[i]) && !has(lo, la[i]))) return false;
  for (std::size_t i = 0; i < lb.size(); ++i)
    if (tb_.sizes()[i] != lsize[static_cast<std::size_t>(lb[i])] || (!has(la, lb[i]) && !has(lo, lb[i]))) return false;
  std::vector<int> batch, m, n;
  for (int l : lo) (has(la, l) && has(lb, l) ? batch : has(la, l) ? m : n).push_back(l);
  const auto concat = [](std::initializer_list<const std::vector<int>*> parts) {
    std::vector<int> r;
    for (const auto* p : parts) r.insert(r.end(), p->begin(), p->end());
    return r;
  };
  const auto count_of = [&](const std::vector<int>& labels) {
    std::int64_t c = 1;
    for (int l : labels) c *= lsize[static_cast<std::size_t>(l)];
    return c;
  };

  // Choose which operand plays A, and the order of the contracted labels, to minimise the elements copied.
  struct choice {
    bool swap = false, ta = false, tb = false, pa = false, pb = false, po = false;
    std::vector<int> k;
    std::int64_t cost = 0;
  };
  std::optional<choice> best;
  for (const bool swap : {false, true}) {
    const auto& LA = swap ? lb : la;
    const auto& LB = swap ? la : lb;
    const auto& M_ = swap ? n : m;
    const auto& N_ = swap ? m : n;
    for (const auto* korder_src : {&LA, &LB}) {
      choice ch;
      ch.swap = swap;
      for (int l : *korder_src)
        if (has(LA, l) && has(LB, l) && !has(lo, l)) ch.k.push_back(l);
      const bool a_n = LA == concat({&batch, &M_, &ch.k}), a_t = LA == concat({&batch, &ch.k, &M_});
      const bool b_n = LB == concat({&batch, &ch.k, &N_}), b_t = LB == concat({&batch, &N_, &ch.k});
      ch.pa = !a_n && !a_t;
      ch.ta = !a_n && a_t;
      ch.pb = !b_n && !b_t;
      ch.tb = !b_n && b_t;
      ch.po = lo != concat({&batch, &M_, &N_});
      ch.cost = (ch.pa ? count_of(LA) : 0) + (ch.pb ? count_of(LB) : 0) + (ch.po ? count_of(lo) : 0);
      if (!best || ch.cost < best->cost) best = std::move(ch);
    }
  }
  const choice& ch = *best;
  const tensor& A = ch.swap ? tb_ : ta_;
  const tensor& B = ch.swap ? ta_ : tb_;
  const auto& LA = ch.swap ? lb : la;
  const auto& LB = ch.swap ? la : lb;
  const auto& M_ = ch.swap ? n : m;
  const auto& N_ = ch.swap ? m : n;
  const T* pa = A.typed<T>();
  const T* pb = B.typed<T>();
  tensor sa, sb, so;
  if (ch.pa) {
    sa = ctx.scratch(element_type_of_v<T>, static_cast<std::size_t>(count_of(LA)));
    permute_copy<T>(ctx, pa, LA, concat({&batch, &M_, &ch.k}), lsize, sa.typed<T>());
    pa = sa.typed<T>();
  }
  if (ch.pb) {
    sb = ctx.scratch(element_type_of_v<T>, static_cast<std::size_t>(count_of(LB)));
    permute_copy<T>(ctx, pb, LB, concat({&batch, &ch.k, &N_}), lsize, sb.typed<T>());
    pb = sb.typed<T>();
  }
  T* pc = py;
  if (ch.po) {
    so = ctx.scratch(element_type_of_v<T>, static_cast<std::size_t>(count_of(lo)));
    pc = so.typed<T>();
  }
  batched_gemm<T>(ctx, ch.ta, ch.tb, count_of(batch), count_of(M_), count_of(N_), count_of(ch.k), pa, pb, pc);
  if (ch.po) permute_copy<T>(ctx, pc, concat({&batch, &M_, &N_}), lo, lsize, py);
  return true;
}

template <class T>
Status einsum_compute(compute_context& ctx, const einsum_spec& sp) {
  const std::size_t nops = sp.inputs.size();
  if (ctx.input_count() < nops)
    return invalid(cat("the equation names ", str(static_cast<std::int64_t>(nops)), " operands but ",
                       str(static_cast<std::int64_t>(ctx.input_count())), " inputs were given"));
  std::vector<const tensor*> xs(nops);
  for (std::size_t i = 0; i < nops; ++i) {
    xs[i] = &ctx.input(i);
    if (xs[i]->type() != element_type_of_v<T>)
      return invalid(cat("input ", str(static_cast<std::int64_t>(i)), " has element type ", std::string(to_string(xs[i]->type())),
                         ", expected ", std::string(to_string(element_type_of_v<T>))));
  }
  // Labels: the ellipsis dimensions are 0..max_ell-1 (right-aligned across operands), letters follow.
  std::vector<int> ell(nops);
  int max_ell = 0;
  for (std::size_t i = 0; i < nops; ++i) {
    const auto& t = sp.inputs[i];
    const int rank = static_cast<int>(xs[i]->rank()), named = static_cast<int>(t.letters.size());
    if (t.ellipsis < 0 ? rank != named : rank < named)
      return invalid(cat("input ", str(i), " has rank ", str(rank), " but its term names ", str(named), " dimensions",
                         t.ellipsis < 0 ? "" : " besides the ellipsis"));
    ell[i] = t.ellipsis < 0 ? 0 : rank - named;
    max_ell = std::max(max_ell, ell[i]);
  }
  const auto label_of = [&](int letter) { return max_ell + letter; };
  const auto label_name = [&](int l) { return l < max_ell ? std::string("...") : std::string(1, letter_char(l - max_ell)); };
  const std::size_t L = static_cast<std::size_t>(max_ell + letter_count);
  dims_t lsize(L, -1);
  std::vector<std::vector<int>> labs(nops);
  for (std::size_t i = 0; i < nops; ++i) {
    const auto& t = sp.inputs[i];
    for (std::size_t p = 0; p <= t.letters.size(); ++p) {
      if (static_cast<int>(p) == t.ellipsis)
        for (int e = 0; e < ell[i]; ++e) labs[i].push_back(max_ell - ell[i] + e);
      if (p < t.letters.size()) labs[i].push_back(label_of(t.letters[p]));
    }
    const auto dims = xs[i]->sizes();
    for (std::size_t a = 0; a < labs[i].size(); ++a) {
      const auto l = static_cast<std::size_t>(labs[i][a]);
      for (std::size_t b = 0; b < a; ++b)
        if (labs[i][b] == labs[i][a] && dims[b] != dims[a])
          return invalid(cat("input ", str(static_cast<std::int64_t>(i)), " repeats label '", label_name(labs[i][a]),
                             "' over dimensions of different sizes ", str(dims[b]), " and ", str(dims[a])));
      if (lsize[l] < 0 || lsize[l] == 1) lsize[l] = dims[a];  // a size-1 dimension broadcasts against any size
      else if (dims[a] != 1 && dims[a] != lsize[l])
        return invalid(cat("label '", label_name(labs[i][a]), "' has size ", str(lsize[l]), " in one input and ", str(dims[a]),
                           " in input ", str(static_cast<std::int64_t>(i))));
    }
  }
  std::vector<int> lo;
  if (sp.output.ellipsis < 0 && max_ell > 0)
    return invalid(cat("the inputs' ellipsis covers ", str(max_ell), " dimensions but the output term has no ellipsis"));
  for (std::size_t p = 0; p <= sp.output.letters.size(); ++p) {
    if (static_cast<int>(p) == sp.output.ellipsis)
      for (int e = 0; e < max_ell; ++e) lo.push_back(e);
    if (p < sp.output.letters.size()) lo.push_back(label_of(sp.output.letters[p]));
  }
  dims_t odims(lo.size());
  for (std::size_t p = 0; p < lo.size(); ++p) odims[p] = lsize[static_cast<std::size_t>(lo[p])];
  tensor& y = ctx.allocate_output(0, element_type_of_v<T>, odims);
  T* py = y.typed<T>();
  const std::size_t nout = y.element_count();
  if (nout == 0) return {};

  if (nops == 2 && einsum_pair<T>(ctx, *xs[0], *xs[1], labs[0], labs[1], lo, lsize, py)) return {};

  // General path: for each output element, sum the product of the operands over every combination of the labels
  // that are not in the output. Repeated labels in one operand add their strides (a diagonal); a size-1 dimension
  // against a larger label size has stride 0 (broadcasting).
  std::vector<dims_t> st(nops, dims_t(L, 0));
  std::vector<bool> used(L, false);
  for (std::size_t i = 0; i < nops; ++i) {
    const auto dims = xs[i]->sizes();
    const dims_t s = strides_of(dims);
    for (std::size_t a = 0; a < labs[i].size(); ++a) {
      used[static_cast<std::size_t>(labs[i][a])] = true;
      if (dims[a] != 1) st[i][static_cast<std::size_t>(labs[i][a])] += s[a];
    }
  }
  std::vector<int> sum_labels;
  for (std::size_t l = 0; l < L; ++l)
    if (used[l] && std::find(lo.begin(), lo.end(), static_cast<int>(l)) == lo.end()) sum_labels.push_back(static_cast<int>(l));
  const std::size_t ro = lo.size(), ns = sum_labels.size();
  dims_t ost(nops * ro), sst(nops * ns), sdim(ns);
  std::int64_t total_sum = 1;
  for (std::size_t q = 0; q < ns; ++q) {
    sdim[q] = lsize[static_cast<std::size_t>(sum_labels[q])];
    total_sum *= sdim[q];
  }
  for (std::size_t i = 0; i < nops; ++i) {
    for (std::size_t p = 0; p < ro; ++p) ost[i * ro + p] = st[i][static_cast<std::size_t>(lo[p])];
    for (std::size_t q = 0; q < ns; ++q) sst[i * ns + q] = st[i][static_cast<std::size_t>(sum_labels[q])];
  }
  std::vector<const T*> data(nops);
  for (std::size_t i = 0; i < nops; ++i) data[i] = xs[i]->typed<T>();
  const std::size_t pieces = piece_count(ctx, nout, static_cast<std::size_t>(total_sum) * nops);
  const std::size_t per = ro + ns + nops;
  dims_t work(pieces * per);
  for_pieces(ctx, nout, pieces, [&](std::size_t piece, std::size_t b, std::size_t e) {
    std::int64_t* oi = work.data() + piece * per;  // output multi-index
    std::int64_t* cnt = oi + ro;                    // summation odometer
    std::int64_t* off = cnt + ns;                   // operand offsets
    std::size_t rem = b;
    for (std::size_t p = ro; p-- > 0;) {
      oi[p] = static_cast<std::int64_t>(rem % static_cast<std::size_t>(odims[p]));
      rem /= static_cast<std::size_t>(odims[p]);
    }
    for (std::size_t o = b; o < e; ++o) {
      for (std::size_t i = 0; i < nops; ++i) {
        std::int64_t base = 0;
        for (std::size_t p = 0; p < ro; ++p) base += oi[p] * ost[i * ro + p];
        off[i] = base;
      }
      std::fill_n(cnt, ns, 0);
      T acc = T(0);
      for (std::int64_t s = 0; s < total_sum; ++s) {
        T prod = data[0][off[0]];
        for (std::size_t i = 1; i < nops; ++i) prod = static_cast<T>(prod * data[i][off[i]]);
        acc = static_cast<T>(acc + prod);
        for (std::size_t q = ns; q-- > 0;) {
          ++cnt[q];
          for (std::size_t i = 0; i < nops; ++i) off[i] += sst[i * ns + q];
          if (cnt[q] < sdim[q]) break;
          for (std::size_t i = 0; i < nops; ++i) off[i] -= sst[i * ns + q] * sdim[q];
          cnt[q] = 0;
        }
      }
      py[o] = acc;
      for (std::size_t p = ro; p-- > 0;) {
        if (++oi[p] < odims[p]) break;
        oi[p] = 0;
      }
    }
  });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// GatherElements

template <class T, class I>
Status gather_elements_compute(compute_context& ctx, std::int64_t axis) {
  const tensor& data = ctx.input(0);
  const tensor& ind = ctx.input(1);
  if (data.type() != element_type_of_v<T>) return invalid("unexpected element type of data");
  if (ind.type() != element_type_of_v<I>) return invalid("unexpected element type of indices");
  const std::size_t r = data.rank();
  if (r == 0) return invalid("data must have rank >= 1, got a scalar");
  if (ind.rank() != r)
    return invalid(cat("indices has rank ", str(static_cast<std::int64_t>(ind.rank())), " but data has rank ",
                       str(static_cast<std::int64_t>(r))));
  const auto ax = normalize_axis(axis, r);
  if (!ax) return bad_axis(axis, r);
  const auto dd = data.sizes(), id = ind.sizes();
  for (std::size_t d = 0; d < r; ++d)
    if (d != *ax && id[d] > dd[d])
      return invalid(cat("indices shape ", dims_string(id), " exceeds data shape ", dims_string(dd), " in dimension ",
                         str(static_cast<std::int64_t>(d))));
  const std::int64_t s = dd[*ax];
  const I* pi = ind.typed<I>();
  const std::size_t count = ind.element_count();
  for (std::size_t i = 0; i < count; ++i) {
    const auto v = static_cast<std::int64_t>(pi[i]);
    if (v < -s || v >= s)
      return invalid(cat("index ", str(v), " (element ", str(static_cast<std::int64_t>(i)), " of indices) is out of bounds for axis ",
                         str(static_cast<std::int64_t>(*ax)), " of size ", str(s)));
  }
  tensor& y = ctx.allocate_output(0, data.type(), id);
  if (count == 0) return {};
  const T* pd = data.typed<T>();
  T* py = y.typed<T>();
  const dims_t ds = strides_of(dd);
  const std::int64_t L = id[r - 1];
  const bool last = *ax == r - 1;
  auto body = [&](std::size_t r0, std::size_t r1) {
    for (std::size_t row = r0; row < r1; ++row) {
      std::int64_t rem = static_cast<std::int64_t>(row), base = 0;
      for (std::size_t d = r - 1; d-- > 0;) {
        const std::int64_t i = rem % id[d];
        rem /= id[d];
        if (d != *ax) base += i * ds[d];
      }
      const I* ir = pi + static_cast<std::int64_t>(row) * L;
      T* o = py + static_cast<std::int64_t>(row) * L;
      for (std::int64_t j = 0; j < L; ++j) {
        std::int64_t v = static_cast<std::int64_t>(ir[j]);
        if (v < 0) v += s;
        o[j] = pd[base + (last ? v : j + v * ds[*ax])];
      }
    }
  };
  if constexpr (std::is_same_v<T, std::string>) body(0, count / static_cast<std::size_t>(L));
  else parallel_items(ctx, count / static_cast<std::size_t>(L), static_cast<std::size_t>(L), body);
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// Tile

template <class T>
Status tile_compute(compute_context& ctx, bool v1) {
  const tensor& x = ctx.input(0);
  if (x.type() != element_type_of_v<T>) return invalid("unexpected element type of input");
  const std::size_t r = x.rank();
  dims_t rep(r, 1);
  if (v1) {
    // Tile-1: inputs (input, tiles, axis): `tiles` copies along `axis`.
    EPSTACK_ASSIGN_OR_RETURN(const std::int64_t tiles, scalar_int(ctx.input(1), "tiles"));
    EPSTACK_ASSIGN_OR_RETURN(const std::int64_t axis, scalar_int(ctx.input(2), "axis"));
    const auto ax = normalize_axis(axis, r);
    if (!ax) return bad_axis(axis, r);
    rep[*ax] = tiles;
  } else {
    const tensor& rt = ctx.input(1);
    if (rt.empty()) return invalid("repeats is missing");
    if (rt.type() != element_type::int64 && rt.type() != element_type::int32)
      return invalid(cat("repeats must be an int64 tensor, got ", std::string(to_string(rt.type()))));
    if (rt.rank() != 1 || rt.element_count() != r)
      return invalid(cat("repeats must be a 1-D tensor of ", str(static_cast<std::int64_t>(r)), " elements (the rank of input), got shape ",
                         dims_string(rt.sizes())));
    rep = to_int64s(rt);
  }
  for (std::size_t d = 0; d < r; ++d)
    if (rep[d] < 0) return invalid(cat("repeats[", str(static_cast<std::int64_t>(d)), "] is negative: ", str(rep[d])));
  const auto id = x.sizes();
  dims_t od(r);
  for (std::size_t d = 0; d < r; ++d) od[d] = id[d] * rep[d];
  tensor& y = ctx.allocate_output(0, x.type(), od);
  if (y.element_count() == 0) return {};
  const T* px = x.typed<T>();
  T* py = y.typed<T>();
  if (r == 0) {
    py[0] = px[0];
    return {};
  }
  const dims_t os = strides_of(od);
  constexpr bool serial = std::is_same_v<T, std::string>;
  // Offset in the output of prefix index q over dims [0, upto) of the input.
  const auto prefix_offset = [&](std::int64_t q, std::size_t upto) {
    std::int64_t off = 0;
    for (std::size_t d = upto; d-- > 0;) {
      off += (q % id[d]) * os[d];
      q /= id[d];
    }
    return off;
  };
  // Each input row, repeated along the last axis, at the first tile of the other axes.
  const std::int64_t L = id[r - 1], R = rep[r - 1];
  const std::int64_t rows = product(id, 0, r - 1);
  auto rows_body = [&](std::size_t q0, std::size_t q1) {
    for (std::size_t q = q0; q < q1; ++q) {
      const T* s = px + static_cast<std::int64_t>(q) * L;
      T* d = py + prefix_offset(static_cast<std::int64_t>(q), r - 1);
      for (std::int64_t t = 0; t < R; ++t) std::copy_n(s, L, d + t * L);
    }
  };
  if constexpr (serial) rows_body(0, static_cast<std::size_t>(rows));
  else parallel_items(ctx, static_cast<std::size_t>(rows), static_cast<std::size_t>(L * R), rows_body);
  // Then, from the inner axes out, the filled block of axis d copied rep[d] - 1 more times.
  for (std::size_t d = r - 1; d-- > 0;) {
    if (rep[d] == 1) continue;
    const std::int64_t block = id[d] * os[d];
    const std::int64_t prefixes = product(id, 0, d);
    auto body = [&](std::size_t q0, std::size_t q1) {
      for (std::size_t q = q0; q < q1; ++q) {
        T* base = py + prefix_offset(static_cast<std::int64_t>(q), d);
        for (std::int64_t t = 1; t < rep[d]; ++t) std::copy_n(base, block, base + t * block);
      }
    };
    if constexpr (serial) body(0, static_cast<std::size_t>(prefixes));
    else parallel_items(ctx, static_cast<std::size_t>(prefixes), static_cast<std::size_t>(block * (rep[d] - 1)), body);
  }
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// Pad

enum class pad_mode { constant, reflect, edge };

struct pad_config {
  pad_mode mode = pad_mode::constant;
  bool pads_input = true;     // opset 11+: pads (and constant_value) are inputs
  dims_t attr_pads;           // opset < 11
  double attr_value = 0.0;    // opset < 11
};

template <class T>
Status pad_compute(compute_context& ctx, const pad_config& c) {
  const tensor& x = ctx.input(0);
  if (x.type() != element_type_of_v<T>) return invalid("unexpected element type of data");
  const std::size_t r = x.rank();
  dims_t pads = c.attr_pads;
  T fill{};
  if (c.pads_input) {
    const tensor& pt = ctx.input(1);
    if (pt.empty()) return invalid("pads is missing");
    if (pt.type() != element_type::int64) return invalid(cat("pads must be an int64 tensor, got ", std::string(to_string(pt.type()))));
    if (pt.rank() > 1) return invalid(cat("pads must be a 1-D tensor, got shape ", dims_string(pt.sizes())));
    pads = to_int64s(pt);
    if (ctx.has_input(2) && ctx.input(2).element_count() > 0) {
      const tensor& cv = ctx.input(2);
      if (cv.type() != x.type())
        return invalid(cat("constant_value has element type ", std::string(to_string(cv.type())), " but data has ",
                           std::string(to_string(x.type()))));
      if (cv.element_count() != 1) return invalid(cat("constant_value must be a scalar, got shape ", dims_string(cv.sizes())));
      fill = cv.typed<T>()[0];
    }
  } else {
    if constexpr (!std::is_same_v<T, std::string>) fill = from_double<T>(c.attr_value);
  }
  if (pads.size() != 2 * r)
    return invalid(cat("pads has ", str(static_cast<std::int64_t>(pads.size())), " values; expected 2 * rank = ",
                       str(static_cast<std::int64_t>(2 * r))));
  const auto id = x.sizes();
  dims_t od(r);
  std::vector<dims_t> tab(r);
  for (std::size_t d = 0; d < r; ++d) {
    const std::int64_t pb = pads[d], pe = pads[d + r];
    od[d] = id[d] + pb + pe;
    if (od[d] < 0)
      return invalid(cat("pads [", str(pb), ", ", str(pe), "] remove more than the ", str(id[d]), " elements of dimension ",
                         str(static_cast<std::int64_t>(d))));
    // The part of the input that is kept: [lo, hi).
    const std::int64_t lo = std::max<std::int64_t>(0, -pb), hi = id[d] - std::max<std::int64_t>(0, -pe);
    if (c.mode != pad_mode::constant && hi <= lo && od[d] > 0)
      return invalid(cat("dimension ", str(static_cast<std::int64_t>(d)), " has no elements to pad from in ",
                         c.mode == pad_mode::edge ? "edge" : "reflect", " mode"));
    auto& t = tab[d];
    t.resize(static_cast<std::size_t>(od[d]));
    for (std::int64_t j = 0; j < od[d]; ++j) {
      const std::int64_t rel = j - pb;  // position in the input
      std::int64_t v = rel;
      if (rel < lo || rel >= hi) {
        if (c.mode == pad_mode::constant) {
          v = -1;
        } else if (c.mode == pad_mode::edge) {
          v = std::clamp(rel, lo, hi - 1);
        } else {
          // numpy's 'reflect' (the edge not repeated), reflecting again when the padding is longer than the data.
          const std::int64_t m = hi - lo;
          if (m == 1) {
            v = lo;
          } else {
            const std::int64_t period = 2 * (m - 1);
            std::int64_t u = (rel - lo) % period;
            if (u < 0) u += period;
            v = lo + (u >= m ? period - u : u);
          }
        }
      }
      t[static_cast<std::size_t>(j)] = v;
    }
  }
  tensor& y = ctx.allocate_output(0, x.type(), od);
  table_gather<T>(ctx, x.typed<T>(), id, od, tab, fill, y.typed<T>());
  return {};
}

}  // namespace
}  // namespace impl

// ---------------------------------------------------------------------------------------------------------------
// The kernel types.

namespace ops {
using namespace impl;

#define EPSTACK_TOPK_TYPES EPSTACK_NUMERIC_TYPES, ::epstack::float16

bool top_k::supports(const graph& g, node_id n) {
  const int ver = opset_of(g.node(n));
  const auto t = in_type(g, n, 0);
  if (ver >= 10 && in_type(g, n, 1) != element_type::int64) return false;
  if (ver < 11) return type_in<float, double, std::int32_t, std::int64_t, float16>(t);
  return type_in<EPSTACK_TOPK_TYPES>(t);
}
Result<compute_function> top_k::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const int ver = opset_of(nd);
  const bool k_input = ver >= 10;
  if (!k_input && !has_attr(nd, "k")) return invalid("TopK before opset 10 needs the attribute k");
  const std::int64_t k = attr_i(nd, "k", 0), axis = attr_i(nd, "axis", -1);
  const bool largest = ver < 11 || attr_i(nd, "largest", 1) != 0;
  const bool sorted = ver < 11 || attr_i(nd, "sorted", 1) != 0;
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_TOPK_TYPES>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("TopK", [=](compute_context& ctx) { return top_k_compute<T>(ctx, k, k_input, axis, largest, sorted); });
  });
  return r;
}

bool non_zero::supports(const graph& g, node_id n) { return type_in<EPSTACK_ALL_POD_TYPES>(in_type(g, n, 0)); }
Result<compute_function> non_zero::compile(const graph& g, node_id n) {
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_ALL_POD_TYPES>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("NonZero", [](compute_context& ctx) { return non_zero_compute<T>(ctx); });
  });
  return r;
}

#define EPSTACK_CUMSUM_TYPES float, double, std::int32_t, std::int64_t, std::uint32_t, std::uint64_t

bool cum_sum::supports(const graph& g, node_id n) {
  const auto a = in_type(g, n, 1);
  return type_in<EPSTACK_CUMSUM_TYPES>(in_type(g, n, 0)) && (a == element_type::int32 || a == element_type::int64);
}
Result<compute_function> cum_sum::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const bool exclusive = attr_i(nd, "exclusive", 0) != 0, reverse = attr_i(nd, "reverse", 0) != 0;
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_CUMSUM_TYPES>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("CumSum", [=](compute_context& ctx) { return cum_sum_compute<T>(ctx, exclusive, reverse); });
  });
  return r;
}

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

bool einsum::supports(const graph& g, node_id n) {
  const auto t = in_type(g, n, 0);
  return !g.node(n).inputs.empty() && type_in<EPSTACK_NUMERIC_TYPES>(t) && all_inputs(g, n, t);
}
Result<compute_function> einsum::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (!has_attr(nd, "equation")) return invalid("Einsum needs the attribute equation");
  EPSTACK_ASSIGN_OR_RETURN(einsum_spec sp, parse_einsum(attr_s(nd, "equation"), nd.inputs.size()));
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_NUMERIC_TYPES>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("Einsum", [sp](compute_context& ctx) { return einsum_compute<T>(ctx, sp); });
  });
  return r;
}

bool gather_elements::supports(const graph& g, node_id n) {
  const auto i = in_type(g, n, 1);
  return type_in<EPSTACK_ALL_POD_TYPES, std::string>(in_type(g, n, 0)) &&
         (i == element_type::int32 || i == element_type::int64);
}
Result<compute_function> gather_elements::compile(const graph& g, node_id n) {
  const std::int64_t axis = attr_i(g.node(n), "axis", 0);
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_ALL_POD_TYPES, std::string>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (in_type(g, n, 1) == element_type::int32)
      r = make_fn("GatherElements", [axis](compute_context& ctx) { return gather_elements_compute<T, std::int32_t>(ctx, axis); });
    else
      r = make_fn("GatherElements", [axis](compute_context& ctx) { return gather_elements_compute<T, std::int64_t>(ctx, axis); });
  });
  return r;
}

bool tile::supports(const graph& g, node_id n) {
  const auto rt = in_type(g, n, 1);
  return type_in<EPSTACK_ALL_POD_TYPES, std::string>(in_type(g, n, 0)) &&
         (rt == element_type::int64 || rt == element_type::int32);
}
Result<compute_function> tile::compile(const graph& g, node_id n) {
  const bool v1 = opset_of(g.node(n)) < 6;
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_ALL_POD_TYPES, std::string>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("Tile", [v1](compute_context& ctx) { return tile_compute<T>(ctx, v1); });
  });
  return r;
}

bool pad::supports(const graph& g, node_id n) {
  if (opset_of(g.node(n)) >= 11 && in_type(g, n, 1) != element_type::int64) return false;
  return type_in<EPSTACK_ALL_POD_TYPES, std::string>(in_type(g, n, 0));
}
Result<compute_function> pad::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const int ver = opset_of(nd);
  pad_config c;
  const std::string mode = attr_s(nd, "mode", "constant");
  if (mode == "constant") c.mode = pad_mode::constant;
  else if (mode == "reflect") c.mode = pad_mode::reflect;
  else if (mode == "edge") c.mode = pad_mode::edge;
  else return invalid(cat("unknown mode '", mode, "'"));
  c.pads_input = ver >= 11;
  if (!c.pads_input) {
    const char* name = ver < 2 ? "paddings" : "pads";
    if (!has_attr(nd, name)) return invalid(cat("Pad before opset 11 needs the attribute ", name));
    c.attr_pads = attr_ints(nd, name);
    c.attr_value = attr_f(nd, "value", 0.0f);
  }
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_ALL_POD_TYPES, std::string>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("Pad", [c](compute_context& ctx) { return pad_compute<T>(ctx, c); });
  });
  return r;
}

}  // namespace ops
}  // namespace epstack::cpu
