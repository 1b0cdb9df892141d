// Tests of the CPU kernels of string_ops.cpp (StringConcat, StringSplit, RegexFullMatch) and ml_ops.cpp
// (TreeEnsemble, LabelEncoder, Binarizer, ArrayFeatureExtractor): the ONNX backend cases pasted as literals,
// hand-computed values, and errors. (ImageDecoder: test_image_decoder.cpp.)
#include "misc_support.hpp"

#include <array>
#include <cmath>
#include <cstring>

using namespace epstack;
using namespace epstack::test;
using namespace epstack::test::misc;

namespace {

using strs = std::vector<std::string>;
using bytes = std::vector<std::uint8_t>;

tensor str_tensor(const ints& dims, const strs& v) { return make<std::string>(dims, v); }

kernel_node ml(std::string type, int opset) { return kernel_node(std::move(type), opset, "ai.onnx.ml"); }

}  // namespace

// =================================================================================================================
// StringConcat

TEST_CASE("StringConcat: element-wise, broadcast, scalars, UTF-8 and empty strings (backend test_string_concat*)") {
  const kernel_node kn = op("StringConcat", 20);
  check_tensor<std::string>(run1<ops::string_concat>(kn, {{str_tensor({2}, {"abc", "def"})}, {str_tensor({2}, {".com", ".net"})}}),
                            {2}, {"abc.com", "def.net"});
  check_tensor<std::string>(run1<ops::string_concat>(kn, {{str_tensor({3}, {"cat", "dog", "snake"})}, {str_tensor({1}, {"s"})}}),
                            {3}, {"cats", "dogs", "snakes"});
  check_tensor<std::string>(run1<ops::string_concat>(kn, {{str_tensor({2}, {"abc", ""})}, {str_tensor({2}, {"", "abc"})}}), {2},
                            {"abc", "abc"});
  check_tensor<std::string>(run1<ops::string_concat>(kn, {{str_tensor({2}, {"的", "中"})}, {str_tensor({2}, {"的", "中"})}}), {2},
                            {"的的", "中中"});
  check_tensor<std::string>(run1<ops::string_concat>(kn, {{tensor::scalar<std::string>("cat")}, {tensor::scalar<std::string>("s")}}),
                            {}, {"cats"});
}

TEST_CASE("StringConcat broadcasts both ways ([2, 1] + [3] -> [2, 3]) and rejects incompatible shapes") {
  const kernel_node kn = op("StringConcat", 20);
  check_tensor<std::string>(run1<ops::string_concat>(kn, {{str_tensor({2, 1}, {"a", "b"})}, {str_tensor({3}, {"1", "2", "3"})}}),
                            {2, 3}, {"a1", "a2", "a3", "b1", "b2", "b3"});
  check_tensor<std::string>(run1<ops::string_concat>(kn, {{str_tensor({0}, {})}, {str_tensor({1}, {"x"})}}), {0}, {});
  check_fails<ops::string_concat>(kn, {{str_tensor({2}, {"a", "b"})}, {str_tensor({3}, {"1", "2", "3"})}}, "cannot be broadcast");
}

// =================================================================================================================
// StringSplit

namespace {
std::pair<tensor, tensor> split(const kernel_node& kn, const tensor& x) {
  kernel_node k = kn;
  k.outputs = 2;
  auto r = run_kernel<ops::string_split>(k, {{x}});
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  return {(*r)[0].as_tensor(), (*r)[1].as_tensor()};
}
}  // namespace

