// com.epstack.cpu PermutedMatMul: a float product that reads its operands and writes Y through permutations of their
// dims (the Transposes cpu_product_fusion folds into it), on the products of gemm.hpp.
#include "gemm.hpp"
#include "kernel_util.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

namespace epstack::cpu {
namespace ops {
using namespace impl;

// com.epstack.cpu PermutedMatMul(A, B), attributes perm_a, perm_b, perm_y (each a permutation of the operands' rank,
// or absent: none) and alpha (1): Y = Transpose(alpha * (Transpose(A, perm_a) x Transpose(B, perm_b)), perm_y), the
// product over the last two dims, the others batch dims broadcast (size 1 against any). Both operands have one rank,
// 2 or more. Nothing is transposed in memory: each operand is read in place through its strides (a permutation that
// leaves the source's last dim among the product's two is one with a unit stride, ta / tb of the product), and Y is
// written where the output Transpose puts it. What cpu_product_fusion writes for an attention layer's Transposes
// around its MatMuls (BERT: Q, K, V into heads and the context back out of them).
namespace {
struct strided_operand {
  tensor_sizes dims, strides;  // logical (after the permutation)
};
Result<strided_operand> permuted(const tensor& t, const std::vector<std::int64_t>& perm, const char* which) {
  const auto sizes = t.sizes();
  const std::size_t r = sizes.size();
  const auto contiguous = strides_of(sizes);
  strided_operand o;
  if (perm.empty()) {
    o.dims.assign(sizes.begin(), sizes.end());
    o.strides.assign(contiguous.begin(), contiguous.end());
    return o;
  }
  if (perm.size() != r)
    return Status(errc::invalid_argument, cat(which, " of shape ", dims_string(sizes), " does not have the rank of its permutation (",
                                              std::to_string(perm.size()), ")"));
  for (const std::int64_t p : perm) {
    o.dims.push_back(sizes[static_cast<std::size_t>(p)]);
    o.strides.push_back(contiguous[static_cast<std::size_t>(p)]);
  }
  return o;
}
// The matrix layout of the last two logical dims [rows, cols]: (transposed, leading dimension), or nullopt when
// neither has a unit stride (a dim of size 1 counts as either).
std::optional<std::pair<bool, std::int64_t>> matrix_layout(const strided_operand& o) {
  const std::size_t r = o.dims.size();
  const std::int64_t rows = o.dims[r - 2], cols = o.dims[r - 1], rs = o.strides[r - 2], cs = o.strides[r - 1];
  if (cs == 1 || cols == 1) return std::pair{false, rows == 1 ? std::max<std::int64_t>(cols, 1) : rs};
  if (rs == 1 || rows == 1) return std::pair{true, cs};
  return std::nullopt;
}
bool valid_perm(const std::vector<std::int64_t>& p, std::size_t rank) {
  if (p.empty()) return true;
  if (p.size() != rank) return false;
  std::vector<bool> seen(rank, false);
  for (const std::int64_t v : p) {
    if (v < 0 || v >= static_cast<std::int64_t>(rank) || seen[static_cast<std::size_t>(v)]) return false;
    seen[static_cast<std::size_t>(v)] = true;
  }
  return true;
}
}  // namespace
bool permuted_matmul::supports(const graph& g, node_id n) {
  return in_type(g, n, 0) == element_type::float32 && in_type(g, n, 1) == element_type::float32;
}
Result<compute_function> permuted_matmul::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  for (const char* name : {"perm_a", "perm_b", "perm_y"})
    if (const auto* a = nd.attributes.find(name); a != nullptr && !std::holds_alternative<std::vector<std::int64_t>>(a->value))
      return Status(errc::invalid_argument, cat("PermutedMatMul node '", nd.name, "': attribute ", name, " must be a list of ints"));
  if (const auto* a = nd.attributes.find("alpha"); a != nullptr && !std::holds_alternative<float>(a->value))
    return Status(errc::invalid_argument, cat("PermutedMatMul node '", nd.name, "': attribute alpha must be a float"));
  const auto pa = attr_ints(nd, "perm_a"), pb = attr_ints(nd, "perm_b"), py = attr_ints(nd, "perm_y");
  const float alpha = attr_f(nd, "alpha", 1.0f);
  std::size_t rank = 0;
  for (const auto* p : {&pa, &pb, &py}) {
    if (p->empty()) continue;
    if (rank == 0) rank = p->size();
    if (p->size() != rank || !valid_perm(*p, rank) || rank < 2)
      return Status(errc::invalid_argument, cat("PermutedMatMul node '", nd.name, "': perm_a, perm_b and perm_y must be permutations of one rank (2 or more)"));
  }
  if (!py.empty() && py.back() != static_cast<std::int64_t>(rank) - 1)
    return Status(errc::invalid_argument, cat("PermutedMatMul node '", nd.name, "': perm_y must keep the last dim last"));
  return make_fn("PermutedMatMul", [pa, pb, py, alpha](compute_context& ctx) -> Status {
    const tensor& a = ctx.input(0);
    const tensor& b = ctx.input(1);
    if (a.rank() < 2 || a.rank() != b.rank())
      return Status(errc::invalid_argument, cat("A and B must have one rank, 2 or more, got ", dims_string(a.sizes()), " and ",
                                                dims_string(b.sizes())));
    EPSTACK_ASSIGN_OR_RETURN(const strided_operand la, permuted(a, pa, "A"));
    EPSTACK_ASSIGN_OR_RETURN(const strided_operand lb, permuted(b, pb, "B"));
    const std::size_t r = a.rank();
    if (!py.empty() && py.size() != r)
      return Status(errc::invalid_argument, cat("Y's permutation has rank ", std::to_string(py.size()), ", the operands ", std::to_string(r)));
    const std::int64_t M = la.dims[r - 2], K = la.dims[r - 1], N = lb.dims[r - 1];
    if (lb.dims[r - 2] != K)
      return Status(errc::invalid_argument, cat("inner dimensions differ: ", dims_string(la.dims), " x ", dims_string(lb.dims),
                                                " (after the permutations)"));
    tensor_sizes batch(r - 2);
    for (std::size_t d = 0; d + 2 < r; ++d) {
      const std::int64_t x = la.dims[d], y = lb.dims[d];
      if (x != y && x != 1 && y != 1)
        return Status(errc::invalid_argument, cat("batch dimensions do not broadcast: ", dims_string(la.dims), " x ", dims_string(lb.dims)));
      batch[d] = x == 1 ? y : x;
    }
    // Y [batch..., M, N], stored as Transpose(Y, perm_y): its strides are the stored tensor's, permuted back.
    tensor_sizes ydims(batch.begin(), batch.end());
    ydims.push_back(M);
    ydims.push_back(N);
    tensor_sizes out(r), ystrides(r);
    for (std::size_t j = 0; j < r; ++j) out[j] = ydims[py.empty() ? j : static_cast<std::size_t>(py[j])];
    const auto stored = strides_of(out);
    for (std::size_t j = 0; j < r; ++j) ystrides[py.empty() ? j : static_cast<std::size_t>(py[j])] = stored[j];
    float* y = ctx.allocate_output(0, element_type::float32, out).typed<float>();
    const std::int64_t nbatch = product(batch);
    if (nbatch == 0 || M == 0 || N == 0) return {};
    const std::int64_t ldy = M == 1 ? N : ystrides[r - 2];
    const auto offsets = [&](std::int64_t i) {
      std::int64_t oa = 0, ob = 0, oy = 0;
      for (std::size_t d = batch.size(); d-- > 0;) {
        const std::int64_t idx = i % batch[d];
        i /= batch[d];
        if (la.dims[d] != 1) oa += idx * la.strides[d];
        if (lb.dims[d] != 1) ob += idx * lb.strides[d];
        oy += idx * ystrides[d];
      }
      return std::array<std::int64_t, 3>{oa, ob, oy};
    };
    const float* pa_ = a.typed<float>();
    const float* pb_ = b.typed<float>();
    if (K == 0) {
      for (std::int64_t i = 0; i < nbatch; ++i) {
        const auto o = offsets(i);
        for (std::int64_t m = 0; m < M; ++m) std::fill(y + o[2] + m * ldy, y + o[2] + m * ldy + N, 0.0f);
      }
      return {};
    }
    const auto lay_a = matrix_layout(la), lay_b = matrix_layout(lb);
    if (!lay_a || !lay_b)
      return Status(errc::invalid_argument, "an operand's permutation leaves no unit stride in its last two dims");
    const auto [ta, lda] = *lay_a;
    const auto [tb, ldb] = *lay_b;
    if (nbatch >= ctx.thread_count()) {
      const std::size_t cost = static_cast<std::size_t>(M * N * K);
      parallel_items(ctx, static_cast<std::size_t>(nbatch), cost, [&](std::size_t b0, std::size_t b1) {
        for (std::size_t i = b0; i < b1; ++i) {
          const auto o = offsets(static_cast<std::int64_t>(i));
          gemm_block<float>(ta, tb, M, N, K, alpha, pa_ + o[0], lda, pb_ + o[1], ldb, y + o[2], ldy, false);
        }
      });
    } else {
      for (std::int64_t i = 0; i < nbatch; ++i) {
        const auto o = offsets(i);
        gemm_parallel<float>(ctx, ta, tb, M, N, K, alpha, pa_ + o[0], lda, pb_ + o[1], ldb, y + o[2], ldy, false);
      }
    }
    return {};
  });
}

}  // namespace ops
}  // namespace epstack::cpu
