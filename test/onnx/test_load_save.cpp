#include <epstack/ir/graph_algorithms.hpp>
#include <epstack/testing/model_zoo.hpp>
#include <epstack/onnx/onnx_io.hpp>

#include "../support/proto_models.hpp"
#include "../support/temp_dir.hpp"

#include <onnx/checker.h>

#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <span>

#include <fcntl.h>
#include <unistd.h>

using namespace epstack;
namespace fs = std::filesystem;

namespace {
std::span<const std::byte> as_bytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

const value& value_named(const graph& g, const char* name) {
  const auto v = g.find_value(name);
  REQUIRE(v != no_id);
  return g.value(v);
}

std::size_t count_files(const fs::path& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

// A model with a bit of everything ONNX can say: metadata, doc strings, value_info, a local function, an If with
// subgraphs that use an outer value, attributes of many kinds, every initializer storage form.
onnx::ModelProto rich_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("rich");
  m.set_producer_version("1.2.3");
  m.set_domain("ai.epstack.test");
  m.set_model_version(7);
  m.set_doc_string("model doc");
  auto* md = m.add_metadata_props();
  md->set_key("author");
  md->set_value("epstack");
  auto* md2 = m.add_metadata_props();
  md2->set_key("license");
  md2->set_value("MIT");
  for (auto [d, v] : {std::pair<const char*, int>{"", 15}, {"local", 1}}) {
    auto* op = m.add_opset_import();
    op->set_domain(d);
    op->set_version(v);
  }
  auto* g = m.mutable_graph();
  g->set_name("rich_graph");
  g->set_doc_string("graph doc");
  test::set_tensor_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 2});
  g->mutable_input(0)->set_doc_string("the input");
  g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("batch");
  test::set_tensor_type(g->add_input(), "cond", onnx::TensorProto::BOOL, {});
  test::set_tensor_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {2, 2});
  test::set_tensor_type(g->add_output(), "z", onnx::TensorProto::FLOAT, {2, 2});
  test::set_tensor_type(g->add_output(), "h", onnx::TensorProto::FLOAT16, {3});
  test::set_tensor_type(g->add_output(), "s", onnx::TensorProto::STRING, {2});
  test::set_tensor_type(g->add_output(), "k", onnx::TensorProto::INT64, {2});
  *g->add_initializer() = test::float_tensor("w", {2, 2}, {0.5f, -1.0f, 2.0f, 8.0f});
  {
    auto* h = g->add_initializer();  // float16 in int32_data
    h->set_name("h_init");
    h->set_data_type(onnx::TensorProto::FLOAT16);
    h->add_dims(3);
    for (int b : {0x3c00, 0xc000, 0x7bff}) h->add_int32_data(b);
    auto* s = g->add_initializer();
    s->set_name("s_init");
    s->set_data_type(onnx::TensorProto::STRING);
    s->add_dims(2);
    s->add_string_data("hello");
    s->add_string_data(std::string("bin\0ary", 7));
    auto* k = g->add_initializer();
    k->set_name("k_init");
    k->set_data_type(onnx::TensorProto::INT64);
    k->add_dims(2);
    k->add_int64_data(-3);
    k->add_int64_data(1LL << 40);
  }
  {
    auto* sp = g->add_sparse_initializer();  // [0, 0, 1.5, 0, -2] as values at indices 2 and 4
    *sp->mutable_values() = test::float_tensor("sparse_w", {2}, {1.5f, -2.0f});
    auto* idx = sp->mutable_indices();
    idx->set_name("sparse_w_indices");
    idx->set_data_type(onnx::TensorProto::INT64);
    idx->add_dims(2);
    idx->add_dims(1);
    const std::int64_t ix[] = {2, 4};
    idx->set_raw_data(ix, sizeof ix);
    sp->add_dims(5);
  }
  auto* mul = test::add_node(g, "mul", "Mul", {"x", "w"}, {"xw"});
  mul->set_doc_string("multiply");
  auto* iff = test::add_node(g, "if", "If", {"cond"}, {"y"});
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* a = iff->add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    auto* sg = a->mutable_g();
    sg->set_name(std::string(branch) + "_graph");
    test::set_tensor_type(sg->add_output(), std::string(branch) + "_out", onnx::TensorProto::FLOAT, {2, 2});
    test::add_node(sg, std::string(branch) + "_node", branch[0] == 't' ? "Relu" : "Neg", {"xw"},
                   {std::string(branch) + "_out"});
  }
  auto* fn_call = test::add_node(g, "call", "Twice", {"x"}, {"z"});
  fn_call->set_domain("local");
  test::add_node(g, "h_id", "Identity", {"h_init"}, {"h"});
  test::add_node(g, "s_id", "Identity", {"s_init"}, {"s"});
  auto* kn = test::add_node(g, "k_id", "Identity", {"k_init"}, {"k"});
  kn->set_doc_string("kept");
  auto* vi = g->add_value_info();
  test::set_tensor_type(vi, "xw", onnx::TensorProto::FLOAT, {2, 2});
  vi->set_doc_string("annotated");

  // An attribute-rich node inside a constant: Constant with a tensor value, and a Cast with an int attribute.
  auto* c = test::add_node(g, "const", "Constant", {}, {"c"});
  auto* ca = c->add_attribute();
  ca->set_name("value");
  ca->set_type(onnx::AttributeProto::TENSOR);
  *ca->mutable_t() = test::float_tensor("c_value", {2}, {3.0f, 4.0f});
  auto* cast = test::add_node(g, "cast", "Cast", {"c"}, {"c_int"});
  auto* cat = cast->add_attribute();
  cat->set_name("to");
  cat->set_type(onnx::AttributeProto::INT);
  cat->set_i(onnx::TensorProto::INT32);
  auto* lrn = test::add_node(g, "lrn", "LRN", {"x4"}, {"x4n"});
  for (auto [n, v] : {std::pair<const char*, float>{"alpha", 0.001f}, {"beta", 0.75f}}) {
    auto* a = lrn->add_attribute();
    a->set_name(n);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  auto* sz = lrn->add_attribute();
  sz->set_name("size");
  sz->set_type(onnx::AttributeProto::INT);
  sz->set_i(3);
  test::set_tensor_type(g->add_input(), "x4", onnx::TensorProto::FLOAT, {1, 3, 2, 2});
  auto* tr = test::add_node(g, "tr", "Transpose", {"x4n"}, {"x4t"});
  auto* perm = tr->add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (int p : {0, 2, 3, 1}) perm->add_ints(p);
  test::set_tensor_type(g->add_output(), "x4t", onnx::TensorProto::FLOAT, {1, 2, 2, 3});
  test::set_tensor_type(g->add_output(), "c_int", onnx::TensorProto::INT32, {2});

  auto* f = m.add_functions();
  f->set_name("Twice");
  f->set_domain("local");
  f->add_input("a");
  f->add_output("b");
  auto* fop = f->add_opset_import();
  fop->set_domain("");
  fop->set_version(15);
  auto* fn = f->add_node();
  fn->set_op_type("Add");
  fn->add_input("a");
  fn->add_input("a");
  fn->add_output("b");
  return m;
}
}  // namespace

