#pragma once
/// @file contract.hpp
/// @brief The provider contract: everything an execution provider may implement, required and optional, in one
/// place. A provider is a copyable type; a session holds one object of it per stack entry and calls its members
/// through one type-erased binding (binding.hpp). Nothing here depends on the runtime: a provider's library links
/// `epstack::provider` alone.
///
/// Required (the `execution_provider` concept; `check_execution_provider<P>()` says in words what is missing):
/// - `using provider_concept = epstack::execution_provider_tag;` the opt-in;
/// - `static constexpr std::string_view type_key`, e.g. "CPUExecutionProvider": unique in a stack;
/// - `std::vector<capability> get_capability(const graph_view<graph>&) const`;
/// - `Result<std::vector<compute_function>> compile(std::span<const partition>) const`;
/// - copy constructible.
///
/// Optional, detected and reported by `provider_traits<P>`:
/// - `static constexpr std::string_view short_name` ("cpu", "dnnl"): what `--providers` accepts and the `[ep]` of
///   `[model]_[ep].bin` (the type key when absent);
/// - `std::string why_not(const graph&, node_id) const`;
/// - `static bool has_op(std::string_view domain, std::string_view op_type)` (constexpr allowed);
/// - `void* allocate(std::size_t) const` with `void deallocate(void*, std::size_t) const`;
/// - `static constexpr data_layout preferred_layout`;
/// - `double estimate_cost(const graph&, std::span<const node_id> nodes) const`: the provider's estimate, in
///   microseconds, of one run of `nodes` (a capability it returned, with the graph's inferred shapes); negative when it
///   cannot say (unknown shapes). With it, the partitioner places by cost where several providers could take a node.
/// - `static parallel_runtime intra_op_runtime()`: the thread runtime the provider's library runs on (oneDNN's
///   OpenMP); the session's intra-op loops then run on it too, one set of threads for the whole stack.
///
/// EP context (the `ep_context_provider` concept, ep-context-design.md): opt in with
/// `using ep_context_concept = epstack::ep_context_tag;` and provide every member below;
/// `check_ep_context_provider<P>()` (which every session runs for a provider that opts in) names the one missing. A
/// provider that has `serialize` and `restore` without the opt-in is refused too, so a spelling mistake never turns
/// caching off in silence.
/// - `static constexpr std::array<std::string_view, N> source_keys`;
/// - `static constexpr bool multi_graph_context`;
/// - `std::string ep_sdk_version() const`, `std::string hardware_architecture() const`;
/// - `Result<ep_context_record> serialize(const partition&, const compute_function&, ep_context_builder&) const`;
/// - `Result<compute_function> restore(const ep_context_restore&) const`;
/// - optional: `bool hardware_supported(std::string_view recorded) const`;
/// - optional: `static constexpr bool verifies_context_tensors = true`.

#include <epstack/ir/graph_view.hpp>
#include <epstack/provider/capability.hpp>
#include <epstack/provider/compute.hpp>
#include <epstack/provider/context_binary.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace epstack {

/// The tag a provider names as its `provider_concept` to opt in to `execution_provider`.
struct execution_provider_tag {};
/// The tag a provider names as its `ep_context_concept` to opt in to `ep_context_provider`.
struct ep_context_tag {};

/// Layouts of 4-D activations a provider may prefer (ONNX Runtime's DataLayout).
enum class data_layout : std::uint8_t { nchw, nhwc };

/// The CPU provider's type key: the fallback of every stack, and the provider that folds constants.
inline constexpr std::string_view cpu_provider_key = "CPUExecutionProvider";

/// @brief What `serialize` gives for one compiled partition: the provider's own record (payload) and the tensors it
/// added to the builder (stored once by content across every graph of the binary).
struct ep_context_record {
  std::vector<std::byte> payload;
  std::vector<std::uint32_t> tensors;
};

