// Element-wise kernels: math against std:: references, broadcasting in every layout, types, Where, Clip versions,
// n-ary ops, the contrib Gelu and BiasGelu, and threaded loops.
#include "../../support/kernel_harness.hpp"

#include <epstack/providers/cpu/kernels.hpp>

#include <epstack/testing/model_zoo.hpp>

#include <cmath>
#include <limits>

using namespace epstack;
namespace ops = epstack::cpu::ops;
using test::kernel_node;
using test::run1;

namespace {
tensor rnd(std::vector<std::int64_t> s, std::uint64_t seed, float scale = 1.0f) {
  tensor t(element_type::float32, s);
  for (std::size_t i = 0; i < t.element_count(); ++i) t.typed<float>()[i] = scale * zoo::uniform_at(seed, i);
  return t;
}
std::vector<float> apply(const tensor& x, double (*f)(double)) {
  std::vector<float> r;
  for (std::size_t i = 0; i < x.element_count(); ++i) r.push_back(static_cast<float>(f(x.typed<float>()[i])));
  return r;
}
std::vector<std::int64_t> dims(const tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }
}  // namespace

TEST_CASE("unary float kernels match the standard library (fast exp and erf within 3e-7 relative)") {
  const auto x = rnd({4, 1000}, 1, 8.0f);
  const auto check = [&](auto kernel, const char* op, double (*f)(double), double tol) {
    const auto y = run1<decltype(kernel)>(kernel_node{op}, {{x}});
    test::check_tensor<float>(y, dims(x), apply(x, f), tol, tol);
  };
  check(ops::exp{}, "Exp", [](double v) { return std::exp(v); }, 3e-7);
  check(ops::erf{}, "Erf", [](double v) { return std::erf(v); }, 3e-7);
  check(ops::tanh{}, "Tanh", [](double v) { return std::tanh(v); }, 1e-7);
  check(ops::sigmoid{}, "Sigmoid", [](double v) { return 1 / (1 + std::exp(-v)); }, 3e-7);
  check(ops::relu{}, "Relu", [](double v) { return std::max(v, 0.0); }, 0);
  check(ops::neg{}, "Neg", [](double v) { return -v; }, 0);
  check(ops::abs{}, "Abs", [](double v) { return std::fabs(v); }, 0);
  check(ops::floor{}, "Floor", [](double v) { return std::floor(v); }, 0);
  check(ops::ceil{}, "Ceil", [](double v) { return std::ceil(v); }, 0);
  const auto pos = rnd({1000}, 2, 0.5f);
  std::vector<float> want;
  for (std::size_t i = 0; i < 1000; ++i) want.push_back(std::sqrt(std::fabs(pos.typed<float>()[i])));
  tensor absx = pos.clone();
  for (std::size_t i = 0; i < 1000; ++i) absx.typed<float>()[i] = std::fabs(absx.typed<float>()[i]);
  test::check_tensor<float>(run1<ops::sqrt>(kernel_node{"Sqrt"}, {{absx}}), {1000}, want, 1e-7, 1e-7);
}

TEST_CASE("erf at its ends (infinities, huge and tiny values, signed zeros, NaN), and Gelu of huge values and of NaN") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> in{inf, -inf, 20.0f, -20.5f, 1e30f, -3.4e38f, 4.0f, -6.0f, 0.0f, -0.0f, 1e-30f, 0.5f, nan};
  const std::int64_t n = static_cast<std::int64_t>(in.size());
  const auto x = tensor::from<float>(std::span<const std::int64_t>(&n, 1), std::span<const float>(in));
  const auto y = run1<ops::erf>(kernel_node{"Erf"}, {{x}});
  const float* e = y.typed<float>();
  for (std::size_t i = 0; i + 1 < in.size(); ++i) {
    CAPTURE(in[i]);
    CHECK(std::fabs(e[i] - std::erf(in[i])) <= 3e-7);
  }
  CHECK(e[0] == 1.0f);
  CHECK(e[1] == -1.0f);
  CHECK(e[4] == 1.0f);
  CHECK(e[5] == -1.0f);
  CHECK(e[10] == doctest::Approx(1.1283791670955126e-30).epsilon(1e-6));  // 2x/sqrt(pi) near 0
  CHECK(std::isnan(e[12]));
  const auto g = run1<ops::gelu>(kernel_node{"Gelu", 1, "com.microsoft"}, {{x}});
  CHECK(g.typed<float>()[4] == 1e30f);
  CHECK(g.typed<float>()[5] == 0.0f);
  CHECK(std::isnan(g.typed<float>()[12]));
}

