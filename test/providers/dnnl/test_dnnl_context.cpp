// The oneDNN provider's EP context: a compiled partition written to a context binary (its operations after fusion and
// its weights in the layout oneDNN chose) and restored from it without optimising or reordering anything again; the
// oneDNN version and CPU ISA checks.
#include <epstack/ep_context/attributes.hpp>
#include <epstack/testing/model_zoo.hpp>
#include <epstack/onnx/onnx_io.hpp>
#include <epstack/providers/cpu.hpp>
#include <epstack/providers/dnnl.hpp>
#include <epstack/runtime/session.hpp>

#include "../../support/compare.hpp"
#include "../../support/graphs.hpp"
#include "../../support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

using namespace epstack;
namespace fs = std::filesystem;

namespace {

using dnnl_session = session<dnnl_provider, cpu_provider>;
static_assert(ep_context_provider<dnnl_provider>);

model with_static_input(model m, const std::vector<std::int64_t>& sizes) {
  auto& rec = m.graph.value(m.graph.inputs().front());
  std::vector<dimension> dims;
  for (auto d : sizes) dims.emplace_back(d);
  rec.type = type_info::tensor_of(rec.type.elem, shape(std::move(dims)));
  return m;
}

tensor ids_tensor(std::int64_t batch, std::int64_t seq) {
  tensor t(element_type::int64, {batch, seq});
  for (std::int64_t i = 0; i < batch * seq; ++i) t.typed<std::int64_t>()[i] = (i * 37 + 11) % 500;
  return t;
}

// The oneDNN provider's contexts are under test: placement keeps the stack's order, so it compiles what it claims.
session_options options(int embed = -1) {
  session_options so;
  so.set_intra_op_threads(2);
  so.set_config(config_keys::placement, "priority");
  if (embed >= 0) {
    so.set_config(config_keys::ep_context_enable, "1");
    so.set_config(config_keys::ep_context_embed_mode, std::to_string(embed));
  }
  return so;
}

void same_outputs(const std::vector<tensor>& a, const std::vector<tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t k = 0; k < a.size(); ++k) {
    INFO("output ", k);
    EPSTACK_CHECK_CLOSE(a[k], b[k], 1e-5, 0.0);
  }
}

struct zoo_case {
  const char* name;
  model m;
  std::vector<named_tensor> feeds;
};

// x [2,3,16,16] -> Conv 3x3 (8 channels) -> Relu -> Resize (nearest, 2x) -> Conv 3x3 (4 channels) -> y: a
// resampling step in the context record.
model upsampling() {
  model m;
  m.opsets = {{"", 13}};
  auto& g = m.graph;
  g.set_name("upsampling");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{2, 3, 16, 16}));
  g.add_initializer("W1", zoo::random_tensor({8, 3, 3, 3}, 111, 0.3f));
  g.add_initializer("W2", zoo::random_tensor({4, 8, 3, 3}, 112, 0.2f));
  g.add_initializer("roi", tensor::from<float>({0}, {}));
  g.add_initializer("scales", tensor::from<float>({4}, {1, 1, 2, 2}));
  attribute_list c;
  c.set("pads", std::vector<std::int64_t>{1, 1, 1, 1});
  attribute_list r;
  r.set("coordinate_transformation_mode", std::string("asymmetric"));
  r.set("nearest_mode", std::string("floor"));
  g.add_node(test::op("conv1", "Conv", c), {"x", "W1"}, {"c1"});
  g.add_node(test::op("relu", "Relu"), {"c1"}, {"a"});
  g.add_node(test::op("up", "Resize", r), {"a", "roi", "scales"}, {"u"});
  g.add_node(test::op("conv2", "Conv", c), {"u", "W2"}, {"y"});
  g.add_output("y", type_info::tensor_of(element_type::float32, shape{2, 4, 32, 32}));
  return m;
}

std::vector<zoo_case> cases() {
  zoo::transformer_config cfg;
  cfg.layers = 2;
  return {
      {"convnet", with_static_input(zoo::make_convnet({8, 16}, 32, 10), {2, 3, 32, 32}),
       {{"image", zoo::random_tensor({2, 3, 32, 32}, 5, 1.0f)}}},
      {"mlp", with_static_input(zoo::make_mlp({64, 128, 96, 10}), {4, 64}), {{"input", zoo::random_tensor({4, 64}, 3, 1.0f)}}},
      {"transformer", with_static_input(zoo::make_transformer(cfg), {2, 16}), {{"input_ids", ids_tensor(2, 16)}}},
      {"upsampling", upsampling(), {{"x", zoo::random_tensor({2, 3, 16, 16}, 113, 1.0f)}}},
  };
}

}  // namespace

