#pragma once
// Test-only providers: they claim what a script says (single nodes, groups), and compile for real: each compiled
// function runs the partition's nodes with a tiny interpreter for the element-wise ops the tests use.
#include <epstack/partitioner.hpp>
#include <epstack/provider_concepts.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
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

}  // namespace epstack::test
