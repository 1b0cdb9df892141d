#pragma once
/// @file compute.hpp
/// @brief What providers compile to: a partition (one node, or a fused group of nodes) becomes a `compute_function`,
/// `const` and safe to call from many threads at once, that reads the partition's inputs and writes its outputs
/// through a `compute_context`. The context gives memory from the run's arena (reused across runs), the intra-op
/// thread pool, and the session's executor for subgraphs (If, Loop, Scan bodies).

#include <epstack/provider/capability.hpp>
#include <epstack/core/errors.hpp>
#include <epstack/ir/graph.hpp>
#include <epstack/core/ivalue.hpp>
#include <epstack/core/tensor.hpp>
#include <epstack/core/thread_pool.hpp>

#include <algorithm>
#include <functional>
#include <optional>
#include <stdexcept>
#include <span>
#include <string>
#include <vector>

namespace epstack {

/// @brief A partition handed to a provider's `compile`: the nodes it took (in topological order), the graph they live
/// in, and its ordered boundary. A single-node partition has no meta definition; a fused one does.
struct partition {
  std::string name;              ///< fused: "<ProviderType>_<meta name>_<n>"; single: the node's name
  const graph* g = nullptr;      ///< the graph (or subgraph) holding the nodes
  std::vector<node_id> nodes;    ///< in topological order
  std::optional<meta_def> meta;  ///< set for fused partitions, with inputs and outputs filled in
  std::vector<value_id> inputs;  ///< values read from outside the partition, in meta order (or node input order)
  std::vector<value_id> outputs; ///< values produced for outside the partition, in meta order (or node output order)

  [[nodiscard]] bool is_fused() const noexcept { return meta.has_value(); }
};

/// @brief The executor's side of a compute call. A compute function reaches it through `compute_context`; calls made
/// without an executor (a provider's own tests) use plain heap memory and cannot run subgraphs.
class execution_frame {
 public:
  virtual ~execution_frame() = default;
  /// Storage for a tensor of `type` and `sizes`, uninitialised. Memory the executor hands out is recycled after the
  /// value's last use; `persistent` asks for memory the caller owns outright (graph outputs).
  [[nodiscard]] virtual tensor allocate(element_type type, std::span<const std::int64_t> sizes, bool persistent) = 0;
  /// Runs `body` (a subgraph of the node being computed) with `inputs` bound to its graph inputs, in order; values
  /// of enclosing graphs that it uses come from the caller's scope. `outputs` receives its graph outputs, owned.
  [[nodiscard]] virtual Status run_subgraph(const graph& body, std::span<const ivalue> inputs,
                                            std::vector<ivalue>& outputs) = 0;
  /// Whether the call being computed may write an output over the memory of its input `i`: memory the executor
  /// handed out, held by no other value (no view of it alive), read by no later step, not another input of the call
  /// too, and neither a graph input, output nor initializer. The executor counts the inputs it lends. False unless an
  /// executor says so.
  [[nodiscard]] virtual bool lend_input(std::size_t i) {
    (void)i;
    return false;
  }
};

/// @brief The inputs and outputs of one call of a compute function, and what it may use while computing them.
class compute_context {
 public:
  /// @param persistent_outputs outputs whose memory must not come from the run's arena (they leave the run).
  compute_context(std::span<const ivalue> inputs, std::span<ivalue> outputs, execution_frame* frame = nullptr,
                  thread_pool* threads = nullptr, std::span<const bool> persistent_outputs = {})
      : inputs_(inputs), outputs_(outputs), frame_(frame), threads_(threads), persistent_(persistent_outputs) {}

  [[nodiscard]] std::size_t input_count() const noexcept { return inputs_.size(); }
  [[nodiscard]] std::size_t output_count() const noexcept { return outputs_.size(); }
  /// True when input i was given (not an omitted optional input, not an empty Optional).
  [[nodiscard]] bool has_input(std::size_t i) const noexcept { return i < inputs_.size() && !inputs_[i].is_none(); }
  /// Input i as a runtime value (tensor, sequence or none; none past the last input).
  [[nodiscard]] const ivalue& input_value(std::size_t i) const {
    static const ivalue none;
    return i < inputs_.size() ? inputs_[i] : none;
  }
  /// Input i as a tensor; an empty tensor for an omitted optional input. @throws std::invalid_argument for a sequence.
  [[nodiscard]] const tensor& input(std::size_t i) const {
    static const tensor none;
    if (i >= inputs_.size() || inputs_[i].is_none()) return none;
    return inputs_[i].as_tensor();
  }

