#pragma once
// Builds a plan (plan.hpp) for one set of input shapes: slots, steps of oneDNN primitives with their post-ops,
// weights reordered once, scratch memory planned by liveness. The lowering of each family of operations lives in a
// file of its own (lower_conv.cpp, lower_matmul.cpp, lower_norm.cpp, lower_layout.cpp, lower_host.cpp); the
// machinery here and in plan_builder.cpp. Private to epstack::dnnl.
#include "plan.hpp"

#include <epstack/core/mapped_file.hpp>

#include <climits>
#include <cstring>
#include <map>

namespace epstack::dnnl_ep {

class plan_builder {
 public:
  /// `prelaid`: weights already in their final layout (from an EP context), used where a primitive asks for
  /// exactly that layout instead of reordering.
  /// `stored` and `deferred`: a restored partition's laid-out weights and the constants kept only in that form.
  /// `source`: the binary they were read from (their bytes are verified before a reorder reads them).
  plan_builder(const ir& r, const input_shapes& in, const std::vector<laid_weight>* prelaid = nullptr,
               const std::vector<laid_weight>* stored = nullptr, const std::vector<deferred_constant>* deferred = nullptr,
               const ep_context_binary* source = nullptr)
      : r_(r), in_(in), vd_(r.values.size()), vslot_(r.values.size(), -1), hv_(r.values.size()), prelaid_(prelaid),
        stored_(stored), deferred_(deferred), source_(source) {}

  Result<std::shared_ptr<plan>> build();

 private:
  struct buffer {
    std::size_t bytes = 0;
    int first = INT_MAX, last = -1;
  };

  std::string where_text() const {
    if (current_ == nullptr) return {};
    std::string s = ", node";
    for (std::size_t i = 0; i < current_->nodes.size(); ++i) s += (i ? " + '" : " '") + current_->nodes[i] + "'";
    return s;
  }
  Status fail(const std::string& what) const {
    return Status(errc::ep_fail, cat("oneDNN provider: partition '", r_.name, "'", where_text(), ": ", what));
  }

  int add_slot(slot s) {
    pl_->slots.push_back(std::move(s));
    return static_cast<int>(pl_->slots.size() - 1);
  }
  int scratch_slot(const md_t& md) {
    bufs_.push_back({md.get_size()});
    buf_last_op_.push_back(-1);
    return add_slot({where::scratch, static_cast<int>(bufs_.size() - 1), md});
  }
  int alias(int s, const md_t& md) {
    slot c = pl_->slots[static_cast<std::size_t>(s)];
    c.md = md;
    return add_slot(std::move(c));
  }
  int constant_slot(const void* data, std::shared_ptr<const void> owner, const md_t& md) {
    pl_->constants.push_back(data);
    pl_->keep.push_back(std::move(owner));
    return add_slot({where::constant, static_cast<int>(pl_->constants.size() - 1), md});
  }
  int constant_slot(const tensor& t, const md_t& md) {
    auto holder = std::make_shared<tensor>(plain_of(t));
    return constant_slot(holder->data(), holder, md);
  }
  /// Constant `t` itself: `t`, or for a constant a context kept only laid out, that weight reordered back (once per
  /// plan; only plans other than the context's own ever need it).
  const tensor& plain_of(const tensor& t);
  /// Reorders constant `source`, described by `from`, into a block of layout `to`, now. When the data is a weight
  /// read in place from a model file, its pages are then dropped (they map back in if a later plan reads them).
  int reordered_constant(const tensor& source, const md_t& from, const md_t& to);

  const md_t& md_of(int s) const { return pl_->slots[static_cast<std::size_t>(s)].md; }
  /// Before a reorder reads bytes of the context binary: they match their hashes.
  void verify_source(const void* p, std::size_t n) const {
    if (source_ == nullptr) return;
    if (auto st = source_->verify_bytes(p, n); !st) throw damaged_context(std::move(st));
  }

