#pragma once
/// @file weight_memory.hpp
/// @brief Memory for the weights a session lays out while it is created (packed, blocked and transformed copies of
/// the model's weights): carved from large chunks backed by transparent huge pages.
///
/// A create writes every byte of these copies once, so what it costs is mostly the first touch of fresh pages: one
/// fault per 4 KiB page. Where faults are dear (a virtual machine with shadow page tables: 3.3-4.3 ms a MiB, against
/// 0.09 on 2 MiB pages, by bench_load's first_touch) a model's 100 MiB of laid-out weights took most of its create. One allocation per
/// weight does not get huge pages either: a weight under 2 MiB, or the part of one past its last 2 MiB boundary, is on
/// 4 KiB pages. Chunks of 64 MiB, 2 MiB aligned and advised as huge pages, shared by every weight of a create, fault
/// once per 2 MiB and waste at most the unused part of one huge page per chunk (pages never touched cost nothing).

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <stdexcept>
#include <vector>

#include <epstack/core/mapped_file.hpp>
#include <epstack/core/tensor.hpp>

#include <sys/mman.h>
#include <unistd.h>

namespace epstack {

namespace detail {
/// The largest request the weight allocators take (a size from a model is untrusted: none may wrap when rounded).
inline constexpr std::size_t max_weight_bytes = std::size_t{1} << 48;

#if defined(__linux__)
/// @brief Huge chunks whose last owner is gone (a session destroyed, a create's staging buffer), kept for the next
/// create to reuse, up to a limit: their pages are still mapped, so writing them again costs neither a fault nor the
/// kernel's zeroing of a fresh page (MobileNetV2's creates after the first: 14.2 ms against 18.2 without). A kept
/// chunk is given back as MADV_FREE: the kernel takes its pages when it needs memory, and a reuse then finds zeroed
/// pages, as a fresh mapping would. Best fit on reuse, never a chunk over twice the request. Process-wide,
/// thread-safe; see set_weight_memory_cache_limit.
class huge_chunk_cache {
 public:
  static huge_chunk_cache& get() {
    static huge_chunk_cache* c = new huge_chunk_cache;  // never destroyed: chunks may be released at exit
    return *c;
  }
  /// A kept chunk of at least `size` bytes (a multiple of 2 MiB), at most twice that, or null; `chunk` is set to its
  /// size (what to give back).
  [[nodiscard, gnu::noinline, gnu::cold]] std::byte* take(std::size_t size, std::size_t& chunk) {
    std::lock_guard lock(mu_);
    std::size_t best = count_;
    for (std::size_t i = 0; i < count_; ++i)
      if (kept_[i].size >= size && (best == count_ || kept_[i].size < kept_[best].size)) best = i;
    // Not a much larger chunk: the request it would fit (the next create's arena chunk, of the same size) would find
    // nothing.
    if (best == count_ || kept_[best].size / 2 > size) return nullptr;
    const entry e = kept_[best];
    kept_[best] = kept_[--count_];
    bytes_ -= e.size;
    chunk = e.size;
    return e.p;
  }
  /// Keeps `p` (`size` bytes, 2 MiB aligned, from map_huge_chunk) when the limit allows, else unmaps it.
  [[gnu::noinline, gnu::cold]] void give(std::byte* p, std::size_t size) noexcept {
    {
      std::lock_guard lock(mu_);
      // Kept only where the kernel may take its pages back (MADV_FREE, Linux 4.5 and later).
      if (bytes_ + size <= limit_ && count_ < max_entries && ::madvise(p, size, MADV_FREE) == 0) {
        kept_[count_++] = {p, size};
        bytes_ += size;
        return;
      }
    }
    ::munmap(p, size);
  }
  /// Sets the limit; the chunks kept beyond it are unmapped now (all of them for 0).
  void set_limit(std::size_t bytes) noexcept {
    std::lock_guard lock(mu_);
    limit_ = bytes;
    while (bytes_ > limit_ && count_ > 0) {
      --count_;
      ::munmap(kept_[count_].p, kept_[count_].size);
      bytes_ -= kept_[count_].size;
    }
  }
  [[nodiscard]] std::size_t limit() const noexcept {
    std::lock_guard lock(mu_);
    return limit_;
  }
  [[nodiscard]] std::size_t bytes() const noexcept {
    std::lock_guard lock(mu_);
    return bytes_;
  }
  /// Fills every kept chunk with 0xFF bytes (NaN as floats), for tests: whatever reuses one must write every byte it
  /// reads, padding included; none may count on fresh pages' zeros.
  void poison_for_tests() noexcept {
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < count_; ++i) std::memset(kept_[i].p, 0xFF, kept_[i].size);
  }

