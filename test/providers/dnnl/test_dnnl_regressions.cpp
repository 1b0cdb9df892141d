// Wrong answers and crashes found on the oneDNN stack, each checked against values computed here in double
// precision, not only against the CPU provider (which could share a fault of the graph optimiser).
#include <epstack/testing/model_zoo.hpp>
#include <epstack/providers/cpu.hpp>
#include <epstack/providers/dnnl.hpp>
#include <epstack/runtime/session.hpp>

#include "../../support/compare.hpp"
#include "../../support/graphs.hpp"
#include "../../support/reused_weight_memory.hpp"
#include "../../support/test_values.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace epstack;
using test::op;

namespace {

using dnnl_session = session<dnnl_provider, cpu_provider>;
using cpu_session = session<cpu_provider>;

type_info f32(shape s) { return type_info::tensor_of(element_type::float32, std::move(s)); }

// What the oneDNN provider does with what it claims is under test: placement keeps the stack's order.
session_options level(graph_optimization_level l) {
  session_options so;
  so.set_graph_optimization_level(l);
  so.set_intra_op_threads(2);
  so.set_config(config_keys::placement, "priority");
  return so;
}

std::vector<std::string> dnnl_nodes(const dnnl_session& s) {
  std::vector<std::string> r;
  const auto& plan = s.plan();
  const graph& g = *plan.main.g;
  for (node_id n = 0; n < g.node_count(); ++n)
    if (plan.providers[plan.main.nodes[n].provider] == dnnl_provider::type_key) r.push_back(g.node(n).name);
  return r;
}

/// Every value of `got` within `tol` (relative to the magnitude of `want`) of `want`; NaN never passes.
void check_values(const tensor& got, const std::vector<double>& want, double tol = 1e-4) {
  REQUIRE(got.type() == element_type::float32);
  REQUIRE(got.element_count() == want.size());
  const float* g = got.typed<float>();
  const auto c = test::compare_values([&](std::size_t i) { return g[i]; }, [&](std::size_t i) { return want[i]; },
                                      want.size(), tol, tol);
  CHECK_MESSAGE(c.ok(), c.message(), c.ok() ? "" : " at [" + std::to_string(c.first_bad) + "]: " +
                                                      std::to_string(g[c.first_bad]) + " (want " +
                                                      std::to_string(want[c.first_bad]) + ")");
}

}  // namespace

// y = ((x @ W) * 10) / 4 - 3: a chain of scalar post-ops after a matrix product. Each link must use its own constant.
TEST_CASE("a chain of scalar Mul/Div/Sub/Add after MatMul uses each link's own constant") {
  struct chain_case {
    const char* name;
    std::vector<std::pair<std::string, float>> links;  // op type, constant (the matrix product on the left)
  };
  const std::vector<chain_case> cases = {
      {"mul div sub", {{"Mul", 10.0f}, {"Div", 4.0f}, {"Sub", 3.0f}}},
      {"add mul", {{"Add", 1.5f}, {"Mul", -2.0f}}},
      {"mul mul mul", {{"Mul", 2.0f}, {"Mul", 3.0f}, {"Mul", 0.5f}}},
      {"sub add div mul", {{"Sub", 0.25f}, {"Add", 4.0f}, {"Div", -8.0f}, {"Mul", 7.0f}}},
  };
  const tensor W = zoo::random_tensor({8, 4}, 11, 0.5f);
  const tensor x = zoo::random_tensor({3, 8}, 12, 1.0f);
  for (const auto& c : cases) {
    CAPTURE(c.name);
    model m;
    m.opsets = {{"", 13}};
    auto& g = m.graph;
    g.set_name("chain");
    g.add_input("x", f32(shape{dimension("n"), 8}));
    g.add_initializer("W", W);
    g.add_node(op("mm", "MatMul"), {"x", "W"}, {"v0"});
    std::string v = "v0";
    for (std::size_t i = 0; i < c.links.size(); ++i) {
      const std::string k = "k" + std::to_string(i), out = "v" + std::to_string(i + 1);
      g.add_initializer(k, tensor::scalar(c.links[i].second));
      g.add_node(op("link" + std::to_string(i), c.links[i].first), {v, k}, {out});
      v = out;
    }
    g.add_output(v, f32(shape{dimension("n"), 4}));
    std::vector<double> want;
    for (std::int64_t r = 0; r < 3; ++r)
      for (std::int64_t j = 0; j < 4; ++j) {
        double y = 0;
        for (std::int64_t i = 0; i < 8; ++i) y += double(x.typed<float>()[r * 8 + i]) * W.typed<float>()[i * 4 + j];
        for (const auto& [t, k] : c.links) y = t == "Mul" ? y * k : t == "Div" ? y / k : t == "Add" ? y + k : y - k;
        want.push_back(y);
      }
    for (auto l : {graph_optimization_level::all, graph_optimization_level::disable}) {
      auto d = dnnl_session::create(m, level(l));
      REQUIRE_MESSAGE(d.has_value(), d.status().to_string());
      // The whole chain is on oneDNN. Optimised, the Muls and Divs right after the product are its alpha
      // (MatMulScaleFusion, one after another): "mul mul mul" is one FusedMatMul.
      std::size_t scales = 0;
      while (scales < c.links.size() && (c.links[scales].first == "Mul" || c.links[scales].first == "Div")) ++scales;
      CHECK(dnnl_nodes(*d).size() == d->plan().main.g->node_count());
      CHECK(dnnl_nodes(*d).size() == c.links.size() + 1 - (l == graph_optimization_level::disable ? 0 : scales));
      auto got = d->run({{"x", x}});
      REQUIRE_MESSAGE(got.has_value(), got.status().to_string());
      check_values((*got)[0], want);
      auto cpu = cpu_session::create(m, level(l));
      REQUIRE(cpu.has_value());
      auto ref = cpu->run({{"x", x}});
      REQUIRE(ref.has_value());
      check_values((*ref)[0], want);
    }
  }
}

