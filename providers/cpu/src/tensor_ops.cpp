// Shape, layout and data-movement kernels: Reshape, Flatten, Squeeze, Unsqueeze, Identity and Dropout (views of their
// input: no copy), Shape, Size, Transpose, Concat, Split, Slice, Gather, Expand, Cast, Constant, ConstantOfShape and
// Range. Data movement dispatches on the element size at run time (strings element by element), so one instantiation
// serves every type of a size; Transpose collapses dimensions and copies contiguous runs or cache-sized tiles; large
// copies are split across the intra-op threads.
#include "broadcast.hpp"
#include "kernel_util.hpp"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <numeric>

namespace epstack::cpu {
namespace impl {
namespace {

std::string num(std::int64_t v) { return std::to_string(v); }
Status invalid(std::string message) { return Status(errc::invalid_argument, std::move(message)); }

// a * b, false on overflow.
bool mul_ok(std::int64_t a, std::int64_t b, std::int64_t& r) { return !__builtin_mul_overflow(a, b, &r); }

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
Status bad_type(element_type e) { return invalid(cat("unsupported element type ", to_string(e))); }

// Copying an element costs about a quarter of an element-wise operation (parallel_items' unit), so copies are split
// across the threads only when large (about 64k elements per chunk): waking threads costs more than small copies.
std::size_t copy_cost(std::int64_t elements) { return static_cast<std::size_t>(std::max<std::int64_t>(elements / 4, 1)); }

// Copies n contiguous elements, split across the threads when large.
template <class U>
void copy_elements(const compute_context& ctx, const U* src, std::size_t n, U* dst) {
  constexpr std::size_t block = 1024;
  parallel_items(ctx, (n + block - 1) / block, copy_cost(block), [&](std::size_t b, std::size_t e) {
    std::copy(src + b * block, src + std::min(e * block, n), dst + b * block);
  });
}

// A copy from a strided source into a contiguous destination: output dims and the source stride of each (0 for a
// broadcast dim, negative for a reversed one). Adjacent dims that stay adjacent in the source are merged and size-1
// dims dropped, so that the innermost loop is as long as possible.
struct strided_plan {
  sizes_t dims, strides;
  std::int64_t rows = 1, inner = 1, inner_stride = 0;

