// Concurrency (label "concurrency"; CI runs this executable under ThreadSanitizer): many threads running one session
// at once get identical outputs; the intra-op thread pool serves several callers' loops at once; sessions and runs
// are independent.
#include <epstack/provider/context_binary.hpp>
#include <epstack/testing/model_zoo.hpp>
#include <epstack/providers/cpu.hpp>
#include <epstack/runtime/compile_cache.hpp>
#include <epstack/runtime/session.hpp>
#include <epstack/core/thread_pool.hpp>

#include "../support/compare.hpp"
#include "../support/cpu_time.hpp"
#include "../support/denormals.hpp"
#include "../support/graphs.hpp"
#include "../support/temp_dir.hpp"
#include "../support/hammer.hpp"
#include "../support/test_providers.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace epstack;
using cpu_session = session<cpu_provider>;

namespace {

// Runs `s` from `threads` threads, `runs` times each, and checks every output against the first run's.

}  // namespace

TEST_CASE("eight threads running one session fifty times each get identical outputs") {
  session_options so;
  so.set_intra_op_threads(2);
  auto s = cpu_session::create(zoo::make_mlp({32, 64, 10}), so);
  REQUIRE(s.has_value());
  EPSTACK_CHECK_HAMMER(test::hammer(*s, {{"input", zoo::random_tensor({4, 32}, 11, 1.0f)}}, 8, 50));
  // Each concurrent run had its own arena; they are kept for reuse.
  CHECK(s->memory().run_contexts >= 1);
  CHECK(s->memory().run_contexts <= 9);
}

TEST_CASE("concurrent runs of a convolutional network and a transformer, with intra-op threads, agree") {
  session_options so;
  so.set_intra_op_threads(2);
  auto conv = cpu_session::create(zoo::make_convnet({8, 16}, 32, 10), so);
  REQUIRE_MESSAGE(conv.has_value(), conv.status().to_string());
  zoo::transformer_config cfg;
  cfg.layers = 1;
  auto tr = cpu_session::create(zoo::make_transformer(cfg), so);
  REQUIRE_MESSAGE(tr.has_value(), tr.status().to_string());
  tensor ids(element_type::int64, {1, 12});
  for (std::size_t i = 0; i < ids.element_count(); ++i) ids.typed<std::int64_t>()[i] = static_cast<std::int64_t>(i * 7 % 512);
  const std::vector<named_tensor> image{{"image", zoo::random_tensor({2, 3, 32, 32}, 3, 1.0f)}}, text{{"input_ids", ids}};
  test::hammer_result ra, rb;
  std::thread a([&] { ra = test::hammer(*conv, image, 4, 8); });
  std::thread b([&] { rb = test::hammer(*tr, text, 4, 8); });
  a.join();
  b.join();
  EPSTACK_CHECK_HAMMER(ra);
  EPSTACK_CHECK_HAMMER(rb);
}

TEST_CASE("the thread pool serves loops from several callers at once, every index exactly once") {
  thread_pool pool(3);
  constexpr std::size_t n = 10000;
  std::vector<std::thread> callers;
  std::vector<std::vector<std::atomic<int>>> hits(4);
  for (auto& h : hits) h = std::vector<std::atomic<int>>(n);
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&, c] {
      for (int round = 0; round < 20; ++round)
        pool.parallel_for(n, 64, [&](std::size_t b, std::size_t e) {
          for (std::size_t i = b; i < e; ++i) hits[static_cast<std::size_t>(c)][i].fetch_add(1, std::memory_order_relaxed);
        });
    });
  for (auto& t : callers) t.join();
  for (const auto& h : hits)
    for (const auto& x : h) CHECK(x.load() == 20);
}

