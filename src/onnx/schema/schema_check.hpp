#pragma once
// The checks of onnx's checker that concern opsets and operators, made from epstack's schema table, for the models
// the onnx 1.12 library's checker does not know (IR versions above 8, opsets beyond onnx 1.12). Private to
// epstack::onnx.
#include <onnx/onnx_pb.h>

#include <epstack/core/errors.hpp>

namespace epstack::detail {

/// The model's opsets of the ONNX domains are ones this build knows; invalid_graph naming a node of the domain if not.
Status check_opsets(const onnx::ModelProto& mp);

/// True when the onnx 1.12 library's checker knows everything the model's header declares (IR version 8 or older and
/// standard opsets within its range); other models are checked by check_against_schemas.
bool within_onnx112(const onnx::ModelProto& mp);

/// The IR version, and every node of a standard domain (subgraphs included) against the schema of its opset: the
/// operator exists, input and output counts, required inputs, attribute names, types and required ones.
Status check_against_schemas(const onnx::ModelProto& mp);

/// Every type in the graphs' inputs, outputs and value_info (subgraphs included) is well formed: a type that is present
/// names its kind (tensor, sequence, map, optional, sparse tensor, opaque), and what it nests is present too. onnx's
/// shape inference dereferences these types unchecked, so this runs before inference on every model, whatever the
/// checker options (a missing type is left to inference, as ONNX Runtime accepts outputs without one). invalid_graph
/// naming the value otherwise.
Status check_value_types(const onnx::ModelProto& mp);

}  // namespace epstack::detail