  strided_plan(std::span<const std::int64_t> d, std::span<const std::int64_t> s) {
    for (std::size_t i = 0; i < d.size(); ++i) {
      if (d[i] == 1) continue;
      if (!dims.empty() && strides.back() == s[i] * d[i]) {
        dims.back() *= d[i];
        strides.back() = s[i];
      } else {
        dims.push_back(d[i]);
        strides.push_back(s[i]);
      }
    }
    if (dims.empty()) {
      dims.push_back(1);
      strides.push_back(0);
    }
    inner = dims.back();
    inner_stride = strides.back();
    for (std::size_t i = 0; i + 1 < dims.size(); ++i) rows *= dims[i];
  }
};

template <class U>
void strided_copy(const compute_context& ctx, const U* src, const strided_plan& p, U* dst) {
  const std::size_t outer_rank = p.dims.size() - 1;
  const std::int64_t inner = p.inner, is = p.inner_stride;
  const std::size_t cost = is == 0 || is == 1 ? copy_cost(inner) : static_cast<std::size_t>(inner);
  parallel_items(ctx, static_cast<std::size_t>(p.rows), cost, [&](std::size_t r0, std::size_t r1) {
    sizes_t idx(outer_rank, 0);
    std::int64_t off = 0;
    auto rest = static_cast<std::int64_t>(r0);
    for (std::size_t i = outer_rank; i-- > 0;) {
      idx[i] = rest % p.dims[i];
      rest /= p.dims[i];
      off += idx[i] * p.strides[i];
    }
    for (std::size_t r = r0; r < r1; ++r) {
      U* out = dst + static_cast<std::int64_t>(r) * inner;
      const U* in = src + off;
      if (is == 1) std::copy(in, in + inner, out);
      else if (is == 0) std::fill(out, out + inner, *in);
      else
        for (std::int64_t j = 0; j < inner; ++j) out[j] = in[j * is];
      for (std::size_t i = outer_rank; i-- > 0;) {  // next row: odometer over the outer dims
        off += p.strides[i];
        if (++idx[i] < p.dims[i]) break;
        off -= p.strides[i] * p.dims[i];
        idx[i] = 0;
      }
    }
  });
}

// Contiguous strides of `d`.
sizes_t contiguous_strides(std::span<const std::int64_t> d) {
  sizes_t s(d.size(), 1);
  for (std::size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

// ---------------------------------------------------------------------------------------------------------------
// Transpose

// Four 4-byte lanes (GCC and Clang vector extensions: SSE, NEON or plain code, whatever the target has).
using lanes4 = std::uint32_t __attribute__((vector_size(16)));

// out[i * oa + j] = in[j * sb + i] for a 4x4 block of 4-byte elements, in registers.
inline void transpose4x4(const unit<4>* in, std::int64_t sb, unit<4>* out, std::int64_t oa) {
  lanes4 r0, r1, r2, r3;
  std::memcpy(&r0, in, 16);
  std::memcpy(&r1, in + sb, 16);
  std::memcpy(&r2, in + 2 * sb, 16);
  std::memcpy(&r3, in + 3 * sb, 16);
  const lanes4 t0 = __builtin_shufflevector(r0, r1, 0, 4, 1, 5), t1 = __builtin_shufflevector(r0, r1, 2, 6, 3, 7);
  const lanes4 t2 = __builtin_shufflevector(r2, r3, 0, 4, 1, 5), t3 = __builtin_shufflevector(r2, r3, 2, 6, 3, 7);
  const lanes4 o0 = __builtin_shufflevector(t0, t2, 0, 1, 4, 5), o1 = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
  const lanes4 o2 = __builtin_shufflevector(t1, t3, 0, 1, 4, 5), o3 = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
  std::memcpy(out, &o0, 16);
  std::memcpy(out + oa, &o1, 16);
  std::memcpy(out + 2 * oa, &o2, 16);
  std::memcpy(out + 3 * oa, &o3, 16);
}

// out[i * oa + j] = in[j * sb + i] for i in [i0, i1), j in [j0, j1): 16x16 sub-tiles (a few cache lines each, whatever
// the strides' alignment), 4x4 register blocks for 4-byte elements.
template <class U>
void transpose_block(const U* in, std::int64_t sb, U* out, std::int64_t oa, std::int64_t i0, std::int64_t i1,
                     std::int64_t j0, std::int64_t j1) {
  constexpr std::int64_t sub = 16;
  for (std::int64_t ii = i0; ii < i1; ii += sub)
    for (std::int64_t jj = j0; jj < j1; jj += sub) {
      const std::int64_t ie = std::min(ii + sub, i1), je = std::min(jj + sub, j1);
      std::int64_t i = ii;
      if constexpr (std::is_same_v<U, unit<4>>) {
        for (; i + 4 <= ie; i += 4) {
          std::int64_t j = jj;
          for (; j + 4 <= je; j += 4) transpose4x4(in + j * sb + i, sb, out + i * oa + j, oa);
          for (; j < je; ++j)
            for (std::int64_t k = i; k < i + 4; ++k) out[k * oa + j] = in[j * sb + k];
        }
      }
      for (; i < ie; ++i)
        for (std::int64_t j = jj; j < je; ++j) out[i * oa + j] = in[j * sb + i];
    }
}

template <class U>
void transpose_into(const compute_context& ctx, const U* src, std::span<const std::int64_t> in,
                    std::span<const std::size_t> perm, U* dst, std::size_t count) {
  // Drop size-1 dims: they move nothing.
  std::vector<std::size_t> new_axis(in.size(), SIZE_MAX);
  sizes_t d;
  for (std::size_t i = 0; i < in.size(); ++i)
    if (in[i] != 1) {
      new_axis[i] = d.size();
      d.push_back(in[i]);
    }
  std::vector<std::size_t> p;
  for (std::size_t a : perm)
    if (new_axis[a] != SIZE_MAX) p.push_back(new_axis[a]);
  // Merge runs of output axes that are consecutive input axes: groups (first input axis, count), in output order.
  std::vector<std::pair<std::size_t, std::size_t>> groups;
  for (std::size_t a : p) {
    if (!groups.empty() && groups.back().first + groups.back().second == a) ++groups.back().second;
    else groups.emplace_back(a, 1);
  }
  const std::size_t r = groups.size();
  if (r <= 1) {
    copy_elements(ctx, src, count, dst);
    return;
  }
  std::vector<std::size_t> order(r), input_rank(r);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return groups[x].first < groups[y].first; });
  for (std::size_t j = 0; j < r; ++j) input_rank[order[j]] = j;
  sizes_t nd(r, 1);  // merged input dims
  for (std::size_t k = 0; k < r; ++k)
    nd[input_rank[k]] = product(d, groups[k].first, groups[k].first + groups[k].second);
  const std::vector<std::size_t>& np = input_rank;  // output axis k is merged input axis np[k]
  const sizes_t is = contiguous_strides(nd);
  sizes_t od(r, 1);
  for (std::size_t k = 0; k < r; ++k) od[k] = nd[np[k]];
  const sizes_t os = contiguous_strides(od);

  if (np[r - 1] == r - 1) {
    // The innermost dim stays innermost: copy contiguous runs.
    sizes_t s(r, 0);
    for (std::size_t k = 0; k < r; ++k) s[k] = is[np[k]];
    strided_copy(ctx, src, strided_plan(od, s), dst);
    return;
  }
  // Tiles: the input's innermost dim (output axis a) against the output's innermost dim (input stride sb), so that
  // both reads and writes stay within a few cache lines; other dims are outer loops.
  std::size_t a = 0;
  while (np[a] != r - 1) ++a;
  const std::int64_t dim_a = od[a], dim_b = od[r - 1], sb = is[np[r - 1]], oa = os[a];
  sizes_t outer_dims, outer_in, outer_out;
  for (std::size_t k = 0; k + 1 < r; ++k)
    if (k != a) {
      outer_dims.push_back(od[k]);
      outer_in.push_back(is[np[k]]);
      outer_out.push_back(os[k]);
    }
  const std::int64_t outer = product(outer_dims);
  constexpr std::int64_t tile = 64;
  const std::int64_t ti = (dim_a + tile - 1) / tile, tj = (dim_b + tile - 1) / tile;
  parallel_items(ctx, static_cast<std::size_t>(outer * ti * tj), static_cast<std::size_t>(tile * tile),
                 [&](std::size_t b, std::size_t e) {
                   for (auto item = static_cast<std::int64_t>(b); item < static_cast<std::int64_t>(e); ++item) {
                     const std::int64_t jb = item % tj, ib = (item / tj) % ti;
                     std::int64_t o = item / tj / ti, in_off = 0, out_off = 0;
                     for (std::size_t k = outer_dims.size(); k-- > 0;) {
                       const std::int64_t x = o % outer_dims[k];
                       o /= outer_dims[k];
                       in_off += x * outer_in[k];
                       out_off += x * outer_out[k];
                     }
                     const std::int64_t i0 = ib * tile, j0 = jb * tile;
                     transpose_block(src + in_off, sb, dst + out_off, oa, i0, std::min(i0 + tile, dim_a), j0,
                                     std::min(j0 + tile, dim_b));
                   }
                 });
}

Status transpose_run(compute_context& ctx, const std::vector<std::int64_t>& perm_attr, bool has_perm) {
  const tensor& x = ctx.input(0);
  const std::size_t r = x.rank();
  std::vector<std::size_t> perm(r);
  if (!has_perm) {
    for (std::size_t i = 0; i < r; ++i) perm[i] = r - 1 - i;
  } else {
    if (perm_attr.size() != r)
      return invalid(cat("perm ", dims_string(perm_attr), " has ", num(static_cast<std::int64_t>(perm_attr.size())),
                         " entries but the input has rank ", num(static_cast<std::int64_t>(r))));
    std::vector<bool> seen(r, false);
    for (std::size_t i = 0; i < r; ++i) {
      const std::int64_t v = perm_attr[i];
      if (v < 0 || v >= static_cast<std::int64_t>(r) || seen[static_cast<std::size_t>(v)])
        return invalid(cat("perm ", dims_string(perm_attr), " is not a permutation of the axes [0, ",
                           num(static_cast<std::int64_t>(r)), ")"));
      seen[static_cast<std::size_t>(v)] = true;
      perm[i] = static_cast<std::size_t>(v);
    }
  }
  sizes_t out(r, 0);
  for (std::size_t i = 0; i < r; ++i) out[i] = x.sizes()[perm[i]];
  if (!dispatch_move(x.type(), [&](auto tag) {
        using U = typename decltype(tag)::type;
        tensor& y = ctx.allocate_output(0, x.type(), out);
        if (y.element_count() != 0) transpose_into<U>(ctx, elems<U>(x), x.sizes(), perm, elems<U>(y), y.element_count());
      }))
    return bad_type(x.type());
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// Integer lists from inputs and attributes

// A 0-D or 1-D int64 or int32 tensor as int64s.
Result<std::vector<std::int64_t>> ints_of(const tensor& t, std::string_view what) {
  if (t.type() != element_type::int64 && t.type() != element_type::int32)
    return invalid(cat(what, " must be an int64 or int32 tensor, not ", to_string(t.type())));
  if (t.rank() > 1) return invalid(cat(what, " must be 1-D, but has shape ", dims_string(t.sizes())));
  return to_int64s(t);
}

// An axis in [-rank, rank), negative only when the opset allows it.
Result<std::size_t> axis_of(std::int64_t axis, std::size_t rank, bool negative_ok, std::string_view what = "axis") {
  if (axis < 0 && !negative_ok)
    return invalid(cat(what, " ", num(axis), " is negative, which this opset does not allow (from opset 11)"));
  const auto a = normalize_axis(axis, rank);
  if (!a) return invalid(cat(what, " ", num(axis), " is out of range for rank ", num(static_cast<std::int64_t>(rank))));
  return *a;
}

// ---------------------------------------------------------------------------------------------------------------
// Reshape and friends: views

void set_view(compute_context& ctx, std::span<const std::int64_t> sizes) {
  ctx.output(0) = ctx.input(0).reshaped(sizes);
}

Result<sizes_t> reshape_sizes(std::span<const std::int64_t> in, std::span<const std::int64_t> spec, bool allowzero) {
  sizes_t out(spec.size(), 0);
  std::int64_t known = 1;
  std::optional<std::size_t> infer;
  for (std::size_t i = 0; i < spec.size(); ++i) {
    const std::int64_t d = spec[i];
    if (d == -1) {
      if (infer) return invalid(cat("the shape ", dims_string(spec), " has more than one -1"));
      infer = i;
      continue;
    }
    if (d < -1) return invalid(cat("the shape ", dims_string(spec), " has a negative dimension ", num(d)));
    if (d == 0 && !allowzero) {
      if (i >= in.size())
        return invalid(cat("the shape ", dims_string(spec), " copies dimension ", num(static_cast<std::int64_t>(i)),
                           " (0) of an input of rank ", num(static_cast<std::int64_t>(in.size()))));
      out[i] = in[i];
    } else {
      out[i] = d;
    }
    if (!mul_ok(known, out[i], known)) return invalid(cat("the shape ", dims_string(spec), " is too large"));
  }
  const std::int64_t count = product(in);
  if (infer) {
    if (known == 0 || count % known != 0)
      return invalid(cat("cannot reshape ", dims_string(in), " to ", dims_string(spec), ": the -1 dimension cannot be inferred"));
    out[*infer] = count / known;
  } else if (known != count) {
    return invalid(cat("cannot reshape ", dims_string(in), " (", num(count), " elements) to ", dims_string(out), " (",
                       num(known), " elements)"));
  }
  return out;
}

Status squeeze_run(compute_context& ctx, const std::vector<std::int64_t>& axes, bool negative_ok) {
  const tensor& x = ctx.input(0);
  const auto in = x.sizes();
  std::vector<bool> drop(in.size(), false);
  if (axes.empty()) {
    for (std::size_t i = 0; i < in.size(); ++i) drop[i] = in[i] == 1;
  } else {
    for (std::int64_t a : axes) {
      EPSTACK_ASSIGN_OR_RETURN(const std::size_t ax, axis_of(a, in.size(), negative_ok));
      if (in[ax] != 1)
        return invalid(cat("cannot squeeze axis ", num(a), ": its size is ", num(in[ax]), ", not 1 (input ",
                           dims_string(in), ")"));
      drop[ax] = true;
    }
  }
  sizes_t out;
  for (std::size_t i = 0; i < in.size(); ++i)
    if (!drop[i]) out.push_back(in[i]);
  set_view(ctx, out);
  return {};
}

Status unsqueeze_run(compute_context& ctx, const std::vector<std::int64_t>& axes, bool negative_ok) {
  const tensor& x = ctx.input(0);
  const auto in = x.sizes();
  const std::size_t r = in.size() + axes.size();
  std::vector<bool> inserted(r, false);
  for (std::int64_t a : axes) {
    EPSTACK_ASSIGN_OR_RETURN(const std::size_t ax, axis_of(a, r, negative_ok));
    if (inserted[ax]) return invalid(cat("axes ", dims_string(axes), " name axis ", num(a), " twice"));
    inserted[ax] = true;
  }
  sizes_t out(r, 1);
  for (std::size_t i = 0, k = 0; i < r; ++i)
    if (!inserted[i]) out[i] = in[k++];
  set_view(ctx, out);
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// Concat, Split, Slice, Gather, Expand

Status concat_run(compute_context& ctx, std::int64_t axis_attr, bool negative_ok) {
  const std::size_t k = ctx.input_count();
  if (k == 0) return invalid("Concat needs at least one input");
  const tensor& first = ctx.input(0);
  const std::size_t r = first.rank();
  EPSTACK_ASSIGN_OR_RETURN(const std::size_t axis, axis_of(axis_attr, r, negative_ok));
  sizes_t out(first.sizes().begin(), first.sizes().end());
  out[axis] = 0;
  for (std::size_t i = 0; i < k; ++i) {
    const tensor& t = ctx.input(i);
    if (t.type() != first.type())
      return invalid(cat("input ", num(static_cast<std::int64_t>(i)), " is ", to_string(t.type()), " but input 0 is ",
                         to_string(first.type())));
    bool same = t.rank() == r;
    for (std::size_t d = 0; same && d < r; ++d) same = d == axis || t.sizes()[d] == first.sizes()[d];
    if (!same)
      return invalid(cat("input ", num(static_cast<std::int64_t>(i)), " has shape ", dims_string(t.sizes()),
                         ", which does not match input 0's ", dims_string(first.sizes()), " outside axis ",
                         num(axis_attr)));
    out[axis] += t.sizes()[axis];
  }
  if (k == 1) {
    set_view(ctx, out);
    return {};
  }
  const std::int64_t outer = product(out, 0, axis), inner = product(out, axis + 1);
  const std::int64_t out_chunk = out[axis] * inner;
  if (!dispatch_move(first.type(), [&](auto tag) {
        using U = typename decltype(tag)::type;
        tensor& y = ctx.allocate_output(0, first.type(), out);
        U* dst = elems<U>(y);
        if (y.element_count() == 0) return;
        if (outer == 1) {
          std::int64_t off = 0;
          for (std::size_t i = 0; i < k; ++i) {
            const tensor& t = ctx.input(i);
            copy_elements(ctx, elems<U>(t), t.element_count(), dst + off);
            off += static_cast<std::int64_t>(t.element_count());
          }
          return;
        }
        std::vector<const U*> srcs(k);
        std::vector<std::int64_t> chunks(k), offs(k);
        for (std::size_t i = 0, off = 0; i < k; ++i) {
          srcs[i] = elems<U>(ctx.input(i));
          chunks[i] = ctx.input(i).sizes()[axis] * inner;
          offs[i] = static_cast<std::int64_t>(off);
          off += static_cast<std::size_t>(chunks[i]);
        }
        parallel_items(ctx, static_cast<std::size_t>(outer), copy_cost(out_chunk), [&](std::size_t b, std::size_t e) {
          for (auto o = static_cast<std::int64_t>(b); o < static_cast<std::int64_t>(e); ++o)
            for (std::size_t i = 0; i < k; ++i)
              std::copy_n(srcs[i] + o * chunks[i], chunks[i], dst + o * out_chunk + offs[i]);
        });
      }))
    return bad_type(first.type());
  return {};
}

// Numbers of any numeric tensor as int64 (Split-1's `split` input has the data's type).
Result<std::vector<std::int64_t>> counts_of(const tensor& t, std::string_view what) {
  if (t.type() == element_type::int64 || t.type() == element_type::int32) return ints_of(t, what);
  std::vector<std::int64_t> r;
  const bool ok = dispatch<float, double, float16>(t.type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = t.typed<T>();
    for (std::size_t i = 0; i < t.element_count(); ++i) r.push_back(static_cast<std::int64_t>(static_cast<double>(static_cast<float>(p[i]))));
  });
  if (!ok) return invalid(cat(what, " must be an integer tensor, not ", to_string(t.type())));
  return r;
}

struct split_params {
  int version = 13;
  std::int64_t axis = 0;
  std::optional<std::vector<std::int64_t>> split_attr;
};

Status split_run(compute_context& ctx, const split_params& sp) {
  const tensor& x = ctx.input(0);
  // (A negative axis is taken before opset 11 too: PyTorch's exporter wrote them, and they are unambiguous.)
  EPSTACK_ASSIGN_OR_RETURN(const std::size_t axis, axis_of(sp.axis, x.rank(), true));
  const std::int64_t dim = x.sizes()[axis];
  const std::size_t n = ctx.output_count();
  if (n == 0) return invalid("Split has no outputs");
  std::vector<std::int64_t> parts;
  const bool split_input = (sp.version >= 13 || sp.version == 1) && ctx.has_input(1) && ctx.input(1).element_count() > 0;
  if (split_input) {
    EPSTACK_ASSIGN_OR_RETURN(parts, counts_of(ctx.input(1), "the split input"));
  } else if (sp.split_attr && !sp.split_attr->empty()) {
    parts = *sp.split_attr;
  } else {
    const auto nn = static_cast<std::int64_t>(n);
    if (dim % nn != 0 && sp.version < 18)
      return invalid(cat("axis ", num(sp.axis), " of size ", num(dim), " cannot be split into ", num(nn), " equal parts"));
    const std::int64_t chunk = (dim + nn - 1) / nn;  // opset 18: the last part is smaller
    for (std::size_t i = 0; i < n; ++i) parts.push_back(std::min(chunk, std::max<std::int64_t>(dim - chunk * static_cast<std::int64_t>(i), 0)));
  }
  if (parts.size() != n)
    return invalid(cat("split ", dims_string(parts), " has ", num(static_cast<std::int64_t>(parts.size())),
                       " entries but the node has ", num(static_cast<std::int64_t>(n)), " outputs"));
  std::int64_t total = 0;
  for (std::int64_t p : parts) {
    if (p < 0) return invalid(cat("split ", dims_string(parts), " has a negative part"));
    total += p;
  }
  if (total != dim)
    return invalid(cat("split ", dims_string(parts), " sums to ", num(total), ", not to the size ", num(dim), " of axis ",
                       num(sp.axis)));
  if (n == 1) {
    set_view(ctx, x.sizes());
    return {};
  }
  const std::int64_t outer = product(x.sizes(), 0, axis), inner = product(x.sizes(), axis + 1);
  if (!dispatch_move(x.type(), [&](auto tag) {
        using U = typename decltype(tag)::type;
        const U* src = elems<U>(x);
        std::int64_t off = 0;
        for (std::size_t k = 0; k < n; ++k) {
          sizes_t s(x.sizes().begin(), x.sizes().end());
          s[axis] = parts[k];
          tensor& y = ctx.allocate_output(k, x.type(), s);
          U* dst = elems<U>(y);
          const std::int64_t chunk = parts[k] * inner;
          if (y.element_count() != 0) {
            if (outer == 1) {
              copy_elements(ctx, src + off * inner, static_cast<std::size_t>(chunk), dst);
            } else {
              parallel_items(ctx, static_cast<std::size_t>(outer), copy_cost(chunk), [&](std::size_t b, std::size_t e) {
                for (auto o = static_cast<std::int64_t>(b); o < static_cast<std::int64_t>(e); ++o)
                  std::copy_n(src + (o * dim + off) * inner, chunk, dst + o * chunk);
              });
            }
          }
          off += parts[k];
        }
      }))
    return bad_type(x.type());
  return {};
}

struct slice_params {
  int version = 13;
  std::vector<std::int64_t> starts, ends, axes;  // opset < 10
  bool has_axes = false;
};

Status slice_run(compute_context& ctx, const slice_params& sp) {
  const tensor& x = ctx.input(0);
  const auto dims = x.sizes();
  const std::size_t r = dims.size();
  std::vector<std::int64_t> starts, ends, axes, steps;
  bool has_axes = sp.has_axes;
  if (sp.version < 10) {
    starts = sp.starts;
    ends = sp.ends;
    axes = sp.axes;
  } else {
    EPSTACK_ASSIGN_OR_RETURN(starts, ints_of(ctx.input(1), "starts"));
    EPSTACK_ASSIGN_OR_RETURN(ends, ints_of(ctx.input(2), "ends"));
    has_axes = ctx.has_input(3);
    if (has_axes) {
      EPSTACK_ASSIGN_OR_RETURN(axes, ints_of(ctx.input(3), "axes"));
    }
    if (ctx.has_input(4)) {
      EPSTACK_ASSIGN_OR_RETURN(steps, ints_of(ctx.input(4), "steps"));
    }
  }
  if (!has_axes) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), std::int64_t{0});
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return invalid(cat("starts ", dims_string(starts), ", ends ", dims_string(ends), ", axes ", dims_string(axes),
                       " and steps ", dims_string(steps), " differ in length"));
  sizes_t first(r, 0), step(r, 1), count(dims.begin(), dims.end());
  std::vector<bool> seen(r, false);
  for (std::size_t i = 0; i < starts.size(); ++i) {
    EPSTACK_ASSIGN_OR_RETURN(const std::size_t a, axis_of(axes[i], r, sp.version >= 11, "slice axis"));
    if (seen[a]) return invalid(cat("axes ", dims_string(axes), " name axis ", num(axes[i]), " twice"));
    seen[a] = true;
    const std::int64_t d = dims[a], k = steps[i];
    if (k == 0) return invalid(cat("steps[", num(static_cast<std::int64_t>(i)), "] is 0"));
    std::int64_t s = starts[i], e = ends[i];
    if (s < 0) s += d;
    if (e < 0) e += d;
    std::int64_t c = 0;
    if (d == 0) {
      s = 0;
    } else if (k > 0) {
      s = std::clamp<std::int64_t>(s, 0, d);
      e = std::clamp<std::int64_t>(e, 0, d);
      c = e > s ? static_cast<std::int64_t>(static_cast<std::uint64_t>(e - s - 1) / static_cast<std::uint64_t>(k)) + 1 : 0;
    } else {
      s = std::clamp<std::int64_t>(s, 0, d - 1);
      e = std::clamp<std::int64_t>(e, -1, d - 1);
      const std::uint64_t ak = std::uint64_t{0} - static_cast<std::uint64_t>(k);
      c = s > e ? static_cast<std::int64_t>(static_cast<std::uint64_t>(s - e - 1) / ak) + 1 : 0;
    }
    first[a] = s;
    step[a] = k;
    count[a] = c;
  }
  bool whole = true;
  for (std::size_t a = 0; a < r; ++a) whole = whole && first[a] == 0 && step[a] == 1 && count[a] == dims[a];
  if (whole) {
    set_view(ctx, dims);
    return {};
  }
  const sizes_t is = contiguous_strides(dims);
  if (!dispatch_move(x.type(), [&](auto tag) {
        using U = typename decltype(tag)::type;
        tensor& y = ctx.allocate_output(0, x.type(), count);
        if (y.element_count() == 0) return;
        std::int64_t base = 0;
        sizes_t s(r, 0);
        for (std::size_t a = 0; a < r; ++a) {
          base += first[a] * is[a];
          s[a] = is[a] * step[a];
        }
        strided_copy(ctx, elems<U>(x) + base, strided_plan(count, s), elems<U>(y));
      }))
    return bad_type(x.type());
  return {};
}

Status gather_run(compute_context& ctx, std::int64_t axis_attr) {
  const tensor& x = ctx.input(0);
  const tensor& ind = ctx.input(1);
  if (x.rank() == 0) return invalid("the data of Gather must have rank >= 1, but it is a scalar");
  EPSTACK_ASSIGN_OR_RETURN(const std::size_t axis, axis_of(axis_attr, x.rank(), true));
  if (ind.type() != element_type::int64 && ind.type() != element_type::int32)
    return invalid(cat("the indices must be int64 or int32, not ", to_string(ind.type())));
  const std::int64_t n = x.sizes()[axis];
  const std::vector<std::int64_t> raw = to_int64s(ind);
  std::vector<std::int64_t> idx(raw.size());
  for (std::size_t j = 0; j < raw.size(); ++j) {
    const std::int64_t v = raw[j];
    if (v < -n || v >= n)
      return invalid(cat("index ", num(v), " (at position ", num(static_cast<std::int64_t>(j)),
                         " of the indices) is out of range for axis ", num(axis_attr), " of size ", num(n)));
    idx[j] = v < 0 ? v + n : v;
  }
  sizes_t out(x.sizes().begin(), x.sizes().begin() + static_cast<std::ptrdiff_t>(axis));
  for (std::int64_t d : ind.sizes()) out.push_back(d);
  for (std::size_t i = axis + 1; i < x.rank(); ++i) out.push_back(x.sizes()[i]);
  const std::int64_t outer = product(x.sizes(), 0, axis), inner = product(x.sizes(), axis + 1);
  const auto m = static_cast<std::int64_t>(idx.size());
  if (!dispatch_move(x.type(), [&](auto tag) {
        using U = typename decltype(tag)::type;
        tensor& y = ctx.allocate_output(0, x.type(), out);
        if (y.element_count() == 0) return;
        const U* src = elems<U>(x);
        U* dst = elems<U>(y);
        if (inner == 1) {
          parallel_elements(ctx, static_cast<std::size_t>(outer * m), [&](std::size_t b, std::size_t e) {
            for (auto i = static_cast<std::int64_t>(b); i < static_cast<std::int64_t>(e); ++i)
              dst[i] = src[(i / m) * n + idx[static_cast<std::size_t>(i % m)]];
          });
          return;
        }
        // Whole rows of `inner` elements: an embedding lookup is outer == 1, a row per index.
        parallel_items(ctx, static_cast<std::size_t>(outer * m), copy_cost(inner), [&](std::size_t b, std::size_t e) {
          for (auto i = static_cast<std::int64_t>(b); i < static_cast<std::int64_t>(e); ++i)
            std::copy_n(src + ((i / m) * n + idx[static_cast<std::size_t>(i % m)]) * inner, inner, dst + i * inner);
        });
      }))
    return bad_type(x.type());
  return {};
}

Status expand_run(compute_context& ctx) {
  const tensor& x = ctx.input(0);
  EPSTACK_ASSIGN_OR_RETURN(const auto shape, ints_of(ctx.input(1), "the shape input"));
  for (std::int64_t d : shape)
    if (d < 0) return invalid(cat("the shape ", dims_string(shape), " has a negative dimension"));
  auto out_r = broadcast_shape(x.sizes(), shape);
  if (!out_r) return invalid(cat("cannot expand ", dims_string(x.sizes()), " to ", dims_string(shape), ": ", out_r.status().message()));
  const sizes_t out = std::move(out_r).value();
  if (std::equal(out.begin(), out.end(), x.sizes().begin(), x.sizes().end())) {
    set_view(ctx, out);
    return {};
  }
  if (!dispatch_move(x.type(), [&](auto tag) {
        using U = typename decltype(tag)::type;
        tensor& y = ctx.allocate_output(0, x.type(), out);
        if (y.element_count() == 0) return;
        const sizes_t s = broadcast_strides(x.sizes(), out);
        strided_copy(ctx, elems<U>(x), strided_plan(out, s), elems<U>(y));
      }))
    return bad_type(x.type());
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// Cast

template <class T>
constexpr bool is_half_v = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

template <class F>
double as_double(F v) {
  if constexpr (is_half_v<F>) return static_cast<double>(static_cast<float>(v));
  else return static_cast<double>(v);
}
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

// ---------------------------------------------------------------------------------------------------------------
// Constants

// Copies `value` into output 0 (a fresh copy per run: the caller may own the output).
Status emit_copy(compute_context& ctx, const tensor& value) {
  tensor& y = ctx.allocate_output(0, value.type(), value.sizes());
  if (value.type() == element_type::string)
    std::copy_n(value.typed<std::string>(), value.element_count(), y.typed<std::string>());
  else if (value.byte_size() != 0)
    std::memcpy(y.mutable_data(), value.data(), value.byte_size());
  return {};
}

// The dense tensor of a sparse one: values [NNZ] at indices [NNZ] (linear) or [NNZ, rank].
Result<tensor> densify(const sparse_tensor& s) {
  for (std::int64_t d : s.dims)
    if (d < 0) return invalid(cat("sparse_value has a negative dimension: ", dims_string(s.dims)));
  tensor dense(s.values.type(), s.dims);  // zero-initialised (empty strings)
  const auto nnz = static_cast<std::int64_t>(s.values.element_count());
  if (s.indices.type() != element_type::int64 && s.indices.type() != element_type::int32)
    return invalid("sparse_value's indices must be int64 or int32");
  const std::vector<std::int64_t> ind = to_int64s(s.indices);
  const auto rank = static_cast<std::int64_t>(s.dims.size());
  const bool linear = s.indices.rank() == 1;
  if ((linear && static_cast<std::int64_t>(ind.size()) != nnz) || (!linear && static_cast<std::int64_t>(ind.size()) != nnz * rank))
    return invalid(cat("sparse_value's indices have shape ", dims_string(s.indices.sizes()), " for ", num(nnz), " values of rank ", num(rank)));
  const std::int64_t total = product(s.dims);
  const sizes_t strides = contiguous_strides(s.dims);
  std::vector<std::int64_t> pos(static_cast<std::size_t>(nnz));
  for (std::int64_t i = 0; i < nnz; ++i) {
    std::int64_t p = 0;
    if (linear) {
      p = ind[static_cast<std::size_t>(i)];
    } else {
      for (std::int64_t k = 0; k < rank; ++k) {
        const std::int64_t v = ind[static_cast<std::size_t>(i * rank + k)];
        if (v < 0 || v >= s.dims[static_cast<std::size_t>(k)]) { p = -1; break; }
        p += v * strides[static_cast<std::size_t>(k)];
      }
    }
    if (p < 0 || p >= total) return invalid(cat("sparse_value's index ", num(i), " is out of range of ", dims_string(s.dims)));
    pos[static_cast<std::size_t>(i)] = p;
  }
  dispatch_move(dense.type(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    const U* v = elems<U>(s.values);
    U* d = elems<U>(dense);
    for (std::size_t i = 0; i < pos.size(); ++i) d[pos[i]] = v[i];
  });
  return dense;
}

// The value of a Constant node, from whichever attribute it has.
Result<tensor> constant_value(const node& nd) {
  const auto* a_value = attr(nd, "value");
  if (a_value != nullptr) {
    if (const auto* t = std::get_if<tensor>(&a_value->value)) return *t;
    return invalid("the value attribute is not a tensor");
  }
  if (const auto* a = attr(nd, "sparse_value")) {
    if (const auto* s = std::get_if<sparse_tensor>(&a->value)) return densify(*s);
    return invalid("the sparse_value attribute is not a sparse tensor");
  }
  if (nd.since_version >= 12) {
    if (const auto* a = attr(nd, "value_float"))
      if (const auto* v = std::get_if<float>(&a->value)) return tensor::scalar(*v);
    if (const auto* a = attr(nd, "value_int"))
      if (const auto* v = std::get_if<std::int64_t>(&a->value)) return tensor::scalar(*v);
    if (const auto* a = attr(nd, "value_string"))
      if (const auto* v = std::get_if<std::string>(&a->value)) return tensor::scalar(*v);
    if (const auto* a = attr(nd, "value_floats"))
      if (const auto* v = std::get_if<std::vector<float>>(&a->value)) {
        const std::int64_t n[] = {static_cast<std::int64_t>(v->size())};
        return tensor::from<float>(n, *v);
      }
    if (const auto* a = attr(nd, "value_ints"))
      if (const auto* v = std::get_if<std::vector<std::int64_t>>(&a->value)) {
        const std::int64_t n[] = {static_cast<std::int64_t>(v->size())};
        return tensor::from<std::int64_t>(n, *v);
      }
    if (const auto* a = attr(nd, "value_strings"))
      if (const auto* v = std::get_if<std::vector<std::string>>(&a->value)) {
        const std::int64_t n[] = {static_cast<std::int64_t>(v->size())};
        return tensor::from<std::string>(n, *v);
      }
  }
  return invalid("Constant has none of the attributes value, sparse_value, value_float(s), value_int(s), value_string(s)");
}

// ---------------------------------------------------------------------------------------------------------------
// Range

template <class T>
Status range_run(compute_context& ctx) {
  T v[3];
  static constexpr const char* names[] = {"start", "limit", "delta"};
  for (std::size_t i = 0; i < 3; ++i) {
    const tensor& t = ctx.input(i);
    if (t.type() != element_type_of_v<T>)
      return invalid(cat(names[i], " is ", to_string(t.type()), " but start is ", to_string(element_type_of_v<T>)));
    if (t.element_count() != 1) return invalid(cat(names[i], " must be a scalar, but has shape ", dims_string(t.sizes())));
    v[i] = *t.typed<T>();
  }
  const T start = v[0], limit = v[1], delta = v[2];
  if (delta == T(0)) return invalid("delta is 0");
  std::int64_t n = 0;
  if constexpr (std::is_integral_v<T>) {
    const auto us = static_cast<std::uint64_t>(static_cast<std::int64_t>(start));
    const auto ul = static_cast<std::uint64_t>(static_cast<std::int64_t>(limit));
    const auto ud = static_cast<std::uint64_t>(static_cast<std::int64_t>(delta));
    if (delta > 0 && limit > start) n = static_cast<std::int64_t>((ul - us - 1) / ud + 1);
    if (delta < 0 && limit < start) n = static_cast<std::int64_t>((us - ul - 1) / (0 - ud) + 1);
  } else {
    const double c = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) / static_cast<double>(delta));
    if (!std::isfinite(c) || c > 1e15)
      return invalid(cat("the range from ", to_text(start), " to ", to_text(limit), " by ", to_text(delta), " is not finite"));
    n = c > 0 ? static_cast<std::int64_t>(c) : 0;
  }
  const std::int64_t size[] = {n};
  tensor& y = ctx.allocate_output(0, element_type_of_v<T>, size);
  T* out = y.typed<T>();
  parallel_elements(ctx, static_cast<std::size_t>(n), [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      if constexpr (std::is_integral_v<T>)
        out[i] = static_cast<T>(static_cast<std::uint64_t>(static_cast<std::int64_t>(start)) +
                                static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(static_cast<std::int64_t>(delta)));
      else
        out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    }
  });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// Support checks

// True when input i is given and, if its type is known, is a tensor of a valid element type.
bool tensor_input(const graph& g, node_id n, std::size_t i) {
  if (!has_in(g, n, i)) return false;
  const auto& t = g.value(g.node(n).inputs[i]).type;
  return t.kind == type_kind::undefined || (t.kind == type_kind::tensor && (t.elem == element_type::undefined || is_valid(t.elem)));
}
// True when input i, if given with a known type, is int64 (or int32 when `int32_ok`).
bool index_input(const graph& g, node_id n, std::size_t i, bool int32_ok) {
  const auto e = in_type(g, n, i);
  return e == element_type::undefined || e == element_type::int64 || (int32_ok && e == element_type::int32);
}
bool has_output(const graph& g, node_id n, std::size_t i) {
  const auto& nd = g.node(n);
  return i < nd.outputs.size() && nd.outputs[i] != no_id;
}

}  // namespace
}  // namespace impl

