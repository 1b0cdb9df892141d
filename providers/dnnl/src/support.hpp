#pragma once
// What the oneDNN provider takes: per-node rules (shared by get_capability, why_not and compile) and the Erf-form
// Gelu pattern. Private to epstack::dnnl.

#include <epstack/ir/graph.hpp>

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace epstack::dnnl_ep {

/// True for the ONNX domain ("" or "ai.onnx").
[[nodiscard]] bool onnx_domain(std::string_view d);
/// True for ONNX Runtime's contrib domain, which the graph optimiser writes fused operators into.
[[nodiscard]] bool contrib_domain(std::string_view d);

/// Why node `n` cannot run on oneDNN on its own merits (type, attributes, constant inputs), or empty when it can.
[[nodiscard]] std::string node_refusal(const graph& g, node_id n);

/// Shape, Gather, Unsqueeze, Squeeze, Concat and Slice: with int64 values, evaluated when a plan is made.
[[nodiscard]] bool is_host_shape_op(const node& nd);
/// True when int64 value `v` is a constant or computed from constants and Shape outputs by shape operators.
[[nodiscard]] bool host_evaluable(const graph& g, value_id v, int depth = 0);

/// A nearest-neighbour Resize (or Upsample) that oneDNN's resampling computes exactly: the whole-number factor of each
/// spatial axis (batch and channels kept), or why not. With a whole factor F, output index o reads input o / F
/// (rounded down) in oneDNN; ONNX agrees for coordinate modes asymmetric (nearest_mode floor; round_prefer_floor
/// when F <= 2, where no fraction exceeds one half), half_pixel and pytorch_half_pixel (either round_prefer mode:
/// the coordinate is within half an element of o / F, never at a tie), tf_half_pixel_for_nn (floor), and Upsample
/// and Resize-10 (floor).
struct resample_factors {
  std::vector<std::int64_t> factors;
  std::string refusal;
};
[[nodiscard]] resample_factors nearest_factors(const graph& g, node_id n);

/// True for operators worth a oneDNN partition (convolutions, matrix products, pooling, normalisations, softmax):
/// a group of only element-wise and layout operators stays on the CPU provider, where it costs no reorders.
[[nodiscard]] bool is_heavy(const node& nd);

/// The nodes of Gelu in its Erf form around Erf node `erf`: x / sqrt(2) (or x * 1/sqrt(2)) -> Erf -> + 1 -> * x
/// -> * 0.5 (the two multiplications in either order, operands either way round). `x` is the Gelu input; `nodes` in
/// order: scale, Erf, Add, first Mul, second Mul; the second Mul's output is the Gelu output. Every intermediate value
/// is used only inside the pattern.
struct gelu_match {
  value_id x = no_id;
  std::array<node_id, 5> nodes{};
};
[[nodiscard]] std::optional<gelu_match> match_gelu(const graph& g, node_id erf);

}  // namespace epstack::dnnl_ep
