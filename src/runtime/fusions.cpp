// The fusions of the extended level: Conv+BatchNormalization, FusedConv, Gelu/BiasGelu, LayerNormalization,
// SkipLayerNormalization, MatMul+Add into Gemm (ONNX Runtime's transformers of the same names).
#include "egraph.hpp"

#include <epstack/core/thread_pool.hpp>
#include <epstack/core/weight_memory.hpp>
#include <epstack/ir/node_facts.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <set>

namespace epstack::opt {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Fusions.

std::optional<float> scalar_value(const egraph& e, const std::string& v) {
  const tensor* t = e.constant(v);
  if (t == nullptr || t->element_count() != 1) return std::nullopt;
  if (t->type() == element_type::float32) return *t->typed<float>();
  if (t->type() == element_type::float64) return static_cast<float>(*t->typed<double>());
  return std::nullopt;
}
bool near(float a, float b) { return std::fabs(a - b) <= 1e-4f * std::max(1.0f, std::fabs(b)); }

// The other input of a two-input node, given one of them.
std::optional<std::string> other_input(const enode& en, const std::string& one) {
  if (en.inputs.size() != 2) return std::nullopt;
  if (en.inputs[0] == one) return en.inputs[1];
  if (en.inputs[1] == one) return en.inputs[0];
  return std::nullopt;
}

bool same_static_dims(const type_info* a, const type_info* b) {
  if (a == nullptr || b == nullptr || !a->is_tensor() || !b->is_tensor() || !a->dims || !b->dims) return false;
  if (a->dims->rank() != b->dims->rank()) return false;
  for (std::size_t i = 0; i < a->dims->rank(); ++i) {
    const auto& x = (*a->dims)[i];
    const auto& y = (*b->dims)[i];
    if (x.is_known() && y.is_known()) {
      if (x.value != y.value) return false;
    } else if (!(x.is_symbolic() && y.is_symbolic() && x.param == y.param)) {
      return false;
    }
  }
  return true;
}
// False when shape inference proves the two shapes differ (a rank, a size, or a broadcast 1 against another size).
bool may_be_equal(const type_info* a, const type_info* b) {
  if (a == nullptr || b == nullptr || !a->dims || !b->dims) return true;
  if (a->dims->rank() != b->dims->rank()) return false;
  for (std::size_t i = 0; i < a->dims->rank(); ++i) {
    const auto& x = (*a->dims)[i];
    const auto& y = (*b->dims)[i];
    if (x.is_known() && y.is_known() && x.value != y.value) return false;
    if ((x.is_known() && x.value == 1) != (y.is_known() && y.value == 1) && (x.is_known() || y.is_known())) return false;
  }
  return true;
}
bool is_float_tensor(const egraph& e, const std::string& v) {
  const type_info* t = e.type_of(v);
  return t != nullptr && t->is_tensor() && t->elem == element_type::float32;
}

}  // namespace

// A new node `op` of ONNX Runtime's contrib domain (version 1) named `name`.
enode contrib_node(const std::string& name, std::string_view op) {
  enode n;
  n.n.name = name;
  n.n.op_type = std::string(op);
  n.n.domain = std::string(contrib_domain);
  n.n.since_version = 1;
  return n;
}

