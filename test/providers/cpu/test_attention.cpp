// Tests of the CPU Attention, RMSNormalization and RotaryEmbedding kernels (attention.cpp): hand-computed values,
// naive references (plain loops in double) on seeded random inputs over many shapes, types, threads and errors.
#include "misc_support.hpp"

#include <optional>

using namespace epstack;
using namespace epstack::test;
using namespace epstack::test::misc;

namespace {

const double inf = std::numeric_limits<double>::infinity();

i64 product(const ints& d) {
  i64 p = 1;
  for (i64 x : d) p *= x;
  return p;
}
std::string dims_text(const ints& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}
const double nan_v = std::numeric_limits<double>::quiet_NaN();

/// A tensor of T from double values.
template <class T>
tensor make_from(const ints& dims, const std::vector<double>& values) {
  tensor t(element_type_of_v<T>, std::span<const std::int64_t>(dims));
  REQUIRE(t.element_count() == values.size());
  T* p = t.typed<T>();
  for (std::size_t i = 0; i < values.size(); ++i) {
    if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) p[i] = T(static_cast<float>(values[i]));
    else p[i] = static_cast<T>(values[i]);
  }
  return t;
}
/// The values of a tensor of T as double.
template <class T>
std::vector<double> doubles(const tensor& t) {
  std::vector<double> r(t.element_count());
  const T* p = t.typed<T>();
  for (std::size_t i = 0; i < r.size(); ++i) r[i] = static_cast<double>(static_cast<float>(p[i]));
  if constexpr (std::is_same_v<T, double>)
    for (std::size_t i = 0; i < r.size(); ++i) r[i] = p[i];
  return r;
}
/// Values as T would hold them (rounded to float16 for float16 and so on).
template <class T>
std::vector<double> rounded(std::vector<double> v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
    for (auto& x : v) x = static_cast<double>(static_cast<float>(T(static_cast<float>(x))));
  else if constexpr (std::is_same_v<T, float>)
    for (auto& x : v) x = static_cast<double>(static_cast<float>(x));
  return v;
}
std::vector<double> randoms(lcg& g, std::size_t n, double scale = 1.0) {
  std::vector<double> v(n);
  for (auto& x : v) x = g.uniform() * scale;
  return v;
}
/// Checks `got` (of T) against `want` within atol + rtol * |want|; NaN must meet NaN.
template <class T>
void check_close(const tensor& got, const ints& dims, const std::vector<double>& want, double tol) {
  REQUIRE(got.type() == element_type_of_v<T>);
  CHECK(dims_of(got) == dims);
  REQUIRE(got.element_count() == want.size());
  const auto v = doubles<T>(got);
  const auto c = compare_values([&](std::size_t i) { return v[i]; }, [&](std::size_t i) { return want[i]; }, want.size(),
                                tol, tol, /*nan_equal=*/true);
  const std::size_t i = c.ok() ? 0 : c.first_bad;
  CHECK_MESSAGE(c.ok(), c.message(), ": element ", i, " got ", (want.empty() ? 0.0 : v[i]), ", want ",
                (want.empty() ? 0.0 : want[i]));
}

// ---------------------------------------------------------------------------------------------------------------
// Attention: a naive reference

struct attn_case {
  i64 B = 1, Hq = 1, Hk = 1, S = 1, Tn = 1, P = 0, D = 8, Dv = 8;
  bool three = false;    // 3-D Q, K, V (with q_num_heads, kv_num_heads)
  bool causal = false;
  bool past = false;     // past_key / past_value of length P, and present outputs
  int mask = 0;          // 0: none, 1: float, 2: bool
  ints mask_dims;        // the mask's shape (right-aligned against [B, Hq, S, total])
  double softcap = 0;
  std::optional<double> scale;
  int qk_mode = -1;      // -1: no qk_matmul_output
  bool nonpad = false;   // nonpad_kv_seqlen (opset 24)
  std::vector<i64> nonpad_values;
};

struct attn_data {
  std::vector<double> q, k, v, mask, pk, pv;
};

struct attn_result {
  std::vector<double> y, present_k, present_v, qk;
};

