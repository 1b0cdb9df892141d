#pragma once
// Random, valid ONNX graphs built from what the oneDNN provider takes (and what sits around it in real models), for
// the differential fuzzer (`epstack fuzz-providers`) and the determinism tests. A graph is a function of its seed.
#include <epstack/ir/model.hpp>
#include <epstack/runtime/session.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace epstack::fuzz {

/// @brief A generated model, the inputs to run it with, and one line saying what it holds.
struct generated {
  model m;
  std::vector<named_tensor> feeds;
  std::string summary;  ///< "opset 13, symbolic, 9 nodes: Conv Relu Mul Div ..."
};

/// @brief The graph of `seed`: opset 9, 11, 13 or 17, static or symbolic input dimensions, batch 1 to 3, 2 to 14
/// operations chosen among convolutions, transposed convolutions, products, pooling, upsampling, Einsum,
/// normalisations, softmax, activations, scalar and tensor arithmetic chains, reshapes, transposes, concats, splits,
/// slices and shape computations, in the forms the opset gives them.
[[nodiscard]] generated generate_graph(std::uint64_t seed);

/// @brief "" when `got` matches `want` within tolerances scaled to `want`'s values (|got - want| <= rtol * |want| +
/// atol * max |want|, NaN only where NaN is expected, infinities exactly), else what differs.
[[nodiscard]] std::string compare_outputs(const std::vector<tensor>& got, const std::vector<tensor>& want,
                                          double rtol = 1e-3, double atol = 1e-4);

/// @brief "" when `a` and `b` are the same bit for bit, else where they first differ.
[[nodiscard]] std::string compare_bits(const std::vector<tensor>& a, const std::vector<tensor>& b);

}  // namespace epstack::fuzz
