// The CPU provider's blocked-channel layout (NCHWc): which nodes the pass converts, that every converted graph computes
// what the plain layout computes (convolutions of every kind the blocked kernels run, pools, element-wise nodes in the
// chain, values leaving the chain as graph outputs and to NCHW consumers), that a model holding the blocked
// nodes: saved as ONNX, they load and run again; and the kernels' refusals. The fused pair and Winograd are in
// test_nchwc_fused.cpp.
#include "nchwc_support.hpp"

using namespace epstack;
using namespace epstack::nchwc_test;

TEST_CASE("NCHWc: convolutions, pools and element-wise chains in the blocked layout compute what NCHW computes") {
  const auto m = layout_model();
  auto blocked = make(m, "nchwc");
  auto plain = make(m, "nchw");
  auto unoptimised = make(m, "nchwc", graph_optimization_level::disable);
  const auto counts = op_counts(blocked.get_model().graph);
  // dil, pw2 (+ the residual), wino (as Winograd), first, same: blocked; pw1 and dw, which alone reads pw1, one
  // PointwiseDepthwiseConv; grouped stays NCHW.
  CHECK(counts.at(std::string(blocked_conv)) == 5);
  CHECK(counts.at(std::string(pointwise_depthwise)) == 1);
  const auto count = [&](const std::string& k) { return counts.count(k) ? counts.at(k) : 0; };
  CHECK(count("com.microsoft.FusedConv") + count("Conv") == 1);
  int winograd = 0;
  for (node_id n = 0; n < blocked.get_model().graph.node_count(); ++n) {
    const auto& nd = blocked.get_model().graph.node(n);
    if (nd.domain == "com.epstack.nchwc16" && nd.op_type == "Conv" && attr_i(nd, "winograd", 0) == 2) {
      ++winograd;
      CHECK(nd.name == "wino");
    }
  }
  CHECK(winograd == 1);
  CHECK(counts.at("com.epstack.nchwc16.MaxPool") == 1);
  CHECK(counts.at("com.epstack.nchwc16.AveragePool") == 1);
  CHECK(counts.at("com.epstack.nchwc16.GlobalAveragePool") == 1);
  CHECK(counts.at("com.epstack.nchwc16.GlobalMaxPool") == 1);
  CHECK(counts.at("Mul") == 1);  // on blocked tensors
  CHECK(counts.at("com.epstack.nchwc16.ReorderInput") == 1);   // x (the first layer reads img as it is)
  CHECK(counts.at("com.epstack.nchwc16.ReorderOutput") >= 5);  // b, c (Transpose), gap, gmp, wino, k
  CHECK(op_counts(plain.get_model().graph).count(std::string(blocked_conv)) == 0);
  CHECK(blocked.get_model().opset("com.epstack.nchwc16") == 1);
  bool reported = false;
  for (const auto& f : blocked.optimizations().fusions) reported = reported || f.rfind("NCHWc layout", 0) == 0;
  CHECK(reported);
  // Every blocked node is the CPU provider's.
  for (node_id n = 0; n < blocked.get_model().graph.node_count(); ++n)
    CHECK(blocked.plan().main.nodes[n].provider == blocked.plan().cpu_provider);

  const auto in = inputs();
  auto a = blocked.run(in);
  auto b = plain.run(in);
  auto c = unoptimised.run(in);
  REQUIRE_MESSAGE(a.has_value(), a.status().to_string());
  REQUIRE_MESSAGE(b.has_value(), b.status().to_string());
  REQUIRE_MESSAGE(c.has_value(), c.status().to_string());
  check_close(*a, *b);
  check_close(*a, *c);
  // Runs reuse the session's plan: the second run gives the same bits.
  auto again = blocked.run(in);
  REQUIRE(again.has_value());
  for (std::size_t i = 0; i < a->size(); ++i)
    CHECK(std::memcmp((*a)[i].data(), (*again)[i].data(), (*a)[i].byte_size()) == 0);
}

