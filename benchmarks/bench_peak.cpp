// The machine's measured fp32 peak: independent fused multiply-adds on every lane of the widest vector the build
// targets, on 1 and on N threads (default 2, the benchmark thread count). Counters report GFLOP/s (2 per FMA lane).
// Used to say what fraction of the peak a model's run reaches (FLOPs / run time / peak).
#include <benchmark/benchmark.h>

#include <immintrin.h>

#include <cstdint>

namespace {

// 12 independent accumulators hide the FMA latency (4 cycles x 2 ports needs at least 8).
template <class V, class Fma>
double fma_loop(std::int64_t iters, V a, V b, Fma fma) {
  V acc[12];
  for (auto& x : acc) x = a;
  for (std::int64_t i = 0; i < iters; ++i)
    for (auto& x : acc) x = fma(x, a, b);
  float sink = 0;
  for (auto& x : acc) sink += reinterpret_cast<const float*>(&x)[0];
  return sink;
}

void BM_fp32_peak(benchmark::State& state) {
  constexpr std::int64_t iters = 1 << 20;
#if defined(__AVX512F__)
  constexpr int lanes = 16;
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-7f);
  const auto fma = [](__m512 x, __m512 y, __m512 z) { return _mm512_fmadd_ps(x, y, z); };
#elif defined(__FMA__)
  constexpr int lanes = 8;
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-7f);
  const auto fma = [](__m256 x, __m256 y, __m256 z) { return _mm256_fmadd_ps(x, y, z); };
#else
  constexpr int lanes = 4;
  const __m128 a = _mm_set1_ps(0.999f), b = _mm_set1_ps(1e-7f);
  const auto fma = [](__m128 x, __m128 y, __m128 z) { return _mm_add_ps(_mm_mul_ps(x, y), z); };
#endif
  for (auto _ : state) benchmark::DoNotOptimize(fma_loop(iters, a, b, fma));
  state.counters["GFLOPs"] = benchmark::Counter(static_cast<double>(iters) * 12 * lanes * 2 * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);  // summed over threads
}
BENCHMARK(BM_fp32_peak)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