TEST_CASE("exp is 0 below the normal range and saturates without overflow to NaN, and Gelu and BiasGelu follow erf") {
  const float inf = std::numeric_limits<float>::infinity();
  const auto x = tensor::from<float>({8}, {-200.0f, -87.0f, 88.0f, 200.0f, -87.5f, -100.0f, -inf, -3.4e38f});
  const auto y = run1<ops::exp>(kernel_node{"Exp"}, {{x}});
  CHECK(y.typed<float>()[1] == doctest::Approx(std::exp(-87.0)).epsilon(1e-6));  // still a normal float
  CHECK(y.typed<float>()[2] == doctest::Approx(std::exp(88.0)).epsilon(1e-6));
  CHECK(std::isfinite(y.typed<float>()[3]));
  // Below exp's normal range: exactly 0, never a subnormal (each one costs an Intel core a microcode assist in the
  // products that read it) nor the saturated 1.2e-38.
  for (std::size_t i : {0u, 4u, 5u, 6u, 7u}) {
    CAPTURE(i);
    CHECK(y.typed<float>()[i] == 0.0f);
  }
  const auto v = rnd({2, 300}, 3, 4.0f), bias = rnd({300}, 4);
  const auto gelu = [](double t) { return 0.5 * t * (1 + std::erf(t / std::sqrt(2.0))); };
  kernel_node g{"Gelu", 1, "com.microsoft"};
  test::check_tensor<float>(run1<ops::gelu>(g, {{v}}), {2, 300}, apply(v, +[](double t) { return 0.5 * t * (1 + std::erf(t / std::sqrt(2.0))); }), 1e-6, 1e-6);
  std::vector<float> want;
  for (std::size_t i = 0; i < 600; ++i) want.push_back(static_cast<float>(gelu(double(v.typed<float>()[i]) + bias.typed<float>()[i % 300])));
  kernel_node bg{"BiasGelu", 1, "com.microsoft"};
  test::check_tensor<float>(run1<ops::bias_gelu>(bg, {{v}, {bias, true}}), {2, 300}, want, 1e-6, 1e-6);
}

