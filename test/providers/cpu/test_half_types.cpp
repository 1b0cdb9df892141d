// float16 and bfloat16 in the CPU kernels that compute them in float (element-wise math, activations, comparisons,
// n-ary ops, Clip, Where, Softmax, MatMul, Gemm, FusedMatMul, Conv) and QLinearMatMul with float16 scales.
//
// The reference of a half kernel is the float kernel run on the same values widened to float, each result rounded to
// the half type once: equal bits (NaN for NaN), or within one unit in the last place where noted (transcendental
// functions and products, where a different path may round differently).
#include "../../support/kernel_harness.hpp"

#include <epstack/providers/cpu/kernels.hpp>

#include <epstack/testing/model_zoo.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

using namespace epstack;
namespace ops = epstack::cpu::ops;
using test::kernel_input;
using test::kernel_node;
using test::run1;
using dims_t = std::vector<std::int64_t>;

namespace {

template <class H>
constexpr bool is_f16 = std::is_same_v<H, float16>;
template <class T>
struct tag {
  using type = T;
};

// Values uniform in [-scale, scale), rounded to H. With `specials`, every 29th element is one of NaN, +-inf, +-0,
// +-H's largest finite value and its smallest subnormal.
template <class H>
tensor half_rand(const dims_t& sizes, std::uint64_t seed, float scale, bool specials = true) {
  tensor t = tensor::uninitialized(element_type_of_v<H>, sizes);
  H* p = t.typed<H>();
  const H big = H::from_bits(is_f16<H> ? 0x7bff : 0x7f7f), tiny = H::from_bits(1);
  const float sp[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity(), 0.0f, -0.0f, static_cast<float>(big),
                      -static_cast<float>(big), static_cast<float>(tiny)};
  for (std::size_t i = 0; i < t.element_count(); ++i)
    p[i] = H(specials && i % 29 == 7 ? sp[(i / 29) % 8] : scale * zoo::uniform_at(seed, i));
  return t;
}
template <class H>
tensor half_of(const dims_t& sizes, const std::vector<float>& v) {
  tensor t = tensor::uninitialized(element_type_of_v<H>, sizes);
  REQUIRE(t.element_count() == v.size());
  for (std::size_t i = 0; i < v.size(); ++i) t.typed<H>()[i] = H(v[i]);
  return t;
}

// The float tensor of a float16 or bfloat16 tensor's values (exact).
tensor widen(const tensor& h) {
  tensor f = tensor::uninitialized(element_type::float32, h.sizes());
  for (std::size_t i = 0; i < h.element_count(); ++i)
    f.typed<float>()[i] = h.type() == element_type::float16 ? static_cast<float>(h.typed<float16>()[i])
                                                            : static_cast<float>(h.typed<bfloat16>()[i]);
  return f;
}

// Position of a half's bits on the number line (-0 and +0 at 0), for distances in units in the last place.
int ordinal(std::uint16_t bits) { return (bits & 0x8000) ? -static_cast<int>(bits & 0x7fff) : static_cast<int>(bits); }

// `got` (H) against `want` (float, the float kernel's results) rounded to H.
template <class H>
void check_rounded(const tensor& got, const tensor& want, int ulps) {
  REQUIRE(got.type() == element_type_of_v<H>);
  REQUIRE(want.type() == element_type::float32);
  CHECK(dims_t(got.sizes().begin(), got.sizes().end()) == dims_t(want.sizes().begin(), want.sizes().end()));
  REQUIRE(got.element_count() == want.element_count());
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < want.element_count(); ++i) {
    const float w = want.typed<float>()[i];
    const H g = got.typed<H>()[i], r(w);
    bool ok;
    if (std::isnan(w)) ok = std::isnan(static_cast<float>(g));
    else if (ulps == 0) ok = g.bits == r.bits;
    else ok = !std::isnan(static_cast<float>(g)) && std::abs(ordinal(g.bits) - ordinal(r.bits)) <= ulps;
    if (!ok && bad++ == 0) first = i;
  }
  const float gf = want.element_count() ? static_cast<float>(got.typed<H>()[first]) : 0.0f;
  const float wf = want.element_count() ? want.typed<float>()[first] : 0.0f;
  CHECK_MESSAGE(bad == 0, bad, " of ", want.element_count(), " elements differ, the first at ", first, ": got ", gf,
                ", want ", static_cast<float>(H(wf)), " (float result ", wf, ")");
}
void check_same_bools(const tensor& got, const tensor& want) {
  REQUIRE(got.type() == element_type::boolean);
  REQUIRE(want.type() == element_type::boolean);
  REQUIRE(got.element_count() == want.element_count());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.element_count(); ++i) bad += got.typed<bool>()[i] != want.typed<bool>()[i];
  CHECK_MESSAGE(bad == 0, bad, " booleans differ");
}

