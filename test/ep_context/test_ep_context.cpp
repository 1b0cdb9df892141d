// EPContext generation (ep.context_enable, compile_model): the files written, their names and contents, the rules of
// ep-context-design.md and ONNX Runtime's behaviours, several providers and models, weight sharing. The providers are
// the tests' toy EP-context providers, which compile and restore for real; the CPU provider runs the rest.
#include "fixtures.hpp"

#include <epstack/onnx/version_convert.hpp>

#include <map>

using namespace epstack;
using namespace epstack::test::ctx;

TEST_CASE("EPContext generation, embed_mode 0: one _ctx.onnx and one [model]_[ep].bin, loading compiles nothing") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  const auto ref = reference(src);
  toy gen_provider;
  auto s = toy_session::create(src, gen_options(0), {gen_provider, cpu_provider{}});
  REQUIRE_MESSAGE(s.is_ok(), s.status().message());
  CHECK(*gen_provider.compiled == 2);
  check_close(run_x(*s), ref);  // the generating session runs too
  CHECK(s->ep_context().model_written == dir / "model_ctx.onnx");
  CHECK(s->ep_context().nodes_written == 2);
  CHECK(file_count(dir.path()) == 3);  // model.onnx, model_ctx.onnx, model_toy.bin
  CHECK(fs::is_regular_file(dir / "model_toy.bin"));

  auto cm = load_model(dir / "model_ctx.onnx");
  REQUIRE_MESSAGE(cm.is_ok(), cm.status().message());
  CHECK(cm->graph.name() == "chain");
  // The source's metadata, then the compiling provider's compatibility string (ONNX Runtime's key).
  auto expected = chain_model().metadata;
  expected.emplace_back("ep_compatibility_info.ToyExecutionProvider", "ToyExecutionProvider;sdk_version=1.0;hardware_architecture=toyarch");
  CHECK(cm->metadata == expected);
  CHECK(cm->opset("com.microsoft") == 1);
  CHECK(cm->opset("") == 13);
  REQUIRE(cm->graph.inputs().size() == 1);
  CHECK(cm->graph.value(cm->graph.inputs()[0]).name == "X");
  REQUIRE(cm->graph.outputs().size() == 2);
  CHECK(cm->graph.value(cm->graph.outputs()[0]).name == "Y");
  CHECK(cm->graph.value(cm->graph.outputs()[1]).name == "R");
  // The weights of the toy partitions are in the binary, not in the model; the Sigmoid stays.
  CHECK(cm->graph.initializers().empty());
  const auto nodes = context_nodes(*cm);
  REQUIRE(nodes.size() == 2);
  CHECK(cm->graph.node_count() == 3);
  const auto a0 = attrs_of(*nodes[0]), a1 = attrs_of(*nodes[1]);
  CHECK(a0.main_context == 1);
  CHECK(a0.embed_mode == 0);
  CHECK(a0.ep_cache_context == "model_toy.bin");
  CHECK(a1.main_context == 0);
  CHECK(a1.ep_cache_context.empty());
  for (const auto* a : {&a0, &a1}) {
    CHECK(a->source == "ToyExecutionProvider");
    CHECK(a->ep_sdk_version == "1.0");
    CHECK(a->hardware_architecture == "toyarch");
    CHECK(a->onnx_model_filename == "model.onnx");
  }
  CHECK(a0.partition_name == nodes[0]->name);
  CHECK(nodes[0]->domain == "com.microsoft");
  CHECK(nodes[0]->name.starts_with("ToyExecutionProvider_"));

  toy load_provider;
  auto l = toy_session::create(dir / "model_ctx.onnx", {}, {load_provider, cpu_provider{}});
  REQUIRE_MESSAGE(l.is_ok(), l.status().message());
  CHECK(*load_provider.compiled == 0);
  CHECK(*load_provider.restored == 2);
  CHECK(l->ep_context().nodes_loaded == 2);
  CHECK(l->ep_context().binaries_read.size() == 1);
  check_close(run_x(*l), ref);
}

TEST_CASE("EPContext generation, embed_mode 1: the contexts live in the nodes, one file") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  auto s = toy_session::create(src, gen_options(1));
  REQUIRE_MESSAGE(s.is_ok(), s.status().message());
  CHECK(file_count(dir.path()) == 2);
  auto cm = load_model(dir / "model_ctx.onnx");
  REQUIRE(cm.is_ok());
  for (const auto* n : context_nodes(*cm)) {
    const auto a = attrs_of(*n);
    CHECK(a.embed_mode == 1);
    CHECK(a.main_context == 1);
    CHECK(a.ep_cache_context.substr(0, 8) == "EPSTKCTX");
    CHECK(a.max_size == static_cast<std::int64_t>(a.ep_cache_context.size()));
  }
  toy p;
  auto l = toy_session::create(dir / "model_ctx.onnx", {}, {p, cpu_provider{}});
  REQUIRE_MESSAGE(l.is_ok(), l.status().message());
  CHECK(*p.restored == 2);
  CHECK(*p.compiled == 0);
  check_close(run_x(*l), reference(src));
  // The same from a memory buffer: embedded contexts need no folder.
  const std::string bytes = test::read_file(dir / "model_ctx.onnx");
  auto b = toy_session::create(std::as_bytes(std::span(bytes.data(), bytes.size())));
  REQUIRE_MESSAGE(b.is_ok(), b.status().message());
  check_close(run_x(*b), reference(src));
}

