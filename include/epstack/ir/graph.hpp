#pragma once
/// @file graph.hpp
/// @brief The graph IR: nodes, and flows (edges) that say which value goes from a producer to a consumer; values (graph
/// inputs, initializers, node outputs, graph outputs) are records looked up by name. The header does not include
/// Boost.Graph (kernels include it): Boost.Graph algorithms run on `make_flow_graph(g)` (flow_graph.hpp). Subgraphs (If/Loop/Scan bodies) live in graph attributes and may use values of the
/// enclosing graphs (outer-scope references).

#include <epstack/ir/attribute.hpp>
#include <epstack/detail/cat.hpp>
#include <epstack/core/errors.hpp>
#include <epstack/core/tensor.hpp>
#include <epstack/core/type_info.hpp>

#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace epstack {

using node_id = std::size_t;
using value_id = std::size_t;
/// "No node" / "no value": an omitted optional input or output, or a value without a producer.
inline constexpr std::size_t no_id = std::numeric_limits<std::size_t>::max();

/// @brief A node: an operator application. Inputs and outputs are value ids (no_id for an omitted optional one).
struct node {
  std::string name;
  std::string op_type;
  std::string domain;  ///< "" (or "ai.onnx") is the default ONNX domain
  std::string doc_string;
  boost::container::small_vector<value_id, 4> inputs;
  boost::container::small_vector<value_id, 2> outputs;
  attribute_list attributes;
  /// The version of the operator's schema that the model's opset import selects (ONNX Runtime's `SinceVersion`), so
  /// kernels know which semantics apply; 0 when unknown (a domain the onnx package does not define).
  int since_version = 0;
  /// Values of this graph or an enclosing one that the node's subgraphs use (ONNX Runtime's implicit inputs): the
  /// node depends on them as on its inputs. Filled by `resolve_implicit_inputs`.
  boost::container::small_vector<value_id, 2> implicit_inputs;
  /// `metadata_props` (IR 10), in order.
  std::vector<std::pair<std::string, std::string>> metadata;
  /// The overload of the model-local function the node calls (IR 10); empty for the one without an overload.
  std::string overload;
  /// The fields of a newer IR that epstack keeps without interpreting (a node's device configurations, IR 11), as
  /// protobuf wire bytes: written back as they were read.
  std::string ir_extra;
};

/// @brief A value: its name, type, where it comes from and who uses it.
struct value {
  std::string name;
  type_info type;
  std::string doc_string;
  node_id producer = no_id;             ///< the node that defines it, if any
  std::uint32_t producer_output = 0;    ///< which output of the producer
  boost::container::small_vector<node_id, 4> consumers;  ///< one entry per use
  std::optional<tensor> initializer;    ///< the constant data of an initializer
  bool is_graph_input = false;
  bool is_graph_output = false;
  bool is_sparse_initializer = false;  ///< defined by a sparse initializer (see basic_graph::sparse_initializers)
  bool in_value_info = false;           ///< listed in the model's value_info (kept for round trips)
};

/// Edge property of the Boost view (flow_graph.hpp): the value that flows along the edge.
struct flow_edge {
  value_id value = no_id;
};

/// An edge of the graph: value `value` goes from node `from` (its producer) to node `to` (a consumer).
struct flow {
  node_id from = no_id;
  node_id to = no_id;
  value_id value = no_id;
};

/// @brief A graph of `Node`s and `Value`s (nodes in a vector, their ids dense from 0; flows in insertion order).
/// Build it with add_input / add_initializer / add_node / add_output, in any order; `validate()` then checks single
/// assignment, that every use is defined (here or in an enclosing graph) and that there is no cycle.
template <class Node, class Value>
class basic_graph {
 public:
  using node_type = Node;
  using value_type = Value;

