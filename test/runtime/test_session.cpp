#include <epstack/testing/model_zoo.hpp>
#include <epstack/providers/cpu.hpp>
#include <epstack/runtime/session.hpp>

#include "../support/compare.hpp"
#include "../support/cpu_time.hpp"
#include "../support/denormals.hpp"
#include "../support/graphs.hpp"
#include "../support/reused_weight_memory.hpp"
#include "../support/temp_dir.hpp"
#include "../support/test_providers.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <new>
#include <thread>
#include <vector>

using namespace epstack;
using test::op;

namespace {

tensor uniform(std::initializer_list<std::int64_t> sizes, std::uint64_t seed) {
  return zoo::random_tensor(sizes, seed, 1.0f);
}

// The MLP computed naively in double: y = W2 relu(W1 x + b1) + b2 ...
std::vector<double> reference_mlp(const model& m, const tensor& x) {
  const auto& g = m.graph;
  const auto batch = x.sizes()[0];
  std::vector<double> cur(x.view<float>().begin(), x.view<float>().end());
  std::int64_t width = x.sizes()[1];
  for (int l = 0;; ++l) {
    const auto w = g.find_value("layer" + std::to_string(l) + ".weight");
    if (w == no_id) break;
    const auto& W = *g.value(w).initializer;
    const auto& B = *g.value(g.find_value("layer" + std::to_string(l) + ".bias")).initializer;
    const auto out = W.sizes()[0];
    std::vector<double> next(static_cast<std::size_t>(batch * out));
    const bool last = g.find_value("layer" + std::to_string(l + 1) + ".weight") == no_id;
    for (std::int64_t b = 0; b < batch; ++b)
      for (std::int64_t o = 0; o < out; ++o) {
        double s = B.view<float>()[static_cast<std::size_t>(o)];
        for (std::int64_t i = 0; i < width; ++i)
          s += static_cast<double>(W.view<float>()[static_cast<std::size_t>(o * width + i)]) * cur[static_cast<std::size_t>(b * width + i)];
        next[static_cast<std::size_t>(b * out + o)] = last ? s : std::max(0.0, s);
      }
    cur = std::move(next);
    width = out;
  }
  return cur;
}

void check_close(const tensor& got, const std::vector<double>& want, double atol = 1e-4, double rtol = 1e-4) {
  REQUIRE(got.element_count() == want.size());
  const auto v = got.view<float>();
  const auto c = test::compare_values([&](std::size_t i) { return v[i]; }, [&](std::size_t i) { return want[i]; },
                                      want.size(), atol, rtol);
  CHECK_MESSAGE(c.ok(), c.message());
}

using cpu_session = session<cpu_provider>;
static_assert(std::is_same_v<session<>, basic_session<cpu_provider>>);  // the CPU provider is appended
static_assert(std::is_same_v<session<test::ops_provider<"AExecutionProvider">>,
                             basic_session<test::ops_provider<"AExecutionProvider">, cpu_provider>>);
static_assert(std::is_same_v<basic_session_from<boost::mp11::mp_list<cpu_provider>>, cpu_session>);

}  // namespace

TEST_CASE("a session runs the zoo MLP on the CPU provider and matches a double-precision reference") {
  const auto m = zoo::make_mlp({64, 128, 96, 10});
  auto s = cpu_session::create(m);
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  REQUIRE(s->inputs().size() == 1);
  CHECK(s->inputs()[0].name == "input");
  CHECK(s->inputs()[0].type.to_string() == "float[batch,64]");
  CHECK(s->outputs()[0].name == "logits");
  const auto x = uniform({5, 64}, 7);
  auto out = s->run({{"input", x}});
  REQUIRE_MESSAGE(out.has_value(), out.status().to_string());
  REQUIRE(out->size() == 1);
  CHECK((*out)[0].sizes()[0] == 5);
  CHECK((*out)[0].sizes()[1] == 10);
  check_close((*out)[0], reference_mlp(m, x));
  // Gemm + Relu twice and the last Gemm: the CPU provider's products take their Relu (MatMulBias, after partitioning).
  CHECK(s->plan().main.partitions.size() == 3);
  CHECK(s->plan().to_table().find("CPUExecutionProvider: 3 nodes in 3 partitions (0 fused)") != std::string::npos);
  CHECK(test::op_counts(s->get_model().graph).at("com.epstack.cpu.MatMulBias") == 2);
}

