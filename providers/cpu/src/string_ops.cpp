// String kernels of opset 20: StringConcat (broadcasting), StringSplit (Python str.split semantics, padded output)
// and RegexFullMatch (RE2).
#include "broadcast.hpp"
#include "kernel_util.hpp"

#include <re2/re2.h>

#include <memory>

namespace epstack::cpu {
namespace impl {
namespace {

/// Byte length of the whitespace character starting at s[i] (what Python's str.isspace() accepts, read as UTF-8),
/// or 0 when s[i] does not start one.
std::size_t space_len(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const unsigned c = b(0);
  if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
  if (c == 0xc2 && (b(1) == 0x85 || b(1) == 0xa0)) return 2;                  // U+0085, U+00A0
  if (c == 0xe1 && b(1) == 0x9a && b(2) == 0x80) return 3;                    // U+1680
  if (c == 0xe2 && b(1) == 0x80 && (b(2) <= 0x8a || b(2) == 0xa8 || b(2) == 0xa9 || b(2) == 0xaf) && b(2) >= 0x80)
    return 3;                                                                 // U+2000-200A, 2028, 2029, 202F
  if (c == 0xe2 && b(1) == 0x81 && b(2) == 0x9f) return 3;                    // U+205F
  if (c == 0xe3 && b(1) == 0x80 && b(2) == 0x80) return 3;                    // U+3000
  return 0;
}

/// Splits `s` like Python's s.split(None, maxsplit): runs of whitespace separate, leading and trailing whitespace
/// dropped, at most `maxsplit` splits (negative: no limit), the rest kept whole (with its trailing whitespace).
void split_whitespace(std::string_view s, std::int64_t maxsplit, std::vector<std::string_view>& out) {
  std::size_t i = 0;
  const std::size_t n = s.size();
  const auto skip = [&] {
    while (i < n) {
      const std::size_t w = space_len(s, i);
      if (w == 0) break;
      i += w;
    }
  };
  for (std::int64_t left = maxsplit; left != 0; left = left > 0 ? left - 1 : left) {
    skip();
    if (i == n) return;
    const std::size_t j = i;
    while (i < n && space_len(s, i) == 0) ++i;
    out.push_back(s.substr(j, i - j));
  }
  skip();
  if (i < n) out.push_back(s.substr(i));
}

/// Splits `s` like Python's s.split(sep, maxsplit): every occurrence of `sep` separates (consecutive ones delimit
/// empty strings), at most `maxsplit` splits (negative: no limit).
void split_on(std::string_view s, std::string_view sep, std::int64_t maxsplit, std::vector<std::string_view>& out) {
  std::size_t i = 0;
  for (std::int64_t left = maxsplit; left != 0; left = left > 0 ? left - 1 : left) {
    const std::size_t at = s.find(sep, i);
    if (at == std::string_view::npos) break;
    out.push_back(s.substr(i, at - i));
    i = at + sep.size();
  }
  out.push_back(s.substr(i));
}

}  // namespace
}  // namespace impl

namespace ops {
using namespace impl;

// ---- StringConcat: Z = X + Y element-wise, numpy broadcasting ----
bool string_concat::supports(const graph& g, node_id n) {
  return in_type(g, n, 0) == element_type::string && in_type(g, n, 1) == element_type::string;
}
Result<compute_function> string_concat::compile(const graph&, node_id) {
  return make_fn("StringConcat", [](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    const tensor& y = ctx.input(1);
    if (x.type() != element_type::string) return op_error("StringConcat", "input X must be a string tensor");
    if (y.type() != element_type::string) return op_error("StringConcat", "input Y must be a string tensor");
    auto shape = broadcast_shape(x.sizes(), y.sizes());
    if (!shape.has_value())
      return op_error("StringConcat", cat("inputs X ", dims_string(x.sizes()), " and Y ", dims_string(y.sizes()),
                                          " cannot be broadcast: ", shape.status().message()));
    tensor& z = ctx.allocate_output(0, element_type::string, *shape);
    if (z.element_count() == 0) return {};
    const broadcast_plan<2> plan(*shape, {x.sizes(), y.sizes()});
    const std::string* px = x.typed<std::string>();
    const std::string* py = y.typed<std::string>();
    std::string* pz = z.typed<std::string>();
    for (std::int64_t r = 0; r < plan.rows; ++r) {
      const auto off = plan.row_offsets(r);
      for (std::int64_t j = 0; j < plan.inner; ++j) {
        const std::string& a = px[off[0] + j * plan.inner_stride[0]];
        const std::string& b = py[off[1] + j * plan.inner_stride[1]];
        std::string& o = pz[r * plan.inner + j];
        o.reserve(a.size() + b.size());
        o.assign(a).append(b);
      }
    }
    return {};
  });
}

// ---- StringSplit: Y = X's elements split (padded with "" to the longest), Z = the number of pieces of each ----
bool string_split::supports(const graph& g, node_id n) { return in_type(g, n, 0) == element_type::string; }
Result<compute_function> string_split::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (const auto* a = attr(nd, "delimiter"); a != nullptr && !std::holds_alternative<std::string>(a->value))
    return invalid("StringSplit: attribute 'delimiter' must be a string");
  if (const auto* a = attr(nd, "maxsplit"); a != nullptr && !std::holds_alternative<std::int64_t>(a->value))
    return invalid("StringSplit: attribute 'maxsplit' must be an int");
  const std::string delimiter = attr_s(nd, "delimiter", "");
  const std::int64_t maxsplit = attr_i(nd, "maxsplit", -1);
  return make_fn("StringSplit", [delimiter, maxsplit](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (x.type() != element_type::string) return op_error("StringSplit", "input X must be a string tensor");
    const std::size_t count = x.element_count();
    const std::string* px = x.typed<std::string>();
    std::vector<std::string_view> pieces;
    std::vector<std::size_t> start(count + 1, 0);  // pieces of element i: [start[i], start[i + 1])
    std::size_t widest = 0;
    for (std::size_t i = 0; i < count; ++i) {
      if (delimiter.empty()) split_whitespace(px[i], maxsplit, pieces);
      else split_on(px[i], delimiter, maxsplit, pieces);
      start[i + 1] = pieces.size();
      widest = std::max(widest, start[i + 1] - start[i]);
    }
    std::vector<std::int64_t> ydims(x.sizes().begin(), x.sizes().end());
    ydims.push_back(static_cast<std::int64_t>(widest));
    tensor& y = ctx.allocate_output(0, element_type::string, ydims);
    std::string* py = y.typed<std::string>();
    std::int64_t* pz = ctx.output_count() > 1 ? ctx.allocate_output(1, element_type::int64, x.sizes()).typed<std::int64_t>() : nullptr;
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t k = start[i + 1] - start[i];
      for (std::size_t j = 0; j < widest; ++j) {
        if (j < k) py[i * widest + j].assign(pieces[start[i] + j]);
        else py[i * widest + j].clear();
      }
      if (pz != nullptr) pz[i] = static_cast<std::int64_t>(k);
    }
    return {};
  });
}

