// The basic passes: constant folding (with the CPU provider's kernels), Identity and dead-node elimination.
#include "egraph.hpp"

#include <epstack/core/mapped_file.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <set>

namespace epstack::opt {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Basic passes.

const std::set<std::string, std::less<>> nondeterministic = {"RandomNormal", "RandomUniform", "RandomNormalLike",
                                                             "RandomUniformLike", "Multinomial", "Bernoulli"};

bool has_subgraph(const node& n) {
  for (const auto& a : n.attributes)
    if (a.kind() == attribute_kind::graph || a.kind() == attribute_kind::graphs) return true;
  return false;
}

// Evaluates node `en` (every input constant) with the CPU provider's kernel; false when it has none.
Result<bool> evaluate(egraph& e, const enode& en, const node_compiler& fold, thread_pool* pool) {
  graph g("fold");
  std::vector<std::string> ins;
  std::vector<ivalue> values;
  for (const auto& in : en.inputs) {
    ins.push_back(in);
    if (in.empty()) {
      values.emplace_back();
      continue;
    }
    if (g.find_value(in) == no_id) g.add_initializer(in, *e.constant(in));
    values.emplace_back(*e.constant(in));
  }
  node copy = en.n;
  g.add_node(std::move(copy), ins, en.outputs);
  for (const auto& o : en.outputs)
    if (!o.empty()) {
      const auto v = g.find_value(o);
      if (auto it = e.types.find(o); it != e.types.end()) g.value(v).type = it->second;
      g.add_output(o);
    }
  auto fn = fold(g, 0);
  if (!fn) return false;  // no kernel: leave the node
  std::vector<ivalue> outs(en.outputs.size());
  compute_context ctx(values, outs, nullptr, pool);
  Status st;
  try {
    st = (*fn)(ctx);
  } catch (const std::exception& ex) {
    st = Status(errc::runtime_exception, ex.what());
  }
  if (!st) return false;  // leave it for run time, which reports the failure with its inputs
  for (std::size_t i = 0; i < outs.size(); ++i) {
    if (en.outputs[i].empty()) continue;
    if (!outs[i].is_tensor()) return false;
  }
  for (std::size_t i = 0; i < outs.size(); ++i)
    if (!en.outputs[i].empty()) {
      tensor t = outs[i].as_tensor();
      t.set_name(en.outputs[i]);
      e.add_init(en.outputs[i], std::move(t));
    }
  return true;
}

// Shape or Size of a value whose shape inference knows every dimension.
std::optional<tensor> fold_shape(const egraph& e, const enode& en) {
  if (!is_onnx(en.n) || (en.n.op_type != "Shape" && en.n.op_type != "Size") || en.inputs.empty()) return std::nullopt;
  const type_info* t = e.type_of(en.inputs[0]);
  std::optional<std::vector<std::int64_t>> sizes;
  if (const tensor* c = e.constant(en.inputs[0])) sizes = std::vector<std::int64_t>(c->sizes().begin(), c->sizes().end());
  else if (t != nullptr && t->is_tensor() && t->dims) sizes = t->dims->sizes();
  if (!sizes) return std::nullopt;
  if (en.n.op_type == "Size") {
    std::int64_t n = 1;
    for (auto d : *sizes) n *= d;
    return tensor::scalar<std::int64_t>(n);
  }
  const auto r = static_cast<std::int64_t>(sizes->size());
  std::int64_t start = 0, end = r;
  if (const auto* a = en.n.attributes.find("start"); a && std::holds_alternative<std::int64_t>(a->value))
    start = std::get<std::int64_t>(a->value);
  if (const auto* a = en.n.attributes.find("end"); a && std::holds_alternative<std::int64_t>(a->value))
    end = std::get<std::int64_t>(a->value);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<std::int64_t>(start, 0, r);
  end = std::clamp<std::int64_t>(end, start, r);
  const std::vector<std::int64_t> v(sizes->begin() + start, sizes->begin() + end);
  const std::int64_t n = end - start;
  return tensor::from<std::int64_t>(std::span<const std::int64_t>(&n, 1), std::span<const std::int64_t>(v));
}

}  // namespace

