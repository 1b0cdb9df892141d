// epstack test-runner: the ONNX backend test suite (model.onnx + test_data_set_N/{input,output}_K.pb per case) run on
// a provider stack, compared as onnx's backend tests compare, like ONNX Runtime's onnx_test_runner. Each case runs in
// a child process (a crash or a hang is that case's error, not the run's), with a time limit.
#include "child.hpp"
#include "cli.hpp"

#include <epstack/onnx/onnx_io.hpp>

#include "../providers/cpu/src/small_float.hpp"  // decoding of the float8, float4 and packed integer types

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>


namespace epstack::cli {
namespace fs = std::filesystem;

namespace {

constexpr const char* suite_names[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};

struct tolerance {
  double rtol = 1e-3, atol = 1e-7;
};

struct outcome {
  std::string result;  ///< pass, fail or error
  std::string reason;
  int offloaded = 0;  ///< main-graph nodes placed on a provider other than the CPU provider
};

/// How many nodes of the main graph a session placed on a provider other than the CPU provider.
int offloaded_nodes(const partition_plan& plan) {
  int k = 0;
  for (const auto& e : plan.main.nodes)
    if (e.provider < plan.providers.size() && plan.providers[e.provider] != "CPUExecutionProvider") ++k;
  return k;
}

std::string fmt(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

std::string index_string(const tensor& t, std::size_t flat) {
  std::string s = "[";
  std::vector<std::int64_t> idx(t.rank());
  for (std::size_t d = t.rank(); d-- > 0;) {
    const auto n = static_cast<std::size_t>(t.sizes()[d]);
    idx[d] = n == 0 ? 0 : static_cast<std::int64_t>(flat % n);
    flat = n == 0 ? 0 : flat / n;
  }
  for (std::size_t d = 0; d < idx.size(); ++d) s += (d ? "," : "") + std::to_string(idx[d]);
  return s + "]";
}

double as_double(const tensor& t, std::size_t i) {
  switch (t.type()) {
    case element_type::float32: return t.typed<float>()[i];
    case element_type::float64: return t.typed<double>()[i];
    case element_type::float16: return static_cast<float>(t.typed<float16>()[i]);
    case element_type::bfloat16: return static_cast<float>(t.typed<bfloat16>()[i]);
    default: return 0;
  }
}

bool is_floating(element_type e) {
  return e == element_type::float32 || e == element_type::float64 || e == element_type::float16 ||
         e == element_type::bfloat16;
}

/// numpy.testing.assert_allclose's rule, NaN equal to NaN: |got - want| <= atol + rtol * |want|.
bool close(double got, double want, const tolerance& tol) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (std::isinf(got) || std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol.atol + tol.rtol * std::fabs(want);
}

/// "" when `got` matches `want`, else what differs.
std::string compare_tensor(const tensor& got, const tensor& want, const tolerance& tol) {
  if (got.type() != want.type())
    return "element type " + std::string(to_string(got.type())) + ", expected " + std::string(to_string(want.type()));
  if (!std::equal(got.sizes().begin(), got.sizes().end(), want.sizes().begin(), want.sizes().end()))
    return "shape " + describe(got) + ", expected " + describe(want);
  const std::size_t n = want.element_count();
  if (is_floating(want.type())) {
    std::size_t bad = 0, first = 0;
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double g = as_double(got, i), w = as_double(want, i);
      if (close(g, w, tol)) continue;
      if (bad++ == 0) first = i;
      if (std::isfinite(g) && std::isfinite(w)) worst = std::max(worst, std::fabs(g - w));
    }
    if (bad == 0) return "";
    return std::to_string(bad) + " of " + std::to_string(n) + " values differ; first at " + index_string(want, first) +
           ": " + fmt(as_double(got, first)) + ", expected " + fmt(as_double(want, first)) + " (max |diff| " + fmt(worst) +
           ", rtol " + fmt(tol.rtol) + ", atol " + fmt(tol.atol) + ")";
  }
  if (want.type() == element_type::complex64 || want.type() == element_type::complex128) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::complex<double> g = want.type() == element_type::complex64
                                         ? std::complex<double>(got.typed<std::complex<float>>()[i])
                                         : got.typed<std::complex<double>>()[i];
      const std::complex<double> w = want.type() == element_type::complex64
                                         ? std::complex<double>(want.typed<std::complex<float>>()[i])
                                         : want.typed<std::complex<double>>()[i];
      if (!close(g.real(), w.real(), tol) || !close(g.imag(), w.imag(), tol))
        return "value at " + index_string(want, i) + " differs";
    }
    return "";
  }
  if (want.type() == element_type::string) {
    for (std::size_t i = 0; i < n; ++i)
      if (got.typed<std::string>()[i] != want.typed<std::string>()[i])
        return "string at " + index_string(want, i) + " is '" + got.typed<std::string>()[i] + "', expected '" +
               want.typed<std::string>()[i] + "'";
    return "";
  }
  // The float8 and float4 types: decoded values, exact (NaN equal to NaN); the packed integers: unpacked values.
  if (is_float8(want.type()) || is_packed(want.type())) {
    namespace sf = epstack::cpu::small_float;
    const bool ints = sf::is_packed_int(want.type());
    for (std::size_t i = 0; i < n; ++i) {
      const float g = sf::value_at(got.type(), got.data(), i), w = sf::value_at(want.type(), want.data(), i);
      if (g == w || (std::isnan(g) && std::isnan(w))) continue;
      return "value at " + index_string(want, i) + " is " + (ints ? std::to_string(static_cast<int>(g)) : fmt(g)) +
             ", expected " + (ints ? std::to_string(static_cast<int>(w)) : fmt(w));
    }
    return "";
  }
  // Integers and bools: exact, byte for byte.
  const std::size_t es = want.byte_size() / std::max<std::size_t>(n, 1);
  for (std::size_t i = 0; i < n; ++i)
    if (std::memcmp(got.data() + i * es, want.data() + i * es, es) != 0) {
      std::int64_t g = 0, w = 0;
      std::memcpy(&g, got.data() + i * es, std::min<std::size_t>(es, 8));
      std::memcpy(&w, want.data() + i * es, std::min<std::size_t>(es, 8));
      return "value at " + index_string(want, i) + " is " + std::to_string(g) + ", expected " + std::to_string(w);
    }
  return "";
}

