// Reading the deployment model (deployment.hpp): every part of the file is checked before it is used, and the model
// is built with the graph's own API (which records values defined twice), reading its tensors in place.
#include <epstack/deploy/deployment.hpp>

#include <epstack/core/mapped_file.hpp>
#include <epstack/detail/cat.hpp>
#include <epstack/ep_context/attributes.hpp>
#include <epstack/ir/graph_algorithms.hpp>

#include "deploy_format.hpp"
#include "deploy_generated.h"

#include <cstring>
#include <limits>
#include <set>

namespace epstack {

namespace {

using detail::cat;
namespace fb = deploy_fb;

std::string str(const flatbuffers::String* s) { return s != nullptr ? s->str() : std::string(); }
std::string bytes_of(const fb::Bytes* b) {
  if (b == nullptr || b->data() == nullptr) return {};
  return {reinterpret_cast<const char*>(b->data()->data()), b->data()->size()};
}
// Vectors of 8-byte scalars are copied bytewise: the verifier checks a vector's bounds, not its elements' alignment.
template <class T>
std::vector<T> copy_of(const flatbuffers::Vector<T>* v) {
  std::vector<T> r;
  if (v == nullptr || v->size() == 0) return r;
  r.resize(v->size());
  std::memcpy(r.data(), v->Data(), r.size() * sizeof(T));
  return r;
}

class reader {
 public:
  reader(std::span<const std::byte> data, std::shared_ptr<const void> owner, bool file_backed, std::string what)
      : data_(data), owner_(std::move(owner)), file_backed_(file_backed), what_(std::move(what)) {}

  Status bad(const std::string& msg) const { return Status(errc::invalid_graph, cat(what_, ": ", msg)); }

  Result<deployment> run(const fb::Model& fm) {
    deployment d;
    d.origin = what_;
    d.owner = owner_;
    d.m.ir_version = fm.ir_version();
    d.m.producer_name = str(fm.producer_name());
    d.m.producer_version = str(fm.producer_version());
    if (fm.opsets() != nullptr)
      for (const auto* o : *fm.opsets()) d.m.opsets.push_back({str(o->domain()), o->version()});
    if (fm.metadata() != nullptr)
      for (const auto* kv : *fm.metadata()) d.m.metadata.emplace_back(str(kv->key()), str(kv->value()));
    if (fm.providers() != nullptr)
      for (const auto* p : *fm.providers()) d.providers.push_back(str(p));
    providers_ = &d.providers;
    if (fm.tensors() != nullptr) {
      tensors_.reserve(fm.tensors()->size());
      for (const auto* t : *fm.tensors()) {
        EPSTACK_ASSIGN_OR_RETURN(auto x, read_tensor(*t));
        tensors_.push_back(std::move(x));
      }
    }
    if (fm.contexts() != nullptr)
      for (const auto* c : *fm.contexts()) {
        const std::uint64_t off = c->offset(), len = c->length();
        if (off % detail::sectioned_alignment != 0 || off > data_.size() || len > data_.size() - off)
          return bad(cat("EP context binary ", std::to_string(contexts_.size()), " at ", std::to_string(off), "+",
                         std::to_string(len), " lies outside the ", std::to_string(data_.size()), "-byte data section"));
        contexts_.push_back(data_.subspan(off, len));
      }
    graphs_ = fm.graphs();
    if (graphs_ == nullptr || graphs_->size() == 0) return bad("it has no graph");
    used_.assign(graphs_->size(), false);
    used_[0] = true;
    EPSTACK_ASSIGN_OR_RETURN(d.m.graph, read_graph(0, 0));
    for (std::size_t i = 0; i < used_.size(); ++i)
      if (!used_[i]) return bad(cat("graph ", std::to_string(i), " is the body of no node"));
    d.contexts = std::move(context_of_node_);
    return d;
  }

