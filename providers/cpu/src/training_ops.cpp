// The optimisers of the ai.onnx.preview.training domain: Adagrad, Momentum and Adam.
#include "kernel_util.hpp"

namespace epstack::cpu {
namespace ops {
using namespace impl;

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
