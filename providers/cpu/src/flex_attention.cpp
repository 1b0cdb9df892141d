// FlexAttention (ai.onnx.preview 1): scaled dot-product attention over rank-4 Q [B, Hq, L, E], K [B, Hkv, S, E] and
// V [B, Hkv, S, Ev], with two optional modifier subgraphs: score_mod on the scores (B, Hq, L, S) after scale * Q K^T,
// prob_mod on the probabilities after the softmax. Query head h uses kv head h / (Hq / Hkv) (grouped-query attention).
//
// The q heads that share a kv head are contiguous in Q, so the rows of one (batch, kv head) group are one contiguous
// block of Q's rows (head-major, then query position), and the same rows of the scores and of Y: row r of the flat
// [B * Hq * L] rows belongs to group r / (reps * L). Groups are cut into row blocks that the intra-op threads take
// from a shared counter. float computes in float with the packed SGEMM (Q rows packed once per block, K packed in
// column chunks, V read in place); double in double; float16 and bfloat16 in float.
//
// Without modifiers a block runs end to end in scratch of its own (scores, softmax, P V): the score tensor is never
// whole. With a modifier the subgraph sees the whole tensor at once, as the spec defines it (one run per call, not
// one per batch, head or element): the scores of all blocks are computed into one buffer, handed to score_mod, the
// softmax runs row by row (in parallel) on its result, prob_mod gets the probabilities, then the blocks compute P V.
//
// The modifiers' tensors have the element type softmax_precision names (float for non-double inputs, double for
// double, by default; float16 and bfloat16 are accepted too): when that is narrower than the compute type, scores and
// probabilities are rounded to it where the function body casts (before the softmax, after it). A row whose scores
// are all -inf (every key masked) gives NaN probabilities, as Softmax does. With no keys (S = 0) Y is zeros and the
// modifiers are not run.
#include "attention_util.hpp"
#include "gemm.hpp"
#include "row_util.hpp"
#include "sgemm.hpp"

#include <atomic>

namespace epstack::cpu {
namespace impl {
namespace {

constexpr std::string_view op_name = "FlexAttention";

/// Converts n elements on the intra-op threads.
template <class To, class From>
void cvt_parallel(const compute_context& ctx, const From* src, std::int64_t n, To* dst) {
  parallel_elements(ctx, static_cast<std::size_t>(n), [&](std::size_t i0, std::size_t i1) {
    convert_n<To>(src + i0, static_cast<std::int64_t>(i1 - i0), dst + i0);
  });
}

/// Rounds x[0, n) to element type p (float, float16 or bfloat16) and back: where the function body casts to a
/// softmax_precision narrower than the compute type.
template <class C>
void round_row(C* x, std::int64_t n, element_type p) {
  switch (p) {
    case element_type::float32:
      for (std::int64_t i = 0; i < n; ++i) x[i] = static_cast<C>(static_cast<float>(x[i]));
      break;
    case element_type::float16:
      for (std::int64_t i = 0; i < n; ++i) x[i] = static_cast<C>(static_cast<float>(float16(static_cast<float>(x[i]))));
      break;
    case element_type::bfloat16:
      for (std::int64_t i = 0; i < n; ++i) x[i] = static_cast<C>(static_cast<float>(bfloat16(static_cast<float>(x[i]))));
      break;
    default: break;
  }
}

/// Softmax of x[0, n) (n > 0) in place; `p` is softmax_precision when it is narrower than C (the input was rounded
/// to it by the caller; the output is rounded here), else undefined. All -inf (no key to attend) gives NaN.
template <class C>
void softmax_row(C* x, std::int64_t n, element_type p) {
  const C m = row_max(x, n);
  if (m == -std::numeric_limits<C>::infinity()) {
    std::fill_n(x, n, std::numeric_limits<C>::quiet_NaN());
    return;
  }
  if constexpr (std::is_same_v<C, float>) {
    for (std::int64_t i = 0; i < n; ++i) x[i] = fast_exp(x[i] - m);
  } else {
    for (std::int64_t i = 0; i < n; ++i) x[i] = std::exp(x[i] - m);
  }
  const C inv = C(1) / row_sum(x, n);
  for (std::int64_t i = 0; i < n; ++i) x[i] *= inv;
  if (p != element_type::undefined) round_row(x, n, p);
}

// ---------------------------------------------------------------------------------------------------------------
// The two products of a row block.

template <class C>
struct block_products {
  std::int64_t E = 0, S = 0, Ev = 0;
  C scale = C(1);
  bool packed = false;  // float with the AVX-512 SGEMM
  bool small = false;   // a few rows (decoding): dot products and axpy loops, no packing
  static constexpr std::int64_t kchunk = 512;  // keys packed at a time

