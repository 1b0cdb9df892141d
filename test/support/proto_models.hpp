#pragma once
// Small ONNX models written directly with onnx's protobuf classes, for the I/O tests (good and bad inputs).
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace epstack::test {

inline void set_tensor_type(onnx::ValueInfoProto* vi, const std::string& name, int elem, std::initializer_list<std::int64_t> dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* sh = tt->mutable_shape();
  for (auto d : dims) sh->add_dim()->set_dim_value(d);
}

inline onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& name, const std::string& op,
                                 std::initializer_list<std::string> in, std::initializer_list<std::string> out) {
  auto* n = g->add_node();
  n->set_name(name);
  n->set_op_type(op);
  for (const auto& i : in) n->add_input(i);
  for (const auto& o : out) n->add_output(o);
  return n;
}

inline onnx::TensorProto float_tensor(const std::string& name, std::initializer_list<std::int64_t> dims,
                                      const std::vector<float>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (auto d : dims) t.add_dims(d);
  t.set_raw_data(values.data(), values.size() * sizeof(float));
  return t;
}

/// x float[2,3] -> Relu -> y, opset 13, IR 8.
inline onnx::ModelProto relu_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("epstack-test");
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("relu_graph");
  set_tensor_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3});
  set_tensor_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {2, 3});
  add_node(g, "relu", "Relu", {"x"}, {"y"});
  return m;
}

/// x float[2,2] + w (initializer) -> y, opset 13.
inline onnx::ModelProto add_model(const std::vector<float>& w = {1, 2, 3, 4}) {
  auto m = relu_model();
  auto* g = m.mutable_graph();
  g->clear_node();
  g->clear_input();
  g->clear_output();
  g->set_name("add_graph");
  set_tensor_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 2});
  set_tensor_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {2, 2});
  *g->add_initializer() = float_tensor("w", {2, 2}, w);
  add_node(g, "add", "Add", {"x", "w"}, {"y"});
  return m;
}

/// Makes initializer `name` of `m` external: location, offset and length as given (an empty string omits the entry).
inline void make_external(onnx::ModelProto& m, const std::string& name, const std::string& location,
                          const std::string& offset = "", const std::string& length = "") {
  for (auto& t : *m.mutable_graph()->mutable_initializer()) {
    if (t.name() != name) continue;
    t.clear_raw_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    const auto add = [&](const char* k, const std::string& v) {
      if (v.empty()) return;
      auto* e = t.add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    add("location", location);
    add("offset", offset);
    add("length", length);
  }
}

inline std::string floats_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

}  // namespace epstack::test
