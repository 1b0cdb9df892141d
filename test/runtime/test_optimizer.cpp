// Graph transformations: what each level does, and that the transformed model computes the same outputs.
#include <epstack/testing/model_zoo.hpp>
#include <epstack/ir/node_facts.hpp>
#include <epstack/onnx/onnx_io.hpp>
#include <epstack/providers/cpu.hpp>
#include <epstack/runtime/session.hpp>

#include "../../src/runtime/egraph.hpp"
#include "../support/compare.hpp"
#include "../support/graphs.hpp"
#include "../support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <set>

using namespace epstack;
using test::op_counts;
using cpu_session = session<cpu_provider>;

namespace {

model wrap(graph g) {
  model m;
  m.opsets = {{"", 13}};
  m.graph = std::move(g);
  return m;
}
cpu_session make(const model& m, graph_optimization_level level) {
  session_options so;
  so.set_graph_optimization_level(level);
  auto s = cpu_session::create(m, so);
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  return std::move(*s);
}
std::map<std::string, int> fusion_kinds(const optimization_report& r) {
  std::map<std::string, int> k;
  for (const auto& f : r.fusions) k[f.substr(0, f.find(':'))]++;
  return k;
}
void check_same(const std::vector<tensor>& a, const std::vector<tensor>& b, double tol) {
  REQUIRE(a.size() == b.size());
  for (std::size_t k = 0; k < a.size(); ++k) {
    INFO("output ", k);
    EPSTACK_CHECK_CLOSE(a[k], b[k], tol, tol);
  }
}
// Runs both sessions on `feeds`, checks that `got` gives `ref`'s outputs within `tol`, and returns `got`'s.
std::vector<tensor> same_outputs(cpu_session& ref, cpu_session& got, const std::vector<named_tensor>& feeds, double tol) {
  auto a = ref.run(feeds);
  auto b = got.run(feeds);
  REQUIRE_MESSAGE(a.has_value(), a.status().to_string());
  REQUIRE_MESSAGE(b.has_value(), b.status().to_string());
  check_same(*a, *b, tol);
  return std::move(*b);
}

// As exporters write position ids: token ids `ids` (int64, `ids_shape`), Slice(positions, 0, Unsqueeze(Gather(
// Shape(ids), 1))) as "p", its embedding "e" and the tokens' "t" (rows of a 16 x 8 table "emb"), summed into "h".
// Initializers "one" (a scalar 1) and "zero1" ([0]) are there for more shape computations.
graph positions_graph(std::string name, shape ids_shape) {
  graph g(std::move(name));
  g.add_input("ids", type_info::tensor_of(element_type::int64, std::move(ids_shape)));
  std::vector<std::int64_t> pos(16);
  for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<std::int64_t>(i);
  g.add_initializer("positions", tensor::from<std::int64_t>(std::vector<std::int64_t>{16}, std::span<const std::int64_t>(pos)));
  g.add_initializer("one", tensor::from<std::int64_t>({}, {1}));
  g.add_initializer("zero1", tensor::from<std::int64_t>({1}, {0}));
  std::vector<float> emb(16 * 8);
  for (std::size_t i = 0; i < emb.size(); ++i) emb[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
  g.add_initializer("emb", tensor::from<float>(std::vector<std::int64_t>{16, 8}, std::span<const float>(emb)));
  g.add_node(test::op("shape", "Shape"), {"ids"}, {"s"});
  g.add_node(test::op("gather_len", "Gather"), {"s", "one"}, {"n"});
  g.add_node(test::op("unsqueeze", "Unsqueeze"), {"n", "zero1"}, {"n1"});
  g.add_node(test::op("slice", "Slice"), {"positions", "zero1", "n1", "zero1"}, {"p"});
  g.add_node(test::op("embed", "Gather"), {"emb", "p"}, {"e"});
  g.add_node(test::op("tok", "Gather"), {"emb", "ids"}, {"t"});
  g.add_node(test::op("add", "Add"), {"t", "e"}, {"h"});
  return g;
}

}  // namespace

TEST_CASE("basic: constants and known shapes fold, Identity and dead nodes go, outputs stay the same") {
  graph g("basic");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{2, 3}));
  g.add_initializer("c1", tensor::from<float>({3}, {1, 2, 3}));
  g.add_initializer("c2", tensor::from<float>({3}, {10, 20, 30}));
  g.add_node(test::op("const_add", "Add"), {"c1", "c2"}, {"c12"});           // constant: folds
  g.add_node(test::op("scale", "Mul"), {"x", "c12"}, {"scaled"});
  g.add_node(test::op("shape", "Shape"), {"x"}, {"shp"});                    // x's shape is known: folds
  g.add_node(test::op("count", "ReduceProd"), {"shp"}, {"count"});           // then this folds too
  g.add_node(test::op("id", "Identity"), {"scaled"}, {"scaled_id"});         // removed
  g.add_node(test::op("unused", "Neg"), {"x"}, {"nobody"});                   // dead
  g.add_node(test::op("flatten", "Reshape"), {"scaled_id", "count"}, {"y_pre"});
  g.add_node(test::op("relu", "Relu"), {"y_pre"}, {"y"});
  g.add_output("y");
  const auto m = wrap(std::move(g));
  auto plain = make(m, graph_optimization_level::disable);
  auto basic = make(m, graph_optimization_level::basic);
  const auto& r = basic.optimizations();
  CHECK(r.nodes_before == 8);
  CHECK(r.constant_folded == 2);  // the constant Add, and the ReduceProd of the folded shape
  CHECK(r.shapes_folded == 1);
  CHECK(r.removed == 2);          // Identity and the dead Neg
  CHECK(r.nodes_after == 3);
  CHECK(op_counts(basic.get_model().graph) == std::map<std::string, int>{{"Mul", 1}, {"Relu", 1}, {"Reshape", 1}});
  CHECK(plain.optimizations().nodes_after == 8);
  const auto x = tensor::from<float>({2, 3}, {1, -1, 2, -2, 3, -3});
  auto a = plain.run({{"x", x}});
  auto b = basic.run({{"x", x}});
  REQUIRE_MESSAGE(a.has_value(), a.status().to_string());
  REQUIRE(b.has_value());
  check_same(*a, *b, 0);
}

TEST_CASE("Conv+BatchNormalization folds, and Conv+Add+Relu becomes FusedConv with the residual, same outputs") {
  const auto m = zoo::make_convnet({8, 16}, 32, 10);
  auto plain = make(m, graph_optimization_level::disable);
  auto basic = make(m, graph_optimization_level::basic);
  auto extended = make(m, graph_optimization_level::extended);
  auto all = make(m, graph_optimization_level::all);  // and the CPU provider's blocked layout after partitioning
  CHECK(fusion_kinds(basic.optimizations())["Conv+BatchNormalization"] == 6);
  CHECK(op_counts(basic.get_model().graph)["BatchNormalization"] == 0);
  const auto fused = op_counts(extended.get_model().graph);
  CHECK(fused.count("Conv") == 0);
  CHECK(fused.at("com.microsoft.FusedConv") == 6);
  CHECK(fused.count("Relu") == 0);
  CHECK(fused.count("Add") == 0);  // both residual Adds went into a FusedConv as Z
  CHECK(extended.get_model().opset("com.microsoft") == 1);
  // At `all`, the fused convolutions the blocked kernels run better are in the NCHWc layout; the others (3x3 with
  // unit strides over enough tiles: Winograd) stay FusedConv. Six either way.
  const auto blocked = op_counts(all.get_model().graph);
  CHECK(blocked.at("com.epstack.nchwc16.Conv") >= 1);
  CHECK(blocked.at("com.epstack.nchwc16.Conv") + (blocked.count("com.microsoft.FusedConv") ? blocked.at("com.microsoft.FusedConv") : 0) == 6);
  CHECK(all.get_model().opset("com.epstack.nchwc16") == 1);
  const auto x = zoo::random_tensor({2, 3, 32, 32}, 3, 1.0f);
  auto a = plain.run({{"image", x}});
  auto b = basic.run({{"image", x}});
  auto c = all.run({{"image", x}});
  auto e = extended.run({{"image", x}});
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  REQUIRE_MESSAGE(c.has_value(), c.status().to_string());
  REQUIRE(e.has_value());
  check_same(*a, *b, 1e-5);
  check_same(*a, *c, 1e-5);
  check_same(*a, *e, 1e-5);
}

