#pragma once
/// @file thread_pool.hpp
/// @brief The intra-op thread pool: `parallel_for` splits a range into chunks; each thread first takes those of its own
/// share (the caller the first, worker k the k+1-th), then what the others left. Several threads may call it at once
/// (concurrent `run`s on one session): each call is a job of its own, and the caller always works on its own job.
/// A pool may instead run its loops on a thread runtime that a provider's library already runs on (`parallel_runtime`,
/// e.g. oneDNN's OpenMP): one set of threads for the whole run, so the two sets never spin against each other.
/// A pool may flush subnormal floats to zero on every thread of its loops (`set_flush_denormals`, ONNX Runtime's
/// session.set_denormal_as_zero); `run_scope` extends that to the caller and to a runtime's threads for a whole run.
/// How its workers wait between loops is a `spin_policy` (ONNX Runtime's session.intra_op.allow_spinning and
/// session.force_spinning_stop).

#include <epstack/core/float_mode.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <type_traits>
#include <thread>
#include <utility>
#include <vector>

namespace epstack {

/// @brief Another library's thread runtime, for a pool to run its loops on: `run(fn, data, threads)` calls
/// `fn(data)` on `threads` threads, the caller among them, and returns when every call has returned. Empty: the pool's
/// own workers. A provider whose library keeps threads of its own declares one (the oneDNN provider: libgomp's
/// `GOMP_parallel`), so that between its partitions and the CPU provider's nodes the same threads work and wait.
struct parallel_runtime {
  void (*run)(void (*fn)(void*), void* data, unsigned threads) = nullptr;
  const char* name = "";
  /// The calling thread's number within the region `run` started (0 for the caller; `omp_get_thread_num` for
  /// OpenMP), or null: then the threads take the loop's shares in the order they arrive. With numbers, a thread has
  /// the same share of every loop, as the pool's own workers do.
  unsigned (*thread_num)() = nullptr;
  [[nodiscard]] explicit operator bool() const noexcept { return run != nullptr; }
};

/// @brief How a pool's own workers wait for the next loop once they have had work (a runtime's threads wait as that
/// runtime does: libgomp's by OMP_WAIT_POLICY and GOMP_SPINCOUNT, read when the process starts).
enum class spin_policy : unsigned char {
  /// Spin a while after each loop (the CPU's pause hint, then yielding), then sleep: during a run the next loop follows
  /// within microseconds, and a woken worker would take tens. The default, as ONNX Runtime's.
  after_work,
  /// The same, but only while a run is in progress (some `run_scope` alive): when the last concurrent run ends, the
  /// workers go to sleep at once instead of spinning into whatever the process does next.
  during_runs,
  /// Sleep as soon as a loop is done: each loop wakes the workers with a system call. For processes that share their
  /// cores (several sessions one after another, other work between runs).
  never,
};

/// @brief A fixed set of worker threads for data-parallel loops.
class thread_pool {
 public:
  /// @param threads the threads a loop may use, the caller included (so `threads - 1` workers); 0 means the
  /// hardware's concurrency.
  /// @param runtime when set, loops run on its threads and the pool starts no workers of its own.
  explicit thread_pool(int threads = 0, parallel_runtime runtime = {}) : runtime_(runtime) {
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    size_ = threads;
    if (!runtime_) start_workers();
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  ~thread_pool() { stop_workers(); }

  /// @brief Runs later loops on `runtime` (empty: on the pool's own workers, started now), stopping the workers
  /// when a runtime replaces them. Only while no loop is running: a session calls it once its plan is known, before
  /// any run (the runtime follows the plan: a provider's threads only where that provider has partitions).
  void set_runtime(parallel_runtime runtime) {
    const bool had = static_cast<bool>(runtime_);
    runtime_ = runtime;
    if (had == static_cast<bool>(runtime_)) return;
    if (runtime_) stop_workers();
    else start_workers();
  }
  /// @brief Whether later loops flush subnormal floats to zero (flush_denormals_scope) on each thread while it works
  /// on them, the caller included; each thread's own mode is restored when it leaves the loop. Only while no loop is
  /// running (a session sets it when it is created, from its options).
  void set_flush_denormals(bool on) noexcept { flush_denormals_ = on; }
  [[nodiscard]] bool flush_denormals() const noexcept { return flush_denormals_; }
  /// @brief How the workers wait between loops from now on (workers spinning already stop when it forbids them).
  void set_spin_policy(spin_policy p) noexcept { spin_.store(p, std::memory_order_relaxed); }
  [[nodiscard]] spin_policy spinning() const noexcept { return spin_.load(std::memory_order_relaxed); }

  /// @brief A run, while it lives: the workers may spin between its loops under spin_policy::during_runs; and its
  /// floating-point mode: with `flush_denormals`, the calling thread's, and on a runtime every thread of the caller's
  /// team too (one region of `size()` threads, the caller among them, sets each; another restores each at the end),
  /// since a provider's library runs regions of its own there (oneDNN's primitives on OpenMP) that the pool's loops do
  /// not wrap. A team thread that the first region did not set (started since, with the caller's flushing mode copied)
  /// gets the caller's mode from before the run. Sets no mode when the pool does not flush.
  class run_scope {
   public:
    explicit run_scope(const thread_pool& pool)
        : pool_(pool), on_runtime_(pool.flush_denormals_ && pool.runtime_), caller_(pool.flush_denormals_ && !pool.runtime_) {
      pool_.runs_.fetch_add(1, std::memory_order_relaxed);
      if (on_runtime_) {
        // The team first, the caller among it: a thread the runtime starts now copies the caller's mode as it was.
        before_ = detail::read_float_control();
        pool_.runtime_.run(&set_team_thread, nullptr, static_cast<unsigned>(pool_.size_));
      }
    }
    ~run_scope() {
      if (on_runtime_) pool_.runtime_.run(&restore_team_thread, &before_, static_cast<unsigned>(pool_.size_));
      pool_.runs_.fetch_sub(1, std::memory_order_relaxed);
    }
    run_scope(const run_scope&) = delete;
    run_scope& operator=(const run_scope&) = delete;

   private:
    // Each team thread's control word before the run (constant-initialized: no guard, no destructor).
    struct saved_word {
      unsigned word = 0;
      bool saved = false;
    };
    static saved_word& team_word() noexcept {
      static thread_local saved_word w;
      return w;
    }
    static void set_team_thread(void*) {
      saved_word& t = team_word();
      t.word = detail::read_float_control();
      t.saved = true;
      detail::write_float_control(t.word | flush_denormals_scope::mode_bits);
    }
    static void restore_team_thread(void* before) {
      saved_word& t = team_word();
      constexpr unsigned bits = flush_denormals_scope::mode_bits;
      const unsigned caller = *static_cast<const unsigned*>(before);
      detail::write_float_control(t.saved ? t.word : (detail::read_float_control() & ~bits) | (caller & bits));
      t.saved = false;
    }
    const thread_pool& pool_;
    bool on_runtime_;
    unsigned before_ = 0;
    flush_denormals_scope caller_;  // on the pool's own workers: the caller's mode (the loops set the workers')
  };

  /// The pool's own worker threads (none while it runs on a runtime).
  [[nodiscard]] std::size_t worker_count() const noexcept { return workers_.size(); }

  /// The number of threads a loop may use (the caller included).
  [[nodiscard]] int size() const noexcept { return size_; }
  /// The runtime loops run on (empty: the pool's own workers).
  [[nodiscard]] const parallel_runtime& runtime() const noexcept { return runtime_; }

  /// @brief Calls `f(begin, end)` on disjoint chunks covering [0, n), at least `grain` items each (except the last),
  /// on up to `size()` threads; returns when every chunk is done. `f` must not throw.
  template <class F>
  void parallel_for(std::size_t n, std::size_t grain, F&& f) {
    if (n == 0) return;
    grain = std::max<std::size_t>(grain, 1);
    const std::size_t max_chunks = (n + grain - 1) / grain;
    if (size_ == 1 || max_chunks == 1) {
      f(std::size_t{0}, n);
      return;
    }
    const auto [chunks, owners] = split(max_chunks, static_cast<std::size_t>(size_));
    job j;
    j.n = n;
    j.chunks = chunks;
    j.ctx = const_cast<void*>(static_cast<const void*>(&f));
    j.call = [](void* ctx, std::size_t b, std::size_t e) { (*static_cast<std::remove_reference_t<F>*>(ctx))(b, e); };
    j.owners = static_cast<unsigned>(owners);
    j.flush_denormals = flush_denormals_;
    if (runtime_) {
      // The runtime's threads take chunks as the pool's workers would (their shares by their numbers in the region,
      // or in the order they arrive); it returns when they are all done.
      j.thread_num = runtime_.thread_num;
      runtime_.run([](void* p) {
                     auto& jb = *static_cast<job*>(p);
                     run_chunks(jb, jb.thread_num != nullptr ? jb.thread_num() : jb.arrived.fetch_add(1, std::memory_order_relaxed));
                   }, &j,
                   static_cast<unsigned>(std::min<std::size_t>(chunks, static_cast<std::size_t>(size_))));
      return;
    }
    // The fast slot, when no other caller holds it (one run at a time, the common case): published without a lock,
    // which the workers spinning between loops see at once. Through the queue alone, each loop took a mutex four
    // times, two of them contended by caller and worker at its end: an empty loop of 8 chunks on two threads cost
    // 5-10 us in this VM (0.65 us for this slot), tens of loops a run.
    job* vacant = nullptr;
    if (fast_job_.compare_exchange_strong(vacant, &j)) {
      fast_epoch_.fetch_add(1);
      if (sleepers_.load() > 0) {
        // A worker between its check of the epoch and its wait holds the mutex: taking it once makes the
        // notification reach it.
        { const std::lock_guard lock(mu_); }
        cv_.notify_all();
      }
      run_chunks(j, 0);
      wait_done(j);
      // Closed, not yet free: no other caller can put a loop there while this one waits for the workers that may
      // still hold its job's address (they entered the slot before it was closed), so that wait ends as soon as they
      // leave, not when another caller's loop does.
      fast_job_.store(closing());
      for (unsigned spin = 0; fast_active_.load() != 0; ++spin) relax(spin);
      fast_job_.store(nullptr);
      return;
    }
    bool wake = false;
    {
      std::lock_guard lock(mu_);
      queue_.push_back(&j);
      pending_.fetch_add(1, std::memory_order_release);
      wake = sleepers_.load() > 0;
    }
    if (wake) cv_.notify_all();  // spinning workers see `pending_` without a system call
    run_chunks(j, 0);
    {
      std::lock_guard lock(mu_);
      if (auto it = std::find(queue_.begin(), queue_.end(), &j); it != queue_.end()) {
        queue_.erase(it);
        pending_.fetch_sub(1, std::memory_order_release);
      }
    }
    // No worker can join the job now; wait for those still inside it.
    wait_done(j);
    for (unsigned spin = 0; j.active.load(std::memory_order_acquire) != 0; ++spin) relax(spin);
  }

  /// @brief The share of `parallel_for(n, grain, f)` on a pool of `threads` that holds item `i`: items [first,
  /// second), which one thread takes in order (unless another, done with its own, takes from its end). A kernel that
  /// prepares the next item's data while it computes one asks where its thread's share ends. The whole range when the
  /// loop runs as one call.
  [[nodiscard]] static std::pair<std::size_t, std::size_t> share_of(std::size_t n, std::size_t grain, std::size_t threads,
                                                                    std::size_t i) noexcept {
    grain = std::max<std::size_t>(grain, 1);
    const std::size_t max_chunks = (n + grain - 1) / grain;
    if (threads <= 1 || max_chunks <= 1) return {0, n};
    const auto [chunks, owners] = split(max_chunks, threads);
    for (std::size_t s = 0; s < owners; ++s) {
      const std::size_t end = n * share_chunks(chunks, owners, s + 1) / chunks;
      if (i < end) return {n * share_chunks(chunks, owners, s) / chunks, end};
    }
    return {0, n};
  }

  /// @brief The chunk size that gives each thread about `per_thread` chunks of a range of `n` items.
  [[nodiscard]] std::size_t grain_for(std::size_t n, std::size_t min_grain = 1) const noexcept {
    return std::max<std::size_t>(min_grain, n / (static_cast<std::size_t>(size_) * 4) + 1);
  }

 private:
  // Shares of a loop's chunks: one per thread up to this many (threads beyond take from the others' shares).
  static constexpr std::size_t max_owners = 16;
  // A loop of up to `max_chunks` chunks on `threads` threads: its chunks (a few per thread balance uneven work
  // without much overhead) and their shares (parallel_for and share_of alike).
  struct split_t {
    std::size_t chunks, owners;
  };
  [[nodiscard]] static split_t split(std::size_t max_chunks, std::size_t threads) noexcept {
    const std::size_t chunks = std::min<std::size_t>(max_chunks, threads * 4);
    return {chunks, std::min<std::size_t>({chunks, threads, max_owners})};
  }
  // The first chunk of share s of `owners` (s = owners: the end).
  [[nodiscard]] static std::size_t share_chunks(std::size_t chunks, std::size_t owners, std::size_t s) noexcept {
    return chunks * s / owners;
  }
  struct alignas(64) share_counter {
    std::atomic<std::size_t> next{0};
  };
  struct job {
    std::size_t n = 0, chunks = 0;
    unsigned owners = 1;
    void* ctx = nullptr;
    void (*call)(void*, std::size_t, std::size_t) = nullptr;
    share_counter taken[max_owners];
    std::atomic<std::size_t> done{0};
    std::atomic<unsigned> arrived{0};
    unsigned (*thread_num)() = nullptr;
    std::atomic<int> active{0};
    bool flush_denormals = false;
  };

  void start_workers() {
    stop_ = false;
    stopping_.store(false);
    for (int i = 1; i < size_; ++i) workers_.emplace_back([this, i] { work(static_cast<unsigned>(i)); });
  }
  void stop_workers() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      stopping_.store(true);
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  static void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
  }
  // A caller's wait: pause hints, then yielding (a worker descheduled inside a chunk).
  static void relax(unsigned spin) noexcept {
    if (spin < 4096) cpu_relax();
    else std::this_thread::yield();
  }
  static void wait_done(const job& j) noexcept {
    for (unsigned spin = 0; j.done.load(std::memory_order_acquire) < j.chunks; ++spin) relax(spin);
  }

