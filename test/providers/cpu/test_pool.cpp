// Tests of the CPU pooling kernels (pool.cpp): MaxPool with its Indices output, AveragePool, GlobalAveragePool and
// GlobalMaxPool, in 1-D, 2-D and 3-D, against direct references computed here.
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

using ints = std::vector<std::int64_t>;

kernel_node op_node(std::string op, int opset) { return kernel_node(std::move(op), opset); }

// ---- reference pooling, straight from the ONNX text ----
struct pool_spec {
  ints kernel, strides, dilations, pads;
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false, count_include_pad = false, column_major = false;
};
struct pool_ref {
  dims_t dims;
  std::vector<double> values;
  std::vector<std::int64_t> indices;
};
pool_ref ref_pool(const dims_t& d, const std::vector<double>& x, const pool_spec& p, bool max) {
  const std::size_t S = d.size() - 2;
  ints s(S, 1), dil(S, 1), pb(S, 0), pe(S, 0), out(S);
  for (std::size_t i = 0; i < S; ++i) {
    if (!p.strides.empty()) s[i] = p.strides[i];
    if (!p.dilations.empty()) dil[i] = p.dilations[i];
    if (!p.pads.empty()) {
      pb[i] = p.pads[i];
      pe[i] = p.pads[i + S];
    }
    const double in = static_cast<double>(d[i + 2]);
    const double ek = static_cast<double>((p.kernel[i] - 1) * dil[i] + 1);
    if (p.auto_pad == "VALID") {
      pb[i] = pe[i] = 0;
      out[i] = static_cast<std::int64_t>(std::ceil((in - ek + 1) / static_cast<double>(s[i])));
    } else if (p.auto_pad == "SAME_UPPER" || p.auto_pad == "SAME_LOWER") {
      out[i] = static_cast<std::int64_t>(std::ceil(in / static_cast<double>(s[i])));
      const std::int64_t total = std::max<std::int64_t>(0, (out[i] - 1) * s[i] + static_cast<std::int64_t>(ek) - d[i + 2]);
      pb[i] = p.auto_pad == "SAME_UPPER" ? total / 2 : (total + 1) / 2;
      pe[i] = total - pb[i];
    } else {
      const double v = (in + static_cast<double>(pb[i] + pe[i]) - ek) / static_cast<double>(s[i]) + 1;
      out[i] = static_cast<std::int64_t>(p.ceil_mode ? std::ceil(v) : std::floor(v));
      if (p.ceil_mode && (out[i] - 1) * s[i] >= d[i + 2] + pb[i]) --out[i];
    }
  }
  pool_ref r;
  r.dims = {d[0], d[1]};
  r.dims.insert(r.dims.end(), out.begin(), out.end());
  std::int64_t in_size = 1, out_size = 1, ksize = 1;
  for (std::size_t i = 0; i < S; ++i) {
    in_size *= d[i + 2];
    out_size *= out[i];
    ksize *= p.kernel[i];
  }
  for (std::int64_t plane = 0; plane < d[0] * d[1]; ++plane)
    for (std::int64_t o = 0; o < out_size; ++o) {
      ints oi(S);
      for (std::int64_t rem = o, i = static_cast<std::int64_t>(S) - 1; i >= 0; --i) {
        oi[static_cast<std::size_t>(i)] = rem % out[static_cast<std::size_t>(i)];
        rem /= out[static_cast<std::size_t>(i)];
      }
      double best = -INFINITY, sum = 0;
      std::int64_t best_at = -1, valid = 0, padded = 0;
      for (std::int64_t k = 0; k < ksize; ++k) {
        ints ki(S);
        for (std::int64_t rem = k, i = static_cast<std::int64_t>(S) - 1; i >= 0; --i) {
          ki[static_cast<std::size_t>(i)] = rem % p.kernel[static_cast<std::size_t>(i)];
          rem /= p.kernel[static_cast<std::size_t>(i)];
        }
        bool inside = true, in_pad = true;
        std::int64_t row = 0, col = 0, col_stride = 1;
        for (std::size_t i = 0; i < S; ++i) {
          const std::int64_t pos = oi[i] * s[i] - pb[i] + ki[i] * dil[i];
          inside = inside && pos >= 0 && pos < d[i + 2];
          in_pad = in_pad && pos >= -pb[i] && pos < d[i + 2] + pe[i];
          row = row * d[i + 2] + pos;
          col += pos * col_stride;
          col_stride *= d[i + 2];
        }
        padded += in_pad ? 1 : 0;
        if (!inside) continue;
        ++valid;
        const double v = x[static_cast<std::size_t>(plane * in_size + row)];
        sum += v;
        if (v > best) {
          best = v;
          best_at = plane * in_size + (p.column_major ? col : row);
        }
      }
      r.values.push_back(max ? best : sum / static_cast<double>(p.count_include_pad ? padded : valid));
      r.indices.push_back(best_at);
    }
  return r;
}

