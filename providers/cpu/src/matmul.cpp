// Matrix products: Gemm, MatMul (numpy batching and broadcasting), the contrib FusedMatMul. Float products run on the
// packed AVX-512 SGEMM (sgemm.cpp) and, for matrix-vector shapes, on sgemv.cpp's kernels; double products (and float
// ones in a build without AVX-512) on Eigen 3.4 (cache-blocked, vectorised for the target's ISA). epstack splits the
// work across the intra-op threads itself, by output columns or rows or by batch, so each piece runs single-threaded.
#define EIGEN_DONT_PARALLELIZE
#include "broadcast.hpp"
#include "call_token.hpp"
#include "gemm.hpp"
#include "kernel_util.hpp"
#include "sgemm.hpp"

#include <epstack/core/mapped_file.hpp>
#include <epstack/core/weight_memory.hpp>

#include <new>
#include <optional>

#include <Eigen/Core>

namespace epstack::cpu {
namespace impl {


template <class T>
using row_matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using cmap = Eigen::Map<const row_matrix<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
using mmap = Eigen::Map<row_matrix<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

namespace {
// A per-thread packing buffer, 64-byte aligned, grown as needed and kept (so steady-state runs do not allocate).
class aligned_buffer {
 public:
  aligned_buffer() = default;
  aligned_buffer(const aligned_buffer&) = delete;
  aligned_buffer& operator=(const aligned_buffer&) = delete;
  ~aligned_buffer() { release(); }
  float* get(std::size_t n) {
    if (n > cap_) {
      release();
      p_ = static_cast<float*>(::operator new(n * sizeof(float), std::align_val_t{64}));
      cap_ = n;
    }
    return p_;
  }

