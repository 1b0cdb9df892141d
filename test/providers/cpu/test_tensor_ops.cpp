// Tests of the CPU provider's shape, layout and data-movement kernels (tensor_ops.cpp), one node at a time, against
// hand-computed values and the cases of the ONNX specification.
#include <epstack/providers/cpu/kernels.hpp>

#include "../../support/kernel_harness.hpp"

#include <doctest/doctest.h>

#include <cstring>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

using namespace epstack;
using namespace epstack::test;
namespace ops = epstack::cpu::ops;

namespace {

using i64s = std::vector<std::int64_t>;

kernel_node op(std::string type, int version, std::size_t outputs = 1) {
  kernel_node kn(std::move(type), version);
  kn.outputs = outputs;
  return kn;
}
template <class T>
tensor make(const i64s& sizes, const std::vector<T>& values) {
  if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> is not contiguous
    const std::unique_ptr<bool[]> b(new bool[values.size()]);
    std::copy(values.begin(), values.end(), b.get());
    return tensor::from<bool>(std::span<const std::int64_t>(sizes), std::span<const bool>(b.get(), values.size()));
  } else {
    return tensor::from<T>(std::span<const std::int64_t>(sizes), std::span<const T>(values));
  }
}
tensor f32(const i64s& sizes, const std::vector<float>& v) { return make<float>(sizes, v); }
tensor i64(const i64s& sizes, const std::vector<std::int64_t>& v) { return make<std::int64_t>(sizes, v); }
tensor i64v(const std::vector<std::int64_t>& v) { return i64({static_cast<std::int64_t>(v.size())}, v); }
tensor strs(const i64s& sizes, const std::vector<std::string>& v) { return make<std::string>(sizes, v); }
kernel_input in(tensor t) { return {std::move(t), false}; }
kernel_input cst(tensor t) { return {std::move(t), true}; }
kernel_input none() { return {}; }

std::vector<float> iota_f(std::size_t n, float from = 0) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}
template <class T>
std::vector<T> values_of(const tensor& t) {
  const T* p = t.typed<T>();
  return std::vector<T>(p, p + t.element_count());
}
i64s sizes_of(const tensor& t) { return i64s(t.sizes().begin(), t.sizes().end()); }

// Exact floating-point values, infinities included (check_tensor's tolerance test is NaN for them); NaN matches NaN.
template <class T>
void check_exact(const tensor& got, const i64s& sizes, const std::vector<T>& want) {
  REQUIRE(got.type() == element_type_of_v<T>);
  CHECK(sizes_of(got) == sizes);
  REQUIRE(got.element_count() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const T g = got.typed<T>()[i];
    CHECK_MESSAGE((std::isnan(want[i]) ? std::isnan(g) : g == want[i]), "element " << i << ": got " << g << ", want " << want[i]);
  }
}

// A failed run with the given code whose message contains `needle`.
template <class K>
void expect_error(const kernel_node& kn, const std::vector<kernel_input>& inputs, std::string_view needle,
                  errc code = errc::invalid_argument) {
  auto r = run_kernel<K>(kn, inputs);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.code() == code);
  CHECK_MESSAGE(r.status().message().find(needle) != std::string::npos, r.status().to_string());
}

