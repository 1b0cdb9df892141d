// Element-wise kernels: unary math and activations, binary and n-ary ops with numpy broadcasting, comparisons,
// logic, Where, Clip, and the contrib Gelu/BiasGelu. Loops are plain and branch-free so the compiler vectorises them;
// large tensors are split across the intra-op threads. float16 and bfloat16 are computed in float, by the float
// kernel's functor over blocks widened into a stack buffer, each result rounded once.
// Over 700 lines on purpose: every element-wise kernel is one line over the dispatch templates at the top (one
// per arity, each with its float16/bfloat16 path), which only this file uses; splitting would export them.
#include "broadcast.hpp"
#include "kernel_util.hpp"

#include <type_traits>

namespace epstack::cpu {
namespace impl {

namespace {

/// Elements per block of the float16/bfloat16 loops (converted into a stack buffer, computed in float, rounded back).
constexpr std::size_t half_block = 256;
bool is_half_type(element_type e) { return e == element_type::float16 || e == element_type::bfloat16; }

// ---------------------------------------------------------------------------------------------------------------
// Unary

template <class T, class Fn>
compute_function unary_fn(std::string op, Fn fn) {
  return make_fn(std::move(op), [fn](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (x.type() != element_type_of_v<T>) return Status(errc::invalid_argument, "unexpected input element type");
    tensor& y = ctx.allocate_output(0, x.type(), x.sizes());
    const T* in = x.typed<T>();
    T* out = y.typed<T>();
    parallel_elements(ctx, x.element_count(), [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) out[i] = fn(in[i]);
    });
    return {};
  });
}

// A unary op over float16 or bfloat16 H: `fn` is the float kernel's functor, applied to blocks widened to float; each
// result is rounded to H once.
template <class H, class Fn>
compute_function unary_half_fn(std::string op, Fn fn) {
  return make_fn(std::move(op), [fn](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    if (x.type() != element_type_of_v<H>) return Status(errc::invalid_argument, "unexpected input element type");
    tensor& y = ctx.allocate_output(0, x.type(), x.sizes());
    const H* in = x.typed<H>();
    H* out = y.typed<H>();
    parallel_elements(ctx, x.element_count(), [&](std::size_t b, std::size_t e) {
      float buf[half_block];
      for (std::size_t i = b; i < e; i += half_block) {
        const std::size_t m = std::min(half_block, e - i);
        widen_half(in + i, buf, m);
        for (std::size_t j = 0; j < m; ++j) buf[j] = static_cast<float>(fn(buf[j]));
        narrow_half(buf, out + i, m);
      }
    });
    return {};
  });
}

// Compiles a unary op over the types `Ts...`: Make(type_tag<T>) returns the functor for T. For float16 and bfloat16,
// Make(type_tag<float>) is computed in float.
template <class... Ts, class Make>
Result<compute_function> unary_over(const graph& g, node_id n, Make make) {
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<Ts...>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_half_v<T>) r = unary_half_fn<T>(g.node(n).op_type, make(type_tag<std::conditional_t<is_half_v<T>, float, T>>{})  /* dependent: clang checks a non-dependent call in a discarded branch */);
    else r = unary_fn<T>(g.node(n).op_type, make(tag));
  });
  return r;
}
// float16 and bfloat16 with the float functor `fn` (for ops whose float kernel uses a dedicated function).
template <class Fn>
Result<compute_function> unary_half(const graph& g, node_id n, Fn fn) {
  return unary_over<float16, bfloat16>(g, n, [fn](auto) { return fn; });
}
template <class... Ts>
bool input_is(const graph& g, node_id n) {
  const auto e = in_type(g, n, 0);
  return ((element_type_of_v<Ts> == e) || ...);
}

#define EPSTACK_FLOATS float, double
#define EPSTACK_SIGNED float, double, std::int8_t, std::int16_t, std::int32_t, std::int64_t
// The 16-bit floats, computed in float.
#define EPSTACK_HALVES ::epstack::float16, ::epstack::bfloat16
#define EPSTACK_FLOATS_H EPSTACK_FLOATS, EPSTACK_HALVES
#define EPSTACK_SIGNED_H EPSTACK_SIGNED, EPSTACK_HALVES

// ---------------------------------------------------------------------------------------------------------------
// Binary with broadcasting

// out[i] = fn(a[i], b[i]) for i < n: `va` / `vb` false means one value of a / b for every i. One instance per op and
// type serves the whole-tensor loops and the broadcast rows (not inlined into each: their four loops are most of this
// file's compile time); a call per row or per thread's range costs nothing beside the loop.
template <class T, class R, class Fn>
[[gnu::noinline]] void binary_run(const T* a, bool va, const T* b, bool vb, R* out, std::size_t n, const Fn& fn) {
  if (va && vb) for (std::size_t i = 0; i < n; ++i) out[i] = fn(a[i], b[i]);
  else if (va) { const T v = *b; for (std::size_t i = 0; i < n; ++i) out[i] = fn(a[i], v); }
  else if (vb) { const T v = *a; for (std::size_t i = 0; i < n; ++i) out[i] = fn(v, b[i]); }
  else std::fill_n(out, n, static_cast<R>(fn(*a, *b)));
}

// y[i] = a (op) b over the broadcast shape, R the output element type: run(x, vx, y, vy, out, m) computes m outputs from
// m values of x (one when vx is false) and of y, over the whole tensors split across the threads when each input is
// whole or a single value, else row by row of the broadcast plan.
template <class T, class R, class Run>
Status binary_broadcast(compute_context& ctx, const tensor& a, const tensor& b, const Run& run) {
  EPSTACK_ASSIGN_OR_RETURN(auto shape, broadcast_shape(a.sizes(), b.sizes()));
  tensor& y = ctx.allocate_output(0, element_type_of_v<R>, shape);
  const T* pa = a.typed<T>();
  const T* pb = b.typed<T>();
  R* py = y.typed<R>();
  const std::size_t n = y.element_count();
  if (n == 0) return {};
  const bool full_a = a.element_count() == n, full_b = b.element_count() == n;
  if ((full_a || a.element_count() == 1) && (full_b || b.element_count() == 1)) {
    parallel_elements(ctx, n, [&](std::size_t s, std::size_t e) {
      run(pa + (full_a ? s : 0), full_a, pb + (full_b ? s : 0), full_b, py + s, e - s);
    });
    return {};
  }
  const broadcast_plan<2> plan(shape, {a.sizes(), b.sizes()});
  const std::int64_t inner = plan.inner;
  const bool sa = plan.inner_stride[0] != 0, sb = plan.inner_stride[1] != 0;
  parallel_items(ctx, static_cast<std::size_t>(plan.rows), static_cast<std::size_t>(inner), [&](std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {
      const auto off = plan.row_offsets(static_cast<std::int64_t>(r));
      run(pa + off[0], sa, pb + off[1], sb, py + static_cast<std::int64_t>(r) * inner, static_cast<std::size_t>(inner));
    }
  });
  return {};
}

