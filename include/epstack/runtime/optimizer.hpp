#pragma once
/// @file optimizer.hpp
/// @brief Graph transformations before partitioning, by ONNX Runtime's optimisation levels: constant folding, shape
/// folding, dead-node and Identity elimination (basic); provider-independent fusions into ONNX Runtime's contrib ops
/// of domain `com.microsoft` (FusedConv, Gelu, BiasGelu, SkipLayerNormalization, LayerNormalization, FusedMatMul) and
/// Conv+BatchNormalization folding (extended and all). Compiled once in `epstack::runtime`.

#include <epstack/provider/compute.hpp>
#include <epstack/core/errors.hpp>
#include <epstack/ir/model.hpp>
#include <epstack/core/session_options.hpp>

#include <functional>
#include <string>
#include <vector>

namespace epstack {

/// Compiles one node into a function (the stack's CPU provider): used to fold constant nodes before partitioning.
/// Returns not_implemented when it has no kernel for the node.
using node_compiler = std::function<Result<compute_function>(const graph&, node_id)>;

/// The domain of the fused operators the optimiser writes (ONNX Runtime's contrib operators).
inline constexpr std::string_view contrib_domain = "com.microsoft";

/// @brief What graph optimisation did, for the plan and for tests.
struct optimization_report {
  std::size_t nodes_before = 0, nodes_after = 0;
  std::size_t constant_folded = 0;  ///< nodes replaced by their constant outputs
  std::size_t shapes_folded = 0;    ///< Shape/Size nodes whose input shape was known
  std::size_t removed = 0;          ///< dead nodes and Identity/Dropout nodes removed
  std::vector<std::string> fusions; ///< one entry per fusion applied, e.g. "FusedConv <- /conv1 + /relu1"
};

/// Whether the provider stack can run operator (domain, op_type): a fusion writes an operator only when it can.
using operator_query = std::function<bool(std::string_view domain, std::string_view op_type)>;

/// Options of `optimize`.
struct optimizer_options {
  graph_optimization_level level = graph_optimization_level::all;
  node_compiler fold;        ///< without it, constant folding is skipped
  operator_query can_run;    ///< without it, every fusion is allowed
  int threads = 1;           ///< threads for folding kernels
};

/// @brief Transforms `m` in place (main graph and subgraphs). The result computes the same outputs for every input.
[[nodiscard]] Result<optimization_report> optimize(model& m, const optimizer_options& options);

/// The domain of the blocked-channel layout operators (NCHWc, 16 channels per block) the CPU provider runs.
inline constexpr std::string_view nchwc_domain = "com.epstack.nchwc16";

/// @brief The blocked-channel layout (ONNX Runtime's NchwcTransformer): chains of float 2-D Conv/FusedConv, pools and
/// element-wise nodes of the main graph for which `eligible[node]` holds (the nodes placed on the CPU provider) are
/// rewritten into domain `nchwc_domain`, with ReorderInput/ReorderOutput where a chain meets the rest of the graph
/// (ReorderOutput writes the original value's name). 3x3 unit-stride convolutions become Winograd F(4x4, 3x3) or
/// F(2x2, 3x3) convolutions of the layout unless `winograd` is false. Unless `fuse_depthwise` is false, a 1x1
/// convolution whose only reader is a depthwise convolution becomes one PointwiseDepthwiseConv of the domain with it,
/// which also takes the 1x1 convolution that alone reads its output when that output has at least 28 rows.
/// Returns how many nodes were converted; 0 leaves `m` unchanged. When `rewritten` is given, it is set to one flag per
/// node of the graph `m` held before: whether the pass rewrote that node (alone, or fused with another).
[[nodiscard]] Result<std::size_t> nchwc_layout(model& m, const std::vector<bool>& eligible, optimization_report& rep,
                                               bool winograd = true, bool fuse_depthwise = true,
                                               std::vector<bool>* rewritten = nullptr);

/// The domain of the fused products only the CPU provider runs (MatMulBias, PermutedMatMul), written after
/// partitioning.
inline constexpr std::string_view cpu_fused_domain = "com.epstack.cpu";

/// @brief Products of the CPU provider with what follows them, after partitioning (its nodes only, as the blocked
/// layout): a MatMul of the main graph for which `eligible[node]` holds, B a constant float matrix, followed by the
/// Add of a constant bias of one value per column (then, optionally, Relu or Gelu), by BiasGelu with such a bias, or
/// by Relu or Gelu alone, each the sole reader of the value before it and eligible too, becomes one MatMulBias of
/// domain `cpu_fused_domain` (inputs A, B, bias; attribute activation "Relu" or "Gelu"), writing the last node's
/// output; so does a Gemm (transA 0, alpha 1, beta 1, a constant B and column bias C; A not of at most 4 rows known
/// at create) followed by Relu or Gelu (attribute transB as the Gemm's). With `fold_permutes`, a MatMul or
/// com.microsoft FusedMatMul (no transBatch) of float operands of one rank, with a Transpose before an operand (its
/// sole reader) or after Y (Y's sole reader, the last dim kept last), becomes one PermutedMatMul of that domain
/// (attributes perm_a, perm_b, perm_y, alpha) that reads and writes through the permutations instead (an attention
/// layer's heads). Returns how many were fused; 0 leaves `m` unchanged. `rewritten`, when given, flags the nodes of
/// the graph `m` held before that were fused.
[[nodiscard]] Result<std::size_t> cpu_product_fusion(model& m, const std::vector<bool>& eligible, optimization_report& rep,
                                                     std::vector<bool>* rewritten = nullptr, bool fold_permutes = false);

/// For each node of a graph, whether some provider of the stack takes it (its `get_capability` on the whole graph).
using claim_query = std::function<std::vector<bool>(const graph&)>;

/// @brief Replaces every node that no provider takes and whose operator is defined by a function (a model-local
/// function, or a function body of the onnx package) by the nodes of its body, repeatedly (bodies may use function
/// operators too), then infers the new values' types. ONNX Runtime's behaviour for function operators: partitioning
/// runs again on the expanded graph. Returns how many nodes were expanded.
[[nodiscard]] Result<std::size_t> expand_functions(model& m, const claim_query& claimed);

}  // namespace epstack
