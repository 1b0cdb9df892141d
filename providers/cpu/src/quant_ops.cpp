// Numeric kernels outside the hot paths: InstanceNormalization, LRN, Det, QuantizeLinear, DequantizeLinear,
// MaxUnpool, Upsample (nearest), and the optimisers of the ai.onnx.preview.training domain (Adagrad, Momentum, Adam).
#include "kernel_util.hpp"

#include <numeric>

namespace epstack::cpu {
namespace impl {
namespace {

using dims = std::vector<std::int64_t>;


template <class F>
bool float_dispatch(element_type e, F&& f) {
  return dispatch<float, double>(e, std::forward<F>(f));
}


// Round half to even and clamp into T's range (QuantizeLinear's saturate(round(x / scale) + zero_point)).
template <class T>
T saturate_round(double v) {
  v = std::nearbyint(v);
  v = std::min(std::max(v, static_cast<double>(std::numeric_limits<T>::lowest())), static_cast<double>(std::numeric_limits<T>::max()));
  return static_cast<T>(v);
}

/// Per-axis parameters of (De)QuantizeLinear: scale and zero point for element i of x.
struct quant_axis {
  std::int64_t inner = 1, count = 1;  ///< the axis' stride and length (count 1: one scale for all)
  [[nodiscard]] std::size_t of(std::size_t i) const {
    return count == 1 ? 0 : static_cast<std::size_t>((static_cast<std::int64_t>(i) / inner) % count);
  }
};
Result<quant_axis> quant_axis_of(const tensor& x, const tensor& scale, std::int64_t axis_attr, std::string_view op) {
  quant_axis q;
  if (scale.element_count() <= 1 && scale.rank() <= 1) return q;
  if (scale.rank() != 1) return op_error(op, "the scale must be a scalar or 1-D");
  const auto axis = normalize_axis(axis_attr, x.rank());
  if (!axis) return bad_axis(axis_attr, x.rank());
  if (x.sizes()[*axis] != static_cast<std::int64_t>(scale.element_count()))
    return op_error(op, "the scale's length differs from the axis' length");
  q.count = x.sizes()[*axis];
  q.inner = product(x.sizes(), *axis + 1);
  return q;
}

}  // namespace
}  // namespace impl

namespace ops {
using namespace impl;

// ---- InstanceNormalization: per (n, c), over the spatial dims: scale * (x - mean) / sqrt(var + epsilon) + B ----
bool instance_normalization::supports(const graph& g, node_id n) { return f32_or_f64(in_type(g, n, 0)); }
Result<compute_function> instance_normalization::compile(const graph& g, node_id n) {
  const double eps = attr_f(g.node(n), "epsilon", 1e-5f);
  return make_fn("InstanceNormalization", [eps](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (x.rank() < 2) return op_error("InstanceNormalization", "the input needs rank 2 or more");
    const std::int64_t N = x.sizes()[0], C = x.sizes()[1], S = product(x.sizes(), 2);
    if (static_cast<std::int64_t>(ctx.input(1).element_count()) != C || static_cast<std::int64_t>(ctx.input(2).element_count()) != C)
      return op_error("InstanceNormalization", "scale and B must have one value per channel");
    tensor& y = ctx.allocate_output(0, x.type(), x.sizes());
    float_dispatch(x.type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* in = x.typed<T>();
      const T* sc = ctx.input(1).typed<T>();
      const T* b = ctx.input(2).typed<T>();
      T* out = y.typed<T>();
      parallel_items(ctx, static_cast<std::size_t>(N * C), static_cast<std::size_t>(S), [&](std::size_t r0, std::size_t r1) {
        for (std::size_t r = r0; r < r1; ++r) {
          const T* p = in + r * static_cast<std::size_t>(S);
          double mean = 0, var = 0;
          for (std::int64_t i = 0; i < S; ++i) mean += p[i];
          mean /= static_cast<double>(std::max<std::int64_t>(S, 1));
          for (std::int64_t i = 0; i < S; ++i) var += (p[i] - mean) * (p[i] - mean);
          var /= static_cast<double>(std::max<std::int64_t>(S, 1));
          const std::size_t c = r % static_cast<std::size_t>(C);
          const double k = sc[c] / std::sqrt(var + eps);
          for (std::int64_t i = 0; i < S; ++i) out[r * static_cast<std::size_t>(S) + static_cast<std::size_t>(i)] = static_cast<T>((p[i] - mean) * k + b[c]);
        }
      });
    });
    return {};
  });
}

// ---- LRN: x / (bias + alpha / size * sum of squares over the channel window)^beta ----
bool lrn::supports(const graph& g, node_id n) { return f32_or_f64(in_type(g, n, 0)) && has_attr(g.node(n), "size"); }
Result<compute_function> lrn::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const double alpha = attr_f(nd, "alpha", 1e-4f), beta = attr_f(nd, "beta", 0.75f), bias = attr_f(nd, "bias", 1.0f);
  const std::int64_t size = attr_i(nd, "size", 0);
  if (size < 1) return Status(errc::invalid_graph, "LRN: size must be positive");
  return make_fn("LRN", [=](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (x.rank() < 2) return op_error("LRN", "the input needs rank 2 or more");
    const std::int64_t N = x.sizes()[0], C = x.sizes()[1], S = product(x.sizes(), 2);
    const std::int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
    tensor& y = ctx.allocate_output(0, x.type(), x.sizes());
    float_dispatch(x.type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* in = x.typed<T>();
      T* out = y.typed<T>();
      for (std::int64_t nn = 0; nn < N; ++nn)
        for (std::int64_t c = 0; c < C; ++c)
          for (std::int64_t s = 0; s < S; ++s) {
            double sum = 0;
            for (std::int64_t k = std::max<std::int64_t>(0, c - lo); k <= std::min(C - 1, c + hi); ++k) {
              const double v = in[(nn * C + k) * S + s];
              sum += v * v;
            }
            const std::int64_t at = (nn * C + c) * S + s;
            out[at] = static_cast<T>(in[at] / std::pow(bias + alpha / static_cast<double>(size) * sum, beta));
          }
    });
    return {};
  });
}

