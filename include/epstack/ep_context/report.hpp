#pragma once
/// @file report.hpp
/// @brief What a session did with EP contexts (`session::ep_context()`).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace epstack {

/// @brief What a session did with EP contexts: what it loaded from an EPContext model, or what it generated
/// (`ep.context_enable`).
struct ep_context_report {
  std::size_t nodes_loaded = 0;        ///< EPContext nodes restored (nothing compiled for them)
  std::vector<std::string> binaries_read;  ///< context binaries opened from files (not those taken from the workspace)
  std::size_t graphs_from_workspace = 0;   ///< graphs taken from the shared workspace (ep.share_ep_contexts)
  std::filesystem::path model_written;     ///< the `_ctx.onnx` written (empty: none)
  std::vector<std::filesystem::path> binaries_written;
  std::size_t nodes_written = 0;       ///< EPContext nodes in the model written
  std::uint64_t weight_bytes_stored = 0;      ///< tensor bytes written into the context binaries
  std::uint64_t weight_bytes_referenced = 0;  ///< weightless: bytes left in the source model, referenced by name
  std::filesystem::path source_model_read;    ///< loading a weightless context: the source model read (or "<buffer>")
  std::string cache_entry;   ///< epstack.cache_dir: the entry used or written (empty: no cache)
  bool cache_hit = false;    ///< the session was restored from that entry (else compiled, and the entry written)
  std::vector<std::string> warnings;   ///< e.g. generation enabled but nothing compiled
};

/// @brief How a compiled (EPContext) model suits a provider of the stack, in ONNX Runtime's terms
/// (`OrtCompiledModelCompatibility`).
enum class compiled_model_compatibility : std::uint8_t {
  ep_not_applicable,                  ///< the model holds nothing compiled by this provider
  ep_supported_optimal,               ///< same SDK version, compiled for this machine's hardware
  ep_supported_prefer_recompilation,  ///< runs here, but recompiling would serve this machine better
  ep_unsupported,                     ///< another SDK version, or hardware this machine does not have
};
/// "not-applicable", "supported-optimal", "supported-prefer-recompilation", "unsupported".
[[nodiscard]] constexpr std::string_view to_string(compiled_model_compatibility c) noexcept {
  switch (c) {
    case compiled_model_compatibility::ep_not_applicable: return "not-applicable";
    case compiled_model_compatibility::ep_supported_optimal: return "supported-optimal";
    case compiled_model_compatibility::ep_supported_prefer_recompilation: return "supported-prefer-recompilation";
    case compiled_model_compatibility::ep_unsupported: return "unsupported";
  }
  return "?";
}

/// The model metadata key prefix of a provider's compatibility string (ONNX Runtime's
/// `kOrtModelMetadata_EpCompatibilityInfoPrefix`): `ep_compatibility_info.<provider type>`, written when an EPContext
/// model is generated. epstack's strings read `<provider type>;sdk_version=<v>;hardware_architecture=<isa>`.
inline constexpr std::string_view ep_compatibility_info_prefix = "ep_compatibility_info.";

/// @brief One provider's verdict on a compiled model.
struct ep_compatibility {
  std::string provider;                 ///< the provider's type key
  compiled_model_compatibility value = compiled_model_compatibility::ep_not_applicable;
  std::string info;                     ///< the compatibility string the model records (empty: none)
  std::string reason;                   ///< why, in words
};

}  // namespace epstack