TEST_CASE("binary kernels broadcast like numpy in every layout, single- and multi-threaded") {
  thread_pool pool(2);
  const std::vector<std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>> shapes = {
      {{3, 4}, {3, 4}},         {{3, 4}, {4}},         {{3, 4}, {3, 1}},       {{1}, {3, 4}},
      {{2, 1, 4}, {3, 1}},      {{2, 3, 4}, {1, 3, 1}}, {{5, 1, 6, 1}, {7, 1, 8}}, {{64, 257}, {257}},
      {{128, 300}, {128, 1}},   {{4, 1, 2000}, {1, 5, 1}}};
  for (const auto& [sa, sb] : shapes) {
    const auto a = rnd(sa, 5), b = rnd(sb, 6);
    for (thread_pool* p : {static_cast<thread_pool*>(nullptr), &pool}) {
      const auto y = run1<ops::sub>(kernel_node{"Sub"}, {{a}, {b}}, p);
      // Reference through explicit index arithmetic.
      const std::size_t r = std::max(sa.size(), sb.size());
      std::vector<std::int64_t> out(r);
      for (std::size_t i = 0; i < r; ++i) {
        const auto da = i < r - sa.size() ? 1 : sa[i - (r - sa.size())];
        const auto db = i < r - sb.size() ? 1 : sb[i - (r - sb.size())];
        out[i] = std::max(da, db);
      }
      std::vector<float> want;
      std::int64_t total = 1;
      for (auto d : out) total *= d;
      for (std::int64_t o = 0; o < total; ++o) {
        std::int64_t q = o, ia = 0, ib = 0, ma = 1, mb = 1;
        for (std::size_t i = r; i-- > 0;) {
          const auto idx = q % out[i];
          q /= out[i];
          const auto da = i < r - sa.size() ? 1 : sa[i - (r - sa.size())];
          const auto db = i < r - sb.size() ? 1 : sb[i - (r - sb.size())];
          ia += (da == 1 ? 0 : idx) * ma;
          ib += (db == 1 ? 0 : idx) * mb;
          ma *= da;
          mb *= db;
        }
        want.push_back(a.typed<float>()[ia] - b.typed<float>()[ib]);
      }
      test::check_tensor<float>(y, out, want, 0, 0);
    }
  }
  auto bad = test::run_kernel<ops::add>(kernel_node{"Add"}, {{rnd({2, 3}, 1)}, {rnd({4}, 2)}});
  CHECK(bad.code() == errc::invalid_argument);
  CHECK(bad.status().message().find("cannot be broadcast") != std::string::npos);
}

TEST_CASE("integer arithmetic, comparisons, logic and Pow") {
  const auto a = tensor::from<std::int64_t>({4}, {7, -7, 9, 0});
  const auto b = tensor::from<std::int64_t>({4}, {2, 2, 0, 3});
  test::check_tensor<std::int64_t>(run1<ops::div>(kernel_node{"Div"}, {{a}, {b}}), {4}, {3, -3, 0, 0});  // x/0 is 0, no trap
  test::check_tensor<std::int64_t>(run1<ops::mul>(kernel_node{"Mul"}, {{a}, {b}}), {4}, {14, -14, 0, 0});
  test::check_tensor<bool>(run1<ops::greater>(kernel_node{"Greater"}, {{a}, {b}}), {4}, {true, false, true, false});
  test::check_tensor<bool>(run1<ops::equal>(kernel_node{"Equal"}, {{a}, {tensor::from<std::int64_t>({1}, {9})}}), {4},
                           {false, false, true, false});
  const auto t = tensor::from<bool>({4}, {true, true, false, false}), f = tensor::from<bool>({4}, {true, false, true, false});
  test::check_tensor<bool>(run1<ops::and_>(kernel_node{"And"}, {{t}, {f}}), {4}, {true, false, false, false});
  test::check_tensor<bool>(run1<ops::or_>(kernel_node{"Or"}, {{t}, {f}}), {4}, {true, true, true, false});
  test::check_tensor<bool>(run1<ops::xor_>(kernel_node{"Xor"}, {{t}, {f}}), {4}, {false, true, true, false});
  test::check_tensor<bool>(run1<ops::not_>(kernel_node{"Not"}, {{t}}), {4}, {false, false, true, true});
  const auto x = tensor::from<float>({3}, {-2.0f, 0.5f, 3.0f});
  test::check_tensor<float>(run1<ops::pow>(kernel_node{"Pow"}, {{x}, {tensor::scalar(2.0f), true}}), {3}, {4.0f, 0.25f, 9.0f});
  test::check_tensor<float>(run1<ops::pow>(kernel_node{"Pow"}, {{x}, {tensor::from<std::int64_t>({3}, {3, -1, 0})}}), {3},
                            {-8.0f, 2.0f, 1.0f});
  test::check_tensor<std::int64_t>(run1<ops::pow>(kernel_node{"Pow"}, {{a}, {tensor::from<std::int64_t>({4}, {2, 3, 0, 5})}}), {4},
                                   {49, -343, 1, 0});
}

