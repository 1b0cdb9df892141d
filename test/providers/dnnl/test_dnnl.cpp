// The oneDNN provider: what it takes and why it refuses, the groups it forms, the fusions it makes, and that
// `session<dnnl_provider, cpu_provider>` computes what the CPU stack computes.
#include <epstack/testing/model_zoo.hpp>
#include <epstack/core/sanitizers.hpp>
#include <epstack/providers/cpu.hpp>
#include <epstack/providers/dnnl.hpp>
#include <epstack/runtime/session.hpp>

#include "../../support/compare.hpp"
#include "../../support/denormals.hpp"
#include "../../support/graphs.hpp"
#include "dnnl_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace epstack;
using test::op;
using namespace epstack::test::dnnl;

// libgomp's (linked through epstack::dnnl): how many OpenMP threads this thread's next parallel region would use.
extern "C" int omp_get_max_threads();

namespace {

static_assert(execution_provider<dnnl_provider>);
static_assert(provider_traits<dnnl_provider>::has_why_not);
static_assert(provider_traits<dnnl_provider>::short_name == "dnnl");

// These tests check what the oneDNN provider does with what it claims: placement keeps the stack's order.
session_options with_level(graph_optimization_level level, int threads = 2) {
  session_options so;
  so.set_graph_optimization_level(level);
  so.set_intra_op_threads(threads);
  so.set_config(config_keys::placement, "priority");
  return so;
}

/// Runs `m` on the CPU stack and on the oneDNN stack and checks every output agrees.
void agree(const model& m, const std::vector<named_tensor>& feeds, const session_options& so, double atol = 1e-4,
           double rtol = 1e-4) {
  auto c = cpu_session::create(m, so);
  REQUIRE_MESSAGE(c.has_value(), c.status().to_string());
  auto d = dnnl_session::create(m, so);
  REQUIRE_MESSAGE(d.has_value(), d.status().to_string());
  auto want = c->run(feeds);
  REQUIRE_MESSAGE(want.has_value(), want.status().to_string());
  auto got = d->run(feeds);
  REQUIRE_MESSAGE(got.has_value(), got.status().to_string());
  REQUIRE(got->size() == want->size());
  for (std::size_t k = 0; k < got->size(); ++k) {
    const tensor& a = (*got)[k];
    const tensor& b = (*want)[k];
    REQUIRE(std::vector<std::int64_t>(a.sizes().begin(), a.sizes().end()) ==
            std::vector<std::int64_t>(b.sizes().begin(), b.sizes().end()));
    REQUIRE(a.type() == element_type::float32);
    INFO("output ", k);
    EPSTACK_CHECK_CLOSE(a, b, atol, rtol);
  }
}

std::string reason_of(const dnnl_session& s, std::string_view node_name) {
  const auto& plan = s.plan();
  const graph& g = *plan.main.g;
  for (node_id n = 0; n < g.node_count(); ++n)
    if (g.node(n).name == node_name) return plan.main.nodes[n].fallback_reason;
  return "(no such node)";
}

bool has_line(const std::vector<std::string>& lines, std::initializer_list<std::string_view> parts) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
    return std::all_of(parts.begin(), parts.end(), [&](std::string_view p) { return l.find(p) != std::string::npos; });
  });
}

tensor ids_tensor(std::int64_t batch, std::int64_t seq) {
  tensor ids(element_type::int64, {batch, seq});
  for (std::size_t i = 0; i < ids.element_count(); ++i) ids.typed<std::int64_t>()[i] = static_cast<std::int64_t>(i * 37 % 512);
  return ids;
}

}  // namespace

TEST_CASE("oneDNN reports its version and the ISA it dispatches to") {
  CHECK(dnnl_ep::library_version().rfind("2.", 0) == 0);
  CHECK_FALSE(dnnl_ep::cpu_isa().empty());
}

TEST_CASE("the oneDNN stack agrees with the CPU stack on the zoo MLP, batch 1 and 7 (a plan per shape)") {
  const auto m = zoo::make_mlp({64, 128, 96, 10});
  for (auto level : {graph_optimization_level::all, graph_optimization_level::disable}) {
    agree(m, {{"input", zoo::random_tensor({1, 64}, 3, 1.0f)}}, with_level(level));
    auto d = dnnl_session::create(m, with_level(level));
    REQUIRE(d.has_value());
    // One session, two batch sizes: each gets its own plan, and the first is still right afterwards.
    auto a1 = d->run({{"input", zoo::random_tensor({1, 64}, 3, 1.0f)}});
    auto a7 = d->run({{"input", zoo::random_tensor({7, 64}, 4, 1.0f)}});
    auto b1 = d->run({{"input", zoo::random_tensor({1, 64}, 3, 1.0f)}});
    REQUIRE((a1 && a7 && b1));
    CHECK((*a7)[0].sizes()[0] == 7);
    CHECK((*a1)[0].same_content((*b1)[0]));
    CHECK(dnnl_partitions(*d).size() == 1);
  }
}