TEST_CASE("a session reports its intra-op thread count: the option, or the core count for 0") {
  session_options three;
  three.set_intra_op_threads(3);
  auto s3 = cpu_session::create(zoo::make_mlp({8, 4}), three);
  REQUIRE_MESSAGE(s3.has_value(), s3.status().to_string());
  CHECK(s3->intra_op_threads() == 3);
  auto s0 = cpu_session::create(zoo::make_mlp({8, 4}));
  REQUIRE_MESSAGE(s0.has_value(), s0.status().to_string());
  CHECK(s0->intra_op_threads() == static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

TEST_CASE("a session is created from a path and from a buffer") {
  test::temp_dir dir;
  const auto m = zoo::make_mlp({8, 4});
  save_options so;
  so.mode = external_data_mode::all_external;
  REQUIRE(save_model(m, dir / "m.onnx", so).is_ok());
  auto from_path = cpu_session::create(dir / "m.onnx");
  REQUIRE_MESSAGE(from_path.has_value(), from_path.status().to_string());
  const auto bytes = test::read_file(dir / "m.onnx");
  const auto span = std::as_bytes(std::span(bytes.data(), bytes.size()));
  CHECK(cpu_session::create(span).code() == errc::invalid_argument);  // external data, no folder given
  session_options opts;
  opts.set_config(config_keys::external_initializers_folder, dir.path().string());
  auto from_buffer = cpu_session::create(span, opts);
  REQUIRE_MESSAGE(from_buffer.has_value(), from_buffer.status().to_string());
  const auto x = uniform({2, 8}, 3);
  auto a = from_path->run({{"input", x}});
  auto b = from_buffer->run({{"input", x}});
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  CHECK((*a)[0].same_content((*b)[0]));
}

TEST_CASE("bad run calls are invalid_argument naming the input or output") {
  auto s = cpu_session::create(zoo::make_mlp({8, 4}, dimension("batch")));
  REQUIRE(s.has_value());
  const auto x = uniform({2, 8}, 1);
  const auto expect = [&](Result<std::vector<tensor>> r, const std::string& msg) {
    CHECK(r.code() == errc::invalid_argument);
    CHECK(r.status().message() == msg);
  };
  // ONNX Runtime's messages (InferenceSession::ValidateInputs), so that its users recognise them.
  expect(s->run({{"inputs", x}}), "Invalid input name: inputs");
  expect(s->run({}), "Missing Input: input");
  expect(s->run({{"input", x}, {"input", x}}), "input 'input' is given twice");
  expect(s->run({{"input", tensor::from<std::int64_t>({1, 8}, {1, 2, 3, 4, 5, 6, 7, 8})}}),
         "Unexpected input data type. Actual: (tensor(int64)) , expected: (tensor(float)) for input 'input'");
  expect(s->run({{"input", uniform({8}, 1)}}),
         "Invalid rank for input: input Got: 1 Expected: 2 Please fix either the inputs/outputs or the model.");
  expect(s->run({{"input", uniform({2, 7}, 1)}}),
         "Got invalid dimensions for input: input for the following indices\n index: 1 Got: 7 Expected: 8\n Please fix "
         "either the inputs/outputs or the model.");
  expect(s->run({{"input", tensor()}}), "input 'input' is an empty tensor");
  const std::vector<named_tensor> feeds{{"input", x}};
  const std::vector<std::string> wrong{"logit"};
  expect(s->run(feeds, wrong), "'logit' is not an output of the model");
  const std::vector<std::string> right{"logits"};
  CHECK(s->run(feeds, right).has_value());
}

TEST_CASE("inputs are accepted as ONNX Runtime accepts them: scalars fed as [1], no shape, symbolic dims, unread inputs") {
  // y = x * sr + bias: `sr` is declared a scalar ([]), as voice-activity exporters declare the sample rate; `any` has
  // no shape at all; `x` is [n, 3] with n symbolic; `unused` is read by no node.
  model m;
  m.opsets = {{"", 13}};
  auto& g = m.graph;
  g.set_name("accept");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{dimension("n"), 3}));
  g.add_input("sr", type_info::tensor_of(element_type::float32, shape{}));
  type_info no_shape;
  no_shape.kind = type_kind::tensor;
  no_shape.elem = element_type::float32;
  g.add_input("any", no_shape);
  g.add_input("unused", type_info::tensor_of(element_type::float32, shape{2, 2}));
  g.add_node(op("mul", "Mul"), {"x", "sr"}, {"xs"});
  g.add_node(op("add", "Add"), {"xs", "any"}, {"y"});
  g.add_output("y", type_info::tensor_of(element_type::float32, shape{dimension("n"), 3}));
  auto s = cpu_session::create(m);
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  const auto x = tensor::from<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const auto run = [&](tensor sr, tensor any) { return s->run({{"x", x}, {"sr", std::move(sr)}, {"any", std::move(any)}}); };
  // A one-element [1] for the scalar, a [3] row for the shapeless input; `unused` left out.
  auto r = run(tensor::from<float>({1}, {2}), tensor::from<float>({3}, {10, 20, 30}));
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  const std::vector<float> want{12, 24, 36, 18, 30, 42};
  REQUIRE((*r)[0].element_count() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) CHECK((*r)[0].typed<float>()[i] == want[i]);
  // The declared scalar itself, and a [1, 1] (ONNX Runtime checks no shape of an input declared []).
  CHECK(run(tensor::scalar(2.0f), tensor::scalar(0.0f)).has_value());
  auto r11 = run(tensor::from<float>({1, 1}, {2}), tensor::scalar(0.0f));
  REQUIRE_MESSAGE(r11.has_value(), r11.status().to_string());
  CHECK((*r11)[0].rank() == 2);  // broadcasting [n,3] with [1,1]
  // A symbolic dimension takes 0.
  auto empty = s->run({{"x", tensor(element_type::float32, {0, 3})}, {"sr", tensor::scalar(1.0f)}, {"any", tensor::scalar(0.0f)}});
  REQUIRE_MESSAGE(empty.has_value(), empty.status().to_string());
  CHECK((*empty)[0].element_count() == 0);
  // An input that is read cannot be left out; one that is not read may be given, and is still checked.
  CHECK(s->run({{"x", x}, {"sr", tensor::scalar(1.0f)}}).status().message() == "Missing Input: any");
  auto bad_unused = s->run({{"x", x}, {"sr", tensor::scalar(1.0f)}, {"any", tensor::scalar(0.0f)}, {"unused", tensor::scalar(0.0f)}});
  CHECK(bad_unused.code() == errc::invalid_argument);
  CHECK(bad_unused.status().message() ==
        "Invalid rank for input: unused Got: 0 Expected: 2 Please fix either the inputs/outputs or the model.");
  // Every fixed dimension that differs is listed.
  auto two_bad = s->run({{"x", x}, {"sr", tensor::scalar(1.0f)}, {"any", tensor::scalar(0.0f)},
                         {"unused", tensor(element_type::float32, {3, 4})}});
  CHECK(two_bad.status().message() ==
        "Got invalid dimensions for input: unused for the following indices\n index: 0 Got: 3 Expected: 2\n index: 1 Got: "
        "4 Expected: 2\n Please fix either the inputs/outputs or the model.");
  // A wrong element type on a shapeless input is still refused.
  CHECK(run(tensor::scalar(1.0f), tensor::from<double>({1}, {1.0})).status().message() ==
        "Unexpected input data type. Actual: (tensor(double)) , expected: (tensor(float)) for input 'any'");
}