// Rows wide enough for whole tiles with every tap inside the input (the kernels' fast path, strides 1 and 2): a first
// layer 7x7/2 on 130x130, a dense 3x3/2 and a 5x5/1 (not a Winograd shape), with 1, 2 and 3 output blocks (tiles of
// 24, 12 and 8 pixels) and a 3x3/2 with 8 (two sets), depthwise 3x3/1 (its own tile) and one dilated along H only,
// reorders in and out of several runs of pixels (full 16x16 tiles transposed in registers, partial ones and partial
// blocks), at 1, 2 and 3 threads, against NCHW.
TEST_CASE("NCHWc: whole tiles inside wide rows, strides 1 and 2, first layer and dense") {
  graph g("wide");
  g.add_input("img", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{1, 3, 130, 130})));
  conv_builder b{g, 40, 0.2f};
  const auto w = [&](std::string name, std::initializer_list<std::int64_t> d) { return b.weight(std::move(name), d); };
  const auto conv = [&](std::string name, std::vector<std::string> in, std::string out, attribute_list a) {
    b.conv(std::move(name), std::move(in), std::move(out), std::move(a));
  };
  conv("first", {"img", w("wf", {16, 3, 7, 7}), w("bf", {16})}, "a", attrs({ints("strides", {2, 2}), ints("pads", {3, 3, 3, 3})}));
  conv("s2", {"a", w("w2", {32, 16, 3, 3}), w("b2", {32})}, "b", attrs({ints("strides", {2, 2}), ints("pads", {1, 1, 1, 1})}));
  conv("k5", {"b", w("w3", {48, 32, 5, 5})}, "c0", attrs({ints("pads", {2, 2, 2, 2})}));
  g.add_node(test::op("leaky", "LeakyRelu"), {"c0"}, {"c"});  // fused: the dense tiles' LeakyRelu epilogue
  // Two sets of output blocks: at 1 and 2 threads each thread pads its own copy of X, once per call however many
  // chunks it takes; at 3 threads (and for the one-set layers above at 2) the threads share one copy.
  conv("s2w", {"c", w("w7", {128, 48, 3, 3}), w("b7", {128})}, "s", attrs({ints("strides", {2, 2}), ints("pads", {1, 1, 1, 1})}));
  conv("dw", {"c", w("w4", {48, 1, 3, 3}), w("b4", {48})}, "d", attrs({ints("pads", {1, 1, 1, 1}), one("group", 48)}));
  conv("dwh", {"d", w("w5", {48, 1, 3, 3})}, "e", attrs({ints("pads", {0, 1, 0, 1}), ints("dilations", {2, 1}), one("group", 48)}));
  // 20 channels of 1,600 pixels reordered in: runs of 512 pixels, a full block and one of 4 lanes.
  g.add_input("x2", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{1, 20, 40, 40})));
  conv("pw", {"x2", w("w6", {24, 20, 1, 1})}, "f", {});
  g.add_output("a");
  g.add_output("c");
  g.add_output("e");
  g.add_output("f");
  g.add_output("s");
  model m;
  m.opsets = {{"", 13}};
  m.graph = std::move(g);
  const std::vector<named_tensor> in{{"img", zoo::random_tensor({1, 3, 130, 130}, 140, 1.0f)},
                                     {"x2", zoo::random_tensor({1, 20, 40, 40}, 141, 1.0f)}};
  for (int threads : {1, 2, 3}) check_blocked_matches_plain(m, in, threads, 7);
}

// Pools on the blocked layout: windows inside the image take a path without bounds checks. A NaN input is skipped by
// MaxPool and GlobalMaxPool, inside the image as at its borders, as the NCHW kernels and the ONNX reference's pool()
// skip it (they once disagreed: the blocked kernels propagated it); AveragePool propagates it; -inf is an ordinary
// value. Against NCHW, NaN for NaN.
TEST_CASE("NCHWc: MaxPool and AveragePool inside and at the borders, NaN and -inf, the same as NCHW") {
  graph g("pools");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{1, 16, 9, 23})));
  conv_builder b{g, 16, 0.3f};
  b.conv("pw", {"x", b.weight("w", {16, 16, 1, 1})}, "c", {});
  g.add_node(test::op("mp_dil", "MaxPool", attrs({ints("kernel_shape", {3, 3}), ints("pads", {2, 2, 2, 2}), ints("dilations", {2, 2})})),
             {"c"}, {"m1"});
  g.add_node(test::op("mp_s2", "MaxPool", attrs({ints("kernel_shape", {2, 3}), ints("strides", {2, 2})})), {"c"}, {"m2"});
  g.add_node(test::op("ap", "AveragePool", attrs({ints("kernel_shape", {3, 3}), ints("pads", {1, 1, 1, 1})})), {"c"}, {"a1"});
  g.add_node(test::op("ap_pad", "AveragePool",
                      attrs({ints("kernel_shape", {3, 3}), ints("strides", {2, 2}), ints("pads", {0, 1, 1, 0}), one("count_include_pad", 1)})),
             {"c"}, {"a2"});
  g.add_node(test::op("gmp", "GlobalMaxPool"), {"c"}, {"g"});
  const model m = model_of(std::move(g), {"m1", "m2", "a1", "a2", "g"});
  tensor x = zoo::random_tensor({1, 16, 9, 23}, 150, 1.0f);
  float* px = x.typed<float>();
  // A NaN at pixel (4, 11) and at the right edge (2, 22), -inf at (6, 3): the 1x1 convolution spreads each to every
  // channel of its pixel.
  for (const auto& [h, w, v] : std::vector<std::tuple<int, int, float>>{
           {4, 11, std::numeric_limits<float>::quiet_NaN()}, {2, 22, std::numeric_limits<float>::quiet_NaN()},
           {6, 3, -std::numeric_limits<float>::infinity()}})
    px[(0 * 9 + h) * 23 + w] = v;  // channel 0
  auto blocked = make(m, "nchwc");
  auto plain = make(m, "nchw");
  CHECK(op_counts(blocked.get_model().graph).at("com.epstack.nchwc16.MaxPool") == 2);
  CHECK(op_counts(blocked.get_model().graph).at("com.epstack.nchwc16.AveragePool") == 2);
  CHECK(op_counts(blocked.get_model().graph).at("com.epstack.nchwc16.GlobalMaxPool") == 1);
  auto a = blocked.run({{"x", x}});
  auto r = plain.run({{"x", x}});
  REQUIRE_MESSAGE(a.has_value(), a.status().to_string());
  REQUIRE(r.has_value());
  for (std::size_t k = 0; k < a->size(); ++k) {
    CAPTURE(k);
    const tensor& got = (*a)[k];
    const tensor& want = (*r)[k];
    REQUIRE(got.element_count() == want.element_count());
    std::size_t nans = 0, bad = 0;
    for (std::size_t i = 0; i < got.element_count(); ++i) {
      const float u = got.typed<float>()[i], v = want.typed<float>()[i];
      if (std::isnan(v)) {
        ++nans;
        bad += std::isnan(u) ? 0 : 1;
      } else {
        bad += std::fabs(u - v) <= 1e-5f * (1.0f + std::fabs(v)) || u == v ? 0 : 1;
      }
    }
    CHECK(bad == 0);
    const bool averages = k == 2 || k == 3;
    if (averages) {
      CHECK(nans > 0);                         // the windows over the NaN pixels
      CHECK(nans < got.element_count() / 2);  // and not the others
    } else {
      CHECK(nans == 0);  // maxima skip NaN
    }
  }
}