// y = fn(a, b) over the broadcast shape; R is the output element type.
template <class T, class R, class Fn>
[[gnu::noinline]] Status binary_apply(compute_context& ctx, const tensor& a, const tensor& b, Fn fn) {
  return binary_broadcast<T, R>(ctx, a, b, [&](const T* x, bool vx, const T* z, bool vz, R* out, std::size_t m) {
    if (m < 16) {  // short rows in place: a call each would cost as much as the row
      for (std::size_t i = 0; i < m; ++i) out[i] = fn(x[vx ? i : 0], z[vz ? i : 0]);
    } else {
      binary_run<T, R>(x, vx, z, vz, out, m, fn);
    }
  });
}

// out[i] = fn(a[i], b[i]) for i < n over float16 or bfloat16 H, in float: `va` / `vb` false means one value of a / b for
// every i. R is H (results rounded once) or bool (comparisons).
template <class H, class R, class Fn>
[[gnu::noinline]] void half_binary_run(const H* a, bool va, const H* b, bool vb, R* out, std::size_t n, const Fn& fn) {
  float fa[half_block], fb[half_block];
  const float a0 = va ? 0.0f : static_cast<float>(*a), b0 = vb ? 0.0f : static_cast<float>(*b);
  for (std::size_t i = 0; i < n; i += half_block) {
    const std::size_t m = std::min(half_block, n - i);
    if (va) widen_half(a + i, fa, m);
    if (vb) widen_half(b + i, fb, m);
    const auto compute = [&](auto* dst) {
      using D = std::remove_pointer_t<decltype(dst)>;
      if (va && vb) for (std::size_t j = 0; j < m; ++j) dst[j] = static_cast<D>(fn(fa[j], fb[j]));
      else if (va) for (std::size_t j = 0; j < m; ++j) dst[j] = static_cast<D>(fn(fa[j], b0));
      else if (vb) for (std::size_t j = 0; j < m; ++j) dst[j] = static_cast<D>(fn(a0, fb[j]));
      else std::fill_n(dst, m, static_cast<D>(fn(a0, b0)));
    };
    if constexpr (std::is_same_v<R, bool>) {
      compute(out + i);
    } else {
      float fy[half_block];
      compute(fy);
      narrow_half(fy, out + i, m);
    }
  }
}

// binary_apply for float16 or bfloat16 inputs: `fn` is the float kernel's functor.
template <class H, class R, class Fn>
[[gnu::noinline]] Status binary_apply_half(compute_context& ctx, const tensor& a, const tensor& b, Fn fn) {
  return binary_broadcast<H, R>(ctx, a, b, [&](const H* x, bool vx, const H* z, bool vz, R* out, std::size_t m) {
    half_binary_run<H, R>(x, vx, z, vz, out, m, fn);
  });
}

template <class T>
Status check_same_type(const tensor& a, const tensor& b) {
  if (a.type() != element_type_of_v<T> || b.type() != element_type_of_v<T>)
    return Status(errc::invalid_argument, cat("inputs must both be ", std::string(to_string(element_type_of_v<T>)),
                                              ", got ", std::string(to_string(a.type())), " and ",
                                              std::string(to_string(b.type()))));
  return {};
}

// A binary op over input types Ts: arithmetic (output type = input type) or a comparison (bool output). `swap` runs
// fn(b, a): Greater is Less with its inputs swapped (NaN compares false either way), one instance for both.
template <bool Compare, class... Ts, class Make>
Result<compute_function> binary_over(const graph& g, node_id n, Make make, bool swap = false) {
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<Ts...>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Out = std::conditional_t<Compare, bool, T>;
    if constexpr (is_half_v<T>) {
      auto fn = make(type_tag<std::conditional_t<is_half_v<T>, float, T>>{})  /* dependent: clang checks a non-dependent call in a discarded branch */;
      r = make_fn(g.node(n).op_type, [fn, swap](compute_context& ctx) -> Status {
        EPSTACK_RETURN_IF_ERROR(check_same_type<T>(ctx.input(0), ctx.input(1)));
        return binary_apply_half<T, Out>(ctx, ctx.input(swap ? 1 : 0), ctx.input(swap ? 0 : 1), fn);
      });
    } else {
      auto fn = make(tag);
      r = make_fn(g.node(n).op_type, [fn, swap](compute_context& ctx) -> Status {
        EPSTACK_RETURN_IF_ERROR(check_same_type<T>(ctx.input(0), ctx.input(1)));
        return binary_apply<T, Out>(ctx, ctx.input(swap ? 1 : 0), ctx.input(swap ? 0 : 1), fn);
      });
    }
  });
  return r;
}
template <class... Ts, class Make>
Result<compute_function> arith_over(const graph& g, node_id n, Make make) {
  return binary_over<false, Ts...>(g, n, make);
}
template <class... Ts, class Make>
Result<compute_function> compare_over(const graph& g, node_id n, Make make, bool swap = false) {
  return binary_over<true, Ts...>(g, n, make, swap);
}
bool binary_types_match(const graph& g, node_id n) {
  const auto a = in_type(g, n, 0), b = in_type(g, n, 1);
  return a != element_type::undefined && a == b;
}
template <class... Ts>
bool binary_is(const graph& g, node_id n) {
  return binary_types_match(g, n) && input_is<Ts...>(g, n);
}

#define EPSTACK_ARITH float, double, std::int32_t, std::int64_t, std::int8_t, std::int16_t, std::uint8_t, \
                      std::uint16_t, std::uint32_t, std::uint64_t

// Integer division as ONNX (and numpy's C semantics for Div): truncation; division by zero gives 0 rather than a trap.
template <class T>
T safe_div(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return a / b;
  else {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>)
      if (b == -1) return static_cast<T>(0 - a);
    return static_cast<T>(a / b);
  }
}

// Pow: base T, exponent of any numeric type E.
template <class T, class E>
T pow_value(T x, E y) {
  if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_integral_v<E>) {
      if (y < 0) return static_cast<T>(x == 1 ? 1 : (x == -1 ? (y % 2 ? -1 : 1) : 0));
      // In the unsigned type: an overflow wraps (as ONNX Runtime's results do) instead of being undefined.
      using U = std::make_unsigned_t<T>;
      U r = 1, b = static_cast<U>(x);
      for (auto e = static_cast<std::uint64_t>(y); e; e >>= 1, b = static_cast<U>(b * b))
        if (e & 1) r = static_cast<U>(r * b);
      return static_cast<T>(r);
    } else {
      return static_cast<T>(std::pow(static_cast<double>(x), static_cast<double>(y)));
    }
  } else {
    return static_cast<T>(std::pow(x, static_cast<T>(y)));
  }
}

