#pragma once
/// @file report.hpp
/// @brief What a session did with EP contexts (`session::ep_context()`).

#include <cstddef>
#include <filesystem>
#include <string>
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
  std::vector<std::string> warnings;   ///< e.g. generation enabled but nothing compiled
};

}  // namespace epstack
