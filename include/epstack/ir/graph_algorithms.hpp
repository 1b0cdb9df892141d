#pragma once
/// @file graph_algorithms.hpp
/// @brief Topological order, cycle detection and validation of graphs, with Boost.Graph algorithms.

#include <epstack/ir/flow_graph.hpp>
#include <epstack/ir/graph.hpp>
#include <epstack/ir/graph_view.hpp>

#include <boost/graph/depth_first_search.hpp>
#include <boost/graph/topological_sort.hpp>

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

namespace epstack {

namespace detail {
struct cycle_found {
  std::size_t from, to;
};
// Records the DFS tree and stops at the first back edge.
template <class Pred>
struct cycle_visitor : boost::default_dfs_visitor {
  Pred* pred;
  template <class E, class G>
  void tree_edge(E e, const G& g) const {
    (*pred)[target(e, g)] = source(e, g);
  }
  template <class E, class G>
  void back_edge(E e, const G& g) const {
    throw cycle_found{source(e, g), target(e, g)};
  }
};
}  // namespace detail

/// @brief The nodes of one cycle in dependency order (first ... last, last feeds first), or empty when the (Boost)
/// graph `bg` is acyclic. Works on `make_flow_graph(g)` and on `view_flow_graph(view).get()`.
template <class BoostGraph>
[[nodiscard]] std::vector<std::size_t> find_cycle(const BoostGraph& bg) {
  const std::size_t n = num_vertices(bg);  // unqualified: found by ADL for adjacency_list and filtered_graph
  std::vector<std::size_t> pred(n, no_id);
  std::vector<boost::default_color_type> color(n);
  detail::cycle_visitor<std::vector<std::size_t>> vis;
  vis.pred = &pred;
  try {
    boost::depth_first_search(
        bg, boost::visitor(vis).color_map(boost::make_iterator_property_map(color.begin(), get(boost::vertex_index, bg))));
  } catch (const detail::cycle_found& c) {
    // The back edge c.from -> c.to closes the cycle c.to -> ... -> c.from along the DFS tree.
    std::vector<std::size_t> cycle{c.from};
    for (std::size_t v = c.from; v != c.to && pred[v] != no_id; v = pred[v]) cycle.push_back(pred[v]);
    std::reverse(cycle.begin(), cycle.end());
    return cycle;
  }
  return {};
}

/// @brief Nodes in an order where every producer comes before its consumers (Boost's topological_sort);
/// invalid_graph naming the nodes of a cycle when there is one.
template <class N, class V>
[[nodiscard]] Result<std::vector<node_id>> topological_order(const basic_graph<N, V>& g) {
  const flow_graph fg = make_flow_graph(g);
  if (auto cycle = find_cycle(fg); !cycle.empty()) {
    std::string msg = "graph '" + g.name() + "' has a cycle:";
    // append() rather than operator+: g++-12 -O3 reports a false -Wrestrict on `" " + std::string`.
    for (auto n : cycle) msg.append(" ").append(g.describe(n)).append(" ->");
    msg.append(" ").append(g.describe(cycle.front()));
    return Status(errc::invalid_graph, msg);
  }
  std::vector<node_id> order;
  order.reserve(g.node_count());
  boost::topological_sort(fg, std::back_inserter(order));
  std::reverse(order.begin(), order.end());
  return order;
}

/// @brief Topological order of a view's nodes (edges to nodes outside the view are ignored); invalid_graph when they
/// form a cycle.
template <class G>
[[nodiscard]] Result<std::vector<node_id>> topological_order(const graph_view<G>& v) {
  const view_flow_graph<G> vfg(v);
  const auto& fg = vfg.get();
  if (!find_cycle(fg).empty()) return Status(errc::invalid_graph, "the view of graph '" + v.graph().name() + "' has a cycle");
  std::vector<node_id> order;
  std::vector<boost::default_color_type> color(v.graph().node_count());
  boost::topological_sort(fg, std::back_inserter(order),
                          boost::color_map(boost::make_iterator_property_map(color.begin(), get(boost::vertex_index, fg))));
  std::reverse(order.begin(), order.end());
  return order;
}

/// @brief Names of the values that `g` (and its nested subgraphs) use without defining them: what a control-flow node
/// holding `g` takes from enclosing scopes. In first-use order.
inline std::vector<std::string> free_values(const graph& g) {
  std::vector<std::string> r;
  const auto note = [&](value_id v) {
    if (v == no_id || g.is_defined_here(v)) return;
    const auto& name = g.value(v).name;
    if (std::find(r.begin(), r.end(), name) == r.end()) r.push_back(name);
  };
  for (node_id n = 0; n < g.node_count(); ++n) {
    for (value_id v : g.node(n).inputs) note(v);
    for (value_id v : g.node(n).implicit_inputs) note(v);
  }
  for (value_id v : g.outputs()) note(v);
  return r;
}

/// @brief Sets every control-flow node's implicit inputs (the free values of its subgraphs), innermost graphs first,
/// so that topological order and lifetimes account for them. Idempotent.
inline void resolve_implicit_inputs(graph& g) {
  for (node_id n = 0; n < g.node_count(); ++n) {
    std::vector<std::string> names;
    for (auto& a : g.node(n).attributes) {
      const auto take = [&](subgraph& sg) {
        if (!sg) return;
        resolve_implicit_inputs(*sg);
        for (auto& name : free_values(*sg))
          if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(std::move(name));
      };
      if (auto* sg = std::get_if<subgraph>(&a.value)) take(*sg);
      if (auto* sgs = std::get_if<std::vector<subgraph>>(&a.value))
        for (auto& sg : *sgs) take(sg);
    }
    for (const auto& name : names) g.add_implicit_input(n, name);
  }
}

/// @brief Gives the values that subgraphs take from enclosing graphs the types those graphs know for them (onnx's
/// shape inference types a subgraph's own values only), innermost scopes searched first.
inline void propagate_outer_types(graph& g, std::vector<const graph*>& scopes) {
  scopes.push_back(&g);
  for (node_id n = 0; n < g.node_count(); ++n)
    for (auto& a : g.node(n).attributes) {
      const auto visit = [&](subgraph& sg) {
        if (!sg) return;
        graph& s = *sg;
        for (value_id v = 0; v < s.value_count(); ++v) {
          auto& rec = s.value(v);
          if (s.is_defined_here(v) || rec.type.is_defined()) continue;
          for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
            const auto o = (*it)->find_value(rec.name);
            if (o != no_id && (*it)->is_defined_here(o)) {
              rec.type = (*it)->value(o).type;
              break;
            }
          }
        }
        propagate_outer_types(s, scopes);
      };
      if (auto* sg = std::get_if<subgraph>(&a.value)) visit(*sg);
      if (auto* sgs = std::get_if<std::vector<subgraph>>(&a.value))
        for (auto& sg : *sgs) visit(sg);
    }
  scopes.pop_back();
}
inline void propagate_outer_types(graph& g) {
  std::vector<const graph*> scopes;
  propagate_outer_types(g, scopes);
}

