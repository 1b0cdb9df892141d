#pragma once
/// @file model_zoo.hpp
/// @brief Small models built with the IR's own API, with deterministic weights: what the README's main job, the
/// examples and the tests run, so that none of them needs a model from outside the repository.

#include <epstack/ir/model.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>
#include <span>

namespace epstack::zoo {

/// @brief splitmix64 at counter i+1 for `seed`, mapped to [-1, 1) with step 2^-23 (the rule of the benchmark inputs).
[[nodiscard]] inline float uniform_at(std::uint64_t seed, std::uint64_t i) noexcept {
  std::uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(static_cast<std::int64_t>(z >> 40) - (1 << 23)) / static_cast<float>(1 << 23);
}

/// @brief A float tensor of `sizes` with values uniform in [-scale, scale), deterministic in `seed`.
[[nodiscard]] inline tensor random_tensor(std::initializer_list<std::int64_t> sizes, std::uint64_t seed, float scale) {
  tensor t(element_type::float32, sizes);
  float* p = t.typed<float>();
  for (std::size_t i = 0; i < t.element_count(); ++i) p[i] = scale * uniform_at(seed, i);
  return t;
}

/// @brief A multi-layer perceptron `input [batch, widths[0]] -> Gemm(transB=1) -> Relu -> ... -> Gemm -> logits`,
/// opset 13, with He-scaled deterministic weights; `batch` may be a symbol ("batch") or a number.
[[nodiscard]] inline model make_mlp(const std::vector<std::int64_t>& widths, dimension batch = dimension("batch"),
                                    std::uint64_t seed = 42) {
  model m;
  m.opsets = {{"", 13}};
  m.producer_name = "epstack.zoo";
  m.doc_string = "multi-layer perceptron built by epstack::zoo::make_mlp";
  m.metadata = {{"generator", "epstack::zoo::make_mlp"}};
  auto& g = m.graph;
  g.set_name("mlp");
  g.add_input("input", type_info::tensor_of(element_type::float32, shape{batch, widths.front()}));
  std::string x = "input";
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    const auto in = widths[l], out = widths[l + 1];
    const std::string p = "layer" + std::to_string(l);
    const float he = std::sqrt(6.0f / static_cast<float>(in));
    g.add_initializer(p + ".weight", random_tensor({out, in}, seed * 1000 + 2 * l, he));
    g.add_initializer(p + ".bias", random_tensor({out}, seed * 1000 + 2 * l + 1, 0.1f));
    node gemm;
    gemm.name = "/" + p + "/Gemm";
    gemm.op_type = "Gemm";
    gemm.attributes.set("transB", std::int64_t{1});
    const bool last = l + 2 == widths.size();
    const std::string y = last ? std::string("logits") : p + ".gemm";
    g.add_node(std::move(gemm), {x, p + ".weight", p + ".bias"}, {y});
    x = y;
    if (!last) {
      node relu;
      relu.name = "/" + p + "/Relu";
      relu.op_type = "Relu";
      g.add_node(std::move(relu), {x}, {p + ".relu"});
      x = p + ".relu";
    }
  }
  g.add_output("logits", type_info::tensor_of(element_type::float32, shape{batch, widths.back()}));
  return m;
}

