// The session core: optimisation, partitioning, one compile call per provider, and the executor.
//
// Memory: every concurrent run takes a run context (an arena and reusable vectors) from the session's pool. Kernels
// allocate their outputs from the arena; after each step the executor finds, by address, the arena block each output
// lives in (so views such as Reshape's share their input's block) and counts its references; a value's last use
// releases them, and a block without references goes back to the arena's free list for the next allocation, in this
// run or the next. Graph outputs are allocated outside the arena (they leave the run).
#include <epstack/runtime/session_core.hpp>

#include <epstack/ir/graph_algorithms.hpp>
#include <epstack/onnx/onnx_io.hpp>

#include <epstack/ep_context/contexts.hpp>
#include <epstack/ir/graph_view.hpp>
#include <epstack/partition/partitioner.hpp>

#include <boost/container/flat_map.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <unordered_map>

namespace epstack {
namespace {

using detail::cat;

// ---------------------------------------------------------------------------------------------------------------
// The arena: 64-byte aligned blocks at varied page offsets, recycled best-fit.
class arena {
 public:
  arena() = default;
  arena(const arena&) = delete;
  arena& operator=(const arena&) = delete;
  ~arena() {
    for (auto& [p, b] : live_) ::operator delete(b.raw, std::align_val_t{tensor_alignment});
    for (auto& f : free_) ::operator delete(f.raw, std::align_val_t{tensor_alignment});
  }

  std::byte* allocate(std::size_t bytes) {
    bytes = (std::max<std::size_t>(bytes, 1) + 255) & ~std::size_t{255};
    std::byte* p = nullptr;
    std::size_t size = bytes;
    std::byte* raw = nullptr;
    std::size_t colour_of_new = 0;
    // Best fit among the free blocks that do not waste more than the request (plus a little), the most recently
    // freed among equals (warmest in cache). Best fit makes every run after the first reuse the same blocks.
    auto it = free_.rend();
    for (auto f = free_.rbegin(); f != free_.rend(); ++f)
      if (f->size >= bytes && f->size <= 2 * bytes + 65536 && (it == free_.rend() || f->size < it->size)) it = f;
    if (it != free_.rend()) {
      size = it->size;
      p = it->p;
      raw = it->raw;
      colour_of_new = it->colour;
      free_.erase(std::next(it).base());
    } else {
      // Blocks start at different offsets within a page ("colours"), so that a kernel reading one block while writing
      // another does not have its loads falsely depend on its stores (4 KiB aliasing).
      const std::size_t colour = (created_++ * 11 % 63 + 1) * 64;
      // (Not on huge pages: activations are rewritten every run, and 2 MiB-aligned blocks measured slower.)
      raw = static_cast<std::byte*>(::operator new(bytes + colour, std::align_val_t{tensor_alignment}));
      p = raw + colour;
      reserved_ += bytes + colour;
      colour_of_new = colour;
    }
    live_.emplace(p, block{size, 0, raw, colour_of_new});
    fresh_.push_back(p);
    return p;
  }

  /// The base of the live block holding `p`, or null.
  std::byte* find(const std::byte* p) {
    if (p == nullptr || live_.empty()) return nullptr;
    auto it = live_.upper_bound(const_cast<std::byte*>(p));
    if (it == live_.begin()) return nullptr;
    --it;
    return p < it->first + it->second.size ? it->first : nullptr;
  }
  void add_ref(std::byte* base) { ++live_.find(base)->second.refs; }
  void release(std::byte* base) {
    auto it = live_.find(base);
    if (--it->second.refs <= 0) retire(it);
  }

  /// Blocks allocated from here on belong to the step that asked for the mark.
  [[nodiscard]] std::size_t mark() const noexcept { return fresh_.size(); }
  /// Frees the blocks allocated since `m` that no value references (scratch, unused outputs).
  void end_step(std::size_t m) {
    for (std::size_t i = m; i < fresh_.size(); ++i) {
      auto it = live_.find(fresh_[i]);
      if (it != live_.end() && it->second.refs <= 0) retire(it);
    }
    fresh_.resize(m);
  }
  [[nodiscard]] std::size_t reserved_bytes() const noexcept { return reserved_; }

