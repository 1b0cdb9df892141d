#pragma once
/// @file session.hpp
/// @brief `session<P...>`: a model optimised, partitioned over a compile-time stack of providers, compiled, and run.
///
/// The CPU provider (type key "CPUExecutionProvider") is appended when the list lacks it; include
/// <epstack/providers/cpu.hpp> for it. Priority is the order of the list. `run` is `const` and safe to call from many
/// threads at once. The work that does not depend on the provider types (loading, optimisation, partitioning,
/// execution) is compiled once in `epstack::runtime` (session_core.hpp); this header is the typed layer over it.

#include <epstack/core/session_options.hpp>
#include <epstack/deploy/prepare.hpp>
#include <epstack/onnx/onnx_io.hpp>
#include <epstack/provider/binding.hpp>
#include <epstack/runtime/compile_cache.hpp>
#include <epstack/runtime/session_core.hpp>

#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/list.hpp>

#include <array>
#include <cstdint>
#include <cstring>

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace epstack {

struct cpu_provider;  // <epstack/providers/cpu.hpp>

namespace detail {
template <class P>
struct is_cpu_key : std::bool_constant<provider_traits<P>::type_key == cpu_provider_key> {};

// The provider list with the CPU provider appended when no provider has its key.
template <class L>
using with_cpu_fallback =
    boost::mp11::mp_if<boost::mp11::mp_any_of<L, is_cpu_key>, L, boost::mp11::mp_push_back<L, cpu_provider>>;

}  // namespace detail

/// @brief A model on a provider stack. Create it from a path, bytes or an in-memory model; `run` is thread-safe.
/// Providers are taken in the order of `P...` (any `L<T...>` list works through `basic_session_from`).
template <class... P>
class basic_session {
 public:
  using providers_type = std::tuple<P...>;
  static_assert(sizeof...(P) > 0, "epstack: a session needs at least one provider");
  static_assert((check_provider<P>() && ...));

  /// @brief Loads the model at `path` and prepares it: optimise, partition, compile. Errors as `load_model`, the
  /// optimiser and the partitioner.
  /// With `epstack.cache_dir` set, through the compile cache (runtime/compile_cache.hpp): an EPContext model compiled
  /// before from the same model, stack and options is loaded instead of compiling; else one is written for next time.
  /// A deployment model (deploy/deployment.hpp) is recognised by its first bytes and loaded as `create_deployed` does.
  [[nodiscard]] static Result<basic_session> create(const std::filesystem::path& path, const session_options& options = {},
                                                    providers_type providers = {}) {
    if (is_deployment_file(path)) return create_deployed(path, options, std::move(providers));
    if (cached(options)) return create_cached(path, {}, options, std::move(providers));
    EPSTACK_ASSIGN_OR_RETURN(auto m, load_model(path, load_options_of(options)));
    return create_prepared(std::move(m), options, std::move(providers));
  }
  /// @brief From serialized bytes; external data are looked up in
  /// `session.model_external_initializers_file_folder_path`.
  [[nodiscard]] static Result<basic_session> create(std::span<const std::byte> bytes, const session_options& options = {},
                                                    providers_type providers = {}) {
    if (is_deployment(bytes)) return create_deployed(bytes, options, std::move(providers));
    if (cached(options)) return create_cached({}, bytes, options, std::move(providers));
    EPSTACK_ASSIGN_OR_RETURN(auto m, load_model(bytes, load_options_of(options)));
    return create_prepared(std::move(m), options, std::move(providers));
  }
  /// @brief From a model built in memory (validated, and its value types inferred first).
  [[nodiscard]] static Result<basic_session> create(model m, const session_options& options = {},
                                                    providers_type providers = {}) {
    EPSTACK_RETURN_IF_ERROR(session_core::validate_and_infer(m));
    return create_prepared(std::move(m), options, std::move(providers));
  }

  /// @brief Loads the deployment model at `path` (written by `compile_model` with `compile_format::deploy`): its
  /// graph as compiled, its weights memory-mapped, its compiled partitions restored; nothing is optimised,
  /// partitioned or compiled again but the CPU provider's kernels. Needs neither protobuf nor onnx: a program that
  /// creates sessions this way only links epstack::deploy and its providers. Errors as `open_deployment` and
  /// `assemble_deployment` (a node whose provider or kernel the stack lacks is not_implemented, naming it).
  [[nodiscard]] static Result<basic_session> create_deployed(const std::filesystem::path& path,
                                                             const session_options& options = {},
                                                             providers_type providers = {}) {
    EPSTACK_ASSIGN_OR_RETURN(auto d, open_deployment(path));
    return create_from(std::move(d), options, std::move(providers));
  }
  /// @brief From the bytes of a deployment model. They are copied, unless session option
  /// `session.use_ort_model_bytes_directly` is 1 (ONNX Runtime's key) and they are 64-byte aligned: then the session
  /// reads them in place and the caller keeps them alive and unchanged while it lives.
  [[nodiscard]] static Result<basic_session> create_deployed(std::span<const std::byte> bytes,
                                                             const session_options& options = {},
                                                             providers_type providers = {}) {
    std::shared_ptr<const void> owner;
    if (!options.flag(config_keys::use_model_bytes_directly) ||
        reinterpret_cast<std::uintptr_t>(bytes.data()) % tensor_alignment != 0) {
      auto copy = std::make_shared<tensor>(tensor::uninitialized(element_type::uint8,
                                                                 std::array{static_cast<std::int64_t>(bytes.size())}));
      if (!bytes.empty()) std::memcpy(copy->mutable_data(), bytes.data(), bytes.size());
      bytes = copy->bytes();
      owner = std::move(copy);
    }
    EPSTACK_ASSIGN_OR_RETURN(auto d, read_deployment(bytes, std::move(owner)));
    return create_from(std::move(d), options, std::move(providers));
  }

  /// @brief Runs the model: `inputs` by name; `outputs` names the outputs wanted (all, in graph order, when empty).
  /// invalid_argument, naming the input, for an unknown or missing input or a wrong element type, rank or dimension;
  /// invalid_argument for an output that is not a tensor (use `run_values`).
  [[nodiscard]] Result<std::vector<tensor>> run(std::span<const named_tensor> inputs,
                                                std::span<const std::string> outputs = {}) const {
    std::vector<named_value> feeds;
    feeds.reserve(inputs.size());
    for (const auto& i : inputs) feeds.push_back({i.name, i.value});
    EPSTACK_ASSIGN_OR_RETURN(auto values, core_->run(feeds, outputs));
    std::vector<tensor> r;
    r.reserve(values.size());
    for (std::size_t k = 0; k < values.size(); ++k) {
      if (!values[k].is_tensor())
        return Status(errc::invalid_argument, "output " + std::to_string(k) + " is a " + values[k].kind_name() +
                                                  ", not a tensor: use run_values");
      r.push_back(std::move(values[k].as_tensor()));
    }
    return r;
  }
  [[nodiscard]] Result<std::vector<tensor>> run(std::initializer_list<named_tensor> inputs) const {
    return run(std::span<const named_tensor>(inputs.begin(), inputs.size()));
  }
  /// @brief Like `run`, with inputs and outputs that may be sequences or none.
  [[nodiscard]] Result<std::vector<ivalue>> run_values(std::span<const named_value> inputs,
                                                       std::span<const std::string> outputs = {}) const {
    return core_->run(inputs, outputs);
  }

  [[nodiscard]] const std::vector<io_info>& inputs() const noexcept { return core_->inputs(); }
  [[nodiscard]] const std::vector<io_info>& outputs() const noexcept { return core_->outputs(); }
  /// Which provider got which node, and why the rest fell back.
  [[nodiscard]] const partition_plan& plan() const noexcept { return core_->plan(); }
  /// Threads of the session's intra-op pool (the option's value, or the machine's core count when it was 0).
  [[nodiscard]] int intra_op_threads() const noexcept { return core_->intra_op_threads(); }
  /// Where the intra-op loops run: "epstack" (the session's own workers) or a provider's runtime ("OpenMP (libgomp)"
  /// when the oneDNN provider has partitions in the plan; session option epstack.intra_op_runtime).
  [[nodiscard]] std::string_view intra_op_runtime() const noexcept { return core_->intra_op_runtime(); }
  /// What graph optimisation did.
  [[nodiscard]] const optimization_report& optimizations() const noexcept { return core_->optimizations(); }
  /// The model as it runs (after optimisation).
  [[nodiscard]] const model& get_model() const noexcept { return core_->get_model(); }
  [[nodiscard]] const providers_type& providers() const noexcept { return *providers_; }
  /// Memory the executor keeps for reuse between runs.
  [[nodiscard]] session_core::memory_stats memory() const { return core_->memory(); }
  /// Time per step over every run so far (empty unless `session_options::enable_profiling`).
  [[nodiscard]] std::vector<session_core::step_profile> profile() const { return core_->profile(); }
  /// What the session loaded from an EPContext model, or wrote with `ep.context_enable` (and its warnings).
  [[nodiscard]] const ep_context_report& ep_context() const noexcept { return core_->ep_context(); }

  /// @brief Whether the EPContext model at `path` would load on this stack, without creating a session: every
  /// EPContext node's source recognised, its context found and verified, made by this SDK version for hardware this
  /// machine has. OK (also for a model without EPContext nodes), or the invalid_graph a session would report.
  [[nodiscard]] static Status check_compatibility(const std::filesystem::path& path, const session_options& options = {},
                                                  providers_type providers = {}) {
    load_options lo = load_options_of(options);
    lo.shape_inference = shape_inference_mode::off;
    EPSTACK_ASSIGN_OR_RETURN(auto m, load_model(path, lo));
    return session_core::check_compatibility(m, make_bindings(providers), options);
  }
  /// From serialized bytes (embed_mode 0 binaries need `ep.context_file_path` for their folder).
  [[nodiscard]] static Status check_compatibility(std::span<const std::byte> bytes, const session_options& options = {},
                                                  providers_type providers = {}) {
    load_options lo = load_options_of(options);
    lo.shape_inference = shape_inference_mode::off;
    EPSTACK_ASSIGN_OR_RETURN(auto m, load_model(bytes, lo));
    return session_core::check_compatibility(m, make_bindings(providers), options);
  }

  /// @brief How the compiled model at `path` suits each provider of this stack, without creating a session (ONNX
  /// Runtime's GetModelCompatibilityForEpDevices): one verdict per provider, in stack order, with the reason. Read
  /// from the model's `ep_compatibility_info.<provider type>` metadata; the context binaries are not opened.
  [[nodiscard]] static Result<std::vector<ep_compatibility>> compiled_model_compatibility(const std::filesystem::path& path,
                                                                                         providers_type providers = {}) {
    load_options lo;
    lo.shape_inference = shape_inference_mode::off;
    EPSTACK_ASSIGN_OR_RETURN(auto m, load_model(path, lo));
    return session_core::compiled_model_compatibility(m, make_bindings(providers));
  }
  /// From serialized bytes.
  [[nodiscard]] static Result<std::vector<ep_compatibility>> compiled_model_compatibility(std::span<const std::byte> bytes,
                                                                                         providers_type providers = {}) {
    load_options lo;
    lo.shape_inference = shape_inference_mode::off;
    EPSTACK_ASSIGN_OR_RETURN(auto m, load_model(bytes, lo));
    return session_core::compiled_model_compatibility(m, make_bindings(providers));
  }

 private:
  static Result<basic_session> create_from(deployment d, const session_options& options, providers_type providers) {
    auto keep = std::make_shared<providers_type>(std::move(providers));
    EPSTACK_ASSIGN_OR_RETURN(auto core, assemble_deployment(std::move(d), make_runtime_bindings(*keep), options));
    return basic_session(std::move(core), std::move(keep));
  }
  static Result<basic_session> create_prepared(model m, const session_options& options, providers_type providers) {
    return create_kept(std::move(m), options, std::make_shared<providers_type>(std::move(providers)));
  }
  static Result<basic_session> create_kept(model m, const session_options& options, std::shared_ptr<providers_type> keep) {
    EPSTACK_ASSIGN_OR_RETURN(auto core, session_core::build(std::move(m), make_bindings(*keep), options));
    return basic_session(std::move(core), std::move(keep));
  }
  static bool cached(const session_options& o) {
    const auto dir = o.config(config_keys::cache_dir);
    return dir && !dir->empty();
  }
  // The cache decides what the session is created from (an entry's _ctx.onnx, or the source to compile and write).
  static Result<basic_session> create_cached(const std::filesystem::path& path, std::span<const std::byte> bytes,
                                             const session_options& options, providers_type providers) {
    auto keep = std::make_shared<providers_type>(std::move(providers));
    std::optional<basic_session> made;
    const auto make = [&](const std::filesystem::path& from, const session_options& so) -> Result<ep_context_report> {
      made.reset();
      auto m = from.empty() ? load_model(bytes, load_options_of(so)) : load_model(from, load_options_of(so));
      if (!m) return m.status();
      auto s = create_kept(std::move(*m), so, keep);
      if (!s) return s.status();
      made.emplace(std::move(*s));
      return made->ep_context();
    };
    EPSTACK_RETURN_IF_ERROR(cache::create_through_cache(path, bytes, make_bindings(*keep), options, make).status());
    return std::move(*made);
  }

  basic_session(std::shared_ptr<const session_core> core, std::shared_ptr<providers_type> providers)
      : core_(std::move(core)), providers_(std::move(providers)) {}
  static load_options load_options_of(const session_options& o) {
    load_options lo;
    if (auto f = o.config(config_keys::external_initializers_folder)) lo.external_data_folder = std::string(*f);
    return lo;
  }

  std::shared_ptr<const session_core> core_;
  std::shared_ptr<providers_type> providers_;  // compiled functions may refer to their provider
};

namespace detail {
template <class L>
struct session_from;
template <template <class...> class L, class... P>
struct session_from<L<P...>> {
  using type = basic_session<P...>;
};
}  // namespace detail

/// `basic_session` over the providers of any list type `L<P...>` (e.g. `boost::mp11::mp_list`), as given.
template <class L>
using basic_session_from = typename detail::session_from<L>::type;

/// @brief The session of a provider stack: `session<dnnl_provider, cpu_provider>`; the CPU provider is appended when
/// the list lacks it. An error "incomplete type epstack::cpu_provider" here means <epstack/providers/cpu.hpp> is not
/// included.
template <class... P>
using session = basic_session_from<detail::with_cpu_fallback<boost::mp11::mp_list<P...>>>;

}  // namespace epstack
