#pragma once
/// @file cost_model.hpp
/// @brief What a node costs, for placement by cost (partitioner.hpp, `placement_policy::estimate`): the work of a node
/// from the graph's inferred shapes (`work_of`), and a provider's measured throughput per kind of work
/// (`cost_profile`), which together give a provider's `estimate_cost`. Runtime-typed, compiled once
/// (src/provider/cost_model.cpp).

#include <epstack/ir/graph.hpp>

#include <array>
#include <cstdint>
#include <span>

namespace epstack {

/// The kinds of work that providers run at different speeds.
enum class work_kind : std::uint8_t {
  matmul,          ///< MatMul, Gemm, FusedMatMul...: a product of M rows
  conv,            ///< a dense convolution with a kernel larger than 1x1
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
};

/// The work of node `n` of `g`, from the inferred types of its inputs and outputs.
[[nodiscard]] node_work work_of(const graph& g, node_id n);

/// A provider's speed on this kind of machine, per kind of work (two threads; measured, see the README's placement
/// section): matrix products in GFLOP/s at 1, 4, 16, 64 and 256 rows (interpolated between, in log rows),
/// convolutions in GFLOP/s, streaming in GB/s, and fixed costs in microseconds.
struct cost_profile {
  std::array<double, 5> matmul_gflops{};
  double conv_gflops = 0;
  double pointwise_gflops = 0;
  double depthwise_gflops = 0;
  double stream_gbps = 0;
  double dram_gbps = 0;     ///< the weights of products and convolutions, when the graph's exceed the last-level cache
  double node_us = 0;       ///< per node (a call, its dispatch)
  double kernel_us = 0;     ///< per product or convolution besides (packing, threads woken, a primitive's entry)
  double partition_us = 0;  ///< per partition run (boundary reorders, a compiled graph's entry)
};

/// The last-level cache of this machine in bytes (sysfs, else sysconf; 16 MiB when neither says): when a graph's weights exceed
/// it, every run streams them from memory, at `cost_profile::dram_gbps`.
[[nodiscard]] double last_level_cache_bytes() noexcept;

/// Microseconds for running `nodes` of `g` as one partition under `profile`; negative when a shape is unknown.
[[nodiscard]] double estimate_microseconds(const cost_profile& profile, const graph& g, std::span<const node_id> nodes);

}  // namespace epstack
