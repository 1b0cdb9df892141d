// onnx 1.12's shape inference functions trust their inputs: a Conv stride of 0 divides by zero, a ConvTranspose input
// of rank 2 reads through a null pointer. Everything in a model is untrusted, so before such a function runs, a guard
// checks the node's attributes and the input ranks known at that point and fails inference (onnx::InferenceError,
// which the loader reports as invalid_graph) instead of crashing. The guards were found by the libFuzzer target
// (test/fuzz/fuzz_load_model): add one when it finds another crash inside onnx.
#include "inference_guards.hpp"
#include "onnx_convert.hpp"
#include "schema/modern_inference.hpp"

#include <onnx/defs/shape_inference.h>
#include <onnx/defs/tensor_proto_util.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace epstack::detail {
namespace {

// A guard fails inference on what the model gets wrong, and returns false to skip the inner function where the model
// is valid but onnx 1.12 cannot infer it safely (its outputs keep their declared types).
using guard_fn = bool (*)(onnx::InferenceContext&);

int known_rank(const onnx::InferenceContext& ctx, std::size_t input) {
  if (input >= ctx.getNumInputs()) return -1;
  const auto* t = ctx.getInputType(input);
  if (t == nullptr || !t->has_tensor_type() || !t->tensor_type().has_shape()) return -1;
  return t->tensor_type().shape().dim_size();
}

void check_ints(const onnx::InferenceContext& ctx, const char* name, std::int64_t min, int expected_size) {
  const auto* a = ctx.getAttribute(name);
  if (a == nullptr) return;
  for (auto v : a->ints())
    if (v < min) fail_shape_inference("attribute '", name, "' holds ", v, ", below the minimum ", min);
  if (expected_size >= 0 && a->ints_size() != expected_size)
    fail_shape_inference("attribute '", name, "' has ", a->ints_size(), " values, expected ", expected_size);
}

void check_int(const onnx::InferenceContext& ctx, const char* name, std::int64_t min) {
  const auto* a = ctx.getAttribute(name);
  if (a != nullptr && a->i() < min) fail_shape_inference("attribute '", name, "' is ", a->i(), ", below the minimum ", min);
}

// Conv-like and pool-like ops: data input `x` of rank >= 3 (N, C, spatial...), weights `w` (or -1) of the same rank,
// and spatial attributes that fit.
template <int X, int W>
bool conv_pool_guard(onnx::InferenceContext& ctx) {
  const int r = known_rank(ctx, X);
  if (r >= 0 && r < 3) fail_shape_inference("input ", X, " has rank ", r, "; at least 3 (N, C, spatial...) is needed");
  if constexpr (W >= 0) {
    const int rw = known_rank(ctx, W);
    if (r >= 0 && rw >= 0 && rw != r) fail_shape_inference("weights have rank ", rw, ", the input rank ", r);
    if (r < 0 && rw >= 0 && rw < 3) fail_shape_inference("weights have rank ", rw, "; at least 3 is needed");
  }
  const int spatial = r >= 3 ? r - 2 : -1;
  check_ints(ctx, "strides", 1, spatial);
  check_ints(ctx, "dilations", 1, spatial);
  check_ints(ctx, "kernel_shape", 1, spatial);
  check_ints(ctx, "pads", 0, spatial >= 0 ? 2 * spatial : -1);
  check_ints(ctx, "output_padding", 0, spatial);
  check_ints(ctx, "output_shape", 0, -1);
  check_int(ctx, "group", 1);
  return true;
}

// MaxUnpool reads the indices input's shape beside X's (its N and C), unchecked: I must have a shape of X's rank.
bool max_unpool_guard(onnx::InferenceContext& ctx) {
  if (!conv_pool_guard<0, -1>(ctx)) return false;
  const int r = known_rank(ctx, 0), ri = known_rank(ctx, 1);
  if (ctx.getNumInputs() > 1 && ctx.getInputType(1) != nullptr && !ctx.getInputType(1)->has_tensor_type())
    fail_shape_inference("input 1 (indices) is not a tensor");
  if (r >= 0 && ri < 0) return false;  // valid, but onnx 1.12 would read I's missing dims
  if (r >= 0 && ri >= 0 && r != ri) fail_shape_inference("indices have rank ", ri, ", the input rank ", r);
  return true;
}

void check_int_max(const onnx::InferenceContext& ctx, const char* name, std::int64_t max) {
  const auto* a = ctx.getAttribute(name);
  if (a != nullptr && a->i() > max) fail_shape_inference("attribute '", name, "' is ", a->i(), ", above the maximum ", max);
}

// Input `i`, when its rank is known, must have rank `exact` (or, with exact < 0, at least `min`).
void check_rank(const onnx::InferenceContext& ctx, std::size_t i, int exact, int min = 0) {
  const int r = known_rank(ctx, i);
  if (r < 0) return;
  if (exact >= 0 && r != exact) fail_shape_inference("input ", i, " has rank ", r, "; rank ", exact, " is needed");
  if (exact < 0 && r < min) fail_shape_inference("input ", i, " has rank ", r, "; at least ", min, " is needed");
}

// RNN, GRU, LSTM (every version): X, W, R [3-D], B [2-D], sequence_lens [1-D], initial_h, initial_c [3-D], P [2-D].
bool recurrent_guard(onnx::InferenceContext& ctx) {
  static constexpr int ranks[] = {3, 3, 3, 2, 1, 3, 3, 2};
  for (std::size_t i = 0; i < std::size(ranks) && i < ctx.getNumInputs(); ++i) check_rank(ctx, i, ranks[i]);
  check_int(ctx, "hidden_size", 1);
  return true;
}

// Gemm (every version): A and B are matrices, C broadcasts to [M, N].
bool gemm_guard(onnx::InferenceContext& ctx) {
  check_rank(ctx, 0, 2);
  check_rank(ctx, 1, 2);
  const int rc = known_rank(ctx, 2);
  if (rc > 2) fail_shape_inference("input 2 (C) has rank ", rc, "; at most 2 is allowed");
  return true;
}

// STFT: signal [batch, length, 1 or 2], frame_step scalar, window [frame_length], frame_length scalar.
bool stft_guard(onnx::InferenceContext& ctx) {
  check_rank(ctx, 0, 3);
  check_rank(ctx, 1, 0);
  check_rank(ctx, 2, 1);
  check_rank(ctx, 3, 0);
  return true;
}

// GatherND: 0 <= batch_dims < min(rank(data), rank(indices)).
bool gather_nd_guard(onnx::InferenceContext& ctx) {
  check_rank(ctx, 0, -1, 1);
  check_rank(ctx, 1, -1, 1);
  const auto* a = ctx.getAttribute("batch_dims");
  const std::int64_t b = a != nullptr ? a->i() : 0;
  const int r = std::min(known_rank(ctx, 0), known_rank(ctx, 1));
  if (b < 0 || (r >= 0 && b >= r)) fail_shape_inference("attribute 'batch_dims' is ", b, "; it must be in [0, ", r, ")");
  return true;
}

bool block_guard(onnx::InferenceContext& ctx) {
  check_int(ctx, "blocksize", 1);
  check_int_max(ctx, "blocksize", std::int64_t{1} << 20);  // blocksize squared must not overflow
  const int r = known_rank(ctx, 0);
  if (r >= 0 && r != 4) fail_shape_inference("input has rank ", r, ", 4 is needed");
  return true;
}

// After onnx 1.12's own inference: what it leaves out and can be told. Slice (opset 10+) with starts or ends that are
// not constants (BERT's position ids sliced to the sequence length, from Shape) gets no shape at all, so everything
// downstream has none either (the embeddings, every layer): its rank is the data's, and the axes it does not slice
// keep their sizes (the sliced ones are left unknown).
void slice_rank(onnx::InferenceContext& ctx) {
  if (ctx.getNumOutputs() < 1 || ctx.getNumInputs() < 3) return;
  auto* out = ctx.getOutputType(0);
  const auto* in = ctx.getInputType(0);
  if (out == nullptr || in == nullptr || !in->has_tensor_type() || !in->tensor_type().has_shape()) return;
  if (out->has_tensor_type() && out->tensor_type().has_shape()) return;
  const auto& dims = in->tensor_type().shape();
  const int rank = dims.dim_size();
  // The axes sliced: the constant `axes` input, else (no axes input) the first len(starts), else all of them.
  std::vector<bool> sliced(static_cast<std::size_t>(rank), true);
  const onnx::TensorProto* axes = ctx.getNumInputs() > 3 ? ctx.getInputData(3) : nullptr;
  const auto* starts = ctx.getInputType(1);
  // (Axes held in external data are not read here: every axis is taken as sliced.)
  if (axes != nullptr && axes->data_location() != onnx::TensorProto::EXTERNAL &&
      (axes->data_type() == onnx::TensorProto::INT64 || axes->data_type() == onnx::TensorProto::INT32)) {
    std::vector<std::int64_t> values;
    if (axes->data_type() == onnx::TensorProto::INT64) values = onnx::ParseData<std::int64_t>(axes);
    else
      for (std::int32_t a : onnx::ParseData<std::int32_t>(axes)) values.push_back(a);
    std::fill(sliced.begin(), sliced.end(), false);
    for (std::int64_t a : values) {
      if (a < -rank || a >= rank) return;  // invalid: left to the kernel's check
      sliced[static_cast<std::size_t>(a < 0 ? a + rank : a)] = true;
    }
  } else if (ctx.getNumInputs() <= 3 && starts != nullptr && starts->has_tensor_type() &&
             starts->tensor_type().has_shape() && starts->tensor_type().shape().dim_size() == 1 &&
             starts->tensor_type().shape().dim(0).has_dim_value()) {
    const auto n = starts->tensor_type().shape().dim(0).dim_value();
    if (n < 0 || n > rank) return;
    for (int d = static_cast<int>(n); d < rank; ++d) sliced[static_cast<std::size_t>(d)] = false;
  }
  auto* t = out->mutable_tensor_type();
  if (t->elem_type() == 0) t->set_elem_type(in->tensor_type().elem_type());
  auto* shape = t->mutable_shape();
  for (int d = 0; d < rank; ++d) {
    auto* dim = shape->add_dim();
    if (!sliced[static_cast<std::size_t>(d)]) *dim = dims.dim(d);
  }
}

// Reshape (opset 5+) takes its target from an initializer only in onnx 1.12: a target computed from Shape (BERT's
// heads: Concat of the batch, the sequence, 12 and 64) leaves the output without a shape. Data propagation knows the
// target's values where they come from shapes: positive ones are sizes, 0 copies the input's size at that place
// (without allowzero), symbols stay symbols, -1 and anything not known stays unknown; with no propagated value, the
// target's length still gives the rank.
void reshape_rank(onnx::InferenceContext& ctx) {
  if (ctx.getNumOutputs() < 1 || ctx.getNumInputs() < 2) return;
  auto* out = ctx.getOutputType(0);
  const auto* in = ctx.getInputType(0);
  const auto* target = ctx.getInputType(1);
  if (out == nullptr || in == nullptr || !in->has_tensor_type()) return;
  if (out->has_tensor_type() && out->tensor_type().has_shape()) return;
  const onnx::TensorShapeProto* values = ctx.getSymbolicInput(1);
  std::int64_t rank = -1;
  if (values != nullptr) rank = values->dim_size();
  else if (target != nullptr && target->has_tensor_type() && target->tensor_type().has_shape() &&
           target->tensor_type().shape().dim_size() == 1 && target->tensor_type().shape().dim(0).has_dim_value())
    rank = target->tensor_type().shape().dim(0).dim_value();
  if (rank < 0 || rank > 64) return;
  const auto* allowzero = ctx.getAttribute("allowzero");
  const bool copy_zero = allowzero == nullptr || allowzero->i() == 0;
  const bool in_shape = in->tensor_type().has_shape();
  auto* t = out->mutable_tensor_type();
  if (t->elem_type() == 0) t->set_elem_type(in->tensor_type().elem_type());
  auto* shape = t->mutable_shape();
  for (int d = 0; d < static_cast<int>(rank); ++d) {
    auto* dim = shape->add_dim();
    if (values == nullptr) continue;
    const auto& v = values->dim(d);
    if (v.has_dim_value() && v.dim_value() > 0) dim->set_dim_value(v.dim_value());
    else if (v.has_dim_value() && v.dim_value() == 0 && copy_zero && in_shape && d < in->tensor_type().shape().dim_size())
      *dim = in->tensor_type().shape().dim(d);
    else if (v.has_dim_param()) dim->set_dim_param(v.dim_param());
  }
}

using post_fn = void (*)(onnx::InferenceContext&);
post_fn post_inference(std::string_view op) {
  return op == "Slice" ? slice_rank : op == "Reshape" ? reshape_rank : nullptr;
}

const std::unordered_map<std::string_view, guard_fn>& guards() {
  static const std::unordered_map<std::string_view, guard_fn> table = {
      {"Conv", conv_pool_guard<0, 1>},        {"ConvTranspose", conv_pool_guard<0, 1>},
      {"ConvInteger", conv_pool_guard<0, 1>}, {"QLinearConv", conv_pool_guard<0, 3>},
      {"DeformConv", conv_pool_guard<0, 1>},  {"MaxPool", conv_pool_guard<0, -1>},
      {"AveragePool", conv_pool_guard<0, -1>}, {"LpPool", conv_pool_guard<0, -1>},
      {"MaxUnpool", max_unpool_guard},        {"DepthToSpace", block_guard},
      {"SpaceToDepth", block_guard},          {"RNN", recurrent_guard},
      {"GRU", recurrent_guard},               {"LSTM", recurrent_guard},
      {"Gemm", gemm_guard},                   {"STFT", stft_guard},
      {"GatherND", gather_nd_guard},
  };
  return table;
}

// Data propagation (the values of small shape tensors, through Shape, Gather, Concat, Add...) trusts its inputs too:
// Shape's reads the type of its input when that input's inference failed and left it without one, and Add, Sub, Mul
// and Div index the first value of an input of zero values when the other has one. Such nodes can be valid (a shape
// sliced to nothing broadcasts to nothing); propagation only sharpens inference, so the guard skips it for them
// instead of failing the model.
onnx::DataPropagationFunction propagation_guard(onnx::DataPropagationFunction inner, bool broadcasting) {
  return [inner = std::move(inner), broadcasting](onnx::DataPropagationContext& ctx) {
    if (ctx.getNumInputs() == 0 || ctx.getInputType(0) == nullptr) return;
    if (broadcasting) {
      const auto* a = ctx.getInputData(0);
      const auto* b = ctx.getNumInputs() > 1 ? ctx.getInputData(1) : nullptr;
      if (a != nullptr && b != nullptr && (a->dim_size() == 0 || b->dim_size() == 0) && a->dim_size() != b->dim_size()) return;
    }
    inner(ctx);
  };
}

bool broadcasting_propagation(std::string_view op) { return op == "Add" || op == "Sub" || op == "Mul" || op == "Div"; }

// An input of a kind its operator does not take, a sparse tensor where the schema declares tensors: onnx 1.12's
// inference functions read every input as a tensor (ConvTranspose's weights through a null pointer), so inference
// fails first. (Type checking, which would refuse it, runs after the inference function.)
void check_input_kinds(const onnx::OpSchema& s, const onnx::InferenceContext& ctx) {
  const auto& formals = s.inputs();
  if (formals.empty()) return;
  for (std::size_t i = 0; i < ctx.getNumInputs(); ++i) {
    const auto* t = ctx.getInputType(i);
    if (t == nullptr || !t->has_sparse_tensor_type()) continue;
    const auto& formal = formals[std::min(i, formals.size() - 1)];  // a variadic input's formal is the last
    bool sparse = false;
    for (const auto* type : formal.GetTypes()) sparse = sparse || (type != nullptr && type->rfind("sparse_tensor", 0) == 0);
    if (!sparse) fail_shape_inference("input ", i, " is a sparse tensor; ", s.Name(), " takes tensors there");
  }
}

}  // namespace

