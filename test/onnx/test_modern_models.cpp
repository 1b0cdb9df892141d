// Models of IR versions 9 to 13 and opsets 18 to 27 (ONNX 1.22), written with onnx 1.12's message classes plus the
// newer fields as raw protobuf fields: they load, their types and shapes are inferred, every field survives a save,
// and bad ones get errors that name the node, the opset or the tensor.
#include <epstack/onnx/onnx_io.hpp>
#include <epstack/onnx/version_convert.hpp>

#include "../support/proto_models.hpp"
#include "../support/temp_dir.hpp"

#include <google/protobuf/unknown_field_set.h>

#include <doctest/doctest.h>

#include <functional>
#include <string>

using namespace epstack;
namespace fs = std::filesystem;

namespace {

fs::path write(const fs::path& dir, const onnx::ModelProto& m, const char* name = "m.onnx") {
  test::write_file(dir / name, m.SerializeAsString());
  return dir / name;
}

void set_opset(onnx::ModelProto& m, std::int64_t version, std::int64_t ir = 10) {
  m.set_ir_version(ir);
  m.mutable_opset_import(0)->set_version(version);
}

onnx::StringStringEntryProto entry(const std::string& k, const std::string& v) {
  onnx::StringStringEntryProto e;
  e.set_key(k);
  e.set_value(v);
  return e;
}

// x float[2,3,4] -> ReduceMean(axes input [1], keepdims 0) -> y, opset 18, IR 10.
onnx::ModelProto reduce_mean18() {
  onnx::ModelProto m = test::relu_model();
  set_opset(m, 18);
  auto* g = m.mutable_graph();
  g->clear_node();
  g->clear_input();
  g->clear_output();
  test::set_tensor_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3, 4});
  auto* out = g->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  onnx::TensorProto axes;
  axes.set_name("axes");
  axes.set_data_type(onnx::TensorProto::INT64);
  axes.add_dims(1);
  axes.add_int64_data(1);
  *g->add_initializer() = axes;
  auto* n = test::add_node(g, "mean", "ReduceMean", {"x", "axes"}, {"y"});
  auto* k = n->add_attribute();
  k->set_name("keepdims");
  k->set_type(onnx::AttributeProto::INT);
  k->set_i(0);
  return m;
}

Result<model> load_bytes(const onnx::ModelProto& m) {
  const std::string s = m.SerializeAsString();
  return load_model(std::as_bytes(std::span(s.data(), s.size())));
}

}  // namespace

TEST_CASE("an opset 18 model of IR 10 loads, with inferred shapes and the new operator version") {
  auto r = load_bytes(reduce_mean18());
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  CHECK(r->ir_version == 10);
  CHECK(r->opset("") == 18);
  const auto& g = r->graph;
  REQUIRE(g.node_count() == 1);
  CHECK(g.node(0).since_version == 18);
  const auto& y = g.value(g.find_value("y")).type;
  REQUIRE(y.dims.has_value());
  REQUIRE(y.dims->rank() == 2);
  CHECK((*y.dims)[0].value == 2);
  CHECK((*y.dims)[1].value == 4);
}

// The expanded AffineGrid-20's pattern: an If (opset 20) whose branch outputs carry no types, and whose branch for
// the other rank splits a size of 5 into 4 parts (num_outputs), which cannot be done. That branch never runs; onnx
// and ONNX Runtime infer the Split without failing, and the kernel refuses it at run time only if it does run.
TEST_CASE("an If whose untaken branch holds a Split that cannot be done loads, its output typed from the other branch") {
  for (const std::int64_t size : {5, 6}) {  // 5 or 6 into 4 parts of 2 leave -1 or 0 for the last
    CAPTURE(size);
    onnx::ModelProto m = test::relu_model();
    set_opset(m, 20, 9);
    auto* g = m.mutable_graph();
    g->clear_node();
    g->clear_input();
    g->clear_output();
    test::set_tensor_type(g->add_input(), "cond", onnx::TensorProto::BOOL, {});
    test::set_tensor_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {size});
    auto* out = g->add_output();
    out->set_name("y");
    out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    auto* iff = test::add_node(g, "if", "If", {"cond"}, {"y"});
    auto* then_a = iff->add_attribute();
    then_a->set_name("then_branch");
    then_a->set_type(onnx::AttributeProto::GRAPH);
    auto* tg = then_a->mutable_g();
    tg->set_name("then");
    tg->add_output()->set_name("t0");  // no type, as the expanded function writes it
    auto* split = test::add_node(tg, "split", "Split", {"x"}, {"t0", "t1", "t2", "t3"});
    auto* num = split->add_attribute();
    num->set_name("num_outputs");
    num->set_type(onnx::AttributeProto::INT);
    num->set_i(4);
    auto* else_a = iff->add_attribute();
    else_a->set_name("else_branch");
    else_a->set_type(onnx::AttributeProto::GRAPH);
    auto* eg = else_a->mutable_g();
    eg->set_name("else");
    eg->add_output()->set_name("e");
    test::add_node(eg, "same", "Identity", {"x"}, {"e"});
    auto r = load_bytes(m);
    REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
    const auto& y = r->graph.value(r->graph.find_value("y")).type;
    CHECK(y.elem == element_type::float32);
  }
}

