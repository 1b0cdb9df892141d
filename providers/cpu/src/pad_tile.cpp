// Tile and Pad: a tensor repeated along each axis, or padded (constant, reflect, edge or wrap) through per-axis index
// tables.
#include "row_util.hpp"

namespace epstack::cpu {
namespace impl {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Tile

template <class T>
Status tile_compute(compute_context& ctx, bool v1) {
  const tensor& x = ctx.input(0);
  if (x.type() != element_type_of_v<T>) return invalid("unexpected element type of input");
  const std::size_t r = x.rank();
  dims_t rep(r, 1);
  if (v1) {
    // Tile-1: inputs (input, tiles, axis): `tiles` copies along `axis`.
    EPSTACK_ASSIGN_OR_RETURN(const std::int64_t tiles, scalar_int(ctx.input(1), "tiles"));
    EPSTACK_ASSIGN_OR_RETURN(const std::int64_t axis, scalar_int(ctx.input(2), "axis"));
    const auto ax = normalize_axis(axis, r);
    if (!ax) return bad_axis(axis, r);
    rep[*ax] = tiles;
  } else {
    const tensor& rt = ctx.input(1);
    if (rt.empty()) return invalid("repeats is missing");
    if (rt.type() != element_type::int64 && rt.type() != element_type::int32)
      return invalid(cat("repeats must be an int64 tensor, got ", std::string(to_string(rt.type()))));
    if (rt.rank() != 1 || rt.element_count() != r)
      return invalid(cat("repeats must be a 1-D tensor of ", str(static_cast<std::int64_t>(r)), " elements (the rank of input), got shape ",
                         dims_string(rt.sizes())));
    rep = to_int64s(rt);
  }
  for (std::size_t d = 0; d < r; ++d)
    if (rep[d] < 0) return invalid(cat("repeats[", str(static_cast<std::int64_t>(d)), "] is negative: ", str(rep[d])));
  const auto id = x.sizes();
  dims_t od(r);
  for (std::size_t d = 0; d < r; ++d) od[d] = id[d] * rep[d];
  tensor& y = ctx.allocate_output(0, x.type(), od);
  if (y.element_count() == 0) return {};
  const T* px = x.typed<T>();
  T* py = y.typed<T>();
  if (r == 0) {
    py[0] = px[0];
    return {};
  }
  const dims_t os = strides_of(od);
  constexpr bool serial = std::is_same_v<T, std::string>;
  // Offset in the output of prefix index q over dims [0, upto) of the input.
  const auto prefix_offset = [&](std::int64_t q, std::size_t upto) {
    std::int64_t off = 0;
    for (std::size_t d = upto; d-- > 0;) {
      off += (q % id[d]) * os[d];
      q /= id[d];
    }
    return off;
  };
  // Each input row, repeated along the last axis, at the first tile of the other axes.
  const std::int64_t L = id[r - 1], R = rep[r - 1];
  const std::int64_t rows = product(id, 0, r - 1);
  auto rows_body = [&](std::size_t q0, std::size_t q1) {
    for (std::size_t q = q0; q < q1; ++q) {
      const T* s = px + static_cast<std::int64_t>(q) * L;
      T* d = py + prefix_offset(static_cast<std::int64_t>(q), r - 1);
      for (std::int64_t t = 0; t < R; ++t) std::copy_n(s, L, d + t * L);
    }
  };
  if constexpr (serial) rows_body(0, static_cast<std::size_t>(rows));
  else parallel_items(ctx, static_cast<std::size_t>(rows), static_cast<std::size_t>(L * R), rows_body);
  // Then, from the inner axes out, the filled block of axis d copied rep[d] - 1 more times.
  for (std::size_t d = r - 1; d-- > 0;) {
    if (rep[d] == 1) continue;
    const std::int64_t block = id[d] * os[d];
    const std::int64_t prefixes = product(id, 0, d);
    auto body = [&](std::size_t q0, std::size_t q1) {
      for (std::size_t q = q0; q < q1; ++q) {
        T* base = py + prefix_offset(static_cast<std::int64_t>(q), d);
        for (std::int64_t t = 1; t < rep[d]; ++t) std::copy_n(base, block, base + t * block);
      }
    };
    if constexpr (serial) body(0, static_cast<std::size_t>(prefixes));
    else parallel_items(ctx, static_cast<std::size_t>(prefixes), static_cast<std::size_t>(block * (rep[d] - 1)), body);
  }
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// Pad

enum class pad_mode { constant, reflect, edge, wrap };

struct pad_config {
  pad_mode mode = pad_mode::constant;
  bool pads_input = true;     // opset 11+: pads (and constant_value) are inputs
  bool axes_input = false;    // opset 18+: the optional input axes names the axes pads refer to
  dims_t attr_pads;           // opset < 11
  double attr_value = 0.0;    // opset < 11
};

template <class T>
Status pad_compute(compute_context& ctx, const pad_config& c) {
  const tensor& x = ctx.input(0);
  if (x.type() != element_type_of_v<T>) return invalid("unexpected element type of data");
  const std::size_t r = x.rank();
  dims_t pads = c.attr_pads;
  T fill{};
  if (c.pads_input) {
    const tensor& pt = ctx.input(1);
    if (pt.empty()) return invalid("pads is missing");
    if (pt.type() != element_type::int64) return invalid(cat("pads must be an int64 tensor, got ", std::string(to_string(pt.type()))));
    if (pt.rank() > 1) return invalid(cat("pads must be a 1-D tensor, got shape ", dims_string(pt.sizes())));
    pads = to_int64s(pt);
    if (c.axes_input && ctx.has_input(3) && !ctx.input(3).empty()) {
      // pads for the given axes only ([begin..., end...] in their order): spread over every axis, 0 elsewhere.
      const tensor& at = ctx.input(3);
      if (at.type() != element_type::int64 && at.type() != element_type::int32)
        return invalid(cat("axes must be an int64 or int32 tensor, got ", std::string(to_string(at.type()))));
      if (at.rank() > 1) return invalid(cat("axes must be a 1-D tensor, got shape ", dims_string(at.sizes())));
      const dims_t axes = to_int64s(at);
      if (pads.size() != 2 * axes.size())
        return invalid(cat("pads has ", str(static_cast<std::int64_t>(pads.size())), " values; expected 2 * the ",
                           str(static_cast<std::int64_t>(axes.size())), " axes = ", str(static_cast<std::int64_t>(2 * axes.size()))));
      dims_t full(2 * r, 0);
      std::vector<bool> seen(r, false);
      for (std::size_t i = 0; i < axes.size(); ++i) {
        const auto ax = normalize_axis(axes[i], r);
        if (!ax) return invalid(cat("axes: axis ", str(axes[i]), " is out of range for data of rank ", str(static_cast<std::int64_t>(r))));
        if (seen[*ax]) return invalid(cat("axes: axis ", str(axes[i]), " is repeated"));
        seen[*ax] = true;
        full[*ax] = pads[i];
        full[*ax + r] = pads[i + axes.size()];
      }
      pads = std::move(full);
    }
    if (ctx.has_input(2) && ctx.input(2).element_count() > 0) {
      const tensor& cv = ctx.input(2);
      if (cv.type() != x.type())
        return invalid(cat("constant_value has element type ", std::string(to_string(cv.type())), " but data has ",
                           std::string(to_string(x.type()))));
      if (cv.element_count() != 1) return invalid(cat("constant_value must be a scalar, got shape ", dims_string(cv.sizes())));
      fill = cv.typed<T>()[0];
    }
  } else {
    if constexpr (!std::is_same_v<T, std::string>) fill = from_double<T>(c.attr_value);
  }
  if (pads.size() != 2 * r)
    return invalid(cat("pads has ", str(static_cast<std::int64_t>(pads.size())), " values; expected 2 * rank = ",
                       str(static_cast<std::int64_t>(2 * r))));
  const auto id = x.sizes();
  dims_t od(r);
  std::vector<dims_t> tab(r);
  for (std::size_t d = 0; d < r; ++d) {
    const std::int64_t pb = pads[d], pe = pads[d + r];
    od[d] = id[d] + pb + pe;
    if (od[d] < 0)
      return invalid(cat("pads [", str(pb), ", ", str(pe), "] remove more than the ", str(id[d]), " elements of dimension ",
                         str(static_cast<std::int64_t>(d))));
    // The part of the input that is kept: [lo, hi).
    const std::int64_t lo = std::max<std::int64_t>(0, -pb), hi = id[d] - std::max<std::int64_t>(0, -pe);
    if (c.mode != pad_mode::constant && hi <= lo && od[d] > 0)
      return invalid(cat("dimension ", str(static_cast<std::int64_t>(d)), " has no elements to pad from in ",
                         c.mode == pad_mode::edge ? "edge" : c.mode == pad_mode::wrap ? "wrap" : "reflect", " mode"));
    auto& t = tab[d];
    t.resize(static_cast<std::size_t>(od[d]));
    for (std::int64_t j = 0; j < od[d]; ++j) {
      const std::int64_t rel = j - pb;  // position in the input
      std::int64_t v = rel;
      if (rel < lo || rel >= hi) {
        if (c.mode == pad_mode::constant) {
          v = -1;
        } else if (c.mode == pad_mode::edge) {
          v = std::clamp(rel, lo, hi - 1);
        } else if (c.mode == pad_mode::wrap) {
          // numpy's 'wrap': the kept part repeated periodically (as if it formed a torus), as often as needed.
          const std::int64_t m = hi - lo;
          std::int64_t u = (rel - lo) % m;
          if (u < 0) u += m;
          v = lo + u;
        } else {
          // numpy's 'reflect' (the edge not repeated), reflecting again when the padding is longer than the data.
          const std::int64_t m = hi - lo;
          if (m == 1) {
            v = lo;
          } else {
            const std::int64_t period = 2 * (m - 1);
            std::int64_t u = (rel - lo) % period;
            if (u < 0) u += period;
            v = lo + (u >= m ? period - u : u);
          }
        }
      }
      t[static_cast<std::size_t>(j)] = v;
    }
  }
  tensor& y = ctx.allocate_output(0, x.type(), od);
  table_gather<T>(ctx, x.typed<T>(), id, od, tab, fill, y.typed<T>());
  return {};
}

}  // namespace
}  // namespace impl

// ---------------------------------------------------------------------------------------------------------------
// The kernel types.

namespace ops {
using namespace impl;

bool tile::supports(const graph& g, node_id n) {
  const auto rt = in_type(g, n, 1);
  return type_in<EPSTACK_ALL_POD_TYPES, std::string>(in_type(g, n, 0)) &&
         (rt == element_type::int64 || rt == element_type::int32);
}
Result<compute_function> tile::compile(const graph& g, node_id n) {
  const bool v1 = opset_of(g.node(n)) < 6;
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_ALL_POD_TYPES, std::string>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("Tile", [v1](compute_context& ctx) { return tile_compute<T>(ctx, v1); });
  });
  return r;
}