TEST_CASE("a chain of scalar post-ops after Conv (and after Relu) uses each link's own constant") {
  const tensor Wc = zoo::random_tensor({4, 2, 3, 3}, 21, 0.4f);
  const tensor x = zoo::random_tensor({1, 2, 5, 5}, 22, 1.0f);
  for (bool relu : {false, true}) {
    CAPTURE(relu);
    model m;
    m.opsets = {{"", 13}};
    auto& g = m.graph;
    g.set_name("conv_chain");
    g.add_input("x", f32(shape{1, 2, 5, 5}));
    g.add_initializer("W", Wc);
    g.add_initializer("ten", tensor::scalar(10.0f));
    g.add_initializer("four", tensor::scalar(4.0f));
    g.add_initializer("three", tensor::scalar(3.0f));
    g.add_node(op("conv", "Conv"), {"x", "W"}, {"c"});
    std::string v = "c";
    if (relu) g.add_node(op("relu", "Relu"), {"c"}, {"r"}), v = "r";
    g.add_node(op("mul", "Mul"), {v, "ten"}, {"a"});
    g.add_node(op("div", "Div"), {"a", "four"}, {"b"});
    g.add_node(op("sub", "Sub"), {"b", "three"}, {"y"});
    g.add_output("y", f32(shape{1, 4, 3, 3}));
    std::vector<double> want;
    for (int o = 0; o < 4; ++o)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) {
          double s = 0;
          for (int ci = 0; ci < 2; ++ci)
            for (int ki = 0; ki < 3; ++ki)
              for (int kj = 0; kj < 3; ++kj)
                s += double(x.typed<float>()[(ci * 5 + i + ki) * 5 + j + kj]) * Wc.typed<float>()[((o * 2 + ci) * 3 + ki) * 3 + kj];
          if (relu) s = std::max(s, 0.0);
          want.push_back(s * 10 / 4 - 3);
        }
    for (auto l : {graph_optimization_level::all, graph_optimization_level::disable}) {
      auto d = dnnl_session::create(m, level(l));
      REQUIRE_MESSAGE(d.has_value(), d.status().to_string());
      auto got = d->run({{"x", x}});
      REQUIRE_MESSAGE(got.has_value(), got.status().to_string());
      check_values((*got)[0], want);
    }
  }
}

// Slice in its opset 1-9 form (starts, ends, axes as attributes) inside a shape computation the oneDNN provider
// evaluates when planning, with a symbolic batch: the plan read bounds from inputs the node does not have.
TEST_CASE("an opset-9 Slice in a shape computation is planned from its attributes, every time") {
  model m;
  m.opsets = {{"", 9}};
  auto& g = m.graph;
  g.set_name("slice9");
  g.add_input("x", f32(shape{dimension("batch"), 12}));
  g.add_initializer("W", zoo::random_tensor({12, 12}, 31, 0.5f));
  g.add_initializer("rest", tensor::from<std::int64_t>({2}, {3, 4}));
  g.add_node(op("mm", "MatMul"), {"x", "W"}, {"y"});
  g.add_node(op("shape", "Shape"), {"y"}, {"s"});
  attribute_list sl;
  sl.set("starts", std::vector<std::int64_t>{0});
  sl.set("ends", std::vector<std::int64_t>{1});
  sl.set("axes", std::vector<std::int64_t>{0});
  g.add_node(op("slice", "Slice", sl), {"s"}, {"b"});
  attribute_list ax0;
  ax0.set("axis", std::int64_t{0});
  g.add_node(op("concat", "Concat", ax0), {"b", "rest"}, {"target"});
  g.add_node(op("reshape", "Reshape"), {"y", "target"}, {"r"});
  g.add_node(op("relu", "Relu"), {"r"}, {"z"});
  g.add_output("z", f32(shape{dimension("batch"), 3, 4}));
  g.add_output("target", type_info::tensor_of(element_type::int64, shape{3}));
  // The other forms of the same slice: a negative start and end with no axes (every axis, here the one).
  model m2 = m;
  {
    auto& n = m2.graph.node(2);
    n.attributes = {};
    n.attributes.set("starts", std::vector<std::int64_t>{-2});
    n.attributes.set("ends", std::vector<std::int64_t>{-1});
  }
  for (int round = 0; round < 10; ++round) {
    for (std::int64_t batch : {1, 3, 6}) {
     for (const model* mm : {&m, &m2}) {
      const auto x = zoo::random_tensor({batch, 12}, static_cast<std::uint64_t>(batch + round), 1.0f);
      auto d = dnnl_session::create(*mm, level(graph_optimization_level::disable));
      REQUIRE_MESSAGE(d.has_value(), d.status().to_string());
      CHECK(dnnl_nodes(*d).size() == 6);
      auto got = d->run({{"x", x}});
      REQUIRE_MESSAGE(got.has_value(), got.status().to_string());
      const tensor& t = (*got)[1];
      REQUIRE(t.element_count() == 3);
      CHECK(std::vector<std::int64_t>(t.typed<std::int64_t>(), t.typed<std::int64_t>() + 3) == std::vector<std::int64_t>{batch, 3, 4});
      auto c = cpu_session::create(*mm, level(graph_optimization_level::disable));
      REQUIRE(c.has_value());
      auto want = c->run({{"x", x}});
      REQUIRE(want.has_value());
      std::vector<double> w((*want)[0].typed<float>(), (*want)[0].typed<float>() + (*want)[0].element_count());
      check_values((*got)[0], w);
     }
    }
  }
}

