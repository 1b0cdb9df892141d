// Compiling a partition for oneDNN: for each set of input shapes, a plan of primitives (weights reordered once into
// the formats the primitives chose, activations in blocked formats inside the partition, reorders at the boundary,
// one scratch block planned by liveness), built at compile time when the shapes are static, else at the first run
// with new shapes; then executed against the run's inputs, outputs and arena memory.
#include "ir.hpp"

#include <epstack/detail/cat.hpp>
#include <epstack/core/mapped_file.hpp>
#include <epstack/providers/dnnl.hpp>


#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <shared_mutex>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

// libgomp's, the OpenMP runtime oneDNN runs on (declared here rather than through <omp.h> and -fopenmp).
extern "C" void omp_set_num_threads(int n);

namespace epstack::dnnl_ep {

using epstack::detail::cat;

namespace {

using tag = dn::memory::format_tag;
using dt = dn::memory::data_type;
using dims = dn::memory::dims;
using alg = dn::algorithm;
using md_t = dn::memory::desc;

dn::engine& cpu_engine() {
  static dn::engine e(dn::engine::kind::cpu, 0);
  return e;
}

dims mdims(const dims& d) { return d.empty() ? dims{1} : d; }
std::int64_t volume(const dims& d) { return std::accumulate(d.begin(), d.end(), std::int64_t{1}, std::multiplies<>()); }

/// A strided md whose dims of size 1 take the stride a row-major layout gives them (the next dim's stride times its
/// size). Their stride addresses nothing, but oneDNN 2.6.3's jit binary primitive reads the layout from it: a view
/// that kept the stride of a permuted size-1 dim ([3,8,1,6] with strides [48,6,144,1], a Transpose of a batch-1
/// convolution) got a kernel that wrote nothing.
md_t strided(const dims& d, dims strides) {
  for (std::size_t i = d.size(); i-- > 0;)
    if (d[i] == 1) strides[i] = i + 1 < d.size() ? strides[i + 1] * std::max<std::int64_t>(d[i + 1], 1) : 1;
  return md_t(d, dt::f32, strides);
}

md_t plain(const dims& d0) {
  const dims d = mdims(d0);
  dims strides(d.size(), 1);
  for (std::size_t i = d.size() - 1; i > 0; --i) strides[i - 1] = strides[i] * std::max<std::int64_t>(d[i], 1);
  return md_t(d, dt::f32, strides);
}

dims pad_front(const dims& d, std::size_t rank) {
  dims r(rank - std::min(rank, d.size()), 1);
  r.insert(r.end(), d.begin(), d.end());
  return r;
}

/// The strides of a plain strided md (no blocking, no offset), or nullopt for a blocked one.
std::optional<dims> strides_of(const md_t& m) {
  const auto& d = m.data;
  if (d.format_kind != dnnl_blocked || d.format_desc.blocking.inner_nblks != 0 || d.offset0 != 0) return std::nullopt;
  return dims(d.format_desc.blocking.strides, d.format_desc.blocking.strides + d.ndims);
}

std::string str(const dims& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

enum class where : std::uint8_t { input, output, constant, scratch };

struct slot {
  where w = where::scratch;
  int index = -1;  ///< input or output position, constant number, or buffer number
  md_t md;
};

struct step {
  dn::primitive prim;
  std::vector<std::pair<int, int>> args;  ///< oneDNN argument, slot
  bool scratchpad = false;
};

/// Everything needed to run a partition for one set of input shapes. Immutable once built.
/// What one call needs besides the plan, kept for the next call: a memory object per slot (only data handles change
/// between runs, and only when the memory moved), the argument map of each step, a stream.
struct exec_state {
  std::vector<dn::memory> mem;
  std::vector<void*> handle;
  dn::memory pad;
  void* pad_handle = nullptr;
  std::vector<std::unordered_map<int, dn::memory>> args;
  dn::stream stream;
  std::vector<void*> outs;  ///< this call's output buffers
};

struct plan {
  std::vector<laid_weight> laid;  ///< in the order the builder reordered them
  /// Exec states not in use: a call takes one (or makes one) and gives it back, so runs allocate nothing here.
  mutable std::mutex idle_mu;
  mutable std::vector<std::unique_ptr<exec_state>> idle;
  std::vector<std::int64_t> key;
  std::vector<slot> slots;
  std::vector<const void*> constants;
  std::vector<std::shared_ptr<const void>> keep;  ///< owners of the constants
  std::vector<std::size_t> buffer_offset;
  std::size_t scratch_bytes = 0, pad_offset = 0, pad_bytes = 0;
  std::vector<step> steps;
  std::vector<dims> out_dims;
  std::vector<element_type> out_types;                ///< float32, or int64 for shape computations
  std::vector<std::vector<std::int64_t>> host_out;   ///< the values of int64 outputs, copied out at each run
  /// Set once the constants it reads from an EP context binary have been verified (before its first run).
  mutable std::atomic<bool> verified{false};
  mutable std::mutex verify_mu;
};

/// A restored partition's context binary, whose tensors are verified before they are read (plan_builder throws this
/// for a damaged one).
struct damaged_context : std::runtime_error {
  explicit damaged_context(Status s) : std::runtime_error(s.message()), status(std::move(s)) {}
  Status status;
};

std::shared_ptr<void> aligned_block(std::size_t bytes) {
  void* p = std::aligned_alloc(64, (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64);
  if (p == nullptr) throw std::bad_alloc();
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

std::atomic<std::uint64_t> weight_reorders{0};
std::atomic<bool> ignore_stored_layouts{false};

/// What a partition's inputs look like for one run.
struct input_shapes {
  std::vector<dims> sizes;                       ///< per partition input (empty for non-tensors)
  std::vector<std::vector<std::int64_t>> values; ///< int64 contents of the inputs read as shapes or axes
  std::vector<bool> dims_only;                   ///< inputs read only for their dims (by Shape): no memory
  std::vector<bool> is_values;                   ///< inputs read for their int64 values: no memory either
};

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

  Result<std::shared_ptr<plan>> build() {
    try {
      for (std::size_t i = 0; i < r_.inputs.size(); ++i) {
        const int v = r_.inputs[i];
        const auto& val = r_.values[static_cast<std::size_t>(v)];
        if (val.constant) continue;
        vd_[static_cast<std::size_t>(v)] = in_.sizes[i];
        if (in_.is_values[i] || in_.dims_only[i]) {
          hv_[static_cast<std::size_t>(v)] = in_.values[i];  // an int64 input: a host value, no memory
          continue;
        }
        vslot_[static_cast<std::size_t>(v)] = add_slot({where::input, static_cast<int>(i), plain(in_.sizes[i])});
      }
      last_use_.assign(r_.values.size(), -1);
      for (std::size_t i = 0; i < r_.ops.size(); ++i) {
        for (int v : r_.ops[i].in)
          if (v >= 0) last_use_[static_cast<std::size_t>(v)] = static_cast<int>(i);
        for (const auto& p : r_.ops[i].posts)
          if (p.binary) last_use_[static_cast<std::size_t>(p.src1)] = static_cast<int>(i);
      }
      for (int v : r_.outputs) last_use_[static_cast<std::size_t>(v)] = INT_MAX;
      for (const auto& op : r_.ops) {
        current_ = &op;
        op_index_ = static_cast<int>(&op - r_.ops.data());
        if (auto st = lower(op); !st) return st;
      }
      current_ = nullptr;
      finish_outputs();
      allocate_scratch();
      return pl_;
    } catch (const damaged_context& e) {
      return e.status;
    } catch (const dn::error& e) {
      return Status(errc::ep_fail, cat("oneDNN provider: partition '", r_.name, "'", where_text(), ": oneDNN: ", e.what()));
    } catch (const std::bad_alloc&) {
      return Status(errc::fail, cat("oneDNN provider: partition '", r_.name, "': out of memory while planning"));
    } catch (const std::exception& e) {
      return Status(errc::ep_fail, cat("oneDNN provider: partition '", r_.name, "'", where_text(), ": ", e.what()));
    }
  }

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
  const tensor& plain_of(const tensor& t) {
    if (deferred_ == nullptr || t.empty()) return t;
    for (const auto& d : *deferred_) {
      if (d.at != t.data()) continue;
      if (auto it = materialized_.find(d.at); it != materialized_.end()) return it->second;
      const auto& w = (*stored_)[d.laid];
      verify_source(w.data.get(), w.md.get_size());
      tensor out = tensor::uninitialized(t.type(), t.sizes());
      dn::memory src(w.md, cpu_engine(), const_cast<void*>(w.data.get()));
      dn::memory dst(w.from, cpu_engine(), out.mutable_data());
      dn::stream s(cpu_engine());
      dn::reorder(src, dst).execute(s, src, dst);
      s.wait();
      return materialized_.emplace(d.at, std::move(out)).first->second;
    }
    return t;
  }
  /// Reorders constant `source`, described by `from`, into a block of layout `to`, now. When the data is a weight
  /// read in place from a model file, its pages are then dropped (they map back in if a later plan reads them).
  int reordered_constant(const tensor& source, const md_t& from, const md_t& to) {
    const std::size_t k = laid_count_++;
    if (prelaid_ != nullptr && k < prelaid_->size() && (*prelaid_)[k].md == to) {
      const auto& w = (*prelaid_)[k];
      pl_->laid.push_back(w);
      return constant_slot(w.data.get(), w.data, to);
    }
    weight_reorders.fetch_add(1, std::memory_order_relaxed);
    const tensor& plain = plain_of(source);
    verify_source(plain.data(), plain.byte_size());
    auto block = aligned_block(to.get_size());
    dn::memory src(from, cpu_engine(), const_cast<std::byte*>(plain.data()));
    dn::memory dst(to, cpu_engine(), block.get());
    dn::stream s(cpu_engine());
    dn::reorder(src, dst).execute(s, src, dst);
    s.wait();
    if (plain.is_file_backed()) release_file_pages(plain.data(), plain.byte_size());
    // Only a blocked layout reorders back (not Winograd's): only then may a context store this copy alone.
    const bool whole = source.type() == element_type::float32 && from.get_size() == source.byte_size() &&
                       to.data.format_kind == dnnl_blocked;
    pl_->laid.push_back({to, block, whole ? from : md_t(), whole ? source.data() : nullptr});
    return constant_slot(block.get(), block, to);
  }

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
  std::optional<dims> post_dims(const dims& d1, const dims& dst) const {
    if (collapse_from_ > 0) {
      if (d1.size() > collapse_from_) return std::nullopt;
      const dims pd = pad_front(mdims(d1), collapse_from_);
      const std::int64_t lead = volume(pd) / std::max<std::int64_t>(pd.back(), 1);
      if ((lead != 1 && lead != dst[0]) || (pd.back() != 1 && pd.back() != dst[1])) return std::nullopt;
      return dims{lead, pd.back()};
    }
    if (d1.size() > dst.size()) return std::nullopt;
    const dims pd = pad_front(mdims(d1), dst.size());
    for (std::size_t k = 0; k < dst.size(); ++k)
      if (pd[k] != dst[k] && pd[k] != 1) return std::nullopt;
    return pd;
  }

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
  int dst_slot(const md_t& md, const dims& dst) {
    if (sum_src_ < 0) return scratch_slot(md);
    int rs = slot_of(sum_src_);
    const dims d1 = dims_of(sum_src_);
    if (d1.size() != dst.size()) rs = alias(as_plain(rs, d1), plain(dst));
    const auto& sl = pl_->slots[static_cast<std::size_t>(rs)];
    bool read_here = false;  // the primitive must not read the buffer it adds into
    for (int v : current_->in)
      if (v >= 0 && vslot_[static_cast<std::size_t>(v)] >= 0) {
        const auto& in = pl_->slots[static_cast<std::size_t>(vslot_[static_cast<std::size_t>(v)])];
        read_here = read_here || (in.w == where::scratch && in.index == sl.index);
      }
    for (const auto& p : current_->posts)
      if (p.binary && p.src1 != sum_src_ && vslot_[static_cast<std::size_t>(p.src1)] >= 0) {
        const auto& in = pl_->slots[static_cast<std::size_t>(vslot_[static_cast<std::size_t>(p.src1)])];
        read_here = read_here || (in.w == where::scratch && in.index == sl.index);
      }
    if (sl.w == where::scratch && sl.md == md && !read_here && buf_last_op_[static_cast<std::size_t>(sl.index)] <= op_index_)
      return rs;
    const int t = scratch_slot(md);
    reorder_into(rs, t);
    return t;
  }

  /// Runs `posts` one by one on slot `s` (dims `d`) when they could not be fused; returns the result's slot.
  /// `d` is updated to the result's dims (a binary operand may broadcast the value).
  int unfused_posts(const std::vector<post_op>& posts, int s, dims& d) {
    for (const auto& p : posts) {
      if (!p.binary) s = eltwise(s, p.alg, p.alpha, p.beta);
      else {
        dims out;
        s = binary(p.alg, s, d, slot_of(p.src1), dims_of(p.src1), {}, out);
        d = out;
      }
    }
    return s;
  }

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
  int binary(alg a, int sa, dims da0, int sb, dims db0, const std::vector<post_op>& posts, dims& out) {
    const std::size_t rank = std::max({da0.size(), db0.size(), std::size_t{1}});
    dims da = pad_front(mdims(da0), rank), db = pad_front(mdims(db0), rank);
    out.assign(rank, 1);
    for (std::size_t k = 0; k < rank; ++k) {
      if (da[k] != db[k] && da[k] != 1 && db[k] != 1)
        throw std::invalid_argument("operands " + str(da0) + " and " + str(db0) + " do not broadcast");
      out[k] = da[k] == 1 ? db[k] : da[k];
    }
    std::vector<post_op> fix;
    if (da != out) {
      if (db != out) throw std::invalid_argument("both operands " + str(da0) + " and " + str(db0) + " broadcast");
      std::swap(sa, sb);
      std::swap(da, db);
      std::swap(da0, db0);
      if (a == alg::binary_sub) fix.push_back(post_op{false, alg::eltwise_linear, -1.0f, 0.0f, -1});
      if (a == alg::binary_div) fix.push_back(post_op{false, alg::eltwise_pow, 1.0f, -1.0f, -1});
    }
    // src0 keeps its layout when it has the output's rank; src1 matches it, or is plain when it broadcasts.
    int s0 = canonical(da0.size() == rank ? sa : alias(as_plain(sa, da0), plain(da)));
    const md_t md0 = md_of(s0);
    int s1 = db == out ? canonical(as_md(db0.size() == rank ? sb : alias(as_plain(sb, db0), plain(db)), md0))
                       : alias(as_plain(sb, db0), plain(db));
    std::vector<post_op> all = fix;
    for (const auto& p : posts) append_post(all, p);
    // oneDNN 2.6.3's jit binary kernel applies a binary post-op that broadcasts (a per-channel [1,C,1,1] operand) at
    // wrong offsets, whatever the layout (checked with oneDNN alone: [2,5,1,1], [2,16,4,4], a Transpose read in
    // place). The post-ops before the first such one are fused; it and the rest run as binary primitives of their
    // own, whose broadcast operand oneDNN computes right.
    std::vector<post_op> rest;
    for (std::size_t i = 0; i < all.size(); ++i)
      if (all[i].binary && post_dims(dims_of(all[i].src1), out) != std::optional<dims>(out)) {
        rest.assign(all.begin() + static_cast<std::ptrdiff_t>(i), all.end());
        all.resize(i);
        break;
      }
    bool fused = false;
    std::vector<std::pair<int, int>> post_args;
    const md_t md1 = md_of(s1);
    auto pd = with_posts<dn::binary::primitive_desc>(all, out, [&](const dn::primitive_attr& at) {
      dn::binary::desc d(a, md0, md1, md0);
      return dn::binary::primitive_desc(d, at, cpu_engine());
    }, fused, post_args);
    const int t = dst_slot(pd.dst_desc(), out);
    std::vector<std::pair<int, int>> args{{DNNL_ARG_SRC_0, s0}, {DNNL_ARG_SRC_1, s1}, {DNNL_ARG_DST, t}};
    args.insert(args.end(), post_args.begin(), post_args.end());
    add_step(dn::binary(pd), std::move(args), pd);
    if (!fused) rest.insert(rest.begin(), all.begin(), all.end());
    return unfused_posts(rest, t, out);
  }

  // ---- geometry ----
  struct window {
    dims out, pad_l, pad_r, strides, dil, kernel;
  };
  Result<window> conv_window(const ir_op& op, const dims& in, const dims& kernel, bool transposed) const {
    const std::size_t sp = in.size() - 2;
    window w;
    w.kernel = kernel;
    w.strides = op.strides.empty() ? dims(sp, 1) : op.strides;
    w.dil = op.dilations.empty() ? dims(sp, 1) : op.dilations;
    if (w.strides.size() != sp || w.dil.size() != sp || kernel.size() != sp) return fail("strides, dilations or kernel do not match the input rank");
    w.pad_l.assign(sp, 0);
    w.pad_r.assign(sp, 0);
    w.out.assign(sp, 0);
    for (std::size_t i = 0; i < sp; ++i) {
      const std::int64_t x = in[2 + i], s = w.strides[i], ek = (kernel[i] - 1) * w.dil[i] + 1;
      if (s < 1 || w.dil[i] < 1) return fail("strides and dilations must be positive");
      if (!transposed) {
        if (op.auto_pad == "SAME_UPPER" || op.auto_pad == "SAME_LOWER") {
          const std::int64_t o = (x + s - 1) / s, total = std::max<std::int64_t>(0, (o - 1) * s + ek - x);
          w.pad_l[i] = op.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
          w.pad_r[i] = total - w.pad_l[i];
        } else if (op.auto_pad != "VALID" && !op.pads.empty()) {
          if (op.pads.size() != 2 * sp) return fail("pads do not match the input rank");
          w.pad_l[i] = op.pads[i];
          w.pad_r[i] = op.pads[sp + i];
        }
        std::int64_t span = x + w.pad_l[i] + w.pad_r[i] - ek;
        if (span < 0) return fail("the kernel is larger than the padded input");
        std::int64_t o = span / s + 1;
        if (op.ceil_mode) {
          o = (span + s - 1) / s + 1;
          if ((o - 1) * s >= x + w.pad_l[i]) --o;  // the last window must start inside the input or left padding
          w.pad_r[i] = std::max<std::int64_t>(w.pad_r[i], (o - 1) * s + ek - x - w.pad_l[i]);
        }
        w.out[i] = o;
      } else {
        const std::int64_t op_pad = op.output_padding.empty() ? 0 : op.output_padding[i];
        const std::int64_t natural = s * (x - 1) + op_pad + ek;
        if (!op.output_shape.empty() || op.auto_pad == "SAME_UPPER" || op.auto_pad == "SAME_LOWER") {
          const std::int64_t target = !op.output_shape.empty() ? op.output_shape[op.output_shape.size() - sp + i] : x * s;
          const std::int64_t total = natural - target;
          if (total < 0) return fail("output_shape is larger than the convolution can produce");
          const bool upper = op.auto_pad != "SAME_LOWER";
          w.pad_l[i] = upper ? total / 2 : total - total / 2;
          w.pad_r[i] = total - w.pad_l[i];
        } else if (op.auto_pad != "VALID" && !op.pads.empty()) {
          w.pad_l[i] = op.pads[i];
          w.pad_r[i] = op.pads[sp + i];
        }
        w.out[i] = natural - w.pad_l[i] - w.pad_r[i];
      }
    }
    for (auto& d : w.dil) d -= 1;  // oneDNN counts dilation from 0
    return w;
  }

  // ---- lowering ----
  Status lower(const ir_op& op) {
    switch (op.kind) {
      case op_kind::conv:
      case op_kind::deconv: return conv(op);
      case op_kind::matmul: return matmul(op);
      case op_kind::pool: return pool(op);
      case op_kind::eltwise: {
        const int s = slot_of(op.in[0]);
        define(op.out, eltwise(s, op.alg, op.alpha, op.beta), dims_of(op.in[0]));
        return {};
      }
      case op_kind::binary: {
        dims out;
        const int s0 = slot_of(op.in[0]), s1 = slot_of(op.in[1]);
        const int t = binary(op.alg, s0, dims_of(op.in[0]), s1, dims_of(op.in[1]), op.posts, out);
        define(op.out, t, out);
        return {};
      }
      case op_kind::softmax: return softmax(op);
      case op_kind::layernorm: return layernorm(op);
      case op_kind::batchnorm: return batchnorm(op);
      case op_kind::transpose: return transpose(op);
      case op_kind::reshape: return reshape(op);
      case op_kind::concat: return concat(op);
      case op_kind::split: return split(op);
      case op_kind::host: return host(op);
    }
    return fail("unknown operation");
  }

  Status conv(const ir_op& op) {
    const bool transposed = op.kind == op_kind::deconv;
    const dims in = dims_of(op.in[0]);
    const tensor& w = op.weights;
    const dims wd(w.sizes().begin(), w.sizes().end());
    if (in.size() != wd.size() || in.size() < 3) return fail("input " + str(in) + " and weights " + str(wd) + " differ in rank");
    const std::int64_t g = op.group;
    const std::int64_t c = in[1];
    std::int64_t oc = 0, icg = 0, ocg = 0;
    if (!transposed) {
      oc = wd[0], icg = wd[1], ocg = oc / g;
      if (g < 1 || c != icg * g || oc % g != 0) return fail("channels " + std::to_string(c) + " do not match weights " + str(wd) + " with group " + std::to_string(g));
    } else {
      ocg = wd[1], icg = c / g, oc = ocg * g;
      if (g < 1 || wd[0] != c || c % g != 0) return fail("channels " + std::to_string(c) + " do not match weights " + str(wd) + " with group " + std::to_string(g));
    }
    const dims kernel(wd.begin() + 2, wd.end());
    if (!op.kernel.empty() && op.kernel != kernel) return fail("kernel_shape does not match the weights");
    auto win = conv_window(op, in, kernel, transposed);
    if (!win) return win.status();
    dims out{in[0], oc};
    out.insert(out.end(), win->out.begin(), win->out.end());
    // Weights as oneDNN sees them ([G,] O, I, k...) over the ONNX layout.
    dims wdims, wstrides;
    const std::int64_t ksize = volume(kernel);
    dims kstrides(kernel.size(), 1);
    for (std::size_t i = kernel.size(); i-- > 1;) kstrides[i - 1] = kstrides[i] * kernel[i];
    if (!transposed) {
      if (g > 1) wdims = {g, ocg, icg}, wstrides = {ocg * icg * ksize, icg * ksize, ksize};
      else wdims = {oc, icg}, wstrides = {icg * ksize, ksize};
    } else {  // ONNX [C, OC/G, k...]
      if (g > 1) wdims = {g, ocg, icg}, wstrides = {icg * ocg * ksize, ksize, ocg * ksize};
      else wdims = {oc, icg}, wstrides = {ksize, ocg * ksize};
    }
    wdims.insert(wdims.end(), kernel.begin(), kernel.end());
    wstrides.insert(wstrides.end(), kstrides.begin(), kstrides.end());
    const md_t w_src(wdims, dt::f32, wstrides);
    const md_t src_any(in, dt::f32, tag::any), w_any(wdims, dt::f32, tag::any), dst_any(out, dt::f32, tag::any);
    const bool has_bias = !op.bias.empty();
    const md_t bias_md = has_bias ? md_t({oc}, dt::f32, tag::a) : md_t();
    bool fused = false;
    std::vector<std::pair<int, int>> post_args;
    int t = -1;
    // The source in the layout the primitive chose, the weights reordered once, the destination, then the step.
    const auto emit = [&](const auto& pd, auto prim) {
      const int s = as_md(slot_of(op.in[0]), pd.src_desc());
      const int ws = reordered_constant(w, w_src, pd.weights_desc());
      t = dst_slot(pd.dst_desc(), out);
      std::vector<std::pair<int, int>> args{{DNNL_ARG_SRC, s}, {DNNL_ARG_WEIGHTS, ws}, {DNNL_ARG_DST, t}};
      if (has_bias) args.emplace_back(DNNL_ARG_BIAS, constant_slot(op.bias, bias_md));
      args.insert(args.end(), post_args.begin(), post_args.end());
      add_step(typename decltype(prim)::type(pd), std::move(args), pd);
    };
    if (!transposed) {
      // 3x3, stride 1, one group, large enough maps: oneDNN's Winograd kernels (2.25x fewer multiplications; on
      // resnet50 ~10% less time, logits within 3e-7 of ONNX Runtime). Anything they do not take falls back to direct.
      const bool wino = r_.winograd && g == 1 && kernel.size() == 2 && kernel[0] == 3 && kernel[1] == 3 &&
                        std::all_of(win->strides.begin(), win->strides.end(), [](std::int64_t x) { return x == 1; }) &&
                        std::all_of(win->dil.begin(), win->dil.end(), [](std::int64_t x) { return x == 0; }) &&
                        win->out[0] * win->out[1] >= 14 * 14;
      const alg conv_alg = wino ? alg::convolution_winograd : alg::convolution_direct;
      auto pd = with_posts<dn::convolution_forward::primitive_desc>(op.posts, out, [&](const dn::primitive_attr& a) {
        try {
          dn::convolution_forward::desc d(dn::prop_kind::forward_inference, conv_alg, src_any, w_any,
                                          bias_md, dst_any, win->strides, win->dil, win->pad_l, win->pad_r);
          return dn::convolution_forward::primitive_desc(d, a, cpu_engine());
        } catch (const dn::error&) {
          dn::convolution_forward::desc d(dn::prop_kind::forward_inference, alg::convolution_direct, src_any, w_any,
                                          bias_md, dst_any, win->strides, win->dil, win->pad_l, win->pad_r);
          return dn::convolution_forward::primitive_desc(d, a, cpu_engine());
        }
      }, fused, post_args);
      emit(pd, std::type_identity<dn::convolution_forward>{});
    } else {
      auto pd = with_posts<dn::deconvolution_forward::primitive_desc>(op.posts, out, [&](const dn::primitive_attr& a) {
        dn::deconvolution_forward::desc d(dn::prop_kind::forward_inference, alg::deconvolution_direct, src_any, w_any,
                                          bias_md, dst_any, win->strides, win->dil, win->pad_l, win->pad_r);
        return dn::deconvolution_forward::primitive_desc(d, a, cpu_engine());
      }, fused, post_args);
      emit(pd, std::type_identity<dn::deconvolution_forward>{});
    }
    const int res = fused ? t : unfused_posts(op.posts, t, out);
    define(op.out, res, out);
    return {};
  }

  /// A row-major md of logical dims `d` ([..., R, C]) over memory laid out as `d` with the last two swapped when
  /// `trans`.
  static md_t matrix_md(const dims& d, bool trans) {
    dims phys = d;
    const std::size_t n = d.size();
    if (trans) std::swap(phys[n - 1], phys[n - 2]);
    dims ps(n, 1);
    for (std::size_t i = n - 1; i > 0; --i) ps[i - 1] = ps[i] * std::max<std::int64_t>(phys[i], 1);
    dims strides = ps;
    if (trans) std::swap(strides[n - 1], strides[n - 2]);
    return strided(d, strides);
  }

  Status matmul(const ir_op& op) {
    dims a = dims_of(op.in[0]), b = dims_of(op.in[1]);
    const dims a0 = a, b0 = b;
    if (a.empty() || b.empty()) return fail("matrix product of a scalar");
    const bool squeeze_a = a.size() == 1, squeeze_b = b.size() == 1;
    if (squeeze_a) a.insert(a.begin(), 1);
    if (squeeze_b) b.push_back(1);
    if (op.trans_a) std::swap(a[a.size() - 1], a[a.size() - 2]);
    if (op.trans_b) std::swap(b[b.size() - 1], b[b.size() - 2]);
    const std::size_t rank = std::max(a.size(), b.size());
    a = pad_front(a, rank);
    b = pad_front(b, rank);
    if (a[rank - 1] != b[rank - 2]) return fail("inner dimensions of " + str(a0) + " and " + str(b0) + " differ");
    dims out(rank);
    for (std::size_t k = 0; k + 2 < rank; ++k) {
      if (a[k] != b[k] && a[k] != 1 && b[k] != 1) return fail("batch dimensions of " + str(a0) + " and " + str(b0) + " do not broadcast");
      out[k] = a[k] == 1 ? b[k] : a[k];
    }
    out[rank - 2] = a[rank - 2];
    out[rank - 1] = b[rank - 1];
    dims onnx_out = out;  // ONNX's result: the promoted 1-D dims dropped
    if (squeeze_b) onnx_out.pop_back();
    if (squeeze_a) onnx_out.erase(onnx_out.end() - (squeeze_b ? 1 : 2));
    const bool const_b = r_.values[static_cast<std::size_t>(op.in[1])].constant.has_value();
    // Constant weights without batch dims against a batched A: one 2-D product [batch*M, K] x [K, N], for which
    // oneDNN packs the weights into its blocked format (it keeps batched weights plain).
    const bool collapse = rank > 2 && const_b && !op.trans_a && volume(b) == b[rank - 1] * b[rank - 2];
    dims ea = a, eb = b, eo = out;
    if (collapse) {
      ea = {volume(a) / a[rank - 1], a[rank - 1]};
      eb = {b[rank - 2], b[rank - 1]};
      eo = {ea[0], eb[1]};
      collapse_from_ = rank;
    }
    // Operand memory: ONNX dims, plain, possibly transposed; the padded leading dims have size 1.
    const auto operand = [&](int v, const dims& logical, bool trans) {
      const int s = slot_of(v);
      // A strided view (a transposition) of the operand's own rank is read in place.
      if (const auto st = strides_of(md_of(s)); st && !collapse && dims_of(v).size() == logical.size() && md_of(s) != plain(dims_of(v))) {
        dims vs = *st;
        if (trans) std::swap(vs[vs.size() - 1], vs[vs.size() - 2]);
        return alias(s, strided(logical, vs));
      }
      return alias(as_plain(s, dims_of(v)), matrix_md(logical, trans));
    };
    const int sa = operand(op.in[0], ea, op.trans_a);
    const md_t a_md = md_of(sa);
    const int sb_runtime = const_b ? -1 : operand(op.in[1], eb, op.trans_b);  // its md: plain, or a strided view
    const md_t b_md = const_b ? md_t(eb, dt::f32, tag::any) : md_of(sb_runtime);
    // A first post-op adding a constant row of N values (Gemm's C, a MatMul's bias Add) is oneDNN's bias argument.
    std::vector<post_op> posts = op.posts;
    const tensor* bias = nullptr;
    if (!posts.empty() && posts[0].binary && posts[0].alg == alg::binary_add && op.scale == 1.0f) {
      const auto& c = r_.values[static_cast<std::size_t>(posts[0].src1)].constant;
      if (c && c->type() == element_type::float32 && static_cast<std::int64_t>(c->element_count()) == eo.back() &&
          (c->rank() == 0 ? eo.back() == 1 : c->sizes().back() == eo.back())) {
        bias = &*c;
        posts.erase(posts.begin());
      }
    }
    dims bias_dims(eo.size(), 1);
    bias_dims.back() = eo.back();
    const md_t bias_md = bias != nullptr ? plain(bias_dims) : md_t();
    const md_t dst_md = plain(eo);
    bool fused = false;
    std::vector<std::pair<int, int>> post_args;
    auto pd = with_posts<dn::matmul::primitive_desc>(posts, eo, [&](dn::primitive_attr at) {
      if (op.scale != 1.0f) at.set_output_scales(0, {op.scale});
      dn::matmul::desc d(a_md, b_md, bias_md, dst_md);
      return dn::matmul::primitive_desc(d, at, cpu_engine());
    }, fused, post_args);
    int sb = -1;
    if (const_b) {
      const tensor& bt = *r_.values[static_cast<std::size_t>(op.in[1])].constant;
      sb = reordered_constant(bt, matrix_md(eb, op.trans_b), pd.weights_desc());
    } else {
      sb = sb_runtime;
    }
    const int t = dst_slot(pd.dst_desc(), eo);
    collapse_from_ = 0;
    std::vector<std::pair<int, int>> args{{DNNL_ARG_SRC, sa}, {DNNL_ARG_WEIGHTS, sb}, {DNNL_ARG_DST, t}};
    if (bias != nullptr) args.emplace_back(DNNL_ARG_BIAS, constant_slot(*bias, bias_md));
    args.insert(args.end(), post_args.begin(), post_args.end());
    add_step(dn::matmul(pd), std::move(args), pd);
    dims res_dims = onnx_out;
    int res = alias(as_plain(t, eo), plain(onnx_out));
    if (!fused) res = unfused_posts(posts, res, res_dims);
    define(op.out, res, res_dims);
    return {};
  }

  Status pool(const ir_op& op) {
    const dims in = dims_of(op.in[0]);
    if (in.size() < 3 || in.size() > 5) return fail("pooling input " + str(in));
    const bool global = op.kernel.empty();
    const dims kernel = global ? dims(in.begin() + 2, in.end()) : op.kernel;
    if (kernel.size() != in.size() - 2) return fail("kernel_shape does not match the input rank");
    auto win = conv_window(op, in, kernel, false);
    if (!win) return win.status();
    dims out{in[0], in[1]};
    out.insert(out.end(), win->out.begin(), win->out.end());
    const int s = slot_of(op.in[0]);
    const md_t dst_any(out, dt::f32, tag::any);
    dn::pooling_v2_forward::desc d(dn::prop_kind::forward_inference, op.alg, md_of(s), dst_any, win->strides, kernel,
                                   win->dil, win->pad_l, win->pad_r);
    define(op.out, unary_step<dn::pooling_v2_forward>({d, base_attr(), cpu_engine()}, s), out);
    return {};
  }

  Status softmax(const ir_op& op) {
    const dims in = dims_of(op.in[0]);
    const auto rank = static_cast<std::int64_t>(std::max<std::size_t>(in.size(), 1));
    const std::int64_t axis = op.axis < 0 ? op.axis + rank : op.axis;
    if (axis < 0 || axis >= rank) return fail("axis " + std::to_string(op.axis) + " out of range for " + str(in));
    int s = slot_of(op.in[0]);
    const auto make = [&](const md_t& md) {
      dn::softmax_v2_forward::desc d(dn::prop_kind::forward_inference, alg::softmax_accurate, md, md, static_cast<int>(axis));
      return dn::softmax_v2_forward::primitive_desc(d, base_attr(), cpu_engine());
    };
    dn::softmax_v2_forward::primitive_desc pd;
    try {
      pd = make(md_of(s));
    } catch (const dn::error&) {
      s = as_plain(s, in);
      pd = make(md_of(s));
    }
    define(op.out, unary_step<dn::softmax_v2_forward>(pd, s), in);
    return {};
  }

  Status layernorm(const ir_op& op) {
    const dims in = dims_of(op.in[0]);
    if (in.empty()) return fail("layer normalisation of a scalar");
    const std::int64_t c = in.back();
    if (static_cast<std::int64_t>(op.weights.element_count()) != c || (!op.bias.empty() && static_cast<std::int64_t>(op.bias.element_count()) != c))
      return fail("scale or bias does not have " + std::to_string(c) + " elements");
    int s = as_plain(slot_of(op.in[0]), in);
    // oneDNN normalises ranks 2 to 5; over the last axis, any other rank is the same as [rows, last].
    const bool reshaped = in.size() < 2 || in.size() > 5;
    if (reshaped) s = alias(s, plain({volume(in) / std::max<std::int64_t>(c, 1), c}));
    auto flags = dn::normalization_flags::use_scale;
    if (!op.bias.empty()) flags |= dn::normalization_flags::use_shift;
    dn::layer_normalization_forward::desc d(dn::prop_kind::forward_inference, md_of(s), op.epsilon, flags);
    dn::layer_normalization_forward::primitive_desc pd(d, base_attr(), cpu_engine());
    const int t = scratch_slot(pd.dst_desc());
    const md_t cmd({c}, dt::f32, tag::a);
    std::vector<std::pair<int, int>> args{{DNNL_ARG_SRC, s}, {DNNL_ARG_DST, t}, {DNNL_ARG_SCALE, constant_slot(op.weights, cmd)}};
    if (!op.bias.empty()) args.emplace_back(DNNL_ARG_SHIFT, constant_slot(op.bias, cmd));
    add_step(dn::layer_normalization_forward(pd), std::move(args), pd);
    define(op.out, reshaped ? alias(t, plain(in)) : t, in);
    return {};
  }

  Status batchnorm(const ir_op& op) {
    const dims in = dims_of(op.in[0]);
    if (in.size() < 2) return fail("batch normalisation input " + str(in));
    const std::int64_t c = in[1];
    for (const tensor* t : {&op.weights, &op.bias, &op.mean, &op.variance})
      if (static_cast<std::int64_t>(t->element_count()) != c) return fail("scale, bias, mean or variance does not have C elements");
    int s = slot_of(op.in[0]);
    // oneDNN normalises ranks 2 to 5; per channel, [N, C, d2, d3, ...] is the same as [N, C, d2 d3 ...].
    const bool reshaped = in.size() > 5;
    const dims flat{in[0], c, volume(dims(in.begin() + 2, in.end()))};
    if (reshaped) s = alias(as_plain(s, in), plain(flat));
    const auto flags = dn::normalization_flags::use_global_stats | dn::normalization_flags::use_scale | dn::normalization_flags::use_shift;
    dn::batch_normalization_forward::desc d(dn::prop_kind::forward_inference, md_of(s), op.epsilon, flags);
    dn::batch_normalization_forward::primitive_desc pd(d, base_attr(), cpu_engine());
    const int t = scratch_slot(pd.dst_desc());
    const md_t cmd({c}, dt::f32, tag::a);
    add_step(dn::batch_normalization_forward(pd),
             {{DNNL_ARG_SRC, s}, {DNNL_ARG_DST, t}, {DNNL_ARG_MEAN, constant_slot(op.mean, cmd)},
              {DNNL_ARG_VARIANCE, constant_slot(op.variance, cmd)}, {DNNL_ARG_SCALE, constant_slot(op.weights, cmd)},
              {DNNL_ARG_SHIFT, constant_slot(op.bias, cmd)}},
             pd);
    define(op.out, reshaped ? alias(as_plain(t, flat), plain(in)) : t, in);
    return {};
  }

  Status transpose(const ir_op& op) {
    const dims in = dims_of(op.in[0]);
    const std::size_t n = in.size();
    std::vector<std::int64_t> perm = op.perm;
    if (perm.empty())
      for (std::size_t i = 0; i < n; ++i) perm.push_back(static_cast<std::int64_t>(n - 1 - i));
    if (perm.size() != n) return fail("perm has " + std::to_string(perm.size()) + " entries for input " + str(in));
    std::vector<bool> seen(n);
    dims out(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t p = perm[i] < 0 ? perm[i] + static_cast<std::int64_t>(n) : perm[i];
      if (p < 0 || p >= static_cast<std::int64_t>(n) || seen[static_cast<std::size_t>(p)]) return fail("perm is not a permutation");
      seen[static_cast<std::size_t>(p)] = true;
      perm[i] = p;
      out[i] = in[static_cast<std::size_t>(p)];
    }
    const int s = slot_of(op.in[0]);
    if (n <= 1) {
      define(op.out, s, in);
      return {};
    }
    // A transposition of strided memory is a view: the same buffer with permuted strides. Consumers that read any
    // strides (matrix products, element-wise and binary primitives) take it as it is; those that need row-major
    // memory reorder it once.
    if (const auto st = strides_of(md_of(s)); st && st->size() == n) {
      dims vs(n);
      for (std::size_t i = 0; i < n; ++i) vs[i] = (*st)[static_cast<std::size_t>(perm[i])];
      define(op.out, alias(s, strided(out, vs)), out);
      return {};
    }
    const md_t out_plain = plain(out);
    dims ostr(n, 1);
    for (std::size_t i = n - 1; i > 0; --i) ostr[i - 1] = ostr[i] * std::max<std::int64_t>(out[i], 1);
    dims src_strides(n);
    for (std::size_t i = 0; i < n; ++i) src_strides[static_cast<std::size_t>(perm[i])] = ostr[i];
    const int t = scratch_slot(out_plain);
    const int view = alias(t, strided(in, src_strides));
    reorder_into(s, view);
    define(op.out, t, out);
    return {};
  }

  Status reshape(const ir_op& op) {
    const dims in = dims_of(op.in[0]);
    const std::int64_t count = volume(in);
    dims out;
    const auto values_of = [&](int v, std::vector<std::int64_t>& vals) -> Status {
      const auto& val = r_.values[static_cast<std::size_t>(v)];
      if (const auto& h = hv_[static_cast<std::size_t>(v)]) {
        vals = *h;
        return {};
      }
      if (val.constant) {
        if (val.constant->type() != element_type::int64) return fail("shape or axes input is not int64");
        const auto* p = val.constant->typed<std::int64_t>();
        vals.assign(p, p + val.constant->element_count());
        return {};
      }
      if (val.input < 0)
        return fail("shape or axes input '" + val.name + "' is not available when planning");
      vals = in_.values[static_cast<std::size_t>(val.input)];
      return {};
    };
    const auto rank = static_cast<std::int64_t>(in.size());
    switch (op.form) {
      case reshape_form::reshape: {
        std::vector<std::int64_t> shape;
        if (auto st = values_of(op.in[1], shape); !st) return st;
        std::int64_t known = 1;
        int infer = -1;
        out.resize(shape.size());
        for (std::size_t i = 0; i < shape.size(); ++i) {
          std::int64_t d = shape[i];
          if (d == 0 && !op.allowzero) {
            if (i >= in.size()) return fail("shape " + str(shape) + " copies a dimension the input " + str(in) + " lacks");
            d = in[i];
          }
          if (d == -1) {
            if (infer >= 0) return fail("shape " + str(shape) + " has two -1");
            infer = static_cast<int>(i);
            continue;
          }
          if (d < 0) return fail("shape " + str(shape) + " has a negative dimension");
          out[i] = d;
          known *= d;
        }
        if (infer >= 0) {
          if (known == 0 || count % known != 0) return fail("cannot reshape " + str(in) + " to " + str(shape));
          out[static_cast<std::size_t>(infer)] = count / known;
        }
        break;
      }
      case reshape_form::flatten: {
        const std::int64_t axis = op.axis < 0 ? op.axis + rank : op.axis;
        if (axis < 0 || axis > rank) return fail("axis out of range");
        const std::int64_t left = std::accumulate(in.begin(), in.begin() + axis, std::int64_t{1}, std::multiplies<>());
        out = {left, left == 0 ? 0 : count / left};
        break;
      }
      case reshape_form::squeeze:
      case reshape_form::unsqueeze: {
        std::vector<std::int64_t> axes = op.axes;
        if (axes.empty() && op.in[1] >= 0)
          if (auto st = values_of(op.in[1], axes); !st) return st;
        if (op.form == reshape_form::squeeze) {
          std::vector<bool> drop(in.size(), false);
          for (auto a : axes) {
            const std::int64_t x = a < 0 ? a + rank : a;
            if (x < 0 || x >= rank || in[static_cast<std::size_t>(x)] != 1) return fail("cannot squeeze axis " + std::to_string(a) + " of " + str(in));
            drop[static_cast<std::size_t>(x)] = true;
          }
          for (std::size_t i = 0; i < in.size(); ++i)
            if (!(axes.empty() ? in[i] == 1 : drop[i])) out.push_back(in[i]);
        } else {
          const std::int64_t orank = rank + static_cast<std::int64_t>(axes.size());
          std::vector<bool> ins(static_cast<std::size_t>(orank), false);
          for (auto a : axes) {
            const std::int64_t x = a < 0 ? a + orank : a;
            if (x < 0 || x >= orank || ins[static_cast<std::size_t>(x)]) return fail("bad unsqueeze axes");
            ins[static_cast<std::size_t>(x)] = true;
          }
          std::size_t j = 0;
          for (std::int64_t i = 0; i < orank; ++i) out.push_back(ins[static_cast<std::size_t>(i)] ? 1 : in[j++]);
        }
        break;
      }
    }
    if (volume(out) != count) return fail("cannot reshape " + str(in) + " to " + str(out));
    if (out.size() > 12) return fail("rank above 12");
    define(op.out, alias(as_plain(slot_of(op.in[0]), in), plain(out)), out);
    return {};
  }

  Status concat(const ir_op& op) {
    const dims first = dims_of(op.in[0]);
    const auto rank = static_cast<std::int64_t>(first.size());
    const std::int64_t axis = op.axis < 0 ? op.axis + rank : op.axis;
    if (axis < 0 || axis >= rank) return fail("axis out of range");
    dims out = first;
    out[static_cast<std::size_t>(axis)] = 0;
    std::vector<int> srcs;
    std::vector<dims> src_dims;
    for (int v : op.in) {
      const dims d = dims_of(v);
      if (d.size() != first.size()) return fail("inputs differ in rank");
      for (std::size_t k = 0; k < d.size(); ++k)
        if (static_cast<std::int64_t>(k) != axis && d[k] != first[k]) return fail("inputs differ outside the axis");
      out[static_cast<std::size_t>(axis)] += d[static_cast<std::size_t>(axis)];
      if (volume(d) == 0) continue;
      srcs.push_back(slot_of(v));
      src_dims.push_back(d);
    }
    const auto make = [&] {
      std::vector<md_t> mds;
      for (int s : srcs) mds.push_back(md_of(s));
      return dn::concat::primitive_desc(static_cast<int>(axis), mds, cpu_engine(), base_attr());
    };
    dn::concat::primitive_desc pd;
    try {
      pd = make();
    } catch (const dn::error&) {
      for (std::size_t i = 0; i < srcs.size(); ++i) srcs[i] = as_plain(srcs[i], src_dims[i]);
      pd = make();
    }
    const int t = scratch_slot(pd.dst_desc());
    std::vector<std::pair<int, int>> args{{DNNL_ARG_DST, t}};
    for (std::size_t i = 0; i < srcs.size(); ++i) args.emplace_back(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), srcs[i]);
    add_step(dn::concat(pd), std::move(args), pd);
    define(op.out, t, out);
    return {};
  }

  Status split(const ir_op& op) {
    const dims in = dims_of(op.in[0]);
    const auto rank = static_cast<std::int64_t>(in.size());
    const std::int64_t axis = op.axis < 0 ? op.axis + rank : op.axis;
    if (axis < 0 || axis >= rank) return fail("axis out of range");
    const std::int64_t total = in[static_cast<std::size_t>(axis)];
    std::vector<std::int64_t> sizes = op.sizes;
    const auto n = static_cast<std::int64_t>(op.outs.size());
    if (sizes.empty()) {
      if (total % n != 0) return fail("cannot split " + std::to_string(total) + " into " + std::to_string(n) + " equal parts");
      sizes.assign(static_cast<std::size_t>(n), total / n);
    }
    if (static_cast<std::int64_t>(sizes.size()) != n || std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0}) != total)
      return fail("split sizes do not add up to " + std::to_string(total));
    // Each part: a reorder from a sub-memory view of the (row-major) input into its own buffer.
    const int s = as_plain(slot_of(op.in[0]), in);
    dims offsets(in.size(), 0);
    for (std::size_t i = 0; i < op.outs.size(); ++i) {
      dims d = in;
      d[static_cast<std::size_t>(axis)] = sizes[i];
      const int part = alias(s, md_of(s).submemory_desc(d, offsets));
      const int t = scratch_slot(plain(d));
      reorder_into(part, t);
      define(op.outs[i], t, d);
      offsets[static_cast<std::size_t>(axis)] += sizes[i];
    }
    return {};
  }