attn_result reference_attention(const attn_case& c, const attn_data& d) {
  const i64 T = c.P + c.Tn, reps = c.Hq / c.Hk;
  // The scale attribute is a float.
  const double scale = c.scale ? static_cast<double>(static_cast<float>(*c.scale)) : 1.0 / std::sqrt(static_cast<double>(c.D));
  const auto qat = [&](i64 b, i64 h, i64 s, i64 x) {
    return c.three ? d.q[static_cast<std::size_t>(((b * c.S + s) * c.Hq + h) * c.D + x)]
                   : d.q[static_cast<std::size_t>(((b * c.Hq + h) * c.S + s) * c.D + x)];
  };
  // New keys (or values) of head g at t, and the concatenation with the past.
  const auto new_at = [&](const std::vector<double>& src, i64 Dd, i64 b, i64 g, i64 t, i64 x) {
    return c.three ? src[static_cast<std::size_t>(((b * c.Tn + t) * c.Hk + g) * Dd + x)]
                   : src[static_cast<std::size_t>(((b * c.Hk + g) * c.Tn + t) * Dd + x)];
  };
  attn_result r;
  r.present_k.resize(static_cast<std::size_t>(c.B * c.Hk * T * c.D));
  r.present_v.resize(static_cast<std::size_t>(c.B * c.Hk * T * c.Dv));
  for (i64 b = 0; b < c.B; ++b)
    for (i64 g = 0; g < c.Hk; ++g)
      for (i64 t = 0; t < T; ++t) {
        for (i64 x = 0; x < c.D; ++x)
          r.present_k[static_cast<std::size_t>(((b * c.Hk + g) * T + t) * c.D + x)] =
              t < c.P ? d.pk[static_cast<std::size_t>(((b * c.Hk + g) * c.P + t) * c.D + x)] : new_at(d.k, c.D, b, g, t - c.P, x);
        for (i64 x = 0; x < c.Dv; ++x)
          r.present_v[static_cast<std::size_t>(((b * c.Hk + g) * T + t) * c.Dv + x)] =
              t < c.P ? d.pv[static_cast<std::size_t>(((b * c.Hk + g) * c.P + t) * c.Dv + x)] : new_at(d.v, c.Dv, b, g, t - c.P, x);
      }
  i64 md[4] = {1, 1, 1, 1};
  for (std::size_t i = 0; i < c.mask_dims.size(); ++i) md[4 - c.mask_dims.size() + i] = c.mask_dims[i];
  r.y.assign(static_cast<std::size_t>(c.B * c.Hq * c.S * c.Dv), 0.0);
  r.qk.assign(static_cast<std::size_t>(c.B * c.Hq * c.S * T), 0.0);
  std::vector<double> raw(static_cast<std::size_t>(T)), capped(raw), biased(raw), p(raw);
  for (i64 b = 0; b < c.B; ++b)
    for (i64 h = 0; h < c.Hq; ++h)
      for (i64 s = 0; s < c.S; ++s) {
        const i64 g = h / reps;
        for (i64 j = 0; j < T; ++j) {
          double acc = 0;
          for (i64 x = 0; x < c.D; ++x) acc += qat(b, h, s, x) * r.present_k[static_cast<std::size_t>(((b * c.Hk + g) * T + j) * c.D + x)];
          const auto ju = static_cast<std::size_t>(j);
          raw[ju] = acc * scale;
          capped[ju] = c.softcap > 0 ? c.softcap * std::tanh(raw[ju] / c.softcap) : raw[ju];
          double bias = 0;
          if (c.mask != 0) {
            if (j >= md[3]) {
              bias = -inf;  // a short mask is padded with -inf
            } else {
              const auto mi = static_cast<std::size_t>(
                  (((md[0] == 1 ? 0 : b) * md[1] + (md[1] == 1 ? 0 : h)) * md[2] + (md[2] == 1 ? 0 : s)) * md[3] + j);
              bias = c.mask == 2 ? (d.mask[mi] != 0 ? 0.0 : -inf) : d.mask[mi];
            }
          }
          if (c.causal) {
            // Bottom-right aligned: the past, or (nonpad without past) nonpad - S, precedes the queries.
            const i64 off = c.past || !c.nonpad ? c.P : c.nonpad_values[static_cast<std::size_t>(b)] - c.S;
            if (j > s + off) bias = -inf;
          }
          if (c.nonpad && j >= c.nonpad_values[static_cast<std::size_t>(b)]) bias = -inf;
          biased[ju] = capped[ju] + bias;
        }
        double m = -inf;
        for (double x : biased) m = std::max(m, x);
        double sum = 0;
        for (std::size_t j = 0; j < p.size(); ++j) sum += (p[j] = m == -inf ? nan_v : std::exp(biased[j] - m));
        for (auto& x : p) x /= sum;
        for (i64 x = 0; x < c.Dv; ++x) {
          double acc = 0;
          for (i64 j = 0; j < T; ++j)
            acc += p[static_cast<std::size_t>(j)] * r.present_v[static_cast<std::size_t>(((b * c.Hk + g) * T + j) * c.Dv + x)];
          const auto yi = c.three ? ((b * c.S + s) * c.Hq + h) * c.Dv + x : ((b * c.Hq + h) * c.S + s) * c.Dv + x;
          r.y[static_cast<std::size_t>(yi)] = acc;
        }
        const std::vector<double>* qk = c.qk_mode == 1 ? &capped : c.qk_mode == 2 ? &biased : c.qk_mode == 3 ? &p : &raw;
        std::copy(qk->begin(), qk->end(), r.qk.begin() + ((b * c.Hq + h) * c.S + s) * T);
      }
  return r;
}

attn_data random_data(const attn_case& c, std::uint64_t seed) {
  lcg g(seed);
  attn_data d;
  d.q = randoms(g, static_cast<std::size_t>(c.B * c.Hq * c.S * c.D), 2.0);
  d.k = randoms(g, static_cast<std::size_t>(c.B * c.Hk * c.Tn * c.D), 2.0);
  d.v = randoms(g, static_cast<std::size_t>(c.B * c.Hk * c.Tn * c.Dv));
  if (c.past) {
    d.pk = randoms(g, static_cast<std::size_t>(c.B * c.Hk * c.P * c.D), 2.0);
    d.pv = randoms(g, static_cast<std::size_t>(c.B * c.Hk * c.P * c.Dv));
  }
  if (c.mask != 0) {
    d.mask.resize(static_cast<std::size_t>(product(c.mask_dims)));
    for (auto& x : d.mask) {
      const double u = g.uniform();
      if (c.mask == 2) x = u > -0.6 ? 1.0 : 0.0;
      else x = u > 0.85 ? -inf : u;
    }
  }
  return d;
}

