// Tensors made from attributes and scalar inputs: Constant, ConstantOfShape and Range.
#include "tensor_util.hpp"

#include <utility>
#include <variant>

namespace epstack::cpu {
namespace impl {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Constants

// Copies `value` into output 0 (a fresh copy per run: the caller may own the output).
Status emit_copy(compute_context& ctx, const tensor& value) {
  tensor& y = ctx.allocate_output(0, value.type(), value.sizes());
  if (value.type() == element_type::string)
    std::copy_n(value.typed<std::string>(), value.element_count(), y.typed<std::string>());
  else if (value.byte_size() != 0)
    std::memcpy(y.mutable_data(), value.data(), value.byte_size());
  return {};
}

// The dense tensor of a sparse one: values [NNZ] at indices [NNZ] (linear) or [NNZ, rank].
Result<tensor> densify(const sparse_tensor& s) {
  for (std::int64_t d : s.dims)
    if (d < 0) return invalid(cat("sparse_value has a negative dimension: ", dims_string(s.dims)));
  tensor dense(s.values.type(), s.dims);  // zero-initialised (empty strings)
  const auto nnz = static_cast<std::int64_t>(s.values.element_count());
  if (s.indices.type() != element_type::int64 && s.indices.type() != element_type::int32)
    return invalid("sparse_value's indices must be int64 or int32");
  const std::vector<std::int64_t> ind = to_int64s(s.indices);
  const auto rank = static_cast<std::int64_t>(s.dims.size());
  const bool linear = s.indices.rank() == 1;
  if ((linear && static_cast<std::int64_t>(ind.size()) != nnz) || (!linear && static_cast<std::int64_t>(ind.size()) != nnz * rank))
    return invalid(cat("sparse_value's indices have shape ", dims_string(s.indices.sizes()), " for ", num(nnz), " values of rank ", num(rank)));
  const std::int64_t total = product(s.dims);
  const sizes_t strides = contiguous_strides(s.dims);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(nnz));
  for (std::int64_t i = 0; i < nnz; ++i) {
    std::int64_t p = 0;
    if (linear) {
      p = ind[static_cast<std::size_t>(i)];
    } else {
      for (std::int64_t k = 0; k < rank; ++k) {
        const std::int64_t v = ind[static_cast<std::size_t>(i * rank + k)];
        if (v < 0 || v >= s.dims[static_cast<std::size_t>(k)]) { p = -1; break; }
        p += v * strides[static_cast<std::size_t>(k)];
      }
    }
    if (p < 0 || p >= total) return invalid(cat("sparse_value's index ", num(i), " is out of range of ", dims_string(s.dims)));
    pos[static_cast<std::size_t>(i)] = p;
  }
  dispatch_move(dense.type(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U* v = elems<U>(s.values);
    U* d = elems<U>(dense);
    for (std::size_t i = 0; i < pos.size(); ++i) d[pos[i]] = v[i];
  });
  return dense;
}

// The value of a Constant node, from whichever attribute it has.
Result<tensor> constant_value(const node& nd) {
  const auto* a_value = attr(nd, "value");
  if (a_value != nullptr) {
    if (const auto* t = std::get_if<tensor>(&a_value->value)) return *t;
    return invalid("the value attribute is not a tensor");
  }
  if (const auto* a = attr(nd, "sparse_value")) {
    if (const auto* s = std::get_if<sparse_tensor>(&a->value)) return densify(*s);
    return invalid("the sparse_value attribute is not a sparse tensor");
  }
  if (nd.since_version >= 12) {
    if (const auto* a = attr(nd, "value_float"))
      if (const auto* v = std::get_if<float>(&a->value)) return tensor::scalar(*v);
    if (const auto* a = attr(nd, "value_int"))
      if (const auto* v = std::get_if<std::int64_t>(&a->value)) return tensor::scalar(*v);
    if (const auto* a = attr(nd, "value_string"))
      if (const auto* v = std::get_if<std::string>(&a->value)) return tensor::scalar(*v);
    if (const auto* a = attr(nd, "value_floats"))
      if (const auto* v = std::get_if<std::vector<float>>(&a->value)) {
        const std::int64_t n[] = {static_cast<std::int64_t>(v->size())};
        return tensor::from<float>(n, *v);
      }
    if (const auto* a = attr(nd, "value_ints"))
      if (const auto* v = std::get_if<std::vector<std::int64_t>>(&a->value)) {
        const std::int64_t n[] = {static_cast<std::int64_t>(v->size())};
        return tensor::from<std::int64_t>(n, *v);
      }
    if (const auto* a = attr(nd, "value_strings"))
      if (const auto* v = std::get_if<std::vector<std::string>>(&a->value)) {
        const std::int64_t n[] = {static_cast<std::int64_t>(v->size())};
        return tensor::from<std::string>(n, *v);
      }
  }
  return invalid("Constant has none of the attributes value, sparse_value, value_float(s), value_int(s), value_string(s)");
}

// ---------------------------------------------------------------------------------------------------------------
// Range

template <class T>
Status range_run(compute_context& ctx) {
  T v[3];
  static constexpr const char* names[] = {"start", "limit", "delta"};
  for (std::size_t i = 0; i < 3; ++i) {
    const tensor& t = ctx.input(i);
    if (t.type() != element_type_of_v<T>)
      return invalid(cat(names[i], " is ", to_string(t.type()), " but start is ", to_string(element_type_of_v<T>)));
    if (t.element_count() != 1) return invalid(cat(names[i], " must be a scalar, but has shape ", dims_string(t.sizes())));
    v[i] = *t.typed<T>();
  }
  // float16 and bfloat16 (Range-27) count and step in float.
  using A = std::conditional_t<is_half_v<T>, float, T>;
  const A start = static_cast<A>(v[0]), limit = static_cast<A>(v[1]), delta = static_cast<A>(v[2]);
  if (delta == A(0)) return invalid("delta is 0");
  std::int64_t n = 0;
  if constexpr (std::is_integral_v<T>) {
    const auto us = static_cast<std::uint64_t>(static_cast<std::int64_t>(start));
    const auto ul = static_cast<std::uint64_t>(static_cast<std::int64_t>(limit));
    const auto ud = static_cast<std::uint64_t>(static_cast<std::int64_t>(delta));
    if (delta > 0 && limit > start) n = static_cast<std::int64_t>((ul - us - 1) / ud + 1);
    if (delta < 0 && limit < start) n = static_cast<std::int64_t>((us - ul - 1) / (0 - ud) + 1);
  } else {
    const double c = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) / static_cast<double>(delta));
    if (!std::isfinite(c) || c > 1e15)
      return invalid(cat("the range from ", to_text(start), " to ", to_text(limit), " by ", to_text(delta), " is not finite"));
    n = c > 0 ? static_cast<std::int64_t>(c) : 0;
  }
  const std::int64_t size[] = {n};
  tensor& y = ctx.allocate_output(0, element_type_of_v<T>, size);
  T* out = y.typed<T>();
  parallel_elements(ctx, static_cast<std::size_t>(n), [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      if constexpr (std::is_integral_v<T>)
        out[i] = static_cast<T>(static_cast<std::uint64_t>(static_cast<std::int64_t>(start)) +
                                static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(static_cast<std::int64_t>(delta)));
      else
        out[i] = static_cast<T>(start + static_cast<A>(i) * delta);
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

// Constant: value, sparse_value, or (from opset 12) value_float(s), value_int(s), value_string(s).
bool constant::supports(const graph& g, node_id n) { return constant_value(g.node(n)).has_value(); }
Result<compute_function> constant::compile(const graph& g, node_id n) {
  EPSTACK_ASSIGN_OR_RETURN(tensor value, constant_value(g.node(n)));
  return make_fn("Constant", [value = std::move(value)](compute_context& ctx) { return emit_copy(ctx, value); });
}

// ConstantOfShape: the int64 shape input filled with `value` (a one-element tensor; default float 0).
bool constant_of_shape::supports(const graph& g, node_id n) {
  const tensor* v = attr_t(g.node(n), "value");
  if (has_attr(g.node(n), "value") && (v == nullptr || v->element_count() != 1)) return false;
  return has_in(g, n, 0) && index_input(g, n, 0, false);
}
Result<compute_function> constant_of_shape::compile(const graph& g, node_id n) {
  const tensor* v = attr_t(g.node(n), "value");
  if (has_attr(g.node(n), "value") && (v == nullptr || v->element_count() != 1))
    return invalid("the value attribute must be a tensor of one element");
  const tensor value = v != nullptr ? *v : tensor::scalar(0.0f);
  return make_fn("ConstantOfShape", [value](compute_context& ctx) -> Status {
    EPSTACK_ASSIGN_OR_RETURN(const auto shape, ints_of(ctx.input(0), "the shape input"));
    for (std::int64_t d : shape)
      if (d < 0) return invalid(cat("the shape ", dims_string(shape), " has a negative dimension"));
    if (!dispatch_move(value.type(), [&](auto tag) {
          using U = typename decltype(tag)::type;
          tensor& y = ctx.allocate_output(0, value.type(), shape);
          const U fill = *elems<U>(value);
          U* out = elems<U>(y);
          parallel_elements(ctx, y.element_count(), [&](std::size_t b, std::size_t e) { std::fill(out + b, out + e, fill); });
        }))
      return bad_type(value.type());
    return {};
  });
}

// Range: float, double, int16, int32, int64; float16 and bfloat16 from opset 27.
#define EPSTACK_RANGE_TYPES float, double, std::int16_t, std::int32_t, std::int64_t, ::epstack::float16, ::epstack::bfloat16
bool range::supports(const graph& g, node_id n) {
  const auto e = in_type(g, n, 0);
  if (!has_in(g, n, 0) || !has_in(g, n, 1) || !has_in(g, n, 2)) return false;
  return e == element_type::undefined || dispatch<EPSTACK_RANGE_TYPES>(e, [](auto) {});
}
Result<compute_function> range::compile(const graph& g, node_id n) {
  const auto e = in_type(g, n, 0);
  if (e != element_type::undefined) {
    Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
    dispatch<EPSTACK_RANGE_TYPES>(e, [&](auto tag) {
      using T = typename decltype(tag)::type;
      r = make_fn("Range", [](compute_context& ctx) { return range_run<T>(ctx); });
    });
    return r;
  }
  return make_fn("Range", [](compute_context& ctx) -> Status {
    Status st = invalid(cat("Range does not support ", to_string(ctx.input(0).type())));
    dispatch<EPSTACK_RANGE_TYPES>(ctx.input(0).type(), [&](auto tag) { st = range_run<typename decltype(tag)::type>(ctx); });
    return st;
  });
}

}  // namespace ops
}  // namespace epstack::cpu