  /// An int64 shape computation, evaluated now into a host value.
  Status host(const ir_op& op) {
    const auto known = [&](int v, dims& d, std::vector<std::int64_t>& x) -> bool {
      if (v < 0) return false;
      const auto i = static_cast<std::size_t>(v);
      if (hv_[i]) {
        d = vd_[i];
        x = *hv_[i];
        return true;
      }
      const auto& c = r_.values[i].constant;
      if (!c || c->type() != element_type::int64) return false;
      d.assign(c->sizes().begin(), c->sizes().end());
      x.assign(c->typed<std::int64_t>(), c->typed<std::int64_t>() + c->element_count());
      return true;
    };
    // An input the node does not have is absent (-1), never read past the end of `op.in`.
    const auto input = [&](std::size_t i) { return i < op.in.size() ? op.in[i] : -1; };
    dims d0, out_d;
    std::vector<std::int64_t> x0, out_x;
    const std::string& t = op.host_op;
    if (t == "Shape") {
      const dims in = dims_of(input(0));
      const auto rank = static_cast<std::int64_t>(in.size());
      const auto clampi = [&](std::int64_t v) { return std::clamp(v < 0 ? v + rank : v, std::int64_t{0}, rank); };
      const std::int64_t b = clampi(op.start), e = clampi(op.end == INT64_MAX ? rank : op.end);
      for (std::int64_t i = b; i < e; ++i) out_x.push_back(in[static_cast<std::size_t>(i)]);
      out_d = {static_cast<std::int64_t>(out_x.size())};
    } else {
      if (!known(input(0), d0, x0)) return fail("shape computation input is not known when planning");
      const auto rank = static_cast<std::int64_t>(d0.size());
      std::vector<std::int64_t> axes = op.axes;
      dims da;
      if (axes.empty() && (t == "Unsqueeze" || t == "Squeeze") && input(1) >= 0 && !known(input(1), da, axes))
        return fail("axes are not known when planning");
      if (t == "Gather") {
        dims di;
        std::vector<std::int64_t> idx;
        if (!known(input(1), di, idx)) return fail("indices are not known when planning");
        const std::int64_t axis = op.axis < 0 ? op.axis + rank : op.axis;
        if (axis < 0 || axis >= rank) return fail("Gather axis out of range");
        const std::int64_t n = d0[static_cast<std::size_t>(axis)];
        const std::int64_t outer = volume(dims(d0.begin(), d0.begin() + axis));
        const std::int64_t inner = volume(dims(d0.begin() + axis + 1, d0.end()));
        for (std::int64_t o = 0; o < outer; ++o)
          for (std::int64_t j : idx) {
            const std::int64_t k = j < 0 ? j + n : j;
            if (k < 0 || k >= n) return fail("Gather index " + std::to_string(j) + " out of range for " + str(d0));
            for (std::int64_t q = 0; q < inner; ++q) out_x.push_back(x0[static_cast<std::size_t>((o * n + k) * inner + q)]);
          }
        out_d.assign(d0.begin(), d0.begin() + axis);
        out_d.insert(out_d.end(), di.begin(), di.end());
        out_d.insert(out_d.end(), d0.begin() + axis + 1, d0.end());
      } else if (t == "Unsqueeze" || t == "Squeeze") {
        out_x = x0;
        if (t == "Squeeze") {
          for (std::int64_t i = 0; i < rank; ++i) {
            const bool listed = std::any_of(axes.begin(), axes.end(), [&](std::int64_t a) { return (a < 0 ? a + rank : a) == i; });
            if (!(axes.empty() ? d0[static_cast<std::size_t>(i)] == 1 : listed)) out_d.push_back(d0[static_cast<std::size_t>(i)]);
          }
        } else {
          const auto orank = rank + static_cast<std::int64_t>(axes.size());
          std::size_t j = 0;
          for (std::int64_t i = 0; i < orank; ++i) {
            const bool listed = std::any_of(axes.begin(), axes.end(), [&](std::int64_t a) { return (a < 0 ? a + orank : a) == i; });
            out_d.push_back(listed ? 1 : d0[j++]);
          }
        }
      } else if (t == "Concat") {
        const std::int64_t axis = op.axis < 0 ? op.axis + rank : op.axis;
        if (axis < 0 || axis >= rank) return fail("Concat axis out of range");
        std::vector<dims> ds;
        std::vector<std::vector<std::int64_t>> xs;
        out_d = d0;
        out_d[static_cast<std::size_t>(axis)] = 0;
        for (int v : op.in) {
          dims d;
          std::vector<std::int64_t> x;
          if (!known(v, d, x) || d.size() != d0.size()) return fail("Concat input is not known when planning");
          out_d[static_cast<std::size_t>(axis)] += d[static_cast<std::size_t>(axis)];
          ds.push_back(d);
          xs.push_back(x);
        }
        const std::int64_t outer = volume(dims(d0.begin(), d0.begin() + axis));
        for (std::int64_t o = 0; o < outer; ++o)
          for (std::size_t k = 0; k < xs.size(); ++k) {
            const std::int64_t chunk = volume(dims(ds[k].begin() + axis, ds[k].end()));
            out_x.insert(out_x.end(), xs[k].begin() + o * chunk, xs[k].begin() + (o + 1) * chunk);
          }
      } else if (t == "Slice") {
        if (rank != 1) return fail("Slice of an int64 tensor of rank " + std::to_string(rank));
        dims dd;
        std::vector<std::int64_t> st, en, ax, sp;
        if (!known(input(1), dd, st) || !known(input(2), dd, en)) return fail("Slice bounds are not known when planning");
        if (input(3) >= 0 && !known(input(3), dd, ax)) return fail("Slice axes are not known when planning");
        if (input(4) >= 0 && !known(input(4), dd, sp)) return fail("Slice steps are not known when planning");
        if (st.size() != 1 || en.size() != 1 || (!ax.empty() && ax[0] != 0 && ax[0] != -1)) return fail("Slice of a 1-D tensor needs one start and end on axis 0");
        const std::int64_t n = d0[0], step = sp.empty() ? 1 : sp[0];
        if (step == 0) return fail("Slice step 0");
        const auto norm = [&](std::int64_t v, std::int64_t lo, std::int64_t hi) { return std::clamp(v < 0 ? v + n : v, lo, hi); };
        const std::int64_t b = step > 0 ? norm(st[0], 0, n) : norm(st[0], -1, n - 1);
        const std::int64_t e = step > 0 ? norm(en[0], 0, n) : norm(en[0], -1, n - 1);
        for (std::int64_t i = b; step > 0 ? i < e : i > e; i += step) out_x.push_back(x0[static_cast<std::size_t>(i)]);
        out_d = {static_cast<std::int64_t>(out_x.size())};
      } else {
        return fail("shape operator " + t + " is not evaluated when planning");
      }
    }
    vd_[static_cast<std::size_t>(op.out)] = out_d;
    hv_[static_cast<std::size_t>(op.out)] = std::move(out_x);
    return {};
  }

