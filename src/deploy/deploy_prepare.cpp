// A deployment model made ready to run (prepare.hpp): the plan the file records (one partition per node, on the
// provider it names, in the file's execution order), EPContext nodes restored from their binaries, and the other
// nodes compiled, one call per provider. No graph optimisation and no partitioning: the file holds their result.
#include <epstack/deploy/prepare.hpp>

#include <epstack/detail/cat.hpp>
#include <epstack/ep_context/attributes.hpp>
#include <epstack/provider/context_binary.hpp>

#include <algorithm>
#include <map>

namespace epstack {

namespace {

using detail::cat;

std::string stack_of(const std::vector<provider_binding>& providers) {
  std::string s;
  for (const auto& p : providers) s += cat(s.empty() ? "" : ", ", p.type_key);
  return s;
}

std::vector<std::string> io_names(const graph& g, std::span<const value_id> ids) {
  std::vector<std::string> r;
  for (value_id v : ids)
    if (v != no_id) r.push_back(g.value(v).name);
  return r;
}

class preparer {
 public:
  preparer(session_core::stage& s, const deployment& d) : s_(s), d_(d) {}

  Status run() {
    for (const auto& p : s_.providers) s_.plan.providers.emplace_back(p.type_key);
    for (std::size_t p = 0; p < s_.providers.size(); ++p)
      if (s_.providers[p].type_key == cpu_provider_key) s_.plan.cpu_provider = p;
    EPSTACK_RETURN_IF_ERROR(plan_graph(s_.m.graph, s_.plan.main));
    // One compile call per provider with all its partitions (every graph's), EPContext nodes restored.
    const auto plans = std::as_const(s_.plan).graph_plans();
    std::vector<std::pair<const graph_plan*, std::size_t>> at;  // function index -> (plan, partition)
    for (const auto* gp : plans)
      for (std::size_t k = 0; k < gp->partitions.size(); ++k) at.emplace_back(gp, k);
    s_.functions.assign(at.size(), compute_function());
    for (std::size_t p = 0; p < s_.providers.size(); ++p) {
      std::vector<partition> parts;
      std::vector<std::size_t> where;
      for (std::size_t i = 0; i < at.size(); ++i) {
        const auto& [gp, k] = at[i];
        if (gp->partition_provider[k] != p) continue;
        const auto& part = gp->partitions[k];
        const auto& nd = part.g->node(part.nodes.front());
        if (nd.op_type == ep_context_op_type && nd.domain == ep_context_domain) {
          EPSTACK_ASSIGN_OR_RETURN(s_.functions[i], restore(p, part));
          ++s_.context.nodes_loaded;
          continue;
        }
        parts.push_back(part);
        where.push_back(i);
      }
      if (parts.empty()) continue;
      auto fns = s_.providers[p].compile(parts);
      if (!fns) return Status(fns.code(), cat(d_.origin, ": provider ", s_.providers[p].type_key, ": ", fns.status().message()));
      if (fns->size() != parts.size())
        return Status(errc::ep_fail, cat("provider ", s_.providers[p].type_key, " compiled ", std::to_string(fns->size()),
                                         " functions for ", std::to_string(parts.size()), " partitions"));
      for (std::size_t i = 0; i < where.size(); ++i) s_.functions[where[i]] = std::move((*fns)[i]);
    }
    s_.report.nodes_before = s_.report.nodes_after = s_.m.graph.node_count();
    return {};
  }

 private:
  // The plan the file records for graph g: a partition per node, in the file's order (its execution order).
  Status plan_graph(const graph& g, graph_plan& gp) {
    gp.g = &g;
    gp.nodes.resize(g.node_count());
    gp.rank.resize(g.node_count());
    for (node_id n = 0; n < g.node_count(); ++n) {
      const auto& nd = g.node(n);
      std::string_view key;
      for (const auto& [k, v] : nd.metadata)
        if (k == deployment_provider_key) key = v;
      std::size_t p = 0;
      while (p < s_.providers.size() && s_.providers[p].type_key != key) ++p;
      if (p == s_.providers.size())
        return Status(errc::not_implemented, cat(d_.origin, ": node ", g.describe(n), " of graph '", g.name(),
                                                 "' was compiled for provider ", key, ", which this stack (",
                                                 stack_of(s_.providers), ") lacks"));
      partition part;
      part.name = nd.name.empty() ? g.describe(n) : nd.name;
      part.g = &g;
      part.nodes = {n};
      part.inputs.assign(nd.inputs.begin(), nd.inputs.end());
      part.outputs.assign(nd.outputs.begin(), nd.outputs.end());
      gp.rank[n] = n;
      gp.nodes[n] = {p, gp.partitions.size(), {}};
      gp.execution_order.push_back(gp.partitions.size());
      gp.partitions.push_back(std::move(part));
      gp.partition_provider.push_back(p);
      for (const auto& a : nd.attributes) {
        const auto sub = [&](const subgraph& body, std::size_t index) -> Status {
          if (!body) return {};
          auto sp = std::make_unique<graph_plan>();
          EPSTACK_RETURN_IF_ERROR(plan_graph(*body, *sp));
          gp.subgraphs.push_back({n, a.name, index, std::move(sp)});
          return {};
        };
        if (const auto* one = std::get_if<subgraph>(&a.value)) EPSTACK_RETURN_IF_ERROR(sub(*one, 0));
        if (const auto* many = std::get_if<std::vector<subgraph>>(&a.value))
          for (std::size_t i = 0; i < many->size(); ++i) EPSTACK_RETURN_IF_ERROR(sub((*many)[i], i));
      }
    }
    return {};
  }

