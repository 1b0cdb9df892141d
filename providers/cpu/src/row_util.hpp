#pragma once
// Helpers shared by the row-major index-arithmetic kernels (TopK, NonZero, CumSum, Resize, Einsum, GatherElements,
// Tile, Pad): number text, opset and element-type checks, saturating conversion from double, row-major strides, loops
// split into per-thread pieces, and the per-axis table gather that Resize (nearest) and Pad are instances of. Private
// to the epstack::cpu library.
#include "kernel_util.hpp"

namespace epstack::cpu::impl {

using dims_t = std::vector<std::int64_t>;

inline std::string str(std::int64_t v) { return std::to_string(v); }
inline dims_t to_dims(std::span<const std::int64_t> s) { return dims_t(s.begin(), s.end()); }

/// The node's resolved opset version; 0 (unknown) is read as the newest.
inline int opset_of(const node& nd) { return nd.since_version == 0 ? 1 << 20 : nd.since_version; }

/// A double converted to T, saturating for integers (NaN becomes 0).
template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, bool>) return v != 0.0;
  else if constexpr (is_half_v<T>) return T(static_cast<float>(v));
  else if constexpr (std::is_integral_v<T>) {
    if (std::isnan(v)) return T(0);
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    return static_cast<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

/// How many pieces to split n items of `cost` element operations each into (1: run serially).
inline std::size_t piece_count(const compute_context& ctx, std::size_t n, std::size_t cost) {
  if (ctx.thread_count() == 1 || n < 2 || n * std::max<std::size_t>(cost, 1) < 32768) return 1;
  return std::min<std::size_t>(n, static_cast<std::size_t>(ctx.thread_count()) * 4);
}
/// f(piece, begin, end) over `pieces` contiguous ranges covering [0, n), on the intra-op threads. Lets a loop own
/// per-piece buffers allocated before it starts.
template <class F>
void for_pieces(const compute_context& ctx, std::size_t n, std::size_t pieces, F&& f) {
  if (pieces <= 1) {
    f(std::size_t{0}, std::size_t{0}, n);
    return;
  }
  ctx.parallel_for(pieces, 1, [&](std::size_t p0, std::size_t p1) {
    for (std::size_t p = p0; p < p1; ++p) f(p, n * p / pieces, n * (p + 1) / pieces);
  });
}

/// out[i_0..i_r-1] = src[tab_0[i_0], ..., tab_r-1[i_r-1]], or `fill` where any table entry is -1. Resize (nearest)
/// and Pad are instances of it.
template <class T>
void table_gather(const compute_context& ctx, const T* src, std::span<const std::int64_t> in_dims,
                  std::span<const std::int64_t> out_dims, const std::vector<dims_t>& tab, const T& fill, T* dst) {
  const std::size_t r = out_dims.size();
  const std::int64_t count = product(out_dims);
  if (count == 0) return;
  if (r == 0) {
    dst[0] = src[0];
    return;
  }
  const dims_t istride = strides_of(in_dims);
  const std::int64_t L = out_dims[r - 1];
  const std::int64_t rows = count / L;
  // The last axis as a whole number of copies of each input element (last[j] = j / k: nearest upsampling by k, k = 1
  // a plain copy), or 0 when it is anything else.
  const std::int64_t* last = tab[r - 1].data();
  std::int64_t repeat = in_dims[r - 1] > 0 && L % in_dims[r - 1] == 0 ? L / in_dims[r - 1] : 0;
  for (std::int64_t j = 0; j < L && repeat > 0; ++j)
    if (last[j] != j / repeat) repeat = 0;
  auto body = [&](std::size_t r0, std::size_t r1) {
    std::int64_t prev_base = -1;
    for (std::size_t row = r0; row < r1; ++row) {
      std::int64_t rem = static_cast<std::int64_t>(row), base = 0;
      bool outside = false;
      for (std::size_t d = r - 1; d-- > 0;) {
        const std::int64_t i = rem % out_dims[d];
        rem /= out_dims[d];
        const std::int64_t t = tab[d][static_cast<std::size_t>(i)];
        if (t < 0) outside = true;
        else base += t * istride[d];
      }
      T* o = dst + static_cast<std::int64_t>(row) * L;
      if (outside) {
        std::fill_n(o, L, fill);
        prev_base = -1;
        continue;
      }
      if (base == prev_base) {  // the row above read the same input row (upsampling): copy it
        std::copy_n(o - L, L, o);
        continue;
      }
      prev_base = base;
      const T* s = src + base;
      if (repeat == 1) {
        std::copy_n(s, L, o);
      } else if (repeat == 2) {
        for (std::int64_t j = 0; j < L / 2; ++j) o[2 * j] = o[2 * j + 1] = s[j];
      } else if (repeat > 2) {
        for (std::int64_t j = 0; j < L / repeat; ++j) std::fill_n(o + j * repeat, repeat, s[j]);
      } else {
        for (std::int64_t j = 0; j < L; ++j) o[j] = last[j] < 0 ? fill : s[last[j]];
      }
    }
  };
  if constexpr (std::is_same_v<T, std::string>) body(0, static_cast<std::size_t>(rows));  // copies allocate: serial
  else parallel_items(ctx, static_cast<std::size_t>(rows), static_cast<std::size_t>(L), body);
}

/// CumSum and CumProd: y along axis `ax` of `x` (sizes `dims`) is the running `op` of x from the start (or, with
/// `reverse`, the end), each element included, or with `exclusive` the one before it (`identity` first). Items are
/// (outer index, block of the inner dims); each runs down the axis with the inner block as a vector.
template <class T, class Op>
void scan_axis(const compute_context& ctx, const T* px, T* py, std::span<const std::int64_t> dims, std::size_t ax,
               bool exclusive, bool reverse, T identity, Op op) {
  const std::int64_t outer = product(dims, 0, ax), n = dims[ax], inner = product(dims, ax + 1);
  if (inner == 1) {
    // Along the last axis: each row is one running value (the blocked loop below would run one column at a time).
    parallel_items(ctx, static_cast<std::size_t>(outer), static_cast<std::size_t>(n), [&](std::size_t i0, std::size_t i1) {
      for (std::size_t row = i0; row < i1; ++row) {
        const T* xs = px + static_cast<std::int64_t>(row) * n;
        T* ys = py + static_cast<std::int64_t>(row) * n;
        const std::int64_t first = reverse ? n - 1 : 0, step = reverse ? -1 : 1;
        T acc = exclusive ? identity : xs[first];
        ys[first] = acc;
        for (std::int64_t s = 1, i = first + step; s < n; ++s, i += step) {
          acc = op(acc, xs[exclusive ? i - step : i]);
          ys[i] = acc;
        }
      }
    });
    return;
  }
  constexpr std::int64_t blk = 1024;
  const std::int64_t nblk = (inner + blk - 1) / blk;
  parallel_items(ctx, static_cast<std::size_t>(outer * nblk), static_cast<std::size_t>(n * std::min(inner, blk)),
                 [&](std::size_t i0, std::size_t i1) {
                   for (std::size_t item = i0; item < i1; ++item) {
                     const std::int64_t o = static_cast<std::int64_t>(item) / nblk, b = static_cast<std::int64_t>(item) % nblk;
                     const std::int64_t j0 = b * blk, j1 = std::min(inner, j0 + blk);
                     const T* xs = px + o * n * inner;
                     T* ys = py + o * n * inner;
                     for (std::int64_t s = 0; s < n; ++s) {
                       const std::int64_t i = reverse ? n - 1 - s : s, prev = reverse ? i + 1 : i - 1;
                       T* yr = ys + i * inner;
                       if (s == 0) {
                         const T* xr = xs + i * inner;
                         for (std::int64_t j = j0; j < j1; ++j) yr[j] = exclusive ? identity : xr[j];
                       } else {
                         const T* yp = ys + prev * inner;
                         const T* xr = xs + (exclusive ? prev : i) * inner;
                         for (std::int64_t j = j0; j < j1; ++j) yr[j] = op(yp[j], xr[j]);
                       }
                     }
                   }
                 });
}

}  // namespace epstack::cpu::impl