TEST_CASE("oneDNN EP context: written once, restored without optimising or reordering weights, same outputs") {
  for (auto& c : cases()) {
    for (int embed : {0, 1}) {
      CAPTURE(std::string(c.name));
      CAPTURE(embed);
      test::temp_dir dir;
      const auto src = dir / (std::string(c.name) + ".onnx");
      REQUIRE(save_model(c.m, src).is_ok());
      auto gen = dnnl_session::create(src, options(embed));
      REQUIRE_MESSAGE(gen.is_ok(), gen.status().message());
      REQUIRE(gen->ep_context().nodes_written >= 1);
      auto want = gen->run(c.feeds);
      REQUIRE_MESSAGE(want.is_ok(), want.status().message());
      const auto ctx = dir / (std::string(c.name) + "_ctx.onnx");
      CHECK(fs::is_regular_file(ctx));
      CHECK(fs::exists(dir / (std::string(c.name) + "_dnnl.bin")) == (embed == 0));

      auto cm = load_model(ctx);
      REQUIRE(cm.is_ok());
      for (node_id n = 0; n < cm->graph.node_count(); ++n) {
        const auto& nd = cm->graph.node(n);
        if (nd.op_type != "EPContext") continue;
        auto a = read_attributes<ep_context_attributes>(nd.attributes, nd.name);
        REQUIRE(a.is_ok());
        CHECK(a->source == "DnnlExecutionProvider");
        CHECK(a->ep_sdk_version == dnnl_ep::library_version());
        CHECK(a->hardware_architecture == dnnl_ep::cpu_isa());
      }

      const auto reorders = dnnl_ep::weight_reorder_count();
      session_options no_compile = options();
      no_compile.set_config(config_keys::disable_model_compile, "1");
      auto loaded = dnnl_session::create(ctx, no_compile);
      REQUIRE_MESSAGE(loaded.is_ok(), loaded.status().message());
      CHECK(loaded->ep_context().nodes_loaded == gen->ep_context().nodes_written);
      CHECK(dnnl_ep::weight_reorder_count() == reorders);  // the weights came in their final layout
      auto got = loaded->run(c.feeds);
      REQUIRE_MESSAGE(got.is_ok(), got.status().message());
      CHECK(dnnl_ep::weight_reorder_count() == reorders);
      same_outputs(*got, *want);
    }
  }
}

TEST_CASE("oneDNN EP context: another oneDNN version or a CPU ISA this machine lacks is refused, saying both") {
  test::temp_dir dir;
  auto c = cases().front();
  REQUIRE(save_model(c.m, dir / "convnet.onnx").is_ok());
  REQUIRE(dnnl_session::create(dir / "convnet.onnx", options(0)).is_ok());
  auto bin = ep_context_binary::open(dir / "convnet_dnnl.bin");
  REQUIRE(bin.is_ok());
  // The same contexts, re-recorded as if made by another oneDNN or for another ISA.
  const auto rewrite = [&](const std::string& sdk, const std::string& isa) {
    ep_context_builder b(bin->provider(), sdk, isa);
    for (const auto& t : bin->tensors()) b.add_tensor(t.name, t.type, t.shape, t.data);
    for (const auto& g : bin->graphs())
      REQUIRE(b.add_graph(g.name, g.inputs, g.outputs, std::vector<std::byte>(g.payload.begin(), g.payload.end()), g.tensors)
                  .is_ok());
    REQUIRE(b.write(dir / "convnet_dnnl.bin", true).is_ok());
  };
  const auto original = test::read_file(dir / "convnet_dnnl.bin");
  session_options so;
  rewrite("1.0.0", dnnl_ep::cpu_isa());
  auto v = dnnl_session::create(dir / "convnet_ctx.onnx", so);
  REQUIRE_FALSE(v.is_ok());
  CHECK(v.status().code() == errc::invalid_graph);
  CHECK(v.status().message().find("SDK version '1.0.0'") != std::string::npos);
  CHECK(v.status().message().find("'" + dnnl_ep::library_version() + "'") != std::string::npos);
  rewrite(dnnl_ep::library_version(), "avx512_core_amx_future");
  auto h = dnnl_session::create(dir / "convnet_ctx.onnx", so);
  REQUIRE_FALSE(h.is_ok());
  CHECK(h.status().code() == errc::invalid_graph);
  CHECK(h.status().message().find("hardware architecture 'avx512_core_amx_future'") != std::string::npos);
  CHECK(h.status().message().find("'" + dnnl_ep::cpu_isa() + "'") != std::string::npos);
  CHECK(dnnl_session::check_compatibility(dir / "convnet_ctx.onnx").code() == errc::invalid_graph);
  // An older ISA than this machine's is fine.
  CHECK(dnnl_ep::isa_supported("sse41"));
  CHECK_FALSE(dnnl_ep::isa_supported("nonsense"));
  test::write_file(dir / "convnet_dnnl.bin", original);
  CHECK(dnnl_session::check_compatibility(dir / "convnet_ctx.onnx").is_ok());
}

