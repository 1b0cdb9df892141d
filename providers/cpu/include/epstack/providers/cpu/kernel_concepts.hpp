#pragma once
/// @file kernel_concepts.hpp
/// @brief The `cpu_kernel` concept: one operator's implementation for the CPU provider.
///
/// A kernel type provides:
/// - `using kernel_concept = epstack::cpu::kernel_tag;` the opt-in;
/// - `static constexpr std::string_view op_type` and `domain` ("" is the default ONNX domain);
/// - `static bool supports(const graph&, node_id)`: whether it runs this node (opset version, types, attributes);
/// - `static Result<compute_function> compile(const graph&, node_id)`: the function that runs it.
/// The kernels of epstack are declared in kernels.hpp and compiled once in the `epstack::cpu` library; a user's own
/// kernel may be defined anywhere. `check_cpu_kernel<K>()` (which `basic_cpu_provider` runs for each kernel) says in
/// words what a type lacks.

#include <epstack/provider/compute.hpp>
#include <epstack/ir/graph.hpp>

#include <concepts>
#include <string_view>

namespace epstack::cpu {

/// The tag a kernel names as its `kernel_concept` to opt in to `cpu_kernel`.
struct kernel_tag {};

namespace detail {
template <class K>
concept kernel_opts_in = requires { typename K::kernel_concept; } && std::same_as<typename K::kernel_concept, kernel_tag>;
template <class K>
concept kernel_has_names = requires {
  { K::op_type } -> std::convertible_to<std::string_view>;
  { K::domain } -> std::convertible_to<std::string_view>;
};
template <class K>
concept kernel_has_supports = requires(const graph& g, node_id n) {
  { K::supports(g, n) } -> std::same_as<bool>;
};
template <class K>
concept kernel_has_compile = requires(const graph& g, node_id n) {
  { K::compile(g, n) } -> std::same_as<Result<compute_function>>;
};
}  // namespace detail

template <class K>
concept cpu_kernel = detail::kernel_opts_in<K> && detail::kernel_has_names<K> && detail::kernel_has_supports<K> &&
                     detail::kernel_has_compile<K>;

/// @brief Checks `cpu_kernel<K>` and says, in words, which requirement is missing.
template <class K>
consteval bool check_cpu_kernel() {
  static_assert(detail::kernel_opts_in<K>,
                "epstack: not a CPU kernel: declare `using kernel_concept = epstack::cpu::kernel_tag;`");
  static_assert(detail::kernel_has_names<K>,
                "epstack: a CPU kernel needs `static constexpr std::string_view op_type` and `domain` (\"\" is ONNX)");
  static_assert(detail::kernel_has_supports<K>,
                "epstack: a CPU kernel needs `static bool supports(const epstack::graph&, epstack::node_id)`");
  static_assert(detail::kernel_has_compile<K>,
                "epstack: a CPU kernel needs `static epstack::Result<epstack::compute_function> compile(const "
                "epstack::graph&, epstack::node_id)`");
  return cpu_kernel<K>;
}

/// True when node `nd` is of kernel K's operator (op type and domain; "" and "ai.onnx" are the same domain).
template <class K>
[[nodiscard]] bool matches(const node& nd) {
  const bool onnx_domain = nd.domain.empty() || nd.domain == "ai.onnx";
  return nd.op_type == K::op_type && (K::domain.empty() ? onnx_domain : nd.domain == K::domain);
}

}  // namespace epstack::cpu
