#pragma once
/// @file session_options.hpp
/// @brief Session options: ONNX Runtime's configuration keys as strings, and the intra-op thread count.

#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <cstdint>
#include <vector>

namespace epstack {

/// ONNX Runtime's session configuration keys (onnxruntime_session_options_config_keys.h), the same strings, and
/// epstack's own under "epstack.".
namespace config_keys {
inline constexpr std::string_view disable_cpu_ep_fallback = "session.disable_cpu_ep_fallback";
/// "1": a run flushes subnormal floats to zero (flush-to-zero and denormals-are-zero, float_mode.hpp) on every thread
/// that works on it: the calling thread for the run's duration, the intra-op threads while they work on its loops, and
/// a provider runtime's team (oneDNN's OpenMP threads) for the run; each thread's own mode is restored afterwards.
/// ONNX Runtime sets the bits on its pools' threads and, once per process and for good, on the thread that creates
/// the first session; here they never outlive a run. Off by default, as there: the answers differ where a value is
/// subnormal, and a model exported without subnormals needs none of it.
inline constexpr std::string_view set_denormal_as_zero = "session.set_denormal_as_zero";
/// Whether the session's intra-op workers spin a while after a loop before they sleep (thread_pool.hpp's spin_policy):
/// "1" (the default) lets them; anything else makes them sleep at once, each loop waking them with a system call,
/// so that an idle session never takes a core from the rest of the process. As ONNX Runtime's; it governs the pool's
/// own workers: a stack whose loops run on a provider's thread runtime (oneDNN's OpenMP, epstack.intra_op_runtime)
/// waits as that runtime does (libgomp: OMP_WAIT_POLICY=passive in the environment the process starts with).
inline constexpr std::string_view intra_op_allow_spinning = "session.intra_op.allow_spinning";
/// ONNX Runtime's inter-op pool's: accepted and without effect, as there in sequential execution (epstack runs a
/// graph's nodes one after another and has no inter-op pool).
inline constexpr std::string_view inter_op_allow_spinning = "session.inter_op.allow_spinning";
/// "1": the intra-op workers spin only while a run is in progress, and go to sleep as soon as the last concurrent run
/// returns (ONNX Runtime's: spinning restarts with the next run). Anything else: off.
inline constexpr std::string_view force_spinning_stop = "session.force_spinning_stop";
inline constexpr std::string_view external_initializers_folder = "session.model_external_initializers_file_folder_path";
inline constexpr std::string_view disable_model_compile = "session.disable_model_compile";
/// "1": a session refuses (model_requires_compilation) a compiled model that some provider of the stack rates
/// supported-prefer-recompilation (compiled for older hardware than this machine's: it runs, but not at its best).
inline constexpr std::string_view fail_on_suboptimal_compiled_model = "session.fail_on_suboptimal_compiled_model";
inline constexpr std::string_view ep_context_enable = "ep.context_enable";
inline constexpr std::string_view ep_context_file_path = "ep.context_file_path";
inline constexpr std::string_view ep_context_embed_mode = "ep.context_embed_mode";
inline constexpr std::string_view ep_context_node_name_prefix = "ep.context_node_name_prefix";
inline constexpr std::string_view ep_share_contexts = "ep.share_ep_contexts";
inline constexpr std::string_view ep_stop_share_contexts = "ep.stop_share_ep_contexts";
inline constexpr std::string_view ep_context_external_initializers_file = "ep.context_model_external_initializers_file_name";
/// Weightless EP contexts (ONNX Runtime 1.29+): "0" none (the default), "2" all (every tensor of a context binary that
/// is an initializer of the source model is stored as a reference to it, checked by hash at load), exactly; "1"
/// (external data only) is a mode epstack's providers do not offer (ep_fail), anything else invalid_argument. The
/// mode is recorded in the compiled model's metadata under `weightless_mode`.
inline constexpr std::string_view ep_enable_weightless_mode = "ep.enable_weightless_mode";
/// epstack's own: weights that graph optimisation derived (folded BatchNormalization, folded shapes) are referenced
/// in a weightless context only from this many bytes (default 1048576): a load finds them again by optimising the
/// source model, which costs about a compile's optimisation; smaller ones stay in the binary. 0 references all.
inline constexpr std::string_view weightless_derived_min_bytes = "epstack.weightless_derived_min_bytes";
/// The deprecated switch of the same: "1" asks for weightless contexts in the mode the providers support (all).
inline constexpr std::string_view ep_enable_weightless = "ep.enable_weightless";
/// Where a weightless context's source model is when it is not the EPContext node's onnx_model_filename beside the
/// compiled model (a buffer set with set_weightless_source_model comes first).
inline constexpr std::string_view ep_context_source_model_path = "ep.context_source_model_path";
/// The key of a compiled model's metadata that records its weightless mode (ONNX Runtime's kOrtModelMetadata_WeightlessMode).
inline constexpr std::string_view weightless_mode_metadata = "weightless_mode";
/// epstack's own: when a context binary's tensors are verified against their hashes. "on_use" (the default): each
/// before its first use, so loading reads no weight bytes; "on_load": all of them while the session is created.
/// Either way the binary's structure is verified at load, and damage is invalid_graph naming binary and tensor.
inline constexpr std::string_view ep_context_verify = "epstack.ep_context_verify";
/// epstack's own: a folder in which none of the files generation would write may exist already; checked with the
/// others, before anything is compiled. `compile_model` sets it to its output's folder, since its session writes into
/// a working folder first.
/// epstack's own: the most bytes of compiled contexts an embed_mode 1 model may carry (default and upper bound: 2 GiB
/// less 64 MiB, protobuf's limit on a model with room for the rest); lower it for readers with a smaller limit.
inline constexpr std::string_view ep_context_embed_limit_bytes = "epstack.ep_context_embed_limit_bytes";
/// epstack's own: how the partitioner places nodes that several providers of the stack could run. "estimate" (the
/// default): by the providers' cost estimates, a later provider taking a group when clearly cheaper; "priority":
/// ONNX Runtime's order, the first provider that claims a node takes it; "measure": the candidates compiled and timed
/// on the model's shapes while the session is created (at most epstack.placement_budget_ms, default 2000; the
/// estimates beyond it).
inline constexpr std::string_view placement = "epstack.placement";
inline constexpr std::string_view placement_budget_ms = "epstack.placement_budget_ms";
/// epstack's own: where the session's intra-op loops run. "provider" (the default): on the thread runtime of the first
/// provider of the stack that names one (oneDNN's OpenMP), so that its threads and the session's never spin against
/// each other between partitions; "own": on the session's own workers.
inline constexpr std::string_view intra_op_runtime = "epstack.intra_op_runtime";
/// epstack's own: the layout of the convolution chains the CPU provider runs. "nchwc" (the default, at optimisation level
/// all): blocked channels, 16 per block (ONNX Runtime's NCHWc at that level); "nchw": the plain layout.
inline constexpr std::string_view cpu_layout = "epstack.cpu_layout";
/// epstack's own: "1" (the default) lets the blocked layout run 3x3 unit-stride convolutions as Winograd F(4x4, 3x3)
/// or F(2x2, 3x3) (fewer multiplications; rounding differs from a direct convolution, and a NaN or infinity in the
/// input spreads to its whole output tile); "0": the direct kernels.
inline constexpr std::string_view cpu_winograd = "epstack.cpu_winograd";
/// epstack's own: "1" (the default) lets the blocked layout fuse a 1x1 convolution with the depthwise convolution that
/// alone reads it (MobileNet's expansion and depthwise layers: PointwiseDepthwiseConv, the expansion never stored),
/// and, from 28 output rows, with the 1x1 projection that alone reads the depthwise output; "0": separate convolutions.
inline constexpr std::string_view cpu_fuse_depthwise = "epstack.cpu_fuse_depthwise";
/// epstack's own: "1" (the default, at optimisation level extended and above) lets the CPU provider's MatMul nodes with a
/// constant B take the Add of a constant bias over their columns and a Relu or Gelu after it (or a BiasGelu) into one
/// com.epstack.cpu MatMulBias, applied as the product is stored; "0": the nodes as they are.
inline constexpr std::string_view cpu_fuse_products = "epstack.cpu_fuse_products";
/// epstack's own: a second folder in which the files an EP context generation would write (the model, its binaries)
/// must not exist yet, checked before anything is compiled, as in the model's own folder (`compile_model` sets it to
/// its final output's folder while the session writes into a working folder).
inline constexpr std::string_view ep_context_refuse_existing_in = "epstack.ep_context_refuse_existing_in";
/// ONNX Runtime's key: "1" lets a session created from the bytes of a model read them in place instead of copying them
/// (the deployment format's initializers; the caller keeps the bytes alive and unchanged).
inline constexpr std::string_view use_model_bytes_directly = "session.use_ort_model_bytes_directly";
/// epstack's own: where a session writes the deployment model of what it compiled (deploy/deployment.hpp; what
/// `compile_model` with `compile_format::deploy` sets). An existing file is refused before anything is compiled.
inline constexpr std::string_view deploy_file_path = "epstack.deploy_file_path";
}  // namespace config_keys

/// @brief Where a session's preparation (or `compile_model`) is: `stage` ("optimize", "partition", "compile",
/// "restore", "serialize", "write") and `done` of `total` steps of it.
struct compile_progress {
  std::string_view stage;
  std::size_t done = 0;
  std::size_t total = 0;
  std::string_view detail;  ///< e.g. the provider compiling
};
/// Called between the steps of a session's preparation; returning false cancels it (errc::fail, "cancelled"), before
/// anything is written.
using progress_callback = std::function<bool(const compile_progress&)>;
/// Reads a context binary an EPContext model names (its `ep_cache_context`, as given) from wherever the application
/// keeps it, in place of the file beside the model: decrypted, from a store, from memory. nullopt: not available.
/// (ONNX Runtime's experimental EP-context data read function.)
using context_reader = std::function<std::optional<std::vector<std::byte>>(std::string_view name)>;

/// Graph transformations before partitioning, as ONNX Runtime's `GraphOptimizationLevel`.
enum class graph_optimization_level : std::uint8_t {
  disable,   ///< none
  basic,     ///< constant folding, shape folding, dead-node and Identity elimination
  extended,  ///< also provider-independent fusions (Conv+BatchNormalization, Conv+activation, Gelu, LayerNorm, ...)
  all,       ///< everything (the default, as in ONNX Runtime)
};

/// @brief Options of a session, as ONNX Runtime's `SessionOptions`: config entries, the intra-op thread count, the
/// graph optimisation level and where to save the optimised model.
class session_options {
 public:
  /// Sets a config entry (ONNX Runtime's `AddConfigEntry`); a later call for the same key replaces the value.
  session_options& set_config(std::string_view key, std::string_view value) {
    config_[std::string(key)] = std::string(value);
    return *this;
  }
  /// The value of `key`, if set.
  [[nodiscard]] std::optional<std::string_view> config(std::string_view key) const {
    auto it = config_.find(key);
    if (it == config_.end()) return std::nullopt;
    return std::string_view(it->second);
  }
  /// True when `key` is set to "1".
  [[nodiscard]] bool flag(std::string_view key) const { return config(key) == std::optional<std::string_view>("1"); }
  [[nodiscard]] const std::map<std::string, std::string, std::less<>>& config_entries() const noexcept { return config_; }

