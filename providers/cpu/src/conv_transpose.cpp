// ConvTranspose: N-d, groups, dilations, pads or auto_pad, output_padding, output_shape; by direct scatter.
#include "kernel_util.hpp"

namespace epstack::cpu {
namespace ops {
using namespace impl;
using dims = std::vector<std::int64_t>;

bool conv_transpose::supports(const graph& g, node_id n) { return f32_or_f64(in_type(g, n, 0)); }
Result<compute_function> conv_transpose::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  struct params {
    std::int64_t group;
    std::vector<std::int64_t> kernel, strides, dilations, pads, out_pad, out_shape;
    std::string auto_pad;
  } p{attr_i(nd, "group", 1), attr_ints(nd, "kernel_shape"), attr_ints(nd, "strides"), attr_ints(nd, "dilations"),
      attr_ints(nd, "pads"), attr_ints(nd, "output_padding"), attr_ints(nd, "output_shape"), attr_s(nd, "auto_pad", "NOTSET")};
  if (p.group < 1) return Status(errc::invalid_graph, "ConvTranspose: group must be positive");
  return make_fn("ConvTranspose", [p](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    const tensor& w = ctx.input(1);
    const std::size_t sp = x.rank() >= 3 ? x.rank() - 2 : 0;
    if (sp == 0 || w.rank() != x.rank()) return op_error("ConvTranspose", "X and W must have the same rank, 3 or more");
    const std::int64_t N = x.sizes()[0], C = x.sizes()[1], G = p.group;
    if (w.sizes()[0] != C || C % G != 0) return op_error("ConvTranspose", "W's first dim must be X's channels, a multiple of group");
    const std::int64_t ocg = w.sizes()[1], OC = ocg * G, icg = C / G;
    const auto get = [&](const std::vector<std::int64_t>& v, std::size_t i, std::int64_t def) { return i < v.size() ? v[i] : def; };
    dims k(sp), s(sp), d(sp), pb(sp), pe(sp), in(sp), out(sp);
    for (std::size_t i = 0; i < sp; ++i) {
      k[i] = get(p.kernel, i, w.sizes()[i + 2]);
      s[i] = get(p.strides, i, 1);
      d[i] = get(p.dilations, i, 1);
      in[i] = x.sizes()[i + 2];
      if (k[i] != w.sizes()[i + 2]) return op_error("ConvTranspose", "kernel_shape does not match W");
      const std::int64_t full = s[i] * (in[i] - 1) + get(p.out_pad, i, 0) + (k[i] - 1) * d[i] + 1;
      const bool same = p.auto_pad == "SAME_UPPER" || p.auto_pad == "SAME_LOWER";
      if (!p.out_shape.empty() || same) {
        const std::int64_t want = !p.out_shape.empty() ? p.out_shape[p.out_shape.size() - sp + i] : in[i] * s[i];
        const std::int64_t total = std::max<std::int64_t>(0, full - want);
        // ONNX's rule: SAME_UPPER puts the odd one at the end, anything else at the start.
        if (p.auto_pad == "SAME_UPPER") pb[i] = total / 2, pe[i] = total - total / 2;
        else pb[i] = total - total / 2, pe[i] = total / 2;
        out[i] = want;
      } else {
        pb[i] = p.auto_pad == "VALID" ? 0 : get(p.pads, i, 0);
        pe[i] = p.auto_pad == "VALID" ? 0 : get(p.pads, i + sp, 0);
        out[i] = full - pb[i] - pe[i];
      }
      if (out[i] < 1) return op_error("ConvTranspose", "the output would be empty");
    }
    dims oshape{N, OC};
    oshape.insert(oshape.end(), out.begin(), out.end());
    tensor& y = ctx.allocate_output(0, x.type(), oshape);
    const bool has_b = ctx.has_input(2) && !ctx.input(2).empty();
    if (has_b && static_cast<std::int64_t>(ctx.input(2).element_count()) != OC) return op_error("ConvTranspose", "B must have one value per output channel");
    const std::int64_t in_sz = product(in), out_sz = product(out), k_sz = product(k);
    float_dispatch(x.type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* px = x.typed<T>();
      const T* pw = w.typed<T>();
      T* py = y.typed<T>();
      for (std::int64_t b = 0; b < N * OC; ++b)
        std::fill(py + b * out_sz, py + (b + 1) * out_sz, has_b ? ctx.input(2).typed<T>()[b % OC] : T(0));
      parallel_items(ctx, static_cast<std::size_t>(N * G), static_cast<std::size_t>(icg * in_sz * ocg * k_sz), [&](std::size_t a0, std::size_t a1) {
        std::vector<std::int64_t> ipos(sp), kpos(sp);
        for (std::size_t a = a0; a < a1; ++a) {
          const std::int64_t nn = static_cast<std::int64_t>(a) / G, gg = static_cast<std::int64_t>(a) % G;
          for (std::int64_t ic = 0; ic < icg; ++ic) {
            const std::int64_t c = gg * icg + ic;
            const T* xc = px + (nn * C + c) * in_sz;
            for (std::int64_t ii = 0; ii < in_sz; ++ii) {
              std::int64_t rest = ii;
              for (std::size_t q = sp; q-- > 0;) ipos[q] = rest % in[q], rest /= in[q];
              const T xv = xc[ii];
              for (std::int64_t kk = 0; kk < k_sz; ++kk) {
                rest = kk;
                std::int64_t o = 0;
                bool inside = true;
                for (std::size_t q = sp; q-- > 0;) {
                  kpos[q] = rest % k[q], rest /= k[q];
                }
                for (std::size_t q = 0; q < sp && inside; ++q) {
                  const std::int64_t at = ipos[q] * s[q] - pb[q] + kpos[q] * d[q];
                  inside = at >= 0 && at < out[q];
                  o = o * out[q] + at;
                }
                if (!inside) continue;
                for (std::int64_t oc = 0; oc < ocg; ++oc)
                  py[(nn * OC + gg * ocg + oc) * out_sz + o] += xv * pw[(c * ocg + oc) * k_sz + kk];
              }
            }
          }
        }
      });
    });
    return {};
  });
}

}  // namespace ops
}  // namespace epstack::cpu