 private:
  static constexpr std::size_t max_entries = 32;
  struct entry {
    std::byte* p = nullptr;
    std::size_t size = 0;
  };
  mutable std::mutex mu_;
  entry kept_[max_entries];
  std::size_t count_ = 0, bytes_ = 0, limit_ = std::size_t{256} << 20;
};
#endif

/// `bytes` rounded up to 2 MiB, 2 MiB aligned, advised as transparent huge pages; unmapped (or kept for reuse,
/// huge_chunk_cache) with the last owner. Uninitialised: a reused chunk holds what was written to it before.
[[nodiscard, gnu::noinline, gnu::cold]] inline std::shared_ptr<std::byte> map_huge_chunk(std::size_t bytes) {
  constexpr std::size_t huge_page = huge_page_bytes;
  if (bytes > max_weight_bytes) throw std::bad_alloc();  // rounding below must not wrap
  const std::size_t size = (bytes + huge_page - 1) / huge_page * huge_page;
#if defined(__linux__)
  std::size_t chunk = size;
  std::byte* p = huge_chunk_cache::get().take(size, chunk);
  if (p == nullptr) {
    // Mapped with a huge page of slack, then trimmed to a 2 MiB aligned range (mmap aligns to 4 KiB only).
    void* m = ::mmap(nullptr, size + huge_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    const auto base = reinterpret_cast<std::uintptr_t>(m);
    const std::uintptr_t aligned = (base + huge_page - 1) / huge_page * huge_page;
    if (aligned > base) ::munmap(m, aligned - base);
    if (const std::uintptr_t tail = base + size + huge_page - (aligned + size); tail != 0)
      ::munmap(reinterpret_cast<void*>(aligned + size), tail);
    p = reinterpret_cast<std::byte*>(aligned);
    ::madvise(p, size, MADV_HUGEPAGE);
  }
  return std::shared_ptr<std::byte>(p, [chunk](std::byte* q) { huge_chunk_cache::get().give(q, chunk); });
#else
  auto* p = static_cast<std::byte*>(::operator new(size, std::align_val_t{huge_page}));
  return std::shared_ptr<std::byte>(p, [](std::byte* q) { ::operator delete(q, std::align_val_t{huge_page}); });
#endif
}
}  // namespace detail

/// @brief The most bytes of released weight memory (huge chunks of the sessions destroyed, of creates' staging and
/// reading buffers, of the Conv+BatchNorm fusion's scaled filters) the process keeps to reuse in later creates
/// (default 256 MiB; 0 keeps none, and unmaps what is kept now). Kept memory is advised MADV_FREE: the kernel reclaims
/// it under memory pressure, though it counts in the resident set until then. A process that creates sessions again
/// and again (a server loading models, a benchmark) skips the faults and the zeroing of fresh pages; one that creates
/// a session once keeps its create's staging buffers resident (reclaimable) for nothing: set 0 there. Linux only (a
/// no-op elsewhere).
inline void set_weight_memory_cache_limit(std::size_t bytes) noexcept {
#if defined(__linux__)
  detail::huge_chunk_cache::get().set_limit(bytes);
#else
  (void)bytes;
#endif
}
/// @brief The bytes of released weight memory kept for reuse now (set_weight_memory_cache_limit).
[[nodiscard]] inline std::size_t weight_memory_cached_bytes() noexcept {
#if defined(__linux__)
  return detail::huge_chunk_cache::get().bytes();
#else
  return 0;
#endif
}

/// @brief A bump allocator over huge-page chunks for the weights one session create lays out. Each block keeps its
/// chunk alive (the blocks of a chunk are freed together, when the last of them is); the arena itself may go first.
/// Thread-safe. Memory is never reused within the arena: it is for what lives as long as the session.
class weight_arena {
 public:
  /// Size of a chunk; a block larger than half of it gets a chunk of its own.
  static constexpr std::size_t chunk_bytes = std::size_t{64} << 20;
  /// Alignment of every block.
  static constexpr std::size_t alignment = 64;
  /// What a create lays out before its first chunk: ordinary allocations.
  static constexpr std::size_t small_limit = std::size_t{1} << 20;

