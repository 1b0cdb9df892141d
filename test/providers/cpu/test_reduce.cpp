// Tests of the CPU reduction kernels (reduce.cpp): the Reduce* family over any axes set, keepdims and
// noop_with_empty_axes, empty reductions, and ArgMax/ArgMin, against references computed here.
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

using axes_t = std::vector<std::int64_t>;

kernel_node op_node(std::string op, int opset) { return kernel_node(std::move(op), opset); }
kernel_input axes_in(const axes_t& a) {
  return {tensor::from<std::int64_t>(std::span<const std::int64_t>(dims_t{static_cast<std::int64_t>(a.size())}),
                                     std::span<const std::int64_t>(a))};
}

// ---- reference: numpy semantics in double ----
struct ref_result {
  dims_t dims;
  std::vector<double> values;
};
ref_result ref_reduce(const std::string& op, const dims_t& d, const std::vector<double>& x, const axes_t& axes_in,
                      bool keepdims) {
  const std::size_t rank = d.size();
  std::vector<bool> red(rank, axes_in.empty());
  for (auto a : axes_in) red[static_cast<std::size_t>(a < 0 ? a + static_cast<std::int64_t>(rank) : a)] = true;
  ref_result r;
  dims_t kept_dims;
  for (std::size_t i = 0; i < rank; ++i) {
    if (!red[i]) {
      r.dims.push_back(d[i]);
      kept_dims.push_back(d[i]);
    } else if (keepdims) {
      r.dims.push_back(1);
    }
  }
  const std::int64_t O = count_of(kept_dims), R = O == 0 ? 0 : count_of(d) / std::max<std::int64_t>(O, 1);
  std::vector<std::vector<double>> groups(static_cast<std::size_t>(O));
  for (std::int64_t i = 0; i < count_of(d); ++i) {
    std::int64_t rem = i, o = 0, mul = 1;
    for (std::size_t k = rank; k-- > 0;) {
      const std::int64_t idx = rem % d[k];
      rem /= d[k];
      if (!red[k]) {
        o += idx * mul;
        mul *= d[k];
      }
    }
    groups[static_cast<std::size_t>(o)].push_back(x[static_cast<std::size_t>(i)]);
  }
  (void)R;
  for (const auto& g : groups) {
    double v = 0;
    if (op == "sum" || op == "mean") {
      for (double e : g) v += e;
      if (op == "mean") v /= static_cast<double>(g.size());
    } else if (op == "max") {
      v = -INFINITY;
      for (double e : g) v = std::max(v, e);
    } else if (op == "min") {
      v = INFINITY;
      for (double e : g) v = std::min(v, e);
    } else if (op == "prod") {
      v = 1;
      for (double e : g) v *= e;
    } else if (op == "sum_square" || op == "l2") {
      for (double e : g) v += e * e;
      if (op == "l2") v = std::sqrt(v);
    } else if (op == "l1") {
      for (double e : g) v += std::fabs(e);
    } else if (op == "log_sum") {
      for (double e : g) v += e;
      v = std::log(v);
    } else if (op == "log_sum_exp") {
      double m = -INFINITY;
      for (double e : g) m = std::max(m, e);
      for (double e : g) v += std::exp(e - m);
      v = std::isfinite(m) ? m + std::log(v) : m;
    }
    r.values.push_back(v);
  }
  return r;
}

void check_error(const Result<std::vector<ivalue>>& r, const std::string& mentions) {
  REQUIRE_FALSE(r.has_value());
  CHECK(r.code() == errc::invalid_argument);
  CHECK_MESSAGE(r.status().message().find(mentions) != std::string::npos, r.status().message());
}

// Runs reduction K (op name for the reference) with axes as an attribute (opset 13) and checks it.
template <class K, class T = float>
void check_reduce(const std::string& op_type, const std::string& op, const dims_t& d, const std::vector<double>& x,
                  const axes_t& axes, bool keepdims, double atol = 1e-5, double rtol = 1e-5, thread_pool* pool = nullptr,
                  int opset = 13) {
  kernel_node kn = op_node(op_type, opset);
  if (!axes.empty()) kn.set("axes", axes);
  if (!keepdims) kn.set("keepdims", std::int64_t{0});
  std::vector<kernel_input> ins{in<T>(d, x)};
  // ReduceSum from opset 13 takes its axes as an input.
  if (op_type == "ReduceSum" && opset >= 13) {
    kn.attributes.erase("axes");
    if (!axes.empty()) ins.push_back(axes_in(axes));
  }
  const tensor y = run1<K>(kn, ins, pool);
  const auto want = ref_reduce(op, d, x, axes, keepdims);
  std::vector<T> w(want.values.size());
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<T>(want.values[i]);
  check_tensor<T>(y, want.dims, w, atol, rtol);
}