std::string compare_value(const ivalue& got, const ivalue& want, const tolerance& tol) {
  if (got.kind_name() != want.kind_name())
    return std::string("a ") + got.kind_name() + ", expected a " + want.kind_name();
  if (want.is_none()) return "";
  if (want.is_tensor()) return compare_tensor(got.as_tensor(), want.as_tensor(), tol);
  const auto& g = got.as_sequence().items;
  const auto& w = want.as_sequence().items;
  if (g.size() != w.size())
    return "a sequence of " + std::to_string(g.size()) + " tensors, expected " + std::to_string(w.size());
  for (std::size_t i = 0; i < w.size(); ++i)
    if (auto d = compare_tensor(g[i], w[i], tol); !d.empty()) return "sequence item " + std::to_string(i) + ": " + d;
  return "";
}

/// A value read as double (numbers and bools), for the range check of random outputs.
std::optional<double> number_at(const tensor& t, std::size_t i) {
  if (is_floating(t.type())) return as_double(t, i);
  std::optional<double> r;
  if (t.type() == element_type::boolean) return t.typed<bool>()[i] ? 1.0 : 0.0;
  const std::size_t es = element_size(t.type());
  if (es == 0 || es > 8 || t.type() == element_type::string) return r;
  switch (t.type()) {
    case element_type::int8: return t.typed<std::int8_t>()[i];
    case element_type::uint8: return t.typed<std::uint8_t>()[i];
    case element_type::int16: return t.typed<std::int16_t>()[i];
    case element_type::uint16: return t.typed<std::uint16_t>()[i];
    case element_type::int32: return t.typed<std::int32_t>()[i];
    case element_type::uint32: return t.typed<std::uint32_t>()[i];
    case element_type::int64: return static_cast<double>(t.typed<std::int64_t>()[i]);
    case element_type::uint64: return static_cast<double>(t.typed<std::uint64_t>()[i]);
    default: return r;
  }
}