// ---------------------------------------------------------------------------------------------------------------
// The kernel types.

namespace ops {
using namespace impl;

// Reshape: the shape as an attribute before opset 5, an int64 input since; allowzero from opset 14.
bool reshape::supports(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (!tensor_input(g, n, 0)) return false;
  if (nd.since_version < 5) return has_attr(nd, "shape");
  return has_in(g, n, 1) && index_input(g, n, 1, false);
}
Result<compute_function> reshape::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const bool from_input = nd.since_version >= 5;
  const bool allowzero = nd.since_version >= 14 && attr_i(nd, "allowzero", 0) != 0;
  if (!from_input && !has_attr(nd, "shape")) return invalid("Reshape-1 needs the shape attribute");
  const std::vector<std::int64_t> shape_attr = attr_ints(nd, "shape");
  return make_fn("Reshape", [=](compute_context& ctx) -> Status {
    std::vector<std::int64_t> spec = shape_attr;
    if (from_input) {
      EPSTACK_ASSIGN_OR_RETURN(spec, ints_of(ctx.input(1), "the shape input"));
    }
    EPSTACK_ASSIGN_OR_RETURN(const sizes_t out, reshape_sizes(ctx.input(0).sizes(), spec, allowzero));
    set_view(ctx, out);
    return {};
  });
}