// Weights mapped from an external data file sit where the writer put them, at any byte offset (onnx's own writer does
// not align them). The fold writes every scaled filter at once on the session's threads, copying an unaligned one
// first; the outputs match the unfolded model's at 1 and 2 threads.
TEST_CASE("Conv+BatchNormalization folds filters mapped from external data at an odd byte offset") {
  graph g("odd");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{2, 32, 10, 10}));
  g.add_initializer("pad3", tensor::from<std::uint8_t>({3}, {1, 2, 3}));  // 3 bytes first: what follows is unaligned
  const auto bn = [&](const std::string& p, std::int64_t c, std::uint64_t seed) {
    for (const char* k : {"_scale", "_bias", "_mean"}) g.add_initializer(p + k, zoo::random_tensor({c}, seed++, 0.5f));
    tensor var = zoo::random_tensor({c}, seed, 0.5f);
    for (std::size_t i = 0; i < var.element_count(); ++i) var.typed<float>()[i] = 0.5f + std::fabs(var.typed<float>()[i]);
    g.add_initializer(p + "_var", std::move(var));
  };
  // At least 64 KiB each: smaller external tensors are read into memory at load, larger ones stay mapped.
  g.add_initializer("w1", zoo::random_tensor({64, 32, 3, 3}, 11, 0.1f));
  g.add_initializer("w2", zoo::random_tensor({64, 64, 3, 3}, 12, 0.1f));
  bn("bn1", 64, 20);
  bn("bn2", 64, 30);
  attribute_list pads;
  pads.set("pads", std::vector<std::int64_t>{1, 1, 1, 1});
  g.add_node(test::op("conv1", "Conv", pads), {"x", "w1"}, {"c1"});
  g.add_node(test::op("norm1", "BatchNormalization"), {"c1", "bn1_scale", "bn1_bias", "bn1_mean", "bn1_var"}, {"n1"});
  g.add_node(test::op("relu1", "Relu"), {"n1"}, {"r1"});
  g.add_node(test::op("conv2", "Conv", pads), {"r1", "w2"}, {"c2"});
  g.add_node(test::op("norm2", "BatchNormalization"), {"c2", "bn2_scale", "bn2_bias", "bn2_mean", "bn2_var"}, {"y"});
  g.add_output("y", type_info::tensor_of(element_type::float32, shape{2, 64, 10, 10}));
  test::temp_dir dir;
  save_options out;
  out.mode = external_data_mode::all_external;
  out.alignment = 1;
  REQUIRE(save_model(wrap(std::move(g)), dir / "odd.onnx", out).is_ok());
  const auto x = zoo::random_tensor({2, 32, 10, 10}, 5, 1.0f);
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    session_options so;
    so.set_intra_op_threads(threads);
    so.set_graph_optimization_level(graph_optimization_level::disable);
    auto plain = cpu_session::create(dir / "odd.onnx", so);
    so.set_graph_optimization_level(graph_optimization_level::basic);
    auto folded = cpu_session::create(dir / "odd.onnx", so);
    REQUIRE_MESSAGE(plain.has_value(), plain.status().to_string());
    REQUIRE_MESSAGE(folded.has_value(), folded.status().to_string());
    // The copy-first path is taken: the filters of the unoptimised model are not 4-byte aligned.
    const auto& pg = plain->get_model().graph;
    int unaligned = 0;
    for (value_id v = 0; v < pg.value_count(); ++v)
      if (const auto& t = pg.value(v).initializer; t && t->rank() == 4 && reinterpret_cast<std::uintptr_t>(t->data()) % 4 != 0) ++unaligned;
    CHECK(unaligned == 2);
    CHECK(fusion_kinds(folded->optimizations())["Conv+BatchNormalization"] == 2);
    auto a = plain->run({{"x", x}});
    auto b = folded->run({{"x", x}});
    REQUIRE(a.has_value());
    REQUIRE(b.has_value());
    check_same(*a, *b, 1e-5);
  }
}

TEST_CASE("a transformer's LayerNorm, residual Add, bias and GELU fuse into contrib ops, same outputs") {
  zoo::transformer_config cfg;
  cfg.layers = 2;
  const auto m = zoo::make_transformer(cfg);
  auto plain = make(m, graph_optimization_level::disable);
  auto all = make(m, graph_optimization_level::all);
  const auto kinds = fusion_kinds(all.optimizations());
  CHECK(kinds.at("LayerNormalization") == 5);        // embeddings + 2 per layer
  // Each residual Add joins the LayerNorm after it. The embeddings' Add does not: the positions are sliced to the
  // sequence's length, [1, ?, hidden] against the tokens' [batch, seq, hidden], a broadcast that shape inference now
  // shows (it lost the Slice's shape before, and the fusion took the Add on trust).
  CHECK(kinds.at("SkipLayerNormalization") == 4);
  CHECK(kinds.at("BiasGelu") == 2);
  const auto ops = op_counts(all.get_model().graph);
  CHECK(ops.count("ReduceMean") == 0);
  CHECK(ops.count("Erf") == 0);
  CHECK(ops.at("com.microsoft.SkipLayerNormalization") == 4);
  CHECK(ops.at("com.microsoft.LayerNormalization") == 1);
  // After partitioning, the CPU provider's products take what follows them: each BiasGelu into the feed-forward
  // MatMul before it, and the Q, K and V bias Adds (a batch and a sequence of unknown sizes: no Gemm through
  // Reshapes before partitioning) into theirs. The attention output's and feed-forward output's biases went into
  // SkipLayerNormalization.
  CHECK(ops.count("com.microsoft.BiasGelu") == 0);
  CHECK(kinds.at("MatMulBias") == 8);
  CHECK(ops.at("com.epstack.cpu.MatMulBias") == 8);
  // And each layer's two attention products take the Transposes around them (Q, K and V into heads, the context
  // out): PermutedMatMul, no Transpose left.
  CHECK(kinds.at("PermutedMatMul") == 4);
  CHECK(ops.at("com.epstack.cpu.PermutedMatMul") == 4);
  CHECK(ops.count("Transpose") == 0);
  tensor ids(element_type::int64, {2, 9});
  for (std::size_t i = 0; i < ids.element_count(); ++i) ids.typed<std::int64_t>()[i] = static_cast<std::int64_t>((i * 37) % 512);
  same_outputs(plain, all, {{"input_ids", ids}}, 1e-4);
}

