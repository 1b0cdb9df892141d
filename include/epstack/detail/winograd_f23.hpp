#pragma once
/// @file winograd_f23.hpp
/// @brief The filter transform of Winograd F(2x2, 3x3) (Lavin and Gray, 2016), shared by the optimiser's blocked
/// layout pass (which writes the CPU provider's transformed filters) and the CPU provider's NCHW Winograd kernel.

namespace epstack::detail {

/// U = G g G^T of one 3x3 filter `g` (row-major), with G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]: the 16 values
/// of the 4x4 transformed filter, row-major (position xi = 4 * row + column).
inline void winograd_f23_filter(const float* g, float u[16]) noexcept {
  float gg[4][3];  // G g
  for (int j = 0; j < 3; ++j) {
    gg[0][j] = g[j];
    gg[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
    gg[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
    gg[3][j] = g[6 + j];
  }
  for (int i = 0; i < 4; ++i) {
    const float a = gg[i][0], b = gg[i][1], c = gg[i][2];
    u[i * 4 + 0] = a;
    u[i * 4 + 1] = 0.5f * (a + b + c);
    u[i * 4 + 2] = 0.5f * (a - b + c);
    u[i * 4 + 3] = c;
  }
}

}  // namespace epstack::detail