TEST_CASE("EPContext generation is deterministic: the same input and options give byte-identical files") {
  test::temp_dir d1, d2;
  for (const auto* d : {&d1, &d2}) {
    write_model(chain_model(), *d / "model.onnx");
    REQUIRE(toy_session::create(*d / "model.onnx", gen_options(0)).is_ok());
  }
  CHECK(test::read_file(d1 / "model_ctx.onnx") == test::read_file(d2 / "model_ctx.onnx"));
  CHECK(test::read_file(d1 / "model_toy.bin") == test::read_file(d2 / "model_toy.bin"));
  test::temp_dir e1, e2;
  for (const auto* d : {&e1, &e2}) {
    write_model(chain_model(), *d / "model.onnx");
    REQUIRE(toy_session::create(*d / "model.onnx", gen_options(1)).is_ok());
  }
  CHECK(test::read_file(e1 / "model_ctx.onnx") == test::read_file(e2 / "model_ctx.onnx"));
}

TEST_CASE("ep.context_node_name_prefix names the nodes, their partition_name and the graphs in the binary") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  auto o = gen_options(0);
  o.set_config(config_keys::ep_context_node_name_prefix, "v2_");
  REQUIRE(toy_session::create(src, o).is_ok());
  auto cm = load_model(dir / "model_ctx.onnx");
  REQUIRE(cm.is_ok());
  auto bin = ep_context_binary::open(dir / "model_toy.bin");
  REQUIRE(bin.is_ok());
  REQUIRE(bin->graphs().size() == 2);
  for (const auto* n : context_nodes(*cm)) {
    CHECK(n->name.starts_with("v2_ToyExecutionProvider_"));
    CHECK(attrs_of(*n).partition_name == n->name);
    CHECK(bin->find_graph(n->name) != nullptr);
  }
  CHECK(bin->provider() == "ToyExecutionProvider");
  CHECK(bin->sdk_version() == "1.0");
  CHECK(bin->hardware_architecture() == "toyarch");
}

TEST_CASE("EPContext generation from a memory buffer needs ep.context_file_path, a folder is refused") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  const std::string bytes = test::read_file(src);
  const auto buf = std::as_bytes(std::span(bytes.data(), bytes.size()));
  toy p;
  auto s = toy_session::create(buf, gen_options(0), {p, cpu_provider{}});
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.status().code() == errc::invalid_argument);
  CHECK(s.status().message().find("ep.context_file_path") != std::string::npos);
  CHECK(*p.compiled == 0);

  for (const std::string& folder : {dir.path().string(), dir.path().string() + "/", (dir / "noext").string()}) {
    auto o = gen_options(0);
    o.set_config(config_keys::ep_context_file_path, folder);
    auto f = toy_session::create(src, o);
    REQUIRE_FALSE(f.is_ok());
    CHECK(f.status().code() == errc::invalid_argument);
    CHECK(f.status().message().find("should not point to a folder") != std::string::npos);
  }

  auto o = gen_options(0);
  o.set_config(config_keys::ep_context_file_path, (dir / "out" ).string() + "_ctx.onnx");
  auto ok = toy_session::create(buf, o);
  REQUIRE_MESSAGE(ok.is_ok(), ok.status().message());
  CHECK(fs::is_regular_file(dir / "out_ctx.onnx"));
  CHECK(fs::is_regular_file(dir / "out_toy.bin"));  // [model_name] from the output's name for a buffer

  // Loading the embed_mode 0 model from a buffer: the binary's folder comes from ep.context_file_path.
  const std::string cbytes = test::read_file(dir / "out_ctx.onnx");
  const auto cbuf = std::as_bytes(std::span(cbytes.data(), cbytes.size()));
  auto no_folder = toy_session::create(cbuf);
  REQUIRE_FALSE(no_folder.is_ok());
  CHECK(no_folder.status().code() == errc::invalid_graph);
  CHECK(no_folder.status().message().find("ep.context_file_path") != std::string::npos);
  session_options lo;
  lo.set_config(config_keys::ep_context_file_path, (dir / "out_ctx.onnx").string());
  auto loaded = toy_session::create(cbuf, lo);
  REQUIRE_MESSAGE(loaded.is_ok(), loaded.status().message());
  check_close(run_x(*loaded), reference(src));
}

TEST_CASE("An existing output is refused before anything is compiled, and nothing is overwritten") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  test::write_file(dir / "model_ctx.onnx", "keep me");
  toy p;
  auto s = toy_session::create(src, gen_options(0), {p, cpu_provider{}});
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.status().code() == errc::invalid_argument);
  CHECK(s.status().message().find("exists already") != std::string::npos);
  CHECK(*p.compiled == 0);
  CHECK(test::read_file(dir / "model_ctx.onnx") == "keep me");
  CHECK(file_count(dir.path()) == 2);

  fs::remove(dir / "model_ctx.onnx");
  test::write_file(dir / "model_toy.bin", "old binary");
  auto t = toy_session::create(src, gen_options(0), {p, cpu_provider{}});
  REQUIRE_FALSE(t.is_ok());
  CHECK(t.status().message().find("model_toy.bin' exists already") != std::string::npos);
  CHECK(*p.compiled == 0);
  CHECK(test::read_file(dir / "model_toy.bin") == "old binary");
  CHECK_FALSE(fs::exists(dir / "model_ctx.onnx"));
}

