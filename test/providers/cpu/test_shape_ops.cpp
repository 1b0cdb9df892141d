// Tests of the CPU shape kernels (shape_ops.cpp): Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout, Shape,
// Size, one node at a time, against hand-computed values and the cases of the ONNX specification.
#include "tensor_support.hpp"

using namespace epstack;
using namespace epstack::test;
using namespace epstack::test::tensor_ops;

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