// Flatten: axis in [0, rank] (negative from opset 11).
bool flatten::supports(const graph& g, node_id n) { return tensor_input(g, n, 0); }
Result<compute_function> flatten::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const std::int64_t axis = attr_i(nd, "axis", 1);
  const bool negative_ok = nd.since_version >= 11;
  return make_fn("Flatten", [=](compute_context& ctx) -> Status {
    const auto in = ctx.input(0).sizes();
    const auto r = static_cast<std::int64_t>(in.size());
    if ((axis < 0 && !negative_ok) || axis < -r || axis > r)
      return invalid(cat("axis ", num(axis), " is out of range for rank ", num(r), negative_ok ? "" : " (negative axes need opset 11)"));
    const auto a = static_cast<std::size_t>(axis < 0 ? axis + r : axis);
    const std::int64_t out[] = {product(in, 0, a), product(in, a)};
    set_view(ctx, out);
    return {};
  });
}

// Squeeze: axes as an attribute before opset 13, an optional input since; no axes: every size-1 dim.
bool squeeze::supports(const graph& g, node_id n) {
  return tensor_input(g, n, 0) && (g.node(n).since_version < 13 || index_input(g, n, 1, false));
}
Result<compute_function> squeeze::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const int version = nd.since_version;
  const std::vector<std::int64_t> axes_attr = attr_ints(nd, "axes");
  return make_fn("Squeeze", [=](compute_context& ctx) -> Status {
    std::vector<std::int64_t> axes = axes_attr;
    if (version >= 13) {
      axes.clear();
      if (ctx.has_input(1)) {
        EPSTACK_ASSIGN_OR_RETURN(axes, ints_of(ctx.input(1), "axes"));
      }
    }
    return squeeze_run(ctx, axes, version >= 11);
  });
}