TEST_CASE("oneDNN EP context: a damaged record is invalid_graph, never a crash") {
  test::temp_dir dir;
  auto c = cases()[1];
  REQUIRE(save_model(c.m, dir / "mlp.onnx").is_ok());
  REQUIRE(dnnl_session::create(dir / "mlp.onnx", options(0)).is_ok());
  auto bin = ep_context_binary::open(dir / "mlp_dnnl.bin");
  REQUIRE(bin.is_ok());
  REQUIRE(bin->graphs().size() == 1);
  const auto& g0 = bin->graphs()[0];
  // Truncations and flipped bytes of the payload, re-hashed so that only the record itself is wrong.
  std::size_t refused = 0, tried = 0;
  for (std::size_t cut = 0; cut < g0.payload.size(); cut += std::max<std::size_t>(1, g0.payload.size() / 40)) {
    for (int mode = 0; mode < 2; ++mode) {
      std::vector<std::byte> p(g0.payload.begin(), g0.payload.end());
      if (mode == 0) p.resize(cut);
      else p[cut] ^= std::byte{0xff};
      ep_context_builder b(bin->provider(), bin->sdk_version(), bin->hardware_architecture());
      for (const auto& t : bin->tensors()) b.add_tensor(t.name, t.type, t.shape, t.data);
      REQUIRE(b.add_graph(g0.name, g0.inputs, g0.outputs, p, g0.tensors).is_ok());
      REQUIRE(b.write(dir / "mlp_dnnl.bin", true).is_ok());
      auto s = dnnl_session::create(dir / "mlp_ctx.onnx", options());
      ++tried;
      if (!s.is_ok()) {
        ++refused;
        CHECK(s.status().code() == errc::invalid_graph);
      }
    }
  }
  INFO(refused, " of ", tried, " damaged records refused");
  CHECK(refused * 2 >= tried);  // every truncation; flips of names or values may still describe a valid plan
}

TEST_CASE("oneDNN EP context: each weight is stored once, laid out, other layouts are reordered back from it") {
  struct ignore_guard {
    ignore_guard() { dnnl_ep::set_ignore_stored_layouts(true); }
    ~ignore_guard() { dnnl_ep::set_ignore_stored_layouts(false); }
  };
  for (auto& c : cases()) {
    CAPTURE(std::string(c.name));
    test::temp_dir dir;
    const auto src = dir / (std::string(c.name) + ".onnx");
    REQUIRE(save_model(c.m, src).is_ok());
    std::size_t weight_bytes = 0;
    for (value_id v : c.m.graph.initializers()) weight_bytes += c.m.graph.value(v).initializer->byte_size();
    auto gen = dnnl_session::create(src, options(0));
    REQUIRE_MESSAGE(gen.is_ok(), gen.status().message());
    auto want = gen->run(c.feeds);
    REQUIRE(want.is_ok());
    auto bin = ep_context_binary::open(dir / (std::string(c.name) + "_dnnl.bin"));
    REQUIRE(bin.is_ok());
    std::size_t laid = 0, plain = 0;
    for (const auto& t : bin->tensors()) (t.name.starts_with("laid") ? laid : plain) += t.data.size();
    INFO("model weights ", weight_bytes, " B; context: laid out ", laid, " B, as in the model ", plain, " B");
    CHECK(laid >= weight_bytes / 2);
    CHECK(plain * 3 < weight_bytes);  // the big weights are there once, laid out, and not also as in the model

    const auto ctx = dir / (std::string(c.name) + "_ctx.onnx");
    const auto reorders = dnnl_ep::weight_reorder_count();
    ignore_guard g;
    auto loaded = dnnl_session::create(ctx, options());
    REQUIRE_MESSAGE(loaded.is_ok(), loaded.status().message());
    CHECK(dnnl_ep::weight_reorder_count() > reorders);  // planned anew from the weights reordered back
    auto got = loaded->run(c.feeds);
    REQUIRE_MESSAGE(got.is_ok(), got.status().message());
    same_outputs(*got, *want);
  }
}

