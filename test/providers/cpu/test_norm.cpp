// Tests of the CPU normalisation kernels: BatchNormalization, LayerNormalization (ONNX and contrib),
// SkipLayerNormalization, Softmax and LogSoftmax, against double-precision references computed here.
#include <epstack/providers/cpu/kernels.hpp>

#include "../../support/kernel_harness.hpp"
#include "../../support/test_values.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace epstack;
using namespace epstack::test;
namespace ops = epstack::cpu::ops;

namespace {


kernel_node op_node(std::string op, int opset, std::string domain = {}) {
  return kernel_node(std::move(op), opset, std::move(domain));
}

template <class T>
std::vector<T> cast_all(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// ---- references (double) ----
std::vector<double> ref_batch_norm(const dims_t& d, const std::vector<double>& x, const std::vector<double>& s,
                                   const std::vector<double>& b, const std::vector<double>& m, const std::vector<double>& v,
                                   double eps, bool spatial) {
  const std::int64_t features = spatial ? d[1] : count_of(d) / d[0];
  const std::int64_t inner = spatial ? count_of(d) / (d[0] * d[1]) : 1;
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto c = static_cast<std::size_t>((static_cast<std::int64_t>(i) / inner) % features);
    y[i] = s[c] * (x[i] - m[c]) / std::sqrt(v[c] + eps) + b[c];
  }
  return y;
}

struct ln_ref {
  std::vector<double> y, mean, inv;
};
// Scale and bias given at full normalised size.
ln_ref ref_layer_norm(const std::vector<double>& x, std::int64_t rows, std::int64_t n, const std::vector<double>& s,
                      const std::vector<double>* b, double eps) {
  ln_ref r;
  r.y.resize(x.size());
  for (std::int64_t i = 0; i < rows; ++i) {
    double mean = 0, var = 0;
    for (std::int64_t j = 0; j < n; ++j) mean += x[static_cast<std::size_t>(i * n + j)];
    mean /= static_cast<double>(n);
    for (std::int64_t j = 0; j < n; ++j) {
      const double dd = x[static_cast<std::size_t>(i * n + j)] - mean;
      var += dd * dd;
    }
    var /= static_cast<double>(n);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (std::int64_t j = 0; j < n; ++j) {
      const auto k = static_cast<std::size_t>(i * n + j);
      r.y[k] = (x[k] - mean) * inv * s[static_cast<std::size_t>(j)] + (b ? (*b)[static_cast<std::size_t>(j)] : 0.0);
    }
    r.mean.push_back(mean);
    r.inv.push_back(inv);
  }
  return r;
}

// Softmax along `axis` of dims d (outer, n, inner), or over flattened [axis, rank) when coerce.
std::vector<double> ref_softmax(const dims_t& d, const std::vector<double>& x, std::size_t axis, bool coerce, bool log) {
  std::int64_t outer = 1, n = 1, inner = 1;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i < axis) outer *= d[i];
    else if (i == axis || coerce) n *= d[i];
    else inner *= d[i];
  }
  std::vector<double> y(x.size());
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t k = 0; k < inner; ++k) {
      const auto at = [&](std::int64_t j) { return static_cast<std::size_t>((o * n + j) * inner + k); };
      double m = -INFINITY, s = 0;
      for (std::int64_t j = 0; j < n; ++j) m = std::max(m, x[at(j)]);
      for (std::int64_t j = 0; j < n; ++j) s += std::exp(x[at(j)] - m);
      for (std::int64_t j = 0; j < n; ++j) y[at(j)] = log ? x[at(j)] - m - std::log(s) : std::exp(x[at(j)] - m) / s;
    }
  return y;
}

template <class T>
void check_close(const tensor& got, const dims_t& d, const std::vector<double>& want, double atol, double rtol = 1e-5) {
  check_tensor<T>(got, d, cast_all<T>(want), atol, rtol);
}

void check_error(const Result<std::vector<ivalue>>& r, const std::string& mentions) {
  REQUIRE_FALSE(r.has_value());
  CHECK(r.code() == errc::invalid_argument);
  CHECK_MESSAGE(r.status().message().find(mentions) != std::string::npos, r.status().message());
}

}  // namespace

// =================================================================================================================
// BatchNormalization

