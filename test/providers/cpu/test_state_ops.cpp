// Tests of the CPU kernels in state_ops.cpp: LinearAttention, CausalConvWithState, TensorScatter, CumProd and BitCast.
// Hand-computed values (some from the ONNX 1.22 backend tests, pasted as literals), naive references on seeded
// inputs, the 16-bit float types, a pool of threads, and the errors.
#include "misc_support.hpp"

#include <array>
#include <cmath>
#include <complex>

using namespace epstack;
using namespace epstack::test;
using namespace epstack::test::misc;

namespace {

using u8 = std::uint8_t;

/// A float, float16 or bfloat16 tensor from float values.
template <class H>
tensor make_f(const ints& dims, const std::vector<float>& values) {
  std::vector<H> h(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) h[i] = H(values[i]);
  return make<H>(dims, h);
}
/// The values of a float, float16 or bfloat16 tensor as floats.
std::vector<float> floats_of(const tensor& t) {
  std::vector<float> r(t.element_count());
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (t.type() == element_type::float32) r[i] = t.typed<float>()[i];
    else if (t.type() == element_type::float16) r[i] = static_cast<float>(t.typed<float16>()[i]);
    else r[i] = static_cast<float>(t.typed<bfloat16>()[i]);
  }
  return r;
}
/// Checks type, sizes and values within atol + rtol * |want| (NaN never passes).
void check_floats(const tensor& got, element_type type, const ints& dims, const std::vector<double>& want, double atol,
                  double rtol) {
  REQUIRE(got.type() == type);
  CHECK(dims_of(got) == dims);
  REQUIRE(got.element_count() == want.size());
  const std::vector<float> g = floats_of(got);
  const auto c = compare_values([&](std::size_t i) { return g[i]; }, [&](std::size_t i) { return want[i]; }, want.size(), atol, rtol);
  CHECK_MESSAGE(c.ok(), c.message());
}

