// The deployment model (issue 20): written by compile_model with compile_format::deploy (and the session option),
// read back by create_deployed on the full CPU provider, on selective ones and on a stack with an EP-context provider,
// giving the ONNX session's answers; every defect of a file refused with invalid_graph naming the file, never a crash.
#include "../ep_context/fixtures.hpp"

#include <epstack/deploy/deployment.hpp>

#include "../../src/deploy/deploy_format.hpp"
#include "deploy_generated.h"

#include <cstring>
#include <map>

using namespace epstack;
using namespace epstack::test::ctx;

namespace {

// Bytes kept 64-byte aligned (a deployment model is read in place).
struct aligned_bytes {
  tensor storage;
  explicit aligned_bytes(std::span<const std::byte> b)
      : storage(tensor::uninitialized(element_type::uint8, std::array{static_cast<std::int64_t>(b.size())})) {
    if (!b.empty()) std::memcpy(storage.mutable_data(), b.data(), b.size());
  }
  [[nodiscard]] std::span<const std::byte> span() const { return storage.bytes(); }
};

Result<deployment> read_bytes(std::span<const std::byte> b) {
  auto keep = std::make_shared<aligned_bytes>(b);
  const auto view = keep->span();
  return read_deployment(view, keep, "test.deploy");
}

std::vector<std::byte> compile_to_bytes(const fs::path& source, const session_options& so = {}) {
  compile_options co;
  co.input_path = source;
  co.format = compile_format::deploy;
  co.session = so;
  std::vector<std::byte> bytes;
  co.output_buffer = &bytes;
  auto r = compile_model<cpu_provider>(co);
  REQUIRE_MESSAGE(r.is_ok(), r.status().message());
  return bytes;
}

std::vector<tensor> run_with(const auto& s, const std::vector<named_tensor>& feeds) {
  auto out = s.run(feeds);
  REQUIRE_MESSAGE(out.is_ok(), out.status().message());
  return std::move(*out);
}

void check_identical(const std::vector<tensor>& a, const std::vector<tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("output ", i);
    EPSTACK_CHECK_CLOSE(a[i], b[i], 0.0, 0.0);
  }
}

std::set<std::string> op_types(const graph& g) {
  std::set<std::string> r;
  for (node_id n = 0; n < g.node_count(); ++n) r.insert(g.node(n).op_type);
  return r;
}

}  // namespace

TEST_CASE("A deployment model runs as its ONNX model does, on the full CPU provider and on a selective one") {
  test::temp_dir dir;
  const auto src = write_model(zoo::make_mlp({16, 32, 32, 8}), dir / "mlp.onnx");
  session_options so;
  so.add_free_dimension_override("batch", 3);
  compile_options co;
  co.input_path = src;
  co.output_path = dir / "mlp.deploy";
  co.format = compile_format::deploy;
  co.session = so;
  auto rep = compile_model<cpu_provider>(co);
  REQUIRE_MESSAGE(rep.is_ok(), rep.status().message());
  CHECK(rep->model_written == fs::absolute(dir / "mlp.deploy"));
  CHECK(rep->binaries_written.empty());
  CHECK(is_deployment_file(dir / "mlp.deploy"));
  CHECK_FALSE(is_deployment_file(src));
  // Nothing but the model was left in the folder (the working folder is gone).
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++files;
  CHECK(files == 2);

  const std::vector<named_tensor> feeds{{"input", zoo::random_tensor({3, 16}, 5, 1.0f)}};
  auto full = session<cpu_provider>::create(src, so);
  REQUIRE(full.is_ok());
  const auto want = run_with(*full, feeds);

  auto d = session<cpu_provider>::create_deployed(dir / "mlp.deploy");
  REQUIRE_MESSAGE(d.is_ok(), d.status().message());
  check_identical(run_with(*d, feeds), want);
  // The graph as compiled: its inputs fixed by the override, no optimisation run again, every node on the CPU.
  REQUIRE(d->inputs().size() == 1);
  CHECK(d->inputs()[0].type.to_string() == "float[3,16]");
  CHECK(d->get_model().graph.node_count() == full->get_model().graph.node_count());
  CHECK(d->plan().main.partitions.size() == d->get_model().graph.node_count());
  CHECK(op_types(d->get_model().graph) == std::set<std::string>{"Gemm", "Relu"});
  // `create` recognises the format too.
  auto by_create = session<cpu_provider>::create(dir / "mlp.deploy");
  REQUIRE(by_create.is_ok());
  check_identical(run_with(*by_create, feeds), want);

  // A selective provider with exactly the model's kernels runs it; one without Relu's kernel names the node.
  auto sel = session<basic_cpu_provider<ops::gemm, ops::relu>>::create_deployed(dir / "mlp.deploy");
  REQUIRE_MESSAGE(sel.is_ok(), sel.status().message());
  check_identical(run_with(*sel, feeds), want);
  auto lacking = session<basic_cpu_provider<ops::gemm>>::create_deployed(dir / "mlp.deploy");
  REQUIRE_FALSE(lacking.is_ok());
  CHECK(lacking.code() == errc::not_implemented);
  CHECK(lacking.status().message().find("no kernel for node '/layer0/Relu' (Relu)") != std::string::npos);
  CHECK(lacking.status().message().find("mlp.deploy") != std::string::npos);
  // Free dimension overrides would change a compiled model: refused.
  auto overridden = session<cpu_provider>::create_deployed(dir / "mlp.deploy", so);
  REQUIRE_FALSE(overridden.is_ok());
  CHECK(overridden.code() == errc::invalid_argument);
}