// A Transpose of a batch-1 convolution is a view with permuted strides; a binary primitive reading it got a layout
// whose size-1 dim kept a stride past the buffer, and oneDNN 2.6.3's jit binary kernel then wrote nothing (zeros or
// stale memory at the output). Found by the differential fuzzer (seed 920).
TEST_CASE("a binary op after a Transpose of a batch-1 convolution computes every value") {
  model m;
  m.opsets = {{"", 13}};
  auto& g = m.graph;
  g.set_name("conv_transpose_add");
  g.add_input("x", f32(shape{dimension("N"), 4, 7, 8}));
  g.add_initializer("W", zoo::random_tensor({6, 4, 4, 1}, 41, 0.5f));
  g.add_initializer("half", tensor::scalar(0.5f));
  g.add_initializer("minus2", tensor::scalar(-2.0f));
  attribute_list c;
  c.set("kernel_shape", std::vector<std::int64_t>{4, 1});
  c.set("pads", std::vector<std::int64_t>{0, 0, 2, 0});
  c.set("dilations", std::vector<std::int64_t>{2, 1});
  g.add_node(op("conv", "Conv", c), {"x", "W"}, {"c"});
  attribute_list t;
  t.set("perm", std::vector<std::int64_t>{2, 3, 0, 1});
  g.add_node(op("transpose", "Transpose", t), {"c"}, {"t"});
  g.add_node(op("add", "Add"), {"t", "half"}, {"a"});
  g.add_node(op("mul", "Mul"), {"a", "minus2"}, {"y"});
  g.add_output("y", f32(shape{3, 8, dimension("N"), 6}));
  for (std::int64_t n : {1, 2}) {
    CAPTURE(n);
    const auto x = zoo::random_tensor({n, 4, 7, 8}, 42, 2.0f);
    auto d = dnnl_session::create(m, level(graph_optimization_level::all));
    REQUIRE_MESSAGE(d.has_value(), d.status().to_string());
    CHECK(dnnl_nodes(*d).size() == 4);
    auto got = d->run({{"x", x}});
    REQUIRE_MESSAGE(got.has_value(), got.status().to_string());
    auto c2 = cpu_session::create(m, level(graph_optimization_level::all));
    REQUIRE(c2.has_value());
    auto want = c2->run({{"x", x}});
    REQUIRE(want.has_value());
    std::vector<double> w((*want)[0].typed<float>(), (*want)[0].typed<float>() + (*want)[0].element_count());
    check_values((*got)[0], w);
  }
}

// HardSwish is a function operator: the CPU provider runs its body. oneDNN claimed the node on the graph as loaded
// (in a group with a Softmax), so it was not expanded; the graph optimiser then removed the Softmax, whose output
// nothing reads, oneDNN no longer took a group without a heavy operation, and session creation failed with "no
// provider of the stack can run 'HardSwish'". Found by the differential fuzzer (seed 946).
TEST_CASE("a function operator oneDNN gives up after graph optimisation runs as its body") {
  model m;
  m.opsets = {{"", 17}};
  auto& g = m.graph;
  g.set_name("hardswish");
  g.add_input("x", f32(shape{3, 7, 10, 5}));
  g.add_initializer("k", tensor::scalar(1.5f));
  g.add_node(op("mul", "Mul"), {"x", "k"}, {"m"});
  g.add_node(op("hs", "HardSwish"), {"m"}, {"h"});
  attribute_list t;
  t.set("perm", std::vector<std::int64_t>{2, 0, 3, 1});
  g.add_node(op("tr", "Transpose", t), {"h"}, {"y"});
  attribute_list ax;
  ax.set("axis", std::int64_t{3});
  g.add_node(op("dead_softmax", "Softmax", ax), {"y"}, {"unused"});
  g.add_output("y", f32(shape{10, 3, 5, 7}));
  const auto x = zoo::random_tensor({3, 7, 10, 5}, 53, 4.0f);
  for (auto l : {graph_optimization_level::all, graph_optimization_level::disable}) {
    auto d = dnnl_session::create(m, level(l));
    REQUIRE_MESSAGE(d.has_value(), d.status().to_string());
    auto got = d->run({{"x", x}});
    REQUIRE_MESSAGE(got.has_value(), got.status().to_string());
    std::vector<double> w;  // HardSwish(1.5 x) = y * clamp(y / 6 + 1/2, 0, 1), transposed
    const float* xp = x.typed<float>();
    for (int a = 0; a < 10; ++a)
      for (int b = 0; b < 3; ++b)
        for (int c = 0; c < 5; ++c)
          for (int e = 0; e < 7; ++e) {
            const double v = 1.5 * xp[((b * 7 + e) * 10 + a) * 5 + c];
            w.push_back(v * std::clamp(v / 6 + 0.5, 0.0, 1.0));
          }
    check_values((*got)[0], w);
  }
}

