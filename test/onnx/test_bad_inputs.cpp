// Hand-made bad inputs, each with the errc it must get and words its message must contain. None may crash (the CI
// runs this under AddressSanitizer and UndefinedBehaviorSanitizer).
#include <epstack/onnx/onnx_io.hpp>

#include "../support/proto_models.hpp"
#include "../support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

using namespace epstack;
namespace fs = std::filesystem;

namespace {

struct bad_case {
  const char* name;
  errc expected;
  const char* message_part;
  // Prepares the case in `dir` and returns the path of the model to load ("" means: load `buffer` instead).
  std::function<fs::path(const fs::path& dir, std::string& buffer)> make;
};

fs::path write_model(const fs::path& dir, const onnx::ModelProto& m, const char* name = "m.onnx") {
  test::write_file(dir / name, m.SerializeAsString());
  return dir / name;
}

// A model whose initializer "w" lives in `file` (with the given location/offset/length entries).
fs::path external_case(const fs::path& dir, const std::string& location, const std::string& offset,
                       const std::string& length, bool make_file = true) {
  auto m = test::add_model();
  if (make_file) test::write_file(dir / "w.bin", test::floats_bytes({1, 2, 3, 4}));
  test::make_external(m, "w", location, offset, length);
  return write_model(dir, m);
}

onnx::AttributeProto* add_attr(onnx::NodeProto* n, const char* name, onnx::AttributeProto::AttributeType t) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(t);
  return a;
}

// A Constant node `name` in `g` whose value (output `name`) is an int64 tensor of dims [1], returned for the caller
// to give its data.
onnx::TensorProto* add_int64_constant(onnx::GraphProto* g, const char* name) {
  auto* node = test::add_node(g, name, "Constant", {}, {name});
  auto* t = add_attr(node, "value", onnx::AttributeProto::TENSOR)->mutable_t();
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(1);
  return t;
}

// relu_model's header (IR `ir`, ai.onnx `opset`) with an empty graph, for a case to fill.
onnx::ModelProto bare_model(int opset, int ir = 8) {
  auto m = test::relu_model();
  m.set_ir_version(ir);
  m.mutable_opset_import(0)->set_version(opset);
  auto* g = m.mutable_graph();
  g->clear_node();
  g->clear_input();
  g->clear_output();
  return m;
}