TEST_CASE("The blocked-layout convnet and the transformer deploy with their answers, from bytes read in place or copied") {
  test::temp_dir dir;
  const std::vector<std::pair<model, std::vector<named_tensor>>> cases = [] {
    std::vector<std::pair<model, std::vector<named_tensor>>> r;
    r.emplace_back(zoo::make_convnet({16, 32}, 16), std::vector<named_tensor>{{"image", zoo::random_tensor({2, 3, 16, 16}, 3, 1.0f)}});
    for (value_id v : r.back().first.graph.inputs())  // a static batch: the blocked layout needs static shapes
      r.back().first.graph.value(v).type.dims->dims()[0] = dimension(2);
    tensor ids(element_type::int64, {1, 12});
    for (std::int64_t i = 0; i < 12; ++i) ids.typed<std::int64_t>()[i] = (i * 37) % 500;
    r.emplace_back(zoo::make_transformer(), std::vector<named_tensor>{{"input_ids", ids}});
    return r;
  }();
  for (std::size_t c = 0; c < cases.size(); ++c) {
    CAPTURE(c);
    const auto src = write_model(cases[c].first, dir / ("m" + std::to_string(c) + ".onnx"));
    auto full = session<cpu_provider>::create(src);
    REQUIRE(full.is_ok());
    const auto want = run_with(*full, cases[c].second);
    const auto bytes = compile_to_bytes(src);
    REQUIRE(is_deployment(bytes));
    if (c == 0) {
      // The convolutions run in the blocked layout, as the ONNX session's do.
      auto dm = read_bytes(bytes);
      REQUIRE(dm.is_ok());
      bool blocked = false;
      for (node_id n = 0; n < dm->m.graph.node_count(); ++n) blocked = blocked || dm->m.graph.node(n).domain == nchwc_domain;
      CHECK(blocked);
    }
    // From bytes: copied (the default), or read in place from aligned bytes the caller keeps.
    auto copied = session<cpu_provider>::create_deployed(bytes);
    REQUIRE_MESSAGE(copied.is_ok(), copied.status().message());
    check_identical(run_with(*copied, cases[c].second), want);
    aligned_bytes kept(bytes);
    session_options direct;
    direct.set_config(config_keys::use_model_bytes_directly, "1");
    auto in_place = session<cpu_provider>::create_deployed(kept.span(), direct);
    REQUIRE(in_place.is_ok());
    check_identical(run_with(*in_place, cases[c].second), want);
    // Bytes at an address that is not 64-byte aligned are copied even then; read_deployment refuses them.
    std::vector<std::byte> shifted(bytes.size() + 128);
    std::size_t off = 0;
    while (reinterpret_cast<std::uintptr_t>(shifted.data() + off) % 64 != 1) ++off;
    std::memcpy(shifted.data() + off, bytes.data(), bytes.size());
    const std::span<const std::byte> odd(shifted.data() + off, bytes.size());
    auto s = session<cpu_provider>::create_deployed(odd, direct);
    REQUIRE(s.is_ok());
    check_identical(run_with(*s, cases[c].second), want);
    auto r = read_deployment(odd, nullptr);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.code() == errc::invalid_argument);
  }
}