TEST_CASE("every operator version of opset 27 resolves: since_version from the schema table") {
  auto m = test::relu_model();
  set_opset(m, 27, 13);
  auto r = load_bytes(m);
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  CHECK(r->graph.node(0).since_version == 14);  // Relu-14 is the newest Relu
  auto ml = test::relu_model();
  set_opset(ml, 26, 12);
  ml.mutable_graph()->mutable_node(0)->set_op_type("Identity");
  auto r2 = load_bytes(ml);
  REQUIRE_MESSAGE(r2.has_value(), r2.status().to_string());
  CHECK(r2->graph.node(0).since_version == 25);
}

TEST_CASE("the fields of IR 10 and 11 survive load and save: metadata on nodes and graphs, overloads, configurations") {
  test::temp_dir dir;
  auto m = reduce_mean18();
  m.set_ir_version(11);
  auto* n = m.mutable_graph()->mutable_node(0);
  // NodeProto: metadata_props = 9, device_configurations = 10 (kept as bytes); GraphProto: metadata_props = 16;
  // ModelProto: configuration = 26.
  auto* nu = n->GetReflection()->MutableUnknownFields(n);
  nu->AddLengthDelimited(9, entry("source", "torch.nn.Linear").SerializeAsString());
  nu->AddLengthDelimited(9, entry("line", "42").SerializeAsString());
  nu->AddLengthDelimited(10, std::string("\x0a\x03" "cfg", 5));  // NodeDeviceConfigurationProto{configuration_id}
  auto* g = m.mutable_graph();
  g->GetReflection()->MutableUnknownFields(g)->AddLengthDelimited(16, entry("graph_key", "graph value").SerializeAsString());
  m.GetReflection()->MutableUnknownFields(&m)->AddLengthDelimited(26, std::string("\x0a\x03" "cfg", 5));
  auto* meta = m.add_metadata_props();
  meta->set_key("model_key");
  meta->set_value("model value");

  auto r = load_model(write(dir.path(), m));
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  const auto& nd = r->graph.node(0);
  REQUIRE(nd.metadata.size() == 2);
  CHECK(nd.metadata[0] == std::pair<std::string, std::string>("source", "torch.nn.Linear"));
  CHECK(nd.metadata[1] == std::pair<std::string, std::string>("line", "42"));
  CHECK_FALSE(nd.ir_extra.empty());
  REQUIRE(r->graph.metadata().size() == 1);
  CHECK(r->graph.metadata()[0].second == "graph value");
  CHECK_FALSE(r->ir_extra.empty());

  const auto out = dir.path() / "saved.onnx";
  REQUIRE(save_model(*r, out).ok());
  onnx::ModelProto back;
  REQUIRE(back.ParseFromString(test::read_file(out)));
  CHECK(back.ir_version() == 11);
  CHECK(back.opset_import(0).version() == 18);
  REQUIRE(back.metadata_props_size() == 1);
  const auto& bu = back.graph().node(0).GetReflection()->GetUnknownFields(back.graph().node(0));
  int meta_fields = 0, device_fields = 0;
  for (int i = 0; i < bu.field_count(); ++i) {
    meta_fields += bu.field(i).number() == 9;
    device_fields += bu.field(i).number() == 10 && bu.field(i).length_delimited() == std::string("\x0a\x03" "cfg", 5);
  }
  CHECK(meta_fields == 2);
  CHECK(device_fields == 1);
  const auto& gu = back.graph().GetReflection()->GetUnknownFields(back.graph());
  REQUIRE(gu.field_count() == 1);
  CHECK(gu.field(0).number() == 16);
  const auto& mu = back.GetReflection()->GetUnknownFields(back);
  REQUIRE(mu.field_count() == 1);
  CHECK(mu.field(0).number() == 26);

  // And it loads again with the same content.
  auto again = load_model(out);
  REQUIRE_MESSAGE(again.has_value(), again.status().to_string());
  CHECK(again->graph.node(0).metadata == nd.metadata);
  CHECK(again->graph.metadata() == r->graph.metadata());
}

