// From a partition's nodes to fused oneDNN operations.
#include "ir.hpp"
#include "support.hpp"

#include <epstack/detail/cat.hpp>
#include <epstack/core/mapped_file.hpp>
#include <epstack/ir/node_facts.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace epstack::dnnl_ep {

using epstack::detail::cat;
using alg = dn::algorithm;

namespace {

struct builder {
  const partition& p;
  const graph& g;
  ir r;
  std::map<value_id, int> index;

  int value(value_id v) {
    if (v == no_id) return -1;
    if (auto it = index.find(v); it != index.end()) return it->second;
    ir_value iv;
    iv.name = g.value(v).name;
    if (g.value(v).initializer && !g.value(v).is_graph_input) iv.constant = *g.value(v).initializer;
    r.values.push_back(std::move(iv));
    return index[v] = static_cast<int>(r.values.size() - 1);
  }
  int fresh(std::string name) {
    r.values.push_back(ir_value{std::move(name), std::nullopt, -1, {}});
    return static_cast<int>(r.values.size() - 1);
  }
  int constant(std::string name, tensor t) {
    r.values.push_back(ir_value{std::move(name), std::move(t), -1, {}});
    return static_cast<int>(r.values.size() - 1);
  }
  const tensor* const_of(const node& nd, std::size_t i) {
    if (i >= nd.inputs.size() || nd.inputs[i] == no_id) return nullptr;
    const auto& v = g.value(nd.inputs[i]);
    return v.initializer && !v.is_graph_input ? &*v.initializer : nullptr;
  }
  ir_op& emit(op_kind k, const node& nd) {
    ir_op op;
    op.kind = k;
    op.nodes.push_back(nd.name);
    r.ops.push_back(std::move(op));
    return r.ops.back();
  }

  static bool activation(std::string_view act, const std::vector<float>& params, post_op& po) {
    po.binary = false;
    if (act == "Relu") po.alg = alg::eltwise_relu;
    else if (act == "Sigmoid") po.alg = alg::eltwise_logistic;
    else if (act == "Tanh") po.alg = alg::eltwise_tanh;
    else if (act == "LeakyRelu") po.alg = alg::eltwise_relu, po.alpha = params.empty() ? 0.01f : params[0];
    else if (act == "Clip") {
      po.alg = alg::eltwise_clip_v2;
      po.alpha = params.size() > 0 ? params[0] : -INFINITY;
      po.beta = params.size() > 1 ? params[1] : INFINITY;
    } else return false;
    return true;
  }

  /// Layer normalisation of value x by the node's scale (input `scale`) and bias (the input after it).
  void layernorm(const node& nd, int x, std::size_t scale, float default_epsilon) {
    auto& ln = emit(op_kind::layernorm, nd);
    ln.in = {x};
    ln.weights = *const_of(nd, scale);
    if (const tensor* b = const_of(nd, scale + 1)) ln.bias = *b;
    ln.epsilon = attr_f(nd, "epsilon", default_epsilon);
    ln.out = value(nd.outputs[0]);
  }

  Status conv_like(const node& nd, op_kind k) {
    auto& op = emit(k, nd);
    op.in = {value(nd.inputs[0])};
    op.weights = *const_of(nd, 1);
    if (const tensor* b = const_of(nd, 2)) op.bias = *b;
    op.strides = attr_ints(nd, "strides");
    op.dilations = attr_ints(nd, "dilations");
    op.pads = attr_ints(nd, "pads");
    op.kernel = attr_ints(nd, "kernel_shape");
    op.output_padding = attr_ints(nd, "output_padding");
    op.output_shape = attr_ints(nd, "output_shape");
    op.auto_pad = attr_s(nd, "auto_pad", "NOTSET");
    op.group = attr_i(nd, "group", 1);
    op.out = value(nd.outputs[0]);
    if (nd.op_type == "FusedConv") {
      const std::string act = attr_s(nd, "activation");
      if (nd.inputs.size() > 3 && nd.inputs[3] != no_id)
        op.posts.push_back(post_op{true, alg::binary_add, 0, 0, value(nd.inputs[3])});
      post_op po;
      if (!act.empty()) {
        if (!activation(act, attr_floats(nd, "activation_params"), po))
          return Status(errc::not_implemented, cat("activation '", act, "'"));
        op.posts.push_back(po);
      }
    }
    return {};
  }