TEST_CASE("If and Loop bodies deploy with their plans, outer values and EPContext nodes inside them") {
  const model m = flow_model();

  test::temp_dir dir;
  const auto src = write_model(m, dir / "flow.onnx");
  auto cpu = session<>::create(src);
  REQUIRE(cpu.is_ok());
  const auto want = run_flow(*cpu);

  SUBCASE("the CPU provider alone") {
    const auto bytes = compile_to_bytes(src);
    auto s = session<cpu_provider>::create_deployed(bytes);
    REQUIRE_MESSAGE(s.is_ok(), s.status().message());
    check_identical(run_flow(*s), want);
    CHECK(s->plan().main.subgraphs.size() == 3);
  }
  SUBCASE("with a provider whose partitions are EPContext nodes, inside the bodies too") {
    compile_options co;
    co.input_path = src;
    co.output_path = dir / "flow.deploy";
    co.format = compile_format::deploy;
    toy gen_provider;
    auto rep = compile_model_for<toy_session>(co, {gen_provider, cpu_provider{}});
    REQUIRE_MESSAGE(rep.is_ok(), rep.status().message());
    CHECK(rep->nodes_written == 5);
    CHECK(*gen_provider.compiled == 5);
    toy load_provider;
    auto s = toy_session::create_deployed(dir / "flow.deploy", {}, {load_provider, cpu_provider{}});
    REQUIRE_MESSAGE(s.is_ok(), s.status().message());
    CHECK(*load_provider.compiled == 0);  // restored, nothing compiled
    CHECK(*load_provider.restored == 5);
    CHECK(s->ep_context().nodes_loaded == 5);
    check_close(run_flow(*s), want);
    // A stack without the provider the file names is refused, naming the node and the provider.
    auto cpu_only = session<cpu_provider>::create_deployed(dir / "flow.deploy");
    REQUIRE_FALSE(cpu_only.is_ok());
    CHECK(cpu_only.code() == errc::not_implemented);
    CHECK(cpu_only.status().message().find("ToyExecutionProvider") != std::string::npos);
    // The provider's binaries are checked as EPContext loading checks them: another SDK version is refused.
    toy other_sdk;
    other_sdk.sdk = "2.0";
    auto old = toy_session::create_deployed(dir / "flow.deploy", {}, {other_sdk, cpu_provider{}});
    REQUIRE_FALSE(old.is_ok());
    CHECK(old.code() == errc::invalid_graph);
    CHECK(old.status().message().find("SDK version '1.0'") != std::string::npos);
  }
}

