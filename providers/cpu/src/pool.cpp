// Pooling: MaxPool (with the optional Indices output), AveragePool, GlobalAveragePool, GlobalMaxPool and MaxUnpool.
//
// Layout NCHW with any number of spatial dims. The window of every output position along each spatial dim is worked
// out once per call (first and last valid kernel taps, taps inside the padded extent); planes (one image and channel)
// go to the intra-op threads. Two spatial dims have a direct loop; other ranks walk the output and the window with
// index counters.
#include "kernel_util.hpp"

namespace epstack::cpu {
namespace impl {
namespace {

using dims = std::vector<std::int64_t>;

struct pool_attrs {
  std::string auto_pad = "NOTSET";
  std::vector<std::int64_t> kernel_shape, pads, strides, dilations;
  bool ceil_mode = false;
  bool count_include_pad = false;
  bool column_major = false;  // MaxPool storage_order = 1: Indices count in column-major order
  bool want_indices = false;
};

// The kernel taps of one output position along one spatial dim: the window starts at input coordinate `start`, tap j
// reads start + j * dilation; taps [lo, hi) are inside the input; `padded` taps are inside the padded extent.
struct window {
  std::int64_t start, lo, hi, padded;
};

// 2-D: kernel column tap kw reads input column ow * stride + off for the output columns ow in [lo, hi).
struct tap {
  std::int64_t lo, hi, off;
};

struct pool_geometry {
  std::size_t spatial = 0;
  std::int64_t N = 0, C = 0;
  tensor_sizes in, kernel, out, stride, dilation, pad_begin;
  std::int64_t in_size = 1, out_size = 1;
  std::vector<std::vector<window>> windows;  // [spatial dim][output coordinate]
  std::vector<tap> taps;                     // 2-D: the column taps that read inside the input
};

// Advances the window counters `ji` of output position `oi` to the next tap inside the input (last dim fastest);
// false after the last one.
bool next_tap(const pool_geometry& g, const tensor_sizes& oi, tensor_sizes& ji) {
  for (std::size_t i = g.spatial; i-- > 0;) {
    const window& w = g.windows[i][static_cast<std::size_t>(oi[i])];
    if (++ji[i] < w.hi) return true;
    ji[i] = w.lo;
  }
  return false;
}

Result<pool_geometry> make_geometry(const pool_attrs& at, std::span<const std::int64_t> x) {
  pool_geometry g;
  if (x.size() < 3) return Status(errc::invalid_argument, cat("X must have rank >= 3 (N, C, spatial dims), got ", dims_string(x)));
  g.spatial = x.size() - 2;
  g.N = x[0];
  g.C = x[1];
  const std::size_t S = g.spatial;
  if (at.kernel_shape.size() != S)
    return Status(errc::invalid_argument, cat("kernel_shape ", dims_string(at.kernel_shape), " must have one value per spatial dim of X ",
                                              dims_string(x)));
  if ((!at.strides.empty() && at.strides.size() != S) || (!at.dilations.empty() && at.dilations.size() != S) ||
      (!at.pads.empty() && at.pads.size() != 2 * S))
    return Status(errc::invalid_argument, cat("strides ", dims_string(at.strides), ", dilations ", dims_string(at.dilations),
                                              " or pads ", dims_string(at.pads), " do not match the ", std::to_string(S),
                                              " spatial dims of X ", dims_string(x)));
  const bool same = at.auto_pad == "SAME_UPPER" || at.auto_pad == "SAME_LOWER";
  const bool valid = at.auto_pad == "VALID";
  if (!same && !valid && at.auto_pad != "NOTSET" && !at.auto_pad.empty())
    return Status(errc::invalid_argument, cat("auto_pad '", at.auto_pad, "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID"));
  g.windows.resize(S);
  for (std::size_t i = 0; i < S; ++i) {
    const std::int64_t in = x[i + 2], k = at.kernel_shape[i];
    const std::int64_t s = at.strides.empty() ? 1 : at.strides[i];
    const std::int64_t d = at.dilations.empty() ? 1 : at.dilations[i];
    if (k <= 0 || s <= 0 || d <= 0)
      return Status(errc::invalid_argument, cat("kernel_shape ", dims_string(at.kernel_shape), ", strides and dilations must be positive"));
    std::int64_t pb = at.pads.empty() ? 0 : at.pads[i], pe = at.pads.empty() ? 0 : at.pads[i + S];
    const std::int64_t ek = (k - 1) * d + 1;  // the dilated kernel's extent
    std::int64_t o = 0;
    if (same) {
      o = (in + s - 1) / s;
      const std::int64_t total = std::max<std::int64_t>(0, (o - 1) * s + ek - in);
      pb = at.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe = total - pb;
    } else if (valid) {
      pb = pe = 0;
      o = in >= ek ? (in - ek) / s + 1 : 0;
    } else {
      if (pb < 0 || pe < 0) return Status(errc::invalid_argument, cat("pads ", dims_string(at.pads), " must not be negative"));
      const std::int64_t span = in + pb + pe - ek;
      if (span < 0) o = 0;
      else if (at.ceil_mode) {
        o = (span + s - 1) / s + 1;
        // The last window must start inside the input or its leading padding (as PyTorch and ONNX Runtime).
        if ((o - 1) * s >= in + pb) --o;
      } else {
        o = span / s + 1;
      }
    }
    auto& w = g.windows[i];
    w.resize(static_cast<std::size_t>(o));
    for (std::int64_t oc = 0; oc < o; ++oc) {
      const std::int64_t start = oc * s - pb;
      // Taps j with 0 <= start + j d < in, and with -pb <= start + j d < in + pe.
      const auto first_at_least = [&](std::int64_t bound) {  // smallest j >= 0 with start + j d >= bound
        return start >= bound ? 0 : (bound - start + d - 1) / d;
      };
      const auto count_below = [&](std::int64_t bound) {  // number of j in [0, k) with start + j d < bound
        return std::clamp<std::int64_t>(bound - start <= 0 ? 0 : (bound - start + d - 1) / d, 0, k);
      };
      const std::int64_t lo = std::min(first_at_least(0), k), hi = std::max(lo, count_below(in));
      const std::int64_t plo = std::min(first_at_least(-pb), k), phi = std::max(plo, count_below(in + pe));
      w[static_cast<std::size_t>(oc)] = {start, lo, hi, phi - plo};
    }
    g.in.push_back(in);
    g.kernel.push_back(k);
    g.out.push_back(o);
    g.stride.push_back(s);
    g.dilation.push_back(d);
    g.pad_begin.push_back(pb);
    g.in_size *= in;
    g.out_size *= o;
  }
  if (S == 2) {
    const std::int64_t W = g.in[1], OW = g.out[1], sw = g.stride[1], dw = g.dilation[1], pw = g.pad_begin[1];
    for (std::int64_t kw = 0; kw < g.kernel[1]; ++kw) {
      const std::int64_t off = kw * dw - pw;
      const std::int64_t lo = std::min(OW, off >= 0 ? 0 : (-off + sw - 1) / sw);
      const std::int64_t hi = std::max(lo, std::min(OW, W - off > 0 ? (W - off + sw - 1) / sw : 0));
      if (hi > lo) g.taps.push_back({lo, hi, off});
    }
  }
  return g;
}

// ---------------------------------------------------------------------------------------------------------------
// Per-plane pooling

// MaxPool of one plane; `idx` (or null) receives plane_base + the flattened input index of each max.
template <class T>
void max_pool_plane(const pool_geometry& g, const pool_attrs& at, const T* x, T* y, std::int64_t* idx, std::int64_t plane_base) {
  const std::size_t S = g.spatial;
  if (S == 2) {
    // Tap-major: for each output row, each kernel tap updates a run of output columns (vectorisable).
    const std::int64_t H = g.in[0], W = g.in[1], OW = g.out[1], dh = g.dilation[0], sw = g.stride[1];
    const auto& taps = g.taps;
    for (std::int64_t oh = 0; oh < g.out[0]; ++oh) {
      const window& a = g.windows[0][static_cast<std::size_t>(oh)];
      T* yr = y + oh * OW;
      std::int64_t* ir = idx != nullptr ? idx + oh * OW : nullptr;
      std::fill_n(yr, OW, std::numeric_limits<T>::lowest());
      if (ir != nullptr) std::fill_n(ir, OW, std::int64_t{-1});
      for (std::int64_t jh = a.lo; jh < a.hi; ++jh) {
        const std::int64_t h = a.start + jh * dh;
        const T* row = x + h * W;
        for (const tap& t : taps) {
          if (ir == nullptr) {
            const T* in = row + t.off;
            // Strides 1 and 2 as constants: the compiler vectorises them (de-interleaving for 2).
            if (sw == 1)
              for (std::int64_t ow = t.lo; ow < t.hi; ++ow) yr[ow] = yr[ow] < in[ow] ? in[ow] : yr[ow];
            else if (sw == 2)
              for (std::int64_t ow = t.lo; ow < t.hi; ++ow) yr[ow] = yr[ow] < in[2 * ow] ? in[2 * ow] : yr[ow];
            else
              for (std::int64_t ow = t.lo; ow < t.hi; ++ow) yr[ow] = yr[ow] < in[ow * sw] ? in[ow * sw] : yr[ow];
          } else {
            // Taps come in row-major window order and only a strictly larger value replaces the best: the first
            // maximum wins.
            const std::int64_t base = plane_base + (at.column_major ? h : h * W);
            const std::int64_t wmul = at.column_major ? H : 1;
            for (std::int64_t ow = t.lo; ow < t.hi; ++ow) {
              const std::int64_t w = ow * sw + t.off;
              const bool b = ir[ow] < 0 || yr[ow] < row[w];
              yr[ow] = b ? row[w] : yr[ow];
              ir[ow] = b ? base + w * wmul : ir[ow];
            }
          }
        }
      }
    }
    return;
  }
  // Any spatial rank: counters over the output and over the window.
  tensor_sizes oi(S, 0), ji(S, 0), in_stride(S, 1), col_stride(S, 1);
  for (std::size_t i = S - 1; i-- > 0;) in_stride[i] = in_stride[i + 1] * g.in[i + 1];
  for (std::size_t i = 1; i < S; ++i) col_stride[i] = col_stride[i - 1] * g.in[i - 1];
  for (std::int64_t o = 0; o < g.out_size; ++o) {
    T best = std::numeric_limits<T>::lowest();
    std::int64_t best_at = -1;
    bool empty = false;
    for (std::size_t i = 0; i < S; ++i) {
      const window& w = g.windows[i][static_cast<std::size_t>(oi[i])];
      ji[i] = w.lo;
      empty = empty || w.lo >= w.hi;
    }
    while (!empty) {
      std::int64_t off = 0, col = 0;
      for (std::size_t i = 0; i < S; ++i) {
        const std::int64_t p = g.windows[i][static_cast<std::size_t>(oi[i])].start + ji[i] * g.dilation[i];
        off += p * in_stride[i];
        col += p * col_stride[i];
      }
      if (best_at < 0 || best < x[off]) {
        best = x[off];
        best_at = at.column_major ? col : off;
      }
      if (!next_tap(g, oi, ji)) break;
    }
    y[o] = best;
    if (idx != nullptr) idx[o] = best_at < 0 ? -1 : plane_base + best_at;
    for (std::size_t i = S; i-- > 0;) {
      if (++oi[i] < g.out[i]) break;
      oi[i] = 0;
    }
  }
}

// AveragePool of one plane.
template <class T>
void average_pool_plane(const pool_geometry& g, const pool_attrs& at, const T* x, T* y) {
  const std::size_t S = g.spatial;
  if (S == 2) {
    // Tap-major, as MaxPool: each kernel tap adds into a run of output columns, then each column is divided.
    const std::int64_t W = g.in[1], OW = g.out[1], dh = g.dilation[0], sw = g.stride[1];
    const auto& taps = g.taps;
    const auto& ww = g.windows[1];
    for (std::int64_t oh = 0; oh < g.out[0]; ++oh) {
      const window& a = g.windows[0][static_cast<std::size_t>(oh)];
      T* yr = y + oh * OW;
      std::fill_n(yr, OW, T(0));
      for (std::int64_t jh = a.lo; jh < a.hi; ++jh) {
        const T* row = x + (a.start + jh * dh) * W;
        for (const tap& t : taps) {
          const T* in = row + t.off;
          if (sw == 1)
            for (std::int64_t ow = t.lo; ow < t.hi; ++ow) yr[ow] += in[ow];
          else if (sw == 2)
            for (std::int64_t ow = t.lo; ow < t.hi; ++ow) yr[ow] += in[2 * ow];
          else
            for (std::int64_t ow = t.lo; ow < t.hi; ++ow) yr[ow] += in[ow * sw];
        }
      }
      for (std::int64_t ow = 0; ow < OW; ++ow) {
        const window& b = ww[static_cast<std::size_t>(ow)];
        const std::int64_t count = at.count_include_pad ? a.padded * b.padded : (a.hi - a.lo) * (b.hi - b.lo);
        yr[ow] = count > 0 ? yr[ow] / static_cast<T>(count) : std::numeric_limits<T>::quiet_NaN();
      }
    }
    return;
  }
  tensor_sizes oi(S, 0), ji(S, 0), in_stride(S, 1);
  for (std::size_t i = S - 1; i-- > 0;) in_stride[i] = in_stride[i + 1] * g.in[i + 1];
  for (std::int64_t o = 0; o < g.out_size; ++o) {
    T sum = 0;
    std::int64_t valid = 1, padded = 1;
    for (std::size_t i = 0; i < S; ++i) {
      const window& w = g.windows[i][static_cast<std::size_t>(oi[i])];
      ji[i] = w.lo;
      valid *= w.hi - w.lo;
      padded *= w.padded;
    }
    if (valid > 0)
      for (;;) {
        std::int64_t off = 0;
        for (std::size_t i = 0; i < S; ++i)
          off += (g.windows[i][static_cast<std::size_t>(oi[i])].start + ji[i] * g.dilation[i]) * in_stride[i];
        sum += x[off];
        if (!next_tap(g, oi, ji)) break;
      }
    const std::int64_t count = at.count_include_pad ? padded : valid;
    y[o] = count > 0 ? sum / static_cast<T>(count) : std::numeric_limits<T>::quiet_NaN();
    for (std::size_t i = S; i-- > 0;) {
      if (++oi[i] < g.out[i]) break;
      oi[i] = 0;
    }
  }
}

template <class T>
Status expect_type(const tensor& t) {
  if (t.type() != element_type_of_v<T>)
    return Status(errc::invalid_argument, cat("X must be ", std::string(to_string(element_type_of_v<T>)), ", got ",
                                              std::string(to_string(t.type()))));
  return {};
}

template <class T, bool Max>
Status pool_compute(const pool_attrs& at, compute_context& ctx) {
  const tensor& x = ctx.input(0);
  EPSTACK_RETURN_IF_ERROR(expect_type<T>(x));
  EPSTACK_ASSIGN_OR_RETURN(const pool_geometry g, make_geometry(at, x.sizes()));
  tensor_sizes out_dims{g.N, g.C};
  out_dims.insert(out_dims.end(), g.out.begin(), g.out.end());
  tensor& y = ctx.allocate_output(0, x.type(), out_dims);
  std::int64_t* pi = nullptr;
  if (Max && at.want_indices) pi = ctx.allocate_output(1, element_type::int64, out_dims).template typed<std::int64_t>();
  if (y.element_count() == 0) return {};
  const T* px = x.typed<T>();
  T* py = y.typed<T>();
  std::int64_t kernel_size = 1;
  for (auto k : g.kernel) kernel_size *= k;
  parallel_items(ctx, static_cast<std::size_t>(g.N * g.C), static_cast<std::size_t>(g.out_size * kernel_size),
                 [&](std::size_t p0, std::size_t p1) {
                   for (std::size_t pl = p0; pl < p1; ++pl) {
                     const auto p = static_cast<std::int64_t>(pl);
                     if constexpr (Max)
                       max_pool_plane(g, at, px + p * g.in_size, py + p * g.out_size, pi != nullptr ? pi + p * g.out_size : nullptr,
                                      p * g.in_size);
                     else
                       average_pool_plane(g, at, px + p * g.in_size, py + p * g.out_size);
                   }
                 });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// Global pooling: one value per plane.



template <class T, bool Max>
T reduce_plane(const T* x, std::size_t n) {
  T acc[lanes];
  for (std::size_t j = 0; j < lanes; ++j) acc[j] = Max ? x[0] : T(0);
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (std::size_t j = 0; j < lanes; ++j) {
      if constexpr (Max) acc[j] = acc[j] < x[i + j] ? x[i + j] : acc[j];
      else acc[j] += x[i + j];
    }
  for (std::size_t j = 0; i + j < n; ++j) {  // the tail, into the lanes too
    if constexpr (Max) acc[j] = acc[j] < x[i + j] ? x[i + j] : acc[j];
    else acc[j] += x[i + j];
  }
  const T r = fold_lanes(acc, [](T a, T b) {
    if constexpr (Max) return a < b ? b : a;
    else return a + b;
  });
  return Max ? r : r / static_cast<T>(n);
}

template <class T, bool Max>
Status global_pool_compute(compute_context& ctx) {
  const tensor& x = ctx.input(0);
  EPSTACK_RETURN_IF_ERROR(expect_type<T>(x));
  const auto dims = x.sizes();
  if (dims.size() < 2) return Status(errc::invalid_argument, cat("X must have rank >= 2 (N, C, spatial dims), got ", dims_string(dims)));
  tensor_sizes out_dims(dims.size(), 1);
  out_dims[0] = dims[0];
  out_dims[1] = dims[1];
  tensor& y = ctx.allocate_output(0, x.type(), out_dims);
  const std::int64_t planes = dims[0] * dims[1], n = product(dims, 2);
  if (planes == 0) return {};
  T* py = y.typed<T>();
  if (n == 0) {
    // Pooling over nothing: the max is undefined, the mean 0/0.
    std::fill_n(py, planes, Max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::quiet_NaN());
    return {};
  }
  const T* px = x.typed<T>();
  parallel_items(ctx, static_cast<std::size_t>(planes), static_cast<std::size_t>(n), [&](std::size_t p0, std::size_t p1) {
    for (std::size_t p = p0; p < p1; ++p) py[p] = reduce_plane<T, Max>(px + static_cast<std::int64_t>(p) * n, static_cast<std::size_t>(n));
  });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// Compile helpers

bool has_out(const graph& g, node_id n, std::size_t i) {
  return i < g.node(n).outputs.size() && g.node(n).outputs[i] != no_id;
}

pool_attrs read_attrs(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  pool_attrs at;
  at.auto_pad = attr_s(nd, "auto_pad", "NOTSET");
  at.kernel_shape = attr_ints(nd, "kernel_shape");
  at.pads = attr_ints(nd, "pads");
  at.strides = attr_ints(nd, "strides");
  at.dilations = attr_ints(nd, "dilations");
  at.ceil_mode = attr_i(nd, "ceil_mode", 0) != 0;
  at.count_include_pad = attr_i(nd, "count_include_pad", 0) != 0;
  at.column_major = attr_i(nd, "storage_order", 0) != 0;
  at.want_indices = has_out(g, n, 1);
  return at;
}

bool auto_pad_known(const graph& g, node_id n) {
  const auto ap = attr_s(g.node(n), "auto_pad", "NOTSET");
  return ap == "NOTSET" || ap == "VALID" || ap == "SAME_UPPER" || ap == "SAME_LOWER";
}


}  // namespace
}  // namespace impl

// ---------------------------------------------------------------------------------------------------------------
// The kernel types.

namespace ops {
using namespace impl;

bool max_pool::supports(const graph& g, node_id n) {
  const auto e = in_type(g, n, 0);
  const bool bytes = (e == element_type::int8 || e == element_type::uint8) && g.node(n).since_version >= 12;
  return (f32_or_f64(e) || bytes) && auto_pad_known(g, n);
}
Result<compute_function> max_pool::compile(const graph& g, node_id n) {
  const pool_attrs at = read_attrs(g, n);
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<float, double, std::int8_t, std::uint8_t>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("MaxPool", [at](compute_context& ctx) { return pool_compute<T, true>(at, ctx); });
  });
  return r;
}

bool average_pool::supports(const graph& g, node_id n) {
  return f32_or_f64(in_type(g, n, 0)) && auto_pad_known(g, n);
}
Result<compute_function> average_pool::compile(const graph& g, node_id n) {
  const pool_attrs at = read_attrs(g, n);
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<float, double>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("AveragePool", [at](compute_context& ctx) { return pool_compute<T, false>(at, ctx); });
  });
  return r;
}

