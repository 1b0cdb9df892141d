// Quantization kernels: QuantizeLinear, DequantizeLinear, and the 8-bit integer matrix products MatMulInteger and
// QLinearMatMul.
#include "kernel_util.hpp"

#include <utility>

namespace epstack::cpu {
namespace impl {
namespace {

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

/// C = (A - za) x (B - zb) in double over numpy matmul's broadcast batch dims; za per row of A (or one), zb per
/// column of B (or one). Returns C's dims and values.
Result<std::pair<std::vector<std::int64_t>, std::vector<double>>> int_matmul(const tensor& a, const tensor& b, const tensor* za,
                                                                              const tensor* zb, double sa, double sb) {
  if (a.rank() < 1 || b.rank() < 1) return op_error("MatMulInteger", "inputs need rank 1 or more");
  // A 1-D A is a row [1, K], a 1-D B a column [K, 1] (the leading 1 is pushed before the dims are appended: an
  // insert at the front trips g++-12's -Warray-bounds here).
  const bool a1 = a.rank() == 1, b1 = b.rank() == 1;
  std::vector<std::int64_t> ad, bd(b.sizes().begin(), b.sizes().end());
  if (a1) ad.push_back(1);
  ad.insert(ad.end(), a.sizes().begin(), a.sizes().end());
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
}  // namespace impl

namespace ops {
using namespace impl;

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

// ---- MatMulInteger and QLinearMatMul: numpy matmul over 8-bit integers with zero points (and scales) ----
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

}  // namespace ops
}  // namespace epstack::cpu
