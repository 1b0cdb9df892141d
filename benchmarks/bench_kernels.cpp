// Micro-benchmarks of the CPU provider's hot kernels on the shapes the shared models use (ResNet-50, MobileNetV2,
// BERT-base): one node compiled by its kernel and run on the intra-op threads (EPSTACK_BENCH_THREADS, default 2), so
// that a kernel change can be measured without a whole model. Counters: GFLOP/s for products, GB/s for data movement.
// BENCH_COLD=1 in the environment flushes the caches before every iteration (outside the timing; BENCH_FLUSH_MB
// sets how much is written, default 96): weights and inputs come from memory, as in a model's run.
#include <epstack/testing/model_zoo.hpp>
#include <epstack/providers/cpu/kernels.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

using namespace epstack;
namespace ops = epstack::cpu::ops;

namespace {

int bench_threads() {
  const char* e = std::getenv("EPSTACK_BENCH_THREADS");
  return e != nullptr ? std::max(1, std::atoi(e)) : 2;
}
thread_pool& pool() {
  static thread_pool p(bench_threads());
  return p;
}

tensor random(std::vector<std::int64_t> sizes, std::uint64_t seed) {
  tensor t(element_type::float32, sizes);
  for (std::size_t i = 0; i < t.element_count(); ++i) t.typed<float>()[i] = zoo::uniform_at(seed, i);
  return t;
}

// A frame that gives the same buffers back on every call (the n-th allocation of a call reuses the n-th buffer), as a
// session's arena does after its first run.
class reusing_frame final : public execution_frame {
 public:
  tensor allocate(element_type type, std::span<const std::int64_t> sizes, bool) override {
    const auto n = static_cast<std::size_t>(*element_count(sizes)) * element_size(type);
    if (next_ == buffers_.size()) buffers_.push_back(tensor::uninitialized(element_type::uint8, std::vector<std::int64_t>{std::int64_t(n)}));
    tensor& b = buffers_[next_];
    if (b.byte_size() < n) b = tensor::uninitialized(element_type::uint8, std::vector<std::int64_t>{std::int64_t(n)});
    ++next_;
    return tensor::borrow(type, sizes, b.mutable_data(), nullptr);
  }
  Status run_subgraph(const graph&, std::span<const ivalue>, std::vector<ivalue>&) override {
    return Status(errc::not_implemented, "no subgraphs here");
  }
  void reset() { next_ = 0; }

 private:
  std::vector<tensor> buffers_;
  std::size_t next_ = 0;
};

// A single-node graph: inputs (constants become initializers), the node, its outputs.
struct one_node {
  graph g{"bench"};
  std::vector<ivalue> inputs;
  std::vector<ivalue> outputs;
  compute_function fn;

