// epstack fuzz-providers: the differential fuzzer of the provider stacks. Random valid graphs (graph_fuzz.hpp) run on
// the CPU provider alone (the reference), on every other stack of the build, and on the CPU provider with graph
// optimisation off; outputs are compared with tolerances scaled to the values, and each stack runs a graph twice to
// check it is deterministic. A difference, a crash, a hang, or an error on one side only is a finding, written out
// as a case of the ONNX backend test layout (model.onnx, test_data_set_0/input_K.pb and the CPU provider's
// output_K.pb) that `epstack test-runner DIR --providers default` reproduces.
#include "child.hpp"
#include "cli.hpp"
#include <graph_fuzz.hpp>

#include <epstack/onnx/onnx_io.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>

namespace epstack::cli {
namespace fs = std::filesystem;

namespace {

struct verdict {
  std::string kind;  ///< ok, invalid (both stacks refuse: a generator fault), finding
  std::string detail;
};

std::string one_line(std::string s) {
  for (auto& ch : s)
    if (ch == '\n' || ch == '\t' || ch == '\r') ch = ' ';
  return s;
}

/// Creates and runs `m` twice on stack S; the outputs, or the error.
template <class S>
Result<std::vector<tensor>> run_twice(const fuzz::generated& g, const session_options& so, std::string& nondeterminism) {
  auto s = S::create(g.m, so, providers_for<S>(so));
  if (!s) return Status(s.status().code(), "create: " + s.status().message());
  auto a = s->run(g.feeds);
  if (!a) return Status(a.status().code(), "run: " + a.status().message());
  auto b = s->run(g.feeds);
  if (!b) return Status(b.status().code(), "second run: " + b.status().message());
  nondeterminism = fuzz::compare_bits(*a, *b);
  return std::move(*a);
}

/// The reference against one candidate stack: "" when they agree, else the finding.
std::string judge(const Result<std::vector<tensor>>& ref, const Result<std::vector<tensor>>& got, const std::string& name,
                  const std::string& nondet) {
  if (!ref && !got) return "";  // both refuse: the graph is invalid (counted by the caller)
  if (!got) return name + " fails where the CPU provider runs: " + got.status().to_string();
  if (!ref) return name + " runs where the CPU provider fails: " + ref.status().to_string();
  if (!nondet.empty()) return name + " is not deterministic (two runs): " + nondet;
  if (auto d = fuzz::compare_outputs(*got, *ref); !d.empty()) return name + " differs from the CPU provider: " + d;
  return "";
}

template <class Candidate>
verdict check_graph(const fuzz::generated& g, const session_options& so) {
  std::string nd_ref, nd_cand, nd_noopt;
  const auto ref = run_twice<session<cpu_provider>>(g, so, nd_ref);
  if (ref && !nd_ref.empty()) return {"finding", "the CPU provider is not deterministic (two runs): " + nd_ref};
  std::string f;
  if constexpr (!std::is_same_v<Candidate, session<cpu_provider>>) {
    const auto got = run_twice<Candidate>(g, so, nd_cand);
    f = judge(ref, got, "the stack", nd_cand);
    if (!f.empty()) return {"finding", f};
  }
  session_options noopt = so;
  noopt.set_graph_optimization_level(graph_optimization_level::disable);
  const auto plain = run_twice<session<cpu_provider>>(g, noopt, nd_noopt);
  f = judge(ref, plain, "the CPU provider without graph optimisation", nd_noopt);
  if (!f.empty()) return {"finding", f};
  if (!ref) return {"invalid", ref.status().to_string()};
  return {"ok", ""};
}

/// A verdict as the line a child writes (from_child reads it back).
std::string verdict_line(const verdict& v) { return v.kind + "\t" + one_line(v.detail) + "\n"; }

/// A verdict from its line written by a child, or a finding: the child crashed or ran past `limit_s` seconds.
verdict from_child(const child_result& r, int limit_s) {
  const auto tab = r.text.find('\t');
  if (r.timed_out) return {"finding", "hangs: no result after " + std::to_string(limit_s) + " s"};
  if (!r.finished) return {"finding", r.why(limit_s)};
  if (tab == std::string::npos) return {"finding", one_line(r.text)};  // an exception's message
  std::string detail = r.text.substr(tab + 1);
  while (!detail.empty() && detail.back() == '\n') detail.pop_back();
  return {r.text.substr(0, tab), detail};
}

/// `f()` in a child process within `limit_s` seconds; a crash or a time-out is a finding.
template <class F>
verdict isolated(F&& f, int limit_s) {
  return from_child(run_in_child([&] { return verdict_line(f()); }, limit_s), limit_s);
}

/// What the graph of a finding gives when it runs in a fresh process (a worker child ran others before it).
std::string alone_text(const verdict& alone) {
  return alone.kind == "ok" ? "no finding (what a graph before it left in the worker process?)"
                            : alone.kind + (alone.detail.empty() ? "" : ": " + alone.detail);
}

/// A finding as a backend-suite case: the model, its inputs, the CPU provider's outputs (computed in a child, the
/// CPU provider may be the side that fails) and a note of what was found.
void write_finding(const fs::path& dir, std::uint64_t seed, const fuzz::generated& g, const verdict& v, const verdict& alone,
                   const session_options& so, const std::string& stack) {
  std::error_code ec;
  fs::create_directories(dir / "test_data_set_0", ec);
  if (auto st = save_model(g.m, dir / "model.onnx"); !st) std::cerr << "fuzz-providers: " << st.to_string() << "\n";
  for (std::size_t k = 0; k < g.feeds.size(); ++k)
    (void)save_tensor(g.feeds[k].value, dir / "test_data_set_0" / ("input_" + std::to_string(k) + ".pb"));
  (void)isolated([&]() -> verdict {
    auto s = session<cpu_provider>::create(g.m, so);
    if (!s) return {"error", ""};
    auto out = s->run(g.feeds);
    if (!out) return {"error", ""};
    for (std::size_t k = 0; k < out->size(); ++k)
      (void)save_tensor((*out)[k], dir / "test_data_set_0" / ("output_" + std::to_string(k) + ".pb"));
    return {"ok", ""};
  }, 120);
  std::ofstream note(dir / "finding.txt");
  note << "seed " << seed << ": " << g.summary << "\n" << v.detail << "\n"
       << "in a process of its own: " << alone_text(alone) << "\n"
       << "reproduce: epstack fuzz-providers --seed " << seed << " --graphs 1 --providers " << stack << "\n"
       << "       or: epstack test-runner " << dir.string() << " --providers " << stack << "\n";
}

template <class S>
int fuzz_with(const args& a, const std::string& stack) {
  auto so = session_options_from(a);
  if (!so) return fail(so.status());
  if (!a.get("--threads")) so->set_intra_op_threads(2);
  // Each provider is checked on everything it claims: placement keeps the stack's order (ONNX Runtime's) unless
  // --config epstack.placement=... asks otherwise, so that cost estimates never hide a provider's node from the check.
  if (!so->config(config_keys::placement)) so->set_config(config_keys::placement, "priority");
  std::uint64_t seed = 1;
  if (auto s = a.get("--seed")) {
    auto n = to_int(*s, "--seed");
    if (!n || *n < 0) return usage_error("--seed needs a number of 0 or more");
    seed = static_cast<std::uint64_t>(*n);
  }
  long long graphs = -1, seconds = -1;
  if (auto s = a.get("--graphs")) {
    auto n = to_int(*s, "--graphs");
    if (!n || *n < 1) return usage_error("--graphs needs a positive number");
    graphs = *n;
  }
  if (auto s = a.get("--seconds")) {
    auto n = to_int(*s, "--seconds");
    if (!n || *n < 1) return usage_error("--seconds needs a positive number");
    seconds = *n;
  }
  if (graphs < 0 && seconds < 0) seconds = 60;
  const fs::path out = a.get("--out").value_or("fuzz-findings");
  const bool verbose = a.flag("--verbose");
  const auto t0 = std::chrono::steady_clock::now();
  long long ran = 0, findings = 0, invalid = 0, nodes = 0;
  // The graphs run in worker children, many to a child: a crash or a hang is a finding of its graph alone.
  const auto count = graphs >= 0 ? static_cast<std::size_t>(graphs) : std::numeric_limits<std::size_t>::max();
  run_in_workers(count, [&](std::size_t i) { return verdict_line(check_graph<S>(fuzz::generate_graph(seed + i), *so)); },
                 [&](std::size_t i, const child_result& r) {
    const std::uint64_t s = seed + i;
    const auto g = fuzz::generate_graph(s);
    nodes += static_cast<long long>(g.m.graph.node_count());
    const verdict v = from_child(r, 120);
    ++ran;
    if (verbose) std::cout << s << " " << v.kind << " " << g.summary << (v.detail.empty() ? "" : ": " + v.detail) << "\n";
    if (v.kind == "invalid") {
      ++invalid;
      if (!verbose) std::cout << "invalid graph (a generator fault) seed " << s << ": " << v.detail << "\n";
    } else if (v.kind != "ok") {
      ++findings;
      const fs::path dir = out / ("seed-" + std::to_string(s));
      // Again in a process of its own: the worker child had run other graphs before this one.
      const verdict alone = isolated([&] { return check_graph<S>(g, *so); }, 120);
      write_finding(dir, s, g, v, alone, *so, stack);
      std::cout << "FINDING seed " << s << " (" << g.summary << "): " << v.detail << "\n  in a process of its own: "
                << alone_text(alone) << "\n  written to " << dir.string() << "\n";
    }
    return seconds < 0 || std::chrono::steady_clock::now() - t0 < std::chrono::seconds(seconds);
  }, 120);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "fuzz-providers: stack " << stack << ", seeds " << seed << ".." << seed + static_cast<std::uint64_t>(ran) - 1
            << ": " << ran << " graphs (" << nodes << " nodes) in " << static_cast<long long>(secs) << " s, " << findings
            << " findings, " << invalid << " invalid" << std::endl;
  return findings == 0 && invalid == 0 ? 0 : 1;
}

}  // namespace

int fuzz_providers(const std::vector<std::string>& argv) {
  auto a = args::parse(argv, {"--providers", "--threads", "--config", "--opt", "--seed", "--graphs", "--seconds", "--out"},
                       {"--verbose"});
  if (!a) return usage_error(a.status().message());
  if (!a->positional.empty()) return usage_error("fuzz-providers takes no positional argument");
  const std::string stack = a->get("--providers").value_or("default");
  int rc = 0;
  const auto st = with_stack(stack, [&](auto tag) { rc = fuzz_with<typename decltype(tag)::type>(*a, stack); });
  if (!st) return fail(st);
  return rc;
}

}  // namespace epstack::cli
