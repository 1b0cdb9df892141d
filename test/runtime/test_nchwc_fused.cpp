// The CPU provider's blocked layout, its fused and alternative kernels: a 1x1 convolution fused with the depthwise one
// that reads it (PointwiseDepthwiseConv), which nodes the layout pass says it rewrote, and Winograd convolutions on the
// blocked layout; each against the plain layout (NCHW).
#include "nchwc_support.hpp"

using namespace epstack;
using namespace epstack::nchwc_test;

namespace {
// Activation nodes after a convolution ("": none; Clip between the graph's initializers lo and hi).
struct activations {
  graph& g;
  explicit activations(graph& gr) : g(gr) {
    g.add_initializer("lo", tensor::scalar(-0.25f));
    g.add_initializer("hi", tensor::scalar(0.8f));
  }
  std::string operator()(const std::string& kind, const std::string& in, const std::string& out) const {
    if (kind.empty()) return in;
    if (kind == "Clip") g.add_node(test::op(out + "_act", kind), {in, "lo", "hi"}, {out});
    else g.add_node(test::op(out + "_act", kind), {in}, {out});
    return out;
  }
};
// The head of a MobileNet block over graph input x: a convolution (filters `w1`, attributes `pw_attrs`) and its
// activation, a depthwise convolution (filters `w2`, `dw_attrs`) and its activation, with biases when `bias`; the
// last value is named `out`.
struct block_head {
  std::vector<std::int64_t> w1;
  attribute_list pw_attrs;
  std::string pw_act;
  std::vector<std::int64_t> w2;
  attribute_list dw_attrs;
  std::string dw_act;
  bool bias;
};
std::string add_head(conv_builder& b, const activations& act, const block_head& h, const std::string& out) {
  std::vector<std::string> pw_in{"x", b.weight("w1", h.w1)};
  if (h.bias) pw_in.push_back(b.weight("b1", {h.w1[0]}));
  b.conv("pw", pw_in, "a0", h.pw_attrs);
  const std::string a = act(h.pw_act, "a0", "a");
  std::vector<std::string> dw_in{a, b.weight("w2", h.w2)};
  if (h.bias) dw_in.push_back(b.weight("b2", {h.w2[0]}));
  b.conv("dw", dw_in, "c0", h.dw_attrs);
  return act(h.dw_act, "c0", out);
}

// One model of a convolution and the depthwise one that reads it (and `convs` - 2 more: a projection), run fused,
// unfused (epstack.cpu_fuse_depthwise = 0) and plain (NCHW) on `threads` threads; the fused plan has one
// PointwiseDepthwiseConv and no blocked Conv, the unfused one `convs` blocked Convs.
struct three_runs {
  std::vector<tensor> fused, unfused, plain;
};
three_runs run_fused_unfused_plain(const model& m, const std::vector<named_tensor>& in, int threads, int convs = 2) {
  session_options so;
  so.set_intra_op_threads(threads);
  auto fused = cpu_session::create(m, so);
  so.set_config(config_keys::cpu_fuse_depthwise, "0");
  auto unfused = cpu_session::create(m, so);
  so.set_config(config_keys::cpu_layout, "nchw");
  auto plain = cpu_session::create(m, so);
  REQUIRE_MESSAGE(fused.has_value(), fused.status().to_string());
  REQUIRE_MESSAGE(unfused.has_value(), unfused.status().to_string());
  REQUIRE_MESSAGE(plain.has_value(), plain.status().to_string());
  const auto fc_counts = op_counts(fused->get_model().graph);
  CHECK(fc_counts.at(std::string(pointwise_depthwise)) == 1);
  CHECK(fc_counts.count(std::string(blocked_conv)) == 0);
  const auto uc_counts = op_counts(unfused->get_model().graph);
  CHECK(uc_counts.count(std::string(pointwise_depthwise)) == 0);
  CHECK(uc_counts.at(std::string(blocked_conv)) == convs);
  auto r_fused = fused->run(in);
  auto r_unfused = unfused->run(in);
  auto r_plain = plain->run(in);
  REQUIRE_MESSAGE(r_fused.has_value(), r_fused.status().to_string());
  REQUIRE_MESSAGE(r_unfused.has_value(), r_unfused.status().to_string());
  REQUIRE_MESSAGE(r_plain.has_value(), r_plain.status().to_string());
  return {std::move(*r_fused), std::move(*r_unfused), std::move(*r_plain)};
}
}  // namespace