// ---- Det: the determinant of each [M, M] matrix of [*, M, M], by LU with partial pivoting in double ----
bool det::supports(const graph& g, node_id n) { return f32_or_f64(in_type(g, n, 0)); }
Result<compute_function> det::compile(const graph&, node_id) {
  return make_fn("Det", [](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (x.rank() < 2 || x.sizes()[x.rank() - 1] != x.sizes()[x.rank() - 2]) return op_error("Det", "the input must be [*, M, M]");
    const std::int64_t M = x.sizes()[x.rank() - 1];
    const dims out(x.sizes().begin(), x.sizes().end() - 2);
    tensor& y = ctx.allocate_output(0, x.type(), out);
    const std::int64_t mats = product(out);
    float_dispatch(x.type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      std::vector<double> a(static_cast<std::size_t>(M * M));
      for (std::int64_t m = 0; m < mats; ++m) {
        const T* p = x.typed<T>() + m * M * M;
        std::copy(p, p + M * M, a.begin());
        double d = 1;
        for (std::int64_t c = 0; c < M && d != 0; ++c) {
          std::int64_t piv = c;
          for (std::int64_t r = c + 1; r < M; ++r)
            if (std::fabs(a[static_cast<std::size_t>(r * M + c)]) > std::fabs(a[static_cast<std::size_t>(piv * M + c)])) piv = r;
          if (a[static_cast<std::size_t>(piv * M + c)] == 0) {
            d = 0;
            break;
          }
          if (piv != c) {
            for (std::int64_t k = 0; k < M; ++k) std::swap(a[static_cast<std::size_t>(c * M + k)], a[static_cast<std::size_t>(piv * M + k)]);
            d = -d;
          }
          const double pv = a[static_cast<std::size_t>(c * M + c)];
          d *= pv;
          for (std::int64_t r = c + 1; r < M; ++r) {
            const double f = a[static_cast<std::size_t>(r * M + c)] / pv;
            for (std::int64_t k = c; k < M; ++k) a[static_cast<std::size_t>(r * M + k)] -= f * a[static_cast<std::size_t>(c * M + k)];
          }
        }
        y.typed<T>()[m] = static_cast<T>(d);
      }
    });
    return {};
  });
}