namespace detail {
// Adds nodes to a graph with short calls; names follow "<prefix>/<op>_<n>".
class builder {
 public:
  builder(graph& g, std::uint64_t seed) : g_(g), seed_(seed) {}
  std::string op(const std::string& type, std::vector<std::string> ins, attribute_list attrs = {}, std::size_t outputs = 1,
                 std::string name = {}) {
    node n;
    n.op_type = type;
    n.name = name.empty() ? "/" + prefix_ + "/" + type + "_" + std::to_string(counter_++) : std::move(name);
    n.attributes = std::move(attrs);
    std::vector<std::string> outs;
    for (std::size_t i = 0; i < outputs; ++i) outs.push_back(n.name + ":" + std::to_string(i));
    g_.add_node(std::move(n), ins, outs);
    return outs.front();
  }
  std::string constant(const std::string& name, tensor t) {
    g_.add_initializer(name, std::move(t));
    return name;
  }
  std::string scalar(float v) { return constant("const_" + std::to_string(counter_++), tensor::scalar(v)); }
  std::string ints(std::vector<std::int64_t> v) {
    const std::int64_t n = static_cast<std::int64_t>(v.size());
    return constant("const_" + std::to_string(counter_++),
                    tensor::from<std::int64_t>(std::span<const std::int64_t>(&n, 1), std::span<const std::int64_t>(v)));
  }
  std::string param(const std::string& name, std::initializer_list<std::int64_t> sizes, float scale) {
    return constant(name, random_tensor(sizes, seed_ * 7919 + counter_++, scale));
  }
  std::string param_around(const std::string& name, std::int64_t size, float center, float spread) {
    tensor t = random_tensor({size}, seed_ * 7919 + counter_++, spread);
    for (std::size_t i = 0; i < t.element_count(); ++i) t.typed<float>()[i] += center;
    return constant(name, std::move(t));
  }
  void prefix(std::string p) { prefix_ = std::move(p); }

 private:
  graph& g_;
  std::uint64_t seed_;
  std::size_t counter_ = 0;
  std::string prefix_ = "m";
};

// The head of the zoo's convolutional networks: GlobalAveragePool, Flatten and Gemm (transB = 1) from `c` channels to
// `classes`, its weights `<weights>.weight` and `<weights>.bias`; the graph's output `logits` [N, classes].
inline void classifier_head(builder& b, graph& g, const std::string& x, std::int64_t c, std::int64_t classes,
                            const std::string& scope, const std::string& weights, float bias_scale) {
  b.prefix(scope);
  const auto flat = b.op("Flatten", {b.op("GlobalAveragePool", {x})});
  const auto w = b.param(weights + ".weight", {classes, c}, std::sqrt(3.0f / static_cast<float>(c)));
  const auto bias = b.param(weights + ".bias", {classes}, bias_scale);
  attribute_list gemm;
  gemm.set("transB", std::int64_t{1});
  node n;
  n.name = "/" + scope + "/Gemm";
  n.op_type = "Gemm";
  n.attributes = gemm;
  g.add_node(std::move(n), {flat, w, bias}, {"logits"});
  g.add_output("logits", type_info::tensor_of(element_type::float32, shape{dimension("N"), classes}));
}
}  // namespace detail