  template <class K>
  static std::unique_ptr<one_node> make(node nd, std::vector<std::pair<tensor, bool>> ins, std::size_t outs = 1) {
    auto b = std::make_unique<one_node>();
    std::vector<std::string> in_names, out_names;
    for (std::size_t i = 0; i < ins.size(); ++i) {
      const std::string name = "x" + std::to_string(i);
      in_names.push_back(name);
      if (ins[i].second) b->g.add_initializer(name, ins[i].first);
      else b->g.add_input(name, type_info::tensor_of(ins[i].first.type(), ins[i].first.get_shape()));
      b->inputs.emplace_back(ins[i].first);
    }
    for (std::size_t o = 0; o < outs; ++o) out_names.push_back("y" + std::to_string(o));
    b->g.add_node(std::move(nd), in_names, out_names);
    b->outputs.resize(outs);
    auto fn = K::compile(b->g, 0);
    if (!fn) throw std::runtime_error(fn.status().to_string());
    b->fn = std::move(*fn);
    return b;
  }
  reusing_frame frame;
  void run(benchmark::State& state) {
    // BENCH_COLD=1: each iteration finds nothing in cache (BENCH_FLUSH_MB, default 96 MiB, written between
    // iterations by all the threads, so that each core's own caches are flushed too, outside the timing), as a
    // model's run finds the weights of its next layer. A shared L3 may keep part of them through 96 MiB: on a Xeon
    // VM ResNet-50's 512-channel 3x3 layer at 7x7 took 754-782 us after 96 MiB, 899 after 512 (0.90-0.99 ms in the
    // model's run, its filters from memory).
    static const bool cold = std::getenv("BENCH_COLD") != nullptr && std::string_view(std::getenv("BENCH_COLD")) != "0";
    static const char* flush_mb = std::getenv("BENCH_FLUSH_MB");
    static std::vector<float> flush(!cold ? 0 : std::size_t(flush_mb != nullptr ? std::max(1, std::atoi(flush_mb)) : 96) << 18);
    for (auto _ : state) {
      if (cold) {
        state.PauseTiming();
        pool().parallel_for(flush.size(), flush.size() / static_cast<std::size_t>(4 * pool().size()), [&](std::size_t b, std::size_t e) {
          for (std::size_t i = b; i < e; ++i) flush[i] += 1.0f;
        });
        benchmark::ClobberMemory();
        state.ResumeTiming();
      }
      frame.reset();
      compute_context ctx(inputs, outputs, &frame, &pool());
      const auto st = fn(ctx);
      if (!st) state.SkipWithError(st.to_string().c_str());
      benchmark::DoNotOptimize(outputs[0].as_tensor().data());
    }
  }
};

node conv_node(std::int64_t k, std::int64_t stride, std::int64_t group, bool fused, const char* act = "Relu") {
  node n;
  n.name = "conv";
  n.op_type = fused ? "FusedConv" : "Conv";
  n.domain = fused ? "com.microsoft" : "";
  n.since_version = fused ? 1 : 11;
  const std::int64_t p = k / 2;
  n.attributes.set("kernel_shape", std::vector<std::int64_t>{k, k});
  n.attributes.set("pads", std::vector<std::int64_t>{p, p, p, p});
  n.attributes.set("strides", std::vector<std::int64_t>{stride, stride});
  if (group != 1) n.attributes.set("group", group);
  if (fused) n.attributes.set("activation", std::string(act));
  return n;
}

// Conv: channels in, channels out, input size, kernel, stride, groups.
void BM_conv(benchmark::State& state) {
  const auto cin = state.range(0), cout = state.range(1), hw = state.range(2), k = state.range(3), s = state.range(4),
             group = state.range(5);
  auto b = one_node::make<ops::fused_conv>(conv_node(k, s, group, true),
                                           {{random({1, cin, hw, hw}, 1), false}, {random({cout, cin / group, k, k}, 2), true},
                                            {random({cout}, 3), true}});
  b->run(state);
  const double out = static_cast<double>(hw / s) * static_cast<double>(hw / s);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(cout) * static_cast<double>(cin / group * k * k) * out,
                                                 benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_conv)
    ->ArgNames({"cin", "cout", "hw", "k", "s", "g"})
    ->Args({3, 64, 224, 7, 2, 1})      // resnet50 stem
    ->Args({64, 64, 56, 3, 1, 1})      // resnet50 layer1 3x3
    ->Args({128, 128, 28, 3, 1, 1})    // resnet50 layer2 3x3
    ->Args({64, 256, 56, 1, 1, 1})     // resnet50 layer1 1x1 expand
    ->Args({256, 64, 56, 1, 1, 1})     // resnet50 layer1 1x1 reduce
    ->Args({1024, 256, 14, 1, 1, 1})   // resnet50 layer3 1x1 reduce
    ->Args({2048, 512, 7, 1, 1, 1})    // resnet50 layer4 1x1 reduce
    ->Args({256, 256, 14, 3, 1, 1})    // resnet50 layer3 3x3
    ->Args({512, 512, 7, 3, 1, 1})     // resnet50 layer4 3x3
    ->Args({1024, 2048, 14, 1, 2, 1})  // resnet50 layer4 downsample
    ->Args({3, 32, 224, 3, 2, 1})      // mobilenetv2 stem
    ->Args({16, 96, 112, 1, 1, 1})     // mobilenetv2 pointwise expand
    ->Args({96, 96, 112, 3, 2, 96})    // mobilenetv2 depthwise stride 2
    ->Args({144, 144, 56, 3, 1, 144})  // mobilenetv2 depthwise stride 1
    ->Args({320, 1280, 7, 1, 1, 1})    // mobilenetv2 last pointwise
    ->Args({144, 24, 56, 1, 1, 1})     // mobilenetv2 pointwise project
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// ResNet-50's 1x1 expansions (conv3) as the model runs them: the residual added in the kernel (input Sum) and Relu.
void BM_nchwc_conv_sum(benchmark::State& state) {
  const auto cin = state.range(0), cout = state.range(1), hw = state.range(2);
  node n = conv_node(1, 1, 1, false);
  n.domain = "com.epstack.nchwc16";
  n.since_version = 1;
  n.attributes.set("activation", std::string("Relu"));
  auto b = one_node::make<ops::nchwc_conv>(std::move(n), {{random({1, cin, hw, hw}, 1), false}, {random({cout, cin, 1, 1}, 2), true},
                                                          {random({cout}, 3), true}, {random({1, cout, hw, hw}, 4), false}});
  b->run(state);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(cout * cin * hw * hw), benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}
BENCHMARK(BM_nchwc_conv_sum)
    ->ArgNames({"cin", "cout", "hw"})
    ->Args({64, 256, 56})    // layer1 conv3
    ->Args({128, 512, 28})   // layer2 conv3
    ->Args({256, 1024, 14})  // layer3 conv3
    ->Args({512, 2048, 7})   // layer4 conv3
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// The blocked-layout (NCHWc) convolution the optimiser writes for the CPU provider, on X already blocked: channels in
// (a multiple of 16), channels out, input size, kernel, stride, groups (= channels: depthwise), with a fused Clip(0, 6)
// as MobileNetV2's layers have. The data's values do not matter to the time.
void BM_nchwc_conv(benchmark::State& state) {
  const auto cin = state.range(0), cout = state.range(1), hw = state.range(2), k = state.range(3), s = state.range(4),
             group = state.range(5);
  node n = conv_node(k, s, group, false);
  n.domain = "com.epstack.nchwc16";
  n.since_version = 1;
  n.attributes.set("activation", std::string("Clip"));
  n.attributes.set("activation_params", std::vector<float>{0.0f, 6.0f});
  auto b = one_node::make<ops::nchwc_conv>(std::move(n), {{random({1, cin, hw, hw}, 1), false}, {random({cout, cin / group, k, k}, 2), true},
                                                          {random({cout}, 3), true}});
  b->run(state);
  const double out = static_cast<double>((hw + s - 1) / s) * static_cast<double>((hw + s - 1) / s);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(cout) * static_cast<double>(cin / group * k * k) * out,
                                                 benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  // X read and Y written once each: what bounds a depthwise layer.
  state.counters["GB/s"] = benchmark::Counter(4.0 * (static_cast<double>(cin * hw * hw) + static_cast<double>(cout) * out) / 1e9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_nchwc_conv)
    ->ArgNames({"cin", "cout", "hw", "k", "s", "g"})
    ->Args({3, 32, 224, 3, 2, 1})      // mobilenetv2 features.0 (first layer: X plain, 3 channels)
    ->Args({3, 64, 224, 7, 2, 1})      // resnet50 conv1 (first layer, 7x7 stride 2)
    ->Args({1024, 2048, 14, 1, 2, 1})  // resnet50 layer4.0.downsample (1x1 stride 2: rows of 7)
    ->Args({1024, 2048, 7, 1, 1, 1})   // the same product on a 7x7 input (one flat row of 49)
    ->Args({512, 1024, 28, 1, 2, 1})   // resnet50 layer3.0.downsample (rows of 14)
    ->Args({512, 1024, 14, 1, 1, 1})   // the same product, flat
    ->Args({256, 256, 28, 3, 2, 1})    // resnet50 layer3.0.conv2 (3x3 stride 2: rows of 14)
    ->Args({32, 32, 112, 3, 1, 32})    // features.1 depthwise
    ->Args({32, 16, 112, 1, 1, 1})     // features.1 projection
    ->Args({96, 96, 112, 3, 2, 96})    // mobilenetv2 features.2 depthwise, stride 2
    ->Args({144, 144, 56, 3, 1, 144})  // features.3 depthwise
    ->Args({192, 192, 28, 3, 1, 192})  // features.6 depthwise
    ->Args({576, 576, 14, 3, 1, 576})  // features.13 depthwise
    ->Args({960, 960, 7, 3, 1, 960})   // features.15 depthwise
    ->Args({32, 192, 28, 1, 1, 1})     // features.6 expansion
    ->Args({96, 576, 14, 1, 1, 1})     // features.12 expansion
    ->Args({16, 96, 112, 1, 1, 1})     // features.2 expansion
    ->Args({16, 96, 28, 1, 1, 1})      // the same at 28x28 (its output fits in L2)
    ->Args({32, 144, 56, 1, 1, 1})     // features.3 expansion (24 channels, padded to 32)
    ->Args({160, 960, 7, 1, 1, 1})     // features.14 expansion
    ->Args({96, 32, 56, 1, 1, 1})      // features.2 projection (to 24 channels, padded to 32)
    ->Args({144, 32, 56, 1, 1, 1})     // features.3 projection
    ->Args({64, 256, 56, 1, 1, 1})     // resnet50 layer1 1x1 expansion
    ->Args({256, 64, 56, 1, 1, 1})     // resnet50 layer1 1x1 reduction
    ->Args({1024, 256, 14, 1, 1, 1})   // resnet50 layer3 1x1 reduction
    ->Args({256, 1024, 14, 1, 1, 1})   // resnet50 layer3 1x1 expansion (conv3)
    ->Args({128, 512, 28, 1, 1, 1})    // resnet50 layer2 1x1 expansion (conv3)
    ->Args({128, 128, 56, 3, 2, 1})    // resnet50 layer2.0 3x3 stride 2 (direct)
    ->Args({512, 512, 7, 3, 1, 1})     // resnet50 layer4 3x3 (direct: too few tiles for Winograd)
    ->Args({576, 96, 14, 1, 1, 1})     // features.13 projection
    ->Args({960, 160, 7, 1, 1, 1})     // features.15 projection
    ->Args({320, 1280, 7, 1, 1, 1})    // features.18
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// PointwiseDepthwiseConv (the CPU provider's 1x1 convolution fused with the depthwise 3x3 that reads it, Clip(0, 6)
// after each, as MobileNetV2's blocks have) on X already blocked: channels in (a multiple of 16), expanded channels,
// input size, depthwise stride. Compare the sum of BM_nchwc_conv's two layers of the same shapes.
void BM_nchwc_pointwise_depthwise(benchmark::State& state) {
  const auto cin = state.range(0), m = state.range(1), hw = state.range(2), s = state.range(3);
  node n = conv_node(3, s, m, false);
  n.op_type = "PointwiseDepthwiseConv";
  n.domain = "com.epstack.nchwc16";
  n.since_version = 1;
  n.attributes.set("activation", std::string("Clip"));
  n.attributes.set("activation_params", std::vector<float>{0.0f, 6.0f});
  n.attributes.set("pointwise_activation", std::string("Clip"));
  n.attributes.set("pointwise_activation_params", std::vector<float>{0.0f, 6.0f});
  auto b = one_node::make<ops::nchwc_pointwise_depthwise>(
      std::move(n), {{random({1, cin, hw, hw}, 1), false}, {random({m, cin, 1, 1}, 2), true}, {random({m}, 3), true},
                     {random({m, 1, 3, 3}, 4), true}, {random({m}, 5), true}});
  b->run(state);
  const double in = static_cast<double>(hw * hw), out = static_cast<double>((hw + s - 1) / s) * static_cast<double>((hw + s - 1) / s);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m) * (static_cast<double>(cin) * in + 9.0 * out),
                                                 benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_nchwc_pointwise_depthwise)
    ->ArgNames({"cin", "m", "hw", "s"})
    ->Args({16, 96, 112, 2})   // mobilenetv2 features.2
    ->Args({32, 144, 56, 1})   // features.3 (24 channels padded to 32)
    ->Args({32, 192, 28, 1})   // features.6
    ->Args({96, 576, 14, 1})   // features.13
    ->Args({160, 960, 7, 1})   // features.15
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// MatMul with a constant weight: rows, inner, columns.
void BM_matmul(benchmark::State& state) {
  const auto m = state.range(0), k = state.range(1), n = state.range(2);
  node nd;
  nd.name = "mm";
  nd.op_type = "MatMul";
  nd.since_version = 13;
  auto b = one_node::make<ops::matmul>(std::move(nd), {{random({1, m, k}, 1), false}, {random({k, n}, 2), true}});
  b->run(state);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k), benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
  // The weights' bytes read per second: what bounds a batch-1 product (compare bench_peak's memory bandwidth).
  state.counters["weight GB/s"] = benchmark::Counter(4.0 * static_cast<double>(n * k) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_matmul)
    ->ArgNames({"m", "k", "n"})
    ->Args({128, 768, 768})    // bert projections
    ->Args({128, 768, 3072})   // bert FFN in
    ->Args({128, 3072, 768})   // bert FFN out
    ->Args({1, 512, 8000})     // llm_decode lm_head
    ->Args({1, 2048, 512})     // llm_decode mlp c_proj (full-depth panels)
    ->Args({1, 4096, 4096})    // a batch-1 product over 64 MiB of weights, beyond the last-level cache
    ->Args({64, 1024, 4096})   // mlp_b64
    ->Args({64, 4096, 4096})   // mlp_b64 fc2
    ->Args({256, 1024, 1024})  // the placement calibration's product
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// BERT-base's feed-forward input layer three ways (128 x 768 x 3072, weights packed): `form` 0 MatMul alone, 1 MatMul
// then BiasGelu (two kernels, Y read and written again), 2 MatMulBias with activation Gelu (the CPU provider's fused
// product: bias and GELU applied as each tile is stored). 2 against 1 is what the fusion saves; 2 against 0 what the
// epilogue costs.
void BM_matmul_bias_gelu(benchmark::State& state) {
  const std::int64_t m = 128, k = 768, n = 3072;
  const auto form = state.range(0);
  node nd;
  nd.name = "mm";
  nd.op_type = form == 2 ? "MatMulBias" : "MatMul";
  nd.domain = form == 2 ? "com.epstack.cpu" : "";
  nd.since_version = form == 2 ? 1 : 13;
  if (form == 2) nd.attributes.set("activation", std::string("Gelu"));
  std::vector<std::pair<tensor, bool>> ins{{random({1, m, k}, 1), false}, {random({k, n}, 2), true}};
  if (form == 2) ins.push_back({random({n}, 3), true});
  auto b = form == 2 ? one_node::make<ops::matmul_bias>(std::move(nd), std::move(ins)) : one_node::make<ops::matmul>(std::move(nd), std::move(ins));
  std::unique_ptr<one_node> g;
  if (form == 1) {
    node gn;
    gn.name = "bias_gelu";
    gn.op_type = "BiasGelu";
    gn.domain = "com.microsoft";
    gn.since_version = 1;
    g = one_node::make<ops::bias_gelu>(std::move(gn), {{random({1, m, n}, 4), false}, {random({n}, 3), true}});
  }
  for (auto _ : state) {
    for (one_node* x : {b.get(), g.get()}) {
      if (x == nullptr) continue;
      x->frame.reset();
      compute_context ctx(x->inputs, x->outputs, &x->frame, &pool());
      const auto st = x->fn(ctx);
      if (!st) state.SkipWithError(st.to_string().c_str());
      benchmark::DoNotOptimize(x->outputs[0].as_tensor().data());
    }
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k), benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}
BENCHMARK(BM_matmul_bias_gelu)->ArgName("form")->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

// com.epstack.cpu PermutedMatMul as BERT-base runs its attention (cpu_product_fusion's form): Q and K as the
// projections wrote them, [1, 128 tokens, 12 heads, 64], read in place through perm_a / perm_b (rows 768 floats
// apart); form 0 the scores Q K^T (alpha 1/8), form 1 the context P V written back as [1, 128, 12, 64] (perm_y).
void BM_permuted_matmul(benchmark::State& state) {
  const bool values = state.range(0) != 0;
  node nd;
  nd.name = "pmm";
  nd.op_type = "PermutedMatMul";
  nd.domain = "com.epstack.cpu";
  nd.since_version = 1;
  if (values) {
    nd.attributes.set("perm_b", std::vector<std::int64_t>{0, 2, 1, 3});
    nd.attributes.set("perm_y", std::vector<std::int64_t>{0, 2, 1, 3});
  } else {
    nd.attributes.set("perm_a", std::vector<std::int64_t>{0, 2, 1, 3});
    nd.attributes.set("perm_b", std::vector<std::int64_t>{0, 2, 3, 1});
    nd.attributes.set("alpha", 0.125f);
  }
  auto b = values ? one_node::make<ops::permuted_matmul>(std::move(nd), {{random({1, 12, 128, 128}, 1), false}, {random({1, 128, 12, 64}, 2), false}})
                  : one_node::make<ops::permuted_matmul>(std::move(nd), {{random({1, 128, 12, 64}, 1), false}, {random({1, 128, 12, 64}, 2), false}});
  b->run(state);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * 12 * 128 * 128 * 64, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_permuted_matmul)->ArgName("values")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

// MatMul of two activations (no packed weights): the matrix-vector shapes a decode step's attention and a
// per-row weighting have. Args: batch, rows, inner, columns; `tb` 1 reads B as [batch, columns, inner] through a
// Transpose-free FusedMatMul (transB), as attention's Q K^T does.
void BM_matmul_dynamic(benchmark::State& state) {
  const auto h = state.range(0), m = state.range(1), k = state.range(2), n = state.range(3);
  const bool tb = state.range(4) != 0;
  node nd;
  nd.name = "mm";
  nd.op_type = tb ? "FusedMatMul" : "MatMul";
  nd.domain = tb ? "com.microsoft" : "";
  nd.since_version = tb ? 1 : 13;
  if (tb) nd.attributes.set("transB", std::int64_t{1});
  std::vector<std::int64_t> bs = tb ? std::vector<std::int64_t>{h, n, k} : std::vector<std::int64_t>{h, k, n};
  auto b = tb ? one_node::make<ops::fused_matmul>(std::move(nd), {{random({h, m, k}, 1), false}, {random(bs, 2), false}})
              : one_node::make<ops::matmul>(std::move(nd), {{random({h, m, k}, 1), false}, {random(bs, 2), false}});
  b->run(state);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(h * m * n * k), benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}
BENCHMARK(BM_matmul_dynamic)
    ->ArgNames({"h", "m", "k", "n", "tb"})
    ->Args({12, 1, 64, 256, 1})   // decode attention scores: Q [12,1,64] x K^T
    ->Args({12, 1, 256, 64, 0})   // decode attention values: P [12,1,256] x V [12,256,64]
    ->Args({12, 128, 64, 128, 0}) // bert attention scores: Q [12,128,64] x K^T [12,64,128]
    ->Args({12, 128, 64, 128, 1}) // the same with K as it lies, [12,128,64] (transB), as BERT runs it
    ->Args({12, 128, 128, 64, 0}) // bert attention values: P [12,128,128] x V [12,128,64]
    ->Args({1, 1, 4096, 1024, 0}) // a batch-1 product of activations
    ->Args({1, 2, 1024, 1024, 1}) // two rows against a transposed operand
    ->Args({1, 4, 1024, 1024, 0}) // four rows
    ->Args({1, 1024, 1024, 1, 0}) // a matrix times a column
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Softmax over the last axis of [1, heads, seq, seq].
void BM_softmax(benchmark::State& state) {
  node nd;
  nd.name = "sm";
  nd.op_type = "Softmax";
  nd.since_version = 13;
  auto b = one_node::make<ops::softmax>(std::move(nd), {{random({1, 12, state.range(0), state.range(0)}, 1), false}});
  b->run(state);
  state.counters["GB/s"] = benchmark::Counter(8.0 * 12 * static_cast<double>(state.range(0) * state.range(0)),
                                              benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_softmax)->Arg(128)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Transpose [1, seq, 12, 64] with perm [0, 2, 1, 3] (BERT's split into heads).
void BM_transpose(benchmark::State& state) {
  node nd;
  nd.name = "tr";
  nd.op_type = "Transpose";
  nd.since_version = 13;
  nd.attributes.set("perm", std::vector<std::int64_t>{0, 2, 1, 3});
  auto b = one_node::make<ops::transpose>(std::move(nd), {{random({1, state.range(0), 12, 64}, 1), false}});
  b->run(state);
  state.counters["GB/s"] = benchmark::Counter(8.0 * static_cast<double>(state.range(0)) * 768, benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}
BENCHMARK(BM_transpose)->Arg(128)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Add with broadcasting, rows x cols: `form` 0 two whole tensors, 1 a bias row [cols] (BERT's), 2 a column [rows, 1]
// (a value per row: NCHW's per-channel constant), 3 Greater against a bias row (a comparison's bool output).
void BM_binary(benchmark::State& state) {
  const auto rows = state.range(0), cols = state.range(1), form = state.range(2);
  node nd;
  nd.name = "bin";
  nd.op_type = form == 3 ? "Greater" : "Add";
  nd.since_version = 14;
  const std::vector<std::int64_t> other = form == 0 ? std::vector<std::int64_t>{rows, cols}
                                          : form == 2 ? std::vector<std::int64_t>{rows, 1}
                                                      : std::vector<std::int64_t>{cols};
  std::vector<std::pair<tensor, bool>> ins = {{random({rows, cols}, 1), false}, {random(other, 2), false}};
  auto b = form == 3 ? one_node::make<ops::greater>(std::move(nd), std::move(ins)) : one_node::make<ops::add>(std::move(nd), std::move(ins));
  b->run(state);
  state.counters["GB/s"] = benchmark::Counter(12.0 * static_cast<double>(rows * cols), benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}
BENCHMARK(BM_binary)
    ->ArgNames({"rows", "cols", "form"})
    ->Args({128, 768, 0})
    ->Args({128, 768, 1})
    ->Args({64, 3136, 2})   // [1, 64, 56, 56] + [1, 64, 1, 1]
    ->Args({16384, 8, 1})   // short rows: a call per row of 8
    ->Args({128, 768, 3})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
