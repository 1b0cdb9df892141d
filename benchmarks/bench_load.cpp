// Loading models into the IR, against protobuf alone parsing the same bytes (Google Benchmark). And what a create's
// memory costs on this machine (weight_memory.hpp): the first touch of fresh pages, 4 KiB against 2 MiB ones, one
// allocation per weight against the create's arena; and reading a model's weights through a fresh mapping of its file
// against pread into one buffer (a 64 MiB file written to the temporary folder).
//   bench_load [benchmark flags]     models from EPSTACK_SHARED_MODELS (default: build/shared-models)
//   bench_load --rss MODEL           load MODEL once and print peak RSS against its initializer bytes
#include <epstack/core/mapped_file.hpp>
#include <epstack/core/weight_memory.hpp>
#include <epstack/onnx/onnx_io.hpp>

#include <onnx/onnx_pb.h>

#include <google/protobuf/io/coded_stream.h>

#include <benchmark/benchmark.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <fstream>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include <sys/resource.h>

namespace {

namespace fs = std::filesystem;

fs::path models_dir() {
  if (const char* e = std::getenv("EPSTACK_SHARED_MODELS")) return e;
  return "build/shared-models";
}

long peak_rss_kib() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

bool parse(const epstack::mapped_file& f) {
  onnx::ModelProto mp;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const std::uint8_t*>(f.data()), static_cast<int>(f.size()));
  in.SetTotalBytesLimit(INT_MAX);
  return mp.ParseFromCodedStream(&in);
}

// protobuf alone on bytes already in memory (the file mapped once, outside the loop): the strictest baseline.
void protobuf_parse_memory(benchmark::State& state, const fs::path& p) {
  auto f = epstack::mapped_file::open(p, true);
  if (!f) {
    state.SkipWithError(f.status().to_string().c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(parse(**f));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>((*f)->size()));
}

// protobuf alone parsing the file: map it (read-only, populated) and parse, each time, as a load from a path must.
void protobuf_parse_file(benchmark::State& state, const fs::path& p) {
  for (auto _ : state) {
    auto f = epstack::mapped_file::open(p, true);
    if (!f) {
      state.SkipWithError(f.status().to_string().c_str());
      return;
    }
    benchmark::DoNotOptimize(parse(**f));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(fs::file_size(p)));
}

void epstack_load(benchmark::State& state, const fs::path& p, epstack::load_options opt) {
  for (auto _ : state) {
    auto m = epstack::load_model(p, opt);
    if (!m) {
      state.SkipWithError(m.status().to_string().c_str());
      return;
    }
    benchmark::DoNotOptimize(m->graph.node_count());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(fs::file_size(p)));
}

// ---- What a create's memory costs: counters in GB/s of bytes written or read.

constexpr std::size_t touch_bytes = std::size_t{96} << 20;
// The sizes of llm_decode's laid-out weights (6 layers of 3, 1, 4 and 4 MiB, and a 16 MiB classifier): 91 MiB.
std::vector<std::size_t> weight_sizes() {
  std::vector<std::size_t> v;
  for (int l = 0; l < 6; ++l)
    for (std::size_t s : {512u * 1536u * 4u, 512u * 512u * 4u, 512u * 2048u * 4u, 2048u * 512u * 4u}) v.push_back(s);
  v.push_back(512u * 8000u * 4u);
  return v;
}
void set_rate(benchmark::State& state, std::size_t bytes) {
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes) * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}

// 96 MiB of fresh anonymous memory written once, on 4 KiB pages (a plain mapping) or 2 MiB ones (map_huge_chunk).
void first_touch(benchmark::State& state, bool huge) {
  for (auto _ : state) {
    if (huge) {
      auto c = epstack::detail::map_huge_chunk(touch_bytes);
      std::memset(c.get(), 1, touch_bytes);
      benchmark::DoNotOptimize(c.get());
    } else {
      void* p = ::mmap(nullptr, touch_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) {
        state.SkipWithError("mmap failed");
        return;
      }
      std::memset(p, 1, touch_bytes);
      benchmark::DoNotOptimize(p);
      ::munmap(p, touch_bytes);
    }
  }
  set_rate(state, touch_bytes);
}

// A create's laid-out weights written once: one allocation each (detail::allocate, as before the arena) or the arena.
void lay_out(benchmark::State& state, bool arena) {
  const auto sizes = weight_sizes();
  std::size_t total = 0;
  for (auto s : sizes) total += s;
  for (auto _ : state) {
    epstack::weight_arena a;
    epstack::weight_arena_scope scope(arena ? &a : nullptr);
    std::vector<std::shared_ptr<void>> blocks;
    for (auto s : sizes) {
      blocks.push_back(epstack::allocate_weight(s));
      std::memset(blocks.back().get(), 1, s);
    }
    benchmark::DoNotOptimize(blocks.data());
  }
  set_rate(state, total);
}

