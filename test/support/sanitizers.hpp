#pragma once
// Whether this test build runs under ThreadSanitizer, which cannot see libgomp's barriers (libgomp is not
// instrumented): the oneDNN stack then runs with one intra-op thread, so every oneDNN call happens on the caller.

namespace epstack::test {

#if defined(__SANITIZE_THREAD__)
inline constexpr bool thread_sanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool thread_sanitizer = true;
#else
inline constexpr bool thread_sanitizer = false;
#endif
#else
inline constexpr bool thread_sanitizer = false;
#endif

/// The intra-op thread count the oneDNN concurrency and determinism tests use.
inline constexpr int dnnl_intra_threads = thread_sanitizer ? 1 : 2;

}  // namespace epstack::test
