// The executor: a run takes a run context (its arena) from the session's pool, checks the fed values as ONNX
// Runtime does, and runs the main graph's steps in their precomputed order; subgraphs run in frames of their own.
//
// Memory: every concurrent run takes a run context (an arena and reusable vectors) from the session's pool. Kernels
// allocate their outputs from the arena; after each step the executor finds, by address, the arena block each output
// lives in (so views such as Reshape's share their input's block) and counts its references; a value's last use
// releases them, and a block without references goes back to the arena's free list for the next allocation, in this
// run or the next. Graph outputs are allocated outside the arena (they leave the run).
#include "session_impl.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace epstack {
namespace {

// A fed value against the input's declaration, by ONNX Runtime's rules (InferenceSession::ValidateInputs, 1.17 and
// later) and with its messages, so that an application that runs there runs here:
// - the element type must match: "Unexpected input data type. Actual: (tensor(double)) , expected: (tensor(float))";
// - an input declared without a shape, or with the shape [] (a scalar), takes a tensor of any shape (exporters
//   declare scalars that applications feed as [1]);
// - a declared shape of rank 1 or more needs that rank ("Invalid rank for input: ...") and the fixed dimensions
//   (dim_value) it names; symbolic and unknown dimensions take any size, 0 included ("Got invalid dimensions for
//   input: ..." lists every index that differs).
Status check_input(const value& decl, const ivalue& given) {
  const auto& ty = decl.type;
  if (ty.kind == type_kind::sequence) {
    if (!given.is_sequence()) return Status(errc::invalid_argument, cat("input '", decl.name, "' must be a sequence"));
    return {};
  }
  if (!ty.is_tensor()) return {};
  if (!given.is_tensor())
    return Status(errc::invalid_argument, cat("input '", decl.name, "' must be a tensor, got a ", given.kind_name()));
  const tensor& t = given.as_tensor();
  if (t.empty()) return Status(errc::invalid_argument, cat("input '", decl.name, "' is an empty tensor"));
  if (t.type() != ty.elem)
    return Status(errc::invalid_argument, cat("Unexpected input data type. Actual: (tensor(", to_string(t.type()),
                                              ")) , expected: (tensor(", to_string(ty.elem), ")) for input '",
                                              decl.name, "'"));
  if (!ty.dims || ty.dims->rank() == 0) return {};
  if (t.rank() != ty.dims->rank())
    return Status(errc::invalid_argument, cat("Invalid rank for input: ", decl.name, " Got: ", std::to_string(t.rank()),
                                              " Expected: ", std::to_string(ty.dims->rank()),
                                              " Please fix either the inputs/outputs or the model."));
  std::string bad;
  for (std::size_t i = 0; i < t.rank(); ++i)
    if ((*ty.dims)[i].is_known() && (*ty.dims)[i].value != t.sizes()[i])
      bad += cat(" index: ", std::to_string(i), " Got: ", std::to_string(t.sizes()[i]), " Expected: ",
                 std::to_string((*ty.dims)[i].value), "\n");
  if (!bad.empty())
    return Status(errc::invalid_argument, cat("Got invalid dimensions for input: ", decl.name,
                                              " for the following indices\n", bad,
                                              " Please fix either the inputs/outputs or the model."));
  return {};
}

tensor clone_if(const tensor& t, bool needed) { return needed ? t.clone() : t; }

// ---------------------------------------------------------------------------------------------------------------
// A frame: one execution of one graph.
class frame final : public execution_frame {
 public:
  frame(const graph_exec& ge, run_context& rc, thread_pool* pool, std::vector<ivalue>& env,
        std::vector<std::byte*>& blocks, const frame* parent, bool profiling)
      : ge_(ge), rc_(rc), pool_(pool), env_(env), blocks_(blocks), parent_(parent), profiling_(profiling) {}

  tensor allocate(element_type type, std::span<const std::int64_t> sizes, bool persistent) override {
    if (persistent) return rc_.outputs->make(type, sizes);
    if (type == element_type::string) return tensor::uninitialized(type, sizes);
    const auto n = element_count(sizes);
    if (!n) throw std::length_error("allocate: invalid sizes");
    const std::size_t bytes = static_cast<std::size_t>(*n) * element_size(type);
    if (alloc_ != nullptr) return provider_allocate(type, sizes, std::max<std::size_t>(bytes, 1));
    return tensor::borrow(type, sizes, rc_.mem.allocate(bytes), nullptr);
  }

