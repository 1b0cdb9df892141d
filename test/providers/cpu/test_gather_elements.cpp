// Tests of the CPU GatherElements kernel (gather_elements.cpp): the backend cases, index types, errors, threads.
#include "misc_support.hpp"

using namespace epstack;
using namespace epstack::test;
using namespace epstack::test::misc;

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
