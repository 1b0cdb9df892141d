// Placement by cost on the oneDNN stack: the estimates' choices on real graphs, how the plan shows them, how an EP
// context model records and replays them, and the thread runtime that follows the plan.
#include <epstack/core/sanitizers.hpp>
#include <epstack/ep_context/attributes.hpp>
#include <epstack/onnx/onnx_io.hpp>
#include <epstack/runtime/compile_model.hpp>

#include "../../support/compare.hpp"
#include "../../support/temp_dir.hpp"
#include "dnnl_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

using namespace epstack;
using namespace epstack::test::dnnl;
using test::op;

namespace {

// 3 x 2048 x 2048 floats at batch 1: 48 MiB of weights, more than the last-level cache, so streamed on every run.
constexpr double streaming_weights = 3 * 2048.0 * 2048.0 * 4;
model streaming_mlp() { return zoo::make_mlp({2048, 2048, 2048, 2048}, dimension(1)); }

// Each provider's estimate of the streaming MLP is its weights read at its memory rate under class `c` (the
// products at 1 row are faster than that) and its fixed cost per streaming product (three of them), plus its fixed
// costs per node and partition: a few microseconds.
double streaming_estimate(const cost_profile& p) {
  return streaming_weights / p.dram_gbps * 1e-3 + 3 * (p.stream_kernel_us >= 0 ? p.stream_kernel_us : p.kernel_us);
}
void check_priced_at_memory_rate(const graph_plan::placement_choice& choice, machine_class c) {
  REQUIRE(choice.costs.size() == 2);
  CHECK(choice.costs[0].second == doctest::Approx(streaming_estimate(dnnl_ep::cost_profile_for(c))).epsilon(0.02));
  CHECK(choice.costs[1].second == doctest::Approx(streaming_estimate(cpu::cost_profile_for(c))).epsilon(0.02));
}

}  // namespace

TEST_CASE("placement by cost: batch-1 products over weights beyond the last-level cache are priced at memory speed") {
  const auto m = streaming_mlp();
  REQUIRE(streaming_weights > last_level_cache_bytes());
  const auto input = zoo::random_tensor({1, 2048}, 7, 1.0f);
  session_options so;
  so.set_intra_op_threads(2);
  auto by_cost = dnnl_session::create(m, so);  // estimate is the default
  REQUIRE_MESSAGE(by_cost.has_value(), by_cost.status().to_string());
  const auto& choices = by_cost->plan().main.choices;
  REQUIRE(choices.size() == 1);
  CHECK(choices[0].basis == "estimate");
  check_priced_at_memory_rate(choices[0], this_machine_class());
  // The choice follows the estimates: oneDNN, which brings a thread runtime of its own, keeps the graph only when it
  // is cheaper than the CPU provider by more than the margin (10% of the CPU provider's estimate).
  const bool dnnl_clearly = choices[0].costs[1].second - choices[0].costs[0].second > 0.1 * choices[0].costs[1].second;
  CHECK(by_cost->plan().providers[choices[0].chosen] ==
        (dnnl_clearly ? dnnl_provider::type_key : cpu_provider::type_key));
  CHECK(dnnl_partitions(*by_cost).size() == (dnnl_clearly ? 1u : 0u));
  CHECK(by_cost->plan().to_table().find("placement of") != std::string::npos);

  so.set_config(config_keys::placement, "priority");
  auto by_order = dnnl_session::create(m, so);
  REQUIRE(by_order.has_value());
  CHECK(dnnl_partitions(*by_order).size() == 1);
  CHECK(by_order->plan().main.choices.empty());
  // Either way the same numbers.
  auto a = by_cost->run({{"input", input}});
  auto b = by_order->run({{"input", input}});
  REQUIRE((a && b));
  EPSTACK_CHECK_CLOSE((*a)[0], (*b)[0], 1e-4, 1e-4);

  // Measured: both candidates are compiled and timed on the real shapes; the plan says "measure".
  so.set_config(config_keys::placement, "measure");
  auto measured = dnnl_session::create(m, so);
  REQUIRE_MESSAGE(measured.has_value(), measured.status().to_string());
  REQUIRE(measured->plan().main.choices.size() == 1);
  CHECK(measured->plan().main.choices[0].basis == "measure");
  for (const auto& [p, us] : measured->plan().main.choices[0].costs) CHECK(us > 0);
  auto c = measured->run({{"input", input}});
  REQUIRE(c.has_value());
  EPSTACK_CHECK_CLOSE((*c)[0], (*b)[0], 1e-4, 1e-4);
  // A budget of 0 ms measures nothing: the estimates decide.
  so.set_config(config_keys::placement_budget_ms, "0");
  auto unmeasured = dnnl_session::create(m, so);
  REQUIRE(unmeasured.has_value());
  CHECK(unmeasured->plan().main.choices.at(0).basis == "estimate");
}