TEST_CASE("An already-compiled model is invalid_graph for generation, nothing compiled means a warning and no file") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  REQUIRE(toy_session::create(src, gen_options(0)).is_ok());
  auto o = gen_options(0);
  o.set_config(config_keys::ep_context_file_path, (dir / "again_ctx.onnx").string());
  auto again = toy_session::create(dir / "model_ctx.onnx", o);
  REQUIRE_FALSE(again.is_ok());
  CHECK(again.status().code() == errc::invalid_graph);
  CHECK(again.status().message().find("already compiled") != std::string::npos);

  test::temp_dir d2;
  const auto src2 = write_model(chain_model(), d2 / "model.onnx");
  toy none;
  none.ops = {"NoSuchOp"};
  auto s = toy_session::create(src2, gen_options(0), {none, cpu_provider{}});
  REQUIRE_MESSAGE(s.is_ok(), s.status().message());
  REQUIRE(s->ep_context().warnings.size() == 1);
  CHECK(s->ep_context().warnings[0].find("no EP context model was written") != std::string::npos);
  CHECK(file_count(d2.path()) == 1);
}

TEST_CASE("Several providers in one stack each contribute EPContext nodes and binaries to one model") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  toy_a a;
  a.ops = {"Add", "Relu"};
  toy_b b;
  b.ops = {"Neg", "Mul"};
  auto s = session<toy_a, toy_b>::create(src, gen_options(0), {a, b, cpu_provider{}});
  REQUIRE_MESSAGE(s.is_ok(), s.status().message());
  CHECK(fs::is_regular_file(dir / "model_toya.bin"));
  CHECK(fs::is_regular_file(dir / "model_toyb.bin"));
  auto cm = load_model(dir / "model_ctx.onnx");
  REQUIRE(cm.is_ok());
  std::vector<std::string> sources;
  for (const auto* n : context_nodes(*cm)) sources.push_back(attrs_of(*n).source);
  CHECK(sources == std::vector<std::string>{"ToyAExecutionProvider", "ToyBExecutionProvider"});
  toy_a la;
  toy_b lb;
  la.ops = lb.ops = {"NoSuchOp"};
  auto l = session<toy_a, toy_b>::create(dir / "model_ctx.onnx", {}, {la, lb, cpu_provider{}});
  REQUIRE_MESSAGE(l.is_ok(), l.status().message());
  CHECK(*la.restored == 1);
  CHECK(*lb.restored == 1);
  check_close(run_x(*l), reference(src));
  // A provider with one graph per context writes one binary per partition, each node a main context.
  test::temp_dir d2;
  const auto src2 = write_model(chain_model(), d2 / "model.onnx");
  REQUIRE(session<toy_single>::create(src2, gen_options(0)).is_ok());
  CHECK(fs::is_regular_file(d2 / "model_toys_0.bin"));
  CHECK(fs::is_regular_file(d2 / "model_toys_1.bin"));
  auto l2 = session<toy_single>::create(d2 / "model_ctx.onnx");
  REQUIRE_MESSAGE(l2.is_ok(), l2.status().message());
  check_close(run_x(*l2), reference(src2));
}

TEST_CASE("EPContext nodes generated from different models, told apart by prefixes, combine into one model") {
  test::temp_dir dir;
  // m1: X -> Relu -> H; m2: H -> Neg -> Y.
  model m1, m2;
  m1.opsets = m2.opsets = {{"", 13}};
  m1.graph.set_name("m1");
  m2.graph.set_name("m2");
  m1.graph.add_input("X", type_info::tensor_of(element_type::float32, shape{2, 3}));
  m1.graph.add_node(op("r", "Relu"), {"X"}, {"H"});
  m1.graph.add_output("H", type_info::tensor_of(element_type::float32, shape{2, 3}));
  m2.graph.add_input("H", type_info::tensor_of(element_type::float32, shape{2, 3}));
  m2.graph.add_node(op("r", "Neg"), {"H"}, {"Y"});
  m2.graph.add_output("Y", type_info::tensor_of(element_type::float32, shape{2, 3}));
  write_model(m1, dir / "m1.onnx");
  write_model(m2, dir / "m2.onnx");
  for (const char* name : {"m1", "m2"}) {
    auto o = gen_options(0);
    o.set_config(config_keys::ep_context_node_name_prefix, std::string(name) + "_");
    auto g = toy_session::create(dir / (std::string(name) + ".onnx"), o);
    REQUIRE_MESSAGE(g.is_ok(), g.status().message());
  }
  auto c1 = load_model(dir / "m1_ctx.onnx");
  auto c2 = load_model(dir / "m2_ctx.onnx");
  REQUIRE((c1.is_ok() && c2.is_ok()));
  model both;
  both.opsets = c1->opsets;
  both.graph.set_name("both");
  both.graph.add_input("X", type_info::tensor_of(element_type::float32, shape{2, 3}));
  for (const auto* c : {&*c1, &*c2})
    for (node_id n = 0; n < c->graph.node_count(); ++n) {
      const auto& nd = c->graph.node(n);
      std::vector<std::string> in, out;
      for (auto v : nd.inputs) in.push_back(c->graph.value(v).name);
      for (auto v : nd.outputs) out.push_back(c->graph.value(v).name);
      both.graph.add_node(nd, in, out);
    }
  both.graph.add_output("Y", type_info::tensor_of(element_type::float32, shape{2, 3}));
  write_model(both, dir / "both_ctx.onnx");
  toy p;
  auto s = toy_session::create(dir / "both_ctx.onnx", {}, {p, cpu_provider{}});
  REQUIRE_MESSAGE(s.is_ok(), s.status().message());
  CHECK(*p.restored == 2);
  const auto x = input_x();
  auto out = s->run({{"X", x}});
  REQUIRE(out.is_ok());
  for (std::size_t k = 0; k < 6; ++k) CHECK((*out)[0].typed<float>()[k] == -std::max(0.0f, x.typed<float>()[k]));
}

