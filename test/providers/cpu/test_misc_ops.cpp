// Tests of the CPU kernels in providers/cpu/src/misc_ops.cpp: TopK, NonZero, CumSum, Resize, Einsum,
// GatherElements, Tile, Pad. Expected values are hand-computed, computed by a plain reference loop in the test, or
// taken from the ONNX backend test data (test_resize_*, test_einsum_*) and numpy.einsum, pasted below as literals.
#include <epstack/providers/cpu/kernels.hpp>

#include "../../support/kernel_harness.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>
#if defined(__GNUC__) && !defined(__clang__)
#endif

using namespace epstack;
using namespace epstack::test;
namespace ops = epstack::cpu::ops;

namespace {

using i64 = std::int64_t;
using ints = std::vector<std::int64_t>;

template <class T>
tensor make(const ints& dims, const std::vector<T>& values) {  // element-wise, so that std::vector<bool> works too
  tensor t(element_type_of_v<T>, std::span<const std::int64_t>(dims));
  REQUIRE(t.element_count() == values.size());
  T* p = t.typed<T>();
  for (std::size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}
template <class T>
tensor empty_tensor() {
  const std::int64_t d[] = {0};
  return tensor(element_type_of_v<T>, d);
}
template <class T>
std::vector<T> values_of(const tensor& t) {
  const T* p = t.typed<T>();
  return std::vector<T>(p, p + t.element_count());
}
/// A node of `type` resolved to schema version `opset`, without attributes.
kernel_node op(std::string type, int opset) {
  kernel_node kn;
  kn.op_type = std::move(type);
  kn.since_version = opset;
  return kn;
}
ints dims_of(const tensor& t) { return ints(t.sizes().begin(), t.sizes().end()); }

/// Runs K expecting a failure with invalid_argument whose message contains `needle`.
template <class K>
void check_fails(const kernel_node& kn, const std::vector<kernel_input>& inputs, const std::string& needle) {
  auto r = run_kernel<K>(kn, inputs);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.status().code() == errc::invalid_argument);
  CHECK_MESSAGE(r.status().message().find(needle) != std::string::npos, r.status().message());
}

/// A deterministic pseudo-random sequence (an LCG), for inputs of the larger cases.
struct lcg {
  std::uint64_t s;
  explicit lcg(std::uint64_t seed) : s(seed) {}
  std::uint32_t next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::uint32_t>(s >> 33);
  }
  float uniform() { return static_cast<float>(next() % 2000001) / 1000000.0f - 1.0f; }  // [-1, 1]
};

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// TopK

namespace {
kernel_node topk_node(int opset) {
  kernel_node kn = op("TopK", opset);
  kn.outputs = 2;
  return kn;
}
std::vector<ivalue> run_topk(const kernel_node& kn, const std::vector<kernel_input>& in, thread_pool* pool = nullptr) {
  auto r = run_kernel<ops::top_k>(kn, in, pool);
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  REQUIRE(r->size() == 2);
  return *r;
}
}  // namespace