TEST_CASE("BatchNormalization opset 15 normalises 4-D float input per channel") {
  const dims_t d{2, 3, 4, 5};
  const auto x = random_values(120, -3, 3, 1);
  const auto s = random_values(3, 0.5, 2, 2), b = random_values(3, -1, 1, 3), m = random_values(3, -1, 1, 4),
             v = random_values(3, 0.1, 2, 5);
  kernel_node kn = op_node("BatchNormalization", 15);
  kn.set("epsilon", 1e-3f);
  const tensor y = run1<ops::batch_normalization>(
      kn, {in<float>(d, x), in<float>({3}, s), in<float>({3}, b), in<float>({3}, m), in<float>({3}, v)});
  check_close<float>(y, d, ref_batch_norm(d, x, s, b, m, v, static_cast<double>(1e-3f), true), 1e-5);
}

TEST_CASE("BatchNormalization handles double, 2-D and 3-D input and constant parameters") {
  for (const dims_t& d : {dims_t{4, 3}, dims_t{2, 3, 7}}) {
    const auto x = random_values(static_cast<std::size_t>(count_of(d)), -3, 3, 11);
    const auto s = random_values(3, 0.5, 2, 12), b = random_values(3, -1, 1, 13), m = random_values(3, -1, 1, 14),
               v = random_values(3, 0.1, 2, 15);
    kernel_node kn = op_node("BatchNormalization", 9);
    const tensor y = run1<ops::batch_normalization>(
        kn, {in<double>(d, x), {make<double>({3}, s), true}, {make<double>({3}, b), true}, {make<double>({3}, m), true},
             {make<double>({3}, v), true}});
    check_close<double>(y, d, ref_batch_norm(d, x, s, b, m, v, static_cast<double>(1e-5f), true), 1e-12, 1e-12);
  }
}

TEST_CASE("BatchNormalization accepts the old spatial, is_test and consumed_inputs attributes") {
  const dims_t d{2, 2, 3};
  const auto x = random_values(12, -2, 2, 21);
  const std::vector<double> s{1.5, 0.5}, b{0.1, -0.2}, m{0.3, -0.4}, v{0.9, 1.1};
  const std::vector<kernel_input> ins{in<float>(d, x), in<float>({2}, s), in<float>({2}, b), in<float>({2}, m),
                                      in<float>({2}, v)};
  const auto want = ref_batch_norm(d, x, s, b, m, v, static_cast<double>(1e-5f), true);
  SUBCASE("opset 1 with consumed_inputs and is_test") {
    kernel_node kn = op_node("BatchNormalization", 1);
    kn.set("consumed_inputs", std::vector<std::int64_t>{0, 0, 0, 1, 1}).set("is_test", std::int64_t{1});
    check_close<float>(run1<ops::batch_normalization>(kn, ins), d, want, 1e-5);
  }
  SUBCASE("opset 6 with is_test = 0 and a single output is inference") {
    kernel_node kn = op_node("BatchNormalization", 6);
    kn.set("is_test", std::int64_t{0}).set("spatial", std::int64_t{1});
    check_close<float>(run1<ops::batch_normalization>(kn, ins), d, want, 1e-5);
  }
  SUBCASE("opset 7 with spatial = 1") {
    kernel_node kn = op_node("BatchNormalization", 7);
    kn.set("spatial", std::int64_t{1}).set("momentum", 0.5f);
    check_close<float>(run1<ops::batch_normalization>(kn, ins), d, want, 1e-5);
  }
  SUBCASE("opset 14 with training_mode = 0") {
    kernel_node kn = op_node("BatchNormalization", 14);
    kn.set("training_mode", std::int64_t{0});
    check_close<float>(run1<ops::batch_normalization>(kn, ins), d, want, 1e-5);
  }
}

TEST_CASE("BatchNormalization with spatial = 0 normalises every feature separately") {
  const dims_t d{3, 2, 4};
  const auto x = random_values(24, -2, 2, 31);
  const auto s = random_values(8, 0.5, 2, 32), b = random_values(8, -1, 1, 33), m = random_values(8, -1, 1, 34),
             v = random_values(8, 0.1, 2, 35);
  kernel_node kn = op_node("BatchNormalization", 7);
  kn.set("spatial", std::int64_t{0});
  const tensor y = run1<ops::batch_normalization>(
      kn, {in<float>(d, x), in<float>({2, 4}, s), in<float>({2, 4}, b), in<float>({2, 4}, m), in<float>({2, 4}, v)});
  check_close<float>(y, d, ref_batch_norm(d, x, s, b, m, v, static_cast<double>(1e-5f), false), 1e-5);
}