  // Share s of a job holds chunks [s * chunks / owners, (s + 1) * chunks / owners). A thread works through its own
  // share (`slot` modulo the shares) in order, then takes what is left of the others'. With a fixed share per thread,
  // a chain of loops over the same rows (convolution after convolution) finds in each thread's L2 what it wrote in
  // the loop before: taken first come first served, MobileNetV2-like depthwise chains scaled 1.3x on two threads in
  // this VM's slow phases (1.8x in its fast ones), and the default stack ran mlp_b1 a third slower than the CPU stack.
  static void run_chunks(job& j, unsigned slot) {
    const flush_denormals_scope fp(j.flush_denormals);
    for (unsigned k = 0; k < j.owners; ++k) {
      const unsigned s = (slot + k) % j.owners;
      const std::size_t first = share_chunks(j.chunks, j.owners, s), count = share_chunks(j.chunks, j.owners, s + 1) - first;
      for (;;) {
        const std::size_t i = j.taken[s].next.fetch_add(1, std::memory_order_relaxed);
        if (i >= count) break;
        const std::size_t c = first + i;
        j.call(j.ctx, j.n * c / j.chunks, j.n * (c + 1) / j.chunks);
        j.done.fetch_add(1, std::memory_order_release);
      }
    }
  }

  // Whether a worker may spin now (spin_policy).
  [[nodiscard]] bool may_spin() const noexcept {
    switch (spin_.load(std::memory_order_relaxed)) {
      case spin_policy::after_work: return true;
      case spin_policy::during_runs: return runs_.load(std::memory_order_relaxed) > 0;
      case spin_policy::never: break;
    }
    return false;
  }

