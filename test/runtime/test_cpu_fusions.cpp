// The CPU provider's fused products (cpu_product_fusion, after partitioning): MatMul with a constant B and the bias
// Add, Relu, Gelu or BiasGelu after it become one com.epstack.cpu MatMulBias, applied as the product is stored. Each
// case against the same session with the fusion off (epstack.cpu_fuse_products = 0) and against a product computed
// here in double; what is not fused; the option's values; the fused graph saved and loaded again.
#include <epstack/testing/model_zoo.hpp>
#include <epstack/ir/node_facts.hpp>
#include <epstack/onnx/onnx_io.hpp>
#include <epstack/providers/cpu.hpp>
#include <epstack/runtime/optimizer.hpp>
#include <epstack/runtime/session.hpp>

#include "../support/compare.hpp"
#include "../support/graphs.hpp"
#include "../support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <span>
#include <limits>
#include <tuple>
#include <string>
#include <vector>

using namespace epstack;
using test::op;
using test::op_counts;

namespace {

using cpu_session = session<cpu_provider>;
constexpr const char* fused_op = "com.epstack.cpu.MatMulBias";

node contrib(std::string name, std::string type) {
  node n = op(std::move(name), std::move(type));
  n.domain = "com.microsoft";
  return n;
}

// x [batch, seq, K] (symbolic leading dimensions unless `rows` is given: then [1, rows, K]) through seven chains on
// weights of K x N:
//   y1 = x W1 + b1                      (Add(Y, bias))
//   y2 = Relu(b2 + x W2)                (Add(bias, Y), then Relu)
//   y3 = BiasGelu(x W3, b3)             (com.microsoft)
//   y4 = Gelu(x W4 + b4)                (com.microsoft Gelu after the Add: the optimiser's BiasGelu, fused all the same)
//   y5 = Relu(x W5)                     (an activation alone)
//   y6 = x W6 + c6, c6 [1, 1, 1, N]     (of higher rank than Y: the sum's shape is not the product's, not fused)
//   y7 = x W7 + b7, x W7 also an output (read twice: not fused)
model chains(std::int64_t K, std::int64_t N, std::int64_t rows = 0) {
  graph g("products");
  const shape xs = rows > 0 ? shape{1, rows, K} : shape{dimension("batch"), dimension("seq"), K};
  g.add_input("x", type_info::tensor_of(element_type::float32, xs));
  std::uint64_t seed = 11;
  for (int i = 1; i <= 7; ++i) {
    const std::string s = std::to_string(i);
    g.add_initializer("W" + s, zoo::random_tensor({K, N}, seed++, 0.5f));
    g.add_initializer("b" + s, i == 6 ? zoo::random_tensor({1, 1, 1, N}, seed, 1.0f) : zoo::random_tensor({N}, seed, 1.0f));
    ++seed;
    g.add_node(op("mm" + s, "MatMul"), {"x", "W" + s}, {"p" + s});
  }
  g.add_node(op("add1", "Add"), {"p1", "b1"}, {"y1"});
  g.add_node(op("add2", "Add"), {"b2", "p2"}, {"s2"});
  g.add_node(op("relu2", "Relu"), {"s2"}, {"y2"});
  g.add_node(contrib("bgelu3", "BiasGelu"), {"p3", "b3"}, {"y3"});
  g.add_node(op("add4", "Add"), {"p4", "b4"}, {"s4"});
  g.add_node(contrib("gelu4", "Gelu"), {"s4"}, {"y4"});
  g.add_node(op("relu5", "Relu"), {"p5"}, {"y5"});
  g.add_node(op("add6", "Add"), {"p6", "b6"}, {"y6"});
  g.add_node(op("add7", "Add"), {"p7", "b7"}, {"y7"});
  // Declared as an exporter would (onnx 1.12's inference knows no com.microsoft operator: y3 and y4 would have none).
  const auto ys = [&](bool rank4) {
    std::vector<dimension> d;
    if (rank4) d.emplace_back(1);
    if (rows > 0) d.insert(d.end(), {dimension(1), dimension(rows)});
    else d.insert(d.end(), {dimension("batch"), dimension("seq")});
    d.emplace_back(N);
    return type_info::tensor_of(element_type::float32, shape(std::move(d)));
  };
  for (const char* o : {"y1", "y2", "y3", "y4", "y5", "y6", "y7", "p7"}) g.add_output(o, ys(std::string(o) == "y6"));
  model m;
  m.opsets = {{"", 13}, {"com.microsoft", 1}};
  m.graph = std::move(g);
  return m;
}

// act(x W + b) in double, b one value per column (of any rank).
std::vector<double> reference(const tensor& x, const tensor& w, const tensor* b, const std::string& act) {
  const auto xs = x.sizes();
  const std::int64_t K = xs.back(), N = w.sizes()[1];
  std::int64_t rows = 1;
  for (std::size_t d = 0; d + 1 < xs.size(); ++d) rows *= xs[d];
  const float* px = x.typed<float>();
  const float* pw = w.typed<float>();
  std::vector<double> y(static_cast<std::size_t>(rows * N));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (std::int64_t k = 0; k < K; ++k) acc += static_cast<double>(px[i * K + k]) * pw[k * N + j];
      if (b != nullptr) acc += b->typed<float>()[j];
      if (act == "Relu") acc = std::max(acc, 0.0);
      if (act == "Gelu") acc = 0.5 * acc * (1.0 + std::erf(acc / std::sqrt(2.0)));
      y[static_cast<std::size_t>(i * N + j)] = acc;
    }
  return y;
}

void check_reference(const tensor& got, const std::vector<double>& want) {
  REQUIRE(got.element_count() == want.size());
  const float* p = got.typed<float>();
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    const double tol = 2e-4 + 2e-4 * std::fabs(want[i]);
    REQUIRE_FALSE(std::isnan(p[i]));
    CHECK(std::fabs(static_cast<double>(p[i]) - want[i]) <= tol);
  }
}

// `m` as two sessions on `threads` intra-op threads: with the CPU provider's fusions (the default) and without
// (epstack.cpu_fuse_products 0).
std::pair<cpu_session, cpu_session> fused_and_plain(const model& m, int threads) {
  session_options so;
  so.set_intra_op_threads(threads);
  auto fused = cpu_session::create(m, so);
  so.set_config(config_keys::cpu_fuse_products, "0");
  auto plain = cpu_session::create(m, so);
  REQUIRE_MESSAGE(fused.has_value(), fused.status().to_string());
  REQUIRE_MESSAGE(plain.has_value(), plain.status().to_string());
  return {std::move(*fused), std::move(*plain)};
}

