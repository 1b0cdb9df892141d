// ONNX model load and save for epstack::onnx.
// onnx's headers come first: <sys/mman.h> (through mapped_file.hpp) defines MAP_TYPE, a name onnx's parser.h uses.
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <epstack/ir/graph_algorithms.hpp>
#include <epstack/onnx/onnx_io.hpp>
#include <epstack/onnx/op_schema.hpp>

#include "onnx_convert.hpp"
#include "newer_fields.hpp"
#include "inference_guards.hpp"
#include "schema/schema_check.hpp"
#include "zero_copy.hpp"
#include "../core/atomic_file.hpp"

#include <google/protobuf/io/coded_stream.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unordered_map>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace onnx::checker {
// Exported by libonnx 1.12 (it is what check_model(path) calls) but not declared in its header: the overload that
// takes a context, so that external data locations are checked against the model's folder rather than the cwd.
void check_model(const ModelProto& model, CheckerContext& ctx);
}  // namespace onnx::checker

namespace epstack {
namespace {

namespace fs = std::filesystem;

// Every GraphProto of the model, subgraphs included, with its value_info count before shape inference.
void count_value_info(onnx::GraphProto& g, std::unordered_map<const onnx::GraphProto*, int>& out) {
  out[&g] = g.value_info_size();
  for (auto& n : *g.mutable_node())
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) count_value_info(*a.mutable_g(), out);
      for (auto& sg : *a.mutable_graphs()) count_value_info(sg, out);
    }
}

// Small external tensors are read into raw_data before checking, so that shape inference (which cannot read
// external data) sees shape constants; large ones stay mapped.
constexpr std::size_t inline_external_below = 64 * 1024;

Status inline_small_external(onnx::GraphProto& g, detail::external_data_resolver& ext) {
  for (auto& tp : *g.mutable_initializer()) {
    if (tp.data_location() != onnx::TensorProto::EXTERNAL) continue;
    const auto et = static_cast<element_type>(tp.data_type());
    if (!is_valid(et) || et == element_type::string) continue;  // reported by the conversion
    auto count = element_count(std::span<const std::int64_t>(tp.dims().data(), static_cast<std::size_t>(tp.dims_size())));
    if (!count || static_cast<std::uint64_t>(*count) > inline_external_below / element_size(et)) continue;
    const std::size_t bytes = static_cast<std::size_t>(*count) * element_size(et);
    EPSTACK_ASSIGN_OR_RETURN(auto mapped, ext.map(tp, bytes));
    tp.set_raw_data(mapped.first, bytes);
    tp.clear_external_data();
    tp.clear_data_location();
  }
  for (auto& n : *g.mutable_node())
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) EPSTACK_RETURN_IF_ERROR(inline_small_external(*a.mutable_g(), ext));
      for (auto& sg : *a.mutable_graphs()) EPSTACK_RETURN_IF_ERROR(inline_small_external(sg, ext));
    }
  return {};
}

// The structure of a GraphProto (names only: no tensor data, no attribute values but subgraphs) as an IR graph, so
// that single assignment, undefined uses and cycles are reported by epstack's validation, naming the nodes involved,
// before the onnx checker (whose messages for these are vaguer) sees the model.
// A declared type must name a defined element type wherever it has one (onnx's inference functions assume so).
Status check_declared_type(const onnx::TypeProto& t, const std::string& where) {
  const auto elem_ok = [](int e) { return is_valid(static_cast<element_type>(e)); };
  switch (t.value_case()) {
    case onnx::TypeProto::kTensorType:
      if (!elem_ok(t.tensor_type().elem_type()))
        return Status(errc::invalid_graph, where + " has element type " + std::to_string(t.tensor_type().elem_type()) +
                                               ", which is not a defined ONNX element type");
      return {};
    case onnx::TypeProto::kSparseTensorType:
      if (!elem_ok(t.sparse_tensor_type().elem_type()))
        return Status(errc::invalid_graph, where + " has an undefined sparse element type");
      return {};
    case onnx::TypeProto::kSequenceType:
      return t.sequence_type().has_elem_type() ? check_declared_type(t.sequence_type().elem_type(), where) : Status{};
    case onnx::TypeProto::kOptionalType:
      return t.optional_type().has_elem_type() ? check_declared_type(t.optional_type().elem_type(), where) : Status{};
    case onnx::TypeProto::kMapType:
      if (!elem_ok(t.map_type().key_type())) return Status(errc::invalid_graph, where + " has an undefined map key type");
      return t.map_type().has_value_type() ? check_declared_type(t.map_type().value_type(), where) : Status{};
    default: return {};
  }
}