// Unsqueeze: axes (required) as an attribute before opset 13, an input since.
bool unsqueeze::supports(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (!tensor_input(g, n, 0)) return false;
  if (nd.since_version < 13) return has_attr(nd, "axes");
  return has_in(g, n, 1) && index_input(g, n, 1, false);
}
Result<compute_function> unsqueeze::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const int version = nd.since_version;
  if (version < 13 && !has_attr(nd, "axes")) return invalid("Unsqueeze needs the axes attribute before opset 13");
  const std::vector<std::int64_t> axes_attr = attr_ints(nd, "axes");
  return make_fn("Unsqueeze", [=](compute_context& ctx) -> Status {
    std::vector<std::int64_t> axes = axes_attr;
    if (version >= 13) {
      if (!ctx.has_input(1)) return invalid("Unsqueeze needs the axes input from opset 13");
      EPSTACK_ASSIGN_OR_RETURN(axes, ints_of(ctx.input(1), "axes"));
    }
    return unsqueeze_run(ctx, axes, version >= 11);
  });
}

// Identity: any value (tensors, and from opset 14 sequences and optionals) passes through, sharing storage.
bool identity::supports(const graph& g, node_id n) { return has_in(g, n, 0); }
Result<compute_function> identity::compile(const graph&, node_id) {
  return make_fn("Identity", [](compute_context& ctx) -> Status {
    ctx.output_value(0) = ctx.input_value(0);
    return {};
  });
}

