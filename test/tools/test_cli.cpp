// The epstack command-line tool, run as users run it: generate, run (tensor files in and out), partition (table and
// DOT), perf (the peer protocol's JSON and dumps), and its errors.
#include <epstack/testing/bench_inputs.hpp>
#include <epstack/testing/model_zoo.hpp>
#include <epstack/onnx/onnx_io.hpp>
#include <epstack/providers/cpu.hpp>
#include <epstack/runtime/session.hpp>

#include "../support/temp_dir.hpp"
#include "../../tools/child.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

using namespace epstack;
namespace fs = std::filesystem;

namespace {

struct result {
  int code = -1;
  std::string out;  // stdout and stderr together
};

// `env`: assignments for the command's environment ("NAME=value ...").
result epstack_cli(const std::string& args, const std::string& env = {}) {
  const std::string cmd = env + (env.empty() ? "" : " ") + std::string(EPSTACK_CLI) + " " + args + " 2>&1";
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

TEST_CASE("epstack run reads and writes sequences and optionals as the test runner does") {
  // y = ConcatFromSequence(s, axis 0); t = SequenceInsert(s, x): a sequence input, a tensor and a sequence output; and
  // o = Optional(x) (opset 15), an optional output.
  test::temp_dir dir;
  model m;
  m.opsets = {{"", 15}};
  m.graph.set_name("seq");
  const auto f2 = type_info::tensor_of(element_type::float32, shape{2});
  m.graph.add_input("s", type_info::sequence_of(f2));
  m.graph.add_input("x", f2);
  node concat;
  concat.name = "concat";
  concat.op_type = "ConcatFromSequence";
  concat.attributes.set("axis", std::int64_t{0});
  m.graph.add_node(std::move(concat), {"s"}, {"y"});
  node insert;
  insert.name = "insert";
  insert.op_type = "SequenceInsert";
  m.graph.add_node(std::move(insert), {"s", "x"}, {"t"});
  node opt;
  opt.name = "opt";
  opt.op_type = "Optional";
  m.graph.add_node(std::move(opt), {"x"}, {"o"});
  m.graph.add_output("y", type_info::tensor_of(element_type::float32, shape{4}));
  m.graph.add_output("t", type_info::sequence_of(f2));
  m.graph.add_output("o", type_info::optional_of(f2));
  REQUIRE(save_model(m, dir / "seq.onnx").is_ok());
  auto loaded = load_model(dir / "seq.onnx");
  REQUIRE_MESSAGE(loaded.has_value(), loaded.status().to_string());
  const auto& g = loaded->graph;

  fs::create_directories(dir / "in");
  tensor_sequence seq;
  seq.elem = element_type::float32;
  seq.items = {tensor::from<float>({2}, {1, 2}), tensor::from<float>({2}, {3, 4})};
  REQUIRE(save_value(ivalue(seq), g.value(g.inputs()[0]).type, dir / "in" / "input_0.pb").is_ok());
  REQUIRE(save_value(tensor::from<float>({2}, {5, 6}), f2, dir / "in" / "input_1.pb").is_ok());
  auto r = epstack_cli("run " + (dir / "seq.onnx").string() + " --input-dir " + (dir / "in").string() + " --output-dir " +
                       (dir / "out").string());
  REQUIRE_MESSAGE(r.code == 0, r.out);
  auto y = load_value(dir / "out" / "output_0.pb", g.value(g.outputs()[0]).type);
  REQUIRE_MESSAGE(y.has_value(), y.status().to_string());
  CHECK(y->as_tensor().same_content(tensor::from<float>({4}, {1, 2, 3, 4})));
  auto t = load_value(dir / "out" / "output_1.pb", g.value(g.outputs()[1]).type);
  REQUIRE_MESSAGE(t.has_value(), t.status().to_string());
  REQUIRE(t->is_sequence());
  REQUIRE(t->as_sequence().items.size() == 3);
  CHECK(t->as_sequence().items[2].same_content(tensor::from<float>({2}, {5, 6})));
  auto o = load_value(dir / "out" / "output_2.pb", g.value(g.outputs()[2]).type);
  REQUIRE_MESSAGE(o.has_value(), o.status().to_string());
  CHECK(o->as_tensor().same_content(tensor::from<float>({2}, {5, 6})));
  // A file that is not a SequenceProto where the model declares a sequence is an error naming the file.
  {
    std::ofstream f(dir / "in" / "input_0.pb", std::ios::binary | std::ios::trunc);
    f << "\x0a\xff\xff";  // field 1 claims a long string that is not there
  }
  auto bad = epstack_cli("run " + (dir / "seq.onnx").string() + " --input-dir " + (dir / "in").string());
  CHECK(bad.code == 1);
  CHECK(bad.out.find("input_0.pb") != std::string::npos);
}

TEST_CASE("epstack run reads and writes the ONNX 1.22 element types: float to int4 and float8 and back, packed") {
  test::temp_dir dir;
  model m;
  m.ir_version = 10;
  m.opsets = {{"", 21}};
  m.graph.set_name("small_types");
  m.graph.add_input("x", type_info::tensor_of(element_type::float32, shape{5}));
  const auto cast = [&](const char* name, const std::string& in, const std::string& out, element_type to) {
    node n;
    n.name = name;
    n.op_type = "Cast";
    n.attributes.set("to", static_cast<std::int64_t>(to));
    m.graph.add_node(std::move(n), {in}, {out});
  };
  cast("to_int4", "x", "q", element_type::int4);
  cast("to_e4m3", "x", "f8", element_type::float8e4m3fn);
  cast("back", "q", "y", element_type::float32);
  m.graph.add_output("q", type_info::tensor_of(element_type::int4, shape{5}));
  m.graph.add_output("f8", type_info::tensor_of(element_type::float8e4m3fn, shape{5}));
  m.graph.add_output("y", type_info::tensor_of(element_type::float32, shape{5}));
  REQUIRE(save_model(m, dir / "small.onnx").is_ok());
  fs::create_directories(dir / "in");
  const auto f5 = type_info::tensor_of(element_type::float32, shape{5});
  REQUIRE(save_value(tensor::from<float>({5}, {1.0f, -2.0f, 3.0f, 7.0f, -8.0f}), f5, dir / "in" / "input_0.pb").is_ok());
  auto r = epstack_cli("run " + (dir / "small.onnx").string() + " --input-dir " + (dir / "in").string() + " --output-dir " +
                       (dir / "out").string());
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("int4[5]") != std::string::npos);
  auto q = load_value(dir / "out" / "output_0.pb", type_info::tensor_of(element_type::int4, shape{5}));
  REQUIRE_MESSAGE(q.has_value(), q.status().to_string());
  const tensor& qt = q->as_tensor();
  CHECK(qt.type() == element_type::int4);
  REQUIRE(qt.byte_size() == 3);  // 5 values, two to a byte, low nibble first
  const auto* qb = reinterpret_cast<const std::uint8_t*>(qt.data());
  CHECK(qb[0] == 0xe1);  // 1, -2
  CHECK(qb[1] == 0x73);  // 3, 7
  CHECK(qb[2] == 0x08);  // -8
  auto f8 = load_value(dir / "out" / "output_1.pb", type_info::tensor_of(element_type::float8e4m3fn, shape{5}));
  REQUIRE_MESSAGE(f8.has_value(), f8.status().to_string());
  const auto* fb = reinterpret_cast<const std::uint8_t*>(f8->as_tensor().data());
  CHECK(fb[0] == 0x38);  // 1.0 = 2^0: exponent 7, mantissa 0
  CHECK(fb[1] == 0xc0);  // -2.0
  auto y = load_value(dir / "out" / "output_2.pb", f5);
  REQUIRE_MESSAGE(y.has_value(), y.status().to_string());
  CHECK(y->as_tensor().same_content(tensor::from<float>({5}, {1.0f, -2.0f, 3.0f, 7.0f, -8.0f})));
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

TEST_CASE("epstack partition names the machine class its estimates used, and EPSTACK_MACHINE_CLASS chooses one") {
  test::temp_dir dir;
  const auto model = dir / "mlp.onnx";
  // 48 MiB of weights at batch 1: streamed from memory, where the classes' profiles differ.
  REQUIRE(epstack_cli("generate mlp " + model.string() + " --widths 2048,2048,2048,2048").code == 0);
  const std::string cmd = "partition " + model.string() + " --providers default --free-dims batch=1";
  const auto split = epstack_cli(cmd, "EPSTACK_MACHINE_CLASS=avx512_split");
  REQUIRE_MESSAGE(split.code == 0, split.out);
  const auto unknown = epstack_cli(cmd, "EPSTACK_MACHINE_CLASS=zen9");
  REQUIRE_MESSAGE(unknown.code == 0, unknown.out);
  CHECK(unknown.out.find("warning: EPSTACK_MACHINE_CLASS='zen9' names no machine class (avx512_full, avx512_split, avx512_intel)") !=
        std::string::npos);
  CHECK(split.out.find("warning") == std::string::npos);
  if (split.out.find("DnnlExecutionProvider") == std::string::npos) return;  // a tool built without oneDNN
  const auto full = epstack_cli(cmd, "EPSTACK_MACHINE_CLASS=avx512_full");
  REQUIRE_MESSAGE(full.code == 0, full.out);
  CHECK(split.out.find("profiles for avx512_split machines") != std::string::npos);
  CHECK(full.out.find("profiles for avx512_full machines") != std::string::npos);
  const auto intel = epstack_cli(cmd, "EPSTACK_MACHINE_CLASS=avx512_intel");
  REQUIRE_MESSAGE(intel.code == 0, intel.out);
  CHECK(intel.out.find("profiles for avx512_intel machines") != std::string::npos);
  // The choice each class's profiles make: the CPU provider streams the weights faster on a split core; elsewhere
  // the two are level within the margin, and oneDNN's thread runtime is not worth what it would save.
  CHECK(split.out.find("-> CPUExecutionProvider\n") != std::string::npos);
  for (const auto* level : {&full, &intel})
    CHECK(level->out.find("-> CPUExecutionProvider (DnnlExecutionProvider's thread runtime is not worth what its "
                          "partitions save)") != std::string::npos);
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
                          "\"run_ms\":{\"median\":", "\"p90\":", "\"p99\":", "\"peak_rss_mb\":", "\"first_run_ms\":", "\"arena_mb\":", "\"iters\":5", "\"dims\":{\"batch\":3}",
                          "\"cpu_ms_per_run\":", "\"gap_ms\":0"})
    CHECK_MESSAGE(line.find(key) != std::string::npos, key);
  // Where a create's time goes: the stages in order, each reached later than the one before.
  const auto stages_at = line.find("\"create_stages_ms\":{");
  REQUIRE(stages_at != std::string::npos);
  double before = 0;
  for (const char* stage : {"\"optimize\":", "\"partition\":", "\"compile\":"}) {
    const auto at = line.find(stage, stages_at);
    REQUIRE_MESSAGE(at != std::string::npos, stage);
    CHECK(at < line.find('}', stages_at));
    const double ms = std::strtod(line.c_str() + at + std::strlen(stage), nullptr);
    CHECK(ms > before);
    before = ms;
  }
  CHECK(before < std::strtod(line.c_str() + line.find("\"create_ms\":{\"median\":") + 22, nullptr) + 1e-9);
  // The read floor: the model file's bytes, read in the same run.
  CHECK(line.find("\"read_ms\":{\"median\":") != std::string::npos);
  CHECK(line.find("\"bytes\":" + std::to_string(fs::file_size(model)) + ",\"files\":1}") != std::string::npos);
  const auto manifest = read(dir / "dump" / "manifest.json");
  CHECK(manifest.find("\"file\":\"input_0_input.bin\"") != std::string::npos);
  CHECK(manifest.find("\"file\":\"output_0_logits.bin\"") != std::string::npos);
  CHECK(fs::file_size(dir / "dump" / "input_0_input.bin") == 3 * 16 * sizeof(float));
  CHECK(fs::file_size(dir / "dump" / "output_0_logits.bin") == 3 * 4 * sizeof(float));
}

