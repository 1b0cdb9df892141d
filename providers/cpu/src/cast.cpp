// Cast and CastLike between every pair of numeric, bool, float16, bfloat16 and string types, and the storage-only
// types of ONNX 1.14 to 1.22 (float8 e4m3fn/e4m3fnuz/e5m2/e5m2fnuz/e8m0, float4e2m1, int4, uint4, int2, uint2).
#include "small_float.hpp"
#include "tensor_util.hpp"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <system_error>
#include <utility>

namespace epstack::cpu {
namespace impl {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Cast

// double to float, rounding to nearest; beyond the float range: infinity (no undefined conversion).
float narrow_to_float(double d) {
  constexpr double fmax = std::numeric_limits<float>::max();
  constexpr double halfway = 0x1.ffffffp127;  // FLT_MAX + half an ulp: rounds to infinity
  if (d > fmax) return d >= halfway ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::max();
  if (d < -fmax) return d <= -halfway ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::lowest();
  return static_cast<float>(d);
}
// Floating point to integer: truncation toward zero, saturating at the type's range; NaN gives 0.
template <class I>
I float_to_int(double x) {
  if (std::isnan(x)) return I(0);
  constexpr double lo = static_cast<double>(std::numeric_limits<I>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<I>::max());  // 2^63, 2^64 for 64-bit: exclusive
  if (x <= lo) return std::numeric_limits<I>::min();
  if (x >= hi) return std::numeric_limits<I>::max();
  return static_cast<I>(x);
}

template <class To, class From>
To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (is_half_v<From>) return static_cast<float>(v) != 0.0f;
    else return v != From(0);
  } else if constexpr (is_half_v<To>) {
    if constexpr (std::is_same_v<From, double>) return To(narrow_to_float(v));
    else return To(static_cast<float>(v));
  } else if constexpr (std::is_floating_point_v<To>) {
    if constexpr (is_half_v<From>) return static_cast<To>(static_cast<float>(v));
    else if constexpr (std::is_same_v<To, float> && std::is_same_v<From, double>) return narrow_to_float(v);
    else return static_cast<To>(v);
  } else if constexpr (std::is_floating_point_v<From> || is_half_v<From>) {
    return float_to_int<To>(as_double(v));
  } else {
    return static_cast<To>(v);  // integers wrap modulo 2^bits; bool gives 0 or 1
  }
}

// To bfloat16 by truncation (the upper 16 bits of the float), as ONNX's reference Cast does before opset 19 (the
// backend test data of ONNX 1.12); opset 19 specifies rounding to nearest even, as `convert` does. NaN stays NaN.
template <class From>
bfloat16 to_bfloat16_truncated(From v) {
  float f;
  if constexpr (std::is_same_v<From, double>) f = narrow_to_float(v);
  else if constexpr (std::is_same_v<From, bool>) f = v ? 1.0f : 0.0f;
  else f = static_cast<float>(v);
  if (std::isnan(f)) return bfloat16(f);
  bfloat16 r;
  r.bits = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(f) >> 16);
  return r;
}

bool parse_double(std::string_view s, double& d) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), d);
  if (r.ptr != s.data() + s.size()) return false;
  if (r.ec == std::errc::result_out_of_range) {  // overflow to infinity, underflow to zero, as strtod does
    const std::string z(s);
    char* end = nullptr;
    d = std::strtod(z.c_str(), &end);
    return end == z.c_str() + z.size();
  }
  return r.ec == std::errc();
}