std::vector<bad_case> cases() {
  std::vector<bad_case> c;
  c.push_back({"empty file", errc::invalid_protobuf, "is empty", [](const fs::path& d, std::string&) {
                 test::write_file(d / "m.onnx", "");
                 return d / "m.onnx";
               }});
  c.push_back({"truncated model", errc::invalid_protobuf, "protobuf parsing failed", [](const fs::path& d, std::string&) {
                 auto s = test::add_model().SerializeAsString();
                 test::write_file(d / "m.onnx", s.substr(0, s.size() / 2));
                 return d / "m.onnx";
               }});
  c.push_back({"random bytes", errc::invalid_protobuf, "protobuf parsing failed", [](const fs::path&, std::string& b) {
                 std::mt19937 rng(7);
                 b.resize(4096);
                 for (auto& ch : b) ch = static_cast<char>(rng() & 0xff);
                 b[0] = static_cast<char>(0xff);  // an invalid tag: field 31, wire type 7
                 return fs::path();
               }});
  c.push_back({"missing model file", errc::no_such_file, "does not exist",
               [](const fs::path& d, std::string&) { return d / "absent.onnx"; }});
  c.push_back({"model path is a folder", errc::no_such_file, "not a regular file",
               [](const fs::path& d, std::string&) { return d; }});
  c.push_back({"no graph", errc::invalid_graph, "has no graph", [](const fs::path& d, std::string&) {
                 onnx::ModelProto m;
                 m.set_ir_version(8);
                 return write_model(d, m);
               }});
  c.push_back({"no ir_version", errc::invalid_graph, "ir_version", [](const fs::path& d, std::string&) {
                 auto m = test::relu_model();
                 m.clear_ir_version();
                 return write_model(d, m);
               }});
  c.push_back({"no opset import", errc::invalid_graph, "must specify opset_import", [](const fs::path& d, std::string&) {
                 auto m = test::relu_model();
                 m.clear_opset_import();
                 return write_model(d, m);
               }});
  c.push_back({"wrong attribute type", errc::invalid_graph, "Mismatched attribute type", [](const fs::path& d, std::string&) {
                 auto m = test::relu_model();
                 auto* n = m.mutable_graph()->mutable_node(0);
                 n->set_op_type("Softmax");
                 add_attr(n, "axis", onnx::AttributeProto::FLOAT)->set_f(1.0f);
                 return write_model(d, m);
               }});
  c.push_back({"attribute type and value disagree", errc::invalid_graph, "type field and data field mismatch",
               [](const fs::path& d, std::string&) {
                 auto m = test::relu_model();
                 auto* n = m.mutable_graph()->mutable_node(0);
                 n->set_op_type("Softmax");
                 add_attr(n, "axis", onnx::AttributeProto::INT)->set_f(1.0f);
                 return write_model(d, m);
               }});
  c.push_back({"unknown attribute", errc::invalid_graph, "Unrecognized attribute", [](const fs::path& d, std::string&) {
                 auto m = test::relu_model();
                 add_attr(m.mutable_graph()->mutable_node(0), "colour", onnx::AttributeProto::INT)->set_i(1);
                 return write_model(d, m);
               }});
  c.push_back({"cycle", errc::invalid_graph, "has a cycle", [](const fs::path& d, std::string&) {
                 auto m = test::relu_model();
                 auto* g = m.mutable_graph();
                 g->clear_node();
                 test::add_node(g, "a", "Add", {"x", "b_out"}, {"a_out"});
                 test::add_node(g, "b", "Relu", {"a_out"}, {"b_out"});
                 test::add_node(g, "c", "Neg", {"a_out"}, {"y"});
                 return write_model(d, m);
               }});
  c.push_back({"value defined twice", errc::invalid_graph, "defined twice", [](const fs::path& d, std::string&) {
                 auto m = test::relu_model();
                 test::add_node(m.mutable_graph(), "again", "Neg", {"x"}, {"y"});
                 return write_model(d, m);
               }});
  c.push_back({"graph input redefined by a node", errc::invalid_graph, "defined twice", [](const fs::path& d, std::string&) {
                 auto m = test::relu_model();
                 test::add_node(m.mutable_graph(), "shadow", "Neg", {"y"}, {"x"});
                 return write_model(d, m);
               }});
  c.push_back({"undefined input", errc::invalid_graph, "ghost", [](const fs::path& d, std::string&) {
                 auto m = test::relu_model();
                 m.mutable_graph()->mutable_node(0)->set_input(0, "ghost");
                 return write_model(d, m);
               }});
  c.push_back({"graph output never produced", errc::invalid_graph, "nowhere", [](const fs::path& d, std::string&) {
                 auto m = test::relu_model();
                 test::set_tensor_type(m.mutable_graph()->add_output(), "nowhere", onnx::TensorProto::FLOAT, {1});
                 return write_model(d, m);
               }});
  c.push_back({"unknown domain", errc::invalid_graph, "No opset import for domain 'com.nowhere'", [](const fs::path& d, std::string&) {
                 auto m = test::relu_model();
                 m.mutable_graph()->mutable_node(0)->set_domain("com.nowhere");
                 return write_model(d, m);
               }});
  c.push_back({"unknown op in the ONNX domain", errc::invalid_graph, "No Op registered for Frobnicate",
               [](const fs::path& d, std::string&) {
                 auto m = test::relu_model();
                 m.mutable_graph()->mutable_node(0)->set_op_type("Frobnicate");
                 return write_model(d, m);
               }});
  c.push_back({"opset newer than onnx knows", errc::invalid_graph, "opset 1000 of domain '' (node 'relu', Relu) is not supported: this build knows versions 1 to 27", [](const fs::path& d, std::string&) {
                 auto m = test::relu_model();
                 m.mutable_opset_import(0)->set_version(1000);
                 return write_model(d, m);
               }});
  c.push_back({"negative dimension in an initializer", errc::invalid_graph, "negative dimension -2",
               [](const fs::path& d, std::string&) {
                 auto m = test::add_model();
                 auto* w = m.mutable_graph()->mutable_initializer(0);
                 w->set_dims(0, -2);
                 return write_model(d, m);
               }});
  c.push_back({"raw_data shorter than the dims", errc::invalid_graph, "bytes of raw_data, expected 16",
               [](const fs::path& d, std::string&) {
                 auto m = test::add_model();
                 m.mutable_graph()->mutable_initializer(0)->set_raw_data(std::string(12, '\0'));
                 return write_model(d, m);
               }});
  c.push_back({"element count overflow", errc::invalid_graph, "too many elements", [](const fs::path& d, std::string&) {
                 auto m = test::add_model();
                 auto* w = m.mutable_graph()->mutable_initializer(0);
                 w->set_dims(0, std::int64_t{1} << 40);
                 w->set_dims(1, std::int64_t{1} << 40);
                 return write_model(d, m);
               }});
  c.push_back({"invalid element type", errc::invalid_graph, "invalid data_type 99", [](const fs::path& d, std::string&) {
                 auto m = test::add_model();
                 m.mutable_graph()->mutable_initializer(0)->set_data_type(99);
                 return write_model(d, m);
               }});
  c.push_back({"typed data count mismatch", errc::invalid_graph, "values in int64_data, expected 4",
               [](const fs::path& d, std::string&) {
                 auto m = test::add_model();
                 auto* w = m.mutable_graph()->mutable_initializer(0);
                 w->clear_raw_data();
                 w->set_data_type(onnx::TensorProto::INT64);
                 w->add_int64_data(1);
                 // keep the graph well-typed for the checker by making x int64 too
                 m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
                 m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
                 return write_model(d, m);
               }});
  c.push_back({"shape inference type error", errc::invalid_graph, "shape inference", [](const fs::path& d, std::string&) {
                 auto m = test::add_model();
                 m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
                 return write_model(d, m);
               }});
  c.push_back({"subgraph uses an undefined outer value", errc::invalid_graph, "", [](const fs::path& d, std::string&) {
                 auto m = test::relu_model();
                 auto* g = m.mutable_graph();
                 g->clear_node();
                 test::set_tensor_type(g->add_input(), "cond", onnx::TensorProto::BOOL, {});
                 auto* iff = test::add_node(g, "if", "If", {"cond"}, {"y"});
                 for (const char* b : {"then_branch", "else_branch"}) {
                   auto* sg = add_attr(iff, b, onnx::AttributeProto::GRAPH)->mutable_g();
                   sg->set_name(b);
                   test::set_tensor_type(sg->add_output(), std::string(b) + "_o", onnx::TensorProto::FLOAT, {2, 3});
                   test::add_node(sg, std::string(b) + "_n", "Relu", {"not_anywhere"}, {std::string(b) + "_o"});
                 }
                 return write_model(d, m);
               }});
  // Found by the fuzzer: onnx 1.12's inference functions crash on these; the loader's guards refuse them.
  c.push_back({"Conv with a zero stride", errc::invalid_graph, "attribute 'strides' holds 0", [](const fs::path& d, std::string&) {
                 auto m = bare_model(13);
                 auto* g = m.mutable_graph();
                 test::set_tensor_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {1, 1, 8, 8});
                 test::set_tensor_type(g->add_input(), "w", onnx::TensorProto::FLOAT, {1, 1, 3, 3});
                 test::set_tensor_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {1, 1, 4, 8});
                 auto* n = test::add_node(g, "conv", "Conv", {"x", "w"}, {"y"});
                 auto* st = add_attr(n, "strides", onnx::AttributeProto::INTS);
                 st->add_ints(2);
                 st->add_ints(0);
                 return write_model(d, m);
               }});
  c.push_back({"ConvTranspose on a rank-2 input", errc::invalid_graph, "at least 3", [](const fs::path& d, std::string&) {
                 auto m = bare_model(11);
                 auto* g = m.mutable_graph();
                 test::set_tensor_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {1, 1});
                 test::set_tensor_type(g->add_input(), "w", onnx::TensorProto::FLOAT, {1, 2, 3});
                 test::set_tensor_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {1});
                 test::add_node(g, "convt", "ConvTranspose", {"x", "w"}, {"y"});
                 return write_model(d, m);
               }});
  // Found by the fuzzer (an opset-22 ConvTranspose whose weights were declared a sparse tensor): onnx's inference reads
  // every input as a tensor; type checking, which refuses it, runs after.
  c.push_back({"a sparse tensor where an operator takes a tensor", errc::invalid_graph, "input 1 is a sparse tensor",
               [](const fs::path& d, std::string&) {
                 auto m = bare_model(22, 10);
                 auto* g = m.mutable_graph();
                 test::set_tensor_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {1, 1, 3, 4, 5});
                 auto* w = g->add_input();
                 w->set_name("w");
                 auto* st = w->mutable_type()->mutable_sparse_tensor_type();
                 st->set_elem_type(onnx::TensorProto::FLOAT);
                 for (std::int64_t d2 : {1, 2, 3, 3, 3}) st->mutable_shape()->add_dim()->set_dim_value(d2);
                 test::set_tensor_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {1, 2, 5, 6, 7});
                 test::add_node(g, "convt", "ConvTranspose", {"x", "w"}, {"y"});
                 return write_model(d, m);
               }});
  // Found by the fuzzer (a Constant in a Loop body whose int64 raw_data lost bytes): onnx 1.12's ParseData copies
  // raw_data into a vector of raw_data / 8 values, so 3 bytes went to a null pointer. Every constant input an
  // inference function can read is checked against its dims and type first, in the main graph and in subgraphs.
  for (const bool in_branch : {false, true}) {
    c.push_back({in_branch ? "Unsqueeze axes of 3 bytes of int64 raw_data, in an If branch"
                           : "Unsqueeze axes of 3 bytes of int64 raw_data",
                 errc::invalid_graph, "has 3 bytes of raw_data, expected 8 (1 x int64)", [in_branch](const fs::path& d, std::string&) {
                   auto m = bare_model(13);
                   auto* g = m.mutable_graph();
                   test::set_tensor_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3});
                   test::set_tensor_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {1, 2, 3});
                   onnx::GraphProto* body = g;
                   if (in_branch) {
                     test::set_tensor_type(g->add_input(), "cond", onnx::TensorProto::BOOL, {});
                     auto* iff = test::add_node(g, "if", "If", {"cond"}, {"y"});
                     for (const char* b : {"then_branch", "else_branch"}) {
                       auto* sg = add_attr(iff, b, onnx::AttributeProto::GRAPH)->mutable_g();
                       sg->set_name(b);
                       test::set_tensor_type(sg->add_output(), std::string(b) + "_y", onnx::TensorProto::FLOAT, {1, 2, 3});
                       if (std::string_view(b) == "else_branch") {
                         add_int64_constant(sg, "axes_ok")->add_int64_data(0);
                         test::add_node(sg, "unsqueeze_ok", "Unsqueeze", {"x", "axes_ok"}, {"else_branch_y"});
                       } else {
                         body = sg;
                       }
                     }
                   }
                   add_int64_constant(body, "axes")->set_raw_data(std::string("\0\0\0", 3));
                   test::add_node(body, "unsqueeze", "Unsqueeze", {"x", "axes"}, {in_branch ? "then_branch_y" : "y"});
                   return write_model(d, m);
                 }});
  }
  // Found by the fuzzer on models of opsets beyond onnx 1.12 (whose checker does not run on them): onnx's inference
  // reads the type of every main-graph input.
  c.push_back({"a graph input whose type names no kind (opset 25)", errc::invalid_graph, "names no kind",
               [](const fs::path& d, std::string&) {
                 auto m = test::relu_model();
                 m.set_ir_version(11);
                 m.mutable_opset_import(0)->set_version(25);
                 m.mutable_graph()->mutable_input(0)->mutable_type()->Clear();
                 return write_model(d, m);
               }});
  c.push_back({"a graph input without a type (opset 25)", errc::invalid_graph, "input 'x': has no type",
               [](const fs::path& d, std::string&) {
                 auto m = test::relu_model();
                 m.set_ir_version(11);
                 m.mutable_opset_import(0)->set_version(25);
                 m.mutable_graph()->mutable_input(0)->clear_type();
                 return write_model(d, m);
               }});
  c.push_back({"a value_info sequence type without its element type", errc::invalid_graph, "sequence type has no element type",
               [](const fs::path& d, std::string&) {
                 auto m = test::relu_model();
                 auto* vi = m.mutable_graph()->add_value_info();
                 vi->set_name("y");
                 vi->mutable_type()->mutable_sequence_type();
                 return write_model(d, m);
               }});
  c.push_back({"graph input with an undefined element type", errc::invalid_graph, "not a defined ONNX element type",
               [](const fs::path& d, std::string&) {
                 auto m = test::relu_model();
                 m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(0);
                 return write_model(d, m);
               }});
  c.push_back({"external data: absolute path", errc::invalid_graph, "is absolute",
               [](const fs::path& d, std::string&) { return external_case(d, (d / "w.bin").string(), "", ""); }});
  c.push_back({"external data: '..' escapes the folder", errc::invalid_graph, "contains '..'",
               [](const fs::path& d, std::string&) {
                 fs::create_directories(d / "sub");
                 test::write_file(d / "w.bin", test::floats_bytes({1, 2, 3, 4}));
                 auto m = test::add_model();
                 test::make_external(m, "w", "../w.bin");
                 return write_model(d / "sub", m);
               }});
  c.push_back({"external data: symlink leaves the folder", errc::invalid_graph, "outside the folder",
               [](const fs::path& d, std::string&) {
                 fs::create_directories(d / "sub");
                 test::write_file(d / "w.bin", test::floats_bytes({1, 2, 3, 4}));
                 fs::create_symlink(d / "w.bin", d / "sub" / "link.bin");
                 auto m = test::add_model();
                 test::make_external(m, "w", "link.bin");
                 return write_model(d / "sub", m);
               }});
  c.push_back({"external data: missing file", errc::no_such_file, "does not exist",
               [](const fs::path& d, std::string&) { return external_case(d, "absent.bin", "", "", false); }});
  c.push_back({"external data: location is a folder", errc::invalid_graph, "not a regular file",
               [](const fs::path& d, std::string&) {
                 fs::create_directories(d / "folder.bin");
                 return external_case(d, "folder.bin", "", "", false);
               }});
  c.push_back({"external data: empty location", errc::invalid_graph, "no 'location'",
               [](const fs::path& d, std::string&) { return external_case(d, "", "", ""); }});
  c.push_back({"external data: offset beyond the file", errc::invalid_graph, "beyond the end",
               [](const fs::path& d, std::string&) { return external_case(d, "w.bin", "1000", "16"); }});
  c.push_back({"external data: length beyond the file", errc::invalid_graph, "beyond the end",
               [](const fs::path& d, std::string&) { return external_case(d, "w.bin", "8", "16"); }});
  c.push_back({"external data: short file, no length", errc::invalid_graph, "beyond the end",
               [](const fs::path& d, std::string&) {
                 auto p = external_case(d, "w.bin", "", "");
                 test::write_file(d / "w.bin", test::floats_bytes({1, 2}));
                 return p;
               }});
  c.push_back({"external data: length disagrees with dims", errc::invalid_graph, "does not match the tensor's 16 bytes",
               [](const fs::path& d, std::string&) { return external_case(d, "w.bin", "0", "8"); }});
  c.push_back({"external data: offset not a number", errc::invalid_graph, "'offset' is not a non-negative integer",
               [](const fs::path& d, std::string&) { return external_case(d, "w.bin", "12abc", "16"); }});
  c.push_back({"external data: negative offset", errc::invalid_graph, "'offset' is not a non-negative integer",
               [](const fs::path& d, std::string&) { return external_case(d, "w.bin", "-4", "16"); }});
  c.push_back({"external data from a buffer without a folder", errc::invalid_argument, "memory buffer",
               [](const fs::path& d, std::string& b) {
                 test::write_file(d / "w.bin", test::floats_bytes({1, 2, 3, 4}));
                 auto m = test::add_model();
                 test::make_external(m, "w", "w.bin");
                 b = m.SerializeAsString();
                 return fs::path();
               }});
  c.push_back({"a Constant claiming a 64 TB tensor with 2 values", errc::invalid_graph, "has 2 values in float_data, expected",
               [](const fs::path& d, std::string&) {
                 // Found by the fuzzer: the tensor was allocated before its values were counted.
                 auto m = test::add_model();
                 auto* k = test::add_node(m.mutable_graph(), "k", "Constant", {}, {"unused"});
                 auto* v = add_attr(k, "value", onnx::AttributeProto::TENSOR);
                 auto* t = v->mutable_t();
                 t->set_data_type(onnx::TensorProto::FLOAT);
                 t->add_dims(std::int64_t{1} << 22);  // 2^44 values: allocating them first would fail or take the
                 t->add_dims(std::int64_t{1} << 22);  // machine's memory; counting them first is immediate
                 t->add_float_data(1);
                 t->add_float_data(2);
                 return write_model(d, m);
               }});
  return c;
}

}  // namespace