TEST_CASE("The context model never refers to the source's external data, ep.context_model_external_initializers_file_name") {
  test::temp_dir dir;
  // Big enough weights to go external, and a CPU node (Sigmoid) that reads one.
  model m = chain_model();
  m.graph.add_initializer("B", zoo::random_tensor({2, 3}, 5, 1.0f));
  m.graph.add_node(op("add_cpu", "Sub"), {"S", "B"}, {"S2"});
  m.graph.add_output("S2", type_info::tensor_of(element_type::float32, shape{2, 3}));
  save_options ext;
  ext.mode = external_data_mode::all_external;
  ext.threshold_bytes = 0;
  write_model(m, dir / "model.onnx", ext);
  REQUIRE(fs::exists(dir / "model.onnx.data"));
  const auto ref = reference(dir / "model.onnx");
  {
    auto s = toy_session::create(dir / "model.onnx", gen_options(0));
    REQUIRE_MESSAGE(s.is_ok(), s.status().message());
  }
  {
    test::temp_dir d2;
    write_model(m, d2 / "model.onnx", ext);
    auto o = gen_options(0);
    o.set_config(config_keys::ep_context_external_initializers_file, "weights.bin");
    auto s = toy_session::create(d2 / "model.onnx", o);
    REQUIRE_MESSAGE(s.is_ok(), s.status().message());
    CHECK(fs::is_regular_file(d2 / "weights.bin"));
    fs::remove(d2 / "model.onnx.data");
    auto l = toy_session::create(d2 / "model_ctx.onnx");
    REQUIRE_MESSAGE(l.is_ok(), l.status().message());
    check_close(run_x(*l), ref);
  }
  fs::remove(dir / "model.onnx.data");  // the source's data is gone: the context model does not need it
  auto l = toy_session::create(dir / "model_ctx.onnx");
  REQUIRE_MESSAGE(l.is_ok(), l.status().message());
  check_close(run_x(*l), ref);
}

TEST_CASE("A progress callback sees the stages and can cancel before anything is written") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  std::vector<std::string> stages;
  auto o = gen_options(0);
  o.set_progress_callback([&](const compile_progress& p) {
    stages.emplace_back(p.stage);
    return p.stage != "serialize" || p.done < 1;
  });
  auto s = toy_session::create(src, o);
  REQUIRE_FALSE(s.is_ok());
  CHECK(s.status().message().find("cancelled") != std::string::npos);
  CHECK(file_count(dir.path()) == 1);
  CHECK(std::find(stages.begin(), stages.end(), "optimize") != stages.end());
  CHECK(std::find(stages.begin(), stages.end(), "compile") != stages.end());
}

TEST_CASE("Weight sharing: N models give N _ctx.onnx and one binary with identical weights stored once") {
  for (int n_models : {2, 3}) {
    CAPTURE(n_models);
    test::temp_dir dir;
    // The same weights in every model; the models differ in one CPU node (Sigmoid, Tanh, Softsign).
    std::vector<fs::path> srcs;
    for (int i = 0; i < n_models; ++i) {
      model m = chain_model();
      for (node_id n = 0; n < m.graph.node_count(); ++n)
        if (m.graph.node(n).name == "sig1") m.graph.node(n).op_type = std::array{"Sigmoid", "Tanh", "Softsign"}[static_cast<std::size_t>(i)];
      srcs.push_back(write_model(m, dir / ("model" + std::to_string(i + 1) + ".onnx")));
    }
    test::temp_dir single_dir;
    REQUIRE(toy_session::create(write_model(chain_model(), single_dir / "model1.onnx"), gen_options(0)).is_ok());
    const auto single_size = fs::file_size(single_dir / "model1_toy.bin");

    auto o = share_options();
    for (int i = 0; i < n_models; ++i) {
      if (i == n_models - 1) o.set_config(config_keys::ep_stop_share_contexts, "1");
      auto s = toy_session::create(srcs[static_cast<std::size_t>(i)], o);
      REQUIRE_MESSAGE(s.is_ok(), s.status().message());
      // Only the last session writes the binary.
      CHECK(fs::exists(dir / "model1_toy.bin") == (i == n_models - 1));
    }
    CHECK(file_count(dir.path()) == static_cast<std::size_t>(2 * n_models + 1));
    auto bin = ep_context_binary::open(dir / "model1_toy.bin");
    REQUIRE(bin.is_ok());
    CHECK(bin->graphs().size() == static_cast<std::size_t>(2 * n_models));
    CHECK(bin->tensors().size() == 2);  // W1 and W2, once
    CHECK(static_cast<double>(fs::file_size(dir / "model1_toy.bin")) <= 1.05 * static_cast<double>(single_size) + 4096);
    for (int i = 0; i < n_models; ++i) {
      auto cm = load_model(dir / ("model" + std::to_string(i + 1) + "_ctx.onnx"));
      REQUIRE(cm.is_ok());
      for (const auto* nd : context_nodes(*cm)) {
        CHECK(attrs_of(*nd).ep_cache_context == "model1_toy.bin");
        CHECK(attrs_of(*nd).main_context == 1);
        CHECK(nd->name.starts_with("model" + std::to_string(i + 1) + "_"));
      }
    }

    // Inference with sharing: the first session maps the binary; later ones take their graphs from the workspace
    // without reading the file (it is gone by then).
    session_options lo;
    lo.set_config(config_keys::ep_share_contexts, "1");
    std::vector<std::optional<toy_session>> sessions;
    const auto ref = reference(srcs[0]);
    for (int i = 0; i < n_models; ++i) {
      auto s = toy_session::create(dir / ("model" + std::to_string(i + 1) + "_ctx.onnx"), lo);
      REQUIRE_MESSAGE(s.is_ok(), s.status().message());
      if (i == 0) {
        CHECK(s->ep_context().binaries_read.size() == 1);
        fs::remove(dir / "model1_toy.bin");
      } else {
        CHECK(s->ep_context().binaries_read.empty());
        CHECK(s->ep_context().graphs_from_workspace == 2);
      }
      sessions.emplace_back(std::move(*s));
    }
    // Destroyed in any order, the others stay correct.
    sessions[0].reset();
    for (int i = 1; i < n_models; ++i)
      check_close(run_x(*sessions[static_cast<std::size_t>(i)]), reference(srcs[static_cast<std::size_t>(i)]));
    CHECK(reference(srcs[1])[0].typed<float>()[0] != doctest::Approx(ref[0].typed<float>()[0]));
  }
}