// ---- RegexFullMatch: Y[i] = X[i] matches the RE2 pattern in full ----
bool regex_full_match::supports(const graph& g, node_id n) { return in_type(g, n, 0) == element_type::string; }
Result<compute_function> regex_full_match::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const auto* a = attr(nd, "pattern");
  if (a == nullptr) return invalid("RegexFullMatch: the attribute 'pattern' is required");
  const auto* pattern = std::get_if<std::string>(&a->value);
  if (pattern == nullptr) return invalid("RegexFullMatch: attribute 'pattern' must be a string");
  RE2::Options options;
  options.set_log_errors(false);
  auto re = std::make_shared<const RE2>(*pattern, options);
  if (!re->ok())
    return invalid(cat("RegexFullMatch: attribute 'pattern' (\"", *pattern, "\") is not a valid RE2 pattern: ", re->error()));
  return make_fn("RegexFullMatch", [re](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (x.type() != element_type::string) return op_error("RegexFullMatch", "input X must be a string tensor");
    tensor& y = ctx.allocate_output(0, element_type::boolean, x.sizes());
    const std::string* px = x.typed<std::string>();
    bool* py = y.typed<bool>();
    // A const RE2 may be shared by threads.
    parallel_items(ctx, x.element_count(), 256, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) py[i] = RE2::FullMatch(px[i], *re);
    });
    return {};
  });
}

}  // namespace ops
}  // namespace epstack::cpu
