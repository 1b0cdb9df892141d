#pragma once
/// @file plan.hpp
/// @brief The result of partitioning, for users to read: per node, the provider and partition that took it; per
/// provider, its partitions; the nodes that fell back to the CPU provider and why; the groups that were refused or
/// split. Printed as a table (`to_table`) or drawn as Graphviz DOT (`to_dot`).

#include <epstack/provider/compute.hpp>
#include <epstack/detail/cat.hpp>
#include <epstack/ir/graph.hpp>

#include <cstddef>
#include <iomanip>
#include <map>
#include <memory>
#include <sstream>
#include <string_view>
#include <string>
#include <vector>

namespace epstack {

/// "No provider" / "no partition".
inline constexpr std::size_t no_index = static_cast<std::size_t>(-1);

/// @brief The plan of one graph (the main graph or a subgraph of a control-flow node).
struct graph_plan {
  struct node_entry {
    std::size_t provider = no_index;   ///< index into partition_plan::providers
    std::size_t partition = no_index;  ///< index into `partitions`
    std::string fallback_reason;       ///< set when the node went to the CPU provider though others came first
  };
  struct refused_group {
    std::size_t provider = no_index;
    std::string meta_name;
    std::vector<node_id> nodes;
    std::string reason;
    std::size_t pieces = 0;  ///< > 0 when the group was split into that many acyclic pieces instead
  };
  /// Where more than one provider could take a group: each candidate's cost and the provider chosen.
  struct placement_choice {
    std::string group;                                  ///< the claimed group's meta name, or the node's description
    std::vector<node_id> nodes;
    std::vector<std::pair<std::size_t, double>> costs;  ///< (provider, microseconds per run; negative: unknown)
    std::size_t chosen = no_index;
    std::string basis;                                  ///< "estimate" or "measure"
    std::string note;                                   ///< why the choice is not the cheapest, when it is not
  };
  struct subgraph_ref {
    node_id node = no_id;
    std::string attribute;
    std::size_t index = 0;  ///< position in a GRAPHS attribute (0 for GRAPH)
    std::unique_ptr<graph_plan> plan;
  };

  const graph* g = nullptr;
  std::vector<std::size_t> rank;           ///< each node's position in a topological order of the whole graph
  std::vector<node_entry> nodes;           ///< one per node of `g`
  std::vector<partition> partitions;       ///< in the order they were formed
  std::vector<std::size_t> partition_provider;  ///< provider index of each partition
  std::vector<std::size_t> execution_order;     ///< partitions in an order where producers run first
  std::vector<refused_group> refused;
  std::vector<placement_choice> choices;  ///< placement by cost, in the order decided
  /// Choices made before the CPU provider's rewrites (the blocked layout, the fused products) changed the nodes they
  /// gave it (the graph was partitioned again after each); their node ids are those of the graph before that rewrite,
  /// so they are shown, not used.
  std::vector<placement_choice> choices_before_layout;
  std::vector<subgraph_ref> subgraphs;
};

/// @brief The whole model's plan.
struct partition_plan {
  std::vector<std::string> providers;  ///< type keys, in priority order
  std::size_t cpu_provider = no_index; ///< index of the CPU provider (the fallback)
  graph_plan main;
  /// Per provider: whether it left its groups to runtime-free providers for its thread runtime
  /// (partition_options::runtime_share); empty when none did.
  std::vector<bool> yielded;

  /// Nodes of every graph that went to the CPU provider although another provider came first in the stack.
  [[nodiscard]] std::size_t fallback_count() const { return count_fallbacks(main); }

  /// @brief Every graph's plan: the main graph's first, then each subgraph's, depth first in `subgraphs` order. A
  /// session numbers the partitions of the whole model in this order (the main graph's, then the first subgraph's,
  /// ...): its compiled functions are one per partition, in that order.
  [[nodiscard]] std::vector<const graph_plan*> graph_plans() const {
    std::vector<const graph_plan*> r;
    collect(main, r);
    return r;
  }
  [[nodiscard]] std::vector<graph_plan*> graph_plans() {
    std::vector<graph_plan*> r;
    collect(main, r);
    return r;
  }

  /// @brief A readable table: providers with their partitions and node counts, then every node's placement, the
  /// fallbacks with their reasons, and refused or split groups.
  [[nodiscard]] std::string to_table() const {
    std::ostringstream os;
    write_table(os, main, "");
    return os.str();
  }

