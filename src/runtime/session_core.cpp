// The session core's build from an ONNX model: free dimension overrides, EP contexts loaded, function expansion,
// optimisation, partitioning, one compile call per provider, and EPContext generation, as a preparation that
// session_core::assemble (session_assemble.cpp) runs; the executor that runs the result is executor.cpp.
#include "session_impl.hpp"

#include <epstack/core/weight_memory.hpp>
#include <epstack/ep_context/attributes.hpp>
#include <epstack/deploy/deployment.hpp>
#include <epstack/ep_context/contexts.hpp>
#include <epstack/ir/graph_algorithms.hpp>
#include <epstack/ir/graph_view.hpp>
#include <epstack/onnx/onnx_io.hpp>
#include <epstack/partition/partitioner.hpp>
#include <epstack/runtime/compile_cache.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <unordered_map>

namespace epstack {

namespace {
// Provider `p` asked about node `n` alone, compiling it when it takes it (constant folding before partitioning).
node_compiler compile_one(const provider_binding& p) {
  return [get = p.get_capability, compile = p.compile](const graph& g, node_id n) -> Result<compute_function> {
    std::vector<bool> keep(g.node_count());
    keep[n] = true;
    const graph_view<graph> view(g, std::move(keep));
    bool taken = false;
    for (const auto& cap : get(view)) taken = taken || (!cap.is_group() && cap.nodes == std::vector<node_id>{n});
    if (!taken) return Status(errc::not_implemented, "no kernel for node " + g.describe(n));
    partition part;
    part.name = g.node(n).name;
    part.g = &g;
    part.nodes = {n};
    part.inputs.assign(g.node(n).inputs.begin(), g.node(n).inputs.end());
    part.outputs.assign(g.node(n).outputs.begin(), g.node(n).outputs.end());
    // Its function is run once (constant folding) and dropped: its copies of weights are not the session's.
    weight_arena_scope own_memory(nullptr);
    EPSTACK_ASSIGN_OR_RETURN(auto fns, compile(std::span<const partition>(&part, 1)));
    if (fns.size() != 1) return Status(errc::ep_fail, "compile returned no function for node " + g.describe(n));
    return std::move(fns.front());
  };
}

// The memory of a timed candidate's runs: the n-th allocation of a run reuses the n-th buffer of the run before, as a
// session's arena does after its first run. Without it each run allocated its outputs afresh, and their page faults
// were timed: ResNet-50's oneDNN partition measured 36 ms where the session runs it in 23-24.
class placement_frame final : public execution_frame {
 public:
  tensor allocate(element_type type, std::span<const std::int64_t> sizes, bool) override {
    const auto count = element_count(sizes);
    const std::size_t n = count ? *count * element_size(type) : 0;
    if (next_ == buffers_.size()) buffers_.emplace_back();
    tensor& b = buffers_[next_++];
    if (b.byte_size() < n || b.element_count() == 0)
      b = tensor::uninitialized(element_type::uint8, std::vector<std::int64_t>{static_cast<std::int64_t>(std::max<std::size_t>(n, 1))});
    return tensor::borrow(type, sizes, b.mutable_data(), nullptr);
  }
  Status run_subgraph(const graph&, std::span<const ivalue>, std::vector<ivalue>&) override {
    return Status(errc::not_implemented, "a placement candidate with a subgraph is not timed");
  }
  void reset() noexcept { next_ = 0; }