// Runs K on the half inputs and on their float copies (constant inputs stay constant), and compares.
template <class K, class H>
void check_against_float(const kernel_node& kn, const std::vector<kernel_input>& half_inputs, int ulps,
                         thread_pool* pool = nullptr) {
  std::vector<kernel_input> float_inputs;
  for (const auto& in : half_inputs) {
    kernel_input f = in;
    if (!in.value.empty() && (in.value.type() == element_type::float16 || in.value.type() == element_type::bfloat16))
      f.value = widen(in.value);
    float_inputs.push_back(f);
  }
  const tensor y = run1<K>(kn, half_inputs, pool);
  const tensor ref = run1<K>(kn, float_inputs, pool);
  if (ref.type() == element_type::boolean) check_same_bools(y, ref);
  else check_rounded<H>(y, ref, ulps);
}

template <class K>
void unary_case(const kernel_node& kn, float scale, int ulps, thread_pool* pool = nullptr, dims_t shape = {3, 700}) {
  INFO(kn.op_type);
  check_against_float<K, float16>(kn, {{half_rand<float16>(shape, 11, scale)}}, ulps, pool);
  check_against_float<K, bfloat16>(kn, {{half_rand<bfloat16>(shape, 12, scale)}}, ulps, pool);
}

const std::vector<std::pair<dims_t, dims_t>> broadcast_shapes = {
    {{3, 4}, {3, 4}},       {{3, 4}, {4}},          {{3, 4}, {3, 1}},          {{1}, {3, 4}},     {{3, 4}, {1}},
    {{2, 1, 4}, {3, 1}},    {{2, 3, 4}, {1, 3, 1}}, {{5, 1, 6, 1}, {7, 1, 8}}, {{64, 257}, {257}}, {{4, 1, 2000}, {1, 5, 1}},
    {{40000}, {40000}},     {{600, 70}, {1}}};

template <class K, class H>
void binary_case(const kernel_node& kn, int ulps, float scale_b = 2.0f) {
  thread_pool pool(2);
  std::uint64_t seed = 100;
  for (const auto& shapes : broadcast_shapes) {
    const dims_t& sa = shapes.first;
    const dims_t& sb = shapes.second;
    const tensor a = half_rand<H>(sa, seed++, 4.0f), b = half_rand<H>(sb, seed++, scale_b);
    for (thread_pool* p : {static_cast<thread_pool*>(nullptr), &pool}) {
      INFO(kn.op_type, " ", a.element_count(), " x ", b.element_count(), (p ? " threaded" : ""));
      check_against_float<K, H>(kn, {{a}, {b}}, ulps, p);
    }
  }
}
template <class K>
void binary_both(const kernel_node& kn, int ulps, float scale_b = 2.0f) {
  binary_case<K, float16>(kn, ulps, scale_b);
  binary_case<K, bfloat16>(kn, ulps, scale_b);
}

}  // namespace