  weight_arena() = default;
  // Out of line: inlined where a session is prepared, the release of its chunks grew the deployables' code.
  [[gnu::noinline, gnu::cold]] ~weight_arena() {}
  weight_arena(const weight_arena&) = delete;
  weight_arena& operator=(const weight_arena&) = delete;

  /// @brief `bytes` (at least 1) of uninitialised memory, 64-byte aligned, alive while the returned pointer or a copy
  /// of it is. Throws std::bad_alloc when the system has no memory for a chunk.
  [[nodiscard, gnu::noinline, gnu::cold]] std::shared_ptr<void> allocate(std::size_t bytes) {
    if (bytes > detail::max_weight_bytes) throw std::bad_alloc();
    const std::size_t n = round_up(bytes == 0 ? 1 : bytes, alignment);
    std::lock_guard lock(mu_);
    blocks_ += 1;
    // The first MiB a create lays out gets ordinary allocations: a small model's few weights would otherwise cost
    // a mapping, its unmapping and the zeroing of a whole 2 MiB page, in a create of 1-2 ms (mixed_ops).
    if (small_bytes_ + n <= small_limit && !chunk_) {
      small_bytes_ += n;
      return std::shared_ptr<void>(detail::allocate(n), [n](void* q) { detail::deallocate(q, n); });
    }
    if (n > chunk_bytes / 2) {
      return new_chunk(n);
    }
    if (!chunk_ || size_ - used_ < n) {
      chunk_ = new_chunk(chunk_bytes);
      size_ = chunk_bytes;
      used_ = 0;
    }
    std::byte* p = chunk_.get() + used_;
    used_ += n;
    return std::shared_ptr<void>(chunk_, p);
  }

  /// @brief A buffer of at least `bytes` for reading a weight about to be laid out (weight_reader), valid until the
  /// next call; one buffer for the whole create, so its pages are touched once. For the create's own thread only, not
  /// its helpers (weight_arena_scope).
  [[nodiscard, gnu::noinline, gnu::cold]] std::byte* staging(std::size_t bytes) {
    std::lock_guard lock(mu_);
    if (bytes > staging_bytes_) {
      staging_.reset();
      staging_bytes_ = 0;
      staging_ = detail::map_huge_chunk(bytes);
      staging_bytes_ = (bytes + huge_page - 1) / huge_page * huge_page;
    }
    return staging_.get();
  }

  /// Blocks handed out so far.
  [[nodiscard]] std::size_t blocks() const {
    std::lock_guard lock(mu_);
    return blocks_;
  }
  /// Chunks mapped so far (one per large block, plus the shared ones).
  [[nodiscard]] std::size_t chunks() const {
    std::lock_guard lock(mu_);
    return chunks_;
  }

 private:
  static constexpr std::size_t huge_page = detail::huge_page_bytes;
  [[nodiscard]] static constexpr std::size_t round_up(std::size_t n, std::size_t to) noexcept {
    return (n + to - 1) / to * to;
  }

  std::shared_ptr<std::byte> new_chunk(std::size_t bytes) {
    chunks_ += 1;
    return detail::map_huge_chunk(bytes);
  }

