#pragma once
// Runs one CPU kernel on one node, outside a session: builds a single-node graph whose inputs are typed like the given
// tensors (or are initializers, for constant inputs), checks `supports`, compiles and calls the function.
#if defined(__GNUC__) && !defined(__clang__)
// g++-12 at -O1 with the sanitizers reports a false -Wuninitialized inside Boost.Graph's named_graph.hpp (an empty
// boost::optional) where graph::add_node is inlined into the tests that include this harness.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "compare.hpp"

#include <epstack/provider/compute.hpp>
#include <epstack/ir/graph.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

namespace epstack::test {

struct kernel_input {
  tensor value;            // empty tensor: an omitted optional input
  bool constant = false;   // an initializer rather than a graph input
  bool symbolic = false;   // a graph input whose dimensions are symbols ("d0", "d1", ...), not the tensor's sizes
};

/// A node to run: op type, domain, since_version, attributes.
struct kernel_node {
  std::string op_type;
  int since_version = 13;
  std::string domain;
  attribute_list attributes;
  std::size_t outputs = 1;

  kernel_node() = default;
  kernel_node(std::string op, int since = 13, std::string dom = {})
      : op_type(std::move(op)), since_version(since), domain(std::move(dom)) {}

  template <class V>
  kernel_node& set(std::string name, V v) {
    attributes.set(std::move(name), std::move(v));
    return *this;
  }
};

/// The single-node graph for `kn` with `inputs` (its value types follow the tensors).
inline graph make_kernel_graph(const kernel_node& kn, const std::vector<kernel_input>& inputs) {
  graph g("kernel_test");
  std::vector<std::string> in_names, out_names;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].value.empty()) {
      in_names.emplace_back();
      continue;
    }
    const std::string name = "x" + std::to_string(i);
    in_names.push_back(name);
    const auto& t = inputs[i].value;
    if (inputs[i].constant) g.add_initializer(name, t);
    else if (inputs[i].symbolic) {
      shape dims;
      for (std::size_t d = 0; d < t.rank(); ++d) dims.push_back(dimension("d" + std::to_string(d)));
      g.add_input(name, type_info::tensor_of(t.type(), dims));
    } else {
      g.add_input(name, type_info::tensor_of(t.type(), t.get_shape()));
    }
  }
  for (std::size_t o = 0; o < kn.outputs; ++o) out_names.push_back("y" + std::to_string(o));
  node nd;
  nd.name = "n";
  nd.op_type = kn.op_type;
  nd.domain = kn.domain;
  nd.since_version = kn.since_version;
  nd.attributes = kn.attributes;
  g.add_node(std::move(nd), in_names, out_names);
  for (const auto& o : out_names) g.add_output(o);
  return g;
}

/// Runs kernel K on `kn` with `inputs`; the Result holds the outputs or the failure (supports() false is
/// not_implemented).
template <class K>
Result<std::vector<ivalue>> run_kernel(const kernel_node& kn, const std::vector<kernel_input>& inputs,
                                       thread_pool* threads = nullptr) {
  const graph g = make_kernel_graph(kn, inputs);
  if (!K::supports(g, 0)) return Status(errc::not_implemented, "the kernel does not support this node");
  EPSTACK_ASSIGN_OR_RETURN(auto fn, K::compile(g, 0));
  std::vector<ivalue> ins;
  for (const auto& i : inputs) ins.push_back(i.value.empty() ? ivalue() : ivalue(i.value));
  std::vector<ivalue> outs(kn.outputs);
  compute_context ctx(ins, outs, nullptr, threads);
  EPSTACK_RETURN_IF_ERROR(fn(ctx));
  return outs;
}

/// The single output tensor of a successful run (fails the test otherwise).
template <class K>
tensor run1(const kernel_node& kn, const std::vector<kernel_input>& inputs, thread_pool* threads = nullptr) {
  auto r = run_kernel<K>(kn, inputs, threads);
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  REQUIRE(!r->empty());
  return (*r)[0].as_tensor();
}

/// Checks sizes and values within atol + rtol * |expected|.
template <class T>
void check_tensor(const tensor& got, std::vector<std::int64_t> sizes, const std::vector<T>& want, double atol = 1e-5,
                  double rtol = 1e-5) {
  REQUIRE(got.type() == element_type_of_v<T>);
  CHECK(std::vector<std::int64_t>(got.sizes().begin(), got.sizes().end()) == sizes);
  REQUIRE(got.element_count() == want.size());
  const T* p = got.typed<T>();
  if constexpr (std::is_floating_point_v<T>) {
    // NaN expected: NaN required; equal infinities pass (compare.hpp).
    const auto c = compare_values([&](std::size_t i) { return p[i]; }, [&](std::size_t i) { return want[i]; },
                                  want.size(), atol, rtol, /*nan_equal=*/true);
    const std::size_t i = c.ok() ? 0 : c.first_bad;  // the first bad element, for the message
    CHECK_MESSAGE(c.ok(), c.message(), ": element ", i, " got ", (want.empty() ? T{} : p[i]), ", want ",
                  (want.empty() ? T{} : want[i]));
  } else {
    for (std::size_t i = 0; i < want.size(); ++i) CHECK_MESSAGE(p[i] == want[i], "element " << i);
  }
}

}  // namespace epstack::test
