// Random kernels: RandomUniform, RandomUniformLike, RandomNormal, RandomNormalLike, Bernoulli. Seeded by the node's
// `seed` attribute when it has one; values cannot match another engine's, so the conformance runner checks their
// shape, type and range.
#include "kernel_util.hpp"

namespace epstack::cpu {
namespace impl {
namespace {

template <class Dist>
Status fill_random(compute_context& ctx, random_source& rng, element_type e, std::span<const std::int64_t> shape, Dist dist) {
  tensor& y = ctx.allocate_output(0, e, shape);
  std::lock_guard lock(rng.mu);
  const bool ok = dispatch<float, double, float16, bfloat16>(e, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (std::size_t i = 0; i < y.element_count(); ++i) {
      const double v = dist(rng.engine);
      if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) y.typed<T>()[i] = T(static_cast<float>(v));
      else y.typed<T>()[i] = static_cast<T>(v);
    }
  });
  if (!ok) return Status(errc::invalid_argument, cat("random values of type ", std::string(to_string(e)), " are not supported"));
  return {};
}

element_type dtype_of(const node& nd, element_type def) {
  return has_attr(nd, "dtype") ? static_cast<element_type>(attr_i(nd, "dtype", 1)) : def;
}
bool random_type(element_type e) {
  return e == element_type::float32 || e == element_type::float64 || e == element_type::float16 || e == element_type::bfloat16;
}

/// RandomUniform(Like), RandomNormal(Like): values from `dist`, in `dtype` (default float; for the Like ops without
/// one, the input's type), shaped by the `shape` attribute or, for the Like ops, by the input.
template <class Dist>
compute_function random_kernel(const node& nd, std::string op, bool like, Dist dist) {
  const bool has_dtype = has_attr(nd, "dtype");
  const auto e = dtype_of(nd, element_type::float32);
  const auto shape = attr_ints(nd, "shape");
  auto rng = std::make_shared<random_source>(nd);
  return make_fn(std::move(op), [=](compute_context& ctx) {
    if (!like) return fill_random(ctx, *rng, e, shape, dist);
    return fill_random(ctx, *rng, has_dtype ? e : ctx.input(0).type(), ctx.input(0).sizes(), dist);
  });
}

}  // namespace
}  // namespace impl

namespace ops {
using namespace impl;

bool random_uniform::supports(const graph& g, node_id n) { return random_type(dtype_of(g.node(n), element_type::float32)); }
Result<compute_function> random_uniform::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  return random_kernel(nd, "RandomUniform", false, std::uniform_real_distribution<double>(attr_f(nd, "low", 0.0f), attr_f(nd, "high", 1.0f)));
}
bool random_uniform_like::supports(const graph& g, node_id n) { return random_type(dtype_of(g.node(n), in_type(g, n, 0))); }
Result<compute_function> random_uniform_like::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  return random_kernel(nd, "RandomUniformLike", true, std::uniform_real_distribution<double>(attr_f(nd, "low", 0.0f), attr_f(nd, "high", 1.0f)));
}
bool random_normal::supports(const graph& g, node_id n) { return random_type(dtype_of(g.node(n), element_type::float32)); }
Result<compute_function> random_normal::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  return random_kernel(nd, "RandomNormal", false, std::normal_distribution<double>(attr_f(nd, "mean", 0.0f), attr_f(nd, "scale", 1.0f)));
}
bool random_normal_like::supports(const graph& g, node_id n) { return random_type(dtype_of(g.node(n), in_type(g, n, 0))); }
Result<compute_function> random_normal_like::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  return random_kernel(nd, "RandomNormalLike", true, std::normal_distribution<double>(attr_f(nd, "mean", 0.0f), attr_f(nd, "scale", 1.0f)));
}

// Bernoulli: 1 with the probability each input element gives, else 0, in `dtype` (default the input's type).
bool bernoulli::supports(const graph& g, node_id n) {
  const auto e = in_type(g, n, 0);
  return e == element_type::float32 || e == element_type::float64;
}
Result<compute_function> bernoulli::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const bool has_dtype = has_attr(nd, "dtype");
  const auto e = dtype_of(nd, element_type::float32);
  auto rng = std::make_shared<random_source>(nd);
  return make_fn("Bernoulli", [=](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    const element_type out = has_dtype ? e : x.type();
    tensor& y = ctx.allocate_output(0, out, x.sizes());
    std::vector<bool> hit(x.element_count());
    {
      std::lock_guard lock(rng->mu);
      std::uniform_real_distribution<double> u(0.0, 1.0);
      for (std::size_t i = 0; i < hit.size(); ++i) {
        const double p = x.type() == element_type::float64 ? x.typed<double>()[i] : x.typed<float>()[i];
        hit[i] = u(rng->engine) < p;
      }
    }
    const bool ok = dispatch<EPSTACK_ALL_POD_TYPES>(out, [&](auto tag) {
      using T = typename decltype(tag)::type;
      for (std::size_t i = 0; i < hit.size(); ++i) y.typed<T>()[i] = static_cast<T>(hit[i] ? 1.0f : 0.0f);
    });
    if (!ok) return Status(errc::invalid_argument, "Bernoulli: unsupported dtype");
    return {};
  });
}

}  // namespace ops
}  // namespace epstack::cpu
