#pragma once
// Values for kernel tests: shapes, seeded random or counting data, and typed tensors and kernel inputs made from
// doubles (the references compute in double).
#include <epstack/core/tensor.hpp>

#include "kernel_harness.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
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
/// A tensor of T with dims `d` holding `v` converted. A value an integer T cannot hold is a defect of the test (the
/// conversion would be undefined behaviour): it throws, naming the value, instead of converting.
template <class T>
tensor make(const dims_t& d, const std::vector<double>& v) {
  std::vector<T> t(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // Compare in double against bounds exactly representable in double (2^63 rounds up: the upper test is strict).
      const double lo = static_cast<double>(std::numeric_limits<T>::min());
      const double hi = static_cast<double>(std::numeric_limits<T>::max());
      if (!(v[i] >= lo && (sizeof(T) < 8 ? v[i] <= hi : v[i] < hi)))
        throw std::out_of_range("test value " + std::to_string(v[i]) + " does not fit the tensor's integer type");
    }
    t[i] = static_cast<T>(v[i]);
  }
  return tensor::from<T>(std::span<const std::int64_t>(d), std::span<const T>(t));
}
/// The same as a (non-constant) kernel input.
template <class T>
kernel_input in(const dims_t& d, const std::vector<double>& v) {
  return {make<T>(d, v)};
}

}  // namespace epstack::test