// A loop started inside a chunk of another, on the caller and on a worker: the outer loop holds the pool's fast slot,
// so the inner ones go through its queue, and both kinds finish with every index seen once. Thousands of short outer
// loops, each publishing, closing and freeing the slot while the worker enters and leaves it.
TEST_CASE("the thread pool runs loops nested in a loop's chunks and thousands of short loops, every index exactly once") {
  thread_pool pool(2);
  constexpr std::size_t outer = 8, inner = 1000;
  std::vector<std::atomic<int>> hits(outer * inner);
  pool.parallel_for(outer, 1, [&](std::size_t b, std::size_t e) {
    for (std::size_t o = b; o < e; ++o)
      pool.parallel_for(inner, 16, [&](std::size_t ib, std::size_t ie) {
        for (std::size_t i = ib; i < ie; ++i) hits[o * inner + i].fetch_add(1, std::memory_order_relaxed);
      });
  });
  for (const auto& x : hits) CHECK(x.load() == 1);
  std::vector<std::atomic<int>> counts(8);
  for (int round = 0; round < 5000; ++round)
    pool.parallel_for(counts.size(), 1, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) counts[i].fetch_add(1, std::memory_order_relaxed);
    });
  for (const auto& x : counts) CHECK(x.load() == 5000);
}

// Each thread starts on its own share of a loop (the caller the first half, the worker the second), loop after loop:
// what a chain of convolutions over the same rows relies on to find its input in the cache of the thread that wrote
// it. Chunks of 20 ms leave the worker time to arrive before the caller could reach its share.
TEST_CASE("the thread pool gives each thread its own share of a loop first, the same in every loop") {
  thread_pool pool(2);
  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    std::mutex mu;
    std::map<std::thread::id, std::size_t> first;  // each thread's first chunk
    std::vector<std::thread::id> by(8);
    pool.parallel_for(8, 1, [&](std::size_t b, std::size_t e) {
      {
        std::lock_guard lock(mu);
        first.emplace(std::this_thread::get_id(), b);
        for (std::size_t i = b; i < e; ++i) by[i] = std::this_thread::get_id();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    });
    REQUIRE(first.size() == 2);
    CHECK(first.at(std::this_thread::get_id()) == 0);
    for (const auto& [id, chunk] : first)
      if (id != std::this_thread::get_id()) CHECK(chunk == 4);
    CHECK(by[0] == std::this_thread::get_id());
    CHECK(by[4] != std::this_thread::get_id());
  }
}

// thread_pool::share_of names the share a thread takes in order: shares cover [0, n) in order, one per thread up to
// the chunk count, and each begins where a chunk of a real parallel_for begins (odd counts split at the chunks, not
// at n / threads: 13 items on 2 threads, chunks of 1, split at 6).
TEST_CASE("thread_pool::share_of gives the shares of parallel_for's chunks") {
  for (const std::size_t threads : {1, 2, 3, 5}) {
    thread_pool pool(static_cast<int>(threads));
    for (const auto& [n, grain] : {std::pair<std::size_t, std::size_t>{13, 1}, {9, 1}, {8, 1}, {100, 7}, {5, 10}, {1000, 1}, {3, 1}}) {
      CAPTURE(threads);
      CAPTURE(n);
      CAPTURE(grain);
      std::mutex mu;
      std::set<std::size_t> starts;
      pool.parallel_for(n, grain, [&](std::size_t b, std::size_t) {
        std::lock_guard lock(mu);
        starts.insert(b);
      });
      std::size_t at = 0, shares = 0;
      while (at < n) {
        const auto [b, e] = thread_pool::share_of(n, grain, threads, at);
        CHECK(b == at);
        CHECK(e > b);
        CHECK(starts.count(b) == 1);
        for (std::size_t i = b; i < e; ++i) CHECK(thread_pool::share_of(n, grain, threads, i) == std::pair{b, e});
        at = e;
        ++shares;
      }
      CHECK(at == n);
      CHECK(shares == std::min<std::size_t>({threads, (n + grain - 1) / grain, 16}));
    }
  }
  CHECK(thread_pool::share_of(13, 1, 2, 5) == std::pair<std::size_t, std::size_t>{0, 6});
  CHECK(thread_pool::share_of(13, 1, 2, 6) == std::pair<std::size_t, std::size_t>{6, 13});
}

namespace {
// A thread runtime of the test's own, as a provider's library would give one: `threads` threads run fn, the caller
// among them; it counts its regions and the most threads it was asked for.
std::atomic<int> fake_regions{0}, fake_widest{0};
void fake_run(void (*fn)(void*), void* data, unsigned threads) {
  fake_regions.fetch_add(1);
  for (int w = fake_widest.load(); w < static_cast<int>(threads) && !fake_widest.compare_exchange_weak(w, static_cast<int>(threads));) {}
  std::vector<std::thread> team;
  for (unsigned t = 1; t < threads; ++t) team.emplace_back([&] { fn(data); });
  fn(data);
  for (auto& t : team) t.join();
}
}  // namespace