// Conv(X, W[, B]) -> BatchNormalization  ==>  Conv(X, W', B').
void fuse_conv_bn(egraph& e, optimization_report& rep, thread_pool* pool) {
  // The graph is edited first (one fusion does not change what another one matches: each reads only its own Conv's
  // output and BatchNormalization), then every fused filter is scaled at once on the pool's threads: ResNet-50's are
  // 100 MB, written to new pages, which took a single thread 20-25 ms of its create.
  struct scaling {
    const tensor* w;
    std::vector<float> factor;  // per output channel
    std::string fused;          // the new initializer's name
  };
  std::vector<scaling> jobs;
  for (std::size_t i = 0; i < e.nodes.size(); ++i) {
    auto& conv = e.nodes[i];
    if (!is_op(conv, "Conv") || conv.inputs.size() < 2 || !is_float_tensor(e, conv.outputs[0])) continue;
    const auto c = e.sole_consumer(conv.outputs[0]);
    if (!c) continue;
    auto& bn = e.nodes[*c];
    if (!is_op(bn, "BatchNormalization") || bn.inputs.size() != 5 || bn.inputs[0] != conv.outputs[0]) continue;
    bool extra_outputs = false;
    for (std::size_t k = 1; k < bn.outputs.size(); ++k) extra_outputs = extra_outputs || (!bn.outputs[k].empty() && e.uses(bn.outputs[k]) > 0);
    if (extra_outputs) continue;
    if (const auto* tm = bn.n.attributes.find("training_mode"); tm && std::holds_alternative<std::int64_t>(tm->value) &&
                                                                  std::get<std::int64_t>(tm->value) != 0)
      continue;
    const tensor* w = e.constant(conv.inputs[1]);
    const tensor* b = conv.inputs.size() > 2 && !conv.inputs[2].empty() ? e.constant(conv.inputs[2]) : nullptr;
    if (w == nullptr || w->type() != element_type::float32 || w->rank() < 3) continue;
    if (conv.inputs.size() > 2 && !conv.inputs[2].empty() && b == nullptr) continue;
    const tensor* p[4];
    bool ok = true;
    const auto M = w->sizes()[0];
    for (int k = 0; k < 4; ++k) {
      p[k] = e.constant(bn.inputs[static_cast<std::size_t>(k) + 1]);
      ok = ok && p[k] != nullptr && p[k]->type() == element_type::float32 && p[k]->element_count() == static_cast<std::size_t>(M);
    }
    if (!ok || (b != nullptr && (b->type() != element_type::float32 || b->element_count() != static_cast<std::size_t>(M)))) continue;
    float eps = 1e-5f;
    if (const auto* a = bn.n.attributes.find("epsilon"); a && std::holds_alternative<float>(a->value)) eps = std::get<float>(a->value);
    const float* scale = p[0]->typed<float>();
    const float* beta = p[1]->typed<float>();
    const float* mean = p[2]->typed<float>();
    const float* var = p[3]->typed<float>();
    scaling job{w, std::vector<float>(static_cast<std::size_t>(M)), e.fresh(conv.inputs[1] + "_bn")};
    tensor nb = tensor::uninitialized(element_type::float32, std::span<const std::int64_t>(&M, 1));
    for (std::int64_t m = 0; m < M; ++m) {
      const float f = scale[m] / std::sqrt(var[m] + eps);
      job.factor[static_cast<std::size_t>(m)] = f;
      nb.typed<float>()[m] = ((b != nullptr ? b->typed<float>()[m] : 0.0f) - mean[m]) * f + beta[m];
    }
    // The scaled filter's storage, written below: names and types are known from here on. Its own allocation (the
    // blocked layout copies most of them and frees these), on huge pages when large (weight_memory.hpp: a fault per
    // 4 KiB page was most of ResNet-50's create on a VM).
    const std::size_t w_bytes = w->byte_size();
    if (w_bytes >= (std::size_t{1} << 20)) {
      auto chunk = detail::map_huge_chunk(w_bytes);
      void* at = chunk.get();
      e.add_init(job.fused, tensor::borrow(element_type::float32, w->sizes(), at, std::move(chunk)));
    } else {
      e.add_init(job.fused, tensor::uninitialized(element_type::float32, w->sizes()));
    }
    const std::string bname = e.fresh(bn.outputs[0] + "_bias");
    e.add_init(bname, std::move(nb));
    conv.inputs.resize(3);
    conv.inputs[1] = job.fused;
    conv.inputs[2] = bname;
    conv.outputs[0] = bn.outputs[0];
    bn.dead = true;
    rep.fusions.push_back(cat("Conv+BatchNormalization: ", conv.n.name, " + ", bn.n.name));
    jobs.push_back(std::move(job));
  }
  if (jobs.empty()) return;
  e.index();
  // Work items of at most 256 Ki values (one filter's output channels in order), so both threads share a large one.
  struct piece {
    const scaling* job;
    float* dst;
    std::size_t first, last;  // output channels
  };
  std::vector<piece> pieces;
  for (const auto& job : jobs) {
    // A filter that sits unaligned in a mapped model file is copied bytewise first and scaled in place.
    tensor& nw = e.inits.at(job.fused);
    const std::size_t M = job.factor.size(), per = job.w->element_count() / M;
    const std::size_t step = std::max<std::size_t>(1, (std::size_t{1} << 18) / std::max<std::size_t>(per, 1));
    for (std::size_t m = 0; m < M; m += step) pieces.push_back({&job, nw.typed<float>(), m, std::min(M, m + step)});
  }
  const auto run = [&](std::size_t lo, std::size_t hi) {
    for (std::size_t k = lo; k < hi; ++k) {
      const auto& [job, dst, first, last] = pieces[k];
      const std::size_t per = job->w->element_count() / job->factor.size();
      const auto* bytes = reinterpret_cast<const unsigned char*>(job->w->data()) + first * per * sizeof(float);
      float* out = dst + first * per;
      const std::size_t n = (last - first) * per * sizeof(float);
      // From the model file in one bulk read where it is mapped lazily (not a page fault at a time), then scaled in
      // place; so is a filter that sits unaligned in a mapping (copied bytewise first).
      bool in_place = job->w->is_file_backed() && read_mapped(bytes, n, out);
      if (!in_place && reinterpret_cast<std::uintptr_t>(bytes) % alignof(float) != 0) {
        std::memcpy(out, bytes, n);
        in_place = true;
      }
      const float* from = in_place ? out : reinterpret_cast<const float*>(bytes);
      for (std::size_t m = first; m < last; ++m, from += per, out += per) {
        const float f = job->factor[m];
        for (std::size_t q = 0; q < per; ++q) out[q] = from[q] * f;
      }
    }
  };
  if (pool != nullptr) pool->parallel_for(pieces.size(), 1, run);
  else run(0, pieces.size());
}

namespace {

// The FusedConv activation for an activation node, or nullopt.
std::optional<std::pair<std::string, std::vector<float>>> activation_of(const egraph& e, const enode& act) {
  if (act.dead || !is_onnx(act.n)) return std::nullopt;
  const auto& op = act.n.op_type;
  if (op == "Relu" || op == "Sigmoid" || op == "Tanh") return std::pair{op, std::vector<float>{}};
  if (op == "LeakyRelu") {
    float alpha = 0.01f;
    if (const auto* a = act.n.attributes.find("alpha"); a && std::holds_alternative<float>(a->value)) alpha = std::get<float>(a->value);
    return std::pair{op, std::vector<float>{alpha}};
  }
  if (op == "Clip") {
    float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
    if (act.n.since_version < 11) {
      if (const auto* a = act.n.attributes.find("min"); a && std::holds_alternative<float>(a->value)) lo = std::get<float>(a->value);
      if (const auto* a = act.n.attributes.find("max"); a && std::holds_alternative<float>(a->value)) hi = std::get<float>(a->value);
    } else {
      if (act.inputs.size() > 1 && !act.inputs[1].empty()) {
        auto v = scalar_value(e, act.inputs[1]);
        if (!v) return std::nullopt;
        lo = *v;
      }
      if (act.inputs.size() > 2 && !act.inputs[2].empty()) {
        auto v = scalar_value(e, act.inputs[2]);
        if (!v) return std::nullopt;
        hi = *v;
      }
    }
    return std::pair{op, std::vector<float>{lo, hi}};
  }
  return std::nullopt;
}

}  // namespace

