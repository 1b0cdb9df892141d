// libFuzzer target: bytes given to the EP context binary reader must give a verified binary or invalid_graph, never a
// crash, a hang or a read outside the bytes. Random bytes would never pass the header's hashes, so the input is the
// part after the header (its first 4 bytes choose where the flatbuffer ends) and the target writes a header with
// matching hashes: the verifier, the offsets and the per-tensor hashes behind them are what gets fuzzed.
// With EPSTACK_FUZZ_EXPECT_VALID=1 set, an input the reader refuses aborts: CI runs the seed so, to know that fuzzing
// starts from inputs that get past the header.
// With EPSTACK_FUZZ_SEED=FILE set, it first writes a valid input (two graphs, three tensors, one of them a weightless
// reference to a source model's initializer) to FILE, for a corpus. Weightless references are bound to bytes of the
// input's own length claims (`bind_weights`), so binding and its checks are fuzzed too.
#include <epstack/provider/context_binary.hpp>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace {

void put64(std::byte* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* seed = std::getenv("EPSTACK_FUZZ_SEED")) {
    epstack::ep_context_builder b("FuzzExecutionProvider", "1.0", "x86_64");
    std::vector<float> w(64, 0.5f), v(3, 2.0f);
    const std::vector<std::int64_t> s1{8, 8}, s2{3};
    const auto t0 = b.add_tensor("w", epstack::element_type::float32, s1, std::as_bytes(std::span(w)));
    const auto t1 = b.add_tensor("v", epstack::element_type::float32, s2, std::as_bytes(std::span(v)));
    // A weightless reference: the builder is told these bytes are initializer "src_u" of a source model.
    std::vector<float> u(5, 3.0f);
    const std::vector<std::int64_t> s3{5};
    b.set_weight_source([](epstack::element_type, std::span<const std::byte> bytes, std::uint64_t) {
      return bytes.size() == 20 ? std::optional<epstack::weight_ref>(epstack::weight_ref{"src_u", false}) : std::nullopt;
    });
    (void)b.add_tensor("u", epstack::element_type::float32, s3, std::as_bytes(std::span(u)));
    (void)b.add_graph("g0", {"x"}, {"y"}, {std::byte{1}, std::byte{2}}, {t0, t1});
    (void)b.add_graph("g1", {"x"}, {"z"}, {}, {t0, 2});
    auto bytes = b.serialize();
    if (bytes) {
      std::uint64_t fb = 0;
      for (int i = 7; i >= 0; --i) fb = (fb << 8) | static_cast<std::uint64_t>((*bytes)[24 + static_cast<std::size_t>(i)]);
      const auto fb32 = static_cast<std::uint32_t>(fb);
      std::ofstream f(seed, std::ios::binary);
      f.write(reinterpret_cast<const char*>(&fb32), 4);
      f.write(reinterpret_cast<const char*>(bytes->data() + 128), static_cast<std::streamsize>(bytes->size() - 128));
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  std::uint32_t fb_size = 0;
  std::memcpy(&fb_size, data, 4);
  const std::size_t rest = size - 4;
  fb_size = static_cast<std::uint32_t>(std::min<std::size_t>(fb_size, rest));
  constexpr std::size_t header = 128;
  const std::size_t data_off = (header + fb_size + 63) / 64 * 64;
  std::vector<std::byte> b(std::max(header + rest, data_off));
  std::memcpy(b.data() + header, data + 4, rest);
  const char magic[8] = {'E', 'P', 'S', 'T', 'K', 'C', 'T', 'X'};
  std::memcpy(b.data(), magic, 8);
  // The version this build reads (a fixed number here once made every input stop at the version check).
  for (int i = 0; i < 4; ++i)
    b[8 + static_cast<std::size_t>(i)] = static_cast<std::byte>((epstack::ep_context_format_version >> (8 * i)) & 0xff);
  put64(b.data() + 16, header);
  put64(b.data() + 24, fb_size);
  put64(b.data() + 32, data_off);
  put64(b.data() + 40, b.size() - data_off);
  put64(b.data() + 48, XXH3_64bits(b.data() + header, data_off - header));
  // The whole-file hash: XXH3-64 over the XXH3-64 (little-endian) of each 8 MiB chunk after the header.
  std::vector<std::byte> list;
  for (std::size_t at = header; at < b.size(); at += std::size_t{8} << 20) {
    std::byte h[8];
    put64(h, XXH3_64bits(b.data() + at, std::min(std::size_t{8} << 20, b.size() - at)));
    list.insert(list.end(), h, h + 8);
  }
  put64(b.data() + 56, XXH3_64bits(list.data(), list.size()));
  put64(b.data() + 120, XXH64(b.data(), 120, 0));
  auto r = epstack::ep_context_binary::from_bytes(b, nullptr, "fuzz input");
  static const bool expect_valid = std::getenv("EPSTACK_FUZZ_EXPECT_VALID") != nullptr;
  if (expect_valid && (!r || !r->verify_all())) std::abort();
  if (r) {
    std::uint64_t sum = 0;  // touch everything the reader hands out
    for (const auto& t : r->tensors())
      for (auto x : t.data) sum += static_cast<std::uint64_t>(x);
    for (const auto& g : r->graphs())
      for (auto x : g.payload) sum += static_cast<std::uint64_t>(x);
    if (sum == 0xdeadbeef) std::abort();
    // Tensor verification behind the structure (hashes per tensor, padding), on one thread and on two.
    (void)r->verify_all(size % 2 == 0 ? 1u : 2u);
    for (const auto& t : r->tensors()) (void)r->verify_bytes(t.data.data(), t.data.size());
    // Weightless references bound to a source that holds 3.0f values of each length asked (or refuses a huge one).
    if (r->weightless()) {
      auto source = std::make_shared<std::vector<float>>();
      const auto find = [&](const epstack::ep_context_tensor& t) -> epstack::Result<std::span<const std::byte>> {
        if (t.length > (std::uint64_t{1} << 20) || t.length % 4 != 0)
          return epstack::Status(epstack::errc::invalid_graph, "no such weight");
        source->assign(static_cast<std::size_t>(t.length / 4), 3.0f);
        return std::as_bytes(std::span<const float>(*source));
      };
      if (auto bound = r->bind_weights(find, source); bound) (void)bound->verify_all();
    }
  }
  return 0;
}