// ---- QuantizeLinear: saturate(round(x / scale) + zero_point), uint8 without a zero point; per axis from opset 13 ----
bool quantize_linear::supports(const graph& g, node_id n) {
  const auto e = in_type(g, n, 0);
  const auto z = has_in(g, n, 2) ? in_type(g, n, 2) : element_type::uint8;
  return (e == element_type::float32 || e == element_type::int32) && (z == element_type::uint8 || z == element_type::int8);
}
Result<compute_function> quantize_linear::compile(const graph& g, node_id n) {
  const std::int64_t axis = attr_i(g.node(n), "axis", 1);
  return make_fn("QuantizeLinear", [axis](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    const tensor& scale = ctx.input(1);
    const bool has_zp = ctx.has_input(2) && !ctx.input(2).empty();
    const element_type out = has_zp ? ctx.input(2).type() : element_type::uint8;
    EPSTACK_ASSIGN_OR_RETURN(auto q, quant_axis_of(x, scale, axis, "QuantizeLinear"));
    if (scale.type() != element_type::float32) return op_error("QuantizeLinear", "the scale must be float");
    tensor& y = ctx.allocate_output(0, out, x.sizes());
    const float* sc = scale.typed<float>();
    const auto run = [&](auto* o) {
      using Q = std::remove_pointer_t<decltype(o)>;
      const Q* zp = has_zp ? ctx.input(2).typed<Q>() : nullptr;
      for (std::size_t i = 0; i < x.element_count(); ++i) {
        const std::size_t k = q.of(i);
        // x / scale in float, as the reference computes it (a double quotient can round the other way at .5).
        const float v = x.type() == element_type::float32 ? x.typed<float>()[i] : static_cast<float>(x.typed<std::int32_t>()[i]);
        o[i] = saturate_round<Q>(static_cast<double>(std::nearbyint(v / sc[k])) + (zp ? zp[k] : 0));
      }
    };
    if (out == element_type::uint8) run(y.typed<std::uint8_t>());
    else run(y.typed<std::int8_t>());
    return {};
  });
}

// ---- DequantizeLinear: (x - zero_point) * scale, float ----
bool dequantize_linear::supports(const graph& g, node_id n) {
  const auto e = in_type(g, n, 0);
  return e == element_type::uint8 || e == element_type::int8 || e == element_type::int32;
}
Result<compute_function> dequantize_linear::compile(const graph& g, node_id n) {
  const std::int64_t axis = attr_i(g.node(n), "axis", 1);
  return make_fn("DequantizeLinear", [axis](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    const tensor& scale = ctx.input(1);
    const bool has_zp = ctx.has_input(2) && !ctx.input(2).empty();
    if (scale.type() != element_type::float32) return op_error("DequantizeLinear", "the scale must be float");
    if (has_zp && ctx.input(2).type() != x.type()) return op_error("DequantizeLinear", "the zero point's type differs from x's");
    EPSTACK_ASSIGN_OR_RETURN(auto q, quant_axis_of(x, scale, axis, "DequantizeLinear"));
    tensor& y = ctx.allocate_output(0, element_type::float32, x.sizes());
    const float* sc = scale.typed<float>();
    dispatch<std::uint8_t, std::int8_t, std::int32_t>(x.type(), [&](auto tag) {
      using Q = typename decltype(tag)::type;
      const Q* in = x.typed<Q>();
      const Q* zp = has_zp ? ctx.input(2).typed<Q>() : nullptr;
      for (std::size_t i = 0; i < x.element_count(); ++i) {
        const std::size_t k = q.of(i);
        y.typed<float>()[i] = static_cast<float>((static_cast<double>(in[i]) - (zp ? static_cast<double>(zp[k]) : 0.0)) * sc[k]);
      }
    });
    return {};
  });
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

// ---- The optimisers of ai.onnx.preview.training: inputs R (learning rate), T (step), then the tensors ----
namespace {
template <class F>
Status optimiser(compute_context& ctx, std::size_t groups, std::string_view op, F&& step) {
  if (ctx.input_count() < 2 || (ctx.input_count() - 2) % groups != 0) return op_error(op, "wrong number of inputs");
  const std::size_t k = (ctx.input_count() - 2) / groups;
  if (ctx.output_count() != k * (groups - 1)) return op_error(op, "wrong number of outputs");
  const double r = ctx.input(0).type() == element_type::float64 ? *ctx.input(0).typed<double>() : *ctx.input(0).typed<float>();
  const std::int64_t t = to_int64s(ctx.input(1)).front();
  for (std::size_t i = 0; i < k; ++i) {
    std::vector<const tensor*> in;
    for (std::size_t gi = 0; gi < groups; ++gi) in.push_back(&ctx.input(2 + gi * k + i));
    for (const tensor* p : in)
      if (p->type() != in[0]->type() || p->element_count() != in[0]->element_count()) return op_error(op, "the tensors differ in type or size");
    std::vector<tensor*> out;
    for (std::size_t o = 0; o + 1 < groups; ++o) out.push_back(&ctx.allocate_output(o * k + i, in[0]->type(), in[0]->sizes()));
    const bool ok = float_dispatch(in[0]->type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      for (std::size_t e = 0; e < in[0]->element_count(); ++e) step(r, t, in, out, e, T{});
    });
    if (!ok) return op_error(op, "tensors must be float or double");
  }
  return {};
}
template <class T>
double at(const tensor* p, std::size_t e, T) { return static_cast<double>(p->typed<T>()[e]); }
template <class T>
void put(tensor* p, std::size_t e, double v, T) { p->typed<T>()[e] = static_cast<T>(v); }
}  // namespace