// Conv [-> Add(Z)] [-> activation]  ==>  com.microsoft FusedConv(X, W, B, Z) with the activation.
void fuse_conv_activation(egraph& e, optimization_report& rep) {
  for (std::size_t i = 0; i < e.nodes.size(); ++i) {
    auto& conv = e.nodes[i];
    if (!is_op(conv, "Conv") || !is_float_tensor(e, conv.outputs[0])) continue;
    std::string y = conv.outputs[0];
    std::vector<std::size_t> absorbed;
    std::string z;
    std::size_t last = i;
    auto c = e.sole_consumer(y);
    if (c && is_op(e.nodes[*c], "Add")) {
      const auto other = other_input(e.nodes[*c], y);
      if (other && *other != y && e.constant(*other) == nullptr && same_static_dims(e.type_of(*other), e.type_of(y)) &&
          same_static_dims(e.type_of(e.nodes[*c].outputs[0]), e.type_of(y))) {
        z = *other;
        absorbed.push_back(*c);
        last = std::max(last, *c);
        y = e.nodes[*c].outputs[0];
        c = e.sole_consumer(y);
      }
    }
    std::optional<std::pair<std::string, std::vector<float>>> act;
    if (c) act = activation_of(e, e.nodes[*c]);
    if (act) {
      absorbed.push_back(*c);
      last = std::max(last, *c);
      y = e.nodes[*c].outputs[0];
    }
    if (absorbed.empty()) continue;
    enode fused;
    fused.n = conv.n;
    fused.n.op_type = "FusedConv";
    fused.n.domain = std::string(contrib_domain);
    fused.n.since_version = 1;
    if (act) {
      fused.n.attributes.set("activation", act->first);
      if (!act->second.empty()) fused.n.attributes.set("activation_params", act->second);
    }
    fused.inputs = conv.inputs;
    fused.inputs.resize(3);
    if (!z.empty()) fused.inputs.push_back(z);
    fused.outputs = {y};
    std::string desc = cat("FusedConv: ", conv.n.name);
    e.unindex(i);
    for (auto k : absorbed) {
      desc += cat(" + ", e.nodes[k].n.op_type);
      e.unindex(k);
      e.nodes[k].dead = true;
    }
    conv.dead = true;
    // The fused node takes the place of the last node it replaces, where every input (Z included) is available.
    e.nodes[last] = std::move(fused);
    e.reindex(last);
    rep.fusions.push_back(std::move(desc));
  }
}

// x -> Div(sqrt 2) | Mul(1/sqrt 2) -> Erf -> Add(1) -> Mul(x) -> Mul(0.5)   ==>  Gelu(x)   (BiasGelu when x = Add(y, bias))
void fuse_gelu(egraph& e, optimization_report& rep) {
  for (std::size_t i = 0; i < e.nodes.size(); ++i) {
    const auto& first = e.nodes[i];
    if (first.dead || !is_onnx(first.n) || first.inputs.size() != 2) continue;
    const bool div = first.n.op_type == "Div" && scalar_value(e, first.inputs[1]).has_value() && near(*scalar_value(e, first.inputs[1]), 1.41421356f);
    const bool mul = first.n.op_type == "Mul" && scalar_value(e, first.inputs[1]).has_value() && near(*scalar_value(e, first.inputs[1]), 0.70710678f);
    if (!div && !mul) continue;
    const std::string x = first.inputs[0];
    if (!is_float_tensor(e, x)) continue;
    const auto erf_i = e.sole_consumer(first.outputs[0]);
    if (!erf_i || !is_op(e.nodes[*erf_i], "Erf")) continue;
    const auto add_i = e.sole_consumer(e.nodes[*erf_i].outputs[0]);
    if (!add_i || !is_op(e.nodes[*add_i], "Add")) continue;
    const auto one = other_input(e.nodes[*add_i], e.nodes[*erf_i].outputs[0]);
    if (!one || !scalar_value(e, *one) || !near(*scalar_value(e, *one), 1.0f)) continue;
    const auto m1_i = e.sole_consumer(e.nodes[*add_i].outputs[0]);
    if (!m1_i || !is_op(e.nodes[*m1_i], "Mul")) continue;
    const auto m1_other = other_input(e.nodes[*m1_i], e.nodes[*add_i].outputs[0]);
    if (!m1_other) continue;
    std::size_t last;
    std::string y;
    if (*m1_other == x) {  // (x * (1 + erf)) * 0.5
      const auto m2_i = e.sole_consumer(e.nodes[*m1_i].outputs[0]);
      if (!m2_i || !is_op(e.nodes[*m2_i], "Mul")) continue;
      const auto half = other_input(e.nodes[*m2_i], e.nodes[*m1_i].outputs[0]);
      if (!half || !scalar_value(e, *half) || !near(*scalar_value(e, *half), 0.5f)) continue;
      last = *m2_i;
    } else if (scalar_value(e, *m1_other) && near(*scalar_value(e, *m1_other), 0.5f)) {  // x * ((1 + erf) * 0.5)
      const auto m2_i = e.sole_consumer(e.nodes[*m1_i].outputs[0]);
      if (!m2_i || !is_op(e.nodes[*m2_i], "Mul")) continue;
      const auto xx = other_input(e.nodes[*m2_i], e.nodes[*m1_i].outputs[0]);
      if (!xx || *xx != x) continue;
      last = *m2_i;
    } else {
      continue;
    }
    y = e.nodes[last].outputs[0];
    // x must be used only by the pattern (Div/Mul and the Mul by x).
    if (e.uses(x) != 2) continue;
    enode g;
    g.n.name = e.nodes[last].n.name.empty() ? first.n.name : e.nodes[last].n.name;
    g.n.domain = std::string(contrib_domain);
    g.n.since_version = 1;
    g.outputs = {y};
    std::string desc;
    const enode* xp = e.producer_of(x);
    std::optional<std::string> bias;
    if (xp != nullptr && is_op(*xp, "Add")) {
      for (int k = 0; k < 2 && !bias; ++k) {
        // BiasGelu broadcasts its bias like Add: a constant of rank 1 is all it needs.
        const tensor* t = e.constant(xp->inputs[static_cast<std::size_t>(k)]);
        if (t != nullptr && t->type() == element_type::float32 && t->rank() == 1 &&
            e.constant(xp->inputs[static_cast<std::size_t>(1 - k)]) == nullptr)
          bias = xp->inputs[static_cast<std::size_t>(k)];
      }
    }
    if (bias) {
      const auto xi = *e.producer_index(x);
      const std::string a = e.nodes[xi].inputs[0] == *bias ? e.nodes[xi].inputs[1] : e.nodes[xi].inputs[0];
      g.n.op_type = "BiasGelu";
      g.inputs = {a, *bias};
      e.nodes[xi].dead = true;
      desc = cat("BiasGelu: ", e.nodes[xi].n.name, " + Gelu(erf) ", g.n.name);
    } else {
      g.n.op_type = "Gelu";
      g.inputs = {x};
      desc = cat("Gelu: ", g.n.name);
    }
    for (auto k : {i, *erf_i, *add_i, *m1_i}) e.nodes[k].dead = true;
    e.nodes[last] = std::move(g);
    rep.fusions.push_back(std::move(desc));
    e.index();
  }
}

