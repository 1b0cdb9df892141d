#pragma once
// Matrix products shared by the CPU kernels (defined in matmul.cpp, over Eigen 3.4).
#include <epstack/provider/compute.hpp>

#include <cstdint>

namespace epstack::cpu::impl {

/// @brief Y[M,N] (leading dimension ldy) = alpha * op(A) * op(B) (+ Y when `accumulate`), with A stored [M,K] (or
/// [K,M] when `ta`) and B stored [K,N] (or [N,K] when `tb`), row-major. Single-threaded.
template <class T>
void gemm_block(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, T alpha, const T* a, std::int64_t lda,
                const T* b, std::int64_t ldb, T* y, std::int64_t ldy, bool accumulate);

/// @brief The same product split across the intra-op threads (by column blocks when N is the larger side, else by
/// rows).
template <class T>
void gemm_parallel(const compute_context& ctx, bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, T alpha,
                   const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T* y, std::int64_t ldy, bool accumulate);

extern template void gemm_block<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*,
                                       std::int64_t, const float*, std::int64_t, float*, std::int64_t, bool);
extern template void gemm_parallel<float>(const compute_context&, bool, bool, std::int64_t, std::int64_t, std::int64_t,
                                          float, const float*, std::int64_t, const float*, std::int64_t, float*,
                                          std::int64_t, bool);

extern template void gemm_block<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double, const double*,
                                        std::int64_t, const double*, std::int64_t, double*, std::int64_t, bool);
extern template void gemm_parallel<double>(const compute_context&, bool, bool, std::int64_t, std::int64_t, std::int64_t,
                                           double, const double*, std::int64_t, const double*, std::int64_t, double*,
                                           std::int64_t, bool);

}  // namespace epstack::cpu::impl