TEST_CASE("placement by cost uses the profiles of the machine's class, which can be pinned and unpinned") {
  const machine_class detected = this_machine_class();
  CHECK(machine_class_named(to_string(detected)) == detected);
  CHECK(machine_class_named("avx512_split") == machine_class::avx512_split);
  CHECK(machine_class_named("avx512_full") == machine_class::avx512_full);
  CHECK(machine_class_named("avx512_intel") == machine_class::avx512_intel);
  CHECK_FALSE(machine_class_named("zen4").has_value());
  CHECK_FALSE(machine_class_named("").has_value());
  // What differs between the classes: on a core that splits 512-bit instructions the CPU provider streams a batch-1
  // product's weights faster than oneDNN; on a full-width core they are level.
  const auto& cpu_split = cpu::cost_profile_for(machine_class::avx512_split);
  const auto& dnnl_split = dnnl_ep::cost_profile_for(machine_class::avx512_split);
  CHECK(cpu_split.dram_gbps > 1.2 * dnnl_split.dram_gbps);
  CHECK(&cpu::cost_profile_for(machine_class::avx512_full) == &cpu::default_cost_profile);
  CHECK(&dnnl_ep::cost_profile_for(machine_class::avx512_full) == &dnnl_ep::default_cost_profile);
  CHECK(dnnl_ep::default_cost_profile.dram_gbps > 0.9 * cpu::default_cost_profile.dram_gbps);

  const auto m = streaming_mlp();
  REQUIRE(streaming_weights > last_level_cache_bytes());
  const auto input = zoo::random_tensor({1, 2048}, 11, 1.0f);
  session_options so;
  so.set_intra_op_threads(2);
  auto c = cpu_session::create(m, so);
  REQUIRE(c.has_value());
  auto expected = c->run({{"input", input}});
  REQUIRE(expected.has_value());
  for (const auto cls : {machine_class::avx512_split, machine_class::avx512_full, machine_class::avx512_intel}) {
    CAPTURE(to_string(cls));
    std::optional<dnnl_session> d;
    {
      const pinned_machine_class pin(cls);
      CHECK(this_machine_class() == cls);
      auto s = dnnl_session::create(m, so);
      REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
      d.emplace(std::move(*s));
    }
    CHECK(this_machine_class() == detected);  // unpinned
    const auto& choices = d->plan().main.choices;
    REQUIRE(choices.size() == 1);
    check_priced_at_memory_rate(choices[0], cls);
    // The CPU provider takes it on every class: on split cores as clearly cheaper (by more than the margin); where
    // the two are level within the margin, because oneDNN's thread runtime must be clearly cheaper to be worth it.
    CHECK(d->plan().providers[choices[0].chosen] == cpu_provider::type_key);
    CHECK(dnnl_partitions(*d).empty());
    CHECK(d->intra_op_runtime() == "epstack");
    const bool level = choices[0].costs[1].second > 0.9 * choices[0].costs[0].second;
    CHECK(level == (cls != machine_class::avx512_split));
    CHECK(choices[0].note == (level ? "DnnlExecutionProvider's thread runtime is not worth what its partitions save" : ""));
    CHECK(d->plan().yielded == (level ? std::vector<bool>{true, false} : std::vector<bool>{}));
    auto got = d->run({{"input", input}});
    REQUIRE(got.has_value());
    EPSTACK_CHECK_CLOSE((*got)[0], (*expected)[0], 1e-4, 1e-4);
  }
}