  mutable std::mutex mu_;
  std::shared_ptr<std::byte> chunk_, staging_;
  std::size_t used_ = 0, size_ = 0, blocks_ = 0, chunks_ = 0, staging_bytes_ = 0, small_bytes_ = 0;
};

namespace detail {
/// The arena of the session create running on this thread, or of the create this thread helps (weight_arena_scope),
/// or null.
inline thread_local weight_arena* current_weight_arena = nullptr;
/// Whether weight_reader reads into that arena's staging buffer on this thread: on the create's own thread, not on the
/// helper threads it lays weights out on (the buffer is one, valid until the next read).
inline thread_local bool current_weight_arena_stages = false;
}  // namespace detail

/// @brief The arena `allocate_weight` uses on this thread (weight_arena_scope), or null: for a create that lays weights
/// out on helper threads too (weight_arena_scope's helper_thread form).
[[nodiscard]] inline weight_arena* current_weight_arena() noexcept { return detail::current_weight_arena; }

/// @brief Makes `arena` the one `allocate_weight` uses on this thread until the scope ends (null: none, for copies
/// that do not live as long as the session, such as the candidates timed by placement by measure).
class weight_arena_scope {
 public:
  explicit weight_arena_scope(weight_arena* arena) noexcept
      : previous_(detail::current_weight_arena), previous_stages_(detail::current_weight_arena_stages) {
    detail::current_weight_arena = arena;
    detail::current_weight_arena_stages = true;
  }
  /// Tag of the form for a create's helper threads.
  struct helper_thread_t {};
  /// On a thread that lays out weights for a create running on another (`arena`: current_weight_arena() there): its
  /// weights go to the create's chunks too, and weight_reader reads into buffers of its own. Where `arena` is current
  /// already (the create's own thread, running its share of the work) nothing changes.
  weight_arena_scope(weight_arena* arena, helper_thread_t) noexcept
      : previous_(detail::current_weight_arena), previous_stages_(detail::current_weight_arena_stages) {
    if (previous_ == arena) return;
    detail::current_weight_arena = arena;
    detail::current_weight_arena_stages = false;
  }
  ~weight_arena_scope() {
    detail::current_weight_arena = previous_;
    detail::current_weight_arena_stages = previous_stages_;
  }
  weight_arena_scope(const weight_arena_scope&) = delete;
  weight_arena_scope& operator=(const weight_arena_scope&) = delete;

