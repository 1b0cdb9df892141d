#pragma once
/// @file context_binary.hpp
/// @brief The EP context binary: what a provider compiled (one or more graphs, each with the provider's own payload)
/// and the tensors those graphs use, each stored once by content, in a file (`[model]_[ep].bin`, EPContext
/// `embed_mode` 0) or inside an EPContext node (`embed_mode` 1). Everything in it is untrusted when read back, and
/// every defect is `invalid_graph` naming the binary and saying what was expected and what was found.
///
/// Verification comes in two parts, so that loading a context does not have to read every byte of its weights:
/// - opening checks the structure, completely: header and its hash, section sizes, a hash of the table (the
///   flatbuffer: graphs, payloads, tensor records with their hashes), the flatbuffers verifier, every tensor's type,
///   shape, offset and length. Nothing of a tensor's bytes is read.
/// - each tensor's bytes are verified against the XXH3-64 hash its record holds before they are first used
///   (`verify_tensors`, `verify_bytes`, `verify_all`): once per binary, whichever session or thread asks first.
///   Providers that restore from a binary either verify what they read themselves (`ep_context_provider`'s
///   `verifies_context_tensors`) or get every tensor of their graph verified before `restore`.
/// The hashes guard against damage (truncation, corruption, mixed-up files); memory safety against crafted input
/// comes from the structural checks, which do not depend on them.
///
/// Layout (little-endian):
///   bytes 0-127  header: magic "EPSTKCTX", format version (u32), reserved (u32), flatbuffer offset and size,
///                data-section offset and size (u64 each), XXH3-64 of the bytes from the end of the header to the
///                data section (the table: the flatbuffer and its padding, checked at open), the whole-file hash
///                (XXH3-64 over the XXH3-64 of each 8 MiB chunk after the header; checked by verify_all), zeros,
///                and at 120 the xxhash64 of the header's first 120 bytes;
///   then         the flatbuffer (schema/ep_context.fbs, file identifier "EPCX"): provider, SDK version, hardware
///                architecture, graphs (name, inputs, outputs, payload, tensor indices), tensors (name, element type,
///                shape, offset, length, XXH3-64 of the bytes: what verification and de-duplication compare);
///   then         the data section, 64-byte aligned in the file, each tensor at a 64-byte aligned offset in it,
///                zeros between tensors.
/// A file is memory-mapped and its tensors are read in place, never copied. Files are written to a temporary name
/// beside the target and renamed, so a crash never leaves a partial binary.
///
/// Weightless contexts (ONNX Runtime's `ep.enable_weightless_mode` 2, "all"): a builder given a `weight_source` stores
/// a tensor whose bytes are an initializer of the source model as a reference (the initializer's name, its size and
/// hash) and not its bytes. Such a binary is `weightless()`; `bind_weights` gives a copy that reads those tensors from
/// the source model in place, after checking each against its recorded size and hash (a changed weight is invalid_graph
/// naming it, never a silent mismatch). Tensors the provider derived (folded, laid out) are stored as usual.

#include <epstack/core/element_type.hpp>
#include <epstack/core/errors.hpp>

#include <atomic>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace epstack {

/// The format version this build writes and reads.
inline constexpr std::uint32_t ep_context_format_version = 5;

/// A tensor of a context binary, read in place.
struct ep_context_tensor {
  std::string name;
  element_type type = element_type::undefined;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> data;
  std::uint64_t hash = 0;  ///< XXH3-64 of `data`, as recorded (checked by ep_context_binary::verify_*)
  /// Weightless contexts: the source model's initializer that holds the bytes (empty: they are in the binary). `data`
  /// is empty until `ep_context_binary::bind_weights`; `length` is the bytes' size either way.
  std::string source;
  bool derived = false;  ///< `source` names an initializer of the source model after graph optimisation
  std::uint64_t length = 0;
};

/// The hash a context binary records for a tensor's bytes (XXH3-64).
[[nodiscard]] std::uint64_t ep_context_hash(std::span<const std::byte> bytes) noexcept;

/// A weight of the source model a weightless context refers to.
struct weight_ref {
  std::string name;      ///< the initializer's name
  bool derived = false;  ///< an initializer of the source model as optimised (a load optimises it again)
};
/// For a weightless context: the source model's initializer whose element type and bytes are exactly these (`hash`
/// is their ep_context_hash), or nullopt when none is.
using weight_source =
    std::function<std::optional<weight_ref>(element_type type, std::span<const std::byte> bytes, std::uint64_t hash)>;

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

  /// Makes the binary weightless: tensors that `source` names an initializer for are stored as references to it.
  void set_weight_source(weight_source source) { source_ = std::move(source); }
  /// Whether tensors are looked up in a source model (providers then store nothing they could derive at load, such
  /// as weights laid out for the hardware).
  [[nodiscard]] bool weightless() const noexcept { return static_cast<bool>(source_); }
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
  /// Bytes of the tensors stored as references to the source model's initializers (weightless).
  [[nodiscard]] std::uint64_t referenced_bytes() const noexcept;

  /// What the builder holds at one moment: `rollback` returns to it, dropping every tensor and graph added since
  /// (a shared builder keeps nothing of a session that failed half-way).
  struct checkpoint {
    std::size_t tensors = 0, graphs = 0;
  };
  [[nodiscard]] checkpoint mark() const noexcept { return {tensors_.size(), graphs_.size()}; }
  void rollback(checkpoint c) {
    if (c.tensors < tensors_.size()) tensors_.resize(c.tensors);
    if (c.graphs < graphs_.size()) graphs_.resize(c.graphs);
  }

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
    std::string source;  ///< weightless: the source initializer (bytes empty)
    bool derived = false;
    std::uint64_t length = 0;
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
  weight_source source_;
};

