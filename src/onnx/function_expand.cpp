// Function bodies of nodes (model-local functions and onnx's schema functions) instantiated for expand_function
// (declared in onnx_io.hpp).
// onnx's headers come first, as in onnx_io.cpp.
#include <onnx/defs/function.h>

#include <epstack/onnx/onnx_io.hpp>
#include <epstack/onnx/op_schema.hpp>

#include "onnx_convert.hpp"
#include "schema/modern_inference.hpp"

#include <google/protobuf/unknown_field_set.h>

#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace epstack {

namespace {

/// Renames the free names of subgraph `sg` (those neither it nor an enclosing subgraph defines) by `names`: onnx's
/// FunctionExpandHelper renames a function body's top-level nodes only, so a Loop or If body inside the function
/// still refers to the function's formal inputs and internal values by their names in the FunctionProto.
void rename_free_names(onnx::GraphProto& sg, const std::unordered_map<std::string, std::string>& names,
                       std::unordered_set<std::string> bound) {
  for (const auto& i : sg.input()) bound.insert(i.name());
  for (const auto& t : sg.initializer()) bound.insert(t.name());
  for (const auto& t : sg.sparse_initializer()) bound.insert(t.values().name());
  for (const auto& nd : sg.node())
    for (const auto& o : nd.output()) bound.insert(o);
  const auto rename = [&](std::string* name) {
    if (name->empty() || bound.contains(*name)) return;
    if (auto it = names.find(*name); it != names.end()) *name = it->second;
  };
  for (auto& nd : *sg.mutable_node()) {
    for (auto& i : *nd.mutable_input()) rename(&i);
    for (auto& a : *nd.mutable_attribute()) {
      if (a.has_g()) rename_free_names(*a.mutable_g(), names, bound);
      for (auto& gg : *a.mutable_graphs()) rename_free_names(gg, names, bound);
    }
  }
  for (auto& o : *sg.mutable_output()) rename(o.mutable_name());
}

// The nodes of function `fp` called by node `np`: formal inputs and outputs renamed to the node's, every other name
// prefixed (unique per call), attribute references replaced by the node's attribute (or the function's default,
// IR 9's attribute_proto), or dropped when neither has it. onnx 1.12's FunctionExpandHelper does the same for
// schema functions but dereferences a null schema for a model-local function of a custom domain, so epstack does it.
Status instantiate_body(const onnx::NodeProto& np, const onnx::FunctionProto& fp, onnx::GraphProto& body,
                        const std::string& prefix) {
  if (np.input_size() > fp.input_size())
    return Status(errc::invalid_graph, "the node has " + std::to_string(np.input_size()) + " inputs, the function " +
                                           std::to_string(fp.input_size()));
  if (np.output_size() > fp.output_size())
    return Status(errc::invalid_graph, "the node has " + std::to_string(np.output_size()) + " outputs, the function " +
                                           std::to_string(fp.output_size()));
  std::unordered_map<std::string, std::string> io;
  for (int i = 0; i < fp.input_size(); ++i) io[fp.input(i)] = i < np.input_size() ? np.input(i) : std::string();
  for (int i = 0; i < fp.output_size(); ++i) io[fp.output(i)] = i < np.output_size() ? np.output(i) : std::string();
  const auto rename = [&](const std::string& name) {
    if (name.empty()) return name;
    const auto it = io.find(name);
    return it != io.end() ? it->second : prefix + name;
  };
  std::unordered_map<std::string, const onnx::AttributeProto*> given, defaults;
  for (const auto& a : np.attribute()) given[a.name()] = &a;
  // FunctionProto.attribute_proto (field 11, IR 9): attributes with defaults; onnx 1.12 keeps it as an unknown field.
  std::vector<onnx::AttributeProto> default_protos;
  const auto& unknown = fp.GetReflection()->GetUnknownFields(fp);
  for (int i = 0; i < unknown.field_count(); ++i)
    if (unknown.field(i).number() == 11 && unknown.field(i).type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      if (onnx::AttributeProto a; a.ParseFromString(unknown.field(i).length_delimited())) default_protos.push_back(std::move(a));
  for (const auto& a : default_protos) defaults[a.name()] = &a;
  for (const auto& fn : fp.node()) {
    auto* bn = body.add_node();
    *bn = fn;
    bn->clear_input();
    bn->clear_output();
    bn->clear_attribute();
    if (!fn.name().empty()) bn->set_name(prefix + fn.name());
    for (const auto& i : fn.input()) bn->add_input(rename(i));
    for (const auto& o : fn.output()) bn->add_output(rename(o));
    for (const auto& a : fn.attribute()) {
      if (a.ref_attr_name().empty()) {
        *bn->add_attribute() = a;
        continue;
      }
      const auto g = given.find(a.ref_attr_name());
      const onnx::AttributeProto* src = g != given.end() ? g->second : nullptr;
      if (src == nullptr)
        if (const auto d = defaults.find(a.ref_attr_name()); d != defaults.end()) src = d->second;
      if (src == nullptr) continue;
      auto* na = bn->add_attribute();
      *na = *src;
      na->set_name(a.name());
    }
  }
  return {};
}

}  // namespace

Result<std::optional<std::vector<body_node>>> expand_function(const model& m, const graph& g, node_id n) {
  const auto& nd = g.node(n);
  const std::string where = "node " + g.describe(n);
  const std::string domain = nd.domain == "ai.onnx" ? std::string() : nd.domain;
  onnx::NodeProto np;
  np.set_name(nd.name.empty() ? nd.op_type + "_" + std::to_string(n) : nd.name);
  np.set_op_type(nd.op_type);
  np.set_domain(nd.domain);
  for (value_id v : nd.inputs) np.add_input(v == no_id ? std::string() : g.value(v).name);
  for (value_id v : nd.outputs) np.add_output(v == no_id ? std::string() : g.value(v).name);
  for (const auto& a : nd.attributes) EPSTACK_RETURN_IF_ERROR(detail::attribute_to_proto(a, *np.add_attribute(), {}));

  onnx::FunctionProto fp;
  bool found = false;
  for (const auto& f : m.functions)
    if (f.name == nd.op_type && f.overload == nd.overload && (f.domain == nd.domain || (f.domain.empty() && domain.empty()))) {
      if (!fp.ParseFromString(f.proto)) return Status(errc::invalid_graph, where + ": its model-local function does not parse");
      found = true;
      break;
    }
  if (!found) {
    std::int64_t version = m.opset(domain);
    // A version beyond onnx 1.12 takes onnx 1.12's body only if it equals that version but for its type lists.
    if (const auto* mine = version > 0 ? schema::find_schema(domain, nd.op_type, static_cast<int>(version)) : nullptr;
        mine != nullptr && detail::beyond_onnx112(*mine)) {
      const auto* eq = detail::onnx112_equivalent(*mine);
      if (eq == nullptr) return std::optional<std::vector<body_node>>();
      version = eq->since_version;
    }
    const auto* schema = version > 0 ? onnx::OpSchemaRegistry::Instance()->GetSchema(nd.op_type, static_cast<int>(version), domain)
                                     : nullptr;
    if (schema == nullptr) return std::optional<std::vector<body_node>>();
    // Attributes the node leaves out take the schema's defaults (function bodies refer to them by name).
    for (const auto& [name, a] : schema->attributes()) {
      if (!a.default_value.has_name() || nd.attributes.contains(name)) continue;
      *np.add_attribute() = a.default_value;
      np.mutable_attribute(np.attribute_size() - 1)->set_name(name);
    }
    if (schema->HasFunction() && schema->GetFunction() != nullptr) {
      fp = *schema->GetFunction();
    } else if (schema->HasContextDependentFunction()) {
      std::vector<onnx::TypeProto> types;
      for (value_id v : nd.inputs) {
        types.emplace_back();
        if (v != no_id && g.value(v).type.is_defined()) detail::type_to_proto(g.value(v).type, types.back());
      }
      onnx::FunctionBodyBuildContextImpl ctx(np, types);
      try {
        if (!schema->BuildContextDependentFunction(ctx, fp)) return std::optional<std::vector<body_node>>();
      } catch (const std::exception& e) {
        return Status(errc::invalid_graph, where + ": building its function body: " + e.what());
      }
    } else {
      return std::optional<std::vector<body_node>>();
    }
  }
  onnx::GraphProto body;
  EPSTACK_RETURN_IF_ERROR(instantiate_body(np, fp, body, np.name() + "/").with_context(where + ": expanding its function body"));
  // The names FunctionExpandHelper gave, read off its result (the body's nodes in the function's order): formal
  // inputs become the node's inputs, every other name what the expanded node that uses or makes it calls it.
  // Subgraphs of the body get the same renaming of the names they take from the function's scope.
  std::unordered_map<std::string, std::string> names;
  for (int i = 0; i < fp.input_size(); ++i) names[fp.input(i)] = i < np.input_size() ? np.input(i) : std::string();
  for (int i = 0; i < fp.output_size(); ++i) names[fp.output(i)] = i < np.output_size() ? np.output(i) : std::string();
  if (body.node_size() == fp.node_size())
    for (int k = 0; k < fp.node_size(); ++k) {
      const auto &fn = fp.node(k), &bn = body.node(k);
      for (int i = 0; i < fn.input_size() && i < bn.input_size(); ++i) names.emplace(fn.input(i), bn.input(i));
      for (int i = 0; i < fn.output_size() && i < bn.output_size(); ++i) names.emplace(fn.output(i), bn.output(i));
    }
  for (auto& bp : *body.mutable_node())
    for (auto& a : *bp.mutable_attribute()) {
      if (a.has_g()) rename_free_names(*a.mutable_g(), names, {});
      for (auto& gg : *a.mutable_graphs()) rename_free_names(gg, names, {});
    }
  std::vector<body_node> out;
  detail::external_data_resolver none({}, false);
  for (auto& bp : *body.mutable_node()) {
    body_node b;
    b.n.name = bp.name();
    b.n.op_type = bp.op_type();
    b.n.domain = bp.domain();
    for (auto& ap : *bp.mutable_attribute()) {
      // A body attribute that referred to one the node leaves out (and the schema gives no default) comes out of
      // onnx's expansion empty, with neither type nor value: it is absent.
      if (ap.type() == onnx::AttributeProto::UNDEFINED && ap.ref_attr_name().empty() && !ap.has_f() && !ap.has_i() &&
          !ap.has_s() && !ap.has_t() && !ap.has_g() && !ap.has_sparse_tensor() && ap.floats_size() == 0 &&
          ap.ints_size() == 0 && ap.strings_size() == 0 && ap.tensors_size() == 0 && ap.graphs_size() == 0)
        continue;
      EPSTACK_ASSIGN_OR_RETURN(auto a, detail::attribute_from_proto(ap, none, where + " function body"));
      b.n.attributes.append(std::move(a));
    }
    b.inputs.assign(bp.input().begin(), bp.input().end());
    b.outputs.assign(bp.output().begin(), bp.output().end());
    out.push_back(std::move(b));
  }
  return std::optional<std::vector<body_node>>(std::move(out));
}

}  // namespace epstack
