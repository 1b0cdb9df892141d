#pragma once
// The optimiser's editable form of a graph (nodes in topological order, values by name) and the passes over it:
// the basic passes (passes.cpp), the fusions (fusions.cpp), the conversion (egraph.cpp); optimizer.cpp drives them.
// Private to epstack::runtime.
#include <epstack/runtime/optimizer.hpp>

#include <epstack/core/thread_pool.hpp>
#include <epstack/detail/cat.hpp>
#include <epstack/ir/graph_algorithms.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace epstack::opt {

using epstack::detail::cat;

struct enode {
  node n;  // op, domain, name, attributes (subgraphs included), since_version; inputs/outputs below
  std::vector<std::string> inputs, outputs;
  bool dead = false;
  node_id origin = no_id;  // the node of the graph it was made from (no_id for nodes a pass created)
};

struct egraph {
  std::string name, doc;
  std::vector<std::pair<std::string, std::string>> metadata;  ///< the graph's metadata_props (IR 10)
  std::string ir_extra;                                      ///< newer graph fields, kept as bytes
  std::vector<std::pair<std::string, type_info>> inputs, outputs;
  std::vector<std::string> init_order;
  std::unordered_map<std::string, tensor> inits;
  std::vector<sparse_tensor> sparse;
  std::vector<std::string> annotations;
  std::unordered_map<std::string, type_info> types;
  std::unordered_map<std::string, std::string> docs;
  std::unordered_set<std::string> value_info;  // names listed in value_info (kept for round trips)
  std::vector<enode> nodes;
  std::unordered_set<std::string> graph_inputs, graph_outputs;

  // Derived by index().
  std::unordered_map<std::string, std::size_t> producer;
  std::unordered_map<std::string, std::vector<std::size_t>> consumers;  // explicit inputs of live nodes
  std::unordered_set<std::string> implicit;                             // used by some subgraph
  std::string indexed_, index_scratch_;  // what the index was built for (unchanged_since_index); empty: build anew

