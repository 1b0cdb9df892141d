// The operator checks of models beyond onnx 1.12, from the schema table (see schema_check.hpp).
#include "schema_check.hpp"

#include <onnx/defs/schema.h>

#include <epstack/onnx/op_schema.hpp>

#include <string>
#include <unordered_map>
#include <unordered_set>

namespace epstack::detail {
namespace {

// Opsets of the ONNX domains must be ones this build knows (ONNX Runtime refuses newer ones too); the message names a
// node that uses the domain.
const onnx::NodeProto* first_node_of(const onnx::GraphProto& g, const std::string& domain) {
  for (const auto& n : g.node()) {
    if ((n.domain() == "ai.onnx" ? std::string() : n.domain()) == domain) return &n;
    for (const auto& a : n.attribute()) {
      if (a.has_g())
        if (const auto* f = first_node_of(a.g(), domain)) return f;
      for (const auto& sg : a.graphs())
        if (const auto* f = first_node_of(sg, domain)) return f;
    }
  }
  return nullptr;
}

}  // namespace

Status check_opsets(const onnx::ModelProto& mp) {
  for (const auto& o : mp.opset_import()) {
    const auto* known = schema::find_domain(o.domain());
    if (known == nullptr) continue;  // a custom domain
    if (o.version() >= known->min_version && o.version() <= known->max_version) continue;
    const std::string d = o.domain() == "ai.onnx" ? std::string() : o.domain();
    const auto* user = first_node_of(mp.graph(), d);
    return Status(errc::invalid_graph,
                  "opset " + std::to_string(o.version()) + " of domain '" + o.domain() + "'" +
                      (user != nullptr ? " (node '" + user->name() + "', " + user->op_type() + ")" : std::string()) +
                      " is not supported: this build knows versions " + std::to_string(known->min_version) + " to " +
                      std::to_string(known->max_version) + " (ONNX 1.22)");
  }
  return {};
}

// True when the onnx 1.12 library's checker knows everything the model's header declares: IR version 8 or older and
// standard opsets within its range. Other models are checked by check_against_schemas.
bool within_onnx112(const onnx::ModelProto& mp) {
  if (mp.ir_version() > onnx::IR_VERSION) return false;
  const auto& known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  for (const auto& o : mp.opset_import()) {
    const std::string d = o.domain() == "ai.onnx" ? std::string() : o.domain();
    const auto it = known.find(d);
    if (it != known.end() && o.version() > it->second.second) return false;
  }
  return true;
}

namespace {

Status check_graph_against_schemas(const onnx::GraphProto& g, const std::unordered_map<std::string, int>& opsets);

// The checks of onnx's checker that concern operators, from the schema table, for models beyond onnx 1.12: every
// node of a standard domain names an operator of its opset, with input and output counts and attributes (names,
// types, required ones) as that version states.
Status check_node_against_schema(const onnx::NodeProto& n, const std::unordered_map<std::string, int>& opsets,
                                 const std::string& where) {
  const std::string d = n.domain() == "ai.onnx" ? std::string() : n.domain();
  const std::string node = where + "node '" + n.name() + "' (" + (d.empty() ? std::string() : d + ".") + n.op_type() + ")";
  const auto it = opsets.find(d);
  if (schema::find_domain(d) != nullptr) {
    if (it == opsets.end()) return Status(errc::invalid_graph, node + ": the model imports no opset of domain '" + d + "'");
    const auto* s = schema::find_schema(d, n.op_type(), it->second);
    if (s == nullptr) {
      const auto versions = schema::versions_of(d, n.op_type());
      std::string known;
      for (const auto* v : versions) known += (known.empty() ? "" : ", ") + std::to_string(v->since_version) + (v->deprecated ? " (deprecated)" : "");
      return Status(errc::invalid_graph, node + ": no such operator in opset " + std::to_string(it->second) + " of domain '" + d +
                                             "'" + (known.empty() ? std::string() : " (its versions: " + known + ")"));
    }
    const int ins = n.input_size(), outs = n.output_size();
    if (ins < s->min_inputs || (s->max_inputs >= 0 && ins > s->max_inputs))
      return Status(errc::invalid_graph, node + ": has " + std::to_string(ins) + " inputs; " + s->label() + " takes " +
                                             std::to_string(s->min_inputs) + " to " +
                                             (s->max_inputs < 0 ? std::string("any number") : std::to_string(s->max_inputs)));
    if (outs < s->min_outputs || (s->max_outputs >= 0 && outs > s->max_outputs))
      return Status(errc::invalid_graph, node + ": has " + std::to_string(outs) + " outputs; " + s->label() + " gives " +
                                             std::to_string(s->min_outputs) + " to " +
                                             (s->max_outputs < 0 ? std::string("any number") : std::to_string(s->max_outputs)));
    for (int i = 0; i < ins; ++i) {
      const auto* f = s->input(static_cast<std::size_t>(i));
      if (f != nullptr && f->option == schema::param_option::single && n.input(i).empty())
        return Status(errc::invalid_graph, node + ": input " + std::to_string(i) + " ('" + f->name + "') is required but empty");
    }
    std::unordered_set<std::string> seen;
    for (const auto& a : n.attribute()) {
      if (!seen.insert(a.name()).second) return Status(errc::invalid_graph, node + ": attribute '" + a.name() + "' appears twice");
      const auto* spec = s->attribute(a.name());
      if (spec == nullptr) return Status(errc::invalid_graph, node + ": " + s->label() + " has no attribute '" + a.name() + "'");
      if (a.has_ref_attr_name()) continue;
      if (a.type() != onnx::AttributeProto::UNDEFINED && static_cast<int>(a.type()) != static_cast<int>(spec->type))
        return Status(errc::invalid_graph, node + ": attribute '" + a.name() + "' is of type " +
                                               std::to_string(static_cast<int>(a.type())) + "; " + s->label() + " takes " +
                                               std::string(schema::to_string(spec->type)));
    }
    for (const auto& spec : s->attributes)
      if (spec.required && seen.count(spec.name) == 0)
        return Status(errc::invalid_graph, node + ": the required attribute '" + spec.name + "' of " + s->label() + " is missing");
  }
  for (const auto& a : n.attribute()) {
    if (a.has_g()) EPSTACK_RETURN_IF_ERROR(check_graph_against_schemas(a.g(), opsets));
    for (const auto& sg : a.graphs()) EPSTACK_RETURN_IF_ERROR(check_graph_against_schemas(sg, opsets));
  }
  return {};
}

Status check_graph_against_schemas(const onnx::GraphProto& g, const std::unordered_map<std::string, int>& opsets) {
  for (const auto& n : g.node())
    EPSTACK_RETURN_IF_ERROR(check_node_against_schema(n, opsets, g.name().empty() ? std::string() : "graph '" + g.name() + "' "));
  return {};
}

// A present type names its kind and everything it nests; `where` names the value for the message.
// An unknown tensor element type (0) is left to inference and the checker, as exporters write such value_info.
Status check_type(const onnx::TypeProto& t, const std::string& where, int depth) {
  if (depth > 64) return Status(errc::invalid_graph, where + ": its type nests more than 64 levels");
  using T = onnx::TypeProto;
  switch (t.value_case()) {
    case T::kTensorType:
    case T::kSparseTensorType:
    case T::kOpaqueType: return {};
    case T::kSequenceType:
      if (!t.sequence_type().has_elem_type()) return Status(errc::invalid_graph, where + ": its sequence type has no element type");
      return check_type(t.sequence_type().elem_type(), where, depth + 1);
    case T::kOptionalType:
      if (!t.optional_type().has_elem_type()) return Status(errc::invalid_graph, where + ": its optional type has no element type");
      return check_type(t.optional_type().elem_type(), where, depth + 1);
    case T::kMapType:
      if (!t.map_type().has_key_type() || t.map_type().key_type() == 0 || !t.map_type().has_value_type())
        return Status(errc::invalid_graph, where + ": its map type needs a key type and a value type");
      return check_type(t.map_type().value_type(), where, depth + 1);
    case T::VALUE_NOT_SET: break;
  }
  return Status(errc::invalid_graph, where + ": its type names no kind (tensor, sequence, map, optional, sparse tensor)");
}

Status check_graph_value_types(const onnx::GraphProto& g, bool main_graph, int depth) {
  if (depth > 64) return Status(errc::invalid_graph, "graph '" + g.name() + "': subgraphs nest more than 64 levels");
  const std::string graph = g.name().empty() ? std::string("the graph") : "graph '" + g.name() + "'";
  const auto check = [&](const onnx::ValueInfoProto& vi, const char* role) -> Status {
    return vi.has_type() ? check_type(vi.type(), graph + " " + role + " '" + vi.name() + "'", 0) : Status{};
  };
  for (const auto& vi : g.input()) {
    // onnx 1.12's inference reads the type of every main-graph input (a subgraph's inputs may leave theirs to it).
    if (main_graph && !vi.has_type()) return Status(errc::invalid_graph, graph + " input '" + vi.name() + "': has no type");
    EPSTACK_RETURN_IF_ERROR(check(vi, "input"));
  }
  for (const auto& vi : g.output()) EPSTACK_RETURN_IF_ERROR(check(vi, "output"));
  for (const auto& vi : g.value_info()) EPSTACK_RETURN_IF_ERROR(check(vi, "value_info"));
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_g()) EPSTACK_RETURN_IF_ERROR(check_graph_value_types(a.g(), false, depth + 1));
      for (const auto& sg : a.graphs()) EPSTACK_RETURN_IF_ERROR(check_graph_value_types(sg, false, depth + 1));
    }
  return {};
}

}  // namespace

Status check_value_types(const onnx::ModelProto& mp) { return check_graph_value_types(mp.graph(), true, 0); }

Status check_against_schemas(const onnx::ModelProto& mp) {
  std::unordered_map<std::string, int> opsets;
  for (const auto& o : mp.opset_import())
    opsets[o.domain() == "ai.onnx" ? std::string() : o.domain()] = static_cast<int>(o.version());
  if (mp.ir_version() < 1 || mp.ir_version() > 13)
    return Status(errc::invalid_graph, "IR version " + std::to_string(mp.ir_version()) + " is not supported (this build reads 1 to 13)");
  return check_graph_against_schemas(mp.graph(), opsets);
}

}  // namespace epstack::detail