TEST_CASE("load a model from a path and from a buffer") {
  test::temp_dir dir;
  const auto bytes = test::relu_model().SerializeAsString();
  test::write_file(dir / "relu.onnx", bytes);
  for (int from_buffer = 0; from_buffer < 2; ++from_buffer) {
    auto m = from_buffer ? load_model(as_bytes(bytes)) : load_model(dir / "relu.onnx");
    REQUIRE_MESSAGE(m.has_value(), m.status().to_string());
    CHECK(m->ir_version == 8);
    CHECK(m->opset("") == 13);
    CHECK(m->opset("ai.onnx") == 13);
    CHECK(m->opset("com.microsoft") == -1);
    CHECK(m->producer_name == "epstack-test");
    CHECK(m->path == (from_buffer ? fs::path() : dir / "relu.onnx"));
    const auto& g = m->graph;
    CHECK(g.name() == "relu_graph");
    CHECK(g.node_count() == 1);
    CHECK(g.node(0).op_type == "Relu");
    REQUIRE(g.inputs().size() == 1);
    CHECK(g.value(g.inputs()[0]).type.to_string() == "float[2,3]");
    CHECK(value_named(g, "y").type.to_string() == "float[2,3]");
  }
}

TEST_CASE("tensor types declared without a shape load, as in ONNX Runtime, and keep their unknown rank") {
  // onnx.helper.make_tensor_value_info(name, FLOAT, None) writes them; onnx 1.12's checker alone asks for a shape.
  auto pm = test::relu_model();
  auto* g = pm.mutable_graph();
  g->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  g->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  test::add_node(g, "neg", "Neg", {"y"}, {"z"});
  g->mutable_node(0)->set_output(0, "y");
  auto* vi = g->add_value_info();
  vi->set_name("y");
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  auto* out = g->add_output();
  out->set_name("z");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  test::temp_dir dir;
  const auto bytes = pm.SerializeAsString();
  test::write_file(dir / "noshape.onnx", bytes);
  for (int from_buffer = 0; from_buffer < 2; ++from_buffer) {
    auto m = from_buffer ? load_model(as_bytes(bytes)) : load_model(dir / "noshape.onnx");
    REQUIRE_MESSAGE(m.has_value(), m.status().to_string());
    const auto& mg = m->graph;
    REQUIRE(mg.inputs().size() == 1);
    CHECK(mg.value(mg.inputs()[0]).type.is_tensor());
    CHECK_FALSE(mg.value(mg.inputs()[0]).type.dims.has_value());
    CHECK_FALSE(value_named(mg, "z").type.dims.has_value());
    // Written back, the declarations still have no shape (the checker's stand-ins were taken away).
    REQUIRE(save_model(*m, dir / "back.onnx").is_ok());
    onnx::ModelProto back;
    std::ifstream f(dir / "back.onnx", std::ios::binary);
    REQUIRE(back.ParseFromIstream(&f));
    CHECK_FALSE(back.graph().input(0).type().tensor_type().has_shape());
    CHECK(back.graph().input(0).type().tensor_type().elem_type() == onnx::TensorProto::FLOAT);
    auto again = load_model(dir / "back.onnx");
    CHECK_MESSAGE(again.has_value(), again.status().to_string());
  }
  // A declaration without an element type is still refused, naming the value.
  g->mutable_output(1)->mutable_type()->mutable_tensor_type()->clear_elem_type();
  auto bad = load_model(as_bytes(pm.SerializeAsString()));
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.code() == errc::invalid_graph);
  CHECK(bad.status().message().find("value 'z' has element type 0") != std::string::npos);
}

