// Peer tests: every shared model on the CPU stack agrees with ONNX Runtime 1.30 on bit-identical inputs (the
// benchmark input rule): |ours - ORT| <= 1e-5 + 1e-4 * |ORT| for floats, integers and bools exact. The models come
// from EPSTACK_SHARED_MODELS and ONNX Runtime's dumps (ort_bench.mjs --out-dir) from EPSTACK_ORT_DUMPS; a model
// without them is skipped with a message.
#include <epstack/testing/bench_inputs.hpp>
#include <epstack/providers/cpu.hpp>
#if defined(EPSTACK_WITH_DNNL)
#include <epstack/providers/dnnl.hpp>
#endif
#include <epstack/runtime/session.hpp>

#include <doctest/doctest.h>

#include <algorithm>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

using namespace epstack;
namespace fs = std::filesystem;

namespace {

std::string safe_name(const std::string& s) {
  std::string r = s;
  for (auto& c : r)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  return r;
}
std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

struct agreement {
  double max_abs = 0, max_rel = 0;
  std::size_t violations = 0, elements = 0;
};

template <class T>
agreement compare(const tensor& ours, const std::string& theirs) {
  agreement a;
  const T* x = ours.typed<T>();
  const T* y = reinterpret_cast<const T*>(theirs.data());
  a.elements = ours.element_count();
  for (std::size_t i = 0; i < a.elements; ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      const double d = std::fabs(double(x[i]) - double(y[i]));
      a.max_abs = std::max(a.max_abs, d);
      if (std::fabs(double(y[i])) > 1e-3) a.max_rel = std::max(a.max_rel, d / std::fabs(double(y[i])));
      if (!(d <= 1e-5 + 1e-4 * std::fabs(double(y[i])))) ++a.violations;
    } else {
      if (x[i] != y[i]) ++a.violations;
    }
  }
  return a;
}

// Outside the template: g++-12 has an internal compiler error on `bench::input_rule{}` inside it.
auto input_sizes(const std::string& name, const shape& dims) { return bench::resolve_sizes(name, dims, bench::input_rule{}); }

template <class Session = session<cpu_provider>>
void check_model(const std::string& name) {
  // The build passes its own folders; the environment overrides them (a ctest ENVIRONMENT list cannot carry two
  // variables through doctest_discover_tests, whose property list splits at ';').
  const char* models = std::getenv("EPSTACK_SHARED_MODELS");
  const char* dumps = std::getenv("EPSTACK_ORT_DUMPS");
  if (models == nullptr) models = EPSTACK_PEER_SHARED_MODELS;
  if (dumps == nullptr) dumps = EPSTACK_PEER_ORT_DUMPS;
  if (models == nullptr || dumps == nullptr || !fs::exists(fs::path(models) / (name + ".onnx")) ||
      !fs::exists(fs::path(dumps) / name / "manifest.json")) {
    std::cout << "SKIP: no shared model or ONNX Runtime dump for " << name
              << " (set EPSTACK_SHARED_MODELS and EPSTACK_ORT_DUMPS; the peer label needs ../shared and npm)" << std::endl;
    return;
  }
  const fs::path dir = fs::path(dumps) / name;
  session_options so;
  so.set_intra_op_threads(2);
  // Each stack's first provider is checked on everything it claims: placement keeps the stack's order.
  so.set_config(config_keys::placement, "priority");
  auto s = Session::create(fs::path(models) / (name + ".onnx"), so);
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  std::string stack;
  for (const auto& p : s->plan().providers) stack += (stack.empty() ? "" : ",") + p;
  if (s->plan().providers.size() > 1) {
    // Every provider of the stack that ran something: mixed_ops must have islands on both.
    std::vector<bool> used(s->plan().providers.size(), false);
    for (auto p : s->plan().main.partition_provider) used[p] = true;
    const bool all_used = std::find(used.begin(), used.end(), false) == used.end();
    if (name == "mixed_ops") CHECK(all_used);
    std::size_t first = 0;
    for (std::size_t i = 0; i < s->plan().main.partitions.size(); ++i) first += s->plan().main.partition_provider[i] == 0 ? 1 : 0;
    CHECK_MESSAGE(first > 0, "the first provider of " << stack << " took nothing in " << name);
  }
  std::vector<named_tensor> feeds;
  for (std::size_t k = 0; k < s->inputs().size(); ++k) {
    const auto& in = s->inputs()[k];
    const auto sizes = input_sizes(in.name, *in.type.dims);
    auto t = bench::make_input(in.name, in.type.elem, sizes);
    REQUIRE_MESSAGE(t.has_value(), t.status().to_string());
    const auto theirs = read_all(dir / ("input_" + std::to_string(k) + "_" + safe_name(in.name) + ".bin"));
    REQUIRE(theirs.size() == t->byte_size());
    CHECK_MESSAGE(std::memcmp(theirs.data(), t->data(), theirs.size()) == 0, "input '" << in.name << "' differs from ONNX Runtime's");
    feeds.push_back({in.name, std::move(*t)});
  }
  auto out = s->run(feeds);
  REQUIRE_MESSAGE(out.has_value(), out.status().to_string());
  for (std::size_t k = 0; k < out->size(); ++k) {
    const auto& oname = s->outputs()[k].name;
    const tensor& t = (*out)[k];
    const auto theirs = read_all(dir / ("output_" + std::to_string(k) + "_" + safe_name(oname) + ".bin"));
    INFO("model ", name, " output '", oname, "'");
    REQUIRE(theirs.size() == t.byte_size());
    agreement a;
    switch (t.type()) {
      case element_type::float32: a = compare<float>(t, theirs); break;
      case element_type::int64: a = compare<std::int64_t>(t, theirs); break;
      case element_type::int32: a = compare<std::int32_t>(t, theirs); break;
      case element_type::boolean: a = compare<bool>(t, theirs); break;
      default: FAIL("unexpected output type");
    }
    std::cout << "peer " << name << " [" << stack << "] output '" << oname << "': " << a.elements << " elements, max |diff| " << a.max_abs
              << ", max rel " << a.max_rel << ", outside 1e-5 + 1e-4|ORT|: " << a.violations << std::endl;
    CHECK(a.violations == 0);
  }
}

}  // namespace