// A binary op reading a Transpose in place (a permuted strided view) with a per-channel binary post-op: oneDNN
// 2.6.3's jit binary kernel applied the post-op at wrong offsets (values near 1e32). Found by the differential
// fuzzer (seed 2083).
TEST_CASE("a broadcasting binary post-op after a Transpose read in place is applied at the right offsets") {
  model m;
  m.opsets = {{"", 13}};
  auto& g = m.graph;
  g.set_name("transpose_binary_post");
  g.add_input("x", f32(shape{dimension("N"), 4, 11, 8}));
  g.add_initializer("per_channel", zoo::random_tensor({1, 4, 1, 1}, 61, 1.0f));
  g.add_initializer("W", zoo::random_tensor({4, 4, 1, 1}, 62, 0.5f));
  attribute_list t;
  t.set("perm", std::vector<std::int64_t>{3, 1, 0, 2});
  g.add_node(op("tr", "Transpose", t), {"x"}, {"t"});
  g.add_node(op("add", "Add"), {"t", "t"}, {"a"});
  g.add_node(op("sub", "Sub"), {"a", "per_channel"}, {"s"});
  g.add_node(op("conv", "Conv"), {"s", "W"}, {"y"});
  g.add_output("s", f32(shape{8, 4, dimension("N"), 11}));
  g.add_output("y", f32(shape{8, 4, dimension("N"), 11}));
  const auto x = zoo::random_tensor({3, 4, 11, 8}, 63, 2.0f);
  auto d = dnnl_session::create(m, level(graph_optimization_level::all));
  REQUIRE_MESSAGE(d.has_value(), d.status().to_string());
  CHECK(dnnl_nodes(*d).size() == 4);
  auto got = d->run({{"x", x}});
  REQUIRE_MESSAGE(got.has_value(), got.status().to_string());
  std::vector<double> want;  // s[a,b,c,e] = 2 x[c,b,e,a] - per_channel[b]
  const float* xp = x.typed<float>();
  const float* pc = g.value(g.find_value("per_channel")).initializer->typed<float>();
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 4; ++b)
      for (int c = 0; c < 3; ++c)
        for (int e = 0; e < 11; ++e) want.push_back(2.0 * xp[((c * 4 + b) * 11 + e) * 8 + a] - pc[b]);
  check_values((*got)[0], want);
  auto cpu = cpu_session::create(m, level(graph_optimization_level::all));
  REQUIRE(cpu.has_value());
  auto ref = cpu->run({{"x", x}});
  REQUIRE(ref.has_value());
  std::vector<double> w1((*ref)[1].typed<float>(), (*ref)[1].typed<float>() + (*ref)[1].element_count());
  check_values((*got)[1], w1);
}

namespace {
/// Runs `m` on both stacks and checks the oneDNN stack's outputs against the CPU provider's.
void same_as_cpu(const model& m, const std::vector<named_tensor>& feeds, std::size_t min_dnnl_nodes) {
  for (auto l : {graph_optimization_level::all, graph_optimization_level::disable}) {
    auto d = dnnl_session::create(m, level(l));
    REQUIRE_MESSAGE(d.has_value(), d.status().to_string());
    CHECK(dnnl_nodes(*d).size() >= min_dnnl_nodes);
    auto got = d->run(feeds);
    REQUIRE_MESSAGE(got.has_value(), got.status().to_string());
    auto c = cpu_session::create(m, level(l));
    REQUIRE(c.has_value());
    auto want = c->run(feeds);
    REQUIRE_MESSAGE(want.has_value(), want.status().to_string());
    REQUIRE(got->size() == want->size());
    for (std::size_t k = 0; k < got->size(); ++k) {
      CAPTURE(k);
      std::vector<double> w((*want)[k].typed<float>(), (*want)[k].typed<float>() + (*want)[k].element_count());
      check_values((*got)[k], w);
    }
  }
}
}  // namespace

// oneDNN 2.6.3's jit binary kernel applies a per-channel binary post-op ([1,C,1,1]) at wrong offsets (checked with
// oneDNN alone for [2,5,1,1] and [2,16,4,4]); such a post-op now runs as a binary primitive of its own. Found by the
// differential fuzzer (seed 1011553).
TEST_CASE("a per-channel Mul after a binary op is applied to the right channel") {
  model m;
  m.opsets = {{"", 13}};
  auto& g = m.graph;
  g.set_name("per_channel_post");
  g.add_input("x", f32(shape{dimension("N"), 5, 3, 8}));
  g.add_initializer("scale", zoo::random_tensor({1, 5, 1, 1}, 71, 2.0f));
  g.add_node(op("pool", "GlobalMaxPool"), {"x"}, {"p"});
  g.add_node(op("add", "Add"), {"p", "p"}, {"a"});
  g.add_node(op("abs", "Abs"), {"a"}, {"b"});
  g.add_node(op("mul", "Mul"), {"b", "scale"}, {"y"});
  g.add_output("y", f32(shape{dimension("N"), 5, 1, 1}));
  for (std::int64_t n : {1, 2, 3}) same_as_cpu(m, {{"x", zoo::random_tensor({n, 5, 3, 8}, 72, 1.0f)}}, 4);
}