/// Random outputs (a model with a random operator): the same kind, element type and shape, and every value within
/// the range of the reference's values.
std::string compare_random_tensor(const tensor& got, const tensor& want, const tolerance& tol, bool range = true) {
  if (got.type() != want.type())
    return "element type " + std::string(to_string(got.type())) + ", expected " + std::string(to_string(want.type()));
  if (!std::equal(got.sizes().begin(), got.sizes().end(), want.sizes().begin(), want.sizes().end()))
    return "shape " + describe(got) + ", expected " + describe(want);
  if (!range) return "";
  double lo = INFINITY, hi = -INFINITY;
  for (std::size_t i = 0; i < want.element_count(); ++i)
    if (auto v = number_at(want, i); v && std::isfinite(*v)) lo = std::min(lo, *v), hi = std::max(hi, *v);
  if (lo > hi) return "";
  for (std::size_t i = 0; i < got.element_count(); ++i)
    if (auto v = number_at(got, i); v && (*v < lo - tol.atol - tol.rtol * std::fabs(lo) || *v > hi + tol.atol + tol.rtol * std::fabs(hi)))
      return "value at " + index_string(got, i) + " is " + fmt(*v) + ", outside the reference's range [" + fmt(lo) + ", " + fmt(hi) + "]";
  return "";
}
std::string compare_random(const ivalue& got, const ivalue& want, const tolerance& tol) {
  if (got.kind_name() != want.kind_name()) return std::string("a ") + got.kind_name() + ", expected a " + want.kind_name();
  if (want.is_none()) return "";
  if (want.is_tensor()) return compare_random_tensor(got.as_tensor(), want.as_tensor(), tol);
  const auto& g = got.as_sequence().items;
  const auto& w = want.as_sequence().items;
  if (g.size() != w.size()) return "a sequence of " + std::to_string(g.size()) + " tensors, expected " + std::to_string(w.size());
  for (std::size_t i = 0; i < w.size(); ++i)
    if (auto d = compare_random_tensor(g[i], w[i], tol); !d.empty()) return "sequence item " + std::to_string(i) + ": " + d;
  return "";
}

/// True when the graph (or a subgraph) draws random numbers: its outputs are compared by shape, type and range.
bool has_random_node(const graph& g) {
  static const std::set<std::string> random_ops{"Bernoulli", "RandomUniform", "RandomUniformLike", "RandomNormal",
                                                "RandomNormalLike", "Multinomial"};
  for (node_id n = 0; n < g.node_count(); ++n) {
    const auto& nd = g.node(n);
    if (random_ops.contains(nd.op_type)) return true;
    if (nd.op_type == "Dropout" && nd.inputs.size() > 2 && nd.inputs[2] != no_id) return true;  // training_mode given
    for (const auto& a : nd.attributes) {
      if (const auto* sg = std::get_if<subgraph>(&a.value); sg && *sg && has_random_node(**sg)) return true;
      if (const auto* v = std::get_if<std::vector<subgraph>>(&a.value))
        for (const auto& s : *v)
          if (s && has_random_node(*s)) return true;
    }
  }
  return false;
}

