// epstack inspect and epstack generate.
#include "cli.hpp"

#include <epstack/deploy/deployment.hpp>
#include <epstack/ep_context/attributes.hpp>
#include <epstack/provider/context_binary.hpp>
#include <epstack/ir/graph_algorithms.hpp>
#include <epstack/core/path_rules.hpp>
#include <epstack/testing/model_zoo.hpp>
#include <epstack/onnx/onnx_io.hpp>
#include <epstack/onnx/version_convert.hpp>

#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <thread>

namespace epstack::cli {
namespace {

std::string human_bytes(std::uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

struct counts {
  std::map<std::string, std::size_t> ops;
  std::size_t nodes = 0, subgraph_nodes = 0;
};

void count_nodes(const graph& g, counts& c, bool sub) {
  for (node_id n = 0; n < g.node_count(); ++n) {
    const auto& nd = g.node(n);
    c.ops[nd.domain.empty() ? nd.op_type : nd.domain + "." + nd.op_type]++;
    (sub ? c.subgraph_nodes : c.nodes)++;
    for (const auto& a : nd.attributes) {
      if (const auto* s = std::get_if<subgraph>(&a.value); s && *s) count_nodes(**s, c, true);
      if (const auto* v = std::get_if<std::vector<subgraph>>(&a.value))
        for (const auto& s : *v)
          if (s) count_nodes(*s, c, true);
    }
  }
}

// A binary and every byte of its tensors verified (loading defers that to each tensor's first use; inspect says now).
Result<ep_context_binary> verified(Result<ep_context_binary> b) {
  if (!b) return b;
  if (auto st = b->verify_all(std::max(1u, std::thread::hardware_concurrency())); !st) return st;
  return b;
}

void print_binary(const ep_context_binary& b, std::uint64_t file_bytes, const std::string& indent) {
  std::uint64_t data = 0;
  for (const auto& t : b.tensors()) data += t.data.size();
  std::cout << indent << "provider " << b.provider() << ", SDK " << b.sdk_version() << ", hardware "
            << b.hardware_architecture() << ", format " << b.format_version() << ", " << human_bytes(file_bytes)
            << ", verified\n";
  std::cout << indent << "tensors: " << b.tensors().size() << " (" << human_bytes(data) << ", each stored once)\n";
  if (b.weightless()) {
    std::size_t refs = 0, derived = 0;
    std::uint64_t bytes = 0;
    for (const auto& t : b.tensors())
      if (!t.source.empty()) {
        ++refs;
        derived += t.derived ? 1 : 0;
        bytes += t.length;
      }
    std::cout << indent << "weightless: " << refs << " tensors (" << human_bytes(bytes) << ") are initializers of the source "
              << "model, " << derived << " of them as optimised (checked by hash when a session loads it)\n";
  }
  std::cout << indent << "graphs: " << b.graphs().size() << "\n";
  for (const auto& g : b.graphs()) {
    std::uint64_t gb = 0;
    for (auto i : g.tensors) gb += b.tensors()[i].data.size();
    std::cout << indent << "  " << g.name << ": " << g.inputs.size() << " inputs, " << g.outputs.size() << " outputs, "
              << g.tensors.size() << " tensors (" << human_bytes(gb) << "), record " << human_bytes(g.payload.size()) << "\n";
  }
}

int inspect_binary(const std::string& path) {
  auto b = verified(ep_context_binary::open(path));
  if (!b) return fail(b.status());
  std::cout << "EP context binary: " << path << "\n";
  print_binary(*b, std::filesystem::file_size(path), "  ");
  std::cout << "  tensor table:\n";
  for (const auto& t : b->tensors()) {
    std::cout << "    " << t.name << ": " << to_string(t.type) << "[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) std::cout << (i ? "," : "") << t.shape[i];
    std::cout << "], " << human_bytes(t.source.empty() ? t.data.size() : t.length);
    if (!t.source.empty()) std::cout << " in the source model" << (t.derived ? " as optimised" : "") << ": '" << t.source << "'";
    std::cout << "\n";
  }
  return 0;
}

// The EPContext nodes of a model and the contexts they name (each verified).
void print_ep_context_nodes(const model& m, const std::string& path) {
  const auto& g = m.graph;
  std::size_t count = 0;
  for (node_id n = 0; n < g.node_count(); ++n) count += g.node(n).op_type == "EPContext" ? 1 : 0;
  if (count == 0) return;
  std::cout << "EPContext nodes: " << count << "\n";
  std::set<std::string> shown;
  for (node_id n = 0; n < g.node_count(); ++n) {
    const auto& nd = g.node(n);
    if (nd.op_type != "EPContext") continue;
    auto a = read_attributes<ep_context_attributes>(nd.attributes, nd.name);
    if (!a) {
      std::cout << "  " << nd.name << ": " << a.status().message() << "\n";
      continue;
    }
    std::cout << "  " << nd.name << ": source " << a->source << ", main_context " << a->main_context << ", embed_mode "
              << a->embed_mode << ", " << nd.inputs.size() << " inputs, " << nd.outputs.size() << " outputs\n";
    std::cout << "    partition_name '" << a->partition_name << "', SDK " << a->ep_sdk_version << ", hardware "
              << a->hardware_architecture << (a->onnx_model_filename.empty() ? "" : ", from " + a->onnx_model_filename)
              << "\n";
    if (a->main_context != 1) continue;
    if (a->embed_mode == 1) {
      std::cout << "    embedded context, " << human_bytes(a->ep_cache_context.size()) << ":\n";
      auto owner = std::make_shared<std::string>(a->ep_cache_context);
      auto b = verified(ep_context_binary::from_bytes(std::as_bytes(std::span(owner->data(), owner->size())), owner));
      if (b) print_binary(*b, owner->size(), "      ");
      else std::cout << "      " << b.status().message() << "\n";
    } else {
      std::cout << "    context binary '" << a->ep_cache_context << "'\n";
      if (!shown.insert(a->ep_cache_context).second) continue;
      auto full = resolve_file_in_folder(std::filesystem::path(path).parent_path(), a->ep_cache_context, "context binary");
      if (!full) {
        std::cout << "      " << full.status().message() << "\n";
        continue;
      }
      auto b = verified(ep_context_binary::open(*full));
      if (b) print_binary(*b, std::filesystem::file_size(*full), "      ");
      else std::cout << "      " << b.status().message() << "\n";
    }
  }
}

// A deployment model: read and verified as a deployable reads it; what it holds, by provider.
int inspect_deployment(const std::string& path) {
  auto d = open_deployment(path);
  if (!d) return fail(d.status());
  const auto& g = d->m.graph;
  std::cout << "deployment model: " << path << " (format " << deployment_format_version << ", verified)\n";
  std::cout << "  ir_version " << d->m.ir_version << ", producer '" << d->m.producer_name << "', graph '" << g.name() << "'\n";
  std::cout << "providers:";
  for (const auto& p : d->providers) std::cout << " " << p;
  std::cout << "\ninputs:\n";
  for (value_id v : g.inputs())
    if (!g.value(v).initializer) std::cout << "  " << g.value(v).name << ": " << g.value(v).type.to_string() << "\n";
  std::cout << "outputs:\n";
  for (value_id v : g.outputs()) std::cout << "  " << g.value(v).name << ": " << g.value(v).type.to_string() << "\n";
  std::map<std::string, std::map<std::string, std::size_t>> by_provider;  // provider -> op -> nodes
  std::function<void(const graph&)> walk = [&](const graph& x) {
    for (node_id n = 0; n < x.node_count(); ++n) {
      const auto& nd = x.node(n);
      std::string placed;
      for (const auto& [k, v] : nd.metadata)
        if (k == deployment_provider_key) placed = v;
      ++by_provider[placed][nd.domain.empty() ? nd.op_type : nd.domain + "." + nd.op_type];
      (void)nd.attributes.for_each_subgraph([&](const graph& b) {
        walk(b);
        return Status{};
      });
    }
  };
  walk(g);
  for (const auto& [p, ops] : by_provider) {
    std::size_t total = 0;
    for (const auto& [op, n] : ops) total += n;
    std::cout << "nodes on " << p << ": " << total << "\n";
    for (const auto& [op, n] : ops) std::cout << "  " << op << ": " << n << "\n";
  }
  std::uint64_t bytes = 0, ctx = 0;
  for (value_id v : g.initializers()) bytes += g.value(v).initializer->byte_size();
  for (const auto& [name, b] : d->contexts) ctx += b.size();
  std::cout << "initializers: " << g.initializers().size() << ", " << human_bytes(bytes) << " (read in place)\n";
  std::cout << "EP context binaries: " << d->contexts.size() << ", " << human_bytes(ctx) << "\n";
  for (const auto& [k, v] : d->m.metadata) std::cout << "  metadata " << k << " = " << v << "\n";
  return 0;
}

int inspect_model(const std::string& path) {
  if (path.size() > 4 && path.ends_with(".bin")) return inspect_binary(path);
  if (is_deployment_file(path)) return inspect_deployment(path);
  auto m = load_model(path);
  if (!m) return fail(m.status());
  const auto& g = m->graph;
  std::cout << "model: " << path << "\n";
  std::cout << "  ir_version " << m->ir_version << ", producer '" << m->producer_name << "'"
            << (m->producer_version.empty() ? "" : " " + m->producer_version) << ", graph '" << g.name() << "'\n";
  std::cout << "opsets:";
  for (const auto& o : m->opsets) std::cout << " " << (o.domain.empty() ? "ai.onnx" : o.domain) << "=" << o.version;
  std::cout << "\ninputs:\n";
  for (value_id v : g.inputs())
    if (!g.value(v).initializer) std::cout << "  " << g.value(v).name << ": " << g.value(v).type.to_string() << "\n";
  std::cout << "outputs:\n";
  for (value_id v : g.outputs()) std::cout << "  " << g.value(v).name << ": " << g.value(v).type.to_string() << "\n";
  counts c;
  count_nodes(g, c, false);
  std::cout << "nodes: " << c.nodes;
  if (c.subgraph_nodes) std::cout << " (+" << c.subgraph_nodes << " in subgraphs)";
  std::cout << "\n";
  for (const auto& [op, n] : c.ops) std::cout << "  " << op << ": " << n << "\n";
  std::uint64_t params = 0, bytes = 0, mapped = 0;
  for (value_id v : g.initializers()) {
    const auto& t = *g.value(v).initializer;
    params += t.element_count();
    bytes += t.byte_size();
    if (t.is_borrowed()) mapped += t.byte_size();
  }
  std::cout << "initializers: " << g.initializers().size() << ", parameters: " << params
            << ", bytes: " << bytes << " (" << human_bytes(bytes) << ")\n";
  std::cout << "  not copied at load: " << human_bytes(mapped) << " (memory-mapped external data or buffers taken over)\n";
  if (!m->metadata.empty()) {
    std::cout << "metadata:\n";
    for (const auto& [k, v] : m->metadata) std::cout << "  " << k << " = " << v << "\n";
  }
  if (!m->functions.empty()) std::cout << "functions: " << m->functions.size() << "\n";
  print_ep_context_nodes(*m, path);
  // A compiled model: how it suits each provider of this build's stack (ONNX Runtime's compatibility verdicts).
  bool compiled = false;
  for (const auto& kv : m->metadata) compiled = compiled || kv.first.starts_with(ep_compatibility_info_prefix);
  for (node_id n = 0; n < g.node_count() && !compiled; ++n) compiled = g.node(n).op_type == "EPContext";
  if (compiled) {
    const auto st = with_stack(default_stack(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      auto verdicts = S::compiled_model_compatibility(std::filesystem::path(path));
      std::cout << "compatibility with this build's stack (" << default_stack() << "):\n";
      if (!verdicts) {
        std::cout << "  " << verdicts.status().message() << "\n";
        return;
      }
      for (const auto& v : *verdicts) std::cout << "  " << v.provider << ": " << to_string(v.value) << " (" << v.reason << ")\n";
    });
    if (!st) return fail(st);
  }
  return 0;
}

// "256,512,10" -> sizes, each positive.
Result<std::vector<std::int64_t>> parse_sizes(const std::string& s, const char* what) {
  std::vector<std::int64_t> r;
  for (std::size_t p = 0; p <= s.size();) {
    const auto q = s.find(',', p);
    const auto tok = s.substr(p, q == std::string::npos ? std::string::npos : q - p);
    EPSTACK_ASSIGN_OR_RETURN(auto v, to_int(tok, what));
    if (v <= 0) return Status(errc::invalid_argument, std::string(what) + ": sizes must be positive");
    r.push_back(v);
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return r;
}

// --opset N [--ir N]: convert_opset on the model just built or loaded.
Status convert_from_args(model& m, const args& a) {
  if (!a.get("--opset")) {
    if (a.get("--ir")) return Status(errc::invalid_argument, "--ir goes with --opset");
    return {};
  }
  EPSTACK_ASSIGN_OR_RETURN(const auto opset, to_int(*a.get("--opset"), "--opset"));
  long long ir = 0;
  if (auto i = a.get("--ir")) {
    EPSTACK_ASSIGN_OR_RETURN(ir, to_int(*i, "--ir"));
  }
  return convert_opset(m, opset, ir);
}

int generate_impl(const std::vector<std::string>& argv) {
  const char* usage = "usage: epstack generate mlp|convnet|mobilenetv2|transformer OUT.onnx [--widths 256,512,10]\n"
                      "       [--channels 16,32,64] [--size 64] [--layers 2] [--hidden 64] [--external] [--opset N] [--ir N]";
  auto a = args::parse(argv, {"--widths", "--channels", "--size", "--layers", "--hidden", "--opset", "--ir"}, {"--external"});
  if (!a) return usage_error(a.status().message());
  if (a->positional.size() != 2) return usage_error(usage);
  const auto& kind = a->positional[0];
  const auto& out = a->positional[1];
  model m;
  if (kind == "mlp") {
    std::vector<std::int64_t> widths{256, 512, 512, 10};
    if (auto w = a->get("--widths")) {
      auto r = parse_sizes(*w, "--widths");
      if (!r) return fail(r.status());
      if (r->size() < 2) return fail(Status(errc::invalid_argument, "--widths needs at least two sizes"));
      widths = *r;
    }
    m = zoo::make_mlp(widths);
  } else if (kind == "convnet") {
    std::vector<std::int64_t> channels{16, 32, 64};
    std::int64_t size = 64;
    if (auto c = a->get("--channels")) {
      auto r = parse_sizes(*c, "--channels");
      if (!r) return fail(r.status());
      channels = *r;
    }
    if (auto sz = a->get("--size")) {
      auto r = to_int(*sz, "--size");
      if (!r || *r < 8) return fail(Status(errc::invalid_argument, "--size must be an integer of at least 8"));
      size = *r;
    }
    m = zoo::make_convnet(channels, size);
  } else if (kind == "mobilenetv2") {
    std::int64_t size = 224;
    if (auto sz = a->get("--size")) {
      auto r = to_int(*sz, "--size");
      if (!r || *r < 32) return fail(Status(errc::invalid_argument, "--size must be an integer of at least 32"));
      size = *r;
    }
    m = zoo::make_mobilenetv2(size);
  } else if (kind == "transformer") {
    zoo::transformer_config cfg;
    if (auto l = a->get("--layers")) {
      auto r = to_int(*l, "--layers");
      if (!r || *r < 1) return fail(Status(errc::invalid_argument, "--layers must be a positive integer"));
      cfg.layers = *r;
    }
    if (auto h = a->get("--hidden")) {
      auto r = to_int(*h, "--hidden");
      if (!r || *r < cfg.heads || *r % cfg.heads != 0)
        return fail(Status(errc::invalid_argument, "--hidden must be a positive multiple of 4 (the head count)"));
      cfg.hidden = *r;
    }
    m = zoo::make_transformer(cfg);
  } else {
    return usage_error(usage);
  }
  if (auto st = convert_from_args(m, *a); !st) return fail(st);
  save_options so;
  if (a->flag("--external")) so.mode = external_data_mode::all_external;
  if (auto st = save_model(m, out, so); !st) return fail(st);
  std::cout << "wrote " << out << "\n";
  return 0;
}

// convert IN OUT --opset N [--ir N]: the model at a newer opset, weights above 1 KiB in OUT.data when IN had any
// external data (or is over 1 GiB).
int convert_impl(const std::vector<std::string>& argv) {
  const char* usage = "usage: epstack convert IN.onnx OUT.onnx --opset N [--ir N]";
  auto a = args::parse(argv, {"--opset", "--ir"}, {});
  if (!a) return usage_error(a.status().message());
  if (a->positional.size() != 2 || !a->get("--opset")) return usage_error(usage);
  auto m = load_model(a->positional[0]);
  if (!m) return fail(m.status());
  if (auto st = convert_from_args(*m, *a); !st) return fail(st);
  save_options so;
  std::uint64_t weights = 0;
  bool external = false;
  for (value_id v : m->graph.initializers()) {
    weights += m->graph.value(v).initializer->byte_size();
    external = external || m->graph.value(v).initializer->is_file_backed();
  }
  if (external || weights > (std::uint64_t{1} << 30)) so.mode = external_data_mode::above_threshold;
  if (auto st = save_model(*m, a->positional[1], so); !st) return fail(st);
  std::cout << "wrote " << a->positional[1] << " (opset " << m->opset("") << ", IR " << m->ir_version << ")\n";
  return 0;
}

}  // namespace

int convert(const std::vector<std::string>& argv) { return convert_impl(argv); }

int inspect(const std::vector<std::string>& argv) {
  if (argv.size() != 1) return usage_error("usage: epstack inspect MODEL|CONTEXT.bin");
  return inspect_model(argv[0]);
}
int generate(const std::vector<std::string>& argv) { return generate_impl(argv); }

}  // namespace epstack::cli
