// Compiling a partition for oneDNN: for each set of input shapes, a plan of primitives (weights reordered once into
// the formats the primitives chose, activations in blocked formats inside the partition, reorders at the boundary,
// one scratch block planned by liveness), built at compile time when the shapes are static, else at the first run
// with new shapes; then executed against the run's inputs, outputs and arena memory.
#include "plan_builder.hpp"

#include <epstack/providers/dnnl.hpp>

#include <climits>
#include <cstring>
#include <shared_mutex>
#include <type_traits>
#include <unordered_set>

// libgomp's, the OpenMP runtime oneDNN runs on (declared here rather than through <omp.h> and -fopenmp).
extern "C" void omp_set_num_threads(int n);
extern "C" void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags);
extern "C" int omp_get_thread_num();

namespace epstack::dnnl_ep {

parallel_runtime openmp_runtime() noexcept {
  // A parallel region of `threads` threads, the caller the first of them (libgomp's entry point for
  // `#pragma omp parallel num_threads(threads)`); its team is the one oneDNN's primitives then reuse.
  return {[](void (*fn)(void*), void* data, unsigned threads) { GOMP_parallel(fn, data, threads, 0); }, "OpenMP (libgomp)",
          [] { return static_cast<unsigned>(omp_get_thread_num()); }};
}

namespace {

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
std::uint64_t activation_reorder_count() { return value_reorders.load(std::memory_order_relaxed); }
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