TEST_CASE("the residual convnet runs as one oneDNN partition, with and without graph optimisation") {
  const auto m = zoo::make_convnet({8, 16}, 32, 10);
  const auto image = zoo::random_tensor({2, 3, 32, 32}, 5, 1.0f);
  for (auto level : {graph_optimization_level::all, graph_optimization_level::disable}) {
    CAPTURE(static_cast<int>(level));
    agree(m, {{"image", image}}, with_level(level));
    auto d = dnnl_session::create(m, with_level(level));
    REQUIRE(d.has_value());
    const auto parts = dnnl_partitions(*d);
    REQUIRE(parts.size() == 1);
    CHECK(parts[0]->nodes.size() == d->plan().main.g->node_count());  // every node, Flatten and Gemm included
  }
}

namespace {
// A patch embedding (as in mixed_ops): x [N,16,32,32] -> Conv (64 channels, 3x3, stride 2) [N,64,16,16] -> Reshape
// [N,64,256] -> Transpose [N,256,64] (or, `transposed` false, no Transpose and a product over the 256 positions) ->
// MatMul -> Add -> y. oneDNN alone writes this convolution's output in 16-channel blocks.
model patch_embedding(bool transposed) {
  model m;
  m.opsets = {{"", 13}};
  auto& g = m.graph;
  g.set_name(transposed ? "patch_embedding" : "patch_mixing");
  g.add_input("x", f32(shape{dimension("N"), 16, 32, 32}));
  g.add_initializer("W", zoo::random_tensor({64, 16, 3, 3}, 91, 0.2f));
  g.add_initializer("B", zoo::random_tensor({64}, 92, 0.1f));
  g.add_initializer("shape", tensor::from<std::int64_t>({3}, {0, 64, -1}));
  g.add_initializer("P", transposed ? zoo::random_tensor({64, 12}, 93, 0.3f) : zoo::random_tensor({256, 12}, 93, 0.3f));
  g.add_initializer("C", zoo::random_tensor({12}, 94, 0.1f));
  attribute_list c;
  c.set("kernel_shape", std::vector<std::int64_t>{3, 3});
  c.set("strides", std::vector<std::int64_t>{2, 2});
  c.set("pads", std::vector<std::int64_t>{1, 1, 1, 1});
  g.add_node(op("patches", "Conv", c), {"x", "W", "B"}, {"c"});
  g.add_node(op("flatten", "Reshape"), {"c", "shape"}, {"r"});
  std::string a = "r";
  if (transposed) {
    attribute_list t;
    t.set("perm", std::vector<std::int64_t>{0, 2, 1});
    g.add_node(op("tokens", "Transpose", t), {"r"}, {"t"});
    a = "t";
  }
  g.add_node(op("embed", "MatMul"), {a, "P"}, {"e"});
  g.add_node(op("bias", "Add"), {"e", "C"}, {"y"});
  g.add_output("y", f32(shape{dimension("N"), transposed ? 256 : 64, 12}));
  return m;
}
}  // namespace

// Written channels-last, the convolution's output is already the transposed token matrix: the Reshape and the
// Transpose are views and the product reads it as it is (on mixed_ops, a 22 us reorder of 61 us less).
TEST_CASE("a convolution read through a Reshape and a Transpose (a patch embedding) is written channels-last") {
  for (const bool transposed : {true, false}) {
    CAPTURE(transposed);
    const model m = patch_embedding(transposed);
    std::uint64_t reorders[2] = {};
    for (std::int64_t n : {1, 2}) {
      CAPTURE(n);
      const auto x = zoo::random_tensor({n, 16, 32, 32}, 95, 1.0f);
      for (auto level : {graph_optimization_level::all, graph_optimization_level::disable}) {
        CAPTURE(static_cast<int>(level));
        agree(m, {{"x", x}}, with_level(level));
      }
      const std::uint64_t before = dnnl_ep::activation_reorder_count();
      auto d = dnnl_session::create(m, with_level(graph_optimization_level::all));
      REQUIRE(d.has_value());
      REQUIRE(dnnl_partitions(*d).size() == 1);
      CHECK(dnnl_partitions(*d)[0]->nodes.size() == d->plan().main.g->node_count());
      auto y = d->run({{"x", x}});
      REQUIRE_MESSAGE(y.has_value(), y.status().to_string());
      reorders[n - 1] = dnnl_ep::activation_reorder_count() - before;
    }
    // The image into the convolution's layout. Without the Transpose, the product and its bias are a Gemm over the
    // convolution's output as [N * 64, 144] rows (MatMul+Add fused through Reshape views): for one image the
    // channels-last output is that matrix transposed, read as it is; for two, a second reorder puts it into rows (as
    // for both before the fusion).
    CHECK(reorders[0] == 1u);
    CHECK(reorders[1] == (transposed ? 1u : 2u));
  }
}