template <class K>
void check_all_axes(const std::string& op_type, const std::string& op, double lo, double hi, double atol) {
  const dims_t d{3, 4, 5};
  const auto x = random_values(60, lo, hi, 7);
  for (const axes_t& axes : {axes_t{}, axes_t{0}, axes_t{1}, axes_t{2}, axes_t{-1}, axes_t{0, 2}, axes_t{2, 0},
                             axes_t{0, 1}, axes_t{1, 2}, axes_t{0, 1, 2}})
    for (bool keep : {true, false}) {
      CAPTURE(axes.size());
      CAPTURE(keep);
      check_reduce<K>(op_type, op, d, x, axes, keep, atol);
    }
}

}  // namespace

// =================================================================================================================
// Every reduction over every axes set of a 3-D tensor

TEST_CASE("ReduceSum over every axes set, keepdims on and off") { check_all_axes<ops::reduce_sum>("ReduceSum", "sum", -2, 2, 1e-5); }
TEST_CASE("ReduceMean over every axes set") { check_all_axes<ops::reduce_mean>("ReduceMean", "mean", -2, 2, 1e-6); }
TEST_CASE("ReduceMax over every axes set") { check_all_axes<ops::reduce_max>("ReduceMax", "max", -2, 2, 0); }
TEST_CASE("ReduceMin over every axes set") { check_all_axes<ops::reduce_min>("ReduceMin", "min", -2, 2, 0); }
TEST_CASE("ReduceProd over every axes set") { check_all_axes<ops::reduce_prod>("ReduceProd", "prod", 0.5, 1.5, 1e-6); }
TEST_CASE("ReduceSumSquare over every axes set") {
  check_all_axes<ops::reduce_sum_square>("ReduceSumSquare", "sum_square", -2, 2, 1e-5);
}
TEST_CASE("ReduceL1 over every axes set") { check_all_axes<ops::reduce_l1>("ReduceL1", "l1", -2, 2, 1e-5); }
TEST_CASE("ReduceL2 over every axes set") { check_all_axes<ops::reduce_l2>("ReduceL2", "l2", -2, 2, 1e-5); }
TEST_CASE("ReduceLogSum over every axes set") { check_all_axes<ops::reduce_log_sum>("ReduceLogSum", "log_sum", 0.1, 2, 1e-5); }
TEST_CASE("ReduceLogSumExp over every axes set") {
  check_all_axes<ops::reduce_log_sum_exp>("ReduceLogSumExp", "log_sum_exp", -2, 2, 1e-5);
}

TEST_CASE("Reductions over 4-D tensors with size-1 dims and interleaved axes") {
  const dims_t d{2, 1, 3, 4, 1, 5};
  const auto x = random_values(static_cast<std::size_t>(count_of(d)), -2, 2, 17);
  for (const axes_t& axes : {axes_t{1}, axes_t{1, 4}, axes_t{0, 3}, axes_t{2, 5}, axes_t{0, 2, 5}, axes_t{1, 3, 4}})
    for (bool keep : {true, false}) {
      check_reduce<ops::reduce_sum>("ReduceSum", "sum", d, x, axes, keep);
      check_reduce<ops::reduce_max>("ReduceMax", "max", d, x, axes, keep, 0);
      check_reduce<ops::reduce_log_sum_exp>("ReduceLogSumExp", "log_sum_exp", d, x, axes, keep);
    }
}

TEST_CASE("Reductions before opset 13 and of scalars") {
  const dims_t d{2, 3};
  const auto x = random_values(6, -2, 2, 18);
  check_reduce<ops::reduce_sum>("ReduceSum", "sum", d, x, {1}, true, 1e-5, 1e-5, nullptr, 11);
  check_reduce<ops::reduce_sum>("ReduceSum", "sum", d, x, {0}, false, 1e-5, 1e-5, nullptr, 1);
  check_reduce<ops::reduce_mean>("ReduceMean", "mean", d, x, {-2}, true, 1e-5, 1e-5, nullptr, 1);
  check_reduce<ops::reduce_max>("ReduceMax", "max", d, x, {}, false, 0, 0, nullptr, 12);
  // A scalar reduces to itself (after the element map of ReduceSumSquare).
  const tensor y = run1<ops::reduce_sum_square>(op_node("ReduceSumSquare", 13), {{tensor::scalar(3.0f)}});
  check_tensor<float>(y, {}, {9.0f});
}