TEST_CASE("epstack perf --gap-ms pauses after each timed run and reports the CPU time a run") {
  test::temp_dir dir;
  const auto model = dir / "mlp_small.onnx";
  REQUIRE(epstack_cli("generate mlp " + model.string() + " --widths 16,8,4").code == 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = epstack_cli("perf --model " + model.string() + " --threads 2 --warmup 1 --iters 4 --creates 0 --gap-ms 100 " +
                       "--config session.intra_op.allow_spinning=0");
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(wall_ms >= 400.0);  // four pauses of 100 ms
  const auto line = r.out.substr(r.out.find("{\"engine\""));
  CHECK(line.find("\"gap_ms\":100") != std::string::npos);
  const auto at = line.find("\"cpu_ms_per_run\":");
  REQUIRE(at != std::string::npos);
  const double cpu = std::strtod(line.c_str() + at + std::strlen("\"cpu_ms_per_run\":"), nullptr);
  CHECK(cpu >= 0.0);
  CHECK(cpu < 100.0);  // a small model; no run ends in a pause of 100 ms spent spinning
  CHECK(r.out.find("ms of CPU time a run") != std::string::npos);
  auto bad = epstack_cli("perf --model " + model.string() + " --gap-ms -5");
  CHECK(bad.code == 2);
  CHECK(bad.out.find("--gap-ms must be at least 0") != std::string::npos);
  auto huge = epstack_cli("perf --model " + model.string() + " --gap-ms 3000000000");
  CHECK(huge.code == 2);
  CHECK(huge.out.find("--gap-ms must be at most 2147483647") != std::string::npos);
}

// compare: two CPU sessions of a transformer, one with its products fused and one without, run in turn in one
// process: each arm's times, the ratios, the outputs compared (the same within rounding); its refusals.
TEST_CASE("epstack compare runs arms side by side in one process and reports medians, ratios and differences") {
  test::temp_dir dir;
  const auto model = dir / "tr.onnx";
  REQUIRE(epstack_cli("generate transformer " + model.string() + " --layers 1 --hidden 64").code == 0);
  auto r = epstack_cli("compare --model " + model.string() + " --rounds 6 --warmup 1 --gap-ms 0 --threads 2 --dims batch=1,seq=16 " +
                       "--arm fused:cpu --arm plain:cpu:epstack.cpu_fuse_products=0");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  const auto at = r.out.find("{\"model\"");
  REQUIRE(at != std::string::npos);
  const std::string line = r.out.substr(at);
  CHECK(line.find("\"rounds\":6") != std::string::npos);
  CHECK(line.find("\"label\":\"fused\",\"providers\":\"cpu\",\"config\":{}") != std::string::npos);
  CHECK(line.find("\"label\":\"plain\",\"providers\":\"cpu\",\"config\":{\"epstack.cpu_fuse_products\":\"0\"}") != std::string::npos);
  CHECK(line.find("\"ratios\":[{\"arm\":\"plain\",\"over\":\"fused\"") != std::string::npos);
  CHECK(line.find("\"first_over_faster\":{\"arm\":\"plain\"") != std::string::npos);
  // The plain arm's outputs against the fused one's: within rounding (|a - b| / (1 + |b|)).
  const auto d = line.find("\"max_difference\":", line.find("\"label\":\"plain\""));
  REQUIRE(d != std::string::npos);
  const double diff = std::strtod(line.c_str() + d + std::strlen("\"max_difference\":"), nullptr);
  CHECK(diff >= 0.0);
  CHECK(diff < 1e-4);
  CHECK(r.out.find("plain / fused: median ") != std::string::npos);
  CHECK(r.out.find("differs from") == std::string::npos);
  // Fused and unfused products are different plans: neither arm names the other's, and the rule's comparison says so.
  CHECK(line.find("\"same_plan_as\":null") != std::string::npos);
  CHECK(line.find("\"same_plan_as\":\"fused\"") == std::string::npos);
  CHECK(line.find("\"same_plan\":false") != std::string::npos);
  CHECK(r.out.find("the difference is the machine's") == std::string::npos);

  // Three arms: whole cycles of their 2 orders (3 rounds become 4), 0 1 2 then 0 2 1: run after run, each arm follows
  // each other once and never itself.
  auto three = epstack_cli("compare --model " + model.string() + " --rounds 3 --warmup 0 --gap-ms 0 --threads 1 " +
                           "--arm a:cpu --arm b:cpu --arm c:cpu:epstack.cpu_fuse_products=0");
  REQUIRE_MESSAGE(three.code == 0, three.out);
  CHECK(three.out.find("3 rounds rounded up to 4 (whole cycles of 2 orders of the arms)") != std::string::npos);
  CHECK(three.out.find("\"rounds\":4") != std::string::npos);
  CHECK(three.out.find("\"orders\":[[0,1,2],[0,2,1]]") != std::string::npos);
  // a and b are one plan (b names a); c, without fused products, is another. The faster of b and c is either.
  CHECK(three.out.find("\"label\":\"a\",\"providers\":\"cpu\",\"config\":{},\"median_ms\"") != std::string::npos);
  const auto b_at = three.out.find("\"label\":\"b\"");
  const auto c_at = three.out.find("\"label\":\"c\"");
  REQUIRE(b_at != std::string::npos);
  REQUIRE(c_at != std::string::npos);
  CHECK(three.out.find("\"same_plan_as\":\"a\"", b_at) < c_at);
  CHECK(three.out.find("\"same_plan_as\":null", c_at) != std::string::npos);
  const bool b_faster = three.out.find("\"first_over_faster\":{\"arm\":\"b\"") != std::string::npos;
  CHECK(three.out.find(b_faster ? "\"same_plan\":true" : "\"same_plan\":false") != std::string::npos);
  CHECK((three.out.find("the difference is the machine's") != std::string::npos) == b_faster);
  // Four and five arms: the cycle's run sequence (its end followed by its start) holds every ordered pair of arms once.
  for (const int n : {4, 5}) {
    CAPTURE(n);
    std::string arms;
    for (int k = 0; k < n; ++k) arms += " --arm a" + std::to_string(k) + ":cpu";
    auto many = epstack_cli("compare --model " + model.string() + " --rounds 2 --warmup 0 --threads 1" + arms);
    REQUIRE_MESSAGE(many.code == 0, many.out);
    const auto o = many.out.find("\"orders\":[[");
    REQUIRE(o != std::string::npos);
    std::vector<int> seq;
    for (std::size_t i = o + std::strlen("\"orders\":"); i < many.out.size() && many.out[i] != '}'; ++i) {
      if (many.out[i] == ']' && many.out[i + 1] == ']') break;
      if (std::isdigit(static_cast<unsigned char>(many.out[i])) != 0) seq.push_back(many.out[i] - '0');
    }
    REQUIRE(seq.size() == static_cast<std::size_t>(n * (n - 1)));
    std::set<std::pair<int, int>> pairs;
    for (std::size_t i = 0; i < seq.size(); ++i) {
      const int a = seq[i], b = seq[(i + 1) % seq.size()];
      CHECK(a != b);
      pairs.insert({a, b});
    }
    CHECK(pairs.size() == static_cast<std::size_t>(n * (n - 1)));
  }
  // An arm that differs only in a session option its plan does not show is not the same plan.
  auto spin = epstack_cli("compare --model " + model.string() + " --rounds 2 --warmup 0 --threads 1 " +
                          "--arm a:cpu --arm s:cpu:session.intra_op.allow_spinning=0");
  REQUIRE_MESSAGE(spin.code == 0, spin.out);
  CHECK(spin.out.find("\"same_plan_as\":\"a\"") == std::string::npos);
  CHECK(spin.out.find("\"same_plan\":false") != std::string::npos);
  auto empty = epstack_cli("compare --model " + model.string() + " --arm a::k=v --arm b:cpu");
  CHECK(empty.code == 2);
  CHECK(empty.out.find("no PROVIDERS between the colons") != std::string::npos);

  auto one = epstack_cli("compare --model " + model.string() + " --arm a:cpu");
  CHECK(one.code == 2);
  CHECK(one.out.find("give two --arm or more") != std::string::npos);
  auto spec = epstack_cli("compare --model " + model.string() + " --arm nocolon --arm b:cpu");
  CHECK(spec.code == 2);
  CHECK(spec.out.find("--arm 'nocolon': expected LABEL:PROVIDERS") != std::string::npos);
  auto stack = epstack_cli("compare --model " + model.string() + " --arm a:cpu --arm b:tpu,cpu --rounds 2");
  CHECK(stack.code != 0);
  CHECK(stack.out.find("unknown provider stack 'tpu,cpu'") != std::string::npos);
  auto rounds = epstack_cli("compare --model " + model.string() + " --rounds 1");
  CHECK(rounds.code == 2);
  CHECK(rounds.out.find("--rounds must be from 2 to 1000000") != std::string::npos);
  auto bad_cfg = epstack_cli("compare --model " + model.string() + " --arm a:cpu --arm b:cpu:epstack.cpu_fuse_products=maybe --rounds 2");
  CHECK(bad_cfg.code != 0);
  CHECK(bad_cfg.out.find("arm 'b'") != std::string::npos);
  CHECK(bad_cfg.out.find("epstack.cpu_fuse_products") != std::string::npos);

  // Runs back to back unless --gap-ms says otherwise; CPU arms alone leave OpenMP's settings as they are.
  const std::string quiet_omp = "env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY";
  auto cpu_only = epstack_cli("compare --model " + model.string() + " --rounds 2 --warmup 0 --threads 1 --arm a:cpu --arm b:cpu", quiet_omp);
  REQUIRE_MESSAGE(cpu_only.code == 0, cpu_only.out);
  CHECK(cpu_only.out.find("\"gap_ms\":0,") != std::string::npos);
  CHECK(cpu_only.out.find("gomp_spincount") == std::string::npos);
#if defined(EPSTACK_WITH_DNNL)
  // An arm on oneDNN (OpenMP's threads): the tool runs itself again with libgomp's idle spin bounded, the same
  // arguments and the same report; a spin count or wait policy the environment sets is kept.
  auto omp = epstack_cli("compare --model " + model.string() + " --rounds 2 --warmup 0 --threads 1 --arm a:cpu --arm d:dnnl,cpu", quiet_omp);
  REQUIRE_MESSAGE(omp.code == 0, omp.out);
  CHECK(omp.out.find("\"gomp_spincount\":\"20000\"") != std::string::npos);
  CHECK(omp.out.find("\"label\":\"d\",\"providers\":\"dnnl,cpu\"") != std::string::npos);
  CHECK(omp.out.find("\"rounds\":2") != std::string::npos);
  auto set = epstack_cli("compare --model " + model.string() + " --rounds 2 --warmup 0 --threads 1 --arm a:cpu --arm d:dnnl,cpu",
                         "env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=777");
  REQUIRE_MESSAGE(set.code == 0, set.out);
  CHECK(set.out.find("\"gomp_spincount\":\"777\"") != std::string::npos);
  auto policy = epstack_cli("compare --model " + model.string() + " --rounds 2 --warmup 0 --threads 1 --arm a:cpu --arm d:default",
                            "env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=passive");
  REQUIRE_MESSAGE(policy.code == 0, policy.out);
  CHECK(policy.out.find("gomp_spincount") == std::string::npos);
#endif
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
  // --config dnnl.winograd=1: the oneDNN provider's option; Winograd convolutions keep their weights about twice, so
  // the binary is larger, and the model runs from it with the default options.
  auto nw = epstack_cli("compile " + (dir / "b.onnx").string() + " --dims N=2 --threads 2 --config dnnl.winograd=1");
  REQUIRE_MESSAGE(nw.code == 0, nw.out);
  CHECK(fs::file_size(dir / "b_dnnl.bin") > fs::file_size(dir / "a_dnnl.bin"));
  auto rnw = epstack_cli("run " + (dir / "b_ctx.onnx").string() + " --providers default --threads 2");
  REQUIRE_MESSAGE(rnw.code == 0, rnw.out);
  CHECK(rnw.out.find("output logits: float[2,10]") != std::string::npos);
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
  CHECK(h.out.find("dnnl (winograd|0 or 1)") != std::string::npos);
  // -i: the oneDNN provider's options; -C cannot turn generation off or embed the contexts (forced as in ONNX
  // Runtime's tool). With a static batch the weights are laid out at compile time, and Winograd's make the shared
  // binary larger than the default's.
  {
    model st = zoo::make_convnet({8, 16}, 32, 10);
    st.graph.value(st.graph.inputs().front()).type = type_info::tensor_of(element_type::float32, shape{1, 3, 32, 32});
    for (const char* f : {"share_w", "share_d"}) {
      fs::create_directory(dir / f);
      for (const char* m : {"m1.onnx", "m2.onnx"}) REQUIRE(save_model(st, dir / f / m).is_ok());
    }
  }
  auto d = epstack_cli("ctxgen -e dnnl " + (dir / "share_d" / "m1.onnx").string() + "," + (dir / "share_d" / "m2.onnx").string());
  REQUIRE_MESSAGE(d.code == 0, d.out);
  auto bad_key = epstack_cli("ctxgen -e dnnl -i \"tiles|1\" " + (dir / "share_w" / "m1.onnx").string());
  CHECK(bad_key.code == 1);
  CHECK(bad_key.out.find("provider 'dnnl' has no option 'tiles' (it has: winograd)") != std::string::npos);
  auto bad_val = epstack_cli("ctxgen -e dnnl -i \"winograd|yes\" " + (dir / "share_w" / "m1.onnx").string());
  CHECK(bad_val.code == 1);
  CHECK(bad_val.out.find("option 'winograd' takes 0 or 1, found 'yes'") != std::string::npos);
  auto w = epstack_cli("ctxgen -e dnnl -i \"winograd|1\" -C \"ep.context_enable|0 ep.context_embed_mode|1\" " +
                       (dir / "share_w" / "m1.onnx").string() + "," + (dir / "share_w" / "m2.onnx").string());
  REQUIRE_MESSAGE(w.code == 0, w.out);
  CHECK(fs::is_regular_file(dir / "share_w" / "m2_ctx.onnx"));
  REQUIRE(fs::is_regular_file(dir / "share_w" / "m1_dnnl.bin"));
  CHECK(fs::file_size(dir / "share_w" / "m1_dnnl.bin") > fs::file_size(dir / "share_d" / "m1_dnnl.bin"));
  auto rw = epstack_cli("run " + (dir / "share_w" / "m1_ctx.onnx").string() + " --providers dnnl");
  REQUIRE_MESSAGE(rw.code == 0, rw.out);
#endif
  // Options of a provider that has none, and models in two folders, are refused before anything is compiled.
  auto none = epstack_cli("ctxgen -e cpu -i \"threads|1\" " + (dir / "a.onnx").string());
  CHECK(none.code == 1);
  CHECK(none.out.find("provider 'cpu' has no option 'threads' (it has: none)") != std::string::npos);
  fs::create_directory(dir / "other");
  fs::copy(dir / "b.onnx", dir / "other" / "b.onnx");
  auto two = epstack_cli("ctxgen -e cpu " + (dir / "a.onnx").string() + "," + (dir / "other" / "b.onnx").string());
  CHECK(two.code == 1);
  CHECK(two.out.find("they must be in one folder") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "other" / "b_ctx.onnx"));
}