  Status node_op(node_id n) {
    const auto& nd = g.node(n);
    const std::string_view t = nd.op_type;
    const auto in = [&](std::size_t i) { return i < nd.inputs.size() ? value(nd.inputs[i]) : -1; };
    if (is_host_shape_op(nd) && g.value(nd.outputs[0]).type.elem == element_type::int64) {
      auto& op = emit(op_kind::host, nd);
      op.host_op = nd.op_type;
      for (std::size_t i = 0; i < nd.inputs.size(); ++i) op.in.push_back(in(i));
      if (t == "Slice" && nd.inputs.size() == 1) {
        // Opset 1-9: starts, ends and axes are attributes; they become the constant inputs of the opset-10 form.
        const auto ints = [&](const char* a) {
          const std::vector<std::int64_t> v = attr_ints(nd, a);
          const std::int64_t n = static_cast<std::int64_t>(v.size());
          return tensor::from<std::int64_t>(std::span<const std::int64_t>(&n, 1), std::span<const std::int64_t>(v));
        };
        const int starts = constant(nd.name + "/starts", ints("starts"));
        const int ends = constant(nd.name + "/ends", ints("ends"));
        const int axes = has_attr(nd, "axes") ? constant(nd.name + "/axes", ints("axes")) : -1;
        op.in = {op.in[0], starts, ends, axes};
        op.out = value(nd.outputs[0]);
        return {};
      }
      op.axis = attr_i(nd, "axis", 0);
      if (has_attr(nd, "axes")) op.axes = attr_ints(nd, "axes");
      op.start = attr_i(nd, "start", 0);
      op.end = attr_i(nd, "end", INT64_MAX);
      op.out = value(nd.outputs[0]);
      return {};
    }
    if (t == "Split") {
      auto& op = emit(op_kind::split, nd);
      op.in = {in(0)};
      op.axis = attr_i(nd, "axis", 0);
      if (const tensor* sp = const_of(nd, 1)) op.sizes.assign(sp->typed<std::int64_t>(), sp->typed<std::int64_t>() + sp->element_count());
      else if (has_attr(nd, "split")) op.sizes = attr_ints(nd, "split");
      else if (has_attr(nd, "num_outputs")) {
        // Split-18: num_outputs parts of ceil(d / n), the last one what remains (the capability checked d is known).
        const auto& t = g.value(nd.inputs[0]).type;
        const auto rank = static_cast<std::int64_t>(t.dims->rank());
        const auto d = (*t.dims)[static_cast<std::size_t>(op.axis < 0 ? op.axis + rank : op.axis)].value;
        const auto parts = static_cast<std::int64_t>(nd.outputs.size());
        const auto each = (d + parts - 1) / parts;
        for (std::int64_t i = 0; i < parts; ++i) op.sizes.push_back(i + 1 < parts ? each : d - each * (parts - 1));
      }
      for (value_id o : nd.outputs) op.outs.push_back(value(o));
      op.out = op.outs.front();
      return {};
    }
    if (t == "Conv" || t == "FusedConv") return conv_like(nd, op_kind::conv);
    if (t == "ConvTranspose") return conv_like(nd, op_kind::deconv);
    if (t == "MatMul" || t == "FusedMatMul") {
      auto& op = emit(op_kind::matmul, nd);
      op.in = {in(0), in(1)};
      op.trans_a = attr_i(nd, "transA", 0) != 0;
      op.trans_b = attr_i(nd, "transB", 0) != 0;
      op.scale = attr_f(nd, "alpha", 1.0f);
      op.out = value(nd.outputs[0]);
      return {};
    }
    if (t == "Gemm") {
      auto& op = emit(op_kind::matmul, nd);
      op.in = {in(0), in(1)};
      op.trans_a = attr_i(nd, "transA", 0) != 0;
      op.trans_b = attr_i(nd, "transB", 0) != 0;
      op.scale = attr_f(nd, "alpha", 1.0f);
      const float beta = attr_f(nd, "beta", 1.0f);
      op.out = value(nd.outputs[0]);
      if (in(2) >= 0 && beta != 0.0f) {
        int c = in(2);
        if (beta != 1.0f) {
          const tensor* ct = const_of(nd, 2);
          if (ct == nullptr) return Status(errc::not_implemented, "Gemm with beta != 1 and a C computed at run time");
          tensor scaled = ct->clone();
          for (float& x : scaled.view<float>()) x *= beta;
          c = constant(r.values[static_cast<std::size_t>(c)].name + "*beta", std::move(scaled));
        }
        op.posts.push_back(post_op{true, alg::binary_add, 0, 0, c});
      }
      return {};
    }
    if (t == "BatchNormalization") {
      auto& op = emit(op_kind::batchnorm, nd);
      op.in = {in(0)};
      op.weights = *const_of(nd, 1);
      op.bias = *const_of(nd, 2);
      op.mean = *const_of(nd, 3);
      op.variance = *const_of(nd, 4);
      op.epsilon = attr_f(nd, "epsilon", 1e-5f);
      op.out = value(nd.outputs[0]);
      return {};
    }
    if (t == "LayerNormalization") {
      layernorm(nd, in(0), 1, 1e-5f);
      return {};
    }
    if (t == "SkipLayerNormalization") {
      // input + skip (+ bias), then layer normalisation: the additions become post-ops of whatever computed input.
      auto& add = emit(op_kind::binary, nd);
      add.alg = alg::binary_add;
      add.in = {in(0), in(1)};
      if (in(4) >= 0) add.posts.push_back(post_op{true, alg::binary_add, 0, 0, in(4)});
      // Output 3, when the model asks for it, is this sum.
      const int sum = nd.outputs.size() > 3 && nd.outputs[3] != no_id ? value(nd.outputs[3]) : fresh(nd.name + ":sum");
      add.out = sum;
      layernorm(nd, sum, 2, 1e-12f);
      return {};
    }
    if (t == "Softmax") {
      auto& op = emit(op_kind::softmax, nd);
      op.in = {in(0)};
      op.axis = attr_i(nd, "axis", nd.since_version > 0 && nd.since_version < 13 ? 1 : -1);
      op.out = value(nd.outputs[0]);
      return {};
    }
    if (t == "MaxPool" || t == "AveragePool" || t == "GlobalAveragePool" || t == "GlobalMaxPool") {
      auto& op = emit(op_kind::pool, nd);
      op.in = {in(0)};
      const bool global = t.starts_with("Global");
      if (t == "MaxPool" || t == "GlobalMaxPool") op.alg = alg::pooling_max;
      else op.alg = attr_i(nd, "count_include_pad", 0) != 0 ? alg::pooling_avg_include_padding : alg::pooling_avg_exclude_padding;
      if (!global) {
        op.kernel = attr_ints(nd, "kernel_shape");
        op.strides = attr_ints(nd, "strides");
        op.pads = attr_ints(nd, "pads");
        op.dilations = attr_ints(nd, "dilations");
        op.auto_pad = attr_s(nd, "auto_pad", "NOTSET");
        op.ceil_mode = attr_i(nd, "ceil_mode", 0) != 0;
      }
      op.out = value(nd.outputs[0]);
      return {};
    }
    if (t == "Gelu" || t == "BiasGelu") {
      if (t == "BiasGelu") {
        auto& op = emit(op_kind::binary, nd);
        op.alg = alg::binary_add;
        op.in = {in(0), in(1)};
        op.posts.push_back(post_op{false, alg::eltwise_gelu_erf, 0, 0, -1});
        op.out = value(nd.outputs[0]);
        return {};
      }
      auto& op = emit(op_kind::eltwise, nd);
      op.alg = attr_s(nd, "approximate", "none") == "tanh" ? alg::eltwise_gelu_tanh : alg::eltwise_gelu_erf;
      op.in = {in(0)};
      op.out = value(nd.outputs[0]);
      return {};
    }
    if (t == "Relu" || t == "Sigmoid" || t == "Tanh" || t == "LeakyRelu" || t == "Elu" || t == "Exp" || t == "Log" ||
        t == "Sqrt" || t == "Abs" || t == "Neg" || t == "Clip" || t == "HardSwish") {
      auto& op = emit(op_kind::eltwise, nd);
      op.in = {in(0)};
      op.out = value(nd.outputs[0]);
      if (t == "Relu") op.alg = alg::eltwise_relu;
      else if (t == "Sigmoid") op.alg = alg::eltwise_logistic;
      else if (t == "Tanh") op.alg = alg::eltwise_tanh;
      else if (t == "LeakyRelu") op.alg = alg::eltwise_relu, op.alpha = attr_f(nd, "alpha", 0.01f);
      else if (t == "Elu") op.alg = alg::eltwise_elu, op.alpha = attr_f(nd, "alpha", 1.0f);
      else if (t == "Exp") op.alg = alg::eltwise_exp;
      else if (t == "Log") op.alg = alg::eltwise_log;
      else if (t == "Sqrt") op.alg = alg::eltwise_sqrt;
      else if (t == "Abs") op.alg = alg::eltwise_abs;
      else if (t == "Neg") op.alg = alg::eltwise_linear, op.alpha = -1.0f;
      else if (t == "HardSwish") op.alg = alg::eltwise_hardswish;
      else {  // Clip: attributes before opset 11, constant inputs after
        op.alg = alg::eltwise_clip_v2;
        op.alpha = attr_f(nd, "min", -INFINITY);
        op.beta = attr_f(nd, "max", INFINITY);
        if (const tensor* lo = const_of(nd, 1); lo && lo->element_count() == 1) op.alpha = lo->typed<float>()[0];
        if (const tensor* hi = const_of(nd, 2); hi && hi->element_count() == 1) op.beta = hi->typed<float>()[0];
        op.in = {in(0)};
      }
      return {};
    }
    if (t == "Add" || t == "Sub" || t == "Mul" || t == "Div") {
      auto& op = emit(op_kind::binary, nd);
      op.alg = t == "Add" ? alg::binary_add : t == "Sub" ? alg::binary_sub : t == "Mul" ? alg::binary_mul : alg::binary_div;
      op.in = {in(0), in(1)};
      op.out = value(nd.outputs[0]);
      return {};
    }
    if (t == "Transpose") {
      auto& op = emit(op_kind::transpose, nd);
      op.in = {in(0)};
      op.perm = attr_ints(nd, "perm");
      op.out = value(nd.outputs[0]);
      return {};
    }
    if (t == "Reshape" || t == "Flatten" || t == "Squeeze" || t == "Unsqueeze") {
      auto& op = emit(op_kind::reshape, nd);
      op.form = t == "Reshape" ? reshape_form::reshape
              : t == "Flatten" ? reshape_form::flatten
              : t == "Squeeze" ? reshape_form::squeeze
                               : reshape_form::unsqueeze;
      op.in = {in(0), in(1)};
      op.axis = attr_i(nd, "axis", 1);
      op.allowzero = attr_i(nd, "allowzero", 0) != 0;
      if (has_attr(nd, "axes")) op.axes = attr_ints(nd, "axes"), op.in[1] = -1;
      op.out = value(nd.outputs[0]);
      return {};
    }
    if (t == "Resize" || t == "Upsample") {
      auto f = nearest_factors(g, n);
      if (!f.refusal.empty()) return Status(errc::not_implemented, f.refusal);
      auto& op = emit(op_kind::resample, nd);
      op.in = {in(0)};
      op.strides = std::move(f.factors);
      op.alg = alg::resampling_nearest;
      op.out = value(nd.outputs[0]);
      return {};
    }
    if (t == "Concat") {
      auto& op = emit(op_kind::concat, nd);
      for (std::size_t i = 0; i < nd.inputs.size(); ++i) op.in.push_back(in(i));
      op.axis = attr_i(nd, "axis", 0);
      op.out = value(nd.outputs[0]);
      return {};
    }
    return Status(errc::not_implemented, cat("the oneDNN provider has no lowering for ", g.describe(n)));
  }
};

/// How many times each value is read by the operations (inputs and binary post-ops), plus once per partition output.
std::vector<int> use_counts(const ir& r) {
  std::vector<int> uses(r.values.size(), 0);
  for (const auto& op : r.ops) {
    for (int v : op.in)
      if (v >= 0) ++uses[static_cast<std::size_t>(v)];
    for (const auto& po : op.posts)
      if (po.binary) ++uses[static_cast<std::size_t>(po.src1)];
  }
  for (int v : r.outputs) ++uses[static_cast<std::size_t>(v)];
  return uses;
}

std::optional<float> scalar(const ir& r, int v) {
  const auto& c = r.values[static_cast<std::size_t>(v)].constant;
  if (!c || c->element_count() != 1 || c->type() != element_type::float32) return std::nullopt;
  return c->typed<float>()[0];
}

bool takes_posts(op_kind k) {
  return k == op_kind::conv || k == op_kind::deconv || k == op_kind::matmul || k == op_kind::binary;
}

/// Folds a BatchNormalization that alone reads a convolution's output into the convolution's weights and bias.
bool fold_batchnorm(ir& r) {
  const auto uses = use_counts(r);
  for (std::size_t i = 0; i < r.ops.size(); ++i) {
    auto& bn = r.ops[i];
    if (bn.kind != op_kind::batchnorm) continue;
    const int x = bn.in[0];
    if (uses[static_cast<std::size_t>(x)] != 1) continue;
    auto it = std::find_if(r.ops.begin(), r.ops.end(), [&](const ir_op& o) { return o.out == x; });
    if (it == r.ops.end() || it->kind != op_kind::conv || !it->posts.empty()) continue;
    auto& conv = *it;
    const auto oc = conv.weights.sizes()[0];
    if (bn.weights.element_count() != static_cast<std::size_t>(oc)) continue;
    tensor w = conv.weights.clone();
    tensor b = tensor::uninitialized(element_type::float32, std::vector<std::int64_t>{oc});
    const std::size_t per = w.element_count() / static_cast<std::size_t>(oc);
    const float* s = bn.weights.typed<float>();
    const float* sh = bn.bias.typed<float>();
    const float* mu = bn.mean.typed<float>();
    const float* var = bn.variance.typed<float>();
    const float* b0 = conv.bias.empty() ? nullptr : conv.bias.typed<float>();
    float* wp = w.typed<float>();
    float* bp = b.typed<float>();
    for (std::int64_t o = 0; o < oc; ++o) {
      const float k = s[o] / std::sqrt(var[o] + bn.epsilon);
      for (std::size_t j = 0; j < per; ++j) wp[static_cast<std::size_t>(o) * per + j] *= k;
      bp[o] = ((b0 ? b0[o] : 0.0f) - mu[o]) * k + sh[o];
    }
    if (conv.weights.is_file_backed()) release_file_pages(conv.weights.data(), conv.weights.byte_size());
    conv.weights = std::move(w);
    conv.bias = std::move(b);
    conv.out = bn.out;
    conv.nodes.insert(conv.nodes.end(), bn.nodes.begin(), bn.nodes.end());
    r.ops.erase(r.ops.begin() + static_cast<std::ptrdiff_t>(i));
    return true;
  }
  return false;
}

/// Moves an element-wise op, or a binary op with one operand computed by a post-op-taking op, into that op's
/// post-ops; the fused op takes the consumer's place in the order (everything it reads is ready there).
bool fuse_post_op(ir& r) {
  const auto uses = use_counts(r);
  for (std::size_t i = 0; i < r.ops.size(); ++i) {
    auto& c = r.ops[i];
    if (c.kind != op_kind::eltwise && c.kind != op_kind::binary) continue;
    for (std::size_t side = 0; side < (c.kind == op_kind::binary ? 2u : 1u); ++side) {
      const int x = c.in[side];
      if (x < 0 || uses[static_cast<std::size_t>(x)] != 1) continue;
      const auto pit = std::find_if(r.ops.begin(), r.ops.begin() + static_cast<std::ptrdiff_t>(i),
                                    [&](const ir_op& o) { return o.out == x; });
      if (pit == r.ops.begin() + static_cast<std::ptrdiff_t>(i) || !takes_posts(pit->kind)) continue;
      ir_op fused = *pit;
      if (c.kind == op_kind::eltwise) {
        append_post(fused.posts, post_op{false, c.alg, c.alpha, c.beta, -1});
      } else {
        const int other = c.in[1 - side];
        const bool commutative = c.alg == alg::binary_add || c.alg == alg::binary_mul;
        if (side == 1 && !commutative) continue;
        if (const auto k = scalar(r, other)) {
          if (c.alg == alg::binary_add) append_post(fused.posts, post_op{false, alg::eltwise_linear, 1.0f, *k, -1});
          else if (c.alg == alg::binary_sub) append_post(fused.posts, post_op{false, alg::eltwise_linear, 1.0f, -*k, -1});
          else if (c.alg == alg::binary_mul) append_post(fused.posts, post_op{false, alg::eltwise_linear, *k, 0.0f, -1});
          else append_post(fused.posts, post_op{false, alg::eltwise_linear, 1.0f / *k, 0.0f, -1});
        } else {
          fused.posts.push_back(post_op{true, c.alg, 0, 0, other});
        }
      }
      for (const auto& p : c.posts) append_post(fused.posts, p);
      // Not fused where oneDNN would run a post-op with another's parameters (see eltwise_conflict).
      if (eltwise_conflict(fused.posts)) continue;
      fused.nodes.insert(fused.nodes.end(), c.nodes.begin(), c.nodes.end());
      fused.out = c.out;
      const std::size_t producer = static_cast<std::size_t>(pit - r.ops.begin());
      r.ops[i] = std::move(fused);
      r.ops.erase(r.ops.begin() + static_cast<std::ptrdiff_t>(producer));
      return true;
    }
  }
  return false;
}

}  // namespace

