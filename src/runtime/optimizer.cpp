// Graph transformations before partitioning. The graph is copied into an editable form (nodes in topological order,
// values by name), transformed pass by pass, and rebuilt; subgraphs are transformed first, on their own. Value names
// never change, so references from subgraphs to enclosing graphs stay valid; a node whose output a subgraph uses
// (an implicit use) is never removed or fused away.
#include "egraph.hpp"

#include <epstack/onnx/onnx_io.hpp>

#include <algorithm>
#include <string_view>
#include <vector>

namespace epstack {

using namespace opt;

namespace {

// `fold_only`: constant folding and the removals, no fusion (the graph stays plain ONNX, which inference knows).
Status optimize_graph(graph& g, const optimizer_options& opt, std::int64_t onnx_opset, optimization_report& rep,
                      thread_pool* pool, bool fold_only = false) {
  // Subgraphs first, each on its own.
  for (node_id n = 0; n < g.node_count(); ++n)
    for (auto& a : g.node(n).attributes) {
      if (auto* sg = std::get_if<subgraph>(&a.value); sg && *sg)
        EPSTACK_RETURN_IF_ERROR(optimize_graph(**sg, opt, onnx_opset, rep, pool, fold_only));
      if (auto* sgs = std::get_if<std::vector<subgraph>>(&a.value))
        for (auto& sg : *sgs)
          if (sg) EPSTACK_RETURN_IF_ERROR(optimize_graph(*sg, opt, onnx_opset, rep, pool, fold_only));
    }
  EPSTACK_ASSIGN_OR_RETURN(egraph e, to_egraph(g));
  EPSTACK_RETURN_IF_ERROR(constant_folding(e, opt, rep, pool));
  identity_elimination(e, rep);
  dead_node_elimination(e, rep);
  if (fold_only) {
    g = from_egraph(e);
    return {};
  }
  fuse_conv_bn(e, rep, pool);
  fuse_reshape_shape(e, rep);
  if (opt.level >= graph_optimization_level::extended) {
    const auto can = [&](std::string_view domain, std::string_view op) { return !opt.can_run || opt.can_run(domain, op); };
    if (can(contrib_domain, "FusedConv")) fuse_conv_activation(e, rep);
    if (can(contrib_domain, "Gelu") && can(contrib_domain, "BiasGelu")) fuse_gelu(e, rep);
    if (can(onnx_opset >= 17 ? std::string_view() : contrib_domain, "LayerNormalization")) fuse_layer_norm(e, onnx_opset, rep);
    if (can(contrib_domain, "SkipLayerNormalization")) fuse_skip_layer_norm(e, rep);
    if (can(contrib_domain, "FusedMatMul")) rewrite_einsum_matmul(e, rep);
    if (can("", "Gemm") && can("", "Reshape")) {
      fuse_matmul_add(e, rep, onnx_opset);
      fuse_transpose_gemm(e, rep);
    }
    // After MatMul + Add: ONNX Runtime's MatMulAddFusion (basic level) runs before its MatMulScaleFusion (extended).
    if (can(contrib_domain, "FusedMatMul")) fuse_matmul_scale(e, rep);
  }
  dead_node_elimination(e, rep);
  g = from_egraph(e);
  return {};
}

bool uses_domain(const graph& g, std::string_view domain) {
  for (node_id i = 0; i < g.node_count(); ++i) {
    if (g.node(i).domain == domain) return true;
    for (const auto& a : g.node(i).attributes) {
      if (const auto* sg = std::get_if<subgraph>(&a.value); sg && *sg && uses_domain(**sg, domain)) return true;
      if (const auto* sgs = std::get_if<std::vector<subgraph>>(&a.value))
        for (const auto& sg : *sgs)
          if (sg && uses_domain(*sg, domain)) return true;
    }
  }
  return false;
}

// True when some tensor of the main graph has an unknown rank or a dimension neither a number nor a name.
bool has_unknown_shapes(const graph& g) {
  for (value_id v = 0; v < g.value_count(); ++v) {
    const auto& t = g.value(v).type;
    if (t.kind != type_kind::tensor) continue;
    if (!t.dims) return true;
    for (const auto& d : t.dims->dims())
      if (!d.is_known() && !d.is_symbolic()) return true;
  }
  return false;
}

// True when a Shape or Size node of the main graph reads a tensor whose shape has a symbol no graph input declares:
// one inference made up where it could not size a dimension (a Slice whose ends a shape computation gives). Folding
// that computation makes the dimension known to inference again, and then the Shape node folds in turn: GPT-2's
// decode step at fixed input sizes kept 24 Shape nodes and the ~100 Gather, Unsqueeze and Concat nodes after them.
bool shape_of_made_up_symbol(const graph& g) {
  std::vector<std::string_view> declared;
  for (value_id v : g.inputs())
    if (const auto& t = g.value(v).type; t.kind == type_kind::tensor && t.dims)
      for (const auto& d : t.dims->dims())
        if (d.is_symbolic()) declared.push_back(d.param);
  for (node_id n = 0; n < g.node_count(); ++n) {
    const node& nd = g.node(n);
    if (nd.inputs.empty() || nd.inputs[0] == no_id || !(nd.domain.empty() || nd.domain == "ai.onnx") ||
        (nd.op_type != "Shape" && nd.op_type != "Size"))
      continue;
    const auto& t = g.value(nd.inputs[0]).type;
    if (t.kind != type_kind::tensor || !t.dims) continue;
    for (const auto& d : t.dims->dims())
      if (d.is_symbolic() && std::find(declared.begin(), declared.end(), d.param) == declared.end()) return true;
  }
  return false;
}

std::size_t count_nodes(const graph& g) {
  std::size_t n = g.node_count();
  for (node_id i = 0; i < g.node_count(); ++i)
    for (const auto& a : g.node(i).attributes) {
      if (const auto* sg = std::get_if<subgraph>(&a.value); sg && *sg) n += count_nodes(**sg);
      if (const auto* sgs = std::get_if<std::vector<subgraph>>(&a.value))
        for (const auto& sg : *sgs)
          if (sg) n += count_nodes(*sg);
    }
  return n;
}

// One round over `g` and its subgraphs: unclaimed function nodes replaced by their bodies.
Result<std::size_t> expand_round(model& m, graph& g, const claim_query& claimed) {
  std::size_t expanded = 0;
  for (node_id n = 0; n < g.node_count(); ++n)
    for (auto& a : g.node(n).attributes) {
      if (auto* sg = std::get_if<subgraph>(&a.value); sg && *sg) {
        EPSTACK_ASSIGN_OR_RETURN(auto k, expand_round(m, **sg, claimed));
        expanded += k;
      }
      if (auto* sgs = std::get_if<std::vector<subgraph>>(&a.value))
        for (auto& sg : *sgs)
          if (sg) {
            EPSTACK_ASSIGN_OR_RETURN(auto k, expand_round(m, *sg, claimed));
            expanded += k;
          }
    }
  const auto taken = claimed(g);
  // Bodies by node, found on the graph as it is (before any replacement).
  std::vector<std::optional<std::vector<body_node>>> bodies(g.node_count());
  bool any = false;
  for (node_id n = 0; n < g.node_count(); ++n) {
    if (n < taken.size() && taken[n]) continue;
    EPSTACK_ASSIGN_OR_RETURN(bodies[n], expand_function(m, g, n));
    any = any || bodies[n].has_value();
  }
  if (!any) return expanded;
  EPSTACK_ASSIGN_OR_RETURN(egraph e, to_egraph(g));
  std::vector<enode> out;
  for (auto& en : e.nodes) {
    if (en.origin == no_id || !bodies[en.origin]) {
      out.push_back(std::move(en));
      continue;
    }
    for (auto& b : *bodies[en.origin]) {
      enode x;
      x.n = std::move(b.n);
      x.inputs = std::move(b.inputs);
      x.outputs = std::move(b.outputs);
      out.push_back(std::move(x));
    }
    ++expanded;
  }
  e.nodes = std::move(out);
  g = from_egraph(e);
  return expanded;
}

}  // namespace

Result<std::size_t> expand_functions(model& m, const claim_query& claimed) {
  std::size_t total = 0;
  for (int round = 0; round < 8; ++round) {
    EPSTACK_ASSIGN_OR_RETURN(auto k, expand_round(m, m.graph, claimed));
    if (k == 0) break;
    total += k;
    // The bodies' values need types (kernels choose by them) and their nodes schema versions.
    EPSTACK_RETURN_IF_ERROR(infer_shapes(m).with_context("after expanding function operators"));
  }
  return total;
}

Result<optimization_report> optimize(model& m, const optimizer_options& options) {
  optimization_report rep;
  rep.nodes_before = count_nodes(m.graph);
  if (options.level == graph_optimization_level::disable) {
    rep.nodes_after = rep.nodes_before;
    return rep;
  }
  thread_pool pool(std::max(1, options.threads));
  // Folding can turn what inference could not size into constants (exporters' Shape -> Gather -> Unsqueeze -> Slice
  // chains on static inputs): then shapes are inferred again, and what became known is folded in turn, so that the
  // partitioner prices nodes on their shapes and kernels plan for them. Before any fusion, while the graph is plain
  // ONNX that inference knows; inference that fails keeps the types already known (the model was valid before).
  // Rounds go on while one folds something: a transformer's per-layer head reshapes each wait on the layer before
  // (four rounds left BERT-base at fixed sizes unsized from its third layer on, and 10 of its 12 layers unfused).
  const auto unsized = [&] { return has_unknown_shapes(m.graph) || shape_of_made_up_symbol(m.graph); };
  if (unsized()) {
    std::size_t last_folded = 0;
    for (int round = 0; round < 64; ++round) {
      EPSTACK_RETURN_IF_ERROR(optimize_graph(m.graph, options, m.opset(""), rep, &pool, true).with_context("graph optimisation"));
      const auto folded = rep.constant_folded + rep.shapes_folded;
      if (folded == last_folded || !unsized() || !infer_shapes(m)) break;
      last_folded = folded;
    }
  }
  EPSTACK_RETURN_IF_ERROR(optimize_graph(m.graph, options, m.opset(""), rep, &pool).with_context("graph optimisation"));
  if (uses_domain(m.graph, contrib_domain) && m.opset(contrib_domain) < 0) m.opsets.push_back({std::string(contrib_domain), 1});
  rep.nodes_after = count_nodes(m.graph);
  return rep;
}

}  // namespace epstack