// Reshapes by shapes an exporter computes (Shape, Gather, Unsqueeze, Concat) become Reshapes by constants at level
// basic: x [b, s, 12] into heads [0, 0, 3, 4] (its own dims at their own places, a scalar index under Unsqueeze and a
// one-element one), and into [12, -1] (x's dim 2 at place 0: not its own place, but inference knows it, so its
// number); not with x's symbolic dim 1 moved to place 0, nor under allowzero 1. The outputs are the nodes' at several
// sizes.
TEST_CASE("Reshape by a shape computed from the data's own Shape becomes Reshape by a constant, same outputs") {
  graph g("reshape_shape");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{dimension("b"), dimension("s"), 12}));
  g.add_initializer("i0", tensor::scalar<std::int64_t>(0));
  g.add_initializer("i1", tensor::from<std::int64_t>({1}, {1}));
  g.add_initializer("i1s", tensor::scalar<std::int64_t>(1));
  g.add_initializer("i2s", tensor::scalar<std::int64_t>(2));
  g.add_initializer("ax0", tensor::from<std::int64_t>({1}, {0}));
  g.add_initializer("c34", tensor::from<std::int64_t>({2}, {3, 4}));
  g.add_initializer("cm1", tensor::from<std::int64_t>({1}, {-1}));
  g.add_initializer("c12", tensor::from<std::int64_t>({1}, {12}));
  g.add_node(test::op("shx", "Shape"), {"x"}, {"sx"});
  g.add_node(test::op("g0", "Gather"), {"sx", "i0"}, {"b0"});
  g.add_node(test::op("u0", "Unsqueeze"), {"b0", "ax0"}, {"b1"});
  g.add_node(test::op("g1", "Gather"), {"sx", "i1"}, {"s1"});
  g.add_node(test::op("cat", "Concat"), {"b1", "s1", "c34"}, {"heads"});
  g.node(g.node_count() - 1).attributes.set("axis", std::int64_t{0});
  g.add_node(test::op("r1", "Reshape"), {"x", "heads"}, {"y1"});  // [0, 0, 3, 4]
  // x's dim 2 (12, known) at place 0, and -1: [12, -1].
  g.add_node(test::op("gz", "Gather"), {"sx", "i2s"}, {"z0"});
  g.add_node(test::op("uz", "Unsqueeze"), {"z0", "ax0"}, {"z1"});
  g.add_node(test::op("cat2", "Concat"), {"z1", "cm1"}, {"five"});
  g.node(g.node_count() - 1).attributes.set("axis", std::int64_t{0});
  g.add_node(test::op("r2", "Reshape"), {"x", "five"}, {"y2"});
  // x's dim 1 (s, symbolic) at place 0: stays computed.
  g.add_node(test::op("gs", "Gather"), {"sx", "i1s"}, {"s0"});
  g.add_node(test::op("us", "Unsqueeze"), {"s0", "ax0"}, {"s2"});
  g.add_node(test::op("cat3", "Concat"), {"s2", "cm1", "c12"}, {"moved"});
  g.node(g.node_count() - 1).attributes.set("axis", std::int64_t{0});
  g.add_node(test::op("r3", "Reshape"), {"x", "moved"}, {"y3"});
  // Another tensor's symbolic dim 0 at place 0 (w [c, s, 12]): never a 0, which would copy x's.
  g.add_input("w", type_info::tensor_of(element_type::float32, shape{dimension("c"), dimension("s"), 12}));
  g.add_node(test::op("shw", "Shape"), {"w"}, {"sw"});
  g.add_node(test::op("gw", "Gather"), {"sw", "i0"}, {"w0"});
  g.add_node(test::op("uw", "Unsqueeze"), {"w0", "ax0"}, {"w1"});
  g.add_node(test::op("cat4", "Concat"), {"w1", "cm1"}, {"other"});
  g.node(g.node_count() - 1).attributes.set("axis", std::int64_t{0});
  g.add_node(test::op("r4", "Reshape"), {"x", "other"}, {"y4"});
  for (const char* y : {"y1", "y2", "y3", "y4"}) g.add_output(y);
  model m = wrap(std::move(g));
  auto plain = make(m, graph_optimization_level::disable);
  auto basic = make(m, graph_optimization_level::basic);
  const auto kinds = fusion_kinds(basic.optimizations());
  CHECK(kinds.count("ReshapeShape") == 1);
  CHECK(kinds.at("ReshapeShape") == 2);
  const auto ops = op_counts(basic.get_model().graph);
  CHECK(ops.at("Reshape") == 4);
  CHECK(ops.at("Concat") == 2);  // r3's and r4's
  CHECK(ops.at("Shape") == 2);   // x's for r3, w's for r4
  CHECK(ops.at("Unsqueeze") == 2);
  const auto& fusions = basic.optimizations().fusions;
  CHECK(std::count(fusions.begin(), fusions.end(), std::string("ReshapeShape: r1 ([0, 0, 3, 4])")) == 1);
  CHECK(std::count(fusions.begin(), fusions.end(), std::string("ReshapeShape: r2 ([12, -1])")) == 1);
  for (const auto& [b, s] : std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 5}, {2, 5}, {1, 10}}) {
    CAPTURE(b);
    CAPTURE(s);
    // w's c is b * s (r4: [b * s, 12]); a 0 in r4's shape would copy b instead.
    auto out = same_outputs(plain, basic, {{"x", zoo::random_tensor({b, s, 12}, 41, 1.0f)}, {"w", zoo::random_tensor({b * s, s, 12}, 43, 1.0f)}}, 0);
    CHECK(out[0].sizes()[0] == b);
    CHECK(out[0].sizes()[3] == 4);
    CHECK(out[1].sizes()[0] == 12);
    CHECK(out[2].sizes()[0] == s);
    CHECK(out[3].sizes()[0] == b * s);
  }
  // allowzero 1 (opset 14): a 0 would be a zero-sized dim, so nothing is fused.
  model m14 = m;
  m14.opsets = {{"", 14}};
  for (node_id n = 0; n < m14.graph.node_count(); ++n)
    if (m14.graph.node(n).op_type == "Reshape") {
      m14.graph.node(n).since_version = 14;
      m14.graph.node(n).attributes.set("allowzero", std::int64_t{1});
    }
  auto basic14 = make(m14, graph_optimization_level::basic);
  CHECK(fusion_kinds(basic14.optimizations()).count("ReshapeShape") == 0);
}

TEST_CASE("the optimised model is saved (optimized_model_filepath), loads back and computes the same") {
  test::temp_dir dir;
  const auto m = zoo::make_transformer();
  session_options so;
  so.set_optimized_model_filepath(dir / "optimized.onnx");
  auto s = cpu_session::create(m, so);
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  auto back = cpu_session::create(dir / "optimized.onnx");
  REQUIRE_MESSAGE(back.has_value(), back.status().to_string());
  // Nothing left to fuse before partitioning (the file is saved before it, as the graph every stack starts from);
  // after it, the CPU provider's products again take their bias and GELU, and the attention's Transposes.
  for (const auto& f : back->optimizations().fusions) CHECK((f.rfind("MatMulBias: ", 0) == 0 || f.rfind("PermutedMatMul: ", 0) == 0));
  CHECK(fusion_kinds(back->optimizations())["MatMulBias"] > 0);
  CHECK(fusion_kinds(back->optimizations())["MatMulBias"] == fusion_kinds(s->optimizations())["MatMulBias"]);
  CHECK(fusion_kinds(back->optimizations())["PermutedMatMul"] == fusion_kinds(s->optimizations())["PermutedMatMul"]);
  tensor ids(element_type::int64, {1, 16});
  for (std::size_t i = 0; i < ids.element_count(); ++i) ids.typed<std::int64_t>()[i] = static_cast<std::int64_t>(i * 5);
  auto a = s->run({{"input_ids", ids}});
  auto b = back->run({{"input_ids", ids}});
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  check_same(*a, *b, 0);
}

