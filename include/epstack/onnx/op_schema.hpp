#pragma once
/// @file op_schema.hpp
/// @brief The operator schemas of ONNX 1.22 (ai.onnx opsets 1-27, ai.onnx.ml 1-5, ai.onnx.preview and
/// ai.onnx.preview.training 1): one table, generated from the ONNX operator changelogs, that a new opset extends.
///
/// Every version of every operator, as its changelog states it: the formal inputs and outputs, their counts,
/// the attributes (type, required, default) and the type constraints. `find_schema` resolves an operator of a
/// model (its domain, its type and the model's opset of that domain) to the version that applies; the loader's checks
/// and the type and shape inference of models beyond the onnx library's range are built on it.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace epstack::schema {

/// How many actual arguments a formal parameter takes.
enum class param_option : std::uint8_t { single, optional, variadic };

/// A formal input or output: its name, its type (a type parameter such as "T" or a type such as "tensor(int64)").
struct formal_parameter {
  std::string name;
  std::string type;
  param_option option = param_option::single;
  bool homogeneous = true;  ///< variadic only: every argument has the same type
};

/// Attribute types, as `AttributeProto.AttributeType`.
enum class attr_type : std::uint8_t {
  floating = 1, integer = 2, string = 3, tensor = 4, graph = 5, floats = 6, ints = 7, strings = 8, tensors = 9,
  graphs = 10, sparse_tensor = 11, sparse_tensors = 12, type_proto = 13, type_protos = 14
};
[[nodiscard]] std::string_view to_string(attr_type t) noexcept;

struct attribute_spec {
  std::string name;
  attr_type type = attr_type::integer;
  bool required = false;
  std::string default_text;  ///< the default as the changelog writes it ("0", "1e-05", "NOTSET"); empty if none
};

/// A type parameter and the types it may take ("tensor(float)", "seq(tensor(int64))", "map(string,tensor(int64))").
struct type_constraint {
  std::string name;
  std::vector<std::string> allowed;
  [[nodiscard]] bool allows(std::string_view type) const noexcept;
};

/// One version of one operator.
struct op_schema {
  std::string domain;  ///< "" for ai.onnx
  std::string name;
  int since_version = 1;
  bool deprecated = false;  ///< deprecated from `since_version` on (the operator no longer exists at that opset)
  int min_inputs = 0, max_inputs = 0;    ///< max -1: unbounded
  int min_outputs = 0, max_outputs = 0;  ///< max -1: unbounded
  std::vector<formal_parameter> inputs, outputs;
  std::vector<attribute_spec> attributes;
  std::vector<type_constraint> constraints;

  [[nodiscard]] const attribute_spec* attribute(std::string_view n) const noexcept;
  [[nodiscard]] const type_constraint* constraint(std::string_view n) const noexcept;
  /// The formal parameter of actual input (output) number `i` (the last one repeats when it is variadic), or null.
  [[nodiscard]] const formal_parameter* input(std::size_t i) const noexcept;
  [[nodiscard]] const formal_parameter* output(std::size_t i) const noexcept;
  /// "Reshape-25", "ai.onnx.ml.TreeEnsemble-5".
  [[nodiscard]] std::string label() const;
};

/// The opset versions of a domain that this build knows.
struct domain_versions {
  std::string_view domain;
  int min_version;
  int max_version;
};
/// ai.onnx ("" and "ai.onnx") 1-27, ai.onnx.ml 1-5, ai.onnx.training 1, ai.onnx.preview.training 1, ai.onnx.preview 1.
[[nodiscard]] std::span<const domain_versions> known_domains() noexcept;
/// The versions of `domain` ("ai.onnx" and "" are the same domain), or null for a domain this build does not define.
[[nodiscard]] const domain_versions* find_domain(std::string_view domain) noexcept;

/// The version of operator `op` of `domain` that opset `opset_version` of the domain uses: the schema with the largest
/// `since_version` not above it. Null when the operator does not exist at that opset, including when its last version
/// there is a deprecation.
[[nodiscard]] const op_schema* find_schema(std::string_view domain, std::string_view op, int opset_version) noexcept;
/// Every version of `op` in `domain`, oldest first (empty if the operator is unknown).
[[nodiscard]] std::span<const op_schema* const> versions_of(std::string_view domain, std::string_view op) noexcept;
/// Every schema of the table.
[[nodiscard]] std::span<const op_schema> all_schemas() noexcept;

}  // namespace epstack::schema