  // ---- boundary and memory ----
  void finish_outputs() {
    std::vector<bool> taken(bufs_.size(), false);
    for (std::size_t k = 0; k < r_.outputs.size(); ++k) {
      const int v = r_.outputs[k];
      if (const auto& h = hv_[static_cast<std::size_t>(v)]) {  // an int64 result of a shape computation
        pl_->out_dims.push_back(vd_[static_cast<std::size_t>(v)]);
        pl_->out_types.push_back(element_type::int64);
        pl_->host_out.push_back(*h);
        continue;
      }
      pl_->out_types.push_back(element_type::float32);
      pl_->host_out.emplace_back();
      const int s = slot_of(v);
      const dims d = dims_of(v);
      pl_->out_dims.push_back(d);
      const md_t target = plain(d);
      const slot sl = pl_->slots[static_cast<std::size_t>(s)];
      if (sl.w == where::scratch && sl.md == target && !taken[static_cast<std::size_t>(sl.index)] &&
          bufs_[static_cast<std::size_t>(sl.index)].bytes == target.get_size()) {
        taken[static_cast<std::size_t>(sl.index)] = true;
        for (auto& x : pl_->slots)
          if (x.w == where::scratch && x.index == sl.index) x.w = where::output, x.index = static_cast<int>(k);
        continue;
      }
      if (volume(d) == 0) continue;
      const int t = add_slot({where::output, static_cast<int>(k), target});
      reorder_into(s, t);
    }
  }

