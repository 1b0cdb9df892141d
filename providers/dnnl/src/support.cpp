// Per-node rules of the oneDNN provider and the Erf-form Gelu pattern.
#include "support.hpp"

#include <epstack/detail/cat.hpp>
#include <epstack/ir/node_facts.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace epstack::dnnl_ep {

using epstack::detail::cat;

bool onnx_domain(std::string_view d) { return d.empty() || d == "ai.onnx"; }
bool contrib_domain(std::string_view d) { return d == "com.microsoft"; }

namespace {

bool f32(element_type e) { return e == element_type::float32; }

/// True when output i of `n` is absent or unused (no consumer, not a graph output).
bool output_unused(const graph& g, node_id n, std::size_t i) {
  const auto& nd = g.node(n);
  if (i >= nd.outputs.size() || nd.outputs[i] == no_id) return true;
  const auto& v = g.value(nd.outputs[i]);
  return v.consumers.empty() && !v.is_graph_output;
}

std::string need_f32_inputs(const graph& g, node_id n, std::initializer_list<std::size_t> which) {
  for (std::size_t i : which)
    if (has_in(g, n, i) && !f32(in_type(g, n, i)))
      return cat("input ", std::to_string(i), " is ", to_string(in_type(g, n, i)), "; the oneDNN provider runs float32");
  return {};
}

std::string need_constant(const graph& g, node_id n, std::initializer_list<std::size_t> which, std::string_view what) {
  for (std::size_t i : which)
    if (has_in(g, n, i) && constant_input(g, n, i) == nullptr)
      return cat(what, " (input ", std::to_string(i), ") is not a constant initializer");
  return {};
}

std::string only_first_output(const graph& g, node_id n) {
  for (std::size_t i = 1; i < g.node(n).outputs.size(); ++i)
    if (!output_unused(g, n, i)) return cat("its output ", std::to_string(i), " is used; oneDNN computes only output 0");
  return {};
}

bool elementwise_activation(std::string_view op) {
  return op == "Relu" || op == "Sigmoid" || op == "Tanh" || op == "LeakyRelu" || op == "Elu" || op == "Exp" ||
         op == "Log" || op == "Sqrt" || op == "Abs" || op == "Neg" || op == "Clip" || op == "HardSwish";
}

std::optional<float> scalar_constant(const graph& g, value_id v) {
  if (v == no_id) return std::nullopt;
  const auto& val = g.value(v);
  if (!val.initializer || val.is_graph_input || val.initializer->type() != element_type::float32 ||
      val.initializer->element_count() != 1)
    return std::nullopt;
  return val.initializer->typed<float>()[0];
}

bool near(std::optional<float> a, float b) { return a && std::fabs(*a - b) <= 1e-3f * std::fabs(b); }

/// The single consumer of `v` when it has exactly one and is not a graph output.
std::optional<node_id> sole_consumer(const graph& g, value_id v) {
  const auto& val = g.value(v);
  if (val.is_graph_output || val.consumers.size() != 1) return std::nullopt;
  return val.consumers.front();
}

/// When `n` is a binary `op` with one operand `v`, the other operand.
std::optional<value_id> other_operand(const graph& g, node_id n, std::string_view op, value_id v) {
  const auto& nd = g.node(n);
  if (nd.op_type != op || !onnx_domain(nd.domain) || nd.inputs.size() != 2) return std::nullopt;
  if (nd.inputs[0] == v) return nd.inputs[1];
  if (nd.inputs[1] == v) return nd.inputs[0];
  return std::nullopt;
}

}  // namespace