// Text to a number: surrounding spaces and a leading '+' are ignored; floating point accepts what std::from_chars
// does (inf, infinity, nan in any case, scientific notation); integers accept decimal integers, and other numbers
// truncated and saturated; bool accepts true/false in any case, or a number (non-zero is true).
template <class To>
bool from_text(std::string_view s, To& out) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.size() > 1 && s.front() == '+' && s[1] != '-') s.remove_prefix(1);
  if (s.empty()) return false;
  if constexpr (std::is_same_v<To, bool>) {
    std::string lower(s);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "true") return out = true, true;
    if (lower == "false") return out = false, true;
    double d = 0;
    if (!parse_double(s, d)) return false;
    out = d != 0.0;
    return true;
  } else if constexpr (is_half_v<To>) {
    float f = 0;
    if (!from_text(s, f)) return false;
    out = To(f);
    return true;
  } else if constexpr (std::is_floating_point_v<To>) {
    const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
    if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return true;
    double d = 0;
    if (!parse_double(s, d)) return false;
    out = convert<To>(d);
    return true;
  } else {
    const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
    if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return true;
    double d = 0;
    if (!parse_double(s, d)) return false;
    out = float_to_int<To>(d);
    return true;
  }
}

bool castable(element_type e) {
  return is_valid(e) && e != element_type::complex64 && e != element_type::complex128;
}

// ---------------------------------------------------------------------------------------------------------------
// The storage-only types (no C++ type): values pass through float (the float types) or int64 (the packed integers).

namespace sf = small_float;

// True for the types without a C++ type: the float8s, float8e8m0, float4e2m1, int4, uint4, int2, uint2.
bool is_small(element_type e) { return static_cast<std::int32_t>(e) > max_computed_element_type; }

struct cast_options {
  bool truncate_bf16 = false;  // to bfloat16 by truncation (before opset 19)
  bool saturate = true;        // float8 and float8e8m0 targets: out-of-range values clamp (Cast-19 and later)
  bool fnuz_inf_nan = false;   // saturating to a fnuz float8 maps infinities to NaN (Cast-19 to Cast-23)
  sf::e8m0_round round = sf::e8m0_round::up;  // float8e8m0 targets (Cast-24 and later)
};

// A value as float, to encode it as one of the small float types: bool as 0 or 1, double rounded to nearest.
template <class V>
float value_as_float(V v) {
  if constexpr (std::is_same_v<V, bool>) return v ? 1.0f : 0.0f;
  else if constexpr (std::is_same_v<V, double>) return narrow_to_float(v);
  else return static_cast<float>(v);
}
// A value as int64, to store it as a packed integer (which keeps its low bits): floating point truncated toward
// zero (NaN gives 0), integers as they are (uint64 modulo 2^64).
template <class V>
std::int64_t value_as_int(V v) {
  if constexpr (std::is_floating_point_v<V> || is_half_v<V>) return float_to_int<std::int64_t>(as_double(v));
  else return static_cast<std::int64_t>(v);
}

// Readers of element i of a source tensor's data.
template <class T>
struct typed_reader {
  const T* p;
  T operator()(std::size_t i) const { return p[i]; }
};
struct byte_float_reader {  // float8 types and float8e8m0: a table lookup
  const std::uint8_t* p;
  const float* table;
  float operator()(std::size_t i) const { return table[p[i]]; }
};
struct float4_reader {
  const std::uint8_t* p;
  float operator()(std::size_t i) const { return sf::float4_table[sf::packed_code<4>(p, i)]; }
};
template <int Bits, bool Signed>
struct packed_int_reader {
  const std::uint8_t* p;
  std::int64_t operator()(std::size_t i) const { return sf::code_value<Bits>(sf::packed_code<Bits>(p, i), Signed); }
};

// Calls f(reader) for a source of a small type; false for other types.
template <class F>
bool with_small_reader(const tensor& x, F&& f) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(x.data());
  switch (x.type()) {
    case element_type::float8e4m3fn:
    case element_type::float8e4m3fnuz:
    case element_type::float8e5m2:
    case element_type::float8e5m2fnuz:
    case element_type::float8e8m0: f(byte_float_reader{p, sf::byte_table(x.type())}); return true;
    case element_type::float4e2m1: f(float4_reader{p}); return true;
    case element_type::int4: f(packed_int_reader<4, true>{p}); return true;
    case element_type::uint4: f(packed_int_reader<4, false>{p}); return true;
    case element_type::int2: f(packed_int_reader<2, true>{p}); return true;
    case element_type::uint2: f(packed_int_reader<2, false>{p}); return true;
    default: return false;
  }
}

