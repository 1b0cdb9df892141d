#pragma once
/// @file cpu.hpp
/// @brief The CPU execution provider. Its kernels are a compile-time list: `basic_cpu_provider<ops::conv, ops::relu>`
/// has those kernels and nothing else (selective build for embedded targets: only they are linked); `cpu_provider`
/// has them all and is the fallback of every session. It takes, one node each, every node for which a kernel of its
/// list `supports` the node.
///
/// (`cpu_provider` is a type and the selective form a template of another name: C++ does not let one name be both.)

#include <epstack/providers/cpu/kernel_concepts.hpp>
#include <epstack/providers/cpu/kernels.hpp>

#include <epstack/detail/cat.hpp>
#include <epstack/provider/contract.hpp>
#include <epstack/provider/cost_model.hpp>

#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/list.hpp>

#include <array>
#include <span>
#include <string_view>
#include <vector>

namespace epstack {

namespace ops = cpu::ops;

namespace cpu {
/// The CPU provider's speed for placement by cost, measured with `epstack perf` on small models (2 threads, AVX-512;
/// scripts/calibrate_placement.sh re-measures it): products at 1/4/16/64/256 rows, chains of convolutions by kind (so
/// that the blocked layout's reorders at a chain's ends are priced as in a network: 3x3 unit-stride ones run as
/// Winograd), streaming, and products streaming their weights from memory. The rows 1 and 4 and the streaming figures
/// are the nineteenth session's, after few-rows products moved to full-depth panels (medians of three calibrations);
/// the memory rate and the fixed cost of a streaming product are fitted to two models with many and few of them,
/// each timed in five interleaved rounds in the VM's fast and slow phases (llm_decode: 25 products over 92 MB,
/// mlp_b1: 4 over 101 MB; 88 and 66 GB/s, 1.7 and 7.5 us), oneDNN's beside (`dnnl_ep::default_cost_profile`).
inline constexpr cost_profile default_cost_profile{
    .matmul_gflops = {70.5, 233, 380, 384, 450},
    .conv_gflops = 441,
    .conv3x3_gflops = 805,
    .pointwise_gflops = 417,
    .depthwise_gflops = 111,
    .stream_gbps = 197,
    .dram_gbps = 76,
    .node_us = 0.5,
    .kernel_us = 8,
    .stream_kernel_us = 4.5,
    .partition_us = 0,
};
/// The same, measured on a core that runs 512-bit instructions as two 256-bit halves (AMD Zen 4, 2 vCPUs): about half
/// the arithmetic rates, and products streaming their weights from memory at 37.5 GB/s where oneDNN's reach 30.6
/// (mlp_b1's and llm_decode's). The medians of five calibrations of the twelfth session's kernels (four in the VM's
/// quiet phase, one in its busy phase, where this provider's convolutions lose up to 30% and oneDNN's less): the 3x3
/// chains run as Winograd at 444 dense-equivalent GFLOP/s (the tenth session's calibrations, in busy phases, had 295),
/// so that ResNet-50 is estimated at 32.6 ms where it runs in 33.3.
inline constexpr cost_profile avx512_split_cost_profile{
    .matmul_gflops = {50.8, 172, 206.8, 209.2, 210},
    .conv_gflops = 210,
    .conv3x3_gflops = 444,
    .pointwise_gflops = 199,
    .depthwise_gflops = 89,
    .stream_gbps = 169,
    .dram_gbps = 37.5,
    .node_us = 0.5,
    .kernel_us = 8,
    .partition_us = 0,
};
/// The same, measured on an Intel Xeon (Emerald Rapids, 2 vCPUs, 2026-11-30): the medians of six calibrations
/// (`MLP=build/shared-models/mlp_b1.onnx LLM=build/shared-models/llm_decode.onnx ROUNDS=2
/// scripts/calibrate_placement.sh build`), in a slow phase of the VM, where every rate was about two thirds of its
/// quiet-phase figure (products of 256 rows at 175 GFLOP/s on either provider; bench_peak's two-thread peak 284).
/// oneDNN's are the CPU provider's over the median of the six paired ratios (each calibration times the two
/// providers one after the other; the ratios are steadier than the rates): products level at every row count
/// (0.94-1.04), the 3x3 chains 1.59x oneDNN's, pointwise 1.06x, depthwise 1.26x, strided dense 0.87x, streaming 0.97x.
/// Products of 256 rows as 64 (175 measured, below the 195 of 64 rows on both: the longer runs caught more of the
/// phase). Weights streaming from memory level on the two (mlp_b1 and llm_decode ranged 2.5-4.7 ms on both), at 25
/// GB/s (100.7 MB in 4 ms, the slow phase's median); the fixed costs are Zen 5's, not fitted here.
inline constexpr cost_profile avx512_intel_cost_profile{
    .matmul_gflops = {17.9, 64.7, 149.6, 195, 195},
    .conv_gflops = 152.7,
    .conv3x3_gflops = 304.4,
    .pointwise_gflops = 157.7,
    .depthwise_gflops = 35.7,
    .stream_gbps = 34.9,
    .dram_gbps = 25,
    .node_us = 0.5,
    .kernel_us = 8,
    .stream_kernel_us = 4.5,
    .partition_us = 0,
};
/// The profile measured on machines of class `c`.
[[nodiscard]] constexpr const cost_profile& cost_profile_for(machine_class c) noexcept {
  return c == machine_class::avx512_split   ? avx512_split_cost_profile
         : c == machine_class::avx512_intel ? avx512_intel_cost_profile
                                            : default_cost_profile;
}
}  // namespace cpu

namespace cpu {
/// One kernel of a provider's list, as the compiled part of the provider sees it.
struct kernel_ref {
  std::string_view op_type, domain;
  bool (*supports)(const graph&, node_id);
  Result<compute_function> (*compile)(const graph&, node_id);
};
/// The first kernel of `kernels` that runs node `n` (its operator, and `supports`), or null.
[[nodiscard]] const kernel_ref* kernel_for(const graph& g, node_id n, std::span<const kernel_ref> kernels);
/// Node `n` compiled with `kernel_for`; not_implemented naming the node when no kernel runs it.
[[nodiscard]] Result<compute_function> compile_node(const graph& g, node_id n, std::span<const kernel_ref> kernels);
/// Single-node partitions compiled with `compile_node`, on all the machine's cores (kernels pack their constant weights
/// here); an error names the node.
[[nodiscard]] Result<std::vector<compute_function>> compile_nodes(std::span<const partition> parts,
                                                                  std::span<const kernel_ref> kernels);
}  // namespace cpu

/// @brief The CPU provider over the kernels `K...` (a kernel earlier in the list wins when two run a node). The list is
/// a table the compiled part of the provider reads (cpu::kernel_ref): each list adds a table, not code.
template <class... K>
struct basic_cpu_provider {
  static_assert((cpu::check_cpu_kernel<K>() && ...));
  using provider_concept = execution_provider_tag;
  static constexpr std::string_view type_key = cpu_provider_key;
  static constexpr std::string_view short_name = "cpu";