// =================================================================================================================
// Element types

TEST_CASE("Reductions of double, int32 and int64") {
  const dims_t d{4, 6};
  const auto x = random_values(24, -5, 5, 21, true);
  for (const axes_t& axes : {axes_t{0}, axes_t{1}, axes_t{}}) {
    check_reduce<ops::reduce_sum, double>("ReduceSum", "sum", d, x, axes, true, 1e-12);
    check_reduce<ops::reduce_sum, std::int32_t>("ReduceSum", "sum", d, x, axes, false, 0);
    check_reduce<ops::reduce_sum, std::int64_t>("ReduceSum", "sum", d, x, axes, true, 0);
    check_reduce<ops::reduce_sum_square, std::int32_t>("ReduceSumSquare", "sum_square", d, x, axes, true, 0);
    check_reduce<ops::reduce_l1, std::int64_t>("ReduceL1", "l1", d, x, axes, true, 0);
    check_reduce<ops::reduce_max, std::int64_t>("ReduceMax", "max", d, x, axes, true, 0);
    check_reduce<ops::reduce_min, std::int32_t>("ReduceMin", "min", d, x, axes, true, 0);
    check_reduce<ops::reduce_max, std::int8_t>("ReduceMax", "max", d, x, axes, true, 0);
    check_reduce<ops::reduce_min, std::int8_t>("ReduceMin", "min", d, x, axes, false, 0);
    check_reduce<ops::reduce_mean, double>("ReduceMean", "mean", d, x, axes, true, 1e-12);
    check_reduce<ops::reduce_l2, double>("ReduceL2", "l2", d, x, axes, true, 1e-12);
    check_reduce<ops::reduce_log_sum_exp, double>("ReduceLogSumExp", "log_sum_exp", d, x, axes, true, 1e-12);
  }
  const auto u = random_values(24, 0, 255, 22, true);
  check_reduce<ops::reduce_max, std::uint8_t>("ReduceMax", "max", d, u, {1}, true, 0);
  check_reduce<ops::reduce_min, std::uint8_t>("ReduceMin", "min", d, u, {0}, true, 0);
  const auto small = random_values(24, 1, 3, 23, true);
  check_reduce<ops::reduce_prod, std::int64_t>("ReduceProd", "prod", d, small, {1}, true, 0);
  check_reduce<ops::reduce_prod, std::int32_t>("ReduceProd", "prod", d, small, {0}, true, 0);
}

TEST_CASE("Integer ReduceMean truncates, integer L2, LogSum and LogSumExp truncate their float results") {
  const dims_t d{2, 3};
  const std::vector<double> x{1, 2, 4, -1, -2, -4};
  const tensor mean = run1<ops::reduce_mean>(op_node("ReduceMean", 13).set("axes", axes_t{1}), {in<std::int32_t>(d, x)});
  check_tensor<std::int32_t>(mean, {2, 1}, {2, -2});  // 7/3 and -7/3 truncate toward zero
  const tensor l2 = run1<ops::reduce_l2>(op_node("ReduceL2", 13).set("axes", axes_t{1}), {in<std::int64_t>(d, x)});
  check_tensor<std::int64_t>(l2, {2, 1}, {4, 4});  // sqrt(21) = 4.58
  const std::vector<double> p{1, 2, 4, 10, 20, 30};
  const tensor ls = run1<ops::reduce_log_sum>(op_node("ReduceLogSum", 13).set("axes", axes_t{1}), {in<std::int32_t>(d, p)});
  check_tensor<std::int32_t>(ls, {2, 1}, {1, 4});  // log 7 = 1.95, log 60 = 4.09
  const tensor lse = run1<ops::reduce_log_sum_exp>(op_node("ReduceLogSumExp", 13).set("axes", axes_t{1}), {in<std::int64_t>(d, p)});
  check_tensor<std::int64_t>(lse, {2, 1}, {4, 30});  // 4.17, 30.00005
}

