// The header, hashes and sections shared by the EP context binary and the deployment model (sectioned_file.hpp).
#include "sectioned_file.hpp"

#include <epstack/core/helper_threads.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace epstack::detail {

namespace {
constexpr std::size_t header_hash_at = 120;
constexpr std::size_t hash_chunk = std::size_t{8} << 20;

void put64(std::byte* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}
void put32(std::byte* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}
std::uint64_t get64(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint64_t>(p[i]);
  return v;
}
std::uint32_t get32(const std::byte* p) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<std::uint32_t>(p[i]);
  return v;
}
std::uint64_t header_hash_of(std::span<const std::byte> b) { return XXH64(b.data(), b.size(), 0); }
}  // namespace

std::uint64_t content_hash(std::span<const std::byte> b) noexcept { return XXH3_64bits(b.data(), b.size()); }

std::uint64_t sectioned_file_hash(std::span<const std::byte> b, unsigned threads) {
  const std::size_t n = (b.size() + hash_chunk - 1) / hash_chunk;
  std::vector<std::uint64_t> h(n);
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) {
      const auto c = b.subspan(i * hash_chunk, std::min(hash_chunk, b.size() - i * hash_chunk));
      h[i] = XXH3_64bits(c.data(), c.size());
    }
  };
  run_with_helpers(std::min<std::size_t>(threads, n), work);
  std::vector<std::byte> list(n * 8);
  for (std::size_t i = 0; i < n; ++i) put64(list.data() + 8 * i, h[i]);
  return XXH3_64bits(list.data(), list.size());
}

std::string hex64(std::uint64_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = digits[v & 0xf];
  return s;
}

std::vector<std::byte> make_sectioned(const sectioned_magic& magic, std::uint32_t version, std::span<const std::uint8_t> table,
                                      std::uint64_t data_size, const std::function<void(std::byte* data)>& fill) {
  const std::uint64_t data_offset = align64(sectioned_header_size + table.size());
  std::vector<std::byte> out(data_offset + data_size);
  if (!table.empty()) std::memcpy(out.data() + sectioned_header_size, table.data(), table.size());
  if (fill) fill(out.data() + data_offset);
  std::memcpy(out.data(), magic.data(), magic.size());
  put32(out.data() + 8, version);
  put32(out.data() + 12, 0);
  put64(out.data() + 16, sectioned_header_size);
  put64(out.data() + 24, table.size());
  put64(out.data() + 32, data_offset);
  put64(out.data() + 40, data_size);
  const std::span<const std::byte> all(out);
  put64(out.data() + 48, content_hash(all.subspan(sectioned_header_size, data_offset - sectioned_header_size)));
  put64(out.data() + 56, sectioned_file_hash(all.subspan(sectioned_header_size), 2));
  put64(out.data() + header_hash_at, header_hash_of(all.first(header_hash_at)));
  return out;
}

Result<sectioned_view> open_sectioned(std::span<const std::byte> bytes, const sectioned_magic& magic, const std::string& what,
                                      const std::string& format, const std::function<bool(std::uint32_t)>& version_ok,
                                      const std::string& versions) {
  const auto bad = [&](const std::string& msg) { return Status(errc::invalid_graph, what + ": " + msg); };
  if (bytes.size() < sectioned_header_size)
    return bad("truncated: " + std::to_string(bytes.size()) + " bytes, expected at least a " +
               std::to_string(sectioned_header_size) + "-byte header");
  const std::byte* p = bytes.data();
  if (std::memcmp(p, magic.data(), magic.size()) != 0)
    return bad("not " + format + " (expected magic " + std::string(magic.data(), magic.size()) + ")");
  if (get64(p + header_hash_at) != header_hash_of(bytes.first(header_hash_at)))
    return bad("corrupted header (its hash does not match)");
  sectioned_view v;
  v.version = get32(p + 8);
  if (!version_ok(v.version))
    return bad("format version " + std::to_string(v.version) + ", expected " + versions + " (this build reads those)");
  const std::uint64_t fb_off = get64(p + 16), fb_size = get64(p + 24), data_off = get64(p + 32), data_size = get64(p + 40);
  const std::uint64_t n = bytes.size();
  if (fb_off != sectioned_header_size || fb_size > n || fb_off + fb_size > n || data_off % sectioned_alignment != 0 ||
      data_off < fb_off + fb_size || data_off > n || data_size != n - data_off)
    return bad("sections do not fit the " + std::to_string(n) + "-byte file (flatbuffer " + std::to_string(fb_off) + "+" +
               std::to_string(fb_size) + ", data " + std::to_string(data_off) + "+" + std::to_string(data_size) +
               "): truncated or corrupted");
  const std::uint64_t want = get64(p + 48), got = content_hash(bytes.subspan(sectioned_header_size, data_off - sectioned_header_size));
  if (want != got) return bad("corrupted: the hash of its table is " + hex64(got) + ", expected " + hex64(want));
  v.table = bytes.subspan(fb_off, fb_size);
  v.data = bytes.subspan(data_off);
  v.file_hash = get64(p + 56);
  return v;
}

}  // namespace epstack::detail
