#pragma once
/// @file flow_graph.hpp
/// @brief Graphs as Boost graphs, for Boost.Graph's algorithms: `make_flow_graph(g)` is a `boost::adjacency_list`
/// with one vertex per node (same ids) and one edge per flow (each node's in the order they were made), and `view_flow_graph` filters it to a `graph_view`'s nodes. Kept out of graph.hpp and
/// graph_view.hpp, which kernels and providers include, because Boost.Graph's adjacency_list is most of what a
/// translation unit including it compiles.

#include <epstack/ir/graph.hpp>
#include <epstack/ir/graph_view.hpp>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/filtered_graph.hpp>

#include <cstddef>
#include <memory>
#include <vector>

namespace epstack {

/// The Boost graph of a graph's flows: vertices are node ids, each edge carries its value.
using flow_graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, boost::no_property, flow_edge>;

/// @brief `g` as a Boost graph (O(nodes + flows)); each vertex's out-edges in the order its flows were made.
template <class N, class V>
[[nodiscard]] flow_graph make_flow_graph(const basic_graph<N, V>& g) {
  flow_graph fg(g.node_count());
  for (node_id n = 0; n < g.node_count(); ++n)
    for (std::size_t f : g.out_flows(n)) boost::add_edge(n, g.flows()[f].to, flow_edge{g.flows()[f].value}, fg);
  return fg;
}

/// @brief The nodes of a view as a Boost graph: the flow graph of the whole graph, filtered to the view (edges to
/// nodes outside are not followed). It owns what it filters: keep it alive while iterators into it are used.
template <class G>
class view_flow_graph {
 public:
  struct node_filter {
    std::shared_ptr<const std::vector<bool>> keep;
    bool operator()(std::size_t v) const { return keep && (*keep)[v]; }
  };
  using filtered_type = boost::filtered_graph<flow_graph, boost::keep_all, node_filter>;

  explicit view_flow_graph(const graph_view<G>& v)
      : base_(std::make_unique<flow_graph>(make_flow_graph(v.graph()))),
        filtered_(*base_, boost::keep_all{}, node_filter{v.node_set()}) {}

  [[nodiscard]] const filtered_type& get() const noexcept { return filtered_; }

 private:
  std::unique_ptr<flow_graph> base_;
  filtered_type filtered_;
};

}  // namespace epstack