TEST_CASE("StringSplit: the backend cases (basic, consecutive delimiters, whitespace, maxsplit, empty tensor)") {
  {
    auto [y, z] = split(op("StringSplit", 20).set("delimiter", std::string(".")), str_tensor({2}, {"abc.com", "def.net"}));
    check_tensor<std::string>(y, {2, 2}, {"abc", "com", "def", "net"});
    check_tensor<i64>(z, {2}, {2, 2});
  }
  {
    auto [y, z] = split(op("StringSplit", 20).set("delimiter", std::string("-")), str_tensor({2}, {"o-n-n--x-", "o-n----nx"}));
    check_tensor<std::string>(y, {2, 6}, {"o", "n", "n", "", "x", "", "o", "n", "", "", "", "nx"});
    check_tensor<i64>(z, {2}, {6, 6});
  }
  const tensor ws = str_tensor({3}, {"hello world !", "  hello   world !", " hello world   ! "});
  for (const kernel_node& kn : {op("StringSplit", 20).set("delimiter", std::string("")), op("StringSplit", 20)}) {
    auto [y, z] = split(kn, ws);
    check_tensor<std::string>(y, {3, 3}, {"hello", "world", "!", "hello", "world", "!", "hello", "world", "!"});
    check_tensor<i64>(z, {3}, {3, 3, 3});
  }
  {
    auto [y, z] = split(op("StringSplit", 20).set("maxsplit", i64{2}),
                        str_tensor({2, 2}, {"hello world", "def.net", "o n n x", "the quick brown fox"}));
    check_tensor<std::string>(y, {2, 2, 3},
                              {"hello", "world", "", "def.net", "", "", "o", "n", "n x", "the", "quick", "brown fox"});
    check_tensor<i64>(z, {2, 2}, {2, 1, 3, 3});
  }
  {
    auto [y, z] = split(op("StringSplit", 20), str_tensor({0}, {}));
    check_tensor<std::string>(y, {0, 0}, {});
    check_tensor<i64>(z, {0}, {});
  }
}

TEST_CASE("StringSplit follows Python's str.split: empty strings, maxsplit 0, multi-byte delimiters, Unicode spaces") {
  {  // "".split("-") == [""]; "".split() == []; "   ".split() == []
    auto [y, z] = split(op("StringSplit", 20).set("delimiter", std::string("-")), str_tensor({2}, {"", "a-"}));
    check_tensor<std::string>(y, {2, 2}, {"", "", "a", ""});
    check_tensor<i64>(z, {2}, {1, 2});
    auto [y2, z2] = split(op("StringSplit", 20), str_tensor({3}, {"", "   ", "\ta\n\r b\v\f"}));
    check_tensor<std::string>(y2, {3, 2}, {"", "", "", "", "a", "b"});
    check_tensor<i64>(z2, {3}, {0, 0, 2});
  }
  {  // maxsplit 0 keeps the string whole (whitespace mode strips only the leading run)
    auto [y, z] = split(op("StringSplit", 20).set("maxsplit", i64{0}), str_tensor({1}, {"  a b  "}));
    check_tensor<std::string>(y, {1, 1}, {"a b  "});
    check_tensor<i64>(z, {1}, {1});
    auto [y2, z2] = split(op("StringSplit", 20).set("delimiter", std::string(",")).set("maxsplit", i64{1}), str_tensor({1}, {"a,b,c"}));
    check_tensor<std::string>(y2, {1, 2}, {"a", "b,c"});
    check_tensor<i64>(z2, {1}, {2});
  }
  {  // a multi-byte delimiter, and U+3000 / U+00A0 as whitespace
    auto [y, z] = split(op("StringSplit", 20).set("delimiter", std::string("::")), str_tensor({1}, {"a::b:::c"}));
    check_tensor<std::string>(y, {1, 3}, {"a", "b", ":c"});
    check_tensor<i64>(z, {1}, {3});
    auto [y2, z2] = split(op("StringSplit", 20), str_tensor({1}, {"中\u3000文\u00a0字"}));
    check_tensor<std::string>(y2, {1, 3}, {"中", "文", "字"});
    check_tensor<i64>(z2, {1}, {3});
  }
}

// =================================================================================================================
// RegexFullMatch

TEST_CASE("RegexFullMatch: the backend cases (basic, email domain, empty input)") {
  const kernel_node basic = op("RegexFullMatch", 20).set("pattern", std::string(R"(www\.[\w.-]+\.\bcom\b)"));
  check_tensor<bool>(run1<ops::regex_full_match>(basic, {{str_tensor({3}, {"www.google.com", "www.facebook.com", "www.bbc.co.uk"})}}),
                     {3}, {true, true, false});
  const kernel_node email = op("RegexFullMatch", 20).set("pattern", std::string(R"((\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$))"));
  check_tensor<bool>(run1<ops::regex_full_match>(
                         email, {{str_tensor({2, 2}, {"account@gmail.com", "account@hotmail.com", "not email", "account2@yahoo.com"})}}),
                     {2, 2}, {true, false, false, true});
  check_tensor<bool>(run1<ops::regex_full_match>(email, {{str_tensor({2, 0}, {})}}), {2, 0}, {});
}