  // Memory from the allocator of the provider whose step is running, returned to it when the last tensor sharing
  // it goes (after the value's last use).
  tensor provider_allocate(element_type type, std::span<const std::int64_t> sizes, std::size_t bytes) const {
    void* q = alloc_->allocate(bytes);
    if (q == nullptr)
      throw std::runtime_error(cat("provider ", alloc_->type_key, ": its allocator returned no memory for ",
                                   std::to_string(bytes), " bytes"));
    if (reinterpret_cast<std::uintptr_t>(q) % tensor_alignment != 0) {
      alloc_->deallocate(q, bytes);
      throw std::runtime_error(cat("provider ", alloc_->type_key, ": its allocator returned memory that is not ",
                                   std::to_string(tensor_alignment), "-byte aligned"));
    }
    std::shared_ptr<const void> owner(q, [release = alloc_->deallocate, bytes](const void* x) {
      release(const_cast<void*>(x), bytes);
    });
    return tensor::borrow(type, sizes, q, std::move(owner));
  }

  // An input's arena block for an output of the running step: the value is its block's only holder (graph inputs,
  // initializers, outer-scope values, provider memory and graph outputs have no block in this frame), the step
  // reads it once and releases it (no later reader). After the step the output takes a reference to the block
  // before the input's is dropped, so the block passes from one value to the other.
  bool lend_input(std::size_t i) override {
    if (cur_ == nullptr || i >= cur_->inputs.size()) return false;
    const value_id v = cur_->inputs[i];
    if (v == no_id || blocks_[v] == nullptr || rc_.mem.refs(blocks_[v]) != 1) return false;
    if (std::count(cur_->inputs.begin(), cur_->inputs.end(), v) != 1) return false;
    if (std::find(cur_->release.begin(), cur_->release.end(), v) == cur_->release.end()) return false;
    ++rc_.lent;
    return true;
  }

  Status run_subgraph(const graph& body, std::span<const ivalue> inputs, std::vector<ivalue>& outputs) override {
    const auto it = ge_.subgraphs.find(&body);
    if (it == ge_.subgraphs.end())
      return Status(errc::fail, cat("graph '", body.name(), "' is not a subgraph of a node of graph '", ge_.g->name(), "'"));
    const graph_exec& sub = *it->second;
    std::vector<ivalue> env(body.value_count());
    std::vector<std::byte*> blocks(body.value_count(), nullptr);
    frame f(sub, rc_, pool_, env, blocks, this, profiling_);
    struct release_guard {
      frame& f;
      ~release_guard() { f.release_all(); }
    } guard{f};
    const auto& formal = body.inputs();
    std::size_t k = 0;
    for (value_id v : formal) {
      if (sub.is_constant[v]) continue;
      if (k >= inputs.size())
        return Status(errc::invalid_argument, cat("subgraph '", body.name(), "' takes ", std::to_string(formal.size()),
                                                  " inputs, got ", std::to_string(inputs.size())));
      env[v] = inputs[k++];
    }
    EPSTACK_RETURN_IF_ERROR(f.execute());
    outputs.clear();
    for (value_id v : body.outputs()) {
      const ivalue& x = f.get(v);
      outputs.push_back(x.is_tensor() ? ivalue(clone_if(x.as_tensor(), blocks[v] != nullptr || sub.is_constant[v])) : x);
    }
    return {};
  }

  // Looks a value up by name in this frame or an enclosing one.
  [[nodiscard]] const ivalue& lookup(std::size_t levels, value_id v) const {
    const frame* f = this;
    for (std::size_t i = 0; i < levels; ++i) f = f->parent_;
    return f->get(v);
  }
  // An initializer that is also a graph input is a default the caller may override.
  [[nodiscard]] const ivalue& get(value_id v) const {
    if (ge_.is_constant[v]) return env_[v].is_none() ? ge_.constants[v] : env_[v];
    return env_[v];
  }

