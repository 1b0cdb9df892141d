#pragma once
/// @file contexts.hpp
/// @brief EPContext models, the stage beside the pipeline (library epstack::ep_context): loading the contexts an
/// EPContext model names (embedded or in binaries beside it, through the shared workspace with
/// ep.share_ep_contexts), and generating an EPContext model from a compiled session (ep.context_enable). The session
/// core calls these; a user calls `session<P...>` or `compile_model` (runtime/compile_model.hpp) instead.

#include <epstack/core/session_options.hpp>
#include <epstack/ep_context/report.hpp>
#include <epstack/ir/model.hpp>
#include <epstack/partition/plan.hpp>
#include <epstack/provider/binding.hpp>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace epstack::ctx {

/// True for a com.microsoft EPContext node.
[[nodiscard]] bool is_ep_context_node(const node& n);

/// One EPContext node of a model being loaded, resolved to its provider and compiled graph.
struct loaded_node {
  std::size_t provider = 0;
  std::shared_ptr<const ep_context_binary> binary;
  const ep_context_graph* graph = nullptr;
};
struct load_result {
  std::map<std::string, loaded_node, std::less<>> nodes;  ///< by node name
  std::vector<std::string> files_read;
  std::size_t from_workspace = 0;
  std::filesystem::path source_model_read;  ///< weightless contexts: the source model read ("<buffer>" for bytes)
};

/// Threads a load hashes context tensors on: the session's intra-op threads.
[[nodiscard]] unsigned verify_threads(const session_options& o);
/// Whether `epstack.ep_context_verify` asks for every tensor to be verified while loading (on_load) rather than
/// before its first use (on_use, the default); invalid_argument for another value.
[[nodiscard]] Result<bool> verify_tensors_on_load(const session_options& o);

/// The source model of a weightless context as the session that compiled it optimised it (the same stack and
/// options): what a load derives fused and folded weights from.
using source_optimizer = std::function<Result<model>(model source)>;
/// The model metadata key under which a weightless context model records how its source was optimised
/// ("level=N;dim=name=value;..."): a load optimises the source model the same way, whatever its own options.
inline constexpr std::string_view weightless_optimization_metadata = "epstack.weightless_optimization";
/// The session options `weightless_optimization_metadata`'s value stands for (nullopt: it does not parse).
[[nodiscard]] std::optional<session_options> weightless_optimization_of(std::string_view recorded);

/// Resolves every EPContext node of `m`'s main graph. `m` non-null: embedded payloads are moved out of its attributes
/// (into aligned memory the binaries own); null with `check_only`: nothing is changed, the shared workspace included.
[[nodiscard]] Result<load_result> load_contexts(const model& src, model* m, const std::vector<provider_binding>& providers,
                                                const session_options& options, bool check_only,
                                                const source_optimizer& optimise = {});

/// What generation will write, decided before anything is compiled.
struct generation {
  std::filesystem::path model_path;  ///< the `_ctx.onnx`
  std::string model_name;            ///< [model_name] of `[model_name]_[ep].bin`
  std::string source_filename;       ///< onnx_model_filename
  std::string prefix;                ///< ep.context_node_name_prefix (or the model name when sharing)
  int embed_mode = 0;
  std::string external_initializers;  ///< ep.context_model_external_initializers_file_name
  bool share = false, stop_share = false;
  std::filesystem::path refuse_existing_in;  ///< epstack.ep_context_refuse_existing_in: checked beside the model's folder
  bool weightless = false;           ///< ep.enable_weightless_mode 2 (or the deprecated ep.enable_weightless 1)
  bool weightless_recorded = false;  ///< the mode was named: `weightless_mode` goes into the model's metadata
  weight_source weights;             ///< the source model's initializers, indexed before optimisation (weightless)
  /// Every node of the model written records the provider that runs it (node metadata `placement_metadata_key`), not
  /// only those placement by cost moved: what a deployment model needs.
  bool record_placement = false;
  /// When set, the EPContext model is handed to it instead of being written as files (with embed_mode 1, its
  /// binaries are inside it); it is built even when nothing was compiled. (The deployment model's writer.)
  std::function<Status(const model& ctx_model)> sink;
  /// The places a file generation writes as `name` may not exist: the model's folder, and refuse_existing_in.
  [[nodiscard]] std::vector<std::filesystem::path> places_of(const std::filesystem::path& name) const {
    std::vector<std::filesystem::path> r{model_path.parent_path() / name};
    if (!refuse_existing_in.empty()) r.push_back(refuse_existing_in / name);
    return r;
  }
};

/// nullopt when ep.context_enable is not 1; errors for a bad or existing output and for a model already compiled.
[[nodiscard]] Result<std::optional<generation>> plan_generation(const model& m, const session_options& options);

/// @brief What a session writes as a deployment model (config_keys::deploy_file_path): nullopt when not asked;
/// errors for an existing file, a model already compiled (EPContext nodes) and ep.context_enable asked as well. The
/// caller sets the generation's `sink`.
[[nodiscard]] Result<std::optional<generation>> plan_deployment(const model& m, const session_options& options);

/// The initializers of `m`'s main graph by content, for a weightless generation (`generation::weights`): hashed now
/// (the source model before optimisation, or as optimised with `derived`); the index keeps the tensors alive.
/// Derived weights smaller than `derived_min_bytes` are not indexed: they stay in the binary (see
/// config_keys::weightless_derived_min_bytes).
[[nodiscard]] weight_source index_source_weights(const model& m, bool derived, std::size_t derived_min_bytes = 0);

/// After partitioning, before compiling: no binary that would be written may exist.
[[nodiscard]] Status check_outputs(const generation& gen, const partition_plan& plan,
                                   const std::vector<provider_binding>& providers);

/// The compiled function of partition k of a graph's plan (the main graph's or a control-flow body's).
using function_of = std::function<const compute_function&(const graph_plan& gp, std::size_t k)>;

/// Writes the EPContext model (and binaries) of the compiled session.
[[nodiscard]] Status generate(const model& m, const partition_plan& plan, const function_of& fn,
                              const std::vector<provider_binding>& providers, const generation& gen,
                              const session_options& options, ep_context_report& report);

/// The compatibility string provider `b` writes into a generated model (`<type>;sdk_version=..;hardware_architecture=..`).
[[nodiscard]] std::string compatibility_info(const provider_binding& b);
/// Each provider's verdict on model `m` from its `ep_compatibility_info.<type>` metadata (ONNX Runtime's
/// GetModelCompatibilityForEpDevices over the stack): a provider without an entry, or without EP contexts, is
/// not applicable; an entry that does not parse is unsupported.
[[nodiscard]] std::vector<ep_compatibility> model_compatibility(const model& m, const std::vector<provider_binding>& providers);

/// Reports progress; false when the callback cancelled.
[[nodiscard]] Status progress(const session_options& o, std::string_view stage, std::size_t done, std::size_t total,
                              std::string_view detail = {});

}  // namespace epstack::ctx