  // sc[rows, S] (leading dimension ldc) = scale * A[rows, E] K[S, E]^T.
  void scores(std::int64_t rows, const C* A, const C* kp, C* sc, std::int64_t ldc, float* pa, float* pb) const {
    if (rows == 0) return;
    if (E == 0) {
      for (std::int64_t i = 0; i < rows; ++i) std::fill_n(sc + i * ldc, S, C(0));
      return;
    }
    if constexpr (std::is_same_v<C, float>) {
      if (packed) {
        pack_a(pa, A, E, false, rows, E);
        for (std::int64_t j0 = 0; j0 < S; j0 += kchunk) {
          const std::int64_t nc = std::min(kchunk, S - j0);
          pack_b(pb, kp + j0 * E, E, true, E, nc);
          sgemm_packed(rows, nc, E, pa, pb, sc + j0, ldc, scale, false, 0, a_panels(rows), 0, b_panels(nc));
        }
        return;
      }
    }
    if (small) {
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < S; ++j) sc[i * ldc + j] = scale * dot(A + i * E, kp + j * E, E);
      return;
    }
    gemm_block<C>(false, true, rows, S, E, scale, A, E, kp, E, sc, ldc, false);
  }

  // y[rows, Ev] = P[rows, S] (leading dimension ldp) V[S, Ev].
  void values(std::int64_t rows, const C* p, std::int64_t ldp, const C* vp, C* y, float* pa) const {
    if (rows == 0 || Ev == 0) return;
    if constexpr (std::is_same_v<C, float>) {
      if (packed) {
        pack_a(pa, p, ldp, false, rows, S);
        sgemm(rows, Ev, S, pa, sgemm_b{vp, Ev}, y, Ev, 1.0f, false, nullptr, 0, a_panels(rows), 0, b_panels(Ev));
        return;
      }
    }
    if (small) {
      std::fill_n(y, rows * Ev, C(0));
      for (std::int64_t i = 0; i < rows; ++i) {
        C* out = y + i * Ev;
        for (std::int64_t j = 0; j < S; ++j) {
          const C w = p[i * ldp + j];
          if (w == C(0)) continue;
          const C* v = vp + j * Ev;
          for (std::int64_t d = 0; d < Ev; ++d) out[d] += w * v[d];
        }
      }
      return;
    }
    gemm_block<C>(false, false, rows, Ev, S, C(1), p, ldp, vp, Ev, y, Ev, false);
  }
};

// ---------------------------------------------------------------------------------------------------------------

const graph* graph_attr(const node& nd, std::string_view name) {
  const auto* a = attr(nd, name);
  if (a == nullptr) return nullptr;
  const auto* sg = std::get_if<subgraph>(&a->value);
  return sg != nullptr && *sg ? &**sg : nullptr;
}

struct flex_attrs {
  bool has_scale = false;
  float scale = 1.0f;
  element_type prec = element_type::float32;  // the modifiers' element type (softmax_precision)
  const graph* score_mod = nullptr;
  const graph* prob_mod = nullptr;
};

/// Runs modifier `body` on `in` (element type prec, shape dims) and checks that it returns one tensor like it.
Result<tensor> run_modifier(compute_context& ctx, const graph& body, std::string_view which, tensor in) {
  const dims_t dims = to_dims(in.sizes());
  const element_type type = in.type();
  std::vector<ivalue> ins, outs;
  ins.emplace_back(std::move(in));
  EPSTACK_RETURN_IF_ERROR(ctx.run_subgraph(body, ins, outs).with_context(cat(op_name, ": ", which)));
  if (outs.size() != 1 || !outs[0].is_tensor())
    return op_error(op_name, cat(which, " must return one tensor, it returned ", str(static_cast<std::int64_t>(outs.size())),
                                 " values"));
  tensor out = outs[0].as_tensor();
  if (out.type() != type)
    return op_error(op_name, cat(which, " returned element type ", std::string(to_string(out.type())), ", expected ",
                                 std::string(to_string(type))));
  if (!std::equal(out.sizes().begin(), out.sizes().end(), dims.begin(), dims.end()))
    return op_error(op_name, cat(which, " returned shape ", dims_string(out.sizes()), ", expected ", dims_string(dims)));
  return out;
}

/// A tensor of element type p and shape dims holding src[0, n) of C: src itself (as a view) when p is C.
template <class C>
tensor as_precision(compute_context& ctx, const tensor& src_store, const C* src, element_type p, std::span<const std::int64_t> dims) {
  if (p == element_type_of_v<C>) return src_store.reshaped(dims);
  const std::int64_t n = product(dims);
  tensor t = ctx.scratch(p, static_cast<std::size_t>(n));
  dispatch<float, double, float16, bfloat16>(p, [&](auto tag) {
    using P = typename decltype(tag)::type;
    cvt_parallel<P>(ctx, src, n, t.typed<P>());
  });
  return t.reshaped(dims);
}

template <class T, class C>
Status flex_compute(const flex_attrs& a, compute_context& ctx) {
  const tensor& q = ctx.input(0);
  const tensor& k = ctx.input(1);
  const tensor& v = ctx.input(2);
  const char* names[] = {"Q", "K", "V"};
  for (std::size_t i = 0; i < 3; ++i) {
    const tensor& t = ctx.input(i);
    if (!ctx.has_input(i)) return op_error(op_name, cat(names[i], " is missing"));
    if (t.type() != element_type_of_v<T>)
      return op_error(op_name, cat(names[i], " has element type ", std::string(to_string(t.type())), ", expected ",
                                   std::string(to_string(element_type_of_v<T>))));
    if (t.rank() != 4) return op_error(op_name, cat(names[i], " must be 4-D, got shape ", dims_string(t.sizes())));
  }
  const auto qs = q.sizes(), ks = k.sizes(), vs = v.sizes();
  const std::int64_t B = qs[0], Hq = qs[1], L = qs[2], E = qs[3];
  const std::int64_t Hk = ks[1], S = ks[2], Ev = vs[3];
  if (ks[0] != B || vs[0] != B)
    return op_error(op_name, cat("Q, K and V have different batch sizes: ", dims_string(qs), ", ", dims_string(ks), ", ",
                                 dims_string(vs)));
  if (vs[1] != Hk) return op_error(op_name, cat("K has ", str(Hk), " heads and V ", str(vs[1])));
  if (Hk <= 0 ? Hq != 0 : Hq % Hk != 0)
    return op_error(op_name, cat("the number of query heads (", str(Hq), ") must be a multiple of the number of kv heads (",
                                 str(Hk), ")"));
  if (ks[3] != E) return op_error(op_name, cat("the head size of K (", str(ks[3]), ") differs from Q's (", str(E), ")"));
  if (vs[2] != S) return op_error(op_name, cat("K and V have different sequence lengths: ", str(S), " and ", str(vs[2])));

  const std::int64_t ydims[] = {B, Hq, L, Ev};
  tensor& y = ctx.allocate_output(0, element_type_of_v<T>, ydims);
  T* py = y.typed<T>();
  const std::int64_t nrows = B * Hq * L;
  if (nrows == 0 || Ev == 0) return {};
  if (S == 0) {  // no keys: every product over them is empty
    std::fill_n(py, nrows * Ev, convert<T>(C(0)));
    return {};
  }
  const element_type prec = a.prec;
  const element_type round_to = prec == element_type_of_v<C> ? element_type::undefined : prec;
  const bool modified = a.score_mod != nullptr || a.prob_mod != nullptr;

  // K and V as C: the inputs themselves, or converted.
  constexpr bool same = std::is_same_v<T, C>;
  const C* kc = nullptr;
  const C* vc = nullptr;
  tensor k_store, v_store;
  if constexpr (same) {
    kc = k.typed<C>();
    vc = v.typed<C>();
  } else {
    k_store = ctx.scratch(element_type_of_v<C>, k.element_count());
    v_store = ctx.scratch(element_type_of_v<C>, v.element_count());
    cvt_parallel<C>(ctx, k.typed<T>(), static_cast<std::int64_t>(k.element_count()), k_store.typed<C>());
    cvt_parallel<C>(ctx, v.typed<T>(), static_cast<std::int64_t>(v.element_count()), v_store.typed<C>());
    kc = k_store.typed<C>();
    vc = v_store.typed<C>();
  }
  const T* pq = q.typed<T>();

  // Row blocks of the groups: group bg = b * Hk + g owns the flat rows [bg * per, (bg + 1) * per).
  const std::int64_t reps = Hq / Hk, per = reps * L, groups = B * Hk;
  const int threads = ctx.thread_count();
  std::int64_t mb = per;
  if (per > 4) {
    // A block's scores (mb x S) stay within about 256 KiB; blocks are halved while there are too few to spread.
    const std::int64_t cap = std::max<std::int64_t>(sgemm_mr, 65536 / S);
    mb = std::min<std::int64_t>({per, 192, cap});
    while (mb > 2 * sgemm_mr && groups * ((per + mb - 1) / mb) < 3 * static_cast<std::int64_t>(threads)) mb = (mb + 1) / 2;
    if (mb < per) mb = std::min(per, (mb + sgemm_mr - 1) / sgemm_mr * sgemm_mr);
  }
  const std::int64_t nblk = (per + mb - 1) / mb;
  const auto tasks = static_cast<std::size_t>(groups * nblk);

  block_products<C> prod;
  prod.E = E, prod.S = S, prod.Ev = Ev;
  prod.scale = a.has_scale ? static_cast<C>(a.scale) : C(1) / std::sqrt(static_cast<C>(E));
  prod.small = mb <= 4;
  if constexpr (std::is_same_v<C, float>) prod.packed = !prod.small && sgemm_packed_available();

  // Scratch of each worker (in C): Q rows (when converted), scores (without modifiers), Y rows (when converted) and
  // the packed panels.
  const std::int64_t a_sz = same ? 0 : mb * E, s_sz = modified ? 0 : mb * S, y_sz = same ? 0 : mb * Ev;
  const std::int64_t pa_sz =
      prod.packed ? static_cast<std::int64_t>(std::max(packed_a_size(mb, E), packed_a_size(mb, S))) + 16 : 0;
  const std::int64_t pb_sz =
      prod.packed ? static_cast<std::int64_t>(packed_b_size(E, std::min(block_products<C>::kchunk, S))) + 16 : 0;
  const std::int64_t slot_sz = a_sz + s_sz + y_sz + pa_sz + pb_sz;
  const double cost = static_cast<double>(nrows) * static_cast<double>(S) * static_cast<double>(E + Ev + 8);
  const std::size_t slots =
      threads > 1 && tasks > 1 && cost > 65536.0 ? std::min(static_cast<std::size_t>(threads), tasks) : 1;
  tensor work = ctx.scratch(element_type_of_v<C>, std::max<std::size_t>(1, slots * static_cast<std::size_t>(slot_sz)));
  C* const work_p = work.typed<C>();

  struct slot_mem {
    C* A;
    C* sc;
    C* yb;
    float* pa;
    float* pb;
  };
  const auto slot_of = [&](std::size_t s) {
    slot_mem m{};
    m.A = work_p + static_cast<std::int64_t>(s) * slot_sz;
    m.sc = m.A + a_sz;
    m.yb = m.sc + s_sz;
    if constexpr (std::is_same_v<C, float>) {
      if (prod.packed) {
        m.pa = align64(m.yb + y_sz);
        m.pb = align64(m.yb + y_sz + pa_sz);
      }
    }
    return m;
  };
  // The Q rows [r0, r0 + rows) as C.
  const auto q_rows = [&](const slot_mem& m, std::int64_t r0, std::int64_t rows) -> const C* {
    if constexpr (same) {
      (void)m;
      (void)rows;
      return pq + r0 * E;
    } else {
      convert_n<C>(pq + r0 * E, rows * E, m.A);
      return m.A;
    }
  };
  // Y rows [r0, r0 + rows) = P V of group bg.
  const auto y_rows = [&](const slot_mem& m, std::int64_t bg, std::int64_t r0, std::int64_t rows, const C* p,
                          std::int64_t ldp) {
    if constexpr (same) {
      (void)m;
      prod.values(rows, p, ldp, vc + bg * S * Ev, py + r0 * Ev, m.pa);
    } else {
      prod.values(rows, p, ldp, vc + bg * S * Ev, m.yb, m.pa);
      convert_n<T>(m.yb, rows * Ev, py + r0 * Ev);
    }
  };
  // f(slot, bg, r0, rows) for every block, the threads taking blocks from a shared counter.
  const auto for_blocks = [&](auto&& f) {
    std::atomic<std::size_t> next{0};
    const auto worker = [&](std::size_t slot) {
      for (std::size_t t = next.fetch_add(1, std::memory_order_relaxed); t < tasks;
           t = next.fetch_add(1, std::memory_order_relaxed)) {
        const auto ti = static_cast<std::int64_t>(t);
        const std::int64_t bg = ti / nblk, m0 = ti % nblk * mb;
        f(slot, bg, bg * per + m0, std::min(mb, per - m0));
      }
    };
    if (slots == 1) worker(0);
    else
      ctx.parallel_for(slots, 1, [&](std::size_t p0, std::size_t p1) {
        for (std::size_t p = p0; p < p1; ++p) worker(p);
      });
  };

  if (!modified) {
    for_blocks([&](std::size_t slot, std::int64_t bg, std::int64_t r0, std::int64_t rows) {
      const slot_mem m = slot_of(slot);
      prod.scores(rows, q_rows(m, r0, rows), kc + bg * S * E, m.sc, S, m.pa, m.pb);
      for (std::int64_t i = 0; i < rows; ++i) {
        C* r = m.sc + i * S;
        if (round_to != element_type::undefined) round_row(r, S, round_to);
        softmax_row(r, S, round_to);
      }
      y_rows(m, bg, r0, rows, m.sc, S);
    });
    return {};
  }

  // With modifiers: the whole score tensor.
  const std::int64_t sdims[] = {B, Hq, L, S};
  const std::int64_t total = nrows * S;
  tensor s_store = ctx.scratch(element_type_of_v<C>, static_cast<std::size_t>(total));
  C* const sp = s_store.typed<C>();
  for_blocks([&](std::size_t slot, std::int64_t bg, std::int64_t r0, std::int64_t rows) {
    const slot_mem m = slot_of(slot);
    prod.scores(rows, q_rows(m, r0, rows), kc + bg * S * E, sp + r0 * S, S, m.pa, m.pb);
  });
  // The scores in softmax_precision (that cast rounds them), through score_mod.
  tensor scores = as_precision<C>(ctx, s_store, sp, prec, sdims);
  if (a.score_mod != nullptr) {
    EPSTACK_ASSIGN_OR_RETURN(scores, run_modifier(ctx, *a.score_mod, "score_mod", std::move(scores)));
  }
  // The softmax, row by row, from the (modified) scores into sp.
  dispatch<float, double, float16, bfloat16>(prec, [&](auto tag) {
    using P = typename decltype(tag)::type;
    const P* src = scores.typed<P>();
    parallel_items(ctx, static_cast<std::size_t>(nrows), static_cast<std::size_t>(S) * 4, [&](std::size_t i0, std::size_t i1) {
      for (std::size_t i = i0; i < i1; ++i) {
        const auto off = static_cast<std::int64_t>(i) * S;
        convert_n<C>(src + off, S, sp + off);
        softmax_row(sp + off, S, round_to);
      }
    });
  });
  scores = tensor();
  // The probabilities through prob_mod, back as C.
  const C* probs = sp;
  tensor modified_probs;
  if (a.prob_mod != nullptr) {
    EPSTACK_ASSIGN_OR_RETURN(modified_probs,
                             run_modifier(ctx, *a.prob_mod, "prob_mod", as_precision<C>(ctx, s_store, sp, prec, sdims)));
    if (prec == element_type_of_v<C>) {
      probs = modified_probs.typed<C>();
    } else {
      dispatch<float, double, float16, bfloat16>(prec, [&](auto tag) {
        using P = typename decltype(tag)::type;
        cvt_parallel<C>(ctx, modified_probs.typed<P>(), total, sp);
      });
    }
  }
  for_blocks([&](std::size_t slot, std::int64_t bg, std::int64_t r0, std::int64_t rows) {
    y_rows(slot_of(slot), bg, r0, rows, probs + r0 * S, S);
  });
  return {};
}

/// Checks a modifier subgraph's signature: one input to bind (others must be initializers) and one output, of the
/// element type `prec` where declared.
Status check_modifier(const graph* body, std::string_view which, element_type prec) {
  if (body == nullptr) return {};
  std::size_t bound = 0;
  element_type in_elem = element_type::undefined;
  for (value_id v : body->inputs()) {
    if (body->value(v).initializer) continue;
    if (bound++ == 0 && body->value(v).type.kind == type_kind::tensor) in_elem = body->value(v).type.elem;
  }
  if (bound != 1)
    return invalid(cat(op_name, ": ", which, " must have exactly one input, it has ", str(static_cast<std::int64_t>(bound))));
  if (body->outputs().size() != 1)
    return invalid(cat(op_name, ": ", which, " must have exactly one output, it has ",
                       str(static_cast<std::int64_t>(body->outputs().size()))));
  if (in_elem != element_type::undefined && in_elem != prec)
    return invalid(cat(op_name, ": the input of ", which, " is declared ", std::string(to_string(in_elem)),
                       ", but softmax_precision makes it ", std::string(to_string(prec))));
  return {};
}

}  // namespace
}  // namespace impl