/// @brief What `restore` is given: the compiled graph (payload, tensor indices, boundary names), the verified binary
/// it comes from (keep `binary` alive as long as the function reads its tensors: they are mapped in place), and the
/// EPContext node's partition in the model being loaded. The function reads the partition's inputs and writes its
/// outputs in the order of the EPContext node (the graph record's `inputs` and `outputs`).
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
// One concept per customization point, so that a check can name the one that is missing.
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
concept provider_has_compile = requires(const P& p, std::span<const partition> parts) {
  { p.compile(parts) } -> std::same_as<Result<std::vector<compute_function>>>;
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
concept provider_has_op_query = requires(std::string_view d, std::string_view op) {
  { P::has_op(d, op) } -> std::convertible_to<bool>;
};
template <class P>
concept provider_has_cost_estimate = requires(const P& p, const graph& g, std::span<const node_id> nodes) {
  { p.estimate_cost(g, nodes) } -> std::convertible_to<double>;
};

template <class P>
concept provider_has_intra_op_runtime = requires {
  { P::intra_op_runtime() } -> std::same_as<parallel_runtime>;
};

template <class P>
concept context_opts_in = requires { typename P::ep_context_concept; } &&
                          std::same_as<typename P::ep_context_concept, ep_context_tag>;
template <class P>
concept context_has_source_keys = requires { std::span<const std::string_view>(P::source_keys); };
template <class P>
concept context_has_multi_graph = requires {
  { P::multi_graph_context } -> std::convertible_to<bool>;
};
template <class P>
concept context_has_versions = requires(const P& p) {
  { p.ep_sdk_version() } -> std::convertible_to<std::string>;
  { p.hardware_architecture() } -> std::convertible_to<std::string>;
};
template <class P>
concept context_has_serialize = requires(const P& p, const partition& part, const compute_function& fn,
                                         ep_context_builder& b) {
  { p.serialize(part, fn, b) } -> std::same_as<Result<ep_context_record>>;
};
template <class P>
concept context_has_restore = requires(const P& p, const ep_context_restore& r) {
  { p.restore(r) } -> std::same_as<Result<compute_function>>;
};
// Looks like an EP-context provider: names a serialize or restore member, whatever its signature.
template <class P>
concept context_members_present = requires { &P::serialize; } || requires { &P::restore; };
}  // namespace detail

/// @brief A type that can take part in a session's provider stack.
template <class P>
concept execution_provider = detail::provider_opts_in<P> && detail::provider_has_type_key<P> &&
                             detail::provider_has_get_capability<P> && detail::provider_has_compile<P> &&
                             std::is_copy_constructible_v<P>;

/// @brief An execution provider whose compiled partitions can be written to and read from EPContext models.
template <class P>
concept ep_context_provider = execution_provider<P> && detail::context_opts_in<P> && detail::context_has_source_keys<P> &&
                              detail::context_has_multi_graph<P> && detail::context_has_versions<P> &&
                              detail::context_has_serialize<P> && detail::context_has_restore<P>;

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

/// @brief Checks `ep_context_provider<P>` for a provider that opts in (and refuses one that has `serialize` or
/// `restore` without opting in), saying in words which member is missing. True for a provider without EP context.
template <class P>
consteval bool check_ep_context_provider() {
  if constexpr (!detail::context_opts_in<P>) {
    static_assert(!detail::context_members_present<P>,
                  "epstack: this provider has `serialize` or `restore` but does not opt in to EP contexts: declare "
                  "`using ep_context_concept = epstack::ep_context_tag;` (or remove them)");
    return true;
  } else {
    static_assert(detail::context_has_source_keys<P>,
                  "epstack: an EP-context provider needs `static constexpr std::array<std::string_view, N> source_keys` "
                  "(its type key first)");
    static_assert(detail::context_has_multi_graph<P>,
                  "epstack: an EP-context provider needs `static constexpr bool multi_graph_context`");
    static_assert(detail::context_has_versions<P>,
                  "epstack: an EP-context provider needs `std::string ep_sdk_version() const` and `std::string "
                  "hardware_architecture() const`");
    static_assert(detail::context_has_serialize<P>,
                  "epstack: an EP-context provider needs `epstack::Result<epstack::ep_context_record> serialize(const "
                  "epstack::partition&, const epstack::compute_function&, epstack::ep_context_builder&) const`");
    static_assert(detail::context_has_restore<P>,
                  "epstack: an EP-context provider needs `epstack::Result<epstack::compute_function> restore(const "
                  "epstack::ep_context_restore&) const`");
    return ep_context_provider<P>;
  }
}

/// @brief Every check a session makes of a provider type.
template <class P>
consteval bool check_provider() {
  return check_execution_provider<P>() && check_ep_context_provider<P>();
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
  /// True when the provider brings its own allocator: the intermediate outputs of its partitions are allocated with
  /// it (64-byte aligned; null when out of memory) instead of the run's arena.
  static constexpr bool has_allocator = detail::provider_has_allocator<P>;
  /// True when the provider explains refusals: `why_not` is empty when it takes the node; the partition plan shows
  /// the reason beside each node that fell back to the CPU provider.
  static constexpr bool has_why_not = detail::provider_has_why_not<P>;
  /// True when the provider can say which operators it implements: the graph optimiser fuses into an operator only
  /// when the fallback provider can run it.
  static constexpr bool has_op_query = detail::provider_has_op_query<P>;
  /// True when the provider estimates the cost of running nodes (placement by cost).
  static constexpr bool has_cost_estimate = detail::provider_has_cost_estimate<P>;
  /// True when the provider names the thread runtime its library runs on: the session's loops run on it as well.
  static constexpr bool has_intra_op_runtime = detail::provider_has_intra_op_runtime<P>;
  /// True when the provider opted in to EP contexts (and, checked by `check_ep_context_provider`, has every member).
  static constexpr bool has_ep_context = ep_context_provider<P>;
  /// The layout the provider prefers for 4-D activations (ONNX Runtime's GetPreferredLayout): its
  /// `preferred_layout` when declared, else NCHW. Declared and reported; the layout transformation that acts on it
  /// arrives with the first provider that prefers NHWC.
  static constexpr data_layout preferred_layout = [] {
    if constexpr (requires { P::preferred_layout; }) return data_layout(P::preferred_layout);
    else return data_layout::nchw;
  }();
};