bool adagrad::supports(const graph&, node_id) { return true; }
Result<compute_function> adagrad::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const double decay = attr_f(nd, "decay_factor", 0), eps = attr_f(nd, "epsilon", 1e-6f), norm = attr_f(nd, "norm_coefficient", 0);
  return make_fn("Adagrad", [=](compute_context& ctx) -> Status {
    // inputs X, G, H; outputs X_new, H_new
    return optimiser(ctx, 3, "Adagrad", [&](double r, std::int64_t t, auto& in, auto& out, std::size_t e, auto tag) {
      const double lr = r / (1 + static_cast<double>(t) * decay);
      const double x = at(in[0], e, tag), gr = norm * x + at(in[1], e, tag);
      const double h = at(in[2], e, tag) + gr * gr;
      put(out[0], e, x - lr * gr / (std::sqrt(h) + eps), tag);
      put(out[1], e, h, tag);
    });
  });
}
bool momentum::supports(const graph& g, node_id n) {
  const auto mode = attr_s(g.node(n), "mode", "standard");
  return mode == "standard" || mode == "nesterov";
}
Result<compute_function> momentum::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const double alpha = attr_f(nd, "alpha", 0), beta = attr_f(nd, "beta", 0), norm = attr_f(nd, "norm_coefficient", 0);
  const bool nesterov = attr_s(nd, "mode", "standard") == "nesterov";
  return make_fn("Momentum", [=](compute_context& ctx) -> Status {
    // inputs X, G, V; outputs X_new, V_new
    return optimiser(ctx, 3, "Momentum", [&](double r, std::int64_t t, auto& in, auto& out, std::size_t e, auto tag) {
      const double x = at(in[0], e, tag), gr = norm * x + at(in[1], e, tag);
      const double v = alpha * at(in[2], e, tag) + (t > 0 ? beta : 1.0) * gr;
      put(out[0], e, nesterov ? x - r * (gr + alpha * v) : x - r * v, tag);
      put(out[1], e, v, tag);
    });
  });
}
bool adam::supports(const graph&, node_id) { return true; }
Result<compute_function> adam::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const double alpha = attr_f(nd, "alpha", 0.9f), beta = attr_f(nd, "beta", 0.999f), eps = attr_f(nd, "epsilon", 1e-6f),
               norm = attr_f(nd, "norm_coefficient", 0), post = attr_f(nd, "norm_coefficient_post", 0);
  return make_fn("Adam", [=](compute_context& ctx) -> Status {
    // inputs X, G, V, H; outputs X_new, V_new, H_new
    return optimiser(ctx, 4, "Adam", [&](double r, std::int64_t t, auto& in, auto& out, std::size_t e, auto tag) {
      const double x = at(in[0], e, tag), gr = norm * x + at(in[1], e, tag);
      const double v = alpha * at(in[2], e, tag) + (1 - alpha) * gr;
      const double h = beta * at(in[3], e, tag) + (1 - beta) * gr * gr;
      const double ra = t > 0 ? r * std::sqrt(1 - std::pow(beta, static_cast<double>(t))) / (1 - std::pow(alpha, static_cast<double>(t))) : r;
      put(out[0], e, (1 - post) * (x - ra * v / (std::sqrt(h) + eps)), tag);
      put(out[1], e, v, tag);
      put(out[2], e, h, tag);
    });
  });
}

}  // namespace ops
}  // namespace epstack::cpu