// PointwiseDepthwiseConv: a 1x1 convolution and the depthwise convolution that alone reads it, fused (the expansion's
// rows computed into a buffer of a few rows as the depthwise rows need them). At 1, 2 and 3 threads, against NCHW and
// bit for bit against the two blocked convolutions unfused (epstack.cpu_fuse_depthwise = 0: the same tile kernels in
// the same order): channel counts that are not multiples of 16 (24 in; 40 and 144 out: 3 and 9 blocks), one block, 20
// blocks (sets of 3 or 4, bands of rows), strides 1 and 2 (and 2 across only), rows too wide for the buffer to hold a
// band's inputs (it slides over 600 and 401 pixels), a dilated 3x3, a 5x3 window with asymmetric pads, pads wider
// than the window (output rows of padding alone), no biases, Sigmoid on the 1x1 (not an in-register activation) and
// HardSigmoid on the depthwise one, Relu, Clip and LeakyRelu, two images.
TEST_CASE("NCHWc: a 1x1 convolution fused with the depthwise convolution that reads it computes what NCHW computes") {
  struct fused_case {
    std::int64_t n, cin, m, h, w;
    std::vector<std::int64_t> strides, pads, dilations, kernel;  // the depthwise window
    std::string pw_act, dw_act;                                    // activation nodes after each ("": none)
    bool bias;
  };
  const std::vector<fused_case> cases{
      {1, 24, 144, 20, 20, {1, 1}, {1, 1, 1, 1}, {1, 1}, {3, 3}, "Clip", "Clip", true},
      {2, 16, 40, 9, 13, {2, 2}, {1, 1, 1, 1}, {1, 1}, {3, 3}, "Relu", "Relu", true},
      {1, 16, 64, 9, 600, {1, 1}, {1, 1, 1, 1}, {1, 1}, {3, 3}, "LeakyRelu", "", true},
      {1, 32, 48, 11, 401, {2, 2}, {1, 1, 1, 1}, {1, 1}, {3, 3}, "Relu", "Clip", false},
      {1, 40, 320, 7, 7, {1, 1}, {1, 1, 1, 1}, {1, 1}, {3, 3}, "Clip", "Clip", true},
      {1, 16, 32, 12, 12, {1, 1}, {2, 2, 2, 2}, {2, 2}, {3, 3}, "Sigmoid", "HardSigmoid", true},
      {1, 16, 16, 10, 9, {1, 2}, {2, 0, 2, 2}, {1, 1}, {5, 3}, "", "LeakyRelu", false},
      {1, 16, 32, 5, 6, {1, 1}, {3, 1, 4, 1}, {1, 1}, {3, 3}, "Relu", "", true},
  };
  std::uint64_t seed = 500;
  for (const auto& fc : cases) {
    CAPTURE(fc.cin);
    CAPTURE(fc.m);
    CAPTURE(fc.h);
    CAPTURE(fc.w);
    CAPTURE(fc.strides[0]);
    graph g("pw_dw");
    g.add_input("x", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{fc.n, fc.cin, fc.h, fc.w})));
    conv_builder b{g, seed, 0.3f};
    seed += 10;
    const activations act{g};
    const std::string y =
        add_head(b, act,
                 {{fc.m, fc.cin, 1, 1}, {}, fc.pw_act, {fc.m, 1, fc.kernel[0], fc.kernel[1]},
                  attrs({ints("strides", fc.strides), ints("pads", fc.pads), ints("dilations", fc.dilations), one("group", fc.m)}),
                  fc.dw_act, fc.bias},
                 "y");
    const model m = model_of(std::move(g), {y.c_str()});
    const std::vector<named_tensor> in{{"x", zoo::random_tensor({fc.n, fc.cin, fc.h, fc.w}, seed++, 1.0f)}};
    for (const int threads : {1, 2, 3}) {
      CAPTURE(threads);
      const three_runs r = run_fused_unfused_plain(m, in, threads);
      check_close(r.fused, r.plain);
      REQUIRE(r.fused[0].byte_size() == r.unfused[0].byte_size());
      CHECK(std::memcmp(r.fused[0].data(), r.unfused[0].data(), r.fused[0].byte_size()) == 0);
    }
  }
}

