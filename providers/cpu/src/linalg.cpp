// Linear algebra: Det.
#include "kernel_util.hpp"

#include <utility>

namespace epstack::cpu {
namespace ops {
using namespace impl;
using dims = std::vector<std::int64_t>;

// ---- Det: the determinant of each [M, M] matrix of [*, M, M], by LU with partial pivoting in double ----
bool det::supports(const graph& g, node_id n) { return f32_or_f64(in_type(g, n, 0)); }
Result<compute_function> det::compile(const graph&, node_id) {
  return make_fn("Det", [](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (x.rank() < 2 || x.sizes()[x.rank() - 1] != x.sizes()[x.rank() - 2]) return op_error("Det", "the input must be [*, M, M]");
    const std::int64_t M = x.sizes()[x.rank() - 1];
    const dims out(x.sizes().begin(), x.sizes().end() - 2);
    tensor& y = ctx.allocate_output(0, x.type(), out);
    const std::int64_t mats = product(out);
    float_dispatch(x.type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      std::vector<double> a(static_cast<std::size_t>(M * M));
      for (std::int64_t m = 0; m < mats; ++m) {
        const T* p = x.typed<T>() + m * M * M;
        std::copy(p, p + M * M, a.begin());
        double d = 1;
        for (std::int64_t c = 0; c < M && d != 0; ++c) {
          std::int64_t piv = c;
          for (std::int64_t r = c + 1; r < M; ++r)
            if (std::fabs(a[static_cast<std::size_t>(r * M + c)]) > std::fabs(a[static_cast<std::size_t>(piv * M + c)])) piv = r;
          if (a[static_cast<std::size_t>(piv * M + c)] == 0) {
            d = 0;
            break;
          }
          if (piv != c) {
            for (std::int64_t k = 0; k < M; ++k) std::swap(a[static_cast<std::size_t>(c * M + k)], a[static_cast<std::size_t>(piv * M + k)]);
            d = -d;
          }
          const double pv = a[static_cast<std::size_t>(c * M + c)];
          d *= pv;
          for (std::int64_t r = c + 1; r < M; ++r) {
            const double f = a[static_cast<std::size_t>(r * M + c)] / pv;
            for (std::int64_t k = c; k < M; ++k) a[static_cast<std::size_t>(r * M + k)] -= f * a[static_cast<std::size_t>(c * M + k)];
          }
        }
        y.typed<T>()[m] = static_cast<T>(d);
      }
    });
    return {};
  });
}

}  // namespace ops
}  // namespace epstack::cpu