TEST_CASE("values round-trip through serialize_value and parse_value: tensors, sequences, optionals") {
  const auto f2 = type_info::tensor_of(element_type::float32, shape{2});
  const auto seq_t = type_info::sequence_of(f2);
  const auto opt_t = type_info::optional_of(f2);
  const auto opt_seq_t = type_info::optional_of(seq_t);
  const tensor x = tensor::from<float>({2}, {1.5f, -2});
  tensor_sequence seq;
  seq.elem = element_type::float32;
  seq.items = {x, tensor::from<float>({2}, {3, 4})};
  const auto round = [](const ivalue& v, const type_info& t) -> Result<ivalue> {
    EPSTACK_ASSIGN_OR_RETURN(auto bytes, serialize_value(v, t, "v"));
    return parse_value(std::as_bytes(std::span<const char>(bytes.data(), bytes.size())), t, "v");
  };
  auto a = round(x, f2);
  REQUIRE(a.has_value());
  CHECK(a->as_tensor().same_content(x));
  auto b = round(ivalue(seq), seq_t);
  REQUIRE(b.has_value());
  REQUIRE(b->as_sequence().items.size() == 2);
  CHECK(b->as_sequence().items[1].same_content(seq.items[1]));
  auto c = round(x, opt_t);
  REQUIRE(c.has_value());
  CHECK(c->as_tensor().same_content(x));
  auto d = round(ivalue(), opt_t);  // an empty optional
  REQUIRE(d.has_value());
  CHECK(d->is_none());
  auto e = round(ivalue(seq), opt_seq_t);
  REQUIRE(e.has_value());
  CHECK(e->as_sequence().items.size() == 2);
  // The value must be of the type's kind.
  auto bad = serialize_value(x, seq_t, "out");
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.code() == errc::invalid_argument);
  CHECK(bad.status().message() == "out: the type is a sequence, the value is tensor");
  CHECK(serialize_value(ivalue(seq), opt_t, "o").code() == errc::invalid_argument);
}

