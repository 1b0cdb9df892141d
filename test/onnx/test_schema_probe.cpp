// Probes onnx 1.12's shape inference functions through epstack's loader: for every operator schema (every domain and
// version onnx knows), single-node models whose inputs have ranks 0 to 4 (all the same rank, and one input at a time
// off the others) with known and symbolic dimensions, every INT/INTS/FLOAT attribute set to boundary values, and each
// input given as an initializer holding boundary values. Every load must give a model or invalid_graph: a crash (CI
// runs this under AddressSanitizer and UndefinedBehaviorSanitizer) is a missing guard in src/inference_guards.cpp.
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <epstack/onnx/onnx_io.hpp>

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

namespace {

int elem_for(const onnx::OpSchema& s, const std::string& type_str) {
  // A concrete type ("tensor(float)") or a constraint name ("T").
  std::vector<std::string> allowed;
  bool found = false;
  for (const auto& c : s.typeConstraintParams())
    if (c.type_param_str == type_str) {
      allowed = c.allowed_type_strs;
      found = true;
    }
  if (!found) allowed = {type_str};
  static const std::pair<const char*, int> prefs[] = {{"tensor(float)", 1}, {"tensor(int64)", 7}, {"tensor(int32)", 6},
                                                      {"tensor(bool)", 9},  {"tensor(uint8)", 2}, {"tensor(string)", 8},
                                                      {"tensor(double)", 11}, {"tensor(float16)", 10}, {"tensor(int8)", 3}};
  for (const auto& [name, e] : prefs)
    for (const auto& a : allowed)
      if (a == name) return e;
  return -1;  // sequences, maps, optionals: not probed here
}

void add_required_attributes(const onnx::OpSchema& s, onnx::NodeProto& n) {
  for (const auto& [name, a] : s.attributes()) {
    if (!a.required) continue;
    auto* p = n.add_attribute();
    p->set_name(name);
    p->set_type(a.type);
    switch (a.type) {
      case onnx::AttributeProto::FLOAT: p->set_f(1.f); break;
      case onnx::AttributeProto::INT: p->set_i(1); break;
      case onnx::AttributeProto::STRING: p->set_s("a"); break;
      case onnx::AttributeProto::INTS: p->add_ints(1); break;
      case onnx::AttributeProto::FLOATS: p->add_floats(1.f); break;
      case onnx::AttributeProto::STRINGS: p->add_strings("a"); break;
      case onnx::AttributeProto::TENSOR: {
        auto* t = p->mutable_t();
        t->set_data_type(1);
        t->add_float_data(1.f);
        break;
      }
      default: break;
    }
  }
}

// An attribute set to a probing value (replacing a required attribute's default), or none.
struct attr_probe {
  std::string name;
  onnx::AttributeProto::AttributeType type = onnx::AttributeProto::UNDEFINED;
  std::vector<std::int64_t> ints;
  float f = 0;
};
// An input given as an initializer with these values (int64 or float by the input's type), or none.
struct init_probe {
  std::size_t input = static_cast<std::size_t>(-1);
  std::vector<std::int64_t> values;
  bool scalar = false;
};

// One model; ranks[i] < 0 leaves input i without a shape.
std::string make_model(const onnx::OpSchema& s, const std::vector<int>& elems, const std::vector<int>& ranks, bool known,
                       const attr_probe& ap = {}, const init_probe& ip = {}) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain(s.domain());
  op->set_version(s.since_version());
  if (!s.domain().empty()) {
    auto* d = m.add_opset_import();
    d->set_domain("");
    d->set_version(17);
  }
  auto* g = m.mutable_graph();
  g->set_name("probe");
  auto* n = g->add_node();
  n->set_op_type(s.Name());
  n->set_domain(s.domain());
  add_required_attributes(s, *n);
  if (!ap.name.empty()) {
    onnx::AttributeProto* p = nullptr;
    for (auto& a : *n->mutable_attribute())
      if (a.name() == ap.name) p = &a;
    if (p == nullptr) p = n->add_attribute();
    p->Clear();
    p->set_name(ap.name);
    p->set_type(ap.type);
    if (ap.type == onnx::AttributeProto::INT) p->set_i(ap.ints.empty() ? 0 : ap.ints[0]);
    if (ap.type == onnx::AttributeProto::INTS)
      for (auto v : ap.ints) p->add_ints(v);
    if (ap.type == onnx::AttributeProto::FLOAT) p->set_f(ap.f);
    if (ap.type == onnx::AttributeProto::FLOATS) p->add_floats(ap.f);
  }
  for (std::size_t i = 0; i < elems.size(); ++i) {
    const std::string name = "x" + std::to_string(i);
    n->add_input(name);
    if (i == ip.input && (elems[i] == 7 || elems[i] == 1 || elems[i] == 6)) {
      auto* t = g->add_initializer();
      t->set_name(name);
      t->set_data_type(elems[i]);
      if (!ip.scalar) t->add_dims(static_cast<std::int64_t>(ip.values.size()));
      for (auto v : ip.values) {
        if (elems[i] == 7) t->add_int64_data(v);
        else if (elems[i] == 6) t->add_int32_data(static_cast<std::int32_t>(v));
        else t->add_float_data(static_cast<float>(v));
      }
    }
    auto* in = g->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elems[i]);
    if (ranks[i] >= 0) {
      auto* sh = tt->mutable_shape();
      for (int d = 0; d < ranks[i]; ++d) {
        auto* dim = sh->add_dim();
        if (known) dim->set_dim_value(d == 0 ? 1 : 2);
        else dim->set_dim_param("d" + std::to_string(d));
      }
    }
  }
  for (int o = 0; o < std::max(1, s.min_output()); ++o) {
    const std::string name = "y" + std::to_string(o);
    n->add_output(name);
    auto* out = g->add_output();
    out->set_name(name);
    auto* ot = out->mutable_type()->mutable_tensor_type();
    ot->set_elem_type(elems.empty() ? 1 : elems[0]);
    ot->mutable_shape();
  }
  return m.SerializeAsString();
}

}  // namespace