TEST_CASE("Integer sums and products wrap instead of overflowing") {
  const std::int64_t big = std::numeric_limits<std::int64_t>::max();
  const tensor s = run1<ops::reduce_sum>(op_node("ReduceSum", 11), {{tensor::from<std::int64_t>({2}, {big, 1})}});
  check_tensor<std::int64_t>(s, {1}, {std::numeric_limits<std::int64_t>::min()});
  const std::int32_t b32 = std::numeric_limits<std::int32_t>::max();
  const tensor s32 = run1<ops::reduce_sum>(op_node("ReduceSum", 11), {{tensor::from<std::int32_t>({2}, {b32, b32})}});
  check_tensor<std::int32_t>(s32, {1}, {-2});
}

// =================================================================================================================
// Axes as an input, noop_with_empty_axes

TEST_CASE("ReduceSum opset 13 takes axes as an input, and noop_with_empty_axes") {
  const dims_t d{3, 2, 2};
  const auto x = random_values(12, -2, 2, 31);
  const auto want1 = ref_reduce("sum", d, x, {1}, true);
  const tensor y = run1<ops::reduce_sum>(op_node("ReduceSum", 13), {in<float>(d, x), axes_in({-2})});
  check_tensor<float>(y, want1.dims, std::vector<float>(want1.values.begin(), want1.values.end()));
  // A constant axes input works the same.
  const tensor yc = run1<ops::reduce_sum>(op_node("ReduceSum", 13), {in<float>(d, x), {axes_in({1}).value, true}});
  check_tensor<float>(yc, want1.dims, std::vector<float>(want1.values.begin(), want1.values.end()));
  // No axes (omitted or empty): everything is reduced...
  const auto all = ref_reduce("sum", d, x, {}, false);
  const tensor ya = run1<ops::reduce_sum>(op_node("ReduceSum", 13).set("keepdims", std::int64_t{0}), {in<float>(d, x)});
  check_tensor<float>(ya, {}, {static_cast<float>(all.values[0])});
  const tensor ye = run1<ops::reduce_sum>(op_node("ReduceSum", 13), {in<float>(d, x), axes_in({})});
  check_tensor<float>(ye, {1, 1, 1}, {static_cast<float>(all.values[0])});
  // ... unless noop_with_empty_axes: the input comes back unchanged.
  const tensor yn = run1<ops::reduce_sum>(op_node("ReduceSum", 13).set("noop_with_empty_axes", std::int64_t{1}),
                                          {in<float>(d, x), axes_in({})});
  check_tensor<float>(yn, d, std::vector<float>(x.begin(), x.end()));
  const tensor yo = run1<ops::reduce_sum>(op_node("ReduceSum", 13).set("noop_with_empty_axes", std::int64_t{1}), {in<float>(d, x)});
  check_tensor<float>(yo, d, std::vector<float>(x.begin(), x.end()));
  // noop_with_empty_axes does nothing when axes are given.
  const tensor yg = run1<ops::reduce_sum>(op_node("ReduceSum", 13).set("noop_with_empty_axes", std::int64_t{1}),
                                          {in<float>(d, x), axes_in({1})});
  check_tensor<float>(yg, want1.dims, std::vector<float>(want1.values.begin(), want1.values.end()));
}

TEST_CASE("Opset-18 style reductions take axes as an input too") {
  const dims_t d{3, 4};
  const auto x = random_values(12, 0.1, 2, 32);
  const auto want = ref_reduce("mean", d, x, {0}, true);
  const tensor y = run1<ops::reduce_mean>(op_node("ReduceMean", 18), {in<float>(d, x), axes_in({0})});
  check_tensor<float>(y, want.dims, std::vector<float>(want.values.begin(), want.values.end()));
  // With noop_with_empty_axes and no axes, the reduction is over no axes: each element alone (squared here).
  const tensor sq = run1<ops::reduce_sum_square>(op_node("ReduceSumSquare", 18).set("noop_with_empty_axes", std::int64_t{1}),
                                                 {in<float>(d, x)});
  std::vector<float> sqw;
  for (double v : x) sqw.push_back(static_cast<float>(v * v));
  check_tensor<float>(sq, d, sqw);
}

// =================================================================================================================
// Empty reductions and empty outputs

