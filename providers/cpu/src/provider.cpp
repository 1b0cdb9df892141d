// The compiled part of basic_cpu_provider<K...> (cpu.hpp): finding a node's kernel in a list's table and compiling
// single-node partitions with it, on all the machine's cores. One copy for every kernel list.
#include <epstack/providers/cpu.hpp>

#include <epstack/core/helper_threads.hpp>
#include <epstack/core/weight_memory.hpp>
#include <epstack/ir/node_facts.hpp>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace epstack::cpu {

const kernel_ref* kernel_for(const graph& g, node_id n, std::span<const kernel_ref> kernels) {
  const auto& nd = g.node(n);
  const bool onnx_domain = nd.domain.empty() || nd.domain == "ai.onnx";
  for (const auto& k : kernels)
    if (nd.op_type == k.op_type && (k.domain.empty() ? onnx_domain : nd.domain == k.domain) && k.supports(g, n)) return &k;
  return nullptr;
}

Result<compute_function> compile_node(const graph& g, node_id n, std::span<const kernel_ref> kernels) {
  const auto* k = kernel_for(g, n, kernels);
  if (k == nullptr) return Status(errc::not_implemented, epstack::detail::cat("CPU provider: no kernel for node ", g.describe(n)));
  // A kernel that throws while it prepares (a weight of another type than the graph declares, in a model no checker
  // saw) fails this node, not the program (compiles run on worker threads).
  try {
    return k->compile(g, n);
  } catch (const std::exception& e) {
    return Status(errc::invalid_graph, epstack::detail::cat("CPU provider: compiling node ", g.describe(n), ": ", e.what()));
  }
}

namespace {
struct compile_work {
  std::span<const partition> parts;
  std::span<const kernel_ref> kernels;
  std::vector<Result<compute_function>>& results;
  std::atomic<std::size_t> next;
  weight_arena* arena;  // the create's (current_weight_arena on its thread)
  std::mutex failed_lock;
  // What escaped compile_node (which turns a kernel's exceptions into a Status: a failure while it does, or one not
  // of std::exception), rethrown on the create's thread.
  std::exception_ptr failed;
};

// Compiles the nodes not yet taken, from the last, on this thread. Not inlined: the create's thread and its helpers
// share it (the deployables count their bytes).
[[gnu::noinline]] void compile_from_last(compile_work& w) noexcept {
  const weight_arena_scope shared(w.arena, weight_arena_scope::helper_thread_t{});
  try {
    for (std::size_t k; (k = w.next.fetch_add(1, std::memory_order_relaxed)) < w.parts.size();) {
      const std::size_t i = w.parts.size() - 1 - k;
      w.results[i] = compile_node(*w.parts[i].g, w.parts[i].nodes.front(), w.kernels);
    }
  } catch (...) {
    w.next = w.parts.size();
    const std::lock_guard lock(w.failed_lock);
    if (!w.failed) w.failed = std::current_exception();
  }
}
}  // namespace

Result<std::vector<compute_function>> compile_nodes(std::span<const partition> parts, std::span<const kernel_ref> kernels) {
  for (const auto& p : parts)
    if (p.nodes.size() != 1)
      return Status(errc::ep_fail, epstack::detail::cat("CPU provider: partition '", p.name, "' has ", std::to_string(p.nodes.size()),
                                               " nodes; it compiles single nodes"));
  std::vector<Result<compute_function>> results(parts.size(), Status(errc::fail, "not compiled"));
  // Compiling a node is mostly packing its weights: with under 1 MiB of them the caller compiles every node (starting
  // a thread cost more). Otherwise one node at a time to whichever thread is free, from the last: the largest weights
  // usually come late in a graph (a language model's output projection, a network's deepest layers), and one taken
  // last left the other thread waiting.
  std::size_t weight_bytes = 0;
  for (const auto& p : parts)
    for (std::size_t k = 0; k < p.g->node(p.nodes.front()).inputs.size(); ++k)
      if (const tensor* t = constant_input(*p.g, p.nodes.front(), k)) weight_bytes += t->byte_size();
  // The helpers lay their nodes' weights out in the create's huge-page chunks too: in memory of their own they missed
  // the huge pages, and a later create's reuse of the chunks (weight_memory.hpp) missed with them.
  compile_work work{parts, kernels, results, {0}, current_weight_arena(), {}, {}};
  if (weight_bytes < (std::size_t{1} << 20)) {
    compile_from_last(work);
  } else {
    // This thread and a helper per other core (plain threads: a pool's queue and wake-ups cost the deployables
    // bytes and a compile nothing).
    const std::size_t threads = std::min<std::size_t>(std::max(1u, std::thread::hardware_concurrency()), parts.size());
    run_with_helpers(threads, [&work] { compile_from_last(work); });
  }
  if (work.failed) std::rethrow_exception(work.failed);
  std::vector<compute_function> fns;
  fns.reserve(parts.size());
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (!results[i])
      return Status(results[i].code(), epstack::detail::cat("node ", parts[i].g->describe(parts[i].nodes.front()), ": ",
                                                   results[i].status().message()));
    fns.push_back(std::move(*results[i]));
  }
  return fns;
}

}  // namespace epstack::cpu