// Transposes `x` by `perm` the slow, obvious way (float data).
std::vector<float> naive_transpose(const std::vector<float>& x, const i64s& dims, const i64s& perm) {
  const std::size_t r = dims.size();
  i64s out(r), in_strides(r, 1);
  for (std::size_t i = r; i-- > 1;) in_strides[i - 1] = in_strides[i] * dims[i];
  for (std::size_t i = 0; i < r; ++i) out[i] = dims[static_cast<std::size_t>(perm[i])];
  std::vector<float> y(x.size());
  i64s idx(r, 0);
  for (std::size_t o = 0; o < y.size(); ++o) {
    std::int64_t off = 0;
    for (std::size_t i = 0; i < r; ++i) off += idx[i] * in_strides[static_cast<std::size_t>(perm[i])];
    y[o] = x[static_cast<std::size_t>(off)];
    for (std::size_t i = r; i-- > 0;) {
      if (++idx[i] < out[i]) break;
      idx[i] = 0;
    }
  }
  return y;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Reshape

TEST_CASE("Reshape infers -1, copies 0 dims and returns a view sharing the input's data") {
  const tensor x = f32({2, 3, 4}, iota_f(24));
  const tensor y = run1<ops::reshape>(op("Reshape", 13), {in(x), cst(i64v({4, -1}))});
  check_tensor<float>(y, {4, 6}, iota_f(24));
  CHECK(y.data() == x.data());
  const tensor z = run1<ops::reshape>(op("Reshape", 13), {in(x), in(i64v({0, -1}))});
  CHECK(sizes_of(z) == i64s{2, 12});
  CHECK(z.data() == x.data());
  const tensor s = run1<ops::reshape>(op("Reshape", 5), {in(f32({1, 1}, {7.f})), in(i64({0}, {}))});
  CHECK(s.rank() == 0);
  CHECK(*s.typed<float>() == 7.f);
}

TEST_CASE("Reshape-1 takes the shape from its attribute") {
  const tensor x = f32({2, 3}, iota_f(6));
  const tensor y = run1<ops::reshape>(op("Reshape", 1).set("shape", i64s{3, 2}), {in(x)});
  check_tensor<float>(y, {3, 2}, iota_f(6));
  CHECK(y.data() == x.data());
}

TEST_CASE("Reshape-14 allowzero keeps 0 as a dimension, without it 0 copies the input's") {
  const tensor empty = f32({0, 3, 4}, {});
  auto kn = op("Reshape", 14).set("allowzero", std::int64_t{1});
  const tensor y = run1<ops::reshape>(kn, {in(empty), in(i64v({3, 4, 0}))});
  CHECK(sizes_of(y) == i64s{3, 4, 0});
  const tensor x = f32({2, 3, 4}, iota_f(24));
  CHECK(sizes_of(run1<ops::reshape>(op("Reshape", 14), {in(x), in(i64v({0, 12}))})) == i64s{2, 12});
  expect_error<ops::reshape>(kn, {in(x), in(i64v({0, 12}))}, "cannot reshape [2,3,4]");
}

TEST_CASE("Reshape of strings and of bool is a view too") {
  const tensor x = strs({2, 2}, {"a", "b", "c", "d"});
  const tensor y = run1<ops::reshape>(op("Reshape", 13), {in(x), in(i64v({4}))});
  check_tensor<std::string>(y, {4}, {"a", "b", "c", "d"});
  CHECK(y.data() == x.data());
  const tensor b = make<bool>({2}, {true, false});
  check_tensor<bool>(run1<ops::reshape>(op("Reshape", 13), {in(b), in(i64v({1, 2}))}), {1, 2}, {true, false});
}

TEST_CASE("Reshape rejects bad shapes with a message naming them") {
  const tensor x = f32({2, 3}, iota_f(6));
  expect_error<ops::reshape>(op("Reshape", 13), {in(x), in(i64v({-1, -1}))}, "more than one -1");
  expect_error<ops::reshape>(op("Reshape", 13), {in(x), in(i64v({4, 2}))}, "cannot reshape [2,3] (6 elements) to [4,2]");
  expect_error<ops::reshape>(op("Reshape", 13), {in(x), in(i64v({-2, 3}))}, "negative dimension -2");
  expect_error<ops::reshape>(op("Reshape", 13), {in(x), in(i64v({4, -1}))}, "cannot be inferred");
  expect_error<ops::reshape>(op("Reshape", 13), {in(x), in(i64v({1, 6, 0}))}, "copies dimension 2");
}

// ---------------------------------------------------------------------------------------------------------------
// Flatten, Squeeze, Unsqueeze, Identity

TEST_CASE("Flatten splits the dims at axis, default 1, negative from opset 11") {
  const tensor x = f32({2, 3, 4}, iota_f(24));
  const tensor d = run1<ops::flatten>(op("Flatten", 13), {in(x)});
  check_tensor<float>(d, {2, 12}, iota_f(24));
  CHECK(d.data() == x.data());
  CHECK(sizes_of(run1<ops::flatten>(op("Flatten", 9).set("axis", std::int64_t{0}), {in(x)})) == i64s{1, 24});
  CHECK(sizes_of(run1<ops::flatten>(op("Flatten", 9).set("axis", std::int64_t{3}), {in(x)})) == i64s{24, 1});
  CHECK(sizes_of(run1<ops::flatten>(op("Flatten", 11).set("axis", std::int64_t{-1}), {in(x)})) == i64s{6, 4});
  CHECK(sizes_of(run1<ops::flatten>(op("Flatten", 13).set("axis", std::int64_t{-3}), {in(x)})) == i64s{1, 24});
  expect_error<ops::flatten>(op("Flatten", 9).set("axis", std::int64_t{-1}), {in(x)}, "axis -1 is out of range");
  expect_error<ops::flatten>(op("Flatten", 13).set("axis", std::int64_t{4}), {in(x)}, "axis 4 is out of range for rank 3");
}

TEST_CASE("Squeeze removes the named size-1 axes, or all of them, as a view") {
  const tensor x = f32({1, 3, 1, 2}, iota_f(6));
  const tensor all = run1<ops::squeeze>(op("Squeeze", 13), {in(x)});
  check_tensor<float>(all, {3, 2}, iota_f(6));
  CHECK(all.data() == x.data());
  CHECK(sizes_of(run1<ops::squeeze>(op("Squeeze", 13), {in(x), in(i64v({-2}))})) == i64s{1, 3, 2});
  CHECK(sizes_of(run1<ops::squeeze>(op("Squeeze", 11).set("axes", i64s{0, -2}), {in(x)})) == i64s{3, 2});
  CHECK(sizes_of(run1<ops::squeeze>(op("Squeeze", 1).set("axes", i64s{2}), {in(x)})) == i64s{1, 3, 2});
  expect_error<ops::squeeze>(op("Squeeze", 13), {in(x), in(i64v({1}))}, "cannot squeeze axis 1: its size is 3");
  expect_error<ops::squeeze>(op("Squeeze", 13), {in(x), in(i64v({4}))}, "axis 4 is out of range for rank 4");
  expect_error<ops::squeeze>(op("Squeeze", 1).set("axes", i64s{-1}), {in(x)}, "axis -1 is negative");
}

TEST_CASE("Unsqueeze inserts axes at output positions, in any order, negative from opset 11") {
  const tensor x = f32({3, 4, 5}, iota_f(60));
  const tensor y = run1<ops::unsqueeze>(op("Unsqueeze", 13), {in(x), cst(i64v({0, 4}))});
  CHECK(sizes_of(y) == i64s{1, 3, 4, 5, 1});
  CHECK(y.data() == x.data());
  CHECK(sizes_of(run1<ops::unsqueeze>(op("Unsqueeze", 13), {in(x), in(i64v({5, 4, 2}))})) == i64s{3, 4, 1, 5, 1, 1});
  CHECK(sizes_of(run1<ops::unsqueeze>(op("Unsqueeze", 13), {in(x), in(i64v({-1}))})) == i64s{3, 4, 5, 1});
  CHECK(sizes_of(run1<ops::unsqueeze>(op("Unsqueeze", 11).set("axes", i64s{-2, 0}), {in(x)})) == i64s{1, 3, 4, 1, 5});
  CHECK(sizes_of(run1<ops::unsqueeze>(op("Unsqueeze", 1).set("axes", i64s{1}), {in(x)})) == i64s{3, 1, 4, 5});
  const tensor s = run1<ops::unsqueeze>(op("Unsqueeze", 13), {in(tensor::scalar(2.5f)), in(i64v({0}))});
  check_tensor<float>(s, {1}, {2.5f});
  expect_error<ops::unsqueeze>(op("Unsqueeze", 13), {in(x), in(i64v({1, 1}))}, "name axis 1 twice");
  expect_error<ops::unsqueeze>(op("Unsqueeze", 13), {in(x), in(i64v({5}))}, "axis 5 is out of range for rank 4");
  expect_error<ops::unsqueeze>(op("Unsqueeze", 1).set("axes", i64s{-1}), {in(x)}, "axis -1 is negative");
  // Opset 13 needs the axes input.
  expect_error<ops::unsqueeze>(op("Unsqueeze", 13), {in(x)}, "does not support", errc::not_implemented);
}

TEST_CASE("Identity passes tensors of any type through, sharing storage") {
  const tensor x = f32({2}, {1.f, 2.f});
  const tensor y = run1<ops::identity>(op("Identity", 16), {in(x)});
  check_tensor<float>(y, {2}, {1.f, 2.f});
  CHECK(y.data() == x.data());
  const tensor s = strs({1}, {"hello"});
  check_tensor<std::string>(run1<ops::identity>(op("Identity", 13), {in(s)}), {1}, {"hello"});
  const tensor h = make<float16>({1}, {float16(1.5f)});
  CHECK(static_cast<float>(*run1<ops::identity>(op("Identity", 13), {in(h)}).typed<float16>()) == 1.5f);
}

// ---------------------------------------------------------------------------------------------------------------
// Dropout

TEST_CASE("Dropout in inference is a view of its input with an all-true bool mask") {
  const tensor x = f32({2, 2}, {-1.f, 0.f, 1.f, 2.f});
  const tensor y = run1<ops::dropout>(op("Dropout", 13), {in(x)});
  check_tensor<float>(y, {2, 2}, {-1.f, 0.f, 1.f, 2.f});
  CHECK(y.data() == x.data());
  auto r = run_kernel<ops::dropout>(op("Dropout", 12, 2), {in(x), cst(tensor::scalar(0.3f)), cst(tensor::scalar(false))});
  REQUIRE(r.has_value());
  CHECK((*r)[0].as_tensor().data() == x.data());
  check_tensor<bool>((*r)[1].as_tensor(), {2, 2}, {true, true, true, true});
  // training_mode given at run time as false.
  auto f = run_kernel<ops::dropout>(op("Dropout", 13, 2), {in(x), none(), in(tensor::scalar(false))});
  REQUIRE(f.has_value());
  check_tensor<bool>((*f)[1].as_tensor(), {2, 2}, {true, true, true, true});
}

TEST_CASE("Dropout before opset 10 gives a mask of ones of the data type") {
  const tensor x = make<double>({3}, {1.0, 2.0, 3.0});
  auto r = run_kernel<ops::dropout>(op("Dropout", 7, 2).set("ratio", 0.2f), {in(x)});
  REQUIRE(r.has_value());
  check_tensor<double>((*r)[0].as_tensor(), {3}, {1.0, 2.0, 3.0});
  check_tensor<double>((*r)[1].as_tensor(), {3}, {1.0, 1.0, 1.0});
  auto old = run_kernel<ops::dropout>(op("Dropout", 6, 2).set("is_test", std::int64_t{1}), {in(f32({1}, {4.f}))});
  REQUIRE(old.has_value());
  check_tensor<float>((*old)[1].as_tensor(), {1}, {1.f});
}

TEST_CASE("Dropout in training mode drops each element with the ratio's probability and scales the rest") {
  const tensor x = f32({3}, {1.f, 2.f, 3.f});
  auto zero = run_kernel<ops::dropout>(op("Dropout", 13, 2), {in(x), in(tensor::scalar(0.0f)), in(tensor::scalar(true))});
  REQUIRE(zero.has_value());
  check_tensor<float>((*zero)[0].as_tensor(), {3}, {1.f, 2.f, 3.f});
  check_tensor<bool>((*zero)[1].as_tensor(), {3}, {true, true, true});
  // ratio 0.25: kept values are x / 0.75 and the mask says which; about three quarters are kept.
  std::vector<float> big(4000);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 7) + 1.0f;
  const tensor xb = f32({4000}, big);
  auto r = run_kernel<ops::dropout>(op("Dropout", 13, 2).set("seed", 7.0f), {in(xb), in(tensor::scalar(0.25f)), in(tensor::scalar(true))});
  REQUIRE(r.has_value());
  const tensor& y = (*r)[0].as_tensor();
  const tensor& m = (*r)[1].as_tensor();
  std::size_t kept = 0;
  for (std::size_t i = 0; i < big.size(); ++i) {
    if (m.typed<bool>()[i]) {
      ++kept;
      CHECK(y.typed<float>()[i] == doctest::Approx(big[i] / 0.75f));
    } else {
      CHECK(y.typed<float>()[i] == 0.0f);
    }
  }
  CHECK(kept > 2800);
  CHECK(kept < 3200);
  // The same seed gives the same mask in a new kernel.
  auto again = run_kernel<ops::dropout>(op("Dropout", 13, 2).set("seed", 7.0f), {in(xb), in(tensor::scalar(0.25f)), in(tensor::scalar(true))});
  REQUIRE(again.has_value());
  CHECK(std::memcmp((*again)[1].as_tensor().data(), m.data(), m.byte_size()) == 0);
  expect_error<ops::dropout>(op("Dropout", 13), {in(x), in(tensor::scalar(1.0f)), in(tensor::scalar(true))}, "ratio must be in [0, 1)");
  // Opset 6 without is_test is random dropout: not supported.
  expect_error<ops::dropout>(op("Dropout", 6), {in(x)}, "does not support", errc::not_implemented);
  expect_error<ops::dropout>(op("Dropout", 13), {in(x), none(), in(make<float>({1}, {1.f}))}, "training_mode must be a bool scalar");
}