// Initializer headers (type, dims, sizes) and declared types are checked here too.
Status skeleton_from_proto(const onnx::GraphProto& gp, graph& g) {
  g.set_name(gp.name());
  for (const auto* list : {&gp.input(), &gp.output(), &gp.value_info()})
    for (const auto& vi : *list)
      if (vi.has_type())
        EPSTACK_RETURN_IF_ERROR(check_declared_type(vi.type(), "graph '" + gp.name() + "' value '" + vi.name() + "'"));
  for (const auto& vi : gp.input()) g.add_input(vi.name());
  for (const auto& tp : gp.initializer()) {
    EPSTACK_RETURN_IF_ERROR(detail::check_tensor_header(tp, "graph '" + gp.name() + "' initializer"));
    g.add_initializer(tp.name(), tensor());
  }
  for (const auto& sp : gp.sparse_initializer()) {
    sparse_tensor s;
    s.values.set_name(sp.values().name());
    g.add_sparse_initializer(std::move(s));
  }
  std::vector<std::string> ins, outs;
  for (const auto& np : gp.node()) {
    node n;
    n.name = np.name();
    n.op_type = np.op_type();
    for (const auto& ap : np.attribute()) {
      if (ap.has_g()) {
        graph sg;
        EPSTACK_RETURN_IF_ERROR(skeleton_from_proto(ap.g(), sg));
        n.attributes.set(ap.name(), make_subgraph(std::move(sg)));
      } else if (ap.graphs_size() > 0) {
        std::vector<subgraph> v;
        for (const auto& sgp : ap.graphs()) {
          graph sg;
          EPSTACK_RETURN_IF_ERROR(skeleton_from_proto(sgp, sg));
          v.push_back(make_subgraph(std::move(sg)));
        }
        n.attributes.set(ap.name(), std::move(v));
      }
    }
    ins.assign(np.input().begin(), np.input().end());
    outs.assign(np.output().begin(), np.output().end());
    g.add_node(std::move(n), ins, outs);
  }
  for (const auto& vi : gp.output()) g.add_output(vi.name());
  return {};
}

// onnx 1.12's checker requires a shape on every declared tensor type (graph inputs, outputs and value_info, in
// subgraphs too), while the IR makes it optional (unknown rank) and ONNX Runtime loads such models: onnx.helper's
// make_tensor_value_info(name, type, None) writes them. The checker is shown an empty shape in their place, taken
// away again after it ran (`undo`), so that the model itself keeps its unknown ranks.
void lend_shapes(onnx::GraphProto& g, std::vector<onnx::TypeProto_Tensor*>& undo) {
  const auto lend = [&](onnx::ValueInfoProto& vi) {
    if (!vi.has_type()) return;
    auto* t = vi.mutable_type();
    if (t->has_tensor_type() && !t->tensor_type().has_shape()) {
      t->mutable_tensor_type()->mutable_shape();
      undo.push_back(t->mutable_tensor_type());
    }
  };
  for (auto& vi : *g.mutable_input()) lend(vi);
  for (auto& vi : *g.mutable_output()) lend(vi);
  for (auto& vi : *g.mutable_value_info()) lend(vi);
  for (auto& n : *g.mutable_node())
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) lend_shapes(*a.mutable_g(), undo);
      for (auto& sub : *a.mutable_graphs()) lend_shapes(sub, undo);
    }
}

