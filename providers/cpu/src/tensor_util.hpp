#pragma once
// Helpers shared by the shape, data-movement, Cast and constant kernels (shape_ops.cpp, tensor_ops.cpp, cast.cpp,
// constant_ops.cpp): elements moved as units of their size, integer lists and axes from inputs, views of the input,
// numbers as double and as text, and support checks. Private to the epstack::cpu library.
#include "kernel_util.hpp"

#include <charconv>

namespace epstack::cpu::impl {

inline std::string num(std::int64_t v) { return std::to_string(v); }

// ---------------------------------------------------------------------------------------------------------------
// Moving elements

// N bytes of element data, copied as a unit. may_alias: reading a float tensor's bytes through it is defined. No
// alignment beyond a byte: initializers read in place from a model file sit wherever protobuf put them.
template <std::size_t N>
struct [[gnu::may_alias]] unit {
  unsigned char bytes[N];
};

// Calls f(type_tag<U>{}) with U the mover for element type `e`: unit<element size>, or std::string.
template <class F>
bool dispatch_move(element_type e, F&& f) {
  if (e == element_type::string) {
    f(type_tag<std::string>{});
    return true;
  }
  switch (element_size(e)) {
    case 1: f(type_tag<unit<1>>{}); return true;
    case 2: f(type_tag<unit<2>>{}); return true;
    case 4: f(type_tag<unit<4>>{}); return true;
    case 8: f(type_tag<unit<8>>{}); return true;
    case 16: f(type_tag<unit<16>>{}); return true;
    default: return false;
  }
}
template <class U>
const U* elems(const tensor& t) {
  return reinterpret_cast<const U*>(t.data());
}
template <class U>
U* elems(tensor& t) {
  return reinterpret_cast<U*>(t.mutable_data());
}
inline Status bad_type(element_type e) { return invalid(cat("unsupported element type ", to_string(e))); }

// Contiguous strides of `d`.
inline sizes_t contiguous_strides(std::span<const std::int64_t> d) {
  sizes_t s(d.size(), 1);
  for (std::size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

// ---------------------------------------------------------------------------------------------------------------
// Integer lists from inputs and attributes

// A 0-D or 1-D int64 or int32 tensor as int64s.
inline Result<std::vector<std::int64_t>> ints_of(const tensor& t, std::string_view what) {
  if (t.type() != element_type::int64 && t.type() != element_type::int32)
    return invalid(cat(what, " must be an int64 or int32 tensor, not ", to_string(t.type())));
  if (t.rank() > 1) return invalid(cat(what, " must be 1-D, but has shape ", dims_string(t.sizes())));
  return to_int64s(t);
}

// An axis in [-rank, rank), negative only when the opset allows it.
inline Result<std::size_t> axis_of(std::int64_t axis, std::size_t rank, bool negative_ok, std::string_view what = "axis") {
  if (axis < 0 && !negative_ok)
    return invalid(cat(what, " ", num(axis), " is negative, which this opset does not allow (from opset 11)"));
  const auto a = normalize_axis(axis, rank);
  if (!a) return invalid(cat(what, " ", num(axis), " is out of range for rank ", num(static_cast<std::int64_t>(rank))));
  return *a;
}

// ---------------------------------------------------------------------------------------------------------------
// Views

inline void set_view(compute_context& ctx, std::span<const std::int64_t> sizes) {
  ctx.output(0) = ctx.input(0).reshaped(sizes);
}

// ---------------------------------------------------------------------------------------------------------------
// Numbers

// A number as double (the 16-bit floats through float).
template <class F>
double as_double(F v) {
  if constexpr (is_half_v<F>) return static_cast<double>(static_cast<float>(v));
  else return static_cast<double>(v);
}

// Numbers as text: integers in decimal, floating point in the shortest form that reads back to the same value
// (std::to_chars; half types through float), and INF, -INF, NaN; bool as 1 or 0.
template <class From>
std::string to_text(From v) {
  if constexpr (std::is_same_v<From, bool>) {
    return v ? "1" : "0";
  } else if constexpr (is_half_v<From>) {
    return to_text(static_cast<float>(v));
  } else {
    if constexpr (std::is_floating_point_v<From>) {
      if (std::isnan(v)) return "NaN";
      if (std::isinf(v)) return v > 0 ? "INF" : "-INF";
    }
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Support checks

// True when input i is given and, if its type is known, is a tensor of a valid element type.
inline bool tensor_input(const graph& g, node_id n, std::size_t i) {
  if (!has_in(g, n, i)) return false;
  const auto& t = g.value(g.node(n).inputs[i]).type;
  return t.kind == type_kind::undefined || (t.kind == type_kind::tensor && (t.elem == element_type::undefined || is_valid(t.elem)));
}
// True when input i, if given with a known type, is int64 (or int32 when `int32_ok`).
inline bool index_input(const graph& g, node_id n, std::size_t i, bool int32_ok) {
  const auto e = in_type(g, n, i);
  return e == element_type::undefined || e == element_type::int64 || (int32_ok && e == element_type::int32);
}

}  // namespace epstack::cpu::impl