kernel_node attention_node(const attn_case& c) {
  kernel_node kn("Attention", c.nonpad ? 24 : 23);
  if (c.three) kn.set("q_num_heads", c.Hq).set("kv_num_heads", c.Hk);
  if (c.causal) kn.set("is_causal", i64{1});
  if (c.softcap > 0) kn.set("softcap", static_cast<float>(c.softcap));
  if (c.scale) kn.set("scale", static_cast<float>(*c.scale));
  if (c.qk_mode >= 0) kn.set("qk_matmul_output_mode", i64{c.qk_mode});
  kn.outputs = c.qk_mode >= 0 ? 4 : c.past ? 3 : 1;
  return kn;
}

template <class T>
std::vector<kernel_input> attention_inputs(const attn_case& c, const attn_data& d) {
  std::vector<kernel_input> in;
  const ints qd = c.three ? ints{c.B, c.S, c.Hq * c.D} : ints{c.B, c.Hq, c.S, c.D};
  const ints kd = c.three ? ints{c.B, c.Tn, c.Hk * c.D} : ints{c.B, c.Hk, c.Tn, c.D};
  const ints vd = c.three ? ints{c.B, c.Tn, c.Hk * c.Dv} : ints{c.B, c.Hk, c.Tn, c.Dv};
  in.push_back({make_from<T>(qd, d.q)});
  in.push_back({make_from<T>(kd, d.k)});
  in.push_back({make_from<T>(vd, d.v)});
  if (c.mask == 2) {
    std::vector<bool> m;
    for (double x : d.mask) m.push_back(x != 0);
    in.push_back({make<bool>(c.mask_dims, m)});
  } else if (c.mask == 1) {
    in.push_back({make_from<T>(c.mask_dims, d.mask)});
  } else if (c.past || c.nonpad) {
    in.push_back({});
  }
  if (c.past) {
    in.push_back({make_from<T>({c.B, c.Hk, c.P, c.D}, d.pk)});
    in.push_back({make_from<T>({c.B, c.Hk, c.P, c.Dv}, d.pv)});
  } else if (c.nonpad) {
    in.push_back({});
    in.push_back({});
  }
  if (c.nonpad) in.push_back({make<i64>({c.B}, c.nonpad_values)});
  return in;
}

/// Runs the kernel on `c` with random inputs of T and checks every output against the reference.
template <class T>
void check_attention(const attn_case& c, std::uint64_t seed, double tol, thread_pool* pool = nullptr) {
  attn_data d = random_data(c, seed);
  // The reference sees the inputs as T holds them.
  d.q = rounded<T>(d.q), d.k = rounded<T>(d.k), d.v = rounded<T>(d.v), d.pk = rounded<T>(d.pk), d.pv = rounded<T>(d.pv);
  if (c.mask == 1) d.mask = rounded<T>(d.mask);
  const attn_result want = reference_attention(c, d);
  auto r = run_kernel<ops::attention>(attention_node(c), attention_inputs<T>(c, d), pool);
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  const auto& out = *r;
  const i64 T_ = c.P + c.Tn;
  const ints yd = c.three ? ints{c.B, c.S, c.Hq * c.Dv} : ints{c.B, c.Hq, c.S, c.Dv};
  check_close<T>(out[0].as_tensor(), yd, want.y, tol);
  if (out.size() > 2) {
    check_close<T>(out[1].as_tensor(), {c.B, c.Hk, T_, c.D}, want.present_k, 0.0);
    check_close<T>(out[2].as_tensor(), {c.B, c.Hk, T_, c.Dv}, want.present_v, 0.0);
  }
  if (c.qk_mode >= 0) {
    REQUIRE(out.size() == 4);
    check_close<T>(out[3].as_tensor(), {c.B, c.Hq, c.S, T_}, want.qk, tol);
  }
}

