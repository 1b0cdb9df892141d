// Tests of the CPU LpNormalization kernel (lp_norm.cpp): the ONNX backend examples, axes inside and outside, zero
// norms, long rows and columns on threads against a naive loop, the 16-bit types, errors.
#include "misc_support.hpp"

#include <cmath>

using namespace epstack;
using namespace epstack::test;
using namespace epstack::test::misc;

namespace {
/// x / ||x||_p along `axis` of `dims` (0 where the norm is 0), by its definition.
std::vector<double> naive_lp(const std::vector<double>& x, const ints& dims, std::size_t axis, int p) {
  i64 outer = 1, inner = 1;
  for (std::size_t d = 0; d < axis; ++d) outer *= dims[d];
  for (std::size_t d = axis + 1; d < dims.size(); ++d) inner *= dims[d];
  const i64 n = dims[axis];
  std::vector<double> y(x.size());
  for (i64 o = 0; o < outer; ++o)
    for (i64 i = 0; i < inner; ++i) {
      double s = 0;
      for (i64 j = 0; j < n; ++j) {
        const double v = x[static_cast<std::size_t>((o * n + j) * inner + i)];
        s += p == 1 ? std::fabs(v) : v * v;
      }
      const double norm = p == 1 ? s : std::sqrt(s);
      for (i64 j = 0; j < n; ++j) {
        const auto at = static_cast<std::size_t>((o * n + j) * inner + i);
        y[at] = norm == 0 ? 0 : x[at] / norm;
      }
    }
  return y;
}
const std::vector<float> example{1, 2, 2, 3, 4, 0, 0, 5, 5, 6, 8, 0};  // the backend cases' [2, 2, 3] input
}  // namespace

TEST_CASE("LpNormalization: the ONNX backend examples (L1 and L2, axes 0, 1, last and the default)") {
  const tensor x = make<float>({2, 2, 3}, example);
  // Default: axis -1, p 2 (test_lpnormalization_default).
  const float r2 = 0.70710678f;
  check_tensor<float>(run1<ops::lp_normalization>(op("LpNormalization", 22), {{x}}), {2, 2, 3},
                      {1.0f / 3, 2.0f / 3, 2.0f / 3, 0.6f, 0.8f, 0, 0, r2, r2, 0.6f, 0.8f, 0}, 1e-7, 1e-6);
  // test_l1normalization_axis_last.
  check_tensor<float>(run1<ops::lp_normalization>(op("LpNormalization", 22).set("p", std::int64_t{1}), {{x}}), {2, 2, 3},
                      {0.2f, 0.4f, 0.4f, 3.0f / 7, 4.0f / 7, 0, 0, 0.5f, 0.5f, 3.0f / 7, 4.0f / 7, 0}, 1e-7, 1e-6);
  // test_l2normalization_axis_0: columns across the two outer blocks, e.g. (2, 5) -> 2/sqrt(29), 5/sqrt(29).
  const float a = 2 / std::sqrt(29.0f), b = 5 / std::sqrt(29.0f), c = 1 / std::sqrt(5.0f);
  check_tensor<float>(run1<ops::lp_normalization>(op("LpNormalization", 22).set("axis", std::int64_t{0}), {{x}}), {2, 2, 3},
                      {1, a, a, c, c, 0, 0, b, b, 2 * c, 2 * c, 0}, 1e-7, 1e-6);
  // test_l1normalization_axis_0 and _axis_1, test_l2normalization_axis_1 (opset 1).
  check_tensor<float>(run1<ops::lp_normalization>(op("LpNormalization", 1).set("axis", std::int64_t{0}).set("p", std::int64_t{1}),
                                                  {{make<float>({2}, {3, 4})}}),
                      {2}, {3.0f / 7, 4.0f / 7}, 1e-7, 1e-6);
  const tensor m = make<float>({2, 2}, {3, 4, 6, 8});
  check_tensor<float>(run1<ops::lp_normalization>(op("LpNormalization", 1).set("axis", std::int64_t{1}).set("p", std::int64_t{1}), {{m}}),
                      {2, 2}, {3.0f / 7, 4.0f / 7, 3.0f / 7, 4.0f / 7}, 1e-7, 1e-6);
  check_tensor<float>(run1<ops::lp_normalization>(op("LpNormalization", 1).set("axis", std::int64_t{1}), {{m}}), {2, 2},
                      {0.6f, 0.8f, 0.6f, 0.8f}, 1e-7, 1e-6);
}