// A pooling's own output layout for [1,11,1,6] is `acbd`, stride 66 on the size-1 dim; oneDNN 2.6.3's jit binary
// kernel then wrote nothing. Binary and element-wise primitives now read strided values with row-major strides on
// their size-1 dims. Found by the differential fuzzer (seed 1009956).
TEST_CASE("a binary op on a pooling output with a size-1 spatial dim computes every value") {
  model m;
  m.opsets = {{"", 13}};
  auto& g = m.graph;
  g.set_name("pool_acbd");
  g.add_input("x", f32(shape{1, 2, 11, 6}));
  g.add_initializer("one", tensor::from<float>({1}, {1.0f}));
  g.add_initializer("s", zoo::random_tensor({11}, 74, 1.0f));
  g.add_initializer("b", zoo::random_tensor({11}, 75, 1.0f));
  g.add_initializer("mean", zoo::random_tensor({11}, 76, 0.5f));
  g.add_initializer("var", tensor::from<float>({11}, {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2}));
  attribute_list t;
  t.set("perm", std::vector<std::int64_t>{0, 2, 1, 3});
  g.add_node(op("tr", "Transpose", t), {"x"}, {"xt"});  // a view: the pooling then picks `acbd` for its output
  attribute_list p;
  p.set("kernel_shape", std::vector<std::int64_t>{1, 2});
  p.set("pads", std::vector<std::int64_t>{0, 1, 0, 0});
  p.set("strides", std::vector<std::int64_t>{2, 1});
  g.add_node(op("pool", "MaxPool", p), {"xt"}, {"m"});
  g.add_node(op("bn", "BatchNormalization"), {"m", "s", "b", "mean", "var"}, {"n"});
  g.add_node(op("abs", "Abs"), {"n"}, {"a"});
  g.add_node(op("add", "Add"), {"a", "one"}, {"sum"});
  g.add_node(op("log", "Log"), {"sum"}, {"y"});
  g.add_output("y", f32(shape{1, 11, 1, 6}));
  same_as_cpu(m, {{"x", zoo::random_tensor({1, 2, 11, 6}, 73, 2.0f)}}, 6);
}

// A node oneDNN takes must compile: a BatchNormalization or LayerNormalization of rank 6 (oneDNN normalises ranks 2
// to 5; fuzzer seeds 1001412, 1003684, 2010361, where the rank is not known when partitioning) runs collapsed to a
// rank oneDNN has; a ConvTranspose whose output_shape needs a negative padding (ONNX's
// test_convtranspose_output_shape with constant weights) is declined when partitioning.
TEST_CASE("normalisations of any rank compile, a ConvTranspose oneDNN cannot express falls back") {
  {
    model m;
    m.opsets = {{"", 13}};
    auto& g = m.graph;
    g.set_name("bn_rank6");
    g.add_input("x", f32(shape{2, 3, 4, 2, 5, 3}));
    g.add_initializer("s", zoo::random_tensor({3}, 81, 1.0f));
    g.add_initializer("b", zoo::random_tensor({3}, 82, 1.0f));
    g.add_initializer("mean", zoo::random_tensor({3}, 83, 1.0f));
    g.add_initializer("var", tensor::from<float>({3}, {0.5f, 1.0f, 2.0f}));
    attribute_list ax;
    ax.set("axis", std::int64_t{-1});
    g.add_node(op("softmax", "Softmax", ax), {"x"}, {"sm"});  // a heavy op for the group; its output is checked too
    g.add_node(op("bn", "BatchNormalization"), {"x", "s", "b", "mean", "var"}, {"y"});
    g.add_output("y", f32(shape{2, 3, 4, 2, 5, 3}));
    m.opsets = {{"", 17}};
    g.add_initializer("ln_scale", zoo::random_tensor({3}, 87, 1.0f));
    g.add_initializer("ln_bias", zoo::random_tensor({3}, 88, 1.0f));
    g.add_node(op("ln", "LayerNormalization", ax), {"x", "ln_scale", "ln_bias"}, {"z"});
    g.add_output("z", f32(shape{2, 3, 4, 2, 5, 3}));
    g.add_output("sm", f32(shape{2, 3, 4, 2, 5, 3}));
    same_as_cpu(m, {{"x", zoo::random_tensor({2, 3, 4, 2, 5, 3}, 84, 2.0f)}}, 3);
  }
  {
    model m;
    m.opsets = {{"", 13}};
    auto& g = m.graph;
    g.set_name("convtranspose_output_shape");
    g.add_input("x", f32(shape{1, 1, 3, 3}));
    g.add_initializer("W", zoo::random_tensor({1, 2, 3, 3}, 85, 1.0f));
    attribute_list a;
    a.set("output_shape", std::vector<std::int64_t>{10, 8});
    a.set("strides", std::vector<std::int64_t>{3, 2});
    g.add_node(op("deconv", "ConvTranspose", a), {"x", "W"}, {"y"});
    g.add_output("y", f32(shape{1, 2, 10, 8}));
    auto d = dnnl_session::create(m, level(graph_optimization_level::all));
    REQUIRE_MESSAGE(d.has_value(), d.status().to_string());
    CHECK(d->plan().to_table().find("negative padding") != std::string::npos);
    same_as_cpu(m, {{"x", zoo::random_tensor({1, 1, 3, 3}, 86, 1.0f)}}, 0);
  }
}