// Dropout as inference: output = input (a view), the optional mask all kept (ones of the data type before opset 10,
// bool true since). Before opset 7, is_test = 0 with a non-zero ratio is random dropout: not supported. From opset
// 12, training_mode true is random dropout too, unless the ratio is 0: a run-time error.
bool dropout::supports(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (!tensor_input(g, n, 0)) return false;
  const auto e = in_type(g, n, 0);
  if (e != element_type::undefined && !is_float(e)) return false;
  if (nd.since_version < 7 && attr_i(nd, "is_test", 0) == 0 && attr_f(nd, "ratio", 0.5f) != 0.0f) return false;
  return true;
}
Result<compute_function> dropout::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const int version = nd.since_version;
  if (version < 7 && attr_i(nd, "is_test", 0) == 0 && attr_f(nd, "ratio", 0.5f) != 0.0f)
    return Status(errc::not_implemented, "Dropout with is_test = 0 is random dropout, which is not supported");
  const bool want_mask = has_output(g, n, 1);
  const auto rng = std::make_shared<random_source>(nd);
  // A constant false training_mode needs no check at run time.
  bool check_training = version >= 12 && has_in(g, n, 2);
  if (const tensor* t = check_training ? constant_input(g, n, 2) : nullptr)
    if (t->type() == element_type::boolean && t->element_count() == 1 && !*t->typed<bool>()) check_training = false;
  return make_fn("Dropout", [=](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (check_training && ctx.has_input(2)) {
      const tensor& t = ctx.input(2);
      if (t.type() != element_type::boolean || t.element_count() != 1)
        return invalid(cat("training_mode must be a bool scalar, not ", to_string(t.type()), dims_string(t.sizes())));
      if (*t.typed<bool>()) {
        double ratio = 0.5;
        if (ctx.has_input(1)) {
          const tensor& r = ctx.input(1);
          if (r.element_count() != 1) return invalid(cat("ratio must be a scalar, but has shape ", dims_string(r.sizes())));
          if (!dispatch<float, double, float16, bfloat16>(r.type(), [&](auto tag) {
                using R = typename decltype(tag)::type;
                ratio = as_double(*r.typed<R>());
              }))
            return invalid(cat("ratio must be floating point, not ", to_string(r.type())));
        }
        if (ratio < 0.0 || ratio >= 1.0) return invalid(cat("ratio must be in [0, 1), got ", to_text(ratio)));
        if (ratio != 0.0) {
          // Random dropout: each element kept with probability 1 - ratio and scaled by 1 / (1 - ratio).
          tensor& y = ctx.allocate_output(0, x.type(), x.sizes());
          tensor* m = want_mask && ctx.output_count() > 1 ? &ctx.allocate_output(1, element_type::boolean, x.sizes()) : nullptr;
          std::vector<bool> keep(x.element_count());
          {
            std::lock_guard lock(rng->mu);
            std::bernoulli_distribution d(1.0 - ratio);
            for (std::size_t i = 0; i < keep.size(); ++i) keep[i] = d(rng->engine);
          }
          const double scale = 1.0 / (1.0 - ratio);
          const bool ok = dispatch<float, double, float16, bfloat16>(x.type(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            for (std::size_t i = 0; i < keep.size(); ++i) {
              const double v = keep[i] ? as_double(x.typed<T>()[i]) * scale : 0.0;
              if constexpr (is_half_v<T>) y.typed<T>()[i] = T(static_cast<float>(v));
              else y.typed<T>()[i] = static_cast<T>(v);
            }
          });
          if (!ok) return bad_type(x.type());
          if (m != nullptr)
            for (std::size_t i = 0; i < keep.size(); ++i) m->typed<bool>()[i] = keep[i];
          return {};
        }
      }
    }
    set_view(ctx, x.sizes());
    if (want_mask && ctx.output_count() > 1) {
      if (version < 10) {
        const bool ok = dispatch<float, double, float16, bfloat16>(x.type(), [&](auto tag) {
          using T = typename decltype(tag)::type;
          tensor& m = ctx.allocate_output(1, x.type(), x.sizes());
          std::fill_n(m.typed<T>(), m.element_count(), T(1.0f));
        });
        if (!ok) return bad_type(x.type());
      } else {
        tensor& m = ctx.allocate_output(1, element_type::boolean, x.sizes());
        std::fill_n(m.typed<bool>(), m.element_count(), true);
      }
    }
    return {};
  });
}