  /// Offsets in one scratch block: a buffer reuses the space of one whose last use came before its first.
  void allocate_scratch() {
    std::vector<std::size_t> order(bufs_.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return bufs_[a].first < bufs_[b].first; });
    struct block {
      std::size_t offset, bytes;
      int last;
    };
    std::vector<block> blocks;
    pl_->buffer_offset.assign(bufs_.size(), 0);
    std::size_t end = 0;
    for (std::size_t i : order) {
      const auto& b = bufs_[i];
      if (b.last < 0) continue;  // never used (an output now)
      const std::size_t need = (b.bytes + 63) / 64 * 64;
      block* best = nullptr;
      for (auto& bl : blocks)
        if (bl.last < b.first && bl.bytes >= need && (best == nullptr || bl.bytes < best->bytes)) best = &bl;
      if (best == nullptr) {
        blocks.push_back({end, need, b.last});
        end += need;
        pl_->buffer_offset[i] = blocks.back().offset;
      } else {
        best->last = b.last;
        pl_->buffer_offset[i] = best->offset;
      }
    }
    pl_->pad_offset = end;
    pl_->scratch_bytes = end + (pl_->pad_bytes + 63) / 64 * 64;
  }

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

/// A compiled partition: its operations and the plans made for the input shapes seen so far.
class compiled_partition {
 public:
  explicit compiled_partition(ir r) : r_(std::move(r)) {
    value_inputs_.assign(r_.inputs.size(), false);
    for (const auto& op : r_.ops) {
      const bool reads_values = op.kind == op_kind::host ? op.host_op != "Shape" : op.kind == op_kind::reshape;
      for (std::size_t k = op.kind == op_kind::reshape ? 1 : 0; reads_values && k < op.in.size(); ++k) {
        if (op.in[k] < 0) continue;
        const auto& v = r_.values[static_cast<std::size_t>(op.in[k])];
        if (!v.constant && v.input >= 0) value_inputs_[static_cast<std::size_t>(v.input)] = true;
      }
    }
    // Inputs read only by Shape: their dims matter, not their memory or element type.
    dims_only_.assign(r_.inputs.size(), false);
    for (std::size_t i = 0; i < r_.inputs.size(); ++i) {
      const int v = r_.inputs[i];
      bool shape_only = true, used = false;
      for (const auto& op : r_.ops) {
        const bool reads = std::find(op.in.begin(), op.in.end(), v) != op.in.end() ||
                           std::any_of(op.posts.begin(), op.posts.end(), [&](const post_op& p) { return p.binary && p.src1 == v; });
        if (!reads) continue;
        used = true;
        shape_only = shape_only && op.kind == op_kind::host && op.host_op == "Shape";
      }
      const bool output = std::find(r_.outputs.begin(), r_.outputs.end(), v) != r_.outputs.end();
      dims_only_[i] = used && shape_only && !output;
    }
  }

