#pragma once
// A schema registry for onnx shape inference that checks, on the real inference context, the preconditions that
// onnx 1.12's own inference functions assume without checking (see inference_guards.cpp), and that gives the
// operator versions onnx 1.12 does not know the inference of schema/modern_inference.cpp.
#include <onnx/defs/schema.h>

#include <string>

namespace epstack::detail {

class guarded_schema_registry final : public onnx::ISchemaRegistry {
 public:
  const onnx::OpSchema* GetSchema(const std::string& key, int max_inclusive_version,
                                  const std::string& domain) const override;

 private:
  /// The onnx 1.12 schema, wrapped with its guard when it has one (made once per process and schema).
  static const onnx::OpSchema* older(const std::string& key, int max_inclusive_version, const std::string& domain);
};

}  // namespace epstack::detail
