#pragma once
/// @file type_info.hpp
/// @brief The type of a value (ONNX `TypeProto`): a tensor, sparse tensor, sequence, map, optional or opaque type.

#include <epstack/core/element_type.hpp>
#include <epstack/core/shape.hpp>

#include <optional>
#include <string>
#include <vector>

namespace epstack {

/// The kinds of `TypeProto.value`.
enum class type_kind : std::uint8_t { undefined, tensor, sparse_tensor, sequence, map, optional, opaque };

/// @brief A value's type. Tensors have an element type and (when known) a shape; sequences and optionals hold one inner
/// type; maps hold a key element type and one inner (value) type.
struct type_info {
  type_kind kind = type_kind::undefined;
  element_type elem = element_type::undefined;  ///< tensor and sparse tensor elements; map keys.
  std::optional<shape> dims;                    ///< tensor and sparse tensor shape; nullopt when the rank is unknown.
  std::vector<type_info> inner;                 ///< sequence/optional element type; map value type.
  std::string denotation;
  std::string opaque_domain, opaque_name;

  /// A tensor type; `dims` nullopt for an unknown rank.
  [[nodiscard]] static type_info tensor_of(element_type e, std::optional<shape> dims = std::nullopt) {
    type_info t;
    t.kind = type_kind::tensor;
    t.elem = e;
    t.dims = std::move(dims);
    return t;
  }
  [[nodiscard]] static type_info sequence_of(type_info element) {
    type_info t;
    t.kind = type_kind::sequence;
    t.inner.push_back(std::move(element));
    return t;
  }
  [[nodiscard]] static type_info optional_of(type_info element) {
    type_info t;
    t.kind = type_kind::optional;
    t.inner.push_back(std::move(element));
    return t;
  }
  [[nodiscard]] static type_info map_of(element_type key, type_info value) {
    type_info t;
    t.kind = type_kind::map;
    t.elem = key;
    t.inner.push_back(std::move(value));
    return t;
  }

  [[nodiscard]] bool is_tensor() const noexcept { return kind == type_kind::tensor; }
  [[nodiscard]] bool is_defined() const noexcept { return kind != type_kind::undefined; }

  /// "float[batch,3]", "seq(int64[?])", "map(string,float[])", "opt(float[2])"
  [[nodiscard]] std::string to_string() const {
    switch (kind) {
      case type_kind::undefined: return "?";
      case type_kind::tensor:
      case type_kind::sparse_tensor:
        return std::string(kind == type_kind::sparse_tensor ? "sparse " : "") + std::string(epstack::to_string(elem)) +
               (dims ? dims->to_string() : std::string("[...]"));
      case type_kind::sequence: return "seq(" + (inner.empty() ? std::string("?") : inner[0].to_string()) + ")";
      case type_kind::optional: return "opt(" + (inner.empty() ? std::string("?") : inner[0].to_string()) + ")";
      case type_kind::map:
        return "map(" + std::string(epstack::to_string(elem)) + "," +
               (inner.empty() ? std::string("?") : inner[0].to_string()) + ")";
      case type_kind::opaque: return "opaque(" + opaque_domain + "." + opaque_name + ")";
    }
    return "?";
  }
  friend bool operator==(const type_info&, const type_info&) = default;
};

}  // namespace epstack