// Attention's products read Q, K and V in place as strided views of [N,S,H,D] (a Reshape and a Transpose of each
// projection). For one image those views have a size-1 batch dim, whose stride the matmul lowering now sets to the
// view's extent so that oneDNN 2.6.3 takes them to brgemm (it ran gemm:jit on BERT's heads): the values must not
// change, for one image and for two (where the batch dim is real), Q x K^T with its scale and P x V alike.
TEST_CASE("attention's products over transposed views of the heads compute every value, batch 1 and 2") {
  constexpr std::int64_t S = 16, H = 4, D = 8;
  model m;
  m.opsets = {{"", 13}};
  auto& g = m.graph;
  g.set_name("attention_views");
  for (const char* in : {"q", "k", "v"}) g.add_input(in, f32(shape{dimension("N"), S, H * D}));
  g.add_initializer("heads", tensor::from<std::int64_t>({4}, {0, 0, H, D}));
  g.add_initializer("merged", tensor::from<std::int64_t>({3}, {0, 0, H * D}));
  g.add_initializer("scale", tensor::from<float>({}, {0.125f}));
  const auto perm = [](std::vector<std::int64_t> p) {
    attribute_list a;
    a.set("perm", std::move(p));
    return a;
  };
  g.add_node(op("rq", "Reshape"), {"q", "heads"}, {"q4"});
  g.add_node(op("rk", "Reshape"), {"k", "heads"}, {"k4"});
  g.add_node(op("rv", "Reshape"), {"v", "heads"}, {"v4"});
  g.add_node(op("tq", "Transpose", perm({0, 2, 1, 3})), {"q4"}, {"qh"});  // [N,H,S,D]
  g.add_node(op("tk", "Transpose", perm({0, 2, 3, 1})), {"k4"}, {"kt"});  // [N,H,D,S]
  g.add_node(op("tv", "Transpose", perm({0, 2, 1, 3})), {"v4"}, {"vh"});  // [N,H,S,D]
  g.add_node(op("qk", "MatMul"), {"qh", "kt"}, {"scores"});
  g.add_node(op("scaled", "Mul"), {"scores", "scale"}, {"s2"});
  g.add_node(op("softmax", "Softmax", [] {
    attribute_list a;
    a.set("axis", std::int64_t{-1});
    return a;
  }()), {"s2"}, {"p"});
  g.add_node(op("pv", "MatMul"), {"p", "vh"}, {"ctx"});
  g.add_node(op("tc", "Transpose", perm({0, 2, 1, 3})), {"ctx"}, {"c4"});
  g.add_node(op("rc", "Reshape"), {"c4", "merged"}, {"y"});
  g.add_output("scores", f32(shape{dimension("N"), H, S, S}));
  g.add_output("y", f32(shape{dimension("N"), S, H * D}));
  for (std::int64_t n : {1, 2}) {
    CAPTURE(n);
    const auto q = zoo::random_tensor({n, S, H * D}, 81, 1.0f), k = zoo::random_tensor({n, S, H * D}, 82, 1.0f),
               v = zoo::random_tensor({n, S, H * D}, 83, 1.0f);
    // The scores in double precision: scores[b,h,i,j] = sum_d q[b,i,h,d] k[b,j,h,d].
    std::vector<double> want;
    const float *qp = q.typed<float>(), *kp = k.typed<float>();
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t i = 0; i < S; ++i)
          for (std::int64_t j = 0; j < S; ++j) {
            double acc = 0;
            for (std::int64_t d = 0; d < D; ++d)
              acc += double(qp[(b * S + i) * H * D + h * D + d]) * double(kp[(b * S + j) * H * D + h * D + d]);
            want.push_back(acc);
          }
    auto s = dnnl_session::create(m, level(graph_optimization_level::all));
    REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
    const auto on_dnnl = dnnl_nodes(*s);
    CHECK(std::find(on_dnnl.begin(), on_dnnl.end(), "qk") != on_dnnl.end());
    CHECK(std::find(on_dnnl.begin(), on_dnnl.end(), "pv") != on_dnnl.end());
    auto got = s->run({{"q", q}, {"k", k}, {"v", v}});
    REQUIRE_MESSAGE(got.has_value(), got.status().to_string());
    check_values((*got)[0], want);
    same_as_cpu(m, {{"q", q}, {"k", k}, {"v", v}}, 2);
  }
}