/// The cases the randomised tests run: many shapes, for every option.
std::vector<attn_case> attention_cases() {
  std::vector<attn_case> cs;
  const auto add = [&](attn_case c) { cs.push_back(c); };
  attn_case c;
  // Plain multi-head, 4-D and 3-D, square and cross.
  c = {};
  c.B = 2, c.Hq = c.Hk = 3, c.S = 4, c.Tn = 6;
  add(c);
  c.three = true;
  add(c);
  c = {};
  c.B = 1, c.Hq = c.Hk = 2, c.S = 37, c.Tn = 53, c.D = 16, c.Dv = 24;
  add(c);
  // Grouped-query and multi-query, 4-D and 3-D, with a head size other than V's.
  c = {};
  c.B = 2, c.Hq = 8, c.Hk = 2, c.S = 5, c.Tn = 7, c.D = 12, c.Dv = 20;
  add(c);
  c.three = true;
  add(c);
  c = {};
  c.B = 1, c.Hq = 6, c.Hk = 1, c.S = 30, c.Tn = 30, c.D = 32, c.Dv = 32, c.causal = true;
  add(c);
  // Causal self-attention, with and without a past cache (bottom-right alignment), GQA.
  c = {};
  c.B = 2, c.Hq = 4, c.Hk = 2, c.S = 9, c.Tn = 9, c.causal = true;
  add(c);
  c.past = true, c.P = 5;
  add(c);
  c.three = true;
  add(c);
  c = {};  // cross, causal, more keys than queries
  c.Hq = 2, c.Hk = 2, c.S = 4, c.Tn = 10, c.causal = true;
  add(c);
  // Decoding: one query row against a long past (the direct path), MHA and GQA.
  c = {};
  c.B = 2, c.Hq = 4, c.Hk = 4, c.S = 1, c.Tn = 1, c.P = 300, c.past = true, c.causal = true, c.D = 64, c.Dv = 64;
  add(c);
  c.Hq = 8, c.Hk = 2;  // 4 rows per group
  add(c);
  c.Hq = 16, c.Hk = 2, c.three = true;  // 8 rows per group: the packed path
  add(c);
  // Masks: float and bool, every broadcast, shorter than the total length (padded with -inf).
  for (int kind : {1, 2})
    for (const ints& md : {ints{4, 6}, ints{2, 1, 4, 6}, ints{2, 3, 4, 6}, ints{1, 3, 1, 6}, ints{6}, ints{2, 3, 4, 4}}) {
      c = {};
      c.B = 2, c.Hq = 3, c.Hk = 3, c.S = 4, c.Tn = 6, c.mask = kind, c.mask_dims = md;
      add(c);
    }
  // Mask with a past cache and causal, GQA, 3-D.
  c = {};
  c.B = 2, c.Hq = 6, c.Hk = 3, c.S = 4, c.Tn = 6, c.P = 12, c.past = true, c.mask = 1, c.mask_dims = {4, 18};
  add(c);
  c.causal = true, c.mask_dims = {2, 1, 4, 18};
  add(c);
  c.three = true, c.mask = 2;
  add(c);
  // Softcap and scale.
  c = {};
  c.B = 2, c.Hq = 4, c.Hk = 2, c.S = 6, c.Tn = 8, c.softcap = 2.0;
  add(c);
  c.scale = 0.3, c.mask = 1, c.mask_dims = {6, 8}, c.causal = true;
  add(c);
  c = {};
  c.Hq = 2, c.Hk = 2, c.S = 3, c.Tn = 5, c.scale = 0.01;
  add(c);
  // qk_matmul_output in every mode, with softcap, mask and past.
  for (int mode = 0; mode < 4; ++mode) {
    c = {};
    c.B = 2, c.Hq = 3, c.Hk = 3, c.S = 4, c.Tn = 6, c.P = 3, c.past = true, c.mask = 1, c.mask_dims = {4, 9};
    c.softcap = 1.5, c.qk_mode = mode, c.causal = mode % 2 == 1;
    add(c);
  }
  // qk_matmul_output and present outputs without a past (present = K and V, 3-D inputs transposed).
  c = {};
  c.B = 2, c.Hq = 4, c.Hk = 2, c.S = 5, c.Tn = 7, c.Dv = 6, c.qk_mode = 0, c.three = true;
  add(c);
  // nonpad_kv_seqlen (opset 24), with a short mask, and with causal (offset nonpad - S).
  c = {};
  c.B = 2, c.Hq = 3, c.Hk = 3, c.S = 4, c.Tn = 6, c.Dv = 10, c.nonpad = true, c.nonpad_values = {3, 6};
  c.mask = 1, c.mask_dims = {2, 3, 4, 4};
  add(c);
  c = {};
  c.B = 2, c.Hq = 4, c.Hk = 2, c.S = 3, c.Tn = 8, c.nonpad = true, c.nonpad_values = {5, 8}, c.causal = true;
  add(c);
  // Larger blocks: several row blocks per group and several key chunks (packed K in chunks of 512).
  c = {};
  c.B = 1, c.Hq = 4, c.Hk = 2, c.S = 70, c.Tn = 70, c.P = 600, c.past = true, c.causal = true, c.D = 40, c.Dv = 24;
  add(c);
  c = {};
  c.B = 1, c.Hq = 2, c.Hk = 1, c.S = 100, c.Tn = 130, c.D = 300, c.Dv = 33;  // head size past one K block (256)
  add(c);
  return cs;
}

