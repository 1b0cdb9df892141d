// Proto <-> IR conversions for epstack::onnx.
#include "onnx_convert.hpp"
#include "newer_fields.hpp"

#include <epstack/core/path_rules.hpp>
#include <epstack/core/weight_memory.hpp>

#include <bit>
#include <charconv>
#include <cstring>
#include <limits>

namespace epstack::detail {

static_assert(std::endian::native == std::endian::little, "ONNX raw_data is little-endian; big-endian hosts need byte swaps");

namespace {

Status bad(const std::string& where, const std::string& what) { return Status(errc::invalid_graph, where + ": " + what); }

std::optional<std::uint64_t> parse_u64(const std::string& s) {
  std::uint64_t v = 0;
  const auto* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc{} || p != end || s.empty()) return std::nullopt;
  return v;
}

// Copies a repeated numeric field into the tensor's storage, converting each value to T.
template <class T, class Field>
void copy_field(const Field& f, tensor& t) {
  T* out = t.typed<T>();
  for (int i = 0; i < f.size(); ++i) out[i] = static_cast<T>(f.Get(i));
}

}  // namespace

Result<std::pair<std::byte*, std::shared_ptr<mapped_file>>> external_data_resolver::map(const onnx::TensorProto& tp,
                                                                                         std::size_t expected) {
  const std::string what = "external data of tensor '" + tp.name() + "'";
  std::string location;
  std::optional<std::uint64_t> offset, length;
  bool has_location = false;
  for (const auto& e : tp.external_data()) {
    if (e.key() == "location") {
      location = e.value();
      has_location = true;
    } else if (e.key() == "offset" || e.key() == "length") {
      auto v = parse_u64(e.value());
      if (!v) return bad(what, "'" + e.key() + "' is not a non-negative integer: '" + e.value() + "'");
      (e.key() == "offset" ? offset : length) = v;
    }
  }
  if (!has_location) return bad(what, "has no 'location' entry");
  if (!folder_given_)
    return Status(errc::invalid_argument,
                  what + ": the model was loaded from a memory buffer, so the folder of its external data must be given "
                         "(session.model_external_initializers_file_folder_path / load_options::external_data_folder)");
  auto it = files_.find(location);
  if (it == files_.end()) {
    EPSTACK_ASSIGN_OR_RETURN(auto full, resolve_file_in_folder(folder_, location, what));
    // Kept open when large (and while few are): the providers read the weights they lay out with pread
    // (weight_memory.hpp's read_mapped).
    auto mf = mapped_file::open(full, /*populate=*/false, /*keep_descriptor=*/true);
    if (!mf) return Status(mf.code() == errc::no_such_file ? errc::no_such_file : errc::invalid_graph,
                           what + ": " + mf.status().message());
    (void)enable_bulk_reads(*mf);
    it = files_.emplace(location, std::move(mf).value()).first;
  }
  const auto& f = it->second;
  const std::uint64_t off = offset.value_or(0);
  const std::uint64_t len = length.value_or(expected);
  if (off > f->size())
    return bad(what, "offset " + std::to_string(off) + " is beyond the end of '" + location + "' (" +
                         std::to_string(f->size()) + " bytes)");
  if (len > f->size() - off)
    return bad(what, "offset " + std::to_string(off) + " + length " + std::to_string(len) + " is beyond the end of '" +
                         location + "' (" + std::to_string(f->size()) + " bytes)");
  if (len != expected)
    return bad(what, "length " + std::to_string(len) + " does not match the tensor's " + std::to_string(expected) + " bytes");
  return std::pair{f->data() + off, f};
}