namespace {

// The decomposed LayerNorm of opset-13 exporters over the last axis  ==>  LayerNormalization (the ONNX op from
// opset 17, else com.microsoft's), then Add(a, b) feeding it  ==>  SkipLayerNormalization.
bool last_axis_reduce(const egraph& e, const enode& en, const std::string& input) {
  if (!is_op(en, "ReduceMean") || en.inputs.empty() || en.inputs[0] != input) return false;
  const auto* ax = en.n.attributes.find("axes");
  const auto* kd = en.n.attributes.find("keepdims");
  if (kd && (!std::holds_alternative<std::int64_t>(kd->value) || std::get<std::int64_t>(kd->value) != 1)) return false;
  if (!ax || !std::holds_alternative<std::vector<std::int64_t>>(ax->value)) return false;
  const auto& axes = std::get<std::vector<std::int64_t>>(ax->value);
  if (axes.size() != 1) return false;
  if (axes[0] == -1) return true;
  const type_info* t = e.type_of(input);
  return t != nullptr && t->dims && static_cast<std::int64_t>(t->dims->rank()) - 1 == axes[0];
}

}  // namespace

void fuse_layer_norm(egraph& e, std::int64_t onnx_opset, optimization_report& rep) {
  for (std::size_t i = 0; i < e.nodes.size(); ++i) {
    const auto& rm1 = e.nodes[i];
    if (rm1.dead || rm1.inputs.empty()) continue;
    const std::string x = rm1.inputs[0];
    if (!last_axis_reduce(e, rm1, x) || !is_float_tensor(e, x)) continue;
    const auto sub_i = e.sole_consumer(rm1.outputs[0]);
    if (!sub_i || !is_op(e.nodes[*sub_i], "Sub") || e.nodes[*sub_i].inputs[0] != x || e.nodes[*sub_i].inputs[1] != rm1.outputs[0]) continue;
    const std::string d = e.nodes[*sub_i].outputs[0];
    if (e.uses(d) != 2) continue;
    std::optional<std::size_t> sq_i, div_i;
    const auto readers = e.consumers.find(d);
    if (readers == e.consumers.end()) continue;
    for (auto k : readers->second) {
      const auto& en = e.nodes[k];
      if (is_op(en, "Pow") && en.inputs[0] == d && scalar_value(e, en.inputs[1]) && near(*scalar_value(e, en.inputs[1]), 2.0f)) sq_i = k;
      else if (is_op(en, "Mul") && en.inputs.size() == 2 && en.inputs[0] == d && en.inputs[1] == d) sq_i = k;
      else if (is_op(en, "Div") && en.inputs[0] == d) div_i = k;
    }
    if (!sq_i || !div_i) continue;
    const auto rm2_i = e.sole_consumer(e.nodes[*sq_i].outputs[0]);
    if (!rm2_i || !last_axis_reduce(e, e.nodes[*rm2_i], e.nodes[*sq_i].outputs[0])) continue;
    const auto add_i = e.sole_consumer(e.nodes[*rm2_i].outputs[0]);
    if (!add_i || !is_op(e.nodes[*add_i], "Add")) continue;
    const auto eps_v = other_input(e.nodes[*add_i], e.nodes[*rm2_i].outputs[0]);
    if (!eps_v || !scalar_value(e, *eps_v)) continue;
    const float eps = *scalar_value(e, *eps_v);
    const auto sqrt_i = e.sole_consumer(e.nodes[*add_i].outputs[0]);
    if (!sqrt_i || !is_op(e.nodes[*sqrt_i], "Sqrt")) continue;
    if (e.nodes[*div_i].inputs[1] != e.nodes[*sqrt_i].outputs[0] || e.uses(e.nodes[*sqrt_i].outputs[0]) != 1) continue;
    const auto mul_i = e.sole_consumer(e.nodes[*div_i].outputs[0]);
    if (!mul_i || !is_op(e.nodes[*mul_i], "Mul")) continue;
    const auto gamma = other_input(e.nodes[*mul_i], e.nodes[*div_i].outputs[0]);
    if (!gamma) continue;
    // Scale and bias are vectors over the last dim; when shape inference knows that dim, their length must match it
    // (when it does not, the LayerNormalization kernel checks at run time).
    const type_info* xt = e.type_of(x);
    const dimension* last_dim = xt != nullptr && xt->dims && xt->dims->rank() > 0 ? &(*xt->dims)[xt->dims->rank() - 1] : nullptr;
    const auto is_vec = [&](const std::string& v) {
      const tensor* t = e.constant(v);
      return t != nullptr && t->type() == element_type::float32 && t->rank() == 1 &&
             (last_dim == nullptr || !last_dim->is_known() || t->sizes()[0] == last_dim->value);
    };
    if (!is_vec(*gamma)) continue;
    std::size_t last = *mul_i;
    std::string beta;
    if (const auto badd = e.sole_consumer(e.nodes[*mul_i].outputs[0]); badd && is_op(e.nodes[*badd], "Add")) {
      const auto b = other_input(e.nodes[*badd], e.nodes[*mul_i].outputs[0]);
      if (b && is_vec(*b)) {
        beta = *b;
        last = *badd;
      }
    }
    enode ln;
    ln.n.name = e.nodes[last].n.name;
    ln.n.op_type = "LayerNormalization";
    if (onnx_opset >= 17) {
      ln.n.since_version = 17;
    } else {
      ln.n.domain = std::string(contrib_domain);
      ln.n.since_version = 1;
    }
    ln.n.attributes.set("axis", std::int64_t{-1});
    ln.n.attributes.set("epsilon", eps);
    ln.inputs = {x, *gamma};
    if (!beta.empty()) ln.inputs.push_back(beta);
    ln.outputs = {e.nodes[last].outputs[0]};
    for (auto k : {i, *sub_i, *sq_i, *rm2_i, *add_i, *sqrt_i, *div_i, *mul_i}) e.nodes[k].dead = true;
    e.nodes[last] = std::move(ln);
    rep.fusions.push_back(cat("LayerNormalization: decomposed pattern ending at ", e.nodes[last].n.name));
    e.index();
  }
}

