// Lowering the operations that move data: Transpose, Reshape and its kin, Concat, Split (plan_builder.hpp).
#include "plan_builder.hpp"

namespace epstack::dnnl_ep {

Status plan_builder::transpose(const ir_op& op) {
  const dims in = dims_of(op.in[0]);
  const std::size_t n = in.size();
  std::vector<std::int64_t> perm = op.perm;
  if (perm.empty())
    for (std::size_t i = 0; i < n; ++i) perm.push_back(static_cast<std::int64_t>(n - 1 - i));
  if (perm.size() != n) return fail("perm has " + std::to_string(perm.size()) + " entries for input " + str(in));
  std::vector<bool> seen(n);
  dims out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t p = perm[i] < 0 ? perm[i] + static_cast<std::int64_t>(n) : perm[i];
    if (p < 0 || p >= static_cast<std::int64_t>(n) || seen[static_cast<std::size_t>(p)]) return fail("perm is not a permutation");
    seen[static_cast<std::size_t>(p)] = true;
    perm[i] = p;
    out[i] = in[static_cast<std::size_t>(p)];
  }
  const int s = slot_of(op.in[0]);
  if (n <= 1) {
    define(op.out, s, in);
    return {};
  }
  // A transposition of strided memory is a view: the same buffer with permuted strides. Consumers that read any
  // strides (matrix products, element-wise and binary primitives) take it as it is; those that need row-major
  // memory reorder it once.
  if (const auto st = strides_of(md_of(s)); st && st->size() == n) {
    dims vs(n);
    for (std::size_t i = 0; i < n; ++i) vs[i] = (*st)[static_cast<std::size_t>(perm[i])];
    define(op.out, alias(s, strided(out, vs)), out);
    return {};
  }
  const md_t out_plain = plain(out);
  dims ostr(n, 1);
  for (std::size_t i = n - 1; i > 0; --i) ostr[i - 1] = ostr[i] * std::max<std::int64_t>(out[i], 1);
  dims src_strides(n);
  for (std::size_t i = 0; i < n; ++i) src_strides[static_cast<std::size_t>(perm[i])] = ostr[i];
  const int t = scratch_slot(out_plain);
  const int view = alias(t, strided(in, src_strides));
  reorder_into(s, view);
  define(op.out, t, out);
  return {};
}

Status plan_builder::reshape(const ir_op& op) {
  const dims in = dims_of(op.in[0]);
  const std::int64_t count = volume(in);
  dims out;
  const auto values_of = [&](int v, std::vector<std::int64_t>& vals) -> Status {
    const auto& val = r_.values[static_cast<std::size_t>(v)];
    if (const auto& h = hv_[static_cast<std::size_t>(v)]) {
      vals = *h;
      return {};
    }
    if (val.constant) {
      if (val.constant->type() != element_type::int64) return fail("shape or axes input is not int64");
      const auto* p = val.constant->typed<std::int64_t>();
      vals.assign(p, p + val.constant->element_count());
      return {};
    }
    if (val.input < 0)
      return fail("shape or axes input '" + val.name + "' is not available when planning");
    vals = in_.values[static_cast<std::size_t>(val.input)];
    return {};
  };
  const auto rank = static_cast<std::int64_t>(in.size());
  switch (op.form) {
    case reshape_form::reshape: {
      std::vector<std::int64_t> shape;
      if (auto st = values_of(op.in[1], shape); !st) return st;
      std::int64_t known = 1;
      int infer = -1;
      out.resize(shape.size());
      for (std::size_t i = 0; i < shape.size(); ++i) {
        std::int64_t d = shape[i];
        if (d == 0 && !op.allowzero) {
          if (i >= in.size()) return fail("shape " + str(shape) + " copies a dimension the input " + str(in) + " lacks");
          d = in[i];
        }
        if (d == -1) {
          if (infer >= 0) return fail("shape " + str(shape) + " has two -1");
          infer = static_cast<int>(i);
          continue;
        }
        if (d < 0) return fail("shape " + str(shape) + " has a negative dimension");
        out[i] = d;
        known *= d;
      }
      if (infer >= 0) {
        if (known == 0 || count % known != 0) return fail("cannot reshape " + str(in) + " to " + str(shape));
        out[static_cast<std::size_t>(infer)] = count / known;
      }
      break;
    }
    case reshape_form::flatten: {
      const std::int64_t axis = op.axis < 0 ? op.axis + rank : op.axis;
      if (axis < 0 || axis > rank) return fail("axis out of range");
      const std::int64_t left = std::accumulate(in.begin(), in.begin() + axis, std::int64_t{1}, std::multiplies<>());
      out = {left, left == 0 ? 0 : count / left};
      break;
    }
    case reshape_form::squeeze:
    case reshape_form::unsqueeze: {
      std::vector<std::int64_t> axes = op.axes;
      if (axes.empty() && op.in[1] >= 0)
        if (auto st = values_of(op.in[1], axes); !st) return st;
      if (op.form == reshape_form::squeeze) {
        std::vector<bool> drop(in.size(), false);
        for (auto a : axes) {
          const std::int64_t x = a < 0 ? a + rank : a;
          if (x < 0 || x >= rank || in[static_cast<std::size_t>(x)] != 1) return fail("cannot squeeze axis " + std::to_string(a) + " of " + str(in));
          drop[static_cast<std::size_t>(x)] = true;
        }
        for (std::size_t i = 0; i < in.size(); ++i)
          if (!(axes.empty() ? in[i] == 1 : drop[i])) out.push_back(in[i]);
      } else {
        const std::int64_t orank = rank + static_cast<std::int64_t>(axes.size());
        std::vector<bool> ins(static_cast<std::size_t>(orank), false);
        for (auto a : axes) {
          const std::int64_t x = a < 0 ? a + orank : a;
          if (x < 0 || x >= orank || ins[static_cast<std::size_t>(x)]) return fail("bad unsqueeze axes");
          ins[static_cast<std::size_t>(x)] = true;
        }
        std::size_t j = 0;
        for (std::int64_t i = 0; i < orank; ++i) out.push_back(ins[static_cast<std::size_t>(i)] ? 1 : in[j++]);
      }
      break;
    }
  }
  if (volume(out) != count) return fail("cannot reshape " + str(in) + " to " + str(out));
  if (out.size() > 12) return fail("rank above 12");
  const int s = slot_of(op.in[0]);
  // Strided memory (a transposition, a channels-last convolution's output) is reshaped in place when the dims it
  // merges or splits are contiguous: a view, as a transposition is.
  if (const auto st = strides_of(md_of(s)); st && st->size() == in.size() && md_of(s) != plain(in) && !out.empty()) {
    std::optional<dims> ns;
    try {
      ns = strides_of(md_of(s).reshape(out));  // oneDNN keeps the memory and finds the strides, or throws
    } catch (const dn::error&) {
    }
    if (ns) {
      define(op.out, alias(s, strided(out, *ns)), out);
      return {};
    }
  }
  define(op.out, alias(as_plain(s, in), plain(out)), out);
  return {};
}

