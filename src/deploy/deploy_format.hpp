#pragma once
// What the deployment model's writer and reader share (deployment.hpp describes the file). Private to epstack::deploy.
#include "../provider/sectioned_file.hpp"

namespace epstack {

/// The deployment model's magic (the sectioned layout's first 8 bytes).
inline constexpr detail::sectioned_magic deploy_magic = {'E', 'P', 'S', 'T', 'K', 'D', 'P', 'L'};
/// How deep control-flow bodies may nest (a body of a body ...): deeper files are refused, so reading one never
/// recurses without bound.
inline constexpr int max_graph_depth = 64;

}  // namespace epstack
