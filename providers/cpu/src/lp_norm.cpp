// LpNormalization (opsets 1 and 22): x divided by its L1 or L2 norm along one axis; a zero norm gives zeros.
#include "row_util.hpp"

namespace epstack::cpu {
namespace impl {
namespace {

/// Element value as the type norms are accumulated in (double; the 16-bit floats through float).
template <class T>
double widen(T v) {
  if constexpr (is_half_v<T>) return static_cast<float>(v);
  else return static_cast<double>(v);
}

/// y = x / ||x||_p along `axis_attr`; columns of the [outer, n, inner] view are taken in blocks of up to `block`
/// contiguous positions, so that every pass over a row reads contiguous memory.
template <class T>
Status lp_norm_compute(compute_context& ctx, std::int64_t axis_attr, std::int64_t p) {
  const tensor& x = ctx.input(0);
  if (x.type() != element_type_of_v<T>) return invalid("unexpected element type of input");
  const auto ax = normalize_axis(axis_attr, x.rank());
  if (!ax) return bad_axis(axis_attr, x.rank());
  const auto dims = x.sizes();
  tensor& y = ctx.allocate_output(0, x.type(), dims);
  const std::int64_t outer = product(dims, 0, *ax), n = dims[*ax], inner = product(dims, *ax + 1);
  if (outer * n * inner == 0) return {};
  const T* px = x.typed<T>();
  T* py = y.typed<T>();
  constexpr std::int64_t block = 256;
  const std::int64_t blocks = (inner + block - 1) / block;
  const auto units = static_cast<std::size_t>(outer * blocks);
  parallel_items(ctx, units, static_cast<std::size_t>(n * std::min(inner, block) * 2), [&](std::size_t u0, std::size_t u1) {
    std::vector<double> acc(static_cast<std::size_t>(std::min(inner, block)));
    for (std::size_t u = u0; u < u1; ++u) {
      const std::int64_t o = static_cast<std::int64_t>(u) / blocks, b = static_cast<std::int64_t>(u) % blocks;
      const std::int64_t i0 = b * block, w = std::min(block, inner - i0);
      const std::int64_t base = o * n * inner + i0;
      std::fill_n(acc.begin(), w, 0.0);
      for (std::int64_t j = 0; j < n; ++j) {
        const T* row = px + base + j * inner;
        if (p == 1)
          for (std::int64_t i = 0; i < w; ++i) acc[static_cast<std::size_t>(i)] += std::fabs(widen(row[i]));
        else
          for (std::int64_t i = 0; i < w; ++i) {
            const double v = widen(row[i]);
            acc[static_cast<std::size_t>(i)] += v * v;
          }
      }
      // The reciprocal of each norm; a zero norm (all zeros) gives zeros rather than NaN.
      for (std::int64_t i = 0; i < w; ++i) {
        double& a = acc[static_cast<std::size_t>(i)];
        const double norm = p == 1 ? a : std::sqrt(a);
        a = norm == 0 ? 0.0 : 1.0 / norm;
      }
      for (std::int64_t j = 0; j < n; ++j) {
        const T* row = px + base + j * inner;
        T* out = py + base + j * inner;
        for (std::int64_t i = 0; i < w; ++i) out[i] = from_double<T>(widen(row[i]) * acc[static_cast<std::size_t>(i)]);
      }
    }
  });
  return {};
}

}  // namespace
}  // namespace impl

namespace ops {
using namespace impl;

bool lp_normalization::supports(const graph& g, node_id n) {
  const auto t = in_type(g, n, 0);
  if (opset_of(g.node(n)) >= 22 && t == element_type::bfloat16) return true;
  return type_in<float, double, float16>(t);
}
Result<compute_function> lp_normalization::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const std::int64_t axis = attr_i(nd, "axis", -1), p = attr_i(nd, "p", 2);
  if (p != 1 && p != 2) return invalid(cat("LpNormalization: p must be 1 or 2, got ", str(p)));
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<float, double, float16, bfloat16>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("LpNormalization", [=](compute_context& ctx) { return lp_norm_compute<T>(ctx, axis, p); });
  });
  return r;
}

}  // namespace ops
}  // namespace epstack::cpu
