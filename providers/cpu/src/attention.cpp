// The building blocks of exported transformer decoders: Attention (opsets 23 and 24), RMSNormalization (23) and
// RotaryEmbedding (23).
//
// Over 700 lines on purpose: Attention's kernel is one function whose steps share its shapes and scratch, and the three
// opset-23 decoder ops share compute_t and the row primitives (those FlexAttention uses too are in attention_util.hpp).
//
// Attention works on one (batch, kv head) group at a time. The q heads that share the kv head (grouped-query and
// multi-query attention) are stacked as the rows of one product, ordered by query position then head, and cut into
// row blocks. For each block: scores = scale * Q K^T (float: the packed SGEMM, Q rows packed once, K packed in column
// chunks), then per row the softcap, the mask bias, the causal and padding limit (a prefix of the keys: keys past it
// are skipped by both products), a softmax, and Y = P V (float: the SGEMM reads V in place). Blocks are taken from a
// shared counter by the intra-op threads, each with scratch of its own. float16 and bfloat16 compute in float, double
// in double. Shapes of a single query row (decoding) use plain dot-product and axpy loops instead of the packed
// kernel, whose panels are 12 rows.
//
// Where the spec text and the ONNX reference implementation (and the backend test data generated from it) disagree,
// the reference is followed:
//  * is_causal with a past cache: the causal mask is aligned bottom-right, so query i (of S) attends key j (of
//    past + S) iff j <= i + past_sequence_length (the spec text says "upper left"). With nonpad_kv_seqlen and no
//    past, the offset is nonpad_kv_seqlen[b] - S per batch.
//  * is_causal and attn_mask together: both apply (Attention-23's text says only one of them can be given).
//  * attn_mask shorter than the total sequence length is padded with -inf (false), also in opset 23; a last
//    dimension of 1 is padded too, not broadcast.
//  * a row with no key to attend (every score masked) gives NaN, as the reference's softmax of -inf does.
//  * qk_matmul_output_mode 0 returns the scaled Q K^T before the softcap, as the spec says (the reference's code
//    returns it after the softcap; no backend test covers mode 0 with a softcap).
// softmax_precision is accepted and not needed: the softmax always runs in float (double for double inputs).
#include "attention_util.hpp"
#include "gemm.hpp"
#include "row_util.hpp"
#include "sgemm.hpp"

#include <atomic>