TEST_CASE("RegexFullMatch matches the whole string only, on UTF-8, across threads") {
  const kernel_node kn = op("RegexFullMatch", 20).set("pattern", std::string("a+b?"));
  check_tensor<bool>(run1<ops::regex_full_match>(kn, {{str_tensor({5}, {"a", "aab", "xab", "abb", ""})}}), {5},
                     {true, true, false, false, false});
  const kernel_node utf = op("RegexFullMatch", 20).set("pattern", std::string("中.文"));
  check_tensor<bool>(run1<ops::regex_full_match>(utf, {{str_tensor({2}, {"中x文", "中xx文"})}}), {2}, {true, false});
  thread_pool pool(2);
  strs many(5000);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = std::string(i % 7, 'a') + (i % 3 == 0 ? "b" : "");
  const tensor y = run1<ops::regex_full_match>(kn, {{str_tensor({5000}, many)}}, &pool);
  for (std::size_t i = 0; i < many.size(); ++i) CHECK(y.typed<bool>()[i] == (i % 7 != 0));
}

TEST_CASE("RegexFullMatch: an invalid or missing pattern is a compile error naming the attribute") {
  check_fails<ops::regex_full_match>(op("RegexFullMatch", 20).set("pattern", std::string("(a")), {{str_tensor({1}, {"a"})}},
                                     "attribute 'pattern'");
  check_fails<ops::regex_full_match>(op("RegexFullMatch", 20).set("pattern", std::string("a{2,1}")), {{str_tensor({1}, {"a"})}},
                                     "not a valid RE2 pattern");
  check_fails<ops::regex_full_match>(op("RegexFullMatch", 20), {{str_tensor({1}, {"a"})}}, "'pattern' is required");
}
namespace {
/// The backend's test_ai_onnx_ml_tree_ensemble_single_tree node (leaf weights and splits as T).
template <class T>
kernel_node single_tree() {
  return ml("TreeEnsemble", 5)
      .set("aggregate_function", i64{1})
      .set("leaf_targetids", ints{0, 1, 0, 1})
      .set("leaf_weights", make<T>({4}, {T(5.23), T(12.12), T(-12.23), T(7.21)}))
      .set("n_targets", i64{2})
      .set("nodes_falseleafs", ints{0, 1, 1})
      .set("nodes_falsenodeids", ints{2, 2, 3})
      .set("nodes_featureids", ints{0, 0, 0})
      .set("nodes_modes", make<std::uint8_t>({3}, {0, 0, 0}))
      .set("nodes_splits", make<T>({3}, {T(3.14), T(1.2), T(4.2)}))
      .set("nodes_trueleafs", ints{0, 1, 1})
      .set("nodes_truenodeids", ints{1, 0, 1})
      .set("post_transform", i64{0})
      .set("tree_roots", ints{0});
}
kernel_node set_membership() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  return ml("TreeEnsemble", 5)
      .set("aggregate_function", i64{1})
      .set("leaf_targetids", ints{0, 1, 2, 3})
      .set("leaf_weights", make<float>({4}, {1, 10, 1000, 100}))
      .set("membership_values", make<float>({8}, {1.2f, 3.7f, 8, 9, nan, 12, 7, nan}))
      .set("n_targets", i64{4})
      .set("nodes_falseleafs", ints{1, 0, 1})
      .set("nodes_falsenodeids", ints{2, 2, 3})
      .set("nodes_featureids", ints{0, 0, 0})
      .set("nodes_modes", make<std::uint8_t>({3}, {0, 6, 6}))
      .set("nodes_splits", make<float>({3}, {11, 232344, nan}))
      .set("nodes_trueleafs", ints{0, 1, 1})
      .set("nodes_truenodeids", ints{1, 0, 1})
      .set("post_transform", i64{0})
      .set("tree_roots", ints{0});
}
/// Two one-split trees over feature 0 (x <= 0 -> leaf a, else leaf b): leaves 0, 1 (tree 0) and 2, 3 (tree 1).
kernel_node two_trees(const std::vector<float>& weights, const ints& targets, i64 n_targets) {
  return ml("TreeEnsemble", 5)
      .set("leaf_targetids", targets)
      .set("leaf_weights", make<float>({4}, weights))
      .set("n_targets", n_targets)
      .set("nodes_featureids", ints{0, 0})
      .set("nodes_modes", make<std::uint8_t>({2}, {0, 0}))
      .set("nodes_splits", make<float>({2}, {0, 0}))
      .set("nodes_truenodeids", ints{0, 2})
      .set("nodes_trueleafs", ints{1, 1})
      .set("nodes_falsenodeids", ints{1, 3})
      .set("nodes_falseleafs", ints{1, 1})
      .set("tree_roots", ints{0, 1});
}
}  // namespace