// Dense convolutions on narrow images: padded columns (read from a copy with the padding written out), rows of 7 and
// 8 pixels at 4 output blocks (tiles of 4 and 3 or 4), several rows per work item with the input channels in more
// than one pass (5x5 filters of 2 input blocks), stride 2, a residual input; at 1 and 2 threads, against NCHW.
TEST_CASE("NCHWc: dense convolutions on narrow images, padded columns and rows grouped per work item") {
  for (std::int64_t width : {7, 8, 13, 15}) {
    CAPTURE(width);
    graph g("narrow");
    g.add_input("x", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{1, 32, 9, width})));
    conv_builder b{g, static_cast<std::uint64_t>(500 + width), 0.2f};
    const auto w = [&](std::string name, std::initializer_list<std::int64_t> d) { return b.weight(std::move(name), d); };
    b.conv("k5", {"x", w("w1", {64, 32, 5, 5}), w("b1", {64})}, "a", attrs({ints("pads", {2, 2, 2, 2})}));
    b.conv("s2", {"a", w("w2", {64, 64, 3, 3}), w("b2", {64})}, "c0", attrs({ints("strides", {2, 2}), ints("pads", {1, 1, 1, 1})}));
    g.add_node(test::op("relu", "Relu"), {"c0"}, {"c"});
    b.conv("k5b", {"a", w("w3", {64, 64, 5, 5})}, "d0", attrs({ints("pads", {2, 1, 2, 3})}));
    g.add_node(test::op("res", "Add"), {"d0", "a"}, {"d"});
    const model m = model_of(std::move(g), {"c", "d"});
    const std::vector<named_tensor> in{{"x", zoo::random_tensor({1, 32, 9, width}, 600 + static_cast<std::uint64_t>(width), 1.0f)}};
    for (int threads : {1, 2}) check_blocked_matches_plain(m, in, threads, 3);
  }
}

// A first layer (plain input of 3 channels) tiles each row's edge pixels (taps in the padding) apart from its
// interior: a 7x7 stride-2 with 3 columns of padding, a 3x3 stride-2 with 1, a 5x5 stride-1 with 3 on the left and 1
// on the right, over widths from 1 (all edge, no interior) to 40; 4, 2 and 1 output blocks; against NCHW at 1, 2 and
// 3 threads.
TEST_CASE("NCHWc: a first layer's rows tiled as left edge, interior and right edge, every width") {
  for (std::int64_t width : {1, 2, 3, 4, 5, 6, 7, 9, 12, 17, 25, 40}) {
    CAPTURE(width);
    graph g("first_edges");
    g.add_input("img", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{1, 3, 6, width})));
    conv_builder b{g, static_cast<std::uint64_t>(1500 + width), 0.2f};
    const auto w = [&](std::string name, std::initializer_list<std::int64_t> d) { return b.weight(std::move(name), d); };
    b.conv("k7", {"img", w("w1", {64, 3, 7, 7}), w("b1", {64})}, "a", attrs({ints("strides", {2, 2}), ints("pads", {3, 3, 3, 3})}));
    b.conv("k3", {"img", w("w2", {32, 3, 3, 3}), w("b2", {32})}, "c", attrs({ints("strides", {2, 2}), ints("pads", {1, 1, 1, 1})}));
    b.conv("k5", {"img", w("w3", {16, 3, 5, 5})}, "d", attrs({ints("pads", {2, 3, 2, 1})}));
    const model m = model_of(std::move(g), {"a", "c", "d"});
    const std::vector<named_tensor> in{{"img", zoo::random_tensor({1, 3, 6, width}, 1600 + static_cast<std::uint64_t>(width), 1.0f)}};
    for (int threads : {1, 2, 3}) check_blocked_matches_plain(m, in, threads, 3);
  }
}