TEST_CASE("BatchNormalization in training mode normalises by the batch and moves the running statistics") {
  const dims_t d{3, 2, 4};
  const auto x = random_values(24, -2, 2, 41);
  const std::vector<double> s{1.5, 0.5}, b{0.1, -0.2}, m{0.3, -0.4}, v{0.9, 1.1};
  // The batch's mean and population variance per channel.
  std::vector<double> bm(2, 0.0), bv(2, 0.0);
  for (std::size_t i = 0; i < x.size(); ++i) bm[(i / 4) % 2] += x[i] / 12;
  for (std::size_t i = 0; i < x.size(); ++i) bv[(i / 4) % 2] += (x[i] - bm[(i / 4) % 2]) * (x[i] - bm[(i / 4) % 2]) / 12;
  const double momentum = 0.75;
  kernel_node kn = op_node("BatchNormalization", 15);
  kn.set("training_mode", std::int64_t{1}).set("momentum", 0.75f).set("epsilon", 1e-3f);
  kn.outputs = 3;
  auto r = run_kernel<ops::batch_normalization>(kn, {in<float>(d, x), in<float>({2}, s), in<float>({2}, b), in<float>({2}, m),
                                                     in<float>({2}, v)});
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  check_close<float>((*r)[0].as_tensor(), d, ref_batch_norm(d, x, s, b, bm, bv, static_cast<double>(1e-3f), true), 1e-5);
  check_close<float>((*r)[1].as_tensor(), {2}, {m[0] * momentum + bm[0] * (1 - momentum), m[1] * momentum + bm[1] * (1 - momentum)}, 1e-6);
  check_close<float>((*r)[2].as_tensor(), {2}, {v[0] * momentum + bv[0] * (1 - momentum), v[1] * momentum + bv[1] * (1 - momentum)}, 1e-6);
  // Only Y wanted: the same Y.
  kn.outputs = 1;
  check_close<float>(run1<ops::batch_normalization>(kn, {in<float>(d, x), in<float>({2}, s), in<float>({2}, b), in<float>({2}, m),
                                                         in<float>({2}, v)}),
                     d, ref_batch_norm(d, x, s, b, bm, bv, static_cast<double>(1e-3f), true), 1e-5);
  // An empty batch has no statistics.
  check_error(run_kernel<ops::batch_normalization>(kn, {in<float>({0, 2, 4}, {}), in<float>({2}, s), in<float>({2}, b),
                                                        in<float>({2}, m), in<float>({2}, v)}),
              "empty batch");
}

TEST_CASE("BatchNormalization's old training interface (opset 9, five outputs) is not supported") {
  const dims_t d{2, 2, 3};
  const auto x = random_values(12, -2, 2, 41);
  const std::vector<double> p{1, 1};
  const std::vector<kernel_input> ins{in<float>(d, x), in<float>({2}, p), in<float>({2}, p), in<float>({2}, p),
                                      in<float>({2}, p)};
  kernel_node old = op_node("BatchNormalization", 9);
  old.outputs = 5;  // running and saved statistics: training
  CHECK(run_kernel<ops::batch_normalization>(old, ins).code() == errc::not_implemented);
}

TEST_CASE("BatchNormalization rejects parameters that do not match the channels and rank-1 input") {
  const std::vector<double> p3{1, 1, 1}, p2{1, 1};
  kernel_node kn = op_node("BatchNormalization", 15);
  check_error(run_kernel<ops::batch_normalization>(kn, {in<float>({2, 2, 3}, random_values(12, -1, 1, 1)), in<float>({3}, p3),
                                                        in<float>({2}, p2), in<float>({2}, p2), in<float>({2}, p2)}),
              "scale");
  check_error(run_kernel<ops::batch_normalization>(kn, {in<float>({2, 2, 3}, random_values(12, -1, 1, 1)), in<float>({2}, p2),
                                                        in<float>({2}, p2), in<float>({2}, p2), in<float>({3}, p3)}),
              "var");
  check_error(run_kernel<ops::batch_normalization>(
                  kn, {in<float>({2}, p2), in<float>({2}, p2), in<float>({2}, p2), in<float>({2}, p2), in<float>({2}, p2)}),
              "rank");
}