TEST_CASE("the optimiser's index follows every edit of its nodes, and is kept only while they are unchanged") {
  graph g("g");
  const auto f = type_info::tensor_of(element_type::float32, shape{2});
  g.add_input("x", f);
  g.add_node(test::op("a", "Relu"), {"x"}, {"y1"});
  g.add_node(test::op("b", "Neg"), {"y1"}, {"y2"});
  g.add_output("y2", f);
  auto made = opt::to_egraph(g);
  REQUIRE_MESSAGE(made.has_value(), made.status().to_string());
  opt::egraph& e = *made;
  const auto consumers = [&](const std::string& v) {
    auto it = e.consumers.find(v);
    return it == e.consumers.end() ? std::vector<std::size_t>{} : it->second;
  };
  REQUIRE(e.nodes.size() == 2);
  CHECK(e.producer.at("y1") == 0);
  CHECK(consumers("y1") == std::vector<std::size_t>{1});
  e.index();  // nothing changed: the same maps
  CHECK(e.producer.at("y2") == 1);
  CHECK(consumers("x") == std::vector<std::size_t>{0});

  // An input changed in place: the next index() sees it.
  e.nodes[1].inputs[0] = "x";
  e.index();
  CHECK(consumers("x") == std::vector<std::size_t>{0, 1});
  CHECK(consumers("y1").empty());
  CHECK(e.uses("y1") == 0);

  // A name changed for one of the same length: the nodes are compared in full, not by their sizes.
  e.nodes[0].outputs[0] = "z1";
  e.index();
  CHECK(e.producer.count("y1") == 0);
  CHECK(e.producer.at("z1") == 0);
  e.nodes[1].inputs[0] = "z1";
  e.index();
  CHECK(consumers("z1") == std::vector<std::size_t>{1});
  CHECK(consumers("x") == std::vector<std::size_t>{0});

  // A node marked dead leaves the index.
  e.nodes[0].dead = true;
  e.index();
  CHECK(e.producer.count("z1") == 0);
  CHECK(consumers("x").empty());

  // Edited by hand (unindex) and given back unchanged: index() builds anew rather than keep the edited maps.
  e.nodes[0].dead = false;
  e.index();
  CHECK(e.producer.at("z1") == 0);
  e.unindex(0);
  CHECK(e.producer.count("z1") == 0);
  e.index();
  CHECK(e.producer.at("z1") == 0);
  CHECK(consumers("x") == std::vector<std::size_t>{0});

  // A node added at the end, and one more input on an existing node.
  opt::enode extra;
  extra.n = test::op("c", "Abs");
  extra.inputs = {"y2"};
  extra.outputs = {"y3"};
  e.nodes.push_back(std::move(extra));
  e.nodes[1].inputs.push_back("x");
  e.index();
  CHECK(e.producer.at("y3") == 2);
  CHECK(consumers("y2") == std::vector<std::size_t>{2});
  CHECK(consumers("x") == std::vector<std::size_t>{0, 1});
}

TEST_CASE("values a subgraph uses are neither removed nor fused away") {
  graph then_g("then");
  then_g.add_node(test::op("t", "Neg"), {"kept"}, {"t_out"});
  then_g.add_output("t_out", type_info::tensor_of(element_type::float32, shape{2}));
  graph else_g("else");
  else_g.add_node(test::op("e", "Abs"), {"kept"}, {"e_out"});
  else_g.add_output("e_out", type_info::tensor_of(element_type::float32, shape{2}));
  graph g("outer");
  g.add_input("c", type_info::tensor_of(element_type::boolean, shape{}));
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{2}));
  g.add_node(test::op("id", "Identity"), {"x"}, {"kept"});  // only the branches use it
  attribute_list attrs;
  attrs.set("then_branch", make_subgraph(std::move(then_g)));
  attrs.set("else_branch", make_subgraph(std::move(else_g)));
  g.add_node(test::op("if", "If", std::move(attrs)), {"c"}, {"y"});
  g.add_output("y");
  auto s = make(wrap(std::move(g)), graph_optimization_level::all);
  CHECK(op_counts(s.get_model().graph).at("Identity") == 1);
  auto r = s.run({{"c", tensor::scalar(true)}, {"x", tensor::from<float>({2}, {1, -2})}});
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  CHECK((*r)[0].typed<float>()[0] == -1.0f);
  CHECK((*r)[0].typed<float>()[1] == 2.0f);
}

TEST_CASE("SequenceMap runs as its function body, whose Loop refers to the node's inputs by the function's names") {
  // onnx builds SequenceMap's body as a Loop over the sequence; the Loop's body reads the sequence and the extra
  // tensor input from the enclosing scope by their names in the FunctionProto, which expansion must rename too.
  const auto make_model = [](const std::string& body_input) {
    graph body("body");
    body.add_input("x", type_info::tensor_of(element_type::float32, shape{2}));
    body.add_input(body_input, type_info::tensor_of(element_type::float32, shape{2}));
    body.add_node(test::op("add", "Add"), {"x", body_input}, {"y"});
    body.add_output("y", type_info::tensor_of(element_type::float32, shape{2}));
    graph g("sequence_map");
    g.add_input("s", type_info::sequence_of(type_info::tensor_of(element_type::float32, shape{2})));
    g.add_input("t", type_info::tensor_of(element_type::float32, shape{2}));
    attribute_list attrs;
    attrs.set("body", make_subgraph(std::move(body)));
    g.add_node(test::op("map", "SequenceMap", std::move(attrs)), {"s", "t"}, {"out"});
    g.add_output("out", type_info::sequence_of(type_info::tensor_of(element_type::float32, shape{2})));
    model m = wrap(std::move(g));
    m.opsets = {{"", 17}};
    return m;
  };
  // onnx's builder names the Loop body's copy of an extra input after the body's input, so a body input named like
  // the node's actual input makes Identity(t) -> t inside the Loop: a clean invalid_graph, not a crash.
  auto clash = cpu_session::create(make_model("t"));
  REQUIRE_FALSE(clash.has_value());
  CHECK(clash.code() == errc::invalid_graph);
  CHECK_MESSAGE(clash.status().message().find("cycle") != std::string::npos, clash.status().message());
  auto s = cpu_session::create(make_model("bt"));
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  CHECK(op_counts(s->get_model().graph).count("SequenceMap") == 0);
  tensor_sequence seq{element_type::float32, {tensor::from<float>({2}, {1, 2}), tensor::from<float>({2}, {-3, 4}),
                                              tensor::from<float>({2}, {0.5f, 0})}};
  const std::vector<named_value> feeds{{"s", ivalue(seq)}, {"t", ivalue(tensor::from<float>({2}, {10, 20}))}};
  auto r = s->run_values(feeds);
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  REQUIRE((*r)[0].is_sequence());
  const auto& items = (*r)[0].as_sequence().items;
  REQUIRE(items.size() == 3);
  const float want[3][2] = {{11, 22}, {7, 24}, {10.5f, 20}};
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t k = 0; k < 2; ++k) CHECK(items[i].typed<float>()[k] == want[i][k]);
}

