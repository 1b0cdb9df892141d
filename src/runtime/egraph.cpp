// The optimiser's editable graph: made from a graph, and the graph rebuilt from it (egraph.hpp).
#include "egraph.hpp"

#include <algorithm>

namespace epstack::opt {
/// The editable form of `g`; invalid_graph when its nodes form a cycle.
Result<egraph> to_egraph(const graph& g) {
  egraph e;
  e.name = g.name();
  e.doc = g.doc_string();
  e.metadata = g.metadata();
  e.ir_extra = g.ir_extra();
  for (value_id v : g.inputs()) {
    e.inputs.emplace_back(g.value(v).name, g.value(v).type);
    e.graph_inputs.insert(g.value(v).name);
  }
  for (value_id v : g.outputs()) {
    e.outputs.emplace_back(g.value(v).name, g.value(v).type);
    e.graph_outputs.insert(g.value(v).name);
  }
  for (value_id v : g.initializers()) {
    e.init_order.push_back(g.value(v).name);
    e.inits[g.value(v).name] = *g.value(v).initializer;
  }
  e.sparse = g.sparse_initializers();
  e.annotations = g.quantization_annotations();
  for (value_id v = 0; v < g.value_count(); ++v) {
    const auto& r = g.value(v);
    if (r.type.is_defined()) e.types[r.name] = r.type;
    if (!r.doc_string.empty()) e.docs[r.name] = r.doc_string;
    if (r.in_value_info) e.value_info.insert(r.name);
  }
  const auto order = topological_order(g);
  if (!order) return Status(errc::invalid_graph, cat("graph '", g.name(), "': ", order.status().message()));
  for (node_id n : *order) {
    enode en;
    en.origin = n;
    en.n = g.node(n);
    for (value_id v : en.n.inputs) en.inputs.push_back(v == no_id ? std::string() : g.value(v).name);
    for (value_id v : en.n.outputs) en.outputs.push_back(v == no_id ? std::string() : g.value(v).name);
    en.n.inputs.clear();
    en.n.outputs.clear();
    en.n.implicit_inputs.clear();
    e.nodes.push_back(std::move(en));
  }
  e.index();
  return e;
}

graph from_egraph(egraph& e) {
  graph g(e.name);
  g.set_doc_string(e.doc);
  g.metadata() = std::move(e.metadata);
  g.set_ir_extra(std::move(e.ir_extra));
  for (auto& [name, type] : e.inputs) g.add_input(name, type);
  for (const auto& name : e.init_order) {
    auto it = e.inits.find(name);
    if (it != e.inits.end()) g.add_initializer(name, it->second);
  }
  for (auto& s : e.sparse) g.add_sparse_initializer(s);
  g.quantization_annotations() = e.annotations;
  for (auto& en : e.nodes) {
    if (en.dead) continue;
    g.add_node(en.n, en.inputs, en.outputs);
  }
  for (auto& [name, type] : e.outputs) g.add_output(name, type);
  for (value_id v = 0; v < g.value_count(); ++v) {
    auto& r = g.value(v);
    if (auto it = e.types.find(r.name); it != e.types.end() && !r.is_graph_input && !r.initializer) r.type = it->second;
    if (auto it = e.docs.find(r.name); it != e.docs.end()) r.doc_string = it->second;
    // Every typed intermediate is listed in value_info: the contrib operators the fusions write have no schema in the
    // onnx package, so a saved optimised model keeps its types only this way.
    r.in_value_info = !r.is_graph_input && !r.is_graph_output && !r.initializer && r.type.is_defined() &&
                      (r.producer != no_id || e.value_info.count(r.name) > 0);
  }
  resolve_implicit_inputs(g);
  return g;
}


}  // namespace epstack::opt