TEST_CASE("every onnx operator schema with inputs of rank 0-4 and boundary attributes loads or fails cleanly") {
  const auto schemas = onnx::OpSchemaRegistry::get_all_schemas_with_history();
  REQUIRE(schemas.size() > 400);
  std::size_t total_loads = 0, total_fails = 0, probed = 0;
  std::vector<std::string> wrong_codes;
  for (std::size_t k = 0; k < schemas.size(); ++k) {
    const auto& s = schemas[k];
    if (s.Deprecated()) continue;
    std::vector<int> elems;
    bool ok = true;
    for (const auto& in : s.inputs()) {
      const int e = elem_for(s, in.GetTypeStr());
      if (e < 0) ok = false;
      elems.push_back(e);
      if (in.GetOption() == onnx::OpSchema::Variadic) elems.push_back(e);
    }
    if (!ok) continue;  // sequence, map or optional inputs
    ++probed;
    std::size_t loads = 0, fails = 0;
    const auto count = [&](const epstack::Result<epstack::model>& res) {
      (res ? loads : fails)++;
      if (!res && res.code() != epstack::errc::invalid_graph && wrong_codes.size() < 10)
        wrong_codes.push_back(s.Name() + ": " + res.status().to_string());
    };
    const auto probe = [&](const std::vector<int>& ranks, bool known) {
      const auto bytes = make_model(s, elems, ranks, known);
      count(epstack::load_model(std::as_bytes(std::span(bytes.data(), bytes.size()))));
    };
    const auto probe_with = [&](const attr_probe& ap, const init_probe& ip) {
      for (int r = 0; r <= 4; ++r) {
        const auto bytes = make_model(s, elems, std::vector<int>(elems.size(), r), true, ap, ip);
        count(epstack::load_model(std::as_bytes(std::span(bytes.data(), bytes.size()))));
      }
    };
    static const std::vector<std::vector<std::int64_t>> int_values = {
        {-1}, {0}, {1}, {3}, {-7}, {1LL << 40}, {}, {0, 0}, {-1, -1}, {1, 2, 3}, {5, 5, 5, 5, 5, 5, 5, 5, 5}};
    for (const auto& [name, a] : s.attributes()) {
      if (a.type == onnx::AttributeProto::INT || a.type == onnx::AttributeProto::INTS)
        for (const auto& v : int_values) probe_with({name, a.type, v, 0}, {});
      if (a.type == onnx::AttributeProto::FLOAT || a.type == onnx::AttributeProto::FLOATS)
        for (float f : {-1.f, 0.f, 1e30f, std::numeric_limits<float>::quiet_NaN()}) probe_with({name, a.type, {}, f}, {});
    }
    for (std::size_t i = 0; i < elems.size(); ++i)
      for (const auto& v : int_values) {
        probe_with({}, {i, v, false});
        if (v.size() == 1) probe_with({}, {i, v, true});
      }
    for (bool known : {true, false})
      for (int r = 0; r <= 4; ++r) {
        probe(std::vector<int>(elems.size(), r), known);
        for (std::size_t i = 0; i < elems.size(); ++i)
          for (int other : {1, 2, 4}) {
            std::vector<int> ranks(elems.size(), other);
            ranks[i] = r;
            probe(ranks, known);
          }
      }
    total_loads += loads;
    total_fails += fails;
  }
  MESSAGE(probed << " schemas probed: " << total_loads << " models loaded, " << total_fails << " refused");
  CHECK(probed > 350);
  CHECK(total_loads > 10000);  // the probe builds valid models too, not only refused ones
  CHECK(wrong_codes.empty());
  for (const auto& w : wrong_codes) MESSAGE(w);
}