const tensor& init(const model& m, const std::string& name) {
  const value_id v = m.graph.find_value(name);
  REQUIRE(v != no_id);
  REQUIRE(m.graph.value(v).initializer.has_value());
  return *m.graph.value(v).initializer;
}

}  // namespace

TEST_CASE("CPU fused products: MatMul with a bias Add, Relu, Gelu or BiasGelu after it computes what the nodes compute") {
  // K and N: a K block and a half (the epilogue on the last block only), columns not a multiple of the 32-wide panel;
  // rows from 1 (matrix-vector panels when static) to 74 (partial panels of 12), symbolic or static.
  for (const auto& [K, N, batch, seq, static_rows] :
       std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool>>{
           {384, 72, 2, 37, false}, {64, 40, 1, 3, false}, {96, 33, 1, 2, true}, {300, 100, 1, 13, true}}) {
    CAPTURE(K);
    CAPTURE(N);
    CAPTURE(batch * seq);
    CAPTURE(static_rows);
    const model m = chains(K, N, static_rows ? seq : 0);
    const tensor x = zoo::random_tensor({batch, seq, K}, 99, 1.0f);
    const std::vector<named_tensor> in{{"x", x}};
    for (const int threads : {1, 2, 3}) {
      CAPTURE(threads);
      auto [fused_s, plain_s] = fused_and_plain(m, threads);
      auto* fused = &fused_s;
      auto* plain = &plain_s;
      const auto counts = op_counts(fused->get_model().graph);
      const auto count = [&](const char* k) { return counts.count(k) ? counts.at(k) : 0; };
      if (!static_rows) {
        CHECK(count(fused_op) == 5);  // chains 1 to 5
        CHECK(count("MatMul") == 2);  // 6 and 7
        CHECK(count("Add") == 2);
        CHECK(count("Relu") == 0);
        CHECK(count("com.microsoft.Gelu") == 0);
      } else {
        // Every size known: before partitioning, MatMul + Add of chains 1, 2 and 4 became Gemm between Reshapes
        // (fuse_matmul_add, the bias in the Gemm's epilogue); the Relu and Gelu after them stay nodes.
        CHECK(count(fused_op) == 2);  // chains 3 and 5
        CHECK(count("Gemm") == 3);
        CHECK(count("Relu") == 1);
        CHECK(count("com.microsoft.Gelu") == 1);
      }
      CHECK(count("com.microsoft.BiasGelu") == 0);
      CHECK(op_counts(plain->get_model().graph).count(fused_op) == 0);
      const auto& fusions = fused->optimizations().fusions;
      CHECK(std::count_if(fusions.begin(), fusions.end(), [](const std::string& f) { return f.rfind("MatMulBias: ", 0) == 0; }) ==
            count(fused_op));
      auto a = fused->run(in);
      auto b = plain->run(in);
      REQUIRE_MESSAGE(a.has_value(), a.status().to_string());
      REQUIRE_MESSAGE(b.has_value(), b.status().to_string());
      REQUIRE(a->size() == 8);
      for (std::size_t i = 0; i < a->size(); ++i) {
        CAPTURE(i);
        EPSTACK_CHECK_CLOSE((*a)[i], (*b)[i], 1e-5, 1e-5);
      }
      const char* acts[] = {"", "Relu", "Gelu", "Gelu", "Relu", "", ""};
      for (int i = 1; i <= 7; ++i) {
        CAPTURE(i);
        const std::string s = std::to_string(i);
        const tensor* bias = i == 5 ? nullptr : &init(m, "b" + s);
        check_reference((*a)[static_cast<std::size_t>(i - 1)], reference(x, init(m, "W" + s), bias, acts[i - 1]));
      }
      check_reference((*a)[7], reference(x, init(m, "W7"), nullptr, ""));
    }
  }
}

// The fused graph is what an EPContext model or a saved optimised model holds of the CPU provider's part: saved as
// ONNX (domain com.epstack.cpu imported), loaded and run again; at level basic nothing is fused; a NaN in x reaches
// its row of every output as in the nodes; the option's refusal names it.
TEST_CASE("CPU fused products: saved and loaded again, the optimisation levels, NaN rows and the option's values") {
  const model m = chains(64, 48);
  tensor x = zoo::random_tensor({1, 5, 64}, 7, 1.0f);
  x.typed<float>()[2 * 64 + 10] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<named_tensor> in{{"x", x}};
  auto fused = cpu_session::create(m);
  REQUIRE_MESSAGE(fused.has_value(), fused.status().to_string());
  auto want = fused->run(in);
  REQUIRE_MESSAGE(want.has_value(), want.status().to_string());
  for (std::size_t o = 0; o < 7; ++o) {
    CAPTURE(o);
    const float* p = (*want)[o].typed<float>();
    const std::int64_t N = (*want)[o].sizes().back();
    for (std::int64_t r = 0; r < 5; ++r) {
      CAPTURE(r);
      // The NaN reaches its row of every output (Relu keeps NaN, fused or not), and no other row.
      bool any_nan = false;
      for (std::int64_t j = 0; j < N; ++j) any_nan = any_nan || std::isnan(p[r * N + j]);
      CHECK(any_nan == (r == 2));
    }
  }
  session_options plain_opts;
  plain_opts.set_config(config_keys::cpu_fuse_products, "0");
  auto plain = cpu_session::create(m, plain_opts);
  REQUIRE(plain.has_value());
  auto pr = plain->run(in);
  REQUIRE(pr.has_value());
  for (std::size_t o = 0; o < 8; ++o) {
    CAPTURE(o);
    const float* p = (*want)[o].typed<float>();
    const float* q = (*pr)[o].typed<float>();
    for (std::size_t i = 0; i < (*want)[o].element_count(); ++i) {
      CAPTURE(i);
      REQUIRE(std::isnan(p[i]) == std::isnan(q[i]));
      if (!std::isnan(p[i])) CHECK(std::fabs(p[i] - q[i]) <= 1e-5f + 1e-5f * std::fabs(q[i]));
    }
  }

  test::temp_dir dir;
  const auto path = dir.path() / "fused.onnx";
  REQUIRE(save_model(fused->get_model(), path).is_ok());
  auto saved = load_model(path);
  REQUIRE_MESSAGE(saved.has_value(), saved.status().to_string());
  CHECK(saved->opset("com.epstack.cpu") == 1);
  CHECK(op_counts(saved->graph).at(fused_op) == 5);
  auto again = cpu_session::create(*saved);
  REQUIRE_MESSAGE(again.has_value(), again.status().to_string());
  auto r = again->run(in);
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  for (std::size_t o = 0; o < 8; ++o) {
    CAPTURE(o);
    REQUIRE((*r)[o].byte_size() == (*want)[o].byte_size());
    CHECK(std::memcmp((*r)[o].data(), (*want)[o].data(), (*r)[o].byte_size()) == 0);
  }

  session_options basic;
  basic.set_graph_optimization_level(graph_optimization_level::basic);
  auto b = cpu_session::create(m, basic);
  REQUIRE(b.has_value());
  CHECK(op_counts(b->get_model().graph).count(fused_op) == 0);

  session_options bad_opts;
  bad_opts.set_config(config_keys::cpu_fuse_products, "yes");
  auto bad = cpu_session::create(m, bad_opts);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.code() == errc::invalid_argument);
  CHECK(bad.status().message().find("epstack.cpu_fuse_products") != std::string::npos);
  CHECK(bad.status().message().find("'yes'") != std::string::npos);
}