TEST_CASE("oneDNN option winograd = true: Winograd convolutions, a larger context that restores as it was compiled") {
  // The convnet's 3x3 convolutions on 32x32 maps take oneDNN's Winograd kernels when asked (about 2x their weights).
  auto c = cases().front();
  REQUIRE(std::string(c.name) == "convnet");
  CHECK_FALSE(dnnl_options{}.winograd);  // off by default
  test::temp_dir on_dir, off_dir;
  REQUIRE(save_model(c.m, on_dir / "convnet.onnx").is_ok());
  REQUIRE(save_model(c.m, off_dir / "convnet.onnx").is_ok());
  auto on = dnnl_session::create(on_dir / "convnet.onnx", options(0),
                                 {dnnl_provider(dnnl_options{.winograd = true}), cpu_provider{}});
  REQUIRE_MESSAGE(on.is_ok(), on.status().message());
  auto off = dnnl_session::create(off_dir / "convnet.onnx", options(0));
  REQUIRE_MESSAGE(off.is_ok(), off.status().message());
  const auto on_bytes = fs::file_size(on_dir / "convnet_dnnl.bin"), off_bytes = fs::file_size(off_dir / "convnet_dnnl.bin");
  INFO("context binary with Winograd ", on_bytes, " B, without ", off_bytes, " B");
  CHECK(off_bytes < on_bytes);
  auto want_on = on->run(c.feeds);
  auto want_off = off->run(c.feeds);
  REQUIRE(want_on.is_ok());
  REQUIRE(want_off.is_ok());
  // Two algorithms, one result (within float rounding).
  EPSTACK_CHECK_CLOSE((*want_off)[0], (*want_on)[0], 1e-4, 1e-4);

  // Restored by a provider with the default options, the context keeps the Winograd convolutions its weights were
  // laid out for: nothing is reordered, the outputs are the ones it was compiled with.
  const auto reorders = dnnl_ep::weight_reorder_count();
  session_options no_compile = options();
  no_compile.set_config(config_keys::disable_model_compile, "1");
  auto loaded = dnnl_session::create(on_dir / "convnet_ctx.onnx", no_compile);
  REQUIRE_MESSAGE(loaded.is_ok(), loaded.status().message());
  auto got = loaded->run(c.feeds);
  REQUIRE_MESSAGE(got.is_ok(), got.status().message());
  CHECK(dnnl_ep::weight_reorder_count() == reorders);
  same_outputs(*got, *want_on);
}

namespace {

/// Flips a byte in the middle of the largest laid-out weight of context binary `path`; returns that tensor's name.
std::string damage_largest_weight(const fs::path& path) {
  auto bin = ep_context_binary::open(path);
  REQUIRE(bin.is_ok());
  std::size_t pick = 0;
  for (std::size_t i = 0; i < bin->tensors().size(); ++i)
    if (bin->tensors()[i].name.starts_with("laid") && bin->tensors()[i].data.size() > bin->tensors()[pick].data.size())
      pick = i;
  const auto& t = bin->tensors()[pick];
  REQUIRE(t.name.starts_with("laid"));
  std::string b = test::read_file(path);
  std::uint64_t data_off = 0;
  for (int k = 7; k >= 0; --k) data_off = (data_off << 8) | static_cast<unsigned char>(b[32 + static_cast<std::size_t>(k)]);
  const auto at = static_cast<std::size_t>(data_off) +
                  static_cast<std::size_t>(t.data.data() - bin->tensors()[0].data.data()) + t.data.size() / 2;
  b[at] = static_cast<char>(b[at] ^ 0x10);
  const std::string name = t.name;
  test::write_file(path, b);
  return name;
}

}  // namespace

