// get_capability of the oneDNN provider: maximal connected groups of supported nodes that keep the graph acyclic.
#include "support.hpp"

#include <epstack/ir/graph_algorithms.hpp>
#include <epstack/providers/dnnl.hpp>

#include <algorithm>
#include <numeric>
#include <set>

namespace epstack::dnnl_ep {

namespace {

/// Union-find over group ids.
struct groups {
  std::vector<std::size_t> parent;
  std::size_t make() {
    parent.push_back(parent.size());
    return parent.size() - 1;
  }
  std::size_t find(std::size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
};

constexpr std::size_t none = static_cast<std::size_t>(-1);

}  // namespace

/// Nodes are visited in topological order. `reach[n]` holds the groups from which a path reaches `n` after leaving the
/// group (through a node outside it); a node may join a group only when that group does not reach it that way, so no
/// group can ever be left and re-entered: every group stays convex and contracting the groups keeps the graph acyclic.
/// A node joins the group of its first producer it may join; the groups of its other producers are merged in when
/// neither group reaches the other from outside.
std::vector<capability> get_capability(const graph_view<graph>& v) {
  const graph& g = v.graph();
  auto order = topological_order(g);
  if (!order) return {};
  std::vector<bool> ok(g.node_count(), false);
  for (node_id n : v.nodes()) ok[n] = node_refusal(g, n).empty();

  groups gs;
  std::vector<std::size_t> group_of(g.node_count(), none);
  std::vector<std::set<std::size_t>> reach(g.node_count());  // raw group ids; compare through find
  std::vector<std::set<std::size_t>> group_reach;           // per root: union of its members' reach
  const auto reaches = [&](const std::set<std::size_t>& s, std::size_t root) {
    return std::any_of(s.begin(), s.end(), [&](std::size_t x) { return gs.find(x) == root; });
  };
  for (node_id n : *order) {
    const auto& nd = g.node(n);
    std::vector<node_id> producers;
    for (value_id in : nd.inputs)
      if (in != no_id && g.value(in).producer != no_id) producers.push_back(g.value(in).producer);
    for (value_id in : nd.implicit_inputs)
      if (in != no_id && g.value(in).producer != no_id) producers.push_back(g.value(in).producer);
    // What reaches n along each producer edge when n is not in the producer's group.
    const auto via = [&](node_id p) {
      std::set<std::size_t> s = reach[p];
      if (group_of[p] != none) s.insert(group_of[p]);
      return s;
    };
    std::size_t mine = none;
    if (ok[n]) {
      for (node_id p : producers) {
        if (group_of[p] == none) continue;
        const std::size_t cand = gs.find(group_of[p]);
        bool legal = true;
        for (node_id q : producers) {
          if (group_of[q] != none && gs.find(group_of[q]) == cand) {
            if (reaches(reach[q], cand)) legal = false;
          } else if (reaches(via(q), cand)) {
            legal = false;
          }
        }
        if (legal) {
          mine = cand;
          break;
        }
      }
      if (mine == none) {
        mine = gs.make();
        group_reach.emplace_back();
      }
      // Merge the other producers' groups when neither reaches the other from outside and n may join them.
      for (node_id p : producers) {
        if (group_of[p] == none) continue;
        const std::size_t other = gs.find(group_of[p]);
        if (other == mine) continue;
        bool legal = !reaches(group_reach[other], mine) && !reaches(group_reach[mine], other);
        for (node_id q : producers)
          if (group_of[q] == none || (gs.find(group_of[q]) != other && gs.find(group_of[q]) != mine))
            if (reaches(via(q), other) || reaches(via(q), mine)) legal = false;
        if (!legal) continue;
        gs.parent[other] = mine;
        group_reach[mine].insert(group_reach[other].begin(), group_reach[other].end());
      }
      group_of[n] = mine;
    }
    for (node_id p : producers) {
      const bool same = mine != none && group_of[p] != none && gs.find(group_of[p]) == mine;
      const auto s = same ? reach[p] : via(p);
      reach[n].insert(s.begin(), s.end());
    }
    if (mine != none) group_reach[mine].insert(reach[n].begin(), reach[n].end());
  }

  // Collect the groups in topological order of their first node.
  std::vector<std::vector<node_id>> members(gs.parent.size());
  for (node_id n : *order)
    if (group_of[n] != none) members[gs.find(group_of[n])].push_back(n);
  std::vector<capability> caps;
  std::size_t k = 0;
  for (auto& m : members) {
    if (m.empty()) continue;
    // An Erf joins only with its whole Gelu pattern.
    std::vector<node_id> keep;
    for (node_id n : m) {
      if (g.node(n).op_type == "Erf") {
        const auto gm = match_gelu(g, n);
        const bool whole = gm && std::all_of(gm->nodes.begin(), gm->nodes.end(), [&](node_id x) {
          return std::find(m.begin(), m.end(), x) != m.end();
        });
        if (!whole) continue;
      }
      keep.push_back(n);
    }
    if (keep.empty() || std::none_of(keep.begin(), keep.end(), [&](node_id n) { return is_heavy(g.node(n)); })) continue;
    meta_def md;
    md.name = "dnnl_" + std::to_string(k++);
    caps.push_back(capability::group(std::move(keep), std::move(md)));
  }
  return caps;
}

std::string why_not(const graph& g, node_id n) {
  std::string r = node_refusal(g, n);
  if (!r.empty()) return r;
  return "no group worth a oneDNN partition holds it (a group needs a convolution, matrix product, pooling, "
         "normalisation or softmax, and may not make the graph cyclic)";
}

}  // namespace epstack::dnnl_ep
