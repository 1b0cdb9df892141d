// EP contexts for partitions inside control-flow bodies (If branches, Loop and Scan bodies): generation replaces
// them with EPContext nodes inside the bodies of the context model, and loading restores them as it restores the
// main graph's, so a model with such partitions loads under session.disable_model_compile.
#include "fixtures.hpp"

using namespace epstack;
using namespace epstack::test::ctx;

TEST_CASE("Partitions inside If and Loop bodies are cached too: the context model restores them, compiling nothing") {
  // x -> Relu -> r; If(cond): then = Neg(r) * W (toy), else = Exp(r) + W (toy); Loop body: acc' = Relu(acc + x) (toy),
  // Sigmoid (CPU) between; all bodies read outer values.
  const auto f3 = type_info::tensor_of(element_type::float32, shape{2, 3});
  graph then_g("then");
  then_g.add_node(op("t_neg", "Neg"), {"r"}, {"t1"});
  then_g.add_node(op("t_mul", "Mul"), {"t1", "W"}, {"t_out"});
  then_g.add_output("t_out", f3);
  graph else_g("else");
  else_g.add_node(op("e_exp", "Exp"), {"r"}, {"e1"});
  else_g.add_node(op("e_add", "Add"), {"e1", "W"}, {"e_out"});
  else_g.add_output("e_out", f3);
  graph body("body");
  body.add_input("i", type_info::tensor_of(element_type::int64, shape{}));
  body.add_input("c_in", type_info::tensor_of(element_type::boolean, shape{}));
  body.add_input("acc", f3);
  body.add_node(op("b_add", "Add"), {"acc", "X"}, {"b1"});
  body.add_node(op("b_sig", "Sigmoid"), {"b1"}, {"b2"});
  body.add_node(op("b_relu", "Relu"), {"b2"}, {"acc_out"});
  body.add_node(op("b_or", "Or"), {"c_in", "c_in"}, {"c_out"});  // (the toy provider would take an Identity)
  body.add_output("c_out", type_info::tensor_of(element_type::boolean, shape{}));
  body.add_output("acc_out", f3);
  model m;
  m.opsets = {{"", 13}};
  graph& g = m.graph;
  g.set_name("flow");
  g.add_input("X", f3);
  g.add_input("cond", type_info::tensor_of(element_type::boolean, shape{}));
  g.add_initializer("W", zoo::random_tensor({2, 3}, 21, 1.0f));
  g.add_initializer("trips", tensor::scalar<std::int64_t>(3));
  g.add_initializer("go", tensor::scalar(true));
  g.add_node(op("relu", "Relu"), {"X"}, {"r"});
  attribute_list ia;
  ia.set("then_branch", make_subgraph(std::move(then_g)));
  ia.set("else_branch", make_subgraph(std::move(else_g)));
  g.add_node(op("if", "If", std::move(ia)), {"cond"}, {"y"});
  attribute_list la;
  la.set("body", make_subgraph(std::move(body)));
  g.add_node(op("loop", "Loop", std::move(la)), {"trips", "go", "y"}, {"z"});
  g.add_output("z", f3);

  test::temp_dir dir;
  const auto src = write_model(m, dir / "flow.onnx");
  const auto x = zoo::random_tensor({2, 3}, 5, 1.0f);
  const auto run_both = [&](const auto& s) {
    std::vector<tensor> r;
    for (bool c : {true, false}) {
      auto out = s.run({{"X", x}, {"cond", tensor::scalar(c)}});
      REQUIRE_MESSAGE(out.is_ok(), out.status().message());
      r.push_back((*out)[0]);
    }
    return r;
  };
  auto cpu = session<>::create(src);
  REQUIRE(cpu.is_ok());
  const auto want = run_both(*cpu);

  for (int embed : {0, 1}) {
    CAPTURE(embed);
    test::temp_dir d;
    const auto s2 = write_model(m, d / "flow.onnx");
    toy gen_provider;
    auto gen = toy_session::create(s2, gen_options(embed), {gen_provider, cpu_provider{}});
    REQUIRE_MESSAGE(gen.is_ok(), gen.status().message());
    // relu (main graph), one group in each branch, two in the loop body (split by the CPU's Sigmoid).
    CHECK(gen->ep_context().nodes_written == 5);
    check_close(run_both(*gen), want);
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
    check_close(run_both(*loaded), want);
  }
}