Result<model> load_proto(std::span<const std::byte> bytes, const std::string& label, const fs::path& model_path,
                         const fs::path& folder, bool folder_given, const load_options& opt) {
  const auto fail = [&](errc c, const std::string& m) { return Status(c, label + ": " + m); };
  if (bytes.empty()) return fail(errc::invalid_protobuf, "is empty (0 bytes)");
  if (bytes.size() > static_cast<std::size_t>(INT_MAX))
    return fail(errc::invalid_protobuf, "is larger than protobuf's 2 GB limit; keep large weights in external data");
  onnx::ModelProto mp;
  {
    google::protobuf::io::CodedInputStream in(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                               static_cast<int>(bytes.size()));
    in.SetTotalBytesLimit(INT_MAX);
    if (!mp.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
      return fail(errc::invalid_protobuf, "is not a valid ONNX ModelProto (protobuf parsing failed)");
  }
  if (!mp.has_graph()) return fail(errc::invalid_graph, "the model has no graph");

  {
    graph skeleton;
    EPSTACK_RETURN_IF_ERROR(skeleton_from_proto(mp.graph(), skeleton).with_context(label));
    EPSTACK_RETURN_IF_ERROR(validate(skeleton).with_context(label));
  }
  EPSTACK_RETURN_IF_ERROR(detail::check_opsets(mp).with_context(label));

  detail::external_data_resolver ext(folder, folder_given);
  EPSTACK_RETURN_IF_ERROR(inline_small_external(*mp.mutable_graph(), ext).with_context(label));

  EPSTACK_RETURN_IF_ERROR(detail::check_value_types(mp).with_context(label));
  const bool onnx112 = detail::within_onnx112(mp);
  if (opt.run_checker && !onnx112) EPSTACK_RETURN_IF_ERROR(detail::check_against_schemas(mp).with_context(label));
  if (opt.run_checker && onnx112) {
    try {
      onnx::checker::CheckerContext ctx;
      std::string dir = folder.empty() ? std::string() : folder.string();
      if (!dir.empty() && dir.back() != '/') dir += '/';
      ctx.set_model_dir(dir);
      std::vector<onnx::TypeProto_Tensor*> lent;
      lend_shapes(*mp.mutable_graph(), lent);
      struct give_back {
        std::vector<onnx::TypeProto_Tensor*>& lent;
        ~give_back() {
          for (auto* t : lent) t->clear_shape();
        }
      } back{lent};
      onnx::checker::check_model(mp, ctx);
    } catch (const std::exception& e) {
      return fail(errc::invalid_graph, std::string("onnx checker: ") + e.what());
    }
  }

  count_value_info(*mp.mutable_graph(), ext.original_value_info);
  if (opt.shape_inference != shape_inference_mode::off) {
    try {
      const bool strict = opt.shape_inference == shape_inference_mode::strict;
      onnx::ShapeInferenceOptions so(false, strict ? 1 : 0, opt.data_propagation);
      const detail::guarded_schema_registry registry;
      onnx::shape_inference::InferShapes(mp, &registry, so);
    } catch (const std::exception& e) {
      return fail(errc::invalid_graph, std::string("onnx shape inference: ") + e.what());
    }
  }

  model m;
  m.path = model_path;
  m.ir_version = mp.ir_version();
  for (const auto& o : mp.opset_import()) m.opsets.push_back({o.domain(), o.version()});
  m.producer_name = mp.producer_name();
  m.producer_version = mp.producer_version();
  m.domain = mp.domain();
  m.model_version = mp.model_version();
  m.doc_string = mp.doc_string();
  for (const auto& kv : mp.metadata_props()) m.metadata.emplace_back(kv.key(), kv.value());
  for (const auto& f : mp.functions())
    m.functions.push_back({f.domain(), f.name(), f.SerializeAsString(), detail::read_newer_fields(f, detail::function_fields).overload});
  // A multi-device configuration (IR 11) is kept for saving; the model runs on one device, as the IR allows.
  m.ir_extra = detail::read_newer_fields(mp, detail::model_fields).rest;
  for (const auto& t : mp.training_info()) m.training_info.push_back(t.SerializeAsString());

  EPSTACK_RETURN_IF_ERROR(detail::graph_from_proto(*mp.mutable_graph(), m.graph, ext).with_context(label));
  resolve_implicit_inputs(m.graph);
  propagate_outer_types(m.graph);
  resolve_since_versions(m);
  return m;
}

}  // namespace

