#pragma once
// Runs one session from several threads and compares every output with the first run's. Worker threads assert
// nothing (doctest's assertions are not for other threads): they count, and the test thread checks the counts.
#include <epstack/runtime/session_core.hpp>

#include <cstddef>
#include <string>
#include <thread>
#include <vector>

namespace epstack::test {

struct hammer_result {
  std::string first_error;  ///< the first run's error (nothing else ran), empty when it succeeded
  int failures = 0;         ///< runs that returned an error
  int mismatches = 0;       ///< outputs that differed from the first run's
};

/// `threads` threads run `s` on `feeds` `runs` times each.
template <class Session>
[[nodiscard]] hammer_result hammer(const Session& s, const std::vector<named_tensor>& feeds, int threads, int runs) {
  hammer_result r;
  auto first = s.run(feeds);
  if (!first) {
    r.first_error = first.status().to_string();
    return r;
  }
  std::vector<int> failures(static_cast<std::size_t>(threads), 0), mismatches(static_cast<std::size_t>(threads), 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < runs; ++i) {
        auto out = s.run(feeds);
        if (!out) {
          ++failures[static_cast<std::size_t>(t)];
          continue;
        }
        for (std::size_t k = 0; k < out->size(); ++k)
          if (!(*out)[k].same_content((*first)[k])) ++mismatches[static_cast<std::size_t>(t)];
      }
    });
  for (auto& th : pool) th.join();
  for (int t = 0; t < threads; ++t) {
    r.failures += failures[static_cast<std::size_t>(t)];
    r.mismatches += mismatches[static_cast<std::size_t>(t)];
  }
  return r;
}

}  // namespace epstack::test

/// Checks a hammer_result on the test thread.
#define EPSTACK_CHECK_HAMMER(result)                                        \
  do {                                                                      \
    const auto& epstack_hammer_r = (result);                                \
    CHECK_MESSAGE(epstack_hammer_r.first_error.empty(), epstack_hammer_r.first_error); \
    CHECK(epstack_hammer_r.failures == 0);                                  \
    CHECK(epstack_hammer_r.mismatches == 0);                                \
  } while (false)