TEST_CASE("placement by cost: small static graphs and symbolic shapes") {
  session_options so;
  so.set_intra_op_threads(2);
  // Symbolic batch over products (all of the work): their speed depends on the rows, so both providers are priced at
  // batches of 1 to 256, and the plan shows the costs where oneDNN fares best. Products this small are mostly fixed
  // costs, a few microseconds less a product on oneDNN at every batch: it keeps them.
  auto symbolic = dnnl_session::create(zoo::make_mlp({64, 128, 10}), so);
  REQUIRE(symbolic.has_value());
  CHECK(dnnl_partitions(*symbolic).size() == 1);
  REQUIRE(symbolic->plan().main.choices.size() == 1);
  CHECK(symbolic->plan().main.choices[0].basis ==
        "estimate, symbolic dims at 1 to 256, shown where DnnlExecutionProvider fares best");
  // With the batch fixed (a free dimension override) the estimates decide.
  session_options fixed = so;
  fixed.add_free_dimension_override("batch", 4);
  auto estimated = dnnl_session::create(zoo::make_mlp({64, 128, 10}), fixed);
  REQUIRE(estimated.has_value());
  REQUIRE(estimated->plan().main.choices.size() == 1);
  CHECK(estimated->plan().main.choices[0].basis == "estimate");
  for (const auto& [p, us] : estimated->plan().main.choices[0].costs) CHECK(us > 0);
  // Wrong option values are invalid_argument naming the option.
  so.set_config(config_keys::placement, "fastest");
  auto bad = dnnl_session::create(zoo::make_mlp({64, 10}), so);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.code() == errc::invalid_argument);
  CHECK(bad.status().message().find("epstack.placement is 'fastest'") != std::string::npos);
  so.set_config(config_keys::placement, "measure");
  so.set_config(config_keys::placement_budget_ms, "soon");
  auto bad_budget = dnnl_session::create(zoo::make_mlp({64, 10}), so);
  REQUIRE_FALSE(bad_budget.has_value());
  CHECK(bad_budget.status().message().find("epstack.placement_budget_ms is 'soon'") != std::string::npos);
}

TEST_CASE("placement by cost: products with a symbolic batch are priced at batches of 1 to 256, by each class's profiles") {
  // 1024-wide products (4 MiB of weights, in cache): on Zen 5 oneDNN's are faster from 16 rows on (472 against 384
  // GFLOP/s at 64), so it keeps them; on an Intel Xeon the two are level at every batch (within the margin), and
  // oneDNN's thread runtime is not worth what it would save.
  const auto m = zoo::make_mlp({1024, 1024, 1024});
  session_options so;
  so.set_intra_op_threads(2);
  const auto input = zoo::random_tensor({3, 1024}, 5, 1.0f);
  auto c = cpu_session::create(m, so);
  REQUIRE(c.has_value());
  auto expected = c->run({{"input", input}});
  REQUIRE(expected.has_value());
  for (const auto cls : {machine_class::avx512_full, machine_class::avx512_intel}) {
    CAPTURE(to_string(cls));
    std::optional<dnnl_session> d;
    {
      const pinned_machine_class pin(cls);
      auto s = dnnl_session::create(m, so);
      REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
      d.emplace(std::move(*s));
    }
    const auto& choices = d->plan().main.choices;
    REQUIRE(choices.size() == 1);
    CHECK(choices[0].basis == "estimate, symbolic dims at 1 to 256, shown where DnnlExecutionProvider fares best");
    REQUIRE(choices[0].costs.size() == 2);
    const double dnnl_us = choices[0].costs[0].second, cpu_us = choices[0].costs[1].second;
    CHECK(dnnl_us > 0);
    CHECK(cpu_us > 0);
    if (cls == machine_class::avx512_full) {
      CHECK(cpu_us - dnnl_us > 0.1 * cpu_us);  // clearly cheaper where it fares best
      CHECK(d->plan().providers[choices[0].chosen] == dnnl_provider::type_key);
      CHECK(dnnl_partitions(*d).size() == 1);
    } else {
      CHECK(cpu_us - dnnl_us <= 0.1 * cpu_us);  // even where it fares best, within the margin
      CHECK(d->plan().providers[choices[0].chosen] == cpu_provider::type_key);
      CHECK(choices[0].note == "DnnlExecutionProvider's thread runtime is not worth what its partitions save");
      CHECK(dnnl_partitions(*d).empty());
    }
    auto got = d->run({{"input", input}});
    REQUIRE(got.has_value());
    EPSTACK_CHECK_CLOSE((*got)[0], (*expected)[0], 1e-4, 1e-4);
  }
}

