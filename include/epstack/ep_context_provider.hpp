#pragma once
/// @file ep_context_provider.hpp
/// @brief The `ep_context_provider` concept: an execution provider whose compiled partitions can be cached in an
/// EPContext model (shared/spec ep-context-design.md) and restored from it without compiling again.
///
/// A provider opts in, beside what `execution_provider` asks, with:
/// - `static constexpr std::array<std::string_view, N> source_keys`: the EPContext `source` values it claims (its
///   type key first: that is what it writes); matched exactly, and its short name case-insensitively;
/// - `static constexpr bool multi_graph_context`: whether one context may hold several compiled graphs (when false,
///   every partition gets its own context: one EPContext main node each, and with embed_mode 0 one binary each);
/// - `std::string ep_sdk_version() const` and `std::string hardware_architecture() const`: what the EPContext node
///   and the context binary record, and what a context must match to be loaded;
/// - `Result<ep_context_record> serialize(const partition&, const compute_function&, ep_context_builder&) const`:
///   the compiled partition (the function its `compile` returned for it) as a payload plus tensors added to the
///   builder (stored once by content across every graph of the binary);
/// - `Result<compute_function> restore(const ep_context_restore&) const`: the function back, from the payload and
///   tensors of a verified binary, compiling nothing. It reads the partition's runtime inputs and writes its outputs
///   in the order of the EPContext node (the graph record's `inputs` and `outputs`).
/// Optional: `bool hardware_supported(std::string_view recorded) const`: whether a context compiled for `recorded`
/// runs here (default: equal to `hardware_architecture()`).
/// Optional: `static constexpr bool verifies_context_tensors = true`: the provider verifies the binary's tensors
/// itself, each before it first reads it (`ep_context_binary::verify_tensors`/`verify_bytes`; with
/// `ep_context_restore::verify_threads`), so that loading reads no weight it does not need yet. Without it, every
/// tensor of the graph is verified before `restore` is called.

#include <epstack/compute.hpp>
#include <epstack/ep_context_binary.hpp>
#include <epstack/provider_concepts.hpp>

#include <cctype>
#include <concepts>
#include <cstdint>
#include <functional>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace epstack {

/// @brief What a provider's `serialize` gives for one compiled partition: its own record (payload) and the tensors
/// it added to the builder.
struct ep_context_record {
  std::vector<std::byte> payload;
  std::vector<std::uint32_t> tensors;
};

/// @brief What `restore` is given: the compiled graph (payload, tensor indices, boundary names), the verified binary
/// it comes from (keep `binary` alive as long as the function reads its tensors: they are mapped in place), and the
/// EPContext node's partition in the model being loaded.
struct ep_context_restore {
  const ep_context_graph* graph = nullptr;
  std::shared_ptr<const ep_context_binary> binary;
  const partition* part = nullptr;
  /// Threads a provider may hash tensors on (the session's intra-op threads).
  unsigned verify_threads = 1;
  /// The tensors of the graph, in the order the record listed them.
  [[nodiscard]] std::vector<const ep_context_tensor*> tensors() const {
    std::vector<const ep_context_tensor*> r;
    for (auto i : graph->tensors) r.push_back(&binary->tensors()[i]);
    return r;
  }
};

namespace detail {
template <class P>
concept provider_has_context = requires(const P& p, const partition& part, const compute_function& fn,
                                        ep_context_builder& b, const ep_context_restore& r) {
  { std::span<const std::string_view>(P::source_keys) };
  { P::multi_graph_context } -> std::convertible_to<bool>;
  { p.ep_sdk_version() } -> std::convertible_to<std::string>;
  { p.hardware_architecture() } -> std::convertible_to<std::string>;
  { p.serialize(part, fn, b) } -> std::same_as<Result<ep_context_record>>;
  { p.restore(r) } -> std::same_as<Result<compute_function>>;
};
}  // namespace detail

/// @brief An execution provider whose compiled partitions can be written to and read from EPContext models.
template <class P>
concept ep_context_provider = execution_provider<P> && detail::provider_has_context<P>;

/// @brief A provider's EP-context side as the session core sees it (runtime-typed).
struct ep_context_binding {
  std::vector<std::string> source_keys;
  std::string short_name;  ///< `[model]_[short_name].bin`
  bool multi_graph = true;
  std::string sdk_version, hardware;
  std::function<bool(std::string_view)> hardware_supported;
  std::function<Result<ep_context_record>(const partition&, const compute_function&, ep_context_builder&)> serialize;
  std::function<Result<compute_function>(const ep_context_restore&)> restore;

  /// Whether an EPContext `source` value names this provider.
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

/// @brief The binding of provider `q` (which must outlive it).
template <ep_context_provider Q>
[[nodiscard]] std::shared_ptr<const ep_context_binding> make_ep_context_binding(const Q& q) {
  auto b = std::make_shared<ep_context_binding>();
  for (std::string_view k : Q::source_keys) b->source_keys.emplace_back(k);
  b->short_name = std::string(provider_traits<Q>::short_name);
  b->multi_graph = Q::multi_graph_context;
  b->sdk_version = std::string(q.ep_sdk_version());
  b->hardware = std::string(q.hardware_architecture());
  if constexpr (requires { { q.hardware_supported(std::string_view()) } -> std::convertible_to<bool>; })
    b->hardware_supported = [&q](std::string_view h) { return bool(q.hardware_supported(h)); };
  else
    b->hardware_supported = [hw = b->hardware](std::string_view h) { return h == hw; };
  b->serialize = [&q](const partition& p, const compute_function& f, ep_context_builder& w) { return q.serialize(p, f, w); };
  if constexpr (requires { requires bool(Q::verifies_context_tensors); })
    b->restore = [&q](const ep_context_restore& r) { return q.restore(r); };
  else
    b->restore = [&q](const ep_context_restore& r) -> Result<compute_function> {
      if (auto st = r.binary->verify_tensors(r.graph->tensors, r.verify_threads); !st) return st;
      return q.restore(r);
    };
  return b;
}

}  // namespace epstack
