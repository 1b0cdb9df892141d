// Tests of the CPU FlexAttention kernel (flex_attention.cpp): a naive reference (plain loops in double) on seeded
// random inputs over shapes, grouped-query heads, scales, types and threads; the score_mod and prob_mod subgraphs,
// run by a small interpreter of the test (the kernels of their nodes, one after another) standing in for the
// session's executor; two backend cases as literals; errors.
#include "misc_support.hpp"

#include <functional>
#include <optional>
#include <unordered_map>

using namespace epstack;
using namespace epstack::test;
using namespace epstack::test::misc;

namespace {

const double inf = std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------------------------------------------------------
// Subgraphs: an executor for the test, and the modifiers

/// Runs node `kn` with the first of `Ks` whose op type matches; nullopt when none does.
template <class... Ks>
std::optional<Result<std::vector<ivalue>>> run_one_of(const kernel_node& kn, const std::vector<kernel_input>& in) {
  std::optional<Result<std::vector<ivalue>>> r;
  ((r.has_value() || Ks::op_type != kn.op_type ? void() : void(r.emplace(run_kernel<Ks>(kn, in)))), ...);
  return r;
}

/// The executor's side of a compute call, for a kernel run outside a session: runs a subgraph by running the CPU
/// kernels of its nodes in order (they are given in topological order), and records what it was given.
struct test_frame final : execution_frame {
  int runs = 0;
  std::vector<element_type> seen_types;
  std::vector<ints> seen_dims;