 private:
  Result<tensor> read_tensor(const fb::Tensor& t) {
    const std::string name = str(t.name());
    const auto e = static_cast<element_type>(t.elem());
    if (!is_valid(e)) return bad(cat("tensor '", name, "' has unknown element type ", std::to_string(t.elem())));
    const auto sizes = copy_of(t.shape());
    if (sizes.size() > 64) return bad(cat("tensor '", name, "' has rank ", std::to_string(sizes.size())));
    const auto count = element_count(sizes);
    if (!count) return bad(cat("tensor '", name, "' has an invalid shape"));
    const auto n = static_cast<std::uint64_t>(*count);
    if (e == element_type::string) {
      const auto* items = t.strings();
      if ((items == nullptr ? 0 : items->size()) != n || t.length() != 0)
        return bad(cat("string tensor '", name, "' holds ", std::to_string(items == nullptr ? 0 : items->size()),
                       " strings for ", std::to_string(n), " elements"));
      tensor x(e, sizes);
      auto* s = reinterpret_cast<std::string*>(x.mutable_data());
      for (std::uint64_t i = 0; i < n; ++i) s[i] = bytes_of(items->Get(static_cast<flatbuffers::uoffset_t>(i)));
      x.set_name(name);
      return x;
    }
    const std::uint64_t off = t.offset(), len = t.length();
    if (n > (std::uint64_t{1} << 62) || storage_bytes(e, static_cast<std::size_t>(n)) != len)
      return bad(cat("tensor '", name, "' has ", std::to_string(len), " bytes for ", std::to_string(n), " elements of ",
                     to_string(e)));
    if (off % detail::sectioned_alignment != 0 || off > data_.size() || len > data_.size() - off)
      return bad(cat("tensor '", name, "' at ", std::to_string(off), "+", std::to_string(len), " lies outside the ",
                     std::to_string(data_.size()), "-byte data section"));
    const auto bytes = data_.subspan(off, len);
    if (const auto h = detail::content_hash(bytes); h != t.xxh3_64())
      return bad(cat("corrupted: tensor '", name, "' (", std::to_string(len), " bytes at offset ", std::to_string(off),
                     " of the data section) hashes to ", detail::hex64(h), ", expected ", detail::hex64(t.xxh3_64())));
    auto* p = const_cast<std::byte*>(bytes.data());
    tensor x = file_backed_ ? tensor::borrow_file(e, sizes, p, owner_) : tensor::borrow(e, sizes, p, owner_);
    x.set_name(name);
    return x;
  }

  Result<tensor> tensor_at(std::uint32_t i, std::string_view where) const {
    if (i >= tensors_.size())
      return bad(cat(where, " names tensor ", std::to_string(i), " of ", std::to_string(tensors_.size())));
    return tensors_[i];
  }

  Result<type_info> read_type(const fb::Type* t, std::string_view where, int depth = 0) const {
    type_info r;
    if (t == nullptr) return r;
    if (depth > 16) return bad(cat(where, ": its type is nested too deep"));
    if (t->kind() > static_cast<std::uint8_t>(type_kind::opaque))
      return bad(cat(where, ": unknown type kind ", std::to_string(t->kind())));
    r.kind = static_cast<type_kind>(t->kind());
    r.elem = static_cast<element_type>(t->elem());
    if (t->elem() != 0 && !is_valid(r.elem)) return bad(cat(where, ": unknown element type ", std::to_string(t->elem())));
    if (t->ranked()) {
      shape s;
      if (t->dims() != nullptr) {
        if (t->dims()->size() > 64) return bad(cat(where, ": rank ", std::to_string(t->dims()->size())));
        for (const auto* d : *t->dims()) {
          dimension x;
          if (d->value() >= 0) x.value = d->value();
          x.param = str(d->param());
          s.push_back(std::move(x));
        }
      }
      r.dims = std::move(s);
    }
    if (t->inner() != nullptr)
      for (const auto* i : *t->inner()) {
        EPSTACK_ASSIGN_OR_RETURN(auto x, read_type(i, where, depth + 1));
        r.inner.push_back(std::move(x));
      }
    if ((r.kind == type_kind::sequence || r.kind == type_kind::optional || r.kind == type_kind::map) && r.inner.size() != 1)
      return bad(cat(where, ": a ", r.to_string(), " type needs one inner type, found ", std::to_string(r.inner.size())));
    r.opaque_domain = str(t->opaque_domain());
    r.opaque_name = str(t->opaque_name());
    return r;
  }

