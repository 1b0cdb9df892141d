// EP contexts for partitions inside control-flow bodies (If branches, Loop and Scan bodies): generation replaces
// them with EPContext nodes inside the bodies of the context model, and loading restores them as it restores the
// main graph's, so a model with such partitions loads under session.disable_model_compile.
#include "fixtures.hpp"

using namespace epstack;
using namespace epstack::test::ctx;

TEST_CASE("Partitions inside If and Loop bodies are cached too: the context model restores them, compiling nothing") {
  // x -> Relu -> r; If(cond): then = Neg(r) * W (toy), else = Exp(r) + W (toy); Loop body: acc' = Relu(acc + x) (toy),
  // Sigmoid (CPU) between; all bodies read outer values.
  const model m = flow_model();

  test::temp_dir dir;
  const auto src = write_model(m, dir / "flow.onnx");
  auto cpu = session<>::create(src);
  REQUIRE(cpu.is_ok());
  const auto want = run_flow(*cpu);

  for (int embed : {0, 1}) {
    CAPTURE(embed);
    test::temp_dir d;
    const auto s2 = write_model(m, d / "flow.onnx");
    toy gen_provider;
    auto gen = toy_session::create(s2, gen_options(embed), {gen_provider, cpu_provider{}});
    REQUIRE_MESSAGE(gen.is_ok(), gen.status().message());
    // relu (main graph), one group in each branch, two in the loop body (split by the CPU's Sigmoid).
    CHECK(gen->ep_context().nodes_written == 5);
    check_close(run_flow(*gen), want);
    // The bodies of the context model hold EPContext nodes.
    auto cm = load_model(d / "flow_ctx.onnx");
    REQUIRE(cm.is_ok());
    std::size_t in_bodies = 0;
    for (node_id n = 0; n < cm->graph.node_count(); ++n)
      for (const auto& a : cm->graph.node(n).attributes)
        if (const auto* sg = std::get_if<subgraph>(&a.value); sg && *sg)
          for (node_id k = 0; k < (*sg)->node_count(); ++k) in_bodies += (*sg)->node(k).op_type == "EPContext" ? 1 : 0;
    CHECK(in_bodies == 4);

    toy load_provider;
    session_options no_compile;
    no_compile.set_config(config_keys::disable_model_compile, "1");
    auto loaded = toy_session::create(d / "flow_ctx.onnx", no_compile, {load_provider, cpu_provider{}});
    REQUIRE_MESSAGE(loaded.is_ok(), loaded.status().message());
    CHECK(*load_provider.compiled == 0);
    CHECK(*load_provider.restored == 5);
    CHECK(loaded->ep_context().nodes_loaded == 5);
    check_close(run_flow(*loaded), want);
  }
}
