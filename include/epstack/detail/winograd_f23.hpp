#pragma once
/// @file winograd_f23.hpp
/// @brief The filter transforms of Winograd F(2x2, 3x3) and F(4x4, 3x3) (Lavin and Gray, 2016), shared by the
/// optimiser's blocked layout pass (which writes the CPU provider's transformed filters) and the CPU provider's NCHW
/// Winograd kernel.

namespace epstack::detail {

/// U = G g G^T of one 3x3 filter `g` (row-major), with G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]: the 16 values
/// of the 4x4 transformed filter, row-major (position xi = 4 * row + column). T is float, or a vector of floats (GCC's
/// vector extension) that transforms one filter per lane with the same arithmetic, value for value.
template <class T>
inline void winograd_f23_filter(const T* g, T* u) noexcept {
  T gg[4][3];  // G g
  for (int j = 0; j < 3; ++j) {
    gg[0][j] = g[j];
    gg[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
    gg[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
    gg[3][j] = g[6 + j];
  }
  for (int i = 0; i < 4; ++i) {
    const T a = gg[i][0], b = gg[i][1], c = gg[i][2];
    u[i * 4 + 0] = a;
    u[i * 4 + 1] = 0.5f * (a + b + c);
    u[i * 4 + 2] = 0.5f * (a - b + c);
    u[i * 4 + 3] = c;
  }
}

/// U = G g G^T of one 3x3 filter `g` (row-major) for F(4x4, 3x3), with
/// G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]: the 36 values of the 6x6
/// transformed filter, row-major (position xi = 6 * row + column). T as for winograd_f23_filter.
template <class T>
inline void winograd_f43_filter(const T* g, T* u) noexcept {
  const auto column = [](const T& a, const T& b, const T& c, T* o) {  // G (a b c)^T; by reference: a vector argument by value would change the ABI
    o[0] = a / 4.0f;
    o[1] = -(a + b + c) / 6.0f;
    o[2] = -(a - b + c) / 6.0f;
    o[3] = a / 24.0f + b / 12.0f + c / 6.0f;
    o[4] = a / 24.0f - b / 12.0f + c / 6.0f;
    o[5] = c;
  };
  T gg[6][3];  // G g
  for (int j = 0; j < 3; ++j) {
    T o[6];
    column(g[j], g[3 + j], g[6 + j], o);
    for (int i = 0; i < 6; ++i) gg[i][j] = o[i];
  }
  for (int i = 0; i < 6; ++i) column(gg[i][0], gg[i][1], gg[i][2], u + i * 6);
}

}  // namespace epstack::detail
