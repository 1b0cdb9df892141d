#pragma once
// Helpers shared by the CPU provider's kernels: attribute access, graph facts, element-type dispatch, axis and shape
// arithmetic, vectorisable math and parallel loops. Private to the epstack::cpu library.

#include <epstack/ir/attribute.hpp>
#include <epstack/provider/compute.hpp>
#include <epstack/detail/cat.hpp>
#include <epstack/ir/graph.hpp>
#include <epstack/ir/node_facts.hpp>
#include <epstack/providers/cpu/kernels.hpp>

#include "fast_math.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace epstack::cpu::impl {

using epstack::detail::cat;
using sizes_t = tensor_sizes;

// Attribute access and graph facts (attr_i, constant_input, in_rank, ...) come from <epstack/ir/node_facts.hpp>.

inline bool is_float(element_type e) {
  return e == element_type::float32 || e == element_type::float64 || e == element_type::float16 ||
         e == element_type::bfloat16;
}
inline bool is_integer(element_type e) {
  switch (e) {
    case element_type::int8: case element_type::int16: case element_type::int32: case element_type::int64:
    case element_type::uint8: case element_type::uint16: case element_type::uint32: case element_type::uint64:
      return true;
    default: return false;
  }
}
/// float or double: the element types of kernels that compute in floating point only at those precisions.
inline bool f32_or_f64(element_type e) { return e == element_type::float32 || e == element_type::float64; }
/// The 16-bit floating-point types (float16, bfloat16), which kernels compute in float.
template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;
/// True when every present input of the node has element type `e`.
inline bool all_inputs(const graph& g, node_id n, element_type e) {
  const auto& nd = g.node(n);
  for (std::size_t i = 0; i < nd.inputs.size(); ++i)
    if (nd.inputs[i] != no_id && in_type(g, n, i) != e) return false;
  return true;
}

// ---- element-type dispatch ----
template <class T>
struct type_tag {
  using type = T;
};
/// Calls f(type_tag<T>{}) for the T of `e` among `Ts...`; false when `e` is none of them.
template <class... Ts, class F>
bool dispatch(element_type e, F&& f) {
  return ((element_type_of_v<Ts> == e ? (f(type_tag<Ts>{}), true) : false) || ...);
}
/// dispatch over float and double.
template <class F>
bool float_dispatch(element_type e, F&& f) {
  return dispatch<float, double>(e, std::forward<F>(f));
}
/// The numeric types most kernels handle.
#define EPSTACK_NUMERIC_TYPES float, double, std::int32_t, std::int64_t, std::int8_t, std::uint8_t, std::int16_t, \
                              std::uint16_t, std::uint32_t, std::uint64_t
#define EPSTACK_ALL_POD_TYPES EPSTACK_NUMERIC_TYPES, bool, ::epstack::float16, ::epstack::bfloat16

// ---- shapes and axes ----
inline std::int64_t product(std::span<const std::int64_t> s, std::size_t from = 0, std::size_t to = SIZE_MAX) {
  std::int64_t p = 1;
  for (std::size_t i = from; i < std::min(to, s.size()); ++i) p *= s[i];
  return p;
}
/// Axis in [-rank, rank) mapped to [0, rank); nullopt when out of range.
inline std::optional<std::size_t> normalize_axis(std::int64_t axis, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r) return std::nullopt;
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}
inline Status bad_axis(std::int64_t axis, std::size_t rank) {
  return Status(errc::invalid_argument, cat("axis ", std::to_string(axis), " is out of range for rank ", std::to_string(rank)));
}
inline std::string dims_string(std::span<const std::int64_t> s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) r.push_back(',');
    r.append(std::to_string(s[i]));
  }
  r.push_back(']');
  return r;
}
/// Reads an int64 or int32 tensor's values as int64.
inline std::vector<std::int64_t> to_int64s(const tensor& t) {
  std::vector<std::int64_t> r(t.element_count());
  if (t.type() == element_type::int64) std::copy_n(t.typed<std::int64_t>(), r.size(), r.begin());
  else if (t.type() == element_type::int32) std::copy_n(t.typed<std::int32_t>(), r.size(), r.begin());
  else throw std::invalid_argument(cat("expected an int64 or int32 tensor, got ", std::string(to_string(t.type()))));
  return r;
}

// ---- vectorisable math: fast_math.hpp (fast_exp, fast_erf_abs, fast_erf, gelu_erf, fast_sigmoid) ----

/// The first 64-byte aligned address at or after `p` (scratch is allocated with 16 floats to spare for this).
inline float* align64(float* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  return reinterpret_cast<float*>((a + 63) & ~std::uintptr_t{63});
}

// ---- reductions ----
/// Independent accumulators of a reduction loop (32: g++ vectorises even the max/min lanes).
inline constexpr std::size_t lanes = 32;
/// Folds the `lanes` accumulators into one, halving with fixed widths (compilers turn each step into one vector op).
template <class T, class F>
T fold_lanes(T* acc, const F& f) {
  static_assert(lanes == 32);
  for (std::size_t j = 0; j < 16; ++j) acc[j] = f(acc[j], acc[j + 16]);
  for (std::size_t j = 0; j < 8; ++j) acc[j] = f(acc[j], acc[j + 8]);
  for (std::size_t j = 0; j < 4; ++j) acc[j] = f(acc[j], acc[j + 4]);
  return f(f(acc[0], acc[2]), f(acc[1], acc[3]));
}