namespace {
/// A backend-test case folder: a one-node model and one data set.
void write_case(const fs::path& dir, const std::string& op, const tensor& x, const tensor& y) {
  fs::create_directories(dir / "test_data_set_0");
  model m;
  m.graph = graph("case");
  m.opsets = {{"", 17}};
  m.graph.add_input("x", type_info::tensor_of(x.type(), x.get_shape()));
  node nd;
  nd.name = "n";
  nd.op_type = op;
  m.graph.add_node(std::move(nd), {"x"}, {"y"});
  m.graph.value(m.graph.find_value("y")).type = type_info::tensor_of(y.type(), y.get_shape());
  m.graph.add_output("y");
  REQUIRE(save_model(m, dir / "model.onnx").is_ok());
  REQUIRE(save_tensor(x, dir / "test_data_set_0" / "input_0.pb").is_ok());
  REQUIRE(save_tensor(y, dir / "test_data_set_0" / "output_0.pb").is_ok());
}
}  // namespace

TEST_CASE("epstack test-runner: pass, fail and error per case, a report, a summary, expected failures both ways") {
  test::temp_dir dir;
  const auto root = dir / "data";
  const auto x = tensor::from<float>({2, 3}, {-1.0f, 2.0f, -3.0f, 4.0f, 0.5f, std::nanf("")});
  write_case(root / "node" / "test_relu", "Relu", x, tensor::from<float>({2, 3}, {0, 2, 0, 4.0004f, 0.5f, std::nanf("")}));
  write_case(root / "node" / "test_relu_wrong", "Relu", x, tensor::from<float>({2, 3}, {0, 2, 0, 4.1f, 0.5f, 0}));
  write_case(root / "node" / "test_no_kernel", "NoSuchOp", x, x);
  write_case(root / "simple" / "test_abs", "Abs", x, tensor::from<float>({2, 3}, {1, 2, 3, 4, 0.5f, std::nanf("")}));
  fs::create_directories(root / "real");  // not one of the four suites: ignored

  const auto report = dir / "report.tsv";
  auto r = epstack_cli("test-runner " + root.string() + " --report " + report.string());
  CHECK(r.code == 1);  // failures and no expected-failures list
  CHECK(r.out.find("summary: node 1/3, simple 1/1; total 2/4 pass, 1 fail, 1 error") != std::string::npos);
  // 4.0004 is within rtol 1e-3 of 4 and NaN equals NaN; 4.1 is not, and the reason says where.
  CHECK(r.out.find("fail node/test_relu_wrong: test_data_set_0: output 'y': 2 of 6 values differ; first at [1,0]: 4, "
                   "expected 4.0999999") != std::string::npos);
  CHECK(r.out.find("error node/test_no_kernel: create:") != std::string::npos);
  const auto rep = read(report);
  CHECK(rep.find("node\ttest_relu\tpass\t\n") != std::string::npos);
  CHECK(rep.find("node\ttest_relu_wrong\tfail\t") != std::string::npos);
  CHECK(rep.find("# summary:") != std::string::npos);

  // The expected failures: exactly the failing cases (with reasons) make the run succeed.
  const auto expected = dir / "expected.txt";
  std::ofstream(expected) << "# comment\nnode/test_relu_wrong 4.1 is not Relu(4)\nnode/test_no_kernel no such operator\n";
  auto ok = epstack_cli("test-runner " + root.string() + " --expected-failures " + expected.string());
  CHECK_MESSAGE(ok.code == 0, ok.out);
  CHECK(ok.out.find("0 unexpected failures, 0 unexpected passes") != std::string::npos);
  // A listed case that passes fails the run, as does a failure not listed.
  std::ofstream(expected) << "node/test_relu_wrong wrong\nnode/test_no_kernel none\nsimple/test_abs listed but passes\n";
  auto stale = epstack_cli("test-runner " + root.string() + " --expected-failures " + expected.string());
  CHECK(stale.code == 1);
  CHECK(stale.out.find("unexpected pass simple/test_abs") != std::string::npos);
  std::ofstream(expected) << "node/test_relu_wrong wrong\n";
  auto fresh = epstack_cli("test-runner " + root.string() + " --expected-failures " + expected.string());
  CHECK(fresh.code == 1);
  CHECK(fresh.out.find("1 unexpected failures, 0 unexpected passes") != std::string::npos);
  std::ofstream(expected) << "node/test_relu_wrong\n";  // no reason
  auto noreason = epstack_cli("test-runner " + root.string() + " --expected-failures " + expected.string());
  CHECK(noreason.code == 1);
  CHECK(noreason.out.find("has no reason") != std::string::npos);

  // One suite, one case, a missing folder.
  auto one = epstack_cli("test-runner " + (root / "node" / "test_relu").string());
  CHECK(one.code == 0);
  CHECK(one.out.find("total 1/1 pass") != std::string::npos);
  auto suite = epstack_cli("test-runner " + root.string() + " --suite simple");
  CHECK(suite.code == 0);
  auto missing = epstack_cli("test-runner " + (dir / "nothing").string() + " --skip-missing");
  CHECK(missing.code == 77);
  CHECK(missing.out.find("SKIP") != std::string::npos);
}