  Result<attribute> read_attribute(const fb::Attribute& fa, std::string_view where, int depth) {
    attribute a;
    a.name = str(fa.name());
    const std::string at = cat(where, " attribute '", a.name, "'");
    const auto kind = static_cast<attribute_kind>(fa.kind());
    const auto count = [](const auto* v) -> std::size_t { return v == nullptr ? 0 : v->size(); };
    const auto one = [&](const auto* v, const char* what) -> Status {
      if (count(v) != 1) return bad(cat(at, " of kind ", to_string(kind), " holds ", std::to_string(count(v)), " ", what));
      return {};
    };
    const auto read_sparse = [&](const fb::SparseTensor& s) -> Result<sparse_tensor> {
      sparse_tensor x;
      EPSTACK_ASSIGN_OR_RETURN(x.values, tensor_at(s.values(), at));
      EPSTACK_ASSIGN_OR_RETURN(x.indices, tensor_at(s.indices(), at));
      x.dims = copy_of(s.dims());
      return x;
    };
    switch (kind) {
      case attribute_kind::float_: a.value = fa.f(); break;
      case attribute_kind::int_: a.value = fa.i(); break;
      case attribute_kind::string:
        a.value = fa.s() == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(fa.s()->data()), fa.s()->size());
        break;
      case attribute_kind::floats: a.value = copy_of(fa.floats()); break;
      case attribute_kind::ints: a.value = copy_of(fa.ints()); break;
      case attribute_kind::strings: {
        std::vector<std::string> v;
        if (fa.strings() != nullptr)
          for (const auto* b : *fa.strings()) v.push_back(bytes_of(b));
        a.value = std::move(v);
        break;
      }
      case attribute_kind::tensor: {
        EPSTACK_RETURN_IF_ERROR(one(fa.tensors(), "tensors"));
        EPSTACK_ASSIGN_OR_RETURN(auto t, tensor_at(fa.tensors()->Get(0), at));
        a.value = std::move(t);
        break;
      }
      case attribute_kind::tensors: {
        std::vector<tensor> v;
        if (fa.tensors() != nullptr)
          for (auto i : *fa.tensors()) {
            EPSTACK_ASSIGN_OR_RETURN(auto t, tensor_at(i, at));
            v.push_back(std::move(t));
          }
        a.value = std::move(v);
        break;
      }
      case attribute_kind::graph: {
        EPSTACK_RETURN_IF_ERROR(one(fa.graphs(), "graphs"));
        EPSTACK_ASSIGN_OR_RETURN(auto g, body(fa.graphs()->Get(0), at, depth));
        a.value = make_subgraph(std::move(g));
        break;
      }
      case attribute_kind::graphs: {
        std::vector<subgraph> v;
        if (fa.graphs() != nullptr)
          for (auto i : *fa.graphs()) {
            EPSTACK_ASSIGN_OR_RETURN(auto g, body(i, at, depth));
            v.push_back(make_subgraph(std::move(g)));
          }
        a.value = std::move(v);
        break;
      }
      case attribute_kind::sparse_tensor: {
        EPSTACK_RETURN_IF_ERROR(one(fa.sparse(), "sparse tensors"));
        EPSTACK_ASSIGN_OR_RETURN(auto s, read_sparse(*fa.sparse()->Get(0)));
        a.value = std::move(s);
        break;
      }
      case attribute_kind::sparse_tensors: {
        std::vector<sparse_tensor> v;
        if (fa.sparse() != nullptr)
          for (const auto* s : *fa.sparse()) {
            EPSTACK_ASSIGN_OR_RETURN(auto x, read_sparse(*s));
            v.push_back(std::move(x));
          }
        a.value = std::move(v);
        break;
      }
      case attribute_kind::type_proto: {
        EPSTACK_RETURN_IF_ERROR(one(fa.types(), "types"));
        EPSTACK_ASSIGN_OR_RETURN(auto t, read_type(fa.types()->Get(0), at));
        a.value = std::move(t);
        break;
      }
      case attribute_kind::type_protos: {
        std::vector<type_info> v;
        if (fa.types() != nullptr)
          for (const auto* t : *fa.types()) {
            EPSTACK_ASSIGN_OR_RETURN(auto x, read_type(t, at));
            v.push_back(std::move(x));
          }
        a.value = std::move(v);
        break;
      }
      default: return bad(cat(at, " has unknown kind ", std::to_string(fa.kind())));
    }
    return a;
  }

