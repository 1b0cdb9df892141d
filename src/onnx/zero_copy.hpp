#pragma once
// Zero-copy loading of weights embedded in a model file. Protobuf copies every `raw_data` field it parses; for large
// initializers that is the whole model, copied once more. Before parsing, the serialized ModelProto is rewritten
// (re-encoding only the lengths of the enclosing messages) so that each large initializer of the main graph becomes
// EXTERNAL data pointing at its own bytes inside the model file; the loader then maps those bytes, as it maps any
// external data. Private to the epstack::onnx library.
#include <cstddef>
#include <optional>
#include <span>
#include <string>

namespace epstack::detail {

/// @brief The ModelProto `bytes` (the whole model file, named `self_name` in its folder) with the raw_data of every
/// main-graph initializer of at least `threshold` bytes turned into external data in that same file; nullopt when
/// nothing is rewritten (or the bytes are not in a form it handles: the caller then parses them as they are).
std::optional<std::string> externalize_raw_data(std::span<const std::byte> bytes, const std::string& self_name,
                                                std::size_t threshold);

}  // namespace epstack::detail
