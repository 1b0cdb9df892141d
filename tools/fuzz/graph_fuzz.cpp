// The graph generator of the differential fuzzer. Every operation is emitted only where its operand's shape makes it
// valid, with the output dims computed here (so the next operation can be chosen); the ONNX checker and shape
// inference still see every graph when a session loads it, and a graph both stacks refuse is counted as invalid
// (a generator fault), never as a finding.
//
// Over 700 lines on purpose: one generator whose operation emitters share the shape bookkeeping and the random
// stream; split, its choices would be harder to follow from one seed.
#include "graph_fuzz.hpp"

#include <epstack/testing/model_zoo.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>

namespace epstack::fuzz {

namespace {

using dims = std::vector<std::int64_t>;

struct val {
  std::string name;
  dims d;
};

std::int64_t volume(const dims& d) {
  return std::accumulate(d.begin(), d.end(), std::int64_t{1}, std::multiplies<>());
}

/// The largest value a graph makes: ops that would make a larger one (a product of a value with itself, a
/// concatenation, a transposed convolution) are not emitted, so dims stay far from any overflow and graphs run fast.
constexpr std::int64_t max_volume = std::int64_t{1} << 18;

class gen {
 public:
  explicit gen(std::uint64_t seed) : rng_(seed), seed_(seed) {}

  generated run() {
    generated out;
    opset_ = std::array<int, 4>{9, 11, 13, 17}[pick(4)];
    symbolic_ = pick(2) == 0;
    model& m = out.m;
    m.opsets = {{"", opset_}};
    m.producer_name = "epstack.fuzz";
    g_ = &m.graph;
    g_->set_name("fuzz_" + std::to_string(seed_));
    make_inputs(out.feeds);
    const int target = 2 + pick(13);
    int guard = 0;
    while (ops_ < target && guard++ < 200) step();
    // Outputs: the last value, and up to two others.
    std::vector<const val*> outs{&vals_.back()};
    for (int k = pick(3); k > 0; --k) {
      const auto& v = vals_[static_cast<std::size_t>(pick(static_cast<int>(vals_.size())))];
      if (std::none_of(outs.begin(), outs.end(), [&](const val* o) { return o->name == v.name; }) && !is_input(v.name))
        outs.push_back(&v);
    }
    // Outputs declare their rank with unknown dimensions (the checker wants a shape; shape inference fills it).
    for (const val* o : outs)
      g_->add_output(o->name, type_info::tensor_of(element_type::float32, shape(std::vector<dimension>(o->d.size()))));
    out.summary = "opset " + std::to_string(opset_) + (symbolic_ ? ", symbolic" : ", static") + ", " +
                  std::to_string(ops_) + " ops:" + names_;
    return out;
  }

 private:
  std::mt19937_64 rng_;
  std::uint64_t seed_;
  graph* g_ = nullptr;
  int opset_ = 13;
  bool symbolic_ = false;
  int ops_ = 0, counter_ = 0;
  std::string names_;
  std::vector<val> vals_;
  std::vector<std::string> inputs_;

  int pick(int n) { return static_cast<int>(rng_() % static_cast<std::uint64_t>(n)); }
  bool chance(int percent) { return pick(100) < percent; }
  float uniform(float lo, float hi) {
    return lo + (hi - lo) * static_cast<float>(rng_() >> 40) / static_cast<float>(1ull << 24);
  }
  bool is_input(const std::string& n) const { return std::find(inputs_.begin(), inputs_.end(), n) != inputs_.end(); }
  std::string fresh(const std::string& what) { return what + "_" + std::to_string(counter_++); }

  tensor random(const dims& d, float scale) {
    tensor t(element_type::float32, d);
    float* p = t.typed<float>();
    for (std::size_t i = 0; i < t.element_count(); ++i) p[i] = uniform(-scale, scale);
    return t;
  }
  std::string constant(tensor t) {
    const std::string n = fresh("c");
    g_->add_initializer(n, std::move(t));
    return n;
  }
  std::string ints(const dims& v) {
    const std::int64_t n = static_cast<std::int64_t>(v.size());
    return constant(tensor::from<std::int64_t>(std::span<const std::int64_t>(&n, 1), std::span<const std::int64_t>(v)));
  }
  std::string scalar(float v) {
    // Scalars the way exporters write them: rank 0, or a one-element [1].
    if (chance(70)) return constant(tensor::scalar(v));
    return constant(tensor::from<float>({1}, {v}));
  }
  /// Adds node `type` reading `ins`, with `n_out` outputs; returns the output names.
  std::vector<std::string> node(const std::string& type, std::vector<std::string> ins, attribute_list attrs = {},
                                std::size_t n_out = 1) {
    epstack::node nd;
    nd.op_type = type;
    nd.name = fresh(type);
    nd.attributes = std::move(attrs);
    std::vector<std::string> outs;
    for (std::size_t i = 0; i < n_out; ++i) outs.push_back(nd.name + "_out" + std::to_string(i));
    g_->add_node(std::move(nd), ins, outs);
    names_ += " " + type;
    return outs;
  }
  std::string add(const std::string& name, dims d) {
    vals_.push_back({name, std::move(d)});
    return name;
  }
  const val& operand() {
    if (chance(65)) return vals_.back();
    return vals_[static_cast<std::size_t>(pick(static_cast<int>(vals_.size())))];
  }