TEST_CASE("function overloads (IR 10): a node calls the function of its (domain, name, overload)") {
  auto m = test::relu_model();
  set_opset(m, 18);
  auto* op = m.add_opset_import();
  op->set_domain("custom");
  op->set_version(1);
  // Two functions custom.Act: overload "relu" (Relu) and overload "neg" (Neg); the node asks for "neg".
  for (const auto& [overload, body] : {std::pair<std::string, std::string>{"relu", "Relu"}, {"neg", "Neg"}}) {
    auto* f = m.add_functions();
    f->set_name("Act");
    f->set_domain("custom");
    f->add_input("a");
    f->add_output("b");
    auto* fo = f->add_opset_import();
    fo->set_domain("");
    fo->set_version(18);
    auto* fc = f->add_opset_import();  // onnx's expansion wants the function's own domain imported too
    fc->set_domain("custom");
    fc->set_version(1);
    auto* bn = f->add_node();
    bn->set_op_type(body);
    bn->add_input("a");
    bn->add_output("b");
    f->GetReflection()->MutableUnknownFields(f)->AddLengthDelimited(13, overload);
  }
  auto* n = m.mutable_graph()->mutable_node(0);
  n->set_op_type("Act");
  n->set_domain("custom");
  n->GetReflection()->MutableUnknownFields(n)->AddLengthDelimited(8, "neg");
  auto r = load_bytes(m);
  REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  REQUIRE(r->functions.size() == 2);
  CHECK(r->functions[0].overload == "relu");
  CHECK(r->functions[1].overload == "neg");
  CHECK(r->graph.node(0).overload == "neg");
  auto body = expand_function(*r, r->graph, 0);
  REQUIRE_MESSAGE(body.has_value(), body.status().to_string());
  REQUIRE(body->has_value());
  REQUIRE((*body)->size() == 1);
  CHECK((**body)[0].n.op_type == "Neg");
}

TEST_CASE("models beyond onnx 1.12 are checked against the schema table, with messages that name the node") {
  struct bad {
    const char* name;
    std::function<void(onnx::ModelProto&)> edit;
    const char* message;
  };
  const bad cases[] = {
      {"an opset beyond 27", [](onnx::ModelProto& m) { m.mutable_opset_import(0)->set_version(28); },
       "opset 28 of domain '' (node 'mean', ReduceMean) is not supported: this build knows versions 1 to 27"},
      {"an attribute the version does not have",
       [](onnx::ModelProto& m) {
         auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
         a->set_name("axes");  // an attribute up to ReduceMean-13, an input from 18
         a->set_type(onnx::AttributeProto::INTS);
         a->add_ints(1);
       },
       "node 'mean' (ReduceMean): ReduceMean-18 has no attribute 'axes'"},
      {"an attribute of the wrong type",
       [](onnx::ModelProto& m) {
         auto* a = m.mutable_graph()->mutable_node(0)->mutable_attribute(0);
         a->set_type(onnx::AttributeProto::FLOAT);
         a->set_f(0);
       },
       "attribute 'keepdims' is of type 1; ReduceMean-18 takes int"},
      {"too many inputs", [](onnx::ModelProto& m) { m.mutable_graph()->mutable_node(0)->add_input("axes"); },
       "has 3 inputs; ReduceMean-18 takes 1 to 2"},
      {"an operator that does not exist at the opset",
       [](onnx::ModelProto& m) { m.mutable_graph()->mutable_node(0)->set_op_type("ReduceMeen"); },
       "node 'mean' (ReduceMeen): no such operator in opset 18 of domain ''"},
      {"an operator removed at the opset",
       [](onnx::ModelProto& m) {
         m.mutable_opset_import(0)->set_version(20);
         auto* n = m.mutable_graph()->mutable_node(0);
         n->set_op_type("GroupNormalization");
         n->clear_attribute();
       },
       "no such operator in opset 20 of domain '' (its versions: 18 (deprecated), 21)"},
      {"an IR version beyond 13", [](onnx::ModelProto& m) { m.set_ir_version(14); },
       "IR version 14 is not supported (this build reads 1 to 13)"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    auto m = reduce_mean18();
    c.edit(m);
    auto r = load_bytes(m);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.status().code() == errc::invalid_graph);
    CHECK_MESSAGE(r.status().message().find(c.message) != std::string::npos, r.status().message());
  }
}