/// A Dropout in training mode reading graph inputs: its output is checked element by element against its input.
struct dropout_node {
  std::string x, ratio, output, mask;
};
std::optional<dropout_node> training_dropout(const graph& g) {
  for (node_id n = 0; n < g.node_count(); ++n) {
    const auto& nd = g.node(n);
    if (nd.op_type != "Dropout" || nd.inputs.size() < 3 || nd.inputs[0] == no_id || !g.value(nd.inputs[0]).is_graph_input) continue;
    dropout_node d;
    d.x = g.value(nd.inputs[0]).name;
    if (nd.inputs[1] != no_id) d.ratio = g.value(nd.inputs[1]).name;
    d.output = g.value(nd.outputs[0]).name;
    if (nd.outputs.size() > 1 && nd.outputs[1] != no_id) d.mask = g.value(nd.outputs[1]).name;
    return d;
  }
  return std::nullopt;
}
/// Random dropout: every value is 0 or the input's value / (1 - ratio).
std::string compare_dropout(const ivalue& got, const ivalue& want, const std::vector<named_value>& feeds, const dropout_node& d,
                            const tolerance& tol) {
  if (!got.is_tensor() || !want.is_tensor()) return compare_random(got, want, tol);
  if (auto e = compare_random_tensor(got.as_tensor(), want.as_tensor(), tol, false); !e.empty()) return e;
  const tensor* x = nullptr;
  double ratio = 0.5;
  for (const auto& f : feeds) {
    if (f.name == d.x && f.value.is_tensor()) x = &f.value.as_tensor();
    if (f.name == d.ratio && f.value.is_tensor() && f.value.as_tensor().element_count() == 1)
      ratio = as_double(f.value.as_tensor(), 0);
  }
  const tensor& y = got.as_tensor();
  if (x == nullptr || x->element_count() != y.element_count() || !is_floating(y.type())) return "";
  const double scale = 1.0 / (1.0 - ratio);
  for (std::size_t i = 0; i < y.element_count(); ++i) {
    const double v = as_double(y, i), kept = as_double(*x, i) * scale;
    if (v != 0 && !close(v, kept, tol))
      return "value at " + index_string(y, i) + " is " + fmt(v) + ": neither 0 nor the input scaled by 1 / (1 - ratio), " + fmt(kept);
  }
  return "";
}

std::vector<fs::path> data_sets(const fs::path& c) {
  std::vector<fs::path> sets;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(c, ec))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end(), [](const fs::path& a, const fs::path& b) {
    const auto num = [](const fs::path& p) { return std::stoll(p.filename().string().substr(14)); };
    return num(a) < num(b);
  });
  return sets;
}

std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (int k = 0;; ++k) {
    const auto p = dir / (prefix + "_" + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    files.push_back(p);
  }
  return files;
}

/// The suite stores bfloat16 tensors as uint16 (numpy has no bfloat16): such a file read for a bfloat16 value is
/// those bits as bfloat16.
ivalue as_declared(ivalue v, const type_info& t) {
  if (!v.is_tensor() || t.kind != type_kind::tensor || t.elem != element_type::bfloat16 ||
      v.as_tensor().type() != element_type::uint16)
    return v;
  const tensor& u = v.as_tensor();
  tensor b = tensor::uninitialized(element_type::bfloat16, u.sizes());
  std::memcpy(b.mutable_data(), u.data(), u.byte_size());
  return ivalue(std::move(b));
}

/// The graph inputs that some node reads as an operand other than its first: a convolution's or a product's
/// weights, a normalisation's scale and statistics, a binary operator's second operand, a shape.
std::set<std::string> weight_inputs(const graph& g) {
  std::set<std::string> r;
  for (node_id n = 0; n < g.node_count(); ++n) {
    const auto& nd = g.node(n);
    for (std::size_t i = 1; i < nd.inputs.size(); ++i)
      if (nd.inputs[i] != no_id && g.value(nd.inputs[i]).is_graph_input) r.insert(g.value(nd.inputs[i]).name);
  }
  return r;
}

struct case_options {
  tolerance tol;
  /// Weight inputs become initializers holding the data set's values (one session per data set), so that a
  /// provider that takes only constant weights (oneDNN's convolutions, products, normalisations) gets the node.
  bool constant_weights = false;
};

