// Fusions for the CPU provider's products, after partitioning (as the blocked layout, on the nodes the CPU provider
// got, since no other provider runs what they write): MatMul with a constant B, then the bias Add over its columns and
// a Relu or Gelu (and Gemm followed by Relu or Gelu), become one com.epstack.cpu MatMulBias whose bias and activation
// are applied as each tile of the product is stored. Before partitioning, fuse_matmul_add makes Gemm of MatMul + Add
// only where the rows' leading dimensions allow Reshapes (at most one unknown); a transformer exported with a dynamic
// batch and sequence (BERT's Q, K and V projections) keeps a MatMul and an Add that read and write Y once more each,
// and its feed-forward layer a BiasGelu after the MatMul (ONNX Runtime runs both as they are, or folds them into its
// Attention operator).
#include "egraph.hpp"

#include <epstack/ir/node_facts.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace epstack {

using namespace opt;

namespace {

bool is_contrib(const enode& en, std::string_view op) {
  return !en.dead && en.n.domain == contrib_domain && en.n.op_type == op;
}

// "Relu" or "Gelu" when `en` is a float ReLU or an erf-form GELU (com.microsoft Gelu, or ai.onnx Gelu-20 with
// approximate "none"), else empty.
std::string activation_of(const enode& en) {
  if (en.inputs.size() != 1 || en.outputs.size() != 1) return {};
  if (is_op(en, "Relu") && en.n.since_version >= 6) return "Relu";
  if (is_contrib(en, "Gelu")) return "Gelu";
  if (is_op(en, "Gelu")) {
    const std::string a = attr_s(en.n, "approximate", "none");
    return a == "none" ? "Gelu" : std::string();
  }
  return {};
}

// True when `t` is a constant float bias of one value per column of a rank-`rank` product with N columns, which
// broadcasts without changing the product's shape: [N], or [1, ..., 1, N] of at most `rank` dimensions.
bool column_bias(const tensor* t, std::int64_t N, std::size_t rank) {
  if (t == nullptr || t->type() != element_type::float32 || t->rank() == 0 || t->rank() > rank) return false;
  const auto s = t->sizes();
  for (std::size_t d = 0; d + 1 < s.size(); ++d)
    if (s[d] != 1) return false;
  return s.back() == N;
}

// A node of the CPU provider's fused domain, version 1, named as the product it replaces.
enode cpu_fused_node(const std::string& name, const char* op) {
  enode f;
  f.n.name = name;
  f.n.op_type = op;
  f.n.domain = std::string(cpu_fused_domain);
  f.n.since_version = 1;
  return f;
}

// Puts `f` (its op, attributes, inputs and outputs set) in place of the nodes `chain`, the product first: `f` takes the
// product's place and origin, the others die; the report names them all under f's op, and `rewritten` flags them.
void install_fused(egraph& e, const std::vector<std::size_t>& chain, enode f, optimization_report& rep,
                   std::vector<bool>* rewritten, std::size_t before) {
  const std::size_t i = chain.front();
  f.origin = e.nodes[i].origin;
  std::string names;
  for (const std::size_t k : chain) {
    names += cat(names.empty() ? "" : " + ", e.nodes[k].n.name);
    if (rewritten != nullptr && e.nodes[k].origin < before) (*rewritten)[e.nodes[k].origin] = true;
    if (k != i) e.nodes[k].dead = true;
  }
  rep.fusions.push_back(cat(f.n.op_type, ": ", names));
  e.nodes[i] = std::move(f);
  e.index();
}

// Replaces the nodes `chain` (the product first) by one MatMulBias in the product's place (its operands are there
// already, and the bias is a constant), writing `y`; reports the fusion and flags the nodes in `rewritten`.
void replace_chain(egraph& e, const std::vector<std::size_t>& chain, const std::string& bias, const std::string& activation,
                   bool trans_b, const std::string& y, optimization_report& rep, std::vector<bool>* rewritten,
                   std::size_t before) {
  const std::size_t i = chain.front();
  enode f = cpu_fused_node(e.nodes[i].n.name, "MatMulBias");
  if (!activation.empty()) f.n.attributes.set("activation", activation);
  if (trans_b) f.n.attributes.set("transB", std::int64_t{1});
  f.inputs = {e.nodes[i].inputs[0], e.nodes[i].inputs[1]};
  if (!bias.empty()) f.inputs.push_back(bias);
  f.outputs = {y};
  install_fused(e, chain, std::move(f), rep, rewritten, before);
}

// Gemm(A, B[, C]) (transA 0, alpha 1, beta 1 or no C; B a constant float matrix, C a constant bias over the columns)
// followed by Relu or Gelu, its sole reader on the CPU provider too ==> MatMulBias with transB and the activation
// (ONNX Runtime's GemmActivationFusion writes FusedGemm for the same). Not for A of at most 4 rows known at create:
// those Gemms run on the matrix-vector kernels, which a deployable links alone (gemm_mv_bt_of<float>), and a Relu
// after a batch-1 product costs a few microseconds.
template <class Ok>
bool fuse_gemm_activation(egraph& e, std::size_t i, const Ok& ok, optimization_report& rep, std::vector<bool>* rewritten,
                          std::size_t before) {
  const enode& gm = e.nodes[i];
  if (!is_op(gm, "Gemm") || !ok(gm) || gm.inputs.size() < 2 || gm.inputs.size() > 3 || gm.outputs.size() != 1) return false;
  if (attr_i(gm.n, "transA", 0) != 0 || attr_f(gm.n, "alpha", 1.0f) != 1.0f) return false;
  const type_info* at = e.type_of(gm.inputs[0]);
  const tensor* b = e.constant(gm.inputs[1]);
  if (at == nullptr || !at->is_tensor() || at->elem != element_type::float32 || !at->dims || at->dims->rank() != 2 ||
      b == nullptr || b->type() != element_type::float32 || b->rank() != 2)
    return false;
  if (const auto& rows = (*at->dims)[0]; rows.is_known() && rows.value <= 4) return false;
  const bool tb = attr_i(gm.n, "transB", 0) != 0;
  const std::int64_t N = b->sizes()[tb ? 0 : 1];
  const bool has_c = gm.inputs.size() == 3 && !gm.inputs[2].empty();
  if (has_c && (attr_f(gm.n, "beta", 1.0f) != 1.0f || !column_bias(e.constant(gm.inputs[2]), N, 2))) return false;
  const auto c = e.sole_consumer(gm.outputs[0]);
  if (!c || !ok(e.nodes[*c])) return false;
  const std::string activation = activation_of(e.nodes[*c]);
  if (activation.empty()) return false;
  replace_chain(e, {i, *c}, has_c ? gm.inputs[2] : std::string(), activation, tb, e.nodes[*c].outputs[0], rep, rewritten,
                before);
  return true;
}

// MatMul, or com.microsoft FusedMatMul without transBatch, of float operands of one rank r >= 2, with a Transpose
// before an operand (its sole reader this product) or after Y (Y's sole reader, the last dim kept last), all the CPU
// provider's ==> one PermutedMatMul that reads the Transposes' inputs through the permutations and writes Y where the
// Transpose after it put it: an attention layer's Q, K and V into heads and its context out of them are not copied
// (BERT-base: 48 Transposes, 1.0-1.1 ms of its 70). A Transpose that moves its input's last dim out of the product's
// two matrix dims stays (no unit stride to read the operand with), and so does a product whose B is a constant (its
// kernels pack such a B once, at create).
template <class Ok>
bool fold_transposes(egraph& e, std::size_t i, const Ok& ok, optimization_report& rep, std::vector<bool>* rewritten,
                     std::size_t before) {
  const enode& mm = e.nodes[i];
  const bool fused = is_contrib(mm, "FusedMatMul");
  if (!(is_op(mm, "MatMul") || fused) || !ok(mm) || mm.inputs.size() != 2 || mm.outputs.size() != 1) return false;
  if (fused && (attr_i(mm.n, "transBatchA", 0) != 0 || attr_i(mm.n, "transBatchB", 0) != 0)) return false;
  // A constant B is packed once at create by MatMul, FusedMatMul and MatMulBias (which may take a bias and activation
  // after it); PermutedMatMul packs nothing.
  if (e.constant(mm.inputs[1]) != nullptr) return false;
  const auto rank_of = [&](const std::string& v) -> std::size_t {
    const type_info* t = e.type_of(v);
    return t != nullptr && t->is_tensor() && t->elem == element_type::float32 && t->dims ? t->dims->rank() : 0;
  };
  const std::size_t r = rank_of(mm.inputs[0]);
  if (r < 2 || rank_of(mm.inputs[1]) != r || rank_of(mm.outputs[0]) != r) return false;
  const auto rr = static_cast<std::int64_t>(r);
  const auto is_perm = [&](const std::vector<std::int64_t>& p) {
    if (p.size() != r) return false;
    std::vector<bool> seen(r, false);
    for (const std::int64_t v : p) {
      if (v < 0 || v >= rr || seen[static_cast<std::size_t>(v)]) return false;
      seen[static_cast<std::size_t>(v)] = true;
    }
    return true;
  };
  std::vector<std::size_t> chain{i};
  // An operand: the source read and the permutation it is read through (empty: none).
  const auto operand = [&](const std::string& v, bool t) {
    std::string src = v;
    std::vector<std::int64_t> perm;
    if (const auto pi = e.producer_index(v); pi && e.sole_consumer(v) == i && ok(e.nodes[*pi]) && is_op(e.nodes[*pi], "Transpose") &&
                                             e.nodes[*pi].inputs.size() == 1 && e.nodes[*pi].outputs.size() == 1) {
      auto p = attr_ints(e.nodes[*pi].n, "perm");
      if (is_perm(p) && rank_of(e.nodes[*pi].inputs[0]) == r) {
        if (t) std::swap(p[r - 2], p[r - 1]);
        if (p[r - 1] == rr - 1 || p[r - 2] == rr - 1) {
          src = e.nodes[*pi].inputs[0];
          perm = std::move(p);
          chain.push_back(*pi);
          return std::pair{src, perm};
        }
      }
    }
    if (t) {
      for (std::int64_t d = 0; d < rr; ++d) perm.push_back(d);
      std::swap(perm[r - 2], perm[r - 1]);
    }
    return std::pair{src, perm};
  };
  const bool ta = fused && attr_i(mm.n, "transA", 0) != 0, tb = fused && attr_i(mm.n, "transB", 0) != 0;
  const float alpha = fused ? attr_f(mm.n, "alpha", 1.0f) : 1.0f;
  auto [a, pa] = operand(mm.inputs[0], ta);
  auto [b, pb] = operand(mm.inputs[1], tb);
  std::string y = mm.outputs[0];
  std::vector<std::int64_t> py;
  if (const auto c = e.sole_consumer(y); c && ok(e.nodes[*c]) && is_op(e.nodes[*c], "Transpose") && e.nodes[*c].outputs.size() == 1) {
    auto p = attr_ints(e.nodes[*c].n, "perm");
    if (is_perm(p) && p[r - 1] == rr - 1 && rank_of(e.nodes[*c].outputs[0]) == r) {
      py = std::move(p);
      y = e.nodes[*c].outputs[0];
      chain.push_back(*c);
    }
  }
  if (chain.size() == 1) return false;
  enode f = cpu_fused_node(mm.n.name, "PermutedMatMul");
  if (!pa.empty()) f.n.attributes.set("perm_a", pa);
  if (!pb.empty()) f.n.attributes.set("perm_b", pb);
  if (!py.empty()) f.n.attributes.set("perm_y", py);
  if (alpha != 1.0f) f.n.attributes.set("alpha", alpha);
  f.inputs = {a, b};
  f.outputs = {y};
  install_fused(e, chain, std::move(f), rep, rewritten, before);
  return true;
}

}  // namespace

