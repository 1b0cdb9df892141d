// ONNX model load and save for epstack::onnx.
// onnx's headers come first: <sys/mman.h> (through mapped_file.hpp) defines MAP_TYPE, a name onnx's parser.h uses.
#include <onnx/checker.h>
#include <onnx/defs/function.h>
#include <onnx/shape_inference/implementation.h>

#include <epstack/ir/graph_algorithms.hpp>
#include <epstack/onnx/onnx_io.hpp>
#include <epstack/onnx/op_schema.hpp>

#include "onnx_convert.hpp"
#include "newer_fields.hpp"
#include "inference_guards.hpp"
#include "schema/modern_inference.hpp"
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
#include <unordered_set>

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

Status check_against_schemas(const onnx::ModelProto& mp) {
  std::unordered_map<std::string, int> opsets;
  for (const auto& o : mp.opset_import())
    opsets[o.domain() == "ai.onnx" ? std::string() : o.domain()] = static_cast<int>(o.version());
  if (mp.ir_version() < 1 || mp.ir_version() > 13)
    return Status(errc::invalid_graph, "IR version " + std::to_string(mp.ir_version()) + " is not supported (this build reads 1 to 13)");
  return check_graph_against_schemas(mp.graph(), opsets);
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
  EPSTACK_RETURN_IF_ERROR(check_opsets(mp).with_context(label));

  detail::external_data_resolver ext(folder, folder_given);
  EPSTACK_RETURN_IF_ERROR(inline_small_external(*mp.mutable_graph(), ext).with_context(label));

  const bool onnx112 = within_onnx112(mp);
  if (opt.run_checker && !onnx112) EPSTACK_RETURN_IF_ERROR(check_against_schemas(mp).with_context(label));
  if (opt.run_checker && onnx112) {
    try {
      onnx::checker::CheckerContext ctx;
      std::string dir = folder.empty() ? std::string() : folder.string();
      if (!dir.empty() && dir.back() != '/') dir += '/';
      ctx.set_model_dir(dir);
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
