#pragma once
/// @file deployment.hpp
/// @brief The deployment model (`model.deploy`): a model as a session prepared it (optimised, laid out, partitioned),
/// stored so that a program can run it without protobuf, without onnx and without the graph optimiser (library
/// epstack::deploy). Written by `compile_model` with `compile_format::deploy` (`epstack compile --format deploy`);
/// read by `session<P...>::create_deployed`.
///
/// The file (little-endian), in the layout of the EP context binary (provider/context_binary.hpp):
///   bytes 0-127  header: magic "EPSTKDPL", format version (u32), reserved (u32), table offset and size, data-section
///                offset and size (u64 each), XXH3-64 of the table, the whole-file hash, zeros, and at 120 the XXH64
///                of the header's first 120 bytes;
///   then         the table, a flatbuffer (schema/deploy.fbs, file identifier "EPSD"): IR version, opsets, metadata,
///                the stack's provider types, the graphs (the main graph first; control-flow bodies after it, each
///                used by one attribute), each with its values (name, type, initializer), inputs, outputs and nodes in
///                execution order (operator, domain, schema version, inputs, outputs, implicit inputs, attributes of
///                every ONNX kind, the provider that runs it, and for EPContext nodes the context binary); the tensors
///                (name, element type, shape, offset, length, XXH3-64 of the bytes);
///   then         the data section, 64-byte aligned, each tensor and each EP context binary at a 64-byte aligned
///                offset in it, zeros between them.
/// A file is memory-mapped and its initializers are read in place, never copied.
///
/// Everything in a deployment file is untrusted: opening checks the header and its hash, the table's hash, the
/// flatbuffers verifier, then every index, type, shape, offset and length before anything uses it, every tensor's
/// bytes against its hash, that every value a node reads is defined before it (the order is the execution order),
/// and that graphs form a tree; each EP context binary is verified as a file of its own when opened. Each defect is
/// invalid_graph naming the file and what was expected and found. Files are written under a temporary name and
/// renamed, so a crash never leaves a partial file.

#include <epstack/core/errors.hpp>
#include <epstack/core/session_options.hpp>
#include <epstack/ir/model.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace epstack {

/// The format version of deployment models this build writes and reads.
inline constexpr std::uint32_t deployment_format_version = 1;

/// The node metadata key that says which provider runs a node of a deployment model (its type key): written on every
/// node by the session that compiles one, and on every node of a model read back. (The same key as an EP context
/// model's recorded placement: `placement_metadata_key` in ep_context/attributes.hpp.)
inline constexpr std::string_view deployment_provider_key = "epstack.placement";

/// @brief A deployment model read back: the model, whose initializers borrow the file's bytes, and the EP context
/// binaries of its compiled partitions (by EPContext node name), which are bytes of the same file.
struct deployment {
  model m;
  std::vector<std::string> providers;  ///< type keys of the stack it was compiled on, in priority order
  std::map<std::string, std::span<const std::byte>, std::less<>> contexts;
  std::shared_ptr<const void> owner;   ///< keeps the bytes alive (the mapped file, or a copy of a buffer)
  std::string origin;                  ///< "deployment model '<path>'", for messages
};

/// True when `bytes` start as a deployment model does (its magic).
[[nodiscard]] bool is_deployment(std::span<const std::byte> bytes) noexcept;
/// True when the file at `path` starts as a deployment model does.
[[nodiscard]] bool is_deployment_file(const std::filesystem::path& path);

/// @brief Maps `path` and reads it, verified (see the file comment). no_such_file for a missing file.
[[nodiscard]] Result<deployment> open_deployment(const std::filesystem::path& path);
/// @brief Reads `bytes`, verified. `owner` keeps them alive for as long as the model is used (they are read in
/// place, and must be 64-byte aligned); `what` names them in errors.
[[nodiscard]] Result<deployment> read_deployment(std::span<const std::byte> bytes, std::shared_ptr<const void> owner,
                                                 std::string what = "deployment model");

/// @brief The deployment model of `m`. Every node of every graph names its provider in metadata
/// `deployment_provider_key`, whose type key is in `providers` (EPContext nodes may name it in their `source`
/// instead); the embedded binary of every EPContext node (embed_mode 1) goes into the data section. not_implemented
/// for what the format does not hold (sparse initializers); invalid_argument naming the node for a missing provider.
[[nodiscard]] Result<std::vector<std::byte>> serialize_deployment(const model& m, std::span<const std::string> providers);
/// @brief `serialize_deployment` written to `path` under a temporary name and renamed; an existing file is refused
/// (invalid_argument) unless `overwrite`.
[[nodiscard]] Status write_deployment(const model& m, std::span<const std::string> providers,
                                      const std::filesystem::path& path, bool overwrite = false);

}  // namespace epstack
