// Outputs computed over an input's memory (ONNX Runtime's MayInplace): the executor lends an input's arena block to
// an output only when nothing else can see it (no later reader, no view of it alive, not a second input of the call,
// not a graph input, output or initializer), and the blocked convolutions write Y over a dead residual. Every case
// checks the numbers, and the count the session reports says whether memory was lent.
#include <epstack/testing/model_zoo.hpp>
#include <epstack/ir/node_facts.hpp>
#include <epstack/providers/cpu.hpp>
#include <epstack/runtime/session.hpp>

#include "../support/compare.hpp"
#include "../support/graphs.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

using namespace epstack;
using test::op;

namespace {

// Runs Neg and Mul itself, each output over input 0 when the executor lends it, and records per call whether it did.
struct in_place_probe {
  using provider_concept = execution_provider_tag;
  static constexpr std::string_view type_key = "InPlaceProbeExecutionProvider";
  std::shared_ptr<std::vector<std::pair<std::string, bool>>> calls =
      std::make_shared<std::vector<std::pair<std::string, bool>>>();

  [[nodiscard]] std::vector<capability> get_capability(const graph_view<graph>& v) const {
    std::vector<capability> r;
    for (node_id n : v.nodes())
      if (v.graph().node(n).op_type == "Neg" || v.graph().node(n).op_type == "Mul") r.push_back(capability::single(n));
    return r;
  }
  [[nodiscard]] Result<std::vector<compute_function>> compile(std::span<const partition> parts) const {
    std::vector<compute_function> fns;
    for (const auto& p : parts) {
      const auto& nd = p.g->node(p.nodes.front());
      fns.push_back([mul = nd.op_type == "Mul", name = nd.name, calls = calls](compute_context& ctx) -> Status {
        const tensor a = ctx.input(0);
        const tensor b = mul ? ctx.input(1) : tensor();
        if (mul && !std::ranges::equal(a.sizes(), b.sizes())) return Status(errc::invalid_argument, "probe: sizes");
        tensor& y = ctx.allocate_output_over_input(0, 0, element_type::float32, a.sizes());
        calls->emplace_back(name, y.data() == a.data());
        const float* pa = a.typed<float>();
        const float* pb = mul ? b.typed<float>() : nullptr;
        float* py = y.typed<float>();
        for (std::size_t i = 0; i < a.element_count(); ++i) py[i] = mul ? pa[i] * pb[i] : -pa[i];
        return {};
      });
    }
    return fns;
  }
};
using probe_session = session<in_place_probe, cpu_provider>;

model wrap(graph g) {
  model m;
  m.opsets = {{"", 13}};
  m.graph = std::move(g);
  return m;
}
type_info floats6() { return type_info::tensor_of(element_type::float32, shape{6}); }
const tensor x6 = tensor::from<float>({6}, {-2.0f, -0.5f, 0.0f, 0.5f, 1.5f, 3.0f});
float relu(float v) { return std::max(0.0f, v); }

struct probed {
  probe_session s;
  in_place_probe probe;
};
probed make(const model& m) {
  in_place_probe p;
  auto s = probe_session::create(m, {}, {p, cpu_provider{}});
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  return {std::move(*s), p};
}
// The probe's record of the last run: node name -> whether its output took the input's memory.
std::vector<std::pair<std::string, bool>> last_calls(const probed& p, std::size_t per_run) {
  REQUIRE(p.probe.calls->size() >= per_run);
  return {p.probe.calls->end() - static_cast<std::ptrdiff_t>(per_run), p.probe.calls->end()};
}

}  // namespace