TEST_CASE("BatchNormalization splits a large input across two threads") {
  const dims_t d{2, 64, 56, 56};
  const auto x = random_values(static_cast<std::size_t>(count_of(d)), -3, 3, 51);
  const auto s = random_values(64, 0.5, 2, 52), b = random_values(64, -1, 1, 53), m = random_values(64, -1, 1, 54),
             v = random_values(64, 0.1, 2, 55);
  thread_pool pool(2);
  const tensor y = run1<ops::batch_normalization>(
      op_node("BatchNormalization", 15),
      {in<float>(d, x), in<float>({64}, s), in<float>({64}, b), in<float>({64}, m), in<float>({64}, v)}, &pool);
  check_close<float>(y, d, ref_batch_norm(d, x, s, b, m, v, static_cast<double>(1e-5f), true), 1e-5);
}

// =================================================================================================================
// LayerNormalization

TEST_CASE("LayerNormalization over the last axis with Mean and InvStdDev outputs") {
  const dims_t d{2, 3, 8};
  const auto x = random_values(48, -2, 2, 61);
  const auto s = random_values(8, 0.5, 1.5, 62), b = random_values(8, -1, 1, 63);
  kernel_node kn = op_node("LayerNormalization", 17);
  kn.outputs = 3;
  auto r = run_kernel<ops::layer_normalization>(kn, {in<float>(d, x), in<float>({8}, s), in<float>({8}, b)});
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  const auto want = ref_layer_norm(x, 6, 8, s, &b, static_cast<double>(1e-5f));
  check_close<float>((*r)[0].as_tensor(), d, want.y, 1e-5);
  check_close<float>((*r)[1].as_tensor(), {2, 3, 1}, want.mean, 1e-6);
  check_close<float>((*r)[2].as_tensor(), {2, 3, 1}, want.inv, 1e-5);
}

TEST_CASE("LayerNormalization over several axes, without B, with epsilon and a negative axis") {
  const dims_t d{2, 3, 4};
  const auto x = random_values(24, -2, 2, 71);
  const auto s = random_values(12, 0.5, 1.5, 72);
  for (std::int64_t axis : {1, -2}) {
    kernel_node kn = op_node("LayerNormalization", 17);
    kn.set("axis", axis).set("epsilon", 0.1f);
    kn.outputs = 3;
    auto r = run_kernel<ops::layer_normalization>(kn, {in<float>(d, x), in<float>({3, 4}, s)});
    REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
    const auto want = ref_layer_norm(x, 2, 12, s, nullptr, static_cast<double>(0.1f));
    check_close<float>((*r)[0].as_tensor(), d, want.y, 1e-5);
    check_close<float>((*r)[1].as_tensor(), {2, 1, 1}, want.mean, 1e-6);
    check_close<float>((*r)[2].as_tensor(), {2, 1, 1}, want.inv, 1e-5);
  }
}

TEST_CASE("LayerNormalization over all axes (axis 0)") {
  const dims_t d{3, 5};
  const auto x = random_values(15, -2, 2, 75);
  const auto s = random_values(15, 0.5, 1.5, 76), b = random_values(15, -1, 1, 77);
  kernel_node kn = op_node("LayerNormalization", 17);
  kn.set("axis", std::int64_t{0});
  kn.outputs = 2;
  auto r = run_kernel<ops::layer_normalization>(kn, {in<float>(d, x), in<float>(d, s), in<float>(d, b)});
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  const auto want = ref_layer_norm(x, 1, 15, s, &b, static_cast<double>(1e-5f));
  check_close<float>((*r)[0].as_tensor(), d, want.y, 1e-5);
  check_close<float>((*r)[1].as_tensor(), {1, 1}, want.mean, 1e-6);
}

TEST_CASE("LayerNormalization broadcasts Scale and B over the normalised dims") {
  const dims_t d{2, 3, 4};
  const auto x = random_values(24, -2, 2, 81);
  const std::vector<double> s4{0.5, 1.0, 1.5, 2.0}, b3{0.1, 0.2, 0.3};
  kernel_node kn = op_node("LayerNormalization", 17);
  kn.set("axis", std::int64_t{1});
  // Scale [4] repeats along the normalised dim of 3; B [3,1] repeats along the dim of 4.
  const tensor y = run1<ops::layer_normalization>(kn, {in<float>(d, x), in<float>({4}, s4), in<float>({1, 3, 1}, b3)});
  std::vector<double> s_full, b_full;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      s_full.push_back(s4[static_cast<std::size_t>(j)]);
      b_full.push_back(b3[static_cast<std::size_t>(i)]);
    }
  check_close<float>(y, d, ref_layer_norm(x, 2, 12, s_full, &b_full, static_cast<double>(1e-5f)).y, 1e-5);
}

