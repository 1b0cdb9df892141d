// Tests of the CPU data-movement kernels (tensor_ops.cpp): Transpose, Concat, Split, Slice, Gather, Expand, one node
// at a time, against hand-computed values, naive references and the cases of the ONNX specification; and threads.
#include "tensor_support.hpp"

using namespace epstack;
using namespace epstack::test;
using namespace epstack::test::tensor_ops;

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

TEST_CASE("Split of rows into parts of different sizes on two threads matches a naive split (attention's Q, K, V)") {
  // [2, 128, 1536] along the last axis into 500, 0, 512 and 524 columns: every row of X is dealt out to every part.
  epstack::thread_pool pool(2);
  const std::int64_t rows = 2 * 128, cols = 1536;
  const std::vector<std::int64_t> parts{500, 0, 512, 524};
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 10007) - 5000.0f;
  auto r = run_kernel<ops::split>(op("Split", 13, parts.size()).set("axis", std::int64_t{-1}),
                                  {in(f32({2, 128, cols}, x)), cst(i64v(parts))}, &pool);
  REQUIRE(r.has_value());
  REQUIRE(r->size() == parts.size());
  std::int64_t off = 0;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const tensor& y = (*r)[k].as_tensor();
    CHECK(sizes_of(y) == i64s{2, 128, parts[k]});
    std::int64_t wrong = 0;
    for (std::int64_t row = 0; row < rows; ++row)
      for (std::int64_t c = 0; c < parts[k]; ++c)
        wrong += y.typed<float>()[row * parts[k] + c] != x[static_cast<std::size_t>(row * cols + off + c)] ? 1 : 0;
    CHECK_MESSAGE(wrong == 0, "part ", k);
    off += parts[k];
  }
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

TEST_CASE("Split-18 with num_outputs: parts of ceil(d / n), the last smaller, every part holding an element (as ONNX Runtime)") {
  const auto split18 = [](std::size_t n) { return op("Split", 18, n).set("num_outputs", static_cast<std::int64_t>(n)); };
  auto seven = run_kernel<ops::split>(split18(4), {in(f32({7}, iota_f(7)))});
  REQUIRE(seven.has_value());
  check_tensor<float>((*seven)[0].as_tensor(), {2}, {0, 1});
  check_tensor<float>((*seven)[2].as_tensor(), {2}, {4, 5});
  check_tensor<float>((*seven)[3].as_tensor(), {1}, {6});
  auto ten = run_kernel<ops::split>(split18(4), {in(f32({2, 10}, iota_f(20)))});
  REQUIRE(!ten.has_value());  // axis 0 (size 2) into 4: refused
  auto cols = run_kernel<ops::split>(split18(4).set("axis", std::int64_t{1}), {in(f32({2, 10}, iota_f(20)))});
  REQUIRE(cols.has_value());
  check_tensor<float>((*cols)[1].as_tensor(), {2, 3}, {3, 4, 5, 13, 14, 15});
  check_tensor<float>((*cols)[3].as_tensor(), {2, 1}, {9, 19});
  auto even = run_kernel<ops::split>(split18(4), {in(f32({8}, iota_f(8)))});
  REQUIRE(even.has_value());
  for (std::size_t k = 0; k < 4; ++k) CHECK(sizes_of((*even)[k].as_tensor()) == i64s{2});
  // Parts of 2 leave -1 (5 into 4) or 0 (6 into 4) for the last; 2 into 3 leaves nothing for the third: ONNX Runtime
  // refuses these splits, and so does the kernel, rather than give empty outputs.
  expect_error<ops::split>(split18(4), {in(f32({5}, iota_f(5)))},
                           "num_outputs 4: axis 0 of size 5 cannot be split into 3 parts of 2 and a last one of at least 1 (-1 remain for it)");
  expect_error<ops::split>(split18(4), {in(f32({6}, iota_f(6)))}, "(0 remain for it)");
  expect_error<ops::split>(split18(3), {in(f32({2}, iota_f(2)))}, "num_outputs 3: axis 0 of size 2 cannot be split into 2 parts of 1");
  expect_error<ops::split>(split18(3), {in(f32({0}, {}))}, "num_outputs 3: axis 0 of size 0");
  // Without num_outputs or a split input, opset 18 splits into equal parts, as before.
  expect_error<ops::split>(op("Split", 18, 2), {in(f32({5}, iota_f(5)))}, "axis 0 of size 5 cannot be split into 2 equal parts");
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