TEST_CASE("comparisons broadcast both ways, Greater and GreaterOrEqual being Less and LessOrEqual with the inputs swapped") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto a = tensor::from<float>({2, 1}, {1.0f, nan});
  const auto b = tensor::from<float>({3}, {0.0f, 1.0f, 2.0f});
  // NaN compares false every way.
  test::check_tensor<bool>(run1<ops::greater>(kernel_node{"Greater"}, {{a}, {b}}), {2, 3}, {true, false, false, false, false, false});
  test::check_tensor<bool>(run1<ops::greater_or_equal>(kernel_node{"GreaterOrEqual"}, {{a}, {b}}), {2, 3},
                           {true, true, false, false, false, false});
  test::check_tensor<bool>(run1<ops::less>(kernel_node{"Less"}, {{a}, {b}}), {2, 3}, {false, false, true, false, false, false});
  test::check_tensor<bool>(run1<ops::less_or_equal>(kernel_node{"LessOrEqual"}, {{a}, {b}}), {2, 3},
                           {false, true, true, false, false, false});
  // The other order: b's shape first.
  test::check_tensor<bool>(run1<ops::greater>(kernel_node{"Greater"}, {{b}, {a}}), {2, 3}, {false, false, true, false, false, false});
  test::check_tensor<bool>(run1<ops::greater_or_equal>(kernel_node{"GreaterOrEqual"}, {{b}, {a}}), {2, 3},
                           {false, true, true, false, false, false});
  // A scalar on either side, unsigned and bool.
  const auto u = tensor::from<std::uint8_t>({3}, {5, 100, 200});
  const auto hundred = tensor::from<std::uint8_t>({1}, {100});
  test::check_tensor<bool>(run1<ops::greater>(kernel_node{"Greater"}, {{u}, {hundred}}), {3}, {false, false, true});
  test::check_tensor<bool>(run1<ops::greater>(kernel_node{"Greater"}, {{hundred}, {u}}), {3}, {true, false, false});
  test::check_tensor<bool>(run1<ops::greater_or_equal>(kernel_node{"GreaterOrEqual"}, {{hundred}, {u}}), {3}, {true, true, false});
  const auto t = tensor::from<bool>({2}, {true, false});
  test::check_tensor<bool>(run1<ops::greater>(kernel_node{"Greater"}, {{t}, {tensor::from<bool>({2}, {false, false})}}), {2},
                           {true, false});
  // Inputs of two element types: not taken.
  auto bad = test::run_kernel<ops::greater>(kernel_node{"Greater"}, {{a}, {tensor::from<std::int64_t>({1}, {1})}});
  CHECK(bad.code() == errc::not_implemented);
}