 private:
  std::vector<tensor> buffers_;
  std::size_t next_ = 0;
};

// placement_policy::measure: provider p's candidate partitions compiled and run, in order, on inputs made for the
// graph's static shapes (initializers as they are); the median of a few runs after one warm-up, their memory reused
// from run to run (placement_frame). The whole session spends at most `budget_ms` on it; beyond that, or for a
// candidate it cannot run, the answer is "unknown" (-1) and the partitioner uses the estimates.
placement_timer make_placement_timer(const std::vector<provider_binding>& providers, thread_pool* pool, double budget_ms) {
  using clock = std::chrono::steady_clock;
  auto deadline = std::make_shared<clock::time_point>(clock::now() + std::chrono::microseconds(static_cast<std::int64_t>(budget_ms * 1000)));
  return [&providers, pool, deadline](std::size_t p, std::span<const partition> parts) -> double {
    if (parts.empty() || clock::now() >= *deadline || !providers[p].compile) return -1;
    const graph& g = *parts.front().g;
    // A candidate's copies of its weights die with it: not in the session's arena, where they would stay.
    weight_arena_scope own_memory(nullptr);
    auto fns = providers[p].compile(parts);
    if (!fns || fns->size() != parts.size()) return -1;
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    std::unordered_map<value_id, ivalue> made;  // synthetic graph inputs and initializers, kept across runs
    const auto input_of = [&](value_id v) -> std::optional<ivalue> {
      if (v == no_id) return ivalue();
      if (auto it = made.find(v); it != made.end()) return it->second;
      const auto& rec = g.value(v);
      if (rec.initializer) return made.emplace(v, *rec.initializer).first->second;
      if (!rec.type.is_tensor() || !rec.type.dims) return std::nullopt;
      const auto sizes = rec.type.dims->sizes();
      if (!sizes) return std::nullopt;
      tensor t = tensor::uninitialized(rec.type.elem, *sizes);
      if (rec.type.elem == element_type::string) return std::nullopt;
      std::memset(t.mutable_data(), 0, t.byte_size());
      if (rec.type.elem == element_type::float32) {
        auto* f = reinterpret_cast<float*>(t.mutable_data());
        for (std::size_t i = 0; i < t.element_count(); ++i) f[i] = uni(rng);
      }
      return made.emplace(v, std::move(t)).first->second;
    };
    placement_frame frame;
    const auto run_once = [&]() -> bool {
      frame.reset();
      std::unordered_map<value_id, ivalue> produced;
      for (std::size_t k = 0; k < parts.size(); ++k) {
        std::vector<ivalue> ins;
        for (value_id v : parts[k].inputs) {
          if (auto it = produced.find(v); it != produced.end()) {
            ins.push_back(it->second);
            continue;
          }
          auto x = input_of(v);
          if (!x) return false;
          ins.push_back(std::move(*x));
        }
        std::vector<ivalue> outs(parts[k].outputs.size());
        compute_context c(ins, outs, &frame, pool);
        try {
          if (!(*fns)[k](c)) return false;
        } catch (const std::exception&) {
          return false;
        }
        for (std::size_t i = 0; i < outs.size(); ++i) produced[parts[k].outputs[i]] = std::move(outs[i]);
      }
      return true;
    };
    // Timed as a run is: the pool's workers spin between loops as they do in a run (session.force_spinning_stop),
    // and the run's floating-point mode (session.set_denormal_as_zero).
    std::optional<thread_pool::run_scope> as_a_run;
    if (pool != nullptr) as_a_run.emplace(*pool);
    if (!run_once()) return -1;
    std::vector<double> times;
    const auto until = std::min(*deadline, clock::now() + std::chrono::milliseconds(50));
    while (times.size() < 7 && (times.size() < 3 || clock::now() < until)) {
      const auto t0 = clock::now();
      if (!run_once()) return -1;
      times.push_back(std::chrono::duration<double, std::micro>(clock::now() - t0).count());
    }
    std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
    return times[times.size() / 2];
  };
}

// Free dimension overrides: symbolic input dims fixed, and shapes inferred again with them.
Status apply_free_dimension_overrides(model& m, const session_options& options) {
  if (!options.free_dimension_overrides().empty()) {
    bool changed = false;
    auto& g = m.graph;
    for (value_id v : g.inputs()) {
      auto& t = g.value(v).type;
      if (!t.dims) continue;
      for (auto& dim : t.dims->dims())
        if (dim.is_symbolic())
          if (auto it = options.free_dimension_overrides().find(dim.param); it != options.free_dimension_overrides().end()) {
            if (it->second < 0)
              return Status(errc::invalid_argument, cat("free dimension override '", it->first, "' is negative"));
            dim = dimension(it->second);
            changed = true;
          }
    }
    if (changed) {
      // Inferred types of intermediate values are recomputed from the new input shapes.
      for (value_id v = 0; v < g.value_count(); ++v)
        if (!g.value(v).is_graph_input && !g.value(v).is_graph_output && !g.value(v).initializer && g.value(v).producer != no_id)
          g.value(v).type = {};
      EPSTACK_RETURN_IF_ERROR(infer_shapes(m).with_context("applying free dimension overrides"));
    }
  }
  return {};
}

// The optimiser's options for a stack: constants folded on its CPU provider, fusions only into operators it has.
optimizer_options optimizer_options_for(const std::vector<provider_binding>& providers, const session_options& options) {
  optimizer_options oo;
  oo.level = options.optimization_level();
  for (const auto& p : providers)
    if (p.type_key == cpu_provider_key) {
      oo.fold = compile_one(p);
      oo.can_run = p.has_op;
    }
  return oo;
}

// Function operators no provider takes run as their bodies (ONNX Runtime expands them and partitions again).
claim_query claims_of(const std::vector<provider_binding>& providers) {
  return [&providers](const graph& g) {
    std::vector<bool> taken(g.node_count());
    const graph_view<graph> whole(g);
    for (const auto& p : providers)
      for (const auto& cap : p.get_capability(whole))
        for (node_id n : cap.nodes)
          if (n < taken.size()) taken[n] = true;
    return taken;
  };
}

// A source model taken through the steps a session takes before partitioning (free dimension overrides, function
// expansion, optimisation), as a session on this stack with these options did when it compiled a weightless context.
ctx::source_optimizer source_optimizer_for(const std::vector<provider_binding>& providers, const model& compiled) {
  return [&providers, &compiled](model m) -> Result<model> {
    std::optional<session_options> recorded;
    for (const auto& [k, v] : compiled.metadata)
      if (k == ctx::weightless_optimization_metadata) recorded = ctx::weightless_optimization_of(v);
    if (!recorded)
      return Status(errc::invalid_graph, cat("the compiled model's ", ctx::weightless_optimization_metadata,
                                             " metadata is missing or does not parse"));
    const session_options& options = *recorded;
    EPSTACK_RETURN_IF_ERROR(apply_free_dimension_overrides(m, options));
    const auto claimed = claims_of(providers);
    EPSTACK_RETURN_IF_ERROR(expand_functions(m, claimed).status());
    EPSTACK_RETURN_IF_ERROR(optimize(m, optimizer_options_for(providers, options)).status());
    EPSTACK_RETURN_IF_ERROR(expand_functions(m, claimed).status());
    return m;
  };
}

}  // namespace

namespace {
// The preparation of an ONNX model (session_core::build): free dimension overrides, EP contexts loaded, functions
// expanded, optimisation, partitioning (and the blocked layout), one compile call per provider, EPContext generation.
Status prepare_onnx_model(session_core::stage& d, const session_options& options, const optimizer_options& oo,
                          const std::vector<provider_binding>& unwrapped) {
  const operator_query can_run = oo.can_run;
  auto& providers = d.providers;
  // Free dimension overrides: symbolic input dims fixed, and shapes inferred again with them.
  EPSTACK_RETURN_IF_ERROR(apply_free_dimension_overrides(d.m, options));

  // EP contexts: what generation would write is refused now if it exists (before anything is compiled); the contexts
  // an EPContext model names are loaded and verified before anything else is done.
  EPSTACK_ASSIGN_OR_RETURN(auto gen, ctx::plan_generation(d.m, options));
  // A deployment model (epstack.deploy_file_path) is generated as an EPContext model is, then written in its format.
  EPSTACK_ASSIGN_OR_RETURN(auto deploy, ctx::plan_deployment(d.m, options));
  // Weightless generation finds the source model's weights by content, so they are indexed before optimisation.
  if (gen && gen->weightless) gen->weights = ctx::index_source_weights(d.m, false);
  // A compiled model some provider would rather recompile (made for older hardware than this machine's) is refused
  // when the session asks (ONNX Runtime's session.fail_on_suboptimal_compiled_model).
  if (options.flag(config_keys::fail_on_suboptimal_compiled_model))
    for (const auto& c : ctx::model_compatibility(d.m, providers))
      if (c.value == compiled_model_compatibility::ep_supported_prefer_recompilation)
        return Status(errc::model_requires_compilation,
                      cat(config_keys::fail_on_suboptimal_compiled_model, " is set and provider ", c.provider,
                          " rates the compiled model ", to_string(c.value), ": ", c.reason));
  EPSTACK_ASSIGN_OR_RETURN(auto loaded, ctx::load_contexts(d.m, &d.m, providers, options, false,
                                                           source_optimizer_for(unwrapped, d.m)));
  d.context.binaries_read = loaded.files_read;
  d.context.graphs_from_workspace = loaded.from_workspace;
  d.context.source_model_read = loaded.source_model_read;
  if (auto e = options.config(config_keys::cache_entry_used)) {
    d.context.cache_entry = std::string(*e);
    d.context.cache_hit = options.flag(config_keys::cache_entry_hit);
    if (auto w = options.config(config_keys::cache_warning)) d.context.warnings.emplace_back(*w);
  }
  const auto ctx_nodes = std::make_shared<const decltype(loaded.nodes)>(std::move(loaded.nodes));
  // EPContext nodes go to the provider that recognised them, as single nodes, and no provider is asked about them.
  for (std::size_t p = 0; p < providers.size(); ++p) {
    providers[p].get_capability = [p, ctx_nodes, inner = std::move(providers[p].get_capability)](
                                      const graph_view<graph>& v) {
      std::vector<capability> caps;
      std::vector<bool> keep(v.graph().node_count());
      bool any = false;
      for (node_id n : v.nodes()) {
        const auto& nd = v.graph().node(n);
        if (ctx::is_ep_context_node(nd)) {
          any = true;
          if (auto it = ctx_nodes->find(nd.name); it != ctx_nodes->end() && it->second.provider == p)
            caps.push_back(capability::single(n));
        } else {
          keep[n] = true;
        }
      }
      auto rest = any ? inner(graph_view<graph>(v.graph(), std::move(keep))) : inner(v);
      caps.insert(caps.end(), std::make_move_iterator(rest.begin()), std::make_move_iterator(rest.end()));
      return caps;
    };
  }

  // Placement recorded in a context model (node metadata epstack.placement): only the named provider sees the node.
  bool recorded = false;
  for (node_id n = 0; n < d.m.graph.node_count() && !recorded; ++n)
    for (const auto& kv : d.m.graph.node(n).metadata) recorded = recorded || kv.first == placement_metadata_key;
  if (recorded)
    for (auto& p : providers)
      p.get_capability = [key = std::string(p.type_key), inner = std::move(p.get_capability)](const graph_view<graph>& v) {
        std::vector<bool> keep(v.graph().node_count());
        bool hidden = false;
        for (node_id n : v.nodes()) {
          bool mine = true;
          for (const auto& kv : v.graph().node(n).metadata)
            if (kv.first == placement_metadata_key) mine = kv.second == key;
          keep[n] = mine;
          hidden = hidden || !mine;
        }
        return hidden ? inner(graph_view<graph>(v.graph(), std::move(keep))) : inner(v);
      };

  const claim_query claimed = claims_of(providers);
  EPSTACK_RETURN_IF_ERROR(expand_functions(d.m, claimed).status());

  EPSTACK_RETURN_IF_ERROR(ctx::progress(options, "optimize", 0, 1));
  EPSTACK_ASSIGN_OR_RETURN(d.report, optimize(d.m, oo));
  // Once more on the optimised graph: a function node a provider claimed before the fusions may sit in a group it
  // no longer takes (a HardSwish grouped with a Softmax that the optimiser removed as dead), and then runs as its body.
  EPSTACK_RETURN_IF_ERROR(expand_functions(d.m, claimed).status());
  // Weightless generation: initializers the optimiser made (fused, folded) are found in the source model as optimised.
  std::size_t derived_min = std::size_t{1} << 20;
  if (auto v = options.config(config_keys::weightless_derived_min_bytes); v && !v->empty()) {
    const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), derived_min);
    if (ec != std::errc() || end != v->data() + v->size())
      return Status(errc::invalid_argument, cat("session option ", config_keys::weightless_derived_min_bytes,
                                                " must be a number of bytes, found '", *v, "'"));
  }
  if (gen && gen->weightless)
    gen->weights = [pre = std::move(gen->weights), post = ctx::index_source_weights(d.m, true, derived_min)](
                       element_type t, std::span<const std::byte> b, std::uint64_t h) -> std::optional<weight_ref> {
      if (auto r = pre(t, b, h)) return r;
      return post(t, b, h);
    };
  if (!options.optimized_model_filepath().empty()) {
    save_options so;
    so.mode = external_data_mode::above_threshold;
    so.threshold_bytes = 1024;
    EPSTACK_RETURN_IF_ERROR(save_model(d.m, options.optimized_model_filepath(), so)
                                .with_context("saving the optimised model (optimized_model_filepath)"));
  }

