#pragma once
// Test-only providers: they claim what a script says (single nodes, groups), and compile for real: each compiled
// function runs the partition's nodes with a tiny interpreter for the element-wise ops the tests use.
#include <epstack/provider/binding.hpp>
#include <epstack/partition/partitioner.hpp>
#include <epstack/provider/contract.hpp>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <functional>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace epstack::test {

template <std::size_t N>
struct fixed_string {
  char s[N]{};
  constexpr fixed_string(const char (&str)[N]) { std::copy_n(str, N, s); }  // NOLINT(google-explicit-constructor)
  [[nodiscard]] constexpr std::string_view view() const { return {s, N - 1}; }
};

// Runs one node of the toy op set on float tensors: Relu, Neg, Exp, Add, Mul, Identity.
inline Status run_toy_node(const graph& g, node_id n, std::vector<tensor>& env_values, std::vector<bool>& have) {
  const auto& nd = g.node(n);
  const auto in = [&](std::size_t i) -> const tensor& { return env_values[nd.inputs[i]]; };
  for (auto v : nd.inputs)
    if (v != no_id && !have[v]) return Status(errc::fail, "toy interpreter: input '" + g.value(v).name + "' missing");
  const tensor& a = in(0);
  tensor out(element_type::float32, a.sizes());
  const float* x = a.typed<float>();
  float* y = out.typed<float>();
  const std::size_t n_el = a.element_count();
  if (nd.op_type == "Relu") for (std::size_t i = 0; i < n_el; ++i) y[i] = std::max(0.0f, x[i]);
  else if (nd.op_type == "Neg") for (std::size_t i = 0; i < n_el; ++i) y[i] = -x[i];
  else if (nd.op_type == "Exp") for (std::size_t i = 0; i < n_el; ++i) y[i] = std::exp(x[i]);
  else if (nd.op_type == "Identity") for (std::size_t i = 0; i < n_el; ++i) y[i] = x[i];
  else if (nd.op_type == "Add" || nd.op_type == "Mul") {
    const float* z = in(1).typed<float>();
    for (std::size_t i = 0; i < n_el; ++i) y[i] = nd.op_type == "Add" ? x[i] + z[i] : x[i] * z[i];
  } else return Status(errc::not_implemented, "toy interpreter: op " + nd.op_type);
  env_values[nd.outputs[0]] = std::move(out);
  have[nd.outputs[0]] = true;
  return {};
}

// Compiles a partition into a function that interprets its nodes in order.
inline compute_function compile_toy(const partition& part) {
  return [part](compute_context& ctx) -> Status {
    const graph& g = *part.g;
    std::vector<tensor> env(g.value_count());
    std::vector<bool> have(g.value_count());
    for (std::size_t i = 0; i < part.inputs.size(); ++i)
      if (part.inputs[i] != no_id) {
        env[part.inputs[i]] = ctx.input(i);
        have[part.inputs[i]] = true;
      }
    for (node_id n : part.nodes) EPSTACK_RETURN_IF_ERROR(run_toy_node(g, n, env, have));
    for (std::size_t i = 0; i < part.outputs.size(); ++i) ctx.output(i) = env[part.outputs[i]];
    return {};
  };
}

/// A provider whose capabilities come from a script; it records the graphs it was asked about.
template <fixed_string Key>
struct scripted_provider {
  using provider_concept = execution_provider_tag;
  static constexpr std::string_view type_key = Key.view();
  std::function<std::vector<capability>(const graph_view<graph>&)> script;
  std::shared_ptr<std::vector<std::string>> asked = std::make_shared<std::vector<std::string>>();
  std::shared_ptr<int> compile_calls = std::make_shared<int>(0);

  [[nodiscard]] std::vector<capability> get_capability(const graph_view<graph>& v) const {
    asked->push_back(v.graph().name());
    return script ? script(v) : std::vector<capability>{};
  }
  [[nodiscard]] Result<std::vector<compute_function>> compile(std::span<const partition> parts) const {
    ++*compile_calls;
    std::vector<compute_function> r;
    for (const auto& p : parts) r.push_back(compile_toy(p));
    return r;
  }
};

/// Claims, one node each, the nodes of the view whose op type is in `ops` (all of them when `ops` is empty).
template <fixed_string Key>
struct ops_provider {
  using provider_concept = execution_provider_tag;
  static constexpr std::string_view type_key = Key.view();
  std::set<std::string> ops;