// GELU applied in the packed product's epilogue (16 lanes at a time, in registers) over the whole float range: an
// identity W makes Y = GELU(X) for 40 x 40 values from -12 to 12, zeros and tiny, large and huge magnitudes, each
// against erf's GELU in double; a NaN in row 5 of X reaches every value of that row and no other.
TEST_CASE("CPU fused products: the GELU epilogue over the float range and a NaN row, against erf") {
  constexpr std::int64_t n = 40;
  tensor w(element_type::float32, {n, n});
  for (std::int64_t i = 0; i < n; ++i) w.typed<float>()[i * n + i] = 1.0f;
  graph g("gelu_range");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{dimension("rows"), n}));
  g.add_initializer("W", std::move(w));
  g.add_initializer("b", tensor(element_type::float32, {n}));
  node nd = op("fused", "MatMulBias");
  nd.domain = "com.epstack.cpu";
  nd.attributes.set("activation", std::string("Gelu"));
  g.add_node(std::move(nd), {"x", "W", "b"}, {"y"});
  g.add_output("y");
  model m;
  m.opsets = {{"", 13}, {"com.epstack.cpu", 1}};
  m.graph = std::move(g);

  tensor x(element_type::float32, {n, n});
  float* px = x.typed<float>();
  for (std::int64_t i = 0; i < n * n; ++i) px[i] = -12.0f + 24.0f * static_cast<float>(i) / static_cast<float>(n * n - 1);
  const float specials[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-8f, -1e-8f, 30.0f, -30.0f, 87.0f, -87.0f, 1e4f, -1e4f, 3e38f};
  for (std::size_t k = 0; k < std::size(specials); ++k) px[3 * n + static_cast<std::int64_t>(k)] = specials[k];
  px[5 * n + 7] = std::numeric_limits<float>::quiet_NaN();
  auto s = cpu_session::create(m);
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  auto y = s->run({{"x", x}});
  REQUIRE_MESSAGE(y.has_value(), y.status().to_string());
  REQUIRE((*y)[0].element_count() == static_cast<std::size_t>(n * n));
  const float* py = (*y)[0].typed<float>();
  for (std::int64_t i = 0; i < n * n; ++i) {
    CAPTURE(i);
    CAPTURE(px[i]);
    if (i / n == 5) {
      CHECK(std::isnan(py[i]));
      continue;
    }
    const double v = px[i], want = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    REQUIRE_FALSE(std::isnan(py[i]));
    // erf to 3e-7 absolute (fast_erf_abs): GELU to 1.5e-7 |x|, plus rounding.
    CHECK(std::fabs(static_cast<double>(py[i]) - want) <= 1e-7 + 2e-7 * std::fabs(v) + 1e-6 * std::fabs(want));
  }
}

// An attention layer as exporters write it, 3 heads of 20: Q, K and V reshaped into heads and transposed (K straight
// to K^T, or to [b, h, s, d] under a FusedMatMul with transB and alpha), softmax, P V, the context transposed back and
// reshaped. Each product takes its Transposes into one PermutedMatMul; the results are the nodes' (option off), at
// batch 1 and 2, 1 to 33 tokens (symbolic), 1 to 3 threads; saved and loaded, the same bytes. A Transpose whose output
// is also a graph output stays (`keep_v`).
model attention_heads(bool keep_v) {
  graph g("heads");
  const auto hidden = type_info::tensor_of(element_type::float32, shape{dimension("b"), dimension("s"), 60});
  for (const char* in : {"xq", "xk", "xv"}) g.add_input(in, hidden);
  g.add_initializer("heads", tensor::from<std::int64_t>({4}, {0, 0, 3, 20}));
  g.add_initializer("merged", tensor::from<std::int64_t>({3}, {0, 0, 60}));
  const auto reshape = [&](const char* name, const std::string& x, const char* shape_name, const std::string& y) {
    g.add_node(op(name, "Reshape"), {x, shape_name}, {y});
  };
  const auto transpose = [&](const char* name, const std::string& x, std::vector<std::int64_t> perm, const std::string& y) {
    node n = op(name, "Transpose");
    n.attributes.set("perm", std::move(perm));
    g.add_node(std::move(n), {x}, {y});
  };
  reshape("rq", "xq", "heads", "q4");
  reshape("rk", "xk", "heads", "k4");
  reshape("rv", "xv", "heads", "v4");
  transpose("tq", "q4", {0, 2, 1, 3}, "q");
  transpose("tk", "k4", {0, 2, 3, 1}, "kt");
  transpose("tv", "v4", {0, 2, 1, 3}, "v");
  g.add_node(op("qk", "MatMul"), {"q", "kt"}, {"scores"});
  g.add_node(op("sm", "Softmax"), {"scores"}, {"p"});
  g.add_node(op("pv", "MatMul"), {"p", "v"}, {"ctx"});
  transpose("tc", "ctx", {0, 2, 1, 3}, "ctx4");
  reshape("rc", "ctx4", "merged", "out");
  // Q K^T again through FusedMatMul: K into [b, h, s, d] (its own Transpose of k4), transB and a scale.
  transpose("tk2", "k4", {0, 2, 1, 3}, "k");
  node fm = contrib("qk2", "FusedMatMul");
  fm.attributes.set("transB", std::int64_t{1});
  fm.attributes.set("alpha", 0.125f);
  transpose("tq2", "q4", {0, 2, 1, 3}, "q2");
  g.add_node(std::move(fm), {"q2", "k"}, {"scores2"});
  g.add_output("out");
  // FusedMatMul has no shape inference of its own: its output declares [b, 3, s, s].
  g.add_output("scores2", type_info::tensor_of(element_type::float32, shape{dimension("b"), 3, dimension("s"), dimension("s")}));
  if (keep_v) g.add_output("v");
  model m;
  m.opsets = {{"", 13}, {"com.microsoft", 1}};
  m.graph = std::move(g);
  return m;
}