TEST_CASE("placement by cost: 3x3 convolutions with a symbolic batch, priced at batch 1, go to the CPU provider") {
  // The CPU provider runs 3x3 unit-stride convolutions as Winograd on its blocked layout; products (the classifier)
  // are a sliver of the work, so an estimate at batch 1 stands for any batch.
  const auto m = zoo::make_convnet({64, 128}, 56);
  session_options so;
  so.set_intra_op_threads(2);
  auto by_cost = dnnl_session::create(m, so);
  REQUIRE_MESSAGE(by_cost.has_value(), by_cost.status().to_string());
  const auto& plan = by_cost->plan();
  // The choice gave the CPU provider the network, whose convolutions its blocked layout then rewrote (the graph was
  // partitioned again: the classifier is priced there on its own).
  REQUIRE(plan.main.choices_before_layout.size() == 1);
  const auto& c = plan.main.choices_before_layout.front();
  CHECK(c.basis == "estimate, symbolic dims at 1");
  CHECK(plan.providers[c.chosen] == cpu_provider::type_key);
  REQUIRE(c.costs.size() == 2);
  CHECK(c.costs[1].second > 0);
  CHECK(c.costs[1].second < 0.9 * c.costs[0].second);
  CHECK(plan.to_table().find("nodes before the CPU provider's rewrites, by estimate, symbolic dims at 1): DnnlExecutionProvider ") !=
        std::string::npos);
  // Every convolution is the CPU provider's, in its blocked layout.
  std::size_t convs = 0;
  for (node_id n = 0; n < plan.main.g->node_count(); ++n)
    if (plan.main.g->node(n).op_type == "Conv") {
      ++convs;
      CHECK(plan.main.g->node(n).domain == "com.epstack.nchwc16");
      CHECK(plan.providers[plan.main.nodes[n].provider] == cpu_provider::type_key);
    }
  CHECK(convs == 6);
  // The same numbers as the stack's order (all on oneDNN), at batches 1 and 3.
  so.set_config(config_keys::placement, "priority");
  auto by_order = dnnl_session::create(m, so);
  REQUIRE(by_order.has_value());
  CHECK(dnnl_partitions(*by_order).size() == 1);
  for (std::int64_t n : {1, 3}) {
    const auto image = zoo::random_tensor({n, 3, 56, 56}, 11, 1.0f);
    auto a = by_cost->run({{"image", image}});
    auto b = by_order->run({{"image", image}});
    REQUIRE((a && b));
    EPSTACK_CHECK_CLOSE((*a)[0], (*b)[0], 1e-3, 1e-3);
  }
}

