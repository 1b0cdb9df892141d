// Sequence and optional kernels: SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceAt, SequenceErase,
// SequenceLength, SplitToSequence, ConcatFromSequence, Optional, OptionalHasElement, OptionalGetElement. Sequences
// are immutable and shared (ivalue); a kernel that changes one builds a new one whose tensors share storage.
#include "kernel_util.hpp"

namespace epstack::cpu {
namespace impl {
namespace {

using dims = std::vector<std::int64_t>;


const tensor_sequence* sequence_input(const compute_context& ctx, std::size_t i) {
  const ivalue& v = ctx.input_value(i);
  return v.is_sequence() ? &v.as_sequence() : nullptr;
}

/// A position into a sequence of `n` items (negative from the end), `end_ok` allowing n itself (insert at the end).
std::optional<std::size_t> seq_position(const compute_context& ctx, std::size_t i, std::size_t n, bool end_ok) {
  const auto size = static_cast<std::int64_t>(n);
  std::int64_t p = end_ok ? size : size - 1;
  if (ctx.has_input(i) && ctx.input(i).element_count() > 0) p = to_int64s(ctx.input(i)).front();
  if (p < -size || p > (end_ok ? size : size - 1)) return std::nullopt;
  return static_cast<std::size_t>(p < 0 ? p + size : p);
}

/// Concatenates (or stacks, `new_axis`) tensors of one type along `axis`.
Status join(compute_context& ctx, const std::vector<tensor>& items, std::int64_t axis_attr, bool new_axis, element_type elem) {
  if (items.empty()) return op_error("ConcatFromSequence", "the sequence is empty");
  const tensor& first = items.front();
  const std::size_t out_rank = first.rank() + (new_axis ? 1 : 0);
  const auto axis = normalize_axis(axis_attr, out_rank);
  if (!axis) return bad_axis(axis_attr, out_rank);
  if (!new_axis && first.rank() == 0) return op_error("ConcatFromSequence", "scalars concatenate only with new_axis = 1");
  dims out(first.sizes().begin(), first.sizes().end());
  if (new_axis) out.insert(out.begin() + static_cast<std::ptrdiff_t>(*axis), 0);
  else out[*axis] = 0;
  for (const auto& t : items) {
    if (t.type() != elem || t.rank() != first.rank()) return op_error("ConcatFromSequence", "the tensors differ in type or rank");
    for (std::size_t d = 0; d < t.rank(); ++d)
      if ((new_axis || d != *axis) && t.sizes()[d] != first.sizes()[d])
        return op_error("ConcatFromSequence", "the tensors differ in a dimension other than the axis");
    out[*axis] += new_axis ? 1 : t.sizes()[*axis];
  }
  tensor& y = ctx.allocate_output(0, elem, out);
  const std::size_t es = element_size(elem);
  const std::int64_t outer = product(out, 0, *axis), out_row = product(out, *axis);
  std::int64_t at = 0;  // elements of the axis block written so far
  for (const auto& t : items) {
    const std::int64_t row = product(t.sizes(), *axis);  // elements per outer index
    for (std::int64_t o = 0; o < outer; ++o)
      std::memcpy(y.mutable_data() + static_cast<std::size_t>(o * out_row + at) * es, t.data() + static_cast<std::size_t>(o * row) * es,
                  static_cast<std::size_t>(row) * es);
    at += row;
  }
  return {};
}

}  // namespace
}  // namespace impl

namespace ops {
using namespace impl;

bool sequence_empty::supports(const graph&, node_id) { return true; }
Result<compute_function> sequence_empty::compile(const graph& g, node_id n) {
  const auto e = static_cast<element_type>(attr_i(g.node(n), "dtype", static_cast<std::int64_t>(element_type::float32)));
  if (!is_valid(e)) return Status(errc::invalid_graph, "SequenceEmpty: unknown dtype");
  return make_fn("SequenceEmpty", [e](compute_context& ctx) -> Status {
    tensor_sequence s;
    s.elem = e;
    ctx.output_value(0) = ivalue(std::move(s));
    return {};
  });
}

bool sequence_construct::supports(const graph& g, node_id n) { return !g.node(n).inputs.empty(); }
Result<compute_function> sequence_construct::compile(const graph&, node_id) {
  return make_fn("SequenceConstruct", [](compute_context& ctx) -> Status {
    tensor_sequence s;
    for (std::size_t i = 0; i < ctx.input_count(); ++i) {
      const tensor& t = ctx.input(i);
      if (i == 0) s.elem = t.type();
      else if (t.type() != s.elem) return op_error("SequenceConstruct", "the tensors differ in element type");
      s.items.push_back(t);
    }
    ctx.output_value(0) = ivalue(std::move(s));
    return {};
  });
}

bool sequence_insert::supports(const graph&, node_id) { return true; }
Result<compute_function> sequence_insert::compile(const graph&, node_id) {
  return make_fn("SequenceInsert", [](compute_context& ctx) -> Status {
    const auto* in = sequence_input(ctx, 0);
    if (in == nullptr) return op_error("SequenceInsert", "input 0 is not a sequence");
    const tensor& t = ctx.input(1);
    if (in->elem != element_type::undefined && t.type() != in->elem)
      return op_error("SequenceInsert", cat("a ", std::string(to_string(t.type())), " tensor into a sequence of ",
                                             std::string(to_string(in->elem))));
    const auto at = seq_position(ctx, 2, in->items.size(), true);
    if (!at) return op_error("SequenceInsert", "the position is out of range");
    tensor_sequence s = *in;
    s.elem = t.type();
    s.items.insert(s.items.begin() + static_cast<std::ptrdiff_t>(*at), t);
    ctx.output_value(0) = ivalue(std::move(s));
    return {};
  });
}

bool sequence_at::supports(const graph&, node_id) { return true; }
Result<compute_function> sequence_at::compile(const graph&, node_id) {
  return make_fn("SequenceAt", [](compute_context& ctx) -> Status {
    const auto* in = sequence_input(ctx, 0);
    if (in == nullptr) return op_error("SequenceAt", "input 0 is not a sequence");
    if (!ctx.has_input(1)) return op_error("SequenceAt", "the position is missing");
    const auto at = seq_position(ctx, 1, in->items.size(), false);
    if (!at) return op_error("SequenceAt", "the position is out of range");
    ctx.output(0) = in->items[*at];
    return {};
  });
}

bool sequence_erase::supports(const graph&, node_id) { return true; }
Result<compute_function> sequence_erase::compile(const graph&, node_id) {
  return make_fn("SequenceErase", [](compute_context& ctx) -> Status {
    const auto* in = sequence_input(ctx, 0);
    if (in == nullptr) return op_error("SequenceErase", "input 0 is not a sequence");
    if (in->items.empty()) return op_error("SequenceErase", "the sequence is empty");
    const auto at = seq_position(ctx, 1, in->items.size(), false);
    if (!at) return op_error("SequenceErase", "the position is out of range");
    tensor_sequence s = *in;
    s.items.erase(s.items.begin() + static_cast<std::ptrdiff_t>(*at));
    ctx.output_value(0) = ivalue(std::move(s));
    return {};
  });
}

bool sequence_length::supports(const graph&, node_id) { return true; }
Result<compute_function> sequence_length::compile(const graph&, node_id) {
  return make_fn("SequenceLength", [](compute_context& ctx) -> Status {
    const auto* in = sequence_input(ctx, 0);
    if (in == nullptr) return op_error("SequenceLength", "input 0 is not a sequence");
    tensor& y = ctx.allocate_output(0, element_type::int64, std::span<const std::int64_t>());
    *y.typed<std::int64_t>() = static_cast<std::int64_t>(in->items.size());
    return {};
  });
}

// SplitToSequence: without `split`, pieces of 1 along the axis (squeezed when keepdims = 0); a scalar split gives
// pieces of that size (the last one shorter); a 1-D split gives their sizes.
bool split_to_sequence::supports(const graph& g, node_id n) { return in_type(g, n, 0) != element_type::string; }
Result<compute_function> split_to_sequence::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const std::int64_t axis_attr = attr_i(nd, "axis", 0);
  const bool keepdims = attr_i(nd, "keepdims", 1) != 0;
  return make_fn("SplitToSequence", [axis_attr, keepdims](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    const auto axis = normalize_axis(axis_attr, x.rank());
    if (!axis) return bad_axis(axis_attr, x.rank());
    const std::int64_t len = x.sizes()[*axis];
    std::vector<std::int64_t> sizes;
    bool squeeze = false;
    if (!ctx.has_input(1)) {
      sizes.assign(static_cast<std::size_t>(len), 1);
      squeeze = !keepdims;
    } else {
      const tensor& sp = ctx.input(1);
      const auto v = to_int64s(sp);
      if (sp.rank() == 0) {
        if (v.front() < 1) return op_error("SplitToSequence", "the split size must be positive");
        for (std::int64_t at = 0; at < len; at += v.front()) sizes.push_back(std::min(v.front(), len - at));
      } else {
        sizes = v;
        std::int64_t total = 0;
        for (auto s : sizes) {
          if (s < 0) return op_error("SplitToSequence", "a split size is negative");
          total += s;
        }
        if (total != len) return op_error("SplitToSequence", "the split sizes do not add up to the axis");
      }
    }
    tensor_sequence s;
    s.elem = x.type();
    const std::size_t es = element_size(x.type());
    const std::int64_t outer = product(x.sizes(), 0, *axis), inner = product(x.sizes(), *axis + 1);
    std::int64_t at = 0;
    for (std::int64_t piece : sizes) {
      dims d(x.sizes().begin(), x.sizes().end());
      d[*axis] = piece;
      tensor t = tensor::uninitialized(x.type(), d);
      for (std::int64_t o = 0; o < outer; ++o)
        std::memcpy(t.mutable_data() + static_cast<std::size_t>(o * piece * inner) * es,
                    x.data() + static_cast<std::size_t>((o * len + at) * inner) * es, static_cast<std::size_t>(piece * inner) * es);
      if (squeeze) {
        d.erase(d.begin() + static_cast<std::ptrdiff_t>(*axis));
        t = t.reshaped(d);
      }
      s.items.push_back(std::move(t));
      at += piece;
    }
    ctx.output_value(0) = ivalue(std::move(s));
    return {};
  });
}

bool concat_from_sequence::supports(const graph&, node_id) { return true; }
Result<compute_function> concat_from_sequence::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (!has_attr(nd, "axis")) return Status(errc::invalid_graph, "ConcatFromSequence needs the axis attribute");
  const std::int64_t axis = attr_i(nd, "axis", 0);
  const bool new_axis = attr_i(nd, "new_axis", 0) != 0;
  return make_fn("ConcatFromSequence", [axis, new_axis](compute_context& ctx) -> Status {
    const auto* in = sequence_input(ctx, 0);
    if (in == nullptr) return op_error("ConcatFromSequence", "input 0 is not a sequence");
    if (in->elem == element_type::string) return op_error("ConcatFromSequence", "string tensors are not supported");
    return join(ctx, in->items, axis, new_axis, in->items.empty() ? in->elem : in->items.front().type());
  });
}

