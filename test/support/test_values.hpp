#pragma once
// Values for kernel tests: shapes, seeded random or counting data, and typed tensors and kernel inputs made from
// doubles (the references compute in double).
#include <epstack/tensor.hpp>

#include "kernel_harness.hpp"

#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace epstack::test {

using dims_t = std::vector<std::int64_t>;

inline std::int64_t count_of(const dims_t& d) {
  std::int64_t n = 1;
  for (auto v : d) n *= v;
  return n;
}
/// n values uniform in [lo, hi) from `seed` (rounded to whole numbers when `integers`).
inline std::vector<double> random_values(std::size_t n, double lo, double hi, unsigned seed, bool integers = false) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = integers ? std::round(dist(gen)) : dist(gen);
  return v;
}
/// 1, 2, ..., n.
inline std::vector<double> iota(std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<double>(i + 1);
  return v;
}
/// A tensor of T with dims `d` holding `v` converted.
template <class T>
tensor make(const dims_t& d, const std::vector<double>& v) {
  std::vector<T> t(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) t[i] = static_cast<T>(v[i]);
  return tensor::from<T>(std::span<const std::int64_t>(d), std::span<const T>(t));
}
/// The same as a (non-constant) kernel input.
template <class T>
kernel_input in(const dims_t& d, const std::vector<double>& v) {
  return {make<T>(d, v)};
}

}  // namespace epstack::test
