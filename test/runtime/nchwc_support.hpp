#pragma once
// The NCHWc tests' shared graphs and checks (test_nchwc.cpp, test_nchwc_fused.cpp).
#include <epstack/testing/model_zoo.hpp>
#include <epstack/onnx/onnx_io.hpp>
#include <epstack/provider/cost_model.hpp>
#include <epstack/providers/cpu.hpp>
#include <epstack/ir/node_facts.hpp>
#include <epstack/runtime/optimizer.hpp>
#include <epstack/runtime/session.hpp>

#include "../support/compare.hpp"
#include "../support/graphs.hpp"
#include "../support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace epstack::nchwc_test {

using test::op_counts;
using cpu_session = session<cpu_provider>;

inline constexpr std::string_view blocked_conv = "com.epstack.nchwc16.Conv";
inline constexpr std::string_view pointwise_depthwise = "com.epstack.nchwc16.PointwiseDepthwiseConv";

inline attribute_list attrs(std::initializer_list<attribute> a) {
  attribute_list l;
  for (const auto& x : a) l.set(x);
  return l;
}
inline attribute ints(std::string name, std::vector<std::int64_t> v) {
  attribute a;
  a.name = std::move(name);
  a.value = std::move(v);
  return a;
}
inline attribute one(std::string name, std::int64_t v) {
  attribute a;
  a.name = std::move(name);
  a.value = v;
  return a;
}
inline attribute text(std::string name, std::string v) {
  attribute a;
  a.name = std::move(name);
  a.value = std::move(v);
  return a;
}

// One graph with every conversion: a first layer of 3 channels (7x7, stride 2), 1x1 convolutions to and from channel
// counts that are not multiples of 16 (24, 40), a depthwise stride-2 3x3, a dilated 3x3, SAME_UPPER padding, a
// residual Add (FusedConv's Z), ReLU/Clip/Sigmoid activations, Mul and Tanh on blocked tensors, MaxPool (ceil_mode,
// pads), AveragePool (count_include_pad, asymmetric pads), both global pools, a grouped convolution (left in NCHW),
// a Winograd-shaped 3x3 (blocked, as Winograd), a Transpose reading a blocked value, and a mid-chain graph output.
// Adds random weights (seeds counting up from `seed`, values within +-scale) and Conv nodes to a graph.
struct conv_builder {
  graph& g;
  std::uint64_t seed;
  float scale;
  std::string weight(std::string name, std::initializer_list<std::int64_t> d) {
    g.add_initializer(name, zoo::random_tensor(d, seed++, scale));
    return name;
  }
  // The same for sizes known at run time (zoo::random_tensor's values: zoo::uniform_at).
  std::string weight(std::string name, const std::vector<std::int64_t>& d) {
    tensor t(element_type::float32, std::span<const std::int64_t>(d));
    for (std::size_t i = 0; i < t.element_count(); ++i) t.typed<float>()[i] = scale * zoo::uniform_at(seed, i);
    ++seed;
    g.add_initializer(name, std::move(t));
    return name;
  }
  void conv(std::string name, std::vector<std::string> in, std::string out, attribute_list a) {
    const std::vector<std::string> outs{std::move(out)};
    g.add_node(test::op(std::move(name), "Conv", std::move(a)), std::span<const std::string>(in), std::span<const std::string>(outs));
  }
};

