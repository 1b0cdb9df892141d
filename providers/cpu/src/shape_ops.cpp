// Shape kernels: Reshape, Flatten, Squeeze, Unsqueeze, Identity and Dropout (views of their input: no copy), Shape
// and Size.
#include "tensor_util.hpp"

#include <memory>

namespace epstack::cpu {
namespace impl {
namespace {

// a * b, false on overflow.
bool mul_ok(std::int64_t a, std::int64_t b, std::int64_t& r) { return !__builtin_mul_overflow(a, b, &r); }

// ---------------------------------------------------------------------------------------------------------------
// Reshape and friends: views

Result<sizes_t> reshape_sizes(std::span<const std::int64_t> in, std::span<const std::int64_t> spec, bool allowzero) {
  sizes_t out(spec.size(), 0);
  std::int64_t known = 1;
  std::optional<std::size_t> infer;
  for (std::size_t i = 0; i < spec.size(); ++i) {
    const std::int64_t d = spec[i];
    if (d == -1) {
      if (infer) return invalid(cat("the shape ", dims_string(spec), " has more than one -1"));
      infer = i;
      continue;
    }
    if (d < -1) return invalid(cat("the shape ", dims_string(spec), " has a negative dimension ", num(d)));
    if (d == 0 && !allowzero) {
      if (i >= in.size())
        return invalid(cat("the shape ", dims_string(spec), " copies dimension ", num(static_cast<std::int64_t>(i)),
                           " (0) of an input of rank ", num(static_cast<std::int64_t>(in.size()))));
      out[i] = in[i];
    } else {
      out[i] = d;
    }
    if (!mul_ok(known, out[i], known)) return invalid(cat("the shape ", dims_string(spec), " is too large"));
  }
  const std::int64_t count = product(in);
  if (infer) {
    if (known == 0 || count % known != 0)
      return invalid(cat("cannot reshape ", dims_string(in), " to ", dims_string(spec), ": the -1 dimension cannot be inferred"));
    out[*infer] = count / known;
  } else if (known != count) {
    return invalid(cat("cannot reshape ", dims_string(in), " (", num(count), " elements) to ", dims_string(out), " (",
                       num(known), " elements)"));
  }
  return out;
}

Status squeeze_run(compute_context& ctx, const std::vector<std::int64_t>& axes, bool negative_ok) {
  const tensor& x = ctx.input(0);
  const auto in = x.sizes();
  std::vector<bool> drop(in.size(), false);
  if (axes.empty()) {
    for (std::size_t i = 0; i < in.size(); ++i) drop[i] = in[i] == 1;
  } else {
    for (std::int64_t a : axes) {
      EPSTACK_ASSIGN_OR_RETURN(const std::size_t ax, axis_of(a, in.size(), negative_ok));
      if (in[ax] != 1)
        return invalid(cat("cannot squeeze axis ", num(a), ": its size is ", num(in[ax]), ", not 1 (input ",
                           dims_string(in), ")"));
      drop[ax] = true;
    }
  }
  sizes_t out;
  for (std::size_t i = 0; i < in.size(); ++i)
    if (!drop[i]) out.push_back(in[i]);
  set_view(ctx, out);
  return {};
}

Status unsqueeze_run(compute_context& ctx, const std::vector<std::int64_t>& axes, bool negative_ok) {
  const tensor& x = ctx.input(0);
  const auto in = x.sizes();
  const std::size_t r = in.size() + axes.size();
  std::vector<bool> inserted(r, false);
  for (std::int64_t a : axes) {
    EPSTACK_ASSIGN_OR_RETURN(const std::size_t ax, axis_of(a, r, negative_ok));
    if (inserted[ax]) return invalid(cat("axes ", dims_string(axes), " name axis ", num(a), " twice"));
    inserted[ax] = true;
  }
  sizes_t out(r, 1);
  for (std::size_t i = 0, k = 0; i < r; ++i)
    if (!inserted[i]) out[i] = in[k++];
  set_view(ctx, out);
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// Support checks

bool has_output(const graph& g, node_id n, std::size_t i) {
  const auto& nd = g.node(n);
  return i < nd.outputs.size() && nd.outputs[i] != no_id;
}

}  // namespace
}  // namespace impl

// ---------------------------------------------------------------------------------------------------------------
// The kernel types.

namespace ops {
using namespace impl;

// Reshape: the shape as an attribute before opset 5, an int64 input since; allowzero from opset 14.
bool reshape::supports(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (!tensor_input(g, n, 0)) return false;
  if (nd.since_version < 5) return has_attr(nd, "shape");
  return has_in(g, n, 1) && index_input(g, n, 1, false);
}
Result<compute_function> reshape::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const bool from_input = nd.since_version >= 5;
  const bool allowzero = nd.since_version >= 14 && attr_i(nd, "allowzero", 0) != 0;
  if (!from_input && !has_attr(nd, "shape")) return invalid("Reshape-1 needs the shape attribute");
  const std::vector<std::int64_t> shape_attr = attr_ints(nd, "shape");
  return make_fn("Reshape", [=](compute_context& ctx) -> Status {
    std::vector<std::int64_t> spec = shape_attr;
    if (from_input) {
      EPSTACK_ASSIGN_OR_RETURN(spec, ints_of(ctx.input(1), "the shape input"));
    }
    EPSTACK_ASSIGN_OR_RETURN(const sizes_t out, reshape_sizes(ctx.input(0).sizes(), spec, allowzero));
    set_view(ctx, out);
    return {};
  });
}

// Flatten: axis in [0, rank] (negative from opset 11).
bool flatten::supports(const graph& g, node_id n) { return tensor_input(g, n, 0); }
Result<compute_function> flatten::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const std::int64_t axis = attr_i(nd, "axis", 1);
  const bool negative_ok = nd.since_version >= 11;
  return make_fn("Flatten", [=](compute_context& ctx) -> Status {
    const auto in = ctx.input(0).sizes();
    const auto r = static_cast<std::int64_t>(in.size());
    if ((axis < 0 && !negative_ok) || axis < -r || axis > r)
      return invalid(cat("axis ", num(axis), " is out of range for rank ", num(r), negative_ok ? "" : " (negative axes need opset 11)"));
    const auto a = static_cast<std::size_t>(axis < 0 ? axis + r : axis);
    const std::int64_t out[] = {product(in, 0, a), product(in, a)};
    set_view(ctx, out);
    return {};
  });
}

// Squeeze: axes as an attribute before opset 13, an optional input since; no axes: every size-1 dim.
bool squeeze::supports(const graph& g, node_id n) {
  return tensor_input(g, n, 0) && (g.node(n).since_version < 13 || index_input(g, n, 1, false));
}
Result<compute_function> squeeze::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const int version = nd.since_version;
  const std::vector<std::int64_t> axes_attr = attr_ints(nd, "axes");
  return make_fn("Squeeze", [=](compute_context& ctx) -> Status {
    std::vector<std::int64_t> axes = axes_attr;
    if (version >= 13) {
      axes.clear();
      if (ctx.has_input(1)) {
        EPSTACK_ASSIGN_OR_RETURN(axes, ints_of(ctx.input(1), "axes"));
      }
    }
    return squeeze_run(ctx, axes, version >= 11);
  });
}

