// Tests of the CPU Tile and Pad kernels (pad_tile.cpp): the backend cases, numpy.pad modes (wrap too), Pad-18's axes,
// opsets, types, errors.
#include "misc_support.hpp"

using namespace epstack;
using namespace epstack::test;
using namespace epstack::test::misc;

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

// ---------------------------------------------------------------------------------------------------------------
// Pad-18+: the axes input; Pad-19+: wrap

namespace {
/// ONNX 1.22 backend test data of Pad's axes input and wrap mode, extracted with /usr/bin/python3 and
/// onnx.numpy_helper; an omitted input is {}.
std::vector<backend_case> pad19_backend_cases() {
  std::vector<backend_case> cases;
  {
    backend_case c;
    c.name = "test_constant_pad_axes";
    c.node = op("Pad", 25);
    c.node.set("mode", std::string("constant"));
    c.inputs.push_back({tensor::from<float>({1,3,4,5}, {1.76405239f, 0.400157213f, 0.97873801f, 2.24089313f, 1.867558f, -0.977277875f, 0.950088441f, -0.151357204f, -0.103218853f, 0.410598516f, 0.144043565f, 1.45427346f, 0.761037707f, 0.121675014f, 0.443863243f, 0.333674341f, 1.49407911f, -0.205158263f, 0.313067704f, -0.854095757f, -2.55298972f, 0.653618574f, 0.864436209f, -0.742165029f, 2.26975465f, -1.45436573f, 0.0457585156f, -0.187183857f, 1.53277922f, 1.4693588f, 0.15494743f, 0.378162533f, -0.887785733f, -1.98079646f, -0.347912163f, 0.156348974f, 1.23029065f, 1.20237982f, -0.387326807f, -0.302302748f, -1.04855299f, -1.42001796f, -1.70627022f, 1.95077538f, -0.509652197f, -0.438074291f, -1.25279534f, 0.777490377f, -1.6138978f, -0.212740287f, -0.895466566f, 0.386902511f, -0.51080513f, -1.18063223f, -0.028182229f, 0.428331882f, 0.0665172189f, 0.302471906f, -0.634322107f, -0.362741172f})});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {0, 3, 0, 4})});
    c.inputs.push_back({tensor::from<float>({}, {1.20000005f})});
    c.inputs.push_back({tensor::from<std::int64_t>({2}, {1, 3})});
    c.expected = tensor::from<float>({1,3,4,12}, {1.20000005f, 1.20000005f, 1.20000005f, 1.76405239f, 0.400157213f, 0.97873801f, 2.24089313f, 1.867558f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, -0.977277875f, 0.950088441f, -0.151357204f, -0.103218853f, 0.410598516f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 0.144043565f, 1.45427346f, 0.761037707f, 0.121675014f, 0.443863243f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 0.333674341f, 1.49407911f, -0.205158263f, 0.313067704f, -0.854095757f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, -2.55298972f, 0.653618574f, 0.864436209f, -0.742165029f, 2.26975465f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, -1.45436573f, 0.0457585156f, -0.187183857f, 1.53277922f, 1.4693588f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 0.15494743f, 0.378162533f, -0.887785733f, -1.98079646f, -0.347912163f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 0.156348974f, 1.23029065f, 1.20237982f, -0.387326807f, -0.302302748f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, -1.04855299f, -1.42001796f, -1.70627022f, 1.95077538f, -0.509652197f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, -0.438074291f, -1.25279534f, 0.777490377f, -1.6138978f, -0.212740287f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, -0.895466566f, 0.386902511f, -0.51080513f, -1.18063223f, -0.028182229f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 0.428331882f, 0.0665172189f, 0.302471906f, -0.634322107f, -0.362741172f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_constant_pad_negative_axes";
    c.node = op("Pad", 25);
    c.node.set("mode", std::string("constant"));
    c.inputs.push_back({tensor::from<float>({1,3,4,5}, {1.76405239f, 0.400157213f, 0.97873801f, 2.24089313f, 1.867558f, -0.977277875f, 0.950088441f, -0.151357204f, -0.103218853f, 0.410598516f, 0.144043565f, 1.45427346f, 0.761037707f, 0.121675014f, 0.443863243f, 0.333674341f, 1.49407911f, -0.205158263f, 0.313067704f, -0.854095757f, -2.55298972f, 0.653618574f, 0.864436209f, -0.742165029f, 2.26975465f, -1.45436573f, 0.0457585156f, -0.187183857f, 1.53277922f, 1.4693588f, 0.15494743f, 0.378162533f, -0.887785733f, -1.98079646f, -0.347912163f, 0.156348974f, 1.23029065f, 1.20237982f, -0.387326807f, -0.302302748f, -1.04855299f, -1.42001796f, -1.70627022f, 1.95077538f, -0.509652197f, -0.438074291f, -1.25279534f, 0.777490377f, -1.6138978f, -0.212740287f, -0.895466566f, 0.386902511f, -0.51080513f, -1.18063223f, -0.028182229f, 0.428331882f, 0.0665172189f, 0.302471906f, -0.634322107f, -0.362741172f})});
    c.inputs.push_back({tensor::from<std::int64_t>({4}, {0, 3, 0, 4})});
    c.inputs.push_back({tensor::from<float>({}, {1.20000005f})});
    c.inputs.push_back({tensor::from<std::int64_t>({2}, {-3, -1})});
    c.expected = tensor::from<float>({1,3,4,12}, {1.20000005f, 1.20000005f, 1.20000005f, 1.76405239f, 0.400157213f, 0.97873801f, 2.24089313f, 1.867558f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, -0.977277875f, 0.950088441f, -0.151357204f, -0.103218853f, 0.410598516f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 0.144043565f, 1.45427346f, 0.761037707f, 0.121675014f, 0.443863243f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 0.333674341f, 1.49407911f, -0.205158263f, 0.313067704f, -0.854095757f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, -2.55298972f, 0.653618574f, 0.864436209f, -0.742165029f, 2.26975465f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, -1.45436573f, 0.0457585156f, -0.187183857f, 1.53277922f, 1.4693588f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 0.15494743f, 0.378162533f, -0.887785733f, -1.98079646f, -0.347912163f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 0.156348974f, 1.23029065f, 1.20237982f, -0.387326807f, -0.302302748f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, -1.04855299f, -1.42001796f, -1.70627022f, 1.95077538f, -0.509652197f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, -0.438074291f, -1.25279534f, 0.777490377f, -1.6138978f, -0.212740287f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, -0.895466566f, 0.386902511f, -0.51080513f, -1.18063223f, -0.028182229f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f, 0.428331882f, 0.0665172189f, 0.302471906f, -0.634322107f, -0.362741172f, 1.20000005f, 1.20000005f, 1.20000005f, 1.20000005f});
    cases.push_back(std::move(c));
  }
  {
    backend_case c;
    c.name = "test_wrap_pad";
    c.node = op("Pad", 25);
    c.node.set("mode", std::string("wrap"));
    c.inputs.push_back({tensor::from<std::int32_t>({1,3,4,5}, {0, -1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1, 0, 0, 0, 2, 0, 0, 1, -1, 0, 0, 1, 0, 0, 0, 0, 1, -1, -1, 0, 0, 1, 0, 0, -1, 0, -1, -1, 1, 0, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0})});
    c.inputs.push_back({tensor::from<std::int64_t>({8}, {0, 0, 1, 1, 0, 0, 1, 1})});
    c.expected = tensor::from<std::int32_t>({1,3,6,7}, {-1, 0, 0, 0, 0, -1, 0, 0, 0, -1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 0, -1, 0, 0, 0, -1, 0, 1, 0, 0, 0, 0, 1, -1, -1, 0, 0, 2, -1, 0, 0, 0, 2, -1, 0, 0, 0, 1, -1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, -1, -1, 0, 0, 2, -1, 0, 0, 0, 2, -1, 0, 0, 0, 0, 0, 0, 0, -1, 0, 1, 0, 0, -1, 0, 0, 0, -1, -1, 1, 0, 0, -1, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 1, 0, 0, -1, 0});
    cases.push_back(std::move(c));
  }
  return cases;
}
}  // namespace