TEST_CASE("compile_model: path or buffer in and out, the flags, and a model written even when nothing compiled") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  const auto ref = reference(src);
  compile_options co;
  co.input_path = src;
  co.output_path = dir / "out" / "compiled.onnx";
  fs::create_directory(dir / "out");
  auto r = compile_model<toy>(co);
  REQUIRE_MESSAGE(r.is_ok(), r.status().message());
  CHECK(r->nodes_written == 2);
  CHECK(r->model_written == fs::absolute(dir / "out" / "compiled.onnx"));
  CHECK(fs::is_regular_file(dir / "out" / "model_toy.bin"));
  CHECK(file_count(dir / "out") == 2);  // no working folder left behind
  auto l = toy_session::create(dir / "out" / "compiled.onnx");
  REQUIRE_MESSAGE(l.is_ok(), l.status().message());
  check_close(run_x(*l), ref);

  // error_if_output_file_exists (the default) refuses; without it the outputs are replaced.
  auto again = compile_model<toy>(co);
  REQUIRE_FALSE(again.is_ok());
  CHECK(again.status().code() == errc::invalid_argument);
  CHECK(again.status().message().find("exists already") != std::string::npos);
  co.error_if_output_file_exists = false;
  auto replaced = compile_model<toy>(co);
  REQUIRE_MESSAGE(replaced.is_ok(), replaced.status().message());
  CHECK(file_count(dir / "out") == 2);

  // Buffer in, buffer out (embed_mode 1); a buffer output with embed_mode 0 is refused.
  const std::string bytes = test::read_file(src);
  compile_options cb;
  cb.input_bytes = std::as_bytes(std::span(bytes.data(), bytes.size()));
  std::vector<std::byte> out;
  cb.output_buffer = &out;
  auto no = compile_model<toy>(cb);
  REQUIRE_FALSE(no.is_ok());
  CHECK(no.status().message().find("embed_mode 1") != std::string::npos);
  cb.embed_mode = 1;
  auto b = compile_model<toy>(cb);
  REQUIRE_MESSAGE(b.is_ok(), b.status().message());
  REQUIRE(!out.empty());
  auto lb = toy_session::create(std::span<const std::byte>(out));
  REQUIRE_MESSAGE(lb.is_ok(), lb.status().message());
  check_close(run_x(*lb), ref);

  // Nothing compiled: the model is written anyway, unless error_if_no_nodes_compiled.
  toy none;
  none.ops = {"NoSuchOp"};
  compile_options cn;
  cn.input_path = src;
  cn.output_path = dir / "plain.onnx";
  auto p = compile_model<toy>(cn, {none, cpu_provider{}});
  REQUIRE_MESSAGE(p.is_ok(), p.status().message());
  CHECK(p->nodes_written == 0);
  CHECK(fs::is_regular_file(dir / "plain.onnx"));
  cn.output_path = dir / "plain2.onnx";
  cn.error_if_no_nodes_compiled = true;
  auto e = compile_model<toy>(cn, {none, cpu_provider{}});
  REQUIRE_FALSE(e.is_ok());
  CHECK(e.status().code() == errc::ep_fail);
  CHECK_FALSE(fs::exists(dir / "plain2.onnx"));
}