TEST_CASE("an intermediate read by no later node lends its memory to the output, run after run") {
  // x -> Relu (CPU) -> a -> Neg (probe) -> b -> Exp (CPU) -> y
  graph g("lend");
  g.add_input("x", floats6());
  g.add_node(op("relu", "Relu"), {"x"}, {"a"});
  g.add_node(op("neg", "Neg"), {"a"}, {"b"});
  g.add_node(op("exp", "Exp"), {"b"}, {"y"});
  g.add_output("y", floats6());
  auto p = make(wrap(g));
  for (int run = 1; run <= 3; ++run) {
    auto out = p.s.run({{"x", x6}});
    REQUIRE_MESSAGE(out.has_value(), out.status().to_string());
    for (std::size_t i = 0; i < 6; ++i) CHECK((*out)[0].view<float>()[i] == doctest::Approx(std::exp(-relu(x6.view<float>()[i]))));
    CHECK(last_calls(p, 1) == std::vector<std::pair<std::string, bool>>{{"neg", true}});
    CHECK(p.s.memory().in_place_outputs == static_cast<std::uint64_t>(run));
  }
}

TEST_CASE("memory is not lent while anything else can see it") {
  SUBCASE("a later node reads the value") {
    // a -> Neg -> b; Sub(a, b) = 2a runs after Neg: written over, it would give 0.
    graph g("later");
    g.add_input("x", floats6());
    g.add_node(op("relu", "Relu"), {"x"}, {"a"});
    g.add_node(op("neg", "Neg"), {"a"}, {"b"});
    g.add_node(op("sub", "Sub"), {"a", "b"}, {"y"});
    g.add_output("y", floats6());
    auto p = make(wrap(g));
    auto out = p.s.run({{"x", x6}});
    REQUIRE_MESSAGE(out.has_value(), out.status().to_string());
    for (std::size_t i = 0; i < 6; ++i) CHECK((*out)[0].view<float>()[i] == doctest::Approx(2 * relu(x6.view<float>()[i])));
    CHECK(last_calls(p, 1) == std::vector<std::pair<std::string, bool>>{{"neg", false}});
    CHECK(p.s.memory().in_place_outputs == 0);
  }
  SUBCASE("a view of it is read later (Reshape shares the block)") {
    // a -> Reshape [2,3] -> r -> Neg -> b -> Reshape [6] -> c; Sub(a, c) = 2a.
    graph g("view");
    g.add_input("x", floats6());
    g.add_initializer("s23", tensor::from<std::int64_t>({2}, {2, 3}));
    g.add_initializer("s6", tensor::from<std::int64_t>({1}, {6}));
    g.add_node(op("relu", "Relu"), {"x"}, {"a"});
    g.add_node(op("r1", "Reshape"), {"a", "s23"}, {"r"});
    g.add_node(op("neg", "Neg"), {"r"}, {"b"});
    g.add_node(op("r2", "Reshape"), {"b", "s6"}, {"c"});
    g.add_node(op("sub", "Sub"), {"a", "c"}, {"y"});
    g.add_output("y", floats6());
    auto p = make(wrap(g));
    auto out = p.s.run({{"x", x6}});
    REQUIRE_MESSAGE(out.has_value(), out.status().to_string());
    for (std::size_t i = 0; i < 6; ++i) CHECK((*out)[0].view<float>()[i] == doctest::Approx(2 * relu(x6.view<float>()[i])));
    CHECK(last_calls(p, 1) == std::vector<std::pair<std::string, bool>>{{"neg", false}});
  }
  SUBCASE("a graph input, an initializer, a graph output") {
    // Neg(x) and Mul(w, x) read what the caller and the session own; a is a graph output that Neg also reads.
    graph g("owned");
    g.add_input("x", floats6());
    g.add_initializer("w", tensor::from<float>({6}, {1, 2, 3, 4, 5, 6}));
    g.add_node(op("neg_x", "Neg"), {"x"}, {"nx"});
    g.add_node(op("mul_w", "Mul"), {"w", "nx"}, {"wx"});
    g.add_node(op("relu", "Relu"), {"wx"}, {"a"});
    g.add_node(op("neg_a", "Neg"), {"a"}, {"y"});
    g.add_output("a", floats6());
    g.add_output("y", floats6());
    auto p = make(wrap(g));
    const tensor x = x6.clone();
    for (int run = 0; run < 2; ++run) {
      auto out = p.s.run({{"x", x}});
      REQUIRE_MESSAGE(out.has_value(), out.status().to_string());
      for (std::size_t i = 0; i < 6; ++i) {
        const float a = relu(-static_cast<float>(i + 1) * x6.view<float>()[i]);
        CHECK((*out)[0].view<float>()[i] == doctest::Approx(a));
        CHECK((*out)[1].view<float>()[i] == doctest::Approx(-a));
        CHECK(x.view<float>()[i] == x6.view<float>()[i]);  // the caller's input is untouched
      }
      // nx dies at Mul but Mul lends input 0 (w, an initializer); the rest read owned memory.
      CHECK(last_calls(p, 3) ==
            std::vector<std::pair<std::string, bool>>{{"neg_x", false}, {"mul_w", false}, {"neg_a", false}});
    }
    CHECK(p.s.memory().in_place_outputs == 0);
  }
  SUBCASE("the same value twice in one call, and an output that leaves the run") {
    // Mul(a, a): a dies at Mul but is both inputs. Neg's output is a graph output: it is allocated outside the run.
    graph g("twice");
    g.add_input("x", floats6());
    g.add_node(op("relu", "Relu"), {"x"}, {"a"});
    g.add_node(op("square", "Mul"), {"a", "a"}, {"sq"});
    g.add_node(op("neg", "Neg"), {"sq"}, {"y"});
    g.add_output("y", floats6());
    auto p = make(wrap(g));
    auto out = p.s.run({{"x", x6}});
    REQUIRE_MESSAGE(out.has_value(), out.status().to_string());
    for (std::size_t i = 0; i < 6; ++i) {
      const float a = relu(x6.view<float>()[i]);
      CHECK((*out)[0].view<float>()[i] == doctest::Approx(-a * a));
    }
    CHECK(last_calls(p, 2) == std::vector<std::pair<std::string, bool>>{{"square", false}, {"neg", false}});
    CHECK(p.s.memory().in_place_outputs == 0);
  }
}

