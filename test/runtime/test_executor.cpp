// The executor: memory planning and reuse, outputs that never alias session memory, control flow with subgraphs
// and outer-scope values, failures in the middle of a run.
#include <epstack/testing/model_zoo.hpp>
#include <epstack/providers/cpu.hpp>
#include <epstack/runtime/session.hpp>

#include "../support/compare.hpp"
#include "../support/graphs.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <numeric>
#include <optional>

using namespace epstack;
using cpu_session = session<cpu_provider>;

namespace {

tensor floats(std::initializer_list<std::int64_t> sizes, std::initializer_list<float> v) { return tensor::from<float>(sizes, v); }
std::vector<float> values(const tensor& t) { return {t.typed<float>(), t.typed<float>() + t.element_count()}; }
model wrap(graph g, std::int64_t opset = 13) {
  model m;
  m.opsets = {{"", opset}};
  m.graph = std::move(g);
  return m;
}

}  // namespace

TEST_CASE("the arena is reused across runs: after the first run, runs reserve no new memory") {
  auto s = cpu_session::create(zoo::make_mlp({256, 512, 512, 512, 512, 512, 512, 10}));
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  const auto x = zoo::random_tensor({8, 256}, 1, 1.0f);
  REQUIRE(s->run({{"input", x}}).has_value());
  const auto after_one = s->memory();
  CHECK(after_one.run_contexts == 1);
  CHECK(after_one.arena_bytes > 0);
  for (int i = 0; i < 5; ++i) REQUIRE(s->run({{"input", x}}).has_value());
  CHECK(s->memory().arena_bytes == after_one.arena_bytes);
  CHECK(s->memory().run_contexts == 1);
  // Intermediates are freed after their last use: the arena holds less than half of all intermediates together
  // (12 of 8x512 floats; at most two are alive at once, beside a kernel's scratch).
  const std::size_t all_intermediates = 12u * 8 * 512 * 4;
  CHECK(after_one.arena_bytes < all_intermediates / 2);
}

// A block freed by one value serves a later, smaller value even when it is more than twice that size (best fit over
// every free block): a 1 MiB intermediate, then two of 256 KiB one after the other, take 1 MiB + 256 KiB of arena,
// not 1.5 MiB. Values are still right, and later runs reserve nothing more.
TEST_CASE("the arena gives a large free block to a smaller value rather than allocating another") {
  graph g("shrink");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{1, 65536}));
  std::vector<std::int64_t> idx(65536);
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<std::int64_t>(i) * 4 + 1;  // the second copy of x
  g.add_initializer("idx", tensor::from<std::int64_t>(std::vector<std::int64_t>{65536}, std::span<const std::int64_t>(idx)));
  attribute_list axis1;
  axis1.set("axis", std::int64_t{1});
  g.add_node(test::op("cat", "Concat", axis1), {"x", "x", "x", "x"}, {"a"});  // 1 MiB: x four times, side by side
  g.add_node(test::op("pick", "Gather", axis1), {"a", "idx"}, {"c"});         // 256 KiB; a is freed after it
  g.add_node(test::op("relu", "Relu"), {"c"}, {"d"});                         // 256 KiB, while c is alive
  g.add_node(test::op("neg", "Neg"), {"d"}, {"out"});
  g.add_output("out");
  session_options so;
  so.set_graph_optimization_level(graph_optimization_level::disable);
  auto s = cpu_session::create(wrap(std::move(g)), so);
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  tensor x(element_type::float32, std::initializer_list<std::int64_t>{1, 65536});
  for (std::size_t i = 0; i < x.element_count(); ++i) x.typed<float>()[i] = static_cast<float>(i % 7) - 3.0f;
  std::vector<float> want(65536);
  for (std::size_t i = 0; i < want.size(); ++i) {
    const std::size_t at = (i * 4 + 1) % 65536;  // Concat's element i*4+1, of copy (i*4+1)/65536
    want[i] = -std::max(0.0f, x.typed<float>()[at]);
  }
  for (int run = 0; run < 3; ++run) {
    auto r = s->run({{"x", x}});
    REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
    CHECK(values((*r)[0]) == want);
  }
  const std::size_t big = std::size_t{1} << 20, small = std::size_t{1} << 18;
  CHECK(s->memory().arena_bytes >= big + small);
  CHECK(s->memory().arena_bytes < big + small + 16384);  // + the blocks' page offsets
}

