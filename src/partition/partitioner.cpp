// The partitioner: ONNX Runtime's rules over a provider stack, checked acyclic (partitioner.hpp).
#include <epstack/partition/partitioner.hpp>

#include <epstack/detail/cat.hpp>
#include <epstack/ir/graph_algorithms.hpp>
#include <epstack/ir/graph_view.hpp>
#include <epstack/provider/cost_model.hpp>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>

#include <algorithm>
#include <iterator>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace epstack {

namespace detail {

// Units of the quotient graph: each partition is one unit, each unassigned node its own.
std::vector<std::size_t> units_of(const graph_plan& gp, std::size_t& count) {
  std::vector<std::size_t> unit(gp.nodes.size());
  count = gp.partitions.size();
  for (node_id n = 0; n < gp.nodes.size(); ++n) unit[n] = gp.nodes[n].partition != no_index ? gp.nodes[n].partition : count++;
  return unit;
}

// The quotient graph: one vertex per unit, an edge wherever a flow crosses from one unit to another.
using quotient_graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
quotient_graph quotient_of(const graph_plan& gp, const std::vector<std::size_t>& unit, std::size_t count) {
  quotient_graph q(count);
  const auto& flows = gp.g->flows();
  for (node_id n = 0; n < gp.g->node_count(); ++n)
    for (std::size_t f : gp.g->out_flows(n)) {
      const auto a = unit[n], b = unit[flows[f].to];
      if (a != b) boost::add_edge(a, b, q);
    }
  return q;
}

// True when contracting the current partitions plus `group` (as one more unit) leaves the graph acyclic.
bool contraction_is_acyclic(const graph_plan& gp, const std::vector<node_id>& group) {
  std::size_t count = 0;
  auto unit = units_of(gp, count);
  const std::size_t gu = count++;
  for (node_id n : group) unit[n] = gu;
  return find_cycle(quotient_of(gp, unit, count)).empty();
}

// Partitions in an order where every producer runs before its consumers.
std::vector<std::size_t> partition_order(const graph_plan& gp) {
  std::size_t count = 0;
  const auto unit = units_of(gp, count);
  std::vector<std::size_t> order;
  const auto q = quotient_of(gp, unit, count);
  boost::topological_sort(q, std::back_inserter(order));
  std::vector<std::size_t> r;
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    if (*it < gp.partitions.size()) r.push_back(*it);
  return r;
}

Result<std::unique_ptr<graph_plan>> make_graph_plan(const graph& g) {
  auto gp = std::make_unique<graph_plan>();
  gp->g = &g;
  gp->nodes.resize(g.node_count());
  EPSTACK_ASSIGN_OR_RETURN(auto order, topological_order(g));
  gp->rank.resize(g.node_count());
  for (std::size_t i = 0; i < order.size(); ++i) gp->rank[order[i]] = i;
  for (node_id n = 0; n < g.node_count(); ++n)
    for (const auto& a : g.node(n).attributes) {
      if (const auto* sg = std::get_if<subgraph>(&a.value); sg && *sg) {
        EPSTACK_ASSIGN_OR_RETURN(auto sub, make_graph_plan(**sg));
        gp->subgraphs.push_back({n, a.name, 0, std::move(sub)});
      }
      if (const auto* sgs = std::get_if<std::vector<subgraph>>(&a.value))
        for (std::size_t i = 0; i < sgs->size(); ++i)
          if ((*sgs)[i]) {
            EPSTACK_ASSIGN_OR_RETURN(auto sub, make_graph_plan(*(*sgs)[i]));
            gp->subgraphs.push_back({n, a.name, i, std::move(sub)});
          }
    }
  return gp;
}

// The nodes in the whole graph's topological order (dependencies through nodes outside the set count).
std::vector<node_id> in_topological_order(const graph_plan& gp, std::vector<node_id> nodes) {
  std::sort(nodes.begin(), nodes.end(), [&](node_id a, node_id b) { return gp.rank[a] < gp.rank[b]; });
  return nodes;
}

Status resolve_boundary(const graph& g, partition& part, const std::string& provider) {
  if (!part.meta) {
    const auto& nd = g.node(part.nodes.front());
    part.inputs.assign(nd.inputs.begin(), nd.inputs.end());
    part.outputs.assign(nd.outputs.begin(), nd.outputs.end());
    return {};
  }
  std::vector<bool> keep(g.node_count());
  for (auto n : part.nodes) keep[n] = true;
  graph_view<graph> v(g, std::move(keep));
  const auto resolve = [&](const std::vector<std::string>& names, std::vector<value_id>& out) -> Status {
    for (const auto& name : names) {
      const auto id = g.find_value(name);
      if (id == no_id)
        return Status(errc::ep_fail, cat("provider ", provider, ": meta definition '", part.meta->name,
                                         "' names value '", name, "', which graph '", g.name(), "' does not have"));
      out.push_back(id);
    }
    return {};
  };
  if (part.meta->inputs.empty()) part.inputs = v.inputs();
  else EPSTACK_RETURN_IF_ERROR(resolve(part.meta->inputs, part.inputs));
  if (part.meta->outputs.empty()) part.outputs = v.outputs();
  else EPSTACK_RETURN_IF_ERROR(resolve(part.meta->outputs, part.outputs));
  part.meta->inputs.clear();
  part.meta->outputs.clear();
  for (auto v2 : part.inputs) part.meta->inputs.push_back(g.value(v2).name);
  for (auto v2 : part.outputs) part.meta->outputs.push_back(g.value(v2).name);
  return {};
}

struct partition_state {
  std::span<const provider_binding> providers;
  std::size_t fused_counter = 0;
  const partition_options* options = nullptr;
  /// Per graph, the share of its arithmetic in products with symbolic rows (symbolic_products_share), computed once.
  std::map<const graph*, double> symbolic_share;
  /// Per provider: leaves its contested groups to the cheapest runtime-free provider (runtime_gain).
  std::vector<bool> yields;