TEST_CASE("CPU fused products: Transposes around attention's products fold into PermutedMatMul, against the nodes") {
  for (const bool keep_v : {false, true}) {
    CAPTURE(keep_v);
    const model m = attention_heads(keep_v);
    for (const auto& [b, s] : std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 1}, {1, 7}, {2, 33}}) {
      CAPTURE(b);
      CAPTURE(s);
      const std::vector<named_tensor> in{{"xq", zoo::random_tensor({b, s, 60}, 11, 1.0f)},
                                         {"xk", zoo::random_tensor({b, s, 60}, 12, 1.0f)},
                                         {"xv", zoo::random_tensor({b, s, 60}, 13, 1.0f)}};
      for (const int threads : {1, 2, 3}) {
        CAPTURE(threads);
        auto [fused_s, plain_s] = fused_and_plain(m, threads);
        auto* fused = &fused_s;
        auto* plain = &plain_s;
        const auto counts = op_counts(fused->get_model().graph);
        const auto count = [&](const char* k) { return counts.count(k) ? counts.at(k) : 0; };
        CHECK(count("com.epstack.cpu.PermutedMatMul") == 3);
        CHECK(count("MatMul") == 0);
        CHECK(count("com.microsoft.FusedMatMul") == 0);
        CHECK(count("Transpose") == (keep_v ? 1 : 0));
        CHECK(op_counts(plain->get_model().graph).count("com.epstack.cpu.PermutedMatMul") == 0);
        auto x = fused->run(in);
        auto y = plain->run(in);
        REQUIRE_MESSAGE(x.has_value(), x.status().to_string());
        REQUIRE_MESSAGE(y.has_value(), y.status().to_string());
        REQUIRE(x->size() == y->size());
        for (std::size_t i = 0; i < x->size(); ++i) {
          CAPTURE(i);
          REQUIRE((*x)[i].sizes().size() == (*y)[i].sizes().size());
          CHECK(std::equal((*x)[i].sizes().begin(), (*x)[i].sizes().end(), (*y)[i].sizes().begin()));
          EPSTACK_CHECK_CLOSE((*x)[i], (*y)[i], 1e-5, 1e-5);
        }
      }
    }
  }
  const model m = attention_heads(false);
  auto fused = cpu_session::create(m);
  REQUIRE(fused.has_value());
  const std::vector<named_tensor> in{{"xq", zoo::random_tensor({1, 5, 60}, 21, 1.0f)},
                                     {"xk", zoo::random_tensor({1, 5, 60}, 22, 1.0f)},
                                     {"xv", zoo::random_tensor({1, 5, 60}, 23, 1.0f)}};
  auto want = fused->run(in);
  REQUIRE(want.has_value());
  test::temp_dir dir;
  const auto path = dir.path() / "heads.onnx";
  REQUIRE(save_model(fused->get_model(), path).is_ok());
  auto saved = load_model(path);
  REQUIRE_MESSAGE(saved.has_value(), saved.status().to_string());
  CHECK(op_counts(saved->graph).at("com.epstack.cpu.PermutedMatMul") == 3);
  auto again = cpu_session::create(*saved);
  REQUIRE_MESSAGE(again.has_value(), again.status().to_string());
  auto r = again->run(in);
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  for (std::size_t o = 0; o < want->size(); ++o) {
    CAPTURE(o);
    REQUIRE((*r)[o].byte_size() == (*want)[o].byte_size());
    CHECK(std::memcmp((*r)[o].data(), (*want)[o].data(), (*r)[o].byte_size()) == 0);
  }
}

// PermutedMatMul written by hand (rank 3), against a double reference: A read transposed (perm_a moving its last dim
// to the rows), B broadcast over A's batches (batch 1 against 2), B read transposed, Y written transposed; a product
// large enough to be split across 3 threads inside one batch (the threads' column ranges of a strided B and Y). And
// the refusals, each naming the node or the shapes: permutations of different ranks or with a repeated entry, an
// attribute of the wrong kind, a perm_y that moves the last dim, a perm_a whose rank is not A's, shapes that do not
// multiply.
namespace {
model permuted_node(const shape& as, const shape& bs, const std::vector<std::pair<std::string, attribute::value_type>>& attrs) {
  graph g("pmm");
  g.add_input("a", type_info::tensor_of(element_type::float32, as));
  g.add_input("b", type_info::tensor_of(element_type::float32, bs));
  node n = op("perm", "PermutedMatMul");
  n.domain = "com.epstack.cpu";
  for (const auto& [k, v] : attrs) {
    attribute at;
    at.name = k;
    at.value = v;
    n.attributes.set(std::move(at));
  }
  g.add_node(std::move(n), {"a", "b"}, {"y"});
  g.add_output("y");
  model m;
  m.opsets = {{"", 13}, {"com.epstack.cpu", 1}};
  m.graph = std::move(g);
  return m;
}
// Y = Transpose(alpha * (Transpose(a, pa) x Transpose(b, pb)), py) in double, rank 3 (empty perm: none), with Y's
// stored sizes in `dims`.
std::vector<double> permuted_reference(const tensor& a, std::vector<std::int64_t> pa, const tensor& b, std::vector<std::int64_t> pb,
                                       std::vector<std::int64_t> py, double alpha, std::vector<std::int64_t>& dims) {
  for (auto* p : {&pa, &pb, &py})
    if (p->empty()) *p = {0, 1, 2};
  const auto logical = [](const tensor& t, const std::vector<std::int64_t>& p) {
    std::array<std::int64_t, 3> d{}, st{};
    const auto s = t.sizes();
    const std::array<std::int64_t, 3> cs{s[1] * s[2], s[2], 1};
    for (int i = 0; i < 3; ++i) {
      d[static_cast<std::size_t>(i)] = s[static_cast<std::size_t>(p[static_cast<std::size_t>(i)])];
      st[static_cast<std::size_t>(i)] = cs[static_cast<std::size_t>(p[static_cast<std::size_t>(i)])];
    }
    return std::pair{d, st};
  };
  const auto [da, sa] = logical(a, pa);
  const auto [db, sb] = logical(b, pb);
  const std::int64_t B = std::max(da[0], db[0]), M = da[1], K = da[2], N = db[2];
  const std::array<std::int64_t, 3> yd{B, M, N};
  dims = {yd[static_cast<std::size_t>(py[0])], yd[static_cast<std::size_t>(py[1])], yd[static_cast<std::size_t>(py[2])]};
  std::array<std::int64_t, 3> ys{};
  ys[static_cast<std::size_t>(py[0])] = dims[1] * dims[2];
  ys[static_cast<std::size_t>(py[1])] = dims[2];
  ys[static_cast<std::size_t>(py[2])] = 1;
  std::vector<double> y(static_cast<std::size_t>(B * M * N));
  for (std::int64_t q = 0; q < B; ++q)
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (std::int64_t k = 0; k < K; ++k)
          acc += static_cast<double>(a.typed<float>()[(da[0] == 1 ? 0 : q) * sa[0] + m * sa[1] + k * sa[2]]) *
                 b.typed<float>()[(db[0] == 1 ? 0 : q) * sb[0] + k * sb[1] + n * sb[2]];
        y[static_cast<std::size_t>(q * ys[0] + m * ys[1] + n * ys[2])] = alpha * acc;
      }
  return y;
}
}  // namespace