TEST_CASE("Every attribute kind, element type and value type comes back from the format as written") {
  model m;
  m.ir_version = 10;
  m.opsets = {{"", 21}, {"test.domain", 1}};
  m.producer_name = "epstack-test";
  m.metadata = {{"k", "v"}};
  graph& g = m.graph;
  g.set_name("all");
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{dimension("n"), 4}));
  g.add_input("s", type_info::sequence_of(type_info::tensor_of(element_type::int64, shape{dimension(-1)})));
  g.add_input("o", type_info::optional_of(type_info::tensor_of(element_type::float16, std::nullopt)));
  g.add_input("mp", type_info::map_of(element_type::string, type_info::tensor_of(element_type::float32, shape{})));
  g.add_initializer("half", tensor::from<float16>({3}, {float16(1.5f), float16(-2.0f), float16(0.25f)}));
  tensor packed(element_type::int4, {5});  // 3 bytes
  std::memcpy(packed.mutable_data(), "\x21\x43\x05", 3);
  g.add_initializer("packed", packed);
  g.add_initializer("words", tensor::from<std::string>({2}, {std::string("a\0b", 3), std::string("word")}));
  g.add_initializer("empty", tensor(element_type::float32, {0, 4}));
  g.add_initializer("flag", tensor::scalar(true));
  graph sub("sub");
  sub.add_node(op("inner", "Identity"), {"x"}, {"sub_y"});
  sub.add_output("sub_y", type_info::tensor_of(element_type::float32, std::nullopt));
  sub.node(0).metadata.emplace_back(std::string(deployment_provider_key), "CPUExecutionProvider");
  graph sub2 = sub;
  sub2.set_name("sub2");
  attribute_list a;
  a.set("f", 2.5f);
  a.set("i", std::int64_t{-7});
  a.set("s", std::string("bytes\0here", 10));
  a.set("t", zoo::random_tensor({2, 2}, 3, 1.0f));
  a.set("g", make_subgraph(sub));
  a.set("fs", std::vector<float>{1.0f, -0.5f});
  a.set("is", std::vector<std::int64_t>{1, 2, 3});
  a.set("ss", std::vector<std::string>{"x", "", "yz"});
  a.set("ts", std::vector<tensor>{tensor::scalar<std::int32_t>(4), tensor::scalar(2.0)});
  a.set("gs", std::vector<subgraph>{make_subgraph(sub2)});
  sparse_tensor sp{zoo::random_tensor({2}, 4, 1.0f), tensor::from<std::int64_t>({2}, {1, 3}), {4}};
  sp.values.set_name("sp");
  a.set("sp", sp);
  a.set("sps", std::vector<sparse_tensor>{sp});
  a.set("tp", type_info::tensor_of(element_type::bfloat16, shape{2}));
  a.set("tps", std::vector<type_info>{type_info::sequence_of(type_info::tensor_of(element_type::int8, shape{}))});
  node custom = op("custom", "Custom");
  custom.domain = "test.domain";
  custom.since_version = 1;
  custom.attributes = a;
  custom.metadata.emplace_back(std::string(deployment_provider_key), "CPUExecutionProvider");
  const node_id n = g.add_node(std::move(custom), {"x", "", "half", "packed", "words", "empty", "flag", "s", "o", "mp"}, {"y", ""});
  g.add_implicit_input(n, "x");
  g.add_output("y", type_info::tensor_of(element_type::float32, shape{dimension("n"), 4}));
  REQUIRE(g.problems().empty());

  const std::vector<std::string> providers{"CPUExecutionProvider"};
  auto bytes = serialize_deployment(m, providers);
  REQUIRE_MESSAGE(bytes.is_ok(), bytes.status().message());
  auto d = read_bytes(*bytes);
  REQUIRE_MESSAGE(d.is_ok(), d.status().message());
  const model& r = d->m;
  CHECK(r.ir_version == 10);
  CHECK(r.opsets == m.opsets);
  CHECK(r.producer_name == "epstack-test");
  CHECK(r.metadata == m.metadata);
  CHECK(d->providers == providers);
  const graph& rg = r.graph;
  CHECK(rg.name() == "all");
  REQUIRE(rg.value_count() == g.value_count());
  for (value_id v = 0; v < g.value_count(); ++v) {
    INFO(g.value(v).name);
    CHECK(rg.value(v).name == g.value(v).name);
    CHECK(rg.value(v).type == g.value(v).type);
    CHECK(rg.value(v).is_graph_input == g.value(v).is_graph_input);
    CHECK(rg.value(v).is_graph_output == g.value(v).is_graph_output);
    REQUIRE(rg.value(v).initializer.has_value() == g.value(v).initializer.has_value());
    if (g.value(v).initializer) CHECK(rg.value(v).initializer->same_content(*g.value(v).initializer));
  }
  REQUIRE(rg.node_count() == 1);
  const node& rn = rg.node(0);
  CHECK(rn.op_type == "Custom");
  CHECK(rn.domain == "test.domain");
  CHECK(rn.since_version == 1);
  CHECK(rn.inputs.size() == 10);
  CHECK(rn.inputs[1] == no_id);
  CHECK(rn.outputs.size() == 2);
  CHECK(rn.outputs[1] == no_id);
  CHECK(rn.implicit_inputs.size() == 1);
  CHECK(rn.metadata == std::vector<std::pair<std::string, std::string>>{{std::string(deployment_provider_key), "CPUExecutionProvider"}});
  REQUIRE(rn.attributes.size() == a.size());
  for (const auto& want : a) {
    INFO(want.name);
    const auto* got = rn.attributes.find(want.name);
    REQUIRE(got != nullptr);
    CHECK(got->kind() == want.kind());
    if (const auto* t = std::get_if<tensor>(&want.value)) CHECK(std::get<tensor>(got->value).same_content(*t));
    else if (const auto* sg = std::get_if<subgraph>(&want.value)) {
      const graph& gg = *std::get<subgraph>(got->value);
      CHECK(gg.name() == (*sg)->name());
      CHECK(gg.node_count() == 1);
      CHECK(gg.node(0).op_type == "Identity");
    } else if (const auto* ts = std::get_if<std::vector<tensor>>(&want.value)) {
      const auto& gt = std::get<std::vector<tensor>>(got->value);
      REQUIRE(gt.size() == ts->size());
      for (std::size_t i = 0; i < gt.size(); ++i) CHECK(gt[i].same_content((*ts)[i]));
    } else if (const auto* gs = std::get_if<std::vector<subgraph>>(&want.value)) {
      const auto& gg = std::get<std::vector<subgraph>>(got->value);
      REQUIRE(gg.size() == gs->size());
      CHECK(gg[0]->name() == "sub2");
    } else if (const auto* s = std::get_if<sparse_tensor>(&want.value)) {
      const auto& gs2 = std::get<sparse_tensor>(got->value);
      CHECK(gs2.values.same_content(s->values));
      CHECK(gs2.indices.same_content(s->indices));
      CHECK(gs2.dims == s->dims);
    } else if (std::holds_alternative<std::vector<sparse_tensor>>(want.value)) {
      CHECK(std::get<std::vector<sparse_tensor>>(got->value).size() == 1);
    } else if (const auto* f = std::get_if<float>(&want.value)) {
      CHECK(std::get<float>(got->value) == *f);
    } else if (const auto* i = std::get_if<std::int64_t>(&want.value)) {
      CHECK(std::get<std::int64_t>(got->value) == *i);
    } else if (const auto* str = std::get_if<std::string>(&want.value)) {
      CHECK(std::get<std::string>(got->value) == *str);
    } else if (const auto* fs2 = std::get_if<std::vector<float>>(&want.value)) {
      CHECK(std::get<std::vector<float>>(got->value) == *fs2);
    } else if (const auto* is = std::get_if<std::vector<std::int64_t>>(&want.value)) {
      CHECK(std::get<std::vector<std::int64_t>>(got->value) == *is);
    } else if (const auto* ss = std::get_if<std::vector<std::string>>(&want.value)) {
      CHECK(std::get<std::vector<std::string>>(got->value) == *ss);
    } else if (const auto* tp = std::get_if<type_info>(&want.value)) {
      CHECK(std::get<type_info>(got->value) == *tp);
    } else if (const auto* tps = std::get_if<std::vector<type_info>>(&want.value)) {
      CHECK(std::get<std::vector<type_info>>(got->value) == *tps);
    } else {
      FAIL("an attribute kind the test does not compare");
    }
  }
  // Written twice, the bytes are the same; a tensor held twice is stored once.
  auto again = serialize_deployment(m, providers);
  REQUIRE(again.is_ok());
  CHECK(*again == *bytes);
}