TEST_CASE("a provider stack: the scripted provider fuses what it claims and the CPU takes the rest") {
  graph g("mixed");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{4}));
  g.add_node(op("a", "Relu"), {"x"}, {"va"});
  g.add_node(op("b", "Exp"), {"va"}, {"vb"});
  g.add_node(op("c", "Neg"), {"vb"}, {"vc"});
  g.add_node(op("d", "Add"), {"vc", "x"}, {"y"});
  g.add_output("y", type_info::tensor_of(element_type::float32, shape{4}));
  model m;
  m.opsets = {{"", 13}};
  m.graph = g;
  using prov = test::scripted_provider<"ScriptedExecutionProvider">;
  prov p;
  p.script = [](const graph_view<graph>&) {
    meta_def md;
    md.name = "bc";
    return std::vector<capability>{capability::group({1, 2}, md)};
  };
  auto s = session<prov>::create(m, {}, {p, cpu_provider{}});
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  CHECK(s->plan().providers == std::vector<std::string>{"ScriptedExecutionProvider", "CPUExecutionProvider"});
  CHECK(*p.compile_calls == 1);
  const auto x = tensor::from<float>({4}, {-1.0f, 0.5f, 1.0f, 2.0f});
  auto out = s->run({{"input_does_not_exist", x}});
  CHECK(out.code() == errc::invalid_argument);
  out = s->run({{"x", x}});
  REQUIRE_MESSAGE(out.has_value(), out.status().to_string());
  const float xs[] = {-1.0f, 0.5f, 1.0f, 2.0f};
  for (int i = 0; i < 4; ++i) CHECK((*out)[0].view<float>()[i] == doctest::Approx(-std::exp(std::max(0.0f, xs[i])) + xs[i]));
  // session.disable_cpu_ep_fallback: a and d are left for the CPU provider.
  session_options no_fallback;
  no_fallback.set_config(config_keys::disable_cpu_ep_fallback, "1");
  auto refused = session<prov>::create(m, no_fallback, {p, cpu_provider{}});
  CHECK(refused.code() == errc::fail);
  CHECK(refused.status().message().find("'a' (Relu), 'd' (Add)") != std::string::npos);
}

