// Float products of matrix-vector shapes (at most 4 rows, or at most 2 columns) with neither operand packed (and, at
// the end, the few-rows product over a constant B packed in full-depth panels, combine_panels): a
// decode step's attention (one query row against the keys, the weights against the values), a batch-1 product of two
// activations, a matrix times a column. Packing both operands, as the blocked SGEMM does, would read and write each
// as often as the product reads it; here every element of the large operand is read once, from where it lies.
// Two forms: rows of B combined with a few scalar sequences (op(B) not transposed: C rows are sums of B rows), and
// dot products of a few vectors with B's rows (op(B) transposed, or a column times a matrix's rows).
// GCC vector extensions, as the blocked-layout kernels: 16 floats a vector, so the same code compiles without
// AVX-512 (in halves or quarters).
#include "sgemm.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

// The kernels below are instantiated once per count of rows; GCC would also clone them per constant argument.
#if defined(__clang__)
#define EPSTACK_SGEMV_OUTLINE [[gnu::noinline]]
#else
#define EPSTACK_SGEMV_OUTLINE __attribute__((noipa))
#endif

namespace epstack::cpu::impl {
namespace {

typedef float v16 __attribute__((vector_size(64)));

inline v16 load(const float* p) {
  v16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, v16 v) { std::memcpy(p, &v, sizeof v); }
typedef float v8 __attribute__((vector_size(32)));
typedef float v4 __attribute__((vector_size(16)));
// The sum of the 16 lanes by halves (a tree: a few shuffles, not 15 dependent additions).
inline float lane_sum(v16 v) {
  const v8 h = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) + __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  const v4 q = __builtin_shufflevector(h, h, 0, 1, 2, 3) + __builtin_shufflevector(h, h, 4, 5, 6, 7);
  return (q[0] + q[2]) + (q[1] + q[3]);
}

// Eight vectors' lane sums at once, by halves: the pair sum of lanes 2q and 2q + 1 of the result is vector q's sum.
// Each step adds two vectors' halves side by side, so 7 additions (and their shuffles) do the work of 8 x 15.
inline v16 pair_halves(v16 x, v16 y, int step) {
  switch (step) {
    case 0:
      return __builtin_shufflevector(x, y, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
             __builtin_shufflevector(x, y, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    case 1:
      return __builtin_shufflevector(x, y, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
             __builtin_shufflevector(x, y, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
    default:
      return __builtin_shufflevector(x, y, 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29) +
             __builtin_shufflevector(x, y, 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
  }
}
inline v16 lane_sums8(v16 a0, v16 a1, v16 a2, v16 a3, v16 a4, v16 a5, v16 a6, v16 a7) {
  const v16 p0 = pair_halves(a0, a1, 0), p1 = pair_halves(a2, a3, 0), p2 = pair_halves(a4, a5, 0), p3 = pair_halves(a6, a7, 0);
  return pair_halves(pair_halves(p0, p1, 1), pair_halves(p2, p3, 1), 2);
}

// Stores alpha * acc (+ what is there when `accumulate`) at p.
inline void finish(float* p, v16 acc, float alpha, bool accumulate) {
  v16 r = alpha * acc;
  if (accumulate) r += load(p);
  store(p, r);
}
inline void finish(float* p, float acc, float alpha, bool accumulate) { *p = accumulate ? *p + alpha * acc : alpha * acc; }

// out[t * ldo + n] = alpha * sum_k s[t][k] * b[k * ldb + n] (+ out[t * ldo + n] when `accumulate`), t < S, n < N.
// Up to 128 columns: in registers, 64 columns at a time, the rows split in two sums (independent chains for the FMA
// pipes). Wider: 512 columns at a time summed in a block of L1 memory, B read four whole rows at a time (B's rows
// stream in order, as the prefetchers like, and its bytes are read once).
template <int S>
EPSTACK_SGEMV_OUTLINE void combine_rows(std::int64_t K, std::int64_t N, const float* const* s, const float* b, std::int64_t ldb, float* out,
                  std::int64_t ldo, float alpha, bool accumulate) {
  const std::int64_t N16 = N / 16 * 16;
  if (N <= 128) {
    // V vectors of columns from n, in registers.
    const auto columns = [&]<int V>(std::integral_constant<int, V>, std::int64_t n) {
      constexpr int split = S <= 2 ? 2 : 1;
      v16 acc[split][S][V] = {};
      const auto row = [&](int h, std::int64_t kk) {
        const float* bk = b + kk * ldb + n;
        v16 bv[V];
        for (int v = 0; v < V; ++v) bv[v] = load(bk + 16 * v);
        for (int t = 0; t < S; ++t) {
          const float st = s[t][kk];
          for (int v = 0; v < V; ++v) acc[h][t][v] += st * bv[v];
        }
      };
      std::int64_t k = 0;
      for (; k + split <= K; k += split)
        for (int h = 0; h < split; ++h) row(h, k + h);
      for (; k < K; ++k) row(0, k);
      for (int t = 0; t < S; ++t)
        for (int v = 0; v < V; ++v) {
          v16 sum = acc[0][t][v];
          if constexpr (split == 2) sum += acc[1][t][v];
          finish(out + t * ldo + n + 16 * v, sum, alpha, accumulate);
        }
    };
    std::int64_t n = 0;
    for (; n + 64 <= N16; n += 64) columns(std::integral_constant<int, 4>{}, n);
    for (; n < N16; n += 16) columns(std::integral_constant<int, 1>{}, n);
  } else {
    constexpr std::int64_t NB = 512;
    alignas(64) float sum[S][NB];
    for (std::int64_t n0 = 0; n0 < N16; n0 += NB) {
      const std::int64_t w = std::min(NB, N16 - n0);
      for (int t = 0; t < S; ++t) std::fill_n(sum[t], w, 0.0f);
      std::int64_t k = 0;
      for (; k + 4 <= K; k += 4) {
        const float* b0 = b + k * ldb + n0;
        const float* b1 = b0 + ldb;
        const float* b2 = b1 + ldb;
        const float* b3 = b2 + ldb;
        for (std::int64_t j = 0; j < w; j += 16) {
          const v16 x0 = load(b0 + j), x1 = load(b1 + j), x2 = load(b2 + j), x3 = load(b3 + j);
          for (int t = 0; t < S; ++t) {
            v16 a = load(sum[t] + j);
            a += s[t][k] * x0;
            a += s[t][k + 1] * x1;
            a += s[t][k + 2] * x2;
            a += s[t][k + 3] * x3;
            store(sum[t] + j, a);
          }
        }
      }
      for (; k < K; ++k) {
        const float* bk = b + k * ldb + n0;
        for (std::int64_t j = 0; j < w; j += 16) {
          const v16 x = load(bk + j);
          for (int t = 0; t < S; ++t) store(sum[t] + j, load(sum[t] + j) + s[t][k] * x);
        }
      }
      for (int t = 0; t < S; ++t)
        for (std::int64_t j = 0; j < w; j += 16) finish(out + t * ldo + n0 + j, load(sum[t] + j), alpha, accumulate);
    }
  }
  for (std::int64_t n = N16; n < N; ++n) {
    for (int t = 0; t < S; ++t) {
      float acc = 0;
      for (std::int64_t k = 0; k < K; ++k) acc += s[t][k] * b[k * ldb + n];
      finish(out + t * ldo + n, acc, alpha, accumulate);
    }
  }
}

// R rows of `r` (from row i) against S vectors: out[(i + q) * ors + t * ots] = alpha * dot(v[t], r row i + q)
// (+ the value there when `accumulate`).
template <int S, int R>
inline void dot_block(std::int64_t K, std::int64_t i, const float* const* v, const float* r, std::int64_t ldr, float* out,
                      std::int64_t ors, std::int64_t ots, float alpha, bool accumulate) {
  const std::int64_t K16 = K / 16 * 16;
  v16 acc[R][S] = {};
  for (std::int64_t k = 0; k < K16; k += 16) {
    v16 x[S];
    for (int t = 0; t < S; ++t) x[t] = load(v[t] + k);
    for (int q = 0; q < R; ++q) {
      const v16 rq = load(r + (i + q) * ldr + k);
      for (int t = 0; t < S; ++t) acc[q][t] += rq * x[t];
    }
  }
  if constexpr (S == 1 && R == 8) {
    if (K16 == K) {
      const v16 sums = lane_sums8(acc[0][0], acc[1][0], acc[2][0], acc[3][0], acc[4][0], acc[5][0], acc[6][0], acc[7][0]);
      for (int q = 0; q < 8; ++q) finish(out + (i + q) * ors, sums[2 * q] + sums[2 * q + 1], alpha, accumulate);
      return;
    }
  }
  for (int q = 0; q < R; ++q) {
    const float* row = r + (i + q) * ldr;
    for (int t = 0; t < S; ++t) {
      float sum = lane_sum(acc[q][t]);
      for (std::int64_t k = K16; k < K; ++k) sum += v[t][k] * row[k];
      finish(out + (i + q) * ors + t * ots, sum, alpha, accumulate);
    }
  }
}

// Every row of `r` (Nr of them) against S vectors; 8 rows at a time against one vector, 4 against several (enough
// independent sums to keep both FMA pipes busy).
template <int S>
EPSTACK_SGEMV_OUTLINE void dot_rows(std::int64_t K, std::int64_t Nr, const float* const* v, const float* r, std::int64_t ldr, float* out,
              std::int64_t ors, std::int64_t ots, float alpha, bool accumulate) {
  constexpr int R = S == 1 ? 8 : 4;
  std::int64_t i = 0;
  for (; i + R <= Nr; i += R) dot_block<S, R>(K, i, v, r, ldr, out, ors, ots, alpha, accumulate);
  for (; i < Nr; ++i) dot_block<S, 1>(K, i, v, r, ldr, out, ors, ots, alpha, accumulate);
}

// out[t * ldo + n] = alpha * sum_k s[t][k] * B[k][n] (+ out when `accumulate`), t < rows <= S, for the columns of panels
// [q0, q1) of B in full-depth panels (gemv_pack_b: panel q is K rows of 32 floats, one contiguous stream). Two depths
// a step, each into its own sums: the FMA chains of one depth would wait on each other's latency.
template <int S>
EPSTACK_SGEMV_OUTLINE void combine_panels(std::int64_t K, std::int64_t N, const float* const* s, const float* pb, std::int64_t q0,
                                          std::int64_t q1, float* out, std::int64_t ldo, float alpha, bool accumulate,
                                          std::int64_t rows) {
  // P panels at once, P streams of B. Weights that come from memory arrive faster in two streams than in one (the
  // hardware prefetchers keep more lines in flight for the core), so one row of A reads two: bench_kernels with
  // BENCH_COLD=1, 1x4096x4096 2.08-2.29 -> 1.87-1.93 ms, 1x2048x512 116-123 -> 102-106 us; four streams 2.03-2.11 ms.
  // Warm, level (4096x4096 1.24 ms both) or faster (2048x512 38-46 -> 33-39 us). Several rows read one. Each stream
  // is also fetched 8 KiB ahead by software: mlp_b1 0.983-0.997 of its time, llm_decode 0.988-0.989 (paired runs;
  // 4 KiB ahead alike, 16 KiB 2.5-3.5% slower than 4 KiB).
  std::int64_t q = q0;
  const auto panels = [&]<int P>(std::integral_constant<int, P>) {
    for (; q + P <= q1; q += P) {
      const float* b[P];
      for (int p = 0; p < P; ++p) b[p] = pb + (q + p) * K * gemv_panel;
      v16 acc[P][2][S][2] = {};
      std::int64_t k = 0;
      for (; k + 2 <= K; k += 2)
        for (int p = 0; p < P; ++p) {
          const float* bp = b[p] + k * gemv_panel;
          for (int l = 0; l < 4; ++l) __builtin_prefetch(bp + 2048 + 16 * l);  // this step's lines, 8 KiB ahead (see above)
          const v16 x00 = load(bp), x01 = load(bp + 16), x10 = load(bp + 32), x11 = load(bp + 48);
          for (int t = 0; t < S; ++t) {
            const float s0 = s[t][k], s1 = s[t][k + 1];
            acc[p][0][t][0] += s0 * x00;
            acc[p][0][t][1] += s0 * x01;
            acc[p][1][t][0] += s1 * x10;
            acc[p][1][t][1] += s1 * x11;
          }
        }
      if (k < K)
        for (int p = 0; p < P; ++p) {
          const v16 x0 = load(b[p] + k * gemv_panel), x1 = load(b[p] + k * gemv_panel + 16);
          for (int t = 0; t < S; ++t) {
            acc[p][0][t][0] += s[t][k] * x0;
            acc[p][0][t][1] += s[t][k] * x1;
          }
        }
      for (int p = 0; p < P; ++p) {
        const std::int64_t n0 = (q + p) * gemv_panel, cols = std::min<std::int64_t>(gemv_panel, N - n0);
        for (int t = 0; t < S && t < rows; ++t) {
          const v16 r0 = acc[p][0][t][0] + acc[p][1][t][0], r1 = acc[p][0][t][1] + acc[p][1][t][1];
          float* o = out + t * ldo + n0;
          if (cols == gemv_panel) {
            finish(o, r0, alpha, accumulate);
            finish(o + 16, r1, alpha, accumulate);
          } else {
            for (std::int64_t j = 0; j < cols; ++j) finish(o + j, j < 16 ? r0[j] : r1[j - 16], alpha, accumulate);
          }
        }
      }
    }
  };
  if constexpr (S == 1) panels(std::integral_constant<int, 2>{});
  panels(std::integral_constant<int, 1>{});
}

template <class F>
void with_count(std::int64_t n, F f) {
  switch (n) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 3: f(std::integral_constant<int, 3>{}); break;
    default: f(std::integral_constant<int, 4>{}); break;
  }
}

// Gathers `count` strided sequences of length K (sequence t at src + t * step, element k at k * stride) into `buf`.
void gather(std::vector<float>& buf, const float* src, std::int64_t count, std::int64_t step, std::int64_t K,
            std::int64_t stride, const float** seq) {
  buf.resize(static_cast<std::size_t>(count * K));
  for (std::int64_t t = 0; t < count; ++t) {
    float* d = buf.data() + t * K;
    for (std::int64_t k = 0; k < K; ++k) d[k] = src[t * step + k * stride];
    seq[t] = d;
  }
}

thread_local std::vector<float> gathered, transposed_out;

}  // namespace

bool small_sgemm_shape(std::int64_t M, std::int64_t N) noexcept { return M <= 4 || N <= 2; }

namespace {
// K == 0: C is zero (or kept).
bool empty_product(std::int64_t M, std::int64_t N, std::int64_t K, float* y, std::int64_t ldy, bool accumulate) {
  if (M == 0 || N == 0) return true;
  if (K != 0) return false;
  if (!accumulate)
    for (std::int64_t i = 0; i < M; ++i) std::fill_n(y + i * ldy, N, 0.0f);
  return true;
}
}  // namespace

void small_sgemm_rows_bt(std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* a, std::int64_t lda,
                         const float* b, std::int64_t ldb, float* y, std::int64_t ldy, bool accumulate) {
  if (empty_product(M, N, K, y, ldy, accumulate)) return;
  const float* seq[4];
  for (std::int64_t i = 0; i < M; ++i) seq[i] = a + i * lda;
  // B's rows are op(B)'s columns.
  with_count(M, [&](auto s) { dot_rows<decltype(s)::value>(K, N, seq, b, ldb, y, 1, ldy, alpha, accumulate); });
}

void small_sgemm_rows(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* a,
                      std::int64_t lda, const float* b, std::int64_t ldb, float* y, std::int64_t ldy, bool accumulate) {
  if (!ta && tb) return small_sgemm_rows_bt(M, N, K, alpha, a, lda, b, ldb, y, ldy, accumulate);
  if (empty_product(M, N, K, y, ldy, accumulate)) return;
  // op(A)'s rows: A's rows, or its columns gathered.
  const float* seq[4];
  if (ta) gather(gathered, a, M, 1, K, lda, seq);
  else
    for (std::int64_t i = 0; i < M; ++i) seq[i] = a + i * lda;
  with_count(M, [&](auto s) {
    if (tb) dot_rows<decltype(s)::value>(K, N, seq, b, ldb, y, 1, ldy, alpha, accumulate);
    else combine_rows<decltype(s)::value>(K, N, seq, b, ldb, y, ldy, alpha, accumulate);
  });
}

void small_sgemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* a,
                 std::int64_t lda, const float* b, std::int64_t ldb, float* y, std::int64_t ldy, bool accumulate) {
  if (M <= 4) return small_sgemm_rows(ta, tb, M, N, K, alpha, a, lda, b, ldb, y, ldy, accumulate);
  if (empty_product(M, N, K, y, ldy, accumulate)) return;
  const float* seq[4];
  // N <= 2: op(B)'s columns, B's rows or its columns gathered.
  if (tb)
    for (std::int64_t j = 0; j < N; ++j) seq[j] = b + j * ldb;
  else gather(gathered, b, N, 1, K, ldb, seq);
  with_count(N, [&](auto s) {
    if (!ta) {
      dot_rows<decltype(s)::value>(K, M, seq, a, lda, y, ldy, 1, alpha, accumulate);
      return;
    }
    // A stored [K, M]: C's columns are sums of A's rows, computed contiguous and then written across C's rows.
    transposed_out.resize(static_cast<std::size_t>(N * M));
    float* t = transposed_out.data();
    combine_rows<decltype(s)::value>(K, M, seq, a, lda, t, M, alpha, false);
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) y[i * ldy + j] = accumulate ? y[i * ldy + j] + t[j * M + i] : t[j * M + i];
  });
}

void small_sgemm_panels(std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* a, std::int64_t lda,
                        const float* pb, float* y, std::int64_t ldy, bool accumulate, std::int64_t q0, std::int64_t q1) {
  if (M == 0 || q0 >= q1) return;
  if (K == 0) {
    const std::int64_t j0 = q0 * gemv_panel, j1 = std::min(N, q1 * gemv_panel);
    if (!accumulate)
      for (std::int64_t i = 0; i < M; ++i) std::fill(y + i * ldy + j0, y + i * ldy + j1, 0.0f);
    return;
  }
  // One row (a batch of 1) or four: 2 and 3 rows run as 4, the missing rows reading row 0 again and stored nowhere
  // (two instantiations fewer in a deployable; the weights' stream, not the arithmetic, sets the time).
  for (std::int64_t i0 = 0; i0 < M; i0 += 4) {
    const std::int64_t m = std::min<std::int64_t>(4, M - i0);
    const float* seq[4];
    for (std::int64_t t = 0; t < 4; ++t) seq[t] = a + (i0 + (t < m ? t : 0)) * lda;
    if (m == 1) combine_panels<1>(K, N, seq, pb, q0, q1, y + i0 * ldy, ldy, alpha, accumulate, 1);
    else combine_panels<4>(K, N, seq, pb, q0, q1, y + i0 * ldy, ldy, alpha, accumulate, m);
  }
}

}  // namespace epstack::cpu::impl
