#pragma once
// What the process's other threads cost while the calling thread sleeps: a session's or a pool's workers spinning
// after their loops, or asleep. Read from the process's and this thread's CPU clocks (POSIX).
#include <chrono>
#include <ctime>
#include <thread>

namespace epstack::test {

/// Milliseconds of CPU time that every thread of the process but the calling one used while it slept for `window`.
inline double others_cpu_ms(std::chrono::milliseconds window) {
  const auto now = [](clockid_t c) {
    timespec t{};
    clock_gettime(c, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
  };
  const double p0 = now(CLOCK_PROCESS_CPUTIME_ID), t0 = now(CLOCK_THREAD_CPUTIME_ID);
  std::this_thread::sleep_for(window);
  const double p1 = now(CLOCK_PROCESS_CPUTIME_ID), t1 = now(CLOCK_THREAD_CPUTIME_ID);
  return (p1 - p0) - (t1 - t0);
}

}  // namespace epstack::test