TEST_CASE("oneDNN EP context: weights are verified before their first use, not while loading, damage fails runs") {
  int replans_refused = 0;
  for (auto& c : cases()) {
    CAPTURE(std::string(c.name));
    test::temp_dir dir;
    const auto src = dir / (std::string(c.name) + ".onnx");
    REQUIRE(save_model(c.m, src).is_ok());
    auto gen = dnnl_session::create(src, options(0));
    REQUIRE(gen.is_ok());
    auto want = gen->run(c.feeds);
    REQUIRE(want.is_ok());
    const auto ctx = dir / (std::string(c.name) + "_ctx.onnx");
    const auto bin = dir / (std::string(c.name) + "_dnnl.bin");
    const auto damaged = damage_largest_weight(bin);
    const auto names_it = [&](const Status& st) {
      CHECK(st.code() == errc::invalid_graph);
      CHECK(st.message().find("corrupted: tensor '" + damaged + "'") != std::string::npos);
      CHECK(st.message().find(bin.filename().string()) != std::string::npos);
    };

    // Loading reads no weight: the session is created; every run fails, naming binary and tensor, from any thread.
    auto s = dnnl_session::create(ctx, options());
    REQUIRE_MESSAGE(s.is_ok(), s.status().message());
    for (int k = 0; k < 2; ++k) {
      auto r = s->run(c.feeds);
      REQUIRE_FALSE(r.is_ok());
      names_it(r.status());
    }
    std::vector<Status> results(4);
    {
      std::vector<std::jthread> threads;
      for (auto& st : results)
        threads.emplace_back([&] {
          auto r = s->run(c.feeds);
          st = r.is_ok() ? Status() : r.status();
        });
    }
    for (const auto& st : results) names_it(st);

    // Asked to verify everything while loading, or to check compatibility: refused up front.
    session_options now = options();
    now.set_config(config_keys::ep_context_verify, "on_load");
    auto eager = dnnl_session::create(ctx, now);
    REQUIRE_FALSE(eager.is_ok());
    names_it(eager.status());
    names_it(dnnl_session::check_compatibility(ctx));

    // A plan for other layouts than the stored ones reorders a blocked weight back from its laid-out copy, and
    // verifies it before reading: refused. (A Winograd weight is laid out anew from the plain copy the context keeps
    // beside it: the damaged bytes are never read, and the outputs are right.)
    dnnl_ep::set_ignore_stored_layouts(true);
    auto replanned = dnnl_session::create(ctx, options());
    dnnl_ep::set_ignore_stored_layouts(false);
    if (replanned.is_ok()) {
      auto r = replanned->run(c.feeds);
      REQUIRE_MESSAGE(r.is_ok(), r.status().message());
      same_outputs(*r, *want);
    } else {
      names_it(replanned.status());
      ++replans_refused;
    }
  }
  CHECK(replans_refused >= 2);  // the MLP's and the transformer's weights are blocked
}

TEST_CASE("oneDNN EP context: first runs from several threads at once verify the weights once and all succeed") {
  auto c = cases()[2];  // the transformer: many weights
  test::temp_dir dir;
  const auto src = dir / "transformer.onnx";
  REQUIRE(save_model(c.m, src).is_ok());
  auto gen = dnnl_session::create(src, options(0));
  REQUIRE(gen.is_ok());
  auto want = gen->run(c.feeds);
  REQUIRE(want.is_ok());
  for (const char* when : {"on_use", "on_load"}) {
    CAPTURE(std::string(when));
    session_options so = options();
    so.set_config(config_keys::ep_context_verify, when);
    auto s = dnnl_session::create(dir / "transformer_ctx.onnx", so);
    REQUIRE_MESSAGE(s.is_ok(), s.status().message());
    std::vector<Result<std::vector<tensor>>> got(4, Status(errc::fail, "not run"));
    {
      std::vector<std::jthread> threads;
      for (auto& g : got) threads.emplace_back([&] { g = s->run(c.feeds); });
    }
    for (auto& g : got) {
      REQUIRE_MESSAGE(g.is_ok(), g.status().message());
      same_outputs(*g, *want);
    }
  }
}

TEST_CASE("oneDNN EP context: the same model and options give byte-identical _ctx.onnx and binary") {
  for (auto& c : cases()) {
    CAPTURE(std::string(c.name));
    test::temp_dir one, two;
    for (const auto* dir : {&one, &two}) {
      const auto src = *dir / (std::string(c.name) + ".onnx");
      REQUIRE(save_model(c.m, src).is_ok());
      auto gen = dnnl_session::create(src, options(0));
      REQUIRE_MESSAGE(gen.is_ok(), gen.status().message());
    }
    for (const std::string& f : {std::string(c.name) + "_ctx.onnx", std::string(c.name) + "_dnnl.bin"}) {
      CAPTURE(f);
      REQUIRE(fs::is_regular_file(one / f));
      CHECK(fs::file_size(one / f) == fs::file_size(two / f));
      CHECK(test::read_file(one / f) == test::read_file(two / f));
    }
  }
}

