// Conv and FusedConv against a direct double-precision reference: every path (pointwise, depthwise, im2col, tiled
// across threads) and attribute (groups, pads, strides, dilations, auto_pad), 1-D to 3-D.
#include "../../support/kernel_harness.hpp"

#include <epstack/providers/cpu/kernels.hpp>

#include <epstack/testing/model_zoo.hpp>

#include <cmath>

using namespace epstack;
namespace ops = epstack::cpu::ops;
using test::kernel_node;
using test::run1;

namespace {

struct conv_case {
  std::vector<std::int64_t> x, w;  // shapes
  std::vector<std::int64_t> strides, pads, dilations;
  std::int64_t group = 1;
  std::string auto_pad = "NOTSET";
  bool bias = true;
};

// Reference: any spatial rank, explicit pads (auto_pad resolved the same way the spec does).
std::vector<double> reference(const conv_case& c, const tensor& X, const tensor& W, const tensor* B, std::vector<std::int64_t>& out_shape) {
  const std::size_t S = c.x.size() - 2;
  const auto N = c.x[0], C = c.x[1], M = c.w[0], Cg = C / c.group, Mg = M / c.group;
  std::vector<std::int64_t> stride(S, 1), dil(S, 1), pb(S, 0), pe(S, 0), out(S);
  for (std::size_t i = 0; i < S; ++i) {
    if (!c.strides.empty()) stride[i] = c.strides[i];
    if (!c.dilations.empty()) dil[i] = c.dilations[i];
    if (!c.pads.empty()) {
      pb[i] = c.pads[i];
      pe[i] = c.pads[i + S];
    }
    const auto ek = (c.w[i + 2] - 1) * dil[i] + 1;
    if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      out[i] = (c.x[i + 2] + stride[i] - 1) / stride[i];
      const auto total = std::max<std::int64_t>(0, (out[i] - 1) * stride[i] + ek - c.x[i + 2]);
      pb[i] = c.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe[i] = total - pb[i];
    } else if (c.auto_pad == "VALID") {
      pb[i] = pe[i] = 0;
    }
    out[i] = (c.x[i + 2] + pb[i] + pe[i] - ek) / stride[i] + 1;
  }
  out_shape = {N, M};
  out_shape.insert(out_shape.end(), out.begin(), out.end());
  std::int64_t osize = 1, ksize = 1, isize = 1;
  for (std::size_t i = 0; i < S; ++i) {
    osize *= out[i];
    ksize *= c.w[i + 2];
    isize *= c.x[i + 2];
  }
  std::vector<double> y(static_cast<std::size_t>(N * M * osize));
  const float* x = X.typed<float>();
  const float* w = W.typed<float>();
  std::vector<std::int64_t> oi(S), ki(S);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t m = 0; m < M; ++m) {
      const auto g = m / Mg;
      for (std::int64_t o = 0; o < osize; ++o) {
        std::int64_t r = o;
        for (std::size_t i = S; i-- > 0;) {
          oi[i] = r % out[i];
          r /= out[i];
        }
        double acc = B != nullptr ? B->typed<float>()[m] : 0.0;
        for (std::int64_t ci = 0; ci < Cg; ++ci)
          for (std::int64_t k = 0; k < ksize; ++k) {
            std::int64_t q = k;
            for (std::size_t i = S; i-- > 0;) {
              ki[i] = q % c.w[i + 2];
              q /= c.w[i + 2];
            }
            std::int64_t off = 0;
            bool inside = true;
            for (std::size_t i = 0; i < S; ++i) {
              const auto p = oi[i] * stride[i] - pb[i] + ki[i] * dil[i];
              inside = inside && p >= 0 && p < c.x[i + 2];
              off = off * c.x[i + 2] + p;
            }
            if (!inside) continue;
            acc += double(x[(n * C + g * Cg + ci) * isize + off]) * w[(m * Cg + ci) * ksize + k];
          }
        y[static_cast<std::size_t>((n * M + m) * osize + o)] = acc;
      }
    }
  return y;
}

kernel_node conv_node(const conv_case& c, const char* op = "Conv") {
  kernel_node kn{op, 11};
  if (std::string(op) == "FusedConv") {
    kn.domain = "com.microsoft";
    kn.since_version = 1;
  }
  if (!c.strides.empty()) kn.set("strides", c.strides);
  if (!c.pads.empty()) kn.set("pads", c.pads);
  if (!c.dilations.empty()) kn.set("dilations", c.dilations);
  if (c.group != 1) kn.set("group", c.group);
  if (c.auto_pad != "NOTSET") kn.set("auto_pad", c.auto_pad);
  return kn;
}

