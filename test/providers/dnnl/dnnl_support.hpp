#pragma once
// What the oneDNN provider's test files share: the two stacks, the plan's oneDNN partitions and a node's provider, and a
// chain of 3x3 convolutions that the CPU provider's Winograd runs clearly cheaper.
#include <epstack/provider/cost_model.hpp>
#include <epstack/providers/cpu.hpp>
#include <epstack/providers/dnnl.hpp>
#include <epstack/runtime/session.hpp>
#include <epstack/testing/model_zoo.hpp>

#include "../../support/graphs.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace epstack::test::dnnl {

using dnnl_session = session<dnnl_provider, cpu_provider>;
using cpu_session = session<cpu_provider>;

/// Pins the placement estimates to the profiles of machine class `c` for a test's lifetime: tests of choices that
/// depend on the class (a classifier won by a microsecond) run alike on every machine.
struct pinned_machine_class {
  explicit pinned_machine_class(machine_class c) noexcept { set_machine_class(c); }
  ~pinned_machine_class() { set_machine_class(std::nullopt); }
  pinned_machine_class(const pinned_machine_class&) = delete;
  pinned_machine_class& operator=(const pinned_machine_class&) = delete;
};

/// The partitions of the main graph that went to the oneDNN provider.
inline std::vector<const partition*> dnnl_partitions(const dnnl_session& s) {
  const auto& plan = s.plan();
  std::vector<const partition*> r;
  for (std::size_t i = 0; i < plan.main.partitions.size(); ++i)
    if (plan.providers[plan.main.partition_provider[i]] == dnnl_provider::type_key) r.push_back(&plan.main.partitions[i]);
  return r;
}

inline std::string provider_of(const dnnl_session& s, std::string_view node_name) {
  const auto& plan = s.plan();
  const graph& g = *plan.main.g;
  for (node_id n = 0; n < g.node_count(); ++n)
    if (g.node(n).name == node_name) return plan.providers[plan.main.nodes[n].provider];
  return "(no such node)";
}
inline type_info f32(shape s) { return type_info::tensor_of(element_type::float32, std::move(s)); }

// Input x [1,64,28,28] -> `count` 3x3 convolutions of 64 channels, padded to keep the size (nodes prefix0, prefix1...,
// weights W0, W1... from seeds seed, seed + 1...) -> output y: what the CPU provider's Winograd runs clearly cheaper.
inline void add_conv3x3_chain(graph& g, const std::string& prefix, int count, std::uint64_t seed) {
  g.add_input("x", f32(shape{1, 64, 28, 28}));
  attribute_list same;
  same.set("pads", std::vector<std::int64_t>{1, 1, 1, 1});
  std::string prev = "x";
  for (int i = 0; i < count; ++i) {
    const std::string w = "W" + std::to_string(i), out = i + 1 == count ? "y" : prefix + "_out" + std::to_string(i);
    g.add_initializer(w, zoo::random_tensor({64, 64, 3, 3}, seed + static_cast<std::uint64_t>(i), 0.05f));
    g.add_node(op(prefix + std::to_string(i), "Conv", same), {prev, w}, {out});
    prev = out;
  }
  g.add_output("y", f32(shape{1, 64, 28, 28}));
}

}  // namespace epstack::test::dnnl