TEST_CASE("Pad-25 matches the ONNX 1.22 backend cases of axes (positive and negative) and wrap") {
  const auto cases = pad19_backend_cases();
  REQUIRE(cases.size() == 3);
  check_backend_case<ops::pad, float>(cases[0], 0);
  check_backend_case<ops::pad, float>(cases[1], 0);
  check_backend_case<ops::pad, std::int32_t>(cases[2], 0);
}

TEST_CASE("Pad-18 axes: pads for the listed axes only, negative axes, int32 axes, the others left alone") {
  const tensor x = make<std::int32_t>({3, 4}, iota12());
  const tensor nine = tensor::scalar<std::int32_t>(9);
  const std::vector<std::int32_t> want{9, 1, 2, 3, 4, 9, 9, 9, 5, 6, 7, 8, 9, 9, 9, 9, 10, 11, 12, 9, 9};
  check_tensor<std::int32_t>(run1<ops::pad>(op("Pad", 18), {{x}, {make<i64>({2}, {1, 2})}, {nine}, {make<i64>({1}, {1})}}), {3, 7}, want);
  check_tensor<std::int32_t>(run1<ops::pad>(op("Pad", 18), {{x}, {make<i64>({2}, {1, 2})}, {nine}, {make<i64>({1}, {-1})}}), {3, 7}, want);
  check_tensor<std::int32_t>(run1<ops::pad>(op("Pad", 21), {{x}, {make<i64>({2}, {1, 2})}, {nine}, {make<std::int32_t>({1}, {-1})}}), {3, 7}, want);
  // Axes in any order: [1, 0] with pads [b1, b0, e1, e0] (edge mode, no constant_value).
  check_tensor<std::int32_t>(run1<ops::pad>(op("Pad", 18).set("mode", std::string("edge")),
                                            {{x}, {make<i64>({4}, {1, 0, 0, 1})}, {}, {make<i64>({2}, {1, 0})}}),
                             {4, 5}, {1, 1, 2, 3, 4, 5, 5, 6, 7, 8, 9, 9, 10, 11, 12, 9, 9, 10, 11, 12});
  // Without axes at opset 18: every axis, as before.
  check_tensor<std::int32_t>(run1<ops::pad>(op("Pad", 18), {{x}, {make<i64>({4}, {0, 0, 0, 1})}}), {3, 5},
                             {1, 2, 3, 4, 0, 5, 6, 7, 8, 0, 9, 10, 11, 12, 0});
}