namespace {
tensor random_of(const std::vector<std::int64_t>& sizes, std::uint64_t seed, float scale) {
  tensor t(element_type::float32, sizes);
  for (std::size_t i = 0; i < t.element_count(); ++i) t.typed<float>()[i] = scale * zoo::uniform_at(seed, i);
  return t;
}

struct resize_form {
  int opset = 13;
  std::string op = "Resize";
  std::string coord, round, mode;  // attributes set when not empty
  std::vector<float> scales;       // Upsample-7: the attribute
  std::vector<std::int64_t> sizes;  // instead of scales (Resize-11 and later)
  std::string refusal;             // empty: oneDNN takes it; else a part of the reason it does not
};

// x [1,4,6,5...] (spatial rank `sp`) -> Conv 3 pad 1 (8 channels) -> Resize or Upsample -> Conv 1 (4 channels) -> y.
model resize_model(const resize_form& f, std::size_t sp) {
  model m;
  m.opsets = {{"", f.opset}};
  auto& g = m.graph;
  g.set_name("conv_resize_conv");
  std::vector<std::int64_t> xd{1, 4, 6, 5, 3};
  xd.resize(2 + sp);
  g.add_input("x", f32(shape(std::vector<dimension>(xd.begin(), xd.end()))));
  std::vector<std::int64_t> w1{8, 4, 3, 3, 3}, w2{4, 8, 1, 1, 1};
  w1.resize(2 + sp);
  w2.resize(2 + sp);
  g.add_initializer("W1", random_of(w1, 101, 0.3f));
  g.add_initializer("W2", random_of(w2, 102, 0.3f));
  attribute_list c;
  c.set("pads", std::vector<std::int64_t>(2 * sp, 1));
  g.add_node(op("conv1", "Conv", c), {"x", "W1"}, {"c"});
  attribute_list a;
  if (!f.coord.empty()) a.set("coordinate_transformation_mode", f.coord);
  if (!f.round.empty()) a.set("nearest_mode", f.round);
  if (!f.mode.empty()) a.set("mode", f.mode);
  std::vector<std::string> ins{"c"};
  const auto n = static_cast<std::int64_t>(f.scales.size());
  if (f.op == "Upsample" && f.opset < 9) {
    a.set("scales", f.scales);
  } else if (f.op == "Upsample" || f.opset == 10) {
    g.add_initializer("scales", tensor::from<float>(std::span<const std::int64_t>(&n, 1), std::span<const float>(f.scales)));
    ins.push_back("scales");
  } else {
    g.add_initializer("roi", tensor::from<float>({0}, {}));
    ins.push_back("roi");
    if (f.sizes.empty()) {
      g.add_initializer("scales", tensor::from<float>(std::span<const std::int64_t>(&n, 1), std::span<const float>(f.scales)));
      ins.push_back("scales");
    } else {
      ins.push_back("");
      const auto k = static_cast<std::int64_t>(f.sizes.size());
      g.add_initializer("sizes", tensor::from<std::int64_t>(std::span<const std::int64_t>(&k, 1), std::span<const std::int64_t>(f.sizes)));
      ins.push_back("sizes");
    }
  }
  const std::vector<std::string> outs{"r"};
  g.add_node(op("resize", f.op, a), ins, outs);
  g.add_node(op("conv2", "Conv"), {"r", "W2"}, {"y"});
  g.add_output("y", type_info::tensor_of(element_type::float32));  // shape inferred
  return m;
}
}  // namespace

// Nearest upsampling by whole factors runs on oneDNN's resampling between the convolutions (no reorders to and from
// the CPU provider's NCHW), in every ONNX form whose coordinates agree with oneDNN's; the others fall back, saying why.
TEST_CASE("Resize and Upsample (nearest, whole factors) run in the oneDNN partition, other forms fall back") {
  const std::vector<resize_form> forms{
      {13, "Resize", "asymmetric", "floor", "", {1, 1, 2, 2}, {}, ""},
      {13, "Resize", "asymmetric", "round_prefer_floor", "", {1, 1, 2, 1}, {}, ""},
      {13, "Resize", "", "", "", {1, 1, 3, 2}, {}, ""},  // half_pixel, round_prefer_floor
      {13, "Resize", "pytorch_half_pixel", "round_prefer_ceil", "", {1, 1, 2, 3}, {}, ""},
      {13, "Resize", "tf_half_pixel_for_nn", "floor", "", {1, 1, 3, 3}, {}, ""},
      {13, "Resize", "half_pixel", "", "", {}, {1, 8, 12, 20}, ""},  // sizes: factors 2 and 4
      {19, "Resize", "asymmetric", "floor", "", {1, 1, 2, 2}, {}, ""},
      {10, "Resize", "", "", "nearest", {1, 1, 2, 3}, {}, ""},
      {9, "Upsample", "", "", "", {1, 1, 2, 2}, {}, ""},
      {7, "Upsample", "", "", "", {1, 1, 3, 2}, {}, ""},
      {13, "Resize", "asymmetric", "round_prefer_floor", "", {1, 1, 3, 3}, {}, "nearest_mode 'round_prefer_floor'"},
      {13, "Resize", "asymmetric", "round_prefer_ceil", "", {1, 1, 2, 2}, {}, "nearest_mode 'round_prefer_ceil'"},
      {13, "Resize", "align_corners", "", "", {1, 1, 2, 2}, {}, "'align_corners'"},
      {13, "Resize", "half_pixel", "floor", "", {1, 1, 2, 2}, {}, "nearest_mode 'floor'"},
      {13, "Resize", "", "", "linear", {1, 1, 2, 2}, {}, "mode 'linear'"},
      {13, "Resize", "asymmetric", "floor", "", {1, 1, 1.5f, 2}, {}, "not a whole number"},
      {13, "Resize", "asymmetric", "floor", "", {2, 1, 2, 2}, {}, "batch or channels"},
      {13, "Resize", "asymmetric", "floor", "", {}, {1, 8, 12, 9}, "whole multiples"},
  };
  for (const auto& f : forms) {
    CAPTURE(f.opset);
    CAPTURE(f.op);
    CAPTURE(f.coord);
    CAPTURE(f.round);
    CAPTURE(f.mode);
    CAPTURE(f.scales.size() > 2 ? f.scales[2] : 0.0f);
    const model m = resize_model(f, 2);
    const auto x = zoo::random_tensor({1, 4, 6, 5}, 103, 1.0f);
    agree(m, {{"x", x}}, with_level(graph_optimization_level::all), 1e-5, 1e-5);
    auto d = dnnl_session::create(m, with_level(graph_optimization_level::all));
    REQUIRE_MESSAGE(d.has_value(), d.status().to_string());
    if (f.refusal.empty()) {
      CHECK(provider_of(*d, "resize") == dnnl_provider::type_key);
      CHECK(dnnl_partitions(*d).size() == 1);
    } else {
      CHECK(provider_of(*d, "resize") == cpu_provider::type_key);
      CHECK_MESSAGE(reason_of(*d, "resize").find(f.refusal) != std::string::npos, reason_of(*d, "resize"));
    }
  }
  // One and three spatial axes.
  for (const std::size_t sp : {1u, 3u}) {
    CAPTURE(sp);
    resize_form f{13, "Resize", "asymmetric", "floor", "", {1, 1, 2, 3, 1}, {}, ""};
    f.scales.resize(2 + sp);
    const model m = resize_model(f, sp);
    std::vector<std::int64_t> xd{1, 4, 6, 5, 3};
    xd.resize(2 + sp);
    const auto x = random_of(xd, 104, 1.0f);
    agree(m, {{"x", x}}, with_level(graph_optimization_level::all), 1e-5, 1e-5);
    auto d = dnnl_session::create(m, with_level(graph_optimization_level::all));
    REQUIRE(d.has_value());
    CHECK(provider_of(*d, "resize") == dnnl_provider::type_key);
  }
}