// ---- ConvTranspose: N-d, groups, dilations, pads or auto_pad, output_padding, output_shape; by direct scatter ----
namespace epstack::cpu::ops {
using namespace impl;

bool conv_transpose::supports(const graph& g, node_id n) { return f32_or_f64(in_type(g, n, 0)); }
Result<compute_function> conv_transpose::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  struct params {
    std::int64_t group;
    std::vector<std::int64_t> kernel, strides, dilations, pads, out_pad, out_shape;
    std::string auto_pad;
  } p{attr_i(nd, "group", 1), attr_ints(nd, "kernel_shape"), attr_ints(nd, "strides"), attr_ints(nd, "dilations"),
      attr_ints(nd, "pads"), attr_ints(nd, "output_padding"), attr_ints(nd, "output_shape"), attr_s(nd, "auto_pad", "NOTSET")};
  if (p.group < 1) return Status(errc::invalid_graph, "ConvTranspose: group must be positive");
  return make_fn("ConvTranspose", [p](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    const tensor& w = ctx.input(1);
    const std::size_t sp = x.rank() >= 3 ? x.rank() - 2 : 0;
    if (sp == 0 || w.rank() != x.rank()) return op_error("ConvTranspose", "X and W must have the same rank, 3 or more");
    const std::int64_t N = x.sizes()[0], C = x.sizes()[1], G = p.group;
    if (w.sizes()[0] != C || C % G != 0) return op_error("ConvTranspose", "W's first dim must be X's channels, a multiple of group");
    const std::int64_t ocg = w.sizes()[1], OC = ocg * G, icg = C / G;
    const auto get = [&](const std::vector<std::int64_t>& v, std::size_t i, std::int64_t def) { return i < v.size() ? v[i] : def; };
    dims k(sp), s(sp), d(sp), pb(sp), pe(sp), in(sp), out(sp);
    for (std::size_t i = 0; i < sp; ++i) {
      k[i] = get(p.kernel, i, w.sizes()[i + 2]);
      s[i] = get(p.strides, i, 1);
      d[i] = get(p.dilations, i, 1);
      in[i] = x.sizes()[i + 2];
      if (k[i] != w.sizes()[i + 2]) return op_error("ConvTranspose", "kernel_shape does not match W");
      const std::int64_t full = s[i] * (in[i] - 1) + get(p.out_pad, i, 0) + (k[i] - 1) * d[i] + 1;
      const bool same = p.auto_pad == "SAME_UPPER" || p.auto_pad == "SAME_LOWER";
      if (!p.out_shape.empty() || same) {
        const std::int64_t want = !p.out_shape.empty() ? p.out_shape[p.out_shape.size() - sp + i] : in[i] * s[i];
        const std::int64_t total = std::max<std::int64_t>(0, full - want);
        // ONNX's rule: SAME_UPPER puts the odd one at the end, anything else at the start.
        if (p.auto_pad == "SAME_UPPER") pb[i] = total / 2, pe[i] = total - total / 2;
        else pb[i] = total - total / 2, pe[i] = total / 2;
        out[i] = want;
      } else {
        pb[i] = p.auto_pad == "VALID" ? 0 : get(p.pads, i, 0);
        pe[i] = p.auto_pad == "VALID" ? 0 : get(p.pads, i + sp, 0);
        out[i] = full - pb[i] - pe[i];
      }
      if (out[i] < 1) return op_error("ConvTranspose", "the output would be empty");
    }
    dims oshape{N, OC};
    oshape.insert(oshape.end(), out.begin(), out.end());
    tensor& y = ctx.allocate_output(0, x.type(), oshape);
    const bool has_b = ctx.has_input(2) && !ctx.input(2).empty();
    if (has_b && static_cast<std::int64_t>(ctx.input(2).element_count()) != OC) return op_error("ConvTranspose", "B must have one value per output channel");
    const std::int64_t in_sz = product(in), out_sz = product(out), k_sz = product(k);
    float_dispatch(x.type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* px = x.typed<T>();
      const T* pw = w.typed<T>();
      T* py = y.typed<T>();
      for (std::int64_t b = 0; b < N * OC; ++b)
        std::fill(py + b * out_sz, py + (b + 1) * out_sz, has_b ? ctx.input(2).typed<T>()[b % OC] : T(0));
      parallel_items(ctx, static_cast<std::size_t>(N * G), static_cast<std::size_t>(icg * in_sz * ocg * k_sz), [&](std::size_t a0, std::size_t a1) {
        std::vector<std::int64_t> ipos(sp), kpos(sp);
        for (std::size_t a = a0; a < a1; ++a) {
          const std::int64_t nn = static_cast<std::int64_t>(a) / G, gg = static_cast<std::int64_t>(a) % G;
          for (std::int64_t ic = 0; ic < icg; ++ic) {
            const std::int64_t c = gg * icg + ic;
            const T* xc = px + (nn * C + c) * in_sz;
            for (std::int64_t ii = 0; ii < in_sz; ++ii) {
              std::int64_t rest = ii;
              for (std::size_t q = sp; q-- > 0;) ipos[q] = rest % in[q], rest /= in[q];
              const T xv = xc[ii];
              for (std::int64_t kk = 0; kk < k_sz; ++kk) {
                rest = kk;
                std::int64_t o = 0;
                bool inside = true;
                for (std::size_t q = sp; q-- > 0;) {
                  kpos[q] = rest % k[q], rest /= k[q];
                }
                for (std::size_t q = 0; q < sp && inside; ++q) {
                  const std::int64_t at = ipos[q] * s[q] - pb[q] + kpos[q] * d[q];
                  inside = at >= 0 && at < out[q];
                  o = o * out[q] + at;
                }
                if (!inside) continue;
                for (std::int64_t oc = 0; oc < ocg; ++oc)
                  py[(nn * OC + gg * ocg + oc) * out_sz + o] += xv * pw[(c * ocg + oc) * k_sz + kk];
              }
            }
          }
        }
      });
    });
    return {};
  });
}

}  // namespace epstack::cpu::ops