Status check_tensor_header(const onnx::TensorProto& tp, const std::string& where0) {
  const std::string where = where0 + " tensor '" + tp.name() + "'";
  const auto et = static_cast<element_type>(tp.data_type());
  if (!is_valid(et)) return bad(where, "has an invalid data_type " + std::to_string(tp.data_type()));
  for (auto d : tp.dims())
    if (d < 0) return bad(where, "has a negative dimension " + std::to_string(d));
  const auto count = element_count(std::span<const std::int64_t>(tp.dims().data(), static_cast<std::size_t>(tp.dims_size())));
  const std::size_t es = std::max<std::size_t>(element_size(et), 1);
  if (!count || static_cast<std::uint64_t>(*count) > (std::uint64_t{1} << 60) / es) return bad(where, "has too many elements");
  const auto n = static_cast<std::size_t>(*count);
  if (tp.data_location() != onnx::TensorProto::EXTERNAL && tp.has_raw_data()) {
    if (et == element_type::string) return bad(where, "is a string tensor with raw_data");
    const std::size_t want = storage_bytes(et, n);
    if (tp.raw_data().size() != want)
      return bad(where, "has " + std::to_string(tp.raw_data().size()) + " bytes of raw_data, expected " +
                            std::to_string(want) + " (" + std::to_string(n) + " x " + std::string(to_string(et)) +
                            (is_packed(et) ? ", packed " + std::to_string(8 / element_bits(et)) + " to a byte)" : ")"));
  }
  return {};
}

namespace {
/// The typed field of a TensorProto that holds elements of type `et`, its number of values, and how many it needs per
/// element (2 for complex numbers).
struct typed_field {
  int have = 0;
  const char* name = "";
  std::size_t per = 1;
};
typed_field typed_field_of(const onnx::TensorProto& tp, element_type et) {
  switch (et) {
    case element_type::float32: return {tp.float_data_size(), "float_data", 1};
    case element_type::complex64: return {tp.float_data_size(), "float_data", 2};
    case element_type::float64: return {tp.double_data_size(), "double_data", 1};
    case element_type::complex128: return {tp.double_data_size(), "double_data", 2};
    case element_type::int64: return {tp.int64_data_size(), "int64_data", 1};
    case element_type::uint32: case element_type::uint64: return {tp.uint64_data_size(), "uint64_data", 1};
    case element_type::string: return {tp.string_data_size(), "string_data", 1};
    default: return {tp.int32_data_size(), "int32_data", 1};
  }
}
// Values a typed field holds for `n` elements: the packed types store one packed byte per int32_data entry.
std::size_t field_values(element_type et, std::size_t n, std::size_t per) { return is_packed(et) ? storage_bytes(et, n) : per * n; }
}  // namespace