TEST_CASE("run_in_workers: many jobs to a child, a crash, a hang or an exception ends only its job, results in order") {
  // Job 2 aborts, 4 runs past the 1 s limit, 5 throws, 8-10 take 0.6 s each (under the limit, which counts per job),
  // 11 exits without a result, 12 returns nothing; the others return their child's process id. done() takes 1.2 s
  // over job 6: job 7's result, waiting in the pipe by then, is still its result.
  std::vector<cli::child_result> got;
  std::vector<std::size_t> order;
  cli::run_in_workers(14, [](std::size_t i) -> std::string {
    if (i == 2) {
      std::signal(SIGABRT, SIG_DFL);  // doctest's crash report would print from the child
      std::abort();
    }
    if (i == 4) std::this_thread::sleep_for(std::chrono::seconds(5));
    if (i == 5) throw std::runtime_error("job five\nfailed");
    if (i >= 8 && i <= 10) std::this_thread::sleep_for(std::chrono::milliseconds(600));
    if (i == 11) ::_exit(0);
    if (i == 12) return {};
    return std::to_string(::getpid());
  }, [&](std::size_t i, const cli::child_result& r) {
    order.push_back(i);
    got.push_back(r);
    if (i == 6) std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    return true;
  }, 1);
  std::vector<std::size_t> all(14);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  REQUIRE(order == all);
  for (std::size_t i : {0, 1, 3, 6, 7, 8, 9, 10, 13}) {
    CAPTURE(i);
    CHECK(got[i].finished);
    CHECK(got[i].text != std::to_string(::getpid()));  // in a child, never the test's process
  }
  CHECK(got[0].text == got[1].text);  // one child for jobs until one ends it
  CHECK(got[3].text != got[1].text);  // a new child after the crash
  CHECK_FALSE(got[2].finished);
  CHECK(got[2].signal == SIGABRT);
  CHECK(got[2].why(1).find("crashed: signal") == 0);
  CHECK_FALSE(got[4].finished);
  CHECK(got[4].timed_out);
  CHECK(got[4].why(1) == "timed out after 1 s");
  CHECK(got[6].text != got[3].text);  // the hung child was killed
  CHECK(got[5].finished);
  CHECK(got[5].text == "exception: job five\nfailed");  // framed: a text may hold newlines
  CHECK(got[6].text == got[7].text);  // the exception did not end its child, nor did done()'s 1.2 s
  CHECK(got[10].text == got[6].text);  // three jobs of 0.6 s under a 1 s limit
  CHECK_FALSE(got[11].finished);
  CHECK_FALSE(got[11].timed_out);
  CHECK(got[11].signal == 0);
  CHECK(got[11].why(1) == "the child process exited without a result");
  CHECK(got[12].finished);  // an empty result is a result
  CHECK(got[12].text.empty());
  CHECK(got[13].text != got[10].text);  // a new child after the exit

  // done() returning false stops the run (with no end: the count may be unbounded).
  std::size_t seen = 0;
  cli::run_in_workers(std::numeric_limits<std::size_t>::max(), [](std::size_t i) { return std::to_string(i); },
                      [&](std::size_t i, const cli::child_result& r) {
                        CHECK(r.text == std::to_string(i));
                        return ++seen < 5;
                      }, 10);
  CHECK(seen == 5);

  // done() throwing: the exception reaches the caller, and the child is killed and reaped (no child is left).
  CHECK_THROWS_AS(cli::run_in_workers(std::numeric_limits<std::size_t>::max(), [](std::size_t) { return std::string("x"); },
                                      [](std::size_t, const cli::child_result&) -> bool { throw std::runtime_error("done"); }, 10),
                  std::runtime_error);
  CHECK(::waitpid(-1, nullptr, WNOHANG) == -1);
  CHECK(errno == ECHILD);
}