  basic_graph() = default;
  explicit basic_graph(std::string name) : name_(std::move(name)) {}

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  [[nodiscard]] const std::string& doc_string() const noexcept { return doc_string_; }
  void set_doc_string(std::string d) { doc_string_ = std::move(d); }
  /// The graph's `metadata_props` (IR 10), in order.
  [[nodiscard]] std::vector<std::pair<std::string, std::string>>& metadata() noexcept { return metadata_; }
  [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& metadata() const noexcept { return metadata_; }
  /// Fields of a newer IR kept as wire bytes (see `node::ir_extra`).
  [[nodiscard]] const std::string& ir_extra() const noexcept { return ir_extra_; }
  void set_ir_extra(std::string b) { ir_extra_ = std::move(b); }

  // ---- values ----
  [[nodiscard]] std::size_t value_count() const noexcept { return values_.size(); }
  [[nodiscard]] const Value& value(value_id v) const { return values_[v]; }
  [[nodiscard]] Value& value(value_id v) { return values_[v]; }
  [[nodiscard]] const std::vector<Value>& values() const noexcept { return values_; }
  /// The id of the value named `name`, or no_id.
  [[nodiscard]] value_id find_value(std::string_view name) const {
    auto it = index_.find(name);
    return it == index_.end() ? no_id : it->second;
  }
  /// The value named `name`, created (undefined) when absent.
  value_id get_or_add_value(std::string_view name) {
    if (auto v = find_value(name); v != no_id) return v;
    Value rec;
    rec.name = std::string(name);
    values_.push_back(std::move(rec));
    index_.emplace(std::string(name), values_.size() - 1);
    return values_.size() - 1;
  }

  /// @brief Declares a graph input.
  value_id add_input(std::string_view name, type_info type = {}) {
    const value_id v = get_or_add_value(name);
    auto& rec = values_[v];
    if (rec.is_graph_input) problem("graph input '" + rec.name + "' is declared twice");
    if (rec.producer != no_id) problem(redefined(rec, "a graph input"));
    rec.is_graph_input = true;
    if (type.is_defined()) rec.type = std::move(type);
    inputs_.push_back(v);
    return v;
  }
  /// @brief Adds an initializer (a constant). It may also be a graph input (its default value).
  value_id add_initializer(std::string_view name, tensor data) {
    const value_id v = get_or_add_value(name);
    auto& rec = values_[v];
    if (rec.initializer) problem("initializer '" + rec.name + "' is defined twice");
    if (rec.producer != no_id) problem(redefined(rec, "an initializer"));
    if (!rec.type.is_defined()) rec.type = type_info::tensor_of(data.type(), data.get_shape());
    data.set_name(rec.name);
    rec.initializer = std::move(data);
    initializers_.push_back(v);
    return v;
  }
  /// @brief Makes graph input `v` a constant: an initializer holding `data`, no longer an input (what a test
  /// harness does to give a provider the weights a model takes as inputs).
  void make_input_constant(value_id v, tensor data) {
    auto& rec = values_[v];
    if (!rec.is_graph_input) {
      problem("'" + rec.name + "' is not a graph input");
      return;
    }
    rec.is_graph_input = false;
    inputs_.erase(std::find(inputs_.begin(), inputs_.end(), v));
    data.set_name(rec.name);
    if (!rec.initializer) initializers_.push_back(v);
    rec.type = type_info::tensor_of(data.type(), data.get_shape());  // the constant's own shape, not the symbolic one
    rec.initializer = std::move(data);
  }
  /// @brief Declares a graph output.
  value_id add_output(std::string_view name, type_info type = {}) {
    const value_id v = get_or_add_value(name);
    auto& rec = values_[v];
    if (type.is_defined()) rec.type = std::move(type);
    rec.is_graph_output = true;
    outputs_.push_back(v);
    return v;
  }
  /// @brief Adds a node reading `inputs` and defining `outputs` (by name; "" is an omitted optional one).
  node_id add_node(Node n, std::span<const std::string> inputs, std::span<const std::string> outputs) {
    n.inputs.clear();
    n.outputs.clear();
    const node_id id = nodes_.size();
    nodes_.push_back(std::move(n));
    out_.emplace_back();
    for (const auto& in : inputs) {
      if (in.empty()) {
        nodes_[id].inputs.push_back(no_id);
        continue;
      }
      const value_id v = get_or_add_value(in);
      nodes_[id].inputs.push_back(v);
      values_[v].consumers.push_back(id);
      if (values_[v].producer != no_id) add_flow(values_[v].producer, id, v);
    }
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].empty()) {
        nodes_[id].outputs.push_back(no_id);
        continue;
      }
      const value_id v = get_or_add_value(outputs[i]);
      nodes_[id].outputs.push_back(v);
      auto& rec = values_[v];
      if (rec.producer != no_id || rec.is_graph_input || rec.initializer || rec.is_sparse_initializer) {
        problem(redefined(rec, detail::cat("node ", describe(id))));
        continue;
      }
      rec.producer = id;
      rec.producer_output = static_cast<std::uint32_t>(i);
      for (node_id c : rec.consumers) add_flow(id, c, v);
    }
    return id;
  }
  /// Convenience overload: `g.add_node({.name = "relu", .op_type = "Relu"}, {"x"}, {"y"})`.
  node_id add_node(Node n, std::initializer_list<std::string> inputs, std::initializer_list<std::string> outputs) {
    return add_node(std::move(n), std::span<const std::string>(inputs.begin(), inputs.size()),
                    std::span<const std::string>(outputs.begin(), outputs.size()));
  }

  /// @brief Records that node `n`'s subgraphs use the value `name` (defined here or in an enclosing graph): a use like
  /// an input, with the flow edge from its producer. Idempotent.
  value_id add_implicit_input(node_id n, std::string_view name) {
    const value_id v = get_or_add_value(name);
    auto& imp = nodes_[n].implicit_inputs;
    if (std::find(imp.begin(), imp.end(), v) != imp.end()) return v;
    imp.push_back(v);
    values_[v].consumers.push_back(n);
    if (values_[v].producer != no_id) add_flow(values_[v].producer, n, v);
    return v;
  }

  [[nodiscard]] const std::vector<value_id>& inputs() const noexcept { return inputs_; }
  [[nodiscard]] const std::vector<value_id>& outputs() const noexcept { return outputs_; }
  [[nodiscard]] const std::vector<value_id>& initializers() const noexcept { return initializers_; }
  /// @brief Adds a sparse initializer; the value it defines is named after its `values` tensor.
  value_id add_sparse_initializer(sparse_tensor s) {
    const value_id v = get_or_add_value(s.values.name());
    auto& rec = values_[v];
    if (rec.initializer || rec.is_sparse_initializer) problem(detail::cat("initializer '", rec.name, "' is defined twice"));
    if (rec.producer != no_id) problem(redefined(rec, "a sparse initializer"));
    rec.is_sparse_initializer = true;
    if (!rec.type.is_defined()) {
      rec.type.kind = type_kind::sparse_tensor;
      rec.type.elem = s.values.type();
      rec.type.dims = shape::of(s.dims);
    }
    sparse_initializers_.push_back(std::move(s));
    return v;
  }
  /// Sparse initializers (ONNX `GraphProto.sparse_initializer`), in order.
  [[nodiscard]] const std::vector<sparse_tensor>& sparse_initializers() const noexcept { return sparse_initializers_; }
  /// Serialized `TensorAnnotation`s (quantization annotations), kept for round trips.
  [[nodiscard]] std::vector<std::string>& quantization_annotations() noexcept { return quantization_annotations_; }
  [[nodiscard]] const std::vector<std::string>& quantization_annotations() const noexcept {
    return quantization_annotations_;
  }

  // ---- nodes ----
  [[nodiscard]] std::size_t node_count() const noexcept { return nodes_.size(); }
  [[nodiscard]] const Node& node(node_id n) const { return nodes_[n]; }
  [[nodiscard]] Node& node(node_id n) { return nodes_[n]; }
  /// "'name' (OpType)", or "#3 (OpType)" for an unnamed node; for messages.
  [[nodiscard]] std::string describe(node_id n) const {
    const auto& nd = nodes_[n];
    return nd.name.empty() ? detail::cat("#", std::to_string(n), " (", nd.op_type, ")")
                           : detail::cat("'", nd.name, "' (", nd.op_type, ")");
  }
  /// Every flow (edge), in the order they were made: one per use of a value produced by a node (a node reading a
  /// value twice has two flows from its producer).
  [[nodiscard]] const std::vector<flow>& flows() const noexcept { return flows_; }
  /// The flows out of node `n` (indices into `flows()`), in the order they were made.
  [[nodiscard]] std::span<const std::size_t> out_flows(node_id n) const noexcept { return {out_[n].data(), out_[n].size()}; }

  /// True when `v` is defined in this graph (graph input, initializer or node output).
  [[nodiscard]] bool is_defined_here(value_id v) const {
    const auto& r = values_[v];
    return r.is_graph_input || r.initializer.has_value() || r.is_sparse_initializer || r.producer != no_id;
  }
  /// Problems recorded while building (values defined twice); `validate()` reports the first.
  [[nodiscard]] const std::vector<std::string>& problems() const noexcept { return problems_; }

 private:
  std::string redefined(const Value& rec, const std::string& by) const {
    const std::string first = rec.producer != no_id ? detail::cat("node ", describe(rec.producer))
                              : rec.initializer      ? std::string("an initializer")
                              : rec.is_sparse_initializer ? std::string("a sparse initializer")
                                                          : std::string("a graph input");
    return detail::cat("value '", rec.name, "' is defined twice: by ", first, " and by ", by);
  }
  void problem(std::string p) { problems_.push_back(std::move(p)); }
  void add_flow(node_id from, node_id to, value_id v) {
    out_[from].push_back(flows_.size());
    flows_.push_back({from, to, v});
  }

  struct string_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };

  std::string name_;
  std::string doc_string_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::string ir_extra_;
  std::vector<Node> nodes_;
  std::vector<flow> flows_;
  std::vector<boost::container::small_vector<std::size_t, 2>> out_;  // per node: its flows out
  std::vector<Value> values_;
  std::unordered_map<std::string, value_id, string_hash, std::equal_to<>> index_;
  std::vector<value_id> inputs_, outputs_, initializers_;
  std::vector<sparse_tensor> sparse_initializers_;
  std::vector<std::string> quantization_annotations_;
  std::vector<std::string> problems_;
};

/// @brief The graph of epstack's IR (a named type, so attributes can hold it as a subgraph).
class graph : public basic_graph<node, value> {
 public:
  using basic_graph::basic_graph;
};

/// @brief Makes a subgraph attribute value from a graph.
[[nodiscard]] inline subgraph make_subgraph(graph g) { return subgraph::make(std::move(g)); }

}  // namespace epstack
