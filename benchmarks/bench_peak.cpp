// The machine's measured fp32 peak: independent fused multiply-adds on every lane of the widest vector the build
// targets, on 1 and on N threads (default 2, the benchmark thread count). Counters report GFLOP/s (2 per FMA lane).
// Used to say what fraction of the peak a model's run reaches (FLOPs / run time / peak). And the machine's memory
// bandwidth: a read stream over 512 MiB (far beyond the last-level cache), as a batch-1 product streams its weights,
// by 1 and 2 threads at once; the counter reports the GB/s read by all of them. And what one core reads of data the
// other core has just written (a node's input that the other intra-op thread computed), against data it wrote itself.
#include <benchmark/benchmark.h>

#include <immintrin.h>
#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <thread>
#include <vector>

namespace {

// 12 independent accumulators hide the FMA latency (4 cycles x 2 ports needs at least 8).
template <class V, class Fma>
double fma_loop(std::int64_t iters, V a, V b, Fma fma) {
  // Each accumulator starts from its own value (equal ones would be folded into one chain by the compiler).
  V acc[12];
  for (int k = 0; k < 12; ++k) {
    acc[k] = a;
    float* l = reinterpret_cast<float*>(&acc[k]);
    for (std::size_t j = 0; j < sizeof(V) / sizeof(float); ++j) l[j] += static_cast<float>(k + 1) * 1e-3f + static_cast<float>(j) * 1e-5f;
    benchmark::DoNotOptimize(acc[k]);
  }
  for (std::int64_t i = 0; i < iters; ++i)
    for (auto& x : acc) x = fma(x, a, b);
  // Every lane is read: were only lane 0 observed, the compiler would be free to compute one lane (scalar FMAs), and
  // the "peak" would be the scalar rate times the lane count (it was: 3x the vector rate on this project's machine).
  float sink = 0;
  for (auto& x : acc) {
    float lanes[sizeof(V) / sizeof(float)];
    std::memcpy(lanes, &x, sizeof lanes);
    for (float l : lanes) sink += l;
  }
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
  auto va = a;
  for (auto _ : state) {
    benchmark::DoNotOptimize(va);  // opaque on every iteration: the loop cannot be computed once and hoisted
    benchmark::DoNotOptimize(fma_loop(iters, va, b, fma));
  }
  state.counters["GFLOPs"] = benchmark::Counter(static_cast<double>(iters) * 12 * lanes * 2 * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);  // summed over threads
}
BENCHMARK(BM_fp32_peak)->Threads(1)->Threads(2)->UseRealTime();

// One buffer for every thread count, touched once so that its pages exist before timing.
float* stream_buffer(std::size_t floats) {
  static float* buf = [&] {
    auto* p = static_cast<float*>(std::aligned_alloc(64, floats * sizeof(float)));
    std::memset(p, 1, floats * sizeof(float));
    return p;
  }();
  return buf;
}

// One reader's contiguous share, four independent sums deep.
float read_share(const float* p, std::size_t n) {
#if defined(__AVX512F__)
  __m512 a = _mm512_setzero_ps(), b = a, c = a, d = a;
  for (std::size_t i = 0; i + 64 <= n; i += 64) {
    a = _mm512_add_ps(a, _mm512_load_ps(p + i));
    b = _mm512_add_ps(b, _mm512_load_ps(p + i + 16));
    c = _mm512_add_ps(c, _mm512_load_ps(p + i + 32));
    d = _mm512_add_ps(d, _mm512_load_ps(p + i + 48));
  }
  alignas(64) float lanes[16];  // (not _mm512_reduce_add_ps: g++-12 warns falsely inside it)
  _mm512_store_ps(lanes, _mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d)));
  float sum = 0;
  for (float f : lanes) sum += f;
  return sum;