// Outputs of 64 KiB and more: memory the caller gave back is what the next run's output of that size gets (no fresh
// pages faulted in per run); an output the caller still holds is never reused; one that outlives its session stays
// valid and frees itself (AddressSanitizer checks both in CI).
TEST_CASE("outputs' memory is recycled once the caller drops them, never while held") {
  auto s = std::make_optional(cpu_session::create(zoo::make_mlp({64, 128, 20000})));
  REQUIRE_MESSAGE((*s).has_value(), (*s).status().to_string());
  const auto x = zoo::random_tensor({4, 64}, 3, 1.0f);
  auto r1 = (**s).run({{"input", x}});
  REQUIRE_MESSAGE(r1.has_value(), r1.status().to_string());
  REQUIRE((*r1)[0].byte_size() >= std::size_t{64} << 10);
  const auto want = values((*r1)[0]);
  const void* first = (*r1)[0].data();
  r1 = Status(errc::fail, "dropped");
  auto r2 = (**s).run({{"input", x}});
  REQUIRE(r2.has_value());
  CHECK((*r2)[0].data() == first);
  CHECK(values((*r2)[0]) == want);
  auto r3 = (**s).run({{"input", x}});
  REQUIRE(r3.has_value());
  CHECK((*r3)[0].data() != (*r2)[0].data());
  CHECK(values((*r3)[0]) == want);
  s.reset();  // the session goes first: the outputs still read back, and free themselves later
  CHECK(values((*r2)[0]) == want);
  CHECK(values((*r3)[0]) == want);
}

TEST_CASE("outputs never share memory with the session: a view of an intermediate and an initializer are copied out") {
  graph g("views");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{2, 3}));
  g.add_initializer("w", floats({6}, {1, 2, 3, 4, 5, 6}));
  g.add_initializer("shape", tensor::from<std::int64_t>({1}, {6}));
  g.add_node(test::op("relu", "Relu"), {"x"}, {"r"});
  g.add_node(test::op("flat", "Reshape"), {"r", "shape"}, {"flat"});       // a view of an arena block
  g.add_node(test::op("add", "Add"), {"flat", "w"}, {"sum"});
  g.add_node(test::op("id", "Identity"), {"w"}, {"w_out"});                // the initializer itself
  g.add_output("flat");
  g.add_output("sum");
  g.add_output("w_out");
  session_options so;
  so.set_graph_optimization_level(graph_optimization_level::disable);
  auto s = cpu_session::create(wrap(std::move(g)), so);
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  const auto x = floats({2, 3}, {-1, 2, -3, 4, -5, 6});
  auto a = s->run({{"x", x}});
  REQUIRE_MESSAGE(a.has_value(), a.status().to_string());
  CHECK(values((*a)[0]) == std::vector<float>{0, 2, 0, 4, 0, 6});
  CHECK(values((*a)[1]) == std::vector<float>{1, 4, 3, 8, 5, 12});
  CHECK(values((*a)[2]) == std::vector<float>{1, 2, 3, 4, 5, 6});
  // Scribbling on the outputs changes neither the session's weights nor the next run.
  for (auto& t : *a) std::fill_n(t.typed<float>(), t.element_count(), 99.0f);
  auto b = s->run({{"x", x}});
  REQUIRE(b.has_value());
  CHECK(values((*b)[0]) == std::vector<float>{0, 2, 0, 4, 0, 6});
  CHECK(values((*b)[1]) == std::vector<float>{1, 4, 3, 8, 5, 12});
  CHECK(values((*b)[2]) == std::vector<float>{1, 2, 3, 4, 5, 6});
}

