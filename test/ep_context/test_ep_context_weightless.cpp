// Weightless EP contexts (ONNX Runtime 1.29+'s ep.enable_weightless_mode 2): the binary refers to the source model's
// initializers by name and hash instead of storing them; loading binds them from the source model (a buffer, the
// path option, or onnx_model_filename beside the compiled model) and refuses a changed, missing or retyped weight.
#include "fixtures.hpp"

using namespace epstack;
using namespace epstack::test::ctx;

namespace {

session_options weightless_options(int embed = 0, std::string_view mode = "2") {
  auto o = gen_options(embed);
  o.set_config(config_keys::ep_enable_weightless_mode, mode);
  return o;
}

std::optional<std::string> metadata_of(const model& m, std::string_view key) {
  for (const auto& [k, v] : m.metadata)
    if (k == key) return v;
  return std::nullopt;
}

}  // namespace

TEST_CASE("Weightless contexts: references to the source model's weights, bound and checked at load, same outputs") {
  test::temp_dir full_dir, dir;
  const auto full_src = write_model(chain_model(), full_dir / "model.onnx");
  const auto src = write_model(chain_model(), dir / "model.onnx");
  const auto want = reference(src);

  auto full = toy_session::create(full_src, gen_options(0));
  REQUIRE(full.is_ok());
  CHECK(full->ep_context().weight_bytes_stored == 48);  // W1 and W2: 2x3 floats each
  CHECK(full->ep_context().weight_bytes_referenced == 0);

  auto gen = toy_session::create(src, weightless_options());
  REQUIRE_MESSAGE(gen.is_ok(), gen.status().message());
  CHECK(gen->ep_context().nodes_written == 2);
  CHECK(gen->ep_context().weight_bytes_stored == 0);
  CHECK(gen->ep_context().weight_bytes_referenced == 48);
  check_close(run_x(*gen), want);

  // The binary: smaller, its tensors name the source initializers and hold no bytes.
  CHECK(fs::file_size(dir / "model_toy.bin") < fs::file_size(full_dir / "model_toy.bin"));
  auto bin = ep_context_binary::open(dir / "model_toy.bin");
  REQUIRE(bin.is_ok());
  CHECK(bin->weightless());
  CHECK_FALSE(bin->bound());
  std::vector<std::string> sources;
  for (const auto& t : bin->tensors()) {
    sources.push_back(t.source);
    CHECK(t.data.empty());
    CHECK(t.length == 24);
  }
  std::sort(sources.begin(), sources.end());
  CHECK(sources == std::vector<std::string>{"W1", "W2"});
  // An unbound reference is never read: verifying it says what is missing; verifying the file checks what it holds.
  const std::uint32_t first = 0;
  const auto unbound = bin->verify_tensors(std::span(&first, 1));
  CHECK(unbound.code() == errc::invalid_graph);
  CHECK(unbound.message().find("no source model was bound") != std::string::npos);
  CHECK(bin->verify_all().is_ok());
  // The model records the mode under ONNX Runtime's key.
  auto cm = load_model(dir / "model_ctx.onnx");
  REQUIRE(cm.is_ok());
  CHECK(metadata_of(*cm, config_keys::weightless_mode_metadata) == std::optional<std::string>("2"));

  // Loaded: the source model found through onnx_model_filename beside the compiled model.
  toy provider;
  auto loaded = toy_session::create(dir / "model_ctx.onnx", {}, {provider, cpu_provider{}});
  REQUIRE_MESSAGE(loaded.is_ok(), loaded.status().message());
  CHECK(*provider.compiled == 0);
  CHECK(*provider.restored == 2);
  CHECK(loaded->ep_context().source_model_read == dir / "model.onnx");
  check_close(run_x(*loaded), want);
  // check_compatibility binds and verifies as a session would.
  CHECK(toy_session::check_compatibility(dir / "model_ctx.onnx").is_ok());

  // Embedded (embed_mode 1) weightless contexts work the same way.
  test::temp_dir edir;
  const auto esrc = write_model(chain_model(), edir / "model.onnx");
  REQUIRE(toy_session::create(esrc, weightless_options(1)).is_ok());
  auto eloaded = toy_session::create(edir / "model_ctx.onnx");
  REQUIRE_MESSAGE(eloaded.is_ok(), eloaded.status().message());
  check_close(run_x(*eloaded), want);
}