TEST_CASE("CPU fused products: PermutedMatMul against a double reference, and its refusals") {
  using perm = std::vector<std::int64_t>;
  struct case_t {
    std::vector<std::int64_t> as, bs;
    perm pa, pb, py;
    float alpha;
  };
  const case_t cases[] = {
      {{2, 3, 4}, {2, 4, 5}, {}, {}, {1, 0, 2}, 1.0f},         // Y transposed
      {{2, 4, 3}, {1, 4, 5}, {0, 2, 1}, {}, {}, 0.5f},         // A transposed, B broadcast over the batches
      {{1, 3, 4}, {2, 5, 4}, {}, {0, 2, 1}, {1, 0, 2}, 1.0f},  // A broadcast, B transposed, Y transposed
      {{1, 96, 64}, {1, 80, 96}, {0, 2, 1}, {0, 2, 1}, {1, 0, 2}, 1.0f},  // one batch of 983k flops: split in it
  };
  for (const auto& c : cases) {
    CAPTURE(c.as[1]);
    std::vector<std::pair<std::string, attribute::value_type>> attrs;
    if (!c.pa.empty()) attrs.emplace_back("perm_a", c.pa);
    if (!c.pb.empty()) attrs.emplace_back("perm_b", c.pb);
    if (!c.py.empty()) attrs.emplace_back("perm_y", c.py);
    if (c.alpha != 1.0f) attrs.emplace_back("alpha", c.alpha);
    const auto dims_of = [](const std::vector<std::int64_t>& v) { return shape(std::vector<dimension>(v.begin(), v.end())); };
    const auto random_of = [](const std::vector<std::int64_t>& v, std::uint64_t seed) {
      tensor t(element_type::float32, v);
      for (std::size_t i = 0; i < t.element_count(); ++i) t.typed<float>()[i] = zoo::uniform_at(seed, i);
      return t;
    };
    const model m = permuted_node(dims_of(c.as), dims_of(c.bs), attrs);
    const tensor a = random_of(c.as, 31), b = random_of(c.bs, 32);
    std::vector<std::int64_t> dims;
    const auto want = permuted_reference(a, c.pa, b, c.pb, c.py, c.alpha, dims);
    for (const int threads : {1, 3}) {
      CAPTURE(threads);
      session_options so;
      so.set_intra_op_threads(threads);
      auto s = cpu_session::create(m, so);
      REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
      auto y = s->run({{"a", a}, {"b", b}});
      REQUIRE_MESSAGE(y.has_value(), y.status().to_string());
      const auto& t = (*y)[0];
      REQUIRE(std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end()) == dims);
      for (std::size_t i = 0; i < want.size(); ++i) {
        CAPTURE(i);
        REQUIRE_FALSE(std::isnan(t.typed<float>()[i]));
        CHECK(std::fabs(t.typed<float>()[i] - want[i]) <= 1e-5 + 1e-5 * std::fabs(want[i]));
      }
    }
  }
  const tensor a = zoo::random_tensor({2, 3, 4}, 31, 1.0f), b = zoo::random_tensor({2, 4, 5}, 32, 1.0f);
  const auto refused = [&](std::vector<std::pair<std::string, attribute::value_type>> attrs, const char* what) {
    auto s = cpu_session::create(permuted_node(shape{2, 3, 4}, shape{2, 4, 5}, attrs));
    Status st = s.has_value() ? Status{} : s.status();
    if (s.has_value()) {
      auto r = s->run({{"a", a}, {"b", b}});
      REQUIRE_FALSE(r.has_value());
      st = r.status();
    }
    CAPTURE(st.to_string());
    CHECK(st.code() == errc::invalid_argument);
    CHECK(st.to_string().find(what) != std::string::npos);
  };
  refused({{"perm_a", perm{0, 1, 2}}, {"perm_b", perm{1, 0}}}, "node 'perm': perm_a, perm_b and perm_y must be permutations");
  refused({{"perm_a", perm{0, 0, 2}}}, "node 'perm': perm_a, perm_b and perm_y must be permutations");
  refused({{"perm_a", std::int64_t{1}}}, "node 'perm': attribute perm_a must be a list of ints");
  refused({{"alpha", std::int64_t{2}}}, "node 'perm': attribute alpha must be a float");
  refused({{"perm_y", perm{0, 2, 1}}}, "perm_y must keep the last dim last");
  refused({{"perm_a", perm{1, 0}}}, "A of shape [2,3,4] does not have the rank of its permutation (2)");
  refused({{"perm_a", perm{0, 2, 1}}}, "inner dimensions differ");
}