kernel_node pool_node(const char* op, int opset, const pool_spec& p) {
  kernel_node k = op_node(op, opset);
  k.set("kernel_shape", p.kernel);
  if (!p.strides.empty()) k.set("strides", p.strides);
  if (!p.dilations.empty()) k.set("dilations", p.dilations);
  if (!p.pads.empty()) k.set("pads", p.pads);
  if (p.auto_pad != "NOTSET") k.set("auto_pad", p.auto_pad);
  if (p.ceil_mode) k.set("ceil_mode", std::int64_t{1});
  if (p.count_include_pad) k.set("count_include_pad", std::int64_t{1});
  if (p.column_major) k.set("storage_order", std::int64_t{1});
  return k;
}

template <class T = float>
void check_max_pool(const dims_t& d, const pool_spec& p, bool with_indices, unsigned seed, thread_pool* pool = nullptr) {
  const auto x = random_values(static_cast<std::size_t>(count_of(d)), -10, 10, seed, !std::is_floating_point_v<T>);
  kernel_node kn = pool_node("MaxPool", 12, p);
  kn.outputs = with_indices ? 2 : 1;
  auto r = run_kernel<ops::max_pool>(kn, {in<T>(d, x)}, pool);
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  const auto want = ref_pool(d, x, p, true);
  check_tensor<T>((*r)[0].as_tensor(), want.dims, std::vector<T>(want.values.begin(), want.values.end()), 0, 0);
  if (with_indices) check_tensor<std::int64_t>((*r)[1].as_tensor(), want.dims, want.indices);
}
template <class T = float>
void check_average_pool(const dims_t& d, const pool_spec& p, unsigned seed, thread_pool* pool = nullptr) {
  const auto x = random_values(static_cast<std::size_t>(count_of(d)), -10, 10, seed);
  const tensor y = run1<ops::average_pool>(pool_node("AveragePool", 11, p), {in<T>(d, x)}, pool);
  const auto want = ref_pool(d, x, p, false);
  check_tensor<T>(y, want.dims, std::vector<T>(want.values.begin(), want.values.end()), 1e-5, 1e-5);
}

void check_error(const Result<std::vector<ivalue>>& r, const std::string& mentions) {
  REQUIRE_FALSE(r.has_value());
  CHECK(r.code() == errc::invalid_argument);
  CHECK_MESSAGE(r.status().message().find(mentions) != std::string::npos, r.status().message());
}

}  // namespace

// =================================================================================================================
// The ONNX backend-test examples

TEST_CASE("MaxPool and AveragePool with ceil_mode (ONNX examples)") {
  const dims_t d{1, 1, 4, 4};
  pool_spec p;
  p.kernel = {3, 3};
  p.strides = {2, 2};
  p.ceil_mode = true;
  check_tensor<float>(run1<ops::max_pool>(pool_node("MaxPool", 12, p), {in<float>(d, iota(16))}), {1, 1, 2, 2}, {11, 12, 15, 16});
  check_tensor<float>(run1<ops::average_pool>(pool_node("AveragePool", 11, p), {in<float>(d, iota(16))}), {1, 1, 2, 2},
                      {6, 7.5, 12, 13.5});
}

TEST_CASE("MaxPool with dilations (ONNX example)") {
  pool_spec p;
  p.kernel = {2, 2};
  p.dilations = {2, 2};
  check_tensor<float>(run1<ops::max_pool>(pool_node("MaxPool", 10, p), {in<float>({1, 1, 4, 4}, iota(16))}), {1, 1, 2, 2},
                      {11, 12, 15, 16});
}

TEST_CASE("MaxPool Indices in column-major storage order (ONNX example)") {
  pool_spec p;
  p.kernel = {2, 2};
  p.strides = {2, 2};
  p.column_major = true;
  kernel_node kn = pool_node("MaxPool", 8, p);
  kn.outputs = 2;
  auto r = run_kernel<ops::max_pool>(kn, {in<float>({1, 1, 5, 5}, iota(25))});
  REQUIRE(r.has_value());
  check_tensor<float>((*r)[0].as_tensor(), {1, 1, 2, 2}, {7, 9, 17, 19});
  check_tensor<std::int64_t>((*r)[1].as_tensor(), {1, 1, 2, 2}, {6, 16, 8, 18});
}