TEST_CASE("LayerNormalization in double, with a double stash_type") {
  const dims_t d{3, 6};
  const auto x = random_values(18, -2, 2, 91);
  const auto s = random_values(6, 0.5, 1.5, 92), b = random_values(6, -1, 1, 93);
  kernel_node kn = op_node("LayerNormalization", 17);
  kn.set("stash_type", std::int64_t{11});
  kn.outputs = 3;
  auto r = run_kernel<ops::layer_normalization>(kn, {in<double>(d, x), in<double>({6}, s), in<double>({6}, b)});
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  const auto want = ref_layer_norm(x, 3, 6, s, &b, static_cast<double>(1e-5f));
  check_close<double>((*r)[0].as_tensor(), d, want.y, 1e-12, 1e-12);
  check_close<double>((*r)[2].as_tensor(), {3, 1}, want.inv, 1e-12, 1e-12);
  // The default stash_type (float) gives float statistics.
  kernel_node kf = op_node("LayerNormalization", 17);
  kf.outputs = 2;
  auto rf = run_kernel<ops::layer_normalization>(kf, {in<double>(d, x), in<double>({6}, s)});
  REQUIRE(rf.has_value());
  check_close<float>((*rf)[1].as_tensor(), {3, 1}, want.mean, 1e-6);
}

TEST_CASE("LayerNormalization rejects a bad axis and a Scale that does not broadcast") {
  const dims_t d{2, 3, 4};
  const auto x = random_values(24, -2, 2, 95);
  kernel_node kn = op_node("LayerNormalization", 17);
  kn.set("axis", std::int64_t{3});
  check_error(run_kernel<ops::layer_normalization>(kn, {in<float>(d, x), in<float>({4}, random_values(4, 1, 2, 1))}), "axis 3");
  kernel_node k2 = op_node("LayerNormalization", 17);
  check_error(run_kernel<ops::layer_normalization>(k2, {in<float>(d, x), in<float>({5}, random_values(5, 1, 2, 1))}), "Scale [5]");
  check_error(run_kernel<ops::layer_normalization>(k2, {in<float>(d, x), in<float>({4}, random_values(4, 1, 2, 1)),
                                                        in<float>({2, 4}, random_values(8, 1, 2, 1))}),
              "B [2,4]");
}

TEST_CASE("LayerNormalization (com.microsoft) has the opset-17 semantics") {
  const dims_t d{2, 5, 16};
  const auto x = random_values(160, -2, 2, 101);
  const auto s = random_values(16, 0.5, 1.5, 102), b = random_values(16, -1, 1, 103);
  kernel_node kn = op_node("LayerNormalization", 1, "com.microsoft");
  kn.set("epsilon", 1e-6f);
  kn.outputs = 3;
  auto r = run_kernel<ops::layer_normalization_contrib>(kn, {in<float>(d, x), in<float>({16}, s), in<float>({16}, b)});
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  const auto want = ref_layer_norm(x, 10, 16, s, &b, static_cast<double>(1e-6f));
  check_close<float>((*r)[0].as_tensor(), d, want.y, 1e-5);
  check_close<float>((*r)[1].as_tensor(), {2, 5, 1}, want.mean, 1e-6);
  check_close<float>((*r)[2].as_tensor(), {2, 5, 1}, want.inv, 1e-5);
}

TEST_CASE("LayerNormalization over BERT's [1,128,768] on two threads, with a large mean") {
  const dims_t d{1, 128, 768};
  auto x = random_values(128 * 768, -1, 1, 111);
  for (auto& v : x) v += 100.0;  // a mean far from zero: a one-pass E[x^2]-E[x]^2 would lose the variance
  const auto s = random_values(768, 0.5, 1.5, 112), b = random_values(768, -1, 1, 113);
  thread_pool pool(2);
  const tensor y = run1<ops::layer_normalization>(op_node("LayerNormalization", 17),
                                                  {in<float>(d, x), in<float>({768}, s), in<float>({768}, b)}, &pool);
  check_close<float>(y, d, ref_layer_norm(x, 128, 768, s, &b, static_cast<double>(1e-5f)).y, 2e-4, 1e-4);
}

// =================================================================================================================
// SkipLayerNormalization