TEST_CASE("float16 and bfloat16 unary math equals the float kernel rounded once") {
  thread_pool pool(2);
  unary_case<ops::exp>(kernel_node{"Exp"}, 12.0f, 1);
  unary_case<ops::log>(kernel_node{"Log"}, 100.0f, 1);
  unary_case<ops::sqrt>(kernel_node{"Sqrt"}, 100.0f, 0);
  unary_case<ops::reciprocal>(kernel_node{"Reciprocal"}, 3.0f, 0);
  unary_case<ops::sigmoid>(kernel_node{"Sigmoid"}, 10.0f, 1);
  unary_case<ops::tanh>(kernel_node{"Tanh"}, 4.0f, 1);
  unary_case<ops::erf>(kernel_node{"Erf"}, 3.0f, 1);
  unary_case<ops::floor>(kernel_node{"Floor"}, 50.0f, 0);
  unary_case<ops::ceil>(kernel_node{"Ceil"}, 50.0f, 0);
  unary_case<ops::round>(kernel_node{"Round", 11}, 50.0f, 0);
  unary_case<ops::neg>(kernel_node{"Neg"}, 5.0f, 0);
  unary_case<ops::abs>(kernel_node{"Abs"}, 5.0f, 0);
  unary_case<ops::sign>(kernel_node{"Sign"}, 5.0f, 0);
  unary_case<ops::relu>(kernel_node{"Relu", 14}, 5.0f, 0);
  unary_case<ops::sin>(kernel_node{"Sin", 7}, 6.0f, 1);
  unary_case<ops::cos>(kernel_node{"Cos", 7}, 6.0f, 1);
  unary_case<ops::atan>(kernel_node{"Atan", 7}, 6.0f, 1);
  // Large enough for the threaded loops (in chunks that do not start on a block boundary).
  unary_case<ops::exp>(kernel_node{"Exp"}, 8.0f, 1, &pool, {3, 7001});
  unary_case<ops::neg>(kernel_node{"Neg"}, 8.0f, 0, &pool, {50001});
}

TEST_CASE("float16 and bfloat16 activations equal the float kernel rounded once") {
  unary_case<ops::leaky_relu>(kernel_node{"LeakyRelu", 16}.set("alpha", 0.1f), 5.0f, 0);
  unary_case<ops::elu>(kernel_node{"Elu", 6}.set("alpha", 0.7f), 5.0f, 1);
  unary_case<ops::selu>(kernel_node{"Selu", 6}, 5.0f, 1);
  unary_case<ops::hard_sigmoid>(kernel_node{"HardSigmoid", 6}, 5.0f, 0);
  unary_case<ops::softplus>(kernel_node{"Softplus", 1}, 30.0f, 1);
  unary_case<ops::softsign>(kernel_node{"Softsign", 1}, 5.0f, 0);
  unary_case<ops::thresholded_relu>(kernel_node{"ThresholdedRelu", 10}.set("alpha", 0.5f), 5.0f, 0);
  unary_case<ops::shrink>(kernel_node{"Shrink", 9}.set("lambd", 0.25f).set("bias", 0.125f), 2.0f, 0);
  unary_case<ops::gelu>(kernel_node{"Gelu", 1, "com.microsoft"}, 5.0f, 1);
  unary_case<ops::gelu_onnx>(kernel_node{"Gelu", 20}, 5.0f, 1);
  unary_case<ops::gelu_onnx>(kernel_node{"Gelu", 20}.set("approximate", std::string("tanh")), 5.0f, 1);
  unary_case<ops::mish>(kernel_node{"Mish", 18}, 5.0f, 1);
  unary_case<ops::swish>(kernel_node{"Swish", 24}, 5.0f, 1);
}

TEST_CASE("float16 and bfloat16 arithmetic broadcasts like the float kernel and rounds once") {
  binary_both<ops::add>(kernel_node{"Add", 14}, 0);
  binary_both<ops::sub>(kernel_node{"Sub", 14}, 0);
  binary_both<ops::mul>(kernel_node{"Mul", 14}, 0);
  binary_both<ops::div>(kernel_node{"Div", 14}, 0);
  binary_both<ops::mod>(kernel_node{"Mod", 13}.set("fmod", std::int64_t{1}), 0);
  binary_both<ops::prelu>(kernel_node{"PRelu", 16}, 0);
  binary_both<ops::pow>(kernel_node{"Pow", 15}, 1, 3.0f);
  binary_both<ops::bias_gelu>(kernel_node{"BiasGelu", 1, "com.microsoft"}, 1);
}

