// GatherElements: data gathered along one axis at the positions an index tensor of the output's shape gives.
#include "row_util.hpp"

namespace epstack::cpu {
namespace impl {
namespace {

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

}  // namespace
}  // namespace impl

// ---------------------------------------------------------------------------------------------------------------
// The kernel types.

namespace ops {
using namespace impl;

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

}  // namespace ops
}  // namespace epstack::cpu
