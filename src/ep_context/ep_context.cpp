// EPContext models in the session core (see ep_context.hpp). The rules are ep-context-design.md's and ONNX Runtime's
// (shared/spec/ort-behaviours.md), restated in the README's "EPContext models" section.
#include <epstack/ep_context/contexts.hpp>

#include "internal.hpp"

#include <epstack/detail/cat.hpp>
#include <epstack/ep_context/attributes.hpp>
#include <epstack/onnx/onnx_io.hpp>
#include <epstack/core/path_rules.hpp>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>

namespace epstack::ctx {

namespace fs = std::filesystem;
using detail::cat;
using namespace internal;

namespace internal {
workspace& shared_workspace() {
  static workspace w;
  return w;
}

std::string stack_of(const std::vector<provider_binding>& providers) {
  std::string s;
  for (const auto& p : providers) s += cat(s.empty() ? "" : ", ", p.type_key);
  return s;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += cat(s.empty() ? "" : ", ", x);
  return s.empty() ? "none" : s;
}

std::vector<std::string> io_names(const graph& g, std::span<const value_id> ids, bool skip_constants) {
  std::vector<std::string> r;
  for (value_id v : ids) {
    if (v == no_id) continue;
    if (skip_constants && g.value(v).initializer) continue;
    r.push_back(g.value(v).name);
  }
  return r;
}


Status bad_graph(std::string_view node, const std::string& why) {
  return Status(errc::invalid_graph, cat("EPContext node '", node, "': ", why));
}


// The fused partitions that provider p caches, in every graph of the model (the main graph first, then the bodies
// of its control-flow nodes, depth first), each graph's in execution order.
void cached_in(const graph_plan& gp, const std::vector<provider_binding>& providers, std::size_t p, std::vector<part_ref>& r) {
  for (std::size_t k : gp.execution_order)
    if (gp.partition_provider[k] == p && gp.partitions[k].is_fused()) r.push_back({&gp, k});
  for (const auto& s : gp.subgraphs) cached_in(*s.plan, providers, p, r);
}
std::vector<part_ref> cached_partitions(const partition_plan& plan, const std::vector<provider_binding>& providers,
                                        std::size_t p) {
  std::vector<part_ref> r;
  if (providers[p].context) cached_in(plan.main, providers, p, r);
  return r;
}

}  // namespace internal

namespace {

// 64-byte aligned bytes that a binary read from an attribute owns.
std::shared_ptr<std::byte> aligned_copy(std::string_view s) {
  void* p = std::aligned_alloc(64, (std::max<std::size_t>(s.size(), 1) + 63) / 64 * 64);
  if (p == nullptr) throw std::bad_alloc();
  if (!s.empty()) std::memcpy(p, s.data(), s.size());
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); });
}

}  // namespace

bool is_ep_context_node(const node& n) { return n.op_type == ep_context_op_type && n.domain == ep_context_domain; }

Status progress(const session_options& o, std::string_view stage, std::size_t done, std::size_t total,
                std::string_view detail) {
  if (!o.progress()) return {};
  if (o.progress()(compile_progress{stage, done, total, detail})) return {};
  return Status(errc::fail, cat("cancelled by the progress callback during '", stage, "'"));
}

// ---------------------------------------------------------------------------------------------------------------
// Loading

unsigned verify_threads(const session_options& o) {
  return o.intra_op_threads() > 0 ? static_cast<unsigned>(o.intra_op_threads())
                                  : std::max(1u, std::thread::hardware_concurrency());
}

Result<bool> verify_tensors_on_load(const session_options& o) {
  const auto v = o.config(config_keys::ep_context_verify);
  if (!v || *v == "on_use") return false;
  if (*v == "on_load") return true;
  return Status(errc::invalid_argument,
                cat(config_keys::ep_context_verify, " must be on_use or on_load, found '", *v, "'"));
}