/// @brief Every customization point as a declaration, one Doxygen block each: an exposition of the contract (no
/// definitions; checked below to satisfy both concepts). Copy what you need into your provider;
/// examples/custom_provider.cpp is a complete one.
struct provider_archetype {
  /// Required: the opt-in to `execution_provider`.
  using provider_concept = execution_provider_tag;
  /// Required: the provider's key, unique in a stack (ONNX Runtime's `Type()`), e.g. "DnnlExecutionProvider".
  static constexpr std::string_view type_key = "ArchetypeExecutionProvider";
  /// Optional: the short name `--providers` accepts and the `[ep]` of `[model]_[ep].bin` (default: `type_key`).
  static constexpr std::string_view short_name = "archetype";
  /// Required: among the view's nodes (those no provider earlier in the stack took), what this provider runs:
  /// `capability::single(n)` for one node, `capability::group(nodes, meta_def)` for a group fused into one partition
  /// (taken whole or not at all; never one that would make the graph cyclic). ONNX Runtime's `GetCapability`.
  std::vector<capability> get_capability(const graph_view<graph>& view) const;
  /// Required: one function per partition it was given, in order, in one call (fused groups and single nodes). The
  /// functions are `const`, called from many threads at once, and may refer to this provider object (the session
  /// keeps it alive). ONNX Runtime's `Compile`.
  Result<std::vector<compute_function>> compile(std::span<const partition> parts) const;
  /// Optional: why the provider does not take node `n` (empty when it does); shown in the partition plan.
  std::string why_not(const graph& g, node_id n) const;
  /// Optional: whether the provider implements operator `op_type` of `domain` ("" is ONNX); the optimiser asks the
  /// CPU provider before it fuses into an operator.
  static bool has_op(std::string_view domain, std::string_view op_type);
  /// Optional, with `deallocate`: memory for the intermediate outputs of this provider's partitions, 64-byte aligned,
  /// null when out of memory (ONNX Runtime's allocator of an EP).
  void* allocate(std::size_t bytes) const;
  /// Optional, with `allocate`: frees what `allocate` gave.
  void deallocate(void* p, std::size_t bytes) const;
  /// Optional: the layout wanted for 4-D activations (default NCHW).
  static constexpr data_layout preferred_layout = data_layout::nchw;
  /// Optional: the estimated microseconds of one run of `nodes` on this provider (negative: unknown).
  double estimate_cost(const graph& g, std::span<const node_id> nodes) const;
  /// Optional: the thread runtime the provider's library keeps threads on; the session runs its intra-op loops on it
  /// so that one set of threads serves every provider of the stack (the first provider that names one decides).
  static parallel_runtime intra_op_runtime();

  /// EP context: the opt-in to `ep_context_provider`.
  using ep_context_concept = ep_context_tag;
  /// EP context: the EPContext `source` values it claims, its type key first (what it writes); matched exactly, and
  /// its short name case-insensitively.
  static constexpr std::array<std::string_view, 1> source_keys{"ArchetypeExecutionProvider"};
  /// EP context: whether one context may hold several compiled graphs (false: one EPContext node, and with
  /// embed_mode 0 one binary, per partition).
  static constexpr bool multi_graph_context = true;
  /// EP context: the SDK version an EPContext node records and a load must match.
  std::string ep_sdk_version() const;
  /// EP context: the hardware a context is compiled for, recorded and matched on load.
  std::string hardware_architecture() const;
  /// EP context, optional: whether a context compiled for `recorded` runs here (default: equal to
  /// `hardware_architecture()`).
  bool hardware_supported(std::string_view recorded) const;
  /// EP context: partition `part`, compiled to `fn` by `compile`, as a payload plus tensors added to `builder`.
  Result<ep_context_record> serialize(const partition& part, const compute_function& fn, ep_context_builder& builder) const;
  /// EP context: the function back from a verified binary, compiling nothing.
  Result<compute_function> restore(const ep_context_restore& r) const;
  /// EP context, optional: the provider verifies each tensor of the binary itself before it first reads it
  /// (`ep_context_binary::verify_tensors`); without it every tensor of the graph is verified before `restore`.
  static constexpr bool verifies_context_tensors = true;
};
static_assert(check_provider<provider_archetype>() && provider_traits<provider_archetype>::has_allocator &&
              provider_traits<provider_archetype>::has_why_not && provider_traits<provider_archetype>::has_op_query &&
              provider_traits<provider_archetype>::has_cost_estimate &&
              provider_traits<provider_archetype>::has_intra_op_runtime);

}  // namespace epstack