namespace ops {
using namespace impl;

bool flex_attention::supports(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (nd.inputs.size() < 3) return false;
  const auto t = in_type(g, n, 0);
  if (!is_float(t)) return false;
  for (std::size_t i : {1, 2})
    if (!has_in(g, n, i) || in_type(g, n, i) != t) return false;
  for (std::size_t i : {0, 1, 2}) {
    const int r = in_rank(g, n, i);
    if (r >= 0 && r != 4) return false;
  }
  return true;
}

Result<compute_function> flex_attention::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  flex_attrs a;
  a.has_scale = has_attr(nd, "scale");
  a.scale = attr_f(nd, "scale", 1.0f);
  const element_type t = in_type(g, n, 0);
  if (has_attr(nd, "softmax_precision")) {
    const std::int64_t p = attr_i(nd, "softmax_precision", 0);
    const auto e = static_cast<element_type>(p);
    if (e != element_type::float32 && e != element_type::float64 && e != element_type::float16 &&
        e != element_type::bfloat16)
      return invalid(cat(op_name, ": softmax_precision must be a floating-point type (1, 10, 11 or 16), got ", str(p)));
    a.prec = e;
  } else {
    a.prec = t == element_type::float64 ? element_type::float64 : element_type::float32;
  }
  a.score_mod = graph_attr(nd, "score_mod");
  a.prob_mod = graph_attr(nd, "prob_mod");
  EPSTACK_RETURN_IF_ERROR(check_modifier(a.score_mod, "score_mod", a.prec));
  EPSTACK_RETURN_IF_ERROR(check_modifier(a.prob_mod, "prob_mod", a.prec));
  // Computes in double for double inputs or a double softmax_precision, else in float.
  const bool wide = t == element_type::float64 || a.prec == element_type::float64;
  Result<compute_function> r = Status(errc::not_implemented, "FlexAttention: unsupported element type");
  dispatch<float, double, float16, bfloat16>(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (wide) r = make_fn("FlexAttention", [a](compute_context& ctx) { return flex_compute<T, double>(a, ctx); });
    else if constexpr (!std::is_same_v<T, double>)
      r = make_fn("FlexAttention", [a](compute_context& ctx) { return flex_compute<T, float>(a, ctx); });
  });
  return r;
}

}  // namespace ops
}  // namespace epstack::cpu
