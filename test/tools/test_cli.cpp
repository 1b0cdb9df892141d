// The epstack command-line tool, run as users run it: generate, run (tensor files in and out), partition (table and
// DOT), perf (the peer protocol's JSON and dumps), and its errors.
#include <epstack/bench_inputs.hpp>
#include <epstack/onnx_io.hpp>
#include <epstack/providers/cpu.hpp>
#include <epstack/session.hpp>

#include "../support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

using namespace epstack;
namespace fs = std::filesystem;

namespace {

struct result {
  int code = -1;
  std::string out;  // stdout and stderr together
};

result epstack_cli(const std::string& args) {
  const std::string cmd = std::string(EPSTACK_CLI) + " " + args + " 2>&1";
  result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), p) != nullptr) r.out += buf.data();
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("epstack generate and run: outputs written as TensorProto files equal a session's outputs") {
  test::temp_dir dir;
  const auto model = dir / "convnet.onnx";
  auto g = epstack_cli("generate convnet " + model.string() + " --channels 8,16 --size 32");
  REQUIRE_MESSAGE(g.code == 0, g.out);
  auto r = epstack_cli("run " + model.string() + " --dims N=2 --threads 2 --output-dir " + (dir / "out").string());
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("output logits: float[2,10]") != std::string::npos);
  CHECK(r.out.find("input image: float[2,3,32,32]") != std::string::npos);
  auto written = load_tensor(dir / "out" / "output_0.pb");
  REQUIRE_MESSAGE(written.has_value(), written.status().to_string());
  // The same inputs (the benchmark input rule) through the library give the same outputs.
  auto s = session<cpu_provider>::create(model);
  REQUIRE(s.has_value());
  const std::int64_t sizes[] = {2, 3, 32, 32};
  auto image = bench::make_input("image", element_type::float32, sizes);
  REQUIRE(image.has_value());
  auto out = s->run({{"image", *image}});
  REQUIRE(out.has_value());
  CHECK(written->same_content((*out)[0]));
}

TEST_CASE("epstack run reads inputs from input_K.pb files") {
  test::temp_dir dir;
  const auto model = dir / "mlp.onnx";
  REQUIRE(epstack_cli("generate mlp " + model.string() + " --widths 4,3,2").code == 0);
  fs::create_directories(dir / "in");
  const auto x = tensor::from<float>({1, 4}, {1, -2, 3, -4});
  REQUIRE(save_tensor(x, dir / "in" / "input_0.pb").is_ok());
  auto r = epstack_cli("run " + model.string() + " --input-dir " + (dir / "in").string() + " --output-dir " + (dir / "out").string());
  REQUIRE_MESSAGE(r.code == 0, r.out);
  auto s = session<cpu_provider>::create(model);
  REQUIRE(s.has_value());
  auto want = s->run({{"input", x}});
  REQUIRE(want.has_value());
  auto got = load_tensor(dir / "out" / "output_0.pb");
  REQUIRE(got.has_value());
  CHECK(got->same_content((*want)[0]));
  // A missing input file is named.
  fs::remove(dir / "in" / "input_0.pb");
  auto missing = epstack_cli("run " + model.string() + " --input-dir " + (dir / "in").string());
  CHECK(missing.code == 1);
  CHECK(missing.out.find("input_0.pb") != std::string::npos);
}

TEST_CASE("epstack partition prints the optimisations and the plan and writes Graphviz DOT") {
  test::temp_dir dir;
  const auto model = dir / "t.onnx";
  REQUIRE(epstack_cli("generate transformer " + model.string() + " --layers 1").code == 0);
  auto r = epstack_cli("partition " + model.string() + " --dot " + (dir / "plan.dot").string());
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("graph optimisation:") != std::string::npos);
  CHECK(r.out.find("SkipLayerNormalization") != std::string::npos);
  CHECK(r.out.find("CPUExecutionProvider:") != std::string::npos);
  const auto dot = read(dir / "plan.dot");
  CHECK(dot.rfind("digraph partition_plan {", 0) == 0);
  CHECK(dot.find("->") != std::string::npos);
}

TEST_CASE("epstack perf prints one JSON line in the peer protocol and dumps inputs and outputs") {
  test::temp_dir dir;
  const auto model = dir / "mlp_small.onnx";
  REQUIRE(epstack_cli("generate mlp " + model.string() + " --widths 16,8,4").code == 0);
  auto r = epstack_cli("perf --model " + model.string() + " --threads 1 --warmup 1 --iters 5 --creates 2 --dims batch=3 --out-dir " +
                       (dir / "dump").string());
  REQUIRE_MESSAGE(r.code == 0, r.out);
  const auto line = r.out.substr(r.out.find("{\"engine\""));
  for (const char* key : {"\"engine\":\"epstack\"", "\"model\":\"mlp_small\"", "\"threads\":1", "\"create_ms\":{\"median\":",
                          "\"run_ms\":{\"median\":", "\"p90\":", "\"peak_rss_mb\":", "\"iters\":5", "\"dims\":{\"batch\":3}"})
    CHECK_MESSAGE(line.find(key) != std::string::npos, key);
  // The read floor: the model file's bytes, read in the same run.
  CHECK(line.find("\"read_ms\":{\"median\":") != std::string::npos);
  CHECK(line.find("\"bytes\":" + std::to_string(fs::file_size(model)) + ",\"files\":1}") != std::string::npos);
  const auto manifest = read(dir / "dump" / "manifest.json");
  CHECK(manifest.find("\"file\":\"input_0_input.bin\"") != std::string::npos);
  CHECK(manifest.find("\"file\":\"output_0_logits.bin\"") != std::string::npos);
  CHECK(fs::file_size(dir / "dump" / "input_0_input.bin") == 3 * 16 * sizeof(float));
  CHECK(fs::file_size(dir / "dump" / "output_0_logits.bin") == 3 * 4 * sizeof(float));
}

