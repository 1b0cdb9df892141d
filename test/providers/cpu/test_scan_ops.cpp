// Tests of the CPU NonZero and CumSum kernels (scan_ops.cpp): hand-computed values, types, errors, threads.
#include "misc_support.hpp"

using namespace epstack;
using namespace epstack::test;
using namespace epstack::test::misc;

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

TEST_CASE("CumSum and CumProd along the last axis: every exclusive/reverse combination against a naive scan, -0.0 kept") {
  // The last axis has its own loop (one running value per row); it must give what the general one gives.
  thread_pool pool(2);
  lcg g(11);
  const i64 rows = 37, cols = 9;
  std::vector<float> xs(static_cast<std::size_t>(rows * cols));
  for (auto& v : xs) v = static_cast<float>(g.next() % 5) * 0.5f - 1.0f;  // halves: exact sums and products
  xs[0] = -0.0f;                                                          // a row starting with -0.0
  xs[static_cast<std::size_t>(2 * cols - 1)] = -0.0f;                     // a row ending with it (reverse)
  for (const bool prod : {false, true})
    for (const bool exclusive : {false, true})
      for (const bool reverse : {false, true}) {
        INFO("prod ", prod, " exclusive ", exclusive, " reverse ", reverse);
        std::vector<float> want(xs.size());
        for (i64 r = 0; r < rows; ++r) {
          float acc = prod ? 1.0f : 0.0f;
          bool started = false;
          for (i64 s = 0; s < cols; ++s) {
            const i64 c = reverse ? cols - 1 - s : s;
            const float x = xs[static_cast<std::size_t>(r * cols + c)];
            if (exclusive) {
              want[static_cast<std::size_t>(r * cols + c)] = acc;  // the identity first
              acc = prod ? acc * x : acc + x;
            } else {
              acc = started ? (prod ? acc * x : acc + x) : x;  // the first value as it is (keeps -0.0)
              want[static_cast<std::size_t>(r * cols + c)] = acc;
            }
            started = true;
          }
        }
        kernel_node kn = op(prod ? "CumProd" : "CumSum", prod ? 26 : 14);
        if (exclusive) kn.set("exclusive", i64{1});
        if (reverse) kn.set("reverse", i64{1});
        const tensor x = make<float>({rows, cols}, xs);
        const tensor got = prod ? run1<ops::cum_prod>(kn, {{x}, {tensor::scalar<i64>(1)}}, &pool)
                                : run1<ops::cum_sum>(kn, {{x}, {tensor::scalar<i64>(-1)}}, &pool);
        check_tensor<float>(got, {rows, cols}, want, 0, 0);
        if (!exclusive) {  // the first value of each row is x's own, sign of zero included
          const float first0 = got.typed<float>()[reverse ? cols - 1 : 0];
          CHECK(std::signbit(first0) == std::signbit(xs[static_cast<std::size_t>(reverse ? cols - 1 : 0)]));
          const float first1 = got.typed<float>()[reverse ? 2 * cols - 1 : cols];
          CHECK(std::signbit(first1) == std::signbit(xs[static_cast<std::size_t>(reverse ? 2 * cols - 1 : cols)]));
        }
      }
}
