// Memory for laid-out weights (weight_memory.hpp): the create's huge-page arena, and reading mapped weights in bulk.
#include <epstack/core/mapped_file.hpp>
#include <epstack/core/weight_memory.hpp>

#include "../support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

using namespace epstack;

TEST_CASE("the weight arena hands out aligned, disjoint blocks from shared huge-page chunks") {
  weight_arena arena;
  std::vector<std::shared_ptr<void>> blocks;
  const std::size_t sizes[] = {1, 100, 4096, 1u << 20, 3u << 20, 0};
  for (const auto n : sizes) blocks.push_back(arena.allocate(n));
  CHECK(arena.blocks() == 6);
  CHECK(arena.chunks() == 1);  // all of them fit in one chunk
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    CHECK(reinterpret_cast<std::uintptr_t>(blocks[k].get()) % weight_arena::alignment == 0);
    std::memset(blocks[k].get(), static_cast<int>(k + 1), std::max<std::size_t>(sizes[k], 1));
  }
  // Disjoint: each still holds what was written to it.
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    const auto* b = static_cast<const unsigned char*>(blocks[k].get());
    const std::size_t n = std::max<std::size_t>(sizes[k], 1);
    CHECK(b[0] == k + 1);
    CHECK(b[n - 1] == k + 1);
  }
  // A block larger than half a chunk gets its own; the shared chunk goes on serving small ones.
  auto big = arena.allocate(weight_arena::chunk_bytes / 2 + 1);
  CHECK(arena.chunks() == 2);
  CHECK(reinterpret_cast<std::uintptr_t>(big.get()) % detail::huge_page_bytes == 0);
  auto small = arena.allocate(64);
  CHECK(arena.chunks() == 2);
  // One that does not fit what is left of the shared chunk starts a new one.
  auto rest = arena.allocate(weight_arena::chunk_bytes / 2);
  auto more = arena.allocate(weight_arena::chunk_bytes / 2);
  CHECK(arena.chunks() == 3);
  static_cast<unsigned char*>(more.get())[weight_arena::chunk_bytes / 2 - 1] = 7;
}

TEST_CASE("a weight size no allocation can hold is refused, not wrapped") {
  weight_arena arena;
  CHECK_THROWS_AS((void)arena.allocate(~std::size_t{0}), std::bad_alloc);
  CHECK_THROWS_AS((void)arena.allocate(~std::size_t{0} - 30), std::bad_alloc);
  CHECK_THROWS_AS((void)detail::map_huge_chunk(~std::size_t{0} - 1), std::bad_alloc);
  weight_arena_scope scope(&arena);
  CHECK_THROWS_AS((void)allocate_weight(~std::size_t{0}), std::bad_alloc);
  CHECK(arena.blocks() == 0);
}

TEST_CASE("weight blocks outlive their arena") {
  std::shared_ptr<void> kept;
  {
    weight_arena arena;
    kept = arena.allocate(1000);
    auto gone = arena.allocate(1000);
  }
  auto* p = static_cast<float*>(kept.get());
  for (int i = 0; i < 250; ++i) p[i] = static_cast<float>(i);
  CHECK(p[249] == 249.0f);
}

TEST_CASE("allocate_weight uses the arena of the scope on this thread, and its own memory outside one") {
  weight_arena arena;
  {
    weight_arena_scope scope(&arena);
    auto a = allocate_weight(128);
    auto f = allocate_weight_floats(10);
    CHECK(arena.blocks() == 2);
    {
      weight_arena_scope none(nullptr);  // placement by measure: copies that die with their candidate
      auto c = allocate_weight(128);
      CHECK(arena.blocks() == 2);
      CHECK(c != nullptr);
    }
    auto d = allocate_weight(64);
    CHECK(arena.blocks() == 3);
    const std::int64_t sizes[] = {3, 5};
    tensor t = uninitialized_weight(element_type::float32, sizes);
    CHECK(arena.blocks() == 4);
    CHECK(t.element_count() == 15);
    CHECK(t.byte_size() == 60);
    t.typed<float>()[14] = 2.5f;
    CHECK(t.view<float>()[14] == 2.5f);
    const std::int64_t bad[] = {-1, 2};
    CHECK_THROWS_AS((void)uninitialized_weight(element_type::float32, bad), std::length_error);
    CHECK_THROWS_AS((void)uninitialized_weight(element_type::string, sizes), std::length_error);
  }
  auto outside = allocate_weight(128);
  CHECK(arena.blocks() == 4);
  CHECK(reinterpret_cast<std::uintptr_t>(outside.get()) % tensor_alignment == 0);
}