TEST_CASE("a selective CPU provider compiles only its kernels, other nodes are not_implemented") {
  using relu_only = basic_cpu_provider<ops::relu>;
  auto s = basic_session<relu_only>::create(zoo::make_mlp({8, 4, 2}));
  CHECK(s.code() == errc::not_implemented);
  CHECK(s.status().message().find("'/layer0/Gemm' (Gemm)") != std::string::npos);
  CHECK(s.status().message().find("[CPUExecutionProvider]") != std::string::npos);
}

TEST_CASE("binary kernels broadcast like numpy") {
  const auto run_binary = [](const char* op_type, tensor a, tensor b) {
    graph g("bin");
    g.add_input("a", type_info::tensor_of(a.type(), a.get_shape()));
    g.add_input("b", type_info::tensor_of(b.type(), b.get_shape()));
    g.add_node(op("n", op_type), {"a", "b"}, {"y"});
    g.add_output("y");
    model m;
    m.opsets = {{"", 13}};
    m.graph = g;
    auto s = cpu_session::create(m);
    REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
    auto r = s->run({{"a", a}, {"b", b}});
    REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
    return (*r)[0];
  };
  auto y = run_binary("Add", tensor::from<float>({2, 3}, {1, 2, 3, 4, 5, 6}), tensor::from<float>({3}, {10, 20, 30}));
  CHECK(std::vector<float>(y.view<float>().begin(), y.view<float>().end()) == std::vector<float>{11, 22, 33, 14, 25, 36});
  y = run_binary("Sub", tensor::from<float>({2, 1}, {1, 2}), tensor::from<float>({1, 3}, {1, 2, 3}));
  CHECK(std::vector<std::int64_t>(y.sizes().begin(), y.sizes().end()) == std::vector<std::int64_t>{2, 3});
  CHECK(std::vector<float>(y.view<float>().begin(), y.view<float>().end()) == std::vector<float>{0, -1, -2, 1, 0, -1});
  y = run_binary("Mul", tensor::from<std::int64_t>({2, 2}, {1, 2, 3, 4}), tensor::scalar<std::int64_t>(3));
  CHECK(std::vector<std::int64_t>(y.view<std::int64_t>().begin(), y.view<std::int64_t>().end()) ==
        std::vector<std::int64_t>{3, 6, 9, 12});
  y = run_binary("Div", tensor::from<float>({2, 2, 2}, {2, 4, 6, 8, 10, 12, 14, 16}), tensor::from<float>({2, 1, 2}, {2, 4, 1, 2}));
  CHECK(std::vector<float>(y.view<float>().begin(), y.view<float>().end()) == std::vector<float>{1, 1, 3, 2, 10, 6, 14, 8});
}