// Optionals: an empty optional is the none value; one holding a value is that value.
bool optional::supports(const graph&, node_id) { return true; }
Result<compute_function> optional::compile(const graph&, node_id) {
  return make_fn("Optional", [](compute_context& ctx) -> Status {
    ctx.output_value(0) = ctx.input_count() > 0 ? ctx.input_value(0) : ivalue();
    return {};
  });
}
bool optional_has_element::supports(const graph&, node_id) { return true; }
Result<compute_function> optional_has_element::compile(const graph&, node_id) {
  return make_fn("OptionalHasElement", [](compute_context& ctx) -> Status {
    tensor& y = ctx.allocate_output(0, element_type::boolean, std::span<const std::int64_t>());
    *y.typed<bool>() = ctx.input_count() > 0 && !ctx.input_value(0).is_none();
    return {};
  });
}
bool optional_get_element::supports(const graph&, node_id) { return true; }
Result<compute_function> optional_get_element::compile(const graph&, node_id) {
  return make_fn("OptionalGetElement", [](compute_context& ctx) -> Status {
    if (ctx.input_count() == 0 || ctx.input_value(0).is_none())
      return op_error("OptionalGetElement", "the optional is empty");
    ctx.output_value(0) = ctx.input_value(0);
    return {};
  });
}

}  // namespace ops
}  // namespace epstack::cpu