  /// The input shapes of a call: `f(i, value, shapes)` fills in each partition input that is not a constant, and
  /// returns false to give up (nullopt).
  template <class F>
  std::optional<input_shapes> shapes_from(F&& f) const {
    input_shapes in;
    in.sizes.resize(r_.inputs.size());
    in.values.resize(r_.inputs.size());
    in.dims_only = dims_only_;
    in.is_values = value_inputs_;
    for (std::size_t i = 0; i < r_.inputs.size(); ++i) {
      const auto& val = r_.values[static_cast<std::size_t>(r_.inputs[i])];
      if (!val.constant && !f(i, val, in)) return std::nullopt;
    }
    return in;
  }

  /// Plans for shapes known before any run (every input static): weights are reordered now, at compile time.
  Status prepare(const graph& g) {
    const auto in = shapes_from([&](std::size_t i, const ir_value& val, input_shapes& sh) {
      if (value_inputs_[i]) return false;
      const auto& t = g.value(g.find_value(val.name)).type;
      if (!t.dims || !t.dims->is_static()) return false;
      const auto s = *t.dims->sizes();
      sh.sizes[i].assign(s.begin(), s.end());
      return true;
    });
    if (!in) return {};
    auto p = plan_for(*in);
    if (!p) return p.status();
    static_plan_ = *p;
    return {};
  }