/// One case, in this process.
template <class S>
outcome run_case(const fs::path& c, const session_options& so, const case_options& co) {
  const tolerance& tol = co.tol;
  auto s = S::create(c / "model.onnx", so, providers_for<S>(so));
  if (!s) return {"error", "create: " + s.status().to_string()};
  const auto sets = data_sets(c);
  if (sets.empty()) return {"error", "no test_data_set_N folder"};
  load_options lo;
  lo.run_checker = false;
  lo.shape_inference = shape_inference_mode::off;
  const auto m = load_model(c / "model.onnx", lo);
  const bool random = m && has_random_node(m->graph);
  const auto dropout = random ? training_dropout(m->graph) : std::nullopt;
  std::optional<model> source;  // the model as sessions load it, for --constant-weights
  std::set<std::string> weights;
  if (co.constant_weights) {
    auto full = load_model(c / "model.onnx");
    if (!full) return {"error", "load: " + full.status().to_string()};
    weights = weight_inputs(full->graph);
    source = std::move(*full);
  }
  int offloaded = 0;
  for (const auto& set : sets) {
    const std::string sname = set.filename().string();
    const auto in_files = numbered(set, "input"), out_files = numbered(set, "output");
    if (in_files.size() > s->inputs().size())
      return {"error", sname + ": " + std::to_string(in_files.size()) + " input files for a model of " +
                           std::to_string(s->inputs().size()) + " inputs"};
    std::vector<named_value> feeds;
    for (std::size_t k = 0; k < in_files.size(); ++k) {
      auto v = load_value(in_files[k], s->inputs()[k].type);
      if (!v) return {"error", sname + ": " + v.status().to_string()};
      feeds.push_back({s->inputs()[k].name, as_declared(std::move(*v), s->inputs()[k].type)});
    }
    std::optional<S> with_constants;
    const std::vector<named_value> all_feeds = feeds;  // what the random-output checks read (a dropout's ratio)
    if (co.constant_weights) {
      model mc = *source;
      // Before IR 4 an initializer had to be a graph input too; the constants need IR 4's rule.
      mc.ir_version = std::max<std::int64_t>(mc.ir_version, 4);
      std::vector<named_value> rest;
      for (auto& f : feeds) {
        const value_id v = mc.graph.find_value(f.name);
        if (weights.contains(f.name) && v != no_id && f.value.is_tensor()) mc.graph.make_input_constant(v, f.value.as_tensor());
        else rest.push_back(std::move(f));
      }
      feeds = std::move(rest);
      auto sc = S::create(std::move(mc), so, providers_for<S>(so));
      if (!sc) return {"error", sname + ": create with constant weights: " + sc.status().to_string()};
      with_constants.emplace(std::move(*sc));
    }
    const S& ran = with_constants ? *with_constants : *s;
    offloaded = std::max(offloaded, offloaded_nodes(ran.plan()));
    auto out = ran.run_values(feeds);
    if (!out) return {"error", sname + ": run: " + out.status().to_string()};
    if (out_files.size() != out->size())
      return {"fail", sname + ": " + std::to_string(out->size()) + " outputs, expected " + std::to_string(out_files.size())};
    for (std::size_t k = 0; k < out_files.size(); ++k) {
      auto want = load_value(out_files[k], s->outputs()[k].type);
      if (!want) return {"error", sname + ": " + want.status().to_string()};
      const ivalue w = as_declared(std::move(*want), s->outputs()[k].type);
      std::string d;
      if (!random) d = compare_value((*out)[k], w, tol);
      else if (dropout && s->outputs()[k].name == dropout->output) d = compare_dropout((*out)[k], w, all_feeds, *dropout, tol);
      else if (!(dropout && s->outputs()[k].name == dropout->mask)) d = compare_random((*out)[k], w, tol);
      else d = compare_random_tensor((*out)[k].as_tensor(), w.as_tensor(), tol);
      if (!d.empty())
        return {"fail", sname + ": output '" + s->outputs()[k].name + "': " + d + (random ? " (random outputs)" : "")};
    }
  }
  return {"pass", random ? "random outputs: shape, type and range compared" : "", offloaded};
}

std::string one_line(std::string s) {
  for (auto& ch : s)
    if (ch == '\n' || ch == '\t' || ch == '\r') ch = ' ';
  return s;
}

