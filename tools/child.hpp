#pragma once
// Runs a function in a child process with a time limit, so that a crash or a hang of what it runs (a test case, a
// fuzzed graph) is reported instead of ending the tool. The parent runs no OpenMP or oneDNN work before forking.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>

#include <csignal>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace epstack::cli {

struct child_result {
  std::string text;     ///< what the function returned, when the child finished
  bool finished = false;
  bool timed_out = false;
  int signal = 0;       ///< the signal that ended the child, if one did
  std::string error;    ///< pipe or fork failed
  /// One line for a child that did not finish: "timed out after 60 s", "crashed: signal 11 (Segmentation fault)".
  [[nodiscard]] std::string why(int limit_s) const {
    if (!error.empty()) return error;
    if (timed_out) return "timed out after " + std::to_string(limit_s) + " s";
    if (signal != 0) return "crashed: signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
    return "the child process exited without a result";
  }
};

/// Runs `f` in a forked child and returns its text, or why there is none (crash, `limit_s` seconds passed).
inline child_result run_in_child(const std::function<std::string()>& f, int limit_s) {
  child_result r;
  int fds[2];
  if (::pipe(fds) != 0) {
    r.error = "pipe: " + std::string(std::strerror(errno));
    return r;
  }
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    r.error = "fork: " + std::string(std::strerror(errno));
    return r;
  }
  if (pid == 0) {
    ::close(fds[0]);
    std::string line;
    try {
      line = f();
    } catch (const std::exception& e) {
      line = std::string("exception: ") + e.what();
    } catch (...) {
      line = "exception of an unknown type";  // never unwind the child back into the parent's loop
    }
    std::size_t at = 0;
    while (at < line.size()) {
      const auto n = ::write(fds[1], line.data() + at, line.size() - at);
      if (n <= 0) break;
      at += static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      r.timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (n < 0 && errno != EINTR) break;  // the pipe cannot be read: wait for the child below
    if (n <= 0) continue;
    char buf[4096];
    const auto got = ::read(fds[0], buf, sizeof buf);
    if (got <= 0) break;
    r.text.append(buf, static_cast<std::size_t>(got));
  }
  ::close(fds[0]);
  if (r.timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status) && !r.timed_out) r.signal = WTERMSIG(status);
  r.finished = !r.timed_out && r.signal == 0 && !r.text.empty();
  return r;
}

}  // namespace epstack::cli