bool pad::supports(const graph& g, node_id n) {
  const int ver = opset_of(g.node(n));
  if (ver >= 11 && in_type(g, n, 1) != element_type::int64) return false;
  const auto axes_t = in_type(g, n, 3);
  if (ver >= 18 && axes_t != element_type::undefined && axes_t != element_type::int64 && axes_t != element_type::int32) return false;
  return type_in<EPSTACK_ALL_POD_TYPES, std::string>(in_type(g, n, 0));
}
Result<compute_function> pad::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const int ver = opset_of(nd);
  pad_config c;
  const std::string mode = attr_s(nd, "mode", "constant");
  if (mode == "constant") c.mode = pad_mode::constant;
  else if (mode == "reflect") c.mode = pad_mode::reflect;
  else if (mode == "edge") c.mode = pad_mode::edge;
  else if (mode == "wrap" && ver >= 19) c.mode = pad_mode::wrap;
  else return invalid(cat("unknown mode '", mode, "'"));
  c.pads_input = ver >= 11;
  c.axes_input = ver >= 18;
  if (!c.pads_input) {
    const char* name = ver < 2 ? "paddings" : "pads";
    if (!has_attr(nd, name)) return invalid(cat("Pad before opset 11 needs the attribute ", name));
    c.attr_pads = attr_ints(nd, name);
    c.attr_value = attr_f(nd, "value", 0.0f);
  }
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_ALL_POD_TYPES, std::string>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("Pad", [c](compute_context& ctx) { return pad_compute<T>(ctx, c); });
  });
  return r;
}

}  // namespace ops
}  // namespace epstack::cpu