TEST_CASE("TreeEnsemble: the backend cases (single tree in double, set membership in float)") {
  const tensor x = make<double>({3, 2}, {1.2, 3.4, -0.12, 1.66, 4.14, 1.77});
  check_tensor<double>(run1<ops::ml_tree_ensemble>(single_tree<double>(), {{x}}), {3, 2}, {5.23, 0, 5.23, 0, 0, 12.12}, 1e-12);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const tensor xs = make<float>({6, 1}, {1.2f, 3.4f, -0.12f, nan, 12, 7});
  check_tensor<float>(run1<ops::ml_tree_ensemble>(set_membership(), {{xs}}), {6, 4},
                      {1, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 100, 0, 0, 1000, 0, 0, 0, 1000, 0, 0, 10, 0, 0});
}

TEST_CASE("TreeEnsemble: float16 input, every branch mode, and NaN with nodes_missing_value_tracks_true") {
  const tensor x16 = make<float16>({2, 2}, {float16(1.2f), float16(3.4f), float16(4.14f), float16(1.77f)});
  const tensor y16 = run1<ops::ml_tree_ensemble>(single_tree<float16>(), {{x16}});
  CHECK(static_cast<float>(y16.typed<float16>()[0]) == doctest::Approx(5.23).epsilon(1e-3));
  CHECK(static_cast<float>(y16.typed<float16>()[3]) == doctest::Approx(12.12).epsilon(1e-3));
  // One node, mode m, split 2: true -> leaf 0 (weight 1), false -> leaf 1 (weight 0).
  const std::vector<float> xs = {1, 2, 3};
  const std::vector<std::vector<float>> want = {{1, 1, 0}, {1, 0, 0}, {0, 1, 1}, {0, 0, 1}, {0, 1, 0}, {1, 0, 1}};
  for (std::uint8_t m = 0; m < 6; ++m) {
    CAPTURE(int(m));
    const kernel_node kn = ml("TreeEnsemble", 5)
                               .set("leaf_targetids", ints{0, 0})
                               .set("leaf_weights", make<float>({2}, {1, 0}))
                               .set("n_targets", i64{1})
                               .set("nodes_featureids", ints{0})
                               .set("nodes_modes", make<std::uint8_t>({1}, {m}))
                               .set("nodes_splits", make<float>({1}, {2}))
                               .set("nodes_truenodeids", ints{0})
                               .set("nodes_trueleafs", ints{1})
                               .set("nodes_falsenodeids", ints{1})
                               .set("nodes_falseleafs", ints{1})
                               .set("tree_roots", ints{0});
    check_tensor<float>(run1<ops::ml_tree_ensemble>(kn, {{make<float>({3, 1}, xs)}}), {3, 1}, want[m]);
    // NaN: compared as IEEE NaN (only NEQ is true), unless missing values track the true branch.
    const float nan = std::numeric_limits<float>::quiet_NaN();
    check_tensor<float>(run1<ops::ml_tree_ensemble>(kn, {{make<float>({1, 1}, {nan})}}), {1, 1}, {m == 5 ? 1.0f : 0.0f});
    kernel_node tracks = kn;
    tracks.set("nodes_missing_value_tracks_true", ints{1});
    check_tensor<float>(run1<ops::ml_tree_ensemble>(tracks, {{make<float>({1, 1}, {nan})}}), {1, 1}, {1});
  }
}

TEST_CASE("TreeEnsemble: AVERAGE, SUM, MIN, MAX aggregation") {
  // x = -1: leaves 0 and 2; x = 1: leaves 1 and 3. All to target 0, except leaf 3 to target 1.
  const tensor x = make<float>({2, 1}, {-1, 1});
  const auto run = [&](i64 agg) {
    kernel_node kn = two_trees({2, 4, 6, 8}, {0, 0, 0, 1}, 2);
    kn.set("aggregate_function", agg);
    return run1<ops::ml_tree_ensemble>(kn, {{x}});
  };
  check_tensor<float>(run(1), {2, 2}, {8, 0, 4, 8});
  check_tensor<float>(run(0), {2, 2}, {4, 0, 2, 4});
  const float big = std::numeric_limits<float>::max();
  // Targets no leaf reached keep the starting value (the reference's: the type's max for MIN, lowest for MAX).
  check_tensor<float>(run(2), {2, 2}, {2, big, 4, 8});
  check_tensor<float>(run(3), {2, 2}, {6, -big, 4, 8});
}