 private:
  void release() {
    if (p_ != nullptr) ::operator delete(p_, std::align_val_t{64});
    p_ = nullptr;
    cap_ = 0;
  }
  float* p_ = nullptr;
  std::size_t cap_ = 0;
};
// (Only the packed path uses them: a build without AVX-512 has none.)
[[maybe_unused]] thread_local aligned_buffer packed_a_buffer, packed_b_buffer;
// A thread's own copy of a product's packed A (gemm_prepacked) and the call it was packed for: a thread that takes
// several chunks of one call packs it once. Nothing else writes it.
struct private_packed_a {
  aligned_buffer buffer;
  std::uint64_t call = 0;
};
[[maybe_unused]] thread_local private_packed_a own_packed_a;

}  // namespace

template <class T>
void gemm_block_eigen(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, T alpha, const T* a,
                      std::int64_t lda, const T* b, std::int64_t ldb, T* y, std::int64_t ldy, bool accumulate);

template <class T>
void gemm_block(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, T alpha, const T* a, std::int64_t lda,
                const T* b, std::int64_t ldb, T* y, std::int64_t ldy, bool accumulate) {
  if (M == 0 || N == 0) return;
  if constexpr (std::is_same_v<T, float> && sgemm_packed_compiled) {
    // Built with the packed kernel, a float product never reaches Eigen (so a program of float kernels links none).
    if (K == 0 || small_sgemm_shape(M, N)) {
      small_sgemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, y, ldy, accumulate);
      return;
    }
    float* pa = packed_a_buffer.get(packed_a_size(M, K));
    pack_a(pa, a, lda, ta, M, K);
    // A small B ([K, N] within 64 KiB, as attention's per-head products have) is read where it lies: it stays in
    // cache for every A panel, and packing it cost more than the masked loads (BERT's 12-head Q K^T and P V products,
    // interleaved: 6-9% faster).
    if (!tb && K * N <= 16384) {
      sgemm(M, N, K, pa, sgemm_b{b, ldb}, y, ldy, alpha, accumulate, nullptr, 0, a_panels(M), 0, b_panels(N));
      return;
    }
    float* pb = packed_b_buffer.get(packed_b_size(K, N));
    pack_b(pb, b, ldb, tb, K, N);
    sgemm_packed(M, N, K, pa, pb, y, ldy, alpha, accumulate, 0, a_panels(M), 0, b_panels(N));
  } else {
    gemm_block_eigen(ta, tb, M, N, K, alpha, a, lda, b, ldb, y, ldy, accumulate);
  }
}

// Eigen's product: doubles, and floats in a build without the packed kernel (where it also serves the
// matrix-vector shapes).
template <class T>
void gemm_block_eigen(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, T alpha, const T* a,
                      std::int64_t lda, const T* b, std::int64_t ldb, T* y, std::int64_t ldy, bool accumulate) {
  mmap<T> Y(y, M, N, Eigen::OuterStride<>(ldy));
  if (K == 0) {
    if (!accumulate) Y.setZero();
    return;
  }
  const cmap<T> A(a, ta ? K : M, ta ? M : K, Eigen::OuterStride<>(lda));
  const cmap<T> B(b, tb ? N : K, tb ? K : N, Eigen::OuterStride<>(ldb));
  const auto run = [&](const auto& opA, const auto& opB) {
    if (accumulate) Y.noalias() += alpha * (opA * opB);
    else if (alpha == T(1)) Y.noalias() = opA * opB;
    else Y.noalias() = alpha * (opA * opB);
  };
  if (!ta && !tb) run(A, B);
  else if (!ta && tb) run(A, B.transpose());
  else if (ta && !tb) run(A.transpose(), B);
  else run(A.transpose(), B.transpose());
}

// f(c0, c1) over the columns [0, N) in blocks of 64 (a multiple of every vector width), split into `pieces` ranges
// across the intra-op threads.
template <class F>
void for_column_pieces(const compute_context& ctx, std::int64_t N, std::size_t pieces, F&& f) {
  const std::int64_t blocks = (N + 63) / 64;
  pieces = std::min<std::size_t>(pieces, static_cast<std::size_t>(std::max<std::int64_t>(blocks, 1)));
  const auto piece = [&](std::size_t p0, std::size_t p1) {
    for (std::size_t p = p0; p < p1; ++p) {
      const std::int64_t c0 = blocks * static_cast<std::int64_t>(p) / static_cast<std::int64_t>(pieces) * 64;
      const std::int64_t c1 = std::min(N, blocks * static_cast<std::int64_t>(p + 1) / static_cast<std::int64_t>(pieces) * 64);
      if (c1 > c0) f(c0, c1);
    }
  };
  if (pieces <= 1) piece(0, 1);
  else ctx.parallel_for(pieces, 1, piece);
}

template <class T>
void gemm_parallel(const compute_context& ctx, bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, T alpha,
                   const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T* y, std::int64_t ldy, bool accumulate) {
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  const int threads = ctx.thread_count();
  if (threads == 1 || flops < 2e5) {
    gemm_block(ta, tb, M, N, K, alpha, a, lda, b, ldb, y, ldy, accumulate);
    return;
  }
  if (N >= M || M < 4 * threads) {
    for_column_pieces(ctx, N, static_cast<std::size_t>(threads), [&](std::int64_t c0, std::int64_t c1) {
      gemm_block(ta, tb, M, c1 - c0, K, alpha, a, lda, tb ? b + c0 * ldb : b + c0, ldb, y + c0, ldy, accumulate);
    });
  } else {
    const std::size_t pieces = static_cast<std::size_t>(threads);
    ctx.parallel_for(pieces, 1, [&](std::size_t p0, std::size_t p1) {
      for (std::size_t p = p0; p < p1; ++p) {
        const std::int64_t r0 = M * static_cast<std::int64_t>(p) / threads, r1 = M * static_cast<std::int64_t>(p + 1) / threads;
        if (r1 <= r0) continue;
        const T* ap = ta ? a + r0 : a + r0 * lda;
        gemm_block(ta, tb, r1 - r0, N, K, alpha, ap, lda, b, ldb, y + r0 * ldy, ldy, accumulate);
      }
    });
  }
}

namespace {

// A constant B operand packed for sgemm once, at compile time. `source` is the data it was packed from: a run whose B
// input is another tensor (an initializer overridden by a feed) takes the unpacked path.
struct prepacked_b {
  std::shared_ptr<const float> data;
  std::int64_t K = 0, N = 0;
  const std::byte* source = nullptr;
  bool panels = false;  ///< full-depth panels (gemv_pack_b) for a few rows of A, not the SGEMM's K blocks
  [[nodiscard]] bool matches(const tensor& b) const { return data != nullptr && b.data() == source; }
};

// The rows of op(A) (input 0, transposed when `ta`) as one product with B, when shape inference knows every dimension
// they count: A's dimensions but the last (MatMul stacks A's batches as rows) or, transposed, but the second last.
std::optional<std::int64_t> static_rows(const graph& g, node_id n, bool ta) {
  if (!has_in(g, n, 0)) return std::nullopt;
  const auto& t = g.value(g.node(n).inputs[0]).type;
  if (t.kind != type_kind::tensor || !t.dims) return std::nullopt;
  const auto& d = *t.dims;
  const std::size_t r = d.rank();
  if (r == 0) return std::nullopt;
  std::int64_t rows = 1;
  for (std::size_t i = 0; i < r; ++i) {
    if (i == (ta && r >= 2 ? r - 2 : r - 1)) continue;
    if (!d[i].is_known()) return std::nullopt;
    rows *= d[i].value;
  }
  return rows;
}

// r (K, N and the layout set) with B's floats packed by `pack(dst, src, ldb)` into `floats` of weight memory: B read
// from the model file in one bulk read (not a page fault at a time), or widened from a half type first.
template <class Pack>
prepacked_b packed_copy(const tensor& b, prepacked_b r, std::size_t floats, Pack pack) {
  std::vector<float> widened;
  const float* src = nullptr;
  weight_reader b_source;
  if (b.type() == element_type::float32) {
    src = b_source.floats(b);
  } else {
    widened.resize(b.element_count());
    if (b.type() == element_type::float16) widen_half(b.typed<float16>(), widened.data(), widened.size());
    else widen_half(b.typed<bfloat16>(), widened.data(), widened.size());
    src = widened.data();
  }
  auto mem = epstack::allocate_weight_floats(floats);
  pack(mem.get(), src, b.sizes()[1]);
  r.data = std::move(mem);
  r.source = b.data();
  // The packed copy is what runs use: the original's pages need not stay in memory.
  if (b.is_file_backed()) release_file_pages(b.data(), b.byte_size());
  return r;
}

// Packs the constant B input of node `n` (2-D float, or float16/bfloat16 widened to float; transposed when `tb`) when
// the packed kernel is available. B that at most 4 rows of A meet (`ta`: A transposed), as shape inference knows at
// create, goes in full-depth panels (gemv_pack_b), either way it is stored: each thread then reads one contiguous
// stream per range of panels, where K blocks (or dot products of B's rows where they lie, 8 streams at once) read
// many short ones. Interleaved against those, in the same VM phase: llm_decode ([K, N] weights) 1.77-1.97 -> 1.19-1.33
// ms, mlp_b1 ([N, K]) 1.77-2.19 -> 1.19-1.29 ms; mlp_b1's create 1.5 -> 29 ms (ONNX Runtime's: 1.3-1.7 s). A
// transposed float B with N <= 2 and more rows is read in place (sgemv.cpp's dot products).
prepacked_b prepack_constant_b(const graph& g, node_id n, bool tb, bool ta = false) {
  prepacked_b r;
  const tensor* b = constant_input(g, n, 1);
  if (b == nullptr || !sgemm_packed_available() || b->rank() != 2) return r;
  const auto bt = b->type();
  if (bt != element_type::float32 && bt != element_type::float16 && bt != element_type::bfloat16) return r;
  r.K = tb ? b->sizes()[1] : b->sizes()[0];
  r.N = tb ? b->sizes()[0] : b->sizes()[1];
  if (r.K == 0 || r.N == 0) return {};
  const auto rows = static_rows(g, n, ta);
  r.panels = rows && *rows <= 4;
  if (!r.panels && bt == element_type::float32 && tb && rows && small_sgemm_shape(*rows, r.N)) return {};
  // Both layouts take packed_b_size floats (whole panels of sgemm_nr columns, K deep).
  return packed_copy(*b, r, packed_b_size(r.K, r.N), [&](float* dst, const float* src, std::int64_t ldb) {
    if (r.panels) gemv_pack_b(dst, src, ldb, tb, r.K, r.N);
    else pack_b(dst, src, ldb, tb, r.K, r.N);
  });
}

// Panels [q0, q1) of gemv_prepacked's product, then the epilogue on their columns. Not inlined: a deployable would
// hold it twice (the serial call and the pool's loop).
[[gnu::noinline]] void gemv_panels_part(std::int64_t M, const float* a, std::int64_t lda, float alpha, const prepacked_b& pre,
                                        float* y, std::int64_t ldy, bool accumulate, const sgemm_epilogue* ep, std::int64_t q0,
                                        std::int64_t q1) {
  small_sgemm_panels(M, pre.N, pre.K, alpha, a, lda, pre.data.get(), y, ldy, accumulate, q0, q1);
  if (ep != nullptr) sgemm_apply_epilogue(*ep, y, ldy, 0, M, q0 * gemv_panel, std::min(pre.N, q1 * gemv_panel));
}

// gemm_prepacked for B in full-depth panels: op(A)'s rows read in place (a transposed A gathered first), the panels
// split across the threads in ranges, each read as one stream.
void gemv_prepacked(compute_context& ctx, bool ta, std::int64_t M, const float* a, std::int64_t lda, float alpha,
                    const prepacked_b& pre, float* y, std::int64_t ldy, bool accumulate, const sgemm_epilogue* ep) {
  const std::int64_t N = pre.N, K = pre.K, panels = b_panels(N);
  tensor rows;
  if (ta) {
    rows = ctx.scratch(element_type::float32, static_cast<std::size_t>(M * K));
    float* r = rows.typed<float>();
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t k = 0; k < K; ++k) r[i * K + k] = a[k * lda + i];
    a = r;
    lda = K;
  }
  const auto part = [&](std::int64_t q0, std::int64_t q1) {
    gemv_panels_part(M, a, lda, alpha, pre, y, ldy, accumulate, ep, q0, q1);
  };
  if (ctx.thread_count() == 1 || 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) < 2e5) {
    part(0, panels);
    return;
  }
  // The pool's chunks (a few a thread) are ranges of panels: each a contiguous stream of B, and a thread that starts
  // late takes fewer of them.
  ctx.parallel_for(static_cast<std::size_t>(panels), 1, [&](std::size_t q0, std::size_t q1) {
    part(static_cast<std::int64_t>(q0), static_cast<std::int64_t>(q1));
  });
}