TEST_CASE("MaxPool Indices with padding (ONNX example)") {
  pool_spec p;
  p.kernel = {5, 5};
  p.pads = {2, 2, 2, 2};
  kernel_node kn = pool_node("MaxPool", 12, p);
  kn.outputs = 2;
  auto r = run_kernel<ops::max_pool>(kn, {in<float>({1, 1, 5, 5}, iota(25))});
  REQUIRE(r.has_value());
  check_tensor<float>((*r)[0].as_tensor(), {1, 1, 5, 5}, {13, 14, 15, 15, 15, 18, 19, 20, 20, 20, 23, 24, 25, 25, 25, 23, 24, 25,
                                                          25, 25, 23, 24, 25, 25, 25});
  check_tensor<std::int64_t>((*r)[1].as_tensor(), {1, 1, 5, 5}, {12, 13, 14, 14, 14, 17, 18, 19, 19, 19, 22, 23, 24, 24, 24,
                                                                 22, 23, 24, 24, 24, 22, 23, 24, 24, 24});
}

// =================================================================================================================
// Against the reference

TEST_CASE("MaxPool 2-D: strides, asymmetric pads, dilations, ceil_mode, with Indices in both storage orders") {
  const dims_t d{2, 3, 9, 11};
  std::vector<pool_spec> specs;
  pool_spec p;
  p.kernel = {3, 3};
  p.strides = {2, 2};
  p.pads = {1, 1, 1, 1};
  specs.push_back(p);  // ResNet's stem pool
  p = {};
  p.kernel = {2, 3};
  p.strides = {1, 2};
  p.pads = {0, 1, 1, 0};
  specs.push_back(p);
  p = {};
  p.kernel = {3, 2};
  p.dilations = {2, 3};
  p.pads = {2, 1, 0, 2};
  specs.push_back(p);
  p = {};
  p.kernel = {3, 3};
  p.strides = {3, 2};
  p.pads = {1, 0, 1, 1};
  p.ceil_mode = true;
  specs.push_back(p);
  p = {};
  p.kernel = {4, 4};
  p.strides = {3, 3};
  p.ceil_mode = true;
  p.dilations = {1, 2};
  specs.push_back(p);
  unsigned seed = 1;
  for (auto spec : specs)
    for (bool col : {false, true}) {
      spec.column_major = col;
      check_max_pool(d, spec, true, seed++);
    }
  check_max_pool(d, specs[0], false, seed++);
}

TEST_CASE("MaxPool and AveragePool with auto_pad SAME_UPPER, SAME_LOWER and VALID") {
  const dims_t d{1, 2, 7, 8};
  for (const char* ap : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
    CAPTURE(ap);
    pool_spec p;
    p.kernel = {3, 2};
    p.strides = {2, 3};
    p.auto_pad = ap;
    check_max_pool(d, p, true, 11);
    check_average_pool(d, p, 12);
    p.count_include_pad = true;
    check_average_pool(d, p, 13);
    pool_spec q;
    q.kernel = {2, 2};
    q.auto_pad = ap;
    check_max_pool(d, q, false, 14);
    check_average_pool(d, q, 15);
  }
  // SAME_UPPER puts the odd padding at the end, SAME_LOWER at the start (ONNX examples).
  pool_spec p;
  p.kernel = {2, 2};
  p.auto_pad = "SAME_UPPER";
  check_tensor<float>(run1<ops::max_pool>(pool_node("MaxPool", 12, p), {in<float>({1, 1, 2, 2}, {1, 2, 3, 4})}), {1, 1, 2, 2},
                      {4, 4, 4, 4});
  p.auto_pad = "SAME_LOWER";
  check_tensor<float>(run1<ops::max_pool>(pool_node("MaxPool", 12, p), {in<float>({1, 1, 2, 2}, {1, 2, 3, 4})}), {1, 1, 2, 2},
                      {1, 2, 3, 4});
}

TEST_CASE("AveragePool with and without count_include_pad, and ceil_mode windows past the padding") {
  const dims_t d{2, 2, 8, 9};
  pool_spec p;
  p.kernel = {3, 3};
  p.strides = {2, 2};
  p.pads = {1, 2, 1, 0};
  for (bool include : {false, true})
    for (bool ceil : {false, true}) {
      p.count_include_pad = include;
      p.ceil_mode = ceil;
      check_average_pool(d, p, 21);
    }
  // ceil_mode: the last window hangs over the end: padded taps count, taps past the padding do not.
  pool_spec q;
  q.kernel = {3};
  q.strides = {2};
  q.pads = {1, 1};
  q.ceil_mode = true;
  q.count_include_pad = true;
  // Input 1..6, padded [0 1 2 3 4 5 6 0]: windows [0 1 2] [2 3 4] [4 5 6] [6 0 | past]: 4 outputs.
  check_tensor<float>(run1<ops::average_pool>(pool_node("AveragePool", 11, q), {in<float>({1, 1, 6}, iota(6))}), {1, 1, 4},
                      {1, 3, 5, 3});
  q.count_include_pad = false;
  check_tensor<float>(run1<ops::average_pool>(pool_node("AveragePool", 11, q), {in<float>({1, 1, 6}, iota(6))}), {1, 1, 4},
                      {1.5, 3, 5, 6});
}