// PointwiseDepthwiseConv whose first convolution is a first layer (X plain, fewer than 16 channels, any window:
// MobileNet's stem, 3x3 stride 2 into a depthwise 3x3): its output rows computed into the buffer as a window shifted
// down by the rows already dropped. At 1, 2 and 3 threads against NCHW and against the two blocked convolutions
// unfused: the stem's shape on an odd image, two images, one channel with a 5x5 window, a 7x7 stride-2 layer with
// asymmetric pads into a stride-2 depthwise one, rows wide enough that the buffer slides (W 900), SAME_UPPER padding,
// a 1x1 first layer, Sigmoid on the first convolution (applied over the buffer's rows), no biases.
TEST_CASE("NCHWc: a first layer fused with the depthwise convolution that reads it computes what NCHW computes") {
  struct stem_case {
    std::int64_t n, cin, m, h, w;
    std::vector<std::int64_t> kernel, strides, pads;  // the first layer's window (pads empty: auto_pad SAME_UPPER)
    std::vector<std::int64_t> dw_strides;
    std::string pw_act, dw_act;
    bool bias;
  };
  const std::vector<stem_case> cases{
      {1, 3, 32, 37, 41, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, "Clip", "Clip", true},
      {2, 3, 24, 18, 20, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, "Relu", "Relu", true},
      {1, 1, 16, 15, 17, {5, 5}, {1, 1}, {2, 2, 2, 2}, {2, 2}, "", "Clip", false},
      {1, 3, 48, 29, 31, {7, 7}, {2, 2}, {3, 2, 1, 3}, {2, 2}, "Relu", "", true},
      {1, 3, 16, 9, 900, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, "Clip", "Relu", true},
      {1, 4, 32, 13, 11, {3, 3}, {2, 2}, {}, {1, 1}, "Sigmoid", "Clip", true},
      {1, 3, 16, 10, 12, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, "Relu", "Relu", false},
  };
  std::uint64_t seed = 900;
  for (const auto& sc : cases) {
    CAPTURE(sc.cin);
    CAPTURE(sc.m);
    CAPTURE(sc.h);
    CAPTURE(sc.w);
    CAPTURE(sc.kernel[0]);
    graph g("stem_dw");
    g.add_input("x", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{sc.n, sc.cin, sc.h, sc.w})));
    conv_builder b{g, seed, 0.3f};
    seed += 10;
    const activations act{g};
    const std::string y = add_head(b, act,
                                   {{sc.m, sc.cin, sc.kernel[0], sc.kernel[1]},
                                    sc.pads.empty() ? attrs({ints("strides", sc.strides), text("auto_pad", "SAME_UPPER")})
                                                    : attrs({ints("strides", sc.strides), ints("pads", sc.pads)}),
                                    sc.pw_act, {sc.m, 1, 3, 3},
                                    attrs({ints("strides", sc.dw_strides), ints("pads", {1, 1, 1, 1}), one("group", sc.m)}),
                                    sc.dw_act, sc.bias},
                                   "y");
    const model m = model_of(std::move(g), {y.c_str()});
    const std::vector<named_tensor> in{{"x", zoo::random_tensor({sc.n, sc.cin, sc.h, sc.w}, seed++, 1.0f)}};
    for (const int threads : {1, 2, 3}) {
      CAPTURE(threads);
      const three_runs r = run_fused_unfused_plain(m, in, threads);
      check_close(r.fused, r.plain);
      check_close(r.fused, r.unfused);
    }
  }
}

// PointwiseDepthwiseConv with its projection (inputs 5-7): the 1x1 convolution that alone reads the depthwise output
// (MobileNet's), with or without the residual Add, runs in the same work items from the depthwise rows in the thread's
// buffer, when the output has at least 28 rows. At 1, 2, 3 and 8 threads (where bands of 14 rows a thread cannot be
// had, the depthwise output goes to scratch and the projection runs as a loop of its own: 28-40 rows of one image at
// 3 threads, all at 8), against NCHW and against the three blocked convolutions unfused: MobileNet's 24 -> 144 -> 24
// with the residual (8 real lanes in the last output block, 24 input channels in two blocks), a stride-2 depthwise
// layer into 28 rows, two images of 30 rows with 40 outputs, no biases and Sigmoid on the projection (over the
// stored rows), rows of 700 (the buffers slide, the depthwise rows go in batches) with Sigmoid on the depthwise
// convolution, a 5x3 depthwise window with asymmetric pads, a stem (a first layer) into a depthwise layer and its
// projection, 40 depthwise channels (the projection's last input block part padding), a residual that is not the
// block's input (Y written over it), and 38 x 19 outputs with Sigmoid at 8 threads (722 pixels in 30 segments of 25:
// the last one empty).
TEST_CASE("NCHWc: a PointwiseDepthwiseConv with the projection that reads it computes what NCHW computes") {
  struct proj_case {
    std::int64_t n, cin, m, h, w;
    std::vector<std::int64_t> first;  // a first layer's kernel (stride 2, pads 1), or empty: a 1x1
    std::vector<std::int64_t> dw_strides, dw_kernel, dw_pads;
    std::int64_t proj;
    std::string pw_act, dw_act, proj_act;
    int residual;  // 0: none, 1: the block's input, 2: Relu of it (a value only the Add reads)
    bool bias;
  };
  const std::vector<proj_case> cases{
      {1, 24, 144, 28, 28, {}, {1, 1}, {3, 3}, {1, 1, 1, 1}, 24, "Clip", "Clip", "", 1, true},
      {1, 16, 96, 56, 56, {}, {2, 2}, {3, 3}, {1, 1, 1, 1}, 24, "Relu", "Relu", "", 0, true},
      {2, 32, 192, 30, 33, {}, {1, 1}, {3, 3}, {1, 1, 1, 1}, 40, "Clip", "Clip", "Sigmoid", 0, false},
      {1, 16, 64, 40, 700, {}, {1, 1}, {3, 3}, {1, 1, 1, 1}, 16, "Relu", "Sigmoid", "", 1, true},
      {2, 16, 48, 31, 17, {}, {1, 1}, {5, 3}, {3, 0, 1, 2}, 32, "", "Relu", "Relu", 0, true},
      {1, 3, 32, 64, 60, {3, 3}, {1, 1}, {3, 3}, {1, 1, 1, 1}, 16, "Clip", "Clip", "", 0, true},
      {1, 32, 40, 28, 20, {}, {1, 1}, {3, 3}, {1, 1, 1, 1}, 32, "Relu", "Clip", "", 2, true},
      {1, 16, 32, 38, 19, {}, {1, 1}, {3, 3}, {1, 1, 1, 1}, 16, "Relu", "Relu", "Sigmoid", 0, true},
  };
  std::uint64_t seed = 1300;
  for (const auto& pc : cases) {
    CAPTURE(pc.cin);
    CAPTURE(pc.m);
    CAPTURE(pc.h);
    CAPTURE(pc.w);
    CAPTURE(pc.proj);
    graph g("pw_dw_proj");
    g.add_input("x", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{pc.n, pc.cin, pc.h, pc.w})));
    conv_builder b{g, seed, 0.3f};
    seed += 10;
    const activations act{g};
    const bool first = !pc.first.empty();
    const std::string c =
        add_head(b, act,
                 {{pc.m, pc.cin, first ? pc.first[0] : 1, first ? pc.first[1] : 1},
                  first ? attrs({ints("strides", {2, 2}), ints("pads", {1, 1, 1, 1})}) : attribute_list{}, pc.pw_act,
                  {pc.m, 1, pc.dw_kernel[0], pc.dw_kernel[1]},
                  attrs({ints("strides", pc.dw_strides), ints("pads", pc.dw_pads), one("group", pc.m)}), pc.dw_act, pc.bias},
                 "c");
    std::vector<std::string> proj_in{c, b.weight("w3", {pc.proj, pc.m, 1, 1})};
    if (pc.bias) proj_in.push_back(b.weight("b3", {pc.proj}));
    b.conv("proj", proj_in, "p0", {});
    std::string y = act(pc.proj_act, "p0", "p");
    if (pc.residual != 0) {
      const std::string r = pc.residual == 1 ? "x" : act("Relu", "x", "r");
      g.add_node(test::op("add", "Add"), {y, r}, {"y"});
      y = "y";
    }
    const model m = model_of(std::move(g), {y.c_str()});
    const std::vector<named_tensor> in{{"x", zoo::random_tensor({pc.n, pc.cin, pc.h, pc.w}, seed++, 1.0f)}};
    for (const int threads : {1, 2, 3, 8}) {
      CAPTURE(threads);
      const three_runs r = run_fused_unfused_plain(m, in, threads, 3);
      check_close(r.fused, r.plain);
      check_close(r.fused, r.unfused);
    }
  }
}