// Y[M, N] = alpha * op(A) * B (+ Y) with B prepacked: A packed, then the B panels (or, when there are few, the A
// panels) split across the threads. Split by A panels, each thread packs the panels it multiplies (no barrier, and
// they are still in cache). Split by B panels, every thread needs all of A: each packs a copy of its own (up to 2 MiB;
// bigger, one copy packed by all first). Against one copy packed by both threads then read by both, bench_kernels'
// products ran 3-11% faster with cold weights and 1-9% warm (interleaved): no barrier between packing and the
// product, and no A panel read from the other core's cache.
// `ep`: applied as the last K block is stored (a row-broadcast bias as `z` with `ldz` 0).
void gemm_prepacked(compute_context& ctx, bool ta, std::int64_t M, const float* a, std::int64_t lda, float alpha,
                    const prepacked_b& pre, float* y, std::int64_t ldy, bool accumulate, const sgemm_epilogue* ep = nullptr) {
  const std::int64_t N = pre.N, K = pre.K;
  if (M == 0) return;
  if (pre.panels) return gemv_prepacked(ctx, ta, M, a, lda, alpha, pre, y, ldy, accumulate, ep);
  const std::int64_t ap = a_panels(M), bp = b_panels(N);
  const int threads = ctx.thread_count();
  const bool serial = threads == 1 || 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) < 2e5;
  const bool by_b = !serial && (bp >= 2 * threads || ap < 2 * threads);
  if (by_b && packed_a_size(M, K) <= (std::size_t{2} << 20) / sizeof(float)) {
    const std::uint64_t call = new_call_token();
    ctx.parallel_for(static_cast<std::size_t>(bp), 1, [&](std::size_t q0, std::size_t q1) {
      float* mine = own_packed_a.buffer.get(packed_a_size(M, K));
      if (own_packed_a.call != call) {
        pack_a(mine, a, lda, ta, M, K);
        own_packed_a.call = call;
      }
      sgemm_pb(M, N, K, mine, pre.data.get(), y, ldy, alpha, accumulate, ep, 0, ap, static_cast<std::int64_t>(q0),
            static_cast<std::int64_t>(q1));
    });
    return;
  }
  tensor buf = ctx.scratch(element_type::float32, packed_a_size(M, K) + 16);
  float* pa = align64(buf.typed<float>());
  if (serial) {
    pack_a(pa, a, lda, ta, M, K);
    sgemm_pb(M, N, K, pa, pre.data.get(), y, ldy, alpha, accumulate, ep, 0, ap, 0, bp);
  } else if (by_b) {
    ctx.parallel_for(static_cast<std::size_t>(ap), 1, [&](std::size_t p0, std::size_t p1) {
      pack_a_panels(pa, a, lda, ta, M, K, static_cast<std::int64_t>(p0), static_cast<std::int64_t>(p1));
    });
    ctx.parallel_for(static_cast<std::size_t>(bp), 1, [&](std::size_t q0, std::size_t q1) {
      sgemm_pb(M, N, K, pa, pre.data.get(), y, ldy, alpha, accumulate, ep, 0, ap, static_cast<std::int64_t>(q0),
            static_cast<std::int64_t>(q1));
    });
  } else {
    ctx.parallel_for(static_cast<std::size_t>(ap), 1, [&](std::size_t p0, std::size_t p1) {
      pack_a_panels(pa, a, lda, ta, M, K, static_cast<std::int64_t>(p0), static_cast<std::int64_t>(p1));
      sgemm_pb(M, N, K, pa, pre.data.get(), y, ldy, alpha, accumulate, ep, static_cast<std::int64_t>(p0),
            static_cast<std::int64_t>(p1), 0, bp);
    });
  }
}