  // Runs every step. The caller collects outputs, then calls release_all() (also after a failure).
  Status execute() {
    // src.first counts enclosing graphs from this one: 1 is the parent frame.
    for (const auto& [v, src] : ge_.outer) env_[v] = parent_->lookup(src.first - 1, src.second);
    return run_steps();
  }

  // Main graph: the outputs named by `wanted`, owned by the caller.
  Status collect(std::span<const value_id> wanted, const std::vector<const void*>& shared_owners,
                 std::vector<ivalue>& out) {
    for (value_id v : wanted) {
      const ivalue& x = get(v);
      if (!x.is_tensor()) {
        out.push_back(x);
        continue;
      }
      const tensor& t = x.as_tensor();
      // An output must not share storage with the session (initializers), the arena, or an input the caller owns.
      const bool shared = blocks_[v] != nullptr || (t.owner() == nullptr && t.is_borrowed()) ||
                          std::binary_search(shared_owners.begin(), shared_owners.end(), t.owner().get());
      out.push_back(shared ? rc_.outputs->copy(t) : t);
    }
    return {};
  }

  void release_all() {
    for (value_id v = 0; v < env_.size(); ++v) {
      if (blocks_[v] != nullptr) {
        rc_.mem.release(blocks_[v]);
        blocks_[v] = nullptr;
      }
      env_[v] = ivalue();
    }
  }

 private:
  Status run_steps() {
    std::vector<ivalue> ins, outs;
    for (const auto& s : ge_.steps) {
      ins.clear();
      for (value_id v : s.inputs) ins.push_back(v == no_id ? ivalue() : get(v));
      outs.assign(s.outputs.size(), ivalue());
      const std::size_t mark = rc_.mem.mark();
      compute_context ctx(ins, outs, this, pool_, std::span<const bool>(s.persistent.get(), s.outputs.size()));
      Status st;
      const auto t0 = profiling_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      alloc_ = s.allocator;
      cur_ = &s;
      try {
        st = (*s.fn)(ctx);
      } catch (const std::exception& e) {
        st = Status(errc::runtime_exception, e.what());
      }
      cur_ = nullptr;
      alloc_ = nullptr;
      if (profiling_) {
        s.ns->fetch_add(static_cast<std::uint64_t>(
                            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count()),
                        std::memory_order_relaxed);
        s.calls->fetch_add(1, std::memory_order_relaxed);
      }
      if (!st) {
        rc_.mem.end_step(mark);
        return std::move(st).with_context(s.label);
      }
      for (std::size_t i = 0; i < s.outputs.size(); ++i) {
        const value_id v = s.outputs[i];
        if (v == no_id) continue;
        ivalue& o = outs[i];
        if (o.is_sequence()) {
          // Sequences hold owned tensors: copy any element that lives in the arena.
          bool arena_items = false;
          for (const auto& t : o.as_sequence().items) arena_items = arena_items || rc_.mem.find(t.data()) != nullptr;
          if (arena_items) {
            tensor_sequence copy;
            copy.elem = o.as_sequence().elem;
            for (const auto& t : o.as_sequence().items) copy.items.push_back(t.clone());
            o = ivalue(std::move(copy));
          }
        } else if (o.is_tensor()) {
          if (std::byte* b = rc_.mem.find(o.as_tensor().data())) {
            rc_.mem.add_ref(b);
            blocks_[v] = b;
          }
        }
        env_[v] = std::move(o);
      }
      ins.clear();
      rc_.mem.end_step(mark);
      for (value_id v : s.release) {
        env_[v] = ivalue();
        if (blocks_[v] != nullptr) {
          rc_.mem.release(blocks_[v]);
          blocks_[v] = nullptr;
        }
      }
    }
    return {};
  }

  const graph_exec& ge_;
  run_context& rc_;
  thread_pool* pool_;
  std::vector<ivalue>& env_;
  std::vector<std::byte*>& blocks_;
  const frame* parent_;
  bool profiling_;
  const provider_binding* alloc_ = nullptr;  // the running step's provider allocator, if it has one
  const step* cur_ = nullptr;                // the running step (lend_input)
};

}  // namespace