// ---- parallel loops ----
/// Element-wise work over n items on the intra-op threads, in chunks worth spreading (about 16k items).
template <class F>
void parallel_elements(const compute_context& ctx, std::size_t n, F&& f) {
  constexpr std::size_t grain = 16384;
  if (n <= grain || ctx.thread_count() == 1) {
    f(std::size_t{0}, n);
    return;
  }
  ctx.parallel_for(n, std::max<std::size_t>(grain, n / static_cast<std::size_t>(ctx.thread_count() * 4)), f);
}
/// Items per chunk of parallel_items for items that each cost about `cost` element operations.
inline std::size_t items_grain(std::size_t cost) { return std::max<std::size_t>(1, 16384 / std::max<std::size_t>(cost, 1)); }
/// Work over n items that each cost about `cost` element operations.
template <class F>
void parallel_items(const compute_context& ctx, std::size_t n, std::size_t cost, F&& f) {
  const std::size_t per = items_grain(cost);
  if (n <= per || ctx.thread_count() == 1) {
    f(std::size_t{0}, n);
    return;
  }
  ctx.parallel_for(n, per, f);
}
/// Where the share of parallel_items(ctx, n, cost, ...) that holds item i ends (thread_pool::share_of): the items its
/// thread takes after i, in order.
inline std::size_t items_share_end(const compute_context& ctx, std::size_t n, std::size_t cost, std::size_t i) {
  const std::size_t per = items_grain(cost);
  if (n <= per || ctx.thread_count() == 1) return n;
  return thread_pool::share_of(n, per, static_cast<std::size_t>(ctx.thread_count()), i).second;
}

/// The random numbers of a kernel (Dropout in training, RandomUniform...): seeded by the node's `seed` attribute
/// when it has one (the same sequence in every session), else from std::random_device; shared by the kernel's
/// calls, which may come from several threads.
struct random_source {
  std::mutex mu;
  std::mt19937_64 engine;
  explicit random_source(const node& nd)
      : engine(has_attr(nd, "seed") ? static_cast<std::uint64_t>(static_cast<std::int64_t>(attr_f(nd, "seed", 0)))
                                    : (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}()) {}
};

/// An 8-bit integer type (quantized kernels' data and zero points).
inline bool int8ish(element_type e) { return e == element_type::uint8 || e == element_type::int8; }
/// Element i of a uint8 or int8 tensor as int.
inline int q_at(const tensor& t, std::size_t i) {
  return t.type() == element_type::uint8 ? static_cast<int>(t.typed<std::uint8_t>()[i]) : static_cast<int>(t.typed<std::int8_t>()[i]);
}

// ---- float16 and bfloat16 computed in float (defined in half_convert.cpp) ----
/// Blocks converted with epstack::float16 / bfloat16's rounding (to nearest even; F16C where the target has it).
void widen_half(const float16* src, float* dst, std::size_t n);
void widen_half(const bfloat16* src, float* dst, std::size_t n);
void narrow_half(const float* src, float16* dst, std::size_t n);
void narrow_half(const float* src, bfloat16* dst, std::size_t n);
/// A float copy of a float16/bfloat16 tensor, in the context's scratch memory.
tensor half_as_float(compute_context& ctx, const tensor& t);
/// Rounds `dst.element_count()` floats into the float16/bfloat16 tensor `dst`.
void store_as_half(compute_context& ctx, const float* src, tensor& dst);

/// invalid_argument with the message `msg`.
inline Status invalid(std::string msg) { return Status(errc::invalid_argument, std::move(msg)); }
/// invalid_argument "Op: what", the run-time error of a kernel given inputs it cannot take.
inline Status op_error(std::string_view op, std::string_view what) {
  return Status(errc::invalid_argument, cat(op, ": ", what));
}

/// One integer from a scalar or one-element 1-D int32/int64 tensor; invalid_argument starting with `what` otherwise.
inline Result<std::int64_t> scalar_int(const tensor& t, std::string_view what) {
  if (t.empty()) return Status(errc::invalid_argument, cat(what, " is missing"));
  if (t.type() != element_type::int64 && t.type() != element_type::int32)
    return Status(errc::invalid_argument, cat(what, " must be an int64 or int32 tensor, got ", std::string(to_string(t.type()))));
  if (t.element_count() != 1 || t.rank() > 1)
    return Status(errc::invalid_argument, cat(what, " must be a scalar (or a one-element 1-D tensor), got shape ", dims_string(t.sizes())));
  return to_int64s(t)[0];
}

/// Wraps a compute body so that a C++ exception becomes a Status naming the operator.
template <class F>
compute_function make_fn(std::string op, F&& body) {
  return [op = std::move(op), body = std::forward<F>(body)](compute_context& ctx) -> Status {
    try {
      return body(ctx);
    } catch (const std::exception& e) {
      return Status(errc::invalid_argument, cat(op, ": ", e.what()));
    }
  };
}

/// True when `e` is the element type of one of `Ts`.
template <class... Ts>
bool type_in(element_type e) {
  return ((element_type_of_v<Ts> == e) || ...);
}

/// Row-major element strides of `dims`.
inline std::vector<std::int64_t> strides_of(std::span<const std::int64_t> dims) {
  std::vector<std::int64_t> s(dims.size(), 1);
  for (std::size_t d = dims.size(); d-- > 1;) s[d - 1] = s[d] * dims[d];
  return s;
}

}  // namespace epstack::cpu::impl