TEST_CASE("float16 and bfloat16 comparisons give the float kernel's booleans") {
  binary_both<ops::equal>(kernel_node{"Equal", 19}, 0, 4.0f);
  binary_both<ops::greater>(kernel_node{"Greater", 13}, 0);
  binary_both<ops::less>(kernel_node{"Less", 13}, 0);
  binary_both<ops::greater_or_equal>(kernel_node{"GreaterOrEqual", 16}, 0);
  binary_both<ops::less_or_equal>(kernel_node{"LessOrEqual", 16}, 0);
  // Hand-checked: NaN equals nothing, -0 equals +0, infinity exceeds the largest finite value.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const tensor a = half_of<float16>({4}, {nan, -0.0f, inf, 1.0f}), b = half_of<float16>({4}, {nan, 0.0f, 65504.0f, 1.0f});
  const tensor eq = run1<ops::equal>(kernel_node{"Equal", 19}, {{a}, {b}});
  CHECK_FALSE(eq.typed<bool>()[0]);
  CHECK(eq.typed<bool>()[1]);
  CHECK_FALSE(eq.typed<bool>()[2]);
  CHECK(eq.typed<bool>()[3]);
  const tensor gt = run1<ops::greater>(kernel_node{"Greater", 13}, {{a}, {b}});
  CHECK_FALSE(gt.typed<bool>()[0]);
  CHECK(gt.typed<bool>()[2]);
}

TEST_CASE("float16 and bfloat16 Pow takes any exponent type and the constant-exponent shortcuts") {
  const tensor x16 = half_rand<float16>({5, 60}, 21, 6.0f), xb = half_rand<bfloat16>({5, 60}, 22, 6.0f);
  for (const float e : {2.0f, 0.5f, 3.0f, 1.0f, -1.5f}) {
    const tensor ex = tensor::from<float>({}, {e});
    INFO("exponent ", e);
    check_against_float<ops::pow, float16>(kernel_node{"Pow", 15}, {{x16}, {ex, true}}, 1);
    check_against_float<ops::pow, bfloat16>(kernel_node{"Pow", 15}, {{xb}, {ex, true}}, 1);
  }
  const tensor ei = tensor::from<std::int64_t>(dims_t{60}, std::vector<std::int64_t>(60, 3));
  check_against_float<ops::pow, float16>(kernel_node{"Pow", 15}, {{x16}, {ei}}, 1);
  // A float base with a float16 exponent.
  const tensor xf = zoo::random_tensor({4, 6}, 23, 3.0f), e16 = half_rand<float16>({6}, 24, 2.0f, false);
  const tensor y = run1<ops::pow>(kernel_node{"Pow", 15}, {{xf}, {e16}});
  const tensor ref = run1<ops::pow>(kernel_node{"Pow", 15}, {{xf}, {widen(e16)}});
  REQUIRE(y.type() == element_type::float32);
  for (std::size_t i = 0; i < y.element_count(); ++i) {
    const float g = y.typed<float>()[i], w = ref.typed<float>()[i];
    CHECK((std::isnan(w) ? std::isnan(g) : g == w));
  }
}