// The optimiser rewrites these Einsums as FusedMatMul with transA/transB (a constant B, runtime operands, a
// transposed product): oneDNN takes them and computes what the CPU provider's Einsum computes.
TEST_CASE("Einsums that are one product per batch run on oneDNN as FusedMatMul, with the CPU provider's answers") {
  model m;
  m.opsets = {{"", 13}};
  auto& g = m.graph;
  g.set_name("einsums");
  g.add_input("q", f32(shape{2, 3, 5, 4}));
  g.add_input("k", f32(shape{2, 3, 6, 4}));
  g.add_input("x", f32(shape{7, 4}));
  g.add_input("u", f32(shape{2, 5, 4}));
  g.add_input("v", f32(shape{2, 4, 3}));
  g.add_initializer("protos", zoo::random_tensor({9, 4}, 121, 0.5f));
  const auto einsum = [&](const char* name, const char* eq, std::initializer_list<std::string> in, const char* out) {
    attribute_list a;
    a.set("equation", std::string(eq));
    g.add_node(op(name, "Einsum", a), in, {out});
    g.add_output(out, type_info::tensor_of(element_type::float32));
  };
  einsum("scores", "bhid,bhjd->bhij", {"q", "k"}, "s");
  einsum("match", "nd,kd->nk", {"x", "protos"}, "p");
  einsum("swap", "bij,bjk->bki", {"u", "v"}, "t");
  const std::vector<named_tensor> feeds{{"q", zoo::random_tensor({2, 3, 5, 4}, 122, 1.0f)},
                                        {"k", zoo::random_tensor({2, 3, 6, 4}, 123, 1.0f)},
                                        {"x", zoo::random_tensor({7, 4}, 124, 1.0f)},
                                        {"u", zoo::random_tensor({2, 5, 4}, 125, 1.0f)},
                                        {"v", zoo::random_tensor({2, 4, 3}, 126, 1.0f)}};
  agree(m, feeds, with_level(graph_optimization_level::all), 1e-5, 1e-5);
  auto d = dnnl_session::create(m, with_level(graph_optimization_level::all));
  REQUIRE(d.has_value());
  for (const char* n : {"scores", "match", "swap"}) {
    CAPTURE(n);
    CHECK(provider_of(*d, n) == dnnl_provider::type_key);
  }
}