TEST_CASE("Pooling 1-D and 3-D, with Indices") {
  pool_spec p1;
  p1.kernel = {3};
  p1.strides = {2};
  p1.pads = {1, 2};
  check_max_pool({2, 3, 17}, p1, true, 31);
  check_average_pool({2, 3, 17}, p1, 32);
  pool_spec p3;
  p3.kernel = {2, 3, 2};
  p3.strides = {1, 2, 2};
  p3.pads = {1, 0, 1, 0, 1, 1};
  p3.dilations = {1, 1, 2};
  check_max_pool({1, 2, 5, 6, 7}, p3, true, 33);
  p3.column_major = true;
  check_max_pool({1, 2, 5, 6, 7}, p3, true, 34);
  check_average_pool({1, 2, 5, 6, 7}, p3, 35);
  p3.count_include_pad = true;
  p3.ceil_mode = true;
  check_average_pool({1, 2, 5, 6, 7}, p3, 36);
  // The ONNX 1-D and 3-D defaults.
  pool_spec d1;
  d1.kernel = {2};
  check_average_pool({1, 3, 32}, d1, 37);
  pool_spec d3;
  d3.kernel = {2, 2, 2};
  check_max_pool({1, 3, 6, 6, 6}, d3, false, 38);
}

TEST_CASE("MaxPool of double, int8 and uint8 (opset 12), AveragePool of double") {
  pool_spec p;
  p.kernel = {3, 3};
  p.strides = {2, 2};
  p.pads = {1, 1, 1, 1};
  check_max_pool<double>({1, 2, 7, 7}, p, true, 41);
  check_max_pool<std::int8_t>({1, 2, 7, 7}, p, true, 42);
  // uint8 values: whole numbers in [0, 255].
  const dims_t d{1, 2, 6, 6};
  const auto x = random_values(72, 0, 255, 43, true);
  const tensor y = run1<ops::max_pool>(pool_node("MaxPool", 12, p), {in<std::uint8_t>(d, x)});
  const auto want = ref_pool(d, x, p, true);
  check_tensor<std::uint8_t>(y, want.dims, std::vector<std::uint8_t>(want.values.begin(), want.values.end()));
  check_average_pool<double>({1, 2, 7, 7}, p, 44);
  // int8 before opset 12 is not a MaxPool type.
  const auto x8 = random_values(72, -128, 127, 45, true);
  CHECK(run_kernel<ops::max_pool>(pool_node("MaxPool", 11, p), {in<std::int8_t>(d, x8)}).code() == errc::not_implemented);
  CHECK(run_kernel<ops::average_pool>(pool_node("AveragePool", 11, p), {in<std::int8_t>(d, x8)}).code() == errc::not_implemented);
}

TEST_CASE("MaxPool output of an all-padding window is the lowest value with index -1") {
  // Pads as large as the kernel: the first window sees only padding.
  pool_spec p;
  p.kernel = {2};
  p.pads = {2, 0};
  kernel_node kn = pool_node("MaxPool", 12, p);
  kn.outputs = 2;
  auto r = run_kernel<ops::max_pool>(kn, {in<float>({1, 1, 3}, {5, 6, 7})});
  REQUIRE(r.has_value());
  check_tensor<float>((*r)[0].as_tensor(), {1, 1, 4}, {std::numeric_limits<float>::lowest(), 5, 6, 7}, 0, 0);
  check_tensor<std::int64_t>((*r)[1].as_tensor(), {1, 1, 4}, {-1, 0, 1, 2});
}

// =================================================================================================================
// Global pooling