TEST_CASE("float16 and bfloat16 NaN and infinity propagate, overflow gives infinity, sums round once") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const tensor a = half_of<float16>({5}, {inf, -inf, nan, 65504.0f, 300.0f});
  const tensor b = half_of<float16>({5}, {-inf, -inf, 1.0f, 65504.0f, 300.0f});
  const tensor s = run1<ops::add>(kernel_node{"Add", 14}, {{a}, {b}});
  CHECK(std::isnan(static_cast<float>(s.typed<float16>()[0])));
  CHECK(static_cast<float>(s.typed<float16>()[1]) == -inf);
  CHECK(std::isnan(static_cast<float>(s.typed<float16>()[2])));
  CHECK(static_cast<float>(s.typed<float16>()[3]) == inf);  // 131008 overflows float16
  const tensor m = run1<ops::mul>(kernel_node{"Mul", 14}, {{a}, {b}});
  CHECK(static_cast<float>(m.typed<float16>()[4]) == inf);  // 90000
  // bfloat16 holds 90000 (as 90112) and NaN from inf * 0.
  const tensor mb = run1<ops::mul>(kernel_node{"Mul", 14}, {{half_of<bfloat16>({2}, {300.0f, inf})}, {half_of<bfloat16>({2}, {300.0f, 0.0f})}});
  CHECK(static_cast<float>(mb.typed<bfloat16>()[0]) == 90112.0f);
  CHECK(std::isnan(static_cast<float>(mb.typed<bfloat16>()[1])));
  const tensor r = run1<ops::relu>(kernel_node{"Relu", 14}, {{half_of<float16>({3}, {nan, -inf, inf})}});
  CHECK(std::isnan(static_cast<float>(r.typed<float16>()[0])));
  CHECK(r.typed<float16>()[1].bits == 0);
  CHECK(static_cast<float>(r.typed<float16>()[2]) == inf);
  const tensor sq = run1<ops::sqrt>(kernel_node{"Sqrt"}, {{half_of<bfloat16>({2}, {-1.0f, inf})}});
  CHECK(std::isnan(static_cast<float>(sq.typed<bfloat16>()[0])));
  CHECK(static_cast<float>(sq.typed<bfloat16>()[1]) == inf);
  // 2048 + 1 + 1: 2050 when computed in float and rounded once (pairwise float16 sums would stay at 2048).
  const tensor x = half_of<float16>({1}, {2048.0f}), one = half_of<float16>({1}, {1.0f});
  const tensor sum = run1<ops::sum>(kernel_node{"Sum", 13}, {{x}, {one}, {one}});
  CHECK(static_cast<float>(sum.typed<float16>()[0]) == 2050.0f);
  const tensor mean = run1<ops::mean>(kernel_node{"Mean", 13}, {{x}, {one}, {one}});
  CHECK(mean.typed<float16>()[0].bits == float16(2050.0f / 3.0f).bits);
  // 1 + 2^-11 is halfway between float16 neighbours: to even (1).
  const tensor h = run1<ops::add>(kernel_node{"Add", 14}, {{one}, {half_of<float16>({1}, {0.00048828125f})}});
  CHECK(static_cast<float>(h.typed<float16>()[0]) == 1.0f);
}

TEST_CASE("float16 and bfloat16 Max, Min, Sum and Mean broadcast and fold in float") {
  const std::vector<dims_t> shapes = {{2, 3, 40}, {3, 1}, {40}};
  const auto run = [&](auto tag) {
    using H = typename decltype(tag)::type;
    std::vector<kernel_input> ins;
    std::uint64_t seed = 31;
    for (const auto& s : shapes) ins.push_back({half_rand<H>(s, seed++, 3.0f)});
    check_against_float<ops::max, H>(kernel_node{"Max", 13}, ins, 0);
    check_against_float<ops::min, H>(kernel_node{"Min", 13}, ins, 0);
    check_against_float<ops::sum, H>(kernel_node{"Sum", 13}, ins, 0);
    check_against_float<ops::mean, H>(kernel_node{"Mean", 13}, ins, 0);
    check_against_float<ops::sum, H>(kernel_node{"Sum", 13}, {ins[0]}, 0);
    thread_pool pool(2);
    const std::vector<kernel_input> big = {{half_rand<H>({30, 1000}, 41, 3.0f)}, {half_rand<H>({1000}, 42, 3.0f)}};
    check_against_float<ops::mean, H>(kernel_node{"Mean", 13}, big, 0, &pool);
  };
  run(tag<float16>{});
  run(tag<bfloat16>{});
}