  /// Intra-op threads for kernels that parallelise (0: the machine's cores).
  session_options& set_intra_op_threads(int n) {
    intra_op_threads_ = n;
    return *this;
  }
  [[nodiscard]] int intra_op_threads() const noexcept { return intra_op_threads_; }

  /// ONNX Runtime's `graph_optimization_level` (default: all).
  session_options& set_graph_optimization_level(graph_optimization_level l) {
    opt_level_ = l;
    return *this;
  }
  [[nodiscard]] graph_optimization_level optimization_level() const noexcept { return opt_level_; }

  /// ONNX Runtime's `optimized_model_filepath`: after the graph transformations, the model is saved there (before
  /// partitioning, so the file runs on any provider stack).
  session_options& set_optimized_model_filepath(std::filesystem::path p) {
    optimized_model_path_ = std::move(p);
    return *this;
  }
  [[nodiscard]] const std::filesystem::path& optimized_model_filepath() const noexcept { return optimized_model_path_; }

  /// ONNX Runtime's `enable_profiling`: time every step of every run (see `profile()` on the session).
  session_options& enable_profiling(bool on = true) {
    profiling_ = on;
    return *this;
  }
  [[nodiscard]] bool profiling() const noexcept { return profiling_; }

  /// ONNX Runtime's `AddFreeDimensionOverrideByName`: the symbolic dimension `name` of the graph inputs is fixed to
  /// `value` before anything else, so shapes are static for the optimiser and the providers (which then plan, and an
  /// EP context stores, the final weight layouts at compile time).
  session_options& add_free_dimension_override(std::string name, std::int64_t value) {
    dim_overrides_[std::move(name)] = value;
    return *this;
  }
  [[nodiscard]] const std::map<std::string, std::int64_t, std::less<>>& free_dimension_overrides() const noexcept {
    return dim_overrides_;
  }