TEST_CASE("shape inference types the intermediate values") {
  auto p = test::relu_model();
  auto* g = p.mutable_graph();
  g->mutable_node(0)->set_output(0, "mid");
  test::add_node(g, "neg", "Neg", {"mid"}, {"y"});
  auto m = load_model(as_bytes(p.SerializeAsString()));
  REQUIRE_MESSAGE(m.has_value(), m.status().to_string());
  const auto& mid = value_named(m->graph, "mid");
  CHECK(mid.type.to_string() == "float[2,3]");
  CHECK_FALSE(mid.in_value_info);  // inferred, not declared: a save does not add it
  auto saved = serialize_model(*m);
  REQUIRE(saved.has_value());
  onnx::ModelProto back;
  REQUIRE(back.ParseFromString(*saved));
  CHECK(back.graph().value_info_size() == 0);
}

TEST_CASE("initializers in every storage form load with the right values and raw data is not copied") {
  auto m = load_model(as_bytes(rich_model().SerializeAsString()));
  REQUIRE_MESSAGE(m.has_value(), m.status().to_string());
  const auto& g = m->graph;
  const auto& w = *value_named(g, "w").initializer;
  CHECK(w.type() == element_type::float32);
  CHECK(w.view<float>()[3] == 8.0f);
  CHECK(w.is_borrowed());  // the protobuf string's buffer, moved out of the message
  const auto& h = *value_named(g, "h_init").initializer;
  CHECK(static_cast<float>(h.view<float16>()[1]) == -2.0f);
  CHECK(h.view<float16>()[2].bits == 0x7bff);
  const auto& s = *value_named(g, "s_init").initializer;
  CHECK(s.view<std::string>()[1] == std::string("bin\0ary", 7));
  const auto& k = *value_named(g, "k_init").initializer;
  CHECK(k.view<std::int64_t>()[1] == (1LL << 40));
  // Attribute tensors too.
  for (node_id n = 0; n < g.node_count(); ++n)
    if (g.node(n).op_type == "Constant") {
      const auto& t = std::get<tensor>(g.node(n).attributes.find("value")->value);
      CHECK(t.name() == "c_value");
      CHECK(t.view<float>()[1] == 4.0f);
    }
}