bool global_average_pool::supports(const graph& g, node_id n) { return f32_or_f64(in_type(g, n, 0)); }
Result<compute_function> global_average_pool::compile(const graph& g, node_id n) {
  if (in_type(g, n, 0) == element_type::float32) return make_fn("GlobalAveragePool", global_pool_compute<float, false>);
  return make_fn("GlobalAveragePool", global_pool_compute<double, false>);
}
bool global_max_pool::supports(const graph& g, node_id n) { return f32_or_f64(in_type(g, n, 0)); }
Result<compute_function> global_max_pool::compile(const graph& g, node_id n) {
  if (in_type(g, n, 0) == element_type::float32) return make_fn("GlobalMaxPool", global_pool_compute<float, true>);
  return make_fn("GlobalMaxPool", global_pool_compute<double, true>);
}

// ---- MaxUnpool: zeros, with each value of X at its index (flat over the whole output) ----
bool max_unpool::supports(const graph& g, node_id n) { return f32_or_f64(in_type(g, n, 0)) && has_attr(g.node(n), "kernel_shape"); }
Result<compute_function> max_unpool::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const auto kernel = attr_ints(nd, "kernel_shape");
  const auto strides_attr = attr_ints(nd, "strides"), pads_attr = attr_ints(nd, "pads");
  return make_fn("MaxUnpool", [=](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    const auto idx = to_int64s(ctx.input(1));
    const std::size_t sp = kernel.size();
    if (x.rank() != sp + 2 || idx.size() != x.element_count()) return op_error("MaxUnpool", "X, I and kernel_shape do not agree");
    // The indices (MaxPool's) are flat over the default output shape; a larger output_shape keeps each value at the
    // same coordinates (the reference's reading, not ONNX Runtime's).
    dims def(x.sizes().begin(), x.sizes().end());
    for (std::size_t d = 0; d < sp; ++d) {
      const std::int64_t s = d < strides_attr.size() ? strides_attr[d] : 1;
      const std::int64_t pb = d < pads_attr.size() ? pads_attr[d] : 0, pe = d + sp < pads_attr.size() ? pads_attr[d + sp] : 0;
      def[d + 2] = (x.sizes()[d + 2] - 1) * s - pb - pe + kernel[d];
    }
    dims out = def;
    if (ctx.has_input(2) && !ctx.input(2).empty()) {
      out = to_int64s(ctx.input(2));
      if (out.size() != x.rank()) return op_error("MaxUnpool", "output_shape has the wrong rank");
      for (std::size_t d = 0; d < out.size(); ++d)
        if (out[d] < def[d]) return op_error("MaxUnpool", "output_shape is smaller than the unpooled shape");
    }
    tensor& y = ctx.allocate_output(0, x.type(), out);
    std::memset(y.mutable_data(), 0, y.byte_size());
    const std::int64_t total = product(def);
    const std::size_t es = element_size(x.type());
    for (std::size_t i = 0; i < idx.size(); ++i) {
      if (idx[i] < 0 || idx[i] >= total) return op_error("MaxUnpool", cat("index ", std::to_string(idx[i]), " is outside the output"));
      std::int64_t rest = idx[i], flat = 0, stride = 1;
      for (std::size_t d = def.size(); d-- > 0;) {
        flat += (rest % def[d]) * stride;
        rest /= def[d];
        stride *= out[d];
      }
      std::memcpy(y.mutable_data() + static_cast<std::size_t>(flat) * es, x.data() + i * es, es);
    }
    return {};
  });
}

}  // namespace ops
}  // namespace epstack::cpu