// Stride-2 convolutions whose rows reach into the padding only at their first pixel (a 3x3 with one column of
// padding over an even width, a 5x5 and a dilated 3x3 with two columns on the left only, a 3x3 with one on the left
// only) read X as it is, no padded copy: each row's first tile reads zeros for that pixel's taps left of the row. Rows
// of 4 to 16 outputs (first tiles of 4 and of a whole 24 / NB), 1 to 4 output blocks and two sets of 4, Relu and a
// residual in the epilogue, against NCHW at 1, 2 and 3 threads; at the odd width the symmetric 3x3s' last pixel is in
// the padding too (they keep the copy) while the left-only one still reads X.
TEST_CASE("NCHWc: stride-2 rows padded at their first pixel only read X without a padded copy") {
  for (const std::int64_t width : {8, 12, 14, 28, 32, 13}) {
    CAPTURE(width);
    graph g("left");
    g.add_input("x", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{1, 32, 6, width})));
    conv_builder b{g, static_cast<std::uint64_t>(700 + width), 0.2f};
    const auto w = [&](std::string name, std::initializer_list<std::int64_t> d) { return b.weight(std::move(name), d); };
    const auto s2 = [](std::vector<std::int64_t> pads, std::int64_t dil) {
      return attrs({ints("strides", {2, 2}), ints("pads", std::move(pads)), ints("dilations", {dil, dil})});
    };
    std::vector<std::string> outs;
    for (const std::int64_t m : {16, 32, 48, 64, 128}) {
      const std::string k = std::to_string(m);
      b.conv("c3_" + k, {"x", w("w3_" + k, {m, 32, 3, 3}), w("b3_" + k, {m})}, "y3_" + k + "r", s2({1, 1, 1, 1}, 1));
      g.add_node(test::op("relu" + k, "Relu"), {"y3_" + k + "r"}, {"y3_" + k});
      outs.push_back("y3_" + k);
    }
    b.conv("c5", {"x", w("w5", {48, 32, 5, 5})}, "y5", s2({2, 2, 2, 0}, 1));
    b.conv("cd", {"x", w("wd", {32, 32, 3, 3}), w("bd", {32})}, "yd", s2({2, 2, 2, 0}, 2));
    // Padding on the left only (the right edge needs none at an even width).
    b.conv("cl", {"x", w("wl", {64, 32, 3, 3})}, "yl", s2({1, 1, 0, 0}, 1));
    // A residual over the 64-channel output, added in the epilogue.
    b.conv("cs", {"x", w("ws", {64, 32, 3, 3})}, "ys0", s2({1, 1, 1, 1}, 1));
    g.add_node(test::op("res", "Add"), {"ys0", "y3_64"}, {"ys"});
    for (const char* o : {"y5", "yd", "yl", "ys"}) outs.emplace_back(o);
    for (const auto& o : outs) g.add_output(o);
    model m;
    m.opsets = {{"", 13}};
    m.graph = std::move(g);
    const std::vector<named_tensor> in{{"x", zoo::random_tensor({1, 32, 6, width}, 800 + static_cast<std::uint64_t>(width), 1.0f)}};
    for (int threads : {1, 2, 3}) check_blocked_matches_plain(m, in, threads, 9);
  }
}

// 1x1 convolutions at strides above 1 (ResNet's downsampling layers) run over a copy of the pixels they read, side by
// side, as one flat row: odd and even sizes, strides 2x2, 3x3 and 2x1, a padded end (inside the copy's reach), two sets
// of output blocks (each thread its own copy at 1 and 2 threads) and one (a copy shared by the threads), a residual
// added in the epilogue, a batch of 2 (the shared copy), and a padded start, which keeps the strided tiles; against
// NCHW at 1, 2 and 3 threads.
TEST_CASE("NCHWc: strided 1x1 convolutions read a copy of their pixels as one flat row") {
  for (const auto& [batch, size] : {std::pair<std::int64_t, std::int64_t>{1, 14}, {1, 7}, {1, 13}, {2, 9}}) {
    CAPTURE(batch);
    CAPTURE(size);
    graph g("strided_1x1");
    g.add_input("x", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{batch, 32, size, size})));
    conv_builder b{g, static_cast<std::uint64_t>(800 + size), 0.2f};
    const auto w = [&](std::string name, std::initializer_list<std::int64_t> d) { return b.weight(std::move(name), d); };
    b.conv("head", {"x", w("w0", {32, 32, 3, 3}), w("b0", {32})}, "a", attrs({ints("pads", {1, 1, 1, 1})}));
    b.conv("down", {"a", w("w1", {128, 32, 1, 1}), w("b1", {128})}, "d", attrs({ints("strides", {2, 2})}));
    b.conv("down3", {"a", w("w2", {48, 32, 1, 1})}, "e", attrs({ints("strides", {3, 3})}));
    b.conv("tall", {"a", w("w3", {32, 32, 1, 1}), w("b3", {32})}, "f", attrs({ints("strides", {2, 1})}));
    b.conv("end", {"a", w("w4", {64, 32, 1, 1})}, "h", attrs({ints("strides", {2, 2}), ints("pads", {0, 0, 1, 1})}));
    b.conv("start", {"a", w("w5", {32, 32, 1, 1})}, "k", attrs({ints("strides", {2, 2}), ints("pads", {1, 1, 0, 0})}));
    // A residual the same shape as the downsampled branch, added by the convolution's epilogue.
    b.conv("branch", {"a", w("w6", {128, 32, 3, 3}), w("b6", {128})}, "r", attrs({ints("strides", {2, 2}), ints("pads", {1, 1, 1, 1})}));
    b.conv("sum", {"a", w("w7", {128, 32, 1, 1})}, "s0", attrs({ints("strides", {2, 2})}));
    g.add_node(test::op("res", "Add"), {"s0", "r"}, {"s1"});
    g.add_node(test::op("relu", "Relu"), {"s1"}, {"s"});
    const model m = model_of(std::move(g), {"d", "e", "f", "h", "k", "s"});
    const std::vector<named_tensor> in{{"x", zoo::random_tensor({batch, 32, size, size}, 900 + static_cast<std::uint64_t>(size), 1.0f)}};
    for (int threads : {1, 2, 3}) check_blocked_matches_plain(m, in, threads, 8);
  }
}