// What the fold leaves alone, against the nodes unfused: a Transpose that moves its input's last dim into a batch
// dim, a Transpose two products read, a Y Transpose that moves the last dim, and a product whose B is a constant
// (packed at create by MatMul; a Transpose before its A stays a node).
TEST_CASE("CPU fused products: Transposes PermutedMatMul cannot or should not take stay nodes") {
  graph g("kept");
  const auto t3 = [](std::int64_t x, std::int64_t y, std::int64_t z) { return type_info::tensor_of(element_type::float32, shape{x, y, z}); };
  g.add_input("x", t3(4, 2, 3));
  g.add_input("u", t3(2, 3, 5));
  g.add_initializer("W", zoo::random_tensor({4, 6}, 51, 1.0f));
  const auto transpose = [&](const char* name, const char* x, std::vector<std::int64_t> perm, const char* y) {
    node n = op(name, "Transpose");
    n.attributes.set("perm", std::move(perm));
    g.add_node(std::move(n), {x}, {y});
  };
  transpose("to_batch", "x", {2, 0, 1}, "xb");  // [3, 4, 2]: x's last dim now the batch dim
  transpose("shared", "u", {0, 2, 1}, "ut");    // [2, 5, 3], read by two products
  g.add_node(op("p1", "MatMul"), {"xb", "u2"}, {"y1"});
  g.add_initializer("u2", zoo::random_tensor({3, 2, 7}, 52, 1.0f));
  g.add_node(op("p2", "MatMul"), {"ut", "v"}, {"y2"});
  g.add_node(op("p3", "MatMul"), {"ut", "v"}, {"y3"});
  g.add_input("v", t3(2, 3, 4));
  transpose("y_moves", "y3", {0, 2, 1}, "y3t");  // moves Y's last dim
  transpose("before_const", "x", {1, 0, 2}, "xc");  // [2, 4, 3] under a constant B
  g.add_node(op("p4", "MatMul"), {"xc", "w3"}, {"y4"});
  g.add_initializer("w3", zoo::random_tensor({3, 6}, 53, 1.0f));
  for (const char* y : {"y1", "y2", "y3t", "y4"}) g.add_output(y);
  model m;
  m.opsets = {{"", 13}};
  m.graph = std::move(g);
  auto fused = cpu_session::create(m);
  session_options off;
  off.set_config(config_keys::cpu_fuse_products, "0");
  auto plain = cpu_session::create(m, off);
  REQUIRE_MESSAGE(fused.has_value(), fused.status().to_string());
  REQUIRE_MESSAGE(plain.has_value(), plain.status().to_string());
  const auto counts = op_counts(fused->get_model().graph);
  CHECK(counts.count("com.epstack.cpu.PermutedMatMul") == 0);
  CHECK(counts.at("Transpose") == 4);
  CHECK(counts.at("MatMul") == 4);
  const std::vector<named_tensor> in{{"x", zoo::random_tensor({4, 2, 3}, 54, 1.0f)},
                                     {"u", zoo::random_tensor({2, 3, 5}, 55, 1.0f)},
                                     {"v", zoo::random_tensor({2, 3, 4}, 56, 1.0f)}};
  auto a = fused->run(in);
  auto b = plain->run(in);
  REQUIRE_MESSAGE(a.has_value(), a.status().to_string());
  REQUIRE_MESSAGE(b.has_value(), b.status().to_string());
  for (std::size_t i = 0; i < a->size(); ++i) {
    CAPTURE(i);
    EPSTACK_CHECK_CLOSE((*a)[i], (*b)[i], 1e-6, 1e-6);
  }
}

// The kernel's own refusals: a bias that is not one value per column (a graph written by hand), an activation it
// does not know.
TEST_CASE("CPU fused products: MatMulBias refuses a bias of the wrong size and an unknown activation, naming them") {
  const auto build = [](std::int64_t bias_len, const std::string& act) {
    graph g("mmb");
    g.add_input("x", type_info::tensor_of(element_type::float32, shape{dimension("n"), 8}));
    g.add_initializer("W", zoo::random_tensor({8, 6}, 3, 1.0f));
    g.add_initializer("b", zoo::random_tensor({bias_len}, 4, 1.0f));
    node n = op("fused", "MatMulBias");
    n.domain = "com.epstack.cpu";
    if (!act.empty()) n.attributes.set("activation", act);
    g.add_node(std::move(n), {"x", "W", "b"}, {"y"});
    g.add_output("y");
    model m;
    m.opsets = {{"", 13}, {"com.epstack.cpu", 1}};
    m.graph = std::move(g);
    return m;
  };
  const std::vector<named_tensor> in{{"x", zoo::random_tensor({3, 8}, 5, 1.0f)}};
  auto good = cpu_session::create(build(6, "Gelu"));
  REQUIRE_MESSAGE(good.has_value(), good.status().to_string());
  auto y = good->run(in);
  REQUIRE_MESSAGE(y.has_value(), y.status().to_string());
  const model gm = build(6, "Gelu");
  check_reference((*y)[0], reference(in[0].value, init(gm, "W"), &init(gm, "b"), "Gelu"));

  auto wrong = cpu_session::create(build(5, ""));
  REQUIRE(wrong.has_value());
  auto r = wrong->run(in);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.code() == errc::invalid_argument);
  CHECK(r.status().message().find("fused") != std::string::npos);
  CHECK(r.status().message().find("one float per column (6)") != std::string::npos);

  auto unknown = cpu_session::create(build(6, "Tanh"));
  REQUIRE_FALSE(unknown.has_value());
  CHECK(unknown.status().message().find("'fused'") != std::string::npos);
  CHECK(unknown.status().message().find("MatMulBias") != std::string::npos);
}

