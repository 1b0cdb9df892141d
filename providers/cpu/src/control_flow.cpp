// Control flow: If, Loop, Scan. The bodies are subgraphs of the node; the session's executor runs them
// (compute_context::run_subgraph), with values of enclosing graphs in scope.
#include "kernel_util.hpp"

namespace epstack::cpu {
namespace impl {
namespace {

const graph* graph_attr(const node& nd, std::string_view name) {
  const auto* a = attr(nd, name);
  if (a == nullptr) return nullptr;
  const auto* sg = std::get_if<subgraph>(&a->value);
  return sg != nullptr && *sg ? &**sg : nullptr;
}

// Copies `count` elements (any type, strings included) from `src` at element offset `so` to `dst` at `doff`.
void copy_elements(const tensor& src, std::size_t so, tensor& dst, std::size_t doff, std::size_t count) {
  if (count == 0) return;
  if (src.type() == element_type::string) {
    const auto* s = reinterpret_cast<const std::string*>(src.data()) + so;
    auto* d = reinterpret_cast<std::string*>(dst.mutable_data()) + doff;
    std::copy_n(s, count, d);
    return;
  }
  const std::size_t es = element_size(src.type());
  std::memcpy(dst.mutable_data() + doff * es, src.data() + so * es, count * es);
}

// Slice `index` of `t` along `axis`, the axis removed.
tensor take_slice(const tensor& t, std::size_t axis, std::int64_t index) {
  const auto s = t.sizes();
  tensor_sizes out;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (i != axis) out.push_back(s[i]);
  tensor r = tensor::uninitialized(t.type(), out);
  const std::int64_t outer = product(s, 0, axis), inner = product(s, axis + 1);
  for (std::int64_t o = 0; o < outer; ++o)
    copy_elements(t, static_cast<std::size_t>((o * s[axis] + index) * inner), r, static_cast<std::size_t>(o * inner),
                  static_cast<std::size_t>(inner));
  return r;
}

// Stacks equally shaped tensors along a new axis `axis`. `reverse` stacks them last-to-first.
Result<tensor> stack(const std::vector<tensor>& parts, std::size_t axis, bool reverse, element_type type,
                     std::span<const std::int64_t> empty_shape) {
  if (parts.empty()) {
    tensor_sizes s(empty_shape.begin(), empty_shape.end());
    s.insert(s.begin() + static_cast<std::ptrdiff_t>(std::min(axis, s.size())), 0);
    return tensor::uninitialized(type, s);
  }
  const auto first = parts.front().sizes();
  if (axis > first.size()) return Status(errc::invalid_argument, cat("scan output axis ", std::to_string(axis), " is out of range"));
  for (const auto& p : parts)
    if (!std::equal(p.sizes().begin(), p.sizes().end(), first.begin(), first.end()) || p.type() != parts.front().type())
      return Status(errc::invalid_argument, cat("scan outputs differ across iterations: ", dims_string(first), " and ",
                                                dims_string(p.sizes())));
  tensor_sizes out(first.begin(), first.end());
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(axis), static_cast<std::int64_t>(parts.size()));
  tensor r = tensor::uninitialized(parts.front().type(), out);
  const std::int64_t outer = product(first, 0, axis), inner = product(first, axis);
  const auto n = static_cast<std::int64_t>(parts.size());
  for (std::int64_t k = 0; k < n; ++k) {
    const tensor& p = parts[static_cast<std::size_t>(reverse ? n - 1 - k : k)];
    for (std::int64_t o = 0; o < outer; ++o)
      copy_elements(p, static_cast<std::size_t>(o * inner), r, static_cast<std::size_t>((o * n + k) * inner),
                    static_cast<std::size_t>(inner));
  }
  return r;
}

// The static shape a body output declares (for the empty stack of a loop that ran zero times).
tensor_sizes declared_shape(const graph& body, std::size_t output) {
  tensor_sizes s;
  const auto& t = body.value(body.outputs()[output]).type;
  if (t.dims)
    for (const auto& d : t.dims->dims()) s.push_back(d.is_known() ? d.value : 0);
  return s;
}
element_type declared_type(const graph& body, std::size_t output) {
  const auto& t = body.value(body.outputs()[output]).type;
  return t.kind == type_kind::tensor ? t.elem : element_type::float32;
}

bool scalar_true(const tensor& t) { return t.element_count() > 0 && *t.typed<bool>(); }

Status if_compute(compute_context& ctx, const graph* then_g, const graph* else_g) {
  const tensor& c = ctx.input(0);
  if (c.type() != element_type::boolean || c.element_count() != 1)
    return Status(errc::invalid_argument, "the condition must be a single bool");
  const graph* branch = scalar_true(c) ? then_g : else_g;
  std::vector<ivalue> outs;
  EPSTACK_RETURN_IF_ERROR(ctx.run_subgraph(*branch, {}, outs));
  if (outs.size() != ctx.output_count())
    return Status(errc::invalid_argument, cat("the branch returned ", std::to_string(outs.size()), " outputs, the node has ",
                                              std::to_string(ctx.output_count())));
  for (std::size_t i = 0; i < outs.size(); ++i) ctx.output_value(i) = std::move(outs[i]);
  return {};
}

Status loop_compute(compute_context& ctx, const graph* body) {
  const std::size_t carried = ctx.input_count() >= 2 ? ctx.input_count() - 2 : 0;
  const std::size_t body_outputs = body->outputs().size();
  if (body_outputs < 1 + carried)
    return Status(errc::invalid_argument, "the body has fewer outputs than the loop-carried values");
  const std::size_t scans = body_outputs - 1 - carried;
  std::int64_t trip = std::numeric_limits<std::int64_t>::max();
  if (ctx.has_input(0) && ctx.input(0).element_count() > 0) trip = *ctx.input(0).typed<std::int64_t>();
  bool cond = true;
  if (ctx.has_input(1) && ctx.input(1).element_count() > 0) cond = *ctx.input(1).typed<bool>();
  std::vector<ivalue> state;
  for (std::size_t i = 0; i < carried; ++i) state.push_back(ctx.input_value(2 + i));
  std::vector<std::vector<tensor>> scan_parts(scans);
  std::vector<ivalue> inputs, outs;
  for (std::int64_t it = 0; it < trip && cond; ++it) {
    inputs.clear();
    inputs.emplace_back(tensor::scalar<std::int64_t>(it));
    inputs.emplace_back(tensor::scalar<bool>(cond));
    for (const auto& s : state) inputs.push_back(s);
    EPSTACK_RETURN_IF_ERROR(ctx.run_subgraph(*body, inputs, outs).with_context(cat("iteration ", std::to_string(it))));
    if (outs.size() != body_outputs) return Status(errc::invalid_argument, "the body returned the wrong number of outputs");
    const tensor& c = outs[0].as_tensor();
    if (c.type() != element_type::boolean || c.element_count() != 1)
      return Status(errc::invalid_argument, "the body's condition output must be a single bool");
    cond = scalar_true(c);
    for (std::size_t i = 0; i < carried; ++i) state[i] = std::move(outs[1 + i]);
    for (std::size_t k = 0; k < scans; ++k) scan_parts[k].push_back(outs[1 + carried + k].as_tensor());
  }
  for (std::size_t i = 0; i < carried && i < ctx.output_count(); ++i) ctx.output_value(i) = std::move(state[i]);
  for (std::size_t k = 0; k < scans && carried + k < ctx.output_count(); ++k) {
    const auto shape = declared_shape(*body, 1 + carried + k);
    EPSTACK_ASSIGN_OR_RETURN(auto t, stack(scan_parts[k], 0, false, declared_type(*body, 1 + carried + k), shape));
    ctx.output(carried + k) = std::move(t);
  }
  return {};
}

struct scan_attrs {
  const graph* body = nullptr;
  std::int64_t num_scan_inputs = 0;
  std::vector<std::int64_t> input_axes, input_directions, output_axes, output_directions;
  bool batched = false;  // opset 8: a leading batch dim and an optional sequence_lens input
};

// One scan over state `init` and scan inputs `xs` (no batch dim); fills `final_state` and per-output slices.
Status scan_once(compute_context& ctx, const scan_attrs& a, std::vector<ivalue> state, const std::vector<tensor>& xs,
                 std::int64_t len, std::vector<ivalue>& final_state, std::vector<std::vector<tensor>>& parts) {
  const std::size_t n_state = state.size(), m = xs.size();
  std::vector<std::size_t> axes(m);
  for (std::size_t j = 0; j < m; ++j) {
    const std::int64_t ax = j < a.input_axes.size() ? a.input_axes[j] : 0;
    const auto norm = normalize_axis(ax, xs[j].rank());
    if (!norm) return bad_axis(ax, xs[j].rank());
    axes[j] = *norm;
    if (xs[j].sizes()[axes[j]] < len)
      return Status(errc::invalid_argument, cat("scan input ", std::to_string(j), " is shorter than the sequence"));
  }
  std::vector<ivalue> inputs, outs;
  for (std::int64_t t = 0; t < len; ++t) {
    inputs.assign(state.begin(), state.end());
    for (std::size_t j = 0; j < m; ++j) {
      const bool rev = j < a.input_directions.size() && a.input_directions[j] == 1;
      inputs.emplace_back(take_slice(xs[j], axes[j], rev ? len - 1 - t : t));
    }
    EPSTACK_RETURN_IF_ERROR(ctx.run_subgraph(*a.body, inputs, outs).with_context(cat("scan step ", std::to_string(t))));
    if (outs.size() < n_state) return Status(errc::invalid_argument, "the body returned too few outputs");
    for (std::size_t i = 0; i < n_state; ++i) state[i] = std::move(outs[i]);
    parts.resize(outs.size() - n_state);
    for (std::size_t k = n_state; k < outs.size(); ++k) parts[k - n_state].push_back(outs[k].as_tensor());
  }
  final_state = std::move(state);
  parts.resize(a.body->outputs().size() - n_state);
  return {};
}

Status scan_compute(compute_context& ctx, const scan_attrs& a) {
  const std::size_t first = a.batched ? 1 : 0;  // opset 8's sequence_lens input
  const std::size_t total = ctx.input_count() - first;
  const auto m = static_cast<std::size_t>(a.num_scan_inputs);
  if (m > total) return Status(errc::invalid_argument, "num_scan_inputs exceeds the inputs");
  const std::size_t n_state = total - m;
  const std::size_t n_scan_out = ctx.output_count() - n_state;
  if (!a.batched) {
    std::vector<ivalue> state;
    for (std::size_t i = 0; i < n_state; ++i) state.push_back(ctx.input_value(first + i));
    std::vector<tensor> xs;
    for (std::size_t j = 0; j < m; ++j) xs.push_back(ctx.input(first + n_state + j));
    std::int64_t len = 0;
    if (m > 0) {
      const std::int64_t ax = a.input_axes.empty() ? 0 : a.input_axes[0];
      const auto norm = normalize_axis(ax, xs[0].rank());
      if (!norm) return bad_axis(ax, xs[0].rank());
      len = xs[0].sizes()[*norm];
    }
    std::vector<ivalue> final_state;
    std::vector<std::vector<tensor>> parts;
    EPSTACK_RETURN_IF_ERROR(scan_once(ctx, a, std::move(state), xs, len, final_state, parts));
    for (std::size_t i = 0; i < n_state; ++i) ctx.output_value(i) = std::move(final_state[i]);
    for (std::size_t k = 0; k < n_scan_out; ++k) {
      const auto shape = declared_shape(*a.body, n_state + k);
      std::int64_t ax = k < a.output_axes.size() ? a.output_axes[k] : 0;
      if (ax < 0) ax += static_cast<std::int64_t>(parts[k].empty() ? shape.size() : parts[k].front().rank()) + 1;
      const bool rev = k < a.output_directions.size() && a.output_directions[k] == 1;
      EPSTACK_ASSIGN_OR_RETURN(auto t, stack(parts[k], static_cast<std::size_t>(std::max<std::int64_t>(ax, 0)), rev,
                                             declared_type(*a.body, n_state + k), shape));
      ctx.output(n_state + k) = std::move(t);
    }
    return {};
  }
  // Opset 8: every input has a leading batch dim; each batch item is scanned on its own over its sequence length.
  const tensor* lens = ctx.has_input(0) ? &ctx.input(0) : nullptr;
  std::int64_t batch = -1;
  for (std::size_t i = first; i < ctx.input_count(); ++i) {
    const auto b = ctx.input(i).rank() > 0 ? ctx.input(i).sizes()[0] : -1;
    if (batch < 0) batch = b;
    else if (b != batch) return Status(errc::invalid_argument, "inputs differ in batch size");
  }
  std::vector<std::vector<ivalue>> out_states(static_cast<std::size_t>(std::max<std::int64_t>(batch, 0)));
  std::vector<std::vector<tensor>> out_scans(n_scan_out);
  for (std::int64_t b = 0; b < batch; ++b) {
    std::vector<ivalue> state;
    for (std::size_t i = 0; i < n_state; ++i) state.emplace_back(take_slice(ctx.input(first + i), 0, b));
    std::vector<tensor> xs;
    for (std::size_t j = 0; j < m; ++j) xs.push_back(take_slice(ctx.input(first + n_state + j), 0, b));
    std::int64_t len = m > 0 ? xs[0].sizes()[0] : 0;
    if (lens != nullptr && lens->element_count() > static_cast<std::size_t>(b)) len = to_int64s(*lens)[static_cast<std::size_t>(b)];
    scan_attrs one = a;
    one.input_axes.assign(m, 0);
    std::vector<std::vector<tensor>> parts;
    EPSTACK_RETURN_IF_ERROR(scan_once(ctx, one, std::move(state), xs, len, out_states[static_cast<std::size_t>(b)], parts));
    for (std::size_t k = 0; k < n_scan_out; ++k) {
      const bool rev = k < a.output_directions.size() && a.output_directions[k] == 1;
      EPSTACK_ASSIGN_OR_RETURN(auto t, stack(parts[k], 0, rev, declared_type(*a.body, n_state + k),
                                             declared_shape(*a.body, n_state + k)));
      out_scans[k].push_back(std::move(t));
    }
  }
  for (std::size_t i = 0; i < n_state; ++i) {
    std::vector<tensor> items;
    for (auto& s : out_states) items.push_back(s[i].as_tensor());
    EPSTACK_ASSIGN_OR_RETURN(auto t, stack(items, 0, false, ctx.input(first + i).type(), {}));
    ctx.output(i) = std::move(t);
  }
  for (std::size_t k = 0; k < n_scan_out; ++k) {
    EPSTACK_ASSIGN_OR_RETURN(auto t, stack(out_scans[k], 0, false, declared_type(*a.body, n_state + k), {}));
    ctx.output(n_state + k) = std::move(t);
  }
  return {};
}

}  // namespace
}  // namespace impl