Result<compute_function> compile_pow(const graph& g, node_id n) {
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element types");
  const auto* ec = constant_input(g, n, 1);
  // The common exporter pattern Pow(x, 2) with a float scalar exponent: a multiply.
  if (in_type(g, n, 0) == element_type::float32 && ec != nullptr && ec->type() == element_type::float32 &&
      ec->element_count() == 1) {
    const float e = *ec->typed<float>();
    if (e == 2.0f) return unary_fn<float>("Pow", [](float x) { return x * x; });
    if (e == 1.0f) return unary_fn<float>("Pow", [](float x) { return x; });
    if (e == 0.5f) return unary_fn<float>("Pow", [](float x) { return std::sqrt(x); });
    if (e == 3.0f) return unary_fn<float>("Pow", [](float x) { return x * x * x; });
  }
  // The same for a float16 or bfloat16 base, in float.
  if (is_half_type(in_type(g, n, 0)) && ec != nullptr && ec->type() == element_type::float32 && ec->element_count() == 1) {
    const float e = *ec->typed<float>();
    if (e == 2.0f) return unary_half(g, n, [](float x) { return x * x; });
    if (e == 1.0f) return unary_half(g, n, [](float x) { return x; });
    if (e == 0.5f) return unary_half(g, n, [](float x) { return std::sqrt(x); });
    if (e == 3.0f) return unary_half(g, n, [](float x) { return x * x * x; });
  }
  // The exponent is read as one of three types (double for the floating types, int64 / uint64 for the signed /
  // unsigned integers), each of its values exactly: one instance per base type and class, not per exponent type.
  const element_type et = in_type(g, n, 1);
  const auto with_class = [&](auto f) {
    if (is_float(et)) f(type_tag<double>{});
    else if (et == element_type::int8 || et == element_type::int16 || et == element_type::int32 || et == element_type::int64)
      f(type_tag<std::int64_t>{});
    else if (is_integer(et)) f(type_tag<std::uint64_t>{});
  };
  dispatch<float, double, std::int32_t, std::int64_t, EPSTACK_HALVES>(in_type(g, n, 0), [&](auto tb) {
    using T = typename decltype(tb)::type;
    with_class([&](auto tc) {
      using E = typename decltype(tc)::type;
      r = make_fn("Pow", [et](compute_context& ctx) -> Status {
        const tensor& a = ctx.input(0);
        const tensor& b = ctx.input(1);
        if (a.type() != element_type_of_v<T> || b.type() != et)
          return Status(errc::invalid_argument, "unexpected element types");
        EPSTACK_ASSIGN_OR_RETURN(auto shape, broadcast_shape(a.sizes(), b.sizes()));
        tensor& y = ctx.allocate_output(0, a.type(), shape);
        const T* pa = a.typed<T>();
        T* py = y.typed<T>();
        tensor e = ctx.scratch(element_type_of_v<E>, b.element_count());
        E* pb = e.typed<E>();
        dispatch<EPSTACK_ARITH, EPSTACK_HALVES>(et, [&](auto ts) {
          using S = typename decltype(ts)::type;
          if constexpr (std::is_floating_point_v<E> == (std::is_floating_point_v<S> || is_half_v<S>)) {
            const S* src = b.typed<S>();
            for (std::size_t i = 0; i < b.element_count(); ++i) {
              if constexpr (is_half_v<S>) pb[i] = static_cast<E>(static_cast<float>(src[i]));
              else pb[i] = static_cast<E>(src[i]);
            }
          }
        });
        const broadcast_plan<2> plan(shape, {a.sizes(), b.sizes()});
        // A float16/bfloat16 base: as float, the result rounded once.
        using TF = std::conditional_t<is_half_v<T>, float, T>;
        for (std::int64_t row = 0; row < plan.rows; ++row) {
          const auto off = plan.row_offsets(row);
          for (std::int64_t i = 0; i < plan.inner; ++i)
            py[row * plan.inner + i] = static_cast<T>(pow_value<TF, E>(static_cast<TF>(pa[off[0] + i * plan.inner_stride[0]]),
                                                                      pb[off[1] + i * plan.inner_stride[1]]));
        }
        return {};
      });
    });
  });
  return r;
}

// Max, Min, Sum, Mean: every input of element type T, broadcast together; the output's shape.
template <class T>
Result<tensor_sizes> nary_shape(const compute_context& ctx) {
  const std::size_t k = ctx.input_count();
  if (k == 0) return Status(errc::invalid_argument, "needs at least one input");
  std::vector<std::span<const std::int64_t>> shapes;
  for (std::size_t i = 0; i < k; ++i) {
    if (ctx.input(i).type() != element_type_of_v<T>) return Status(errc::invalid_argument, "inputs differ in element type");
    shapes.push_back(ctx.input(i).sizes());
  }
  return broadcast_shape(shapes);
}

// Max, Min, Sum, Mean: variadic with broadcasting, folded pairwise into the output.
template <class T, class Fn>
Status nary_apply(compute_context& ctx, Fn fn, bool mean) {
  const std::size_t k = ctx.input_count();
  EPSTACK_ASSIGN_OR_RETURN(auto shape, nary_shape<T>(ctx));
  tensor& y = ctx.allocate_output(0, element_type_of_v<T>, shape);
  T* py = y.typed<T>();
  const std::size_t n = y.element_count();
  for (std::size_t i = 0; i < k; ++i) {
    const tensor& x = ctx.input(i);
    const T* px = x.typed<T>();
    const broadcast_plan<1> plan(shape, {x.sizes()});
    for (std::int64_t r = 0; r < plan.rows; ++r) {
      const auto off = plan.row_offsets(r);
      T* out = py + r * plan.inner;
      for (std::int64_t j = 0; j < plan.inner; ++j) {
        const T v = px[off[0] + j * plan.inner_stride[0]];
        out[j] = i == 0 ? v : fn(out[j], v);
      }
    }
  }
  if constexpr (std::is_arithmetic_v<T>) {
    if (mean)
      for (std::size_t i = 0; i < n; ++i) py[i] = static_cast<T>(py[i] / static_cast<T>(k));
  } else {
    if (mean)
      for (std::size_t i = 0; i < n; ++i) py[i] = T(static_cast<float>(py[i]) / static_cast<float>(k));
  }
  return {};
}
// nary_apply over float16 or bfloat16 H: folded into float accumulators (in input order, as the float kernel folds),
// divided for Mean, then rounded once.
template <class H, class Fn>
Status nary_apply_half(compute_context& ctx, Fn fn, bool mean) {
  const std::size_t k = ctx.input_count();
  EPSTACK_ASSIGN_OR_RETURN(auto shape, nary_shape<H>(ctx));
  tensor& y = ctx.allocate_output(0, element_type_of_v<H>, shape);
  const std::size_t n = y.element_count();
  if (n == 0) return {};
  tensor acc_t = ctx.scratch(element_type::float32, n);
  float* acc = acc_t.typed<float>();
  for (std::size_t i = 0; i < k; ++i) {
    const tensor& x = ctx.input(i);
    const H* px = x.typed<H>();
    const broadcast_plan<1> plan(shape, {x.sizes()});
    const auto inner = static_cast<std::size_t>(plan.inner);
    parallel_items(ctx, static_cast<std::size_t>(plan.rows), inner, [&](std::size_t r0, std::size_t r1) {
      float buf[half_block];
      for (std::size_t r = r0; r < r1; ++r) {
        const auto off = plan.row_offsets(static_cast<std::int64_t>(r));
        float* out = acc + r * inner;
        if (plan.inner_stride[0] == 0) {
          const float v = static_cast<float>(px[off[0]]);
          if (i == 0) std::fill_n(out, inner, v);
          else for (std::size_t j = 0; j < inner; ++j) out[j] = static_cast<float>(fn(out[j], v));
          continue;
        }
        for (std::size_t j0 = 0; j0 < inner; j0 += half_block) {
          const std::size_t m = std::min(half_block, inner - j0);
          if (i == 0) {
            widen_half(px + off[0] + static_cast<std::int64_t>(j0), out + j0, m);
          } else {
            widen_half(px + off[0] + static_cast<std::int64_t>(j0), buf, m);
            for (std::size_t j = 0; j < m; ++j) out[j0 + j] = static_cast<float>(fn(out[j0 + j], buf[j]));
          }
        }
      }
    });
  }
  if (mean)
    for (std::size_t i = 0; i < n; ++i) acc[i] = acc[i] / static_cast<float>(k);
  store_as_half(ctx, acc, y);
  return {};
}