std::string describe(const attn_case& c) {
  std::string s = "B=" + std::to_string(c.B) + " Hq=" + std::to_string(c.Hq) + " Hk=" + std::to_string(c.Hk) +
                  " S=" + std::to_string(c.S) + " Tn=" + std::to_string(c.Tn) + " P=" + std::to_string(c.P) +
                  " D=" + std::to_string(c.D) + " Dv=" + std::to_string(c.Dv);
  if (c.three) s += " 3-D";
  if (c.causal) s += " causal";
  if (c.mask) s += c.mask == 1 ? " float-mask" : " bool-mask";
  for (i64 m : c.mask_dims) s += " " + std::to_string(m);
  if (c.softcap > 0) s += " softcap";
  if (c.qk_mode >= 0) s += " qk" + std::to_string(c.qk_mode);
  if (c.nonpad) s += " nonpad";
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Attention: hand-computed cases

TEST_CASE("Attention: one query, two keys (hand-computed softmax weights 1/4 and 3/4)") {
  // scores = [0, ln 3] (scale 1): weights 1/4, 3/4; Y = 4/4 + 8 * 3/4 = 7.
  const tensor q = make<float>({1, 1, 1, 1}, {1.0f});
  const tensor k = make<float>({1, 1, 2, 1}, {0.0f, std::log(3.0f)});
  const tensor v = make<float>({1, 1, 2, 1}, {4.0f, 8.0f});
  const tensor y = run1<ops::attention>(kernel_node("Attention", 23).set("scale", 1.0f), {{q}, {k}, {v}});
  check_tensor<float>(y, {1, 1, 1, 1}, {7.0f}, 1e-5, 1e-5);
}

TEST_CASE("Attention: is_causal with a past cache aligns bottom-right (the reference's behaviour)") {
  // Zero queries: uniform weights over the keys each row may see. Past 1, 2 new: row 0 sees keys 0-1, row 1 all 3.
  const tensor q = make<float>({1, 1, 2, 1}, {0.0f, 0.0f});
  const tensor k = make<float>({1, 1, 2, 1}, {0.0f, 0.0f});
  const tensor v = make<float>({1, 1, 2, 1}, {5.0f, 10.0f});
  const tensor pk = make<float>({1, 1, 1, 1}, {0.0f});
  const tensor pv = make<float>({1, 1, 1, 1}, {3.0f});
  kernel_node kn("Attention", 23);
  kn.set("is_causal", i64{1});
  kn.outputs = 3;
  auto r = run_kernel<ops::attention>(kn, {{q}, {k}, {v}, {}, {pk}, {pv}});
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  check_tensor<float>((*r)[0].as_tensor(), {1, 1, 2, 1}, {4.0f, 6.0f}, 1e-5, 1e-5);
  check_tensor<float>((*r)[1].as_tensor(), {1, 1, 3, 1}, {0.0f, 0.0f, 0.0f});
  check_tensor<float>((*r)[2].as_tensor(), {1, 1, 3, 1}, {3.0f, 5.0f, 10.0f});
}

TEST_CASE("Attention: a bool mask selects keys - a fully masked row gives NaN (as the reference's softmax)") {
  const tensor q = make<float>({1, 1, 2, 1}, {0.0f, 0.0f});
  const tensor k = make<float>({1, 1, 3, 1}, {0.0f, 0.0f, 0.0f});
  const tensor v = make<float>({1, 1, 3, 1}, {1.0f, 2.0f, 6.0f});
  const tensor mask = make<bool>({2, 3}, {true, false, true, false, false, false});
  const tensor y = run1<ops::attention>(kernel_node("Attention", 23), {{q}, {k}, {v}, {mask}});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  check_tensor<float>(y, {1, 1, 2, 1}, {3.5f, nan}, 1e-5, 1e-5);
}

TEST_CASE("Attention: a float mask is added to the scores - grouped-query heads share their kv head") {
  // Two q heads on one kv head; the mask adds ln 3 to key 1: weights 1/4, 3/4 for both heads.
  const tensor q = make<float>({1, 2, 1, 2}, {0.0f, 0.0f, 0.0f, 0.0f});
  const tensor k = make<float>({1, 1, 2, 2}, {1.0f, 2.0f, 3.0f, 4.0f});
  const tensor v = make<float>({1, 1, 2, 2}, {0.0f, 4.0f, 8.0f, 0.0f});
  const tensor mask = make<float>({1, 2}, {0.0f, std::log(3.0f)});
  const tensor y = run1<ops::attention>(kernel_node("Attention", 23), {{q}, {k}, {v}, {mask}});
  check_tensor<float>(y, {1, 2, 1, 2}, {6.0f, 1.0f, 6.0f, 1.0f}, 1e-5, 1e-5);
}

// ---------------------------------------------------------------------------------------------------------------
// Attention: against the reference

TEST_CASE("Attention float matches the reference over shapes, GQA, causal, past, masks, softcap, qk outputs") {
  std::uint64_t seed = 1;
  for (const auto& c : attention_cases()) {
    CAPTURE(describe(c));
    check_attention<float>(c, seed++, 2e-5);
  }
}

TEST_CASE("Attention double matches the reference tightly") {
  std::uint64_t seed = 100;
  for (const auto& c : attention_cases()) {
    CAPTURE(describe(c));
    check_attention<double>(c, seed++, 1e-11);
  }
}

TEST_CASE("Attention float16 and bfloat16 compute in float (reference on the rounded inputs)") {
  std::uint64_t seed = 200;
  for (const auto& c : attention_cases()) {
    CAPTURE(describe(c));
    check_attention<float16>(c, seed, 4e-3);
    check_attention<bfloat16>(c, seed++, 3e-2);
  }
}

TEST_CASE("Attention on a pool of 2 threads gives the reference's values") {
  thread_pool pool(2);
  std::uint64_t seed = 300;
  for (const auto& c : attention_cases()) {
    CAPTURE(describe(c));
    check_attention<float>(c, seed++, 2e-5, &pool);
  }
  attn_case big;  // many blocks taken from the shared counter
  big.B = 2, big.Hq = 8, big.Hk = 2, big.S = 64, big.Tn = 64, big.D = 32, big.Dv = 32, big.causal = true;
  check_attention<float>(big, 7, 2e-5, &pool);
  check_attention<double>(big, 8, 1e-11, &pool);
}

// ---------------------------------------------------------------------------------------------------------------
// Attention: errors

TEST_CASE("Attention errors name the attribute or input at fault") {
  lcg g(5);
  const tensor q3 = make_from<float>({1, 2, 12}, randoms(g, 24));
  const tensor k3 = make_from<float>({1, 3, 8}, randoms(g, 24));
  const tensor v3 = make_from<float>({1, 3, 8}, randoms(g, 24));
  check_fails<ops::attention>(kernel_node("Attention", 23).set("kv_num_heads", i64{2}), {{q3}, {k3}, {v3}}, "q_num_heads");
  check_fails<ops::attention>(kernel_node("Attention", 23).set("q_num_heads", i64{5}).set("kv_num_heads", i64{1}),
                              {{q3}, {k3}, {v3}}, "q_num_heads (5)");
  check_fails<ops::attention>(kernel_node("Attention", 23).set("q_num_heads", i64{4}).set("kv_num_heads", i64{3}),
                              {{q3}, {k3}, {v3}}, "kv_num_heads");
  check_fails<ops::attention>(kernel_node("Attention", 23).set("q_num_heads", i64{0}).set("kv_num_heads", i64{1}),
                              {{q3}, {k3}, {v3}}, "q_num_heads must be positive");
  check_fails<ops::attention>(kernel_node("Attention", 23).set("q_num_heads", i64{2}).set("kv_num_heads", i64{3}),
                              {{q3}, {k3}, {v3}}, "kv_num_heads");
  const tensor q4 = make_from<float>({1, 3, 2, 4}, randoms(g, 24));
  const tensor k4 = make_from<float>({1, 2, 3, 4}, randoms(g, 24));
  const tensor v4 = make_from<float>({1, 2, 3, 4}, randoms(g, 24));
  check_fails<ops::attention>(kernel_node("Attention", 23), {{q4}, {k4}, {v4}}, "must be a multiple of kv_num_heads");
  check_fails<ops::attention>(kernel_node("Attention", 23).set("q_num_heads", i64{2}), {{q4}, {k4}, {v4}},
                              "q_num_heads (2) does not match");
  const tensor k4b = make_from<float>({1, 3, 3, 5}, randoms(g, 45));
  const tensor v4b = make_from<float>({1, 3, 3, 4}, randoms(g, 36));
  check_fails<ops::attention>(kernel_node("Attention", 23), {{q4}, {k4b}, {v4b}}, "head size of K");
  const tensor k4c = make_from<float>({1, 3, 3, 4}, randoms(g, 36));
  check_fails<ops::attention>(kernel_node("Attention", 23).set("qk_matmul_output_mode", i64{4}), {{q4}, {k4c}, {v4b}},
                              "qk_matmul_output_mode");
  const tensor pk = make_from<float>({1, 3, 2, 4}, randoms(g, 24));
  check_fails<ops::attention>(kernel_node("Attention", 23), {{q4}, {k4c}, {v4b}, {}, {pk}}, "past_key and past_value");
  const tensor bad_mask = make_from<float>({3, 3}, randoms(g, 9));
  check_fails<ops::attention>(kernel_node("Attention", 23), {{q4}, {k4c}, {v4b}, {bad_mask}}, "attn_mask");
  const tensor long_mask = make_from<float>({2, 4}, randoms(g, 8));
  check_fails<ops::attention>(kernel_node("Attention", 23), {{q4}, {k4c}, {v4b}, {long_mask}}, "attn_mask");
  check_fails<ops::attention>(kernel_node("Attention", 23), {{q4}, {k3}, {v4b}}, "3-D or all 4-D");
}

// ---------------------------------------------------------------------------------------------------------------
// RMSNormalization

namespace {

/// Y = X / sqrt(mean(X^2 over [axis, rank)) + eps) * scale, scale broadcast to X (right-aligned).
std::vector<double> reference_rms(const ints& xd, const std::vector<double>& x, const ints& sd,
                                  const std::vector<double>& sc, i64 axis, double eps) {
  const auto r = static_cast<i64>(xd.size());
  if (axis < 0) axis += r;
  i64 n = 1, rows = 1;
  for (i64 d = 0; d < r; ++d) (d < axis ? rows : n) *= xd[static_cast<std::size_t>(d)];
  ints sfull(xd.size(), 1);
  for (std::size_t i = 0; i < sd.size(); ++i) sfull[xd.size() - sd.size() + i] = sd[i];
  std::vector<double> y(x.size());
  for (i64 row = 0; row < rows; ++row) {
    double ss = 0;
    for (i64 j = 0; j < n; ++j) ss += x[static_cast<std::size_t>(row * n + j)] * x[static_cast<std::size_t>(row * n + j)];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
    for (i64 j = 0; j < n; ++j) {
      // The scale element of flat index row * n + j.
      i64 flat = row * n + j, off = 0, stride = 1;
      for (i64 d = r - 1; d >= 0; --d) {
        const i64 i = flat % xd[static_cast<std::size_t>(d)];
        flat /= xd[static_cast<std::size_t>(d)];
        if (sfull[static_cast<std::size_t>(d)] != 1) off += i * stride;
        stride *= sfull[static_cast<std::size_t>(d)];
      }
      y[static_cast<std::size_t>(row * n + j)] = x[static_cast<std::size_t>(row * n + j)] * inv * sc[static_cast<std::size_t>(off)];
    }
  }
  return y;
}

template <class T>
void check_rms(const ints& xd, const ints& sd, i64 axis, float eps, std::uint64_t seed, double tol,
               thread_pool* pool = nullptr) {
  CAPTURE(dims_text(xd));
  CAPTURE(dims_text(sd));
  CAPTURE(axis);
  lcg g(seed);
  const auto x = rounded<T>(randoms(g, static_cast<std::size_t>(product(xd)), 3.0));
  const auto sc = rounded<T>(randoms(g, static_cast<std::size_t>(product(sd)), 2.0));
  kernel_node kn("RMSNormalization", 23);
  kn.set("axis", axis).set("epsilon", eps);
  const tensor y = run1<ops::rms_normalization>(kn, {{make_from<T>(xd, x)}, {make_from<T>(sd, sc)}}, pool);
  check_close<T>(y, xd, reference_rms(xd, x, sd, sc, axis, static_cast<double>(eps)), tol);
}

}  // namespace

TEST_CASE("RMSNormalization: hand-computed row") {
  // x = [3, 4]: mean square 12.5, eps 0 -> rms sqrt(12.5); scale [1, 2].
  kernel_node kn("RMSNormalization", 23);
  kn.set("epsilon", 0.0f);
  const tensor y = run1<ops::rms_normalization>(kn, {{make<float>({1, 2}, {3.0f, 4.0f})}, {make<float>({2}, {1.0f, 2.0f})}});
  const float r = std::sqrt(12.5f);
  check_tensor<float>(y, {1, 2}, {3.0f / r, 8.0f / r}, 1e-6, 1e-6);
}

TEST_CASE("RMSNormalization matches the reference for every axis, scale broadcasts, types and threads") {
  std::uint64_t seed = 1;
  const ints xd = {2, 3, 4, 5};
  for (i64 axis = -4; axis < 4; ++axis) {
    const auto a = axis < 0 ? axis + 4 : axis;
    const ints norm(xd.begin() + a, xd.end());
    check_rms<float>(xd, norm, axis, 1e-5f, seed++, 1e-5);
    check_rms<double>(xd, norm, axis, 0.1f, seed++, 1e-12);
    check_rms<float16>(xd, norm, axis, 1e-5f, seed++, 4e-3);
    check_rms<bfloat16>(xd, norm, axis, 1e-5f, seed++, 3e-2);
  }
  // Scale broadcast within and beyond the normalised dims.
  check_rms<float>(xd, {5}, 2, 1e-5f, seed++, 1e-5);
  check_rms<float>(xd, {4, 1}, 2, 1e-5f, seed++, 1e-5);
  check_rms<float>(xd, {1}, -1, 1e-5f, seed++, 1e-5);
  check_rms<float>(xd, {3, 1, 5}, -1, 1e-5f, seed++, 1e-5);
  check_rms<float>(xd, {2, 1, 1, 5}, 2, 1e-5f, seed++, 1e-5);
  // Many rows on a pool.
  thread_pool pool(2);
  check_rms<float>({300, 257}, {257}, -1, 1e-6f, seed++, 1e-5, &pool);
  check_rms<float16>({64, 4, 96}, {4, 96}, 1, 1e-6f, seed++, 4e-3, &pool);
}

TEST_CASE("RMSNormalization errors: bad axis, scale that does not broadcast") {
  const tensor x = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  check_fails<ops::rms_normalization>(kernel_node("RMSNormalization", 23).set("axis", i64{2}),
                                      {{x}, {make<float>({3}, {1, 1, 1})}}, "axis 2 is out of range");
  check_fails<ops::rms_normalization>(kernel_node("RMSNormalization", 23), {{x}, {make<float>({2}, {1, 1})}}, "scale");
}

// ---------------------------------------------------------------------------------------------------------------
// RotaryEmbedding

namespace {

struct rope_case {
  i64 B = 2, H = 4, S = 3, D = 8;
  bool three = false, interleaved = false, positions = true;
  i64 rotary_dim = 0;
  i64 max_pos = 50;
};

template <class T>
void check_rope(const rope_case& c, std::uint64_t seed, double tol, thread_pool* pool = nullptr) {
  CAPTURE(c.three);
  CAPTURE(c.interleaved);
  CAPTURE(c.positions);
  CAPTURE(c.rotary_dim);
  lcg g(seed);
  const i64 rd = c.rotary_dim == 0 ? c.D : c.rotary_dim, half = rd / 2;
  const auto x = rounded<T>(randoms(g, static_cast<std::size_t>(c.B * c.H * c.S * c.D)));
  const i64 cache_rows = c.positions ? c.max_pos : c.B * c.S;
  const auto cs = rounded<T>(randoms(g, static_cast<std::size_t>(cache_rows * half)));
  const auto sn = rounded<T>(randoms(g, static_cast<std::size_t>(cache_rows * half)));
  std::vector<i64> pos(static_cast<std::size_t>(c.B * c.S));
  for (auto& p : pos) p = static_cast<i64>(g.next() % static_cast<std::uint32_t>(c.max_pos));
  std::vector<double> want(x.size());
  for (i64 b = 0; b < c.B; ++b)
    for (i64 h = 0; h < c.H; ++h)
      for (i64 s = 0; s < c.S; ++s) {
        const i64 base = c.three ? ((b * c.S + s) * c.H + h) * c.D : ((b * c.H + h) * c.S + s) * c.D;
        const i64 crow = c.positions ? pos[static_cast<std::size_t>(b * c.S + s)] : b * c.S + s;
        const auto at = [&](i64 i) { return x[static_cast<std::size_t>(base + i)]; };
        for (i64 i = 0; i < half; ++i) {
          const double co = cs[static_cast<std::size_t>(crow * half + i)], si = sn[static_cast<std::size_t>(crow * half + i)];
          const i64 i1 = c.interleaved ? 2 * i : i, i2 = c.interleaved ? 2 * i + 1 : i + half;
          want[static_cast<std::size_t>(base + i1)] = co * at(i1) - si * at(i2);
          want[static_cast<std::size_t>(base + i2)] = si * at(i1) + co * at(i2);
        }
        for (i64 i = rd; i < c.D; ++i) want[static_cast<std::size_t>(base + i)] = at(i);
      }
  kernel_node kn("RotaryEmbedding", 23);
  if (c.interleaved) kn.set("interleaved", i64{1});
  if (c.rotary_dim != 0) kn.set("rotary_embedding_dim", c.rotary_dim);
  if (c.three) kn.set("num_heads", c.H);
  const ints xd = c.three ? ints{c.B, c.S, c.H * c.D} : ints{c.B, c.H, c.S, c.D};
  const ints cd = c.positions ? ints{c.max_pos, half} : ints{c.B, c.S, half};
  std::vector<kernel_input> in{{make_from<T>(xd, x)}, {make_from<T>(cd, cs)}, {make_from<T>(cd, sn)}};
  if (c.positions) in.push_back({make<i64>({c.B, c.S}, pos)});
  const tensor y = run1<ops::rotary_embedding>(kn, in, pool);
  check_close<T>(y, xd, want, tol);
}

}  // namespace

TEST_CASE("RotaryEmbedding: hand-computed rotation by 90 degrees") {
  // cos 0, sin 1: (x1, x2) -> (-x2, x1).
  const tensor x = make<float>({1, 1, 1, 4}, {1.0f, 2.0f, 3.0f, 4.0f});
  const tensor c = make<float>({1, 1, 2}, {0.0f, 0.0f});
  const tensor s = make<float>({1, 1, 2}, {1.0f, 1.0f});
  const tensor y = run1<ops::rotary_embedding>(kernel_node("RotaryEmbedding", 23), {{x}, {c}, {s}});
  check_tensor<float>(y, {1, 1, 1, 4}, {-3.0f, -4.0f, 1.0f, 2.0f});
  const tensor yi = run1<ops::rotary_embedding>(kernel_node("RotaryEmbedding", 23).set("interleaved", i64{1}), {{x}, {c}, {s}});
  check_tensor<float>(yi, {1, 1, 1, 4}, {-2.0f, 1.0f, -4.0f, 3.0f});
}

TEST_CASE("RotaryEmbedding matches the reference: 3-D and 4-D, interleaved, partial, with and without position ids") {
  std::uint64_t seed = 1;
  for (bool three : {false, true})
    for (bool inter : {false, true})
      for (bool positions : {false, true})
        for (i64 rd : {i64{0}, i64{4}}) {
          rope_case c;
          c.three = three, c.interleaved = inter, c.positions = positions, c.rotary_dim = rd;
          check_rope<float>(c, seed++, 1e-6);
          check_rope<double>(c, seed++, 1e-12);
          check_rope<float16>(c, seed++, 2e-3);
          check_rope<bfloat16>(c, seed++, 2e-2);
        }
  thread_pool pool(2);
  rope_case big;
  big.B = 2, big.H = 8, big.S = 200, big.D = 64, big.max_pos = 256;
  check_rope<float>(big, 99, 1e-6, &pool);
}

TEST_CASE("RotaryEmbedding errors: num_heads, rotary_embedding_dim, cache shape, position range") {
  const tensor x3 = make<float>({1, 1, 8}, {1, 2, 3, 4, 5, 6, 7, 8});
  const tensor c = make<float>({4, 2}, {1, 1, 1, 1, 1, 1, 1, 1});
  const tensor pos = make<i64>({1, 1}, {2});
  check_fails<ops::rotary_embedding>(kernel_node("RotaryEmbedding", 23), {{x3}, {c}, {c}, {pos}}, "num_heads");
  check_fails<ops::rotary_embedding>(kernel_node("RotaryEmbedding", 23).set("num_heads", i64{3}), {{x3}, {c}, {c}, {pos}},
                                     "num_heads");
  check_fails<ops::rotary_embedding>(kernel_node("RotaryEmbedding", 23).set("num_heads", i64{2}).set("rotary_embedding_dim", i64{3}),
                                     {{x3}, {c}, {c}, {pos}}, "rotary_embedding_dim");
  check_fails<ops::rotary_embedding>(kernel_node("RotaryEmbedding", 23).set("num_heads", i64{1}), {{x3}, {c}, {c}, {pos}},
                                     "rotary_embedding_dim / 2");
  check_fails<ops::rotary_embedding>(kernel_node("RotaryEmbedding", 23).set("num_heads", i64{2}),
                                     {{x3}, {c}, {c}, {make<i64>({1, 1}, {4})}}, "out of range");
}