// Below 28 output rows the projection stays a convolution of its own (its band edges would cost more than the
// buffer saves); a projection whose input is also read elsewhere, or a graph output, is not taken either.
TEST_CASE("NCHWc: a projection is fused only from 28 rows and only when it alone reads the depthwise output") {
  const auto build = [](std::int64_t h, bool dw_output) {
    graph g("proj_not");
    g.add_input("x", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{1, 16, h, h})));
    conv_builder b{g, 1400, 0.3f};
    b.conv("pw", {"x", b.weight("w1", {64, 16, 1, 1})}, "a", {});
    b.conv("dw", {"a", b.weight("w2", {64, 1, 3, 3})}, "c", attrs({ints("pads", {1, 1, 1, 1}), one("group", 64)}));
    b.conv("proj", {"c", b.weight("w3", {16, 64, 1, 1})}, "y", {});
    return dw_output ? model_of(std::move(g), {"y", "c"}) : model_of(std::move(g), {"y"});
  };
  for (const auto& [h, dw_output, projected] :
       std::vector<std::tuple<std::int64_t, bool, bool>>{{28, false, true}, {27, false, false}, {14, false, false}, {28, true, false}}) {
    CAPTURE(h);
    CAPTURE(dw_output);
    const model m = build(h, dw_output);
    auto blocked = make(m, "nchwc");
    auto plain = make(m, "nchw");
    const auto counts = op_counts(blocked.get_model().graph);
    CHECK(counts.at(std::string(pointwise_depthwise)) == 1);
    CHECK(counts.count(std::string(blocked_conv)) == (projected ? 0u : 1u));
    const std::vector<named_tensor> in{{"x", zoo::random_tensor({1, 16, h, h}, 1401, 1.0f)}};
    auto a = blocked.run(in);
    auto r = plain.run(in);
    REQUIRE_MESSAGE(a.has_value(), a.status().to_string());
    REQUIRE(r.has_value());
    check_close(*a, *r);
  }
}

