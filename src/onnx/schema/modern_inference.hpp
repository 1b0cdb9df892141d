#pragma once
// Type and shape inference for the operator versions the onnx 1.12 library does not know (ai.onnx 18-27,
// ai.onnx.ml 4-5), handed to onnx's shape inference engine as onnx::OpSchema objects, so that one engine infers
// every model: versions onnx 1.12 knows keep its inference functions; the others get, in this order, a function of
// this file, the inference function of the onnx 1.12 version they equal but for their type lists (decided from the
// schema table, not by hand), or the element types their type constraints imply. Private to epstack::onnx.
#include <onnx/defs/schema.h>

#include <epstack/onnx/op_schema.hpp>

#include <functional>

namespace epstack::detail {

/// True for the versions onnx 1.12 does not know (ai.onnx above 17, ai.onnx.ml above 3).
[[nodiscard]] bool beyond_onnx112(const schema::op_schema& s) noexcept;

/// True for the onnx 1.12 versions whose inference ONNX 1.22 corrected (DFT-17: the one-sided inverse; STFT-17: the one-sided bins with a constant frame_length), which get
/// this file's function too.
[[nodiscard]] bool replaced_onnx112(const schema::op_schema& s) noexcept;

/// Resolves (op, opset version, domain) to an onnx 1.12 schema, guarded (see inference_guards.hpp).
using older_schema_fn = std::function<const onnx::OpSchema*(const std::string&, int, const std::string&)>;

/// The onnx::OpSchema that carries the inference of `s` (a version beyond onnx 1.12); made once, kept for the
/// process's life.
[[nodiscard]] const onnx::OpSchema* modern_schema(const schema::op_schema& s, const older_schema_fn& older);

/// The onnx 1.12 version that `s` equals but for its type lists (same inputs, outputs, attributes and defaults), or
/// null.
[[nodiscard]] const schema::op_schema* onnx112_equivalent(const schema::op_schema& s) noexcept;

}  // namespace epstack::detail