/// @brief A small residual convolutional network, opset 13, shaped like ResNet: a 3x3/2 stem, then per stage a
/// residual block (Conv-BatchNormalization-Relu, Conv-BatchNormalization, Add, Relu) and a strided 3x3
/// down-sampling convolution, then GlobalAveragePool, Flatten and Gemm to `classes`. Input `image`
/// [N,3,size,size] (N symbolic), output `logits` [N,classes]. BatchNormalization statistics are not folded, so the
/// graph optimiser has work to do.
[[nodiscard]] inline model make_convnet(const std::vector<std::int64_t>& channels = {16, 32, 64}, std::int64_t size = 64,
                                        std::int64_t classes = 10, std::uint64_t seed = 7) {
  model m;
  m.opsets = {{"", 13}};
  m.producer_name = "epstack.zoo";
  m.doc_string = "residual convolutional network built by epstack::zoo::make_convnet";
  m.metadata = {{"generator", "epstack::zoo::make_convnet"}};
  auto& g = m.graph;
  g.set_name("convnet");
  g.add_input("image", type_info::tensor_of(element_type::float32, shape{dimension("N"), 3, size, size}));
  detail::builder b(g, seed);
  using iv = std::vector<std::int64_t>;
  const auto conv_bn = [&](const std::string& x, std::int64_t cin, std::int64_t cout, std::int64_t stride,
                           const std::string& p, bool relu) {
    b.prefix(p);
    const float he = std::sqrt(2.0f / static_cast<float>(cin * 9));
    const auto w = b.param(p + ".weight", {cout, cin, 3, 3}, he * 1.7f);
    attribute_list a;
    a.set("kernel_shape", iv{3, 3});
    a.set("pads", iv{1, 1, 1, 1});
    a.set("strides", iv{stride, stride});
    auto y = b.op("Conv", {x, w}, a);
    const auto gamma = b.param_around(p + ".bn.weight", cout, 1.0f, 0.1f);
    const auto beta = b.param_around(p + ".bn.bias", cout, 0.0f, 0.1f);
    const auto mean = b.param_around(p + ".bn.running_mean", cout, 0.0f, 0.1f);
    const auto var = b.param_around(p + ".bn.running_var", cout, 1.0f, 0.2f);
    attribute_list bn;
    bn.set("epsilon", 1e-5f);
    y = b.op("BatchNormalization", {y, gamma, beta, mean, var}, bn);
    return relu ? b.op("Relu", {y}) : y;
  };
  std::string x = conv_bn("image", 3, channels.front(), 2, "stem", true);
  std::int64_t c = channels.front();
  for (std::size_t s = 0; s < channels.size(); ++s) {
    const std::string p = "stage" + std::to_string(s);
    if (channels[s] != c) {
      x = conv_bn(x, c, channels[s], 2, p + ".down", true);
      c = channels[s];
    }
    const auto h = conv_bn(x, c, c, 1, p + ".conv1", true);
    const auto h2 = conv_bn(h, c, c, 1, p + ".conv2", false);
    b.prefix(p);
    x = b.op("Relu", {b.op("Add", {h2, x})});
  }
  detail::classifier_head(b, g, x, c, classes, "head", "head", 0.1f);
  return m;
}