TEST_CASE("float16 and bfloat16 Clip with bounds as inputs or attributes, and Where") {
  const auto run = [&](auto tag) {
    using H = typename decltype(tag)::type;
    const tensor x = half_rand<H>({4, 500}, 51, 3.0f);
    check_against_float<ops::clip, H>(kernel_node{"Clip", 13}, {{x}, {half_of<H>({}, {-0.5f})}, {half_of<H>({}, {1.25f})}}, 0);
    check_against_float<ops::clip, H>(kernel_node{"Clip", 13}, {{x}, {}, {half_of<H>({}, {0.75f})}}, 0);
    check_against_float<ops::clip, H>(kernel_node{"Clip", 13}, {{x}}, 0);
    check_against_float<ops::clip, H>(kernel_node{"Clip", 6}.set("min", -1.0f).set("max", 0.5f), {{x}}, 0);
    // Where copies elements: same bits as the chosen input's.
    bool cond[3] = {true, false, true};
    const tensor c = tensor::from<bool>(dims_t{3, 1}, std::span<const bool>(cond, 3));
    const tensor a = half_rand<H>({3, 4}, 52, 2.0f), b = half_rand<H>({4}, 53, 2.0f);
    const tensor w = run1<ops::where>(kernel_node{"Where", 16}, {{c}, {a}, {b}});
    REQUIRE(w.type() == element_type_of_v<H>);
    for (std::size_t i = 0; i < 12; ++i)
      CHECK(w.typed<H>()[i].bits == (cond[i / 4] ? a.typed<H>()[i].bits : b.typed<H>()[i % 4].bits));
  };
  run(tag<float16>{});
  run(tag<bfloat16>{});
}

TEST_CASE("float16 and bfloat16 Softmax and LogSoftmax equal the float kernel rounded") {
  thread_pool pool(2);
  const auto run = [&](auto tag) {
    using H = typename decltype(tag)::type;
    const tensor rows = half_rand<H>({6, 300}, 61, 6.0f, false), mid = half_rand<H>({3, 5, 70}, 62, 6.0f, false);
    const tensor big = half_rand<H>({64, 600}, 63, 6.0f, false);
    for (const char* op : {"Softmax", "LogSoftmax"}) {
      INFO(op);
      const bool log = std::string(op) == "LogSoftmax";
      const auto check = [&](const kernel_node& kn, const tensor& x, thread_pool* p) {
        if (log) check_against_float<ops::log_softmax, H>(kn, {{x}}, 1, p);
        else check_against_float<ops::softmax, H>(kn, {{x}}, 1, p);
      };
      check(kernel_node{op, 13}, rows, nullptr);
      check(kernel_node{op, 13}.set("axis", std::int64_t{1}), mid, nullptr);
      check(kernel_node{op, 11}.set("axis", std::int64_t{1}), mid, nullptr);  // over the flattened [5 * 70]
      check(kernel_node{op, 13}, big, &pool);
    }
    const tensor y = run1<ops::softmax>(kernel_node{"Softmax", 13}, {{half_of<H>({2}, {0.0f, 0.0f})}});
    CHECK(static_cast<float>(y.typed<H>()[0]) == 0.5f);
    CHECK(static_cast<float>(y.typed<H>()[1]) == 0.5f);
  };
  run(tag<float16>{});
  run(tag<bfloat16>{});
}