TEST_CASE("placement by cost: the plan shows the choices the blocked layout rewrote, and makes the others again") {
  // Two independent parts: 3x3 convolutions (to the CPU provider by cost, then rewritten into its blocked layout) and
  // a lone Softmax (to the CPU provider by cost too: a oneDNN partition's entry costs more than it; not rewritten).
  model m;
  m.opsets = {{"", 13}};
  auto& g = m.graph;
  g.set_name("two_parts");
  add_conv3x3_chain(g, "conv", 2, 31);
  g.add_input("z", f32(shape{1, 16}));
  g.add_node(op("soft", "Softmax"), {"z"}, {"s"});
  g.add_output("s", f32(shape{1, 16}));
  session_options so;
  so.set_intra_op_threads(2);
  auto s = dnnl_session::create(m, so);
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  const auto& plan = s->plan();
  CHECK(provider_of(*s, "conv0") == "CPUExecutionProvider");
  CHECK(provider_of(*s, "soft") == "CPUExecutionProvider");
  // The convolutions' choice is shown as made before the layout; the Softmax's is made again on the new graph.
  REQUIRE(plan.main.choices_before_layout.size() == 1);
  CHECK(plan.main.choices_before_layout[0].nodes.size() == 2);
  REQUIRE(plan.main.choices.size() == 1);
  CHECK(plan.main.choices[0].nodes.size() == 1);
  CHECK(plan.main.g->node(plan.main.choices[0].nodes[0]).name == "soft");
  CHECK(plan.providers[plan.main.choices[0].chosen] == cpu_provider::type_key);
  const auto table = plan.to_table();
  CHECK(table.find("(2 nodes before the CPU provider's rewrites, by estimate)") != std::string::npos);
  CHECK(table.find("(1 nodes, by estimate)") != std::string::npos);
}

TEST_CASE("placement by cost is recorded in an EP context model and replayed when it loads") {
  // Two independent chains: 3x3 convolutions (the CPU provider's Winograd is clearly cheaper: moved there) and
  // 64-row products over small weights (oneDNN, first in the stack, keeps them: compiled into the context). Priced
  // with Zen 5's profiles, where oneDNN's products of 64 rows are clearly cheaper (on Intel's cores they are level
  // with the CPU provider's, and oneDNN would leave them too).
  const pinned_machine_class zen5(machine_class::avx512_full);
  model m;
  m.opsets = {{"", 13}};
  auto& g = m.graph;
  g.set_name("two_chains");
  add_conv3x3_chain(g, "big", 3, 10);
  g.add_input("z", f32(shape{64, 256}));
  g.add_initializer("V", zoo::random_tensor({256, 256}, 20, 0.05f));
  g.add_node(op("small", "MatMul"), {"z", "V"}, {"s"});
  g.add_node(op("small_relu", "Relu"), {"s"}, {"w"});
  g.add_output("w", f32(shape{64, 256}));
  test::temp_dir dir;
  REQUIRE(save_model(m, dir.path() / "two.onnx").is_ok());
  session_options gen;
  gen.set_intra_op_threads(2);
  gen.set_config(config_keys::ep_context_enable, "1");
  // The CPU provider's plain layout, so that the nodes it gets stay as they are and their placement is recorded (in
  // the blocked layout they become its own operators, which no other provider claims).
  gen.set_config(config_keys::cpu_layout, "nchw");
  auto s = dnnl_session::create(dir.path() / "two.onnx", gen);
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  CHECK(provider_of(*s, "big1") == "CPUExecutionProvider");
  CHECK(provider_of(*s, "small") == "DnnlExecutionProvider");
  auto ctx_model = load_model(dir.path() / "two_ctx.onnx");
  REQUIRE_MESSAGE(ctx_model.has_value(), ctx_model.status().to_string());
  std::size_t marked = 0;
  for (node_id n = 0; n < ctx_model->graph.node_count(); ++n)
    for (const auto& [k, v] : ctx_model->graph.node(n).metadata)
      if (k == placement_metadata_key) {
        CHECK(v == cpu_provider::type_key);
        CHECK(ctx_model->graph.node(n).name.rfind("big", 0) == 0);
        ++marked;
      }
  CHECK(marked == 3);
  // Loaded even with ONNX Runtime's priority order, the recorded choice stands: oneDNN is not offered those nodes,
  // and it restores its own partition from the context.
  session_options load;
  load.set_intra_op_threads(2);
  load.set_config(config_keys::placement, "priority");
  auto back = dnnl_session::create(dir.path() / "two_ctx.onnx", load);
  REQUIRE_MESSAGE(back.has_value(), back.status().to_string());
  CHECK(provider_of(*back, "big1") == "CPUExecutionProvider");
  CHECK(back->ep_context().nodes_loaded == 1);
  auto direct = dnnl_session::create(dir.path() / "two.onnx", load);
  REQUIRE(direct.has_value());
  CHECK(provider_of(*direct, "big1") == "DnnlExecutionProvider");
  const std::vector<named_tensor> feeds{{"x", zoo::random_tensor({1, 64, 28, 28}, 9, 1.0f)}, {"z", zoo::random_tensor({64, 256}, 8, 1.0f)}};
  auto a = back->run(feeds);
  auto b = direct->run(feeds);
  REQUIRE((a && b));
  for (std::size_t k = 0; k < 2; ++k) EPSTACK_CHECK_CLOSE((*a)[k], (*b)[k], 1e-4, 1e-4);
}

