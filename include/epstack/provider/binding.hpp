#pragma once
/// @file binding.hpp
/// @brief The one type-erased view of a provider that the runtime-typed parts of epstack (partitioner, session core,
/// EPContext loading and writing) work with, and `make_binding`, the one place it is built from a provider type. The
/// provider object must outlive its binding (a session keeps its providers alive).

#include <epstack/provider/contract.hpp>

#include <cctype>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <typeinfo>
#include <vector>

namespace epstack {

/// @brief A provider's EP-context side (set only for an `ep_context_provider`).
struct ep_context_binding {
  std::vector<std::string> source_keys;
  std::string short_name;  ///< `[model]_[short_name].bin`
  bool multi_graph = true;
  std::string sdk_version, hardware;
  std::function<bool(std::string_view)> hardware_supported;
  std::function<Result<ep_context_record>(const partition&, const compute_function&, ep_context_builder&)> serialize;
  /// Restores a compiled graph; verifies the graph's tensors first unless the provider verifies them itself.
  std::function<Result<compute_function>(const ep_context_restore&)> restore;
  /// `ep_context_binary::from_bytes`, reached through the binding so that a program whose stack has no EP-context
  /// provider does not link the binary's reader.
  Result<ep_context_binary> (*open)(std::span<const std::byte>, std::shared_ptr<const void>, std::string) = nullptr;

  /// Whether an EPContext `source` value names this provider: one of its source keys exactly, or its short name in
  /// any case.
  [[nodiscard]] bool accepts(std::string_view source) const {
    for (const auto& k : source_keys)
      if (k == source) return true;
    if (source.size() != short_name.size() || source.empty()) return false;
    for (std::size_t i = 0; i < source.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(source[i])) != std::tolower(static_cast<unsigned char>(short_name[i])))
        return false;
    return true;
  }
};

/// @brief A provider as the runtime sees it. The members after `why_not` are empty when the provider lacks the
/// optional point (allocate/deallocate: the run's arena; has_op: every operator allowed; context: no EP context).
struct provider_binding {
  std::string_view type_key;
  std::function<std::vector<capability>(const graph_view<graph>&)> get_capability;
  std::function<std::string(const graph&, node_id)> why_not = {};
  std::function<Result<std::vector<compute_function>>(std::span<const partition>)> compile = {};
  std::string_view short_name = {};
  std::function<void*(std::size_t)> allocate = {};
  std::function<void(void*, std::size_t)> deallocate = {};
  std::function<bool(std::string_view, std::string_view)> has_op = {};
  data_layout preferred_layout = data_layout::nchw;
  std::shared_ptr<const ep_context_binding> context = {};
  /// Estimated microseconds of one run of the nodes (negative: unknown); empty when the provider does not estimate.
  std::function<double(const graph&, std::span<const node_id>)> estimate_cost = {};
  /// The thread runtime the provider's library runs on (empty: none of its own).
  parallel_runtime intra_op_runtime = {};
  /// What tells this provider from another of the same type key for the compile cache: its C++ type (a selective
  /// CPU provider's kernel list) and, when it has the optional `cache_key()`, the options that change what it compiles.
  std::string identity = {};
};

namespace detail {
// The binding of provider `q`: everything (`full`), or what a session of an already compiled model uses.
template <bool full, class Q>
provider_binding binding_of(const Q& q) {
  static_assert(check_provider<Q>());
  using traits = provider_traits<Q>;
  provider_binding b;
  b.type_key = traits::type_key;
  b.short_name = traits::short_name;
  if constexpr (full) b.get_capability = [&q](const graph_view<graph>& v) { return q.get_capability(v); };
  else b.get_capability = [](const graph_view<graph>&) { return std::vector<capability>{}; };
  b.compile = [&q](std::span<const partition> parts) { return q.compile(parts); };
  if constexpr (traits::has_allocator) {
    b.allocate = [&q](std::size_t n) { return q.allocate(n); };
    b.deallocate = [&q](void* x, std::size_t n) { q.deallocate(x, n); };
  }
  b.preferred_layout = traits::preferred_layout;
  if constexpr (traits::has_intra_op_runtime) b.intra_op_runtime = Q::intra_op_runtime();
  if constexpr (full) {
    if constexpr (traits::has_why_not) b.why_not = [&q](const graph& g, node_id n) { return std::string(q.why_not(g, n)); };
    if constexpr (traits::has_op_query)
      b.has_op = [](std::string_view d, std::string_view op) { return bool(Q::has_op(d, op)); };
    if constexpr (traits::has_cost_estimate)
      b.estimate_cost = [&q](const graph& g, std::span<const node_id> nodes) { return double(q.estimate_cost(g, nodes)); };
    b.identity = typeid(Q).name();
    if constexpr (requires { { q.cache_key() } -> std::convertible_to<std::string>; })
      b.identity += "|" + std::string(q.cache_key());
  }
  if constexpr (traits::has_ep_context) {
    auto c = std::make_shared<ep_context_binding>();
    for (std::string_view k : Q::source_keys) c->source_keys.emplace_back(k);
    c->short_name = std::string(traits::short_name);
    c->multi_graph = Q::multi_graph_context;
    c->sdk_version = std::string(q.ep_sdk_version());
    c->hardware = std::string(q.hardware_architecture());
    if constexpr (requires { { q.hardware_supported(std::string_view()) } -> std::convertible_to<bool>; })
      c->hardware_supported = [&q](std::string_view h) { return bool(q.hardware_supported(h)); };
    else
      c->hardware_supported = [hw = c->hardware](std::string_view h) { return h == hw; };
    if constexpr (full)
      c->serialize = [&q](const partition& p, const compute_function& f, ep_context_builder& w) { return q.serialize(p, f, w); };
    c->open = &ep_context_binary::from_bytes;
    if constexpr (requires { requires bool(Q::verifies_context_tensors); })
      c->restore = [&q](const ep_context_restore& r) { return q.restore(r); };
    else
      c->restore = [&q](const ep_context_restore& r) -> Result<compute_function> {
        if (auto st = r.binary->verify_tensors(r.graph->tensors, r.verify_threads); !st) return st;
        return q.restore(r);
      };
    b.context = std::move(c);
  }
  return b;
}
}  // namespace detail

/// @brief The binding of provider `q` (which must outlive it).
template <class Q>
[[nodiscard]] provider_binding make_binding(const Q& q) {
  return detail::binding_of<true>(q);
}

/// @brief The part of provider `q`'s binding that a session of an already compiled model uses (a deployment model):
/// its type, compile, allocator, thread runtime and the restoring of EP contexts; not what partitioning, placement,
/// optimisation or EPContext generation ask (so a deployable links none of it).
template <class Q>
[[nodiscard]] provider_binding make_runtime_binding(const Q& q) {
  return detail::binding_of<false>(q);
}

/// @brief The bindings of every provider of a tuple, in order (the tuple must outlive them).
template <class Tuple>
[[nodiscard]] std::vector<provider_binding> make_bindings(const Tuple& providers) {
  std::vector<provider_binding> r;
  std::apply([&r](const auto&... p) { (r.push_back(make_binding(p)), ...); }, providers);
  return r;
}

}  // namespace epstack

namespace epstack {
/// @brief `make_runtime_binding` of every provider of a tuple, in order (the tuple must outlive them).
template <class Tuple>
[[nodiscard]] std::vector<provider_binding> make_runtime_bindings(const Tuple& providers) {
  std::vector<provider_binding> r;
  std::apply([&r](const auto&... p) { (r.push_back(make_runtime_binding(p)), ...); }, providers);
  return r;
}
}  // namespace epstack