// ---- bad files ----

namespace {

// A deployment table made field by field, so that each test breaks one rule and keeps the hashes right.
struct craft {
  struct val {
    std::string name;
    std::int32_t elem = 1;
    std::vector<std::int64_t> dims{1};
    std::int32_t init = -1;
  };
  struct attr_graph {
    std::string name;
    std::vector<std::uint32_t> graphs = {};
  };
  struct nod {
    std::string name, op = "Relu", domain = {};
    std::vector<std::int32_t> in = {}, out = {};
    std::vector<std::uint32_t> implicit = {};
    std::uint32_t provider = 0;
    std::int32_t context = -1;
    std::vector<attr_graph> bodies = {};
    std::vector<std::string> int_attrs = {};
  };
  struct gr {
    std::string name = "g";
    std::vector<val> values = {};
    std::vector<std::uint32_t> inputs = {}, outputs = {};
    std::vector<nod> nodes = {};
  };
  struct ten {
    std::string name = "w";
    std::int32_t elem = 1;
    std::vector<std::int64_t> shape{1};
    std::uint64_t offset = 0, length = 4;
    bool good_hash = true;
  };
  std::vector<std::string> providers{"CPUExecutionProvider"};
  std::vector<gr> graphs;
  std::vector<ten> tensors;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> contexts;
  std::vector<std::byte> data = std::vector<std::byte>(64);
  std::uint32_t version = deployment_format_version;

  // x -> Relu -> y
  craft() { graphs.push_back({"g", {{"x"}, {"y"}}, {0}, {1}, {{"relu", "Relu", "", {0}, {1}}}}); }

  [[nodiscard]] std::vector<std::byte> bytes() const {
    namespace fb = deploy_fb;
    flatbuffers::FlatBufferBuilder b;
    std::vector<flatbuffers::Offset<fb::Graph>> gs;
    for (const auto& g : graphs) {
      std::vector<flatbuffers::Offset<fb::Value>> vs;
      for (const auto& v : g.values) {
        std::vector<flatbuffers::Offset<fb::Dim>> ds;
        for (auto d : v.dims) ds.push_back(fb::CreateDim(b, d));
        const auto type = fb::CreateType(b, 1, v.elem, true, b.CreateVector(ds));
        vs.push_back(fb::CreateValue(b, b.CreateString(v.name), type, v.init));
      }
      std::vector<flatbuffers::Offset<fb::Node>> ns;
      for (const auto& n : g.nodes) {
        std::vector<flatbuffers::Offset<fb::Attribute>> as;
        for (const auto& a : n.bodies)
          as.push_back(fb::CreateAttribute(b, b.CreateString(a.name), 5, 0, 0, 0, 0, 0, 0, 0, b.CreateVector(a.graphs)));
        for (const auto& a : n.int_attrs) as.push_back(fb::CreateAttribute(b, b.CreateString(a), 2, 0, 1));
        ns.push_back(fb::CreateNode(b, b.CreateString(n.name), b.CreateString(n.op), b.CreateString(n.domain), 13,
                                    b.CreateVector(n.in), b.CreateVector(n.out), b.CreateVector(n.implicit),
                                    b.CreateVector(as), n.provider, n.context));
      }
      gs.push_back(fb::CreateGraph(b, b.CreateString(g.name), b.CreateVector(vs), b.CreateVector(g.inputs),
                                   b.CreateVector(g.outputs), b.CreateVector(ns)));
    }
    std::vector<flatbuffers::Offset<fb::Tensor>> ts;
    for (const auto& t : tensors) {
      std::uint64_t h = 0;
      if (t.offset <= data.size() && t.length <= data.size() - t.offset)
        h = detail::content_hash(std::span<const std::byte>(data).subspan(t.offset, t.length));
      ts.push_back(fb::CreateTensor(b, b.CreateString(t.name), t.elem, b.CreateVector(t.shape), t.offset, t.length,
                                    t.good_hash ? h : h + 1));
    }
    std::vector<flatbuffers::Offset<fb::Context>> cs;
    for (const auto& [o, l] : contexts) cs.push_back(fb::CreateContext(b, o, l));
    std::vector<flatbuffers::Offset<flatbuffers::String>> ps;
    for (const auto& p : providers) ps.push_back(b.CreateString(p));
    const auto root = fb::CreateModel(b, 10, 0, 0, 0, 0, b.CreateVector(ps), b.CreateVector(gs), b.CreateVector(ts),
                                      b.CreateVector(cs));
    fb::FinishModelBuffer(b, root);
    return detail::make_sectioned(deploy_magic, version, {b.GetBufferPointer(), b.GetSize()}, data.size(),
                                  [&](std::byte* p) { std::memcpy(p, data.data(), data.size()); });
  }
};

void check_refused(const std::vector<std::byte>& bytes, std::string_view words) {
  auto d = read_bytes(bytes);
  REQUIRE_FALSE(d.is_ok());
  CHECK(d.code() == errc::invalid_graph);
  CHECK_MESSAGE(d.status().message().find(words) != std::string::npos, d.status().message());
  CHECK(d.status().message().rfind("test.deploy: ", 0) == 0);
}

}  // namespace