// A hand-written PointwiseDepthwiseConv whose first convolution is not what it says: refused when it runs, with
// invalid_argument and a message saying what is wrong (W neither a blocked 1x1 nor a first layer over X,
// pointwise_kernel_shape unlike W, a strided 1x1, a stride of 0).
TEST_CASE("NCHWc: a PointwiseDepthwiseConv whose first convolution does not match its attributes is refused, saying why") {
  struct bad_case {
    std::int64_t cin;                   // X's channels (16: blocked, 3: plain)
    std::vector<std::int64_t> w1;       // the first convolution's W
    attribute_list attributes;          // pointwise_* attributes
    std::string message;
  };
  const std::vector<bad_case> cases{
      {3, {16, 20, 3, 3}, {}, "are not a blocked 1x1 convolution (or a first layer)"},
      {3, {16, 3, 3, 3}, attrs({ints("pointwise_kernel_shape", {5, 5})}), "pointwise_kernel_shape does not match W"},
      {16, {16, 16, 1, 1}, attrs({ints("pointwise_strides", {2, 2})}), "unit strides and no padding"},
      {3, {16, 3, 3, 3}, attrs({ints("pointwise_strides", {0, 1})}), "must be positive"},
  };
  for (const auto& bc : cases) {
    CAPTURE(bc.message);
    graph g("bad_pw_dw");
    g.add_input("x", type_info::tensor_of(element_type::float32, shape{1, bc.cin, 8, 8}));
    g.add_initializer("w1", zoo::random_tensor({bc.w1[0], bc.w1[1], bc.w1[2], bc.w1[3]}, 11, 0.3f));
    g.add_initializer("w2", zoo::random_tensor({16, 1, 3, 3}, 12, 0.3f));
    attribute_list a = bc.attributes;
    a.set(ints("pads", {1, 1, 1, 1}));
    node n = test::op("bad", "PointwiseDepthwiseConv", a);
    n.domain = "com.epstack.nchwc16";
    g.add_node(n, {"x", "w1", "", "w2"}, {"y"});
    g.add_output("y", type_info::tensor_of(element_type::float32));
    model m;
    m.opsets = {{"", 13}, {"com.epstack.nchwc16", 1}};
    m.graph = std::move(g);
    auto s = cpu_session::create(m);
    REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
    auto out = s->run({{"x", zoo::random_tensor({1, bc.cin, 8, 8}, 13, 1.0f)}});
    REQUIRE_FALSE(out.has_value());
    CHECK(out.code() == errc::invalid_argument);
    CHECK(out.status().message().find(bc.message) != std::string::npos);
    CHECK(out.status().message().find("PointwiseDepthwiseConv") != std::string::npos);
  }
}

// A hand-written PointwiseDepthwiseConv whose projection (inputs 5-7) does not fit: refused when it runs, with
// invalid_argument and a message naming the op and the input (projection W of other input channels or not a multiple
// of 16 filters, a projection B of the wrong length, a Sum unlike the output, a B or Sum without W, a depthwise
// convolution of no channels under a projection).
TEST_CASE("NCHWc: a PointwiseDepthwiseConv whose projection does not fit is refused, saying why") {
  struct bad_case {
    std::vector<std::int64_t> w3, b3, sum;  // empty: the input absent
    std::string message;
    std::int64_t m = 16;  // the expansion's and the depthwise convolution's channels
  };
  const std::vector<bad_case> cases{
      {{16, 32, 1, 1}, {}, {}, "is not a blocked 1x1 convolution's float filters of 16 input channels"},
      {{20, 16, 1, 1}, {}, {}, "is not a blocked 1x1 convolution's float filters of 16 input channels"},
      {{16, 16, 3, 3}, {}, {}, "is not a blocked 1x1 convolution's float filters of 16 input channels"},
      {{32, 16, 1, 1}, {16}, {}, "the projection B must hold 32 floats"},
      {{16, 16, 1, 1}, {}, {1, 16, 4, 4}, "the projection Sum [1,16,4,4] must have the output's shape [1,16,8,8]"},
      {{}, {16}, {}, "a projection B or Sum without the projection W"},
      {{}, {}, {1, 16, 8, 8}, "a projection B or Sum without the projection W"},
      {{16, 0, 1, 1}, {}, {}, "a projection of a depthwise convolution of no channels", 0},
  };
  std::uint64_t seed = 1500;
  for (const auto& bc : cases) {
    CAPTURE(bc.message);
    graph g("bad_proj");
    g.add_input("x", type_info::tensor_of(element_type::float32, shape{1, 16, 8, 8}));
    std::vector<std::string> inputs{"x", "w1", "", "w2", "", "", "", ""};
    conv_builder wb{g, seed, 0.3f};
    seed += 10;
    const auto add = [&](const char* name, std::size_t at, const std::vector<std::int64_t>& d) {
      if (!d.empty()) inputs[at] = wb.weight(name, d);
    };
    add("w1", 1, {bc.m, 16, 1, 1});
    add("w2", 3, {bc.m, 1, 3, 3});
    add("w3", 5, bc.w3);
    add("b3", 6, bc.b3);
    add("sum", 7, bc.sum);
    while (inputs.back().empty()) inputs.pop_back();
    node n = test::op("bad", "PointwiseDepthwiseConv", attrs({ints("pads", {1, 1, 1, 1})}));
    n.domain = "com.epstack.nchwc16";
    const std::vector<std::string> outs{"y"};
    g.add_node(n, std::span<const std::string>(inputs), std::span<const std::string>(outs));
    g.add_output("y", type_info::tensor_of(element_type::float32));
    model m;
    m.opsets = {{"", 13}, {"com.epstack.nchwc16", 1}};
    m.graph = std::move(g);
    auto s = cpu_session::create(m);
    REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
    auto out = s->run({{"x", zoo::random_tensor({1, 16, 8, 8}, 13, 1.0f)}});
    REQUIRE_FALSE(out.has_value());
    CHECK(out.code() == errc::invalid_argument);
    CHECK_MESSAGE(out.status().message().find(bc.message) != std::string::npos, out.status().message());
    CHECK(out.status().message().find("PointwiseDepthwiseConv") != std::string::npos);
  }
}