// MatMulScaleFusion: attention scores divided by sqrt(d) and a scaled operand become FusedMatMul alphas, which oneDNN
// takes (its matmul's scale) and computes as the CPU provider and the unfused graph do.
TEST_CASE("MatMul scaled by constants runs on oneDNN as FusedMatMul with alpha, with the CPU provider's answers") {
  model m;
  m.opsets = {{"", 13}};
  auto& g = m.graph;
  g.set_name("scaled");
  g.add_input("q", f32(shape{2, 3, 5, 8}));
  g.add_input("k", f32(shape{2, 3, 8, 6}));
  g.add_input("mask", f32(shape{2, 1, 1, 6}));
  g.add_input("x", f32(shape{7, 8}));
  g.add_initializer("w", zoo::random_tensor({8, 4}, 131, 0.5f));
  const float root = std::sqrt(8.0f), half = 0.5f;
  g.add_initializer("root", tensor::from<float>(std::vector<std::int64_t>{}, std::span<const float>(&root, 1)));
  g.add_initializer("half", tensor::from<float>(std::vector<std::int64_t>{}, std::span<const float>(&half, 1)));
  g.add_node(op("scores", "MatMul"), {"q", "k"}, {"qk"});
  g.add_node(op("scale", "Div"), {"qk", "root"}, {"qk_s"});
  g.add_node(op("masked", "Add"), {"qk_s", "mask"}, {"s"});
  g.add_node(op("halve", "Mul"), {"x", "half"}, {"xh"});
  g.add_node(op("proj", "MatMul"), {"xh", "w"}, {"p"});
  for (const char* o : {"s", "p"}) g.add_output(o, type_info::tensor_of(element_type::float32));
  const std::vector<named_tensor> feeds{{"q", zoo::random_tensor({2, 3, 5, 8}, 132, 1.0f)},
                                        {"k", zoo::random_tensor({2, 3, 8, 6}, 133, 1.0f)},
                                        {"mask", zoo::random_tensor({2, 1, 1, 6}, 134, 1.0f)},
                                        {"x", zoo::random_tensor({7, 8}, 135, 1.0f)}};
  agree(m, feeds, with_level(graph_optimization_level::all), 1e-5, 1e-5);
  auto d = dnnl_session::create(m, with_level(graph_optimization_level::all));
  REQUIRE(d.has_value());
  const graph& og = *d->plan().main.g;
  int fused = 0;
  for (node_id n = 0; n < og.node_count(); ++n) fused += og.node(n).op_type == "FusedMatMul" ? 1 : 0;
  CHECK(fused == 2);
  for (const char* n : {"scores", "proj"}) {
    CAPTURE(n);
    CHECK(provider_of(*d, n) == dnnl_provider::type_key);
  }
  // Against the graph as written (the Div and Mul run on their own).
  auto c = cpu_session::create(m, with_level(graph_optimization_level::disable));
  REQUIRE(c.has_value());
  auto want = c->run(feeds);
  auto got = d->run(feeds);
  REQUIRE_MESSAGE(want.has_value(), want.status().to_string());
  REQUIRE_MESSAGE(got.has_value(), got.status().to_string());
  for (std::size_t k = 0; k < 2; ++k) {
    INFO("output ", k);
    EPSTACK_CHECK_CLOSE((*got)[k], (*want)[k], 1e-5, 1e-5);
  }
}

TEST_CASE("fusion: Conv + BatchNormalization + Add + Relu becomes one convolution with post-ops") {
  const auto m = zoo::make_convnet({8}, 16, 4);
  auto d = dnnl_session::create(m, with_level(graph_optimization_level::disable));
  REQUIRE(d.has_value());
  const auto parts = dnnl_partitions(*d);
  REQUIRE(parts.size() == 1);
  const auto lines = dnnl_ep::describe(*parts[0]);
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  INFO("compiled partition:\n", all);
  // stage0.conv2 has no Relu of its own: its BatchNormalization folds in, the residual Add and the Relu after it
  // become post-ops (the Add runs as oneDNN's sum post-op, in place).
  CHECK(has_line(lines, {"convolution <- ", "stage0.conv2", "BatchNormalization", "/stage0/Add", "/stage0/Relu",
                         "[post-ops: binary_add eltwise_relu]"}));
  // Conv + BatchNormalization + Relu: one convolution with a ReLU post-op.
  CHECK(has_line(lines, {"convolution <- ", "stage0.conv1", "BatchNormalization", "Relu", "[post-ops: eltwise_relu]"}));
  // No BatchNormalization, Add or Relu is left as an operation of its own.
  for (const auto& l : lines) {
    CHECK(l.rfind("batch_normalization", 0) != 0);
    CHECK(l.rfind("binary", 0) != 0);
    CHECK(l.rfind("eltwise", 0) != 0);
  }
  // Gemm takes its bias as a post-op too.
  CHECK(has_line(lines, {"matmul <- /head/Gemm", "binary_add"}));
  // With the graph optimiser on, the same block arrives as a FusedConv and compiles to the same single primitive.
  auto o = dnnl_session::create(m, with_level(graph_optimization_level::all));
  REQUIRE(o.has_value());
  const auto olines = dnnl_ep::describe(*dnnl_partitions(*o).at(0));
  CHECK(has_line(olines, {"convolution <- ", "[post-ops: binary_add eltwise_relu]"}));
}