TEST_CASE("oneDNN EP context, weightless: no weights in the binary, laid out from the source model at load, same outputs") {
  for (auto& c : cases()) {
    CAPTURE(std::string(c.name));
    test::temp_dir full_dir, dir;
    const auto full_src = full_dir / "m.onnx";
    const auto src = dir / "m.onnx";
    REQUIRE(save_model(c.m, full_src).is_ok());
    REQUIRE(save_model(c.m, src).is_ok());
    auto full = dnnl_session::create(full_src, options(0));
    REQUIRE_MESSAGE(full.is_ok(), full.status().message());
    auto gen_opts = options(0);
    gen_opts.set_config(config_keys::ep_enable_weightless_mode, "2");
    // These models are small: every weight the optimiser derived is referenced too (a load replays the optimisation).
    gen_opts.set_config(config_keys::weightless_derived_min_bytes, "0");
    auto gen = dnnl_session::create(src, gen_opts);
    REQUIRE_MESSAGE(gen.is_ok(), gen.status().message());
    CHECK(gen->ep_context().weight_bytes_referenced > 0);
    // What is left in the binary: constants the optimiser derived (folded shapes, fused biases), never a laid-out copy.
    CHECK(gen->ep_context().weight_bytes_stored < full->ep_context().weight_bytes_stored / 4);
    const auto full_size = fs::file_size(full_dir / "m_dnnl.bin"), size = fs::file_size(dir / "m_dnnl.bin");
    MESSAGE(std::string(c.name), ": context binary ", full_size, " bytes, weightless ", size, " bytes (",
            gen->ep_context().weight_bytes_referenced, " bytes referenced)");
    CHECK(size * 4 < full_size);
    if (std::string(c.name) == "convnet") {
      // By default the convnet's folded weights (all small) stay in the binary, and a load optimises nothing.
      test::temp_dir small_dir;
      REQUIRE(save_model(c.m, small_dir / "m.onnx").is_ok());
      auto small_opts = options(0);
      small_opts.set_config(config_keys::ep_enable_weightless_mode, "2");
      auto small = dnnl_session::create(small_dir / "m.onnx", small_opts);
      REQUIRE(small.is_ok());
      CHECK(small->ep_context().weight_bytes_stored > gen->ep_context().weight_bytes_stored);
      auto back = dnnl_session::create(small_dir / "m_ctx.onnx", options());
      REQUIRE_MESSAGE(back.is_ok(), back.status().message());
      auto out = back->run(c.feeds);
      REQUIRE(out.is_ok());
      same_outputs(*out, *full->run(c.feeds));
    }
    auto want = full->run(c.feeds);
    REQUIRE(want.is_ok());

    const auto reorders = dnnl_ep::weight_reorder_count();
    auto loaded = dnnl_session::create(dir / "m_ctx.onnx", options());
    REQUIRE_MESSAGE(loaded.is_ok(), loaded.status().message());
    CHECK(loaded->ep_context().nodes_loaded == gen->ep_context().nodes_written);
    CHECK(loaded->ep_context().source_model_read == src);
    auto got = loaded->run(c.feeds);
    REQUIRE_MESSAGE(got.is_ok(), got.status().message());
    same_outputs(*got, *want);
    if (std::string(c.name) == "convnet") CHECK(dnnl_ep::weight_reorder_count() > reorders);  // laid out at load

    // Another model's weights under the same names (every float weight changed a little): refused, naming one.
    auto other = c.m;
    for (value_id v = 0; v < other.graph.value_count(); ++v)
      if (auto& init = other.graph.value(v).initializer; init && init->type() == element_type::float32 && init->element_count() > 16) {
        reinterpret_cast<float*>(init->mutable_data())[0] += 1.0f;
      }
    REQUIRE(save_model(other, src).is_ok());
    auto refused = dnnl_session::create(dir / "m_ctx.onnx", options());
    REQUIRE_FALSE(refused.is_ok());
    CHECK(refused.status().code() == errc::invalid_graph);
    INFO(refused.status().message());
    CHECK(refused.status().message().find("differs from the one this weightless context was compiled against") !=
          std::string::npos);
  }
}