TEST_CASE("Gemm honours transA transB alpha beta and C broadcasting and MatMul broadcasts batches") {
  // Y = 0.5 * A^T * B^T + 2 * C, A [3,2] (so A^T is [2,3]), B [4,3], C [4] broadcast over rows.
  graph g("gemm");
  g.add_input("A", type_info::tensor_of(element_type::float32, shape{3, 2}));
  g.add_input("B", type_info::tensor_of(element_type::float32, shape{4, 3}));
  g.add_input("C", type_info::tensor_of(element_type::float32, shape{4}));
  node n = op("gemm", "Gemm");
  n.attributes.set("alpha", 0.5f);
  n.attributes.set("beta", 2.0f);
  n.attributes.set("transA", std::int64_t{1});
  n.attributes.set("transB", std::int64_t{1});
  g.add_node(std::move(n), {"A", "B", "C"}, {"Y"});
  g.add_input("P", type_info::tensor_of(element_type::float32, shape{2, 1, 3, 4}));
  g.add_input("Q", type_info::tensor_of(element_type::float32, shape{5, 4, 2}));
  g.add_node(op("mm", "MatMul"), {"P", "Q"}, {"R"});
  g.add_output("Y");
  g.add_output("R");
  model m;
  m.opsets = {{"", 13}};
  m.graph = g;
  auto s = cpu_session::create(m);
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  const auto A = uniform({3, 2}, 1), B = uniform({4, 3}, 2), C = uniform({4}, 3);
  const auto P = uniform({2, 1, 3, 4}, 4), Q = uniform({5, 4, 2}, 5);
  auto r = s->run({{"A", A}, {"B", B}, {"C", C}, {"P", P}, {"Q", Q}});
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  std::vector<double> want(2 * 4);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      double acc = 0;
      for (int k = 0; k < 3; ++k) acc += double(A.view<float>()[k * 2 + i]) * B.view<float>()[j * 3 + k];
      want[i * 4 + j] = 0.5 * acc + 2.0 * C.view<float>()[j];
    }
  check_close((*r)[0], want, 1e-5, 1e-5);
  CHECK(std::vector<std::int64_t>((*r)[1].sizes().begin(), (*r)[1].sizes().end()) == std::vector<std::int64_t>{2, 5, 3, 2});
  std::vector<double> mm;
  for (int b0 = 0; b0 < 2; ++b0)
    for (int b1 = 0; b1 < 5; ++b1)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 2; ++j) {
          double acc = 0;
          for (int k = 0; k < 4; ++k) acc += double(P.view<float>()[b0 * 12 + i * 4 + k]) * Q.view<float>()[b1 * 8 + k * 2 + j];
          mm.push_back(acc);
        }
  check_close((*r)[1], mm, 1e-5, 1e-5);
}

namespace {

// A provider that runs Neg and Relu itself, into memory from its own allocator, which counts what is live.
struct pool_stats {
  std::atomic<int> live{0}, total{0};
  std::atomic<std::size_t> bytes{0};
};
template <int Misalign = 0, bool Fail = false>
struct allocating_provider {
  using provider_concept = execution_provider_tag;
  static constexpr std::string_view type_key = "AllocatingExecutionProvider";
  static constexpr data_layout preferred_layout = data_layout::nhwc;
  std::shared_ptr<pool_stats> stats = std::make_shared<pool_stats>();

  [[nodiscard]] void* allocate(std::size_t n) const {
    if (Fail) return nullptr;
    ++stats->live;
    ++stats->total;
    stats->bytes += n;
    return static_cast<std::byte*>(::operator new(n + 64, std::align_val_t{64})) + Misalign;
  }
  void deallocate(void* p, std::size_t) const {
    --stats->live;
    ::operator delete(static_cast<std::byte*>(p) - Misalign, std::align_val_t{64});
  }
  [[nodiscard]] std::vector<capability> get_capability(const graph_view<graph>& v) const {
    std::vector<capability> r;
    for (node_id n : v.nodes())
      if (v.graph().node(n).op_type == "Neg" || v.graph().node(n).op_type == "Relu") r.push_back(capability::single(n));
    return r;
  }
  [[nodiscard]] Result<std::vector<compute_function>> compile(std::span<const partition> parts) const {
    std::vector<compute_function> fns;
    for (const auto& p : parts) {
      const bool neg = p.g->node(p.nodes.front()).op_type == "Neg";
      fns.push_back([neg](compute_context& ctx) -> Status {
        const auto& x = ctx.input(0);
        auto& y = ctx.allocate_output(0, element_type::float32, x.sizes());
        for (std::size_t i = 0; i < x.element_count(); ++i)
          y.view<float>()[i] = neg ? -x.view<float>()[i] : std::max(0.0f, x.view<float>()[i]);
        return {};
      });
    }
    return fns;
  }
};
static_assert(provider_traits<allocating_provider<>>::has_allocator);
static_assert(provider_traits<allocating_provider<>>::preferred_layout == data_layout::nhwc);
static_assert(!provider_traits<cpu_provider>::has_allocator);
static_assert(provider_traits<cpu_provider>::preferred_layout == data_layout::nchw);

// x -> Neg -> Relu -> Exp (CPU) -> y: the first two run on the allocating provider.
model neg_relu_exp() {
  graph g("chain");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{6}));
  g.add_node(op("n", "Neg"), {"x"}, {"a"});
  g.add_node(op("r", "Relu"), {"a"}, {"b"});
  g.add_node(op("e", "Exp"), {"b"}, {"y"});
  g.add_output("y", type_info::tensor_of(element_type::float32, shape{6}));
  model m;
  m.opsets = {{"", 13}};
  m.graph = g;
  return m;
}

}  // namespace