TEST_CASE("the transformer agrees with the CPU stack, the Erf form of Gelu is recognised") {
  zoo::transformer_config cfg;
  cfg.layers = 2;
  const auto m = zoo::make_transformer(cfg);
  for (auto level : {graph_optimization_level::all, graph_optimization_level::disable}) {
    CAPTURE(static_cast<int>(level));
    agree(m, {{"input_ids", ids_tensor(2, 16)}}, with_level(level), 2e-4, 2e-4);
  }
  auto d = dnnl_session::create(m, with_level(graph_optimization_level::disable));
  REQUIRE(d.has_value());
  bool gelu = false, erf_on_dnnl = false;
  for (const auto* p : dnnl_partitions(*d)) {
    const auto lines = dnnl_ep::describe(*p);
    gelu = gelu || has_line(lines, {"eltwise_gelu_erf"});
    for (node_id n : p->nodes) erf_on_dnnl = erf_on_dnnl || p->g->node(n).op_type == "Erf";
  }
  CHECK(gelu);
  CHECK(erf_on_dnnl);
  // Optimised, the encoder is one oneDNN partition: the attention's Shape -> Gather -> Unsqueeze -> Concat ->
  // Reshape chains are evaluated when planning instead of splitting it.
  auto o = dnnl_session::create(m, with_level(graph_optimization_level::all));
  REQUIRE(o.has_value());
  CHECK(dnnl_partitions(*o).size() == 1);
}

TEST_CASE("groups never make the graph cyclic: a path through a CPU node splits them") {
  // a = x W1 -> c = Erf(a) on the CPU -> Add(a, c) -> y = (.) W2: a and the Add cannot share a partition.
  model m;
  m.opsets = {{"", 13}};
  auto& g = m.graph;
  g.set_name("split");
  g.add_input("x", f32(shape{4, 8}));
  g.add_initializer("W1", zoo::random_tensor({8, 8}, 1, 0.5f));
  g.add_initializer("W2", zoo::random_tensor({8, 8}, 2, 0.5f));
  g.add_node(op("mm1", "MatMul"), {"x", "W1"}, {"a"});
  g.add_node(op("erf", "Erf"), {"a"}, {"c"});
  g.add_node(op("add", "Add"), {"a", "c"}, {"s"});
  g.add_node(op("mm2", "MatMul"), {"s", "W2"}, {"y"});
  g.add_output("y", f32(shape{4, 8}));
  const auto so = with_level(graph_optimization_level::disable);
  agree(m, {{"x", zoo::random_tensor({4, 8}, 3, 1.0f)}}, so);
  auto d = dnnl_session::create(m, so);
  REQUIRE(d.has_value());
  CHECK(provider_of(*d, "mm1") == "DnnlExecutionProvider");
  CHECK(provider_of(*d, "erf") == "CPUExecutionProvider");
  CHECK(provider_of(*d, "add") == "DnnlExecutionProvider");
  const auto& plan = d->plan().main;
  const graph& pg = *plan.g;
  node_id mm1 = no_id, add = no_id;
  for (node_id n = 0; n < pg.node_count(); ++n) {
    if (pg.node(n).name == "mm1") mm1 = n;
    if (pg.node(n).name == "add") add = n;
  }
  CHECK(plan.nodes[mm1].partition != plan.nodes[add].partition);
  CHECK(plan.refused.empty());  // the provider formed legal groups itself
  CHECK(reason_of(*d, "erf").find("Erf outside the Erf form of Gelu") != std::string::npos);
}

TEST_CASE("nodes oneDNN cannot take with their attributes, types or inputs fall back, and the plan says why") {
  model m;
  m.opsets = {{"", 11}};
  auto& g = m.graph;
  g.set_name("refusals");
  g.add_input("x", f32(shape{1, 4, 6, 6}));
  g.add_input("wx", f32(shape{4, 4, 3, 3}));  // weights given at run time
  g.add_initializer("w", zoo::random_tensor({4, 4, 3, 3}, 1, 0.3f));
  attribute_list pads;
  pads.set("pads", std::vector<std::int64_t>{1, 1, 1, 1});
  g.add_node(op("conv_ok", "Conv", pads), {"x", "w"}, {"c1"});
  g.add_node(op("conv_runtime_w", "Conv", pads), {"c1", "wx"}, {"c2"});
  attribute_list mp;
  mp.set("kernel_shape", std::vector<std::int64_t>{2, 2});
  mp.set("strides", std::vector<std::int64_t>{2, 2});
  g.add_node(op("pool_indices", "MaxPool", mp), {"c2"}, {"p", "idx"});
  attribute_list sm;
  sm.set("axis", std::int64_t{1});
  g.add_node(op("softmax_2d", "Softmax", sm), {"p"}, {"s"});  // opset 11: over axes 1..3 together
  g.add_output("s", f32(shape{1, 4, 3, 3}));
  g.add_output("idx", type_info::tensor_of(element_type::int64, shape{1, 4, 3, 3}));
  // An int64 product and a lone element-wise island.
  g.add_input("i", type_info::tensor_of(element_type::int64, shape{3}));
  g.add_node(op("int_add", "Add"), {"i", "i"}, {"i2"});
  g.add_output("i2", type_info::tensor_of(element_type::int64, shape{3}));
  g.add_input("z", f32(shape{3}));
  g.add_node(op("lonely_relu", "Relu"), {"z"}, {"zr"});
  g.add_output("zr", f32(shape{3}));
  const auto so = with_level(graph_optimization_level::disable);
  auto d = dnnl_session::create(m, so);
  REQUIRE_MESSAGE(d.has_value(), d.status().to_string());
  CHECK(provider_of(*d, "conv_ok") == "DnnlExecutionProvider");
  CHECK(provider_of(*d, "conv_runtime_w") == "CPUExecutionProvider");
  CHECK(reason_of(*d, "conv_runtime_w").find("DnnlExecutionProvider: the weight or bias (input 1) is not a constant initializer") !=
        std::string::npos);
  CHECK(reason_of(*d, "pool_indices").find("its output 1 is used") != std::string::npos);
  CHECK(reason_of(*d, "softmax_2d").find("opset < 13 Softmax over several axes") != std::string::npos);
  CHECK(reason_of(*d, "int_add").find("int64") != std::string::npos);
  CHECK(reason_of(*d, "lonely_relu").find("no group worth a oneDNN partition") != std::string::npos);
  // The plan's text carries the reasons too.
  const std::string text = d->plan().to_table();
  CHECK(text.find("not a constant initializer") != std::string::npos);
  // And the session still computes the right thing.
  tensor ints = tensor::from<std::int64_t>({3}, {1, 2, 3});
  auto out = d->run({{"x", zoo::random_tensor({1, 4, 6, 6}, 4, 1.0f)}, {"wx", zoo::random_tensor({4, 4, 3, 3}, 5, 0.3f)},
                     {"i", ints}, {"z", tensor::from<float>({3}, {-1, 0, 2})}});
  REQUIRE_MESSAGE(out.has_value(), out.status().to_string());
  CHECK((*out)[2].typed<std::int64_t>()[2] == 6);
  CHECK((*out)[3].typed<float>()[0] == 0.0f);
}

