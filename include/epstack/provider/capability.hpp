#pragma once
/// @file capability.hpp
/// @brief What a provider answers to `get_capability`: single nodes it can run, or groups of nodes it wants to fuse
/// into one partition (ONNX Runtime's `ComputeCapability` / `IndexedSubGraph`).

#include <epstack/ir/attribute.hpp>
#include <epstack/ir/graph.hpp>

#include <optional>
#include <string>
#include <vector>

namespace epstack {

/// @brief The definition of a fused node: its name, domain, version and ordered inputs and outputs (value names).
/// Empty inputs/outputs are computed by the partitioner from the group's boundary.
struct meta_def {
  std::string name;
  std::string domain = "ai.epstack.fused";
  int since_version = 1;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  attribute_list attributes;
};

/// @brief One capability: a single node (no meta definition) or a group to fuse (with one).
struct capability {
  std::vector<node_id> nodes;
  std::optional<meta_def> meta;

  [[nodiscard]] static capability single(node_id n) { return {{n}, std::nullopt}; }
  [[nodiscard]] static capability group(std::vector<node_id> nodes, meta_def m) { return {std::move(nodes), std::move(m)}; }
  [[nodiscard]] bool is_group() const noexcept { return meta.has_value(); }
};

}  // namespace epstack
