#pragma once
/// @file session_core.hpp
/// @brief The runtime-typed part of a session, compiled once in `epstack::runtime`: graph optimisation, partitioning
/// over the providers it is given, one compile call per provider, and the executor (nodes in a precomputed order, an
/// arena per concurrent run whose blocks are recycled after each value's last use and across runs, subgraphs for
/// If/Loop/Scan). `session<P...>` is a thin template over it.

#include <epstack/core/session_options.hpp>
#include <epstack/core/thread_pool.hpp>
#include <epstack/ep_context/report.hpp>
#include <epstack/ir/model.hpp>
#include <epstack/partition/plan.hpp>
#include <epstack/provider/binding.hpp>
#include <epstack/runtime/optimizer.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace epstack {

/// A named input for `run`.
struct named_tensor {
  std::string name;
  tensor value;
};
/// A named input that may be a sequence or none, for `run_values`.
struct named_value {
  std::string name;
  ivalue value;
};

/// @brief Name, type and shape (symbolic dims kept) of a session input or output.
struct io_info {
  std::string name;
  type_info type;
};

/// @brief A prepared model: immutable after `build`; `run` is safe from many threads at once.
class session_core {
 public:
  /// @brief Optimises `m` (at `options.optimization_level()`, folding constants on the CPU provider of the stack, and
  /// fusing only into operators it has), partitions it over `providers` (priority order), compiles each provider's
  /// partitions in one call, and plans execution.
  /// EPContext nodes of `m` are restored by the provider whose `source` they name (compiling nothing); with
  /// `ep.context_enable` = 1 an EPContext model is written (ep-context-design.md; the README lists the rules).
  [[nodiscard]] static Result<std::shared_ptr<const session_core>> build(model m, std::vector<provider_binding> providers,
                                                                         const session_options& options);
  /// @brief The parts of a session that a preparation fills in (see `assemble`). The references are the session's
  /// own members, in their final places: plans may point into `m`, functions may refer to `providers`.
  struct stage {
    model& m;                                  ///< the model as it will run
    std::vector<provider_binding>& providers;  ///< the stack, in priority order, as the executor will use it
    thread_pool& pool;                         ///< the session's intra-op threads
    partition_plan& plan;                      ///< to fill: every graph's partitions and their execution order
    /// To fill: one function per partition of the whole model, in the order of `plan.graph_plans()` (the main
    /// graph's partitions, then each subgraph's).
    std::vector<compute_function>& functions;
    optimization_report& report;
    ep_context_report& context;
  };
  /// Prepares a model for running: fills in the plan and the functions (and the reports) of a `stage`.
  using preparation = std::function<Status(stage&)>;
  /// @brief The session core of `m` on `providers` as `prepare` makes it ready; then the executor's plans are made.
  /// `build` is one preparation (optimise, partition, compile); a loader of a model stored already optimised and
  /// partitioned (the deployment format, epstack::deploy) is another, and links neither protobuf nor onnx.
  [[nodiscard]] static Result<std::shared_ptr<const session_core>> assemble(model m, std::vector<provider_binding> providers,
                                                                            const session_options& options,
                                                                            const preparation& prepare);
  /// @brief A model built in memory made ready for `build`: validated (single assignment, every use defined, no
  /// cycle) and its value types inferred.
  [[nodiscard]] static Status validate_and_infer(model& m);
  /// @brief Checks, without building a session, that every EPContext node of `m` would load on `providers`: its
  /// source recognised, its context found, verified and made by the same SDK for hardware this machine has. OK for a
  /// model without EPContext nodes; otherwise the error a session would report.
  [[nodiscard]] static Status check_compatibility(const model& m, const std::vector<provider_binding>& providers,
                                                  const session_options& options);
  /// @brief Each provider's verdict on compiled model `m` (its `ep_compatibility_info.<type>` metadata), in ONNX
  /// Runtime's terms: not applicable, supported and optimal, supported but better recompiled, unsupported.
  [[nodiscard]] static std::vector<ep_compatibility> compiled_model_compatibility(const model& m,
                                                                                 const std::vector<provider_binding>& providers);
  ~session_core();
  session_core(const session_core&) = delete;
  session_core& operator=(const session_core&) = delete;

  /// @brief Runs the model. `outputs` names the outputs wanted (all, in graph order, when empty). invalid_argument,
  /// naming the input, for an unknown, repeated or missing input or a wrong element type, rank or dimension.
  [[nodiscard]] Result<std::vector<ivalue>> run(std::span<const named_value> feeds,
                                                std::span<const std::string> outputs) const;

  [[nodiscard]] const std::vector<io_info>& inputs() const noexcept;
  [[nodiscard]] const std::vector<io_info>& outputs() const noexcept;
  [[nodiscard]] const partition_plan& plan() const noexcept;
  [[nodiscard]] const model& get_model() const noexcept;
  [[nodiscard]] const optimization_report& optimizations() const noexcept;
  /// Threads a kernel may use.
  [[nodiscard]] int intra_op_threads() const noexcept;
  /// Where the intra-op loops run ("epstack": the session's own workers, else a provider's runtime's name).
  [[nodiscard]] std::string_view intra_op_runtime() const noexcept;
  /// What the session loaded from or wrote to EPContext models.
  [[nodiscard]] const ep_context_report& ep_context() const noexcept;

  /// Memory the executor keeps between runs: one arena per run that was ever concurrent.
  struct memory_stats {
    std::size_t run_contexts = 0;  ///< arenas (the most runs that were in flight at once)
    std::size_t arena_bytes = 0;   ///< bytes they reserved in all
    /// Outputs computed over the memory of an input that nothing read afterwards (ONNX Runtime's `MayInplace` reuse),
    /// over all runs so far.
    std::uint64_t in_place_outputs = 0;
  };
  [[nodiscard]] memory_stats memory() const;

  /// With profiling on (`session_options::enable_profiling`): time spent in each step (node or fused partition) over
  /// every run so far, the costliest first.
  struct step_profile {
    std::string label;  ///< "node 'name' (Op)" or "partition 'name'"
    std::string kind;   ///< the op type (domain-qualified outside the ONNX domain), or "<provider> partition"
    std::uint64_t calls = 0;
    double total_ms = 0;
  };
  [[nodiscard]] std::vector<step_profile> profile() const;

 private:
  session_core();
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace epstack