  // An EPContext node's partition, restored by provider p from the binary the file holds for it.
  Result<compute_function> restore(std::size_t p, const partition& part) {
    const auto& g = *part.g;
    const auto& nd = g.node(part.nodes.front());
    const auto bad = [&](const std::string& why) {
      return Status(errc::invalid_graph, cat(d_.origin, ": EPContext node '", nd.name, "': ", why));
    };
    const auto& b = s_.providers[p].context;
    if (!b) return bad(cat("provider ", s_.providers[p].type_key, " of this stack does not restore EP contexts"));
    const auto bytes = d_.contexts.find(nd.name);
    if (bytes == d_.contexts.end()) return bad("the deployment model holds no context binary for it");
    auto& bin = binaries_[nd.name];
    if (!bin) {
      if (b->open == nullptr) return bad(cat("provider ", s_.providers[p].type_key, " does not open EP context binaries"));
      auto opened = b->open(bytes->second, d_.owner, cat("the EP context binary of node '", nd.name, "' in ", d_.origin));
      if (!opened) return Status(errc::invalid_graph, opened.status().message());
      bin = std::make_shared<const ep_context_binary>(std::move(*opened));
    }
    if (!b->accepts(bin->provider()))
      return bad(cat("its context was made by provider '", bin->provider(), "', expected '", s_.providers[p].type_key, "'"));
    if (bin->sdk_version() != b->sdk_version)
      return bad(cat("its context was made with ", s_.providers[p].type_key, " SDK version '", bin->sdk_version(),
                     "'; this build has version '", b->sdk_version, "'"));
    if (!b->hardware_supported(bin->hardware_architecture()))
      return bad(cat("its context was compiled for hardware architecture '", bin->hardware_architecture(),
                     "'; this machine has '", b->hardware, "'"));
    if (bin->weightless()) return bad("its context is weightless; a deployment model holds every weight");
    std::string gname = nd.name;
    if (const auto* a = nd.attributes.find("partition_name"))
      if (const auto* s = std::get_if<std::string>(&a->value); s && !s->empty()) gname = *s;
    const auto* eg = bin->find_graph(gname);
    if (eg == nullptr) return bad(cat("its graph '", gname, "' is not in its context"));
    if (io_names(g, part.inputs) != eg->inputs || io_names(g, part.outputs) != eg->outputs)
      return bad(cat("its inputs and outputs differ from those of graph '", gname, "' in its context"));
    ep_context_restore rr{eg, bin, &part, static_cast<unsigned>(std::max(1, s_.pool.size()))};
    auto fn = b->restore(rr);
    if (!fn)
      return Status(fn.code(), cat(d_.origin, ": EPContext node '", nd.name, "': provider ", s_.providers[p].type_key,
                                   " cannot restore graph '", gname, "': ", fn.status().message()));
    return std::move(*fn);
  }

  session_core::stage& s_;
  const deployment& d_;
  std::map<std::string, std::shared_ptr<const ep_context_binary>, std::less<>> binaries_;
};

}  // namespace

Result<std::shared_ptr<const session_core>> assemble_deployment(deployment d, std::vector<provider_binding> providers,
                                                                const session_options& options) {
  if (!options.free_dimension_overrides().empty())
    return Status(errc::invalid_argument,
                  cat(d.origin, ": free dimension overrides change how a model compiles; a deployment model is compiled "
                                "already (give them when compiling it)"));
  model m = std::move(d.m);
  return session_core::assemble(std::move(m), std::move(providers), options, [&d](session_core::stage& s) {
    return preparer(s, d).run();
  });
}

}  // namespace epstack