  /// The context binary a restored partition reads its constants from, and the threads to verify them on.
  void set_source(std::shared_ptr<const ep_context_binary> b, unsigned threads) {
    source_ = std::move(b);
    verify_threads_ = threads;
  }
  /// Weights in their final layout for the plan of input shapes `key` (an EP context's), with their owner.
  void set_prelaid(std::vector<std::int64_t> key, std::vector<laid_weight> w, std::vector<deferred_constant> deferred) {
    prelaid_key_ = std::move(key);
    prelaid_ = std::move(w);
    deferred_ = std::move(deferred);
  }
  /// For a restored partition once its static shapes are planned: the constants read in place from a context binary
  /// that the plan does not read (plain weights it has laid out, shape values already computed) leave memory; a later
  /// plan that reads one maps it back in.
  void release_unread_constants() const {
    if (!static_plan_) return;
    const std::unordered_set<const void*> read(static_plan_->constants.begin(), static_plan_->constants.end());
    const auto drop = [&](const tensor& t) {
      if (!t.empty() && t.is_file_backed() && !read.contains(t.data())) release_file_pages(t.data(), t.byte_size());
    };
    for (const auto& v : r_.values)
      if (v.constant) drop(*v.constant);
    for (const auto& op : r_.ops)
      for (const tensor* t : {&op.weights, &op.bias, &op.mean, &op.variance}) drop(*t);
  }
  /// The plan made at compile time for static input shapes (null when the shapes were not known).
  [[nodiscard]] const std::shared_ptr<const plan>& static_plan() const noexcept { return static_plan_; }

