#pragma once
// The oneDNN provider's compiled form of a partition, shared by the plan builder (plan_builder.hpp and the
// lower_*.cpp files, one per family of operations) and the compiled partition that runs plans (compile.cpp).
// Private to epstack::dnnl.
#include "ir.hpp"

#include <epstack/core/weight_memory.hpp>
#include <epstack/detail/cat.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace epstack::dnnl_ep {

using epstack::detail::cat;


using tag = dn::memory::format_tag;
using dt = dn::memory::data_type;
using dims = dn::memory::dims;
using alg = dn::algorithm;
using md_t = dn::memory::desc;

inline dn::engine& cpu_engine() {
  static dn::engine e(dn::engine::kind::cpu, 0);
  return e;
}

inline dims mdims(const dims& d) { return d.empty() ? dims{1} : d; }
inline std::int64_t volume(const dims& d) { return std::accumulate(d.begin(), d.end(), std::int64_t{1}, std::multiplies<>()); }

/// A strided md whose dims of size 1 take the stride a row-major layout gives them (the next dim's stride times its
/// size). Their stride addresses nothing, but oneDNN 2.6.3's jit binary primitive reads the layout from it: a view
/// that kept the stride of a permuted size-1 dim ([3,8,1,6] with strides [48,6,144,1], a Transpose of a batch-1
/// convolution) got a kernel that wrote nothing.
inline md_t strided(const dims& d, dims strides) {
  for (std::size_t i = d.size(); i-- > 0;)
    if (d[i] == 1) strides[i] = i + 1 < d.size() ? strides[i + 1] * std::max<std::int64_t>(d[i + 1], 1) : 1;
  return md_t(d, dt::f32, strides);
}

inline md_t plain(const dims& d0) {
  const dims d = mdims(d0);
  dims strides(d.size(), 1);
  for (std::size_t i = d.size() - 1; i > 0; --i) strides[i - 1] = strides[i] * std::max<std::int64_t>(d[i], 1);
  return md_t(d, dt::f32, strides);
}

inline dims pad_front(const dims& d, std::size_t rank) {
  dims r(rank - std::min(rank, d.size()), 1);
  r.insert(r.end(), d.begin(), d.end());
  return r;
}

/// The strides of a plain strided md (no blocking, no offset), or nullopt for a blocked one.
inline std::optional<dims> strides_of(const md_t& m) {
  const auto& d = m.data;
  if (d.format_kind != dnnl_blocked || d.format_desc.blocking.inner_nblks != 0 || d.offset0 != 0) return std::nullopt;
  return dims(d.format_desc.blocking.strides, d.format_desc.blocking.strides + d.ndims);
}

inline std::string str(const dims& d) {
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

// Memory for laid-out weights: from the huge-page chunks of the session create (allocate_weight,
// weight_memory.hpp): a create writes every byte of it once, and faults on 4 KiB pages were most of llm_prefill's.
inline std::shared_ptr<void> aligned_block(std::size_t bytes) { return allocate_weight(bytes); }

inline std::atomic<std::uint64_t> weight_reorders{0};
/// Reorders of values (not constants) planned so far: activation_reorder_count().
inline std::atomic<std::uint64_t> value_reorders{0};
inline std::atomic<bool> ignore_stored_layouts{false};

/// What a partition's inputs look like for one run.
struct input_shapes {
  std::vector<dims> sizes;                       ///< per partition input (empty for non-tensors)
  std::vector<std::vector<std::int64_t>> values; ///< int64 contents of the inputs read as shapes or axes
  std::vector<bool> dims_only;                   ///< inputs read only for their dims (by Shape): no memory
  std::vector<bool> is_values;                   ///< inputs read for their int64 values: no memory either
};

}  // namespace epstack::dnnl_ep