  void make_inputs(std::vector<named_tensor>& feeds) {
    const std::int64_t batch = 1 + pick(3);
    dims d;
    switch (pick(4)) {
      case 0:
      case 1:  // an image; now and then one of 28 rows or more (the CPU provider fuses MobileNet's projection there)
        d = chance(12) ? dims{batch, 1 + pick(4), 28 + pick(12), 3 + pick(24)} : dims{batch, 1 + pick(8), 3 + pick(10), 3 + pick(10)};
        break;
      case 2: d = {batch, 1 + pick(6), 2 + pick(24)}; break;                 // a sequence, or a 1-D signal
      default: d = {batch, 1 + pick(32)}; break;                              // features
    }
    shape declared;
    for (std::size_t i = 0; i < d.size(); ++i) {
      if (symbolic_ && (i == 0 || (i >= 2 && chance(40)))) declared.push_back(dimension(i == 0 ? "N" : "d" + std::to_string(i)));
      else declared.push_back(dimension(d[i]));
    }
    g_->add_input("x", type_info::tensor_of(element_type::float32, declared));
    inputs_.push_back("x");
    feeds.push_back({"x", random(d, 2.0f)});
    add("x", d);
    if (chance(30)) {  // a second input of the same shape, for tensor arithmetic and concatenation
      g_->add_input("y", type_info::tensor_of(element_type::float32, declared));
      inputs_.push_back("y");
      feeds.push_back({"y", random(d, 2.0f)});
      add("y", d);
    }
  }

  void step() {
    const val x = operand();
    const auto r = x.d.size();
    bool done = false;
    switch (pick(19)) {
      case 0: case 1: done = r >= 3 && r <= 4 && conv(x); break;
      case 2: done = r == 4 && conv_transpose(x); break;
      case 3: done = r >= 3 && r <= 4 && pool(x); break;
      case 4: done = r >= 2 && matmul(x); break;
      case 5: done = r == 2 && gemm(x); break;
      case 6: done = r >= 2 && normalization(x); break;
      case 7: done = softmax(x); break;
      case 8: case 9: done = activation(x); break;
      case 10: case 11: done = scalar_chain(x); break;
      case 12: done = tensor_binary(x); break;
      case 13: done = reshape_family(x); break;
      case 14: done = concat_or_split(x); break;
      case 15: done = shape_computation(x); break;
      case 16: done = r >= 3 && r <= 5 && upsample(x); break;
      case 17: done = einsum(x); break;
      default: done = transpose_or_slice(x); break;
    }
    if (done) ++ops_;
  }

  // ---- convolutions and pooling ----
  struct window {
    std::vector<std::int64_t> k, s, dil, pads, out;
    std::string auto_pad = "NOTSET";
  };
  /// A window over the spatial dims `sp`, or false when none fits.
  bool make_window(const dims& sp, window& w, int max_k, bool allow_dil, bool allow_auto) {
    const std::size_t n = sp.size();
    w = {};
    if (allow_auto && chance(20)) w.auto_pad = std::array<const char*, 3>{"SAME_UPPER", "SAME_LOWER", "VALID"}[pick(3)];
    for (std::size_t i = 0; i < n; ++i) {
      w.k.push_back(1 + pick(max_k));
      w.s.push_back(chance(70) ? 1 : 2);
      w.dil.push_back(allow_dil && chance(20) ? 2 : 1);
    }
    w.pads.assign(2 * n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t ek = (w.k[i] - 1) * w.dil[i] + 1;
      if (w.auto_pad == "NOTSET") {
        if (chance(50)) {
          w.pads[i] = pick(static_cast<int>(w.k[i]));
          w.pads[i + n] = pick(static_cast<int>(w.k[i]));
        }
        const std::int64_t span = sp[i] + w.pads[i] + w.pads[i + n] - ek;
        if (span < 0) return false;
        w.out.push_back(span / w.s[i] + 1);
      } else if (w.auto_pad == "VALID") {
        if (sp[i] < ek) return false;
        w.out.push_back((sp[i] - ek) / w.s[i] + 1);
      } else {
        w.out.push_back((sp[i] + w.s[i] - 1) / w.s[i]);
      }
    }
    return true;
  }
  void set_window(attribute_list& a, const window& w, bool with_dil) {
    a.set("kernel_shape", w.k);
    if (w.auto_pad != "NOTSET") a.set("auto_pad", w.auto_pad);
    else if (std::any_of(w.pads.begin(), w.pads.end(), [](std::int64_t p) { return p != 0; }) || chance(30)) a.set("pads", w.pads);
    if (std::any_of(w.s.begin(), w.s.end(), [](std::int64_t s) { return s != 1; }) || chance(30)) a.set("strides", w.s);
    if (with_dil && (std::any_of(w.dil.begin(), w.dil.end(), [](std::int64_t d) { return d != 1; }) || chance(20)))
      a.set("dilations", w.dil);
  }