Result<std::size_t> cpu_product_fusion(model& m, const std::vector<bool>& eligible, optimization_report& rep,
                                       std::vector<bool>* rewritten, bool fold_permutes) {
  const std::size_t before = m.graph.node_count();
  if (rewritten != nullptr) rewritten->assign(before, false);
  // Every fusion starts at a MatMul or Gemm the CPU provider got: without one, the graph is not copied into the
  // editable form at all (that copy and its teardown were all this pass cost a model whose products went elsewhere).
  bool any = false;
  for (node_id n = 0; n < before && n < eligible.size() && !any; ++n) {
    const node& nd = m.graph.node(n);
    any = eligible[n] && ((is_onnx(nd) && (nd.op_type == "MatMul" || nd.op_type == "Gemm")) ||
                          (fold_permutes && nd.domain == contrib_domain && nd.op_type == "FusedMatMul"));
  }
  if (!any) return std::size_t{0};
  EPSTACK_ASSIGN_OR_RETURN(egraph e, to_egraph(m.graph));
  const auto ok = [&](const enode& en) { return !en.dead && en.origin != no_id && en.origin < eligible.size() && eligible[en.origin]; };
  std::size_t fused = 0;
  for (std::size_t i = 0; i < e.nodes.size(); ++i) {
    if (fuse_gemm_activation(e, i, ok, rep, rewritten, before)) {
      ++fused;
      continue;
    }
    if (fold_permutes && fold_transposes(e, i, ok, rep, rewritten, before)) {
      ++fused;
      continue;
    }
    const enode& mm = e.nodes[i];
    if (!is_op(mm, "MatMul") || !ok(mm) || mm.inputs.size() != 2 || mm.outputs.size() != 1) continue;
    const type_info* at = e.type_of(mm.inputs[0]);
    const tensor* b = e.constant(mm.inputs[1]);
    if (at == nullptr || !at->is_tensor() || at->elem != element_type::float32 || !at->dims || at->dims->rank() < 2 ||
        b == nullptr || b->type() != element_type::float32 || b->rank() != 2)
      continue;
    const std::int64_t N = b->sizes()[1];
    const std::size_t rank = at->dims->rank();
    std::vector<std::size_t> chain{i};
    std::string bias, activation, y = mm.outputs[0];
    // The node after `v`, when it alone reads `v` (no graph output, no subgraph) and is the CPU provider's.
    const auto next_of = [&](const std::string& v) -> const enode* {
      const auto c = e.sole_consumer(v);
      return c && ok(e.nodes[*c]) ? &e.nodes[*c] : nullptr;
    };
    const enode* nx = next_of(y);
    if (nx != nullptr && is_op(*nx, "Add") && nx->inputs.size() == 2 && nx->outputs.size() == 1) {
      const std::string& other = nx->inputs[0] == y ? nx->inputs[1] : nx->inputs[0];
      if (other != y && column_bias(e.constant(other), N, rank)) {
        bias = other;
        chain.push_back(static_cast<std::size_t>(nx - e.nodes.data()));
        y = nx->outputs[0];
        if (const enode* act = next_of(y); act != nullptr && !(activation = activation_of(*act)).empty()) {
          chain.push_back(static_cast<std::size_t>(act - e.nodes.data()));
          y = act->outputs[0];
        }
      }
    } else if (nx != nullptr && is_contrib(*nx, "BiasGelu") && nx->inputs.size() == 2 && nx->inputs[0] == y &&
               nx->outputs.size() == 1 && column_bias(e.constant(nx->inputs[1]), N, 1)) {
      bias = nx->inputs[1];
      activation = "Gelu";
      chain.push_back(static_cast<std::size_t>(nx - e.nodes.data()));
      y = nx->outputs[0];
    } else if (nx != nullptr && !(activation = activation_of(*nx)).empty()) {
      chain.push_back(static_cast<std::size_t>(nx - e.nodes.data()));
      y = nx->outputs[0];
    }
    if (chain.size() == 1) continue;
    replace_chain(e, chain, bias, activation, false, y, rep, rewritten, before);
    ++fused;
  }
  if (fused == 0) return std::size_t{0};
  dead_node_elimination(e, rep);
  m.graph = from_egraph(e);
  if (m.opset(cpu_fused_domain) < 0) m.opsets.push_back({std::string(cpu_fused_domain), 1});
  rep.nodes_after = m.graph.node_count();
  return fused;
}

}  // namespace epstack