  void add_step(dn::primitive prim, std::vector<std::pair<int, int>> args, const dn::primitive_desc_base& pd) {
    const int at = static_cast<int>(pl_->steps.size());
    for (const auto& [a, s] : args) {
      const auto& sl = pl_->slots[static_cast<std::size_t>(s)];
      if (sl.w != where::scratch) continue;
      auto& b = bufs_[static_cast<std::size_t>(sl.index)];
      b.first = std::min(b.first, at);
      b.last = std::max(b.last, at);
    }
    const std::size_t pad = pd.scratchpad_desc().get_size();
    pl_->pad_bytes = std::max(pl_->pad_bytes, pad);
    pl_->steps.push_back(step{std::move(prim), std::move(args), pad > 0});
  }
  static dn::primitive_attr base_attr() {
    dn::primitive_attr a;
    a.set_scratchpad_mode(dn::scratchpad_mode::user);
    return a;
  }

  void reorder_into(int from, int to) {
    dn::primitive_attr a = base_attr();
    dn::reorder::primitive_desc pd(cpu_engine(), md_of(from), cpu_engine(), md_of(to), a);
    add_step(dn::reorder(pd), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}, pd);
    value_reorders.fetch_add(1, std::memory_order_relaxed);
  }
  /// Slot `s` read through an md whose size-1 dims have row-major strides (see `strided`), when it is strided:
  /// oneDNN's own layouts give them others (a pooling's `acbd` output of [1,11,1,6] has stride 66 on the 1).
  int canonical(int s) {
    const md_t& m = md_of(s);
    const auto st = strides_of(m);
    if (!st) return s;
    const dims d(m.data.dims, m.data.dims + m.data.ndims);
    const md_t c = strided(d, *st);
    // (md_t's == ignores the strides of size-1 dims, the very difference that matters here.)
    const auto cs = strides_of(c);
    return cs && *cs == *st ? s : alias(s, c);
  }
  /// Slot `s` in layout `md` (same dims): `s` itself, or a reordered copy.
  int as_md(int s, const md_t& md) {
    if (md_of(s) == md) return s;
    const int t = scratch_slot(md);
    reorder_into(s, t);
    return t;
  }
  /// Slot `s` (holding dims `d`) in plain row-major layout.
  int as_plain(int s, const dims& d) { return as_md(s, plain(d)); }

  /// The slot of value v (constants get a plain slot over their data).
  int slot_of(int v) {
    auto& s = vslot_[static_cast<std::size_t>(v)];
    if (s >= 0) return s;
    const auto& val = r_.values[static_cast<std::size_t>(v)];
    if (!val.constant) throw std::logic_error("value '" + val.name + "' used before it is computed");
    const tensor& t = *val.constant;
    vd_[static_cast<std::size_t>(v)] = dims(t.sizes().begin(), t.sizes().end());
    s = constant_slot(t, plain(vd_[static_cast<std::size_t>(v)]));
    return s;
  }
  const dims& dims_of(int v) {
    const auto i = static_cast<std::size_t>(v);
    const auto& c = r_.values[i].constant;
    if (!hv_[i] && c && vslot_[i] < 0) {  // a constant's dims, without giving it a slot (a weight may never need one)
      vd_[i].assign(c->sizes().begin(), c->sizes().end());
      return vd_[i];
    }
    if (!hv_[i] && !(r_.values[i].input >= 0 && !c)) (void)slot_of(v);
    return vd_[i];
  }
  void define(int v, int s, dims d) {
    const auto& sl = pl_->slots[static_cast<std::size_t>(s)];
    if (sl.w == where::scratch) {
      auto& l = buf_last_op_[static_cast<std::size_t>(sl.index)];
      l = std::max(l, last_use_[static_cast<std::size_t>(v)]);
    }
    vslot_[static_cast<std::size_t>(v)] = s;
    vd_[static_cast<std::size_t>(v)] = std::move(d);
  }

