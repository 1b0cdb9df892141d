#pragma once
/// @file version_convert.hpp
/// @brief Moves a model to a newer ai.onnx opset (and IR version), rewriting the nodes whose operator changed its
/// signature on the way, from the schema table (epstack/onnx/op_schema.hpp).
///
/// Attributes that became inputs (Squeeze/Unsqueeze/ReduceSum/Split at 13, the other reductions at 18) become int64
/// initializers; a node whose operator keeps its inputs and attributes across the versions (the type lists may
/// grow) is left as it is; any other change, and an operator the target opset no longer has, is refused with a
/// message naming the node. Downgrades are refused.

#include <epstack/core/errors.hpp>
#include <epstack/ir/model.hpp>

#include <cstdint>

namespace epstack {

/// The IR version an ai.onnx opset needs (the IR version of the ONNX release that introduced it): 8 up to opset 18,
/// 9 for 19-20, 10 for 21-22, 11 for 23, 12 for 24, 13 for 25-27.
[[nodiscard]] std::int64_t ir_version_for_opset(std::int64_t opset) noexcept;

/// Converts `m` (every graph, subgraphs included) to ai.onnx opset `opset`; `ir_version` 0 sets the IR version to at
/// least `ir_version_for_opset(opset)`, else to `ir_version` (which must be at least that and at most 13).
[[nodiscard]] Status convert_opset(model& m, std::int64_t opset, std::int64_t ir_version = 0);

}  // namespace epstack
