// Data-movement kernels: Transpose, Concat, Split, Slice, Gather and Expand. Data movement dispatches on the element
// size at run time (strings element by element), so one instantiation serves every type of a size; Transpose collapses
// dimensions and copies contiguous runs or cache-sized tiles; large copies are split across the intra-op threads.
#include "broadcast.hpp"
#include "tensor_util.hpp"

#include "epstack/detail/inline_vector.hpp"

#include <cstddef>
#include <numeric>
#include <type_traits>
#include <utility>

namespace epstack::cpu {
namespace impl {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Moving elements

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
        epstack::detail::inline_vector<const U*, 8> srcs(k);  // no allocation a run for up to 8 inputs
        epstack::detail::inline_vector<std::int64_t, 8> chunks(k), offs(k);
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

// Numbers of any numeric tensor as int64 (Split-1's `split` input has the data's type), held inline up to 8.
using counts_t = epstack::detail::inline_vector<std::int64_t, 8>;
Result<counts_t> counts_of(const tensor& t, std::string_view what) {
  if (t.rank() > 1) return invalid(cat(what, " must be 1-D, but has shape ", dims_string(t.sizes())));
  counts_t r;
  const bool ok = dispatch<std::int64_t, std::int32_t, float, double, float16>(t.type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = t.typed<T>();
    for (std::size_t i = 0; i < t.element_count(); ++i) {
      if constexpr (std::is_integral_v<T>)
        r.push_back(static_cast<std::int64_t>(p[i]));
      else
        r.push_back(static_cast<std::int64_t>(static_cast<double>(static_cast<float>(p[i]))));
    }
  });
  if (!ok) return invalid(cat(what, " must be an integer tensor, not ", to_string(t.type())));
  return r;
}

struct split_params {
  int version = 13;
  std::int64_t axis = 0;
  std::optional<std::vector<std::int64_t>> split_attr;
  bool num_outputs = false;  // opset 18's attribute: parts of ceil(dim / n), the last one smaller
};

Status split_run(compute_context& ctx, const split_params& sp) {
  const tensor& x = ctx.input(0);
  // (A negative axis is taken before opset 11 too: PyTorch's exporter wrote them, and they are unambiguous.)
  EPSTACK_ASSIGN_OR_RETURN(const std::size_t axis, axis_of(sp.axis, x.rank(), true));
  const std::int64_t dim = x.sizes()[axis];
  const std::size_t n = ctx.output_count();
  if (n == 0) return invalid("Split has no outputs");
  counts_t parts;  // with `dsts` below: no allocation a run for up to 8 parts
  const bool split_input = (sp.version >= 13 || sp.version == 1) && ctx.has_input(1) && ctx.input(1).element_count() > 0;
  if (split_input) {
    EPSTACK_ASSIGN_OR_RETURN(parts, counts_of(ctx.input(1), "the split input"));
  } else if (sp.split_attr && !sp.split_attr->empty()) {
    parts.assign(sp.split_attr->begin(), sp.split_attr->end());
  } else {
    const auto nn = static_cast<std::int64_t>(n);
    const std::int64_t chunk = (dim + nn - 1) / nn;
    if (!sp.num_outputs && dim % nn != 0)
      return invalid(cat("axis ", num(sp.axis), " of size ", num(dim), " cannot be split into ", num(nn), " equal parts"));
    // num_outputs (opset 18): parts of ceil(dim / n), the last one smaller. As in ONNX Runtime, every part holds an
    // element (2 into 3 parts leaves none for the third; 5 or 6 into 4 parts of 2, -1 or 0 for the last): such a
    // split is refused, not given empty outputs.
    if (sp.num_outputs && (nn > dim || dim - chunk * (nn - 1) <= 0))
      return invalid(cat("num_outputs ", num(nn), ": axis ", num(sp.axis), " of size ", num(dim), " cannot be split into ",
                         num(nn - 1), " parts of ", num(chunk), " and a last one of at least 1 (", num(dim - chunk * (nn - 1)),
                         " remain for it)"));
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
        epstack::detail::inline_vector<U*, 8> dsts(n);
        for (std::size_t k = 0; k < n; ++k) {
          sizes_t s(x.sizes().begin(), x.sizes().end());
          s[axis] = parts[k];
          dsts[k] = elems<U>(ctx.allocate_output(k, x.type(), s));
        }
        if (outer == 1) {  // each part one contiguous run of X
          std::int64_t off = 0;
          for (std::size_t k = 0; k < n; ++k) {
            const std::int64_t chunk = parts[k] * inner;
            if (chunk != 0) copy_elements(ctx, src + off * inner, static_cast<std::size_t>(chunk), dsts[k]);
            off += parts[k];
          }
          return;
        }
        // X's rows (the dims before the axis) in one loop, each row dealt out to every part: X is read once, in order,
        // and the threads share the whole split, not each part's. Part by part, a split of an attention layer's Q, K
        // and V out of one product's [128, 1536] stayed under the copy threshold on one thread and read X three
        // times: 59-85 us, 20-22 us this way (one node on two threads); llm_prefill's six on the `cpu` stack 0.74 ->
        // 0.43 ms a run.
        parallel_items(ctx, static_cast<std::size_t>(outer), copy_cost(dim * inner), [&](std::size_t b, std::size_t e) {
          for (auto o = static_cast<std::int64_t>(b); o < static_cast<std::int64_t>(e); ++o) {
            const U* row = src + o * dim * inner;
            for (std::size_t k = 0; k < n; ++k) {
              const std::int64_t chunk = parts[k] * inner;
              std::copy_n(row, chunk, dsts[k] + o * chunk);
              row += chunk;
            }
          }
        });
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

}  // namespace
}  // namespace impl

// ---------------------------------------------------------------------------------------------------------------
// The kernel types.

namespace ops {
using namespace impl;

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
  sp.num_outputs = sp.version >= 18 && has_attr(nd, "num_outputs");
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

}  // namespace ops
}  // namespace epstack::cpu
