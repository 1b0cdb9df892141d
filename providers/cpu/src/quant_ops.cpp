// Quantization kernels: QuantizeLinear, DequantizeLinear, and the 8-bit integer matrix products MatMulInteger and
// QLinearMatMul.
#include "kernel_util.hpp"
#include "small_float.hpp"

#include <utility>

namespace epstack::cpu {
namespace impl {
namespace {

namespace sf = small_float;

// ---------------------------------------------------------------------------------------------------------------
// QuantizeLinear and DequantizeLinear: granularity, parameters, element loops.

/// The granularity of (De)QuantizeLinear: which scale (and zero point) element i of x uses. x is seen as
/// [outer, D, I] around the axis; blocked scales are [outer, S, I] with S = ceil(D / B).
struct quant_layout {
  enum class mode : std::uint8_t { tensor, axis, blocked };
  mode m = mode::tensor;
  std::size_t D = 1, I = 1, B = 1, S = 1;

  /// The run of elements from i (before `end`) that use the parameters p, p + ps, p + 2 ps, ... (ps is 0 or 1);
  /// re is where the run ends.
  void run(std::size_t i, std::size_t end, std::size_t& p, std::size_t& ps, std::size_t& re) const {
    switch (m) {
      case mode::tensor: p = 0, ps = 0, re = end; return;
      case mode::axis:
        if (I == 1) {  // the last axis: one parameter per element, a run per row
          p = i % D, ps = 1, re = std::min(end, (i / D + 1) * D);
        } else {
          const std::size_t row = i / I;
          p = row % D, ps = 0, re = std::min(end, (row + 1) * I);
        }
        return;
      case mode::blocked:
        if (I == 1) {  // the last axis: a run per block
          const std::size_t o = i / D, a = i % D;
          p = o * S + a / B, ps = 0, re = std::min(end, o * D + std::min(D, (a / B + 1) * B));
        } else {
          const std::size_t row = i / I, o = row / D, a = row % D;
          p = (o * S + a / B) * I + i % I, ps = 1, re = std::min(end, (row + 1) * I);
        }
        return;
    }
  }
};

/// The layout for x, its scale and zero point, the `axis` and `block_size` attributes. Per-tensor: a scalar (or
/// one-element 1-D) scale; per-axis: a 1-D scale of the axis' length (block_size 0); blocked: a scale of x's rank,
/// equal to x's shape but on the axis, where it is ceil(D / block_size).
Result<quant_layout> layout_of(const tensor& x, const tensor& scale, const tensor* zp, std::int64_t axis_attr,
                               std::int64_t block_size, std::string_view op, std::string_view scale_name) {
  if (zp != nullptr && (zp->element_count() != scale.element_count() ||
                        (scale.element_count() != 1 && !std::ranges::equal(zp->sizes(), scale.sizes()))))
    return op_error(op, cat("the zero point's shape ", dims_string(zp->sizes()), " differs from ", scale_name, "'s ",
                            dims_string(scale.sizes())));
  quant_layout q;
  if (scale.element_count() == 1 && scale.rank() <= 1) return q;
  const auto axis = normalize_axis(axis_attr, x.rank());
  if (!axis) return bad_axis(axis_attr, x.rank());
  q.D = static_cast<std::size_t>(x.sizes()[*axis]);
  q.I = static_cast<std::size_t>(product(x.sizes(), *axis + 1));
  if (block_size > 0) {
    if (scale.rank() != x.rank())
      return op_error(op, cat("attribute 'block_size' (", std::to_string(block_size), ") asks for blocked quantization, where ",
                              scale_name, " has x's rank ", std::to_string(x.rank()), ", but its shape is ",
                              dims_string(scale.sizes())));
    for (std::size_t d = 0; d < x.rank(); ++d)
      if (d != *axis && scale.sizes()[d] != x.sizes()[d])
        return op_error(op, cat(scale_name, "'s shape ", dims_string(scale.sizes()), " must equal x's ",
                                dims_string(x.sizes()), " but on axis ", std::to_string(*axis)));
    const auto D = static_cast<std::int64_t>(q.D), S = scale.sizes()[*axis], B = block_size;
    if (S != (D + B - 1) / B) {
      const std::int64_t lo = S > 0 ? (D + S - 1) / S : 0;
      const std::string hi = S > 1 ? std::to_string((D + S - 2) / (S - 1) - 1) : std::string("any");
      return op_error(op, cat("attribute 'block_size' (", std::to_string(B), ") does not fit: x's axis ",
                              std::to_string(*axis), " has ", std::to_string(D), " elements and ", scale_name, " ",
                              std::to_string(S), " blocks, so block_size must be in [", std::to_string(lo), ", ", hi, "]"));
    }
    q.m = quant_layout::mode::blocked;
    q.B = static_cast<std::size_t>(B);
    q.S = static_cast<std::size_t>(S);
    return q;
  }
  if (scale.rank() != 1)
    return op_error(op, cat(scale_name, " of shape ", dims_string(scale.sizes()),
                            " must be a scalar or 1-D, or the attribute 'block_size' must be set (blocked quantization)"));
  if (x.sizes()[*axis] != static_cast<std::int64_t>(scale.element_count()))
    return op_error(op, cat("the scale's length differs from the axis' length (", std::to_string(scale.element_count()),
                            " and ", std::to_string(q.D), ")"));
  q.m = quant_layout::mode::axis;
  return q;
}

/// Element k of a tensor of any numeric type (the small types decoded) as double.
double number_at(const tensor& t, std::size_t k) {
  double r = 0;
  if (static_cast<std::int32_t>(t.type()) > max_computed_element_type) return sf::value_at(t.type(), t.data(), k);
  dispatch<EPSTACK_NUMERIC_TYPES, ::epstack::float16, ::epstack::bfloat16>(t.type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_half_v<T>) r = static_cast<double>(static_cast<float>(t.typed<T>()[k]));
    else r = static_cast<double>(t.typed<T>()[k]);
  });
  return r;
}
std::vector<double> numbers_of(const tensor& t) {
  std::vector<double> r(t.element_count());
  for (std::size_t k = 0; k < r.size(); ++k) r[k] = number_at(t, k);
  return r;
}

/// The types QuantizeLinear produces (and DequantizeLinear reads, with int32).
bool quantized_type(element_type e) {
  switch (e) {
    case element_type::int8: case element_type::uint8: case element_type::int16: case element_type::uint16:
    case element_type::float8e4m3fn: case element_type::float8e4m3fnuz: case element_type::float8e5m2:
    case element_type::float8e5m2fnuz: case element_type::uint4: case element_type::int4:
    case element_type::float4e2m1: case element_type::uint2: case element_type::int2: return true;
    default: return false;
  }
}
bool half_or_float(element_type e) {
  return e == element_type::float32 || e == element_type::float16 || e == element_type::bfloat16;
}

// ---- QuantizeLinear: q = x / scale in the division's precision, then the target's rounding and saturation ----

/// The precision of x / scale: float, float16, bfloat16 (each quotient rounded to it), or double (int32 scales).
enum class prec : std::uint8_t { f32, f16, bf16, f64 };
template <prec P>
float narrow(float v) {
  if constexpr (P == prec::f16) return static_cast<float>(float16(v));
  else if constexpr (P == prec::bf16) return static_cast<float>(bfloat16(v));
  else return v;
}
template <class X>
float load_float(X v) {
  return static_cast<float>(v);
}
template <class X>
double load_double(X v) {
  if constexpr (is_half_v<X>) return static_cast<double>(static_cast<float>(v));
  else return static_cast<double>(v);
}

/// q[k] = x[i0 + k] / s[k * ps] for k < m.
using quot_fn = void (*)(const void* x, std::size_t i0, const double* s, std::size_t ps, std::size_t m, double* q);
template <prec P, class X>
void quot(const void* xp, std::size_t i0, const double* s, std::size_t ps, std::size_t m, double* q) {
  const X* x = static_cast<const X*>(xp) + i0;
  if constexpr (P == prec::f64) {
    for (std::size_t k = 0; k < m; ++k) q[k] = load_double(x[k]) / s[k * ps];
  } else if (ps == 0) {
    const auto sv = static_cast<float>(s[0]);
    for (std::size_t k = 0; k < m; ++k) q[k] = narrow<P>(narrow<P>(load_float(x[k])) / sv);
  } else {
    for (std::size_t k = 0; k < m; ++k) q[k] = narrow<P>(narrow<P>(load_float(x[k])) / static_cast<float>(s[k]));
  }
}
template <prec P>
quot_fn quot_for(element_type x) {
  switch (x) {
    case element_type::float32: return &quot<P, float>;
    case element_type::float16: return &quot<P, float16>;
    case element_type::bfloat16: return &quot<P, bfloat16>;
    case element_type::int32: return &quot<P, std::int32_t>;
    default: return nullptr;
  }
}

struct store_args {
  double lo = 0, hi = 0;  // integer targets' range
  bool saturate = true, fnuz_inf_nan = false;
};
/// out[i0 + k] from the quotients q[k] and zero points z[k * ps] for k < m.
using store_fn = void (*)(const double* q, const double* z, std::size_t ps, std::size_t m, void* out, std::size_t i0,
                          const store_args& a);
// Integers: saturate(round_half_even(q) + zero_point); a NaN quotient gives 0.
template <class Q>
void store_int(const double* q, const double* z, std::size_t ps, std::size_t m, void* out, std::size_t i0,
               const store_args& a) {
  Q* o = static_cast<Q*>(out) + i0;
  for (std::size_t k = 0; k < m; ++k) {
    double v = std::nearbyint(q[k]) + z[k * ps];
    v = v == v ? v : 0.0;
    o[k] = static_cast<Q>(std::min(std::max(v, a.lo), a.hi));
  }
}
template <sf::f8 K>
void store_f8(const double* q, const double* z, std::size_t ps, std::size_t m, void* out, std::size_t i0,
              const store_args& a) {
  auto* o = static_cast<std::uint8_t*>(out) + i0;
  for (std::size_t k = 0; k < m; ++k)
    o[k] = sf::from_float<K>(static_cast<float>(q[k]) + static_cast<float>(z[k * ps]), a.saturate, a.fnuz_inf_nan);
}
void store_f4(const double* q, const double* z, std::size_t ps, std::size_t m, void* out, std::size_t i0,
              const store_args&) {
  auto* o = static_cast<std::uint8_t*>(out) + i0;
  for (std::size_t k = 0; k < m; ++k) o[k] = sf::float4_from_float(static_cast<float>(q[k]) + static_cast<float>(z[k * ps]));
}

/// Packs one code a byte (the low Bits bits) into `out`, 8 / Bits to a byte.
template <int Bits>
void pack_codes(const compute_context& ctx, const std::uint8_t* codes, std::size_t n, std::uint8_t* out) {
  constexpr std::size_t per = 8 / Bits;
  constexpr unsigned mask = (1u << Bits) - 1;
  parallel_elements(ctx, (n + per - 1) / per, [&](std::size_t b, std::size_t e) {
    for (std::size_t k = b; k < e; ++k) {
      const std::size_t i0 = k * per, m = std::min(per, n - i0);
      unsigned byte = 0;
      for (std::size_t j = 0; j < m; ++j) byte |= (codes[i0 + j] & mask) << (j * Bits);
      out[k] = static_cast<std::uint8_t>(byte);
    }
  });
}

// ---- DequantizeLinear: (x - zero_point) * scale in double, rounded to the output type ----

/// y[i0 + k] = (x[i0 + k] - z[k * ps]) * s[k * ps] for k < m; `table` decodes the one-byte and packed types.
using deq_fn = void (*)(const void* x, std::size_t i0, const float* table, const double* z, const double* s,
                        std::size_t ps, std::size_t m, void* y);
template <class Y>
void put(Y* y, std::size_t k, double v) {
  if constexpr (is_half_v<Y>) y[k] = Y(static_cast<float>(v));
  else y[k] = static_cast<Y>(v);
}
// Loaders of element i: a C++ type, a one-byte code through a table, a packed code through a table.
template <class T>
struct typed_load {
  static double at(const void* x, std::size_t i, const float*) { return static_cast<double>(static_cast<const T*>(x)[i]); }
};
struct byte_load {
  static double at(const void* x, std::size_t i, const float* t) { return t[static_cast<const std::uint8_t*>(x)[i]]; }
};
template <int Bits>
struct packed_load {
  static double at(const void* x, std::size_t i, const float* t) { return t[sf::packed_code<Bits>(x, i)]; }
};
template <class L, class Y>
void deq(const void* x, std::size_t i0, const float* table, const double* z, const double* s, std::size_t ps,
         std::size_t m, void* yp) {
  Y* y = static_cast<Y*>(yp) + i0;
  if (ps == 0) {
    const double zv = z[0], sv = s[0];
    for (std::size_t k = 0; k < m; ++k) put(y, k, (L::at(x, i0 + k, table) - zv) * sv);
  } else {
    for (std::size_t k = 0; k < m; ++k) put(y, k, (L::at(x, i0 + k, table) - z[k]) * s[k]);
  }
}
template <class L>
deq_fn deq_for(element_type y) {
  switch (y) {
    case element_type::float32: return &deq<L, float>;
    case element_type::float16: return &deq<L, float16>;
    case element_type::bfloat16: return &deq<L, bfloat16>;
    default: return nullptr;
  }
}
// The decoding tables of the packed types (code to value).
inline constexpr float int4_values[16] = {0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1};
inline constexpr float uint4_values[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
inline constexpr float int2_values[4] = {0, 1, -2, -1};
inline constexpr float uint2_values[4] = {0, 1, 2, 3};

/// Runs f(begin, count, p, ps) over the runs of elements [0, n) that share a parameter pattern, on the intra-op
/// threads, in pieces of at most `piece` elements.
template <class F>
void for_runs(const compute_context& ctx, const quant_layout& q, std::size_t n, std::size_t piece, const F& f) {
  parallel_elements(ctx, n, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e;) {
      std::size_t p = 0, ps = 0, re = e;
      q.run(i, e, p, ps, re);
      for (std::size_t c = i; c < re; c += piece) f(c, std::min(piece, re - c), p + (c - i) * ps, ps);
      i = re;
    }
  });
}