tensor rnd(std::vector<std::int64_t> s, std::uint64_t seed) {
  tensor t(element_type::float32, s);
  for (std::size_t i = 0; i < t.element_count(); ++i) t.typed<float>()[i] = zoo::uniform_at(seed, i);
  return t;
}

void check_case(const conv_case& c, thread_pool* pool = nullptr, bool symbolic = false) {
  const auto X = rnd(c.x, 1), W = rnd(c.w, 2), B = rnd({c.w[0]}, 3);
  std::vector<test::kernel_input> ins{{X, false, symbolic}, {W, true}};
  if (c.bias) ins.push_back({B, true});
  const auto y = run1<ops::conv>(conv_node(c), ins, pool);
  std::vector<std::int64_t> shape;
  const auto want = reference(c, X, W, c.bias ? &B : nullptr, shape);
  test::check_tensor<float>(y, shape, std::vector<float>(want.begin(), want.end()), 1e-4, 1e-4);
}

}  // namespace

TEST_CASE("Conv 2-D: plain, padded, strided, dilated, grouped, depthwise and pointwise match the reference") {
  check_case({{1, 3, 7, 7}, {4, 3, 3, 3}, {}, {}, {}});
  check_case({{2, 3, 7, 9}, {5, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}});
  check_case({{1, 4, 9, 8}, {6, 4, 3, 2}, {2, 3}, {1, 0, 2, 1}, {}});
  check_case({{1, 2, 11, 11}, {3, 2, 3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}});
  check_case({{2, 6, 8, 8}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 2});          // groups
  check_case({{1, 8, 10, 10}, {8, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 8});        // depthwise
  check_case({{1, 8, 10, 10}, {8, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 8});        // depthwise, strided
  check_case({{1, 3, 4, 300}, {3, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 3});        // depthwise, rows of 19 blocks
  check_case({{1, 3, 5, 601}, {3, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 3});        // the same, strided, odd width
  check_case({{1, 4, 7, 7}, {4, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 4});          // depthwise, one masked block
  check_case({{1, 4, 9, 9}, {8, 1, 5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 4});      // channel multiplier 2
  check_case({{2, 16, 5, 5}, {8, 16, 1, 1}, {}, {}, {}, 1, "NOTSET", false});     // pointwise, no bias
  check_case({{1, 16, 6, 6}, {8, 16, 1, 1}, {2, 2}, {}, {}});                     // strided 1x1
}

TEST_CASE("Conv auto_pad SAME_UPPER, SAME_LOWER and VALID") {
  check_case({{1, 2, 7, 7}, {3, 2, 4, 4}, {2, 2}, {}, {}, 1, "SAME_UPPER"});
  check_case({{1, 2, 7, 7}, {3, 2, 4, 4}, {2, 2}, {}, {}, 1, "SAME_LOWER"});
  check_case({{1, 2, 7, 6}, {3, 2, 3, 3}, {2, 1}, {}, {}, 1, "VALID"});
}

TEST_CASE("Conv 1-D and 3-D") {
  check_case({{2, 3, 17}, {4, 3, 5}, {2}, {2, 1}, {1}});
  check_case({{1, 2, 5, 6, 7}, {3, 2, 3, 2, 3}, {1, 2, 1}, {1, 0, 1, 1, 1, 0}, {1, 1, 2}});
}

TEST_CASE("Conv splits large outputs across threads and gets the same result") {
  thread_pool pool(3);
  check_case({{1, 8, 40, 40}, {16, 8, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}}, &pool);    // tiled im2col
  check_case({{1, 32, 40, 40}, {16, 32, 1, 1}, {}, {}, {}}, &pool);                 // tiled pointwise
  check_case({{2, 64, 7, 7}, {128, 64, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}}, &pool);    // small output: rows split
  check_case({{1, 32, 20, 20}, {32, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 32}, &pool);  // depthwise planes
}

// 3x3 convolutions with unit stride and one group whose outputs have at least 48 2x2 tiles take the Winograd
// F(2x2, 3x3) path on AVX-512 builds (the im2col path elsewhere); both must match the reference at every border.
TEST_CASE("Conv 3x3 on large maps (Winograd): odd sizes, asymmetric pads, wide rows, batches and threads") {
  thread_pool pool(2);
  check_case({{1, 5, 15, 17}, {7, 5, 3, 3}, {}, {}, {}});                                // 13x15: odd, no pads
  check_case({{2, 3, 14, 14}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}}, &pool);            // batch of two
  check_case({{1, 4, 16, 20}, {6, 4, 3, 3}, {1, 1}, {0, 1, 2, 0}, {1, 1}});               // pads top 0 left 1 bottom 2
  check_case({{1, 3, 9, 70}, {5, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 1, "NOTSET", false}, &pool);  // 35 tiles a row
  check_case({{1, 2, 12, 12}, {3, 2, 3, 3}, {1, 1}, {}, {}, 1, "SAME_UPPER"});
  check_case({{1, 70, 20, 20}, {33, 70, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}}, &pool);         // channels past one panel
  check_case({{1, 260, 8, 8}, {13, 260, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}}, &pool);         // two K blocks of the packing
  // Input sizes unknown when compiled: weights prepared for both paths; the size at run time chooses.
  check_case({{1, 4, 16, 16}, {5, 4, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}}, nullptr, true);
  check_case({{1, 4, 6, 6}, {5, 4, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}}, nullptr, true);
}

TEST_CASE("FusedConv adds the bias and the residual Z, then applies its activation") {
  const conv_case c{{1, 4, 6, 6}, {4, 4, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}};
  const auto X = rnd(c.x, 1), W = rnd(c.w, 2), B = rnd({4}, 3), Z = rnd({1, 4, 6, 6}, 4);
  std::vector<std::int64_t> shape;
  const auto base = reference(c, X, W, &B, shape);
  const auto expect = [&](const char* act, std::vector<float> params, auto f, bool with_z) {
    auto kn = conv_node(c, "FusedConv");
    kn.set("activation", std::string(act));
    if (!params.empty()) kn.set("activation_params", params);
    std::vector<test::kernel_input> ins{{X}, {W, true}, {B, true}};
    if (with_z) ins.push_back({Z});
    const auto y = run1<ops::fused_conv>(kn, ins);
    std::vector<float> want;
    for (std::size_t i = 0; i < base.size(); ++i) want.push_back(static_cast<float>(f(base[i] + (with_z ? Z.typed<float>()[i] : 0.0))));
    test::check_tensor<float>(y, shape, want, 1e-4, 1e-4);
  };
  expect("Relu", {}, [](double v) { return std::max(v, 0.0); }, true);
  expect("Relu", {}, [](double v) { return std::max(v, 0.0); }, false);
  expect("Clip", {0.0f, 0.5f}, [](double v) { return std::min(std::max(v, 0.0), 0.5); }, false);
  expect("Sigmoid", {}, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }, false);
  expect("LeakyRelu", {0.1f}, [](double v) { return v >= 0 ? v : 0.1 * v; }, true);
  expect("HardSigmoid", {0.2f, 0.5f}, [](double v) { return std::min(std::max(0.2 * v + 0.5, 0.0), 1.0); }, false);
  auto bad = conv_node(c, "FusedConv");
  bad.set("activation", std::string("Swish"));
  CHECK(test::run_kernel<ops::fused_conv>(bad, {{X}, {W, true}}).code() == errc::not_implemented);
}

TEST_CASE("FusedConv on a large map (Winograd) applies bias, residual and ReLU or Clip in the output transform") {
  const conv_case c{{2, 6, 17, 18}, {8, 6, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}};
  const auto X = rnd(c.x, 1), W = rnd(c.w, 2), B = rnd({8}, 3), Z = rnd({2, 8, 17, 18}, 4);
  std::vector<std::int64_t> shape;
  const auto base = reference(c, X, W, &B, shape);
  thread_pool pool(2);
  for (const bool relu : {true, false}) {
    auto kn = conv_node(c, "FusedConv");
    kn.set("activation", std::string(relu ? "Relu" : "Clip"));
    if (!relu) kn.set("activation_params", std::vector<float>{-0.25f, 0.75f});
    const auto y = run1<ops::fused_conv>(kn, {{X}, {W, true}, {B, true}, {Z}}, &pool);
    std::vector<float> want;
    for (std::size_t i = 0; i < base.size(); ++i) {
      const double v = base[i] + Z.typed<float>()[i];
      want.push_back(static_cast<float>(relu ? std::max(v, 0.0) : std::min(std::max(v, -0.25), 0.75)));
    }
    test::check_tensor<float>(y, shape, want, 1e-4, 1e-4);
  }
}

TEST_CASE("Conv rejects inconsistent shapes with invalid_argument") {
  const auto X = rnd({1, 3, 5, 5}, 1);
  auto r = test::run_kernel<ops::conv>(kernel_node{"Conv", 11}, {{X}, {rnd({4, 2, 3, 3}, 2), true}});
  CHECK(r.code() == errc::invalid_argument);
  CHECK(r.status().message().find("channels per group") != std::string::npos);
  kernel_node grouped{"Conv", 11};
  grouped.set("group", std::int64_t{2});
  r = test::run_kernel<ops::conv>(grouped, {{X}, {rnd({4, 1, 3, 3}, 2), true}});
  CHECK(r.code() == errc::invalid_argument);
  CHECK(r.status().message().find("group 2 does not divide") != std::string::npos);
}