  // MobileNet's block: a 1x1 convolution to 16, 24 or 32 channels (an image's few channels are read by a first-layer
  // kernel, not the blocked one), a 1x1 convolution to at most 6x those, sometimes a Relu or Clip, and a depthwise
  // convolution reading it alone (the CPU provider's layout fuses the last two into PointwiseDepthwiseConv); half the
  // time the projection, a 1x1 convolution back to the block's channels, and the residual Add when the shapes allow
  // (fused with them from 28 rows).
  bool pointwise_depthwise(const val& x) {
    const dims sp(x.d.begin() + 2, x.d.end());
    window w;
    if (!make_window(sp, w, 3, true, true)) return false;
    const std::int64_t c0 = x.d[1], c = 8 * (2 + pick(3)), o = c * (1 + pick(6));
    dims stem{x.d[0], c, x.d[2], x.d[3]}, mid{x.d[0], o, x.d[2], x.d[3]}, out{x.d[0], o, w.out[0], w.out[1]};
    if (volume(mid) > max_volume || volume(out) > max_volume) return false;
    const std::string s0 = node("Conv", {x.name, constant(random({c, c0, 1, 1}, std::sqrt(3.0f / static_cast<float>(c0))))})[0];
    add(s0, stem);
    std::vector<std::string> ins{s0, constant(random({o, c, 1, 1}, std::sqrt(3.0f / static_cast<float>(c))))};
    if (chance(60)) ins.push_back(constant(random({o}, 0.5f)));
    std::string a = node("Conv", ins)[0];
    if (chance(30)) a = node("Relu", {a})[0];
    else if (chance(30)) a = node("Clip", {a, scalar(-1.0f), scalar(1.5f)})[0];
    add(a, mid);
    dims wd{o, 1};
    wd.insert(wd.end(), w.k.begin(), w.k.end());
    std::vector<std::string> dins{a, constant(random(wd, std::sqrt(3.0f / static_cast<float>(volume(wd) / o))))};
    if (chance(60)) dins.push_back(constant(random({o}, 0.5f)));
    attribute_list at;
    set_window(at, w, true);
    at.set("group", o);
    const std::string d = node("Conv", dins, at)[0];
    if (chance(50)) {
      add(d, out);
      return true;
    }
    std::vector<std::string> pins{d, constant(random({c, o, 1, 1}, std::sqrt(3.0f / static_cast<float>(o))))};
    if (chance(60)) pins.push_back(constant(random({c}, 0.5f)));
    std::string p = node("Conv", pins)[0];
    const dims pout{x.d[0], c, w.out[0], w.out[1]};
    if (pout == stem && chance(50)) p = node("Add", {p, s0})[0];
    add(p, pout);
    return true;
  }

  bool conv(const val& x) {
    if (x.d.size() == 4 && chance(x.d[2] >= 28 ? 50 : 20)) return pointwise_depthwise(x);
    const dims sp(x.d.begin() + 2, x.d.end());
    window w;
    if (!make_window(sp, w, 5, true, true)) return false;
    const std::int64_t c = x.d[1];
    std::int64_t group = 1;
    if (c > 1 && chance(25)) group = c;                     // depthwise
    else if (c % 2 == 0 && c > 2 && chance(15)) group = 2;  // grouped
    const std::int64_t o = group * (1 + pick(group == c ? 2 : 12));
    dims wd{o, c / group};
    wd.insert(wd.end(), w.k.begin(), w.k.end());
    const float fan_in = static_cast<float>(volume(wd) / o);
    std::vector<std::string> ins{x.name, constant(random(wd, std::sqrt(3.0f / fan_in)))};
    if (chance(60)) ins.push_back(constant(random({o}, 0.5f)));
    attribute_list a;
    set_window(a, w, true);
    if (group != 1 || chance(20)) a.set("group", group);
    dims out{x.d[0], o};
    out.insert(out.end(), w.out.begin(), w.out.end());
    if (volume(out) > max_volume) return false;
    add(node("Conv", ins, a)[0], out);
    return true;
  }

  bool conv_transpose(const val& x) {
    const std::int64_t c = x.d[1];
    const std::int64_t o = 1 + pick(8);
    attribute_list a;
    dims k, s, pads(4, 0), out{x.d[0], o};
    for (int i = 0; i < 2; ++i) {
      k.push_back(1 + pick(4));
      s.push_back(chance(60) ? 1 : 2);
    }
    for (int i = 0; i < 2; ++i) {
      if (chance(40)) pads[i] = pick(static_cast<int>(k[i])), pads[i + 2] = pick(static_cast<int>(k[i]));
      const std::int64_t len = s[i] * (x.d[2 + i] - 1) + k[i] - pads[i] - pads[i + 2];
      if (len < 1) return false;
      out.push_back(len);
    }
    if (volume(out) > max_volume) return false;
    a.set("kernel_shape", k);
    a.set("strides", s);
    a.set("pads", pads);
    dims wd{c, o, k[0], k[1]};
    std::vector<std::string> ins{x.name, constant(random(wd, std::sqrt(3.0f / static_cast<float>(c * k[0] * k[1]))))};
    if (chance(50)) ins.push_back(constant(random({o}, 0.5f)));
    add(node("ConvTranspose", ins, a)[0], out);
    return true;
  }