  tensor allocate(element_type type, std::span<const std::int64_t> sizes, bool) override {
    return tensor::uninitialized(type, sizes);
  }
  Status run_subgraph(const graph& body, std::span<const ivalue> inputs, std::vector<ivalue>& outputs) override {
    ++runs;
    std::unordered_map<std::string, tensor> env;
    std::size_t k = 0;
    for (value_id v : body.inputs()) {
      if (body.value(v).initializer) continue;
      if (k >= inputs.size()) return Status(errc::invalid_argument, "test_frame: too few subgraph inputs");
      const tensor& t = inputs[k++].as_tensor();
      seen_types.push_back(t.type());
      seen_dims.push_back(dims_of(t));
      env[body.value(v).name] = t;
    }
    for (value_id v : body.initializers()) env[body.value(v).name] = *body.value(v).initializer;
    for (node_id n = 0; n < body.node_count(); ++n) {
      const node& nd = body.node(n);
      kernel_node kn(nd.op_type, nd.since_version, nd.domain);
      kn.attributes = nd.attributes;
      kn.outputs = nd.outputs.size();
      std::vector<kernel_input> in;
      for (value_id v : nd.inputs) in.push_back({v == no_id ? tensor() : env.at(body.value(v).name)});
      auto r = run_one_of<ops::add, ops::sub, ops::mul, ops::div, ops::tanh, ops::where, ops::shape, ops::gather,
                          ops::range, ops::reshape, ops::greater_or_equal, ops::identity, ops::cast>(kn, in);
      if (!r) return Status(errc::not_implemented, "test_frame: no kernel for " + nd.op_type);
      if (!r->has_value()) return r->status();
      for (std::size_t i = 0; i < nd.outputs.size(); ++i)
        if (nd.outputs[i] != no_id) env[body.value(nd.outputs[i]).name] = (**r)[i].as_tensor();
    }
    outputs.clear();
    for (value_id v : body.outputs()) outputs.emplace_back(env.at(body.value(v).name));
    return {};
  }
};

node sg_node(std::string name, std::string type, attribute_list attrs = {}) {
  node n;
  n.name = std::move(name);
  n.op_type = std::move(type);
  n.since_version = 13;
  n.attributes = std::move(attrs);
  return n;
}
/// A scalar tensor of element type t holding v.
tensor scalar_of(element_type t, double v) {
  if (t == element_type::float64) return tensor::scalar<double>(v);
  if (t == element_type::float16) return tensor::scalar<float16>(float16(static_cast<float>(v)));
  if (t == element_type::bfloat16) return tensor::scalar<bfloat16>(bfloat16(static_cast<float>(v)));
  return tensor::scalar<float>(static_cast<float>(v));
}
/// A modifier graph with input "x" of element type t (rank unknown) and output "y".
graph modifier(const std::string& name, element_type t) {
  graph g(name);
  g.add_input("x", type_info::tensor_of(t));
  return g;
}
/// x + c (the backend's score_mod_bias).
graph add_mod(element_type t, double c) {
  graph g = modifier("add", t);
  g.add_initializer("c", scalar_of(t, c));
  g.add_node(sg_node("add", "Add"), {"x", "c"}, {"y"});
  g.add_output("y");
  return g;
}
/// x * c (the backend's prob_mod_scale).
graph mul_mod(element_type t, double c) {
  graph g = modifier("mul", t);
  g.add_initializer("c", scalar_of(t, c));
  g.add_node(sg_node("mul", "Mul"), {"x", "c"}, {"y"});
  g.add_output("y");
  return g;
}
/// cap * tanh(x / cap) (Gemma-2's soft cap).
graph softcap_mod(element_type t, double cap) {
  graph g = modifier("softcap", t);
  g.add_initializer("cap", scalar_of(t, cap));
  g.add_node(sg_node("div", "Div"), {"x", "cap"}, {"scaled"});
  g.add_node(sg_node("tanh", "Tanh"), {"scaled"}, {"th"});
  g.add_node(sg_node("mul", "Mul"), {"th", "cap"}, {"y"});
  g.add_output("y");
  return g;
}
/// x where query index >= key index, else -inf: the causal mask, from the shape of x.
graph causal_mod(element_type t) {
  graph g = modifier("causal", t);
  g.add_initializer("zero", tensor::scalar<i64>(0));
  g.add_initializer("one", tensor::scalar<i64>(1));
  g.add_initializer("i2", tensor::scalar<i64>(2));
  g.add_initializer("i3", tensor::scalar<i64>(3));
  g.add_initializer("q_shape", tensor::from<i64>({4}, {1, 1, -1, 1}));
  g.add_initializer("k_shape", tensor::from<i64>({4}, {1, 1, 1, -1}));
  g.add_initializer("neg_inf", scalar_of(t, -inf));
  g.add_node(sg_node("shape", "Shape"), {"x"}, {"xs"});
  g.add_node(sg_node("lq", "Gather"), {"xs", "i2"}, {"L"});
  g.add_node(sg_node("ls", "Gather"), {"xs", "i3"}, {"S"});
  g.add_node(sg_node("rq", "Range"), {"zero", "L", "one"}, {"qr"});
  g.add_node(sg_node("rk", "Range"), {"zero", "S", "one"}, {"kr"});
  g.add_node(sg_node("q4", "Reshape"), {"qr", "q_shape"}, {"qi"});
  g.add_node(sg_node("k4", "Reshape"), {"kr", "k_shape"}, {"ki"});
  g.add_node(sg_node("ge", "GreaterOrEqual"), {"qi", "ki"}, {"mask"});
  g.add_node(sg_node("where", "Where"), {"mask", "x", "neg_inf"}, {"y"});
  g.add_output("y");
  return g;
}
graph identity_mod(element_type t) {
  graph g = modifier("identity", t);
  g.add_node(sg_node("id", "Identity"), {"x"}, {"y"});
  g.add_output("y");
  return g;
}

kernel_node flex_node() { return kernel_node("FlexAttention", 1, "ai.onnx.preview"); }

/// Runs FlexAttention with `frame` as the executor (null: none, as outside a session).
Result<std::vector<ivalue>> run_flex(const kernel_node& kn, const std::vector<kernel_input>& inputs,
                                     execution_frame* frame, thread_pool* pool = nullptr) {
  const graph g = make_kernel_graph(kn, inputs);
  if (!ops::flex_attention::supports(g, 0)) return Status(errc::not_implemented, "the kernel does not support this node");
  EPSTACK_ASSIGN_OR_RETURN(auto fn, ops::flex_attention::compile(g, 0));
  std::vector<ivalue> ins;
  for (const auto& i : inputs) ins.push_back(i.value.empty() ? ivalue() : ivalue(i.value));
  std::vector<ivalue> outs(kn.outputs);
  compute_context ctx(ins, outs, frame, pool);
  EPSTACK_RETURN_IF_ERROR(fn(ctx));
  return outs;
}
tensor run_flex1(const kernel_node& kn, const std::vector<kernel_input>& inputs, execution_frame* frame,
                 thread_pool* pool = nullptr) {
  auto r = run_flex(kn, inputs, frame, pool);
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  REQUIRE(r->size() == 1);
  return (*r)[0].as_tensor();
}

// ---------------------------------------------------------------------------------------------------------------
// The naive reference

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
template <class T>
std::vector<double> doubles(const tensor& t) {
  std::vector<double> r(t.element_count());
  const T* p = t.typed<T>();
  for (std::size_t i = 0; i < r.size(); ++i) {
    if constexpr (std::is_same_v<T, double>) r[i] = p[i];
    else r[i] = static_cast<double>(static_cast<float>(p[i]));
  }
  return r;
}
/// The values as T holds them.
template <class T>
std::vector<double> rounded(std::vector<double> v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
    for (auto& x : v) x = static_cast<double>(static_cast<float>(T(static_cast<float>(x))));
  else if constexpr (std::is_same_v<T, float>)
    for (auto& x : v) x = static_cast<double>(static_cast<float>(x));
  return v;
}
std::vector<double> randoms(lcg& g, std::size_t n, double scale) {
  std::vector<double> v(n);
  for (auto& x : v) x = g.uniform() * scale;
  return v;
}

i64 product(const ints& d) {
  i64 p = 1;
  for (i64 x : d) p *= x;
  return p;
}

/// f(b, h, l, s, x): a modifier applied element by element.
using mod_fn = std::function<double(i64, i64, i64, i64, double)>;

struct flex_case {
  i64 B = 1, Hq = 1, Hk = 1, L = 1, S = 1, E = 8, Ev = 8;
  std::optional<float> scale;
  [[nodiscard]] ints q_dims() const { return {B, Hq, L, E}; }
  [[nodiscard]] ints k_dims() const { return {B, Hk, S, E}; }
  [[nodiscard]] ints v_dims() const { return {B, Hk, S, Ev}; }
  [[nodiscard]] ints y_dims() const { return {B, Hq, L, Ev}; }
  [[nodiscard]] std::string text() const {
    return "B=" + std::to_string(B) + " Hq=" + std::to_string(Hq) + " Hk=" + std::to_string(Hk) + " L=" +
           std::to_string(L) + " S=" + std::to_string(S) + " E=" + std::to_string(E) + " Ev=" + std::to_string(Ev);
  }
};

std::vector<double> reference(const flex_case& c, const std::vector<double>& q, const std::vector<double>& k,
                              const std::vector<double>& v, const mod_fn& score_mod = {}, const mod_fn& prob_mod = {}) {
  const i64 reps = c.Hq / c.Hk;
  const double scale = c.scale ? static_cast<double>(*c.scale) : 1.0 / std::sqrt(static_cast<double>(c.E));
  std::vector<double> y(static_cast<std::size_t>(c.B * c.Hq * c.L * c.Ev), 0.0), p(static_cast<std::size_t>(c.S));
  const auto at = [](const std::vector<double>& x, i64 i) { return x[static_cast<std::size_t>(i)]; };
  for (i64 b = 0; b < c.B; ++b)
    for (i64 h = 0; h < c.Hq; ++h)
      for (i64 l = 0; l < c.L; ++l) {
        const i64 g = h / reps;
        double m = -inf;
        for (i64 s = 0; s < c.S; ++s) {
          double acc = 0;
          for (i64 e = 0; e < c.E; ++e)
            acc += at(q, ((b * c.Hq + h) * c.L + l) * c.E + e) * at(k, ((b * c.Hk + g) * c.S + s) * c.E + e);
          double x = acc * scale;
          if (score_mod) x = score_mod(b, h, l, s, x);
          p[static_cast<std::size_t>(s)] = x;
          m = std::max(m, x);
        }
        double sum = 0;
        for (auto& x : p) sum += (x = m == -inf ? std::numeric_limits<double>::quiet_NaN() : std::exp(x - m));
        for (i64 s = 0; s < c.S; ++s) {
          double w = p[static_cast<std::size_t>(s)] / sum;
          if (prob_mod) w = prob_mod(b, h, l, s, w);
          for (i64 e = 0; e < c.Ev; ++e)
            y[static_cast<std::size_t>(((b * c.Hq + h) * c.L + l) * c.Ev + e)] += w * at(v, ((b * c.Hk + g) * c.S + s) * c.Ev + e);
        }
      }
  return y;
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

/// Runs case `c` on random inputs of T (seeded), with the given node and frame, against the reference.
template <class T>
void check_case(const flex_case& c, std::uint64_t seed, double tol, kernel_node kn = flex_node(), test_frame* frame = nullptr,
                const mod_fn& score_mod = {}, const mod_fn& prob_mod = {}, thread_pool* pool = nullptr) {
  CAPTURE(c.text());
  lcg g(seed);
  const auto q = rounded<T>(randoms(g, static_cast<std::size_t>(product(c.q_dims())), 1.5));
  const auto k = rounded<T>(randoms(g, static_cast<std::size_t>(product(c.k_dims())), 1.5));
  const auto v = rounded<T>(randoms(g, static_cast<std::size_t>(product(c.v_dims())), 1.0));
  if (c.scale) kn.set("scale", *c.scale);
  const tensor y = run_flex1(kn, {{make_from<T>(c.q_dims(), q)}, {make_from<T>(c.k_dims(), k)}, {make_from<T>(c.v_dims(), v)}},
                             frame, pool);
  check_close<T>(y, c.y_dims(), reference(c, q, k, v, score_mod, prob_mod), tol);
}

/// The shapes every type runs: the backend's, different head sizes, grouped-query heads, decoding, blocks, S > 512.
std::vector<flex_case> shapes() {
  std::vector<flex_case> r;
  r.push_back({2, 4, 4, 8, 6, 16, 16, {}});    // test_flexattention
  r.push_back({2, 4, 4, 8, 6, 16, 32, {}});    // test_flexattention_diff_head_sizes
  r.push_back({2, 4, 4, 8, 6, 16, 16, 0.1f});  // test_flexattention_scaled
  r.push_back({2, 8, 2, 4, 6, 16, 16, {}});    // test_flexattention_gqa
  r.push_back({1, 4, 1, 1, 37, 24, 20, {}});   // one query row, multi-query: the unpacked path
  r.push_back({2, 3, 3, 1, 5, 8, 3, {}});      // decoding, a row per head
  r.push_back({1, 6, 2, 70, 150, 64, 40, {}}); // row blocks of 192 and 18 rows
  r.push_back({1, 2, 1, 20, 600, 8, 12, {}});  // keys packed in two chunks
  r.push_back({3, 2, 1, 13, 1, 5, 7, 0.5f});   // one key
  return r;
}

/// The inputs of backend tests test_flexattention_score_mod and test_flexattention_prob_mod (float [1, 2, 3, 4]).
const std::vector<float> backend_q = {
    0.548813522f, 0.715189338f, 0.602763355f, 0.544883192f, 0.423654795f, 0.64589411f,  0.437587202f, 0.891772985f,
    0.963662744f, 0.383441508f, 0.791725039f, 0.528894901f, 0.568044543f, 0.925596654f, 0.0710360557f, 0.0871293023f,
    0.0202183966f, 0.832619846f, 0.778156757f, 0.870012164f, 0.978618324f, 0.799158573f, 0.461479366f, 0.780529201f};
const std::vector<float> backend_k = {
    0.118274428f, 0.63992101f,  0.143353283f, 0.944668889f, 0.521848321f, 0.414661944f, 0.264555603f, 0.774233699f,
    0.456150323f, 0.56843394f,  0.0187897999f, 0.617635489f, 0.612095714f, 0.616934001f, 0.943748057f, 0.681820273f,
    0.359507889f, 0.437031955f, 0.69763118f,  0.0602254719f, 0.666766703f, 0.670637846f, 0.210382566f, 0.128926292f};
const std::vector<float> backend_v = {
    0.315428346f, 0.363710761f, 0.570196748f, 0.438601524f, 0.988373816f, 0.102044813f, 0.208876759f, 0.16130951f,
    0.653108299f, 0.253291607f, 0.466310769f, 0.244425595f, 0.158969581f, 0.110375144f, 0.656329572f, 0.138182953f,
    0.196582362f, 0.368725181f, 0.820993245f, 0.0971012786f, 0.837944925f, 0.0960984081f, 0.976459444f, 0.468651205f};
std::vector<kernel_input> backend_inputs() {
  return {{make<float>({1, 2, 3, 4}, backend_q)}, {make<float>({1, 2, 3, 4}, backend_k)}, {make<float>({1, 2, 3, 4}, backend_v)}};
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Without modifiers

TEST_CASE("FlexAttention: one query, two keys (hand-computed softmax weights 1/4 and 3/4)") {
  // Scores 0 and ln 3 (scale 1): weights 1/4, 3/4.
  const float ln3 = static_cast<float>(std::log(3.0));
  const tensor q = make<float>({1, 1, 1, 1}, {1});
  const tensor k = make<float>({1, 1, 2, 1}, {0, ln3});
  const tensor v = make<float>({1, 1, 2, 2}, {4, 8, 0, 4});
  const tensor y = run1<ops::flex_attention>(flex_node().set("scale", 1.0f), {{q}, {k}, {v}});
  check_tensor<float>(y, {1, 1, 1, 2}, {1, 5}, 1e-6, 1e-6);
}

TEST_CASE("FlexAttention float matches the reference over shapes, GQA, scales, decoding and blocks") {
  std::uint64_t seed = 1;
  for (const auto& c : shapes()) check_case<float>(c, seed++, 2e-5);
}

TEST_CASE("FlexAttention double matches the reference tightly") {
  std::uint64_t seed = 11;
  for (const auto& c : shapes()) check_case<double>(c, seed++, 1e-11);
}

TEST_CASE("FlexAttention float16 and bfloat16 compute in float (reference on the rounded inputs)") {
  std::uint64_t seed = 21;
  for (const auto& c : shapes()) {
    check_case<float16>(c, seed, 2e-3);
    check_case<bfloat16>(c, seed++, 2e-2);
  }
}

TEST_CASE("FlexAttention on a pool of 2 threads gives the reference's values") {
  thread_pool pool(2);
  std::uint64_t seed = 31;
  for (const auto& c : shapes()) {
    check_case<float>(c, seed, 2e-5, flex_node(), nullptr, {}, {}, &pool);
    check_case<float16>(c, seed++, 2e-3, flex_node(), nullptr, {}, {}, &pool);
  }
  check_case<double>({2, 8, 4, 33, 70, 16, 24, {}}, 41, 1e-11, flex_node(), nullptr, {}, {}, &pool);
}

TEST_CASE("FlexAttention: softmax_precision double for float inputs, and float16 (rounded scores and weights)") {
  check_case<float>({2, 4, 2, 9, 21, 16, 8, {}}, 51, 2e-5, flex_node().set("softmax_precision", i64{11}));
  check_case<float>({2, 4, 2, 9, 21, 16, 8, {}}, 52, 5e-3, flex_node().set("softmax_precision", i64{10}));
  check_case<float>({2, 4, 2, 9, 21, 16, 8, {}}, 53, 3e-2, flex_node().set("softmax_precision", i64{16}));
}

TEST_CASE("FlexAttention: no keys gives zeros, no queries an empty output") {
  const tensor y = run1<ops::flex_attention>(
      flex_node(), {{make<float>({1, 2, 2, 3}, std::vector<float>(12, 1.0f))}, {tensor(element_type::float32, {1, 1, 0, 3})},
                    {tensor(element_type::float32, {1, 1, 0, 2})}});
  check_tensor<float>(y, {1, 2, 2, 2}, std::vector<float>(8, 0.0f));
  const tensor e = run1<ops::flex_attention>(
      flex_node(), {{tensor(element_type::float32, {1, 2, 0, 3})}, {make<float>({1, 1, 2, 3}, std::vector<float>(6, 1.0f))},
                    {make<float>({1, 1, 2, 4}, std::vector<float>(8, 1.0f))}});
  check_tensor<float>(e, {1, 2, 0, 4}, {});
}

// ---------------------------------------------------------------------------------------------------------------
// score_mod and prob_mod

TEST_CASE("FlexAttention score_mod adds a bias (backend test_flexattention_score_mod)") {
  test_frame frame;
  const tensor y = run_flex1(flex_node().set("score_mod", make_subgraph(add_mod(element_type::float32, 0.5))),
                             backend_inputs(), &frame);
  check_tensor<float>(y, {1, 2, 3, 4},
                      {0.654612422f, 0.238465056f, 0.412703723f, 0.281336159f, 0.6480124f,   0.240866259f,
                       0.415635198f, 0.284490943f, 0.669923306f, 0.232524902f, 0.404532135f, 0.274992287f,
                       0.408728331f, 0.181146041f, 0.817192078f, 0.242322162f, 0.352494419f, 0.180331245f,
                       0.789545953f, 0.21540992f,  0.377482295f, 0.173769549f, 0.797904968f, 0.228955284f},
                      1e-5, 1e-5);
  // The subgraph ran once, on the whole score tensor [B, Hq, L, S] of float.
  CHECK(frame.runs == 1);
  REQUIRE(frame.seen_dims.size() == 1);
  CHECK(frame.seen_dims[0] == ints{1, 2, 3, 3});
  CHECK(frame.seen_types[0] == element_type::float32);
}

TEST_CASE("FlexAttention prob_mod scales the weights (backend test_flexattention_prob_mod)") {
  test_frame frame;
  const tensor y = run_flex1(flex_node().set("prob_mod", make_subgraph(mul_mod(element_type::float32, 0.5))),
                             backend_inputs(), &frame);
  check_tensor<float>(y, {1, 2, 3, 4},
                      {0.327306211f, 0.119232528f, 0.206351861f, 0.140668079f, 0.3240062f,   0.120433129f,
                       0.207817599f, 0.142245471f, 0.334961653f, 0.116262451f, 0.202266067f, 0.137496144f,
                       0.204364166f, 0.0905730203f, 0.408596039f, 0.121161081f, 0.176247209f, 0.0901656225f,
                       0.394772977f, 0.10770496f,  0.188741148f, 0.0868847743f, 0.398952484f, 0.114477642f},
                      1e-5, 1e-5);
  CHECK(frame.runs == 1);
}

TEST_CASE("FlexAttention score_mod: causal mask, soft cap, and both modifiers together, against the reference") {
  const mod_fn causal = [](i64, i64, i64 l, i64 s, double x) { return l >= s ? x : -inf; };
  const mod_fn cap = [](i64, i64, i64, i64, double x) { return 20.0 * std::tanh(x / 20.0); };
  const mod_fn half = [](i64, i64, i64, i64, double x) { return 0.5 * x; };
  std::uint64_t seed = 61;
  for (const flex_case& c : {flex_case{1, 2, 2, 4, 4, 8, 8, {}}, flex_case{2, 8, 2, 30, 30, 16, 12, {}},
                             flex_case{1, 6, 2, 70, 150, 64, 40, 3.0f}, flex_case{2, 4, 1, 1, 9, 8, 8, {}}}) {
    test_frame f1, f2, f3;
    check_case<float>(c, seed, 2e-5, flex_node().set("score_mod", make_subgraph(causal_mod(element_type::float32))), &f1,
                      causal);
    check_case<float>(c, seed, 2e-5, flex_node().set("score_mod", make_subgraph(softcap_mod(element_type::float32, 20.0))),
                      &f2, cap);
    check_case<float>(c, seed++, 2e-5,
                      flex_node()
                          .set("score_mod", make_subgraph(causal_mod(element_type::float32)))
                          .set("prob_mod", make_subgraph(mul_mod(element_type::float32, 0.5))),
                      &f3, causal, half);
    CHECK(f1.runs == 1);
    CHECK(f3.runs == 2);
  }
}

TEST_CASE("FlexAttention modifiers on a pool of 2 threads, and for double (the subgraph sees double)") {
  thread_pool pool(2);
  const mod_fn causal = [](i64, i64, i64 l, i64 s, double x) { return l >= s ? x : -inf; };
  const flex_case c{2, 8, 2, 40, 64, 32, 16, {}};
  test_frame f1, f2;
  check_case<float>(c, 71, 2e-5, flex_node().set("score_mod", make_subgraph(causal_mod(element_type::float32))), &f1,
                    causal, {}, &pool);
  check_case<double>(c, 72, 1e-11, flex_node().set("score_mod", make_subgraph(causal_mod(element_type::float64))), &f2,
                     causal, {}, &pool);
  REQUIRE(f2.seen_types.size() == 1);
  CHECK(f2.seen_types[0] == element_type::float64);
}

TEST_CASE("FlexAttention float16 inputs hand the modifiers float scores, softmax_precision float16 gives float16") {
  const mod_fn bias = [](i64, i64, i64, i64, double x) { return x + 0.25; };
  const flex_case c{2, 4, 2, 9, 21, 16, 8, {}};
  test_frame f1;
  check_case<float16>(c, 81, 2e-3, flex_node().set("score_mod", make_subgraph(add_mod(element_type::float32, 0.25))), &f1,
                      bias);
  REQUIRE(f1.seen_types.size() == 1);
  CHECK(f1.seen_types[0] == element_type::float32);
  test_frame f2;
  check_case<float16>(c, 82, 5e-3,
                      flex_node()
                          .set("softmax_precision", i64{10})
                          .set("score_mod", make_subgraph(identity_mod(element_type::float16)))
                          .set("prob_mod", make_subgraph(identity_mod(element_type::float16))),
                      &f2);
  CHECK(f2.seen_types == std::vector<element_type>{element_type::float16, element_type::float16});
  test_frame f3;
  check_case<bfloat16>(c, 83, 3e-2,
                       flex_node().set("softmax_precision", i64{16}).set("prob_mod", make_subgraph(identity_mod(element_type::bfloat16))),
                       &f3);
  CHECK(f3.seen_types == std::vector<element_type>{element_type::bfloat16});
  test_frame f4;
  check_case<float>(c, 84, 2e-5,
                    flex_node().set("softmax_precision", i64{11}).set("score_mod", make_subgraph(identity_mod(element_type::float64))),
                    &f4);
  CHECK(f4.seen_types == std::vector<element_type>{element_type::float64});
}

TEST_CASE("FlexAttention: a score_mod that masks every key gives NaN (as Softmax of -inf does)") {
  test_frame frame;
  const tensor y = run_flex1(flex_node().set("score_mod", make_subgraph(add_mod(element_type::float32, -inf))),
                             backend_inputs(), &frame);
  REQUIRE(y.element_count() == 24);
  for (std::size_t i = 0; i < 24; ++i) CHECK(std::isnan(y.typed<float>()[i]));
}

// ---------------------------------------------------------------------------------------------------------------
// Errors

TEST_CASE("FlexAttention errors: shapes that do not fit, and types and ranks it does not take") {
  const auto f = [](const ints& d) { return tensor(element_type::float32, std::span<const std::int64_t>(d)); };
  check_fails<ops::flex_attention>(flex_node(), {{f({1, 3, 2, 4})}, {f({1, 2, 2, 4})}, {f({1, 2, 2, 4})}}, "multiple");
  check_fails<ops::flex_attention>(flex_node(), {{f({1, 2, 2, 4})}, {f({1, 2, 2, 5})}, {f({1, 2, 2, 4})}}, "head size of K");
  check_fails<ops::flex_attention>(flex_node(), {{f({1, 2, 2, 4})}, {f({1, 2, 3, 4})}, {f({1, 2, 2, 4})}}, "sequence lengths");
  check_fails<ops::flex_attention>(flex_node(), {{f({2, 2, 2, 4})}, {f({1, 2, 2, 4})}, {f({1, 2, 2, 4})}}, "batch sizes");
  check_fails<ops::flex_attention>(flex_node(), {{f({1, 2, 2, 4})}, {f({1, 2, 2, 4})}, {f({1, 1, 2, 4})}}, "heads");
  check_fails<ops::flex_attention>(flex_node().set("softmax_precision", i64{7}),
                                   {{f({1, 1, 1, 4})}, {f({1, 1, 2, 4})}, {f({1, 1, 2, 4})}}, "softmax_precision");
  // Not taken: a rank other than 4, K of another type, integers.
  const auto r3 = run_kernel<ops::flex_attention>(flex_node(), {{f({1, 2, 4})}, {f({1, 2, 4})}, {f({1, 2, 4})}});
  CHECK(r3.code() == errc::not_implemented);
  const auto mixed = run_kernel<ops::flex_attention>(
      flex_node(), {{f({1, 1, 2, 4})}, {tensor(element_type::float64, {1, 1, 2, 4})}, {f({1, 1, 2, 4})}});
  CHECK(mixed.code() == errc::not_implemented);
  const auto ints_in = run_kernel<ops::flex_attention>(
      flex_node(), {{tensor(element_type::int32, {1, 1, 2, 4})}, {tensor(element_type::int32, {1, 1, 2, 4})},
                    {tensor(element_type::int32, {1, 1, 2, 4})}});
  CHECK(ints_in.code() == errc::not_implemented);
}

TEST_CASE("FlexAttention errors: modifier subgraphs of the wrong signature, or returning the wrong tensor") {
  // Two inputs, two outputs, a declared input type other than softmax_precision's: refused at compile time.
  graph two_in = modifier("two_in", element_type::float32);
  two_in.add_input("x2", type_info::tensor_of(element_type::float32));
  two_in.add_node(sg_node("add", "Add"), {"x", "x2"}, {"y"});
  two_in.add_output("y");
  check_fails<ops::flex_attention>(flex_node().set("score_mod", make_subgraph(std::move(two_in))), backend_inputs(),
                                   "exactly one input");
  graph two_out = identity_mod(element_type::float32);
  two_out.add_output("x");
  check_fails<ops::flex_attention>(flex_node().set("prob_mod", make_subgraph(std::move(two_out))), backend_inputs(),
                                   "exactly one output");
  check_fails<ops::flex_attention>(flex_node().set("score_mod", make_subgraph(identity_mod(element_type::float16))),
                                   backend_inputs(), "softmax_precision");
  // At run time: a tensor of another shape, or of another element type.
  graph slice = modifier("slice", element_type::float32);
  slice.add_initializer("i0", tensor::scalar<i64>(0));
  slice.add_node(sg_node("gather", "Gather"), {"x", "i0"}, {"y"});
  slice.add_output("y");
  test_frame frame;
  auto r = run_flex(flex_node().set("score_mod", make_subgraph(std::move(slice))), backend_inputs(), &frame);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.code() == errc::invalid_argument);
  CHECK_MESSAGE(r.status().message().find("score_mod returned shape") != std::string::npos, r.status().message());
  graph shape_of = modifier("shape_of", element_type::float32);
  shape_of.add_node(sg_node("shape", "Shape"), {"x"}, {"y"});
  shape_of.add_output("y");
  r = run_flex(flex_node().set("prob_mod", make_subgraph(std::move(shape_of))), backend_inputs(), &frame);
  REQUIRE_FALSE(r.has_value());
  CHECK_MESSAGE(r.status().message().find("prob_mod returned element type") != std::string::npos, r.status().message());
  // Outside a session there is no executor to run the subgraph.
  r = run_flex(flex_node().set("score_mod", make_subgraph(add_mod(element_type::float32, 0.5))), backend_inputs(), nullptr);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.code() == errc::not_implemented);
  // A failure inside the subgraph reaches the caller, naming the modifier.
  graph failing = modifier("failing", element_type::float32);
  failing.add_node(sg_node("erf", "Erf"), {"x"}, {"y"});
  failing.add_output("y");
  r = run_flex(flex_node().set("score_mod", make_subgraph(std::move(failing))), backend_inputs(), &frame);
  REQUIRE_FALSE(r.has_value());
  CHECK_MESSAGE(r.status().to_string().find("score_mod") != std::string::npos, r.status().to_string());
}
