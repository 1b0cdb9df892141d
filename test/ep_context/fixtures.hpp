#pragma once
// What the EPContext tests share: the toy providers (test_providers.hpp), a small chain model, options, and helpers
// that read context models and binaries back.
#include <epstack/runtime/compile_model.hpp>
#include <epstack/ep_context/attributes.hpp>
#include <epstack/testing/model_zoo.hpp>
#include <epstack/onnx/onnx_io.hpp>
#include <epstack/providers/cpu.hpp>
#include <epstack/runtime/session.hpp>

#include "../support/compare.hpp"
#include "../support/graphs.hpp"
#include "../support/temp_dir.hpp"
#include "../support/test_providers.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace epstack::test::ctx {

using namespace epstack;
using test::op;
namespace fs = std::filesystem;

using toy = test::toy_context_provider;

/// Where tensor `i` of context binary `path` starts in the file (the first tensor starts its data section).
inline std::size_t tensor_file_offset(const fs::path& path, std::size_t i) {
  const std::string b = test::read_file(path);
  std::uint64_t data_off = 0;
  for (int k = 7; k >= 0; --k) data_off = (data_off << 8) | static_cast<unsigned char>(b[32 + static_cast<std::size_t>(k)]);
  auto bin = ep_context_binary::open(path);
  REQUIRE(bin.has_value());
  REQUIRE(i < bin->tensors().size());
  return static_cast<std::size_t>(data_off) +
         static_cast<std::size_t>(bin->tensors()[i].data.data() - bin->tensors()[0].data.data());
}
using toy_session = session<toy>;
using toy_a = test::context_provider<"ToyAExecutionProvider", "toya">;
using toy_b = test::context_provider<"ToyBExecutionProvider", "toyb">;
using toy_single = test::context_provider<"ToySingleExecutionProvider", "toys", false>;

// The concept: the toy providers have an EP-context side; the CPU provider and a provider that can serialize but not
// restore do not. A session refuses the second in words (check_ep_context_provider: compile_fail/context_without_opt_in.cpp).
struct no_restore {
  using provider_concept = execution_provider_tag;
  static constexpr std::string_view type_key = "NoRestoreExecutionProvider";
  static constexpr std::array<std::string_view, 1> source_keys{"NoRestoreExecutionProvider"};
  static constexpr bool multi_graph_context = true;
  [[nodiscard]] std::vector<capability> get_capability(const graph_view<graph>&) const { return {}; }
  [[nodiscard]] Result<std::vector<compute_function>> compile(std::span<const partition>) const {
    return std::vector<compute_function>{};
  }
  [[nodiscard]] std::string ep_sdk_version() const { return "1"; }
  [[nodiscard]] std::string hardware_architecture() const { return "none"; }
  [[nodiscard]] Result<ep_context_record> serialize(const partition&, const compute_function&, ep_context_builder&) const {
    return Status(errc::not_implemented, "no");
  }
};
static_assert(ep_context_provider<toy> && ep_context_provider<toy_single>);
static_assert(execution_provider<no_restore> && !ep_context_provider<no_restore>);
static_assert(detail::context_has_source_keys<no_restore> && detail::context_has_multi_graph<no_restore> &&
              detail::context_has_serialize<no_restore> && !detail::context_has_restore<no_restore>);
static_assert(execution_provider<cpu_provider> && !ep_context_provider<cpu_provider>);

// X -> Add(W1) -> Relu -> R -> Sigmoid (CPU) -> Neg -> Mul(W2) -> Y; outputs Y then R. Two toy partitions.
inline model chain_model(float w_scale = 1.0f) {
  model m;
  m.opsets = {{"", 13}};
  m.producer_name = "epstack-test";
  m.metadata = {{"purpose", "ep context tests"}};
  graph& g = m.graph;
  g.set_name("chain");
  g.add_input("X", type_info::tensor_of(element_type::float32, shape{2, 3}));
  g.add_initializer("W1", zoo::random_tensor({2, 3}, 7, w_scale));
  g.add_initializer("W2", zoo::random_tensor({2, 3}, 8, w_scale));
  g.add_node(op("add1", "Add"), {"X", "W1"}, {"A"});
  g.add_node(op("relu1", "Relu"), {"A"}, {"R"});
  g.add_node(op("sig1", "Sigmoid"), {"R"}, {"S"});
  g.add_node(op("neg1", "Neg"), {"S"}, {"N"});
  g.add_node(op("mul1", "Mul"), {"N", "W2"}, {"Y"});
  g.add_output("Y", type_info::tensor_of(element_type::float32, shape{2, 3}));
  g.add_output("R", type_info::tensor_of(element_type::float32, shape{2, 3}));
  return m;
}