  void index() {
    if (unchanged_since_index()) return;
    producer.clear();
    consumers.clear();
    implicit.clear();
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const auto& e = nodes[i];
      if (e.dead) continue;
      for (const auto& o : e.outputs)
        if (!o.empty()) producer[o] = i;
      for (const auto& in : e.inputs)
        if (!in.empty()) consumers[in].push_back(i);
      for (const auto& a : e.n.attributes) {
        const auto add = [&](const subgraph& sg) {
          if (sg)
            for (auto& v : free_values(*sg)) implicit.insert(std::move(v));
        };
        if (const auto* sg = std::get_if<subgraph>(&a.value)) add(*sg);
        if (const auto* sgs = std::get_if<std::vector<subgraph>>(&a.value))
          for (const auto& sg : *sgs) add(sg);
      }
    }
  }
  // Keeping the index without rebuilding it, around an edit of nodes without subgraphs: `unindex` node i before the
  // edit (its outputs' producer and its uses gone), `reindex` it after.
  void unindex(std::size_t i) {
    indexed_.clear();  // edited by hand from here: the next index() builds anew
    for (const auto& o : nodes[i].outputs)
      if (auto it = producer.find(o); it != producer.end() && it->second == i) producer.erase(it);
    for (const auto& in : nodes[i].inputs)
      if (auto it = consumers.find(in); it != consumers.end()) std::erase(it->second, i);
  }
  void reindex(std::size_t i) {
    indexed_.clear();
    if (nodes[i].dead) return;
    for (const auto& o : nodes[i].outputs)
      if (!o.empty()) producer[o] = i;
    for (const auto& in : nodes[i].inputs)
      if (!in.empty()) consumers[in].push_back(i);
  }
  [[nodiscard]] const tensor* constant(const std::string& v) const {
    if (v.empty() || graph_inputs.count(v)) return nullptr;
    auto it = inits.find(v);
    return it == inits.end() ? nullptr : &it->second;
  }
  [[nodiscard]] std::size_t uses(const std::string& v) const {
    auto it = consumers.find(v);
    return (it == consumers.end() ? 0 : it->second.size()) + (graph_outputs.count(v) ? 1 : 0) + (implicit.count(v) ? 1 : 0);
  }
  // The only consumer of `v` when it has exactly one use and that use is a node's input.
  [[nodiscard]] std::optional<std::size_t> sole_consumer(const std::string& v) const {
    if (uses(v) != 1) return std::nullopt;
    auto it = consumers.find(v);
    if (it == consumers.end() || it->second.size() != 1) return std::nullopt;
    return it->second.front();
  }
  [[nodiscard]] const enode* producer_of(const std::string& v) const {
    auto it = producer.find(v);
    return it == producer.end() ? nullptr : &nodes[it->second];
  }
  [[nodiscard]] std::optional<std::size_t> producer_index(const std::string& v) const {
    auto it = producer.find(v);
    if (it == producer.end()) return std::nullopt;
    return it->second;
  }
  [[nodiscard]] const type_info* type_of(const std::string& v) const {
    auto it = types.find(v);
    return it != types.end() ? &it->second : nullptr;
  }
  // A fresh value name starting with `base`.
  [[nodiscard]] std::string fresh(const std::string& base) const {
    std::string n = base;
    for (int k = 1; inits.count(n) || producer.count(n) || types.count(n) || graph_inputs.count(n); ++k)
      n = base + "_" + std::to_string(k);
    return n;
  }
  // True when the index was built for exactly the live nodes' inputs and outputs there are now (compared in full, not
  // by a hash) and no node has a subgraph: most passes change nothing, and a create rebuilt the maps a dozen times.
  // The current form is kept for the next call either way.
  bool unchanged_since_index() {
    std::string& now = index_scratch_;
    now.clear();
    bool subgraphs = false;
    const auto count = [&](std::size_t k) {
      const auto n = static_cast<std::uint64_t>(k);
      now.append(reinterpret_cast<const char*>(&n), sizeof n);
    };
    for (const auto& en : nodes) {
      now.push_back(en.dead ? 'd' : 'l');
      if (en.dead) continue;
      count(en.inputs.size());
      for (const auto& in : en.inputs) count(in.size()), now.append(in);
      count(en.outputs.size());
      for (const auto& o : en.outputs) count(o.size()), now.append(o);
      for (const auto& a : en.n.attributes)
        subgraphs = subgraphs || std::holds_alternative<subgraph>(a.value) || std::holds_alternative<std::vector<subgraph>>(a.value);
    }
    const bool same = !subgraphs && !indexed_.empty() && now == indexed_;
    if (subgraphs) indexed_.clear();
    else indexed_.swap(now);
    return same;
  }
  void add_init(const std::string& name, tensor t) {
    if (!inits.count(name)) init_order.push_back(name);
    types[name] = type_info::tensor_of(t.type(), t.get_shape());
    inits[name] = std::move(t);
  }
};


inline bool is_onnx(const node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }
inline bool is_op(const enode& e, std::string_view op) { return !e.dead && is_onnx(e.n) && e.n.op_type == op; }

/// The editable form of `g`; invalid_graph when its nodes form a cycle.
[[nodiscard]] Result<egraph> to_egraph(const graph& g);
/// The graph back from its editable form.
[[nodiscard]] graph from_egraph(egraph& e);

// Basic passes (passes.cpp).
[[nodiscard]] Status constant_folding(egraph& e, const optimizer_options& opt, optimization_report& rep, thread_pool* pool);
void identity_elimination(egraph& e, optimization_report& rep);
void dead_node_elimination(egraph& e, optimization_report& rep);

// Fusions (fusions.cpp).
void fuse_conv_bn(egraph& e, optimization_report& rep, thread_pool* pool);
void fuse_conv_activation(egraph& e, optimization_report& rep);
void fuse_gelu(egraph& e, optimization_report& rep);
void fuse_layer_norm(egraph& e, std::int64_t onnx_opset, optimization_report& rep);
void fuse_skip_layer_norm(egraph& e, optimization_report& rep);
void fuse_matmul_add(egraph& e, optimization_report& rep, std::int64_t onnx_opset);
void fuse_transpose_gemm(egraph& e, optimization_report& rep);
void rewrite_einsum_matmul(egraph& e, optimization_report& rep);
void fuse_matmul_scale(egraph& e, optimization_report& rep);
void fuse_reshape_shape(egraph& e, optimization_report& rep);

}  // namespace epstack::opt
