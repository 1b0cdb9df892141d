#pragma once
/// @file ep_context_binary.hpp
/// @brief The EP context binary: what a provider compiled (one or more graphs, each with the provider's own payload)
/// and the tensors those graphs use, each stored once by content, in a file (`[model]_[ep].bin`, EPContext
/// `embed_mode` 0) or inside an EPContext node (`embed_mode` 1). Everything in it is untrusted when read back: a
/// binary is verified completely (header, sizes, the flatbuffers verifier, every offset, and a hash of every byte after
/// the header, which covers the tensors) before anything in it is used, and every failure is `invalid_graph` naming the binary and saying what
/// was expected and what was found.
///
/// Layout (little-endian):
///   bytes 0-63   header: magic "EPSTKCTX", format version (u32), reserved (u32), flatbuffer offset and size,
///                data-section offset and size (u64 each), XXH3-64 of every byte after the header, xxhash64 of the
///                header's first 56 bytes;
///   then         the flatbuffer (schema/ep_context.fbs, file identifier "EPCX"): provider, SDK version, hardware
///                architecture, graphs (name, inputs, outputs, payload, tensor indices), tensors (name, element type,
///                shape, offset, length, xxhash64: the content identity de-duplication uses);
///   then         the data section, 64-byte aligned in the file, each tensor at a 64-byte aligned offset in it.
/// A file is memory-mapped and its tensors are read in place, never copied. Files are written to a temporary name
/// beside the target and renamed, so a crash never leaves a partial binary.

#include <epstack/element_type.hpp>
#include <epstack/errors.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace epstack {

/// The format version this build writes and reads.
inline constexpr std::uint32_t ep_context_format_version = 3;

/// A tensor of a context binary, read in place.
struct ep_context_tensor {
  std::string name;
  element_type type = element_type::undefined;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> data;
  std::uint64_t hash = 0;  ///< xxhash64 of `data`
};

/// A compiled graph of a context binary.
struct ep_context_graph {
  std::string name;
  std::vector<std::string> inputs, outputs;
  std::span<const std::byte> payload;  ///< the provider's record, read in place
  std::vector<std::uint32_t> tensors;  ///< indices into ep_context_binary::tensors()
};

/// @brief Collects graphs and tensors and writes a context binary. Output bytes depend only on what was added, in
/// which order: the same additions give byte-identical binaries.
class ep_context_builder {
 public:
  ep_context_builder(std::string provider, std::string sdk_version, std::string hardware_architecture);

  /// Adds a tensor and returns its index; a tensor with the same element type, shape and bytes as one added before
  /// is not stored again (its index is returned), whatever its name.
  std::uint32_t add_tensor(std::string_view name, element_type type, std::span<const std::int64_t> shape,
                           std::span<const std::byte> bytes);
  /// Adds a compiled graph. invalid_argument for a duplicate name or a tensor index out of range.
  Status add_graph(std::string name, std::vector<std::string> inputs, std::vector<std::string> outputs,
                   std::vector<std::byte> payload, std::vector<std::uint32_t> tensors);

  [[nodiscard]] std::size_t tensor_count() const noexcept { return tensors_.size(); }
  [[nodiscard]] std::size_t graph_count() const noexcept { return graphs_.size(); }
  /// Bytes of tensor data stored (after de-duplication).
  [[nodiscard]] std::uint64_t tensor_bytes() const noexcept;

  /// The whole binary in memory (for embed_mode 1).
  [[nodiscard]] Result<std::vector<std::byte>> serialize() const;
  /// Writes the binary to `path` through a temporary file in the same folder, renamed when complete. An existing
  /// file is refused (invalid_argument) unless `overwrite`.
  [[nodiscard]] Status write(const std::filesystem::path& path, bool overwrite = false) const;

 private:
  struct tensor_rec {
    std::string name;
    element_type type;
    std::vector<std::int64_t> shape;
    std::vector<std::byte> bytes;
    std::uint64_t hash;
  };
  struct graph_rec {
    std::string name;
    std::vector<std::string> inputs, outputs;
    std::vector<std::byte> payload;
    std::vector<std::uint32_t> tensors;
  };
  std::string provider_, sdk_version_, hardware_;
  std::vector<tensor_rec> tensors_;
  std::vector<graph_rec> graphs_;
};

/// @brief A verified context binary, read in place (memory-mapped from a file, or bytes its owner keeps alive).
class ep_context_binary {
 public:
  /// Maps `path` and verifies it, hashing on up to `verify_threads` threads. invalid_graph for a missing or
  /// non-regular file and for every defect.
  [[nodiscard]] static Result<ep_context_binary> open(const std::filesystem::path& path, unsigned verify_threads = 1);
  /// Verifies `bytes`, kept alive by `owner` (an EPContext attribute's payload); `what` names it in errors.
  [[nodiscard]] static Result<ep_context_binary> from_bytes(std::span<const std::byte> bytes,
                                                            std::shared_ptr<const void> owner,
                                                            std::string what = "embedded EP context",
                                                            unsigned verify_threads = 1);

  [[nodiscard]] std::uint32_t format_version() const noexcept { return version_; }
  [[nodiscard]] const std::string& provider() const noexcept { return provider_; }
  [[nodiscard]] const std::string& sdk_version() const noexcept { return sdk_version_; }
  [[nodiscard]] const std::string& hardware_architecture() const noexcept { return hardware_; }
  [[nodiscard]] const std::vector<ep_context_graph>& graphs() const noexcept { return graphs_; }
  [[nodiscard]] const std::vector<ep_context_tensor>& tensors() const noexcept { return tensors_; }
  /// The graph of that name, or null.
  [[nodiscard]] const ep_context_graph* find_graph(std::string_view name) const noexcept;
  /// Where the binary came from (its path, or the `what` given to from_bytes).
  [[nodiscard]] const std::string& origin() const noexcept { return origin_; }

 private:
  std::shared_ptr<const void> owner_;
  std::string origin_;
  std::uint32_t version_ = 0;
  std::string provider_, sdk_version_, hardware_;
  std::vector<ep_context_graph> graphs_;
  std::vector<ep_context_tensor> tensors_;
};

}  // namespace epstack
