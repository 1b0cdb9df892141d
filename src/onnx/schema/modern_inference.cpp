// Type and shape inference for ai.onnx 18-27 and ai.onnx.ml 4-5 (see modern_inference.hpp).
#include "modern_inference.hpp"
#include "../inference_guards.hpp"

#include <onnx/defs/shape_inference.h>
#include <onnx/defs/tensor_proto_util.h>

#include <epstack/core/element_type.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>

namespace epstack::detail {
namespace {

using onnx::InferenceContext;
using onnx::TypeProto;

// ---------------------------------------------------------------------------------------------------------------
// Type strings of the schema table ("tensor(float8e4m3fn)", "seq(tensor(int64))", "map(string,tensor(float))").

std::optional<int> elem_of(std::string_view name) {
  for (int v = 1; v <= max_element_type; ++v)
    if (to_string(static_cast<element_type>(v)) == name) return v;
  return std::nullopt;
}

bool type_from_string(std::string_view s, TypeProto& t) {
  const auto inner = [&](std::string_view prefix) -> std::optional<std::string_view> {
    if (s.size() <= prefix.size() + 2 || s.substr(0, prefix.size()) != prefix || s[prefix.size()] != '(' || s.back() != ')')
      return std::nullopt;
    return s.substr(prefix.size() + 1, s.size() - prefix.size() - 2);
  };
  if (auto x = inner("tensor")) {
    const auto e = elem_of(*x);
    if (!e) return false;
    t.mutable_tensor_type()->set_elem_type(*e);
    return true;
  }
  if (auto x = inner("sparse_tensor")) {
    const auto e = elem_of(*x);
    if (!e) return false;
    t.mutable_sparse_tensor_type()->set_elem_type(*e);
    return true;
  }
  if (auto x = inner("seq")) return type_from_string(*x, *t.mutable_sequence_type()->mutable_elem_type());
  if (auto x = inner("optional")) return type_from_string(*x, *t.mutable_optional_type()->mutable_elem_type());
  if (auto x = inner("map")) {
    const auto comma = x->find(',');
    if (comma == std::string_view::npos) return false;
    const auto k = elem_of(x->substr(0, comma));
    if (!k) return false;
    t.mutable_map_type()->set_key_type(*k);
    return type_from_string(x->substr(comma + 1), *t.mutable_map_type()->mutable_value_type());
  }
  return false;
}

// The type of `t` without its shapes (what a type parameter binds).
TypeProto without_shapes(const TypeProto& t) {
  TypeProto r = t;
  switch (r.value_case()) {
    case TypeProto::kTensorType: r.mutable_tensor_type()->clear_shape(); break;
    case TypeProto::kSparseTensorType: r.mutable_sparse_tensor_type()->clear_shape(); break;
    case TypeProto::kSequenceType: *r.mutable_sequence_type()->mutable_elem_type() = without_shapes(r.sequence_type().elem_type()); break;
    case TypeProto::kOptionalType: *r.mutable_optional_type()->mutable_elem_type() = without_shapes(r.optional_type().elem_type()); break;
    default: break;
  }
  return r;
}

bool has_type(const TypeProto* t) { return t != nullptr && t->value_case() != TypeProto::VALUE_NOT_SET; }

// Output types that the type constraints imply: an output whose type parameter an input also has takes that input's
// type; a parameter (or a fixed type) that allows a single type gives it.
void infer_from_constraints(const schema::op_schema& s, InferenceContext& ctx) {
  for (std::size_t o = 0; o < ctx.getNumOutputs(); ++o) {
    const auto* f = s.output(o);
    if (f == nullptr) continue;
    auto* out = ctx.getOutputType(o);
    if (has_type(out)) continue;
    bool done = false;
    for (std::size_t i = 0; i < ctx.getNumInputs() && !done; ++i) {
      const auto* fi = s.input(i);
      const auto* ti = ctx.getInputType(i);
      if (fi == nullptr || fi->type != f->type || !has_type(ti)) continue;
      *out = without_shapes(*ti);
      done = true;
    }
    if (done) continue;
    const auto* c = s.constraint(f->type);
    const std::string& only = c == nullptr ? f->type : (c->allowed.size() == 1 ? c->allowed[0] : std::string());
    if (!only.empty()) {
      TypeProto t;
      if (type_from_string(only, t)) *out = t;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers for the functions below.

bool input_shape(InferenceContext& ctx, std::size_t i) { return i < ctx.getNumInputs() && onnx::hasInputShape(ctx, i); }

std::optional<std::vector<std::int64_t>> const_ints(InferenceContext& ctx, std::size_t i) {
  if (i >= ctx.getNumInputs()) return std::nullopt;
  const auto* t = ctx.getInputData(i);
  if (t == nullptr) return std::nullopt;
  check_input_data(ctx, i);
  if (t->data_type() == onnx::TensorProto::INT64) return onnx::ParseData<std::int64_t>(t);
  if (t->data_type() == onnx::TensorProto::INT32) {
    const auto v = onnx::ParseData<std::int32_t>(t);
    return std::vector<std::int64_t>(v.begin(), v.end());
  }
  return std::nullopt;
}

std::optional<std::vector<float>> const_floats(InferenceContext& ctx, std::size_t i) {
  if (i >= ctx.getNumInputs()) return std::nullopt;
  const auto* t = ctx.getInputData(i);
  if (t == nullptr || t->data_type() != onnx::TensorProto::FLOAT) return std::nullopt;
  check_input_data(ctx, i);
  return onnx::ParseData<float>(t);
}

// onnx 1.12's context has no hasInput: an absent optional input (empty name) has no type.
bool present(InferenceContext& ctx, std::size_t i) { return i < ctx.getNumInputs() && ctx.getInputType(i) != nullptr; }

std::int64_t int_attr(InferenceContext& ctx, const char* name, std::int64_t def) {
  const auto* a = ctx.getAttribute(name);
  return a != nullptr && a->has_i() ? a->i() : def;
}

void same_as_input(InferenceContext& ctx, std::size_t in, std::size_t out) {
  if (in >= ctx.getNumInputs() || out >= ctx.getNumOutputs() || !has_type(ctx.getInputType(in))) return;
  onnx::propagateElemTypeFromInputToOutput(ctx, in, out);
  if (input_shape(ctx, in)) onnx::propagateShapeFromInputToOutput(ctx, in, out);
}

// An output of the input's shape whose element type comes from an attribute holding a TensorProto.DataType (all of
// ONNX 1.22's, which onnx 1.12's helper would refuse).
void elem_from_attr(InferenceContext& ctx, const char* attr, std::size_t out, int def) {
  const int e = static_cast<int>(int_attr(ctx, attr, def));
  if (e == 0) return;
  if (!is_valid(static_cast<element_type>(e))) fail_type_inference("attribute '", attr, "' holds ", e, ", not an ONNX element type");
  onnx::updateOutputElemType(ctx, out, e);
}

void rank_of(InferenceContext& ctx, std::size_t out, int rank) {
  auto* s = ctx.getOutputType(out)->mutable_tensor_type()->mutable_shape();
  s->clear_dim();
  for (int i = 0; i < rank; ++i) s->add_dim();
}

// ---------------------------------------------------------------------------------------------------------------
// Operators whose inference changed after onnx 1.12, and those added since.

void cast_like(InferenceContext& ctx) {  // CastLike-19+: the type of input 1, the shape of input 0
  if (!has_type(ctx.getInputType(1))) return;
  onnx::propagateElemTypeFromInputToOutput(ctx, 1, 0);
  if (input_shape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
}

void cast(InferenceContext& ctx) {  // Cast-19+: the type of 'to'
  if (ctx.getAttribute("to") == nullptr) fail_type_inference("Cast needs the attribute 'to'");
  elem_from_attr(ctx, "to", 0, 0);
  if (input_shape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
}

void quantize_linear(InferenceContext& ctx) {  // 19+: output_dtype, else the zero point's type, else uint8
  int e = static_cast<int>(int_attr(ctx, "output_dtype", 0));
  if (e == 0 && present(ctx, 2) && has_type(ctx.getInputType(2))) e = ctx.getInputType(2)->tensor_type().elem_type();
  if (e == 0) e = onnx::TensorProto::UINT8;
  if (!is_valid(static_cast<element_type>(e))) fail_type_inference("attribute 'output_dtype' holds ", e, ", not an ONNX element type");
  onnx::updateOutputElemType(ctx, 0, e);
  if (input_shape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
}

void dequantize_linear(InferenceContext& ctx) {  // 21+: output_dtype, else the scale's type
  int e = static_cast<int>(int_attr(ctx, "output_dtype", 0));
  if (e == 0 && has_type(ctx.getInputType(1))) e = ctx.getInputType(1)->tensor_type().elem_type();
  if (e != 0) {
    if (!is_valid(static_cast<element_type>(e))) fail_type_inference("attribute 'output_dtype' holds ", e, ", not an ONNX element type");
    onnx::updateOutputElemType(ctx, 0, e);
  }
  if (input_shape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
}

void split18(InferenceContext& ctx) {  // Split-18: 'split' input or 'num_outputs'
  for (std::size_t o = 0; o < ctx.getNumOutputs(); ++o) onnx::propagateElemTypeFromInputToOutput(ctx, 0, o);
  const auto* num = ctx.getAttribute("num_outputs");
  if (num != nullptr && present(ctx, 1)) fail_shape_inference("Split: both the 'split' input and 'num_outputs' are given");
  if (num != nullptr && num->i() != static_cast<std::int64_t>(ctx.getNumOutputs()))
    fail_shape_inference("Split: 'num_outputs' is ", num->i(), " but the node has ", ctx.getNumOutputs(), " outputs");
  if (!input_shape(ctx, 0)) return;
  const auto& in = onnx::getInputShape(ctx, 0);
  const int rank = in.dim_size();
  std::int64_t axis = int_attr(ctx, "axis", 0);
  if (axis < -rank || axis >= rank) fail_shape_inference("Split: axis ", axis, " is out of range for rank ", rank);
  if (axis < 0) axis += rank;
  const auto& d = in.dim(static_cast<int>(axis));
  std::vector<std::int64_t> parts;
  if (present(ctx, 1)) {
    auto s = const_ints(ctx, 1);
    if (!s) {
      for (std::size_t o = 0; o < ctx.getNumOutputs(); ++o) rank_of(ctx, o, rank);
      return;
    }
    parts = *s;
    if (parts.size() != ctx.getNumOutputs()) fail_shape_inference("Split: 'split' has ", parts.size(), " values for ", ctx.getNumOutputs(), " outputs");
  } else if (d.has_dim_value()) {
    const auto n = static_cast<std::int64_t>(ctx.getNumOutputs());
    if (n == 0) return;
    const std::int64_t each = num != nullptr ? (d.dim_value() + n - 1) / n : d.dim_value() / n;
    // Without num_outputs the parts are equal; with it, the last one is what remains. A dimension they do not fit
    // (one that does not divide; with num_outputs, one too short for them: 5 or 6 into 4 leave -1 or 0 for the last)
    // is the kernel's error at run time, as in ONNX Runtime: the node may sit in a branch of an If that never runs,
    // as the expanded AffineGrid-20's 2-D Split of a 3-D size does. The sizes stay unknown.
    if (num != nullptr || d.dim_value() % n == 0)
      for (std::int64_t i = 0; i < n; ++i) parts.push_back(i + 1 < n ? each : d.dim_value() - each * (n - 1));
    if (num != nullptr && (n > d.dim_value() || (!parts.empty() && parts.back() <= 0))) parts.clear();
  }
  for (std::size_t o = 0; o < ctx.getNumOutputs(); ++o) {
    auto* s = ctx.getOutputType(o)->mutable_tensor_type()->mutable_shape();
    *s = in;
    if (parts.empty()) s->mutable_dim(static_cast<int>(axis))->Clear();
    else {
      if (parts[o] < 0) fail_shape_inference("Split: a part of ", parts[o], " elements");
      s->mutable_dim(static_cast<int>(axis))->Clear();
      s->mutable_dim(static_cast<int>(axis))->set_dim_value(parts[o]);
    }
  }
}

void pad18(InferenceContext& ctx) {  // Pad-18+: optional 'axes' input
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!input_shape(ctx, 0)) return;
  const auto& in = onnx::getInputShape(ctx, 0);
  const int rank = in.dim_size();
  auto pads = const_ints(ctx, 1);
  std::vector<std::int64_t> axes;
  if (present(ctx, 3)) {
    auto a = const_ints(ctx, 3);
    if (!a) {
      rank_of(ctx, 0, rank);
      return;
    }
    axes = *a;
  } else {
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (!pads) {
    rank_of(ctx, 0, rank);
    return;
  }
  if (pads->size() != 2 * axes.size())
    fail_shape_inference("Pad: 'pads' has ", pads->size(), " values for ", axes.size(), " axes (2 per axis needed)");
  auto* s = ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape();
  *s = in;
  for (std::size_t k = 0; k < axes.size(); ++k) {
    std::int64_t a = axes[k];
    if (a < -rank || a >= rank) fail_shape_inference("Pad: axis ", a, " is out of range for rank ", rank);
    if (a < 0) a += rank;
    auto* d = s->mutable_dim(static_cast<int>(a));
    if (d->has_dim_value()) {
      const auto v = d->dim_value() + (*pads)[k] + (*pads)[k + axes.size()];
      if (v < 0) fail_shape_inference("Pad: dimension ", a, " would be ", v);
      d->set_dim_value(v);
    } else {
      d->Clear();
    }
  }
}

void resize18(InferenceContext& ctx) {  // Resize-18/19: axes, keep_aspect_ratio_policy, antialias
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!input_shape(ctx, 0)) return;
  const auto& in = onnx::getInputShape(ctx, 0);
  const int rank = in.dim_size();
  rank_of(ctx, 0, rank);
  if (ctx.getAttribute("axes") != nullptr) return;
  auto* s = ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape();
  const auto* policy = ctx.getAttribute("keep_aspect_ratio_policy");
  const bool stretch = policy == nullptr || policy->s() == "stretch";
  if (present(ctx, 3)) {
    if (!stretch) return;
    if (auto sizes = const_ints(ctx, 3); sizes && static_cast<int>(sizes->size()) == rank)
      for (int i = 0; i < rank; ++i) s->mutable_dim(i)->set_dim_value((*sizes)[static_cast<std::size_t>(i)]);
  } else if (present(ctx, 2)) {
    if (auto scales = const_floats(ctx, 2); scales && static_cast<int>(scales->size()) == rank)
      for (int i = 0; i < rank; ++i)
        if (in.dim(i).has_dim_value())
          s->mutable_dim(i)->set_dim_value(static_cast<std::int64_t>(static_cast<double>(in.dim(i).dim_value()) * (*scales)[static_cast<std::size_t>(i)]));
  }
}

void grid_sample20(InferenceContext& ctx) {  // [N, C, grid spatial...]
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!input_shape(ctx, 0) || !input_shape(ctx, 1)) return;
  const auto& x = onnx::getInputShape(ctx, 0);
  const auto& g = onnx::getInputShape(ctx, 1);
  if (x.dim_size() < 3 || g.dim_size() != x.dim_size()) fail_shape_inference("GridSample: X of rank ", x.dim_size(), " and grid of rank ", g.dim_size());
  auto* s = ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape();
  s->clear_dim();
  *s->add_dim() = x.dim(0);
  *s->add_dim() = x.dim(1);
  for (int i = 1; i + 1 < g.dim_size(); ++i) *s->add_dim() = g.dim(i);
}

void optional_has_element(InferenceContext& ctx) {
  onnx::updateOutputElemType(ctx, 0, onnx::TensorProto::BOOL);
  ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape()->clear_dim();
}

// DFT-17 and DFT-20: the signal's shape, the last dimension 2 (1 for the real inverse of a one-sided spectrum), the
// transformed axis dft_length long, n/2 + 1 for a one-sided forward transform, 2 (n - 1) for a one-sided inverse.
// (onnx 1.12's DFT-17 inference refuses a one-sided inverse, which ONNX 1.22 defines.)
void dft(InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!input_shape(ctx, 0)) return;
  const auto& in = onnx::getInputShape(ctx, 0);
  const int rank = in.dim_size();
  if (rank < 2) fail_shape_inference("DFT: the signal has rank ", rank, "; at least 2 is needed");
  const bool onesided = int_attr(ctx, "onesided", 0) != 0, inverse = int_attr(ctx, "inverse", 0) != 0;
  std::int64_t axis;
  if (ctx.getAttribute("axis") != nullptr || ctx.getNumInputs() < 3) {
    axis = int_attr(ctx, "axis", 1);  // DFT-17
  } else {
    const auto a = const_ints(ctx, 2);
    if (!a) {
      rank_of(ctx, 0, rank);
      return;
    }
    if (a->size() != 1) fail_shape_inference("DFT: the axis input must hold one value");
    axis = (*a)[0];
  }
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank - 1) fail_shape_inference("DFT: axis ", axis, " is out of range for a signal of rank ", rank);
  auto* y = ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape();
  *y = in;
  y->mutable_dim(rank - 1)->Clear();
  y->mutable_dim(rank - 1)->set_dim_value(inverse && onesided ? 1 : 2);
  std::optional<std::int64_t> n;
  if (present(ctx, 1)) {
    const auto l = const_ints(ctx, 1);
    if (l && l->size() == 1) n = (*l)[0];
    else {
      y->mutable_dim(static_cast<int>(axis))->Clear();
      return;
    }
  }
  auto* d = y->mutable_dim(static_cast<int>(axis));
  const auto& src = in.dim(static_cast<int>(axis));
  std::optional<std::int64_t> len = n;
  if (inverse && onesided) {
    if (!len && src.has_dim_value()) len = 2 * (src.dim_value() - 1);
  } else {
    if (!len && src.has_dim_value()) len = src.dim_value();
    if (len && onesided) len = *len / 2 + 1;
  }
  d->Clear();
  if (len) d->set_dim_value(*len);
}

// STFT-17: [batch, frames, bins, 2], frames = (length - frame_length) / frame_step + 1, bins = frame_length / 2 + 1
// when onesided (the default) else frame_length; frame_length from its input, else the window's length. (onnx
// 1.12's function gives frame_length bins for a onesided transform once frame_length is a constant.)
void stft(InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!input_shape(ctx, 0)) return;
  const auto& sig = onnx::getInputShape(ctx, 0);
  if (sig.dim_size() != 3) fail_shape_inference("STFT: the signal must be [batch, length, 1 or 2], got rank ", sig.dim_size());
  auto* y = ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape();
  y->clear_dim();
  *y->add_dim() = sig.dim(0);
  auto* frames = y->add_dim();
  auto* bins = y->add_dim();
  y->add_dim()->set_dim_value(2);
  std::optional<std::int64_t> len;
  if (present(ctx, 3)) {
    if (const auto l = const_ints(ctx, 3); l && l->size() == 1) len = (*l)[0];
  } else if (present(ctx, 2) && input_shape(ctx, 2) && onnx::getInputShape(ctx, 2).dim_size() == 1 &&
             onnx::getInputShape(ctx, 2).dim(0).has_dim_value()) {
    len = onnx::getInputShape(ctx, 2).dim(0).dim_value();
  }
  const auto step = const_ints(ctx, 1);
  if (len && *len <= 0) fail_shape_inference("STFT: frame_length is ", *len);
  if (step && (step->size() != 1 || (*step)[0] <= 0)) fail_shape_inference("STFT: frame_step must be one positive value");
  if (len) bins->set_dim_value(int_attr(ctx, "onesided", 1) != 0 ? *len / 2 + 1 : *len);
  if (len && step && sig.dim(1).has_dim_value()) {
    const std::int64_t n = sig.dim(1).dim_value();
    if (n < *len) fail_shape_inference("STFT: the signal (", n, ") is shorter than a frame (", *len, ")");
    frames->set_dim_value((n - *len) / (*step)[0] + 1);
  }
}

void range27(InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  rank_of(ctx, 0, 1);
}

void broadcast2(InferenceContext& ctx) {  // elementwise binary: the type of input 0, the broadcast shape
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (input_shape(ctx, 0) && input_shape(ctx, 1))
    onnx::bidirectionalBroadcastShapeInference(onnx::getInputShape(ctx, 0), onnx::getInputShape(ctx, 1),
                                               *ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape());
}

void unary(InferenceContext& ctx) { same_as_input(ctx, 0, 0); }

void regex_full_match(InferenceContext& ctx) {
  onnx::updateOutputElemType(ctx, 0, onnx::TensorProto::BOOL);
  if (input_shape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
}

void string_concat(InferenceContext& ctx) {
  onnx::updateOutputElemType(ctx, 0, onnx::TensorProto::STRING);
  if (input_shape(ctx, 0) && input_shape(ctx, 1))
    onnx::bidirectionalBroadcastShapeInference(onnx::getInputShape(ctx, 0), onnx::getInputShape(ctx, 1),
                                               *ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape());
}

void string_split(InferenceContext& ctx) {  // Y: input shape + one dimension; Z: the input's shape, int64
  onnx::updateOutputElemType(ctx, 0, onnx::TensorProto::STRING);
  if (ctx.getNumOutputs() > 1) onnx::updateOutputElemType(ctx, 1, onnx::TensorProto::INT64);
  if (!input_shape(ctx, 0)) return;
  auto* y = ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape();
  *y = onnx::getInputShape(ctx, 0);
  y->add_dim();
  if (ctx.getNumOutputs() > 1) onnx::propagateShapeFromInputToOutput(ctx, 0, 1);
}

void image_decoder(InferenceContext& ctx) {
  onnx::updateOutputElemType(ctx, 0, onnx::TensorProto::UINT8);
  rank_of(ctx, 0, 3);
}

void bit_cast(InferenceContext& ctx) {  // BitCast-26: 'to'; the shape of the input when the sizes match
  elem_from_attr(ctx, "to", 0, 0);
  if (!has_type(ctx.getInputType(0)) || !input_shape(ctx, 0)) return;
  const auto from = static_cast<element_type>(ctx.getInputType(0)->tensor_type().elem_type());
  const auto to = static_cast<element_type>(int_attr(ctx, "to", 0));
  if (element_bits(from) == element_bits(to)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
  else rank_of(ctx, 0, onnx::getInputShape(ctx, 0).dim_size() + (element_bits(from) > element_bits(to) ? 1 : -1));
}

void label_encoder4(InferenceContext& ctx) {  // the type of the values
  static const std::pair<const char*, int> kinds[] = {{"values_strings", onnx::TensorProto::STRING},
                                                      {"values_int64s", onnx::TensorProto::INT64},
                                                      {"values_floats", onnx::TensorProto::FLOAT}};
  int e = 0;
  for (const auto& [name, type] : kinds)
    if (ctx.getAttribute(name) != nullptr) e = type;
  if (const auto* t = ctx.getAttribute("values_tensor"); t != nullptr && t->has_t()) e = t->t().data_type();
  if (e != 0) onnx::updateOutputElemType(ctx, 0, e);
  if (input_shape(ctx, 0)) onnx::propagateShapeFromInputToOutput(ctx, 0, 0);
}

// Attention-23/24: Y has Q's shape with the value head size; present key/value are [B, kv heads, total, head].
void attention(InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  for (std::size_t o = 1; o < std::min<std::size_t>(ctx.getNumOutputs(), 3); ++o)
    if (has_type(ctx.getInputType(1))) onnx::propagateElemTypeFromInputToOutput(ctx, o == 1 ? 1 : 2, o);
  if (ctx.getNumOutputs() > 3) onnx::propagateElemTypeFromInputToOutput(ctx, 0, 3);
  if (!input_shape(ctx, 0)) return;
  const auto& q = onnx::getInputShape(ctx, 0);
  if (q.dim_size() != 3 && q.dim_size() != 4) fail_shape_inference("Attention: Q has rank ", q.dim_size(), "; 3 or 4 is needed");
  auto* y = ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape();
  *y = q;
  if (!input_shape(ctx, 2)) {
    y->mutable_dim(q.dim_size() - 1)->Clear();
  } else {
    const auto& v = onnx::getInputShape(ctx, 2);
    auto* last = y->mutable_dim(q.dim_size() - 1);
    last->Clear();
    if (q.dim_size() == 4 && v.dim_size() == 4) *last = v.dim(3);
    else if (q.dim_size() == 3 && v.dim_size() == 3) {
      const auto qh = int_attr(ctx, "q_num_heads", 0), kvh = int_attr(ctx, "kv_num_heads", 0);
      if (qh > 0 && kvh > 0 && v.dim(2).has_dim_value()) last->set_dim_value(v.dim(2).dim_value() / kvh * qh);
    } else if (q.dim_size() == 3 && v.dim_size() == 4) {
      const auto qh = int_attr(ctx, "q_num_heads", 0);
      if (qh > 0 && v.dim(3).has_dim_value()) last->set_dim_value(v.dim(3).dim_value() * qh);
    }
  }
  for (std::size_t o = 1; o < std::min<std::size_t>(ctx.getNumOutputs(), 3); ++o)
    if (!ctx.getOutputType(o)->has_tensor_type() || ctx.getOutputType(o)->tensor_type().elem_type() != 0) rank_of(ctx, o, 4);
  if (ctx.getNumOutputs() > 3) rank_of(ctx, 3, 4);
}

// Pooling (MaxPool-22, AveragePool-19/22, LpPool-18/22): [N, C, spatial...] with the output size rule of ONNX 1.22
// (with ceil_mode, a last window that would start in the end padding is dropped; onnx 1.12 kept it).
void pool(InferenceContext& ctx) {
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (ctx.getNumOutputs() > 1) onnx::updateOutputElemType(ctx, 1, onnx::TensorProto::INT64);
  if (!input_shape(ctx, 0)) return;
  const auto& x = onnx::getInputShape(ctx, 0);
  const int rank = x.dim_size();
  if (rank < 3) fail_shape_inference("the input has rank ", rank, "; at least 3 (N, C, spatial...) is needed");
  const int sp = rank - 2;
  const auto ints = [&](const char* name, std::int64_t def, int n) {
    std::vector<std::int64_t> v;
    if (const auto* a = ctx.getAttribute(name)) v.assign(a->ints().begin(), a->ints().end());
    if (v.empty()) v.assign(static_cast<std::size_t>(n), def);
    if (static_cast<int>(v.size()) != n) fail_shape_inference("attribute '", name, "' has ", v.size(), " values, expected ", n);
    return v;
  };
  const auto* ks = ctx.getAttribute("kernel_shape");
  if (ks == nullptr) fail_shape_inference("the attribute 'kernel_shape' is required");
  const auto k = ints("kernel_shape", 1, sp), s = ints("strides", 1, sp), d = ints("dilations", 1, sp);
  const auto pads = ints("pads", 0, 2 * sp);
  for (int i = 0; i < sp; ++i)
    if (k[static_cast<std::size_t>(i)] < 1 || s[static_cast<std::size_t>(i)] < 1 || d[static_cast<std::size_t>(i)] < 1 ||
        pads[static_cast<std::size_t>(i)] < 0 || pads[static_cast<std::size_t>(i + sp)] < 0)
      fail_shape_inference("kernel_shape, strides and dilations must be positive and pads non-negative");
  const bool ceil_mode = int_attr(ctx, "ceil_mode", 0) != 0;
  const auto* ap = ctx.getAttribute("auto_pad");
  const std::string auto_pad = ap != nullptr ? ap->s() : "NOTSET";
  for (std::size_t o = 0; o < std::min<std::size_t>(ctx.getNumOutputs(), 2); ++o) {
    auto* y = ctx.getOutputType(o)->mutable_tensor_type()->mutable_shape();
    y->clear_dim();
    *y->add_dim() = x.dim(0);
    *y->add_dim() = x.dim(1);
    for (int i = 0; i < sp; ++i) {
      auto* out = y->add_dim();
      const auto& in = x.dim(i + 2);
      if (!in.has_dim_value()) continue;
      const auto iu = static_cast<std::size_t>(i);
      const std::int64_t n = in.dim_value(), eff = (k[iu] - 1) * d[iu] + 1;
      std::int64_t r;
      if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        r = (n + s[iu] - 1) / s[iu];
      } else {
        const std::int64_t total = auto_pad == "VALID" ? n : n + pads[iu] + pads[iu + static_cast<std::size_t>(sp)];
        if (total < eff) fail_shape_inference("the window (", eff, ") is larger than the padded input (", total, ")");
        r = (ceil_mode ? (total - eff + s[iu] - 1) / s[iu] : (total - eff) / s[iu]) + 1;
        if (ceil_mode && auto_pad != "VALID" && (r - 1) * s[iu] >= n + pads[iu]) --r;
      }
      out->set_dim_value(r);
    }
  }
}

// OptionalGetElement-18: an optional's element, or the tensor or sequence itself.
void optional_get_element(InferenceContext& ctx) {
  const auto* t = ctx.getInputType(0);
  if (!has_type(t)) return;
  if (t->has_optional_type()) *ctx.getOutputType(0) = t->optional_type().elem_type();
  else *ctx.getOutputType(0) = *t;
}

// FlexAttention-1 (ai.onnx.preview): Y is Q's shape with V's head size. Its modifier subgraphs (one input each, the
// scores or the probabilities) are inferred from their declared input types, so that the nodes inside have types.
void flex_attention(InferenceContext& ctx) {
  for (const char* name : {"score_mod", "prob_mod"})
    if (const auto* a = ctx.getAttribute(name); a != nullptr && a->has_g())
      if (auto* gi = ctx.getGraphAttributeInferencer(name))
        gi->doInferencing(std::vector<const TypeProto*>(static_cast<std::size_t>(a->g().input_size()), nullptr),
                          std::vector<const onnx::TensorProto*>(static_cast<std::size_t>(a->g().input_size()), nullptr));
  onnx::propagateElemTypeFromInputToOutput(ctx, 0, 0);
  if (!input_shape(ctx, 0)) return;
  auto* y = ctx.getOutputType(0)->mutable_tensor_type()->mutable_shape();
  *y = onnx::getInputShape(ctx, 0);
  if (y->dim_size() != 4) fail_shape_inference("FlexAttention: Q must be 4-D, got rank ", y->dim_size());
  y->mutable_dim(3)->Clear();
  if (input_shape(ctx, 2) && onnx::getInputShape(ctx, 2).dim_size() == 4) *y->mutable_dim(3) = onnx::getInputShape(ctx, 2).dim(3);
}

using own_fn = void (*)(InferenceContext&);

// Own functions by operator name (every version beyond onnx 1.12 of that operator).
const std::unordered_map<std::string_view, own_fn>& own_functions() {
  static const std::unordered_map<std::string_view, own_fn> table = {
      {"Cast", cast}, {"CastLike", cast_like}, {"QuantizeLinear", quantize_linear},
      {"DequantizeLinear", dequantize_linear}, {"Split", split18}, {"Pad", pad18}, {"Resize", resize18},
      {"GridSample", grid_sample20}, {"OptionalHasElement", optional_has_element},
      {"DFT", dft}, {"STFT", stft}, {"Range", range27}, {"BitwiseAnd", broadcast2}, {"BitwiseOr", broadcast2}, {"BitwiseXor", broadcast2},
      {"BitwiseNot", unary}, {"CumProd", unary}, {"Gelu", unary}, {"Mish", unary}, {"Swish", unary},
      {"GroupNormalization", unary}, {"RMSNormalization", unary}, {"RotaryEmbedding", unary},
      {"TensorScatter", unary}, {"RegexFullMatch", regex_full_match}, {"StringConcat", string_concat},
      {"StringSplit", string_split}, {"ImageDecoder", image_decoder}, {"BitCast", bit_cast},
      {"LabelEncoder", label_encoder4}, {"Attention", attention}, {"MaxPool", pool}, {"AveragePool", pool},
      {"LpPool", pool}, {"OptionalGetElement", optional_get_element},
      {"FlexAttention", flex_attention},
  };
  return table;
}

// Versions that take the inference function of another onnx 1.12 operator version with the same signature.
struct borrowed {
  const char* op;
  int version;
};
const std::unordered_map<std::string_view, borrowed>& borrowed_functions() {
  static const std::unordered_map<std::string_view, borrowed> table = {
      // Reduce-18: axes as an optional input and noop_with_empty_axes, as ReduceSum-13.
      {"ReduceL1", {"ReduceSum", 13}}, {"ReduceL2", {"ReduceSum", 13}}, {"ReduceLogSum", {"ReduceSum", 13}},
      {"ReduceLogSumExp", {"ReduceSum", 13}}, {"ReduceMax", {"ReduceSum", 13}}, {"ReduceMean", {"ReduceSum", 13}},
      {"ReduceMin", {"ReduceSum", 13}}, {"ReduceProd", {"ReduceSum", 13}}, {"ReduceSumSquare", {"ReduceSum", 13}},
      // DeformConv-19/22: the output shape of a convolution (X, W, and the same spatial attributes).
      {"DeformConv", {"Conv", 11}},
  };
  return table;
}

bool same_signature(const schema::op_schema& a, const schema::op_schema& b) {
  if (a.min_inputs != b.min_inputs || a.max_inputs != b.max_inputs || a.min_outputs != b.min_outputs ||
      a.max_outputs != b.max_outputs || a.inputs.size() != b.inputs.size() || a.outputs.size() != b.outputs.size() ||
      a.attributes.size() != b.attributes.size())
    return false;
  const auto same_params = [](const std::vector<schema::formal_parameter>& x, const std::vector<schema::formal_parameter>& y) {
    for (std::size_t i = 0; i < x.size(); ++i)
      if (x[i].name != y[i].name || x[i].option != y[i].option) return false;
    return true;
  };
  if (!same_params(a.inputs, b.inputs) || !same_params(a.outputs, b.outputs)) return false;
  for (const auto& at : a.attributes) {
    const auto* bt = b.attribute(at.name);
    if (bt == nullptr || bt->type != at.type || bt->required != at.required || bt->default_text != at.default_text) return false;
  }
  return true;
}

}  // namespace

bool replaced_onnx112(const schema::op_schema& s) noexcept {
  return s.domain.empty() && (s.name == "DFT" || s.name == "STFT") && s.since_version == 17;
}

bool beyond_onnx112(const schema::op_schema& s) noexcept {
  if (s.domain.empty()) return s.since_version > 17;
  if (s.domain == "ai.onnx.ml") return s.since_version > 3;
  return s.domain == "ai.onnx.preview";  // a domain onnx 1.12 does not have
}

const schema::op_schema* onnx112_equivalent(const schema::op_schema& s) noexcept {
  const schema::op_schema* older = nullptr;
  for (const auto* v : schema::versions_of(s.domain, s.name))
    if (!beyond_onnx112(*v)) older = v;
  return older != nullptr && !older->deprecated && same_signature(s, *older) ? older : nullptr;
}

const onnx::OpSchema* modern_schema(const schema::op_schema& s, const older_schema_fn& older) {
  static std::mutex mu;
  static std::map<const schema::op_schema*, std::unique_ptr<onnx::OpSchema>> made;
  std::lock_guard lock(mu);
  auto& slot = made[&s];
  if (slot) return slot.get();
  auto os = std::make_unique<onnx::OpSchema>(s.name, "epstack/onnx/schema", 0);
  os->SetDomain(s.domain);
  os->SinceVersion(s.since_version);
  onnx::InferenceFunction fn;
  onnx::DataPropagationFunction prop;
  if (const auto own = own_functions().find(s.name); own != own_functions().end()) {
    fn = own->second;
  } else if (const auto b = borrowed_functions().find(s.name); b != borrowed_functions().end()) {
    if (const auto* base = older(b->second.op, b->second.version, s.domain)) fn = base->GetTypeAndShapeInferenceFunction();
  } else if (const auto* eq = onnx112_equivalent(s)) {
    if (const auto* base = older(s.name, eq->since_version, s.domain)) {
      fn = base->GetTypeAndShapeInferenceFunction();
      if (base->has_data_propagation_function()) prop = base->GetDataPropagationFunction();
    }
  }
  // After any function, the type constraints fill the output types it left unset.
  os->TypeAndShapeInferenceFunction([fn, &s](InferenceContext& ctx) {
    if (fn) fn(ctx);
    infer_from_constraints(s, ctx);
  });
  if (prop) os->PartialDataPropagationFunction(prop);
  slot = std::move(os);
  return slot.get();
}

}  // namespace epstack::detail