TEST_CASE("Pad-19 wrap: the spec's example, padding longer than the data, cropping first, strings") {
  const tensor x = make<float>({3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f});
  check_tensor<float>(run1<ops::pad>(op("Pad", 19).set("mode", std::string("wrap")), {{x}, {make<i64>({4}, {2, 1, 1, 1})}}), {6, 4},
                      {3.4f, 2.3f, 3.4f, 2.3f, 5.7f, 4.5f, 5.7f, 4.5f, 1.2f, 1.0f, 1.2f, 1.0f,
                       3.4f, 2.3f, 3.4f, 2.3f, 5.7f, 4.5f, 5.7f, 4.5f, 1.2f, 1.0f, 1.2f, 1.0f}, 0, 0);
  const kernel_node wrap = op("Pad", 19).set("mode", std::string("wrap"));
  // numpy.pad(wrap) repeats the data as often as needed: position j is data[(j - 4) mod 3].
  check_tensor<float>(run1<ops::pad>(wrap, {{make<float>({3}, {1, 2, 3})}, {make<i64>({2}, {4, 5})}}), {12},
                      {3, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2}, 0, 0);
  // A negative pad crops first, then the kept part wraps (as the other modes).
  check_tensor<float>(run1<ops::pad>(wrap, {{make<float>({4}, {1, 2, 3, 4})}, {make<i64>({2}, {-1, 2})}}), {5}, {2, 3, 4, 2, 3}, 0, 0);
  // With axes, and on strings.
  const tensor s = run1<ops::pad>(wrap, {{make<std::string>({1, 2}, {"a", "b"})}, {make<i64>({2}, {1, 2})}, {}, {make<i64>({1}, {-1})}});
  CHECK(values_of<std::string>(s) == std::vector<std::string>{"b", "a", "b", "a", "b"});
}

TEST_CASE("Pad-18/19 errors: pads against the axes, axes out of range or repeated, wrap of an empty axis") {
  const tensor x = make<float>({2, 2}, {1, 2, 3, 4});
  check_fails<ops::pad>(op("Pad", 18), {{x}, {make<i64>({4}, {1, 1, 1, 1})}, {}, {make<i64>({1}, {0})}},
                        "pads has 4 values; expected 2 * the 1 axes = 2");
  check_fails<ops::pad>(op("Pad", 18), {{x}, {make<i64>({2}, {1, 1})}, {}, {make<i64>({1}, {2})}}, "axes: axis 2 is out of range");
  check_fails<ops::pad>(op("Pad", 18), {{x}, {make<i64>({4}, {1, 1, 1, 1})}, {}, {make<i64>({2}, {1, -1})}}, "axes: axis -1 is repeated");
  check_fails<ops::pad>(op("Pad", 18).set("mode", std::string("wrap")), {{x}, {make<i64>({4}, {0, 0, 0, 0})}}, "unknown mode 'wrap'");
  check_fails<ops::pad>(op("Pad", 19).set("mode", std::string("wrap")), {{make<float>({0, 2}, {})}, {make<i64>({4}, {1, 0, 0, 0})}},
                        "no elements to pad from in wrap mode");
}