TEST_CASE("a provider's own allocator holds the intermediates of its partitions, each returned after its last use") {
  using prov = allocating_provider<>;
  prov p;
  auto s = session<prov>::create(neg_relu_exp(), {}, {p, cpu_provider{}});
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  CHECK(s->plan().to_table().find("AllocatingExecutionProvider: 2 nodes") != std::string::npos);
  const auto x = tensor::from<float>({6}, {-2.0f, -1.0f, 0.0f, 0.5f, 1.0f, 3.0f});
  for (int round = 1; round <= 3; ++round) {
    auto out = s->run({{"x", x}});
    REQUIRE_MESSAGE(out.has_value(), out.status().to_string());
    for (std::size_t i = 0; i < 6; ++i)
      CHECK((*out)[0].view<float>()[i] == doctest::Approx(std::exp(std::max(0.0f, -x.view<float>()[i]))));
    CHECK(p.stats->total == 2 * round);  // a and b, every run
    CHECK(p.stats->live == 0);           // both returned once Relu and Exp had read them
  }
  CHECK(p.stats->bytes == 3 * 2 * 6 * sizeof(float));
}

TEST_CASE("a provider allocator that fails or misaligns is a runtime_exception naming the provider") {
  SUBCASE("no memory") {
    using prov = allocating_provider<0, true>;
    auto s = session<prov>::create(neg_relu_exp(), {}, {prov{}, cpu_provider{}});
    REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
    auto out = s->run({{"x", tensor::from<float>({6}, {1, 2, 3, 4, 5, 6})}});
    CHECK(out.code() == errc::runtime_exception);
    CHECK(out.status().message().find("provider AllocatingExecutionProvider: its allocator returned no memory") !=
          std::string::npos);
    CHECK(out.status().message().find("node 'n' (Neg)") != std::string::npos);
  }
  SUBCASE("misaligned") {
    using prov = allocating_provider<4>;
    prov p;
    auto s = session<prov>::create(neg_relu_exp(), {}, {p, cpu_provider{}});
    REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
    auto out = s->run({{"x", tensor::from<float>({6}, {1, 2, 3, 4, 5, 6})}});
    CHECK(out.code() == errc::runtime_exception);
    CHECK(out.status().message().find("not 64-byte aligned") != std::string::npos);
    CHECK(p.stats->live == 0);  // the misaligned block went back
  }
}

TEST_CASE("session.set_denormal_as_zero flushes subnormal results and operands on both threads of a run, only for it") {
  test::check_set_denormal_as_zero<cpu_session>([](const model& m, const session_options& o) { return cpu_session::create(m, o); });
}