TEST_CASE("round trip: load -> save -> load keeps everything") {
  test::temp_dir dir;
  const auto original = rich_model();
  test::write_file(dir / "rich.onnx", original.SerializeAsString());
  auto m1 = load_model(dir / "rich.onnx");
  REQUIRE_MESSAGE(m1.has_value(), m1.status().to_string());
  REQUIRE(save_model(*m1, dir / "rich2.onnx").is_ok());
  CHECK_NOTHROW(onnx::checker::check_model((dir / "rich2.onnx").string()));
  auto m2 = load_model(dir / "rich2.onnx");
  REQUIRE_MESSAGE(m2.has_value(), m2.status().to_string());
  // The two loads serialize to the same bytes.
  CHECK(*serialize_model(*m1) == *serialize_model(*m2));

  onnx::ModelProto saved;
  REQUIRE(saved.ParseFromString(test::read_file(dir / "rich2.onnx")));
  CHECK(saved.ir_version() == original.ir_version());
  CHECK(saved.producer_name() == "rich");
  CHECK(saved.producer_version() == "1.2.3");
  CHECK(saved.domain() == "ai.epstack.test");
  CHECK(saved.model_version() == 7);
  CHECK(saved.doc_string() == "model doc");
  REQUIRE(saved.metadata_props_size() == 2);
  CHECK(saved.metadata_props(1).key() == "license");
  REQUIRE(saved.opset_import_size() == 2);
  CHECK(saved.opset_import(1).domain() == "local");
  REQUIRE(saved.functions_size() == 1);
  CHECK(saved.functions(0).SerializeAsString() == original.functions(0).SerializeAsString());
  const auto& sg = saved.graph();
  const auto& og = original.graph();
  CHECK(sg.name() == "rich_graph");
  CHECK(sg.doc_string() == "graph doc");
  REQUIRE(sg.input_size() == og.input_size());
  for (int i = 0; i < og.input_size(); ++i) CHECK(sg.input(i).SerializeAsString() == og.input(i).SerializeAsString());
  REQUIRE(sg.output_size() == og.output_size());
  for (int i = 0; i < og.output_size(); ++i) CHECK(sg.output(i).name() == og.output(i).name());
  REQUIRE(sg.value_info_size() == 1);
  CHECK(sg.value_info(0).name() == "xw");
  CHECK(sg.value_info(0).doc_string() == "annotated");
  // Every node, with its attributes, as written (raw_data tensors and subgraphs without inferred value_info compare
  // byte for byte).
  REQUIRE(sg.node_size() == og.node_size());
  for (int i = 0; i < og.node_size(); ++i) {
    if (og.node(i).op_type() == "If") {
      CHECK(sg.node(i).attribute_size() == 2);
      CHECK(sg.node(i).attribute(0).g().node(0).SerializeAsString() == og.node(i).attribute(0).g().node(0).SerializeAsString());
      continue;
    }
    CHECK_MESSAGE(sg.node(i).SerializeAsString() == og.node(i).SerializeAsString(), og.node(i).name());
  }
  // Every initializer's bytes, sparse ones included.
  REQUIRE(sg.sparse_initializer_size() == 1);
  CHECK(sg.sparse_initializer(0).SerializeAsString() == og.sparse_initializer(0).SerializeAsString());
  CHECK(value_named(m2->graph, "sparse_w").is_sparse_initializer);
  CHECK(value_named(m2->graph, "sparse_w").type.to_string() == "sparse float[5]");
  REQUIRE(sg.initializer_size() == og.initializer_size());
  for (const auto& name : {"w", "h_init", "s_init", "k_init"}) {
    const auto& a = *value_named(m1->graph, name).initializer;
    const auto& b = *value_named(m2->graph, name).initializer;
    CHECK_MESSAGE(a.same_content(b), name);
  }
}