TEST_CASE("Pow reads every exponent element type exactly: signed, unsigned beyond int64, floating, float16") {
  // An unsigned 64-bit exponent above 2^63 stays positive: 0.5^(2^63 + 1) is 0 (read as int64 it would be negative,
  // and the power infinite); (-1)^(2^63 + 1) is -1; an integer overflow wraps (3^41 mod 2^64, as int64).
  const std::uint64_t big = (std::uint64_t{1} << 63) + 1;
  test::check_tensor<float>(run1<ops::pow>(kernel_node{"Pow"}, {{tensor::from<float>({2}, {0.5f, 1.0f})},
                                                                {tensor::from<std::uint64_t>({2}, {big, big})}}),
                            {2}, {0.0f, 1.0f});
  std::uint64_t wrapped = 1;
  for (int i = 0; i < 41; ++i) wrapped *= 3;
  test::check_tensor<std::int64_t>(
      run1<ops::pow>(kernel_node{"Pow"}, {{tensor::from<std::int64_t>({3}, {-1, 3, 3})},
                                          {tensor::from<std::uint64_t>({3}, {big, 41, 0})}}),
      {3}, {-1, static_cast<std::int64_t>(wrapped), 1}, 0, 0);
  // Negative int8 exponents of an integer base: 2^-1 is 0, (-1)^-3 is -1, 1^-5 is 1.
  test::check_tensor<std::int32_t>(run1<ops::pow>(kernel_node{"Pow"}, {{tensor::from<std::int32_t>({3}, {2, -1, 1})},
                                                                       {tensor::from<std::int8_t>({3}, {-1, -3, -5})}}),
                                   {3}, {0, -1, 1});
  // An integer base with a floating exponent: computed in double, truncated.
  test::check_tensor<std::int32_t>(run1<ops::pow>(kernel_node{"Pow"}, {{tensor::from<std::int32_t>({2}, {2, 9})},
                                                                       {tensor::from<double>({2}, {0.5, 0.5})}}),
                                   {2}, {1, 3});
  // A float base with float16, uint8 and double exponents.
  const auto x = tensor::from<float>({2}, {2.0f, 4.0f});
  test::check_tensor<float>(run1<ops::pow>(kernel_node{"Pow"}, {{x}, {tensor::from<float16>({2}, {float16(3.0f), float16(0.5f)})}}),
                            {2}, {8.0f, 2.0f});
  test::check_tensor<float>(run1<ops::pow>(kernel_node{"Pow"}, {{x}, {tensor::from<std::uint8_t>({2}, {3, 2})}}), {2},
                            {8.0f, 16.0f});
  test::check_tensor<float>(run1<ops::pow>(kernel_node{"Pow"}, {{x}, {tensor::from<double>({1}, {-1.0})}}), {2}, {0.5f, 0.25f});
}

TEST_CASE("Where broadcasts three ways, for numbers and strings") {
  const auto c = tensor::from<bool>({2, 1}, {true, false});
  const auto x = tensor::from<float>({3}, {1, 2, 3});
  const auto y = tensor::from<float>({2, 3}, {10, 20, 30, 40, 50, 60});
  test::check_tensor<float>(run1<ops::where>(kernel_node{"Where"}, {{c}, {x}, {y}}), {2, 3}, {1, 2, 3, 40, 50, 60});
  tensor sx(element_type::string, {2}), sy(element_type::string, {2});
  sx.typed<std::string>()[0] = "a";
  sx.typed<std::string>()[1] = "b";
  sy.typed<std::string>()[0] = "x";
  sy.typed<std::string>()[1] = "y";
  const auto r = run1<ops::where>(kernel_node{"Where"}, {{tensor::from<bool>({2}, {false, true})}, {sx}, {sy}});
  CHECK(r.typed<std::string>()[0] == "x");
  CHECK(r.typed<std::string>()[1] == "b");
}

TEST_CASE("Clip takes min and max as attributes before opset 11 and as optional inputs after") {
  const auto x = tensor::from<float>({5}, {-3, -1, 0, 1, 3});
  kernel_node v6{"Clip", 6};
  v6.set("min", -1.5f).set("max", 2.0f);
  test::check_tensor<float>(run1<ops::clip>(v6, {{x}}), {5}, {-1.5f, -1, 0, 1, 2});
  kernel_node v13{"Clip", 13};
  test::check_tensor<float>(run1<ops::clip>(v13, {{x}, {tensor::scalar(0.0f), true}, {tensor::scalar(6.0f), true}}), {5}, {0, 0, 0, 1, 3});
  test::check_tensor<float>(run1<ops::clip>(v13, {{x}, {}, {tensor::scalar(0.5f)}}), {5}, {-3, -1, 0, 0.5f, 0.5f});
  test::check_tensor<float>(run1<ops::clip>(v13, {{x}}), {5}, {-3, -1, 0, 1, 3});
  const auto xi = tensor::from<std::int32_t>({3}, {-5, 5, 50});
  test::check_tensor<std::int32_t>(run1<ops::clip>(v13, {{xi}, {tensor::scalar<std::int32_t>(0)}, {tensor::scalar<std::int32_t>(10)}}),
                                   {3}, {0, 5, 10});
}