TEST_CASE("function operators no provider takes run as their function bodies (the onnx package's and the model's)") {
  // Celu (a function of opset 12) and MeanVarianceNormalization (13): the CPU provider has no kernel for either.
  graph g("functions");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{1, 2, 1, 3}));
  attribute_list celu;
  celu.set("alpha", 2.0f);
  g.add_node(test::op("celu", "Celu", celu), {"x"}, {"c"});
  g.add_node(test::op("mvn", "MeanVarianceNormalization"), {"c"}, {"y"});
  g.add_output("y");
  const auto m = wrap(std::move(g));
  auto s = cpu_session::create(m);
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  const auto ops = op_counts(s->get_model().graph);
  CHECK(ops.count("Celu") == 0);
  CHECK(ops.count("MeanVarianceNormalization") == 0);
  const std::vector<float> x{-2.0f, -0.5f, 0.0f, 0.5f, 1.0f, 3.0f};
  auto r = s->run({{"x", tensor::from<float>({1, 2, 1, 3}, {-2.0f, -0.5f, 0.0f, 0.5f, 1.0f, 3.0f})}});
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  // Reference: celu(v) = max(0, v) + min(0, alpha * (exp(v / alpha) - 1)); MVN over axes [0, 2, 3]: per channel.
  std::vector<double> c(6);
  for (int i = 0; i < 6; ++i) c[i] = std::max(0.0, double(x[i])) + std::min(0.0, 2.0 * (std::exp(x[i] / 2.0) - 1));
  for (int ch = 0; ch < 2; ++ch) {
    double mean = 0, sq = 0;
    for (int k = 0; k < 3; ++k) mean += c[ch * 3 + k] / 3;
    for (int k = 0; k < 3; ++k) sq += (c[ch * 3 + k] - mean) * (c[ch * 3 + k] - mean) / 3;
    for (int k = 0; k < 3; ++k)
      CHECK((*r)[0].typed<float>()[ch * 3 + k] == doctest::Approx((c[ch * 3 + k] - mean) / std::sqrt(sq + 1e-9)).epsilon(1e-4));
  }
}

TEST_CASE("a Reshape to a target computed from shapes gets the target's sizes and symbols at load") {
  // As exporters split heads: Reshape(x, Concat(batch, seq, 2, 4)) with batch and seq gathered from Shape(x). onnx
  // 1.12 reads Reshape's target from initializers only; data propagation knows it here.
  graph g("heads");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{dimension("batch"), dimension("seq"), 8}));
  g.add_input("t", type_info::tensor_of(element_type::int64, shape{3}));  // a target no shape gives: rank only
  g.add_initializer("i0", tensor::from<std::int64_t>({}, {0}));
  g.add_initializer("i1", tensor::from<std::int64_t>({}, {1}));
  g.add_initializer("ax", tensor::from<std::int64_t>({1}, {0}));
  g.add_initializer("heads", tensor::from<std::int64_t>({2}, {2, 4}));
  g.add_node(test::op("shape", "Shape"), {"x"}, {"s"});
  g.add_node(test::op("g0", "Gather"), {"s", "i0"}, {"b"});
  g.add_node(test::op("g1", "Gather"), {"s", "i1"}, {"n"});
  g.add_node(test::op("u0", "Unsqueeze"), {"b", "ax"}, {"b1"});
  g.add_node(test::op("u1", "Unsqueeze"), {"n", "ax"}, {"n1"});
  g.add_node(test::op("cat", "Concat", [] {
               attribute_list a;
               a.set("axis", std::int64_t{0});
               return a;
             }()),
             {"b1", "n1", "heads"}, {"target"});
  g.add_node(test::op("split", "Reshape"), {"x", "target"}, {"y"});
  g.add_node(test::op("any", "Reshape"), {"x", "t"}, {"z"});
  g.add_output("y");
  g.add_output("z");
  auto m = wrap(std::move(g));
  REQUIRE(infer_shapes(m).is_ok());
  const auto& y = m.graph.value(m.graph.find_value("y")).type;
  REQUIRE(y.dims.has_value());
  REQUIRE(y.dims->rank() == 4);
  CHECK((*y.dims)[0].param == "batch");
  CHECK((*y.dims)[1].param == "seq");
  CHECK((*y.dims)[2].value == 2);
  CHECK((*y.dims)[3].value == 4);
  const auto& z = m.graph.value(m.graph.find_value("z")).type;
  REQUIRE(z.dims.has_value());
  CHECK(z.dims->rank() == 3);
  CHECK_FALSE(z.dims->is_static());
  // The session runs both, at any batch and length.
  auto s = make(m, graph_optimization_level::all);
  const auto x = zoo::random_tensor({3, 5, 8}, 4, 1.0f);
  auto r = s.run({{"x", x}, {"t", tensor::from<std::int64_t>({3}, {5, 3, 8})}});
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  CHECK(std::vector<std::int64_t>((*r)[0].sizes().begin(), (*r)[0].sizes().end()) == std::vector<std::int64_t>{3, 5, 2, 4});
  CHECK(std::vector<std::int64_t>((*r)[1].sizes().begin(), (*r)[1].sizes().end()) == std::vector<std::int64_t>{5, 3, 8});
}

TEST_CASE("a Shape node on a dimension inference named itself folds once the computation behind that dimension folds") {
  // GPT-2's decode step as exported (one token): the position Slice's length is a symbol nobody declared (no graph
  // input has it), broadcast with the token's 1 it stays in the hidden state's shape, and the attention's Shape ->
  // Gather -> Unsqueeze -> Concat -> Reshape chains read it. At fixed input sizes the
  // Slice folds, inference sizes what follows, and the Shape chains fold too (they ran on every step before).
  graph g = positions_graph("made_up_symbol", shape{1, 1});
  g.add_initializer("minus1", tensor::from<std::int64_t>({1}, {-1}));
  g.add_node(test::op("shape_h", "Shape"), {"h"}, {"hs"});
  g.add_node(test::op("gather_seq", "Gather"), {"hs", "one"}, {"seq"});
  g.add_node(test::op("unsqueeze_seq", "Unsqueeze"), {"seq", "zero1"}, {"seq1"});
  attribute_list axis0;
  axis0.set("axis", std::int64_t{0});
  g.add_node(test::op("concat", "Concat", std::move(axis0)), {"seq1", "minus1"}, {"target"});
  g.add_node(test::op("reshape", "Reshape"), {"h", "target"}, {"y"});
  g.add_output("y");
  // The exporter's value_info: the Slice's length is a symbol of its own.
  const auto pv = g.find_value("p");
  g.value(pv).type = type_info::tensor_of(element_type::int64, shape{"unk__0"});
  g.value(pv).in_value_info = true;
  const auto m = wrap(std::move(g));
  auto loaded = m;
  REQUIRE(infer_shapes(loaded));
  const auto& ht = loaded.graph.value(loaded.graph.find_value("h")).type;
  REQUIRE(ht.dims.has_value());
  REQUIRE_FALSE(ht.dims->is_static());  // what the Shape node reads is not sized at load

  auto plain = make(m, graph_optimization_level::disable);
  auto all = make(m, graph_optimization_level::all);
  const auto ops = op_counts(all.get_model().graph);
  CHECK(ops.count("Shape") == 0);
  CHECK(ops.count("Concat") == 0);
  CHECK(ops.count("Unsqueeze") == 0);
  const auto ids = tensor::from<std::int64_t>({1, 1}, {5});
  auto a = plain.run({{"ids", ids}});
  auto b = all.run({{"ids", ids}});
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  REQUIRE((*b)[0].rank() == 2);
  CHECK((*b)[0].sizes()[0] == 1);
  CHECK((*b)[0].sizes()[1] == 8);
  check_same(*a, *b, 1e-6);
}

