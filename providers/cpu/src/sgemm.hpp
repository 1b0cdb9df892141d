#pragma once
// Single-precision matrix products for the CPU provider: a cache-blocked SGEMM over packed panels with an AVX-512
// micro-kernel (12 rows x 32 columns of C held in 24 registers), in the manner of BLIS and MLAS. Operands are packed
// into panels (A: 12 rows, B: 32 columns, each in blocks of KC along K) once per call, or once at compile time for
// constant weights (those that only a few rows of A meet in full-depth panels instead: gemv_pack_b). Built without AVX-512, the same entry points run Eigen 3.4's product instead.
#include <cstddef>
#include <cstdint>

namespace epstack::cpu::impl {

/// True when the packed AVX-512 path is compiled in (the build's -march has AVX-512F).
bool sgemm_packed_available() noexcept;

/// The same, as a constant: where it is true, the float products never need Eigen's (the deployables' size).
#if defined(__AVX512F__)
inline constexpr bool sgemm_packed_compiled = true;
#else
inline constexpr bool sgemm_packed_compiled = false;
#endif

/// True for the matrix-vector shapes (M <= 4 or N <= 2) that `small_sgemm` computes.
bool small_sgemm_shape(std::int64_t M, std::int64_t N) noexcept;
/// C[M,N] (leading dimension ldc) = alpha * op(A) op(B) (+ C when `accumulate`) for those shapes, reading A and B where
/// they lie (A [M,K] or, when `ta`, [K,M]; B [K,N] or, when `tb`, [N,K]). Single-threaded.
void small_sgemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* a,
                 std::int64_t lda, const float* b, std::int64_t ldb, float* c, std::int64_t ldc, bool accumulate);
/// small_sgemm for M <= 4 alone (a program whose products all have so few rows links nothing of the N <= 2 form).
void small_sgemm_rows(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* a,
                      std::int64_t lda, const float* b, std::int64_t ldb, float* c, std::int64_t ldc, bool accumulate);
/// small_sgemm_rows for A not transposed and B transposed ([N, K]: a Linear layer's weight) alone: dot products only.
void small_sgemm_rows_bt(std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* a, std::int64_t lda,
                         const float* b, std::int64_t ldb, float* c, std::int64_t ldc, bool accumulate);

inline constexpr std::int64_t sgemm_mr = 12;   ///< rows of a packed A panel
inline constexpr std::int64_t sgemm_nr = 32;   ///< columns of a packed B panel
inline constexpr std::int64_t sgemm_kc = 256;  ///< depth of a K block

/// Floats needed to pack an M x K operand A (rows padded to whole panels).
std::size_t packed_a_size(std::int64_t M, std::int64_t K) noexcept;
/// Floats needed to pack a K x N operand B (columns padded to whole panels).
std::size_t packed_b_size(std::int64_t K, std::int64_t N) noexcept;

/// Packs op(A) (M x K; A stored [M,K] with leading dimension lda, or [K,M] when `ta`) into `dst`, 64-byte aligned,
/// of packed_a_size(M, K) floats.
void pack_a(float* dst, const float* a, std::int64_t lda, bool ta, std::int64_t M, std::int64_t K);
/// `pack_a` of the panels [p0, p1) only (into the same places), so that threads can pack their own panels.
void pack_a_panels(float* dst, const float* a, std::int64_t lda, bool ta, std::int64_t M, std::int64_t K,
                   std::int64_t p0, std::int64_t p1);
/// Packs op(B) (K x N; B stored [K,N] with leading dimension ldb, or [N,K] when `tb`) into `dst`, 64-byte aligned,
/// of packed_b_size(K, N) floats.
void pack_b(float* dst, const float* b, std::int64_t ldb, bool tb, std::int64_t K, std::int64_t N);

/// @brief What is applied to C as the last K block is stored: per-row bias, a residual Z laid out like C (or, with
/// `ldz` 0, one value per column: a bias over N), and a ReLU, clip or GELU (erf form, gelu_erf of fast_math.hpp).
/// Rows and columns are C's (absolute, not relative to a panel).
struct sgemm_epilogue {
  const float* bias = nullptr;
  const float* z = nullptr;
  std::int64_t ldz = 0;
  enum class act : std::uint8_t { none, relu, clip, gelu } activation = act::none;
  float lo = 0, hi = 0;
};