std::optional<gelu_match> match_gelu(const graph& g, node_id erf) {
  const auto& e = g.node(erf);
  if (e.op_type != "Erf" || !onnx_domain(e.domain) || e.inputs.size() != 1 || e.outputs.size() != 1) return std::nullopt;
  gelu_match m;
  const value_id t = e.inputs[0];
  const node_id scale = g.value(t).producer;
  if (scale == no_id || !sole_consumer(g, t)) return std::nullopt;
  const auto& s = g.node(scale);
  if (!onnx_domain(s.domain) || s.inputs.size() != 2) return std::nullopt;
  if (s.op_type == "Div" && near(scalar_constant(g, s.inputs[1]), std::sqrt(2.0f))) m.x = s.inputs[0];
  else if (s.op_type == "Mul" && near(scalar_constant(g, s.inputs[1]), std::sqrt(0.5f))) m.x = s.inputs[0];
  else if (s.op_type == "Mul" && near(scalar_constant(g, s.inputs[0]), std::sqrt(0.5f))) m.x = s.inputs[1];
  else return std::nullopt;
  const auto add = sole_consumer(g, e.outputs[0]);
  if (!add) return std::nullopt;
  const auto one = other_operand(g, *add, "Add", e.outputs[0]);
  if (!one || !near(scalar_constant(g, *one), 1.0f)) return std::nullopt;
  const value_id a = g.node(*add).outputs[0];
  const auto m2 = sole_consumer(g, a);
  if (!m2) return std::nullopt;
  const auto f = other_operand(g, *m2, "Mul", a);
  if (!f) return std::nullopt;
  if (*f == m.x) {  // x * (1 + erf) then * 0.5
    const value_id p = g.node(*m2).outputs[0];
    const auto m3 = sole_consumer(g, p);
    if (!m3) return std::nullopt;
    const auto half = other_operand(g, *m3, "Mul", p);
    if (!half || !near(scalar_constant(g, *half), 0.5f)) return std::nullopt;
    m.nodes = {scale, erf, *add, *m2, *m3};
    return m;
  }
  // (x * 0.5) * (1 + erf)
  const node_id h = g.value(*f).producer;
  if (h == no_id || !sole_consumer(g, *f)) return std::nullopt;
  const auto half = other_operand(g, h, "Mul", m.x);
  if (!half || !near(scalar_constant(g, *half), 0.5f)) return std::nullopt;
  m.nodes = {scale, erf, *add, h, *m2};
  return m;
}

resample_factors nearest_factors(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const auto no = [](std::string why) { return resample_factors{{}, std::move(why)}; };
  const bool upsample = nd.op_type == "Upsample";
  const int version = nd.since_version == 0 ? 1 << 20 : nd.since_version;
  if (attr_s(nd, "mode", "nearest") != "nearest") return no(cat("mode '", attr_s(nd, "mode"), "'; oneDNN resamples nearest only here"));
  const int rank = in_rank(g, n, 0);
  if (rank < 3 || rank > 5) return no(rank < 0 ? "input rank unknown" : cat("input of rank ", std::to_string(rank)));
  std::string coord = "asymmetric", round = "floor";
  if (!upsample && version >= 11) {
    coord = attr_s(nd, "coordinate_transformation_mode", "half_pixel");
    round = attr_s(nd, "nearest_mode", "round_prefer_floor");
    if (has_attr(nd, "axes")) return no("axes");
  }
  // The scales: Upsample-7's attribute, Upsample-9's and Resize-10's input 1, Resize-11's input 2 or its sizes.
  std::vector<double> scales;
  if (upsample && version < 9) {
    for (float f : attr_floats(nd, "scales")) scales.push_back(f);
  } else {
    const std::size_t si = upsample || version < 11 ? 1 : 2;
    const tensor* st = has_in(g, n, si) ? constant_input(g, n, si) : nullptr;
    const tensor* sz = !upsample && version >= 11 && has_in(g, n, 3) ? constant_input(g, n, 3) : nullptr;
    if (st != nullptr && st->element_count() > 0 && st->type() == element_type::float32) {
      for (std::size_t i = 0; i < st->element_count(); ++i) scales.push_back(st->typed<float>()[i]);
    } else if (sz != nullptr && sz->element_count() > 0 && sz->type() == element_type::int64) {
      if (attr_s(nd, "keep_aspect_ratio_policy", "stretch") != "stretch") return no("keep_aspect_ratio_policy");
      const auto& t = g.value(nd.inputs[0]).type;
      if (!t.dims || !t.dims->is_static()) return no("sizes with input dims not known when partitioning");
      const auto xs = *t.dims->sizes();
      if (sz->element_count() != xs.size()) return no("sizes do not match the input rank");
      for (std::size_t i = 0; i < xs.size(); ++i) {
        const std::int64_t want = sz->typed<std::int64_t>()[i];
        if (xs[i] <= 0 || want % xs[i] != 0) return no("sizes are not whole multiples of the input dims");
        scales.push_back(static_cast<double>(want / xs[i]));
      }
    } else if (has_in(g, n, si) || (!upsample && version >= 11 && has_in(g, n, 3))) {
      return no("scales or sizes are not a constant initializer");
    }
  }
  if (scales.size() != static_cast<std::size_t>(rank)) return no("scales do not match the input rank");
  if (scales[0] != 1.0 || scales[1] != 1.0) return no("batch or channels resized");
  resample_factors r;
  std::int64_t most = 1;
  for (std::size_t i = 2; i < scales.size(); ++i) {
    const double s = scales[i];
    if (!(s >= 1.0 && s <= 64.0 && s == std::floor(s))) return no("a scale that is not a whole number from 1 to 64");
    r.factors.push_back(static_cast<std::int64_t>(s));
    most = std::max(most, r.factors.back());
  }
  const bool rounds = round == "round_prefer_floor" || round == "round_prefer_ceil";
  const bool same = (coord == "asymmetric" && (round == "floor" || (round == "round_prefer_floor" && most <= 2))) ||
                    ((coord == "half_pixel" || coord == "pytorch_half_pixel") && rounds) ||
                    (coord == "tf_half_pixel_for_nn" && round == "floor");
  if (!same) return no(cat("coordinate_transformation_mode '", coord, "' with nearest_mode '", round, "'"));
  return r;
}