TEST_CASE("the runtime follows the plan: oneDNN left only a classifier it won by a microsecond runs nothing, nor its threads") {
  // A convolutional network: the CPU provider's blocked convolutions take the body; oneDNN's estimate for the
  // classifier (Flatten, Gemm) is about a microsecond below the CPU provider's, well under 1% of the graph, which is
  // not worth moving every loop of the run to oneDNN's OpenMP threads. So with the reference machine's profiles; with
  // the split class's the CPU provider's estimate is the lower one (the next case).
  const pinned_machine_class reference(machine_class::avx512_full);
  const auto m = zoo::make_convnet({64, 128, 256}, 56);
  session_options so;  // the default placement, by estimate
  so.set_intra_op_threads(2);
  auto d = dnnl_session::create(m, so);
  REQUIRE_MESSAGE(d.has_value(), d.status().to_string());
  CHECK(dnnl_partitions(*d).empty());
  CHECK(d->intra_op_runtime() == "epstack");
  const auto& choices = d->plan().main.choices;
  REQUIRE(choices.size() == 1);
  CHECK(choices[0].chosen == 1);
  REQUIRE(choices[0].costs.size() == 2);
  CHECK(choices[0].costs[0].second < choices[0].costs[1].second);  // oneDNN's estimate is the lower one
  CHECK(choices[0].note == "DnnlExecutionProvider's thread runtime is not worth what its partitions save");
  CHECK(d->plan().to_table().find("thread runtime is not worth what its partitions save") != std::string::npos);
  auto c = cpu_session::create(m, so);
  REQUIRE(c.has_value());
  const std::vector<named_tensor> feeds{{"image", zoo::random_tensor({2, 3, 56, 56}, 3, 1.0f)}};
  for (int round = 0; round < 2; ++round) {
    auto a = d->run(feeds);
    auto b = c->run(feeds);
    REQUIRE((a && b));
    EPSTACK_CHECK_CLOSE((*a)[0], (*b)[0], 1e-5, 1e-5);
  }
  // ONNX Runtime's priority order gives oneDNN the classifier back, and its threads with it.
  so.set_config(config_keys::placement, "priority");
  auto prio = dnnl_session::create(m, so);
  REQUIRE(prio.has_value());
  REQUIRE(dnnl_partitions(*prio).size() == 1);
  if (!under_thread_sanitizer) CHECK(prio->intra_op_runtime() == "OpenMP (libgomp)");
  auto a = prio->run(feeds);
  auto b = c->run(feeds);
  REQUIRE((a && b));
  EPSTACK_CHECK_CLOSE((*a)[0], (*b)[0], 1e-4, 1e-4);
}