/// C = (A - za) x (B - zb) in double over numpy matmul's broadcast batch dims; za per row of A (or one), zb per
/// column of B (or one). Returns C's dims and values.
Result<std::pair<std::vector<std::int64_t>, std::vector<double>>> int_matmul(const tensor& a, const tensor& b, const tensor* za,
                                                                              const tensor* zb, double sa, double sb) {
  if (a.rank() < 1 || b.rank() < 1) return op_error("MatMulInteger", "inputs need rank 1 or more");
  // A 1-D A is a row [1, K], a 1-D B a column [K, 1] (the leading 1 is pushed before the dims are appended: an
  // insert at the front trips g++-12's -Warray-bounds here).
  const bool a1 = a.rank() == 1, b1 = b.rank() == 1;
  std::vector<std::int64_t> ad, bd(b.sizes().begin(), b.sizes().end());
  if (a1) ad.push_back(1);
  ad.insert(ad.end(), a.sizes().begin(), a.sizes().end());
  if (b1) bd.push_back(1);
  const std::int64_t M = ad[ad.size() - 2], K = ad.back(), N = bd.back();
  if (bd[bd.size() - 2] != K) return op_error("MatMulInteger", "inner dims differ");
  const std::size_t r = std::max(ad.size(), bd.size());
  std::vector<std::int64_t> batch(r - 2, 1);
  const auto lead = [&](const std::vector<std::int64_t>& d, std::size_t i) -> std::int64_t {
    const std::size_t off = r - d.size();
    return i < off ? 1 : d[i - off];
  };
  for (std::size_t i = 0; i + 2 < r; ++i) {
    const std::int64_t x = lead(ad, i), y = lead(bd, i);
    if (x != y && x != 1 && y != 1) return op_error("MatMulInteger", "batch dims do not broadcast");
    batch[i] = std::max(x, y);
  }
  const std::int64_t nb = product(batch);
  std::vector<double> c(static_cast<std::size_t>(nb * M * N));
  for (std::int64_t bi = 0; bi < nb; ++bi) {
    std::int64_t ao = 0, bo = 0, rest = bi, as = 1, bs = 1;
    for (std::size_t i = r - 2; i-- > 0;) {
      const std::int64_t idx = rest % batch[i];
      rest /= batch[i];
      const std::int64_t xa = lead(ad, i), xb = lead(bd, i);
      ao += (xa == 1 ? 0 : idx) * as;
      bo += (xb == 1 ? 0 : idx) * bs;
      as *= xa;
      bs *= xb;
    }
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t nn = 0; nn < N; ++nn) {
        double acc = 0;
        for (std::int64_t k = 0; k < K; ++k) {
          const double zav = za && !za->empty() ? q_at(*za, za->element_count() == 1 ? 0 : static_cast<std::size_t>(m)) : 0;
          const double zbv = zb && !zb->empty() ? q_at(*zb, zb->element_count() == 1 ? 0 : static_cast<std::size_t>(nn)) : 0;
          acc += (q_at(a, static_cast<std::size_t>((ao * M + m) * K + k)) - zav) * sa *
                 ((q_at(b, static_cast<std::size_t>((bo * K + k) * N + nn)) - zbv) * sb);
        }
        c[static_cast<std::size_t>((bi * M + m) * N + nn)] = acc;
      }
  }
  std::vector<std::int64_t> out = batch;
  if (!a1) out.push_back(M);
  if (!b1) out.push_back(N);
  return std::pair{out, std::move(c)};
}

}  // namespace
}  // namespace impl