TEST_CASE("epstack test-runner --constant-weights makes a node's weight inputs constants with the data set's values") {
  // One Conv reading its weight as a graph input, as the ONNX node cases do.
  test::temp_dir dir;
  const fs::path c = dir / "node" / "test_conv_weights";
  fs::create_directories(c / "test_data_set_0");
  model m;
  m.graph = graph("conv_case");
  m.opsets = {{"", 13}};
  m.graph.add_input("x", type_info::tensor_of(element_type::float32, shape{1, 2, 5, 5}));
  m.graph.add_input("W", type_info::tensor_of(element_type::float32, shape{3, 2, 3, 3}));
  node nd;
  nd.name = "conv";
  nd.op_type = "Conv";
  m.graph.add_node(std::move(nd), {"x", "W"}, {"y"});
  m.graph.add_output("y", type_info::tensor_of(element_type::float32, shape{1, 3, 3, 3}));
  REQUIRE(save_model(m, c / "model.onnx").is_ok());
  const tensor x = zoo::random_tensor({1, 2, 5, 5}, 1, 1.0f), W = zoo::random_tensor({3, 2, 3, 3}, 2, 0.5f);
  REQUIRE(save_tensor(x, c / "test_data_set_0" / "input_0.pb").is_ok());
  REQUIRE(save_tensor(W, c / "test_data_set_0" / "input_1.pb").is_ok());
  auto s = session<cpu_provider>::create(m);
  REQUIRE(s.has_value());
  auto y = s->run({{"x", x}, {"W", W}});
  REQUIRE(y.has_value());
  REQUIRE(save_tensor((*y)[0], c / "test_data_set_0" / "output_0.pb").is_ok());
#if defined(EPSTACK_WITH_DNNL)
  // As inputs the weights keep the Conv off oneDNN; as constants it reaches it, and the answer is the same.
  auto plain = epstack_cli("test-runner " + dir.path().string() + " --providers default");
  REQUIRE_MESSAGE(plain.code == 0, plain.out);
  CHECK(plain.out.find("put nodes on a provider other than the CPU") == std::string::npos);
  auto cw = epstack_cli("test-runner " + dir.path().string() + " --providers default --constant-weights");
  REQUIRE_MESSAGE(cw.code == 0, cw.out);
  CHECK(cw.out.find("total 1/1 pass, 0 fail, 0 error; 1 passing cases put nodes on a provider other than the CPU") !=
        std::string::npos);
#else
  auto cw = epstack_cli("test-runner " + dir.path().string() + " --providers cpu --constant-weights");
  REQUIRE_MESSAGE(cw.code == 0, cw.out);
  CHECK(cw.out.find("total 1/1 pass") != std::string::npos);
#endif
}