  bool pool(const val& x) {
    if (chance(25)) {  // global
      dims out{x.d[0], x.d[1]};
      out.resize(x.d.size(), 1);
      add(node(chance(50) ? "GlobalAveragePool" : "GlobalMaxPool", {x.name})[0], out);
      return true;
    }
    const bool max = chance(50);
    const dims sp(x.d.begin() + 2, x.d.end());
    window w;
    // Dilations: MaxPool from opset 10 (AveragePool only from 19).
    if (!make_window(sp, w, 3, max && opset_ >= 10, true)) return false;
    for (std::size_t i = 0; i < sp.size(); ++i)  // ONNX requires pads smaller than the kernel
      if (w.pads[i] >= w.k[i] || w.pads[i + sp.size()] >= w.k[i]) return false;
    attribute_list a;
    set_window(a, w, max && opset_ >= 10);
    dims out{x.d[0], x.d[1]};
    // ceil_mode (opset 10) only where the last window starts inside the input and its left padding, the rule every
    // runtime agrees on.
    if (opset_ >= 10 && w.auto_pad == "NOTSET" && chance(25)) {
      bool ok = true;
      std::vector<std::int64_t> co;
      for (std::size_t i = 0; i < sp.size(); ++i) {
        const std::int64_t ek = (w.k[i] - 1) * w.dil[i] + 1;
        const std::int64_t span = sp[i] + w.pads[i] + w.pads[i + sp.size()] - ek;
        const std::int64_t o = (span + w.s[i] - 1) / w.s[i] + 1;
        ok = ok && (o - 1) * w.s[i] < sp[i] + w.pads[i];
        co.push_back(o);
      }
      if (ok) a.set("ceil_mode", std::int64_t{1}), w.out = co;
    }
    if (!max && chance(40)) a.set("count_include_pad", std::int64_t{1});
    out.insert(out.end(), w.out.begin(), w.out.end());
    add(node(max ? "MaxPool" : "AveragePool", {x.name}, a)[0], out);
    return true;
  }

  /// Upsampling in the opset's form: Upsample (opset 9), Resize-10 with scales, Resize-11 and later with an empty roi
  /// and scales; whole factors mostly (oneDNN takes those in its coordinate modes), and forms it does not take (a
  /// factor of 1.5, linear, align_corners, asymmetric with round_prefer_ceil), which stay on the CPU provider.
  bool upsample(const val& x) {
    std::vector<float> scales{1, 1};
    dims out{x.d[0], x.d[1]};
    for (std::size_t i = 2; i < x.d.size(); ++i) {
      const float f = chance(85) ? static_cast<float>(1 + pick(3)) : 1.5f;
      scales.push_back(f);
      out.push_back(static_cast<std::int64_t>(std::floor(static_cast<float>(x.d[i]) * f)));
    }
    if (volume(out) > max_volume) return false;
    const auto n = static_cast<std::int64_t>(scales.size());
    const std::string s = constant(tensor::from<float>(std::span<const std::int64_t>(&n, 1), std::span<const float>(scales)));
    attribute_list a;
    if (opset_ < 10) {
      add(node("Upsample", {x.name, s})[0], out);
      return true;
    }
    if (chance(15)) a.set("mode", std::string("linear"));
    if (opset_ == 10) {
      add(node("Resize", {x.name, s}, a)[0], out);
      return true;
    }
    static constexpr std::array<std::array<const char*, 2>, 6> forms{{{"asymmetric", "floor"},
                                                                      {"half_pixel", "round_prefer_floor"},
                                                                      {"pytorch_half_pixel", "round_prefer_ceil"},
                                                                      {"tf_half_pixel_for_nn", "floor"},
                                                                      {"asymmetric", "round_prefer_ceil"},
                                                                      {"align_corners", "round_prefer_floor"}}};
    const auto& form = forms[static_cast<std::size_t>(pick(6))];
    a.set("coordinate_transformation_mode", std::string(form[0]));
    a.set("nearest_mode", std::string(form[1]));
    add(node("Resize", {x.name, constant(tensor::from<float>({0}, {})), s}, a)[0], out);
    return true;
  }

  /// Einsum (opset 12) in the forms the optimiser rewrites as FusedMatMul: a product with constant rows ("nd,kd->nk")
  /// and x x^T per batch (attention's scores), plain or transposed.
  bool einsum(const val& x) {
    if (opset_ < 12 || x.d.size() < 2 || x.d.size() > 3) return false;
    attribute_list a;
    if (x.d.size() == 2) {
      const std::int64_t k = 1 + pick(12);
      a.set("equation", std::string("nd,kd->nk"));
      const float scale = std::sqrt(3.0f / static_cast<float>(x.d[1]));
      add(node("Einsum", {x.name, constant(random({k, x.d[1]}, scale))}, a)[0], {x.d[0], k});
    } else {
      a.set("equation", std::string(chance(50) ? "bij,bkj->bki" : "bij,bkj->bik"));
      add(node("Einsum", {x.name, x.name}, a)[0], {x.d[0], x.d[1], x.d[1]});
    }
    return true;
  }