Result<tensor> tensor_from_proto(onnx::TensorProto& tp, external_data_resolver& ext, const std::string& where0) {
  EPSTACK_RETURN_IF_ERROR(check_tensor_header(tp, where0));
  const std::string where = where0 + " tensor '" + tp.name() + "'";
  const auto et = static_cast<element_type>(tp.data_type());
  std::vector<std::int64_t> dims(tp.dims().begin(), tp.dims().end());
  const auto n = static_cast<std::size_t>(*element_count(dims));
  tensor t;
  if (tp.data_location() == onnx::TensorProto::EXTERNAL) {
    if (et == element_type::string) return bad(where, "is a string tensor stored externally");
    EPSTACK_ASSIGN_OR_RETURN(auto mapped, ext.map(tp, storage_bytes(et, n)));
    t = tensor::borrow_file(et, dims, mapped.first, std::move(mapped.second));
  } else if (tp.has_raw_data()) {
    if (n == 0) {
      t = tensor(et, dims);
    } else {
      // Take the bytes out of the message instead of copying them: the string's buffer becomes the storage.
      auto owner = std::make_shared<std::string>(std::move(*tp.mutable_raw_data()));
      void* p = owner->data();
      t = tensor::borrow(et, dims, p, std::move(owner));
    }
  } else {
    // The values must all be there before the tensor is allocated: a few bytes of model must not claim gigabytes.
    if (et == element_type::undefined) return bad(where, "has no data type");
    if (const auto f = typed_field_of(tp, et); static_cast<std::size_t>(f.have) != field_values(et, n, f.per))
      return bad(where, "has " + std::to_string(f.have) + " values in " + f.name + ", expected " +
                            std::to_string(field_values(et, n, f.per)) + (is_packed(et) ? " (packed bytes)" : ""));
    t = tensor(et, dims);
    const auto expect = [&](int have, std::size_t want, const char* field) -> Status {
      if (static_cast<std::size_t>(have) != want)
        return bad(where, "has " + std::to_string(have) + " values in " + field + ", expected " + std::to_string(want));
      return {};
    };
    switch (et) {
      case element_type::float32:
        EPSTACK_RETURN_IF_ERROR(expect(tp.float_data_size(), n, "float_data"));
        copy_field<float>(tp.float_data(), t);
        break;
      case element_type::complex64: {
        EPSTACK_RETURN_IF_ERROR(expect(tp.float_data_size(), 2 * n, "float_data"));
        if (n) std::memcpy(t.mutable_data(), tp.float_data().data(), 2 * n * sizeof(float));
        break;
      }
      case element_type::float64:
        EPSTACK_RETURN_IF_ERROR(expect(tp.double_data_size(), n, "double_data"));
        copy_field<double>(tp.double_data(), t);
        break;
      case element_type::complex128:
        EPSTACK_RETURN_IF_ERROR(expect(tp.double_data_size(), 2 * n, "double_data"));
        if (n) std::memcpy(t.mutable_data(), tp.double_data().data(), 2 * n * sizeof(double));
        break;
      case element_type::int32: EPSTACK_RETURN_IF_ERROR(expect(tp.int32_data_size(), n, "int32_data")); copy_field<std::int32_t>(tp.int32_data(), t); break;
      case element_type::int16: EPSTACK_RETURN_IF_ERROR(expect(tp.int32_data_size(), n, "int32_data")); copy_field<std::int16_t>(tp.int32_data(), t); break;
      case element_type::int8: EPSTACK_RETURN_IF_ERROR(expect(tp.int32_data_size(), n, "int32_data")); copy_field<std::int8_t>(tp.int32_data(), t); break;
      case element_type::uint16: EPSTACK_RETURN_IF_ERROR(expect(tp.int32_data_size(), n, "int32_data")); copy_field<std::uint16_t>(tp.int32_data(), t); break;
      case element_type::uint8: EPSTACK_RETURN_IF_ERROR(expect(tp.int32_data_size(), n, "int32_data")); copy_field<std::uint8_t>(tp.int32_data(), t); break;
      case element_type::boolean: {
        EPSTACK_RETURN_IF_ERROR(expect(tp.int32_data_size(), n, "int32_data"));
        bool* out = t.typed<bool>();
        for (std::size_t i = 0; i < n; ++i) out[i] = tp.int32_data(static_cast<int>(i)) != 0;
        break;
      }
      case element_type::float16: {
        EPSTACK_RETURN_IF_ERROR(expect(tp.int32_data_size(), n, "int32_data"));
        auto* out = t.typed<float16>();
        for (std::size_t i = 0; i < n; ++i) out[i] = float16::from_bits(static_cast<std::uint16_t>(tp.int32_data(static_cast<int>(i))));
        break;
      }
      case element_type::bfloat16: {
        EPSTACK_RETURN_IF_ERROR(expect(tp.int32_data_size(), n, "int32_data"));
        auto* out = t.typed<bfloat16>();
        for (std::size_t i = 0; i < n; ++i) out[i] = bfloat16::from_bits(static_cast<std::uint16_t>(tp.int32_data(static_cast<int>(i))));
        break;
      }
      case element_type::int64: EPSTACK_RETURN_IF_ERROR(expect(tp.int64_data_size(), n, "int64_data")); copy_field<std::int64_t>(tp.int64_data(), t); break;
      case element_type::uint32: EPSTACK_RETURN_IF_ERROR(expect(tp.uint64_data_size(), n, "uint64_data")); copy_field<std::uint32_t>(tp.uint64_data(), t); break;
      case element_type::uint64: EPSTACK_RETURN_IF_ERROR(expect(tp.uint64_data_size(), n, "uint64_data")); copy_field<std::uint64_t>(tp.uint64_data(), t); break;
      case element_type::string: {
        EPSTACK_RETURN_IF_ERROR(expect(tp.string_data_size(), n, "string_data"));
        auto* out = t.typed<std::string>();
        for (std::size_t i = 0; i < n; ++i) out[i] = tp.string_data(static_cast<int>(i));
        break;
      }
      case element_type::undefined: return bad(where, "has no data type");
      default: {
        // float8 (one per entry) and the packed types (one packed byte per entry): the low 8 bits of each value.
        const std::size_t bytes = storage_bytes(et, n);
        EPSTACK_RETURN_IF_ERROR(expect(tp.int32_data_size(), bytes, "int32_data"));
        auto* out = reinterpret_cast<std::uint8_t*>(t.mutable_data());
        for (std::size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::uint8_t>(tp.int32_data(static_cast<int>(i)));
        break;
      }
    }
  }
  t.set_name(tp.name());
  return t;
}

Result<type_info> type_from_proto(const onnx::TypeProto& tp, const std::string& where) {
  type_info t;
  t.denotation = tp.denotation();
  const auto read_shape = [&](bool has, const onnx::TensorShapeProto& sp) {
    if (!has) return;
    shape s;
    for (const auto& d : sp.dim()) {
      dimension dim;
      if (d.has_dim_value()) dim.value = d.dim_value();
      else if (d.has_dim_param()) dim.param = d.dim_param();
      dim.denotation = d.denotation();
      s.push_back(std::move(dim));
    }
    t.dims = std::move(s);
  };
  switch (tp.value_case()) {
    case onnx::TypeProto::kTensorType:
      t.kind = type_kind::tensor;
      t.elem = static_cast<element_type>(tp.tensor_type().elem_type());
      read_shape(tp.tensor_type().has_shape(), tp.tensor_type().shape());
      break;
    case onnx::TypeProto::kSparseTensorType:
      t.kind = type_kind::sparse_tensor;
      t.elem = static_cast<element_type>(tp.sparse_tensor_type().elem_type());
      read_shape(tp.sparse_tensor_type().has_shape(), tp.sparse_tensor_type().shape());
      break;
    case onnx::TypeProto::kSequenceType: {
      t.kind = type_kind::sequence;
      if (tp.sequence_type().has_elem_type()) {
        EPSTACK_ASSIGN_OR_RETURN(auto inner, type_from_proto(tp.sequence_type().elem_type(), where));
        t.inner.push_back(std::move(inner));
      }
      break;
    }
    case onnx::TypeProto::kOptionalType: {
      t.kind = type_kind::optional;
      if (tp.optional_type().has_elem_type()) {
        EPSTACK_ASSIGN_OR_RETURN(auto inner, type_from_proto(tp.optional_type().elem_type(), where));
        t.inner.push_back(std::move(inner));
      }
      break;
    }
    case onnx::TypeProto::kMapType: {
      t.kind = type_kind::map;
      t.elem = static_cast<element_type>(tp.map_type().key_type());
      if (tp.map_type().has_value_type()) {
        EPSTACK_ASSIGN_OR_RETURN(auto inner, type_from_proto(tp.map_type().value_type(), where));
        t.inner.push_back(std::move(inner));
      }
      break;
    }
    case onnx::TypeProto::kOpaqueType:
      t.kind = type_kind::opaque;
      t.opaque_domain = tp.opaque_type().domain();
      t.opaque_name = tp.opaque_type().name();
      break;
    case onnx::TypeProto::VALUE_NOT_SET: break;
  }
  if ((t.kind == type_kind::tensor || t.kind == type_kind::sparse_tensor || t.kind == type_kind::map) &&
      t.elem != element_type::undefined && !is_valid(t.elem))
    return bad(where, "has an invalid element type " + std::to_string(static_cast<int>(t.elem)));
  return t;
}

namespace {

Result<sparse_tensor> sparse_from_proto(onnx::SparseTensorProto& sp, external_data_resolver& ext, const std::string& where) {
  sparse_tensor s;
  EPSTACK_ASSIGN_OR_RETURN(s.values, tensor_from_proto(*sp.mutable_values(), ext, where + " sparse values"));
  if (sp.has_indices()) {
    EPSTACK_ASSIGN_OR_RETURN(s.indices, tensor_from_proto(*sp.mutable_indices(), ext, where + " sparse indices"));
  }
  s.dims.assign(sp.dims().begin(), sp.dims().end());
  return s;
}

}  // namespace

Result<attribute> attribute_from_proto(onnx::AttributeProto& ap, external_data_resolver& ext, const std::string& where0) {
  const std::string where = where0 + " attribute '" + ap.name() + "'";
  attribute a;
  a.name = ap.name();
  a.doc_string = ap.doc_string();
  a.ref_attr_name = ap.ref_attr_name();
  auto type = ap.type();
  if (type == onnx::AttributeProto::UNDEFINED) {  // IR version 1 had no type field: infer it from the value
    if (ap.has_f()) type = onnx::AttributeProto::FLOAT;
    else if (ap.has_i()) type = onnx::AttributeProto::INT;
    else if (ap.has_s()) type = onnx::AttributeProto::STRING;
    else if (ap.has_t()) type = onnx::AttributeProto::TENSOR;
    else if (ap.has_g()) type = onnx::AttributeProto::GRAPH;
    else if (ap.floats_size()) type = onnx::AttributeProto::FLOATS;
    else if (ap.ints_size()) type = onnx::AttributeProto::INTS;
    else if (ap.strings_size()) type = onnx::AttributeProto::STRINGS;
  }
  switch (type) {
    case onnx::AttributeProto::UNDEFINED:
      if (a.ref_attr_name.empty()) return bad(where, "has no type and no value");
      break;
    case onnx::AttributeProto::FLOAT: a.value = ap.f(); break;
    case onnx::AttributeProto::INT: a.value = static_cast<std::int64_t>(ap.i()); break;
    case onnx::AttributeProto::STRING: a.value = ap.s(); break;
    case onnx::AttributeProto::TENSOR: {
      EPSTACK_ASSIGN_OR_RETURN(auto t, tensor_from_proto(*ap.mutable_t(), ext, where));
      a.value = std::move(t);
      break;
    }
    case onnx::AttributeProto::GRAPH: {
      graph g;
      EPSTACK_RETURN_IF_ERROR(graph_from_proto(*ap.mutable_g(), g, ext));
      a.value = make_subgraph(std::move(g));
      break;
    }
    case onnx::AttributeProto::SPARSE_TENSOR: {
      EPSTACK_ASSIGN_OR_RETURN(auto s, sparse_from_proto(*ap.mutable_sparse_tensor(), ext, where));
      a.value = std::move(s);
      break;
    }
    case onnx::AttributeProto::TYPE_PROTO: {
      EPSTACK_ASSIGN_OR_RETURN(auto t, type_from_proto(ap.tp(), where));
      a.value = std::move(t);
      break;
    }
    case onnx::AttributeProto::FLOATS: a.value = std::vector<float>(ap.floats().begin(), ap.floats().end()); break;
    case onnx::AttributeProto::INTS: a.value = std::vector<std::int64_t>(ap.ints().begin(), ap.ints().end()); break;
    case onnx::AttributeProto::STRINGS: a.value = std::vector<std::string>(ap.strings().begin(), ap.strings().end()); break;
    case onnx::AttributeProto::TENSORS: {
      std::vector<tensor> v;
      for (auto& t : *ap.mutable_tensors()) {
        EPSTACK_ASSIGN_OR_RETURN(auto x, tensor_from_proto(t, ext, where));
        v.push_back(std::move(x));
      }
      a.value = std::move(v);
      break;
    }
    case onnx::AttributeProto::GRAPHS: {
      std::vector<subgraph> v;
      for (auto& gp : *ap.mutable_graphs()) {
        graph g;
        EPSTACK_RETURN_IF_ERROR(graph_from_proto(gp, g, ext));
        v.push_back(make_subgraph(std::move(g)));
      }
      a.value = std::move(v);
      break;
    }
    case onnx::AttributeProto::SPARSE_TENSORS: {
      std::vector<sparse_tensor> v;
      for (auto& sp : *ap.mutable_sparse_tensors()) {
        EPSTACK_ASSIGN_OR_RETURN(auto s, sparse_from_proto(sp, ext, where));
        v.push_back(std::move(s));
      }
      a.value = std::move(v);
      break;
    }
    case onnx::AttributeProto::TYPE_PROTOS: {
      std::vector<type_info> v;
      for (const auto& tp : ap.type_protos()) {
        EPSTACK_ASSIGN_OR_RETURN(auto t, type_from_proto(tp, where));
        v.push_back(std::move(t));
      }
      a.value = std::move(v);
      break;
    }
    default: return bad(where, "has an unknown type " + std::to_string(static_cast<int>(type)));
  }
  return a;
}



Status graph_from_proto(onnx::GraphProto& gp, graph& g, external_data_resolver& ext) {
  const auto known = ext.original_value_info.find(&gp);
  const int original_value_info = known == ext.original_value_info.end() ? gp.value_info_size() : known->second;
  g.set_name(gp.name());
  g.set_doc_string(gp.doc_string());
  {
    auto extra = read_newer_fields(gp, graph_fields);
    g.metadata() = std::move(extra.metadata);
    g.set_ir_extra(std::move(extra.rest));
  }
  const std::string where = "graph '" + gp.name() + "'";
  const auto set_type = [&](value_id v, const onnx::ValueInfoProto& vi) -> Status {
    if (vi.has_type()) {
      EPSTACK_ASSIGN_OR_RETURN(g.value(v).type, type_from_proto(vi.type(), where + " value '" + vi.name() + "'"));
    }
    if (!vi.doc_string().empty()) g.value(v).doc_string = vi.doc_string();
    return {};
  };
  for (const auto& vi : gp.input()) {
    if (vi.name().empty()) return bad(where, "has a graph input without a name");
    EPSTACK_RETURN_IF_ERROR(set_type(g.add_input(vi.name()), vi));
  }
  for (auto& tp : *gp.mutable_initializer()) {
    if (tp.name().empty()) return bad(where, "has an initializer without a name");
    EPSTACK_ASSIGN_OR_RETURN(auto t, tensor_from_proto(tp, ext, where + " initializer"));
    const auto v = g.find_value(tp.name());
    const bool typed = v != no_id && g.value(v).type.is_defined();
    const auto id = g.add_initializer(tp.name(), std::move(t));
    if (!typed) g.value(id).type = type_info::tensor_of(g.value(id).initializer->type(), g.value(id).initializer->get_shape());
  }
  for (auto& sp : *gp.mutable_sparse_initializer()) {
    EPSTACK_ASSIGN_OR_RETURN(auto s, sparse_from_proto(sp, ext, where + " sparse initializer"));
    g.add_sparse_initializer(std::move(s));
  }
  std::vector<std::string> ins, outs;
  for (auto& np : *gp.mutable_node()) {
    node n;
    n.name = np.name();
    n.op_type = np.op_type();
    n.domain = np.domain();
    n.doc_string = np.doc_string();
    {
      auto extra = read_newer_fields(np, node_fields);
      n.overload = std::move(extra.overload);
      n.metadata = std::move(extra.metadata);
      n.ir_extra = std::move(extra.rest);
    }
    const std::string nwhere = where + " node '" + np.name() + "' (" + np.op_type() + ")";
    for (auto& ap : *np.mutable_attribute()) {
      EPSTACK_ASSIGN_OR_RETURN(auto a, attribute_from_proto(ap, ext, nwhere));
      n.attributes.append(std::move(a));
    }
    ins.assign(np.input().begin(), np.input().end());
    outs.assign(np.output().begin(), np.output().end());
    g.add_node(std::move(n), ins, outs);
  }
  for (const auto& vi : gp.output()) {
    if (vi.name().empty()) return bad(where, "has a graph output without a name");
    EPSTACK_RETURN_IF_ERROR(set_type(g.add_output(vi.name()), vi));
  }
  for (int i = 0; i < gp.value_info_size(); ++i) {
    const auto& vi = gp.value_info(i);
    if (vi.name().empty()) continue;
    const auto v = g.find_value(vi.name());
    if (v == no_id) continue;  // inferred information about a value nothing uses
    if (vi.has_type()) {
      EPSTACK_ASSIGN_OR_RETURN(auto t, type_from_proto(vi.type(), where + " value_info '" + vi.name() + "'"));
      if (!g.value(v).is_graph_input && !g.value(v).is_graph_output) g.value(v).type = std::move(t);
    }
    if (i < original_value_info) {
      g.value(v).in_value_info = true;
      if (!vi.doc_string().empty()) g.value(v).doc_string = vi.doc_string();
    }
  }
  for (const auto& qa : gp.quantization_annotation()) g.quantization_annotations().push_back(qa.SerializeAsString());
  return {};
}

// ---------------------------------------------------------------------------------------------------------------
// IR -> proto

Status tensor_to_proto(const tensor& t, onnx::TensorProto& tp, const external_writer& ext) {
  tp.set_name(t.name());
  tp.set_data_type(static_cast<std::int32_t>(t.type()));
  for (auto d : t.sizes()) tp.add_dims(d);
  if (t.type() == element_type::string) {
    const auto* s = t.typed<std::string>();
    for (std::size_t i = 0; i < t.element_count(); ++i) tp.add_string_data(s[i]);
    return {};
  }
  if (ext) {
    EPSTACK_ASSIGN_OR_RETURN(bool external, ext(t, tp));
    if (external) return {};
  }
  if (t.byte_size() != 0) tp.set_raw_data(t.data(), t.byte_size());
  return {};
}

void type_to_proto(const type_info& t, onnx::TypeProto& tp) {
  if (!t.denotation.empty()) tp.set_denotation(t.denotation);
  const auto write_shape = [&](onnx::TensorShapeProto* sp) {
    for (const auto& d : t.dims->dims()) {
      auto* dp = sp->add_dim();
      if (d.is_known()) dp->set_dim_value(d.value);
      else if (!d.param.empty()) dp->set_dim_param(d.param);
      if (!d.denotation.empty()) dp->set_denotation(d.denotation);
    }
  };
  switch (t.kind) {
    case type_kind::undefined: break;
    case type_kind::tensor: {
      auto* tt = tp.mutable_tensor_type();
      tt->set_elem_type(static_cast<std::int32_t>(t.elem));
      if (t.dims) write_shape(tt->mutable_shape());
      break;
    }
    case type_kind::sparse_tensor: {
      auto* tt = tp.mutable_sparse_tensor_type();
      tt->set_elem_type(static_cast<std::int32_t>(t.elem));
      if (t.dims) write_shape(tt->mutable_shape());
      break;
    }
    case type_kind::sequence: {
      auto* st = tp.mutable_sequence_type();
      if (!t.inner.empty()) type_to_proto(t.inner[0], *st->mutable_elem_type());
      break;
    }
    case type_kind::optional: {
      auto* ot = tp.mutable_optional_type();
      if (!t.inner.empty()) type_to_proto(t.inner[0], *ot->mutable_elem_type());
      break;
    }
    case type_kind::map: {
      auto* mt = tp.mutable_map_type();
      mt->set_key_type(static_cast<std::int32_t>(t.elem));
      if (!t.inner.empty()) type_to_proto(t.inner[0], *mt->mutable_value_type());
      break;
    }
    case type_kind::opaque: {
      auto* ot = tp.mutable_opaque_type();
      ot->set_domain(t.opaque_domain);
      ot->set_name(t.opaque_name);
      break;
    }
  }
}

namespace {

Status sparse_to_proto(const sparse_tensor& s, onnx::SparseTensorProto& sp, const external_writer& ext) {
  EPSTACK_RETURN_IF_ERROR(tensor_to_proto(s.values, *sp.mutable_values(), ext));
  if (!s.indices.empty()) EPSTACK_RETURN_IF_ERROR(tensor_to_proto(s.indices, *sp.mutable_indices(), ext));
  for (auto d : s.dims) sp.add_dims(d);
  return {};
}

}  // namespace

Status attribute_to_proto(const attribute& a, onnx::AttributeProto& ap, const external_writer& ext) {
  ap.set_name(a.name);
  if (!a.doc_string.empty()) ap.set_doc_string(a.doc_string);
  if (!a.ref_attr_name.empty()) ap.set_ref_attr_name(a.ref_attr_name);
  ap.set_type(static_cast<onnx::AttributeProto::AttributeType>(a.kind()));
  Status st;
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, float>) ap.set_f(v);
        else if constexpr (std::is_same_v<V, std::int64_t>) ap.set_i(v);
        else if constexpr (std::is_same_v<V, std::string>) ap.set_s(v);
        else if constexpr (std::is_same_v<V, tensor>) st = tensor_to_proto(v, *ap.mutable_t(), ext);
        else if constexpr (std::is_same_v<V, subgraph>) {
          if (v) st = graph_to_proto(*v, *ap.mutable_g(), ext);
        } else if constexpr (std::is_same_v<V, sparse_tensor>) st = sparse_to_proto(v, *ap.mutable_sparse_tensor(), ext);
        else if constexpr (std::is_same_v<V, type_info>) type_to_proto(v, *ap.mutable_tp());
        else if constexpr (std::is_same_v<V, std::vector<float>>) ap.mutable_floats()->Add(v.begin(), v.end());
        else if constexpr (std::is_same_v<V, std::vector<std::int64_t>>) ap.mutable_ints()->Add(v.begin(), v.end());
        else if constexpr (std::is_same_v<V, std::vector<std::string>>)
          for (const auto& s : v) ap.add_strings(s);
        else if constexpr (std::is_same_v<V, std::vector<tensor>>)
          for (const auto& t : v) {
            if (st.is_ok()) st = tensor_to_proto(t, *ap.add_tensors(), ext);
          }
        else if constexpr (std::is_same_v<V, std::vector<subgraph>>)
          for (const auto& g : v) {
            if (st.is_ok() && g) st = graph_to_proto(*g, *ap.add_graphs(), ext);
          }
        else if constexpr (std::is_same_v<V, std::vector<sparse_tensor>>)
          for (const auto& s : v) {
            if (st.is_ok()) st = sparse_to_proto(s, *ap.add_sparse_tensors(), ext);
          }
        else if constexpr (std::is_same_v<V, std::vector<type_info>>)
          for (const auto& t : v) type_to_proto(t, *ap.add_type_protos());
      },
      a.value);
  return st;
}