/// @brief B as the kernel reads it: packed panels (pack_b), or an unpacked row-major K x N matrix with leading
/// dimension `ld` (read in place: what a pointwise convolution's input already is).
struct sgemm_b {
  const float* data = nullptr;
  std::int64_t ld = 0;  ///< 0: packed
};

/// @brief C[M,N] (leading dimension ldc) = alpha * A * B (+ C when `accumulate`), then the epilogue (if any), for
/// packed A; computing only the A panels [p0, p1) and B panels [q0, q1) (so threads can split the work by panels).
/// Single-threaded.
void sgemm(std::int64_t M, std::int64_t N, std::int64_t K, const float* pa, sgemm_b b, float* c, std::int64_t ldc,
           float alpha, bool accumulate, const sgemm_epilogue* ep, std::int64_t p0, std::int64_t p1, std::int64_t q0,
           std::int64_t q1);
/// Applies `ep` to rows [i0, i1) x columns [j0, j1) of C (the scalar path).
void sgemm_apply_epilogue(const sgemm_epilogue& ep, float* c, std::int64_t ldc, std::int64_t i0, std::int64_t i1,
                          std::int64_t j0, std::int64_t j1);

/// `sgemm` with packed B (`pb`, from pack_b): it links only the kernels for packed panels.
void sgemm_pb(std::int64_t M, std::int64_t N, std::int64_t K, const float* pa, const float* pb, float* c, std::int64_t ldc,
              float alpha, bool accumulate, const sgemm_epilogue* ep, std::int64_t p0, std::int64_t p1, std::int64_t q0,
              std::int64_t q1);
/// `sgemm` with packed B and no epilogue.
inline void sgemm_packed(std::int64_t M, std::int64_t N, std::int64_t K, const float* pa, const float* pb, float* c,
                         std::int64_t ldc, float alpha, bool accumulate, std::int64_t p0, std::int64_t p1, std::int64_t q0,
                         std::int64_t q1) {
  sgemm_pb(M, N, K, pa, pb, c, ldc, alpha, accumulate, nullptr, p0, p1, q0, q1);
}

/// Panels of an M x K A / a K x N B.
inline std::int64_t a_panels(std::int64_t M) noexcept { return (M + sgemm_mr - 1) / sgemm_mr; }
inline std::int64_t b_panels(std::int64_t N) noexcept { return (N + sgemm_nr - 1) / sgemm_nr; }

/// Columns of a full-depth panel: a constant B met only by a few rows of A (a decode step's weights), packed so that each
/// panel of 32 columns is one contiguous run of K x 32 floats. A thread reading a range of panels reads one stream,
/// where the SGEMM's K blocks would make it many short ones (cold weights: 2048 x 512 in 39-47 us against 63-70).
/// As wide as the SGEMM's panels, so b_panels and packed_b_size count them too.
inline constexpr std::int64_t gemv_panel = sgemm_nr;
/// Packs op(B) (K x N; B stored [K,N] with leading dimension ldb, or [N,K] when `tb`) into full-depth panels of
/// gemv_panel columns, zero-padded: packed_b_size(K, N) floats.
void gemv_pack_b(float* dst, const float* b, std::int64_t ldb, bool tb, std::int64_t K, std::int64_t N);
/// Y[M, N] (leading dimension ldy) = alpha * A * B (+ Y when `accumulate`) for the columns of panels [q0, q1), B packed
/// by gemv_pack_b and A's M rows read in place (row i at a + i * lda), four at a time. Single-threaded.
void small_sgemm_panels(std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* a, std::int64_t lda,
                        const float* pb, float* y, std::int64_t ldy, bool accumulate, std::int64_t q0, std::int64_t q1);

/// Where element (i, k) of an M x K operand A lands in pack_a's layout (for writers that produce A packed directly).
inline std::int64_t packed_a_offset(std::int64_t M, std::int64_t K, std::int64_t i, std::int64_t k) noexcept {
  const std::int64_t k0 = k / sgemm_kc * sgemm_kc, kc = K - k0 < sgemm_kc ? K - k0 : sgemm_kc;
  return k0 * a_panels(M) * sgemm_mr + (i / sgemm_mr) * kc * sgemm_mr + (k - k0) * sgemm_mr + i % sgemm_mr;
}

}  // namespace epstack::cpu::impl