// Shape: int64 dims; from opset 15 the slice [start, end) of them, clamped to [0, rank].
bool shape::supports(const graph& g, node_id n) { return tensor_input(g, n, 0); }
Result<compute_function> shape::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const bool sliced = nd.since_version >= 15;
  const std::int64_t start_attr = sliced ? attr_i(nd, "start", 0) : 0;
  const std::optional<std::int64_t> end_attr =
      sliced && has_attr(nd, "end") ? std::optional<std::int64_t>(attr_i(nd, "end", 0)) : std::nullopt;
  return make_fn("Shape", [=](compute_context& ctx) -> Status {
    const auto in = ctx.input(0).sizes();
    const auto r = static_cast<std::int64_t>(in.size());
    auto clamp_axis = [r](std::int64_t a) { return std::clamp<std::int64_t>(a < 0 ? a + r : a, 0, r); };
    const std::int64_t b = clamp_axis(start_attr), e = end_attr ? clamp_axis(*end_attr) : r;
    const std::int64_t count[] = {std::max<std::int64_t>(e - b, 0)};
    tensor& y = ctx.allocate_output(0, element_type::int64, count);
    std::copy_n(in.begin() + b, count[0], y.typed<std::int64_t>());
    return {};
  });
}

bool size::supports(const graph& g, node_id n) { return tensor_input(g, n, 0); }
Result<compute_function> size::compile(const graph&, node_id) {
  return make_fn("Size", [](compute_context& ctx) -> Status {
    const auto count = static_cast<std::int64_t>(ctx.input(0).element_count());
    tensor& y = ctx.allocate_output(0, element_type::int64, std::span<const std::int64_t>{});
    *y.typed<std::int64_t>() = count;
    return {};
  });
}

