// Opset upgrades over the schema table (see epstack/onnx/version_convert.hpp).
#include <epstack/onnx/op_schema.hpp>
#include <epstack/onnx/version_convert.hpp>

#include <string>
#include <vector>

namespace epstack {
namespace {

// Operators whose attribute `attr` became input `input` at `version`.
struct attribute_to_input {
  const char* op;
  int version;
  const char* attr;
  std::size_t input;
};
constexpr attribute_to_input moved[] = {
    {"Squeeze", 13, "axes", 1},        {"Unsqueeze", 13, "axes", 1},    {"ReduceSum", 13, "axes", 1},
    {"Split", 13, "split", 1},         {"ReduceMean", 18, "axes", 1},   {"ReduceMax", 18, "axes", 1},
    {"ReduceMin", 18, "axes", 1},      {"ReduceProd", 18, "axes", 1},   {"ReduceL1", 18, "axes", 1},
    {"ReduceL2", 18, "axes", 1},       {"ReduceLogSum", 18, "axes", 1}, {"ReduceLogSumExp", 18, "axes", 1},
    {"ReduceSumSquare", 18, "axes", 1},
};

// True when a node valid for `from` stays valid, with the same meaning of its inputs and attributes, under `to`:
// every attribute it sets exists in `to` with the same type, its inputs keep their names and positions, and its
// input and output counts fit.
bool carries_over(const node& nd, const schema::op_schema& from, const schema::op_schema& to) {
  for (const auto& a : nd.attributes) {
    const auto* fa = from.attribute(a.name);
    const auto* ta = to.attribute(a.name);
    if (ta == nullptr || (fa != nullptr && fa->type != ta->type)) return false;
  }
  for (const auto& spec : to.attributes)
    if (spec.required && !nd.attributes.contains(spec.name)) return false;
  // BatchNormalization-14 renamed mean and var to input_mean and input_var: same inputs, same positions.
  const bool renamed_only = nd.op_type == "BatchNormalization";
  for (std::size_t i = 0; i < nd.inputs.size() && i < from.inputs.size(); ++i)
    if (i >= to.inputs.size() || (to.inputs[i].name != from.inputs[i].name && !renamed_only)) {
      if (!(to.inputs.size() > 0 && to.inputs.back().option == schema::param_option::variadic && i >= to.inputs.size() - 1))
        return false;
    }
  const auto ins = static_cast<int>(nd.inputs.size()), outs = static_cast<int>(nd.outputs.size());
  return ins >= to.min_inputs && (to.max_inputs < 0 || ins <= to.max_inputs) && outs >= to.min_outputs &&
         (to.max_outputs < 0 || outs <= to.max_outputs);
}

std::string unique_name(const graph& g, const std::string& base) {
  std::string name = base;
  for (int i = 1; g.find_value(name) != no_id; ++i) name = base + "_" + std::to_string(i);
  return name;
}

Status convert_graph(graph& g, std::int64_t from_opset, std::int64_t to_opset) {
  const auto count = g.node_count();
  for (node_id n = 0; n < count; ++n) {
    auto& nd = g.node(n);
    for (auto& a : nd.attributes) {
      if (auto* sg = std::get_if<subgraph>(&a.value); sg && *sg) EPSTACK_RETURN_IF_ERROR(convert_graph(**sg, from_opset, to_opset));
      if (auto* sgs = std::get_if<std::vector<subgraph>>(&a.value))
        for (auto& s : *sgs)
          if (s) EPSTACK_RETURN_IF_ERROR(convert_graph(*s, from_opset, to_opset));
    }
    if (!(nd.domain.empty() || nd.domain == "ai.onnx")) continue;
    const std::string where = "node " + g.describe(n);
    const auto* from = schema::find_schema("", nd.op_type, static_cast<int>(from_opset));
    const auto* to = schema::find_schema("", nd.op_type, static_cast<int>(to_opset));
    if (from == nullptr) return Status(errc::invalid_graph, where + ": no such operator at opset " + std::to_string(from_opset));
    if (to == nullptr)
      return Status(errc::not_implemented, where + ": opset " + std::to_string(to_opset) + " has no " + nd.op_type +
                                               " (removed or deprecated after " + from->label() + ")");
    if (from == to) continue;
    for (const auto& mv : moved) {
      if (nd.op_type != mv.op || from->since_version >= mv.version || to->since_version < mv.version) continue;
      const auto* a = nd.attributes.find(mv.attr);
      if (a == nullptr) break;
      const auto* ints = std::get_if<std::vector<std::int64_t>>(&a->value);
      if (ints == nullptr) return Status(errc::invalid_graph, where + ": attribute '" + mv.attr + "' is not a list of ints");
      const std::int64_t size[] = {static_cast<std::int64_t>(ints->size())};
      tensor t(element_type::int64, size);
      std::copy(ints->begin(), ints->end(), t.typed<std::int64_t>());
      const std::string name = unique_name(g, (nd.name.empty() ? nd.op_type : nd.name) + "_" + mv.attr);
      const auto v = g.add_initializer(name, std::move(t));
      nd.attributes.erase(mv.attr);
      while (nd.inputs.size() < mv.input) nd.inputs.push_back(no_id);
      if (nd.inputs.size() == mv.input) {
        nd.inputs.push_back(v);  // an initializer: a consumer, no flow edge
        g.value(v).consumers.push_back(n);
      } else {
        return Status(errc::invalid_graph, where + ": has both the attribute '" + mv.attr + "' and the input that replaces it");
      }
      break;
    }
    if (!carries_over(g.node(n), *from, *to))
      return Status(errc::not_implemented, where + ": " + from->label() + " -> " + to->label() +
                                               " changes the operator's inputs or attributes in a way this converter "
                                               "does not rewrite");
  }
  return {};
}

}  // namespace

std::int64_t ir_version_for_opset(std::int64_t opset) noexcept {
  if (opset <= 18) return 8;
  if (opset <= 20) return 9;
  if (opset <= 22) return 10;
  if (opset == 23) return 11;
  if (opset == 24) return 12;
  return 13;
}

Status convert_opset(model& m, std::int64_t opset, std::int64_t ir_version) {
  const auto* known = schema::find_domain("");
  if (opset < 1 || opset > known->max_version)
    return Status(errc::invalid_argument, "opset " + std::to_string(opset) + " is not one this build knows (1 to " +
                                              std::to_string(known->max_version) + ")");
  const std::int64_t current = m.opset("");
  if (current < 1) return Status(errc::invalid_argument, "the model imports no ai.onnx opset");
  if (opset < current)
    return Status(errc::invalid_argument, "the model is at opset " + std::to_string(current) + "; converting down to " +
                                              std::to_string(opset) + " is not supported");
  const std::int64_t need = ir_version_for_opset(opset);
  if (ir_version != 0 && (ir_version < need || ir_version > max_ir_version))
    return Status(errc::invalid_argument, "IR version " + std::to_string(ir_version) + " does not fit opset " +
                                              std::to_string(opset) + " (it needs " + std::to_string(need) + " to " +
                                              std::to_string(max_ir_version) + ")");
  EPSTACK_RETURN_IF_ERROR(convert_graph(m.graph, current, opset));
  for (auto& o : m.opsets)
    if (o.domain.empty() || o.domain == "ai.onnx") o.version = opset;
  m.ir_version = ir_version != 0 ? ir_version : std::max(m.ir_version, need);
  return {};
}

}  // namespace epstack