namespace ops {
using namespace impl;

bool if_::supports(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  return graph_attr(nd, "then_branch") != nullptr && graph_attr(nd, "else_branch") != nullptr;
}
Result<compute_function> if_::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const graph* then_g = graph_attr(nd, "then_branch");
  const graph* else_g = graph_attr(nd, "else_branch");
  return make_fn("If", [then_g, else_g](compute_context& ctx) { return if_compute(ctx, then_g, else_g); });
}

bool loop::supports(const graph& g, node_id n) { return graph_attr(g.node(n), "body") != nullptr; }
Result<compute_function> loop::compile(const graph& g, node_id n) {
  const graph* body = graph_attr(g.node(n), "body");
  return make_fn("Loop", [body](compute_context& ctx) { return loop_compute(ctx, body); });
}

bool scan::supports(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  return graph_attr(nd, "body") != nullptr && has_attr(nd, "num_scan_inputs");
}
Result<compute_function> scan::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  scan_attrs a;
  a.body = graph_attr(nd, "body");
  a.num_scan_inputs = attr_i(nd, "num_scan_inputs", 0);
  a.batched = nd.since_version < 9;
  a.input_axes = attr_ints(nd, "scan_input_axes");
  a.input_directions = attr_ints(nd, a.batched ? "directions" : "scan_input_directions");
  a.output_axes = attr_ints(nd, "scan_output_axes");
  a.output_directions = attr_ints(nd, "scan_output_directions");
  if (a.num_scan_inputs < 0) return Status(errc::invalid_graph, "num_scan_inputs must not be negative");
  return make_fn("Scan", [a](compute_context& ctx) { return scan_compute(ctx, a); });
}

}  // namespace ops
}  // namespace epstack::cpu