// ---- MatMulInteger and QLinearMatMul: numpy matmul over 8-bit integers with zero points (and scales) ----
namespace epstack::cpu::impl {
namespace {


/// C = (A - za) x (B - zb) in double over numpy matmul's broadcast batch dims; za per row of A (or one), zb per
/// column of B (or one). Returns C's dims and values.
Result<std::pair<std::vector<std::int64_t>, std::vector<double>>> int_matmul(const tensor& a, const tensor& b, const tensor* za,
                                                                              const tensor* zb, double sa, double sb) {
  if (a.rank() < 1 || b.rank() < 1) return op_error("MatMulInteger", "inputs need rank 1 or more");
  std::vector<std::int64_t> ad(a.sizes().begin(), a.sizes().end()), bd(b.sizes().begin(), b.sizes().end());
  const bool a1 = ad.size() == 1, b1 = bd.size() == 1;
  if (a1) ad.insert(ad.begin(), 1);
  if (b1) bd.push_back(1);
  const std::int64_t M = ad[ad.size() - 2], K = ad.back(), N = bd.back();
  if (bd[bd.size() - 2] != K) return op_error("MatMulInteger", "inner dims differ");
  const std::size_t r = std::max(ad.size(), bd.size());
  std::vector<std::int64_t> batch(r - 2, 1);
  const auto lead = [&](const std::vector<std::int64_t>& d, std::size_t i) -> std::int64_t {
    const std::size_t off = r - d.size();
    return i < off ? 1 : d[i - off];
  };
  for (std::size_t i = 0; i + 2 < r; ++i) {
    const std::int64_t x = lead(ad, i), y = lead(bd, i);
    if (x != y && x != 1 && y != 1) return op_error("MatMulInteger", "batch dims do not broadcast");
    batch[i] = std::max(x, y);
  }
  const std::int64_t nb = product(batch);
  std::vector<double> c(static_cast<std::size_t>(nb * M * N));
  for (std::int64_t bi = 0; bi < nb; ++bi) {
    std::int64_t ao = 0, bo = 0, rest = bi, as = 1, bs = 1;
    for (std::size_t i = r - 2; i-- > 0;) {
      const std::int64_t idx = rest % batch[i];
      rest /= batch[i];
      const std::int64_t xa = lead(ad, i), xb = lead(bd, i);
      ao += (xa == 1 ? 0 : idx) * as;
      bo += (xb == 1 ? 0 : idx) * bs;
      as *= xa;
      bs *= xb;
    }
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t nn = 0; nn < N; ++nn) {
        double acc = 0;
        for (std::int64_t k = 0; k < K; ++k) {
          const double zav = za && !za->empty() ? q_at(*za, za->element_count() == 1 ? 0 : static_cast<std::size_t>(m)) : 0;
          const double zbv = zb && !zb->empty() ? q_at(*zb, zb->element_count() == 1 ? 0 : static_cast<std::size_t>(nn)) : 0;
          acc += (q_at(a, static_cast<std::size_t>((ao * M + m) * K + k)) - zav) * sa *
                 ((q_at(b, static_cast<std::size_t>((bo * K + k) * N + nn)) - zbv) * sb);
        }
        c[static_cast<std::size_t>((bi * M + m) * N + nn)] = acc;
      }
  }
  std::vector<std::int64_t> out = batch;
  if (!a1) out.push_back(M);
  if (!b1) out.push_back(N);
  return std::pair{out, std::move(c)};
}

}  // namespace
}  // namespace epstack::cpu::impl