void fuse_skip_layer_norm(egraph& e, optimization_report& rep) {
  for (std::size_t i = 0; i < e.nodes.size(); ++i) {
    auto& ln = e.nodes[i];
    if (ln.dead || ln.n.op_type != "LayerNormalization" || ln.inputs.size() < 2 || ln.outputs.size() != 1) continue;
    if (!(is_onnx(ln.n) || ln.n.domain == contrib_domain)) continue;
    const auto* ax = ln.n.attributes.find("axis");
    if (ax && (!std::holds_alternative<std::int64_t>(ax->value) || std::get<std::int64_t>(ax->value) != -1)) {
      const type_info* t = e.type_of(ln.inputs[0]);
      if (!(ax && std::holds_alternative<std::int64_t>(ax->value) && t && t->dims &&
            std::get<std::int64_t>(ax->value) == static_cast<std::int64_t>(t->dims->rank()) - 1))
        continue;
    }
    const std::string x = ln.inputs[0];
    const auto ai = e.producer_index(x);
    if (!ai || !is_op(e.nodes[*ai], "Add") || e.implicit.count(x)) continue;
    const auto& add = e.nodes[*ai];
    if (add.inputs.size() != 2 || e.constant(add.inputs[0]) || e.constant(add.inputs[1])) continue;
    // Both operands the sum's shape when shape inference knows them; when it does not, the kernel takes the larger
    // operand as the input and checks that the other broadcasts over its rows.
    if (!may_be_equal(e.type_of(add.inputs[0]), e.type_of(add.inputs[1]))) continue;
    std::string a = add.inputs[0], b = add.inputs[1], bias;
    // A bias added to either operand just before (Linear's Add(bias, MatMul)) joins too.
    for (int side = 0; side < 2 && bias.empty(); ++side) {
      const std::string& v = side == 0 ? a : b;
      const auto pi = e.producer_index(v);
      if (!pi || !is_op(e.nodes[*pi], "Add") || !e.sole_consumer(v)) continue;
      const auto& pa = e.nodes[*pi];
      for (int k = 0; k < 2; ++k) {
        const tensor* t = e.constant(pa.inputs[static_cast<std::size_t>(k)]);
        const tensor* g = e.constant(ln.inputs[1]);
        if (t && t->type() == element_type::float32 && t->rank() == 1 && g && g->element_count() == t->element_count()) {
          bias = pa.inputs[static_cast<std::size_t>(k)];
          const std::string rest = pa.inputs[static_cast<std::size_t>(1 - k)];
          e.nodes[*pi].dead = true;
          (side == 0 ? a : b) = rest;
          break;
        }
      }
    }
    enode s = contrib_node(ln.n.name, "SkipLayerNormalization");
    float eps = 1e-5f;
    if (const auto* ea = ln.n.attributes.find("epsilon"); ea && std::holds_alternative<float>(ea->value)) eps = std::get<float>(ea->value);
    s.n.attributes.set("epsilon", eps);
    s.inputs = {a, b, ln.inputs[1], ln.inputs.size() > 2 ? ln.inputs[2] : std::string()};
    if (!bias.empty()) s.inputs.push_back(bias);
    // The sum stays available (pre-LN transformers use it again) as output 3.
    const bool sum_used = e.uses(x) > 1;
    s.outputs = {ln.outputs[0], std::string(), std::string(), sum_used ? x : std::string()};
    while (!s.outputs.empty() && s.outputs.back().empty()) s.outputs.pop_back();
    e.nodes[*ai].dead = true;
    rep.fusions.push_back(cat("SkipLayerNormalization: ", add.n.name, " + ", ln.n.name, bias.empty() ? "" : " (+ bias)"));
    ln = std::move(s);
    e.index();
  }
}

// MatMul(A [M,K], B const [K,N]) -> Add(bias const [N])  ==>  Gemm, as ONNX Runtime's MatMulAddFusion: the bias is
// added as the product is stored (the packed product's epilogue) instead of by a pass of its own over Y. An A of
// higher rank ([batch, sequence, hidden]) goes through Reshape to [M, K] and back, views that cost nothing, when its
// last dimension is K and at most one of the others is not a known size (ONNX Runtime wants them all known): that one
// becomes -1 in both Reshapes, so a model with a dynamic batch fuses too (BERT-base's 36 Q, K and V bias Adds, at fixed
// sizes; they were under 1% of its run on one thread). `onnx_opset` picks the Reshape version.
void fuse_matmul_add(egraph& e, optimization_report& rep, std::int64_t onnx_opset) {
  for (std::size_t i = 0; i < e.nodes.size(); ++i) {
    auto& mm = e.nodes[i];
    if (!is_op(mm, "MatMul") || mm.inputs.size() != 2) continue;
    const type_info* at = e.type_of(mm.inputs[0]);
    const tensor* b = e.constant(mm.inputs[1]);
    if (at == nullptr || !at->is_tensor() || at->elem != element_type::float32 || !at->dims || at->dims->rank() < 2 ||
        b == nullptr || b->rank() != 2 || b->type() != element_type::float32)
      continue;
    const std::int64_t K = b->sizes()[0], N = b->sizes()[1];
    const std::size_t rank = at->dims->rank();
    // Rank above 2: the leading sizes, -1 for the one that is not known (its symbol in `free`), and K last.
    std::vector<std::int64_t> a_dims;
    std::string free;
    int unknown = 0;
    if (rank > 2) {
      for (std::size_t d = 0; d < rank; ++d) {
        const auto& x = (*at->dims)[d];
        if (x.is_known() && x.value > 0) {
          a_dims.push_back(x.value);
        } else if (!x.is_known() && d + 1 < rank) {
          ++unknown;
          if (x.is_symbolic()) free = x.param;
          a_dims.push_back(-1);
        } else {
          break;
        }
      }
      if (a_dims.size() != rank || a_dims.back() != K || unknown > 1) continue;
    }
    const auto ai = e.sole_consumer(mm.outputs[0]);
    if (!ai || !is_op(e.nodes[*ai], "Add")) continue;
    const auto bias = other_input(e.nodes[*ai], mm.outputs[0]);
    const tensor* bt = bias ? e.constant(*bias) : nullptr;
    if (bt == nullptr || bt->type() != element_type::float32 || bt->rank() != 1 || bt->sizes()[0] != N) continue;
    const std::string name = mm.n.name, add_name = e.nodes[*ai].n.name, y = e.nodes[*ai].outputs[0];
    enode g;
    g.n.name = name;
    g.n.op_type = "Gemm";
    g.n.since_version = 13;
    g.inputs = {mm.inputs[0], mm.inputs[1], *bias};
    g.outputs = {y};
    if (rank == 2) {
      rep.fusions.push_back(cat("Gemm: ", name, " + ", add_name));
      mm.dead = true;
      e.nodes[*ai] = std::move(g);
      e.index();
      continue;
    }
    // M: the leading sizes' product; with one of them symbolic, a symbol of its own ("batch*128": equal products
    // have equal symbols); with one of them unknown, unknown.
    std::int64_t M = 1;
    for (std::size_t d = 0; d + 1 < rank; ++d) M *= a_dims[d];
    const bool symbolic = unknown == 1 && !free.empty();
    const dimension m_dim = unknown == 0 ? dimension(M)
                            : !symbolic  ? dimension()
                            : -M == 1    ? dimension(free)
                                         : dimension(cat(free, "*", std::to_string(-M)));
    const auto reshape = [&](const std::string& in, const std::string& shape_name, std::vector<std::int64_t> to,
                             const std::string& out, const std::string& node_name) {
      const std::string sn = e.fresh(shape_name);
      const auto n = static_cast<std::int64_t>(to.size());
      e.add_init(sn, tensor::from<std::int64_t>(std::span<const std::int64_t>(&n, 1), to));
      enode r;
      r.n.name = node_name;
      r.n.op_type = "Reshape";
      r.n.since_version = onnx_opset >= 14 ? 14 : onnx_opset >= 13 ? 13 : 5;
      r.inputs = {in, sn};
      r.outputs = {out};
      return r;
    };
    const std::string a2 = e.fresh(name + "/A_2d"), y2 = e.fresh(name + "/Y_2d");
    e.types[a2] = type_info::tensor_of(element_type::float32, shape{m_dim, K});
    e.types[y2] = type_info::tensor_of(element_type::float32, shape{m_dim, N});
    std::vector<std::int64_t> y_dims = a_dims;
    y_dims.back() = N;
    enode r_in = reshape(mm.inputs[0], name + "/A_2d_shape", {unknown == 0 ? M : -1, K}, a2, name + "/reshape_A");
    enode r_out = reshape(y2, name + "/Y_shape", y_dims, y, name + "/reshape_Y");
    g.inputs[0] = a2;
    g.outputs = {y2};
    std::string a_text;
    for (std::size_t d = 0; d < rank; ++d)
      a_text += (d == 0 ? "" : ", ") + (a_dims[d] >= 0 ? std::to_string(a_dims[d]) : symbolic ? free : std::string("?"));
    rep.fusions.push_back(cat("Gemm: ", name, " + ", add_name, " (A [", a_text, "] as [",
                              unknown == 0 ? std::to_string(M) : symbolic ? m_dim.param : std::string("?"), ", ",
                              std::to_string(K), "])"));
    // In place of the MatMul, the Add and after it: the nodes stay in topological order.
    const std::size_t at_add = *ai;
    e.nodes[i] = std::move(r_in);
    e.nodes[at_add] = std::move(g);
    e.nodes.insert(e.nodes.begin() + static_cast<std::ptrdiff_t>(at_add) + 1, std::move(r_out));
    e.index();
  }
}