/// @brief Lexical scope for validation: a graph and the graphs that enclose it.
template <class G>
struct graph_scope {
  const G* g = nullptr;
  const graph_scope* parent = nullptr;
  [[nodiscard]] bool defines(std::string_view name) const {
    for (auto* s = this; s != nullptr; s = s->parent) {
      const auto v = s->g->find_value(name);
      if (v != no_id && s->g->is_defined_here(v)) return true;
    }
    return false;
  }
};

/// @brief Checks the graph and, recursively, its subgraphs: each value defined once; every node input and graph output
/// defined here or (for subgraphs) in an enclosing graph; graph inputs typed; no cycle. invalid_graph with a message
/// naming the graph, node and value otherwise.
inline Status validate(const graph& g, const graph_scope<graph>* outer = nullptr) {
  const auto where = [&] { return "graph '" + g.name() + "': "; };
  if (!g.problems().empty()) return Status(errc::invalid_graph, where() + g.problems().front());
  const graph_scope<graph> scope{&g, outer};
  for (node_id n = 0; n < g.node_count(); ++n) {
    const auto& nd = g.node(n);
    for (value_id v : nd.implicit_inputs) {
      if (g.is_defined_here(v) || (outer != nullptr && outer->defines(g.value(v).name))) continue;
      return Status(errc::invalid_graph, where() + "a subgraph of node " + g.describe(n) + " uses value '" +
                                             g.value(v).name + "', which is not defined in any enclosing graph");
    }
    for (value_id v : nd.inputs) {
      if (v == no_id || g.is_defined_here(v)) continue;
      if (outer == nullptr || !outer->defines(g.value(v).name))
        return Status(errc::invalid_graph, where() + "node " + g.describe(n) + " uses value '" + g.value(v).name +
                                               "', which is not defined" + (outer ? " here or in an enclosing graph" : ""));
    }
    for (const auto& a : nd.attributes) {
      const auto check = [&](const subgraph& sg) -> Status {
        if (!sg) return Status(errc::invalid_graph, where() + "node " + g.describe(n) + ": attribute '" + a.name + "' holds no graph");
        auto st = validate(*sg, &scope);
        return st.with_context(where() + "node " + g.describe(n) + " attribute '" + a.name + "'");
      };
      if (const auto* sg = std::get_if<subgraph>(&a.value)) EPSTACK_RETURN_IF_ERROR(check(*sg));
      if (const auto* sgs = std::get_if<std::vector<subgraph>>(&a.value))
        for (const auto& sg : *sgs) EPSTACK_RETURN_IF_ERROR(check(sg));
    }
  }
  for (value_id v : g.outputs())
    if (!g.is_defined_here(v) && (outer == nullptr || !outer->defines(g.value(v).name)))
      return Status(errc::invalid_graph, where() + "graph output '" + g.value(v).name + "' is not defined");
  auto order = topological_order(g);
  if (!order) return order.status();
  return {};
}

}  // namespace epstack