// Transpose: perm (default: reversed).
bool transpose::supports(const graph& g, node_id n) { return tensor_input(g, n, 0); }
Result<compute_function> transpose::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const bool has_perm = has_attr(nd, "perm");
  const std::vector<std::int64_t> perm = attr_ints(nd, "perm");
  return make_fn("Transpose", [=](compute_context& ctx) { return transpose_run(ctx, perm, has_perm); });
}

// Concat: axis (default 1 in opset 1, required from opset 4, negative from 11).
bool concat::supports(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (nd.inputs.empty()) return false;
  for (std::size_t i = 0; i < nd.inputs.size(); ++i)
    if (!tensor_input(g, n, i)) return false;
  return nd.since_version < 4 || has_attr(nd, "axis");
}
Result<compute_function> concat::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (nd.since_version >= 4 && !has_attr(nd, "axis")) return invalid("Concat needs the axis attribute");
  const std::int64_t axis = attr_i(nd, "axis", 1);
  const bool negative_ok = nd.since_version >= 11;
  return make_fn("Concat", [=](compute_context& ctx) { return concat_run(ctx, axis, negative_ok); });
}

// Split: `split` as an attribute before opset 13 (also an input in opset 1), an optional input since; otherwise equal
// parts (from opset 18 the last part may be smaller).
bool split::supports(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  return tensor_input(g, n, 0) && !nd.outputs.empty() && (nd.since_version < 13 || index_input(g, n, 1, false));
}
Result<compute_function> split::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  split_params sp;
  sp.version = nd.since_version;
  sp.axis = attr_i(nd, "axis", 0);
  if (sp.version < 13 && has_attr(nd, "split")) sp.split_attr = attr_ints(nd, "split");
  if (sp.version >= 18 && has_attr(nd, "num_outputs") &&
      attr_i(nd, "num_outputs", 0) != static_cast<std::int64_t>(nd.outputs.size()))
    return invalid(cat("num_outputs is ", num(attr_i(nd, "num_outputs", 0)), " but the node has ",
                       num(static_cast<std::int64_t>(nd.outputs.size())), " outputs"));
  return make_fn("Split", [sp](compute_context& ctx) { return split_run(ctx, sp); });
}

// Slice: starts/ends/axes attributes before opset 10; inputs starts, ends, axes, steps (int32 or int64) since.
bool slice::supports(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (!tensor_input(g, n, 0)) return false;
  if (nd.since_version < 10) return has_attr(nd, "starts") && has_attr(nd, "ends");
  for (std::size_t i = 1; i < 5; ++i)
    if (!index_input(g, n, i, true)) return false;
  return has_in(g, n, 1) && has_in(g, n, 2);
}
Result<compute_function> slice::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  slice_params sp;
  sp.version = nd.since_version;
  if (sp.version < 10) {
    if (!has_attr(nd, "starts") || !has_attr(nd, "ends")) return invalid("Slice needs the starts and ends attributes before opset 10");
    sp.starts = attr_ints(nd, "starts");
    sp.ends = attr_ints(nd, "ends");
    sp.has_axes = has_attr(nd, "axes");
    sp.axes = attr_ints(nd, "axes");
  }
  return make_fn("Slice", [sp](compute_context& ctx) { return slice_run(ctx, sp); });
}

// Gather: axis (negative allowed), int32 or int64 indices in [-n, n).
bool gather::supports(const graph& g, node_id n) {
  return tensor_input(g, n, 0) && has_in(g, n, 1) && index_input(g, n, 1, true);
}
Result<compute_function> gather::compile(const graph& g, node_id n) {
  const std::int64_t axis = attr_i(g.node(n), "axis", 0);
  return make_fn("Gather", [axis](compute_context& ctx) { return gather_run(ctx, axis); });
}

// Expand: numpy broadcasting of the input against the shape input (either may be larger).
bool expand::supports(const graph& g, node_id n) {
  return tensor_input(g, n, 0) && has_in(g, n, 1) && index_input(g, n, 1, false);
}
Result<compute_function> expand::compile(const graph&, node_id) {
  return make_fn("Expand", [](compute_context& ctx) { return expand_run(ctx); });
}

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

// Constant: value, sparse_value, or (from opset 12) value_float(s), value_int(s), value_string(s).
bool constant::supports(const graph& g, node_id n) { return constant_value(g.node(n)).has_value(); }
Result<compute_function> constant::compile(const graph& g, node_id n) {
  EPSTACK_ASSIGN_OR_RETURN(tensor value, constant_value(g.node(n)));
  return make_fn("Constant", [value = std::move(value)](compute_context& ctx) { return emit_copy(ctx, value); });
}

// ConstantOfShape: the int64 shape input filled with `value` (a one-element tensor; default float 0).
bool constant_of_shape::supports(const graph& g, node_id n) {
  const tensor* v = attr_t(g.node(n), "value");
  if (has_attr(g.node(n), "value") && (v == nullptr || v->element_count() != 1)) return false;
  return has_in(g, n, 0) && index_input(g, n, 0, false);
}
Result<compute_function> constant_of_shape::compile(const graph& g, node_id n) {
  const tensor* v = attr_t(g.node(n), "value");
  if (has_attr(g.node(n), "value") && (v == nullptr || v->element_count() != 1))
    return invalid("the value attribute must be a tensor of one element");
  const tensor value = v != nullptr ? *v : tensor::scalar(0.0f);
  return make_fn("ConstantOfShape", [value](compute_context& ctx) -> Status {
    EPSTACK_ASSIGN_OR_RETURN(const auto shape, ints_of(ctx.input(0), "the shape input"));
    for (std::int64_t d : shape)
      if (d < 0) return invalid(cat("the shape ", dims_string(shape), " has a negative dimension"));
    if (!dispatch_move(value.type(), [&](auto tag) {
          using U = typename decltype(tag)::type;
          tensor& y = ctx.allocate_output(0, value.type(), shape);
          const U fill = *elems<U>(value);
          U* out = elems<U>(y);
          parallel_elements(ctx, y.element_count(), [&](std::size_t b, std::size_t e) { std::fill(out + b, out + e, fill); });
        }))
      return bad_type(value.type());
    return {};
  });
}

// Range: float, double, int16, int32, int64.
#define EPSTACK_RANGE_TYPES float, double, std::int16_t, std::int32_t, std::int64_t
bool range::supports(const graph& g, node_id n) {
  const auto e = in_type(g, n, 0);
  if (!has_in(g, n, 0) || !has_in(g, n, 1) || !has_in(g, n, 2)) return false;
  return e == element_type::undefined || dispatch<EPSTACK_RANGE_TYPES>(e, [](auto) {});
}
Result<compute_function> range::compile(const graph& g, node_id n) {
  const auto e = in_type(g, n, 0);
  if (e != element_type::undefined) {
    Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
    dispatch<EPSTACK_RANGE_TYPES>(e, [&](auto tag) {
      using T = typename decltype(tag)::type;
      r = make_fn("Range", [](compute_context& ctx) { return range_run<T>(ctx); });
    });
    return r;
  }
  return make_fn("Range", [](compute_context& ctx) -> Status {
    Status st = invalid(cat("Range does not support ", to_string(ctx.input(0).type())));
    dispatch<EPSTACK_RANGE_TYPES>(ctx.input(0).type(), [&](auto tag) { st = range_run<typename decltype(tag)::type>(ctx); });
    return st;
  });
}

}  // namespace ops
}  // namespace epstack::cpu