TEST_CASE("SkipLayerNormalization with bias, beta and every optional output") {
  const dims_t d{2, 3, 8};
  const auto x = random_values(48, -2, 2, 121), sk = random_values(48, -2, 2, 122);
  const auto g = random_values(8, 0.5, 1.5, 123), be = random_values(8, -1, 1, 124), bi = random_values(8, -1, 1, 125);
  kernel_node kn = op_node("SkipLayerNormalization", 1, "com.microsoft");
  kn.set("epsilon", 1e-5f);
  kn.outputs = 4;
  auto r = run_kernel<ops::skip_layer_normalization>(
      kn, {in<float>(d, x), in<float>(d, sk), in<float>({8}, g), in<float>({8}, be), in<float>({8}, bi)});
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  std::vector<double> sum(48);
  for (std::size_t i = 0; i < 48; ++i) sum[i] = x[i] + sk[i] + bi[i % 8];
  const auto want = ref_layer_norm(sum, 6, 8, g, &be, static_cast<double>(1e-5f));
  check_close<float>((*r)[0].as_tensor(), d, want.y, 1e-5);
  check_close<float>((*r)[1].as_tensor(), {2, 3, 1}, want.mean, 1e-6);
  check_close<float>((*r)[2].as_tensor(), {2, 3, 1}, want.inv, 1e-5);
  check_close<float>((*r)[3].as_tensor(), d, sum, 1e-6);
}

TEST_CASE("SkipLayerNormalization without beta and bias uses epsilon 1e-12 by default") {
  const dims_t d{4, 6};
  const auto x = random_values(24, -2, 2, 131), sk = random_values(24, -2, 2, 132);
  const auto g = random_values(6, 0.5, 1.5, 133);
  const tensor y = run1<ops::skip_layer_normalization>(op_node("SkipLayerNormalization", 1, "com.microsoft"),
                                                       {in<double>(d, x), in<double>(d, sk), in<double>({6}, g)});
  std::vector<double> sum(24);
  for (std::size_t i = 0; i < 24; ++i) sum[i] = x[i] + sk[i];
  check_close<double>(y, d, ref_layer_norm(sum, 4, 6, g, nullptr, static_cast<double>(1e-12f)).y, 1e-12, 1e-12);
  // A constant row normalises to zero rather than dividing by a tiny epsilon badly.
  const std::vector<double> ones(6, 1.0), zeros(6, 0.0);
  const tensor z = run1<ops::skip_layer_normalization>(op_node("SkipLayerNormalization", 1, "com.microsoft"),
                                                       {in<float>({1, 6}, ones), in<float>({1, 6}, zeros), in<float>({6}, ones)});
  check_close<float>(z, {1, 6}, zeros, 1e-6);
}

TEST_CASE("SkipLayerNormalization broadcasts a skip of the trailing dims over the batch") {
  const dims_t d{2, 3, 4};
  const auto x = random_values(24, -2, 2, 141), sk = random_values(12, -2, 2, 142);
  const auto g = random_values(4, 0.5, 1.5, 143), be = random_values(4, -1, 1, 144);
  for (const dims_t& sd : {dims_t{3, 4}, dims_t{1, 3, 4}}) {
    const tensor y = run1<ops::skip_layer_normalization>(op_node("SkipLayerNormalization", 1, "com.microsoft"),
                                                         {in<float>(d, x), in<float>(sd, sk), in<float>({4}, g), in<float>({4}, be)});
    std::vector<double> sum(24);
    for (std::size_t i = 0; i < 24; ++i) sum[i] = x[i] + sk[i % 12];
    check_close<float>(y, d, ref_layer_norm(sum, 6, 4, g, &be, static_cast<double>(1e-12f)).y, 1e-5);
  }
}

TEST_CASE("SkipLayerNormalization rejects mismatched skip, gamma and bias") {
  const dims_t d{2, 3, 4};
  const auto x = random_values(24, -2, 2, 151);
  const std::vector<double> g4(4, 1.0), g5(5, 1.0);
  kernel_node kn = op_node("SkipLayerNormalization", 1, "com.microsoft");
  check_error(run_kernel<ops::skip_layer_normalization>(kn, {in<float>(d, x), in<float>({2, 4}, random_values(8, 0, 1, 1)),
                                                             in<float>({4}, g4)}),
              "skip [2,4]");
  check_error(run_kernel<ops::skip_layer_normalization>(kn, {in<float>(d, x), in<float>(d, x), in<float>({5}, g5)}), "gamma [5]");
  check_error(run_kernel<ops::skip_layer_normalization>(
                  kn, {in<float>(d, x), in<float>(d, x), in<float>({4}, g4), in<float>({4}, g4), in<float>({5}, g5)}),
              "bias [5]");
}