  // ---- post-ops ----
  /// Post-ops of `posts` for a primitive writing dims `dst` in layout `dst_md` (when known): the oneDNN list and the
  /// slots of binary operands; nullopt when a binary operand does not broadcast into `dst`, or when oneDNN would
  /// run an element-wise post-op with another's parameters (eltwise_conflict): the caller then runs them unfused.
  struct posts_made {
    dn::post_ops po;
    std::vector<std::pair<int, int>> args;
    int sum_src = -1;  ///< the value a sum post-op adds (the destination is filled with it first)
  };
  std::optional<posts_made> make_posts(const std::vector<post_op>& posts, const dims& dst, const md_t* dst_md,
                                       bool materialise) {
    if (eltwise_conflict(posts)) return std::nullopt;  // oneDNN 2.6.3 would run them with the wrong parameters
    posts_made m;
    for (std::size_t i = 0; i < posts.size(); ++i) {
      const auto& p = posts[i];
      if (!p.binary) {
        m.po.append_eltwise(1.0f, p.alg, p.alpha, p.beta);
        continue;
      }
      const dims& d1 = dims_of(p.src1);
      const auto pd1o = post_dims(d1, dst);
      if (!pd1o) return std::nullopt;
      const dims& pd1 = *pd1o;
      if (p.alg == alg::binary_add && pd1 == dst && m.sum_src < 0) {
        // A full-size addition (a residual connection): oneDNN's sum post-op adds what the destination holds,
        // and keeps the primitive on its fastest (blocked) implementations where a binary post-op would not.
        m.po.append_sum(1.0f);
        m.sum_src = p.src1;
        continue;
      }
      md_t md = (pd1 == dst && dst_md != nullptr) ? *dst_md : plain(pd1);
      m.po.append_binary(p.alg, md);
      if (materialise) {
        int s = slot_of(p.src1);
        s = pd1 == dst && dst_md != nullptr ? as_md(d1 == dst ? s : alias(as_plain(s, d1), plain(dst)), md)
                                            : alias(as_plain(s, d1), md);
        m.args.emplace_back(DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | DNNL_ARG_SRC_1, s);
      }
    }
    return m;
  }

  /// The dims a binary post-op operand of dims `d1` takes against a destination of dims `dst`: padded with leading
  /// 1s to its rank, or, when a matrix product runs collapsed to 2-D (`collapse_from_` is the rank it came from),
  /// collapsed the same way. nullopt when it does not broadcast into `dst`.
  std::optional<dims> post_dims(const dims& d1, const dims& dst) const;

  /// Creates the primitive descriptor with the op's post-ops fused when oneDNN accepts them (`make(attr)` throws
  /// otherwise); `fused` says which happened. Binary operands of the full output size take the layout the primitive
  /// chose for its output.
  template <class PD, class Make>
  PD with_posts(const std::vector<post_op>& posts, const dims& dst, Make make, bool& fused,
                std::vector<std::pair<int, int>>& post_args) {
    fused = false;
    sum_src_ = -1;
    if (!posts.empty()) {
      if (auto first = make_posts(posts, dst, nullptr, false)) {
        try {
          dn::primitive_attr a = base_attr();
          a.set_post_ops(first->po);
          PD pd = make(a);
          const md_t out = pd.dst_desc();
          bool full = false;
          const bool has_full = std::any_of(posts.begin(), posts.end(), [&](const post_op& p) {
            return p.binary && p.alg != alg::binary_add && post_dims(dims_of(p.src1), dst) == dst;
          });
          if (has_full && out != plain(dst)) {
            try {
              dn::primitive_attr a2 = base_attr();
              a2.set_post_ops(make_posts(posts, dst, &out, false)->po);
              PD pd2 = make(a2);
              if (pd2.dst_desc() == out) pd = pd2, full = true;
            } catch (const dn::error&) {
            }
          }
          auto made = make_posts(posts, dst, full ? &out : nullptr, true);
          post_args = made->args;
          sum_src_ = made->sum_src;
          fused = true;
          return pd;
        } catch (const dn::error&) {
        }
      }
    }
    return make(base_attr());
  }
  /// The destination of a primitive just created by with_posts: a new buffer, or, for a sum post-op, the buffer of
  /// the value it adds when nothing reads that buffer later (in place), else a copy of that value.
  int dst_slot(const md_t& md, const dims& dst);

  /// Runs `posts` one by one on slot `s` (dims `d`) when they could not be fused; returns the result's slot.
  /// `d` is updated to the result's dims (a binary operand may broadcast the value).
  int unfused_posts(const std::vector<post_op>& posts, int s, dims& d);