TEST_CASE("compile_model to write functions, and contexts read back through a reader: a toy cipher round trip") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  const auto ref = reference(src);
  // A toy cipher standing for the application's protection: each byte XORed with a position-dependent key.
  const auto cipher = [](std::span<const std::byte> in) {
    std::vector<std::byte> out(in.begin(), in.end());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] ^= static_cast<std::byte>((0xa5 + 7 * i) & 0xff);
    return out;
  };
  std::vector<std::byte> sealed_model;
  std::map<std::string, std::vector<std::byte>, std::less<>> store;
  compile_options co;
  co.input_path = src;
  co.write_model = [&](std::span<const std::byte> b) {
    sealed_model = cipher(b);
    return Status();
  };
  co.write_context = [&](std::string_view name, std::span<const std::byte> b) {
    store[std::string(name)] = cipher(b);
    return Status();
  };
  auto r = compile_model<toy>(co);
  REQUIRE_MESSAGE(r.is_ok(), r.status().message());
  CHECK(r->nodes_written == 2);
  CHECK(r->model_written.empty());
  CHECK(r->binaries_written.empty());
  REQUIRE(store.size() == 1);
  const std::string bin_name = store.begin()->first;
  CHECK(bin_name.ends_with("_toy.bin"));
  CHECK(file_count(dir.path()) == 1);  // only the source: nothing was written beside it
  // Sealed, the bytes are neither a model nor a binary.
  CHECK_FALSE(load_model(std::span<const std::byte>(sealed_model)).is_ok());
  CHECK_FALSE(ep_context_binary::from_bytes(store.begin()->second, nullptr, "sealed").is_ok());

  const auto model_bytes = cipher(sealed_model);
  session_options so;
  so.set_context_reader([&](std::string_view name) -> std::optional<std::vector<std::byte>> {
    auto it = store.find(name);
    if (it == store.end()) return std::nullopt;
    return cipher(it->second);
  });
  toy t;
  auto l = toy_session::create(std::span<const std::byte>(model_bytes), so, {t, cpu_provider{}});
  REQUIRE_MESSAGE(l.is_ok(), l.status().message());
  CHECK(*t.compiled == 0);
  CHECK(*t.restored == 2);
  check_close(run_x(*l), ref);
  CHECK(toy_session::check_compatibility(std::span<const std::byte>(model_bytes), so).is_ok());

  // Without a reader, a model from a buffer cannot find its binary; a reader without it, or returning sealed bytes,
  // is invalid_graph naming the node and the binary.
  auto none = toy_session::create(std::span<const std::byte>(model_bytes));
  REQUIRE_FALSE(none.is_ok());
  CHECK(none.status().code() == errc::invalid_graph);
  session_options empty;
  empty.set_context_reader([](std::string_view) -> std::optional<std::vector<std::byte>> { return std::nullopt; });
  auto missing = toy_session::create(std::span<const std::byte>(model_bytes), empty);
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == errc::invalid_graph);
  CHECK(missing.status().message().find("the context reader has no context binary '" + bin_name + "'") != std::string::npos);
  session_options sealed;
  sealed.set_context_reader([&](std::string_view name) -> std::optional<std::vector<std::byte>> { return store.find(name)->second; });
  auto garbled = toy_session::create(std::span<const std::byte>(model_bytes), sealed);
  REQUIRE_FALSE(garbled.is_ok());
  CHECK(garbled.status().code() == errc::invalid_graph);
  CHECK(garbled.status().message().find("(from the reader)") != std::string::npos);

  // The options that cannot work together, and a write function's error.
  compile_options two = co;
  two.output_path = dir / "also.onnx";
  CHECK(compile_model<toy>(two).status().code() == errc::invalid_argument);
  compile_options no_ctx;
  no_ctx.input_path = src;
  no_ctx.write_model = co.write_model;
  auto refused = compile_model<toy>(no_ctx);
  CHECK(refused.status().code() == errc::invalid_argument);
  CHECK(refused.status().message().find("needs a context write function") != std::string::npos);
  no_ctx.embed_mode = 1;  // the binaries inside the model: no context function needed
  REQUIRE(compile_model<toy>(no_ctx).is_ok());
  compile_options failing = co;
  failing.write_context = [](std::string_view, std::span<const std::byte>) { return Status(errc::fail, "the store is full"); };
  auto full = compile_model<toy>(failing);
  REQUIRE_FALSE(full.is_ok());
  CHECK(full.status().message().find("the store is full") != std::string::npos);
  CHECK(full.status().message().find("context write function") != std::string::npos);
  CHECK(file_count(dir.path()) == 1);
}

TEST_CASE("compile_model of an IR 10 / opset 21 model keeps its IR version, opsets, metadata and functions") {
  test::temp_dir dir;
  model m = chain_model();
  REQUIRE(convert_opset(m, 21, 10).is_ok());
  m.metadata.emplace_back("source", "test");
  m.graph.metadata().emplace_back("graph_key", "graph value");
  function_def f;
  f.domain = "local";
  f.name = "Unused";
  f.overload = "v2";
  f.proto = [] {
    // A FunctionProto with its IR 10 overload field (13), built as wire bytes: name 1, domain 10, overload 13.
    std::string b;
    const auto field = [&](int number, const std::string& v) {
      b.push_back(static_cast<char>(number << 3 | 2));
      b.push_back(static_cast<char>(v.size()));
      b += v;
    };
    field(1, "Unused");
    field(10, "local");
    field(13, "v2");
    return b;
  }();
  m.functions.push_back(f);
  const auto src = write_model(m, dir / "model.onnx");
  compile_options co;
  co.input_path = src;
  co.output_path = dir / "model_ctx.onnx";
  auto r = compile_model<toy>(co);
  REQUIRE_MESSAGE(r.is_ok(), r.status().message());
  CHECK(r->nodes_written > 0);
  load_options lo;
  auto back = load_model(dir / "model_ctx.onnx", lo);
  REQUIRE_MESSAGE(back.has_value(), back.status().to_string());
  CHECK(back->ir_version == 10);
  CHECK(back->opset("") == 21);
  CHECK(std::find(back->metadata.begin(), back->metadata.end(), std::pair<std::string, std::string>("source", "test")) !=
        back->metadata.end());
  CHECK(back->graph.metadata() == m.graph.metadata());
  REQUIRE(back->functions.size() == 1);
  CHECK(back->functions[0].name == "Unused");
  CHECK(back->functions[0].overload == "v2");
}