  /// A callback told of the preparation's progress, which may cancel it (see `progress_callback`).
  session_options& set_progress_callback(progress_callback f) {
    progress_ = std::move(f);
    return *this;
  }
  [[nodiscard]] const progress_callback& progress() const noexcept { return progress_; }
  /// Context binaries of embed_mode 0 EPContext nodes come from `f` instead of files beside the model (the model may
  /// then come from a buffer without ep.context_file_path). Their bytes are verified as a file's would be.
  session_options& set_context_reader(context_reader f) {
    context_reader_ = std::move(f);
    return *this;
  }
  [[nodiscard]] const context_reader& get_context_reader() const noexcept { return context_reader_; }
  /// The source model of a weightless EP context model, as bytes (ONNX Runtime's
  /// SessionOptionsSetWeightlessSourceModelBuffer): it comes before ep.context_source_model_path. The caller keeps
  /// the bytes alive until the session is created.
  session_options& set_weightless_source_model(std::span<const std::byte> bytes) {
    weightless_source_ = bytes;
    return *this;
  }
  [[nodiscard]] std::span<const std::byte> weightless_source_model() const noexcept { return weightless_source_; }

 private:
  std::map<std::string, std::string, std::less<>> config_;
  int intra_op_threads_ = 0;
  graph_optimization_level opt_level_ = graph_optimization_level::all;
  std::filesystem::path optimized_model_path_;
  bool profiling_ = false;
  progress_callback progress_;
  context_reader context_reader_;
  std::span<const std::byte> weightless_source_;
  std::map<std::string, std::int64_t, std::less<>> dim_overrides_;
};

}  // namespace epstack