template <class Make>
Result<compute_function> nary_over(const graph& g, node_id n, Make make, bool mean) {
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_ARITH, EPSTACK_HALVES>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_half_v<T>) {
      auto fn = make(type_tag<std::conditional_t<is_half_v<T>, float, T>>{})  /* dependent: clang checks a non-dependent call in a discarded branch */;
      r = make_fn(g.node(n).op_type, [fn, mean](compute_context& ctx) { return nary_apply_half<T>(ctx, fn, mean); });
    } else {
      auto fn = make(tag);
      r = make_fn(g.node(n).op_type, [fn, mean](compute_context& ctx) { return nary_apply<T>(ctx, fn, mean); });
    }
  });
  return r;
}

// Where(cond, x, y) with three-way broadcasting, for any element type (strings included).
template <class T>
Status where_apply(compute_context& ctx) {
  const tensor& c = ctx.input(0);
  const tensor& x = ctx.input(1);
  const tensor& y = ctx.input(2);
  if (c.type() != element_type::boolean) return Status(errc::invalid_argument, "the condition must be bool");
  if (x.type() != y.type()) return Status(errc::invalid_argument, "X and Y differ in element type");
  const std::span<const std::int64_t> shapes[] = {c.sizes(), x.sizes(), y.sizes()};
  EPSTACK_ASSIGN_OR_RETURN(auto shape, broadcast_shape(shapes));
  tensor& out = ctx.allocate_output(0, x.type(), shape);
  const bool* pc = c.typed<bool>();
  const T* px = x.typed<T>();
  const T* py = y.typed<T>();
  T* po = out.typed<T>();
  const broadcast_plan<3> plan(shape, {c.sizes(), x.sizes(), y.sizes()});
  parallel_items(ctx, static_cast<std::size_t>(plan.rows), static_cast<std::size_t>(plan.inner), [&](std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {
      const auto off = plan.row_offsets(static_cast<std::int64_t>(r));
      T* o = po + static_cast<std::int64_t>(r) * plan.inner;
      for (std::int64_t j = 0; j < plan.inner; ++j)
        o[j] = pc[off[0] + j * plan.inner_stride[0]] ? px[off[1] + j * plan.inner_stride[1]] : py[off[2] + j * plan.inner_stride[2]];
    }
  });
  return {};
}

// Clip: min/max as attributes (opset < 11) or optional inputs.
template <class T>
compute_function clip_fn(bool from_inputs, T lo_attr, T hi_attr) {
  return make_fn("Clip", [=](compute_context& ctx) -> Status {
    T lo = lo_attr, hi = hi_attr;
    if (from_inputs) {
      lo = std::numeric_limits<T>::lowest();
      hi = std::numeric_limits<T>::max();
      if (ctx.has_input(1) && ctx.input(1).element_count() > 0) lo = *ctx.input(1).typed<T>();
      if (ctx.has_input(2) && ctx.input(2).element_count() > 0) hi = *ctx.input(2).typed<T>();
    }
    const tensor& x = ctx.input(0);
    tensor& y = ctx.allocate_output(0, x.type(), x.sizes());
    const T* in = x.typed<T>();
    T* out = y.typed<T>();
    parallel_elements(ctx, x.element_count(), [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) out[i] = std::min(std::max(in[i], lo), hi);
    });
    return {};
  });
}

// Clip over float16 or bfloat16 H, in float (the bounds from attributes, or H inputs).
template <class H>
compute_function clip_half_fn(bool from_inputs, float lo_attr, float hi_attr) {
  return make_fn("Clip", [=](compute_context& ctx) -> Status {
    float lo = lo_attr, hi = hi_attr;
    if (from_inputs) {
      lo = std::numeric_limits<float>::lowest();
      hi = std::numeric_limits<float>::max();
      if (ctx.has_input(1) && ctx.input(1).element_count() > 0) lo = static_cast<float>(*ctx.input(1).typed<H>());
      if (ctx.has_input(2) && ctx.input(2).element_count() > 0) hi = static_cast<float>(*ctx.input(2).typed<H>());
    }
    const tensor& x = ctx.input(0);
    if (x.type() != element_type_of_v<H>) return Status(errc::invalid_argument, "unexpected input element type");
    tensor& y = ctx.allocate_output(0, x.type(), x.sizes());
    const H* in = x.typed<H>();
    H* out = y.typed<H>();
    parallel_elements(ctx, x.element_count(), [&](std::size_t b, std::size_t e) {
      float buf[half_block];
      for (std::size_t i = b; i < e; i += half_block) {
        const std::size_t m = std::min(half_block, e - i);
        widen_half(in + i, buf, m);
        for (std::size_t j = 0; j < m; ++j) buf[j] = std::min(std::max(buf[j], lo), hi);
        narrow_half(buf, out + i, m);
      }
    });
    return {};
  });
}

}  // namespace
}  // namespace impl

// ---------------------------------------------------------------------------------------------------------------
// The kernel types.