// A product whose sole reader is a Transpose merging attention's heads back ((0,2,1,3): the batch dim next to the
// rows swapped with them) is written in the Transpose's order (the Transpose is then a view and no reorder runs).
// Each form is checked in double precision, batch 1 and 2: the Transpose as the partition's output or read by a
// Reshape and a product, after fused post-ops (a full-size Add, a Relu), and the forms that keep the plain product
// (broadcast binary post-ops; other permutations, for which oneDNN 2.6.3 would leave brgemm; a product that is also
// an output).
TEST_CASE("a product written in its Transpose's order computes every value") {
  constexpr std::int64_t B2 = 3, M = 5, K = 7, N = 6;
  struct form {
    const char* name;
    std::vector<std::int64_t> perm;
    bool add = false, relu = false, product_out = false;
    std::vector<std::int64_t> mul;  // a broadcast Mul by a constant of these dims ([] none; 0 stands for B1)
    bool then_product = false;      // a Reshape to [B1 * M, B2 * N] and a product with a constant follow
    std::uint64_t reorders;  // of activations: a full-size Add copies its addend (a graph input) into the product's
                             // memory (a sum post-op); a Transpose that is not a view reorders
    bool view_at_batch_1 = false;  // a Transpose that moves only B1: a view of the plain product when B1 is 1
  };
  const std::vector<form> forms{
      {"heads merged", {0, 2, 1, 3}, false, false, false, {}, false, 0},
      {"heads merged, then a Reshape and a product", {0, 2, 1, 3}, false, false, false, {}, true, 0},
      {"after a full-size Add and a Relu", {0, 2, 1, 3}, true, true, false, {}, false, 1},
      // Broadcast binary post-ops keep the plain product (oneDNN 2.6.3 crashed on the first one).
      {"after a Mul by a row of N", {0, 2, 1, 3}, false, false, false, {N}, false, 1},
      {"after a Mul per head", {0, 2, 1, 3}, false, false, false, {1, B2, 1, 1}, false, 1},
      {"after a Mul per row", {0, 2, 1, 3}, false, true, false, {1, 1, M, 1}, false, 1},
      {"batch dims swapped", {1, 0, 2, 3}, false, true, false, {}, false, 1, true},
      {"rows outermost", {2, 1, 0, 3}, true, false, false, {}, false, 2},
      {"a cycle of the batch and row dims", {1, 2, 0, 3}, false, false, false, {}, false, 1, true},
      {"the product is an output too", {0, 2, 1, 3}, false, false, true, {}, false, 1},
      {"matrix dims swapped", {0, 1, 3, 2}, false, false, false, {}, false, 1},
  };
  for (const std::int64_t B1 : {1, 2})
    for (const auto& f : forms) {
      CAPTURE(B1);
      CAPTURE(std::string(f.name));
      const auto a = zoo::random_tensor({B1, B2, M, K}, 91, 1.0f), b = zoo::random_tensor({B1, B2, K, N}, 92, 1.0f),
                 c = zoo::random_tensor({B1, B2, M, N}, 93, 1.0f);
      std::vector<std::int64_t> md = f.mul;
      for (auto& d : md) d = d == 0 ? B1 : d;
      tensor mt(element_type::float32, std::span<const std::int64_t>(md));
      for (std::size_t i = 0; i < mt.element_count(); ++i) mt.typed<float>()[i] = 0.5f + zoo::uniform_at(94, i);
      const auto w2 = zoo::random_tensor({B2 * N, 4}, 95, 1.0f);
      model m;
      m.opsets = {{"", 13}};
      auto& g = m.graph;
      g.set_name("transposed_product");
      g.add_input("a", f32(shape{B1, B2, M, K}));
      g.add_input("b", f32(shape{B1, B2, K, N}));
      g.add_input("c", f32(shape{B1, B2, M, N}));
      std::string v = "p";
      g.add_node(op("mm", "MatMul"), {"a", "b"}, {"p"});
      if (f.add) g.add_node(op("add", "Add"), {v, "c"}, {"pa"}), v = "pa";
      if (!md.empty()) {
        g.add_initializer("scale_by", mt);
        g.add_node(op("mul", "Mul"), {v, "scale_by"}, {"pm"}), v = "pm";
      }
      if (f.relu) g.add_node(op("relu", "Relu"), {v}, {"pr"}), v = "pr";
      attribute_list pa;
      pa.set("perm", f.perm);
      const std::vector<std::int64_t> in{B1, B2, M, N};
      g.add_node(op("tr", "Transpose", pa), {v}, {"y"});
      shape ys;
      for (const auto p : f.perm) ys.push_back(dimension(in[static_cast<std::size_t>(p)]));
      if (f.then_product) {
        g.add_initializer("rows", tensor::from<std::int64_t>({2}, {B1 * M, B2 * N}));
        g.add_initializer("w2", w2);
        g.add_node(op("rs", "Reshape"), {"y", "rows"}, {"y2"});
        g.add_node(op("mm2", "MatMul"), {"y2", "w2"}, {"z"});
        g.add_output("z", f32(shape{B1 * M, 4}));
      } else {
        g.add_output("y", f32(ys));
      }
      if (f.product_out) g.add_output("p", f32(shape{B1, B2, M, N}));
      // The product and its post-ops in double precision, then permuted (and multiplied by w2).
      std::vector<double> prod(static_cast<std::size_t>(B1 * B2 * M * N));
      const float *ap = a.typed<float>(), *bp = b.typed<float>(), *cp = c.typed<float>();
      const float* mp = mt.typed<float>();
      for (std::int64_t z = 0; z < B1 * B2; ++z)
        for (std::int64_t i = 0; i < M; ++i)
          for (std::int64_t j = 0; j < N; ++j) {
            double acc = 0;
            for (std::int64_t k = 0; k < K; ++k) acc += double(ap[(z * M + i) * K + k]) * double(bp[(z * K + k) * N + j]);
            prod[static_cast<std::size_t>((z * M + i) * N + j)] = acc;
          }
      const std::int64_t st[4] = {B2 * M * N, M * N, N, 1};
      std::vector<double> post = prod;
      for (std::size_t i = 0; i < post.size(); ++i) {
        if (f.add) post[i] += double(cp[i]);
        if (!md.empty()) {  // the Mul's operand broadcast: its dims right-aligned with [B1, B2, M, N]
          const auto e = static_cast<std::int64_t>(i);
          const std::int64_t idx[4] = {e / st[0], e / st[1] % B2, e / st[2] % M, e % N};
          std::int64_t off = 0;
          for (std::size_t d = 0; d < md.size(); ++d) {
            const std::size_t full = 4 - md.size() + d;
            off = off * md[d] + (md[d] == 1 ? 0 : idx[full]);
          }
          post[i] *= double(mp[off]);
        }
        if (f.relu) post[i] = std::max(post[i], 0.0);
      }
      std::vector<double> want(post.size());
      std::int64_t od[4];
      for (std::size_t i = 0; i < 4; ++i) od[i] = in[static_cast<std::size_t>(f.perm[i])];
      std::size_t o = 0;
      for (std::int64_t i0 = 0; i0 < od[0]; ++i0)
        for (std::int64_t i1 = 0; i1 < od[1]; ++i1)
          for (std::int64_t i2 = 0; i2 < od[2]; ++i2)
            for (std::int64_t i3 = 0; i3 < od[3]; ++i3) {
              const std::int64_t idx[4] = {i0, i1, i2, i3};
              std::int64_t off = 0;
              for (std::size_t d = 0; d < 4; ++d) off += idx[d] * st[f.perm[d]];
              want[o++] = post[static_cast<std::size_t>(off)];
            }
      if (f.then_product) {  // want is [B1 * M, B2 * N] row-major; times w2 [B2 * N, 4]
        const float* wp2 = w2.typed<float>();
        std::vector<double> z(static_cast<std::size_t>(B1 * M * 4));
        for (std::int64_t r = 0; r < B1 * M; ++r)
          for (std::int64_t j = 0; j < 4; ++j) {
            double acc = 0;
            for (std::int64_t k = 0; k < B2 * N; ++k) acc += want[static_cast<std::size_t>(r * B2 * N + k)] * double(wp2[k * 4 + j]);
            z[static_cast<std::size_t>(r * 4 + j)] = acc;
          }
        want = std::move(z);
      }
      const std::uint64_t before = dnnl_ep::activation_reorder_count();
      auto s = dnnl_session::create(m, level(graph_optimization_level::all));
      REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
      const auto on_dnnl = dnnl_nodes(*s);
      CHECK(std::find(on_dnnl.begin(), on_dnnl.end(), "mm") != on_dnnl.end());
      CHECK(std::find(on_dnnl.begin(), on_dnnl.end(), "tr") != on_dnnl.end());
      auto got = s->run({{"a", a}, {"b", b}, {"c", c}});
      REQUIRE_MESSAGE(got.has_value(), got.status().to_string());
      CHECK(dnnl_ep::activation_reorder_count() - before == (B1 == 1 && f.view_at_batch_1 ? 0u : f.reorders));
      check_values((*got)[0], want);
      if (f.product_out) check_values((*got)[1], prod);
      same_as_cpu(m, {{"a", a}, {"b", b}, {"c", c}}, 2);
    }
}