TEST_CASE("refusals by attribute: LayerNormalization over several axes, training BatchNormalization, Gemm beta") {
  model m;
  m.opsets = {{"", 17}};
  auto& g = m.graph;
  g.set_name("attrs");
  g.add_input("x", f32(shape{2, 3, 8}));
  g.add_initializer("scale", zoo::random_tensor({3, 8}, 1, 1.0f));
  attribute_list ax;
  ax.set("axis", std::int64_t{1});
  g.add_node(op("ln_two_axes", "LayerNormalization", ax), {"x", "scale"}, {"y"});
  g.add_output("y", f32(shape{2, 3, 8}));
  g.add_input("a", f32(shape{2, 4}));
  g.add_input("cc", f32(shape{2, 5}));
  g.add_initializer("B", zoo::random_tensor({4, 5}, 2, 1.0f));
  attribute_list beta;
  beta.set("beta", 0.5f);
  g.add_node(op("gemm_beta", "Gemm", beta), {"a", "B", "cc"}, {"q"});
  g.add_output("q", f32(shape{2, 5}));
  auto d = dnnl_session::create(m, with_level(graph_optimization_level::disable));
  REQUIRE_MESSAGE(d.has_value(), d.status().to_string());
  CHECK(reason_of(*d, "ln_two_axes").find("axis is not the last one") != std::string::npos);
  // Gemm with a C computed at run time and beta != 1 (a constant C is scaled once, at compile time).
  CHECK(reason_of(*d, "gemm_beta").find("beta") != std::string::npos);
}

TEST_CASE("shape computations are evaluated when planning and keep a reshape in the partition, Split is taken") {
  // x [batch, 12] -> MatMul -> y [batch, 12]; Shape(y)[0] -> Unsqueeze -> Concat with [3, 4] -> Reshape(y) to
  // [batch, 3, 4]; Split along axis 2 into [batch,3,1] and [batch,3,3]; the computed shape is an output too.
  model m;
  m.opsets = {{"", 13}};
  auto& g = m.graph;
  g.set_name("shapes");
  g.add_input("x", f32(shape{dimension("batch"), 12}));
  g.add_initializer("W", zoo::random_tensor({12, 12}, 1, 0.5f));
  g.add_initializer("zero", tensor::from<std::int64_t>({1}, {0}));
  g.add_initializer("rest", tensor::from<std::int64_t>({2}, {3, 4}));
  g.add_initializer("parts", tensor::from<std::int64_t>({2}, {1, 3}));
  g.add_node(op("mm", "MatMul"), {"x", "W"}, {"y"});
  g.add_node(op("shape", "Shape"), {"y"}, {"s"});
  attribute_list ax0;
  ax0.set("axis", std::int64_t{0});
  g.add_node(op("gather", "Gather", ax0), {"s", "zero"}, {"b"});
  g.add_node(op("concat", "Concat", ax0), {"b", "rest"}, {"target"});
  g.add_node(op("reshape", "Reshape"), {"y", "target"}, {"r"});
  attribute_list ax2;
  ax2.set("axis", std::int64_t{2});
  g.add_node(op("split", "Split", ax2), {"r", "parts"}, {"p0", "p1"});
  g.add_node(op("relu", "Relu"), {"p1"}, {"q1"});
  g.add_output("p0", f32(shape{dimension("batch"), 3, 1}));
  g.add_output("q1", f32(shape{dimension("batch"), 3, 3}));
  g.add_output("target", type_info::tensor_of(element_type::int64, shape{3}));
  const auto so = with_level(graph_optimization_level::disable);
  auto d = dnnl_session::create(m, so);
  REQUIRE_MESSAGE(d.has_value(), d.status().to_string());
  REQUIRE(dnnl_partitions(*d).size() == 1);
  for (const char* n : {"mm", "shape", "gather", "concat", "reshape", "split", "relu"}) CHECK(provider_of(*d, n) == "DnnlExecutionProvider");
  CHECK(has_line(dnnl_ep::describe(*dnnl_partitions(*d)[0]), {"shape computation (when planning) <- concat"}));
  for (std::int64_t batch : {2, 5}) {
    const auto x = zoo::random_tensor({batch, 12}, static_cast<std::uint64_t>(batch), 1.0f);
    auto c = cpu_session::create(m, so);
    REQUIRE(c.has_value());
    auto want = c->run({{"x", x}});
    auto got = d->run({{"x", x}});
    REQUIRE_MESSAGE(got.has_value(), got.status().to_string());
    REQUIRE(want.has_value());
    const tensor& t = (*got)[2];
    REQUIRE(t.type() == element_type::int64);
    CHECK(std::vector<std::int64_t>(t.typed<std::int64_t>(), t.typed<std::int64_t>() + 3) == std::vector<std::int64_t>{batch, 3, 4});
    for (std::size_t k = 0; k < 2; ++k) {
      const tensor& a = (*got)[k];
      const tensor& b = (*want)[k];
      EPSTACK_CHECK_CLOSE(a, b, 1e-4, 1e-4);
    }
  }
}