TEST_CASE("GlobalAveragePool and GlobalMaxPool over 1-D, 2-D and 3-D spatial dims") {
  for (const dims_t& d : {dims_t{2, 3, 7}, dims_t{2, 3, 4, 5}, dims_t{1, 2, 3, 4, 5}}) {
    const auto x = random_values(static_cast<std::size_t>(count_of(d)), -5, 5, 51);
    const std::int64_t planes = d[0] * d[1], n = count_of(d) / planes;
    std::vector<float> mean, mx;
    std::vector<double> mean_d;
    for (std::int64_t p = 0; p < planes; ++p) {
      double s = 0, m = -INFINITY;
      for (std::int64_t i = 0; i < n; ++i) {
        s += x[static_cast<std::size_t>(p * n + i)];
        m = std::max(m, x[static_cast<std::size_t>(p * n + i)]);
      }
      mean.push_back(static_cast<float>(s / static_cast<double>(n)));
      mean_d.push_back(s / static_cast<double>(n));
      mx.push_back(static_cast<float>(m));
    }
    dims_t od(d.size(), 1);
    od[0] = d[0];
    od[1] = d[1];
    check_tensor<float>(run1<ops::global_average_pool>(op_node("GlobalAveragePool", 1), {in<float>(d, x)}), od, mean, 1e-5);
    check_tensor<float>(run1<ops::global_max_pool>(op_node("GlobalMaxPool", 1), {in<float>(d, x)}), od, mx, 0, 0);
    check_tensor<double>(run1<ops::global_average_pool>(op_node("GlobalAveragePool", 1), {in<double>(d, x)}), od, mean_d, 1e-12);
  }
  // The ONNX example.
  check_tensor<float>(run1<ops::global_max_pool>(op_node("GlobalMaxPool", 1), {in<float>({1, 1, 3, 3}, iota(9))}), {1, 1, 1, 1}, {9});
  check_tensor<float>(run1<ops::global_average_pool>(op_node("GlobalAveragePool", 1), {in<float>({1, 1, 3, 3}, iota(9))}),
                      {1, 1, 1, 1}, {5});
}

// =================================================================================================================
// Errors

TEST_CASE("Pooling rejects missing or mismatched kernel_shape, strides or pads, negative pads and low rank") {
  const dims_t d{1, 1, 4, 4};
  const auto x = iota(16);
  check_error(run_kernel<ops::max_pool>(op_node("MaxPool", 12), {in<float>(d, x)}), "kernel_shape");
  pool_spec p;
  p.kernel = {2};
  check_error(run_kernel<ops::max_pool>(pool_node("MaxPool", 12, p), {in<float>(d, x)}), "kernel_shape [2]");
  p.kernel = {2, 2};
  p.strides = {1, 1, 1};
  check_error(run_kernel<ops::average_pool>(pool_node("AveragePool", 11, p), {in<float>(d, x)}), "strides [1,1,1]");
  p.strides = {};
  p.pads = {1, 1};
  check_error(run_kernel<ops::average_pool>(pool_node("AveragePool", 11, p), {in<float>(d, x)}), "pads [1,1]");
  p.pads = {0, -1, 0, 0};
  check_error(run_kernel<ops::max_pool>(pool_node("MaxPool", 12, p), {in<float>(d, x)}), "negative");
  p.pads = {};
  p.strides = {0, 1};
  check_error(run_kernel<ops::max_pool>(pool_node("MaxPool", 12, p), {in<float>(d, x)}), "positive");
  p.strides = {};
  check_error(run_kernel<ops::max_pool>(pool_node("MaxPool", 12, p), {in<float>({4, 4}, x)}), "rank");
  check_error(run_kernel<ops::global_average_pool>(op_node("GlobalAveragePool", 1), {in<float>({16}, x)}), "rank");
  p.auto_pad = "SAME";
  CHECK(run_kernel<ops::max_pool>(pool_node("MaxPool", 12, p), {in<float>(d, x)}).code() == errc::not_implemented);
}

// =================================================================================================================
// Threads

TEST_CASE("ResNet-50's MaxPool and GlobalAveragePool on two threads") {
  thread_pool pool(2);
  pool_spec p;
  p.kernel = {3, 3};
  p.strides = {2, 2};
  p.pads = {1, 1, 1, 1};
  check_max_pool({1, 64, 112, 112}, p, true, 61, &pool);
  check_average_pool({1, 64, 56, 56}, p, 62, &pool);
  const dims_t d{1, 2048, 7, 7};
  const auto x = random_values(static_cast<std::size_t>(count_of(d)), -5, 5, 63);
  std::vector<float> mean;
  for (std::int64_t c = 0; c < 2048; ++c) {
    double s = 0;
    for (std::int64_t i = 0; i < 49; ++i) s += x[static_cast<std::size_t>(c * 49 + i)];
    mean.push_back(static_cast<float>(s / 49));
  }
  check_tensor<float>(run1<ops::global_average_pool>(op_node("GlobalAveragePool", 1), {in<float>(d, x)}, &pool), {1, 2048, 1, 1}, mean,
                      1e-5);
}