TEST_CASE("TopK opset 11: largest k along axis 1, sorted, with int64 indices (backend test_top_k)") {
  const tensor x = make<float>({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  auto out = run_topk(topk_node(11).set("axis", i64{1}), {{x}, {make<i64>({1}, {3})}});
  check_tensor<float>(out[0].as_tensor(), {3, 3}, {3, 2, 1, 7, 6, 5, 11, 10, 9});
  check_tensor<i64>(out[1].as_tensor(), {3, 3}, {3, 2, 1, 3, 2, 1, 3, 2, 1});
}

TEST_CASE("TopK opset 11: smallest (largest=0) and a negative axis") {
  const tensor x = make<float>({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 11, 10, 9, 8});
  auto out = run_topk(topk_node(11).set("axis", i64{-1}).set("largest", i64{0}), {{x}, {make<i64>({1}, {3})}});
  check_tensor<float>(out[0].as_tensor(), {3, 3}, {0, 1, 2, 4, 5, 6, 8, 9, 10});
  check_tensor<i64>(out[1].as_tensor(), {3, 3}, {0, 1, 2, 0, 1, 2, 3, 2, 1});
}

TEST_CASE("TopK along a leading (strided) axis") {
  // [2, 3, 2], axis 1, k 2.
  const tensor x = make<float>({2, 3, 2}, {1, 6, 5, 2, 3, 4, 9, 7, 8, 8, 7, 9});
  auto out = run_topk(topk_node(11).set("axis", i64{1}), {{x}, {make<i64>({1}, {2})}});
  check_tensor<float>(out[0].as_tensor(), {2, 2, 2}, {5, 6, 3, 4, 9, 9, 8, 8});
  check_tensor<i64>(out[1].as_tensor(), {2, 2, 2}, {1, 0, 2, 2, 0, 2, 1, 1});
}

TEST_CASE("TopK breaks ties by the lower index, for largest and smallest") {
  const tensor x = make<float>({6}, {3, 1, 3, 2, 3, 1});
  auto big = run_topk(topk_node(11), {{x}, {make<i64>({1}, {4})}});
  check_tensor<float>(big[0].as_tensor(), {4}, {3, 3, 3, 2});
  check_tensor<i64>(big[1].as_tensor(), {4}, {0, 2, 4, 3});
  auto small = run_topk(topk_node(11).set("largest", i64{0}), {{x}, {make<i64>({1}, {3})}});
  check_tensor<float>(small[0].as_tensor(), {3}, {1, 1, 2});
  check_tensor<i64>(small[1].as_tensor(), {3}, {1, 5, 3});
}

TEST_CASE("TopK ranks NaN above every number") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const tensor x = make<float>({4}, {1, nan, 3, 2});
  auto out = run_topk(topk_node(11), {{x}, {make<i64>({1}, {2})}});
  check_tensor<float>(out[0].as_tensor(), {2}, {nan, 3});
  check_tensor<i64>(out[1].as_tensor(), {2}, {1, 2});
}

TEST_CASE("TopK opset 1 takes k from the attribute, opset 10 from the K input") {
  const tensor x = make<float>({5}, {4, 9, 1, 7, 3});
  auto v1 = run_topk(topk_node(1).set("k", i64{2}), {{x}});
  check_tensor<float>(v1[0].as_tensor(), {2}, {9, 7});
  check_tensor<i64>(v1[1].as_tensor(), {2}, {1, 3});
  auto v10 = run_topk(topk_node(10), {{x}, {make<i64>({1}, {3})}});
  check_tensor<float>(v10[0].as_tensor(), {3}, {9, 7, 4});
  check_tensor<i64>(v10[1].as_tensor(), {3}, {1, 3, 0});
}

TEST_CASE("TopK with sorted=0 returns the same elements (reported in index order)") {
  const tensor x = make<float>({6}, {5, 1, 8, 2, 9, 7});
  auto out = run_topk(topk_node(11).set("sorted", i64{0}), {{x}, {make<i64>({1}, {3})}});
  check_tensor<float>(out[0].as_tensor(), {3}, {8, 9, 7});
  check_tensor<i64>(out[1].as_tensor(), {3}, {2, 4, 5});
}

TEST_CASE("TopK on int32, int64, uint8 and double, k = 0 and k = n") {
  auto a = run_topk(topk_node(11), {{make<std::int32_t>({4}, {-5, 10, 3, 10})}, {make<i64>({1}, {2})}});
  check_tensor<std::int32_t>(a[0].as_tensor(), {2}, {10, 10});
  check_tensor<i64>(a[1].as_tensor(), {2}, {1, 3});
  auto b = run_topk(topk_node(11).set("largest", i64{0}), {{make<i64>({4}, {7, -2, 5, -9})}, {make<i64>({1}, {4})}});
  check_tensor<i64>(b[0].as_tensor(), {4}, {-9, -2, 5, 7});
  check_tensor<i64>(b[1].as_tensor(), {4}, {3, 1, 2, 0});
  auto c = run_topk(topk_node(11), {{make<std::uint8_t>({3}, {200, 7, 255})}, {make<i64>({1}, {1})}});
  check_tensor<std::uint8_t>(c[0].as_tensor(), {1}, {255});
  auto d = run_topk(topk_node(11), {{make<double>({2, 2}, {0.5, -1.5, 2.5, 3.5})}, {make<i64>({1}, {1})}});
  check_tensor<double>(d[0].as_tensor(), {2, 1}, {0.5, 3.5});
  check_tensor<i64>(d[1].as_tensor(), {2, 1}, {0, 1});
  auto e = run_topk(topk_node(11), {{make<float>({2, 3}, {1, 2, 3, 4, 5, 6})}, {make<i64>({1}, {0})}});
  check_tensor<float>(e[0].as_tensor(), {2, 0}, {});
}

TEST_CASE("TopK and Resize (nearest) on float16") {
  const tensor x = make<float16>({4}, {float16(0.5f), float16(-2.0f), float16(3.25f), float16(1.0f)});
  auto out = run_topk(topk_node(11), {{x}, {make<i64>({1}, {2})}});
  CHECK(static_cast<float>(out[0].as_tensor().typed<float16>()[0]) == 3.25f);
  CHECK(static_cast<float>(out[0].as_tensor().typed<float16>()[1]) == 1.0f);
  check_tensor<i64>(out[1].as_tensor(), {2}, {2, 3});
  const tensor y = run1<ops::resize>(op("Resize", 13), {{x}, {}, {make<float>({1}, {0.5f})}});
  // half_pixel: x_original = (j + 0.5) * 2 - 0.5 = 0.5, 2.5 -> round_prefer_floor 0, 2.
  CHECK(dims_of(y) == ints{2});
  CHECK(static_cast<float>(y.typed<float16>()[0]) == 0.5f);
  CHECK(static_cast<float>(y.typed<float16>()[1]) == 3.25f);
}

TEST_CASE("TopK errors: K larger than the axis, negative K, bad axis, missing attribute k") {
  const tensor x = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  check_fails<ops::top_k>(topk_node(11), {{x}, {make<i64>({1}, {4})}}, "larger than dimension 1");
  check_fails<ops::top_k>(topk_node(11), {{x}, {make<i64>({1}, {-1})}}, "K must be non-negative");
  check_fails<ops::top_k>(topk_node(11).set("axis", i64{2}), {{x}, {make<i64>({1}, {1})}}, "axis 2 is out of range");
  check_fails<ops::top_k>(topk_node(11), {{x}, {make<i64>({2}, {1, 2})}}, "K must be a scalar");
  check_fails<ops::top_k>(topk_node(1), {{x}}, "attribute k");
}

TEST_CASE("TopK k=32 of 1024 (Mixed_ops) and 64 rows of 1000, on a pool of 2 threads, match a sorting reference") {
  thread_pool pool(2);
  lcg g(42);
  for (const auto& [rows, n, k] : {std::array<i64, 3>{1, 1024, 32}, std::array<i64, 3>{64, 1000, 10}}) {
    std::vector<float> xs(static_cast<std::size_t>(rows * n));
    for (auto& v : xs) v = static_cast<float>(g.next() % 500);  // many ties
    const tensor x = rows == 1 ? make<float>({n}, xs) : make<float>({rows, n}, xs);
    auto out = run_topk(topk_node(11), {{x}, {make<i64>({1}, {k})}}, &pool);
    std::vector<float> want_v;
    std::vector<i64> want_i;
    for (i64 r = 0; r < rows; ++r) {
      std::vector<i64> order(static_cast<std::size_t>(n));
      std::iota(order.begin(), order.end(), i64{0});
      const float* row = xs.data() + r * n;
      std::sort(order.begin(), order.end(), [&](i64 a, i64 b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
      for (i64 j = 0; j < k; ++j) {
        want_i.push_back(order[static_cast<std::size_t>(j)]);
        want_v.push_back(row[order[static_cast<std::size_t>(j)]]);
      }
    }
    const ints shape = rows == 1 ? ints{k} : ints{rows, k};
    check_tensor<float>(out[0].as_tensor(), shape, want_v);
    check_tensor<i64>(out[1].as_tensor(), shape, want_i);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// NonZero

TEST_CASE("NonZero of a 2-D float tensor lists coordinates in row-major order (backend test_nonzero_example)") {
  const tensor y = run1<ops::non_zero>(op("NonZero", 13), {{make<float>({2, 2}, {1, 0, 1, 1})}});
  check_tensor<i64>(y, {2, 3}, {0, 1, 1, 0, 0, 1});
}

TEST_CASE("NonZero of int32 3-D, of an empty tensor, and of scalars (shape [0, nnz])") {
  const tensor a = run1<ops::non_zero>(op("NonZero", 13), {{make<std::int32_t>({2, 1, 3}, {0, 5, 0, -1, 0, 2})}});
  check_tensor<i64>(a, {3, 3}, {0, 1, 1, 0, 0, 0, 1, 0, 2});
  const tensor b = run1<ops::non_zero>(op("NonZero", 13), {{make<float>({2, 0}, {})}});
  check_tensor<i64>(b, {2, 0}, {});
  const tensor c = run1<ops::non_zero>(op("NonZero", 9), {{tensor::scalar<float>(3.0f)}});
  check_tensor<i64>(c, {0, 1}, {});
  const tensor d = run1<ops::non_zero>(op("NonZero", 13), {{tensor::scalar<std::int64_t>(0)}});
  check_tensor<i64>(d, {0, 0}, {});
}

TEST_CASE("NonZero treats -0.0 as zero for float16") {
  const tensor x = make<float16>({3}, {float16(-0.0f), float16(1.5f), float16(0.0f)});
  check_tensor<i64>(run1<ops::non_zero>(op("NonZero", 13), {{x}}), {1, 1}, {1});
}

TEST_CASE("NonZero of bool [1024] (Mixed_ops) and of bool [300000] on a pool of 2 threads") {
  thread_pool pool(2);
  lcg g(7);
  for (const i64 n : {i64{1024}, i64{300000}}) {
    tensor x(element_type::boolean, {n});
    bool* px = x.typed<bool>();
    std::vector<i64> want;
    for (i64 i = 0; i < n; ++i) {
      px[i] = g.next() % 3 == 0;
      if (px[i]) want.push_back(i);
    }
    check_tensor<i64>(run1<ops::non_zero>(op("NonZero", 13), {{x}}, &pool), {1, static_cast<i64>(want.size())}, want);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// CumSum

TEST_CASE("CumSum 1-D: inclusive, exclusive, reverse, reverse exclusive (backend test_cumsum_1d_*)") {
  const tensor x = make<double>({5}, {1, 2, 3, 4, 5});
  const tensor axis = tensor::scalar<std::int32_t>(0);
  check_tensor<double>(run1<ops::cum_sum>(op("CumSum", 14), {{x}, {axis}}), {5}, {1, 3, 6, 10, 15});
  check_tensor<double>(run1<ops::cum_sum>(op("CumSum", 14).set("exclusive", i64{1}), {{x}, {axis}}), {5}, {0, 1, 3, 6, 10});
  check_tensor<double>(run1<ops::cum_sum>(op("CumSum", 14).set("reverse", i64{1}), {{x}, {axis}}), {5}, {15, 14, 12, 9, 5});
  check_tensor<double>(run1<ops::cum_sum>(op("CumSum", 11).set("reverse", i64{1}).set("exclusive", i64{1}), {{x}, {axis}}),
                       {5}, {14, 12, 9, 5, 0});
}

TEST_CASE("CumSum 2-D along axis 0, axis 1 and axis -1, with int64 and int32 axis inputs") {
  const tensor x = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  check_tensor<float>(run1<ops::cum_sum>(op("CumSum", 11), {{x}, {tensor::scalar<i64>(0)}}), {2, 3}, {1, 2, 3, 5, 7, 9});
  check_tensor<float>(run1<ops::cum_sum>(op("CumSum", 11), {{x}, {make<std::int32_t>({1}, {1})}}), {2, 3}, {1, 3, 6, 4, 9, 15});
  check_tensor<float>(run1<ops::cum_sum>(op("CumSum", 11), {{x}, {tensor::scalar<i64>(-1)}}), {2, 3}, {1, 3, 6, 4, 9, 15});
}

TEST_CASE("CumSum on int32, int64, uint32 and uint64 (exclusive reverse on a middle axis)") {
  kernel_node kn = op("CumSum", 14).set("exclusive", i64{1}).set("reverse", i64{1});
  const tensor axis = tensor::scalar<i64>(1);
  check_tensor<std::int32_t>(run1<ops::cum_sum>(kn, {{make<std::int32_t>({1, 3, 2}, {1, -2, 3, 4, 5, 6})}, {axis}}), {1, 3, 2},
                             {8, 10, 5, 6, 0, 0});
  check_tensor<i64>(run1<ops::cum_sum>(kn, {{make<i64>({1, 3, 2}, {1, -2, 3, 4, 5, 6})}, {axis}}), {1, 3, 2}, {8, 10, 5, 6, 0, 0});
  check_tensor<std::uint32_t>(run1<ops::cum_sum>(kn, {{make<std::uint32_t>({1, 3, 1}, {1, 2, 3})}, {axis}}), {1, 3, 1}, {5, 3, 0});
  check_tensor<std::uint64_t>(run1<ops::cum_sum>(op("CumSum", 14), {{make<std::uint64_t>({3}, {1, 2, 3})}, {tensor::scalar<i64>(0)}}),
                              {3}, {1, 3, 6});
}

TEST_CASE("CumSum errors: axis out of range, axis not a scalar, axis of a float type") {
  const tensor x = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  check_fails<ops::cum_sum>(op("CumSum", 14), {{x}, {tensor::scalar<i64>(2)}}, "axis 2 is out of range for rank 2");
  check_fails<ops::cum_sum>(op("CumSum", 14), {{x}, {make<i64>({2}, {0, 1})}}, "axis must be a scalar");
  auto r = run_kernel<ops::cum_sum>(op("CumSum", 14), {{x}, {tensor::scalar<float>(0.f)}});
  CHECK(r.code() == errc::not_implemented);  // supports() refuses a float axis
}

TEST_CASE("CumSum axis 1 of [1024, 16] (Mixed_ops) and axis 0 of [300, 200] on a pool of 2 threads") {
  thread_pool pool(2);
  lcg g(3);
  for (const auto& [rows, cols, axis] : {std::array<i64, 3>{1024, 16, 1}, std::array<i64, 3>{300, 200, 0}}) {
    std::vector<float> xs(static_cast<std::size_t>(rows * cols));
    for (auto& v : xs) v = static_cast<float>(g.next() % 7) - 3.0f;  // small integers: exact sums
    std::vector<float> want(xs.size());
    for (i64 r = 0; r < rows; ++r)
      for (i64 c = 0; c < cols; ++c) {
        const auto i = static_cast<std::size_t>(r * cols + c);
        const bool first = axis == 1 ? c == 0 : r == 0;
        want[i] = xs[i] + (first ? 0.0f : want[axis == 1 ? i - 1 : i - static_cast<std::size_t>(cols)]);
      }
    check_tensor<float>(run1<ops::cum_sum>(op("CumSum", 14), {{make<float>({rows, cols}, xs)}, {tensor::scalar<i64>(axis)}}, &pool),
                        {rows, cols}, want);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// ONNX backend test data (onnx 1.12, /usr/share/libonnx-testdata/data/node/test_resize_* and test_einsum_*), extracted
// with /usr/bin/python3 and onnx.numpy_helper; an omitted input is {}.

namespace {
struct backend_case {
  std::string name;
  kernel_node node;
  std::vector<kernel_input> inputs;
  tensor expected;
};

template <class K, class T>
void check_backend_case(const backend_case& c, double tol) {
  CAPTURE(c.name);
  const tensor y = run1<K>(c.node, c.inputs);
  check_tensor<T>(y, dims_of(c.expected), values_of<T>(c.expected), tol, tol);
}

std::vector<backend_case> resize_backend_cases() {
  std::vector<backend_case> cases;
  {
    backend_case c;
    c.name = "test_resize_downsample_scales_cubic";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 0.800000012f, 0.800000012f})});
    c.expected = tensor::from<float>({1,1,3,3}, {1.47119141f, 2.78125f, 4.08251953f, 6.71142578f, 8.02148438f, 9.32275391f, 11.9165039f, 13.2265625f, 14.527832f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_scales_cubic_A_n0p5_exclude_outside";
    c.node = op("Resize", 13);
    c.node.set("cubic_coeff_a", -0.5f);
    c.node.set("exclude_outside", std::int64_t{1});
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 0.800000012f, 0.800000012f})});
    c.expected = tensor::from<float>({1,1,3,3}, {1.36812675f, 2.6695013f, 4.01333666f, 6.57362509f, 7.875f, 9.21883488f, 11.948966f, 13.2503414f, 14.5941763f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_scales_cubic_align_corners";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("align_corners"));
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 0.800000012f, 0.800000012f})});
    c.expected = tensor::from<float>({1,1,3,3}, {1.0f, 2.39519167f, 3.7903831f, 6.5807662f, 7.97595787f, 9.37114906f, 12.1615324f, 13.5567236f, 14.9519157f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_scales_linear";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("linear"));
    c.inputs.push_back({tensor::from<float>({1,1,2,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 0.600000024f, 0.600000024f})});
    c.expected = tensor::from<float>({1,1,1,2}, {2.66666651f, 4.33333302f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_scales_linear_align_corners";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("align_corners"));
    c.node.set("mode", std::string("linear"));
    c.inputs.push_back({tensor::from<float>({1,1,2,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 0.600000024f, 0.600000024f})});
    c.expected = tensor::from<float>({1,1,1,2}, {1.0f, 3.14285707f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_scales_nearest";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("nearest"));
    c.inputs.push_back({tensor::from<float>({1,1,2,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 0.600000024f, 0.600000024f})});
    c.expected = tensor::from<float>({1,1,1,2}, {1.0f, 3.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_sizes_cubic";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 3, 3})});
    c.expected = tensor::from<float>({1,1,3,3}, {1.63078701f, 3.00462961f, 4.37847233f, 7.12615728f, 8.5f, 9.87384224f, 12.6215277f, 13.9953699f, 15.3692131f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_sizes_linear_pytorch_half_pixel";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("pytorch_half_pixel"));
    c.node.set("mode", std::string("linear"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 3, 1})});
    c.expected = tensor::from<float>({1,1,3,1}, {1.66666663f, 7.0f, 12.333333f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_sizes_nearest";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("nearest"));
    c.inputs.push_back({tensor::from<float>({1,1,2,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 1, 3})});
    c.expected = tensor::from<float>({1,1,1,3}, {1.0f, 2.0f, 4.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_downsample_sizes_nearest_tf_half_pixel_for_nn";
    c.node = op("Resize", 11);
    c.node.set("coordinate_transformation_mode", std::string("tf_half_pixel_for_nn"));
    c.node.set("mode", std::string("nearest"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({empty_tensor<float>()});
    c.inputs.push_back({empty_tensor<float>()});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 3, 2})});
    c.expected = tensor::from<float>({1,1,3,2}, {6.0f, 8.0f, 10.0f, 12.0f, 14.0f, 16.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_tf_crop_and_resize";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("tf_crop_and_resize"));
    c.node.set("extrapolation_value", 10.0f);
    c.node.set("mode", std::string("linear"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({tensor::from<float>({8}, {0.0f, 0.0f, 0.400000006f, 0.600000024f, 1.0f, 1.0f, 1.20000005f, 1.70000005f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 3, 3})});
    c.expected = tensor::from<float>({1,1,3,3}, {7.60000038f, 10.0f, 10.0f, 12.4000006f, 10.0f, 10.0f, 10.0f, 10.0f, 10.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_scales_cubic";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 2.0f, 2.0f})});
    c.expected = tensor::from<float>({1,1,8,8}, {0.47265625f, 0.76953125f, 1.24609375f, 1.875f, 2.28125f, 2.91015625f, 3.38671875f, 3.68359375f, 1.66015625f, 1.95703125f, 2.43359375f, 3.0625f,
           3.46875f, 4.09765625f, 4.57421875f, 4.87109375f, 3.56640625f, 3.86328125f, 4.33984375f, 4.96875f, 5.375f, 6.00390625f, 6.48046875f, 6.77734375f,
           6.08203125f, 6.37890625f, 6.85546875f, 7.484375f, 7.890625f, 8.51953125f, 8.99609375f, 9.29296875f, 7.70703125f, 8.00390625f, 8.48046875f, 9.109375f,
           9.515625f, 10.1445312f, 10.6210938f, 10.9179688f, 10.2226562f, 10.5195312f, 10.9960938f, 11.625f, 12.03125f, 12.6601562f, 13.1367188f, 13.4335938f,
           12.1289062f, 12.4257812f, 12.9023438f, 13.53125f, 13.9375f, 14.5664062f, 15.0429688f, 15.3398438f, 13.3164062f, 13.6132812f, 14.0898438f, 14.71875f,
           15.125f, 15.7539062f, 16.2304688f, 16.5273438f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_scales_cubic_A_n0p5_exclude_outside";
    c.node = op("Resize", 13);
    c.node.set("cubic_coeff_a", -0.5f);
    c.node.set("exclude_outside", std::int64_t{1});
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 2.0f, 2.0f})});
    c.expected = tensor::from<float>({1,1,8,8}, {0.558823526f, 0.814942062f, 1.35698247f, 1.89705884f, 2.39705873f, 2.93713522f, 3.47917557f, 3.7352941f, 1.58329761f, 1.83941603f, 2.38145661f, 2.92153287f,
           3.42153287f, 3.96160913f, 4.50364971f, 4.75976801f, 3.75145936f, 4.0075779f, 4.54961824f, 5.0896945f, 5.5896945f, 6.12977076f, 6.67181158f, 6.92792988f,
           5.91176462f, 6.1678834f, 6.70992374f, 7.25f, 7.75f, 8.29007626f, 8.83211708f, 9.0882349f, 7.91176462f, 8.16788292f, 8.70992374f, 9.25f,
           9.75f, 10.2900763f, 10.8321171f, 11.0882349f, 10.0720701f, 10.3281889f, 10.8702288f, 11.410305f, 11.910305f, 12.4503813f, 12.9924221f, 13.2485409f,
           12.2402315f, 12.4963503f, 13.0383911f, 13.5784674f, 14.0784674f, 14.6185436f, 15.1605835f, 15.4167023f, 13.2647057f, 13.5208244f, 14.0628653f, 14.6029415f,
           15.1029415f, 15.6430178f, 16.1850586f, 16.4411774f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_scales_cubic_align_corners";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("align_corners"));
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 2.0f, 2.0f})});
    c.expected = tensor::from<float>({1,1,8,8}, {1.0f, 1.34110785f, 1.80029154f, 2.32944608f, 2.67055392f, 3.19970846f, 3.65889215f, 4.0f, 2.36443138f, 2.70553946f, 3.16472292f, 3.69387746f,
           4.03498554f, 4.56413984f, 5.02332354f, 5.36443138f, 4.20116615f, 4.542274f, 5.00145769f, 5.53061247f, 5.87172031f, 6.40087461f, 6.86005831f, 7.20116615f,
           6.31778431f, 6.65889215f, 7.11807585f, 7.64723015f, 7.98833799f, 8.51749229f, 8.97667599f, 9.31778431f, 7.68221569f, 8.02332401f, 8.48250771f, 9.01166153f,
           9.35276985f, 9.88192463f, 10.3411083f, 10.6822157f, 9.79883385f, 10.1399412f, 10.5991249f, 11.1282797f, 11.469388f, 11.9985418f, 12.4577255f, 12.7988338f,
           11.6355686f, 11.976676f, 12.4358597f, 12.9650145f, 13.3061228f, 13.8352766f, 14.2944603f, 14.6355686f, 13.0f, 13.3411083f, 13.800292f, 14.3294458f,
           14.6705542f, 15.199708f, 15.6588917f, 16.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_scales_cubic_asymmetric";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("asymmetric"));
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 2.0f, 2.0f})});
    c.expected = tensor::from<float>({1,1,8,8}, {1.0f, 1.40625f, 2.0f, 2.5f, 3.0f, 3.59375f, 4.0f, 4.09375f, 2.625f, 3.03125f, 3.625f, 4.125f,
           4.625f, 5.21875f, 5.625f, 5.71875f, 5.0f, 5.40625f, 6.0f, 6.5f, 7.0f, 7.59375f, 8.0f, 8.09375f,
           7.0f, 7.40625f, 8.0f, 8.5f, 9.0f, 9.59375f, 10.0f, 10.09375f, 9.0f, 9.40625f, 10.0f, 10.5f,
           11.0f, 11.59375f, 12.0f, 12.09375f, 11.375f, 11.78125f, 12.375f, 12.875f, 13.375f, 13.96875f, 14.375f, 14.46875f,
           13.0f, 13.40625f, 14.0f, 14.5f, 15.0f, 15.59375f, 16.0f, 16.09375f, 13.375f, 13.78125f, 14.375f, 14.875f,
           15.375f, 15.96875f, 16.375f, 16.46875f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_scales_linear";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("linear"));
    c.inputs.push_back({tensor::from<float>({1,1,2,2}, {1.0f, 2.0f, 3.0f, 4.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 2.0f, 2.0f})});
    c.expected = tensor::from<float>({1,1,4,4}, {1.0f, 1.25f, 1.75f, 2.0f, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f, 3.5f,
           3.0f, 3.25f, 3.75f, 4.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_scales_linear_align_corners";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("align_corners"));
    c.node.set("mode", std::string("linear"));
    c.inputs.push_back({tensor::from<float>({1,1,2,2}, {1.0f, 2.0f, 3.0f, 4.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 2.0f, 2.0f})});
    c.expected = tensor::from<float>({1,1,4,4}, {1.0f, 1.33333337f, 1.66666663f, 2.0f, 1.66666663f, 2.0f, 2.33333325f, 2.66666675f, 2.33333325f, 2.66666675f, 3.0f, 3.33333325f,
           3.0f, 3.33333325f, 3.66666675f, 4.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_scales_nearest";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("nearest"));
    c.inputs.push_back({tensor::from<float>({1,1,2,2}, {1.0f, 2.0f, 3.0f, 4.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<float>({4}, {1.0f, 1.0f, 2.0f, 3.0f})});
    c.expected = tensor::from<float>({1,1,4,6}, {1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f,
           3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_sizes_cubic";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("cubic"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 9, 10})});
    c.expected = tensor::from<float>({1,1,9,10}, {0.455079228f, 0.640579224f, 0.971579194f, 1.42257917f, 1.9073292f, 2.22332931f, 2.7080791f, 3.15907931f, 3.49007916f, 3.67557931f, 1.39437962f, 1.57987964f,
           1.91087961f, 2.36187959f, 2.84662962f, 3.1626296f, 3.64737964f, 4.09837961f, 4.42937946f, 4.61487961f, 2.95130682f, 3.13680696f, 3.46780682f, 3.91880703f,
           4.40355682f, 4.71955681f, 5.20430708f, 5.65530682f, 5.98630714f, 6.17180681f, 5.20525074f, 5.39075089f, 5.72175074f, 6.17275047f, 6.65750074f, 6.97350073f,
           7.45825052f, 7.90925074f, 8.24025059f, 8.42575073f, 6.88975f, 7.07525015f, 7.40625f, 7.85725021f, 8.34200001f, 8.65799999f, 9.14274979f, 9.59375f,
           9.92475033f, 10.1102505f, 8.57424927f, 8.75974941f, 9.09074974f, 9.541749f, 10.0264997f, 10.3424997f, 10.8272495f, 11.2782497f, 11.6092491f, 11.7947493f,
           10.8281927f, 11.0136929f, 11.3446932f, 11.7956934f, 12.2804432f, 12.5964432f, 13.081193f, 13.5321932f, 13.8631935f, 14.0486927f, 12.3851204f, 12.5706205f,
           12.9016199f, 13.3526201f, 13.8373699f, 14.1533699f, 14.6381207f, 15.0891199f, 15.4201202f, 15.6056204f, 13.3244209f, 13.5099211f, 13.8409204f, 14.2919207f,
           14.7766705f, 15.0926704f, 15.5774212f, 16.0284214f, 16.3594208f, 16.54492f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_sizes_nearest";
    c.node = op("Resize", 13);
    c.node.set("mode", std::string("nearest"));
    c.inputs.push_back({tensor::from<float>({1,1,2,2}, {1.0f, 2.0f, 3.0f, 4.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 7, 8})});
    c.expected = tensor::from<float>({1,1,7,8}, {1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 1.0f,
           2.0f, 2.0f, 2.0f, 2.0f, 1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f,
           1.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 2.0f, 2.0f, 3.0f, 3.0f, 3.0f, 3.0f,
           4.0f, 4.0f, 4.0f, 4.0f, 3.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 4.0f,
           3.0f, 3.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 4.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_sizes_nearest_ceil_half_pixel";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("half_pixel"));
    c.node.set("mode", std::string("nearest"));
    c.node.set("nearest_mode", std::string("ceil"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 8, 8})});
    c.expected = tensor::from<float>({1,1,8,8}, {1.0f, 2.0f, 2.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 5.0f, 6.0f, 6.0f, 7.0f,
           7.0f, 8.0f, 8.0f, 8.0f, 5.0f, 6.0f, 6.0f, 7.0f, 7.0f, 8.0f, 8.0f, 8.0f,
           9.0f, 10.0f, 10.0f, 11.0f, 11.0f, 12.0f, 12.0f, 12.0f, 9.0f, 10.0f, 10.0f, 11.0f,
           11.0f, 12.0f, 12.0f, 12.0f, 13.0f, 14.0f, 14.0f, 15.0f, 15.0f, 16.0f, 16.0f, 16.0f,
           13.0f, 14.0f, 14.0f, 15.0f, 15.0f, 16.0f, 16.0f, 16.0f, 13.0f, 14.0f, 14.0f, 15.0f,
           15.0f, 16.0f, 16.0f, 16.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_sizes_nearest_floor_align_corners";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("align_corners"));
    c.node.set("mode", std::string("nearest"));
    c.node.set("nearest_mode", std::string("floor"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 8, 8})});
    c.expected = tensor::from<float>({1,1,8,8}, {1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 3.0f, 3.0f, 4.0f, 1.0f, 1.0f, 1.0f, 2.0f,
           2.0f, 3.0f, 3.0f, 4.0f, 1.0f, 1.0f, 1.0f, 2.0f, 2.0f, 3.0f, 3.0f, 4.0f,
           5.0f, 5.0f, 5.0f, 6.0f, 6.0f, 7.0f, 7.0f, 8.0f, 5.0f, 5.0f, 5.0f, 6.0f,
           6.0f, 7.0f, 7.0f, 8.0f, 9.0f, 9.0f, 9.0f, 10.0f, 10.0f, 11.0f, 11.0f, 12.0f,
           9.0f, 9.0f, 9.0f, 10.0f, 10.0f, 11.0f, 11.0f, 12.0f, 13.0f, 13.0f, 13.0f, 14.0f,
           14.0f, 15.0f, 15.0f, 16.0f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_resize_upsample_sizes_nearest_round_prefer_ceil_asymmetric";
    c.node = op("Resize", 13);
    c.node.set("coordinate_transformation_mode", std::string("asymmetric"));
    c.node.set("mode", std::string("nearest"));
    c.node.set("nearest_mode", std::string("round_prefer_ceil"));
    c.inputs.push_back({tensor::from<float>({1,1,4,4}, {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f, 11.0f, 12.0f,
           13.0f, 14.0f, 15.0f, 16.0f})});
    c.inputs.push_back({});
    c.inputs.push_back({});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {1, 1, 8, 8})});
    c.expected = tensor::from<float>({1,1,8,8}, {1.0f, 2.0f, 2.0f, 3.0f, 3.0f, 4.0f, 4.0f, 4.0f, 5.0f, 6.0f, 6.0f, 7.0f,
           7.0f, 8.0f, 8.0f, 8.0f, 5.0f, 6.0f, 6.0f, 7.0f, 7.0f, 8.0f, 8.0f, 8.0f,
           9.0f, 10.0f, 10.0f, 11.0f, 11.0f, 12.0f, 12.0f, 12.0f, 9.0f, 10.0f, 10.0f, 11.0f,
           11.0f, 12.0f, 12.0f, 12.0f, 13.0f, 14.0f, 14.0f, 15.0f, 15.0f, 16.0f, 16.0f, 16.0f,
           13.0f, 14.0f, 14.0f, 15.0f, 15.0f, 16.0f, 16.0f, 16.0f, 13.0f, 14.0f, 14.0f, 15.0f,
           15.0f, 16.0f, 16.0f, 16.0f});
    cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<backend_case> einsum_backend_cases() {
  std::vector<backend_case> cases;
  {
    backend_case c;
    c.name = "test_einsum_batch_diagonal";
    c.node = op("Einsum", 12);
    c.node.set("equation", std::string("...ii ->...i"));
    c.inputs.push_back({tensor::from<double>({3,5,5}, {1.764052345967664, 0.40015720836722329, 0.9787379841057392, 2.2408931992014578, 1.8675579901499675, -0.97727787987641102, 0.95008841752558937, -0.15135720829769789, -0.10321885179355784, 0.41059850193837233, 0.14404357116087799, 1.4542735069629751,
           0.76103772514699342, 0.12167501649282841, 0.44386323274542566, 0.33367432737426683, 1.4940790731576061, -0.20515826376580087, 0.31306770165090136, -0.85409573930172478, -2.5529898158340787, 0.65361859544036061, 0.86443619885950573, -0.74216502040644194,
           2.2697546239876076, -1.4543656745987648, 0.045758517301446068, -0.1871838500258336, 1.5327792143584575, 1.469358769900285, 0.1549474256969163, 0.37816251960217356, -0.88778574763011275, -1.980796468223927, -0.34791214932615261, 0.15634896910398005,
           1.2302906807277207, 1.2023798487844113, -0.38732681740795227, -0.30230275057533557, -1.0485529650670926, -1.4200179371789752, -1.7062701906250126, 1.9507753952317897, -0.5096521817516535, -0.43807430161118638, -1.2527953600499262, 0.77749035583191006,
           -1.6138978475579515, -0.21274028021396871, -0.89546656119367563, 0.38690249785926201, -0.51080513756887302, -1.1806321841224121, -0.028182228338654868, 0.42833187053041766, 0.066517222383167887, 0.30247189773978139, -0.63432209368096359, -0.36274116598713813,
           -0.67246044777595104, -0.35955316154054129, -0.81314628204445405, -1.7262826023316769, 0.17742614225375283, -0.40178093620826189, -1.6301983469660446, 0.46278225552577418, -0.90729836438324218, 0.051945395796138952, 0.72909056217753687, 0.12898291075741067,
           1.1394006845433007, -1.2348258203536526, 0.402341641177549})});
    c.expected = tensor::from<double>({3,5}, {1.764052345967664, 0.95008841752558937, 0.76103772514699342, 0.31306770165090136, 2.2697546239876076, -1.4543656745987648, 0.37816251960217356, 1.2023798487844113, 1.9507753952317897, -0.21274028021396871, -0.89546656119367563, 0.066517222383167887,
           -0.81314628204445405, -0.90729836438324218, 0.402341641177549});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_einsum_batch_matmul";
    c.node = op("Einsum", 12);
    c.node.set("equation", std::string("bij, bjk -> bik"));
    c.inputs.push_back({tensor::from<double>({5,2,3}, {1.764052345967664, 0.40015720836722329, 0.9787379841057392, 2.2408931992014578, 1.8675579901499675, -0.97727787987641102, 0.95008841752558937, -0.15135720829769789, -0.10321885179355784, 0.41059850193837233, 0.14404357116087799, 1.4542735069629751,
           0.76103772514699342, 0.12167501649282841, 0.44386323274542566, 0.33367432737426683, 1.4940790731576061, -0.20515826376580087, 0.31306770165090136, -0.85409573930172478, -2.5529898158340787, 0.65361859544036061, 0.86443619885950573, -0.74216502040644194,
           2.2697546239876076, -1.4543656745987648, 0.045758517301446068, -0.1871838500258336, 1.5327792143584575, 1.469358769900285})});
    c.inputs.push_back({tensor::from<double>({5,3,4}, {0.1549474256969163, 0.37816251960217356, -0.88778574763011275, -1.980796468223927, -0.34791214932615261, 0.15634896910398005, 1.2302906807277207, 1.2023798487844113, -0.38732681740795227, -0.30230275057533557, -1.0485529650670926, -1.4200179371789752,
           -1.7062701906250126, 1.9507753952317897, -0.5096521817516535, -0.43807430161118638, -1.2527953600499262, 0.77749035583191006, -1.6138978475579515, -0.21274028021396871, -0.89546656119367563, 0.38690249785926201, -0.51080513756887302, -1.1806321841224121,
           -0.028182228338654868, 0.42833187053041766, 0.066517222383167887, 0.30247189773978139, -0.63432209368096359, -0.36274116598713813, -0.67246044777595104, -0.35955316154054129, -0.81314628204445405, -1.7262826023316769, 0.17742614225375283, -0.40178093620826189,
           -1.6301983469660446, 0.46278225552577418, -0.90729836438324218, 0.051945395796138952, 0.72909056217753687, 0.12898291075741067, 1.1394006845433007, -1.2348258203536526, 0.402341641177549, -0.6848100909403132, -0.87079714918188178, -0.57884966476441546,
           -0.31155253212737266, 0.056165342229745438, -1.1651498407833565, 0.9008264869541871, 0.46566243973045984, -1.5362436862772237, 1.4882521937955997, 1.8958891760305832, 1.1787795711596507, -0.17992483581235091, -1.0707526215105425, 1.0544517269311366})});
    c.expected = tensor::from<double>({5,2,4}, {-0.2449756530890492, 0.43378746218127495, -2.1000494618012033, -4.402913186196848, 0.076000449069409337, 1.4348463760343186, 1.3329337654266886, -0.80548712181988424, -1.3390589067506009, 1.6957947068814332, -0.18721484237474798, -0.26214604663510777,
           -2.1833023980833026, 1.4756399947121031, -1.1845844105749435, -1.9274786285080947, -0.45955462759799476, -0.48439320150081144, 0.047553420605969635, 0.0081081029154005113, -0.7903073724831986, -0.044879494818498677, -1.0189144324021775, -0.35384506803075438,
           -2.1602497048529434, 1.7830316105326642, 0.9659331698437077, 2.5487191966595786, -0.73387957197495068, 0.92222268006170438, 1.0381872981434612, -0.60387368849807177, -1.3304520633035486, 2.3535085366619999, -4.8580631969160351, -0.66441090869711905,
           2.5041254116379257, -2.6296097709354722, 0.92593950661784952, 4.286727244116296});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_einsum_inner_prod";
    c.node = op("Einsum", 12);
    c.node.set("equation", std::string("i,i"));
    c.inputs.push_back({tensor::from<double>({5}, {1.764052345967664, 0.40015720836722329, 0.9787379841057392, 2.2408931992014578, 1.8675579901499675})});
    c.inputs.push_back({tensor::from<double>({5}, {-0.97727787987641102, 0.95008841752558937, -0.15135720829769789, -0.10321885179355784, 0.41059850193837233})});
    c.expected = tensor::from<double>({}, {-0.95640956670332899});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_einsum_sum";
    c.node = op("Einsum", 12);
    c.node.set("equation", std::string("ij->i"));
    c.inputs.push_back({tensor::from<double>({3,4}, {1.764052345967664, 0.40015720836722329, 0.9787379841057392, 2.2408931992014578, 1.8675579901499675, -0.97727787987641102, 0.95008841752558937, -0.15135720829769789, -0.10321885179355784, 0.41059850193837233, 0.14404357116087799, 1.4542735069629751})});
    c.expected = tensor::from<double>({3}, {5.3838407376420836, 1.6890113195014478, 1.9056967282686674});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_einsum_transpose";
    c.node = op("Einsum", 12);
    c.node.set("equation", std::string("ij->ji"));
    c.inputs.push_back({tensor::from<double>({3,4}, {1.764052345967664, 0.40015720836722329, 0.9787379841057392, 2.2408931992014578, 1.8675579901499675, -0.97727787987641102, 0.95008841752558937, -0.15135720829769789, -0.10321885179355784, 0.41059850193837233, 0.14404357116087799, 1.4542735069629751})});
    c.expected = tensor::from<double>({4,3}, {1.764052345967664, 1.8675579901499675, -0.10321885179355784, 0.40015720836722329, -0.97727787987641102, 0.41059850193837233, 0.9787379841057392, 0.95008841752558937, 0.14404357116087799, 2.2408931992014578, -0.15135720829769789, 1.4542735069629751});
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Resize

TEST_CASE("Resize matches every ONNX backend test case (nearest, linear, cubic, all coordinate and nearest modes)") {
  const auto cases = resize_backend_cases();
  CHECK(cases.size() == 23);
  for (const auto& c : cases) check_backend_case<ops::resize, float>(c, 1e-5);
}

TEST_CASE("Resize opset 13 nearest, asymmetric, floor, scales [1,1,2,2] on [1,16,32,32] (Mixed_ops) on a pool of 2 threads") {
  thread_pool pool(2);
  std::vector<float> xs(16 * 32 * 32);
  std::iota(xs.begin(), xs.end(), 0.0f);
  kernel_node kn = op("Resize", 13)
                       .set("mode", std::string("nearest"))
                       .set("coordinate_transformation_mode", std::string("asymmetric"))
                       .set("nearest_mode", std::string("floor"));
  const tensor y = run1<ops::resize>(kn, {{make<float>({1, 16, 32, 32}, xs)}, {}, {make<float>({4}, {1, 1, 2, 2})}}, &pool);
  std::vector<float> want(16 * 64 * 64);
  for (std::size_t c = 0; c < 16; ++c)
    for (std::size_t i = 0; i < 64; ++i)
      for (std::size_t j = 0; j < 64; ++j) want[(c * 64 + i) * 64 + j] = xs[(c * 32 + i / 2) * 32 + j / 2];
  check_tensor<float>(y, {1, 16, 64, 64}, want);
}

TEST_CASE("Resize opset 10: nearest takes the floor upsampling and the ceiling downsampling, linear is asymmetric") {
  const tensor x = make<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  const tensor up = run1<ops::resize>(op("Resize", 10).set("mode", std::string("nearest")), {{x}, {make<float>({4}, {1, 1, 2, 3})}});
  check_tensor<float>(up, {1, 1, 4, 6}, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
  const tensor x2 = make<float>({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  const tensor down = run1<ops::resize>(op("Resize", 10), {{x2}, {make<float>({4}, {1, 1, 0.6f, 0.6f})}});
  check_tensor<float>(down, {1, 1, 1, 2}, {1, 3});
  const tensor lin = run1<ops::resize>(op("Resize", 10).set("mode", std::string("linear")), {{x2}, {make<float>({4}, {1, 1, 0.6f, 0.6f})}});
  check_tensor<float>(lin, {1, 1, 1, 2}, {1, 2.6666665f});
  const tensor lin_up = run1<ops::resize>(op("Resize", 10).set("mode", std::string("linear")), {{x}, {make<float>({4}, {1, 1, 2, 2})}});
  check_tensor<float>(lin_up, {1, 1, 4, 4}, {1, 1.5f, 2, 2, 2, 2.5f, 3, 3, 3, 3.5f, 4, 4, 3, 3.5f, 4, 4});
}

TEST_CASE("Resize opset 11 takes roi and an empty scales tensor with sizes") {
  const tensor x = make<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  kernel_node kn = op("Resize", 11).set("mode", std::string("nearest"));
  const tensor y = run1<ops::resize>(kn, {{x}, {empty_tensor<float>()}, {empty_tensor<float>()}, {make<i64>({4}, {1, 1, 3, 3})}});
  // half_pixel, round_prefer_floor: x_original = (j + 0.5) * 2/3 - 0.5 = -1/6, 0.5, 7/6 -> 0, 0, 1.
  check_tensor<float>(y, {1, 1, 3, 3}, {1, 1, 2, 1, 1, 2, 3, 3, 4});
}

TEST_CASE("Resize linear is N-linear over any number of resized axes") {
  // A function linear in each coordinate is reproduced exactly: f = i + 10 j + 100 k from [2,2,2] to [3,3,3].
  std::vector<float> xs;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 2; ++k) xs.push_back(static_cast<float>(i + 10 * j + 100 * k));
  kernel_node kn = op("Resize", 13).set("mode", std::string("linear")).set("coordinate_transformation_mode", std::string("align_corners"));
  const tensor y = run1<ops::resize>(kn, {{make<float>({2, 2, 2}, xs)}, {}, {}, {make<i64>({3}, {3, 3, 3})}});
  check_tensor<float>(y, {3, 3, 3}, {0, 50, 100, 5, 55, 105, 10, 60, 110, 0.5f, 50.5f, 100.5f, 5.5f, 55.5f, 105.5f, 10.5f,
                                     60.5f, 110.5f, 1, 51, 101, 6, 56, 106, 11, 61, 111});
  // Three axes resized differently (half_pixel): values from the ONNX reference implementation (interpolate_nd).
  std::vector<float> ys;
  for (int v = 0; v < 24; ++v) ys.push_back(static_cast<float>(std::pow(v, 1.5)));
  const tensor z = run1<ops::resize>(op("Resize", 13).set("mode", std::string("linear")),
                                     {{make<float>({2, 3, 4}, ys)}, {}, {}, {make<i64>({3}, {3, 2, 5})}});
  check_tensor<float>(z, {3, 2, 5},
                      {2.f, 3.0815594f, 4.67032f, 6.615042f, 8.527179f, 18.970562f, 21.82273f, 25.2182f, 28.771587f,
                       31.992218f, 24.588459f, 27.05438f, 30.099312f, 33.381645f, 36.401505f, 51.026302f, 54.768238f,
                       59.154728f, 63.670033f, 67.71254f, 47.176918f, 51.027203f, 55.528305f, 60.148247f, 64.27583f,
                       83.08204f, 87.71375f, 93.091255f, 98.56848f, 103.43286f},
                      1e-4, 1e-5);
}

TEST_CASE("Resize 1-D: linear half_pixel by 1.5 and cubic asymmetric by 2, in double") {
  const tensor x = make<double>({4}, {1, 2, 4, 8});
  const tensor lin = run1<ops::resize>(op("Resize", 13).set("mode", std::string("linear")), {{x}, {}, {make<float>({1}, {1.5f})}});
  check_tensor<double>(lin, {6}, {1, 1.5, 2.3333333333333, 3.6666666666667, 6, 8}, 1e-9, 1e-9);
  kernel_node kn = op("Resize", 13).set("mode", std::string("cubic")).set("coordinate_transformation_mode", std::string("asymmetric"));
  const tensor cub = run1<ops::resize>(kn, {{x}, {}, {make<float>({1}, {2.0f})}});
  check_tensor<double>(cub, {8}, {1, 1.3125, 2, 2.71875, 4, 6.1875, 8, 8.375}, 1e-9, 1e-9);
}

TEST_CASE("Resize nearest with tf_crop_and_resize writes the extrapolation value outside the input") {
  std::vector<float> xs(16);
  std::iota(xs.begin(), xs.end(), 0.0f);
  kernel_node kn = op("Resize", 13)
                       .set("mode", std::string("nearest"))
                       .set("coordinate_transformation_mode", std::string("tf_crop_and_resize"))
                       .set("extrapolation_value", -1.0f);
  const tensor y = run1<ops::resize>(kn, {{make<float>({4, 4}, xs)}, {make<float>({4}, {0.5f, -0.5f, 1.5f, 0.5f})}, {}, {make<i64>({2}, {3, 3})}});
  check_tensor<float>(y, {3, 3}, {-1, 4, 5, -1, 12, 13, -1, -1, -1});
}

TEST_CASE("Resize nearest on uint8 and int8, and an identity resize") {
  const tensor u = make<std::uint8_t>({1, 3}, {10, 200, 255});
  const tensor yu = run1<ops::resize>(op("Resize", 13).set("nearest_mode", std::string("floor")).set("coordinate_transformation_mode", std::string("asymmetric")),
                                      {{u}, {}, {make<float>({2}, {1, 2})}});
  check_tensor<std::uint8_t>(yu, {1, 6}, {10, 10, 200, 200, 255, 255});
  const tensor s = make<std::int8_t>({4}, {-128, -1, 5, 127});
  const tensor ys = run1<ops::resize>(op("Resize", 13), {{s}, {}, {}, {make<i64>({1}, {2})}});
  // half_pixel: x_original = (j + 0.5) * 2 - 0.5 = 0.5, 2.5 -> round_prefer_floor 0, 2.
  check_tensor<std::int8_t>(ys, {2}, {-128, 5});
  const tensor f = make<float>({2, 2}, {1, 2, 3, 4});
  check_tensor<float>(run1<ops::resize>(op("Resize", 13).set("mode", std::string("cubic")), {{f}, {}, {make<float>({2}, {1, 1})}}),
                      {2, 2}, {1, 2, 3, 4});
}

TEST_CASE("Resize errors: scales and sizes both or neither, wrong counts, non-positive scales, unknown modes") {
  const tensor x = make<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  const kernel_node kn = op("Resize", 13);
  check_fails<ops::resize>(kn, {{x}, {}, {make<float>({4}, {1, 1, 2, 2})}, {make<i64>({4}, {1, 1, 4, 4})}}, "scales and sizes are both given");
  check_fails<ops::resize>(kn, {{x}}, "neither scales nor sizes");
  check_fails<ops::resize>(kn, {{x}, {}, {make<float>({2}, {2, 2})}}, "scales has 2 elements but X has rank 4");
  check_fails<ops::resize>(kn, {{x}, {}, {}, {make<i64>({3}, {1, 2, 2})}}, "sizes has 3 elements");
  check_fails<ops::resize>(kn, {{x}, {}, {make<float>({4}, {1, 1, 0, 2})}}, "scales[2] must be positive");
  check_fails<ops::resize>(kn, {{x}, {}, {}, {make<i64>({4}, {1, 1, -2, 2})}}, "sizes[2] is negative");
  check_fails<ops::resize>(op("Resize", 13).set("coordinate_transformation_mode", std::string("tf_crop_and_resize")),
                           {{x}, {make<float>({2}, {0, 1})}, {}, {make<i64>({4}, {1, 1, 2, 2})}}, "roi has 2 elements");
  check_fails<ops::resize>(op("Resize", 13).set("mode", std::string("bicubic")), {{x}, {}, {make<float>({4}, {1, 1, 2, 2})}},
                           "unknown mode 'bicubic'");
  check_fails<ops::resize>(op("Resize", 13).set("coordinate_transformation_mode", std::string("corners")),
                           {{x}, {}, {make<float>({4}, {1, 1, 2, 2})}}, "unknown coordinate_transformation_mode 'corners'");
  check_fails<ops::resize>(op("Resize", 13).set("nearest_mode", std::string("round")), {{x}, {}, {make<float>({4}, {1, 1, 2, 2})}},
                           "unknown nearest_mode 'round'");
  check_fails<ops::resize>(op("Resize", 10).set("mode", std::string("cubic")), {{x}, {make<float>({4}, {1, 1, 2, 2})}},
                           "unknown mode 'cubic'");
  // Linear on an integer type is not supported (nearest only).
  auto r = run_kernel<ops::resize>(op("Resize", 13).set("mode", std::string("linear")),
                                   {{make<std::uint8_t>({2}, {1, 2})}, {}, {make<float>({1}, {2})}});
  CHECK(r.code() == errc::not_implemented);
}

// ---------------------------------------------------------------------------------------------------------------
// Einsum

namespace {
// Generated with numpy.einsum from integer-valued inputs (so float results are exact).
struct einsum_case { std::string eq; std::vector<tensor> in; tensor out; };
std::vector<einsum_case> einsum_numpy_cases() {
  std::vector<einsum_case> cs;
  cs.push_back({"ij,jk->ik", {tensor::from<float>({2,3}, {3.f, 1.f, 1.f, 3.f, 1.f, 2.f}),
                 tensor::from<float>({3,4}, {2.f, -2.f, -3.f, -1.f, -2.f, 3.f, 3.f, -3.f, 0.f, 2.f, -3.f, 2.f})}, tensor::from<float>({2,4}, {4.f, -1.f, -9.f, -4.f, 4.f, 1.f, -12.f, -2.f})});
  cs.push_back({"ij,jk->ki", {tensor::from<float>({2,3}, {-3.f, 0.f, 2.f, -1.f, -1.f, -2.f}),
                 tensor::from<float>({3,4}, {2.f, -2.f, 3.f, 0.f, 0.f, 0.f, 1.f, 0.f, 0.f, 3.f, 2.f, 2.f})}, tensor::from<float>({4,2}, {-6.f, -2.f, 12.f, -4.f, -5.f, -8.f, 4.f, -4.f})});
  cs.push_back({"ij,kj->ik", {tensor::from<float>({2,3}, {1.f, 1.f, -1.f, 3.f, 0.f, -2.f}),
                 tensor::from<float>({4,3}, {2.f, -2.f, 3.f, 1.f, -3.f, -3.f, 0.f, -3.f, -3.f, 0.f, 3.f, 0.f})}, tensor::from<float>({2,4}, {-3.f, 1.f, 0.f, 3.f, 0.f, 9.f, 6.f, 0.f})});
  cs.push_back({"ji,jk->ik", {tensor::from<float>({3,2}, {2.f, 3.f, 2.f, 1.f, 0.f, 0.f}),
                 tensor::from<float>({3,4}, {-2.f, 0.f, -1.f, -2.f, 3.f, -3.f, -3.f, -2.f, 3.f, 1.f, 3.f, -2.f})}, tensor::from<float>({2,4}, {2.f, -6.f, -8.f, -8.f, -3.f, -3.f, -6.f, -8.f})});
  cs.push_back({"ji,kj->ik", {tensor::from<float>({3,2}, {2.f, -1.f, 0.f, -3.f, 1.f, 2.f}),
                 tensor::from<float>({4,3}, {1.f, -2.f, 0.f, -2.f, 3.f, 3.f, -2.f, 0.f, 3.f, 2.f, 1.f, 1.f})}, tensor::from<float>({2,4}, {2.f, -1.f, -1.f, 5.f, 5.f, -1.f, 8.f, -3.f})});
  cs.push_back({"bij,bjk->bik", {tensor::from<float>({2,2,3}, {-3.f, 2.f, 0.f, -3.f, -2.f, 0.f, 2.f, 0.f, 1.f, 3.f, 1.f, -1.f}),
                 tensor::from<float>({2,3,4}, {1.f, 1.f, -3.f, -3.f, 1.f, -1.f, 1.f, -1.f, -2.f, -2.f, -1.f, 2.f, -1.f, -1.f, 1.f, 3.f, -1.f, 1.f, 0.f, 1.f, 0.f, 1.f, 0.f, 1.f})}, tensor::from<float>({2,2,4}, {-1.f, -5.f, 11.f, 7.f, -5.f, -1.f, 7.f, 11.f, -2.f, -1.f, 2.f, 7.f, -4.f, -3.f, 3.f, 9.f})});
  cs.push_back({"bij,bkj->bki", {tensor::from<float>({2,2,3}, {3.f, -2.f, 0.f, 0.f, -1.f, -2.f, -3.f, -1.f, 2.f, -3.f, -1.f, 3.f}),
                 tensor::from<float>({2,4,3}, {3.f, -2.f, -3.f, 1.f, -3.f, -1.f, 0.f, 3.f, -3.f, 1.f, 0.f, -3.f, 2.f, 2.f, 0.f, 3.f, 1.f, 3.f, 3.f, 0.f, -2.f, -2.f, 0.f, -2.f})}, tensor::from<float>({2,4,2}, {13.f, 8.f, 9.f, 5.f, -6.f, 3.f, 3.f, 6.f, -8.f, -8.f, -4.f, -1.f, -13.f, -15.f, 2.f, 0.f})});
  cs.push_back({"ibj,jbk->bik", {tensor::from<float>({2,3,3}, {2.f, 3.f, -2.f, 0.f, -3.f, -2.f, -1.f, 3.f, 3.f, 1.f, 1.f, 0.f, -3.f, -1.f, 3.f, -1.f, -2.f, -2.f}),
                 tensor::from<float>({3,3,2}, {1.f, -3.f, 3.f, 3.f, 0.f, 0.f, 2.f, 0.f, 0.f, -1.f, 0.f, 2.f, -3.f, -3.f, 2.f, -1.f, 2.f, -3.f})}, tensor::from<float>({3,2,2}, {14.f, 0.f, 3.f, -3.f, -4.f, 5.f, -3.f, -11.f, 6.f, -3.f, -4.f, 2.f})});
  cs.push_back({"abc,cbd->ad", {tensor::from<float>({2,3,2}, {3.f, -3.f, -1.f, 3.f, -3.f, 1.f, 2.f, -1.f, -3.f, 0.f, 0.f, 3.f}),
                 tensor::from<float>({2,3,3}, {1.f, -1.f, -3.f, 1.f, -2.f, 1.f, 3.f, -1.f, 3.f, 0.f, 0.f, 2.f, 2.f, 3.f, 3.f, -2.f, -1.f, 3.f})}, tensor::from<float>({2,3}, {-3.f, 10.f, -13.f, -7.f, 1.f, -2.f})});
  cs.push_back({"bxy,byz,bz->bxz", {tensor::from<float>({2,2,3}, {-1.f, -3.f, 1.f, 2.f, 2.f, 2.f, 1.f, -3.f, 2.f, -1.f, 2.f, 2.f}),
                 tensor::from<float>({2,3,2}, {3.f, -3.f, 3.f, 1.f, 0.f, 2.f, 3.f, 0.f, -3.f, 2.f, -2.f, -2.f}),
                 tensor::from<float>({2,2}, {-2.f, -2.f, 3.f, -1.f})}, tensor::from<float>({2,2,2}, {24.f, -4.f, -24.f, 0.f, 24.f, 10.f, -39.f, 0.f})});
  cs.push_back({"i,j->ij", {tensor::from<float>({3}, {-3.f, -2.f, -1.f}),
                 tensor::from<float>({4}, {-1.f, -1.f, 3.f, 3.f})}, tensor::from<float>({3,4}, {3.f, 3.f, -9.f, -9.f, 2.f, 2.f, -6.f, -6.f, 1.f, 1.f, -3.f, -3.f})});
  cs.push_back({"i,i->", {tensor::from<float>({5}, {1.f, 3.f, -1.f, -3.f, -2.f}),
                 tensor::from<float>({5}, {-3.f, 3.f, -2.f, 0.f, -2.f})}, tensor::from<float>({}, {12.f})});
  cs.push_back({"ij,ij->ij", {tensor::from<float>({2,3}, {3.f, -2.f, 0.f, 3.f, 0.f, 3.f}),
                 tensor::from<float>({2,3}, {3.f, 2.f, 2.f, 1.f, 1.f, 2.f})}, tensor::from<float>({2,3}, {9.f, -4.f, 0.f, 3.f, 0.f, 6.f})});
  cs.push_back({"ij,ij->ji", {tensor::from<float>({2,3}, {-1.f, 3.f, 3.f, -1.f, -1.f, 2.f}),
                 tensor::from<float>({2,3}, {3.f, -3.f, -3.f, -2.f, 0.f, -2.f})}, tensor::from<float>({3,2}, {-3.f, 2.f, -9.f, 0.f, -9.f, -4.f})});
  cs.push_back({"ij->", {tensor::from<float>({3,4}, {0.f, 0.f, 3.f, 2.f, -2.f, 2.f, 2.f, 1.f, 1.f, -1.f, 2.f, -3.f})}, tensor::from<float>({}, {7.f})});
  cs.push_back({"ii->i", {tensor::from<float>({3,3}, {1.f, 3.f, 3.f, -1.f, -1.f, 1.f, -1.f, 2.f, -2.f})}, tensor::from<float>({3}, {1.f, -1.f, -2.f})});
  cs.push_back({"ii", {tensor::from<float>({3,3}, {-2.f, -3.f, 0.f, -2.f, -1.f, 3.f, 2.f, 2.f, 1.f})}, tensor::from<float>({}, {-2.f})});
  cs.push_back({"ji", {tensor::from<float>({2,3}, {-3.f, 2.f, 1.f, 3.f, 0.f, -2.f})}, tensor::from<float>({3,2}, {-3.f, 3.f, 2.f, 0.f, 1.f, -2.f})});
  cs.push_back({"ab,bc,cd->ad", {tensor::from<float>({2,3}, {1.f, 0.f, 1.f, -1.f, -1.f, -3.f}),
                 tensor::from<float>({3,2}, {3.f, 2.f, 0.f, -2.f, 1.f, -1.f}),
                 tensor::from<float>({2,4}, {1.f, -3.f, -2.f, 2.f, -3.f, 1.f, -1.f, -3.f})}, tensor::from<float>({2,4}, {1.f, -11.f, -9.f, 5.f, -15.f, 21.f, 9.f, -21.f})});
  cs.push_back({"...ij,...jk->...ik", {tensor::from<float>({2,1,2,3}, {2.f, 1.f, 2.f, 3.f, 2.f, 2.f, -3.f, 3.f, 3.f, 1.f, 2.f, 2.f}),
                 tensor::from<float>({3,3,2}, {3.f, 3.f, 0.f, 2.f, 3.f, -1.f, -3.f, -2.f, -3.f, 0.f, -3.f, -2.f, -2.f, 1.f, -2.f, 3.f, -2.f, 3.f})}, tensor::from<float>({2,3,2,2}, {12.f, 6.f, 15.f, 11.f, -15.f, -8.f, -21.f, -10.f, -10.f, 11.f, -14.f, 15.f, 0.f, -6.f, 9.f, 5.f, -9.f, 0.f, -15.f, -6.f, -6.f, 15.f, -10.f, 13.f})});
  cs.push_back({"ij,j->i", {tensor::from<float>({2,3}, {0.f, -2.f, -3.f, -1.f, 1.f, -3.f}),
                 tensor::from<float>({1}, {-2.f})}, tensor::from<float>({2}, {10.f, 6.f})});
  cs.push_back({"iij->j", {tensor::from<float>({2,2,3}, {-3.f, 1.f, -3.f, -3.f, 0.f, -1.f, 0.f, 3.f, 3.f, 0.f, 1.f, 2.f})}, tensor::from<float>({3}, {-3.f, 2.f, -1.f})});
  cs.push_back({"i...,i->...", {tensor::from<float>({3,2,2}, {0.f, 1.f, -2.f, 1.f, -2.f, -2.f, 2.f, 1.f, -1.f, -3.f, -2.f, 2.f}),
                 tensor::from<float>({3}, {0.f, 3.f, 3.f})}, tensor::from<float>({2,2}, {-9.f, -15.f, 0.f, 9.f})});
  cs.push_back({"Ab,aB", {tensor::from<float>({2,3}, {2.f, -3.f, -3.f, 1.f, -1.f, 2.f}),
                 tensor::from<float>({4,2}, {-1.f, -2.f, -3.f, -1.f, 1.f, -3.f, 2.f, -1.f})}, tensor::from<float>({2,2,4,3}, {-2.f, 3.f, 3.f, -6.f, 9.f, 9.f, 2.f, -3.f, -3.f, 4.f, -6.f, -6.f, -4.f, 6.f, 6.f, -2.f, 3.f, 3.f, -6.f, 9.f, 9.f, -2.f, 3.f, 3.f, -1.f, 1.f, -2.f, -3.f, 3.f, -6.f, 1.f, -1.f, 2.f, 2.f, -2.f, 4.f, -2.f, 2.f, -4.f, -1.f, 1.f, -2.f, -3.f, 3.f, -6.f, -1.f, 1.f, -2.f})});
  cs.push_back({"ij,jk", {tensor::from<float>({2,3}, {-1.f, 1.f, 3.f, 0.f, 2.f, -1.f}),
                 tensor::from<float>({3,2}, {-3.f, 2.f, 2.f, 2.f, 3.f, 0.f})}, tensor::from<float>({2,2}, {14.f, 0.f, 1.f, 4.f})});
  cs.push_back({"ij,ik->jk", {tensor::from<float>({3,2}, {-2.f, 1.f, 1.f, -1.f, 1.f, -2.f}),
                 tensor::from<float>({3,2}, {1.f, 2.f, -3.f, 0.f, 1.f, -3.f})}, tensor::from<float>({2,2}, {-4.f, -7.f, 2.f, 8.f})});
  cs.push_back({"bij,jk->bik", {tensor::from<float>({2,2,3}, {1.f, 3.f, 2.f, 1.f, 2.f, -1.f, -1.f, -3.f, 2.f, -1.f, 3.f, 0.f}),
                 tensor::from<float>({3,2}, {3.f, -3.f, -2.f, -1.f, -3.f, 0.f})}, tensor::from<float>({2,2,2}, {-9.f, -6.f, 2.f, -5.f, -3.f, 6.f, -9.f, 0.f})});
  cs.push_back({"ij,jk->ik", {tensor::from<float>({2,0}, {}),
                 tensor::from<float>({0,3}, {})}, tensor::from<float>({2,3}, {0.f, 0.f, 0.f, 0.f, 0.f, 0.f})});
  return cs;
}


std::vector<kernel_input> inputs_of(const std::vector<tensor>& ts) {
  std::vector<kernel_input> r;
  for (const auto& t : ts) r.push_back({t});
  return r;
}
}  // namespace

TEST_CASE("Einsum matches every ONNX backend test case (transpose, sum, batch diagonal, inner product, batch matmul)") {
  const auto cases = einsum_backend_cases();
  CHECK(cases.size() == 5);
  for (const auto& c : cases) check_backend_case<ops::einsum, double>(c, 1e-12);
}

TEST_CASE("Einsum matches numpy.einsum on fast-path, general-path, implicit, diagonal, broadcasting and 3-operand equations") {
  for (const auto& c : einsum_numpy_cases()) {
    CAPTURE(c.eq);
    const tensor y = run1<ops::einsum>(op("Einsum", 12).set("equation", c.eq), inputs_of(c.in));
    check_tensor<float>(y, dims_of(c.out), values_of<float>(c.out), 0, 0);
  }
}

TEST_CASE("Einsum \"nd,kd->nk\" on [1024,64] x [16,64] (Mixed_ops) on a pool of 2 threads matches a plain loop") {
  thread_pool pool(2);
  lcg g(11);
  std::vector<float> a(1024 * 64), b(16 * 64);
  for (auto& v : a) v = g.uniform();
  for (auto& v : b) v = g.uniform();
  const tensor y = run1<ops::einsum>(op("Einsum", 12).set("equation", std::string("nd,kd->nk")),
                                     {{make<float>({1024, 64}, a)}, {make<float>({16, 64}, b)}}, &pool);
  std::vector<float> want(1024 * 16);
  for (std::size_t n = 0; n < 1024; ++n)
    for (std::size_t k = 0; k < 16; ++k) {
      double s = 0;
      for (std::size_t d = 0; d < 64; ++d) s += static_cast<double>(a[n * 64 + d]) * b[k * 64 + d];
      want[n * 16 + k] = static_cast<float>(s);
    }
  check_tensor<float>(y, {1024, 16}, want, 1e-4, 1e-4);
}

TEST_CASE("Einsum on int32 and int64 (matrix product and trace) and on uint8 (general path)") {
  const tensor a = make<std::int32_t>({2, 2}, {1, 2, 3, 4});
  const tensor b = make<std::int32_t>({2, 2}, {5, 6, 7, 8});
  check_tensor<std::int32_t>(run1<ops::einsum>(op("Einsum", 12).set("equation", std::string("ij,jk->ik")), {{a}, {b}}), {2, 2},
                             {19, 22, 43, 50});
  check_tensor<std::int32_t>(run1<ops::einsum>(op("Einsum", 12).set("equation", std::string("ij,kj->ki")), {{a}, {b}}), {2, 2},
                             {17, 39, 23, 53});
  check_tensor<i64>(run1<ops::einsum>(op("Einsum", 12).set("equation", std::string("ii")), {{make<i64>({2, 2}, {1, 2, 3, 4})}}), {}, {5});
  check_tensor<std::uint8_t>(run1<ops::einsum>(op("Einsum", 12).set("equation", std::string("i,i,i->i")),
                                               {{make<std::uint8_t>({2}, {1, 2})}, {make<std::uint8_t>({2}, {3, 4})}, {make<std::uint8_t>({2}, {5, 6})}}),
                             {2}, {15, 48});
}

TEST_CASE("Einsum batched fast path with many batches on a pool of 2 threads (float and double)") {
  thread_pool pool(2);
  lcg g(5);
  const std::size_t B = 24, I = 9, J = 17, K = 11;
  std::vector<float> a(B * I * J), b(B * J * K);
  for (auto& v : a) v = g.uniform();
  for (auto& v : b) v = g.uniform();
  std::vector<float> want(B * K * I);
  for (std::size_t n = 0; n < B; ++n)
    for (std::size_t i = 0; i < I; ++i)
      for (std::size_t k = 0; k < K; ++k) {
        double s = 0;
        for (std::size_t j = 0; j < J; ++j) s += static_cast<double>(a[(n * I + i) * J + j]) * b[(n * J + j) * K + k];
        want[(n * K + k) * I + i] = static_cast<float>(s);
      }
  const tensor y = run1<ops::einsum>(op("Einsum", 12).set("equation", std::string("bij,bjk->bki")),
                                     {{make<float>({24, 9, 17}, a)}, {make<float>({24, 17, 11}, b)}}, &pool);
  check_tensor<float>(y, {24, 11, 9}, want, 1e-5, 1e-4);
  const std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end());
  const tensor yd = run1<ops::einsum>(op("Einsum", 12).set("equation", std::string("bij,bjk->bki")),
                                      {{make<double>({24, 9, 17}, ad)}, {make<double>({24, 17, 11}, bd)}}, &pool);
  check_tensor<double>(yd, {24, 11, 9}, std::vector<double>(want.begin(), want.end()), 1e-5, 1e-4);
}

TEST_CASE("Einsum errors: term count, rank, sizes, output labels, characters, missing output ellipsis") {
  const tensor m = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const tensor v = make<float>({4}, {1, 2, 3, 4});
  const auto eq = [](const char* e) { return op("Einsum", 12).set("equation", std::string(e)); };
  check_fails<ops::einsum>(eq("ij,jk->ik"), {{m}}, "has 2 input terms but the node has 1 inputs");
  check_fails<ops::einsum>(eq("ijk->i"), {{m}}, "input 0 has rank 2 but its term names 3 dimensions");
  check_fails<ops::einsum>(eq("ij,j->i"), {{m}, {v}}, "label 'j' has size 3 in one input and 4 in input 1");
  check_fails<ops::einsum>(eq("ij->ik"), {{m}}, "output label 'k' does not appear in the inputs");
  check_fails<ops::einsum>(eq("ij->ii"), {{m}}, "output label 'i' appears twice");
  check_fails<ops::einsum>(eq("i1->i"), {{v}}, "unexpected character '1'");
  check_fails<ops::einsum>(eq("..i->i"), {{v}}, "malformed ellipsis");
  check_fails<ops::einsum>(eq("...i->i"), {{m}}, "the output term has no ellipsis");
  check_fails<ops::einsum>(eq("ii->i"), {{m}}, "repeats label 'i' over dimensions of different sizes 2 and 3");
  check_fails<ops::einsum>(op("Einsum", 12), {{m}}, "needs the attribute equation");
}

// ---------------------------------------------------------------------------------------------------------------
// GatherElements

TEST_CASE("GatherElements along axis 1, axis 0 and with negative indices (backend test_gather_elements_*)") {
  const tensor a = make<float>({2, 2}, {1, 2, 3, 4});
  check_tensor<float>(run1<ops::gather_elements>(op("GatherElements", 13).set("axis", i64{1}), {{a}, {make<i64>({2, 2}, {0, 0, 1, 0})}}),
                      {2, 2}, {1, 1, 4, 3});
  const tensor b = make<float>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  check_tensor<float>(run1<ops::gather_elements>(op("GatherElements", 13), {{b}, {make<i64>({2, 3}, {1, 2, 0, 2, 0, 0})}}), {2, 3},
                      {4, 8, 3, 7, 2, 3});
  check_tensor<float>(run1<ops::gather_elements>(op("GatherElements", 11), {{b}, {make<i64>({2, 3}, {-1, -2, 0, -2, 0, 0})}}), {2, 3},
                      {7, 5, 3, 4, 2, 3});
}

TEST_CASE("GatherElements with int32 indices on a middle axis, a negative axis, smaller indices and strings") {
  // data [2, 3, 2]; indices [2, 2, 1] along axis 1 (the indices' other dims may be smaller than the data's).
  const tensor d = make<i64>({2, 3, 2}, {0, 1, 10, 11, 20, 21, 100, 101, 110, 111, 120, 121});
  check_tensor<i64>(run1<ops::gather_elements>(op("GatherElements", 13).set("axis", i64{1}),
                                               {{d}, {make<std::int32_t>({2, 2, 1}, {2, 0, -1, 1})}}),
                    {2, 2, 1}, {20, 0, 120, 110});
  check_tensor<i64>(run1<ops::gather_elements>(op("GatherElements", 13).set("axis", i64{-1}),
                                               {{d}, {make<std::int32_t>({1, 2, 2}, {1, 1, 0, 1})}}),
                    {1, 2, 2}, {1, 1, 10, 11});
  const tensor s = make<std::string>({2, 2}, {"a", "b", "c", "d"});
  const tensor y = run1<ops::gather_elements>(op("GatherElements", 13).set("axis", i64{1}), {{s}, {make<i64>({2, 3}, {1, 0, 1, 0, 0, 1})}});
  CHECK(dims_of(y) == ints{2, 3});
  CHECK(values_of<std::string>(y) == std::vector<std::string>{"b", "a", "b", "c", "c", "d"});
}

TEST_CASE("GatherElements errors: index out of bounds, rank mismatch, bad axis, indices larger than data") {
  const tensor b = make<float>({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  check_fails<ops::gather_elements>(op("GatherElements", 13), {{b}, {make<i64>({1, 3}, {0, 3, 1})}}, "index 3 (element 1 of indices) is out of bounds");
  check_fails<ops::gather_elements>(op("GatherElements", 13), {{b}, {make<i64>({1, 1}, {-4})}}, "index -4");
  check_fails<ops::gather_elements>(op("GatherElements", 13), {{b}, {make<i64>({3}, {0, 1, 2})}}, "indices has rank 1 but data has rank 2");
  check_fails<ops::gather_elements>(op("GatherElements", 13).set("axis", i64{2}), {{b}, {make<i64>({1, 1}, {0})}}, "axis 2 is out of range");
  check_fails<ops::gather_elements>(op("GatherElements", 13), {{b}, {make<i64>({1, 4}, {0, 0, 0, 0})}}, "exceeds data shape");
}

TEST_CASE("GatherElements on [200, 300] along axis 0 on a pool of 2 threads") {
  thread_pool pool(2);
  lcg g(9);
  std::vector<float> xs(200 * 300);
  std::iota(xs.begin(), xs.end(), 0.0f);
  std::vector<i64> idx(150 * 300);
  std::vector<float> want(idx.size());
  for (std::size_t i = 0; i < idx.size(); ++i) {
    idx[i] = static_cast<i64>(g.next() % 400) - 200;
    want[i] = xs[static_cast<std::size_t>((idx[i] < 0 ? idx[i] + 200 : idx[i]) * 300) + i % 300];
  }
  check_tensor<float>(run1<ops::gather_elements>(op("GatherElements", 13), {{make<float>({200, 300}, xs)}, {make<i64>({150, 300}, idx)}}, &pool),
                      {150, 300}, want, 0, 0);
}

// ---------------------------------------------------------------------------------------------------------------
// Tile

TEST_CASE("Tile [[0,1],[2,3]] by [2,2] (backend test_tile_precomputed) and a 3-D tensor by [2,1,3]") {
  check_tensor<float>(run1<ops::tile>(op("Tile", 13), {{make<float>({2, 2}, {0, 1, 2, 3})}, {make<i64>({2}, {2, 2})}}), {4, 4},
                      {0, 1, 0, 1, 2, 3, 2, 3, 0, 1, 0, 1, 2, 3, 2, 3});
  check_tensor<std::int32_t>(run1<ops::tile>(op("Tile", 6), {{make<std::int32_t>({1, 2, 3}, {0, 1, 2, 3, 4, 5})}, {make<i64>({3}, {2, 1, 3})}}),
                             {2, 2, 9}, {0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5, 3, 4, 5,
                                         0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5, 3, 4, 5});
}

TEST_CASE("Tile of strings and bools, of a scalar, with a zero repeat, and Tile-1 (tiles and axis inputs)") {
  const tensor s = run1<ops::tile>(op("Tile", 13), {{make<std::string>({2}, {"x", "yz"})}, {make<i64>({1}, {2})}});
  CHECK(values_of<std::string>(s) == std::vector<std::string>{"x", "yz", "x", "yz"});
  const tensor b = run1<ops::tile>(op("Tile", 13), {{make<bool>({2, 1}, {true, false})}, {make<i64>({2}, {1, 2})}});
  CHECK(values_of<bool>(b) == std::vector<bool>{true, true, false, false});
  check_tensor<float>(run1<ops::tile>(op("Tile", 13), {{tensor::scalar<float>(2.5f)}, {empty_tensor<i64>()}}), {}, {2.5f});
  check_tensor<float>(run1<ops::tile>(op("Tile", 13), {{make<float>({2, 2}, {1, 2, 3, 4})}, {make<i64>({2}, {0, 3})}}), {0, 6}, {});
  check_tensor<float>(run1<ops::tile>(op("Tile", 1), {{make<float>({2, 2}, {1, 2, 3, 4})}, {tensor::scalar<i64>(2)}, {tensor::scalar<i64>(1)}}),
                      {2, 4}, {1, 2, 1, 2, 3, 4, 3, 4});
}

TEST_CASE("Tile errors: repeats of the wrong length and negative repeats") {
  const tensor x = make<float>({2, 2}, {1, 2, 3, 4});
  check_fails<ops::tile>(op("Tile", 13), {{x}, {make<i64>({3}, {1, 1, 1})}}, "repeats must be a 1-D tensor of 2 elements");
  check_fails<ops::tile>(op("Tile", 13), {{x}, {make<i64>({2}, {1, -1})}}, "repeats[1] is negative");
}

TEST_CASE("Tile [2,3,4,5] by [7,6,4,2] (backend test_tile shape) on a pool of 2 threads") {
  thread_pool pool(2);
  std::vector<float> xs(2 * 3 * 4 * 5);
  std::iota(xs.begin(), xs.end(), 0.0f);
  const tensor y = run1<ops::tile>(op("Tile", 13), {{make<float>({2, 3, 4, 5}, xs)}, {make<i64>({4}, {7, 6, 4, 2})}}, &pool);
  std::vector<float> want;
  for (int a = 0; a < 14; ++a)
    for (int b = 0; b < 18; ++b)
      for (int c = 0; c < 16; ++c)
        for (int d = 0; d < 10; ++d) want.push_back(xs[static_cast<std::size_t>(((a % 2 * 3 + b % 3) * 4 + c % 4) * 5 + d % 5)]);
  check_tensor<float>(y, {14, 18, 16, 10}, want, 0, 0);
}

// ---------------------------------------------------------------------------------------------------------------
// Pad

namespace {
std::vector<std::int32_t> iota12() {
  std::vector<std::int32_t> v(12);
  std::iota(v.begin(), v.end(), 1);
  return v;
}
}  // namespace

TEST_CASE("Pad opset 11: constant (with constant_value), reflect and edge, as numpy.pad") {
  const tensor x = make<std::int32_t>({3, 4}, iota12());
  const tensor pads = make<i64>({4}, {1, 2, 2, 1});
  check_tensor<std::int32_t>(run1<ops::pad>(op("Pad", 11), {{x}, {pads}, {tensor::scalar<std::int32_t>(9)}}), {6, 7},
                             {9, 9, 9, 9, 9, 9, 9, 9, 9, 1, 2, 3, 4, 9, 9, 9, 5, 6, 7, 8, 9, 9, 9, 9, 10, 11, 12,
                              9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9});
  check_tensor<std::int32_t>(run1<ops::pad>(op("Pad", 13).set("mode", std::string("reflect")), {{x}, {pads}}), {6, 7},
                             {7, 6, 5, 6, 7, 8, 7, 3, 2, 1, 2, 3, 4, 3, 7, 6, 5, 6, 7, 8, 7, 11, 10, 9, 10, 11, 12,
                              11, 7, 6, 5, 6, 7, 8, 7, 3, 2, 1, 2, 3, 4, 3});
  check_tensor<std::int32_t>(run1<ops::pad>(op("Pad", 13).set("mode", std::string("edge")), {{x}, {pads}}), {6, 7},
                             {1, 1, 1, 2, 3, 4, 4, 1, 1, 1, 2, 3, 4, 4, 5, 5, 5, 6, 7, 8, 8, 9, 9, 9, 10, 11, 12,
                              12, 9, 9, 9, 10, 11, 12, 12, 9, 9, 9, 10, 11, 12, 12});
}

TEST_CASE("Pad: the constant defaults to 0, negative pads crop (then reflect pads the cropped data)") {
  const tensor x = make<std::int32_t>({3, 4}, iota12());
  check_tensor<std::int32_t>(run1<ops::pad>(op("Pad", 13), {{x}, {make<i64>({4}, {-1, 1, 0, -2})}}), {2, 3}, {0, 5, 6, 0, 9, 10});
  check_tensor<std::int32_t>(run1<ops::pad>(op("Pad", 13).set("mode", std::string("reflect")), {{x}, {make<i64>({4}, {1, -1, 1, 2})}}),
                             {5, 5}, {6, 7, 8, 7, 6, 2, 3, 4, 3, 2, 6, 7, 8, 7, 6, 10, 11, 12, 11, 10, 6, 7, 8, 7, 6});
}

TEST_CASE("Pad reflect longer than the data reflects again (numpy), and a length-1 axis repeats its element") {
  check_tensor<float>(run1<ops::pad>(op("Pad", 11).set("mode", std::string("reflect")), {{make<float>({3}, {1, 2, 3})}, {make<i64>({2}, {5, 4})}}),
                      {12}, {2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3});
  check_tensor<float>(run1<ops::pad>(op("Pad", 11).set("mode", std::string("reflect")), {{make<float>({1}, {7})}, {make<i64>({2}, {2, 1})}}),
                      {4}, {7, 7, 7, 7});
}

TEST_CASE("Pad opset 2 (pads and value attributes) and opset 1 (paddings attribute)") {
  const tensor x = make<float>({3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f});
  check_tensor<float>(run1<ops::pad>(op("Pad", 2).set("pads", ints{0, 2, 0, 0}).set("value", 0.5f), {{x}}), {3, 4},
                      {0.5f, 0.5f, 1.0f, 1.2f, 0.5f, 0.5f, 2.3f, 3.4f, 0.5f, 0.5f, 4.5f, 5.7f});
  check_tensor<float>(run1<ops::pad>(op("Pad", 2).set("pads", ints{0, 2, 0, 0}).set("mode", std::string("reflect")), {{x}}), {3, 4},
                      {1.0f, 1.2f, 1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f, 4.5f, 5.7f});
  check_tensor<double>(run1<ops::pad>(op("Pad", 1).set("paddings", ints{1, 0, 0, 1}).set("mode", std::string("edge")),
                                      {{make<double>({2, 2}, {1, 2, 3, 4})}}),
                       {3, 3}, {1, 2, 2, 1, 2, 2, 3, 4, 4});
}

TEST_CASE("Pad of strings, bools and uint8, and of a scalar with no pads") {
  const tensor s = run1<ops::pad>(op("Pad", 13), {{make<std::string>({2}, {"a", "b"})}, {make<i64>({2}, {1, 1})}, {tensor::scalar<std::string>("-")}});
  CHECK(values_of<std::string>(s) == std::vector<std::string>{"-", "a", "b", "-"});
  const tensor s0 = run1<ops::pad>(op("Pad", 13), {{make<std::string>({1}, {"a"})}, {make<i64>({2}, {0, 1})}});
  CHECK(values_of<std::string>(s0) == std::vector<std::string>{"a", ""});
  const tensor b = run1<ops::pad>(op("Pad", 13), {{make<bool>({1}, {true})}, {make<i64>({2}, {1, 0})}});
  CHECK(values_of<bool>(b) == std::vector<bool>{false, true});
  check_tensor<std::uint8_t>(run1<ops::pad>(op("Pad", 13).set("mode", std::string("edge")), {{make<std::uint8_t>({2}, {3, 250})}, {make<i64>({2}, {2, 1})}}),
                             {5}, {3, 3, 3, 250, 250});
  check_tensor<float>(run1<ops::pad>(op("Pad", 13), {{tensor::scalar<float>(4.0f)}, {empty_tensor<i64>()}}), {}, {4.0f});
}

TEST_CASE("Pad errors: pads of the wrong length, over-cropping, unknown mode, edge of an empty axis, wrong constant type") {
  const tensor x = make<float>({2, 2}, {1, 2, 3, 4});
  check_fails<ops::pad>(op("Pad", 13), {{x}, {make<i64>({2}, {1, 1})}}, "pads has 2 values; expected 2 * rank = 4");
  check_fails<ops::pad>(op("Pad", 13), {{x}, {make<i64>({4}, {-2, 0, -1, 0})}}, "remove more than the 2 elements of dimension 0");
  check_fails<ops::pad>(op("Pad", 13).set("mode", std::string("wrap")), {{x}, {make<i64>({4}, {0, 0, 0, 0})}}, "unknown mode 'wrap'");
  check_fails<ops::pad>(op("Pad", 13).set("mode", std::string("edge")), {{make<float>({0, 2}, {})}, {make<i64>({4}, {1, 0, 0, 0})}},
                        "no elements to pad from in edge mode");
  check_fails<ops::pad>(op("Pad", 13), {{x}, {make<i64>({4}, {0, 0, 0, 0})}, {tensor::scalar<double>(1.0)}}, "constant_value has element type");
  check_fails<ops::pad>(op("Pad", 2), {{x}}, "needs the attribute pads");
}

TEST_CASE("Pad reflect of [8,64,64] on a pool of 2 threads matches a reference loop") {
  thread_pool pool(2);
  std::vector<float> xs(8 * 64 * 64);
  std::iota(xs.begin(), xs.end(), 0.0f);
  const tensor y = run1<ops::pad>(op("Pad", 13).set("mode", std::string("reflect")),
                                  {{make<float>({8, 64, 64}, xs)}, {make<i64>({6}, {0, 3, 2, 0, 1, 4})}}, &pool);
  const auto refl = [](int i, int n) { return i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i); };
  std::vector<float> want;
  for (int c = 0; c < 8; ++c)
    for (int i = 0; i < 68; ++i)
      for (int j = 0; j < 70; ++j)
        want.push_back(xs[static_cast<std::size_t>((c * 64 + refl(i - 3, 64)) * 64 + refl(j - 2, 64))]);
  check_tensor<float>(y, {8, 68, 70}, want, 0, 0);
}