 private:
  struct block {
    std::size_t size;
    int refs;
    std::byte* raw;       // what the allocation returned
    std::size_t colour;   // raw + colour is the block
  };
  struct free_block {
    std::size_t size;
    std::byte* p;
    std::byte* raw;
    std::size_t colour;
  };
  void retire(boost::container::flat_map<std::byte*, block>::iterator it) {
    free_.push_back({it->second.size, it->first, it->second.raw, it->second.colour});
    live_.erase(it);
  }
  boost::container::flat_map<std::byte*, block> live_;
  std::vector<free_block> free_;  // in the order they were freed
  std::size_t created_ = 0;
  std::vector<std::byte*> fresh_;
  std::size_t reserved_ = 0;
};

// ---------------------------------------------------------------------------------------------------------------
// The compiled plan of one graph.

struct step {
  const compute_function* fn = nullptr;
  std::string label;                   // "node 'x' (Op)" or "partition 'P'", for messages
  std::string kind;                    // the op type, or the partition's provider, for the profile
  std::vector<value_id> inputs, outputs;
  std::vector<value_id> release;       // values whose last use is this step
  const provider_binding* allocator = nullptr;  // the provider's allocator for its outputs (null: the arena)
  std::unique_ptr<bool[]> persistent;  // outputs that leave the graph
  // Profiling counters (written only when profiling is on).
  std::unique_ptr<std::atomic<std::uint64_t>> ns = std::make_unique<std::atomic<std::uint64_t>>(0);
  std::unique_ptr<std::atomic<std::uint64_t>> calls = std::make_unique<std::atomic<std::uint64_t>>(0);
};

struct graph_exec {
  const graph* g = nullptr;
  std::vector<step> steps;
  std::vector<ivalue> constants;  // initializers, by value id (none elsewhere)
  std::vector<bool> is_constant;
  // Values this graph uses but an enclosing graph defines: (levels up, value id there).
  std::vector<std::pair<value_id, std::pair<std::size_t, value_id>>> outer;
  std::unordered_map<const graph*, std::unique_ptr<graph_exec>> subgraphs;
};

struct run_context {
  arena mem;
  std::vector<ivalue> env;              // main graph values
  std::vector<std::byte*> blocks;       // main graph: arena block per value
};

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
    if (persistent || type == element_type::string) return tensor::uninitialized(type, sizes);
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
      out.push_back(clone_if(t, shared));
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
      try {
        st = (*s.fn)(ctx);
      } catch (const std::exception& e) {
        st = Status(errc::runtime_exception, e.what());
      }
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
};

// Where a value a subgraph uses comes from: (levels up, value id there), or nullopt.
std::optional<std::pair<std::size_t, value_id>> resolve_outer(const std::vector<const graph*>& scopes,
                                                              const std::string& name) {
  for (std::size_t up = 1; up <= scopes.size(); ++up) {
    const graph* s = scopes[scopes.size() - up];
    const auto v = s->find_value(name);
    if (v != no_id && s->is_defined_here(v)) return std::pair{up, v};
  }
  return std::nullopt;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------

struct session_core::impl {
  model m;
  optimization_report report;
  partition_plan plan;
  std::vector<compute_function> functions;  // one per partition, over every graph (see function_index)
  std::unique_ptr<graph_exec> main;
  std::vector<io_info> inputs, outputs;
  std::vector<const void*> shared_owners;  // storage owners of initializers (sorted)
  std::unique_ptr<thread_pool> pool;
  std::vector<provider_binding> providers;  // in priority order, as partitioned
  ep_context_report context;
  mutable std::mutex mu;
  mutable std::vector<std::unique_ptr<run_context>> idle;
  bool profiling = false;

  // Builds the executor of one graph from its plan. `indices[i][k]` is the function of partition k of `plans[i]`.
  Result<std::unique_ptr<graph_exec>> build_exec(const graph_plan& gp, std::vector<const graph*>& scopes,
                                                 const std::vector<graph_plan*>& plans,
                                                 const std::vector<std::vector<std::size_t>>& indices) {
    const auto& fn_index =
        indices[static_cast<std::size_t>(std::find(plans.begin(), plans.end(), &gp) - plans.begin())];
    auto ge = std::make_unique<graph_exec>();
    const graph& g = *gp.g;
    ge->g = &g;
    ge->constants.resize(g.value_count());
    ge->is_constant.assign(g.value_count(), false);
    for (value_id v : g.initializers()) {
      ge->constants[v] = *g.value(v).initializer;
      ge->is_constant[v] = true;
      if (const void* o = g.value(v).initializer->owner().get()) shared_owners.push_back(o);
    }
    // Values used here but defined in an enclosing graph.
    for (value_id v = 0; v < g.value_count(); ++v) {
      const bool used = !g.value(v).consumers.empty() || g.value(v).is_graph_output;
      if (g.is_defined_here(v) || !used) continue;
      auto src = resolve_outer(scopes, g.value(v).name);
      if (!src) return Status(errc::invalid_graph, cat("graph '", g.name(), "' uses value '", g.value(v).name,
                                                       "', which no enclosing graph defines"));
      ge->outer.emplace_back(v, *src);
    }
    scopes.push_back(&g);
    for (const auto& s : gp.subgraphs) {
      EPSTACK_ASSIGN_OR_RETURN(auto sub, build_exec(*s.plan, scopes, plans, indices));
      ge->subgraphs.emplace(s.plan->g, std::move(sub));
    }
    scopes.pop_back();
    // Steps in execution order, with the last use of every value.
    std::vector<std::size_t> last_use(g.value_count(), no_index);
    for (std::size_t i = 0; i < gp.execution_order.size(); ++i) {
      const std::size_t k = gp.execution_order[i];
      const auto& part = gp.partitions[k];
      step s;
      s.fn = &functions[fn_index[k]];
      s.label = part.is_fused() ? cat("partition '", part.name, "'") : cat("node ", g.describe(part.nodes.front()));
      s.kind = part.is_fused() ? cat(plan.providers[gp.partition_provider[k]], " partition")
                               : (g.node(part.nodes.front()).domain.empty()
                                      ? g.node(part.nodes.front()).op_type
                                      : cat(g.node(part.nodes.front()).domain, ".", g.node(part.nodes.front()).op_type));
      s.inputs = part.inputs;
      s.outputs = part.outputs;
      if (const auto& b = providers[gp.partition_provider[k]]; b.allocate && b.deallocate) s.allocator = &b;
      s.persistent = std::make_unique<bool[]>(std::max<std::size_t>(s.outputs.size(), 1));
      for (std::size_t o = 0; o < s.outputs.size(); ++o)
        s.persistent[o] = s.outputs[o] != no_id && g.value(s.outputs[o]).is_graph_output;
      for (value_id v : part.inputs)
        if (v != no_id) last_use[v] = i;
      for (node_id n : part.nodes)
        for (value_id v : g.node(n).implicit_inputs) last_use[v] = i;
      for (value_id v : part.outputs)
        if (v != no_id && last_use[v] == no_index) last_use[v] = i;  // produced and never used: free at once
      ge->steps.push_back(std::move(s));
    }
    for (value_id v = 0; v < g.value_count(); ++v) {
      const auto& rec = g.value(v);
      if (last_use[v] == no_index || rec.is_graph_output || ge->is_constant[v]) continue;
      ge->steps[last_use[v]].release.push_back(v);
    }
    return ge;
  }
};

namespace {
// Provider `p` asked about node `n` alone, compiling it when it takes it (constant folding before partitioning).
node_compiler compile_one(const provider_binding& p) {
  return [get = p.get_capability, compile = p.compile](const graph& g, node_id n) -> Result<compute_function> {
    std::vector<bool> keep(g.node_count());
    keep[n] = true;
    const graph_view<graph> view(g, std::move(keep));
    bool taken = false;
    for (const auto& cap : get(view)) taken = taken || (!cap.is_group() && cap.nodes == std::vector<node_id>{n});
    if (!taken) return Status(errc::not_implemented, "no kernel for node " + g.describe(n));
    partition part;
    part.name = g.node(n).name;
    part.g = &g;
    part.nodes = {n};
    part.inputs.assign(g.node(n).inputs.begin(), g.node(n).inputs.end());
    part.outputs.assign(g.node(n).outputs.begin(), g.node(n).outputs.end());
    EPSTACK_ASSIGN_OR_RETURN(auto fns, compile(std::span<const partition>(&part, 1)));
    if (fns.size() != 1) return Status(errc::ep_fail, "compile returned no function for node " + g.describe(n));
    return std::move(fns.front());
  };
}

// Every graph plan of the model, parents before their subgraphs.
void collect_plans(graph_plan& gp, std::vector<graph_plan*>& out) {
  out.push_back(&gp);
  for (auto& s : gp.subgraphs) collect_plans(*s.plan, out);
}
}  // namespace

session_core::session_core() : impl_(std::make_unique<impl>()) {}
session_core::~session_core() = default;

Result<std::shared_ptr<const session_core>> session_core::build(model m, std::vector<provider_binding> providers,
                                                                 const session_options& options) {
  // The CPU provider of the stack folds constants, and the optimiser fuses only into operators it has (when it can
  // say which): taken before the EPContext wrapping below, which changes what get_capability answers.
  node_compiler fold;
  operator_query can_run;
  for (const auto& p : providers)
    if (p.type_key == cpu_provider_key) {
      fold = compile_one(p);
      can_run = p.has_op;
    }
  auto core = std::shared_ptr<session_core>(new session_core());
  auto& d = *core->impl_;
  d.m = std::move(m);
  d.pool = std::make_unique<thread_pool>(options.intra_op_threads());
  d.profiling = options.profiling();

  // Free dimension overrides: symbolic input dims fixed, and shapes inferred again with them.
  if (!options.free_dimension_overrides().empty()) {
    bool changed = false;
    auto& g = d.m.graph;
    for (value_id v : g.inputs()) {
      auto& t = g.value(v).type;
      if (!t.dims) continue;
      for (auto& dim : t.dims->dims())
        if (dim.is_symbolic())
          if (auto it = options.free_dimension_overrides().find(dim.param); it != options.free_dimension_overrides().end()) {
            if (it->second < 0)
              return Status(errc::invalid_argument, cat("free dimension override '", it->first, "' is negative"));
            dim = dimension(it->second);
            changed = true;
          }
    }
    if (changed) {
      // Inferred types of intermediate values are recomputed from the new input shapes.
      for (value_id v = 0; v < g.value_count(); ++v)
        if (!g.value(v).is_graph_input && !g.value(v).is_graph_output && !g.value(v).initializer && g.value(v).producer != no_id)
          g.value(v).type = {};
      EPSTACK_RETURN_IF_ERROR(infer_shapes(d.m).with_context("applying free dimension overrides"));
    }
  }

  // EP contexts: what generation would write is refused now if it exists (before anything is compiled); the contexts
  // an EPContext model names are loaded and verified before anything else is done.
  EPSTACK_ASSIGN_OR_RETURN(auto gen, ctx::plan_generation(d.m, options));
  EPSTACK_ASSIGN_OR_RETURN(auto loaded, ctx::load_contexts(d.m, &d.m, providers, options, false));
  d.context.binaries_read = loaded.files_read;
  d.context.graphs_from_workspace = loaded.from_workspace;
  const auto ctx_nodes = std::make_shared<const decltype(loaded.nodes)>(std::move(loaded.nodes));
  // EPContext nodes go to the provider that recognised them, as single nodes, and no provider is asked about them.
  for (std::size_t p = 0; p < providers.size(); ++p) {
    providers[p].get_capability = [p, ctx_nodes, inner = std::move(providers[p].get_capability)](
                                      const graph_view<graph>& v) {
      std::vector<capability> caps;
      std::vector<bool> keep(v.graph().node_count());
      bool any = false;
      for (node_id n : v.nodes()) {
        const auto& nd = v.graph().node(n);
        if (ctx::is_ep_context_node(nd)) {
          any = true;
          if (auto it = ctx_nodes->find(nd.name); it != ctx_nodes->end() && it->second.provider == p)
            caps.push_back(capability::single(n));
        } else {
          keep[n] = true;
        }
      }
      auto rest = any ? inner(graph_view<graph>(v.graph(), std::move(keep))) : inner(v);
      caps.insert(caps.end(), std::make_move_iterator(rest.begin()), std::make_move_iterator(rest.end()));
      return caps;
    };
  }

  // Function operators no provider takes run as their bodies (ONNX Runtime expands them and partitions again).
  const claim_query claimed = [&providers](const graph& g) {
    std::vector<bool> taken(g.node_count());
    const graph_view<graph> whole(g);
    for (const auto& p : providers)
      for (const auto& cap : p.get_capability(whole))
        for (node_id n : cap.nodes)
          if (n < taken.size()) taken[n] = true;
    return taken;
  };
  EPSTACK_RETURN_IF_ERROR(expand_functions(d.m, claimed).status());

  optimizer_options oo;
  oo.level = options.optimization_level();
  oo.fold = fold;
  oo.can_run = can_run;
  EPSTACK_RETURN_IF_ERROR(ctx::progress(options, "optimize", 0, 1));
  EPSTACK_ASSIGN_OR_RETURN(d.report, optimize(d.m, oo));
  // Once more on the optimised graph: a function node a provider claimed before the fusions may sit in a group it
  // no longer takes (a HardSwish grouped with a Softmax that the optimiser removed as dead), and then runs as its body.
  EPSTACK_RETURN_IF_ERROR(expand_functions(d.m, claimed).status());
  if (!options.optimized_model_filepath().empty()) {
    save_options so;
    so.mode = external_data_mode::above_threshold;
    so.threshold_bytes = 1024;
    EPSTACK_RETURN_IF_ERROR(save_model(d.m, options.optimized_model_filepath(), so)
                                .with_context("saving the optimised model (optimized_model_filepath)"));
  }

  partition_options po;
  po.disable_cpu_fallback = options.flag(config_keys::disable_cpu_ep_fallback);
  EPSTACK_RETURN_IF_ERROR(ctx::progress(options, "partition", 0, 1));
  EPSTACK_ASSIGN_OR_RETURN(d.plan, partition_graph(d.m.graph, providers, po));
  const auto is_restored = [&](const partition& part) {
    return !part.is_fused() && part.nodes.size() == 1 && ctx::is_ep_context_node(part.g->node(part.nodes.front()));
  };
  if (options.flag(config_keys::disable_model_compile)) {
    std::vector<graph_plan*> all;
    collect_plans(d.plan.main, all);
    std::vector<std::string> pending;
    for (const auto* gp : all)
      for (std::size_t k = 0; k < gp->partitions.size(); ++k)
        if (gp->partitions[k].is_fused())
          pending.push_back(cat(gp->partitions[k].name, " (", std::to_string(gp->partitions[k].nodes.size()), " nodes)"));
    if (!pending.empty()) {
      std::string list;
      for (std::size_t i = 0; i < pending.size() && i < 8; ++i) list += cat(i ? ", " : "", pending[i]);
      return Status(errc::model_requires_compilation,
                    cat("session.disable_model_compile is set but the model still needs compiling: ",
                        std::to_string(pending.size()), " partition(s) are not in EPContext nodes: ", list,
                        pending.size() > 8 ? ", ..." : ""));
    }
  }
  if (gen) EPSTACK_RETURN_IF_ERROR(ctx::check_outputs(*gen, d.plan, providers));

  // One compile call per provider with all of its partitions, over the main graph and every subgraph.
  std::vector<graph_plan*> plans;
  collect_plans(d.plan.main, plans);
  std::vector<std::vector<std::size_t>> indices(plans.size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    indices[i].resize(plans[i]->partitions.size());
    for (auto& x : indices[i]) x = total++;
  }
  d.functions.resize(total);
  for (std::size_t p = 0; p < providers.size(); ++p) {
    std::vector<partition> parts;
    std::vector<std::size_t> where;
    for (std::size_t i = 0; i < plans.size(); ++i)
      for (std::size_t k = 0; k < plans[i]->partitions.size(); ++k)
        if (plans[i]->partition_provider[k] == p) {
          parts.push_back(plans[i]->partitions[k]);
          where.push_back(indices[i][k]);
        }
    if (parts.empty()) continue;
    // EPContext nodes are restored from their contexts; the rest is compiled in one call.
    std::vector<partition> to_compile;
    std::vector<std::size_t> compile_where;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (!is_restored(parts[i])) {
        to_compile.push_back(std::move(parts[i]));
        compile_where.push_back(where[i]);
        continue;
      }
      const auto& nd = parts[i].g->node(parts[i].nodes.front());
      const auto& ln = ctx_nodes->at(nd.name);
      EPSTACK_RETURN_IF_ERROR(ctx::progress(options, "restore", d.context.nodes_loaded, ctx_nodes->size(), nd.name));
      ep_context_restore rr{ln.graph, ln.binary, &parts[i], ctx::verify_threads(options)};
      auto fn = providers[p].context->restore(rr);
      if (!fn)
        return Status(fn.code() == errc::invalid_graph ? errc::invalid_graph : fn.code(),
                      cat("EPContext node '", nd.name, "': provider ", providers[p].type_key, " cannot restore graph '",
                          ln.graph->name, "' from ", ln.binary->origin(), ": ", fn.status().message()));
      d.functions[where[i]] = std::move(*fn);
      ++d.context.nodes_loaded;
    }
    if (to_compile.empty()) continue;
    EPSTACK_RETURN_IF_ERROR(ctx::progress(options, "compile", p, providers.size(), providers[p].type_key));
    auto fns = providers[p].compile(to_compile);
    if (!fns) return Status(fns.code(), cat("provider ", providers[p].type_key, ": compile: ", fns.status().message()));
    if (fns->size() != to_compile.size())
      return Status(errc::ep_fail, cat("provider ", providers[p].type_key, " compiled ", std::to_string(fns->size()),
                                       " functions for ", std::to_string(to_compile.size()), " partitions"));
    for (std::size_t i = 0; i < compile_where.size(); ++i) d.functions[compile_where[i]] = std::move((*fns)[i]);
  }
  if (gen) {
    const auto& main_index = indices.front();
    EPSTACK_RETURN_IF_ERROR(ctx::generate(
        d.m, d.plan, [&](std::size_t k) -> const compute_function& { return d.functions[main_index[k]]; }, providers,
        *gen, options, d.context));
  }
  d.providers = std::move(providers);
  std::vector<const graph*> scopes;
  EPSTACK_ASSIGN_OR_RETURN(d.main, d.build_exec(d.plan.main, scopes, plans, indices));
  std::sort(d.shared_owners.begin(), d.shared_owners.end());
  d.shared_owners.erase(std::unique(d.shared_owners.begin(), d.shared_owners.end()), d.shared_owners.end());

  const auto& g = d.m.graph;
  for (value_id v : g.inputs())
    if (!g.value(v).initializer) d.inputs.push_back({g.value(v).name, g.value(v).type});
  for (value_id v : g.outputs()) d.outputs.push_back({g.value(v).name, g.value(v).type});
  return std::shared_ptr<const session_core>(std::move(core));
}

Result<std::vector<ivalue>> session_core::run(std::span<const named_value> feeds, std::span<const std::string> names) const {
  const auto& d = *impl_;
  const auto& g = d.m.graph;
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
  if (!rc) rc = std::make_unique<run_context>();
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

const std::vector<io_info>& session_core::inputs() const noexcept { return impl_->inputs; }
const std::vector<io_info>& session_core::outputs() const noexcept { return impl_->outputs; }
const partition_plan& session_core::plan() const noexcept { return impl_->plan; }
const model& session_core::get_model() const noexcept { return impl_->m; }
const optimization_report& session_core::optimizations() const noexcept { return impl_->report; }
int session_core::intra_op_threads() const noexcept { return impl_->pool->size(); }
const ep_context_report& session_core::ep_context() const noexcept { return impl_->context; }

Status session_core::check_compatibility(const model& m, const std::vector<provider_binding>& providers,
                                         const session_options& options) {
  return ctx::load_contexts(m, nullptr, providers, options, true).status();
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
  for (const auto& rc : impl_->idle) s.arena_bytes += rc->mem.reserved_bytes();
  return s;
}

}  // namespace epstack