  /// @brief Output i with the given type and sizes, its elements uninitialised: memory from the run's arena (reused
  /// across runs), or owned when the output leaves the run.
  tensor& allocate_output(std::size_t i, element_type type, std::span<const std::int64_t> sizes) {
    check_output(i);
    const bool persistent = i < persistent_.size() && persistent_[i];
    outputs_[i] = frame_ != nullptr ? frame_->allocate(type, sizes, persistent) : tensor::uninitialized(type, sizes);
    return outputs_[i].as_tensor();
  }
  tensor& allocate_output(std::size_t i, element_type type, std::initializer_list<std::int64_t> sizes) {
    return allocate_output(i, type, std::span<const std::int64_t>(sizes.begin(), sizes.size()));
  }
  /// @brief Output i as a tensor the caller assigns (a view of an input, a tensor made elsewhere): the executor
  /// tracks storage shared with inputs itself.
  tensor& output(std::size_t i) {
    check_output(i);
    if (!outputs_[i].is_tensor()) outputs_[i] = tensor();
    return outputs_[i].as_tensor();
  }
  /// @brief Output o computed over input i's memory, as ONNX Runtime's kernels that declare `MayInplace(i, o)`: when
  /// input i is a tensor of `type` and `sizes` whose memory nothing else can see (execution_frame::lend_input) and
  /// output o does not leave the run, output o is input i itself; otherwise as allocate_output. The kernel must read
  /// each element of input i before it writes that element of the output, and tells which it got by `data()`.
  tensor& allocate_output_over_input(std::size_t o, std::size_t i, element_type type, std::span<const std::int64_t> sizes) {
    check_output(o);
    const bool persistent = o < persistent_.size() && persistent_[o];
    if (!persistent && frame_ != nullptr && i < inputs_.size() && inputs_[i].is_tensor()) {
      const tensor& in = inputs_[i].as_tensor();
      if (in.type() == type && std::ranges::equal(in.sizes(), sizes) && frame_->lend_input(i)) {
        outputs_[o] = in;
        return outputs_[o].as_tensor();
      }
    }
    return allocate_output(o, type, sizes);
  }
  /// Output i as a runtime value (to set a sequence or none).
  ivalue& output_value(std::size_t i) {
    check_output(i);
    return outputs_[i];
  }

  /// @brief Scratch memory for this call only (freed when it returns): a tensor of `count` elements of `type`.
  /// Allocate before a parallel loop, not inside it.
  [[nodiscard]] tensor scratch(element_type type, std::size_t count) {
    const std::int64_t n = static_cast<std::int64_t>(count);
    return frame_ != nullptr ? frame_->allocate(type, std::span<const std::int64_t>(&n, 1), false)
                             : tensor::uninitialized(type, std::span<const std::int64_t>(&n, 1));
  }

  /// The intra-op thread pool (null: run serially).
  [[nodiscard]] thread_pool* threads() const noexcept { return threads_; }
  /// Threads a loop may use.
  [[nodiscard]] int thread_count() const noexcept { return threads_ != nullptr ? threads_->size() : 1; }
  /// @brief `f(begin, end)` over [0, n) in chunks of at least `grain`, on the intra-op threads.
  template <class F>
  void parallel_for(std::size_t n, std::size_t grain, F&& f) const {
    if (threads_ != nullptr) threads_->parallel_for(n, grain, std::forward<F>(f));
    else if (n > 0) f(std::size_t{0}, n);
  }

  /// @brief Runs a subgraph of the node being computed (If branches, Loop and Scan bodies). not_implemented when the
  /// call has no executor.
  [[nodiscard]] Status run_subgraph(const graph& body, std::span<const ivalue> inputs, std::vector<ivalue>& outputs) {
    if (frame_ == nullptr) return Status(errc::not_implemented, "subgraphs run only inside a session");
    return frame_->run_subgraph(body, inputs, outputs);
  }

 private:
  // A node with fewer outputs than its operator writes (a model that was not checked, such as a crafted deployment
  // file) is an error of the call, not a write past the outputs.
  void check_output(std::size_t i) const {
    if (i >= outputs_.size())
      throw std::out_of_range("the kernel writes output " + std::to_string(i) + " but the node has " +
                              std::to_string(outputs_.size()));
  }
  std::span<const ivalue> inputs_;
  std::span<ivalue> outputs_;
  execution_frame* frame_;
  thread_pool* threads_;
  std::span<const bool> persistent_;
};

/// A compiled partition: `const`, callable from many threads at once.
using compute_function = std::function<Status(compute_context&)>;

}  // namespace epstack