Status plan_builder::concat(const ir_op& op) {
  const dims first = dims_of(op.in[0]);
  const auto rank = static_cast<std::int64_t>(first.size());
  const std::int64_t axis = op.axis < 0 ? op.axis + rank : op.axis;
  if (axis < 0 || axis >= rank) return fail("axis out of range");
  dims out = first;
  out[static_cast<std::size_t>(axis)] = 0;
  std::vector<int> srcs;
  std::vector<dims> src_dims;
  for (int v : op.in) {
    const dims d = dims_of(v);
    if (d.size() != first.size()) return fail("inputs differ in rank");
    for (std::size_t k = 0; k < d.size(); ++k)
      if (static_cast<std::int64_t>(k) != axis && d[k] != first[k]) return fail("inputs differ outside the axis");
    out[static_cast<std::size_t>(axis)] += d[static_cast<std::size_t>(axis)];
    if (volume(d) == 0) continue;
    srcs.push_back(slot_of(v));
    src_dims.push_back(d);
  }
  const auto make = [&] {
    std::vector<md_t> mds;
    for (int s : srcs) mds.push_back(md_of(s));
    return dn::concat::primitive_desc(static_cast<int>(axis), mds, cpu_engine(), base_attr());
  };
  dn::concat::primitive_desc pd;
  try {
    pd = make();
  } catch (const dn::error&) {
    for (std::size_t i = 0; i < srcs.size(); ++i) srcs[i] = as_plain(srcs[i], src_dims[i]);
    pd = make();
  }
  const int t = scratch_slot(pd.dst_desc());
  std::vector<std::pair<int, int>> args{{DNNL_ARG_DST, t}};
  for (std::size_t i = 0; i < srcs.size(); ++i) args.emplace_back(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), srcs[i]);
  add_step(dn::concat(pd), std::move(args), pd);
  define(op.out, t, out);
  return {};
}

Status plan_builder::split(const ir_op& op) {
  const dims in = dims_of(op.in[0]);
  const auto rank = static_cast<std::int64_t>(in.size());
  const std::int64_t axis = op.axis < 0 ? op.axis + rank : op.axis;
  if (axis < 0 || axis >= rank) return fail("axis out of range");
  const std::int64_t total = in[static_cast<std::size_t>(axis)];
  std::vector<std::int64_t> sizes = op.sizes;
  const auto n = static_cast<std::int64_t>(op.outs.size());
  if (sizes.empty()) {
    if (total % n != 0) return fail("cannot split " + std::to_string(total) + " into " + std::to_string(n) + " equal parts");
    sizes.assign(static_cast<std::size_t>(n), total / n);
  }
  if (static_cast<std::int64_t>(sizes.size()) != n || std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0}) != total)
    return fail("split sizes do not add up to " + std::to_string(total));
  // Each part: a reorder from a sub-memory view of the (row-major) input into its own buffer.
  const int s = as_plain(slot_of(op.in[0]), in);
  dims offsets(in.size(), 0);
  for (std::size_t i = 0; i < op.outs.size(); ++i) {
    dims d = in;
    d[static_cast<std::size_t>(axis)] = sizes[i];
    const int part = alias(s, md_of(s).submemory_desc(d, offsets));
    const int t = scratch_slot(plain(d));
    reorder_into(part, t);
    define(op.outs[i], t, d);
    offsets[static_cast<std::size_t>(axis)] += sizes[i];
  }
  return {};
}
}  // namespace epstack::dnnl_ep