TEST_CASE("TreeEnsemble: post transforms LOGISTIC, SOFTMAX, SOFTMAX_ZERO, PROBIT") {
  const tensor x = make<float>({1, 1}, {-1});  // leaves 0 and 2
  const auto run = [&](i64 pt, const std::vector<float>& w) {
    kernel_node kn = two_trees(w, {0, 0, 1, 1}, 3);
    kn.set("post_transform", pt);
    return run1<ops::ml_tree_ensemble>(kn, {{x}});
  };
  // scores [1, 2, 0]
  const double e1 = std::exp(1.0), e2 = std::exp(2.0), e0 = 1.0;
  check_tensor<float>(run(1, {1, 0, 2, 0}), {1, 3}, {float(e1 / (e1 + e2 + e0)), float(e2 / (e1 + e2 + e0)), float(e0 / (e1 + e2 + e0))});
  check_tensor<float>(run(3, {1, 0, 2, 0}), {1, 3}, {float(e1 / (e1 + e2)), float(e2 / (e1 + e2)), 0});
  check_tensor<float>(run(2, {1, 0, 2, 0}), {1, 3}, {float(1 / (1 + std::exp(-1.0))), float(1 / (1 + std::exp(-2.0))), 0.5f});
  // probit(p) = sqrt(2) erfinv(2p - 1): probit(0.975) = 1.959964, probit(0.1) = -1.281552, probit(0) = -inf
  check_tensor<float>(run(4, {0.975f, 0, 0.1f, 0}), {1, 3}, {1.959964f, -1.281552f, -std::numeric_limits<float>::infinity()}, 1e-4);
  kernel_node half = two_trees({0.5f, 0, 0.5f, 0}, {0, 0, 1, 1}, 2);
  half.set("post_transform", i64{4});
  check_tensor<float>(run1<ops::ml_tree_ensemble>(half, {{x}}), {1, 2}, {0, 0}, 1e-6);
}

TEST_CASE("TreeEnsemble errors: attribute lengths, leaf targets, modes, membership sets, cycles, features of X") {
  const tensor x = make<float>({1, 2}, {0, 0});
  kernel_node bad = set_membership();
  bad.set("nodes_featureids", ints{0, 0});
  check_fails<ops::ml_tree_ensemble>(bad, {{x}}, "attribute 'nodes_truenodeids' has 3 entries");
  bad = set_membership();
  bad.set("leaf_targetids", ints{0, 1, 2, 4});
  check_fails<ops::ml_tree_ensemble>(bad, {{x}}, "attribute 'leaf_targetids' has target 4");
  bad = set_membership();
  bad.set("nodes_modes", make<std::uint8_t>({3}, {0, 6, 9}));
  check_fails<ops::ml_tree_ensemble>(bad, {{x}}, "attribute 'nodes_modes' has the invalid mode 9");
  bad = set_membership();
  bad.set("membership_values", make<float>({2}, {1, std::numeric_limits<float>::quiet_NaN()}));  // one set, two nodes
  check_fails<ops::ml_tree_ensemble>(bad, {{x}}, "attribute 'membership_values'");
  bad = set_membership();
  bad.set("nodes_falsenodeids", ints{2, 0, 3});  // node 1 false -> node 0 -> node 1: a cycle
  check_fails<ops::ml_tree_ensemble>(bad, {{x}}, "cycle");
  bad = set_membership();
  bad.set("nodes_truenodeids", ints{1, 7, 1});
  check_fails<ops::ml_tree_ensemble>(bad, {{x}}, "attribute 'nodes_truenodeids' has leaf 7");
  bad = set_membership();
  bad.set("aggregate_function", i64{7});
  check_fails<ops::ml_tree_ensemble>(bad, {{x}}, "attribute 'aggregate_function'");
  bad = set_membership();
  bad.set("nodes_featureids", ints{0, 3, 0});
  check_fails<ops::ml_tree_ensemble>(bad, {{x}}, "uses feature 3 but input X has 2 features");
  check_fails<ops::ml_tree_ensemble>(set_membership(), {{make<float>({2}, {0, 0})}}, "input X must be [N, F]");
}

// =================================================================================================================
// LabelEncoder

