// A number of its own for each kernel call that keeps work in its threads' buffers across the chunks of one loop.
#pragma once

#include <atomic>
#include <cstdint>

namespace epstack::cpu::impl {

// Never 0: a thread that takes several chunks of one call finds in its buffer what its earlier chunks left, and a
// buffer last used by another call (or by none) is told apart.
inline std::uint64_t new_call_token() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace epstack::cpu::impl