TEST_CASE("shapes inference could not size become known once folding makes their inputs constant") {
  // As exporters write position ids: Slice(positions, 0, Unsqueeze(Gather(Shape(ids), 1))). onnx's inference does not
  // read a computed Slice end, so everything after it is unsized at load; on a static input the chain folds, shapes are
  // inferred again, and the rest folds or gets its shape (the partitioner prices nodes by it).
  graph g = positions_graph("positions", shape{1, 4});
  std::vector<float> w(8 * 8);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) * 0.125f - 0.25f;
  g.add_initializer("w", tensor::from<float>(std::vector<std::int64_t>{8, 8}, std::span<const float>(w)));
  g.add_node(test::op("proj", "MatMul"), {"h", "w"}, {"y"});
  g.add_output("y");
  const auto m = wrap(std::move(g));
  // At load, inference knows the Slice's rank but not its length (its end comes from a Shape).
  auto loaded = m;
  REQUIRE(infer_shapes(loaded));
  const auto& lg = loaded.graph;
  const auto& p_type = lg.value(lg.find_value("p")).type;
  REQUIRE(p_type.dims.has_value());
  CHECK(p_type.dims->rank() == 1);
  REQUIRE_FALSE(p_type.dims->is_static());

  auto plain = make(m, graph_optimization_level::disable);
  auto all = make(m, graph_optimization_level::all);
  const auto& og = all.get_model().graph;
  const auto ops = op_counts(og);
  CHECK(ops.count("Shape") == 0);
  CHECK(ops.count("Slice") == 0);
  CHECK(ops.count("Unsqueeze") == 0);
  CHECK(all.optimizations().constant_folded >= 4);  // Gather, Unsqueeze, Slice, the positions' Gather
  for (const char* name : {"h", "t"}) {
    INFO(name);
    const auto v = og.find_value(name);
    REQUIRE(v != no_id);
    const auto& t = og.value(v).type;
    REQUIRE(t.dims.has_value());
    REQUIRE(t.dims->is_static());
    const auto sizes = *t.dims->sizes();
    CHECK(std::vector<std::int64_t>(sizes.begin(), sizes.end()) == std::vector<std::int64_t>{1, 4, 8});
  }
  const auto ids = tensor::from<std::int64_t>({1, 4}, {3, 0, 15, 7});
  auto a = plain.run({{"ids", ids}});
  auto b = all.run({{"ids", ids}});
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  check_same(*a, *b, 1e-6);
}

TEST_CASE("extended: a 2-D Transpose feeding only a Gemm becomes its transA (or transB), and the outputs stay the same") {
  graph g("transposed");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{6, 5}));  // read as [5, 6] after the Transpose
  g.add_input("y", type_info::tensor_of(element_type::float32, shape{3, 4}));
  std::vector<float> w(6 * 4), bias(4), w2(5 * 3);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i) * 0.5f;
  for (std::size_t i = 0; i < w2.size(); ++i) w2[i] = static_cast<float>(i % 5) * 0.5f - 1.0f;
  g.add_initializer("w", tensor::from<float>(std::vector<std::int64_t>{6, 4}, std::span<const float>(w)));
  g.add_initializer("bias", tensor::from<float>(std::vector<std::int64_t>{4}, std::span<const float>(bias)));
  g.add_initializer("w2", tensor::from<float>(std::vector<std::int64_t>{5, 3}, std::span<const float>(w2)));
  attribute_list perm;
  perm.set("perm", std::vector<std::int64_t>{1, 0});
  g.add_node(test::op("t", "Transpose", perm), {"x"}, {"xt"});
  g.add_node(test::op("mm", "MatMul"), {"xt", "w"}, {"p"});
  g.add_node(test::op("add", "Add"), {"p", "bias"}, {"out"});
  // A Gemm whose B is a transposed activation, already with transB = 1: the flag flips back to 0.
  g.add_node(test::op("ty", "Transpose"), {"y"}, {"yt"});  // no perm: reversed axes, [4, 3]
  attribute_list trans_b;
  trans_b.set("transB", std::int64_t{1});
  g.add_node(test::op("gm", "Gemm", trans_b), {"w2", "yt"}, {"out2"});  // [5,3] x [3,4]
  // A Transpose with a second consumer stays.
  g.add_node(test::op("t2", "Transpose"), {"x"}, {"xt2"});
  g.add_node(test::op("neg", "Neg"), {"xt2"}, {"n"});
  g.add_node(test::op("g3", "Gemm"), {"xt2", "w"}, {"out3"});
  g.add_output("out");
  g.add_output("out2");
  g.add_output("n");
  g.add_output("out3");
  const auto m = wrap(std::move(g));
  auto plain = make(m, graph_optimization_level::disable);
  auto all = make(m, graph_optimization_level::all);
  const auto& og = all.get_model().graph;
  CHECK(op_counts(og)["Transpose"] == 1);  // only the shared one
  CHECK(fusion_kinds(all.optimizations())["GemmTranspose"] == 2);
  for (node_id n = 0; n < og.node_count(); ++n) {
    const auto& nd = og.node(n);
    if (nd.op_type != "Gemm") continue;
    const auto* ta = nd.attributes.find("transA");
    const auto* tb = nd.attributes.find("transB");
    const auto flag = [](const auto* a) { return a != nullptr ? std::get<std::int64_t>(a->value) : 0; };
    if (nd.name == "mm") CHECK((flag(ta) == 1 && flag(tb) == 0));
    if (nd.name == "gm") CHECK((flag(ta) == 0 && flag(tb) == 0));
    if (nd.name == "g3") CHECK((flag(ta) == 0 && flag(tb) == 0));
  }
  std::vector<float> xv(30), yv(12);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i % 9) * 0.5f - 2.0f;
  for (std::size_t i = 0; i < yv.size(); ++i) yv[i] = static_cast<float>(i % 4) - 1.5f;
  const auto x = tensor::from<float>(std::vector<std::int64_t>{6, 5}, std::span<const float>(xv));
  const auto y = tensor::from<float>(std::vector<std::int64_t>{3, 4}, std::span<const float>(yv));
  same_outputs(plain, all, {{"x", x}, {"y", y}}, 1e-5);
}