TEST_CASE("float16 and bfloat16 MatMul, Gemm and FusedMatMul compute in float with constant or fed weights") {
  thread_pool pool(2);
  const auto run = [&](auto tag) {
    using H = typename decltype(tag)::type;
    const std::vector<std::pair<dims_t, dims_t>> shapes = {
        {{5, 40}, {40, 33}}, {{2, 1, 7, 16}, {3, 16, 9}}, {{16}, {16, 5}}, {{4, 16}, {16}}, {{3, 64, 48}, {48, 70}},
        {{3, 40}, {40, 33}}};  // 3 static rows: a constant B in full-depth panels
    std::uint64_t seed = 71;
    for (const auto& sh : shapes)
      for (const bool constant : {false, true}) {
        const dims_t& sa = sh.first;
        const dims_t& sb = sh.second;
        INFO("MatMul ", sa.size(), "-D x ", sb.size(), "-D", constant ? " constant B" : "");
        const tensor a = half_rand<H>(sa, seed++, 1.0f, false), b = half_rand<H>(sb, seed++, 1.0f, false);
        check_against_float<ops::matmul, H>(kernel_node{"MatMul"}, {{a}, {b, constant}}, 1, &pool);
      }
    // Gemm: transposed operands, alpha and beta, C broadcast from a row.
    const tensor A = half_rand<H>({10, 6}, 81, 1.0f, false), B = half_rand<H>({7, 10}, 82, 1.0f, false);
    const tensor C = half_rand<H>({7}, 83, 1.0f, false);
    kernel_node g{"Gemm"};
    g.set("transA", std::int64_t{1}).set("transB", std::int64_t{1}).set("alpha", 0.5f).set("beta", 2.0f);
    for (const bool constant : {false, true}) {
      check_against_float<ops::gemm, H>(g, {{A}, {B, constant}, {C}}, 1);
      check_against_float<ops::gemm, H>(g, {{A}, {B, constant}}, 1);
    }
    // A Linear layer's 3 rows: its constant B (transposed) in full-depth panels, the bias row added as it is stored.
    kernel_node lin{"Gemm"};
    lin.set("transB", std::int64_t{1});
    const tensor A3 = half_rand<H>({3, 10}, 86, 1.0f, false);
    for (const bool constant : {false, true}) check_against_float<ops::gemm, H>(lin, {{A3}, {B, constant}, {C}}, 1);
    // FusedMatMul with transA (the packed constant B is not used then) and transB.
    kernel_node f{"FusedMatMul", 1, "com.microsoft"};
    f.set("transA", std::int64_t{1}).set("transB", std::int64_t{1}).set("alpha", 0.25f);
    const tensor P = half_rand<H>({2, 12, 5}, 84, 1.0f, false), Q = half_rand<H>({9, 12}, 85, 1.0f, false);
    for (const bool constant : {false, true}) check_against_float<ops::fused_matmul, H>(f, {{P}, {Q, constant}}, 1);
  };
  run(tag<float16>{});
  run(tag<bfloat16>{});
  // Mixed element types are refused.
  auto bad = test::run_kernel<ops::matmul>(kernel_node{"MatMul"}, {{half_rand<float16>({2, 3}, 1, 1.0f)},
                                                                   {half_rand<bfloat16>({3, 2}, 2, 1.0f)}});
  CHECK_FALSE(bad.has_value());
}

TEST_CASE("float16 and bfloat16 Conv computes in float: im2col, depthwise, 1-D causal with groups") {
  thread_pool pool(2);
  struct conv_case {
    dims_t x, w;
    dims_t pads, strides;
    std::int64_t group = 1;
    bool bias = true;
  };
  const std::vector<conv_case> cases = {
      {{1, 4, 9, 9}, {6, 4, 3, 3}, {1, 1, 1, 1}, {}, 1, true},
      {{2, 3, 8, 8}, {3, 1, 3, 3}, {1, 1, 1, 1}, {2, 2}, 3, true},
      {{2, 4, 8}, {4, 1, 4}, {3, 0}, {}, 4, false},  // CausalConvWithState's depthwise causal convolution
      {{1, 8, 20, 20}, {16, 4, 1, 1}, {}, {}, 2, true}};
  const auto run = [&](auto tag) {
    using H = typename decltype(tag)::type;
    std::uint64_t seed = 91;
    for (const auto& c : cases)
      for (const bool constant : {false, true}) {
        kernel_node kn{"Conv", 11};
        if (!c.pads.empty()) kn.set("pads", c.pads);
        if (!c.strides.empty()) kn.set("strides", c.strides);
        if (c.group != 1) kn.set("group", c.group);
        const tensor x = half_rand<H>(c.x, seed++, 1.0f, false), w = half_rand<H>(c.w, seed++, 1.0f, false);
        std::vector<kernel_input> ins = {{x}, {w, constant}};
        if (c.bias) ins.push_back({half_rand<H>({c.w[0]}, seed++, 1.0f, false)});
        INFO("Conv X rank ", c.x.size(), " group ", c.group, constant ? " constant W" : "");
        check_against_float<ops::conv, H>(kn, ins, 1, &pool);
      }
  };
  run(tag<float16>{});
  run(tag<bfloat16>{});
}