// Input channels are accumulated in one pass while a set of output blocks' filters fits in about 1 MiB, else in equal
// passes that store and reload the accumulators: 3x3 filters of 528 input channels (33 blocks, 1.16 MiB a set of 4
// output blocks). Rows of 136 pixels on one thread (items of 34 KiB of partial sums) take two passes, of 17 and 16
// blocks; items of 68 pixels (two threads) or 9 (rows of 9), 33 passes of one block. The bias and the activation are applied once, after the last pass. The
// residual (the blocked copy of input r, read by nothing else) is lent to Y: the first pass starts from it.
TEST_CASE("NCHWc: a dense convolution whose filters take several passes over the input channels") {
  for (std::int64_t width : {9, 136}) {
    CAPTURE(width);
    graph g("passes");
    g.add_input("x", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{1, 528, 6, width})));
    g.add_input("r", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{1, 64, 6, width})));
    conv_builder b{g, 700, 0.05f};
    const auto w = [&](std::string name, std::initializer_list<std::int64_t> d) { return b.weight(std::move(name), d); };
    b.conv("big", {"x", w("w1", {64, 528, 3, 3}), w("b1", {64})}, "a0", attrs({ints("pads", {1, 1, 1, 1})}));
    g.add_node(test::op("res", "Add"), {"a0", "r"}, {"a1"});
    g.add_node(test::op("relu", "Relu"), {"a1"}, {"a"});
    const model m = model_of(std::move(g), {"a"});
    const std::vector<named_tensor> in{{"x", zoo::random_tensor({1, 528, 6, width}, 701, 1.0f)},
                                       {"r", zoo::random_tensor({1, 64, 6, width}, 702, 1.0f)}};
    for (int threads : {1, 2}) check_blocked_matches_plain(m, in, threads, 1);
  }
}

// Depthwise convolutions three taps wide (stride 1 and 2, their own tiles over whole rows): every row width from 1 to
// 17 pixels and 33, so that tiles of 8 pixels fall on both edges and inside and every remainder (1-7 pixels) occurs at
// both strides; padding on one side only, five taps down, a residual input, Clip and LeakyRelu in registers; against
// NCHW.
TEST_CASE("NCHWc: depthwise 3-wide rows of every width and remainder, strides 1 and 2") {
  for (std::int64_t width = 1; width <= 33; width += width < 17 ? 1 : 16) {
    CAPTURE(width);
    graph g("dw_rows");
    g.add_input("x", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{1, 32, 5, width})));
    conv_builder b{g, static_cast<std::uint64_t>(200 + width), 0.4f};
    const auto w = [&](std::string name, std::initializer_list<std::int64_t> d) { return b.weight(std::move(name), d); };
    b.conv("s1", {"x", w("w1", {32, 1, 3, 3}), w("b1", {32})}, "a0", attrs({ints("pads", {1, 1, 1, 1}), one("group", 32)}));
    g.add_initializer("lo", tensor::scalar(-0.5f));
    g.add_initializer("hi", tensor::scalar(0.75f));
    g.add_node(test::op("clip", "Clip"), {"a0", "lo", "hi"}, {"a"});
    b.conv("s2", {"a", w("w2", {32, 1, 3, 3}), w("b2", {32})}, "c0",
           attrs({ints("strides", {2, 2}), ints("pads", {1, 1, 1, 1}), one("group", 32)}));
    g.add_node(test::op("leaky", "LeakyRelu"), {"c0"}, {"c"});  // fused: the tiles' LeakyRelu epilogue
    // Five rows of taps, no left padding and two pixels on the right; its output added to the Clip's (Z of FusedConv).
    b.conv("k5", {"a", w("w3", {32, 1, 5, 3})}, "d0", attrs({ints("pads", {2, 0, 2, 2}), one("group", 32)}));
    g.add_node(test::op("res", "Add"), {"d0", "a"}, {"d"});
    const model m = model_of(std::move(g), {"c", "d"});
    const std::vector<named_tensor> in{{"x", zoo::random_tensor({1, 32, 5, width}, 300 + static_cast<std::uint64_t>(width), 1.0f)}};
    check_blocked_matches_plain(m, in, 1, 3);
  }
}

