#pragma once
// Whether this test build runs under ThreadSanitizer, which cannot see libgomp's barriers (libgomp is not
// instrumented): the oneDNN stack then runs with one intra-op thread, so every oneDNN call happens on the caller.
#include <epstack/core/sanitizers.hpp>

namespace epstack::test {

inline constexpr bool thread_sanitizer = under_thread_sanitizer;

/// The intra-op thread count the oneDNN concurrency and determinism tests use.
inline constexpr int dnnl_intra_threads = thread_sanitizer ? 1 : 2;

}  // namespace epstack::test
