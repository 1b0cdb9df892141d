// Reductions: ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd, ReduceSumSquare, ReduceL1, ReduceL2,
// ReduceLogSum, ReduceLogSumExp, ArgMax and ArgMin.
//
// The input's dims are collapsed into alternating groups of kept and reduced dims (size-1 dims dropped). When the
// innermost group is reduced, each output reduces contiguous runs with several independent accumulators (the
// compiler vectorises them); when it is kept, each output row accumulates whole input rows, vectorised across the
// kept columns. Outputs (or column blocks) go to the intra-op threads; when there are too few of them to keep the
// threads busy (a full reduction, a reduction down to a handful of values), each output's reduced range is split
// into parts whose partial results are combined at the end.
//
// Empty reductions give the identity of the operation, as ONNX (opset 18 and later spell it out) and numpy do: 0 for
// sums, 1 for ReduceProd, the lowest value (-inf) for ReduceMax, the highest (+inf) for ReduceMin, -inf for
// ReduceLogSum and ReduceLogSumExp (the lowest value for integers), NaN for ReduceMean (0 for integers).
#include "kernel_util.hpp"

namespace epstack::cpu {
namespace impl {
namespace {

enum class rop : std::uint8_t { sum, mean, max, min, prod, sum_square, l1, l2, log_sum, log_sum_exp };

// ---------------------------------------------------------------------------------------------------------------
// Arithmetic helpers: integer sums and products wrap (two's complement) rather than overflow.

template <class A>
A add(A a, A b) {
  if constexpr (std::is_same_v<A, bool>) {
    return a || b;  // only instantiated for bool max/min, never called on a sum
  } else if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <class A>
A mul(A a, A b) {
  if constexpr (std::is_same_v<A, bool>) {
    return a && b;
  } else if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}
template <class A>
A max_of(A a, A b) { return a < b ? b : a; }
template <class A>
A min_of(A a, A b) { return b < a ? b : a; }

// A double converted to the integer type T, saturating (NaN gives 0).
template <class T>
T saturate(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (std::isnan(v)) return 0;
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}
template <class T>
constexpr T lowest_or_minus_inf() {
  if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::lowest();
}
template <class T>
constexpr T highest_or_inf() {
  if constexpr (std::numeric_limits<T>::has_infinity) return std::numeric_limits<T>::infinity();
  else return std::numeric_limits<T>::max();
}

// ---------------------------------------------------------------------------------------------------------------
// The reduction plan

// An index walking a set of (size, stride) dims in row-major order, tracking the element offset.
struct odometer {
  tensor_sizes size, stride, idx;
  std::int64_t offset = 0;

  void seek(std::int64_t i) {
    offset = 0;
    idx.resize(size.size());
    for (std::size_t k = size.size(); k-- > 0;) {
      idx[k] = i % size[k];
      i /= size[k];
      offset += idx[k] * stride[k];
    }
  }
  void next() {
    for (std::size_t k = size.size(); k-- > 0;) {
      offset += stride[k];
      if (++idx[k] < size[k]) return;
      offset -= stride[k] * size[k];
      idx[k] = 0;
    }
  }
};

struct reduce_plan {
  tensor_sizes out_dims;
  std::int64_t O = 1;     // output elements
  std::int64_t R = 1;     // input elements per output
  bool inner_reduced = false;
  std::int64_t inner = 1;  // size of the innermost group (contiguous in the input)
  // inner_reduced: kept = every kept group, red = the reduced groups but the innermost.
  // otherwise: kept = the kept groups but the innermost, red = every reduced group.
  odometer kept, red;
};

Result<reduce_plan> make_plan(std::span<const std::int64_t> dims, std::span<const std::int64_t> axes, bool keepdims,
                              bool noop_with_empty_axes) {
  const std::size_t rank = dims.size();
  std::vector<bool> reduced(rank, false);
  if (axes.empty()) {
    if (!noop_with_empty_axes) reduced.assign(rank, true);
  } else {
    for (const std::int64_t a : axes) {
      const auto ax = normalize_axis(a, rank);
      if (!ax) return bad_axis(a, rank);
      if (reduced[*ax])
        return Status(errc::invalid_argument, cat("axes ", dims_string(axes), " name axis ", std::to_string(*ax), " twice"));
      reduced[*ax] = true;
    }
  }
  reduce_plan p;
  struct group {
    std::int64_t size, stride;
    bool reduced;
  };
  std::vector<group> groups;
  std::int64_t stride = 1;
  for (std::size_t i = rank; i-- > 0;) {
    const std::int64_t d = dims[i];
    if (reduced[i]) p.R *= d;
    else p.O *= d;
    if (d != 1) {
      if (!groups.empty() && groups.back().reduced == reduced[i]) groups.back().size *= d;
      else groups.push_back({d, stride, reduced[i]});
    }
    stride *= d;
  }
  std::reverse(groups.begin(), groups.end());  // outermost first
  for (std::size_t i = 0; i < rank; ++i) {
    if (!reduced[i]) p.out_dims.push_back(dims[i]);
    else if (keepdims) p.out_dims.push_back(1);
  }
  p.inner_reduced = !groups.empty() && groups.back().reduced;
  p.inner = groups.empty() ? 1 : groups.back().size;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (i + 1 == groups.size()) break;  // the innermost group is walked directly
    odometer& o = groups[i].reduced ? p.red : p.kept;
    o.size.push_back(groups[i].size);
    o.stride.push_back(groups[i].stride);
  }
  return p;
}

// Independent accumulators per contiguous run: 32 lets g++ and clang vectorise the lane loops (g++ turns a fully
// unrolled 16-lane max into scalar code).
// Kept columns one work item accumulates when the innermost group is kept.
constexpr std::int64_t column_block = 256;

// Parts each output's reduction is split into, so that a few outputs still keep every thread busy (each part at least
// 4096 elements).
std::int64_t choose_parts(const reduce_plan& p, int threads) {
  if (threads <= 1 || p.R < 8192) return 1;
  const std::int64_t natural = p.inner_reduced ? p.O : (p.O / p.inner) * ((p.inner + column_block - 1) / column_block);
  if (natural >= 2 * threads || p.O * p.R < 65536) return 1;
  const std::int64_t want = (4 * threads + natural - 1) / natural;
  return std::max<std::int64_t>(1, std::min(want, p.R / 4096));
}



// comb over x[0, n) of map(x[i], o), in `lanes` independent accumulators (the identity when n is 0).
template <class T, class A, class Map, class Comb>
A reduce_span(const T* x, std::int64_t n, A identity, std::int64_t o, const Map& map, const Comb& comb) {
  A acc[lanes];
  for (std::size_t j = 0; j < lanes; ++j) acc[j] = identity;
  const auto len = static_cast<std::size_t>(n);
  std::size_t i = 0;
  for (; i + lanes <= len; i += lanes)
    for (std::size_t j = 0; j < lanes; ++j) acc[j] = comb(acc[j], map(x[i + j], o));
  for (std::size_t j = 0; i + j < len; ++j) acc[j] = comb(acc[j], map(x[i + j], o));  // the tail, into the lanes too
  return fold_lanes(acc, comb);
}

// acc[o] = comb over the reduced elements e of output o of map(e, o), for every output o. `acc` holds parts * O
// values (parts from choose_parts); on return the first O hold the results.
template <class T, class A, class Map, class Comb>
void run_reduction(const compute_context& ctx, const reduce_plan& p, const T* x, A* acc, std::int64_t parts, A identity,
                   const Map& map, const Comb& comb) {
  const std::int64_t O = p.O, R = p.R, I = p.inner, P = parts;
  if (p.inner_reduced) {
    parallel_items(ctx, static_cast<std::size_t>(O * P), static_cast<std::size_t>(R / P), [&](std::size_t t0, std::size_t t1) {
      odometer ko = p.kept, ro = p.red;
      std::int64_t last_o = -1;
      for (std::size_t t = t0; t < t1; ++t) {
        const std::int64_t o = static_cast<std::int64_t>(t) / P, part = static_cast<std::int64_t>(t) % P;
        if (o != last_o) {
          if (o == last_o + 1 && last_o >= 0) ko.next();
          else ko.seek(o);
          last_o = o;
        }
        const std::int64_t q0 = R * part / P, q1 = R * (part + 1) / P;
        A a = identity;
        std::int64_t q = q0, i = q0 % I;
        ro.seek(q0 / I);
        while (q < q1) {
          const std::int64_t len = std::min(I - i, q1 - q);
          a = comb(a, reduce_span(x + ko.offset + ro.offset + i, len, identity, o, map, comb));
          q += len;
          i = 0;
          ro.next();
        }
        acc[part * O + o] = a;
      }
    });
  } else {
    const std::int64_t rows = I == 0 ? 0 : O / I;
    const std::int64_t blocks = (I + column_block - 1) / column_block;
    const auto cost = static_cast<std::size_t>(R / P * std::min(I, column_block));
    parallel_items(ctx, static_cast<std::size_t>(rows * blocks * P), cost, [&](std::size_t t0, std::size_t t1) {
      odometer ko = p.kept, ro = p.red;
      for (std::size_t t = t0; t < t1; ++t) {
        const std::int64_t part = static_cast<std::int64_t>(t) % P, rest = static_cast<std::int64_t>(t) / P;
        const std::int64_t b = rest % blocks, row = rest / blocks;
        const std::int64_t c0 = b * column_block, w = std::min(column_block, I - c0);
        ko.seek(row);
        const std::int64_t o0 = row * I + c0;
        A* a = acc + part * O + o0;
        for (std::int64_t k = 0; k < w; ++k) a[k] = identity;
        const std::int64_t q0 = R * part / P, q1 = R * (part + 1) / P;
        ro.seek(q0);
        for (std::int64_t q = q0; q < q1; ++q) {
          const T* xr = x + ko.offset + ro.offset + c0;
          for (std::int64_t k = 0; k < w; ++k) a[k] = comb(a[k], map(xr[k], o0 + k));
          ro.next();
        }
      }
    });
  }
  if (P > 1)
    parallel_elements(ctx, static_cast<std::size_t>(O), [&](std::size_t b, std::size_t e) {
      for (std::size_t o = b; o < e; ++o)
        for (std::int64_t part = 1; part < P; ++part) acc[o] = comb(acc[o], acc[static_cast<std::size_t>(part * O) + o]);
    });
}

// ---------------------------------------------------------------------------------------------------------------
// The Reduce* kernels

struct reduce_attrs {
  std::vector<std::int64_t> axes;
  bool axes_from_input = false;
  bool keepdims = true;
  bool noop_with_empty_axes = false;
};

// Accumulator type: the input type for floating point and for max/min; int64 for integer sums and products.
template <class T, rop Op>
using acc_t = std::conditional_t<std::is_floating_point_v<T> || Op == rop::max || Op == rop::min || Op == rop::log_sum_exp,
                                 T, std::int64_t>;
// Type the exponentials of ReduceLogSumExp are summed in.
template <class T>
using exp_t = std::conditional_t<std::is_floating_point_v<T>, T, double>;

template <class T, rop Op>
Status reduce_compute(const reduce_attrs& at, compute_context& ctx) {
  const tensor& x = ctx.input(0);
  if (x.type() != element_type_of_v<T>)
    return Status(errc::invalid_argument, cat("data must be ", std::string(to_string(element_type_of_v<T>)), ", got ",
                                              std::string(to_string(x.type()))));
  std::vector<std::int64_t> axes = at.axes;
  if (at.axes_from_input && ctx.has_input(1)) axes = to_int64s(ctx.input(1));
  EPSTACK_ASSIGN_OR_RETURN(const reduce_plan p, make_plan(x.sizes(), axes, at.keepdims, at.noop_with_empty_axes));
  tensor& y = ctx.allocate_output(0, x.type(), p.out_dims);
  if (p.O == 0) return {};
  const T* px = x.typed<T>();
  T* out = y.typed<T>();
  const std::int64_t R = p.R;
  using A = acc_t<T, Op>;
  const auto parts = choose_parts(p, ctx.thread_count());
  const auto n_acc = static_cast<std::size_t>(R == 0 ? 0 : p.O * parts);
  const auto identity_map = [](T v, std::int64_t) { return static_cast<A>(v); };
  const auto adder = [](A a, A b) { return add(a, b); };
  const auto finish = [&](auto&& fin) {  // out[o] = fin(o), over the threads
    parallel_elements(ctx, static_cast<std::size_t>(p.O), [&](std::size_t b, std::size_t e) {
      for (std::size_t o = b; o < e; ++o) out[o] = fin(o);
    });
  };

  if constexpr (Op == rop::log_sum_exp) {
    // Pass 1: the max of each output's elements; pass 2: the sum of exp(x - max).
    using E = exp_t<T>;
    tensor mt = ctx.scratch(element_type_of_v<T>, n_acc), st = ctx.scratch(element_type_of_v<E>, n_acc);
    T* m = mt.template typed<T>();
    E* s = st.template typed<E>();
    if (R > 0) {
      run_reduction(ctx, p, px, m, parts, lowest_or_minus_inf<T>(), identity_map, [](T a, T b) { return max_of(a, b); });
      // The shift: the max where finite (an infinite max would turn exp(x - max) into NaN).
      tensor sh = ctx.scratch(element_type_of_v<E>, static_cast<std::size_t>(p.O));
      E* shift = sh.template typed<E>();
      for (std::int64_t o = 0; o < p.O; ++o) {
        const auto v = static_cast<E>(m[o]);
        shift[o] = std::isfinite(v) ? v : E(0);
      }
      run_reduction(ctx, p, px, s, parts, E(0),
                    [shift](T v, std::int64_t o) {
                      const E d = static_cast<E>(v) - shift[o];
                      if constexpr (std::is_same_v<E, float>) return fast_exp(d);
                      else return std::exp(d);
                    },
                    [](E a, E b) { return a + b; });
    }
    finish([&](std::size_t o) {
      if (R == 0) return saturate<T>(-std::numeric_limits<double>::infinity());
      const E mo = static_cast<E>(m[o]);
      if (!std::isfinite(mo)) return static_cast<T>(m[o]);
      return saturate<T>(static_cast<double>(mo + std::log(s[o])));
    });
    return {};
  } else {
    tensor at_ = ctx.scratch(element_type_of_v<A>, n_acc);
    A* acc = at_.template typed<A>();
    A identity{};
    if constexpr (Op == rop::max) identity = lowest_or_minus_inf<A>();
    else if constexpr (Op == rop::min) identity = highest_or_inf<A>();
    else if constexpr (Op == rop::prod) identity = A(1);
    if (R > 0) {
      if constexpr (Op == rop::max) run_reduction(ctx, p, px, acc, parts, identity, identity_map, [](A a, A b) { return max_of(a, b); });
      else if constexpr (Op == rop::min) run_reduction(ctx, p, px, acc, parts, identity, identity_map, [](A a, A b) { return min_of(a, b); });
      else if constexpr (Op == rop::prod) run_reduction(ctx, p, px, acc, parts, identity, identity_map, [](A a, A b) { return mul(a, b); });
      else if constexpr (Op == rop::sum_square || Op == rop::l2)
        run_reduction(ctx, p, px, acc, parts, identity, [](T v, std::int64_t) { return mul(static_cast<A>(v), static_cast<A>(v)); }, adder);
      else if constexpr (Op == rop::l1)
        run_reduction(ctx, p, px, acc, parts, identity,
                      [](T v, std::int64_t) { return v < T(0) ? mul(static_cast<A>(v), A(-1)) : static_cast<A>(v); }, adder);
      else run_reduction(ctx, p, px, acc, parts, identity, identity_map, adder);  // sum, mean, log_sum
    }
    const auto value = [&](std::size_t o) { return R == 0 ? identity : acc[o]; };
    if constexpr (Op == rop::mean) {
      if constexpr (std::is_floating_point_v<T>)
        finish([&](std::size_t o) { return R == 0 ? std::numeric_limits<T>::quiet_NaN() : static_cast<T>(value(o) / static_cast<T>(R)); });
      else finish([&](std::size_t o) { return R == 0 ? T(0) : static_cast<T>(value(o) / R); });
    } else if constexpr (Op == rop::l2) {
      finish([&](std::size_t o) {
        if constexpr (std::is_floating_point_v<T>) return std::sqrt(value(o));
        else return saturate<T>(std::sqrt(static_cast<double>(value(o))));
      });
    } else if constexpr (Op == rop::log_sum) {
      finish([&](std::size_t o) {
        if constexpr (std::is_floating_point_v<T>) return std::log(value(o));
        else return saturate<T>(std::log(static_cast<double>(value(o))));
      });
    } else {
      finish([&](std::size_t o) { return static_cast<T>(value(o)); });
    }
    return {};
  }
}

// ---------------------------------------------------------------------------------------------------------------
// ArgMax and ArgMin

struct arg_attrs {
  std::int64_t axis = 0;
  bool keepdims = true;
  bool select_last = false;
};

template <class T, bool Max>
Status arg_compute(const arg_attrs& at, const char* op, compute_context& ctx) {
  const tensor& x = ctx.input(0);
  if (x.type() != element_type_of_v<T>)
    return Status(errc::invalid_argument, cat("data must be ", std::string(to_string(element_type_of_v<T>)), ", got ",
                                              std::string(to_string(x.type()))));
  const auto dims = x.sizes();
  const auto axis = normalize_axis(at.axis, dims.size());
  if (!axis) return bad_axis(at.axis, dims.size());
  tensor_sizes out_dims;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i != *axis) out_dims.push_back(dims[i]);
    else if (at.keepdims) out_dims.push_back(1);
  }
  const std::int64_t outer = product(dims, 0, *axis), n = dims[*axis], inner = product(dims, *axis + 1);
  if (n == 0 && outer * inner > 0)
    return Status(errc::invalid_argument, cat(op, " over axis ", std::to_string(*axis), " of ", dims_string(dims),
                                              ", which is empty"));
  tensor& y = ctx.allocate_output(0, element_type::int64, out_dims);
  if (y.element_count() == 0) return {};
  const T* px = x.typed<T>();
  std::int64_t* out = y.typed<std::int64_t>();
  const bool last = at.select_last;
  // v replaces the best so far: strictly better, or equal when the last index is wanted.
  const auto better = [last](T v, T best) {
    if constexpr (Max) return last ? !(v < best) : best < v;
    else return last ? !(best < v) : v < best;
  };
  if (inner == 1) {
    // Contiguous rows: the extreme value first (vectorised), then the first (or last) index holding it.
    parallel_items(ctx, static_cast<std::size_t>(outer), static_cast<std::size_t>(n), [&](std::size_t r0, std::size_t r1) {
      const auto pick = [](T a, T b) {
        if constexpr (Max) return a < b ? b : a;
        else return b < a ? b : a;
      };
      for (std::size_t r = r0; r < r1; ++r) {
        const T* row = px + static_cast<std::int64_t>(r) * n;
        const T m = reduce_span(row, n, row[0], 0, [](T v, std::int64_t) { return v; }, pick);
        std::int64_t bi = -1;
        if (last) {
          for (std::int64_t j = n; j-- > 0;)
            if (row[j] == m) {
              bi = j;
              break;
            }
        } else {
          for (std::int64_t j = 0; j < n; ++j)
            if (row[j] == m) {
              bi = j;
              break;
            }
        }
        if (bi < 0) {
          // The extreme is NaN (reduce_span kept a NaN first element): fall back to a plain scan.
          T best = row[0];
          bi = 0;
          for (std::int64_t j = 1; j < n; ++j)
            if (better(row[j], best)) {
              best = row[j];
              bi = j;
            }
        }
        out[r] = bi;
      }
    });
    return {};
  }
  const std::int64_t blocks = (inner + column_block - 1) / column_block;
  parallel_items(ctx, static_cast<std::size_t>(outer * blocks), static_cast<std::size_t>(n * std::min(inner, column_block)),
                 [&](std::size_t t0, std::size_t t1) {
                   T best[column_block];
                   for (std::size_t t = t0; t < t1; ++t) {
                     const std::int64_t o = static_cast<std::int64_t>(t) / blocks, c0 = static_cast<std::int64_t>(t) % blocks * column_block;
                     const std::int64_t w = std::min(column_block, inner - c0);
                     const T* base = px + o * n * inner + c0;
                     std::int64_t* idx = out + o * inner + c0;
                     for (std::int64_t k = 0; k < w; ++k) {
                       best[k] = base[k];
                       idx[k] = 0;
                     }
                     for (std::int64_t j = 1; j < n; ++j) {
                       const T* row = base + j * inner;
                       for (std::int64_t k = 0; k < w; ++k) {
                         const bool b = better(row[k], best[k]);
                         best[k] = b ? row[k] : best[k];
                         idx[k] = b ? j : idx[k];
                       }
                     }
                   }
                 });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// Compile helpers

#define EPSTACK_REDUCE_TYPES float, double, std::int32_t, std::int64_t
#define EPSTACK_MINMAX_TYPES float, double, std::int32_t, std::int64_t, std::int8_t, std::uint8_t
// ReduceMax/ReduceMin-20 also take bool (any / all).
#define EPSTACK_MINMAX_REDUCE_TYPES EPSTACK_MINMAX_TYPES, bool

bool axes_input_ok(const graph& g, node_id n) {
  if (!has_in(g, n, 1)) return true;
  const auto e = in_type(g, n, 1);
  return e == element_type::int64 || e == element_type::int32;
}

reduce_attrs read_reduce_attrs(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  reduce_attrs at;
  at.keepdims = attr_i(nd, "keepdims", 1) != 0;
  at.noop_with_empty_axes = attr_i(nd, "noop_with_empty_axes", 0) != 0;
  // Axes come from the optional second input (ReduceSum from opset 13, every reduction from opset 18) when the node
  // has one, else from the attribute.
  at.axes_from_input = has_in(g, n, 1);
  at.axes = attr_ints(nd, "axes");
  return at;
}

template <rop Op, class... Ts>
Result<compute_function> compile_reduce(const graph& g, node_id n) {
  const reduce_attrs at = read_reduce_attrs(g, n);
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<Ts...>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn(g.node(n).op_type, [at](compute_context& ctx) { return reduce_compute<T, Op>(at, ctx); });
  });
  return r;
}

