#pragma once
/// @file onnx_io.hpp
/// @brief ONNX models in and out: from a path or a memory buffer into the IR (checked by the onnx checker and shape
/// inference), external data memory-mapped, and saved with initializers embedded or external. Compiled once in the
/// `epstack::onnx` library; this header does not include protobuf or onnx.

#include <epstack/core/errors.hpp>
#include <epstack/core/ivalue.hpp>
#include <epstack/ir/model.hpp>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <vector>
#include <span>
#include <string>

namespace epstack {

/// How strictly shape inference runs at load.
enum class shape_inference_mode : std::uint8_t {
  off,         ///< not at all
  permissive,  ///< node-level inference failures are ignored (onnx error_mode 0)
  strict,      ///< any node's inference failure fails the load (onnx error_mode 1). Output type-constraint checks
               ///< stay off, as in ONNX Runtime: old exporters wrote e.g. int64 Constants that opset 1-8 did not allow.
};

/// Options of `load_model`.
struct load_options {
  /// Where the external data of a model loaded from a buffer lives (ONNX Runtime's
  /// `session.model_external_initializers_file_folder_path`). A model loaded from a path uses its own folder.
  std::filesystem::path external_data_folder;
  bool run_checker = true;  ///< run `onnx::checker::check_model`
  shape_inference_mode shape_inference = shape_inference_mode::strict;
  /// onnx's data propagation during shape inference: shape computations (Shape -> Gather -> Unsqueeze -> Slice ...)
  /// are followed, so more intermediate shapes are known (the graph optimiser needs them to fuse).
  bool data_propagation = true;
  /// For a model loaded from a path: initializers of 64 KiB or more embedded in the file are mapped from it in place
  /// rather than copied out of the protobuf message (faster loads; their memory is the file's page cache).
  bool zero_copy = true;
};

/// @brief Loads an ONNX model file. Errors: no_such_file, invalid_protobuf, invalid_graph (checker, shape inference,
/// validation, external data), each message naming the file and, where it applies, the node, value or attribute.
[[nodiscard]] Result<model> load_model(const std::filesystem::path& path, const load_options& options = {});

/// @brief Loads a model from serialized bytes. External data are found in `options.external_data_folder`
/// (invalid_argument when the model has external data and no folder is given).
[[nodiscard]] Result<model> load_model(std::span<const std::byte> bytes, const load_options& options = {});

/// @brief Runs onnx shape inference (strict, with epstack's guards) on a model built in memory and records the
/// inferred types of its values (main graph and subgraphs). Large initializers are not copied for it.
/// invalid_graph when inference fails.
[[nodiscard]] Status infer_shapes(model& m);

/// @brief Sets every node's `since_version` (main graph and subgraphs) from the model's opset imports and the onnx
/// package's schemas; 0 for operators of domains the onnx package does not define. `load_model` and `infer_shapes` call
/// it; call it again after adding nodes.
void resolve_since_versions(model& m);

/// @brief One node of an expanded function body, with its input and output value names ("" for an omitted one).
struct body_node {
  node n;
  std::vector<std::string> inputs, outputs;
};

/// @brief The body of node `n` of `g` when its operator is defined by a function: a model-local function of `m`, or
/// an operator the onnx package defines by a FunctionProto (or builds one for the node's context, e.g. from its input
/// types). The body's values are renamed uniquely after the node, its formal inputs and outputs are the node's, and
/// attribute references are resolved (schema defaults included). nullopt when the operator has no function body.
[[nodiscard]] Result<std::optional<std::vector<body_node>>> expand_function(const model& m, const graph& g, node_id n);

/// Where `save_model` puts initializer data.
enum class external_data_mode : std::uint8_t {
  embedded,         ///< all in the model file
  all_external,     ///< all (except strings) in one external file
  above_threshold,  ///< those of at least `threshold_bytes` bytes in one external file
};

/// Options of `save_model`.
struct save_options {
  external_data_mode mode = external_data_mode::embedded;
  /// The external data file name, relative to the model's folder; default "<model stem>.onnx.data".
  std::string external_file_name;
  std::size_t threshold_bytes = 1024;
  /// Offsets of external tensors are multiples of this (so mapped weights are aligned).
  std::size_t alignment = 64;
};

/// @brief Writes `m` to `path` (and its external data beside it): each file written under a temporary name and renamed,
/// so a failure never leaves a partial file.
[[nodiscard]] Status save_model(const model& m, const std::filesystem::path& path, const save_options& options = {});

/// @brief Reads a serialized ONNX TensorProto file (as the ONNX backend test suite's `input_0.pb`). no_such_file,
/// invalid_protobuf or invalid_graph with a message naming the file.
[[nodiscard]] Result<tensor> load_tensor(const std::filesystem::path& path);
/// @brief Parses a serialized TensorProto.
[[nodiscard]] Result<tensor> parse_tensor(std::span<const std::byte> bytes, const std::string& label = "tensor");
/// @brief Parses a serialized value of type `type`: a TensorProto for a tensor, a SequenceProto for a sequence of
/// tensors, an OptionalProto for an optional (none when it holds nothing); an undefined type reads a TensorProto.
/// invalid_protobuf or invalid_graph naming `label`; not_implemented for maps and sparse tensors.
[[nodiscard]] Result<ivalue> parse_value(std::span<const std::byte> bytes, const type_info& type,
                                         const std::string& label = "value");
/// @brief `parse_value` of a file (the backend test suite's `input_K.pb` / `output_K.pb`).
[[nodiscard]] Result<ivalue> load_value(const std::filesystem::path& path, const type_info& type);
/// @brief Writes `t` as a serialized TensorProto (raw data; strings in string_data), atomically.
[[nodiscard]] Status save_tensor(const tensor& t, const std::filesystem::path& path);
/// @brief Serializes `v` as a value of type `type`, what `parse_value` reads back: a TensorProto for a tensor (and for
/// an undefined type), a SequenceProto for a sequence, an OptionalProto for an optional (empty for none). The value
/// must match the type's kind (invalid_argument naming `label` otherwise); not_implemented for maps and sparse tensors.
[[nodiscard]] Result<std::string> serialize_value(const ivalue& v, const type_info& type, const std::string& label = "value");
/// @brief `serialize_value` to a file, atomically (the backend test suite's `output_K.pb` layout).
[[nodiscard]] Status save_value(const ivalue& v, const type_info& type, const std::filesystem::path& path);

/// @brief Serializes `m` with every initializer embedded. invalid_argument when it would exceed protobuf's 2 GB.
[[nodiscard]] Result<std::string> serialize_model(const model& m);

}  // namespace epstack