// ---------------------------------------------------------------------------------------------------------------
// Shape, Size

TEST_CASE("Shape gives the dims as int64, sliced by start and end from opset 15 with clamping") {
  const tensor x = f32({3, 4, 5}, iota_f(60));
  check_tensor<std::int64_t>(run1<ops::shape>(op("Shape", 13), {in(x)}), {3}, {3, 4, 5});
  check_tensor<std::int64_t>(run1<ops::shape>(op("Shape", 15).set("start", std::int64_t{-1}), {in(x)}), {1}, {5});
  check_tensor<std::int64_t>(run1<ops::shape>(op("Shape", 15).set("end", std::int64_t{-1}), {in(x)}), {2}, {3, 4});
  check_tensor<std::int64_t>(
      run1<ops::shape>(op("Shape", 15).set("start", std::int64_t{1}).set("end", std::int64_t{2}), {in(x)}), {1}, {4});
  check_tensor<std::int64_t>(run1<ops::shape>(op("Shape", 15).set("end", std::int64_t{10}), {in(x)}), {3}, {3, 4, 5});
  check_tensor<std::int64_t>(run1<ops::shape>(op("Shape", 15).set("start", std::int64_t{-10}), {in(x)}), {3}, {3, 4, 5});
  check_tensor<std::int64_t>(
      run1<ops::shape>(op("Shape", 15).set("start", std::int64_t{2}).set("end", std::int64_t{1}), {in(x)}), {0}, {});
  // Before opset 15 the attributes do not exist.
  check_tensor<std::int64_t>(run1<ops::shape>(op("Shape", 13).set("start", std::int64_t{1}), {in(x)}), {3}, {3, 4, 5});
  check_tensor<std::int64_t>(run1<ops::shape>(op("Shape", 1), {in(tensor::scalar(1.f))}), {0}, {});
}

TEST_CASE("Size is an int64 scalar of the element count, for any type") {
  const tensor y = run1<ops::size>(op("Size", 13), {in(f32({3, 4, 5}, iota_f(60)))});
  CHECK(y.rank() == 0);
  check_tensor<std::int64_t>(y, {}, {60});
  check_tensor<std::int64_t>(run1<ops::size>(op("Size", 13), {in(strs({2}, {"a", "b"}))}), {}, {2});
  check_tensor<std::int64_t>(run1<ops::size>(op("Size", 1), {in(f32({0, 3}, {}))}), {}, {0});
}

// ---------------------------------------------------------------------------------------------------------------
// Transpose

TEST_CASE("Transpose reverses the axes by default") {
  const tensor y = run1<ops::transpose>(op("Transpose", 13), {in(f32({2, 3}, iota_f(6)))});
  check_tensor<float>(y, {3, 2}, {0, 3, 1, 4, 2, 5});
  const tensor z = run1<ops::transpose>(op("Transpose", 13), {in(f32({2, 3, 2}, iota_f(12)))});
  check_tensor<float>(z, {2, 3, 2}, {0, 6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11});
}