namespace ops {
using namespace impl;

// clang-format off
// max(x, 0), NaN staying NaN (numpy maximum); relu_of<float> compiles the float instance alone.
constexpr auto relu_make = [](auto t) {
  using T = typename decltype(t)::type;
  return [](T x) { return x < T(0) ? T(0) : x; };
};
bool relu::supports(const graph& g, node_id n) { return input_is<EPSTACK_SIGNED_H>(g, n); }
Result<compute_function> relu::compile(const graph& g, node_id n) { return unary_over<EPSTACK_SIGNED_H>(g, n, relu_make); }
bool relu_of<float>::supports(const graph& g, node_id n) { return input_is<float>(g, n); }
Result<compute_function> relu_of<float>::compile(const graph& g, node_id n) { return unary_over<float>(g, n, relu_make); }
bool neg::supports(const graph& g, node_id n) { return input_is<EPSTACK_SIGNED_H>(g, n); }
Result<compute_function> neg::compile(const graph& g, node_id n) {
  return unary_over<EPSTACK_SIGNED_H>(g, n, [](auto t) { using T = typename decltype(t)::type; return [](T x) { return static_cast<T>(-x); }; });
}
bool abs::supports(const graph& g, node_id n) { return input_is<EPSTACK_ARITH, EPSTACK_HALVES>(g, n); }
Result<compute_function> abs::compile(const graph& g, node_id n) {
  return unary_over<EPSTACK_ARITH, EPSTACK_HALVES>(g, n, [](auto t) {
    using T = typename decltype(t)::type;
    return [](T x) { if constexpr (std::is_unsigned_v<T>) return x; else return static_cast<T>(x < T(0) ? -x : x); };
  });
}
bool sign::supports(const graph& g, node_id n) { return input_is<EPSTACK_ARITH, EPSTACK_HALVES>(g, n); }
Result<compute_function> sign::compile(const graph& g, node_id n) {
  return unary_over<EPSTACK_ARITH, EPSTACK_HALVES>(g, n, [](auto t) {
    using T = typename decltype(t)::type;
    return [](T x) { return static_cast<T>((T(0) < x) - (x < T(0))); };
  });
}
bool exp::supports(const graph& g, node_id n) { return input_is<EPSTACK_FLOATS_H>(g, n); }
Result<compute_function> exp::compile(const graph& g, node_id n) {
  if (in_type(g, n, 0) == element_type::float32) return unary_fn<float>("Exp", [](float x) { return fast_exp(x); });
  if (is_half_type(in_type(g, n, 0))) return unary_half(g, n, [](float x) { return fast_exp(x); });
  return unary_fn<double>("Exp", [](double x) { return std::exp(x); });
}
bool log::supports(const graph& g, node_id n) { return input_is<EPSTACK_FLOATS_H>(g, n); }
Result<compute_function> log::compile(const graph& g, node_id n) {
  return unary_over<EPSTACK_FLOATS_H>(g, n, [](auto t) { using T = typename decltype(t)::type; return [](T x) { return std::log(x); }; });
}
bool sqrt::supports(const graph& g, node_id n) { return input_is<EPSTACK_FLOATS_H>(g, n); }
Result<compute_function> sqrt::compile(const graph& g, node_id n) {
  return unary_over<EPSTACK_FLOATS_H>(g, n, [](auto t) { using T = typename decltype(t)::type; return [](T x) { return std::sqrt(x); }; });
}
bool reciprocal::supports(const graph& g, node_id n) { return input_is<EPSTACK_FLOATS_H>(g, n); }
Result<compute_function> reciprocal::compile(const graph& g, node_id n) {
  return unary_over<EPSTACK_FLOATS_H>(g, n, [](auto t) { using T = typename decltype(t)::type; return [](T x) { return T(1) / x; }; });
}
bool sigmoid::supports(const graph& g, node_id n) { return input_is<EPSTACK_FLOATS_H>(g, n); }
Result<compute_function> sigmoid::compile(const graph& g, node_id n) {
  if (in_type(g, n, 0) == element_type::float32) return unary_fn<float>("Sigmoid", [](float x) { return fast_sigmoid(x); });
  if (is_half_type(in_type(g, n, 0))) return unary_half(g, n, [](float x) { return fast_sigmoid(x); });
  return unary_fn<double>("Sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
}
bool tanh::supports(const graph& g, node_id n) { return input_is<EPSTACK_FLOATS_H>(g, n); }
Result<compute_function> tanh::compile(const graph& g, node_id n) {
  return unary_over<EPSTACK_FLOATS_H>(g, n, [](auto t) { using T = typename decltype(t)::type; return [](T x) { return std::tanh(x); }; });
}
bool erf::supports(const graph& g, node_id n) { return input_is<EPSTACK_FLOATS_H>(g, n); }
Result<compute_function> erf::compile(const graph& g, node_id n) {
  if (in_type(g, n, 0) == element_type::float32) return unary_fn<float>("Erf", [](float x) { return fast_erf(x); });
  if (is_half_type(in_type(g, n, 0))) return unary_half(g, n, [](float x) { return fast_erf(x); });
  return unary_fn<double>("Erf", [](double x) { return std::erf(x); });
}
bool floor::supports(const graph& g, node_id n) { return input_is<EPSTACK_FLOATS_H>(g, n); }
Result<compute_function> floor::compile(const graph& g, node_id n) {
  return unary_over<EPSTACK_FLOATS_H>(g, n, [](auto t) { using T = typename decltype(t)::type; return [](T x) { return std::floor(x); }; });
}
bool ceil::supports(const graph& g, node_id n) { return input_is<EPSTACK_FLOATS_H>(g, n); }
Result<compute_function> ceil::compile(const graph& g, node_id n) {
  return unary_over<EPSTACK_FLOATS_H>(g, n, [](auto t) { using T = typename decltype(t)::type; return [](T x) { return std::ceil(x); }; });
}
bool not_::supports(const graph& g, node_id n) { return in_type(g, n, 0) == element_type::boolean; }
Result<compute_function> not_::compile(const graph&, node_id) { return unary_fn<bool>("Not", [](bool x) { return !x; }); }
bool leaky_relu::supports(const graph& g, node_id n) { return input_is<EPSTACK_FLOATS_H>(g, n); }
Result<compute_function> leaky_relu::compile(const graph& g, node_id n) {
  const float alpha = attr_f(g.node(n), "alpha", 0.01f);
  return unary_over<EPSTACK_FLOATS_H>(g, n, [alpha](auto t) {
    using T = typename decltype(t)::type;
    return [a = static_cast<T>(alpha)](T x) { return x >= T(0) ? x : a * x; };
  });
}
// Activations with parameters (float, double; float16 and bfloat16 in float): alpha, beta, gamma as the ONNX schemas
// default them.
#define EPSTACK_PARAM_ACTIVATION(K, body)                                                                       \
  bool K::supports(const graph& g, node_id n) { return input_is<EPSTACK_FLOATS_H>(g, n); }                    \
  Result<compute_function> K::compile(const graph& g, node_id n) {                                             \
    const auto& nd = g.node(n);                                                                              \
    const double alpha = attr_f(nd, "alpha", K##_alpha), beta = attr_f(nd, "beta", K##_beta),                 \
                 gamma = attr_f(nd, "gamma", K##_gamma);                                                       \
    (void)beta;                                                                                               \
    (void)gamma;                                                                                              \
    return unary_over<EPSTACK_FLOATS_H>(g, n, [=](auto t) {                                                   \
      using T = typename decltype(t)::type;                                                                    \
      return [a = static_cast<T>(alpha), b = static_cast<T>(beta), c = static_cast<T>(gamma)](T x) {          \
        (void)a;                                                                                              \
        (void)b;                                                                                              \
        (void)c;                                                                                              \
        return static_cast<T>(body);                                                                          \
      };                                                                                                      \
    });                                                                                                       \
  }
constexpr float elu_alpha = 1.0f, elu_beta = 0, elu_gamma = 0;
constexpr float selu_alpha = 1.67326319217681884765625f, selu_beta = 0, selu_gamma = 1.05070102214813232421875f;
constexpr float hard_sigmoid_alpha = 0.2f, hard_sigmoid_beta = 0.5f, hard_sigmoid_gamma = 0;
constexpr float softplus_alpha = 0, softplus_beta = 0, softplus_gamma = 0;
constexpr float softsign_alpha = 0, softsign_beta = 0, softsign_gamma = 0;
constexpr float thresholded_relu_alpha = 1.0f, thresholded_relu_beta = 0, thresholded_relu_gamma = 0;
EPSTACK_PARAM_ACTIVATION(elu, x >= T(0) ? x : a * (std::exp(x) - T(1)))
EPSTACK_PARAM_ACTIVATION(selu, x > T(0) ? c * x : c * (a * std::exp(x) - a))
EPSTACK_PARAM_ACTIVATION(hard_sigmoid, std::max(T(0), std::min(T(1), a * x + b)))
EPSTACK_PARAM_ACTIVATION(softplus, x > T(20) ? x : std::log1p(std::exp(x)))
EPSTACK_PARAM_ACTIVATION(softsign, x / (T(1) + std::fabs(x)))
EPSTACK_PARAM_ACTIVATION(thresholded_relu, x > a ? x : T(0))

bool prelu::supports(const graph& g, node_id n) {
  return binary_is<float, double, std::int32_t, std::int64_t, EPSTACK_HALVES>(g, n);
}
Result<compute_function> prelu::compile(const graph& g, node_id n) {
  const bool legacy = g.node(n).since_version < 7;
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<float, double, std::int32_t, std::int64_t, EPSTACK_HALVES>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = std::conditional_t<is_half_v<T>, float, T>;  // float16 and bfloat16 compute in float
    const auto fn = [](C x, C slope) { return x < C(0) ? static_cast<C>(slope * x) : x; };
    r = make_fn("PRelu", [fn, legacy](compute_context& ctx) -> Status {
      const tensor& x = ctx.input(0);
      tensor slope = ctx.input(1);
      EPSTACK_RETURN_IF_ERROR(check_same_type<T>(x, slope));
      // Before opset 7 a 1-D slope of C values is per channel (axis 1), as PyTorch's exporter meant it.
      if (legacy && slope.rank() == 1 && x.rank() > 2 && slope.sizes()[0] == x.sizes()[1] && slope.sizes()[0] != 1) {
        std::vector<std::int64_t> d(x.rank() - 1, 1);
        d[0] = slope.sizes()[0];
        slope = slope.reshaped(d);
      }
      if constexpr (is_half_v<T>) return binary_apply_half<T, T>(ctx, x, slope, fn);
      else return binary_apply<T, T>(ctx, x, slope, fn);
    });
  });
  return r;
}

bool gelu::supports(const graph& g, node_id n) { return input_is<float, EPSTACK_HALVES>(g, n); }
Result<compute_function> gelu::compile(const graph& g, node_id n) {
  if (is_half_type(in_type(g, n, 0))) return unary_half(g, n, [](float x) { return gelu_erf(x); });
  return unary_fn<float>("Gelu", [](float x) { return gelu_erf(x); });
}
// Gelu-20 (approximate "none": the erf form; "tanh": the tanh approximation), Mish-18/22, Swish-24: float, double,
// float16, bfloat16.
bool gelu_onnx::supports(const graph& g, node_id n) {
  const auto a = attr_s(g.node(n), "approximate", "none");
  return input_is<EPSTACK_FLOATS_H>(g, n) && (a == "none" || a == "tanh");
}
Result<compute_function> gelu_onnx::compile(const graph& g, node_id n) {
  const auto a = attr_s(g.node(n), "approximate", "none");
  if (a != "none" && a != "tanh") return invalid(cat("attribute 'approximate' is '", a, "'; 'none' or 'tanh' is expected"));
  if (a == "tanh")
    return unary_over<EPSTACK_FLOATS_H>(g, n, [](auto t) {
      using T = typename decltype(t)::type;
      return [](T x) {
        const T k = static_cast<T>(0.7978845608028654);  // sqrt(2 / pi)
        return static_cast<T>(T(0.5) * x * (T(1) + std::tanh(k * (x + static_cast<T>(0.044715) * x * x * x))));
      };
    });
  if (in_type(g, n, 0) == element_type::float32) return unary_fn<float>("Gelu", [](float x) { return gelu_erf(x); });
  if (is_half_type(in_type(g, n, 0))) return unary_half(g, n, [](float x) { return gelu_erf(x); });
  return unary_fn<double>("Gelu", [](double x) { return 0.5 * x * (1.0 + std::erf(x * 0.7071067811865476)); });
}
bool mish::supports(const graph& g, node_id n) { return input_is<EPSTACK_FLOATS_H>(g, n); }
Result<compute_function> mish::compile(const graph& g, node_id n) {
  return unary_over<EPSTACK_FLOATS_H>(g, n, [](auto t) {
    using T = typename decltype(t)::type;
    return [](T x) { return static_cast<T>(x * std::tanh(x > T(20) ? x : std::log1p(std::exp(x)))); };
  });
}
bool swish::supports(const graph& g, node_id n) { return input_is<EPSTACK_FLOATS_H>(g, n); }
Result<compute_function> swish::compile(const graph& g, node_id n) {
  const double alpha = attr_f(g.node(n), "alpha", 1.0f);
  return unary_over<EPSTACK_FLOATS_H>(g, n, [alpha](auto t) {
    using T = typename decltype(t)::type;
    return [a = static_cast<T>(alpha)](T x) { return static_cast<T>(x / (T(1) + std::exp(-a * x))); };
  });
}

// Bitwise And/Or/Xor/Not-18: the integer types.
#define EPSTACK_INTS std::int8_t, std::int16_t, std::int32_t, std::int64_t, std::uint8_t, std::uint16_t, std::uint32_t, std::uint64_t
#define EPSTACK_BITWISE_KERNEL(K, expr)                                                                \
  bool K::supports(const graph& g, node_id n) { return binary_is<EPSTACK_INTS>(g, n); }              \
  Result<compute_function> K::compile(const graph& g, node_id n) {                                    \
    return arith_over<EPSTACK_INTS>(g, n, [](auto t) { using T = typename decltype(t)::type; return [](T a, T b) { return static_cast<T>(expr); }; }); \
  }
EPSTACK_BITWISE_KERNEL(bitwise_and, a & b)
EPSTACK_BITWISE_KERNEL(bitwise_or, a | b)
EPSTACK_BITWISE_KERNEL(bitwise_xor, a ^ b)
bool bitwise_not::supports(const graph& g, node_id n) { return input_is<EPSTACK_INTS>(g, n); }
Result<compute_function> bitwise_not::compile(const graph& g, node_id n) {
  return unary_over<EPSTACK_INTS>(g, n, [](auto t) { using T = typename decltype(t)::type; return [](T x) { return static_cast<T>(~x); }; });
}

bool bias_gelu::supports(const graph& g, node_id n) { return binary_is<float, EPSTACK_HALVES>(g, n); }
Result<compute_function> bias_gelu::compile(const graph& g, node_id n) {
  if (is_half_type(in_type(g, n, 0)))
    return arith_over<EPSTACK_HALVES>(g, n, [](auto) { return [](float a, float b) { return gelu_erf(a + b); }; });
  return make_fn("BiasGelu", [](compute_context& ctx) -> Status {
    EPSTACK_RETURN_IF_ERROR(check_same_type<float>(ctx.input(0), ctx.input(1)));
    return binary_apply<float, float>(ctx, ctx.input(0), ctx.input(1), [](float a, float b) { return gelu_erf(a + b); });
  });
}
// clang-format on

bool clip::supports(const graph& g, node_id n) {
  if (g.node(n).since_version < 11) return input_is<EPSTACK_FLOATS_H>(g, n);
  return input_is<EPSTACK_ARITH, EPSTACK_HALVES>(g, n);
}
Result<compute_function> clip::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const bool from_inputs = nd.since_version >= 11;
  const float lo = attr_f(nd, "min", std::numeric_limits<float>::lowest());
  const float hi = attr_f(nd, "max", std::numeric_limits<float>::max());
  if (in_type(g, n, 0) == element_type::float16) return clip_half_fn<float16>(from_inputs, lo, hi);
  if (in_type(g, n, 0) == element_type::bfloat16) return clip_half_fn<bfloat16>(from_inputs, lo, hi);
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_ARITH>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = clip_fn<T>(from_inputs, static_cast<T>(std::max<double>(lo, static_cast<double>(std::numeric_limits<T>::lowest()))),
                   static_cast<T>(std::min<double>(hi, static_cast<double>(std::numeric_limits<T>::max()))));
  });
  return r;
}