// The product of gemm_run: gemm_parallel (every shape; floats on the packed SGEMM or sgemv.cpp's kernels).
struct any_product {
  static constexpr bool packed = true;
  template <class T>
  static Status check(std::int64_t, std::int64_t) { return {}; }
  template <class T>
  static void run(const compute_context& ctx, bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, T alpha,
                  const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T* y, std::int64_t ldy, bool accumulate) {
    gemm_parallel<T>(ctx, ta, tb, M, N, K, alpha, a, lda, b, ldb, y, ldy, accumulate);
  }
};

// The product of gemm_mv_of<float>: at most 4 rows of A (checked at run time), in column blocks across the threads, on
// sgemv.cpp's matrix-vector kernels alone (a program that runs only such products links no packed SGEMM; B read where
// it lies, not packed in full-depth panels as the Gemm of every shape does: issue 20's 300 kB for a deployable MLP).
// With `BT` (gemm_mv_bt_of<float>: A as it is, B transposed, as a Linear layer's), the dot-product kernels alone.
template <bool BT>
struct few_rows_product {
  static constexpr bool packed = false;
  template <class T>
  static Status check(std::int64_t M, std::int64_t) {
    if (M > 4)
      return Status(errc::not_implemented, cat(BT ? "gemm_mv_bt_of" : "gemm_mv_of",
                                               "<float> multiplies at most 4 rows of A, this product has ", std::to_string(M)));
    return {};
  }
  template <class T>
  static void run(const compute_context& ctx, bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, T alpha,
                  const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T* y, std::int64_t ldy, bool accumulate) {
    static_assert(std::is_same_v<T, float>);
    const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
    // A few pieces a thread, taken as threads come: one that starts late takes fewer (two fixed halves made mlp_b1's
    // batch-1 products wait on the later thread).
    const auto pieces = static_cast<std::size_t>(flops < 2e5 ? 1 : 4 * ctx.thread_count());
    for_column_pieces(ctx, N, pieces, [&](std::int64_t c0, std::int64_t c1) {
      if constexpr (BT) small_sgemm_rows_bt(M, c1 - c0, K, alpha, a, lda, b + c0 * ldb, ldb, y + c0, ldy, accumulate);
      else small_sgemm_rows(ta, tb, M, c1 - c0, K, alpha, a, lda, tb ? b + c0 * ldb : b + c0, ldb, y + c0, ldy, accumulate);
    });
  }
};