Result<load_result> load_contexts(const model& src, model* m, const std::vector<provider_binding>& providers,
                                  const session_options& options, bool check_only, const source_optimizer& optimise) {
  load_result r;
  struct ctx_node {
    const graph* gr;  // the graph it is in (the main graph, or a control-flow body)
    graph* mgr;       // the same graph of `m` (null when nothing may change)
    node_id n;
    ep_context_attributes a;
    std::size_t provider;
    std::shared_ptr<const ep_context_binary> binary;  // main contexts
    std::string path_key;                             // embed_mode 0
    bool from_workspace = false;
  };
  std::vector<ctx_node> nodes;
  std::set<std::string, std::less<>> names;
  // EPContext nodes of every graph, the main graph's first, then the bodies of control-flow nodes, depth first.
  std::function<Status(const graph&, graph*)> collect = [&](const graph& g, graph* mg) -> Status {
    for (node_id n = 0; n < g.node_count(); ++n) {
      const auto& nd = g.node(n);
      if (is_ep_context_node(nd)) {
        if (nd.name.empty()) return Status(errc::invalid_graph, "an EPContext node has no name (its graph is found by name)");
        if (!names.insert(nd.name).second)
          return bad_graph(nd.name, "two EPContext nodes of the model have this name (each is restored by its name)");
        EPSTACK_ASSIGN_OR_RETURN(auto a, read_attributes<ep_context_attributes>(nd.attributes, nd.name));
        std::size_t p = 0;
        while (p < providers.size() && !(providers[p].context && providers[p].context->accepts(a.source))) ++p;
        if (p == providers.size())
          return bad_graph(nd.name, cat("its source '", a.source, "' is recognised by no provider of the stack (",
                                        stack_of(providers), ")"));
        nodes.push_back({&g, mg, n, std::move(a), p, nullptr, {}, false});
        continue;
      }
      // Bodies: the model's own (mutable) graphs when `m` is given, walked in the same order.
      if (mg != nullptr) {
        EPSTACK_RETURN_IF_ERROR(mg->node(n).attributes.for_each_subgraph([&](graph& body) { return collect(body, &body); }));
      } else {
        EPSTACK_RETURN_IF_ERROR(nd.attributes.for_each_subgraph([&](const graph& body) { return collect(body, nullptr); }));
      }
    }
    return {};
  };
  EPSTACK_RETURN_IF_ERROR(m != nullptr ? collect(m->graph, &m->graph) : collect(src.graph, nullptr));
  if (nodes.empty()) return r;

  const bool share = options.flag(config_keys::ep_share_contexts) && !check_only;
  EPSTACK_ASSIGN_OR_RETURN(const bool verify_on_load, verify_tensors_on_load(options));
  std::optional<fs::path> folder;
  if (auto f = options.config(config_keys::ep_context_file_path); f && !f->empty()) folder = fs::path(*f).parent_path();
  else if (!src.path.empty()) folder = src.path.parent_path();
  auto& ws = shared_workspace();

  // The source model of weightless contexts, read once when the first one needs it: the buffer of the session options,
  // else ep.context_source_model_path, else the node's onnx_model_filename beside the compiled model.
  std::shared_ptr<const model> source;
  std::string source_label;
  const auto read_source = [&](const ctx_node& cn, bool infer) -> Result<model> {
    const std::string& name = cn.gr->node(cn.n).name;
    load_options lo;
    if (!infer) lo.shape_inference = shape_inference_mode::off;
    if (auto f = options.config(config_keys::external_initializers_folder)) lo.external_data_folder = std::string(*f);
    Result<model> sm = Status(errc::fail, "");
    if (!options.weightless_source_model().empty()) {
      source_label = "(the session options' buffer)";
      sm = load_model(options.weightless_source_model(), lo);
      if (sm) r.source_model_read = "<buffer>";
    } else {
      fs::path path;
      if (auto p = options.config(config_keys::ep_context_source_model_path); p && !p->empty()) {
        path = fs::path(*p);
      } else if (!cn.a.onnx_model_filename.empty() && folder) {
        auto full = resolve_file_in_folder(*folder, cn.a.onnx_model_filename,
                                           cat("EPContext node '", name, "': source model (onnx_model_filename)"));
        if (!full)
          return bad_graph(name, cat("its context is weightless and its source model '", cn.a.onnx_model_filename,
                                     "' is not beside the compiled model (", full.status().message(), "): set ",
                                     config_keys::ep_context_source_model_path, " or give the source model's bytes"));
        path = *full;
      } else {
        return bad_graph(name, cat("its context is weightless: its weights are in the source model, which is not known "
                                   "(no onnx_model_filename, or a model loaded from a buffer): set ",
                                   config_keys::ep_context_source_model_path, " or give the source model's bytes"));
      }
      source_label = cat("'", path.string(), "'");
      sm = load_model(path, lo);
      if (sm) r.source_model_read = path;
    }
    if (!sm)
      return bad_graph(name, cat("its context is weightless and its source model ", source_label, " does not load: ",
                                 sm.status().message()));
    return sm;
  };
  const auto source_model = [&](const ctx_node& cn) -> Result<std::shared_ptr<const model>> {
    if (source) return source;
    EPSTACK_ASSIGN_OR_RETURN(auto sm, read_source(cn, false));
    source = std::make_shared<const model>(std::move(sm));
    return source;
  };
  // The same, optimised as the session that compiled the context did: fused and folded weights are derived again.
  std::shared_ptr<const model> optimised;
  const auto optimised_model = [&](const ctx_node& cn) -> Result<std::shared_ptr<const model>> {
    if (optimised) return optimised;
    const std::string& name = cn.gr->node(cn.n).name;
    if (!optimise)
      return bad_graph(name, "its weightless context refers to weights derived by graph optimisation, and this check "
                             "does not optimise the source model");
    // Read again rather than copied (tensors share their storage, and optimisation may change some), with types.
    EPSTACK_ASSIGN_OR_RETURN(auto fresh, read_source(cn, true));
    auto om = optimise(std::move(fresh));
    if (!om)
      return bad_graph(name, cat("its weightless context needs the source model ", source_label,
                                 " optimised, which failed: ", om.status().message()));
    optimised = std::make_shared<const model>(std::move(*om));
    return optimised;
  };

  // Main contexts: embedded payloads and binaries beside the model (or in the shared workspace).
  for (auto& cn : nodes) {
    if (cn.a.main_context != 1) continue;
    const std::string& name = cn.gr->node(cn.n).name;
    const auto& b = *providers[cn.provider].context;
    if (cn.a.embed_mode == 1) {
      std::shared_ptr<std::byte> block;
      std::size_t size = 0;
      if (m != nullptr) {
        // The payload leaves the model's attribute for aligned memory the binary owns (no second copy kept).
        auto* at = cn.mgr->node(cn.n).attributes.find("ep_cache_context");
        auto& s = std::get<std::string>(at->value);
        size = s.size();
        block = aligned_copy(s);
        std::string().swap(s);
      } else {
        size = cn.a.ep_cache_context.size();
        block = aligned_copy(cn.a.ep_cache_context);
      }
      auto bin = ep_context_binary::from_bytes(std::span<const std::byte>(block.get(), size), block,
                                               cat("EPContext node '", name, "': embedded context"));
      if (!bin) return bin.status();
      cn.binary = std::make_shared<const ep_context_binary>(std::move(*bin));
    } else if (const auto& reader = options.get_context_reader()) {
      // The application's reader: the name is a key into its storage, never a path we open; still plain and relative,
      // as the model would name a file.
      if (!is_plain_relative(fs::path(cn.a.ep_cache_context)))
        return bad_graph(name, cat("its context binary '", cn.a.ep_cache_context, "' is not a plain relative name"));
      cn.path_key = "reader:" + cn.a.ep_cache_context;
      for (const auto& other : nodes)
        if (&other != &cn && other.binary && other.path_key == cn.path_key) cn.binary = other.binary;
      if (!cn.binary) {
        auto bytes = reader(cn.a.ep_cache_context);
        if (!bytes)
          return bad_graph(name, cat("the context reader has no context binary '", cn.a.ep_cache_context, "'"));
        auto block = aligned_copy(std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
        auto bin = ep_context_binary::from_bytes(std::span<const std::byte>(block.get(), bytes->size()), block,
                                                 cat("context binary '", cn.a.ep_cache_context, "' (from the reader)"));
        if (!bin) return Status(errc::invalid_graph, cat("EPContext node '", name, "': ", bin.status().message()));
        cn.binary = std::make_shared<const ep_context_binary>(std::move(*bin));
      }
    } else {
      if (!folder)
        return bad_graph(name, cat("its context binary '", cn.a.ep_cache_context,
                                   "' is a path relative to the model, which was loaded from a memory buffer: set "
                                   "ep.context_file_path to the model's path so that the folder is known"));
      // The workspace is keyed by the binary's absolute path, so a later session finds its graphs there without
      // touching the file; a name that is not plain and relative never gets that far.
      const fs::path rel(cn.a.ep_cache_context);
      const bool plain = is_plain_relative(rel);
      std::error_code ec;
      if (plain) cn.path_key = fs::absolute(*folder / rel, ec).lexically_normal().string();
      if (share && plain) {
        std::lock_guard lock(ws.mu);
        if (auto it = ws.load.find(providers[cn.provider].type_key); it != ws.load.end())
          if (auto jt = it->second.find(cn.path_key); jt != it->second.end()) {
            cn.binary = jt->second.binary.lock();
            cn.from_workspace = cn.binary != nullptr;
          }
      }
      if (!cn.binary) {
        // A binary another node of this model opened already is not read twice.
        for (const auto& other : nodes)
          if (&other != &cn && other.binary && other.path_key == cn.path_key) cn.binary = other.binary;
      }
      if (!cn.binary) {
        auto full = resolve_file_in_folder(*folder, cn.a.ep_cache_context, cat("EPContext node '", name, "': context binary"));
        if (!full) return Status(errc::invalid_graph, full.status().message());
        auto bin = ep_context_binary::open(*full);
        if (!bin) return Status(errc::invalid_graph, cat("EPContext node '", name, "': ", bin.status().message()));
        cn.binary = std::make_shared<const ep_context_binary>(std::move(*bin));
        r.files_read.push_back(cn.path_key);
      }
    }
    const auto& bin = *cn.binary;
    if (!b.accepts(bin.provider()))
      return bad_graph(name, cat("its context ", bin.origin(), " was made by provider '", bin.provider(), "', expected '",
                                 providers[cn.provider].type_key, "'"));
    if (bin.sdk_version() != b.sdk_version)
      return bad_graph(name, cat("its context ", bin.origin(), " was made with ", providers[cn.provider].type_key,
                                 " SDK version '", bin.sdk_version(), "'; this build has version '", b.sdk_version, "'"));
    if (!cn.a.ep_sdk_version.empty() && cn.a.ep_sdk_version != b.sdk_version)
      return bad_graph(name, cat("attribute ep_sdk_version is '", cn.a.ep_sdk_version, "'; this build of ",
                                 providers[cn.provider].type_key, " has version '", b.sdk_version, "'"));
    if (!b.hardware_supported(bin.hardware_architecture()))
      return bad_graph(name, cat("its context ", bin.origin(), " was compiled for hardware architecture '",
                                 bin.hardware_architecture(), "'; this machine has '", b.hardware, "'"));
    // A weightless context reads its weights from the source model, checked by hash now (once per binary); one taken
    // from the shared workspace was bound by another session, to that session's source: bound again to this one's.
    if (cn.binary->weightless() && (!cn.binary->bound() || cn.from_workspace)) {
      EPSTACK_ASSIGN_OR_RETURN(auto source, source_model(cn));
      bool any_derived = false;
      for (const auto& t : cn.binary->tensors()) any_derived = any_derived || t.derived;
      std::shared_ptr<const model> derived;
      if (any_derived) {
        EPSTACK_ASSIGN_OR_RETURN(derived, optimised_model(cn));
      }
      const auto find = [&](const ep_context_tensor& t) -> Result<std::span<const std::byte>> {
        const graph& sg = t.derived ? derived->graph : source->graph;
        const value_id v = sg.find_value(t.source);
        if (v == no_id || !sg.value(v).initializer)
          return Status(errc::invalid_graph, cat("the source model ", source_label, t.derived ? " as optimised" : "",
                                                 " has no initializer '", t.source, "'"));
        const tensor& w = *sg.value(v).initializer;
        if (w.type() != t.type)
          return Status(errc::invalid_graph, cat("initializer '", t.source, "' of the source model ", source_label, " is ",
                                                 to_string(w.type()), "; the context was compiled with ", to_string(t.type)));
        return std::span<const std::byte>(static_cast<const std::byte*>(w.data()), w.byte_size());
      };
      std::shared_ptr<const void> keep = source;
      if (derived) keep = std::make_shared<std::pair<std::shared_ptr<const model>, std::shared_ptr<const model>>>(source, derived);
      auto bound = cn.binary->bind_weights(find, std::move(keep), verify_threads(options));
      if (!bound) return bad_graph(name, bound.status().message());
      auto shared = std::make_shared<const ep_context_binary>(std::move(*bound));
      for (auto& other : nodes)
        if (other.binary == cn.binary && &other != &cn) other.binary = shared;
      cn.binary = std::move(shared);
    }
    // A compatibility check answers for every byte of the binary: the whole-file hash, the zeros between tensors and
    // every tensor.
    // (cn.binary, not `bin`: binding above replaced it.)
    if (check_only)
      if (auto st = cn.binary->verify_all(verify_threads(options)); !st) return bad_graph(name, st.message());
  }

  // Every node finds its graph: a main node in its own context, others in a main context of the same provider.
  for (auto& cn : nodes) {
    const auto& nd = cn.gr->node(cn.n);
    const graph& g = *cn.gr;
    const std::string gname = cn.a.partition_name.empty() ? nd.name : cn.a.partition_name;
    const ep_context_graph* eg = nullptr;
    std::shared_ptr<const ep_context_binary> holder;
    if (cn.a.main_context == 1) {
      eg = cn.binary->find_graph(gname);
      holder = cn.binary;
      if (eg == nullptr) {
        std::vector<std::string> names;
        for (const auto& x : cn.binary->graphs()) names.push_back(x.name);
        return bad_graph(nd.name, cat("its graph '", gname, "' is not in its context ", cn.binary->origin(),
                                      " (which holds: ", joined(names), ")"));
      }
    } else {
      std::size_t mains = 0;
      for (const auto& other : nodes)
        if (other.a.main_context == 1 && other.provider == cn.provider) {
          ++mains;
          if (const auto* x = other.binary->find_graph(gname); x != nullptr && eg == nullptr) {
            eg = x;
            holder = other.binary;
          }
        }
      if (eg == nullptr)
        return bad_graph(nd.name, cat("main_context is 0 and its graph '", gname, "' is in none of the ",
                                      std::to_string(mains), " main contexts of ", providers[cn.provider].type_key,
                                      " in this model"));
    }
    const auto ins = io_names(g, std::span<const value_id>(nd.inputs.data(), nd.inputs.size()), false);
    const auto outs = io_names(g, std::span<const value_id>(nd.outputs.data(), nd.outputs.size()), false);
    if (ins != eg->inputs || outs != eg->outputs)
      return bad_graph(nd.name, cat("its inputs (", joined(ins), ") and outputs (", joined(outs), ") differ from those of graph '",
                                    gname, "' in ", holder->origin(), ": (", joined(eg->inputs), ") and (",
                                    joined(eg->outputs), ")"));
    // A compatibility check answers for the bytes too, and so does a load asked to verify them all now; otherwise
    // each tensor is verified before its first use (see ep_context_binary).
    if (check_only || verify_on_load)
      if (auto st = holder->verify_tensors(eg->tensors, verify_threads(options)); !st)
        return bad_graph(nd.name, st.message());
    r.nodes.emplace(nd.name, loaded_node{cn.provider, holder, eg});
  }

  // The shared workspace: graphs of binaries this session read that it does not use stay for later sessions; graphs
  // taken from it leave it (also by a session that read the file itself at the same time), and an entry with nothing
  // left, or whose binary no session holds any more, goes.
  if (share) {
    std::lock_guard lock(ws.mu);
    for (const auto& cn : nodes) {
      if (cn.a.main_context != 1 || cn.path_key.empty()) continue;
      auto& per = ws.load[std::string(providers[cn.provider].type_key)];
      std::erase_if(per, [](const auto& kv) { return kv.second.binary.expired(); });
      std::set<std::string, std::less<>> used;
      for (const auto& [name, ln] : r.nodes)
        if (ln.binary == cn.binary) used.insert(ln.graph->name);
      if (auto it = per.find(cn.path_key); it != per.end()) {
        for (const auto& u : used) {
          const auto taken = it->second.remaining.erase(u);
          if (cn.from_workspace) r.from_workspace += taken;
        }
        if (it->second.remaining.empty()) per.erase(it);
      } else {
        workspace::load_entry e{cn.binary, {}};
        for (const auto& x : cn.binary->graphs())
          if (!used.count(x.name)) e.remaining.insert(x.name);
        if (!e.remaining.empty()) per.emplace(cn.path_key, std::move(e));
      }
      if (per.empty()) ws.load.erase(std::string(providers[cn.provider].type_key));
    }
  }
  return r;
}

}  // namespace epstack::ctx