TEST_CASE("Weightless contexts: the source model from a buffer, from ep.context_source_model_path, or refused when unknown") {
  test::temp_dir dir, elsewhere;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  const auto want = reference(src);
  REQUIRE(toy_session::create(src, weightless_options()).is_ok());
  fs::rename(src, elsewhere / "source.onnx");

  auto missing = toy_session::create(dir / "model_ctx.onnx");
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == errc::invalid_graph);
  CHECK(missing.status().message().find("weightless") != std::string::npos);
  CHECK(missing.status().message().find("model.onnx") != std::string::npos);
  CHECK(missing.status().message().find("ep.context_source_model_path") != std::string::npos);

  session_options by_path;
  by_path.set_config(config_keys::ep_context_source_model_path, (elsewhere / "source.onnx").string());
  auto p = toy_session::create(dir / "model_ctx.onnx", by_path);
  REQUIRE_MESSAGE(p.is_ok(), p.status().message());
  CHECK(p->ep_context().source_model_read == elsewhere / "source.onnx");
  check_close(run_x(*p), want);

  // A buffer comes first (even with a path option naming a file that is not there), and the compiled model may come
  // from a buffer too (its binary's folder given by ep.context_file_path).
  const std::string source_bytes = test::read_file(elsewhere / "source.onnx");
  const std::string ctx_bytes = test::read_file(dir / "model_ctx.onnx");
  session_options by_buffer;
  by_buffer.set_weightless_source_model(std::as_bytes(std::span(source_bytes.data(), source_bytes.size())));
  by_buffer.set_config(config_keys::ep_context_source_model_path, (elsewhere / "nothing.onnx").string());
  by_buffer.set_config(config_keys::ep_context_file_path, (dir / "model_ctx.onnx").string());
  auto b = toy_session::create(std::as_bytes(std::span(ctx_bytes.data(), ctx_bytes.size())), by_buffer);
  REQUIRE_MESSAGE(b.is_ok(), b.status().message());
  CHECK(b->ep_context().source_model_read == "<buffer>");
  check_close(run_x(*b), want);

  // A path that does not load is named.
  session_options wrong;
  wrong.set_config(config_keys::ep_context_source_model_path, (elsewhere / "nothing.onnx").string());
  auto w = toy_session::create(dir / "model_ctx.onnx", wrong);
  REQUIRE_FALSE(w.is_ok());
  CHECK(w.status().code() == errc::invalid_graph);
  CHECK(w.status().message().find("nothing.onnx") != std::string::npos);
  CHECK(w.status().message().find("does not load") != std::string::npos);
}

TEST_CASE("Weightless contexts: a changed, missing or retyped source weight is invalid_graph naming it") {
  test::temp_dir dir;
  const auto src = dir / "model.onnx";
  write_model(chain_model(), src);
  REQUIRE(toy_session::create(src, weightless_options()).is_ok());

  SUBCASE("changed values") {
    write_model(chain_model(2.0f), src);  // same names and shapes, other numbers
    toy provider;
    auto s = toy_session::create(dir / "model_ctx.onnx", {}, {provider, cpu_provider{}});
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.status().code() == errc::invalid_graph);
    CHECK(s.status().message().find("weight 'W") != std::string::npos);
    CHECK(s.status().message().find("differs from the one this weightless context was compiled against") != std::string::npos);
    CHECK(*provider.restored == 0);
    CHECK(toy_session::check_compatibility(dir / "model_ctx.onnx").code() == errc::invalid_graph);
  }
  SUBCASE("a missing initializer") {
    // The same graph with W1 under another name.
    model m;
    m.opsets = {{"", 13}};
    graph& g = m.graph;
    g.set_name("chain");
    g.add_input("X", type_info::tensor_of(element_type::float32, shape{2, 3}));
    g.add_initializer("W1_renamed", zoo::random_tensor({2, 3}, 7, 1.0f));
    g.add_initializer("W2", zoo::random_tensor({2, 3}, 8, 1.0f));
    g.add_node(op("add1", "Add"), {"X", "W1_renamed"}, {"Y"});
    g.add_output("Y", type_info::tensor_of(element_type::float32, shape{2, 3}));
    write_model(m, src);
    auto s = toy_session::create(dir / "model_ctx.onnx");
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.status().code() == errc::invalid_graph);
    INFO(s.status().message());
    CHECK(s.status().message().find("has no initializer 'W1'") != std::string::npos);
  }
  SUBCASE("another element type or size") {
    // A model that only holds weights of those names, of other sizes and types.
    model m;
    m.opsets = {{"", 13}};
    graph& g = m.graph;
    g.set_name("weights");
    g.add_input("X", type_info::tensor_of(element_type::float32, shape{2, 3}));
    g.add_initializer("W1", zoo::random_tensor({3, 3}, 7, 1.0f));
    g.add_initializer("W2", tensor(element_type::int32, {2, 3}));
    g.add_node(op("id", "Identity"), {"X"}, {"Y"});
    g.add_output("Y", type_info::tensor_of(element_type::float32, shape{2, 3}));
    write_model(m, src);
    auto s = toy_session::create(dir / "model_ctx.onnx");
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.status().code() == errc::invalid_graph);
    const std::string msg = s.status().message();
    INFO(msg);
    CHECK((msg.find("has 36 bytes; this weightless context was compiled against 24") != std::string::npos ||
           msg.find("is int32; the context was compiled with float32") != std::string::npos));
  }
}