namespace epstack::cpu::ops {
using namespace impl;

bool matmul_integer::supports(const graph& g, node_id n) { return int8ish(in_type(g, n, 0)) && int8ish(in_type(g, n, 1)); }
Result<compute_function> matmul_integer::compile(const graph&, node_id) {
  return make_fn("MatMulInteger", [](compute_context& ctx) -> Status {
    const tensor* za = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    const tensor* zb = ctx.has_input(3) ? &ctx.input(3) : nullptr;
    EPSTACK_ASSIGN_OR_RETURN(auto r, int_matmul(ctx.input(0), ctx.input(1), za, zb, 1.0, 1.0));
    tensor& y = ctx.allocate_output(0, element_type::int32, r.first);
    for (std::size_t i = 0; i < r.second.size(); ++i) y.typed<std::int32_t>()[i] = static_cast<std::int32_t>(r.second[i]);
    return {};
  });
}
bool qlinear_matmul::supports(const graph& g, node_id n) { return int8ish(in_type(g, n, 0)) && int8ish(in_type(g, n, 3)); }
Result<compute_function> qlinear_matmul::compile(const graph&, node_id) {
  return make_fn("QLinearMatMul", [](compute_context& ctx) -> Status {
    const auto scalar = [&](std::size_t i) { return static_cast<double>(*ctx.input(i).typed<float>()); };
    for (std::size_t i : {std::size_t{1}, std::size_t{4}, std::size_t{6}})
      if (ctx.input(i).type() != element_type::float32 || ctx.input(i).element_count() != 1)
        return op_error("QLinearMatMul", "scales must be float scalars (per-tensor quantization)");
    EPSTACK_ASSIGN_OR_RETURN(auto r, int_matmul(ctx.input(0), ctx.input(3), &ctx.input(2), &ctx.input(5), scalar(1), scalar(4)));
    const tensor& yz = ctx.input(7);
    tensor& y = ctx.allocate_output(0, yz.type(), r.first);
    const double ys = scalar(6), z = q_at(yz, 0);
    for (std::size_t i = 0; i < r.second.size(); ++i) {
      const double v = std::nearbyint(r.second[i] / ys) + z;
      if (yz.type() == element_type::uint8) y.typed<std::uint8_t>()[i] = static_cast<std::uint8_t>(std::clamp(v, 0.0, 255.0));
      else y.typed<std::int8_t>()[i] = static_cast<std::int8_t>(std::clamp(v, -128.0, 127.0));
    }
    return {};
  });
}

}  // namespace epstack::cpu::ops

// ---- GridSample (opset 16): X [N, C, H, W] sampled at grid [N, Ho, Wo, 2] of (x, y) in [-1, 1]; nearest, bilinear or
// bicubic; zeros, border or reflection padding; PyTorch's grid_sample, which ONNX's reference reproduces ----
namespace epstack::cpu::impl {
namespace {

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
}  // namespace epstack::cpu::impl

namespace epstack::cpu::ops {
using namespace impl;

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

}  // namespace epstack::cpu::ops
