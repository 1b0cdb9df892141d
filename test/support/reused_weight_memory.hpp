#pragma once
// What the tests of the weight-memory cache (weight_memory.hpp's huge_chunk_cache) share: a scope that keeps the
// released chunks and restores the limit it found, and the check that a second create on kept chunks filled with NaN
// gives the first create's answers (a layout that left padding unwritten, counting on fresh pages' zeros, would not).
#include <epstack/core/tensor.hpp>
#include <epstack/core/weight_memory.hpp>

#include "compare.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace epstack::test {

/// Keeps up to 1 GiB of released chunks while it lives; then drops them (poisoned ones too) and restores the limit.
class kept_weight_memory {
 public:
  kept_weight_memory() : saved_(detail::huge_chunk_cache::get().limit()) {
    set_weight_memory_cache_limit(std::size_t{1} << 30);
  }
  ~kept_weight_memory() {
    set_weight_memory_cache_limit(0);
    set_weight_memory_cache_limit(saved_);
  }
  kept_weight_memory(const kept_weight_memory&) = delete;
  kept_weight_memory& operator=(const kept_weight_memory&) = delete;
  /// Drops what is kept: only what the next release gives is kept then.
  static void clear() {
    const std::size_t limit = detail::huge_chunk_cache::get().limit();
    set_weight_memory_cache_limit(0);
    set_weight_memory_cache_limit(limit);
  }

 private:
  std::size_t saved_;
};

/// `create()` (a Result of a session) run on `input` = `x`, released; the kept chunks poisoned; a second create takes
/// some of them and gives the first one's outputs.
template <class Create>
void check_create_on_poisoned_memory(Create create, const std::string& input, const tensor& x) {
  kept_weight_memory::clear();
  std::vector<tensor> first;
  {
    auto s = create();
    REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
    auto out = s->run({{input, x}});
    REQUIRE_MESSAGE(out.has_value(), out.status().to_string());
    first = std::move(*out);
  }
  const std::size_t kept = weight_memory_cached_bytes();
  CHECK(kept > 0);
  detail::huge_chunk_cache::get().poison_for_tests();
  auto s = create();
  REQUIRE_MESSAGE(s.has_value(), s.status().to_string());
  CHECK(weight_memory_cached_bytes() < kept);  // the second create took poisoned chunks
  auto out = s->run({{input, x}});
  REQUIRE_MESSAGE(out.has_value(), out.status().to_string());
  REQUIRE(out->size() == first.size());
  for (std::size_t k = 0; k < first.size(); ++k) {
    const auto cmp = compare((*out)[k], first[k], 1e-6, 1e-6);
    CHECK_MESSAGE(cmp.ok(), cmp.message());
  }
}

}  // namespace epstack::test