bool is_heavy(const node& nd) {
  static constexpr std::string_view onnx_heavy[] = {"Conv", "ConvTranspose", "Gemm", "MatMul", "MaxPool", "AveragePool",
                                                    "GlobalAveragePool", "GlobalMaxPool", "BatchNormalization",
                                                    "LayerNormalization", "Softmax"};
  static constexpr std::string_view contrib_heavy[] = {"FusedConv", "FusedMatMul", "SkipLayerNormalization",
                                                       "LayerNormalization"};
  if (onnx_domain(nd.domain)) return std::find(std::begin(onnx_heavy), std::end(onnx_heavy), nd.op_type) != std::end(onnx_heavy);
  if (contrib_domain(nd.domain))
    return std::find(std::begin(contrib_heavy), std::end(contrib_heavy), nd.op_type) != std::end(contrib_heavy);
  return false;
}

bool is_host_shape_op(const node& nd) {
  const std::string_view op = nd.op_type;
  return onnx_domain(nd.domain) && (op == "Shape" || op == "Gather" || op == "Unsqueeze" || op == "Squeeze" ||
                                    op == "Concat" || op == "Slice");
}

bool host_evaluable(const graph& g, value_id v, int depth) {
  if (v == no_id || depth > 64) return false;
  const auto& val = g.value(v);
  if (val.type.kind != type_kind::tensor || val.type.elem != element_type::int64) return false;
  if (val.initializer) return !val.is_graph_input;
  if (val.producer == no_id) return false;
  const auto& nd = g.node(val.producer);
  if (!is_host_shape_op(nd)) return false;
  if (nd.op_type == "Shape") return true;  // the dims of its input, known when the partition is planned
  for (value_id in : nd.inputs)
    if (in != no_id && !host_evaluable(g, in, depth + 1)) return false;
  return true;
}

/// A ConvTranspose whose output_shape (or SAME auto_pad) asks for more than the convolution produces needs a
/// negative total padding, which the CPU provider computes and oneDNN cannot express; with output_shape, the input's
/// spatial dims must be known when partitioning to tell.
std::string transposed_padding(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const std::string pad = attr_s(nd, "auto_pad", "NOTSET");
  const bool target = has_attr(nd, "output_shape") || pad == "SAME_UPPER" || pad == "SAME_LOWER";
  if (!target) return {};
  const auto& xt = g.value(nd.inputs[0]).type;
  const tensor* w = constant_input(g, n, 1);
  if (w == nullptr || !xt.dims || !xt.dims->is_static() || xt.dims->rank() != w->rank())
    return "output_shape or SAME padding with input dims not known when partitioning";
  const auto xs = *xt.dims->sizes();
  const std::size_t sp = xs.size() - 2;
  const auto strides = attr_ints(nd, "strides", std::vector<std::int64_t>(sp, 1));
  const auto dil = attr_ints(nd, "dilations", std::vector<std::int64_t>(sp, 1));
  const auto opad = attr_ints(nd, "output_padding", std::vector<std::int64_t>(sp, 0));
  const auto shape = attr_ints(nd, "output_shape");
  if (strides.size() != sp || dil.size() != sp || opad.size() != sp || (!shape.empty() && shape.size() < sp)) return {};
  for (std::size_t i = 0; i < sp; ++i) {
    const std::int64_t ek = (w->sizes()[2 + i] - 1) * dil[i] + 1;
    const std::int64_t natural = strides[i] * (xs[2 + i] - 1) + opad[i] + ek;
    const std::int64_t want = !shape.empty() ? shape[shape.size() - sp + i] : xs[2 + i] * strides[i];
    if (want > natural) return "output_shape asks for more than the convolution produces (a negative padding)";
  }
  return {};
}

