// TopK: the k largest (or smallest) values along an axis and their indices, rows split across the intra-op threads.
#include "row_util.hpp"

#include <numeric>

namespace epstack::cpu {
namespace impl {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// TopK

/// The type values of T are compared and summed in: float for the 16-bit floats, T otherwise.
template <class T>
using arith_t = std::conditional_t<is_half_v<T>, float, T>;
template <class T>
arith_t<T> arith(T v) {
  if constexpr (is_half_v<T>) return static_cast<float>(v);
  else return v;
}

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

}  // namespace ops
}  // namespace epstack::cpu