// The fusion only where the 1x1's output is read by the depthwise convolution alone: not when it is also a graph
// output or read by a second convolution, not for a 1x1 with a stride; the option's values.
TEST_CASE("NCHWc: what is not fused into a PointwiseDepthwiseConv, and the option that turns the fusion off") {
  const auto build = [](bool pw_output, bool second_reader, bool pw_stride) {
    graph g("pw_dw_not");
    g.add_input("x", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{1, 16, 8, 8})));
    conv_builder b{g, 700, 0.3f};
    b.conv("pw", {"x", b.weight("w1", {32, 16, 1, 1})}, "a", pw_stride ? attrs({ints("strides", {2, 2})}) : attribute_list{});
    b.conv("dw", {"a", b.weight("w2", {32, 1, 3, 3})}, "c", attrs({ints("pads", {1, 1, 1, 1}), one("group", 32)}));
    std::vector<const char*> outs{"c"};
    if (second_reader) {
      b.conv("dw2", {"a", b.weight("w3", {32, 1, 3, 3})}, "d", attrs({ints("pads", {1, 1, 1, 1}), one("group", 32)}));
      outs.push_back("d");
    }
    if (pw_output) outs.push_back("a");
    for (const char* o : outs) g.add_output(o);
    model m;
    m.opsets = {{"", 13}};
    m.graph = std::move(g);
    return m;
  };
  const std::vector<named_tensor> in{{"x", zoo::random_tensor({1, 16, 8, 8}, 701, 1.0f)}};
  for (const auto& [pw_output, second_reader, pw_stride, fuses] :
       std::vector<std::tuple<bool, bool, bool, bool>>{{false, false, false, true}, {true, false, false, false},
                                                       {false, true, false, false}, {false, false, true, false}}) {
    CAPTURE(pw_output);
    CAPTURE(second_reader);
    CAPTURE(pw_stride);
    const model m = build(pw_output, second_reader, pw_stride);
    auto blocked = make(m, "nchwc");
    auto plain = make(m, "nchw");
    const auto counts = op_counts(blocked.get_model().graph);
    CHECK(counts.count(std::string(pointwise_depthwise)) == (fuses ? 1u : 0u));
    auto a = blocked.run(in);
    auto r = plain.run(in);
    REQUIRE_MESSAGE(a.has_value(), a.status().to_string());
    REQUIRE(r.has_value());
    check_close(*a, *r);
  }
  session_options so;
  so.set_config(config_keys::cpu_fuse_depthwise, "on");
  auto bad = cpu_session::create(build(false, false, false), so);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.code() == errc::invalid_argument);
  CHECK(bad.status().message().find("epstack.cpu_fuse_depthwise") != std::string::npos);
}

TEST_CASE("NCHWc: the layout pass says which of the graph's nodes it rewrote, fused pairs and names with '+' included") {
  // A 1x1 convolution fused with the depthwise one that reads it, a MaxPool after them, a Softmax the layout does not
  // take, and a convolution the pass may not touch (not eligible: another provider's). Names hold '+', as the fused
  // node's name does ("pw+1+dw+1"): the session once matched the choices made before the layout by these names.
  graph g("rewritten");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{1, 16, 8, 8})));
  conv_builder b{g, 720, 0.3f};
  b.conv("pw+1", {"x", b.weight("w1", {32, 16, 1, 1})}, "a", {});
  b.conv("dw+1", {"a", b.weight("w2", {32, 1, 3, 3})}, "c", attrs({ints("pads", {1, 1, 1, 1}), one("group", 32)}));
  attribute_list pool;
  pool.set("kernel_shape", std::vector<std::int64_t>{2, 2});
  g.add_node(test::op("pool", "MaxPool", pool), {"c"}, {"p"});
  g.add_node(test::op("soft", "Softmax"), {"p"}, {"s"});
  b.conv("other", {"s", b.weight("w3", {16, 32, 1, 1})}, "y", {});
  g.add_output("y");
  model m;
  m.opsets = {{"", 13}};
  m.graph = std::move(g);
  REQUIRE(infer_shapes(m).is_ok());
  REQUIRE(m.graph.node_count() == 5);
  std::vector<bool> eligible(5, true);
  eligible[4] = false;  // "other"
  optimization_report rep;
  std::vector<bool> rewritten{true};
  auto converted = nchwc_layout(m, eligible, rep, true, true, &rewritten);
  REQUIRE_MESSAGE(converted.has_value(), converted.status().to_string());
  CHECK(*converted >= 3);
  CHECK(rewritten == std::vector<bool>{true, true, true, false, false});
  std::set<std::string> names;
  for (node_id n = 0; n < m.graph.node_count(); ++n) names.insert(m.graph.node(n).name);
  CHECK(names.count("pw+1+dw+1") == 1);
  CHECK(names.count("other") == 1);
  // Nothing to rewrite: every flag false, the model unchanged.
  model none;
  none.opsets = {{"", 13}};
  none.graph = graph("none");
  none.graph.add_input("x", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{1, 16, 8, 8})));
  none.graph.add_node(test::op("soft", "Softmax"), {"x"}, {"s"});
  none.graph.add_output("s");
  REQUIRE(infer_shapes(none).is_ok());
  auto zero = nchwc_layout(none, std::vector<bool>(1, true), rep, true, true, &rewritten);
  REQUIRE(zero.has_value());
  CHECK(*zero == 0);
  CHECK(rewritten == std::vector<bool>{false});
}