Status constant_folding(egraph& e, const optimizer_options& opt, optimization_report& rep, thread_pool* pool) {
  for (auto& en : e.nodes) {
    if (en.dead || has_subgraph(en.n) || nondeterministic.count(en.n.op_type)) continue;
    if (auto t = fold_shape(e, en)) {
      e.add_init(en.outputs[0], std::move(*t));
      en.dead = true;
      ++rep.shapes_folded;
      continue;
    }
    if (!opt.fold) continue;
    bool all_const = true;
    for (const auto& in : en.inputs) all_const = all_const && (in.empty() || e.constant(in) != nullptr);
    // Nodes without inputs other than Constant (e.g. a random generator of a custom domain) stay.
    if (!all_const || (en.inputs.empty() && en.n.op_type != "Constant")) continue;
    bool any_output_used = false;
    for (const auto& o : en.outputs) any_output_used = any_output_used || (!o.empty() && e.uses(o) > 0);
    if (!any_output_used) continue;  // dead-node elimination removes it
    EPSTACK_ASSIGN_OR_RETURN(const bool done, evaluate(e, en, opt.fold, pool));
    if (done) {
      en.dead = true;
      ++rep.constant_folded;
    }
  }
  e.index();
  return {};
}

// Identity (and inference-mode Dropout whose mask is unused) removed by pointing its consumers at its input.
void identity_elimination(egraph& e, optimization_report& rep) {
  for (auto& en : e.nodes) {
    if (en.dead || !is_onnx(en.n) || en.inputs.empty() || en.inputs[0].empty()) continue;
    const bool identity = en.n.op_type == "Identity";
    bool dropout = en.n.op_type == "Dropout";
    if (dropout) {
      // Inference: the mask output unused, and training_mode (opset 12+) absent or a constant false.
      for (std::size_t i = 1; i < en.outputs.size(); ++i) dropout = dropout && (en.outputs[i].empty() || e.uses(en.outputs[i]) == 0);
      if (en.inputs.size() > 2 && !en.inputs[2].empty()) {
        const tensor* tm = e.constant(en.inputs[2]);
        dropout = dropout && tm != nullptr && tm->type() == element_type::boolean && tm->element_count() == 1 && !*tm->typed<bool>();
      }
    }
    if (!identity && !dropout) continue;
    const std::string& in = en.inputs[0];
    const std::string& out = en.outputs[0];
    if (out.empty() || e.graph_outputs.count(out) || e.implicit.count(out)) continue;
    for (auto i : e.consumers[out])
      for (auto& x : e.nodes[i].inputs)
        if (x == out) x = in;
    en.dead = true;
    ++rep.removed;
    e.index();
  }
}

void dead_node_elimination(egraph& e, optimization_report& rep) {
  e.index();
  std::unordered_set<std::string> needed(e.graph_outputs.begin(), e.graph_outputs.end());
  needed.insert(e.implicit.begin(), e.implicit.end());
  for (auto it = e.nodes.rbegin(); it != e.nodes.rend(); ++it) {
    auto& en = *it;
    if (en.dead) continue;
    bool used = false;
    for (const auto& o : en.outputs) used = used || (!o.empty() && needed.count(o));
    if (!used) {
      en.dead = true;
      ++rep.removed;
      continue;
    }
    for (const auto& in : en.inputs)
      if (!in.empty()) needed.insert(in);
    for (const auto& a : en.n.attributes) {
      const auto add = [&](const subgraph& sg) {
        if (sg)
          for (auto& v : free_values(*sg)) needed.insert(v);
      };
      if (const auto* sg = std::get_if<subgraph>(&a.value)) add(*sg);
      if (const auto* sgs = std::get_if<std::vector<subgraph>>(&a.value))
        for (const auto& sg : *sgs) add(sg);
    }
  }
  std::vector<std::string> keep;
  for (const auto& name : e.init_order) {
    if (needed.count(name) || e.graph_inputs.count(name)) {
      keep.push_back(name);
      continue;
    }
    // An initializer nothing uses any more (folded into a new one, say): its mapped pages can go now.
    if (const auto& t = e.inits[name]; t.is_file_backed()) release_file_pages(t.data(), t.byte_size());
    e.inits.erase(name);
  }
  e.init_order = std::move(keep);
  e.index();
}


}  // namespace epstack::opt