namespace epstack::cpu {
namespace impl {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Element types and row primitives

/// The type a kernel computes in: double for double, float for float, float16 and bfloat16.
template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class C>
inline C neg_inf() {
  return -std::numeric_limits<C>::infinity();
}

// Sum of squares of x[0, n), read as C.
template <class C, class T>
C row_sum_sq(const T* x, std::int64_t n) {
  C acc[lanes] = {};
  std::int64_t i = 0;
  constexpr auto L = static_cast<std::int64_t>(lanes);
  for (; i + L <= n; i += L)
    for (std::int64_t j = 0; j < L; ++j) {
      const C v = convert<C>(x[i + j]);
      acc[j] += v * v;
    }
  for (std::int64_t j = 0; i + j < n; ++j) {
    const C v = convert<C>(x[i + j]);
    acc[j] += v * v;
  }
  return fold_lanes(acc, [](C a, C b) { return a + b; });
}

/// tanh(x) with an absolute error below 3e-7: its Taylor series for |x| < 0.25 (relative accuracy near 0), else
/// 1 - 2 / (exp(2|x|) + 1) with the sign of x; both computed and one selected, so that loops stay branch-free.
inline float fast_tanh(float x) {
  const float a = std::fabs(x);
  const float big = std::copysign(1.0f - 2.0f / (fast_exp(2.0f * a) + 1.0f), x);
  const float x2 = x * x;
  // tanh x = x - x^3/3 + 2x^5/15 - 17x^7/315 + 62x^9/2835 - ...
  float s = 62.0f / 2835.0f;
  s = s * x2 - 17.0f / 315.0f;
  s = s * x2 + 2.0f / 15.0f;
  s = s * x2 - 1.0f / 3.0f;
  s = s * x2 + 1.0f;
  return a < 0.25f ? x * s : big;
}
template <class C>
inline C exp_of(C x) {
  if constexpr (std::is_same_v<C, float>) return fast_exp(x);
  else return std::exp(x);
}
template <class C>
inline C tanh_of(C x) {
  if constexpr (std::is_same_v<C, float>) return fast_tanh(x);
  else return std::tanh(x);
}

/// Softmax over x[0, n) in place. False when no entry can be attended (n = 0, or every entry -inf): the row is left
/// as it was.
template <class C>
bool softmax_prefix(C* x, std::int64_t n) {
  if (n <= 0) return false;
  const C m = row_max(x, n);
  if (m == neg_inf<C>()) return false;
  for (std::int64_t i = 0; i < n; ++i) x[i] = exp_of<C>(x[i] - m);
  const C inv = C(1) / row_sum(x, n);
  for (std::int64_t i = 0; i < n; ++i) x[i] *= inv;
  return true;
}

bool has_out(const graph& g, node_id n, std::size_t i) {
  return i < g.node(n).outputs.size() && g.node(n).outputs[i] != no_id;
}

#define EPSTACK_MASK_TYPES                                                                                            \
  bool, float, double, ::epstack::float16, ::epstack::bfloat16, std::int8_t, std::uint8_t, std::int16_t,              \
      std::uint16_t, std::int32_t, std::uint32_t, std::int64_t, std::uint64_t

// ---------------------------------------------------------------------------------------------------------------
// Attention

struct attention_attrs {
  std::int64_t q_heads = 0, kv_heads = 0;  // 0: not given
  bool has_scale = false;
  float scale = 1.0f;
  bool causal = false;
  float softcap = 0.0f;
  int qk_mode = 0;
  bool want[4] = {true, false, false, false};  // which outputs the node has
};

/// Keys or values of every (batch, kv head) as rows of C: row t of group (b, g) at at(b, g) + t * ld.
template <class C>
struct kv_view {
  const C* base = nullptr;
  std::int64_t bstride = 0, hstride = 0, ld = 0;
  [[nodiscard]] const C* at(std::int64_t b, std::int64_t g) const { return base + b * bstride + g * hstride; }
};

/// dst[B, H, P + Tn, Dd] = concat(past[B, H, P, Dd], new keys or values along the sequence), converted to X. The new
/// ones are [B, H, Tn, Dd] (4-D inputs) or [B, Tn, H * Dd] (3-D).
template <class X, class T>
void gather_cache(const compute_context& ctx, X* dst, const T* past, const T* nw, bool three_d, std::int64_t B,
                  std::int64_t H, std::int64_t P, std::int64_t Tn, std::int64_t Dd) {
  const std::int64_t Tt = P + Tn, rows = B * H * Tt;
  if (rows == 0 || Dd == 0) return;
  parallel_items(ctx, static_cast<std::size_t>(rows), static_cast<std::size_t>(Dd), [&](std::size_t r0, std::size_t r1) {
    for (std::size_t r = r0; r < r1; ++r) {
      const auto ri = static_cast<std::int64_t>(r);
      const std::int64_t b = ri / (H * Tt), g = ri / Tt % H, t = ri % Tt;
      const T* src = t < P    ? past + ((b * H + g) * P + t) * Dd
                     : three_d ? nw + ((b * Tn + (t - P)) * H + g) * Dd
                               : nw + ((b * H + g) * Tn + (t - P)) * Dd;
      convert_n<X>(src, Dd, dst + ri * Dd);
    }
  });
}

// scores[rows, ncols] (leading dimension ldc) = scale * A[rows, D] * K[ncols, D]^T.
template <class C>
void scores_product(bool packed, bool small, std::int64_t rows, std::int64_t ncols, std::int64_t D, C scale, const C* A,
                    const C* kp, std::int64_t ldk, C* sc, std::int64_t ldc, float* pa, float* pb, std::int64_t kchunk) {
  if (rows == 0 || ncols == 0) return;
  if constexpr (std::is_same_v<C, float>) {
    if (packed) {
      pack_a(pa, A, D, false, rows, D);
      for (std::int64_t j0 = 0; j0 < ncols; j0 += kchunk) {
        const std::int64_t nc = std::min(kchunk, ncols - j0);
        pack_b(pb, kp + j0 * ldk, ldk, true, D, nc);
        sgemm_packed(rows, nc, D, pa, pb, sc + j0, ldc, scale, false, 0, a_panels(rows), 0, b_panels(nc));
      }
      return;
    }
  }
  if (small) {
    for (std::int64_t j = 0; j < ncols; ++j) {
      const C* k = kp + j * ldk;
      for (std::int64_t i = 0; i < rows; ++i) sc[i * ldc + j] = scale * dot(A + i * D, k, D);
    }
    return;
  }
  gemm_block<C>(false, true, rows, ncols, D, scale, A, D, kp, ldk, sc, ldc, false);
}

// Y[rows, Dv] = P[rows, nk] (leading dimension ldp) * V[nk, Dv] (leading dimension ldv).
template <class C>
void values_product(bool packed, bool small, std::int64_t rows, std::int64_t nk, std::int64_t Dv, C* p, std::int64_t ldp,
                    const C* vp, std::int64_t ldv, C* y, float* pa) {
  if (rows == 0 || Dv == 0) return;
  if constexpr (std::is_same_v<C, float>) {
    if (packed) {
      pack_a(pa, p, ldp, false, rows, nk);
      sgemm(rows, Dv, nk, pa, sgemm_b{vp, ldv}, y, Dv, 1.0f, false, nullptr, 0, a_panels(rows), 0, b_panels(Dv));
      return;
    }
  }
  if (small || nk == 0) {
    std::fill_n(y, rows * Dv, C(0));
    for (std::int64_t j = 0; j < nk; ++j) {
      const C* v = vp + j * ldv;
      for (std::int64_t i = 0; i < rows; ++i) {
        const C w = p[i * ldp + j];
        if (w == C(0)) continue;
        C* out = y + i * Dv;
        for (std::int64_t d = 0; d < Dv; ++d) out[d] += w * v[d];
      }
    }
    return;
  }
  gemm_block<C>(false, false, rows, Dv, nk, C(1), p, ldp, vp, ldv, y, Dv, false);
}

template <class T>
Status attention_compute(const attention_attrs& a, compute_context& ctx) {
  using C = compute_t<T>;
  constexpr std::string_view op = "Attention";
  const tensor& q = ctx.input(0);
  const tensor& k = ctx.input(1);
  const tensor& v = ctx.input(2);
  const char* names[] = {"Q", "K", "V", "attn_mask", "past_key", "past_value"};
  for (std::size_t i : {0, 1, 2, 4, 5})
    if (ctx.has_input(i) && ctx.input(i).type() != element_type_of_v<T>)
      return op_error(op, cat(names[i], " has element type ", std::string(to_string(ctx.input(i).type())), ", expected ",
                              std::string(to_string(element_type_of_v<T>))));
  const std::size_t rank = q.rank();
  if ((rank != 3 && rank != 4) || k.rank() != rank || v.rank() != rank)
    return op_error(op, cat("Q, K and V must all be 3-D or all 4-D, got ", dims_string(q.sizes()), ", ",
                            dims_string(k.sizes()), " and ", dims_string(v.sizes())));
  const bool three = rank == 3;
  const auto qs = q.sizes(), ks = k.sizes(), vs = v.sizes();
  const std::int64_t B = qs[0];
  std::int64_t Hq = 0, Hk = 0, Hv = 0, S = 0, Tn = 0, Tv = 0, D = 0, Dk = 0, Dv = 0;
  if (!three) {
    Hq = qs[1], S = qs[2], D = qs[3], Hk = ks[1], Tn = ks[2], Dk = ks[3], Hv = vs[1], Tv = vs[2], Dv = vs[3];
    if (a.q_heads != 0 && a.q_heads != Hq)
      return op_error(op, cat("q_num_heads (", str(a.q_heads), ") does not match dimension 1 of Q ", dims_string(qs)));
    if (a.kv_heads != 0 && a.kv_heads != Hk)
      return op_error(op, cat("kv_num_heads (", str(a.kv_heads), ") does not match dimension 1 of K ", dims_string(ks)));
  } else {
    if (a.q_heads == 0) return op_error(op, "q_num_heads is required with 3-D inputs");
    if (a.kv_heads == 0) return op_error(op, "kv_num_heads is required with 3-D inputs");
    Hq = a.q_heads, Hk = Hv = a.kv_heads, S = qs[1], Tn = ks[1], Tv = vs[1];
    if (qs[2] % Hq != 0)
      return op_error(op, cat("the hidden size of Q ", dims_string(qs), " is not a multiple of q_num_heads (", str(Hq), ")"));
    if (ks[2] % Hk != 0)
      return op_error(op, cat("the hidden size of K ", dims_string(ks), " is not a multiple of kv_num_heads (", str(Hk), ")"));
    if (vs[2] % Hk != 0)
      return op_error(op, cat("the hidden size of V ", dims_string(vs), " is not a multiple of kv_num_heads (", str(Hk), ")"));
    D = qs[2] / Hq, Dk = ks[2] / Hk, Dv = vs[2] / Hk;
  }
  if (ks[0] != B || vs[0] != B)
    return op_error(op, cat("Q, K and V have different batch sizes: ", dims_string(qs), ", ", dims_string(ks), ", ",
                            dims_string(vs)));
  if (Hk <= 0 || Hq % Hk != 0)
    return op_error(op, cat("q_num_heads (", str(Hq), ") must be a multiple of kv_num_heads (", str(Hk), ")"));
  if (Hv != Hk) return op_error(op, cat("K has ", str(Hk), " heads and V ", str(Hv)));
  if (Dk != D) return op_error(op, cat("the head size of K (", str(Dk), ") differs from Q's (", str(D), ")"));
  if (Tv != Tn) return op_error(op, cat("K and V have different sequence lengths: ", str(Tn), " and ", str(Tv)));

  // The past cache.
  const bool has_past = ctx.has_input(4);
  if (has_past != ctx.has_input(5)) return op_error(op, "past_key and past_value must be given together");
  std::int64_t P = 0;
  const T* past_k = nullptr;
  const T* past_v = nullptr;
  if (has_past) {
    const tensor& pk = ctx.input(4);
    const tensor& pv = ctx.input(5);
    if (pk.rank() != 4 || pk.sizes()[0] != B || pk.sizes()[1] != Hk || pk.sizes()[3] != D)
      return op_error(op, cat("past_key ", dims_string(pk.sizes()), " must be [", str(B), ",", str(Hk), ",past,", str(D), "]"));
    P = pk.sizes()[2];
    if (pv.rank() != 4 || pv.sizes()[0] != B || pv.sizes()[1] != Hk || pv.sizes()[2] != P || pv.sizes()[3] != Dv)
      return op_error(op, cat("past_value ", dims_string(pv.sizes()), " must be [", str(B), ",", str(Hk), ",", str(P),
                              ",", str(Dv), "]"));
    past_k = pk.typed<T>();
    past_v = pv.typed<T>();
  }
  const std::int64_t Tt = P + Tn;

  // nonpad_kv_seqlen (opset 24): the valid keys of each batch entry.
  const std::int64_t* nonpad = nullptr;
  if (ctx.has_input(6)) {
    const tensor& t = ctx.input(6);
    if (t.type() != element_type::int64 || t.rank() != 1 || t.sizes()[0] != B)
      return op_error(op, cat("nonpad_kv_seqlen must be an int64 vector of ", str(B), " values, got ",
                              std::string(to_string(t.type())), " ", dims_string(t.sizes())));
    nonpad = t.typed<std::int64_t>();
  }
  // The keys row (b, s) may attend: a prefix [0, limit).
  const auto limit = [&](std::int64_t b, std::int64_t s) {
    std::int64_t n = Tt;
    if (nonpad != nullptr) n = std::min(n, std::max<std::int64_t>(0, nonpad[b]));
    if (a.causal) {
      const std::int64_t off = has_past || nonpad == nullptr ? P : nonpad[b] - S;
      n = std::min(n, std::max<std::int64_t>(0, s + off + 1));
    }
    return n;
  };

  // The mask as an additive bias of C, [mb, mh, ms, Tt] broadcast to [B, Hq, S, Tt].
  const C* bias = nullptr;
  std::int64_t bias_bs = 0, bias_hs = 0, bias_ss = 0;
  tensor bias_store;
  if (ctx.has_input(3)) {
    const tensor& m = ctx.input(3);
    if (m.rank() == 0 || m.rank() > 4)
      return op_error(op, cat("attn_mask must have rank 1 to 4, got ", dims_string(m.sizes())));
    std::int64_t md[4] = {1, 1, 1, 1};
    for (std::size_t i = 0; i < m.rank(); ++i) md[4 - m.rank() + i] = m.sizes()[i];
    if ((md[0] != 1 && md[0] != B) || (md[1] != 1 && md[1] != Hq) || (md[2] != 1 && md[2] != S) || md[3] > Tt)
      return op_error(op, cat("attn_mask ", dims_string(m.sizes()), " does not broadcast to [", str(B), ",", str(Hq), ",",
                              str(S), ",", str(Tt), "]"));
    bias_ss = md[2] > 1 ? Tt : 0;
    bias_hs = md[1] > 1 ? md[2] * Tt : 0;
    bias_bs = md[0] > 1 ? md[1] * md[2] * Tt : 0;
    if (m.type() == element_type_of_v<C> && md[3] == Tt) {
      bias = m.typed<C>();
    } else {
      const std::int64_t rows = md[0] * md[1] * md[2], mt = md[3];
      bias_store = ctx.scratch(element_type_of_v<C>, static_cast<std::size_t>(rows * Tt));
      C* out = bias_store.typed<C>();
      const bool ok = dispatch<EPSTACK_MASK_TYPES>(m.type(), [&](auto tag) {
        using M = typename decltype(tag)::type;
        const M* src = m.typed<M>();
        parallel_items(ctx, static_cast<std::size_t>(rows), static_cast<std::size_t>(Tt), [&](std::size_t r0, std::size_t r1) {
          for (std::size_t r = r0; r < r1; ++r) {
            const M* s = src + static_cast<std::int64_t>(r) * mt;
            C* o = out + static_cast<std::int64_t>(r) * Tt;
            for (std::int64_t j = 0; j < mt; ++j) {
              if constexpr (std::is_same_v<M, bool>) o[j] = s[j] ? C(0) : neg_inf<C>();
              else o[j] = convert<C>(s[j]);
            }
            for (std::int64_t j = mt; j < Tt; ++j) o[j] = neg_inf<C>();
          }
        });
      });
      if (!ok) return op_error(op, cat("attn_mask has unsupported element type ", std::string(to_string(m.type()))));
      bias = out;
    }
  }

  // Outputs.
  const std::int64_t ydims4[] = {B, Hq, S, Dv}, ydims3[] = {B, S, Hq * Dv};
  tensor& y = ctx.allocate_output(0, element_type_of_v<T>, three ? std::span<const std::int64_t>(ydims3)
                                                                 : std::span<const std::int64_t>(ydims4));
  T* py = y.typed<T>();
  const auto want = [&](std::size_t i) { return a.want[i] && ctx.output_count() > i; };
  T* present_k = want(1) ? ctx.allocate_output(1, element_type_of_v<T>, {B, Hk, Tt, D}).template typed<T>() : nullptr;
  T* present_v = want(2) ? ctx.allocate_output(2, element_type_of_v<T>, {B, Hk, Tt, Dv}).template typed<T>() : nullptr;
  T* qk_out = want(3) ? ctx.allocate_output(3, element_type_of_v<T>, {B, Hq, S, Tt}).template typed<T>() : nullptr;

  // Keys and values as rows of C: the inputs themselves (float or double, no past), else past and new concatenated
  // into the present output (when it is wanted and of type C) or into scratch.
  const auto make_view = [&](const T* input, const T* past, T* present, std::int64_t Dd, tensor& store) {
    kv_view<C> vw;
    if constexpr (std::is_same_v<T, C>) {
      if (!has_past) {
        if (present != nullptr) gather_cache<T, T>(ctx, present, nullptr, input, three, B, Hk, 0, Tn, Dd);
        vw.base = input;
        vw.bstride = Hk * Tn * Dd;
        vw.hstride = three ? Dd : Tn * Dd;
        vw.ld = three ? Hk * Dd : Dd;
        return vw;
      }
    }
    C* buf = nullptr;
    if constexpr (std::is_same_v<T, C>) buf = present;
    else if (present != nullptr) gather_cache<T, T>(ctx, present, past, input, three, B, Hk, P, Tn, Dd);
    if (buf == nullptr) {
      store = ctx.scratch(element_type_of_v<C>, static_cast<std::size_t>(B * Hk * Tt * Dd));
      buf = store.template typed<C>();
    }
    gather_cache<C, T>(ctx, buf, past, input, three, B, Hk, P, Tn, Dd);
    vw.base = buf;
    vw.bstride = Hk * Tt * Dd;
    vw.hstride = Tt * Dd;
    vw.ld = Dd;
    return vw;
  };
  tensor k_store, v_store;
  const kv_view<C> kview = make_view(k.typed<T>(), past_k, present_k, D, k_store);
  const kv_view<C> vview = make_view(v.typed<T>(), past_v, present_v, Dv, v_store);

  // Row blocks: the rows of group (b, g) are m = s * reps + r (query position s, q head g * reps + r).
  const std::int64_t reps = Hq / Hk, rows_total = S * reps, groups = B * Hk;
  if (rows_total == 0 || groups == 0) return {};
  const int threads = ctx.thread_count();
  std::int64_t mb = rows_total;
  if (rows_total > 4) {
    // A block's scores (mb x Tt) stay within about 256 KiB; blocks are halved while there are too few to spread.
    const std::int64_t cap = std::max<std::int64_t>(sgemm_mr, 65536 / std::max<std::int64_t>(Tt, 1));
    mb = std::min<std::int64_t>({rows_total, 192, cap});
    while (mb > 2 * sgemm_mr && groups * ((rows_total + mb - 1) / mb) < 3 * static_cast<std::int64_t>(threads))
      mb = (mb + 1) / 2;
    if (mb < rows_total) mb = std::min(rows_total, (mb + sgemm_mr - 1) / sgemm_mr * sgemm_mr);
  }
  const std::int64_t nblk = (rows_total + mb - 1) / mb;
  const auto tasks = static_cast<std::size_t>(groups * nblk);
  const bool small = mb <= 4;  // a few query rows (decoding): dot products and axpy, no packing
  bool packed = false;
  if constexpr (std::is_same_v<C, float>) packed = !small && sgemm_packed_available();
  constexpr std::int64_t kchunk = 512;  // keys packed at a time
  const std::int64_t a_sz = mb * D, s_sz = mb * Tt, y_sz = mb * Dv;
  const std::int64_t pa_sz =
      packed ? static_cast<std::int64_t>(std::max(packed_a_size(mb, D), packed_a_size(mb, Tt))) + 16 : 0;
  const std::int64_t pb_sz = packed ? static_cast<std::int64_t>(packed_b_size(D, std::min(kchunk, Tt))) + 16 : 0;
  const std::int64_t slot_sz = a_sz + s_sz + y_sz + pa_sz + pb_sz;
  const double cost = static_cast<double>(groups) * static_cast<double>(rows_total) * static_cast<double>(Tt) *
                      static_cast<double>(D + Dv + 8);
  const std::size_t slots = threads > 1 && tasks > 1 && cost > 65536.0
                                ? std::min(static_cast<std::size_t>(threads), tasks) : 1;
  tensor work = ctx.scratch(element_type_of_v<C>, slots * static_cast<std::size_t>(slot_sz));
  tensor lims = ctx.scratch(element_type::int64, slots * static_cast<std::size_t>(mb));
  C* work_p = work.typed<C>();
  std::int64_t* lims_p = lims.typed<std::int64_t>();
  const C scale = a.has_scale ? static_cast<C>(a.scale) : C(1) / std::sqrt(static_cast<C>(D));
  const C cap = static_cast<C>(a.softcap), inv_cap = a.softcap > 0 ? C(1) / cap : C(0);
  const bool capped = a.softcap > 0;
  const int mode = a.qk_mode;
  const T* pq = q.typed<T>();
  const T t_neg_inf = convert<T>(neg_inf<C>()), t_nan = convert<T>(std::numeric_limits<C>::quiet_NaN());

  const auto run_block = [&](std::size_t slot, std::int64_t bg, std::int64_t m0, std::int64_t m1) {
    const std::int64_t b = bg / Hk, g = bg % Hk, rows = m1 - m0;
    C* A = work_p + static_cast<std::int64_t>(slot) * slot_sz;
    C* sc = A + a_sz;
    C* yb = sc + s_sz;
    float* pa = nullptr;
    float* pb = nullptr;
    if constexpr (std::is_same_v<C, float>) {
      if (packed) {
        pa = align64(yb + y_sz);
        pb = align64(yb + y_sz + pa_sz);
      }
    }
    std::int64_t* lim = lims_p + static_cast<std::int64_t>(slot) * mb;
    // Gather the block's query rows as C.
    std::int64_t nmax = 0;
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t s = (m0 + i) / reps, h = g * reps + (m0 + i) % reps;
      lim[i] = limit(b, s);
      nmax = std::max(nmax, lim[i]);
      const T* qr = three ? pq + ((b * S + s) * Hq + h) * D : pq + ((b * Hq + h) * S + s) * D;
      convert_n<C>(qr, D, A + i * D);
    }
    const std::int64_t ncols = qk_out != nullptr ? Tt : nmax;
    scores_product<C>(packed, small, rows, ncols, D, scale, A, kview.at(b, g), kview.ld, sc, Tt, pa, pb, kchunk);
    // Softcap, bias, limit and softmax, row by row.
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t s = (m0 + i) / reps, h = g * reps + (m0 + i) % reps, n = lim[i];
      C* r = sc + i * Tt;
      T* qo = qk_out != nullptr ? qk_out + ((b * Hq + h) * S + s) * Tt : nullptr;
      if (qo != nullptr && mode == 0) convert_n<T>(r, Tt, qo);
      if (capped) {
        const std::int64_t nc = qo != nullptr && mode == 1 ? Tt : n;
        for (std::int64_t j = 0; j < nc; ++j) r[j] = cap * tanh_of<C>(r[j] * inv_cap);
      }
      if (qo != nullptr && mode == 1) convert_n<T>(r, Tt, qo);
      if (bias != nullptr) {
        const C* br = bias + b * bias_bs + h * bias_hs + s * bias_ss;
        for (std::int64_t j = 0; j < n; ++j) r[j] += br[j];
      }
      if (qo != nullptr && mode == 2) {
        convert_n<T>(r, n, qo);
        std::fill(qo + n, qo + Tt, t_neg_inf);
      }
      const bool alive = softmax_prefix(r, n);
      if (!alive) {
        std::fill(r, r + n, C(0));
        lim[i] = -1;
      }
      if (n < nmax) std::fill(r + n, r + nmax, C(0));
      if (qo != nullptr && mode == 3) {
        if (alive) {
          convert_n<T>(r, n, qo);
          std::fill(qo + n, qo + Tt, T{});
        } else {
          std::fill(qo, qo + Tt, t_nan);
        }
      }
    }
    values_product<C>(packed, small, rows, nmax, Dv, sc, Tt, vview.at(b, g), vview.ld, yb, pa);
    for (std::int64_t i = 0; i < rows; ++i) {
      const std::int64_t s = (m0 + i) / reps, h = g * reps + (m0 + i) % reps;
      T* yr = three ? py + ((b * S + s) * Hq + h) * Dv : py + ((b * Hq + h) * S + s) * Dv;
      if (lim[i] < 0) std::fill(yr, yr + Dv, t_nan);
      else convert_n<T>(yb + i * Dv, Dv, yr);
    }
  };