namespace {

// Runs Add itself (Y = A + B, B one value per column of A, or A's own sizes): the test's second provider, so that a
// MatMul's Add is not the CPU provider's.
struct add_probe {
  using provider_concept = execution_provider_tag;
  static constexpr std::string_view type_key = "AddProbeExecutionProvider";
  [[nodiscard]] std::vector<capability> get_capability(const graph_view<graph>& v) const {
    std::vector<capability> r;
    for (node_id n : v.nodes())
      if (v.graph().node(n).op_type == "Add" && v.graph().node(n).domain.empty()) r.push_back(capability::single(n));
    return r;
  }
  [[nodiscard]] Result<std::vector<compute_function>> compile(std::span<const partition> parts) const {
    std::vector<compute_function> fns(parts.size(), [](compute_context& ctx) -> Status {
      const tensor& a = ctx.input(0);
      const tensor& b = ctx.input(1);
      const bool left = a.element_count() >= b.element_count();
      const tensor& big = left ? a : b;
      const tensor& small = left ? b : a;
      tensor& y = ctx.allocate_output(0, element_type::float32, big.sizes());
      const float* p = big.typed<float>();
      const float* q = small.typed<float>();
      float* o = y.typed<float>();
      for (std::size_t i = 0; i < big.element_count(); ++i) o[i] = p[i] + q[i % small.element_count()];
      return {};
    });
    return fns;
  }
};

model single_chain(const std::function<void(graph&)>& tail, std::int64_t opset = 13) {
  graph g("chain");
  // Two sizes unknown: the optimiser's Gemm (before partitioning) leaves MatMul + Add alone.
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{dimension("n"), dimension("m"), 16}));
  g.add_initializer("W", zoo::random_tensor({16, 12}, 21, 0.5f));
  g.add_initializer("b", zoo::random_tensor({12}, 22, 1.0f));
  g.add_initializer("b_row", zoo::random_tensor({1, 12}, 23, 1.0f));
  g.add_node(op("mm", "MatMul"), {"x", "W"}, {"p"});
  tail(g);
  g.add_output("y", type_info::tensor_of(element_type::float32, shape{dimension("n"), dimension("m"), 12}));
  model m;
  m.opsets = {{"", opset}};
  m.graph = std::move(g);
  return m;
}

}  // namespace

// Each case against the nodes unfused (the option off) and, where it says so, fused or not: a [1, N] bias (fused), Add(P, P) (not a bias), ai.onnx Gelu-20 with
// approximate "none" (fused) and "tanh" (not: the epilogue computes the erf form), an Add another provider runs (not),
// and FusedConv's Relu in the SGEMM's epilogue (level extended: NCHW, im2col) keeping a NaN as the Relu node does.
TEST_CASE("CPU fused products: what is fused and what is not, against the nodes unfused") {
  const std::vector<named_tensor> in{{"x", zoo::random_tensor({5, 3, 16}, 24, 1.0f)}};
  struct fuse_case {
    const char* name;
    model m;
    bool fused;
  };
  const std::vector<fuse_case> cases{
      {"[1, N] bias", single_chain([](graph& g) { g.add_node(op("add", "Add"), {"b_row", "p"}, {"y"}); }), true},
      {"Add(P, P)", single_chain([](graph& g) { g.add_node(op("add", "Add"), {"p", "p"}, {"y"}); }), false},
      {"Gelu-20 none", single_chain([](graph& g) {
         g.add_node(op("add", "Add"), {"p", "b"}, {"s"});
         node n = op("gelu", "Gelu");
         n.attributes.set("approximate", std::string("none"));
         g.add_node(std::move(n), {"s"}, {"y"});
       }, 20), true},
      {"Gelu-20 tanh", single_chain([](graph& g) {
         g.add_node(op("add", "Add"), {"p", "b"}, {"s"});
         node n = op("gelu", "Gelu");
         n.attributes.set("approximate", std::string("tanh"));
         g.add_node(std::move(n), {"s"}, {"y"});
       }, 20), false},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto fused = cpu_session::create(c.m);
    session_options off;
    off.set_config(config_keys::cpu_fuse_products, "0");
    auto plain = cpu_session::create(c.m, off);
    REQUIRE_MESSAGE(fused.has_value(), fused.status().to_string());
    REQUIRE_MESSAGE(plain.has_value(), plain.status().to_string());
    const auto counts = op_counts(fused->get_model().graph);
    // Gelu-20 tanh: the bias Add still joins the product; the Gelu stays a node.
    const bool bias_only = std::string(c.name) == "Gelu-20 tanh";
    CHECK((counts.count(fused_op) == 1) == (c.fused || bias_only));
    if (c.fused) CHECK(counts.size() == 1);
    if (bias_only) CHECK(counts.at("Gelu") == 1);
    auto a = fused->run(in);
    auto b = plain->run(in);
    REQUIRE_MESSAGE(a.has_value(), a.status().to_string());
    REQUIRE_MESSAGE(b.has_value(), b.status().to_string());
    EPSTACK_CHECK_CLOSE((*a)[0], (*b)[0], 1e-5, 1e-5);
  }

  // Gemm followed by an activation (ONNX Runtime's FusedGemm): B [N, K] (transB) or [K, N], with or without C, a
  // symbolic batch; not for a batch of 2 known at create (the matrix-vector kernels), alpha 2, or a C of N rows.
  struct gemm_case {
    const char* name;
    bool trans_b, with_c, static_batch, fuses;
    float alpha;
    const char* act;
    bool c_per_row = false;
  };
  for (const auto& gc : std::vector<gemm_case>{{"transB, C, Relu", true, true, false, true, 1.0f, "Relu"},
                                               {"B, no C, Gelu", false, false, false, true, 1.0f, "Gelu"},
                                               {"batch 2 known", true, true, true, false, 1.0f, "Relu"},
                                               {"alpha 2", true, true, false, false, 2.0f, "Relu"},
                                               {"C [N, 1]", false, true, false, false, 1.0f, "Relu", true}}) {
    CAPTURE(gc.name);
    graph g("gemm_act");
    const shape xs = gc.static_batch ? shape{2, 16} : shape{dimension("n"), 16};
    g.add_input("x", type_info::tensor_of(element_type::float32, xs));
    g.add_initializer("W", gc.trans_b ? zoo::random_tensor({12, 16}, 51, 0.5f) : zoo::random_tensor({16, 12}, 51, 0.5f));
    g.add_initializer("c", gc.c_per_row ? zoo::random_tensor({12, 1}, 52, 1.0f) : zoo::random_tensor({12}, 52, 1.0f));
    node gm = op("gemm", "Gemm");
    if (gc.trans_b) gm.attributes.set("transB", std::int64_t{1});
    if (gc.alpha != 1.0f) gm.attributes.set("alpha", gc.alpha);
    std::vector<std::string> ins{"x", "W"};
    if (gc.with_c) ins.push_back("c");
    const std::vector<std::string> outs{"p"};
    g.add_node(std::move(gm), std::span<const std::string>(ins), std::span<const std::string>(outs));
    node a = std::string(gc.act) == "Gelu" ? contrib("act", "Gelu") : op("act", gc.act);
    g.add_node(std::move(a), {"p"}, {"y"});
    g.add_output("y", type_info::tensor_of(element_type::float32, gc.static_batch ? shape{2, 12} : shape{dimension("n"), 12}));
    model gmodel;
    gmodel.opsets = {{"", 13}, {"com.microsoft", 1}};
    gmodel.graph = std::move(g);
    const std::int64_t rows = gc.static_batch ? 2 : (gc.c_per_row ? 12 : 9);
    const std::vector<named_tensor> gin{{"x", zoo::random_tensor({rows, 16}, 53, 1.0f)}};
    auto f = cpu_session::create(gmodel);
    session_options off;
    off.set_config(config_keys::cpu_fuse_products, "0");
    auto p = cpu_session::create(gmodel, off);
    REQUIRE_MESSAGE(f.has_value(), f.status().to_string());
    REQUIRE(p.has_value());
    const auto gcounts = op_counts(f->get_model().graph);
    CHECK((gcounts.count(fused_op) == 1) == gc.fuses);
    CHECK((gcounts.count("Gemm") == 0) == gc.fuses);
    auto ra = f->run(gin);
    auto rb = p->run(gin);
    REQUIRE_MESSAGE(ra.has_value(), ra.status().to_string());
    REQUIRE(rb.has_value());
    EPSTACK_CHECK_CLOSE((*ra)[0], (*rb)[0], 1e-5, 1e-5);
  }

  // The Add on another provider: the MatMul stays a MatMul, the answers the same.
  const model m = single_chain([](graph& g) { g.add_node(op("add", "Add"), {"p", "b"}, {"y"}); });
  auto mixed = session<add_probe, cpu_provider>::create(m);
  REQUIRE_MESSAGE(mixed.has_value(), mixed.status().to_string());
  const auto counts = op_counts(mixed->get_model().graph);
  CHECK(counts.count(fused_op) == 0);
  CHECK(counts.at("MatMul") == 1);
  auto fused = cpu_session::create(m);
  REQUIRE(fused.has_value());
  CHECK(op_counts(fused->get_model().graph).at(fused_op) == 1);
  auto a = mixed->run(in);
  auto b = fused->run(in);
  REQUIRE_MESSAGE(a.has_value(), a.status().to_string());
  REQUIRE(b.has_value());
  EPSTACK_CHECK_CLOSE((*a)[0], (*b)[0], 1e-5, 1e-5);

  // FusedConv + Relu through the SGEMM's epilogue (level extended: no blocked layout), a NaN in the input: the same
  // NaN positions as Conv and Relu as nodes (level disable).
  graph g("conv_relu");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{1, 8, 6, 6}));
  g.add_initializer("w", zoo::random_tensor({16, 8, 3, 3}, 31, 0.3f));
  g.add_initializer("cb", zoo::random_tensor({16}, 32, 0.3f));
  node conv = op("conv", "Conv");
  conv.attributes.set("pads", std::vector<std::int64_t>{1, 1, 1, 1});
  g.add_node(std::move(conv), {"x", "w", "cb"}, {"c"});
  g.add_node(op("relu", "Relu"), {"c"}, {"y"});
  g.add_output("y", type_info::tensor_of(element_type::float32, shape{1, 16, 6, 6}));
  model cm;
  cm.opsets = {{"", 13}};
  cm.graph = std::move(g);
  tensor x = zoo::random_tensor({1, 8, 6, 6}, 33, 1.0f);
  x.typed<float>()[3 * 36 + 2 * 6 + 2] = std::numeric_limits<float>::quiet_NaN();
  session_options ext, none;
  ext.set_graph_optimization_level(graph_optimization_level::extended);
  none.set_graph_optimization_level(graph_optimization_level::disable);
  auto fc = cpu_session::create(cm, ext);
  auto nodes = cpu_session::create(cm, none);
  REQUIRE_MESSAGE(fc.has_value(), fc.status().to_string());
  REQUIRE(nodes.has_value());
  CHECK(op_counts(fc->get_model().graph).at("com.microsoft.FusedConv") == 1);
  auto ra = fc->run({{"x", x}});
  auto rb = nodes->run({{"x", x}});
  REQUIRE(ra.has_value());
  REQUIRE(rb.has_value());
  const float* p = (*ra)[0].typed<float>();
  const float* q = (*rb)[0].typed<float>();
  int nans = 0;
  for (std::size_t i = 0; i < (*ra)[0].element_count(); ++i) {
    CAPTURE(i);
    REQUIRE(std::isnan(p[i]) == std::isnan(q[i]));
    nans += std::isnan(p[i]) ? 1 : 0;
    if (!std::isnan(p[i])) CHECK(std::fabs(p[i] - q[i]) <= 1e-5f + 1e-5f * std::fabs(q[i]));
  }
  CHECK(nans == 16 * 9);  // every output channel at the 3x3 pixels around the NaN
}