// 1x1 convolutions to 8 more channels than a multiple of 16 (24: two blocks, 40: three, 56: four): whole tiles of the
// last set of blocks compute the last block's 8 real lanes in 8-float vectors (conv_view::y_half). With bias or
// without, a residual, in-register and stored-row activations, one pass and several over 4352 input channels (more
// filters than a pass takes; with a residual, lent to Y, the first pass starts from it), two images; against NCHW.
TEST_CASE("NCHWc: 1x1 convolutions whose last output block has 8 channels compute what NCHW computes") {
  struct half_case {
    std::int64_t cin, cout, hw;
    const char* act;  // "" none, or an activation node after the convolution (the residual's Add comes first)
    bool bias, residual;
  };
  for (const auto& hc : std::vector<half_case>{{32, 24, 9, "Relu", true, false},
                                               {48, 40, 7, "LeakyRelu", true, true},
                                               {64, 56, 6, "", false, false},
                                               {24, 24, 13, "Sigmoid", true, true},
                                               {4352, 24, 4, "Relu", true, false},
                                               {4352, 24, 4, "Relu", true, true}}) {
    CAPTURE(hc.cin);
    CAPTURE(hc.cout);
    graph g("half");
    const auto f32 = [](std::vector<std::int64_t> d) { return type_info::tensor_of(element_type::float32, shape::of(std::move(d))); };
    g.add_input("x", f32({2, hc.cin, hc.hw, hc.hw}));
    if (hc.residual) g.add_input("z", f32({2, hc.cout, hc.hw, hc.hw}));
    // Weights within +-0.02 over 4352 channels: sums of the same size as the others', whose rounding stays within tolerance.
    conv_builder b{g, static_cast<std::uint64_t>(900 + hc.cout), hc.cin > 1000 ? 0.02f : 0.3f};
    // The input through a 1x1 convolution first, so that the convolution under test reads a blocked tensor.
    b.conv("pre", {"x", b.weight("w0", {hc.cin, hc.cin, 1, 1})}, "x1", {});
    std::vector<std::string> in{"x1", b.weight("w1", {hc.cout, hc.cin, 1, 1})};
    if (hc.bias) in.push_back(b.weight("b1", {hc.cout}));
    b.conv("pw", in, "y0", {});
    std::string y = "y0";
    if (hc.residual) {
      g.add_node(test::op("res", "Add"), {y, "z"}, {"y1"});
      y = "y1";
    }
    if (*hc.act != 0) {
      g.add_node(test::op("act", hc.act), {y}, {"y2"});
      y = "y2";
    }
    const model m = model_of(std::move(g), {y.c_str()});
    std::vector<named_tensor> feeds{{"x", zoo::random_tensor({2, hc.cin, hc.hw, hc.hw}, 950 + static_cast<std::uint64_t>(hc.cin), 1.0f)}};
    if (hc.residual) feeds.push_back({"z", zoo::random_tensor({2, hc.cout, hc.hw, hc.hw}, 951, 1.0f)});
    for (const int threads : {1, 2}) check_blocked_matches_plain(m, feeds, threads, 2);
  }
}

// The padded lanes the blocked 1x1 kernels skip are the padding alone: a real channel pruned to zero filters is still
// multiplied, so an infinity in it gives NaN as in NCHW (0 x inf). A fused pair whose last real input channel has
// zero filters, and a 32-channel 1x1 whose last 8 output channels have zero filters and bias (not padding: computed
// in full), both reading an input with an infinite channel.
TEST_CASE("NCHWc: real channels with zero filters are computed, not skipped as padding: an infinity gives NaN as in NCHW") {
  const auto same_nan = [](const tensor& a, const tensor& b) {
    REQUIRE(a.element_count() == b.element_count());
    const float* pa = a.typed<float>();
    const float* pb = b.typed<float>();
    std::size_t nans = 0;
    for (std::size_t i = 0; i < a.element_count(); ++i) {
      CAPTURE(i);
      REQUIRE(std::isnan(pa[i]) == std::isnan(pb[i]));
      if (std::isnan(pa[i])) ++nans;
      else if (std::isinf(pb[i])) CHECK(pa[i] == pb[i]);
      else CHECK(std::fabs(pa[i] - pb[i]) <= 1e-4 + 1e-4 * std::fabs(pb[i]));
    }
    return nans;
  };
  const auto zero_channels = [](tensor& t, std::int64_t per, std::int64_t first, std::int64_t last, bool inputs) {
    // t [O, I, 1, 1]: zero input channels [first, last) of every filter (inputs) or filters [first, last) (outputs).
    float* d = reinterpret_cast<float*>(t.mutable_data());
    const std::int64_t O = t.sizes()[0], I = t.sizes()[1];
    for (std::int64_t o = 0; o < O; ++o)
      for (std::int64_t i = 0; i < I; ++i)
        if (inputs ? (i >= first && i < last) : (o >= first && o < last)) d[o * I + i] = 0.0f;
    (void)per;
  };
  {
    graph g("pruned_in");
    g.add_input("x", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{1, 24, 6, 6})));
    tensor w1 = zoo::random_tensor({48, 24, 1, 1}, 61, 0.3f);
    zero_channels(w1, 1, 23, 24, true);
    g.add_initializer("w1", std::move(w1));
    g.add_initializer("w2", zoo::random_tensor({48, 1, 3, 3}, 62, 0.3f));
    g.add_node(test::op("pw", "Conv"), {"x", "w1"}, {"a"});
    g.add_node(test::op("dw", "Conv", attrs({ints("pads", {1, 1, 1, 1}), one("group", 48)})), {"a", "w2"}, {"y"});
    const model m = model_of(std::move(g), {"y"});
    tensor x = zoo::random_tensor({1, 24, 6, 6}, 63, 1.0f);
    float* px = reinterpret_cast<float*>(x.mutable_data());
    for (std::int64_t k = 0; k < 36; ++k) px[23 * 36 + k] = std::numeric_limits<float>::infinity();
    auto blocked = make(m, "nchwc");
    auto plain = make(m, "nchw");
    CHECK(op_counts(blocked.get_model().graph).at(std::string(pointwise_depthwise)) == 1);
    auto a = blocked.run({{"x", x}});
    auto b = plain.run({{"x", x}});
    REQUIRE((a.has_value() && b.has_value()));
    CHECK(same_nan((*a)[0], (*b)[0]) == (*b)[0].element_count());  // every output reads channel 23 through 0 x inf
  }
  {
    graph g("pruned_out");
    g.add_input("x", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{1, 32, 5, 5})));
    tensor w = zoo::random_tensor({32, 32, 1, 1}, 64, 0.3f);
    zero_channels(w, 1, 24, 32, false);
    tensor bias = zoo::random_tensor({32}, 65, 0.3f);
    std::memset(reinterpret_cast<float*>(bias.mutable_data()) + 24, 0, 8 * sizeof(float));
    g.add_initializer("w", std::move(w));
    g.add_initializer("b", std::move(bias));
    g.add_node(test::op("pw", "Conv"), {"x", "w", "b"}, {"y"});
    const model m = model_of(std::move(g), {"y"});
    tensor x = zoo::random_tensor({1, 32, 5, 5}, 66, 1.0f);
    reinterpret_cast<float*>(x.mutable_data())[3] = std::numeric_limits<float>::infinity();  // channel 0, one pixel
    auto blocked = make(m, "nchwc");
    auto plain = make(m, "nchw");
    auto a = blocked.run({{"x", x}});
    auto b = plain.run({{"x", x}});
    REQUIRE((a.has_value() && b.has_value()));
    CHECK(same_nan((*a)[0], (*b)[0]) >= 8);  // pixel 3 of channels 24-31 at least
  }
}