  double symbolic_share_of(const graph& g) {
    const auto [it, fresh] = symbolic_share.try_emplace(&g, 0.0);
    if (fresh) {
      std::vector<node_id> all(g.node_count());
      std::iota(all.begin(), all.end(), node_id{0});
      it->second = symbolic_products_share(g, all);
    }
    return it->second;
  }
};

// A capability as a partition with its boundary resolved, for timing a candidate placement (not added to the plan).
Result<partition> candidate_partition(const graph& g, const graph_plan& gp, const capability& cap, const std::string& key) {
  partition part;
  part.g = &g;
  part.nodes = in_topological_order(gp, cap.nodes);
  part.meta = cap.meta;
  part.name = cat(key, "_placement_candidate");
  EPSTACK_RETURN_IF_ERROR(resolve_boundary(g, part, key));
  return part;
}

// The sum of provider `prov`'s estimates of `caps`; negative when it has none or one is unknown.
double estimated_cost(const provider_binding& prov, const graph& g, const std::vector<capability>& caps) {
  if (!prov.estimate_cost) return -1;
  double total = 0;
  for (const auto& c : caps) {
    const double us = prov.estimate_cost(g, c.nodes);
    if (!(us >= 0)) return -1;
    total += us;
  }
  return total;
}

// The cost of provider p running `caps` (its capabilities over the contested nodes): measured when the policy says so
// and the timer can, else the sum of the provider's estimates; negative when unknown.
double cost_of(const graph_plan& gp, std::size_t p, const std::vector<capability>& caps, const partition_state& st,
               std::string& basis) {
  const auto& g = *gp.g;
  const auto& prov = st.providers[p];
  if (st.options->placement == placement_policy::measure && st.options->measure) {
    std::vector<partition> parts;
    bool ok = true;
    for (const auto& c : caps) {
      auto part = candidate_partition(g, gp, c, std::string(prov.type_key));
      if (!part) {
        ok = false;
        break;
      }
      parts.push_back(std::move(*part));
    }
    std::sort(parts.begin(), parts.end(), [&](const partition& a, const partition& b) {
      return gp.rank[a.nodes.front()] < gp.rank[b.nodes.front()];
    });
    if (ok) {
      const double us = st.options->measure(p, parts);
      if (us >= 0) {
        basis = "measure";
        return us;
      }
    }
  }
  const double total = estimated_cost(prov, g, caps);
  if (total >= 0 && basis.empty()) basis = "estimate";
  return total;
}

// Placement by cost: whether provider p, which claims `cap`, leaves it for a later provider of the stack that can run
// every node of it (alone or in its own groups) for less. Records the choice in the plan either way.
bool left_for_cheaper(graph_plan& gp, std::size_t p, const capability& cap, partition_state& st) {
  const auto& g = *gp.g;
  const auto& opt = *st.options;
  if (opt.placement == placement_policy::priority || p + 1 >= st.providers.size()) return false;
  // Only providers that can be priced take part: those with an estimate, or any under a timer.
  const bool timed = opt.placement == placement_policy::measure && static_cast<bool>(opt.measure);
  const auto priced = [&](std::size_t q) { return timed || static_cast<bool>(st.providers[q].estimate_cost); };
  if (!priced(p)) return false;
  graph_plan::placement_choice choice;
  choice.group = cap.meta ? cap.meta->name : g.describe(cap.nodes.front());
  choice.nodes = cap.nodes;
  // The contestants: p, and each later provider that runs every node of the group (in groups of its own).
  std::vector<std::pair<std::size_t, std::vector<capability>>> rivals;
  rivals.emplace_back(p, std::vector<capability>{cap});
  std::vector<bool> mask(g.node_count());
  for (node_id n : cap.nodes) mask[n] = true;
  for (std::size_t q = p + 1; q < st.providers.size(); ++q) {
    if (!priced(q)) continue;
    graph_view<graph> only(g, mask);
    auto theirs = st.providers[q].get_capability(only);
    std::vector<bool> covered(g.node_count());
    bool valid = true;
    for (const auto& c : theirs)
      for (node_id n : c.nodes) {
        if (n >= g.node_count() || !mask[n]) valid = false;
        else covered[n] = true;
      }
    if (!valid || theirs.empty()) continue;
    if (!std::all_of(cap.nodes.begin(), cap.nodes.end(), [&](node_id n) { return covered[n]; })) continue;
    rivals.emplace_back(q, std::move(theirs));
  }
  if (rivals.size() < 2) return false;  // no other provider runs all of it: not contested
  // Each contestant's cost (p's first): measured or estimated (cost_of; the plan's basis "measure" if any was).
  std::vector<double> costs;
  for (const auto& [q, caps] : rivals) costs.push_back(cost_of(gp, q, caps, st, choice.basis));
  // Estimates price symbolic dimensions at 1 (estimate_microseconds): they stand where products with symbolic rows
  // are at most a tenth of the graph's work (their speed depends on the rows), and the plan says so. Where such
  // products weigh more (a transformer with a symbolic batch and sequence), every contestant is priced with the
  // symbolic dimensions at 1, 4, 16, 64 and 256 (the row counts of the profiles' products, for one such dimension),
  // and the costs kept are those of the value where p fares best against the cheapest other: so a later provider takes
  // the group only if it is cheaper by the margin at every batch, and p keeps it against a runtime-free provider
  // (below, the thread runtime's test) only if it is clearly cheaper at some. Unknown even so: the stack's order.
  bool at_one = false, swept = false;
  if (costs[0] >= 0 && choice.basis == "estimate" &&
      std::any_of(cap.nodes.begin(), cap.nodes.end(), [&](node_id n) { return !work_of(g, n).known; })) {
    const double share = st.symbolic_share_of(g);
    at_one = share >= 0 && share <= 0.1;
    if (!at_one) {
      costs[0] = -1;
      double best_edge = 0;
      bool first = true;
      for (const std::int64_t at : {1, 4, 16, 64, 256}) {
        const symbolic_pricing pricing(at);
        std::vector<double> c;
        for (const auto& [q, caps] : rivals) c.push_back(estimated_cost(st.providers[q], g, caps));
        double others = -1;
        for (std::size_t i = 1; i < c.size(); ++i)
          if (c[i] >= 0 && (others < 0 || c[i] < others)) others = c[i];
        if (!(c[0] > 0) || !(others >= 0)) {
          costs[0] = -1;
          break;
        }
        const double edge = (others - c[0]) / others;  // what p saves against the cheapest other, as a fraction
        if (first || edge > best_edge) {
          first = false;
          best_edge = edge;
          costs = std::move(c);
        }
      }
      swept = costs[0] >= 0;
    }
  }
  const double mine = costs[0];
  double best = mine;
  std::size_t best_p = p;
  for (std::size_t i = 0; i < rivals.size(); ++i) {
    choice.costs.emplace_back(rivals[i].first, costs[i]);
    if (i == 0) continue;
    const std::size_t q = rivals[i].first;
    const double cost = costs[i];
    // A provider that yields (its thread runtime is not worth what its partitions save) leaves the group to the
    // cheapest runtime-free one; otherwise a later provider must be cheaper by the margin.
    const bool yield_to = !st.yields.empty() && st.yields[p] && !st.providers[q].intra_op_runtime;
    const bool takes = yield_to || cost < mine * (1.0 - opt.placement_margin);
    if (cost >= 0 && takes && (best_p == p || cost < best)) {
      best = cost;
      best_p = q;
    }
  }
  if (mine < 0) {
    // Nothing to compare against (a shape the estimate needs is unknown): the stack's order stands, and the plan says
    // why, so that a user can fix the dims (free dimension overrides) or measure instead.
    choice.basis = "estimate, unknown shapes: the stack's order";
    choice.chosen = p;
    gp.choices.push_back(std::move(choice));
    return false;
  }
  if (at_one) choice.basis = "estimate, symbolic dims at 1";
  if (swept) choice.basis = cat("estimate, symbolic dims at 1 to 256, shown where ", st.providers[p].type_key, " fares best");
  if (best_p != p && !(best < mine * (1.0 - opt.placement_margin)))
    choice.note = cat(st.providers[p].type_key, "'s thread runtime is not worth what its partitions save");
  choice.chosen = best_p;
  gp.choices.push_back(std::move(choice));
  return best_p != p;
}

Status add_partition(graph_plan& gp, std::size_t p, std::vector<node_id> nodes, std::optional<meta_def> meta,
                            partition_state& st) {
  const auto& g = *gp.g;
  partition part;
  part.g = &g;
  part.nodes = in_topological_order(gp, std::move(nodes));
  part.meta = std::move(meta);
  const std::string key(st.providers[p].type_key);
  part.name = part.meta ? cat(key, "_", part.meta->name, "_", std::to_string(st.fused_counter++))
                        : (g.node(part.nodes.front()).name.empty() ? cat(key, "_node_", std::to_string(part.nodes.front()))
                                                                   : g.node(part.nodes.front()).name);
  EPSTACK_RETURN_IF_ERROR(resolve_boundary(g, part, key));
  const std::size_t k = gp.partitions.size();
  gp.partitions.push_back(std::move(part));
  gp.partition_provider.push_back(p);
  for (node_id n : gp.partitions[k].nodes) gp.nodes[n] = {p, k, {}};
  return {};
}

// Removes single-node partition k (a node a group of the same provider now takes); indices above k shift down.
void drop_single(graph_plan& gp, std::size_t k) {
  gp.partitions.erase(gp.partitions.begin() + static_cast<std::ptrdiff_t>(k));
  gp.partition_provider.erase(gp.partition_provider.begin() + static_cast<std::ptrdiff_t>(k));
  for (auto& e : gp.nodes) {
    if (e.partition == k) e = {};
    else if (e.partition != no_index && e.partition > k) --e.partition;
  }
}

Status take_group(graph_plan& gp, std::size_t p, capability cap, partition_state& st) {
  const auto& g = *gp.g;
  const std::string key(st.providers[p].type_key);
  for (node_id n : cap.nodes) {
    const auto& e = gp.nodes[n];
    if (e.provider != no_index && (e.provider != p || gp.partitions[e.partition].is_fused())) {
      gp.refused.push_back({p, cap.meta->name, cap.nodes,
                            cat("node ", g.describe(n), " is already assigned to ", st.providers[e.provider].type_key,
                                e.provider == p ? " in another group" : ""),
                            0});
      return {};
    }
  }
  // Nodes this provider took singly in the same round join the group.
  for (node_id n : cap.nodes)
    if (gp.nodes[n].provider == p) drop_single(gp, gp.nodes[n].partition);
  if (contraction_is_acyclic(gp, cap.nodes)) return add_partition(gp, p, cap.nodes, std::move(cap.meta), st);
  // The group would make the graph cyclic: take it as maximal acyclic pieces, walking it in topological order.
  const auto ordered = in_topological_order(gp, cap.nodes);
  std::vector<std::vector<node_id>> pieces;
  std::vector<node_id> current;
  std::vector<bool> placed(g.node_count());
  for (std::size_t i = 0; i < ordered.size(); ++i) {
    if (placed[ordered[i]]) continue;
    current = {ordered[i]};
    placed[ordered[i]] = true;
    for (std::size_t j = i + 1; j < ordered.size(); ++j) {
      if (placed[ordered[j]]) continue;
      current.push_back(ordered[j]);
      if (contraction_is_acyclic(gp, current)) placed[ordered[j]] = true;
      else current.pop_back();
    }
    pieces.push_back(current);
    // Reserve the piece now so later pieces are checked against it.
    meta_def m = *cap.meta;
    m.name = cat(cap.meta->name, "_part", std::to_string(pieces.size() - 1));
    m.inputs.clear();
    m.outputs.clear();
    EPSTACK_RETURN_IF_ERROR(add_partition(gp, p, current, std::move(m), st));
  }
  gp.refused.push_back({p, cap.meta->name, cap.nodes, "fused whole, it would make the graph cyclic", pieces.size()});
  return {};
}

Status partition_graph_for(graph_plan& gp, std::size_t p, partition_state& st) {
  for (auto& s : gp.subgraphs) EPSTACK_RETURN_IF_ERROR(partition_graph_for(*s.plan, p, st));
  const auto& g = *gp.g;
  const std::string key(st.providers[p].type_key);
  std::vector<bool> unassigned(g.node_count());
  for (node_id n = 0; n < g.node_count(); ++n) unassigned[n] = gp.nodes[n].provider == no_index;
  graph_view<graph> view(g, std::move(unassigned));
  auto caps = st.providers[p].get_capability(view);
  for (auto& cap : caps) {
    if (cap.nodes.empty()) return Status(errc::ep_fail, cat("provider ", key, " returned an empty capability"));
    for (node_id n : cap.nodes)
      if (n >= g.node_count())
        return Status(errc::ep_fail, cat("provider ", key, " returned node ", std::to_string(n), ", but graph '", g.name(),
                                         "' has ", std::to_string(g.node_count()), " nodes"));
    if (!cap.meta) {
      if (cap.nodes.size() != 1)
        return Status(errc::ep_fail, cat("provider ", key, " returned a capability of ", std::to_string(cap.nodes.size()),
                                         " nodes without a meta definition (a single node, or a group with one)"));
      if (gp.nodes[cap.nodes[0]].provider == no_index && !left_for_cheaper(gp, p, cap, st))
        EPSTACK_RETURN_IF_ERROR(add_partition(gp, p, cap.nodes, std::nullopt, st));
      continue;
    }
    if (std::all_of(cap.nodes.begin(), cap.nodes.end(), [&](node_id n) { return gp.nodes[n].provider == no_index; }) &&
        left_for_cheaper(gp, p, cap, st))
      continue;
    EPSTACK_RETURN_IF_ERROR(take_group(gp, p, std::move(cap), st));
  }
  return {};
}

void note_fallbacks(graph_plan& gp, std::size_t cpu, std::span<const provider_binding> providers) {
  for (auto& s : gp.subgraphs) note_fallbacks(*s.plan, cpu, providers);
  if (cpu == no_index || providers.size() < 2) return;
  for (node_id n = 0; n < gp.nodes.size(); ++n) {
    auto& e = gp.nodes[n];
    if (e.provider != cpu) continue;
    std::string reason;
    for (const auto& r : gp.refused)
      if (r.pieces == 0 && std::find(r.nodes.begin(), r.nodes.end(), n) != r.nodes.end())
        reason = cat("group '", r.meta_name, "' of ", providers[r.provider].type_key, " was refused: ", r.reason);
    // A node a provider claimed and left to the CPU provider by cost: the choice says why.
    for (const auto& c : gp.choices)
      if (reason.empty() && c.chosen == cpu && std::find(c.nodes.begin(), c.nodes.end(), n) != c.nodes.end())
        reason = cat("placed by ", c.basis, " ('", c.group, "')", c.note.empty() ? "" : cat(", ", c.note));
    for (std::size_t p = 0; p < providers.size() && reason.empty(); ++p)
      if (p != cpu && providers[p].why_not)
        if (auto why = providers[p].why_not(*gp.g, n); !why.empty()) reason = cat(providers[p].type_key, ": ", why);
    e.fallback_reason = reason.empty() ? std::string("no provider before the CPU provider claimed it") : reason;
  }
}

Status check_all_assigned(const graph_plan& gp, std::span<const provider_binding> providers) {
  for (const auto& s : gp.subgraphs) EPSTACK_RETURN_IF_ERROR(check_all_assigned(*s.plan, providers));
  std::string missing;
  for (node_id n = 0; n < gp.nodes.size(); ++n)
    if (gp.nodes[n].provider == no_index) {
      const auto& nd = gp.g->node(n);
      missing += cat(missing.empty() ? "" : ", ", gp.g->describe(n), nd.domain.empty() ? "" : cat(" domain '", nd.domain, "'"));
      // Why each provider that can say so did not take it: a provider that has the operator but refused this node
      // is the usual cause.
      std::string why;
      for (const auto& r : gp.refused)
        if (std::find(r.nodes.begin(), r.nodes.end(), n) != r.nodes.end())
          why += cat(why.empty() ? "" : "; ", providers[r.provider].type_key, " refused its group: ", r.reason);
      for (const auto& p : providers)
        if (p.why_not)
          if (auto w = p.why_not(*gp.g, n); !w.empty()) why += cat(why.empty() ? "" : "; ", p.type_key, ": ", w);
      if (!why.empty()) missing += cat(" [", why, "]");
    }
  if (missing.empty()) return {};
  std::string stack;
  for (const auto& p : providers) stack += cat(stack.empty() ? "" : ", ", p.type_key);
  return Status(errc::not_implemented, cat("graph '", gp.g->name(), "': no provider of the stack [", stack,
                                           "] can run: ", missing));
}

void cpu_nodes(const graph_plan& gp, std::size_t cpu, std::string& out) {
  for (const auto& s : gp.subgraphs) cpu_nodes(*s.plan, cpu, out);
  for (node_id n = 0; n < gp.nodes.size(); ++n)
    if (gp.nodes[n].provider == cpu) out += cat(out.empty() ? "" : ", ", gp.g->describe(n));
}

// For provider p (which brings a thread runtime): whether runtime-free providers could run every node of its, the
// groups it won by placement choices where they were priced. Adds to `mine` what p's groups cost on p, to `alt` what
// they cost on the cheapest runtime-free provider, and to `total` every partition's cost on its provider, over gp
// and its subgraphs; false when a node of p's was not contested so, or a cost is unknown.
bool runtime_free_alternative(const graph_plan& gp, std::size_t p, std::span<const provider_binding> providers,
                              double& mine, double& alt, double& total) {
  for (const auto& s : gp.subgraphs)
    if (!runtime_free_alternative(*s.plan, p, providers, mine, alt, total)) return false;
  const auto& g = *gp.g;
  std::vector<bool> covered(g.node_count());
  for (const auto& c : gp.choices) {
    if (c.chosen != p || c.costs.empty() || c.costs.front().first != p || !(c.costs.front().second >= 0)) continue;
    double best = -1;
    for (const auto& [q, us] : c.costs)
      if (q != p && !providers[q].intra_op_runtime && us >= 0 && (best < 0 || us < best)) best = us;
    if (best < 0) continue;
    mine += c.costs.front().second;
    alt += best;
    for (node_id n : c.nodes) covered[n] = true;
  }
  for (node_id n = 0; n < g.node_count(); ++n)
    if (gp.nodes[n].provider == p && !covered[n]) return false;
  for (std::size_t k = 0; k < gp.partitions.size(); ++k) {
    const auto& prov = providers[gp.partition_provider[k]];
    if (!prov.estimate_cost) return false;
    const double us = prov.estimate_cost(g, gp.partitions[k].nodes);
    if (!(us >= 0)) return false;
    total += us;
  }
  return true;
}

bool has_partitions(const graph_plan& gp, std::size_t p) {
  for (const auto& s : gp.subgraphs)
    if (has_partitions(*s.plan, p)) return true;
  return std::find(gp.partition_provider.begin(), gp.partition_provider.end(), p) != gp.partition_provider.end();
}

void order_all(graph_plan& gp) {
  for (auto& s : gp.subgraphs) order_all(*s.plan);
  gp.execution_order = partition_order(gp);
}

}  // namespace detail