// Gemm of a, b and (when given and beta != 0) c; `pre` (B packed) is used when given (the caller has checked that it
// was packed from b). `alloc(sizes)` returns where Y goes.
template <class T, class Product = any_product, class Alloc>
Status gemm_run(compute_context& ctx, const tensor& a, const tensor& b, const tensor* c_in, bool ta, bool tb, T alpha, T beta,
                const prepacked_b* pre, Alloc alloc) {
  if (a.rank() != 2 || b.rank() != 2)
    return Status(errc::invalid_argument, cat("A and B must be matrices, got ", dims_string(a.sizes()), " and ", dims_string(b.sizes())));
  const auto M = ta ? a.sizes()[1] : a.sizes()[0], K = ta ? a.sizes()[0] : a.sizes()[1];
  const auto Kb = tb ? b.sizes()[1] : b.sizes()[0], N = tb ? b.sizes()[0] : b.sizes()[1];
  if (K != Kb)
    return Status(errc::invalid_argument, cat("inner dimensions differ: op(A) is ", std::to_string(M), "x", std::to_string(K),
                                              ", op(B) is ", std::to_string(Kb), "x", std::to_string(N)));
  EPSTACK_RETURN_IF_ERROR(Product::template check<T>(M, N));
  const std::int64_t out[] = {M, N};
  T* py = alloc(std::span<const std::int64_t>(out));
  bool accumulate = false;
  if constexpr (std::is_same_v<T, float> && Product::packed) {
    // With B packed, a bias of one value per column (C of [N] or [1, N], beta 1: MatMul + Add fused) is added as
    // the product is stored, instead of being broadcast into Y first.
    if (pre != nullptr && c_in != nullptr && beta == 1.0f && c_in->element_count() == static_cast<std::size_t>(N) &&
        (c_in->rank() == 1 || (c_in->rank() == 2 && c_in->sizes()[0] == 1)) && N > 0) {
      sgemm_epilogue ep;
      ep.z = c_in->typed<float>();
      ep.ldz = 0;
      gemm_prepacked(ctx, ta, M, a.typed<float>(), a.sizes()[1], alpha, *pre, py, N, false, &ep);
      return {};
    }
  }
  if (c_in != nullptr && beta != T(0)) {
    // C broadcasts to [M, N] one way (rank 0, 1 or 2, each dimension 1 or equal): beta C is written into Y first.
    const tensor& c = *c_in;
    const auto cs = c.sizes();
    const std::int64_t cn = cs.empty() ? 1 : cs.back(), cm = cs.size() == 2 ? cs[0] : 1;
    if (cs.size() > 2 || (cn != 1 && cn != N) || (cm != 1 && cm != M))
      return Status(errc::invalid_argument, cat("C of shape ", dims_string(cs), " does not broadcast to ", dims_string(out)));
    const T* pc = c.typed<T>();
    for (std::int64_t i = 0; i < M; ++i) {
      const T* row = pc + (cm == 1 ? 0 : i * cn);
      T* y = py + i * N;
      if (cn == 1) std::fill_n(y, N, beta * row[0]);
      else
        for (std::int64_t j = 0; j < N; ++j) y[j] = beta * row[j];
    }
    accumulate = true;
  }
  if constexpr (std::is_same_v<T, float> && Product::packed) {
    if (pre != nullptr) {
      gemm_prepacked(ctx, ta, M, a.typed<float>(), a.sizes()[1], alpha, *pre, py, N, accumulate);
      return {};
    }
  }
  Product::run(ctx, ta, tb, M, N, K, alpha, a.typed<T>(), a.sizes()[1], b.typed<T>(), b.sizes()[1], py, N, accumulate);
  return {};
}
template <class T>
Status gemm_compute(compute_context& ctx, bool ta, bool tb, T alpha, T beta, const prepacked_b* pre = nullptr) {
  const tensor& b = ctx.input(1);
  return gemm_run<T>(ctx, ctx.input(0), b, ctx.has_input(2) ? &ctx.input(2) : nullptr, ta, tb, alpha, beta,
                     pre != nullptr && pre->matches(b) ? pre : nullptr, [&](std::span<const std::int64_t> sizes) {
                       return ctx.allocate_output(0, element_type_of_v<T>, sizes).template typed<T>();
                     });
}

// MatMul with numpy semantics (1-D operands promoted, batch dims broadcast), optionally transposing the last two
// dims of either operand and scaling (FusedMatMul).
// `pre` (B packed) is used when given (the caller has checked that it was packed from b); `alloc(sizes)` returns where
// Y goes.
template <class T, class Alloc>
Status matmul_run(compute_context& ctx, const tensor& a, const tensor& b, bool ta, bool tb, T alpha, const prepacked_b* pre,
                  Alloc alloc) {
  if (a.rank() == 0 || b.rank() == 0) return Status(errc::invalid_argument, "MatMul operands must have rank >= 1");
  tensor_sizes as(a.sizes().begin(), a.sizes().end()), bs(b.sizes().begin(), b.sizes().end());
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);  // [K] -> [1,K]
  if (b_vec) bs.push_back(1);           // [K] -> [K,1]
  const std::size_t ra = as.size(), rb = bs.size();
  const std::int64_t M = ta ? as[ra - 1] : as[ra - 2], K = ta ? as[ra - 2] : as[ra - 1];
  const std::int64_t Kb = tb ? bs[rb - 1] : bs[rb - 2], N = tb ? bs[rb - 2] : bs[rb - 1];
  if (K != Kb)
    return Status(errc::invalid_argument, cat("inner dimensions differ: ", dims_string(a.sizes()), " x ", dims_string(b.sizes())));
  const std::span<const std::int64_t> abatch(as.data(), ra - 2), bbatch(bs.data(), rb - 2);
  EPSTACK_ASSIGN_OR_RETURN(auto batch, broadcast_shape(abatch, bbatch));
  tensor_sizes out(batch.begin(), batch.end());
  if (!a_vec) out.push_back(M);
  if (!b_vec) out.push_back(N);
  T* py = alloc(std::span<const std::int64_t>(out));
  const T* pa = a.typed<T>();
  const T* pb = b.typed<T>();
  const std::int64_t nbatch = product(batch);
  const std::int64_t lda = as[ra - 1], ldb = bs[rb - 1];
  const std::int64_t a_mat = as[ra - 2] * as[ra - 1], b_mat = bs[rb - 2] * bs[rb - 1];
  if (nbatch == 0 || M == 0 || N == 0) return {};
  // B shared by every batch and A's batches contiguous, not transposed: one product with the batches stacked as rows.
  if (product(bbatch) == 1 && !ta && product(abatch) == nbatch) {
    if constexpr (std::is_same_v<T, float>) {
      if (pre != nullptr && !b_vec) {
        gemm_prepacked(ctx, false, nbatch * M, pa, lda, alpha, *pre, py, N, false);
        return {};
      }
    }
    gemm_parallel<T>(ctx, false, tb, nbatch * M, N, K, alpha, pa, lda, pb, ldb, py, N, false);
    return {};
  }
  const auto sa = broadcast_strides(abatch, batch), sb = broadcast_strides(bbatch, batch);
  const auto offsets = [&](std::int64_t i) {
    std::int64_t oa = 0, ob = 0;
    for (std::size_t d = batch.size(); d-- > 0;) {
      const std::int64_t idx = i % batch[d];
      i /= batch[d];
      oa += idx * sa[d];
      ob += idx * sb[d];
    }
    return std::pair{oa * a_mat, ob * b_mat};
  };
  const int threads = ctx.thread_count();
  if (nbatch >= threads) {
    const std::size_t cost = static_cast<std::size_t>(M * N * K);
    parallel_items(ctx, static_cast<std::size_t>(nbatch), cost, [&](std::size_t b0, std::size_t b1) {
      for (std::size_t i = b0; i < b1; ++i) {
        const auto [oa, ob] = offsets(static_cast<std::int64_t>(i));
        gemm_block<T>(ta, tb, M, N, K, alpha, pa + oa, lda, pb + ob, ldb, py + static_cast<std::int64_t>(i) * M * N, N, false);
      }
    });
  } else {
    for (std::int64_t i = 0; i < nbatch; ++i) {
      const auto [oa, ob] = offsets(i);
      gemm_parallel<T>(ctx, ta, tb, M, N, K, alpha, pa + oa, lda, pb + ob, ldb, py + i * M * N, N, false);
    }
  }
  return {};
}