TEST_CASE("LabelEncoder: the backend cases (string -> int64 with and without default, tensors of int16)") {
  const tensor x = str_tensor({5}, {"a", "b", "d", "c", "g"});
  const kernel_node base = ml("LabelEncoder", 4).set("keys_strings", strs{"a", "b", "c"}).set("values_int64s", ints{0, 1, 2});
  kernel_node with_default = base;
  with_default.set("default_int64", i64{42});
  check_tensor<i64>(run1<ops::ml_label_encoder>(with_default, {{x}}), {5}, {0, 1, 42, 2, 42});
  check_tensor<i64>(run1<ops::ml_label_encoder>(base, {{x}}), {5}, {0, 1, -1, 2, -1});
  const kernel_node tensors = ml("LabelEncoder", 4)
                                  .set("keys_tensor", str_tensor({3}, {"a", "b", "c"}))
                                  .set("values_tensor", make<std::int16_t>({3}, {0, 1, 2}))
                                  .set("default_tensor", make<std::int16_t>({1}, {42}));
  check_tensor<std::int16_t>(run1<ops::ml_label_encoder>(tensors, {{x}}), {5}, {0, 1, 42, 2, 42});
  const kernel_node values_only = ml("LabelEncoder", 4)
                                      .set("keys_strings", strs{"a", "b", "c"})
                                      .set("values_tensor", make<std::int16_t>({3}, {0, 1, 2}))
                                      .set("default_tensor", make<std::int16_t>({1}, {42}));
  check_tensor<std::int16_t>(run1<ops::ml_label_encoder>(values_only, {{x}}), {5}, {0, 1, 42, 2, 42});
}

TEST_CASE("LabelEncoder opset 1: classes_strings maps strings to indices and indices to strings") {
  const kernel_node kn = ml("LabelEncoder", 1).set("classes_strings", strs{"x", "y", "x"});
  check_tensor<i64>(run1<ops::ml_label_encoder>(kn, {{str_tensor({2, 2}, {"y", "x", "z", "y"})}}), {2, 2}, {1, 0, -1, 1});
  kernel_node back = kn;
  back.set("default_string", std::string("?"));
  check_tensor<std::string>(run1<ops::ml_label_encoder>(back, {{make<i64>({4}, {2, 0, 3, -1})}}), {4}, {"x", "x", "?", "?"});
}

TEST_CASE("LabelEncoder opset 2 and 4: float keys (NaN matches NaN, -0 matches 0), defaults, repeated keys, more types") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const kernel_node f2s = ml("LabelEncoder", 2)
                              .set("keys_floats", std::vector<float>{1.5f, nan, 0.0f})
                              .set("values_strings", strs{"one and a half", "not a number", "zero"});
  const float other_nan = std::bit_cast<float>(0x7fc00123u);
  check_tensor<std::string>(run1<ops::ml_label_encoder>(f2s, {{make<float>({5}, {1.5f, other_nan, -0.0f, 2.0f, nan})}}), {5},
                            {"one and a half", "not a number", "zero", "_Unused", "not a number"});
  const kernel_node i2f = ml("LabelEncoder", 2).set("keys_int64s", ints{7, 8, 7}).set("values_floats", std::vector<float>{1, 2, 3});
  const tensor y = run1<ops::ml_label_encoder>(i2f, {{make<i64>({3}, {7, 8, 9})}});
  CHECK(y.typed<float>()[0] == 3.0f);  // the last of a repeated key wins
  CHECK(y.typed<float>()[1] == 2.0f);
  CHECK(std::signbit(y.typed<float>()[2]));  // default_float is -0.0
  const kernel_node d2i = ml("LabelEncoder", 4)
                              .set("keys_tensor", make<double>({2}, {0.25, -3}))
                              .set("values_tensor", make<std::int32_t>({2}, {10, 20}));
  check_tensor<std::int32_t>(run1<ops::ml_label_encoder>(d2i, {{make<double>({3}, {-3, 0.25, 1})}}), {3}, {20, 10, -1});
  const kernel_node s2s = ml("LabelEncoder", 4)
                              .set("keys_strings", strs{"a"})
                              .set("values_strings", strs{"A"})
                              .set("default_string", std::string("-"));
  check_tensor<std::string>(run1<ops::ml_label_encoder>(s2s, {{tensor::scalar<std::string>("b")}}), {}, {"-"});
}