void value_info_to_proto(const value& v, onnx::ValueInfoProto& vp) {
  vp.set_name(v.name);
  if (v.type.is_defined()) type_to_proto(v.type, *vp.mutable_type());
  if (!v.doc_string.empty()) vp.set_doc_string(v.doc_string);
}



Status graph_to_proto(const graph& g, onnx::GraphProto& gp, const external_writer& ext) {
  gp.set_name(g.name());
  if (!g.doc_string().empty()) gp.set_doc_string(g.doc_string());
  for (value_id v : g.inputs()) value_info_to_proto(g.value(v), *gp.add_input());
  for (value_id v : g.outputs()) value_info_to_proto(g.value(v), *gp.add_output());
  for (value_id v : g.initializers()) EPSTACK_RETURN_IF_ERROR(tensor_to_proto(*g.value(v).initializer, *gp.add_initializer(), ext));
  for (const auto& s : g.sparse_initializers()) EPSTACK_RETURN_IF_ERROR(sparse_to_proto(s, *gp.add_sparse_initializer(), ext));
  for (node_id n = 0; n < g.node_count(); ++n) {
    const auto& nd = g.node(n);
    auto* np = gp.add_node();
    if (!nd.name.empty()) np->set_name(nd.name);
    np->set_op_type(nd.op_type);
    if (!nd.domain.empty()) np->set_domain(nd.domain);
    if (!nd.doc_string.empty()) np->set_doc_string(nd.doc_string);
    for (value_id v : nd.inputs) np->add_input(v == no_id ? std::string() : g.value(v).name);
    for (value_id v : nd.outputs) np->add_output(v == no_id ? std::string() : g.value(v).name);
    for (const auto& a : nd.attributes) EPSTACK_RETURN_IF_ERROR(attribute_to_proto(a, *np->add_attribute(), ext));
    write_newer_fields(*np, node_fields, nd.overload, nd.metadata, nd.ir_extra);
  }
  for (const auto& v : g.values())
    if (v.in_value_info) value_info_to_proto(v, *gp.add_value_info());
  for (const auto& qa : g.quantization_annotations())
    if (!gp.add_quantization_annotation()->ParseFromString(qa))
      return Status(errc::invalid_argument, "graph '" + g.name() + "': a quantization annotation does not parse");
  write_newer_fields(gp, graph_fields, {}, g.metadata(), g.ir_extra());
  return {};
}

}  // namespace epstack::detail