TEST_CASE("a view whose source died lends the block it holds alone") {
  // a -> Reshape [2,3] -> r -> Neg -> b -> Exp -> y: a's last reader is the Reshape, r holds the block alone.
  graph g("alone");
  g.add_input("x", floats6());
  g.add_initializer("s23", tensor::from<std::int64_t>({2}, {2, 3}));
  g.add_node(op("relu", "Relu"), {"x"}, {"a"});
  g.add_node(op("r1", "Reshape"), {"a", "s23"}, {"r"});
  g.add_node(op("neg", "Neg"), {"r"}, {"b"});
  g.add_node(op("exp", "Exp"), {"b"}, {"y"});
  g.add_output("y", type_info::tensor_of(element_type::float32, shape{2, 3}));
  auto p = make(wrap(g));
  auto out = p.s.run({{"x", x6}});
  REQUIRE_MESSAGE(out.has_value(), out.status().to_string());
  for (std::size_t i = 0; i < 6; ++i) CHECK((*out)[0].view<float>()[i] == doctest::Approx(std::exp(-relu(x6.view<float>()[i]))));
  CHECK(last_calls(p, 1) == std::vector<std::pair<std::string, bool>>{{"neg", true}});
  CHECK(p.s.memory().in_place_outputs == 1);
}

TEST_CASE("a call without an executor allocates: nothing is lent outside a session") {
  std::vector<ivalue> ins{ivalue(x6.clone())}, outs(1);
  compute_context ctx(ins, outs);
  tensor& y = ctx.allocate_output_over_input(0, 0, element_type::float32, x6.sizes());
  CHECK(y.data() != ins[0].as_tensor().data());
  CHECK(y.element_count() == 6);
}