TEST_CASE("a node failing at run time names itself and leaves the session usable") {
  graph g("reshape");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{dimension("n")}));
  g.add_input("shape", type_info::tensor_of(element_type::int64, shape{2}));
  g.add_node(test::op("neg", "Neg"), {"x"}, {"y"});
  g.add_node(test::op("bad_reshape", "Reshape"), {"y", "shape"}, {"z"});
  g.add_node(test::op("relu", "Relu"), {"z"}, {"out"});
  g.add_output("out");
  auto s = cpu_session::create(wrap(std::move(g)));
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  const auto x = floats({6}, {1, -2, 3, -4, 5, -6});
  auto bad = s->run({{"x", x}, {"shape", tensor::from<std::int64_t>({2}, {4, 4})}});
  CHECK(bad.code() == errc::invalid_argument);
  CHECK(bad.status().message().find("bad_reshape") != std::string::npos);
  const auto reserved = s->memory().arena_bytes;
  auto good = s->run({{"x", x}, {"shape", tensor::from<std::int64_t>({2}, {2, 3})}});
  REQUIRE_MESSAGE(good.has_value(), good.status().to_string());
  CHECK(values((*good)[0]) == std::vector<float>{0, 2, 0, 4, 0, 6});
  CHECK(s->memory().arena_bytes == reserved);  // the failed run returned its blocks
}

TEST_CASE("If runs the branch the condition selects, and branches read values of the enclosing graph") {
  graph then_g("then");
  then_g.add_node(test::op("t_add", "Add"), {"a", "b"}, {"t_out"});  // a, b from the enclosing graph
  then_g.add_output("t_out", type_info::tensor_of(element_type::float32, shape{3}));
  graph else_g("else");
  else_g.add_node(test::op("e_mul", "Mul"), {"a", "b"}, {"e_out"});
  else_g.add_output("e_out", type_info::tensor_of(element_type::float32, shape{3}));
  graph g("if");
  g.add_input("cond", type_info::tensor_of(element_type::boolean, shape{}));
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{3}));
  g.add_initializer("b", floats({3}, {10, 20, 30}));
  g.add_node(test::op("abs", "Abs"), {"x"}, {"a"});
  attribute_list attrs;
  attrs.set("then_branch", make_subgraph(std::move(then_g)));
  attrs.set("else_branch", make_subgraph(std::move(else_g)));
  g.add_node(test::op("if", "If", std::move(attrs)), {"cond"}, {"y"});
  g.add_output("y", type_info::tensor_of(element_type::float32, shape{3}));
  auto s = cpu_session::create(wrap(std::move(g)));
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  const auto x = floats({3}, {-1, 2, -3});
  auto t = s->run({{"cond", tensor::scalar(true)}, {"x", x}});
  REQUIRE_MESSAGE(t.has_value(), t.status().to_string());
  CHECK(values((*t)[0]) == std::vector<float>{11, 22, 33});
  auto f = s->run({{"cond", tensor::scalar(false)}, {"x", x}});
  REQUIRE(f.has_value());
  CHECK(values((*f)[0]) == std::vector<float>{10, 40, 90});
  // The branch's use of `a` is an implicit input of the If node: the plan shows the subgraphs.
  CHECK(s->plan().to_table().find("subgraph of 'if' (If) attribute 'then_branch'") != std::string::npos);
}