TEST_CASE("A crafted table that passes the hashes is still checked, field by field") {
  REQUIRE(read_bytes(craft().bytes()).is_ok());  // the base case is good
  const auto with = [](auto&& change) {
    craft c;
    change(c);
    return c.bytes();
  };
  check_refused(with([](craft& c) { c.graphs.clear(); }), "it has no graph");
  check_refused(with([](craft& c) { c.graphs[0].nodes[0].in = {5}; }), "names value 5 of 2");
  check_refused(with([](craft& c) { c.graphs[0].nodes[0].in = {-2}; }), "names value -2 of 2");
  check_refused(with([](craft& c) { c.graphs[0].inputs = {9}; }), "an input names value 9");
  check_refused(with([](craft& c) { c.graphs[0].outputs = {7}; }), "an output names value 7");
  check_refused(with([](craft& c) { c.graphs[0].values[1].name = "x"; }), "two values are named 'x'");
  check_refused(with([](craft& c) { c.graphs[0].values[1].name = ""; }), "value 1 has no name");
  check_refused(with([](craft& c) { c.graphs[0].nodes[0].op = ""; }), "has no operator");
  check_refused(with([](craft& c) { c.graphs[0].nodes[0].provider = 3; }), "names provider 3 of 1");
  check_refused(with([](craft& c) { c.graphs[0].nodes[0].context = 0; }), "has a context binary but is not an EPContext node");
  check_refused(with([](craft& c) {
                  c.graphs[0].nodes[0].op = "EPContext";
                  c.graphs[0].nodes[0].domain = "com.microsoft";
                }),
                "EPContext node without a context binary");
  check_refused(with([](craft& c) {
                  c.graphs[0].nodes[0].op = "EPContext";
                  c.graphs[0].nodes[0].domain = "com.microsoft";
                  c.graphs[0].nodes[0].context = 2;
                }),
                "names EP context binary 2 of 0");
  check_refused(with([](craft& c) { c.contexts = {{64, 8}}; }), "lies outside the 64-byte data section");
  check_refused(with([](craft& c) { c.contexts = {{3, 8}}; }), "lies outside");
  // Execution order: a node reads what a later node defines; a node reads itself; an undefined value.
  check_refused(with([](craft& c) {
                  c.graphs[0].values.push_back({"z"});
                  c.graphs[0].nodes[0].in = {2};
                  c.graphs[0].nodes.push_back({"second", "Relu", "", {0}, {2}});
                }),
                "a later node defines");
  check_refused(with([](craft& c) { c.graphs[0].nodes[0].in = {1}; }), "a later node defines");
  check_refused(with([](craft& c) {
                  c.graphs[0].values.push_back({"z"});
                  c.graphs[0].nodes[0].in = {2};
                }),
                "reads 'z', which nothing defines");
  check_refused(with([](craft& c) { c.graphs[0].nodes[0].out = {0}; }), "defined twice");
  check_refused(with([](craft& c) { c.graphs[0].nodes[0].int_attrs = {"a", "a"}; }), "two attributes named 'a'");
  // Graphs: each body used once, never the main graph, none unused, nesting bounded.
  const craft::gr body{"body", {{"b"}}, {}, {0}, {}};
  check_refused(with([&](craft& c) { c.graphs.push_back(body); }), "graph 1 is the body of no node");
  check_refused(with([&](craft& c) { c.graphs[0].nodes[0].bodies = {{"b", {0}}}; }), "which is the main graph or another body");
  check_refused(with([&](craft& c) {
                  c.graphs.push_back(body);
                  c.graphs[0].nodes[0].bodies = {{"b", {1}}, {"b2", {1}}};
                }),
                "which is the main graph or another body");
  check_refused(with([&](craft& c) { c.graphs[0].nodes[0].bodies = {{"b", {4}}}; }), "names graph 4 of 1");
  check_refused(with([&](craft& c) { c.graphs[0].nodes[0].bodies = {{"b", {}}}; }), "holds 0 graphs");
  check_refused(with([&](craft& c) {
                  for (std::uint32_t i = 1; i <= 70; ++i) {
                    c.graphs.push_back({"nest" + std::to_string(i), {{"v"}}, {}, {0}, {}});
                    if (i > 1) c.graphs[i - 1].nodes.push_back({"n", "If", "", {}, {}, {}, 0, -1, {{"then_branch", {i}}}});
                  }
                  c.graphs[0].nodes[0].bodies = {{"then_branch", {1}}};
                }),
                "nested more than 64 deep");
  // Tensors.
  craft::ten good;
  const auto init = [&](craft& c, craft::ten t) {
    c.tensors = {t};
    c.graphs[0].values.push_back({"w", 1, {1}, 0});
  };
  REQUIRE(read_bytes(with([&](craft& c) { init(c, good); })).is_ok());
  check_refused(with([&](craft& c) { init(c, {"w", 1, {1}, 0, 4, false}); }), "corrupted: tensor 'w' (4 bytes at offset 0");
  check_refused(with([&](craft& c) { init(c, {"w", 1, {1}, 64, 4}); }), "lies outside the 64-byte data section");
  check_refused(with([&](craft& c) { init(c, {"w", 1, {1}, 8, 4}); }), "lies outside");
  check_refused(with([&](craft& c) { init(c, {"w", 1, {2}, 0, 4}); }), "has 4 bytes for 2 elements of float");
  check_refused(with([&](craft& c) { init(c, {"w", 99, {1}, 0, 4}); }), "unknown element type 99");
  check_refused(with([&](craft& c) { init(c, {"w", 1, {-1}, 0, 4}); }), "has an invalid shape");
  check_refused(with([&](craft& c) { init(c, {"w", 1, {std::int64_t{1} << 40, std::int64_t{1} << 40}, 0, 4}); }),
                "has an invalid shape");
  check_refused(with([&](craft& c) {
                  init(c, good);
                  c.graphs[0].values.back().elem = 7;
                }),
                "initializer 'w' is declared int64[1] but holds float[1]");
  check_refused(with([&](craft& c) {
                  init(c, good);
                  c.graphs[0].values.back().init = 3;
                }),
                "names tensor 3 of 1");
  check_refused(with([](craft& c) { c.graphs[0].values[0].elem = 77; }), "unknown element type 77");
  check_refused(with([](craft& c) { c.version = 2; }), "format version 2, expected 1");
}