TEST_CASE("a thread pool on another runtime runs every chunk there, every index exactly once, from several callers") {
  thread_pool pool(3, parallel_runtime{&fake_run, "fake"});
  REQUIRE(pool.runtime());
  CHECK(std::string_view(pool.runtime().name) == "fake");
  constexpr std::size_t n = 5000;
  std::vector<std::vector<std::atomic<int>>> hits(3);
  for (auto& h : hits) h = std::vector<std::atomic<int>>(n);
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([&, c] {
      for (int round = 0; round < 10; ++round)
        pool.parallel_for(n, 16, [&](std::size_t b, std::size_t e) {
          for (std::size_t i = b; i < e; ++i) hits[static_cast<std::size_t>(c)][i].fetch_add(1, std::memory_order_relaxed);
        });
    });
  for (auto& t : callers) t.join();
  for (const auto& h : hits)
    for (const auto& x : h) CHECK(x.load() == 10);
  CHECK(fake_regions.load() == 30);
  CHECK(fake_widest.load() == 3);  // never more threads than the pool's size
  // A loop of one chunk runs on the caller, without a region.
  pool.parallel_for(10, 100, [](std::size_t, std::size_t) {});
  CHECK(fake_regions.load() == 30);
}

TEST_CASE("a thread pool moves between a runtime and its own workers, and loops run right on each") {
  // Each chunk waits (at most 10 s for the whole loop) until a second thread has arrived: on the runtime or on the
  // workers, one comes; the number of threads seen is returned.
  const auto threads_of = [](thread_pool& pool) {
    std::vector<std::atomic<int>> hits(4000);
    std::mutex mu;
    std::set<std::thread::id> ids;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    pool.parallel_for(hits.size(), 8, [&](std::size_t b, std::size_t e) {
      {
        std::lock_guard lock(mu);
        ids.insert(std::this_thread::get_id());
      }
      for (std::size_t i = b; i < e; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
      while (std::chrono::steady_clock::now() < until) {
        {
          std::lock_guard lock(mu);
          if (ids.size() >= 2) break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
    CHECK(std::all_of(hits.begin(), hits.end(), [](const std::atomic<int>& h) { return h.load() == 1; }));
    return ids.size();
  };
  thread_pool pool(3, parallel_runtime{&fake_run, "fake"});
  CHECK(pool.worker_count() == 0);
  const int regions = fake_regions.load();
  CHECK(threads_of(pool) >= 2);
  CHECK(fake_regions.load() == regions + 1);
  pool.set_runtime({});  // to its own two workers
  CHECK_FALSE(pool.runtime());
  CHECK(pool.size() == 3);
  CHECK(pool.worker_count() == 2);
  for (int round = 0; round < 3; ++round) CHECK(threads_of(pool) >= 2);
  CHECK(fake_regions.load() == regions + 1);  // the runtime is not called any more
  pool.set_runtime(parallel_runtime{&fake_run, "fake"});  // and back: the workers stop
  CHECK(pool.worker_count() == 0);
  CHECK(std::string_view(pool.runtime().name) == "fake");
  CHECK(threads_of(pool) >= 2);
  CHECK(fake_regions.load() == regions + 2);
  pool.set_runtime(parallel_runtime{&fake_run, "renamed"});  // another runtime: adopted, still no workers
  CHECK(std::string_view(pool.runtime().name) == "renamed");
  CHECK(pool.worker_count() == 0);
  pool.set_runtime({});
  CHECK(pool.worker_count() == 2);
  CHECK(threads_of(pool) >= 2);
}

namespace {
// A runtime that numbers its threads (the caller 0), as OpenMP's omp_get_thread_num does; the threads start in
// reverse order, so that arrival order would give the wrong shares.
thread_local unsigned numbered_thread = 0;
void numbered_run(void (*fn)(void*), void* data, unsigned threads) {
  std::vector<std::thread> team;
  for (unsigned t = threads; t-- > 1;) {
    team.emplace_back([=] {
      numbered_thread = t;
      fn(data);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  numbered_thread = 0;
  fn(data);
  for (auto& t : team) t.join();
}
}  // namespace

TEST_CASE("a thread pool on a runtime that numbers its threads gives thread k the k-th share first") {
  thread_pool pool(3, parallel_runtime{&numbered_run, "numbered", [] { return numbered_thread; }});
  std::mutex mu;
  std::map<unsigned, std::size_t> first;  // each thread number's first chunk
  pool.parallel_for(12, 1, [&](std::size_t b, std::size_t) {
    {
      std::lock_guard lock(mu);
      first.emplace(numbered_thread, b);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  REQUIRE(first.size() == 3);
  CHECK(first.at(0) == 0);
  CHECK(first.at(1) == 4);
  CHECK(first.at(2) == 8);
}

namespace {
// This thread's mode (test::subnormal_mode): 1 flush-to-zero, 2 denormals-are-zero, 3 both, 0 IEEE subnormals.
int mode_here() { return test::subnormal_mode(); }
bool flushes_here() { return mode_here() == 3; }

// A loop of `n` indices on `pool` in which both of its threads take part: each chunk calls `each` on its indices, then
// waits (at most 10 s) until two threads have been seen. Returns the thread id of the thread other than the caller.
template <class F>
pid_t loop_on_both(thread_pool& pool, std::size_t n, F each) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  const auto caller = std::this_thread::get_id();
  std::mutex mu;
  std::set<std::thread::id> ids;
  pid_t other = 0;
  pool.parallel_for(n, 1, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) each(i);
    for (;;) {
      {
        std::lock_guard lock(mu);
        ids.insert(std::this_thread::get_id());
        if (std::this_thread::get_id() != caller) other = ::gettid();
        if (ids.size() >= 2 || std::chrono::steady_clock::now() >= until) break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  CHECK(ids.size() == 2);
  return other;
}

// A runtime whose team keeps its threads from region to region, as OpenMP's does: the caller and one persistent
// thread, started by the first region of two threads (as libgomp starts its team). A library's own regions
// (`team_run` called directly) run on the same two threads as the pool's.
struct persistent_team {
  std::mutex mu;
  std::condition_variable cv;
  void (*fn)(void*) = nullptr;
  void* data = nullptr;
  int posted = 0, finished = 0;
  bool stop = false;
  std::thread worker;
  void serve() {
    int seen = 0;
    for (;;) {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return stop || posted != seen; });
      if (stop) return;
      seen = posted;
      const auto f = fn;
      void* const d = data;
      lock.unlock();
      f(d);
      lock.lock();
      finished = seen;
      cv.notify_all();
    }
  }
  void run(void (*f)(void*), void* d, unsigned threads) {
    if (threads > 1 && !worker.joinable()) worker = std::thread([this] { serve(); });  // copies this thread's mode
    if (threads > 1) {
      {
        std::lock_guard lock(mu);
        fn = f;
        data = d;
        ++posted;
      }
      cv.notify_all();
    }
    f(d);
    if (threads > 1) {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return finished == posted; });
    }
  }
  ~persistent_team() {
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    cv.notify_all();
    if (worker.joinable()) worker.join();
  }
};
persistent_team& team() {
  static persistent_team t;
  return t;
}
void team_run(void (*fn)(void*), void* data, unsigned threads) { team().run(fn, data, threads); }
// Another, whose thread the first region of a run starts.
persistent_team& fresh_team() {
  static persistent_team t;
  return t;
}
void fresh_team_run(void (*fn)(void*), void* data, unsigned threads) { fresh_team().run(fn, data, threads); }

// The mode (mode_here) each thread of a persistent team finds, in one region of two threads: [caller, team thread].
std::vector<int> team_modes(void (*run)(void (*)(void*), void*, unsigned) = &team_run) {
  struct seen {
    std::mutex mu;
    std::map<std::thread::id, int> by;
  } s;
  run([](void* p) {
        auto& r = *static_cast<seen*>(p);
        const int f = mode_here();
        std::lock_guard lock(r.mu);
        r.by[std::this_thread::get_id()] = f;
      }, &s, 2);
  REQUIRE(s.by.size() == 2);
  const int caller = s.by.at(std::this_thread::get_id());
  int other = -1;
  for (const auto& [id, f] : s.by)
    if (id != std::this_thread::get_id()) other = f;
  return {caller, other};
}
}  // namespace

// session.set_denormal_as_zero at the pool: every thread of a loop flushes subnormals while it works on it, and each
// thread's own mode comes back after; a run_scope extends it to the caller and to a runtime's team for its lifetime.
TEST_CASE("a thread pool that flushes subnormals does so on every thread of its loops and of a run, then restores each") {
#if defined(__x86_64__) || defined(__i386__)
  REQUIRE_FALSE(flushes_here());  // the test thread starts with IEEE subnormals
  for (const bool on_runtime : {false, true}) {
    CAPTURE(on_runtime);
    thread_pool pool(2, on_runtime ? parallel_runtime{&team_run, "persistent"} : parallel_runtime{});
    const auto loop = [&] {  // the indices whose thread flushed (both bits); -1 when some thread had one bit only
      std::vector<std::atomic<int>> flushed(64);
      loop_on_both(pool, flushed.size(), [&](std::size_t i) { flushed[i] = mode_here(); });
      int n = 0;
      for (const auto& f : flushed) {
        if (f.load() == 1 || f.load() == 2) return -1;
        n += f.load() == 3 ? 1 : 0;
      }
      return n;
    };
    CHECK(loop() == 0);  // off: IEEE subnormals everywhere
    pool.set_flush_denormals(true);
    CHECK(pool.flush_denormals());
    CHECK(loop() == 64);           // every chunk, on either thread
    CHECK_FALSE(flushes_here());   // the caller's own mode again after the loop
    if (on_runtime) {
      // The team's threads outside the pool's loops (a library's own regions) flush only inside a run_scope.
      CHECK(team_modes() == std::vector<int>{0, 0});
      {
        const thread_pool::run_scope run(pool);
        CHECK(flushes_here());
        CHECK(team_modes() == std::vector<int>{3, 3});
        CHECK(loop() == 64);
        CHECK(flushes_here());  // a loop inside the run leaves the run's mode
      }
      CHECK(team_modes() == std::vector<int>{0, 0});
    } else {
      const thread_pool::run_scope run(pool);
      CHECK(flushes_here());
    }
    CHECK_FALSE(flushes_here());
    pool.set_flush_denormals(false);
    {
      const thread_pool::run_scope run(pool);  // a pool that does not flush: the scope does nothing
      CHECK_FALSE(flushes_here());
      CHECK(loop() == 0);
    }
  }
  // A team thread started inside a run (a runtime starts its threads at its first region) copies the mode of the
  // thread that starts it: the run sets the team before the caller, and a thread it did not set gets the caller's
  // mode from before the run when the run ends. Either way no thread flushes after the run.
  {
    thread_pool pool(2, parallel_runtime{&fresh_team_run, "fresh"});
    pool.set_flush_denormals(true);
    REQUIRE_FALSE(fresh_team().worker.joinable());
    {
      const thread_pool::run_scope run(pool);
      CHECK(fresh_team().worker.joinable());
      CHECK(team_modes(&fresh_team_run) == std::vector<int>{3, 3});
    }
    CHECK(team_modes(&fresh_team_run) == std::vector<int>{0, 0});
    CHECK_FALSE(flushes_here());
  }
  // The scope keeps the rest of the control word: a rounding mode set around it survives.
  const unsigned before = __builtin_ia32_stmxcsr();
  __builtin_ia32_ldmxcsr((before & ~0x6000u) | 0x2000u);  // round toward -infinity
  {
    const flush_denormals_scope fp(true);
    CHECK((__builtin_ia32_stmxcsr() & 0x6000u) == 0x2000u);
    CHECK(flush_denormals_scope::active_on_this_thread());
  }
  CHECK(__builtin_ia32_stmxcsr() == ((before & ~0x6000u) | 0x2000u));
  __builtin_ia32_ldmxcsr(before);
#else
  MESSAGE("no flush-to-zero mode on this architecture: the scope does nothing");
  const flush_denormals_scope fp(true);
  CHECK_FALSE(flush_denormals_scope::active_on_this_thread());
#endif
}

namespace {
// loop_on_both counting each index: the sum of the indices seen exactly once (any other count spoils it), and the
// worker's thread id in `worker`.
std::size_t loop_on_both(thread_pool& pool, pid_t& worker) {
  std::vector<std::atomic<int>> hits(64);
  worker = loop_on_both(pool, hits.size(), [&](std::size_t i) { hits[i].fetch_add(1); });
  std::size_t sum = 0;
  for (std::size_t i = 0; i < hits.size(); ++i) sum += hits[i].load() == 1 ? i : 1000000;
  return sum;
}
constexpr std::size_t loop_sum = 63 * 64 / 2;

// A thread's scheduler state from /proc: 'R' running or runnable (a spinning worker, pausing or yielding), 'S'
// asleep (a worker waiting for a loop); '?' when it cannot be read.
char thread_state(pid_t tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string line;
  std::getline(f, line);
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() ? line[close + 2] : '?';
}
// Whether the worker spins after the loop that just returned: still running 2 ms later (a spin lasts 100000 pause
// hints and 200000 yields, tens of milliseconds, longer on a busy machine) and using CPU time while the caller sleeps
// (the pause hints alone: half a millisecond or more where measured).
bool spins_after_loop(pid_t worker) {
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const char state = thread_state(worker);
  CAPTURE(state);
  const double ms = test::others_cpu_ms(std::chrono::milliseconds(300));
  CAPTURE(ms);
  return state == 'R' && ms > 0.1;
}
// Whether the worker sleeps without spinning: asleep within a second, and less than 3 ms of CPU time while the
// caller sleeps 300 ms (a spinning worker would take a pause hint phase of several, and yield for tens).
bool sleeps_after_loop(pid_t worker) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (thread_state(worker) != 'S' && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  const double ms = test::others_cpu_ms(std::chrono::milliseconds(300));
  CAPTURE(ms);
  return thread_state(worker) == 'S' && ms < 3.0;
}
}  // namespace

// session.intra_op.allow_spinning and session.force_spinning_stop at the pool, seen from the worker's scheduler
// state and the CPU time it uses while the caller sleeps.
TEST_CASE("a thread pool's workers spin after a loop by default, only during runs, or never, as its policy says") {
  thread_pool pool(2);
  pid_t worker = 0;
  CHECK(pool.spinning() == spin_policy::after_work);
  CHECK(test::others_cpu_ms(std::chrono::milliseconds(50)) < 3.0);  // workers that never had work do not spin
  CHECK(loop_on_both(pool, worker) == loop_sum);
  REQUIRE(worker != 0);
  CHECK(spins_after_loop(worker));  // after_work

  pool.set_spin_policy(spin_policy::never);
  CHECK(pool.spinning() == spin_policy::never);
  for (int i = 0; i < 20; ++i) REQUIRE(loop_on_both(pool, worker) == loop_sum);  // each loop wakes the worker
  CHECK(sleeps_after_loop(worker));

  pool.set_spin_policy(spin_policy::during_runs);
  {
    const thread_pool::run_scope run(pool);
    CHECK(loop_on_both(pool, worker) == loop_sum);
    CHECK(spins_after_loop(worker));  // between the loops of a run
  }
  {
    const thread_pool::run_scope run(pool);
    CHECK(loop_on_both(pool, worker) == loop_sum);
    {
      const thread_pool::run_scope concurrent(pool);  // a second run in progress keeps it spinning
    }
    CHECK(spins_after_loop(worker));
  }
  {
    const thread_pool::run_scope run(pool);
    CHECK(loop_on_both(pool, worker) == loop_sum);
  }  // the last run ends right after its loop: the worker stops spinning at once
  CHECK(sleeps_after_loop(worker));
  CHECK(loop_on_both(pool, worker) == loop_sum);  // a loop outside any run: no spinning after it
  CHECK(sleeps_after_loop(worker));

  // A policy that forbids spinning stops a worker spinning already.
  pool.set_spin_policy(spin_policy::after_work);
  CHECK(loop_on_both(pool, worker) == loop_sum);
  pool.set_spin_policy(spin_policy::never);
  CHECK(sleeps_after_loop(worker));
}

TEST_CASE("a session destroyed while another is created and run on other threads leaves both correct") {
  const auto m = zoo::make_mlp({16, 32, 4});
  const auto x = zoo::random_tensor({2, 16}, 5, 1.0f);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        auto s = cpu_session::create(m);
        if (s && s->run({{"input", x}})) ++ok;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(ok.load() == 20);
}

TEST_CASE("one context binary's tensors verified by several threads at once, each on several threads, once") {
  const auto dir = std::filesystem::temp_directory_path() / ("epstack-conc-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ep_context_builder b("TestExecutionProvider", "1", "cpu");
  std::vector<std::uint32_t> all;
  for (int k = 0; k < 8; ++k) {  // 8 tensors of 1.5 MiB and a bit, each different
    std::vector<float> v(393216 + static_cast<std::size_t>(k));
    std::iota(v.begin(), v.end(), static_cast<float>(k));
    const std::vector<std::int64_t> shape{static_cast<std::int64_t>(v.size())};
    all.push_back(b.add_tensor("w" + std::to_string(k), element_type::float32, shape,
                               std::span<const std::byte>(reinterpret_cast<const std::byte*>(v.data()), v.size() * 4)));
  }
  const std::vector<std::byte> plan{std::byte{'p'}, std::byte{'l'}, std::byte{'a'}, std::byte{'n'}};
  REQUIRE(b.add_graph("g", {"x"}, {"y"}, plan, all));
  REQUIRE(b.write(dir / "m_test.bin"));
  std::atomic<int> opened{0};
  {
    std::vector<std::thread> threads;
    for (int k = 0; k < 3; ++k)
      threads.emplace_back([&] {
        for (int i = 0; i < 2; ++i)
          if (auto r = ep_context_binary::open(dir / "m_test.bin"); r && r->tensors().size() == 8) ++opened;
      });
    for (auto& th : threads) th.join();
  }
  CHECK(opened == 6);
  // One binary shared by threads that verify overlapping sets of its tensors, each on two threads of its own.
  auto r = ep_context_binary::open(dir / "m_test.bin");
  REQUIRE(r.has_value());
  const auto bin = std::make_shared<const ep_context_binary>(std::move(*r));
  std::atomic<int> ok{0};
  {
    std::vector<std::thread> threads;
    for (int k = 0; k < 4; ++k)
      threads.emplace_back([&, k] {
        std::vector<std::uint32_t> some(all.begin() + k, all.begin() + k + 5);
        if (bin->verify_tensors(some, 2) && bin->verify_bytes(bin->tensors()[all[7 - k]].data.data(), 1)) ++ok;
      });
    for (auto& th : threads) th.join();
  }
  CHECK(ok == 4);
  for (auto i : all) CHECK(bin->verified(i));
  std::filesystem::remove_all(dir);
}

TEST_CASE("weight sharing: the sessions of one group generated on several threads at once, then loaded at once") {
  using toy = test::toy_context_provider;
  test::temp_dir dir;
  const auto t23 = type_info::tensor_of(element_type::float32, shape{2, 3});
  // X -> Add(W1) -> Relu -> Sigmoid (CPU) -> Mul(W2) -> Y: two toy partitions per model; W1 the same in every model,
  // W2 each model's own.
  std::vector<std::filesystem::path> srcs;
  for (int i = 0; i < 5; ++i) {
    model m;
    m.opsets = {{"", 13}};
    m.graph.set_name("m" + std::to_string(i));
    m.graph.add_input("X", t23);
    m.graph.add_initializer("W1", zoo::random_tensor({2, 3}, 7, 1.0f));
    m.graph.add_initializer("W2", zoo::random_tensor({2, 3}, 8, 1.0f + static_cast<float>(i)));
    m.graph.add_node(test::op("add1", "Add"), {"X", "W1"}, {"A"});
    m.graph.add_node(test::op("relu1", "Relu"), {"A"}, {"R"});
    m.graph.add_node(test::op("sig1", "Sigmoid"), {"R"}, {"S"});
    m.graph.add_node(test::op("mul1", "Mul"), {"S", "W2"}, {"Y"});
    m.graph.add_output("Y", t23);
    srcs.push_back(dir / ("m" + std::to_string(i) + ".onnx"));
    REQUIRE(save_model(m, srcs.back()).is_ok());
  }
  const auto options = [](int i, bool last) {
    session_options o;
    o.set_config(config_keys::ep_context_enable, "1");
    o.set_config(config_keys::ep_share_contexts, "1");
    o.set_config(config_keys::ep_context_node_name_prefix, "m" + std::to_string(i) + "_");
    if (last) o.set_config(config_keys::ep_stop_share_contexts, "1");
    return o;
  };
  // The first names the binary; the next three join at once; the last writes it.
  REQUIRE(session<toy>::create(srcs[0], options(0, false)).is_ok());
  std::atomic<int> generated{0};
  {
    std::vector<std::thread> threads;
    for (int i = 1; i < 4; ++i)
      threads.emplace_back([&, i] {
        if (session<toy>::create(srcs[static_cast<std::size_t>(i)], options(i, false)).is_ok()) ++generated;
      });
    for (auto& th : threads) th.join();
  }
  CHECK(generated == 3);
  REQUIRE(session<toy>::create(srcs[4], options(4, true)).is_ok());
  auto bin = ep_context_binary::open(dir / "m0_toy.bin");
  REQUIRE(bin.has_value());
  CHECK(bin->graphs().size() == 10);
  CHECK(bin->tensors().size() == 6);  // W1 once, five W2

  // Loaded with sharing on five threads at once: each session's outputs are its source model's.
  const tensor x = zoo::random_tensor({2, 3}, 99, 2.0f);
  std::atomic<int> agree{0};
  {
    session_options lo;
    lo.set_config(config_keys::ep_share_contexts, "1");
    std::vector<std::thread> threads;
    for (int i = 0; i < 5; ++i)
      threads.emplace_back([&, i] {
        auto ref = session<>::create(srcs[static_cast<std::size_t>(i)]);
        auto s = session<toy>::create(dir / ("m" + std::to_string(i) + "_ctx.onnx"), lo);
        if (!ref || !s) return;
        auto a = ref->run({{"X", x}});
        auto b = s->run({{"X", x}});
        if (!a || !b) return;
        if (test::compare((*b)[0], (*a)[0], 1e-6, 1e-6).ok()) ++agree;  // asserts nothing: a worker thread
      });
    for (auto& th : threads) th.join();
  }
  CHECK(agree == 5);
}

TEST_CASE("compile cache: sessions of one model created on several threads at once through one cache folder") {
  using toy = test::toy_context_provider;
  test::temp_dir dir;
  const auto t23 = type_info::tensor_of(element_type::float32, shape{2, 3});
  model m;
  m.opsets = {{"", 13}};
  m.graph.set_name("cached");
  m.graph.add_input("X", t23);
  m.graph.add_initializer("W", zoo::random_tensor({2, 3}, 7, 1.0f));
  m.graph.add_node(test::op("add1", "Add"), {"X", "W"}, {"A"});
  m.graph.add_node(test::op("sig1", "Sigmoid"), {"A"}, {"S"});
  m.graph.add_node(test::op("relu1", "Relu"), {"S"}, {"Y"});
  m.graph.add_output("Y", t23);
  const auto src = dir / "m.onnx";
  REQUIRE(save_model(m, src).is_ok());
  auto ref = session<>::create(src);
  REQUIRE(ref.is_ok());
  const tensor x = zoo::random_tensor({2, 3}, 99, 2.0f);
  auto want = ref->run({{"X", x}});
  REQUIRE(want.is_ok());
  session_options o;
  o.set_config(config_keys::cache_dir, (dir / "cache").string());
  // Two waves: the first all miss at once (one entry survives), the second all hit at once.
  for (int wave = 0; wave < 2; ++wave) {
    std::atomic<int> agree{0}, hits{0};
    {
      std::vector<std::thread> threads;
      for (int i = 0; i < 4; ++i)
        threads.emplace_back([&] {
          auto s = session<toy>::create(src, o);
          if (!s) return;
          hits += s->ep_context().cache_hit ? 1 : 0;
          auto out = s->run({{"X", x}});
          if (out && test::compare((*out)[0], (*want)[0], 1e-6, 1e-6).ok()) ++agree;  // asserts nothing: a worker
        });
      for (auto& th : threads) th.join();
    }
    CHECK(agree == 4);
    if (wave == 1) CHECK(hits == 4);
    auto entries = cache::list(dir / "cache");
    REQUIRE(entries.is_ok());
    CHECK(entries->size() == 1);
  }
}