TEST_CASE("mapped weights are read in bulk with the bytes the mapping holds") {
  test::temp_dir dir;
  std::vector<float> v(300000);  // 1.2 MB: over weight_reader's in-place limit
  std::iota(v.begin(), v.end(), 0.5f);
  test::write_file(dir / "w.bin", std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  auto f = mapped_file::open(dir / "w.bin", false, /*keep_descriptor=*/true);
  REQUIRE(f.has_value());
  const std::byte* base = (*f)->data();
  CHECK((*f)->descriptor() >= 0);
  // Not read in bulk until enabled.
  std::vector<unsigned char> one(16);
  CHECK_FALSE(read_mapped(base, one.size(), one.data()));
  CHECK(enable_bulk_reads(*f));
  // A mapping without its descriptor cannot be.
  auto closed = mapped_file::open(dir / "w.bin");
  REQUIRE(closed.has_value());
  CHECK((*closed)->descriptor() == -1);
  CHECK_FALSE(enable_bulk_reads(*closed));
  CHECK_FALSE(read_mapped((*closed)->data(), one.size(), one.data()));
  // Nor a small file: its descriptor is closed at once.
  test::write_file(dir / "small.bin", std::string_view(reinterpret_cast<const char*>(v.data()), 4096));
  auto small_file = mapped_file::open(dir / "small.bin", false, true);
  REQUIRE(small_file.has_value());
  CHECK_FALSE(enable_bulk_reads(*small_file));
  CHECK((*small_file)->descriptor() == -1);
  CHECK_FALSE(read_mapped((*small_file)->data(), 16, one.data()));

  // A range inside the mapping, at an unaligned offset.
  std::vector<unsigned char> out(1001);
  REQUIRE(read_mapped(base + 7, out.size(), out.data()));
  CHECK(std::memcmp(out.data(), base + 7, out.size()) == 0);
  // Its last byte, and nothing past it.
  REQUIRE(read_mapped(base + (*f)->size() - 1, 1, out.data()));
  CHECK(out[0] == static_cast<unsigned char>(base[(*f)->size() - 1]));
  CHECK_FALSE(read_mapped(base + (*f)->size() - 4, 8, out.data()));
  // Memory that is no mapped file's.
  CHECK_FALSE(read_mapped(v.data(), 16, out.data()));

  const std::int64_t sizes[] = {300000};
  tensor mapped = tensor::borrow_file(element_type::float32, sizes, const_cast<std::byte*>(base), *f);
  {
    weight_reader r;  // no arena: its own buffer
    const float* got = r.floats(mapped);
    CHECK(reinterpret_cast<const std::byte*>(got) != base);
    CHECK(std::memcmp(got, v.data(), v.size() * sizeof(float)) == 0);
  }
  {
    weight_arena arena;
    weight_arena_scope scope(&arena);
    weight_reader r;  // the arena's staging buffer
    const float* got = r.floats(mapped);
    CHECK(std::memcmp(got, v.data(), v.size() * sizeof(float)) == 0);
    CHECK(arena.blocks() == 0);  // staging is not a block
    // A helper thread of the create (the CPU provider compiles nodes on every core): its weights in the create's
    // chunks, its reads in a buffer of its own, the staging buffer left to the creating thread (what it holds stays).
    // Compared on the helper thread, while its reader (and buffer) lives; the thread_locals it found after its scope.
    bool helper_own_buffer = false, helper_same = false, helper_restored = false;
    std::thread helper([&] {
      {
        const weight_arena_scope shared(&arena, weight_arena_scope::helper_thread_t{});
        auto w = allocate_weight(100);
        weight_reader hr;
        const std::byte* read = hr.read(mapped);
        helper_own_buffer = read != reinterpret_cast<const std::byte*>(got) && read != base;
        helper_same = std::memcmp(read, v.data(), v.size() * sizeof(float)) == 0;
      }
      helper_restored = current_weight_arena() == nullptr;
    });
    helper.join();
    CHECK(arena.blocks() == 1);
    CHECK(helper_own_buffer);
    CHECK(helper_same);
    CHECK(helper_restored);
    CHECK(std::memcmp(got, v.data(), v.size() * sizeof(float)) == 0);
    {
      // On the creating thread the helper form changes nothing: the staging buffer is read into again.
      const weight_arena_scope same(&arena, weight_arena_scope::helper_thread_t{});
      weight_reader r2;
      CHECK(r2.read(mapped) == reinterpret_cast<const std::byte*>(got));
      auto w = allocate_weight(100);
      CHECK(arena.blocks() == 2);
    }
    // Nor after it: the arena is still current here, its staging buffer still this thread's.
    CHECK(current_weight_arena() == &arena);
    weight_reader r3;
    CHECK(r3.read(mapped) == reinterpret_cast<const std::byte*>(got));
    {
      // A helper scope inside a scope of none (placement by measure's candidates) restores none, then the arena.
      const weight_arena_scope none(nullptr);
      {
        const weight_arena_scope shared(&arena, weight_arena_scope::helper_thread_t{});
        CHECK(current_weight_arena() == &arena);
        weight_reader own;
        CHECK(own.read(mapped) != reinterpret_cast<const std::byte*>(got));
      }
      CHECK(current_weight_arena() == nullptr);
    }
    CHECK(current_weight_arena() == &arena);
  }
  // A tensor that is not file-backed, or a small one, is read in place.
  tensor own = tensor::uninitialized(element_type::float32, sizes);
  weight_reader r;
  CHECK(r.read(own) == own.data());
  const std::int64_t few[] = {4};
  tensor small = tensor::borrow_file(element_type::float32, few, const_cast<std::byte*>(base), *f);
  CHECK(r.read(small) == base);

  // Once the mapping is gone its range is no longer known.
  const void* was = base;
  mapped = tensor();
  small = tensor();
  f = Status(errc::fail, "released");
  CHECK_FALSE(read_mapped(was, 16, out.data()));
}

TEST_CASE("a create's first MiB of weights takes ordinary allocations, then chunks") {
  weight_arena arena;
  auto a = arena.allocate(1000);
  auto b = arena.allocate(100000);
  CHECK(arena.chunks() == 0);
  CHECK(arena.blocks() == 2);
  auto c = arena.allocate(weight_arena::small_limit);  // past the first MiB
  CHECK(arena.chunks() == 1);
  auto d = arena.allocate(10);  // once there is a chunk, small blocks come from it
  CHECK(arena.chunks() == 1);
  CHECK(arena.blocks() == 4);
  // The chunk's blocks follow one another.
  CHECK(static_cast<std::byte*>(d.get()) == static_cast<std::byte*>(c.get()) + weight_arena::small_limit);
  for (auto* p : {a.get(), b.get(), c.get(), d.get()}) CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
}

TEST_CASE("a model with a file per tensor keeps at most 64 of them open") {
  test::temp_dir dir;
  std::vector<std::shared_ptr<mapped_file>> files;
  int kept = 0;
  for (int i = 0; i < 80; ++i) {
    const auto p = dir / ("t" + std::to_string(i) + ".bin");
    test::write_file(p, "x");
    std::filesystem::resize_file(p, std::size_t{1} << 20);  // sparse: 1 MiB without writing it
    auto f = mapped_file::open(p, false, true);
    REQUIRE(f.has_value());
    if (enable_bulk_reads(*f)) ++kept;
    else CHECK((*f)->descriptor() == -1);
    files.push_back(*f);
  }
  CHECK(kept == 64);
  // The first and the last are read either way: in bulk, or by the caller through the mapping.
  unsigned char b[2] = {};
  CHECK(read_mapped(files.front()->data(), 2, b));
  CHECK(b[0] == 'x');
  CHECK_FALSE(read_mapped(files.back()->data(), 2, b));
  CHECK(static_cast<unsigned char>(files.back()->data()[0]) == 'x');
  // Once files are gone their places go to others.
  files.clear();
  auto again = mapped_file::open(dir / "t0.bin", false, true);
  REQUIRE(again.has_value());
  CHECK(enable_bulk_reads(*again));
}

#if defined(__linux__)
TEST_CASE("released huge chunks are kept for reuse up to the limit, best fit, and given back at 0") {
  auto& cache = detail::huge_chunk_cache::get();
  const std::size_t mib = std::size_t{1} << 20;
  set_weight_memory_cache_limit(0);
  CHECK(weight_memory_cached_bytes() == 0);
  set_weight_memory_cache_limit(16 * mib);
  CHECK(cache.limit() == 16 * mib);

  auto a = detail::map_huge_chunk(8 * mib);
  std::byte* const at = a.get();
  std::memset(at, 0x5A, 8 * mib);
  a.reset();
  CHECK(weight_memory_cached_bytes() == 8 * mib);
  // A request rounding up to the same 8 MiB gets that chunk back (mapped, no fault to take), and the cache is empty.
  auto b = detail::map_huge_chunk(7 * mib + 1);
  CHECK(b.get() == at);
  CHECK(weight_memory_cached_bytes() == 0);
  b.reset();

  // A kept chunk over twice the request is not cut down for it (the next create's same-sized request would miss).
  auto c = detail::map_huge_chunk(2 * mib);
  CHECK(c.get() != at);
  CHECK(weight_memory_cached_bytes() == 8 * mib);
  std::byte* const small_at = c.get();
  c.reset();
  CHECK(weight_memory_cached_bytes() == 10 * mib);
  // Best fit among those kept: the 2 MiB chunk serves a 2 MiB request; the 8 MiB one a 5 MiB request (whole).
  auto d = detail::map_huge_chunk(2 * mib);
  CHECK(d.get() == small_at);
  auto e = detail::map_huge_chunk(5 * mib);
  CHECK(e.get() == at);
  CHECK(weight_memory_cached_bytes() == 0);
  d.reset();
  e.reset();
  CHECK(weight_memory_cached_bytes() == 10 * mib);

  // Beyond the limit a released chunk is unmapped, not kept.
  {
    auto big = detail::map_huge_chunk(12 * mib);
    big.get()[12 * mib - 1] = std::byte{1};
  }
  CHECK(weight_memory_cached_bytes() == 10 * mib);
  // Poisoned for tests: every kept byte 0xFF.
  cache.poison_for_tests();
  auto f = detail::map_huge_chunk(2 * mib);
  CHECK(f.get() == small_at);
  CHECK(static_cast<unsigned char>(f.get()[0]) == 0xFF);
  CHECK(static_cast<unsigned char>(f.get()[2 * mib - 1]) == 0xFF);
  f.reset();
  // Lowering the limit unmaps what is kept beyond it; 0 keeps nothing, and a release is then unmapped at once.
  set_weight_memory_cache_limit(2 * mib);
  CHECK(weight_memory_cached_bytes() <= 2 * mib);
  set_weight_memory_cache_limit(0);
  CHECK(weight_memory_cached_bytes() == 0);
  (void)detail::map_huge_chunk(2 * mib);
  CHECK(weight_memory_cached_bytes() == 0);
  set_weight_memory_cache_limit(256 * mib);
}
#endif