Result<std::vector<ivalue>> session_core::run(std::span<const named_value> feeds, std::span<const std::string> names) const {
  const auto& d = *impl_;
  const auto& g = d.m.graph;
  // The run's scope on the pool: session.set_denormal_as_zero's mode on this thread and the runtime's threads, restored
  // after it; session.force_spinning_stop's count of runs in progress.
  const thread_pool::run_scope fp(*d.pool);
  std::vector<value_id> wanted;
  if (names.empty()) wanted = g.outputs();
  for (const auto& name : names) {
    const value_id v = g.find_value(name);
    if (v == no_id || !g.value(v).is_graph_output)
      return Status(errc::invalid_argument, cat("'", name, "' is not an output of the model"));
    wanted.push_back(v);
  }
  std::unique_ptr<run_context> rc;
  {
    std::lock_guard lock(d.mu);
    if (!d.idle.empty()) {
      rc = std::move(d.idle.back());
      d.idle.pop_back();
    }
  }
  if (!rc) {
    rc = std::make_unique<run_context>();
    rc->outputs = d.outputs_memory.get();
  }
  rc->env.resize(g.value_count());
  rc->blocks.assign(g.value_count(), nullptr);
  frame f(*d.main, *rc, d.pool.get(), rc->env, rc->blocks, nullptr, d.profiling);

  std::vector<const void*> owners = d.shared_owners;
  Status st;
  for (const auto& feed : feeds) {
    const value_id v = g.find_value(feed.name);
    if (v == no_id || !g.value(v).is_graph_input) {
      st = Status(errc::invalid_argument, cat("Invalid input name: ", feed.name));
      break;
    }
    if (!rc->env[v].is_none()) {
      st = Status(errc::invalid_argument, cat("input '", feed.name, "' is given twice"));
      break;
    }
    if (st = check_input(g.value(v), feed.value); !st) break;
    rc->env[v] = feed.value;
    if (feed.value.is_tensor() && feed.value.as_tensor().owner()) owners.push_back(feed.value.as_tensor().owner().get());
  }
  if (st)
    for (value_id v : g.inputs()) {
      // An optional input left out, or given as none, is an empty optional. An input nothing reads may be left out,
      // as ONNX Runtime allows; one that is read is refused here, before anything runs, where ONNX Runtime fails
      // in the kernel with the same words.
      const auto& val = g.value(v);
      if (rc->env[v].is_none() && !val.initializer && val.type.kind != type_kind::optional &&
          (!val.consumers.empty() || val.is_graph_output)) {
        st = Status(errc::invalid_argument, cat("Missing Input: ", val.name));
        break;
      }
    }
  std::vector<ivalue> result;
  if (st) {
    std::sort(owners.begin(), owners.end());
    st = f.execute();
    if (st) st = f.collect(wanted, owners, result);
  }
  f.release_all();
  {
    std::lock_guard lock(d.mu);
    d.idle.push_back(std::move(rc));
  }
  if (!st) return st;
  return result;
}

namespace {
void collect_profile(const graph_exec& ge, std::vector<session_core::step_profile>& out) {
  for (const auto& s : ge.steps)
    out.push_back({s.label, s.kind, s.calls->load(std::memory_order_relaxed),
                   static_cast<double>(s.ns->load(std::memory_order_relaxed)) / 1e6});
  for (const auto& [g, sub] : ge.subgraphs) collect_profile(*sub, out);
}
}  // namespace

std::vector<session_core::step_profile> session_core::profile() const {
  std::vector<step_profile> r;
  collect_profile(*impl_->main, r);
  // std::sort with a tie-break (stable_sort warns under clang with libstdc++ 12: get_temporary_buffer is deprecated).
  std::sort(r.begin(), r.end(), [](const auto& a, const auto& b) {
    return a.total_ms != b.total_ms ? a.total_ms > b.total_ms : a.label < b.label;
  });
  return r;
}

session_core::memory_stats session_core::memory() const {
  std::lock_guard lock(impl_->mu);
  memory_stats s;
  s.run_contexts = impl_->idle.size();
  for (const auto& rc : impl_->idle) {
    s.arena_bytes += rc->mem.reserved_bytes();
    s.in_place_outputs += rc->lent;
  }
  return s;
}

}  // namespace epstack