TEST_CASE("Reducing an empty set gives the identity of each reduction") {
  const dims_t d{2, 0, 3};
  const std::vector<double> none;
  const auto run = [&](auto kernel, const char* op) {
    using K = decltype(kernel);
    return run1<K>(op_node(op, 13).set("axes", axes_t{1}), {in<float>(d, none)});
  };
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const dims_t od{2, 1, 3};
  check_tensor<float>(run(ops::reduce_sum{}, "ReduceSum"), od, std::vector<float>(6, 0.0f));
  check_tensor<float>(run(ops::reduce_prod{}, "ReduceProd"), od, std::vector<float>(6, 1.0f));
  check_tensor<float>(run(ops::reduce_max{}, "ReduceMax"), od, std::vector<float>(6, -inf));
  check_tensor<float>(run(ops::reduce_min{}, "ReduceMin"), od, std::vector<float>(6, inf));
  check_tensor<float>(run(ops::reduce_mean{}, "ReduceMean"), od, std::vector<float>(6, nan));
  check_tensor<float>(run(ops::reduce_sum_square{}, "ReduceSumSquare"), od, std::vector<float>(6, 0.0f));
  check_tensor<float>(run(ops::reduce_l1{}, "ReduceL1"), od, std::vector<float>(6, 0.0f));
  check_tensor<float>(run(ops::reduce_l2{}, "ReduceL2"), od, std::vector<float>(6, 0.0f));
  check_tensor<float>(run(ops::reduce_log_sum{}, "ReduceLogSum"), od, std::vector<float>(6, -inf));
  check_tensor<float>(run(ops::reduce_log_sum_exp{}, "ReduceLogSumExp"), od, std::vector<float>(6, -inf));
  // Integers: the type's lowest and highest values; ReduceMean gives 0.
  const auto ri = [&](auto kernel, const char* op) {
    using K = decltype(kernel);
    return run1<K>(op_node(op, 13).set("axes", axes_t{1}), {in<std::int32_t>(d, none)});
  };
  check_tensor<std::int32_t>(ri(ops::reduce_max{}, "ReduceMax"), od, std::vector<std::int32_t>(6, std::numeric_limits<std::int32_t>::lowest()));
  check_tensor<std::int32_t>(ri(ops::reduce_min{}, "ReduceMin"), od, std::vector<std::int32_t>(6, std::numeric_limits<std::int32_t>::max()));
  check_tensor<std::int32_t>(ri(ops::reduce_mean{}, "ReduceMean"), od, std::vector<std::int32_t>(6, 0));
  check_tensor<std::int32_t>(ri(ops::reduce_prod{}, "ReduceProd"), od, std::vector<std::int32_t>(6, 1));
  check_tensor<std::int32_t>(ri(ops::reduce_log_sum_exp{}, "ReduceLogSumExp"), od,
                             std::vector<std::int32_t>(6, std::numeric_limits<std::int32_t>::lowest()));
  // Reducing over a non-empty axis of an empty tensor gives an empty output.
  const tensor e = run1<ops::reduce_sum>(op_node("ReduceSum", 11).set("axes", axes_t{2}), {in<float>(d, none)});
  check_tensor<float>(e, {2, 0, 1}, {});
}

TEST_CASE("ReduceLogSumExp is stable for large values and handles infinities") {
  const float inf = std::numeric_limits<float>::infinity();
  const tensor x = tensor::from<float>({3, 2}, {1000.0f, 1000.0f, -inf, -inf, inf, 1.0f});
  const tensor y = run1<ops::reduce_log_sum_exp>(op_node("ReduceLogSumExp", 13).set("axes", axes_t{1}), {{x}});
  check_tensor<float>(y, {3, 1}, {1000.0f + std::log(2.0f), -inf, inf}, 1e-3);
}

// =================================================================================================================
// Errors

TEST_CASE("Reductions reject axes out of range and repeated axes") {
  const dims_t d{2, 3};
  const auto x = random_values(6, -1, 1, 41);
  check_error(run_kernel<ops::reduce_mean>(op_node("ReduceMean", 13).set("axes", axes_t{2}), {in<float>(d, x)}), "axis 2");
  check_error(run_kernel<ops::reduce_sum>(op_node("ReduceSum", 13), {in<float>(d, x), axes_in({-3})}), "axis -3");
  check_error(run_kernel<ops::reduce_max>(op_node("ReduceMax", 13).set("axes", axes_t{1, -1}), {in<float>(d, x)}), "twice");
  CHECK(run_kernel<ops::reduce_sum>(op_node("ReduceSum", 13), {in<float>(d, x), {make<float>({1}, {1.0})}}).code() ==
        errc::not_implemented);  // float axes
}