// A 64 MiB weights file, mapped afresh and read through the mapping, or read with pread (read_mapped) into the
// create's staging buffer, in llm_decode's weight sizes.
struct weights_file {
  fs::path path = fs::temp_directory_path() / ("epstack-bench-weights-" + std::to_string(::getpid()) + ".bin");
  std::size_t bytes = 0;
  weights_file() {
    std::vector<char> chunk(std::size_t{1} << 20, 3);
    std::ofstream f(path, std::ios::binary);
    for (int i = 0; i < 64; ++i) f.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    bytes = std::size_t{64} << 20;
  }
  ~weights_file() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};
void read_weights(benchmark::State& state, bool bulk) {
  static weights_file file;
  std::vector<std::size_t> sizes;  // as many of llm_decode's weights, in order, as the file holds
  std::size_t done = 0;
  for (auto s : weight_sizes())
    if (done + s <= file.bytes) {
      sizes.push_back(s);
      done += s;
    }
  std::size_t total = 0;
  for (auto s : sizes) total += s;
  for (auto _ : state) {
    auto f = epstack::mapped_file::open(file.path, false, /*keep_descriptor=*/true);
    if (!f) {
      state.SkipWithError(f.status().to_string().c_str());
      return;
    }
    epstack::enable_bulk_reads(*f);
    epstack::weight_arena a;
    epstack::weight_arena_scope scope(&a);
    epstack::weight_reader reader;
    std::size_t at = 0;
    unsigned sum = 0;
    for (auto s : sizes) {
      const std::int64_t n[] = {static_cast<std::int64_t>(s / 4)};
      const auto t = epstack::tensor::borrow_file(epstack::element_type::float32, n, (*f)->data() + at, *f);
      const auto* b = reinterpret_cast<const unsigned char*>(bulk ? reader.read(t) : t.data());
      for (std::size_t i = 0; i < s; i += 64) sum += b[i];
      at += s;
    }
    benchmark::DoNotOptimize(sum);
  }
  set_rate(state, total);
}

int rss_probe(const char* path) {
  const long before = peak_rss_kib();
  auto m = epstack::load_model(path);
  if (!m) {
    std::cerr << m.status().to_string() << "\n";
    return 1;
  }
  std::uint64_t bytes = 0;
  for (auto v : m->graph.initializers()) bytes += m->graph.value(v).initializer->byte_size();
  const long after = peak_rss_kib();
  std::cout << "{\"model\":\"" << path << "\",\"initializer_bytes\":" << bytes << ",\"peak_rss_kib_before\":" << before
            << ",\"peak_rss_kib\":" << after << ",\"rss_over_data\":" << (static_cast<double>(after) * 1024.0 / static_cast<double>(bytes))
            << "}\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--rss") == 0) return rss_probe(argv[2]);
  // first_touch, lay_out_weights and read_weights measure fresh memory: no chunk kept from one iteration for the next.
  epstack::set_weight_memory_cache_limit(0);
  const auto dir = models_dir();
  for (const char* name : {"resnet50", "bert_base_seq128", "mobilenetv2", "llm_prefill", "mixed_ops"}) {
    const auto p = dir / (std::string(name) + ".onnx");
    if (!fs::exists(p)) {
      std::cerr << "bench_load: " << p << " is missing (generate the shared models; see README)\n";
      continue;
    }
    benchmark::RegisterBenchmark((std::string("protobuf_parse_memory/") + name).c_str(), protobuf_parse_memory, p)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("protobuf_parse_file/") + name).c_str(), protobuf_parse_file, p)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("epstack_load/") + name).c_str(), epstack_load, p, epstack::load_options{})
        ->Unit(benchmark::kMillisecond);
    // What the checks at load cost: without onnx's checker, and without its shape inference as well.
    epstack::load_options unchecked;
    unchecked.run_checker = false;
    benchmark::RegisterBenchmark((std::string("epstack_load_unchecked/") + name).c_str(), epstack_load, p, unchecked)
        ->Unit(benchmark::kMillisecond);
    unchecked.shape_inference = epstack::shape_inference_mode::off;
    benchmark::RegisterBenchmark((std::string("epstack_load_unchecked_uninferred/") + name).c_str(), epstack_load, p, unchecked)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("first_touch/4KiB_pages", first_touch, false)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("first_touch/2MiB_pages", first_touch, true)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("lay_out_weights/allocation_each", lay_out, false)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("lay_out_weights/arena", lay_out, true)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("read_weights/through_mapping", read_weights, false)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("read_weights/pread", read_weights, true)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
