// The oneDNN provider's EP context record: a compiled partition's operations (after lowering and fusion: nothing is
// optimised again on restore), its constants as tensors of the context binary, and the weights of its compile-time
// plan in the layout oneDNN chose (nothing is reordered again on restore). Everything read back is checked.
#include "ir.hpp"

#include <epstack/detail/cat.hpp>

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <limits>
#include <type_traits>

namespace epstack::dnnl_ep {

using detail::cat;

namespace {

constexpr char magic[8] = {'E', 'P', 'S', 'D', 'N', 'N', 'L', '2'};

class writer {
 public:
  template <class T>
    requires std::is_trivially_copyable_v<T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void str(const std::string& s) {
    put(static_cast<std::uint32_t>(s.size()));
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    out_.insert(out_.end(), p, p + s.size());
  }
  template <class T>
  void vec(const std::vector<T>& v) {
    put(static_cast<std::uint32_t>(v.size()));
    for (const auto& x : v) put(x);
  }
  std::vector<std::byte>& bytes() { return out_; }

 private:
  std::vector<std::byte> out_;
};

class reader {
 public:
  explicit reader(std::span<const std::byte> in) : in_(in) {}
  template <class T>
    requires std::is_trivially_copyable_v<T>
  T get() {
    T v{};
    if (!ok_ || in_.size() - at_ < sizeof(T)) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::string str() {
    const auto n = get<std::uint32_t>();
    if (!ok_ || in_.size() - at_ < n) {
      ok_ = false;
      return {};
    }
    std::string s(reinterpret_cast<const char*>(in_.data() + at_), n);
    at_ += n;
    return s;
  }
  template <class T>
  std::vector<T> vec() {
    const auto n = get<std::uint32_t>();
    if (!ok_ || (in_.size() - at_) / sizeof(T) < n) {
      ok_ = false;
      return {};
    }
    std::vector<T> v(n);
    for (auto& x : v) x = get<T>();
    return v;
  }
  [[nodiscard]] bool ok() const noexcept { return ok_; }
  [[nodiscard]] bool at_end() const noexcept { return at_ == in_.size(); }

 private:
  std::span<const std::byte> in_;
  std::size_t at_ = 0;
  bool ok_ = true;
};

// Tensors of the record: -1 for an empty tensor; -2 - k for a constant stored only as laid weight k (its dims
// follow); else an index into the record's tensor list.
struct tensor_table {
  ep_context_builder* b = nullptr;
  ep_context_record* rec = nullptr;
  const std::vector<laid_weight>* laid = nullptr;
  std::unordered_map<const void*, std::size_t> laid_of;  ///< source constant's data -> laid weight
  void add(writer& w, const std::string& name, const tensor& t) {
    if (t.empty()) return w.put(std::int32_t{-1});
    if (auto it = laid_of.find(t.data()); it != laid_of.end() && t.type() == element_type::float32 &&
                                          (*laid)[it->second].from.get_size() == t.byte_size()) {
      w.put(static_cast<std::int32_t>(-2 - static_cast<std::int64_t>(it->second)));
      return w.vec(std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end()));
    }
    const auto idx = b->add_tensor(name, t.type(), t.sizes(),
                                   std::span<const std::byte>(static_cast<const std::byte*>(t.data()), t.byte_size()));
    rec->tensors.push_back(idx);
    w.put(static_cast<std::int32_t>(rec->tensors.size() - 1));
  }
};

void put_op(writer& w, const ir_op& op, tensor_table& tt, std::size_t index) {
  w.put(static_cast<std::uint8_t>(op.kind));
  w.put(static_cast<std::uint32_t>(op.nodes.size()));
  for (const auto& n : op.nodes) w.str(n);
  w.vec(op.in);
  w.put(op.out);
  w.vec(op.outs);
  w.str(op.host_op);
  w.vec(op.sizes);
  w.put(op.start);
  w.put(op.end);
  w.vec(op.strides);
  w.vec(op.dilations);
  w.vec(op.pads);
  w.vec(op.kernel);
  w.vec(op.output_padding);
  w.vec(op.output_shape);
  w.str(op.auto_pad);
  w.put(op.group);
  w.put(static_cast<std::uint8_t>(op.ceil_mode));
  const std::string base = cat("op", std::to_string(index), ".");
  tt.add(w, base + "weights", op.weights);
  tt.add(w, base + "bias", op.bias);
  tt.add(w, base + "mean", op.mean);
  tt.add(w, base + "variance", op.variance);
  w.put(static_cast<std::int32_t>(op.alg));
  w.put(op.alpha);
  w.put(op.beta);
  w.put(op.epsilon);
  w.put(static_cast<std::uint8_t>(op.trans_a));
  w.put(static_cast<std::uint8_t>(op.trans_b));
  w.put(op.scale);
  w.put(op.axis);
  w.vec(op.perm);
  w.put(static_cast<std::uint8_t>(op.form));
  w.vec(op.axes);
  w.put(static_cast<std::uint8_t>(op.allowzero));
  w.put(static_cast<std::uint32_t>(op.posts.size()));
  for (const auto& p : op.posts) {
    w.put(static_cast<std::uint8_t>(p.binary));
    w.put(static_cast<std::int32_t>(p.alg));
    w.put(p.alpha);
    w.put(p.beta);
    w.put(p.src1);
  }
}

// The enum fields of a layout read from a file, as integers: a damaged value is not a valid enumerator, and
// loading it as the enum type would be undefined behaviour.
template <class E>
int enum_bits(const E& field) {
  static_assert(sizeof(E) == sizeof(int));
  int v = 0;
  std::memcpy(&v, &field, sizeof v);
  return v;
}

// A weight layout read from a context: a dense f32 blocked layout with sane blocks, strides and sizes, so that
// nothing oneDNN computes from it (sizes, offsets) divides by zero, overflows or reaches past its bytes.
bool valid_weight_layout(const dnnl_memory_desc_t& md) {
  constexpr std::int64_t limit = std::int64_t{1} << 40;
  if (md.ndims < 1 || md.ndims > DNNL_MAX_NDIMS || enum_bits(md.data_type) != dnnl_f32 || enum_bits(md.format_kind) != dnnl_blocked ||
      md.offset0 != 0 || md.extra.flags != 0)
    return false;
  const auto& b = md.format_desc.blocking;
  if (b.inner_nblks < 0 || b.inner_nblks > DNNL_MAX_NDIMS) return false;
  std::int64_t block[DNNL_MAX_NDIMS], inner = 1;
  std::fill(block, block + DNNL_MAX_NDIMS, std::int64_t{1});
  for (int i = 0; i < b.inner_nblks; ++i) {
    if (b.inner_blks[i] < 1 || b.inner_blks[i] > 1024 || b.inner_idxs[i] < 0 || b.inner_idxs[i] >= md.ndims) return false;
    block[b.inner_idxs[i]] *= b.inner_blks[i];
    inner *= b.inner_blks[i];
    if (inner > limit) return false;
  }
  for (int k = 0; k < md.ndims; ++k)
    if (md.dims[k] < 1 || md.dims[k] > limit || md.padded_dims[k] < md.dims[k] || md.padded_dims[k] > limit ||
        md.padded_dims[k] % block[k] != 0 || md.padded_offsets[k] != 0 || b.strides[k] < 0 || b.strides[k] > limit)
      return false;
  return true;
}

}  // namespace

Result<ep_context_record> encode_context(const ir& r, const std::vector<std::int64_t>* key,
                                         const std::vector<laid_weight>* laid, ep_context_builder& b) {
  ep_context_record rec;
  tensor_table tt{&b, &rec, laid, {}};
  writer w;
  for (char c : magic) w.put(c);
  w.str(r.name);
  // The compile-time plan's weights in their final layout, first: constants that one of them holds whole are stored
  // only in that form (each weight once in the binary).
  // A weightless context stores no laid-out weights: they are laid out again from the source model's at load.
  const bool has_plan = key != nullptr && laid != nullptr && !b.weightless();
  w.put(static_cast<std::uint8_t>(has_plan));
  if (has_plan) {
    w.vec(*key);
    w.put(static_cast<std::uint32_t>(laid->size()));
    for (std::size_t i = 0; i < laid->size(); ++i) {
      const auto& lw = (*laid)[i];
      w.put(lw.md.data);  // dnnl_memory_desc_t: plain data, read back only by the same oneDNN version
      const bool whole = lw.source != nullptr && lw.from.get_size() != 0;
      w.put(static_cast<std::uint8_t>(whole));
      if (whole) {
        w.put(lw.from.data);
        tt.laid_of.emplace(lw.source, i);
      }
      const auto n = static_cast<std::int64_t>(lw.md.get_size());
      const std::int64_t shape[1] = {n};
      const auto idx = b.add_tensor(cat("laid", std::to_string(i)), element_type::uint8, shape,
                                    std::span<const std::byte>(static_cast<const std::byte*>(lw.data.get()),
                                                               static_cast<std::size_t>(n)));
      rec.tensors.push_back(idx);
      w.put(static_cast<std::int32_t>(rec.tensors.size() - 1));
    }
  }
  // Values; partition inputs that are constants leave the boundary (the EPContext node does not take them).
  std::vector<int> input_pos(r.values.size(), -1);
  std::vector<int> runtime_inputs;
  for (int v : r.inputs)
    if (!r.values[static_cast<std::size_t>(v)].constant) {
      input_pos[static_cast<std::size_t>(v)] = static_cast<int>(runtime_inputs.size());
      runtime_inputs.push_back(v);
    }
  w.put(static_cast<std::uint32_t>(r.values.size()));
  for (std::size_t i = 0; i < r.values.size(); ++i) {
    const auto& v = r.values[i];
    w.str(v.name);
    if (v.constant) tt.add(w, v.name, *v.constant);
    else w.put(std::int32_t{-1});
    w.put(static_cast<std::int32_t>(input_pos[i]));
    w.vec(v.outputs);
  }
  w.put(static_cast<std::uint32_t>(r.ops.size()));
  for (std::size_t i = 0; i < r.ops.size(); ++i) put_op(w, r.ops[i], tt, i);
  w.vec(runtime_inputs);
  w.vec(r.outputs);
  rec.payload = std::move(w.bytes());
  return rec;
}

Result<decoded_context> decode_context(const ep_context_restore& rr) {
  const auto bad = [&](const std::string& why) {
    return Status(errc::invalid_graph, cat("oneDNN context of graph '", rr.graph->name, "': ", why));
  };
  reader in(rr.graph->payload);
  for (char c : magic)
    if (in.get<char>() != c) return bad("not a oneDNN provider record");
  const auto tensors = rr.tensors();
  const std::shared_ptr<const void> owner = rr.binary;
  decoded_context d;
  ir& r = d.r;
  r.name = in.str();
  // The compile-time plan's weights in place: used only where a primitive asks for exactly their layout and size.
  const auto read_md = [&](dn::memory::desc& out, bool plain) -> bool {
    const auto md = in.get<dnnl_memory_desc_t>();
    if (!in.ok()) return false;
    // Winograd weights (an opaque layout) are only ever compared with what a primitive asks for, never read by a
    // reorder; a blocked layout is checked through.
    if (!plain && enum_bits(md.format_kind) == dnnl_format_kind_wino && md.ndims >= 1 && md.ndims <= DNNL_MAX_NDIMS &&
        enum_bits(md.data_type) == dnnl_f32) {
      out = dn::memory::desc(md);
      return true;
    }
    if (!valid_weight_layout(md) || (plain && md.format_desc.blocking.inner_nblks != 0)) return false;
    out = dn::memory::desc(md);
    return true;
  };
  std::vector<bool> whole;
  if (in.get<std::uint8_t>() != 0) {
    d.key = in.vec<std::int64_t>();
    const auto nl = in.get<std::uint32_t>();
    if (!in.ok() || nl > tensors.size()) return bad("truncated weight list");
    for (std::uint32_t i = 0; i < nl; ++i) {
      laid_weight lw;
      if (!read_md(lw.md, false)) return bad("weight " + std::to_string(i) + " has an invalid layout");
      whole.push_back(in.get<std::uint8_t>() != 0);
      if (whole.back()) {
        if (lw.md.data.format_kind != dnnl_blocked) return bad("weight " + std::to_string(i) + " cannot be reordered back");
        if (!read_md(lw.from, true)) return bad("weight " + std::to_string(i) + " has an invalid source layout");
        if (lw.from.data.ndims != lw.md.data.ndims ||
            !std::equal(lw.from.data.dims, lw.from.data.dims + lw.from.data.ndims, lw.md.data.dims))
          return bad("weight " + std::to_string(i) + "'s source and laid-out dims differ");
      }
      const auto ti = in.get<std::int32_t>();
      if (!in.ok() || ti < 0 || static_cast<std::size_t>(ti) >= tensors.size()) return bad("truncated weight list");
      const auto* t = tensors[static_cast<std::size_t>(ti)];
      if (lw.md.get_size() != t->data.size())
        return bad("a weight's layout does not match its " + std::to_string(t->data.size()) + " bytes");
      lw.data = std::shared_ptr<const void>(owner, t->data.data());
      if (whole.back()) lw.source = t->data.data();
      d.laid.push_back(std::move(lw));
    }
  }
  const auto tensor_at = [&](std::int32_t i, std::optional<tensor>& out) -> bool {
    if (i == -1) return true;
    if (i <= -2) {  // a constant kept only as laid weight k: its dims, over the laid bytes until a plan reorders it back
      const auto k = static_cast<std::size_t>(-2 - static_cast<std::int64_t>(i));
      const auto sizes = in.vec<std::int64_t>();
      if (!in.ok() || k >= d.laid.size() || !whole[k]) return false;
      const auto n = element_count(sizes);
      if (!n || static_cast<std::uint64_t>(*n) > d.laid[k].from.get_size() / 4 ||
          static_cast<std::size_t>(*n) * 4 != d.laid[k].from.get_size())
        return false;
      void* at = const_cast<void*>(d.laid[k].data.get());
      out = tensor::borrow(element_type::float32, sizes, at, owner);
      if (std::none_of(d.deferred.begin(), d.deferred.end(), [&](const deferred_constant& x) { return x.at == at; }))
        d.deferred.push_back({at, k});
      return true;
    }
    if (static_cast<std::size_t>(i) >= tensors.size()) return false;
    const auto* t = tensors[static_cast<std::size_t>(i)];
    out = tensor::borrow_file(t->type, t->shape, const_cast<std::byte*>(t->data.data()), owner);
    return true;
  };
  const auto nvalues = in.get<std::uint32_t>();
  if (!in.ok() || nvalues > rr.graph->payload.size()) return bad("truncated value table");
  const int nv = static_cast<int>(nvalues);
  const auto value_ok = [&](int v) { return v >= -1 && v < nv; };
  std::vector<int> input_of;
  r.values.resize(nvalues);
  for (auto& v : r.values) {
    v.name = in.str();
    if (!tensor_at(in.get<std::int32_t>(), v.constant)) return bad("value '" + v.name + "' refers to a missing tensor");
    v.input = in.get<std::int32_t>();
    v.outputs = in.vec<int>();
    if (!in.ok()) return bad("truncated value table");
  }
  const auto nops = in.get<std::uint32_t>();
  if (!in.ok() || nops > rr.graph->payload.size()) return bad("truncated operation list");
  r.ops.resize(nops);
  for (auto& op : r.ops) {
    const auto kind = in.get<std::uint8_t>();
    if (kind > static_cast<std::uint8_t>(op_kind::resample)) return bad("unknown operation kind " + std::to_string(kind));
    op.kind = static_cast<op_kind>(kind);
    const auto nn = in.get<std::uint32_t>();
    if (!in.ok() || nn > rr.graph->payload.size()) return bad("truncated operation");
    op.nodes.resize(nn);
    for (auto& n : op.nodes) n = in.str();
    op.in = in.vec<int>();
    op.out = in.get<int>();
    op.outs = in.vec<int>();
    op.host_op = in.str();
    op.sizes = in.vec<std::int64_t>();
    op.start = in.get<std::int64_t>();
    op.end = in.get<std::int64_t>();
    op.strides = in.vec<std::int64_t>();
    op.dilations = in.vec<std::int64_t>();
    op.pads = in.vec<std::int64_t>();
    op.kernel = in.vec<std::int64_t>();
    op.output_padding = in.vec<std::int64_t>();
    op.output_shape = in.vec<std::int64_t>();
    op.auto_pad = in.str();
    op.group = in.get<std::int64_t>();
    op.ceil_mode = in.get<std::uint8_t>() != 0;
    std::optional<tensor> t[4];
    for (auto& x : t)
      if (!tensor_at(in.get<std::int32_t>(), x)) return bad("an operation refers to a missing tensor");
    if (t[0]) op.weights = std::move(*t[0]);
    if (t[1]) op.bias = std::move(*t[1]);
    if (t[2]) op.mean = std::move(*t[2]);
    if (t[3]) op.variance = std::move(*t[3]);
    op.alg = static_cast<dn::algorithm>(in.get<std::int32_t>());
    op.alpha = in.get<float>();
    op.beta = in.get<float>();
    op.epsilon = in.get<float>();
    op.trans_a = in.get<std::uint8_t>() != 0;
    op.trans_b = in.get<std::uint8_t>() != 0;
    op.scale = in.get<float>();
    op.axis = in.get<std::int64_t>();
    op.perm = in.vec<std::int64_t>();
    const auto form = in.get<std::uint8_t>();
    if (form > static_cast<std::uint8_t>(reshape_form::unsqueeze)) return bad("unknown reshape form");
    op.form = static_cast<reshape_form>(form);
    op.axes = in.vec<std::int64_t>();
    op.allowzero = in.get<std::uint8_t>() != 0;
    const auto np = in.get<std::uint32_t>();
    if (!in.ok() || np > rr.graph->payload.size()) return bad("truncated operation");
    op.posts.resize(np);
    for (auto& p : op.posts) {
      p.binary = in.get<std::uint8_t>() != 0;
      p.alg = static_cast<dn::algorithm>(in.get<std::int32_t>());
      p.alpha = in.get<float>();
      p.beta = in.get<float>();
      p.src1 = in.get<int>();
      if (p.binary && (p.src1 < 0 || p.src1 >= nv)) return bad("a post-op reads a value out of range");
    }
    if (!in.ok()) return bad("truncated operation");
    bool ok = value_ok(op.out) && (op.kind == op_kind::split || op.out >= 0);
    for (int v : op.in) ok = ok && value_ok(v);
    for (int v : op.outs) ok = ok && value_ok(v) && v >= 0;
    if (!ok) return bad("an operation refers to a value out of range");
  }
  r.inputs = in.vec<int>();
  r.outputs = in.vec<int>();
  if (!in.ok()) return bad("truncated boundary");
  for (std::size_t i = 0; i < r.inputs.size(); ++i) {
    const int v = r.inputs[i];
    if (v < 0 || v >= nv || r.values[static_cast<std::size_t>(v)].input != static_cast<int>(i) ||
        r.values[static_cast<std::size_t>(v)].constant)
      return bad("the input list does not match the value table");
  }
  for (const auto& v : r.values)
    if (v.input >= static_cast<int>(r.inputs.size()) || v.input < -1) return bad("a value's input position is out of range");
  for (int v : r.outputs)
    if (v < 0 || v >= nv) return bad("an output refers to a value out of range");
  if (r.inputs.size() != rr.graph->inputs.size() || r.outputs.size() != rr.graph->outputs.size())
    return bad(cat("the record has ", std::to_string(r.inputs.size()), " inputs and ", std::to_string(r.outputs.size()),
                   " outputs; the graph ", std::to_string(rr.graph->inputs.size()), " and ",
                   std::to_string(rr.graph->outputs.size())));
  for (std::size_t i = 0; i < r.inputs.size(); ++i)
    if (r.values[static_cast<std::size_t>(r.inputs[i])].name != rr.graph->inputs[i])
      return bad(cat("input ", std::to_string(i), " is '", r.values[static_cast<std::size_t>(r.inputs[i])].name,
                     "', the graph says '", rr.graph->inputs[i], "'"));
  if (!in.ok() || !in.at_end()) return bad("the record is truncated or has trailing bytes");
  return d;
}

}  // namespace epstack::dnnl_ep