namespace {

// A residual block in NCHW: r = Relu(Conv1x1(x)), t = Relu(Conv3x3(r)), y = Relu(Conv(t) + sum); the layout pass makes
// the last Conv + Add + Relu one blocked convolution with Sum. `kernel` is the last convolution's (1 or 3), `sum` is
// "r" (the residual), or "t" (the convolution's own input, X == Sum); `also_later` adds a graph output
// Add(y, r), which reads the residual after the block.
model residual_block(std::int64_t channels, std::int64_t kernel, const std::string& sum, bool also_later) {
  graph g("residual");
  const auto f32 = [](std::vector<std::int64_t> d) { return type_info::tensor_of(element_type::float32, shape::of(d)); };
  g.add_input("x", f32({1, 16, 9, 9}));
  attribute_list pad1;
  attribute pads;
  pads.name = "pads";
  pads.value = std::vector<std::int64_t>{1, 1, 1, 1};
  pad1.set(pads);
  g.add_initializer("w0", zoo::random_tensor({channels, 16, 1, 1}, 11, 0.25f));
  g.add_initializer("b0", zoo::random_tensor({channels}, 12, 0.1f));
  g.add_initializer("w1", zoo::random_tensor({channels, channels, 3, 3}, 13, 0.05f));
  g.add_initializer("w2", zoo::random_tensor({channels, channels, kernel, kernel}, 14, kernel == 1 ? 0.1f : 0.03f));
  g.add_node(op("c0", "Conv"), {"x", "w0", "b0"}, {"r0"});
  g.add_node(op("relu0", "Relu"), {"r0"}, {"r"});
  g.add_node(op("c1", "Conv", pad1), {"r", "w1"}, {"t0"});
  g.add_node(op("relu1", "Relu"), {"t0"}, {"t"});
  g.add_node(op("c2", "Conv", kernel == 3 ? pad1 : attribute_list{}), {"t", "w2"}, {"u"});
  g.add_node(op("add", "Add"), {"u", sum}, {"v"});
  g.add_node(op("relu2", "Relu"), {"v"}, {"y"});
  g.add_output("y");
  if (also_later) {
    g.add_node(op("again", "Add"), {"y", "r"}, {"z"});
    g.add_output("z");
  }
  model m;
  m.opsets = {{"", 13}};
  m.graph = std::move(g);
  return m;
}

using cpu_session = session<cpu_provider>;

// `m` as two sessions on `threads` threads: blocked (Winograd off unless asked for: 3x3 layers run the direct
// kernels) and NCHW.
struct blocked_and_plain {
  cpu_session blocked, plain;
};
blocked_and_plain make_both(const model& m, int threads, bool winograd) {
  session_options so;
  so.set_intra_op_threads(threads);
  so.set_config(config_keys::cpu_winograd, winograd ? "1" : "0");
  so.set_config(config_keys::cpu_layout, "nchwc");
  auto blocked = cpu_session::create(m, so);
  so.set_config(config_keys::cpu_layout, "nchw");
  auto plain = cpu_session::create(m, so);
  REQUIRE_MESSAGE(blocked.has_value(), blocked.status().to_string());
  REQUIRE_MESSAGE(plain.has_value(), plain.status().to_string());
  return {std::move(*blocked), std::move(*plain)};
}

// Both sessions run `in` twice; their outputs agree.
void check_runs_agree(blocked_and_plain& s, const std::vector<named_tensor>& in) {
  for (int run = 0; run < 2; ++run) {
    auto a = s.blocked.run(in);
    auto b = s.plain.run(in);
    REQUIRE_MESSAGE(a.has_value(), a.status().to_string());
    REQUIRE_MESSAGE(b.has_value(), b.status().to_string());
    REQUIRE(a->size() == b->size());
    for (std::size_t i = 0; i < a->size(); ++i) EPSTACK_CHECK_CLOSE((*a)[i], (*b)[i], 1e-4, 1e-4);
  }
}

// Runs `m` blocked and in NCHW on `threads` threads, twice; the outputs agree, and the blocked session's count of
// in-place outputs is returned.
std::uint64_t blocked_in_place(const model& m, int threads, bool winograd = false) {
  CAPTURE(threads);
  auto both = make_both(m, threads, winograd);
  // The residual Add went into the blocked convolution, which is a Winograd one when asked for.
  const graph& bg = both.blocked.get_model().graph;
  CHECK(test::op_counts(bg).count("Add") == (m.graph.find_value("z") != no_id ? 1u : 0u));
  int with_sum = 0;
  for (node_id n = 0; n < bg.node_count(); ++n) {
    const node& nd = bg.node(n);
    if (nd.op_type != "Conv" || nd.inputs.size() < 4 || nd.inputs[3] == no_id) continue;
    ++with_sum;
    CHECK(nd.domain == "com.epstack.nchwc16");
    CHECK((attr_i(nd, "winograd", 0) != 0) == winograd);
  }
  CHECK(with_sum == 1);
  check_runs_agree(both, {{"x", zoo::random_tensor({1, 16, 9, 9}, 21, 1.0f)}});
  CHECK(both.plain.memory().in_place_outputs == 0);
  return both.blocked.memory().in_place_outputs;
}

}  // namespace

