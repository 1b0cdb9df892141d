#pragma once
/// @file sanitizers.hpp
/// @brief Whether this build runs under ThreadSanitizer, which cannot see the synchronisation of an uninstrumented
/// library's threads (libgomp's barriers): a session then keeps its loops on its own workers.

namespace epstack {

#if defined(__SANITIZE_THREAD__)
inline constexpr bool under_thread_sanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool under_thread_sanitizer = true;
#else
inline constexpr bool under_thread_sanitizer = false;
#endif
#else
inline constexpr bool under_thread_sanitizer = false;
#endif

}  // namespace epstack
