#pragma once
/// @file graph_view.hpp
/// @brief A view of some nodes of a graph (what a provider may see) and the view's boundary values (used inside but
/// produced outside; produced inside and used outside or as graph outputs). As a Boost graph: `view_flow_graph`
/// (flow_graph.hpp); in topological order: `topological_order(view)` (graph_algorithms.hpp).

#include <epstack/ir/graph.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <memory>
#include <vector>

namespace epstack {

/// @brief A subset of a graph's nodes. Copies share the node set. The graph must outlive the view.
template <class G>
class graph_view {
 public:
  /// The whole graph.
  explicit graph_view(const G& g) : graph_view(g, std::vector<bool>(g.node_count(), true)) {}
  /// The nodes whose `keep` entry is true (`keep.size()` must be the graph's node count).
  graph_view(const G& g, std::vector<bool> keep)
      : g_(&g), keep_(std::make_shared<const std::vector<bool>>(std::move(keep))) {}
  /// The nodes for which `pred(node_id)` is true.
  template <class Pred>
    requires std::predicate<Pred, node_id>
  graph_view(const G& g, Pred pred) : g_(&g) {
    std::vector<bool> k(g.node_count());
    for (node_id n = 0; n < k.size(); ++n) k[n] = pred(n);
    keep_ = std::make_shared<const std::vector<bool>>(std::move(k));
  }

  [[nodiscard]] const G& graph() const noexcept { return *g_; }
  [[nodiscard]] bool contains(node_id n) const { return n < keep_->size() && (*keep_)[n]; }
  /// The node ids in the view, ascending.
  [[nodiscard]] std::vector<node_id> nodes() const {
    std::vector<node_id> r;
    for (node_id n = 0; n < keep_->size(); ++n)
      if ((*keep_)[n]) r.push_back(n);
    return r;
  }
  [[nodiscard]] std::size_t node_count() const {
    return static_cast<std::size_t>(std::count(keep_->begin(), keep_->end(), true));
  }
  /// The view's node set, by node id (shared by copies of the view).
  [[nodiscard]] const std::shared_ptr<const std::vector<bool>>& node_set() const noexcept { return keep_; }
  /// Values used by nodes of the view (implicit inputs of control-flow nodes included) and not produced inside it, in
  /// first-use order.
  [[nodiscard]] std::vector<value_id> inputs() const {
    std::vector<value_id> r;
    std::vector<bool> seen(g_->value_count());
    const auto take = [&](value_id v) {
      if (v != no_id && !seen[v] && !contains(g_->value(v).producer)) {
        seen[v] = true;
        r.push_back(v);
      }
    };
    for (node_id n : nodes()) {
      for (value_id v : g_->node(n).inputs) take(v);
      for (value_id v : g_->node(n).implicit_inputs) take(v);  // what its subgraphs use from outside
    }
    return r;
  }
  /// Values produced inside the view and used outside it or as graph outputs, in production order.
  [[nodiscard]] std::vector<value_id> outputs() const {
    std::vector<value_id> r;
    for (node_id n : nodes())
      for (value_id v : g_->node(n).outputs) {
        if (v == no_id) continue;
        const auto& rec = g_->value(v);
        bool outside = rec.is_graph_output;
        for (node_id c : rec.consumers) outside = outside || !contains(c);
        if (outside) r.push_back(v);
      }
    return r;
  }

 private:
  const G* g_;
  std::shared_ptr<const std::vector<bool>> keep_;
};

}  // namespace epstack