/// @brief MobileNetV2 1.0 as torchvision's layout exports in eval mode (the architecture of the shared benchmark's
/// mobilenetv2): BatchNormalization folded into each convolution's bias, ReLU6 as opset-13 `Clip(x, 0, 6)` with
/// scalar initializers, inverted residual blocks (1x1 expansion, 3x3 depthwise with `group` = channels, 1x1
/// projection, `Add` where the stride is 1 and the channels stay), a 1x1 convolution to 1280, GlobalAveragePool,
/// Flatten and Gemm to `classes`. Input `input` [N,3,size,size] (N symbolic), output `logits` [N,classes].
/// He-scaled deterministic weights; `width` scales every channel count (rounded to a multiple of 8, as torchvision).
[[nodiscard]] inline model make_mobilenetv2(std::int64_t size = 224, std::int64_t classes = 1000, float width = 1.0f,
                                            std::uint64_t seed = 3003) {
  model m;
  m.opsets = {{"", 13}};
  m.producer_name = "epstack.zoo";
  m.doc_string = "MobileNetV2 built by epstack::zoo::make_mobilenetv2 (BatchNorm folded, Clip(0,6) as ReLU6)";
  m.metadata = {{"generator", "epstack::zoo::make_mobilenetv2"}};
  auto& g = m.graph;
  g.set_name("mobilenetv2");
  g.add_input("input", type_info::tensor_of(element_type::float32, shape{dimension("N"), 3, size, size}));
  detail::builder b(g, seed);
  const auto lo = b.constant("relu6.min", tensor::scalar(0.0f));
  const auto hi = b.constant("relu6.max", tensor::scalar(6.0f));
  const auto channels = [&](std::int64_t c) {
    const auto scaled = static_cast<std::int64_t>(static_cast<float>(c) * width + 4.0f) / 8 * 8;
    return std::max<std::int64_t>(8, scaled);
  };
  using iv = std::vector<std::int64_t>;
  const auto conv = [&](const std::string& x, std::int64_t cin, std::int64_t cout, std::int64_t k, std::int64_t stride,
                        const std::string& name, std::int64_t group, bool act) {
    b.prefix(name);
    const std::int64_t pad = k / 2;
    const float he = std::sqrt(6.0f / static_cast<float>(cin / group * k * k));
    const auto w = b.param(name + ".weight", {cout, cin / group, k, k}, he);
    const auto bias = b.param(name + ".bias", {cout}, 0.05f);
    attribute_list a;
    a.set("kernel_shape", iv{k, k});
    a.set("pads", iv{pad, pad, pad, pad});
    a.set("strides", iv{stride, stride});
    a.set("dilations", iv{1, 1});
    a.set("group", group);
    auto y = b.op("Conv", {x, w, bias}, a);
    return act ? b.op("Clip", {y, lo, hi}) : y;
  };
  std::int64_t cin = channels(32);
  std::string x = conv("input", 3, cin, 3, 2, "features.0.0", 1, true);
  // (expansion t, channels c, repeats n, stride s) of each stage, as torchvision's MobileNetV2.
  const std::int64_t cfg[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                                  {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int idx = 1;
  for (const auto& [t, c_, n, s] : cfg) {
    const std::int64_t c = channels(c_);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t stride = i == 0 ? s : 1;
      const std::int64_t hidden = cin * t;
      const std::string pre = "features." + std::to_string(idx) + ".conv";
      std::string y = x;
      int j = 0;
      if (t != 1) y = conv(y, cin, hidden, 1, 1, pre + "." + std::to_string(j++), 1, true);
      y = conv(y, hidden, hidden, 3, stride, pre + "." + std::to_string(j++), hidden, true);
      y = conv(y, hidden, c, 1, 1, pre + "." + std::to_string(j), 1, false);
      if (stride == 1 && cin == c) {
        b.prefix("features." + std::to_string(idx));
        y = b.op("Add", {x, y});
      }
      x = y;
      cin = c;
      ++idx;
    }
  }
  const std::int64_t last = std::max<std::int64_t>(1280, channels(1280));
  x = conv(x, cin, last, 1, 1, "features." + std::to_string(idx) + ".0", 1, true);
  detail::classifier_head(b, g, x, last, classes, "classifier", "classifier.1", 0.01f);
  return m;
}

/// Sizes of `make_transformer`.
struct transformer_config {
  std::int64_t vocab = 512, hidden = 64, heads = 4, layers = 2, ffn = 128, max_positions = 128;
  std::uint64_t seed = 11;
};

/// @brief A BERT-style encoder, opset 13, written the way opset-13 exporters write it: embeddings (Gather) plus
/// positions sliced to the sequence length through Shape -> Gather -> Unsqueeze -> Slice, then per layer a
/// decomposed LayerNorm (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add), self-attention (MatMul + Add
/// projections, Reshape/Transpose to heads, MatMul, Div, Softmax, MatMul, back), residual Add, and a feed-forward block
/// with the erf form of GELU. Input `input_ids` int64 [batch, seq]; output `hidden_state` [batch, seq, hidden].
[[nodiscard]] inline model make_transformer(const transformer_config& c = {}) {
  model m;
  m.opsets = {{"", 13}};
  m.producer_name = "epstack.zoo";
  m.doc_string = "transformer encoder built by epstack::zoo::make_transformer";
  m.metadata = {{"generator", "epstack::zoo::make_transformer"}};
  auto& g = m.graph;
  g.set_name("transformer");
  g.add_input("input_ids", type_info::tensor_of(element_type::int64, shape{dimension("batch"), dimension("seq")}));
  detail::builder b(g, c.seed);
  using iv = std::vector<std::int64_t>;
  const auto ax = [](const char* k, auto v) {
    attribute_list a;
    a.set(k, v);
    return a;
  };
  const std::int64_t d = c.hidden / c.heads;
  b.prefix("embeddings");
  const auto table = b.param("embeddings.word", {c.vocab, c.hidden}, 0.5f);
  const auto pos_table = b.param("embeddings.position", {1, c.max_positions, c.hidden}, 0.2f);
  auto x = b.op("Gather", {table, "input_ids"}, ax("axis", std::int64_t{0}));
  const auto shp = b.op("Shape", {"input_ids"});
  const auto seq = b.op("Unsqueeze", {b.op("Gather", {shp, b.constant("embeddings.seq_index", tensor::scalar<std::int64_t>(1))},
                                           ax("axis", std::int64_t{0})),
                                      b.ints({0})});
  const auto pos = b.op("Slice", {pos_table, b.ints({0}), seq, b.ints({1})});
  x = b.op("Add", {x, pos});
  const auto layer_norm = [&](const std::string& in, const std::string& p) {
    b.prefix(p);
    const auto gamma = b.param_around(p + ".weight", c.hidden, 1.0f, 0.1f);
    const auto beta = b.param_around(p + ".bias", c.hidden, 0.0f, 0.1f);
    const auto mean = b.op("ReduceMean", {in}, ax("axes", iv{-1}));
    const auto dd = b.op("Sub", {in, mean});
    const auto var = b.op("ReduceMean", {b.op("Pow", {dd, b.scalar(2.0f)})}, ax("axes", iv{-1}));
    const auto norm = b.op("Div", {dd, b.op("Sqrt", {b.op("Add", {var, b.scalar(1e-12f)})})});
    return b.op("Add", {b.op("Mul", {norm, gamma}), beta});
  };
  const auto linear = [&](const std::string& in, std::int64_t n_in, std::int64_t n_out, const std::string& p) {
    b.prefix(p);
    const auto w = b.param(p + ".weight", {n_in, n_out}, std::sqrt(3.0f / static_cast<float>(n_in)));
    const auto bias = b.param(p + ".bias", {n_out}, 0.05f);
    return b.op("Add", {bias, b.op("MatMul", {in, w})});
  };
  x = layer_norm(x, "embeddings.ln");
  for (std::int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "layer" + std::to_string(l);
    const auto heads = [&](const std::string& v, iv perm) {
      b.prefix(p + ".attention");
      return b.op("Transpose", {b.op("Reshape", {v, b.ints({0, 0, c.heads, d})})}, ax("perm", perm));
    };
    const auto q = heads(linear(x, c.hidden, c.hidden, p + ".query"), {0, 2, 1, 3});
    const auto k = heads(linear(x, c.hidden, c.hidden, p + ".key"), {0, 2, 3, 1});
    const auto v = heads(linear(x, c.hidden, c.hidden, p + ".value"), {0, 2, 1, 3});
    b.prefix(p + ".attention");
    auto sc = b.op("Div", {b.op("MatMul", {q, k}), b.scalar(std::sqrt(static_cast<float>(d)))});
    const auto pr = b.op("Softmax", {sc}, ax("axis", std::int64_t{-1}));
    auto ctx = b.op("Transpose", {b.op("MatMul", {pr, v})}, ax("perm", iv{0, 2, 1, 3}));
    ctx = b.op("Reshape", {ctx, b.ints({0, 0, c.hidden})});
    auto o = linear(ctx, c.hidden, c.hidden, p + ".output");
    b.prefix(p);
    x = layer_norm(b.op("Add", {o, x}), p + ".ln1");
    auto f = linear(x, c.hidden, c.ffn, p + ".ffn.in");
    b.prefix(p + ".gelu");
    const auto e = b.op("Erf", {b.op("Div", {f, b.scalar(1.4142135381698608f)})});
    f = b.op("Mul", {b.op("Mul", {f, b.op("Add", {e, b.scalar(1.0f)})}), b.scalar(0.5f)});
    f = linear(f, c.ffn, c.hidden, p + ".ffn.out");
    b.prefix(p);
    x = layer_norm(b.op("Add", {f, x}), p + ".ln2");
  }
  node out;
  out.name = "/output/Identity";
  out.op_type = "Identity";
  g.add_node(std::move(out), {x}, {"hidden_state"});
  g.add_output("hidden_state",
               type_info::tensor_of(element_type::float32, shape{dimension("batch"), dimension("seq"), c.hidden}));
  return m;
}

}  // namespace epstack::zoo