TEST_CASE("SkipLayerNormalization over [2,128,768] on two threads") {
  const dims_t d{2, 128, 768};
  const std::size_t n = 2 * 128 * 768;
  const auto x = random_values(n, -2, 2, 161), sk = random_values(n, -2, 2, 162);
  const auto g = random_values(768, 0.5, 1.5, 163), be = random_values(768, -1, 1, 164);
  thread_pool pool(2);
  const tensor y = run1<ops::skip_layer_normalization>(op_node("SkipLayerNormalization", 1, "com.microsoft"),
                                                       {in<float>(d, x), in<float>(d, sk), in<float>({768}, g), in<float>({768}, be)},
                                                       &pool);
  std::vector<double> sum(n);
  for (std::size_t i = 0; i < n; ++i) sum[i] = x[i] + sk[i];
  check_close<float>(y, d, ref_layer_norm(sum, 256, 768, g, &be, static_cast<double>(1e-12f)).y, 1e-4, 1e-4);
}

// =================================================================================================================
// Softmax and LogSoftmax

TEST_CASE("Softmax and LogSoftmax opset 13 along the last axis by default") {
  const dims_t d{2, 3, 5};
  const auto x = random_values(30, -5, 5, 171);
  const tensor y = run1<ops::softmax>(op_node("Softmax", 13), {in<float>(d, x)});
  check_close<float>(y, d, ref_softmax(d, x, 2, false, false), 1e-6);
  const tensor ly = run1<ops::log_softmax>(op_node("LogSoftmax", 13), {in<float>(d, x)});
  check_close<float>(ly, d, ref_softmax(d, x, 2, false, true), 1e-5);
}

TEST_CASE("Softmax and LogSoftmax opset 13 along an inner axis") {
  // 300 trailing elements: more than one column block.
  const dims_t d{2, 3, 300};
  const auto x = random_values(1800, -5, 5, 181);
  for (std::int64_t axis : {0, 1, -2}) {
    kernel_node kn = op_node("Softmax", 13);
    kn.set("axis", axis);
    const auto a = static_cast<std::size_t>(axis < 0 ? axis + 3 : axis);
    check_close<float>(run1<ops::softmax>(kn, {in<float>(d, x)}), d, ref_softmax(d, x, a, false, false), 1e-6);
    kernel_node kl = op_node("LogSoftmax", 13);
    kl.set("axis", axis);
    check_close<float>(run1<ops::log_softmax>(kl, {in<float>(d, x)}), d, ref_softmax(d, x, a, false, true), 1e-5);
  }
}

TEST_CASE("Softmax and LogSoftmax before opset 13 coerce the input to 2-D at axis") {
  const dims_t d{2, 3, 4};
  const auto x = random_values(24, -5, 5, 191);
  for (int opset : {1, 11}) {
    // Default axis 1: softmax over the 12 trailing values of each batch.
    check_close<float>(run1<ops::softmax>(op_node("Softmax", opset), {in<float>(d, x)}), d, ref_softmax(d, x, 1, true, false), 1e-6);
    check_close<float>(run1<ops::log_softmax>(op_node("LogSoftmax", opset), {in<float>(d, x)}), d,
                       ref_softmax(d, x, 1, true, true), 1e-5);
    kernel_node k0 = op_node("Softmax", opset);
    k0.set("axis", std::int64_t{0});
    check_close<float>(run1<ops::softmax>(k0, {in<float>(d, x)}), d, ref_softmax(d, x, 0, true, false), 1e-6);
    kernel_node k2 = op_node("LogSoftmax", opset);
    k2.set("axis", std::int64_t{-1});
    check_close<float>(run1<ops::log_softmax>(k2, {in<float>(d, x)}), d, ref_softmax(d, x, 2, true, true), 1e-5);
  }
}

TEST_CASE("Softmax of large numbers subtracts the row max, double precision") {
  const dims_t d{2, 4};
  const std::vector<double> x{0, 1, 2, 3, 10000, 10001, 10002, 10003};
  const std::vector<double> row{0.032058604, 0.087144318, 0.236882818, 0.643914260};
  std::vector<double> want(row);
  want.insert(want.end(), row.begin(), row.end());
  check_close<float>(run1<ops::softmax>(op_node("Softmax", 13), {in<float>(d, x)}), d, want, 1e-6);
  check_close<double>(run1<ops::softmax>(op_node("Softmax", 13), {in<double>(d, x)}), d, want, 1e-9);
  const auto lwant = ref_softmax(d, x, 1, false, true);
  check_close<float>(run1<ops::log_softmax>(op_node("LogSoftmax", 13), {in<float>(d, x)}), d, lwant, 1e-5);
  check_close<double>(run1<ops::log_softmax>(op_node("LogSoftmax", 13), {in<double>(d, x)}), d, lwant, 1e-12);
  kernel_node kd = op_node("Softmax", 13);
  kd.set("axis", std::int64_t{0});
  check_close<double>(run1<ops::softmax>(kd, {in<double>(d, x)}), d, ref_softmax(d, x, 0, false, false), 1e-12);
}