TEST_CASE("LabelEncoder errors name the attributes") {
  const tensor x = str_tensor({1}, {"a"});
  check_fails<ops::ml_label_encoder>(ml("LabelEncoder", 2).set("values_int64s", ints{1}), {{x}}, "exactly one of the attributes keys_");
  check_fails<ops::ml_label_encoder>(
      ml("LabelEncoder", 2).set("keys_strings", strs{"a"}).set("keys_int64s", ints{1}).set("values_int64s", ints{1}), {{x}},
      "found 2");
  check_fails<ops::ml_label_encoder>(ml("LabelEncoder", 2).set("keys_strings", strs{"a", "b"}).set("values_int64s", ints{1}), {{x}},
                                     "attribute 'keys_strings' has 2 entries but 'values_int64s' has 1");
  check_fails<ops::ml_label_encoder>(ml("LabelEncoder", 2).set("keys_int64s", ints{1}).set("values_int64s", ints{1}), {{x}},
                                     "input X has element type string but attribute 'keys_int64s' holds int64");
  check_fails<ops::ml_label_encoder>(ml("LabelEncoder", 4)
                                         .set("keys_strings", strs{"a"})
                                         .set("values_tensor", make<std::int16_t>({1}, {1}))
                                         .set("default_tensor", make<float>({1}, {1})),
                                     {{x}}, "attribute 'default_tensor' holds float");
  check_fails<ops::ml_label_encoder>(ml("LabelEncoder", 2).set("keys_tensor", str_tensor({1}, {"a"})).set("values_int64s", ints{1}),
                                     {{x}}, "needs ai.onnx.ml opset 4");
  check_fails<ops::ml_label_encoder>(ml("LabelEncoder", 2).set("keys_strings", ints{1}).set("values_int64s", ints{1}), {{x}},
                                     "attribute 'keys_strings' must be a list of strings");
}

// =================================================================================================================
// Binarizer, ArrayFeatureExtractor

TEST_CASE("Binarizer: values above the threshold become 1 (backend values), on float, double, int64, int32") {
  const kernel_node kn = ml("Binarizer", 1).set("threshold", 1.0f);
  check_tensor<float>(run1<ops::ml_binarizer>(kn, {{make<float>({2, 3}, {1.764052391f, 0.400157213f, 1.0f, 2.240893126f, -0.977277875f,
                                                                        std::numeric_limits<float>::quiet_NaN()})}}),
                      {2, 3}, {1, 0, 0, 1, 0, 0});
  check_tensor<double>(run1<ops::ml_binarizer>(ml("Binarizer", 1), {{make<double>({3}, {-0.5, 0, 1e-9})}}), {3}, {0, 0, 1});
  check_tensor<i64>(run1<ops::ml_binarizer>(kn, {{make<i64>({3}, {0, 1, 2})}}), {3}, {0, 0, 1});
  check_tensor<std::int32_t>(run1<ops::ml_binarizer>(ml("Binarizer", 1).set("threshold", -2.5f), {{make<std::int32_t>({3}, {-3, -2, 5})}}),
                             {3}, {0, 1, 1});
}

TEST_CASE("ArrayFeatureExtractor: indices into the last axis (backend case), 1-D input, strings, repeated indices") {
  const kernel_node kn = ml("ArrayFeatureExtractor", 1);
  check_tensor<float>(run1<ops::ml_array_feature_extractor>(kn, {{make<float>({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})},
                                                                 {make<i64>({2}, {0, 1})}}),
                      {3, 2}, {0, 1, 4, 5, 8, 9});
  check_tensor<i64>(run1<ops::ml_array_feature_extractor>(kn, {{make<i64>({4}, {10, 11, 12, 13})}, {make<i64>({3}, {3, 0, 3})}}), {1, 3},
                    {13, 10, 13});
  check_tensor<std::string>(
      run1<ops::ml_array_feature_extractor>(kn, {{str_tensor({2, 1, 2}, {"a", "b", "c", "d"})}, {make<i64>({1, 1}, {1})}}), {2, 1, 1},
      {"b", "d"});
  check_fails<ops::ml_array_feature_extractor>(kn, {{make<float>({2, 2}, {1, 2, 3, 4})}, {make<i64>({2}, {0, 2})}},
                                               "input Y has index 2 (element 1), outside [0, 2)");
  check_fails<ops::ml_array_feature_extractor>(kn, {{make<float>({2, 2}, {1, 2, 3, 4})}, {make<i64>({1}, {-1})}}, "input Y has index -1");
}
