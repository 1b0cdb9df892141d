// Lowering Softmax, LayerNormalization and BatchNormalization to oneDNN primitives (plan_builder.hpp).
#include "plan_builder.hpp"

namespace epstack::dnnl_ep {

Status plan_builder::softmax(const ir_op& op) {
  const dims in = dims_of(op.in[0]);
  const auto rank = static_cast<std::int64_t>(std::max<std::size_t>(in.size(), 1));
  const std::int64_t axis = op.axis < 0 ? op.axis + rank : op.axis;
  if (axis < 0 || axis >= rank) return fail("axis " + std::to_string(op.axis) + " out of range for " + str(in));
  int s = slot_of(op.in[0]);
  const auto make = [&](const md_t& md) {
    dn::softmax_v2_forward::desc d(dn::prop_kind::forward_inference, alg::softmax_accurate, md, md, static_cast<int>(axis));
    return dn::softmax_v2_forward::primitive_desc(d, base_attr(), cpu_engine());
  };
  dn::softmax_v2_forward::primitive_desc pd;
  try {
    pd = make(md_of(s));
  } catch (const dn::error&) {
    s = as_plain(s, in);
    pd = make(md_of(s));
  }
  define(op.out, unary_step<dn::softmax_v2_forward>(pd, s), in);
  return {};
}

Status plan_builder::layernorm(const ir_op& op) {
  const dims in = dims_of(op.in[0]);
  if (in.empty()) return fail("layer normalisation of a scalar");
  const std::int64_t c = in.back();
  if (static_cast<std::int64_t>(op.weights.element_count()) != c || (!op.bias.empty() && static_cast<std::int64_t>(op.bias.element_count()) != c))
    return fail("scale or bias does not have " + std::to_string(c) + " elements");
  int s = as_plain(slot_of(op.in[0]), in);
  // oneDNN normalises ranks 2 to 5; over the last axis, any other rank is the same as [rows, last].
  const bool reshaped = in.size() < 2 || in.size() > 5;
  if (reshaped) s = alias(s, plain({volume(in) / std::max<std::int64_t>(c, 1), c}));
  auto flags = dn::normalization_flags::use_scale;
  if (!op.bias.empty()) flags |= dn::normalization_flags::use_shift;
  dn::layer_normalization_forward::desc d(dn::prop_kind::forward_inference, md_of(s), op.epsilon, flags);
  dn::layer_normalization_forward::primitive_desc pd(d, base_attr(), cpu_engine());
  const int t = scratch_slot(pd.dst_desc());
  const md_t cmd({c}, dt::f32, tag::a);
  std::vector<std::pair<int, int>> args{{DNNL_ARG_SRC, s}, {DNNL_ARG_DST, t}, {DNNL_ARG_SCALE, constant_slot(op.weights, cmd)}};
  if (!op.bias.empty()) args.emplace_back(DNNL_ARG_SHIFT, constant_slot(op.bias, cmd));
  add_step(dn::layer_normalization_forward(pd), std::move(args), pd);
  define(op.out, reshaped ? alias(t, plain(in)) : t, in);
  return {};
}

Status plan_builder::batchnorm(const ir_op& op) {
  const dims in = dims_of(op.in[0]);
  if (in.size() < 2) return fail("batch normalisation input " + str(in));
  const std::int64_t c = in[1];
  for (const tensor* t : {&op.weights, &op.bias, &op.mean, &op.variance})
    if (static_cast<std::int64_t>(t->element_count()) != c) return fail("scale, bias, mean or variance does not have C elements");
  int s = slot_of(op.in[0]);
  // oneDNN normalises ranks 2 to 5; per channel, [N, C, d2, d3, ...] is the same as [N, C, d2 d3 ...].
  const bool reshaped = in.size() > 5;
  const dims flat{in[0], c, volume(dims(in.begin() + 2, in.end()))};
  if (reshaped) s = alias(as_plain(s, in), plain(flat));
  const auto flags = dn::normalization_flags::use_global_stats | dn::normalization_flags::use_scale | dn::normalization_flags::use_shift;
  dn::batch_normalization_forward::desc d(dn::prop_kind::forward_inference, md_of(s), op.epsilon, flags);
  dn::batch_normalization_forward::primitive_desc pd(d, base_attr(), cpu_engine());
  const int t = scratch_slot(pd.dst_desc());
  const md_t cmd({c}, dt::f32, tag::a);
  add_step(dn::batch_normalization_forward(pd),
           {{DNNL_ARG_SRC, s}, {DNNL_ARG_DST, t}, {DNNL_ARG_MEAN, constant_slot(op.mean, cmd)},
            {DNNL_ARG_VARIANCE, constant_slot(op.variance, cmd)}, {DNNL_ARG_SCALE, constant_slot(op.weights, cmd)},
            {DNNL_ARG_SHIFT, constant_slot(op.bias, cmd)}},
           pd);
  define(op.out, reshaped ? alias(as_plain(t, flat), plain(in)) : t, in);
  return {};
}
}  // namespace epstack::dnnl_ep