TEST_CASE("The context model keeps the inputs in their order, with an overridable initializer the CPU still reads") {
  // Inputs Z, X, B (B also an initializer: a default the caller may override); toy partitions {Add, Relu} and {Neg},
  // the two Subs on the CPU.
  model m;
  m.opsets = {{"", 13}};
  graph& g = m.graph;
  g.set_name("inputs");
  const auto t23 = type_info::tensor_of(element_type::float32, shape{2, 3});
  g.add_input("Z", t23);
  g.add_input("X", t23);
  g.add_input("B", t23);
  g.add_initializer("B", zoo::random_tensor({2, 3}, 5, 1.0f));
  g.add_initializer("W1", zoo::random_tensor({2, 3}, 7, 1.0f));
  g.add_node(op("add1", "Add"), {"X", "W1"}, {"A"});
  g.add_node(op("relu1", "Relu"), {"A"}, {"R"});
  g.add_node(op("sub1", "Sub"), {"R", "Z"}, {"S"});
  g.add_node(op("sub2", "Sub"), {"S", "B"}, {"T"});
  g.add_node(op("neg1", "Neg"), {"T"}, {"Y"});
  g.add_output("Y", t23);
  g.add_output("R", t23);
  test::temp_dir dir;
  const auto src = write_model(m, dir / "inputs.onnx");
  REQUIRE(toy_session::create(src, gen_options(0)).is_ok());

  auto cm = load_model(dir / "inputs_ctx.onnx");
  REQUIRE(cm.is_ok());
  std::vector<std::string> ins, outs;
  for (value_id v : cm->graph.inputs()) ins.push_back(cm->graph.value(v).name);
  for (value_id v : cm->graph.outputs()) outs.push_back(cm->graph.value(v).name);
  CHECK(ins == std::vector<std::string>{"Z", "X", "B"});
  CHECK(outs == std::vector<std::string>{"Y", "R"});
  CHECK(cm->graph.value(cm->graph.find_value("B")).initializer.has_value());
  CHECK(context_nodes(*cm).size() == 2);

  auto cpu = session<>::create(src);
  auto ctx = toy_session::create(dir / "inputs_ctx.onnx");
  REQUIRE(cpu.is_ok());
  REQUIRE_MESSAGE(ctx.is_ok(), ctx.status().message());
  const tensor z = zoo::random_tensor({2, 3}, 11, 1.0f), x = zoo::random_tensor({2, 3}, 12, 1.0f);
  const tensor b = zoo::random_tensor({2, 3}, 13, 3.0f);
  auto want = cpu->run({{"Z", z}, {"X", x}});
  auto got = ctx->run({{"Z", z}, {"X", x}});
  REQUIRE(want.is_ok());
  REQUIRE_MESSAGE(got.is_ok(), got.status().message());
  check_close(*got, *want);
  // The default overridden: both models see the caller's B.
  auto want_b = cpu->run({{"Z", z}, {"X", x}, {"B", b}});
  auto got_b = ctx->run({{"Z", z}, {"X", x}, {"B", b}});
  REQUIRE(want_b.is_ok());
  REQUIRE_MESSAGE(got_b.is_ok(), got_b.status().message());
  check_close(*got_b, *want_b);
  CHECK((*got_b)[0].typed<float>()[0] != doctest::Approx((*got)[0].typed<float>()[0]));
}

TEST_CASE("compile_model refuses an existing binary or initializers file in the output folder before compiling") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  fs::create_directory(dir / "out");
  test::write_file(dir / "out" / "model_toy.bin", "old binary");
  toy p;
  compile_options co;
  co.input_path = src;
  co.output_path = dir / "out" / "compiled.onnx";
  auto r = compile_model<toy>(co, {p, cpu_provider{}});
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == errc::invalid_argument);
  CHECK(r.status().message().find("model_toy.bin' exists already") != std::string::npos);
  CHECK(*p.compiled == 0);
  CHECK(test::read_file(dir / "out" / "model_toy.bin") == "old binary");
  CHECK(file_count(dir / "out") == 1);  // no working folder, no model

  fs::remove(dir / "out" / "model_toy.bin");
  test::write_file(dir / "out" / "weights.data", "old weights");
  co.external_initializers_file = "weights.data";
  auto w = compile_model<toy>(co, {p, cpu_provider{}});
  REQUIRE_FALSE(w.is_ok());
  CHECK(w.status().message().find("weights.data' exists already") != std::string::npos);
  CHECK(*p.compiled == 0);
  CHECK(test::read_file(dir / "out" / "weights.data") == "old weights");

  // Without error_if_output_file_exists they are replaced, the model last.
  co.error_if_output_file_exists = false;
  auto ok = compile_model<toy>(co, {p, cpu_provider{}});
  REQUIRE_MESSAGE(ok.is_ok(), ok.status().message());
  CHECK(file_count(dir / "out") == 3);
  CHECK(test::read_file(dir / "out" / "weights.data") != "old weights");
  auto l = toy_session::create(dir / "out" / "compiled.onnx");
  REQUIRE_MESSAGE(l.is_ok(), l.status().message());
  check_close(run_x(*l), reference(src));

  // An output buffer with an external initializers file has nowhere to put that file.
  std::vector<std::byte> out;
  compile_options cb;
  cb.input_path = src;
  cb.output_buffer = &out;
  cb.embed_mode = 1;
  cb.external_initializers_file = "weights.data";
  auto b = compile_model<toy>(cb);
  REQUIRE_FALSE(b.is_ok());
  CHECK(b.status().code() == errc::invalid_argument);
  CHECK(b.status().message().find("needs an output path") != std::string::npos);
  CHECK(out.empty());
}