// out[i] = code(get(i)), one byte per element.
template <class Get, class Code>
void write_bytes(const compute_context& ctx, std::uint8_t* out, std::size_t n, const Get& get, const Code& code) {
  parallel_elements(ctx, n, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) out[i] = code(get(i));
  });
}
// Packed elements of Bits bits: each byte is assembled whole (the padding bits of the last one are zero), so that
// threads write disjoint bytes.
template <int Bits, class Get, class Code>
void write_packed(const compute_context& ctx, std::uint8_t* out, std::size_t n, const Get& get, const Code& code) {
  constexpr std::size_t per = 8 / Bits;
  constexpr unsigned mask = (1u << Bits) - 1;
  parallel_elements(ctx, (n + per - 1) / per, [&](std::size_t b, std::size_t e) {
    for (std::size_t k = b; k < e; ++k) {
      const std::size_t i0 = k * per, m = std::min(per, n - i0);
      unsigned byte = 0;
      for (std::size_t j = 0; j < m; ++j) byte |= (static_cast<unsigned>(code(get(i0 + j))) & mask) << (j * Bits);
      out[k] = static_cast<std::uint8_t>(byte);
    }
  });
}

// y (of a small type) from the values get(i).
template <class Get>
void write_small(const compute_context& ctx, tensor& y, const Get& get, const cast_options& o) {
  auto* out = reinterpret_cast<std::uint8_t*>(y.mutable_data());
  const std::size_t n = y.element_count();
  const bool sat = o.saturate, inf_nan = o.fnuz_inf_nan;
  switch (y.type()) {
    case element_type::float8e4m3fn:
      write_bytes(ctx, out, n, get, [&](auto v) { return sf::from_float<sf::f8::e4m3fn>(value_as_float(v), sat); });
      break;
    case element_type::float8e4m3fnuz:
      write_bytes(ctx, out, n, get,
                  [&](auto v) { return sf::from_float<sf::f8::e4m3fnuz>(value_as_float(v), sat, inf_nan); });
      break;
    case element_type::float8e5m2:
      write_bytes(ctx, out, n, get, [&](auto v) { return sf::from_float<sf::f8::e5m2>(value_as_float(v), sat); });
      break;
    case element_type::float8e5m2fnuz:
      write_bytes(ctx, out, n, get,
                  [&](auto v) { return sf::from_float<sf::f8::e5m2fnuz>(value_as_float(v), sat, inf_nan); });
      break;
    case element_type::float8e8m0:
      write_bytes(ctx, out, n, get, [&](auto v) { return sf::e8m0_from_float(value_as_float(v), o.round, sat); });
      break;
    case element_type::float4e2m1:
      write_packed<4>(ctx, out, n, get, [](auto v) { return sf::float4_from_float(value_as_float(v)); });
      break;
    case element_type::int4:
    case element_type::uint4: write_packed<4>(ctx, out, n, get, [](auto v) { return value_as_int(v); }); break;
    case element_type::int2:
    case element_type::uint2: write_packed<2>(ctx, out, n, get, [](auto v) { return value_as_int(v); }); break;
    default: break;
  }
}