  // ---- products ----
  bool matmul(const val& x) {
    const std::int64_t k = x.d.back();
    if (chance(25) && x.d.size() >= 2) {  // a product of two computed values: x @ x^T (attention's scores)
      dims perm(x.d.size());
      std::iota(perm.begin(), perm.end(), 0);
      std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
      attribute_list a;
      a.set("perm", perm);
      dims out = x.d;
      out.back() = x.d[x.d.size() - 2];
      if (volume(out) > max_volume) return false;
      const std::string t = node("Transpose", {x.name}, a)[0];
      const std::string y = node("MatMul", {x.name, t})[0];
      if (out.size() >= 3 && chance(40)) {
        // Attention's heads merged back: the product's batch and row dims permuted, its last dim kept (for the order
        // (.., n-2, n-3, n-1) the oneDNN provider writes the product in the Transpose's order, lower_matmul.cpp
        // transposed_dst; for the others it must not).
        dims back(out.size() - 1);
        std::iota(back.begin(), back.end(), 0);
        for (std::size_t i = back.size(); i > 1; --i) std::swap(back[i - 1], back[static_cast<std::size_t>(pick(static_cast<int>(i)))]);
        back.push_back(static_cast<std::int64_t>(out.size() - 1));
        attribute_list pa;
        pa.set("perm", back);
        dims tout(out.size());
        for (std::size_t i = 0; i < out.size(); ++i) tout[i] = out[static_cast<std::size_t>(back[i])];
        std::string z = y;
        if (chance(50)) {  // a post-op between: an Add or Mul by a row of N values (rank 1 or the product's) or by
                           // a full-size constant (the scores' scale, a mask)
          dims cd = out;
          const int form = pick(3);
          if (form == 0) cd = {out.back()};
          else if (form == 1) std::fill(cd.begin(), cd.end() - 1, std::int64_t{1});
          z = node(chance(50) ? "Add" : "Mul", {y, constant(random(cd, 1.0f))})[0];
        }
        add(node("Transpose", {z}, pa)[0], tout);
        return true;
      }
      add(y, out);
      return true;
    }
    const std::int64_t n = 1 + pick(24);
    dims wd{k, n};
    if (x.d.size() >= 3 && chance(20)) wd.insert(wd.begin(), x.d[x.d.size() - 3]);  // a batched weight
    if (volume(wd) > max_volume || volume(x.d) / k * n > max_volume) return false;
    const std::string w = constant(random(wd, std::sqrt(3.0f / static_cast<float>(k))));
    dims out = x.d;
    out.back() = n;
    std::string y = node("MatMul", {x.name, w})[0];
    if (chance(50)) y = node("Add", {y, constant(random({n}, 0.5f))})[0];  // a bias, as exporters write Linear
    add(y, out);
    return true;
  }

  bool gemm(const val& x) {
    const bool ta = chance(15), tb = chance(50);
    const std::int64_t m = ta ? x.d[1] : x.d[0], k = ta ? x.d[0] : x.d[1];
    const std::int64_t n = 1 + pick(24);
    if (k * n > max_volume || m * n > max_volume) return false;
    attribute_list a;
    if (ta) a.set("transA", std::int64_t{1});
    if (tb) a.set("transB", std::int64_t{1});
    if (chance(30)) a.set("alpha", uniform(0.25f, 2.0f));
    std::vector<std::string> ins{x.name, constant(random(tb ? dims{n, k} : dims{k, n}, std::sqrt(3.0f / static_cast<float>(k))))};
    if (opset_ < 11 || chance(70)) {  // C is optional from opset 11
      if (chance(30)) a.set("beta", uniform(0.25f, 2.0f));
      const int form = pick(3);
      ins.push_back(constant(random(form == 0 ? dims{n} : form == 1 ? dims{1, n} : dims{m, n}, 0.5f)));
    }
    add(node("Gemm", ins, a)[0], {m, n});
    return true;
  }

  // ---- normalisation, softmax ----
  bool normalization(const val& x) {
    if (opset_ >= 17 && chance(40)) {
      // LayerNormalization over the last axis (oneDNN's), or from another axis (the CPU's).
      const auto rank = static_cast<std::int64_t>(x.d.size());
      const std::int64_t axis = chance(70) ? -1 : 1 + pick(static_cast<int>(rank - 1));
      const std::int64_t first = axis < 0 ? axis + rank : axis;
      const dims nd(x.d.begin() + first, x.d.end());
      attribute_list a;
      a.set("axis", axis);
      if (chance(30)) a.set("epsilon", uniform(1e-6f, 1e-3f));
      // The normalised rows get a fixed ramp of spread ~1 added: a row of (nearly) equal values (after a saturated
      // Tanh, a pooling) has a variance far below epsilon, and LayerNormalization then multiplies its rounding by
      // 1/sqrt(epsilon), 300 or more: the two stacks' last-bit differences became differences of 1e-3 (fuzzer seeds
      // 3075952, 3088140), a condition number, not a fault of either provider.
      const std::string row = node("Add", {x.name, constant(random(nd, 1.0f))})[0];
      std::vector<std::string> ins{row, constant(random(nd, 1.0f))};
      if (chance(70)) ins.push_back(constant(random(nd, 0.5f)));
      add(node("LayerNormalization", ins, a)[0], x.d);
      return true;
    }
    const std::int64_t c = x.d[1];
    tensor var = random({c}, 1.0f);
    for (std::size_t i = 0; i < var.element_count(); ++i) var.typed<float>()[i] = 0.2f + std::fabs(var.typed<float>()[i]);
    attribute_list a;
    if (chance(30)) a.set("epsilon", uniform(1e-6f, 1e-3f));
    add(node("BatchNormalization",
             {x.name, constant(random({c}, 1.5f)), constant(random({c}, 0.5f)), constant(random({c}, 0.5f)), constant(std::move(var))},
             a)[0],
        x.d);
    return true;
  }