  Status run(compute_context& ctx) const {
    // Shapes seen before: the plan is found by comparing the inputs with each plan's key in place (no allocation).
    std::shared_ptr<const plan> hit;
    {
      std::shared_lock lock(mu_);
      for (const auto& p : plans_)
        if (key_matches(p->key, ctx)) {
          hit = p;
          break;
        }
    }
    omp_set_num_threads(std::max(1, ctx.thread_count()));
    if (hit) return execute(*hit, ctx);
    Status bad;
    const auto in = shapes_from([&](std::size_t i, const ir_value& val, input_shapes& sh) {
      const tensor& t = ctx.input(i);
      if (value_inputs_[i]) {
        if (t.type() != element_type::int64) {
          bad = Status(errc::invalid_argument, cat("oneDNN provider: partition '", r_.name, "': input '", val.name, "' is not int64"));
          return false;
        }
        sh.values[i].assign(t.typed<std::int64_t>(), t.typed<std::int64_t>() + t.element_count());
        sh.sizes[i].assign(t.sizes().begin(), t.sizes().end());
        return true;
      }
      if (t.type() != element_type::float32 && !dims_only_[i]) {
        bad = Status(errc::invalid_argument, cat("oneDNN provider: partition '", r_.name, "': input '", val.name, "' is ",
                                                 to_string(t.type()), ", expected float32"));
        return false;
      }
      sh.sizes[i].assign(t.sizes().begin(), t.sizes().end());
      return true;
    });
    if (!in) return bad;
    // Planning at a first run with new shapes (weight reorders) and the primitives run on the session's intra-op
    // thread count of OpenMP threads (set above).
    auto pr = plan_for(*in);
    if (!pr) return pr.status();
    const plan& pl = **pr;
    return execute(pl, ctx);
  }

  [[nodiscard]] const ir& operations() const noexcept { return r_; }

 private:
  static std::vector<std::int64_t> key_of(const input_shapes& in) {
    std::vector<std::int64_t> k;
    for (std::size_t i = 0; i < in.sizes.size(); ++i) {
      k.push_back(static_cast<std::int64_t>(in.sizes[i].size()));
      k.insert(k.end(), in.sizes[i].begin(), in.sizes[i].end());
      k.push_back(-static_cast<std::int64_t>(in.values[i].size()) - 1);
      k.insert(k.end(), in.values[i].begin(), in.values[i].end());
    }
    return k;
  }

  /// True when the call's inputs give `key` (key_of's layout), with the element types a plan expects.
  bool key_matches(const std::vector<std::int64_t>& key, const compute_context& ctx) const {
    std::size_t at = 0;
    const auto take = [&](std::int64_t v) { return at < key.size() && key[at++] == v; };
    for (std::size_t i = 0; i < r_.inputs.size(); ++i) {
      if (r_.values[static_cast<std::size_t>(r_.inputs[i])].constant) {
        if (!take(0) || !take(-1)) return false;
        continue;
      }
      const tensor& t = ctx.input(i);
      const element_type want = value_inputs_[i] ? element_type::int64 : element_type::float32;
      if (t.type() != want && !dims_only_[i]) return false;
      if (!take(static_cast<std::int64_t>(t.rank()))) return false;
      for (auto d : t.sizes())
        if (!take(d)) return false;
      if (!value_inputs_[i]) {
        if (!take(-1)) return false;
        continue;
      }
      if (!take(-static_cast<std::int64_t>(t.element_count()) - 1)) return false;
      for (std::size_t k = 0; k < t.element_count(); ++k)
        if (!take(t.typed<std::int64_t>()[k])) return false;
    }
    return at == key.size();
  }

  Result<std::shared_ptr<const plan>> plan_for(const input_shapes& in) const {
    const auto key = key_of(in);
    {
      std::shared_lock lock(mu_);
      for (const auto& p : plans_)
        if (p->key == key) return p;
    }
    std::unique_lock lock(mu_);
    for (const auto& p : plans_)
      if (p->key == key) return p;
    plan_builder b(r_, in, !prelaid_.empty() && key == prelaid_key_ && !ignore_stored_layouts.load(std::memory_order_relaxed) ? &prelaid_ : nullptr,
                   &prelaid_, deferred_.empty() ? nullptr : &deferred_, source_.get());
    auto built = b.build();
    if (!built) return built.status();
    (*built)->key = key;
    if (plans_.size() >= 16) plans_.erase(plans_.begin());  // shapes that keep changing: keep the recent ones
    plans_.push_back(*built);
    return std::shared_ptr<const plan>(*built);
  }

  static std::unique_ptr<exec_state> make_state(const plan& pl) {
    auto& eng = cpu_engine();
    auto st = std::make_unique<exec_state>();
    st->mem.reserve(pl.slots.size());
    st->handle.assign(pl.slots.size(), nullptr);
    for (std::size_t i = 0; i < pl.slots.size(); ++i) {
      const auto& s = pl.slots[i];
      void* p = s.w == where::constant ? const_cast<void*>(pl.constants[static_cast<std::size_t>(s.index)]) : nullptr;
      st->mem.emplace_back(s.md, eng, p);
      st->handle[i] = p;
    }
    if (pl.pad_bytes > 0) st->pad = dn::memory(md_t({static_cast<std::int64_t>(pl.pad_bytes)}, dt::u8, tag::a), eng, nullptr);
    st->args.resize(pl.steps.size());
    for (std::size_t k = 0; k < pl.steps.size(); ++k) {
      for (const auto& [a, s] : pl.steps[k].args) st->args[k].emplace(a, st->mem[static_cast<std::size_t>(s)]);
      if (pl.steps[k].scratchpad) st->args[k].emplace(DNNL_ARG_SCRATCHPAD, st->pad);
    }
    st->stream = dn::stream(eng);
    return st;
  }