  partition_options po;
  po.disable_cpu_fallback = options.flag(config_keys::disable_cpu_ep_fallback);
  if (auto v = options.config(config_keys::placement)) {
    const auto policy = placement_policy_from(*v);
    if (!policy)
      return Status(errc::invalid_argument, cat("session option ", config_keys::placement, " is '", *v,
                                                "'; it takes priority, estimate or measure"));
    po.placement = *policy;
  }
  if (po.placement == placement_policy::measure) {
    double budget = 2000;
    if (auto v = options.config(config_keys::placement_budget_ms)) {
      char* end = nullptr;
      const std::string text(*v);
      budget = std::strtod(text.c_str(), &end);
      if (text.empty() || end != text.c_str() + text.size() || !(budget >= 0))
        return Status(errc::invalid_argument, cat("session option ", config_keys::placement_budget_ms, " is '", text,
                                                  "'; it takes a number of milliseconds, 0 or more"));
    }
    po.measure = make_placement_timer(providers, &d.pool, budget);
  }
  EPSTACK_RETURN_IF_ERROR(ctx::progress(options, "partition", 0, 1));
  EPSTACK_ASSIGN_OR_RETURN(d.plan, partition_graph(d.m.graph, providers, po));
  // The blocked layout (NCHWc) for the convolution chains the CPU provider got, at the `all` level as in ONNX Runtime
  // (its layout transformers run after partitioning, on CPU nodes only); then the graph is partitioned again, the new
  // operators being the CPU provider's alone.
  bool blocked_layout = options.optimization_level() == graph_optimization_level::all && can_run &&
                        can_run(nchwc_domain, "Conv") && d.plan.cpu_provider != no_index;
  if (auto v = options.config(config_keys::cpu_layout)) {
    if (*v != "nchwc" && *v != "nchw")
      return Status(errc::invalid_argument, cat("session option ", config_keys::cpu_layout, " is '", *v, "'; it takes nchwc or nchw"));
    blocked_layout = blocked_layout && *v == "nchwc";
  }
  bool winograd = true;
  if (auto v = options.config(config_keys::cpu_winograd)) {
    if (*v != "0" && *v != "1")
      return Status(errc::invalid_argument, cat("session option ", config_keys::cpu_winograd, " is '", *v, "'; it takes 0 or 1"));
    winograd = *v == "1";
  }
  bool fuse_depthwise = can_run && can_run(nchwc_domain, "PointwiseDepthwiseConv");
  if (auto v = options.config(config_keys::cpu_fuse_depthwise)) {
    if (*v != "0" && *v != "1")
      return Status(errc::invalid_argument,
                    cat("session option ", config_keys::cpu_fuse_depthwise, " is '", *v, "'; it takes 0 or 1"));
    fuse_depthwise = fuse_depthwise && *v == "1";
  }
  bool fuse_products = options.optimization_level() >= graph_optimization_level::extended && can_run &&
                       can_run(cpu_fused_domain, "MatMulBias");
  if (auto v = options.config(config_keys::cpu_fuse_products)) {
    if (*v != "0" && *v != "1")
      return Status(errc::invalid_argument,
                    cat("session option ", config_keys::cpu_fuse_products, " is '", *v, "'; it takes 0 or 1"));
    fuse_products = fuse_products && *v == "1";
  }
  // A pass over the nodes the CPU provider got (`pass(on_cpu, rewritten)`, returning how many it converted); when it
  // converted any, the graph is partitioned again, the new operators being the CPU provider's alone.
  const auto cpu_pass = [&](const auto& pass) -> Status {
    if (d.plan.cpu_provider == no_index) return {};
    std::vector<bool> on_cpu(d.m.graph.node_count());
    for (node_id n = 0; n < on_cpu.size(); ++n) on_cpu[n] = d.plan.main.nodes[n].provider == d.plan.cpu_provider;
    // The choices that gave the CPU provider nodes the pass rewrote are kept for the plan's reader (the others are
    // made again on the new graph): the pass says which of the graph's nodes it rewrote, alone or fused into one.
    std::vector<graph_plan::placement_choice> before, kept = d.plan.main.choices_before_layout;
    for (const auto& c : d.plan.main.choices)
      if (c.chosen == d.plan.cpu_provider) before.push_back(c);
    std::vector<bool> rewritten;
    EPSTACK_ASSIGN_OR_RETURN(const std::size_t converted, pass(on_cpu, rewritten));
    if (converted == 0) return {};
    // A provider that left its groups for its thread runtime leaves them again: the rewrite assumed it.
    po.yield = d.plan.yielded;
    EPSTACK_ASSIGN_OR_RETURN(d.plan, partition_graph(d.m.graph, providers, po));
    d.plan.main.choices_before_layout = std::move(kept);
    const auto was_rewritten = [&](node_id n) { return n < rewritten.size() && rewritten[n]; };
    for (auto& c : before)
      if (std::any_of(c.nodes.begin(), c.nodes.end(), was_rewritten)) d.plan.main.choices_before_layout.push_back(std::move(c));
    return {};
  };
  if (blocked_layout)
    EPSTACK_RETURN_IF_ERROR(cpu_pass([&](const std::vector<bool>& on_cpu, std::vector<bool>& rewritten) {
      return nchwc_layout(d.m, on_cpu, d.report, winograd, fuse_depthwise, &rewritten);
    }));
  if (fuse_products)
    EPSTACK_RETURN_IF_ERROR(cpu_pass([&](const std::vector<bool>& on_cpu, std::vector<bool>& rewritten) {
      return cpu_product_fusion(d.m, on_cpu, d.report, &rewritten, can_run(cpu_fused_domain, "PermutedMatMul"));
    }));
  const auto is_restored = [&](const partition& part) {
    return !part.is_fused() && part.nodes.size() == 1 && ctx::is_ep_context_node(part.g->node(part.nodes.front()));
  };
  if (options.flag(config_keys::disable_model_compile)) {
    const auto all = d.plan.graph_plans();
    std::vector<std::string> pending;
    for (const auto* gp : all)
      for (std::size_t k = 0; k < gp->partitions.size(); ++k)
        if (gp->partitions[k].is_fused())
          pending.push_back(cat(gp->partitions[k].name, " (", std::to_string(gp->partitions[k].nodes.size()), " nodes)"));
    if (!pending.empty()) {
      std::string list;
      for (std::size_t i = 0; i < pending.size() && i < 8; ++i) list += cat(i ? ", " : "", pending[i]);
      return Status(errc::model_requires_compilation,
                    cat("session.disable_model_compile is set but the model still needs compiling: ",
                        std::to_string(pending.size()), " partition(s) are not in EPContext nodes: ", list,
                        pending.size() > 8 ? ", ..." : ""));
    }
  }
  if (gen) EPSTACK_RETURN_IF_ERROR(ctx::check_outputs(*gen, d.plan, providers));