// clang-format off
#define EPSTACK_ARITH_KERNEL(K, expr)                                                                  \
  bool K::supports(const graph& g, node_id n) { return binary_is<EPSTACK_ARITH, EPSTACK_HALVES>(g, n); } \
  Result<compute_function> K::compile(const graph& g, node_id n) {                                    \
    return arith_over<EPSTACK_ARITH, EPSTACK_HALVES>(g, n, [](auto t) { using T = typename decltype(t)::type; return [](T a, T b) { return static_cast<T>(expr); }; }); \
  }
EPSTACK_ARITH_KERNEL(add, a + b)
EPSTACK_ARITH_KERNEL(sub, a - b)
EPSTACK_ARITH_KERNEL(mul, a * b)
EPSTACK_ARITH_KERNEL(div, safe_div<T>(a, b))

// Less and LessOrEqual; Greater and GreaterOrEqual are they with the inputs swapped (same instances).
constexpr auto less_make = [](auto t) { using T = typename decltype(t)::type; return [](T a, T b) { return static_cast<bool>(a < b); }; };
constexpr auto less_equal_make = [](auto t) { using T = typename decltype(t)::type; return [](T a, T b) { return static_cast<bool>(a <= b); }; };
#define EPSTACK_COMPARE_KERNEL(K, make, swap)                                                          \
  bool K::supports(const graph& g, node_id n) { return binary_is<EPSTACK_ARITH, EPSTACK_HALVES, bool>(g, n); } \
  Result<compute_function> K::compile(const graph& g, node_id n) {                                    \
    return compare_over<EPSTACK_ARITH, EPSTACK_HALVES, bool>(g, n, make, swap);                        \
  }