void fuse_transpose_gemm(egraph& e, optimization_report& rep) {
  // Gemm reads an operand transposed in place (transA/transB): a 2-D Transpose feeding only a Gemm is folded into the
  // flag (ONNX Runtime's MatMul/Gemm transpose fusion), saving the copy.
  for (std::size_t i = 0; i < e.nodes.size(); ++i) {
    if (e.nodes[i].dead || !is_op(e.nodes[i], "Gemm") || e.nodes[i].n.since_version < 11 || e.nodes[i].inputs.size() < 2) continue;
    for (std::size_t k = 0; k < 2; ++k) {
      auto& gm = e.nodes[i];
      const auto pi = e.producer_index(gm.inputs[k]);
      if (!pi || !e.sole_consumer(gm.inputs[k])) continue;
      const auto& tr = e.nodes[*pi];
      if (tr.dead || !is_op(tr, "Transpose") || tr.inputs.size() != 1) continue;
      const type_info* t = e.type_of(tr.inputs[0]);
      if (t == nullptr || !t->is_tensor() || t->elem != element_type::float32 || !t->dims || t->dims->rank() != 2) continue;
      if (const auto* perm = tr.n.attributes.find("perm")) {
        const auto* p = std::get_if<std::vector<std::int64_t>>(&perm->value);
        if (p == nullptr || *p != std::vector<std::int64_t>{1, 0}) continue;
      }
      const char* flag = k == 0 ? "transA" : "transB";
      gm.n.attributes.set(flag, std::int64_t{attr_i(gm.n, flag, 0) == 0 ? 1 : 0});
      gm.inputs[k] = tr.inputs[0];
      rep.fusions.push_back(cat("GemmTranspose: ", tr.n.name, " into ", gm.n.name, " (", flag, ")"));
      e.nodes[*pi].dead = true;
      e.index();
    }
  }
}

