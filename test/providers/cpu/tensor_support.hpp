#pragma once
// What the tests of the CPU shape, data-movement, Cast and Constant kernels share: nodes, tensors from values, exact
// checks, a naive transpose.
#include <epstack/providers/cpu/kernels.hpp>

#include "../../support/kernel_harness.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

namespace epstack::test::tensor_ops {

using namespace epstack;
using namespace epstack::test;
namespace ops = epstack::cpu::ops;

using i64s = std::vector<std::int64_t>;

inline kernel_node op(std::string type, int version, std::size_t outputs = 1) {
  kernel_node kn(std::move(type), version);
  kn.outputs = outputs;
  return kn;
}
template <class T>
inline tensor make(const i64s& sizes, const std::vector<T>& values) {
  if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> is not contiguous
    const std::unique_ptr<bool[]> b(new bool[values.size()]);
    std::copy(values.begin(), values.end(), b.get());
    return tensor::from<bool>(std::span<const std::int64_t>(sizes), std::span<const bool>(b.get(), values.size()));
  } else {
    return tensor::from<T>(std::span<const std::int64_t>(sizes), std::span<const T>(values));
  }
}
inline tensor f32(const i64s& sizes, const std::vector<float>& v) { return make<float>(sizes, v); }
inline tensor i64(const i64s& sizes, const std::vector<std::int64_t>& v) { return make<std::int64_t>(sizes, v); }
inline tensor i64v(const std::vector<std::int64_t>& v) { return i64({static_cast<std::int64_t>(v.size())}, v); }
inline tensor strs(const i64s& sizes, const std::vector<std::string>& v) { return make<std::string>(sizes, v); }
inline kernel_input in(tensor t) { return {std::move(t), false}; }
inline kernel_input cst(tensor t) { return {std::move(t), true}; }
inline kernel_input none() { return {}; }

inline std::vector<float> iota_f(std::size_t n, float from = 0) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}
template <class T>
inline std::vector<T> values_of(const tensor& t) {
  const T* p = t.typed<T>();
  return std::vector<T>(p, p + t.element_count());
}
inline i64s sizes_of(const tensor& t) { return i64s(t.sizes().begin(), t.sizes().end()); }

// Exact floating-point values, infinities included (check_tensor's tolerance test is NaN for them); NaN matches NaN.
template <class T>
inline void check_exact(const tensor& got, const i64s& sizes, const std::vector<T>& want) {
  REQUIRE(got.type() == element_type_of_v<T>);
  CHECK(sizes_of(got) == sizes);
  REQUIRE(got.element_count() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const T g = got.typed<T>()[i];
    CHECK_MESSAGE((std::isnan(want[i]) ? std::isnan(g) : g == want[i]), "element " << i << ": got " << g << ", want " << want[i]);
  }
}

// A failed run with the given code whose message contains `needle`.
template <class K>
inline void expect_error(const kernel_node& kn, const std::vector<kernel_input>& inputs, std::string_view needle,
                  errc code = errc::invalid_argument) {
  auto r = run_kernel<K>(kn, inputs);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.code() == code);
  CHECK_MESSAGE(r.status().message().find(needle) != std::string::npos, r.status().to_string());
}

// Transposes `x` by `perm` the slow, obvious way (float data).
inline std::vector<float> naive_transpose(const std::vector<float>& x, const i64s& dims, const i64s& perm) {
  const std::size_t r = dims.size();
  i64s out(r), in_strides(r, 1);
  for (std::size_t i = r; i-- > 1;) in_strides[i - 1] = in_strides[i] * dims[i];
  for (std::size_t i = 0; i < r; ++i) out[i] = dims[static_cast<std::size_t>(perm[i])];
  std::vector<float> y(x.size());
  i64s idx(r, 0);
  for (std::size_t o = 0; o < y.size(); ++o) {
    std::int64_t off = 0;
    for (std::size_t i = 0; i < r; ++i) off += idx[i] * in_strides[static_cast<std::size_t>(perm[i])];
    y[o] = x[static_cast<std::size_t>(off)];
    for (std::size_t i = r; i-- > 0;) {
      if (++idx[i] < out[i]) break;
      idx[i] = 0;
    }
  }
  return y;
}

}  // namespace epstack::test::tensor_ops