TEST_CASE("QLinearMatMul takes float16 and bfloat16 scales") {
  const auto i8 = [](dims_t s, std::vector<std::int8_t> v) { return tensor::from<std::int8_t>(s, v); };
  const auto u8 = [](dims_t s, std::vector<std::uint8_t> v) { return tensor::from<std::uint8_t>(s, v); };
  const auto h16 = [](float v) { return half_of<float16>({1}, {v}); };
  kernel_node kn{"QLinearMatMul", 21};
  // ONNX's test_qlinearmatmul_2D_int8_float16.
  {
    const tensor y = run1<ops::qlinear_matmul>(
        kn, {{i8({2, 4}, {81, 109, -127, 111, -124, 87, -128, -98})}, {h16(0.00659942626953125f)}, {i8({1}, {-14})},
             {i8({4, 3}, {25, -76, 117, -67, -101, -128, -127, 0, 119, 0, 127, 120})}, {h16(0.007049560546875f)},
             {i8({1}, {-13})}, {h16(0.0106964111328125f)}, {i8({1}, {-9})}});
    REQUIRE(y.type() == element_type::int8);
    const std::vector<std::int8_t> want = {41, -12, -9, 1, -75, -128};
    CHECK(std::vector<std::int8_t>(y.typed<std::int8_t>(), y.typed<std::int8_t>() + 6) == want);
  }
  // ONNX's test_qlinearmatmul_2D_uint8_float16.
  {
    const tensor y = run1<ops::qlinear_matmul>(
        kn, {{u8({2, 4}, {208, 236, 0, 238, 3, 214, 255, 29})}, {h16(0.00659942626953125f)}, {u8({1}, {113})},
             {u8({4, 3}, {152, 51, 244, 60, 26, 255, 0, 127, 246, 127, 254, 247})}, {h16(0.007049560546875f)},
             {u8({1}, {114})}, {h16(0.0106964111328125f)}, {u8({1}, {118})}});
    REQUIRE(y.type() == element_type::uint8);
    const std::vector<std::uint8_t> want = {168, 115, 255, 1, 66, 151};
    CHECK(std::vector<std::uint8_t>(y.typed<std::uint8_t>(), y.typed<std::uint8_t>() + 6) == want);
  }
  // By hand: (2 * 1 + 4 * 3) * 0.5 * 0.25 / 0.125 = 14, + 1. And 5 * 0.5 / 1 = 2.5 rounds to even: 2, + 10.
  for (const element_type st : {element_type::float16, element_type::bfloat16}) {
    const auto sc = [&](float v) { return st == element_type::float16 ? half_of<float16>({}, {v}) : half_of<bfloat16>({}, {v}); };
    const tensor y = run1<ops::qlinear_matmul>(kn, {{i8({1, 2}, {2, 4})}, {sc(0.5f)}, {i8({}, {0})}, {i8({2, 1}, {1, 3})},
                                                    {sc(0.25f)}, {i8({}, {0})}, {sc(0.125f)}, {i8({}, {1})}});
    CHECK(y.typed<std::int8_t>()[0] == 15);
    const tensor z = run1<ops::qlinear_matmul>(kn, {{u8({1, 1}, {5})}, {sc(0.5f)}, {u8({}, {0})}, {u8({1, 1}, {1})},
                                                    {sc(1.0f)}, {u8({}, {0})}, {sc(1.0f)}, {u8({}, {10})}});
    CHECK(z.typed<std::uint8_t>()[0] == 12);
  }
  // An integer scale is refused.
  auto bad = test::run_kernel<ops::qlinear_matmul>(
      kn, {{i8({1, 1}, {1})}, {tensor::from<std::int32_t>({}, {1})}, {i8({}, {0})}, {i8({1, 1}, {1})}, {h16(1.0f)},
           {i8({}, {0})}, {h16(1.0f)}, {i8({}, {0})}});
  CHECK_FALSE(bad.has_value());
}