std::optional<placement_policy> placement_policy_from(std::string_view name) noexcept {
  if (name == "priority") return placement_policy::priority;
  if (name == "estimate") return placement_policy::estimate;
  if (name == "measure") return placement_policy::measure;
  return std::nullopt;
}

std::string_view to_string(placement_policy p) noexcept {
  switch (p) {
    case placement_policy::priority: return "priority";
    case placement_policy::estimate: return "estimate";
    case placement_policy::measure: return "measure";
  }
  return "?";
}

/// @brief Partitions graph `g` over `providers` (priority order; the CPU provider, if present, is the fallback).
/// Errors: invalid_argument for an empty stack; ep_fail when a provider answers nonsense; not_implemented when a node
/// is left that no provider can run; fail when CPU fallback is disabled and nodes went to the CPU provider.
Result<partition_plan> partition_graph(const graph& g, std::span<const provider_binding> providers,
                                       const partition_options& options) {
  if (providers.empty()) return Status(errc::invalid_argument, "No provider specified");
  partition_plan plan;
  for (std::size_t p = 0; p < providers.size(); ++p) {
    plan.providers.emplace_back(providers[p].type_key);
    if (providers[p].type_key == cpu_provider_key) plan.cpu_provider = p;
  }
  const auto partition_all = [&](std::vector<bool> yields) -> Result<partition_plan> {
    partition_plan r;
    r.providers = plan.providers;
    r.cpu_provider = plan.cpu_provider;
    EPSTACK_ASSIGN_OR_RETURN(auto main_plan, detail::make_graph_plan(g));
    r.main = std::move(*main_plan);
    detail::partition_state st{providers, 0, &options, {}, std::move(yields)};
    for (std::size_t p = 0; p < providers.size(); ++p) EPSTACK_RETURN_IF_ERROR(detail::partition_graph_for(r.main, p, st));
    EPSTACK_RETURN_IF_ERROR(detail::check_all_assigned(r.main, providers));
    return r;
  };
  // A provider's thread runtime takes every loop of the run (the CPU provider's too), for better or worse (measured:
  // up to a quarter slower in some phases of this VM): a provider that brings one for a sliver of the graph (at most
  // `runtime_share` of its estimate) keeps it only when the sliver saves more than `runtime_gain` of the estimate
  // over the runtime-free providers that could run it; and whatever its share, only when its groups cost less than
  // those providers' by more than the placement margin (as a later provider must to take a group from an earlier
  // one): within the margin the estimates cannot tell the two apart, and the runtime-free plan runs on the session's
  // own threads, with no hand-off to another runtime's and no second set of threads spinning (mlp_b1: 5.2 ms of CPU
  // time a run on the CPU provider, 7.4 on oneDNN, for runs of 2.6 and 3.0 ms). Otherwise it leaves its groups, and
  // the plan is made again; the new plan stands only if the provider has then no partitions. Estimates only: measured
  // costs are another unit than the graph's estimate, and timing every candidate twice would spend the budget again.
  const bool may_yield = options.runtime_share > 0 && options.placement == placement_policy::estimate &&
                         !options.disable_cpu_fallback;
  const auto clear_of = [&](const partition_plan& r, const std::vector<bool>& yields) {
    for (std::size_t p = 0; p < providers.size(); ++p)
      if (yields[p] && detail::has_partitions(r.main, p)) return false;
    return true;
  };
  std::vector<bool> yields(providers.size());
  bool forced = false;
  if (may_yield && options.yield.size() == providers.size())
    for (std::size_t p = 0; p < providers.size(); ++p) forced = (yields[p] = options.yield[p] && providers[p].intra_op_runtime) || forced;
  if (forced) {
    auto r = partition_all(yields);
    if (r.has_value() && clear_of(*r, yields)) plan = std::move(*r);
    else forced = false;
  }
  if (!forced) {
    std::fill(yields.begin(), yields.end(), false);
    EPSTACK_ASSIGN_OR_RETURN(plan, partition_all(yields));
  }
  if (may_yield) {
    auto more = yields;
    bool any = false;
    for (std::size_t p = 0; p < providers.size(); ++p) {
      double mine = 0, alt = 0, total = 0;
      if (!yields[p] && providers[p].intra_op_runtime && detail::has_partitions(plan.main, p) &&
          detail::runtime_free_alternative(plan.main, p, providers, mine, alt, total) &&
          ((mine <= options.runtime_share * total && alt - mine <= options.runtime_gain * total) ||
           alt - mine <= options.placement_margin * alt))
        more[p] = any = true;
    }
    if (any) {
      auto again = partition_all(more);
      if (again.has_value() && clear_of(*again, more)) {
        plan = std::move(*again);
        yields = std::move(more);
      }
    }
  }
  if (std::find(yields.begin(), yields.end(), true) != yields.end()) plan.yielded = yields;
  detail::note_fallbacks(plan.main, plan.cpu_provider, providers);
  if (options.disable_cpu_fallback && plan.cpu_provider != no_index && providers.size() > 1) {
    std::string nodes;
    detail::cpu_nodes(plan.main, plan.cpu_provider, nodes);
    if (!nodes.empty())
      return Status(errc::fail, detail::cat("session.disable_cpu_ep_fallback is set, but these nodes are assigned to the "
                                            "CPU provider: ", nodes));
  }
  detail::order_all(plan.main);
  return plan;
}

}  // namespace epstack
