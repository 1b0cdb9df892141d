// Writing the deployment model (deployment.hpp): the graphs as flatbuffers tables, each tensor once by content and
// each EP context binary in a 64-byte aligned data section, written under a temporary name and renamed.
#include <epstack/deploy/deployment.hpp>

#include <epstack/detail/cat.hpp>
#include <epstack/ep_context/attributes.hpp>
#include <epstack/ir/graph_algorithms.hpp>

#include "../core/atomic_file.hpp"
#include "../provider/sectioned_file.hpp"
#include "deploy_format.hpp"
#include "deploy_generated.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <system_error>
#include <unordered_map>

namespace epstack {

namespace {

using detail::cat;
namespace fb = deploy_fb;
using fbs_builder = flatbuffers::FlatBufferBuilder;

// A stable topological order of g's nodes: each node after the producers of what it reads (inputs and implicit
// inputs), and otherwise in the graph's own order. nullopt when the graph has a cycle.
std::optional<std::vector<node_id>> execution_order(const graph& g) {
  const std::size_t n = g.node_count();
  std::vector<std::size_t> waiting(n, 0);
  std::vector<std::vector<node_id>> users(n);
  for (node_id i = 0; i < n; ++i) {
    const auto& nd = g.node(i);
    const auto depend = [&](value_id v) {
      if (v == no_id) return;
      const node_id p = g.value(v).producer;
      if (p == no_id || p == i) return;
      ++waiting[i];
      users[p].push_back(i);
    };
    for (value_id v : nd.inputs) depend(v);
    for (value_id v : nd.implicit_inputs) depend(v);
  }
  std::priority_queue<node_id, std::vector<node_id>, std::greater<>> ready;
  for (node_id i = 0; i < n; ++i)
    if (waiting[i] == 0) ready.push(i);
  std::vector<node_id> order;
  order.reserve(n);
  while (!ready.empty()) {
    const node_id i = ready.top();
    ready.pop();
    order.push_back(i);
    for (node_id u : users[i])
      if (--waiting[u] == 0) ready.push(u);
  }
  if (order.size() != n) return std::nullopt;
  return order;
}

class writer {
 public:
  explicit writer(std::span<const std::string> providers) : providers_(providers.begin(), providers.end()) {}

  Result<std::vector<std::byte>> run(const model& m) {
    EPSTACK_RETURN_IF_ERROR(collect(m.graph, 0));
    std::vector<flatbuffers::Offset<fb::Graph>> graphs;
    for (const graph* g : graphs_) {
      EPSTACK_ASSIGN_OR_RETURN(auto off, graph_table(*g));
      graphs.push_back(off);
    }
    std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
    for (const auto& t : tensors_) tensors.push_back(tensor_table(t));
    std::vector<flatbuffers::Offset<fb::Context>> contexts;
    for (const auto& c : contexts_) contexts.push_back(fb::CreateContext(fbb_, c.offset, c.bytes.size()));
    std::vector<flatbuffers::Offset<fb::Opset>> opsets;
    for (const auto& o : m.opsets) opsets.push_back(fb::CreateOpset(fbb_, fbb_.CreateString(o.domain), o.version));
    const auto metadata = key_values(m.metadata);
    std::vector<flatbuffers::Offset<flatbuffers::String>> providers;
    for (const auto& p : providers_) providers.push_back(fbb_.CreateString(p));
    const auto root = fb::CreateModel(fbb_, m.ir_version, fbb_.CreateVector(opsets), fbb_.CreateString(m.producer_name),
                                      fbb_.CreateString(m.producer_version), metadata, fbb_.CreateVector(providers),
                                      fbb_.CreateVector(graphs), fbb_.CreateVector(tensors), fbb_.CreateVector(contexts));
    fb::FinishModelBuffer(fbb_, root);
    return detail::make_sectioned(deploy_magic, deployment_format_version, {fbb_.GetBufferPointer(), fbb_.GetSize()},
                                  data_size_, [&](std::byte* data) {
                                    for (const auto& t : tensors_)
                                      if (!t.t.bytes().empty()) std::memcpy(data + t.offset, t.t.data(), t.t.byte_size());
                                    for (const auto& c : contexts_)
                                      if (!c.bytes.empty()) std::memcpy(data + c.offset, c.bytes.data(), c.bytes.size());
                                  });
  }

 private:
  struct tensor_rec {
    tensor t;
    std::uint64_t offset = 0, hash = 0;
  };
  struct context_rec {
    std::span<const std::byte> bytes;
    std::uint64_t offset = 0;
  };

