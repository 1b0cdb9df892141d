#pragma once
/// @file model.hpp
/// @brief A model: the main graph plus what an ONNX `ModelProto` says around it (IR version, opsets, metadata,
/// functions), kept so that load -> save -> load loses nothing.

#include <epstack/ir/graph.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace epstack {

/// The ONNX IR version epstack writes by default for a model it builds (ONNX 1.12 reads up to 8); a loaded model keeps
/// its own.
inline constexpr std::int64_t default_ir_version = 8;
/// The newest ONNX IR version epstack reads and writes (ONNX 1.22).
inline constexpr std::int64_t max_ir_version = 13;

/// One opset import: a domain ("" is the default ONNX domain) and its version.
struct opset_import {
  std::string domain;
  std::int64_t version = 0;
  friend bool operator==(const opset_import&, const opset_import&) = default;
};

/// @brief A model-local function (ONNX `FunctionProto`), kept serialized (every field, those of IR 10+ included);
/// the onnx package expands its body. Its identity is (domain, name, overload).
struct function_def {
  std::string domain;
  std::string name;
  std::string proto;     ///< the serialized FunctionProto
  std::string overload;  ///< IR 10: functions of one (domain, name) told apart; a node picks one by its `overload`
};

/// @brief An ONNX model.
struct model {
  std::int64_t ir_version = default_ir_version;
  std::vector<opset_import> opsets;
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  std::int64_t model_version = 0;
  std::string doc_string;
  std::vector<std::pair<std::string, std::string>> metadata;  ///< metadata_props, in order
  epstack::graph graph;
  std::vector<function_def> functions;
  std::vector<std::string> training_info;  ///< serialized TrainingInfoProto, kept for round trips
  /// Fields of a newer IR kept as wire bytes (the multi-device `configuration` of IR 11): written back as read.
  std::string ir_extra;
  std::filesystem::path path;              ///< the file it was loaded from (empty for a buffer)

  /// The version imported for `domain` ("" and "ai.onnx" are the same), or -1.
  [[nodiscard]] std::int64_t opset(std::string_view d) const {
    for (const auto& o : opsets)
      if (o.domain == d || ((d.empty() || d == "ai.onnx") && (o.domain.empty() || o.domain == "ai.onnx")))
        return o.version;
    return -1;
  }
};

}  // namespace epstack