  /// @brief Graphviz DOT: one cluster per fused partition, nodes coloured by provider, edges labelled with values.
  [[nodiscard]] std::string to_dot() const {
    std::ostringstream os;
    os << "digraph partition_plan {\n  rankdir=TB;\n  node [shape=box, style=filled, fontname=\"Helvetica\"];\n";
    static constexpr const char* colours[] = {"#8ecae6", "#ffb703", "#b5e48c", "#f4a261", "#cdb4db", "#e9edc9"};
    os << "  subgraph cluster_legend { label=\"providers\";\n";
    for (std::size_t p = 0; p < providers.size(); ++p)
      os << "    legend" << p << " [label=\"" << escape(providers[p]) << "\", fillcolor=\"" << colours[p % 6] << "\"];\n";
    os << "  }\n";
    const auto& gp = main;
    const auto& g = *gp.g;
    const auto id = [](node_id n) { return "n" + std::to_string(n); };
    for (std::size_t k = 0; k < gp.partitions.size(); ++k) {
      const auto& part = gp.partitions[k];
      const bool cluster = part.is_fused();
      if (cluster) os << "  subgraph cluster_p" << k << " { label=\"" << escape(part.name) << "\"; style=rounded;\n";
      for (node_id n : part.nodes)
        os << (cluster ? "    " : "  ") << id(n) << " [label=\"" << escape(g.node(n).op_type) << "\\n"
           << escape(g.node(n).name) << "\", fillcolor=\"" << colours[gp.partition_provider[k] % 6] << "\"];\n";
      if (cluster) os << "  }\n";
    }
    for (node_id n = 0; n < g.node_count(); ++n)
      if (gp.nodes[n].partition == no_index) os << "  " << id(n) << " [label=\"" << escape(g.node(n).op_type) << "\", fillcolor=white];\n";
    for (node_id n = 0; n < g.node_count(); ++n)
      for (std::size_t f : g.out_flows(n))
        os << "  " << id(n) << " -> " << id(g.flows()[f].to) << " [label=\"" << escape(g.value(g.flows()[f].value).name)
           << "\", fontsize=9];\n";
    os << "}\n";
    return os.str();
  }

 private:
  template <class GP, class Out>
  static void collect(GP& gp, std::vector<Out*>& r) {
    r.push_back(&gp);
    for (const auto& s : gp.subgraphs) collect(*s.plan, r);
  }
  static std::string escape(const std::string& s) {
    std::string r;
    for (char c : s) {
      if (c == '"' || c == '\\') r += '\\';
      r += c;
    }
    return r;
  }
  static std::size_t count_fallbacks(const graph_plan& gp) {
    std::size_t n = 0;
    for (const auto& e : gp.nodes) n += e.fallback_reason.empty() ? 0 : 1;
    for (const auto& s : gp.subgraphs) n += count_fallbacks(*s.plan);
    return n;
  }
  void write_table(std::ostringstream& os, const graph_plan& gp, const std::string& indent) const {
    const auto& g = *gp.g;
    os << indent << "graph '" << g.name() << "': " << g.node_count() << " nodes, " << gp.partitions.size()
       << " partitions\n";
    for (std::size_t p = 0; p < providers.size(); ++p) {
      std::size_t parts = 0, fused = 0, nodes = 0;
      for (std::size_t k = 0; k < gp.partitions.size(); ++k)
        if (gp.partition_provider[k] == p) {
          ++parts;
          fused += gp.partitions[k].is_fused() ? 1 : 0;
          nodes += gp.partitions[k].nodes.size();
        }
      os << indent << "  " << providers[p] << ": " << nodes << " nodes in " << parts << " partitions (" << fused
         << " fused)\n";
    }
    for (std::size_t k = 0; k < gp.partitions.size(); ++k) {
      const auto& part = gp.partitions[k];
      if (!part.is_fused()) continue;
      os << indent << "  partition " << part.name << " [" << providers[gp.partition_provider[k]] << "]: "
         << part.nodes.size() << " nodes, " << part.inputs.size() << " inputs, " << part.outputs.size() << " outputs\n";
    }
    os << indent << "  node placement:\n";
    for (node_id n = 0; n < g.node_count(); ++n) {
      const auto& e = gp.nodes[n];
      os << indent << "    " << g.describe(n) << " -> "
         << (e.provider == no_index ? std::string("(unassigned)") : providers[e.provider]);
      if (e.partition != no_index && gp.partitions[e.partition].is_fused()) os << " in " << gp.partitions[e.partition].name;
      if (!e.fallback_reason.empty()) os << "  [fallback: " << e.fallback_reason << "]";
      os << "\n";
    }
    for (const auto& r : gp.refused) {
      os << indent << "  " << (r.pieces ? "split" : "refused") << " group '" << r.meta_name << "' of "
         << providers[r.provider] << " (" << r.nodes.size() << " nodes): " << r.reason;
      if (r.pieces) os << "; taken as " << r.pieces << " acyclic pieces";
      os << "\n";
    }
    const auto write_choice = [&](const graph_plan::placement_choice& c, std::string_view when) {
      os << indent << "  placement of '" << c.group << "' (" << c.nodes.size() << " nodes" << when << ", by " << c.basis
         << "):";
      for (const auto& [p, us] : c.costs) {
        os << " " << providers[p] << " ";
        if (us < 0) os << "?";
        else os << std::fixed << std::setprecision(1) << us << std::defaultfloat << " us";
      }
      os << " -> " << (c.chosen == no_index ? std::string("(none)") : providers[c.chosen]);
      if (!c.note.empty()) os << " (" << c.note << ")";
      os << "\n";
    };
    for (const auto& c : gp.choices_before_layout) write_choice(c, " before the CPU provider's rewrites");
    for (const auto& c : gp.choices) write_choice(c, "");
    for (const auto& s : gp.subgraphs) {
      os << indent << "  subgraph of " << g.describe(s.node) << " attribute '" << s.attribute << "'"
         << (s.index ? "[" + std::to_string(s.index) + "]" : std::string()) << ":\n";
      write_table(os, *s.plan, indent + "    ");
    }
  }
};

}  // namespace epstack