// =================================================================================================================
// Threads

TEST_CASE("ReduceMean over the last axis of [1,128,768] on two threads") {
  const dims_t d{1, 128, 768};
  const auto x = random_values(128 * 768, -2, 2, 51);
  thread_pool pool(2);
  check_reduce<ops::reduce_mean>("ReduceMean", "mean", d, x, {-1}, true, 1e-6, 1e-5, &pool);
  check_reduce<ops::reduce_sum_square>("ReduceSumSquare", "sum_square", d, x, {2}, false, 1e-4, 1e-5, &pool);
}

TEST_CASE("Full and near-full reductions are split across two threads") {
  thread_pool pool(2);
  const dims_t d{64, 128, 33};
  const auto x = random_values(static_cast<std::size_t>(count_of(d)), -1, 1, 61);
  // Everything (one output), inner-reduced with outer reduced groups, and down to a few kept columns.
  check_reduce<ops::reduce_sum>("ReduceSum", "sum", d, x, {}, true, 1e-2, 1e-4, &pool);
  check_reduce<ops::reduce_max>("ReduceMax", "max", d, x, {}, false, 0, 0, &pool);
  check_reduce<ops::reduce_log_sum_exp>("ReduceLogSumExp", "log_sum_exp", d, x, {}, true, 1e-4, 1e-5, &pool);
  check_reduce<ops::reduce_mean>("ReduceMean", "mean", d, x, {0, 2}, true, 1e-5, 1e-4, &pool);
  check_reduce<ops::reduce_mean>("ReduceMean", "mean", d, x, {0, 1}, false, 1e-5, 1e-4, &pool);
  check_reduce<ops::reduce_min>("ReduceMin", "min", d, x, {0, 1}, false, 0, 0, &pool);
  check_reduce<ops::reduce_l2, double>("ReduceL2", "l2", d, x, {0}, true, 1e-10, 1e-10, &pool);
  // Three long rows: each row's reduction is split into parts too.
  const dims_t rows{3, 50000};
  const auto xr = random_values(150000, -1, 1, 63);
  check_reduce<ops::reduce_sum>("ReduceSum", "sum", rows, xr, {1}, true, 1e-3, 1e-4, &pool);
  check_reduce<ops::reduce_l1, double>("ReduceL1", "l1", rows, xr, {-1}, false, 1e-9, 1e-10, &pool);
  check_reduce<ops::reduce_max>("ReduceMax", "max", rows, xr, {1}, false, 0, 0, &pool);
  check_reduce<ops::reduce_log_sum_exp>("ReduceLogSumExp", "log_sum_exp", rows, xr, {1}, true, 1e-4, 1e-5, &pool);
  check_reduce<ops::reduce_prod, double>("ReduceProd", "prod", {4, 40000}, random_values(160000, 0.999, 1.001, 62), {1}, true,
                                         1e-10, 1e-9, &pool);
}

// =================================================================================================================
// ArgMax and ArgMin

namespace {
// Reference argmax/argmin along axis.
std::vector<std::int64_t> ref_arg(const dims_t& d, const std::vector<double>& x, std::size_t axis, bool max, bool last) {
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i < axis) outer *= d[i];
    if (i > axis) inner *= d[i];
  }
  const std::int64_t n = d[axis];
  std::vector<std::int64_t> r;
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t k = 0; k < inner; ++k) {
      std::int64_t bi = 0;
      double best = x[static_cast<std::size_t>(o * n * inner + k)];
      for (std::int64_t j = 1; j < n; ++j) {
        const double v = x[static_cast<std::size_t>((o * n + j) * inner + k)];
        if ((max ? v > best : v < best) || (last && v == best)) {
          best = v;
          bi = j;
        }
      }
      r.push_back(bi);
    }
  return r;
}
dims_t arg_dims(dims_t d, std::size_t axis, bool keep) {
  if (keep) d[axis] = 1;
  else d.erase(d.begin() + static_cast<std::ptrdiff_t>(axis));
  return d;
}
}  // namespace