  // The threads take blocks from a shared counter (the most expensive, causal, blocks of a group first).
  std::atomic<std::size_t> next{0};
  const auto worker = [&](std::size_t slot) {
    for (std::size_t t = next.fetch_add(1, std::memory_order_relaxed); t < tasks;
         t = next.fetch_add(1, std::memory_order_relaxed)) {
      const auto ti = static_cast<std::int64_t>(t);
      const std::int64_t bg = ti / nblk, blk = nblk - 1 - ti % nblk;
      run_block(slot, bg, blk * mb, std::min(rows_total, (blk + 1) * mb));
    }
  };
  if (slots == 1) worker(0);
  else
    ctx.parallel_for(slots, 1, [&](std::size_t p0, std::size_t p1) {
      for (std::size_t p = p0; p < p1; ++p) worker(p);
    });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// RMSNormalization: Y = X / sqrt(mean(X^2 over dims [axis, rank)) + epsilon) * scale.

template <class T, class O, class C>
Status rms_compute(std::int64_t axis_attr, float epsilon, compute_context& ctx) {
  constexpr std::string_view op = "RMSNormalization";
  const tensor& x = ctx.input(0);
  const tensor& sct = ctx.input(1);
  if (x.type() != element_type_of_v<T>)
    return op_error(op, cat("X has element type ", std::string(to_string(x.type())), ", expected ",
                            std::string(to_string(element_type_of_v<T>))));
  if (!ctx.has_input(1)) return op_error(op, "scale is missing");
  const auto dims = x.sizes();
  const std::size_t r = dims.size();
  if (r == 0) return op_error(op, "X must have rank >= 1");
  const auto axis = normalize_axis(axis_attr, r);
  if (!axis) return op_error(op, cat("axis ", str(axis_attr), " is out of range for rank ", str(static_cast<std::int64_t>(r))));
  // scale broadcasts to X (unidirectionally): right-aligned, each dim 1 or X's.
  const auto ss = sct.sizes();
  bool ok = ss.size() <= r;
  dims_t sd(r, 1);
  for (std::size_t i = 0; ok && i < ss.size(); ++i) {
    sd[r - ss.size() + i] = ss[i];
    ok = ss[i] == 1 || ss[i] == dims[r - ss.size() + i];
  }
  if (!ok) return op_error(op, cat("scale ", dims_string(ss), " does not broadcast to X ", dims_string(dims)));
  const std::int64_t n = product(dims, *axis), rows = product(dims, 0, *axis);
  tensor& y = ctx.allocate_output(0, element_type_of_v<O>, dims);
  if (n == 0 || rows == 0) return {};
  // The scale as a table of C: one row of n values per combination of its (non-broadcast) outer dims.
  const std::int64_t outer = product(sd, 0, *axis);
  bool inner_full = true;
  for (std::size_t d = *axis; d < r; ++d) inner_full = inner_full && sd[d] == dims[d];
  const C* table = nullptr;
  tensor table_store;
  if (outer == 1 && inner_full && sct.type() == element_type_of_v<C>) {
    table = sct.typed<C>();
  } else {
    table_store = ctx.scratch(element_type_of_v<C>, static_cast<std::size_t>(outer * n));
    C* out = table_store.typed<C>();
    const dims_t sstride = strides_of(sd);
    const dims_t norm(dims.begin() + static_cast<std::ptrdiff_t>(*axis), dims.end());
    const bool known = dispatch<float, double, float16, bfloat16>(sct.type(), [&](auto tag) {
      using V = typename decltype(tag)::type;
      const V* src = sct.typed<V>();
      for (std::int64_t e = 0; e < outer; ++e) {
        // e is row-major over sd[0, axis); its offset in scale is e * (the product of sd[axis, r)).
        const std::int64_t base = e * product(sd, *axis);
        for (std::int64_t j = 0; j < n; ++j) {
          std::int64_t rem = j, off = base;
          for (std::size_t d = r; d-- > *axis;) {
            const std::int64_t i = rem % dims[d];
            rem /= dims[d];
            if (sd[d] != 1) off += i * sstride[d];
          }
          out[e * n + j] = convert<C>(src[off]);
        }
      }
    });
    if (!known) return op_error(op, cat("scale has unsupported element type ", std::string(to_string(sct.type()))));
    table = out;
  }
  const dims_t estride = strides_of(std::span<const std::int64_t>(sd.data(), *axis));
  const T* px = x.typed<T>();
  O* py = y.typed<O>();
  const C eps = static_cast<C>(epsilon), inv_n = C(1) / static_cast<C>(n);
  parallel_items(ctx, static_cast<std::size_t>(rows), static_cast<std::size_t>(n) * 3, [&](std::size_t r0, std::size_t r1) {
    for (std::size_t row = r0; row < r1; ++row) {
      std::int64_t e = 0;
      if (outer > 1) {
        std::int64_t rem = static_cast<std::int64_t>(row);
        for (std::size_t d = *axis; d-- > 0;) {
          const std::int64_t i = rem % dims[d];
          rem /= dims[d];
          if (sd[d] != 1) e += i * estride[d];
        }
      }
      const C* w = table + e * n;
      const T* xr = px + static_cast<std::int64_t>(row) * n;
      O* yr = py + static_cast<std::int64_t>(row) * n;
      const C inv = C(1) / std::sqrt(row_sum_sq<C>(xr, n) * inv_n + eps);
      for (std::int64_t i = 0; i < n; ++i) yr[i] = convert<O>(convert<C>(xr[i]) * inv * w[i]);
    }
  });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// RotaryEmbedding

struct rotary_attrs {
  bool interleaved = false;
  std::int64_t rotary_dim = 0;  // 0: the head size
  std::int64_t num_heads = 0;   // 0: not given
};

template <class T>
Status rotary_compute(const rotary_attrs& a, compute_context& ctx) {
  using C = compute_t<T>;
  constexpr std::string_view op = "RotaryEmbedding";
  const tensor& x = ctx.input(0);
  const tensor& cos_t = ctx.input(1);
  const tensor& sin_t = ctx.input(2);
  for (const tensor* t : {&x, &cos_t, &sin_t})
    if (t->type() != element_type_of_v<T>)
      return op_error(op, cat("X, cos_cache and sin_cache must all be ", std::string(to_string(element_type_of_v<T>)),
                              ", got ", std::string(to_string(t->type()))));
  const auto xd = x.sizes();
  std::int64_t B = 0, H = 0, S = 0, D = 0;
  if (xd.size() == 4) {
    B = xd[0], H = xd[1], S = xd[2], D = xd[3];
  } else if (xd.size() == 3) {
    if (a.num_heads <= 0) return op_error(op, "num_heads is required with a 3-D input");
    if (xd[2] % a.num_heads != 0)
      return op_error(op, cat("the hidden size of X ", dims_string(xd), " is not a multiple of num_heads (", str(a.num_heads), ")"));
    B = xd[0], S = xd[1], H = a.num_heads, D = xd[2] / a.num_heads;
  } else {
    return op_error(op, cat("X must be 3-D or 4-D, got ", dims_string(xd)));
  }
  const std::int64_t rd = a.rotary_dim == 0 ? D : a.rotary_dim;
  if (rd < 0 || rd > D || rd % 2 != 0)
    return op_error(op, cat("rotary_embedding_dim (", str(rd), ") must be even and at most the head size (", str(D), ")"));
  const std::int64_t half = rd / 2;
  if (cos_t.sizes().size() != sin_t.sizes().size() || !std::equal(cos_t.sizes().begin(), cos_t.sizes().end(), sin_t.sizes().begin()))
    return op_error(op, cat("cos_cache ", dims_string(cos_t.sizes()), " and sin_cache ", dims_string(sin_t.sizes()),
                            " differ in shape"));
  const auto cd = cos_t.sizes();
  if (cd.empty() || cd.back() != half)
    return op_error(op, cat("the last dimension of cos_cache ", dims_string(cd), " must be rotary_embedding_dim / 2 (",
                            str(half), ")"));
  const std::int64_t* pos = nullptr;
  std::int64_t max_pos = 0, cache_b = 0;
  if (ctx.has_input(3)) {
    const tensor& p = ctx.input(3);
    if (p.type() != element_type::int64 || p.rank() != 2 || p.sizes()[0] != B || p.sizes()[1] != S)
      return op_error(op, cat("position_ids must be int64 [", str(B), ",", str(S), "], got ",
                              std::string(to_string(p.type())), " ", dims_string(p.sizes())));
    if (cd.size() != 2) return op_error(op, cat("with position_ids, cos_cache must be 2-D, got ", dims_string(cd)));
    max_pos = cd[0];
    pos = p.typed<std::int64_t>();
    for (std::int64_t i = 0; i < B * S; ++i)
      if (pos[i] < 0 || pos[i] >= max_pos)
        return op_error(op, cat("position id ", str(pos[i]), " is out of range [0, ", str(max_pos), ")"));
  } else {
    if (cd.size() != 3 || (cd[0] != B && cd[0] != 1) || cd[1] != S)
      return op_error(op, cat("without position_ids, cos_cache must be [", str(B), ",", str(S), ",", str(half), "], got ",
                              dims_string(cd)));
    cache_b = cd[0] == 1 ? 0 : S * half;
  }
  tensor& y = ctx.allocate_output(0, x.type(), xd);
  const std::int64_t rows = B * H * S;
  if (rows == 0 || D == 0) return {};
  const T* px = x.typed<T>();
  const T* pc = cos_t.typed<T>();
  const T* ps = sin_t.typed<T>();
  T* py = y.typed<T>();
  const bool four = xd.size() == 4;
  const bool inter = a.interleaved;
  parallel_items(ctx, static_cast<std::size_t>(rows), static_cast<std::size_t>(D) * 2, [&](std::size_t r0, std::size_t r1) {
    for (std::size_t row = r0; row < r1; ++row) {
      const auto ri = static_cast<std::int64_t>(row);
      // 4-D rows are (b, h, s), 3-D rows (b, s, h).
      const std::int64_t b = ri / (H * S), s = four ? ri % S : ri / H % S;
      const std::int64_t off = pos != nullptr ? pos[b * S + s] * half : b * cache_b + s * half;
      const T* c = pc + off;
      const T* sn = ps + off;
      const T* xr = px + ri * D;
      T* yr = py + ri * D;
      if (inter) {
        for (std::int64_t i = 0; i < half; ++i) {
          const C cv = convert<C>(c[i]), sv = convert<C>(sn[i]);
          const C x1 = convert<C>(xr[2 * i]), x2 = convert<C>(xr[2 * i + 1]);
          yr[2 * i] = convert<T>(cv * x1 - sv * x2);
          yr[2 * i + 1] = convert<T>(sv * x1 + cv * x2);
        }
      } else {
        for (std::int64_t i = 0; i < half; ++i) {
          const C cv = convert<C>(c[i]), sv = convert<C>(sn[i]);
          const C x1 = convert<C>(xr[i]), x2 = convert<C>(xr[i + half]);
          yr[i] = convert<T>(cv * x1 - sv * x2);
          yr[i + half] = convert<T>(sv * x1 + cv * x2);
        }
      }
      if (rd < D) std::copy(xr + rd, xr + D, yr + rd);
    }
  });
  return {};
}

}  // namespace
}  // namespace impl

