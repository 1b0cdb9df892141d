#pragma once
// Runs a function in a child process with a time limit, so that a crash or a hang of what it runs (a test case, a
// fuzzed graph) is reported instead of ending the tool. The parent runs no OpenMP or oneDNN work before forking.
// run_in_workers does the same for a sequence of jobs with one child for many jobs: a fork costs 40 ms on a virtual
// machine with shadow page tables and about 190 ms under AddressSanitizer, more than most test cases take.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <string>
#include <string_view>

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
  std::string error;    ///< pipe, fork, poll or read failed, or the child wrote a malformed result
  /// One line for a child that did not finish: "timed out after 60 s", "crashed: signal 11 (Segmentation fault)".
  [[nodiscard]] std::string why(int limit_s) const {
    if (!error.empty()) return error;
    if (timed_out) return "timed out after " + std::to_string(limit_s) + " s";
    if (signal != 0) return "crashed: signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
    return "the child process exited without a result";
  }
};

namespace detail {

inline bool write_all(int fd, const std::string& s) {
  std::size_t at = 0;
  while (at < s.size()) {
    const auto n = ::write(fd, s.data() + at, s.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace detail

/// Runs jobs 0 .. count-1 in order, in child processes, one child running jobs until one of them crashes or runs
/// past `limit_s` seconds: that job's result says so, and a new child goes on with the next job. `job(i)` runs in a
/// child and returns its text; `done(i, result)` runs in the parent once for each job, in order, and returns false to
/// stop (the child is killed; so it is when done() throws). A job's seconds count from the previous job's done(). Jobs
/// share their child's process, so a job must not depend on what an earlier one left: a caller that finds something
/// runs that job again in a process of its own (run_in_child) to tell.
inline void run_in_workers(std::size_t count, const std::function<std::string(std::size_t)>& job,
                           const std::function<bool(std::size_t, const child_result&)>& done, int limit_s) {
  std::size_t next = 0;
  while (next < count) {
    int fds[2];
    if (::pipe(fds) != 0) {
      child_result r;
      r.error = "pipe: " + std::string(std::strerror(errno));
      if (!done(next++, r)) return;
      continue;
    }
    std::cout.flush();
    std::cerr.flush();
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      child_result r;
      r.error = "fork: " + std::string(std::strerror(errno));
      if (!done(next++, r)) return;
      continue;
    }
    if (pid == 0) {
      ::close(fds[0]);
      // Each result is framed as "<job> <bytes>\n<text>": a text may hold any byte.
      for (std::size_t i = next; i < count; ++i) {
        std::string text;
        try {
          text = job(i);
        } catch (const std::exception& e) {
          text = std::string("exception: ") + e.what();
        } catch (...) {
          text = "exception of an unknown type";  // never unwind the child back into the parent's loop
        }
        std::cout.flush();
        std::cerr.flush();
        if (!detail::write_all(fds[1], std::to_string(i) + " " + std::to_string(text.size()) + "\n" + text)) break;
      }
      ::_exit(0);
    }
    ::close(fds[1]);
    // The child is killed (unless it ended) and reaped however the loop below ends: done() may throw.
    struct reaper {
      pid_t pid;
      int fd;
      int status = 0;
      bool reaped = false;
      void finish(bool kill) {
        if (reaped) return;
        reaped = true;
        ::close(fd);
        if (kill) ::kill(pid, SIGKILL);
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
      }
      ~reaper() { finish(true); }
    } child{pid, fds[0]};
    std::string buf, broken;
    bool stop = false, timed_out = false, ended = false;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
    // Hands every complete frame in `buf` to done(); a frame that is not "<next> <bytes>\n" breaks the protocol.
    const auto take_frames = [&] {
      const auto number = [](std::string_view t, std::size_t& v) {
        if (t.empty() || t.size() > 18) return false;
        v = 0;
        for (char ch : t) {
          if (ch < '0' || ch > '9') return false;
          v = v * 10 + static_cast<std::size_t>(ch - '0');
        }
        return true;
      };
      while (!stop && next < count) {
        const auto nl = buf.find('\n');
        if (nl == std::string::npos) {
          if (buf.size() > 40) broken = "a malformed result from the worker process";
          return;
        }
        const auto sp = buf.find(' ');
        std::size_t i = 0, len = 0;
        if (sp == std::string::npos || sp > nl || !number(std::string_view(buf).substr(0, sp), i) ||
            !number(std::string_view(buf).substr(sp + 1, nl - sp - 1), len) || i != next) {
          broken = "a malformed result from the worker process";
          return;
        }
        if (buf.size() - (nl + 1) < len) return;  // the rest is on its way
        child_result r;
        r.text = buf.substr(nl + 1, len);
        r.finished = true;
        buf.erase(0, nl + 1 + len);
        ++next;
        if (!done(i, r)) stop = true;
        // The next job's time starts now: done() may itself take long (a fuzzer finding is written in a child).
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
      }
    };
    const auto read_some = [&] {
      char chunk[4096];
      for (;;) {
        const auto got = ::read(child.fd, chunk, sizeof chunk);
        if (got > 0) buf.append(chunk, static_cast<std::size_t>(got));
        else if (got < 0 && errno == EINTR) continue;
        else if (got == 0) ended = true;
        else broken = "read: " + std::string(std::strerror(errno));
        return;
      }
    };
    for (;;) {
      take_frames();
      if (stop || next >= count || ended || !broken.empty()) break;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      pollfd p{child.fd, POLLIN, 0};
      // Past the deadline, what is already in the pipe is still read before the job is called hung.
      const int n = ::poll(&p, 1, static_cast<int>(std::clamp<long long>(left, 0, 1000)));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        broken = "poll: " + std::string(std::strerror(errno));
        break;
      }
      if (n > 0) {
        read_some();
        continue;
      }
      if (left <= 0) {
        timed_out = true;
        break;
      }
    }
    child.finish(!ended);
    if (stop || next >= count) return;
    // The child ended, hung or broke the protocol inside job `next`.
    child_result r;
    r.timed_out = timed_out && broken.empty();
    r.error = broken;
    if (ended && WIFSIGNALED(child.status)) r.signal = WTERMSIG(child.status);
    if (!done(next++, r)) return;
  }
}

/// Runs `f` in a forked child and returns its text, or why there is none (crash, `limit_s` seconds passed).
inline child_result run_in_child(const std::function<std::string()>& f, int limit_s) {
  child_result r;
  run_in_workers(1, [&](std::size_t) { return f(); }, [&](std::size_t, const child_result& got) {
    r = got;
    return true;
  }, limit_s);
  return r;
}

}  // namespace epstack::cli