std::vector<ivalue> run2(auto kernel, const kernel_node& kn, const std::vector<kernel_input>& in, thread_pool* pool = nullptr) {
  using K = decltype(kernel);
  auto r = run_kernel<K>(kn, in, pool);
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  REQUIRE(r->size() == 2);
  return *r;
}
std::vector<u8> bytes_of(const tensor& t) {
  const auto b = t.bytes();
  std::vector<u8> r(b.size());
  for (std::size_t i = 0; i < b.size(); ++i) r[i] = std::to_integer<u8>(b[i]);
  return r;
}
tensor make_bytes(element_type type, const ints& dims, const std::vector<u8>& bytes) {
  tensor t(type, std::span<const std::int64_t>(dims));
  REQUIRE(t.byte_size() == bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) t.mutable_data()[i] = static_cast<std::byte>(bytes[i]);
  return t;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// LinearAttention

namespace {

kernel_node la_node(i64 hq, i64 hkv, const std::string& rule) {
  kernel_node kn = op("LinearAttention", 27).set("q_num_heads", hq).set("kv_num_heads", hkv).set("update_rule", rule);
  kn.outputs = 2;
  return kn;
}

// The two-token, one-head example: d_k = d_v = 2.
const std::vector<float> la_q = {1, 0, 0, 1}, la_k = {1, 2, 3, -1}, la_v = {1, 1, 2, 0};

/// The recurrence token by token in double: state (B, Hkv, dk, dv), output (B, T, Hq * dv).
struct la_ref {
  i64 B, T, Hq, Hkv, dk, dv;
  std::string rule;
  i64 decay_w = 0, beta_w = 0;  // decay values per (token, kv head), beta values per token
  double scale;
  std::vector<double> out, state;
  void run(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v, const std::vector<float>& past,
           const std::vector<float>& decay, const std::vector<float>& beta) {
    const bool gated = rule == "gated" || rule == "gated_delta", delta = rule == "delta" || rule == "gated_delta";
    const i64 G = Hq / Hkv;
    state.assign(static_cast<std::size_t>(B * Hkv * dk * dv), 0.0);
    for (std::size_t i = 0; i < past.size(); ++i) state[i] = past[i];
    out.assign(static_cast<std::size_t>(B * T * Hq * dv), 0.0);
    for (i64 b = 0; b < B; ++b)
      for (i64 h = 0; h < Hkv; ++h) {
        double* s = state.data() + (b * Hkv + h) * dk * dv;
        for (i64 t = 0; t < T; ++t) {
          const i64 tok = b * T + t;
          const auto K = [&](i64 i) { return static_cast<double>(k[static_cast<std::size_t>((tok * Hkv + h) * dk + i)]); };
          const auto V = [&](i64 j) { return static_cast<double>(v[static_cast<std::size_t>((tok * Hkv + h) * dv + j)]); };
          if (gated)
            for (i64 i = 0; i < dk; ++i) {
              const double e = std::exp(static_cast<double>(decay[static_cast<std::size_t>((tok * Hkv + h) * decay_w + (decay_w == 1 ? 0 : i))]));
              for (i64 j = 0; j < dv; ++j) s[i * dv + j] *= e;
            }
          std::vector<double> u(static_cast<std::size_t>(dv));
          for (i64 j = 0; j < dv; ++j) {
            if (delta) {
              double r = 0;
              for (i64 i = 0; i < dk; ++i) r += K(i) * s[i * dv + j];
              const double bt = beta[static_cast<std::size_t>(tok * beta_w + (beta_w == 1 ? 0 : h))];
              u[static_cast<std::size_t>(j)] = bt * (V(j) - r);
            } else {
              u[static_cast<std::size_t>(j)] = V(j);
            }
          }
          for (i64 i = 0; i < dk; ++i)
            for (i64 j = 0; j < dv; ++j) s[i * dv + j] += K(i) * u[static_cast<std::size_t>(j)];
          for (i64 g = 0; g < G; ++g) {
            const i64 hq = h * G + g;
            for (i64 j = 0; j < dv; ++j) {
              double o = 0;
              for (i64 i = 0; i < dk; ++i) o += q[static_cast<std::size_t>((tok * Hq + hq) * dk + i)] * s[i * dv + j];
              out[static_cast<std::size_t>((tok * Hq + hq) * dv + j)] = scale * o;
            }
          }
        }
      }
  }
};

std::vector<float> uniforms(lcg& g, std::size_t n, float lo, float hi) {
  std::vector<float> r(n);
  for (auto& x : r) x = lo + (hi - lo) * (g.uniform() + 1.0f) * 0.5f;
  return r;
}
/// Each head's d_k-vector scaled to unit length (keys of the delta rules).
void l2_normalize(std::vector<float>& k, i64 dk) {
  for (std::size_t h = 0; h < k.size(); h += static_cast<std::size_t>(dk)) {
    double n = 0;
    for (i64 i = 0; i < dk; ++i) n += double(k[h + static_cast<std::size_t>(i)]) * k[h + static_cast<std::size_t>(i)];
    n = std::sqrt(n) + 1e-6;
    for (i64 i = 0; i < dk; ++i) k[h + static_cast<std::size_t>(i)] = static_cast<float>(k[h + static_cast<std::size_t>(i)] / n);
  }
}

struct la_random_case {
  i64 B, T, Hq, Hkv, dk, dv;
  std::string rule;
  bool per_key_decay, beta_scalar, with_past;
  float scale;  // 0: the default
};

/// Runs a random case with T (and state type S) against la_ref; inputs rounded to T first.
template <class T, class S>
void check_la_random(const la_random_case& c, std::uint64_t seed, double atol, double rtol, thread_pool* pool = nullptr) {
  CAPTURE(c.rule);
  CAPTURE(c.T);
  lcg g(seed);
  const auto round_t = [](std::vector<float> v) {
    for (auto& x : v) x = static_cast<float>(T(x));
    return v;
  };
  std::vector<float> q = round_t(uniforms(g, static_cast<std::size_t>(c.B * c.T * c.Hq * c.dk), -1, 1));
  std::vector<float> k = uniforms(g, static_cast<std::size_t>(c.B * c.T * c.Hkv * c.dk), -1, 1);
  if (c.rule == "delta" || c.rule == "gated_delta") l2_normalize(k, c.dk);
  k = round_t(k);
  std::vector<float> v = round_t(uniforms(g, static_cast<std::size_t>(c.B * c.T * c.Hkv * c.dv), -1, 1));
  std::vector<float> past;
  if (c.with_past) {
    past = uniforms(g, static_cast<std::size_t>(c.B * c.Hkv * c.dk * c.dv), -0.2f, 0.2f);
    for (auto& x : past) x = static_cast<float>(S(x));
  }
  const i64 decay_w = c.per_key_decay ? c.dk : 1, beta_w = c.beta_scalar ? 1 : c.Hkv;
  const std::vector<float> decay = round_t(uniforms(g, static_cast<std::size_t>(c.B * c.T * c.Hkv * decay_w), -0.3f, 0.0f));
  const std::vector<float> beta = round_t(uniforms(g, static_cast<std::size_t>(c.B * c.T * beta_w), 0.0f, 1.0f));
  const bool gated = c.rule == "gated" || c.rule == "gated_delta", delta = c.rule == "delta" || c.rule == "gated_delta";

  la_ref ref{c.B, c.T, c.Hq, c.Hkv, c.dk, c.dv, c.rule, decay_w, beta_w,
             c.scale != 0 ? double(c.scale) : 1.0 / std::sqrt(double(c.dk)), {}, {}};
  ref.run(q, k, v, past, decay, beta);

  kernel_node kn = la_node(c.Hq, c.Hkv, c.rule);
  if (c.scale != 0) kn.set("scale", c.scale);
  std::vector<kernel_input> in{{make_f<T>({c.B, c.T, c.Hq * c.dk}, q)}, {make_f<T>({c.B, c.T, c.Hkv * c.dk}, k)},
                               {make_f<T>({c.B, c.T, c.Hkv * c.dv}, v)},
                               {c.with_past ? make_f<S>({c.B, c.Hkv, c.dk, c.dv}, past) : tensor()},
                               {gated ? make_f<T>({c.B, c.T, c.Hkv * decay_w}, decay) : tensor()},
                               {delta ? make_f<T>({c.B, c.T, beta_w}, beta) : tensor()}};
  auto out = run2(ops::linear_attention{}, kn, in, pool);
  check_floats(out[0].as_tensor(), element_type_of_v<T>, {c.B, c.T, c.Hq * c.dv}, ref.out, atol, rtol);
  const element_type st = c.with_past ? element_type_of_v<S> : element_type_of_v<T>;
  const double satol = st == element_type::float32 ? 1e-4 : atol;
  check_floats(out[1].as_tensor(), st, {c.B, c.Hkv, c.dk, c.dv}, ref.state, satol, rtol);
}

}  // namespace

TEST_CASE("LinearAttention linear rule by hand: S accumulates k v^T, o = scale q^T S") {
  const tensor q = make<float>({1, 2, 2}, la_q), k = make<float>({1, 2, 2}, la_k), v = make<float>({1, 2, 2}, la_v);
  // S1 = [[1,1],[2,2]], o0 = row 0; S2 = S1 + [[6,0],[-2,0]] = [[7,1],[0,2]], o1 = row 1.
  auto out = run2(ops::linear_attention{}, la_node(1, 1, "linear").set("scale", 1.0f), {{q}, {k}, {v}});
  check_tensor<float>(out[0].as_tensor(), {1, 2, 2}, {1, 1, 0, 2});
  check_tensor<float>(out[1].as_tensor(), {1, 1, 2, 2}, {7, 1, 0, 2});
  // The default scale is 1 / sqrt(d_k).
  auto def = run2(ops::linear_attention{}, la_node(1, 1, "linear"), {{q}, {k}, {v}});
  const float r = 1.0f / std::sqrt(2.0f);
  check_tensor<float>(def[0].as_tensor(), {1, 2, 2}, {r, r, 0, 2 * r});
  check_tensor<float>(def[1].as_tensor(), {1, 1, 2, 2}, {7, 1, 0, 2});
}

TEST_CASE("LinearAttention delta rule by hand, beta of shape (B, T, 1)") {
  const tensor q = make<float>({1, 2, 2}, la_q), k = make<float>({1, 2, 2}, la_k), v = make<float>({1, 2, 2}, la_v);
  const tensor beta = make<float>({1, 2, 1}, {0.5f, 0.5f});
  // t0: u = 0.5 v0 = [.5,.5], S = k0 u^T; t1: S^T k1 = [.5,.5], u = 0.5 ([2,0] - [.5,.5]) = [.75,-.25].
  auto out = run2(ops::linear_attention{}, la_node(1, 1, "delta").set("scale", 1.0f), {{q}, {k}, {v}, {}, {}, {beta}});
  check_tensor<float>(out[0].as_tensor(), {1, 2, 2}, {0.5f, 0.5f, 0.25f, 1.25f});
  check_tensor<float>(out[1].as_tensor(), {1, 1, 2, 2}, {2.75f, -0.25f, 0.25f, 1.25f});
}

TEST_CASE("LinearAttention gated rule by hand: per-head and per-key decay, with a past state") {
  const tensor q = make<float>({1, 2, 2}, la_q), k = make<float>({1, 2, 2}, la_k), v = make<float>({1, 2, 2}, la_v);
  const tensor past = make<float>({1, 1, 2, 2}, {2, 0, 0, 2});
  const float half = std::log(0.5f);
  auto head = run2(ops::linear_attention{}, la_node(1, 1, "gated").set("scale", 1.0f),
                   {{q}, {k}, {v}, {past}, {make<float>({1, 2, 1}, {half, half})}});
  check_tensor<float>(head[0].as_tensor(), {1, 2, 2}, {2, 1, -1, 1.5f});
  check_tensor<float>(head[1].as_tensor(), {1, 1, 2, 2}, {7, 0.5f, -1, 1.5f});
  // Per key dimension: row 0 of the state halves, row 1 keeps.
  auto key = run2(ops::linear_attention{}, la_node(1, 1, "gated").set("scale", 1.0f),
                  {{q}, {k}, {v}, {past}, {make<float>({1, 2, 2}, {half, 0, half, 0})}});
  check_tensor<float>(key[0].as_tensor(), {1, 2, 2}, {2, 1, 0, 4});
  check_tensor<float>(key[1].as_tensor(), {1, 1, 2, 2}, {7, 0.5f, 0, 4});
}

TEST_CASE("LinearAttention gated_delta (the default rule) by hand: the decayed state is read and written") {
  const tensor q = make<float>({1, 2, 2}, la_q), k = make<float>({1, 2, 2}, la_k), v = make<float>({1, 2, 2}, la_v);
  const tensor past = make<float>({1, 1, 2, 2}, {2, 0, 0, 2});
  kernel_node kn = op("LinearAttention", 27).set("q_num_heads", i64{1}).set("kv_num_heads", i64{1}).set("scale", 1.0f);
  kn.outputs = 2;
  const float half = std::log(0.5f);
  auto out = run2(ops::linear_attention{}, kn,
                  {{q}, {k}, {v}, {past}, {make<float>({1, 2, 1}, {half, half})}, {make<float>({1, 2, 1}, {0.5f, 0.5f})}});
  check_tensor<float>(out[0].as_tensor(), {1, 2, 2}, {1, -0.5f, -0.25f, -0.375f});
  check_tensor<float>(out[1].as_tensor(), {1, 1, 2, 2}, {1.25f, 0.875f, -0.25f, -0.375f});
}

TEST_CASE("LinearAttention GQA by hand: both query heads read the one kv head's state") {
  // S = k v^T = [[1,1],[2,2]]; query head 0 = [1,0] reads row 0, head 1 = [0,1] reads row 1.
  auto out = run2(ops::linear_attention{}, la_node(2, 1, "linear").set("scale", 1.0f),
                  {{make<float>({1, 1, 4}, {1, 0, 0, 1})}, {make<float>({1, 1, 2}, {1, 2})}, {make<float>({1, 1, 2}, {1, 1})}});
  check_tensor<float>(out[0].as_tensor(), {1, 1, 4}, {1, 1, 2, 2});
  check_tensor<float>(out[1].as_tensor(), {1, 1, 2, 2}, {1, 1, 2, 2});
}

TEST_CASE("LinearAttention matches a token-by-token reference: every rule, GQA, MQA, decay and beta layouts") {
  const std::vector<la_random_case> cases = {
      {2, 4, 4, 4, 8, 8, "linear", false, false, false, 0},
      {2, 1, 4, 4, 8, 8, "linear", false, false, true, 0},
      {2, 4, 4, 4, 8, 8, "gated", true, false, false, 0},
      {2, 4, 4, 4, 8, 8, "gated", false, false, true, 0},
      {2, 4, 4, 4, 8, 8, "delta", false, false, false, 0},
      {2, 5, 4, 4, 8, 6, "gated_delta", true, false, true, 0.25f},
      {2, 4, 4, 4, 8, 8, "gated_delta", true, true, false, 0},
      {2, 4, 8, 4, 8, 8, "gated_delta", true, false, true, 0},
      {2, 4, 8, 1, 8, 8, "gated_delta", false, false, false, 0},
      {1, 3, 6, 2, 3, 5, "delta", false, true, true, 0},
  };
  std::uint64_t seed = 11;
  for (const auto& c : cases) check_la_random<float, float>(c, seed++, 1e-5, 1e-4);
}

TEST_CASE("LinearAttention on float16 and bfloat16, with a float past_state (present_state stays float)") {
  const la_random_case c{2, 4, 8, 4, 8, 8, "gated_delta", true, false, true, 0};
  check_la_random<float16, float>(c, 5, 2e-3, 2e-3);
  check_la_random<bfloat16, float>(c, 6, 2e-2, 1e-2);
  const la_random_case no_past{2, 3, 4, 4, 8, 8, "gated", false, false, false, 0};
  check_la_random<float16, float16>(no_past, 7, 3e-3, 2e-3);  // present_state in T
  check_la_random<float16, bfloat16>({1, 2, 2, 2, 4, 4, "linear", false, false, true, 0}, 8, 2e-2, 1e-2);
}

TEST_CASE("LinearAttention on a pool of 2 threads: many heads, and one head split into column blocks") {
  thread_pool pool(2);
  check_la_random<float, float>({4, 16, 8, 8, 16, 16, "gated_delta", true, false, true, 0}, 21, 5e-5, 1e-4, &pool);
  check_la_random<float, float>({1, 64, 2, 1, 16, 64, "gated_delta", false, false, true, 0}, 22, 5e-5, 1e-4, &pool);
  check_la_random<float, float>({1, 64, 2, 1, 16, 64, "linear", false, false, false, 0}, 23, 1e-4, 1e-4, &pool);
}

TEST_CASE("LinearAttention with T = 0 returns an empty output and the past state") {
  const tensor past = make<float>({1, 1, 2, 2}, {1, 2, 3, 4});
  auto out = run2(ops::linear_attention{}, la_node(1, 1, "linear"),
                  {{make<float>({1, 0, 2}, {})}, {make<float>({1, 0, 2}, {})}, {make<float>({1, 0, 2}, {})}, {past}});
  check_tensor<float>(out[0].as_tensor(), {1, 0, 2}, {});
  check_tensor<float>(out[1].as_tensor(), {1, 1, 2, 2}, {1, 2, 3, 4});
}

TEST_CASE("LinearAttention errors name the input or attribute") {
  const tensor q = make<float>({1, 2, 2}, la_q), k = make<float>({1, 2, 2}, la_k), v = make<float>({1, 2, 2}, la_v);
  const tensor beta = make<float>({1, 2, 1}, {0.5f, 0.5f});
  using K = ops::linear_attention;
  check_fails<K>(la_node(1, 1, "gated"), {{q}, {k}, {v}}, "decay input is required for update_rule 'gated'");
  check_fails<K>(la_node(1, 1, "delta"), {{q}, {k}, {v}}, "beta input is required");
  check_fails<K>(la_node(1, 1, "gated_delta"), {{q}, {k}, {v}, {}, {}, {beta}}, "decay input is required");
  check_fails<K>(la_node(1, 1, "delta"), {{q}, {k}, {v}, {}, {}, {make<float>({1, 2, 3}, {1, 1, 1, 1, 1, 1})}}, "beta has shape");
  check_fails<K>(la_node(1, 1, "gated"), {{q}, {k}, {v}, {}, {make<float>({1, 2, 3}, {0, 0, 0, 0, 0, 0})}}, "decay has shape");
  check_fails<K>(la_node(3, 1, "linear"), {{q}, {k}, {v}}, "last dimension of query (2) is not a multiple of q_num_heads (3)");
  check_fails<K>(la_node(2, 2, "linear"), {{make<float>({1, 1, 4}, {1, 2, 3, 4})}, {make<float>({1, 1, 3}, {1, 2, 3})}, {make<float>({1, 1, 2}, {1, 2})}},
                 "key has last dimension 3");
  check_fails<K>(la_node(1, 1, "linear"), {{q}, {make<float>({1, 1, 2}, {1, 2})}, {v}}, "key has shape");
  check_fails<K>(la_node(1, 1, "linear"), {{make<float>({2, 2}, {1, 2, 3, 4})}, {k}, {v}}, "query must have rank 3");
  check_fails<K>(la_node(1, 1, "linear"), {{q}, {k}, {v}, {make<float>({1, 1, 2, 1}, {0, 0})}}, "past_state has shape");
  check_fails<K>(la_node(3, 2, "linear"), {{q}, {k}, {v}}, "q_num_heads (3) must be a multiple of kv_num_heads (2)");
  check_fails<K>(la_node(1, 0, "linear"), {{q}, {k}, {v}}, "must be positive");
  check_fails<K>(la_node(1, 1, "softmax"), {{q}, {k}, {v}}, "update_rule 'softmax'");
  kernel_node no_heads = op("LinearAttention", 27).set("kv_num_heads", i64{1});
  no_heads.outputs = 2;
  check_fails<K>(no_heads, {{q}, {k}, {v}}, "attribute q_num_heads");
  // Mixed element types are refused by supports().
  CHECK(run_kernel<K>(la_node(1, 1, "linear"), {{q}, {make<double>({1, 2, 2}, {1, 2, 3, 4})}, {v}}).code() == errc::not_implemented);
}

// ---------------------------------------------------------------------------------------------------------------
// CausalConvWithState

namespace {

kernel_node conv_node(const std::string& activation = {}) {
  kernel_node kn = op("CausalConvWithState", 27);
  if (!activation.empty()) kn.set("activation", activation);
  kn.outputs = 2;
  return kn;
}

// B = 1, C = 2, L = 3, k = 3.
const std::vector<float> cc_x = {1, 2, 3, -1, 0, 4}, cc_w = {1, 2, 3, 0, 1, -1}, cc_b = {0.5f, -1}, cc_past = {4, 5, 1, 2};

/// y[b,c,t] = bias[c] + sum_j w[c,j] * P[t + j], P = [past (or zeros), x]; the state is P's last k - 1 values.
void conv_ref(i64 B, i64 C, i64 L, i64 K, const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& bias,
              const std::vector<float>& past, bool silu, std::vector<double>& y, std::vector<double>& state) {
  y.assign(static_cast<std::size_t>(B * C * L), 0);
  state.assign(static_cast<std::size_t>(B * C * (K - 1)), 0);
  for (i64 r = 0; r < B * C; ++r) {
    const i64 c = r % C;
    std::vector<double> P(static_cast<std::size_t>(K - 1 + L), 0.0);
    for (i64 i = 0; i < K - 1; ++i) P[static_cast<std::size_t>(i)] = past.empty() ? 0.0 : past[static_cast<std::size_t>(r * (K - 1) + i)];
    for (i64 i = 0; i < L; ++i) P[static_cast<std::size_t>(K - 1 + i)] = x[static_cast<std::size_t>(r * L + i)];
    for (i64 t = 0; t < L; ++t) {
      double a = bias.empty() ? 0.0 : bias[static_cast<std::size_t>(c)];
      for (i64 j = 0; j < K; ++j) a += w[static_cast<std::size_t>(c * K + j)] * P[static_cast<std::size_t>(t + j)];
      y[static_cast<std::size_t>(r * L + t)] = silu ? a / (1.0 + std::exp(-a)) : a;
    }
    for (i64 i = 0; i < K - 1; ++i) state[static_cast<std::size_t>(r * (K - 1) + i)] = P[static_cast<std::size_t>(L + i)];
  }
}

}  // namespace

TEST_CASE("CausalConvWithState by hand: zero padding, then bias and past_state") {
  const tensor x = make<float>({1, 2, 3}, cc_x), w = make<float>({2, 1, 3}, cc_w);
  auto plain = run2(ops::causal_conv_with_state{}, conv_node(), {{x}, {w}});
  // c0: P = [0,0,1,2,3], w = [1,2,3]: 3, 2+6, 1+4+9; c1: P = [0,0,-1,0,4], w = [0,1,-1]: 1, -1, -4.
  check_tensor<float>(plain[0].as_tensor(), {1, 2, 3}, {3, 8, 14, 1, -1, -4});
  check_tensor<float>(plain[1].as_tensor(), {1, 2, 2}, {2, 3, 0, 4});
  auto full = run2(ops::causal_conv_with_state{}, conv_node(),
                   {{x}, {w}, {make<float>({2}, cc_b)}, {make<float>({1, 2, 2}, cc_past)}});
  // c0: P = [4,5,1,2,3]: 17, 13, 14 (+0.5); c1: P = [1,2,-1,0,4]: 3, -1, -4 (-1).
  check_tensor<float>(full[0].as_tensor(), {1, 2, 3}, {17.5f, 13.5f, 14.5f, 2, -2, -5});
  check_tensor<float>(full[1].as_tensor(), {1, 2, 2}, {2, 3, 0, 4});
  // past_state without bias (the bias input omitted).
  auto past_only = run2(ops::causal_conv_with_state{}, conv_node(), {{x}, {w}, {}, {make<float>({1, 2, 2}, cc_past)}});
  check_tensor<float>(past_only[0].as_tensor(), {1, 2, 3}, {17, 13, 14, 3, -1, -4});
}

TEST_CASE("CausalConvWithState activation silu and its alias swish") {
  const tensor x = make<float>({1, 2, 3}, cc_x), w = make<float>({2, 1, 3}, cc_w);
  const std::vector<float> want = {2.85772238f, 7.99731720f, 13.99998836f, 0.73105858f, -0.26894142f, -0.07194484f};
  for (const char* act : {"silu", "swish"}) {
    auto out = run2(ops::causal_conv_with_state{}, conv_node(act), {{x}, {w}});
    check_tensor<float>(out[0].as_tensor(), {1, 2, 3}, want, 1e-6, 1e-6);
    check_tensor<float>(out[1].as_tensor(), {1, 2, 2}, {2, 3, 0, 4});
  }
  auto none = run2(ops::causal_conv_with_state{}, conv_node("none"), {{x}, {w}});
  check_tensor<float>(none[0].as_tensor(), {1, 2, 3}, {3, 8, 14, 1, -1, -4});
}

TEST_CASE("CausalConvWithState with an input shorter than k - 1, and with k = 1 (an empty state)") {
  const tensor w = make<float>({1, 1, 4}, {1, 1, 1, 2});
  auto zeros = run2(ops::causal_conv_with_state{}, conv_node(), {{make<float>({1, 1, 1}, {5})}, {w}});
  check_tensor<float>(zeros[0].as_tensor(), {1, 1, 1}, {10});
  check_tensor<float>(zeros[1].as_tensor(), {1, 1, 3}, {0, 0, 5});
  auto past = run2(ops::causal_conv_with_state{}, conv_node(), {{make<float>({1, 1, 1}, {5})}, {w}, {}, {make<float>({1, 1, 3}, {1, 2, 3})}});
  check_tensor<float>(past[0].as_tensor(), {1, 1, 1}, {16});
  check_tensor<float>(past[1].as_tensor(), {1, 1, 3}, {2, 3, 5});
  auto k1 = run2(ops::causal_conv_with_state{}, conv_node(), {{make<float>({1, 1, 2}, {1, 2})}, {make<float>({1, 1, 1}, {2})}});
  check_tensor<float>(k1[0].as_tensor(), {1, 1, 2}, {2, 4});
  check_tensor<float>(k1[1].as_tensor(), {1, 1, 0}, {});
}

TEST_CASE("CausalConvWithState on float16 and bfloat16 (exact small values)") {
  const std::vector<double> want = {17.5, 13.5, 14.5, 2, -2, -5};
  auto h = run2(ops::causal_conv_with_state{}, conv_node(),
                {{make_f<float16>({1, 2, 3}, cc_x)}, {make_f<float16>({2, 1, 3}, cc_w)}, {make_f<float16>({2}, cc_b)},
                 {make_f<float16>({1, 2, 2}, cc_past)}});
  check_floats(h[0].as_tensor(), element_type::float16, {1, 2, 3}, want, 0, 0);
  check_floats(h[1].as_tensor(), element_type::float16, {1, 2, 2}, {2, 3, 0, 4}, 0, 0);
  auto b = run2(ops::causal_conv_with_state{}, conv_node(),
                {{make_f<bfloat16>({1, 2, 3}, cc_x)}, {make_f<bfloat16>({2, 1, 3}, cc_w)}, {make_f<bfloat16>({2}, cc_b)},
                 {make_f<bfloat16>({1, 2, 2}, cc_past)}});
  check_floats(b[0].as_tensor(), element_type::bfloat16, {1, 2, 3}, want, 0, 0);
  check_floats(b[1].as_tensor(), element_type::bfloat16, {1, 2, 2}, {2, 3, 0, 4}, 0, 0);
  // silu on float16: within half's rounding of the float result.
  auto s = run2(ops::causal_conv_with_state{}, conv_node("silu"), {{make_f<float16>({1, 2, 3}, cc_x)}, {make_f<float16>({2, 1, 3}, cc_w)}});
  check_floats(s[0].as_tensor(), element_type::float16, {1, 2, 3},
               {2.85772238, 7.99731720, 13.99998836, 0.73105858, -0.26894142, -0.07194484}, 1e-4, 1e-3);
}

TEST_CASE("CausalConvWithState matches a reference on seeded inputs, on a pool of 2 threads") {
  thread_pool pool(2);
  lcg g(17);
  for (const auto& [B, C, L, K] : {std::array<i64, 4>{2, 64, 300, 4}, std::array<i64, 4>{3, 5, 7, 6}, std::array<i64, 4>{2, 8, 1, 4}}) {
    CAPTURE(L);
    const auto x = uniforms(g, static_cast<std::size_t>(B * C * L), -1, 1);
    const auto w = uniforms(g, static_cast<std::size_t>(C * K), -1, 1);
    const auto bias = uniforms(g, static_cast<std::size_t>(C), -1, 1);
    const auto past = uniforms(g, static_cast<std::size_t>(B * C * (K - 1)), -1, 1);
    for (const bool silu : {false, true}) {
      std::vector<double> y, st;
      conv_ref(B, C, L, K, x, w, bias, past, silu, y, st);
      auto out = run2(ops::causal_conv_with_state{}, conv_node(silu ? "silu" : "none"),
                      {{make<float>({B, C, L}, x)}, {make<float>({C, 1, K}, w)}, {make<float>({C}, bias)}, {make<float>({B, C, K - 1}, past)}},
                      &pool);
      check_floats(out[0].as_tensor(), element_type::float32, {B, C, L}, y, 1e-5, 1e-5);
      check_floats(out[1].as_tensor(), element_type::float32, {B, C, K - 1}, st, 0, 0);
    }
  }
}

TEST_CASE("CausalConvWithState errors name the input or attribute") {
  const tensor x = make<float>({1, 2, 3}, cc_x), w = make<float>({2, 1, 3}, cc_w);
  using K = ops::causal_conv_with_state;
  check_fails<K>(conv_node("relu"), {{x}, {w}}, "activation 'relu'");
  check_fails<K>(conv_node(), {{x}, {make<float>({2, 3}, cc_w)}}, "weight has shape [2,3]");
  check_fails<K>(conv_node(), {{x}, {make<float>({3, 1, 2}, cc_w)}}, "weight has shape");
  check_fails<K>(conv_node(), {{x}, {make<float>({2, 1, 0}, {})}}, "k >= 1");
  check_fails<K>(conv_node(), {{x}, {w}, {make<float>({3}, {1, 2, 3})}}, "bias has shape [3]");
  check_fails<K>(conv_node(), {{x}, {w}, {}, {make<float>({1, 2, 3}, cc_x)}}, "past_state has shape [1,2,3]");
  check_fails<K>(conv_node(), {{make<float>({2, 3}, cc_x)}, {w}}, "input must have rank 3");
  CHECK(run_kernel<K>(conv_node(), {{make<double>({1, 1, 1}, {1.0})}, {make<double>({1, 1, 1}, {1.0})}}).code() == errc::not_implemented);
}

// ---------------------------------------------------------------------------------------------------------------
// TensorScatter

namespace {
kernel_node scatter_node(const std::string& mode = {}) {
  kernel_node kn = op("TensorScatter", 24);
  if (!mode.empty()) kn.set("mode", mode);
  return kn;
}
std::vector<float> iota_f(std::size_t n, float from = 0) {
  std::vector<float> r(n);
  std::iota(r.begin(), r.end(), from);
  return r;
}
}  // namespace

TEST_CASE("TensorScatter linear (backend test_tensorscatter_3d)") {
  const std::vector<float> rows = {1, 2, 3, 4, 5, 5, 6, 7, 8, 9, 8, 7, 6, 5, 4, 5, 4, 3, 2, 1};
  std::vector<float> past;
  for (int b = 0; b < 3; ++b) past.insert(past.end(), rows.begin(), rows.end());
  std::vector<float> upd;
  for (float v : {4, 5, 6, 7, 2, 3}) upd.insert(upd.end(), 5, v);
  const tensor y = run1<ops::tensor_scatter>(scatter_node(), {{make<float>({3, 4, 5}, past)}, {make<float>({3, 2, 5}, upd)},
                                                             {make<i64>({3}, {1, 2, 0})}});
  std::vector<float> want;
  const std::vector<std::vector<float>> order = {{1, 2, 3, 4, 5}, {4, 4, 4, 4, 4}, {5, 5, 5, 5, 5}, {5, 4, 3, 2, 1},
                                                 {1, 2, 3, 4, 5}, {5, 6, 7, 8, 9}, {6, 6, 6, 6, 6}, {7, 7, 7, 7, 7},
                                                 {2, 2, 2, 2, 2}, {3, 3, 3, 3, 3}, {8, 7, 6, 5, 4}, {5, 4, 3, 2, 1}};
  for (const auto& r : order) want.insert(want.end(), r.begin(), r.end());
  check_tensor<float>(y, {3, 4, 5}, want);
}

TEST_CASE("TensorScatter circular wraps around max_sequence_length (backend test_tensorscatter_circular)") {
  const std::vector<float> rows = {1, 2, 3, 4, 5, 5, 6, 7, 8, 9, 8, 7, 6, 5, 4, 4, 3, 2, 1, 0};
  std::vector<float> past(rows);
  past.insert(past.end(), rows.begin(), rows.end());
  std::vector<float> upd;
  for (float v : {5, 6, 1, 2}) upd.insert(upd.end(), 5, v);
  const tensor y = run1<ops::tensor_scatter>(scatter_node("circular"), {{make<float>({2, 1, 4, 5}, past)}, {make<float>({2, 1, 2, 5}, upd)},
                                                                       {make<i64>({2}, {1, 3})}});
  std::vector<float> want;
  const std::vector<std::vector<float>> order = {{1, 2, 3, 4, 5}, {5, 5, 5, 5, 5}, {6, 6, 6, 6, 6}, {4, 3, 2, 1, 0},
                                                 {2, 2, 2, 2, 2}, {5, 6, 7, 8, 9}, {8, 7, 6, 5, 4}, {1, 1, 1, 1, 1}};
  for (const auto& r : order) want.insert(want.end(), r.begin(), r.end());
  check_tensor<float>(y, {2, 1, 4, 5}, want);
  // Negative write indices count back from the end in circular mode: -1 is max_sequence_length - 1.
  const tensor z = run1<ops::tensor_scatter>(scatter_node("circular"), {{make<float>({1, 3, 1}, {0, 0, 0})}, {make<float>({1, 2, 1}, {7, 8})},
                                                                       {make<i64>({1}, {-1})}});
  check_tensor<float>(z, {1, 3, 1}, {8, 0, 7});
}

TEST_CASE("TensorScatter without write_indices writes at 0 - an explicit axis - int64 and string caches") {
  check_tensor<float>(run1<ops::tensor_scatter>(scatter_node(), {{make<float>({1, 3, 2}, {0, 0, 0, 0, 0, 0})}, {make<float>({1, 2, 2}, {1, 2, 3, 4})}}),
                      {1, 3, 2}, {1, 2, 3, 4, 0, 0});
  // (B, S, H, D) = (1, 3, 2, 1) along axis 1: sequence position 2 holds elements 4 and 5.
  check_tensor<i64>(run1<ops::tensor_scatter>(scatter_node().set("axis", i64{1}),
                                              {{make<i64>({1, 3, 2, 1}, {0, 1, 2, 3, 4, 5})}, {make<i64>({1, 1, 2, 1}, {7, 8})}, {make<i64>({1}, {2})}}),
                    {1, 3, 2, 1}, {0, 1, 2, 3, 7, 8});
  // The last axis as the sequence axis, two batches with their own indices.
  check_tensor<i64>(run1<ops::tensor_scatter>(scatter_node().set("axis", i64{-1}),
                                              {{make<i64>({2, 4}, {0, 0, 0, 0, 0, 0, 0, 0})}, {make<i64>({2, 1}, {5, 6})}, {make<i64>({2}, {3, 0})}}),
                    {2, 4}, {0, 0, 0, 5, 6, 0, 0, 0});
  check_tensor<std::string>(run1<ops::tensor_scatter>(scatter_node(), {{make<std::string>({1, 2, 1}, {"a", "b"})},
                                                                      {make<std::string>({1, 1, 1}, {"z"})}, {make<i64>({1}, {1})}}),
                            {1, 2, 1}, {"a", "z"});
}

TEST_CASE("TensorScatter on packed int4 (rows inside bytes) and float8 caches keeps the bits") {
  // int4 (1, 3, 1): elements 1, 2, 3 stored as 0x21, 0x03; writing -1 (0xF) at position 1.
  const tensor y = run1<ops::tensor_scatter>(scatter_node(), {{make_bytes(element_type::int4, {1, 3, 1}, {0x21, 0x03})},
                                                             {make_bytes(element_type::int4, {1, 1, 1}, {0x0F})}, {make<i64>({1}, {1})}});
  CHECK(y.type() == element_type::int4);
  CHECK(dims_of(y) == ints{1, 3, 1});
  CHECK(bytes_of(y) == std::vector<u8>{0xF1, 0x03});
  // uint4 with two elements per row (whole bytes), circular.
  const tensor u = run1<ops::tensor_scatter>(scatter_node("circular"), {{make_bytes(element_type::uint4, {1, 3, 2}, {0x10, 0x32, 0x54})},
                                                                       {make_bytes(element_type::uint4, {1, 2, 2}, {0xBA, 0xDC})},
                                                                       {make<i64>({1}, {2})}});
  CHECK(bytes_of(u) == std::vector<u8>{0xDC, 0x32, 0xBA});
  const tensor f8 = run1<ops::tensor_scatter>(scatter_node(), {{make_bytes(element_type::float8e4m3fn, {1, 2, 1}, {0x38, 0x40})},
                                                              {make_bytes(element_type::float8e4m3fn, {1, 1, 1}, {0xC8})}});
  CHECK(f8.type() == element_type::float8e4m3fn);
  CHECK(bytes_of(f8) == std::vector<u8>{0xC8, 0x40});
}

TEST_CASE("TensorScatter matches a reference on a pool of 2 threads (circular and linear)") {
  thread_pool pool(2);
  const i64 B = 4, H = 8, M = 64, S = 16, D = 32;
  const auto past = iota_f(static_cast<std::size_t>(B * H * M * D));
  const auto upd = iota_f(static_cast<std::size_t>(B * H * S * D), -100000.0f);
  for (const bool circular : {true, false}) {
    const std::vector<i64> wi = circular ? std::vector<i64>{60, 10, 0, 63} : std::vector<i64>{48, 10, 0, 3};
    std::vector<float> want = past;
    for (i64 b = 0; b < B; ++b)
      for (i64 h = 0; h < H; ++h)
        for (i64 s = 0; s < S; ++s) {
          const i64 pos = (wi[static_cast<std::size_t>(b)] + s) % M;
          for (i64 d = 0; d < D; ++d)
            want[static_cast<std::size_t>(((b * H + h) * M + pos) * D + d)] = upd[static_cast<std::size_t>(((b * H + h) * S + s) * D + d)];
        }
    const tensor y = run1<ops::tensor_scatter>(scatter_node(circular ? "circular" : "linear"),
                                               {{make<float>({B, H, M, D}, past)}, {make<float>({B, H, S, D}, upd)}, {make<i64>({B}, wi)}}, &pool);
    check_tensor<float>(y, {B, H, M, D}, want, 0, 0);
  }
}

TEST_CASE("TensorScatter errors name the input or attribute") {
  const tensor past = make<float>({1, 4, 2}, iota_f(8)), upd = make<float>({1, 2, 2}, {1, 2, 3, 4});
  using K = ops::tensor_scatter;
  check_fails<K>(scatter_node(), {{past}, {upd}, {make<i64>({1}, {3})}}, "write_indices[0] = 3");
  check_fails<K>(scatter_node(), {{past}, {upd}, {make<i64>({1}, {-1})}}, "write_indices[0] = -1");
  check_fails<K>(scatter_node(), {{past}, {upd}, {make<i64>({2}, {0, 0})}}, "write_indices has shape [2]");
  check_fails<K>(scatter_node("ring"), {{past}, {upd}}, "mode 'ring'");
  check_fails<K>(scatter_node().set("axis", i64{0}), {{past}, {upd}}, "axis must not be 0");
  check_fails<K>(scatter_node().set("axis", i64{3}), {{past}, {upd}}, "axis 3 is out of range for rank 3");
  check_fails<K>(scatter_node(), {{past}, {make<float>({1, 2, 3}, {1, 2, 3, 4, 5, 6})}}, "update has shape [1,2,3]");
  check_fails<K>(scatter_node(), {{past}, {make<float>({1, 5, 2}, iota_f(10))}}, "exceeds max_sequence_length");
  check_fails<K>(scatter_node(), {{make<float>({4}, {1, 2, 3, 4})}, {make<float>({1}, {1})}}, "past_cache must have rank >= 2");
  CHECK(run_kernel<K>(scatter_node(), {{past}, {upd}, {make<std::int32_t>({1}, {0})}}).code() == errc::not_implemented);
}

// ---------------------------------------------------------------------------------------------------------------
// CumProd

TEST_CASE("CumProd on the spec's example: inclusive, exclusive, reverse, both") {
  const tensor x = make<float>({3}, {1, 2, 3});
  const tensor axis = tensor::scalar<i64>(0);
  check_tensor<float>(run1<ops::cum_prod>(op("CumProd", 26), {{x}, {axis}}), {3}, {1, 2, 6});
  check_tensor<float>(run1<ops::cum_prod>(op("CumProd", 26).set("exclusive", i64{1}), {{x}, {axis}}), {3}, {1, 1, 2});
  check_tensor<float>(run1<ops::cum_prod>(op("CumProd", 26).set("reverse", i64{1}), {{x}, {axis}}), {3}, {6, 6, 3});
  check_tensor<float>(run1<ops::cum_prod>(op("CumProd", 26).set("exclusive", i64{1}).set("reverse", i64{1}), {{x}, {axis}}), {3}, {6, 3, 1});
}

TEST_CASE("CumProd 2-D double along axis 0, 1 and -1 - int32 exclusive (backend cases)") {
  const tensor x = make<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  check_tensor<double>(run1<ops::cum_prod>(op("CumProd", 26), {{x}, {tensor::scalar<std::int32_t>(0)}}), {2, 3}, {1, 2, 3, 4, 10, 18});
  check_tensor<double>(run1<ops::cum_prod>(op("CumProd", 26), {{x}, {tensor::scalar<std::int32_t>(1)}}), {2, 3}, {1, 2, 6, 4, 20, 120});
  check_tensor<double>(run1<ops::cum_prod>(op("CumProd", 26), {{x}, {make<i64>({1}, {-1})}}), {2, 3}, {1, 2, 6, 4, 20, 120});
  check_tensor<std::int32_t>(run1<ops::cum_prod>(op("CumProd", 26).set("exclusive", i64{1}),
                                                 {{make<std::int32_t>({5}, {1, 2, 3, 4, 5})}, {tensor::scalar<std::int32_t>(0)}}),
                             {5}, {1, 1, 2, 6, 24});
}

TEST_CASE("CumProd on a middle axis, exclusive and reverse") {
  std::vector<float> xs(12);
  std::iota(xs.begin(), xs.end(), 1.0f);
  check_tensor<float>(run1<ops::cum_prod>(op("CumProd", 26).set("exclusive", i64{1}).set("reverse", i64{1}),
                                          {{make<float>({2, 3, 2}, xs)}, {tensor::scalar<i64>(1)}}),
                      {2, 3, 2}, {15, 24, 5, 6, 1, 1, 99, 120, 11, 12, 1, 1});
}

TEST_CASE("CumProd integer types: signs, wrap-around on overflow, unsigned") {
  const tensor axis = tensor::scalar<i64>(0);
  check_tensor<std::int32_t>(run1<ops::cum_prod>(op("CumProd", 26), {{make<std::int32_t>({3}, {-3, 5, -2})}, {axis}}), {3}, {-3, -15, 30});
  check_tensor<std::int32_t>(run1<ops::cum_prod>(op("CumProd", 26), {{make<std::int32_t>({3}, {65536, 65536, 7})}, {axis}}), {3},
                             {65536, 0, 0});
  check_tensor<i64>(run1<ops::cum_prod>(op("CumProd", 26), {{make<i64>({2}, {i64{1} << 62, 4})}, {axis}}), {2}, {i64{1} << 62, 0});
  check_tensor<i64>(run1<ops::cum_prod>(op("CumProd", 26), {{make<i64>({3}, {i64{1} << 62, -2, 3})}, {axis}}), {3},
                    {i64{1} << 62, std::numeric_limits<i64>::min(), std::numeric_limits<i64>::min()});
  check_tensor<std::uint64_t>(run1<ops::cum_prod>(op("CumProd", 26).set("reverse", i64{1}), {{make<std::uint64_t>({3}, {3, 5, 7})}, {axis}}),
                              {3}, {105, 35, 7});
  check_tensor<std::uint32_t>(run1<ops::cum_prod>(op("CumProd", 26).set("exclusive", i64{1}), {{make<std::uint32_t>({3}, {2, 3, 4})}, {axis}}),
                              {3}, {1, 2, 6});
}

TEST_CASE("CumProd on float16 and bfloat16, rounding each step to the type") {
  const tensor axis = tensor::scalar<i64>(0);
  check_floats(run1<ops::cum_prod>(op("CumProd", 26), {{make_f<float16>({3}, {0.5f, 3, 1.5f})}, {axis}}), element_type::float16, {3},
               {0.5, 1.5, 2.25}, 0, 0);
  check_floats(run1<ops::cum_prod>(op("CumProd", 26).set("exclusive", i64{1}), {{make_f<bfloat16>({3}, {0.5f, 3, 1.5f})}, {axis}}),
               element_type::bfloat16, {3}, {1, 0.5, 1.5}, 0, 0);
  // 1.001 is 1.0009765625 in float16; its square 1.00195407... rounds to 1.001953125.
  check_floats(run1<ops::cum_prod>(op("CumProd", 26), {{make_f<float16>({2}, {1.001f, 1.001f})}, {axis}}), element_type::float16, {2},
               {1.0009765625, 1.001953125}, 0, 0);
}

TEST_CASE("CumProd matches a reference on a pool of 2 threads (float along axis 1, int64 along axis 0 wrapping)") {
  thread_pool pool(2);
  lcg g(9);
  {
    const i64 rows = 4096, cols = 16;  // 4096 rows of 16: more items than one thread's share
    const float choices[] = {0.5f, 1.0f, 2.0f, -1.0f};
    std::vector<float> xs(static_cast<std::size_t>(rows * cols));
    for (auto& v : xs) v = choices[g.next() % 4];  // powers of two: exact products
    std::vector<float> want(xs.size());
    for (i64 r = 0; r < rows; ++r)
      for (i64 c = 0; c < cols; ++c) {
        const auto i = static_cast<std::size_t>(r * cols + c);
        want[i] = c == 0 ? xs[i] : want[i - 1] * xs[i];
      }
    check_tensor<float>(run1<ops::cum_prod>(op("CumProd", 26), {{make<float>({rows, cols}, xs)}, {tensor::scalar<i64>(1)}}, &pool),
                        {rows, cols}, want, 0, 0);
  }
  {
    const i64 rows = 40, cols = 3000;  // axis 0 with 3 blocks of the inner dimension
    std::vector<i64> xs(static_cast<std::size_t>(rows * cols));
    for (auto& v : xs) v = static_cast<i64>(g.next() % 7) - 3;
    std::vector<i64> want(xs.size());
    for (i64 r = rows; r-- > 0;)
      for (i64 c = 0; c < cols; ++c) {
        const auto i = static_cast<std::size_t>(r * cols + c);
        // reverse, exclusive: the product of the rows below, wrapping as uint64 does.
        want[i] = r == rows - 1 ? 1
                                : static_cast<i64>(static_cast<std::uint64_t>(want[i + static_cast<std::size_t>(cols)]) *
                                                   static_cast<std::uint64_t>(xs[i + static_cast<std::size_t>(cols)]));
      }
    check_tensor<i64>(run1<ops::cum_prod>(op("CumProd", 26).set("exclusive", i64{1}).set("reverse", i64{1}),
                                          {{make<i64>({rows, cols}, xs)}, {tensor::scalar<i64>(0)}}, &pool),
                      {rows, cols}, want);
  }
}

TEST_CASE("CumProd errors: axis out of range, axis not a scalar, axis of a float type, unsupported x type") {
  const tensor x = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  check_fails<ops::cum_prod>(op("CumProd", 26), {{x}, {tensor::scalar<i64>(2)}}, "axis 2 is out of range for rank 2");
  check_fails<ops::cum_prod>(op("CumProd", 26), {{x}, {tensor::scalar<i64>(-3)}}, "axis -3 is out of range");
  check_fails<ops::cum_prod>(op("CumProd", 26), {{x}, {make<i64>({2}, {0, 1})}}, "axis must be a scalar");
  CHECK(run_kernel<ops::cum_prod>(op("CumProd", 26), {{x}, {tensor::scalar<float>(0.f)}}).code() == errc::not_implemented);
  CHECK(run_kernel<ops::cum_prod>(op("CumProd", 26), {{make<std::int8_t>({1}, {2})}, {tensor::scalar<i64>(0)}}).code() ==
        errc::not_implemented);
}

// ---------------------------------------------------------------------------------------------------------------
// BitCast

namespace {
kernel_node bitcast_node(element_type to) { return op("BitCast", 26).set("to", static_cast<i64>(to)); }
}  // namespace

TEST_CASE("BitCast between same-width types (backend cases)") {
  check_tensor<std::int32_t>(run1<ops::bit_cast>(bitcast_node(element_type::int32), {{make<float>({3}, {1.0f, -2.5f, 3.75f})}}), {3},
                             {1065353216, -1071644672, 1081081856});
  check_tensor<std::int32_t>(run1<ops::bit_cast>(bitcast_node(element_type::int32), {{make<float>({2, 1}, {1.0f, -2.5f})}}), {2, 1},
                             {1065353216, -1071644672});
  check_tensor<float>(run1<ops::bit_cast>(bitcast_node(element_type::float32), {{make<std::int32_t>({3}, {1065353216, -1071644672, 1081081856})}}),
                      {3}, {1.0f, -2.5f, 3.75f}, 0, 0);
  check_tensor<double>(run1<ops::bit_cast>(bitcast_node(element_type::float64),
                                           {{make<i64>({3}, {4607182418800017408, -4611686018427387904, 4614256656552045848})}}),
                       {3}, {1.0, -2.0, 3.14159265358979311600}, 0, 0);  // 0x400921FB54442D18 = pi
  check_tensor<u8>(run1<ops::bit_cast>(bitcast_node(element_type::uint8), {{make<bool>({4}, {true, false, true, false})}}), {4}, {1, 0, 1, 0});
  check_tensor<u8>(run1<ops::bit_cast>(bitcast_node(element_type::uint8), {{make<std::int8_t>({4}, {-1, -128, 127, 0})}}), {4},
                   {255, 128, 127, 0});
  check_tensor<std::int16_t>(run1<ops::bit_cast>(bitcast_node(element_type::int16), {{make<std::uint16_t>({3}, {1, 32768, 65535})}}), {3},
                             {1, -32768, -1});
  check_tensor<std::int32_t>(run1<ops::bit_cast>(bitcast_node(element_type::int32), {{tensor::scalar<float>(1.0f)}}), {}, {1065353216});
}

TEST_CASE("BitCast of 16-bit floats, complex64 and the storage-only types keeps the bytes") {
  check_tensor<std::uint16_t>(run1<ops::bit_cast>(bitcast_node(element_type::uint16), {{make_f<float16>({2}, {1.0f, -2.0f})}}), {2},
                              {0x3C00, 0xC000});
  const tensor b = run1<ops::bit_cast>(bitcast_node(element_type::bfloat16), {{make<std::uint16_t>({1}, {0x3F80})}});
  CHECK(static_cast<float>(b.typed<bfloat16>()[0]) == 1.0f);
  check_tensor<std::uint64_t>(run1<ops::bit_cast>(bitcast_node(element_type::uint64), {{make<std::complex<float>>({1}, {{1.0f, 0.0f}})}}),
                              {1}, {1065353216});
  const tensor f8 = run1<ops::bit_cast>(bitcast_node(element_type::float8e5m2), {{make<u8>({3}, {0x3C, 0x80, 0xFF})}});
  CHECK(f8.type() == element_type::float8e5m2);
  CHECK(bytes_of(f8) == std::vector<u8>{0x3C, 0x80, 0xFF});
  check_tensor<std::int8_t>(run1<ops::bit_cast>(bitcast_node(element_type::int8), {{make_bytes(element_type::float8e4m3fn, {2}, {0x38, 0xB8})}}),
                            {2}, {0x38, static_cast<std::int8_t>(0xB8)});
  // Packed: three int4 in two bytes stay three uint4 in the same two bytes.
  const tensor u4 = run1<ops::bit_cast>(bitcast_node(element_type::uint4), {{make_bytes(element_type::int4, {3}, {0x9F, 0x07})}});
  CHECK(u4.type() == element_type::uint4);
  CHECK(dims_of(u4) == ints{3});
  CHECK(bytes_of(u4) == std::vector<u8>{0x9F, 0x07});
  const tensor i2 = run1<ops::bit_cast>(bitcast_node(element_type::int2), {{make_bytes(element_type::uint2, {5}, {0xE4, 0x03})}});
  CHECK(i2.type() == element_type::int2);
  CHECK(bytes_of(i2) == std::vector<u8>{0xE4, 0x03});
}

TEST_CASE("BitCast errors: to missing, a string or unknown type, a different bit width") {
  const tensor x = make<float>({2}, {1, 2});
  check_fails<ops::bit_cast>(op("BitCast", 26), {{x}}, "attribute to");
  check_fails<ops::bit_cast>(bitcast_node(element_type::string), {{x}}, "to (8) is not a non-string");
  check_fails<ops::bit_cast>(op("BitCast", 26).set("to", i64{99}), {{x}}, "to (99)");
  check_fails<ops::bit_cast>(op("BitCast", 26).set("to", i64{0}), {{x}}, "to (0)");
  check_fails<ops::bit_cast>(bitcast_node(element_type::int64), {{x}}, "must have the bit width of the input (float, 32 bits)");
  check_fails<ops::bit_cast>(bitcast_node(element_type::uint8), {{make_bytes(element_type::int4, {2}, {0x21})}}, "bit width");
  CHECK(run_kernel<ops::bit_cast>(bitcast_node(element_type::int32), {{make<std::string>({1}, {"a"})}}).code() == errc::not_implemented);
}
