#pragma once
// A schema registry for onnx shape inference that checks, on the real inference context, the preconditions that
// onnx 1.12's own inference functions assume without checking (see inference_guards.cpp), and that gives the
// operator versions onnx 1.12 does not know the inference of schema/modern_inference.cpp.
#include <onnx/defs/schema.h>

#include <cstddef>
#include <string>

namespace epstack::detail {

/// Throws onnx::InferenceError when a constant input of the node (an initializer, a Constant node's value, in a
/// subgraph too) is not what its header says (raw_data of another size than its dims and type need, check_tensor_header):
/// onnx 1.12's ParseData copies raw_data into a vector of raw_data / sizeof(T) elements, so 3 bytes of int64 data
/// were copied to a null pointer. Called before any inference function reads input data.
void check_input_data(onnx::InferenceContext& ctx, std::size_t input);

class guarded_schema_registry final : public onnx::ISchemaRegistry {
 public:
  const onnx::OpSchema* GetSchema(const std::string& key, int max_inclusive_version,
                                  const std::string& domain) const override;

 private:
  /// The onnx 1.12 schema, wrapped with its guard when it has one (made once per process and schema).
  static const onnx::OpSchema* older(const std::string& key, int max_inclusive_version, const std::string& domain);
};

}  // namespace epstack::detail