inline model layout_model() {
  graph g("nchwc");
  const auto f32 = [](std::initializer_list<std::int64_t> d) { return type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>(d))); };
  g.add_input("x", f32({2, 24, 20, 20}));
  g.add_input("img", f32({2, 3, 17, 17}));
  conv_builder b{g, 1, 0.3f};
  const auto w = [&](std::string name, std::initializer_list<std::int64_t> d) { return b.weight(std::move(name), d); };
  const auto conv = [&](std::string name, std::vector<std::string> in, std::string out, attribute_list a) {
    b.conv(std::move(name), std::move(in), std::move(out), std::move(a));
  };
  conv("pw1", {"x", w("w1", {40, 24, 1, 1}), w("b1", {40})}, "a0", {});
  g.add_node(test::op("relu1", "Relu"), {"a0"}, {"a"});
  conv("dw", {"a", w("wd", {40, 1, 3, 3}), w("bd", {40})}, "b0", attrs({ints("strides", {2, 2}), ints("pads", {1, 1, 1, 1}), one("group", 40)}));
  g.add_initializer("lo", tensor::scalar(0.0f));
  g.add_initializer("hi", tensor::scalar(0.5f));
  g.add_node(test::op("clip", "Clip"), {"b0", "lo", "hi"}, {"b"});  // b: [2, 40, 10, 10], also a graph output
  conv("dil", {"b", w("w3", {24, 40, 3, 3})}, "c", attrs({ints("dilations", {2, 2}), ints("pads", {2, 2, 2, 2})}));
  conv("pw2", {"b", w("w4", {24, 40, 1, 1}), w("b4", {24})}, "c2", {});
  g.add_node(test::op("res", "Add"), {"c2", "c"}, {"d0"});  // Conv + Add: FusedConv with Z
  g.add_node(test::op("sig", "Sigmoid"), {"d0"}, {"d"});
  g.add_node(test::op("sq", "Mul"), {"d", "c"}, {"e0"});    // both blocked: runs on the blocked tensors
  g.add_node(test::op("tanh", "Tanh"), {"e0"}, {"e"});
  g.add_node(test::op("maxpool", "MaxPool", attrs({ints("kernel_shape", {3, 3}), ints("strides", {2, 2}), ints("pads", {1, 1, 1, 1}), one("ceil_mode", 1)})),
             {"e"}, {"f"});
  g.add_node(test::op("avgpool", "AveragePool",
                      attrs({ints("kernel_shape", {2, 2}), ints("pads", {0, 0, 1, 1}), one("count_include_pad", 1)})),
             {"f"}, {"h"});
  g.add_node(test::op("gap", "GlobalAveragePool"), {"h"}, {"gap"});
  g.add_node(test::op("gmp", "GlobalMaxPool"), {"f"}, {"gmp"});
  g.add_node(test::op("tr", "Transpose", attrs({ints("perm", {0, 2, 3, 1})})), {"c"}, {"t"});
  conv("grouped", {"b", w("wg", {8, 20, 3, 3})}, "grp", attrs({one("group", 2), ints("pads", {1, 1, 1, 1})}));
  conv("wino", {"e", w("ww", {16, 24, 3, 3})}, "wino", attrs({ints("pads", {1, 1, 1, 1})}));
  // The first layer: 3 channels read in NCHW, then SAME_UPPER with a stride.
  conv("first", {"img", w("wf", {16, 3, 7, 7}), w("bf", {16})}, "k0", attrs({ints("strides", {2, 2}), ints("pads", {3, 3, 3, 3})}));
  g.add_node(test::op("relu2", "Relu"), {"k0"}, {"k1"});
  g.add_node(test::op("same", "Conv", attrs({ints("strides", {2, 2}), text("auto_pad", "SAME_UPPER")})),
             {"k1", w("ws", {20, 16, 5, 5})}, {"k"});
  for (const char* o : {"b", "gap", "gmp", "t", "grp", "wino", "k"}) g.add_output(o);
  model m;
  m.opsets = {{"", 13}};
  m.graph = std::move(g);
  return m;
}

inline cpu_session make(const model& m, std::string_view layout, graph_optimization_level level = graph_optimization_level::all) {
  session_options so;
  so.set_graph_optimization_level(level);
  so.set_config(config_keys::cpu_layout, layout);
  auto s = cpu_session::create(m, so);
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  return std::move(*s);
}


// Every output within 1e-4 + 1e-4 * |NCHW value| of the plain layout's (NaN never passes).
inline void check_close(const std::vector<tensor>& a, const std::vector<tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    EPSTACK_CHECK_CLOSE(a[i], b[i], 1e-4, 1e-4);
  }
}

// A model of graph `g` at opset 13, its outputs `outs`.
inline model model_of(graph g, std::initializer_list<const char*> outs) {
  for (const char* o : outs) g.add_output(o);
  model m;
  m.opsets = {{"", 13}};
  m.graph = std::move(g);
  return m;
}

// The model in the blocked layout (`blocked_convs` convolutions converted) and in NCHW, on `threads` threads: the same
// outputs within check_close's tolerance.
inline void check_blocked_matches_plain(const model& m, const std::vector<named_tensor>& in, int threads, int blocked_convs) {
  CAPTURE(threads);
  session_options so;
  so.set_intra_op_threads(threads);
  so.set_config(config_keys::cpu_layout, "nchwc");
  auto blocked = cpu_session::create(m, so);
  so.set_config(config_keys::cpu_layout, "nchw");
  auto plain = cpu_session::create(m, so);
  REQUIRE_MESSAGE(blocked.has_value(), blocked.status().to_string());
  REQUIRE_MESSAGE(plain.has_value(), plain.status().to_string());
  CHECK(op_counts(blocked->get_model().graph).at(std::string(blocked_conv)) == blocked_convs);
  auto a = blocked->run(in);
  auto b = plain->run(in);
  REQUIRE_MESSAGE(a.has_value(), a.status().to_string());
  REQUIRE_MESSAGE(b.has_value(), b.status().to_string());
  check_close(*a, *b);
}

inline std::vector<named_tensor> inputs() {
  return {{"x", zoo::random_tensor({2, 24, 20, 20}, 101, 1.0f)}, {"img", zoo::random_tensor({2, 3, 17, 17}, 102, 1.0f)}};
}


}  // namespace epstack::nchwc_test
