// check_deploy_outputs MODEL.onnx OUTPUT.raw [k=v,...]: runs MODEL on the full library's CPU stack (free dimensions
// fixed by the k=v list, as the deployment model was compiled), with inputs by the benchmark input rule, and compares
// its first output, element by element, with the float32 values in OUTPUT.raw (a deployable's). Exit 0 when every
// element is within 1e-5 relative (of the largest magnitude) and none is NaN in one and not the other.
#include <epstack/epstack.hpp>
#include <epstack/testing/bench_inputs.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.onnx OUTPUT.raw [k=v,...]\n", argv[0]);
    return 2;
  }
  epstack::session_options so;
  if (argc > 3) {
    const std::string dims = argv[3];
    for (std::size_t p = 0; p < dims.size();) {
      const auto q = std::min(dims.find(',', p), dims.size());
      const std::string kv = dims.substr(p, q - p);
      const auto eq = kv.find('=');
      if (eq == std::string::npos) return 2;
      so.add_free_dimension_override(kv.substr(0, eq), std::stoll(kv.substr(eq + 1)));
      p = q + 1;
    }
  }
  auto s = epstack::session<epstack::cpu_provider>::create(argv[1], so);
  if (!s) {
    std::fprintf(stderr, "%s\n", s.status().to_string().c_str());
    return 1;
  }
  std::vector<epstack::named_tensor> feeds;
  for (const auto& in : s->inputs()) {
    const auto sizes = epstack::bench::resolve_sizes(in.name, in.type.dims.value_or(epstack::shape{}), {});
    auto t = epstack::bench::make_input(in.name, in.type.elem, sizes);
    if (!t) return 1;
    feeds.push_back({in.name, std::move(*t)});
  }
  auto out = s->run(feeds);
  if (!out || out->empty() || out->front().type() != epstack::element_type::float32) {
    std::fprintf(stderr, "the full library gave no float output\n");
    return 1;
  }
  std::ifstream f(argv[2], std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto& ref = out->front();
  if (raw.size() != ref.byte_size()) {
    std::fprintf(stderr, "%s has %zu bytes; the full library's output has %zu\n", argv[2], raw.size(), ref.byte_size());
    return 1;
  }
  std::vector<float> got(ref.element_count());
  std::memcpy(got.data(), raw.data(), raw.size());
  const float* want = ref.typed<float>();
  double scale = 0, worst = 0;
  std::size_t bad = 0, differ = 0;
  for (std::size_t i = 0; i < got.size(); ++i) scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) || std::isnan(want[i])) {
      bad += std::isnan(got[i]) != std::isnan(want[i]) ? 1 : 0;
      continue;
    }
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    worst = std::max(worst, d);
    differ += got[i] != want[i] ? 1 : 0;
    bad += d > 1e-5 * std::max(1.0, scale) ? 1 : 0;
  }
  std::printf("%zu elements: largest difference %.3g (of magnitudes up to %.3g), %zu not bit-identical, %zu beyond tolerance\n",
              got.size(), worst, scale, differ, bad);
  return bad == 0 ? 0 : 1;
}