  /// Before a plan's first run: the constants it reads in place from a context binary match their hashes. Once per
  /// plan (and per tensor of the binary, whichever plan or session asks first); a damaged binary fails every run.
  Status verify_constants(const plan& pl) const {
    std::lock_guard lock(pl.verify_mu);
    if (pl.verified.load(std::memory_order_relaxed)) return {};
    std::vector<std::uint32_t> idx;
    for (const auto& s : pl.slots)
      if (s.w == where::constant)
        for (auto i : source_->tensors_in(pl.constants[static_cast<std::size_t>(s.index)], 1)) idx.push_back(i);
    std::sort(idx.begin(), idx.end());
    idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
    // On threads of its own that end with it: the session pool's workers would spin after hashing, beside the
    // OpenMP threads of the run that follows (a first run of llm_prefill took 130 ms instead of 28).
    if (auto st = source_->verify_tensors(idx, verify_threads_); !st)
      return Status(st.code(), cat("oneDNN provider: partition '", r_.name, "': ", st.message()));
    pl.verified.store(true, std::memory_order_release);
    return {};
  }

  Status execute(const plan& pl, compute_context& ctx) const {
    if (source_ && !pl.verified.load(std::memory_order_acquire)) EPSTACK_RETURN_IF_ERROR(verify_constants(pl));
    std::unique_ptr<exec_state> st;
    {
      std::lock_guard lock(pl.idle_mu);
      if (!pl.idle.empty()) {
        st = std::move(pl.idle.back());
        pl.idle.pop_back();
      }
    }
    Status result;
    try {
      if (!st) st = make_state(pl);
      auto& outs = st->outs;
      outs.assign(pl.out_dims.size(), nullptr);
      for (std::size_t k = 0; k < pl.out_dims.size(); ++k) {
        outs[k] = ctx.allocate_output(k, pl.out_types[k], pl.out_dims[k]).mutable_data();
        if (pl.out_types[k] == element_type::int64 && !pl.host_out[k].empty())
          std::memcpy(outs[k], pl.host_out[k].data(), pl.host_out[k].size() * sizeof(std::int64_t));
      }
      tensor scratch;
      std::byte* base = nullptr;
      if (pl.scratch_bytes > 0) {
        scratch = ctx.scratch(element_type::uint8, pl.scratch_bytes + 64);
        auto addr = reinterpret_cast<std::uintptr_t>(scratch.mutable_data());
        base = scratch.mutable_data() + ((64 - addr % 64) % 64);
      }
      for (std::size_t i = 0; i < pl.slots.size(); ++i) {
        const auto& s = pl.slots[i];
        void* p = nullptr;
        switch (s.w) {
          case where::input: p = const_cast<std::byte*>(ctx.input(static_cast<std::size_t>(s.index)).data()); break;
          case where::output: p = outs[static_cast<std::size_t>(s.index)]; break;
          case where::constant: continue;
          case where::scratch: p = base + pl.buffer_offset[static_cast<std::size_t>(s.index)]; break;
        }
        if (p != st->handle[i]) st->mem[i].set_data_handle(p), st->handle[i] = p;
      }
      if (pl.pad_bytes > 0 && st->pad_handle != base + pl.pad_offset) {
        st->pad_handle = base + pl.pad_offset;
        st->pad.set_data_handle(st->pad_handle);
      }
      for (std::size_t k = 0; k < pl.steps.size(); ++k) pl.steps[k].prim.execute(st->stream, st->args[k]);
      st->stream.wait();
    } catch (const dn::error& e) {
      result = Status(errc::ep_fail, cat("oneDNN provider: partition '", r_.name, "': oneDNN: ", e.what()));
    } catch (const std::bad_alloc&) {
      result = Status(errc::fail, cat("oneDNN provider: partition '", r_.name, "': out of memory"));
    }
    if (st) {
      std::lock_guard lock(pl.idle_mu);
      pl.idle.push_back(std::move(st));
    }
    return result;
  }

  ir r_;
  std::vector<bool> value_inputs_;
  std::vector<bool> dims_only_;
  std::vector<std::int64_t> prelaid_key_;
  std::vector<laid_weight> prelaid_;
  std::vector<deferred_constant> deferred_;
  std::shared_ptr<const ep_context_binary> source_;
  unsigned verify_threads_ = 1;
  std::shared_ptr<const plan> static_plan_;
  mutable std::shared_mutex mu_;
  mutable std::vector<std::shared_ptr<const plan>> plans_;
};

/// The function `compile` returns for a partition (a named type, so an EP context can find the partition in it).
struct partition_fn {
  std::shared_ptr<compiled_partition> c;
  Status operator()(compute_context& ctx) const { return c->run(ctx); }
};

// The plan key of the partition's runtime inputs: `key` (over every input) without the entries of constant inputs.
std::vector<std::int64_t> runtime_key(const ir& r, const std::vector<std::int64_t>& key) {
  std::vector<std::int64_t> out;
  std::size_t at = 0;
  for (int v : r.inputs) {
    const std::size_t start = at;
    if (at >= key.size()) return {};
    at += 1 + static_cast<std::size_t>(key[at]);  // rank, dims
    if (at >= key.size()) return {};
    at += 1 + static_cast<std::size_t>(-key[at] - 1);  // -(count)-1, values
    if (!r.values[static_cast<std::size_t>(v)].constant)
      out.insert(out.end(), key.begin() + static_cast<std::ptrdiff_t>(start), key.begin() + static_cast<std::ptrdiff_t>(at));
  }
  return out;
}

}  // namespace

Result<ep_context_record> serialize(const partition& part, const compute_function& fn, ep_context_builder& b) {
  const auto* pf = fn.target<partition_fn>();
  if (pf == nullptr)
    return Status(errc::ep_fail, cat("oneDNN provider: partition '", part.name, "' was not compiled by this provider"));
  const auto& c = *pf->c;
  const auto& sp = c.static_plan();
  std::vector<std::int64_t> key;
  if (sp) key = runtime_key(c.operations(), sp->key);
  return encode_context(c.operations(), sp ? &key : nullptr, sp ? &sp->laid : nullptr, b);
}

Result<compute_function> restore(const ep_context_restore& rr, const dnnl_options& options) {
  auto d = decode_context(rr);
  if (!d) return d.status();
  // Stored laid-out weights were planned with or without Winograd: plan the same way, so they fit as stored.
  d->r.winograd = options.winograd;
  if (!d->laid.empty())
    d->r.winograd = std::any_of(d->laid.begin(), d->laid.end(), [](const laid_weight& w) {
      return w.md.data.format_kind == dnnl_format_kind_wino;
    });
  // Verified now: what planning reads (shape values and other non-float constants). Float constants and laid-out
  // weights are verified before a reorder reads them or before the first run of a plan that reads them in place.
  {
    std::vector<std::uint32_t> laid;
    for (const auto& w : d->laid)
      for (auto i : rr.binary->tensors_in(w.data.get(), 1)) laid.push_back(i);
    std::vector<std::uint32_t> now;
    for (auto i : rr.graph->tensors)
      if (rr.binary->tensors()[i].type != element_type::float32 && std::find(laid.begin(), laid.end(), i) == laid.end())
        now.push_back(i);
    EPSTACK_RETURN_IF_ERROR(rr.binary->verify_tensors(now, rr.verify_threads));
  }
  try {
    auto c = std::make_shared<compiled_partition>(std::move(d->r));
    c->set_source(rr.binary, rr.verify_threads);
    if (!d->laid.empty()) c->set_prelaid(std::move(d->key), std::move(d->laid), std::move(d->deferred));
    if (auto st = c->prepare(*rr.part->g); !st)
      return Status(errc::invalid_graph, cat("the restored operations do not plan: ", st.message()));
    c->release_unread_constants();
    return compute_function(partition_fn{std::move(c)});
  } catch (const dn::error& e) {
    return Status(errc::invalid_graph, cat("oneDNN provider: restoring '", rr.graph->name, "': oneDNN: ", e.what()));
  }
}

Result<std::vector<compute_function>> compile(std::span<const partition> parts, const dnnl_options& options) {
  std::vector<compute_function> fns;
  fns.reserve(parts.size());
  for (const auto& p : parts) {
    auto r = build_ir(p);
    if (!r) return r.status();
    r->winograd = options.winograd;
    auto c = std::make_shared<compiled_partition>(std::move(*r));
    if (auto st = c->prepare(*p.g); !st) return st;
    fns.emplace_back(partition_fn{std::move(c)});
  }
  return fns;
}

std::vector<std::string> describe(const partition& p) {
  auto r = build_ir(p);
  if (!r) return {r.status().message()};
  return describe_ir(*r);
}

std::string library_version() {
  const auto* v = dn::version();
  return cat(std::to_string(v->major), ".", std::to_string(v->minor), ".", std::to_string(v->patch));
}

std::uint64_t weight_reorder_count() { return weight_reorders.load(std::memory_order_relaxed); }
void set_ignore_stored_layouts(bool ignore) { ignore_stored_layouts.store(ignore, std::memory_order_relaxed); }

bool isa_supported(std::string_view recorded) {
  static constexpr std::string_view order[] = {"sse41", "avx", "avx2", "avx2_vnni", "avx512_core", "avx512_core_vnni",
                                               "avx512_core_bf16", "avx512_core_amx"};
  const auto rank = [](std::string_view isa) {
    for (std::size_t i = 0; i < std::size(order); ++i)
      if (order[i] == isa) return static_cast<int>(i);
    return -1;
  };
  const int want = rank(recorded), have = rank(cpu_isa());
  return want >= 0 && have >= want;
}

std::string cpu_isa() {
  switch (dn::get_effective_cpu_isa()) {
    case dn::cpu_isa::sse41: return "sse41";
    case dn::cpu_isa::avx: return "avx";
    case dn::cpu_isa::avx2: return "avx2";
    case dn::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dn::cpu_isa::avx512_core: return "avx512_core";
    case dn::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dn::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dn::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "isa_" + std::to_string(static_cast<int>(dn::get_effective_cpu_isa()));
  }
}

}  // namespace epstack::dnnl_ep