// ONNX Runtime's keys for how the intra-op threads wait: by default the session's worker spins after the run's loops
// (CPU time while the caller sleeps after a run: tens of milliseconds on an idle machine; the pause hints alone half a
// millisecond or more where measured); with session.intra_op.allow_spinning other than "1" it sleeps at once, and with
// session.force_spinning_stop=1 it sleeps when the run returns (less than 3 ms while the caller sleeps 300). The
// answers are the same either way. A run is a Relu over 2^22 floats, 8 chunks: a worker that comes late for a run's
// loop (the caller took every chunk) sleeps until the next, so a spinning session is given a few runs to show it.
TEST_CASE("session.intra_op.allow_spinning and session.force_spinning_stop put the intra-op worker to sleep") {
  using namespace std::chrono_literals;
  constexpr std::int64_t n = std::int64_t{1} << 22;
  model m;
  m.opsets = {{"", 17}};
  m.graph.set_name("relu");
  m.graph.add_input("x", type_info::tensor_of(element_type::float32, shape{n}));
  m.graph.add_node(test::op("relu", "Relu"), {"x"}, {"y"});
  m.graph.add_output("y", type_info::tensor_of(element_type::float32, shape{n}));
  std::vector<float> values(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
  const std::int64_t sizes[] = {n};
  const tensor x = tensor::from<float>(sizes, values);
  struct config {
    const char* key;
    const char* value;
    bool spins;
  };
  for (const config c : {config{nullptr, nullptr, true}, config{"session.intra_op.allow_spinning", "1", true},
                         config{"session.intra_op.allow_spinning", "0", false},
                         config{"session.intra_op.allow_spinning", "false", false},
                         config{"session.force_spinning_stop", "1", false},
                         config{"session.force_spinning_stop", "0", true},
                         config{"session.inter_op.allow_spinning", "0", true}}) {
    CAPTURE(c.key == nullptr ? "unset" : c.key);
    CAPTURE(c.value == nullptr ? "" : c.value);
    session_options o;
    o.set_intra_op_threads(2);
    if (c.key != nullptr) o.set_config(c.key, c.value);
    auto s = cpu_session::create(m, o);
    REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
    // The answers are checked after the CPU time is measured: checking 4M floats first (tens of milliseconds when
    // the test is compiled without optimisation and sanitised) outlasted the worker's spin.
    std::vector<tensor> out;
    const auto run = [&] {
      auto r = s->run({{"x", x}});
      REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
      out = std::move(*r);
    };
    const auto check_answers = [&] {
      const auto y = out[0].view<float>();
      REQUIRE(y.size() == values.size());
      std::size_t right = 0;
      for (std::size_t i = 0; i < values.size(); ++i) right += y[i] == std::max(values[i], 0.0f) ? 1 : 0;
      CHECK(right == values.size());
    };
    for (int i = 0; i < 5; ++i) {
      run();
      check_answers();
    }
    std::vector<double> ms;
    for (int tries = 0; tries < 5; ++tries) {
      run();
      ms.push_back(test::others_cpu_ms(300ms));
      check_answers();
      if (c.spins && ms.back() > 0.1) break;
    }
    std::string seen;
    for (const double v : ms) seen += std::to_string(v) + " ms ";
    CAPTURE(seen);
    if (c.spins) CHECK(ms.back() > 0.1);
    else CHECK(*std::max_element(ms.begin(), ms.end()) < 3.0);
  }
}

// Weight memory released by a session is kept for the next create (weight_memory.hpp's huge_chunk_cache), holding
// what was written there: the CPU provider's layouts write all they read (test/support/reused_weight_memory.hpp).
TEST_CASE("a session created on reused weight memory computes what the first one did") {
  const test::kept_weight_memory keep;
  struct one {
    model m;
    std::string input;
    std::initializer_list<std::int64_t> sizes;
  };
  // Padded channel blocks (MobileNetV2's 24, 40...; the convnet's 290), Winograd filters of 290 (not a multiple of
  // the 12-row panels), classifiers of 1000 columns (not a multiple of 32), a batch unknown at create and batch 1.
  const one cases[] = {{zoo::make_mobilenetv2(32, 1000, 1.0f), "input", {1, 3, 32, 32}},
                       {zoo::make_convnet({40, 290}, 16, 10), "image", {1, 3, 16, 16}},
                       {zoo::make_mlp({300, 1000, 1000, 10}), "input", {3, 300}},
                       {zoo::make_mlp({300, 1000, 1000, 10}, dimension(1)), "input", {1, 300}}};
  for (const auto& c : cases) {
    CAPTURE(c.m.graph.name());
    test::check_create_on_poisoned_memory([&] { return cpu_session::create(c.m); }, c.input, uniform(c.sizes, 11));
  }
}