TEST_CASE("Weight sharing: a session that fails leaves the workspace as it found it") {
  test::temp_dir dir;
  std::vector<fs::path> srcs;
  for (int i = 0; i < 3; ++i)
    srcs.push_back(write_model(chain_model(1.0f + static_cast<float>(i)), dir / ("m" + std::to_string(i + 1) + ".onnx")));
  auto o = share_options();
  o.set_config(config_keys::ep_context_node_name_prefix, "m1_");
  REQUIRE(toy_session::create(srcs[0], o).is_ok());
  // m2 with m1's prefix: its graph names clash with m1's in the shared binary; it fails and adds nothing.
  auto clash = toy_session::create(srcs[1], o);
  REQUIRE_FALSE(clash.is_ok());
  CHECK(clash.status().code() == errc::invalid_argument);
  CHECK(clash.status().message().find("distinct ep.context_node_name_prefix") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "m2_ctx.onnx"));
  // With its own prefix but cancelled after its graphs went into the shared builder (at the write stage): they are
  // rolled back, so trying again with the same prefix works (it would clash with what a failed try left otherwise).
  o.set_config(config_keys::ep_context_node_name_prefix, "m2_");
  auto cancelled = o;
  cancelled.set_progress_callback([](const compile_progress& p) { return p.stage != "write"; });
  auto c2 = toy_session::create(srcs[1], cancelled);
  REQUIRE_FALSE(c2.is_ok());
  CHECK(c2.status().message().find("cancelled") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "m2_ctx.onnx"));
  REQUIRE(toy_session::create(srcs[1], o).is_ok());
  o.set_config(config_keys::ep_context_node_name_prefix, "m3_");
  o.set_config(config_keys::ep_stop_share_contexts, "1");
  REQUIRE(toy_session::create(srcs[2], o).is_ok());
  auto bin = ep_context_binary::open(dir / "m1_toy.bin");
  REQUIRE(bin.is_ok());
  CHECK(bin->graphs().size() == 6);
  CHECK(bin->tensors().size() == 6);  // each model its own W1 and W2 (different scales)
  for (int i = 0; i < 3; ++i) {
    auto s = toy_session::create(dir / ("m" + std::to_string(i + 1) + "_ctx.onnx"));
    REQUIRE_MESSAGE(s.is_ok(), s.status().message());
    check_close(run_x(*s), reference(srcs[static_cast<std::size_t>(i)]));
  }

  // A last session that fails: the group stays open for it, and a successful retry ends it.
  test::temp_dir dir2;
  const auto a = write_model(chain_model(), dir2 / "a.onnx");
  const auto b = write_model(chain_model(2.0f), dir2 / "b.onnx");
  auto o2 = share_options();
  o2.set_config(config_keys::ep_context_node_name_prefix, "x_");
  REQUIRE(toy_session::create(a, o2).is_ok());
  o2.set_config(config_keys::ep_stop_share_contexts, "1");
  o2.set_config(config_keys::ep_context_node_name_prefix, "y_");
  auto cancel_last = o2;
  cancel_last.set_progress_callback([](const compile_progress& p) { return p.stage != "write"; });
  REQUIRE_FALSE(toy_session::create(b, cancel_last).is_ok());
  CHECK_FALSE(fs::exists(dir2 / "a_toy.bin"));
  CHECK_FALSE(fs::exists(dir2 / "b_ctx.onnx"));
  REQUIRE(toy_session::create(b, o2).is_ok());
  auto bin2 = ep_context_binary::open(dir2 / "a_toy.bin");
  REQUIRE(bin2.is_ok());
  CHECK(bin2->graphs().size() == 4);
  // The workspace is empty again: a new group names its binary after its own first model. A model of the group in
  // another folder is refused (its _ctx.onnx could not name the binary by a plain relative name), and the group goes on.
  test::temp_dir dir3, elsewhere;
  const auto c = write_model(chain_model(), dir3 / "c.onnx");
  const auto d = write_model(chain_model(2.0f), elsewhere / "d.onnx");
  auto o3 = share_options();
  REQUIRE(toy_session::create(c, o3).is_ok());
  o3.set_config(config_keys::ep_stop_share_contexts, "1");
  auto away = toy_session::create(d, o3);
  REQUIRE_FALSE(away.is_ok());
  CHECK(away.status().code() == errc::invalid_argument);
  CHECK(away.status().message().find("is not in the folder of the EP context model") != std::string::npos);
  CHECK(file_count(elsewhere.path()) == 1);
  const auto e = write_model(chain_model(3.0f), dir3 / "e.onnx");
  REQUIRE(toy_session::create(e, o3).is_ok());
  auto bin3 = ep_context_binary::open(dir3 / "c_toy.bin");
  REQUIRE(bin3.is_ok());
  CHECK(bin3->graphs().size() == 4);
}
