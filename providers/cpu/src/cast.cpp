// Cast between every pair of numeric, bool, float16, bfloat16 and string types.
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

template <class To>
Status cast_run(compute_context& ctx, bool truncate_bf16) {
  const tensor& x = ctx.input(0);
  constexpr element_type to = element_type_of_v<To>;
  if (x.type() == to) {
    set_view(ctx, x.sizes());
    return {};
  }
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
bool castable(element_type e) {
  return is_valid(e) && e != element_type::complex64 && e != element_type::complex128;
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
  Result<compute_function> r = invalid(cat("Cast to ", to_string(to), " is not supported"));
  dispatch<EPSTACK_ALL_POD_TYPES, std::string>(to, [&](auto tag) {
    using To = typename decltype(tag)::type;
    const bool truncate_bf16 = g.node(n).since_version < 19;
    r = make_fn("Cast", [truncate_bf16](compute_context& ctx) { return cast_run<To>(ctx, truncate_bf16); });
  });
  return r;
}

}  // namespace ops
}  // namespace epstack::cpu