// ---------------------------------------------------------------------------------------------------------------
// The kernel types.

namespace ops {
using namespace impl;

bool attention::supports(const graph& g, node_id n) {
  const auto t = in_type(g, n, 0);
  if (!is_float(t)) return false;
  for (std::size_t i : {1, 2, 4, 5})
    if (has_in(g, n, i) && in_type(g, n, i) != t) return false;
  if (!has_in(g, n, 1) || !has_in(g, n, 2)) return false;
  if (has_in(g, n, 3) && !type_in<EPSTACK_MASK_TYPES>(in_type(g, n, 3))) return false;
  if (has_in(g, n, 6) && in_type(g, n, 6) != element_type::int64) return false;
  return true;
}
Result<compute_function> attention::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  attention_attrs a;
  a.q_heads = attr_i(nd, "q_num_heads", 0);
  a.kv_heads = attr_i(nd, "kv_num_heads", 0);
  if (has_attr(nd, "q_num_heads") && a.q_heads <= 0)
    return invalid(cat("Attention: q_num_heads must be positive, got ", str(a.q_heads)));
  if (has_attr(nd, "kv_num_heads") && a.kv_heads <= 0)
    return invalid(cat("Attention: kv_num_heads must be positive, got ", str(a.kv_heads)));
  if (a.q_heads > 0 && a.kv_heads > 0 && a.q_heads % a.kv_heads != 0)
    return invalid(cat("Attention: q_num_heads (", str(a.q_heads), ") must be a multiple of kv_num_heads (",
                       str(a.kv_heads), ")"));
  a.has_scale = has_attr(nd, "scale");
  a.scale = attr_f(nd, "scale", 1.0f);
  a.causal = attr_i(nd, "is_causal", 0) != 0;
  a.softcap = attr_f(nd, "softcap", 0.0f);
  const std::int64_t mode = attr_i(nd, "qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    return invalid(cat("Attention: qk_matmul_output_mode must be 0, 1, 2 or 3, got ", str(mode)));
  a.qk_mode = static_cast<int>(mode);
  for (std::size_t i = 1; i < 4; ++i) a.want[i] = has_out(g, n, i);
  Result<compute_function> r = Status(errc::not_implemented, "Attention: unsupported element type");
  dispatch<float, double, float16, bfloat16>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("Attention", [a](compute_context& ctx) { return attention_compute<T>(a, ctx); });
  });
  return r;
}