// Cast where the source or the target (or both) is a small type.
Status cast_small(compute_context& ctx, element_type to, const cast_options& o) {
  const tensor& x = ctx.input(0);
  const element_type from = x.type();
  if (!castable(from) || !castable(to)) return invalid(cat("cannot cast from ", to_string(from), " to ", to_string(to)));
  tensor& y = ctx.allocate_output(0, to, x.sizes());
  const std::size_t n = x.element_count();
  if (from == element_type::string) {  // parsed as float, or as an integer for the packed integers
    const std::string* in = x.typed<std::string>();
    const auto parse = [&](auto& values) -> Status {
      values.resize(n);
      for (std::size_t i = 0; i < n; ++i)
        if (!from_text(in[i], values[i]))
          return invalid(cat("element ", num(static_cast<std::int64_t>(i)), " (\"", in[i], "\") is not a ", to_string(to),
                             " value"));
      write_small(ctx, y, typed_reader<std::remove_reference_t<decltype(values[0])>>{values.data()}, o);
      return {};
    };
    if (sf::is_packed_int(to)) {
      std::vector<std::int64_t> v;
      return parse(v);
    }
    std::vector<float> v;
    return parse(v);
  }
  if (!is_small(from)) {
    dispatch<EPSTACK_ALL_POD_TYPES>(from, [&](auto tag) {
      using T = typename decltype(tag)::type;
      write_small(ctx, y, typed_reader<T>{x.typed<T>()}, o);
    });
    return {};
  }
  with_small_reader(x, [&](auto get) {
    if (is_small(to)) {
      write_small(ctx, y, get, o);
    } else if (to == element_type::string) {
      std::string* out = y.typed<std::string>();
      for (std::size_t i = 0; i < n; ++i) out[i] = to_text(get(i));
    } else {
      dispatch<EPSTACK_ALL_POD_TYPES>(to, [&](auto tag) {
        using To = typename decltype(tag)::type;
        To* out = y.typed<To>();
        parallel_elements(ctx, n, [&](std::size_t b, std::size_t e) {
          for (std::size_t i = b; i < e; ++i) out[i] = convert<To>(get(i));
        });
      });
    }
  });
  return {};
}

template <class To>
Status cast_run(compute_context& ctx, const cast_options& opt) {
  const tensor& x = ctx.input(0);
  constexpr element_type to = element_type_of_v<To>;
  if (x.type() == to) {
    set_view(ctx, x.sizes());
    return {};
  }
  if (is_small(x.type())) return cast_small(ctx, to, opt);
  const bool truncate_bf16 = opt.truncate_bf16;
  Status st;
  const bool ok = dispatch<EPSTACK_ALL_POD_TYPES, std::string>(x.type(), [&](auto tag) {
    using From = typename decltype(tag)::type;
    tensor& y = ctx.allocate_output(0, to, x.sizes());
    const From* in = x.typed<From>();
    To* out = y.typed<To>();
    const std::size_t n = x.element_count();
    if constexpr (std::is_same_v<From, To>) {
      std::copy_n(in, n, out);
    } else if constexpr (std::is_same_v<From, std::string>) {
      for (std::size_t i = 0; i < n; ++i)
        if (!from_text(in[i], out[i])) {
          st = invalid(cat("element ", num(static_cast<std::int64_t>(i)), " (\"", in[i], "\") is not a ",
                           to_string(to), " value"));
          return;
        }
    } else if constexpr (std::is_same_v<To, std::string>) {
      for (std::size_t i = 0; i < n; ++i) out[i] = to_text(in[i]);
    } else {
      if constexpr (std::is_same_v<To, bfloat16>) {
        if (truncate_bf16) {
          parallel_elements(ctx, n, [&](std::size_t b, std::size_t e) {
            for (std::size_t i = b; i < e; ++i) out[i] = to_bfloat16_truncated(in[i]);
          });
          return;
        }
      }
      parallel_elements(ctx, n, [&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) out[i] = convert<To>(in[i]);
      });
    }
  });
  if (!ok) return invalid(cat("cannot cast from ", to_string(x.type())));
  return st;
}

// The element type a Cast-1 `to` string names: a TensorProto.DataType name ("FLOAT", "INT64"), in any case.
element_type type_from_name(std::string name) {
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static constexpr std::pair<std::string_view, element_type> names[] = {
      {"FLOAT", element_type::float32},   {"UINT8", element_type::uint8},   {"INT8", element_type::int8},
      {"UINT16", element_type::uint16},   {"INT16", element_type::int16},   {"INT32", element_type::int32},
      {"INT64", element_type::int64},     {"STRING", element_type::string}, {"BOOL", element_type::boolean},
      {"FLOAT16", element_type::float16}, {"DOUBLE", element_type::float64}, {"UINT32", element_type::uint32},
      {"UINT64", element_type::uint64},   {"BFLOAT16", element_type::bfloat16}, {"FLOAT32", element_type::float32},
      {"FLOAT64", element_type::float64}};
  for (const auto& [s, e] : names)
    if (s == name) return e;
  return element_type::undefined;
}