  // Every graph of the model gets its index, the main graph 0, bodies in the order they are found (depth first).
  Status collect(const graph& g, int depth) {
    if (depth > max_graph_depth)
      return Status(errc::invalid_argument, cat("deployment: graph '", g.name(), "' is nested more than ",
                                                std::to_string(max_graph_depth), " deep"));
    if (graph_index_.count(&g))
      return Status(errc::invalid_argument, cat("deployment: graph '", g.name(), "' is the body of two attributes"));
    graph_index_.emplace(&g, static_cast<std::uint32_t>(graphs_.size()));
    graphs_.push_back(&g);
    for (node_id n = 0; n < g.node_count(); ++n)
      EPSTACK_RETURN_IF_ERROR(g.node(n).attributes.for_each_subgraph([&](const graph& b) { return collect(b, depth + 1); }));
    return {};
  }

  // A tensor is stored once (the same name, type, shape and elements); the same bytes under another name or shape
  // share their place in the data section (weights several initializers hold).
  std::uint32_t add_tensor(const tensor& t) {
    const std::uint64_t h = detail::content_hash(t.bytes());
    std::optional<std::uint64_t> shared;
    const auto [lo, hi] = by_hash_.equal_range(h);
    for (auto it = lo; it != hi; ++it) {
      const auto& o = tensors_[it->second];
      if (o.t.name() == t.name() && o.t.same_content(t)) return it->second;
      const bool same_bytes = o.t.type() != element_type::string && t.type() != element_type::string &&
                              o.t.byte_size() == t.byte_size() && std::memcmp(o.t.data(), t.data(), t.byte_size()) == 0;
      if (same_bytes && !shared) shared = o.offset;
    }
    tensor_rec r{t, 0, h};
    if (t.type() != element_type::string && t.byte_size() > 0) {
      if (shared) {
        r.offset = *shared;
      } else {
        r.offset = data_size_;
        data_size_ = detail::align64(data_size_ + t.byte_size());
      }
    }
    tensors_.push_back(std::move(r));
    const auto i = static_cast<std::uint32_t>(tensors_.size() - 1);
    by_hash_.emplace(h, i);
    return i;
  }