 private:
  weight_arena* previous_;
  bool previous_stages_;
};

/// @brief Memory for a weight laid out for a kernel, alive while the result is: from the arena of the create running
/// on this thread, or an allocation of its own (a plan made at run time, a thread with no weight_arena_scope).
/// 64-byte aligned, uninitialised.
[[nodiscard, gnu::noinline, gnu::cold]] inline std::shared_ptr<void> allocate_weight(std::size_t bytes) {
  if (auto* a = detail::current_weight_arena) return a->allocate(bytes);
  const std::size_t n = bytes == 0 ? 1 : bytes;
  return std::shared_ptr<void>(detail::allocate(n), [n](void* q) { detail::deallocate(q, n); });
}

/// @brief `allocate_weight` as floats.
[[nodiscard]] inline std::shared_ptr<float> allocate_weight_floats(std::size_t count) {
  auto m = allocate_weight(count * sizeof(float));
  auto* p = static_cast<float*>(m.get());
  return std::shared_ptr<float>(std::move(m), p);
}

namespace detail {
// The files of enable_bulk_reads (a few: a model and its external data files). An entry whose file is gone is
// skipped (another mapping may since occupy its range) and dropped at the next registration.
struct bulk_read_files {
  std::mutex mu;
  std::vector<std::weak_ptr<const mapped_file>> files;
  static bulk_read_files& get() {
    static bulk_read_files r;
    return r;
  }
};
}  // namespace detail

/// @brief Makes the lazily mapped file `f` (just opened with keep_descriptor, not yet shared) one `read_mapped` reads
/// from: a model's external data file, whose weights the providers lay out at create. Kept while `f` lives. Only
/// files of at least 1 MiB, and at most 64 at once in the process: the others' descriptors are closed here (a model
/// saved with a file per tensor has thousands, beyond the process's limit of open files), and their weights are read
/// through the mapping. Returns whether `f` was taken.
inline bool enable_bulk_reads(const std::shared_ptr<mapped_file>& f) {
  constexpr std::size_t min_bytes = std::size_t{1} << 20, max_files = 64;
  if (!f || f->descriptor() < 0) return false;
  if (f->size() >= min_bytes) {
    auto& r = detail::bulk_read_files::get();
    std::lock_guard lock(r.mu);
    std::erase_if(r.files, [](const std::weak_ptr<const mapped_file>& w) { return w.expired(); });
    if (r.files.size() < max_files) {
      r.files.push_back(f);
      return true;
    }
  }
  f->close_descriptor();
  return false;
}

/// @brief Copies the `n` bytes at `p` (inside a file given to `enable_bulk_reads`) to `dst` with pread, a bulk copy
/// from the page cache, instead of reading them through the mapping: a fault per 4 KiB page, which under a
/// hypervisor's shadow page tables reads at 1.3 GB/s where pread copies at 5 (measured, a VM of 2026-11). For a
/// kernel about to lay a weight out, so only for an unmodified mapping (as release_file_pages). false when
/// [p, p + n) is not in one such file or the read fails: the caller reads the mapping instead. The caller holds the
/// mapping (a tensor borrowing it) while this runs.
[[nodiscard, gnu::noinline, gnu::cold]] inline bool read_mapped(const void* p, std::size_t n, void* dst) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::shared_ptr<const mapped_file> file;
  {
    auto& r = detail::bulk_read_files::get();
    std::lock_guard lock(r.mu);
    for (const auto& w : r.files)
      if (auto f = w.lock(); f && a - reinterpret_cast<std::uintptr_t>(f->data()) < f->size()) {
        file = std::move(f);
        break;
      }
  }
  if (!file) return false;
  const std::uintptr_t offset = a - reinterpret_cast<std::uintptr_t>(file->data());
  if (n > file->size() - offset) return false;
  auto* out = static_cast<char*>(dst);
  std::size_t done = 0;
  while (done < n) {
    const ::ssize_t got = ::pread(file->descriptor(), out + done, n - done, static_cast<::off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    done += static_cast<std::size_t>(got);
  }
  return true;
}

/// @brief The bytes a kernel reads as it lays a weight out. A weight in a lazily mapped model file is read with one
/// bulk copy into a buffer (read_mapped: the create's staging buffer, or one of this object's own) rather
/// than faulted in through the mapping a page at a time; any other is read in place. The bytes stay valid while this
/// object lives and `read` is not called again (on this object, or on another of the same create's thread). Keep one
/// for a series of weights: its buffer is reused.
class weight_reader {
 public:
  [[nodiscard, gnu::noinline, gnu::cold]] const std::byte* read(const tensor& t) {
    if (!t.is_file_backed() || t.byte_size() < min_bytes || t.byte_size() > max_bytes) return t.data();
    const std::size_t n = t.byte_size();
    std::byte* buf = nullptr;
    if (auto* a = detail::current_weight_arena; a != nullptr && detail::current_weight_arena_stages) {
      buf = a->staging(n);
    } else {
      if (n > own_bytes_) {
        own_.reset();
        own_bytes_ = 0;
        own_ = detail::map_huge_chunk(n);
        own_bytes_ = n;
      }
      buf = own_.get();
    }
    return read_mapped(t.data(), n, buf) ? buf : t.data();
  }
  /// `read` as floats.
  [[nodiscard]] const float* floats(const tensor& t) { return reinterpret_cast<const float*>(read(t)); }

 private:
  /// Below this a weight is read in place (a few pages: the copy would not pay).
  static constexpr std::size_t min_bytes = std::size_t{64} << 10;
  /// Above this too: a staging copy of a weight this large (an LLM's 2 GB output projection) would add its size to
  /// the create's peak memory, where the mapping's pages can be dropped.
  static constexpr std::size_t max_bytes = std::size_t{256} << 20;
  std::shared_ptr<std::byte> own_;  // reused by the next read that fits
  std::size_t own_bytes_ = 0;
};

/// @brief An uninitialised tensor (not strings) in `allocate_weight`'s memory: a weight laid out by a pass.
[[nodiscard]] inline tensor uninitialized_weight(element_type type, std::span<const std::int64_t> sizes) {
  const auto n = element_count(sizes);
  if (!n || !is_valid(type) || type == element_type::string || *n < 0 ||
      static_cast<std::size_t>(*n) > (std::size_t{1} << 62) / 16)
    throw std::length_error("weight: invalid sizes or element type");
  auto m = allocate_weight(storage_bytes(type, static_cast<std::size_t>(*n)));
  void* p = m.get();
  return tensor::borrow(type, sizes, p, std::move(m));
}

}  // namespace epstack