  // Graph i as the body of an attribute: each graph is the body of one attribute, and never the main graph.
  Result<graph> body(std::uint32_t i, std::string_view where, int depth) {
    if (i >= used_.size()) return bad(cat(where, " names graph ", std::to_string(i), " of ", std::to_string(used_.size())));
    if (used_[i]) return bad(cat(where, " names graph ", std::to_string(i), ", which is the main graph or another body"));
    used_[i] = true;
    return read_graph(i, depth + 1);
  }

  Result<graph> read_graph(std::uint32_t index, int depth) {
    if (depth > max_graph_depth)
      return bad(cat("graph ", std::to_string(index), " is nested more than ", std::to_string(max_graph_depth), " deep"));
    const fb::Graph& fg = *graphs_->Get(index);
    graph g(str(fg.name()));
    const std::string gname = cat("graph '", g.name(), "'");
    const std::size_t nv = fg.values() == nullptr ? 0 : fg.values()->size();
    // Every value first, in order, so that its id is its index in the file.
    for (std::size_t v = 0; v < nv; ++v) {
      const auto* fv = fg.values()->Get(static_cast<flatbuffers::uoffset_t>(v));
      const std::string name = str(fv->name());
      if (name.empty()) return bad(cat(gname, ": value ", std::to_string(v), " has no name"));
      if (g.find_value(name) != no_id) return bad(cat(gname, ": two values are named '", name, "'"));
      g.get_or_add_value(name);
      EPSTACK_ASSIGN_OR_RETURN(g.value(v).type, read_type(fv->type(), cat(gname, " value '", name, "'")));
    }
    const auto value_at = [&](std::int64_t v, std::string_view where) -> Result<value_id> {
      if (v < 0 || static_cast<std::uint64_t>(v) >= nv)
        return bad(cat(gname, ": ", where, " names value ", std::to_string(v), " of ", std::to_string(nv)));
      return static_cast<value_id>(v);
    };
    if (fg.inputs() != nullptr)
      for (auto i : *fg.inputs()) {
        EPSTACK_ASSIGN_OR_RETURN(const auto v, value_at(i, "an input"));
        g.add_input(g.value(v).name);
      }
    for (std::size_t v = 0; v < nv; ++v) {
      const auto init = fg.values()->Get(static_cast<flatbuffers::uoffset_t>(v))->initializer();
      if (init < 0) continue;
      const std::string at = cat(gname, " initializer '", g.value(v).name, "'");
      EPSTACK_ASSIGN_OR_RETURN(auto t, tensor_at(static_cast<std::uint32_t>(init), at));
      // The declared type is the tensor's own (an input with a default keeps its declared shape, of the same rank).
      auto& decl = g.value(v).type;
      const bool input = g.value(v).is_graph_input;
      if (decl.kind != type_kind::tensor || decl.elem != t.type() || (decl.dims && decl.dims->rank() != t.rank()))
        return bad(cat(at, " is declared ", decl.to_string(), " but holds ", to_string(t.type()), t.get_shape().to_string()));
      if (!input) decl = type_info::tensor_of(t.type(), t.get_shape());
      g.add_initializer(g.value(v).name, std::move(t));
    }
    const std::size_t nn = fg.nodes() == nullptr ? 0 : fg.nodes()->size();
    for (std::size_t k = 0; k < nn; ++k) {
      const auto* fnode = fg.nodes()->Get(static_cast<flatbuffers::uoffset_t>(k));
      node nd;
      nd.name = str(fnode->name());
      nd.op_type = str(fnode->op_type());
      nd.domain = str(fnode->domain());
      nd.since_version = fnode->since_version();
      const std::string where = cat("node ", std::to_string(k), " '", nd.name, "' (", nd.op_type, ")");
      if (nd.op_type.empty()) return bad(cat(gname, ": ", where, " has no operator"));
      if (fnode->provider() >= providers_->size())
        return bad(cat(gname, ": ", where, " names provider ", std::to_string(fnode->provider()), " of ",
                       std::to_string(providers_->size())));
      nd.metadata.emplace_back(std::string(deployment_provider_key), (*providers_)[fnode->provider()]);
      if (fnode->attributes() != nullptr)
        for (const auto* fa : *fnode->attributes()) {
          EPSTACK_ASSIGN_OR_RETURN(auto a, read_attribute(*fa, cat(gname, ": ", where), depth));
          if (nd.attributes.contains(a.name)) return bad(cat(gname, ": ", where, " has two attributes named '", a.name, "'"));
          nd.attributes.append(std::move(a));
        }
      const bool is_context = nd.op_type == ep_context_op_type && nd.domain == ep_context_domain;
      if (is_context != (fnode->context() >= 0))
        return bad(cat(gname, ": ", where, is_context ? " is an EPContext node without a context binary"
                                                      : " has a context binary but is not an EPContext node"));
      if (is_context) {
        if (static_cast<std::uint64_t>(fnode->context()) >= contexts_.size())
          return bad(cat(gname, ": ", where, " names EP context binary ", std::to_string(fnode->context()), " of ",
                         std::to_string(contexts_.size())));
        if (!context_of_node_.emplace(nd.name, contexts_[static_cast<std::size_t>(fnode->context())]).second)
          return bad(cat(gname, ": two EPContext nodes are named '", nd.name, "'"));
      }
      std::vector<std::string> ins, outs;
      const auto names = [&](const flatbuffers::Vector<std::int32_t>* ids, std::vector<std::string>& out, const char* what) -> Status {
        if (ids == nullptr) return {};
        for (auto i : *ids) {
          if (i == -1) {
            out.emplace_back();
            continue;
          }
          EPSTACK_ASSIGN_OR_RETURN(const auto v, value_at(i, cat(where, " ", what)));
          out.push_back(g.value(v).name);
        }
        return {};
      };
      EPSTACK_RETURN_IF_ERROR(names(fnode->inputs(), ins, "input"));
      EPSTACK_RETURN_IF_ERROR(names(fnode->outputs(), outs, "output"));
      const node_id n = g.add_node(std::move(nd), ins, outs);
      if (!g.problems().empty()) return bad(cat(gname, ": ", g.problems().front()));
      if (fnode->implicit_inputs() != nullptr)
        for (auto i : *fnode->implicit_inputs()) {
          EPSTACK_ASSIGN_OR_RETURN(const auto v, value_at(i, cat(where, " implicit input")));
          g.add_implicit_input(n, g.value(v).name);
        }
    }
    // What a body uses of enclosing graphs is its node's implicit input, whatever the file says (the executor keeps
    // those values alive for the node); then the execution order: what a node reads is defined before it (here, or
    // in an enclosing graph for a body).
    resolve_implicit_inputs(g);
    for (node_id n = 0; n < g.node_count(); ++n) {
      const std::string where = cat("node ", std::to_string(n), " ", g.describe(n));
      for (value_id v : g.node(n).inputs)
        if (v != no_id) EPSTACK_RETURN_IF_ERROR(defined_before(g, v, n, depth, gname, where));
      for (value_id v : g.node(n).implicit_inputs) EPSTACK_RETURN_IF_ERROR(defined_before(g, v, n, depth, gname, where));
    }
    if (fg.outputs() != nullptr)
      for (auto i : *fg.outputs()) {
        EPSTACK_ASSIGN_OR_RETURN(const auto v, value_at(i, "an output"));
        if (depth == 0 && !g.is_defined_here(v))
          return bad(cat(gname, ": output '", g.value(v).name, "' is defined by nothing"));
        g.add_output(g.value(v).name);
      }
    if (!g.problems().empty()) return bad(cat(gname, ": ", g.problems().front()));
    return g;
  }