  [[nodiscard]] std::vector<capability> get_capability(const graph_view<graph>& v) const {
    std::vector<capability> r;
    for (node_id n : v.nodes())
      if (ops.empty() || ops.count(v.graph().node(n).op_type)) r.push_back(capability::single(n));
    return r;
  }
  [[nodiscard]] Result<std::vector<compute_function>> compile(std::span<const partition> parts) const {
    std::vector<compute_function> r;
    for (const auto& p : parts) r.push_back(compile_toy(p));
    return r;
  }
};

using test_cpu_provider = ops_provider<"CPUExecutionProvider">;

// A partition rebuilt from a context: its own little graph (constants included) and its boundary.
struct toy_program {
  graph g;
  std::vector<value_id> inputs, outputs;
  std::vector<node_id> nodes;
};

inline Status run_toy_program(const toy_program& pr, compute_context& ctx) {
  std::vector<tensor> env(pr.g.value_count());
  std::vector<bool> have(pr.g.value_count());
  for (value_id v : pr.g.initializers()) {
    env[v] = *pr.g.value(v).initializer;
    have[v] = true;
  }
  for (std::size_t i = 0; i < pr.inputs.size(); ++i) {
    env[pr.inputs[i]] = ctx.input(i);
    have[pr.inputs[i]] = true;
  }
  for (node_id n : pr.nodes) EPSTACK_RETURN_IF_ERROR(run_toy_node(pr.g, n, env, have));
  for (std::size_t i = 0; i < pr.outputs.size(); ++i) ctx.output(i) = env[pr.outputs[i]];
  return {};
}

/// An EP-context provider for the tests: it fuses the connected nodes of the toy op set it is given (all of them
/// when `ops` is empty) into groups, compiles them with the toy interpreter, and serializes a partition as text (one
/// line per node) plus its constants as tensors; `restore` rebuilds the program from those, compiling nothing.
/// Counters say how often it compiled and restored.
template <fixed_string Key, fixed_string Short, bool MultiGraph = true>
struct context_provider {
  using provider_concept = execution_provider_tag;
  using ep_context_concept = ep_context_tag;
  static constexpr std::string_view type_key = Key.view();
  static constexpr std::string_view short_name = Short.view();
  static constexpr std::array<std::string_view, 1> source_keys{Key.view()};
  static constexpr bool multi_graph_context = MultiGraph;
  std::set<std::string> ops;
  std::string sdk = "1.0";
  std::string hw = "toyarch";
  std::shared_ptr<int> compiled = std::make_shared<int>(0);  // partitions compiled
  std::shared_ptr<int> restored = std::make_shared<int>(0);  // partitions restored

  [[nodiscard]] std::vector<capability> get_capability(const graph_view<graph>& v) const {
    // Connected components (through values) of the taken nodes, one group each, named by their first node.
    const graph& g = v.graph();
    std::vector<node_id> taken;
    for (node_id n : v.nodes()) {
      const auto& nd = g.node(n);
      if (nd.domain.empty() && (ops.empty() ? std::set<std::string>{"Relu", "Neg", "Exp", "Add", "Mul", "Identity"}.count(nd.op_type)
                                            : ops.count(nd.op_type)))
        taken.push_back(n);
    }
    std::vector<std::size_t> comp(g.node_count(), SIZE_MAX);
    std::vector<capability> r;
    for (node_id seed : taken) {
      if (comp[seed] != SIZE_MAX) continue;
      std::vector<node_id> group{seed}, frontier{seed};
      comp[seed] = r.size();
      while (!frontier.empty()) {
        const node_id n = frontier.back();
        frontier.pop_back();
        std::vector<node_id> near;
        for (value_id x : g.node(n).inputs)
          if (x != no_id && g.value(x).producer != no_id) near.push_back(g.value(x).producer);
        for (value_id x : g.node(n).outputs)
          if (x != no_id) near.insert(near.end(), g.value(x).consumers.begin(), g.value(x).consumers.end());
        for (node_id m : near)
          if (comp[m] == SIZE_MAX && std::find(taken.begin(), taken.end(), m) != taken.end()) {
            comp[m] = r.size();
            group.push_back(m);
            frontier.push_back(m);
          }
      }
      meta_def md;
      md.name = g.node(seed).name.empty() ? "toy" : g.node(seed).name;
      r.push_back(capability::group(std::move(group), std::move(md)));
    }
    return r;
  }
  [[nodiscard]] Result<std::vector<compute_function>> compile(std::span<const partition> parts) const {
    std::vector<compute_function> r;
    for (const auto& p : parts) {
      ++*compiled;
      r.push_back(compile_toy(p));
    }
    return r;
  }
  [[nodiscard]] std::string ep_sdk_version() const { return sdk; }
  [[nodiscard]] std::string hardware_architecture() const { return hw; }
  /// A context compiled for "toyarch" runs on "toyarch+" (a superset), as an AVX2 context runs on an AVX-512 machine.
  [[nodiscard]] bool hardware_supported(std::string_view recorded) const { return recorded == hw || (hw == "toyarch+" && recorded == "toyarch"); }