TEST_CASE("epstack refuses unknown stacks, options and files with a message and a non-zero exit") {
  auto stack = epstack_cli("run nothing.onnx --providers tpu");
  CHECK(stack.code == 1);
  CHECK(stack.out.find("unknown provider stack 'tpu'; this build has: cpu") != std::string::npos);
  auto option = epstack_cli("run nothing.onnx --frobnicate 1");
  CHECK(option.code == 2);
  CHECK(option.out.find("unknown option '--frobnicate'") != std::string::npos);
  auto file = epstack_cli("run /nonexistent/model.onnx");
  CHECK(file.code == 1);
  CHECK(file.out.find("no_such_file") != std::string::npos);
  auto cmd = epstack_cli("fly");
  CHECK(cmd.code == 2);
  CHECK(cmd.out.find("unknown command 'fly'") != std::string::npos);
}

TEST_CASE("epstack compile, inspect and ctxgen: EPContext models from the command line, run from them") {
  test::temp_dir dir;
  for (const char* name : {"a", "b"}) {
    auto g = epstack_cli("generate convnet " + (dir / (std::string(name) + ".onnx")).string() + " --channels 8,16 --size 32");
    REQUIRE_MESSAGE(g.code == 0, g.out);
  }
  // compile with the default stack (every provider of the build), then run from the compiled model.
  auto c = epstack_cli("compile " + (dir / "a.onnx").string() + " --dims N=2 --threads 2");
  REQUIRE_MESSAGE(c.code == 0, c.out);
  CHECK(c.out.find("wrote " + (dir / "a_ctx.onnx").string()) != std::string::npos);
  CHECK(fs::is_regular_file(dir / "a_ctx.onnx"));
  auto again = epstack_cli("compile " + (dir / "a.onnx").string());
  CHECK(again.code == 1);
  CHECK(again.out.find("exists already") != std::string::npos);
  auto r = epstack_cli("run " + (dir / "a_ctx.onnx").string() + " --providers default --threads 2");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("output logits: float[2,10]") != std::string::npos);
#if defined(EPSTACK_WITH_DNNL)
  CHECK(fs::is_regular_file(dir / "a_dnnl.bin"));
  auto i = epstack_cli("inspect " + (dir / "a_ctx.onnx").string());
  REQUIRE_MESSAGE(i.code == 0, i.out);
  CHECK(i.out.find("EPContext nodes: 1") != std::string::npos);
  CHECK(i.out.find("context binary 'a_dnnl.bin'") != std::string::npos);
  CHECK(i.out.find("verified") != std::string::npos);
  auto ib = epstack_cli("inspect " + (dir / "a_dnnl.bin").string());
  REQUIRE_MESSAGE(ib.code == 0, ib.out);
  CHECK(ib.out.find("provider DnnlExecutionProvider") != std::string::npos);
  CHECK(ib.out.find("tensor table:") != std::string::npos);
  CHECK(ib.out.find("laid0: uint8[") != std::string::npos);
  // perf of the compiled model: its read floor covers the model and the binary it names.
  auto pf = epstack_cli("perf --model " + (dir / "a_ctx.onnx").string() + " --providers default --threads 1 --warmup 0 --iters 1 --creates 1");
  REQUIRE_MESSAGE(pf.code == 0, pf.out);
  CHECK(pf.out.find("\"bytes\":" + std::to_string(fs::file_size(dir / "a_ctx.onnx") + fs::file_size(dir / "a_dnnl.bin")) +
                    ",\"files\":2}") != std::string::npos);
  // ctxgen: two models sharing weights, N + 1 files, the option rules of ONNX Runtime's tool.
  fs::create_directory(dir / "share");
  fs::copy(dir / "a.onnx", dir / "share" / "m1.onnx");
  fs::copy(dir / "a.onnx", dir / "share" / "m2.onnx");
  auto refused = epstack_cli("ctxgen -e dnnl -C \"ep.context_file_path|x.onnx\" " + (dir / "share" / "m1.onnx").string());
  CHECK(refused.code == 1);
  CHECK(refused.out.find("ep.context_file_path is refused") != std::string::npos);
  auto dup = epstack_cli("ctxgen -e dnnl -C \"k|1 k|2\" " + (dir / "share" / "m1.onnx").string());
  CHECK(dup.code == 1);
  CHECK(dup.out.find("given twice") != std::string::npos);
  auto x = epstack_cli("ctxgen -e dnnl -v " + (dir / "share" / "m1.onnx").string() + "," + (dir / "share" / "m2.onnx").string());
  REQUIRE_MESSAGE(x.code == 0, x.out);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir / "share")) ++files;
  CHECK(files == 5);  // m1.onnx, m2.onnx, m1_ctx.onnx, m2_ctx.onnx, m1_dnnl.bin
  CHECK(fs::is_regular_file(dir / "share" / "m1_dnnl.bin"));
  auto rs = epstack_cli("run " + (dir / "share" / "m2_ctx.onnx").string() + " --providers dnnl --dims N=1");
  REQUIRE_MESSAGE(rs.code == 0, rs.out);
  auto h = epstack_cli("ctxgen -h");
  CHECK(h.code == 0);
  CHECK(h.out.find("-C \"k|v ...\"") != std::string::npos);
#endif
}