  int eltwise(int s0, alg a, float alpha, float beta) {
    const int s = canonical(s0);
    const md_t md = md_of(s);
    dn::eltwise_forward::desc d(dn::prop_kind::forward_inference, a, md, alpha, beta);
    return unary_step<dn::eltwise_forward>({d, base_attr(), cpu_engine()}, s);
  }

  /// A step of primitive `Prim` reading slot `s` and writing a new buffer in its destination layout; its slot.
  template <class Prim>
  int unary_step(const typename Prim::primitive_desc& pd, int s) {
    const int t = scratch_slot(pd.dst_desc());
    add_step(Prim(pd), {{DNNL_ARG_SRC, s}, {DNNL_ARG_DST, t}}, pd);
    return t;
  }

  /// a (alg) b with numpy broadcasting; `out` receives the result's dims.
  int binary(alg a, int sa, dims da0, int sb, dims db0, const std::vector<post_op>& posts, dims& out);

  // ---- geometry ----
  struct window {
    dims out, pad_l, pad_r, strides, dil, kernel;
  };
  Result<window> conv_window(const ir_op& op, const dims& in, const dims& kernel, bool transposed) const;

  // ---- lowering ----
  Status lower(const ir_op& op);

  Status conv(const ir_op& op);
  /// The only op reading value `v` (as an operand or a post-op's), or nullptr (none, several, or a partition output).
  const ir_op* sole_reader(int v) const;
  /// True when convolution output `v` is best written channels-last: its only reader reshapes it, and that result's
  /// only reader transposes it or is a matrix product reading it transposed (a vision transformer's patch embedding,
  /// Conv -> Flatten -> Transpose -> MatMul). Channels-last, the transposed rows are contiguous: nothing is reordered.
  bool channels_last_reader(int v) const;

  /// A row-major md of logical dims `d` ([..., R, C]) over memory laid out as `d` with the last two swapped when
  /// `trans`.
  static md_t matrix_md(const dims& d, bool trans);

  Status matmul(const ir_op& op);
  /// The strides that write a product of dims `eo` in the order of its sole reader, a Transpose that swaps the batch
  /// dim next to the rows with them (attention's heads merged back), and whose post-ops are element-wise or a sum;
  /// empty otherwise.
  dims transposed_dst(const ir_op& op, const dims& eo, const dims& onnx_out, bool collapse);

  Status pool(const ir_op& op);

  Status resample(const ir_op& op);

  Status softmax(const ir_op& op);

  Status layernorm(const ir_op& op);

  Status batchnorm(const ir_op& op);

  Status transpose(const ir_op& op);

  Status reshape(const ir_op& op);

  Status concat(const ir_op& op);

  Status split(const ir_op& op);

  /// An int64 shape computation, evaluated now into a host value.
  Status host(const ir_op& op);

  // ---- boundary and memory ----
  void finish_outputs();

  /// Offsets in one scratch block: a buffer reuses the space of one whose last use came before its first.
  void allocate_scratch();

  const ir& r_;
  const input_shapes& in_;
  std::shared_ptr<plan> pl_ = std::make_shared<plan>();
  std::vector<buffer> bufs_;
  std::vector<dims> vd_;
  std::vector<int> vslot_;
  const ir_op* current_ = nullptr;
  int op_index_ = 0;
  std::size_t collapse_from_ = 0;
  int sum_src_ = -1;
  std::vector<std::optional<std::vector<std::int64_t>>> hv_;  ///< int64 values known when planning (host values)
  std::vector<int> last_use_;     ///< per value: index of the last op reading it (INT_MAX: a partition output)
  std::vector<int> buf_last_op_;  ///< per buffer: the last op reading any value that lives in it
  const std::vector<laid_weight>* prelaid_ = nullptr;
  const std::vector<laid_weight>* stored_ = nullptr;
  const std::vector<deferred_constant>* deferred_ = nullptr;
  const ep_context_binary* source_ = nullptr;
  std::map<const void*, tensor> materialized_;
  std::size_t laid_count_ = 0;
};

}  // namespace epstack::dnnl_ep
