#pragma once
/// @file prepare.hpp
/// @brief A deployment model made ready to run on a provider stack (session_core::assemble), as
/// `session<P...>::create_deployed` does. Nothing is optimised or partitioned again: every node runs on the
/// provider the file names, the EPContext nodes' partitions are restored from their binaries, and every other node is
/// compiled by its provider (the CPU provider's kernels). Library epstack::deploy: links neither protobuf nor onnx.

#include <epstack/deploy/deployment.hpp>
#include <epstack/runtime/session_core.hpp>

#include <memory>
#include <string>

namespace epstack {

/// @brief The session core of deployment `d` on `providers`. Errors: not_implemented naming the node when the stack
/// lacks its provider or the provider lacks its kernel (a selective CPU provider); invalid_graph naming the node for a
/// context binary that does not open, was made by another provider or SDK, for other hardware, or lacks the node's
/// graph; invalid_argument for session options that would change a compiled model (free dimension overrides).
[[nodiscard]] Result<std::shared_ptr<const session_core>> assemble_deployment(deployment d,
                                                                              std::vector<provider_binding> providers,
                                                                              const session_options& options);

}  // namespace epstack