TEST_CASE("Max, Min, Sum and Mean take any number of broadcast inputs") {
  const auto a = tensor::from<float>({2, 2}, {1, 5, 3, 7});
  const auto b = tensor::from<float>({2}, {4, 4});
  const auto c = tensor::from<float>({1}, {2});
  test::check_tensor<float>(run1<ops::max>(kernel_node{"Max"}, {{a}, {b}, {c}}), {2, 2}, {4, 5, 4, 7});
  test::check_tensor<float>(run1<ops::min>(kernel_node{"Min"}, {{a}, {b}, {c}}), {2, 2}, {1, 2, 2, 2});
  test::check_tensor<float>(run1<ops::sum>(kernel_node{"Sum"}, {{a}, {b}, {c}}), {2, 2}, {7, 11, 9, 13});
  test::check_tensor<float>(run1<ops::mean>(kernel_node{"Mean"}, {{a}, {b}}), {2, 2}, {2.5f, 4.5f, 3.5f, 5.5f});
  test::check_tensor<float>(run1<ops::sum>(kernel_node{"Sum"}, {{a}}), {2, 2}, {1, 5, 3, 7});
}

TEST_CASE("parameterised activations: Elu, Selu, HardSigmoid, Softplus, Softsign, ThresholdedRelu, PRelu") {
  const auto x = tensor::from<float>({6}, {-3.0f, -1.0f, -0.25f, 0.0f, 0.5f, 2.0f});
  const auto ref = [&](auto f) {
    std::vector<float> r;
    for (std::size_t i = 0; i < 6; ++i) r.push_back(static_cast<float>(f(double(x.typed<float>()[i]))));
    return r;
  };
  kernel_node elu{"Elu", 6};
  elu.set("alpha", 0.5f);
  test::check_tensor<float>(run1<ops::elu>(elu, {{x}}), {6}, ref([](double v) { return v >= 0 ? v : 0.5 * (std::exp(v) - 1); }), 1e-6, 1e-6);
  test::check_tensor<float>(run1<ops::selu>(kernel_node{"Selu", 6}, {{x}}), {6}, ref([](double v) {
    return v > 0 ? 1.0507009873554805 * v : 1.0507009873554805 * 1.6732632423543772 * (std::exp(v) - 1);
  }), 1e-6, 1e-6);
  test::check_tensor<float>(run1<ops::hard_sigmoid>(kernel_node{"HardSigmoid", 6}, {{x}}), {6},
                            ref([](double v) { return std::clamp(0.2 * v + 0.5, 0.0, 1.0); }), 1e-6, 1e-6);
  test::check_tensor<float>(run1<ops::softplus>(kernel_node{"Softplus", 1}, {{x}}), {6}, ref([](double v) { return std::log1p(std::exp(v)); }), 1e-6, 1e-6);
  test::check_tensor<float>(run1<ops::softsign>(kernel_node{"Softsign", 1}, {{x}}), {6}, ref([](double v) { return v / (1 + std::fabs(v)); }), 1e-6, 1e-6);
  kernel_node tr{"ThresholdedRelu", 10};
  tr.set("alpha", 0.4f);
  test::check_tensor<float>(run1<ops::thresholded_relu>(tr, {{x}}), {6}, ref([](double v) { return v > 0.4 ? v : 0.0; }), 0, 0);
  // PRelu: the slope broadcasts over X (one per channel of a [1, 2, 3] input).
  const auto xc = tensor::from<float>({1, 2, 3}, {-1, 2, -3, -4, 5, -6});
  const auto slope = tensor::from<float>({2, 1}, {0.1f, 0.5f});
  test::check_tensor<float>(run1<ops::prelu>(kernel_node{"PRelu", 9}, {{xc}, {slope, true}}), {1, 2, 3},
                            {-0.1f, 2, -0.3f, -2, 5, -3}, 1e-6, 1e-6);
}
