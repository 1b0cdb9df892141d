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

#include <span>
#include <tuple>

namespace epstack {

/// Options of partitioning.
struct partition_options {
  /// ONNX Runtime's `session.disable_cpu_ep_fallback`: fail when nodes are left for the CPU provider while the stack
  /// has others.
  bool disable_cpu_fallback = false;
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