// The kernel's path for a B that is not a constant (nothing packed at create: the product, then the epilogue row by
// row) and for K = 0 (Y is the bias, through the activation).
TEST_CASE("CPU fused products: MatMulBias with B a graph input, and with K = 0") {
  for (const std::int64_t K : {std::int64_t{0}, std::int64_t{24}}) {
    CAPTURE(K);
    graph g("mmb_input");
    g.add_input("x", type_info::tensor_of(element_type::float32, shape{7, K}));
    g.add_input("W", type_info::tensor_of(element_type::float32, shape{K, 40}));
    g.add_initializer("b", zoo::random_tensor({40}, 41, 1.0f));
    node n = op("fused", "MatMulBias");
    n.domain = "com.epstack.cpu";
    n.attributes.set("activation", std::string("Relu"));
    g.add_node(std::move(n), {"x", "W", "b"}, {"y"});
    g.add_output("y");
    model m;
    m.opsets = {{"", 13}, {"com.epstack.cpu", 1}};
    m.graph = std::move(g);
    const tensor x = K > 0 ? zoo::random_tensor({7, K}, 42, 1.0f) : tensor(element_type::float32, {7, 0});
    const tensor w = K > 0 ? zoo::random_tensor({K, 40}, 43, 1.0f) : tensor(element_type::float32, {0, 40});
    for (const int threads : {1, 2}) {
      CAPTURE(threads);
      session_options so;
      so.set_intra_op_threads(threads);
      auto s = cpu_session::create(m, so);
      REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
      auto y = s->run({{"x", x}, {"W", w}});
      REQUIRE_MESSAGE(y.has_value(), y.status().to_string());
      REQUIRE((*y)[0].sizes().size() == 2);
      CHECK((*y)[0].sizes()[0] == 7);
      CHECK((*y)[0].sizes()[1] == 40);
      check_reference((*y)[0], reference(x, w, &init(m, "b"), "Relu"));
    }
  }
}