TEST_CASE("the runtime follows the plan through compile_model: nothing for oneDNN, the source written, the same plan") {
  const pinned_machine_class reference(machine_class::avx512_full);
  const auto m = zoo::make_convnet({64, 128, 256}, 56);
  test::temp_dir dir;
  REQUIRE(save_model(m, dir.path() / "cn.onnx").is_ok());
  // Nothing is left for oneDNN to compile: compile_model writes the source model even so (ONNX Runtime's compile API
  // does), self-contained; with error_if_no_nodes_compiled it refuses.
  compile_options co;
  co.input_path = dir.path() / "cn.onnx";
  co.output_path = dir.path() / "cn_ctx.onnx";
  co.session.set_intra_op_threads(2);
  co.error_if_no_nodes_compiled = true;
  auto refused = compile_model<dnnl_provider>(co);
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == errc::ep_fail);
  CHECK_FALSE(std::filesystem::exists(co.output_path));
  co.error_if_no_nodes_compiled = false;
  auto r = compile_model<dnnl_provider>(co);
  REQUIRE_MESSAGE(r.is_ok(), r.status().to_string());
  CHECK(r->nodes_written == 0);
  // Loaded on the default stack, the placement is made again the same way: no oneDNN partition, no OpenMP threads.
  session_options load;
  load.set_intra_op_threads(2);
  auto back = dnnl_session::create(dir.path() / "cn_ctx.onnx", load);
  REQUIRE_MESSAGE(back.has_value(), back.status().to_string());
  CHECK(dnnl_partitions(*back).empty());
  CHECK(back->intra_op_runtime() == "epstack");
  auto c = cpu_session::create(m, load);
  REQUIRE(c.has_value());
  const std::vector<named_tensor> feeds{{"image", zoo::random_tensor({1, 3, 56, 56}, 4, 1.0f)}};
  auto a = back->run(feeds);
  auto b = c->run(feeds);
  REQUIRE((a && b));
  EPSTACK_CHECK_CLOSE((*a)[0], (*b)[0], 1e-5, 1e-5);
}

TEST_CASE("placement by cost: a choice whose nodes the layout fused into a PointwiseDepthwiseConv is shown as made before the layout") {
  // A 1x1 expansion and the depthwise convolution that reads it, alone: priced on a core that splits 512-bit
  // instructions, the CPU provider's depthwise rate wins the pair, its layout fuses the two into one node named after
  // both ("pw+dw"), and the plan still shows the choice that gave it them.
  const pinned_machine_class split(machine_class::avx512_split);
  model m;
  m.opsets = {{"", 13}};
  auto& g = m.graph;
  g.set_name("pw_dw");
  g.add_input("x", f32(shape{1, 16, 56, 56}));
  g.add_initializer("W1", zoo::random_tensor({96, 16, 1, 1}, 41, 0.2f));
  g.add_initializer("W2", zoo::random_tensor({96, 1, 3, 3}, 42, 0.2f));
  g.add_node(op("pw", "Conv"), {"x", "W1"}, {"a"});
  attribute_list dw;
  dw.set("pads", std::vector<std::int64_t>{1, 1, 1, 1});
  dw.set("group", std::int64_t{96});
  g.add_node(op("dw", "Conv", dw), {"a", "W2"}, {"y"});
  g.add_output("y", f32(shape{1, 96, 56, 56}));
  session_options so;
  so.set_intra_op_threads(2);
  auto s = dnnl_session::create(m, so);
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  CHECK(provider_of(*s, "pw+dw") == "CPUExecutionProvider");
  const auto& plan = s->plan();
  REQUIRE(plan.main.choices_before_layout.size() == 1);
  CHECK(plan.main.choices_before_layout[0].nodes.size() == 2);
  CHECK(plan.providers[plan.main.choices_before_layout[0].chosen] == cpu_provider::type_key);
  CHECK(plan.main.choices.empty());
}