Result<model> load_model(const fs::path& path, const load_options& options) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return Status(errc::no_such_file, "model file '" + path.string() + "' does not exist");
  if (!fs::is_regular_file(st)) return Status(errc::no_such_file, "model path '" + path.string() + "' is not a regular file");
  // Mapped lazily: large embedded weights are mapped in place (zero copy), so their pages are read only when used.
  auto f = mapped_file::open(path, /*populate=*/false);
  if (!f) return f.status();
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const std::string label = "model '" + path.string() + "'";
  if (options.zero_copy)
    if (auto rewritten = detail::externalize_raw_data((*f)->bytes(), path.filename().string(), inline_external_below + 1))
      return load_proto(std::as_bytes(std::span(rewritten->data(), rewritten->size())), label, path, folder, true, options);
  return load_proto((*f)->bytes(), label, path, folder, true, options);
}

Result<model> load_model(std::span<const std::byte> bytes, const load_options& options) {
  const bool given = !options.external_data_folder.empty();
  return load_proto(bytes, "model buffer", {}, options.external_data_folder, given, options);
}

// ---------------------------------------------------------------------------------------------------------------
// Saving

namespace {

using detail::atomic_file;

Result<onnx::ModelProto> to_proto(const model& m, const detail::external_writer& ext) {
  onnx::ModelProto mp;
  mp.set_ir_version(m.ir_version);
  for (const auto& o : m.opsets) {
    auto* op = mp.add_opset_import();
    op->set_domain(o.domain);
    op->set_version(o.version);
  }
  if (!m.producer_name.empty()) mp.set_producer_name(m.producer_name);
  if (!m.producer_version.empty()) mp.set_producer_version(m.producer_version);
  if (!m.domain.empty()) mp.set_domain(m.domain);
  if (m.model_version != 0) mp.set_model_version(m.model_version);
  if (!m.doc_string.empty()) mp.set_doc_string(m.doc_string);
  for (const auto& [k, v] : m.metadata) {
    auto* e = mp.add_metadata_props();
    e->set_key(k);
    e->set_value(v);
  }
  EPSTACK_RETURN_IF_ERROR(detail::graph_to_proto(m.graph, *mp.mutable_graph(), ext));
  for (const auto& f : m.functions)
    if (!mp.add_functions()->ParseFromString(f.proto))
      return Status(errc::invalid_argument, "function '" + f.domain + "." + f.name + "' does not parse");
  for (const auto& t : m.training_info)
    if (!mp.add_training_info()->ParseFromString(t)) return Status(errc::invalid_argument, "a training_info entry does not parse");
  detail::write_newer_fields(mp, detail::model_fields, {}, {}, m.ir_extra);
  return mp;
}

// Bytes of initializer data that a save would embed (all graphs), to refuse an over-2-GB model before copying it.
std::uint64_t embedded_bytes(const graph& g, const save_options* opt) {
  std::uint64_t n = 0;
  for (value_id v : g.initializers()) {
    const auto& t = *g.value(v).initializer;
    const bool external = opt != nullptr && t.type() != element_type::string &&
                          (opt->mode == external_data_mode::all_external ||
                           (opt->mode == external_data_mode::above_threshold && t.byte_size() >= opt->threshold_bytes));
    if (!external) n += t.type() == element_type::string ? t.element_count() * 16 : t.byte_size();
  }
  for (node_id i = 0; i < g.node_count(); ++i)
    for (const auto& a : g.node(i).attributes) {
      if (const auto* sg = std::get_if<subgraph>(&a.value); sg && *sg) n += embedded_bytes(**sg, opt);
      if (const auto* t = std::get_if<tensor>(&a.value)) n += t->byte_size();
    }
  return n;
}

Status check_embeddable(const model& m, const save_options* opt) {
  const auto n = embedded_bytes(m.graph, opt);
  if (n > static_cast<std::uint64_t>(INT_MAX))
    return Status(errc::invalid_argument, "the model would embed " + std::to_string(n) +
                                              " bytes of initializers, over protobuf's 2 GB limit: save its initializers "
                                              "as external data");
  return {};
}

Result<std::string> serialize_checked(const onnx::ModelProto& mp) {
  if (mp.ByteSizeLong() > static_cast<std::size_t>(INT_MAX))
    return Status(errc::invalid_argument, "the model is " + std::to_string(mp.ByteSizeLong()) +
                                              " bytes, over protobuf's 2 GB limit: save its initializers as external data");
  std::string out;
  mp.SerializeToString(&out);
  return out;
}

}  // namespace