TEST_CASE("the session's intra-op thread count is the OpenMP thread count oneDNN runs with") {
  const auto m = zoo::make_mlp({16, 32, 4});
  for (int threads : {1, 2, 3}) {
    auto d = dnnl_session::create(m, with_level(graph_optimization_level::all, threads));
    REQUIRE(d.has_value());
    REQUIRE(d->intra_op_threads() == threads);
    auto out = d->run({{"input", zoo::random_tensor({2, 16}, 1, 1.0f)}});
    REQUIRE(out.has_value());
    CHECK(omp_get_max_threads() == threads);  // set on the calling thread for the run's oneDNN calls
  }
}

TEST_CASE("a stack with oneDNN runs the CPU provider's loops on oneDNN's OpenMP threads, with the same answers") {
  // The transformer leaves nodes to the CPU provider between oneDNN's partitions (Gather, Shape, Softmax, ...).
  const auto m = zoo::make_transformer();
  tensor feed(element_type::int64, {2, 16});
  for (std::size_t k = 0; k < feed.element_count(); ++k) feed.typed<std::int64_t>()[k] = static_cast<std::int64_t>((k * 37) % 100);
  for (int threads : {1, 2, 3}) {
    auto shared = dnnl_session::create(m, with_level(graph_optimization_level::all, threads));
    REQUIRE_MESSAGE(shared.has_value(), shared.status().to_string());
    auto so = with_level(graph_optimization_level::all, threads);
    so.set_config(config_keys::intra_op_runtime, "own");
    auto own = dnnl_session::create(m, so);
    REQUIRE_MESSAGE(own.has_value(), own.status().to_string());
    CHECK(own->intra_op_runtime() == "epstack");
    CHECK(shared->intra_op_runtime() == "OpenMP (libgomp)");
    REQUIRE_FALSE(dnnl_partitions(*shared).empty());  // oneDNN runs part of the model, the CPU provider the rest
    REQUIRE(dnnl_partitions(*shared).size() < shared->plan().main.partitions.size());
    for (int round = 0; round < 3; ++round) {
      auto a = shared->run({{"input_ids", feed}});
      auto b = own->run({{"input_ids", feed}});
      REQUIRE_MESSAGE(a.has_value(), a.status().to_string());
      REQUIRE(b.has_value());
      EPSTACK_CHECK_CLOSE((*a)[0], (*b)[0], 1e-5, 1e-5);
    }
  }
  // A CPU stack has no runtime to share; an unknown value is refused by name.
  CHECK(cpu_session::create(m, with_level(graph_optimization_level::all))->intra_op_runtime() == "epstack");
  auto so = with_level(graph_optimization_level::all);
  so.set_config(config_keys::intra_op_runtime, "openmp");
  auto bad = dnnl_session::create(m, so);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.status().code() == errc::invalid_argument);
  CHECK(bad.status().message().find("epstack.intra_op_runtime is 'openmp'; it takes provider or own") != std::string::npos);
}

// oneDNN's primitives run their own OpenMP regions, which the session's loops do not wrap: the run sets the mode on the
// whole team (thread_pool::run_scope). The product is placed on oneDNN by priority, so that its matmul primitive
// computes all 2^16 rows on the OpenMP threads.
TEST_CASE("session.set_denormal_as_zero reaches oneDNN's OpenMP threads for a run, and only for it") {
  test::check_set_denormal_as_zero<dnnl_session>(
      [](const model& m, session_options o) {
        o.set_config(config_keys::placement, "priority");
        return dnnl_session::create(m, o);
      },
      [](const dnnl_session& s) {
        CHECK(provider_of(s, "matmul") == dnnl_provider::type_key);
        if (!under_thread_sanitizer) CHECK(s.intra_op_runtime() != "epstack");  // the OpenMP team, where the primitive runs
      });
}
