// Tests of the CPU Constant, ConstantOfShape and Range kernels (constant_ops.cpp).
#include "tensor_support.hpp"

using namespace epstack;
using namespace epstack::test;
using namespace epstack::test::tensor_ops;

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