namespace {
// Copies the types onnx inferred (value_info and outputs) into the IR graph, subgraphs included.
Status apply_inferred_types(const onnx::GraphProto& gp, graph& g) {
  const auto take = [&](const onnx::ValueInfoProto& vi) -> Status {
    const auto v = g.find_value(vi.name());
    if (v == no_id || !vi.has_type() || g.value(v).is_graph_input) return {};
    EPSTACK_ASSIGN_OR_RETURN(auto t, detail::type_from_proto(vi.type(), "graph '" + gp.name() + "' value '" + vi.name() + "'"));
    g.value(v).type = std::move(t);
    return {};
  };
  for (const auto& vi : gp.value_info()) EPSTACK_RETURN_IF_ERROR(take(vi));
  for (const auto& vi : gp.output()) EPSTACK_RETURN_IF_ERROR(take(vi));
  if (static_cast<std::size_t>(gp.node_size()) != g.node_count()) return {};
  for (node_id n = 0; n < g.node_count(); ++n) {
    const auto& np = gp.node(static_cast<int>(n));
    for (const auto& ap : np.attribute()) {
      auto* a = g.node(n).attributes.find(ap.name());
      if (a == nullptr) continue;
      if (auto* sg = std::get_if<subgraph>(&a->value); sg && *sg && ap.has_g())
        EPSTACK_RETURN_IF_ERROR(apply_inferred_types(ap.g(), **sg));
      if (auto* sgs = std::get_if<std::vector<subgraph>>(&a->value))
        for (int i = 0; i < ap.graphs_size() && static_cast<std::size_t>(i) < sgs->size(); ++i)
          if ((*sgs)[static_cast<std::size_t>(i)]) EPSTACK_RETURN_IF_ERROR(apply_inferred_types(ap.graphs(i), *(*sgs)[static_cast<std::size_t>(i)]));
    }
  }
  return {};
}
}  // namespace

namespace {
void resolve_since_versions(graph& g, const std::vector<opset_import>& opsets) {
  for (node_id n = 0; n < g.node_count(); ++n) {
    auto& nd = g.node(n);
    const std::string domain = nd.domain == "ai.onnx" ? std::string() : nd.domain;
    std::int64_t version = -1;
    for (const auto& o : opsets)
      if ((o.domain == "ai.onnx" ? std::string() : o.domain) == domain) version = o.version;
    const auto* s = version > 0 ? schema::find_schema(domain, nd.op_type, static_cast<int>(version)) : nullptr;
    nd.since_version = s != nullptr ? s->since_version : 0;
    for (auto& a : nd.attributes) {
      if (auto* sg = std::get_if<subgraph>(&a.value); sg && *sg) resolve_since_versions(**sg, opsets);
      if (auto* sgs = std::get_if<std::vector<subgraph>>(&a.value))
        for (auto& sg : *sgs)
          if (sg) resolve_since_versions(*sg, opsets);
    }
  }
}
}  // namespace

void resolve_since_versions(model& m) { resolve_since_versions(m.graph, m.opsets); }