TEST_CASE("NCHWc: a residual network converts whole and matches NCHW at 1 and 3 threads") {
  const auto m = zoo::make_convnet({16, 32, 48}, 28, 10);
  for (int threads : {1, 3}) {
    session_options so;
    so.set_intra_op_threads(threads);
    auto blocked = cpu_session::create(m, so);
    so.set_config(config_keys::cpu_layout, "nchw");
    auto plain = cpu_session::create(m, so);
    REQUIRE(blocked.has_value());
    REQUIRE(plain.has_value());
    CHECK(op_counts(blocked->get_model().graph).count(std::string(blocked_conv)) == 1);
    const auto x = zoo::random_tensor({3, 3, 28, 28}, 7, 1.0f);
    auto a = blocked->run({{"image", x}});
    auto b = plain->run({{"image", x}});
    REQUIRE_MESSAGE(a.has_value(), a.status().to_string());
    REQUIRE(b.has_value());
    check_close(*a, *b);
  }
}

TEST_CASE("NCHWc: the blocked graph saved as ONNX loads and runs again (what an EPContext model holds of the CPU's part)") {
  // A context model keeps the nodes the CPU provider runs as they are after partitioning: here, blocked nodes of a
  // domain the onnx package does not know, whose values keep their types through value_info.
  test::temp_dir dir;
  auto blocked = make(layout_model(), "nchwc");
  const auto path = dir.path() / "blocked.onnx";
  REQUIRE(save_model(blocked.get_model(), path).is_ok());
  auto saved = load_model(path);
  REQUIRE_MESSAGE(saved.has_value(), saved.status().to_string());
  CHECK(op_counts(saved->graph).at(std::string(blocked_conv)) == 5);
  CHECK(op_counts(saved->graph).at(std::string(pointwise_depthwise)) == 1);
  CHECK(saved->opset("com.epstack.nchwc16") == 1);
  auto loaded = cpu_session::create(path);
  REQUIRE_MESSAGE(loaded.has_value(), loaded.status().to_string());
  CHECK(op_counts(loaded->get_model().graph).at(std::string(blocked_conv)) == 5);  // not converted twice
  CHECK(op_counts(loaded->get_model().graph).at(std::string(pointwise_depthwise)) == 1);
  auto plain = make(layout_model(), "nchw");
  const auto in = inputs();
  auto a = loaded->run(in);
  auto b = plain.run(in);
  REQUIRE_MESSAGE(a.has_value(), a.status().to_string());
  REQUIRE(b.has_value());
  check_close(*a, *b);
}