  bool softmax(const val& x) {
    const auto rank = static_cast<int>(x.d.size());
    attribute_list a;
    // Before opset 13 the axis coerces the input to 2-D; from 13 it is one axis.
    // Negative axes from opset 11.
    const std::int64_t axis = opset_ >= 11 ? (chance(50) ? -1 : pick(2 * rank) - rank) : pick(rank);
    if (axis != (opset_ >= 13 ? -1 : 1) || chance(30)) a.set("axis", axis);
    add(node(chance(85) ? "Softmax" : "LogSoftmax", {x.name}, a)[0], x.d);
    return true;
  }

  // ---- element-wise ----
  bool activation(const val& x) {
    std::string y;
    switch (pick(13)) {
      case 0: y = node("Relu", {x.name})[0]; break;
      case 1: y = node("Sigmoid", {x.name})[0]; break;
      case 2: y = node("Tanh", {x.name})[0]; break;
      case 3: {
        attribute_list a;
        a.set("alpha", uniform(0.01f, 0.5f));
        y = node("LeakyRelu", {x.name}, a)[0];
        break;
      }
      case 4: {
        attribute_list a;
        if (chance(50)) a.set("alpha", uniform(0.1f, 2.0f));
        y = node("Elu", {x.name}, a)[0];
        break;
      }
      case 5: y = node("Abs", {x.name})[0]; break;
      case 6: y = node("Neg", {x.name})[0]; break;
      case 7: {  // Clip: attributes before opset 11, optional inputs from 11
        const float lo = uniform(-2.0f, 0.0f), hi = uniform(0.0f, 2.0f);
        if (opset_ < 11) {
          attribute_list a;
          if (chance(80)) a.set("min", lo);
          if (chance(80)) a.set("max", hi);
          y = node("Clip", {x.name}, a)[0];
        } else {
          const int form = pick(3);
          std::vector<std::string> ins{x.name, form == 1 ? std::string() : constant(tensor::scalar(lo))};
          if (form != 2) ins.push_back(constant(tensor::scalar(hi)));
          y = node("Clip", ins)[0];
        }
        break;
      }
      case 8:
        if (opset_ < 14) return false;
        y = node("HardSwish", {x.name})[0];
        break;
      case 9: y = node("Exp", node("Tanh", {x.name})) [0]; break;  // bounded before the exponential
      // Sqrt of a value bounded away from 0: near 0 its slope is unbounded, and float rounding of its input (1e-6
      // after a Log of a value near 1) becomes a difference of 1e-3 (fuzzer seed 3015148), a condition number, not a
      // fault of either provider.
      case 10: y = node("Sqrt", {node("Add", {node("Abs", {x.name})[0], scalar(1.0f)})[0]})[0]; break;
      case 11: y = node("Log", {node("Add", {node("Abs", {x.name})[0], scalar(1.0f)})[0]})[0]; break;
      default: {  // Gelu, the erf form exporters write: x * 0.5 * (1 + erf(x / sqrt 2))
        const std::string e = node("Erf", {node("Div", {x.name, scalar(1.4142135f)})[0]})[0];
        const std::string h = node("Mul", {x.name, node("Add", {e, scalar(1.0f)})[0]})[0];
        y = node("Mul", {h, scalar(0.5f)})[0];
        break;
      }
    }
    add(y, x.d);
    return true;
  }

  /// One to four Add/Sub/Mul/Div by scalar constants, the constant on either side where the result is bounded.
  bool scalar_chain(const val& x) {
    std::string y = x.name;
    for (int links = 1 + pick(4); links > 0; --links) {
      const int op = pick(4);
      const float k = (chance(50) ? 1.0f : -1.0f) * uniform(0.25f, 4.0f);
      const std::string c = scalar(k);
      const bool left = op != 3 && chance(30);  // k - x, k + x, k * x; never k / x
      const char* type = std::array<const char*, 4>{"Add", "Sub", "Mul", "Div"}[op];
      y = node(type, left ? std::vector<std::string>{c, y} : std::vector<std::string>{y, c})[0];
    }
    add(y, x.d);
    return true;
  }

  /// x (op) another value of its shape, or a constant that broadcasts: per channel, over the last axis, full.
  bool tensor_binary(const val& x) {
    std::string other;
    dims od;
    std::vector<const val*> same;
    for (const auto& v : vals_)
      if (v.d == x.d && v.name != x.name) same.push_back(&v);
    const int form = pick(4);
    if (form == 0 && !same.empty()) {
      other = same[static_cast<std::size_t>(pick(static_cast<int>(same.size())))]->name;
    } else if (form == 1 && x.d.size() >= 3) {
      od.assign(x.d.size() - (chance(50) ? 1 : 0), 1);
      od[od.size() - (x.d.size() - 1)] = x.d[1];
      other = constant(random(od, 1.0f));
    } else if (form == 2) {
      other = constant(random({x.d.back()}, 1.0f));
    } else {
      if (symbolic_) other = x.name;  // x with itself (the batch is not known when the graph is built)
      else other = constant(random(x.d, 1.0f));
    }
    const int op = pick(3);
    const char* type = std::array<const char*, 3>{"Add", "Mul", "Sub"}[op];
    const bool swap = op != 2 && chance(30);
    add(node(type, swap ? std::vector<std::string>{other, x.name} : std::vector<std::string>{x.name, other})[0], x.d);
    return true;
  }