TEST_CASE("Transpose matches a naive transpose for every permutation of a 4-D tensor") {
  const i64s dims{2, 3, 4, 5};
  const auto x = iota_f(120);
  i64s perm{0, 1, 2, 3};
  do {
    CAPTURE(perm);
    const tensor y = run1<ops::transpose>(op("Transpose", 13).set("perm", perm), {in(f32(dims, x))});
    const i64s want_dims{dims[static_cast<std::size_t>(perm[0])], dims[static_cast<std::size_t>(perm[1])],
                         dims[static_cast<std::size_t>(perm[2])], dims[static_cast<std::size_t>(perm[3])]};
    check_tensor<float>(y, want_dims, naive_transpose(x, dims, perm), 0, 0);
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST_CASE("Transpose handles size-1 dims, large 2-D tiles, scalars and empty tensors") {
  // Size-1 dims are dropped before planning.
  const tensor y = run1<ops::transpose>(op("Transpose", 13).set("perm", i64s{2, 1, 0, 3}), {in(f32({3, 1, 2, 1}, iota_f(6)))});
  check_tensor<float>(y, {2, 1, 3, 1}, {0, 2, 4, 1, 3, 5});
  // A 2-D transpose larger than one 64x64 tile, with ragged edges.
  const i64s dims{70, 131};
  const auto x = iota_f(70 * 131);
  check_tensor<float>(run1<ops::transpose>(op("Transpose", 13), {in(f32(dims, x))}), {131, 70},
                      naive_transpose(x, dims, {1, 0}), 0, 0);
  check_tensor<float>(run1<ops::transpose>(op("Transpose", 13), {in(tensor::scalar(3.f))}), {}, {3.f});
  check_tensor<float>(run1<ops::transpose>(op("Transpose", 13).set("perm", i64s{1, 0}), {in(f32({0, 3}, {}))}), {3, 0}, {});
}

TEST_CASE("Transpose moves every element size, and strings") {
  const tensor s = strs({2, 3}, {"a", "b", "c", "d", "e", "f"});
  check_tensor<std::string>(run1<ops::transpose>(op("Transpose", 13), {in(s)}), {3, 2}, {"a", "d", "b", "e", "c", "f"});
  const tensor b = make<bool>({2, 2}, {true, false, false, false});
  check_tensor<bool>(run1<ops::transpose>(op("Transpose", 13), {in(b)}), {2, 2}, {true, false, false, false});
  const tensor i8 = make<std::int8_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  check_tensor<std::int8_t>(run1<ops::transpose>(op("Transpose", 13), {in(i8)}), {3, 2}, {1, 4, 2, 5, 3, 6});
  const tensor h = make<float16>({2, 1, 2}, {float16(1.f), float16(2.f), float16(3.f), float16(4.f)});
  const tensor ht = run1<ops::transpose>(op("Transpose", 13).set("perm", i64s{2, 1, 0}), {in(h)});
  check_tensor<float16>(ht, {2, 1, 2}, {float16(1.f), float16(3.f), float16(2.f), float16(4.f)});
  const tensor bf = make<bfloat16>({1, 2}, {bfloat16(1.f), bfloat16(2.f)});
  check_tensor<bfloat16>(run1<ops::transpose>(op("Transpose", 13), {in(bf)}), {2, 1}, {bfloat16(1.f), bfloat16(2.f)});
  const tensor d = make<double>({2, 2}, {1, 2, 3, 4});
  check_tensor<double>(run1<ops::transpose>(op("Transpose", 13), {in(d)}), {2, 2}, {1, 3, 2, 4});
  const tensor u16 = make<std::uint16_t>({2, 2}, {1, 2, 3, 4});
  check_tensor<std::uint16_t>(run1<ops::transpose>(op("Transpose", 13), {in(u16)}), {2, 2}, {1, 3, 2, 4});
}

TEST_CASE("Transpose rejects a perm that is not a permutation of the axes") {
  const tensor x = f32({2, 3}, iota_f(6));
  expect_error<ops::transpose>(op("Transpose", 13).set("perm", i64s{0, 0}), {in(x)}, "perm [0,0] is not a permutation");
  expect_error<ops::transpose>(op("Transpose", 13).set("perm", i64s{0, 2}), {in(x)}, "not a permutation of the axes [0, 2)");
  expect_error<ops::transpose>(op("Transpose", 13).set("perm", i64s{0, 1, 2}), {in(x)}, "has 3 entries but the input has rank 2");
}

TEST_CASE("Transpose of BERT's attention layouts on two threads matches the naive transpose") {
  epstack::thread_pool pool(2);
  const i64s dims{1, 128, 12, 64};
  std::vector<float> x(128 * 12 * 64);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 10007);
  for (const i64s& perm : {i64s{0, 2, 1, 3}, i64s{0, 2, 3, 1}, i64s{0, 3, 1, 2}, i64s{3, 2, 1, 0}}) {
    CAPTURE(perm);
    const tensor y = run1<ops::transpose>(op("Transpose", 13).set("perm", perm), {in(f32(dims, x))}, &pool);
    i64s want_dims;
    for (auto p : perm) want_dims.push_back(dims[static_cast<std::size_t>(p)]);
    check_tensor<float>(y, want_dims, naive_transpose(x, dims, perm), 0, 0);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Concat

TEST_CASE("Concat joins along the axis, negative from opset 11") {
  const tensor a = f32({2, 2}, {1, 2, 3, 4});
  const tensor b = f32({2, 1}, {5, 6});
  check_tensor<float>(run1<ops::concat>(op("Concat", 13).set("axis", std::int64_t{1}), {in(a), in(b)}), {2, 3},
                      {1, 2, 5, 3, 4, 6});
  check_tensor<float>(run1<ops::concat>(op("Concat", 11).set("axis", std::int64_t{-1}), {in(a), in(b)}), {2, 3},
                      {1, 2, 5, 3, 4, 6});
  check_tensor<float>(run1<ops::concat>(op("Concat", 4).set("axis", std::int64_t{0}), {in(a), in(f32({1, 2}, {7, 8}))}),
                      {3, 2}, {1, 2, 3, 4, 7, 8});
  // Opset 1: axis defaults to 1.
  check_tensor<float>(run1<ops::concat>(op("Concat", 1), {in(a), in(b)}), {2, 3}, {1, 2, 5, 3, 4, 6});
}

TEST_CASE("Concat accepts inputs empty along the axis, strings, and a single input as a view") {
  const tensor a = f32({2, 2}, {1, 2, 3, 4});
  check_tensor<float>(run1<ops::concat>(op("Concat", 13).set("axis", std::int64_t{1}), {in(f32({2, 0}, {})), in(a), in(f32({2, 0}, {}))}),
                      {2, 2}, {1, 2, 3, 4});
  check_tensor<float>(run1<ops::concat>(op("Concat", 13).set("axis", std::int64_t{0}), {in(f32({0, 2}, {})), in(f32({0, 2}, {}))}),
                      {0, 2}, {});
  const tensor s = run1<ops::concat>(op("Concat", 13).set("axis", std::int64_t{0}), {in(strs({1}, {"x"})), in(strs({2}, {"y", "z"}))});
  check_tensor<std::string>(s, {3}, {"x", "y", "z"});
  const tensor one = run1<ops::concat>(op("Concat", 13).set("axis", std::int64_t{0}), {in(a)});
  CHECK(one.data() == a.data());
}

TEST_CASE("Concat rejects mismatched shapes, types and axes") {
  const tensor a = f32({2, 2}, {1, 2, 3, 4});
  expect_error<ops::concat>(op("Concat", 13).set("axis", std::int64_t{0}), {in(a), in(f32({1, 3}, {1, 2, 3}))},
                            "input 1 has shape [1,3], which does not match input 0's [2,2] outside axis 0");
  expect_error<ops::concat>(op("Concat", 13).set("axis", std::int64_t{0}), {in(a), in(i64({1, 2}, {1, 2}))},
                            "input 1 is int64 but input 0 is float");
  expect_error<ops::concat>(op("Concat", 13).set("axis", std::int64_t{2}), {in(a), in(a)}, "axis 2 is out of range for rank 2");
  expect_error<ops::concat>(op("Concat", 4).set("axis", std::int64_t{-1}), {in(a), in(a)}, "axis -1 is negative");
  // From opset 4 the axis is required.
  expect_error<ops::concat>(op("Concat", 13), {in(a), in(a)}, "does not support", errc::not_implemented);
}

// ---------------------------------------------------------------------------------------------------------------
// Split

TEST_CASE("Split-13 takes the part sizes from its optional input, else equal parts") {
  const tensor x = f32({6}, iota_f(6, 1));
  auto r = run_kernel<ops::split>(op("Split", 13, 2), {in(x), cst(i64v({2, 4}))});
  REQUIRE(r.has_value());
  check_tensor<float>((*r)[0].as_tensor(), {2}, {1, 2});
  check_tensor<float>((*r)[1].as_tensor(), {4}, {3, 4, 5, 6});
  auto eq = run_kernel<ops::split>(op("Split", 13, 3), {in(x)});
  REQUIRE(eq.has_value());
  check_tensor<float>((*eq)[2].as_tensor(), {2}, {5, 6});
  const tensor m = f32({2, 6}, iota_f(12));
  auto cols = run_kernel<ops::split>(op("Split", 13, 2).set("axis", std::int64_t{-1}), {in(m)});
  REQUIRE(cols.has_value());
  check_tensor<float>((*cols)[0].as_tensor(), {2, 3}, {0, 1, 2, 6, 7, 8});
  check_tensor<float>((*cols)[1].as_tensor(), {2, 3}, {3, 4, 5, 9, 10, 11});
  auto zero = run_kernel<ops::split>(op("Split", 13, 3), {in(f32({0}, {})), in(i64v({0, 0, 0}))});
  REQUIRE(zero.has_value());
  for (const auto& v : *zero) CHECK(sizes_of(v.as_tensor()) == i64s{0});
}

TEST_CASE("Split before opset 13 takes the part sizes from its attribute, a negative axis counts from the end") {
  const tensor m = f32({2, 3}, iota_f(6));
  auto r = run_kernel<ops::split>(op("Split", 11, 2).set("axis", std::int64_t{1}).set("split", i64s{1, 2}), {in(m)});
  REQUIRE(r.has_value());
  check_tensor<float>((*r)[0].as_tensor(), {2, 1}, {0, 3});
  check_tensor<float>((*r)[1].as_tensor(), {2, 2}, {1, 2, 4, 5});
  auto s = run_kernel<ops::split>(op("Split", 2, 2), {in(strs({4}, {"a", "b", "c", "d"}))});
  REQUIRE(s.has_value());
  check_tensor<std::string>((*s)[1].as_tensor(), {2}, {"c", "d"});
  // A negative axis before opset 11 (PyTorch's exporter wrote them): from the end, as later opsets define it.
  auto neg = run_kernel<ops::split>(op("Split", 2, 2).set("axis", std::int64_t{-1}).set("split", i64s{1, 2}), {in(m)});
  REQUIRE(neg.has_value());
  check_tensor<float>((*neg)[0].as_tensor(), {2, 1}, {0, 3});
}

TEST_CASE("Split rejects uneven equal parts and part sizes that do not add up") {
  const tensor x = f32({5}, iota_f(5));
  expect_error<ops::split>(op("Split", 13, 2), {in(x)}, "axis 0 of size 5 cannot be split into 2 equal parts");
  expect_error<ops::split>(op("Split", 13, 2), {in(x), in(i64v({2, 2}))}, "split [2,2] sums to 4, not to the size 5");
  expect_error<ops::split>(op("Split", 13, 2), {in(x), in(i64v({1, 1, 3}))}, "has 3 entries but the node has 2 outputs");
  expect_error<ops::split>(op("Split", 13, 2), {in(x), in(i64v({6, -1}))}, "negative part");
  expect_error<ops::split>(op("Split", 13, 2).set("axis", std::int64_t{1}), {in(x)}, "axis 1 is out of range for rank 1");
}

// ---------------------------------------------------------------------------------------------------------------
// Slice

TEST_CASE("Slice-13 follows the specification's examples") {
  const tensor x = f32({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  check_tensor<float>(run1<ops::slice>(op("Slice", 13), {in(x), in(i64v({1, 0})), in(i64v({2, 3})), in(i64v({0, 1})), in(i64v({1, 2}))}),
                      {1, 2}, {5, 7});
  check_tensor<float>(run1<ops::slice>(op("Slice", 13), {in(x), in(i64v({0, 1})), in(i64v({-1, 1000}))}), {1, 3}, {2, 3, 4});
}

TEST_CASE("Slice with negative steps clamps starts to [0, d-1] and ends to [-1, d-1]") {
  const tensor x = f32({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  constexpr auto max = std::numeric_limits<std::int64_t>::max();
  constexpr auto min = std::numeric_limits<std::int64_t>::min();
  // The whole of axis 1 backwards.
  check_tensor<float>(run1<ops::slice>(op("Slice", 13), {in(x), in(i64v({max})), in(i64v({min})), in(i64v({1})), in(i64v({-1}))}),
                      {2, 4}, {4, 3, 2, 1, 8, 7, 6, 5});
  check_tensor<float>(run1<ops::slice>(op("Slice", 13), {in(x), in(i64v({-1, 3})), in(i64v({-2, 0})), none(), in(i64v({-1, -2}))}),
                      {1, 2}, {8, 6});
  // An end below -d clamps to -1: through index 0.
  check_tensor<float>(run1<ops::slice>(op("Slice", 13), {in(x), in(i64v({-1, 3})), in(i64v({-3, 0})), none(), in(i64v({-1, -2}))}),
                      {2, 2}, {8, 6, 4, 2});
  // Starts beyond the end clamp; a step larger than the dim takes one element.
  check_tensor<float>(run1<ops::slice>(op("Slice", 13), {in(x), in(i64v({1000})), in(i64v({1000})), in(i64v({1})), in(i64v({1}))}),
                      {2, 0}, {});
  check_tensor<float>(run1<ops::slice>(op("Slice", 13), {in(x), in(i64v({3})), in(i64v({-100})), in(i64v({1})), in(i64v({min}))}),
                      {2, 1}, {4, 8});
  check_tensor<float>(run1<ops::slice>(op("Slice", 13), {in(x), in(i64v({0})), in(i64v({max})), in(i64v({-1})), in(i64v({max}))}),
                      {2, 1}, {1, 5});
}

TEST_CASE("Slice matches the backend test's negative-step case on a 3-D tensor") {
  // test_slice_neg_steps: x [20,10,5], starts [20,10,4], ends [0,0,1], axes [0,1,2], steps [-1,-3,-2] -> [19,3,2].
  const auto data = iota_f(1000);
  const tensor y = run1<ops::slice>(op("Slice", 13), {in(f32({20, 10, 5}, data)), in(i64v({20, 10, 4})), in(i64v({0, 0, 1})),
                                                      in(i64v({0, 1, 2})), in(i64v({-1, -3, -2}))});
  REQUIRE(sizes_of(y) == i64s{19, 3, 2});
  const float* p = y.typed<float>();
  std::size_t k = 0;
  for (int i = 19; i > 0; --i)
    for (int j = 9; j > 0; j -= 3)
      for (int l = 4; l > 1; l -= 2) CHECK(p[k++] == data[static_cast<std::size_t>(i * 50 + j * 5 + l)]);
}

TEST_CASE("Slice before opset 10 reads attributes, opset 10 takes int32 inputs") {
  const tensor x = f32({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto kn = op("Slice", 1).set("starts", i64s{0, 1}).set("ends", i64s{-1, 1000});
  check_tensor<float>(run1<ops::slice>(kn, {in(x)}), {1, 3}, {2, 3, 4});
  check_tensor<float>(run1<ops::slice>(op("Slice", 1).set("starts", i64s{1}).set("ends", i64s{3}).set("axes", i64s{1}), {in(x)}),
                      {2, 2}, {2, 3, 6, 7});
  const tensor s32 = make<std::int32_t>({1}, {2});
  const tensor e32 = make<std::int32_t>({1}, {4});
  check_tensor<float>(run1<ops::slice>(op("Slice", 10), {in(x), in(s32), in(e32), in(make<std::int32_t>({1}, {1}))}), {2, 2},
                      {3, 4, 7, 8});
  expect_error<ops::slice>(op("Slice", 10), {in(x), in(s32), in(e32), in(make<std::int32_t>({1}, {-1}))}, "slice axis -1 is negative");
  check_tensor<float>(run1<ops::slice>(op("Slice", 11), {in(x), in(s32), in(e32), in(make<std::int32_t>({1}, {-1}))}), {2, 2},
                      {3, 4, 7, 8});
}

TEST_CASE("Slice of strings and a whole-tensor slice as a view") {
  const tensor s = strs({4}, {"a", "b", "c", "d"});
  check_tensor<std::string>(run1<ops::slice>(op("Slice", 13), {in(s), in(i64v({3})), in(i64v({0})), none(), in(i64v({-2}))}), {2},
                            {"d", "b"});
  const tensor x = f32({2, 2}, {1, 2, 3, 4});
  const tensor all = run1<ops::slice>(op("Slice", 13), {in(x), in(i64v({0})), in(i64v({100}))});
  CHECK(all.data() == x.data());
  check_tensor<float>(all, {2, 2}, {1, 2, 3, 4});
}

TEST_CASE("Slice rejects zero steps, repeated axes and mismatched lengths") {
  const tensor x = f32({2, 4}, iota_f(8));
  expect_error<ops::slice>(op("Slice", 13), {in(x), in(i64v({0})), in(i64v({1})), none(), in(i64v({0}))}, "steps[0] is 0");
  expect_error<ops::slice>(op("Slice", 13), {in(x), in(i64v({0, 0})), in(i64v({1, 1})), in(i64v({1, -1}))}, "name axis -1 twice");
  expect_error<ops::slice>(op("Slice", 13), {in(x), in(i64v({0, 0})), in(i64v({1}))}, "differ in length");
  expect_error<ops::slice>(op("Slice", 13), {in(x), in(i64v({0})), in(i64v({1})), in(i64v({2}))}, "slice axis 2 is out of range");
  // Float starts: not an index type.
  expect_error<ops::slice>(op("Slice", 13), {in(x), in(f32({1}, {0})), in(i64v({1}))}, "does not support", errc::not_implemented);
}

// ---------------------------------------------------------------------------------------------------------------
// Gather

TEST_CASE("Gather follows the specification's examples for axis 0 and 1") {
  const tensor d = f32({3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f});
  check_tensor<float>(run1<ops::gather>(op("Gather", 13), {in(d), in(i64({2, 2}, {0, 1, 1, 2}))}), {2, 2, 2},
                      {1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f});
  const tensor e = f32({3, 3}, {1.0f, 1.2f, 1.9f, 2.3f, 3.4f, 3.9f, 4.5f, 5.7f, 5.9f});
  check_tensor<float>(run1<ops::gather>(op("Gather", 13).set("axis", std::int64_t{1}), {in(e), in(i64({1, 2}, {0, 2}))}),
                      {3, 1, 2}, {1.0f, 1.9f, 2.3f, 3.9f, 4.5f, 5.9f});
  check_tensor<float>(run1<ops::gather>(op("Gather", 13).set("axis", std::int64_t{-1}), {in(e), in(i64({2}, {2, 0}))}), {3, 2},
                      {1.9f, 1.0f, 3.9f, 2.3f, 5.9f, 4.5f});
}

TEST_CASE("Gather wraps negative indices, takes int32 indices and scalar indices") {
  const tensor d = f32({10}, iota_f(10));
  check_tensor<float>(run1<ops::gather>(op("Gather", 13), {in(d), in(i64v({0, -9, -10}))}), {3}, {0, 1, 0});
  check_tensor<float>(run1<ops::gather>(op("Gather", 11), {in(d), in(make<std::int32_t>({2}, {9, -1}))}), {2}, {9, 9});
  const tensor m = f32({3, 2}, iota_f(6));
  check_tensor<float>(run1<ops::gather>(op("Gather", 13), {in(m), in(tensor::scalar(std::int64_t{1}))}), {2}, {2, 3});
  check_tensor<std::string>(run1<ops::gather>(op("Gather", 13), {in(strs({3}, {"a", "b", "c"})), in(i64v({2, 2, 0}))}), {3},
                            {"c", "c", "a"});
  check_tensor<float>(run1<ops::gather>(op("Gather", 13), {in(m), in(i64({0}, {}))}), {0, 2}, {});
}

TEST_CASE("Gather names an out-of-range index") {
  const tensor d = f32({5, 2}, iota_f(10));
  expect_error<ops::gather>(op("Gather", 13), {in(d), in(i64v({0, 4, 5}))},
                            "index 5 (at position 2 of the indices) is out of range for axis 0 of size 5");
  expect_error<ops::gather>(op("Gather", 13), {in(d), in(i64v({-6}))}, "index -6");
  expect_error<ops::gather>(op("Gather", 13).set("axis", std::int64_t{2}), {in(d), in(i64v({0}))}, "axis 2 is out of range for rank 2");
}

TEST_CASE("Gather of embedding rows on two threads") {
  epstack::thread_pool pool(2);
  const std::int64_t vocab = 1000, width = 768;
  std::vector<float> table(static_cast<std::size_t>(vocab * width));
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i);
  std::vector<std::int64_t> ids(256);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>((i * 577) % 1000) - (i % 2 ? 1000 : 0);
  const tensor y = run1<ops::gather>(op("Gather", 13), {cst(f32({vocab, width}, table)), in(i64({2, 128}, ids))}, &pool);
  REQUIRE(sizes_of(y) == i64s{2, 128, width});
  std::vector<float> want;
  for (auto id : ids)
    for (std::int64_t j = 0; j < width; ++j) want.push_back(static_cast<float>((id < 0 ? id + vocab : id) * width + j));
  check_tensor<float>(y, {2, 128, width}, want, 0, 0);
}

// ---------------------------------------------------------------------------------------------------------------
// Expand

TEST_CASE("Expand broadcasts both ways, as numpy does") {
  const tensor x = f32({3, 1}, {1, 2, 3});
  check_tensor<float>(run1<ops::expand>(op("Expand", 13), {in(x), in(i64v({2, 1, 6}))}), {2, 3, 6},
                      {1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
                       1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3});
  check_tensor<float>(run1<ops::expand>(op("Expand", 8), {in(x), in(i64v({3, 4}))}), {3, 4}, {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  check_tensor<float>(run1<ops::expand>(op("Expand", 13), {in(f32({1, 3}, {1, 2, 3})), in(i64v({2, 1}))}), {2, 3}, {1, 2, 3, 1, 2, 3});
  // A shape that changes nothing gives a view.
  const tensor same = run1<ops::expand>(op("Expand", 13), {in(x), in(i64v({1}))});
  CHECK(same.data() == x.data());
  check_tensor<std::string>(run1<ops::expand>(op("Expand", 13), {in(strs({1}, {"s"})), in(i64v({3}))}), {3}, {"s", "s", "s"});
  check_tensor<float>(run1<ops::expand>(op("Expand", 13), {in(x), in(i64v({0, 3, 1}))}), {0, 3, 1}, {});
}

TEST_CASE("Expand rejects incompatible shapes") {
  const tensor x = f32({3}, {1, 2, 3});
  expect_error<ops::expand>(op("Expand", 13), {in(x), in(i64v({4}))}, "cannot expand [3] to [4]");
  expect_error<ops::expand>(op("Expand", 13), {in(x), in(i64v({-1, 3}))}, "negative dimension");
}

// ---------------------------------------------------------------------------------------------------------------
// Cast

TEST_CASE("Cast between numeric types truncates toward zero and saturates floating point to integers") {
  auto to = [](element_type e) { return op("Cast", 13).set("to", static_cast<std::int64_t>(e)); };
  const tensor x = f32({6}, {1.7f, -1.7f, 3e9f, -3e9f, std::nanf(""), 0.f});
  check_tensor<std::int32_t>(run1<ops::cast>(to(element_type::int32), {in(x)}), {6},
                             {1, -1, std::numeric_limits<std::int32_t>::max(), std::numeric_limits<std::int32_t>::min(), 0, 0});
  check_tensor<std::uint8_t>(run1<ops::cast>(to(element_type::uint8), {in(x)}), {6}, {1, 0, 255, 0, 0, 0});
  check_tensor<bool>(run1<ops::cast>(to(element_type::boolean), {in(x)}), {6}, {true, true, true, true, true, false});
  // Integers narrow modulo 2^bits, as C++ and numpy do.
  check_tensor<std::int8_t>(run1<ops::cast>(to(element_type::int8), {in(i64v({300, -129, 5}))}), {3}, {44, 127, 5});
  check_tensor<double>(run1<ops::cast>(to(element_type::float64), {in(make<bool>({2}, {true, false}))}), {2}, {1.0, 0.0});
  check_exact<float>(run1<ops::cast>(to(element_type::float32), {in(make<double>({2}, {1e300, 0.5}))}), {2},
                     {std::numeric_limits<float>::infinity(), 0.5f});
  check_tensor<std::int64_t>(run1<ops::cast>(to(element_type::int64), {in(make<std::uint64_t>({1}, {7}))}), {1}, {7});
}

TEST_CASE("Cast to float16 rounds to nearest, to bfloat16 truncates before opset 19 and rounds from it") {
  auto to = [](element_type e) { return op("Cast", 13).set("to", static_cast<std::int64_t>(e)); };
  const tensor x = f32({3}, {1.0f, 0.1f, 65504.0f});
  const tensor h = run1<ops::cast>(to(element_type::float16), {in(x)});
  REQUIRE(h.type() == element_type::float16);
  CHECK(h.typed<float16>()[0].bits == 0x3c00);
  CHECK(h.typed<float16>()[1].bits == 0x2e66);
  CHECK(h.typed<float16>()[2].bits == 0x7bff);
  check_tensor<float>(run1<ops::cast>(to(element_type::float32), {in(h)}), {3}, {1.0f, 0.0999755859375f, 65504.0f}, 0, 0);
  const tensor b = run1<ops::cast>(to(element_type::bfloat16), {in(x)});
  CHECK(b.typed<bfloat16>()[0].bits == 0x3f80);
  CHECK(b.typed<bfloat16>()[1].bits == 0x3dcc);  // 0.1 = 0x3dcccccd: truncated (ONNX 1.12's reference)
  check_tensor<std::int32_t>(run1<ops::cast>(to(element_type::int32), {in(b)}), {3}, {1, 0, 65280});
  const tensor b19 = run1<ops::cast>(op("Cast", 19).set("to", static_cast<std::int64_t>(element_type::bfloat16)), {in(x)});
  CHECK(b19.typed<bfloat16>()[1].bits == 0x3dcd);  // rounded to nearest even (opset 19)
  check_tensor<std::int32_t>(run1<ops::cast>(to(element_type::int32), {in(b19)}), {3}, {1, 0, 65536});
  const tensor hb = run1<ops::cast>(to(element_type::float16), {in(b)});
  CHECK(hb.typed<float16>()[0].bits == 0x3c00);
  check_tensor<double>(run1<ops::cast>(to(element_type::float64), {in(make<std::int16_t>({1}, {-3}))}), {1}, {-3.0});
  const tensor same = run1<ops::cast>(to(element_type::float32), {in(x)});
  CHECK(same.data() == x.data());
}

TEST_CASE("Cast to string prints the shortest round-trip form, from string parses numbers and INF/NaN") {
  auto to = [](element_type e) { return op("Cast", 13).set("to", static_cast<std::int64_t>(e)); };
  const tensor x = f32({6}, {0.9767611f, 0.039187793f, 1e20f, -std::numeric_limits<float>::infinity(), std::nanf(""), 3.f});
  check_tensor<std::string>(run1<ops::cast>(to(element_type::string), {in(x)}), {6},
                            {"0.9767611", "0.039187793", "1e+20", "-INF", "NaN", "3"});
  check_tensor<std::string>(run1<ops::cast>(to(element_type::string), {in(i64v({-12, 0}))}), {2}, {"-12", "0"});
  check_tensor<std::string>(run1<ops::cast>(to(element_type::string), {in(make<bool>({2}, {true, false}))}), {2}, {"1", "0"});
  const tensor s = strs({6}, {"0.47892547", "NaN", "INF", "+INF", "-INF", " 1e-5 "});
  check_exact<float>(run1<ops::cast>(to(element_type::float32), {in(s)}), {6},
                     {0.47892547f, std::nanf(""), std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 1e-5f});
  check_tensor<std::int64_t>(run1<ops::cast>(to(element_type::int64), {in(strs({3}, {"1000", "100.5", "-7"}))}), {3}, {1000, 100, -7});
  check_tensor<bool>(run1<ops::cast>(to(element_type::boolean), {in(strs({4}, {"true", "False", "0", "2"}))}), {4},
                     {true, false, false, true});
  check_exact<double>(run1<ops::cast>(to(element_type::float64), {in(strs({2}, {"1e400", "-1e-400"}))}), {2},
                      {std::numeric_limits<double>::infinity(), -0.0});
  const tensor hs = run1<ops::cast>(to(element_type::float16), {in(strs({1}, {"0.5"}))});
  CHECK(hs.typed<float16>()[0].bits == 0x3800);
  expect_error<ops::cast>(to(element_type::float32), {in(strs({2}, {"1", "Hello"}))}, "element 1 (\"Hello\") is not a float value");
}

TEST_CASE("Cast-1 names the target type with a string") {
  check_tensor<std::int32_t>(run1<ops::cast>(op("Cast", 1).set("to", std::string("INT32")), {in(f32({2}, {2.5f, -2.5f}))}), {2},
                             {2, -2});
  check_tensor<double>(run1<ops::cast>(op("Cast", 1).set("to", std::string("double")), {in(f32({1}, {0.5f}))}), {1}, {0.5});
  expect_error<ops::cast>(op("Cast", 1).set("to", std::string("QUATERNION")), {in(f32({1}, {0.5f}))}, "does not support",
                          errc::not_implemented);
  expect_error<ops::cast>(op("Cast", 13).set("to", std::int64_t{14}), {in(f32({1}, {0.5f}))}, "does not support",
                          errc::not_implemented);
}

// ---------------------------------------------------------------------------------------------------------------
// Constant, ConstantOfShape, Range

TEST_CASE("Constant emits a copy of its value attribute") {
  const tensor v = i64({2, 2}, {1, 2, 3, 4});
  const tensor y = run1<ops::constant>(op("Constant", 13).set("value", v), {});
  check_tensor<std::int64_t>(y, {2, 2}, {1, 2, 3, 4});
  CHECK(y.data() != v.data());
  check_tensor<std::string>(run1<ops::constant>(op("Constant", 9).set("value", strs({1}, {"s"})), {}), {1}, {"s"});
}

TEST_CASE("Constant-12 value_* attributes give scalars and 1-D tensors") {
  check_tensor<float>(run1<ops::constant>(op("Constant", 12).set("value_float", 1.5f), {}), {}, {1.5f});
  check_tensor<float>(run1<ops::constant>(op("Constant", 13).set("value_floats", std::vector<float>{1.f, 2.f}), {}), {2}, {1.f, 2.f});
  check_tensor<std::int64_t>(run1<ops::constant>(op("Constant", 13).set("value_int", std::int64_t{7}), {}), {}, {7});
  check_tensor<std::int64_t>(run1<ops::constant>(op("Constant", 13).set("value_ints", i64s{3, 4, 5}), {}), {3}, {3, 4, 5});
  check_tensor<std::string>(run1<ops::constant>(op("Constant", 13).set("value_string", std::string("hi")), {}), {}, {"hi"});
  check_tensor<std::string>(
      run1<ops::constant>(op("Constant", 13).set("value_strings", std::vector<std::string>{"a", "b"}), {}), {2}, {"a", "b"});
  // value_* do not exist before opset 12; no value at all is not supported.
  expect_error<ops::constant>(op("Constant", 11).set("value_float", 1.5f), {}, "does not support", errc::not_implemented);
  expect_error<ops::constant>(op("Constant", 13), {}, "does not support", errc::not_implemented);
}

TEST_CASE("Constant sparse_value becomes a dense tensor") {
  sparse_tensor s;
  s.values = f32({2}, {5.f, 6.f});
  s.indices = i64({2, 2}, {0, 1, 1, 2});
  s.dims = {2, 3};
  check_tensor<float>(run1<ops::constant>(op("Constant", 13).set("sparse_value", s), {}), {2, 3}, {0, 5, 0, 0, 0, 6});
  sparse_tensor lin;
  lin.values = i64v({9});
  lin.indices = i64v({3});
  lin.dims = {4};
  check_tensor<std::int64_t>(run1<ops::constant>(op("Constant", 11).set("sparse_value", lin), {}), {4}, {0, 0, 0, 9});
  lin.indices = i64v({4});
  expect_error<ops::constant>(op("Constant", 11).set("sparse_value", lin), {}, "does not support", errc::not_implemented);
}

TEST_CASE("ConstantOfShape fills the shape with its value, default float 0") {
  check_tensor<float>(run1<ops::constant_of_shape>(op("ConstantOfShape", 9), {in(i64v({2, 3}))}), {2, 3}, {0, 0, 0, 0, 0, 0});
  auto kn = op("ConstantOfShape", 9).set("value", make<std::int32_t>({1}, {7}));
  check_tensor<std::int32_t>(run1<ops::constant_of_shape>(kn, {in(i64v({2}))}), {2}, {7, 7});
  check_tensor<std::int32_t>(run1<ops::constant_of_shape>(kn, {in(i64v({0}))}), {0}, {});
  check_tensor<std::int32_t>(run1<ops::constant_of_shape>(kn, {in(i64({0}, {}))}), {}, {7});
  check_tensor<bool>(run1<ops::constant_of_shape>(op("ConstantOfShape", 9).set("value", make<bool>({1}, {true})), {in(i64v({2}))}),
                     {2}, {true, true});
  const tensor h = run1<ops::constant_of_shape>(op("ConstantOfShape", 9).set("value", make<float16>({1}, {float16(1.f)})),
                                                {in(i64v({1}))});
  CHECK(h.typed<float16>()[0].bits == 0x3c00);
  expect_error<ops::constant_of_shape>(op("ConstantOfShape", 9), {in(i64v({2, -1}))}, "the shape [2,-1] has a negative dimension");
  expect_error<ops::constant_of_shape>(op("ConstantOfShape", 9).set("value", f32({2}, {1, 2})), {in(i64v({2}))},
                                       "does not support", errc::not_implemented);
}

TEST_CASE("Range counts max(ceil((limit - start) / delta), 0) elements") {
  check_tensor<std::int32_t>(run1<ops::range>(op("Range", 11), {in(tensor::scalar(std::int32_t{10})), in(tensor::scalar(std::int32_t{6})),
                                                                  in(tensor::scalar(std::int32_t{-3}))}),
                             {2}, {10, 7});
  check_tensor<float>(run1<ops::range>(op("Range", 11), {in(tensor::scalar(1.f)), in(tensor::scalar(5.f)), in(tensor::scalar(2.f))}),
                      {2}, {1.f, 3.f});
  check_tensor<double>(run1<ops::range>(op("Range", 11), {in(tensor::scalar(0.0)), in(tensor::scalar(1.0)), in(tensor::scalar(0.25))}),
                       {4}, {0, 0.25, 0.5, 0.75});
  check_tensor<std::int64_t>(run1<ops::range>(op("Range", 11), {cst(tensor::scalar(std::int64_t{3})), cst(tensor::scalar(std::int64_t{9})),
                                                                  cst(tensor::scalar(std::int64_t{3}))}),
                             {2}, {3, 6});
  check_tensor<std::int16_t>(run1<ops::range>(op("Range", 11), {in(tensor::scalar(std::int16_t{5})), in(tensor::scalar(std::int16_t{1})),
                                                                  in(tensor::scalar(std::int16_t{1}))}),
                             {0}, {});
  constexpr auto max = std::numeric_limits<std::int64_t>::max();
  constexpr auto min = std::numeric_limits<std::int64_t>::min();
  check_tensor<std::int64_t>(run1<ops::range>(op("Range", 11), {in(tensor::scalar(min)), in(tensor::scalar(max)), in(tensor::scalar(max))}),
                             {3}, {min, -1, max - 1});
  expect_error<ops::range>(op("Range", 11), {in(tensor::scalar(1.f)), in(tensor::scalar(5.f)), in(tensor::scalar(0.f))}, "delta is 0");
  expect_error<ops::range>(op("Range", 11), {in(tensor::scalar(1.f)), in(tensor::scalar(5.f)), in(tensor::scalar(1.0))},
                           "delta is double but start is float");
  expect_error<ops::range>(op("Range", 11), {in(tensor::scalar(std::uint8_t{1})), in(tensor::scalar(std::uint8_t{5})),
                                             in(tensor::scalar(std::uint8_t{1}))},
                           "does not support", errc::not_implemented);
}

// ---------------------------------------------------------------------------------------------------------------
// Threads

TEST_CASE("Data movement split across two threads gives the single-thread results") {
  epstack::thread_pool pool(2);
  const i64s dims{64, 48, 40};
  std::vector<float> x(64 * 48 * 40);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 9973);
  const tensor t = f32(dims, x);
  auto both = [&](const kernel_node& kn, const std::vector<kernel_input>& inputs) {
    const tensor a = run1<ops::slice>(kn, inputs);
    const tensor b = run1<ops::slice>(kn, inputs, &pool);
    CHECK(a.same_content(b));
  };
  both(op("Slice", 13), {in(t), in(i64v({60, 1})), in(i64v({0, 47})), in(i64v({0, 2})), in(i64v({-1, 1}))});
  const tensor c1 = run1<ops::concat>(op("Concat", 13).set("axis", std::int64_t{1}), {in(t), in(t)});
  const tensor c2 = run1<ops::concat>(op("Concat", 13).set("axis", std::int64_t{1}), {in(t), in(t)}, &pool);
  CHECK(c1.same_content(c2));
  CHECK(sizes_of(c2) == i64s{64, 96, 40});
  const tensor c3 = run1<ops::concat>(op("Concat", 13).set("axis", std::int64_t{0}), {in(t), in(t)}, &pool);
  CHECK(std::equal(x.begin(), x.end(), c3.typed<float>() + x.size()));
  std::vector<float> big(256 * 48 * 40);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 8191);
  const tensor tb = f32({256, 48, 40}, big);
  auto s1 = run_kernel<ops::split>(op("Split", 13, 2).set("axis", std::int64_t{1}), {in(tb)});
  auto s2 = run_kernel<ops::split>(op("Split", 13, 2).set("axis", std::int64_t{1}), {in(tb)}, &pool);
  REQUIRE(s1.has_value());
  REQUIRE(s2.has_value());
  CHECK((*s1)[0].as_tensor().same_content((*s2)[0].as_tensor()));
  CHECK((*s1)[1].as_tensor().same_content((*s2)[1].as_tensor()));
  CHECK((*s2)[1].as_tensor().typed<float>()[0] == big[24 * 40]);
  const tensor e1 = run1<ops::expand>(op("Expand", 13), {in(f32({1, 40}, iota_f(40))), in(i64v({3000, 40}))});
  const tensor e2 = run1<ops::expand>(op("Expand", 13), {in(f32({1, 40}, iota_f(40))), in(i64v({3000, 40}))}, &pool);
  CHECK(e1.same_content(e2));
  auto to_i32 = op("Cast", 13).set("to", static_cast<std::int64_t>(element_type::int32));
  const tensor k = run1<ops::cast>(to_i32, {in(t)}, &pool);
  CHECK(k.typed<std::int32_t>()[x.size() - 1] == static_cast<std::int32_t>(x.back()));
  const tensor r = run1<ops::range>(op("Range", 11), {in(tensor::scalar(std::int64_t{0})), in(tensor::scalar(std::int64_t{100000})),
                                                       in(tensor::scalar(std::int64_t{1}))}, &pool);
  CHECK(r.typed<std::int64_t>()[99999] == 99999);
}