template <class T>
Status matmul_compute(compute_context& ctx, bool ta, bool tb, T alpha, const prepacked_b* pre = nullptr) {
  const tensor& b = ctx.input(1);
  return matmul_run<T>(ctx, ctx.input(0), b, ta, tb, alpha, pre != nullptr && pre->matches(b) ? pre : nullptr,
                       [&](std::span<const std::int64_t> sizes) {
                         return ctx.allocate_output(0, element_type_of_v<T>, sizes).template typed<T>();
                       });
}

// float16 and bfloat16: the operands widened to float in scratch memory, the float product, Y rounded once. A B that
// `pre` was packed from is not widened (the packed copy is what the product reads).
struct half_operands {
  tensor a, b, c;  // float
  const prepacked_b* pre = nullptr;
};
Result<half_operands> widen_operands(compute_context& ctx, const prepacked_b* pre, bool with_c) {
  const tensor& a = ctx.input(0);
  const tensor& b = ctx.input(1);
  const auto t = a.type();
  if ((t != element_type::float16 && t != element_type::bfloat16) || b.type() != t ||
      (with_c && ctx.has_input(2) && ctx.input(2).type() != t))
    return Status(errc::invalid_argument, cat("inputs must all be float16 or all bfloat16, got ", std::string(to_string(t)),
                                              " and ", std::string(to_string(b.type()))));
  half_operands h;
  h.a = half_as_float(ctx, a);
  if (pre != nullptr && pre->matches(b)) {
    h.pre = pre;
    h.b = tensor::borrow(element_type::float32, b.sizes(), nullptr, nullptr);  // sizes only: never read
  } else {
    h.b = half_as_float(ctx, b);
  }
  if (with_c && ctx.has_input(2)) h.c = half_as_float(ctx, ctx.input(2));
  return h;
}
// Runs `run(a, b, c, pre, alloc)` (float operands) and rounds its float Y into output 0 of input 0's type.
template <class Run>
Status run_half(compute_context& ctx, const prepacked_b* pre, bool with_c, Run run) {
  EPSTACK_ASSIGN_OR_RETURN(half_operands h, widen_operands(ctx, pre, with_c));
  tensor* y = nullptr;
  tensor fy;
  const auto alloc = [&](std::span<const std::int64_t> sizes) {
    y = &ctx.allocate_output(0, ctx.input(0).type(), sizes);
    fy = ctx.scratch(element_type::float32, y->element_count());
    return fy.typed<float>();
  };
  EPSTACK_RETURN_IF_ERROR(run(h, alloc));
  if (y != nullptr && y->element_count() != 0) store_as_half(ctx, fy.typed<float>(), *y);
  return {};
}

bool float_pair(const graph& g, node_id n) {
  const auto a = in_type(g, n, 0);
  return (a == element_type::float32 || a == element_type::float64 || a == element_type::float16 ||
          a == element_type::bfloat16) &&
         in_type(g, n, 1) == a;
}
bool half_type(element_type e) { return e == element_type::float16 || e == element_type::bfloat16; }

}  // namespace

template void gemm_parallel<float>(const compute_context&, bool, bool, std::int64_t, std::int64_t, std::int64_t, float,
                                   const float*, std::int64_t, const float*, std::int64_t, float*, std::int64_t, bool);
template void gemm_block<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*, std::int64_t,
                                const float*, std::int64_t, float*, std::int64_t, bool);
template void gemm_parallel<double>(const compute_context&, bool, bool, std::int64_t, std::int64_t, std::int64_t, double,
                                    const double*, std::int64_t, const double*, std::int64_t, double*, std::int64_t, bool);
template void gemm_block<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double, const double*,
                                 std::int64_t, const double*, std::int64_t, double*, std::int64_t, bool);

}  // namespace impl