TEST_CASE("bad inputs get a clear error with the right code") {
  const auto all = cases();
  CHECK(all.size() >= 25);
  for (const auto& bc : all) {
    const std::string name = bc.name;
    INFO("case: ", name);
    test::temp_dir dir;
    std::string buffer;
    const fs::path p = bc.make(dir.path(), buffer);
    auto r = p.empty() ? load_model(std::as_bytes(std::span(buffer.data(), buffer.size()))) : load_model(p);
    REQUIRE_FALSE(r.has_value());
    INFO("got: ", r.status().to_string());
    CHECK_MESSAGE(r.code() == bc.expected, bc.name, ": ", r.status().to_string());
    CHECK_MESSAGE(r.status().message().find(bc.message_part) != std::string::npos, bc.name, ": ", r.status().to_string());
    if (!p.empty() && !fs::is_directory(p)) {
      // The message names the file it was loading.
      CHECK_MESSAGE(r.status().message().find(p.filename().string()) != std::string::npos, r.status().to_string());
    }
  }
}

TEST_CASE("every truncation of a valid model fails cleanly or loads") {
  const auto bytes = test::add_model().SerializeAsString();
  int failed = 0;
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    auto r = load_model(std::as_bytes(std::span(bytes.data(), n)));
    if (!r) {
      ++failed;
      CHECK((r.code() == errc::invalid_protobuf || r.code() == errc::invalid_graph));
    }
  }
  CHECK(failed > 0);
}