  // Value v, read by node n, is a graph input, an initializer or an earlier node's output; in a body it may also be
  // a value of an enclosing graph (defined nowhere here), which the executor resolves.
  Status defined_before(const graph& g, value_id v, node_id n, int depth, const std::string& gname,
                        const std::string& where) const {
    const auto& rec = g.value(v);
    if (rec.is_graph_input || rec.initializer || (rec.producer != no_id && rec.producer < n)) return {};
    if (rec.producer == no_id && depth > 0) return {};
    return bad(cat(gname, ": ", where, " reads '", rec.name, "', which ",
                   rec.producer == no_id ? "nothing defines" : "a later node defines (nodes must be in execution order)"));
  }

  std::span<const std::byte> data_;
  std::shared_ptr<const void> owner_;
  bool file_backed_ = false;
  std::string what_;
  const std::vector<std::string>* providers_ = nullptr;
  std::vector<tensor> tensors_;
  std::vector<std::span<const std::byte>> contexts_;
  const flatbuffers::Vector<flatbuffers::Offset<fb::Graph>>* graphs_ = nullptr;
  std::vector<bool> used_;
  std::map<std::string, std::span<const std::byte>, std::less<>> context_of_node_;
};

Result<deployment> read_verified(std::span<const std::byte> bytes, std::shared_ptr<const void> owner, std::string what,
                                 bool file_backed) {
  if (reinterpret_cast<std::uintptr_t>(bytes.data()) % detail::sectioned_alignment != 0)
    return Status(errc::invalid_argument, cat(what, ": its bytes are not 64-byte aligned in memory (tensors are read in place)"));
  EPSTACK_ASSIGN_OR_RETURN(const auto sections,
                           detail::open_sectioned(bytes, deploy_magic, what, "an epstack deployment model",
                                                  [](std::uint32_t v) { return v == deployment_format_version; },
                                                  std::to_string(deployment_format_version)));
  const auto* table = reinterpret_cast<const std::uint8_t*>(sections.table.data());
  // Depth 64 bounds nested types; the table count the verifier allows grows with the table (it bounds work, not size).
  flatbuffers::Verifier verifier(table, sections.table.size(), 64,
                                 static_cast<flatbuffers::uoffset_t>(std::min<std::size_t>(sections.table.size(), 1u << 30)));
  if (sections.table.size() < 8 || !deploy_fb::VerifyModelBuffer(verifier))
    return Status(errc::invalid_graph, cat(what, ": its table of graphs and tensors fails the flatbuffers verifier"));
  reader r(sections.data, std::move(owner), file_backed, std::move(what));
  return r.run(*deploy_fb::GetModel(table));
}

}  // namespace

bool is_deployment(std::span<const std::byte> bytes) noexcept {
  return bytes.size() >= deploy_magic.size() && std::memcmp(bytes.data(), deploy_magic.data(), deploy_magic.size()) == 0;
}

bool is_deployment_file(const std::filesystem::path& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  std::array<std::byte, 8> head{};
  const bool whole = std::fread(head.data(), 1, head.size(), f) == head.size();
  std::fclose(f);
  return whole && is_deployment(head);
}

Result<deployment> open_deployment(const std::filesystem::path& path) {
  EPSTACK_ASSIGN_OR_RETURN(auto f, mapped_file::open(path));
  const auto bytes = f->bytes();
  return read_verified(bytes, std::shared_ptr<const void>(f), cat("deployment model '", path.string(), "'"), true);
}

Result<deployment> read_deployment(std::span<const std::byte> bytes, std::shared_ptr<const void> owner, std::string what) {
  return read_verified(bytes, std::move(owner), std::move(what), false);
}

}  // namespace epstack
