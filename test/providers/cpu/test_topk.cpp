// Tests of the CPU TopK kernel (topk.cpp): hand-computed values and sorting references, ties, NaN, types, threads.
#include "misc_support.hpp"

using namespace epstack;
using namespace epstack::test;
using namespace epstack::test::misc;

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