// Equal also compares strings (Equal-19).
bool equal::supports(const graph& g, node_id n) { return binary_is<EPSTACK_ARITH, EPSTACK_HALVES, bool, std::string>(g, n); }
Result<compute_function> equal::compile(const graph& g, node_id n) {
  return compare_over<EPSTACK_ARITH, EPSTACK_HALVES, bool, std::string>(g, n, [](auto t) {
    using T = typename decltype(t)::type;
    return [](const T& a, const T& b) { return static_cast<bool>(a == b); };
  });
}
EPSTACK_COMPARE_KERNEL(less, less_make, false)
EPSTACK_COMPARE_KERNEL(greater, less_make, true)
EPSTACK_COMPARE_KERNEL(less_or_equal, less_equal_make, false)
EPSTACK_COMPARE_KERNEL(greater_or_equal, less_equal_make, true)

#define EPSTACK_LOGIC_KERNEL(K, expr)                                                                  \
  bool K::supports(const graph& g, node_id n) { return binary_is<bool>(g, n); }                      \
  Result<compute_function> K::compile(const graph& g, node_id n) {                                    \
    return compare_over<bool>(g, n, [](auto) { return [](bool a, bool b) { return static_cast<bool>(expr); }; }); \
  }
EPSTACK_LOGIC_KERNEL(and_, a && b)
EPSTACK_LOGIC_KERNEL(or_, a || b)
EPSTACK_LOGIC_KERNEL(xor_, a != b)

#define EPSTACK_NARY_KERNEL(K, expr, is_mean)                                                          \
  bool K::supports(const graph& g, node_id n) { return input_is<EPSTACK_ARITH, EPSTACK_HALVES>(g, n) && all_inputs(g, n, in_type(g, n, 0)); } \
  Result<compute_function> K::compile(const graph& g, node_id n) {                                    \
    return nary_over(g, n, [](auto t) { using T = typename decltype(t)::type; return [](T a, T b) { return static_cast<T>(expr); }; }, is_mean); \
  }
EPSTACK_NARY_KERNEL(sum, a + b, false)
EPSTACK_NARY_KERNEL(mean, a + b, true)
// Max and Min also over float16 and bfloat16 (compared as float, by nary_over).
#define EPSTACK_MINMAX_KERNEL(K, pick)                                                                          \
  bool K::supports(const graph& g, node_id n) {                                                              \
    return input_is<EPSTACK_ARITH, EPSTACK_HALVES>(g, n) && all_inputs(g, n, in_type(g, n, 0));                 \
  }                                                                                                            \
  Result<compute_function> K::compile(const graph& g, node_id n) {                                            \
    return nary_over(g, n, [](auto t) { using T = typename decltype(t)::type; return [](T a, T b) { return pick(a, b) ? a : b; }; }, false); \
  }
// a is kept when it wins or ties (std::max / std::min's choice); NaN in a is kept as numpy keeps it.
#define EPSTACK_PICK_MAX(a, b) (!((a) < (b)))
#define EPSTACK_PICK_MIN(a, b) (!((b) < (a)))
EPSTACK_MINMAX_KERNEL(max, EPSTACK_PICK_MAX)
EPSTACK_MINMAX_KERNEL(min, EPSTACK_PICK_MIN)
#undef EPSTACK_MINMAX_KERNEL
#undef EPSTACK_PICK_MAX
#undef EPSTACK_PICK_MIN
// clang-format on

bool pow::supports(const graph& g, node_id n) {
  const auto e = in_type(g, n, 1);
  return input_is<float, double, std::int32_t, std::int64_t, EPSTACK_HALVES>(g, n) &&
         (e == element_type::float32 || e == element_type::float64 || is_integer(e) || is_half_type(e));
}
Result<compute_function> pow::compile(const graph& g, node_id n) { return compile_pow(g, n); }

bool where::supports(const graph& g, node_id n) {
  return in_type(g, n, 0) == element_type::boolean && in_type(g, n, 1) != element_type::undefined &&
         in_type(g, n, 1) == in_type(g, n, 2);
}
Result<compute_function> where::compile(const graph& g, node_id n) {
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_ALL_POD_TYPES, std::string>(in_type(g, n, 1), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("Where", [](compute_context& ctx) { return where_apply<T>(ctx); });
  });
  return r;
}

