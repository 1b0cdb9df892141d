// epstack: the command-line tool. Subcommands: inspect, generate.
#include <epstack/graph_algorithms.hpp>
#include <epstack/model_zoo.hpp>
#include <epstack/onnx_io.hpp>

#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace epstack;

int usage(std::ostream& os, int code) {
  os << "usage: epstack <command> [options]\n"
        "commands:\n"
        "  inspect MODEL                 inputs, outputs, opsets, nodes by op type, parameters and initializer bytes\n"
        "  generate mlp OUT.onnx [--widths 256,512,10] [--external]\n"
        "                                write a model built with epstack's own IR (weights external with --external)\n"
        "  help                          this text\n";
  return code;
}

int fail(const Status& st) {
  std::cerr << "epstack: " << st.to_string() << "\n";
  return 1;
}

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

int inspect(const std::string& path) {
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
  return 0;
}

int generate(const std::vector<std::string>& args) {
  if (args.size() < 2 || args[0] != "mlp") return usage(std::cerr, 2);
  std::vector<std::int64_t> widths{256, 512, 512, 10};
  bool external = false;
  for (std::size_t i = 2; i < args.size(); ++i) {
    if (args[i] == "--external") external = true;
    else if (args[i] == "--widths" && i + 1 < args.size()) {
      widths.clear();
      std::string s = args[++i];
      for (std::size_t p = 0; p <= s.size();) {
        const auto q = s.find(',', p);
        const auto tok = s.substr(p, q == std::string::npos ? std::string::npos : q - p);
        try {
          widths.push_back(std::stoll(tok));
        } catch (const std::exception&) {
          return fail(Status(errc::invalid_argument, "--widths: '" + tok + "' is not a number"));
        }
        if (widths.back() <= 0) return fail(Status(errc::invalid_argument, "--widths: sizes must be positive"));
        if (q == std::string::npos) break;
        p = q + 1;
      }
      if (widths.size() < 2) return fail(Status(errc::invalid_argument, "--widths needs at least two sizes"));
    } else return usage(std::cerr, 2);
  }
  const auto m = zoo::make_mlp(widths);
  save_options so;
  if (external) so.mode = external_data_mode::all_external;
  if (auto st = save_model(m, args[1], so); !st) return fail(st);
  std::cout << "wrote " << args[1] << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage(std::cerr, 2);
  const std::string cmd = args[0];
  args.erase(args.begin());
  if (cmd == "help" || cmd == "--help" || cmd == "-h") return usage(std::cout, 0);
  if (cmd == "inspect") {
    if (args.size() != 1) return usage(std::cerr, 2);
    return inspect(args[0]);
  }
  if (cmd == "generate") return generate(args);
  std::cerr << "epstack: unknown command '" << cmd << "'\n";
  return usage(std::cerr, 2);
}