TEST_CASE("tensors of the ONNX 1.22 element types: packed sizes checked, naming the tensor") {
  const auto with_initializer = [](int type, std::initializer_list<std::int64_t> dims, std::string raw) {
    auto m = test::relu_model();
    set_opset(m, 25);
    auto* g = m.mutable_graph();
    g->clear_node();
    g->clear_input();
    g->clear_output();
    onnx::TensorProto t;
    t.set_name("packed");
    t.set_data_type(type);
    for (auto d : dims) t.add_dims(d);
    t.set_raw_data(raw);
    *g->add_initializer() = t;
    auto* out = g->add_output();
    out->set_name("y");
    test::add_node(g, "id", "Identity", {"packed"}, {"y"});
    return m;
  };
  // 5 int4 values take 3 bytes; 5 int2 values take 2; 3 float8 values take 3.
  auto ok = load_bytes(with_initializer(onnx::TensorProto::INT8 + 19, {5}, std::string("\x21\x43\x05", 3)));  // int4 = 22
  REQUIRE_MESSAGE(ok.has_value(), ok.status().to_string());
  const auto& t = *ok->graph.value(ok->graph.find_value("packed")).initializer;
  CHECK(t.type() == element_type::int4);
  CHECK(t.element_count() == 5);
  CHECK(t.byte_size() == 3);
  auto y = ok->graph.value(ok->graph.find_value("y")).type;
  CHECK(y.elem == element_type::int4);

  auto ok2 = load_bytes(with_initializer(26, {5}, std::string("\xe4\x01", 2)));  // int2
  REQUIRE_MESSAGE(ok2.has_value(), ok2.status().to_string());
  auto ok3 = load_bytes(with_initializer(17, {3}, std::string("\x38\x40\x7f", 3)));  // float8e4m3fn
  REQUIRE_MESSAGE(ok3.has_value(), ok3.status().to_string());

  auto bad = load_bytes(with_initializer(22, {5}, std::string("\x21\x43", 2)));
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.status().code() == errc::invalid_graph);
  CHECK_MESSAGE(bad.status().message().find("tensor 'packed': has 2 bytes of raw_data, expected 3 (5 x int4, packed 2 to a byte)") !=
                    std::string::npos,
                bad.status().message());
}

TEST_CASE("convert_opset: opset 13 to 21, the reductions' axes become inputs, the IR version follows") {
  model m;
  m.ir_version = 7;
  m.opsets = {{"", 13}};
  auto& g = m.graph;
  g.add_input("x", type_info::tensor_of(element_type::float32, shape{2, 3, 4}));
  node mean;
  mean.name = "mean";
  mean.op_type = "ReduceMean";
  mean.attributes.set("axes", std::vector<std::int64_t>{1});
  mean.attributes.set("keepdims", std::int64_t{0});
  g.add_node(std::move(mean), {"x"}, {"m"});
  node relu;
  relu.name = "relu";
  relu.op_type = "Relu";
  g.add_node(std::move(relu), {"m"}, {"y"});
  g.add_output("y");
  REQUIRE(convert_opset(m, 21).ok());
  CHECK(m.opset("") == 21);
  CHECK(m.ir_version == 10);
  const auto& nd = m.graph.node(0);
  CHECK_FALSE(nd.attributes.contains("axes"));
  REQUIRE(nd.inputs.size() == 2);
  const auto& axes = m.graph.value(nd.inputs[1]);
  REQUIRE(axes.initializer.has_value());
  CHECK(axes.initializer->typed<std::int64_t>()[0] == 1);
  // It saves and loads back as an opset 21 model whose ReduceMean is version 18.
  const auto bytes = serialize_model(m);
  REQUIRE_MESSAGE(bytes.has_value(), bytes.status().to_string());
  auto back = load_model(std::as_bytes(std::span(bytes->data(), bytes->size())));
  REQUIRE_MESSAGE(back.has_value(), back.status().to_string());
  CHECK(back->graph.node(0).since_version == 18);
  CHECK(back->graph.node(1).since_version == 14);

  // Refusals: downgrades, an IR version that does not fit, an operator the target opset no longer has.
  CHECK(convert_opset(m, 17).code() == errc::invalid_argument);
  model m2 = m;
  CHECK(convert_opset(m2, 23, 9).message().find("IR version 9 does not fit opset 23") != std::string::npos);
  model up;
  up.opsets = {{"", 9}};
  up.graph.add_input("x");
  node us;
  us.name = "up";
  us.op_type = "Upsample";
  up.graph.add_node(std::move(us), {"x", "s"}, {"y"});
  up.graph.add_output("y");
  const auto st = convert_opset(up, 10);
  CHECK(st.code() == errc::not_implemented);
  CHECK_MESSAGE(st.message().find("opset 10 has no Upsample") != std::string::npos, st.message());
}