namespace ops {
using namespace impl;

bool gemm::supports(const graph& g, node_id n) {
  // Opset 6 and earlier broadcast C only with the `broadcast` attribute; those versions are handled as opset 7.
  return float_pair(g, n) && (!has_in(g, n, 2) || in_type(g, n, 2) == in_type(g, n, 0));
}
// The float paths of Gemm and MatMul, each its own function: the typed kernels (gemm_of<float>, matmul_of<float>)
// link these and not the other types.
namespace {
Result<compute_function> gemm_float(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const bool ta = attr_i(nd, "transA", 0) != 0, tb = attr_i(nd, "transB", 0) != 0;
  const float alpha = attr_f(nd, "alpha", 1.0f), beta = attr_f(nd, "beta", 1.0f);
  auto pre = std::make_shared<const prepacked_b>(prepack_constant_b(g, n, tb, ta));
  return make_fn("Gemm", [=](compute_context& ctx) { return gemm_compute<float>(ctx, ta, tb, alpha, beta, pre.get()); });
}
Result<compute_function> matmul_float(const graph& g, node_id n) {
  auto pre = std::make_shared<const prepacked_b>(prepack_constant_b(g, n, false));
  return make_fn("MatMul", [pre](compute_context& ctx) { return matmul_compute<float>(ctx, false, false, 1.0f, pre.get()); });
}
}  // namespace

bool gemm_of<float>::supports(const graph& g, node_id n) { return gemm::supports(g, n) && in_type(g, n, 0) == element_type::float32; }
Result<compute_function> gemm_of<float>::compile(const graph& g, node_id n) { return gemm_float(g, n); }
// Float Gemm whose A has at most 4 rows, known at create (a static batch of 1-4): no packing, sgemv.cpp's kernels.
bool gemm_mv_of<float>::supports(const graph& g, node_id n) {
  if (!gemm_of<float>::supports(g, n)) return false;
  const auto rows = static_rows(g, n, attr_i(g.node(n), "transA", 0) != 0);
  return rows && *rows <= 4;
}
namespace {
template <bool BT>
compute_function gemm_mv(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const bool ta = attr_i(nd, "transA", 0) != 0, tb = attr_i(nd, "transB", 0) != 0;
  const float alpha = attr_f(nd, "alpha", 1.0f), beta = attr_f(nd, "beta", 1.0f);
  return make_fn("Gemm", [=](compute_context& ctx) {
    return gemm_run<float, few_rows_product<BT>>(ctx, ctx.input(0), ctx.input(1), ctx.has_input(2) ? &ctx.input(2) : nullptr,
                                                 ta, tb, alpha, beta, nullptr, [&](std::span<const std::int64_t> sizes) {
                                                   return ctx.allocate_output(0, element_type::float32, sizes).typed<float>();
                                                 });
  });
}
}  // namespace
Result<compute_function> gemm_mv_of<float>::compile(const graph& g, node_id n) { return gemm_mv<false>(g, n); }
// The same with transA = 0 and transB = 1 (a Linear layer): the dot-product kernels alone.
bool gemm_mv_bt_of<float>::supports(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  return gemm_mv_of<float>::supports(g, n) && attr_i(nd, "transA", 0) == 0 && attr_i(nd, "transB", 0) != 0;
}
Result<compute_function> gemm_mv_bt_of<float>::compile(const graph& g, node_id n) {
  if (!supports(g, n))
    return Status(errc::not_implemented, cat("gemm_mv_bt_of<float> takes a float Gemm of at most 4 static rows with transA = 0 "
                                             "and transB = 1, node '", g.node(n).name, "' is another"));
  return gemm_mv<true>(g, n);
}
bool matmul_of<float>::supports(const graph& g, node_id n) {
  return matmul::supports(g, n) && in_type(g, n, 0) == element_type::float32;
}
Result<compute_function> matmul_of<float>::compile(const graph& g, node_id n) { return matmul_float(g, n); }

Result<compute_function> gemm::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const bool ta = attr_i(nd, "transA", 0) != 0, tb = attr_i(nd, "transB", 0) != 0;
  const float alpha = attr_f(nd, "alpha", 1.0f), beta = attr_f(nd, "beta", 1.0f);
  if (in_type(g, n, 0) == element_type::float32) return gemm_float(g, n);
  if (half_type(in_type(g, n, 0))) {
    auto pre = std::make_shared<const prepacked_b>(prepack_constant_b(g, n, tb, ta));
    return make_fn("Gemm", [=](compute_context& ctx) {
      return run_half(ctx, pre.get(), beta != 0.0f, [&](const half_operands& h, const auto& alloc) {
        return gemm_run<float>(ctx, h.a, h.b, h.c.empty() ? nullptr : &h.c, ta, tb, alpha, beta, h.pre, alloc);
      });
    });
  }
  return make_fn("Gemm", [=](compute_context& ctx) {
    return gemm_compute<double>(ctx, ta, tb, static_cast<double>(alpha), static_cast<double>(beta));
  });
}

bool matmul::supports(const graph& g, node_id n) { return float_pair(g, n); }
Result<compute_function> matmul::compile(const graph& g, node_id n) {
  if (in_type(g, n, 0) == element_type::float32) return matmul_float(g, n);
  if (half_type(in_type(g, n, 0))) {
    auto pre = std::make_shared<const prepacked_b>(prepack_constant_b(g, n, false));
    return make_fn("MatMul", [pre](compute_context& ctx) {
      return run_half(ctx, pre.get(), false, [&](const half_operands& h, const auto& alloc) {
        return matmul_run<float>(ctx, h.a, h.b, false, false, 1.0f, h.pre, alloc);
      });
    });
  }
  return make_fn("MatMul", [](compute_context& ctx) { return matmul_compute<double>(ctx, false, false, 1.0); });
}