/// The outcome of a case from its line written by a worker child (run_in_workers), or why there is none: a crash
/// or running past `limit_s` seconds is an error of that case.
outcome from_child(const child_result& r, int limit_s) {
  const auto& text = r.text;
  const auto tab = text.find('\t');
  const auto tab2 = tab == std::string::npos ? tab : text.find('\t', tab + 1);
  if (!r.finished || tab2 == std::string::npos) return {"error", r.finished ? one_line(text) : r.why(limit_s)};
  std::string reason = text.substr(tab2 + 1);
  while (!reason.empty() && reason.back() == '\n') reason.pop_back();
  return {text.substr(0, tab), reason, std::stoi(text.substr(tab + 1, tab2 - tab - 1))};
}

struct case_ref {
  std::string suite, name;
  fs::path dir;
};

/// The cases under `root`: a case folder, a suite folder, or the data folder holding the suites.
std::vector<case_ref> find_cases(const fs::path& root, const std::vector<std::string>& only_suites) {
  std::vector<case_ref> cases;
  const auto add_suite = [&](const fs::path& dir, const std::string& suite) {
    std::vector<fs::path> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (fs::exists(e.path() / "model.onnx")) found.push_back(e.path());
    std::sort(found.begin(), found.end());
    for (const auto& f : found) cases.push_back({suite, f.filename().string(), f});
  };
  if (fs::exists(root / "model.onnx")) {
    cases.push_back({root.parent_path().filename().string(), root.filename().string(), root});
    return cases;
  }
  bool any_suite = false;
  for (const char* s : suite_names)
    if (fs::is_directory(root / s)) {
      any_suite = true;
      if (only_suites.empty() || std::find(only_suites.begin(), only_suites.end(), s) != only_suites.end())
        add_suite(root / s, s);
    }
  if (!any_suite) add_suite(root, root.filename().string());
  return cases;
}

/// "suite/case reason..." lines; '#' starts a comment.
Result<std::map<std::string, std::string>> read_expected(const fs::path& p) {
  std::ifstream f(p);
  if (!f) return Status(errc::no_such_file, "cannot read the expected failures file '" + p.string() + "'");
  std::map<std::string, std::string> m;
  std::string line;
  int no = 0;
  while (std::getline(f, line)) {
    ++no;
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    const auto sp = line.find_first_of(" \t", first);
    const std::string key = line.substr(first, sp == std::string::npos ? std::string::npos : sp - first);
    std::string why = sp == std::string::npos ? "" : line.substr(line.find_first_not_of(" \t", sp) == std::string::npos ? line.size() : line.find_first_not_of(" \t", sp));
    if (key.find('/') == std::string::npos)
      return Status(errc::invalid_argument, p.string() + ":" + std::to_string(no) + ": expected 'suite/case reason', got '" + line + "'");
    if (why.empty())
      return Status(errc::invalid_argument, p.string() + ":" + std::to_string(no) + ": '" + key + "' has no reason");
    if (!m.emplace(key, why).second)
      return Status(errc::invalid_argument, p.string() + ":" + std::to_string(no) + ": '" + key + "' is listed twice");
  }
  return m;
}

/// The reason a new line of the expected failures gets: the operators without a kernel, or the message.
std::string short_reason(const outcome& o) {
  static const std::regex op_re(R"((?:#\d+|'[^']*') \(([A-Za-z0-9_]+)\))");
  if (o.reason.find("can run:") != std::string::npos) {
    std::set<std::string> ops;
    for (std::sregex_iterator it(o.reason.begin(), o.reason.end(), op_re), end; it != end; ++it) ops.insert((*it)[1]);
    if (!ops.empty()) {
      std::string r = "no kernel yet for";
      bool first = true;
      for (const auto& op : ops) r += (first ? " " : ", ") + op, first = false;
      return r;
    }
  }
  std::string r = one_line(o.reason);
  if (const auto at = r.find("model '"); at != std::string::npos)
    if (const auto end = r.find("': ", at); end != std::string::npos) r.erase(at, end + 3 - at);
  if (r.size() > 220) r = r.substr(0, 217) + "...";
  return r;
}