TEST_CASE("Damaged and truncated deployment files are refused with invalid_graph, naming the file") {
  test::temp_dir dir;
  const auto src = write_model(zoo::make_convnet({16}, 8), dir / "c.onnx");
  const auto good = compile_to_bytes(src);
  REQUIRE(read_bytes(good).is_ok());
  // Truncated anywhere.
  for (std::size_t n : {std::size_t{0}, std::size_t{7}, std::size_t{100}, std::size_t{127}, std::size_t{128},
                        std::size_t{200}, good.size() / 2, good.size() - 64, good.size() - 1}) {
    CAPTURE(n);
    check_refused(std::vector<std::byte>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n)), "test.deploy: ");
  }
  // Any header byte changed; a byte of the table; a byte of a weight (which names the tensor).
  for (std::size_t at = 0; at < 128; at += 5) {
    CAPTURE(at);
    auto b = good;
    b[at] ^= std::byte{0x40};
    check_refused(b, at < 8 ? "not an epstack deployment model" : "corrupted header");
  }
  auto table = good;
  table[200] ^= std::byte{1};
  check_refused(table, "the hash of its table is");
  auto weight = good;
  std::uint64_t data_at = 0;  // the data section's offset (header bytes 32-39); a tensor starts there
  for (int k = 7; k >= 0; --k) data_at = (data_at << 8) | static_cast<std::uint8_t>(good[32 + static_cast<std::size_t>(k)]);
  weight[data_at] ^= std::byte{1};
  check_refused(weight, "corrupted: tensor '");
  // An ONNX model is not a deployment model.
  const auto onnx = test::read_file(src);
  check_refused(std::vector<std::byte>(reinterpret_cast<const std::byte*>(onnx.data()),
                                       reinterpret_cast<const std::byte*>(onnx.data()) + onnx.size()),
                "not an epstack deployment model (expected magic EPSTKDPL)");
  // On disk: a missing file, and a file cut short after it was written.
  auto missing = open_deployment(dir / "none.deploy");
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.code() == errc::no_such_file);
  test::write_file(dir / "cut.deploy", std::string_view(reinterpret_cast<const char*>(good.data()), good.size() - 10));
  auto cut = session<cpu_provider>::create_deployed(dir / "cut.deploy");
  REQUIRE_FALSE(cut.is_ok());
  CHECK(cut.code() == errc::invalid_graph);
  CHECK(cut.status().message().find("cut.deploy") != std::string::npos);
  CHECK(cut.status().message().find("truncated") != std::string::npos);
}

