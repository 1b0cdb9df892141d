#pragma once
// The layout epstack's two binary formats share, the EP context binary (context_binary.cpp) and the deployment model
// (src/deploy): a 128-byte header, a flatbuffer table, and a 64-byte aligned data section read in place. Little-endian:
//   bytes 0-7     magic (8 characters, one per format)
//   8-11, 12-15   format version (u32), reserved (0)
//   16-23, 24-31  flatbuffer offset (128) and size
//   32-39, 40-47  data-section offset (a multiple of 64) and size (to the end of the file)
//   48-55         XXH3-64 of the bytes from the end of the header to the data section (the table and its padding)
//   56-63         the whole-file hash: XXH3-64 over the XXH3-64 of each 8 MiB chunk after the header
//   64-119        zeros
//   120-127       XXH64 of bytes 0-119
// Everything in such a file is untrusted: `open_sectioned` checks the header, its hash, that the sections fit the
// file and the table's hash before anything reads the table. Private to epstack::provider and epstack::deploy.
#include <epstack/core/errors.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace epstack::detail {

inline constexpr std::size_t sectioned_header_size = 128;
inline constexpr std::size_t sectioned_alignment = 64;
using sectioned_magic = std::array<char, 8>;

/// XXH3-64: the hash both formats record for their tensors' bytes.
[[nodiscard]] std::uint64_t content_hash(std::span<const std::byte> bytes) noexcept;
/// The whole-file hash of the bytes after the header, hashing 8 MiB chunks on up to `threads` threads.
[[nodiscard]] std::uint64_t sectioned_file_hash(std::span<const std::byte> after_header, unsigned threads = 1);
/// 16 lowercase hex digits, for messages.
[[nodiscard]] std::string hex64(std::uint64_t v);
[[nodiscard]] constexpr std::uint64_t align64(std::uint64_t x) noexcept {
  return (x + sectioned_alignment - 1) / sectioned_alignment * sectioned_alignment;
}

/// @brief A whole file: the header, `table` (a finished flatbuffer), zeros to the data section, and `data_size`
/// zero bytes of data section that `fill` writes into (tensors at their 64-byte aligned offsets); then the hashes.
[[nodiscard]] std::vector<std::byte> make_sectioned(const sectioned_magic& magic, std::uint32_t version,
                                                    std::span<const std::uint8_t> table, std::uint64_t data_size,
                                                    const std::function<void(std::byte* data)>& fill);

/// The sections of a file whose header checked out.
struct sectioned_view {
  std::uint32_t version = 0;
  std::span<const std::byte> table;  ///< the flatbuffer (not yet verified: the caller runs the flatbuffers verifier)
  std::span<const std::byte> data;   ///< the data section
  std::uint64_t file_hash = 0;       ///< recorded whole-file hash
};
/// @brief Checks the header of `bytes` (magic, header hash, a version `version_ok` accepts, sections inside the file,
/// the table's hash). invalid_graph "`what`: ..." saying what was expected and found; `format` names the format
/// ("an epstack EP context binary") and `versions` the versions read, for the messages.
[[nodiscard]] Result<sectioned_view> open_sectioned(std::span<const std::byte> bytes, const sectioned_magic& magic,
                                                    const std::string& what, const std::string& format,
                                                    const std::function<bool(std::uint32_t)>& version_ok,
                                                    const std::string& versions);

}  // namespace epstack::detail
