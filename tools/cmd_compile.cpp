// epstack compile (a model to an EPContext model) and epstack ctxgen (ONNX Runtime's ep_weight_sharing_ctx_gen).
#include "cli.hpp"

#include <epstack/runtime/compile_model.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include <unistd.h>

namespace epstack::cli {
namespace {

namespace fs = std::filesystem;

// A one-line progress bar on a terminal (stderr); silent otherwise.
progress_callback progress_bar(std::string label) {
  if (::isatty(2) == 0) return {};
  return [label = std::move(label)](const compile_progress& p) {
    const double f = p.total > 0 ? static_cast<double>(p.done) / static_cast<double>(p.total) : 0.0;
    const int filled = static_cast<int>(f * 20);
    std::fprintf(stderr, "\r%s [%.*s%*s] %-9.*s %zu/%zu %.*s\033[K", label.c_str(), filled, "####################",
                 20 - filled, "", static_cast<int>(p.stage.size()), p.stage.data(), p.done, p.total,
                 static_cast<int>(std::min<std::size_t>(p.detail.size(), 40)), p.detail.data());
    std::fflush(stderr);
    return true;
  };
}
void end_progress() {
  if (::isatty(2) != 0) std::fprintf(stderr, "\r\033[K");
}

void print_report(const ep_context_report& r, double ms) {
  std::error_code ec;
  const auto size = fs::file_size(r.model_written, ec);
  std::cout << "wrote " << r.model_written.string() << " (" << r.nodes_written << " EPContext node"
            << (r.nodes_written == 1 ? "" : "s");
  if (!ec) std::cout << ", " << size << " bytes";
  std::cout << ")";
  for (const auto& b : r.binaries_written) std::cout << "\n  and " << b.string() << " (" << fs::file_size(b) << " bytes)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", ms);
  std::cout << "\ncompile time " << buf << " ms\n";
  for (const auto& w : r.warnings) std::cerr << "epstack: warning: " << w << "\n";
}

template <class S>
int compile_with(const args& a, const std::string& model) {
  auto so = session_options_from(a);
  if (!so) return fail(so.status());
  compile_options co;
  co.session = *so;
  co.input_path = model;
  const fs::path in(model);
  const std::string format = a.get("--format").value_or("onnx");
  if (format != "onnx" && format != "deploy") return usage_error("--format must be onnx or deploy");
  co.format = format == "deploy" ? compile_format::deploy : compile_format::onnx;
  co.output_path = a.get("-o").value_or(a.get("--output").value_or(
      (in.parent_path() / (in.stem().string() + (format == "deploy" ? ".deploy" : "_ctx.onnx"))).string()));
  if (co.format == compile_format::deploy && (a.get("--embed") || a.get("--external-initializers")))
    return usage_error("--embed and --external-initializers do not apply to --format deploy (one file holds everything)");
  if (auto e = a.get("--embed")) {
    if (*e != "0" && *e != "1") return usage_error("--embed must be 0 or 1");
    co.embed_mode = *e == "1" ? 1 : 0;
  }
  if (auto x = a.get("--external-initializers")) co.external_initializers_file = *x;
  if (auto p = a.get("--prefix")) co.session.set_config(config_keys::ep_context_node_name_prefix, *p);
  if (auto d = a.get("--dims")) {
    auto kvs = key_values(*d, "--dims");
    if (!kvs) return fail(kvs.status());
    for (const auto& [k, v] : *kvs) {
      auto n = to_int(v, "--dims");
      if (!n || *n < 1) return usage_error("--dims values must be positive integers");
      co.session.add_free_dimension_override(k, *n);
    }
  }
  co.error_if_output_file_exists = !a.flag("--overwrite");
  co.error_if_no_nodes_compiled = a.flag("--require-compiled");
  co.progress = progress_bar("compiling");
  const auto t0 = std::chrono::steady_clock::now();
  auto r = compile_model_for<S>(co, providers_for<S>(co.session));
  end_progress();
  if (!r) return fail(r.status());
  print_report(*r, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

// "k|v k2|v2" (ONNX Runtime's tool syntax); duplicate keys are an error.
Result<std::vector<std::pair<std::string, std::string>>> pipe_pairs(const std::string& s, std::string_view what) {
  std::vector<std::pair<std::string, std::string>> r;
  std::set<std::string> seen;
  std::istringstream is(s);
  std::string tok;
  while (is >> tok) {
    const auto bar = tok.find('|');
    if (bar == std::string::npos || bar == 0 || bar + 1 == tok.size())
      return Status(errc::invalid_argument, std::string(what) + ": expected 'key|value', got '" + tok + "'");
    auto k = tok.substr(0, bar);
    if (!seen.insert(k).second) return Status(errc::invalid_argument, std::string(what) + ": key '" + k + "' given twice");
    r.emplace_back(std::move(k), tok.substr(bar + 1));
  }
  return r;
}

int ctxgen_usage(std::ostream& os, int code) {
  os << "usage: epstack ctxgen [options] model1.onnx,model2.onnx,...\n"
        "Compiles models that share weights into one EP context binary ([model1_name]_[ep].bin) and one\n"
        "_ctx.onnx per model, beside each source model (ONNX Runtime's ep_weight_sharing_ctx_gen).\n"
        "options:\n"
        "  -e PROVIDER    the provider to compile for, by --providers name:";
  for (const auto& n : stack_names()) os << " " << n;
  os << "\n"
        "  -i \"k|v ...\"   provider options of the -e provider:";
  for (const auto& n : stack_names()) {
    const std::string ep = n.substr(0, n.find(','));
    const auto keys = provider_option_names(ep);
    os << " " << ep << " (";
    for (std::size_t i = 0; i < keys.size(); ++i) os << (i ? ", " : "") << keys[i] << "|0 or 1";
    os << (keys.empty() ? "none)" : ")");
  }
  os << "\n"
        "  -C \"k|v ...\"   session options; ep.context_enable is forced to 1 and ep.context_embed_mode to 0,\n"
        "                 ep.context_file_path is refused (outputs go beside each model)\n"
        "  -v             verbose: the files written and the time each model took\n"
        "  -h             this text\n";
  return code;
}

template <class S>
int ctxgen_with(const std::vector<fs::path>& models, const session_options& base, bool verbose) {
  for (const auto& m : models) {
    const fs::path out = m.parent_path() / (m.stem().string() + "_ctx.onnx");
    std::error_code ec;
    if (fs::exists(out, ec)) return fail(Status(errc::invalid_argument, "'" + out.string() + "' exists already"));
  }
  for (std::size_t i = 0; i < models.size(); ++i) {
    session_options so = base;
    so.set_config(config_keys::ep_context_enable, "1");
    so.set_config(config_keys::ep_context_embed_mode, "0");
    so.set_config(config_keys::ep_share_contexts, "1");
    if (i + 1 == models.size()) so.set_config(config_keys::ep_stop_share_contexts, "1");
    if (auto bar = progress_bar("[" + std::to_string(i + 1) + "/" + std::to_string(models.size()) + "] " +
                                models[i].filename().string()))
      so.set_progress_callback(bar);
    const auto t0 = std::chrono::steady_clock::now();
    auto s = S::create(models[i], so, providers_for<S>(so));
    end_progress();
    if (!s) return fail(s.status().with_context("model '" + models[i].string() + "'"));
    if (verbose) print_report(s->ep_context(), std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    else if (s->ep_context().model_written.empty())
      for (const auto& w : s->ep_context().warnings) std::cerr << "epstack: warning: " << w << "\n";
  }
  if (!verbose) std::cout << "compiled " << models.size() << " model(s) sharing one context binary\n";
  return 0;
}

}  // namespace

int compile(const std::vector<std::string>& argv) {
  // -o is accepted as the short form of --output.
  std::vector<std::string> v;
  for (std::size_t i = 0; i < argv.size(); ++i) v.push_back(argv[i] == "-o" ? "--output" : argv[i]);
  auto a = args::parse(v, {"--output", "--embed", "--providers", "--config", "--threads", "--opt", "--external-initializers",
                           "--prefix", "--dims", "--free-dims", "--format"},
                       {"--overwrite", "--require-compiled"});
  if (!a) return usage_error(a.status().message());
  if (a->positional.size() != 1)
    return usage_error("usage: epstack compile MODEL [-o OUT] [--format onnx|deploy] [--embed 0|1] [options]");
  int rc = 0;
  const auto st = with_stack(a->get("--providers").value_or(default_stack()), [&](auto tag) {
    rc = compile_with<typename decltype(tag)::type>(*a, a->positional[0]);
  });
  return st ? rc : fail(st);
}

int ctxgen(const std::vector<std::string>& argv) {
  std::string provider = default_stack();
  session_options so;
  std::vector<std::pair<std::string, std::string>> provider_options;
  bool verbose = false;
  std::string list;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& k = argv[i];
    const auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argv.size()) return std::nullopt;
      return argv[++i];
    };
    if (k == "-h" || k == "--help") return ctxgen_usage(std::cout, 0);
    if (k == "-v") {
      verbose = true;
    } else if (k == "-e") {
      auto x = value();
      if (!x) return usage_error("-e needs a provider");
      provider = *x;
    } else if (k == "-i") {
      auto x = value();
      if (!x) return usage_error("-i needs \"key|value ...\"");
      auto kv = pipe_pairs(*x, "-i");
      if (!kv) return fail(kv.status());
      provider_options.insert(provider_options.end(), kv->begin(), kv->end());
    } else if (k == "-C") {
      auto x = value();
      if (!x) return usage_error("-C needs \"key|value ...\"");
      auto kv = pipe_pairs(*x, "-C");
      if (!kv) return fail(kv.status());
      for (const auto& [key, val] : *kv) {
        if (key == config_keys::ep_context_file_path)
          return fail(Status(errc::invalid_argument, "-C: ep.context_file_path is refused: the outputs go beside each model"));
        so.set_config(key, val);
      }
    } else if (!k.empty() && k[0] == '-') {
      return usage_error("ctxgen: unknown option '" + k + "'");
    } else if (list.empty()) {
      list = k;
    } else {
      return usage_error("ctxgen: the models are one comma-separated argument");
    }
  }
  if (list.empty()) return ctxgen_usage(std::cerr, 2);
  // -e names the provider whose contexts are wanted (ONNX Runtime's tool): it compiles everything it claims, whatever
  // the cost estimates say, unless -C sets epstack.placement.
  if (!so.config(config_keys::placement)) so.set_config(config_keys::placement, "priority");
  // Provider options are the -e provider's (the first of a stack): each becomes its config entry NAME.key.
  const std::string ep = provider.substr(0, provider.find(','));
  const auto known = provider_option_names(ep);
  for (const auto& [key, val] : provider_options) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string has;
      for (const auto& k : known) has += (has.empty() ? "" : ", ") + k;
      return fail(Status(errc::invalid_argument, "-i: provider '" + ep + "' has no option '" + key + "' (it has: " +
                                                     (has.empty() ? std::string("none") : has) + ")"));
    }
    if (val != "0" && val != "1")
      return fail(Status(errc::invalid_argument, "-i: option '" + key + "' takes 0 or 1, found '" + val + "'"));
    so.set_config(ep + "." + key, val);
  }
  std::vector<fs::path> models;
  std::set<std::string> seen;
  for (std::size_t at = 0; at <= list.size();) {
    const auto comma = std::min(list.find(',', at), list.size());
    const std::string m = list.substr(at, comma - at);
    if (!m.empty()) {
      if (!seen.insert(fs::absolute(m).lexically_normal().string()).second)
        return usage_error("ctxgen: model '" + m + "' is listed twice");
      models.emplace_back(m);
    }
    at = comma + 1;
  }
  if (models.empty()) return ctxgen_usage(std::cerr, 2);
  // Each _ctx.onnx names the shared binary by a plain relative name, so the group lives in one folder.
  for (const auto& m : models)
    if (fs::absolute(m).lexically_normal().parent_path() != fs::absolute(models[0]).lexically_normal().parent_path())
      return fail(Status(errc::invalid_argument, "ctxgen: '" + m.string() + "' is not in the folder of '" +
                                                     models[0].string() + "': the models of a group share one context "
                                                     "binary beside them, so they must be in one folder"));
  int rc = 0;
  const auto st = with_stack(provider, [&](auto tag) { rc = ctxgen_with<typename decltype(tag)::type>(models, so, verbose); });
  return st ? rc : fail(st);
}

}  // namespace epstack::cli