TEST_CASE("NCHWc: a convolution writes Y over its residual when nothing reads the residual afterwards") {
  for (int threads : {1, 3}) {
    CHECK(blocked_in_place(residual_block(32, 1, "r", false), threads) == 2);  // two runs, one each
    CHECK(blocked_in_place(residual_block(48, 3, "r", false), threads) == 2);  // a 3x3 one, 3 output blocks
    CHECK(blocked_in_place(residual_block(48, 3, "r", false), threads, true) == 2);  // the same as Winograd
    // 3x3 filters of 480 input channels: 30 blocks x 36 KiB per set of output blocks, more than 1 MiB, two passes:
    // the first starts from the residual in Y, the second loads back what the first stored and adds no residual.
    CHECK(blocked_in_place(residual_block(480, 3, "r", false), threads) == 2);
  }
}

TEST_CASE("NCHWc: a residual read later or the convolution's own input is not overwritten") {
  for (int threads : {1, 3}) {
    CHECK(blocked_in_place(residual_block(32, 1, "r", true), threads) == 0);   // Add(y, r) reads r after the block
    CHECK(blocked_in_place(residual_block(32, 1, "t", false), threads) == 0);  // Conv(t) + t: X is the Sum
    CHECK(blocked_in_place(residual_block(32, 3, "t", false), threads, true) == 0);  // the same, Winograd
  }
}

// A 1x1 convolution over 1040 channels (65 blocks) at 7x7 takes them 128 at a time (8 blocks a pass, 9 passes, the
// last of one block), with a residual: in place (the residual is the blocked copy of an input, read by nothing else)
// the first pass starts from the residual; not in place (an output reads the residual too) the last pass adds it.
TEST_CASE("NCHWc: a 1x1 convolution over 1024 channels or more in passes of 128, with its residual in place or not") {
  for (bool also_later : {false, true}) {
    CAPTURE(also_later);
    graph g("passes_1x1");
    const auto f32 = [](std::vector<std::int64_t> d) { return type_info::tensor_of(element_type::float32, shape::of(d)); };
    g.add_input("x", f32({1, 1040, 7, 7}));
    g.add_input("r", f32({1, 64, 7, 7}));
    g.add_initializer("w", zoo::random_tensor({64, 1040, 1, 1}, 31, 0.05f));
    g.add_initializer("b", zoo::random_tensor({64}, 32, 0.5f));
    g.add_node(op("c", "Conv"), {"x", "w", "b"}, {"u"});
    g.add_node(op("add", "Add"), {"u", "r"}, {"v"});
    g.add_node(op("relu", "Relu"), {"v"}, {"y"});
    g.add_output("y");
    if (also_later) {
      g.add_node(op("again", "Add"), {"y", "r"}, {"z"});
      g.add_output("z");
    }
    model m;
    m.opsets = {{"", 13}};
    m.graph = std::move(g);
    const std::vector<named_tensor> in{{"x", zoo::random_tensor({1, 1040, 7, 7}, 33, 1.0f)},
                                       {"r", zoo::random_tensor({1, 64, 7, 7}, 34, 2.0f)}};
    for (int threads : {1, 2, 3}) {
      CAPTURE(threads);
      auto both = make_both(m, threads, false);
      check_runs_agree(both, in);
      CHECK(both.blocked.memory().in_place_outputs == (also_later ? 0u : 2u));
    }
  }
}
