// Tests of the CPU Cast kernel (cast.cpp): numeric conversions, float16/bfloat16 rounding, strings, Cast-1.
#include "tensor_support.hpp"

using namespace epstack;
using namespace epstack::test;
using namespace epstack::test::tensor_ops;

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