bool fused_matmul::supports(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const auto t = in_type(g, n, 0);
  return (t == element_type::float32 || half_type(t)) && in_type(g, n, 1) == t && attr_i(nd, "transBatchA", 0) == 0 &&
         attr_i(nd, "transBatchB", 0) == 0;
}
Result<compute_function> fused_matmul::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const bool ta = attr_i(nd, "transA", 0) != 0, tb = attr_i(nd, "transB", 0) != 0;
  const float alpha = attr_f(nd, "alpha", 1.0f);
  // matmul_run reads a packed B only when A is not transposed: with transA nothing is packed (no copy, and B's pages
  // stay where the unpacked product reads them).
  auto pre = std::make_shared<const prepacked_b>(ta ? prepacked_b{} : prepack_constant_b(g, n, tb, ta));
  if (half_type(in_type(g, n, 0)))
    return make_fn("FusedMatMul", [=](compute_context& ctx) {
      return run_half(ctx, ta ? nullptr : pre.get(), false, [&](const half_operands& h, const auto& alloc) {
        return matmul_run<float>(ctx, h.a, h.b, ta, tb, alpha, h.pre, alloc);
      });
    });
  return make_fn("FusedMatMul", [=](compute_context& ctx) { return matmul_compute<float>(ctx, ta, tb, alpha, pre.get()); });
}

// com.epstack.cpu MatMulBias(A [..., K], B [K, N] (or [N, K] with attribute transB 1)[, bias [N]]), attribute
// activation "" (none), "Relu" or "Gelu": act(A B + bias) in float, A's batches stacked as rows of one product. With
// B packed at create, the bias and the activation are applied as each tile of Y is stored (sgemm_epilogue); otherwise
// after the product, row by row.
namespace {
std::optional<sgemm_epilogue::act> matmul_bias_activation(const node& nd) {
  const std::string a = attr_s(nd, "activation");
  if (a.empty()) return sgemm_epilogue::act::none;
  if (a == "Relu") return sgemm_epilogue::act::relu;
  if (a == "Gelu") return sgemm_epilogue::act::gelu;
  return std::nullopt;
}
}  // namespace
bool matmul_bias::supports(const graph& g, node_id n) {
  return in_type(g, n, 0) == element_type::float32 && in_type(g, n, 1) == element_type::float32 &&
         (!has_in(g, n, 2) || in_type(g, n, 2) == element_type::float32) && matmul_bias_activation(g.node(n)).has_value();
}
Result<compute_function> matmul_bias::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const auto act = matmul_bias_activation(nd);
  if (!act)
    return Status(errc::not_implemented, cat("MatMulBias node '", nd.name, "': activation '", attr_s(nd, "activation"),
                                             "' is none of Relu and Gelu"));
  const bool tb = attr_i(nd, "transB", 0) != 0;
  auto pre = std::make_shared<const prepacked_b>(prepack_constant_b(g, n, tb));
  return make_fn("MatMulBias", [pre, act = *act, tb](compute_context& ctx) -> Status {
    const tensor& a = ctx.input(0);
    const tensor& b = ctx.input(1);
    if (a.rank() < 2 || b.rank() != 2)
      return Status(errc::invalid_argument, cat("A must have rank 2 or more and B must be a matrix, got ", dims_string(a.sizes()),
                                                " and ", dims_string(b.sizes())));
    const std::int64_t K = a.sizes().back(), N = b.sizes()[tb ? 0 : 1];
    if (b.sizes()[tb ? 1 : 0] != K)
      return Status(errc::invalid_argument, cat("inner dimensions differ: ", dims_string(a.sizes()), " x ", dims_string(b.sizes())));
    const tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (bias != nullptr && (bias->element_count() != static_cast<std::size_t>(N) || bias->type() != element_type::float32))
      return Status(errc::invalid_argument, cat("the bias of shape ", dims_string(bias->sizes()), " is not one float per column (",
                                                std::to_string(N), ")"));
    tensor_sizes out(a.sizes().begin(), a.sizes().end());
    out.back() = N;
    float* y = ctx.allocate_output(0, element_type::float32, out).typed<float>();
    const std::int64_t rows = product(a.sizes(), 0, a.rank() - 1);
    if (rows == 0 || N == 0) return {};
    sgemm_epilogue ep;
    ep.z = bias != nullptr ? bias->typed<float>() : nullptr;
    ep.ldz = 0;
    ep.activation = act;
    const bool any = ep.z != nullptr || act != sgemm_epilogue::act::none;
    if (pre->matches(b) && K > 0) {
      gemm_prepacked(ctx, false, rows, a.typed<float>(), K, 1.0f, *pre, y, N, false, any ? &ep : nullptr);
      return {};
    }
    gemm_parallel<float>(ctx, false, tb, rows, N, K, 1.0f, a.typed<float>(), K, b.typed<float>(), b.sizes()[1], y, N, false);
    if (any)
      ctx.parallel_for(static_cast<std::size_t>(rows), 1, [&](std::size_t r0, std::size_t r1) {
        sgemm_apply_epilogue(ep, y, N, static_cast<std::int64_t>(r0), static_cast<std::int64_t>(r1), 0, N);
      });
    return {};
  });
}

}  // namespace ops
}  // namespace epstack::cpu
