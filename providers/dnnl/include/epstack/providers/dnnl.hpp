#pragma once
/// @file dnnl.hpp
/// @brief The oneDNN execution provider (ONNX Runtime's DnnlExecutionProvider): it takes maximal connected, acyclic
/// groups of the float nodes oneDNN runs well (convolutions, matrix products, pooling, normalisations, softmax,
/// element-wise and layout operators) and compiles each group into one fused sequence of oneDNN primitives: batch
/// normalisation folded into the convolution before it, bias, activations and residual additions as post-ops,
/// blocked memory formats chosen by oneDNN inside the group with reorders only at its boundary, weights reordered
/// once. This header is light: oneDNN itself is included only by the provider's sources, compiled once.
///
/// Use it first in a stack: `epstack::session<epstack::dnnl_provider>` (the CPU provider runs the rest).

#include <epstack/provider/capability.hpp>
#include <epstack/provider/compute.hpp>
#include <epstack/core/errors.hpp>
#include <epstack/ir/graph_view.hpp>
#include <epstack/provider/contract.hpp>
#include <epstack/provider/cost_model.hpp>

#include <array>
#include <cstdint>

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace epstack {

/// @brief Options of the oneDNN provider.
struct dnnl_options {
  /// oneDNN's Winograd kernels for 3x3, stride-1 convolutions with maps of 14x14 or more: fewer multiplications
  /// (resnet50 runs 4-9% faster) for about twice those layers' weight memory plus larger scratch buffers (resnet50:
  /// context binary 103 -> 132 MB, activation plan 6.7 -> 16.7 MB, peak RSS 128 -> 158 MB). Off by default, as in
  /// ONNX Runtime (direct convolutions; a process holds its weights once); on for throughput where memory is spare.
  bool winograd = false;
};

namespace dnnl_ep {
/// Groups of nodes the oneDNN provider runs, among those of the view (see dnnl_provider).
[[nodiscard]] std::vector<capability> get_capability(const graph_view<graph>& v);
/// The provider's speed for placement by cost, measured with `epstack perf` on single-operator models (2 threads,
/// AVX-512; scripts/calibrate_placement.sh re-measures it), as the CPU provider's `cpu::default_cost_profile`, which
/// says how the rows 1 and 4 and the streaming figures were re-measured: oneDNN streams weights a little faster
/// (93 and 72 GB/s in the fast and slow phases) but each streaming product costs it more (16 and 23 us: a
/// primitive's entry and its OpenMP region), so it loses on a decode step's many small products.
inline constexpr cost_profile default_cost_profile{
    .matmul_gflops = {64.5, 234.6, 411, 472, 474},
    .conv_gflops = 494,
    .conv3x3_gflops = 483,
    .pointwise_gflops = 376,
    .depthwise_gflops = 101,
    .stream_gbps = 200,
    .dram_gbps = 82,
    .node_us = 0.5,
    .kernel_us = 2,
    .stream_kernel_us = 20,
    .partition_us = 5,
};
/// The same, measured on a core that runs 512-bit instructions as two 256-bit halves (AMD Zen 4, 2 vCPUs; medians of
/// five calibrations, with the CPU provider's): products streaming their weights from memory reach 30.6 GB/s, where
/// the CPU provider's reach 37.5 (`cpu::avx512_split_cost_profile`), though with operands in cache oneDNN's batch-1
/// products are faster.
inline constexpr cost_profile avx512_split_cost_profile{
    .matmul_gflops = {72.3, 200.9, 212.4, 216.5, 223.9},
    .conv_gflops = 220,
    .conv3x3_gflops = 231,
    .pointwise_gflops = 184,
    .depthwise_gflops = 67,
    .stream_gbps = 168,
    .dram_gbps = 30.6,
    .node_us = 0.5,
    .kernel_us = 2,
    .partition_us = 5,
};
/// The same, measured on an Intel Xeon (Emerald Rapids, 2 vCPUs) with the CPU provider's
/// (`cpu::avx512_intel_cost_profile`, which says how): the CPU provider's rates over the median paired ratio of six
/// calibrations. Where on Zen 5 oneDNN's products of 64 and 256 rows ran 5-23% faster than the CPU provider's, here
/// the two are level; its 3x3 chains run at 0.63x the CPU provider's rate (Winograd there), depthwise 0.80x.
inline constexpr cost_profile avx512_intel_cost_profile{
    .matmul_gflops = {17.7, 68.6, 144.5, 189.3, 198.8},
    .conv_gflops = 176.5,
    .conv3x3_gflops = 191.6,
    .pointwise_gflops = 148.5,
    .depthwise_gflops = 28.4,
    .stream_gbps = 35.8,
    .dram_gbps = 25,
    .node_us = 0.5,
    .kernel_us = 2,
    .stream_kernel_us = 20,
    .partition_us = 5,
};
/// The profile measured on machines of class `c`.
[[nodiscard]] constexpr const cost_profile& cost_profile_for(machine_class c) noexcept {
  return c == machine_class::avx512_split   ? avx512_split_cost_profile
         : c == machine_class::avx512_intel ? avx512_intel_cost_profile
                                            : default_cost_profile;
}
/// The OpenMP runtime oneDNN runs on (libgomp's parallel regions): a session with this provider runs its own loops
/// there too, so that oneDNN's threads and the session's do not spin against each other between partitions.
[[nodiscard]] parallel_runtime openmp_runtime() noexcept;
/// Why the oneDNN provider does not take node `n` (empty when it does, alone or in a group).
[[nodiscard]] std::string why_not(const graph& g, node_id n);
/// Compiles each partition into a sequence of oneDNN primitives.
[[nodiscard]] Result<std::vector<compute_function>> compile(std::span<const partition> parts, const dnnl_options& options = {});
/// The oneDNN version the provider was built with and runs with, "2.6.3".
[[nodiscard]] std::string library_version();
/// The instruction set oneDNN dispatches to on this machine ("avx512_core", "avx2", ...).
[[nodiscard]] std::string cpu_isa();
/// @brief What partition `p` compiles to, one line per primitive, in order: "convolution <- /conv1 + /bn1 + /relu1
/// [post-ops: eltwise_relu]". Reorders at the boundary, which depend on the shapes seen at run time, are not listed;
/// at planning a matrix product's first constant-row binary_add becomes oneDNN's bias argument, and a full-size
/// binary_add (a residual) its sum post-op.
[[nodiscard]] std::vector<std::string> describe(const partition& p);
/// EP context: a compiled partition (a function `compile` returned) as a record of the context binary, and back.
[[nodiscard]] Result<ep_context_record> serialize(const partition& part, const compute_function& fn, ep_context_builder& b);
/// A record whose weights were stored laid out restores with the convolution algorithms they were laid out for;
/// one without (compiled without fixed dims) follows `options`.
[[nodiscard]] Result<compute_function> restore(const ep_context_restore& r, const dnnl_options& options = {});
/// Whether a context compiled for CPU ISA `recorded` runs here (this machine's ISA is the same or a superset).
[[nodiscard]] bool isa_supported(std::string_view recorded);
/// Constants (weights) reordered into a primitive's layout so far in this process (restored contexts reorder none).
[[nodiscard]] std::uint64_t weight_reorder_count();
/// Reorders of values (activations, between primitives or at the boundary) put into plans so far in this process.
[[nodiscard]] std::uint64_t activation_reorder_count();
/// For tests: plans of restored contexts made from now on act as if no stored weight layout fit (as on a machine whose
/// oneDNN picks other layouts): weights kept only laid out are reordered back, then to the new layout.
void set_ignore_stored_layouts(bool ignore);
}  // namespace dnnl_ep

/// @brief The oneDNN execution provider. Copyable; it holds only its options (compiled partitions own what they
/// need): `session<dnnl_provider>::create(path, so, {dnnl_provider(dnnl_options{.winograd = true})})`.
struct dnnl_provider {
  using provider_concept = execution_provider_tag;
  using ep_context_concept = ep_context_tag;  // compiled partitions cached in EPContext models
  dnnl_options options;

  dnnl_provider() = default;
  explicit dnnl_provider(dnnl_options o) : options(o) {}
  static constexpr std::string_view type_key = "DnnlExecutionProvider";
  static constexpr std::string_view short_name = "dnnl";

  [[nodiscard]] std::vector<capability> get_capability(const graph_view<graph>& v) const {
    return dnnl_ep::get_capability(v);
  }
  [[nodiscard]] std::string why_not(const graph& g, node_id n) const { return dnnl_ep::why_not(g, n); }
  /// Placement by cost: the estimated microseconds of running `nodes` as one partition (negative: a shape unknown).
  [[nodiscard]] double estimate_cost(const graph& g, std::span<const node_id> nodes) const {
    return estimate_microseconds(dnnl_ep::cost_profile_for(this_machine_class()), g, nodes);
  }
  [[nodiscard]] Result<std::vector<compute_function>> compile(std::span<const partition> parts) const {
    return dnnl_ep::compile(parts, options);
  }
  /// oneDNN's threads are OpenMP's: the session's intra-op loops run on the same ones.
  [[nodiscard]] static parallel_runtime intra_op_runtime() noexcept { return dnnl_ep::openmp_runtime(); }

  // EP context (ep_context_provider): the oneDNN version and the CPU ISA oneDNN selected are recorded and checked.
  static constexpr std::array<std::string_view, 1> source_keys{type_key};
  static constexpr bool multi_graph_context = true;
  /// Restoring reads only shape values and the tensors a weight reorder needs (each verified first); a plan's
  /// weights are verified before its first run, so loading a context reads no weight bytes.
  static constexpr bool verifies_context_tensors = true;
  [[nodiscard]] std::string ep_sdk_version() const { return dnnl_ep::library_version(); }
  [[nodiscard]] std::string hardware_architecture() const { return dnnl_ep::cpu_isa(); }
  [[nodiscard]] bool hardware_supported(std::string_view recorded) const { return dnnl_ep::isa_supported(recorded); }
  [[nodiscard]] Result<ep_context_record> serialize(const partition& p, const compute_function& fn,
                                                    ep_context_builder& b) const {
    return dnnl_ep::serialize(p, fn, b);
  }
  [[nodiscard]] Result<compute_function> restore(const ep_context_restore& r) const { return dnnl_ep::restore(r, options); }
  /// What of this provider's options changes what it compiles (the compile cache's key).
  [[nodiscard]] std::string cache_key() const { return options.winograd ? "winograd=1" : "winograd=0"; }
};

}  // namespace epstack