  void work(unsigned slot) {
    bool worked = false;  // a worker spins only after it has had work: an idle pool costs nothing
    std::uint64_t seen = 0;  // the fast slot's epoch this worker last looked at
    for (;;) {
      // Spin before sleeping (as the policy allows): during a run the next operator's loop follows within
      // microseconds. First with the CPU's pause hint (no system call), then yielding, then asleep until a loop
      // arrives.
      for (unsigned spin = 0; worked && spin < 300000 && pending_.load(std::memory_order_acquire) == 0 &&
                              fast_epoch_.load(std::memory_order_relaxed) == seen &&
                              !stopping_.load(std::memory_order_relaxed) && may_spin();
           ++spin)
        if (spin < 100000) cpu_relax();
        else std::this_thread::yield();
      // A loop in the fast slot. fast_active_ is raised before the slot is read, and its caller closes the slot
      // before it waits for fast_active_ to fall (both sequentially consistent): a worker either is counted there
      // or reads the slot closed or empty, never a job whose caller has returned.
      if (const std::uint64_t e = fast_epoch_.load(); e != seen) {
        seen = e;
        fast_active_.fetch_add(1);
        if (job* f = fast_job_.load(); f != nullptr && f != closing()) {
          worked = true;
          run_chunks(*f, slot);
        }
        fast_active_.fetch_sub(1);
        continue;
      }
      job* j = nullptr;
      {
        std::unique_lock lock(mu_);
        sleepers_.fetch_add(1);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty() || fast_epoch_.load() != seen; });
        sleepers_.fetch_sub(1);
        if (stop_ && queue_.empty()) return;
        if (queue_.empty()) continue;  // a loop in the fast slot
        j = queue_.front();
        j->active.fetch_add(1, std::memory_order_acq_rel);
      }
      worked = true;
      run_chunks(*j, slot);
      {
        // Every chunk is taken now: take the job off the queue (its caller may have done so already).
        std::lock_guard lock(mu_);
        if (auto it = std::find(queue_.begin(), queue_.end(), j); it != queue_.end()) {
          queue_.erase(it);
          pending_.fetch_sub(1, std::memory_order_release);
        }
      }
      j->active.fetch_sub(1, std::memory_order_acq_rel);  // the last access: the caller may return now
    }
  }

  int size_ = 1;
  bool flush_denormals_ = false;
  std::atomic<spin_policy> spin_{spin_policy::after_work};
  mutable std::atomic<int> runs_{0};  // run_scopes alive
  parallel_runtime runtime_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<job*> queue_;
  std::atomic<int> pending_{0};
  std::atomic<int> sleepers_{0};  // workers waiting on cv_ (changed under mu_)
  // The fast slot: one loop at a time, published without the mutex (parallel_for); its epoch counts the loops put
  // there, fast_active_ the workers that may be reading the job it holds.
  alignas(64) std::atomic<job*> fast_job_{nullptr};
  alignas(64) std::atomic<std::uint64_t> fast_epoch_{0};
  alignas(64) std::atomic<int> fast_active_{0};
  // The fast slot's value while its caller waits for the workers to leave it (an address no loop has).
  static job* closing() noexcept {
    static job marker;
    return &marker;
  }
  bool stop_ = false;
  std::atomic<bool> stopping_{false};
};

}  // namespace epstack
