#pragma once
// What the deployable examples share: a session of stack S created from a deployment model, inputs made by the
// benchmark input rule (as `epstack run` and `epstack perf` make them), repeated runs timed, the outputs summarised,
// and the first output written as raw little-endian bytes (for comparing with the full library). stdio only: a
// deployable pulls in no iostreams.
//
// usage: PROGRAM MODEL.deploy [--threads N] [--runs N] [--save OUTPUT.raw]
#include <epstack/runtime/session.hpp>
#include <epstack/testing/bench_inputs.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace deploy_example {

template <class S>
int run(int argc, char** argv) {
  const char* program = argv[0];
  const char* model = nullptr;
  const char* save = nullptr;
  int threads = 0, runs = 20;
  for (int i = 1; i < argc; ++i) {
    const bool more = i + 1 < argc;
    if (std::strcmp(argv[i], "--threads") == 0 && more) threads = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--runs") == 0 && more) runs = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--save") == 0 && more) save = argv[++i];
    else if (model == nullptr && argv[i][0] != '-') model = argv[i];
    else model = nullptr, i = argc;
  }
  if (model == nullptr) {
    std::fprintf(stderr, "usage: %s MODEL.deploy [--threads N] [--runs N] [--save OUTPUT.raw]\n", program);
    return 2;
  }
  using clock = std::chrono::steady_clock;
  const auto ms = [](clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };

  epstack::session_options so;
  so.set_intra_op_threads(threads);
  const auto t0 = clock::now();
  auto s = S::create_deployed(model, so);
  if (!s) {
    std::fprintf(stderr, "%s: %s\n", program, s.status().to_string().c_str());
    return 1;
  }
  const double create_ms = ms(clock::now() - t0);

  std::vector<epstack::named_tensor> feeds;
  for (const auto& in : s->inputs()) {
    const auto sizes = epstack::bench::resolve_sizes(in.name, in.type.dims.value_or(epstack::shape{}), {});
    auto t = epstack::bench::make_input(in.name, in.type.elem, sizes);
    if (!t) {
      std::fprintf(stderr, "%s: %s\n", program, t.status().to_string().c_str());
      return 1;
    }
    feeds.push_back({in.name, std::move(*t)});
  }
  std::vector<double> times;
  epstack::Result<std::vector<epstack::tensor>> out = epstack::Status(epstack::errc::fail, "not run");
  for (int r = 0; r < runs; ++r) {
    const auto t1 = clock::now();
    out = s->run(feeds);
    times.push_back(ms(clock::now() - t1));
    if (!out) {
      std::fprintf(stderr, "%s: %s\n", program, out.status().to_string().c_str());
      return 1;
    }
  }
  for (std::size_t k = 0; k < out->size(); ++k) {
    const auto& t = (*out)[k];
    std::printf("output %s: %s[", s->outputs()[k].name.c_str(), std::string(epstack::to_string(t.type())).c_str());
    for (std::size_t i = 0; i < t.rank(); ++i) std::printf("%s%lld", i ? "," : "", static_cast<long long>(t.sizes()[i]));
    std::printf("]");
    if (t.type() == epstack::element_type::float32 && t.element_count() > 0) {
      const float* p = t.typed<float>();
      const auto [lo, hi] = std::minmax_element(p, p + t.element_count());
      double sum = 0;
      for (std::size_t i = 0; i < t.element_count(); ++i) sum += p[i];
      std::printf("  min %.6g  max %.6g  mean %.6g", *lo, *hi, sum / static_cast<double>(t.element_count()));
    }
    std::printf("\n");
  }
  // The first run warms up (pages of the weights, the arena); the others are timed.
  std::vector<double> timed(times.begin() + (times.size() > 1 ? 1 : 0), times.end());
  std::sort(timed.begin(), timed.end());
  const auto at = [&](double q) { return timed[std::min(timed.size() - 1, static_cast<std::size_t>(q * static_cast<double>(timed.size())))]; };
  std::printf("create %.3f ms, run median %.3f ms, p90 %.3f ms over %zu runs, %d intra-op threads\n", create_ms, at(0.5),
              at(0.9), timed.size(), s->intra_op_threads());
  if (save != nullptr && !out->empty()) {
    const auto bytes = out->front().bytes();
    std::FILE* f = std::fopen(save, "wb");
    if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
      std::fprintf(stderr, "%s: cannot write %s\n", program, save);
      return 1;
    }
  }
  return 0;
}

}  // namespace deploy_example