/// @brief A context binary whose structure is verified, read in place (memory-mapped from a file, or bytes its owner
/// keeps alive); its tensors' bytes are verified on demand (see the file comment). Thread-safe.
class ep_context_binary {
 public:
  /// Maps `path` and verifies its structure. invalid_graph for a missing or non-regular file and for every defect.
  [[nodiscard]] static Result<ep_context_binary> open(const std::filesystem::path& path);
  /// Verifies the structure of `bytes`, kept alive by `owner` (an EPContext attribute's payload); `what` names it in
  /// errors.
  [[nodiscard]] static Result<ep_context_binary> from_bytes(std::span<const std::byte> bytes,
                                                            std::shared_ptr<const void> owner,
                                                            std::string what = "embedded EP context");

  [[nodiscard]] std::uint32_t format_version() const noexcept { return version_; }
  [[nodiscard]] const std::string& provider() const noexcept { return provider_; }
  [[nodiscard]] const std::string& sdk_version() const noexcept { return sdk_version_; }
  [[nodiscard]] const std::string& hardware_architecture() const noexcept { return hardware_; }
  [[nodiscard]] const std::vector<ep_context_graph>& graphs() const noexcept { return graphs_; }
  [[nodiscard]] const std::vector<ep_context_tensor>& tensors() const noexcept { return tensors_; }
  /// The graph of that name, or null.
  [[nodiscard]] const ep_context_graph* find_graph(std::string_view name) const noexcept {
    for (const auto& g : graphs_)
      if (g.name == name) return &g;
    return nullptr;
  }
  /// Where the binary came from (its path, or the `what` given to from_bytes).
  [[nodiscard]] const std::string& origin() const noexcept { return origin_; }

  /// Verifies the bytes of tensors `indices` against their hashes, hashing on up to `threads` threads. A tensor that
  /// verified once is not hashed again (by any caller); invalid_graph naming the binary and the first damaged
  /// tensor, or an index out of range.
  [[nodiscard]] Status verify_tensors(std::span<const std::uint32_t> indices, unsigned threads = 1) const;
  /// Verifies every tensor whose bytes overlap [p, p + n); memory outside this binary's data section is not its
  /// concern (ok).
  [[nodiscard]] Status verify_bytes(const void* p, std::size_t n) const;
  /// Verifies every tensor, that the data section holds nothing but tensors and zeros between them, and the
  /// whole-file hash: every byte, every hash (of a weightless binary not yet bound: every byte it holds).
  [[nodiscard]] Status verify_all(unsigned threads = 1) const;
  /// Whether tensor `i`'s bytes have been verified.
  [[nodiscard]] bool verified(std::uint32_t i) const noexcept;
  /// The indices of the tensors whose bytes overlap [p, p + n) (none for memory outside the data section).
  [[nodiscard]] std::vector<std::uint32_t> tensors_in(const void* p, std::size_t n) const;

  /// Whether some tensor is a reference to the source model's initializers (a weightless context).
  [[nodiscard]] bool weightless() const noexcept { return weightless_; }
  /// Whether every such reference is bound to bytes (true for a binary that is not weightless).
  [[nodiscard]] bool bound() const noexcept { return !weightless_ || bound_; }
  /// The source model's bytes of a referenced tensor: `t.length` bytes, or an error naming what is wrong.
  using weight_finder = std::function<Result<std::span<const std::byte>>(const ep_context_tensor& t)>;
  /// A copy of this weightless binary whose referenced tensors read the bytes `find` returns (kept alive by `keep`),
  /// each checked against its recorded size and hash first, on up to `threads` threads: invalid_graph naming the
  /// tensor and its source initializer when one is missing or differs from the weight the context was compiled with.
  [[nodiscard]] Result<ep_context_binary> bind_weights(const weight_finder& find, std::shared_ptr<const void> keep,
                                                       unsigned threads = 1) const;

 private:
  std::shared_ptr<const void> owner_;
  std::shared_ptr<const void> weights_owner_;  ///< the source model of a bound weightless binary
  bool weightless_ = false, bound_ = false;
  std::string origin_;
  std::uint32_t version_ = 0;
  std::string provider_, sdk_version_, hardware_;
  std::vector<ep_context_graph> graphs_;
  std::vector<ep_context_tensor> tensors_;
  std::span<const std::byte> data_;   ///< the data section
  std::span<const std::byte> whole_;  ///< every byte, header included
  std::uint64_t file_hash_ = 0;
  /// Per tensor: 1 once its bytes verified. Shared by copies (they read the same bytes).
  std::shared_ptr<std::atomic<std::uint8_t>[]> verified_;
};

}  // namespace epstack
