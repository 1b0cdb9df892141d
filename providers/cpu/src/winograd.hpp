#pragma once
// Winograd convolution F(2x2, 3x3) for 3x3 convolutions with unit stride and dilation and one group (ResNet's 3x3
// layers): 2.25 times fewer multiplications than the direct method. Each 2x2 output tile is A^T [U . V] A where
// U = G g G^T is the transformed 3x3 filter (4x4, computed once per weight at compile time) and V = B^T d B the
// transformed 4x4 input patch; the 16 element-wise products summed over input channels are 16 matrix products
// [M x C] x [C x tiles], run by the packed SGEMM. Input and output transforms handle 16 tiles per AVX-512 register.
// Only built with AVX-512 (elsewhere `winograd_available` is false and convolutions take the im2col path).
#include "sgemm.hpp"

#include <epstack/provider/compute.hpp>

#include <cstdint>
#include <memory>

namespace epstack::cpu::impl {

/// True when this build has the Winograd path.
bool winograd_available() noexcept;

/// Transformed and packed weights: 16 packed A matrices (sgemm layout) of M x C, `stride` floats apart.
struct winograd_weights {
  std::shared_ptr<const float> data;
  std::size_t stride = 0;
  std::int64_t M = 0, C = 0;
};

/// @brief Transforms and packs weights [M, C, 3, 3].
winograd_weights winograd_pack(const float* w, std::int64_t M, std::int64_t C);

/// Shape of one convolution: one image of C x H x W in, M x OH x OW out, padding top and left (bottom/right follow).
struct winograd_shape {
  std::int64_t C = 0, M = 0, H = 0, W = 0, OH = 0, OW = 0, pad_top = 0, pad_left = 0;
  [[nodiscard]] std::int64_t tiles_h() const { return (OH + 1) / 2; }
  [[nodiscard]] std::int64_t tiles_w() const { return (OW + 1) / 2; }
  [[nodiscard]] std::int64_t tiles() const { return tiles_h() * tiles_w(); }
};

/// Scratch floats `winograd_conv` needs for a shape (plus alignment slack).
std::size_t winograd_scratch_floats(const winograd_shape& s);

/// @brief y (M x OH x OW) = conv(x (C x H x W), weights), then the epilogue's bias, residual (laid out like y, ldz
/// ignored) and ReLU/clip, on the intra-op threads. `scratch` holds winograd_scratch_floats(s) floats.
void winograd_conv(const compute_context& ctx, const winograd_shape& s, const winograd_weights& wts, const float* x,
                   float* y, const sgemm_epilogue& ep, float* scratch);

}  // namespace epstack::cpu::impl
