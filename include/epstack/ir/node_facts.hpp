#pragma once
/// @file node_facts.hpp
/// @brief Small helpers providers use to read a node: typed attribute access with defaults, and facts about its
/// inputs and outputs (element type, constant value, known rank).

#include <epstack/ir/attribute.hpp>
#include <epstack/ir/graph.hpp>
#include <epstack/core/tensor.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace epstack {

// ---- attributes: the value of the named attribute when it has that kind, else `def` ----
inline const attribute* attr(const node& nd, std::string_view name) { return nd.attributes.find(name); }
inline std::int64_t attr_i(const node& nd, std::string_view name, std::int64_t def) {
  const auto* a = attr(nd, name);
  if (a == nullptr) return def;
  if (const auto* v = std::get_if<std::int64_t>(&a->value)) return *v;
  return def;
}
inline float attr_f(const node& nd, std::string_view name, float def) {
  const auto* a = attr(nd, name);
  if (a == nullptr) return def;
  if (const auto* v = std::get_if<float>(&a->value)) return *v;
  return def;
}
inline std::string attr_s(const node& nd, std::string_view name, std::string def = {}) {
  const auto* a = attr(nd, name);
  if (a == nullptr) return def;
  if (const auto* v = std::get_if<std::string>(&a->value)) return *v;
  return def;
}
inline std::vector<std::int64_t> attr_ints(const node& nd, std::string_view name, std::vector<std::int64_t> def = {}) {
  const auto* a = attr(nd, name);
  if (a == nullptr) return def;
  if (const auto* v = std::get_if<std::vector<std::int64_t>>(&a->value)) return *v;
  return def;
}
inline std::vector<float> attr_floats(const node& nd, std::string_view name, std::vector<float> def = {}) {
  const auto* a = attr(nd, name);
  if (a == nullptr) return def;
  if (const auto* v = std::get_if<std::vector<float>>(&a->value)) return *v;
  return def;
}
inline const tensor* attr_t(const node& nd, std::string_view name) {
  const auto* a = attr(nd, name);
  return a == nullptr ? nullptr : std::get_if<tensor>(&a->value);
}
inline bool has_attr(const node& nd, std::string_view name) { return attr(nd, name) != nullptr; }

// ---- graph facts ----
inline element_type in_type(const graph& g, node_id n, std::size_t i) {
  const auto& nd = g.node(n);
  if (i >= nd.inputs.size() || nd.inputs[i] == no_id) return element_type::undefined;
  const auto& t = g.value(nd.inputs[i]).type;
  return t.kind == type_kind::tensor ? t.elem : element_type::undefined;
}
inline element_type out_type(const graph& g, node_id n, std::size_t i) {
  const auto& nd = g.node(n);
  if (i >= nd.outputs.size() || nd.outputs[i] == no_id) return element_type::undefined;
  const auto& t = g.value(nd.outputs[i]).type;
  return t.kind == type_kind::tensor ? t.elem : element_type::undefined;
}
inline bool has_in(const graph& g, node_id n, std::size_t i) {
  return i < g.node(n).inputs.size() && g.node(n).inputs[i] != no_id;
}
/// The constant value of input i (an initializer that is not also a graph input), or null.
inline const tensor* constant_input(const graph& g, node_id n, std::size_t i) {
  if (!has_in(g, n, i)) return nullptr;
  const auto& v = g.value(g.node(n).inputs[i]);
  return v.initializer && !v.is_graph_input ? &*v.initializer : nullptr;
}
/// The rank of input i when shape inference knows it, else -1.
inline int in_rank(const graph& g, node_id n, std::size_t i) {
  if (!has_in(g, n, i)) return -1;
  const auto& t = g.value(g.node(n).inputs[i]).type;
  return t.kind == type_kind::tensor && t.dims ? static_cast<int>(t.dims->rank()) : -1;
}
}  // namespace epstack