TEST_CASE("epstack fuzz-providers: random graphs compared between stacks, counted, options checked") {
  test::temp_dir dir;
  auto r = epstack_cli("fuzz-providers --seed 5 --graphs 12 --out " + (dir / "findings").string());
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("seeds 5..16: 12 graphs") != std::string::npos);
  CHECK(r.out.find("0 findings, 0 invalid") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "findings"));
  auto bad = epstack_cli("fuzz-providers --graphs 0");
  CHECK(bad.code == 2);
  CHECK(bad.out.find("--graphs needs a positive number") != std::string::npos);
  auto stack = epstack_cli("fuzz-providers --providers tpu,cpu --graphs 1");
  CHECK(stack.code == 1);
  CHECK(stack.out.find("unknown provider stack 'tpu,cpu'") != std::string::npos);
}

#if defined(EPSTACK_WITH_DNNL)
TEST_CASE("epstack cache ls|clear|verify: the entries a session wrote through epstack.cache_dir") {
  test::temp_dir dir;
  const auto model = dir / "convnet.onnx";
  const auto cache = dir / "cache";
  REQUIRE(epstack_cli("generate convnet " + model.string() + " --channels 8,16 --size 32").code == 0);
  const std::string run = "run " + model.string() + " --providers dnnl,cpu --dims N=2 --threads 2 --config epstack.cache_dir=" +
                          cache.string() + " --output-dir ";
  auto first = epstack_cli(run + (dir / "o1").string());
  REQUIRE_MESSAGE(first.code == 0, first.out);
  auto second = epstack_cli(run + (dir / "o2").string());
  REQUIRE_MESSAGE(second.code == 0, second.out);
  auto a = load_tensor(dir / "o1" / "output_0.pb");
  auto b = load_tensor(dir / "o2" / "output_0.pb");
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  CHECK(a->same_content(*b));

  auto ls = epstack_cli("cache ls " + cache.string());
  REQUIRE_MESSAGE(ls.code == 0, ls.out);
  CHECK(ls.out.find("1 entries") != std::string::npos);
  CHECK(ls.out.find("DnnlExecutionProvider,CPUExecutionProvider") != std::string::npos);
  CHECK(ls.out.find(model.filename().string()) != std::string::npos);
  auto ok = epstack_cli("cache verify " + cache.string());
  CHECK_MESSAGE(ok.code == 0, ok.out);
  CHECK(ok.out.find("0 damaged") != std::string::npos);

  // A byte of a weight changed: verify reads every byte and says which entry.
  fs::path bin;
  for (const auto& e : fs::recursive_directory_iterator(cache))
    if (e.path().extension() == ".bin") bin = e.path();
  REQUIRE_FALSE(bin.empty());
  {
    std::fstream f(bin, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-100, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    f.seekp(-100, std::ios::end);
    c = static_cast<char>(c ^ 0x5a);
    f.write(&c, 1);
  }
  auto bad = epstack_cli("cache verify " + cache.string());
  CHECK(bad.code == 1);
  CHECK(bad.out.find("BAD: ") != std::string::npos);
  CHECK(bad.out.find("1 damaged") != std::string::npos);

  auto cleared = epstack_cli("cache clear " + cache.string());
  CHECK(cleared.code == 0);
  CHECK(cleared.out.find("removed 1 entries") != std::string::npos);
  CHECK(epstack_cli("cache ls " + cache.string()).out.find("0 entries") != std::string::npos);
  auto usage = epstack_cli("cache list " + cache.string());
  CHECK(usage.code == 2);
  auto missing = epstack_cli("cache ls " + (dir / "nothing").string());
  CHECK(missing.code == 1);
  CHECK(missing.out.find("is not a folder") != std::string::npos);
}
#endif

TEST_CASE("epstack compile --format deploy, ops, inspect and run: the deployable's three commands") {
  test::temp_dir dir;
  const auto model = dir / "mnv2.onnx";
  auto g = epstack_cli("generate mobilenetv2 " + model.string() + " --size 64");
  REQUIRE_MESSAGE(g.code == 0, g.out);
  const auto deployed = dir / "mnv2.deploy";
  auto c = epstack_cli("compile " + model.string() + " --format deploy --providers cpu --dims N=1 -o " + deployed.string());
  REQUIRE_MESSAGE(c.code == 0, c.out);
  CHECK(c.out.find("wrote " + deployed.string()) != std::string::npos);
  // The kernels the model needs: the blocked-layout convolution and pool, the product of one element type and one row
  // (N=1: the matrix-vector Gemm), the flatten, and not the general product; the same list from the ONNX model
  // compiled in memory.
  const auto header = dir / "mnv2_kernels.hpp";
  auto o = epstack_cli("ops " + deployed.string() + " -o " + header.string() + " --namespace mnv2");
  REQUIRE_MESSAGE(o.code == 0, o.out);
  const std::string h = read(header);
  CHECK(h.find("namespace mnv2 {") != std::string::npos);
  CHECK(h.find("using cpu_provider = epstack::cpu_provider_for<kernels>;") != std::string::npos);
  CHECK(h.find("epstack::ops::nchwc_conv") != std::string::npos);
  CHECK(h.find("epstack::ops::nchwc_global_average_pool") != std::string::npos);
  // No unit-stride dense 3x3 convolution: the Winograd kernel is not linked.
  CHECK(h.find("epstack::ops::nchwc_winograd_conv") == std::string::npos);
  // Its classifier is a Linear layer (transB = 1): the dot-product Gemm, not the one of every transpose.
  CHECK(h.find("epstack::ops::gemm_mv_bt_of<float>") != std::string::npos);
  CHECK(h.find("epstack::ops::gemm_mv_of<float>") == std::string::npos);
  CHECK(h.find("epstack::ops::gemm_of<float>") == std::string::npos);
  CHECK(h.find("epstack::ops::gemm,") == std::string::npos);
  CHECK(h.find("epstack::ops::flatten") != std::string::npos);
  const auto list_of = [](const std::string& text) { return text.substr(text.find("using kernels")); };
  auto from_onnx = epstack_cli("ops " + model.string() + " --providers cpu --dims N=1 --namespace mnv2");
  REQUIRE_MESSAGE(from_onnx.code == 0, from_onnx.out);
  CHECK(list_of(from_onnx.out) == list_of(h));
  // A batch of 8 rows is more than the matrix-vector Gemm takes: the float product in full.
  auto batch8 = epstack_cli("ops " + model.string() + " --providers cpu --dims N=8 --namespace mnv2");
  REQUIRE_MESSAGE(batch8.code == 0, batch8.out);
  CHECK(batch8.out.find("epstack::ops::gemm_of<float>") != std::string::npos);
  CHECK(batch8.out.find("gemm_mv_of") == std::string::npos);
  CHECK(batch8.out.find("gemm_mv_bt_of") == std::string::npos);
  // inspect reads it verified; run takes it as it takes an ONNX model, with the same answer.
  auto i = epstack_cli("inspect " + deployed.string());
  REQUIRE_MESSAGE(i.code == 0, i.out);
  CHECK(i.out.find("deployment model: " + deployed.string()) != std::string::npos);
  CHECK(i.out.find("nodes on CPUExecutionProvider:") != std::string::npos);
  CHECK(i.out.find("com.epstack.nchwc16.Conv") != std::string::npos);
  auto run_d = epstack_cli("run " + deployed.string() + " --providers cpu --threads 2");
  // The ONNX model with the same dimension fixed (--free-dims: the session's plan, --dims: the inputs), so that its
  // classifier is the same product of one static row, on the same kernel: the same sums.
  auto run_o = epstack_cli("run " + model.string() + " --providers cpu --threads 2 --dims N=1 --free-dims N=1");
  REQUIRE_MESSAGE(run_d.code == 0, run_d.out);
  REQUIRE_MESSAGE(run_o.code == 0, run_o.out);
  const auto output_line = [](const std::string& text) {
    const auto at = text.find("output logits");
    return text.substr(at, text.find('\n', at) - at);
  };
  CHECK(output_line(run_d.out) == output_line(run_o.out));
  // Refusals: options that do not apply, an existing output, a file that is not a model.
  auto embed = epstack_cli("compile " + model.string() + " --format deploy --embed 1 -o " + (dir / "x.deploy").string());
  CHECK(embed.code == 2);
  auto again = epstack_cli("compile " + model.string() + " --format deploy --providers cpu -o " + deployed.string());
  CHECK(again.code == 1);
  CHECK(again.out.find("exists already") != std::string::npos);
  auto bad_format = epstack_cli("compile " + model.string() + " --format ort");
  CHECK(bad_format.code == 2);
  auto dims_on_deploy = epstack_cli("ops " + deployed.string() + " --dims N=2");
  CHECK(dims_on_deploy.code == 2);
  auto bad_ns = epstack_cli("ops " + deployed.string() + " --namespace 1x");
  CHECK(bad_ns.code == 2);
  test::write_file(dir / "junk.deploy", "EPSTKDPL but nothing else");
  auto junk = epstack_cli("ops " + (dir / "junk.deploy").string());
  CHECK(junk.code == 1);
  CHECK(junk.out.find("invalid_graph") != std::string::npos);
  CHECK(junk.out.find("junk.deploy") != std::string::npos);
}