  // ---- shapes ----
  std::string unsqueeze(const std::string& in, const dims& axes) {
    if (opset_ < 13) {
      attribute_list a;
      a.set("axes", axes);
      return node("Unsqueeze", {in}, a)[0];
    }
    return node("Unsqueeze", {in, ints(axes)})[0];
  }
  std::string squeeze(const std::string& in, const dims& axes) {
    if (opset_ < 13) {
      attribute_list a;
      if (!axes.empty()) a.set("axes", axes);
      return node("Squeeze", {in}, a)[0];
    }
    if (axes.empty()) return node("Squeeze", {in})[0];
    return node("Squeeze", {in, ints(axes)})[0];
  }
  /// A 1-D int64 slice [b, e) of `in`, in the opset's form.
  std::string slice1d(const std::string& in, std::int64_t b, std::int64_t e) {
    if (opset_ < 10) {
      attribute_list a;
      a.set("starts", dims{b});
      a.set("ends", dims{e});
      if (chance(50)) a.set("axes", dims{0});
      return node("Slice", {in}, a)[0];
    }
    std::vector<std::string> ins{in, ints({b}), ints({e})};
    if (chance(50)) ins.push_back(ints({0}));
    return node("Slice", ins)[0];
  }

  bool reshape_family(const val& x) {
    const auto rank = static_cast<std::int64_t>(x.d.size());
    switch (pick(4)) {
      case 0: {
        attribute_list a;
        const std::int64_t axis = pick(static_cast<int>(rank + 1));
        if (axis != 1 || chance(30)) a.set("axis", axis);
        const dims out{volume(dims(x.d.begin(), x.d.begin() + axis)), volume(dims(x.d.begin() + axis, x.d.end()))};
        add(node("Flatten", {x.name}, a)[0], out);
        return true;
      }
      case 1: {  // Reshape to a constant target with 0 (copy) and -1 (infer) entries
        if (rank < 2) return false;
        const std::int64_t rest = volume(dims(x.d.begin() + 1, x.d.end()));
        std::int64_t f = 1;
        for (std::int64_t c = 2; c <= 8; ++c)
          if (rest % c == 0 && chance(50)) f = c;
        const dims target{0, f, -1};
        add(node("Reshape", {x.name, ints(target)})[0], {x.d[0], f, rest / f});
        return true;
      }
      case 2: {
        const std::int64_t axis = pick(static_cast<int>(rank + 1));
        dims out = x.d;
        out.insert(out.begin() + axis, 1);
        add(unsqueeze(x.name, {axis}), out);
        return true;
      }
      default: {
        std::vector<std::int64_t> ones;
        for (std::int64_t i = 1; i < rank; ++i)
          if (x.d[static_cast<std::size_t>(i)] == 1) ones.push_back(i);
        if (ones.empty() || rank < 3) return false;
        const std::int64_t axis = ones[static_cast<std::size_t>(pick(static_cast<int>(ones.size())))];
        dims out = x.d;
        out.erase(out.begin() + axis);
        add(squeeze(x.name, {axis}), out);
        return true;
      }
    }
  }

  /// Shape(x) -> the batch dim (Gather, or Slice in the opset's form) -> Unsqueeze/Concat with constants -> Reshape:
  /// what exporters write for `x.view(x.size(0), -1)` and its kin.
  bool shape_computation(const val& x) {
    if (x.d.size() < 2) return false;
    const std::string s = node("Shape", {x.name})[0];
    std::string batch;
    if (chance(50)) {
      attribute_list a;
      a.set("axis", std::int64_t{0});
      batch = unsqueeze(node("Gather", {s, constant(tensor::scalar(std::int64_t{0}))}, a)[0], {0});
    } else {
      batch = slice1d(s, 0, 1);
    }
    attribute_list c0;
    c0.set("axis", std::int64_t{0});
    const std::int64_t rest = volume(dims(x.d.begin() + 1, x.d.end()));
    if (chance(50)) {
      add(node("Reshape", {x.name, node("Concat", {batch, ints({-1})}, c0)[0]})[0], {x.d[0], rest});
    } else {
      // Keep the trailing dims too: [N] + shape[1:] (a Slice of the shape), then a Reshape that changes nothing but
      // goes through the whole computation.
      const std::string tail = slice1d(s, 1, static_cast<std::int64_t>(x.d.size()));
      add(node("Reshape", {x.name, node("Concat", {batch, tail}, c0)[0]})[0], x.d);
    }
    return true;
  }

  bool transpose_or_slice(const val& x) {
    const auto rank = x.d.size();
    if (chance(60)) {
      dims perm(rank);
      std::iota(perm.begin(), perm.end(), 0);
      for (std::size_t i = rank; i > 1; --i) std::swap(perm[i - 1], perm[static_cast<std::size_t>(pick(static_cast<int>(i)))]);
      attribute_list a;
      a.set("perm", perm);
      dims out(rank);
      for (std::size_t i = 0; i < rank; ++i) out[i] = x.d[static_cast<std::size_t>(perm[i])];
      add(node("Transpose", {x.name}, a)[0], out);
      return true;
    }
    // A slice of the data along a non-batch axis.
    if (rank < 2) return false;
    const std::int64_t axis = 1 + pick(static_cast<int>(rank - 1));
    const std::int64_t n = x.d[static_cast<std::size_t>(axis)];
    const std::int64_t b = pick(static_cast<int>(n)), e = b + 1 + pick(static_cast<int>(n - b));
    dims out = x.d;
    out[static_cast<std::size_t>(axis)] = e - b;
    if (opset_ < 10) {
      attribute_list a;
      a.set("starts", dims{b});
      a.set("ends", dims{e});
      a.set("axes", dims{axis});
      add(node("Slice", {x.name}, a)[0], out);
    } else {
      add(node("Slice", {x.name, ints({b}), ints({e}), ints({axis})})[0], out);
    }
    return true;
  }

