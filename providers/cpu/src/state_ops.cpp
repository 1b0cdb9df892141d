// Stateful and bit-level operators of ONNX 24-27: LinearAttention (recurrent linear attention with a carried state),
// CausalConvWithState (depthwise causal 1-D convolution with a carried tail), TensorScatter (KV-cache update),
// CumProd and BitCast.
#include "row_util.hpp"

namespace epstack::cpu {
namespace impl {
namespace {

/// A float, float16 or bfloat16 value as float.
template <class T>
float to_f(T v) {
  return static_cast<float>(v);
}
/// A float as T (rounding to nearest even for the 16-bit floats).
template <class T>
T from_f(float v) {
  return T(v);
}

/// Values of a float, float16 or bfloat16 tensor as floats (the state input of LinearAttention may be any of them).
inline void load_floats(const tensor& t, float* dst) {
  const std::size_t n = t.element_count();
  if (t.type() == element_type::float32) std::copy_n(t.typed<float>(), n, dst);
  else if (t.type() == element_type::float16) std::transform(t.typed<float16>(), t.typed<float16>() + n, dst, to_f<float16>);
  else std::transform(t.typed<bfloat16>(), t.typed<bfloat16>() + n, dst, to_f<bfloat16>);
}
/// Floats stored into a float, float16 or bfloat16 tensor.
inline void store_floats(const float* src, tensor& t) {
  const std::size_t n = t.element_count();
  if (t.type() == element_type::float32) std::copy_n(src, n, t.typed<float>());
  else if (t.type() == element_type::float16) std::transform(src, src + n, t.typed<float16>(), from_f<float16>);
  else std::transform(src, src + n, t.typed<bfloat16>(), from_f<bfloat16>);
}
inline bool float_or_half(element_type e) {
  return e == element_type::float32 || e == element_type::float16 || e == element_type::bfloat16;
}
inline std::string type_name(element_type e) { return std::string(to_string(e)); }

// ---------------------------------------------------------------------------------------------------------------
// LinearAttention

enum class update_rule { linear, gated, delta, gated_delta };

struct linear_attention_params {
  std::int64_t q_heads = 0, kv_heads = 0;
  float scale = 0;  // 0: 1 / sqrt(d_k)
  update_rule rule = update_rule::gated_delta;
  element_type state_type = element_type::float32;  // present_state's type when past_state is omitted
};

inline bool rule_gated(update_rule r) { return r == update_rule::gated || r == update_rule::gated_delta; }
inline bool rule_delta(update_rule r) { return r == update_rule::delta || r == update_rule::gated_delta; }
inline std::string_view rule_name(update_rule r) {
  switch (r) {
    case update_rule::linear: return "linear";
    case update_rule::gated: return "gated";
    case update_rule::delta: return "delta";
    default: return "gated_delta";
  }
}

/// The recurrence of every (batch, kv head) pair runs token by token. Its columns (the d_v axis of the state) evolve
/// independently of one another, so an item of parallel work is a (batch, kv head, block of state columns).
template <class T>
Status linear_attention_compute(compute_context& ctx, const linear_attention_params& pr) {
  const tensor& q = ctx.input(0);
  const tensor& k = ctx.input(1);
  const tensor& v = ctx.input(2);
  const tensor& past = ctx.input(3);
  const tensor& decay = ctx.input(4);
  const tensor& beta = ctx.input(5);
  const element_type et = element_type_of_v<T>;
  const char* names[] = {"query", "key", "value"};
  const tensor* qkv[] = {&q, &k, &v};
  for (std::size_t i = 0; i < 3; ++i) {
    if (qkv[i]->empty()) return invalid(cat("the ", names[i], " input is missing"));
    if (qkv[i]->type() != et)
      return invalid(cat(names[i], " has element type ", type_name(qkv[i]->type()), ", expected ", type_name(et)));
    if (qkv[i]->rank() != 3)
      return invalid(cat(names[i], " must have rank 3 (batch, sequence, heads * head size), got shape ",
                         dims_string(qkv[i]->sizes())));
  }
  const std::int64_t B = q.sizes()[0], L = q.sizes()[1], Hq = pr.q_heads, Hkv = pr.kv_heads;
  for (std::size_t i = 1; i < 3; ++i)
    if (qkv[i]->sizes()[0] != B || qkv[i]->sizes()[1] != L)
      return invalid(cat(names[i], " has shape ", dims_string(qkv[i]->sizes()), ", whose batch and sequence sizes differ from query's ",
                         dims_string(q.sizes())));
  if (q.sizes()[2] % Hq != 0)
    return invalid(cat("the last dimension of query (", str(q.sizes()[2]), ") is not a multiple of q_num_heads (", str(Hq), ")"));
  const std::int64_t dk = q.sizes()[2] / Hq;
  if (k.sizes()[2] != Hkv * dk)
    return invalid(cat("key has last dimension ", str(k.sizes()[2]), ", expected kv_num_heads * d_k = ", str(Hkv * dk)));
  if (v.sizes()[2] % Hkv != 0)
    return invalid(cat("the last dimension of value (", str(v.sizes()[2]), ") is not a multiple of kv_num_heads (", str(Hkv), ")"));
  const std::int64_t dv = v.sizes()[2] / Hkv;
  const dims_t state_dims{B, Hkv, dk, dv};
  element_type st = pr.state_type;
  if (!past.empty()) {
    if (!float_or_half(past.type()))
      return invalid(cat("past_state has element type ", type_name(past.type()), ", expected float, float16 or bfloat16"));
    if (!std::equal(state_dims.begin(), state_dims.end(), past.sizes().begin(), past.sizes().end()))
      return invalid(cat("past_state has shape ", dims_string(past.sizes()), ", expected (B, kv_num_heads, d_k, d_v) = ",
                         dims_string(state_dims)));
    st = past.type();
  }
  const bool gated = rule_gated(pr.rule), delta = rule_delta(pr.rule);
  std::int64_t decay_w = 0;  // values of decay per token and kv head: d_k or 1
  if (gated) {
    if (decay.empty()) return invalid(cat("the decay input is required for update_rule '", rule_name(pr.rule), "'"));
    if (decay.type() != et) return invalid(cat("decay has element type ", type_name(decay.type()), ", expected ", type_name(et)));
    const auto d = decay.sizes();
    if (d.size() != 3 || d[0] != B || d[1] != L || (d[2] != Hkv * dk && d[2] != Hkv))
      return invalid(cat("decay has shape ", dims_string(d), ", expected (B, T, kv_num_heads * d_k) = ",
                         dims_string(dims_t{B, L, Hkv * dk}), " or (B, T, kv_num_heads) = ", dims_string(dims_t{B, L, Hkv})));
    decay_w = d[2] == Hkv * dk ? dk : 1;
  }
  std::int64_t beta_w = 0;  // values of beta per token: kv_num_heads or 1
  if (delta) {
    if (beta.empty()) return invalid(cat("the beta input is required for update_rule '", rule_name(pr.rule), "'"));
    if (beta.type() != et) return invalid(cat("beta has element type ", type_name(beta.type()), ", expected ", type_name(et)));
    const auto d = beta.sizes();
    if (d.size() != 3 || d[0] != B || d[1] != L || (d[2] != Hkv && d[2] != 1))
      return invalid(cat("beta has shape ", dims_string(d), ", expected (B, T, kv_num_heads) = ", dims_string(dims_t{B, L, Hkv}),
                         " or (B, T, 1)"));
    beta_w = d[2];
  }
  const float scale = pr.scale != 0.0f ? pr.scale : (dk > 0 ? 1.0f / std::sqrt(static_cast<float>(dk)) : 1.0f);

  tensor& out = ctx.allocate_output(0, et, dims_t{B, L, Hq * dv});
  tensor* present = ctx.output_count() > 1 ? &ctx.allocate_output(1, st, state_dims) : nullptr;
  const std::size_t state_n = static_cast<std::size_t>(B * Hkv * dk * dv);
  // The state in float: present_state itself when it is float, else scratch converted at the end.
  tensor state_scratch;
  float* S = nullptr;
  if (present != nullptr && st == element_type::float32) {
    S = present->typed<float>();
  } else {
    state_scratch = ctx.scratch(element_type::float32, std::max<std::size_t>(state_n, 1));
    S = state_scratch.typed<float>();
  }
  if (past.empty()) std::fill_n(S, state_n, 0.0f);
  else load_floats(past, S);

  const std::int64_t G = Hq / Hkv;
  const std::int64_t pairs = B * Hkv;
  if (pairs > 0 && L > 0 && dv > 0) {
    // Column blocks: one per pair unless there are too few pairs to keep the threads busy.
    std::int64_t nblk = 1;
    const auto threads = static_cast<std::int64_t>(ctx.thread_count());
    if (threads > 1 && pairs < 2 * threads && L * dk * dv * (G + 3) >= 32768)
      nblk = std::min<std::int64_t>((dv + 15) / 16, (2 * threads + pairs - 1) / pairs);
    const std::int64_t items = pairs * nblk;
    const std::size_t cost = static_cast<std::size_t>(L * dk * ((dv + nblk - 1) / nblk) * (G + 3));
    const std::size_t pieces = piece_count(ctx, static_cast<std::size_t>(items), cost);
    const std::size_t per = static_cast<std::size_t>(3 * dk + 2 * dv);
    tensor scratch = ctx.scratch(element_type::float32, std::max<std::size_t>(pieces * per, 1));
    float* scratch_all = scratch.typed<float>();
    const T* pq = q.typed<T>();
    const T* pk = k.typed<T>();
    const T* pv = v.typed<T>();
    const T* pd = gated ? decay.typed<T>() : nullptr;
    const T* pb = delta ? beta.typed<T>() : nullptr;
    T* po = out.typed<T>();
    for_pieces(ctx, static_cast<std::size_t>(items), pieces, [&](std::size_t p, std::size_t i0, std::size_t i1) {
      float* kf = scratch_all + p * per;  // d_k
      float* qf = kf + dk;                // d_k
      float* ef = qf + dk;                // d_k: exp(decay)
      float* uf = ef + dk;                // d_v: the column update (v, or beta * (v - S^T k))
      float* of = uf + dv;                // d_v: one head's output
      for (std::size_t item = i0; item < i1; ++item) {
        const std::int64_t pair = static_cast<std::int64_t>(item) / nblk, blk = static_cast<std::int64_t>(item) % nblk;
        const std::int64_t b = pair / Hkv, h = pair % Hkv;
        const std::int64_t j0 = dv * blk / nblk, j1 = dv * (blk + 1) / nblk;
        float* s = S + pair * dk * dv;
        for (std::int64_t t = 0; t < L; ++t) {
          const std::int64_t tok = b * L + t;
          const T* kt = pk + (tok * Hkv + h) * dk;
          const T* vt = pv + (tok * Hkv + h) * dv;
          for (std::int64_t i = 0; i < dk; ++i) kf[i] = to_f(kt[i]);
          if (gated) {
            const T* g = pd + (tok * Hkv + h) * decay_w;
            if (decay_w == 1) std::fill_n(ef, dk, std::exp(to_f(g[0])));
            else
              for (std::int64_t i = 0; i < dk; ++i) ef[i] = std::exp(to_f(g[i]));
            for (std::int64_t i = 0; i < dk; ++i) {
              float* row = s + i * dv;
              const float e = ef[i];
              for (std::int64_t j = j0; j < j1; ++j) row[j] *= e;
            }
          }
          if (delta) {
            const float bt = to_f(pb[tok * beta_w + (beta_w == 1 ? 0 : h)]);
            for (std::int64_t j = j0; j < j1; ++j) uf[j] = 0.0f;
            for (std::int64_t i = 0; i < dk; ++i) {
              const float* row = s + i * dv;
              const float ki = kf[i];
              for (std::int64_t j = j0; j < j1; ++j) uf[j] += ki * row[j];
            }
            for (std::int64_t j = j0; j < j1; ++j) uf[j] = bt * (to_f(vt[j]) - uf[j]);
          } else {
            for (std::int64_t j = j0; j < j1; ++j) uf[j] = to_f(vt[j]);
          }
          for (std::int64_t i = 0; i < dk; ++i) {
            float* row = s + i * dv;
            const float ki = kf[i];
            for (std::int64_t j = j0; j < j1; ++j) row[j] += ki * uf[j];
          }
          // The query heads that share this kv head read the new state.
          for (std::int64_t gq = 0; gq < G; ++gq) {
            const std::int64_t hq = h * G + gq;
            const T* qt = pq + (tok * Hq + hq) * dk;
            for (std::int64_t i = 0; i < dk; ++i) qf[i] = to_f(qt[i]);
            for (std::int64_t j = j0; j < j1; ++j) of[j] = 0.0f;
            for (std::int64_t i = 0; i < dk; ++i) {
              const float* row = s + i * dv;
              const float qi = qf[i];
              for (std::int64_t j = j0; j < j1; ++j) of[j] += qi * row[j];
            }
            T* ot = po + (tok * Hq + hq) * dv;
            for (std::int64_t j = j0; j < j1; ++j) ot[j] = from_f<T>(scale * of[j]);
          }
        }
      }
    });
  }
  if (present != nullptr && st != element_type::float32) store_floats(S, *present);
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// CausalConvWithState

/// Each (batch, channel) row: the padded sequence P = [past_state (or zeros), input] in float, y[t] = bias +
/// sum_j w[j] * P[t + j], then the activation; present_state is the last k - 1 values of P.
template <class T>
Status causal_conv_compute(compute_context& ctx, bool silu) {
  const tensor& x = ctx.input(0);
  const tensor& w = ctx.input(1);
  const tensor& bias = ctx.input(2);
  const tensor& past = ctx.input(3);
  const element_type et = element_type_of_v<T>;
  if (x.empty() || w.empty()) return invalid(x.empty() ? "the input is missing" : "the weight input is missing");
  const char* names[] = {"input", "weight", "bias", "past_state"};
  const tensor* all[] = {&x, &w, &bias, &past};
  for (std::size_t i = 0; i < 4; ++i)
    if (!all[i]->empty() && all[i]->type() != et)
      return invalid(cat(names[i], " has element type ", type_name(all[i]->type()), ", expected ", type_name(et)));
  if (x.rank() != 3)
    return invalid(cat("input must have rank 3 (batch, channels, length), got shape ", dims_string(x.sizes())));
  const std::int64_t B = x.sizes()[0], C = x.sizes()[1], L = x.sizes()[2];
  if (w.rank() != 3 || w.sizes()[0] != C || w.sizes()[1] != 1 || w.sizes()[2] < 1)
    return invalid(cat("weight has shape ", dims_string(w.sizes()), ", expected (channels, 1, k) with channels = ", str(C),
                       " and k >= 1"));
  const std::int64_t K = w.sizes()[2], P = K - 1;
  if (!bias.empty() && (bias.rank() != 1 || bias.sizes()[0] != C))
    return invalid(cat("bias has shape ", dims_string(bias.sizes()), ", expected (channels) = [", str(C), "]"));
  const dims_t state_dims{B, C, P};
  if (!past.empty() && !std::equal(state_dims.begin(), state_dims.end(), past.sizes().begin(), past.sizes().end()))
    return invalid(cat("past_state has shape ", dims_string(past.sizes()), ", expected (batch, channels, k - 1) = ",
                       dims_string(state_dims)));
  tensor& y = ctx.allocate_output(0, et, x.sizes());
  T* ps = ctx.output_count() > 1 ? ctx.allocate_output(1, et, state_dims).typed<T>() : nullptr;
  const std::int64_t rows = B * C;
  if (rows == 0) return {};
  const T* px = x.typed<T>();
  const T* pw = w.typed<T>();
  const T* pbias = bias.empty() ? nullptr : bias.typed<T>();
  const T* ppast = past.empty() ? nullptr : past.typed<T>();
  T* py = y.typed<T>();
  const std::size_t pieces = piece_count(ctx, static_cast<std::size_t>(rows), static_cast<std::size_t>((L + 1) * K));
  const std::size_t per = static_cast<std::size_t>(P + 2 * L + K);
  tensor scratch = ctx.scratch(element_type::float32, std::max<std::size_t>(pieces * per, 1));
  float* scratch_all = scratch.typed<float>();
  for_pieces(ctx, static_cast<std::size_t>(rows), pieces, [&](std::size_t p, std::size_t r0, std::size_t r1) {
    float* pad = scratch_all + p * per;  // P + L
    float* acc = pad + P + L;            // L
    float* wf = acc + L;                 // K
    for (std::size_t r = r0; r < r1; ++r) {
      const std::int64_t row = static_cast<std::int64_t>(r), c = row % C;
      const T* xr = px + row * L;
      if (ppast != nullptr)
        for (std::int64_t i = 0; i < P; ++i) pad[i] = to_f(ppast[row * P + i]);
      else
        std::fill_n(pad, P, 0.0f);
      for (std::int64_t i = 0; i < L; ++i) pad[P + i] = to_f(xr[i]);
      for (std::int64_t j = 0; j < K; ++j) wf[j] = to_f(pw[c * K + j]);
      std::fill_n(acc, L, pbias != nullptr ? to_f(pbias[c]) : 0.0f);
      for (std::int64_t j = 0; j < K; ++j) {
        const float wj = wf[j];
        const float* src = pad + j;
        for (std::int64_t t = 0; t < L; ++t) acc[t] += wj * src[t];
      }
      T* yr = py + row * L;
      if (silu) {
        for (std::int64_t t = 0; t < L; ++t) {
          // The 16-bit types round the convolution to T before the activation, as Conv then Sigmoid/Mul would.
          const float a = is_half_v<T> ? to_f(from_f<T>(acc[t])) : acc[t];
          yr[t] = from_f<T>(a / (1.0f + fast_exp(-a)));  // fast_exp: relative error below 2e-7, vectorisable
        }
      } else {
        for (std::int64_t t = 0; t < L; ++t) yr[t] = from_f<T>(acc[t]);
      }
      if (ps != nullptr) {
        // The last P values of the padded sequence, taken from the inputs (no rounding).
        T* sr = ps + row * P;
        for (std::int64_t i = 0; i < P; ++i) {
          const std::int64_t at = L + i;  // index into [past, input]
          if (at >= P) sr[i] = xr[at - P];
          else sr[i] = ppast != nullptr ? ppast[row * P + at] : T(0.0f);
        }
      }
    }
  });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// TensorScatter

/// Element i of packed storage (`bits` per element, first element in the least significant bits).
inline unsigned packed_get(const std::byte* p, std::size_t i, std::size_t bits) {
  const std::size_t bit = i * bits;
  return (std::to_integer<unsigned>(p[bit / 8]) >> (bit % 8)) & ((1u << bits) - 1u);
}
inline void packed_set(std::byte* p, std::size_t i, std::size_t bits, unsigned v) {
  const std::size_t bit = i * bits;
  const unsigned mask = ((1u << bits) - 1u) << (bit % 8);
  const unsigned old = std::to_integer<unsigned>(p[bit / 8]);
  p[bit / 8] = static_cast<std::byte>((old & ~mask) | ((v << (bit % 8)) & mask));
}

Status tensor_scatter_compute(compute_context& ctx, std::int64_t axis_attr, bool circular) {
  const tensor& past = ctx.input(0);
  const tensor& upd = ctx.input(1);
  const tensor& wi = ctx.input(2);
  if (past.empty() || upd.empty()) return invalid(past.empty() ? "the past_cache input is missing" : "the update input is missing");
  if (upd.type() != past.type())
    return invalid(cat("update has element type ", type_name(upd.type()), ", past_cache has ", type_name(past.type())));
  const std::size_t r = past.rank();
  if (r < 2) return invalid(cat("past_cache must have rank >= 2 (batch and sequence axes), got shape ", dims_string(past.sizes())));
  const auto ax = normalize_axis(axis_attr, r);
  if (!ax) return bad_axis(axis_attr, r);
  if (*ax == 0) return invalid("axis must not be 0 (the batch axis)");
  const auto pd = past.sizes(), ud = upd.sizes();
  bool same = ud.size() == r;
  for (std::size_t d = 0; same && d < r; ++d) same = d == *ax || ud[d] == pd[d];
  if (!same)
    return invalid(cat("update has shape ", dims_string(ud), ", which must equal past_cache's ", dims_string(pd),
                       " except along axis ", str(static_cast<std::int64_t>(*ax))));
  const std::int64_t max_seq = pd[*ax], seq = ud[*ax], batch = pd[0];
  if (seq > max_seq)
    return invalid(cat("the sequence length of update (", str(seq), ") exceeds max_sequence_length of past_cache (", str(max_seq), ")"));
  const std::int64_t* idx = nullptr;
  if (!wi.empty()) {
    if (wi.type() != element_type::int64)
      return invalid(cat("write_indices must be an int64 tensor, got ", type_name(wi.type())));
    if (wi.rank() != 1 || wi.sizes()[0] != batch)
      return invalid(cat("write_indices has shape ", dims_string(wi.sizes()), ", expected (batch_size) = [", str(batch), "]"));
    idx = wi.typed<std::int64_t>();
    for (std::int64_t b = 0; b < batch; ++b) {
      if (circular) continue;
      if (idx[b] < 0 || idx[b] > max_seq - seq)
        return invalid(cat("write_indices[", str(b), "] = ", str(idx[b]), ": in linear mode it must be in [0, max_sequence_length - ",
                           "sequence_length] = [0, ", str(max_seq - seq), "]"));
    }
  }
  const element_type e = past.type();
  tensor& out = ctx.allocate_output(0, e, pd);
  if (past.element_count() == 0) return {};
  const bool strings = e == element_type::string;
  // Copy the cache, then overwrite the updated rows.
  if (strings) {
    std::copy_n(past.typed<std::string>(), past.element_count(), out.typed<std::string>());
  } else {
    const std::byte* src = past.data();
    std::byte* dst = out.mutable_data();
    parallel_elements(ctx, past.byte_size(), [&](std::size_t b0, std::size_t b1) { std::memcpy(dst + b0, src + b0, b1 - b0); });
  }
  if (upd.element_count() == 0) return {};
  const std::int64_t inner = product(pd, *ax + 1);
  const std::int64_t prefix = product(pd, 0, *ax), per_batch = prefix / batch;
  const std::int64_t nrows = prefix * seq;
  // Row (p, s) of update goes to row (p, pos) of the cache.
  const auto dst_row = [&](std::int64_t row) {
    const std::int64_t p = row / seq, s = row % seq;
    const std::int64_t start = idx != nullptr ? idx[p / per_batch] : 0;
    if (!circular) return p * max_seq + start + s;
    std::int64_t pos = (start % max_seq + max_seq) % max_seq + s;  // floor modulo, without overflow
    if (pos >= max_seq) pos -= max_seq;
    return p * max_seq + pos;
  };
  if (strings) {
    const std::string* src = upd.typed<std::string>();
    std::string* dst = out.typed<std::string>();
    for (std::int64_t row = 0; row < nrows; ++row) std::copy_n(src + row * inner, inner, dst + dst_row(row) * inner);
    return {};
  }
  const std::size_t bits = element_bits(e);
  const std::byte* src = upd.data();
  std::byte* dst = out.mutable_data();
  if ((static_cast<std::size_t>(inner) * bits) % 8 == 0) {
    // Every row starts on a byte: rows are byte ranges.
    const std::size_t row_bytes = static_cast<std::size_t>(inner) * bits / 8;
    parallel_items(ctx, static_cast<std::size_t>(nrows), row_bytes, [&](std::size_t r0, std::size_t r1) {
      for (std::size_t row = r0; row < r1; ++row)
        std::memcpy(dst + static_cast<std::size_t>(dst_row(static_cast<std::int64_t>(row))) * row_bytes, src + row * row_bytes, row_bytes);
    });
  } else {
    // Packed rows that share bytes: element by element, serially.
    for (std::int64_t row = 0; row < nrows; ++row) {
      const auto d0 = static_cast<std::size_t>(dst_row(row) * inner), s0 = static_cast<std::size_t>(row * inner);
      for (std::size_t j = 0; j < static_cast<std::size_t>(inner); ++j) packed_set(dst, d0 + j, bits, packed_get(src, s0 + j, bits));
    }
  }
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// CumProd

/// a * b, wrapping on overflow for signed integers; the 16-bit floats multiply in float and round to T.
template <class T>
T mul_wrap(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else if constexpr (is_half_v<T>) {
    return T(static_cast<float>(a) * static_cast<float>(b));
  } else {
    return a * b;
  }
}

template <class T>
Status cum_prod_compute(compute_context& ctx, bool exclusive, bool reverse) {
  const tensor& x = ctx.input(0);
  if (x.empty()) return invalid("the x input is missing");
  if (x.type() != element_type_of_v<T>)
    return invalid(cat("x has element type ", type_name(x.type()), ", expected ", type_name(element_type_of_v<T>)));
  EPSTACK_ASSIGN_OR_RETURN(const std::int64_t axis, scalar_int(ctx.input(1), "axis"));
  const auto ax = normalize_axis(axis, x.rank());
  if (!ax) return bad_axis(axis, x.rank());
  const auto dims = x.sizes();
  tensor& y = ctx.allocate_output(0, x.type(), dims);
  if (x.element_count() == 0) return {};
  scan_axis<T>(ctx, x.typed<T>(), y.typed<T>(), dims, *ax, exclusive, reverse, T(1),
               [](T a, T b) { return mul_wrap(a, b); });
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// BitCast

/// The output is a view of the input's bytes with the new element type (no copy; the executor tracks the shared
/// storage as it does Reshape's).
Status bit_cast_compute(compute_context& ctx, element_type from, element_type to) {
  const tensor& x = ctx.input(0);
  if (x.empty()) return invalid("the input is missing");
  if (x.type() != from) return invalid(cat("input has element type ", type_name(x.type()), ", expected ", type_name(from)));
  ctx.output(0) = tensor::borrow(to, x.sizes(), const_cast<std::byte*>(x.data()), x.owner());
  return {};
}

}  // namespace
}  // namespace impl

// ---------------------------------------------------------------------------------------------------------------
// The kernel types.

namespace ops {
using namespace impl;

#define EPSTACK_STATE_FLOAT_TYPES float, ::epstack::float16, ::epstack::bfloat16

bool linear_attention::supports(const graph& g, node_id n) {
  const auto t = in_type(g, n, 0);
  if (!type_in<EPSTACK_STATE_FLOAT_TYPES>(t)) return false;
  for (std::size_t i : {1u, 2u, 4u, 5u})
    if (has_in(g, n, i) && in_type(g, n, i) != t) return false;
  return !has_in(g, n, 3) || float_or_half(in_type(g, n, 3));
}
Result<compute_function> linear_attention::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (!has_attr(nd, "q_num_heads")) return invalid("LinearAttention needs the attribute q_num_heads");
  if (!has_attr(nd, "kv_num_heads")) return invalid("LinearAttention needs the attribute kv_num_heads");
  linear_attention_params pr;
  pr.q_heads = attr_i(nd, "q_num_heads", 0);
  pr.kv_heads = attr_i(nd, "kv_num_heads", 0);
  if (pr.q_heads <= 0 || pr.kv_heads <= 0)
    return invalid(cat("LinearAttention: q_num_heads (", str(pr.q_heads), ") and kv_num_heads (", str(pr.kv_heads),
                       ") must be positive"));
  if (pr.q_heads % pr.kv_heads != 0)
    return invalid(cat("LinearAttention: q_num_heads (", str(pr.q_heads), ") must be a multiple of kv_num_heads (",
                       str(pr.kv_heads), ")"));
  pr.scale = attr_f(nd, "scale", 0.0f);
  const std::string rule = attr_s(nd, "update_rule", "gated_delta");
  if (rule == "linear") pr.rule = update_rule::linear;
  else if (rule == "gated") pr.rule = update_rule::gated;
  else if (rule == "delta") pr.rule = update_rule::delta;
  else if (rule == "gated_delta") pr.rule = update_rule::gated_delta;
  else return invalid(cat("LinearAttention: update_rule '", rule, "' is not one of linear, gated, delta, gated_delta"));
  if (attr_i(nd, "chunk_size", 64) <= 0)
    return invalid(cat("LinearAttention: chunk_size must be positive, got ", str(attr_i(nd, "chunk_size", 64))));
  const auto t = in_type(g, n, 0);
  // present_state's type: past_state's, else the declared output type, else T.
  const auto declared = out_type(g, n, 1);
  pr.state_type = has_in(g, n, 3) ? in_type(g, n, 3) : float_or_half(declared) ? declared : t;
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_STATE_FLOAT_TYPES>(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("LinearAttention", [=](compute_context& ctx) { return linear_attention_compute<T>(ctx, pr); });
  });
  return r;
}

bool causal_conv_with_state::supports(const graph& g, node_id n) {
  const auto t = in_type(g, n, 0);
  if (!type_in<EPSTACK_STATE_FLOAT_TYPES>(t)) return false;
  for (std::size_t i : {1u, 2u, 3u})
    if (has_in(g, n, i) && in_type(g, n, i) != t) return false;
  return has_in(g, n, 1);
}
Result<compute_function> causal_conv_with_state::compile(const graph& g, node_id n) {
  const std::string act = attr_s(g.node(n), "activation", "none");
  if (act != "none" && act != "silu" && act != "swish")
    return invalid(cat("CausalConvWithState: activation '", act, "' is not one of silu, swish, none"));
  const bool silu = act != "none";
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_STATE_FLOAT_TYPES>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("CausalConvWithState", [=](compute_context& ctx) { return causal_conv_compute<T>(ctx, silu); });
  });
  return r;
}

bool tensor_scatter::supports(const graph& g, node_id n) {
  const auto t = in_type(g, n, 0);
  if (!is_valid(t) || in_type(g, n, 1) != t) return false;
  return !has_in(g, n, 2) || in_type(g, n, 2) == element_type::int64;
}
Result<compute_function> tensor_scatter::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const std::int64_t axis = attr_i(nd, "axis", -2);
  const std::string mode = attr_s(nd, "mode", "linear");
  if (mode != "linear" && mode != "circular")
    return invalid(cat("TensorScatter: mode '", mode, "' is not one of linear, circular"));
  const bool circular = mode == "circular";
  return make_fn("TensorScatter", [=](compute_context& ctx) { return tensor_scatter_compute(ctx, axis, circular); });
}

#define EPSTACK_CUMPROD_TYPES float, double, std::int32_t, std::int64_t, std::uint32_t, std::uint64_t, \
                              ::epstack::float16, ::epstack::bfloat16

bool cum_prod::supports(const graph& g, node_id n) {
  const auto a = in_type(g, n, 1);
  return type_in<EPSTACK_CUMPROD_TYPES>(in_type(g, n, 0)) && (a == element_type::int32 || a == element_type::int64);
}
Result<compute_function> cum_prod::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const bool exclusive = attr_i(nd, "exclusive", 0) != 0, reverse = attr_i(nd, "reverse", 0) != 0;
  Result<compute_function> r = Status(errc::not_implemented, "unsupported element type");
  dispatch<EPSTACK_CUMPROD_TYPES>(in_type(g, n, 0), [&](auto tag) {
    using T = typename decltype(tag)::type;
    r = make_fn("CumProd", [=](compute_context& ctx) { return cum_prod_compute<T>(ctx, exclusive, reverse); });
  });
  return r;
}

bool bit_cast::supports(const graph& g, node_id n) {
  const auto t = in_type(g, n, 0);
  return is_valid(t) && t != element_type::string;
}
Result<compute_function> bit_cast::compile(const graph& g, node_id n) {
  const auto& nd = g.node(n);
  if (!has_attr(nd, "to")) return invalid("BitCast needs the attribute to");
  const std::int64_t to_v = attr_i(nd, "to", 0);
  const auto from = in_type(g, n, 0);
  const auto to = static_cast<element_type>(to_v);
  if (to_v < 1 || to_v > max_element_type || to == element_type::string)
    return invalid(cat("BitCast: to (", str(to_v), ") is not a non-string ONNX element type"));
  if (element_bits(to) != element_bits(from))
    return invalid(cat("BitCast: to (", type_name(to), ", ", str(static_cast<std::int64_t>(element_bits(to))),
                       " bits) must have the bit width of the input (", type_name(from), ", ",
                       str(static_cast<std::int64_t>(element_bits(from))), " bits)"));
  return make_fn("BitCast", [=](compute_context& ctx) { return bit_cast_compute(ctx, from, to); });
}

}  // namespace ops
}  // namespace epstack::cpu