TEST_CASE("Weightless options: exact values, the deprecated switch, and the combinations refused") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  for (const char* v : {"3", "", "all", "0x2"}) {
    CAPTURE(std::string(v));
    auto s = toy_session::create(src, weightless_options(0, v));
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.status().code() == errc::invalid_argument);
    CHECK(s.status().message().find("ep.enable_weightless_mode must be 0, 1 or 2") != std::string::npos);
  }
  // Checked even when nothing is generated (as ONNX Runtime does at session initialisation).
  session_options plain;
  plain.set_config(config_keys::ep_enable_weightless_mode, "7");
  CHECK(toy_session::create(src, plain).status().code() == errc::invalid_argument);
  auto external_only = toy_session::create(src, weightless_options(0, "1"));
  REQUIRE_FALSE(external_only.is_ok());
  CHECK(external_only.status().code() == errc::ep_fail);
  CHECK(external_only.status().message().find("mode 2 (all) only") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "model_ctx.onnx"));

  auto shared = weightless_options();
  shared.set_config(config_keys::ep_share_contexts, "1");
  auto sh = toy_session::create(src, shared);
  REQUIRE_FALSE(sh.is_ok());
  CHECK(sh.status().code() == errc::invalid_argument);
  CHECK(sh.status().message().find("ep.share_ep_contexts with a weightless mode") != std::string::npos);

  // Mode 0 is a full context; the deprecated ep.enable_weightless=1 is weightless without recording a mode.
  auto none = toy_session::create(src, weightless_options(0, "0"));
  REQUIRE(none.is_ok());
  CHECK(none->ep_context().weight_bytes_referenced == 0);
  fs::remove(dir / "model_ctx.onnx");
  fs::remove(dir / "model_toy.bin");
  auto deprecated = gen_options(0);
  deprecated.set_config(config_keys::ep_enable_weightless, "1");
  auto d = toy_session::create(src, deprecated);
  REQUIRE_MESSAGE(d.is_ok(), d.status().message());
  CHECK(d->ep_context().weight_bytes_referenced == 48);
  auto cm = load_model(dir / "model_ctx.onnx");
  REQUIRE(cm.is_ok());
  CHECK_FALSE(metadata_of(*cm, config_keys::weightless_mode_metadata).has_value());
  auto again = toy_session::create(dir / "model_ctx.onnx");
  REQUIRE_MESSAGE(again.is_ok(), again.status().message());
  check_close(run_x(*again), reference(src));
}

TEST_CASE("Weightless contexts through compile_model, streamed binaries and a reader") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "model.onnx");
  std::map<std::string, std::vector<std::byte>, std::less<>> store;
  compile_options co;
  co.input_path = src;
  co.output_path = dir / "out_ctx.onnx";
  co.write_context = [&](std::string_view name, std::span<const std::byte> bytes) -> Status {
    store[std::string(name)].assign(bytes.begin(), bytes.end());
    return {};
  };
  co.session.set_config(config_keys::ep_enable_weightless_mode, "2");
  auto r = compile_model<toy>(co);
  REQUIRE_MESSAGE(r.is_ok(), r.status().message());
  CHECK(r->weight_bytes_referenced == 48);
  REQUIRE(store.size() == 1);
  session_options so;
  so.set_context_reader([&](std::string_view name) -> std::optional<std::vector<std::byte>> {
    if (auto it = store.find(name); it != store.end()) return it->second;
    return std::nullopt;
  });
  so.set_config(config_keys::ep_context_source_model_path, src.string());
  auto s = toy_session::create(dir / "out_ctx.onnx", so);
  REQUIRE_MESSAGE(s.is_ok(), s.status().message());
  check_close(run_x(*s), reference(src));
}