  bool concat_or_split(const val& x) {
    const auto rank = static_cast<std::int64_t>(x.d.size());
    if (chance(50)) {
      // Concat x with a value of its shape along a non-batch axis (or with an activation of itself).
      const std::int64_t axis = 1 + pick(static_cast<int>(rank - 1));
      if (2 * volume(x.d) > max_volume) return false;
      std::string other;
      for (const auto& v : vals_)
        if (v.d == x.d && v.name != x.name && chance(50)) other = v.name;
      if (other.empty()) other = node("Relu", {x.name})[0];
      attribute_list a;
      a.set("axis", opset_ >= 11 && chance(30) ? axis - rank : axis);
      dims out = x.d;
      out[static_cast<std::size_t>(axis)] *= 2;
      add(node("Concat", {x.name, other}, a)[0], out);
      return true;
    }
    const std::int64_t axis = 1 + pick(static_cast<int>(rank - 1));
    const std::int64_t n = x.d[static_cast<std::size_t>(axis)];
    if (n < 2) return false;
    const std::int64_t first = 1 + pick(static_cast<int>(n - 1));
    const dims sizes{first, n - first};
    attribute_list a;
    a.set("axis", axis);
    std::vector<std::string> ins{x.name};
    if (opset_ < 13) a.set("split", sizes);
    else ins.push_back(ints(sizes));
    const auto outs = node("Split", ins, a, 2);
    for (std::size_t i = 0; i < 2; ++i) {
      dims d = x.d;
      d[static_cast<std::size_t>(axis)] = sizes[i];
      add(outs[i], d);
    }
    return true;
  }
};

}  // namespace

generated generate_graph(std::uint64_t seed) { return gen(seed).run(); }

std::string compare_outputs(const std::vector<tensor>& got, const std::vector<tensor>& want, double rtol, double atol) {
  if (got.size() != want.size()) return std::to_string(got.size()) + " outputs, expected " + std::to_string(want.size());
  for (std::size_t k = 0; k < got.size(); ++k) {
    const tensor& a = got[k];
    const tensor& b = want[k];
    const std::string which = "output " + std::to_string(k);
    if (a.type() != b.type()) return which + ": element type differs";
    if (!std::equal(a.sizes().begin(), a.sizes().end(), b.sizes().begin(), b.sizes().end())) {
      std::string s = which + ": shape [";
      for (auto d : a.sizes()) s += std::to_string(d) + " ";
      s += "], expected [";
      for (auto d : b.sizes()) s += std::to_string(d) + " ";
      return s + "]";
    }
    if (a.type() != element_type::float32) {
      if (a.byte_size() != b.byte_size() || std::memcmp(a.data(), b.data(), a.byte_size()) != 0) return which + ": values differ";
      continue;
    }
    const float* pa = a.typed<float>();
    const float* pb = b.typed<float>();
    double scale = 0;
    for (std::size_t i = 0; i < b.element_count(); ++i)
      if (std::isfinite(pb[i])) scale = std::max(scale, std::fabs(double(pb[i])));
    for (std::size_t i = 0; i < b.element_count(); ++i) {
      const double x = pa[i], y = pb[i];
      bool ok;
      if (std::isnan(y) || std::isnan(x)) ok = std::isnan(x) && std::isnan(y);
      else if (std::isinf(y) || std::isinf(x)) ok = x == y;
      // The absolute term scales with the output, and with 1 at least: the inputs and weights are of order 1, so
      // an output near 0 is a difference of such values, exact only to their rounding.
      else ok = std::fabs(x - y) <= rtol * std::fabs(y) + atol * std::max(scale, 1.0);
      if (!ok)
        return which + ": value " + std::to_string(i) + " is " + std::to_string(x) + ", expected " + std::to_string(y) +
               " (largest |expected| " + std::to_string(scale) + ")";
    }
  }
  return "";
}

std::string compare_bits(const std::vector<tensor>& a, const std::vector<tensor>& b) {
  if (a.size() != b.size()) return "output counts differ";
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (a[k].type() != b[k].type() || !std::equal(a[k].sizes().begin(), a[k].sizes().end(), b[k].sizes().begin(), b[k].sizes().end()))
      return "output " + std::to_string(k) + ": type or shape differs";
    if (a[k].byte_size() != b[k].byte_size() || std::memcmp(a[k].data(), b[k].data(), a[k].byte_size()) != 0) {
      std::size_t i = 0;
      while (i < a[k].byte_size() && a[k].data()[i] == b[k].data()[i]) ++i;
      return "output " + std::to_string(k) + ": bytes differ from byte " + std::to_string(i);
    }
  }
  return "";
}

}  // namespace epstack::fuzz
