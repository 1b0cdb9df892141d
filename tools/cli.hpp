#pragma once
// Shared parts of the epstack command-line tool: argument parsing, the provider stacks it is compiled with, output
// summaries, and a small JSON writer.
#include <epstack/core/errors.hpp>
#include <epstack/provider/cost_model.hpp>
#include <epstack/providers/cpu.hpp>
#if defined(EPSTACK_WITH_DNNL)
#include <epstack/providers/dnnl.hpp>
#endif
#include <epstack/runtime/session.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

namespace epstack::cli {

inline int fail(const Status& st) {
  std::cerr << "epstack: " << st.to_string() << "\n";
  return 1;
}
inline int usage_error(const std::string& msg) {
  std::cerr << "epstack: " << msg << " (see 'epstack help')\n";
  return 2;
}

/// Arguments after the subcommand: positional ones, and `--key value` / `--key=value` options (repeatable).
struct args {
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> options;
  std::vector<std::string> flags;

  /// Parses `argv`; `with_value` lists the options that take a value, `boolean` those that do not.
  static Result<args> parse(const std::vector<std::string>& argv, const std::vector<std::string>& with_value,
                            const std::vector<std::string>& boolean = {}) {
    args a;
    for (std::size_t i = 0; i < argv.size(); ++i) {
      std::string k = argv[i];
      if (k.rfind("--", 0) != 0 || k == "--") {
        a.positional.push_back(k);
        continue;
      }
      std::string v;
      bool inline_value = false;
      if (const auto eq = k.find('='); eq != std::string::npos) {
        v = k.substr(eq + 1);
        k = k.substr(0, eq);
        inline_value = true;
      }
      if (std::find(boolean.begin(), boolean.end(), k) != boolean.end()) {
        a.flags.push_back(k);
        continue;
      }
      if (std::find(with_value.begin(), with_value.end(), k) == with_value.end())
        return Status(errc::invalid_argument, "unknown option '" + k + "'");
      if (!inline_value) {
        if (i + 1 >= argv.size()) return Status(errc::invalid_argument, "option '" + k + "' needs a value");
        v = argv[++i];
      }
      a.options.emplace_back(k, v);
    }
    return a;
  }
  [[nodiscard]] std::optional<std::string> get(std::string_view k) const {
    std::optional<std::string> r;
    for (const auto& [key, v] : options)
      if (key == k) r = v;
    return r;
  }
  [[nodiscard]] std::vector<std::string> all(std::string_view k) const {
    std::vector<std::string> r;
    for (const auto& [key, v] : options)
      if (key == k) r.push_back(v);
    return r;
  }
  [[nodiscard]] bool flag(std::string_view k) const { return std::find(flags.begin(), flags.end(), k) != flags.end(); }
};

/// EPSTACK_MACHINE_CLASS that names no class is ignored by the library (cost_model.hpp); the tool says so.
inline void warn_unknown_machine_class() {
  const char* e = std::getenv("EPSTACK_MACHINE_CLASS");
  if (e != nullptr && !machine_class_named(e))
    std::cerr << "epstack: warning: EPSTACK_MACHINE_CLASS='" << e
              << "' names no machine class (avx512_full, avx512_split, avx512_intel); placement estimates use this machine's ("
              << to_string(this_machine_class()) << ")\n";
}

inline Result<long long> to_int(const std::string& s, std::string_view what) {
  try {
    std::size_t pos = 0;
    const long long v = std::stoll(s, &pos);
    if (pos != s.size()) throw std::invalid_argument(s);
    return v;
  } catch (const std::exception&) {
    return Status(errc::invalid_argument, std::string(what) + ": '" + s + "' is not an integer");
  }
}

/// Splits "a=1,b=2" into pairs.
inline Result<std::vector<std::pair<std::string, std::string>>> key_values(const std::string& s, std::string_view what) {
  std::vector<std::pair<std::string, std::string>> r;
  std::size_t p = 0;
  while (p <= s.size()) {
    const auto q = s.find(',', p);
    const std::string part = s.substr(p, q == std::string::npos ? std::string::npos : q - p);
    if (!part.empty()) {
      const auto eq = part.find('=');
      if (eq == std::string::npos || eq == 0)
        return Status(errc::invalid_argument, std::string(what) + ": expected key=value, got '" + part + "'");
      r.emplace_back(part.substr(0, eq), part.substr(eq + 1));
    }
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return r;
}

/// Session options from --threads, --config k=v (repeatable), --free-dims k=v,... (free dimension overrides) and --opt.
inline Result<session_options> session_options_from(const args& a) {
  session_options so;
  if (auto t = a.get("--threads")) {
    EPSTACK_ASSIGN_OR_RETURN(auto n, to_int(*t, "--threads"));
    if (n < 1) return Status(errc::invalid_argument, "--threads must be at least 1");
    so.set_intra_op_threads(static_cast<int>(n));
  }
  for (const auto& c : a.all("--config")) {
    EPSTACK_ASSIGN_OR_RETURN(auto kvs, key_values(c, "--config"));
    for (const auto& [k, v] : kvs) so.set_config(k, v);
  }
  if (auto d = a.get("--free-dims")) {
    EPSTACK_ASSIGN_OR_RETURN(auto kvs, key_values(*d, "--free-dims"));
    for (const auto& [k, v] : kvs) {
      EPSTACK_ASSIGN_OR_RETURN(auto n, to_int(v, "--free-dims"));
      if (n < 1) return Status(errc::invalid_argument, "--free-dims values must be positive");
      so.add_free_dimension_override(k, n);
    }
  }
  if (auto o = a.get("--opt")) {
    if (*o == "all") so.set_graph_optimization_level(graph_optimization_level::all);
    else if (*o == "extended") so.set_graph_optimization_level(graph_optimization_level::extended);
    else if (*o == "basic") so.set_graph_optimization_level(graph_optimization_level::basic);
    else if (*o == "disable" || *o == "disabled") so.set_graph_optimization_level(graph_optimization_level::disable);
    else return Status(errc::invalid_argument, "--opt must be all, extended, basic or disable, got '" + *o + "'");
  }
  return so;
}

/// The provider stacks this tool is compiled with, by the names `--providers` accepts.
inline const std::vector<std::string>& stack_names() {
#if defined(EPSTACK_WITH_DNNL)
  static const std::vector<std::string> names{"cpu", "dnnl,cpu (or dnnl)"};
#else
  static const std::vector<std::string> names{"cpu"};
#endif
  return names;
}

/// The stack used when --providers is not given to `compile` and `ctxgen`: every provider of the build.
inline std::string default_stack() {
#if defined(EPSTACK_WITH_DNNL)
  return "dnnl,cpu";
#else
  return "cpu";
#endif
}

/// Calls `f(std::type_identity<Session>{})` for the session type of the stack named `providers`; invalid_argument
/// listing the stacks when there is none of that name.
template <class F>
Status with_stack(const std::string& providers_in, F&& f) {
  // "default": every provider of the build (default_stack()).
  const std::string providers = providers_in == "default" ? default_stack() : providers_in;
  if (providers == "cpu" || providers.empty()) {
    f(std::type_identity<session<cpu_provider>>{});
    return {};
  }
#if defined(EPSTACK_WITH_DNNL)
  if (providers == "dnnl,cpu" || providers == "dnnl") {
    f(std::type_identity<session<dnnl_provider, cpu_provider>>{});
    return {};
  }
#endif
  std::string list;
  for (const auto& n : stack_names()) list += (list.empty() ? "" : ", ") + n;
  return Status(errc::invalid_argument, "unknown provider stack '" + providers + "'; this build has: " + list);
}

/// A provider's options from the session's config entries (`--config`): `dnnl.winograd` = 1 turns oneDNN's
/// Winograd convolutions on (0, the default: off). Other providers have none.
template <class P>
void configure_provider(P&, const session_options&) {}
#if defined(EPSTACK_WITH_DNNL)
inline void configure_provider(dnnl_provider& p, const session_options& so) {
  if (const auto w = so.config("dnnl.winograd")) p.options.winograd = *w == "1";
}
#endif
/// The options a provider takes by its --providers name (ctxgen's `-i "key|value"`); each is the config entry
/// `NAME.key` with a value of 0 or 1.
inline std::vector<std::string> provider_option_names([[maybe_unused]] std::string_view provider) {
#if defined(EPSTACK_WITH_DNNL)
  if (provider == "dnnl") return {"winograd"};
#endif
  return {};
}
/// The providers of session type S, configured from `so`.
template <class S>
typename S::providers_type providers_for(const session_options& so) {
  typename S::providers_type providers{};
  std::apply([&](auto&... p) { (configure_provider(p, so), ...); }, providers);
  return providers;
}

/// "float[1,3,224,224]"
inline std::string describe(const tensor& t) {
  std::string s(to_string(t.type()));
  s += '[';
  for (std::size_t i = 0; i < t.rank(); ++i) s += (i ? "," : "") + std::to_string(t.sizes()[i]);
  return s + ']';
}

/// One line per output: type and shape, and for numbers min / max / mean and the first values.
inline std::string summary(const std::string& name, const ivalue& v) {
  std::ostringstream os;
  os << name << ": ";
  if (!v.is_tensor()) {
    os << v.kind_name();
    if (v.is_sequence()) os << " of " << v.as_sequence().items.size() << " tensors";
    return os.str();
  }
  const tensor& t = v.as_tensor();
  os << describe(t);
  double mn = 0, mx = 0, sum = 0;
  std::vector<double> first;
  const auto stats = [&](const auto* p) {
    for (std::size_t i = 0; i < t.element_count(); ++i) {
      const double x = static_cast<double>(p[i]);
      if (i == 0) mn = mx = x;
      mn = std::min(mn, x);
      mx = std::max(mx, x);
      sum += x;
      if (first.size() < 4) first.push_back(x);
    }
  };
  switch (t.type()) {
    case element_type::float32: stats(t.typed<float>()); break;
    case element_type::float64: stats(t.typed<double>()); break;
    case element_type::int64: stats(t.typed<std::int64_t>()); break;
    case element_type::int32: stats(t.typed<std::int32_t>()); break;
    case element_type::boolean: stats(t.typed<bool>()); break;
    case element_type::uint8: stats(t.typed<std::uint8_t>()); break;
    case element_type::int8: stats(t.typed<std::int8_t>()); break;
    default: return os.str();
  }
  if (t.element_count() > 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "  min %.6g  max %.6g  mean %.6g  first", mn, mx, sum / static_cast<double>(t.element_count()));
    os << buf;
    for (double x : first) {
      std::snprintf(buf, sizeof buf, " %.6g", x);
      os << buf;
    }
  }
  return os.str();
}

/// A minimal JSON writer for the one-line results of `perf`.
class json {
 public:
  json& key(std::string_view k) {
    sep();
    str(k);
    os_ << ':';
    fresh_ = true;
    return *this;
  }
  json& value(double v, int digits = 3) {
    sep();
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    os_ << buf;
    return *this;
  }
  /// `v` to 9 significant digits (1e-07 stays 1e-07, where value's fixed decimals write 0.000), null when it is
  /// not finite (JSON has no inf or nan).
  json& number(double v) {
    if (!std::isfinite(v)) return null();
    sep();
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    os_ << buf;
    return *this;
  }
  json& value(long long v) {
    sep();
    os_ << v;
    return *this;
  }
  json& value(int v) { return value(static_cast<long long>(v)); }
  json& value(std::size_t v) { return value(static_cast<long long>(v)); }
  json& value(std::string_view s) {
    sep();
    str(s);
    return *this;
  }
  json& value(const char* s) { return value(std::string_view(s)); }
  json& null() {
    sep();
    os_ << "null";
    return *this;
  }
  json& boolean(bool b) {
    sep();
    os_ << (b ? "true" : "false");
    return *this;
  }
  json& begin_object() {
    sep();
    os_ << '{';
    fresh_ = true;
    return *this;
  }
  json& end_object() {
    os_ << '}';
    fresh_ = false;
    return *this;
  }
  json& begin_array() {
    sep();
    os_ << '[';
    fresh_ = true;
    return *this;
  }
  json& end_array() {
    os_ << ']';
    fresh_ = false;
    return *this;
  }
  [[nodiscard]] std::string str() const { return os_.str(); }

 private:
  void sep() {
    if (!fresh_) os_ << ',';
    fresh_ = false;
  }
  void str(std::string_view s) {
    os_ << '"';
    for (char c : s) {
      if (c == '"' || c == '\\') os_ << '\\' << c;
      else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        os_ << buf;
      } else os_ << c;
    }
    os_ << '"';
  }
  std::ostringstream os_;
  bool fresh_ = true;
};

// Subcommands (one file each).
int inspect(const std::vector<std::string>& argv);
int generate(const std::vector<std::string>& argv);
int convert(const std::vector<std::string>& argv);
int run(const std::vector<std::string>& argv);
int partition(const std::vector<std::string>& argv);
int perf(const std::vector<std::string>& argv);
int compare(const std::vector<std::string>& argv);
int compile(const std::vector<std::string>& argv);
int ops(const std::vector<std::string>& argv);
int ctxgen(const std::vector<std::string>& argv);
int test_runner(const std::vector<std::string>& argv);
int fuzz_providers(const std::vector<std::string>& argv);
int cache(const std::vector<std::string>& argv);

}  // namespace epstack::cli
