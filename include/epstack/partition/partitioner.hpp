#pragma once
/// @file partitioner.hpp
/// @brief Partitioning (ONNX Runtime's semantics, shared/spec/ort-behaviours.md "Partitioning") over a provider
/// stack: providers asked in priority order about the nodes still unassigned; single nodes taken first come first
/// served; groups taken whole or skipped; fused partitions named "<type>_<meta>_<n>", n unique model-wide; subgraphs of
/// control-flow nodes partitioned before their parent, for each provider in turn; and, checked here for every provider,
/// no fused group ever makes the graph cyclic (a group that would is split into acyclic pieces, and the plan says so).
///
/// The algorithm is runtime-typed and compiled once (src/partition/partitioner.cpp, library epstack::partition);
/// `partition_with` is the thin typed layer.

#include <epstack/partition/plan.hpp>
#include <epstack/provider/binding.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>

namespace epstack {

/// How the partitioner chooses where more than one provider of the stack could take the same nodes.
enum class placement_policy : std::uint8_t {
  priority,  ///< ONNX Runtime's: the first provider of the stack that claims a node takes it
  estimate,  ///< by the providers' cost estimates (`estimate_cost`); providers without one keep the priority order
  measure,   ///< by timing the candidates compiled on the graph's shapes (`partition_options::measure`); the estimates
             ///< where a candidate cannot be timed
};

/// `placement_policy` from its name ("priority", "estimate", "measure"); nullopt for another.
[[nodiscard]] std::optional<placement_policy> placement_policy_from(std::string_view name) noexcept;
[[nodiscard]] std::string_view to_string(placement_policy p) noexcept;

/// Times provider `provider` running `parts` (compiled, on the graph's shapes): microseconds per run, negative when it
/// cannot (unknown shapes, a compile failure, the time budget spent). The session supplies it for `measure`.
using placement_timer = std::function<double(std::size_t provider, std::span<const partition> parts)>;

/// Options of partitioning.
struct partition_options {
  /// ONNX Runtime's `session.disable_cpu_ep_fallback`: fail when nodes are left for the CPU provider while the stack
  /// has others.
  bool disable_cpu_fallback = false;
  /// Placement where providers compete for nodes (epstack's session option `epstack.placement`).
  placement_policy placement = placement_policy::estimate;
  /// For `measure`: the timer (without one, `measure` uses the estimates).
  placement_timer measure = {};
  /// A later provider takes a group from an earlier one only when it is cheaper by more than this fraction of the
  /// earlier one's cost (estimates are rough; ties keep the stack's order).
  double placement_margin = 0.10;
  /// Under `estimate` placement, a provider that brings a thread runtime of its own (`provider_binding::
  /// intra_op_runtime`, oneDNN's OpenMP), and whose every partition runtime-free providers could run, keeps its
  /// partitions only when they cost less than on those providers by more than `placement_margin` of theirs, and are
  /// more than `runtime_share` of the graph's estimated time or save more than `runtime_gain` of it: otherwise it
  /// leaves them (`partition_plan::yielded`), and the session runs on one set of threads, its own, as the stack
  /// without that provider does (the runtime follows the plan). A `runtime_share` of 0 turns this off; so does
  /// `disable_cpu_fallback`.
  double runtime_share = 0.05;
  double runtime_gain = 0.01;  ///< see runtime_share
  /// Providers that leave their groups from the start (a yield decided before a layout rewrite, kept after it); the
  /// plan is made without them again if one of them still gets partitions.
  std::vector<bool> yield;
};

/// @brief Partitions graph `g` over `providers` (priority order; the CPU provider, if present, is the fallback).
/// Errors: invalid_argument for an empty stack; ep_fail when a provider answers nonsense; not_implemented when a node
/// is left that no provider can run; fail when CPU fallback is disabled and nodes went to the CPU provider.
[[nodiscard]] Result<partition_plan> partition_graph(const graph& g, std::span<const provider_binding> providers,
                                                     const partition_options& options = {});

/// @brief Partitions `g` over a tuple of provider objects, in tuple order.
template <class... P>
[[nodiscard]] Result<partition_plan> partition_with(const graph& g, const std::tuple<P...>& providers,
                                                    const partition_options& options = {}) {
  static_assert((check_execution_provider<P>() && ...));
  const auto bindings = make_bindings(providers);
  return partition_graph(g, bindings, options);
}

}  // namespace epstack