  /// True when a kernel of the list implements operator `op_type` of `domain` ("" is the ONNX domain): the graph
  /// optimiser fuses into an operator only when the stack can run it.
  [[nodiscard]] static constexpr bool has_op(std::string_view domain, std::string_view op_type) {
    const bool onnx = domain.empty() || domain == "ai.onnx";
    return ((K::op_type == op_type && (K::domain.empty() ? onnx : K::domain == domain)) || ...);
  }

  /// The kernels, in the list's order.
  static constexpr std::array<cpu::kernel_ref, sizeof...(K)> kernels{{{K::op_type, K::domain, &K::supports, &K::compile}...}};

  /// True when a kernel of the list runs node `n`.
  [[nodiscard]] static bool has_kernel(const graph& g, node_id n) { return cpu::kernel_for(g, n, kernels) != nullptr; }

  [[nodiscard]] std::vector<capability> get_capability(const graph_view<graph>& v) const {
    std::vector<capability> r;
    for (node_id n : v.nodes())
      if (has_kernel(v.graph(), n)) r.push_back(capability::single(n));
    return r;
  }

  /// Placement by cost: the estimated microseconds of running `nodes` (negative when a shape is unknown).
  [[nodiscard]] double estimate_cost(const graph& g, std::span<const node_id> nodes) const {
    return estimate_microseconds(cpu::cost_profile_for(this_machine_class()), g, nodes);
  }

  /// Compiles every partition (single nodes); kernels pack their constant weights here, on all the machine's cores.
  [[nodiscard]] Result<std::vector<compute_function>> compile(std::span<const partition> parts) const {
    return cpu::compile_nodes(parts, kernels);
  }

  /// @brief The function of the first kernel in the list that runs node `n`.
  [[nodiscard]] static Result<compute_function> compile_node(const graph& g, node_id n) {
    return cpu::compile_node(g, n, kernels);
  }
};

namespace detail {
template <class L>
struct cpu_provider_of;
template <class... K>
struct cpu_provider_of<boost::mp11::mp_list<K...>> {
  using type = basic_cpu_provider<K...>;
};
}  // namespace detail

/// @brief The CPU provider over the kernels of a list type `L<K...>` (such as the list `epstack ops` writes for a
/// model): `cpu_provider_for<boost::mp11::mp_list<ops::conv, ops::relu>>` is `basic_cpu_provider<ops::conv, ops::relu>`.
template <class L>
using cpu_provider_for = typename detail::cpu_provider_of<boost::mp11::mp_rename<L, boost::mp11::mp_list>>::type;

/// @brief The CPU provider with every kernel: the fallback of every session.
struct cpu_provider : detail::cpu_provider_of<cpu::all_kernels>::type {};

}  // namespace epstack