TEST_CASE("extended: an Einsum that is one matrix product per batch becomes FusedMatMul, with the same outputs") {
  struct form {
    const char* eq;
    std::vector<std::int64_t> a, b;
    bool rewritten;
  };
  const std::vector<form> forms{
      {"nd,kd->nk", {5, 4}, {3, 4}, true},               // B read transposed
      {"ij,jk->ik", {5, 4}, {4, 3}, true},
      {"ji,jk->ik", {4, 5}, {4, 3}, true},               // A read transposed
      {"bhid,bhjd->bhij", {2, 3, 5, 4}, {2, 3, 6, 4}, true},  // attention scores
      {"bij,bjk->bki", {2, 5, 4}, {2, 4, 3}, true},      // the product transposed: B^T A^T
      {"ibj,bjk->bik", {5, 2, 4}, {2, 4, 3}, false},     // batch labels not leading in A
      {"ij,jk", {5, 4}, {4, 3}, false},                  // implicit output
      {"ij,ij->ij", {5, 4}, {5, 4}, false},              // no sum: an element-wise product
  };
  graph g("einsums");
  std::vector<named_tensor> feeds;
  for (std::size_t f = 0; f < forms.size(); ++f) {
    const auto& fm = forms[f];
    const std::string a = "a" + std::to_string(f), b = "b" + std::to_string(f), y = "y" + std::to_string(f);
    std::vector<dimension> ad(fm.a.begin(), fm.a.end());
    g.add_input(a, type_info::tensor_of(element_type::float32, shape(ad)));
    tensor bt(element_type::float32, fm.b);
    for (std::size_t i = 0; i < bt.element_count(); ++i) bt.typed<float>()[i] = static_cast<float>((i * 7 + f) % 11) * 0.2f - 1.0f;
    if (f % 2 == 0) {
      g.add_initializer(b, std::move(bt));  // constant B (weights) for half of them
    } else {
      std::vector<dimension> bd(fm.b.begin(), fm.b.end());
      g.add_input(b, type_info::tensor_of(element_type::float32, shape(bd)));
      feeds.push_back({b, std::move(bt)});
    }
    attribute_list eq;
    eq.set("equation", std::string(fm.eq));
    g.add_node(test::op("einsum" + std::to_string(f), "Einsum", eq), {a, b}, {y});
    g.add_output(y);
    tensor at(element_type::float32, fm.a);
    for (std::size_t i = 0; i < at.element_count(); ++i) at.typed<float>()[i] = static_cast<float>((i * 5 + f) % 13) * 0.15f - 0.9f;
    feeds.push_back({a, std::move(at)});
  }
  model m = wrap(std::move(g));
  m.opsets = {{"", 13}};
  auto plain = make(m, graph_optimization_level::disable);
  auto all = make(m, graph_optimization_level::all);
  const auto& og = all.get_model().graph;
  std::size_t expect = 0;
  for (const auto& fm : forms) expect += fm.rewritten ? 1 : 0;
  CHECK(static_cast<std::size_t>(op_counts(og)["com.microsoft.FusedMatMul"]) == expect);
  CHECK(static_cast<std::size_t>(op_counts(og)["Einsum"]) == forms.size() - expect);
  for (node_id n = 0; n < og.node_count(); ++n) {
    const auto& nd = og.node(n);
    const auto f = static_cast<std::size_t>(std::stoi(nd.name.substr(6)));
    CAPTURE(forms[f].eq);
    CHECK((nd.op_type == "FusedMatMul") == forms[f].rewritten);
  }
  same_outputs(plain, all, feeds, 1e-5);
}

TEST_CASE("extended: MatMul + bias Add becomes Gemm, through Reshape views for an A of higher rank with one unsized dim at most") {
  std::vector<float> w(8 * 5), bias(5);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 9) * 0.125f - 0.5f;
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i) - 2.0f;
  graph g("matmul_add");
  const auto f32 = [](std::vector<dimension> d) { return type_info::tensor_of(element_type::float32, shape(std::move(d))); };
  g.add_input("x", f32({2, 3, 8}));             // every size known
  g.add_input("xb", f32({"batch", 3, 8}));      // a dynamic batch: -1 in both Reshapes
  g.add_input("xs", f32({"batch", "seq", 8}));  // two unsized: left alone
  g.add_initializer("w", tensor::from<float>(std::vector<std::int64_t>{8, 5}, std::span<const float>(w)));
  g.add_initializer("b", tensor::from<float>(std::vector<std::int64_t>{5}, std::span<const float>(bias)));
  g.add_initializer("b_row", tensor::from<float>(std::vector<std::int64_t>{1, 5}, std::span<const float>(bias)));
  g.add_node(test::op("mm", "MatMul"), {"x", "w"}, {"m"});
  g.add_node(test::op("add", "Add"), {"b", "m"}, {"y"});  // the bias first
  g.add_node(test::op("mm_b", "MatMul"), {"xb", "w"}, {"mb"});
  g.add_node(test::op("add_b", "Add"), {"mb", "b"}, {"yb"});
  g.add_node(test::op("mm_s", "MatMul"), {"xs", "w"}, {"ms"});
  g.add_node(test::op("add_s", "Add"), {"ms", "b"}, {"ys"});
  g.add_node(test::op("mm_r", "MatMul"), {"x", "w"}, {"mr"});
  g.add_node(test::op("add_r", "Add"), {"mr", "b_row"}, {"yr"});  // a [1, N] bias: a Gemm C, but not through Reshape
  for (const char* o : {"y", "yb", "ys", "yr"}) g.add_output(o);
  const model m = wrap(std::move(g));
  auto plain = make(m, graph_optimization_level::disable);
  auto all = make(m, graph_optimization_level::all);
  const auto& og = all.get_model().graph;
  CHECK(fusion_kinds(all.optimizations())["Gemm"] == 2);
  const auto ops = op_counts(og);
  CHECK(ops.at("Gemm") == 2);
  CHECK(ops.at("Reshape") == 4);
  // The two left alone become the CPU provider's MatMulBias after partitioning (a bias over the columns, of any rank
  // that keeps the product's shape).
  CHECK(ops.count("MatMul") == 0);
  CHECK(ops.count("Add") == 0);
  CHECK(ops.at("com.epstack.cpu.MatMulBias") == 2);
  bool reported = false;
  for (const auto& f : all.optimizations().fusions) reported = reported || f == "Gemm: mm_b + add_b (A [batch, 3, 8] as [batch*3, 8])";
  CHECK(reported);
  // The flattened product's types: [6, 5] and [batch*3, 5].
  for (node_id n = 0; n < og.node_count(); ++n) {
    if (og.node(n).op_type != "Gemm") continue;
    const auto& t = og.value(og.node(n).outputs[0]).type;
    REQUIRE(t.dims.has_value());
    REQUIRE(t.dims->rank() == 2);
    CHECK((*t.dims)[1].value == 5);
    if (og.node(n).name == "mm") CHECK((*t.dims)[0].value == 6);
    else CHECK((*t.dims)[0].param == "batch*3");
  }
  for (std::int64_t batch : {2, 1, 0}) {
    CAPTURE(batch);
    const std::vector<named_tensor> in{{"x", zoo::random_tensor({2, 3, 8}, 1, 1.0f)},
                                       {"xb", zoo::random_tensor({batch, 3, 8}, 2, 1.0f)},
                                       {"xs", zoo::random_tensor({1, 2, 8}, 3, 1.0f)}};
    const auto out = same_outputs(plain, all, in, 1e-5);
    CHECK(out[1].sizes()[0] == batch);
  }
}