Status infer_shapes(model& m) {
  // Tensors above 64 KiB go to the proto as headers only, marked external with a location nobody reads: inference
  // needs their type and dims, not their bytes.
  static constexpr const char* headers_only_location = "epstack-headers-only-for-shape-inference";
  const detail::external_writer headers_only = [](const tensor& t, onnx::TensorProto& tp) -> Result<bool> {
    if (t.byte_size() <= inline_external_below) return false;
    tp.set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = tp.add_external_data();
    e->set_key("location");
    e->set_value(headers_only_location);
    return true;
  };
  EPSTACK_ASSIGN_OR_RETURN(auto mp, to_proto(m, headers_only));
  try {
    onnx::ShapeInferenceOptions so(false, 1, true);
    const detail::guarded_schema_registry registry;
    onnx::shape_inference::InferShapes(mp, &registry, so);
  } catch (const std::exception& e) {
    return Status(errc::invalid_graph, std::string("onnx shape inference: ") + e.what());
  }
  EPSTACK_RETURN_IF_ERROR(apply_inferred_types(mp.graph(), m.graph));
  resolve_implicit_inputs(m.graph);
  propagate_outer_types(m.graph);
  resolve_since_versions(m);
  return {};
}

Result<tensor> parse_tensor(std::span<const std::byte> bytes, const std::string& label) {
  onnx::TensorProto tp;
  if (bytes.size() > static_cast<std::size_t>(INT_MAX) ||
      !tp.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return Status(errc::invalid_protobuf, label + ": is not a valid ONNX TensorProto");
  if (tp.data_location() == onnx::TensorProto::EXTERNAL)
    return Status(errc::invalid_graph, label + ": external data is not supported in a tensor file");
  detail::external_data_resolver none({}, false);
  return detail::tensor_from_proto(tp, none, label);
}

namespace {

Result<tensor> tensor_of_proto(onnx::TensorProto& tp, const std::string& label) {
  if (tp.data_location() == onnx::TensorProto::EXTERNAL)
    return Status(errc::invalid_graph, label + ": external data is not supported in a value file");
  detail::external_data_resolver none({}, false);
  return detail::tensor_from_proto(tp, none, label);
}

Result<ivalue> sequence_of_proto(onnx::SequenceProto& sp, const type_info* elem_type, const std::string& label) {
  if (sp.elem_type() != onnx::SequenceProto::TENSOR && !(sp.elem_type() == onnx::SequenceProto::UNDEFINED && sp.tensor_values_size() == 0))
    return Status(errc::not_implemented, label + ": sequences of " +
                                             (sp.elem_type() == onnx::SequenceProto::SEQUENCE ? "sequences"
                                              : sp.elem_type() == onnx::SequenceProto::MAP  ? "maps"
                                                                                            : "non-tensors") +
                                             " are not supported");
  tensor_sequence seq;
  if (elem_type != nullptr && elem_type->kind == type_kind::tensor) seq.elem = elem_type->elem;
  for (int i = 0; i < sp.tensor_values_size(); ++i) {
    EPSTACK_ASSIGN_OR_RETURN(auto t, tensor_of_proto(*sp.mutable_tensor_values(i), label + " item " + std::to_string(i)));
    if (seq.elem == element_type::undefined) seq.elem = t.type();
    if (t.type() != seq.elem)
      return Status(errc::invalid_graph, label + ": item " + std::to_string(i) + " is " + std::string(to_string(t.type())) +
                                             ", the sequence holds " + std::string(to_string(seq.elem)));
    seq.items.push_back(std::move(t));
  }
  return ivalue(std::move(seq));
}

template <class Proto>
bool parse_proto(Proto& p, std::span<const std::byte> bytes) {
  return bytes.size() <= static_cast<std::size_t>(INT_MAX) && p.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

}  // namespace

Result<ivalue> parse_value(std::span<const std::byte> bytes, const type_info& type, const std::string& label) {
  switch (type.kind) {
    case type_kind::undefined:
    case type_kind::tensor: {
      onnx::TensorProto tp;
      if (!parse_proto(tp, bytes)) return Status(errc::invalid_protobuf, label + ": is not a valid ONNX TensorProto");
      EPSTACK_ASSIGN_OR_RETURN(auto t, tensor_of_proto(tp, label));
      return ivalue(std::move(t));
    }
    case type_kind::sequence: {
      onnx::SequenceProto sp;
      if (!parse_proto(sp, bytes)) return Status(errc::invalid_protobuf, label + ": is not a valid ONNX SequenceProto");
      return sequence_of_proto(sp, type.inner.empty() ? nullptr : &type.inner.front(), label);
    }
    case type_kind::optional: {
      onnx::OptionalProto op;
      if (!parse_proto(op, bytes)) return Status(errc::invalid_protobuf, label + ": is not a valid ONNX OptionalProto");
      const type_info* inner = type.inner.empty() ? nullptr : &type.inner.front();
      if (op.has_tensor_value()) {
        EPSTACK_ASSIGN_OR_RETURN(auto t, tensor_of_proto(*op.mutable_tensor_value(), label));
        return ivalue(std::move(t));
      }
      if (op.has_sequence_value())
        return sequence_of_proto(*op.mutable_sequence_value(), inner != nullptr && !inner->inner.empty() ? &inner->inner.front() : nullptr,
                                 label);
      if (op.has_map_value() || op.has_optional_value() || op.has_sparse_tensor_value())
        return Status(errc::not_implemented, label + ": optionals of maps, optionals or sparse tensors are not supported");
      return ivalue();  // none
    }
    default:
      return Status(errc::not_implemented, label + ": values of this type (maps, sparse tensors) are not supported");
  }
}

Result<ivalue> load_value(const fs::path& path, const type_info& type) {
  auto f = mapped_file::open(path, /*populate=*/true);
  if (!f) return f.status();
  return parse_value((*f)->bytes(), type, "value file '" + path.string() + "'");
}

Result<tensor> load_tensor(const fs::path& path) {
  auto f = mapped_file::open(path, /*populate=*/true);
  if (!f) return f.status();
  return parse_tensor((*f)->bytes(), "tensor file '" + path.string() + "'");
}

Status save_tensor(const tensor& t, const fs::path& path) {
  onnx::TensorProto tp;
  EPSTACK_RETURN_IF_ERROR(detail::tensor_to_proto(t, tp, {}));
  std::string bytes;
  if (!tp.SerializeToString(&bytes)) return Status(errc::fail, "cannot serialize tensor for '" + path.string() + "'");
  atomic_file out(path);
  if (!out.ok()) return out.status();
  out.write(bytes.data(), bytes.size());
  return out.commit();
}

namespace {
Status sequence_to_proto(const tensor_sequence& seq, onnx::SequenceProto& sp, const std::string& label) {
  sp.set_elem_type(onnx::SequenceProto::TENSOR);
  for (std::size_t i = 0; i < seq.items.size(); ++i)
    EPSTACK_RETURN_IF_ERROR(detail::tensor_to_proto(seq.items[i], *sp.add_tensor_values(), {})
                                .with_context(label + " item " + std::to_string(i)));
  return {};
}
}  // namespace

Result<std::string> serialize_value(const ivalue& v, const type_info& type, const std::string& label) {
  std::string bytes;
  const auto kind_error = [&](const char* want) {
    return Status(errc::invalid_argument, label + ": the type is " + want + ", the value is " + v.kind_name());
  };
  switch (type.kind) {
    case type_kind::undefined:
    case type_kind::tensor: {
      if (!v.is_tensor()) return kind_error("a tensor");
      onnx::TensorProto tp;
      EPSTACK_RETURN_IF_ERROR(detail::tensor_to_proto(v.as_tensor(), tp, {}).with_context(label));
      if (!tp.SerializeToString(&bytes)) return Status(errc::fail, label + ": cannot serialize");
      return bytes;
    }
    case type_kind::sequence: {
      if (!v.is_sequence()) return kind_error("a sequence");
      onnx::SequenceProto sp;
      sp.set_name(label);
      EPSTACK_RETURN_IF_ERROR(sequence_to_proto(v.as_sequence(), sp, label));
      if (!sp.SerializeToString(&bytes)) return Status(errc::fail, label + ": cannot serialize");
      return bytes;
    }
    case type_kind::optional: {
      onnx::OptionalProto op;
      op.set_name(label);
      const type_info* inner = type.inner.empty() ? nullptr : &type.inner.front();
      const bool of_sequence = inner != nullptr && inner->kind == type_kind::sequence;
      op.set_elem_type(of_sequence ? onnx::OptionalProto::SEQUENCE : onnx::OptionalProto::TENSOR);
      if (v.is_tensor()) {
        if (of_sequence) return kind_error("an optional sequence");
        EPSTACK_RETURN_IF_ERROR(detail::tensor_to_proto(v.as_tensor(), *op.mutable_tensor_value(), {}).with_context(label));
      } else if (v.is_sequence()) {
        if (inner != nullptr && !of_sequence) return kind_error("an optional tensor");
        op.set_elem_type(onnx::OptionalProto::SEQUENCE);
        EPSTACK_RETURN_IF_ERROR(sequence_to_proto(v.as_sequence(), *op.mutable_sequence_value(), label));
      }
      if (!op.SerializeToString(&bytes)) return Status(errc::fail, label + ": cannot serialize");
      return bytes;
    }
    default:
      return Status(errc::not_implemented, label + ": values of this type (maps, sparse tensors) are not supported");
  }
}

Status save_value(const ivalue& v, const type_info& type, const fs::path& path) {
  EPSTACK_ASSIGN_OR_RETURN(auto bytes, serialize_value(v, type, path.string()));
  atomic_file out(path);
  if (!out.ok()) return out.status();
  out.write(bytes.data(), bytes.size());
  return out.commit();
}

Result<std::string> serialize_model(const model& m) {
  EPSTACK_RETURN_IF_ERROR(check_embeddable(m, nullptr));
  EPSTACK_ASSIGN_OR_RETURN(auto mp, to_proto(m, {}));
  return serialize_checked(mp);
}

Status save_model(const model& m, const fs::path& path, const save_options& options) {
  if (path.empty() || !path.has_filename()) return Status(errc::invalid_argument, "save_model: '" + path.string() + "' is not a file path");
  std::error_code ec;
  if (fs::is_directory(path, ec)) return Status(errc::invalid_argument, "save_model: '" + path.string() + "' is a folder");
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (!fs::is_directory(folder, ec)) return Status(errc::no_such_file, "save_model: folder '" + folder.string() + "' does not exist");

  EPSTACK_RETURN_IF_ERROR(check_embeddable(m, &options));
  std::unique_ptr<atomic_file> data;
  std::string data_name = options.external_file_name;
  if (options.mode != external_data_mode::embedded) {
    if (data_name.empty()) data_name = path.filename().string() + ".data";
    const fs::path rel(data_name);
    if (rel.is_absolute() || rel.has_parent_path() || data_name == "." || data_name == "..")
      return Status(errc::invalid_argument, "save_model: external data file name '" + data_name +
                                                "' must be a plain file name in the model's folder");
    data = std::make_unique<atomic_file>(folder / rel);
    if (!data->ok()) return data->status();
  }
  const std::size_t align = std::max<std::size_t>(options.alignment, 1);
  detail::external_writer ext;
  if (data) {
    ext = [&](const tensor& t, onnx::TensorProto& tp) -> Result<bool> {
      if (options.mode == external_data_mode::above_threshold && t.byte_size() < options.threshold_bytes) return false;
      if (!data->pad_to(align)) return data->status();
      const std::uint64_t offset = data->size();
      if (!data->write(t.data(), t.byte_size())) return data->status();
      tp.set_data_location(onnx::TensorProto::EXTERNAL);
      const auto add = [&](const char* k, const std::string& v) {
        auto* e = tp.add_external_data();
        e->set_key(k);
        e->set_value(v);
      };
      add("location", data_name);
      add("offset", std::to_string(offset));
      add("length", std::to_string(t.byte_size()));
      return true;
    };
  }
  EPSTACK_ASSIGN_OR_RETURN(auto mp, to_proto(m, ext));
  EPSTACK_ASSIGN_OR_RETURN(auto bytes, serialize_checked(mp));
  atomic_file out(path);
  if (!out.ok()) return out.status();
  out.write(bytes.data(), bytes.size());
  if (data) EPSTACK_RETURN_IF_ERROR(data->commit());
  return out.commit();
}

}  // namespace epstack