TEST_CASE("Loop carries state, stops on its condition or trip count, and stacks scan outputs") {
  // body(i, cond, acc): acc' = acc + x (x from outside); cond' = i < 3; scan output = acc'
  graph body("body");
  body.add_input("i", type_info::tensor_of(element_type::int64, shape{}));
  body.add_input("cond_in", type_info::tensor_of(element_type::boolean, shape{}));
  body.add_input("acc", type_info::tensor_of(element_type::float32, shape{2}));
  body.add_initializer("three", tensor::scalar<std::int64_t>(3));
  body.add_node(test::op("b_add", "Add"), {"acc", "x"}, {"acc_out"});
  body.add_node(test::op("b_less", "Less"), {"i", "three"}, {"cond_out"});
  body.add_node(test::op("b_id", "Identity"), {"acc_out"}, {"scan_out"});
  body.add_output("cond_out", type_info::tensor_of(element_type::boolean, shape{}));
  body.add_output("acc_out", type_info::tensor_of(element_type::float32, shape{2}));
  body.add_output("scan_out", type_info::tensor_of(element_type::float32, shape{2}));
  graph g("loop");
  g.add_input("M", type_info::tensor_of(element_type::int64, shape{}));
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{2}));
  g.add_initializer("cond", tensor::scalar(true));
  g.add_initializer("init", floats({2}, {0, 100}));
  attribute_list attrs;
  attrs.set("body", make_subgraph(std::move(body)));
  g.add_node(test::op("loop", "Loop", std::move(attrs)), {"M", "cond", "init"}, {"final", "stacked"});
  g.add_output("final");
  g.add_output("stacked");
  auto s = cpu_session::create(wrap(std::move(g)));
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  const auto x = floats({2}, {1, 2});
  // The condition stops it after i = 3 (four iterations) even with a larger trip count.
  auto r = s->run({{"M", tensor::scalar<std::int64_t>(10)}, {"x", x}});
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  CHECK(values((*r)[0]) == std::vector<float>{4, 108});
  CHECK(std::vector<std::int64_t>((*r)[1].sizes().begin(), (*r)[1].sizes().end()) == std::vector<std::int64_t>{4, 2});
  CHECK(values((*r)[1]) == std::vector<float>{1, 102, 2, 104, 3, 106, 4, 108});
  // The trip count stops it first.
  r = s->run({{"M", tensor::scalar<std::int64_t>(2)}, {"x", x}});
  REQUIRE(r.has_value());
  CHECK(values((*r)[0]) == std::vector<float>{2, 104});
}

TEST_CASE("Scan runs its body over slices, in both directions, with state") {
  // Cumulative sum over rows (state), and each row doubled (scan output), second input scanned in reverse.
  graph body("scan_body");
  body.add_input("state", type_info::tensor_of(element_type::float32, shape{2}));
  body.add_input("row", type_info::tensor_of(element_type::float32, shape{2}));
  body.add_input("rev_row", type_info::tensor_of(element_type::float32, shape{2}));
  body.add_node(test::op("s_add", "Add"), {"state", "row"}, {"state_out"});
  body.add_node(test::op("s_id", "Identity"), {"rev_row"}, {"rev_out"});
  body.add_output("state_out", type_info::tensor_of(element_type::float32, shape{2}));
  body.add_output("rev_out", type_info::tensor_of(element_type::float32, shape{2}));
  graph g("scan");
  g.add_input("init", type_info::tensor_of(element_type::float32, shape{2}));
  g.add_input("xs", type_info::tensor_of(element_type::float32, shape{3, 2}));
  attribute_list attrs;
  attrs.set("body", make_subgraph(std::move(body)));
  attrs.set("num_scan_inputs", std::int64_t{2});
  attrs.set("scan_input_directions", std::vector<std::int64_t>{0, 1});
  g.add_node(test::op("scan", "Scan", std::move(attrs)), {"init", "xs", "xs"}, {"total", "reversed"});
  g.add_output("total");
  g.add_output("reversed");
  auto s = cpu_session::create(wrap(std::move(g), 11));
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  auto r = s->run({{"init", floats({2}, {0, 0})}, {"xs", floats({3, 2}, {1, 2, 3, 4, 5, 6})}});
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  CHECK(values((*r)[0]) == std::vector<float>{9, 12});
  CHECK(values((*r)[1]) == std::vector<float>{5, 6, 3, 4, 1, 2});
}

TEST_CASE("the convolutional zoo model runs, and its output does not depend on the thread count") {
  const auto m = zoo::make_convnet({8, 16}, 32, 10);
  const auto x = zoo::random_tensor({2, 3, 32, 32}, 5, 1.0f);
  std::vector<float> reference;
  for (int threads : {1, 2, 3}) {
    session_options so;
    so.set_intra_op_threads(threads);
    auto s = cpu_session::create(m, so);
    REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
    auto r = s->run({{"image", x}});
    REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
    const auto v = values((*r)[0]);
    CHECK(v.size() == 20);
    if (reference.empty()) reference = v;
    const auto c = test::compare_values([&](std::size_t i) { return v[i]; }, [&](std::size_t i) { return reference[i]; },
                                        v.size(), 1e-5, 1e-5);
    CHECK_MESSAGE(c.ok(), c.message());
  }
}
