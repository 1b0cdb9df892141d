// Shape computations (int64 values known when a plan is made), evaluated on the host (plan_builder.hpp).
#include "plan_builder.hpp"

namespace epstack::dnnl_ep {

Status plan_builder::host(const ir_op& op) {
  const auto known = [&](int v, dims& d, std::vector<std::int64_t>& x) -> bool {
    if (v < 0) return false;
    const auto i = static_cast<std::size_t>(v);
    if (hv_[i]) {
      d = vd_[i];
      x = *hv_[i];
      return true;
    }
    const auto& c = r_.values[i].constant;
    if (!c || c->type() != element_type::int64) return false;
    d.assign(c->sizes().begin(), c->sizes().end());
    x.assign(c->typed<std::int64_t>(), c->typed<std::int64_t>() + c->element_count());
    return true;
  };
  // An input the node does not have is absent (-1), never read past the end of `op.in`.
  const auto input = [&](std::size_t i) { return i < op.in.size() ? op.in[i] : -1; };
  dims d0, out_d;
  std::vector<std::int64_t> x0, out_x;
  const std::string& t = op.host_op;
  if (t == "Shape") {
    const dims in = dims_of(input(0));
    const auto rank = static_cast<std::int64_t>(in.size());
    const auto clampi = [&](std::int64_t v) { return std::clamp(v < 0 ? v + rank : v, std::int64_t{0}, rank); };
    const std::int64_t b = clampi(op.start), e = clampi(op.end == INT64_MAX ? rank : op.end);
    for (std::int64_t i = b; i < e; ++i) out_x.push_back(in[static_cast<std::size_t>(i)]);
    out_d = {static_cast<std::int64_t>(out_x.size())};
  } else {
    if (!known(input(0), d0, x0)) return fail("shape computation input is not known when planning");
    const auto rank = static_cast<std::int64_t>(d0.size());
    std::vector<std::int64_t> axes = op.axes;
    dims da;
    if (axes.empty() && (t == "Unsqueeze" || t == "Squeeze") && input(1) >= 0 && !known(input(1), da, axes))
      return fail("axes are not known when planning");
    if (t == "Gather") {
      dims di;
      std::vector<std::int64_t> idx;
      if (!known(input(1), di, idx)) return fail("indices are not known when planning");
      const std::int64_t axis = op.axis < 0 ? op.axis + rank : op.axis;
      if (axis < 0 || axis >= rank) return fail("Gather axis out of range");
      const std::int64_t n = d0[static_cast<std::size_t>(axis)];
      const std::int64_t outer = volume(dims(d0.begin(), d0.begin() + axis));
      const std::int64_t inner = volume(dims(d0.begin() + axis + 1, d0.end()));
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t j : idx) {
          const std::int64_t k = j < 0 ? j + n : j;
          if (k < 0 || k >= n) return fail("Gather index " + std::to_string(j) + " out of range for " + str(d0));
          for (std::int64_t q = 0; q < inner; ++q) out_x.push_back(x0[static_cast<std::size_t>((o * n + k) * inner + q)]);
        }
      out_d.assign(d0.begin(), d0.begin() + axis);
      out_d.insert(out_d.end(), di.begin(), di.end());
      out_d.insert(out_d.end(), d0.begin() + axis + 1, d0.end());
    } else if (t == "Unsqueeze" || t == "Squeeze") {
      out_x = x0;
      if (t == "Squeeze") {
        for (std::int64_t i = 0; i < rank; ++i) {
          const bool listed = std::any_of(axes.begin(), axes.end(), [&](std::int64_t a) { return (a < 0 ? a + rank : a) == i; });
          if (!(axes.empty() ? d0[static_cast<std::size_t>(i)] == 1 : listed)) out_d.push_back(d0[static_cast<std::size_t>(i)]);
        }
      } else {
        const auto orank = rank + static_cast<std::int64_t>(axes.size());
        std::size_t j = 0;
        for (std::int64_t i = 0; i < orank; ++i) {
          const bool listed = std::any_of(axes.begin(), axes.end(), [&](std::int64_t a) { return (a < 0 ? a + orank : a) == i; });
          out_d.push_back(listed ? 1 : d0[j++]);
        }
      }
    } else if (t == "Concat") {
      const std::int64_t axis = op.axis < 0 ? op.axis + rank : op.axis;
      if (axis < 0 || axis >= rank) return fail("Concat axis out of range");
      std::vector<dims> ds;
      std::vector<std::vector<std::int64_t>> xs;
      out_d = d0;
      out_d[static_cast<std::size_t>(axis)] = 0;
      for (int v : op.in) {
        dims d;
        std::vector<std::int64_t> x;
        if (!known(v, d, x) || d.size() != d0.size()) return fail("Concat input is not known when planning");
        out_d[static_cast<std::size_t>(axis)] += d[static_cast<std::size_t>(axis)];
        ds.push_back(d);
        xs.push_back(x);
      }
      const std::int64_t outer = volume(dims(d0.begin(), d0.begin() + axis));
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::size_t k = 0; k < xs.size(); ++k) {
          const std::int64_t chunk = volume(dims(ds[k].begin() + axis, ds[k].end()));
          out_x.insert(out_x.end(), xs[k].begin() + o * chunk, xs[k].begin() + (o + 1) * chunk);
        }
    } else if (t == "Slice") {
      if (rank != 1) return fail("Slice of an int64 tensor of rank " + std::to_string(rank));
      dims dd;
      std::vector<std::int64_t> st, en, ax, sp;
      if (!known(input(1), dd, st) || !known(input(2), dd, en)) return fail("Slice bounds are not known when planning");
      if (input(3) >= 0 && !known(input(3), dd, ax)) return fail("Slice axes are not known when planning");
      if (input(4) >= 0 && !known(input(4), dd, sp)) return fail("Slice steps are not known when planning");
      if (st.size() != 1 || en.size() != 1 || (!ax.empty() && ax[0] != 0 && ax[0] != -1)) return fail("Slice of a 1-D tensor needs one start and end on axis 0");
      const std::int64_t n = d0[0], step = sp.empty() ? 1 : sp[0];
      if (step == 0) return fail("Slice step 0");
      const auto norm = [&](std::int64_t v, std::int64_t lo, std::int64_t hi) { return std::clamp(v < 0 ? v + n : v, lo, hi); };
      const std::int64_t b = step > 0 ? norm(st[0], 0, n) : norm(st[0], -1, n - 1);
      const std::int64_t e = step > 0 ? norm(en[0], 0, n) : norm(en[0], -1, n - 1);
      for (std::int64_t i = b; step > 0 ? i < e : i > e; i += step) out_x.push_back(x0[static_cast<std::size_t>(i)]);
      out_d = {static_cast<std::int64_t>(out_x.size())};
    } else {
      return fail("shape operator " + t + " is not evaluated when planning");
    }
  }
  vd_[static_cast<std::size_t>(op.out)] = out_d;
  hv_[static_cast<std::size_t>(op.out)] = std::move(out_x);
  return {};
}
}  // namespace epstack::dnnl_ep