std::string node_refusal(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const std::string_view op = nd.op_type;
  const bool onnx = onnx_domain(nd.domain), contrib = contrib_domain(nd.domain);
  if (!onnx && !contrib) return cat("domain '", nd.domain, "' is not one oneDNN implements");
  // Shape computations (Shape -> Gather -> Unsqueeze -> Concat -> Reshape): evaluated when a plan is made, from the
  // dims of the partition's inputs, so they cost nothing per run and keep the partition whole.
  if (is_host_shape_op(nd) && !nd.outputs.empty() && out_type(g, n, 0) == element_type::int64) {
    if (op == "Shape") return {};
    if (host_evaluable(g, nd.outputs[0], 0)) return {};
    return "int64 values computed at run time (only shape computations are evaluated when planning)";
  }
  if (!nd.outputs.empty() && nd.outputs[0] != no_id && !f32(out_type(g, n, 0)))
    return cat("output 0 is ", to_string(out_type(g, n, 0)), "; the oneDNN provider runs float32");
  std::string r;
  if ((onnx && (op == "Conv" || op == "ConvTranspose")) || (contrib && op == "FusedConv")) {
    if (!(r = need_f32_inputs(g, n, {0, 1, 2, 3})).empty()) return r;
    if (!(r = need_constant(g, n, {1, 2}, "the weight or bias")).empty()) return r;
    const int rank = in_rank(g, n, 1);
    if (rank < 3 || rank > 5) return cat("weights of rank ", std::to_string(rank), "; oneDNN convolves 1-D to 3-D");
    if (contrib) {
      const std::string act = attr_s(nd, "activation");
      if (!act.empty() && act != "Relu" && act != "Sigmoid" && act != "Tanh" && act != "LeakyRelu" && act != "Clip")
        return cat("activation '", act, "' has no oneDNN post-op here");
    }
    if (op == "ConvTranspose" && has_attr(nd, "output_shape") && attr_s(nd, "auto_pad", "NOTSET") != "NOTSET")
      return "output_shape together with auto_pad";
    if (op == "ConvTranspose") return transposed_padding(g, n);
    return {};
  }
  if (onnx && op == "Gemm") {
    if (!(r = need_f32_inputs(g, n, {0, 1, 2})).empty()) return r;
    const float beta = attr_f(nd, "beta", 1.0f);
    if (has_in(g, n, 2) && beta != 1.0f && beta != 0.0f && constant_input(g, n, 2) == nullptr)
      return "Gemm with beta != 1 and a C computed at run time";
    return {};
  }
  if ((onnx && op == "MatMul") || (contrib && op == "FusedMatMul")) {
    if (!(r = need_f32_inputs(g, n, {0, 1})).empty()) return r;
    if (attr_i(nd, "transBatchA", 0) != 0 || attr_i(nd, "transBatchB", 0) != 0) return "transBatchA/transBatchB";
    return {};
  }
  if (onnx && op == "BatchNormalization") {
    if (!(r = need_f32_inputs(g, n, {0, 1, 2, 3, 4})).empty()) return r;
    if (!(r = need_constant(g, n, {1, 2, 3, 4}, "a scale, bias, mean or variance")).empty()) return r;
    if (attr_i(nd, "training_mode", 0) != 0) return "training_mode = 1";
    return only_first_output(g, n);
  }
  if ((onnx || contrib) && op == "LayerNormalization") {
    if (!(r = need_f32_inputs(g, n, {0, 1, 2})).empty()) return r;
    if (!(r = need_constant(g, n, {1, 2}, "the scale or bias")).empty()) return r;
    const auto axis = attr_i(nd, "axis", -1);
    const int rank = in_rank(g, n, 0);
    if (axis != -1 && !(rank > 0 && axis == rank - 1)) return "axis is not the last one; oneDNN normalises the last axis";
    if (auto* s = constant_input(g, n, 1); s && s->rank() != 1) return "scale is not 1-D";
    return only_first_output(g, n);
  }
  if (contrib && op == "SkipLayerNormalization") {
    if (!(r = need_f32_inputs(g, n, {0, 1, 2, 3, 4})).empty()) return r;
    if (!(r = need_constant(g, n, {2, 3, 4}, "gamma, beta or bias")).empty()) return r;
    for (std::size_t i : {1, 2})  // mean and inverse standard deviation; output 3 (the sum) is computed anyway
      if (!output_unused(g, n, i)) return cat("its output ", std::to_string(i), " (a statistic) is used");
    return {};
  }
  if (onnx && op == "Softmax") {
    if (!(r = need_f32_inputs(g, n, {0})).empty()) return r;
    if (nd.since_version > 0 && nd.since_version < 13) {
      const int rank = in_rank(g, n, 0);
      const auto axis = attr_i(nd, "axis", 1);
      if (!(axis == -1 || (rank > 0 && axis == rank - 1)))
        return "opset < 13 Softmax over several axes (coerced to 2-D)";
    }
    return {};
  }
  if (onnx && (op == "MaxPool" || op == "AveragePool")) {
    if (!(r = need_f32_inputs(g, n, {0})).empty()) return r;
    const int rank = in_rank(g, n, 0);
    if (rank != -1 && (rank < 3 || rank > 5)) return cat("input of rank ", std::to_string(rank));
    if (op == "MaxPool") {
      if (attr_i(nd, "storage_order", 0) != 0) return "storage_order = 1";
      return only_first_output(g, n);
    }
    if (attr_i(nd, "ceil_mode", 0) != 0 && attr_i(nd, "count_include_pad", 0) != 0)
      return "ceil_mode with count_include_pad";
    if (has_attr(nd, "dilations")) {
      const auto d = attr_ints(nd, "dilations");
      if (std::any_of(d.begin(), d.end(), [](std::int64_t x) { return x != 1; })) return "dilated AveragePool";
    }
    return {};
  }
  if (onnx && (op == "GlobalAveragePool" || op == "GlobalMaxPool")) {
    const int rank = in_rank(g, n, 0);
    if (rank != -1 && (rank < 3 || rank > 5)) return cat("input of rank ", std::to_string(rank));
    return need_f32_inputs(g, n, {0});
  }
  if (onnx && elementwise_activation(op)) {
    if (!(r = need_f32_inputs(g, n, {0})).empty()) return r;
    if (op == "Clip") return need_constant(g, n, {1, 2}, "min or max");
    return {};
  }
  if (contrib && (op == "Gelu" || op == "BiasGelu")) return need_f32_inputs(g, n, {0, 1});
  if (onnx && op == "Gelu") {  // Gelu-20: the erf form, or the tanh approximation
    const auto a = attr_s(nd, "approximate", "none");
    if (a != "none" && a != "tanh") return cat("approximate = '", a, "'");
    return need_f32_inputs(g, n, {0});
  }
  if (onnx && op == "Erf") {
    if (match_gelu(g, n)) return {};
    return "Erf outside the Erf form of Gelu";
  }
  if (onnx && (op == "Add" || op == "Sub" || op == "Mul" || op == "Div")) {
    if (!(r = need_f32_inputs(g, n, {0, 1})).empty()) return r;
    const auto& ta = g.value(nd.inputs[0]).type;
    const auto& tb = g.value(nd.inputs[1]).type;
    const auto& to = g.value(nd.outputs[0]).type;
    if (ta.dims && tb.dims && to.dims && ta.dims->is_static() && tb.dims->is_static() && to.dims->is_static() &&
        *ta.dims->sizes() != *to.dims->sizes() && *tb.dims->sizes() != *to.dims->sizes())
      return "both operands broadcast";
    return {};
  }
  if (onnx && (op == "Transpose" || op == "Flatten" || op == "Reshape" || op == "Squeeze" || op == "Unsqueeze"))
    return need_f32_inputs(g, n, {0});
  if (onnx && op == "Split") {
    if (!(r = need_f32_inputs(g, n, {0})).empty()) return r;
    if (has_attr(nd, "num_outputs")) {  // Split-18: the part sizes come from the axis' static size
      const auto& t = g.value(nd.inputs[0]).type;
      const auto axis = attr_i(nd, "axis", 0);
      const auto rank = t.dims ? static_cast<std::int64_t>(t.dims->rank()) : -1;
      if (rank < 0 || axis < -rank || axis >= rank || (*t.dims)[static_cast<std::size_t>(axis < 0 ? axis + rank : axis)].value < 0)
        return "num_outputs with a split axis of unknown size";
    }
    if (nd.inputs.size() > 1 && nd.inputs[1] != no_id && constant_input(g, n, 1) == nullptr)
      return "split sizes computed at run time";
    return {};
  }
  if (onnx && (op == "Resize" || op == "Upsample")) {
    if (!(r = need_f32_inputs(g, n, {0})).empty()) return r;
    return nearest_factors(g, n).refusal;
  }
  if (onnx && op == "Concat") {
    for (std::size_t i = 0; i < nd.inputs.size(); ++i)
      if (!f32(in_type(g, n, i))) return cat("input ", std::to_string(i), " is not float32");
    return {};
  }
  return cat("operator ", nd.domain.empty() ? std::string() : nd.domain + ":", nd.op_type,
             " is not one the oneDNN provider implements");
}

}  // namespace epstack::dnnl_ep
