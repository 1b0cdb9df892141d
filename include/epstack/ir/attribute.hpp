#pragma once
/// @file attribute.hpp
/// @brief Node attributes: every ONNX `AttributeProto` kind as a variant, and the ordered attribute list of a node.

#include <epstack/detail/clone_ptr.hpp>
#include <epstack/core/tensor.hpp>
#include <epstack/core/type_info.hpp>

#include <boost/container/small_vector.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace epstack {

class graph;
/// A subgraph held by an attribute (If/Loop/Scan bodies). Copies are deep.
using subgraph = detail::clone_ptr<graph>;

/// The kinds of `AttributeProto.AttributeType`, with ONNX's values.
enum class attribute_kind : std::int32_t {
  undefined = 0,
  float_ = 1,
  int_ = 2,
  string = 3,
  tensor = 4,
  graph = 5,
  floats = 6,
  ints = 7,
  strings = 8,
  tensors = 9,
  graphs = 10,
  sparse_tensor = 11,
  sparse_tensors = 12,
  type_proto = 13,
  type_protos = 14,
};

/// @brief ONNX's name of the kind: "FLOAT", "INTS", ...
[[nodiscard]] constexpr std::string_view to_string(attribute_kind k) noexcept {
  switch (k) {
    case attribute_kind::undefined: return "UNDEFINED";
    case attribute_kind::float_: return "FLOAT";
    case attribute_kind::int_: return "INT";
    case attribute_kind::string: return "STRING";
    case attribute_kind::tensor: return "TENSOR";
    case attribute_kind::graph: return "GRAPH";
    case attribute_kind::floats: return "FLOATS";
    case attribute_kind::ints: return "INTS";
    case attribute_kind::strings: return "STRINGS";
    case attribute_kind::tensors: return "TENSORS";
    case attribute_kind::graphs: return "GRAPHS";
    case attribute_kind::sparse_tensor: return "SPARSE_TENSOR";
    case attribute_kind::sparse_tensors: return "SPARSE_TENSORS";
    case attribute_kind::type_proto: return "TYPE_PROTO";
    case attribute_kind::type_protos: return "TYPE_PROTOS";
  }
  return "INVALID";
}

/// @brief One attribute: a name and a value of one kind. Strings hold bytes (ONNX STRING is `bytes`).
struct attribute {
  /// The value; the kind follows from the alternative (see `kind()`).
  using value_type =
      std::variant<std::monostate, float, std::int64_t, std::string, tensor, subgraph, sparse_tensor, type_info,
                   std::vector<float>, std::vector<std::int64_t>, std::vector<std::string>, std::vector<tensor>,
                   std::vector<subgraph>, std::vector<sparse_tensor>, std::vector<type_info>>;

  std::string name;
  value_type value;
  std::string doc_string;
  std::string ref_attr_name;  ///< inside function bodies: the attribute refers to the caller's attribute of this name

  [[nodiscard]] attribute_kind kind() const noexcept {
    constexpr attribute_kind kinds[] = {
        attribute_kind::undefined,     attribute_kind::float_,         attribute_kind::int_,
        attribute_kind::string,        attribute_kind::tensor,         attribute_kind::graph,
        attribute_kind::sparse_tensor, attribute_kind::type_proto,     attribute_kind::floats,
        attribute_kind::ints,          attribute_kind::strings,        attribute_kind::tensors,
        attribute_kind::graphs,        attribute_kind::sparse_tensors, attribute_kind::type_protos};
    return kinds[value.index()];
  }
};

/// @brief A node's attributes in their original order, looked up by name (nodes have few).
class attribute_list {
 public:
  using container = boost::container::small_vector<attribute, 4>;

  [[nodiscard]] const attribute* find(std::string_view name) const noexcept {
    for (const auto& a : items_)
      if (a.name == name) return &a;
    return nullptr;
  }
  [[nodiscard]] attribute* find(std::string_view name) noexcept {
    for (auto& a : items_)
      if (a.name == name) return &a;
    return nullptr;
  }
  [[nodiscard]] bool contains(std::string_view name) const noexcept { return find(name) != nullptr; }
  /// Replaces the attribute of the same name, or appends.
  attribute& set(attribute a) {
    if (auto* p = find(a.name)) return *p = std::move(a);
    return items_.emplace_back(std::move(a));
  }
  template <class V>
  attribute& set(std::string name, V&& v) {
    attribute a;
    a.name = std::move(name);
    a.value = std::forward<V>(v);
    return set(std::move(a));
  }
  /// Appends without looking for a duplicate (loaders keep what the file says; validation reports duplicates).
  attribute& append(attribute a) { return items_.emplace_back(std::move(a)); }
  bool erase(std::string_view name) {
    for (auto it = items_.begin(); it != items_.end(); ++it)
      if (it->name == name) {
        items_.erase(it);
        return true;
      }
    return false;
  }
  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
  [[nodiscard]] bool empty() const noexcept { return items_.empty(); }
  [[nodiscard]] auto begin() const noexcept { return items_.begin(); }
  [[nodiscard]] auto end() const noexcept { return items_.end(); }
  [[nodiscard]] auto begin() noexcept { return items_.begin(); }
  [[nodiscard]] auto end() noexcept { return items_.end(); }

  /// Calls `f(g)` for every subgraph the list holds (GRAPH attributes, then each of a GRAPHS attribute, in order),
  /// `g` a `graph&` (`const graph&` for a const list); stops at, and returns, the first result `f` gives that is not ok
  /// (`f` returns a Status or anything with `is_ok()`).
  template <class F>
  auto for_each_subgraph(F&& f) const {
    auto as_const = [&f](auto& g) { return f(std::as_const(g)); };  // (clone_ptr hands out mutable graphs)
    return visit_subgraphs(items_, as_const);
  }
  template <class F>
  auto for_each_subgraph(F&& f) {
    return visit_subgraphs(items_, f);
  }

 private:
  template <class Items, class F>
  static auto visit_subgraphs(Items& items, F& f) -> decltype(f(**std::get_if<subgraph>(&items.begin()->value))) {
    for (auto& a : items) {
      if (auto* one = std::get_if<subgraph>(&a.value); one && *one) {
        if (auto r = f(**one); !r.is_ok()) return r;
      } else if (auto* many = std::get_if<std::vector<subgraph>>(&a.value)) {
        for (auto& sg : *many)
          if (sg)
            if (auto r = f(*sg); !r.is_ok()) return r;
      }
    }
    return {};
  }
  container items_;
};

}  // namespace epstack