// Unsqueeze: axes (required) as an attribute before opset 13, an input since.
bool unsqueeze::supports(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (!tensor_input(g, n, 0)) return false;
  if (nd.since_version < 13) return has_attr(nd, "axes");
  return has_in(g, n, 1) && index_input(g, n, 1, false);
}
Result<compute_function> unsqueeze::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const int version = nd.since_version;
  if (version < 13 && !has_attr(nd, "axes")) return invalid("Unsqueeze needs the axes attribute before opset 13");
  const std::vector<std::int64_t> axes_attr = attr_ints(nd, "axes");
  return make_fn("Unsqueeze", [=](compute_context& ctx) -> Status {
    std::vector<std::int64_t> axes = axes_attr;
    if (version >= 13) {
      if (!ctx.has_input(1)) return invalid("Unsqueeze needs the axes input from opset 13");
      EPSTACK_ASSIGN_OR_RETURN(axes, ints_of(ctx.input(1), "axes"));
    }
    return unsqueeze_run(ctx, axes, version >= 11);
  });
}

// Identity: any value (tensors, and from opset 14 sequences and optionals) passes through, sharing storage.
bool identity::supports(const graph& g, node_id n) { return has_in(g, n, 0); }
Result<compute_function> identity::compile(const graph&, node_id) {
  return make_fn("Identity", [](compute_context& ctx) -> Status {
    ctx.output_value(0) = ctx.input_value(0);
    return {};
  });
}