template <bool Max>
Result<compute_function> compile_arg(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  arg_attrs at;
  at.axis = attr_i(nd, "axis", 0);
  at.keepdims = attr_i(nd, "keepdims", 1) != 0;
  at.select_last = attr_i(nd, "select_last_index", 0) != 0;
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_MINMAX_TYPES>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn(nd.op_type, [at](compute_context& ctx) { return arg_compute<T, Max>(at, Max ? "ArgMax" : "ArgMin", ctx); });
  });
  return r;
}

}  // namespace
}  // namespace impl

// ---------------------------------------------------------------------------------------------------------------
// The kernel types.

namespace ops {
using namespace impl;

#define EPSTACK_REDUCE_KERNEL(K, Op, ...)                                                                   \
  bool K::supports(const graph& g, node_id n) { return type_in<__VA_ARGS__>(in_type(g, n, 0)) && axes_input_ok(g, n); } \
  Result<compute_function> K::compile(const graph& g, node_id n) { return compile_reduce<Op, __VA_ARGS__>(g, n); }

EPSTACK_REDUCE_KERNEL(reduce_mean, rop::mean, EPSTACK_REDUCE_TYPES)
EPSTACK_REDUCE_KERNEL(reduce_sum, rop::sum, EPSTACK_REDUCE_TYPES)
EPSTACK_REDUCE_KERNEL(reduce_max, rop::max, EPSTACK_MINMAX_REDUCE_TYPES)
EPSTACK_REDUCE_KERNEL(reduce_min, rop::min, EPSTACK_MINMAX_REDUCE_TYPES)
EPSTACK_REDUCE_KERNEL(reduce_prod, rop::prod, EPSTACK_REDUCE_TYPES)
EPSTACK_REDUCE_KERNEL(reduce_sum_square, rop::sum_square, EPSTACK_REDUCE_TYPES)
EPSTACK_REDUCE_KERNEL(reduce_l1, rop::l1, EPSTACK_REDUCE_TYPES)
EPSTACK_REDUCE_KERNEL(reduce_l2, rop::l2, EPSTACK_REDUCE_TYPES)
EPSTACK_REDUCE_KERNEL(reduce_log_sum, rop::log_sum, EPSTACK_REDUCE_TYPES)
EPSTACK_REDUCE_KERNEL(reduce_log_sum_exp, rop::log_sum_exp, EPSTACK_REDUCE_TYPES)

bool arg_max::supports(const graph& g, node_id n) { return type_in<EPSTACK_MINMAX_TYPES>(in_type(g, n, 0)); }
Result<compute_function> arg_max::compile(const graph& g, node_id n) { return compile_arg<true>(g, n); }
bool arg_min::supports(const graph& g, node_id n) { return type_in<EPSTACK_MINMAX_TYPES>(in_type(g, n, 0)); }
Result<compute_function> arg_min::compile(const graph& g, node_id n) { return compile_arg<false>(g, n); }

}  // namespace ops
}  // namespace epstack::cpu
