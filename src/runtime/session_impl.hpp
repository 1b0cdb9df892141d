#pragma once
// The session core's private state (session_core::impl) and the executor's data: the arena, the compiled plan of
// each graph (steps), the run context a concurrent run takes. session_core.cpp builds them; executor.cpp runs them.
// Private to epstack::runtime.
#include <epstack/runtime/session_core.hpp>

#include <epstack/core/thread_pool.hpp>
#include <epstack/detail/cat.hpp>

#include <boost/container/flat_map.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace epstack {
namespace rt {

using epstack::detail::cat;

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
    // Best fit among the free blocks, the most recently freed among equals (warmest in cache). Best fit makes every
    // run after the first reuse the same blocks. (Blocks more than twice the request were once left alone, to keep
    // them for large requests: that made more blocks, not fewer, on every shared model (MobileNetV2's arena 13.8 ->
    // 9.4 MB without the limit, ResNet-50's 12.4 -> 11.1, BERT's 8.0 -> 8.0), and MobileNetV2 ran 2-3% faster in
    // memory it had just used.)
    auto it = free_.rend();
    for (auto f = free_.rbegin(); f != free_.rend(); ++f)
      if (f->size >= bytes && (it == free_.rend() || f->size < it->size)) it = f;
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
  /// The values holding the live block at `base`.
  [[nodiscard]] int refs(std::byte* base) const {
    const auto it = live_.find(base);
    return it == live_.end() ? 0 : it->second.refs;
  }
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

// Storage for the tensors a run hands to its caller (graph outputs, and what kernels ask to outlive the run), 64 KiB
// and more: when the caller drops such a tensor its memory comes back here, and the next run's output of the same
// byte size takes it instead of fresh memory. Fresh large allocations are mapped by the C library and faulted in
// page by page (huge pages zeroed) on every run: llm_prefill's 4 MiB of logits cost 2.7 ms in every other run (p90
// 18.3 ms, median 15.7), where ONNX Runtime's outputs come from its arena. Holds at most `max_bytes` (and 32 blocks);
// thread-safe (callers free outputs on any thread); a tensor that outlives the session frees its memory itself.
class output_recycler : public std::enable_shared_from_this<output_recycler> {
 public:
  static constexpr std::size_t min_bytes = std::size_t{64} << 10;
  explicit output_recycler(std::size_t max_bytes = std::size_t{256} << 20) : max_bytes_(max_bytes) {}
  output_recycler(const output_recycler&) = delete;
  output_recycler& operator=(const output_recycler&) = delete;
  ~output_recycler() {
    for (const auto& [bytes, p] : free_) detail::deallocate(p, bytes);
  }

  [[nodiscard]] tensor make(element_type type, std::span<const std::int64_t> sizes) {
    if (type == element_type::string) return tensor::uninitialized(type, sizes);
    const auto n = element_count(sizes);
    if (!n) throw std::length_error("allocate: invalid sizes");
    const std::size_t bytes = storage_bytes(type, static_cast<std::size_t>(*n));
    if (bytes < min_bytes) return tensor::uninitialized(type, sizes);
    void* p = take(bytes);
    if (p == nullptr) p = detail::allocate(bytes);
    std::shared_ptr<const void> owner(p, [w = weak_from_this(), bytes](const void* q) {
      if (auto r = w.lock()) r->give(const_cast<void*>(q), bytes);
      else detail::deallocate(const_cast<void*>(q), bytes);
    });
    return tensor::borrow(type, sizes, p, std::move(owner));
  }
  /// A copy of `t` in recycled storage (strings: an ordinary deep copy).
  [[nodiscard]] tensor copy(const tensor& t) {
    if (t.type() == element_type::string) return t.clone();
    tensor r = make(t.type(), t.sizes());
    if (t.byte_size() != 0) std::memcpy(r.mutable_data(), t.data(), t.byte_size());
    return r;
  }
  [[nodiscard]] std::size_t held_bytes() const {
    std::lock_guard lock(mu_);
    return held_;
  }

 private:
  void* take(std::size_t bytes) {
    std::lock_guard lock(mu_);
    for (std::size_t i = free_.size(); i-- > 0;)
      if (free_[i].first == bytes) {
        void* p = free_[i].second;
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
        held_ -= bytes;
        return p;
      }
    return nullptr;
  }
  void give(void* p, std::size_t bytes) noexcept {
    {
      std::lock_guard lock(mu_);
      if (held_ + bytes <= max_bytes_ && free_.size() < 32 && free_.size() < free_.capacity()) {
        free_.emplace_back(bytes, p);
        held_ += bytes;
        return;
      }
    }
    detail::deallocate(p, bytes);
  }

  mutable std::mutex mu_;
  std::vector<std::pair<std::size_t, void*>> free_ = [] {
    std::vector<std::pair<std::size_t, void*>> v;
    v.reserve(32);  // give() never allocates (it runs in a deleter)
    return v;
  }();
  std::size_t held_ = 0;
  std::size_t max_bytes_;
};

struct run_context {
  output_recycler* outputs = nullptr;  // the session's (set by session_core::run when it makes the context)
  arena mem;
  std::vector<ivalue> env;              // main graph values
  std::vector<std::byte*> blocks;       // main graph: arena block per value
  std::uint64_t lent = 0;               // inputs whose memory an output took over (frame::lend_input), every run
};

// Where a value a subgraph uses comes from: (levels up, value id there), or nullopt.
inline std::optional<std::pair<std::size_t, value_id>> resolve_outer(const std::vector<const graph*>& scopes,
                                                              const std::string& name) {
  for (std::size_t up = 1; up <= scopes.size(); ++up) {
    const graph* s = scopes[scopes.size() - up];
    const auto v = s->find_value(name);
    if (v != no_id && s->is_defined_here(v)) return std::pair{up, v};
  }
  return std::nullopt;
}


}  // namespace rt

using namespace rt;

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
  std::shared_ptr<output_recycler> outputs_memory = std::make_shared<output_recycler>();
  bool profiling = false;

  // Builds the executor of one graph from its plan. `indices[i][k]` is the function of partition k of `plans[i]`.
  Result<std::unique_ptr<graph_exec>> build_exec(const graph_plan& gp, std::vector<const graph*>& scopes,
                                                 const std::vector<const graph_plan*>& plans,
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

}  // namespace epstack