TEST_CASE("save with external data: all above a threshold aligned memory-mapped back") {
  test::temp_dir dir;
  auto m = zoo::make_mlp({256, 512, 10});
  save_options all;
  all.mode = external_data_mode::all_external;
  REQUIRE(save_model(m, dir / "mlp.onnx", all).is_ok());
  CHECK(fs::exists(dir / "mlp.onnx.data"));
  CHECK(fs::file_size(dir / "mlp.onnx") < 2048);
  CHECK_NOTHROW(onnx::checker::check_model((dir / "mlp.onnx").string()));
  auto back = load_model(dir / "mlp.onnx");
  REQUIRE_MESSAGE(back.has_value(), back.status().to_string());
  for (value_id v : m.graph.initializers()) {
    const auto& name = m.graph.value(v).name;
    const auto& t = *value_named(back->graph, name.c_str()).initializer;
    CHECK(t.is_borrowed());
    CHECK(t.same_content(*m.graph.value(v).initializer));
    if (t.byte_size() > 64 * 1024)
      CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % 64 == 0);  // page-aligned mapping + 64-aligned offsets
  }

  save_options thr;
  thr.mode = external_data_mode::above_threshold;
  thr.threshold_bytes = 4096;
  thr.external_file_name = "weights.bin";
  REQUIRE(save_model(m, dir / "mlp_thr.onnx", thr).is_ok());
  onnx::ModelProto p;
  REQUIRE(p.ParseFromString(test::read_file(dir / "mlp_thr.onnx")));
  int external = 0, embedded = 0;
  for (const auto& t : p.graph().initializer()) {
    const bool ext = t.data_location() == onnx::TensorProto::EXTERNAL;
    (ext ? external : embedded)++;
    const std::size_t bytes = static_cast<std::size_t>(t.dims(0)) * (t.dims_size() > 1 ? t.dims(1) : 1) * 4;
    CHECK(ext == (bytes >= 4096));
    if (ext) {
      CHECK(t.external_data(0).value() == "weights.bin");
      CHECK(std::stoull(t.external_data(1).value()) % 64 == 0);
    }
  }
  CHECK(external == 2);  // the two weight matrices
  CHECK(embedded == 2);  // the biases
  CHECK(fs::file_size(dir / "weights.bin") >= (256 * 512 + 512 * 10) * 4);

  // No temporary files are left behind.
  CHECK(count_files(dir.path()) == 4);
}

TEST_CASE("external data in a subfolder and from a buffer with a folder") {
  test::temp_dir dir;
  fs::create_directories(dir / "weights");
  auto p = test::add_model();
  std::string w_bytes(4, 'x');
  w_bytes.append(test::floats_bytes({5, 6, 7, 8}));
  test::write_file(dir / "weights" / "w.bin", w_bytes);
  test::make_external(p, "w", "weights/w.bin", "4", "16");
  test::write_file(dir / "m.onnx", p.SerializeAsString());
  auto m = load_model(dir / "m.onnx");
  REQUIRE_MESSAGE(m.has_value(), m.status().to_string());
  CHECK(value_named(m->graph, "w").initializer->view<float>()[3] == 8.0f);

  const auto bytes = p.SerializeAsString();
  load_options lo;
  lo.external_data_folder = dir.path();
  auto mb = load_model(as_bytes(bytes), lo);
  REQUIRE_MESSAGE(mb.has_value(), mb.status().to_string());
  CHECK(value_named(mb->graph, "w").initializer->view<float>()[0] == 5.0f);

  // The saved model does not refer to the source's external file: it embeds or writes its own.
  REQUIRE(save_model(*m, dir / "copy.onnx").is_ok());
  onnx::ModelProto c;
  REQUIRE(c.ParseFromString(test::read_file(dir / "copy.onnx")));
  CHECK(c.graph().initializer(0).data_location() == onnx::TensorProto::DEFAULT);
}

TEST_CASE("saving is atomic: a failed save leaves nothing and a good save replaces the file") {
  test::temp_dir dir;
  auto m = zoo::make_mlp({8, 4});
  CHECK(save_model(m, dir / "missing" / "m.onnx").code() == errc::no_such_file);
  CHECK(save_model(m, dir.path()).code() == errc::invalid_argument);
  save_options bad;
  bad.mode = external_data_mode::all_external;
  bad.external_file_name = "../escape.bin";
  CHECK(save_model(m, dir / "m.onnx", bad).code() == errc::invalid_argument);
  CHECK(count_files(dir.path()) == 0);

  test::write_file(dir / "m.onnx", "old contents");
  REQUIRE(save_model(m, dir / "m.onnx").is_ok());
  CHECK(load_model(dir / "m.onnx").has_value());
  CHECK(count_files(dir.path()) == 1);

  // A read-only folder: the write fails and no partial file appears.
  if (::geteuid() != 0) {
    fs::create_directories(dir / "ro");
    fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    CHECK(save_model(m, dir / "ro" / "m.onnx").code() == errc::fail);
    CHECK(count_files(dir / "ro") == 0);
    fs::permissions(dir / "ro", fs::perms::owner_all);
  }
}