TEST_CASE("ArgMax and ArgMin over every axis, keepdims, select_last_index, with ties") {
  const dims_t d{3, 4, 5};
  const auto x = random_values(60, -3, 3, 71, true);  // small integers: many ties
  for (std::int64_t axis : {0, 1, 2, -1, -3})
    for (bool keep : {true, false})
      for (bool last : {false, true}) {
        const auto a = static_cast<std::size_t>(axis < 0 ? axis + 3 : axis);
        kernel_node kmax = op_node("ArgMax", 13), kmin = op_node("ArgMin", 13);
        for (auto* k : {&kmax, &kmin}) {
          k->set("axis", axis).set("keepdims", std::int64_t{keep}).set("select_last_index", std::int64_t{last});
        }
        check_tensor<std::int64_t>(run1<ops::arg_max>(kmax, {in<float>(d, x)}), arg_dims(d, a, keep), ref_arg(d, x, a, true, last));
        check_tensor<std::int64_t>(run1<ops::arg_min>(kmin, {in<float>(d, x)}), arg_dims(d, a, keep), ref_arg(d, x, a, false, last));
      }
}

TEST_CASE("ArgMax and ArgMin default to axis 0 and keepdims, for every element type") {
  const dims_t d{4, 3};
  const auto x = random_values(12, 0, 100, 72, true);
  const auto want_max = ref_arg(d, x, 0, true, false), want_min = ref_arg(d, x, 0, false, false);
  const dims_t od{1, 3};
  check_tensor<std::int64_t>(run1<ops::arg_max>(op_node("ArgMax", 1), {in<double>(d, x)}), od, want_max);
  check_tensor<std::int64_t>(run1<ops::arg_max>(op_node("ArgMax", 11), {in<std::int32_t>(d, x)}), od, want_max);
  check_tensor<std::int64_t>(run1<ops::arg_max>(op_node("ArgMax", 12), {in<std::int64_t>(d, x)}), od, want_max);
  check_tensor<std::int64_t>(run1<ops::arg_max>(op_node("ArgMax", 13), {in<std::int8_t>(d, x)}), od, want_max);
  check_tensor<std::int64_t>(run1<ops::arg_min>(op_node("ArgMin", 13), {in<std::uint8_t>(d, x)}), od, want_min);
  check_tensor<std::int64_t>(run1<ops::arg_min>(op_node("ArgMin", 1), {in<double>(d, x)}), od, want_min);
}

TEST_CASE("ArgMax example of the ONNX spec with select_last_index") {
  const tensor x = tensor::from<float>({2, 2}, {2, 2, 3, 10});
  kernel_node kn = op_node("ArgMax", 12);
  kn.set("axis", std::int64_t{1}).set("select_last_index", std::int64_t{1});
  check_tensor<std::int64_t>(run1<ops::arg_max>(kn, {{x}}), {2, 1}, {1, 1});
  kernel_node kf = op_node("ArgMax", 12);
  kf.set("axis", std::int64_t{1});
  check_tensor<std::int64_t>(run1<ops::arg_max>(kf, {{x}}), {2, 1}, {0, 1});
}

TEST_CASE("ArgMax and ArgMin reject a bad axis and an empty axis") {
  const auto x = random_values(6, -1, 1, 81);
  check_error(run_kernel<ops::arg_max>(op_node("ArgMax", 13).set("axis", std::int64_t{2}), {in<float>({2, 3}, x)}), "axis 2");
  check_error(run_kernel<ops::arg_min>(op_node("ArgMin", 13).set("axis", std::int64_t{-3}), {in<float>({2, 3}, x)}), "axis -3");
  check_error(run_kernel<ops::arg_min>(op_node("ArgMin", 13).set("axis", std::int64_t{1}), {in<float>({2, 0}, {})}), "empty");
}

TEST_CASE("ArgMax over large tensors on two threads") {
  thread_pool pool(2);
  const dims_t d{64, 300, 40};
  const auto x = random_values(static_cast<std::size_t>(count_of(d)), -1, 1, 91);
  for (std::int64_t axis : {1, 2}) {
    kernel_node kn = op_node("ArgMax", 13);
    kn.set("axis", axis);
    check_tensor<std::int64_t>(run1<ops::arg_max>(kn, {in<float>(d, x)}, &pool), arg_dims(d, static_cast<std::size_t>(axis), true),
                               ref_arg(d, x, static_cast<std::size_t>(axis), true, false));
  }
}