// As test_session's case for the CPU provider: the oneDNN provider's reordered weights (blocked, padded formats) on
// weight memory a destroyed session released, filled with NaN in between, give the first session's answers. Placed
// by priority (oneDNN takes every node it can) and by the default placement; every size fixed at create (a free
// dimension override), so that oneDNN lays its weights out in the create's chunks (for a symbolic size it would at
// the first run, in memory of its own).
TEST_CASE("a default-stack session created on reused weight memory computes what the first one did") {
  const test::kept_weight_memory keep;
  struct one {
    model m;
    std::string input, dim;
    std::int64_t value;
    std::initializer_list<std::int64_t> sizes;
  };
  const one cases[] = {{zoo::make_mobilenetv2(32, 1000, 1.0f), "input", "N", 1, {1, 3, 32, 32}},
                       {zoo::make_convnet({40, 290}, 16, 10), "image", "N", 1, {1, 3, 16, 16}},
                       {zoo::make_mlp({300, 1000, 1000, 10}), "input", "batch", 3, {3, 300}}};
  for (const std::string placement : {"priority", "estimate"})
    for (const auto& c : cases) {
      CAPTURE(c.m.graph.name());
      CAPTURE(placement);
      session_options so;
      so.set_config(config_keys::placement, placement);
      so.add_free_dimension_override(c.dim, c.value);
      const auto create = [&] {
        auto s = dnnl_session::create(c.m, so);
        if (s && placement == "priority") {  // oneDNN has partitions to lay weights out for
          const auto& plan = s->plan();
          CHECK(std::count(plan.main.partition_provider.begin(), plan.main.partition_provider.end(),
                           static_cast<std::size_t>(std::find(plan.providers.begin(), plan.providers.end(),
                                                              dnnl_provider::type_key) - plan.providers.begin())) > 0);
        }
        return s;
      };
      test::check_create_on_poisoned_memory(create, c.input, zoo::random_tensor(c.sizes, 11, 1.0f));
    }
}