// Winograd on the blocked layout, F(4x4, 3x3) from 49 tiles of 4x4 and F(2x2, 3x3) from 16 tiles of 2x2: images of
// odd and even sizes (tiles cut at the right and bottom edges, for both tiles), symmetric, asymmetric, wider than the
// kernel (an output larger than the input), SAME_UPPER and no padding, channel counts that are not multiples of 16
// (24 in, 40 out: three output blocks), one output block, five (sets of 3 and 2), ten and nine (three sets), runs of
// tiles across several work items (64 channels on 40x40), 256 input channels (large filters: few runs), ReLU and
// LeakyRelu fused (Sigmoid is not: the direct kernel), a residual input with Clip, two images, at 1, 2 and 3
// threads; against NCHW (the three-pass NCHW Winograd and the im2col kernel). A 9x9 output (25 tiles of 2x2) and a
// 7x7 one (16 tiles) are F(2x2), 6x6 direct, on every class of machine but Intel's, where 7x7 runs direct too.
TEST_CASE("NCHWc: Winograd 3x3 convolutions on the blocked layout compute what NCHW computes") {
  struct shape_case {
    std::int64_t c, m, h, w;
    std::vector<std::int64_t> pads;  // empty: auto_pad SAME_UPPER
    std::string act;
    std::int64_t winograd;  // the convolutions' output tile (0: direct)
  };
  const shape_case cases[] = {
      {24, 40, 9, 11, {1, 1, 1, 1}, "Relu", 2},        {64, 80, 13, 12, {1, 0, 1, 2}, "Relu", 2},
      {64, 64, 40, 40, {1, 1, 1, 1}, "Relu", 4},       {256, 64, 14, 14, {1, 1, 1, 1}, "Relu", 2},
      {32, 32, 11, 11, {0, 0, 0, 0}, "Relu", 2},       {48, 32, 7, 7, {1, 1, 1, 1}, "Relu", 2},
      {48, 32, 6, 6, {1, 1, 1, 1}, "Relu", 0},         {40, 48, 30, 29, {1, 0, 2, 1}, "Relu", 4},
      {256, 32, 28, 28, {1, 1, 1, 1}, "LeakyRelu", 4}, {32, 16, 31, 31, {0, 0, 0, 0}, "Relu", 4},
      {32, 32, 20, 20, {2, 2, 2, 2}, "LeakyRelu", 2},  {16, 32, 30, 30, {}, "Relu", 4},
      {32, 32, 30, 30, {1, 1, 1, 1}, "Sigmoid", 0},
      // Three sets of output blocks or more: at 3 threads, V is transformed once for all items (at 1 and 2, each
      // thread transforms the runs of its items).
      {32, 160, 12, 12, {1, 1, 1, 1}, "Relu", 2},     {24, 144, 28, 27, {1, 1, 1, 1}, "Relu", 4},
  };
  for (const auto& sc : cases) {
    CAPTURE(sc.c);
    CAPTURE(sc.m);
    CAPTURE(sc.h);
    CAPTURE(sc.w);
    CAPTURE(sc.act);
    graph g("wino");
    g.add_input("x", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{2, sc.c, sc.h, sc.w})));
    conv_builder b{g, static_cast<std::uint64_t>(900 + sc.c + sc.h), 0.1f};
    const auto w = [&](std::string name, std::initializer_list<std::int64_t> d) { return b.weight(std::move(name), d); };
    // a = act(conv(x) + bias); c = clip(conv(a) + a), the second convolution keeping the channels (its residual).
    b.conv("w1", {"x", w("k1", {sc.m, sc.c, 3, 3}), w("b1", {sc.m})}, "a0",
           sc.pads.empty() ? attrs({text("auto_pad", "SAME_UPPER")}) : attrs({ints("pads", sc.pads)}));
    g.add_node(test::op("act", sc.act), {"a0"}, {"a"});
    b.conv("w2", {"a", w("k2", {sc.m, sc.m, 3, 3})}, "c0", attrs({ints("pads", {1, 1, 1, 1})}));
    g.add_node(test::op("res", "Add"), {"c0", "a"}, {"c1"});
    g.add_initializer("lo", tensor::scalar(-0.25f));
    g.add_initializer("hi", tensor::scalar(0.5f));
    g.add_node(test::op("clip", "Clip"), {"c1", "lo", "hi"}, {"c"});
    const model m = model_of(std::move(g), {"a", "c"});
    const std::vector<named_tensor> in{{"x", zoo::random_tensor({2, sc.c, sc.h, sc.w}, 950 + static_cast<std::uint64_t>(sc.h), 1.0f)}};
    for (int threads : {1, 2, 3}) check_blocked_matches_plain(m, in, threads, 2);
    // Each convolution's algorithm, by its output's tiles (the second keeps the first's output size) and the class
    // of machine: on this one, then with each class pinned.
    const auto expected = [&](machine_class cls) {
      return cls == machine_class::avx512_intel && sc.h == 7 && sc.w == 7 ? 0 : sc.winograd;
    };
    auto s = make(m, "nchwc");
    std::map<std::string, std::int64_t> algorithm;
    for (node_id n = 0; n < s.get_model().graph.node_count(); ++n) {
      const auto& nd = s.get_model().graph.node(n);
      if (nd.op_type == "Conv") algorithm[nd.name] = attr_i(nd, "winograd", 0);
    }
    CHECK(algorithm.at("w1") == expected(this_machine_class()));
    CHECK(algorithm.at("w2") == (sc.act == "Sigmoid" ? 4 : expected(this_machine_class())));  // Sigmoid was fused into w1 only
    for (const machine_class cls : {machine_class::avx512_full, machine_class::avx512_split, machine_class::avx512_intel}) {
      CAPTURE(to_string(cls));
      struct unpin {
        ~unpin() { set_machine_class(std::nullopt); }  // also when make() fails a REQUIRE
      } guard;
      set_machine_class(cls);
      auto other = make(m, "nchwc");
      for (node_id n = 0; n < other.get_model().graph.node_count(); ++n) {
        const auto& nd = other.get_model().graph.node(n);
        if (nd.name == "w1") CHECK(attr_i(nd, "winograd", 0) == expected(cls));
      }
    }
  }
}