// X -> Relu -> r; If(cond): then = Neg(r) * W, else = Exp(r) + W; then Loop (3 trips) whose body is acc' = Relu(Sigmoid(acc
// + X)) with an Or for its condition: control flow whose bodies read values of the main graph. Output z [2,3].
inline model flow_model() {
  const auto f3 = type_info::tensor_of(element_type::float32, shape{2, 3});
  graph then_g("then");
  then_g.add_node(op("t_neg", "Neg"), {"r"}, {"t1"});
  then_g.add_node(op("t_mul", "Mul"), {"t1", "W"}, {"t_out"});
  then_g.add_output("t_out", f3);
  graph else_g("else");
  else_g.add_node(op("e_exp", "Exp"), {"r"}, {"e1"});
  else_g.add_node(op("e_add", "Add"), {"e1", "W"}, {"e_out"});
  else_g.add_output("e_out", f3);
  graph body("body");
  body.add_input("i", type_info::tensor_of(element_type::int64, shape{}));
  body.add_input("c_in", type_info::tensor_of(element_type::boolean, shape{}));
  body.add_input("acc", f3);
  body.add_node(op("b_add", "Add"), {"acc", "X"}, {"b1"});
  body.add_node(op("b_sig", "Sigmoid"), {"b1"}, {"b2"});
  body.add_node(op("b_relu", "Relu"), {"b2"}, {"acc_out"});
  body.add_node(op("b_or", "Or"), {"c_in", "c_in"}, {"c_out"});  // (the toy provider would take an Identity)
  body.add_output("c_out", type_info::tensor_of(element_type::boolean, shape{}));
  body.add_output("acc_out", f3);
  model m;
  m.opsets = {{"", 13}};
  graph& g = m.graph;
  g.set_name("flow");
  g.add_input("X", f3);
  g.add_input("cond", type_info::tensor_of(element_type::boolean, shape{}));
  g.add_initializer("W", zoo::random_tensor({2, 3}, 21, 1.0f));
  g.add_initializer("trips", tensor::scalar<std::int64_t>(3));
  g.add_initializer("go", tensor::scalar(true));
  g.add_node(op("relu", "Relu"), {"X"}, {"r"});
  attribute_list ia;
  ia.set("then_branch", make_subgraph(std::move(then_g)));
  ia.set("else_branch", make_subgraph(std::move(else_g)));
  g.add_node(op("if", "If", std::move(ia)), {"cond"}, {"y"});
  attribute_list la;
  la.set("body", make_subgraph(std::move(body)));
  g.add_node(op("loop", "Loop", std::move(la)), {"trips", "go", "y"}, {"z"});
  g.add_output("z", f3);
  return m;
}

// flow_model's output for cond true, then false, on one input.
template <class S>
std::vector<tensor> run_flow(const S& s) {
  const auto x = zoo::random_tensor({2, 3}, 5, 1.0f);
  std::vector<tensor> r;
  for (bool c : {true, false}) {
    auto out = s.run({{"X", x}, {"cond", tensor::scalar(c)}});
    REQUIRE_MESSAGE(out.is_ok(), out.status().message());
    r.push_back((*out)[0]);
  }
  return r;
}

inline fs::path write_model(const model& m, const fs::path& p, const save_options& so = {}) {
  REQUIRE(save_model(m, p, so).is_ok());
  return p;
}

inline tensor input_x() { return zoo::random_tensor({2, 3}, 99, 2.0f); }

// Outputs of the CPU provider alone on the source model.
inline std::vector<tensor> reference(const fs::path& source) {
  auto s = session<>::create(source);
  REQUIRE(s.is_ok());
  auto out = s->run({{"X", input_x()}});
  REQUIRE(out.is_ok());
  return std::move(*out);
}

template <class S>
inline std::vector<tensor> run_x(const S& s) {
  auto out = s.run({{"X", input_x()}});
  REQUIRE_MESSAGE(out.is_ok(), out.status().message());
  return std::move(*out);
}

inline void check_close(const std::vector<tensor>& a, const std::vector<tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("output ", i);
    EPSTACK_CHECK_CLOSE(a[i], b[i], 1e-6, 1e-6);
  }
}

inline session_options gen_options(int embed = 0) {
  session_options o;
  o.set_config(config_keys::ep_context_enable, "1");
  o.set_config(config_keys::ep_context_embed_mode, std::to_string(embed));
  return o;
}

// Generation in a weight-sharing group (embed_mode 0).
inline session_options share_options() {
  auto o = gen_options(0);
  o.set_config(config_keys::ep_share_contexts, "1");
  return o;
}

inline std::vector<const node*> context_nodes(const model& m) {
  std::vector<const node*> r;
  for (node_id n = 0; n < m.graph.node_count(); ++n)
    if (m.graph.node(n).op_type == "EPContext") r.push_back(&m.graph.node(n));
  return r;
}

inline ep_context_attributes attrs_of(const node& n) {
  auto a = read_attributes<ep_context_attributes>(n.attributes, n.name);
  REQUIRE(a.is_ok());
  return *a;
}

inline std::size_t file_count(const fs::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

// Rewrites attribute `name` of every EPContext node of the model at `from` and saves it as `to`.
inline fs::path with_attribute(const fs::path& from, const fs::path& to, const std::string& name, const std::string& value) {
  auto m = load_model(from);
  REQUIRE(m.is_ok());
  for (node_id n = 0; n < m->graph.node_count(); ++n)
    if (m->graph.node(n).op_type == "EPContext") m->graph.node(n).attributes.set(name, value);
  return write_model(*m, to);
}

}  // namespace epstack::test::ctx
