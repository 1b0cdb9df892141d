// Loading models into the IR, against protobuf alone parsing the same bytes (Google Benchmark).
//   bench_load [benchmark flags]     models from EPSTACK_SHARED_MODELS (default: build/shared-models)
//   bench_load --rss MODEL           load MODEL once and print peak RSS against its initializer bytes
#include <epstack/core/mapped_file.hpp>
#include <epstack/onnx/onnx_io.hpp>

#include <onnx/onnx_pb.h>

#include <google/protobuf/io/coded_stream.h>

#include <benchmark/benchmark.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

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

void epstack_load(benchmark::State& state, const fs::path& p) {
  for (auto _ : state) {
    auto m = epstack::load_model(p);
    if (!m) {
      state.SkipWithError(m.status().to_string().c_str());
      return;
    }
    benchmark::DoNotOptimize(m->graph.node_count());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(fs::file_size(p)));
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
  const auto dir = models_dir();
  for (const char* name : {"resnet50", "bert_base_seq128", "mobilenetv2", "llm_prefill"}) {
    const auto p = dir / (std::string(name) + ".onnx");
    if (!fs::exists(p)) {
      std::cerr << "bench_load: " << p << " is missing (generate the shared models; see README)\n";
      continue;
    }
    benchmark::RegisterBenchmark((std::string("protobuf_parse_memory/") + name).c_str(), protobuf_parse_memory, p)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("protobuf_parse_file/") + name).c_str(), protobuf_parse_file, p)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((std::string("epstack_load/") + name).c_str(), epstack_load, p)->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
