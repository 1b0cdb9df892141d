#pragma once
/// @file
/// @brief Work shared by the calling thread and helper threads started for it alone (a create's filter layouts and
/// node compiles, the hashes of a context binary's tensors): plain threads, not a pool's queue and wake-ups, joined
/// before the call returns.
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace epstack {

/// @brief Runs `work()` on this thread and on up to `threads - 1` helper threads started for it; returns when every
/// one has finished. Helpers that cannot be started (no more threads, no memory) are skipped, so `work` takes its
/// items from a shared counter until none are left: the threads there are do them all. `work` must not throw on a
/// helper (nothing catches it there: keep the first exception and rethrow it after the call).
template <class Work>
void run_with_helpers(std::size_t threads, const Work& work) {
  std::vector<std::jthread> helpers;  // joined as they go out of scope, on return or while an exception unwinds
  try {
    if (threads > 1) helpers.reserve(threads - 1);
    for (std::size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
  } catch (const std::exception&) {
    // No more threads (or no memory for one): the others, and this one, take the rest.
  }
  work();
}

}  // namespace epstack