#elif defined(__AVX__)
  __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
  for (std::size_t i = 0; i + 32 <= n; i += 32) {
    a = _mm256_add_ps(a, _mm256_load_ps(p + i));
    b = _mm256_add_ps(b, _mm256_load_ps(p + i + 8));
    c = _mm256_add_ps(c, _mm256_load_ps(p + i + 16));
    d = _mm256_add_ps(d, _mm256_load_ps(p + i + 24));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d)));
  float sum = 0;
  for (float f : lanes) sum += f;
  return sum;
#else
  float a = 0;
  for (std::size_t i = 0; i < n; ++i) a += p[i];
  return a;
#endif
}

// The 512 MiB read once per iteration by `readers` threads at once (the argument), each its contiguous share, timed
// from before the first starts to after the last ends: the bytes of the whole read over that time. (Timed per
// benchmark thread, with Google Benchmark's own threads, the two-thread figure moved between 29 and 51 GB/s from run
// to run on a machine whose two threads read 36-38 GB/s together.) Starting the readers costs about 0.1 ms of the
// 14-30 ms an iteration takes.
void BM_memory_read_bandwidth(benchmark::State& state) {
  constexpr std::size_t floats = std::size_t{512} << 18;  // 512 MiB
  const float* buf = stream_buffer(floats);
  const auto readers = static_cast<std::size_t>(state.range(0));
  const std::size_t share = floats / readers;
  std::vector<float> sums(readers);
  for (auto _ : state) {
    std::vector<std::thread> others;
    for (std::size_t t = 1; t < readers; ++t) others.emplace_back([&, t] { sums[t] = read_share(buf + share * t, share); });
    sums[0] = read_share(buf, share);
    for (auto& th : others) th.join();
    benchmark::DoNotOptimize(sums.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(share * readers * sizeof(float)) * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}
BENCHMARK(BM_memory_read_bandwidth)->ArgName("readers")->Arg(1)->Arg(2)->UseRealTime();

#if defined(__linux__)
// Pins the calling thread to one CPU; returns the CPUs it was allowed before.
cpu_set_t pin_to(int cpu) {
  cpu_set_t before, one;
  CPU_ZERO(&before);
  pthread_getaffinity_np(pthread_self(), sizeof before, &before);
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  pthread_setaffinity_np(pthread_self(), sizeof one, &one);
  return before;
}

// Reads `KiB` (first argument) that were just written by this thread's CPU (second argument 0) or by another CPU
// (1), timed alone; the counter is the GB/s of the read. The threads of a run share a node's tensors this way: one
// computes half of an output, the other reads it as the next node's input. On the Zen 5 VM of 2026-11-28: 512 KiB at
// 166 GB/s from its own CPU's writes, 24 from the other's; 4 MiB at 88 and 31 (the rate of main memory).
void BM_read_written_by(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0)) << 10;
  const bool other = state.range(1) != 0;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  pthread_getaffinity_np(pthread_self(), sizeof allowed, &allowed);
  int cpus[2] = {-1, -1};
  for (int c = 0, found = 0; c < CPU_SETSIZE && found < 2; ++c)
    if (CPU_ISSET(c, &allowed)) cpus[found++] = c;
  if (cpus[1] < 0) {
    state.SkipWithError("needs two CPUs");
    return;
  }
  auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  const cpu_set_t before = pin_to(cpus[0]);
  int fill = 0;
  float sink = 0;
  for (auto _ : state) {
    ++fill;
    if (other) {
      std::thread writer([&] {
        pin_to(cpus[1]);
        std::memset(p, fill, bytes);
      });
      writer.join();
    } else {
      std::memset(p, fill, bytes);
    }
    const auto t0 = std::chrono::steady_clock::now();
    sink += read_share(p, bytes / sizeof(float));
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  benchmark::DoNotOptimize(sink);
  pthread_setaffinity_np(pthread_self(), sizeof before, &before);
  std::free(p);
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes) * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}
BENCHMARK(BM_read_written_by)
    ->ArgNames({"KiB", "other_cpu"})
    ->Args({512, 0})
    ->Args({512, 1})
    ->Args({4096, 0})
    ->Args({4096, 1})
    ->UseManualTime();
#endif

}  // namespace

BENCHMARK_MAIN();