// Einsum over two operands that is one matrix product per batch ("nd,kd->nk", "bhid,bhjd->bhij", "bij,bjk->bki"...)
//   ==>  com.microsoft FusedMatMul with transA/transB: both operands and the output have the same rank, the same batch
// labels first in the same order, and of the last two labels each operand has one that the other shares (the sum)
// and one of the output's. It then runs as a product on every provider (oneDNN takes it into its partitions); the
// Einsum kernel does the same arithmetic, the sum over the shared label.
void rewrite_einsum_matmul(egraph& e, optimization_report& rep) {
  for (auto& en : e.nodes) {
    if (!is_op(en, "Einsum") || en.inputs.size() != 2 || en.outputs.size() != 1) continue;
    const type_info* ta = e.type_of(en.inputs[0]);
    const type_info* tb = e.type_of(en.inputs[1]);
    if (ta == nullptr || tb == nullptr || !ta->is_tensor() || !tb->is_tensor() || ta->elem != element_type::float32 ||
        tb->elem != element_type::float32)
      continue;
    std::string eq;
    for (const char c : attr_s(en.n, "equation")) if (c != ' ') eq += c;
    const auto arrow = eq.find("->");
    const auto comma = eq.find(',');
    if (arrow == std::string::npos || comma == std::string::npos || comma > arrow) continue;
    const std::string a = eq.substr(0, comma), b = eq.substr(comma + 1, arrow - comma - 1), o = eq.substr(arrow + 2);
    const auto letters = [](const std::string& t) {
      for (std::size_t i = 0; i < t.size(); ++i)
        if (!std::isalpha(static_cast<unsigned char>(t[i])) || t.find(t[i], i + 1) != std::string::npos) return false;
      return true;
    };
    const std::size_t r = a.size();
    if (r < 2 || b.size() != r || o.size() != r || !letters(a) || !letters(b) || !letters(o)) continue;
    if ((ta->dims && ta->dims->rank() != r) || (tb->dims && tb->dims->rank() != r)) continue;
    const std::string batch = a.substr(0, r - 2);
    if (b.substr(0, r - 2) != batch || o.substr(0, r - 2) != batch) continue;
    const std::string a2 = a.substr(r - 2), b2 = b.substr(r - 2), o2 = o.substr(r - 2);
    // j: the one label of a2 in b2; i, k: the others.
    char j = 0;
    for (const char c : a2)
      if (b2.find(c) != std::string::npos) j = j == 0 ? c : '!';
    if (j == 0 || j == '!' || o2.find(j) != std::string::npos || batch.find(j) != std::string::npos) continue;
    const char i = a2[0] == j ? a2[1] : a2[0], k = b2[0] == j ? b2[1] : b2[0];
    if (i == k || batch.find(i) != std::string::npos || batch.find(k) != std::string::npos) continue;
    bool trans_a = a2[0] == j, trans_b = b2[1] == j;
    std::vector<std::string> ins = en.inputs;
    if (o2 == std::string{k, i}) {  // the product transposed: (A B)^T = B^T A^T
      std::swap(ins[0], ins[1]);
      std::swap(trans_a, trans_b);
      trans_a = !trans_a;
      trans_b = !trans_b;
    } else if (o2 != std::string{i, k}) {
      continue;
    }
    enode f = contrib_node(en.n.name, "FusedMatMul");
    f.n.attributes.set("transA", std::int64_t{trans_a ? 1 : 0});
    f.n.attributes.set("transB", std::int64_t{trans_b ? 1 : 0});
    f.n.attributes.set("alpha", 1.0f);
    f.inputs = std::move(ins);
    f.outputs = en.outputs;
    f.origin = en.origin;
    rep.fusions.push_back(cat("FusedMatMul: ", en.n.name, " (Einsum '", eq, "')"));
    en = std::move(f);
  }
  e.index();
}


namespace {
// The scale of a Mul (by either operand) or a Div (by its divisor) by a one-element float constant whose rank is at
// most the other operand's (0 when that is unknown: no broadcast can add a dimension): the factor (1 / divisor for
// Div) and the index of the scaled operand. `leading` (a scale feeding the product): the scaled operand's rank must be
// known and not 0. A factor that is 0 or not finite is refused (a product scaled by it is not the scaled product when
// a sum of finite terms overflows or cancels).
std::optional<std::pair<float, std::size_t>> scale_of(const egraph& e, const enode& s, bool leading) {
  const bool mul = is_op(s, "Mul"), div = is_op(s, "Div");
  if ((!mul && !div) || s.n.since_version < 7 || s.inputs.size() != 2 || s.outputs.size() != 1) return std::nullopt;
  constexpr std::size_t order[2] = {1, 0};  // Mul(x, c) as exporters write it, then Mul(c, x)
  for (std::size_t o = 0; o < (div ? 1u : 2u); ++o) {
    const std::size_t k = order[o];
    const tensor* c = e.constant(s.inputs[k]);
    if (c == nullptr || c->type() != element_type::float32 || c->element_count() != 1) continue;
    const type_info* other = e.type_of(s.inputs[1 - k]);
    if (other == nullptr || !other->is_tensor() || other->elem != element_type::float32) continue;
    const std::size_t rank = other->dims ? other->dims->rank() : 0;
    if ((leading && rank == 0) || c->rank() > rank) continue;
    const float v = *c->typed<float>();
    const float f = div ? 1.0f / v : v;
    if (f == 0.0f || !std::isfinite(f)) continue;
    return std::pair{f, 1 - k};
  }
  return std::nullopt;
}
}  // namespace

// MatMul (or FusedMatMul) of float tensors with constant scalar scales around it  ==>  com.microsoft FusedMatMul with
// alpha their product, ONNX Runtime's MatMulScaleFusion: Mul(t, A) or Div(A, 1/t) feeding an operand (the Mul stays
// when something else reads it), Mul(v, Y) or Div(Y, 1/v) the only reader of the product. The scale is applied as the
// product is stored, not by a pass of its own over Y: BERT's attention scores divided by sqrt(64), 12 Divs of
// 12 x 128 x 128 floats a run. alpha = t * u * v rounds differently from the scales applied one after another (by
// a power of two, as in BERT, not at all).
void fuse_matmul_scale(egraph& e, optimization_report& rep) {
  for (std::size_t i = 0; i < e.nodes.size(); ++i) {
    auto& mm = e.nodes[i];
    const bool fused = !mm.dead && mm.n.domain == contrib_domain && mm.n.op_type == "FusedMatMul";
    if ((!is_op(mm, "MatMul") && !fused) || mm.inputs.size() != 2 || mm.outputs.size() != 1 || !is_float_tensor(e, mm.inputs[0]) ||
        !is_float_tensor(e, mm.inputs[1]))
      continue;
    float alpha = fused ? attr_f(mm.n, "alpha", 1.0f) : 1.0f;
    std::vector<std::string> inputs = mm.inputs;
    std::string merged;
    for (std::size_t k = 0; k < 2; ++k) {
      const auto pi = e.producer_index(mm.inputs[k]);
      if (!pi) continue;
      const auto sc = scale_of(e, e.nodes[*pi], true);
      if (!sc) continue;
      alpha *= sc->first;
      inputs[k] = e.nodes[*pi].inputs[sc->second];
      merged += cat(" + ", e.nodes[*pi].n.name);
    }
    std::optional<std::size_t> after;
    if (const auto si = e.sole_consumer(mm.outputs[0])) {
      if (const auto sc = scale_of(e, e.nodes[*si], false); sc && e.nodes[*si].inputs[sc->second] == mm.outputs[0]) {
        alpha *= sc->first;
        after = *si;
        merged += cat(" + ", e.nodes[*si].n.name);
      }
    }
    if (merged.empty() || alpha == 0.0f || !std::isfinite(alpha)) continue;
    enode f = contrib_node(mm.n.name, "FusedMatMul");
    if (fused) f.n.attributes = mm.n.attributes;
    f.n.attributes.set("alpha", alpha);
    f.inputs = std::move(inputs);
    f.outputs = after ? e.nodes[*after].outputs : mm.outputs;
    f.origin = mm.origin;
    char a[32];
    std::snprintf(a, sizeof a, "%.9g", static_cast<double>(alpha));
    rep.fusions.push_back(cat("MatMulScale: ", mm.n.name, merged, " (alpha ", a, ")"));
    // In place of the scale after the product (after every input of it), else of the product.
    if (after) {
      mm.dead = true;
      e.nodes[*after] = std::move(f);
    } else {
      mm = std::move(f);
    }
    e.index();
  }
}