bool eltwise_conflict(const std::vector<post_op>& posts) {
  for (std::size_t i = 0; i < posts.size(); ++i)
    for (std::size_t j = i + 1; j < posts.size(); ++j)
      if (!posts[i].binary && !posts[j].binary && posts[i].alg == posts[j].alg &&
          (posts[i].alpha != posts[j].alpha || posts[i].beta != posts[j].beta))
        return true;
  return false;
}

void append_post(std::vector<post_op>& posts, const post_op& p) {
  if (!p.binary && p.alg == alg::eltwise_linear && !posts.empty() && !posts.back().binary &&
      posts.back().alg == alg::eltwise_linear) {
    auto& q = posts.back();
    q.beta = p.alpha * q.beta + p.beta;
    q.alpha = p.alpha * q.alpha;
    return;
  }
  posts.push_back(p);
}

namespace {

std::string_view kind_name(op_kind k) {
  switch (k) {
    case op_kind::conv: return "convolution";
    case op_kind::deconv: return "deconvolution";
    case op_kind::matmul: return "matmul";
    case op_kind::pool: return "pooling";
    case op_kind::eltwise: return "eltwise";
    case op_kind::binary: return "binary";
    case op_kind::softmax: return "softmax";
    case op_kind::layernorm: return "layer_normalization";
    case op_kind::batchnorm: return "batch_normalization";
    case op_kind::transpose: return "reorder";
    case op_kind::reshape: return "reshape";
    case op_kind::concat: return "concat";
    case op_kind::split: return "split";
    case op_kind::host: return "shape computation (when planning)";
    case op_kind::resample: return "resampling";
  }
  return "?";
}

std::string alg_name(alg a) {
  switch (a) {
    case alg::eltwise_relu: return "eltwise_relu";
    case alg::eltwise_logistic: return "eltwise_logistic";
    case alg::eltwise_tanh: return "eltwise_tanh";
    case alg::eltwise_clip_v2: return "eltwise_clip";
    case alg::eltwise_gelu_erf: return "eltwise_gelu_erf";
    case alg::eltwise_gelu_tanh: return "eltwise_gelu_tanh";
    case alg::eltwise_linear: return "eltwise_linear";
    case alg::eltwise_elu: return "eltwise_elu";
    case alg::eltwise_exp: return "eltwise_exp";
    case alg::eltwise_log: return "eltwise_log";
    case alg::eltwise_sqrt: return "eltwise_sqrt";
    case alg::eltwise_abs: return "eltwise_abs";
    case alg::eltwise_hardswish: return "eltwise_hardswish";
    case alg::binary_add: return "binary_add";
    case alg::binary_sub: return "binary_sub";
    case alg::binary_mul: return "binary_mul";
    case alg::binary_div: return "binary_div";
    default: return "algorithm_" + std::to_string(static_cast<int>(a));
  }
}

}  // namespace