TEST_CASE("Softmax of masked attention scores gives exact zeros, never subnormals, on two threads") {
  // Causal-mask rows as exporters write them: the mask added to the scores is float's lowest (PyTorch's finfo.min),
  // -10000 (older exporters) or -inf. The masked probabilities are 0 in float arithmetic; a saturated exp divided by
  // the row's sum made them subnormal, which made the next product (P x V) 50x slower on Intel cores.
  const dims_t d{2, 12, 64, 64};
  auto x = random_values(static_cast<std::size_t>(count_of(d)), -4, 4, 213);
  const double masks[] = {-3.4028234663852886e38, -10000.0, -std::numeric_limits<double>::infinity()};
  for (std::size_t r = 0; r < x.size() / 64; ++r)
    for (std::size_t c = r % 64 + 1; c < 64; ++c) x[r * 64 + c] += masks[r % 3];
  thread_pool pool(2);
  const tensor y = run1<ops::softmax>(op_node("Softmax", 13), {in<float>(d, x)}, &pool);
  std::size_t zeros = 0, subnormal = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float v = y.typed<float>()[i];
    if (i % 64 > (i / 64) % 64) zeros += v == 0.0f;
    subnormal += std::fpclassify(v) == FP_SUBNORMAL;
  }
  CHECK(zeros == x.size() / 2 - x.size() / 128);  // every masked position: 63*64/2 of each 64x64 block
  CHECK(subnormal == 0);
  check_close<float>(y, d, ref_softmax(d, x, 3, false, false), 1e-6, 1e-5);
}

// Every row width from 1 to 70 (the 16-lane kernel's full pairs, single vectors and masked tails), and a NaN in one
// row, which makes that row NaN and no other.
TEST_CASE("Softmax rows of 1 to 70 values and a NaN row, against double") {
  for (std::int64_t w = 1; w <= 70; ++w) {
    CAPTURE(w);
    const dims_t d{3, w};
    auto x = random_values(static_cast<std::size_t>(3 * w), -30, 30, 300 + static_cast<unsigned>(w));
    check_close<float>(run1<ops::softmax>(op_node("Softmax", 13), {in<float>(d, x)}), d, ref_softmax(d, x, 1, false, false), 1e-6, 1e-5);
    x[static_cast<std::size_t>(w + w / 2)] = std::numeric_limits<double>::quiet_NaN();
    const tensor y = run1<ops::softmax>(op_node("Softmax", 13), {in<float>(d, x)});
    for (std::int64_t i = 0; i < 3 * w; ++i) {
      CAPTURE(i);
      CHECK(std::isnan(y.typed<float>()[i]) == (i / w == 1));
    }
  }
}

TEST_CASE("Softmax rejects an axis out of range") {
  const dims_t d{2, 3};
  const auto x = random_values(6, -1, 1, 201);
  kernel_node kn = op_node("Softmax", 13);
  kn.set("axis", std::int64_t{2});
  check_error(run_kernel<ops::softmax>(kn, {in<float>(d, x)}), "axis 2");
  kernel_node kl = op_node("LogSoftmax", 11);
  kl.set("axis", std::int64_t{-3});
  check_error(run_kernel<ops::log_softmax>(kl, {in<float>(d, x)}), "axis -3");
}

TEST_CASE("Softmax over BERT's attention scores [1,12,128,128] on two threads") {
  const dims_t d{1, 12, 128, 128};
  const auto x = random_values(static_cast<std::size_t>(count_of(d)), -8, 8, 211);
  thread_pool pool(2);
  const tensor y = run1<ops::softmax>(op_node("Softmax", 13), {in<float>(d, x)}, &pool);
  check_close<float>(y, d, ref_softmax(d, x, 3, false, false), 1e-6, 1e-4);
  kernel_node kl = op_node("LogSoftmax", 13);
  kl.set("axis", std::int64_t{2});
  const tensor ly = run1<ops::log_softmax>(kl, {in<float>(d, x)}, &pool);
  check_close<float>(ly, d, ref_softmax(d, x, 2, false, true), 1e-4, 1e-5);
}
