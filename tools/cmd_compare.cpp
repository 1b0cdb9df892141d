// epstack compare: sessions of one model side by side in one process, their runs interleaved round by round, so
// that the machine's phases (a VM whose memory-bound loops lose a third for seconds at a time) fall on every arm
// alike. Separate processes one after another (scripts/bench_members.sh) differ by up to 10% between windows on
// such a machine; runs alternated within a process differ by 1-2%, which is what a 3% rule needs. Each arm's runs
// find in cache what the other arms' runs left: a model whose weights fit the last-level cache alone but not once
// per arm (mlp_b1's 100 MB against this VM's share of its L3) runs colder here than in `epstack perf`.
#include "cli.hpp"

#include <epstack/testing/bench_inputs.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <thread>
#include <tuple>
#include <type_traits>

#include <unistd.h>

namespace epstack::cli {

Result<bench::input_rule> input_rule_from(const args& a);
Result<std::vector<named_tensor>> generated_inputs(const std::vector<io_info>& infos, const bench::input_rule& rule,
                                                   std::vector<std::string>& warnings);

namespace {

// Orders of n arms for a cycle of rounds (each round runs every arm once) such that, with the rounds run one after
// the other and the cycle repeated, every arm is followed by every other arm equally often and never by itself: the
// run sequence is an Eulerian circuit of the complete directed graph on the arms (n - 1 rounds, each ordered pair once),
// found by a search from round 0 1 2 ... (one round for a single arm; for n = 2, 0 1 then 0 1 again). Arms beyond 6
// (the search grows as n!) take rotations, each arm first equally often.
std::vector<std::vector<std::size_t>> orders_without_repeats(std::size_t n) {
  std::vector<std::size_t> first(n);
  for (std::size_t k = 0; k < n; ++k) first[k] = k;
  if (n <= 2) return {first};
  if (n > 6) {
    std::vector<std::vector<std::size_t>> rot;
    for (std::size_t r = 0; r < n; ++r) {
      rot.push_back(first);
      std::rotate(first.begin(), first.begin() + 1, first.end());
    }
    return rot;
  }
  std::vector<std::vector<std::size_t>> perms;
  for (std::vector<std::size_t> p = first;;) {
    perms.push_back(p);
    if (!std::next_permutation(p.begin(), p.end())) break;
  }
  std::vector<char> used(n * n, 0);  // ordered pair (a, b): b ran right after a
  std::vector<std::vector<std::size_t>> rounds{first};
  for (std::size_t k = 0; k + 1 < n; ++k) used[first[k] * n + first[k + 1]] = 1;
  // Adds the round's pairs (with the one from the previous round's last arm) if none is used yet.
  const auto take = [&](const std::vector<std::size_t>& p, std::size_t prev, char v) {
    if (v == 1) {
      if (prev == p[0] || used[prev * n + p[0]] != 0) return false;
      for (std::size_t k = 0; k + 1 < n; ++k)
        if (used[p[k] * n + p[k + 1]] != 0) return false;
    }
    used[prev * n + p[0]] = v;
    for (std::size_t k = 0; k + 1 < n; ++k) used[p[k] * n + p[k + 1]] = v;
    return true;
  };
  std::function<bool()> search = [&]() -> bool {
    if (rounds.size() == n - 1) {  // closing the circuit: the last arm before the first round's first
      const std::size_t last = rounds.back().back();
      return last != first[0] && used[last * n + first[0]] == 0;
    }
    for (const auto& p : perms) {
      if (!take(p, rounds.back().back(), 1)) continue;
      rounds.push_back(p);
      if (search()) return true;
      rounds.pop_back();
      take(p, rounds.back().back(), 0);
    }
    return false;
  };
  if (search()) return rounds;
  return {first};  // not reached for n <= 6 (each has such a circuit); one order then, as a fallback
}

using clock_type = std::chrono::steady_clock;

// One arm: a label, a stack and its own config entries, and its session behind a function (the stacks are
// different session types).
struct arm {
  std::string label, providers;
  std::vector<std::pair<std::string, std::string>> config;
  std::function<Result<std::vector<ivalue>>(const std::vector<named_value>&)> run;
  std::vector<io_info> inputs;
  std::vector<double> times;
  std::string plan;  // plan_signature: equal for two arms that run the same nodes on the same providers
};

// An attribute's value as text where it is a number, numbers or a string (what tells two optimised graphs apart:
// `winograd`, an activation, strides): floats exactly (hexadecimal), a long string (an EP context's embedded binary)
// by its size and hash; other kinds by their kind's name.
std::string attribute_text(const attribute& a) {
  std::string r = a.name + "=";
  const auto real = [&](float x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%a,", static_cast<double>(x));
    r += buf;
  };
  std::visit([&](const auto& v) {
    using V = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<V, std::int64_t>) r += std::to_string(v);
    else if constexpr (std::is_same_v<V, float>) real(v);
    else if constexpr (std::is_same_v<V, std::string>)
      r += v.size() <= 64 ? v : std::to_string(v.size()) + " bytes #" + std::to_string(std::hash<std::string>{}(v));
    else if constexpr (std::is_same_v<V, std::vector<std::int64_t>>)
      for (const auto x : v) r += std::to_string(x) + ",";
    else if constexpr (std::is_same_v<V, std::vector<float>>)
      for (const auto x : v) real(x);
    else r += to_string(a.kind());
  }, a.value);
  return r;
}

// What an arm runs: its own config entries, every graph's partitions in execution order, each as its provider and
// its nodes (domain, type, name, inputs, outputs, attributes), and the intra-op thread runtime. Two arms with the same
// signature run the same kernels on the same threads with the same options: a difference the rounds measure between
// them is the machine's, not the stacks'.
std::string plan_signature(const partition_plan& plan, std::string_view runtime,
                           const std::vector<std::pair<std::string, std::string>>& config) {
  std::string r = "runtime=" + std::string(runtime) + "\n";
  auto sorted = config;
  std::sort(sorted.begin(), sorted.end());
  for (const auto& [k, v] : sorted) r += "config " + k + "=" + v + "\n";
  for (const graph_plan* gp : plan.graph_plans())
    for (const std::size_t k : gp->execution_order) {
      const auto pr = gp->partition_provider[k];
      r += pr < plan.providers.size() ? plan.providers[pr] : std::string("?");
      r += ":";
      for (const node_id n : gp->partitions[k].nodes) {
        const node& nd = gp->g->node(n);
        r += " " + nd.domain + "/" + nd.op_type + "/" + nd.name + "(";
        for (const value_id v : nd.inputs) r += (v == no_id ? std::string() : gp->g->value(v).name) + ",";
        r += ")->(";
        for (const value_id v : nd.outputs) r += (v == no_id ? std::string() : gp->g->value(v).name) + ",";
        r += ")[";
        for (const auto& a : nd.attributes) r += attribute_text(a) + ";";
        r += "]";
      }
      r += "\n";
    }
  return r;
}

// "LABEL:PROVIDERS[:key=value,...]".
Result<arm> parse_arm(const std::string& spec) {
  const auto c1 = spec.find(':');
  if (c1 == std::string::npos || c1 == 0 || c1 + 1 == spec.size())
    return Status(errc::invalid_argument, "--arm '" + spec + "': expected LABEL:PROVIDERS[:key=value,...]");
  arm r;
  r.label = spec.substr(0, c1);
  const auto c2 = spec.find(':', c1 + 1);
  r.providers = spec.substr(c1 + 1, c2 == std::string::npos ? std::string::npos : c2 - c1 - 1);
  if (r.providers.empty())
    return Status(errc::invalid_argument, "--arm '" + spec + "': no PROVIDERS between the colons (expected LABEL:PROVIDERS[:key=value,...])");
  if (c2 != std::string::npos) {
    EPSTACK_ASSIGN_OR_RETURN(r.config, key_values(spec.substr(c2 + 1), "--arm"));
  }
  return r;
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// The largest |a - b| / (1 + |b|) over the floating-point outputs (float, double, float16, bfloat16; NaN against a
// number: infinity); other element types must be equal byte for byte (infinity where not). Second: whether every
// output has the same kind, type and sizes.
template <class T>
double float_difference(const tensor& x, const tensor& y) {
  const T* p = x.typed<T>();
  const T* q = y.typed<T>();
  double worst = 0;
  for (std::size_t i = 0; i < x.element_count(); ++i) {
    double u = 0, v = 0;
    if constexpr (std::is_same_v<T, double>) u = p[i], v = q[i];
    else u = static_cast<double>(static_cast<float>(p[i])), v = static_cast<double>(static_cast<float>(q[i]));
    if (std::isnan(u) != std::isnan(v)) return INFINITY;
    if (!std::isnan(u)) worst = std::max(worst, u == v ? 0.0 : std::fabs(u - v) / (1.0 + std::fabs(v)));
  }
  return worst;
}
std::pair<double, bool> difference(const std::vector<ivalue>& a, const std::vector<ivalue>& b) {
  if (a.size() != b.size()) return {INFINITY, false};
  double worst = 0;
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (a[k].is_tensor() != b[k].is_tensor()) return {INFINITY, false};
    if (!a[k].is_tensor()) continue;  // sequences and optionals: not compared
    const tensor& x = a[k].as_tensor();
    const tensor& y = b[k].as_tensor();
    if (x.type() != y.type() || !std::ranges::equal(x.sizes(), y.sizes())) return {INFINITY, false};
    double d = 0;
    switch (x.type()) {
      case element_type::float32: d = float_difference<float>(x, y); break;
      case element_type::float64: d = float_difference<double>(x, y); break;
      case element_type::float16: d = float_difference<float16>(x, y); break;
      case element_type::bfloat16: d = float_difference<bfloat16>(x, y); break;
      case element_type::string: break;  // not compared
      default:
        d = x.byte_size() == y.byte_size() && std::memcmp(x.data(), y.data(), x.byte_size()) == 0 ? 0.0 : INFINITY;
    }
    worst = std::max(worst, d);
  }
  return {worst, true};
}

// Whether a stack has a provider whose library keeps threads of its own (its `intra_op_runtime()`: oneDNN's OpenMP,
// libgomp in Debian's package). An unknown stack is refused later, when its session is made.
bool uses_thread_runtime(const std::string& providers) {
  bool any = false;
  (void)with_stack(providers, [&](auto tag) {
    using providers_type = typename decltype(tag)::type::providers_type;
    const auto runs_own = []<class P>(P*) {
      if constexpr (provider_traits<P>::has_intra_op_runtime) return static_cast<bool>(P::intra_op_runtime());
      else return false;
    };
    any = [&]<class... P>(std::tuple<P...>*) { return (runs_own(static_cast<P*>(nullptr)) || ...); }(
        static_cast<providers_type*>(nullptr));
  });
  return any;
}

// The spin of OpenMP's idle threads, bounded for this process: libgomp's workers spin after a parallel region for
// GOMP_SPINCOUNT turns (300000 by default, about 12 ms of pause instructions on this VM) before they sleep, read once
// when the library loads. Through the next arm's run they took its cores: on mlp_b1 the CPU stack's arm ran in 5.08 ms
// after oneDNN's against 3.54 with OMP_WAIT_POLICY=passive (oneDNN's own arm: 3.42 and 3.67), which made the default
// stack look 11-24% slower than oneDNN's plan. 20000 turns (under a millisecond) still span the gaps between one
// run's primitives. Unless the environment sets the OpenMP wait already, the tool runs itself again with
// GOMP_SPINCOUNT=20000 and KMP_BLOCKTIME=1 (LLVM's runtime); returns only if it could not.
void bound_openmp_spin(const std::vector<std::string>& argv) {
  if (std::getenv("GOMP_SPINCOUNT") != nullptr || std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  ::setenv("GOMP_SPINCOUNT", "20000", 1);
  if (std::getenv("KMP_BLOCKTIME") == nullptr) ::setenv("KMP_BLOCKTIME", "1", 1);
  std::vector<std::string> all{"epstack", "compare"};
  all.insert(all.end(), argv.begin(), argv.end());
  std::vector<char*> cargs;
  for (auto& x : all) cargs.push_back(x.data());
  cargs.push_back(nullptr);
  ::execv("/proc/self/exe", cargs.data());
  std::cerr << "[epstack compare] warning: could not run again with GOMP_SPINCOUNT=20000 (" << std::strerror(errno)
            << "): OpenMP's idle threads may spin through the next arm's run\n";
}

}  // namespace

int compare(const std::vector<std::string>& argv) {
  auto a = args::parse(argv, {"--model", "--arm", "--threads", "--rounds", "--warmup", "--gap-ms", "--config", "--dims",
                              "--seed", "--id-max", "--opt", "--free-dims"});
  if (!a) return usage_error(a.status().message());
  const std::string model = a->get("--model").value_or(a->positional.empty() ? std::string() : a->positional[0]);
  if (model.empty()) return usage_error("compare: --model is required");
  // No pause between runs by default: on this VM a 5 ms sleep (the default before) let the vCPUs idle, and the next run
  // took up to twice as long, bimodally (MobileNetV2's per-round ratios p10 0.25, p90 2.04; back to back 0.90-1.06).
  long long rounds = 40, warmup = 3, gap_ms = 0;
  for (auto [k, dst, min, max] : {std::tuple{"--rounds", &rounds, 2LL, 1000000LL}, std::tuple{"--warmup", &warmup, 0LL, 1000000LL},
                                  std::tuple{"--gap-ms", &gap_ms, 0LL, 60000LL}})
    if (auto v = a->get(k)) {
      auto n = to_int(*v, k);
      if (!n) return usage_error(n.status().message());
      if (*n < min || *n > max)
        return usage_error(std::string(k) + " must be from " + std::to_string(min) + " to " + std::to_string(max));
      *dst = *n;
    }
  std::vector<arm> arms;
  std::vector<std::string> specs = a->all("--arm");
  // Without --arm: the default stack against its members, as issue 18's rule reads (oneDNN's arm with ONNX Runtime's
  // greedy priority placement, as bench_members.sh).
  if (specs.empty()) {
    specs = {"default:default", "cpu:cpu"};
    if (default_stack() != "cpu") specs.insert(specs.begin() + 1, default_stack() + ":" + default_stack() + ":epstack.placement=priority");
  }
  for (const auto& s : specs) {
    auto r = parse_arm(s);
    if (!r) return usage_error(r.status().message());
    arms.push_back(std::move(*r));
  }
  if (arms.size() < 2) return usage_error("compare: give two --arm or more (or none, for default against its members)");
  if (std::any_of(arms.begin(), arms.end(), [](const arm& x) { return uses_thread_runtime(x.providers); })) bound_openmp_spin(argv);
  warn_unknown_machine_class();
  auto base = session_options_from(*a);
  if (!base) return fail(base.status());
  if (!a->get("--threads")) base->set_intra_op_threads(2);
  // The pools' workers stop spinning when their run ends: an arm's idle workers spinning (then yielding, for up to
  // 300000 turns) through the next arm's run took its cores (two CPU sessions of MobileNetV2: 3.5 and 9.4 ms).
  if (!base->config(config_keys::force_spinning_stop)) base->set_config(config_keys::force_spinning_stop, "1");
  auto rule = input_rule_from(*a);
  if (!rule) return fail(rule.status());

  for (auto& x : arms) {
    auto so = *base;
    for (const auto& [k, v] : x.config) so.set_config(k, v);
    Status created;
    const auto st = with_stack(x.providers, [&](auto tag) {
      using S = typename decltype(tag)::type;
      auto s = S::create(model, so, providers_for<S>(so));
      if (!s) {
        created = s.status();
        return;
      }
      auto held = std::make_shared<S>(std::move(*s));
      x.inputs = held->inputs();
      x.plan = plan_signature(held->plan(), held->intra_op_runtime(), x.config);
      x.run = [held](const std::vector<named_value>& feeds) { return held->run_values(feeds); };
    });
    if (!st) return fail(st);
    if (!created) return fail(Status(created.code(), "arm '" + x.label + "': " + created.message()));
  }
  std::vector<std::string> warnings;
  auto gen = generated_inputs(arms.front().inputs, *rule, warnings);
  if (!gen) return fail(gen.status());
  for (const auto& w : warnings) std::cerr << "[epstack compare] warning: " << w << "\n";
  std::vector<named_value> feeds;
  for (auto& f : *gen) feeds.push_back({f.name, std::move(f.value)});

  // The answers first: every arm against the first (a stack gives the same answers as the CPU provider alone). A
  // difference above 1e-3 is a warning (arms may differ on purpose: Winograd against direct convolutions).
  std::vector<std::vector<ivalue>> first_out(arms.size());
  for (std::size_t i = 0; i < arms.size(); ++i) {
    auto out = arms[i].run(feeds);
    if (!out) return fail(Status(out.code(), "arm '" + arms[i].label + "': " + out.status().message()));
    first_out[i] = std::move(*out);
  }
  std::vector<double> diffs(arms.size(), 0.0);
  for (std::size_t i = 1; i < arms.size(); ++i) {
    const auto [d, same_shapes] = difference(first_out[i], first_out[0]);
    if (!same_shapes)
      return fail(Status(errc::fail, "arm '" + arms[i].label + "' gives outputs of other types or sizes than '" + arms[0].label + "'"));
    diffs[i] = d;
    if (d > 1e-3)
      std::cerr << "[epstack compare] warning: arm '" << arms[i].label << "' differs from '" << arms[0].label << "' by " << d
                << " (|a - b| / (1 + |b|))\n";
  }
  first_out.clear();

  const auto pause = [&] {
    if (gap_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
  };
  // The rounds' orders of the arms: a cycle of rounds in which, run after run across the rounds' boundaries too (and
  // from the cycle's end to its start), each arm follows every other arm equally often and never itself (an Eulerian
  // circuit of the arms' ordered pairs, cut into rounds that each run every arm once: orders_without_repeats). The
  // arm a run follows decides what it finds in cache and whether its thread runtime was just awake: before, the
  // rounds went through all n! orders in turn, whose boundaries ran one arm twice in a row (0 1 2 | 0 2 1 | 1 0 2...):
  // three identical CPU sessions of mlp_b1 (100 MB of weights each, more than the cache holds twice) came out 3.10,
  // 2.91 and 3.39 ms, and the default stack (first arm) 4-6% slower than dnnl,cpu (second) in a rule it keeps by 11%
  // in separate processes. Rotations alone (0 1 2, 1 2 0, 2 0 1) are unbalanced the other way: the CPU stack's arm
  // ran before the default stack's in two rounds of three (an arm after another thread runtime's run pays for waking
  // its own: the default stack ran 1.5-5% slower than dnnl,cpu on MobileNet-sized runs of the same plan).
  const std::vector<std::vector<std::size_t>> cycle_orders = orders_without_repeats(arms.size());
  const std::size_t cycle = cycle_orders.size();
  // The warm-up rounds run the cycle's orders too, ending with its last: the first timed run follows what the cycle
  // puts before it.
  for (long long w = 0; w < warmup; ++w) {
    const auto at = static_cast<std::size_t>((static_cast<long long>(cycle) - (warmup - w) % static_cast<long long>(cycle)) %
                                             static_cast<long long>(cycle));
    for (const std::size_t k : cycle_orders[at]) {
      auto& x = arms[k];
      if (auto out = x.run(feeds); !out) return fail(Status(out.code(), "arm '" + x.label + "': " + out.status().message()));
      pause();
    }
  }
  if (const auto c = static_cast<long long>(cycle); rounds % c != 0) {
    const long long up = (rounds / c + 1) * c;
    std::cerr << "[epstack compare] " << rounds << " rounds rounded up to " << up << " (whole cycles of " << c
              << " orders of the arms)\n";
    rounds = up;
  }
  std::vector<std::size_t> order = cycle_orders.front();
  std::size_t at_order = 0;
  const auto next_order = [&] {
    at_order = (at_order + 1) % cycle;
    order = cycle_orders[at_order];
  };
  for (long long r = 0; r < rounds; ++r, next_order())
    for (std::size_t k = 0; k < arms.size(); ++k) {
      auto& x = arms[order[k]];
      const auto t0 = clock_type::now();
      auto out = x.run(feeds);
      x.times.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
      if (!out) return fail(Status(out.code(), "arm '" + x.label + "': " + out.status().message()));
      pause();
    }

  const std::string name = std::filesystem::path(model).stem().string();
  json j;
  j.begin_object().key("model").value(name).key("rounds").value(rounds).key("gap_ms").value(gap_ms);
  if (const char* sc = std::getenv("GOMP_SPINCOUNT")) j.key("gomp_spincount").value(std::string(sc));
  j.key("orders").begin_array();  // the cycle of the rounds' orders, by arm index
  for (const auto& o : cycle_orders) {
    j.begin_array();
    for (const std::size_t k : o) j.value(static_cast<long long>(k));
    j.end_array();
  }
  j.end_array();
  j.key("arms").begin_array();
  for (std::size_t i = 0; i < arms.size(); ++i) {
    const auto& x = arms[i];
    j.begin_object().key("label").value(x.label).key("providers").value(x.providers).key("config").begin_object();
    for (const auto& [k, v] : x.config) j.key(k).value(v);
    j.end_object();
    j.key("median_ms").number(quantile(x.times, 0.5)).key("p90_ms").number(quantile(x.times, 0.9));
    j.key("max_difference").number(diffs[i]);
    // The first arm before this one whose plan is this one's, if any.
    const auto same = std::find_if(arms.begin(), arms.begin() + static_cast<std::ptrdiff_t>(i), [&](const arm& o) { return o.plan == x.plan; });
    j.key("same_plan_as");
    if (same != arms.begin() + static_cast<std::ptrdiff_t>(i)) j.value(same->label);
    else j.null();
    j.end_object();
    std::fprintf(stderr, "[epstack compare] %s %-10s median %9.3f ms  p90 %9.3f ms\n", name.c_str(), x.label.c_str(),
                 quantile(x.times, 0.5), quantile(x.times, 0.9));
  }
  j.end_array();
  // Per round, each arm's time over the first arm's; and the first arm's over the fastest of the others.
  j.key("ratios").begin_array();
  for (std::size_t i = 1; i < arms.size(); ++i) {
    std::vector<double> r;
    for (long long k = 0; k < rounds; ++k) r.push_back(arms[i].times[static_cast<std::size_t>(k)] / arms[0].times[static_cast<std::size_t>(k)]);
    j.begin_object().key("arm").value(arms[i].label).key("over").value(arms[0].label);
    j.key("median").number(quantile(r, 0.5)).key("p10").number(quantile(r, 0.1)).key("p90").number(quantile(r, 0.9)).end_object();
    std::fprintf(stderr, "[epstack compare] %s %s / %s: median %.4f (p10 %.4f, p90 %.4f)\n", name.c_str(), arms[i].label.c_str(),
                 arms[0].label.c_str(), quantile(r, 0.5), quantile(r, 0.1), quantile(r, 0.9));
  }
  j.end_array();
  std::vector<double> best;
  for (long long k = 0; k < rounds; ++k) {
    double m = INFINITY;
    for (std::size_t i = 1; i < arms.size(); ++i) m = std::min(m, arms[i].times[static_cast<std::size_t>(k)]);
    best.push_back(arms[0].times[static_cast<std::size_t>(k)] / m);
  }
  j.key("first_over_best_of_rest").begin_object().key("median").number(quantile(best, 0.5));
  j.key("p10").number(quantile(best, 0.1)).key("p90").number(quantile(best, 0.9)).end_object();
  // The faster of the other arms by their medians (the 3% rule's "better of cpu and dnnl,cpu"), per round.
  std::size_t faster = 1;
  for (std::size_t i = 2; i < arms.size(); ++i)
    if (quantile(arms[i].times, 0.5) < quantile(arms[faster].times, 0.5)) faster = i;
  std::vector<double> over_faster;
  for (long long k = 0; k < rounds; ++k)
    over_faster.push_back(arms[0].times[static_cast<std::size_t>(k)] / arms[faster].times[static_cast<std::size_t>(k)]);
  const bool same_plan = arms[0].plan == arms[faster].plan;
  j.key("first_over_faster").begin_object().key("arm").value(arms[faster].label).key("median").number(quantile(over_faster, 0.5));
  j.key("p10").number(quantile(over_faster, 0.1)).key("p90").number(quantile(over_faster, 0.9));
  j.key("same_plan").boolean(same_plan).end_object();
  j.end_object();
  std::fprintf(stderr, "[epstack compare] %s %s / the faster other arm (%s, by median): median %.4f (p10 %.4f, p90 %.4f)%s\n",
               name.c_str(), arms[0].label.c_str(), arms[faster].label.c_str(), quantile(over_faster, 0.5),
               quantile(over_faster, 0.1), quantile(over_faster, 0.9),
               same_plan ? "; the same plan (nodes, providers, attributes, thread runtime): the difference is the machine's" : "");
  std::cout << j.str() << std::endl;
  return 0;
}

}  // namespace epstack::cli