element_type cast_target(const node& nd) {
  if (nd.since_version < 6) return type_from_name(attr_s(nd, "to"));
  const std::int64_t to = attr_i(nd, "to", 0);
  return to >= 1 && to <= max_element_type ? static_cast<element_type>(to) : element_type::undefined;
}

// Cast to `to`, any source type.
Status cast_any(compute_context& ctx, element_type to, const cast_options& o) {
  const tensor& x = ctx.input(0);
  if (x.type() == to) {
    set_view(ctx, x.sizes());
    return {};
  }
  if (is_small(to) || is_small(x.type())) return cast_small(ctx, to, o);
  Status st = invalid(cat("cannot cast to ", to_string(to)));
  dispatch<EPSTACK_ALL_POD_TYPES, std::string>(to, [&](auto tag) { st = cast_run<typename decltype(tag)::type>(ctx, o); });
  return st;
}

// The attributes of Cast and CastLike: `saturate` from opset 19, `round_mode` from opset 24.
Result<cast_options> cast_options_of(const node& nd, std::string_view op) {
  cast_options o;
  o.truncate_bf16 = nd.since_version < 19;
  o.fnuz_inf_nan = nd.since_version < 24;
  if (nd.since_version >= 19) o.saturate = attr_i(nd, "saturate", 1) != 0;
  if (nd.since_version >= 24 || has_attr(nd, "round_mode")) {
    const std::string m = attr_s(nd, "round_mode", "up");
    if (m == "up") o.round = sf::e8m0_round::up;
    else if (m == "down") o.round = sf::e8m0_round::down;
    else if (m == "nearest") o.round = sf::e8m0_round::nearest;
    else return invalid(cat(op, ": attribute 'round_mode' must be \"up\", \"down\" or \"nearest\", not \"", m, "\""));
  }
  return o;
}

}  // namespace
}  // namespace impl

// ---------------------------------------------------------------------------------------------------------------
// The kernel types.

namespace ops {
using namespace impl;

// Cast: every pair of numeric, bool, float16, bfloat16 and string types (`to` is a type name before opset 6).
bool cast::supports(const graph& g, node_id n) {
  const auto from = in_type(g, n, 0);
  return tensor_input(g, n, 0) && castable(cast_target(g.node(n))) && (from == element_type::undefined || castable(from));
}
Result<compute_function> cast::compile(const graph& g, node_id n) {
  const element_type to = cast_target(g.node(n));
  EPSTACK_ASSIGN_OR_RETURN(const cast_options o, cast_options_of(g.node(n), "Cast"));
  if (is_small(to)) return make_fn("Cast", [to, o](compute_context& ctx) { return cast_any(ctx, to, o); });
  Result<compute_function> r = invalid(cat("Cast to ", to_string(to), " is not supported"));
  dispatch<EPSTACK_ALL_POD_TYPES, std::string>(to, [&](auto tag) {
    using To = typename decltype(tag)::type;
    r = make_fn("Cast", [o](compute_context& ctx) { return cast_run<To>(ctx, o); });
  });
  return r;
}

// CastLike: Cast to the element type of input 1 (whose values are not read), with Cast's attributes.
bool cast_like::supports(const graph& g, node_id n) {
  const auto from = in_type(g, n, 0), to = in_type(g, n, 1);
  return tensor_input(g, n, 0) && tensor_input(g, n, 1) && (from == element_type::undefined || castable(from)) &&
         (to == element_type::undefined || castable(to));
}
Result<compute_function> cast_like::compile(const graph& g, node_id n) {
  EPSTACK_ASSIGN_OR_RETURN(const cast_options o, cast_options_of(g.node(n), "CastLike"));
  return make_fn("CastLike", [o](compute_context& ctx) -> Status {
    if (!ctx.has_input(1)) return op_error("CastLike", "the target_type input is missing");
    const element_type to = ctx.input(1).type();
    if (!castable(to)) return op_error("CastLike", cat("cannot cast to ", to_string(to)));
    return cast_any(ctx, to, o);
  });
}

}  // namespace ops
}  // namespace epstack::cpu