namespace ops {
using namespace impl;

// ---- QuantizeLinear: saturate(round(x / scale) + zero_point); per tensor, per axis (opset 13) or blocked (21) ----
bool quantize_linear::supports(const graph& g, node_id n) {
  const auto e = in_type(g, n, 0);
  const auto z = has_in(g, n, 2) ? in_type(g, n, 2) : element_type::undefined;
  return (e == element_type::undefined || half_or_float(e) || e == element_type::int32) &&
         (z == element_type::undefined || quantized_type(z));
}
Result<compute_function> quantize_linear::compile(const graph& g, node_id n) {
  const node& nd = g.node(n);
  const std::int64_t axis = attr_i(nd, "axis", 1);
  const std::int64_t block_size = attr_i(nd, "block_size", 0);
  const std::int64_t out_attr = attr_i(nd, "output_dtype", 0);
  const std::int64_t precision = attr_i(nd, "precision", 0);
  if (block_size < 0)
    return invalid(cat("QuantizeLinear: attribute 'block_size' must be positive (or 0: per-tensor or per-axis), not ",
                       std::to_string(block_size)));
  if (out_attr != 0 && !(out_attr > 0 && out_attr <= max_element_type && quantized_type(static_cast<element_type>(out_attr))))
    return invalid(cat("QuantizeLinear: attribute 'output_dtype' (", std::to_string(out_attr), ") is not a quantized type"));
  const auto pe = static_cast<element_type>(precision);
  if (precision != 0 && !(half_or_float(pe) || pe == element_type::int32 || pe == element_type::float64))
    return invalid(cat("QuantizeLinear: attribute 'precision' (", std::to_string(precision), ") is not a supported type"));
  store_args sa;
  sa.saturate = attr_i(nd, "saturate", 1) != 0;
  sa.fnuz_inf_nan = nd.since_version < 24;
  return make_fn("QuantizeLinear", [=](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    const tensor& scale = ctx.input(1);
    const bool has_zp = ctx.has_input(2) && !ctx.input(2).empty();
    const tensor* zp = has_zp ? &ctx.input(2) : nullptr;
    element_type out = out_attr != 0 ? static_cast<element_type>(out_attr) : element_type::uint8;
    if (has_zp) {
      if (out_attr != 0 && zp->type() != out)
        return op_error("QuantizeLinear", cat("attribute 'output_dtype' (", to_string(out), ") differs from y_zero_point's type ",
                                              to_string(zp->type())));
      out = zp->type();
    }
    if (!quantized_type(out)) return op_error("QuantizeLinear", cat("cannot quantize to ", to_string(out)));
    if (!half_or_float(scale.type()) && scale.type() != element_type::int32 && scale.type() != element_type::float8e8m0)
      return op_error("QuantizeLinear", cat("the scale must be float, float16, bfloat16, int32 or float8e8m0, not ",
                                            to_string(scale.type())));
    EPSTACK_ASSIGN_OR_RETURN(const quant_layout q, layout_of(x, scale, zp, axis, block_size, "QuantizeLinear", "y_scale"));
    // The division's precision: the attribute, else the scale's type.
    const element_type pt = precision != 0 ? pe : scale.type();
    const prec P = pt == element_type::float16    ? prec::f16
                   : pt == element_type::bfloat16 ? prec::bf16
                   : pt == element_type::int32 || pt == element_type::float64 ? prec::f64
                                                                                : prec::f32;
    std::vector<double> s = numbers_of(scale);
    for (double& v : s) {
      if (P == prec::f16) v = narrow<prec::f16>(static_cast<float>(v));
      else if (P == prec::bf16) v = narrow<prec::bf16>(static_cast<float>(v));
      else if (P == prec::f32) v = static_cast<float>(v);
    }
    const std::vector<double> z = has_zp ? numbers_of(*zp) : std::vector<double>(s.size(), 0.0);
    const quot_fn qf = P == prec::f16    ? quot_for<prec::f16>(x.type())
                       : P == prec::bf16 ? quot_for<prec::bf16>(x.type())
                       : P == prec::f64  ? quot_for<prec::f64>(x.type())
                                         : quot_for<prec::f32>(x.type());
    if (qf == nullptr)
      return op_error("QuantizeLinear", cat("x must be float, float16, bfloat16 or int32, not ", to_string(x.type())));
    tensor& y = ctx.allocate_output(0, out, x.sizes());
    const std::size_t count = x.element_count();
    store_args a = sa;
    store_fn st = nullptr;
    const auto range = [&](double lo, double hi) { a.lo = lo, a.hi = hi; };
    switch (out) {
      case element_type::uint8: st = &store_int<std::uint8_t>, range(0, 255); break;
      case element_type::int8: st = &store_int<std::int8_t>, range(-128, 127); break;
      case element_type::uint16: st = &store_int<std::uint16_t>, range(0, 65535); break;
      case element_type::int16: st = &store_int<std::int16_t>, range(-32768, 32767); break;
      case element_type::uint4: st = &store_int<std::uint8_t>, range(0, 15); break;
      case element_type::int4: st = &store_int<std::int8_t>, range(-8, 7); break;
      case element_type::uint2: st = &store_int<std::uint8_t>, range(0, 3); break;
      case element_type::int2: st = &store_int<std::int8_t>, range(-2, 1); break;
      case element_type::float8e4m3fn: st = &store_f8<sf::f8::e4m3fn>; break;
      case element_type::float8e4m3fnuz: st = &store_f8<sf::f8::e4m3fnuz>; break;
      case element_type::float8e5m2: st = &store_f8<sf::f8::e5m2>; break;
      case element_type::float8e5m2fnuz: st = &store_f8<sf::f8::e5m2fnuz>; break;
      case element_type::float4e2m1: st = &store_f4; break;
      default: break;
    }
    // Packed targets: one code a byte in scratch memory, packed afterwards.
    const int bits = sf::packed_bits(out);
    tensor codes = bits != 0 ? ctx.scratch(element_type::uint8, count) : tensor();
    void* dst = bits != 0 ? static_cast<void*>(codes.mutable_data()) : static_cast<void*>(y.mutable_data());
    const void* xd = x.data();
    for_runs(ctx, q, count, 256, [&](std::size_t c, std::size_t m, std::size_t p, std::size_t ps) {
      double buf[256];
      qf(xd, c, s.data() + p, ps, m, buf);
      st(buf, z.data() + p, ps, m, dst, c, a);
    });
    auto* yb = reinterpret_cast<std::uint8_t*>(y.mutable_data());
    if (bits == 4) pack_codes<4>(ctx, reinterpret_cast<const std::uint8_t*>(codes.data()), count, yb);
    else if (bits == 2) pack_codes<2>(ctx, reinterpret_cast<const std::uint8_t*>(codes.data()), count, yb);
    return {};
  });
}

// ---- DequantizeLinear: (x - zero_point) * scale; float, or the scale's type, or output_dtype (opset 21) ----
bool dequantize_linear::supports(const graph& g, node_id n) {
  const auto e = in_type(g, n, 0);
  return e == element_type::undefined || quantized_type(e) || e == element_type::int32;
}
Result<compute_function> dequantize_linear::compile(const graph& g, node_id n) {
  const node& nd = g.node(n);
  const std::int64_t axis = attr_i(nd, "axis", 1);
  const std::int64_t block_size = attr_i(nd, "block_size", 0);
  const std::int64_t out_attr = attr_i(nd, "output_dtype", 0);
  if (block_size < 0)
    return invalid(cat("DequantizeLinear: attribute 'block_size' must be positive (or 0: per-tensor or per-axis), not ",
                       std::to_string(block_size)));
  if (out_attr != 0 && !(out_attr > 0 && out_attr <= max_element_type && half_or_float(static_cast<element_type>(out_attr))))
    return invalid(cat("DequantizeLinear: attribute 'output_dtype' (", std::to_string(out_attr),
                       ") must be float, float16 or bfloat16"));
  return make_fn("DequantizeLinear", [=](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    const tensor& scale = ctx.input(1);
    const bool has_zp = ctx.has_input(2) && !ctx.input(2).empty();
    const tensor* zp = has_zp ? &ctx.input(2) : nullptr;
    if (!half_or_float(scale.type()) && scale.type() != element_type::float8e8m0)
      return op_error("DequantizeLinear", cat("the scale must be float, float16, bfloat16 or float8e8m0, not ",
                                              to_string(scale.type())));
    if (has_zp && zp->type() != x.type()) return op_error("DequantizeLinear", "the zero point's type differs from x's");
    EPSTACK_ASSIGN_OR_RETURN(const quant_layout q, layout_of(x, scale, zp, axis, block_size, "DequantizeLinear", "x_scale"));
    const element_type out = out_attr != 0 ? static_cast<element_type>(out_attr)
                             : half_or_float(scale.type()) ? scale.type()
                                                           : element_type::float32;
    deq_fn f = nullptr;
    const float* table = nullptr;
    switch (x.type()) {
      case element_type::int8: f = deq_for<typed_load<std::int8_t>>(out); break;
      case element_type::uint8: f = deq_for<typed_load<std::uint8_t>>(out); break;
      case element_type::int16: f = deq_for<typed_load<std::int16_t>>(out); break;
      case element_type::uint16: f = deq_for<typed_load<std::uint16_t>>(out); break;
      case element_type::int32: f = deq_for<typed_load<std::int32_t>>(out); break;
      case element_type::float8e4m3fn:
      case element_type::float8e4m3fnuz:
      case element_type::float8e5m2:
      case element_type::float8e5m2fnuz: f = deq_for<byte_load>(out), table = sf::byte_table(x.type()); break;
      case element_type::int4: f = deq_for<packed_load<4>>(out), table = int4_values; break;
      case element_type::uint4: f = deq_for<packed_load<4>>(out), table = uint4_values; break;
      case element_type::float4e2m1: f = deq_for<packed_load<4>>(out), table = sf::float4_table.data(); break;
      case element_type::int2: f = deq_for<packed_load<2>>(out), table = int2_values; break;
      case element_type::uint2: f = deq_for<packed_load<2>>(out), table = uint2_values; break;
      default: return op_error("DequantizeLinear", cat("cannot dequantize ", to_string(x.type())));
    }
    const std::vector<double> s = numbers_of(scale);
    const std::vector<double> z = has_zp ? numbers_of(*zp) : std::vector<double>(s.size(), 0.0);
    tensor& y = ctx.allocate_output(0, out, x.sizes());
    const void* xd = x.data();
    void* yd = y.mutable_data();
    for_runs(ctx, q, x.element_count(), 4096, [&](std::size_t c, std::size_t m, std::size_t p, std::size_t ps) {
      f(xd, c, table, z.data() + p, s.data() + p, ps, m, yd);
    });
    return {};
  });
}

// ---- MatMulInteger and QLinearMatMul: numpy matmul over 8-bit integers with zero points (and scales) ----
bool matmul_integer::supports(const graph& g, node_id n) { return int8ish(in_type(g, n, 0)) && int8ish(in_type(g, n, 1)); }
Result<compute_function> matmul_integer::compile(const graph&, node_id) {
  return make_fn("MatMulInteger", [](compute_context& ctx) -> Status {
    const tensor* za = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    const tensor* zb = ctx.has_input(3) ? &ctx.input(3) : nullptr;
    EPSTACK_ASSIGN_OR_RETURN(auto r, int_matmul(ctx.input(0), ctx.input(1), za, zb, 1.0, 1.0));
    tensor& y = ctx.allocate_output(0, element_type::int32, r.first);
    for (std::size_t i = 0; i < r.second.size(); ++i) y.typed<std::int32_t>()[i] = static_cast<std::int32_t>(r.second[i]);
    return {};
  });
}
bool qlinear_matmul::supports(const graph& g, node_id n) { return int8ish(in_type(g, n, 0)) && int8ish(in_type(g, n, 3)); }
Result<compute_function> qlinear_matmul::compile(const graph&, node_id) {
  return make_fn("QLinearMatMul", [](compute_context& ctx) -> Status {
    // Scales: float, or float16 / bfloat16 (QLinearMatMul-21), read as their exact values.
    const auto scalar = [&](std::size_t i) { return number_at(ctx.input(i), 0); };
    for (std::size_t i : {std::size_t{1}, std::size_t{4}, std::size_t{6}})
      if (!half_or_float(ctx.input(i).type()) || ctx.input(i).element_count() != 1)
        return op_error("QLinearMatMul", "scales must be float, float16 or bfloat16 scalars (per-tensor quantization)");
    EPSTACK_ASSIGN_OR_RETURN(auto r, int_matmul(ctx.input(0), ctx.input(3), &ctx.input(2), &ctx.input(5), scalar(1), scalar(4)));
    const tensor& yz = ctx.input(7);
    tensor& y = ctx.allocate_output(0, yz.type(), r.first);
    const double ys = scalar(6), z = q_at(yz, 0);
    for (std::size_t i = 0; i < r.second.size(); ++i) {
      const double v = std::nearbyint(r.second[i] / ys) + z;
      if (yz.type() == element_type::uint8) y.typed<std::uint8_t>()[i] = static_cast<std::uint8_t>(std::clamp(v, 0.0, 255.0));
      else y.typed<std::int8_t>()[i] = static_cast<std::int8_t>(std::clamp(v, -128.0, 127.0));
    }
    return {};
  });
}

}  // namespace ops
}  // namespace epstack::cpu
