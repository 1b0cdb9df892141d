#pragma once
/// @file kernel_concepts.hpp
/// @brief The `cpu_kernel` concept: one operator's implementation for the CPU provider.
///
/// A kernel type provides:
/// - `static constexpr std::string_view op_type` and `domain` ("" is the default ONNX domain);
/// - `static bool supports(const graph&, node_id)`: whether it runs this node (opset version, types, attributes);
/// - `static Result<compute_function> compile(const graph&, node_id)`: the function that runs it.
/// The kernels of epstack are declared in kernels.hpp and compiled once in the `epstack::cpu` library; a user's own
/// kernel may be defined anywhere.

#include <epstack/compute.hpp>
#include <epstack/graph.hpp>

#include <concepts>
#include <string_view>

namespace epstack::cpu {

template <class K>
concept cpu_kernel = requires(const graph& g, node_id n) {
  { K::op_type } -> std::convertible_to<std::string_view>;
  { K::domain } -> std::convertible_to<std::string_view>;
  { K::supports(g, n) } -> std::same_as<bool>;
  { K::compile(g, n) } -> std::same_as<Result<compute_function>>;
};

/// True when node `nd` is of kernel K's operator (op type and domain; "" and "ai.onnx" are the same domain).
template <class K>
[[nodiscard]] bool matches(const node& nd) {
  const bool onnx_domain = nd.domain.empty() || nd.domain == "ai.onnx";
  return nd.op_type == K::op_type && (K::domain.empty() ? onnx_domain : nd.domain == K::domain);
}

}  // namespace epstack::cpu