void check_input_data(onnx::InferenceContext& ctx, std::size_t input) {
  const onnx::TensorProto* t = input < ctx.getNumInputs() ? ctx.getInputData(input) : nullptr;
  if (t == nullptr) return;
  if (auto st = check_tensor_header(*t, "input " + std::to_string(input)); !st) fail_shape_inference(st.message());
}

const onnx::OpSchema* guarded_schema_registry::GetSchema(const std::string& key, int max_inclusive_version,
                                                         const std::string& domain) const {
  // Versions beyond onnx 1.12 (ai.onnx 18-27, ai.onnx.ml 4-5) carry the inference of modern_inference.cpp.
  if (const auto* mine = schema::find_schema(domain, key, max_inclusive_version); mine != nullptr && (beyond_onnx112(*mine) || replaced_onnx112(*mine)))
    return modern_schema(*mine, [](const std::string& k, int v, const std::string& d) { return older(k, v, d); });
  return older(key, max_inclusive_version, domain);
}

const onnx::OpSchema* guarded_schema_registry::older(const std::string& key, int max_inclusive_version,
                                                     const std::string& domain) {
  const onnx::OpSchema* s = onnx::OpSchemaRegistry::Instance()->GetSchema(key, max_inclusive_version, domain);
  if (s == nullptr || !(domain.empty() || domain == "ai.onnx")) return s;
  const auto g = guards().find(key);
  const bool propagation = s->has_data_propagation_function();
  const bool inference = s->has_type_and_shape_inference_function();
  if (!inference && !propagation) return s;
  // One wrapped copy per onnx schema for the whole process (what it wraps is onnx's static registry): copying an
  // OpSchema is most of what inference cost a small model's load when each registry made its own.
  static std::mutex mu;
  static std::map<const onnx::OpSchema*, std::unique_ptr<onnx::OpSchema>> wrapped;
  std::lock_guard lock(mu);
  auto& slot = wrapped[s];
  if (!slot) {
    slot = std::make_unique<onnx::OpSchema>(*s);
    if (inference)
      slot->TypeAndShapeInferenceFunction([inner = s->GetTypeAndShapeInferenceFunction(), schema = s,
                                           guard = g != guards().end() ? g->second : nullptr,
                                           post = s->SinceVersion() >= (key == "Slice" ? 10 : 5) ? post_inference(key) : nullptr](onnx::InferenceContext& ctx) {
        check_input_kinds(*schema, ctx);
        for (std::size_t i = 0; i < ctx.getNumInputs(); ++i) check_input_data(ctx, i);
        if (guard == nullptr || guard(ctx)) {
          inner(ctx);
          if (post != nullptr) post(ctx);
        }
      });
    if (propagation)
      slot->PartialDataPropagationFunction(propagation_guard(s->GetDataPropagationFunction(), broadcasting_propagation(key)));
  }
  return slot.get();
}

}  // namespace epstack::detail
