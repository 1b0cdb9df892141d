#pragma once
/// @file compute.hpp
/// @brief What providers compile to: a partition (one node, or a fused group of nodes) becomes a `compute_function`,
/// `const` and safe to call from many threads at once, that reads the partition's inputs and writes its outputs.

#include <epstack/capability.hpp>
#include <epstack/errors.hpp>
#include <epstack/graph.hpp>
#include <epstack/tensor.hpp>

#include <algorithm>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace epstack {

/// @brief A partition handed to a provider's `compile`: the nodes it took (in topological order), the graph they live
/// in, and its ordered boundary. A single-node partition has no meta definition; a fused one does.
struct partition {
  std::string name;              ///< fused: "<ProviderType>_<meta name>_<n>"; single: the node's name
  const graph* g = nullptr;      ///< the graph (or subgraph) holding the nodes
  std::vector<node_id> nodes;    ///< in topological order
  std::optional<meta_def> meta;  ///< set for fused partitions, with inputs and outputs filled in
  std::vector<value_id> inputs;  ///< values read from outside the partition, in meta order (or node input order)
  std::vector<value_id> outputs; ///< values produced for outside the partition, in meta order (or node output order)

  [[nodiscard]] bool is_fused() const noexcept { return meta.has_value(); }
};

/// @brief The inputs and outputs of one call of a compute function.
class compute_context {
 public:
  compute_context(std::span<const tensor> inputs, std::span<tensor> outputs) : inputs_(inputs), outputs_(outputs) {}

  [[nodiscard]] std::size_t input_count() const noexcept { return inputs_.size(); }
  [[nodiscard]] std::size_t output_count() const noexcept { return outputs_.size(); }
  /// Input i (an empty tensor for an omitted optional input).
  [[nodiscard]] const tensor& input(std::size_t i) const { return inputs_[i]; }
  /// Output i as the caller prepared it (empty when its shape was not known ahead).
  [[nodiscard]] tensor& output(std::size_t i) { return outputs_[i]; }
  /// @brief Output i with the given type and sizes: the prepared tensor when it matches, else a new one.
  tensor& allocate_output(std::size_t i, element_type type, std::span<const std::int64_t> sizes) {
    auto& t = outputs_[i];
    if (t.empty() || t.type() != type || !std::equal(sizes.begin(), sizes.end(), t.sizes().begin(), t.sizes().end()))
      t = tensor(type, sizes);
    return t;
  }

 private:
  std::span<const tensor> inputs_;
  std::span<tensor> outputs_;
};

/// A compiled partition: `const`, callable from many threads at once.
using compute_function = std::function<Status(compute_context&)>;

}  // namespace epstack