bool rms_normalization::supports(const graph& g, node_id n) {
  return is_float(in_type(g, n, 0)) && has_in(g, n, 1) && is_float(in_type(g, n, 1));
}
Result<compute_function> rms_normalization::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const std::int64_t axis = attr_i(nd, "axis", -1);
  const float eps = attr_f(nd, "epsilon", 1e-5f);
  const std::int64_t stash = attr_i(nd, "stash_type", 1);
  const element_type xt = in_type(g, n, 0);
  // Y: the declared output type (the spec says scale's type, the reference returns X's); X's when unknown.
  element_type ot = out_type(g, n, 0);
  if (ot != xt && ot != in_type(g, n, 1)) ot = xt;
  // The statistics in double for double X or stash_type = double, else in float.
  const bool wide = xt == element_type::float64 || stash == static_cast<std::int64_t>(element_type::float64);
  Result<compute_function> r = Status(errc::not_implemented, "RMSNormalization: unsupported element type");
  dispatch<float, double, float16, bfloat16>(xt, [&](auto tx) {
    dispatch<float, double, float16, bfloat16>(ot, [&](auto to) {
      using T = typename decltype(tx)::type;
      using O = typename decltype(to)::type;
      if (wide)
        r = make_fn("RMSNormalization", [=](compute_context& ctx) { return rms_compute<T, O, double>(axis, eps, ctx); });
      else
        r = make_fn("RMSNormalization", [=](compute_context& ctx) { return rms_compute<T, O, float>(axis, eps, ctx); });
    });
  });
  return r;
}