// Trigonometric and hyperbolic functions (float, double).
#define EPSTACK_MATH_KERNEL(K, fn)                                                                                 \
  bool K::supports(const graph& g, node_id n) { return input_is<EPSTACK_FLOATS_H>(g, n); }                      \
  Result<compute_function> K::compile(const graph& g, node_id n) {                                               \
    return unary_over<EPSTACK_FLOATS_H>(g, n, [](auto t) { using T = typename decltype(t)::type; return [](T x) { return std::fn(x); }; }); \
  }
EPSTACK_MATH_KERNEL(sin, sin)
EPSTACK_MATH_KERNEL(cos, cos)
EPSTACK_MATH_KERNEL(tan, tan)
EPSTACK_MATH_KERNEL(asin, asin)
EPSTACK_MATH_KERNEL(acos, acos)
EPSTACK_MATH_KERNEL(atan, atan)
EPSTACK_MATH_KERNEL(sinh, sinh)
EPSTACK_MATH_KERNEL(cosh, cosh)
EPSTACK_MATH_KERNEL(asinh, asinh)
EPSTACK_MATH_KERNEL(acosh, acosh)
EPSTACK_MATH_KERNEL(atanh, atanh)
// Round: half to even (the default rounding mode), as numpy.round.
EPSTACK_MATH_KERNEL(round, nearbyint)
#undef EPSTACK_MATH_KERNEL

bool shrink::supports(const graph& g, node_id n) { return input_is<EPSTACK_ARITH, EPSTACK_HALVES>(g, n); }
Result<compute_function> shrink::compile(const graph& g, node_id n) {
  const double lambd = attr_f(g.node(n), "lambd", 0.5f), bias = attr_f(g.node(n), "bias", 0.0f);
  return unary_over<EPSTACK_ARITH, EPSTACK_HALVES>(g, n, [=](auto t) {
    using T = typename decltype(t)::type;
    return [=](T x) {
      const double v = static_cast<double>(x);
      return static_cast<T>(v < -lambd ? v + bias : v > lambd ? v - bias : 0.0);
    };
  });
}

// IsInf and IsNaN: bool outputs.
template <class T, class Fn>
compute_function predicate_fn(std::string op, Fn fn) {
  return make_fn(std::move(op), [fn](compute_context& ctx) -> Status {
    const tensor& x = ctx.input(0);
    tensor& y = ctx.allocate_output(0, element_type::boolean, x.sizes());
    const T* in = x.typed<T>();
    bool* out = y.typed<bool>();
    parallel_elements(ctx, x.element_count(), [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) out[i] = fn(in[i]);
    });
    return {};
  });
}
// float, double; float16 and bfloat16 (IsInf-20, IsNaN-13/20).
bool is_inf::supports(const graph& g, node_id n) {
  const auto e = in_type(g, n, 0);
  return input_is<EPSTACK_FLOATS>(g, n) || e == element_type::float16 || e == element_type::bfloat16;
}
Result<compute_function> is_inf::compile(const graph& g, node_id n) {
  const bool neg = attr_i(g.node(n), "detect_negative", 1) != 0, pos = attr_i(g.node(n), "detect_positive", 1) != 0;
  const auto f = [=](auto x) { return std::isinf(x) && (x > 0 ? pos : neg); };
  switch (in_type(g, n, 0)) {
    case element_type::float32: return predicate_fn<float>("IsInf", f);
    case element_type::float16: return predicate_fn<float16>("IsInf", [f](float16 x) { return f(static_cast<float>(x)); });
    case element_type::bfloat16: return predicate_fn<bfloat16>("IsInf", [f](bfloat16 x) { return f(static_cast<float>(x)); });
    default: return predicate_fn<double>("IsInf", f);
  }
}
bool is_nan::supports(const graph& g, node_id n) {
  const auto e = in_type(g, n, 0);
  return input_is<EPSTACK_FLOATS>(g, n) || e == element_type::float16 || e == element_type::bfloat16;
}
Result<compute_function> is_nan::compile(const graph& g, node_id n) {
  switch (in_type(g, n, 0)) {
    case element_type::float32: return predicate_fn<float>("IsNaN", [](float x) { return std::isnan(x); });
    case element_type::float16:
      return predicate_fn<float16>("IsNaN", [](float16 x) { return std::isnan(static_cast<float>(x)); });
    case element_type::bfloat16:
      return predicate_fn<bfloat16>("IsNaN", [](bfloat16 x) { return std::isnan(static_cast<float>(x)); });
    default: return predicate_fn<double>("IsNaN", [](double x) { return std::isnan(x); });
  }
}

// Mod: fmod = 1 is C's remainder (the dividend's sign; floating point always), fmod = 0 Python's (the divisor's
// sign). An integer remainder by zero is 0, as numpy gives.
template <class T>
T mod_of(T a, T b, bool c_style) {
  if constexpr (std::is_floating_point_v<T>) {
    const T r = std::fmod(a, b);
    if (c_style || r == T(0) || (r < 0) == (b < 0)) return r;
    return r + b;
  } else {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>) {
      if (b == -1) return 0;  // (also avoids INT_MIN % -1)
    }
    const T r = static_cast<T>(a % b);
    if (c_style || r == 0) return r;
    if constexpr (std::is_signed_v<T>) {
      if ((r < 0) != (b < 0)) return static_cast<T>(r + b);
    }
    return r;
  }
}
bool mod::supports(const graph& g, node_id n) { return binary_is<EPSTACK_ARITH, EPSTACK_HALVES>(g, n); }
Result<compute_function> mod::compile(const graph& g, node_id n) {
  const bool c_style = attr_i(g.node(n), "fmod", 0) != 0;
  // Floating point (float16 and bfloat16 as float): always C's fmod.
  return arith_over<EPSTACK_ARITH, EPSTACK_HALVES>(g, n, [c_style](auto t) {
    using T = typename decltype(t)::type;
    return [c_style](T a, T b) { return mod_of<T>(a, b, c_style || std::is_floating_point_v<T>); };
  });
}

bool bit_shift::supports(const graph& g, node_id n) {
  return binary_is<std::uint8_t, std::uint16_t, std::uint32_t, std::uint64_t>(g, n);
}
Result<compute_function> bit_shift::compile(const graph& g, node_id n) {
  const std::string dir = attr_s(g.node(n), "direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    return Status(errc::invalid_graph, cat("BitShift: direction must be LEFT or RIGHT, got '", dir, "'"));
  const bool left = dir == "LEFT";
  return arith_over<std::uint8_t, std::uint16_t, std::uint32_t, std::uint64_t>(g, n, [left](auto t) {
    using T = typename decltype(t)::type;
    return [left](T a, T b) -> T {
      if (b >= sizeof(T) * 8) return 0;
      return static_cast<T>(left ? a << b : a >> b);
    };
  });
}

}  // namespace ops
}  // namespace epstack::cpu