TEST_CASE("NCHWc: the option's values, and the blocked kernels' refusals name what is wrong") {
  const auto m = layout_model();
  session_options so;
  so.set_config(config_keys::cpu_layout, "nhwc");
  auto bad = cpu_session::create(m, so);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.code() == errc::invalid_argument);
  CHECK(bad.status().message().find("epstack.cpu_layout") != std::string::npos);
  // Below the `all` level the layout does not change.
  auto extended = make(m, "nchwc", graph_optimization_level::extended);
  CHECK(op_counts(extended.get_model().graph).count(std::string(blocked_conv)) == 0);

  // A hand-written blocked Conv whose filter count is not a multiple of 16, and a ReorderOutput asked for more
  // channels than its input has.
  graph g("refusals");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{1, 16, 4, 4}));
  g.add_initializer("w", zoo::random_tensor({20, 16, 1, 1}, 3, 1.0f));
  node c = test::op("bad_conv", "Conv");
  c.domain = "com.epstack.nchwc16";
  g.add_node(c, {"x", "w"}, {"y"});
  node r = test::op("bad_out", "ReorderOutput", attrs({one("channels", 40)}));
  r.domain = "com.epstack.nchwc16";
  g.add_node(r, {"x"}, {"z"});
  g.add_output("y", type_info::tensor_of(element_type::float32));
  g.add_output("z", type_info::tensor_of(element_type::float32));
  model bm;
  bm.opsets = {{"", 13}, {"com.epstack.nchwc16", 1}};
  bm.graph = std::move(g);
  auto s = cpu_session::create(bm);
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  auto out = s->run({{"x", zoo::random_tensor({1, 16, 4, 4}, 4, 1.0f)}});
  REQUIRE_FALSE(out.has_value());
  CHECK(out.code() == errc::invalid_argument);
  const auto msg = out.status().message();
  CHECK((msg.find("not a multiple of 16") != std::string::npos || msg.find("at least 40 channels") != std::string::npos));

  // A Winograd node whose filters are not the 16 transformed sets, and one with a stride: refused, saying why.
  for (const bool strided : {false, true}) {
    graph wg("winograd_refusals");
    wg.add_input("x", type_info::tensor_of(element_type::float32, shape{1, 16, 8, 8}));
    wg.add_initializer("w", zoo::random_tensor({16, 16, strided ? 4 : 3, strided ? 4 : 3}, 5, 1.0f));
    attribute_list wa = attrs({one("winograd", 2), ints("kernel_shape", {3, 3}), ints("pads", {1, 1, 1, 1})});
    if (strided) wa.set(ints("strides", {2, 2}));
    node wc = test::op("bad_winograd", "Conv", wa);
    wc.domain = "com.epstack.nchwc16";
    wg.add_node(wc, {"x", "w"}, {"y"});
    wg.add_output("y", type_info::tensor_of(element_type::float32));
    model wm;
    wm.opsets = {{"", 13}, {"com.epstack.nchwc16", 1}};
    wm.graph = std::move(wg);
    auto ws = cpu_session::create(wm);
    REQUIRE_MESSAGE(ws.has_value(), ws.status().to_string());
    auto wout = ws->run({{"x", zoo::random_tensor({1, 16, 8, 8}, 6, 1.0f)}});
    REQUIRE_FALSE(wout.has_value());
    CHECK(wout.code() == errc::invalid_argument);
    CHECK(wout.status().message().find(strided ? "unit strides" : "W [M, C, 4, 4]") != std::string::npos);
  }
  // A Winograd node with an activation the kernel cannot apply in registers: refused when it runs.
  {
    graph sg("winograd_sigmoid");
    sg.add_input("x", type_info::tensor_of(element_type::float32, shape{1, 16, 8, 8}));
    sg.add_initializer("w", zoo::random_tensor({16, 16, 4, 4}, 8, 1.0f));
    node sc = test::op("wino_sigmoid", "Conv",
                       attrs({one("winograd", 2), ints("kernel_shape", {3, 3}), ints("pads", {1, 1, 1, 1}), text("activation", "Sigmoid")}));
    sc.domain = "com.epstack.nchwc16";
    sg.add_node(sc, {"x", "w"}, {"y"});
    sg.add_output("y", type_info::tensor_of(element_type::float32));
    model sm;
    sm.opsets = {{"", 13}, {"com.epstack.nchwc16", 1}};
    sm.graph = std::move(sg);
    auto ss = cpu_session::create(sm);
    REQUIRE_MESSAGE(ss.has_value(), ss.status().to_string());
    auto sout = ss->run({{"x", zoo::random_tensor({1, 16, 8, 8}, 9, 1.0f)}});
    REQUIRE_FALSE(sout.has_value());
    CHECK(sout.code() == errc::invalid_argument);
    CHECK(sout.status().message().find("none, Relu, Clip or LeakyRelu") != std::string::npos);
  }
  // An output tile the kernel does not have: the session is not created, and the message names the node.
  graph tg("winograd_tile");
  tg.add_input("x", type_info::tensor_of(element_type::float32, shape{1, 16, 8, 8}));
  tg.add_initializer("w", zoo::random_tensor({16, 16, 5, 5}, 7, 1.0f));
  node tc = test::op("tile3", "Conv", attrs({one("winograd", 3), ints("kernel_shape", {3, 3}), ints("pads", {1, 1, 1, 1})}));
  tc.domain = "com.epstack.nchwc16";
  tg.add_node(tc, {"x", "w"}, {"y"});
  tg.add_output("y", type_info::tensor_of(element_type::float32));
  model tm;
  tm.opsets = {{"", 13}, {"com.epstack.nchwc16", 1}};
  tm.graph = std::move(tg);
  auto ts = cpu_session::create(tm);
  REQUIRE_FALSE(ts.has_value());
  CHECK(ts.code() == errc::invalid_argument);
  CHECK(ts.status().message().find("tile3") != std::string::npos);
  CHECK(ts.status().message().find("winograd is 3") != std::string::npos);
}