TEST_CASE("extended: constant scalar scales around a MatMul become FusedMatMul's alpha (MatMulScaleFusion), same outputs") {
  graph g("matmul_scale");
  const auto f32 = [](std::vector<dimension> d) { return type_info::tensor_of(element_type::float32, shape(std::move(d))); };
  const auto scalar = [&](const char* name, std::vector<std::int64_t> dims, float v) {
    g.add_initializer(name, tensor::from<float>(dims, std::span<const float>(&v, 1)));
  };
  g.add_input("q", f32({2, 3, 4}));
  g.add_input("k", f32({2, 4, 5}));
  g.add_input("x", f32({3, 4}));
  g.add_initializer("w", zoo::random_tensor({4, 5}, 7, 1.0f));
  g.add_initializer("row", zoo::random_tensor({1, 5}, 8, 1.0f));
  scalar("eight", {}, 8.0f);
  scalar("two", {1}, 2.0f);
  scalar("three", {}, 3.0f);
  scalar("zero", {}, 0.0f);
  scalar("deep", {1, 1, 1}, 0.5f);
  // Fused: scores / 8 (the divisor after the product).
  g.add_node(test::op("scores", "MatMul"), {"q", "k"}, {"qk"});
  g.add_node(test::op("scale", "Div"), {"qk", "eight"}, {"y_scores"});
  // Fused: (x * [2]) @ w, then 3 * (.): alpha 6; the leading Mul stays, as another output reads it.
  g.add_node(test::op("pre", "Mul"), {"x", "two"}, {"x2"});
  g.add_node(test::op("both", "MatMul"), {"x2", "w"}, {"xw"});
  g.add_node(test::op("post", "Mul"), {"three", "xw"}, {"y_both"});
  // Left alone: the scale is the dividend; the product is read twice; the constant is a row, not a scalar; it would
  // broadcast the product to rank 3; it is 0.
  g.add_node(test::op("mm_num", "MatMul"), {"x", "w"}, {"p_num"});
  g.add_node(test::op("num", "Div"), {"eight", "p_num"}, {"y_num"});
  g.add_node(test::op("mm_twice", "MatMul"), {"x", "w"}, {"y_twice"});
  g.add_node(test::op("twice", "Mul"), {"y_twice", "eight"}, {"y_twice8"});
  g.add_node(test::op("mm_row", "MatMul"), {"x", "w"}, {"p_row"});
  g.add_node(test::op("rowmul", "Mul"), {"p_row", "row"}, {"y_row"});
  g.add_node(test::op("mm_deep", "MatMul"), {"x", "w"}, {"p_deep"});
  g.add_node(test::op("deepmul", "Mul"), {"p_deep", "deep"}, {"y_deep"});
  g.add_node(test::op("mm_zero", "MatMul"), {"x", "w"}, {"p_zero"});
  g.add_node(test::op("zeromul", "Mul"), {"p_zero", "zero"}, {"y_zero"});
  for (const char* o : {"y_scores", "x2", "y_both", "y_num", "y_twice", "y_twice8", "y_row", "y_deep", "y_zero"}) g.add_output(o);
  const model m = wrap(std::move(g));
  auto plain = make(m, graph_optimization_level::disable);
  auto all = make(m, graph_optimization_level::all);
  const auto& og = all.get_model().graph;
  CHECK(fusion_kinds(all.optimizations())["MatMulScale"] == 2);
  const auto ops = op_counts(og);
  CHECK(ops.at("com.microsoft.FusedMatMul") == 2);
  CHECK(ops.at("MatMul") == 5);
  CHECK(ops.count("Div") == 1);  // the dividend
  CHECK(ops.at("Mul") == 5);     // pre (still read), twice, rowmul, deepmul, zeromul
  std::map<std::string, float> alpha;
  for (node_id n = 0; n < og.node_count(); ++n)
    if (og.node(n).op_type == "FusedMatMul") alpha[og.node(n).name] = attr_f(og.node(n), "alpha", 1.0f);
  CHECK(alpha.at("scores") == 0.125f);
  CHECK(alpha.at("both") == 6.0f);
  std::set<std::string> reported(all.optimizations().fusions.begin(), all.optimizations().fusions.end());
  CHECK(reported.count("MatMulScale: scores + scale (alpha 0.125)") == 1);
  CHECK(reported.count("MatMulScale: both + pre + post (alpha 6)") == 1);
  const std::vector<named_tensor> in{{"q", zoo::random_tensor({2, 3, 4}, 1, 1.0f)},
                                     {"k", zoo::random_tensor({2, 4, 5}, 2, 1.0f)},
                                     {"x", zoo::random_tensor({3, 4}, 3, 1.0f)}};
  const auto out = same_outputs(plain, all, in, 1e-5);
  CHECK(out[7].rank() == 3);  // y_deep: the rank-3 constant broadcast the product
}

TEST_CASE("extended: a FusedMatMul's alpha takes in the scale after it, and keeps its transposes") {
  graph g("fused_scale");
  const auto f32 = [](std::vector<dimension> d) { return type_info::tensor_of(element_type::float32, shape(std::move(d))); };
  g.add_input("a", f32({3, 4}));
  g.add_input("b", f32({5, 4}));
  const float quarter = 0.25f;
  g.add_initializer("quarter", tensor::from<float>(std::vector<std::int64_t>{}, std::span<const float>(&quarter, 1)));
  attribute_list at;
  at.set("transB", std::int64_t{1});
  at.set("alpha", 2.0f);
  node fm = test::op("fm", "FusedMatMul", at);
  fm.domain = "com.microsoft";
  g.add_node(std::move(fm), {"a", "b"}, {"p"});
  g.value(g.find_value("p")).type = f32({3, 5});  // (inference knows no contrib operator; the Div needs a type)
  g.add_node(test::op("div", "Div"), {"p", "quarter"}, {"y"});  // * 4
  g.add_output("y");
  model m = wrap(std::move(g));
  m.opsets = {{"", 13}, {"com.microsoft", 1}};
  auto plain = make(m, graph_optimization_level::disable);
  auto all = make(m, graph_optimization_level::all);
  const auto& og = all.get_model().graph;
  REQUIRE(og.node_count() == 1);
  CHECK(og.node(0).op_type == "FusedMatMul");
  CHECK(attr_f(og.node(0), "alpha", 1.0f) == 8.0f);
  CHECK(attr_i(og.node(0), "transB", 0) == 1);
  const std::vector<named_tensor> in{{"a", zoo::random_tensor({3, 4}, 4, 1.0f)}, {"b", zoo::random_tensor({5, 4}, 5, 1.0f)}};
  same_outputs(plain, all, in, 1e-5);
}

TEST_CASE("folding and inference repeat until nothing changes: twelve chained shape computations fold whole") {
  // Each block reshapes to [1, Gather(Shape(h), 1), 8]: inference cannot size a Reshape whose shape is computed, so
  // each block's Shape folds only after the block before it has (a transformer's per-layer head reshapes).
  graph g("chain");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{1, 4, 8}));
  g.add_initializer("one", tensor::from<std::int64_t>({}, {1}));
  g.add_initializer("zero1", tensor::from<std::int64_t>({1}, {0}));
  g.add_initializer("lead", tensor::from<std::int64_t>({1}, {1}));
  g.add_initializer("last", tensor::from<std::int64_t>({1}, {8}));
  std::string h = "x";
  for (int k = 0; k < 12; ++k) {
    const std::string p = "b" + std::to_string(k) + "_";
    g.add_node(test::op(p + "shape", "Shape"), {h}, {p + "s"});
    g.add_node(test::op(p + "gather", "Gather"), {p + "s", "one"}, {p + "n"});
    g.add_node(test::op(p + "unsqueeze", "Unsqueeze"), {p + "n", "zero1"}, {p + "n1"});
    g.add_node(test::op(p + "concat", "Concat", [] {
                 attribute_list a;
                 attribute ax;
                 ax.name = "axis";
                 ax.value = std::int64_t{0};
                 a.set(ax);
                 return a;
               }()),
               {"lead", p + "n1", "last"}, {p + "shape_to"});
    g.add_node(test::op(p + "relu", "Relu"), {h}, {p + "r"});
    g.add_node(test::op(p + "reshape", "Reshape"), {p + "r", p + "shape_to"}, {p + "h"});
    h = p + "h";
  }
  g.add_output(h);
  const model m = wrap(std::move(g));
  auto plain = make(m, graph_optimization_level::disable);
  auto all = make(m, graph_optimization_level::all);
  const auto& og = all.get_model().graph;
  const auto ops = op_counts(og);
  CHECK(ops.count("Shape") == 0);
  CHECK(ops.count("Concat") == 0);
  const auto& t = og.value(og.find_value(h)).type;
  REQUIRE(t.dims.has_value());
  REQUIRE(t.dims->is_static());
  const auto sizes = *t.dims->sizes();
  CHECK(std::vector<std::int64_t>(sizes.begin(), sizes.end()) == std::vector<std::int64_t>{1, 4, 8});
  const std::vector<named_tensor> in{{"x", zoo::random_tensor({1, 4, 8}, 4, 1.0f)}};
  same_outputs(plain, all, in, 0);
}