bool rotary_embedding::supports(const graph& g, node_id n) {
  const auto t = in_type(g, n, 0);
  if (!is_float(t) || in_type(g, n, 1) != t || in_type(g, n, 2) != t) return false;
  return !has_in(g, n, 3) || in_type(g, n, 3) == element_type::int64;
}
Result<compute_function> rotary_embedding::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  rotary_attrs a;
  a.interleaved = attr_i(nd, "interleaved", 0) != 0;
  a.rotary_dim = attr_i(nd, "rotary_embedding_dim", 0);
  a.num_heads = attr_i(nd, "num_heads", 0);
  if (a.rotary_dim < 0 || a.rotary_dim % 2 != 0)
    return invalid(cat("RotaryEmbedding: rotary_embedding_dim must be even and non-negative, got ", str(a.rotary_dim)));
  if (has_attr(nd, "num_heads") && a.num_heads <= 0)
    return invalid(cat("RotaryEmbedding: num_heads must be positive, got ", str(a.num_heads)));
  Result<compute_function> r = Status(errc::not_implemented, "RotaryEmbedding: unsupported element type");
  dispatch<float, double, float16, bfloat16>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("RotaryEmbedding", [a](compute_context& ctx) { return rotary_compute<T>(a, ctx); });
  });
  return r;
}

}  // namespace ops
}  // namespace epstack::cpu

#undef EPSTACK_MASK_TYPES
