// EPContext generation (ep.context_enable): what a session writes, decided before anything is compiled
// (plan_generation, check_outputs), the weightless index of a source model, and the EPContext model and binaries
// written from a compiled session (generate). Loading is ep_context.cpp. The rules are ep-context-design.md's and ONNX
// Runtime's, restated in the README's "EPContext models" section.
#include <epstack/ep_context/contexts.hpp>

#include "internal.hpp"

#include <epstack/core/path_rules.hpp>
#include <epstack/detail/cat.hpp>
#include <epstack/ep_context/attributes.hpp>
#include <epstack/onnx/onnx_io.hpp>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <functional>
#include <mutex>
#include <system_error>
#include <unordered_map>
#include <utility>

namespace epstack::ctx {

namespace fs = std::filesystem;
using detail::cat;
using namespace internal;

namespace {

fs::path binary_path(const generation& gen, const ep_context_binding& b, std::size_t index, bool numbered) {
  return gen.model_path.parent_path() /
         (numbered ? cat(gen.model_name, "_", b.short_name, "_", std::to_string(index), ".bin")
                   : cat(gen.model_name, "_", b.short_name, ".bin"));
}

// A model that generation may write from: no compiled node in any graph (control-flow bodies hold EPContext nodes too).
Status require_source(const graph& g, std::string_view option) {
  for (node_id n = 0; n < g.node_count(); ++n) {
    const auto& nd = g.node(n);
    if (is_ep_context_node(nd) || nd.domain == "ai.epstack.fused")
      return Status(errc::invalid_graph, cat("the model is already compiled: node ", g.describe(n),
                                             " is a compiled node; ", option, " needs a source model"));
    EPSTACK_RETURN_IF_ERROR(nd.attributes.for_each_subgraph([&](const graph& b) { return require_source(b, option); }));
  }
  return {};
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Generation

Result<std::optional<generation>> plan_deployment(const model& m, const session_options& options) {
  const auto path = options.config(config_keys::deploy_file_path);
  if (!path || path->empty()) return std::optional<generation>();
  if (options.flag(config_keys::ep_context_enable))
    return Status(errc::invalid_argument, cat(config_keys::deploy_file_path, " and ", config_keys::ep_context_enable,
                                              " are both set: a session writes one compiled model"));
  EPSTACK_RETURN_IF_ERROR(require_source(m.graph, config_keys::deploy_file_path));
  generation gen;
  gen.model_path = fs::path(*path);
  std::error_code ec;
  if (!gen.model_path.has_filename() || fs::is_directory(gen.model_path, ec))
    return Status(errc::invalid_argument, cat(config_keys::deploy_file_path, " should name a file, found '", *path, "'"));
  if (fs::exists(gen.model_path, ec))
    return Status(errc::invalid_argument, cat("'", gen.model_path.string(),
                                              "' exists already. Please remove the deployment model if you want to "
                                              "re-generate it."));
  gen.model_name = gen.model_path.stem().string();
  gen.source_filename = m.path.filename().string();
  gen.embed_mode = 1;  // each compiled partition's binary inside its node, for the writer to move to its data section
  gen.record_placement = true;
  return std::optional<generation>(std::move(gen));
}

Result<std::optional<generation>> plan_generation(const model& m, const session_options& options) {
  const auto enable = options.config(config_keys::ep_context_enable);
  if (enable && *enable != "0" && *enable != "1")
    return Status(errc::invalid_argument, cat("ep.context_enable must be 0 or 1, found '", *enable, "'"));
  // Weightless options are checked whether or not this session generates (as ONNX Runtime does).
  int weightless = 0;
  bool recorded = false;
  if (auto w = options.config(config_keys::ep_enable_weightless_mode)) {
    if (*w != "0" && *w != "1" && *w != "2")
      return Status(errc::invalid_argument, cat(config_keys::ep_enable_weightless_mode, " must be 0, 1 or 2, found '", *w, "'"));
    if (*w == "1")
      return Status(errc::ep_fail, cat(config_keys::ep_enable_weightless_mode, " is 1 (external_only): epstack's providers "
                                       "support weightless mode 2 (all) only, which leaves every weight in the source model"));
    weightless = *w == "2" ? 2 : 0;
    recorded = weightless != 0;
  } else if (auto d = options.config(config_keys::ep_enable_weightless)) {
    if (*d != "0" && *d != "1")
      return Status(errc::invalid_argument, cat(config_keys::ep_enable_weightless, " must be 0 or 1, found '", *d, "'"));
    weightless = *d == "1" ? 2 : 0;
  }
  if (!options.flag(config_keys::ep_context_enable)) return std::optional<generation>();
  generation gen;
  gen.weightless = weightless != 0;
  gen.weightless_recorded = recorded;
  EPSTACK_RETURN_IF_ERROR(require_source(m.graph, config_keys::ep_context_enable));
  const auto embed = options.config(config_keys::ep_context_embed_mode);
  if (embed && *embed != "0" && *embed != "1")
    return Status(errc::invalid_argument, cat("ep.context_embed_mode must be 0 or 1, found '", *embed, "'"));
  gen.embed_mode = embed == std::optional<std::string_view>("1") ? 1 : 0;

  std::error_code ec;
  if (auto f = options.config(config_keys::ep_context_file_path); f && !f->empty()) {
    const fs::path p(*f);
    if (f->back() == '/' || fs::is_directory(p, ec) || !p.has_extension() || !p.has_filename())
      return Status(errc::invalid_argument, cat("ep.context_file_path should not point to a folder: '", *f,
                                                "' (name the EP context model file, e.g. model_ctx.onnx)"));
    gen.model_path = p;
  } else if (m.path.empty()) {
    return Status(errc::invalid_argument,
                  "the model was loaded from a memory buffer and ep.context_enable is set: set ep.context_file_path to "
                  "say where the EP context model goes");
  } else {
    gen.model_path = m.path.parent_path() / cat(m.path.stem().string(), "_ctx.onnx");
  }
  if (fs::exists(gen.model_path, ec))
    return Status(errc::invalid_argument, cat("'", gen.model_path.string(),
                                              "' exists already. Please remove the EP context model if you want to "
                                              "re-generate it."));
  if (!m.path.empty()) {
    gen.model_name = m.path.stem().string();
    gen.source_filename = m.path.filename().string();
  } else {
    gen.model_name = gen.model_path.stem().string();
    if (gen.model_name.size() > 4 && gen.model_name.ends_with("_ctx")) gen.model_name.resize(gen.model_name.size() - 4);
  }
  gen.prefix = std::string(options.config(config_keys::ep_context_node_name_prefix).value_or(""));
  gen.share = options.flag(config_keys::ep_share_contexts);
  gen.stop_share = options.flag(config_keys::ep_stop_share_contexts);
  if (gen.share && gen.embed_mode == 1)
    return Status(errc::invalid_argument,
                  "ep.share_ep_contexts shares one context binary between models: it needs ep.context_embed_mode 0");
  if (gen.share && gen.weightless)
    return Status(errc::invalid_argument,
                  "ep.share_ep_contexts with a weightless mode: a shared binary would refer to the weights of several "
                  "source models, and a session loads one; generate weightless contexts without sharing");
  // Graph names of one shared binary must differ across the models of the group.
  if (gen.share && gen.prefix.empty()) gen.prefix = gen.model_name + "_";
  if (auto f = options.config(config_keys::ep_context_refuse_existing_in); f && !f->empty()) gen.refuse_existing_in = *f;
  if (auto x = options.config(config_keys::ep_context_external_initializers_file); x && !x->empty()) {
    const fs::path rel(*x);
    if (!is_plain_relative(rel) || !rel.has_filename())
      return Status(errc::invalid_argument, cat("ep.context_model_external_initializers_file_name must be a file name "
                                                "relative to the EP context model's folder, found '", *x, "'"));
    for (const auto& at : gen.places_of(rel))
      if (fs::exists(at, ec))
        return Status(errc::invalid_argument, cat("'", at.string(),
                                                  "' exists already. Please remove it if you want to re-generate the "
                                                  "EP context model."));
    gen.external_initializers = std::string(*x);
  }
  return std::optional<generation>(std::move(gen));
}

std::optional<session_options> weightless_optimization_of(std::string_view recorded) {
  session_options o;
  bool level = false;
  while (!recorded.empty()) {
    const auto end = recorded.find(';');
    const std::string_view item = recorded.substr(0, end);
    recorded = end == std::string_view::npos ? std::string_view() : recorded.substr(end + 1);
    const auto number = [](std::string_view t) -> std::optional<std::int64_t> {
      std::int64_t v = 0;
      const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      if (ec != std::errc() || p != t.data() + t.size()) return std::nullopt;
      return v;
    };
    if (item.starts_with("level=")) {
      const auto v = number(item.substr(6));
      if (!v || *v < 0 || *v > static_cast<int>(graph_optimization_level::all)) return std::nullopt;
      o.set_graph_optimization_level(static_cast<graph_optimization_level>(*v));
      level = true;
    } else if (item.starts_with("dim=")) {
      const auto rest = item.substr(4);
      const auto eq = rest.rfind('=');
      if (eq == std::string_view::npos) return std::nullopt;
      const auto v = number(rest.substr(eq + 1));
      if (!v) return std::nullopt;
      o.add_free_dimension_override(std::string(rest.substr(0, eq)), *v);
    } else {
      return std::nullopt;
    }
  }
  if (!level) return std::nullopt;
  return o;
}

weight_source index_source_weights(const model& m, bool derived, std::size_t derived_min_bytes) {
  struct entry {
    std::string name;
    tensor t;
  };
  auto index = std::make_shared<std::unordered_multimap<std::uint64_t, entry>>();
  const graph& g = m.graph;
  for (value_id v = 0; v < g.value_count(); ++v) {
    const auto& rec = g.value(v);
    if (!rec.initializer || rec.initializer->type() == element_type::string || rec.initializer->byte_size() == 0) continue;
    // A derived weight is found again only by optimising the source model at load: worth it for large ones (folded
    // convolution weights), not for the small ones (folded shapes, a position embedding), which the binary keeps.
    if (derived && rec.initializer->byte_size() < derived_min_bytes) continue;
    const tensor& t = *rec.initializer;
    const std::span<const std::byte> bytes(static_cast<const std::byte*>(t.data()), t.byte_size());
    index->emplace(ep_context_hash(bytes), entry{rec.name, t});
  }
  return [index, derived](element_type type, std::span<const std::byte> bytes, std::uint64_t hash) -> std::optional<weight_ref> {
    const auto [lo, hi] = index->equal_range(hash);
    for (auto it = lo; it != hi; ++it) {
      const tensor& t = it->second.t;
      if (t.type() == type && t.byte_size() == bytes.size() && std::memcmp(t.data(), bytes.data(), bytes.size()) == 0)
        return weight_ref{it->second.name, derived};
    }
    return std::nullopt;
  };
}

Status check_outputs(const generation& gen, const partition_plan& plan, const std::vector<provider_binding>& providers) {
  if (gen.embed_mode == 1) return {};
  std::error_code ec;
  for (std::size_t p = 0; p < providers.size(); ++p) {
    const auto parts = cached_partitions(plan, providers, p);
    if (parts.empty()) continue;
    const auto& b = *providers[p].context;
    std::vector<fs::path> paths;
    if (!b.multi_graph) {
      for (std::size_t i = 0; i < parts.size(); ++i) paths.push_back(binary_path(gen, b, i, true));
    } else if (gen.share) {
      auto& ws = shared_workspace();
      std::lock_guard lock(ws.mu);
      if (!ws.gen.count(providers[p].type_key)) paths.push_back(binary_path(gen, b, 0, false));
    } else {
      paths.push_back(binary_path(gen, b, 0, false));
    }
    for (const auto& x : paths)
      for (const auto& at : gen.places_of(x.filename()))
        if (fs::exists(at, ec))
          return Status(errc::invalid_argument, cat("'", at.string(), "' exists already. Please remove the EP context "
                                                    "binary if you want to re-generate the EP context model."));
  }
  return {};
}

Status generate(const model& m, const partition_plan& plan, const function_of& fn,
                const std::vector<provider_binding>& providers, const generation& gen, const session_options& options,
                ep_context_report& report) {
  std::vector<std::vector<part_ref>> per(providers.size());
  std::size_t total = 0;
  for (std::size_t p = 0; p < providers.size(); ++p) total += (per[p] = cached_partitions(plan, providers, p)).size();
  if (gen.record_placement)
    for (const auto* gp : plan.graph_plans())
      for (std::size_t k = 0; k < gp->partitions.size(); ++k)
        if (gp->partitions[k].is_fused() && !providers[gp->partition_provider[k]].context)
          return Status(errc::not_implemented,
                        cat("provider ", providers[gp->partition_provider[k]].type_key, " compiled partition '",
                            gp->partitions[k].name, "' (", std::to_string(gp->partitions[k].nodes.size()),
                            " nodes) and cannot store it (it has no EP context): a compiled model needs every partition"));
  if (total == 0 && !gen.sink) {
    report.warnings.push_back(cat("ep.context_enable is set but no provider of the stack (", stack_of(providers),
                                  ") compiled a partition it can cache: no EP context model was written"));
    return {};
  }

  const fs::path folder = gen.model_path.parent_path();
  std::map<part_ref, ep_context_attributes> node_attrs;
  struct pending {
    fs::path path;
    std::shared_ptr<ep_context_builder> builder;
  };
  std::vector<pending> to_write;
  std::vector<std::string> clear_shared;  // providers whose shared builder is written now
  std::size_t done = 0;
  std::uint64_t embedded_bytes = 0;
  auto& ws = shared_workspace();
  // A sharing session that fails leaves the workspace as it found it: what it added to a shared builder is rolled
  // back, and an entry it created is removed, so the group can go on (or the session be tried again).
  std::unique_lock<std::mutex> share_lock;
  if (gen.share) share_lock = std::unique_lock(ws.gen_mu);
  struct touched_entry {
    std::string key;
    std::shared_ptr<ep_context_builder> builder;
    ep_context_builder::checkpoint at;
    bool created;
  };
  std::vector<touched_entry> touched;
  std::vector<std::shared_ptr<ep_context_builder>> used;  // every builder this session added to
  struct rollback_guard {
    workspace& ws;
    std::vector<touched_entry>& touched;
    bool armed = true;
    ~rollback_guard() {
      if (!armed) return;
      std::lock_guard lock(ws.mu);
      for (auto& t : touched) {
        t.builder->rollback(t.at);
        if (auto it = ws.gen.find(t.key); t.created && it != ws.gen.end() && it->second.builder == t.builder)
          ws.gen.erase(it);
      }
    }
  } guard{ws, touched};
  for (std::size_t p = 0; p < providers.size(); ++p) {
    if (per[p].empty()) continue;
    const auto& b = *providers[p].context;
    const std::string key(providers[p].type_key);
    std::shared_ptr<ep_context_builder> common;
    fs::path common_path;
    if (gen.embed_mode == 0 && b.multi_graph) {
      if (gen.share) {
        std::lock_guard lock(ws.mu);
        auto& e = ws.gen[key];
        const bool created = !e.builder;
        if (created) {
          e.builder = std::make_shared<ep_context_builder>(key, b.sdk_version, b.hardware);  // never weightless
          e.bin_path = binary_path(gen, b, 0, false);
        }
        touched.push_back({key, e.builder, e.builder->mark(), created});
        common = e.builder;
        common_path = e.bin_path;
        if (common_path.parent_path() != folder)
          return Status(errc::invalid_argument,
                        cat("ep.share_ep_contexts: the shared context binary '", common_path.string(),
                            "' is not in the folder of the EP context model '", gen.model_path.string(),
                            "' (the models of a group are written beside one another)"));
      } else {
        common = std::make_shared<ep_context_builder>(key, b.sdk_version, b.hardware);
        if (gen.weightless) common->set_weight_source(gen.weights);
        common_path = binary_path(gen, b, 0, false);
      }
      if (!gen.share) used.push_back(common);  // (a shared builder holds other sessions' tensors too)
    }
    for (std::size_t i = 0; i < per[p].size(); ++i) {
      const auto& part = per[p][i].get();
      const graph& pg = *part.g;
      EPSTACK_RETURN_IF_ERROR(progress(options, "serialize", done++, total, part.name));
      const std::string name = gen.prefix + part.name;
      auto builder = common;
      if (!builder) {
        builder = std::make_shared<ep_context_builder>(key, b.sdk_version, b.hardware);
        if (gen.weightless) builder->set_weight_source(gen.weights);
        used.push_back(builder);
      }
      auto rec = b.serialize(part, fn(*per[p][i].gp, per[p][i].k), *builder);
      if (!rec) return Status(rec.code(), cat("provider ", key, ": serializing partition '", part.name, "': ", rec.status().message()));
      auto st = builder->add_graph(name, io_names(pg, part.inputs, true), io_names(pg, part.outputs, false),
                                   std::move(rec->payload), std::move(rec->tensors));
      if (!st)
        return Status(st.code(), cat(st.message(), gen.share ? " (the models of a shared context need distinct "
                                                               "ep.context_node_name_prefix values)"
                                                             : ""));
      ep_context_attributes a;
      a.partition_name = name;
      a.source = key;
      a.ep_sdk_version = b.sdk_version;
      a.hardware_architecture = b.hardware;
      a.onnx_model_filename = gen.source_filename;
      a.embed_mode = gen.embed_mode;
      a.notes = cat("epstack EP context format ", std::to_string(ep_context_format_version));
      if (gen.embed_mode == 1) {
        EPSTACK_ASSIGN_OR_RETURN(auto bytes, builder->serialize());
        embedded_bytes += bytes.size();
        a.max_size = static_cast<std::int64_t>(bytes.size());
        a.ep_cache_context.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        a.main_context = 1;
      } else if (!common) {
        const fs::path path = binary_path(gen, b, i, true);
        to_write.push_back({path, builder});
        a.ep_cache_context = path.filename().string();
        a.main_context = 1;
      } else {
        // One binary for all the provider's graphs: the first node carries it, the others refer to it.
        a.main_context = i == 0 || gen.share ? 1 : 0;
        if (a.main_context == 1) a.ep_cache_context = common_path.filename().string();
      }
      node_attrs.emplace(per[p][i], std::move(a));
    }
    if (common && (!gen.share || gen.stop_share)) {
      to_write.push_back({common_path, common});
      if (gen.share) clear_shared.push_back(key);
    }
  }
  // protobuf's 2 GB limit on a whole model (less room for the rest of it), or a lower one the options set.
  std::uint64_t embed_limit = (std::uint64_t{1} << 31) - (std::uint64_t{64} << 20);
  if (auto x = options.config(config_keys::ep_context_embed_limit_bytes); x && !x->empty()) {
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(x->data(), x->data() + x->size(), v);
    if (ec != std::errc() || end != x->data() + x->size())
      return Status(errc::invalid_argument, cat(config_keys::ep_context_embed_limit_bytes,
                                                " must be a number of bytes, found '", *x, "'"));
    embed_limit = std::min(embed_limit, v);
  }
  if (embedded_bytes > embed_limit && !gen.sink)
    return Status(errc::invalid_argument,
                  cat("the compiled contexts take ", std::to_string(embedded_bytes), " bytes, more than an ONNX model ",
                      "can hold with ep.context_embed_mode 1 (", std::to_string(embed_limit >> 20), " MiB of 2 GB): use "
                      "ep.context_embed_mode 0 (a context binary beside the model)"));

  // The EPContext model: the source's header, inputs and outputs in order, EPContext nodes in place of the cached
  // partitions, every other node copied with the initializers it uses.
  model out;
  out.ir_version = m.ir_version;
  out.opsets = m.opsets;
  if (m.opset(ep_context_domain) < 0) out.opsets.push_back({std::string(ep_context_domain), 1});
  out.producer_name = m.producer_name;
  out.producer_version = m.producer_version;
  out.domain = m.domain;
  out.model_version = m.model_version;
  out.doc_string = m.doc_string;
  out.metadata = m.metadata;
  // Each provider that compiled a partition says, in ONNX Runtime's key, what it compiled for.
  for (std::size_t p = 0; p < providers.size(); ++p) {
    if (per[p].empty() || !providers[p].context) continue;
    const std::string key = cat(ep_compatibility_info_prefix, providers[p].type_key);
    std::erase_if(out.metadata, [&](const auto& kv) { return kv.first == key; });
    out.metadata.emplace_back(key, compatibility_info(providers[p]));
  }
  if (gen.weightless) {
    // What a load replays on the source model to derive the fused and folded weights again.
    std::string how = cat("level=", std::to_string(static_cast<int>(options.optimization_level())));
    for (const auto& [name, value] : options.free_dimension_overrides()) how += cat(";dim=", name, "=", std::to_string(value));
    std::erase_if(out.metadata, [](const auto& kv) { return kv.first == weightless_optimization_metadata; });
    out.metadata.emplace_back(std::string(weightless_optimization_metadata), how);
  }
  if (gen.weightless_recorded) {
    std::erase_if(out.metadata, [](const auto& kv) { return kv.first == config_keys::weightless_mode_metadata; });
    out.metadata.emplace_back(std::string(config_keys::weightless_mode_metadata), "2");
  }
  out.functions = m.functions;
  // Each graph rebuilt with EPContext nodes in place of its cached partitions: the main graph, and the bodies of its
  // control-flow nodes (a body's partitions are cached as the main graph's are, so loading compiles none of them).
  std::function<Result<graph>(const graph&, const graph_plan&, bool)> rebuild;
  rebuild = [&](const graph& g, const graph_plan& gp, bool is_main) -> Result<graph> {
    graph cg(g.name());
    cg.set_doc_string(g.doc_string());
    // The graph's IR 10+ fields (metadata_props, and any newer field kept as bytes) stay with the graph.
    cg.metadata() = g.metadata();
    cg.set_ir_extra(g.ir_extra());
    // The inputs in their order. An initializer that is also a graph input (a default the caller may override) stays
    // an input when a node copied to the CPU reads it; one that only compiled partitions read is part of their
    // context. A body keeps its inputs (they are its signature).
    std::vector<bool> cpu_reads(g.value_count());
    for (std::size_t k : gp.execution_order) {
      if (node_attrs.count(part_ref{&gp, k})) continue;
      for (node_id n : gp.partitions[k].nodes) {
        for (value_id v : g.node(n).inputs)
          if (v != no_id) cpu_reads[v] = true;
        for (value_id v : g.node(n).implicit_inputs)
          if (v != no_id) cpu_reads[v] = true;
      }
    }
    for (value_id v : g.inputs())
      if (!is_main || !g.value(v).initializer || cpu_reads[v]) cg.add_input(g.value(v).name, g.value(v).type);
    std::vector<bool> init_added(g.value_count());
    const auto use_initializer = [&](value_id v) {
      if (v == no_id || !g.value(v).initializer || init_added[v]) return;
      init_added[v] = true;
      cg.add_initializer(g.value(v).name, *g.value(v).initializer);
    };
    const auto names_of = [&](const auto& ids) {
      std::vector<std::string> r;
      for (value_id v : ids) r.push_back(v == no_id ? std::string() : g.value(v).name);
      return r;
    };
    // Nodes that placement by cost moved from the first provider that claimed them: their provider is recorded.
    std::vector<std::string> placed(g.node_count());
    for (const auto& c : gp.choices)
      if (c.chosen != no_index && !c.costs.empty() && c.chosen != c.costs.front().first)
        for (node_id n : c.nodes) placed[n] = plan.providers[c.chosen];
    for (std::size_t k : gp.execution_order) {
      const auto& part = gp.partitions[k];
      if (auto it = node_attrs.find(part_ref{&gp, k}); it != node_attrs.end()) {
        node en;
        en.name = it->second.partition_name;
        en.op_type = std::string(ep_context_op_type);
        en.domain = std::string(ep_context_domain);
        write_attributes(it->second, en.attributes);
        cg.add_node(std::move(en), io_names(g, part.inputs, true), io_names(g, part.outputs, false));
        continue;
      }
      for (node_id n : part.nodes) {
        const auto& nd = g.node(n);
        for (value_id v : nd.inputs) use_initializer(v);
        for (value_id v : nd.implicit_inputs) use_initializer(v);
        node copy = nd;
        copy.implicit_inputs.clear();
        if (gen.record_placement && gp.nodes[n].provider != no_index) placed[n] = plan.providers[gp.nodes[n].provider];
        if (!placed[n].empty() && gp.nodes[n].provider != no_index && plan.providers[gp.nodes[n].provider] == placed[n]) {
          std::erase_if(copy.metadata, [](const auto& kv) { return kv.first == placement_metadata_key; });
          copy.metadata.emplace_back(std::string(placement_metadata_key), placed[n]);
        }
        for (const auto& sref : gp.subgraphs) {
          if (sref.node != n) continue;
          const graph* body = nullptr;
          auto* at = copy.attributes.find(sref.attribute);
          if (at == nullptr) continue;
          if (auto* one = std::get_if<subgraph>(&at->value)) body = one->get();
          else if (auto* many = std::get_if<std::vector<subgraph>>(&at->value); many && sref.index < many->size())
            body = (*many)[sref.index].get();
          if (body == nullptr) continue;
          EPSTACK_ASSIGN_OR_RETURN(auto rebuilt, rebuild(*sref.plan->g, *sref.plan, false));
          if (auto* one = std::get_if<subgraph>(&at->value)) *one = make_subgraph(std::move(rebuilt));
          else std::get<std::vector<subgraph>>(at->value)[sref.index] = make_subgraph(std::move(rebuilt));
        }
        cg.add_node(std::move(copy), names_of(nd.inputs), names_of(nd.outputs));
      }
    }
    for (value_id v : g.outputs()) cg.add_output(g.value(v).name, g.value(v).type);
    for (value_id v = 0; v < cg.value_count(); ++v) {
      auto& rec = cg.value(v);
      if (rec.is_graph_input || rec.is_graph_output || rec.initializer) continue;
      const value_id s = g.find_value(rec.name);
      if (s != no_id && g.value(s).type.is_defined()) {
        rec.type = g.value(s).type;
        rec.in_value_info = true;
      }
    }
    if (!cg.problems().empty())
      return Status(errc::fail, cat("building the EP context model: ", cg.problems().front()));
    return cg;
  };
  EPSTACK_ASSIGN_OR_RETURN(auto cg, rebuild(m.graph, plan.main, true));
  out.graph = std::move(cg);
  if (gen.sink) {
    EPSTACK_RETURN_IF_ERROR(progress(options, "write", 0, 1, gen.model_path.string()));
    EPSTACK_RETURN_IF_ERROR(gen.sink(out));
    guard.armed = false;
    report.model_written = gen.model_path;
    report.nodes_written = node_attrs.size();
    for (const auto& b : used) report.weight_bytes_stored += b->tensor_bytes();
    return {};
  }

  // Binaries first, then the model that names them; each written under a temporary name and renamed.
  EPSTACK_RETURN_IF_ERROR(progress(options, "write", 0, to_write.size() + 1, gen.model_path.string()));
  std::vector<fs::path> written;
  const auto undo = [&] {
    std::error_code ec;
    for (const auto& w : written) fs::remove(w, ec);
  };
  for (const auto& w : to_write) {
    if (auto st = w.builder->write(w.path); !st) {
      undo();
      return st;
    }
    written.push_back(w.path);
  }
  save_options so;
  if (!gen.external_initializers.empty()) {
    so.mode = external_data_mode::all_external;
    so.external_file_name = gen.external_initializers;
  }
  if (auto st = save_model(out, gen.model_path, so); !st) {
    undo();
    return st.with_context("writing the EP context model");
  }
  guard.armed = false;
  if (!clear_shared.empty()) {
    std::lock_guard lock(ws.mu);
    for (const auto& k : clear_shared) ws.gen.erase(k);
  }
  report.model_written = gen.model_path;
  report.binaries_written = written;
  report.nodes_written = node_attrs.size();
  for (const auto& b : used) {
    report.weight_bytes_stored += b->tensor_bytes();
    report.weight_bytes_referenced += b->referenced_bytes();
  }
  return {};
}

}  // namespace epstack::ctx
