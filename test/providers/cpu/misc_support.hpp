#pragma once
// What the CPU kernel tests of TopK, NonZero, CumSum, Resize, Einsum, GatherElements, Tile and Pad share: tensors
// from values, nodes, failure checks, a seeded sequence.
#include <epstack/providers/cpu/kernels.hpp>

#include "../../support/kernel_harness.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

namespace epstack::test::misc {

using namespace epstack;
using namespace epstack::test;
namespace ops = epstack::cpu::ops;

using i64 = std::int64_t;
using ints = std::vector<std::int64_t>;

template <class T>
inline tensor make(const ints& dims, const std::vector<T>& values) {  // element-wise, so that std::vector<bool> works too
  tensor t(element_type_of_v<T>, std::span<const std::int64_t>(dims));
  REQUIRE(t.element_count() == values.size());
  T* p = t.typed<T>();
  for (std::size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}
template <class T>
inline tensor empty_tensor() {
  const std::int64_t d[] = {0};
  return tensor(element_type_of_v<T>, d);
}
template <class T>
inline std::vector<T> values_of(const tensor& t) {
  const T* p = t.typed<T>();
  return std::vector<T>(p, p + t.element_count());
}
/// A node of `type` resolved to schema version `opset`, without attributes.
inline kernel_node op(std::string type, int opset) {
  kernel_node kn;
  kn.op_type = std::move(type);
  kn.since_version = opset;
  return kn;
}
inline ints dims_of(const tensor& t) { return ints(t.sizes().begin(), t.sizes().end()); }

/// Runs K expecting a failure with invalid_argument whose message contains `needle`.
template <class K>
inline void check_fails(const kernel_node& kn, const std::vector<kernel_input>& inputs, const std::string& needle) {
  auto r = run_kernel<K>(kn, inputs);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.status().code() == errc::invalid_argument);
  CHECK_MESSAGE(r.status().message().find(needle) != std::string::npos, r.status().message());
}

/// A deterministic pseudo-random sequence (an LCG), for inputs of the larger cases.
struct lcg {
  std::uint64_t s;
  explicit lcg(std::uint64_t seed) : s(seed) {}
  std::uint32_t next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::uint32_t>(s >> 33);
  }
  float uniform() { return static_cast<float>(next() % 2000001) / 1000000.0f - 1.0f; }  // [-1, 1]
};

/// One case of the ONNX backend test data (onnx 1.12), pasted as literals; an omitted input is {}.
struct backend_case {
  std::string name;
  kernel_node node;
  std::vector<kernel_input> inputs;
  tensor expected;
};

template <class K, class T>
inline void check_backend_case(const backend_case& c, double tol) {
  CAPTURE(c.name);
  const tensor y = run1<K>(c.node, c.inputs);
  check_tensor<T>(y, dims_of(c.expected), values_of<T>(c.expected), tol, tol);
}

}  // namespace epstack::test::misc