Result<ir> build_ir(const partition& p) {
  builder b{p, *p.g, {}, {}};
  b.r.name = p.name;
  const graph& g = *p.g;
  // Erf-form Gelu: its five nodes become one op, emitted where the last of them stands.
  std::set<node_id> in_gelu;
  std::map<node_id, gelu_match> gelu_at;
  const std::set<node_id> mine(p.nodes.begin(), p.nodes.end());
  for (node_id n : p.nodes)
    if (g.node(n).op_type == "Erf")
      if (auto m = match_gelu(g, n); m && std::all_of(m->nodes.begin(), m->nodes.end(), [&](node_id x) { return mine.count(x) > 0; })) {
        in_gelu.insert(m->nodes.begin(), m->nodes.end());
        gelu_at[m->nodes[4]] = *m;
      }
  for (std::size_t i = 0; i < p.inputs.size(); ++i) b.r.values[static_cast<std::size_t>(b.value(p.inputs[i]))].input = static_cast<int>(i);
  for (node_id n : p.nodes) {
    if (auto it = gelu_at.find(n); it != gelu_at.end()) {
      ir_op op;
      op.kind = op_kind::eltwise;
      op.alg = alg::eltwise_gelu_erf;
      for (node_id x : it->second.nodes) op.nodes.push_back(g.node(x).name);
      op.in = {b.value(it->second.x)};
      op.out = b.value(g.node(n).outputs[0]);
      b.r.ops.push_back(std::move(op));
      continue;
    }
    if (in_gelu.count(n)) continue;
    if (const std::string why = node_refusal(g, n); !why.empty())
      return Status(errc::ep_fail, cat("oneDNN provider: partition '", p.name, "': node ", g.describe(n), ": ", why));
    if (auto st = b.node_op(n); !st) return Status(errc::ep_fail, cat("oneDNN provider: partition '", p.name, "': node ",
                                                                      g.describe(n), ": ", st.message()));
  }
  for (std::size_t i = 0; i < p.outputs.size(); ++i) {
    const int v = b.value(p.outputs[i]);
    b.r.values[static_cast<std::size_t>(v)].outputs.push_back(static_cast<int>(i));
    b.r.outputs.push_back(v);
  }
  for (std::size_t i = 0; i < p.inputs.size(); ++i) b.r.inputs.push_back(b.value(p.inputs[i]));
  while (fold_batchnorm(b.r)) {
  }
  while (fuse_post_op(b.r)) {
  }
  return std::move(b.r);
}

std::vector<std::string> describe_ir(const ir& r) {
  std::vector<std::string> lines;
  for (const auto& op : r.ops) {
    std::string s(kind_name(op.kind));
    if (op.kind == op_kind::eltwise || op.kind == op_kind::binary) s += " " + alg_name(op.alg);
    s += " <- ";
    for (std::size_t i = 0; i < op.nodes.size(); ++i) s += (i ? " + " : "") + op.nodes[i];
    if (!op.posts.empty()) {
      s += " [post-ops:";
      for (const auto& po : op.posts) s += " " + alg_name(po.alg);
      s += "]";
    }
    lines.push_back(std::move(s));
  }
  return lines;
}

}  // namespace epstack::dnnl_ep