  [[nodiscard]] Result<ep_context_record> serialize(const partition& part, const compute_function& fn,
                                                    ep_context_builder& b) const {
    if (!fn) return Status(errc::ep_fail, "no compiled function for " + part.name);
    const graph& g = *part.g;
    ep_context_record rec;
    std::ostringstream os;
    const auto name = [&](value_id v) { return v == no_id ? std::string("-") : g.value(v).name; };
    for (value_id v : part.inputs)
      if (v != no_id && g.value(v).initializer) {
        const tensor& t = *g.value(v).initializer;
        const auto idx = b.add_tensor(g.value(v).name, t.type(), t.sizes(),
                                      std::span<const std::byte>(static_cast<const std::byte*>(t.data()), t.byte_size()));
        os << "const " << g.value(v).name << ' ' << rec.tensors.size() << '\n';
        rec.tensors.push_back(idx);
      } else if (v != no_id) {
        os << "input " << name(v) << '\n';
      }
    for (node_id n : part.nodes) {
      const auto& nd = g.node(n);
      os << "node " << nd.op_type << ' ' << nd.inputs.size();
      for (value_id v : nd.inputs) os << ' ' << name(v);
      os << ' ' << nd.outputs.size();
      for (value_id v : nd.outputs) os << ' ' << name(v);
      os << '\n';
    }
    for (value_id v : part.outputs) os << "output " << name(v) << '\n';
    const std::string text = os.str();
    rec.payload.resize(text.size());
    std::memcpy(rec.payload.data(), text.data(), text.size());
    return rec;
  }

  [[nodiscard]] Result<compute_function> restore(const ep_context_restore& r) const {
    auto pr = std::make_shared<toy_program>();
    const auto tensors = r.tensors();
    std::istringstream is(std::string(reinterpret_cast<const char*>(r.graph->payload.data()), r.graph->payload.size()));
    std::string kind;
    while (is >> kind) {
      if (kind == "const") {
        std::string n;
        std::size_t i = 0;
        is >> n >> i;
        if (i >= tensors.size()) return Status(errc::invalid_graph, "toy context: constant '" + n + "' has no tensor");
        const auto* t = tensors[i];
        tensor copy(t->type, t->shape);
        if (copy.byte_size() != t->data.size()) return Status(errc::invalid_graph, "toy context: tensor size");
        std::memcpy(copy.mutable_data(), t->data.data(), t->data.size());
        pr->g.add_initializer(n, std::move(copy));
      } else if (kind == "input") {
        std::string n;
        is >> n;
        pr->inputs.push_back(pr->g.add_input(n));
      } else if (kind == "output") {
        std::string n;
        is >> n;
        pr->outputs.push_back(pr->g.find_value(n));
        pr->g.add_output(n);
      } else if (kind == "node") {
        node nd;
        std::size_t ni = 0, no = 0;
        is >> nd.op_type >> ni;
        std::vector<std::string> in(ni), out;
        for (auto& x : in) is >> x;
        is >> no;
        out.resize(no);
        for (auto& x : out) is >> x;
        for (auto& x : in) if (x == "-") x.clear();
        pr->nodes.push_back(pr->g.add_node(std::move(nd), in, out));
      } else {
        return Status(errc::invalid_graph, "toy context: unknown record '" + kind + "'");
      }
    }
    if (!is.eof() || pr->outputs.empty()) return Status(errc::invalid_graph, "toy context: unreadable payload");
    for (value_id v : pr->outputs)
      if (v == no_id) return Status(errc::invalid_graph, "toy context: an output is not produced");
    ++*restored;
    return compute_function([pr](compute_context& ctx) { return run_toy_program(*pr, ctx); });
  }
};

using toy_context_provider = context_provider<"ToyExecutionProvider", "toy">;

}  // namespace epstack::test