TEST_CASE("a model whose external data exceed 2 GB loads memory-mapped and saves") {
  test::temp_dir dir;
  const std::int64_t n = (std::int64_t{1} << 31) + 4096;  // bytes of one uint8 initializer
  {
    // A sparse file: 2 GiB of holes and one marked byte at the end, so the test uses almost no disk or memory.
    const int fd = ::open((dir / "big.bin").c_str(), O_CREAT | O_WRONLY, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, 4096 + n) == 0);
    const char mark = 42;
    REQUIRE(::pwrite(fd, &mark, 1, 4096 + n - 1) == 1);
    ::close(fd);
  }
  onnx::ModelProto p = test::relu_model();
  auto* g = p.mutable_graph();
  g->clear_node();
  g->clear_input();
  g->clear_output();
  auto* t = g->add_initializer();
  t->set_name("big");
  t->set_data_type(onnx::TensorProto::UINT8);
  t->add_dims(n);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto [k, v] : {std::pair<std::string, std::string>{"location", "big.bin"}, {"offset", "4096"}, {"length", std::to_string(n)}}) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  test::add_node(g, "id", "Identity", {"big"}, {"out"});
  test::set_tensor_type(g->add_output(), "out", onnx::TensorProto::UINT8, {n});
  test::write_file(dir / "big.onnx", p.SerializeAsString());

  auto m = load_model(dir / "big.onnx");
  REQUIRE_MESSAGE(m.has_value(), m.status().to_string());
  const auto& big = *value_named(m->graph, "big").initializer;
  CHECK(big.is_borrowed());
  CHECK(big.byte_size() == static_cast<std::size_t>(n));
  CHECK(big.view<std::uint8_t>()[static_cast<std::size_t>(n - 1)] == 42);

  // Embedding it is refused up front, with the reason.
  auto ser = serialize_model(*m);
  CHECK(ser.code() == errc::invalid_argument);
  CHECK(ser.status().message().find("2 GB") != std::string::npos);
  CHECK(save_model(*m, dir / "embedded.onnx").code() == errc::invalid_argument);
  CHECK_FALSE(fs::exists(dir / "embedded.onnx"));

  fs::create_directories(dir / "out");
  save_options so;
  so.mode = external_data_mode::all_external;
  REQUIRE(save_model(*m, dir / "out" / "big.onnx", so).is_ok());
  auto back = load_model(dir / "out" / "big.onnx");
  REQUIRE_MESSAGE(back.has_value(), back.status().to_string());
  const auto& big2 = *value_named(back->graph, "big").initializer;
  CHECK(big2.byte_size() == static_cast<std::size_t>(n));
  CHECK(big2.view<std::uint8_t>()[static_cast<std::size_t>(n - 1)] == 42);
  CHECK(big2.view<std::uint8_t>()[12345] == 0);
}

TEST_CASE("the model zoo's MLP is a valid model that the onnx checker accepts") {
  test::temp_dir dir;
  auto m = zoo::make_mlp({16, 32, 4}, dimension(3));
  CHECK(validate(m.graph).is_ok());
  REQUIRE(save_model(m, dir / "mlp.onnx").is_ok());
  CHECK_NOTHROW(onnx::checker::check_model((dir / "mlp.onnx").string()));
  auto back = load_model(dir / "mlp.onnx");
  REQUIRE(back.has_value());
  CHECK(back->graph.node_count() == 3);
  CHECK(value_named(back->graph, "logits").type.to_string() == "float[3,4]");
  CHECK(back->metadata.at(0).second == "epstack::zoo::make_mlp");
}