TEST_CASE("peer: mlp_b1 agrees with ONNX Runtime") { check_model("mlp_b1"); }
TEST_CASE("peer: mlp_b64 agrees with ONNX Runtime") { check_model("mlp_b64"); }
TEST_CASE("peer: resnet50 agrees with ONNX Runtime") { check_model("resnet50"); }
TEST_CASE("peer: mobilenetv2 agrees with ONNX Runtime") { check_model("mobilenetv2"); }
TEST_CASE("peer: bert_base_seq128 agrees with ONNX Runtime") { check_model("bert_base_seq128"); }
TEST_CASE("peer: bert_layernorm17 agrees with ONNX Runtime") { check_model("bert_layernorm17"); }
TEST_CASE("peer: llm_prefill agrees with ONNX Runtime") { check_model("llm_prefill"); }
TEST_CASE("peer: llm_decode agrees with ONNX Runtime") { check_model("llm_decode"); }
TEST_CASE("peer: mixed_ops agrees with ONNX Runtime") { check_model("mixed_ops"); }

#if defined(EPSTACK_WITH_DNNL)
using dnnl_stack = session<dnnl_provider, cpu_provider>;
TEST_CASE("peer: mlp_b1 on dnnl,cpu agrees with ONNX Runtime") { check_model<dnnl_stack>("mlp_b1"); }
TEST_CASE("peer: mlp_b64 on dnnl,cpu agrees with ONNX Runtime") { check_model<dnnl_stack>("mlp_b64"); }
TEST_CASE("peer: resnet50 on dnnl,cpu agrees with ONNX Runtime") { check_model<dnnl_stack>("resnet50"); }
TEST_CASE("peer: mobilenetv2 on dnnl,cpu agrees with ONNX Runtime") { check_model<dnnl_stack>("mobilenetv2"); }
TEST_CASE("peer: bert_base_seq128 on dnnl,cpu agrees with ONNX Runtime") { check_model<dnnl_stack>("bert_base_seq128"); }
TEST_CASE("peer: bert_layernorm17 on dnnl,cpu agrees with ONNX Runtime") { check_model<dnnl_stack>("bert_layernorm17"); }
TEST_CASE("peer: llm_prefill on dnnl,cpu agrees with ONNX Runtime") { check_model<dnnl_stack>("llm_prefill"); }
TEST_CASE("peer: llm_decode on dnnl,cpu agrees with ONNX Runtime") { check_model<dnnl_stack>("llm_decode"); }
TEST_CASE("peer: mixed_ops on dnnl,cpu agrees with ONNX Runtime, with islands on both providers") {
  check_model<dnnl_stack>("mixed_ops");
}
#endif