// Reshape whose shape a Concat computes from the data's own Shape  ==>  Reshape by a constant shape, ONNX Runtime's
// ReshapeFusion: each part of the Concat a constant (copied), or Gather(Shape(X), i) (through an Unsqueeze of axis
// 0 or -1 when i is a scalar) with X the Reshape's data and i the position that part fills, which is 0 (copy the input's
// dim; not under allowzero 1), or a dim shape inference knows there. An exporter's dynamic batch and sequence write
// such a computation for every Reshape of an attention layer (BERT-base: 48 Reshapes, 240 Shape, Gather, Unsqueeze
// and Concat nodes a run, each a step of the executor); the nodes left unused go with dead-node elimination.
void fuse_reshape_shape(egraph& e, optimization_report& rep) {
  const auto int64_values = [&](const std::string& v) -> std::optional<std::vector<std::int64_t>> {
    const tensor* t = e.constant(v);
    if (t == nullptr || t->type() != element_type::int64 || t->rank() > 1) return std::nullopt;
    return std::vector<std::int64_t>(t->typed<std::int64_t>(), t->typed<std::int64_t>() + t->element_count());
  };
  for (std::size_t i = 0; i < e.nodes.size(); ++i) {
    enode& rs = e.nodes[i];
    if (!is_op(rs, "Reshape") || rs.inputs.size() != 2 || rs.outputs.size() != 1 || rs.inputs[1].empty() ||
        e.constant(rs.inputs[1]) != nullptr || attr_i(rs.n, "allowzero", 0) != 0)
      continue;
    const enode* cc = e.producer_of(rs.inputs[1]);
    if (cc == nullptr || !is_op(*cc, "Concat") || cc->outputs.size() != 1) continue;
    const std::int64_t axis = attr_i(cc->n, "axis", 0);
    if (axis != 0 && axis != -1) continue;
    const type_info* xt = e.type_of(rs.inputs[0]);
    const std::string& data = rs.inputs[0];
    std::vector<std::int64_t> shape;
    bool ok = true;
    for (const std::string& part : cc->inputs) {
      if (part.empty()) {
        ok = false;
        break;
      }
      if (const auto c = int64_values(part)) {
        if (e.constant(part)->rank() != 1) {
          ok = false;
          break;
        }
        shape.insert(shape.end(), c->begin(), c->end());
        continue;
      }
      // Gather(Shape(X), i): scalar i under an Unsqueeze of axis 0, or i of one element.
      const enode* g = e.producer_of(part);
      bool scalar = false;
      if (g != nullptr && is_op(*g, "Unsqueeze") && !g->inputs.empty()) {
        std::vector<std::int64_t> axes = attr_ints(g->n, "axes");
        if (g->inputs.size() >= 2) axes = int64_values(g->inputs[1]).value_or(std::vector<std::int64_t>{});
        if (axes.size() != 1 || (axes[0] != 0 && axes[0] != -1)) {
          ok = false;
          break;
        }
        g = e.producer_of(g->inputs[0]);
        scalar = true;
      }
      if (g == nullptr || !is_op(*g, "Gather") || g->inputs.size() != 2 || attr_i(g->n, "axis", 0) != 0) {
        ok = false;
        break;
      }
      const tensor* idx = e.constant(g->inputs[1]);
      if (idx == nullptr || idx->type() != element_type::int64 || idx->element_count() != 1 || idx->rank() != (scalar ? 0u : 1u)) {
        ok = false;
        break;
      }
      const enode* sh = e.producer_of(g->inputs[0]);
      if (sh == nullptr || !is_op(*sh, "Shape") || sh->inputs.size() != 1 || sh->n.attributes.find("start") != nullptr ||
          sh->n.attributes.find("end") != nullptr) {
        ok = false;
        break;
      }
      const type_info* st = e.type_of(sh->inputs[0]);
      if (st == nullptr || !st->is_tensor() || !st->dims) {
        ok = false;
        break;
      }
      const auto rank = static_cast<std::int64_t>(st->dims->rank());
      std::int64_t d = *idx->typed<std::int64_t>();
      if (d < 0) d += rank;
      if (d < 0 || d >= rank) {
        ok = false;
        break;
      }
      const auto pos = static_cast<std::int64_t>(shape.size());
      if (sh->inputs[0] == data && d == pos) shape.push_back(0);  // the data's own dim, at its own place
      else if ((*st->dims)[static_cast<std::size_t>(d)].is_known()) shape.push_back((*st->dims)[static_cast<std::size_t>(d)].value);
      else {
        ok = false;
        break;
      }
    }
    // A data of known rank must have the dims a 0 copies (Reshape's own check, kept for the new shape).
    if (!ok || std::count(shape.begin(), shape.end(), -1) > 1 ||
        (xt != nullptr && xt->is_tensor() && xt->dims && static_cast<std::size_t>(std::count(shape.begin(), shape.end(), 0)) > xt->dims->rank()))
      continue;
    const std::string name = e.fresh(rs.outputs[0] + "_shape");
    const auto n = static_cast<std::int64_t>(shape.size());
    tensor t = tensor::from<std::int64_t>(std::span<const std::int64_t>(&n, 1), std::span<const std::int64_t>(shape));
    t.set_name(name);
    e.add_init(name, std::move(t));
    std::string dims;
    for (const std::int64_t v : shape) dims += cat(dims.empty() ? "" : ", ", std::to_string(v));
    rep.fusions.push_back(cat("ReshapeShape: ", rs.n.name, " ([", dims, "])"));
    rs.inputs[1] = name;
    e.index();
  }
}

}  // namespace epstack::opt