TEST_CASE("Writing a deployment model: existing files, failed writes, what the format does not hold") {
  test::temp_dir dir;
  const auto src = write_model(chain_model(), dir / "chain.onnx");
  auto m = session<cpu_provider>::create(src);
  REQUIRE(m.is_ok());
  const std::vector<std::string> cpu{std::string(cpu_provider_key)};
  // Every node needs its provider.
  model plain = chain_model();
  REQUIRE(session_core::validate_and_infer(plain).is_ok());
  auto no_provider = serialize_deployment(plain, cpu);
  REQUIRE_FALSE(no_provider.is_ok());
  CHECK(no_provider.code() == errc::invalid_argument);
  CHECK(no_provider.status().message().find("node 'add1' (Add)") != std::string::npos);
  for (node_id n = 0; n < plain.graph.node_count(); ++n)
    plain.graph.node(n).metadata.emplace_back(std::string(deployment_provider_key), "OtherExecutionProvider");
  auto unknown = serialize_deployment(plain, cpu);
  REQUIRE_FALSE(unknown.is_ok());
  CHECK(unknown.status().message().find("'OtherExecutionProvider', which is not one of the stack's") != std::string::npos);
  for (node_id n = 0; n < plain.graph.node_count(); ++n) plain.graph.node(n).metadata.back().second = cpu[0];
  // An existing file is refused unless asked; the temporary file never stays.
  REQUIRE(write_deployment(plain, cpu, dir / "chain.deploy").is_ok());
  auto twice = write_deployment(plain, cpu, dir / "chain.deploy");
  REQUIRE_FALSE(twice.is_ok());
  CHECK(twice.code() == errc::invalid_argument);
  CHECK(write_deployment(plain, cpu, dir / "chain.deploy", true).is_ok());
  auto nowhere = write_deployment(plain, cpu, dir / "no" / "such" / "folder.deploy");
  REQUIRE_FALSE(nowhere.is_ok());
  std::size_t temps = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir.path()))
    temps += e.path().filename().string().find(".tmp") != std::string::npos ? 1 : 0;
  CHECK(temps == 0);
  auto ran = session<cpu_provider>::create_deployed(dir / "chain.deploy");
  REQUIRE(ran.is_ok());
  check_close(run_x(*ran), run_x(*m));
  // Sparse initializers are made dense before deploying.
  model sparse = plain;
  sparse_tensor st{zoo::random_tensor({1}, 1, 1.0f), tensor::from<std::int64_t>({1}, {0}), {3}};
  st.values.set_name("sparse_weight");
  sparse.graph.add_sparse_initializer(st);
  auto sp = serialize_deployment(sparse, cpu);
  REQUIRE_FALSE(sp.is_ok());
  CHECK(sp.code() == errc::not_implemented);

  // Through a session: the option's file may not exist; it excludes ep.context_enable; a compiled model is refused.
  session_options so;
  so.set_config(config_keys::deploy_file_path, (dir / "chain.deploy").string());
  auto exists = session<cpu_provider>::create(src, so);
  REQUIRE_FALSE(exists.is_ok());
  CHECK(exists.status().message().find("exists already") != std::string::npos);
  so.set_config(config_keys::deploy_file_path, (dir / "fresh.deploy").string());
  so.set_config(config_keys::ep_context_enable, "1");
  auto both = session<cpu_provider>::create(src, so);
  REQUIRE_FALSE(both.is_ok());
  CHECK(both.code() == errc::invalid_argument);
  CHECK_FALSE(fs::exists(dir / "fresh.deploy"));
  auto ctx = toy_session::create(src, gen_options(1));
  REQUIRE(ctx.is_ok());
  session_options again;
  again.set_config(config_keys::deploy_file_path, (dir / "from_ctx.deploy").string());
  auto compiled = toy_session::create(dir / "chain_ctx.onnx", again);
  REQUIRE_FALSE(compiled.is_ok());
  CHECK(compiled.code() == errc::invalid_graph);
  CHECK(compiled.status().message().find("already compiled") != std::string::npos);
  // compile_model's options that do not apply to the format.
  compile_options co;
  co.input_path = src;
  co.output_path = dir / "x.deploy";
  co.format = compile_format::deploy;
  co.external_initializers_file = "w.bin";
  auto ext = compile_model<cpu_provider>(co);
  REQUIRE_FALSE(ext.is_ok());
  CHECK(ext.code() == errc::invalid_argument);
}