template <class S>
int test_runner_with(const args& a, const fs::path& root) {
  auto so = session_options_from(a);
  if (!so) return fail(so.status());
  if (!a.get("--threads")) so->set_intra_op_threads(1);
  // Each provider is checked on everything it claims: placement keeps the stack's order (ONNX Runtime's) unless
  // --config epstack.placement=... asks otherwise, so that cost estimates never hide a provider's node from the check.
  if (!so->config(config_keys::placement)) so->set_config(config_keys::placement, "priority");
  case_options co;
  tolerance& tol = co.tol;
  if (auto r = a.get("--rtol")) tol.rtol = std::stod(*r);
  if (auto r = a.get("--atol")) tol.atol = std::stod(*r);
  co.constant_weights = a.flag("--constant-weights");
  int limit_s = 120;
  if (auto t = a.get("--timeout")) {
    auto n = to_int(*t, "--timeout");
    if (!n || *n < 1) return usage_error("--timeout needs a positive number of seconds");
    limit_s = static_cast<int>(*n);
  }
  std::map<std::string, std::string> expected;
  if (auto e = a.get("--expected-failures")) {
    auto m = read_expected(*e);
    if (!m) return fail(m.status());
    expected = std::move(*m);
  }
  const auto cases = find_cases(root, a.all("--suite"));
  const auto filter = a.get("--case");
  std::ofstream report;
  if (auto r = a.get("--report")) {
    report.open(*r, std::ios::trunc);
    if (!report) return fail(Status(errc::fail, "cannot write the report '" + *r + "'"));
    report << "suite\tcase\tresult\treason\n";
  }
  const bool verbose = a.flag("--verbose");
  struct tally {
    int total = 0, pass = 0, fail = 0, error = 0, offloaded = 0;
  };
  std::map<std::string, tally> per_suite;
  std::vector<std::string> unexpected_failures, unexpected_passes, failures;
  std::set<std::string> seen;
  const auto record = [&](const case_ref& c, const outcome& o) {
    const std::string key = c.suite + "/" + c.name;
    auto& t = per_suite[c.suite];
    ++t.total;
    (o.result == "pass" ? t.pass : o.result == "fail" ? t.fail : t.error)++;
    if (o.result == "pass" && o.offloaded > 0) ++t.offloaded;
    if (report) report << c.suite << '\t' << c.name << '\t' << o.result << '\t' << one_line(o.reason) << '\n';
    if (verbose || (o.result != "pass" && !expected.contains(key)))
      std::cout << o.result << ' ' << key << (o.reason.empty() ? "" : ": " + o.reason) << '\n';
    if (o.result != "pass") failures.push_back(key + " " + short_reason(o));
    const bool listed = expected.contains(key);
    if (o.result != "pass" && !listed) unexpected_failures.push_back(key);
    if (o.result == "pass" && listed) unexpected_passes.push_back(key);
  };
  std::vector<const case_ref*> to_run;
  for (const auto& c : cases) {
    const std::string key = c.suite + "/" + c.name;
    if (filter && key.find(*filter) == std::string::npos) continue;
    seen.insert(key);
    to_run.push_back(&c);
  }
  if (a.flag("--no-isolate")) {
    for (const auto* c : to_run) record(*c, run_case<S>(c->dir, *so, co));
  } else {
    // Cases run in worker children, many to a child: a crash or a hang ends only its case. A case that does not pass
    // runs again in a process of its own, as every case once did, and that result counts: a worker had run other
    // cases before it.
    const auto case_line = [&](std::size_t i) {
      const outcome o = run_case<S>(to_run[i]->dir, *so, co);
      return o.result + "\t" + std::to_string(o.offloaded) + "\t" + one_line(o.reason) + "\n";
    };
    run_in_workers(to_run.size(), case_line, [&](std::size_t i, const child_result& r) {
      outcome o = from_child(r, limit_s);
      if (o.result != "pass") {
        outcome alone = from_child(run_in_child([&] { return case_line(i); }, limit_s), limit_s);
        if (alone.result != o.result)
          std::cout << "note: " << to_run[i]->suite << "/" << to_run[i]->name << ": " << o.result
                    << " after other cases in a worker process, " << alone.result << " in a process of its own (counted)\n";
        o = std::move(alone);
      }
      record(*to_run[i], o);
      return true;
    }, limit_s);
  }
  if (auto w = a.get("--write-expected")) {
    std::ofstream f(*w, std::ios::trunc);
    f << "# Expected failures of `epstack test-runner` (suite/case, then why; kept from the previous list, or the\n"
         "# engine's message for a new line). The run fails on a failure not listed here and on a listed case that\n"
         "# passes, so the list only shrinks. Rewrite: epstack test-runner DATA --expected-failures F --write-expected F\n";
    for (const auto& line : failures) {
      const auto sp = line.find(' ');
      const std::string key = line.substr(0, sp);
      f << key << ' ' << (expected.contains(key) ? expected.at(key) : line.substr(sp + 1)) << '\n';
    }
  }
  tally all;
  std::ostringstream sum;
  sum << "summary:";
  bool first = true;
  for (const char* s : suite_names) {
    auto it = per_suite.find(s);
    if (it == per_suite.end()) continue;
    const auto& t = it->second;
    sum << (first ? " " : ", ") << s << " " << t.pass << "/" << t.total;
    first = false;
  }
  for (const auto& [s, t] : per_suite) {
    if (std::find(std::begin(suite_names), std::end(suite_names), s) == std::end(suite_names))
      sum << (first ? " " : ", ") << s << " " << t.pass << "/" << t.total, first = false;
    all.total += t.total, all.pass += t.pass, all.fail += t.fail, all.error += t.error;
    all.offloaded += t.offloaded;
  }
  sum << "; total " << all.pass << "/" << all.total << " pass, " << all.fail << " fail, " << all.error << " error";
  if (all.offloaded > 0) sum << "; " << all.offloaded << " passing cases put nodes on a provider other than the CPU";
  if (!expected.empty()) {
    std::size_t stale = 0;
    for (const auto& [k, why] : expected)
      if (!seen.contains(k) && !filter && a.all("--suite").empty()) ++stale;
    sum << "; " << unexpected_failures.size() << " unexpected failures, " << unexpected_passes.size()
        << " unexpected passes";
    if (stale) sum << ", " << stale << " listed cases not found";
  }
  for (const auto& k : unexpected_passes) std::cout << "unexpected pass " << k << " (remove it from the expected failures)\n";
  if (report) report << "# " << sum.str() << '\n';
  std::cout << sum.str() << std::endl;
  if (!expected.empty() || a.get("--expected-failures")) return unexpected_failures.empty() && unexpected_passes.empty() ? 0 : 1;
  return all.pass == all.total ? 0 : 1;
}

}  // namespace

int test_runner(const std::vector<std::string>& argv) {
  auto a = args::parse(argv,
                       {"--providers", "--threads", "--config", "--opt", "--free-dims", "--report", "--expected-failures",
                        "--write-expected", "--suite", "--case", "--rtol", "--atol", "--timeout"},
                       {"--verbose", "--no-isolate", "--skip-missing", "--constant-weights"});
  if (!a) return usage_error(a.status().message());
  if (a->positional.size() != 1) return usage_error("test-runner needs one data folder");
  const fs::path root = a->positional[0];
  if (!fs::is_directory(root)) {
    if (a->flag("--skip-missing")) {
      std::cout << "SKIP: no test data at '" << root.string() << "' (install libonnx-testdata)\n";
      return 77;
    }
    return fail(Status(errc::no_such_file, "no test data folder '" + root.string() + "'"));
  }
  int rc = 0;
  const auto st = with_stack(a->get("--providers").value_or("cpu"), [&](auto tag) {
    rc = test_runner_with<typename decltype(tag)::type>(*a, root);
  });
  if (!st) return fail(st);
  return rc;
}

}  // namespace epstack::cli