  // One compile call per provider with all of its partitions, over the main graph and every subgraph.
  const auto plans = d.plan.graph_plans();
  std::vector<std::vector<std::size_t>> indices(plans.size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    indices[i].resize(plans[i]->partitions.size());
    for (auto& x : indices[i]) x = total++;
  }
  d.functions.resize(total);
  for (std::size_t p = 0; p < providers.size(); ++p) {
    std::vector<partition> parts;
    std::vector<std::size_t> where;
    for (std::size_t i = 0; i < plans.size(); ++i)
      for (std::size_t k = 0; k < plans[i]->partitions.size(); ++k)
        if (plans[i]->partition_provider[k] == p) {
          parts.push_back(plans[i]->partitions[k]);
          where.push_back(indices[i][k]);
        }
    if (parts.empty()) continue;
    // EPContext nodes are restored from their contexts; the rest is compiled in one call.
    std::vector<partition> to_compile;
    std::vector<std::size_t> compile_where;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (!is_restored(parts[i])) {
        to_compile.push_back(std::move(parts[i]));
        compile_where.push_back(where[i]);
        continue;
      }
      const auto& nd = parts[i].g->node(parts[i].nodes.front());
      const auto& ln = ctx_nodes->at(nd.name);
      EPSTACK_RETURN_IF_ERROR(ctx::progress(options, "restore", d.context.nodes_loaded, ctx_nodes->size(), nd.name));
      ep_context_restore rr{ln.graph, ln.binary, &parts[i], ctx::verify_threads(options)};
      auto fn = providers[p].context->restore(rr);
      if (!fn)
        return Status(fn.code() == errc::invalid_graph ? errc::invalid_graph : fn.code(),
                      cat("EPContext node '", nd.name, "': provider ", providers[p].type_key, " cannot restore graph '",
                          ln.graph->name, "' from ", ln.binary->origin(), ": ", fn.status().message()));
      d.functions[where[i]] = std::move(*fn);
      ++d.context.nodes_loaded;
    }
    if (to_compile.empty()) continue;
    EPSTACK_RETURN_IF_ERROR(ctx::progress(options, "compile", p, providers.size(), providers[p].type_key));
    auto fns = providers[p].compile(to_compile);
    if (!fns) return Status(fns.code(), cat("provider ", providers[p].type_key, ": compile: ", fns.status().message()));
    if (fns->size() != to_compile.size())
      return Status(errc::ep_fail, cat("provider ", providers[p].type_key, " compiled ", std::to_string(fns->size()),
                                       " functions for ", std::to_string(to_compile.size()), " partitions"));
    for (std::size_t i = 0; i < compile_where.size(); ++i) d.functions[compile_where[i]] = std::move((*fns)[i]);
  }
  const auto function_of = [&](const graph_plan& gp, std::size_t k) -> const compute_function& {
    const auto at = static_cast<std::size_t>(std::find(plans.begin(), plans.end(), &gp) - plans.begin());
    return d.functions[indices[at][k]];
  };
  if (deploy) {
    deploy->sink = [&](const model& compiled) {
      return write_deployment(compiled, d.plan.providers, deploy->model_path).with_context("writing the deployment model");
    };
    EPSTACK_RETURN_IF_ERROR(ctx::generate(d.m, d.plan, function_of, providers, *deploy, options, d.context));
  }
  if (gen) {
    EPSTACK_RETURN_IF_ERROR(ctx::generate(d.m, d.plan, function_of, providers, *gen, options, d.context));
    // Written for the compile cache: the files are about to move from its working folder into the entry.
    if (!d.context.cache_entry.empty() && !d.context.model_written.empty()) {
      const std::filesystem::path entry(d.context.cache_entry);
      d.context.model_written = entry / d.context.model_written.filename();
      for (auto& b : d.context.binaries_written) b = entry / b.filename();
    }
  }
  return {};
}
}  // namespace

Result<std::shared_ptr<const session_core>> session_core::build(model m, std::vector<provider_binding> providers,
                                                                 const session_options& options) {
  // The CPU provider of the stack folds constants, and the optimiser fuses only into operators it has (when it can
  // say which): taken before the EPContext wrapping of the preparation, which changes what get_capability answers.
  const optimizer_options oo = optimizer_options_for(providers, options);
  // (A weightless context's derived weights come from the source model taken through the same steps.)
  const std::vector<provider_binding> unwrapped = providers;
  return assemble(std::move(m), std::move(providers), options,
                  [&](stage& d) { return prepare_onnx_model(d, options, oo, unwrapped); });
}

Status session_core::validate_and_infer(model& m) {
  EPSTACK_RETURN_IF_ERROR(validate(m.graph));
  return infer_shapes(m);
}

Status session_core::check_compatibility(const model& m, const std::vector<provider_binding>& providers,
                                         const session_options& options) {
  return ctx::load_contexts(m, nullptr, providers, options, true, source_optimizer_for(providers, m)).status();
}

std::vector<ep_compatibility> session_core::compiled_model_compatibility(const model& m, const std::vector<provider_binding>& providers) {
  return ctx::model_compatibility(m, providers);
}

}  // namespace epstack