// Valid models (or models whose inference fails part-way) on which onnx 1.12's inference once crashed, found by the
// fuzzer; the loader's guards skip or fail that inference, and the model loads with its declared types.
TEST_CASE("models on which onnx 1.12's inference crashed load") {
  const auto shape_model = [](int opset) { return bare_model(opset, opset > 17 ? 10 : 8); };
  SUBCASE("Sub of a shape sliced to nothing and a one-value tensor (data propagation)") {
    auto m = shape_model(17);
    auto* g = m.mutable_graph();
    test::set_tensor_type(g->add_input(), "w", onnx::TensorProto::FLOAT, {4, 1, 4});
    test::set_tensor_type(g->add_output(), "d", onnx::TensorProto::INT64, {0});
    auto* s = test::add_node(g, "shape", "Shape", {"w"}, {"s"});
    add_attr(s, "start", onnx::AttributeProto::INT)->set_i(3);
    add_attr(s, "end", onnx::AttributeProto::INT)->set_i(3);
    add_int64_constant(g, "one")->add_int64_data(1);
    test::add_node(g, "sub", "Sub", {"s", "one"}, {"d"});
    const auto bytes = m.SerializeAsString();
    auto r = load_model(std::as_bytes(std::span(bytes.data(), bytes.size())));
    REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
    CHECK(r->graph.node_count() == 3);
  }
  SUBCASE("Shape of a value whose inference failed (a Concat of mismatched ranks)") {
    auto m = shape_model(25);
    auto* g = m.mutable_graph();
    test::set_tensor_type(g->add_input(), "a", onnx::TensorProto::FLOAT, {2, 3});
    test::set_tensor_type(g->add_input(), "b", onnx::TensorProto::FLOAT, {2, 3, 4});
    test::set_tensor_type(g->add_output(), "s", onnx::TensorProto::INT64, {2});
    auto* c = test::add_node(g, "concat", "Concat", {"a", "b"}, {"c"});
    add_attr(c, "axis", onnx::AttributeProto::INT)->set_i(0);
    test::add_node(g, "shape", "Shape", {"c"}, {"s"});
    const auto bytes = m.SerializeAsString();
    auto r = load_model(std::as_bytes(std::span(bytes.data(), bytes.size())));
    // Loads (inference is not strict by default), or is refused with a clear error: never a crash.
    if (!r) CHECK(r.code() == errc::invalid_graph);
  }
  SUBCASE("MaxUnpool with indices of unknown shape") {
    auto m = shape_model(22);
    auto* g = m.mutable_graph();
    test::set_tensor_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {1, 1, 2, 2});
    auto* i = g->add_input();
    i->set_name("i");
    i->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
    test::set_tensor_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {1, 1, 4, 4});
    auto* n = test::add_node(g, "unpool", "MaxUnpool", {"x", "i"}, {"y"});
    auto* k = add_attr(n, "kernel_shape", onnx::AttributeProto::INTS);
    k->add_ints(2);
    k->add_ints(2);
    auto* st = add_attr(n, "strides", onnx::AttributeProto::INTS);
    st->add_ints(2);
    st->add_ints(2);
    const auto bytes = m.SerializeAsString();
    auto r = load_model(std::as_bytes(std::span(bytes.data(), bytes.size())));
    REQUIRE_MESSAGE(r.has_value(), r.status().to_string());
  }
}