TEST_CASE("placement by cost: ResNet-50's bottleneck blocks at 56x56 go to the CPU provider on both classes of machine") {
  // Two of ResNet-50's layer1 blocks (1x1 256 -> 64, 3x3 64 -> 64, 1x1 64 -> 256, the residual Add and Relu): the CPU
  // provider runs the 3x3 as Winograd on its blocked layout and the 1x1s as fast as oneDNN, so by the profiles the
  // blocks cost it about three quarters of oneDNN's time (ResNet-50 on Zen 4: 32.8-33.3 ms against 39.0-39.7). With the
  // split-core profiles measured before the twelfth session (in the VM's busy phase) the two came within the 10% margin
  // and the blocks stayed on oneDNN.
  model m;
  m.opsets = {{"", 13}};
  auto& g = m.graph;
  g.set_name("bottlenecks");
  g.add_input("x", f32(shape{1, 256, 56, 56}));
  std::string x = "x";
  attribute_list pad1;
  pad1.set("pads", std::vector<std::int64_t>{1, 1, 1, 1});
  for (int blk = 0; blk < 2; ++blk) {
    const std::string p = "b" + std::to_string(blk) + ".";
    g.add_initializer(p + "W1", zoo::random_tensor({64, 256, 1, 1}, 51 + 3 * blk, 0.09f));
    g.add_initializer(p + "W2", zoo::random_tensor({64, 64, 3, 3}, 52 + 3 * blk, 0.06f));
    g.add_initializer(p + "W3", zoo::random_tensor({256, 64, 1, 1}, 53 + 3 * blk, 0.1f));
    g.add_node(op(p + "conv1", "Conv"), {x, p + "W1"}, {p + "c1"});
    g.add_node(op(p + "relu1", "Relu"), {p + "c1"}, {p + "r1"});
    g.add_node(op(p + "conv2", "Conv", pad1), {p + "r1", p + "W2"}, {p + "c2"});
    g.add_node(op(p + "relu2", "Relu"), {p + "c2"}, {p + "r2"});
    g.add_node(op(p + "conv3", "Conv"), {p + "r2", p + "W3"}, {p + "c3"});
    g.add_node(op(p + "add", "Add"), {p + "c3", x}, {p + "sum"});
    g.add_node(op(p + "relu3", "Relu"), {p + "sum"}, {p + "y"});
    x = p + "y";
  }
  g.add_output(x, f32(shape{1, 256, 56, 56}));
  session_options so;
  so.set_intra_op_threads(2);
  so.set_config(config_keys::placement, "priority");
  auto by_order = dnnl_session::create(m, so);
  REQUIRE_MESSAGE(by_order.has_value(), by_order.status().to_string());
  CHECK(dnnl_partitions(*by_order).size() == 1);
  const auto input = zoo::random_tensor({1, 256, 56, 56}, 57, 1.0f);
  auto expected = by_order->run({{"x", input}});
  REQUIRE(expected.has_value());
  so.set_config(config_keys::placement, "estimate");
  for (const auto cls : {machine_class::avx512_split, machine_class::avx512_full}) {
    CAPTURE(to_string(cls));
    const pinned_machine_class pin(cls);
    auto s = dnnl_session::create(m, so);
    REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
    const auto& plan = s->plan();
    REQUIRE(plan.main.choices_before_layout.size() == 1);
    const auto& c = plan.main.choices_before_layout.front();
    CHECK(c.basis == "estimate");
    CHECK(plan.providers[c.chosen] == cpu_provider::type_key);
    REQUIRE(c.costs.size() == 2);
    CAPTURE(c.costs[0].second);
    CAPTURE(c.costs[1].second);
    CHECK(c.costs[1].second > 0);
    CHECK(c.costs[1].second < 0.8 * c.costs[0].second);  // outside the margin by far, not by a rounding
    CHECK(dnnl_partitions(*s).empty());
    CHECK(provider_of(*s, "b1.conv3") == "CPUExecutionProvider");
    auto got = s->run({{"x", input}});
    REQUIRE(got.has_value());
    EPSTACK_CHECK_CLOSE((*got)[0], (*expected)[0], 1e-3, 1e-3);
  }
}