TEST_CASE("LpNormalization: a zero norm gives zeros, not NaN - negative values count by their magnitude") {
  check_tensor<float>(run1<ops::lp_normalization>(op("LpNormalization", 22), {{make<float>({2, 2}, {0, 0, -3, 4})}}), {2, 2},
                      {0, 0, -0.6f, 0.8f}, 0, 1e-6);
  check_tensor<double>(run1<ops::lp_normalization>(op("LpNormalization", 22).set("p", std::int64_t{1}).set("axis", std::int64_t{0}),
                                                   {{make<double>({2, 2}, {0, -1, 0, 3})}}),
                       {2, 2}, {0, -0.25, 0, 0.75}, 0, 1e-15);
  // Empty tensors stay empty.
  check_tensor<float>(run1<ops::lp_normalization>(op("LpNormalization", 22), {{make<float>({0, 3}, {})}}), {0, 3}, {});
}

TEST_CASE("LpNormalization of long rows and of columns wider than a block, on a pool of 2 threads, against the definition") {
  thread_pool pool(2);
  lcg rng(22);
  for (const auto& [dims, axis] : std::vector<std::pair<ints, std::size_t>>{{{3, 300, 5}, 1}, {{2, 7, 600}, 1}, {{40, 1000}, 1}, {{1000, 40}, 0}}) {
    CAPTURE(axis);
    std::vector<double> xs(static_cast<std::size_t>(std::accumulate(dims.begin(), dims.end(), i64{1}, std::multiplies<>())));
    for (auto& v : xs) v = rng.uniform();
    for (const int p : {1, 2}) {
      CAPTURE(p);
      const auto want = naive_lp(xs, dims, axis, p);
      kernel_node kn = op("LpNormalization", 22).set("axis", static_cast<std::int64_t>(axis)).set("p", std::int64_t{p});
      check_tensor<double>(run1<ops::lp_normalization>(kn, {{make<double>(dims, xs)}}, &pool), dims, want, 1e-15, 1e-13);
      const std::vector<float> xf(xs.begin(), xs.end());
      const auto wantf = naive_lp(std::vector<double>(xf.begin(), xf.end()), dims, axis, p);
      check_tensor<float>(run1<ops::lp_normalization>(kn, {{make<float>(dims, xf)}}, &pool), dims,
                          std::vector<float>(wantf.begin(), wantf.end()), 1e-7, 1e-6);
    }
  }
}

TEST_CASE("LpNormalization of float16 (opsets 1 and 22) and bfloat16 (opset 22 only)") {
  std::vector<float16> h;
  std::vector<bfloat16> bf;
  for (const float v : example) h.emplace_back(v), bf.emplace_back(v);
  const auto want = naive_lp(std::vector<double>(example.begin(), example.end()), {2, 2, 3}, 2, 2);
  for (const int ver : {1, 22}) {
    const tensor y = run1<ops::lp_normalization>(op("LpNormalization", ver), {{make<float16>({2, 2, 3}, h)}});
    REQUIRE(y.type() == element_type::float16);
    for (std::size_t i = 0; i < want.size(); ++i)
      CHECK(static_cast<double>(static_cast<float>(y.typed<float16>()[i])) == doctest::Approx(want[i]).epsilon(1e-3));
  }
  const tensor yb = run1<ops::lp_normalization>(op("LpNormalization", 22), {{make<bfloat16>({2, 2, 3}, bf)}});
  for (std::size_t i = 0; i < want.size(); ++i)
    CHECK(static_cast<double>(static_cast<float>(yb.typed<bfloat16>()[i])) == doctest::Approx(want[i]).epsilon(8e-3));
  CHECK(run_kernel<ops::lp_normalization>(op("LpNormalization", 1), {{make<bfloat16>({2, 2, 3}, bf)}}).code() == errc::not_implemented);
  CHECK(run_kernel<ops::lp_normalization>(op("LpNormalization", 22), {{make<std::int32_t>({2}, {3, 4})}}).code() == errc::not_implemented);
}

TEST_CASE("LpNormalization errors: p other than 1 or 2, axis out of range") {
  const tensor x = make<float>({2, 2}, {3, 4, 6, 8});
  check_fails<ops::lp_normalization>(op("LpNormalization", 22).set("p", std::int64_t{3}), {{x}}, "p must be 1 or 2, got 3");
  check_fails<ops::lp_normalization>(op("LpNormalization", 22).set("p", std::int64_t{0}), {{x}}, "p must be 1 or 2, got 0");
  check_fails<ops::lp_normalization>(op("LpNormalization", 22).set("axis", std::int64_t{2}), {{x}}, "axis 2 is out of range for rank 2");
  check_fails<ops::lp_normalization>(op("LpNormalization", 22).set("axis", std::int64_t{-3}), {{x}}, "axis -3 is out of range for rank 2");
}