  std::int32_t add_context(std::string_view bytes) {
    context_rec c{{reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, data_size_};
    data_size_ = detail::align64(data_size_ + bytes.size());
    contexts_.push_back(c);
    return static_cast<std::int32_t>(contexts_.size() - 1);
  }

  flatbuffers::Offset<fb::Bytes> bytes_table(std::string_view s) {
    return fb::CreateBytes(fbb_, fbb_.CreateVector(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()));
  }

  flatbuffers::Offset<fb::Tensor> tensor_table(const tensor_rec& r) {
    const tensor& t = r.t;
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Bytes>>> strings = 0;
    if (t.type() == element_type::string) {
      std::vector<flatbuffers::Offset<fb::Bytes>> items;
      const auto* s = reinterpret_cast<const std::string*>(t.data());
      for (std::size_t i = 0; i < t.element_count(); ++i) items.push_back(bytes_table(s[i]));
      strings = fbb_.CreateVector(items);
    }
    const std::vector<std::int64_t> shape(t.sizes().begin(), t.sizes().end());
    const std::uint64_t length = t.type() == element_type::string ? 0 : t.byte_size();
    return fb::CreateTensor(fbb_, fbb_.CreateString(t.name()), static_cast<std::int32_t>(t.type()), fbb_.CreateVector(shape),
                            r.offset, length, r.hash, strings);
  }

  flatbuffers::Offset<fb::Type> type_table(const type_info& t) {
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Dim>>> dims = 0;
    if (t.dims) {
      std::vector<flatbuffers::Offset<fb::Dim>> ds;
      for (const auto& d : t.dims->dims())
        ds.push_back(fb::CreateDim(fbb_, d.is_known() ? d.value : -1, d.param.empty() ? 0 : fbb_.CreateString(d.param)));
      dims = fbb_.CreateVector(ds);
    }
    std::vector<flatbuffers::Offset<fb::Type>> inner;
    for (const auto& i : t.inner) inner.push_back(type_table(i));
    return fb::CreateType(fbb_, static_cast<std::uint8_t>(t.kind), static_cast<std::int32_t>(t.elem), t.dims.has_value(), dims,
                          inner.empty() ? 0 : fbb_.CreateVector(inner),
                          t.opaque_domain.empty() ? 0 : fbb_.CreateString(t.opaque_domain),
                          t.opaque_name.empty() ? 0 : fbb_.CreateString(t.opaque_name));
  }

  flatbuffers::Offset<fb::SparseTensor> sparse_table(const sparse_tensor& s) {
    const auto values = add_tensor(s.values), indices = add_tensor(s.indices);
    return fb::CreateSparseTensor(fbb_, values, indices, fbb_.CreateVector(s.dims));
  }

  flatbuffers::Offset<fb::Attribute> attribute_table(const attribute& a) {
    float f = 0;
    std::int64_t i = 0;
    flatbuffers::Offset<flatbuffers::Vector<std::uint8_t>> s = 0;
    flatbuffers::Offset<flatbuffers::Vector<float>> floats = 0;
    flatbuffers::Offset<flatbuffers::Vector<std::int64_t>> ints = 0;
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Bytes>>> strings = 0;
    std::vector<std::uint32_t> tensors, graphs;
    std::vector<flatbuffers::Offset<fb::SparseTensor>> sparse;
    std::vector<flatbuffers::Offset<fb::Type>> types;
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, float>) f = v;
          else if constexpr (std::is_same_v<V, std::int64_t>) i = v;
          else if constexpr (std::is_same_v<V, std::string>) s = fbb_.CreateVector(reinterpret_cast<const std::uint8_t*>(v.data()), v.size());
          else if constexpr (std::is_same_v<V, tensor>) tensors.push_back(add_tensor(v));
          else if constexpr (std::is_same_v<V, subgraph>) graphs.push_back(graph_index_.at(v.get()));
          else if constexpr (std::is_same_v<V, sparse_tensor>) sparse.push_back(sparse_table(v));
          else if constexpr (std::is_same_v<V, type_info>) types.push_back(type_table(v));
          else if constexpr (std::is_same_v<V, std::vector<float>>) floats = fbb_.CreateVector(v);
          else if constexpr (std::is_same_v<V, std::vector<std::int64_t>>) ints = fbb_.CreateVector(v);
          else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
            std::vector<flatbuffers::Offset<fb::Bytes>> items;
            for (const auto& x : v) items.push_back(bytes_table(x));
            strings = fbb_.CreateVector(items);
          } else if constexpr (std::is_same_v<V, std::vector<tensor>>) {
            for (const auto& x : v) tensors.push_back(add_tensor(x));
          } else if constexpr (std::is_same_v<V, std::vector<subgraph>>) {
            for (const auto& x : v) graphs.push_back(graph_index_.at(x.get()));
          } else if constexpr (std::is_same_v<V, std::vector<sparse_tensor>>) {
            for (const auto& x : v) sparse.push_back(sparse_table(x));
          } else if constexpr (std::is_same_v<V, std::vector<type_info>>) {
            for (const auto& x : v) types.push_back(type_table(x));
          }
        },
        a.value);
    return fb::CreateAttribute(fbb_, fbb_.CreateString(a.name), static_cast<std::int32_t>(a.kind()), f, i, s, floats, ints,
                               strings, tensors.empty() ? 0 : fbb_.CreateVector(tensors),
                               graphs.empty() ? 0 : fbb_.CreateVector(graphs), sparse.empty() ? 0 : fbb_.CreateVector(sparse),
                               types.empty() ? 0 : fbb_.CreateVector(types));
  }

  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::KeyValue>>> key_values(
      const std::vector<std::pair<std::string, std::string>>& kvs) {
    std::vector<flatbuffers::Offset<fb::KeyValue>> r;
    for (const auto& [k, v] : kvs) r.push_back(fb::CreateKeyValue(fbb_, fbb_.CreateString(k), fbb_.CreateString(v)));
    return fbb_.CreateVector(r);
  }

  Result<std::uint32_t> provider_index(std::string_view key, const graph& g, node_id n) const {
    for (std::size_t p = 0; p < providers_.size(); ++p)
      if (providers_[p] == key) return static_cast<std::uint32_t>(p);
    return Status(errc::invalid_argument, cat("deployment: node ", g.describe(n), " of graph '", g.name(), "' runs on provider '",
                                              key, "', which is not one of the stack's"));
  }

  Result<flatbuffers::Offset<fb::Graph>> graph_table(const graph& g) {
    if (!g.sparse_initializers().empty())
      return Status(errc::not_implemented, cat("deployment: graph '", g.name(), "' has sparse initializers ('",
                                               g.sparse_initializers().front().values.name(),
                                               "'), which the deployment format does not hold: make them dense"));
    if (g.value_count() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
      return Status(errc::invalid_argument, cat("deployment: graph '", g.name(), "' has too many values"));
    std::vector<flatbuffers::Offset<fb::Value>> values;
    for (value_id v = 0; v < g.value_count(); ++v) {
      const auto& rec = g.value(v);
      const std::int32_t init = rec.initializer ? static_cast<std::int32_t>(add_tensor(*rec.initializer)) : -1;
      values.push_back(fb::CreateValue(fbb_, fbb_.CreateString(rec.name), type_table(rec.type), init));
    }
    const auto order = execution_order(g);
    if (!order) return Status(errc::invalid_argument, cat("deployment: graph '", g.name(), "' has a cycle"));
    std::vector<flatbuffers::Offset<fb::Node>> nodes;
    for (node_id n : *order) {
      const auto& nd = g.node(n);
      std::vector<std::int32_t> ins, outs;
      for (value_id v : nd.inputs) ins.push_back(v == no_id ? -1 : static_cast<std::int32_t>(v));
      for (value_id v : nd.outputs) outs.push_back(v == no_id ? -1 : static_cast<std::int32_t>(v));
      std::vector<std::uint32_t> implicit;
      for (value_id v : nd.implicit_inputs) implicit.push_back(static_cast<std::uint32_t>(v));
      std::string_view placed;
      for (const auto& [k, v] : nd.metadata)
        if (k == deployment_provider_key) placed = v;
      std::int32_t context = -1;
      std::vector<flatbuffers::Offset<fb::Attribute>> attrs;
      const bool is_context = nd.op_type == ep_context_op_type && nd.domain == ep_context_domain;
      for (const auto& a : nd.attributes) {
        if (is_context && a.name == "ep_cache_context") continue;  // the binary goes to the data section
        if (is_context && a.name == "source" && placed.empty())
          if (const auto* s = std::get_if<std::string>(&a.value)) placed = *s;
        attrs.push_back(attribute_table(a));
      }
      if (is_context) {
        const auto* payload = nd.attributes.find("ep_cache_context");
        const auto* bytes = payload ? std::get_if<std::string>(&payload->value) : nullptr;
        if (attr_mode(nd) != 1 || bytes == nullptr || bytes->empty())
          return Status(errc::invalid_argument,
                        cat("deployment: EPContext node ", g.describe(n), " does not embed its context (embed_mode 1): a "
                            "deployment model holds every compiled partition's binary"));
        context = add_context(*bytes);
      }
      if (placed.empty())
        return Status(errc::invalid_argument, cat("deployment: node ", g.describe(n), " of graph '", g.name(),
                                                  "' does not say which provider runs it (node metadata '",
                                                  deployment_provider_key, "')"));
      EPSTACK_ASSIGN_OR_RETURN(const auto provider, provider_index(placed, g, n));
      nodes.push_back(fb::CreateNode(fbb_, fbb_.CreateString(nd.name), fbb_.CreateString(nd.op_type),
                                     fbb_.CreateString(nd.domain), nd.since_version, fbb_.CreateVector(ins),
                                     fbb_.CreateVector(outs), implicit.empty() ? 0 : fbb_.CreateVector(implicit),
                                     fbb_.CreateVector(attrs), provider, context));
    }
    std::vector<std::uint32_t> inputs, outputs;
    for (value_id v : g.inputs()) inputs.push_back(static_cast<std::uint32_t>(v));
    for (value_id v : g.outputs()) outputs.push_back(static_cast<std::uint32_t>(v));
    return fb::CreateGraph(fbb_, fbb_.CreateString(g.name()), fbb_.CreateVector(values), fbb_.CreateVector(inputs),
                           fbb_.CreateVector(outputs), fbb_.CreateVector(nodes));
  }

  static std::int64_t attr_mode(const node& nd) {
    const auto* a = nd.attributes.find("embed_mode");
    const auto* v = a ? std::get_if<std::int64_t>(&a->value) : nullptr;
    return v ? *v : 1;  // the schema's default
  }

  fbs_builder fbb_{std::size_t{1} << 16};
  std::vector<std::string> providers_;
  std::vector<const graph*> graphs_;
  std::unordered_map<const graph*, std::uint32_t> graph_index_;
  std::vector<tensor_rec> tensors_;
  std::unordered_multimap<std::uint64_t, std::uint32_t> by_hash_;
  std::vector<context_rec> contexts_;
  std::uint64_t data_size_ = 0;
};

}  // namespace

Result<std::vector<std::byte>> serialize_deployment(const model& m, std::span<const std::string> providers) {
  // Control-flow nodes depend on what their bodies use of enclosing graphs: the execution order must say so.
  model resolved = m;
  resolve_implicit_inputs(resolved.graph);
  return writer(providers).run(resolved);
}

Status write_deployment(const model& m, std::span<const std::string> providers, const std::filesystem::path& path,
                        bool overwrite) {
  std::error_code ec;
  if (!overwrite && std::filesystem::exists(path, ec))
    return Status(errc::invalid_argument, cat("deployment model '", path.string(), "' exists already"));
  EPSTACK_ASSIGN_OR_RETURN(const auto bytes, serialize_deployment(m, providers));
  detail::atomic_file f(path);
  f.write(bytes.data(), bytes.size());
  return f.commit();
}

}  // namespace epstack