// Dropout as inference: output = input (a view), the optional mask all kept (ones of the data type before opset 10,
// bool true since). Before opset 7, is_test = 0 with a non-zero ratio is random dropout: not supported. From opset
// 12, training_mode true is random dropout too, unless the ratio is 0: a run-time error.
bool dropout::supports(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (!tensor_input(g, n, 0)) return false;
  const auto e = in_type(g, n, 0);
  if (e != element_type::undefined && !is_float(e)) return false;
  if (nd.since_version < 7 && attr_i(nd, "is_test", 0) == 0 && attr_f(nd, "ratio", 0.5f) != 0.0f) return false;
  return true;
}
Result<compute_function> dropout::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const int version = nd.since_version;
  if (version < 7 && attr_i(nd, "is_test", 0) == 0 && attr_f(nd, "ratio", 0.5f) != 0.0f)
    return Status(errc::not_implemented, "Dropout with is_test = 0 is random dropout, which is not supported");
  const bool want_mask = has_output(g, n, 1);
  const auto rng = std::make_shared<random_source>(nd);
  // A constant false training_mode needs no check at run time.
  bool check_training = version >= 12 && has_in(g, n, 2);
  if (const tensor* t = check_training ? constant_input(g, n, 2) : nullptr)
    if (t->type() == element_type::boolean && t->element_count() == 1 && !*t->typed<bool>()) check_training = false;
  return make_fn("Dropout", [=](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (check_training && ctx.has_input(2)) {
      const tensor& t = ctx.input(2);
      if (t.type() != element_type::boolean || t.element_count() != 1)
        return invalid(cat("training_mode must be a bool scalar, not ", to_string(t.type()), dims_string(t.sizes())));
      if (*t.typed<bool>()) {
        double ratio = 0.5;
        if (ctx.has_input(1)) {
          const tensor& r = ctx.input(1);
          if (r.element_count() != 1) return invalid(cat("ratio must be a scalar, but has shape ", dims_string(r.sizes())));
          if (!dispatch<float, double, float16, bfloat16>(r.type(), [&](auto tag) {
                using R = typename decltype(tag)::type;
                ratio = as_double(*r.typed<R>());
              }))
            return invalid(cat("ratio must be floating point, not ", to_string(r.type())));
        }
        if (ratio < 0.0 || ratio >= 1.0) return invalid(cat("ratio must be in [0, 1), got ", to_text(ratio)));
        if (ratio != 0.0) {
          // Random dropout: each element kept with probability 1 - ratio and scaled by 1 / (1 - ratio).
          tensor& y = ctx.allocate_output(0, x.type(), x.sizes());
          tensor* m = want_mask && ctx.output_count() > 1 ? &ctx.allocate_output(1, element_type::boolean, x.sizes()) : nullptr;
          std::vector<bool> keep(x.element_count());
          {
            std::lock_guard lock(rng->mu);
            std::bernoulli_distribution d(1.0 - ratio);
            for (std::size_t i = 0; i < keep.size(); ++i) keep[i] = d(rng->engine);
          }
          const double scale = 1.0 / (1.0 - ratio);
          const bool ok = dispatch<float, double, float16, bfloat16>(x.type(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            for (std::size_t i = 0; i < keep.size(); ++i) {
              const double v = keep[i] ? as_double(x.typed<T>()[i]) * scale : 0.0;
              if constexpr (is_half_v<T>) y.typed<T>()[i] = T(static_cast<float>(v));
              else y.typed<T>()[i] = static_cast<T>(v);
            }
          });
          if (!ok) return bad_type(x.type());
          if (m != nullptr)
            for (std::size_t i = 0; i < keep.size(); ++i) m->typed<bool>()[i] = keep[i];
          return {};
        }
      }
    }
    set_view(ctx, x.sizes());
    if (want_mask && ctx.output_count() > 1) {
      if (version < 10) {
        const bool ok = dispatch<float, double, float16, bfloat16>(x.type(), [&](auto tag) {
          using T = typename decltype(tag)::type;
          tensor& m = ctx.allocate_output(1, x.type(), x.sizes());
          std::fill_n(m.typed<T>(), m.element_count(), T(1.0f));
        });
        if (!ok) return bad_type(x.type());
      } else {
        tensor& m = ctx.allocate_output(1, element_type::boolean, x.sizes());
        std::fill_n(m.typed<bool>(), m.element_count(), true);
      }
    }
    return {};
  });
}

// Shape: int64 dims; from opset 15 the slice [start, end) of them, clamped to [0, rank].
bool shape::supports(const graph& g, node_id n) { return tensor_input(g, n, 0); }
Result<compute_function> shape::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const bool sliced = nd.since_version >= 15;
  const std::int64_t start_attr = sliced ? attr_i(nd, "start", 0) : 0;
  const std::optional<std::int64_t> end_attr =
      sliced && has_attr(nd, "end") ? std::optional<std::int64_t>(attr_i(nd, "end", 0)) : std::nullopt;
  return make_fn("Shape", [=](compute_context& ctx) -> Status {
    const auto in = ctx.input(0).sizes();
    const auto r = static_cast<std::int64_t>(in.size());
    auto clamp_axis = [r](std::int64_t a) { return std::clamp<std::int64_t>(a < 0 ? a + r : a, 0, r); };
    const std::int64_t b = clamp_axis(start_attr), e = end_attr ? clamp_axis(*end_attr) : r;
    const std::int64_t count[] = {std::max<std::int64_t>(e - b, 0)};
    tensor& y = ctx.allocate_output(0, element_type::int64, count);
    std::copy_n(in.begin() + b, count[0], y.typed<std::int64_t>());
    return {};
  });
}

bool size::supports(const graph& g, node_id n) { return tensor_input(g, n, 0); }
Result<compute_function> size::compile(const graph&, node_id) {
  return make_fn("Size", [](compute_context& ctx) -> Status {
    const auto count = static_cast<std::int64_t>(ctx.input(0).element_count());
    tensor& y = ctx.allocate_output(0, element_type::int64, std::span<const std::int64_t>{});
    *y.typed<std::int64_t>() = count;
    return {};
  });
}

}  // namespace ops
}  // namespace epstack::cpu
