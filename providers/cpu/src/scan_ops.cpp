// Scans: NonZero (non-zeros counted per piece, then a prefix sum places each piece's coordinates) and CumSum.
#include "row_util.hpp"

#include <numeric>

namespace epstack::cpu {
namespace impl {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// NonZero

template <class T>
bool is_nonzero(const T& v) {
  if constexpr (is_half_v<T>) return static_cast<float>(v) != 0.0f;
  else if constexpr (std::is_same_v<T, bool>) return v;
  else return v != T(0);
}

template <class T>
Status non_zero_compute(compute_context& ctx) {
  const tensor& x = ctx.input(0);
  if (x.type() != element_type_of_v<T>) return invalid("unexpected element type of X");
  const std::size_t n = x.element_count();
  const std::size_t rank = x.rank();
  const T* px = x.typed<T>();
  const std::size_t pieces = ctx.thread_count() > 1 && n >= 65536
                                 ? std::min<std::size_t>(static_cast<std::size_t>(ctx.thread_count()) * 4, n / 16384)
                                 : 1;
  std::vector<std::size_t> counts(pieces + 1, 0);
  for_pieces(ctx, n, pieces, [&](std::size_t p, std::size_t b, std::size_t e) {
    std::size_t c = 0;
    for (std::size_t i = b; i < e; ++i) c += is_nonzero(px[i]) ? 1 : 0;
    counts[p + 1] = c;
  });
  std::partial_sum(counts.begin(), counts.end(), counts.begin());
  const std::size_t nnz = counts[pieces];
  // A scalar gives shape [0, nnz] (unlike numpy's [1, nnz]), as the ONNX specification says.
  const std::int64_t out[] = {static_cast<std::int64_t>(rank), static_cast<std::int64_t>(nnz)};
  std::int64_t* po = ctx.allocate_output(0, element_type::int64, out).typed<std::int64_t>();
  if (rank == 0 || nnz == 0) return {};
  const auto dims = x.sizes();
  std::vector<std::int64_t> coords(pieces * rank);
  for_pieces(ctx, n, pieces, [&](std::size_t p, std::size_t b, std::size_t e) {
    std::int64_t* c = coords.data() + p * rank;
    std::size_t rem = b;
    for (std::size_t d = rank; d-- > 0;) {
      c[d] = static_cast<std::int64_t>(rem % static_cast<std::size_t>(dims[d]));
      rem /= static_cast<std::size_t>(dims[d]);
    }
    std::size_t w = counts[p];
    for (std::size_t i = b; i < e; ++i) {
      if (is_nonzero(px[i])) {
        for (std::size_t d = 0; d < rank; ++d) po[d * nnz + w] = c[d];
        ++w;
      }
      for (std::size_t d = rank; d-- > 0;) {
        if (++c[d] < dims[d]) break;
        c[d] = 0;
      }
    }
  });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// CumSum

/// a + b, wrapping on overflow for signed integers (as two's complement hardware does) instead of undefined behaviour.
template <class T>
T add_wrap(T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return static_cast<T>(a + b);
  }
}

template <class T>
Status cum_sum_compute(compute_context& ctx, bool exclusive, bool reverse) {
  const tensor& x = ctx.input(0);
  if (x.type() != element_type_of_v<T>) return invalid("unexpected element type of x");
  EPSTACK_ASSIGN_OR_RETURN(const std::int64_t axis, scalar_int(ctx.input(1), "axis"));
  const auto ax = normalize_axis(axis, x.rank());
  if (!ax) return bad_axis(axis, x.rank());
  const auto dims = x.sizes();
  tensor& y = ctx.allocate_output(0, x.type(), dims);
  if (x.element_count() == 0) return {};
  scan_axis<T>(ctx, x.typed<T>(), y.typed<T>(), dims, *ax, exclusive, reverse, T(0),
               [](T a, T b) { return add_wrap(a, b); });
  return {};
}

}  // namespace
}  // namespace impl

// ---------------------------------------------------------------------------------------------------------------
// The kernel types.

namespace ops {
using namespace impl;

bool non_zero::supports(const graph& g, node_id n) { return type_in<EPSTACK_ALL_POD_TYPES>(in_type(g, n, 0)); }
Result<compute_function> non_zero::compile(const graph& g, node_id n) {
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_ALL_POD_TYPES>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("NonZero", [](compute_context& ctx) { return non_zero_compute<T>(ctx); });
  });
  return r;
}

#define EPSTACK_CUMSUM_TYPES float, double, std::int32_t, std::int64_t, std::uint32_t, std::uint64_t

bool cum_sum::supports(const graph& g, node_id n) {
  const auto a = in_type(g, n, 1);
  return type_in<EPSTACK_CUMSUM_TYPES>(in_type(g, n, 0)) && (a == element_type::int32 || a == element_type::int64);
}
Result<compute_function> cum_sum::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const bool exclusive = attr_i(nd, "exclusive", 0) != 0, reverse = attr_i(nd, "reverse", 0) != 0;
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_CUMSUM_TYPES>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("CumSum", [=](compute_context& ctx) { return cum_sum_compute<T>(ctx, exclusive, reverse); });
  });
  return r;
}

}  // namespace ops
}  // namespace epstack::cpu
