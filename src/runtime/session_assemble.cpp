// The session core's assembly (session_core::assemble): the thread pool, a preparation that fills in the plan and the
// functions, then the executor's plans and the model's inputs and outputs. With executor.cpp it is the part of the
// runtime every session needs, library epstack::exec: it links neither protobuf nor onnx, so a deployable that loads
// the deployment format (epstack::deploy) runs on it too. The preparation that optimises, partitions and compiles an
// ONNX model is session_core.cpp.
#include "session_impl.hpp"

#include <epstack/core/sanitizers.hpp>
#include <epstack/core/weight_memory.hpp>

#include <algorithm>
#include <utility>

namespace epstack {

session_core::session_core() : impl_(std::make_unique<impl>()) {}
session_core::~session_core() = default;

Result<std::shared_ptr<const session_core>> session_core::assemble(model m, std::vector<provider_binding> providers,
                                                                  const session_options& options,
                                                                  const preparation& prepare) {
  auto core = std::shared_ptr<session_core>(new session_core());
  auto& d = *core->impl_;
  d.m = std::move(m);
  // The intra-op loops run on the thread runtime of the first provider that names one and has partitions in the plan,
  // unless the session asks for its own workers. Not under ThreadSanitizer: an uninstrumented runtime (libgomp)
  // hides its synchronisation from it. Until the plan is known (placement by measure times its candidates on the
  // pool, and a provider's compile may use it) the pool runs on the first such provider's runtime.
  bool provider_runtime = !under_thread_sanitizer;
  if (auto v = options.config(config_keys::intra_op_runtime); v && *v != "provider") {
    if (*v != "own")
      return Status(errc::invalid_argument, cat("session option ", config_keys::intra_op_runtime, " is '", *v,
                                                "'; it takes provider or own"));
    provider_runtime = false;
  }
  parallel_runtime runtime;
  if (provider_runtime)
    for (const auto& p : providers)
      if (p.intra_op_runtime) {
        runtime = p.intra_op_runtime;
        break;
      }
  d.pool = std::make_unique<thread_pool>(options.intra_op_threads(), runtime);
  {
    // ONNX Runtime's keys for its pools: each on at "1" exactly, and allow_spinning also when it is not set. One
    // lookup in a loop rather than three inlined (the deployables count their bytes).
    constexpr std::string_view keys[] = {config_keys::set_denormal_as_zero, config_keys::intra_op_allow_spinning,
                                         config_keys::force_spinning_stop};
    constexpr bool unset[] = {false, true, false};
    bool on[3] = {};
    for (std::size_t i = 0; i < 3; ++i) {
      const auto v = options.config(keys[i]);
      on[i] = v ? *v == "1" : unset[i];
    }
    d.pool->set_flush_denormals(on[0]);
    d.pool->set_spin_policy(!on[1] ? spin_policy::never : on[2] ? spin_policy::during_runs : spin_policy::after_work);
  }
  d.profiling = options.profiling();
  d.providers = std::move(providers);

  stage st{d.m, d.providers, *d.pool, d.plan, d.functions, d.report, d.context};
  {
    // The weights the preparation lays out (the blocked layout's filters, the providers' packed copies) share
    // huge-page chunks (weight_memory.hpp): their first touch is most of a create otherwise.
    weight_arena weights;
    weight_arena_scope scope(&weights);
    EPSTACK_RETURN_IF_ERROR(prepare(st));
  }

  // One function per partition of every graph, numbered in the order of graph_plans().
  const auto plans = std::as_const(d.plan).graph_plans();
  std::vector<std::vector<std::size_t>> indices(plans.size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    if (plans[i]->g == nullptr || plans[i]->partition_provider.size() != plans[i]->partitions.size())
      return Status(errc::fail, cat("session: the plan of graph ", std::to_string(i), " is incomplete"));
    indices[i].resize(plans[i]->partitions.size());
    for (std::size_t k = 0; k < indices[i].size(); ++k) {
      if (plans[i]->partition_provider[k] >= d.providers.size())
        return Status(errc::fail, cat("session: partition '", plans[i]->partitions[k].name, "' has no provider"));
      indices[i][k] = total++;
    }
  }
  if (d.functions.size() != total)
    return Status(errc::fail, cat("session: ", std::to_string(d.functions.size()), " compiled functions for ",
                                  std::to_string(total), " partitions"));
  for (std::size_t i = 0; i < total; ++i)
    if (!d.functions[i]) return Status(errc::fail, cat("session: partition ", std::to_string(i), " was not compiled"));

  // The runtime follows the plan: a provider's threads only when it runs partitions (a stack whose oneDNN provider
  // was left nothing runs every loop on the pool's own workers, as the CPU stack does).
  if (provider_runtime) {
    parallel_runtime used;
    for (std::size_t p = 0; p < d.providers.size() && !used; ++p)
      if (d.providers[p].intra_op_runtime)
        for (const auto* gp : plans)
          if (std::find(gp->partition_provider.begin(), gp->partition_provider.end(), p) != gp->partition_provider.end()) {
            used = d.providers[p].intra_op_runtime;
            break;
          }
    d.pool->set_runtime(used);
  }

  std::vector<const graph*> scopes;
  EPSTACK_ASSIGN_OR_RETURN(d.main, d.build_exec(d.plan.main, scopes, plans, indices));
  std::sort(d.shared_owners.begin(), d.shared_owners.end());
  d.shared_owners.erase(std::unique(d.shared_owners.begin(), d.shared_owners.end()), d.shared_owners.end());

  const auto& g = d.m.graph;
  for (value_id v : g.inputs())
    if (!g.value(v).initializer) d.inputs.push_back({g.value(v).name, g.value(v).type});
  for (value_id v : g.outputs()) d.outputs.push_back({g.value(v).name, g.value(v).type});
  return std::shared_ptr<const session_core>(std::move(core));
}

const std::vector<io_info>& session_core::inputs() const noexcept { return impl_->inputs; }
const std::vector<io_info>& session_core::outputs() const noexcept { return impl_->outputs; }
const partition_plan& session_core::plan() const noexcept { return impl_->plan; }
const model& session_core::get_model() const noexcept { return impl_->m; }
const optimization_report& session_core::optimizations() const noexcept { return impl_->report; }
int session_core::intra_op_threads() const noexcept { return impl_->pool->size(); }
std::string_view session_core::intra_op_runtime() const noexcept {
  return impl_->pool->runtime() ? std::string_view(impl_->pool->runtime().name) : std::string_view("epstack");
}
const ep_context_report& session_core::ep_context() const noexcept { return impl_->context; }

}  // namespace epstack
