#pragma once
/// @file provider_concepts.hpp
/// @brief The `execution_provider` concept and `provider_traits`.
///
/// Customization points:
/// - A provider opts in with `using provider_concept = epstack::execution_provider_tag;` and provides
///   - `static constexpr std::string_view type_key` (e.g. "CPUExecutionProvider"), unique in a stack;
///   - `std::vector<capability> get_capability(const graph_view<graph>&) const`: single nodes or groups it can run,
///     among the nodes of the view (those still unassigned);
///   - `Result<std::vector<compute_function>> compile(std::span<const partition>) const`: every partition it was
///     given (fused groups and single nodes), in one call, one function per partition, in order.
/// - `provider_traits<P>` (specialise for a foreign type): `type_key`, `short_name` (what `--providers` accepts).
/// - Optional, detected by `provider_traits<P>`:
///   - an allocator, `void* allocate(std::size_t bytes) const` (64-byte aligned; null when out of memory) and
///     `void deallocate(void* p, std::size_t bytes) const`: the intermediate outputs of the provider's partitions are
///     allocated with it instead of the run's arena (memory the device or library wants to own);
///   - `static constexpr epstack::data_layout preferred_layout` (ONNX Runtime's GetPreferredLayout; NCHW when
///     absent): the layout the provider wants for 4-D activations. It is declared and reported today; the layout
///     transformation that acts on it arrives with the first provider that prefers NHWC.
///   - `std::string why_not(const graph&, node_id) const`: why the provider does not take a node (shown in the plan);
///   - EP context (compiled partitions cached in a model): a later issue.

#include <epstack/capability.hpp>
#include <epstack/compute.hpp>
#include <epstack/graph_view.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace epstack {

/// The tag a provider names as its `provider_concept` to opt in to `execution_provider`.
struct execution_provider_tag {};

/// Layouts of 4-D activations a provider may prefer (ONNX Runtime's DataLayout).
enum class data_layout : std::uint8_t { nchw, nhwc };

namespace detail {
template <class P>
concept provider_opts_in = requires { typename P::provider_concept; } &&
                           std::same_as<typename P::provider_concept, execution_provider_tag>;
template <class P>
concept provider_has_type_key = requires {
  { P::type_key } -> std::convertible_to<std::string_view>;
};
template <class P>
concept provider_has_get_capability = requires(const P& p, const graph_view<graph>& v) {
  { p.get_capability(v) } -> std::same_as<std::vector<capability>>;
};
template <class P>
concept provider_has_allocator = requires(const P& p, std::size_t n, void* q) {
  { p.allocate(n) } -> std::same_as<void*>;
  { p.deallocate(q, n) } -> std::same_as<void>;
};
template <class P>
concept provider_has_why_not = requires(const P& p, const graph& g, node_id n) {
  { p.why_not(g, n) } -> std::convertible_to<std::string>;
};
template <class P>
concept provider_has_compile = requires(const P& p, std::span<const partition> parts) {
  { p.compile(parts) } -> std::same_as<Result<std::vector<compute_function>>>;
};
}  // namespace detail

/// @brief A type that can take part in a session's provider stack.
template <class P>
concept execution_provider = detail::provider_opts_in<P> && detail::provider_has_type_key<P> &&
                             detail::provider_has_get_capability<P> && detail::provider_has_compile<P> &&
                             std::is_copy_constructible_v<P>;

/// @brief Checks `execution_provider<P>` and says, in words, which requirement is missing. Use it as
/// `static_assert(check_execution_provider<P>())` where a provider type is accepted.
template <class P>
consteval bool check_execution_provider() {
  static_assert(detail::provider_opts_in<P>,
                "epstack: not an execution provider: declare `using provider_concept = epstack::execution_provider_tag;`");
  static_assert(detail::provider_has_type_key<P>,
                "epstack: an execution provider needs `static constexpr std::string_view type_key` (e.g. \"CPUExecutionProvider\")");
  static_assert(detail::provider_has_get_capability<P>,
                "epstack: an execution provider needs `std::vector<epstack::capability> get_capability(const "
                "epstack::graph_view<epstack::graph>&) const`");
  static_assert(detail::provider_has_compile<P>,
                "epstack: an execution provider needs `epstack::Result<std::vector<epstack::compute_function>> "
                "compile(std::span<const epstack::partition>) const`");
  static_assert(std::is_copy_constructible_v<P>, "epstack: an execution provider must be copy constructible");
  return execution_provider<P>;
}

/// @brief Per-provider facts. The default reads them from the provider; specialise for a foreign type.
template <class P>
struct provider_traits {
  static constexpr std::string_view type_key = P::type_key;
  /// The name `--providers` accepts ("cpu", "dnnl"): the provider's `short_name` when it has one, else the type key.
  static constexpr std::string_view short_name = [] {
    if constexpr (requires { P::short_name; }) return std::string_view(P::short_name);
    else return std::string_view(P::type_key);
  }();
  /// True when the provider brings its own allocator (see the file comment).
  static constexpr bool has_allocator = detail::provider_has_allocator<P>;
  /// True when the provider explains refusals: `std::string why_not(const graph&, node_id) const`, empty when it
  /// takes the node; the partition plan shows the reason beside each node that fell back to the CPU provider.
  static constexpr bool has_why_not = detail::provider_has_why_not<P>;
  /// The layout the provider prefers for 4-D activations: its `preferred_layout` when declared, else NCHW.
  static constexpr data_layout preferred_layout = [] {
    if constexpr (requires { P::preferred_layout; }) return data_layout(P::preferred_layout);
    else return data_layout::nchw;
  }();
};

}  // namespace epstack