// One W behind a Winograd convolution (stride 1) and a direct one (stride 2): each gets its own laid-out filters; and
// session option epstack.cpu_winograd = 0 keeps every convolution direct (a value other than 0 or 1 is refused).
TEST_CASE("NCHWc: a filter shared by a Winograd and a direct convolution, and the option that turns Winograd off") {
  graph g("shared_w");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape::of(std::vector<std::int64_t>{1, 32, 30, 30})));
  conv_builder b{g, 77, 0.1f};
  const std::string k = b.weight("k", {32, 32, 3, 3});
  b.conv("s1", {"x", k}, "a", attrs({ints("pads", {1, 1, 1, 1})}));
  b.conv("s2", {"x", k}, "c", attrs({ints("pads", {1, 1, 1, 1}), ints("strides", {2, 2})}));
  const model m = model_of(std::move(g), {"a", "c"});
  const std::vector<named_tensor> in{{"x", zoo::random_tensor({1, 32, 30, 30}, 78, 1.0f)}};
  for (int threads : {1, 2}) check_blocked_matches_plain(m, in, threads, 2);
  const auto algorithms = [](const cpu_session& s) {
    std::map<std::string, std::int64_t> r;
    for (node_id n = 0; n < s.get_model().graph.node_count(); ++n)
      if (s.get_model().graph.node(n).op_type == "Conv") r[s.get_model().graph.node(n).name] = attr_i(s.get_model().graph.node(n), "winograd", 0);
    return r;
  };
  auto on = make(m, "nchwc");
  CHECK(algorithms(on) == std::map<std::string, std::int64_t>{{"s1", 4}, {"s2", 0}});
  // Each runs on its own kernel: the Winograd one takes only nodes with the attribute, the direct one only those without.
  const auto& og = on.get_model().graph;
  for (node_id n = 0; n < og.node_count(); ++n) {
    if (og.node(n).op_type != "Conv") continue;
    const bool wino = attr_i(og.node(n), "winograd", 0) != 0;
    CHECK(ops::nchwc_winograd_conv::supports(og, n) == wino);
    CHECK(ops::nchwc_conv::supports(og, n) == !wino);
  }

  session_options so;
  so.set_config(config_keys::cpu_winograd, "0");
  auto off = cpu_session::create(m, so);
  REQUIRE_MESSAGE(off.has_value(), off.status().to_string());
  CHECK(algorithms(*off) == std::map<std::string, std::int64_t>{{"s1", 0}, {"s2", 0}});
  auto a = on.run(in);
  auto c = off->run(in);
  REQUIRE_MESSAGE(a.has_value(), a.status().to_string());
  REQUIRE_MESSAGE(c.has_value(), c.status().to_string());
  check_close(*a, *c);

  so.set_config(config_keys::cpu_winograd, "yes");
  auto bad = cpu_session::create(m, so);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.code() == errc::invalid_argument);
  CHECK(bad.status().message().find("epstack.cpu_winograd") != std::string::npos);
}
