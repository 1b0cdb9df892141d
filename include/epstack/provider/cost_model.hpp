#pragma once
/// @file cost_model.hpp
/// @brief What a node costs, for placement by cost (partitioner.hpp, `placement_policy::estimate`): the work of a node
/// from the graph's inferred shapes (`work_of`), and a provider's measured throughput per kind of work
/// (`cost_profile`), which together give a provider's `estimate_cost`. Runtime-typed, compiled once
/// (src/provider/cost_model.cpp).

#include <epstack/ir/graph.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace epstack {

/// The kinds of work that providers run at different speeds.
enum class work_kind : std::uint8_t {
  matmul,          ///< MatMul, Gemm, FusedMatMul...: a product of M rows
  conv,            ///< a dense convolution with a kernel larger than 1x1, other than conv3x3
  conv3x3,         ///< a dense 2-D 3x3 convolution at unit strides and dilations (Winograd's domain)
  pointwise_conv,  ///< a 1x1 convolution (a product over channels)
  depthwise_conv,  ///< a grouped convolution with one input channel per group
  streaming,       ///< everything else: bound by the bytes it reads and writes
};

/// A node's work: its kind, arithmetic (a multiply-add is 2) and the bytes of the tensors it reads and writes.
struct node_work {
  work_kind kind = work_kind::streaming;
  double flops = 0;
  double bytes = 0;
  std::int64_t rows = 0;  ///< matmul: the product's rows (M, batch included)
  bool known = false;     ///< false when a shape the estimate needs is not static
  bool assumed = false;   ///< a symbolic dimension was priced at `symbolic_as` (see work_of)
};

/// The work of node `n` of `g`, from the inferred types of its inputs and outputs. A symbolic dimension (a
/// `dim_param`, such as a batch) is unknown when `symbolic_as` is 0, else priced at `symbolic_as` (and the work says
/// `assumed`); so is a dimension with neither value nor name (what a Reshape to a computed shape leaves); a value of
/// unknown rank is always unknown.
[[nodiscard]] node_work work_of(const graph& g, node_id n, std::int64_t symbolic_as = 0);

/// A provider's speed on this kind of machine, per kind of work (two threads; measured, see the README's placement
/// section): matrix products in GFLOP/s at 1, 4, 16, 64 and 256 rows (interpolated between, in log rows),
/// convolutions in GFLOP/s (a dense convolution's multiply-adds, however the provider computes it: Winograd's
/// fewer multiplications show as a higher rate), streaming in GB/s, and fixed costs in microseconds.
struct cost_profile {
  std::array<double, 5> matmul_gflops{};
  double conv_gflops = 0;
  double conv3x3_gflops = 0;  ///< 0: as conv_gflops
  double pointwise_gflops = 0;
  double depthwise_gflops = 0;
  double stream_gbps = 0;
  double dram_gbps = 0;     ///< the weights of products and convolutions, when the graph's exceed the last-level cache
  double node_us = 0;       ///< per node (a call, its dispatch)
  double kernel_us = 0;     ///< per product or convolution besides (packing, threads woken, a primitive's entry)
  /// In place of kernel_us for a product or convolution whose time is its weights streaming from memory (the memory
  /// term exceeds the arithmetic one): a decode step's matrix-vector products. Negative: kernel_us.
  double stream_kernel_us = -1;
  double partition_us = 0;  ///< per partition run (boundary reorders, a compiled graph's entry)
};

/// The kinds of machine the providers' speeds were measured on: each provider has a `cost_profile` per class, since
/// what one provider gains over another differs between them (on a core that splits 512-bit instructions, oneDNN's
/// batch-1 products stream their weights 10-30% slower than the CPU provider's, where on a full-width core they are
/// level; on Intel's server cores oneDNN's products of 64 to 256 rows lose the lead they have on Zen 5).
enum class machine_class : std::uint8_t {
  avx512_full,   ///< 512-bit vector units (AMD Zen 5): the reference, and any unknown machine
  avx512_split,  ///< 512-bit instructions run as two 256-bit halves (AMD Zen 4: family 19h with AVX-512)
  avx512_intel,  ///< Intel's cores with AVX-512 (Xeon Scalable: Skylake-SP to Emerald Rapids; measured on the last)
};

/// The class whose profiles this process's estimates use: the one `set_machine_class` pinned, else
/// `EPSTACK_MACHINE_CLASS` when it names one ("avx512_full", "avx512_split", "avx512_intel"), else this machine's from
/// cpuid: AMD family 19h with AVX-512 is avx512_split, Intel with AVX-512 avx512_intel, anything else avx512_full (both
/// read once per process).
[[nodiscard]] machine_class this_machine_class() noexcept;

/// Pins the class of every later estimate in this process (as oneDNN's `dnnl_set_max_cpu_isa` pins its ISA);
/// `std::nullopt` returns to the detected one. For tests of a class on another machine, and for plans made for
/// machines of another class. Sessions already created keep their plans.
void set_machine_class(std::optional<machine_class> c) noexcept;

/// The name of a class, as `EPSTACK_MACHINE_CLASS` takes it.
[[nodiscard]] const char* to_string(machine_class c) noexcept;

/// The class of that name, if any (an `EPSTACK_MACHINE_CLASS` that names none is ignored: the `epstack` tool warns).
[[nodiscard]] std::optional<machine_class> machine_class_named(std::string_view name) noexcept;

/// The last-level cache of this machine in bytes (sysfs, else sysconf, believed up to 16 MiB a CPU: a virtual machine
/// may be shown its host socket's whole cache; 16 MiB when neither says):
/// when a graph's weights exceed it, every run streams them from memory, at `cost_profile::dram_gbps`.
[[nodiscard]] double last_level_cache_bytes() noexcept;

/// Microseconds for running `nodes` of `g` as one partition under `profile`; negative when a shape is unknown.
/// Symbolic dimensions (a model exported with a dynamic batch, no free dimension override) are priced at 1, the batch
/// that inference serves most and that benchmarks use; the partitioner decides whether such an estimate can stand
/// (`symbolic_products_share`).
[[nodiscard]] double estimate_microseconds(const cost_profile& profile, const graph& g, std::span<const node_id> nodes);

/// @brief While it lives, `estimate_microseconds` on this thread prices symbolic dimensions at `value` (> 0) instead:
/// how the partitioner asks each provider's `estimate_cost` what a group costs at several batches, where products
/// with symbolic rows make one price meaningless (partitioner.hpp). A provider whose estimate does not go through
/// `estimate_microseconds` is unaffected. Scopes nest; a value of 0 or less restores the default.
class symbolic_pricing {
 public:
  explicit symbolic_pricing(std::int64_t value) noexcept;
  ~symbolic_pricing();
  symbolic_pricing(const symbolic_pricing&) = delete;
  symbolic_pricing& operator=(const symbolic_pricing&) = delete;

 private:
  std::int64_t previous_;
};

/// The share of `nodes`' arithmetic (symbolic dimensions priced at 1) that is in products whose rows are symbolic;
/// negative when a shape is unknown even so. Convolutions, pools and element-wise nodes scale alike with the batch on
/// every provider, so an estimate at batch 1 compares providers at any batch; products do not (a provider's speed
/// depends on the rows, `cost_profile::matmul_gflops`), so the partitioner trusts an estimate at 1 only where such
/// products are a small part of the work.
[[nodiscard]] double symbolic_products_share(const graph& g, std::span<const node_id> nodes);

}  // namespace epstack
