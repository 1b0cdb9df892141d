// Recurrent kernels: RNN, GRU and LSTM (opsets 7 and 14: forward, reverse and bidirectional; sequence lengths;
// initial states; LSTM peepholes and input_forget; GRU's linear_before_reset; clip; layout 0 or 1; every activation
// function the schemas name). Float and double; gate products by plain loops (recurrences are small in practice).
#include "kernel_util.hpp"

#include <functional>

namespace epstack::cpu {
namespace impl {
namespace {

enum class cell { rnn, gru, lstm };

using act_fn = std::function<double(double)>;

Result<act_fn> activation(const std::string& name, double alpha, double beta) {
  if (name == "Relu") return act_fn([](double x) { return std::max(x, 0.0); });
  if (name == "Tanh") return act_fn([](double x) { return std::tanh(x); });
  if (name == "Sigmoid") return act_fn([](double x) { return 1.0 / (1.0 + std::exp(-x)); });
  if (name == "Affine") return act_fn([=](double x) { return alpha * x + beta; });
  if (name == "LeakyRelu") return act_fn([=](double x) { return x >= 0 ? x : alpha * x; });
  if (name == "ThresholdedRelu") return act_fn([=](double x) { return x > alpha ? x : 0.0; });
  if (name == "ScaledTanh") return act_fn([=](double x) { return alpha * std::tanh(beta * x); });
  if (name == "HardSigmoid") return act_fn([=](double x) { return std::max(0.0, std::min(1.0, alpha * x + beta)); });
  if (name == "Elu") return act_fn([=](double x) { return x >= 0 ? x : alpha * (std::exp(x) - 1); });
  if (name == "Softsign") return act_fn([](double x) { return x / (1 + std::fabs(x)); });
  if (name == "Softplus") return act_fn([](double x) { return std::log1p(std::exp(x)); });
  return Status(errc::invalid_graph, cat("unknown activation function '", name, "'"));
}

struct rnn_params {
  cell kind;
  std::int64_t hidden = 0, layout = 0;
  int dirs = 1;
  bool reverse_only = false, linear_before_reset = false, input_forget = false;
  float clip = 0;
  std::vector<act_fn> acts;  ///< per direction: f (and g, h)
};

Status bad_rnn(std::string_view what) { return Status(errc::invalid_argument, cat("recurrent cell: ", what)); }

template <class T>
Status rnn_run(compute_context& ctx, const rnn_params& p) {
  const int G = p.kind == cell::rnn ? 1 : p.kind == cell::gru ? 3 : 4;
  const tensor& X = ctx.input(0);
  const tensor& W = ctx.input(1);
  const tensor& R = ctx.input(2);
  if (X.rank() != 3 || W.rank() != 3 || R.rank() != 3) return bad_rnn("X, W and R must be 3-D");
  const std::int64_t S = p.layout == 0 ? X.sizes()[0] : X.sizes()[1], B = p.layout == 0 ? X.sizes()[1] : X.sizes()[0];
  const std::int64_t I = X.sizes()[2], H = p.hidden, D = p.dirs;
  if (W.sizes()[0] != D || W.sizes()[1] != G * H || W.sizes()[2] != I) return bad_rnn("W's shape does not match");
  if (R.sizes()[0] != D || R.sizes()[1] != G * H || R.sizes()[2] != H) return bad_rnn("R's shape does not match");
  const T* x = X.typed<T>();
  const T* w = W.typed<T>();
  const T* r = R.typed<T>();
  const T* bias = ctx.has_input(3) && !ctx.input(3).empty() ? ctx.input(3).typed<T>() : nullptr;
  if (bias && static_cast<std::int64_t>(ctx.input(3).element_count()) != D * 2 * G * H) return bad_rnn("B's shape does not match");
  std::vector<std::int64_t> lens(static_cast<std::size_t>(B), S);
  if (ctx.has_input(4) && !ctx.input(4).empty()) {
    lens = to_int64s(ctx.input(4));
    if (static_cast<std::int64_t>(lens.size()) != B) return bad_rnn("sequence_lens needs one length per batch entry");
    for (auto l : lens)
      if (l < 0 || l > S) return bad_rnn("a sequence length is out of range");
  }
  const T* h0 = ctx.has_input(5) && !ctx.input(5).empty() ? ctx.input(5).typed<T>() : nullptr;
  const T* c0 = p.kind == cell::lstm && ctx.has_input(6) && !ctx.input(6).empty() ? ctx.input(6).typed<T>() : nullptr;
  const T* peep = p.kind == cell::lstm && ctx.has_input(7) && !ctx.input(7).empty() ? ctx.input(7).typed<T>() : nullptr;
  // State index (direction d, batch b, unit j): layout 0 [D, B, H], layout 1 [B, D, H].
  const auto st = [&](std::int64_t d, std::int64_t b, std::int64_t j) { return p.layout == 0 ? (d * B + b) * H + j : (b * D + d) * H + j; };
  const auto xat = [&](std::int64_t t, std::int64_t b, std::int64_t k) { return p.layout == 0 ? (t * B + b) * I + k : (b * S + t) * I + k; };
  std::vector<std::int64_t> yshape = p.layout == 0 ? std::vector<std::int64_t>{S, D, B, H} : std::vector<std::int64_t>{B, S, D, H};
  std::vector<std::int64_t> hshape = p.layout == 0 ? std::vector<std::int64_t>{D, B, H} : std::vector<std::int64_t>{B, D, H};
  tensor* Y = ctx.output_count() > 0 ? &ctx.allocate_output(0, X.type(), yshape) : nullptr;
  const auto yat = [&](std::int64_t t, std::int64_t d, std::int64_t b, std::int64_t j) {
    return p.layout == 0 ? ((t * D + d) * B + b) * H + j : ((b * S + t) * D + d) * H + j;
  };
  if (Y) std::fill(Y->typed<T>(), Y->typed<T>() + Y->element_count(), T(0));
  std::vector<double> hs(static_cast<std::size_t>(D * B * H)), cs(hs.size());
  for (std::size_t i = 0; i < hs.size(); ++i) {
    hs[i] = h0 ? static_cast<double>(h0[i]) : 0.0;
    cs[i] = c0 ? static_cast<double>(c0[i]) : 0.0;
  }
  const auto clipped = [&](double v) { return p.clip > 0 ? std::min(std::max(v, -static_cast<double>(p.clip)), static_cast<double>(p.clip)) : v; };
  std::vector<double> gx(static_cast<std::size_t>(G * H)), gh(static_cast<std::size_t>(G * H)), hnew(static_cast<std::size_t>(H));
  std::vector<double> zbuf(static_cast<std::size_t>(H)), rbuf(static_cast<std::size_t>(H));
  const std::size_t per_dir = p.kind == cell::rnn ? 1 : p.kind == cell::gru ? 2 : 3;
  for (std::int64_t d = 0; d < D; ++d) {
    const bool rev = p.reverse_only || d == 1;
    const T* wd = w + d * G * H * I;
    const T* rd = r + d * G * H * H;
    const T* wb = bias ? bias + d * 2 * G * H : nullptr;
    const T* rb = bias ? wb + G * H : nullptr;
    const T* pd = peep ? peep + d * 3 * H : nullptr;
    const act_fn& f = p.acts[static_cast<std::size_t>(d) * per_dir];
    const act_fn& g = per_dir > 1 ? p.acts[static_cast<std::size_t>(d) * per_dir + 1] : f;
    const act_fn& hfn = per_dir > 2 ? p.acts[static_cast<std::size_t>(d) * per_dir + 2] : f;
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t len = lens[static_cast<std::size_t>(b)];
      for (std::int64_t step = 0; step < len; ++step) {
        const std::int64_t t = rev ? len - 1 - step : step;
        for (std::int64_t q = 0; q < G * H; ++q) {
          double ax = wb ? static_cast<double>(wb[q]) : 0.0, ah = rb ? static_cast<double>(rb[q]) : 0.0;
          for (std::int64_t k = 0; k < I; ++k) ax += static_cast<double>(x[xat(t, b, k)]) * static_cast<double>(wd[q * I + k]);
          for (std::int64_t k = 0; k < H; ++k) ah += hs[static_cast<std::size_t>(st(d, b, k))] * static_cast<double>(rd[q * H + k]);
          gx[static_cast<std::size_t>(q)] = ax;
          gh[static_cast<std::size_t>(q)] = ah;
        }
        const auto hprev = [&](std::int64_t j) { return hs[static_cast<std::size_t>(st(d, b, j))]; };
        if (p.kind == cell::rnn) {
          for (std::int64_t j = 0; j < H; ++j) hnew[static_cast<std::size_t>(j)] = f(clipped(gx[static_cast<std::size_t>(j)] + gh[static_cast<std::size_t>(j)]));
        } else if (p.kind == cell::gru) {  // gates z, r, h
          const auto Hs = static_cast<std::size_t>(H);
          std::vector<double>& z = zbuf;
          std::vector<double>& rg = rbuf;
          for (std::size_t j = 0; j < Hs; ++j) {
            z[j] = f(clipped(gx[j] + gh[j]));
            rg[j] = f(clipped(gx[Hs + j] + gh[Hs + j]));
          }
          for (std::int64_t j = 0; j < H; ++j) {
            const auto J = static_cast<std::size_t>(j);
            double pre = gx[2 * Hs + J];
            if (p.linear_before_reset) {
              pre += rg[J] * gh[2 * Hs + J];  // r ⊙ (H R_h^T + Rb_h)
            } else {  // (r ⊙ H) R_h^T + Rb_h
              double a = rb ? static_cast<double>(rb[2 * H + j]) : 0.0;
              for (std::int64_t k = 0; k < H; ++k) a += rg[static_cast<std::size_t>(k)] * hprev(k) * static_cast<double>(rd[(2 * H + j) * H + k]);
              pre += a;
            }
            hnew[J] = (1 - z[J]) * g(clipped(pre)) + z[J] * hprev(j);
          }
        } else {  // LSTM gates i, o, f, c
          for (std::int64_t j = 0; j < H; ++j) {
            const auto J = static_cast<std::size_t>(j), Hs = static_cast<std::size_t>(H);
            const double cprev = cs[static_cast<std::size_t>(st(d, b, j))];
            double gi = gx[J] + gh[J] + (pd ? static_cast<double>(pd[j]) * cprev : 0.0);
            double gf = gx[J + 2 * Hs] + gh[J + 2 * Hs] + (pd ? static_cast<double>(pd[2 * H + j]) * cprev : 0.0);
            const double i_t = f(clipped(gi));
            const double f_t = p.input_forget ? 1.0 - i_t : f(clipped(gf));
            const double c_t = g(clipped(gx[J + 3 * Hs] + gh[J + 3 * Hs]));
            const double cnew = f_t * cprev + i_t * c_t;
            const double go = gx[J + Hs] + gh[J + Hs] + (pd ? static_cast<double>(pd[H + j]) * cnew : 0.0);
            const double o_t = f(clipped(go));
            hnew[J] = o_t * hfn(cnew);
            cs[static_cast<std::size_t>(st(d, b, j))] = cnew;
          }
        }
        for (std::int64_t j = 0; j < H; ++j) {
          hs[static_cast<std::size_t>(st(d, b, j))] = hnew[static_cast<std::size_t>(j)];
          if (Y) Y->typed<T>()[yat(t, d, b, j)] = static_cast<T>(hnew[static_cast<std::size_t>(j)]);
        }
      }
    }
  }
  if (ctx.output_count() > 1) {
    tensor& yh = ctx.allocate_output(1, X.type(), hshape);
    for (std::size_t i = 0; i < hs.size(); ++i) yh.typed<T>()[i] = static_cast<T>(hs[i]);
  }
  if (p.kind == cell::lstm && ctx.output_count() > 2) {
    tensor& yc = ctx.allocate_output(2, X.type(), hshape);
    for (std::size_t i = 0; i < cs.size(); ++i) yc.typed<T>()[i] = static_cast<T>(cs[i]);
  }
  return {};
}

Result<rnn_params> rnn_params_of(const node& nd, cell kind) {
  rnn_params p;
  p.kind = kind;
  p.hidden = attr_i(nd, "hidden_size", 0);
  if (p.hidden < 1) return Status(errc::invalid_graph, cat(nd.op_type, ": hidden_size must be positive"));
  p.layout = attr_i(nd, "layout", 0);
  if (p.layout != 0 && p.layout != 1) return Status(errc::invalid_graph, cat(nd.op_type, ": layout must be 0 or 1"));
  const std::string dir = attr_s(nd, "direction", "forward");
  if (dir == "bidirectional") p.dirs = 2;
  else if (dir == "reverse") p.reverse_only = true;
  else if (dir != "forward") return Status(errc::invalid_graph, cat(nd.op_type, ": unknown direction '", dir, "'"));
  p.linear_before_reset = attr_i(nd, "linear_before_reset", 0) != 0;
  p.input_forget = attr_i(nd, "input_forget", 0) != 0;
  p.clip = attr_f(nd, "clip", 0.0f);
  const std::vector<std::string> defaults = kind == cell::rnn   ? std::vector<std::string>{"Tanh"}
                                            : kind == cell::gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                                : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  std::vector<std::string> names;
  if (const auto* a = attr(nd, "activations"))
    if (const auto* v = std::get_if<std::vector<std::string>>(&a->value)) names = *v;
  if (names.empty())
    for (int d = 0; d < p.dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  if (names.size() != defaults.size() * static_cast<std::size_t>(p.dirs))
    return Status(errc::invalid_graph, cat(nd.op_type, ": expected ", std::to_string(defaults.size() * static_cast<std::size_t>(p.dirs)),
                                           " activations, got ", std::to_string(names.size())));
  const auto alphas = attr_floats(nd, "activation_alpha"), betas = attr_floats(nd, "activation_beta");
  for (std::size_t i = 0; i < names.size(); ++i) {
    // Defaults of the parameterised functions, as ONNX Runtime takes them.
    const std::string& nm = names[i];
    double da = nm == "LeakyRelu" ? 0.01 : nm == "HardSigmoid" ? 0.2 : 1.0, db = nm == "HardSigmoid" ? 0.5 : 0.0;
    if (nm == "ScaledTanh") db = 1.0;
    EPSTACK_ASSIGN_OR_RETURN(auto f, activation(nm, i < alphas.size() ? alphas[i] : da, i < betas.size() ? betas[i] : db));
    p.acts.push_back(std::move(f));
  }
  return p;
}

Result<compute_function> compile_rnn(const graph& g, node_id n, cell kind) {
  EPSTACK_ASSIGN_OR_RETURN(auto p, rnn_params_of(g.node(n), kind));
  if (in_type(g, n, 0) == element_type::float64)
    return make_fn(g.node(n).op_type, [p](compute_context& ctx) { return rnn_run<double>(ctx, p); });
  return make_fn(g.node(n).op_type, [p](compute_context& ctx) { return rnn_run<float>(ctx, p); });
}
bool float_input(const graph& g, node_id n) {
  const auto e = in_type(g, n, 0);
  return e == element_type::float32 || e == element_type::float64;
}

}  // namespace
}  // namespace impl

namespace ops {
using namespace impl;
bool rnn::supports(const graph& g, node_id n) { return float_input(g, n); }
Result<compute_function> rnn::compile(const graph& g, node_id n) { return compile_rnn(g, n, cell::rnn); }
bool gru::supports(const graph& g, node_id n) { return float_input(g, n); }
Result<compute_function> gru::compile(const graph& g, node_id n) { return compile_rnn(g, n, cell::gru); }
bool lstm::supports(const graph& g, node_id n) { return float_input(g, n); }
Result<compute_function> lstm::compile(const graph& g, node_id n) { return compile_rnn(g, n, cell::lstm); }
}  // namespace ops
}  // namespace epstack::cpu
